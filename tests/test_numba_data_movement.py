"""Data-movement kernels of the Numba CPU executor (executors/cpu/shape.py, slicing.py,
indexing.py) against the NumPy reference, bit for bit.

Every test builds a computation and runs it with ``backend="numba"`` and with the
reference.  Hypothesis draws shapes (empty and size-1 dimensions included), attributes
(reversals, strides, negative and interior padding, out-of-bounds and huge start
indices, random valid gather/scatter dimension numbers from test_indexing.py) and
element types (one per width: the kernels move bits, so a width is what they compile
for).  Large examples run the parallel variants once each.  Compile time is bounded:
few element types, small arrays, and numba's on-disk cache makes reruns fast.
"""
import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import xla_explorer as xe
from xla_explorer.ops import registry

pytest.importorskip("numba")

from test_indexing import INDEX_DTYPES, indexing_configs  # noqa: E402  (random valid dimension numbers)

from xla_explorer.executors import cpu  # noqa: E402
from xla_explorer.executors.cpu import indexing as cpu_indexing  # noqa: E402
from xla_explorer.executors.cpu import shape as cpu_shape  # noqa: E402
from xla_explorer.executors.cpu import slicing as cpu_slicing  # noqa: E402

cpu.load()

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
#: one element type per width (1, 2, 4, 8 and 16 bytes), floats with NaN/-0.0 and pred among them
TYPES = ["pred", "bf16", "f32", "s64", "c128"]
type_st = st.sampled_from(TYPES)
dims_st = st.lists(st.integers(0, 4), min_size=0, max_size=4)


def values(dims, t, seed=0):
    """Random values of XLA type ``t`` (floats with -0.0, Inf and NaN among them)."""
    rng = np.random.default_rng(seed)
    dtype = xe.Shape(t, ()).dtype
    dims = tuple(dims)
    if t == "pred":
        return rng.random(dims) < 0.5
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, size=dims, dtype=dtype, endpoint=True)
    x = rng.normal(size=dims) * 10
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan])[rng.integers(0, 5, size=dims)]
    x = np.where(rng.random(dims) < 0.1, special, x)
    if dtype.kind == "c":
        x = x + 1j * rng.normal(size=dims)
    return np.asarray(x).astype(dtype)


def build(f, *args):
    b = xe.XlaBuilder("t")
    params = [xe.Parameter(b, i, xe.Shape.of(np.asarray(a)), f"p{i}") for i, a in enumerate(args)]
    return b.build(f(*params))


def same_bits(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    assert np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(want).tobytes(), (got, want)


def check(f, *args):
    """Run f's computation on both backends; the results must have the same bits.  Numba
    runs twice: the first run walks the computation, the second runs its run plan (the
    kernels' ``prepare`` hooks: their set-up decided once per step)."""
    comp = build(f, *args)
    first = comp.run(*args, backend="numba")
    got = comp.run(*args, backend="numba")
    want = comp.run(*args, backend="numpy")
    for out in (first, got):
        if isinstance(want, tuple):
            assert isinstance(out, tuple) and len(out) == len(want)
            for g, w in zip(out, want):
                same_bits(g, w)
        else:
            same_bits(out, want)
    return got


# =========================================================================================
# shape.py
# =========================================================================================

@SETTINGS
@given(dims_st, type_st, st.data())
def test_transpose(dims, t, data):
    perm = data.draw(st.permutations(range(len(dims))))
    check(lambda x: xe.Transpose(x, perm), values(dims, t))


@SETTINGS
@given(dims_st, type_st, st.data())
def test_reverse(dims, t, data):
    rev = data.draw(st.lists(st.integers(0, max(len(dims) - 1, 0)), unique=True, max_size=len(dims)))
    check(lambda x: xe.Rev(x, rev), values(dims, t))


@SETTINGS
@given(st.lists(st.integers(0, 4), min_size=1, max_size=3), type_st, st.data())
def test_concatenate(dims, t, data):
    dimension = data.draw(st.integers(0, len(dims) - 1))
    sizes = data.draw(st.lists(st.integers(0, 3), min_size=1, max_size=3))
    operands = [values(dims[:dimension] + [s] + dims[dimension + 1:], t, seed=k) for k, s in enumerate(sizes)]
    check(lambda *xs: xe.Concatenate(*xs, dimension=dimension), *operands)


@SETTINGS
@given(dims_st, type_st, st.data())
def test_reshape_bitcast_copy(dims, t, data):
    x = values(dims, t)
    new = list(dims)
    data.draw(st.randoms()).shuffle(new)
    new = new + [1] * data.draw(st.integers(0, 2))
    check(lambda p: xe.Reshape(p, new), x)
    check(lambda p: xe.Collapse(p, list(range(len(dims)))) if dims else xe.Copy(p), x)
    check(lambda p: xe.Copy(p), x)
    check(lambda p: xe.Bitcast(p, xe.Shape(t, new)), x)


def test_bitcast_changes_type_and_dynamic_reshape():
    x = values((4, 6), "f32")
    check(lambda p: xe.Bitcast(p, xe.Shape("u16", (4, 12))), x)
    check(lambda p: xe.Bitcast(p, xe.Shape("s32", (24,))), x)
    b = xe.XlaBuilder("dr")
    p = xe.Parameter(b, 0, xe.Shape("f32", (4, 6)), "p")
    n = xe.Parameter(b, 1, xe.Shape("s32", ()), "n")
    comp = b.build(xe.DynamicReshape(p, [n, xe.ConstantR0(b, np.int32(4))], [6, 4], [True, False]))
    same_bits(comp.run(x, np.int32(6), backend="numba"), comp.run(x, np.int32(6)))
    with pytest.raises(xe.ExecutionError, match="DynamicReshape"):
        comp.run(x, np.int32(5), backend="numba")


def test_broadcast_and_iota_are_fused_loops_not_kernels():
    # the fusion plan makes every broadcast and iota a loop (a lone one: a one-member
    # group), so they need no kernel; a broadcast that feeds a transpose still runs
    assert "broadcast" not in registry.LAYERS["cpu"] and "iota" not in registry.LAYERS["cpu"]
    x = values((3, 1), "bf16")

    def f(p):
        wide = xe.BroadcastInDim(p, [2, 3, 5], [1, 2])
        return xe.Transpose(xe.Add(wide, xe.ConvertElementType(xe.Iota(p.builder, "s32[2,3,5]", 2), "bf16")),
                            [2, 0, 1])
    check(f, x)
    comp = build(lambda p: xe.Transpose(xe.BroadcastInDim(p, [4, 3], [1]), [1, 0]), values((3,), "s64"))
    steps = comp.fusion_plan().steps
    assert steps[1].group is not None and steps[1].group.root.opcode == "broadcast"


# =========================================================================================
# slicing.py
# =========================================================================================

@SETTINGS
@given(dims_st, type_st, st.data())
def test_slice(dims, t, data):
    starts, limits, strides = [], [], []
    for d in dims:
        start = data.draw(st.integers(0, d))
        starts.append(start)
        limits.append(data.draw(st.integers(start, d)))
        strides.append(data.draw(st.integers(1, 3)))
    check(lambda x: xe.Slice(x, starts, limits, strides), values(dims, t))


def _start_indices(data, n, index_type):
    info = np.iinfo(index_type)
    return [index_type(data.draw(st.one_of(st.integers(max(int(info.min), -6), 6),
                                           st.sampled_from([int(info.min), int(info.max)]))))
            for _ in range(n)]


index_type_st = st.sampled_from([np.int8, np.int32, np.int64, np.uint8, np.uint32, np.uint64])


@SETTINGS
@given(dims_st, type_st, index_type_st, st.data())
def test_dynamic_slice(dims, t, index_type, data):
    starts = _start_indices(data, len(dims), index_type)
    sizes = [data.draw(st.integers(0, d)) for d in dims]
    check(lambda x, *s: xe.DynamicSlice(x, list(s), sizes), values(dims, t), *starts)


@SETTINGS
@given(dims_st, type_st, index_type_st, st.data())
def test_dynamic_update_slice(dims, t, index_type, data):
    starts = _start_indices(data, len(dims), index_type)
    sizes = [data.draw(st.integers(0, d)) for d in dims]
    check(lambda x, u, *s: xe.DynamicUpdateSlice(x, u, list(s)), values(dims, t), values(sizes, t, seed=1),
          *starts)


@SETTINGS
@given(dims_st, type_st, st.data())
def test_pad(dims, t, data):
    config = []
    for d in dims:
        interior = data.draw(st.integers(0, 2))
        padded = d + max(d - 1, 0) * interior
        low = data.draw(st.integers(-padded, 3))
        high = data.draw(st.integers(-(padded + low) if padded + low > 0 else 0, 3))
        config.append((low, high, interior))
    x = values(dims, t)
    check(lambda p, v: xe.Pad(p, v, config), x, values((), t, seed=7))


# =========================================================================================
# indexing.py
# =========================================================================================

@SETTINGS
@given(indexing_configs("gather", INDEX_DTYPES), st.sampled_from(["pred", "bf16", "f32", "c128"]))
def test_gather(config, t):
    operand, indices, dims, _ = config
    check(lambda x, i: xe.Gather(x, i, **dims), values(operand.shape, t), indices)


def test_gather_empty_slices_indices_and_scalars():
    x = values((3, 4), "f32")
    rows = dict(offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0], index_vector_dim=1)
    check(lambda p, i: xe.Gather(p, i, slice_sizes=[1, 4], **rows), x, np.zeros((0, 1), np.int32))
    check(lambda p, i: xe.Gather(p, i, slice_sizes=[1, 0], **rows), x, np.array([[1], [2]], np.int32))
    check(lambda p, i: xe.Gather(p, i, slice_sizes=[0, 4], **rows), values((0, 4), "f32"), np.array([[1]], np.int32))
    check(lambda p, i: xe.Gather(p, i, offset_dims=[], collapsed_slice_dims=[], start_index_map=[],
                                 index_vector_dim=1, slice_sizes=[]), values((), "s64"), np.zeros((3, 0), np.int32))


def _region(name):
    return {
        "add": lambda a, b: xe.Add(a, b),
        "multiply": lambda a, b: xe.Mul(a, b),
        "maximum": lambda a, b: xe.Max(a, b),
        "minimum": lambda a, b: xe.Min(a, b),
        "and": lambda a, b: xe.And(a, b),
        "or": lambda a, b: xe.Or(a, b),
        "xor": lambda a, b: xe.Xor(a, b),
        "second": lambda a, b: b,
        "first": lambda a, b: a,
        # not commutative: the order of colliding updates shows in the result
        "update_after_half": lambda a, b: xe.Add(xe.Mul(a, xe.ConstantR0(a.builder, np.float32(0.5))), b),
        "update_minus": lambda a, b: xe.Sub(b, a),
    }[name]


#: the combiners each element type is tested with
SCATTER_CASES = [("f32", c) for c in ("add", "multiply", "maximum", "minimum", "second", "first",
                                      "update_after_half")] + \
    [("s32", c) for c in ("add", "multiply", "maximum", "minimum", "and", "or", "xor", "update_minus")] + \
    [("bf16", c) for c in ("add", "maximum", "second")] + [("pred", c) for c in ("add", "and", "xor", "second")]


@SETTINGS
@given(indexing_configs("scatter", INDEX_DTYPES), st.sampled_from(SCATTER_CASES))
def test_scatter(config, case):
    operand, indices, dims, updates = config
    t, combiner = case
    x = values(operand.shape, t) if t != "f32" else operand * 0.25 - 1
    u = values(updates.shape, t, seed=3) if t != "f32" else updates
    check(lambda p, i, v: xe.Scatter(p, i, v, _region(combiner), **dims), x, indices, u)


def test_scatter_float_max_min_nan_and_signed_zero():
    x = np.array([0.0, -0.0, 1.0, np.nan, 5.0, -0.0], np.float32)
    i = np.array([[0], [1], [2], [3], [4], [5], [0], [2]], np.int32)
    u = np.array([-0.0, 0.0, np.nan, 1.0, -np.inf, -0.0, 0.0, 2.0], np.float32)
    for name in ("maximum", "minimum"):
        dims = dict(update_window_dims=[], inserted_window_dims=[0], scatter_dims_to_operand_dims=[0],
                    index_vector_dim=1)
        comp = build(lambda p, q, v: xe.Scatter(p, q, v, _region(name), **dims), x, i, u)
        got, want = comp.run(x, i, u, backend="numba"), comp.run(x, i, u)
        assert (np.isnan(got) == np.isnan(want)).all()
        ok = ~np.isnan(want)
        assert (got[ok] == want[ok]).all() and (np.signbit(got[ok]) == np.signbit(want[ok])).all()


def test_variadic_scatter_keeps_value_and_index_of_the_minimum():
    # a region with compare and select over two operands: compiled from its instructions
    def keep_min(v, j, nv, nj):
        take = xe.Lt(nv, v)
        return xe.Tuple(xe.Select(take, nv, v), xe.Select(take, nj, j))

    rng = np.random.default_rng(0)
    x = np.full(7, np.inf, np.float32)
    k = np.full(7, -1, np.int32)
    i = rng.integers(-1, 8, (40, 1)).astype(np.int32)
    u = rng.integers(0, 5, 40).astype(np.float32)  # ties: the first one seen wins
    w = np.arange(40, dtype=np.int32)
    dims = dict(update_window_dims=[], inserted_window_dims=[0], scatter_dims_to_operand_dims=[0],
                index_vector_dim=1)
    check(lambda a, b, c, d, e: xe.Scatter([a, b], c, [d, e], keep_min, **dims), x, k, i, u, w)


def test_scatter_region_without_emitters_runs_through_the_reference(monkeypatch):
    from xla_explorer.executors import emit
    monkeypatch.delitem(emit.EMITTERS, "subtract")
    x = np.arange(6, dtype=np.int32)
    i = np.array([[1], [1], [9], [4]], np.int32)
    u = np.array([5, 7, 1, 2], np.int32)
    dims = dict(update_window_dims=[], inserted_window_dims=[0], scatter_dims_to_operand_dims=[0],
                index_vector_dim=1)
    got = check(lambda p, q, v: xe.Scatter(p, q, v, lambda a, b: xe.Sub(b, a), **dims), x, i, u)
    np.testing.assert_array_equal(got, [0, 7 - (5 - 1), 2, 3, 2 - 4, 5])


def test_scatter_region_that_does_not_compile_runs_through_the_reference(monkeypatch):
    from xla_explorer.executors import emit
    monkeypatch.setitem(emit.EMITTERS, "subtract", lambda inst, a, b: f"no_such_function({a}, {b})")
    x = np.arange(6, dtype=np.int32)
    i = np.array([[1], [1], [9], [4]], np.int32)
    u = np.array([5, 7, 1, 2], np.int32)
    dims = dict(update_window_dims=[], inserted_window_dims=[0], scatter_dims_to_operand_dims=[0],
                index_vector_dim=1)
    got = check(lambda p, q, v: xe.Scatter(p, q, v, lambda a, b: xe.Sub(a, b), **dims), x, i, u)
    np.testing.assert_array_equal(got, [0, 1 - 5 - 7, 2, 3, 4 - 2, 5])


def test_scatter_huge_indices_are_skipped_and_windows_fit_whole():
    x = values((4, 5), "f32")
    u = values((3, 2, 3), "f32", seed=2)
    i = np.array([[0, 2], [2, 3], [np.iinfo(np.int64).max, 0]], np.int64)
    dims = dict(update_window_dims=[1, 2], inserted_window_dims=[], scatter_dims_to_operand_dims=[0, 1],
                index_vector_dim=1)
    check(lambda p, q, v: xe.Scatter(p, q, v, _region("add"), **dims), x, i, u)
    check(lambda p, q, v: xe.Scatter(p, q, v, _region("add"), **dims), x, i.astype(np.uint64) + np.uint64(2 ** 63), u)


def test_scatter_empty_updates_and_operands():
    dims = dict(update_window_dims=[1], inserted_window_dims=[0], scatter_dims_to_operand_dims=[0],
                index_vector_dim=1)
    check(lambda p, q, v: xe.Scatter(p, q, v, _region("add"), **dims), values((3, 2), "f32"),
          np.zeros((0, 1), np.int32), values((0, 2), "f32"))
    check(lambda p, q, v: xe.Scatter(p, q, v, _region("add"), **dims), values((0, 2), "f32"),
          np.zeros((2, 1), np.int32), values((2, 2), "f32"))


# =========================================================================================
# the parallel variants (large arrays), once each
# =========================================================================================

@pytest.fixture
def parallel_from_small_sizes(monkeypatch):
    """Data-movement kernels go parallel from ``MOVE_PARALLEL_THRESHOLD`` elements: for
    these tests from ``PARALLEL_THRESHOLD``, so that their arrays stay small; and those that
    stream in the cache in one thread (``shape.streamed``) go parallel too."""
    import sys
    from xla_explorer.executors.cpu import shape as cpu_shape
    from xla_explorer.executors.numba_setup import PARALLEL_THRESHOLD
    for name, module in list(sys.modules.items()):
        if name.startswith("xla_explorer.executors") and hasattr(module, "MOVE_PARALLEL_THRESHOLD"):
            monkeypatch.setattr(module, "MOVE_PARALLEL_THRESHOLD", PARALLEL_THRESHOLD)
    monkeypatch.setattr(cpu_shape, "STREAM_THREADED_BYTES", 0)


@pytest.mark.usefixtures("parallel_from_small_sizes")
def test_parallel_copies_transpose_reverse_slice_concatenate_pad():
    x = values((96, 130, 5), "f32")
    check(lambda p: xe.Transpose(p, [1, 2, 0]), x)            # tiles
    check(lambda p: xe.Transpose(p, [2, 0, 1]), x)
    check(lambda p: xe.Rev(p, [0, 2]), x)                     # rows, reversed
    check(lambda p: xe.Slice(p, [1, 3, 0], [96, 130, 5], [2, 1, 2]), x)
    check(lambda p: xe.Concatenate(p, p, dimension=1), x)
    check(lambda p: xe.Reshape(xe.Rev(p, [0]), [96 * 130 * 5]), x)
    long_row = values((70001,), "s64")
    check(lambda p: xe.Rev(p, [0]), long_row)                 # one long row, cut in chunks
    check(lambda p, v: xe.Pad(p, v, [(-3, 5, 1), (4, -2, 2), (0, 1, 0)]), x, np.float32(-1))
    check(lambda p, v: xe.Pad(p, v, [(-3, 5, 0), (4, -2, 0), (1, 1, 0)]), x, np.float32(-1))


@pytest.mark.usefixtures("parallel_from_small_sizes")
def test_parallel_gather_rows_elements_and_windows():
    rng = np.random.default_rng(0)
    x = values((300, 200), "f32")
    rows = rng.integers(-5, 310, (400, 1)).astype(np.int32)
    check(lambda p, i: xe.Gather(p, i, offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0],
                                 index_vector_dim=1, slice_sizes=[1, 200]), x, rows)
    flat = rng.integers(-5, 60010, (50000,)).astype(np.int64)
    check(lambda p, i: xe.Gather(p, i, offset_dims=[], collapsed_slice_dims=[0], start_index_map=[0],
                                 index_vector_dim=1, slice_sizes=[1]), x.reshape(-1), flat)
    windows = rng.integers(-5, 300, (2, 40, 2)).astype(np.int32)
    check(lambda p, i: xe.Gather(p, i, offset_dims=[0, 2], collapsed_slice_dims=[], start_index_map=[1, 0],
                                 index_vector_dim=2, slice_sizes=[30, 20]), x, windows)


@pytest.mark.usefixtures("parallel_from_small_sizes")
def test_parallel_scatter_is_deterministic_in_the_reference_order():
    rng = np.random.default_rng(1)
    x = values((64, 300), "f32")
    i = rng.integers(-2, 66, (400, 1)).astype(np.int32)       # many duplicates, some skipped
    u = values((400, 300), "f32", seed=5)
    u[~np.isfinite(u)] = 1.0
    x[~np.isfinite(x)] = 0.0
    dims = dict(update_window_dims=[1], inserted_window_dims=[0], scatter_dims_to_operand_dims=[0],
                index_vector_dim=1)
    for name in ("add", "second", "update_after_half"):
        check(lambda p, q, v: xe.Scatter(p, q, v, _region(name), **dims), x, i, u)
    # the window dims before the scatter dims, and index vectors along dimension 0
    dims = dict(update_window_dims=[0], inserted_window_dims=[0], scatter_dims_to_operand_dims=[0],
                index_vector_dim=0)
    check(lambda p, q, v: xe.Scatter(p, q, v, _region("update_after_half"), **dims), x, i.T.copy(), u.T.copy())


def test_kernels_are_registered_with_notes():
    layer = registry.LAYERS["cpu"]
    for op in ("transpose", "reverse", "concatenate", "copy", "reshape", "bitcast", "dynamic-reshape", "slice",
               "dynamic-slice", "dynamic-update-slice", "pad", "gather", "scatter"):
        assert op in layer, op
    assert layer["reshape"].status_note == "view (no copy)"
    # the standard combiners of one type share one compiled kernel (chosen at run time)
    x, i, u = np.zeros(4, np.float32), np.array([[1], [1]], np.int32), np.ones(2, np.float32)
    dims = dict(update_window_dims=[], inserted_window_dims=[0], scatter_dims_to_operand_dims=[0],
                index_vector_dim=1)
    for name in ("add", "maximum"):
        check(lambda p, q, v: xe.Scatter(p, q, v, _region(name), **dims), x, i, u)
    # (one per floating-point environment: in XLA:CPU's default the combiners flush denormals)
    # (and, flushing, whether its adds run in the DAZ mode: ``cpu.indexing._DAZ_ADD``)
    mode = () if xe.get_float_env().denormals == "ieee" else ("flush", cpu_indexing._daz_add("f32"))
    kernels = cpu_indexing._generated[("standard", "f32") + mode]
    # (counted in this environment: test_scatter_daz.py compiles the flushing kernel without
    # the DAZ adds too, in whichever process runs it)
    assert kernels is not None and len([k for k in cpu_indexing._generated if k[1] == "f32" and k[2:] == mode]) == 1


def test_large_results_reuse_buffers_only_when_nothing_refers_to_them():
    from xla_explorer.executors.cpu.shape import POOL
    # earlier tests leave free buffers of the same size in the pool, and the pool hands
    # out the first free one it finds: start from an empty pool so 'third' must reuse
    # the buffer 'second' let go (the suite failed here now and then, by test order)
    POOL.clear()
    x = values((1024, 1100), "f32")  # 4.4 MB results: from the pool
    comp = build(lambda p: xe.Transpose(p, [1, 0]), x)
    first = comp.run(x, backend="numba")
    keep = first.copy()
    second = comp.run(x, backend="numba")
    assert not np.shares_memory(first, second)
    same_bits(first, keep)
    same_bits(second, keep)
    buffer = second.ctypes.data
    del second
    third = comp.run(x, backend="numba")  # the second one's buffer is free again
    assert third.ctypes.data == buffer
    same_bits(third, keep)
    assert sum(b.nbytes for _, b in POOL._buffers) <= POOL.limit


@pytest.mark.parametrize("nbytes", [1 << 18, (1 << 18) + 4, (2 << 20) - 64, 2 << 20, (4 << 20) + 12])
def test_pooled_buffers_are_aligned_and_reused_only_when_free(nbytes):
    """A pooled buffer starts on a 4 KiB page (a 2 MiB boundary from 2 MiB on), and is
    handed out again only when nothing refers to it: not the buffer itself, not a view of
    it, not an array made on it by the buffer protocol."""
    from xla_explorer.executors.cpu.shape import HUGE_PAGE_BYTES, BufferPool
    pool = BufferPool()
    a = pool.take(nbytes)
    assert a.nbytes == nbytes and a.dtype == np.uint8 and a.flags.c_contiguous and a.flags.writeable
    assert a.ctypes.data % (HUGE_PAGE_BYTES if nbytes >= HUGE_PAGE_BYTES else 4096) == 0
    address = a.ctypes.data
    for keep in (lambda b: b, lambda b: b.view(np.uint16)[1:], lambda b: b.view(np.uint16)[1:][::2],
                 lambda b: np.ndarray((nbytes // 2,), np.uint16, b), lambda b: np.frombuffer(b, np.uint8)):
        a[:] = 7
        held = keep(a)
        was = held.copy()
        del a
        b = pool.take(nbytes)    # the first buffer still referred to: another one
        assert b.ctypes.data != address and b.nbytes == nbytes
        b[:] = 9
        assert np.array_equal(held, was)
        del b, held
        a = pool.take(nbytes)    # free again: the first one (the oldest free one first)
        assert a.ctypes.data == address
    small = pool.take(1000)    # below MIN_BYTES: NumPy's
    assert small.nbytes == 1000


def test_a_worker_that_has_not_woken_holds_no_array_of_a_finished_call():
    """On a busy machine the caller of ``in_threads`` does every part itself while a worker
    has not woken: the job then waits in the worker's inbox, and it must not keep the
    call's arrays alive (the pool would take the result's buffer for one still in use,
    and allocate afresh: the buffer-reuse test above failed so in whole-suite runs)."""
    import sys
    import threading

    import numba
    from xla_explorer.executors.cpu import shape as cpu_shape
    if numba.get_num_threads() < 2:
        pytest.skip("in_threads runs in the caller alone with one Numba thread")

    @numba.njit(nogil=True, cache=False)
    def fill(lo, hi, out):
        for i in range(lo, hi):
            out[i] = i

    class Asleep:   # keeps the worker busy until the call is over: it takes no part
        def __init__(self):
            self.gate = threading.Event()

        def work(self):
            self.gate.wait(30)

    asleep = Asleep()
    for inbox in cpu_shape._workers(numba.get_num_threads() - 1):
        inbox.put(asleep)
    out = np.zeros(1000)
    alone = sys.getrefcount(out)
    try:
        cpu_shape.in_threads(fill, out.size, True, out)
        held = sys.getrefcount(out) - alone
    finally:
        asleep.gate.set()
    assert held == 0
    np.testing.assert_array_equal(out, np.arange(1000.0))


def test_bf16_keeps_bits():
    x = np.array([[1.5, -0.0], [np.nan, 3.0]], ml_dtypes.bfloat16)
    check(lambda p: xe.Transpose(p, [1, 0]), x)


def test_pad_of_one_long_row_runs_in_pieces():
    x = values((50001,), "bf16")
    for config in ([(-7, 9, 2)], [(3, -4, 0)], [(-100001, 5, 1)], [(6, -100000, 1)]):
        check(lambda p, v: xe.Pad(p, v, config), x, values((), "bf16", seed=3))


@pytest.mark.parametrize("n", [7, 1 << 16])
@pytest.mark.usefixtures("parallel_from_small_sizes")
def test_element_take_clamps_like_the_reference(n):
    """x[i] of single elements (the take fast path), serial and parallel sizes."""
    rng = np.random.default_rng(n)
    b = xe.XlaBuilder("take1")
    x = xe.Parameter(b, 0, xe.Shape("f32", (n,)), "x")
    i = xe.Parameter(b, 1, xe.Shape("s32", (n, 1)), "i")
    comp = b.build(xe.Gather(x, i, offset_dims=[], collapsed_slice_dims=[0], start_index_map=[0],
                             index_vector_dim=1, slice_sizes=[1]))
    xv = rng.normal(size=n).astype(np.float32)
    iv = rng.integers(-3 * n, 3 * n, (n, 1)).astype(np.int32)
    np.testing.assert_array_equal(comp.run(xv, iv, backend="numba"), comp.run(xv, iv))


def test_prepared_pad_cuts_few_long_rows_and_keeps_interior_rows():
    # serial (under MOVE_PARALLEL_THRESHOLD) but few rows of >= 8192: the prepared pad
    # cuts them as the kernel does; interior padding of the rows, negative edge padding
    x = values((3, 9000), "f32", seed=3)
    check(lambda p, v: xe.Pad(p, v, [(2, -1, 2), (-5, 7, 0)]), x, values((), "f32", seed=4))
    check(lambda p, v: xe.Pad(p, v, [(1, 1, 1), (0, 2, 2), (3, -4, 1)]), values((5, 6, 7), "bf16"), values((), "bf16", seed=5))


@pytest.mark.parametrize("t", ["pred", "bf16", "f32", "s64"])
@pytest.mark.parametrize("dims, perm", [
    ((64, 2048), (1, 0)),         # rows of 2-8 KiB: every width but s64 staged
    ((2048, 40), (1, 0)),
    ((100, 75), (1, 0)),          # odd sizes: f32 staged with edges, u8/u16 direct
    ((131, 4096), (1, 0)),        # staged tiles, register blocks and element-wise edges
    ((40, 3, 512), (2, 1, 0)),    # rank 3: rows of tiles over an outer dimension
    ((16, 40), (1, 0)),           # result rows under 32 elements: direct
    ((3, 200, 136), (0, 2, 1)),
])
def test_staged_transposes(dims, perm, t):
    """Plain transpositions of every width, staged (``shape._staging``: blocks into a
    small buffer, copied out as runs) or direct, serial and (above the copy threshold)
    parallel."""
    from xla_explorer.executors.cpu import shape as cpu_shape
    check(lambda p: xe.Transpose(p, list(perm)), values(dims, t))
    itemsize = xe.Shape(t, ()).dtype.itemsize
    strides = cpu_shape.row_major_strides(dims)
    out_dims = tuple(dims[p] for p in perm)
    plan = cpu_shape.plan_copy(out_dims, cpu_shape.row_major_strides(out_dims), tuple(strides[p] for p in perm),
                               itemsize, 2)
    assert plan.tile_dim >= 0, plan
    if dims == (16, 40):
        assert plan.run == 0, plan
    elif itemsize == 4 or (itemsize < 4 and (dims[-1] >= 2048 or dims[0] >= 2048)):
        assert plan.run > 0, plan        # the staged path is the one these cases exercise
    if itemsize == 8 or (itemsize < 4 and dims in ((100, 75), (3, 200, 136))):
        assert plan.run == 0, plan


@pytest.mark.parametrize("t", TYPES)
@pytest.mark.parametrize("dims, perm, lanes, spread", [
    ((2, 3, 9, 11), (0, 2, 3, 1), 3, False),       # NCHW -> NHWC, 3 channels, odd sizes
    ((16, 3, 64, 64), (0, 2, 3, 1), 3, False),     # the CNN's input (chunks of 4096 along the rows)
    ((2, 7, 5, 3, 5), (0, 2, 3, 4, 1), 7, False),  # rank 5
    ((8, 100), (1, 0), 8, False),                  # [c, n] -> [n, c]
    ((2, 17), (1, 0), 2, False),
    ((3, 4, 5), (1, 2, 0), 3, False),
    ((2, 9, 6, 4), (1, 0, 2, 3), 0, False),        # dims [9, 2, 24]: a plain row copy
    ((3, 5, 4), (2, 1, 0), 0, False),              # rows of 3 read 20 apart, no unit source run
    ((2, 9, 11, 3), (0, 3, 1, 2), 3, True),        # NHWC -> NCHW
    ((16, 64, 64, 4), (0, 3, 1, 2), 4, True),
    ((100, 8), (1, 0), 8, True),
    ((2, 5, 5, 2, 3), (0, 4, 1, 2, 3), 3, True),   # rank 5
    ((5, 2), (1, 0), 2, True),
    ((3, 2), (1, 0), 0, False),                    # too short to spread: elements
    ((1, 3, 1, 7), (0, 2, 3, 1), 3, False),        # size-1 dimensions dropped
    ((0, 3, 4, 4), (0, 2, 3, 1), None, False),     # empty
])
def test_interleaving_transposes(dims, perm, lanes, spread, t):
    """Transpositions whose result rows are 2-8 elements of as many long source rows, and
    the other way round (``CopyPlan.lanes``, ``_interleave_range``), against the reference,
    of every width; the plan is the one these cases exercise."""
    x = values(dims, t)
    check(lambda p: xe.Transpose(p, list(perm)), x)
    # a non-contiguous operand (a strided view): the words copied first
    wide = values(dims[:-1] + (2 * dims[-1],), t, seed=1)
    check(lambda p: xe.Transpose(xe.Slice(p, [0] * len(dims), list(wide.shape), [1] * (len(dims) - 1) + [2]),
                                 list(perm)), wide)
    comp = build(lambda p: xe.Transpose(p, list(perm)), x)
    view = wide[..., ::2]   # an argument that is a strided view
    assert not view.flags.c_contiguous or view.size <= 1
    same_bits(comp.run(view, backend="numba"), comp.run(np.ascontiguousarray(view), backend="numpy"))
    if view.size >= 4096:   # (words() copies it by the strided copy: the spread's inverse)
        same_bits(cpu_shape.contiguous(np.transpose(x, perm)), np.ascontiguousarray(np.transpose(x, perm)))
    if lanes is None:
        return
    itemsize = xe.Shape(t, ()).dtype.itemsize
    strides = cpu_shape.row_major_strides(dims)
    out_dims = tuple(dims[p] for p in perm)
    plan = cpu_shape.plan_copy(out_dims, cpu_shape.row_major_strides(out_dims), tuple(strides[p] for p in perm),
                               itemsize, 2)
    assert (plan.lanes, plan.spread) == (lanes, spread), plan
    if lanes:
        assert plan.tile == 0 and plan.row_tile == 0 and plan.streams, plan


@pytest.mark.parametrize("t", ["pred", "bf16", "f32", "c128"])
def test_copy_of_a_transpose_is_its_value(t):
    """A copy of a transpose's value nothing else reads (XLA's transpose fusions) is the
    transpose's new array (``numba_executor._copy_of_dead_transpose``); a copy of a
    parameter, or of a transpose another op reads too, still copies.  Bits as the
    reference's, the argument left as it was."""
    from xla_explorer.executors import numba_executor as ne

    def labels(comp):
        return [lab for prog in ne._programs(comp.entry).values() for lab in prog.labels]

    x = values((5, 3, 7), t)
    keep = x.copy()
    comp = build(lambda p: xe.Copy(xe.Transpose(p, [2, 0, 1])), x)
    got = check(lambda p: xe.Copy(xe.Transpose(p, [2, 0, 1])), x)
    comp.run(x, backend="numba")
    comp.run(x, backend="numba")
    assert any("the transpose's result" in lab for lab in labels(comp)), labels(comp)
    same_bits(x, keep)
    assert not np.shares_memory(got, x)

    def both(p):
        tr = xe.Transpose(p, [1, 0, 2])
        return xe.Concatenate(xe.Copy(tr), tr, dimension=0)
    check(both, x)
    comp = build(both, x)
    comp.run(x, backend="numba")
    comp.run(x, backend="numba")
    assert not any("the transpose's result" in lab for lab in labels(comp)), labels(comp)
    got = check(lambda p: xe.Copy(p), x)
    assert not np.shares_memory(got, x)
    if t == "f32":   # flushing denormals: a data-movement copy keeps its bits, elided or not
        from xla_explorer import fpenv
        tiny = np.array([[1e-40, -1e-42], [3.0, -0.0]], np.float32)
        with fpenv.float_env("flush"):
            check(lambda p: xe.Copy(xe.Transpose(p, [1, 0])), tiny)


@pytest.mark.usefixtures("parallel_from_small_sizes")
@pytest.mark.parametrize("t", ["pred", "f32", "c128"])
def test_interleaving_transposes_in_threads(t):
    check(lambda p: xe.Transpose(p, [0, 2, 3, 1]), values((4, 3, 40, 70), t))
    check(lambda p: xe.Transpose(p, [0, 3, 1, 2]), values((4, 40, 70, 3), t))
    check(lambda p: xe.Transpose(p, [1, 0]), values((5, 9000), t))


@pytest.mark.usefixtures("parallel_from_small_sizes")
def test_staged_transposes_in_threads():
    check(lambda p: xe.Transpose(p, [1, 0]), values((512, 256), "f32"))
    check(lambda p: xe.Transpose(p, [1, 0]), values((1024, 256), "bf16"))


@pytest.mark.parametrize("t", ["pred", "bf16", "f32", "s64", "c128"])
@pytest.mark.parametrize("buffered", [False, True])
def test_column_gathers_with_row_buffers(t, buffered, monkeypatch):
    """x[:, i] (positions minor in the result): with ``_ROW_BUFFER_FROM = 0`` every operand
    row a gather reads a span of at most ``_ROW_BUFFER_BYTES`` from is first copied into a
    buffer (``by_element``); wide, narrow and sparse spans, clamped indices, a minor axis
    of rank 3, every width, the walk and the run plan (``check`` runs twice), serial and
    in threads."""
    if buffered:
        monkeypatch.setattr(cpu_indexing, "_ROW_BUFFER_FROM", 0)
    rng = np.random.default_rng(3)
    for shape, axis, n, lo, hi in [((40, 300), 1, 500, -3, 303),     # the whole row, clamped
                                   ((40, 300), 1, 100, 120, 250),    # a span inside the row
                                   ((40, 3000), 1, 20, 0, 3000),     # sparse: not buffered
                                   ((40, 30), 1, 50, 0, 30),         # a short row: not buffered
                                   ((5, 7, 200), 2, 150, 10, 190),
                                   ((3, 200, 7), 1, 90, -5, 210)]:
        rank = len(shape)
        dims = dict(offset_dims=[d for d in range(rank) if d != axis], collapsed_slice_dims=[axis],
                    start_index_map=[axis], index_vector_dim=1,
                    slice_sizes=[1 if d == axis else shape[d] for d in range(rank)])
        i = rng.integers(lo, hi, (n, 1)).astype(np.int32)
        check(lambda p, q: xe.Gather(p, q, **dims), values(shape, t), i)


@pytest.mark.usefixtures("parallel_from_small_sizes")
def test_column_gathers_with_row_buffers_in_threads(monkeypatch):
    monkeypatch.setattr(cpu_indexing, "_ROW_BUFFER_FROM", 0)
    i = np.random.default_rng(4).integers(-3, 520, (700, 1)).astype(np.int64)
    check(lambda p, q: xe.Gather(p, q, offset_dims=[0], collapsed_slice_dims=[1], start_index_map=[1],
                                 index_vector_dim=1, slice_sizes=[300, 1]), values((300, 517), "f32"), i)


def test_prepared_gather_falls_back_to_the_kernel_for_other_index_types():
    """The run plan's gather (``_gather_prepare``) takes int32/int64 indices of the static
    dims; u8 / s16 / u64 indices (huge ones clamped) go through the kernel's own path."""
    x = values((30, 40), "f32")
    for dtype in (np.uint8, np.int16, np.uint64, np.int64):
        i = np.array([[0], [39], [200], [7]], dtype)
        check(lambda p, q: xe.Gather(p, q, offset_dims=[0], collapsed_slice_dims=[1], start_index_map=[1],
                                     index_vector_dim=1, slice_sizes=[30, 1]), x, i)
        check(lambda p, q: xe.Gather(p, q, offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0],
                                     index_vector_dim=1, slice_sizes=[1, 40]), x, i)


@pytest.mark.parametrize("dims", [(7, 200, 64), (5, 300, 16), (9, 70, 128), (70, 9, 3), (4, 130, 2, 32)])
@pytest.mark.parametrize("t", ["bf16", "f32", "s64"])
def test_row_tiled_transposes(dims, t):
    """Short rows that keep their place ([a, b, L] -> [b, a, L]): walked in tiles of a few
    result-neighbour rows (``CopyPlan.row_tile``), the last tile short."""
    perm = [1, 0] + list(range(2, len(dims)))
    check(lambda p: xe.Transpose(p, perm), values(dims, t))


@pytest.mark.usefixtures("parallel_from_small_sizes")
def test_row_tiled_transposes_in_threads():
    check(lambda p: xe.Transpose(p, [1, 0, 2]), values((300, 70, 64), "f32"))


def test_row_tiled_transposes_beyond_the_cache(monkeypatch):
    """A row-tiled copy larger than ``ROW_TILE_CACHED_BYTES`` takes tiles of 8 result rows
    (4 below it): both walks give the reference's result, the last tile short."""
    from xla_explorer.executors.cpu import shape as cpu_shape
    x = values((70, 40, 16), "f32")
    for limit in (0, 1 << 30):
        monkeypatch.setattr(cpu_shape, "ROW_TILE_CACHED_BYTES", limit)
        cpu_shape.plan_copy.cache_clear()
        for threads in (1, 2):
            plan = cpu_shape.plan_copy((40, 70, 16), (1120, 16, 1), (16, 640, 1), 4, threads)
            assert plan.row_tile == (8 if limit == 0 else 4) and plan.tiled == 1, plan
        check(lambda p: xe.Transpose(p, [1, 0, 2]), x)
    cpu_shape.plan_copy.cache_clear()


@pytest.mark.parametrize("nt", [False, True])
@pytest.mark.parametrize("t", ["u8", "bf16", "f32", "s64", "c128"])
def test_row_tiled_transposes_with_either_store(monkeypatch, nt, t):
    """Row tiles store the result's whole lines non-temporally or plainly as
    ``NT_ROW_TILES`` says (the plan's flag; the kernel called with it directly too):
    both give NumPy's transposition at every offset of the result
    against a cache line, rows shorter and longer than a line, the last tile short; the
    elements around the result untouched.  (c128 words: plain stores.)"""
    monkeypatch.setattr(cpu_shape, "NT_ROW_TILES", nt)
    cpu_shape.plan_copy.cache_clear()
    try:
        dtype = xe.Shape(t, ()).dtype
        word = cpu_shape.word_dtype(dtype)
        for dims in ((7, 30, 64), (5, 11, 3), (9, 70, 21), (3, 4, 2, 20), (6, 5, 200)):
            if dims[-1] * (dims[-2] if len(dims) > 3 else 1) * word.itemsize > 512:
                continue   # (rows of more than 512 bytes are not walked in row tiles)
            x = values(dims, t)
            perm = (1, 0) + tuple(range(2, len(dims)))
            want = np.ascontiguousarray(x.transpose(perm))
            rdims = want.shape
            st = cpu_shape.row_major_strides(dims)
            sstr = tuple(st[p] for p in perm)
            plan = cpu_shape.plan_copy(rdims, cpu_shape.row_major_strides(rdims), sstr, word.itemsize, 1)
            assert plan.row_tile and plan.nt == (nt and word.itemsize <= 8), plan
            fn, items, extra = cpu_shape.copy_launch(plan)
            assert fn is cpu_shape._rowtiles_range
            n = want.size
            w = x.reshape(-1).view(word)
            for off in range(0, 64 // word.itemsize + 1, max(1, 8 // word.itemsize)):
                buf = np.zeros(n + 80 // word.itemsize, word)
                out = buf[off:off + n]
                cpu_shape.strided_copy(out, 0, cpu_shape.row_major_strides(rdims), w, 0, sstr, rdims)
                assert out.view(dtype).reshape(rdims).tobytes() == want.tobytes(), (dims, off)
                assert not buf[:off].any() and not buf[off + n:].any()
                out[:] = 0
                fn(0, items, out, 0, w, 0, *extra)   # the kernel on the whole range at once
                assert out.view(dtype).reshape(rdims).tobytes() == want.tobytes(), (dims, off)
            check(lambda p: xe.Transpose(p, list(perm)), x)
    finally:
        cpu_shape.plan_copy.cache_clear()


@pytest.mark.parametrize("idtype", [np.int32, np.int64, np.uint8])
@pytest.mark.parametrize("t, name", [("f32", "add"), ("s32", "maximum"), ("bf16", "second"), ("bf16", "add"),
                                     ("pred", "or"), ("f32", "update_after_half")])
def test_prepared_scatter_rows_and_elements(idtype, t, name):
    """The run plan's scatter (``_scatter_prepare``): rows and single elements (one and two
    index components: ``_single_loops``), duplicates and out-of-range indices, s32/s64 indices prepared, other index types and carried types
    (bf16 added in f32) through the kernel's own path; ``check`` runs the plan too."""
    rng = np.random.default_rng(7)
    rows = dict(update_window_dims=[1], inserted_window_dims=[0], scatter_dims_to_operand_dims=[0],
                index_vector_dim=1)
    hi = 250 if idtype is np.uint8 else 70
    i = rng.integers(0 if idtype is np.uint8 else -3, hi, (90, 1)).astype(idtype)
    check(lambda p, q, v: xe.Scatter(p, q, v, _region(name), **rows), values((64, 33), t), i,
          values((90, 33), t, seed=2))
    elems = dict(update_window_dims=[], inserted_window_dims=[0], scatter_dims_to_operand_dims=[0],
                 index_vector_dim=1)
    check(lambda p, q, v: xe.Scatter(p, q, v, _region(name), **elems), values((300,), t), i,
          values((90,), t, seed=4))
    pairs = dict(update_window_dims=[], inserted_window_dims=[0, 1], scatter_dims_to_operand_dims=[0, 1],
                 index_vector_dim=1)     # x.at[i, j]: two index components per update
    ij = np.concatenate([i % 23, i[::-1] % 31], axis=1).astype(idtype)
    check(lambda p, q, v: xe.Scatter(p, q, v, _region(name), **pairs), values((20, 30), t), ij,
          values((90,), t, seed=5))


def test_prepared_scatter_takes_other_operands_through_the_kernel():
    """A strided operand or indices of another shape than the plan's: the kernel's own path."""
    rows = dict(update_window_dims=[1], inserted_window_dims=[0], scatter_dims_to_operand_dims=[0],
                index_vector_dim=1)
    x = values((40, 40), "f32")
    i = np.array([[3], [39], [3], [-1]], np.int32)
    u = values((4, 40), "f32", seed=1)
    comp = build(lambda p, q, v: xe.Scatter(p, q, v, _region("add"), **rows), x, i, u)
    want = comp.run(x, i, u)
    for _ in range(2):
        same_bits(comp.run(x, i, u, backend="numba"), want)
    xt = np.ascontiguousarray(x.T).T          # the same values, not C-contiguous
    same_bits(comp.run(xt, i, u, backend="numba"), want)
    same_bits(comp.run(x, np.asfortranarray(i), u, backend="numba"), want)


@pytest.mark.usefixtures("parallel_from_small_sizes")
def test_prepared_scatter_in_threads():
    rng = np.random.default_rng(2)
    rows = dict(update_window_dims=[1], inserted_window_dims=[0], scatter_dims_to_operand_dims=[0],
                index_vector_dim=1)
    i = rng.integers(-2, 130, (300, 1)).astype(np.int32)
    u = values((300, 200), "f32", seed=5)
    x = values((128, 200), "f32")
    u[~np.isfinite(u)] = 1.0
    x[~np.isfinite(x)] = 0.0
    for name in ("add", "second", "update_after_half"):
        check(lambda p, q, v: xe.Scatter(p, q, v, _region(name), **rows), x, i, u)


def test_prepared_scatter_flushes_as_the_region_does():
    """In XLA:CPU's environment the add flushes denormal operands and sums (its generated
    code, as the walk's); the prepared step runs the same kernel."""
    tiny = np.float32(1e-39)
    x = np.array([tiny, 1.0, -tiny, 0.0], np.float32)
    i = np.array([[0], [2], [3], [3]], np.int32)
    u = np.array([tiny, tiny, 2.0, -tiny], np.float32)
    elems = dict(update_window_dims=[], inserted_window_dims=[0], scatter_dims_to_operand_dims=[0],
                 index_vector_dim=1)
    for env in ("flush", "ieee"):
        with xe.float_env(env):
            check(lambda p, q, v: xe.Scatter(p, q, v, _region("add"), **elems), x, i, u)


@pytest.mark.usefixtures("parallel_from_small_sizes")
def test_prepared_pad_in_threads():
    """The run plan's pad above the copy threshold (``_pad_prepare``: the rows' operand
    offsets computed once, the rows shared by ``in_threads``): interior and negative edge
    padding of outer dimensions, and few long rows cut into pieces."""
    check(lambda p, v: xe.Pad(p, v, [(0, 0, 0), (2, 3, 1), (-1, 2, 0)]), values((16, 50, 48), "f32"),
          values((), "f32", seed=4))
    check(lambda p, v: xe.Pad(p, v, [(1, -1, 0), (-7, 300, 2)]), values((3, 20000), "bf16"),
          values((), "bf16", seed=5))
    check(lambda p, v: xe.Pad(p, v, [(3, 1, 2), (0, 0, 0)]), values((700, 64), "s64"), values((), "s64", seed=6))


@pytest.mark.usefixtures("parallel_from_small_sizes")
def test_prepared_copies_in_threads_of_read_only_and_writeable_operands():
    """The run plan's large copies (``shape.threaded_copy``: a launch per thread count and
    kind of source) take a read-only operand (another Numba type) after a writeable one and
    the other way round, and strided operands through the kernel."""
    x = values((96, 130, 5), "f32")
    ro = x.copy()
    ro.flags.writeable = False
    for f in (lambda p: xe.Transpose(p, [1, 0, 2]), lambda p: xe.Slice(p, [1, 3, 0], [96, 130, 5], [2, 1, 2]),
              lambda p: xe.Rev(p, [1])):
        comp = build(f, x)
        want = comp.run(x)
        for a in (x, ro, x, ro, np.asfortranarray(x)):
            same_bits(comp.run(a, backend="numba"), want)


def test_prepared_concatenate_of_read_only_and_writeable_operands():
    """The run plan's concatenate takes its operands as one tuple of one Numba type
    (``shape._one_type``: as they are when all are writeable or none is, else read-only
    views): a read-only operand beside a writeable one, every one read-only, none."""
    x = values((30, 41), "f32")
    ro = values((30, 41), "f32", seed=1)
    ro.flags.writeable = False
    for d in (0, 1):
        comp = build(lambda p, q: xe.Concatenate(p, q, p, dimension=d), x, ro)
        want = comp.run(x, ro)
        for a, b in ((x, ro), (ro, x), (ro, ro), (x, x)):
            same_bits(comp.run(a, b, backend="numba"), comp.run(a, b))
        same_bits(comp.run(x, ro, backend="numba"), want)


@pytest.mark.usefixtures("parallel_from_small_sizes")
@pytest.mark.parametrize("t", ["pred", "bf16", "f32", "c128"])
def test_prepared_concatenate_in_threads(t):
    """Above the copy threshold (``_concat_range``): rows shared whole, or few rows whose
    runs are cut into pieces (concatenating along dimension 0, or few long rows), empty
    operands among them, read-only operands."""
    a, b = values((40, 300, 3), t), values((40, 120, 3), t, seed=1)
    e = values((40, 0, 3), t, seed=2)
    check(lambda p, q, r: xe.Concatenate(p, r, q, p, dimension=1), a, b, e)        # 40 rows
    check(lambda p, q: xe.Concatenate(p, q, dimension=0), a.reshape(120, 300), values((30, 300), t, seed=3))
    check(lambda p, q: xe.Concatenate(q, p, dimension=1), a.reshape(2, 18000), values((2, 5000), t, seed=4))
    ro = b.copy()
    ro.flags.writeable = False
    check(lambda p, q: xe.Concatenate(p, q, dimension=1), a, ro)
    ra = a.copy()   # every operand read-only (``shape._one_type``: passed as they are)
    ra.flags.writeable = False
    check(lambda p, q: xe.Concatenate(p, q, dimension=1), ra, ro)


@pytest.mark.parametrize("t", ["u8", "bf16", "f32", "s64", "c128"])
def test_runs_copied_past_memmoves_4k_aliasing(t):
    """``shape._move`` copies a run of 2 KiB or more whose destination lies 1-63 bytes after
    its source modulo 4 KiB by an element loop (glibc's memmove is 5-12x slower there),
    memmove's order kept where the two overlap; every offset gives the same elements."""
    from xla_explorer.executors.cpu import shape as cpu_shape
    dtype = xe.Shape(t, ()).dtype
    word = cpu_shape.word_dtype(dtype)
    n = 3000 * 16 // word.itemsize          # 48000 bytes: past the 2 KiB of the check
    src = values((n + 4096,), t).view(word)
    big = np.zeros(n + 8192 // word.itemsize, word)
    s0 = (-src.ctypes.data) % 4096 // word.itemsize
    b0 = (-big.ctypes.data) % 4096 // word.itemsize
    for delta in sorted({0, word.itemsize, 16, 48, 64, 4096 - 16} - {d for d in (16, 48) if d % word.itemsize}):
        d = big[b0 + delta // word.itemsize:][:n]
        s = src[s0:s0 + n]
        d[:] = 0
        cpu_shape._copy_flat(d, s)
        assert d.tobytes() == s.tobytes(), delta
    a = np.arange(4 * n, dtype=np.int64).view(word)[:n + 8]
    for shift in (1, -1):    # overlapping: the destination 8 bytes after / before the source
        want = a.copy()
        lo, hi = (0, 8 // word.itemsize) if shift > 0 else (8 // word.itemsize, 0)
        want[hi:hi + n] = want[lo:lo + n].copy()
        got = a.copy()
        cpu_shape._copy_flat(got[hi:hi + n], got[lo:lo + n])
        assert got.tobytes() == want.tobytes(), shift


@pytest.mark.parametrize("starts", [(3, 5), (-4, 2), (39, 29), (2 ** 63 + 5, 1), (0, 2 ** 40)])
def test_prepared_dynamic_update_slice_clamps_its_starts(starts):
    """The run plan's dynamic-update-slice (``_dus_prepare``) clamps its starts as the
    reference does: negative to 0, past the end to the last start that fits, a huge u64
    start as the large number it is."""
    x, u = values((40, 30), "f32"), values((10, 7), "f32", seed=1)
    dtype = np.uint64 if any(s >= 2 ** 31 for s in starts) else np.int32
    if dtype is np.uint64 and min(starts) < 0:
        return
    s = [np.array(v, dtype) for v in starts]
    check(lambda p, q, a, b: xe.DynamicUpdateSlice(p, q, [a, b]), x, u, *s)


@pytest.mark.parametrize("itype", [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
                                   np.uint64])
@pytest.mark.parametrize("dims,udims", [((50,), (7,)), ((40, 30), (10, 7)), ((6, 5, 9), (2, 5, 4)),
                                        ((9, 8), (9, 8)), ((12, 8), (1, 1))])
@pytest.mark.parametrize("t", ["f32", "f64", "bf16", "s8", "c128", "pred"])
def test_prepared_dynamic_update_slice_clamps_in_its_kernel(itype, dims, udims, t):
    """The run plan's dynamic-update-slice with 0-d start indices of one type clamps them
    in the kernel's call (``_dus_clamped``; u64 starts, which may not fit int64, in Python):
    every signed / unsigned width, starts below 0, inside, at and past the last that fits,
    the extremes of the type; the reference's bits, and the kernel's call is the one taken."""
    x, u = values(dims, t), values(udims, t, seed=1)
    info = np.iinfo(itype)
    picks = [v for v in (info.min, -3, 0, 1, 2, 5, 100, info.max) if info.min <= v <= info.max]
    calls = []
    real = cpu_slicing._dus_clamped

    def spy(*a):
        calls.append(1)
        return real(*a)
    cpu_slicing._dus_clamped = spy
    try:
        for k in range(len(picks)):
            s = [np.array(picks[(k + 3 * d) % len(picks)], itype) for d in range(len(dims))]
            check(lambda p, q, *a: xe.DynamicUpdateSlice(p, q, list(a)), x, u, *s)
    finally:
        cpu_slicing._dus_clamped = real
    rows = int(np.prod(dims[:-1]))
    if rows >= 4 * cpu_shape.threads() and itype is not np.uint64:
        assert calls
    elif itype is np.uint64:
        assert not calls


@pytest.mark.parametrize("t", ["f32", "f64", "bf16"])
@pytest.mark.parametrize("name", ["add", "multiply", "maximum", "minimum"])
def test_single_element_scatter_flushes_around_nans_and_denormals(t, name):
    """In XLA:CPU's environment the single-element loops combine without flushing where no
    operand nor the result is below the normal range (``_single_loops``): denormal operands
    and results, NaNs beside denormals, infinities, signed zeros give the reference's bits."""
    dtype = xe.Shape(t, ()).dtype
    tiny = float(np.finfo(np.float64 if t == "f64" else np.float32).tiny)
    special = [0.0, -0.0, tiny / 4, -tiny / 4, tiny, -tiny, tiny * 1.5, np.nan, -np.nan, np.inf, -np.inf, 1.0,
               -2.5, 3e38 if t != "f64" else 1e308, tiny / 3]
    pairs = [(a, b) for a in special for b in special]
    x = np.array([a for a, _ in pairs], np.float64).astype(dtype)
    u = np.array([b for _, b in pairs], np.float64).astype(dtype)
    i = np.arange(len(pairs), dtype=np.int32).reshape(-1, 1)
    elems = dict(update_window_dims=[], inserted_window_dims=[0], scatter_dims_to_operand_dims=[0],
                 index_vector_dim=1)
    for env in ("flush", "ieee"):
        with xe.float_env(env):
            check(lambda p, q, v: xe.Scatter(p, q, v, _region(name), **elems), x, i, u)
            # twice into each place: the second combination reads the first's result
            check(lambda p, q, v: xe.Scatter(p, q, v, _region(name), **elems), x, np.concatenate([i, i]),
                  np.concatenate([u, u[::-1]]))


@pytest.mark.parametrize("stream_limit", [0, 1 << 30])
@pytest.mark.parametrize("t", ["u8", "bf16", "f32", "s64", "c128"])
def test_streaming_moves_in_one_thread_or_in_threads(monkeypatch, stream_limit, t):
    """Above the copy threshold, the moves that stream rows (``shape.streamed``) run in the
    calling thread while they stay under ``STREAM_THREADED_BYTES`` (here: always, or never):
    copies of rows, stride-2 and reversed rows, row tiles, pads of rows, concatenates, the one-pass
    dynamic-update-slice (prepared above the threshold too), gathers and scatters of long
    rows; both give the reference's bits, the last part short, odd sizes."""
    import sys
    from xla_explorer.executors.numba_setup import PARALLEL_THRESHOLD
    for name, module in list(sys.modules.items()):
        if name.startswith("xla_explorer.executors") and hasattr(module, "MOVE_PARALLEL_THRESHOLD"):
            monkeypatch.setattr(module, "MOVE_PARALLEL_THRESHOLD", PARALLEL_THRESHOLD)
    monkeypatch.setattr(cpu_shape, "STREAM_THREADED_BYTES", stream_limit)
    x = values((97, 131, 5), t)
    check(lambda p: xe.Transpose(p, [1, 0, 2]), x)                         # row tiles
    check(lambda p: xe.Slice(p, [1, 0, 0], [97, 131, 5], [2, 1, 1]), x)    # rows
    y = values((173, 389), t, seed=1)
    check(lambda p: xe.Slice(p, [0, 1], [173, 389], [1, 2]), y)            # stride-2 rows
    check(lambda p: xe.Rev(p, [1]), y)                                     # reversed rows
    check(lambda p: xe.Rev(p, [0]), y)
    check(lambda p, v: xe.Pad(p, v, [(3, -2, 1), (2, -1, 0)]), y, values((), t, seed=2))
    z = values((173, 45), t, seed=6)
    check(lambda p, q: xe.Concatenate(p, q, p, dimension=1), y, z)         # runs of rows
    check(lambda p, q: xe.Concatenate(p, q, dimension=0), y, y[::-1].copy())
    u = values((40, 300), t, seed=3)
    for starts in ((3, 5), (-4, 200), (170, 1)):
        s = [np.array(v, np.int32) for v in starts]
        check(lambda p, q, a, b: xe.DynamicUpdateSlice(p, q, [a, b]), y, u, *s)
    rows = np.random.default_rng(4).integers(-3, 176, (250, 1)).astype(np.int32)
    check(lambda p, i: xe.Gather(p, i, offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0],
                                 index_vector_dim=1, slice_sizes=[1, 389]), y, rows)
    if t in ("f32", "s64"):
        upd = values((250, 389), t, seed=5)
        if t == "f32":
            upd[~np.isfinite(upd)] = 1.0
        dims = dict(update_window_dims=[1], inserted_window_dims=[0], scatter_dims_to_operand_dims=[0],
                    index_vector_dim=1)
        for name in ("add", "second", "update_after_half") if t == "f32" else ("add", "maximum"):
            check(lambda p, q, v: xe.Scatter(p, q, v, _region(name), **dims), y, rows, upd)


def test_which_copies_stream(monkeypatch):
    """``CopyPlan.streams``: walks of whole, reversed or stride-2 rows and row tiles stream
    (one thread in the cache: ``shape.copy_parallel``, under the EPYC's limit -- the limit is
    measured per machine, ``shape._stream_limit``), transpositions of elements and rows of
    other strides do not; ``traffic`` counts a stride-2 row's source twice over."""
    from xla_explorer.executors.cpu import shape as cpu_shape
    monkeypatch.setattr(cpu_shape, "STREAM_THREADED_BYTES", cpu_shape.STREAM_CACHED_BYTES)
    n = 1 << 20
    flat = cpu_shape.plan_copy((n,), (1,), (1,), 4, 2)
    assert flat.streams and flat.traffic == 8 * n and not cpu_shape.copy_parallel(flat)
    even = cpu_shape.plan_copy((1024, 1024), (1024, 1), (2048, 2), 4, 2)
    assert even.streams and even.traffic == 12 * n and not cpu_shape.copy_parallel(even)
    assert cpu_shape.plan_copy((1024, 1024), (1024, 1), (1024, -1), 4, 2).streams
    tiles = cpu_shape.plan_copy((128, 128, 64), (8192, 64, 1), (64, 8192, 1), 4, 2)
    assert tiles.row_tile and tiles.streams
    transposed = cpu_shape.plan_copy((1024, 1024), (1024, 1), (1, 1024), 4, 2)
    assert transposed.tile and not transposed.streams and cpu_shape.copy_parallel(transposed)
    assert not cpu_shape.plan_copy((1024, 1024), (1024, 1), (4096, 3), 4, 2).streams
    big = cpu_shape.plan_copy((16 << 20,), (1,), (1,), 4, 2)   # 128 MiB moved: out of the cache
    assert big.streams and cpu_shape.copy_parallel(big)


@pytest.mark.usefixtures("parallel_from_small_sizes")
@pytest.mark.parametrize("t", ["u8", "bf16", "f32", "c128"])
@pytest.mark.parametrize("itype", [np.int32, np.int64])
def test_parallel_element_gathers_share_their_positions(t, itype):
    """Gathers of single elements above the copy threshold run in parts that the threads
    take in turn (``indexing._shared``): ``take`` of a vector (clamped at both ends), index
    vectors of two components, an index vector before the positions (the general loop),
    rows, each with a read-only operand too, an odd count of positions."""
    rng = np.random.default_rng(7)
    x = values((211, 157), t)
    ro = x.copy()
    ro.flags.writeable = False
    flat = rng.integers(-9, 211 * 157 + 9, (40001,)).astype(itype)
    pairs = rng.integers(-3, 215, (40003, 2)).astype(itype)
    rows = rng.integers(-3, 215, (301, 1)).astype(itype)
    for operand in (x, ro):
        check(lambda p, i: xe.Gather(p, i, offset_dims=[], collapsed_slice_dims=[0], start_index_map=[0],
                                     index_vector_dim=1, slice_sizes=[1]), operand.reshape(-1), flat)
        check(lambda p, i: xe.Gather(p, i, offset_dims=[], collapsed_slice_dims=[0, 1], start_index_map=[0, 1],
                                     index_vector_dim=1, slice_sizes=[1, 1]), operand, pairs)
        check(lambda p, i: xe.Gather(p, i, offset_dims=[], collapsed_slice_dims=[0, 1], start_index_map=[1, 0],
                                     index_vector_dim=0, slice_sizes=[1, 1]), operand, pairs.T.copy())
        check(lambda p, i: xe.Gather(p, i, offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0],
                                     index_vector_dim=1, slice_sizes=[1, 157]), operand, rows)


@pytest.mark.parametrize("threaded", [False, True])
@pytest.mark.parametrize("t", ["u8", "bf16", "f32", "s64", "c128"])
def test_non_temporal_row_copies(monkeypatch, threaded, t):
    """Copies of rows and of every other element with the result's whole lines stored
    non-temporally (``CopyPlan.nt``, here from any size): every offset of the result
    against a cache line (its partial lines at both ends copied as usual), rows shorter
    than a line, one long row cut into pieces, in one thread and in threads; the elements
    around the result untouched.  (c128 words never take it: plain copies.)"""
    from xla_explorer.executors.numba_setup import PARALLEL_THRESHOLD
    monkeypatch.setattr(cpu_shape, "NT_TRAFFIC_BYTES", 0)
    monkeypatch.setattr(cpu_shape, "NT_ROW_BYTES", 1)
    if threaded:
        monkeypatch.setattr(cpu_shape, "MOVE_PARALLEL_THRESHOLD", PARALLEL_THRESHOLD)
        monkeypatch.setattr(cpu_shape, "STREAM_THREADED_BYTES", 0)
    cpu_shape.plan_copy.cache_clear()
    try:
        dtype = xe.Shape(t, ()).dtype
        word = cpu_shape.word_dtype(dtype)
        for dims in ((37, 301), (301, 37), (3, 5), (1, 70001), (41, 2000)):
            x = values(dims, t)
            w = x.reshape(-1).view(word)
            c = dims[1]
            for start, steps, rdims in (((0, 1), (1, 2), (dims[0], (c - 1 + 1) // 2)),   # x[:, 1::2]
                                        ((1, 0), (2, 1), ((dims[0] - 1 + 1) // 2, c)),   # x[1::2, :]
                                        ((0, 0), (1, 1), dims)):                         # x[:, :]
                if 0 in rdims:
                    continue
                want = x[start[0]::steps[0], start[1]::steps[1]][:rdims[0], :rdims[1]]
                base = start[0] * c + start[1]
                strides = (steps[0] * c, steps[1])
                plan = cpu_shape.plan_copy(rdims, (rdims[1], 1), strides, word.itemsize, cpu_shape.threads())
                assert plan.nt == (word.itemsize <= 8 and plan.streams and not plan.row_tile), plan
                n = want.size
                for off in range(0, 64 // word.itemsize + 1, max(1, 16 // word.itemsize)):
                    buf = np.zeros(n + 80 // word.itemsize, word)
                    out = buf[off:off + n]
                    cpu_shape.strided_copy(out, 0, (rdims[1], 1), w, base, strides, rdims)
                    assert out.view(dtype).reshape(rdims).tobytes() == np.ascontiguousarray(want).tobytes(), \
                        (dims, steps, off)
                    assert not buf[:off].any() and not buf[off + n:].any()
    finally:
        cpu_shape.plan_copy.cache_clear()


def test_the_streaming_limit_is_measured_once_in_the_main_thread(monkeypatch):
    """``shape.streamed``'s limit: measured at the first use (one thread against two on a
    cached 4 MiB copy), either the cached limit or 0, then kept; a call from another thread
    (a kernel's worker, a widget's run) gets the cached limit and measures nothing."""
    import threading
    monkeypatch.setattr(cpu_shape, "STREAM_THREADED_BYTES", None)
    got = []
    t = threading.Thread(target=lambda: got.append((cpu_shape.streamed(1 << 20), cpu_shape.STREAM_THREADED_BYTES)))
    t.start()
    t.join()
    assert got == [(True, None)]
    first = cpu_shape.streamed(1 << 20)
    limit = cpu_shape.STREAM_THREADED_BYTES
    assert limit in (0, cpu_shape.STREAM_CACHED_BYTES)
    assert first == (limit > 0) and cpu_shape.streamed(1 << 20) == first
    assert cpu_shape.STREAM_THREADED_BYTES == limit
