"""Element-wise ops in fused Numba loops against the NumPy reference.

Every element-wise op runs inside a generated loop (``executors/emit.py`` and
``scalar_lib``).  To keep compile time bounded, each test builds ONE computation that
applies many ops to broadcast operands and picks op ``k`` for row ``k`` with an
``iota``-driven select chain: one fused loop computes every op at every value, and the
result's row ``k`` is op ``k`` on all the test values (all pairs of them for binary ops).
Integers, predicates, conversions, rounding, comparisons and min/max must match bit for
bit (the sign of zero included); float arithmetic within a few ulp; transcendentals
within the corpus tolerances.
"""
import math

import ml_dtypes
import numpy as np
import pytest

import xla_explorer as xe

pytest.importorskip("numba")

inf, nan = np.inf, np.nan
bf16 = ml_dtypes.bfloat16

# -- the harness ---------------------------------------------------------------------------------


def _rows(t, ops, values, rhs_values=None, third=None):
    """A computation: row k of its result is ``ops[k]`` applied to the values (unary ops
    take x; binary ops x, y; each op returns an XlaOp of type ``t`` or of a common type)."""
    n = len(values)
    b = xe.XlaBuilder(f"rows_{t}")
    params = [xe.Parameter(b, 0, xe.Shape(t, (n,)), "x")]
    if rhs_values is not None:
        params.append(xe.Parameter(b, 1, xe.Shape(t if third is None else third, (n,)), "y"))
    m = len(ops)
    wide = [xe.BroadcastInDim(p, (m, n), [1]) for p in params]
    k = xe.Iota(b, xe.Shape("s32", (m, n)), 0)
    result = None
    for i, op in enumerate(ops):
        r = op(*wide)
        result = r if result is None else xe.Select(xe.Eq(k, np.int32(i)), r, result)
    return b.build(result)


def _pairs(values):
    v = np.asarray(values)
    x, y = np.meshgrid(v, v, indexing="ij")
    return x.reshape(-1), y.reshape(-1)


def _run_both(comp, *args):
    got = comp.run(*args, backend="numba")
    want = comp.run(*args)
    assert got.dtype == want.dtype and got.shape == want.shape
    return got, want


def _exact(got, want, names=None):
    """Bit-for-bit equality except that NaNs compare equal (payloads differ between
    libraries); the sign of zero counts."""
    got, want = np.asarray(got), np.asarray(want)
    if got.dtype.kind in "fcV" or got.dtype.itemsize and got.dtype.name in ("bfloat16",) or \
            xe.dtypes.from_numpy(got.dtype) in xe.dtypes.FLOATING | xe.dtypes.COMPLEX:
        g, w = got.astype(np.complex128), want.astype(np.complex128)
        ok = np.ones(got.shape, bool)
        for a, c in ((g.real, w.real), (g.imag, w.imag)):
            ok &= (np.isnan(a) & np.isnan(c)) | ((a == c) & (np.signbit(a) == np.signbit(c)))
    else:
        ok = got == want
    if not ok.all():
        rows = sorted(set(np.argwhere(~ok)[:, 0].tolist())) if got.ndim > 1 else []
        label = [names[r] for r in rows] if names else rows
        bad = np.argwhere(~ok)[:5]
        raise AssertionError(f"mismatch in rows {label}: " + "; ".join(
            f"{tuple(i)}: got {got[tuple(i)]!r} want {want[tuple(i)]!r}" for i in bad))


def _close(got, want, rtol, atol=0.0, names=None):
    """The corpus rule: NaN where NaN, Inf exactly, else |got - want| <= atol + rtol |want|."""
    g = np.asarray(got).astype(np.complex128)
    w = np.asarray(want).astype(np.complex128)
    ok = np.ones(g.shape, bool)
    for a, c in ((g.real, w.real), (g.imag, w.imag)):
        nan_ok = np.isnan(a) == np.isnan(c)
        inf_ok = np.where(np.isinf(c) | np.isinf(a), a == c, True)
        with np.errstate(invalid="ignore"):
            val_ok = np.isnan(c) | np.isinf(c) | (np.abs(a - c) <= atol + rtol * np.abs(w))
        ok &= nan_ok & inf_ok & val_ok
    if not ok.all():
        rows = sorted(set(np.argwhere(~ok)[:, 0].tolist())) if g.ndim > 1 else []
        label = [names[r] for r in rows] if names else rows
        bad = np.argwhere(~ok)[:5]
        raise AssertionError(f"mismatch in rows {label}: " + "; ".join(
            f"{tuple(i)}: got {got[tuple(i)]!r} want {want[tuple(i)]!r}" for i in bad))


# -- integers: every op, every width, bit for bit -------------------------------------------------

INTS = ["s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64"]


def _int_values(t):
    info = xe.dtypes.iinfo(t)
    n = xe.dtypes.bit_width(t)
    vals = [0, 1, 2, 3, 5, 7, n - 1, n, n + 1, 63, 64, 100, int(info.max), int(info.max) - 1, int(info.min),
            int(info.min) + 1]
    if t[0] == "s":
        vals += [-1, -2, -3, -7, -n, -64]
    vals = sorted({v for v in vals if info.min <= v <= info.max})
    return np.array(vals, dtype=xe.dtypes.to_numpy(t))


def _int_ops(t):
    signed = t[0] == "s"
    C = xe.ConvertElementType
    bin_ops = {
        "add": xe.Add, "sub": xe.Sub, "mul": xe.Mul, "div": xe.Div, "rem": xe.Rem, "max": xe.Max, "min": xe.Min,
        "pow": xe.Pow, "and": xe.And, "or": xe.Or, "xor": xe.Xor, "shl": xe.ShiftLeft,
        "shra": xe.ShiftRightArithmetic, "shrl": xe.ShiftRightLogical,
        "select": lambda x, y: xe.Select(xe.Lt(x, y), x, y),
        "clamp": lambda x, y: xe.Clamp(xe.Min(x, y), y, xe.Max(x, y)),
        "clamp_scalar": lambda x, y: xe.Clamp(np.array(3, x.shape.dtype), y, np.array(100, x.shape.dtype)),
    }
    for d in ("EQ", "NE", "LT", "LE", "GT", "GE"):
        bin_ops[d] = (lambda d: lambda x, y: C(xe.Compare(x, y, d), t))(d)
    un_ops = {"neg": xe.Neg, "not": xe.Not, "clz": xe.Clz, "popcnt": xe.PopulationCount}
    if signed:
        un_ops.update(abs=xe.Abs, sign=xe.Sign)
    for other in INTS + ["pred"]:
        un_ops[f"via_{other}"] = (lambda o: lambda x: C(C(x, o), t))(other)
    ops = {k: (lambda f: lambda x, y: f(x))(f) for k, f in un_ops.items()}
    ops.update(bin_ops)
    return ops


@pytest.mark.parametrize("t", INTS)
def test_integer_ops_bit_for_bit(t):
    ops = _int_ops(t)
    x, y = _pairs(_int_values(t))
    comp = _rows(t, list(ops.values()), x, y)
    got, want = _run_both(comp, x, y)
    _exact(got, want, list(ops))
