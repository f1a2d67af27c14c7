"""The CPU kernels' layout-specific paths against the reference: every dimension a window,
a reduction, a broadcast or a gathered slice can run along, serial and parallel.

Integers are compared bit for bit; floats within the accumulation tolerance where the
kernel may sum in another order.  Shapes are random (seeded) and small, plus one size
past ``PARALLEL_THRESHOLD`` per path so that the threaded version runs too.
"""
import numpy as np
import pytest

import xla_explorer as xe

pytest.importorskip("numba")

from xla_explorer.executors.numba_setup import PARALLEL_THRESHOLD  # noqa: E402

RNG = np.random.default_rng(15)


@pytest.fixture(autouse=True)
def _threads_from_small_sizes(monkeypatch):
    """The data-movement kernels go parallel from ``MOVE_PARALLEL_THRESHOLD`` (1 MiB of
    f32): here from ``PARALLEL_THRESHOLD`` too, so that small test arrays run both."""
    import sys
    from xla_explorer.executors.cpu import shape as cpu_shape
    for name, module in list(sys.modules.items()):
        if name.startswith("xla_explorer.executors") and hasattr(module, "MOVE_PARALLEL_THRESHOLD"):
            monkeypatch.setattr(module, "MOVE_PARALLEL_THRESHOLD", PARALLEL_THRESHOLD)
    monkeypatch.setattr(cpu_shape, "STREAM_THREADED_BYTES", 0)   # (streaming copies too: ``shape.streamed``)


def _values(shape, t, rng=RNG):
    if t.startswith("f"):
        return rng.normal(size=shape).astype(t.replace("f", "float"))
    return rng.integers(-50, 50, size=shape).astype({"s32": np.int32, "s8": np.int8, "u8": np.uint8}[t])


def _check(comp, *args, exact=True):
    got = comp.run(*args, backend="numba")
    want = comp.run(*args)
    if exact:
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-5)


# -- fused loops: broadcasts and iotas constant or contiguous along the row ------------------

def _random_broadcast_case(rng, big):
    rank = int(rng.integers(1, 5))
    dims = [int(rng.integers(1, 6)) for _ in range(rank)]
    if big:  # past the parallel threshold, with one long or many short rows
        dims[int(rng.integers(0, rank))] = PARALLEL_THRESHOLD // max(1, int(np.prod(dims))) + 3
    kept = sorted(d for d in range(rank) if rng.random() < 0.5)
    # a kept dimension of size 1 in the operand broadcasts along the result dimension
    operand = [1 if rng.random() < 0.2 else dims[d] for d in kept]
    return dims, kept, operand


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("t", ["s32", "f32"])
def test_fused_broadcasts_match_the_reference(seed, t):
    rng = np.random.default_rng(seed)
    dims, kept, operand = _random_broadcast_case(rng, big=seed % 3 == 0)
    b = xe.XlaBuilder("bcast")
    x = xe.Parameter(b, 0, xe.Shape(t, tuple(dims)), "x")
    y = xe.Parameter(b, 1, xe.Shape(t, tuple(operand)), "y")
    yb = xe.BroadcastInDim(y, tuple(dims), kept)
    io = xe.Iota(b, xe.Shape(t, tuple(dims)), int(rng.integers(0, len(dims))))
    r = xe.Mul(xe.Add(x, yb), io)
    comp = b.build(xe.Sub(r, xe.Constant(b, np.array(3, dtype=xe.Shape(t, ()).dtype))))
    _check(comp, _values(dims, t, rng), _values(operand, t, rng), exact=True)


def test_a_broadcast_read_by_two_loops_is_computed_in_each():
    b = xe.XlaBuilder("shared_bcast")
    x = xe.Parameter(b, 0, xe.Shape("s32", (40, 30)), "x")
    v = xe.Parameter(b, 1, xe.Shape("s32", (30,)), "v")
    vb = xe.BroadcastInDim(v, (40, 30), [1])
    io = xe.Iota(b, xe.Shape("s32", (40, 30)), 0)
    comp = b.build(xe.Tuple(xe.Add(xe.Mul(x, vb), io), xe.Sub(vb, io)))
    plan = comp.fusion_plan()
    assert [g.root.opcode for g in plan.groups] == ["add", "subtract"]
    assert all({"broadcast", "iota"} <= {m.opcode for m in g.members} for g in plan.groups)
    args = (_values((40, 30), "s32"), _values((30,), "s32"))
    for g, w in zip(comp.run(*args, backend="numba"), comp.run(*args)):
        np.testing.assert_array_equal(g, w)


# -- ReduceWindow: separable passes over any dimension ---------------------------------------

_COMBINE = {"add": xe.Add, "max": xe.Max, "min": xe.Min, "mul": xe.Mul, "and": xe.And, "xor": xe.Xor}


def _reduce_window(dims, t, name, init, wd, ws, pad, bd=None, wdl=None):
    b = xe.XlaBuilder("rw")
    x = xe.Parameter(b, 0, xe.Shape(t, tuple(dims)), "x")
    return b.build(xe.ReduceWindow(x, xe.Constant(b, np.array(init, dtype=xe.Shape(t, ()).dtype)),
                                   lambda a, c: _COMBINE[name](a, c), wd, ws, pad, bd, wdl))


@pytest.mark.parametrize("layout", ["NCHW", "NHWC", "HWNC", "W"])
@pytest.mark.parametrize("t, name, init", [("f32", "max", -np.inf), ("f32", "add", 0.0), ("s32", "add", 3),
                                           ("s32", "min", 7), ("s32", "xor", 0)])
def test_pooling_in_every_layout(layout, t, name, init):
    """3x3 stride-2 SAME and 2x2 stride-2 VALID pooling wherever the spatial dimensions are;
    big enough for the threads."""
    sizes = {"N": 3, "C": 5, "H": 67, "W": 130}
    dims = [sizes[c] for c in layout]
    for win, stride, pad in ((3, 2, "SAME"), (2, 2, "VALID"), (3, 1, "SAME")):
        wd = [win if c in "HW" else 1 for c in layout]
        ws = [stride if c in "HW" else 1 for c in layout]
        comp = _reduce_window(dims, t, name, init, wd, ws, pad)
        _check(comp, _values(dims, t), exact=not t.startswith("f") or name != "add")


@pytest.mark.parametrize("seed", range(8))
def test_separable_windows_random_geometry(seed):
    """Random windows, strides, padding (negative too), base and window dilations over rank 1-4,
    on rows long enough for the block and threaded paths."""
    rng = np.random.default_rng(seed)
    rank = int(rng.integers(1, 5))
    dims = [int(rng.integers(1, 9)) for _ in range(rank)]
    dims[int(rng.integers(0, rank))] = int(rng.integers(40, 300))
    wd = [int(rng.integers(1, 5)) for _ in range(rank)]
    ws = [int(rng.integers(1, 4)) for _ in range(rank)]
    pad = [(int(rng.integers(-1, 4)), int(rng.integers(-1, 4))) for _ in range(rank)]
    bd = [int(rng.choice([1, 1, 2])) for _ in range(rank)]
    wdl = [int(rng.choice([1, 1, 2])) for _ in range(rank)]
    try:
        comp = _reduce_window(dims, "s32", "add", 1, wd, ws, pad, bd, wdl)
    except xe.ShapeError:  # negative padding larger than the operand
        pytest.skip("window does not fit")
    _check(comp, _values(dims, "s32"))
    comp = _reduce_window(dims, "f32", "max", -np.inf, wd, ws, pad, bd, wdl)
    _check(comp, _values(dims, "f32"))


def test_one_big_window_item_runs_pass_by_pass():
    # the window moves along the leading dimension: one item, each pass's rows in threads
    comp = _reduce_window((300, 400), "s32", "max", -5, [5, 3], [2, 1], [(2, 2), (1, 1)])
    _check(comp, _values((300, 400), "s32"))
    comp = _reduce_window((300, 400), "f32", "add", 0.5, [5, 3], [2, 1], [(2, 2), (1, 1)])
    _check(comp, _values((300, 400), "f32"), exact=False)


def test_cumulative_window_and_nan_propagate():
    x = _values((4, 700), "f32")
    x[1, 350] = np.nan
    comp = _reduce_window((4, 700), "f32", "max", -np.inf, [1, 700], [1, 1], [(0, 0), (699, 0)])
    _check(comp, x)
    comp = _reduce_window((4, 700), "s32", "add", 0, [1, 700], [1, 1], [(0, 0), (699, 0)])
    _check(comp, _values((4, 700), "s32"))


# -- Gather of single elements: index vectors of any length, anywhere in the indices ----------

def _element_gather(operand_dims, t, n, K, index_vector_dim, batching=False, rng=RNG):
    """x[i0, ..., iK-1] gathered ``n`` times (indices out of bounds too: clamped);
    the index vector at ``index_vector_dim`` of an [n, K] or [K, n] index array."""
    rank = len(operand_dims)
    dims = list(range(rank))
    batch = [0] if batching else []
    start = [d for d in dims if d not in batch][:K]
    b = xe.XlaBuilder("elements")
    x = xe.Parameter(b, 0, xe.Shape(t, tuple(operand_dims)), "x")
    ishape = (n, K) if index_vector_dim == 1 else (K, n)
    i = xe.Parameter(b, 1, xe.Shape("s32", ishape), "i")
    if batching:  # position p reads operand batch coordinate p (n == operand_dims[0])
        g = xe.Gather(x, i, offset_dims=[1 + d for d in range(rank - 1 - K)], collapsed_slice_dims=start,
                      start_index_map=start, index_vector_dim=index_vector_dim,
                      slice_sizes=[1 if d in start or d in batch else operand_dims[d] for d in dims],
                      operand_batching_dims=batch, start_indices_batching_dims=[1 - index_vector_dim])
    else:
        g = xe.Gather(x, i, offset_dims=[], collapsed_slice_dims=dims, start_index_map=start,
                      index_vector_dim=index_vector_dim, slice_sizes=[1] * rank)
    comp = b.build(g)
    idx = np.stack([rng.integers(-3, operand_dims[d] + 3, n) for d in start], axis=index_vector_dim)
    return comp, [_values(operand_dims, t, rng), idx.astype(np.int32)]


@pytest.mark.parametrize("K", [1, 2, 3, 4])
@pytest.mark.parametrize("index_vector_dim", [1, 0])
@pytest.mark.parametrize("n", [37, PARALLEL_THRESHOLD + 5])
def test_gather_single_elements(K, index_vector_dim, n):
    dims = [7, 5, 9, 4][:K]
    comp, args = _element_gather(dims, "s32", n, K, index_vector_dim)
    _check(comp, *args)


def test_gather_single_elements_with_batching_dimensions():
    comp, args = _element_gather([40000, 6], "f32", 40000, 1, 1, batching=True)
    _check(comp, *args)


def test_gather_without_start_indices_reads_the_first_element():
    # start_index_map empty: every position reads the one element at the origin
    b = xe.XlaBuilder("origin")
    x = xe.Parameter(b, 0, xe.Shape("s32", (4, 3)), "x")
    i = xe.Parameter(b, 1, xe.Shape("s32", (PARALLEL_THRESHOLD + 7, 0)), "i")
    comp = b.build(xe.Gather(x, i, offset_dims=[], collapsed_slice_dims=[0, 1], start_index_map=[],
                             index_vector_dim=1, slice_sizes=[1, 1]))
    _check(comp, _values((4, 3), "s32"), np.zeros((PARALLEL_THRESHOLD + 7, 0), np.int32))


@pytest.mark.parametrize("dims, axis", [((7, 300), 1), ((300, 33), 0), ((5, 40, 70), 2), ((5, 40, 70), 1)])
@pytest.mark.parametrize("t, name, init", [("f32", "add", 0.0), ("s32", "add", 2), ("f32", "max", -np.inf),
                                           ("s32", "min", 5)])
def test_long_windows_slide(dims, axis, t, name, init):
    """Cumulative windows (JAX's cumsum on the CPU), long strided windows and the same
    window along a minor and a major dimension: the sliding (van Herk) pass."""
    n = dims[axis]
    # cumulative, reversed cumulative, cumulative with the window longer than the axis,
    # long strided, long inside
    for w, s, low, high in ((n, 1, n - 1, 0), (n, 1, 0, n - 1), (n + 5, 1, n + 2, 1), (17, 3, 5, 9),
                            (40, 1, 0, 0)):
        if w > n + low + high:
            continue
        wd = [w if d == axis else 1 for d in range(len(dims))]
        ws = [s if d == axis else 1 for d in range(len(dims))]
        pad = [(low, high) if d == axis else (0, 0) for d in range(len(dims))]
        comp = _reduce_window(dims, t, name, init, wd, ws, pad)
        x = _values(dims, t)
        if t == "f32" and name == "add":
            got, want = comp.run(x, backend="numba"), comp.run(x)
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
        else:
            _check(comp, x)


def test_long_window_with_base_dilation_and_a_short_window_pass():
    comp = _reduce_window((30, 64), "s32", "add", 0, [3, 20], [1, 2], [(1, 1), (19, 0)], [1, 2], [1, 1])
    _check(comp, _values((30, 64), "s32"))


# -- Reduce: rows folded by halving ---------------------------------------------------------------

@pytest.mark.parametrize("n", [31, 32, 33, 255, 1000, 4099])
@pytest.mark.parametrize("name, init", [("max", -np.inf), ("min", np.inf), ("mul", 1.0)])
def test_reduce_rows_by_halving(n, name, init):
    rows = max(2, 2 * PARALLEL_THRESHOLD // n) if n == 1000 else 3
    b = xe.XlaBuilder("halving")
    x = xe.Parameter(b, 0, xe.Shape("f32", (rows, n)), "x")
    comp = b.build(xe.Reduce(x, xe.Constant(b, np.float32(init)), lambda a, c: _COMBINE[name](a, c), dimensions=[1]))
    v = RNG.uniform(0.99, 1.01, (rows, n)).astype(np.float32) if name == "mul" else _values((rows, n), "f32")
    v[0, n // 3] = np.nan
    v[-1, n - 1] = np.inf if name != "min" else -np.inf
    got, want = comp.run(v, backend="numba"), comp.run(v)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-5)


@pytest.mark.parametrize("shape, axis", [((40, 50), 1), ((6, 7, 300), 2), ((6, 300, 7), 1), ((300, 120), 1)])
@pytest.mark.parametrize("t", ["s32", "f32"])
def test_gather_along_a_minor_axis(shape, axis, t):
    """x[:, i] / jnp.take(x, i, axis): the positions are minor in the result, the slices
    are columns (indices out of bounds clamped)."""
    rank = len(shape)
    n = 2 * shape[axis] + 3
    b = xe.XlaBuilder("take_axis")
    x = xe.Parameter(b, 0, xe.Shape(t, shape), "x")
    i = xe.Parameter(b, 1, xe.Shape("s32", (n, 1)), "i")
    comp = b.build(xe.Gather(x, i, offset_dims=[d for d in range(rank) if d != axis], collapsed_slice_dims=[axis],
                             start_index_map=[axis], index_vector_dim=1,
                             slice_sizes=[1 if d == axis else shape[d] for d in range(rank)]))
    idx = RNG.integers(-2, shape[axis] + 2, (n, 1)).astype(np.int32)
    _check(comp, _values(shape, t), idx)


# -- flushing denormals around kernels, by a scan of the bits ----------------------------------

@pytest.mark.parametrize("n", [1000, 1 << 21])   # the big one is scanned in threads
@pytest.mark.parametrize("t", ["f32", "f64", "bf16", "c64", "c128"])
def test_flush_denormals_is_fpenv_flush(t, n, monkeypatch):
    from xla_explorer import fpenv
    from xla_explorer.executors.cpu import elementwise
    from xla_explorer.executors.cpu.elementwise import flush_denormals
    monkeypatch.setattr(elementwise, "_PARALLEL_SCAN_BYTES", 1 << 20)
    dt = xe.Shape(t, ()).dtype
    part = np.float64 if t in ("f64", "c128") else np.float32
    tiny = float(np.finfo(part).tiny)
    x = RNG.normal(size=n).astype(dt)
    assert flush_denormals(x) is x  # nothing to flush: the value itself
    parts = x.view(part) if t != "bf16" else None
    step = 97 if n < 1 << 20 else 400_009   # a big array: a few denormals, far apart
    if parts is not None:
        parts[::step] = tiny / 3
        parts[5::step + 34] = -tiny / 7
    else:
        x[::step] = dt.type(tiny / 3)
        x[5::step + 34] = dt.type(-tiny / 7)
    got, want = flush_denormals(x), fpenv.flush(x)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


def test_denormal_scan_finds_exactly_the_denormal_bit_patterns():
    """``elementwise._any_denormal`` (a minimum of |bits| - 1 over the array): true exactly
    when some word has a zero exponent and a nonzero mantissa (``_any_all_ones``, a maximum:
    when some word's exponent is all ones) -- every bf16 pattern, the f32
    and f64 boundaries (+-0, the smallest and largest denormals, the smallest normal,
    infinities, NaN) and random patterns, each alone among normal values, at positions in
    and after the vector lanes (all 2^32 f32 patterns were checked once, offline)."""
    from xla_explorer.executors.cpu.elementwise import _MASKS, _any_all_ones, _any_denormal
    rng = np.random.default_rng(17)
    cases = {
        "bf16": np.arange(1 << 16, dtype=np.uint32).astype(np.uint16),
        "f32": np.concatenate([np.uint32([0, 1, 0x7FFFFF, 0x800000, 0x7F800000, 0x7FC00000, 0x7F7FFFFF, 0x3F800000]),
                               rng.integers(0, 1 << 32, 3000, dtype=np.uint64).astype(np.uint32),
                               rng.integers(0, 1 << 23, 1000, dtype=np.uint64).astype(np.uint32)]),
        "f64": np.concatenate([np.uint64([0, 1, (1 << 52) - 1, 1 << 52, 0x7FF0000000000000, 0x7FF8000000000000]),
                               rng.integers(0, 1 << 63, 2000, dtype=np.uint64),
                               rng.integers(0, 1 << 52, 1000, dtype=np.uint64)])}
    for t, words in cases.items():
        word, exponent, mantissa, sign = _MASKS[t]
        words = np.concatenate([words, words | word(sign)]).astype(word)
        one = word(0x3F80 if t == "bf16" else 0x3F800000 if t == "f32" else 0x3FF0000000000000)
        for n, at in ((1, 0), (37, 36), (64, 5), (131, 128)):
            buf = np.full(n, one, word)
            want = ((words & word(exponent)) == 0) & ((words & word(mantissa)) != 0)
            got = np.empty(words.size, bool)
            for k, u in enumerate(words):
                buf[at] = u
                got[k] = _any_denormal(buf, word(exponent), word(mantissa))
            np.testing.assert_array_equal(got, want)
            assert not _any_denormal(np.full(n, one, word), word(exponent), word(mantissa))
            # and the Inf / NaN scan (``_any_all_ones``: a maximum of |bits|)
            want = (words & word(exponent)) == word(exponent)
            for k, u in enumerate(words):
                buf[at] = u
                got[k] = _any_all_ones(buf, word(exponent))
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("t", ["f32", "f64", "bf16", "c64", "s32"])
def test_nonfinite_scan_is_the_numpy_check(t):
    from xla_explorer.executors.cpu.elementwise import has_nonfinite
    from xla_explorer.ops.linalg import has_nonfinite as by_numpy
    x = _values((300,), t) if t in ("f32", "f64", "s32") else RNG.normal(size=300).astype(xe.Shape(t, ()).dtype)
    assert has_nonfinite(x) == by_numpy(x) is False
    if t != "s32":
        for bad in (np.inf, -np.inf, np.nan):
            y = x.copy()
            y[123] = bad
            assert has_nonfinite(x, y) == by_numpy(y) is True


@pytest.mark.parametrize("seed", range(6))
def test_contiguous_copies_any_strided_view(seed):
    """Transposed, reversed and sliced views made contiguous by the tiled copy."""
    from xla_explorer.executors.cpu.shape import contiguous
    rng = np.random.default_rng(seed)
    rank = int(rng.integers(2, 5))
    dims = [int(rng.integers(2, 40)) for _ in range(rank)]
    x = rng.integers(-100, 100, dims).astype([np.int32, np.float32, np.int8, np.float64][seed % 4])
    v = np.transpose(x, rng.permutation(rank))
    v = v[tuple(slice(None, None, int(rng.choice([1, -1, 2]))) for _ in range(rank))]
    got = contiguous(v)
    assert got.flags.c_contiguous and got.dtype == v.dtype
    np.testing.assert_array_equal(got, v)
    assert contiguous(np.float32(3)).shape == ()


@pytest.mark.parametrize("name", ["max", "min"])
@pytest.mark.parametrize("rows", [3, 40])
def test_max_min_of_denormals_flush_only_the_result(name, rows):
    """Reduce max / min flush their result, not their operand (the extreme of flushed
    values is the flushed extreme): the same bits as the reference, which flushes both,
    for every triple (and 40-element rows, the halving path) of special values."""
    import itertools
    d = np.float32(1e-39)
    special = np.float32([0.0, -0.0, d, -d, 1, -1, np.inf, -np.inf, np.nan, 2 * d, -3 * d])
    x = np.array(list(itertools.product(special, repeat=3)), np.float32)
    if rows == 40:
        x = np.concatenate([x, np.resize(x[::-1], x.shape[:1] + (37,))], axis=1)
    for init in (-np.inf if name == "max" else np.inf, 0.0, -d):
        comp = _reduce(x.shape, name, init)
        got, want = comp.run(x, backend="numba"), comp.run(x)
        np.testing.assert_array_equal(got.view(np.uint32)[~np.isnan(want)], want.view(np.uint32)[~np.isnan(want)])
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))


def _reduce(shape, name, init):
    b = xe.XlaBuilder("extreme")
    x = xe.Parameter(b, 0, xe.Shape("f32", shape), "x")
    return b.build(xe.Reduce(x, xe.Constant(b, np.float32(init)), lambda a, c: _COMBINE[name](a, c), dimensions=[1]))


# -- Reduce with a generated region along a major dimension: 64 columns at a time ---------------

def _argmax_region():
    b = xe.XlaBuilder("argmax_region")
    av, ai = xe.Parameter(b, 0, xe.Shape("f32", ()), "av"), xe.Parameter(b, 1, xe.Shape("s32", ()), "ai")
    bv, bi = xe.Parameter(b, 2, xe.Shape("f32", ()), "bv"), xe.Parameter(b, 3, xe.Shape("s32", ()), "bi")
    take_a = xe.Or(xe.Gt(av, bv), xe.And(xe.Eq(av, bv), xe.Lt(ai, bi)))
    return b.build(xe.Tuple(xe.Select(take_a, av, bv), xe.Select(take_a, ai, bi)))


@pytest.mark.parametrize("shape, axis", [((300, 70), 0), ((5, 123, 40), 1), ((200, 400), 0), ((33, 17), 0)])
def test_generated_fold_along_a_major_axis(shape, axis):
    region = _argmax_region()
    b = xe.XlaBuilder("argmax")
    x = xe.Parameter(b, 0, xe.Shape("f32", shape), "x")
    i = xe.Iota(b, xe.Shape("s32", shape), axis)
    comp = b.build(xe.Reduce([x, i], [xe.Constant(b, np.float32(-np.inf)), xe.Constant(b, np.int32(-1))], region,
                             dimensions=[axis]))
    v = RNG.integers(0, 5, shape).astype(np.float32)  # ties: the smaller index wins
    v[(0,) * len(shape)] = np.nan
    for got, want in zip(comp.run(v, backend="numba"), comp.run(v)):
        np.testing.assert_array_equal(got, want)
    # a region that is not associative: the reference's tree order, column by column
    b = xe.XlaBuilder("sub")
    y = xe.Parameter(b, 0, xe.Shape("s32", shape), "y")
    comp = b.build(xe.Reduce(y, xe.Constant(b, np.int32(3)), lambda p, q: xe.Sub(p, q), dimensions=[axis]))
    _check(comp, _values(shape, "s32"))
