"""The CUDA kernels (backend="cuda"), run by numba's CUDA simulator (conftest sets
NUMBA_ENABLE_CUDASIM=1): each kernel against the NumPy reference on small built
computations (the simulator runs every GPU thread as a Python thread), the HLO corpus,
and the error without a GPU."""
import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import xla_explorer as xe
from conftest import CORPUS, corpus_cases

pytest.importorskip("numba")
if os.environ.get("NUMBA_ENABLE_CUDASIM") != "1":
    pytest.skip("the CUDA tests run in numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1)", allow_module_level=True)

from xla_explorer.executors import numba_executor  # noqa: E402
from xla_explorer.executors.cuda import DeviceValue, simulated  # noqa: E402

RNG = np.random.default_rng(0)
FAST = settings(max_examples=12, deadline=None)
# the simulator computes with NumPy scalars, which warn where compiled code wraps silently
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def _flat(v):
    if isinstance(v, (tuple, list)):
        return [y for x in v for y in _flat(x)]
    return [v]


def _bits(a):
    a = np.ascontiguousarray(a)
    return a if a.dtype.kind in "biu" else a.view(f"u{a.dtype.itemsize}")


def check(comp, *args, rtol=None):
    """backend="cuda" against the reference: bit for bit, or within ``rtol`` for floats."""
    want, got = _flat(comp.run(*args)), _flat(comp.run(*args, backend="cuda"))
    assert len(got) == len(want)
    for w, g in zip(want, got):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, w.dtype, g.shape, w.shape)
        if rtol is None:
            np.testing.assert_array_equal(_bits(g), _bits(w))
        else:
            np.testing.assert_allclose(g.astype(w.dtype.kind == "c" and np.complex128 or np.float64),
                                       w.astype(w.dtype.kind == "c" and np.complex128 or np.float64),
                                       rtol=rtol, atol=rtol)
    return got


def build(name, *param_shapes):
    b = xe.XlaBuilder(name)
    return b, [xe.Parameter(b, i, xe.Shape.parse(s) if isinstance(s, str) else s, f"p{i}")
               for i, s in enumerate(param_shapes)]


def rand(t, dims):
    if t in ("f32", "f64", "f16", "bf16"):
        return RNG.normal(size=dims).astype(xe.Shape(t, dims).dtype)
    if t == "pred":
        return RNG.integers(0, 2, size=dims).astype(bool)
    if t == "c64":
        return (RNG.normal(size=dims) + 1j * RNG.normal(size=dims)).astype(np.complex64)
    info = np.iinfo(xe.Shape(t, ()).dtype)
    return RNG.integers(max(info.min, -100), min(info.max, 100), size=dims, endpoint=True).astype(info.dtype)


# -- the device: values stay there, the error without one --------------------------------------

def test_intermediates_stay_on_the_device():
    b, (x,) = build("chain", "f32[3,4]")
    comp = b.build(xe.Reduce(xe.Transpose(xe.Exp(x), [1, 0]), np.float32(0), lambda a, c: xe.Add(a, c), [1]))
    seen = []
    out = numba_executor.run(comp, [rand("f32", (3, 4))], device="cuda", on_value=lambda i, v: seen.append(v))
    assert isinstance(out, np.ndarray)
    assert seen and all(isinstance(v, DeviceValue) for v in seen)


def test_without_gpu_or_simulator_cuda_says_so_and_names_other_backends():
    code = ("import numpy as np, xla_explorer as xe\n"
            "b = xe.XlaBuilder('t'); x = xe.Parameter(b, 0, xe.Shape('f32', (2,)), 'x')\n"
            "comp = b.build(xe.Add(x, x))\n"
            "try:\n    comp.run(np.ones(2, np.float32), backend='cuda')\n"
            "except xe.ExecutionError as e:\n    print('ERROR', e)\n")
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0", CUDA_VISIBLE_DEVICES="")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert "ERROR" in out.stdout, out.stdout + out.stderr
    assert "GPU" in out.stdout and "backend='numba'" in out.stdout and "backend='numpy'" in out.stdout
    assert "NUMBA_ENABLE_CUDASIM=1" in out.stdout


def test_status_table_notes_the_host_and_naive_kernels():
    from xla_explorer.ops import registry
    cuda = registry.LAYERS["cuda"]
    assert cuda["fft"].status_note == cuda["cholesky"].status_note == "host (numpy)"
    assert "naive" in cuda["dot"].status_note and "naive" in cuda["convolution"].status_note


# -- shape ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("t", ["f32", "bf16", "pred", "c64", "u64"])
def test_transpose_reverse_reshape_concatenate(t):
    b, (x, y) = build("shape", xe.Shape(t, (2, 3, 4)), xe.Shape(t, (2, 1, 4)))
    comp = b.build(xe.Tuple(xe.Transpose(x, [2, 0, 1]), xe.Rev(x, [0, 2]), xe.Rev(x, []), xe.Reshape(x, [4, 6]),
                            xe.Concatenate(x, y, x, dimension=1), xe.Copy(y)))
    check(comp, rand(t, (2, 3, 4)), rand(t, (2, 1, 4)))


def test_concatenate_with_an_empty_operand_and_empty_results():
    b, (x, e) = build("empty", "s32[2,3]", "s32[2,0]")
    comp = b.build(xe.Tuple(xe.Concatenate(e, x, e, dimension=1), xe.Transpose(e, [1, 0]), xe.Rev(e, [1])))
    check(comp, rand("s32", (2, 3)), np.zeros((2, 0), np.int32))


@given(st.lists(st.integers(1, 3), min_size=1, max_size=4), st.randoms(use_true_random=False))
@FAST
def test_transpose_and_reverse_any_rank(dims, r):
    perm = list(range(len(dims)))
    r.shuffle(perm)
    rev = [d for d in range(len(dims)) if r.random() < 0.5]
    b, (x,) = build("tr", xe.Shape("s16", dims))
    check(b.build(xe.Tuple(xe.Transpose(x, perm), xe.Rev(x, rev))), rand("s16", dims))


def test_broadcast_and_iota_kernels_called_directly():
    # the fusion plan makes every broadcast and iota a loop; the kernels serve direct calls
    from xla_explorer.executors.cuda.shape import to_device, to_host
    from xla_explorer.ops import registry
    cuda = registry.LAYERS["cuda"]
    x = np.array([[1.5], [2.5]], ml_dtypes.bfloat16)
    got = cuda["broadcast"](to_device(x), shape=xe.Shape("bf16", (3, 2, 4)), out_dim_size=(3, 2, 4),
                            broadcast_dimensions=(1, 2))
    np.testing.assert_array_equal(to_host(got), np.broadcast_to(x, (3, 2, 4)))
    for t in ("bf16", "s8", "f32"):
        got = to_host(cuda["iota"](shape=xe.Shape(t, (2, 300)), iota_dimension=1))
        want = np.broadcast_to(np.arange(300), (2, 300)).astype(xe.Shape(t, ()).dtype)
        np.testing.assert_array_equal(_bits(got), _bits(want))


def test_bitcast_and_dimension_size_ops():
    b, (x,) = build("bc", "f32[2,3]")
    comp = b.build(xe.Tuple(xe.Bitcast(x, "f32[3,2]"), xe.Bitcast(x, "s32[6]"), xe.GetDimensionSize(x, 1),
                            xe.SetDimensionSize(x, xe.Constant(b, np.int32(2)), 1)))
    check(comp, rand("f32", (2, 3)))


# -- slicing ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("t", ["f16", "s8", "pred"])
def test_slice_and_pad(t):
    b, (x, v) = build("slice", xe.Shape(t, (4, 5)), xe.Shape(t, ()))
    comp = b.build(xe.Tuple(xe.Slice(x, [1, 0], [4, 5], [2, 3]), xe.Slice(x, [2, 2], [2, 4]),
                            xe.Pad(x, v, [(1, -2, 1), (-1, 2, 2)]), xe.Pad(x, v, [(0, 0, 0), (0, 0, 0)]),
                            xe.Pad(x, v, [(-3, -1, 0), (2, 0, 0)])))
    check(comp, rand(t, (4, 5)), rand(t, ()))


def test_pad_of_an_empty_operand():
    b, (x, v) = build("pad0", "f32[0,2]", "f32[]")
    check(b.build(xe.Pad(x, v, [(2, 1, 3), (0, 1, 1)])), np.zeros((0, 2), np.float32), np.float32(7))


@pytest.mark.parametrize("t,starts", [("s32", [(1, 2), (-5, 9), (3, 0)]),
                                      ("u64", [(0, 0), (2 ** 64 - 1, 2), (2 ** 63, 2 ** 62)]),
                                      ("s8", [(-128, 127)])])
def test_dynamic_slice_and_update_clamp_their_starts(t, starts):
    b, (x, u, i, j) = build("ds", "f32[5,4]", "f32[2,3]", xe.Shape(t, ()), xe.Shape(t, ()))
    comp = b.build(xe.Tuple(xe.DynamicSlice(x, [i, j], [3, 2]), xe.DynamicUpdateSlice(x, u, [i, j]),
                            xe.DynamicSlice(x, [i, j], [0, 2])))
    dtype = xe.Shape(t, ()).dtype
    for si, sj in starts:
        check(comp, rand("f32", (5, 4)), rand("f32", (2, 3)), dtype.type(si), dtype.type(sj))


@given(st.lists(st.tuples(st.integers(-2, 2), st.integers(-2, 2), st.integers(0, 2)), min_size=1, max_size=3),
       st.data())
@FAST
def test_pad_any_config(config, data):
    dims = [data.draw(st.integers(0, 3)) for _ in config]
    if any(d + lo + max(d - 1, 0) * i + hi < 0 for d, (lo, hi, i) in zip(dims, config)):
        return
    b, (x, v) = build("pad", xe.Shape("u8", dims), xe.Shape("u8", ()))
    check(b.build(xe.Pad(x, v, config)), rand("u8", dims), np.uint8(255))


# -- gather and scatter ---------------------------------------------------------------------------------

@pytest.mark.parametrize("t", ["s32", "u64", "s8"])
def test_gather_rows_with_out_of_bounds_indices_clamped(t):
    b, (x, i) = build("gather", "bf16[5,3]", xe.Shape(t, (4, 1)))
    comp = b.build(xe.Tuple(
        xe.Gather(x, i, offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0], index_vector_dim=1,
                  slice_sizes=[1, 3]),
        xe.Gather(x, i, offset_dims=[1, 2], collapsed_slice_dims=[], start_index_map=[1], index_vector_dim=1,
                  slice_sizes=[2, 2])))
    idx = np.array([[0], [4], [2 ** 64 - 1 if t == "u64" else -3], [100]]).astype(xe.Shape(t, ()).dtype)
    check(comp, rand("bf16", (5, 3)), idx)


def test_gather_elements_batching_dims_scalar_operand_and_empty_slices():
    b, (x, i, s, e) = build("g2", "f32[2,4,3]", "s32[2,5,2]", "f32[]", "f32[0,3]")
    comp = b.build(xe.Tuple(
        # x[b, i[b, k, 0], i[b, k, 1]] with a batching dimension (what vmap emits)
        xe.Gather(x, i, offset_dims=[], collapsed_slice_dims=[1, 2], start_index_map=[1, 2], index_vector_dim=2,
                  slice_sizes=[1, 1, 1], operand_batching_dims=[0], start_indices_batching_dims=[0]),
        xe.Gather(x, i, offset_dims=[2, 3], collapsed_slice_dims=[0], start_index_map=[0, 1], index_vector_dim=2,
                  slice_sizes=[1, 2, 3]),
        xe.Gather(s, xe.Constant(b, np.zeros((3, 0), np.int32)), offset_dims=[], collapsed_slice_dims=[],
                  start_index_map=[], index_vector_dim=1, slice_sizes=[]),
        xe.Gather(e, xe.Constant(b, np.zeros((2, 1), np.int32)), offset_dims=[1], collapsed_slice_dims=[0],
                  start_index_map=[0], index_vector_dim=1, slice_sizes=[0, 3])))
    check(comp, rand("f32", (2, 4, 3)), RNG.integers(-2, 6, size=(2, 5, 2)).astype(np.int32), np.float32(3),
          np.zeros((0, 3), np.float32))


def _scatter_rows(op, ind, up, fn):
    return xe.Scatter(op, ind, up, fn, update_window_dims=[1], inserted_window_dims=[0],
                      scatter_dims_to_operand_dims=[0], index_vector_dim=1)


@pytest.mark.parametrize("parallel", [True, False])
def test_scatter_duplicates_in_order_and_out_of_bounds_skipped(parallel, monkeypatch):
    from xla_explorer.executors.cuda import indexing
    monkeypatch.setattr(indexing, "PARALLEL_SCAN_MAX", 1 << 30 if parallel else 0)
    b, (op, ind, up) = build("scatter", "s32[5,3]", "s32[6,1]", "s32[6,3]")
    comp = b.build(xe.Tuple(
        _scatter_rows(op, ind, up, lambda a, c: xe.Add(a, c)),
        # not commutative: the updates of one row combine in XLA's order
        _scatter_rows(op, ind, up, lambda a, c: xe.Sub(xe.Mul(a, np.int32(3)), c)),
        _scatter_rows(op, ind, up, lambda a, c: c)))
    check(comp, rand("s32", (5, 3)), np.array([[1], [7], [1], [-1], [4], [1]], np.int32), rand("s32", (6, 3)))


def test_scatter_variadic_partial_windows_and_batching():
    b, (o1, o2, ind, u1, u2) = build("scv", "f32[4,4]", "s32[4,4]", "s32[3,2]", "f32[3,2,2]", "s32[3,2,2]")
    comp = b.build(xe.Tuple(
        xe.Scatter([o1, o2], ind, [u1, u2], lambda a, a2, c, c2: xe.Tuple(xe.Max(a, c), xe.Add(a2, c2)),
                   update_window_dims=[1, 2], inserted_window_dims=[], scatter_dims_to_operand_dims=[0, 1],
                   index_vector_dim=1)))
    check(comp, rand("f32", (4, 4)), rand("s32", (4, 4)), np.array([[0, 0], [3, 1], [2, 2]], np.int32),
          rand("f32", (3, 2, 2)), rand("s32", (3, 2, 2)))
    b, (op, ind, up) = build("scb", "f32[2,5]", "s32[2,3]", "f32[2,3]")
    comp = b.build(xe.Scatter(op, ind, up, lambda a, c: xe.Add(a, c), update_window_dims=[],
                              inserted_window_dims=[1], scatter_dims_to_operand_dims=[1], index_vector_dim=2,
                              input_batching_dims=[0], scatter_indices_batching_dims=[0]))
    check(comp, rand("f32", (2, 5)), np.array([[0, 4, 0], [9, 1, 1]], np.int32), rand("f32", (2, 3)), rtol=1e-6)


# -- reductions ----------------------------------------------------------------------------------------

def test_reduce_sum_max_pred_and_empty():
    b, (x, p, e) = build("reduce", "f32[3,4,2]", "pred[2,3]", "s32[0,3]")
    comp = b.build(xe.Tuple(
        xe.Reduce(x, np.float32(0), lambda a, c: xe.Add(a, c), [0, 2]),
        xe.Reduce(x, np.float32(-np.inf), lambda a, c: xe.Max(a, c), [1]),
        xe.Reduce(x, np.float32(1), lambda a, c: xe.Mul(a, c), []),
        xe.Reduce(p, np.bool_(True), lambda a, c: xe.And(a, c), [1]),
        xe.Reduce(e, np.int32(5), lambda a, c: xe.Add(a, c), [0]),
        xe.Reduce(e, np.int32(5), lambda a, c: xe.Add(a, c), [1])))
    check(comp, rand("f32", (3, 4, 2)), rand("pred", (2, 3)), np.zeros((0, 3), np.int32), rtol=1e-5)


def test_reduce_argmax_variadic_region_and_bf16_sum():
    b, (x, h) = build("argmax", "f32[3,5]", "bf16[4,3]")
    idx = xe.Iota(b, xe.Shape("s32", (3, 5)), 1)

    def region(av, ai, bv, bi):
        take_a = xe.Or(xe.Gt(av, bv), xe.And(xe.Eq(av, bv), xe.Lt(ai, bi)))
        return xe.Tuple(xe.Select(take_a, av, bv), xe.Select(take_a, ai, bi))
    comp = b.build(xe.Tuple(
        xe.Reduce([x, idx], [np.float32(-np.inf), np.int32(0)], region, [1]),
        xe.Reduce(h, xe.Constant(b, ml_dtypes.bfloat16(0.5)), lambda a, c: xe.Add(a, c), [0])))
    check(comp, np.array([[1, 3, 3, 0, 2], [5, 5, 5, 5, 5], [-1, -2, 9, 9, np.nan]], np.float32),
          RNG.integers(-8, 8, size=(4, 3)).astype(ml_dtypes.bfloat16))


def test_reduce_window_padded_strided_dilated():
    b, (x,) = build("rw", "f32[5,6]")
    comp = b.build(xe.Tuple(
        xe.ReduceWindow(x, np.float32(0), lambda a, c: xe.Add(a, c), [3, 3], [2, 2], [(1, 1), (1, 1)]),
        xe.ReduceWindow(x, np.float32(-np.inf), lambda a, c: xe.Max(a, c), [2, 2], [1, 2], [(0, 1), (2, 0)],
                        base_dilations=[2, 1], window_dilations=[1, 2]),
        xe.ReduceWindow(x, np.float32(-np.inf), lambda a, c: xe.Max(a, c), [2, 3], [1, 1], "SAME")))
    check(comp, rand("f32", (5, 6)), rtol=1e-5)


def test_select_and_scatter_max_pool_gradient():
    b, (x, s) = build("sas", "f32[4,5]", "f32[2,3]")
    comp = b.build(xe.SelectAndScatter(x, lambda a, c: xe.Ge(a, c), [2, 2], [2, 2], [(0, 0), (0, 1)], s,
                                       np.float32(0), lambda a, c: xe.Add(a, c)))
    x_val = rand("f32", (4, 5))
    x_val[0, :2] = 1.0  # ties: the first in the window wins
    check(comp, x_val, rand("f32", (2, 3)), rtol=1e-6)


@pytest.mark.parametrize("t", ["f32", "s32", "bf16"])
def test_sort_multi_operand_stable_and_topk(t):
    b, (x, y) = build("sort", xe.Shape(t, (3, 6)), "s32[3,6]")
    less = lambda a, c, *rest: xe.LtTotalOrder(a, c) if t != "s32" else xe.Lt(a, c)  # noqa: E731
    comp = b.build(xe.Tuple(xe.Sort([x, y], less, dimension=1), xe.Sort([x], less, dimension=0),
                            xe.TopK(x, 3), xe.TopK(x, 6, largest=False)))
    x_val = np.array([[3, 1, 2, 1, 7, 0], [0, 0, 5, 5, -4, 1], [1, 1, 1, 1, 1, 1]]).astype(xe.Shape(t, ()).dtype)
    if t != "s32":
        x_val[0, 4], x_val[0, 5], x_val[1, 1] = np.nan, -0.0, -0.0
    check(comp, x_val, np.arange(18, dtype=np.int32).reshape(3, 6))


# -- linear algebra -------------------------------------------------------------------------------------

def test_dot_general_batched():
    b, (lhs, rhs) = build("dot", "f32[2,3,4]", "f32[2,4,5]")
    comp = b.build(xe.Tuple(
        xe.DotGeneral(lhs, rhs, lhs_contracting_dimensions=[2], rhs_contracting_dimensions=[1],
                      lhs_batch_dimensions=[0], rhs_batch_dimensions=[0]),
        xe.DotGeneral(lhs, rhs, lhs_contracting_dimensions=[0, 2], rhs_contracting_dimensions=[0, 1]),
        xe.DotGeneral(lhs, rhs, lhs_contracting_dimensions=[], rhs_contracting_dimensions=[])))
    check(comp, rand("f32", (2, 3, 4)), rand("f32", (2, 4, 5)), rtol=1e-5)


def test_dot_then_transpose_runs_its_substeps():
    """A dot read only by a transpose is one step of the plan (fusion.DotTranspose); CUDA
    has no folded kernel and runs the dot and the transpose, walk and run plan alike."""
    b, (lhs, rhs) = build("dott", "f32[5,3]", "f32[5,4]")
    comp = b.build(xe.Transpose(xe.DotGeneral(lhs, rhs, lhs_contracting_dimensions=[0],
                                              rhs_contracting_dimensions=[0]), [1, 0]))
    assert [s.group.kind for s in comp.fusion_plan().steps if s.group is not None] == ["dot"]
    args = rand("f32", (5, 3)), rand("f32", (5, 4))
    for _ in range(2):
        check(comp, *args, rtol=1e-5)


def test_dot_integers_wrap_in_the_result_type():
    b, (lhs, rhs, p) = build("doti", "s8[3,40]", "s8[40,2]", "pred[2,2]")
    comp = b.build(xe.Tuple(xe.Dot(lhs, rhs), xe.Dot(lhs, rhs, preferred_element_type="s32"), xe.Dot(p, p)))
    check(comp, RNG.integers(-128, 128, size=(3, 40)).astype(np.int8),
          RNG.integers(-128, 128, size=(40, 2)).astype(np.int8), rand("pred", (2, 2)))
    check(comp, np.full((3, 40), 100, np.int8), np.full((40, 2), 100, np.int8), rand("pred", (2, 2)))


@pytest.mark.parametrize("groups", [{"feature_group_count": 2}, {"batch_group_count": 2}])
def test_convolution_dilated_padded_grouped(groups):
    kernel_in = 2 if "feature_group_count" in groups else 4
    b, (lhs, rhs) = build("conv", "f32[2,4,5,6]", f"f32[4,{kernel_in},2,3]")
    comp = b.build(xe.ConvGeneralDilated(lhs, rhs, [1, 2], [(1, -1), (0, 2)], lhs_dilation=[1, 2],
                                         rhs_dilation=[2, 1], **groups))
    check(comp, rand("f32", (2, 4, 5, 6)), rand("f32", (4, kernel_in, 2, 3)), rtol=1e-5)


def test_convolution_nhwc_reversed_window():
    b, (lhs, rhs) = build("conv", "bf16[1,4,4,2]", "bf16[2,2,2,3]")
    comp = b.build(xe.ConvGeneralDilated(lhs, rhs, [1, 1], "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                         window_reversal=[True, False]))
    check(comp, rand("bf16", (1, 4, 4, 2)), rand("bf16", (2, 2, 2, 3)), rtol=2e-2)


def test_batch_norms():
    b, (x, sc, of, dy) = build("bn", "f32[2,3,4]", "f32[3]", "f32[3]", "f32[2,3,4]")
    comp = b.build(xe.Tuple(xe.BatchNormTraining(x, sc, of, 1e-3, 1),
                            xe.BatchNormInference(x, sc, of, sc, xe.Abs(of), 1e-3, 1),
                            xe.BatchNormGrad(x, sc, of, xe.Abs(sc), dy, 1e-3, 1)))
    check(comp, rand("f32", (2, 3, 4)), rand("f32", (3,)), rand("f32", (3,)), rand("f32", (2, 3, 4)), rtol=1e-5)


def test_fft_cholesky_triangular_solve_on_the_host():
    b, (x, a, rhs) = build("lin", "c64[2,4]", "f32[3,3]", "f32[3,2]")
    comp = b.build(xe.Tuple(xe.Fft(x, "FFT", [4]), xe.Cholesky(a, lower=True),
                            xe.TriangularSolve(a, rhs, left_side=True, lower=True)))
    m = rand("f32", (3, 3))
    spd = (m @ m.T + 3 * np.eye(3)).astype(np.float32)
    check(comp, rand("c64", (2, 4)), spd, rand("f32", (3, 2)), rtol=1e-5)


# -- element-wise kernels --------------------------------------------------------------------------------

def test_bitcast_convert_widths_and_narrow_floats():
    b, (x, h, f8, f16, w8) = build("bc", "f32[3]", "bf16[2,2]", "f8e4m3fn[4]", "f16[5]", "u8[6]")
    u8 = xe.BitcastConvertType(x, "u8")
    e5m2 = xe.BitcastConvertType(w8, "f8e5m2")
    comp = b.build(xe.Tuple(
        u8, xe.BitcastConvertType(x, "s32"), xe.BitcastConvertType(u8, "f32"),
        xe.BitcastConvertType(h, "u16"), xe.BitcastConvertType(h, "f32"), xe.BitcastConvertType(h, "u8"),
        xe.BitcastConvertType(f8, "s8"), xe.BitcastConvertType(xe.BitcastConvertType(f8, "u8"), "f8e4m3fn"),
        e5m2, xe.BitcastConvertType(e5m2, "s8"),
        xe.BitcastConvertType(f16, "u16"), xe.BitcastConvertType(xe.BitcastConvertType(f16, "s16"), "f16"),
        xe.BitcastConvertType(xe.BitcastConvertType(f16, "u8"), "f16"),
        xe.BitcastConvertType(xe.BitcastConvertType(h, "u16"), "f16")))
    # (NaN payloads of the narrow floats are not kept: values travel to the host as f32)
    check(comp, np.array([1.5, -0.0, np.nan], np.float32), np.array([[1, -2], [np.inf, 3e-39]], ml_dtypes.bfloat16),
          np.array([448, -0.001953125, np.nan, 1.5], ml_dtypes.float8_e4m3fn),
          np.array([65504, 6e-8, -np.inf, np.nan, 1e-5], np.float16),
          np.array([0, 1, 0x3C, 0x7B, 0x7C, 0x83], np.uint8))


@given(st.lists(st.integers(0, 2 ** 16 - 1), min_size=1, max_size=8))
@FAST
def test_bitcast_convert_every_f16_and_bf16_bit_pattern_round_trips(words):
    b, (u,) = build("bits", xe.Shape("u16", (len(words),)))
    comp = b.build(xe.Tuple(xe.BitcastConvertType(xe.BitcastConvertType(u, "f16"), "u16"),
                            xe.BitcastConvertType(xe.BitcastConvertType(u, "bf16"), "s16")))
    w = np.array(words, np.uint16)
    nan16 = ((w & 0x7C00) == 0x7C00) & ((w & 0x3FF) != 0)
    nanbf = ((w & 0x7F80) == 0x7F80) & ((w & 0x7F) != 0)
    if not (nan16 | nanbf).any():    # NaN payloads may be quieted on the way through f32
        check(comp, w)


def test_map_and_select_of_tuples():
    b, (x, y, p) = build("map", "f32[2,3]", "f32[2,3]", "pred[]")
    comp = b.build(xe.Tuple(xe.Map([x, y], lambda a, c: xe.Max(xe.Mul(a, c), np.float32(0.5))),
                            xe.Select(p, xe.Tuple(x, y), xe.Tuple(y, x))))
    for pv in (True, False):
        check(comp, rand("f32", (2, 3)), rand("f32", (2, 3)), np.bool_(pv))


def test_an_op_no_emitter_writes_runs_on_the_host():
    b, (z,) = build("ctan", "c64[3]")
    comp = b.build(xe.Tan(z))
    check(comp, rand("c64", (3,)), rtol=1e-5)


# -- rng-bit-generator ---------------------------------------------------------------------------------

@pytest.mark.parametrize("algorithm", ["rng_default", "rng_three_fry", "rng_philox"])
@pytest.mark.parametrize("t,dims", [("u32", (3, 5)), ("u64", (3,)), ("f16", (2, 3)), ("s8", (3,)), ("f32", ())])
def test_rng_bit_generator_matches_the_reference_bits(algorithm, t, dims):
    n = 3 if algorithm == "rng_philox" else 2
    b, (s,) = build("rbg", xe.Shape("u64", (n,)))
    comp = b.build(xe.RngBitGenerator(algorithm, s, xe.Shape(t, dims)))
    check(comp, np.array([2 ** 64 - 3, 2 ** 64 - 2, 7][:n], np.uint64))


# -- generated configurations ------------------------------------------------------------------------

@given(st.lists(st.integers(0, 3), min_size=1, max_size=4), st.data())
@FAST
def test_reduce_any_dimensions(dims, data):
    reduced = data.draw(st.lists(st.sampled_from(range(len(dims))), unique=True))
    b, (x, f) = build("reduce", xe.Shape("s32", dims), xe.Shape("f32", dims))
    comp = b.build(xe.Tuple(xe.Reduce(x, np.int32(1), lambda a, c: xe.Add(a, c), reduced),
                            xe.Reduce(f, np.float32(-np.inf), lambda a, c: xe.Max(a, c), reduced)))
    check(comp, rand("s32", dims), rand("f32", dims))


@given(st.data())
@FAST
def test_reduce_window_any_window(data):
    rank = data.draw(st.integers(1, 2))
    dims = [data.draw(st.integers(0, 4)) for _ in range(rank)]
    window = [data.draw(st.integers(1, 3)) for _ in range(rank)]
    strides = [data.draw(st.integers(1, 2)) for _ in range(rank)]
    padding = [(data.draw(st.integers(0, 2)), data.draw(st.integers(0, 2))) for _ in range(rank)]
    base = [data.draw(st.integers(1, 2)) for _ in range(rank)]
    wdil = [data.draw(st.integers(1, 2)) for _ in range(rank)]
    b, (x,) = build("rw", xe.Shape("s32", dims))
    comp = b.build(xe.ReduceWindow(x, np.int32(-7), lambda a, c: xe.Max(a, c), window, strides, padding,
                                   base_dilations=base, window_dilations=wdil))
    check(comp, rand("s32", dims))


@given(st.integers(1, 5), st.integers(1, 4), st.lists(st.integers(-3, 8), min_size=0, max_size=6), st.data())
@FAST
def test_gather_and_scatter_rows_any_indices(rows, cols, index, data):
    width = data.draw(st.integers(0, cols))
    b, (x, i, u) = build("gs", xe.Shape("s32", (rows, cols)), xe.Shape("s32", (len(index), 1)),
                         xe.Shape("s32", (len(index), width)))
    dn = dict(update_window_dims=[1], inserted_window_dims=[0], scatter_dims_to_operand_dims=[0],
              index_vector_dim=1)
    comp = b.build(xe.Tuple(
        xe.Gather(x, i, offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0], index_vector_dim=1,
                  slice_sizes=[1, width]),
        xe.Scatter(x, i, u, lambda a, c: xe.Add(a, c), **dn),
        xe.Scatter(x, i, u, lambda a, c: xe.Sub(c, a), **dn)))
    check(comp, rand("s32", (rows, cols)), np.array(index, np.int32).reshape(-1, 1),
          rand("s32", (len(index), width)))


@given(st.lists(st.integers(1, 4), min_size=1, max_size=3), st.data())
@FAST
def test_slice_any_window(dims, data):
    start = [data.draw(st.integers(0, d)) for d in dims]
    limit = [data.draw(st.integers(s, d)) for s, d in zip(start, dims)]
    strides = [data.draw(st.integers(1, 3)) for _ in dims]
    b, (x,) = build("slice", xe.Shape("c64", dims))
    check(b.build(xe.Slice(x, start, limit, strides)), rand("c64", dims))


# -- the HLO corpus ------------------------------------------------------------------------------------

_runner = None
if (CORPUS.parent / "tools" / "run_corpus.py").exists():
    import importlib.util
    _spec = importlib.util.spec_from_file_location("run_corpus", CORPUS.parent / "tools" / "run_corpus.py")
    _runner = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_runner)

#: cases that fail for a reason outside the CUDA kernels
@pytest.mark.skipif(_runner is None, reason="HLO corpus not found")
@pytest.mark.parametrize("case", corpus_cases())
def test_corpus_case_cuda(case):
    res = _runner.run_one(xe, str(CORPUS / case), "cuda", "global")
    assert res["status"] == "pass", f"{case}: {res['reason']}\n{res.get('traceback', '')}"


@pytest.mark.skipif(_runner is None, reason="HLO corpus not found")
@pytest.mark.parametrize("case", [c for c in corpus_cases() if c.startswith("coll_")])
def test_corpus_collectives_per_device_cuda(case):
    """Simulated devices are threads: the simulator's kernels take turns."""
    res = _runner.run_one(xe, str(CORPUS / case), "cuda", "per-device")
    assert res["status"] == "pass", f"{case}: {res['reason']}\n{res.get('traceback', '')}"


def test_simulator_is_on():
    assert simulated()


@pytest.mark.parametrize("t", ["s8", "s32", "u16", "u32"])
def test_int_divide_and_remainder_edge_pairs(t):
    """``scalar_lib.int_div_s32`` and friends as the simulator runs them (NumPy scalars, not
    compiled code): every pair of edge values (INT_MIN / -1, x / 0, x % -1), the reference's bits."""
    from test_numba_explore_fast import _module, _values
    a, b = _values(t, np.random.default_rng(3))
    a, b = a[:-4000], b[:-4000]   # the edge pairs only (each GPU thread is a Python thread here)
    for op in ("divide", "remainder"):
        check(_module(t, a.size, op), a, b)
