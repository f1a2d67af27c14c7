"""The reduction kernels' fast paths against the NumPy reference, bit for bit.

- JAX's argmax / argmin region is folded linearly (a vectorised maximum, then the index)
  instead of in the reference's pairwise tree: the results must be the tree's bits over
  ties, NaNs (their payloads: the first NaN wins), -0.0 / +0.0 (the value of a zero
  maximum is the last zero's, the index the smallest tied one), all-equal rows, index
  operands with duplicates, any init, and denormals under the flushing float environment
  (the region's compares read them as zeros: those rows run the tree kernel).
"""
import numpy as np
import pytest

import xla_explorer as xe

pytest.importorskip("numba")

from xla_explorer.executors.cpu import load  # noqa: E402

load()
from xla_explorer.executors.cpu import reduction as kred  # noqa: E402


def _region(is_max, t):
    """JAX's argmax (argmin) region on values of type t and s32 indices."""
    b = xe.XlaBuilder("argminmax")
    av, ai = xe.Parameter(b, 0, xe.Shape(t, ()), "av"), xe.Parameter(b, 1, xe.Shape("s32", ()), "ai")
    bv, bi = xe.Parameter(b, 2, xe.Shape(t, ()), "bv"), xe.Parameter(b, 3, xe.Shape("s32", ()), "bi")
    p = xe.Gt(av, bv) if is_max else xe.Lt(av, bv)
    if t != "s32":
        p = xe.Or(p, xe.Ne(av, av))
    q = xe.Or(p, xe.And(xe.Eq(av, bv), xe.Lt(ai, bi)))
    return b.build(xe.Tuple(xe.Select(p, av, bv), xe.Select(q, ai, bi)))


def _bits(a):
    a = np.asarray(a)
    return a.view(f"u{a.dtype.itemsize}") if a.dtype.kind == "f" else a


def _one_nan(x, rng):
    """x with a NaN of the sign bit set in each row, somewhere."""
    rows = x.reshape(-1, x.shape[-1])
    rows[np.arange(rows.shape[0]), rng.integers(0, x.shape[-1], rows.shape[0])] = -np.nan
    return x


def _values(rng, t, shape, kind):
    dt = xe.Shape(t, ()).dtype
    if t == "s32":
        return rng.integers(-3, 3, shape).astype(dt)
    specials = [0.0, -0.0, 1.0, -1.0, np.nan, np.inf, -np.inf, 2.0]
    x = {"zeros": lambda: rng.choice([0.0, -0.0], shape),
         "specials": lambda: rng.choice(specials, shape),
         "all equal": lambda: np.full(shape, rng.choice(specials)),
         "zero maximum": lambda: rng.choice([0.0, -0.0, -1.0], shape),
         "normal": lambda: rng.standard_normal(shape),
         "denormals": lambda: rng.choice([0.0, -0.0, 1e-40, -1e-40, -1.0], shape),
         # a normal maximum over denormals: flushing cannot change the answer
         "denormals below": lambda: rng.choice([0.0, -0.0, 1e-40, -1e-40, -1.0, 0.5], shape),
         # a NaN, infinities: the rows' NaN flag is set by both
         "infinities": lambda: rng.choice([np.inf, -np.inf, -1.0, 1.0, 3.0], shape),
         "negative NaN": lambda: _one_nan(rng.standard_normal(shape), rng)}[kind]().astype(dt)
    if kind == "specials" and x.size:   # NaNs with payloads of both signs: which NaN wins shows
        bits = x.view(np.uint32)
        nan = np.isnan(x)
        bits[nan] |= rng.integers(1, 1 << 20, int(nan.sum())).astype(np.uint32)
        bits[nan] ^= rng.integers(0, 2, int(nan.sum())).astype(np.uint32) << 31
    return x


@pytest.mark.parametrize("t", ["f32", "s32"])
@pytest.mark.parametrize("is_max", [True, False])
def test_argmax_argmin_fold_linearly_with_the_trees_bits(t, is_max):
    region = _region(is_max, t)
    assert kred._argminmax_plan(region.entry) == (is_max, t != "s32")
    rng = np.random.default_rng(3)
    dt = xe.Shape(t, ()).dtype
    kinds = ["zeros", "specials", "all equal", "zero maximum", "normal", "denormals", "denormals below",
             "infinities", "negative NaN"] if t != "s32" else ["ints"]
    # rows (B = 1: the vectorised maximum, rows longer and shorter than its 64 lanes) and
    # columns (B > 1: the region as vectors, blocks of 256 columns and a partial one)
    for shape, axis in [((5, 300), 1), ((4, 1), 1), ((3, 63), 1), ((6, 32), 1), ((4, 33), 1), ((3, 2000), 1),
                        ((200, 7), 0), ((3, 40, 300), 1)]:
        b = xe.XlaBuilder("argminmax")
        x = xe.Parameter(b, 0, xe.Shape(t, shape), "x")
        i = xe.Parameter(b, 1, xe.Shape("s32", shape), "i")
        init = [xe.Parameter(b, 2, xe.Shape(t, ()), "v0"), xe.Parameter(b, 3, xe.Shape("s32", ()), "i0")]
        comp = b.build(xe.Reduce([x, i], init, region, [axis]))
        iota = np.arange(shape[axis], dtype=np.int32).reshape([-1 if d == axis else 1 for d in range(len(shape))])
        for kind in kinds:
            for index in (np.broadcast_to(iota, shape).copy(), rng.integers(0, 4, shape).astype(np.int32)):
                xv = _values(rng, t, shape, kind)
                v0 = dt.type(rng.choice([-np.inf, np.inf, -0.0, 0.0, np.nan])) if t != "s32" else dt.type(-2)
                i0 = np.int32(rng.integers(-1, 3))
                for env in (["flush", "ieee"] if kind.startswith("denormals") else ["flush"]):
                    with xe.float_env(denormals=env):
                        want = comp.run(xv, index, v0, i0)
                        got = comp.run(xv, index, v0, i0, backend="numba")
                    for w, g in zip(want, got):
                        np.testing.assert_array_equal(_bits(g), _bits(w), err_msg=f"{shape} {axis} {kind} {env}")


def test_other_selection_regions_are_not_recognised():
    """Without the NaN test a float argmax depends on the bracketing; a region preferring
    b (the mirrored form) is another function: both stay on the tree kernel."""
    b = xe.XlaBuilder("no_nan")
    av, ai = xe.Parameter(b, 0, xe.Shape("f32", ()), "av"), xe.Parameter(b, 1, xe.Shape("s32", ()), "ai")
    bv, bi = xe.Parameter(b, 2, xe.Shape("f32", ()), "bv"), xe.Parameter(b, 3, xe.Shape("s32", ()), "bi")
    q = xe.Or(xe.Gt(av, bv), xe.And(xe.Eq(av, bv), xe.Lt(ai, bi)))
    region = b.build(xe.Tuple(xe.Select(xe.Gt(av, bv), av, bv), xe.Select(q, ai, bi)))
    assert kred._argminmax_plan(region.entry) is None
    b = xe.XlaBuilder("mirrored")
    av, ai = xe.Parameter(b, 0, xe.Shape("f32", ()), "av"), xe.Parameter(b, 1, xe.Shape("s32", ()), "ai")
    bv, bi = xe.Parameter(b, 2, xe.Shape("f32", ()), "bv"), xe.Parameter(b, 3, xe.Shape("s32", ()), "bi")
    take = xe.Or(xe.Or(xe.Gt(bv, av), xe.Ne(bv, bv)), xe.And(xe.Eq(bv, av), xe.Lt(bi, ai)))
    region = b.build(xe.Tuple(xe.Select(take, bv, av), xe.Select(take, bi, ai)))
    assert kred._argminmax_plan(region.entry) is None


@pytest.mark.parametrize("t", ["f32", "f64"])
@pytest.mark.parametrize("name", ["max", "min"])
def test_row_maximum_on_integer_keys_has_the_trees_bits(t, name):
    """Reduce maximum / minimum along rows compares the floats' bits as integers; a NaN or
    a zero result goes through fmax's rules: bit for bit the reference's (a NaN for a NaN),
    over NaN payloads, +-0, infinities, all-equal rows, denormals (flushed or not), rows shorter
    and longer than the vector loop."""
    rng = np.random.default_rng(4)
    dt = xe.Shape(t, ()).dtype
    op = xe.Max if name == "max" else xe.Min
    for shape in [(6, 33), (4, 100), (3, 1000)]:
        b = xe.XlaBuilder("extreme")
        x = xe.Parameter(b, 0, xe.Shape(t, shape), "x")
        comp = b.build(xe.Reduce(x, xe.Parameter(b, 1, xe.Shape(t, ()), "init"), lambda a, c: op(a, c), [1]))
        for kind in ["zeros", "specials", "all equal", "zero maximum", "normal", "denormals", "negative NaN"]:
            xv = _values(rng, "f32", shape, kind).astype(dt)
            if name == "min":
                xv = -xv
            for init in (-np.inf, np.inf, 0.0, -0.0, np.nan):
                for env in ("flush", "ieee"):
                    with xe.float_env(denormals=env):
                        want = comp.run(xv, dt.type(init))
                        got = comp.run(xv, dt.type(init), backend="numba")
                    # (which NaN's payload a NaN result carries is not promised: fmax's rules)
                    nan = np.isnan(want)
                    np.testing.assert_array_equal(np.isnan(got), nan)
                    np.testing.assert_array_equal(_bits(got)[~nan], _bits(want)[~nan], err_msg=f"{kind} {init} {env}")


@pytest.mark.parametrize("t", ["f32", "f64"])
def test_float_sums_check_denormals_in_their_own_pass(t):
    """Under flushing a float sum's operand is checked for denormals by the kernel as it
    sums (no scan before): one met, the operand is flushed and summed again.  Every layout
    of the kernel: rows, one long row cut in parts, columns in blocks, narrow columns cut
    in parts, two reduced groups; a denormal first, last, alone."""
    dt = xe.Shape(t, ()).dtype
    tiny = np.finfo(dt).tiny
    rng = np.random.default_rng(5)
    for dims, reduced in [((300, 1000), [1]), ((1, 400000), [1]), ((700, 600), [0]), ((3000, 100), [0]),
                          ((40, 50, 200), [0, 2]), ((2, 20, 3, 10, 520), [1, 3]), ((7, 5), [1])]:
        b = xe.XlaBuilder("sum")
        x = xe.Parameter(b, 0, xe.Shape(t, dims), "x")
        comp = b.build(xe.Reduce(x, xe.Parameter(b, 1, xe.Shape(t, ()), "init"), lambda a, c: xe.Add(a, c), reduced))
        n = int(np.prod(dims))
        for where in (0, n - 1, int(rng.integers(0, n))):
            # the smallest normal everywhere and one denormal (half of it): every sum is
            # exact in any order, and tells whether the denormal counted (the result is
            # normal, its flushing does not hide the difference)
            xv = np.full(n, tiny, dt)
            xv[where] = tiny / 2
            xv = xv.reshape(dims)
            for init in (0.0, -0.0, tiny / 2):
                for env in ("flush", "ieee"):
                    with xe.float_env(denormals=env):
                        want = comp.run(xv, dt.type(init))
                        got = comp.run(xv, dt.type(init), backend="numba")
                    np.testing.assert_array_equal(_bits(got), _bits(want), err_msg=f"{dims} {where} {init} {env}")


def test_reduce_window_sum_flushes_a_large_operand_after_a_scan_in_threads():
    """A large ReduceWindow operand is scanned for denormals in threads (the kernel does
    the executor's flushing): one found is flushed, as the reference does."""
    tiny = np.finfo(np.float32).tiny
    b = xe.XlaBuilder("pool")
    x = xe.Parameter(b, 0, xe.Shape("f32", (2, 600, 300)), "x")
    comp = b.build(xe.ReduceWindow(x, np.float32(0), lambda a, c: xe.Add(a, c), (1, 3, 3), (1, 2, 2),
                                   padding=[(0, 0), (1, 1), (1, 1)]))
    for where in (None, 0, 2 * 600 * 300 - 1, 123457):
        xv = np.full(2 * 600 * 300, tiny, np.float32)   # exact sums in any order (see above)
        if where is not None:
            xv[where] = tiny / 2
        xv = xv.reshape(2, 600, 300)
        for env in ("flush", "ieee"):
            with xe.float_env(denormals=env):
                want = comp.run(xv)
                got = comp.run(xv, backend="numba")
            np.testing.assert_array_equal(_bits(got), _bits(want), err_msg=f"{where} {env}")


def _fmax_np(a, b, is_max):
    """scalar_lib.fmax / fmin element-wise in NumPy (the rules, bit for bit): a NaN wins,
    the first of two; +0.0 above -0.0."""
    with np.errstate(invalid="ignore"):
        r = np.where(a > b, a, b) if is_max else np.where(a < b, a, b)
        neg_a = np.signbit(a)
        tie = (neg_a == is_max)   # max: b if a is -0.0; min: a if a is -0.0
        r = np.where(a == b, np.where(tie, b, a) if is_max else np.where(neg_a, a, b), r)
        r = np.where(np.isnan(b), b, r)
        return np.where(np.isnan(a), a, r)


def _flush_np(x):
    tiny = np.finfo(x.dtype).tiny
    return np.where((np.abs(x) < tiny) & (x != 0), np.copysign(0, x), x).astype(x.dtype)


@pytest.mark.parametrize("t", ["f32", "f64"])
@pytest.mark.parametrize("name", ["max", "min"])
def test_column_maximum_keeps_the_sequential_folds_bits(t, name):
    """Reduce maximum / minimum along a major dimension (B > 1) folds rows with NumPy's
    maximum / minimum (vectorised), and rows with a zero result again with fmax / fmin:
    the bits of fmax's fold over the rows in order from the init -- the NaN payload it
    keeps (the first NaN), +-0, infinities, denormals flushed or not -- for columns wider
    and narrower than a vector, several kept dimensions on both sides."""
    rng = np.random.default_rng(6)
    dt = xe.Shape(t, ()).dtype
    op = xe.Max if name == "max" else xe.Min
    is_max = name == "max"
    for shape, axis in [((50, 37), 0), ((9, 3), 0), ((3, 40, 21), 1), ((30, 1000), 0), ((2, 1, 5), 0)]:
        b = xe.XlaBuilder("column_extreme")
        x = xe.Parameter(b, 0, xe.Shape(t, shape), "x")
        comp = b.build(xe.Reduce(x, xe.Parameter(b, 1, xe.Shape(t, ()), "init"), lambda a, c: op(a, c), [axis]))
        for kind in ["zeros", "specials", "all equal", "zero maximum", "normal", "denormals", "negative NaN"]:
            xv = _values(rng, "f32", shape, kind).astype(dt)
            if t == "f64" and kind == "denormals":
                xv = np.where(np.abs(xv) < 1e-30, xv * 1e-280, xv)   # f64 denormals
            if not is_max:
                xv = -xv
            for init in (-np.inf, np.inf, 0.0, -0.0, np.nan):
                for env in ("flush", "ieee"):
                    src = _flush_np(xv) if env == "flush" else xv
                    acc = np.full(np.delete(np.array(shape), axis), init, dt)
                    acc = _flush_np(acc) if env == "flush" else acc
                    for r in range(shape[axis]):
                        acc = _fmax_np(acc, np.take(src, r, axis=axis), is_max)
                    with xe.float_env(denormals=env):
                        want = comp.run(xv, dt.type(init))
                        got = comp.run(xv, dt.type(init), backend="numba")
                    np.testing.assert_array_equal(_bits(got), _bits(acc), err_msg=f"{shape} {kind} {init} {env}")
                    nan = np.isnan(want)
                    np.testing.assert_array_equal(np.isnan(got), nan)
                    np.testing.assert_array_equal(_bits(got)[~nan], _bits(want)[~nan])


@pytest.mark.parametrize("t", ["f32", "f64"])
@pytest.mark.parametrize("name", ["max", "min"])
def test_maximum_under_flushing_reads_its_operand_once(t, name, monkeypatch):
    """Under flushing a maximum / minimum folds its operand unflushed and flushes and folds
    again only for a zero or denormal result: bit for bit (NaN payloads too) what flushing
    first gives (``_ONE_PASS_PICK`` off), along rows and columns, large operands (cut in
    parts, threads) and small, denormals where they decide the result and where not."""
    rng = np.random.default_rng(7)
    dt = xe.Shape(t, ()).dtype
    tiny = np.finfo(dt).tiny
    op = xe.Max if name == "max" else xe.Min
    for shape, axis in [((6, 33), 1), ((40, 300), 0), ((1, 300000), 1), ((2100, 130), 0), ((3, 5, 7), 2)]:
        b = xe.XlaBuilder("extreme")
        x = xe.Parameter(b, 0, xe.Shape(t, shape), "x")
        comp = b.build(xe.Reduce(x, xe.Parameter(b, 1, xe.Shape(t, ()), "init"), lambda a, c: op(a, c), [axis]))
        for kind in ["specials", "zero maximum", "normal", "denormals", "negative NaN", "tiny"]:
            if kind == "tiny":   # denormals and the smallest normals of both signs
                xv = rng.choice([tiny, -tiny, tiny / 2, -tiny / 4, 0.0], shape).astype(dt)
            else:
                xv = _values(rng, "f32", shape, kind).astype(dt)
            if t == "f64" and kind == "denormals":
                xv = np.where(np.abs(xv) < 1e-30, xv * 1e-280, xv)
            for init in (-np.inf, np.inf, -0.0, dt.type(tiny / 2), np.nan):
                outs = []
                for one_pass in (True, False):
                    monkeypatch.setattr(kred, "_ONE_PASS_PICK", one_pass)
                    with xe.float_env(denormals="flush"):
                        outs.append(comp.run(xv, dt.type(init), backend="numba"))
                np.testing.assert_array_equal(_bits(outs[0]), _bits(outs[1]), err_msg=f"{shape} {kind} {init}")
                with xe.float_env(denormals="flush"):
                    want = comp.run(xv, dt.type(init))
                nan = np.isnan(want)
                np.testing.assert_array_equal(np.isnan(outs[0]), nan)
                np.testing.assert_array_equal(_bits(outs[0])[~nan], _bits(want)[~nan], err_msg=f"{shape} {kind}")


@pytest.mark.parametrize("t", ["f32", "f64", "s32"])
@pytest.mark.parametrize("name", ["max", "min"])
def test_whole_row_maximum_folds_each_row_as_fold_does(t, name):
    """``_arb_chunk``'s whole rows of a maximum / minimum (``_max_rows``: the key view made
    once per chunk) give ``_fold``'s bits row by row -- NaN payloads, +-0, infinities,
    rows shorter and longer than 32, with and without the init."""
    from numba import njit

    @njit(error_model="numpy")
    def fold_rows(code, x, A, R, s, init, use_init, out, lanes):   # the row loop it replaced
        for r in range(A):
            acc = init if use_init else x[r * R]
            out[r] = kred._fold(code, x, r * R + s, (r + 1) * R, acc, lanes)

    rng = np.random.default_rng(8)
    dt = xe.Shape(t, ()).dtype
    code = kred.MAX if name == "max" else kred.MIN
    for R, A in ((1, 40), (2, 40), (31, 40), (32, 40), (33, 40), (256, 40), (1000, 40), (33, 1), (100, 39), (64, 3),
                 (1024, 5), (1025, 4), (3001, 3)):
        # (odd row counts: the rows go in pairs, the last one alone; rows from
        # ``_MAX_PAIR_MIN`` = 1024 on are read two a loop, the first element of a row
        # without the init not: 1025)
        for kind in (["ints"] if t == "s32" else ["zeros", "specials", "all equal", "zero maximum", "normal",
                                                  "denormals", "negative NaN"]):
            x = _values(rng, t if t == "s32" else "f32", (A, R), kind).astype(dt).reshape(-1)
            for use_init in (True, False):
                for init in ([dt.type(-2), dt.type(5)] if t == "s32" else
                             [dt.type(-np.inf), dt.type(0.0), dt.type(-0.0), dt.type(np.nan)]):
                    out = np.empty(A, dt)
                    kred._arb_chunk(0, A, x, A, R, 1, 1, code, init, use_init, out, dt.type(0), np.zeros(A, np.bool_))
                    lanes = np.empty(max(16, R // 2 + 1), dt)
                    s = 0 if use_init else 1
                    want = np.empty(A, dt)
                    fold_rows(code, x, A, R, s, init, use_init, want, lanes)
                    np.testing.assert_array_equal(_bits(out), _bits(want), err_msg=f"{R} {kind} {use_init} {init}")
                    # (a thread's part of the rows: [lo, hi) with lo > 0 keeps each row's bits)
                    half = np.empty(A, dt)
                    for lo, hi in ((0, A // 2), (A // 2, A)):
                        kred._arb_chunk(lo, hi, x, A, R, 1, 1, code, init, use_init, half, dt.type(0),
                                        np.zeros(A, np.bool_))
                    np.testing.assert_array_equal(_bits(half), _bits(want), err_msg=f"{R} {kind} halves")


@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_jax_argmax_reads_its_iota_as_one_line(name):
    """JAX's argmax broadcasts an iota along the reduced dimension: the run plan makes it
    once, as a read-only broadcast of one line, and the kernel reads that line for every
    row (rows, middle dimensions: columns, and sizes 1 along either).  The later runs (the
    plan's) give the reference's bits, over ties, NaNs and infinities."""
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    rng = np.random.default_rng(7)
    fn = getattr(jnp, name)
    for shape, axis in [((7, 300), 1), ((5, 1), 1), ((1, 65), 1), ((300, 7), 0), ((6, 40, 9), 1), ((3, 33, 300), 1),
                        ((4, 5, 70), 2)]:
        f = (lambda a: lambda x: fn(x, axis=a))(axis)
        x = rng.choice(np.array([0.0, -0.0, 1.0, -1.0, 2.0, np.inf, -np.inf], np.float32), shape)
        comp = xe.from_jax(f, x)
        for kind in ("ties", "normal", "nan"):
            if kind == "normal":
                x = rng.standard_normal(shape).astype(np.float32)
            elif kind == "nan":
                x = _one_nan(rng.standard_normal(shape).astype(np.float32), rng)
            want = comp.run(x)
            for _ in range(3):   # the first run walks the plan, the later ones run its program
                got = comp.run(x, backend="numba")
                np.testing.assert_array_equal(got, want, err_msg=f"{shape} {axis} {kind}")
                np.testing.assert_array_equal(got, np.asarray(jax.jit(f)(x)), err_msg=f"{shape} {axis} {kind}")
        if shape[axis] > 1 and x.size > shape[axis]:   # (else JAX reshapes its iota: nothing to share)
            labels = [label for c in comp.computations for p in c.__dict__.get("_numba_programs", {}).values()
                      for label in p.labels]
            assert any("made once" in label for label in labels), (shape, labels)


def test_shared_index_line_only_for_broadcast_views():
    """``_shared_line``: an index operand with zero strides along the kept dimensions is
    one line; a contiguous one (even if equal along rows) is not."""
    line = np.arange(5, dtype=np.int32)
    view = np.broadcast_to(line, (3, 5))
    np.testing.assert_array_equal(kred._shared_line(view, frozenset([1])), line)
    assert kred._shared_line(view.copy(), frozenset([1])) is None
    assert kred._shared_line(view, frozenset([0])) is None
    col = np.broadcast_to(line[None, :, None], (2, 5, 4))
    np.testing.assert_array_equal(kred._shared_line(col, frozenset([1])), line)


@pytest.mark.parametrize("t", ["f32", "f64"])
def test_checked_sum_finds_exactly_the_nonzero_denormals(t):
    """``_sum_checked``'s integer test (the magnitude's bits less one, an unsigned minimum)
    against NumPy's 0 < |x| < tiny, for every value at the edge (the smallest normal, the
    largest and smallest denormal, both signs, zeros, infinities, NaNs) at every place of
    rows of several lengths (the vector loop and its tail); its sum keeps the bits of the
    float test's loop (the same vectorised pairing)."""
    import numba as nb

    dt = xe.Shape(t, ()).dtype
    tiny = dt.type(np.finfo(dt).tiny)

    float_test = kred._sum_checked_other   # the float test's loop, as the kernels had it

    @nb.njit
    def checked(xs, acc, tiny):
        return kred._sum_checked(xs, acc, kred._low_bits(xs, tiny))

    @nb.njit
    def below(xs, tiny):  # the column fold's check of each row
        bits, mag = kred._check_bits(xs)
        return kred._denormal_below(bits, mag, kred._low_bits(xs, tiny))

    small = np.nextafter(dt.type(0), dt.type(1))
    edges = [tiny, -tiny, np.nextafter(tiny, dt.type(0)), -np.nextafter(tiny, dt.type(0)), small, -small,
             dt.type(0.0), dt.type(-0.0), dt.type(np.inf), dt.type(-np.inf), dt.type(np.nan), -dt.type(np.nan),
             np.nextafter(tiny, dt.type(1))]
    rng = np.random.default_rng(11)
    for n in (1, 2, 7, 8, 9, 31, 33, 64, 67):
        base = rng.standard_normal(n).astype(dt)
        for v in edges:
            for i in range(n):
                xs = base.copy()
                xs[i] = v
                acc = dt.type(rng.standard_normal())
                got_sum, got_den = checked(xs, acc, tiny)
                want_sum, want_den = float_test(xs, acc, tiny)
                assert got_den == bool(((np.abs(xs) < tiny) & (xs != 0)).any()), (n, v, i)
                assert got_den == want_den == below(xs, tiny)
                assert _bits(got_sum) == _bits(want_sum) or (np.isnan(got_sum) and np.isnan(want_sum)), (n, v, i)
    for n in (0, 1, 5, 1000, 4099):  # no denormal
        xs = rng.standard_normal(n).astype(dt)
        got, want = checked(xs, dt.type(0.5), tiny), float_test(xs, dt.type(0.5), tiny)
        assert not got[1] and _bits(got[0]) == _bits(want[0])


@pytest.mark.parametrize("t", ["f32", "f64", "s32", "s64"])
def test_row_sums_in_pairs_keep_the_one_row_loops_bits(t):
    """``_arb_chunk`` sums whole rows two at a time (``_sum_pair``: one loop, two streams):
    each row's sum must keep the bits of ``_sum_range`` / ``_sum_checked`` on that row alone
    (LLVM's vector lanes, their join, the tail) at every length, with and without the init,
    odd and even row counts; under flushing (``tiny``) the denormal flags still find every
    row pair with a denormal, and none without."""
    import numba as nb

    dt = xe.Shape(t, ()).dtype
    flt = dt.kind == "f"

    @nb.njit
    def pair(r0, r1, a, b):
        return kred._sum_pair(r0, r1, a, b)

    @nb.njit
    def one(r, a):
        return kred._sum_range(r, a)

    @nb.njit(error_model="numpy")
    def rows_alone(x, A, R, s, init, use_init, out, tiny):   # the row loop the pairs replaced
        low = kred._low_bits(x, tiny) if tiny > 0 else kred._low_bits(x, 1)
        den = False
        for r in range(A):
            acc = init if use_init else x[r * R]
            if tiny > 0:
                out[r], d = kred._sum_checked(x[r * R + s:(r + 1) * R], acc, low)
                den |= d | ((abs(acc) < tiny) & (acc != 0))
            else:
                out[r] = kred._sum_range(x[r * R + s:(r + 1) * R], acc)
        return den

    rng = np.random.default_rng(12)

    def values(n):
        if not flt:
            return rng.integers(-1000, 1000, n).astype(dt)
        # magnitudes over many orders: the order of the additions shows in the bits
        return (rng.standard_normal(n) * 10.0 ** rng.uniform(-6, 6, n)).astype(dt)

    for n in list(range(0, 130)) + [255, 256, 257, 1000, 2895, 4099]:
        r0, r1 = values(n), values(n)
        a, b = values(1)[0], values(1)[0]
        got = pair(r0, r1, a, b)
        assert _bits(got[0]) == _bits(one(r0, a)) and _bits(got[1]) == _bits(one(r1, b)), n
    tiny = dt.type(np.finfo(dt).tiny) if flt else dt.type(0)
    for A, R in ((1, 5), (2, 33), (3, 64), (7, 100), (8, 1), (5, 2), (40, 257)):
        for use_init in (True, False):
            for den_row in ([None, 0, A - 1, A // 2] if flt else [None]):
                x = values(A * R)
                if den_row is not None:
                    x[den_row * R + int(rng.integers(0, R))] = tiny / 4
                init = values(1)[0]
                for check in ((0, tiny) if flt else (0,)):
                    out = np.empty(A, dt)
                    den = np.zeros(A, np.bool_)
                    kred._arb_chunk(0, A, x, A, R, 1, 1, kred.ADD, init, use_init, out, dt.type(check), den)
                    want = np.empty(A, dt)
                    want_den = rows_alone(x, A, R, 0 if use_init else 1, init, use_init, want, dt.type(check))
                    np.testing.assert_array_equal(_bits(out), _bits(want), err_msg=f"{A} {R} {use_init} {check}")
                    if check:
                        assert bool(den.any()) == want_den == (den_row is not None), (A, R, use_init, den_row)


@pytest.mark.parametrize("t", ["f32", "f64", "s32"])
def test_column_folds_two_rows_at_a_time_keep_the_sequential_bits(t):
    """A fold across rows (x[A, R, B] over R) combines two rows in one loop (``_rows2``):
    each result must be the row-by-row fold's, in order -- (acc + x[r]) + x[r + 1] -- for
    every combiner, odd and even row counts, with and without the init, NaNs, zeros of both
    signs; a float sum under flushing still reports a denormal in either row of a pair."""
    dt = xe.Shape(t, ()).dtype
    flt = dt.kind == "f"
    rng = np.random.default_rng(13)

    def xmax(a, b):   # XLA's maximum: a NaN wins (a's first), +0.0 above -0.0
        r = np.where(a == b, np.where(np.signbit(a), b, a), np.maximum(a, b))
        return np.where(np.isnan(a), a, np.where(np.isnan(b), b, r))

    def xmin(a, b):
        r = np.where(a == b, np.where(np.signbit(a), a, b), np.minimum(a, b))
        return np.where(np.isnan(a), a, np.where(np.isnan(b), b, r))

    ops = {kred.ADD: np.add, kred.MUL: np.multiply, kred.MAX: xmax if flt else np.maximum,
           kred.MIN: xmin if flt else np.minimum}
    if not flt:
        ops.update({kred.AND: np.bitwise_and, kred.OR: np.bitwise_or, kred.XOR: np.bitwise_xor})
    for A, R, B in ((1, 7, 33), (3, 6, 17), (2, 1, 5), (4, 2, 64), (1, 101, 9), (2, 3, 1000)):
        for kind in ("normal", "zeros", "nan") if flt else ("ints",):
            if flt:
                x = (rng.standard_normal((A, R, B)) * 10.0 ** rng.uniform(-4, 4, (A, R, B))).astype(dt)
                if kind == "zeros":
                    x[rng.random(x.shape) < 0.5] = 0.0
                    x[rng.random(x.shape) < 0.3] = -0.0
                if kind == "nan":
                    x[rng.random(x.shape) < 0.1] = np.nan
            else:
                x = rng.integers(-50, 50, (A, R, B)).astype(dt)
            for code, op in ops.items():
                for use_init in (True, False):
                    init = dt.type(1 if code == kred.MUL else (-3 if code in (kred.AND,) else 0))
                    acc = np.broadcast_to(init, (A, B)).copy() if use_init else x[:, 0].copy()
                    for r in range(0 if use_init else 1, R):
                        acc = op(acc, x[:, r])
                    flat = x.reshape(-1)
                    out = np.empty(A * B, dt)
                    kred.reduce_arb(flat, A, R, B, 1, code, init, use_init, out)
                    nan = np.isnan(acc) if flt else np.zeros(acc.shape, bool)
                    got = out.reshape(A, B)
                    np.testing.assert_array_equal(np.isnan(got) if flt else nan, nan)
                    np.testing.assert_array_equal(_bits(got)[~nan], _bits(acc)[~nan], err_msg=f"{A} {R} {B} {kind} {code}")
    if flt:   # the check of a pair's rows: a denormal in the second row of a pair, or the last row alone
        tiny = np.finfo(dt).tiny
        for R, row in ((6, 1), (6, 4), (7, 6), (7, 0), (2, 1)):
            x = np.full((1, R, 40), 1.0, dt)
            x[0, row, 17] = tiny / 8
            out = np.empty(40, dt)
            assert kred.reduce_arb(x.reshape(-1), 1, R, 40, 1, kred.ADD, dt.type(0), True, out, tiny=tiny), (R, row)
            x[0, row, 17] = 1.0
            assert not kred.reduce_arb(x.reshape(-1), 1, R, 40, 1, kred.ADD, dt.type(0), True, out, tiny=tiny)


def _xla_max(a, b, is_max=True):
    """XLA's maximum (minimum) element-wise: a NaN wins (a's first), +0.0 above -0.0."""
    if is_max:
        r = np.where(a == b, np.where(np.signbit(a), b, a), np.maximum(a, b))
    else:
        r = np.where(a == b, np.where(np.signbit(a), a, b), np.minimum(a, b))
    return np.where(np.isnan(a), a, np.where(np.isnan(b), b, r))


@pytest.mark.parametrize("t", ["f32", "f64", "s32"])
def test_few_long_column_folds_cut_in_column_blocks_keep_the_sequential_bits(t):
    """A fold of x[A, R, B] over R with A small, R short and B long runs blocks of columns as
    tasks (``_cols_chunk``, in threads): each column is still folded row after row from the
    init -- (acc + x[r]) + x[r + 1] -- so the bits (NaN payloads, zeros' signs) are the
    sequential fold's, blocks of any remainder, with and without the init."""
    dt = xe.Shape(t, ()).dtype
    flt = dt.kind == "f"
    rng = np.random.default_rng(21)
    ops = {kred.ADD: np.add, kred.MUL: np.multiply}
    if flt:
        ops.update({kred.MAX: _xla_max, kred.MIN: lambda a, b: _xla_max(a, b, False)})
    else:
        ops.update({kred.MAX: np.maximum, kred.MIN: np.minimum, kred.AND: np.bitwise_and,
                    kred.OR: np.bitwise_or, kred.XOR: np.bitwise_xor})
    for A, R, B in ((1, 64, 4100), (3, 5, 17477), (1, 2, 131085), (2, 9, 16400)):
        assert A * R * B >= kred.MOVE_PARALLEL_THRESHOLD
        for kind in ("normal", "zeros", "nan") if flt else ("ints",):
            if flt:
                x = (rng.standard_normal((A, R, B)) * 10.0 ** rng.uniform(-3, 3, (A, R, B))).astype(dt)
                if kind == "zeros":
                    x[rng.random(x.shape) < 0.5] = 0.0
                    x[rng.random(x.shape) < 0.3] = -0.0
                if kind == "nan":   # NaNs of distinct payloads: which one a column keeps shows
                    m = rng.random(x.shape) < 0.05
                    x[m] = np.nan
                    x.view(f"u{dt.itemsize}")[m] |= rng.integers(1, 1000, int(m.sum())).astype(f"u{dt.itemsize}")
            else:
                x = rng.integers(-50, 50, (A, R, B)).astype(dt)
            for code, op in ops.items():
                for use_init in (True, False):
                    init = dt.type(1 if code == kred.MUL else (-3 if code == kred.AND else 0))
                    acc = np.broadcast_to(init, (A, B)).copy() if use_init else x[:, 0].copy()
                    for r in range(0 if use_init else 1, R):
                        acc = op(acc, x[:, r])
                    got = kred._arb_pass(x.reshape(-1), A, R, B, code, init, use_init).reshape(A, B)
                    # the one-task fold of whole rows, bit for bit (NaN payloads too)
                    one = np.empty(A * B, dt)
                    kred.reduce_arb(x.reshape(-1), A, R, B, 1, code, init, use_init, one)
                    msg = f"{A} {R} {B} {kind} {code} {use_init}"
                    np.testing.assert_array_equal(_bits(got), _bits(one.reshape(A, B)), err_msg=msg)
                    # NumPy's sequential fold: every bit for maximum / minimum; a sum's or a
                    # product's NaN payload is the vector unit's (operands swapped)
                    nan = np.isnan(acc) if flt and code in (kred.ADD, kred.MUL) else np.zeros(acc.shape, bool)
                    np.testing.assert_array_equal(np.isnan(got) if flt else nan, np.isnan(acc) if flt else nan)
                    np.testing.assert_array_equal(_bits(got)[~nan], _bits(acc)[~nan], err_msg=msg)


@pytest.mark.parametrize("t", ["f32", "f64", "s32", "u8", "pred"])
@pytest.mark.parametrize("name", ["max", "min", "and", "add"])
def test_order_free_reduces_fold_the_earlier_reduced_dimension_first(t, name):
    """A maximum / minimum (and the bitwise ops, integer sums) over several dimensions whose
    last reduced dimension is short rows folds an earlier reduced dimension first
    (``_next_group``): the same bits as the plain order -- the reference's, and NaN
    payloads (a float result holding a NaN is reduced again in the plain order), zeros of
    both signs, the init -- over shapes with the rows long and short, kept dimensions
    between and after; float sums keep the plain order (their rounding)."""
    if name == "and" and t in ("f32", "f64"):
        pytest.skip("no bitwise and on floats")
    dt = xe.Shape(t, ()).dtype
    rng = np.random.default_rng(22)
    op = {"max": xe.Max, "min": xe.Min, "and": xe.And, "add": xe.Add}[name]
    code = {"max": kred.MAX, "min": kred.MIN, "and": kred.AND, "add": kred.ADD}[name]
    if t == "pred":
        code = kred._PRED_CODES.get(code, code)
    cases = [((64, 32, 128), (0, 2)), ((5, 3, 7, 9), (0, 2, 3)), ((3, 4, 70, 40), (1, 3)), ((2, 64, 2000), (0, 2)),
             ((6, 2, 5, 6), (0, 2)), ((40, 3, 33), (0, 1, 2))]
    for shape, dims in cases:
        groups = kred._reduce_groups(shape, frozenset(dims))
        moved = kred._next_group(list(groups), code, dt) != max(k for k, (_, r) in enumerate(groups) if r)
        b = xe.XlaBuilder("reduce_order")
        x = xe.Parameter(b, 0, xe.Shape(t, shape), "x")
        comp = b.build(xe.Reduce(x, xe.Parameter(b, 1, xe.Shape(t, ()), "init"), lambda a, c: op(a, c), list(dims)))
        kinds = ("normal", "zeros", "nan", "one nan") if dt.kind == "f" else ("ints",)
        for kind in kinds:
            if dt.kind == "f":
                xv = rng.standard_normal(shape).astype(dt)
                if kind == "zeros":
                    xv = rng.choice([0.0, -0.0, -1.0], shape).astype(dt)
                if kind in ("nan", "one nan"):
                    m = rng.random(shape) < (0.01 if kind == "nan" else 0.0)
                    m.reshape(-1)[rng.integers(0, m.size)] = True
                    xv[m] = np.nan
                    xv.view(f"u{dt.itemsize}")[m] |= rng.integers(1, 1000, int(m.sum())).astype(f"u{dt.itemsize}")
            elif t == "pred":
                xv = rng.random(shape) < 0.9
            else:
                xv = rng.integers(0, 200, shape).astype(dt) if t == "u8" else rng.integers(-99, 99, shape).astype(dt)
            for init in ((-np.inf, np.inf, -0.0) if dt.kind == "f" else (0, 1) if t == "pred" else (0, 3)):
                iv = dt.type(init)
                got = comp.run(xv, iv, backend="numba")
                want = comp.run(xv, iv)
                flat = np.asarray(xv).reshape(-1)
                plain = kred._reduce_standard(kred._to_carrier(flat, t), shape, dims, code,
                                              kred._to_carrier(np.asarray(iv), t)[()], None, False)
                plain = kred._from_carrier(plain, t).reshape(got.shape)
                # (a float sum's NaN payload: the vector unit's, not followed)
                keep = ~np.isnan(plain) if dt.kind == "f" and name == "add" else np.ones(plain.shape, bool)
                if dt.kind == "f":
                    np.testing.assert_array_equal(np.isnan(got), np.isnan(plain))
                np.testing.assert_array_equal(_bits(got)[keep], _bits(plain)[keep], err_msg=f"{shape} {dims} {kind} {init}")
                if dt.kind == "f" and name == "add":   # (a float sum's rounding is its own order's)
                    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
                elif dt.kind == "f":
                    nan = np.isnan(want)
                    np.testing.assert_array_equal(np.isnan(got), nan)
                    np.testing.assert_array_equal(_bits(got)[~nan], _bits(want)[~nan])
                else:
                    np.testing.assert_array_equal(got, want)
        if dt.kind == "f" and name == "add":
            assert not moved
        if shape == (64, 32, 128) and name != "add":
            assert moved


@pytest.mark.parametrize("axis", [0, 1])
def test_pred_argmax_of_jnp_select_is_recognised(axis, monkeypatch):
    """jnp.select folds its stacked conditions (pred) by JAX's argmax region: recognised
    (pred values as the bytes 0 and 1), the first true condition's index, 0 where none is
    true; the columns' fold (axis 0: jnp.select's) and the rows'; the reference's values,
    and the kernel's path taken (no region tree)."""
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    rng = np.random.default_rng(31)
    x = rng.standard_normal((5, 3000)).astype(np.float32) * 2
    x[:, :4] = [[3.0], [-3.0], [0.0], [np.nan], [0.5]] if axis == 0 else x[:, :4]
    stacked = lambda v: jnp.stack([v > 1, v < -1, v != v, v > 0.25]) if axis == 0 else v > 0.75  # noqa: E731
    comp = xe.from_jax(lambda v: jnp.argmax(stacked(v), axis=axis), x[0] if axis == 0 else x)
    arg = x[0] if axis == 0 else x
    seen = []
    real = kred._argminmax
    monkeypatch.setattr(kred, "_argminmax", lambda *a, **k: seen.append(1) or real(*a, **k))
    got = comp.run(arg, backend="numba")
    np.testing.assert_array_equal(got, comp.run(arg))
    assert seen
    sel = xe.from_jax(lambda v: jnp.select([v > 1, v < -1], [v, -v], 0.0), x[0])
    np.testing.assert_array_equal(sel.run(x[0], backend="numba"), sel.run(x[0]))


@pytest.mark.parametrize("t", ["f32", "f64"])
def test_parts_of_rows_have_the_same_bits_in_threads_or_not(t, monkeypatch):
    """A whole-array fold cut in parts (``row_parts``) runs them in threads from
    ``PARTS_PARALLEL`` elements on, in the calling thread below: the same parts, the
    same bits, sums and maxima (NaNs of distinct payloads among the values)."""
    dt = xe.Shape(t, ()).dtype
    x = (np.random.default_rng(9).standard_normal(600_000) * 1e3).astype(dt)
    with_nans = x.copy()
    m = np.zeros(x.size, bool)
    m[::977] = True
    with_nans[m] = np.nan
    with_nans.view(f"u{dt.itemsize}")[m] |= np.arange(1, int(m.sum()) + 1).astype(f"u{dt.itemsize}")
    for code, v in ((kred.ADD, x), (kred.MAX, with_nans)):
        for A, R in ((1, 600_000), (2, 300_000)):
            assert kred.row_parts(A, R, v.size) > 1 or kred.split_threads() == 1
            got = []
            for threshold in (0, 1 << 40):
                monkeypatch.setattr(kred, "PARTS_PARALLEL", threshold)
                got.append(kred._arb_pass(v, A, R, 1, code, dt.type(0), True))
            np.testing.assert_array_equal(_bits(got[0]), _bits(got[1]))
            if code == kred.ADD:
                np.testing.assert_allclose(got[0], v.reshape(A, R).sum(1, dtype=np.float64), rtol=1e-4)
            else:
                assert np.isnan(got[0]).all()
