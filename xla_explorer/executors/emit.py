"""Scalar code for fused loops: one emitter per element-wise opcode.

An emitter turns an instruction and its operands' expressions into a Numba-compilable
expression for one element (``"fmax(t0, t1)"``).  The fused-loop generators (CPU and CUDA)
wrap it with ``finish``: the value is cast to its carrier type (``np.int32(...)``: integers
wrap there) and, for floats narrower than f32, rounded to their format.  Helpers it calls
live in ``scalar_lib``.  ``EMITTERS`` is keyed by HLO opcode; an element-wise op without an
emitter, or one whose ``accepts(inst)`` says no (complex ``tan``, say), is not fused and
runs the kernel of ``executors/cpu/elementwise.py``.

What each expression computes is the reference's formula (``ops/elementwise.py``), in the
carrier types:

- integers in their own type; Numba widens integer arithmetic to 64 bits and the carrier
  cast truncates, which is two's-complement wrap-around;
- f32 and f64 in themselves (for + - * / sqrt the result equals the reference's "compute in
  f64, round once"); narrow floats (bf16, f16, f8) in f32, rounded after every op as the
  reference rounds (f64 -> f32 -> narrow, as ml_dtypes converts; f16 directly);
- complex in complex128 (c64 results are rounded by the carrier cast), except power.
"""
import numpy as np

from .. import dtypes, fpenv

EMITTERS = {}

#: XLA type -> the NumPy type name a fused loop computes it in
_CARRIER = {"pred": "np.bool_", "s8": "np.int8", "s16": "np.int16", "s32": "np.int32", "s64": "np.int64",
            "u8": "np.uint8", "u16": "np.uint16", "u32": "np.uint32", "u64": "np.uint64",
            "s4": "np.int8", "s2": "np.int8", "u4": "np.uint8", "u2": "np.uint8",
            "f32": "np.float32", "f64": "np.float64", "c64": "np.complex64", "c128": "np.complex128"}
#: floats carried as f32 and rounded after each op: (exponent bits, mantissa bits)
NARROW_FLOATS = {"f16": (5, 10), "bf16": (8, 7), "f8e5m2": (5, 2), "f8e4m3fn": (4, 3), "f8e4m3": (4, 3),
                 "f8e3m4": (3, 4), "f8e4m3fnuz": (4, 3), "f8e5m2fnuz": (5, 2), "f8e4m3b11fnuz": (4, 3)}
#: narrow float -> the scalar_lib function rounding an f32 to it
_ROUND = {t: "round_" + t for t in NARROW_FLOATS}
#: IEEE-style narrow formats (bias 2^(e-1)-1): their NaN and Inf bit patterns (reduce-precision)
_IEEE_BITS = {"f16": (0x7E00, 0x7C00, True), "bf16": (0x7FC0, 0x7F80, True), "f8e5m2": (0x7E, 0x7C, True),
              "f8e4m3": (0x7C, 0x78, True), "f8e3m4": (0x78, 0x70, True), "f8e4m3fn": (0x7F, 0x7F, False)}
_SUB_BYTE = {"s4", "s2", "u4", "u2"}
for _t in NARROW_FLOATS:
    _CARRIER[_t] = "np.float32"


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
    if inst.opcode not in EMITTERS or not inst.shape.is_array:
        return False
    if not all(o.shape.is_array for o in inst.operands):
        return False
    types = [inst.shape.element_type] + [o.shape.element_type for o in inst.operands]
    if not all(supported_type(t) for t in types):
        return False
    check = getattr(EMITTERS[inst.opcode], "accepts", None)
    return check is None or check(inst)


#: the scalar_lib function flushing a value of each type to zero (in its carrier)
_FTZ = {"f32": "ftz32", "bf16": "ftz32", "f64": "ftz64", "c64": "cftz32", "c128": "cftz64"}


#: element-wise ops whose value at a denormal operand is their value at the zero it
#: flushes to, for every real float type: e^x rounds to exactly 1 for |x| below the smallest
#: normal (f32's ``exp_f32`` checked over every f32 denormal; f64's exp and the narrow
#: floats' alike), so flushing their operand changes nothing and a fused loop skips it
#: (an ftz is four vector instructions of a softmax's ~40 an element)
DENORMAL_BLIND = {"exponential"}


def denormal_blind(inst):
    """Whether ``inst`` reads a denormal operand as the zero flushing makes of it."""
    return (inst.opcode in DENORMAL_BLIND and _t(inst) in _CARRIER and not _is_complex(_t(inst))
            and all(o.shape.is_array and not _is_complex(o.shape.element_type) for o in inst.operands))


#: (a switch for A/B measurements) a sum only exp reads left with its operands unflushed
_SUM_BEFORE_BLIND = True


def sum_before_blind(inst):
    """Whether ``inst`` is a real float add / subtract whose operands' flushes cannot change
    the exp of its value (its caller knows exp is its only reader: ``softmax``'s x - max).
    Say a is a denormal (|a| < tiny), a' its flushed zero, b any value: if |b| >= 2^-100
    (f32; 2^-970 f64), a is below half b's ulp, so a + b rounds to b = a' + b exactly
    (never a tie: b is a float); else |a + b| and |a' + b| are both below 2^-99, where exp
    is exactly 1 (``exp_f32`` checked for every f32 below 2^-26; f64's below 2^-54); a
    NaN or an infinity b is the value either way; two denormals sum below 2^-125, exp 1
    again.  Their flushes (a compare and a select each, an element) are left out."""
    return (_SUM_BEFORE_BLIND and inst.opcode in ("add", "subtract") and _t(inst) in _FTZ
            and not _is_complex(_t(inst))
            and all(o.shape.is_array and o.shape.element_type == _t(inst) for o in inst.operands))


def squares_it(reader, inst):
    """Whether ``reader`` is inst * inst with its result flushed: a denormal inst's square
    is +0 whether inst was flushed or not (below 2^-252 for f32, 2^-2044 for f64: rounded to
    +0), so inst need not be flushed for it; nor, when inst is an add / subtract, its
    operands (as ``sum_before_blind``: the sums are equal, or both below 2^-99 (f32;
    2^-969 f64), whose squares are +0)."""
    return (_SUM_BEFORE_BLIND and reader.opcode == "multiply" and len(reader.operands) == 2
            and reader.operands[0] is inst and reader.operands[1] is inst and _t(inst) in _FTZ
            and not _is_complex(_t(inst)) and _t(reader) == _t(inst) and flushes_result(reader))


#: (a switch for A/B measurements) an f32 exp's result flushed by ``ftz_pos32``
_FTZ_POS = True


def emit(inst, *args, flushed=(), flush_result=True):
    """The expression of ``inst`` on its operands' expressions ``args``, as its emitter writes it,
    inside the current floating-point environment (``fpenv``): in ``"flush"`` mode operands and
    result are flushed to zero as the op's rule says (XLA:CPU's DAZ and FTZ).  ``flushed``:
    indices of operands already flushed (results of flushing ops in the same loop).  The mode
    becomes part of the source, so a loop compiled for one mode is never run in the other.
    ``flush_result=False``: the result is left unflushed (its only readers are
    ``denormal_blind``).  The operands of a ``denormal_blind`` op are not flushed."""
    emitter = EMITTERS[inst.opcode]
    if not fpenv.flushing():
        return emitter(inst, *args)
    from ..ops import registry
    types = [o.shape.element_type if o.shape.is_array else None for o in inst.operands]
    mask, result = fpenv.rule_of(registry.get(inst.opcode), types, _t(inst), inst.attrs)
    if denormal_blind(inst):
        mask = [False] * len(mask)
    args = [f"{_FTZ[t]}({a})" if m and k not in flushed else a
            for k, (a, m, t) in enumerate(zip(args, mask, types))]
    expr = emitter(inst, *args)
    if result and flush_result and not getattr(emitter, "picks_an_operand", False) and not isinstance(expr, Flushed):
        # exp_f32's values are +0, positive or NaN: their flush needs no sign (ftz_pos32);
        # nor a square's (x * x, f32 or bf16 in f32: two instructions an element, not four)
        square = (inst.opcode == "multiply" and len(inst.operands) == 2 and inst.operands[0] is inst.operands[1]
                  and _t(inst) in ("f32", "bf16"))
        ftz = ("ftz_pos32" if _FTZ_POS and (inst.opcode == "exponential" and _t(inst) == "f32" or square)
               else _FTZ[_t(inst)])
        wrapped = f"{ftz}({expr})"
        expr = Exact(wrapped) if isinstance(expr, Exact) else wrapped
    return expr


def flush_functions(inst):
    """Per operand of ``inst``: the scalar_lib function ``emit`` would flush it with in the
    current environment, or None."""
    if not fpenv.flushing():
        return [None] * len(inst.operands)
    from ..ops import registry
    types = [o.shape.element_type if o.shape.is_array else None for o in inst.operands]
    mask, _ = fpenv.rule_of(registry.get(inst.opcode), types, _t(inst), inst.attrs)
    if denormal_blind(inst):
        return [None] * len(inst.operands)
    return [_FTZ[t] if m else None for m, t in zip(mask, types)]


def emits_result_flush(inst):
    """Whether ``emit`` writes a flush of ``inst``'s result (``flush_result=True``): its rule
    flushes the result and its value is not one of its (flushed) operands'."""
    if not fpenv.flushing() or not inst.shape.is_array or inst.shape.element_type not in _FTZ:
        return False
    from ..ops import registry
    types = [o.shape.element_type if o.shape.is_array else None for o in inst.operands]
    _, result = fpenv.rule_of(registry.get(inst.opcode), types, _t(inst), inst.attrs)
    return bool(result) and not getattr(EMITTERS.get(inst.opcode), "picks_an_operand", False)


def flushes_result(inst):
    """Whether ``emit`` leaves ``inst``'s value flushed (so its readers need not flush it)."""
    if not fpenv.flushing() or not inst.shape.is_array or inst.shape.element_type not in _FTZ:
        return False
    from ..ops import registry
    types = [o.shape.element_type if o.shape.is_array else None for o in inst.operands]
    mask, result = fpenv.rule_of(registry.get(inst.opcode), types, _t(inst), inst.attrs)
    return result or (getattr(EMITTERS.get(inst.opcode), "picks_an_operand", False) and all(mask))


class Exact(str):
    """An expression whose value is one of its operands' values (select, max, negate, ...):
    a narrow float needs no rounding after it."""


class Flushed(str):
    """An expression whose value is already flushed as the op's rule flushes its result
    (``emit`` wraps no flush around it)."""


def finish(expr, t):
    """Cast ``expr`` to the carrier of type ``t`` (rounding narrow floats, wrapping sub-byte
    integers)."""
    c = _CARRIER[t]
    if t in NARROW_FLOATS and isinstance(expr, Exact) and "fnuz" not in t:  # (fnuz has no -0)
        return f"np.float32({expr})"
    if t in NARROW_FLOATS:  # (the outer cast: in Python, as the CUDA simulator runs it, a np.float32)
        return f"np.float32({_ROUND[t]}(np.float32({expr})))"
    if t in _SUB_BYTE:
        wrap = "wrap_signed" if t[0] == "s" else "wrap_unsigned"
        return f"{c}({wrap}(np.int64({expr}), {dtypes.bit_width(t)}))"
    return f"{c}({expr})"


# -- type helpers ------------------------------------------------------------------------------

def _t(inst):
    return inst.shape.element_type


def _ot(inst, k=0):
    return inst.operands[k].shape.element_type


def _is_int(t):
    return t in dtypes.INTEGRAL


def _is_signed(t):
    return t in dtypes.SIGNED


def _is_float(t):
    return t in dtypes.FLOATING


def _is_complex(t):
    return t in dtypes.COMPLEX


def _f32ish(t):
    """Computed in f32 (f32 itself and the narrow floats)."""
    return t == "f32" or t in NARROW_FLOATS


def _k(t, v):
    """A constant ``v`` in the carrier of ``t``."""
    return f"{_CARRIER[t]}({v})"


def _mask(t):
    return (1 << dtypes.bit_width(t)) - 1


def _bits(t, x):
    """The n-bit pattern of integer ``x`` as a uint64."""
    return f"(np.uint64({x}) & np.uint64({_mask(t)}))"


def _as_signed(t, x):
    """The n bits of ``x`` read as a signed number, as an int64."""
    n = dtypes.bit_width(t)
    if t in _SUB_BYTE:
        return f"wrap_signed(np.int64({x}), {n})"
    return f"np.int64(np.int{n}({x}))"


def _wide(t, x):
    """Complex operands are computed in complex128."""
    return f"np.complex128({x})" if _is_complex(t) else x


def _not_complex(inst):
    return not any(_is_complex(t) for t in [_t(inst)] + [o.shape.element_type for o in inst.operands])


# -- arithmetic ---------------------------------------------------------------------------------

@emitter("add")
def _add(inst, a, b):
    return f"({a} or {b})" if _t(inst) == "pred" else f"{a} + {b}"


@emitter("subtract")
def _sub(inst, a, b):
    return f"{a} - {b}"


def _complex_flags(t):
    """(parts are f32, flush to zero) for XLA's complex arithmetic on type ``t``: literals in
    the generated code (so the environment is part of the loop's source and cache key)."""
    return t == "c64", fpenv.flushing(t)


@emitter("multiply")
def _mul(inst, a, b):
    t = _t(inst)
    if t == "pred":
        return f"({a} and {b})"
    if _is_complex(t):
        f32, ftz = _complex_flags(t)
        if f32 and C64_MULTIPLY:   # (its result flushed by itself where the rule flushes it)
            return Flushed(f"cmul_c64(np.complex64({a}), np.complex64({b}), {ftz})")
        return f"cmul({_wide(t, a)}, {_wide(t, b)}, {f32}, {ftz})"
    return f"{a} * {b}"


#: (a switch for A/B measurements) a c64 multiply computed on f32 parts (``cmul_c64``)
C64_MULTIPLY = True


@emitter("divide")
def _div(inst, a, b):
    t = _t(inst)
    if t == "u32":   # through f64 in 32-bit lanes, vectorized (scalar_lib)
        return f"uint_div_u32(np.uint32({a}), np.uint32({b}), np.uint32({_mask(t)}))"
    if _is_int(t) and dtypes.bit_width(t) <= 32:
        on_zero = -1 if _is_signed(t) else _mask(t)
        return f"int_div_s32(np.int32({a}), np.int32({b}), np.int32({on_zero}))"
    if _is_signed(t):
        return f"int_div(np.int64({a}), np.int64({b}))"
    if _is_int(t):
        return f"uint_div(np.uint64({a}), np.uint64({b}), np.uint64({_mask(t)}))"
    if _is_complex(t):
        f32, ftz = _complex_flags(t)
        return f"cdiv({_wide(t, a)}, {_wide(t, b)}, {f32}, {ftz})"
    r = _power_of_two_reciprocal(inst)
    if r is not None:   # (the same value: both are the exact quotient rounded once)
        return f"{a} * {'np.float64' if t == 'f64' else 'np.float32'}({r!r})"
    return f"{a} / {b}"


#: (an A/B switch) a float division by a constant power of two written as the multiply by
#: its reciprocal (XLA's simplifier does the same): a vector division costs several
#: multiplies' time (an u8 image normalised, x / 255 and then / 0.25: one division left)
POW2_DIVISORS = True


def _power_of_two_reciprocal(inst):
    """1/c where ``inst`` divides a real float by a scalar constant c (or a broadcast of one)
    that is +-2^k with 1/c normal in the type (so that no flush mode sees a denormal
    factor, and x * (1/c) is exactly x / c rounded, overflow and denormal results alike);
    else None."""
    if not POW2_DIVISORS or len(inst.operands) != 2:
        return None
    t = _t(inst)
    if t not in ("f32", "f64") and t not in NARROW_FLOATS:
        return None
    from .loopgen import _scalar_constant
    c = _scalar_constant(inst.operands[1])
    if c is None or c == 0 or not np.isfinite(c):
        return None
    m, e = np.frexp(abs(c))   # c = m * 2^e, m in [0.5, 1)
    if m != 0.5:
        return None
    k = int(e) - 1            # |c| = 2^k, 1/|c| = 2^-k
    lo, hi = (-1022, 1023) if t == "f64" else (-126, 127)
    if t in NARROW_FLOATS and t != "bf16":   # (narrow formats: the constant must be one of theirs too)
        return None
    if not lo <= -k <= hi:
        return None
    return float(np.copysign(2.0 ** -k, c))


@emitter("remainder")
def _rem(inst, a, b):
    t = _t(inst)
    if t == "u32":   # through f64 in 32-bit lanes, vectorized (scalar_lib)
        return f"uint_rem_u32(np.uint32({a}), np.uint32({b}))"
    if _is_int(t) and dtypes.bit_width(t) <= 32:
        return f"int_rem_s32(np.int32({a}), np.int32({b}))"
    if _is_signed(t):
        return f"int_rem(np.int64({a}), np.int64({b}))"
    if _is_int(t):
        return f"uint_rem(np.uint64({a}), np.uint64({b}))"
    return f"np.fmod({a}, {b})"


@emitter("negate")
def _neg(inst, a):
    t = _t(inst)
    if _is_int(t) and not _is_signed(t):
        return f"np.uint64(0) - np.uint64({a})"
    if _is_int(t):
        return f"-np.int64({a})"
    return Exact(f"-{a}")


@emitter("abs")
def _abs(inst, a):
    t = _ot(inst)
    if _is_complex(t):
        return f"{'cabs_c64' if t == 'c64' else 'cabs'}({_wide(t, a)})"
    if _is_int(t):
        return f"abs(np.int64({a}))"
    return Exact(f"abs({a})")


@emitter("sign")
def _sign(inst, a):
    t = _t(inst)
    if _is_complex(t) and fpenv.flushing(t):   # (its rule is "bits": the helper flushes)
        return f"csign_ftz{32 if t == 'c64' else 64}({_wide(t, a)})"
    if _is_complex(t):
        return f"csign({_wide(t, a)})"
    if _is_int(t):
        return f"np.int64(1 if {a} > 0 else 0) - np.int64(1 if {a} < 0 else 0)"
    return f"fsign({a})"


@emitter("maximum")
def _max(inst, a, b):
    t = _t(inst)
    if t == "pred":
        return f"({a} or {b})"
    if _is_complex(t):
        return f"cmax({a}, {b})"
    return Exact(f"fmax({a}, {b})") if _is_float(t) else f"max({a}, {b})"


_max.picks_an_operand = True   # (its flushed operands need no second flush)


@emitter("minimum")
def _min(inst, a, b):
    t = _t(inst)
    if t == "pred":
        return f"({a} and {b})"
    if _is_complex(t):
        return f"cmin({a}, {b})"
    return Exact(f"fmin({a}, {b})") if _is_float(t) else f"min({a}, {b})"


_min.picks_an_operand = True


#: (an A/B switch) f32 and narrower pow computed by ``scalar_lib.pow_f32`` (else ``fpow``,
#: NumPy's power: a library call an element)
POW_F32 = True


@emitter("power")
def _pow(inst, a, b):
    t = _t(inst)
    n = dtypes.bit_width(t) if _is_int(t) else 0
    if t in _SUB_BYTE:  # the reference computes sub-byte types as int64 values (u4 8..15 are positive)
        return f"int_pow(np.int64({a}), np.uint64(np.int64({b})), 64, np.int64(1), np.int64(-1))"
    if _is_signed(t):
        return f"int_pow(np.int64({a}), {_bits(t, b)}, {n}, np.int64(1), np.int64(-1))"
    if _is_int(t):
        return f"int_pow(np.uint64({a}), {_bits(t, b)}, {n}, np.uint64(1), np.uint64({_mask(t)}))"
    if _is_complex(t):  # XLA computes it in the operands' precision
        f = "np.float32" if t == "c64" else "np.float64"
        return f"cpow({a}, {b}, {f}(0.5), {f}(1.0))"
    f = "np.float32" if _f32ish(t) else "np.float64"
    bits = {"f32": 32, "f64": 64}.get(t, 0)  # whose signaling NaNs fpow checks
    if _f32ish(t) and POW_F32:   # (in f64 without a library call: it vectorises)
        return f"pow_f32({a}, {b}, {bits}, {bool(fpenv.flushing(t))})"
    if fpenv.flushing(t):   # a denormal base as XLA:CPU's pow reads it
        tiny, e = ("1.1754943508222875e-38", -150) if _f32ish(t) else ("2.2250738585072014e-308", -1075)
        return (f"(fpow_of_denormal({a}, {b}, {f}(1.0), {e}) if {a} != 0 and abs({a}) < {f}({tiny}) "
                f"else fpow({a}, {b}, {f}(1.0), {bits}))")
    return f"fpow({a}, {b}, {f}(1.0), {bits})"


@emitter("atan2")
def _atan2(inst, a, b):
    t = _t(inst)
    if fpenv.flushing(t):   # XLA:CPU's atan2 under DAZ/FTZ (ops.elementwise.xla_atan2; rule "bits")
        return f"atan2_xla32({a}, {b})" if _f32ish(t) else f"atan2_xla64({a}, {b})"
    return f"np.arctan2({a}, {b})"


_atan2.accepts = _not_complex


@emitter("complex")
def _complex(inst, a, b):
    return f"complex({a}, {b})"


# -- bits --------------------------------------------------------------------------------------

@emitter("and")
def _and(inst, a, b):
    return f"({a} and {b})" if _t(inst) == "pred" else f"{a} & {b}"


@emitter("or")
def _or(inst, a, b):
    return f"({a} or {b})" if _t(inst) == "pred" else f"{a} | {b}"


@emitter("xor")
def _xor(inst, a, b):
    return f"({a} != {b})" if _t(inst) == "pred" else f"{a} ^ {b}"


@emitter("not")
def _not(inst, a):
    return f"(not {a})" if _t(inst) == "pred" else f"~{a}"


@emitter("shift-left")
def _shl(inst, a, b):
    t = _t(inst)
    return f"shift_left({_bits(t, a)}, {_bits(t, b)}, {dtypes.bit_width(t)})"


@emitter("shift-right-logical")
def _shrl(inst, a, b):
    t = _t(inst)
    return f"shift_right_logical({_bits(t, a)}, {_bits(t, b)}, {dtypes.bit_width(t)})"


@emitter("shift-right-arithmetic")
def _shra(inst, a, b):
    t = _t(inst)
    return f"shift_right_arithmetic({_as_signed(t, a)}, {_bits(t, b)}, {dtypes.bit_width(t)})"


@emitter("count-leading-zeros")
def _clz(inst, a):
    t = _t(inst)
    return f"count_leading_zeros({_bits(t, a)}, {dtypes.bit_width(t)})"


@emitter("popcnt")
def _popcnt(inst, a):
    return f"popcount({_bits(_t(inst), a)})"


# -- comparison, selection ----------------------------------------------------------------------

_OPS = {"EQ": "==", "NE": "!=", "GE": ">=", "GT": ">", "LE": "<=", "LT": "<"}


def _total_key(t, x):
    return f"total_order_key64({x})" if t in ("f64", "c128") else f"total_order_key32({x})"


@emitter("compare")
def _compare(inst, a, b):
    t = _ot(inst)
    direction = inst.attrs["comparison_direction"]
    total = inst.attrs.get("compare_type") == "TOTALORDER" and (_is_float(t) or _is_complex(t))
    op = _OPS[direction]
    if _is_complex(t):
        parts = [f"{a}.real", f"{b}.real", f"{a}.imag", f"{b}.imag"]
        if total:
            parts = [_total_key(t, p) for p in parts]
        xr, yr, xi, yi = parts
        if direction in ("EQ", "NE"):
            equal = f"({xr} == {yr} and {xi} == {yi})"
            return equal if direction == "EQ" else f"(not {equal})"
        if direction in ("LE", "GE"):   # XLA:CPU: the real parts only
            return f"({xr} {op} {yr})"
        return f"({xr} {op} {yr} or ({xr} == {yr} and {xi} {op} {yi}))"
    if total:
        return f"{_total_key(t, a)} {op} {_total_key(t, b)}"
    return f"{a} {op} {b}"


def _compare_accepts(inst):
    # fnuz formats order their bits differently (NaN is the pattern of -0): not in f32
    return not (inst.attrs.get("compare_type") == "TOTALORDER" and "fnuz" in _ot(inst))


_compare.accepts = _compare_accepts


@emitter("select")
def _select(inst, p, a, b):
    return Exact(f"pick({p}, {a}, {b})")


@emitter("clamp")
def _clamp(inst, lo, x, hi):
    t = _t(inst)
    if t == "pred":
        return f"(({lo} or {x}) and {hi})"
    if _is_complex(t):
        return f"cmin(cmax({lo}, {x}), {hi})"
    if _is_float(t):
        return Exact(f"fmin(fmax({lo}, {x}), {hi})")
    return f"min(max({lo}, {x}), {hi})"


_clamp.picks_an_operand = True


# -- conversions ---------------------------------------------------------------------------------

@emitter("convert")
def _convert(inst, a):
    src, dst = _ot(inst), _t(inst)
    if src == dst:
        return Exact(a)
    if dst == "pred":
        return f"({a} != 0)"
    if _is_complex(src) and not _is_complex(dst):
        a, src = f"{a}.real", dtypes.complex_component(src)
    if src == "pred":
        return f"(1 if {a} else 0)"
    if _is_float(src) and _is_int(dst):
        if dst == "u64":
            return f"float_to_uint64({a})"
        n = dtypes.bit_width(dst)
        upper = 2.0 ** (n - 1) if _is_signed(dst) else 2.0 ** n
        lower = -upper if _is_signed(dst) else 0.0
        hi = (1 << (n - 1)) - 1 if _is_signed(dst) else (1 << n) - 1
        lo = -(1 << (n - 1)) if _is_signed(dst) else 0
        if _ot(inst) == "f32" and (n <= 32 if _is_signed(dst) else n <= 16):   # (in f32 and int32)
            return f"f32_to_int({a}, {lower!r}, {upper!r}, np.int64({lo}), np.int64({hi}))"
        return f"float_to_int({a}, {lower!r}, {upper!r}, np.int64({lo}), np.int64({hi}))"
    if dst == "f16" and src in ("f64", "c128"):
        return f"round_f16_f64({a})"     # NumPy rounds f64 -> f16 directly (ml_dtypes: via f32)
    if _is_int(src) and _is_int(dst):
        return f"np.int64({a})" if _is_signed(src) else f"np.uint64({a})"
    return a


#: the types a loop bitcasts between (``bitcast-convert`` of one width): those whose carrier
#: holds the type's bits as they are (f16, bf16 and f8 are carried as f32 values, not bits)
_BITCAST_GROUPS = ({"f32", "s32", "u32"}, {"f64", "s64", "u64"}, {"s16", "u16"}, {"s8", "u8"})


@emitter("bitcast-convert")
def _bitcast(inst, a):
    """The same bits read as the other type: a view of the scalar (no instruction)."""
    src, dst = _ot(inst), _t(inst)
    if src == dst:
        return Exact(a)
    return f"{_CARRIER[src]}({a}).view({_CARRIER[dst]})"


def _bitcast_accepts(inst):
    src, dst = _ot(inst), _t(inst)
    return inst.shape.dims == inst.operands[0].shape.dims and any(
        src in g and dst in g for g in _BITCAST_GROUPS)


_bitcast.accepts = _bitcast_accepts


@emitter("reduce-precision")
def _reduce_precision(inst, a):
    t = _t(inst)
    e, m = inst.attrs["exponent_bits"], inst.attrs["mantissa_bits"]
    if t == "f32":
        return f"reduce_precision_f32({a}, {e}, {m})"
    if t == "f64":
        return f"reduce_precision_f64({a}, {e}, {m})"
    src_e, src_m = NARROW_FLOATS[t]
    nan_bits, inf_bits, has_inf = _IEEE_BITS[t]
    return f"reduce_precision_narrow({a}, {e}, {m}, {src_e}, {src_m}, {nan_bits}, {inf_bits}, {has_inf})"


_reduce_precision.accepts = lambda inst: _t(inst) in ("f32", "f64") or _t(inst) in _IEEE_BITS


# -- unary float functions -------------------------------------------------------------------------

def _float_fn(f32_fn, f64_fn, complex_fn=None):
    """An emitter calling ``f32_fn`` for f32 and narrow floats, ``f64_fn`` for f64 and
    ``complex_fn`` (on complex128) for complex; no complex_fn: complex is not fused."""
    def emit(inst, a):
        t = _ot(inst)
        if _is_complex(t):
            return f"{complex_fn}({_wide(t, a)})"
        return f"{f32_fn if _f32ish(t) else f64_fn}({a})"
    if complex_fn is None:
        emit.accepts = _not_complex
    return emit


for _op, _fns in {
        "exponential": ("exp_f32", "exp_f64", "cexp"),
        "exponential-minus-one": ("expm1_f32", "expm1_f64", "cexpm1"),
        "log": ("log_f32", "np.log", "clog"),
        "log-plus-one": ("log1p_f32", "np.log1p", "clog1p"),
        "sqrt": ("np.sqrt", "np.sqrt", "csqrt"),
        "sine": ("np.sin", "np.sin", "csin"),
        "cosine": ("np.cos", "np.cos", "ccos"),
        "tan": ("np.tan", "np.tan"),
        "tanh": ("tanh_f32", "tanh_f64"),
        "logistic": ("logistic_f32", "logistic_f64", "clogistic"),
        "erf": ("erf_f32", "math.erf"),
        "floor": ("np.floor", "np.floor"),
        "ceil": ("np.ceil", "np.ceil"),
        "round-nearest-even": ("np.rint", "np.rint"),
        "round-nearest-afz": ("round_afz", "round_afz"),
        "is-finite": ("math.isfinite", "math.isfinite")}.items():
    emitter(_op)(_float_fn(*_fns))


@emitter("cbrt")
def _cbrt(inst, a):
    t = _ot(inst)
    if fpenv.flushing(t) and _f32ish(t):   # XLA:CPU's f32 cbrt of a denormal (rule "bits" there)
        return f"cbrt_xla32({a})"
    return f"np.cbrt({a})"


_cbrt.accepts = _not_complex


@emitter("rsqrt")
def _rsqrt(inst, a):
    one = "np.float32(1.0)" if _f32ish(_ot(inst)) else "1.0"
    return f"{one} / np.sqrt({a})"


_rsqrt.accepts = _not_complex


@emitter("real")
def _real(inst, a):
    return f"{a}.real" if _is_complex(_ot(inst)) else Exact(a)


@emitter("imag")
def _imag(inst, a):
    return f"{a}.imag" if _is_complex(_ot(inst)) else _k(_t(inst), 0)
