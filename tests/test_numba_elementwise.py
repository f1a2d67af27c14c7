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
    magnitude = np.nan_to_num(np.abs(w), nan=0.0)
    for a, c in ((g.real, w.real), (g.imag, w.imag)):
        nan_ok = np.isnan(a) == np.isnan(c)
        inf_ok = np.where(np.isinf(c) | np.isinf(a), a == c, True)
        with np.errstate(invalid="ignore"):
            val_ok = np.isnan(c) | np.isinf(c) | (np.abs(a - c) <= atol + rtol * magnitude)
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


# -- floats ---------------------------------------------------------------------------------------

FLOATS = ["f32", "f64", "bf16", "f16"]
_SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 3.0, 0.1, -0.7, 0.3, 10.0, -10.0, 20.0, -20.0,
            88.0, -88.0, -103.0, 100.0, 1e10, -1e10, 1e30, 3.0e38, -3.0e38, 1.2e-38, -1.2e-38, math.pi, 0.625,
            -0.63, 1e-3, -1e-4, 65504.0, 65520.0, 448.0, 500.0, inf, -inf, nan, -nan]


def _float_values(t):
    with np.errstate(over="ignore"):
        v = np.array(_SPECIAL, np.float64).astype(xe.dtypes.to_numpy(t))
    nan_neg = np.array([-nan]).astype(xe.dtypes.to_numpy(t))  # a NaN with its sign bit set
    return np.concatenate([v, nan_neg])


def _float_ops(t):
    """name -> (op on x, y, tolerance class)."""
    C = xe.ConvertElementType
    un = {"neg": (xe.Neg, "exact"), "abs": (xe.Abs, "exact"), "sign": (xe.Sign, "exact"),
          "floor": (xe.Floor, "exact"), "ceil": (xe.Ceil, "exact"), "round": (xe.Round, "exact"),
          "rne": (xe.RoundNearestEven, "exact"), "sqrt": (xe.Sqrt, "exact"), "real": (xe.Real, "exact"),
          "imag": (xe.Imag, "exact"), "is_finite": (lambda x: C(xe.IsFinite(x), t), "exact"),
          "rsqrt": (xe.Rsqrt, "ew"), "cbrt": (xe.Cbrt, "transc"), "exp": (xe.Exp, "transc"),
          "expm1": (xe.Expm1, "transc"), "log": (xe.Log, "transc"), "log1p": (xe.Log1p, "transc"),
          "sin": (xe.Sin, "transc"), "cos": (xe.Cos, "transc"), "tan": (xe.Tan, "transc"),
          "tanh": (xe.Tanh, "transc"), "logistic": (xe.Logistic, "transc"), "erf": (xe.Erf, "transc")}
    for e, m in ((5, 10), (8, 7), (4, 3), (5, 2), (8, 23), (11, 52), (2, 1), (8, 0), (3, 20)):
        un[f"rp_e{e}m{m}"] = ((lambda e, m: lambda x: xe.ReducePrecision(x, mantissa_bits=m, exponent_bits=e))(e, m),
                              "exact")
    for other in ["f32", "f64", "bf16", "f16", "f8e4m3fn", "f8e5m2", "s8", "u8", "s32", "u32", "s64", "u64",
                  "pred", "c64"]:
        un[f"via_{other}"] = ((lambda o: lambda x: C(C(x, o), t))(other), "exact")
    bi = {"add": (xe.Add, "exact"), "sub": (xe.Sub, "exact"), "mul": (xe.Mul, "exact"), "div": (xe.Div, "exact"),
          "rem": (xe.Rem, "exact"), "max": (xe.Max, "exact"), "min": (xe.Min, "exact"),
          "pow": (xe.Pow, "transc"), "atan2": (xe.Atan2, "transc"),
          "select": (lambda x, y: xe.Select(xe.Lt(x, y), x, y), "exact"),
          "clamp": (lambda x, y: xe.Clamp(xe.Min(x, y), y, xe.Max(x, y)), "exact"),
          "clamp_scalar": (lambda x, y: xe.Clamp(np.array(-1, x.shape.dtype), y, np.array(2.5, x.shape.dtype)),
                           "exact")}
    for d in ("EQ", "NE", "LT", "LE", "GT", "GE"):
        bi[d] = ((lambda d: lambda x, y: C(xe.Compare(x, y, d), t))(d), "exact")
        bi[d + "_total"] = ((lambda d: lambda x, y: C(xe.Compare(x, y, d, "TOTALORDER"), t))(d), "exact")
    ops = {k: ((lambda f: lambda x, y: f(x))(f), tol) for k, (f, tol) in un.items()}
    ops.update(bi)
    return ops


#: (rtol, atol) per tolerance class and type: "ew" a few ulp, "transc" the corpus' bounds
_TOL = {"f32": {"ew": (3e-7, 0), "transc": (1e-5, 1e-6)}, "f64": {"ew": (1e-15, 0), "transc": (1e-13, 1e-15)},
        "bf16": {"ew": (8e-3, 0), "transc": (1.6e-2, 1e-5)}, "f16": {"ew": (1e-3, 0), "transc": (2e-3, 1e-5)}}


@pytest.mark.parametrize("t", FLOATS)
def test_float_ops(t):
    ops = _float_ops(t)
    names = list(ops)
    x, y = _pairs(_float_values(t))
    comp = _rows(t, [f for f, _ in ops.values()], x, y)
    got, want = _run_both(comp, x, y)
    for cls in ("exact", "ew", "transc"):
        rows = [k for k, (_, c) in enumerate(ops.values()) if c == cls]
        if cls == "exact":
            _exact(got[rows], want[rows], [names[k] for k in rows])
        else:
            _close(got[rows], want[rows], *_TOL[t][cls], names=[names[k] for k in rows])


# -- complex ----------------------------------------------------------------------------------------

def _complex_values(t, parts):
    re, im = np.meshgrid(parts, parts, indexing="ij")
    v = np.empty(re.size, xe.dtypes.to_numpy(t))
    v.real, v.imag = re.reshape(-1), im.reshape(-1)
    return v


def _complex_ops(t):
    C = xe.ConvertElementType
    f = xe.dtypes.complex_component(t)
    back = lambda r: C(r, t)  # noqa: E731  a real result as a complex row
    un = {"neg": (xe.Neg, "exact"), "abs": (lambda x: back(xe.Abs(x)), "ew"), "sign": (xe.Sign, "ew"),
          "real": (lambda x: back(xe.Real(x)), "exact"), "imag": (lambda x: back(xe.Imag(x)), "exact"),
          "exp": (xe.Exp, "transc"), "expm1": (xe.Expm1, "transc"), "log": (xe.Log, "transc"),
          "log1p": (xe.Log1p, "transc"), "sqrt": (xe.Sqrt, "transc"), "sin": (xe.Sin, "transc"),
          "cos": (xe.Cos, "transc"), "logistic": (xe.Logistic, "transc"),
          "tan": (xe.Tan, "transc"), "tanh": (xe.Tanh, "transc"), "rsqrt": (xe.Rsqrt, "transc"),
          "complex_parts": (lambda x: xe.Complex(xe.Imag(x), xe.Real(x)), "exact")}
    for other in ("c64", "c128", f, "s32", "u8", "pred", "bf16"):
        un[f"via_{other}"] = ((lambda o: lambda x: C(C(x, o), t))(other), "exact")
    bi = {"add": (xe.Add, "exact"), "sub": (xe.Sub, "exact"), "mul": (xe.Mul, "exact"), "div": (xe.Div, "exact"),
          "pow": (xe.Pow, "transc"), "max": (xe.Max, "exact"), "min": (xe.Min, "exact"),
          "atan2": (xe.Atan2, "transc"),
          "select": (lambda x, y: xe.Select(xe.Lt(x, y), x, y), "exact"),
          "clamp": (lambda x, y: xe.Clamp(xe.Min(x, y), y, xe.Max(x, y)), "exact")}
    for d in ("EQ", "NE", "LT", "LE", "GT", "GE"):
        bi[d] = ((lambda d: lambda x, y: C(xe.Compare(x, y, d), t))(d), "exact")
        bi[d + "_total"] = ((lambda d: lambda x, y: C(xe.Compare(x, y, d, "TOTALORDER"), t))(d), "exact")
    ops = {k: ((lambda f: lambda x, y: f(x))(f), tol) for k, (f, tol) in un.items()}
    ops.update(bi)
    return ops


_CTOL = {"c64": {"ew": (3e-7, 1e-30), "transc": (1e-5, 1e-6)}, "c128": {"ew": (1e-15, 1e-300), "transc": (1e-12, 1e-15)}}


@pytest.mark.parametrize("t", ["c64", "c128"])
def test_complex_ops(t):
    ops = _complex_ops(t)
    names = list(ops)
    x, y = _pairs(_complex_values(t, [0.0, -0.0, 1.0, -2.5, 0.75, inf, -inf, nan]))
    comp = _rows(t, [f for f, _ in ops.values()], x, y)
    got, want = _run_both(comp, x, y)
    for cls in ("exact", "ew", "transc"):
        rows = [k for k, (_, c) in enumerate(ops.values()) if c == cls]
        if cls == "exact":
            _exact(got[rows], want[rows], [names[k] for k in rows])
        else:
            _close(got[rows], want[rows], *_CTOL[t][cls], names=[names[k] for k in rows])
