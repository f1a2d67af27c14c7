"""The CPU kernels of the reduction, linalg and rng families against the NumPy reference.

Every test builds a computation, runs it with ``backend="numba"`` and ``backend="numpy"``
and compares: integers, pred and data movement bit for bit, floats within the corpus'
accumulation tolerance (kernels reassociate sums; BLAS sums f32 in f32).  Shapes and
attributes come from hypothesis (empty and size-1 dimensions, padding larger than the
window, dilations, several operands); dtypes are few, because every new dtype is a new
compile.  The corpus cases of these ops run through ``backend="numba"`` at the end.
"""
import importlib.util

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import xla_explorer as xe
from conftest import CORPUS, corpus_cases

pytest.importorskip("numba")

from xla_explorer.executors.cpu import load  # noqa: E402

load()
from xla_explorer.executors.cpu import reduction as kred  # noqa: E402

SETTINGS = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
F32, S32 = "f32", "s32"


def _dtype(t):
    return xe.Shape(t, ()).dtype


def values(rng, t, shape, low=-4, high=5):
    """Small integers (ties on purpose) or normal floats with a few specials."""
    if t == "pred":
        return rng.integers(0, 2, shape).astype(bool)
    if t in ("s8", "s32", "s64", "u8", "u32"):
        lo = 0 if t[0] == "u" else low
        return rng.integers(lo, high, shape).astype(_dtype(t))
    x = rng.standard_normal(shape)
    if t.startswith("c"):
        x = x + 1j * rng.standard_normal(shape)
    return np.asarray(x).astype(_dtype(t))


def assert_same(want, got, rtol=2e-5, atol=1e-4):
    want = want if isinstance(want, tuple) else (want,)
    got = got if isinstance(got, tuple) else (got,)
    assert len(want) == len(got)
    for w, g in zip(want, got):
        assert w.dtype == g.dtype and w.shape == g.shape, (w.dtype, g.dtype, w.shape, g.shape)
        if w.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w)
        else:
            w64, g64 = w.astype(np.complex128), g.astype(np.complex128)
            np.testing.assert_array_equal(np.isnan(g64), np.isnan(w64))
            ok = ~np.isnan(w64)
            np.testing.assert_allclose(g64[ok], w64[ok], rtol=rtol, atol=atol)


def check(comp, *args, **tol):
    assert_same(comp.run(*args, backend="numpy"), comp.run(*args, backend="numba"), **tol)


def param(b, i, t, dims):
    return xe.Parameter(b, i, xe.Shape(t, tuple(dims)))


def _args(rng, comp, **kw):
    return [values(rng, s.element_type, s.dims, **kw) for s in comp.parameter_shapes]


dims_st = st.lists(st.integers(0, 5), min_size=0, max_size=4)


# -- Reduce ----------------------------------------------------------------------------------

COMBINERS = {"add": xe.Add, "max": xe.Max, "min": xe.Min, "mul": xe.Mul, "and": xe.And, "or": xe.Or,
             "xor": xe.Xor}


@SETTINGS
@given(dims=dims_st, data=st.data(), t=st.sampled_from([F32, S32, "pred"]), seed=st.integers(0, 99))
def test_reduce_standard_combiners(dims, data, t, seed):
    names = ["add", "max", "min"] + (["mul", "xor"] if t == S32 else []) + (["and", "or"] if t == "pred" else [])
    name = data.draw(st.sampled_from(names))
    reduced = data.draw(st.lists(st.sampled_from(range(len(dims))), unique=True) if dims else st.just([]))
    b = xe.XlaBuilder("r")
    init = np.asarray(data.draw(st.integers(-3, 3))).astype(_dtype(t))
    comp = b.build(xe.Reduce(param(b, 0, t, dims), init, lambda a, c: COMBINERS[name](a, c), reduced))
    check(comp, *_args(np.random.default_rng(seed), comp))


def test_reduce_big_sum_and_max_split_for_threads():
    """Long reductions are cut into parts (P > 1) and joined; several reduced groups."""
    rng = np.random.default_rng(0)
    for dims, reduced in [((3, 40000), [1]), ((50000,), [0]), ((16, 9, 300), [0, 2]), ((2, 3, 4, 5), [0, 2, 3])]:
        for fn, init in [(xe.Add, 0), (xe.Max, -np.inf)]:
            b = xe.XlaBuilder("big")
            comp = b.build(xe.Reduce(param(b, 0, F32, dims), np.float32(init), lambda a, c: fn(a, c), reduced))
            x = values(rng, F32, dims)
            x.reshape(-1)[7] = np.nan if fn is xe.Max else x.reshape(-1)[7]
            check(comp, x, rtol=1e-4)


def test_reduce_threads_integers_pred_and_partial_rows():
    """Big reductions run in Python threads over one compiled function: integers and pred
    (bit for bit), whole rows (B == 1) with and without the init, rows cut in parts."""
    rng = np.random.default_rng(1)
    cases = [(S32, (64, 40, 30), [0, 2], ["add", "max", "xor", "mul"]), (S32, (3, 50000), [1], ["add", "min"]),
             ("pred", (300, 200), [1], ["or", "and"]), ("pred", (40, 30, 50), [0, 2], ["xor"]),
             (F32, (40000, 2), [0], ["min", "mul"]), (F32, (5, 7000), [1], ["mul", "max"])]
    for t, dims, reduced, names in cases:
        for name in names:
            b = xe.XlaBuilder("threads")
            init = np.asarray(1 if name in ("mul", "and") else 0).astype(_dtype(t))
            comp = b.build(xe.Reduce(param(b, 0, t, dims), init, lambda a, c: COMBINERS[name](a, c), reduced))
            x = values(rng, t, dims, low=-3, high=4)
            if t == F32 and name == "mul":
                x = (1 + x / 1e4).astype(np.float32)  # products stay finite
            check(comp, x, rtol=1e-3)


def test_reduce_compiles_one_function_per_type():
    """A standard Reduce compiles no parallel twin: serial and threaded runs share one
    compiled chunk function (cold compile time, issue 4)."""
    rng = np.random.default_rng(2)
    b = xe.XlaBuilder("one")
    comp = b.build(xe.Reduce(param(b, 0, F32, (64, 32, 64)), np.float32(0), lambda a, c: xe.Add(a, c), [0, 2]))
    check(comp, values(rng, F32, (64, 32, 64)), rtol=1e-4)
    sigs = [s for s in kred._arb_chunk.signatures if s[2].dtype == kred.nb.float32]
    assert len(sigs) == 1, sigs


def _argmax(m, a, v, i):
    """JAX's argmax region: the larger value (NaN wins), ties to the lower index."""
    take = xe.Or(xe.Or(xe.Gt(v, m), xe.Ne(v, v)), xe.And(xe.Eq(v, m), xe.Lt(i, a)))
    return xe.Select(take, v, m), xe.Select(take, i, a)


@SETTINGS
@given(dims=st.lists(st.integers(0, 6), min_size=1, max_size=3), data=st.data(), seed=st.integers(0, 99))
def test_reduce_variadic_argmax_region_is_generated(dims, data, seed):
    reduced = data.draw(st.lists(st.sampled_from(range(len(dims))), unique=True, min_size=1))
    b = xe.XlaBuilder("argmax")
    r = xe.Reduce([param(b, 0, F32, dims), param(b, 1, S32, dims)], [np.float32(-np.inf), np.int32(0)],
                  _argmax, reduced)
    comp = b.build(r)
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 3, dims).astype(np.float32)  # ties
    if x.size:
        x.reshape(-1)[0] = np.nan
    check(comp, x, np.arange(x.size, dtype=np.int32).reshape(dims))


def test_non_associative_region_folds_in_the_reference_order():
    """A generated region combines as the reference does (pairwise tree, then the init):
    even subtract gives the reference's integers exactly."""
    rng = np.random.default_rng(1)
    for dims, reduced in [((3, 37), [1]), ((5, 2, 3), [0, 2]), ((1,), [0]), ((4, 0), [1])]:
        b = xe.XlaBuilder("sub")
        comp = b.build(xe.Reduce(param(b, 0, S32, dims), np.int32(5), lambda a, c: xe.Sub(a, c), reduced))
        check(comp, *_args(rng, comp, low=-50, high=50))


def test_narrow_float_sums_round_after_every_add():
    """bf16 / f16 add goes through the generated fold (rounded per op, reference order)."""
    rng = np.random.default_rng(2)
    for t in ("bf16", "f16"):
        for fn in (xe.Add, xe.Max):
            b = xe.XlaBuilder("narrow")
            comp = b.build(xe.Reduce(param(b, 0, t, (4, 33)), np.asarray(0, _dtype(t)), lambda a, c: fn(a, c), [1]))
            x = (rng.standard_normal((4, 33)) * 10).astype(_dtype(t))
            assert_same(comp.run(x), comp.run(x, backend="numba"), rtol=0, atol=0)


def test_region_without_emitter_runs_the_reference(monkeypatch):
    """A region the compiler cannot turn into scalar code falls back to the reference."""
    from xla_explorer.executors import emit
    b = xe.XlaBuilder("fallback")
    comp = b.build(xe.Reduce(param(b, 0, S32, (3, 4)), np.int32(1), lambda a, c: xe.Sub(c, a), [1]))
    monkeypatch.delitem(emit.EMITTERS, "subtract")
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    assert_same(comp.run(x), comp.run(x, backend="numba"))
    assert "subtract" in kred._FALLBACKS["reduce"]


def test_generated_code_that_does_not_compile_runs_the_reference(monkeypatch):
    from xla_explorer.executors import emit
    monkeypatch.setitem(emit.EMITTERS, "subtract", lambda inst, a, b: f"no_such_helper({a}, {b})")
    b = xe.XlaBuilder("broken")
    comp = b.build(xe.Reduce(param(b, 0, S32, (2, 5)), np.int32(0), lambda a, c: xe.Sub(a, c), [1]))
    x = np.arange(10, dtype=np.int32).reshape(2, 5)
    assert_same(comp.run(x), comp.run(x, backend="numba"))
    assert "did not compile" in kred._FALLBACKS["reduce"]


def test_region_source_reads_like_the_region():
    b = xe.XlaBuilder("f")
    comp = b.build(xe.Reduce(param(b, 0, F32, (3,)), np.float32(0),
                             lambda a, c: xe.Max(xe.Add(a, c), xe.Constant(a.builder, np.float32(-np.inf))), [0]))
    region = next(i for i in comp.entry.instructions if i.opcode == "reduce").attrs["computation"]
    src = kred.region_source(region, "region")
    assert src.splitlines()[1] == "def region(p0, p1):" and "-math.inf" in src and "fmax" in src


# -- ReduceWindow ----------------------------------------------------------------------------

@st.composite
def windows(draw, max_rank=3):
    rank = draw(st.integers(1, max_rank))
    dims = [draw(st.integers(0, 6)) for _ in range(rank)]
    wd = [draw(st.integers(1, 4)) for _ in range(rank)]
    ws = [draw(st.integers(1, 3)) for _ in range(rank)]
    pad = [(draw(st.integers(0, 5)), draw(st.integers(0, 5))) for _ in range(rank)]
    bd = [draw(st.integers(1, 3)) for _ in range(rank)]
    wdl = [draw(st.integers(1, 3)) for _ in range(rank)]
    return dims, wd, ws, pad, bd, wdl


@SETTINGS
@given(w=windows(), t=st.sampled_from([F32, S32]), name=st.sampled_from(["add", "max", "min"]),
       seed=st.integers(0, 99))
def test_reduce_window_standard(w, t, name, seed):
    dims, wd, ws, pad, bd, wdl = w
    b = xe.XlaBuilder("rw")
    init = np.asarray(-1 if name != "min" else 3).astype(_dtype(t))
    comp = b.build(xe.ReduceWindow(param(b, 0, t, dims), init, lambda a, c: COMBINERS[name](a, c), wd, ws, pad,
                                   bd, wdl))
    check(comp, *_args(np.random.default_rng(seed), comp))


@SETTINGS
@given(w=windows(max_rank=2), seed=st.integers(0, 99))
def test_reduce_window_generated_regions(w, seed):
    """Subtract (not associative) and a variadic argmax window, through generated code."""
    dims, wd, ws, pad, bd, wdl = w
    b = xe.XlaBuilder("rwsub")
    comp = b.build(xe.ReduceWindow(param(b, 0, S32, dims), np.int32(2), lambda a, c: xe.Sub(a, c), wd, ws, pad,
                                   bd, wdl))
    rng = np.random.default_rng(seed)
    check(comp, *_args(rng, comp, low=-20, high=20))
    b = xe.XlaBuilder("rwargmax")
    comp = b.build(xe.ReduceWindow([param(b, 0, F32, dims), param(b, 1, S32, dims)],
                                   [np.float32(-np.inf), np.int32(-1)], _argmax, wd, ws, pad, bd, wdl))
    x = rng.integers(0, 3, dims).astype(np.float32)
    check(comp, x, np.arange(x.size, dtype=np.int32).reshape(dims))


def test_max_pool_nhwc_and_cumulative_sum():
    rng = np.random.default_rng(3)
    b = xe.XlaBuilder("pool")
    comp = b.build(xe.ReduceWindow(param(b, 0, F32, (2, 33, 31, 40)), np.float32(-np.inf),
                                   lambda a, c: xe.Max(a, c), [1, 3, 3, 1], [1, 2, 2, 1], "SAME"))
    check(comp, values(rng, F32, (2, 33, 31, 40)))
    b = xe.XlaBuilder("cumsum")
    comp = b.build(xe.ReduceWindow(param(b, 0, F32, (3, 300)), np.float32(0), lambda a, c: xe.Add(a, c),
                                   [1, 300], [1, 1], [(0, 0), (299, 0)]))
    check(comp, values(rng, F32, (3, 300)), rtol=1e-4)


def test_reduce_window_sliding_along_the_last_dimension():
    """Windows inside the operand move their cells by one stride (the kernel's shortcut);
    at the padded edges and with dilations the cells are recomputed."""
    rng = np.random.default_rng(5)
    cases = [((2, 20, 23, 5), [1, 3, 4, 1], [1, 2, 3, 1], [(0, 0), (2, 1), (3, 3), (0, 0)], [1, 1, 1, 1],
              [1, 1, 2, 1]),
             ((50,), [5], [1], [(2, 2)], [1], [1]),
             ((9, 40), [2, 3], [1, 2], [(1, 0), (4, 2)], [1, 2], [2, 1]),
             ((7, 31), [3, 2], [2, 1], [(0, 1), (0, 0)], [1, 1], [1, 3]),
             # large enough for the threads (each takes a contiguous part of the result)
             ((3, 70, 90, 8), [1, 3, 3, 1], [1, 2, 2, 1], [(0, 0), (1, 1), (1, 1), (0, 0)], [1, 1, 1, 1],
              [1, 1, 1, 1])]
    for dims, wd, ws, pad, bd, wdl in cases:
        for t, name in ((S32, "add"), (F32, "add"), (F32, "max"), (S32, "min")):
            b = xe.XlaBuilder("slide")
            init = np.asarray(-1 if name != "min" else 3).astype(_dtype(t))
            comp = b.build(xe.ReduceWindow(param(b, 0, t, dims), init, lambda a, c: COMBINERS[name](a, c), wd, ws,
                                           pad, bd, wdl))
            check(comp, values(rng, t, dims))


# -- SelectAndScatter ------------------------------------------------------------------------

@SETTINGS
@given(rank=st.integers(1, 3), data=st.data(), t=st.sampled_from([F32, S32]),
       select=st.sampled_from(["ge", "gt", "le", "custom"]), seed=st.integers(0, 99))
def test_select_and_scatter(rank, data, t, select, seed):
    dims = [data.draw(st.integers(1, 6)) for _ in range(rank)]
    wd = [data.draw(st.integers(1, 3)) for _ in range(rank)]
    ws = [data.draw(st.integers(1, 3)) for _ in range(rank)]
    pad = data.draw(st.sampled_from(["SAME", "VALID"]))
    from xla_explorer.ops.reduction import _check_window, _window_attrs
    a = _window_attrs("S", dims, wd, ws, pad)
    source_dims = _check_window("S", xe.Shape(t, dims), *a)
    sel = {"ge": lambda x, y: xe.Ge(x, y), "gt": lambda x, y: xe.Gt(x, y), "le": lambda x, y: xe.Le(x, y),
           "custom": lambda x, y: xe.Ge(xe.Abs(x), xe.Abs(y))}[select]
    b = xe.XlaBuilder("sas")
    r = xe.SelectAndScatter(param(b, 0, t, dims), sel, wd, ws, pad, param(b, 1, t, source_dims),
                            np.asarray(1).astype(_dtype(t)), lambda x, y: xe.Add(x, y))
    comp = b.build(r)
    check(comp, *_args(np.random.default_rng(seed), comp, low=-2, high=3))


# -- Sort and TopK ---------------------------------------------------------------------------

def _canonical(x):
    """JAX's comparator key: NaN made one NaN, -0.0 made +0.0."""
    bld = x.builder
    zero, nan = xe.Constant(bld, np.float32(0)), xe.Constant(bld, np.float32(np.nan))
    return xe.Select(xe.Ne(x, x), nan, xe.Select(xe.Eq(x, zero), zero, x))


def _jax_less(*p):
    return xe.LtTotalOrder(_canonical(p[0]), _canonical(p[1]))


def _two_keys(*p):
    return xe.Or(xe.Lt(p[0], p[1]), xe.And(xe.Eq(p[0], p[1]), xe.Gt(p[2], p[3])))


def _by_remainder(*p):  # not a recognised form: a generated comparator
    return xe.Lt(xe.Rem(p[0], np.int32(3)), xe.Rem(p[1], np.int32(3)))


@SETTINGS
@given(dims=st.lists(st.integers(0, 40), min_size=1, max_size=3), data=st.data(),
       kind=st.sampled_from(["default", "jax", "two_keys", "descending", "generated"]), seed=st.integers(0, 99))
def test_sort(dims, data, kind, seed):
    d = data.draw(st.integers(0, len(dims) - 1))
    rng = np.random.default_rng(seed)
    key_t = {"default": F32, "jax": F32, "two_keys": S32, "descending": S32, "generated": S32}[kind]
    b = xe.XlaBuilder("sort")
    ops = [param(b, 0, key_t, dims), param(b, 1, S32, dims), param(b, 2, F32, dims)]
    comparator = {"default": None, "jax": _jax_less, "two_keys": _two_keys,
                  "descending": lambda *p: xe.Gt(p[0], p[1]), "generated": _by_remainder}[kind]
    comp = b.build(xe.Sort(ops, comparator=comparator, dimension=d, is_stable=True))
    x = values(rng, key_t, dims, low=-3, high=3)
    if kind == "jax" and x.size:
        flat = x.reshape(-1)
        flat[rng.integers(0, x.size, 3)] = np.array([np.nan, -0.0, -np.nan], np.float32)
    check(comp, x, values(rng, S32, dims, low=-2, high=2), np.arange(x.size, dtype=np.float32).reshape(dims))


def test_sort_recognises_jax_comparators():
    for case, plan in [("sort_f32_specials", [(0, False, True, True)]),
                       ("sort_multi_operand_num_keys", [(0, False, False, False), (1, False, False, False)])]:
        path = CORPUS / case / "module.hlo"
        if not path.exists():
            pytest.skip("corpus not found")
        comp = xe.parse_hlo(path.read_text())
        sorts = [i for c in comp.computations for i in c.instructions if i.opcode == "sort"]
        assert sorts
        for inst in sorts:
            assert kred.sort_keys_plan(inst.attrs["comparator"]) == plan
    b = xe.XlaBuilder("generic")
    comp = b.build(xe.Sort([param(b, 0, S32, (4,))], comparator=lambda a, c: _by_remainder(a, c)))
    inst = next(i for i in comp.entry.instructions if i.opcode == "sort")
    assert kred.sort_keys_plan(inst.attrs["comparator"]) is None


def test_sort_long_rows_use_the_radix_sort():
    rng = np.random.default_rng(4)
    for t in (F32, "f64", "u32", "s8"):
        b = xe.XlaBuilder("long")
        comp = b.build(xe.Sort([param(b, 0, t, (3, 2000)), param(b, 1, S32, (3, 2000))],
                               comparator=lambda *p: xe.LtTotalOrder(p[0], p[1]) if t in (F32, "f64")
                               else xe.Lt(p[0], p[1]), dimension=1, is_stable=True))
        x = values(rng, t, (3, 2000), low=-100, high=100)
        if t == F32:
            x[0, :4] = [np.nan, -np.nan, -0.0, 0.0]
        check(comp, x, np.arange(6000, dtype=np.int32).reshape(3, 2000))


def test_sort_many_rows_in_threads():
    """Many rows (radix rows and merge rows) are sorted in threads; a second operand is
    gathered in threads; JAX's comparator and a descending one."""
    rng = np.random.default_rng(6)
    for dims, d in [((60, 600), 1), ((700, 3, 20), 2), ((20, 2000), 0)]:
        for comparator in (None, _jax_less, lambda *p: xe.Gt(p[0], p[1])):
            b = xe.XlaBuilder("rows")
            comp = b.build(xe.Sort([param(b, 0, F32, dims), param(b, 1, S32, dims)], comparator=comparator,
                                   dimension=d, is_stable=True))
            x = np.round(values(rng, F32, dims), 1)  # ties
            if comparator is _jax_less:
                x.reshape(-1)[:3] = [np.nan, -0.0, -np.nan]
            check(comp, x, np.arange(x.size, dtype=np.int32).reshape(dims))
    b = xe.XlaBuilder("one_key")
    comp = b.build(xe.Sort([param(b, 0, S32, (50, 1000))], dimension=1))
    check(comp, values(rng, S32, (50, 1000), low=-1000, high=1000))


def test_topk_and_select_and_scatter_in_threads():
    rng = np.random.default_rng(7)
    b = xe.XlaBuilder("topk_rows")
    r = xe.TopK(param(b, 0, F32, (200, 300)), 5)
    comp = b.build(xe.Tuple(xe.GetTupleElement(r, 0), xe.GetTupleElement(r, 1)))
    check(comp, np.round(values(rng, F32, (200, 300)), 1))
    b = xe.XlaBuilder("pool_grad")
    dims, wd, ws = [64, 64, 16], [2, 2, 1], [2, 2, 1]
    r = xe.SelectAndScatter(param(b, 0, F32, dims), lambda x, y: xe.Ge(x, y), wd, ws, "VALID",
                            param(b, 1, F32, [32, 32, 16]), np.float32(0), lambda x, y: xe.Add(x, y))
    comp = b.build(r)
    check(comp, *_args(rng, comp))


@SETTINGS
@given(dims=st.lists(st.integers(0, 8), min_size=1, max_size=3), data=st.data(),
       t=st.sampled_from([F32, S32]), largest=st.booleans(), seed=st.integers(0, 99))
def test_topk(dims, data, t, largest, seed):
    k = data.draw(st.integers(0, dims[-1]))
    b = xe.XlaBuilder("topk")
    r = xe.TopK(param(b, 0, t, dims), k, largest)
    comp = b.build(xe.Tuple(xe.GetTupleElement(r, 0), xe.GetTupleElement(r, 1)))
    x = values(np.random.default_rng(seed), t, dims, low=-2, high=3)
    if t == F32 and x.size >= 3:
        x.reshape(-1)[:3] = [np.nan, -0.0, 0.0]
    check(comp, x)


def test_topk_large_k_sorts_rows():
    b = xe.XlaBuilder("topk_big")
    r = xe.TopK(param(b, 0, F32, (3, 700)), 100)
    comp = b.build(xe.Tuple(xe.GetTupleElement(r, 0), xe.GetTupleElement(r, 1)))
    check(comp, np.random.default_rng(5).integers(0, 50, (3, 700)).astype(np.float32))


# -- DotGeneral and convolution --------------------------------------------------------------

@st.composite
def dot_problems(draw):
    nb, nc, nl, nr = (draw(st.integers(0, 2)) for _ in range(4))
    sizes = [draw(st.integers(0, 4)) for _ in range(nb + nc + nl + nr)]
    batch, contract = sizes[:nb], sizes[nb:nb + nc]
    lfree, rfree = sizes[nb + nc:nb + nc + nl], sizes[nb + nc + nl:]
    lroles = [("b", i) for i in range(nb)] + [("c", i) for i in range(nc)] + [("f", i) for i in range(nl)]
    rroles = [("b", i) for i in range(nb)] + [("c", i) for i in range(nc)] + [("f", i) for i in range(nr)]
    lroles, rroles = draw(st.permutations(lroles)), draw(st.permutations(rroles))
    size = {"b": batch, "c": contract}

    def dims(roles, free):
        return [size[r][i] if r in size else free[i] for r, i in roles]

    def where(roles, role):
        return [roles.index((role, i)) for i in range(len(size[role]))]
    return (dims(lroles, lfree), dims(rroles, rfree), where(lroles, "c"), where(rroles, "c"), where(lroles, "b"),
            where(rroles, "b"))


@SETTINGS
@given(p=dot_problems(), types=st.sampled_from([(F32, None), ("s8", "s32"), (S32, None), ("bf16", F32)]),
       seed=st.integers(0, 99))
def test_dot_general(p, types, seed):
    ld, rd, lc, rc, lb, rb = p
    t, pref = types
    b = xe.XlaBuilder("dot")
    comp = b.build(xe.DotGeneral(param(b, 0, t, ld), param(b, 1, t, rd), lhs_contracting_dimensions=lc,
                                 rhs_contracting_dimensions=rc, lhs_batch_dimensions=lb, rhs_batch_dimensions=rb,
                                 preferred_element_type=pref))
    check(comp, *_args(np.random.default_rng(seed), comp, low=-100, high=100))


def test_dot_reads_strided_heads_in_place_and_keeps_its_bits_across_thread_counts():
    """Attention's per-head product (batch dimensions 0 and 2 of [b, t, h, d], contracting
    d): BLAS reads the heads as strided views; a product split over the worker threads by
    rows or batch, and a Winograd convolution's blocks, give the same bits on one thread
    (a busy machine's runs) and on two."""
    import numba
    rng = np.random.default_rng(7)
    b = xe.XlaBuilder("heads")
    comp = b.build(xe.DotGeneral(param(b, 0, F32, (2, 96, 4, 32)), param(b, 1, F32, (2, 96, 4, 32)),
                                 lhs_contracting_dimensions=[3], rhs_contracting_dimensions=[3],
                                 lhs_batch_dimensions=[0, 2], rhs_batch_dimensions=[0, 2]))
    args = _args(rng, comp)
    check(comp, *args, rtol=1e-4)
    b = xe.XlaBuilder("rows")
    rows = b.build(xe.DotGeneral(param(b, 0, F32, (200, 300)), param(b, 1, F32, (200, 150)),
                                 lhs_contracting_dimensions=[0], rhs_contracting_dimensions=[0]))
    rargs = _args(rng, rows)
    b = xe.XlaBuilder("winograd")  # its tiles cut into blocks by size, the blocks shared by the threads
    conv = b.build(xe.ConvGeneralDilated(param(b, 0, F32, (8, 16, 16, 32)), param(b, 1, F32, (3, 3, 32, 32)),
                                         [1, 1], "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")))
    cargs = _args(rng, conv)
    before = numba.get_num_threads()
    try:
        got = []
        for threads in (1, min(2, numba.config.NUMBA_NUM_THREADS)):
            numba.set_num_threads(threads)
            got.append((comp.run(*args, backend="numba"), rows.run(*rargs, backend="numba"),
                        conv.run(*cargs, backend="numba")))
    finally:
        numba.set_num_threads(before)
    for one, two in zip(*got):
        np.testing.assert_array_equal(one, two)


def test_batched_dot_shared_or_not_gives_the_same_bits(monkeypatch):
    """A batched product below ``linalg._BATCH_SPLIT_WORK`` runs as one np.matmul, above it
    batch by batch in the threads: one BLAS call per matrix either way, so the same bits
    (16 products of 64x64x64, over the row-split threshold, and a strided batch)."""
    from xla_explorer.executors.cpu import linalg as klin
    rng = np.random.default_rng(9)
    a = rng.standard_normal((16, 64, 64), dtype=np.float32)
    w = rng.standard_normal((16, 64, 64), dtype=np.float32)
    assert klin._SPLIT_WORK <= 16 * 64 ** 3 < klin._BATCH_SPLIT_WORK
    whole = klin.matmul(a, w, np.empty_like(a))
    monkeypatch.setattr(klin, "_BATCH_SPLIT_WORK", 0)
    shared = klin.matmul(a, w, np.empty_like(a))
    np.testing.assert_array_equal(whole.view(np.uint32), shared.view(np.uint32))
    strided = np.swapaxes(a, 1, 2)
    monkeypatch.setattr(klin, "_BATCH_SPLIT_WORK", 1 << 62)
    one = klin.matmul(strided, w, np.empty_like(a))
    monkeypatch.setattr(klin, "_BATCH_SPLIT_WORK", 0)
    np.testing.assert_array_equal(one.view(np.uint32), klin.matmul(strided, w, np.empty_like(a)).view(np.uint32))
    np.testing.assert_allclose(one, np.swapaxes(a, 1, 2) @ w, rtol=1e-4, atol=1e-4)


def test_dot_big_batched_and_wrapping_integers():
    rng = np.random.default_rng(6)
    b = xe.XlaBuilder("bmm")
    comp = b.build(xe.DotGeneral(param(b, 0, F32, (6, 70, 80)), param(b, 1, F32, (6, 80, 90)),
                                 lhs_contracting_dimensions=[2], rhs_contracting_dimensions=[1],
                                 lhs_batch_dimensions=[0], rhs_batch_dimensions=[0]))
    check(comp, *_args(rng, comp), rtol=1e-4)
    b = xe.XlaBuilder("wrap")  # s32 products that overflow wrap as the reference's
    comp = b.build(xe.Dot(param(b, 0, S32, (3, 4)), param(b, 1, S32, (4, 2))))
    x = np.full((3, 4), 2 ** 30 + 7, np.int32)
    check(comp, x, np.full((4, 2), 3, np.int32))


@st.composite
def convolutions(draw):
    n = draw(st.integers(1, 2))
    groups = draw(st.integers(1, 2))
    by_batch = draw(st.booleans()) and groups > 1
    batch = draw(st.integers(0, 2)) * (groups if by_batch else 1)
    i = draw(st.integers(1, 3))
    c = i if by_batch else i * groups
    o = draw(st.integers(1, 2)) * groups
    sp = [draw(st.integers(1, 6)) for _ in range(n)]
    k = [draw(st.integers(1, 3)) for _ in range(n)]
    lhs = [batch, c] + sp
    rhs = [o, i] + k
    lperm, rperm, operm = (draw(st.permutations(range(n + 2))) for _ in range(3))
    attrs = dict(window_strides=[draw(st.integers(1, 2)) for _ in range(n)],
                 padding=[(draw(st.integers(-1, 3)), draw(st.integers(-1, 3))) for _ in range(n)],
                 lhs_dilation=[draw(st.integers(1, 2)) for _ in range(n)],
                 rhs_dilation=[draw(st.integers(1, 2)) for _ in range(n)],
                 window_reversal=[draw(st.booleans()) for _ in range(n)],
                 feature_group_count=1 if by_batch else groups, batch_group_count=groups if by_batch else 1)
    # dimension numbers: logical role order [b, f, spatial...] placed by the permutations
    from xla_explorer.ops.linalg import ConvDimensionNumbers
    dn = ConvDimensionNumbers(lperm[0], lperm[1], tuple(lperm[2:]), rperm[1], rperm[0], tuple(rperm[2:]),
                              operm[0], operm[1], tuple(operm[2:]))
    lhs_dims = [0] * (n + 2)
    rhs_dims = [0] * (n + 2)
    for role, pos in enumerate(lperm):
        lhs_dims[pos] = lhs[role]
    for role, pos in enumerate(rperm):
        rhs_dims[pos] = rhs[role]
    return lhs_dims, rhs_dims, dn, attrs


@SETTINGS
@given(problem=convolutions(), t=st.sampled_from([F32, S32]), seed=st.integers(0, 99))
def test_convolution(problem, t, seed):
    lhs_dims, rhs_dims, dn, attrs = problem
    b = xe.XlaBuilder("conv")
    try:
        r = xe.ConvGeneralDilated(param(b, 0, t, lhs_dims), param(b, 1, t, rhs_dims), dimension_numbers=dn, **attrs)
    except xe.ShapeError:
        return  # a window larger than the padded input, a negative padding too large
    comp = b.build(r)
    check(comp, *_args(np.random.default_rng(seed), comp))


def test_conv_nhwc_blocks_and_depthwise():
    rng = np.random.default_rng(7)
    b = xe.XlaBuilder("nhwc")
    comp = b.build(xe.ConvGeneralDilated(param(b, 0, F32, (2, 20, 20, 8)), param(b, 1, F32, (3, 3, 8, 16)), [1, 1],
                                         "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")))
    check(comp, *_args(rng, comp), rtol=1e-4)
    b = xe.XlaBuilder("depthwise")
    comp = b.build(xe.ConvGeneralDilated(param(b, 0, F32, (2, 9, 9, 6)), param(b, 1, F32, (3, 3, 1, 12)), [2, 2],
                                         "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"), feature_group_count=6))
    check(comp, *_args(rng, comp), rtol=1e-4)


def test_conv_one_in_feature_per_group():
    """im2col's one-feature rows (a depthwise convolution: every group one in-feature, the
    cells' offsets computed once per output row for all groups): padding cells, rhs and lhs
    dilation, strides, batch groups, f32 / s32 / pred."""
    rng = np.random.default_rng(8)
    for t, lhs, rhs, kw in [
            (F32, (3, 17, 13, 5), (3, 3, 1, 10), dict(window_strides=[1, 1], padding="SAME", feature_group_count=5)),
            (F32, (2, 12, 11, 4), (3, 2, 1, 4), dict(window_strides=[2, 1], padding=[(2, 1), (0, 3)],
                                                     rhs_dilation=[2, 1], lhs_dilation=[1, 2], feature_group_count=4)),
            (S32, (2, 9, 7, 3), (3, 3, 1, 3), dict(window_strides=[1, 1], padding="SAME", feature_group_count=3)),
            ("pred", (1, 6, 5, 2), (2, 2, 1, 2), dict(window_strides=[1, 1], padding="VALID", feature_group_count=2)),
            (F32, (4, 10, 9, 1), (3, 3, 1, 6), dict(window_strides=[1, 1], padding="SAME", batch_group_count=2))]:
        b = xe.XlaBuilder("one_feature")
        comp = b.build(xe.ConvGeneralDilated(param(b, 0, t, lhs), param(b, 1, t, rhs),
                                             dimension_numbers=("NHWC", "HWIO", "NHWC"), **kw))
        check(comp, *_args(rng, comp), rtol=1e-4)


def test_conv_3x3_takes_winograd(monkeypatch):
    """3x3 stride-1 convolutions of real size run Winograd F(2x2, 3x3): odd output sizes
    (edge tiles cut), asymmetric and negative padding, reversed windows, f32 and f64, NCHW."""
    from xla_explorer.executors.cpu import linalg as klin
    calls = []
    original = klin._winograd
    monkeypatch.setattr(klin, "_winograd", lambda *a: calls.append(1) or original(*a))
    rng = np.random.default_rng(12)
    nhwc, nchw = ("NHWC", "HWIO", "NHWC"), ("NCHW", "OIHW", "NCHW")
    for t, lhs, rhs, pad, rev, dn in [
            (F32, (2, 30, 30, 16), (3, 3, 16, 64), "SAME", None, nhwc),
            (F32, (1, 33, 31, 16), (3, 3, 16, 64), [(2, 0), (1, 3)], None, nhwc),
            ("f64", (2, 31, 40, 16), (3, 3, 16, 64), [(-1, 2), (0, 0)], [True, False], nhwc),
            (F32, (2, 16, 33, 31), (64, 16, 3, 3), [(2, 0), (1, 2)], [False, True], nchw),
            (F32, (2, 3, 64, 63), (64, 3, 3, 3), "SAME", None, nchw)]:  # an image's 3 channels
        b = xe.XlaBuilder("winograd")
        comp = b.build(xe.ConvGeneralDilated(param(b, 0, t, lhs), param(b, 1, t, rhs), [1, 1], pad,
                                             dimension_numbers=dn, window_reversal=rev))
        check(comp, *_args(rng, comp), rtol=1e-4, atol=5e-4)
    assert len(calls) == 5


def test_winograd_blocks_shared_or_not_give_the_same_bits(monkeypatch):
    """Winograd's blocks are cut by size; whether the threads share them
    (``linalg._WINO_SPLIT_WORK``) changes nothing of the bits."""
    import numba
    from xla_explorer.executors.cpu import linalg as klin
    rng = np.random.default_rng(22)
    b = xe.XlaBuilder("winograd_split")
    comp = b.build(xe.ConvGeneralDilated(param(b, 0, F32, (8, 16, 16, 32)), param(b, 1, F32, (3, 3, 32, 32)), [1, 1],
                                         "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")))
    args = _args(rng, comp)
    alone = comp.run(*args, backend="numba")
    monkeypatch.setattr(klin, "_WINO_SPLIT_WORK", 0)
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
        shared = comp.run(*args, backend="numba")
    finally:
        numba.set_num_threads(before)
    np.testing.assert_array_equal(alone.view(np.uint32), shared.view(np.uint32))


def test_winograd_few_in_features_fused_gives_the_blas_paths_bits(monkeypatch):
    """Winograd with at most 4 in features (an image's channels) computes its products by
    fused multiply-adds (``linalg._fma_products``), block by block in the cache, where this
    BLAS gives those products' bits (``_fma_chain_matches``): the same bits as
    the three passes with BLAS's product (``_WINO_FUSED_MAX_C = 0``), for 1-4 in features,
    out features that do and do not fill a vector, odd and tiny outputs (edge tiles),
    asymmetric and negative padding, reversal, f32 and f64, NHWC and NCHW, values of wide
    exponents and zeros of both signs; and as the reference.  Under flushing too, with
    denormal operands."""
    from xla_explorer.executors.cpu import linalg as klin
    rng = np.random.default_rng(23)
    nhwc, nchw = ("NHWC", "HWIO", "NHWC"), ("NCHW", "OIHW", "NCHW")
    cases = [(F32, (2, 11, 9, 3), (3, 3, 3, 32), "SAME", None, nhwc),
             (F32, (1, 2, 1, 1), (3, 3, 1, 5), "SAME", None, nhwc),
             ("f64", (3, 7, 8, 4), (3, 3, 4, 9), [(2, 0), (-1, 3)], [True, False], nhwc),
             (F32, (2, 2, 13, 6), (17, 2, 3, 3), [(1, 1), (0, 2)], [False, True], nchw),
             (F32, (1, 3, 1, 1), (8, 3, 3, 3), [(2, 2), (1, 1)], None, nchw),
             ("f64", (2, 3, 10, 10), (33, 3, 3, 3), "SAME", None, nchw)]
    taken = []
    original = klin._fma_chain_matches
    monkeypatch.setattr(klin, "_WINO_MIN", 0)   # Winograd for these small ones too
    for t, lhs, rhs, pad, rev, dn in cases:
        b = xe.XlaBuilder("winograd_fused")
        comp = b.build(xe.ConvGeneralDilated(param(b, 0, t, lhs), param(b, 1, t, rhs), [1, 1], pad,
                                             dimension_numbers=dn, window_reversal=rev))
        dt = _dtype(t)
        x = (rng.standard_normal(lhs) * np.exp2(rng.integers(-30, 30, lhs))).astype(dt)
        x.reshape(-1)[::5] = 0.0
        x.reshape(-1)[1::7] = -0.0
        w = rng.standard_normal(rhs).astype(dt)
        word = np.uint32 if dt == np.float32 else np.uint64
        for env in ("ieee", "flush"):
            if env == "flush":
                x = x.copy()
                x.reshape(-1)[2::9] = np.finfo(dt).smallest_subnormal * 3
            monkeypatch.setattr(klin, "_fma_chain_matches", lambda *a: taken.append(a) or original(*a))
            monkeypatch.setattr(klin, "_WINO_FUSED_MAX_C", 4)
            fused = comp.run(x, w, backend="numba", denormals=env)
            monkeypatch.setattr(klin, "_WINO_FUSED_MAX_C", 0)
            passes = comp.run(x, w, backend="numba", denormals=env)
            if original(np.dtype(dt), lhs[-1] if dn is nhwc else lhs[1], rhs[-1] if dn is nhwc else rhs[0]):
                np.testing.assert_array_equal(fused.view(word), passes.view(word))
            want = comp.run(x, w, backend="numpy", denormals=env)
            scale = np.abs(want).max() or 1
            np.testing.assert_allclose(fused / scale, want / scale, rtol=0, atol=1e-5)
    assert len(taken) == 2 * len(cases)


def test_winograd_input_from_nchw_channels_is_a_copy():
    """Winograd's padded input from an NCHW image of at most 4 channels (the transposed
    view: ``linalg._pad_from_channels``) holds the bits NumPy's strided assignment puts
    there (the contiguous NHWC operand's path): the same results, for 1-4 channels, odd
    sizes, asymmetric, zero and negative padding, f32 and f64, denormals and signed zeros."""
    from xla_explorer.executors.cpu import linalg as klin
    rng = np.random.default_rng(26)
    for dt in (np.float32, np.float64):
        for C, H, W in [(3, 9, 7), (1, 5, 4), (2, 6, 11), (4, 3, 3), (3, 1, 2)]:
            x = (rng.standard_normal((2, C, H, W)) * np.exp2(rng.integers(-30, 30, (2, C, H, W)))).astype(dt)
            x.reshape(-1)[::5] = -0.0
            x.reshape(-1)[1::7] = np.finfo(dt).smallest_subnormal
            xv = np.transpose(x, (0, 2, 3, 1))
            w = rng.standard_normal((5, C, 3, 3)).astype(dt)
            for pads in (((1, 1), (1, 1)), ((2, 0), (0, 3)), ((-1, 2), (1, -1)), ((0, 0), (0, 0))):
                osp = (H + sum(pads[0]) - 2, W + sum(pads[1]) - 2)
                if min(osp) <= 0:
                    continue
                word = np.uint32 if dt == np.float32 else np.uint64
                want = klin._winograd(np.ascontiguousarray(xv), w, pads, osp, dt).copy()
                got = klin._winograd(xv, w, pads, osp, dt)
                np.testing.assert_array_equal(got.view(word), want.view(word))
                xp = np.full((2, H + 4, W + 5, C), 7, dt)
                klin._pad_from_channels(x, xp, 1, H + 1, 2, W + 2, 1, 2)
                np.testing.assert_array_equal(xp[:, 1:H + 1, 2:W + 2].view(word), xv.view(word))
                assert (xp[:, 0] == 7).all() and (xp[:, :, :2] == 7).all()


def test_fma_chain_check_refuses_other_products(monkeypatch):
    """``_fma_chain_matches`` compares BLAS's products with ``_fma_products``: a product that
    rounds differently (summed in f64, rounded once) is refused, and Winograd then
    takes BLAS's product (the three passes) -- the same bits as with the fused path off."""
    from xla_explorer.executors.cpu import linalg as klin
    monkeypatch.setattr(klin, "_FMA_CHAINS", {})
    assert klin._fma_chain_matches(np.dtype(np.float32), 3, 32) in (True, False)

    def rounded_apart(V4, U4, M, n):   # rounded once: neither an fma chain nor products and sums apart
        M[:, :n] = np.einsum("kqc,kcf->kqf", V4[:, :n].astype(np.float64), U4.astype(np.float64))
    monkeypatch.setattr(klin, "_FMA_CHAINS", {})
    monkeypatch.setattr(klin, "_fma_products", rounded_apart)
    assert klin._fma_chain_matches(np.dtype(np.float32), 3, 32) is False
    rng = np.random.default_rng(24)
    x = rng.standard_normal((2, 9, 9, 3)).astype(np.float32)
    w = rng.standard_normal((32, 3, 3, 3)).astype(np.float32)
    refused = klin._winograd(x, w, ((1, 1), (1, 1)), (9, 9), np.float32).copy()
    monkeypatch.setattr(klin, "_WINO_FUSED_MAX_C", 0)
    passes = klin._winograd(x, w, ((1, 1), (1, 1)), (9, 9), np.float32)
    np.testing.assert_array_equal(refused.view(np.uint32), passes.view(np.uint32))


@pytest.mark.parametrize("mode", ["ieee", "flush"])
def test_prepared_convolution_same_bits_as_the_kernel(mode):
    """The run plan's convolution step is ``linalg._conv_prepare``'s function (its plan made
    once from the static shapes): the same bits as ``conv_kernel`` (the walk's first run and
    a direct call) for Winograd, im2col, groups, batch groups, dilations, reversal, 1-D
    and 3-D, integers, NCHW; an Inf operand takes the reference's path there too, other
    operand types or shapes go to the kernel; denormal operands under flushing."""
    from xla_explorer.executors.cpu import linalg as klin
    rng = np.random.default_rng(25)
    nhwc, nchw = ("NHWC", "HWIO", "NHWC"), ("NCHW", "OIHW", "NCHW")
    cases = [(F32, (2, 12, 11, 16), (3, 3, 16, 24), dict(window_strides=[1, 1], padding="SAME"), nhwc),
             (F32, (2, 3, 13, 10), (8, 3, 3, 3), dict(window_strides=[1, 1], padding=[(2, 0), (1, 1)],
                                                      window_reversal=[True, False]), nchw),
             (F32, (2, 11, 9, 8), (3, 2, 2, 12), dict(window_strides=[2, 1], padding=[(1, 2), (0, 1)],
                                                     rhs_dilation=[1, 2], lhs_dilation=[2, 1],
                                                     feature_group_count=4), nhwc),
             ("f64", (4, 6, 6, 3), (3, 3, 3, 4), dict(window_strides=[1, 1], padding="SAME", batch_group_count=2),
              nhwc),
             (S32, (2, 7, 5, 3), (3, 2, 3, 5), dict(window_strides=[1, 2], padding="VALID"), nhwc),
             (F32, (3, 40, 6), (5, 6, 4), dict(window_strides=[1], padding="SAME"), ("NWC", "WIO", "NWC")),
             (F32, (1, 4, 5, 6, 2), (3, 3, 3, 2, 3), dict(window_strides=[1, 1, 1], padding="SAME"),
              ("NDHWC", "DHWIO", "NDHWC"))]
    for t, lhs, rhs, kw, dn in cases:
        b = xe.XlaBuilder("prepared_conv")
        comp = b.build(xe.ConvGeneralDilated(param(b, 0, t, lhs), param(b, 1, t, rhs), dimension_numbers=dn, **kw))
        x, w = _args(rng, comp)
        if mode == "flush" and t in (F32, "f64"):
            x.reshape(-1)[::11] = np.finfo(x.dtype).smallest_subnormal
        runs = [comp.run(x, w, backend="numba", denormals=mode) for _ in range(3)]
        steps = [fn.__name__ for prog in comp.entry.__dict__["_numba_programs"].values() for fn, *_ in prog.steps]
        assert any(name.startswith("prepared") for name in steps), steps
        for r in runs[1:]:
            np.testing.assert_array_equal(r.view(np.uint8), runs[0].view(np.uint8))
        want = comp.run(x, w, denormals=mode)
        assert_close = np.testing.assert_allclose
        scale = np.abs(want).max() or 1
        assert_close(runs[0] / scale, want / scale, rtol=0, atol=1e-5)
        attrs = {k: v for k, v in comp.entry.root.attrs.items()}
        shape = comp.entry.root.shape
        run = klin._conv_prepare([o.shape for o in comp.entry.root.operands], shape=shape, **attrs)
        direct = klin.conv_kernel(x, w, shape=shape, **attrs)
        np.testing.assert_array_equal(run(x, w).view(np.uint8), direct.view(np.uint8))
        if t in (F32, "f64"):
            xi = x.copy()
            xi.reshape(-1)[3] = np.inf
            np.testing.assert_array_equal(run(xi, w), klin.conv_kernel(xi, w, shape=shape, **attrs))
            x32 = x.astype(np.float64 if t == F32 else np.float32)   # another type: the kernel
            np.testing.assert_array_equal(run(x32, w), klin.conv_kernel(x32, w, shape=shape, **attrs))


def test_winograd_kernel_transform_is_remembered_by_the_bits_of_w():
    """``linalg._wino_kernel`` keeps the last U of each kernel shape: a kernel of the same bits
    (another array) gets it, a kernel that differs in one element (or in the sign of a zero)
    gets its own; results as the reference's and, for the same w, the same bits."""
    from xla_explorer.executors.cpu import linalg as klin
    rng = np.random.default_rng(21)
    b = xe.XlaBuilder("winograd_u")
    comp = b.build(xe.ConvGeneralDilated(param(b, 0, F32, (2, 16, 16, 16)), param(b, 1, F32, (3, 3, 16, 64)), [1, 1],
                                         "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")))
    x, w = _args(rng, comp)
    first = comp.run(x, w, backend="numba")
    again = comp.run(x.copy(), w.copy(), backend="numba")
    np.testing.assert_array_equal(first.view(np.uint32), again.view(np.uint32))
    w2 = w.copy()
    w2[1, 2, 3, 4] += 1
    w3 = w.copy()
    w3[0, 0, 0, 0] = 0.0
    w4 = w3.copy()
    w4[0, 0, 0, 0] = -0.0
    for other in (w2, w3, w4, w):
        got = comp.run(x, other, backend="numba")
        np.testing.assert_allclose(got, comp.run(x, other), rtol=1e-4, atol=5e-4)
    assert not np.array_equal(comp.run(x, w2, backend="numba"), first)
    U3 = klin._wino_kernel(np.ascontiguousarray(np.transpose(w3, (3, 2, 0, 1))), np.float32)
    U4 = klin._wino_kernel(np.ascontiguousarray(np.transpose(w4, (3, 2, 0, 1))), np.float32)
    assert U3 is not U4


# -- Fft, Cholesky, TriangularSolve, batch norms ------------------------------------------------

@pytest.mark.parametrize("t, dims, fft_type, length", [
    ("c64", (3, 8), "FFT", (8,)), ("c64", (4, 6), "IFFT", (4, 6)), ("f32", (2, 8), "RFFT", (8,)),
    ("c64", (2, 5), "IRFFT", (8,)), ("c128", (2, 2, 4), "FFT", (2, 2, 4)), ("f32", (0, 8), "RFFT", (8,))])
def test_fft(t, dims, fft_type, length):
    b = xe.XlaBuilder("fft")
    comp = b.build(xe.Fft(param(b, 0, t, dims), fft_type, length))
    check(comp, *_args(np.random.default_rng(8), comp), rtol=1e-4)


@pytest.mark.parametrize("t", [F32, "c64"])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("n", [0, 1, 5, 130])
def test_cholesky(t, lower, n):
    rng = np.random.default_rng(9)
    a = values(rng, t, (3, n, n))
    a = a @ np.conj(np.swapaxes(a, -1, -2)) + n * np.eye(n, dtype=a.dtype)
    if n > 1:
        a[1] = -a[1]  # not positive definite: that matrix is all NaN
    b = xe.XlaBuilder("chol")
    check(b.build(xe.Cholesky(param(b, 0, t, a.shape), lower=lower)), a, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("left_side", [True, False])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("transpose_a", ["NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"])
def test_triangular_solve(left_side, lower, transpose_a):
    rng = np.random.default_rng(10)
    for t, unit in ((F32, False), ("c64", True)):
        a = values(rng, t, (2, 4, 4)) + 4 * np.eye(4, dtype=_dtype(t))
        bdims = (2, 4, 3) if left_side else (2, 3, 4)
        b = xe.XlaBuilder("trsm")
        comp = b.build(xe.TriangularSolve(param(b, 0, t, a.shape), param(b, 1, t, bdims), left_side, lower, unit,
                                          transpose_a))
        check(comp, a, values(rng, t, bdims), rtol=1e-4)


@pytest.mark.parametrize("feature_index, dims", [(1, (2, 3, 4)), (0, (5, 2)), (2, (2, 3, 4)), (3, (2, 5, 5, 3))])
def test_batch_norms(feature_index, dims):
    rng = np.random.default_rng(11)
    f = (dims[feature_index],)
    x, g = values(rng, F32, dims), values(rng, F32, dims)
    scale, offset, mean = values(rng, F32, f), values(rng, F32, f), values(rng, F32, f)
    var = np.abs(values(rng, F32, f))
    b = xe.XlaBuilder("bnt")
    comp = b.build(xe.BatchNormTraining(param(b, 0, F32, dims), param(b, 1, F32, f), param(b, 2, F32, f), 1e-3,
                                        feature_index))
    check(comp, x, scale, offset, rtol=1e-4)
    b = xe.XlaBuilder("bni")
    comp = b.build(xe.BatchNormInference(param(b, 0, F32, dims), param(b, 1, F32, f), param(b, 2, F32, f),
                                         param(b, 3, F32, f), param(b, 4, F32, f), 1e-3, feature_index))
    check(comp, x, scale, offset, mean, var, rtol=1e-4)
    b = xe.XlaBuilder("bng")
    comp = b.build(xe.BatchNormGrad(param(b, 0, F32, dims), param(b, 1, F32, f), param(b, 2, F32, f),
                                    param(b, 3, F32, f), param(b, 4, F32, dims), 1e-3, feature_index))
    check(comp, x, scale, mean, var, g, rtol=1e-4)


# -- RngBitGenerator: bit for bit ----------------------------------------------------------------

@pytest.mark.parametrize("algorithm", ["rng_default", "rng_philox", "rng_three_fry"])
@pytest.mark.parametrize("t, dims", [("u32", (5,)), ("u64", (3, 4)), ("u8", (7,)), ("f32", (2, 3)), ("s16", (3, 5)),
                                     ("u32", ()), ("u32", (0,)), ("u32", (40001,))])
def test_rng_bit_generator_is_bit_exact(algorithm, t, dims):
    states = [[1, 2], [2 ** 64 - 1, 2 ** 64 - 16]] + ([[5, 2 ** 64 - 3, 7]] if algorithm != "rng_three_fry" else [])
    for s in states:
        state = np.array(s, np.uint64)
        b = xe.XlaBuilder("rbg")
        comp = b.build(xe.RngBitGenerator(algorithm, param(b, 0, "u64", state.shape), xe.Shape(t, dims)))
        want, got = comp.run(state), comp.run(state, backend="numba")
        for w, g in zip(want, got):
            assert w.dtype == g.dtype and w.shape == g.shape
            assert np.array_equal(np.atleast_1d(w).view(np.uint8), np.atleast_1d(g).view(np.uint8))


# -- the corpus cases of these families, through backend="numba" ---------------------------------

_PREFIXES = ("reduce_", "maxpool", "sort_", "argsort_", "top_k_basic", "cumsum_cummax", "dot_", "conv", "fft",
             "rfft_", "cholesky_", "triangular_", "rbg_random_bits", "rng_bit_generator_threefry", "real_")
_runner = None
if (CORPUS.parent / "tools" / "run_corpus.py").exists():
    _spec = importlib.util.spec_from_file_location("run_corpus", CORPUS.parent / "tools" / "run_corpus.py")
    _runner = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_runner)


@pytest.mark.skipif(_runner is None, reason="HLO corpus not found")
@pytest.mark.parametrize("case", [c for c in corpus_cases() if c.startswith(_PREFIXES) and not c.startswith("convert")])
def test_corpus_case_numba(case):
    res = _runner.run_one(xe, str(CORPUS / case), "numba", "global")
    assert res["status"] == "pass", f"{case}: {res['reason']}\n{res.get('traceback', '')}"
