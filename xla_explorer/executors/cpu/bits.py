"""The shifts of CPU loops: ``scalar_lib``'s, computed in 32 bits for types of at most 32.

``emit`` writes a shift of an n-bit type as ``shift_left(bits(a), bits(b), n)`` on the
operands' n-bit patterns in uint64 (``scalar_lib.shift_left``).  LLVM computes that in 64
bits even for n = 32 (Numba's integers are 64-bit, and a variable amount keeps LLVM from
narrowing the shift): a vectorised loop then holds 8 lanes a register instead of 16 and
converts every value twice, which made threefry's rotations (``jax.random``) half as fast as
XLA's.  The CPU loops' header (``cpu.fused._HEADER``) imports these functions under the
same names in place of ``scalar_lib``'s: for n <= 32 they truncate the patterns, shift in
32 bits (an amount of n or more as the op's rule says: 0, or the sign fill) and widen the
result again, which LLVM folds into the caller's truncation, so the loop's lanes stay 32
bits; wider types take ``scalar_lib``'s functions.  The same values bit for bit.  CUDA
kernels keep ``scalar_lib``'s (the simulator runs their Python functions; these are LLVM).
"""
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from .. import scalar_lib

_opts = dict(cache=True, nogil=True, error_model="numpy", inline="always")


def _narrow_shift(kind):
    def typer(typingctx, u, amount, n):
        if not all(isinstance(x, types.Integer) for x in (u, amount, n)):
            return None
        result = types.int64 if kind == "ashr" else types.uint64

        def codegen(context, builder, sig, args):
            i32, i64 = ir.IntType(32), ir.IntType(64)
            v, a, w = (context.cast(builder, x, t, types.int64) for x, t in zip(args, sig.args))
            inside = builder.icmp_unsigned("<", a, w)   # (amount < n; a negative amount is huge)
            if kind == "ashr":   # (amounts of n or more: n - 1, the sign fill)
                k = builder.select(inside, a, builder.sub(w, ir.Constant(i64, 1)))
                r = builder.ashr(builder.trunc(v, i32), builder.trunc(k, i32))
                return builder.sext(r, i64)
            s = builder.and_(builder.trunc(a, i32), ir.Constant(i32, 31))
            x = builder.trunc(v, i32)
            r = builder.shl(x, s) if kind == "shl" else builder.lshr(x, s)
            return builder.zext(builder.select(inside, r, ir.Constant(i32, 0)), i64)

        return result(u, amount, n), codegen
    typer.__name__ = f"_{kind}32"
    return intrinsic(typer)


_shl32, _lshr32, _ashr32 = _narrow_shift("shl"), _narrow_shift("lshr"), _narrow_shift("ashr")
_wide_shl, _wide_lshr, _wide_ashr = (scalar_lib.shift_left, scalar_lib.shift_right_logical,
                                     scalar_lib.shift_right_arithmetic)


@njit(**_opts)
def shift_left(u, amount, n):
    """``scalar_lib.shift_left``; in 32 bits for n <= 32."""
    if n <= 32:
        return _shl32(u, amount, n)
    return _wide_shl(u, amount, n)


@njit(**_opts)
def shift_right_logical(u, amount, n):
    """``scalar_lib.shift_right_logical``; in 32 bits for n <= 32."""
    if n <= 32:
        return _lshr32(u, amount, n)
    return _wide_lshr(u, amount, n)


@njit(**_opts)
def shift_right_arithmetic(s, amount, n):
    """``scalar_lib.shift_right_arithmetic`` (``s``: the operand's bits read as a signed
    number, as an int64); in 32 bits for n <= 32."""
    if n <= 32:
        return _ashr32(s, amount, n)
    return _wide_ashr(s, amount, n)
