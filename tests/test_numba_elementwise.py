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

import numpy as np
import pytest

import xla_explorer as xe

pytest.importorskip("numba")

inf, nan = np.inf, np.nan

# -- the harness ---------------------------------------------------------------------------------

@pytest.fixture
def serial_loops(monkeypatch):
    """Big test loops run (and compile) only their serial version: the parallel one has the
    same body, and test_fused_chain_parallel covers it."""
    from xla_explorer.executors.cpu import fused
    monkeypatch.setattr(fused, "PARALLEL_THRESHOLD", 1 << 62)


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
    if xe.dtypes.from_numpy(got.dtype) in xe.dtypes.FLOATING | xe.dtypes.COMPLEX:
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
    for other in ["s8", "u16", "s32", "u64", "pred", "f32", "f64", "bf16", "f16"]:  # wrap, round, saturate
        un_ops[f"via_{other}"] = (lambda o: lambda x: C(C(x, o), t))(other)
    ops = {k: (lambda f: lambda x, y: f(x))(f) for k, f in un_ops.items()}
    ops.update(bin_ops)
    return ops


@pytest.mark.parametrize("t", INTS)
def test_integer_ops_bit_for_bit(t, serial_loops):
    ops = _int_ops(t)
    x, y = _pairs(_int_values(t))
    comp = _rows(t, list(ops.values()), x, y)
    got, want = _run_both(comp, x, y)
    _exact(got, want, list(ops))



def test_pred_ops(serial_loops):
    C = xe.ConvertElementType
    ops = {"and": xe.And, "or": xe.Or, "xor": xe.Xor, "add": xe.Add, "mul": xe.Mul, "max": xe.Max, "min": xe.Min,
           "not": lambda x, y: xe.Not(x), "select": lambda x, y: xe.Select(x, y, xe.Not(y)),
           "clamp": lambda x, y: xe.Clamp(y, x, np.bool_(True)),
           **{d: (lambda d: lambda x, y: xe.Compare(x, y, d))(d) for d in ("EQ", "NE", "LT", "LE", "GT", "GE")},
           **{f"via_{o}": (lambda o: lambda x, y: C(C(x, o), "pred"))(o) for o in ("s8", "u64", "f32", "bf16", "c64")}}
    x, y = _pairs(np.array([False, True]))
    comp = _rows("pred", list(ops.values()), x, y)
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
    payloads = {"f32": np.uint32([0x7F800001, 0x7FC12345, 0xFF800002, 0xFFFFFFFF]).view(np.float32),
                "f64": np.uint64([0x7FF0000000000001, 0xFFF8000000000123]).view(np.float64)}
    return np.concatenate([v, nan_neg, payloads.get(t, v[:0])])  # TOTALORDER orders NaN payloads


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
    for d in ("EQ", "NE", "LT", "LE", "GT", "GE"):   # (XLA refuses TOTALORDER on complex)
        bi[d] = ((lambda d: lambda x, y: C(xe.Compare(x, y, d), t))(d), "exact")
    ops = {k: ((lambda f: lambda x, y: f(x))(f), tol) for k, (f, tol) in un.items()}
    ops.update(bi)
    return ops


#: (rtol, atol) per tolerance class and type: "ew" a few ulp, "transc" the corpus' bounds
_TOL = {"f32": {"ew": (3e-7, 0), "transc": (1e-5, 1e-6)}, "f64": {"ew": (1e-15, 0), "transc": (1e-13, 1e-15)},
        "bf16": {"ew": (8e-3, 0), "transc": (1.6e-2, 1e-5)}, "f16": {"ew": (1e-3, 0), "transc": (2e-3, 1e-5)}}


@pytest.mark.parametrize("t", FLOATS)
def test_float_ops(t, serial_loops):
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
    for d in ("EQ", "NE", "LT", "LE", "GT", "GE"):   # (XLA refuses TOTALORDER on complex)
        bi[d] = ((lambda d: lambda x, y: C(xe.Compare(x, y, d), t))(d), "exact")
    ops = {k: ((lambda f: lambda x, y: f(x))(f), tol) for k, (f, tol) in un.items()}
    ops.update(bi)
    return ops


_CTOL = {"c64": {"ew": (3e-7, 1e-30), "transc": (1e-5, 1e-6)},
         "c128": {"ew": (1e-15, 1e-300), "transc": (1e-12, 1e-15)}}


@pytest.mark.parametrize("t", ["c64", "c128"])
def test_complex_ops(t, serial_loops):
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


# -- narrow types ----------------------------------------------------------------------------------

@pytest.mark.parametrize("t", ["s4", "u4"])
def test_sub_byte_integers(t, serial_loops):
    """s4/u4 are carried in int8/uint8 and wrapped after every op."""
    info = xe.dtypes.iinfo(t)
    vals = np.arange(int(info.min), int(info.max) + 1).astype(xe.dtypes.to_numpy(t))
    ops = _int_ops(t)
    x, y = _pairs(vals)
    comp = _rows(t, list(ops.values()), x, y)
    got, want = _run_both(comp, x, y)
    _exact(got, want, list(ops))


NARROW = ["bf16", "f16", "f8e5m2", "f8e4m3fn", "f8e4m3", "f8e3m4", "f8e4m3fnuz", "f8e5m2fnuz", "f8e4m3b11fnuz"]


def _conversions(src, x):
    n = len(x)
    b = xe.XlaBuilder("to_narrow")
    p = xe.Parameter(b, 0, xe.Shape(src, (n,)), "x")
    m = len(NARROW)
    wide = xe.BroadcastInDim(p, (m, n), [1])
    k = xe.Iota(b, xe.Shape("s32", (m, n)), 0)
    result = None
    for i, t in enumerate(NARROW):
        r = xe.ConvertElementType(xe.ConvertElementType(wide, t), "f64")
        result = r if result is None else xe.Select(xe.Eq(k, np.int32(i)), r, result)
    return b.build(result)


def test_conversions_to_narrow_floats_bit_exact(serial_loops):
    """Round to nearest even, denormals kept, overflow to Inf (NaN for fn/fnuz), no -0 in
    fnuz; from f64 through f32 as ml_dtypes does (f16: directly, as NumPy does)."""
    rng = np.random.default_rng(1)
    x32 = np.concatenate([rng.integers(0, 2 ** 32, 60000, dtype=np.uint64).astype(np.uint32).view(np.float32),
                          (rng.normal(size=30000) * 2.0 ** rng.integers(-30, 20, 30000)).astype(np.float32)])
    base = rng.normal(size=20000).astype(np.float32).astype(np.float64)
    x64 = np.concatenate([rng.normal(size=30000) * 2.0 ** rng.integers(-30, 20, 30000),
                          *(base * (1 + 2.0 ** -k + 2.0 ** -40) for k in (4, 5, 9, 12))])  # double-rounding ties
    for src, x in (("f32", x32), ("f64", x64)):
        with np.errstate(all="ignore"):
            got, want = _run_both(_conversions(src, x), x)
        _exact(got, want, NARROW)


_FNUZ_OPS = {"neg", "abs", "sign", "max", "min", "select", "clamp", "add", "mul", "via_f32", "via_bf16", "rp_e4m3",
             "EQ_total", "LT_total", "GE_total"}


@pytest.mark.parametrize("t", ["f8e4m3fn", "f8e4m3fnuz"])
def test_f8_ops(t, serial_loops):
    """e4m3fn: no Inf (overflow is NaN); fnuz: no -0, NaN is the pattern of -0 (its
    TOTALORDER compare and reduce-precision run the reference)."""
    ops = {k: v for k, v in _float_ops(t).items() if v[1] == "exact" and ("fnuz" not in t or k in _FNUZ_OPS)}
    names = list(ops)
    x, y = _pairs(_float_values(t))
    comp = _rows(t, [f for f, _ in ops.values()], x, y)
    with np.errstate(all="ignore"):
        got, want = _run_both(comp, x, y)
    _exact(got, want, names)


def test_types_without_a_loop_carrier_run_the_reference():
    for t in ("f8e8m0fnu", "f4e2m1fn"):
        b = xe.XlaBuilder("exotic")
        x = xe.Parameter(b, 0, xe.Shape(t, (4,)), "x")
        comp = b.build(xe.Mul(xe.Add(x, x), xe.ConvertElementType(xe.ConvertElementType(x, "f32"), t)))
        assert not comp.fusion_plan().groups
        v = np.array([0.5, 1, 2, 4], xe.dtypes.to_numpy(t))
        _exact(comp.run(v, backend="numba"), comp.run(v))


def test_bitcast_convert_kernel():
    rng = np.random.default_rng(2)
    cases = [("f32", "s32", (3, 4)), ("f32", "u8", (5,)), ("u8", "f32", (2, 4)), ("f64", "u16", (3,)),
             ("u16", "f64", (2, 4)), ("c64", "c64", (2,)), ("bf16", "s16", (6,)), ("s8", "u8", (0, 3))]
    for src, dst, dims in cases:
        b = xe.XlaBuilder("bitcast")
        x = xe.Parameter(b, 0, xe.Shape(src, dims), "x")
        comp = b.build(xe.BitcastConvertType(x, dst))
        n = int(np.prod(dims)) * xe.dtypes.to_numpy(src).itemsize
        v = rng.integers(0, 256, n, dtype=np.uint8).view(xe.dtypes.to_numpy(src)).reshape(dims)
        got, want = comp.run(v, backend="numba"), comp.run(v)
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.tobytes() == want.tobytes()


def test_every_elementwise_opcode_has_an_emitter():
    from xla_explorer.executors.emit import EMITTERS
    from xla_explorer.ops import registry
    missing = registry.CATEGORIES["elementwise"] - set(EMITTERS) - {"constant"}
    assert not missing


# -- the f32 polynomial transcendentals ---------------------------------------------------------------

def _sweep_loop(fn):
    from numba import njit

    @njit(error_model="numpy")
    def loop(x, out):
        for i in range(x.shape[0]):
            out[i] = fn(x[i])
    return loop


def _ulp_distance(got, want):
    def ordered(v):
        b = v.view(np.int32).astype(np.int64)
        return np.where(b < 0, -(b & 0x7FFFFFFF), b)
    return np.abs(ordered(got) - ordered(want))


@pytest.mark.parametrize("name, max_ulp", [("exp", 1), ("log", 2), ("tanh", 1), ("logistic", 3)])
def test_polynomial_transcendentals_ulp(name, max_ulp):
    """A sweep over every 1021st f32 bit pattern (4.2M values, all signs and exponents):
    within ``max_ulp`` of the correctly rounded result, NaN exactly where NaN, +-Inf and 0
    exactly.  (Results below the smallest normal f32 are within 1 ulp of the denormal.)"""
    from xla_explorer.executors import scalar_lib
    fn = getattr(scalar_lib, f"{name}_f32")
    x = np.arange(0, 2 ** 32, 1021, dtype=np.uint64).astype(np.uint32).view(np.float32)
    x = np.concatenate([x, np.float32([0.0, -0.0, inf, -inf, nan, 88.72283, 88.72284, -103.97, -87.33655])])
    got = np.empty_like(x)
    _sweep_loop(fn)(x, got)
    with np.errstate(all="ignore"):
        x64 = x.astype(np.float64)
        want = {"exp": np.exp, "log": np.log, "tanh": np.tanh,
                "logistic": lambda v: 1 / (1 + np.exp(-v))}[name](x64).astype(np.float32)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    special = ok & (np.isinf(want) | (want == 0))
    assert np.array_equal(got[special], want[special])
    u = _ulp_distance(got[ok], want[ok])
    normal = np.abs(want[ok]) >= np.finfo(np.float32).tiny
    assert u[normal].max() <= max_ulp
    assert u[~normal].max(initial=0) <= 1


def test_log1p_f32_is_the_c_librarys_log1pf_bit_for_bit():
    """``log1p_f32`` (the fused loops' f32 log1p, branch-free) gives the bits of the C
    library's ``log1pf`` (what Numba's ``np.log1p`` of an f32 calls, and NumPy's
    too but on AVX-512 processors, where NumPy's own is within 2 ulp of it): over every 1021st bit pattern (all signs and exponents), every f32 within
    2^12 of its thresholds (-1, -0.2929, 0.41422, 2^-29, 2^-54, 2^53, +-Inf, the NaNs), every
    4th f32 in [-1, -0.25] and [0.25, 4), and the x whose 1 + x has the mantissas of its
    short series (0 and the top three); NaNs too (their payloads).  (Checked over all 2^32
    f32 when written.)"""
    from numba import njit
    from xla_explorer.executors import scalar_lib
    around = [0xBF800000, 0xBE95F61F, 0x3ED413D7, 0x31000000, 0x24800000, 0x5A000000, 0x7F800000,
              0xFF800000, 0x7FC00000, 0xFFC00000, 0x00000000, 0x80000000, 0x3F800000]
    parts = [np.arange(0, 2 ** 32, 1021, dtype=np.uint64).astype(np.uint32)]
    parts += [np.arange(max(b - 4096, 0), min(b + 4096, 2 ** 32), dtype=np.uint64).astype(np.uint32) for b in around]
    f = np.float32
    parts += [np.arange(f(0.25).view(np.uint32), f(4.0).view(np.uint32), 4, dtype=np.uint32),
              np.arange(f(-0.25).view(np.uint32), f(-1.0).view(np.uint32), 4, dtype=np.uint32)]
    u = (np.arange(126, 158, dtype=np.uint32)[:, None] << np.uint32(23)) | np.uint32([0, 0x7FFFFD, 0x7FFFFE, 0x7FFFFF])
    with np.errstate(all="ignore"):
        x_u = u.ravel().view(np.float32) - f(1.0)
    x = np.concatenate(parts + [x_u.view(np.uint32)]).view(np.float32)
    got, libm = np.empty_like(x), np.empty_like(x)
    _sweep_loop(scalar_lib.log1p_f32)(x, got)
    _sweep_loop(njit(lambda v: np.log1p(v)))(x, libm)
    assert np.array_equal(got.view(np.uint32), libm.view(np.uint32))
    with np.errstate(all="ignore"):
        ref = np.log1p(x)
    ok = ~np.isnan(ref)
    assert np.array_equal(np.isnan(got), ~ok)
    if _numpy_has_own_f32_log1p():   # its AVX-512 log1pf: within 2 ulp of the C library's
        assert _ulp_distance(got[ok], ref[ok]).max() <= 2
    else:
        assert np.array_equal(got[ok].view(np.uint32), ref[ok].view(np.uint32))


def _numpy_has_own_f32_log1p():
    """Whether NumPy's f32 ``log1p`` is its own AVX-512 one (on processors with AVX512_SKX,
    which NumPy dispatches to for the f32 transcendental ufuncs) rather than the C library's
    ``log1pf``; the two differ by up to 2 ulp in about 1 in 60 inputs."""
    from numpy._core._multiarray_umath import __cpu_features__
    return bool(__cpu_features__.get("AVX512_SKX"))


@pytest.mark.parametrize("t", ["f32", "bf16", "f16", "f64"])
@pytest.mark.parametrize("mode", ["flush", "ieee"])
def test_log1p_fused_loop_equals_the_reference(t, mode, monkeypatch):
    """log1p and softplus's max(x, 0) + log1p(exp(-|x|)) in a fused loop (f32 and the narrow
    floats: ``log1p_f32``): bit for bit the loop calling ``np.log1p`` (``log1pf``) as before,
    and close to the reference (which computes f32 in f64); sizes 0, 1, odd, a strided
    operand, denormals, -1, below -1, +-Inf, NaN."""
    from xla_explorer.executors import emit
    dt = xe.dtypes.to_numpy(t)
    rng = np.random.default_rng(3)

    def bits(v):
        v = np.asarray(v)
        return v.view(f"u{v.dtype.itemsize}")
    for n in (0, 1, 7, 1001):
        x = (rng.standard_normal(2 * n) * 3).astype(dt)[::2]
        if n >= 7:
            x[:7] = np.array([1e-40, -1e-40, -1.0, -1.5, np.inf, -np.inf, np.nan]).astype(dt)
        outs = []
        for fns in (None, ("np.log1p", "np.log1p", "clog1p")):
            if fns:
                monkeypatch.setitem(emit.EMITTERS, "log-plus-one", emit._float_fn(*fns))
            b = xe.XlaBuilder("log1p")
            p = xe.Parameter(b, 0, xe.Shape(t, (n,)), "x")
            e = xe.Exp(xe.Neg(xe.Abs(p)))
            comp = b.build(xe.Tuple(xe.Log1p(p), xe.Add(xe.Max(p, np.array(0, dt)), xe.Log1p(e))))
            with xe.float_env(denormals=mode):
                outs.append(comp.run(x, backend="numba"))
                if not fns:
                    want = comp.run(x)
        got, before = outs
        for g, o, w in zip(got, before, want):
            g, o, w = np.asarray(g), np.asarray(o), np.asarray(w)
            assert g.dtype == w.dtype and g.shape == w.shape == (n,)
            assert np.array_equal(bits(g), bits(o))
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64),
                                       rtol=1e-2 if t in ("bf16", "f16") else 1e-6)


# -- fused chains ------------------------------------------------------------------------------------

def _chain(t, n):
    b = xe.XlaBuilder(f"chain_{t}")
    x = xe.Parameter(b, 0, xe.Shape(t, (n,)), "x")
    y = xe.Parameter(b, 1, xe.Shape(t, (4, n)), "y")
    two = np.array(2, xe.dtypes.to_numpy(t))
    z = xe.Mul(xe.Tanh(xe.Add(xe.Mul(x, two), np.array(1, xe.dtypes.to_numpy(t)))), xe.Exp(xe.Neg(x)))
    z = xe.Add(y, xe.Logistic(xe.Sub(z, xe.Log(xe.Add(xe.Abs(x), two)))), broadcast_dimensions=[1])
    z = xe.Select(xe.Gt(z, np.array(0.25, xe.dtypes.to_numpy(t))), xe.Sqrt(xe.Abs(z)), xe.Max(z, xe.Neg(y)))
    return b.build(xe.Clamp(np.array(-3, xe.dtypes.to_numpy(t)), z, np.array(3, xe.dtypes.to_numpy(t))))


@pytest.mark.parametrize("t, rtol", [("f32", 1e-5), ("bf16", 2e-2)])
def test_fused_chain_parallel(t, rtol, monkeypatch):
    """A chain of element-wise ops with broadcasts and scalar constants: two loops (the
    rank-1 chain is read through a broadcast by the rank-2 one), the second large enough to
    run its parallel version; both match the reference."""
    from xla_explorer.executors.cpu import fused
    n = 1 << 14  # 4 x n results: above the parallel threshold (lowered: arrays stay small)
    monkeypatch.setattr(fused, "PARALLEL_THRESHOLD", 1 << 15)
    comp = _chain(t, n)
    groups = comp.fusion_plan().groups
    # (13: the two broadcasts of ``two`` are one value, ``fusion.merge_duplicates``)
    assert [len(g.members) for g in groups] == [13, 12]
    rng = np.random.default_rng(3)
    dt = xe.dtypes.to_numpy(t)
    x = (rng.normal(size=n) * 3).astype(dt)
    y = rng.normal(size=(4, n)).astype(dt)
    got, want = _run_both(comp, x, y)
    _close(got, want, rtol, 1e-6)


# -- the corpus' element-wise cases on backend="numba" --------------------------------------------------

#: a representative subset (every case of the element-wise modules passes with
#: ``run_corpus.py --backend numba``; these keep the test file's compile time bounded)
_CORPUS_CASES = ["binary_arith_bf16", "binary_pow_atan2_f32", "unary_f32_exp_log", "unary_logistic_native",
                 "unary_f16_exp_log", "compare_totalorder_f32", "convert_f32_to_fp8", "convert_float_to_int_saturating",
                 "int_s32_shifts", "int_s32_div_rem_edge", "complex_div_sign_eq", "reduce_precision_bf16_like",
                 "bitcast_f32_s32_u8", "x64_f64_s64_u64_arith"]


def _corpus_runner():
    import importlib.util

    from conftest import CORPUS
    path = CORPUS.parent / "tools" / "run_corpus.py"
    if not path.exists():
        pytest.skip("HLO corpus runner not found")
    spec = importlib.util.spec_from_file_location("run_corpus", path)
    runner = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(runner)
    return runner, CORPUS


@pytest.mark.parametrize("case", _CORPUS_CASES)
def test_corpus_case_numba(case):
    runner, corpus = _corpus_runner()
    if not (corpus / case).exists():
        pytest.skip(f"corpus case {case} not found")
    res = runner.run_one(xe, str(corpus / case), "numba", "global")
    assert res["status"] == "pass", f"{case}: {res['reason']}\n{res.get('traceback', '')}"


# -- the same scalar code in Python: the CUDA simulator --------------------------------------------------

@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy scalars warn where compiled code wraps
@pytest.mark.parametrize("t", ["s8", "u64", "f32", "bf16", "f64", "c64"])
def test_emitted_code_runs_in_the_cuda_simulator(t):
    """Under NUMBA_ENABLE_CUDASIM the fused loop's statements and the scalar_lib helpers run
    as Python on NumPy scalars (``.py_func``): no Python exception where compiled code gives
    Inf or NaN, the same wrap-around and rounding."""
    import os
    if os.environ.get("NUMBA_ENABLE_CUDASIM") != "1":
        pytest.skip("needs numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1, set by conftest)")
    if t in INTS:
        ops, v = {k: (f, "exact") for k, f in _int_ops(t).items()}, _int_values(t)
    elif t[0] == "c":
        ops, v = _complex_ops(t), _complex_values(t, [0.0, -1.0, inf, nan])
    else:
        ops, v = _float_ops(t), _float_values(t)
    names, fns = list(ops), [f for f, _ in ops.values()]
    x, y = v, v[::-1].copy()
    # eight ops a program: every element of a _rows program evaluates all of its ops (the
    # selects pick one row's), so m ops in one program cost m^2 statements per value in the
    # simulator's Python, 64 ops over a minute; in programs of 8, every op still runs on every value
    got, want = [], []
    for k in range(0, len(fns), 8):
        comp = _rows(t, fns[k:k + 8], x, y)
        got.append(comp.run(x, y, backend="cuda"))
        want.append(comp.run(x, y))
    got, want = np.concatenate(got), np.concatenate(want)
    exact = [k for k, (_, c) in enumerate(ops.values()) if c == "exact"]
    _exact(got[exact], want[exact], [names[k] for k in exact])
    rest = [k for k, (_, c) in enumerate(ops.values()) if c != "exact"]
    if rest:
        _close(got[rest], want[rest], 2e-2 if t == "bf16" else 1e-5, 1e-6, names=[names[k] for k in rest])


def test_bf16_carrier_conversions_are_ml_dtypes():
    """Fused loops compute bf16 in f32; big operands and results go to and from f32 by
    Numba passes over the bits (cpu.elementwise.bf16_to_f32 / f32_to_bf16), which must
    give ml_dtypes' astype exactly: every bf16, and f32 specials, NaN payloads, rounding
    ties and random bit patterns (all 2^32 f32 were checked once, offline)."""
    import ml_dtypes
    from xla_explorer.executors.cpu import elementwise as cpu_elementwise
    bf16 = np.dtype(ml_dtypes.bfloat16)
    every = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(bf16)
    np.testing.assert_array_equal(cpu_elementwise.bf16_to_f32(every).view(np.uint32),
                                  every.astype(np.float32).view(np.uint32))
    rng = np.random.default_rng(3)
    bits = np.concatenate([
        rng.integers(0, 1 << 32, 200_000, dtype=np.uint64).astype(np.uint32),
        np.uint32([0x7F800001, 0x7FC00000, 0xFF800001, 0x7FFF0000, 0x7F80FFFF, 0x7FBFFFFF, 0xFFC12345, 0x3F800000, 0xBF800000,
                   0x7F800000, 0xFF800000, 0x7F7FFFFF, 0x7F7F8000, 0x00008000, 0x80018000, 0x3F808000,
                   0x3F818000, 0x3F807FFF, 0x00000001, 0x80000000, 0]),
        (rng.integers(0, 1 << 16, 20_000, dtype=np.uint64).astype(np.uint32) << 16) | np.uint32(0x8000)])  # ties
    bits = bits[:bits.size // 7 * 7]
    f = bits.view(np.float32).reshape(-1, 7)[:, ::-1]   # strided too
    with np.errstate(invalid="ignore"):
        want = f.astype(bf16)
    got = cpu_elementwise.f32_to_bf16(f, bf16)
    assert got.shape == f.shape and got.dtype == bf16
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


def test_bf16_bits_in_the_loop_are_the_carrier_conversions():
    """A CPU fused loop reads bf16 operands and stores a bf16 result on their bits
    (``scalar_lib.bf16_bits_to_f32`` / ``f32_to_bf16_bits``, ``fused.compile_loop(narrow=True)``):
    the same bits as ml_dtypes' astype -- every bf16; f32 specials, NaN payloads, rounding
    ties and random patterns (all 2^32 f32 were checked once, offline) -- and loops with bf16
    operands of every kind (same shape, broadcast along rows and columns, scalar), in both
    float environments, give the reference's bits."""
    import ml_dtypes
    from xla_explorer.executors import scalar_lib
    bf16 = np.dtype(ml_dtypes.bfloat16)
    every = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    got = np.empty(every.size, np.float32)
    _sweep_loop(scalar_lib.bf16_bits_to_f32)(every, got)
    np.testing.assert_array_equal(got.view(np.uint32), every.view(bf16).astype(np.float32).view(np.uint32))
    rng = np.random.default_rng(4)
    bits = np.concatenate([
        rng.integers(0, 1 << 32, 200_000, dtype=np.uint64).astype(np.uint32),
        np.uint32([0x7F800001, 0x7FC00000, 0xFF800001, 0x7FFF0000, 0x7F80FFFF, 0x7FBFFFFF, 0xFFC12345, 0x7F7FFFFF,
                   0x7F7F8000, 0x00008000, 0x80018000, 0x3F808000, 0x3F818000, 0x3F807FFF, 1, 0x80000000, 0]),
        (rng.integers(0, 1 << 16, 20_000, dtype=np.uint64).astype(np.uint32) << 16) | np.uint32(0x8000)])
    f = bits.view(np.float32)
    out = np.empty(f.size, np.uint16)
    _sweep_loop(scalar_lib.f32_to_bf16_bits)(f, out)
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(out, f.astype(bf16).view(np.uint16))
    # loops: bf16 in (NaN payloads, denormals, infinities), bf16 / f32 out
    x = rng.standard_normal((64, 96), dtype=np.float32).astype(bf16)
    x.reshape(-1)[:6] = np.uint16([0x7F81, 0xFFC3, 0x0001, 0x8040, 0x7F80, 0x0080]).view(bf16)
    row, col = x[3].copy(), x[:, 5].copy()
    B = xe.Shape("bf16", (64, 96))
    for mode in ("flush", "ieee"):
        b = xe.XlaBuilder("bf16_bits")
        p = xe.Parameter(b, 0, B, "x")
        r = xe.Parameter(b, 1, xe.Shape("bf16", (96,)), "row")
        c = xe.Parameter(b, 2, xe.Shape("bf16", (64,)), "col")
        s = xe.Parameter(b, 3, xe.Shape("bf16", ()), "s")
        v = xe.Add(xe.Mul(p, xe.BroadcastInDim(r, (64, 96), [1])), xe.BroadcastInDim(c, (64, 96), [0]))
        v = xe.Sub(xe.Neg(v), xe.BroadcastInDim(s, (64, 96), []))
        for root in (v, xe.ConvertElementType(v, "f32"), xe.Neg(p)):
            comp = b.build(root)
            args = (x, row, col, np.asarray(np.float32(0.5)).astype(bf16))
            got = comp.run(*args, backend="numba", denormals=mode)
            want = comp.run(*args, denormals=mode)
            assert got.dtype == want.dtype
            _exact(got, want)   # (f32 NaN payloads are the machine's; a bf16 store quiets them)
    b = xe.XlaBuilder("to_bf16")   # f32 in, bf16 out: the store's rounding, ties, NaN payloads
    y = f[:f.size // 64 * 64].reshape(-1, 64)
    comp = b.build(xe.ConvertElementType(xe.Parameter(b, 0, xe.Shape("f32", y.shape), "y"), "bf16"))
    with np.errstate(invalid="ignore"):
        for mode in ("flush", "ieee"):
            np.testing.assert_array_equal(comp.run(y, backend="numba", denormals=mode).view(np.uint16),
                                          comp.run(y, denormals=mode).view(np.uint16))


@pytest.mark.parametrize("n", [5000, 1 << 19])
def test_big_bf16_fused_loop_equals_the_reference(n):
    import ml_dtypes
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n, dtype=np.float32).astype(ml_dtypes.bfloat16)
    y = rng.standard_normal(n, dtype=np.float32).astype(ml_dtypes.bfloat16)
    x[:4] = [np.nan, np.inf, -0.0, 1e-40]
    b = xe.XlaBuilder("bf16_chain")
    p, q = xe.Parameter(b, 0, xe.Shape("bf16", (n,)), "x"), xe.Parameter(b, 1, xe.Shape("bf16", (n,)), "y")
    comp = b.build(xe.Mul(xe.Add(p, q), xe.Tanh(p)))
    got, want = _run_both(comp, x, y)
    _exact(got, want)


# -- denormal-blind ops under flushing --------------------------------------------------------------

def test_exp_of_every_denormal_is_exp_of_zero():
    """``emit.DENORMAL_BLIND``: a fused loop does not flush exp's operand, nor a value only
    exp reads, because exp of every f32 denormal (both signs, all 2^24 of them) is exactly
    exp(0) = 1 (and f64's, sampled), as flushing them would give."""
    from xla_explorer.executors import scalar_lib
    bits = np.arange(1, 1 << 23, dtype=np.uint32)
    x = np.concatenate([bits, bits | np.uint32(1 << 31)]).view(np.float32)
    got = np.empty_like(x)
    _sweep_loop(scalar_lib.exp_f32)(x, got)
    assert np.array_equal(got.view(np.uint32), np.full(x.size, np.float32(1).view(np.uint32)))
    d = np.concatenate([np.arange(1, 1 << 20, 997, dtype=np.uint64), np.uint64([(1 << 52) - 1])]).view(np.float64)
    assert np.all(np.exp(np.concatenate([d, -d])) == 1.0)


@pytest.mark.parametrize("t", ["f32", "f64", "bf16"])
def test_exp_of_a_difference_under_flushing_skips_its_flushes(t, serial_loops, monkeypatch):
    """exp(x - m) with denormal inputs and differences, under flushing: the loop leaves the
    difference unflushed (its only reader is exp) and does not flush exp's operand: bit for
    bit the loop that flushes them (``DENORMAL_BLIND`` empty), over differences that are
    denormal, zero, normal, exps that overflow and underflow; the difference itself also an
    output (another loop: flushed)."""
    from xla_explorer.executors import emit
    from xla_explorer.executors.loopgen import LoopSource
    dt = xe.dtypes.to_numpy(t)
    tiny = float(np.finfo(np.float32 if t == "bf16" else dt).tiny)
    rng = np.random.default_rng(11)
    vals = np.array([0.0, -0.0, tiny, -tiny, tiny / 2, -tiny / 2, tiny * 1.5, 1.0, -1.0, -88.0, -87.3, -87.4,
                     -104.0, -745.0, 700.0, np.inf, -np.inf, np.nan], np.float64)

    def build(also_diff):
        b = xe.XlaBuilder("expdiff")
        x = xe.Parameter(b, 0, xe.Shape(t, (40, 33)), "x")
        m = xe.Parameter(b, 1, xe.Shape(t, (40,)), "m")
        d = xe.Sub(x, m, broadcast_dimensions=[0])
        e = xe.Exp(d)
        return b.build(xe.Tuple(e, d) if also_diff else e)

    for also_diff in (False, True):
        xv = rng.choice(vals, (40, 33)).astype(dt)
        mv = rng.choice(vals, 40).astype(dt)
        xv[:, :3] = mv[:, None] + np.asarray(rng.choice([tiny / 2, -tiny / 4, 0.0], (40, 3))).astype(dt)
        outs = []
        for blind in (set(emit.DENORMAL_BLIND), set()):
            monkeypatch.setattr(emit, "DENORMAL_BLIND", blind)
            comp = build(also_diff)
            with xe.float_env(denormals="flush"):
                outs.append(comp.run(xv, mv, backend="numba"))
                want = comp.run(xv, mv)
            groups = [g for g in comp.fusion_plan().groups if len(g.members) > 1]
            if blind and not also_diff:   # one loop: the difference's statement flushes nothing
                with xe.float_env(denormals="flush"):
                    src = LoopSource(groups[0])
                k = [m.opcode for m in groups[0].members].index("subtract")
                sub, = [line for line in src.body if line.startswith(f"t{k} = ")]
                assert "ftz" not in sub and "ftz" in src.body[-1], src.body
        for g, o, w in zip(*[v if also_diff else [v] for v in (outs[0], outs[1], want)]):
            g, o, w = np.asarray(g), np.asarray(o), np.asarray(w)
            assert np.array_equal(g.view(f"u{g.dtype.itemsize}"), o.view(f"u{o.dtype.itemsize}"))
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=2e-2 if t == "bf16" else 1e-6)


def test_ftz_pos32_is_ftz32_of_every_exp_result():
    """``ftz_pos32`` (the flush of an f32 exp's value): bit for bit ``ftz32`` on +0, every
    denormal, the smallest normals, Inf and NaNs; and exp_f32 of every f32 in [-128, -64]
    (its results across the normal/denormal boundary and underflow) and of random bit
    patterns is never negative (so never -0 or a negative denormal, which it would get
    wrong): flushed by either, the same bits."""
    from xla_explorer.executors import scalar_lib
    pos = np.concatenate([np.arange(0, 1 << 24, dtype=np.uint32),
                          np.uint32([0x7F800000, 0x7F800001, 0x7FC00000, 0x7FFFFFFF, 0xFFC00000, 0xFF800001])])
    pos = pos.view(np.float32)
    a, b = np.empty_like(pos), np.empty_like(pos)
    _sweep_loop(scalar_lib.ftz32)(pos, a)
    _sweep_loop(scalar_lib.ftz_pos32)(pos, b)
    assert np.array_equal(a.view(np.uint32), b.view(np.uint32))
    lo, hi = np.float32(-128.0).view(np.uint32), np.float32(-64.0).view(np.uint32)
    x = np.concatenate([np.arange(hi, lo + 1, dtype=np.uint32).view(np.float32),
                        np.frombuffer(np.random.default_rng(5).bytes(1 << 22), np.uint32).view(np.float32),
                        np.float32([0.0, -0.0, np.inf, -np.inf, np.nan, -88.0, -87.3365, -103.9, -104.0, 89.0])])
    y = np.empty_like(x)
    _sweep_loop(scalar_lib.exp_f32)(x, y)
    assert not np.any(np.signbit(y) & ~np.isnan(y))
    a, b = np.empty_like(y), np.empty_like(y)
    _sweep_loop(scalar_lib.ftz32)(y, a)
    _sweep_loop(scalar_lib.ftz_pos32)(y, b)
    assert np.array_equal(a.view(np.uint32), b.view(np.uint32))
    assert np.any((y > 0) & (y < np.finfo(np.float32).tiny)) and np.all(b[(y > 0) & (y < np.finfo(np.float32).tiny)] == 0)


@pytest.mark.parametrize("t", ["f32", "bf16", "f64"])
def test_flushed_exp_loop_with_ftz_pos32(t, serial_loops, monkeypatch):
    """An exp loop under flushing flushes an f32 exp's value with ``ftz_pos32`` (others as
    before): bit for bit the loop with ``ftz32`` (``emit._FTZ_POS`` off), values whose exps
    are normal, denormal (flushed), zero, Inf, NaN; and as the reference."""
    from xla_explorer.executors import emit
    from xla_explorer.executors.loopgen import LoopSource
    dt = xe.dtypes.to_numpy(t)
    x = np.concatenate([np.linspace(-110, 90, 997), [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-40]]).astype(dt)
    outs = []
    for on in (True, False):
        monkeypatch.setattr(emit, "_FTZ_POS", on)
        b = xe.XlaBuilder("expflush")
        p = xe.Parameter(b, 0, xe.Shape(t, x.shape), "x")
        comp = b.build(xe.Mul(xe.Exp(xe.Add(p, p)), p))
        with xe.float_env(denormals="flush"):
            outs.append(np.asarray(comp.run(x, backend="numba")))
            want = np.asarray(comp.run(x))
            src = LoopSource(comp.fusion_plan().groups[0])
        assert ("ftz_pos32(" in "\n".join(src.body)) == (on and t == "f32"), src.body
    g, o = outs
    assert np.array_equal(g.view(f"u{g.dtype.itemsize}"), o.view(f"u{o.dtype.itemsize}"))
    np.testing.assert_allclose(g.astype(np.float64), want.astype(np.float64), rtol=2e-2 if t == "bf16" else 1e-6)


def _each(f):
    """A compiled loop applying the scalar function ``f`` to every element of x into out."""
    import numba

    @numba.njit(error_model="numpy")
    def run(x, out):
        for i in range(x.size):
            out[i] = f(x[i])
    return run


def test_f32_erf_and_expm1_are_within_their_ulps():
    """``scalar_lib.erf_f32`` (a rational function, 6 ulp) and ``expm1_f32`` (a polynomial
    below 0.5, e^x - 1 above: 3 ulp) against the f64 functions rounded, over random bit
    patterns, a dense line through both branches and the boundaries, and the specials
    (+-0 and NaN kept, +-Inf, the overflow of e^x - 1, denormals)."""
    import math

    from xla_explorer.executors import scalar_lib

    rng = np.random.default_rng(21)
    x = np.concatenate([rng.integers(0, 2 ** 32, 200_000, dtype=np.uint64).astype(np.uint32).view(np.float32),
                        np.linspace(-5, 5, 200_001, dtype=np.float32),
                        np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1.1754944e-38, 0.5, -0.5,
                                  np.nextafter(np.float32(0.5), np.float32(0)), 1.0, -1.0, 3.92, 4.0, -4.0,
                                  88.72, 88.73, -87.0, -104.0], np.float32)])
    for name, f, want_of, most in (("erf", scalar_lib.erf_f32, np.vectorize(math.erf), 6),
                                   ("expm1", scalar_lib.expm1_f32, np.expm1, 3)):
        got = np.empty_like(x)
        _each(f)(x, got)
        with np.errstate(all="ignore"):
            want = want_of(x.astype(np.float64)).astype(np.float32)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=name)
        np.testing.assert_array_equal(np.isinf(got), np.isinf(want), err_msg=name)
        ok = np.isfinite(want)
        ulps = np.abs(got[ok].astype(np.float64) - want[ok]) / np.spacing(np.abs(want[ok])).astype(np.float64)
        assert ulps.max() <= most, (name, ulps.max(), x[ok][np.argmax(ulps)])
        zeros = x == 0
        assert np.array_equal(np.signbit(got[zeros]), np.signbit(x[zeros])), name


def test_f64_exp_expm1_tanh_are_within_their_ulps():
    """``scalar_lib.exp_f64`` (1 ulp), ``expm1_f64`` (3 ulp) and ``tanh_f64`` (4 ulp; measured
    against mpmath), which vectorise where NumPy's are library calls, against the C
    library's (within a further ulp of the truth) over random bit patterns, lines through
    their branches, the overflow and denormal ranges of e^x, tiny arguments and the
    specials (+-0 kept, +-Inf, NaN)."""
    import math

    from xla_explorer.executors import scalar_lib

    rng = np.random.default_rng(22)
    x = np.concatenate([rng.integers(0, 2 ** 64, 100_000, dtype=np.uint64).view(np.float64),
                        np.linspace(-800, 800, 100_001), np.linspace(-1, 1, 100_001), rng.standard_normal(5000) * 1e-10,
                        np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -5e-324, 709.78, 709.79, -745.13,
                                  -745.14, -708.4, 0.5, -0.5, np.nextafter(0.5, 0), 19.1, 20.0])])

    def exact(f):
        def one(v):
            try:
                return f(v)
            except OverflowError:
                return math.inf
        return np.vectorize(one, otypes=[np.float64])

    for name, f, truth, most in (("exp", scalar_lib.exp_f64, exact(math.exp), 2),
                                 ("expm1", scalar_lib.expm1_f64, exact(math.expm1), 4),
                                 ("tanh", scalar_lib.tanh_f64, exact(math.tanh), 5)):
        got = np.empty_like(x)
        _each(f)(x, got)
        with np.errstate(all="ignore"):
            want = truth(x)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=name)
        np.testing.assert_array_equal(np.isinf(got), np.isinf(want), err_msg=name)
        ok = np.isfinite(want)
        ulps = np.abs(got[ok] - want[ok]) / np.spacing(np.abs(want[ok]))
        assert ulps.max() <= most, (name, ulps.max(), x[ok][np.argmax(ulps)])
        if name != "exp":
            zeros = x == 0
            assert np.array_equal(np.signbit(got[zeros]), np.signbit(x[zeros])), name


def _each2(f):
    """A compiled loop applying the scalar function ``f`` of two operands elementwise (a
    Python lambda is compiled first)."""
    import numba
    f = f if hasattr(f, "py_func") else numba.njit(error_model="numpy")(f)

    @numba.njit(error_model="numpy")
    def run(a, b, out):
        for i in range(a.size):
            out[i] = f(a[i], b[i])
    return run


def test_f32_pow_is_the_f64_pow_rounded():
    """``scalar_lib.pow_f32`` (f64 arithmetic, no library call) against the reference's rule
    (C's pow of the operands widened to f64, rounded to f32): the same bits over every pair
    of special values (zeros of both signs, +-1, +-Inf, NaN, integers odd and even, the
    2^24 edge where every f32 is even, denormals, the extremes, exact powers on an f32
    rounding midpoint: 88^7, 4097^2, 2^-150), random bit patterns, bases
    near 1 with large exponents and negative bases with integer exponents; NaNs where the
    reference's are, the default NaN (sign set) for a negative base and a fraction."""
    from xla_explorer.executors import scalar_lib

    sp = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0, -3.0, 1e-45, -1e-45,
                   1e-40, 1.1754944e-38, 3.4e38, -3.4e38, 1.0000001, 0.99999994, 2.5, -2.5, 16777216.0, 16777218.0,
                   -16777217.0, 1e10, -1e10, 7.0, -7.0, 0.1, 88.0, -150.0, 149.0, 4097.0, 33.0, -63.0, 63.0], np.float32)
    A, B = (v.ravel() for v in np.meshgrid(sp, sp))
    rng = np.random.default_rng(24)
    words = lambda n: rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)  # noqa: E731
    a = np.concatenate([A, words(300_000), 1 + rng.standard_normal(50_000).astype(np.float32) * 1e-4,
                        rng.standard_normal(50_000).astype(np.float32) * 4])
    b = np.concatenate([B, words(300_000), rng.standard_normal(50_000).astype(np.float32) * 1e5,
                        rng.integers(-40, 40, 50_000).astype(np.float32)])
    with np.errstate(all="ignore"):
        want = np.power(a.astype(np.float64), b.astype(np.float64)).astype(np.float32)
    got = np.empty_like(a)
    _each2(lambda x, y: scalar_lib.pow_f32(x, y, 32, False))(a, b, got)
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))
    n = len(A)   # the specials' NaNs: the operand's (quieted), or the default NaN
    np.testing.assert_array_equal(got[:n][nan[:n]].view(np.uint32), want[:n][nan[:n]].view(np.uint32))
    # pow(1, sNaN) and pow(sNaN, 0): NaN (fpow's rule for f32), a quiet NaN 1 for narrow floats
    snan = np.array([0x7FA00001], np.uint32).view(np.float32)
    one, zero = np.float32([1.0]), np.float32([0.0])
    for x, y in ((one, snan), (snan, zero)):
        got = np.empty(1, np.float32)
        _each2(lambda p, q: scalar_lib.pow_f32(p, q, 32, False))(x, y, got)
        assert np.isnan(got[0])
        _each2(lambda p, q: scalar_lib.pow_f32(p, q, 0, False))(x, y, got)
        assert got[0] == 1


def test_f32_pow_reads_a_denormal_base_as_xla_does_under_daz():
    """In ``"flush"`` mode a denormal base reads as 2^-150 in magnitude (XLA:CPU's pow under
    DAZ): ``pow_f32(..., daz=True)`` gives ``fpow_of_denormal``'s values rounded, and the
    normal bases' values as without it."""
    from xla_explorer.executors import scalar_lib

    rng = np.random.default_rng(25)
    d = (rng.integers(1, 2 ** 23, 2000).astype(np.uint32) | (rng.integers(0, 2, 2000).astype(np.uint32) << 31))
    a = np.concatenate([d.view(np.float32), rng.standard_normal(2000).astype(np.float32)])
    b = np.concatenate([rng.standard_normal(2000).astype(np.float32) * 0.01, rng.integers(-3, 4, 2000).astype(np.float32)])
    b[:20] = [0, 1, -1, 2, 3, np.nan, np.inf, -np.inf, 0.5, -0.5] * 2
    got = np.empty_like(a)
    _each2(lambda x, y: scalar_lib.pow_f32(x, y, 32, True))(a, b, got)
    with np.errstate(all="ignore"):
        xw, yw = a.astype(np.float64), b.astype(np.float64)
        den = (xw != 0) & (np.abs(xw) < 2.0 ** -126)
        sign = np.power(np.copysign(1.0, xw), yw)
        want = np.where(den, sign * np.exp2(-150 * yw), np.power(xw, yw)).astype(np.float32)
        want = np.where(b == 0, np.float32(1), want)
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))


@pytest.mark.parametrize("denormals", ["flush", "ieee"])
@pytest.mark.parametrize("t", ["float32", "bfloat16"])
def test_pow_loops_match_the_reference(denormals, t):
    """Fused loops of ``x ** y`` (f32, and bf16 computed in f32) against the reference, bit
    for bit, in both floating-point modes, denormal bases included."""
    from jax import lax
    import ml_dtypes  # noqa: F401  (bf16 for NumPy)

    rng = np.random.default_rng(26)
    x = np.concatenate([np.abs(rng.standard_normal(3000)) * 3, -rng.integers(1, 5, 100), [0, -0.0, 1e-40, -1e-40, 2.0 ** -130]])
    y = np.concatenate([rng.standard_normal(3000) * 3, rng.integers(-4, 5, 100), [0.5, 3, -1, 2, 0.25]])
    x, y = x.astype(t), y.astype(t)
    with xe.float_env(denormals=denormals):
        comp = xe.from_jax(lambda a, b: lax.pow(a * 1, b), x, y)
        want = np.asarray(comp.run(x, y, backend="numpy"))
        got = np.asarray(comp.run(x, y, backend="numba"))
    word = np.uint32 if t == "float32" else np.uint16
    nan = np.isnan(want.astype(np.float32))
    np.testing.assert_array_equal(np.isnan(got.astype(np.float32)), nan)
    np.testing.assert_array_equal(got[~nan].view(word), want[~nan].view(word))
