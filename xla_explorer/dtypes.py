"""XLA's primitive types and their NumPy counterparts.

Every XLA element type (``pred``, ``s8`` ... ``u64``, ``f16``, ``bf16``, ``f32``, ``f64``,
``c64``, ``c128``, the f8 types of ml_dtypes, ``token``) maps to one NumPy dtype; the
classes (integral, floating, complex, ...) drive the dtype rules of the ops.
"""
import numpy as np

try:  # ml_dtypes is a core dependency; guard so a broken install still gives clear errors
    import ml_dtypes
except ImportError:  # pragma: no cover
    ml_dtypes = None

_NUMPY = {
    "pred": np.bool_, "s8": np.int8, "s16": np.int16, "s32": np.int32, "s64": np.int64,
    "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64,
    "f16": np.float16, "f32": np.float32, "f64": np.float64,
    "c64": np.complex64, "c128": np.complex128,
}
_ML = {
    "bf16": "bfloat16", "s4": "int4", "u4": "uint4", "s2": "int2", "u2": "uint2",
    "f8e4m3fn": "float8_e4m3fn", "f8e5m2": "float8_e5m2", "f8e4m3fnuz": "float8_e4m3fnuz",
    "f8e5m2fnuz": "float8_e5m2fnuz", "f8e4m3b11fnuz": "float8_e4m3b11fnuz",
    "f8e4m3": "float8_e4m3", "f8e3m4": "float8_e3m4", "f8e8m0fnu": "float8_e8m0fnu",
    "f4e2m1fn": "float4_e2m1fn",
}

DTYPES = {}
for _name, _t in _NUMPY.items():
    DTYPES[_name] = np.dtype(_t)
if ml_dtypes is not None:
    for _name, _attr in _ML.items():
        if hasattr(ml_dtypes, _attr):
            DTYPES[_name] = np.dtype(getattr(ml_dtypes, _attr))

#: element types that are not arrays of numbers
SPECIAL_TYPES = {"token", "tuple", "opaque"}
ALL_TYPES = set(DTYPES) | SPECIAL_TYPES

_BY_DTYPE = {dt: name for name, dt in DTYPES.items()}

SIGNED = {t for t in DTYPES if t[0] == "s"}
UNSIGNED = {t for t in DTYPES if t[0] == "u"}
INTEGRAL = SIGNED | UNSIGNED
FLOATING = {t for t in DTYPES if t[0] == "f" or t == "bf16"}
COMPLEX = {"c64", "c128"}
PRED = {"pred"}
NUMERIC = INTEGRAL | FLOATING | COMPLEX
#: the element types on which bitwise ops are defined
BITWISE = INTEGRAL | PRED


def check_type(name):
    if not isinstance(name, str) or name not in ALL_TYPES:
        from .errors import ShapeError, quote   # a ValueError, as before, and a project error
        raise ShapeError(f"unknown XLA element type {quote(name)}; "
                         f"known: {', '.join(sorted(ALL_TYPES))}")
    return name


def to_numpy(name):
    """The NumPy dtype of an XLA element type name (``"bf16"`` -> ml_dtypes.bfloat16)."""
    try:
        return DTYPES[name]
    except KeyError:
        raise ValueError(f"XLA element type {name!r} has no NumPy dtype") from None


def from_numpy(dtype):
    """The XLA element type name of a NumPy dtype (``np.float32`` -> ``"f32"``)."""
    dt = np.dtype(dtype)
    try:
        return _BY_DTYPE[dt]
    except KeyError:
        raise ValueError(f"NumPy dtype {dt} has no XLA element type") from None


_SUB_BYTE = {"s2": 2, "u2": 2, "s4": 4, "u4": 4, "f4e2m1fn": 4}


def bit_width(name):
    """Bits of one element as XLA counts them (pred: 8, as it is stored)."""
    return _SUB_BYTE.get(name) or to_numpy(name).itemsize * 8


def unsigned_of(name):
    """The unsigned integer type of the same width (for bit manipulation)."""
    return {1: "u8", 2: "u16", 4: "u32", 8: "u64"}[to_numpy(name).itemsize]


def is_float(name):
    return name in FLOATING


def is_complex(name):
    return name in COMPLEX


def is_integral(name):
    return name in INTEGRAL


def is_signed(name):
    return name in SIGNED


def is_unsigned(name):
    return name in UNSIGNED


def finfo(name):
    if ml_dtypes is not None:
        return ml_dtypes.finfo(to_numpy(name))
    return np.finfo(to_numpy(name))


def iinfo(name):
    if ml_dtypes is not None:
        return ml_dtypes.iinfo(to_numpy(name))
    return np.iinfo(to_numpy(name))


def complex_component(name):
    """``c64`` -> ``f32``, ``c128`` -> ``f64``."""
    return {"c64": "f32", "c128": "f64"}[name]
