"""Scalar functions of XLA's element-wise ops, for Numba (CPU loops and CUDA kernels alike).

Each is a plain function jitted with ``@njit`` at module level (call ``.py_func`` to step
through it in Python).  Generated fused loops call them; Numba inlines them.  They follow
the NumPy reference exactly (integers bit for bit), and the reference's tests compare
them.  Floats narrower than f32 (bf16, f16, f8) are carried as f32 and rounded to their
format after every op (``round_to``), as XLA:CPU computes them in f32.
"""
import math

import numpy as np
from numba import njit

_opts = dict(cache=True, nogil=True)


# -- index helpers ----------------------------------------------------------------------------

@njit(**_opts)
def bcast_index(i, out_dims, strides):
    """Flat index into an operand read through a broadcast: ``strides[d]`` is the operand's
    stride (in elements) for result dimension ``d``, 0 where the operand is broadcast."""
    j = 0
    r = i
    for d in range(out_dims.shape[0] - 1, -1, -1):
        n = out_dims[d]
        j += (r % n) * strides[d]
        r //= n
    return j


@njit(**_opts)
def coordinate(i, inner, size):
    """The coordinate along one dimension of flat index ``i`` (iota)."""
    return (i // inner) % size


# -- integer arithmetic with XLA's edge cases --------------------------------------------------

@njit(**_opts)
def int_div(a, b, int_min):
    """x / 0 = -1 (all bits set); INT_MIN / -1 = INT_MIN; otherwise truncation toward zero."""
    if b == 0:
        return -1
    if b == -1 and a == int_min:
        return a
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


@njit(**_opts)
def int_rem(a, b, int_min):
    """x % 0 = x; INT_MIN % -1 = 0; otherwise the sign of the dividend."""
    if b == 0:
        return a
    if b == -1 and a == int_min:
        return 0
    r = abs(a) % abs(b)
    return r if a >= 0 else -r


@njit(**_opts)
def uint_div(a, b, all_ones):
    if b == 0:
        return all_ones
    return a // b


@njit(**_opts)
def uint_rem(a, b):
    if b == 0:
        return a
    return a % b


# -- floats ---------------------------------------------------------------------------------

@njit(**_opts)
def fmax(a, b):
    """maximum: NaN propagates; +0.0 > -0.0."""
    if a != a:
        return a
    if b != b:
        return b
    if a == b:
        return b if math.copysign(1.0, a) < 0 else a
    return a if a > b else b


@njit(**_opts)
def fmin(a, b):
    if a != a:
        return a
    if b != b:
        return b
    if a == b:
        return a if math.copysign(1.0, a) < 0 else b
    return a if a < b else b


@njit(**_opts)
def round_to(x, exponent_bits, mantissa_bits):
    """Round a float64 to the nearest (ties to even) value with the given exponent and
    mantissa widths, IEEE-style (Inf on overflow, denormals kept): ReducePrecision's rule,
    and how bf16 / f16 results are rounded."""
    if x != x or x == 0.0 or math.isinf(x):
        return x
    m, e = math.frexp(x)               # x = m * 2**e, 0.5 <= |m| < 1
    bias = (1 << (exponent_bits - 1)) - 1
    emin = 1 - bias                    # smallest normal exponent (value 2**emin)
    # the unit in the last place at this magnitude (denormals share the smallest one)
    exp = e - 1
    if exp < emin:
        exp = emin
    ulp = math.ldexp(1.0, exp - mantissa_bits)
    q = x / ulp
    r = math.floor(q)
    diff = q - r
    if diff > 0.5 or (diff == 0.5 and (r % 2.0) != 0.0):
        r += 1.0
    y = r * ulp
    max_value = math.ldexp(2.0 - math.ldexp(1.0, -mantissa_bits), bias)
    if abs(y) > max_value:
        return math.copysign(math.inf, x)
    return y
