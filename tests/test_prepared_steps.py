"""Run-plan steps decided once (``numba_executor._op_step``'s ``prepare`` hooks) give the
bits of the kernels' own paths and of the NumPy reference: reduce and reduce-window with
a standard combiner (their regions bound once, the denormal rule around them), reshape,
bitcast, and a lone broadcast that only adds size-1 dimensions (a view, not a loop) --
over dtypes, shapes with size-1 and odd dimensions, non-identity inits, denormals in both
float environments, and arguments the prepared path hands back to the kernel."""
import numpy as np
import pytest

import xla_explorer as xe

pytest.importorskip("numba")

from xla_explorer.executors import numba_executor  # noqa: E402

TINY32 = np.float32(1e-40)   # a denormal f32


def _bits(a):
    a = np.asarray(a)
    return a.tobytes(), a.dtype, a.shape


def _steps(comp):
    (program,) = [p for p in comp.entry.__dict__["_numba_programs"].values()][:1]
    return [fn.__name__ for fn, *_ in program.steps]


def _walk(comp, *args, denormals="ieee"):
    """The numba executor's result through the kernels' own paths (a watched run walks the
    computation instead of running its plan)."""
    return comp.run(*args, backend="numba", denormals=denormals, on_value=lambda inst, value: None)


def _check(comp, *args, denormals="ieee", exact=True):
    """The run plan's result (runs 2 and 3) has the bits of the walk's; and of the
    reference's when ``exact`` (float sums and products keep the kernels' own pairing)."""
    want = _walk(comp, *args, denormals=denormals)
    if exact:
        ref = comp.run(*args, denormals=denormals)
        assert _bits(want) == _bits(ref), (want, ref)
    for _ in range(3):   # the walk, then the run plan
        got = comp.run(*args, backend="numba", denormals=denormals)
        assert _bits(got) == _bits(want), (got, want)
    return want


def _values(rng, t, shape):
    dt = np.dtype(xe.Shape(t, ()).dtype)
    if dt.kind == "f":
        x = rng.standard_normal(shape).astype(dt)
        flat = x.reshape(-1)
        if flat.size > 3:
            flat[1] = dt.type(1e-310 if dt == np.float64 else TINY32)   # a denormal
            flat[2] = -0.0
            flat[3] = 0.0
        return x
    if dt.kind == "u":
        return rng.integers(0, 200, shape).astype(dt)
    return rng.integers(-100, 100, shape).astype(dt)


COMBINERS = {"add": xe.Add, "mul": xe.Mul, "max": xe.Max, "min": xe.Min}
INITS = {"add": 0, "mul": 1, "max": -np.inf, "min": np.inf}


def _init(t, name, other=False):
    dt = np.dtype(xe.Shape(t, ()).dtype)
    v = INITS[name]
    if other:
        v = {"add": 1.5, "mul": 2, "max": 0.25, "min": -0.5}[name]
    if dt.kind != "f":
        info = np.iinfo(dt)
        v = info.max if v == np.inf else info.min if v == -np.inf else int(v)
    return dt.type(v)


@pytest.mark.parametrize("t", ["f32", "f64", "s32", "u8", "s64"])
@pytest.mark.parametrize("name", sorted(COMBINERS))
@pytest.mark.parametrize("dims,reduced", [((5, 7), [1]), ((5, 7), [0]), ((5, 7), [0, 1]), ((1, 9), [1]),
                                          ((3, 1, 4), [1]), ((2, 3, 4), [0, 2]), ((6, 33), [1])])
def test_prepared_reduce_has_the_reference_bits(t, name, dims, reduced):
    if name == "mul" and t == "u8":
        pytest.skip("u8 products overflow into the same bits anyway; covered by s32")
    rng = np.random.default_rng(len(dims) * 10 + len(reduced))
    for other in (False, True):
        b = xe.XlaBuilder("r")
        x = xe.Parameter(b, 0, xe.Shape(t, dims), "x")
        comp = b.build(xe.Reduce(x, _init(t, name, other), lambda a, c: COMBINERS[name](a, c), reduced))
        v = _values(rng, t, dims)
        for dn in ("ieee", "flush"):
            _check(comp, v, denormals=dn, exact=not (t in ("f32", "f64") and name in ("add", "mul")))
            assert any("prepared" in s for s in _steps(comp))


def _reduce_window(t, name, other, dims, win, strides, padding):
    """A computation of one ReduceWindow of a ``t`` parameter of ``dims`` by combiner ``name``
    (its init value the identity, or another value: ``other``)."""
    b = xe.XlaBuilder("rw")
    x = xe.Parameter(b, 0, xe.Shape(t, dims), "x")
    return b.build(xe.ReduceWindow(x, _init(t, name, other), lambda a, c: COMBINERS[name](a, c), win, strides,
                                   padding))


@pytest.mark.parametrize("t", ["f32", "f64", "s32"])
@pytest.mark.parametrize("name", ["add", "max", "min"])
@pytest.mark.parametrize("dims,win,strides,padding", [
    ((2, 9, 9), (1, 3, 3), (1, 2, 2), "SAME"),
    ((3, 8, 8), (1, 3, 3), (1, 2, 2), "SAME"),
    ((2, 7, 10), (1, 2, 2), (1, 2, 2), "VALID"),
    ((1, 5, 5), (1, 3, 3), (1, 1, 1), [(0, 0), (1, 1), (2, 0)]),
    ((7, 7, 16), (3, 3, 1), (2, 2, 1), "SAME"),    # channels minor: vectors of C
    ((9, 1), (3, 1), (2, 1), "SAME"),
])
def test_prepared_reduce_window_has_the_reference_bits(t, name, dims, win, strides, padding):
    rng = np.random.default_rng(sum(dims))
    for other in (False, True):
        comp = _reduce_window(t, name, other, dims, win, strides, padding)
        v = _values(rng, t, dims)
        for dn in ("ieee", "flush"):
            _check(comp, v, denormals=dn, exact=not (t in ("f32", "f64") and name == "add"))
            assert any("prepared" in s for s in _steps(comp))


@pytest.mark.parametrize("t", ["f32", "f64", "s32"])
@pytest.mark.parametrize("name", ["add", "max", "min", "mul"])
@pytest.mark.parametrize("dims,win,strides,padding", [
    ((256, 10), (32, 1), (32, 1), "VALID"),          # the MLP's bias gradient: a sliding pass, B > 1
    ((40,), (40,), (1,), [(39, 0)]),                 # cumsum: a cumulative pass
    ((3, 40), (1, 40), (1, 1), [(0, 0), (0, 39)]),   # a reversed cumsum along rows (B = 1)
    ((5, 37), (1, 17), (1, 3), [(0, 0), (4, 2)]),    # a sliding window along rows, padded, strided
    ((33, 3), (20, 1), (1, 1), "SAME"),              # a sliding window along a major dimension
    ((1, 1), (16, 1), (1, 1), [(15, 0), (0, 0)]),    # size 1, the window all padding but one
    ((2, 66000), (1, 2), (1, 2), "VALID"),           # long rows
    ((64, 2048), (33, 1), (2, 1), "SAME"),           # large: its passes in threads
])
def test_prepared_long_windows_have_the_kernels_bits(t, name, dims, win, strides, padding):
    """Windows of 16 and more (sliding, cumulative passes) and long rows are prepared too:
    the same passes as the kernel's, the same bits as the walk's (and the reference's where
    the pairing of a float sum or product does not differ), denormals flushed or not."""
    if name == "mul" and t != "f64":
        pytest.skip("products: f64 covers the pairing")
    rng = np.random.default_rng(sum(dims))
    for other in (False, True):
        comp = _reduce_window(t, name, other, dims, win, strides, padding)
        v = _values(rng, t, dims)
        if name == "mul":
            v = (np.abs(v) % 2 + 0.5).astype(v.dtype)
            v.reshape(-1)[v.size // 2] = 1e-310
        for dn in ("ieee", "flush"):
            _check(comp, v, denormals=dn, exact=not (t in ("f32", "f64") and name in ("add", "mul")))
            assert any("prepared" in s for s in _steps(comp)), _steps(comp)


def test_a_prepared_sliding_window_that_meets_a_denormal_is_computed_again_flushed():
    """Under flushing the first pass checks the operand (the cumulative passes and sliding
    ones by a scan first); a denormal makes the step run again on the flushed operand: the
    walk's bits, and the reference's for max; the same step reused for a clean operand."""
    for dims, win, pad in (((256, 10), (32, 1), "VALID"), ((3, 40), (1, 40), [(0, 0), (39, 0)])):
        b = xe.XlaBuilder("den")
        p = xe.Parameter(b, 0, xe.Shape("f32", dims), "x")
        comp = b.build(xe.ReduceWindow(p, np.float32(0), lambda a, c: xe.Add(a, c), win, (1,) * len(dims)
                                       if len(dims) == 1 else ((32, 1) if win == (32, 1) else (1, 1)), pad))
        x = np.full(dims, -TINY32, np.float32)
        x[0, 0] = 1.0
        clean = np.ones(dims, np.float32)
        for v in (x, clean, x):
            for dn in ("flush", "ieee"):
                got = _check(comp, v, denormals=dn, exact=False)
                if dn == "flush":
                    ref = comp.run(np.where(np.abs(v) < 1.2e-38, np.float32(0) * np.sign(v), v), denormals="ieee")
                    assert _bits(got) == _bits(ref)
            assert any("prepared" in s for s in _steps(comp))


def test_prepared_reductions_hand_other_arguments_to_the_kernel():
    """A non-contiguous argument of the exact dtype and dims is taken as it is: the
    prepared step runs the kernel on it (or copies it), with the same bits."""
    rng = np.random.default_rng(3)
    base = rng.standard_normal((9, 12)).astype(np.float32)
    x = base.T[:, ::1]   # f32[12, 9], not C-contiguous
    assert not x.flags.c_contiguous
    b = xe.XlaBuilder("nc")
    p = xe.Parameter(b, 0, xe.Shape("f32", (12, 9)), "x")
    comp = b.build(xe.Tuple(xe.Reduce(p, np.float32(0), lambda a, c: xe.Add(a, c), [1]),
                            xe.ReduceWindow(p, np.float32(-np.inf), lambda a, c: xe.Max(a, c), (3, 3), (2, 2),
                                            "SAME")))
    for dn in ("ieee", "flush"):
        want = _walk(comp, x, denormals=dn)
        for _ in range(3):
            got = comp.run(x, backend="numba", denormals=dn)
            for g, w in zip(got, want):
                assert _bits(g) == _bits(w)
            got = comp.run(np.ascontiguousarray(x), backend="numba", denormals=dn)
            for g, w in zip(got, want):
                assert _bits(g) == _bits(w)


def test_a_sum_that_meets_a_denormal_is_flushed_and_reduced_again():
    x = np.ones((4, 300), np.float32)
    x[2, 7] = TINY32
    x[1, 0] = -TINY32
    b = xe.XlaBuilder("den")
    p = xe.Parameter(b, 0, xe.Shape("f32", (4, 300)), "x")
    comp = b.build(xe.Reduce(p, np.float32(TINY32), lambda a, c: xe.Add(a, c), [1]))
    for dn in ("flush", "ieee", "flush"):
        _check(comp, x, denormals=dn, exact=False)


def _softmax_like(n, m, t="f32"):
    """JAX's softmax glue: a row maximum, reshaped to [n, 1], broadcast to [n, 1] (the
    same elements: a view), reshaped back, broadcast along the rows."""
    b = xe.XlaBuilder("glue")
    x = xe.Parameter(b, 0, xe.Shape(t, (n, m)), "x")
    r = xe.Reduce(x, np.dtype(xe.Shape(t, ()).dtype).type(-np.inf), lambda a, c: xe.Max(a, c), [1])
    r1 = xe.Reshape(r, new_sizes=[n, 1])
    r2 = xe.BroadcastInDim(r1, [n, 1], [0, 1])
    r3 = xe.Reshape(r2, new_sizes=[n])
    return b.build(xe.Tuple(xe.Sub(x, xe.BroadcastInDim(r3, [n, m], [0])), r2))


@pytest.mark.parametrize("n,m", [(1, 1), (3, 5), (64, 33)])
@pytest.mark.parametrize("t", ["f32", "f64", "bf16"])
def test_reshapes_and_size_one_broadcasts_are_views_with_the_same_values(n, m, t):
    comp = _softmax_like(n, m, t)
    rng = np.random.default_rng(n * m)
    x = rng.standard_normal((n, m)).astype(np.dtype(xe.Shape(t, ()).dtype))
    for dn in ("ieee", "flush"):
        want = comp.run(x, denormals=dn)
        for _ in range(3):
            got = comp.run(x, backend="numba", denormals=dn)
            for g, w in zip(got, want):
                assert _bits(g) == _bits(w)
    # the lone broadcast [n, 1] -> [n, 1] is a view runner, not a compiled loop
    from xla_explorer.executors.fusion import fusion_plan
    groups = [s.group for s in fusion_plan(comp.entry).steps if s.group is not None]
    lone = [g for g in groups if len(g.members) == 1 and g.root.opcode == "broadcast"]
    assert lone and all(numba_executor._view_runner(g) is not None for g in lone)


def test_broadcasts_that_repeat_are_not_views():
    b = xe.XlaBuilder("rep")
    x = xe.Parameter(b, 0, xe.Shape("f32", (3, 1)), "x")
    y = xe.Parameter(b, 1, xe.Shape("f32", (2, 3)), "y")
    comp = b.build(xe.Tuple(xe.BroadcastInDim(x, [3, 4], [0, 1]), xe.BroadcastInDim(y, [2, 4, 3], [0, 2])))
    from xla_explorer.executors.fusion import fusion_plan
    groups = [s.group for s in fusion_plan(comp.entry).steps if s.group is not None]
    assert groups and all(numba_executor._view_runner(g) is None for g in groups)
    xv = np.arange(3, dtype=np.float32).reshape(3, 1)
    yv = np.arange(6, dtype=np.float32).reshape(2, 3)
    want = comp.run(xv, yv)
    for _ in range(3):
        got = comp.run(xv, yv, backend="numba")
        for g, w in zip(got, want):
            assert _bits(g) == _bits(w)


def test_a_bitcast_of_the_same_type_is_a_view_and_another_type_reinterprets():
    text = """
HloModule bc
ENTRY main {
  x = f32[4,6]{1,0} parameter(0)
  a = f32[24]{0} bitcast(x)
  b = s32[6,4]{1,0} bitcast(x)
  ROOT t = (f32[24]{0}, s32[6,4]{1,0}) tuple(a, b)
}
"""
    comp = xe.parse_hlo(text)
    x = np.arange(24, dtype=np.float32).reshape(4, 6) - 7.5
    want = comp.run(x)
    for _ in range(3):
        got = comp.run(x, backend="numba")
        for g, w in zip(got, want):
            assert _bits(g) == _bits(w)


def _padded_fold(x, win, strides, pads, op, ident, start, use_start):
    """A separable ReduceWindow as the kernel's padded passes define it: the last windowed
    dimension first, each pass folding its window's cells in order over the row padded
    with the identity, the start combined last in the last pass (NumPy, in x's dtype)."""
    dims = [d for d in range(x.ndim) if not (win[d] == 1 and strides[d] == 1 and tuple(pads[d]) == (0, 0))]
    cur = x
    for k, d in enumerate(reversed(dims)):
        lo, hi = pads[d]
        width = [(0, 0)] * x.ndim
        width[d] = (lo, hi)
        p = np.pad(cur, width, constant_values=ident)
        m = (p.shape[d] - win[d]) // strides[d] + 1
        take = lambda w: np.take(p, np.arange(m) * strides[d] + w, axis=d)  # noqa: E731
        acc = take(0)
        for w in range(1, win[d]):
            acc = op(acc, take(w))
        if k == len(dims) - 1 and use_start:
            acc = op(acc, np.full_like(acc, start))
        cur = acc
    return cur


def _fmax(a, b):   # scalar_lib.fmax without NaNs: +0.0 > -0.0
    r = np.where(a > b, a, b)
    return np.where(a == b, np.where(np.signbit(a), b, a), r)


def _fmin(a, b):   # -0.0 < +0.0
    r = np.where(a < b, a, b)
    return np.where(a == b, np.where(np.signbit(a), a, b), r)


@pytest.mark.parametrize("hw", [(9, 9), (45, 45), (7, 10), (11, 6), (5, 3)])
@pytest.mark.parametrize("win,stride", [(3, 2), (2, 2), (3, 3), (4, 3)])
@pytest.mark.parametrize("name,init", [("add", 0.0), ("add", -0.0), ("add", 1.5), ("max", -np.inf),
                                       ("max", 0.25), ("min", np.inf), ("mul", 1.0), ("mul", -2.0)])
def test_pooling_rows_have_the_padded_folds_bits(hw, win, stride, name, init):
    """NCHW pooling (the window along the two minor dimensions) over rows of any length,
    odd ones included (their results are folded as rows of M * s elements, the edge
    results from their real cells): the bits of the padded fold, for inits that are the
    identity, +0.0 and others."""
    rng = np.random.default_rng(hw[0] * 100 + hw[1] + win)
    x = rng.standard_normal((3,) + hw).astype(np.float32)
    x.reshape(-1)[::7] = -0.0
    x.reshape(-1)[3::11] = 0.0
    op, ident = {"add": (np.add, np.float32(-0.0)), "max": (_fmax, np.float32(-np.inf)),
                 "min": (_fmin, np.float32(np.inf)), "mul": (np.multiply, np.float32(1.0))}[name]
    start = np.float32(init)
    use_start = ident.tobytes() != start.tobytes()
    for padding in ("SAME", "VALID", [(0, 0), (1, 2), (2, 1)]):
        b = xe.XlaBuilder("pool")
        p = xe.Parameter(b, 0, xe.Shape("f32", x.shape), "x")
        comp = b.build(xe.ReduceWindow(p, start, lambda a, c: COMBINERS[name](a, c), (1, win, win),
                                       (1, stride, stride), padding))
        out_dims = comp.entry.root.shape.dims
        if padding == "SAME":
            pads = [(0, 0)] + [((max(0, (-(-n // stride) - 1) * stride + win - n)) // 2,
                                max(0, (-(-n // stride) - 1) * stride + win - n)
                                - (max(0, (-(-n // stride) - 1) * stride + win - n)) // 2) for n in hw]
        elif padding == "VALID":
            pads = [(0, 0), (0, 0), (0, 0)]
        else:
            pads = padding
        with np.errstate(all="ignore"):
            want = _padded_fold(x, (1, win, win), (1, stride, stride), pads, op, ident, start, use_start)
        assert want.shape == tuple(out_dims)
        for dn in ("ieee", "flush"):
            if dn == "flush":
                continue   # (the data holds no denormal: the same bits)
            for _ in range(3):
                got = comp.run(x, backend="numba", denormals=dn)
                assert _bits(got) == _bits(want), (padding, got, want)


@pytest.mark.parametrize("t", ["f32", "s8", "u64", "f64", "pred"])
@pytest.mark.parametrize("dims, sizes", [((64, 32, 16), (1, 32, 16)), ((7, 5), (3, 2)), ((300, 400), (200, 300)),
                                         ((1, 9), (1, 9))])
def test_prepared_dynamic_slices_clamp_their_starts_as_the_reference(t, dims, sizes):
    """The prepared dynamic-slice (its copy planned once, starts clamped per run): starts in
    range, negative, past the end, of s32 / u32 / s64 / u64 (one near 2^64), small slices
    copied in the calling thread and large ones in threads, each with the reference's bits."""
    rng = np.random.default_rng(5)
    x = _values(rng, t, dims)
    for itype in ("s32", "u32", "s64", "u64"):
        b = xe.XlaBuilder("ds")
        p = xe.Parameter(b, 0, xe.Shape(t, dims), "x")
        starts = [xe.Parameter(b, 1 + k, xe.Shape(itype, ()), f"s{k}") for k in range(len(dims))]
        comp = b.build(xe.DynamicSlice(p, starts, list(sizes)))
        dt = xe.Shape(itype, ()).dtype
        cases = [[0] * len(dims), [d - z for d, z in zip(dims, sizes)], [d for d in dims], [1] * len(dims)]
        if itype[0] == "s":
            cases.append([-3] * len(dims))
        if itype == "u64":
            cases.append([2 ** 64 - 2] * len(dims))
        for case in cases:
            args = [np.array(v, dt) for v in case]
            got = _check(comp, x, *args)
            assert got.shape == tuple(sizes)
    # an operand the prepared path does not take (not C-contiguous): the kernel
    b = xe.XlaBuilder("ds_view")
    p = xe.Parameter(b, 0, xe.Shape(t, dims), "x")
    s = [xe.Parameter(b, 1 + k, xe.Shape("s32", ()), f"s{k}") for k in range(len(dims))]
    comp = b.build(xe.DynamicSlice(p, s, list(sizes)))
    view = np.asfortranarray(x)
    args = [np.array(1, np.int32)] * len(dims)
    assert _bits(comp.run(view, *args, backend="numba")) == _bits(comp.run(x, *args))


def test_the_dynamic_slice_step_is_prepared():
    b = xe.XlaBuilder("ds_step")
    p = xe.Parameter(b, 0, xe.Shape("f32", (64, 32, 128)), "x")
    i = xe.Parameter(b, 1, xe.Shape("s32", ()), "i")
    z = np.array(0, np.int32)
    comp = b.build(xe.DynamicSlice(p, [i, z, z], [1, 32, 128]))
    x = np.arange(64 * 32 * 128, dtype=np.float32).reshape(64, 32, 128)
    comp.run(x, np.array(3, np.int32), backend="numba")
    assert "prepared_step" in _steps(comp)
    np.testing.assert_array_equal(comp.run(x, np.array(70, np.int32), backend="numba"), x[63:64])


@pytest.mark.parametrize("t", ["f32", "f64", "c64"])
@pytest.mark.parametrize("m,k,n", [(32, 128, 128), (1, 7, 3), (5, 1, 9)])
@pytest.mark.parametrize("denormals", ["flush", "ieee"])
def test_small_prepared_dots_have_the_kernels_bits(t, m, k, n, denormals):
    """The prepared path of a small [M, K] @ [K, N] (one BLAS call, its flagged operands
    flushed in the run): the walk's bits, denormal operands included; an operand not
    C-contiguous goes the general way."""
    rng = np.random.default_rng(m * k + n)
    b = xe.XlaBuilder("small_dot")
    x = xe.Parameter(b, 0, xe.Shape(t, (m, k)), "x")
    y = xe.Parameter(b, 1, xe.Shape(t, (k, n)), "y")
    comp = b.build(xe.Dot(x, y))
    dt = xe.Shape(t, ()).dtype
    lhs = rng.standard_normal((m, k)).astype(dt)
    rhs = rng.standard_normal((k, n)).astype(dt)
    lhs.reshape(-1)[::3] = dt.type(1e-310 if dt == np.float64 else 1e-40)
    _check(comp, lhs, rhs, denormals=denormals, exact=False)
    # a denormal row against a huge matrix: its products count, flushed or not
    lhs[0] = dt.type(1e-310 if dt == np.float64 else 1e-40)
    big = (rhs * (1e300 if dt == np.float64 else 1e30)).astype(dt)
    got = _check(comp, lhs, big, denormals=denormals, exact=False)
    assert (np.all(got[0] == 0) if denormals == "flush" else np.any(got[0] != 0))
    view = np.asfortranarray(lhs)
    assert _bits(comp.run(view, rhs, backend="numba", denormals=denormals)) == _bits(
        _walk(comp, lhs, rhs, denormals=denormals))
