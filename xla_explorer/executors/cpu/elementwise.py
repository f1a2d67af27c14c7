"""CPU kernels of the element-wise family, for what a fused loop does not compute.

Every element-wise op normally runs inside a fused loop (``executors/emit.py`` writes its
scalar code), so the executor asks for these kernels only when the fusion plan left an
instruction out of every loop:

- ``bitcast-convert``: the same bytes read as another type (with a width change a minor
  dimension appears or disappears): a view of the operand's buffer, no computation;
- the few cases an emitter refuses (``accepts``): complex ``tan``, ``tanh``, ``rsqrt`` and
  ``atan2`` (NumPy's C99 rules for infinities are long to port), ``reduce-precision`` and
  TOTALORDER ``compare`` on the fnuz f8 types (their bits are not ordered as f32's); any op
  on a type without a loop carrier (``f8e8m0fnu``, ``f4e2m1fn``); ``select`` of whole
  tuples.  These call the reference's NumPy function on the whole array (vectorised),
  which the status table notes as "numpy".
"""
import numpy as np

from ...ops import registry
from . import kernel


@kernel("bitcast-convert")
def bitcast_convert(operand, *, shape, new_element_type):
    """Reinterpret the bytes (little-endian: element k of a new minor dimension is the k-th
    lowest-addressed piece); a view of a contiguous operand."""
    x = np.ascontiguousarray(operand)
    if x.dtype.itemsize * 8 != _bits(x.dtype) or shape.dtype.itemsize * 8 != _bits(shape.dtype) or (
            np.dtype(shape.dtype) != x.dtype and np.bool_ in (shape.dtype.type, x.dtype.type)):   # (a pred is a bit)
        return registry.get("bitcast-convert").reference(operand, shape=shape, new_element_type=new_element_type)
    return x.reshape(-1).view(shape.dtype).reshape(shape.dims)


def _bits(dtype):
    from ... import dtypes
    return dtypes.bit_width(dtypes.from_numpy(dtype))


def _reference_kernel(opcode):
    opdef = registry.OPS[opcode]

    def run(*values, shape, **attrs):
        from ..reference import guard_reference
        guard_reference(opcode, values, shape, attrs)
        return opdef.reference(*values, shape=shape, **attrs)
    run.__name__ = run.__qualname__ = f"{opcode.replace('-', '_')}_numpy"
    run.__doc__ = f"{opdef.name} on the whole array with the reference's NumPy code (not fused)."
    return run


#: ops whose emitter refuses some operand types: the status table names them
_PARTLY_NUMPY = {"tan": "numpy (complex)", "tanh": "numpy (complex)", "rsqrt": "numpy (complex)",
                 "atan2": "numpy (complex)", "reduce-precision": "numpy (fnuz f8)",
                 "compare": "numpy (TOTALORDER fnuz f8)"}


def _register_fallbacks():
    registry.all_ops()  # every family registered
    for opcode in sorted(registry.CATEGORIES["elementwise"]):
        if opcode == "constant":
            continue
        kernel(opcode, note=_PARTLY_NUMPY.get(opcode))(_reference_kernel(opcode))


_register_fallbacks()


# -- flush to zero (fpenv), around kernels that compute without the fused loops' flushing ------
# ``fpenv.flush`` in NumPy passes (abs, compare, any, where) costs about ten times the
# kernels it wraps (a reduction of 4 MiB: 1 ms of flushing for 0.15 ms of reducing).  Here
# one vectorised scan of the bits tells whether anything is denormal (exponent bits zero,
# mantissa not): almost never, and then the value is returned as it is; otherwise a copy
# keeps the sign bit alone of every denormal (a zero of the same sign).

from numba import njit  # noqa: E402

from ... import dtypes, fpenv  # noqa: E402
from ..numba_setup import MOVE_PARALLEL_THRESHOLD  # noqa: E402

_opts = dict(cache=True, nogil=True)


# A value is denormal when its magnitude bits |b| (the sign bit cleared) lie in
# [1, mantissa]: |b| - 1, wrapping in the word (0 -> all ones), is below ``mantissa``.  So
# the scan is one minimum of |b| - 1 over the array, compared once at the end: a min
# vectorises into two instructions an element where the test of both fields took six
# (256 KiB: 15 -> 5.5 us, 4 MiB: 202 -> 82 us in one thread).  One function per word type,
# every step cast back to it (Numba widens narrow unsigned arithmetic to 64 bits, which
# would neither wrap nor vectorise as wide).

@njit(**_opts)
def _min_magnitude32(bits):
    m = np.uint32(0xFFFFFFFF)
    for i in range(bits.shape[0]):
        m = min(m, np.uint32(np.uint32(bits[i] & np.uint32(0x7FFFFFFF)) - np.uint32(1)))
    return m


@njit(**_opts)
def _min_magnitude16(bits):
    m = np.uint16(0xFFFF)
    for i in range(bits.shape[0]):
        m = min(m, np.uint16(np.uint16(bits[i] & np.uint16(0x7FFF)) - np.uint16(1)))
    return m


@njit(**_opts)
def _min_magnitude64(bits):
    m = np.uint64(0xFFFFFFFFFFFFFFFF)
    for i in range(bits.shape[0]):
        m = min(m, np.uint64(np.uint64(bits[i] & np.uint64(0x7FFFFFFFFFFFFFFF)) - np.uint64(1)))
    return m


@njit(**_opts)
def _any_denormal(bits, exponent, mantissa):
    """Whether a denormal's bits are among ``bits`` (uint16 / uint32 / uint64 words with the
    float's exponent and mantissa masks)."""
    if bits.itemsize == 4:
        return np.uint64(_min_magnitude32(bits)) < np.uint64(mantissa)
    if bits.itemsize == 2:
        return np.uint64(_min_magnitude16(bits)) < np.uint64(mantissa)
    return np.uint64(_min_magnitude64(bits)) < np.uint64(mantissa)


@njit(**_opts)
def _any_denormal_part(lo, hi, bits, exponent, mantissa, found):
    """``_any_denormal`` of ``bits[lo:hi]``, for ``in_threads``: sets ``found[0]``."""
    if _any_denormal(bits[lo:hi], exponent, mantissa):
        found[0] = 1


#: operands of this many bytes or more are scanned by both threads: a dot's 16 MiB matrix
#: took 0.85 ms to scan in one thread, more than the product it was scanned for (0.4 ms)
_PARALLEL_SCAN_BYTES = 1 << 22


@njit(**_opts)
def _flush_bits(bits, exponent, sign, out):
    for i in range(bits.shape[0]):
        b = bits[i]
        out[i] = b & sign if (b & exponent) == 0 else b


#: the flushed types by their bits: (word, exponent mask, mantissa mask, sign mask)
_MASKS = {"f32": (np.uint32, 0x7F800000, 0x007FFFFF, 0x80000000),
          "c64": (np.uint32, 0x7F800000, 0x007FFFFF, 0x80000000),
          "bf16": (np.uint16, 0x7F80, 0x007F, 0x8000),
          "f64": (np.uint64, 0x7FF0000000000000, 0x000FFFFFFFFFFFFF, 0x8000000000000000),
          "c128": (np.uint64, 0x7FF0000000000000, 0x000FFFFFFFFFFFFF, 0x8000000000000000)}


#: dtype -> (word, exponent, mantissa, sign) as the word's scalars, or None (not flushed):
#: ``_MASKS`` by NumPy dtype, built once (the type's name and three scalars cost 3 us of a
#: 4096-element scan's 5.6, an RNN step's operands scanned each iteration)
_WORD_MASKS = {}


def _word_masks(dtype):
    got = _WORD_MASKS.get(dtype, False)
    if got is False:
        try:
            t = dtypes.from_numpy(dtype)
        except ValueError:
            t = None
        masks = _MASKS.get(t)
        got = None if masks is None else (masks[0],) + tuple(masks[0](m) for m in masks[1:])
        _WORD_MASKS[dtype] = got
    return got


def flush_denormals(x):
    """``fpenv.flush(x)`` (denormals of the types XLA:CPU flushes as zeros of their sign),
    by a scan of the bits: ``x`` itself when it holds none."""
    if type(x) is not np.ndarray:
        if isinstance(x, tuple):
            return tuple(flush_denormals(v) for v in x)
        if not isinstance(x, np.ndarray):
            return fpenv.flush(x)
    if x.ndim == 0:
        return fpenv.flush(x)
    if x.size == 0:
        return x
    masks = _word_masks(x.dtype)
    if masks is None or not x.flags.c_contiguous:
        return fpenv.flush(x)
    word, exponent, mantissa, sign = masks
    bits = x.ravel().view(word)   # (C-contiguous: a view)
    if x.nbytes >= _PARALLEL_SCAN_BYTES:
        from .shape import in_threads
        found = np.zeros(1, np.uint8)
        in_threads(_any_denormal_part, bits.size, True, bits, exponent, mantissa, found)
        if not found[0]:
            return x
    elif not _any_denormal(bits, exponent, mantissa):
        return x
    out = np.empty_like(bits)
    _flush_bits(bits, exponent, sign, out)
    return out.view(x.dtype).reshape(x.shape)


@njit(**_opts)
def _max_magnitude32(bits):
    m = np.uint32(0)
    for i in range(bits.shape[0]):
        m = max(m, np.uint32(bits[i] & np.uint32(0x7FFFFFFF)))
    return m


@njit(**_opts)
def _max_magnitude16(bits):
    m = np.uint16(0)
    for i in range(bits.shape[0]):
        m = max(m, np.uint16(bits[i] & np.uint16(0x7FFF)))
    return m


@njit(**_opts)
def _max_magnitude64(bits):
    m = np.uint64(0)
    for i in range(bits.shape[0]):
        m = max(m, np.uint64(bits[i] & np.uint64(0x7FFFFFFFFFFFFFFF)))
    return m


@njit(**_opts)
def _any_all_ones(bits, exponent):
    """Whether some word's exponent is all ones (Inf or NaN): its magnitude bits are at least
    the exponent mask -- one maximum over the array, as ``_any_denormal``'s minimum."""
    if bits.itemsize == 4:
        return np.uint64(_max_magnitude32(bits)) >= np.uint64(exponent)
    if bits.itemsize == 2:
        return np.uint64(_max_magnitude16(bits)) >= np.uint64(exponent)
    return np.uint64(_max_magnitude64(bits)) >= np.uint64(exponent)


def has_nonfinite(*values):
    """``ops.linalg.has_nonfinite`` (any Inf or NaN among float or complex values) by one
    scan of the bits: an exponent of all ones."""
    from ...ops.linalg import has_nonfinite as by_numpy
    for v in values:
        v = np.asarray(v)
        masks = _MASKS.get(fpenv._type_name(v)) if v.size >= 64 and v.flags.c_contiguous else None
        if masks is None:
            if by_numpy(v):
                return True
        elif _any_all_ones(v.reshape(-1).view(masks[0]), masks[0](masks[1])):
            return True
    return False


# -- bf16 <-> f32, the fused loops' carrier --------------------------------------------------------
# A fused loop computes bf16 in f32: its bf16 operands are widened and its result narrowed
# around the loop.  ml_dtypes' astype does each at 1.5-2 ns an element, more than the loop
# itself (a bf16 add of 4M elements: 7 ms of conversions for 4 ms of loop); these are passes
# over the bits that vectorise, with ml_dtypes' results: a bf16 is the high half of its f32
# (all 65,536 checked), and f32 -> bf16 rounds to nearest even, every NaN the quiet NaN
# 0x7FC0 of its sign.


@njit(**_opts)
def _bf16_to_f32_bits(lo, hi, src, out):
    s, o = src[lo:hi], out[lo:hi]   # indices from 0 over slices: the loop vectorises (4-5x)
    for i in range(s.shape[0]):
        o[i] = np.uint32(s[i]) << np.uint32(16)


@njit(**_opts)
def _f32_to_bf16_bits(lo, hi, src, out):
    s, o = src[lo:hi], out[lo:hi]
    for i in range(s.shape[0]):
        u = s[i]
        rounded = np.uint16((u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16))
        nan = (u & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
        o[i] = np.uint16((u >> np.uint32(16)) & np.uint32(0x8000) | np.uint32(0x7FC0)) if nan else rounded


def bf16_to_f32(x):
    """A bf16 array widened to f32 (flat, contiguous), as ``x.astype(np.float32)``."""
    from .shape import POOL, in_threads
    src = np.ascontiguousarray(x).reshape(-1).view(np.uint16)
    out = POOL.take(src.size * 4).view(np.uint32)
    in_threads(_bf16_to_f32_bits, src.size, src.size >= MOVE_PARALLEL_THRESHOLD, src, out)
    return out.view(np.float32)


def f32_to_bf16(x, dtype):
    """An f32 array narrowed to bf16 (``dtype``, ml_dtypes' bfloat16), as ``x.astype(dtype)``:
    same shape."""
    from .shape import POOL, in_threads
    src = np.ascontiguousarray(x).reshape(-1).view(np.uint32)
    out = POOL.take(src.size * 2).view(np.uint16)
    in_threads(_f32_to_bf16_bits, src.size, src.size >= MOVE_PARALLEL_THRESHOLD, src, out)
    return out.view(dtype).reshape(x.shape)
