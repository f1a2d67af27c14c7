"""ReduceWindow's standard-combiner kernels keep their bits on every path: the vectorised
maximum / minimum (``_vmax`` / ``_vmin``: fmax's / fmin's values, NaNs and signed zeros
included), the few-pass window fold (``_fold_cells``: cells in window order, then the
start), long rows cut into chunks in threads (``_row_chunks``) and blocks of channels
(NHWC) folded from the init value.  The expected bits come from NumPy models of the
kernels' orders (the separable padded fold; the row-major fold from init), the values
from the reference where the order does not matter (maxima, minima, integers)."""
import itertools

import numpy as np
import pytest

import xla_explorer as xe

numba = pytest.importorskip("numba")

from xla_explorer.executors.cpu import reduction as R  # noqa: E402
from xla_explorer.executors.scalar_lib import fmax, fmin  # noqa: E402

SPECIAL = [0.0, -0.0, 1.0, -1.0, 2.5, np.inf, -np.inf, np.nan, -np.nan, 1e-40, -1e-40]
COMBINE = {"add": xe.Add, "max": xe.Max, "min": xe.Min, "mul": xe.Mul}


def _specials(dt):
    v = np.array(SPECIAL, dt)
    # a NaN with a payload and a signalling NaN: which NaN comes out is part of the bits
    nans = {np.float32: ([0x7fc00123, 0x7f800001], np.uint32), np.float64: ([0x7ff8000000000123, 0x7ff0000000000001],
                                                                              np.uint64)}[dt]
    return np.concatenate([v, np.array(nans[0], nans[1]).view(dt)])


def _bits(a):
    a = np.asarray(a)
    return a.dtype, a.shape, a.tobytes()


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.int32, np.int64, np.uint8])
def test_vectorised_max_min_are_fmax_fmin_bit_for_bit(dt):
    if np.dtype(dt).kind == "f":
        v = _specials(dt)
    else:
        info = np.iinfo(dt)
        v = np.array([0, 1, 2, info.min, info.max, info.max - 1, info.min + 1], dt)
    a, b = np.repeat(v, len(v)), np.tile(v, len(v))
    out = _both(a, b)
    assert out[0].tobytes() == out[1].tobytes()
    assert out[2].tobytes() == out[3].tobytes()


@numba.njit
def _seq_fold(code, cells, os, fresh, use_start, start):
    """Cell by cell in window order, then the start: the order ``_fold_cells`` keeps (in
    compiled code, as the kernels combine: a signalling NaN stays signalling)."""
    out = os.copy()
    for j in range(os.shape[0]):
        acc = os[j]
        first = fresh
        for w in range(cells.shape[0]):
            c = cells[w, j]
            if first:
                acc = c
                first = False
            else:
                acc = R._combine(code, acc, c)
        if use_start:
            acc = start if first else R._combine(code, acc, start)
        elif first:
            acc = start
        out[j] = acc
    return out


@numba.njit
def _both(a, b):   # in compiled code (a call from Python would quieten a signalling NaN)
    out = np.empty((4, a.shape[0]), a.dtype)
    for i in range(a.shape[0]):
        out[0, i], out[1, i] = R._vmax(a[i], b[i]), fmax(a[i], b[i])
        out[2, i], out[3, i] = R._vmin(a[i], b[i]), fmin(a[i], b[i])
    return out


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.int32])
@pytest.mark.parametrize("nv", range(8))
def test_fold_cells_every_window_length(dt, nv):
    rng = np.random.default_rng(nv)
    n = 37
    if np.dtype(dt).kind == "f":
        src = rng.standard_normal(n + 24).astype(dt)
        sp = _specials(dt)
        src[rng.integers(0, src.size, 12)] = sp[rng.integers(0, sp.size, 12)]
        codes = [R.ADD, R.MUL, R.MAX, R.MIN]
    else:
        src = rng.integers(-9, 9, n + 24).astype(dt)
        codes = [R.ADD, R.MUL, R.MAX, R.MIN, R.XOR, R.AND]
    bases = np.array(rng.integers(0, 20, max(nv, 1)), np.int64)
    for code, fresh, use_start in itertools.product(codes, (True, False), (True, False)):
        ident = R._identity(code, np.dtype(dt))
        start = dt(1.5) if np.dtype(dt).kind == "f" else dt(3)
        os = rng.standard_normal(n).astype(dt) if np.dtype(dt).kind == "f" else rng.integers(-9, 9, n).astype(dt)
        cells = np.array([src[bases[w] + 2:bases[w] + 2 + n] for w in range(nv)], dt).reshape(nv, n)
        got = os.copy()
        with np.errstate(all="ignore"):
            want = _seq_fold(code, cells, os, fresh, use_start, start)
            R._fold_cells(code, src, bases, 2, nv, got, fresh, use_start, start, ident)
        assert got.tobytes() == want.tobytes(), (code, fresh, use_start)


@numba.njit
def _each(code, a, b):
    out = np.empty_like(a)
    for i in range(a.size):
        out[i] = R._combine(code, a[i], b[i])
    return out


def _compiled(code):
    """fmax / fmin element-wise in compiled code (a signalling NaN stays signalling)."""
    def op(a, b):
        a, b = np.broadcast_arrays(a, b)
        return _each(code, np.ascontiguousarray(a).reshape(-1), np.ascontiguousarray(b).reshape(-1)).reshape(a.shape)
    return op


def _op_ident(name, dt):
    dt = np.dtype(dt)
    if dt.kind == "f":
        return {"add": (np.add, dt.type(-0.0)), "max": (_compiled(R.MAX), dt.type(-np.inf)),
                "min": (_compiled(R.MIN), dt.type(np.inf)), "mul": (np.multiply, dt.type(1))}[name]
    info = np.iinfo(dt)
    return {"add": (np.add, dt.type(0)), "max": (np.maximum, dt.type(info.min)), "min": (np.minimum, dt.type(info.max)),
            "mul": (np.multiply, dt.type(1))}[name]


def _padded_fold(x, wd, ws, pads, bd, wdl, op, ident, start, use_start):
    """The separable kernels' order: one pass per windowed dimension, the last first, each
    folding its window's cells in order over the row dilated and padded with the identity
    (negative padding crops); the start combined last in the last pass."""
    dims = [d for d in range(x.ndim) if not (wd[d] == 1 and ws[d] == 1 and tuple(pads[d]) == (0, 0) and bd[d] == 1)]
    cur = x
    for k, d in enumerate(reversed(dims or [0])):
        n = cur.shape[d]
        shape = list(cur.shape)
        shape[d] = (n - 1) * bd[d] + 1 if n else 0
        dil = np.full(shape, ident, x.dtype)
        idx = [slice(None)] * x.ndim
        idx[d] = slice(0, None, bd[d])
        dil[tuple(idx)] = cur
        lo, hi = pads[d]
        width = [(0, 0)] * x.ndim
        width[d] = (max(lo, 0), max(hi, 0))
        p = np.pad(dil, width, constant_values=ident)
        crop = [slice(None)] * x.ndim
        crop[d] = slice(max(-lo, 0), p.shape[d] - max(-hi, 0))
        p = p[tuple(crop)]
        span = (wd[d] - 1) * wdl[d] + 1
        m = (p.shape[d] - span) // ws[d] + 1
        take = lambda w: np.take(p, np.arange(m) * ws[d] + w * wdl[d], axis=d)  # noqa: E731
        acc = take(0)
        for w in range(1, wd[d]):
            acc = op(acc, take(w))
        if k == len(dims or [0]) - 1 and use_start:
            acc = op(acc, np.full_like(acc, start))
        cur = acc.astype(x.dtype)
    return cur


def _values(rng, t, dims, specials=True):
    dt = np.dtype(xe.Shape(t, ()).dtype)
    if dt.kind != "f":
        return rng.integers(-50, 50, dims).astype(dt)
    x = (rng.standard_normal(dims) * 10.0 ** rng.integers(-3, 4, dims)).astype(dt)
    if specials and x.size:
        f = x.reshape(-1)
        sp = _specials(dt.type)
        k = rng.integers(0, f.size, max(1, f.size // 40))
        f[k] = sp[rng.integers(0, sp.size, k.size)]
    return x


def _rw(dims, t, name, init, wd, ws, pad, bd=None, wdl=None):
    b = xe.XlaBuilder("rw")
    x = xe.Parameter(b, 0, xe.Shape(t, tuple(dims)), "x")
    return b.build(xe.ReduceWindow(x, xe.Constant(b, np.array(init, dtype=xe.Shape(t, ()).dtype)),
                                   lambda a, c: COMBINE[name](a, c), wd, ws, pad, bd, wdl))


LONG = R._LONG_ROW + 1234   # rows long enough for ``_row_chunks``


@pytest.mark.parametrize("t, name, init", [("f32", "add", 0.0), ("f32", "add", -0.0), ("f32", "add", 1.5),
                                           ("f64", "add", 0.0), ("f32", "max", -np.inf), ("f32", "min", 0.5),
                                           ("f32", "mul", 1.0), ("s32", "add", 3), ("s32", "max", -7)])
@pytest.mark.parametrize("lead", [(), (3,)])
def test_long_rows_have_the_padded_folds_bits(t, name, init, lead):
    """Moving windows along long contiguous rows (strides 1-3, padding of both signs, base
    and window dilation): the padded fold's bits, whether the results read the operand in
    place or through scratch, one row or several, in threads."""
    rng = np.random.default_rng(len(lead) * 7 + len(name))
    dims = lead + (LONG,)
    x = _values(rng, t, dims, specials=name != "mul")
    op, ident = _op_ident(name, x.dtype)
    start = x.dtype.type(init)
    use_start = ident.tobytes() != start.tobytes()
    k = len(lead)
    for w, s, pad, bd, wdl in ((5, 1, (0, 0), 1, 1), (2, 1, (1, 0), 1, 1), (3, 2, (1, 1), 1, 1), (7, 3, (2, 5), 1, 1),
                               (4, 1, (-2, 3), 1, 1), (3, 1, (1, 1), 2, 1), (3, 2, (0, 0), 1, 3), (1, 2, (0, 0), 1, 1),
                               (15, 1, (7, 7), 1, 1)):
        wd, ws = (1,) * k + (w,), (1,) * k + (s,)
        pads, bds, wdls = ((0, 0),) * k + (pad,), (1,) * k + (bd,), (1,) * k + (wdl,)
        comp = _rw(dims, t, name, init, wd, ws, list(pads), list(bds), list(wdls))
        with np.errstate(all="ignore"):
            want = _padded_fold(x, wd, ws, pads, bds, wdls, op, ident, start, use_start)
        got = comp.run(x, backend="numba", denormals="ieee")
        assert _bits(got) == _bits(want), (w, s, pad, bd, wdl)
        if name in ("max", "min") or t == "s32":
            # (the reference's values; which NaN it keeps is its own)
            np.testing.assert_array_equal(got, comp.run(x, denormals="ieee"))


def test_long_rows_then_a_major_pass():
    """A 2-D window whose last pass reads long rows made by the first: pass by pass, the
    padded fold's bits."""
    rng = np.random.default_rng(2)
    dims = (6, LONG)
    x = _values(rng, "f32", dims)
    comp = _rw(dims, "f32", "add", 0.0, (3, 4), (2, 1), [(1, 1), (2, 1)])
    op, ident = _op_ident("add", np.float32)
    want = _padded_fold(x, (3, 4), (2, 1), ((1, 1), (2, 1)), (1, 1), (1, 1), op, ident, np.float32(0), True)
    assert _bits(comp.run(x, backend="numba", denormals="ieee")) == _bits(want)


def _row_major_fold(x, C, wd, ws, pads, bd, wdl, op, init):
    """The blocks-of-C kernel's order: each result is init combined with its window's real
    cells (no padding, no holes) in row-major window order."""
    k = x.ndim - 1
    out_dims = []
    for d in range(k):
        n = x.shape[d]
        dil = (n - 1) * bd[d] + 1 + pads[d][0] + pads[d][1]
        out_dims.append((dil - ((wd[d] - 1) * wdl[d] + 1)) // ws[d] + 1)
    acc = np.full(tuple(out_dims) + (C,), init, x.dtype)
    grids = np.meshgrid(*[np.arange(o) for o in out_dims], indexing="ij")
    for cell in itertools.product(*[range(w) for w in wd[:k]]):
        valid = np.ones(tuple(out_dims), bool)
        idx = []
        for d in range(k):
            q = grids[d] * ws[d] + cell[d] * wdl[d] - pads[d][0]
            ok = (q >= 0) & (q <= (x.shape[d] - 1) * bd[d]) & (q % bd[d] == 0)
            valid &= ok
            idx.append(np.where(ok, q // bd[d], 0))
        vals = x[tuple(idx)]
        with np.errstate(all="ignore"):
            acc = np.where(valid[..., None], op(acc, vals), acc).astype(x.dtype)
    return acc


@pytest.mark.parametrize("t, name, init", [("f32", "add", 0.0), ("f32", "add", 2.0), ("f64", "add", -0.0),
                                           ("f32", "max", -np.inf), ("f32", "max", 0.0), ("f32", "min", np.inf),
                                           ("f64", "min", -0.0), ("s32", "max", -100), ("s32", "add", 1)])
@pytest.mark.parametrize("C", [8, 13, 32])
def test_channel_blocks_fold_from_init_in_window_order(t, name, init, C):
    """NHWC pooling (windows over major dimensions, C contiguous channels untouched): the
    row-major fold from init, NaNs and signed zeros as fmax / fmin have them."""
    rng = np.random.default_rng(C)
    x = _values(rng, t, (2, 23, 18, C))
    op, _ = _op_ident(name, x.dtype)
    for wd, ws, pads, bd, wdl in (((1, 3, 3), (1, 2, 2), ((0, 0), (1, 1), (0, 1)), (1, 1, 1), (1, 1, 1)),
                                  ((1, 2, 2), (1, 2, 2), ((0, 0), (0, 0), (0, 0)), (1, 1, 1), (1, 1, 1)),
                                  ((2, 3, 2), (1, 1, 3), ((1, 0), (2, -1), (1, 1)), (1, 2, 1), (1, 1, 2))):
        comp = _rw(x.shape, t, name, init, wd + (1,), ws + (1,), list(pads) + [(0, 0)], list(bd) + [1],
                   list(wdl) + [1])
        want = _row_major_fold(x, C, wd, ws, pads, bd, wdl, op, x.dtype.type(init))
        for _ in range(2):   # the walk, then the run plan
            assert _bits(comp.run(x, backend="numba", denormals="ieee")) == _bits(want), (wd, ws, pads)
        if name in ("max", "min") or t == "s32":
            np.testing.assert_array_equal(comp.run(x, denormals="ieee"), want)


@pytest.mark.parametrize("case", ["nhwc", "nchw", "long", "long2", "cumsum", "big-item", "small", "mul"])
@pytest.mark.parametrize("where", ["none", "one", "many"])
def test_denormal_operands_are_flushed_where_the_kernels_check_them(case, where):
    """Under flushing, a sum's operand is checked for denormals by the kernels as they read
    it (and the window run again on the flushed operand when one is found): the bits of
    the window of the flushed operand, flushed, on every path -- blocks of channels,
    separable items, long rows, a cumulative pass, a big item's rows, a prepared step."""
    from xla_explorer import fpenv
    rng = np.random.default_rng(len(case) + len(where))
    dims, wd, ws, pad, name = {
        "nhwc": ((4, 40, 40, 16), (1, 3, 3, 1), (1, 2, 2, 1), "SAME", "add"),
        "nchw": ((8, 4, 60, 60), (1, 1, 3, 3), (1, 1, 2, 2), "SAME", "add"),
        "long": ((2, LONG), (1, 5), (1, 1), "VALID", "add"),
        "long2": ((3, LONG), (2, 3), (1, 2), "SAME", "add"),
        "cumsum": ((64, 300), (1, 300), (1, 1), [(0, 0), (299, 0)], "add"),
        "big-item": ((700, 700), (3, 3), (2, 2), "SAME", "add"),
        "small": ((2, 9, 9), (1, 3, 3), (1, 2, 2), "SAME", "add"),
        "mul": ((4, 40, 40, 16), (1, 2, 2, 1), (1, 2, 2, 1), "VALID", "mul"),
    }[case]
    x = rng.standard_normal(dims).astype(np.float32)
    f = x.reshape(-1)
    neutral, partner = (0.0, 1.2e-38) if name == "add" else (1.0, 1e5)
    step = dims[-1] if case in ("nhwc", "mul") else 1   # the next window position
    for k in {"none": [], "one": [f.size // 2 + 3], "many": list(range(f.size // 7, f.size - 2 * step, 20011))}[where]:
        # a denormal among neutral values, beside a value it changes: a result sees the flush
        for r in range(-2, 3):   # (and in the rows next to it, for windows across rows)
            c = k + r * dims[-1]
            f[max(0, c - 2000):max(0, c + 2000)] = neutral
        f[k] = np.float32(-3e-39 if k % 2 else 1e-45)
        f[k + step] = partner
    comp = _rw(dims, "f32", name, 0.0 if name == "add" else 1.0, wd, ws, pad)
    want = fpenv.flush(comp.run(fpenv.flush(x), backend="numba", denormals="ieee"))
    for _ in range(3):   # the walk, then the run plan
        got = comp.run(x, backend="numba")
        assert _bits(got) == _bits(want)
    if where != "none":
        assert _bits(comp.run(x, backend="numba", denormals="ieee")) != _bits(want)


@pytest.mark.parametrize("t", ["f32", "f64"])
@pytest.mark.parametrize("dims, wd, ws", [((1 << 20,), (2,), (1,)), ((1 << 20,), (5,), (1,)), ((3, LONG), (1, 2), (1, 2)),
                                          ((1 << 18,), (300,), (1,)), ((64, 4096), (1, 2), (1, 1))])
def test_window_sums_flush_their_denormal_results_in_a_run_plan(t, dims, wd, ws):
    """Under flushing a window sum's result is flushed: the prepared step of long rows (its
    chunks look for denormal results as they write them, the executor's scan after the step
    skipped), sliding and short-row passes (a scan in threads).  Normal operands whose
    windows of two cancel to denormals (their partial sums normal: the kernels do not flush
    partial sums, the reference does), some or all of them; normal sums; a denormal operand
    (flushed, computed again); the first run and the run plan's later ones, against the
    reference."""
    dt = xe.Shape(t, ()).dtype
    tiny = np.finfo(dt).tiny
    comp = _rw(dims, t, "add", 0.0, wd, ws, [(0, 0)] * len(dims))
    n = int(np.prod(dims))
    rng = np.random.default_rng(21)
    normal = rng.standard_normal(dims).astype(dt)
    with_den = normal.copy()
    with_den.reshape(-1)[n // 3] = tiny / 4
    cases = [normal, with_den]
    if wd[-1] == 2:
        cancel = np.resize(np.array([tiny * 1.5, -tiny], dt), n).reshape(dims)   # every sum tiny / 2
        few = normal.copy()
        few.reshape(-1)[n // 2:n // 2 + 6] = [tiny * 1.5, -tiny, tiny * 1.5, -tiny, tiny * 1.5, -tiny]
        cases += [cancel, few]
    def flushed(v):
        return np.where(np.abs(v) < tiny, v * 0, v).astype(dt)

    for x in cases:
        with xe.float_env(denormals="ieee"):   # the same sums unflushed, then flushed
            want = flushed(comp.run(flushed(x), backend="numba"))
        with xe.float_env(denormals="flush"):
            if wd[-1] == 2:   # (two cells: the reference's order too)
                assert _bits(comp.run(x)) == _bits(want)
            for _ in range(3):
                got = comp.run(x, backend="numba")
                assert _bits(got) == _bits(want)
        if wd[-1] == 2 and x is cases[2]:
            assert not np.any(want), "every window sum is a denormal, flushed"
            with xe.float_env(denormals="ieee"):
                got = comp.run(x, backend="numba")
                assert np.any((got != 0) & (np.abs(got) < tiny))
