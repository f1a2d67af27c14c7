"""Transposed convolutions (lhs dilation above 1) run polyphase in the numba executor
(``linalg._poly_conv``: one stride-1-like convolution of the undilated input per residue
class of the outputs, with every ld-th kernel tap) -- against the NumPy reference.

Small shapes take the path with its row threshold off (fixture ``poly``, which also counts
the plans it ran); operands of small integers make every sum exact in f32, f16 and bf16,
so those compare exactly, random normals within the accumulation tolerance of
tests/test_numba_reduction_linalg.py."""
import numpy as np
import pytest

import xla_explorer as xe

pytest.importorskip("numba")

from xla_explorer.executors.cpu import load  # noqa: E402

load()
from convkit import case  # noqa: E402
from xla_explorer.executors.cpu import linalg as klin  # noqa: E402
from xla_explorer.ops import linalg as spec  # noqa: E402
from xla_explorer.shapes import Shape  # noqa: E402

NHWC = ("NHWC", "HWIO", "NHWC")
NCHW = ("NCHW", "OIHW", "NCHW")


@pytest.fixture
def poly(monkeypatch):
    """Polyphase for every convolution with lhs dilation (no row threshold), fresh plans;
    the list of the plans ``_poly_conv`` ran."""
    monkeypatch.setattr(klin, "_POLY_ROWS", 0)
    monkeypatch.setattr(klin, "_CONV_PLANS", {})
    ran = []
    original = klin._poly_conv
    monkeypatch.setattr(klin, "_poly_conv", lambda p, x, w: ran.append(p) or original(p, x, w))
    return ran


def both(lhs, rhs, **kw):
    """(numba kernel's result, the reference's) of one convolution."""
    kw.setdefault("window_strides", (1,) * (lhs.ndim - 2))
    shape = spec._conv_shape_rule(Shape.of(lhs), Shape.of(rhs), **kw)
    return klin.conv_kernel(lhs, rhs, shape=shape, **kw), spec._conv_reference(lhs, rhs, shape=shape, **kw)


def close(got, want, rtol=2e-5, atol=1e-4):
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype, got.shape, want.shape)
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol)


def ints(rng, shape, dtype=np.float32):
    return rng.integers(-3, 4, shape).astype(dtype)


@pytest.mark.parametrize("seed", range(60))
def test_generated_transposed_convs_exact(poly, seed):
    """convkit's generator with lhs dilation forced (1-3 spatial dimensions, strides,
    negative and asymmetric padding, rhs dilation, feature and batch groups, NCHW and
    NHWC, f32 / f64 / f16 / bf16), finite small-integer operands: exact."""
    _, kw, lhs, rhs = case(seed, lhs_dilation=True)
    rng = np.random.default_rng(seed)
    lhs, rhs = ints(rng, lhs.shape, lhs.dtype), ints(rng, rhs.shape, rhs.dtype)
    got, want = both(lhs, rhs, **kw)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    assert len(poly) == 1


EDGES = [
    # (lhs, rhs, dimension numbers, attributes)
    ((2, 7, 6, 3), (3, 3, 3, 4), NHWC, dict(padding=((1, 2), (1, 2)), lhs_dilation=(2, 2))),
    ((2, 7, 6, 3), (3, 3, 3, 4), NHWC, dict(padding=((-1, 2), (2, -1)), lhs_dilation=(2, 3))),   # negative
    ((1, 5, 6, 2), (4, 3, 2, 3), NHWC, dict(padding=((3, 3), (-2, -2)), lhs_dilation=(3, 2))),
    ((2, 7, 6, 3), (3, 3, 3, 4), NHWC, dict(window_strides=(2, 3), padding=((1, 1), (2, 0)), lhs_dilation=(2, 2))),
    ((2, 7, 6, 3), (3, 2, 3, 4), NHWC, dict(window_strides=(3, 2), padding=((2, 2), (1, 1)), lhs_dilation=(2, 3))),
    ((1, 9, 8, 2), (3, 3, 2, 2), NHWC, dict(window_strides=(2, 2), padding=((1, 1), (1, 1)), lhs_dilation=(2, 2))),
    ((2, 7, 6, 3), (3, 3, 3, 4), NHWC, dict(padding=((2, 2), (2, 2)), lhs_dilation=(2, 2), rhs_dilation=(2, 3))),
    ((2, 6, 5, 4), (2, 3, 2, 6), NHWC, dict(padding=((1, 1), (2, 1)), lhs_dilation=(2, 2), feature_group_count=2)),
    ((1, 6, 5, 3), (3, 3, 1, 6), NHWC, dict(padding=((1, 1), (1, 1)), lhs_dilation=(2, 2), feature_group_count=3)),
    ((4, 6, 5, 3), (3, 3, 3, 4), NHWC, dict(padding=((1, 2), (0, 2)), lhs_dilation=(2, 2), batch_group_count=2)),
    ((2, 3, 7, 6), (4, 3, 3, 3), NCHW, dict(padding=((1, 2), (1, 2)), lhs_dilation=(2, 2),
                                            window_reversal=(True, False))),
    ((3, 11, 4), (3, 4, 5), ("NWC", "WIO", "NWC"), dict(padding=((1, 2),), lhs_dilation=(3,))),
    ((2, 4, 9), (5, 4, 2), ("NCW", "OIW", "NCW"), dict(window_strides=(2,), padding=((0, -1),), lhs_dilation=(4,),
                                                      rhs_dilation=(2,))),
    ((1, 4, 5, 3, 2), (3, 2, 3, 2, 3), ("NDHWC", "DHWIO", "NDHWC"), dict(padding=((1, 2), (1, 0), (2, 1)),
                                                                         lhs_dilation=(2, 1, 3))),
    ((2, 2, 3, 4, 3), (3, 2, 2, 3, 2), ("NCDHW", "OIDHW", "NCDHW"), dict(
        window_strides=(1, 2, 1), padding=((0, 1), (1, -1), (1, 1)), lhs_dilation=(2, 2, 2), rhs_dilation=(1, 1, 2))),
    ((1, 2, 2, 2), (3, 3, 2, 2), NHWC, dict(padding=((0, 0), (0, 0)), lhs_dilation=(3, 3))),   # fewer outputs than P
]


@pytest.mark.parametrize("t", [np.float32, np.float64, np.float16, "bfloat16"])
@pytest.mark.parametrize("edge", range(len(EDGES)))
def test_edges_against_the_reference(poly, edge, t):
    """Each edge case in each float type, normal values: within the accumulation
    tolerance (f16 / bf16: of their rounding)."""
    if t == "bfloat16":
        import ml_dtypes
        t = ml_dtypes.bfloat16
    ls, rs, dn, kw = EDGES[edge]
    rng = np.random.default_rng(edge)
    lhs = rng.standard_normal(ls).astype(t)
    rhs = rng.standard_normal(rs).astype(t)
    got, want = both(lhs, rhs, dimension_numbers=dn, **kw)
    tol = {2: dict(rtol=2e-2, atol=3e-2), 4: {}, 8: dict(rtol=1e-12, atol=1e-12)}[np.dtype(t).itemsize]
    close(got, want, **tol)
    assert len(poly) == 1


def test_classes_without_taps_are_zeros_and_the_rest_exact(poly):
    """rhs dilation 2 over lhs dilation 2: every tap of an output lands on the same parity,
    so every other output row meets only holes (a class with no taps: zeros); strides 3 over
    dilation 2 cycle through both parities; s32 wraps as the reference's."""
    rng = np.random.default_rng(3)
    lhs, rhs = ints(rng, (2, 6, 7, 3)), ints(rng, (3, 3, 3, 2))
    got, want = both(lhs, rhs, padding=((2, 2), (1, 1)), lhs_dilation=(2, 2), rhs_dilation=(2, 1),
                     dimension_numbers=NHWC)
    np.testing.assert_array_equal(got, want)
    assert not got[:, 1::2].any() and got[:, ::2].any()
    classes = poly[-1].poly
    assert any(q.taps is None for q in classes) and any(q.taps is not None for q in classes)
    big = np.full((1, 5, 5, 2), 2 ** 30 + 3, np.int32)
    got, want = both(big, np.full((3, 3, 2, 2), 7, np.int32), window_strides=(3, 1), padding=((1, 1), (1, 1)),
                     lhs_dilation=(2, 2), dimension_numbers=NHWC)
    np.testing.assert_array_equal(got, want)
    assert got.dtype == np.int32 and len(poly) == 2


def test_signed_zeros_denormals_and_strided_operands(poly):
    """-0.0 operands, denormal operands (no flush mode: BLAS multiplies them as they are),
    and a transposed and a broadcast (zero-stride) operand."""
    rng = np.random.default_rng(4)
    ls, rs, dn, kw = EDGES[0]
    neg = np.full(ls, -0.0, np.float32)
    got, want = both(neg, rng.standard_normal(rs).astype(np.float32), dimension_numbers=dn, **kw)
    np.testing.assert_array_equal(got, want)   # (== : -0.0 == 0.0)
    tiny = (rng.standard_normal(ls) * 1e-39).astype(np.float32)
    assert (np.abs(tiny) < np.finfo(np.float32).tiny).any()
    got, want = both(tiny, np.ones(rs, np.float32), dimension_numbers=dn, **kw)
    close(got, want, rtol=1e-5, atol=1e-44)
    base = rng.standard_normal(ls[::-1]).astype(np.float32)
    got, want = both(base.T, rng.standard_normal(rs).astype(np.float32), dimension_numbers=dn, **kw)
    close(got, want)
    row = rng.standard_normal(ls[-1]).astype(np.float32)
    got, want = both(np.broadcast_to(row, ls), rng.standard_normal(rs).astype(np.float32), dimension_numbers=dn, **kw)
    close(got, want)
    assert len(poly) == 4


def test_nan_operands_keep_the_reference(poly):
    """An Inf or NaN operand runs the reference (its 0 * Inf over holes), not polyphase."""
    ls, rs, dn, kw = EDGES[0]
    lhs = np.ones(ls, np.float32)
    rhs = np.ones(rs, np.float32)
    rhs[0, 0, 0, 0] = np.inf
    lhs[0, 1, 1, 0] = np.nan
    got, want = both(lhs, rhs, dimension_numbers=dn, **kw)
    np.testing.assert_array_equal(got, want)
    assert not poly


def _comp(lhs, rhs, dn, **kw):
    b = xe.XlaBuilder("transposed")
    x = xe.Parameter(b, 0, xe.Shape("f32", lhs))
    w = xe.Parameter(b, 1, xe.Shape("f32", rhs))
    return b.build(xe.ConvGeneralDilated(x, w, kw.pop("window_strides", [1] * (len(lhs) - 2)), kw.pop("padding"),
                                         dimension_numbers=dn, **kw))


def test_real_size_takes_the_path_and_threads_keep_the_bits(monkeypatch):
    """Without the fixture: a transposed convolution of real size runs polyphase (through
    the run plan's prepared step), one below the row threshold im2col; the blocks are cut
    by size, so one thread and two give the same bits."""
    import numba
    monkeypatch.setattr(klin, "_CONV_PLANS", {})
    ran = []
    original = klin._poly_conv
    monkeypatch.setattr(klin, "_poly_conv", lambda p, x, w: ran.append(p) or original(p, x, w))
    rng = np.random.default_rng(5)
    comp = _comp((2, 16, 16, 8), (3, 3, 8, 8), NHWC, padding=[(1, 2), (1, 2)], lhs_dilation=[2, 2])
    args = [rng.standard_normal(s.dims).astype(np.float32) for s in comp.parameter_shapes]
    before = numba.get_num_threads()
    try:
        got = []
        for threads in (1, min(2, numba.config.NUMBA_NUM_THREADS)):
            numba.set_num_threads(threads)
            got.append(comp.run(*args, backend="numba"))
    finally:
        numba.set_num_threads(before)
    np.testing.assert_array_equal(got[0], got[1])
    close(got[0], comp.run(*args, backend="numpy"))
    assert ran and [q.view is not None for q in ran[0].poly] == [True, False, False, False]
    n = len(ran)
    small = _comp((1, 3, 3, 2), (3, 3, 2, 2), NHWC, padding=[(1, 2), (1, 2)], lhs_dilation=[2, 2])
    sargs = [rng.standard_normal(s.dims).astype(np.float32) for s in small.parameter_shapes]
    close(small.run(*sargs, backend="numba"), small.run(*sargs, backend="numpy"))
    assert len(ran) == n
