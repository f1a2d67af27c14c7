"""XLA's own answers where IEEE, C99 or NumPy would say something else: the floating-point
environment (denormals), complex arithmetic and order, pred arithmetic and complex bitcasts
on the jax backend -- on every executor.

Every expected value below was computed by XLA:CPU through JAX 0.10.2 on x86-64 (jax.jit of
the jax.lax op on these inputs; for HLO that JAX does not emit -- complex maximum, minimum and
ordered compares, pred add -- the StableHLO op compiled directly with
``jax.extend.backend.get_backend("cpu").compile_and_load``), and hard-coded here.
"""
import numpy as np
import pytest

import ml_dtypes
import xla_explorer as xe
from xla_explorer.errors import ExecutionError

inf, nan = np.inf, np.nan
BACKENDS = ["numpy", "numba", "cuda", "jax"]
#: the smallest denormal of each type
DENORMAL = {"f32": 2.0 ** -149, "f64": 2.0 ** -1074, "bf16": 2.0 ** -133, "f16": 2.0 ** -24}
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def _backend_ok(backend):
    if backend == "jax":
        pytest.importorskip("jax")
    if backend in ("numba", "cuda"):
        pytest.importorskip("numba")


def _comp(name, shapes, body):
    b = xe.XlaBuilder(name)
    ps = [xe.Parameter(b, i, xe.Shape.parse(s), f"p{i}") for i, s in enumerate(shapes)]
    out = body(*ps)
    return b.build(xe.Tuple(list(out)) if isinstance(out, (list, tuple)) else out)


def _same_bits(got, want):
    got, want = np.asarray(got), np.asarray(want, dtype=got.dtype)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype, got.shape, want.shape)
    if got.dtype.kind == "c":
        _same_bits(got.real.copy(), want.real.copy())
        _same_bits(got.imag.copy(), want.imag.copy())
        return
    if got.dtype.kind in "fV" or got.dtype == ml_dtypes.bfloat16:
        g, w = got.view(f"u{got.dtype.itemsize}"), want.view(f"u{want.dtype.itemsize}")
        nan_both = np.isnan(got.astype(np.float64)) & np.isnan(want.astype(np.float64))
        assert (nan_both | (g == w)).all(), (got, want)
    else:
        assert np.array_equal(got, want), (got, want)


# -- the floating-point environment -----------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("t", ["f32", "f64", "bf16", "f16"])
def test_max_min_ceil_floor_of_denormals_as_xla_cpu(t, backend):
    """XLA:CPU reads f32, f64 and bf16 denormals as zeros and writes zeros for denormal
    results (DAZ + FTZ); f16 is computed in f32, where its denormals are normal."""
    _backend_ok(backend)
    d = DENORMAL[t]
    dt = xe.Shape(t, ()).dtype
    a, b = np.array([-1, -d, d], dt), np.array([-d, -0.0, 1], dt)
    comp = _comp("den", [f"{t}[3]", f"{t}[3]"], lambda x, y: [
        xe.Max(x, y), xe.Min(x, y), xe.Ceil(x), xe.Floor(x), xe.Add(x, x), xe.Neg(x), xe.Abs(x), xe.Eq(x, y)])
    got = comp.run(a, b, backend=backend)
    if t == "f16":   # jax.jit(lambda a, b: (lax.max(a, b), ...)) on f16: IEEE
        want = [[-d, -0.0, 1], [-1, -d, d], [-1, -0.0, 1], [-1, -1, 0], [-2, -2 * d, 2 * d],
                [1, d, -d], [1, d, d], [False, False, False]]
    else:            # f32, f64, bf16 alike
        want = [[-0.0, -0.0, 1], [-1, -0.0, 0.0], [-1, -0.0, 0.0], [-1, -0.0, 0.0], [-2, -0.0, 0.0],
                [1, d, -d], [1, d, d], [False, True, False]]   # negate and abs keep the bits
    for g, w in zip(got, want):
        _same_bits(g, np.array(w, dtype=g.dtype))


@pytest.mark.parametrize("backend", ["numpy", "numba", "cuda"])
def test_ieee_mode_keeps_denormals(backend):
    _backend_ok(backend)
    d = DENORMAL["f32"]
    a, b = np.float32([-1, -d, d]), np.float32([-d, -0.0, 1])
    comp = _comp("ieee", ["f32[3]", "f32[3]"], lambda x, y: [xe.Max(x, y), xe.Min(x, y), xe.Ceil(x)])
    with xe.float_env(denormals="ieee"):
        assert xe.get_float_env() == xe.FloatEnv("ieee")
        got = comp.run(a, b, backend=backend)
    assert xe.get_float_env().denormals == "flush"
    for g, w in zip(got, [[-d, -0.0, 1], [-1, -d, d], [-1, -0.0, 1]]):
        _same_bits(g, np.float32(w))
    # the run option, for one run; and the default again after it
    _same_bits(comp.run(a, b, backend=backend, denormals="ieee")[2], np.float32([-1, -0.0, 1]))
    _same_bits(comp.run(a, b, backend=backend)[2], np.float32([-1, -0.0, 0.0]))


def test_jax_backend_refuses_ieee_mode_on_xla_cpu():
    pytest.importorskip("jax")
    comp = _comp("j", ["f32[2]"], lambda x: xe.Ceil(x))
    with pytest.raises(ExecutionError, match="denormals='ieee'.*XLA:CPU"):
        comp.run(np.float32([1, 2]), backend="jax", denormals="ieee")


def test_float_env_switches():
    previous = xe.set_float_env(denormals="ieee")
    try:
        assert previous == xe.FloatEnv("flush") and xe.get_float_env().denormals == "ieee"
        assert xe.Ceil(np.float32([DENORMAL["f32"]]))[0] == 1      # eager ops follow it too
    finally:
        xe.set_float_env(previous.denormals)
    assert xe.Ceil(np.float32([DENORMAL["f32"]]))[0] == 0
    with pytest.raises(ValueError, match="denormals='daz'.*'flush'.*'ieee'"):
        xe.float_env(denormals="daz").__enter__()


@pytest.mark.parametrize("backend", BACKENDS)
def test_denormals_in_conversions_products_and_reductions(backend):
    """jax.jit: x*0.5 of 2**-126, f32 <-> f64 conversions (the processor's conversion honours
    DAZ/FTZ), bf16 -> f32 (a shift: kept), a sum and a dot of denormals, compares."""
    _backend_ok(backend)
    d = DENORMAL["f32"]
    comp = _comp("mix", ["f32[4]", "f64[1]", "bf16[1]"], lambda x, w, h: [
        xe.Mul(x, xe.Constant(x.builder, np.float32(0.5))),
        xe.ConvertElementType(x, "f64"), xe.ConvertElementType(w, "f32"), xe.ConvertElementType(h, "f32"),
        xe.Reduce(x, xe.Constant(x.builder, np.float32(0)), lambda a, c: xe.Add(a, c), dimensions=[0]),
        xe.Dot(x, x),
        xe.Compare(x, xe.Neg(x), "EQ"), xe.Compare(x, xe.Neg(x), "EQ", "TOTALORDER")])
    x = np.float32([2.0 ** -126, d, d, d])
    got = comp.run(x, np.float64([2.0 ** -130]), np.array([2.0 ** -133], ml_dtypes.bfloat16), backend=backend)
    want = [np.float32([0, 0, 0, 0]), np.float64([2.0 ** -126, 0, 0, 0]), np.float32([0]),
            np.float32([2.0 ** -133]), np.float32(2.0 ** -126), np.float32(0),
            np.array([False, True, True, True]), np.array([False, False, False, False])]
    for g, w in zip(got, want):
        _same_bits(g, w)


# -- complex arithmetic and order ----------------------------------------------------------------

#: (lhs, rhs, lhs * rhs, lhs / rhs) on c64, from jax.jit(lax.mul) and jax.jit(lax.div)
_C64 = [
    (complex(1, -2.5), complex(-inf, 3e38), complex(nan, inf), complex(-0.0, 0.0)),     # C99: -inf+inf i
    (complex(-2.5, -2.5), complex(3e38, 3e38), complex(inf, -inf), complex(-0.0, 0.0)),  # FMA: not NaN
    (complex(-2.5, 1), complex(inf, 3e38), complex(-inf, nan), complex(-0.0, 0.0)),
    (complex(0, inf), complex(1, 3e38), complex(-inf, inf), complex(inf, nan)),  # 1/3e38 flushed to 0
    (complex(0, inf), complex(3e38, 1), complex(-inf, inf), complex(nan, inf)),
    (complex(0, inf), complex(0, 0), complex(nan, nan), complex(nan, inf)),
    (complex(1, 0), complex(inf, inf), complex(nan, nan), complex(0.0, -0.0)),
    (complex(1, 2), complex(3, -4), complex(11, 2), complex(-0.2, 0.4)),
]


@pytest.mark.parametrize("backend", BACKENDS)
def test_complex_multiply_and_divide_as_xla(backend):
    _backend_ok(backend)
    x = np.array([r[0] for r in _C64], np.complex64)
    y = np.array([r[1] for r in _C64], np.complex64)
    comp = _comp("cmd", ["c64[8]", "c64[8]"], lambda a, b: [xe.Mul(a, b), xe.Div(a, b)])
    mul, div = comp.run(x, y, backend=backend)
    np.testing.assert_allclose(mul, np.array([r[2] for r in _C64], np.complex64), rtol=1e-6)
    np.testing.assert_allclose(div, np.array([r[3] for r in _C64], np.complex64), rtol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("t", ["c64", "c128"])
def test_complex_max_min_compare_the_real_parts(t, backend):
    """stablehlo.maximum/minimum/compare on complex compiled by XLA:CPU: max and min keep the
    first operand unless the second's real part is larger (smaller); LT/GT are lexicographic,
    LE/GE compare the real parts only."""
    _backend_ok(backend)
    dt = xe.Shape(t, ()).dtype
    a = np.array([1 + 1j, 1 + 2j, 2 + 0j, complex(nan, 0), complex(0, nan), 1 - 1j, complex(-0.0, 1), 3 + 1j,
                  complex(1, nan), complex(-0.0, 0)], dt)
    b = np.array([1 + 2j, 1 + 1j, 1 + 5j, 1 + 0j, 1 + 0j, 1 + 1j, complex(0.0, 0), complex(nan, 0), 1 + 2j, 0j], dt)
    comp = _comp("cmm", [f"{t}[10]", f"{t}[10]"], lambda x, y: [
        xe.Max(x, y), xe.Min(x, y), xe.Lt(x, y), xe.Le(x, y), xe.Gt(x, y), xe.Ge(x, y)])
    mx, mn, lt, le, gt, ge = comp.run(a, b, backend=backend)
    np.testing.assert_array_equal(mx, np.array([1 + 1j, 1 + 2j, 2, 1, 1, 1 - 1j, complex(-0.0, 1), complex(nan, 0),
                                                complex(1, nan), complex(-0.0, 0)], dt))
    np.testing.assert_array_equal(mn, np.array([1 + 1j, 1 + 2j, 1 + 5j, 1, complex(0, nan), 1 - 1j, complex(-0.0, 1),
                                                complex(nan, 0), complex(1, nan), complex(-0.0, 0)], dt))
    np.testing.assert_array_equal(lt, [1, 0, 0, 0, 1, 1, 0, 0, 0, 0])
    np.testing.assert_array_equal(le, [1, 1, 0, 0, 1, 1, 1, 0, 1, 1])
    np.testing.assert_array_equal(gt, [0, 1, 1, 0, 0, 0, 1, 0, 0, 0])
    np.testing.assert_array_equal(ge, [1, 1, 1, 0, 0, 1, 1, 0, 1, 1])


def test_complex_totalorder_is_refused_as_xlas_verifier_does():
    with pytest.raises(xe.ShapeError, match="TOTALORDER does not fit element type c64"):
        xe.Compare(np.complex64([1]), np.complex64([2]), "LT", "TOTALORDER")


# -- pred arithmetic and complex bitcasts on every backend -----------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_pred_add_is_or_and_multiply_is_and(backend):
    _backend_ok(backend)
    p, q = np.array([0, 0, 1, 1], bool), np.array([0, 1, 0, 1], bool)
    comp = _comp("pred", ["pred[4]", "pred[4]"], lambda x, y: [xe.Add(x, y), xe.Mul(x, y)])
    add, mul = comp.run(p, q, backend=backend)
    np.testing.assert_array_equal(add, [False, True, True, True])
    np.testing.assert_array_equal(mul, [False, False, False, True])


@pytest.mark.parametrize("backend", BACKENDS)
def test_bitcast_convert_c128_to_c64_and_back(backend):
    """StableHLO's interpreter test bitcast_convert_op_test_c128_to_c64 (XLA:CPU refuses to
    compile it; the bytes are the spec's): (0x0123456789ABCDEF, 0x0000000011111111) ->
    [(0x89ABCDEF, 0x01234567), (0x11111111, 0x00000000)]."""
    _backend_ok(backend)
    x = np.array([0x0123456789ABCDEF, 0x0000000011111111], np.uint64).view(np.complex128)
    to_c64 = _comp("c128_c64", ["c128[]"], lambda v: xe.BitcastConvertType(v, "c64"))
    got = to_c64.run(x[0], backend=backend)
    assert got.dtype == np.complex64 and got.shape == (2,)
    np.testing.assert_array_equal(got.view(np.uint32), [0x89ABCDEF, 0x01234567, 0x11111111, 0])
    back = _comp("c64_c128", ["c64[2]"], lambda v: xe.BitcastConvertType(v, "c128"))
    np.testing.assert_array_equal(back.run(got, backend=backend).reshape(1).view(np.uint64), x.view(np.uint64))



#: (type, y, x, XLA:CPU's atan2(y, x)) on denormals: its f32 polynomial and f64 C library
#: under DAZ/FTZ (ops.elementwise.xla_atan2), jax.jit with y and x as parameters
_D32, _D64 = DENORMAL["f32"], DENORMAL["f64"]
_ATAN2 = [
    ("f32", [_D32, _D32, _D32, _D32, -_D32, 1, 1, -_D32, 0],
     [_D32, 0, 1, 2, -1, -_D32, _D32, 1, -_D32],
     [nan, np.float32(np.pi / 2), _D32, 0, -np.float32(np.pi), 1.5707963, 1.5707964, -_D32, np.float32(np.pi)]),
    ("f64", [_D64, _D64, _D64, _D64, -_D64, _D64, 1],
     [_D64, 0, 1, -1, -1, -1e-300, -_D64],
     [np.pi / 2, np.pi / 2, 0, -np.pi, -np.pi, np.pi, np.pi / 2]),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", range(len(_ATAN2)))
def test_atan2_of_denormals_as_xla_cpu(case, backend):
    _backend_ok(backend)
    t, y, x, want = _ATAN2[case]
    dt = xe.Shape(t, ()).dtype
    comp = _comp("atan2", [f"{t}[{len(y)}]"] * 2, xe.Atan2)
    _same_bits(comp.run(np.array(y, dt), np.array(x, dt), backend=backend), np.array(want, dt))
    with xe.float_env(denormals="ieee"):
        if backend != "jax":
            got = comp.run(np.array(y, dt), np.array(x, dt), backend=backend)
            np.testing.assert_allclose(got, np.arctan2(np.array(y, dt), np.array(x, dt)), rtol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("t", ["f32", "bf16", "f64"])
def test_cbrt_of_denormals_as_xla_cpu(t, backend):
    """XLA:CPU's f32 cbrt (bf16 is computed in f32) gives -5.5951735e-16 for every denormal;
    f64 reads it as a zero."""
    _backend_ok(backend)
    d = DENORMAL[t]
    dt = xe.Shape(t, ()).dtype
    comp = _comp("cbrt", [f"{t}[5]"], xe.Cbrt)
    got = comp.run(np.array([d, -d, 0, -0.0, 8], dt), backend=backend)
    c = np.uint32(0xa6214518).view(np.float32) if t != "f64" else None
    want = [c, c, 0, -0.0, 2] if t != "f64" else [0, -0.0, 0, -0.0, 2]
    _same_bits(got, np.array(want, dt))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("t", ["f32", "f64"])
def test_pow_of_a_denormal_base_as_xla_cpu(t, backend):
    """XLA:CPU's pow reads a denormal base as 2**-150 (f32) or 2**-1075 (f64) in magnitude: the
    same pow(d, 0.001) for every denormal d, Inf for pow(d, -1) where d**-1 is finite."""
    _backend_ok(backend)
    d, tiny = DENORMAL[t], {"f32": 2.0 ** -126, "f64": 2.0 ** -1022}[t]
    dt = xe.Shape(t, ()).dtype
    comp = _comp("pow", [f"{t}[5]"] * 2, xe.Pow)
    got = comp.run(np.array([d, tiny / 2, tiny / 2, -tiny / 2, d], dt), np.array([0.001, 0.001, -1, -1, 2.5], dt),
                   backend=backend)
    p = {"f32": np.float32(0.9012505), "f64": 0.4746710604752596}[t]
    # (an ulp apart at most: Numba's exp2 is not NumPy's)
    np.testing.assert_allclose(got, np.array([p, p, inf, -inf, 0], dt), rtol=3 * np.finfo(dt).eps, atol=0)


#: ops whose every element agrees with XLA:CPU on tests/denormkit.py's operands (denormals of
#: both signs among zeros, normals, Inf, NaN); scripts/denormals_vs_xla.py runs them all
_DENORMAL_OPS = [("atan2", "f32"), ("atan2", "f64"), ("cbrt", "bf16"), ("max", "f64"), ("mul", "c64"),
                 ("div", "f32"), ("floor", "bf16"), ("sqrt", "c128"), ("exp", "c64"), ("sort", "f32"),
                 ("sum_pairs", "f64"), ("to_f64", "f32"), ("eq", "bf16"), ("dot", "f32"),
                 ("pow", "f32"), ("pow", "f64"), ("sign", "c64")]


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_generated_denormal_operands_agree_with_xla_cpu(backend):
    _backend_ok(backend)
    pytest.importorskip("jax")
    from denormkit import ops, pairs, run_xla, same, values
    for name, t in _DENORMAL_OPS:
        _, arity, f = ops()[name]
        args = (values(t),) if arity == 1 else pairs(t)
        want, hlo = run_xla(f, *args)
        got = xe.parse_hlo(hlo).run(*args, backend=backend)
        ok = same(got, np.asarray(want))
        assert ok.all(), (name, t, [a.ravel()[~ok.ravel()][:4] for a in args], np.asarray(got).ravel()[~ok.ravel()][:4])


# -- Inf and NaN in convolution windows over padding and dilation holes ----------------------------

#: (type, lhs length, kernel, padding, lhs dilation, XLA:CPU's result), from jax.jit of
#: lax.conv_general_dilated on ones: Eigen (f32, buffers over 8 bytes) multiplies the padding's
#: zeros (Inf -> NaN); the loop emitter (f64, tiny buffers, lhs dilation) skips those cells
_CONV = [
    ("f32", 3, [inf, 1, 1], (1, 1), 1, [nan, inf, inf]),
    ("f32", 3, [inf, 1, 1], (0, 0), 2, [inf, 1, inf]),
    ("f64", 3, [inf, 1, 1], (1, 1), 1, [2, inf, inf]),
    ("f32", 2, [inf, 1, 1], (1, 1), 1, [2, inf]),
    ("f32", 4, [1, nan, 1], (1, 1), 1, [nan, nan, nan, nan]),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", range(len(_CONV)))
def test_non_finite_kernel_over_padding_and_holes_as_xla_cpu(case, backend):
    _backend_ok(backend)
    t, n, kernel, pad, ld, want = _CONV[case]
    dt = xe.Shape(t, ()).dtype
    comp = _comp("conv", [f"{t}[1,1,{n}]", f"{t}[1,1,{len(kernel)}]"], lambda x, k: xe.ConvGeneralDilated(
        x, k, [1], [pad], lhs_dilation=[ld], rhs_dilation=[1]))
    got = comp.run(np.ones((1, 1, n), dt), np.array(kernel, dt).reshape(1, 1, -1), backend=backend)
    np.testing.assert_array_equal(got.ravel(), np.array(want, dt))



#: (what it pins, lhs, rhs, ConvGeneralDilated's keywords, XLA:CPU's result): the paths of
#: xla_explorer.ops.conv_paths, from jax.jit of lax.conv_general_dilated.  f32 lhs dilation with
#: unit strides is EigenTransposedConv2D (holes never read: no NaN); other strides, rhs dilation
#: or 3 spatial dimensions take Eigen's image patches (holes are zeros times Inf: NaN); batch
#: groups become a dilated dimension (group 1's Inf over group 0's holes); f64 feature groups
#: with one input feature each widen the kernel with zeros (group 1's Inf input times 0).
_ONES3 = np.ones((1, 1, 3), np.float32)
_INF11 = np.array([inf, 1, 1], np.float32).reshape(1, 1, 3)
_BG_KERNEL = np.array([1, 1, inf, 1], np.float32).reshape(4, 1, 1)
_FG_INPUT = np.array([[1, 1, 1], [1, inf, 1]], np.float64).reshape(1, 2, 3)
_CONV_PATHS = [
    ("transposed", _ONES3, _INF11, dict(padding=[(0, 0)], lhs_dilation=[2]), [inf, 1, inf]),
    ("patches, stride 2", _ONES3, _INF11, dict(window_strides=[2], padding=[(1, 1)], lhs_dilation=[2]),
     [nan, nan, nan]),
    ("patches, rhs dilation", np.ones((1, 1, 4), np.float32), _INF11,
     dict(padding=[(1, 1)], lhs_dilation=[2], rhs_dilation=[2]), [nan, inf, nan, inf, nan]),
    ("patches, 3-d", np.ones((1, 1, 1, 1, 3), np.float32), _INF11.reshape(1, 1, 1, 1, 3),
     dict(window_strides=[1, 1, 1], padding=[(0, 0)] * 3, lhs_dilation=[1, 1, 2]), [inf, nan, inf]),
    ("batch groups, transposed", np.ones((2, 1, 3), np.float32), _BG_KERNEL,
     dict(padding=[(0, 0)], batch_group_count=2), [1, 1, 1, 1, 1, 1, inf, inf, inf, 1, 1, 1]),
    ("batch groups, patches", np.ones((2, 1, 3), np.float32), _BG_KERNEL,
     dict(window_strides=[2], padding=[(0, 0)], batch_group_count=2), [nan, nan, 1, 1, inf, inf, 1, 1]),
    ("f64 feature groups", _FG_INPUT, np.ones((2, 1, 1)), dict(padding=[(0, 0)], feature_group_count=2),
     [1, nan, 1, 1, inf, 1]),
    ("f32 feature groups", _FG_INPUT.astype(np.float32), np.ones((2, 1, 1), np.float32),
     dict(padding=[(0, 0)], feature_group_count=2), [1, 1, 1, 1, inf, 1]),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", [c[0] for c in _CONV_PATHS])
def test_conv_paths_of_xla_cpu_for_inf_over_holes(case, backend):
    _backend_ok(backend)
    _, x, k, kw, want = next(c for c in _CONV_PATHS if c[0] == case)
    t = xe.Shape.of(x).element_type
    n = x.ndim - 2
    kw = dict(kw, window_strides=kw.get("window_strides", [1] * n))
    comp = _comp("conv", [str(xe.Shape.of(x)), str(xe.Shape.of(k))],
                 lambda a, b: xe.ConvGeneralDilated(a, b, **kw))
    got = comp.run(x, k, backend=backend)
    assert got.dtype == xe.Shape(t, ()).dtype
    np.testing.assert_array_equal(got.ravel(), np.array(want, got.dtype))


@pytest.mark.parametrize("backend", ["numpy", "numba", "cuda"])
def test_generated_convs_with_inf_and_nan_agree_with_xla_cpu(backend):
    """A dozen convolutions from tests/convkit.py (lhs dilation, padding, strides, groups,
    layouts, f32/f64/f16/bf16; ``scripts/conv_specials_vs_xla.py`` runs hundreds) on XLA:CPU
    through jax.jit and on the backend: NaN and Inf at the same places."""
    _backend_ok(backend)
    pytest.importorskip("jax")
    from convkit import agree, case, xla_and_hlo
    for seed in range(12):
        _, kwargs, lhs, rhs = case(seed, lhs_dilation=seed % 4 != 0)
        want, hlo = xla_and_hlo(kwargs, lhs, rhs)
        got = xe.parse_hlo(hlo).run(lhs, rhs, backend=backend)
        assert agree(got, want), (seed, kwargs, got, want)


# -- NaN payloads in HLO text ------------------------------------------------------------------

def test_nan_payload_constants_keep_their_bits_and_print_as_xla_prints_them():
    """XLA prints a NaN that is not the canonical quiet one with its mantissa bits
    (``nan(0x7fffff)``, ``-nan(0x1)``), e.g. in StableHLO's interpreter tests converted to HLO
    by jaxlib's ``mlir_module_to_xla_computation``; the bits must survive parse and print."""
    text = ("HloModule m\nENTRY e {\n"
            "  a = f32[4] constant({nan(0x7fffff), -nan(0x1), nan, -nan})\n"
            "  b = c128[] constant((nan(0x1), 0))\n"
            "  c = bf16[2] constant({nan(0x7f), -inf})\n"
            "  d = f64[] constant(nan(0xfffffffffffff))\n"
            "  ROOT t = (f32[4], c128[], bf16[2], f64[]) tuple(a, b, c, d)\n}\n")
    comp = xe.parse_hlo(text)
    a, b, c, d = comp.run()
    assert [int(v) for v in a.view(np.uint32)] == [0x7FFFFFFF, 0xFF800001, 0x7FC00000, 0xFFC00000]
    assert [int(v) for v in b.reshape(1).view(np.uint64)] == [0x7FF0000000000001, 0]
    assert [int(v) for v in c.view(np.uint16)] == [0x7FFF, 0xFF80]
    assert int(d.reshape(1).view(np.uint64)[0]) == 0x7FFFFFFFFFFFFFFF
    printed = comp.as_hlo_text()
    assert "{nan(0x7fffff), -nan(0x1), nan, -nan}" in printed and "(nan(0x1), 0)" in printed
    assert xe.parse_hlo(printed).as_hlo_text() == printed


@pytest.mark.parametrize("backend", BACKENDS)
def test_bitcast_convert_to_and_from_pred_bytes(backend):
    """XLA stores pred in a byte: jaxlib converts StableHLO's f64 -> 64 x i1
    (bitcast_convert_op_test_f64_to_i1) to ``pred[8] bitcast-convert(f64[])``, and XLA:CPU gives
    8 x true for 0x0123456789ABCDEF (every byte is not zero); pred[8] -> s64 puts 0 or 1 in
    each byte."""
    _backend_ok(backend)
    to_pred = _comp("f64_pred", ["f64[]"], lambda v: xe.BitcastConvertType(v, "pred"))
    xla = to_pred.run(np.array(0x0123456789ABCDEF, np.uint64).view(np.float64), backend=backend)
    np.testing.assert_array_equal(xla, [True] * 8)                       # XLA:CPU's answer
    # bytes that are zero read as false (and every pred is a clean 0 or 1)
    got = to_pred.run(np.array(0x0100FF0000000001, np.uint64).view(np.float64), backend=backend)
    np.testing.assert_array_equal(got, [True, False, False, False, False, True, False, True])
    assert got.view(np.uint8).max() == 1
    back = _comp("pred_s64", ["pred[8]"], lambda v: xe.BitcastConvertType(v, "s64"))
    assert int(back.run(np.array([1, 0, 1, 1, 0, 0, 0, 1], bool), backend=backend)) == 0x0100000001010001
