"""f16 <-> f32 on the bits, as NumPy's ``astype`` converts, for the fused loops' f32 carrier.

A fused loop computes f16 in f32 (``emit``'s narrow floats).  NumPy's f16 conversions are
scalar C (``npy_halfbits_to_floatbits`` / ``npy_floatbits_to_halfbits``): 10-15 ns an
element, so an f16 multiply of 4M elements spent 186 ms of its 203 ms in ``astype`` around
a 2.4 ms loop.  These do the same with integer operations and selects that vectorise:

- ``f16_bits_to_f32``: exact (every f16 is an f32).  Normal and infinite values move their
  exponent and mantissa; a denormal ``m * 2**-24`` is computed as the float ``m`` times
  ``2**-24`` (exact: the product is a normal f32, no denormal arithmetic whatever the
  floating-point environment); a NaN keeps its payload shifted up 13 bits, signalling or not,
  as NumPy does.
- ``f32_to_f16_bits``: round to nearest even; from 65520 (halfway above the largest f16,
  65504, whose mantissa is odd) on, infinity; below ``2**-14`` the denormal multiple of
  ``2**-24`` to nearest even, computed as the low bits of ``|x| + 0.5`` (the f32 sum rounds at
  ``2**-24``, to nearest even); a NaN keeps its sign and its payload's top 10 bits, made
  ``0x7C01`` where those are all zero (NumPy keeps it a NaN that way).

Both checked bit for bit against NumPy's ``astype`` (tests/test_numba_half.py: every f16, and
every f32 exponent with mantissas around each rounding boundary).  Denormals are never
flushed here: XLA:CPU does not flush f16 (``fpenv``), and the fused loops flush their own.

The scalar functions are what the narrow fused loops (``cpu.fused.RowLoopSource``) call on
each element (after the fast pass's bare conversions, ``f16_bits_to_f32_hw`` /
``f32_to_f16_bits_hw``, where that saw a NaN); the array functions are the passes ``numba_executor._as_carrier`` /
``_from_carrier`` use for the other kernels' f16 operands and results.
"""
import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from ..numba_setup import MOVE_PARALLEL_THRESHOLD

_opts = dict(cache=True, nogil=True)

#: the dtype an f16 travels in through a narrow fused loop: its bits
F16_BITS = np.dtype(np.uint16)


@njit(inline="always", **_opts)
def f16_bits_to_f32_int(h):
    """An f16 (its bits, uint16) as an f32, as NumPy's ``astype(np.float32)``: integer
    operations (no F16C)."""
    u = np.uint32(h)
    sign = np.uint32((u & np.uint32(0x8000)) << np.uint32(16))
    em = np.uint32(u & np.uint32(0x7FFF))
    # exponent rebiased (+112 << 23); once more for Inf / NaN (exponent 31 -> 255)
    bits = np.uint32((em << np.uint32(13)) + np.uint32(0x38000000))
    bits = np.uint32(bits + np.uint32(0x38000000)) if em >= np.uint32(0x7C00) else bits
    tiny = np.float32(np.float32(np.int32(em)) * np.float32(5.9604644775390625e-08))   # m * 2**-24
    bits = tiny.view(np.uint32) if em < np.uint32(0x0400) else bits
    return np.uint32(bits | sign).view(np.float32)


@njit(inline="always", **_opts)
def f32_to_f16_bits_int(x):
    """An f32 as f16 bits (uint16), as NumPy's ``astype(np.float16)``: to nearest even;
    integer operations (no F16C)."""
    u = np.float32(x).view(np.uint32)
    sign = np.uint32((u >> np.uint32(16)) & np.uint32(0x8000))
    a = np.uint32(u & np.uint32(0x7FFFFFFF))
    # normal: drop 13 mantissa bits to nearest even, rebias the exponent (-112 << 23); a
    # carry out of the mantissa steps the exponent, as it should
    normal = np.uint32(np.uint32(a - np.uint32(0x38000000) + np.uint32(0x0FFF)
                                 + ((a >> np.uint32(13)) & np.uint32(1))) >> np.uint32(13))
    # below 2**-14: |x| + 0.5 rounds at 2**-24; its low bits are the denormal
    tiny = np.uint32(np.float32(np.uint32(a).view(np.float32) + np.float32(0.5)).view(np.uint32)
                     - np.uint32(0x3F000000))
    nan = np.uint32(np.uint32(0x7C00) | (np.uint32(a >> np.uint32(13)) & np.uint32(0x03FF)))
    nan = np.uint32(0x7C01) if nan == np.uint32(0x7C00) else nan
    r = normal if a >= np.uint32(0x38800000) else tiny
    r = np.uint32(0x7C00) if a >= np.uint32(0x477FF000) else r
    r = nan if a > np.uint32(0x7F800000) else r
    return np.uint16(r | sign)


# -- the same with x86's F16C conversions (vcvtph2ps / vcvtps2ph, 8 an instruction) ----------------
# LLVM's fpext / fptrunc between half and float, which it lowers to F16C where the CPU has it
# (a call to a runtime function otherwise, which Numba's JIT does not link: used only with
# F16C).  Exact, and rounding to nearest even as NumPy, with one difference: the hardware
# quiets a signalling NaN, and NumPy keeps its payload as it is, so NaNs take the integer
# path's value (a compare and a select an element).  (In-cache 32K elements, one thread:
# f16 -> f32 0.08 ns an element against 0.28 by integers; f32 -> f16 0.09 against 0.54.)


@intrinsic
def _fpext_half(typingctx, h):
    def codegen(context, builder, signature, args):
        return builder.fpext(builder.bitcast(args[0], ir.HalfType()), ir.FloatType())
    return types.float32(types.uint16), codegen


@intrinsic
def _fptrunc_half(typingctx, x):
    def codegen(context, builder, signature, args):
        return builder.bitcast(builder.fptrunc(args[0], ir.HalfType()), ir.IntType(16))
    return types.uint16(types.float32), codegen


@njit(inline="always", **_opts)
def f16_bits_to_f32_f16c(h):
    """``f16_bits_to_f32_int`` by F16C (a NaN's payload kept as the integer path keeps it)."""
    u = np.uint32(h)
    nan = np.uint32(((u & np.uint32(0x8000)) << np.uint32(16)) | np.uint32(0x7F800000)
                    | ((u & np.uint32(0x03FF)) << np.uint32(13))).view(np.float32)
    r = _fpext_half(h)
    return nan if np.uint32(u & np.uint32(0x7FFF)) > np.uint32(0x7C00) else r


@njit(inline="always", **_opts)
def f32_to_f16_bits_f16c(x):
    """``f32_to_f16_bits_int`` by F16C (a NaN's payload kept as the integer path keeps it)."""
    u = np.float32(x).view(np.uint32)
    a = np.uint32(u & np.uint32(0x7FFFFFFF))
    nan = np.uint32(np.uint32(0x7C00) | (np.uint32(a >> np.uint32(13)) & np.uint32(0x03FF)))
    nan = np.uint32(0x7C01) if nan == np.uint32(0x7C00) else nan
    nan = np.uint32(nan | ((u >> np.uint32(16)) & np.uint32(0x8000)))
    r = _fptrunc_half(np.float32(x))
    return np.uint16(nan) if a > np.uint32(0x7F800000) else r


# -- the fused loops' fast pass (``cpu.fused.RowLoopSource``): the bare hardware conversions ------
# Where no NaN is converted these are the F16C functions above exactly (those differ from
# them only by their NaN selects); a fast pass converts with them, notes whether any value
# it converted is a NaN (``f16_nan`` on the bits read, ``x != x`` on a result stored), and
# the block is computed again by the exact functions if one was.


@njit(inline="always", **_opts)
def f16_bits_to_f32_hw(h):
    """An f16 (its bits) as an f32 by F16C alone: ``f16_bits_to_f32_f16c`` but for a NaN
    (the hardware quiets a signalling one)."""
    return _fpext_half(h)


@njit(inline="always", **_opts)
def f32_to_f16_bits_hw(x):
    """An f32 as f16 bits by F16C alone: ``f32_to_f16_bits_f16c`` but for a NaN."""
    return _fptrunc_half(np.float32(x))


@njit(inline="always", **_opts)
def f16_nan(h):
    """Whether f16 bits are a NaN's (exponent all ones, mantissa not zero)."""
    return np.uint16(np.uint16(h) & np.uint16(0x7FFF)) > np.uint16(0x7C00)


def _has_f16c():
    """Whether the code Numba compiles may use F16C: the host has it and Numba compiles for
    the host (not for a CPU named by NUMBA_CPU_NAME, a portable cache)."""
    try:
        from numba.core import config
        if getattr(config, "CPU_NAME", None) not in (None, "", "host"):
            return False
        from llvmlite import binding
        return bool(binding.get_host_cpu_features().get("f16c"))
    except Exception:
        return False


#: (a switch for A/B measurements and the tests) F16C conversions where the CPU has them
HAS_F16C = _has_f16c()
#: the conversions the fused loops call on each element (``cpu.fused.NARROW_BITS``)
f16_bits_to_f32 = f16_bits_to_f32_f16c if HAS_F16C else f16_bits_to_f32_int
f32_to_f16_bits = f32_to_f16_bits_f16c if HAS_F16C else f32_to_f16_bits_int


@njit(**_opts)
def _f16_to_f32_pass(lo, hi, src, out):
    s, o = src[lo:hi], out[lo:hi]   # indices from 0 over slices: the loop vectorises
    for i in range(s.shape[0]):
        o[i] = f16_bits_to_f32(s[i])


@njit(**_opts)
def _f32_to_f16_pass(lo, hi, src, out):
    s, o = src[lo:hi], out[lo:hi]
    for i in range(s.shape[0]):
        o[i] = f32_to_f16_bits(s[i])


def f16_to_f32(x):
    """An f16 array widened to f32, flat and contiguous, as ``x.astype(np.float32)``."""
    from .shape import POOL, in_threads, contiguous
    src = contiguous(np.asarray(x)).reshape(-1).view(F16_BITS)
    out = POOL.take(src.size * 4).view(np.float32)
    in_threads(_f16_to_f32_pass, src.size, src.size >= MOVE_PARALLEL_THRESHOLD, src, out)
    return out


def f32_to_f16(x):
    """An f32 array narrowed to f16, same shape, as ``x.astype(np.float16)``."""
    from .shape import POOL, in_threads, contiguous
    src = contiguous(np.asarray(x, np.float32)).reshape(-1)
    out = POOL.take(src.size * 2).view(F16_BITS)
    in_threads(_f32_to_f16_pass, src.size, src.size >= MOVE_PARALLEL_THRESHOLD, src, out)
    return out.view(np.float16).reshape(np.shape(x))
