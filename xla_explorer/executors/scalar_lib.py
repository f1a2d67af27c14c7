"""Scalar functions of XLA's element-wise ops, for Numba (CPU loops and CUDA kernels alike).

Each is a plain function jitted with ``@njit`` at module level (call ``.py_func`` to step
through it in Python).  Generated fused loops call them (``emit.py`` writes the calls) and
LLVM inlines them.  They follow the NumPy reference (``ops/elementwise.py``): integers and
predicates bit for bit, conversions and rounding bit for bit, float arithmetic within the
corpus tolerances.

Conventions:

- integers arrive in their own type; Numba computes integer expressions in 64 bits and the
  loop's cast to the result type (``np.int8(...)``) wraps them, as two's complement does;
- floats narrower than f32 (bf16, f16, f8) are carried as f32 and rounded to their format
  after every op (``round_bf16`` ...), exactly as the reference rounds them (ml_dtypes goes
  through f32; f16 from f64 rounds directly: ``round_f16_f64``);
- the f32 ``exp``/``log``/``tanh``/``logistic`` are polynomial versions without branches
  (selects only), so that a loop calling them vectorises (Numba would call the C library
  once per element); measured over a sweep of all f32 exponents their largest errors are 1,
  2, 1 and 3 ulp of the correctly rounded result (``tests/test_numba_elementwise.py``), and
  they handle NaN, +-Inf, overflow and underflow as the C library does.  f64 uses the C
  library (``np.exp`` ...: in Python, as the CUDA simulator runs these functions,
  ``math.exp`` would raise where NumPy returns Inf or NaN);
- complex numbers are computed in complex128 (the reference's precision), except multiply,
  divide and power, which XLA computes in the operands' precision (``cmul``, ``cdiv``);
- denormals: ``ftz32``/``ftz64`` (and ``cftz*``) flush a value as XLA:CPU's DAZ/FTZ modes
  do; the emitters wrap operands and results in them where the op's rule and the
  floating-point environment say so (``emit.emit``).

Bit patterns are read with ``np.float32(x).view(np.uint32)`` (a no-op on the machine).
"""
import math

import numpy as np
from numba import njit

# error_model="numpy" on every helper: a helper compiled while a caller compiles takes the
# caller's error model, but Numba's cache key does not record it, so a helper first compiled
# under the default ("python": a zero-division check, which stops vectorisation) would be
# reused by every later loop.  Integer helpers test for zero divisors themselves.
_opts = dict(cache=True, nogil=True, error_model="numpy")
#: the polynomial approximations may fuse a*b+c into one FMA instruction (faster, and the
#: error bounds below hold with or without it); nothing else is relaxed
_poly_opts = dict(_opts, fastmath={"contract"})

# -- index helpers ----------------------------------------------------------------------------


@njit(**_opts)
def bcast_row(row, out_dims, strides):
    """``bcast_index(row * out_dims[-1], out_dims, strides)``: where row ``row`` of a loop
    over ``out_dims`` (its last dimension the row) starts in the broadcast operand.  One
    division fewer per dimension: the row index needs none for the last dimension (its
    coordinate is 0) nor for the first (the index is below its size): rows of a 2-D loop
    divide nothing (those divisions were a fifth of a 256-wide f32 exp loop)."""
    k = out_dims.shape[0] - 1
    j = 0
    r = np.int64(row)
    for d in range(k - 1, 0, -1):
        n = out_dims[d]
        q = r // n
        j += (r - q * n) * strides[d]
        r = q
    if k > 0:
        j += r * strides[0]
    return j


@njit(**_opts)
def bcast_index(i, out_dims, strides):
    """Flat index into an operand read through a broadcast: ``strides[d]`` is the operand's
    stride (in elements) for result dimension ``d``, 0 where the operand is broadcast."""
    j = 0
    r = np.int64(i)                  # a prange index may be unsigned: uint64 % int64 is a float
    for d in range(out_dims.shape[0] - 1, -1, -1):
        n = out_dims[d]
        j += (r % n) * strides[d]
        r //= n
    return j


@njit(**_opts)
def coordinate(i, inner, size):
    """The coordinate along one dimension of flat index ``i`` (iota)."""
    return (np.int64(i) // inner) % size


# -- integers -----------------------------------------------------------------------------------
# Division and remainder truncate toward zero (C), with XLA's answers where C has none.

@njit(**_opts)
def int_div(a, b):
    """Signed a / b: x / 0 = -1; INT_MIN / -1 = INT_MIN (``-a`` wraps); else toward zero."""
    if b == 0:
        return -1
    if b == -1:
        return -a
    q = a // b                       # Numba's // floors, like Python's
    if q < 0 and q * b != a:
        q += 1
    return q


@njit(**_opts)
def int_rem(a, b):
    """Signed a % b with the sign of a: x % 0 = x; INT_MIN % -1 = 0."""
    if b == 0:
        return a
    if b == -1:
        return 0
    r = a % b                        # Python's %: the sign of b
    if r != 0 and (r < 0) != (a < 0):
        r -= b
    return r


@njit(**_opts)
def uint_div(a, b, all_ones):
    """Unsigned a / b: x / 0 = all bits set."""
    if b == 0:
        return all_ones
    return a // b


@njit(**_opts)
def uint_rem(a, b):
    """Unsigned a % b: x % 0 = x."""
    if b == 0:
        return a
    return a % b


# Integers of 32 bits or fewer divide through f64: for |a|, |b| < 2^32 the rounded quotient
# a/b is within |a/b| 2^-53 < 2^-21/|b| of the exact one, closer than any integer that the
# exact quotient is not (those are 1/|b| away), so truncating it gives the exact truncated
# quotient.  Unlike an integer divide instruction (scalar only, tens of cycles in 64 bits)
# this vectorizes.

# Each computes its quotient itself rather than through a shared njit helper: the CUDA
# simulator runs these as Python, where a call to another dispatcher runs compiled code and
# hands back a Python int, which np.int32() refuses where compiled code wraps (INT_MIN / -1).

# The quotient is converted straight to int32 / uint32 (a vector conversion) and the rest
# computed in 32-bit lanes (LLVM narrows what is truncated to 32 bits): with the operands
# and the quotient as int64, as before, every lane was 64 bits wide and x % 7 of s32 ran
# 4.0x slower.  A divisor of 0 or -1 is replaced by 1 before dividing (INT_MIN / -1 = 2^31,
# which no int32 holds: its conversion would be undefined), their answers selected after.

@njit(**_opts)
def int_div_s32(a, b, on_zero):
    """int_div for signed operands of at most 32 bits (and u8 / u16), as int32 (np.int32
    values): x / -1 = -x wrapping (INT_MIN / -1 = INT_MIN); a / 0 = ``on_zero``."""
    d = b if b != 0 and b != -1 else np.int32(1)
    q = np.int32(np.float64(a) / np.float64(d))
    q = q if b != -1 else np.int32(np.int64(0) - np.int64(a))
    return q if b != 0 else np.int32(on_zero)


@njit(**_opts)
def int_rem_s32(a, b):
    """int_rem for signed operands of at most 32 bits (and u8 / u16), as int32: x % -1 = 0,
    x % 0 = x."""
    d = b if b != 0 and b != -1 else np.int32(1)
    q = np.int32(np.float64(a) / np.float64(d))
    r = np.int32(a - np.int32(q * d))
    return r if b != 0 else a


@njit(**_opts)
def uint_div_u32(a, b, on_zero):
    """uint_div for u32 operands (np.uint32 values); a / 0 = ``on_zero`` (all ones)."""
    q = np.uint32(np.float64(a) / np.float64(b if b != 0 else np.uint32(1)))
    return q if b != 0 else np.uint32(on_zero)


@njit(**_opts)
def uint_rem_u32(a, b):
    """uint_rem for u32 operands (np.uint32 values): x % 0 = x."""
    d = b if b != 0 else np.uint32(1)
    q = np.uint32(np.float64(a) / np.float64(d))
    r = np.uint32(a - np.uint32(q * d))
    return r if b != 0 else a


@njit(**_opts)
def shift_left(u, amount, n):
    """``u`` << ``amount``, both the n-bit patterns of the operands as uint64 (a negative
    amount is a huge one): amounts >= n shift every bit out."""
    s = amount if amount < n else np.uint64(0)
    r = u << s
    return r if amount < n else np.uint64(0)


@njit(**_opts)
def shift_right_logical(u, amount, n):
    """``u`` >> ``amount`` filling with zeros (uint64 bit patterns as for shift_left)."""
    s = amount if amount < n else np.uint64(0)
    r = u >> s
    return r if amount < n else np.uint64(0)


@njit(**_opts)
def shift_right_arithmetic(s, amount, n):
    """``s`` is the operand's bits as a signed number of its width: the top bit is copied
    in (on unsigned types too); amounts >= n give the sign fill."""
    k = np.int64(amount) if amount < n else np.int64(n - 1)
    return s >> k


@njit(**_opts)
def int_pow(base, e, n, one, all_ones):
    """XLA's integer power: six squarings, so only the exponent's low 6 bits count; an
    exponent with its top bit set (``e`` holds the n exponent bits as uint64) gives 0 unless
    the base is 1 or all bits set (-1).  Products wrap (the loop's cast truncates)."""
    acc = one
    sq = base
    bits = e
    for _ in range(6):
        acc = acc * sq if bits & np.uint64(1) else acc
        sq = sq * sq
        bits = bits >> np.uint64(1)
    negative = (e >> np.uint64(n - 1)) & np.uint64(1)
    unit = base == one or base == all_ones
    return acc if (negative == 0 or unit) else acc ^ acc


@njit(**_opts)
def count_leading_zeros(u, n):
    """Leading zero bits of the n-bit pattern ``u`` (uint64): a branch-free binary search."""
    length = np.uint64(0)
    for s in (32, 16, 8, 4, 2, 1):
        high = u >> np.uint64(s)
        has = high != 0
        length += np.uint64(s) if has else np.uint64(0)
        u = high if has else u
    length += np.uint64(1) if u != 0 else np.uint64(0)
    return np.int64(n) - np.int64(length)


@njit(**_opts)
def popcount(u):
    """Bits set in the uint64 ``u`` (SWAR: sums of pairs, nibbles, bytes)."""
    u = u - ((u >> np.uint64(1)) & np.uint64(0x5555555555555555))
    u = (u & np.uint64(0x3333333333333333)) + ((u >> np.uint64(2)) & np.uint64(0x3333333333333333))
    u = (u + (u >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return np.int64((u * np.uint64(0x0101010101010101)) >> np.uint64(56))


@njit(**_opts)
def wrap_signed(v, n):
    """The n-bit two's-complement value of the int64 ``v`` (s4, s2)."""
    m = np.int64(1) << n
    w = v & (m - 1)
    return w - m if w >= (m >> 1) else w


@njit(**_opts)
def wrap_unsigned(v, n):
    """The n-bit unsigned value of ``v`` (u4, u2)."""
    return np.int64(v) & ((np.int64(1) << n) - 1)


@njit(**_opts)
def float_to_int(x, lower, upper, lo_int, hi_int):
    """Float -> integer as XLA:CPU converts: toward zero, saturating at the type's limits
    (``upper`` is the first value out of range, 2^(n-1) or 2^n), NaN -> 0.  Not for u64."""
    t = np.trunc(np.float64(x))
    inside = t if (t < upper and t >= lower) else 0.0   # out-of-range values never reach the cast
    r = np.int64(inside)
    r = hi_int if t >= upper else r
    r = lo_int if t < lower else r
    return r


@njit(**_opts)
def f32_to_int(x, lower, upper, lo_int, hi_int):
    """``float_to_int`` of an f32 into an integer type of 32 bits or fewer (signed; unsigned
    up to 16 bits), computed in f32 and int32: the same values (an f32's truncation is an
    f32; the limits 2^(n-1), 2^n and -2^(n-1) are f32s, so every compare decides alike; NaN
    fails them all, 0), with vectors twice as wide as f64's and int64's (an f32 -> s32
    loop of 4M: 4.4 ms against JAX's 2.4)."""
    t = np.float32(np.trunc(np.float32(x)))
    up, low = np.float32(upper), np.float32(lower)
    inside = t if (t < up and t >= low) else np.float32(0.0)
    r = np.int32(inside)
    r = np.int32(hi_int) if t >= up else r
    r = np.int32(lo_int) if t < low else r
    return r


@njit(**_opts)
def float_to_uint64(x):
    """Float -> u64: toward zero, saturating, NaN -> 0 (no int64 in between)."""
    t = np.trunc(np.float64(x))
    inside = t if t < 18446744073709551616.0 else 0.0
    inside = inside if inside >= 0.0 else 0.0
    r = np.uint64(inside) if t == t else np.uint64(0)
    r = np.uint64(0xFFFFFFFFFFFFFFFF) if t >= 18446744073709551616.0 else r
    return np.uint64(0) if t < 0.0 else r


# -- floats ---------------------------------------------------------------------------------------

@njit(**_opts)
def signbit(x):
    return math.copysign(1.0, x) < 0


@njit(**_opts)
def pick(p, a, b):
    """select: ``a if p else b`` with both operands read first (the emitted select), so that
    a fused loop's loads are unconditional and LLVM makes a blend, which vectorises: the
    Python conditional put each load on its own branch, mispredicted half the time on a
    random predicate (jnp.where(x > 0, x, y) of f32[4M]: 34 ms)."""
    return a if p else b


@njit(**_opts)
def fmax(a, b):
    """maximum: NaN propagates; +0.0 > -0.0."""
    r = a if a > b else b
    r = (b if signbit(a) else a) if a == b else r
    r = b if b != b else r
    return a if a != a else r


@njit(**_opts)
def fmin(a, b):
    """minimum: NaN propagates; -0.0 < +0.0."""
    r = a if a < b else b
    r = (a if signbit(a) else b) if a == b else r
    r = b if b != b else r
    return a if a != a else r


@njit(**_opts)
def fsign(x):
    """sign: -1, +1; +-0 and NaN are returned as they are."""
    s = math.copysign(1.0, x)
    return x if (x != x or x == 0) else s


@njit(**_opts)
def round_afz(x):
    """Round half away from zero."""
    r = np.trunc(x)
    return r + math.copysign(1.0, x) if abs(x - r) >= 0.5 else r


@njit(**_opts)
def total_order_key32(x):
    """f32 bits as an int32 ordered like XLA's total order (-NaN < -Inf < ... < +NaN)."""
    s = np.float32(x).view(np.int32)
    return s ^ np.int32(0x7FFFFFFF) if s < 0 else s


@njit(**_opts)
def total_order_key64(x):
    s = np.float64(x).view(np.int64)
    return s ^ np.int64(0x7FFFFFFFFFFFFFFF) if s < 0 else s


@njit(**_opts)
def fpow(a, b, one, bits):
    """a^b (C's pow): pow(1, y) = pow(x, +-0) = 1, but NaN when the other operand is a
    signaling NaN (the C library's rule, XLA:CPU's, and the reference's: ``ops.elementwise``),
    made explicit whatever the processor's libm path answers.  ``one`` is 1 in the operands'
    type; ``bits``: 32 for f32, 64 for f64, 0 for the narrow floats computed in f32 (whose
    signaling NaNs the reference reads as quiet: pow(1, y) = 1 there).  The bit test is
    written here, not called: under the CUDA simulator this runs as Python, and a call to a
    compiled helper would pass the NaN through a Python float, which quiets it."""
    r = np.power(a, b)
    if a == one or b == 0:
        r = one
        other = b if a == one else a
        if bits == 32:
            u = np.float32(other).view(np.uint32)
            if (u & np.uint32(0x7FC00000)) == np.uint32(0x7F800000) and (u & np.uint32(0x003FFFFF)) != 0:
                r = a + b
        elif bits == 64:
            v = np.float64(other).view(np.uint64)
            if ((v & np.uint64(0x7FF8000000000000)) == np.uint64(0x7FF0000000000000)
                    and (v & np.uint64(0x0007FFFFFFFFFFFF)) != 0):
                r = a + b
    return r


@njit(**_opts)
def fpow_of_denormal(a, b, one, exponent):
    """pow(a, b) of a denormal ``a`` under XLA:CPU's DAZ: it reads as 2**exponent in magnitude
    (ops.elementwise.xla_pow_of_denormal; -150 for f32, -1075 for f64).  The emitter calls it
    where ``a`` is denormal and ``fpow`` elsewhere (a conditional expression, not a call from
    here to fpow, which the CUDA simulator would make through a Python float)."""
    sign = np.power(math.copysign(1.0, a), np.float64(b))
    return one * (sign * np.exp2(exponent * np.float64(b)))


# -- narrow floats: round an f32 to a format, in f32 ------------------------------------------------

def _format(mantissa_bits, emin, max_value, overflow, no_negative_zero=False):
    """round_narrow's constants for a format (computed here: Numba freezes them)."""
    return (23 - mantissa_bits,                                       # f32 bits rounded away
            np.float32(1.5 * 2.0 ** (emin - mantissa_bits + 23)),     # rounds at its denormal step
            np.float32(2.0 ** emin),                                  # smallest normal
            np.float32(max_value), np.float32(overflow), no_negative_zero)


_F16 = _format(10, -14, 65504.0, np.inf)
_F8E5M2 = _format(2, -14, 57344.0, np.inf)
_F8E4M3FN = _format(3, -6, 448.0, np.nan)            # no Inf: overflow (and Inf) gives NaN
_F8E4M3 = _format(3, -6, 240.0, np.inf)
_F8E3M4 = _format(4, -2, 15.5, np.inf)
_F8E4M3FNUZ = _format(3, -7, 240.0, np.nan, True)    # fnuz: no Inf, no -0
_F8E5M2FNUZ = _format(2, -15, 57344.0, np.nan, True)
_F8E4M3B11FNUZ = _format(3, -10, 30.0, np.nan, True)


@njit(**_opts)
def round_narrow(x, shift, c, min_normal, max_value, overflow, no_negative_zero):
    """Round the f32 ``x`` to nearest even in a format whose mantissa is ``shift`` bits
    shorter than f32's, with smallest normal ``min_normal`` (denormals kept); magnitudes
    above ``max_value`` become ``overflow`` (Inf or NaN); NaN stays NaN.  Returns an f32."""
    x = np.float32(x)
    a = abs(x)
    # normal numbers: round the f32 bits (a carry into the exponent is right)
    u = np.int64(np.float32(a).view(np.uint32))
    u = (u + ((np.int64(1) << (shift - 1)) - 1) + ((u >> shift) & 1)) & ~((np.int64(1) << shift) - 1)
    normal = np.uint32(u).view(np.float32)
    # denormals of the format are multiples of one step: adding c = 1.5 * step * 2^23 makes
    # the f32 addition round there (the sum stays in c's binade)
    tiny = (a + c) - c
    r = tiny if a < min_normal else normal
    r = overflow if r > max_value else r
    r = np.float32(math.copysign(r, x))
    r = abs(r) if (no_negative_zero and r == 0) else r
    return x if x != x else r


@njit(**_opts)
def round_bf16(x):
    """f32 -> bf16 (held in an f32): round the low 16 bits away, to nearest even."""
    x = np.float32(x)
    u = np.int64(np.float32(x).view(np.uint32))
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    r = np.uint32(u).view(np.float32)
    return x if x != x else r


@njit(**_opts)
def bf16_bits_to_f32(u):
    """A bf16 read on its bits (uint16) as its f32 carrier: the high half of the f32 (as
    ml_dtypes' astype and ``cpu.elementwise.bf16_to_f32``)."""
    return np.uint32(np.uint32(u) << np.uint32(16)).view(np.float32)


@njit(**_opts)
def f32_to_bf16_bits(x):
    """An f32 carrier stored as bf16 bits (uint16): ``cpu.elementwise.f32_to_bf16``'s rounding
    (to nearest even; every NaN the quiet NaN 0x7FC0 of its sign), as ml_dtypes' astype."""
    u = np.float32(x).view(np.uint32)
    # (every step cast back to uint32: Numba widens uint32 arithmetic to 64 bits, and the
    # loop then did not vectorise, 2x slower)
    hi = np.uint32(u >> np.uint32(16))
    rounded = np.uint32(np.uint32(u + np.uint32(0x7FFF) + (hi & np.uint32(1))) >> np.uint32(16))
    quiet = np.uint32((hi & np.uint32(0x8000)) | np.uint32(0x7FC0))
    nan = (u & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    return np.uint16(quiet if nan else rounded)


@njit(**_opts)
def round_f16(x):
    return round_narrow(x, *_F16)


@njit(**_opts)
def round_f8e5m2(x):
    return round_narrow(x, *_F8E5M2)


@njit(**_opts)
def round_f8e4m3fn(x):
    return round_narrow(x, *_F8E4M3FN)


@njit(**_opts)
def round_f8e4m3(x):
    return round_narrow(x, *_F8E4M3)


@njit(**_opts)
def round_f8e3m4(x):
    return round_narrow(x, *_F8E3M4)


@njit(**_opts)
def round_f8e4m3fnuz(x):
    return round_narrow(x, *_F8E4M3FNUZ)


@njit(**_opts)
def round_f8e5m2fnuz(x):
    return round_narrow(x, *_F8E5M2FNUZ)


@njit(**_opts)
def round_f8e4m3b11fnuz(x):
    return round_narrow(x, *_F8E4M3B11FNUZ)


@njit(**_opts)
def round_f16_f64(x):
    """f64 -> f16 directly (NumPy's conversion, no f32 in between), held in an f64."""
    x = np.float64(x)
    a = abs(x)
    u = np.float64(a).view(np.int64)
    u = (u + ((1 << 41) - 1) + ((u >> 42) & 1)) & ~((1 << 42) - 1)
    normal = np.int64(u).view(np.float64)
    c = 1.5 * 2.0 ** (-24 + 52)
    tiny = (a + c) - c
    r = tiny if a < 2.0 ** -14 else normal
    r = np.inf if r > 65504.0 else r
    r = math.copysign(r, x)
    return x if x != x else r


# -- reduce-precision: the reference's bit algorithm ---------------------------------------------

@njit(**_opts)
def reduce_precision_bits(bits, n, src_exponent, src_mantissa, exponent_bits, mantissa_bits):
    """ReducePrecision on the n-bit pattern ``bits`` (int64) of a float with
    ``src_exponent``/``src_mantissa`` bits: round the mantissa to nearest even, then send
    values above the new range to Inf and below its smallest normal to zero (NaN: the
    caller keeps the operand)."""
    if mantissa_bits < src_mantissa:
        shift = src_mantissa - mantissa_bits
        last = (bits >> shift) & 1
        bits = (bits + last + (np.int64(1) << (shift - 1)) - 1) & ~((np.int64(1) << shift) - 1)
    if exponent_bits < src_exponent:
        exponent_mask = ((np.int64(1) << src_exponent) - 1) << src_mantissa
        sign = bits & (np.int64(1) << (n - 1))
        src_bias = (1 << (src_exponent - 1)) - 1
        new_bias = (1 << (exponent_bits - 1)) - 1
        exponent = bits & exponent_mask
        if exponent > (np.int64(src_bias + new_bias) << src_mantissa):
            bits = sign | exponent_mask
        elif exponent <= (np.int64(src_bias - new_bias) << src_mantissa):
            bits = sign
    return bits


@njit(**_opts)
def reduce_precision_f32(x, exponent_bits, mantissa_bits):
    x = np.float32(x)
    b = np.int64(np.float32(x).view(np.uint32))
    b = reduce_precision_bits(b, 32, 8, 23, exponent_bits, mantissa_bits) & 0xFFFFFFFF
    r = np.uint32(b).view(np.float32)
    return x if x != x else r


@njit(**_opts)
def reduce_precision_f64(x, exponent_bits, mantissa_bits):
    x = np.float64(x)
    b = np.float64(x).view(np.int64)
    if exponent_bits < 11 or mantissa_bits < 52:
        b = reduce_precision_bits(b, 64, 11, 52, exponent_bits, mantissa_bits)
    r = np.int64(b).view(np.float64)
    return x if x != x else r


@njit(**_opts)
def encode_narrow(x, exponent_bits, mantissa_bits, nan_bits, inf_bits):
    """The bit pattern of the f32 ``x`` (exactly representable) in an IEEE-style format
    (bias 2^(e-1)-1, denormals); ``nan_bits``/``inf_bits`` are the format's NaN and Inf
    patterns (e4m3fn has no Inf: its NaN is given for both)."""
    x = np.float32(x)
    n = 1 + exponent_bits + mantissa_bits
    sign = (np.int64(np.float32(x).view(np.uint32)) >> 31) << (n - 1)
    a = np.float64(abs(x))
    bias = (1 << (exponent_bits - 1)) - 1
    if x != x:
        return sign | nan_bits
    if a == np.inf:
        return sign | inf_bits
    if a < 2.0 ** (1 - bias):        # denormal (or zero): a multiple of the smallest one
        return sign | np.int64(a * 2.0 ** (mantissa_bits + bias - 1))
    m, e = math.frexp(a)             # a = m 2^e, 0.5 <= m < 1
    field = np.int64(e - 1 + bias)
    fraction = np.int64((m * 2.0 - 1.0) * 2.0 ** mantissa_bits)
    return sign | (field << mantissa_bits) | fraction


@njit(**_opts)
def decode_narrow(bits, exponent_bits, mantissa_bits, has_inf):
    """The value of an IEEE-style n-bit pattern, as f32 (``has_inf`` False: e4m3fn, where
    only the all-ones pattern is NaN and the top exponent holds normal numbers)."""
    n = 1 + exponent_bits + mantissa_bits
    bias = (1 << (exponent_bits - 1)) - 1
    negative = (bits >> (n - 1)) & 1
    field = (bits >> mantissa_bits) & ((1 << exponent_bits) - 1)
    fraction = bits & ((1 << mantissa_bits) - 1)
    top = (1 << exponent_bits) - 1
    if field == top and (has_inf or fraction == (1 << mantissa_bits) - 1):
        v = np.inf if (has_inf and fraction == 0) else np.nan
    elif field == 0:
        v = fraction * 2.0 ** (1 - bias - mantissa_bits)
    else:
        v = (1.0 + fraction * 2.0 ** -mantissa_bits) * 2.0 ** (field - bias)
    return np.float32(-v if negative else v)


@njit(**_opts)
def reduce_precision_narrow(x, exponent_bits, mantissa_bits, src_exponent, src_mantissa,
                            nan_bits, inf_bits, has_inf):
    """ReducePrecision of a narrow float carried as f32, on the narrow type's own bits."""
    x = np.float32(x)
    n = 1 + src_exponent + src_mantissa
    b = encode_narrow(x, src_exponent, src_mantissa, nan_bits, inf_bits)
    b = reduce_precision_bits(b, n, src_exponent, src_mantissa, exponent_bits, mantissa_bits)
    r = decode_narrow(b & ((1 << n) - 1), src_exponent, src_mantissa, has_inf)
    return x if x != x else r


# -- f32 transcendentals without branches --------------------------------------------------------
# Range reduction with rounding by a magic constant (1.5 * 2^23), polynomials fitted for
# these intervals (near-minimax), scaling by 2^k built from bits.

@njit(inline="always", **_poly_opts)
def _exp_core_f32(xc):
    """e^xc for an f32 xc already clamped into [-104, 89] (``exp_f32``) or [0, 20]
    (``_exp_tanh_f32``): x = k ln2 + r, |r| <= ln2/2, e^r = 1 + r + r^2 P(r); inlined into
    both (Numba's inlining: the callers' own instructions, so the same bits)."""
    t = xc * np.float32(1.44269504) + np.float32(12582912.0)
    kf = t - np.float32(12582912.0)                    # k = round(x / ln2), as a float
    r = xc - kf * np.float32(0.693145751953125)       # ln2 in two parts: the first exact
    r = r - kf * np.float32(1.428606765330187e-06)
    p = np.float32(0.0013751407386735082) * r + np.float32(0.008368915878236294)
    p = p * r + np.float32(0.04166953265666962)
    p = p * r + np.float32(0.166665181517601)
    p = p * r + np.float32(0.49999988079071045)
    p = np.float32(1.0) + r + (r * r) * p
    # 2^k in two factors (2^k may be denormal or > max), their bits (k + 127) << 23 computed
    # in f32 (exact: small multiples of 2^23) and converted once: no 64-bit integer
    # arithmetic in the loop, so that it vectorises as wide as its f32 values
    k1 = np.floor(kf * np.float32(0.5))
    s1 = np.int32(k1 * np.float32(8388608.0) + np.float32(1065353216.0)).view(np.float32)
    s2 = np.int32((kf - k1) * np.float32(8388608.0) + np.float32(1065353216.0)).view(np.float32)
    return (p * s1) * s2


@njit(**_poly_opts)
def exp_f32(x):
    """e^x for f32: x = k ln2 + r, |r| <= ln2/2, e^r = 1 + r + r^2 P(r); max error 1 ulp."""
    x = np.float32(x)
    xc = x if x < np.float32(89.0) else np.float32(89.0)        # e^89 overflows anyway
    xc = xc if xc > np.float32(-104.0) else np.float32(-104.0)  # e^-104 underflows to 0
    y = _exp_core_f32(xc)
    return y if x == x else x


@njit(**_poly_opts)
def log_f32(x):
    """ln x for f32: x = 2^k m, m in [sqrt(1/2), sqrt(2)); ln m = 2 atanh(s), s = (m-1)/(m+1),
    = 2s + s^3 P(s^2); max error 1 ulp.  ln 0 = -Inf, ln(x<0) = NaN."""
    x = np.float32(x)
    small = x < np.float32(1.1754943508222875e-38)     # denormal: scale up first
    xs = x * np.float32(8388608.0) if small else x
    u = np.float32(xs).view(np.int32)
    # int32 throughout (Numba widens int32 arithmetic to int64: half the vector width); for
    # x >= 0, the only x whose result comes from here, nothing wraps
    k = np.int32(np.int32(u - np.int32(0x3F3504F3)) >> np.int32(23))
    m = np.int32(u - np.int32(k << np.int32(23))).view(np.float32)
    kf = np.float32(np.int32(k - np.int32(23)) if small else k)
    f = m - np.float32(1.0)
    s = f / (np.float32(2.0) + f)
    z = s * s
    p = np.float32(0.298753023147583) * z + np.float32(0.3997737765312195)
    p = p * z + np.float32(0.6666677594184875)
    log_m = np.float32(2.0) * s + s * z * p
    y = kf * np.float32(0.693145751953125) + (kf * np.float32(1.428606765330187e-06) + log_m)
    y = np.float32(-np.inf) if x == 0 else y
    y = x if x == np.float32(np.inf) else y
    return np.float32(np.nan) if (x < 0 or x != x) else y


@njit(**_poly_opts)
def _exp_tanh_f32(x):
    """``exp_f32`` of x >= 0 as tanh_f32 reads it: x above 20 taken as 20 (every e >= e^20
    makes 1 - 2 / (e + 1) exactly 1, as the e of a larger x did), no lower bound, no NaN
    test (tanh_f32 takes a NaN from its other branch); the same bits as ``exp_f32`` below
    20.  Five vector instructions less an element (tanh_f32 is bit for bit what it was for
    every f32: ``tests/test_numba_elementwise.py``)."""
    xc = x if x < np.float32(20.0) else np.float32(20.0)
    return _exp_core_f32(xc)


@njit(**_poly_opts)
def tanh_f32(x):
    """tanh for f32: an odd polynomial below 0.625, 1 - 2/(e^2|x| + 1) above; 2 ulp."""
    x = np.float32(x)
    a = abs(x)
    z = x * x
    p = np.float32(-0.005691985599696636) * z + np.float32(0.020626291632652283)
    p = p * z + np.float32(-0.05373531952500343)
    p = p * z + np.float32(0.13331381976604462)
    p = p * z + np.float32(-0.3333328068256378)
    small = x + x * z * p
    e = _exp_tanh_f32(a + a)
    large = np.float32(1.0) - np.float32(2.0) / (e + np.float32(1.0))
    r = large if a >= np.float32(0.625) else small
    # x's sign bit or-ed in: the sign of +-large, and of a zero (-0.0 + +0.0 would lose it);
    # small has x's sign already. A NaN x comes out of `small` (a >= 0.625 is false) quiet,
    # with its payload and sign (every NaN in it is x's, quieted). One select and bit
    # operations, not three selects: with more, LLVM kept branches and the loop did not
    # vectorise (12-30 ns an element, 1 now)
    return np.int32(np.float32(r).view(np.int32) | (np.float32(x).view(np.int32) & np.int32(-2147483648))).view(
        np.float32)


#: erf_f32's rational function x P(x^2) / Q(x^2) on [-4, 4] (fitted here: relative least
#: squares on Chebyshev nodes, reweighted toward the worst point, with mpmath's erf as the
#: truth; the coefficients of the powers of x^2, lowest first)
_ERF_P = (1.128379225730896, 0.1843213438987732, 0.05439048632979393, 0.003838249947875738,
          0.00038724756450392306, 4.909519248030847e-06, -1.4299875950030128e-08)
_ERF_Q = (1.0, 0.4966840445995331, 0.11376268416643143, 0.015465887263417244, 0.001315522356890142,
          6.523732008645311e-05)


@njit(**_poly_opts)
def erf_f32(x):
    """erf for f32 as one rational function of x clamped into [-4, 4] (erf(3.92) rounds to 1
    already), in selects (a loop calling it vectorises: Numba's ``math.erf`` is a library
    call an element, ~25x XLA's time); results above 1 in magnitude cut to 1; +-0 and NaN
    are returned as they are.  Within 6 ulp of erf (3.6e-7 relative: near 1, where its ulp is
    2^-24; ``tests/test_numba_elementwise.py``)."""
    x = np.float32(x)
    c = np.float32(4.0) if x > np.float32(4.0) else x
    c = np.float32(-4.0) if c < np.float32(-4.0) else c   # (a NaN stays NaN: the result's)
    z = c * c
    p = np.float32(_ERF_P[6])
    p = p * z + np.float32(_ERF_P[5])
    p = p * z + np.float32(_ERF_P[4])
    p = p * z + np.float32(_ERF_P[3])
    p = p * z + np.float32(_ERF_P[2])
    p = p * z + np.float32(_ERF_P[1])
    p = p * z + np.float32(_ERF_P[0])
    q = np.float32(_ERF_Q[5])
    q = q * z + np.float32(_ERF_Q[4])
    q = q * z + np.float32(_ERF_Q[3])
    q = q * z + np.float32(_ERF_Q[2])
    q = q * z + np.float32(_ERF_Q[1])
    q = q * z + np.float32(_ERF_Q[0])
    y = c * p / q
    y = np.float32(1.0) if y > np.float32(1.0) else y
    return np.float32(-1.0) if y < np.float32(-1.0) else y


#: expm1_f32's polynomial (fitted as ``_ERF_SMALL``): (e^x - 1 - x - x^2/2) / x^3 on [-0.5, 0.5]
_EXPM1 = (0.16666666, 0.041666184, 0.008333431, 0.0013966463, 0.00019867036)


@njit(**_poly_opts)
def expm1_f32(x):
    """e^x - 1 for f32 in selects (Numba's ``np.expm1`` of an f32 is a library call an
    element, ~12x XLA's time): |x| < 0.5: x + x^2 (1/2 + x Q(x)); else ``exp_f32``(x) - 1
    (overflow to Inf, -1 below); +-0 and NaN are returned as they are.  Within 3 ulp of
    e^x - 1 (``tests/test_numba_elementwise.py``)."""
    x = np.float32(x)
    q = np.float32(_EXPM1[4])
    q = q * x + np.float32(_EXPM1[3])
    q = q * x + np.float32(_EXPM1[2])
    q = q * x + np.float32(_EXPM1[1])
    q = q * x + np.float32(_EXPM1[0])
    small = x + x * x * (np.float32(0.5) + x * q)
    large = exp_f32(x) - np.float32(1.0)
    y = small if abs(x) < np.float32(0.5) else large
    return x if (x == 0) | (x != x) else y


@njit(**_poly_opts)
def logistic_f32(x):
    """1 / (1 + e^-x) for f32, as e / (1 + e) with e = e^-|x| <= 1 for x < 0 (no overflow:
    tiny results keep their precision); 2 ulp."""
    x = np.float32(x)
    e = exp_f32(-abs(x))
    numerator = np.float32(1.0) if x >= 0 else e
    r = numerator / (np.float32(1.0) + e)
    return r if x == x else x


#: log1p_f32's constants (the C library's f32 log1p: glibc's, from Sun's fdlibm): ln 2 in two
#: parts (the first with 12 trailing zero bits) and the coefficients of its series in s^2
_L1P_LN2_HI, _L1P_LN2_LO = 6.9313812256e-01, 9.0580006145e-06
_L1P = (6.6666668653e-01, 4.0000000596e-01, 2.8571429849e-01, 2.2222198546e-01,
        1.8183572590e-01, 1.5313838422e-01, 1.4798198640e-01)


@njit(**_opts)
def log1p_f32(x):
    """ln(1 + x) for f32, bit for bit the C library's ``log1pf`` (glibc's, the algorithm of
    Sun's fdlibm: what Numba's ``np.log1p`` of an f32 calls, as the fused loops did before;
    the reference computes f32 in f64), in selects instead of its branches so that a loop
    calling it vectorises (a ``log1pf`` call an element was ~30 ns).  1 + x = 2^k (1 + f),
    f in [sqrt(1/2) - 1, sqrt(2) - 1), c the rounding error of 1 + x divided by it;
    ln(1 + f) = f - (f^2/2 - s (f^2/2 + R(s^2))), s = f / (2 + f); f is x itself (k = 0,
    c = 0) for -0.2929 <= x < 0.41422; x for |x| < 2^-29.  Checked equal to ``log1pf`` for
    every f32 bit pattern (``tests/test_numba_elementwise.py`` samples them).  No FMA
    contraction: the C library rounds every product."""
    x = np.float32(x)
    hx = np.float32(x).view(np.int32)
    ax = np.int32(hx & np.int32(0x7FFFFFFF))
    big = hx >= np.int32(0x5A000000)                   # x >= 2^53: 1 + x is x
    u1 = np.float32(1.0) + x
    u = x if big else u1
    hu = np.float32(u).view(np.int32)
    k = np.int32(np.int32(hu >> np.int32(23)) - np.int32(127))
    c = (np.float32(1.0) - (u1 - x)) if k > 0 else (x - (u1 - np.float32(1.0)))
    c = np.float32(0.0) if big else c / u1
    hm = np.int32(hu & np.int32(0x007FFFFF))
    upper = hm >= np.int32(0x3504F7)                    # 1 + f above sqrt(2): halve it
    k = np.int32(k + np.int32(upper))
    m = np.int32(hm | (np.int32(0x3F000000) if upper else np.int32(0x3F800000))).view(np.float32)
    hu = np.int32(np.int32(np.int32(0x00800000) - hm) >> np.int32(2)) if upper else hm
    # outside -0.2929 <= x < 0.41422 (inside, f is x itself and k = 0); a mask and a
    # product, not selects on one condition: LLVM made those a branch, and the loop scalar
    far = ((hx <= 0) | (hx >= np.int32(0x3ED413D7))) & ((hx >= 0) | (ax > np.int32(0x3E95F61F)))
    f = m - np.float32(1.0) if far else x
    k = np.int32(k * np.int32(far))
    short = (hu == 0) & far
    c = np.float32(0.0) if k == 0 else c
    kf = np.float32(k)
    hfsq = np.float32(0.5) * f * f
    s = f / (np.float32(2.0) + f)
    z = s * s
    r = np.float32(_L1P[6])
    r = np.float32(_L1P[5]) + z * r
    r = np.float32(_L1P[4]) + z * r
    r = np.float32(_L1P[3]) + z * r
    r = np.float32(_L1P[2]) + z * r
    r = np.float32(_L1P[1]) + z * r
    r = z * (np.float32(_L1P[0]) + z * r)
    low = kf * np.float32(_L1P_LN2_LO) + c
    y = kf * np.float32(_L1P_LN2_HI) - ((hfsq - (s * (hfsq + r) + low)) - f)
    # |f| < 2^-20 (hu == 0): a shorter series
    r2 = hfsq * (np.float32(1.0) - np.float32(0.6666666666666666) * f)
    y2 = kf * np.float32(_L1P_LN2_HI) - ((r2 - low) - f)
    y = y2 if short else y
    y = x if ax < np.int32(0x31000000) else y          # |x| < 2^-29
    y = np.float32(-np.inf) if x == np.float32(-1.0) else y
    y = np.int32(-4194304).view(np.float32) if x < np.float32(-1.0) else y   # 0/0's NaN
    return x + x if ((x != x) | (x == np.float32(np.inf))) else y


# -- f64 transcendentals without branches --------------------------------------------------------
# As the f32 ones: Numba's np.exp / np.expm1 / np.tanh of an f64 are a library call an element
# (4M elements: 4.6 / 12 / 18 ms, XLA's 1.1 / 2.3 / 1.1); these vectorise.

#: ln 2 in two parts, the first with 32 trailing zero bits (k * _LN2_HI is exact for every k
#: of the range), and exp_f64's polynomial P of e^r = 1 + r + r^2 P(r) on |r| <= ln2/2
#: (fitted here: relative least squares on Chebyshev nodes, mpmath's exp as the truth)
_LN2_HI, _LN2_LO = 0.6931467056274414, 4.7493250390316726e-07
_EXP64 = (0.5000000000000001, 0.1666666666666664, 0.041666666666624386, 0.008333333333360084,
          0.0013888888917104204, 0.00019841269772982644, 2.4801521445661873e-05, 2.7557368517088595e-06,
          2.7620024539571695e-07, 2.5063341564076658e-08)


@njit(inline="always", **_poly_opts)
def _exp_poly_f64(r):
    """e^r = 1 + r + r^2 P(r) for |r| <= ln2/2 (``_EXP64``'s P), within an ulp of f64."""
    p = _EXP64[9] * r + _EXP64[8]
    p = p * r + _EXP64[7]
    p = p * r + _EXP64[6]
    p = p * r + _EXP64[5]
    p = p * r + _EXP64[4]
    p = p * r + _EXP64[3]
    p = p * r + _EXP64[2]
    p = p * r + _EXP64[1]
    p = p * r + _EXP64[0]
    p = 1.0 + r + (r * r) * p
    return p


@njit(inline="always", **_poly_opts)
def _exp_core_f64(xc):
    """e^xc for an f64 xc already clamped into [-746, 710]: x = k ln2 + r, |r| <= ln2/2,
    e^r = 1 + r + r^2 P(r), times 2^k in two factors (2^k may be denormal or above the
    largest f64) whose bits are built from k in f64 arithmetic."""
    t = xc * 1.4426950408889634 + 6755399441055744.0   # (1.5 * 2^52: rounds to an integer)
    kf = t - 6755399441055744.0
    r = xc - kf * _LN2_HI
    r = r - kf * _LN2_LO
    p = _exp_poly_f64(r)
    k1 = np.floor(kf * 0.5)
    s1 = np.int64(k1 * 4503599627370496.0 + 4607182418800017408.0).view(np.float64)
    s2 = np.int64((kf - k1) * 4503599627370496.0 + 4607182418800017408.0).view(np.float64)
    return (p * s1) * s2


@njit(**_poly_opts)
def exp_f64(x):
    """e^x for f64 (``_exp_core_f64``): within 1 ulp; +Inf above 709.78, 0 below -745.13."""
    xc = x if x < 710.0 else 710.0
    xc = xc if xc > -746.0 else -746.0
    y = _exp_core_f64(xc)
    return y if x == x else x


#: pow_f32's series of ln m = 2 atanh(s) = 2s + s z P(z), z = s^2: P's coefficients 2/(2k+1),
#: k = 1..10 (|s| <= 0.1716: the terms left out are below 2^-55 of 2s); 1/ln 2 in two parts
_POW_LOG = tuple(2.0 / (2 * k + 1) for k in range(1, 11))
_INV_LN2_HI, _INV_LN2_LO = 1.4426950408889634, 2.0355273740931033e-17
#: the processor's default NaN (x86: the sign bit set), what C's pow returns for a negative
#: base and an exponent that is no integer
_DEFAULT_NAN32 = 0xFFC00000


@njit(inline="always", **_poly_opts)
def pow_f32(a, b, bits, daz):
    """a^b for f32 operands (and the narrow floats computed in f32), as the reference
    computes it: in f64, rounded once to f32.  |a| = 2^k m (m in [sqrt(1/2), sqrt(2))),
    log2 m by the atanh series; b log2 |a| = b k + b log2 m, the first part exact, so that
    its integer part n and its fraction f = (b k - n) + b log2 m lose nothing; 2^f by
    ``exp_f64``'s polynomial, times 2^n exactly; integer exponents 1..63 by squarings.
    Within a few f64 ulps of C's pow: the same f32 but where the power lies that close to a
    rounding midpoint without being exact (exact powers -- of two, 2^-150 among them, and
    integer powers that are f64s -- come out exact, so an exact midpoint rounds to even).  No branch and no library call: a loop of it
    vectorises (``np.power`` was a call an element, 5 ns).  C's special cases: pow(x, +-0)
    = pow(1, y) = 1 (``fpow``'s rule for a signaling NaN when ``bits`` is 32), pow(+-1,
    +-Inf) = 1, a NaN operand gives itself (a + b), a negative finite base with a finite
    exponent that is no integer the default NaN, odd integer exponents keep the base's sign
    (-0 and -Inf too).  ``daz``: a denormal base read as 2^-150 in magnitude, as XLA:CPU's
    pow under DAZ reads it (``fpow_of_denormal``)."""
    x = np.float64(a)
    y = np.float64(b)
    ax = abs(x)
    if daz:
        ax = 7.006492321624085e-46 if ((ax != 0.0) & (ax < 1.1754943508222875e-38)) else ax
    u = np.float64(ax).view(np.int64)
    k = (u - np.int64(0x3FE6A09E667F3BCD)) >> np.int64(52)
    m = np.int64(u - (k << np.int64(52))).view(np.float64)
    f = m - 1.0
    s = f / (2.0 + f)
    z = s * s
    p = _POW_LOG[9] * z + _POW_LOG[8]
    p = p * z + _POW_LOG[7]
    p = p * z + _POW_LOG[6]
    p = p * z + _POW_LOG[5]
    p = p * z + _POW_LOG[4]
    p = p * z + _POW_LOG[3]
    p = p * z + _POW_LOG[2]
    p = p * z + _POW_LOG[1]
    p = p * z + _POW_LOG[0]
    ln_m = 2.0 * s + s * (z * p)
    l2 = ln_m * _INV_LN2_HI + ln_m * _INV_LN2_LO
    kf = np.float64(k)
    kf = -np.inf if ax == 0.0 else kf
    kf = np.inf if ax == np.inf else kf
    l2 = 0.0 if ((ax == 0.0) | (ax == np.inf)) else l2
    whole_part = y * kf          # (exact: 24 bits times at most 9)
    frac_part = y * l2
    # (an infinite exponent: the sign of log2 |a| decides, |a| = 1 aside below; inf * 0 is
    # no part of it)
    t = y * (kf + l2) if abs(y) == np.inf else whole_part + frac_part
    tc = t if t < 130.0 else 130.0      # (2^130 and above: Inf in f32; 2^-160 and below: 0)
    tc = tc if tc > -160.0 else -160.0
    n = (tc + 6755399441055744.0) - 6755399441055744.0   # (1.5 * 2^52: rounds to an integer)
    g = (whole_part - n) + frac_part
    g = g if t == tc else 0.0
    r = g * 0.6931471805599453
    q = _exp_poly_f64(r)
    v = q * np.int64(n * 4503599627370496.0 + 4607182418800017408.0).view(np.float64)   # (times 2^n)
    whole = y == np.floor(y)
    h = y * 0.5
    odd = whole & (h != np.floor(h))
    v = -v if (odd & (np.float64(x).view(np.int64) < 0)) else v
    # an integer exponent 1..63 by squarings, exact where the power is an f64 (3^33, 88^7:
    # an exact f32 midpoint then rounds to even, as the reference's; 2^n is exact above)
    e = np.int64(y) if (whole & (y > 0.0) & (y < 64.0)) else np.int64(0)
    base = -ax if np.float64(x).view(np.int64) < 0 else ax
    acc = 1.0
    for bit in range(6):
        acc = acc * base if (e >> np.int64(bit)) & np.int64(1) else acc
        base = base * base
    v = acc if e != 0 else v
    v = 1.0 if ((ax == 1.0) & (abs(y) == np.inf)) else v
    out = np.float32(v)
    out = np.uint32(_DEFAULT_NAN32).view(np.float32) if (
        (x < 0.0) & (x > -np.inf) & (y != np.floor(y)) & (abs(y) < np.inf)) else out
    out = np.float32(a + b) if ((a != a) | (b != b)) else out
    one = (a == np.float32(1.0)) | (b == np.float32(0.0))
    if bits == 32:   # (fpow's rule, written out for the CUDA simulator as there)
        other = b if a == np.float32(1.0) else a
        w = np.float32(other).view(np.uint32)
        sig = ((w & np.uint32(0x7FC00000)) == np.uint32(0x7F800000)) & ((w & np.uint32(0x003FFFFF)) != 0)
        out = (np.float32(a + b) if sig else np.float32(1.0)) if one else out
    else:
        out = np.float32(1.0) if one else out
    return out


#: expm1_f64's polynomial (fitted as ``_EXP64``): (e^x - 1 - x - x^2/2) / x^3 on [-0.5, 0.5]
_EXPM1_64 = (0.16666666666666666, 0.04166666666666679, 0.008333333333333222, 0.0013888888888792872,
             0.00019841269841585144, 2.4801587517052012e-05, 2.755731894245117e-06, 2.7557121995360896e-07,
             2.5052171394646236e-08, 2.0955691088282387e-09, 1.6080528187867588e-10)


@njit(inline="always", **_poly_opts)   # (else too large for LLVM to inline into a loop: a call an element)
def expm1_f64(x):
    """e^x - 1 for f64: |x| < 0.5: x + x^2 (1/2 + x Q(x)); else ``exp_f64``(x) - 1; +-0 and
    NaN are returned as they are.  Within 3 ulp."""
    q = _EXPM1_64[10] * x + _EXPM1_64[9]
    q = q * x + _EXPM1_64[8]
    q = q * x + _EXPM1_64[7]
    q = q * x + _EXPM1_64[6]
    q = q * x + _EXPM1_64[5]
    q = q * x + _EXPM1_64[4]
    q = q * x + _EXPM1_64[3]
    q = q * x + _EXPM1_64[2]
    q = q * x + _EXPM1_64[1]
    q = q * x + _EXPM1_64[0]
    small = x + x * x * (0.5 + x * q)
    xc = x if x < 710.0 else 710.0
    xc = xc if xc > -746.0 else -746.0
    large = _exp_core_f64(xc) - 1.0
    y = small if abs(x) < 0.5 else large
    return x if (x == 0) | (x != x) else y


@njit(inline="always", **_poly_opts)   # (else too large for LLVM to inline into a loop: a call an element)
def tanh_f64(x):
    """tanh for f64 as -u / (u + 2) with u = e^(-2|x|) - 1 (``expm1_f64``: no cancellation
    near 0), x's sign put back on; +-0 and NaN are returned as they are.  Within 4 ulp."""
    a = abs(x)
    u = expm1_f64(-(a + a))
    y = -u / (u + 2.0)
    y = -y if x < 0 else y
    return x if (x == 0) | (x != x) else y


@njit(**_opts)
def logistic_f64(x):
    return 1.0 / (1.0 + exp_f64(-x))


# -- complex (in complex128; the loop's cast narrows c64 results) ------------------------------

#: the smallest normal f32 and f64 (flush-to-zero thresholds)
_TINY32, _TINY64 = 1.1754943508222875e-38, 2.2250738585072014e-308


@njit(**_opts)
def ftz32(x):
    """x, or a zero of its sign when |x| is an f32 denormal (XLA:CPU's FTZ/DAZ)."""
    return x * np.float32(0.0) if abs(x) < np.float32(_TINY32) else x


@njit(**_opts)
def ftz_pos32(x):
    """``ftz32`` of an f32 that is +0, positive or NaN (``exp_f32``'s results): the same bits
    (a denormal's flush is +0, a NaN is kept) in a compare and a mask, no abs nor product:
    an f32 exp loop flushing its results is about 7% faster."""
    return np.float32(0.0) if x < np.float32(_TINY32) else x


@njit(**_opts)
def ftz64(x):
    return x * 0.0 if abs(x) < _TINY64 else x


_HALF_PI32 = 1.5707963705062866            # np.float32(pi / 2)
_HALF_PI32_BELOW = 1.570796251296997       # the f32 below it
_CBRT32_OF_DENORMAL = -5.595173541877215e-16   # bits 0xa6214518


@njit(**_opts)
def atan2_xla32(y, x):
    """ops.elementwise.xla_atan2 for f32 (carried in f32): XLA:CPU's atan2 under DAZ/FTZ."""
    dy = y != 0 and abs(y) < np.float32(_TINY32)
    dx = x != 0 and abs(x) < np.float32(_TINY32)
    if dy:
        if dx:
            return np.float32(np.nan)
        if x == 0:
            return np.float32(math.copysign(_HALF_PI32, y))
        if x == 1:
            return y
        y = y * np.float32(0.0)
    elif dx:
        if x < 0 and y != 0 and math.isfinite(y):
            return np.float32(math.copysign(_HALF_PI32_BELOW, y))
        x = x * np.float32(0.0)
    return ftz32(np.arctan2(y, x))


@njit(**_opts)
def atan2_xla64(y, x):
    """ops.elementwise.xla_atan2 for f64: the C library's atan2 under DAZ/FTZ."""
    dy = y != 0 and abs(y) < _TINY64
    dx = x != 0 and abs(x) < _TINY64
    if dy:
        if dx or x == 0:
            return math.copysign(math.pi / 2, y)
        if y > 0 and x <= -2.0 ** -966 and math.isfinite(x):
            return -math.pi
        y = y * 0.0
    elif dx:
        x = x * 0.0
    return ftz64(np.arctan2(y, x))


@njit(**_opts)
def cbrt_xla32(x):
    """XLA:CPU's f32 cbrt under DAZ: a denormal gives -5.5951735e-16 (ops.elementwise)."""
    if x != 0 and abs(x) < np.float32(_TINY32):
        return np.float32(_CBRT32_OF_DENORMAL)
    return np.cbrt(x)


@njit(**_opts)
def cftz32(z):
    return complex(ftz32(np.float32(z.real)), ftz32(np.float32(z.imag)))


@njit(**_opts)
def cftz64(z):
    return complex(ftz64(z.real), ftz64(z.imag))


@njit(inline="always", **_opts)
def part(x, f32, ftz):
    """One step of XLA's complex arithmetic: an f64-carried value rounded to the parts' type
    (f32 for c64) and, when ``ftz``, flushed to zero as XLA:CPU does."""
    if f32:
        x = np.float64(np.float32(x))
    if ftz and abs(x) < (_TINY32 if f32 else _TINY64):
        x = x * 0.0
    return x


@njit(inline="always", **_opts)
def part_fma(a, b, c, f32, ftz):
    """a*b + c fused (XLA:CPU's FMA): exact for f32 parts (the product is exact in f64).  For
    f64: Dekker's exact product (Veltkamp's split, no FMA instruction needed) and Knuth's
    two-sum, so the product's rounding error is kept as the fused operation keeps it; an
    overflowing product meets an infinite c as the unrounded product would."""
    if f32:
        return part(a * b + c, f32, ftz)
    p = a * b
    if p == 0 and c == 0 and a != 0 and b != 0:
        return part(p, f32, ftz)   # an underflowing product: the fused sum is a zero of its sign
    if not (math.isfinite(p) and math.isfinite(c) and abs(a) < 1e300 and abs(b) < 1e300):
        if math.isinf(p) and math.isfinite(a) and math.isfinite(b) and math.isinf(c):
            return part(c, f32, ftz)
        return part(p + c, f32, ftz)
    split = 134217729.0                       # 2**27 + 1
    t = split * a
    a_hi = t - (t - a)
    a_lo = a - a_hi
    t = split * b
    b_hi = t - (t - b)
    b_lo = b - b_hi
    err = ((a_hi * b_hi - p) + a_hi * b_lo + a_lo * b_hi) + a_lo * b_lo   # a*b = p + err exactly
    s = p + c
    z = s - p
    s_err = (p - (s - z)) + (c - z)                                          # p + c = s + s_err exactly
    low = s_err + err
    return part(s if low == 0 else s + low, f32, ftz)   # (s + 0 would turn a -0 sum into +0)


@njit(inline="always", **_opts)
def part_div(a, b, f32, ftz):
    """a / b as one step (a helper, so that the CUDA simulator, which runs the callers' Python,
    divides compiled: x / 0 is Inf there, not ZeroDivisionError)."""
    return part(a / b, f32, ftz)


@njit(**_opts)
def cmul(x, y, f32, ftz):
    """XLA's complex multiply (the reference's ``_complex_multiply``): (ac - bd) + (ad + bc)i in
    the parts' precision, fused as XLA:CPU fuses it, no recovery of infinities."""
    a, b = part(x.real, f32, ftz), part(x.imag, f32, ftz)
    c, d = part(y.real, f32, ftz), part(y.imag, f32, ftz)
    return complex(part_fma(a, c, -part(b * d, f32, ftz), f32, ftz),
                   part_fma(b, c, part(a * d, f32, ftz), f32, ftz))


@njit(inline="always", **_opts)
def cmul_c64(x, y, ftz):
    """``cmul(complex128(x), complex128(y), True, ftz)`` of two c64 values, its result a c64
    flushed when ``ftz``: the same steps -- each part (and each product, exact in f64)
    rounded to f32 and flushed as ``part`` does it, the sums fused in f64 as ``part_fma``
    -- on the parts as f32, without the complex128 values between them (1M products in one
    thread: 1.7 -> 1.0 ms, the same bits over every pair of the special values)."""
    a, b, c, d = x.real, x.imag, y.real, y.imag
    if ftz:
        a, b, c, d = ftz32(a), ftz32(b), ftz32(c), ftz32(d)
    bd = np.float32(np.float64(b) * np.float64(d))
    ad = np.float32(np.float64(a) * np.float64(d))
    if ftz:
        bd, ad = ftz32(bd), ftz32(ad)
    re = np.float32(np.float64(a) * np.float64(c) + np.float64(-bd))
    im = np.float32(np.float64(b) * np.float64(c) + np.float64(ad))
    if ftz:
        re, im = ftz32(re), ftz32(im)
    return np.complex64(complex(re, im))


@njit(inline="always", **_opts)
def cdiv(x, y, f32, ftz):
    """XLA's complex division (the reference's ``_complex_divide``): Smith's algorithm in the
    parts' precision; only where both parts are NaN, C99's recovery of x/0, inf/finite and
    finite/inf."""
    a_r, a_i = part(x.real, f32, ftz), part(x.imag, f32, ftz)
    b_r, b_i = part(y.real, f32, ftz), part(y.imag, f32, ftz)
    # Smith's two cases as one computation on operands picked by selects (a branch on which
    # part of b is larger mispredicts half the time on random values and keeps the loop
    # scalar: c64 division of f32[2M] pairs took 30x XLA's time); the same operations, so
    # the same bits: |b_r| < |b_i|: ratio = b_r / b_i, denom = ratio b_r + b_i,
    # c = ((ratio a_r + a_i) + (ratio a_i - a_r) i) / denom; else the parts' roles swapped
    swap = abs(b_r) < abs(b_i)
    big = b_i if swap else b_r
    small = b_r if swap else b_i
    ratio = part_div(small, big, f32, ftz)
    denom = part_fma(ratio, small, big, f32, ftz)
    c_r = part_div(part_fma(ratio, a_r if swap else a_i, a_i if swap else a_r, f32, ftz), denom, f32, ftz)
    c_i = part_div(part_fma(ratio if swap else -ratio, a_i if swap else a_r, -a_r if swap else a_i, f32, ftz),
                   denom, f32, ftz)
    # only where both parts are NaN, C99's recovery -- computed for every element and picked
    # by selects (a call in a branch, never taken on ordinary values, kept the loop scalar:
    # 15 ns an element, 2.8 without it)
    nan_both = (c_r != c_r) & (c_i != c_i)
    a_nan = (a_r != a_r) & (a_i != a_i)
    zero_b = (b_r == 0) & (b_i == 0) & ~a_nan
    inf_b = math.copysign(math.inf, b_r)
    z_r, z_i = part(inf_b * a_r, f32, ftz), part(inf_b * a_i, f32, ftz)
    inf_a = (math.isinf(a_r) | math.isinf(a_i)) & (abs(b_r) != math.inf) & (abs(b_i) != math.inf)
    s_r = math.copysign(1.0 if math.isinf(a_r) else 0.0, a_r)
    s_i = math.copysign(1.0 if math.isinf(a_i) else 0.0, a_i)
    u_r = part(math.inf * part_fma(s_r, b_r, part(s_i * b_i, f32, ftz), f32, ftz), f32, ftz)
    u_i = part(math.inf * part_fma(s_i, b_r, -part(s_r * b_i, f32, ftz), f32, ftz), f32, ftz)
    inf_d = (math.isinf(b_r) | math.isinf(b_i)) & (abs(a_r) != math.inf) & (abs(a_i) != math.inf)
    t_r = math.copysign(1.0 if math.isinf(b_r) else 0.0, b_r)
    t_i = math.copysign(1.0 if math.isinf(b_i) else 0.0, b_i)
    v_r = part(0.0 * part_fma(a_r, t_r, part(a_i * t_i, f32, ftz), f32, ftz), f32, ftz)
    v_i = part(0.0 * part_fma(a_i, t_r, -part(a_r * t_i, f32, ftz), f32, ftz), f32, ftz)
    r_r = z_r if zero_b else (u_r if inf_a else (v_r if inf_d else c_r))
    r_i = z_i if zero_b else (u_i if inf_a else (v_i if inf_d else c_i))
    return complex(r_r if nan_both else c_r, r_i if nan_both else c_i)


@njit(**_opts)
def cabs_c64(x):
    """|x| of a c64 value (its parts f32, carried in complex128): sqrt(a^2 + b^2) in f64,
    where the squares are exact and nothing overflows or underflows, rounded once (a NaN
    part gives NaN, beating Inf: XLA's); no library call, so that a loop vectorises."""
    a, b = x.real, x.imag
    return np.sqrt(a * a + b * b)


@njit(**_opts)
def cabs(x):
    """|x|, NaN if a part is NaN (XLA; C's hypot says Inf when the other part is Inf)."""
    a, b = x.real, x.imag
    return math.nan if (a != a or b != b) else math.hypot(a, b)


@njit(**_opts)
def csign(x):
    """x / |x| part by part, x itself at 0 (|x| as NumPy's abs: Inf beats NaN)."""
    a, b = x.real, x.imag
    mag = math.hypot(a, b)
    if mag == 0:
        return complex(a, b)
    return complex(a / mag, b / mag)


@njit(**_opts)
def csign_ftz32(x):
    """XLA's complex sign under DAZ/FTZ (c64 parts): select(|x| == 0, x, x / |x|) on the
    flushed value, so a value of denormal parts comes back bit for bit (ops.elementwise)."""
    f = cftz32(x)
    if f.real == 0 and f.imag == 0:
        return x
    return cftz32(csign(f))


@njit(**_opts)
def csign_ftz64(x):
    f = cftz64(x)
    if f.real == 0 and f.imag == 0:
        return x
    return cftz64(csign(f))


@njit(**_opts)
def cexp(x):
    """e^a (cos b + i sin b); a zero imaginary part stays zero."""
    a, b = x.real, x.imag
    ea = np.exp(a)
    return complex(ea * np.cos(b), b if b == 0 else ea * np.sin(b))


@njit(**_opts)
def cexpm1(x):
    a, b = x.real, x.imag
    s = np.sin(b / 2)
    return complex(np.expm1(a) * np.cos(b) - 2 * s * s, b if b == 0 else np.exp(a) * np.sin(b))


@njit(**_opts)
def clog1p(x):
    a, b = x.real, x.imag
    return complex(0.5 * np.log1p(a * (2 + a) + b * b), math.atan2(b, 1 + a))


@njit(**_opts)
def clog(x):
    """ln|x| + i atan2(b, a); NaN + NaN i when a part is NaN (XLA:CPU).  Near |x| = 1 the
    real part is log1p of |x|^2 - 1 (which keeps its precision)."""
    a, b = x.real, x.imag
    if a != a or b != b:
        return complex(math.nan, math.nan)
    h = math.hypot(a, b)
    if 0.5 < h < 2.0:
        big, small = max(abs(a), abs(b)), min(abs(a), abs(b))
        re = 0.5 * np.log1p((big - 1) * (big + 1) + small * small)
    else:
        re = np.log(h)
    return complex(re, math.atan2(b, a))


@njit(**_opts)
def csqrt(x):
    """The principal square root (C99's special values); NaN + NaN i when a part is NaN."""
    a, b = x.real, x.imag
    if a != a or b != b:
        return complex(math.nan, math.nan)
    if math.isinf(b):
        return complex(math.inf, b)
    if a == -math.inf:
        return complex(0.0, math.copysign(math.inf, b))
    if a == math.inf:
        return complex(math.inf, math.copysign(0.0, b))
    if a == 0 and b == 0:
        return complex(0.0, b)
    scale = 1.0
    if abs(a) > 1e300 or abs(b) > 1e300:     # keep |a| + |x| finite
        a, b, scale = a * 0.25, b * 0.25, 2.0
    t = np.sqrt((abs(a) + math.hypot(a, b)) * 0.5)
    if a >= 0:
        return complex(scale * t, scale * (b / (2 * t)))
    return complex(scale * (abs(b) / (2 * t)), scale * math.copysign(t, b))


@njit(**_opts)
def csin(x):
    a, b = x.real, x.imag
    return complex(np.sin(a) * np.cosh(b), np.cos(a) * np.sinh(b))


@njit(**_opts)
def ccos(x):
    a, b = x.real, x.imag
    return complex(np.cos(a) * np.cosh(b), -np.sin(a) * np.sinh(b))


@njit(**_opts)
def clogistic(x):
    return cdiv(complex(1.0, 0.0), 1 + cexp(-x), False, False)


@njit(**_opts)
def cpow(x, y, half, one):
    """XLA's complex power in the operands' own precision (``half``/``one`` typed f32 or f64):
    |x|^c e^(-d arg x) (cos q + i sin q), q = c arg x + d/2 ln|x|^2; 0^c = 1 or 0 (c >= 0)."""
    a, b, c, d = x.real, x.imag, y.real, y.imag
    aa_p_bb = a * a + b * b
    angle = math.atan2(b, a)
    coefficient = np.power(aa_p_bb, c * half) * np.exp(-d * angle)
    q = c * angle + d * half * np.log(aa_p_bb)
    if aa_p_bb == 0 and d == 0 and c >= 0:
        return complex(one if c == 0 else one - one, one - one)
    return complex(coefficient * np.cos(q), coefficient * np.sin(q))


@njit(**_opts)
def cmax(x, y):
    """XLA:CPU's complex maximum: the real parts decide, the first operand wins a tie."""
    return x if x.real >= y.real else y


@njit(**_opts)
def cmin(x, y):
    return x if x.real <= y.real else y
