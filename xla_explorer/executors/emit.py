"""Scalar code for fused loops: one emitter per element-wise opcode.

An emitter turns an instruction and its operands' expressions into a Numba-compilable
expression for one element (``"fmax(a, b)"``).  The fused-loop generators (CPU and CUDA)
wrap it: the value is cast to its carrier type (``np.int32(...)``: integers wrap there)
and, for floats narrower than f32, rounded to their format.  Helpers it calls live in
``scalar_lib``.  ``EMITTERS`` is keyed by HLO opcode; an element-wise op without an
emitter is not fused and needs a kernel of its own.
"""
import numpy as np

from .. import dtypes

EMITTERS = {}

#: XLA type -> the NumPy type name a fused loop computes it in
_CARRIER = {"pred": "np.bool_", "s8": "np.int8", "s16": "np.int16", "s32": "np.int32", "s64": "np.int64",
            "u8": "np.uint8", "u16": "np.uint16", "u32": "np.uint32", "u64": "np.uint64",
            "f32": "np.float32", "f64": "np.float64", "c64": "np.complex64", "c128": "np.complex128",
            "f16": "np.float32", "bf16": "np.float32", "f8e4m3fn": "np.float32", "f8e5m2": "np.float32"}
#: floats carried as f32 and rounded after each op: (exponent bits, mantissa bits)
NARROW_FLOATS = {"f16": (5, 10), "bf16": (8, 7), "f8e5m2": (5, 2), "f8e4m3fn": (4, 3)}


def carrier(t):
    return _CARRIER.get(t)


def carrier_dtype(t):
    """The NumPy dtype arrays of XLA type ``t`` are passed to a fused loop in."""
    name = _CARRIER[t]
    return np.dtype(getattr(np, name[3:]))


def supported_type(t):
    return t in _CARRIER


def emitter(*opcodes):
    def register(fn):
        for op in opcodes:
            EMITTERS[op] = fn
        return fn
    return register


def can_emit(inst):
    if inst.opcode not in EMITTERS:
        return False
    types = [inst.shape.element_type] + [o.shape.element_type for o in inst.operands]
    if not all(supported_type(t) for t in types):
        return False
    check = getattr(EMITTERS[inst.opcode], "accepts", None)
    return check is None or check(inst)


def finish(expr, t):
    """Cast ``expr`` to the carrier of type ``t`` (rounding narrow floats)."""
    c = _CARRIER[t]
    if t in NARROW_FLOATS:
        e, m = NARROW_FLOATS[t]
        if t == "f8e4m3fn":
            return f"np.float32(round_to_e4m3fn(np.float64({expr})))"
        return f"np.float32(round_to(np.float64({expr}), {e}, {m}))"
    return f"{c}({expr})"


def _t(inst):
    return inst.shape.element_type


def _is_int(t):
    return t in dtypes.INTEGRAL


def _is_float(t):
    return t in dtypes.FLOATING


# -- a first set; the element-wise family's emitters complete it (emit_elementwise.py) ------

@emitter("add")
def _add(inst, a, b):
    return f"{a} + {b}" if _t(inst) != "pred" else f"{a} or {b}"


@emitter("subtract")
def _sub(inst, a, b):
    return f"{a} - {b}"


@emitter("multiply")
def _mul(inst, a, b):
    return f"{a} * {b}" if _t(inst) != "pred" else f"{a} and {b}"


@emitter("negate")
def _neg(inst, a):
    return f"-{a}" if not _t(inst).startswith("u") else f"{carrier(_t(inst))}(0) - {a}"


@emitter("maximum")
def _max(inst, a, b):
    return f"fmax({a}, {b})" if _is_float(_t(inst)) else f"max({a}, {b})"


@emitter("minimum")
def _min(inst, a, b):
    return f"fmin({a}, {b})" if _is_float(_t(inst)) else f"min({a}, {b})"


@emitter("select")
def _select(inst, p, a, b):
    return f"{a} if {p} else {b}"


@emitter("exponential")
def _exp(inst, a):
    return f"math.exp({a})"


@emitter("tanh")
def _tanh(inst, a):
    return f"math.tanh({a})"


@emitter("sqrt")
def _sqrt(inst, a):
    return f"math.sqrt({a})" if _is_float(_t(inst)) else f"cmath.sqrt({a})"


_sqrt.accepts = lambda inst: _is_float(_t(inst))
_exp.accepts = _tanh.accepts = _sqrt.accepts
