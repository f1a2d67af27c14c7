"""Reduce, ReduceWindow, SelectAndScatter, Sort, TopK: the spec's worked examples, the shape
rules, XLA:CPU's answers on edge cases, and index maps against the reference.

Most tests call the shape rule and the reference directly with Python functions as the
computations (``Fn``), both vectorised (``is_elementwise``) and one scalar call at a time,
so they do not depend on the elementwise family.  Tests through the builder and HLO text
run when the elementwise ops (add, maximum, compare, ...) are registered.
"""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import xla_explorer as xe
from xla_explorer.errors import ShapeError
from xla_explorer.executors.reference import conform
from xla_explorer.ops import registry
from xla_explorer.shapes import Shape


class Fn:
    """A computation given as a Python function, element-wise (vectorised) or not."""

    def __init__(self, fn, elementwise=True):
        self.fn, self.is_elementwise = fn, elementwise

    def __call__(self, *args):
        return self.fn(*args)


def both(fn):
    return [Fn(fn, True), Fn(fn, False)]


def run(opcode, *values, **attrs):
    """Shape rule then reference, as the reference executor runs one instruction."""
    op = registry.get(opcode)
    values = [np.asarray(v) for v in values]
    shape = op.shape_rule(*[Shape.of(v) for v in values], **attrs)
    return conform(op.reference(*values, shape=shape, **attrs), shape, opcode)


def shape_of(opcode, *shapes, **attrs):
    return registry.get(opcode).shape_rule(*[Shape.parse(s) if isinstance(s, str) else s for s in shapes],
                                           **attrs)


add = lambda a, b: np.add(a, b)  # noqa: E731
f32 = np.float32

HAVE_ELEMENTWISE = all(o in registry.all_ops() for o in ("add", "maximum", "compare", "select"))
needs_elementwise = pytest.mark.skipif(not HAVE_ELEMENTWISE, reason="elementwise ops not registered yet")


# -- Reduce: the spec's examples ----------------------------------------------------------

@pytest.mark.parametrize("fn", both(add))
def test_reduce_2d_examples(fn):
    x = np.array([[1, 2, 3], [4, 5, 6]], f32)
    np.testing.assert_array_equal(run("reduce", x, f32(0), computation=fn, dimensions=(0,)), [5, 7, 9])
    np.testing.assert_array_equal(run("reduce", x, f32(0), computation=fn, dimensions=(1,)), [6, 15])


@pytest.mark.parametrize("fn", both(add))
def test_reduce_3d_examples(fn):
    x = np.broadcast_to(np.arange(1, 7, dtype=f32).reshape(2, 3), (4, 2, 3)).copy()
    r = lambda dims: run("reduce", x, f32(0), computation=fn, dimensions=dims)  # noqa: E731
    np.testing.assert_array_equal(r((0,)), [[4, 8, 12], [16, 20, 24]])
    np.testing.assert_array_equal(r((2,)), [[6, 15]] * 4)
    np.testing.assert_array_equal(r((0, 1)), [20, 28, 36])
    np.testing.assert_array_equal(r((1, 0)), [20, 28, 36])  # dimensions are unordered
    assert r((0, 1, 2)) == 84 and r((0, 1, 2)).shape == ()


def test_reduce_init_on_the_left_and_linear_fold():
    """A non-element-wise computation folds as the spec's recursion writes it."""
    calls = []

    def f(acc, x):
        calls.append((float(acc), float(x)))
        return acc * 10 + x

    out = run("reduce", np.array([1, 2, 3], f32), f32(7), computation=Fn(f, False), dimensions=(0,))
    assert out == 7123
    assert calls[0] == (7.0, 1.0)


def _spec_argmax(m, a, v, i):
    """The spec's variadic example: ``if value >= max: (value, index) else (max, argmax)``."""
    take = v >= m
    return np.where(take, v, m), np.where(take, i, a)


@pytest.mark.parametrize("fn", both(_spec_argmax))
def test_reduce_variadic_argmax_spec_example(fn):
    v = np.array([[3, 9, 2, 9], [1, 0, 5, 4]], f32)
    k = np.broadcast_to(np.arange(4, dtype=np.int32), v.shape).copy()
    values, index = run("reduce", v, k, f32(-np.inf), np.int32(0), computation=fn, dimensions=(1,))
    np.testing.assert_array_equal(values, [9, 5])
    np.testing.assert_array_equal(index, [3, 2])  # ">=": the last of equal maxima
    assert values.dtype == np.float32 and index.dtype == np.int32


def _jax_argmax(m, a, v, i):
    """JAX's argmax region: NaN wins, ties go to the lower index."""
    pick = (m > v) | (m != m) | ((m == v) & (a < i))
    return np.where(pick, m, v), np.where(pick, a, i)


@pytest.mark.parametrize("fn", both(_jax_argmax))
def test_reduce_variadic_argmax_jax_region(fn):
    v = np.array([[1, 7, 7, 2], [np.nan, 3, np.nan, 9], [0, 0, 0, 0]], f32)
    k = np.broadcast_to(np.arange(4, dtype=np.int32), v.shape).copy()
    _, index = run("reduce", v, k, f32(-np.inf), np.int32(0), computation=fn, dimensions=(1,))
    np.testing.assert_array_equal(index, [1, 0, 0])


def test_reduce_empty_and_zero_sized():
    out = run("reduce", np.zeros((3, 0), f32), f32(5), computation=Fn(add), dimensions=(1,))
    np.testing.assert_array_equal(out, [5, 5, 5])
    out = run("reduce", np.zeros((0, 3), f32), f32(5), computation=Fn(add), dimensions=(1,))
    assert out.shape == (0,)


def test_reduce_int_wraps_and_pred():
    x = np.array([2 ** 31 - 1, 1], np.int32)
    assert run("reduce", x, np.int32(0), computation=Fn(add), dimensions=(0,)) == -2 ** 31
    b = np.array([[True, False], [True, True]])
    np.testing.assert_array_equal(run("reduce", b, np.bool_(True), computation=Fn(np.logical_and),
                                      dimensions=(1,)), [False, True])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=3), st.data())
def test_reduce_pairwise_equals_linear(dims, data):
    """The vectorised pairwise tree and the scalar left fold agree (integer sums are exact)."""
    x = np.arange(int(np.prod(dims)), dtype=np.int32).reshape(dims) * 7 - 3
    red = tuple(data.draw(st.sets(st.integers(0, len(dims) - 1))))
    a = run("reduce", x, np.int32(1), computation=Fn(add, True), dimensions=red)
    b = run("reduce", x, np.int32(1), computation=Fn(add, False), dimensions=red)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, x.sum(axis=red) + 1 if red else x + 1)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 12), st.integers(0, 2 ** 16))
def test_reduce_variadic_argmax_matches_numpy(n, seed):
    v = np.random.default_rng(seed).integers(0, 4, (3, n)).astype(f32)
    k = np.broadcast_to(np.arange(n, dtype=np.int32), v.shape).copy()
    _, index = run("reduce", v, k, f32(-np.inf), np.int32(0), computation=Fn(_jax_argmax), dimensions=(1,))
    np.testing.assert_array_equal(index, np.argmax(v, axis=1))


def test_reduce_index_map_by_loops():
    x = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    attrs = dict(computation=Fn(add), dimensions=(0, 2))
    shape = shape_of("reduce", "s32[2,3,4]", "s32[]", **attrs)
    imap = registry.get("reduce").index_map(x, np.int32(0), shape=shape, **attrs)
    assert imap.kind == "reduce" and imap.domain_shape == (3,)
    got = np.array([sum(x[i] for _, i in a.reads) for a in imap])
    np.testing.assert_array_equal(got, run("reduce", x, np.int32(0), **attrs))
    assert imap[1].reads[0] == (0, (0, 1, 0)) and len(imap[1].reads) == 8


# -- Reduce: shape rules ------------------------------------------------------------------

@pytest.mark.parametrize("shapes, attrs, message", [
    (["f32[2,3]"], dict(dimensions=(0,)), "N operands and N init_values"),
    (["f32[2,3]", "f32[3,2]", "f32[]", "f32[]"], dict(dimensions=(0,)), "operands[1] is f32[3,2]"),
    (["f32[2,3]", "f32[1]"], dict(dimensions=(0,)), "init_values[0] must be a scalar, got f32[1]"),
    (["f32[2,3]", "s32[]"], dict(dimensions=(0,)), "init_values[0] is s32[]"),
    (["f32[2,3]", "f32[]"], dict(dimensions=(2,)), "dimensions=[2] has 2, out of range"),
    (["f32[2,3]", "f32[]"], dict(dimensions=(1, 1)), "repeats a dimension"),
])
def test_reduce_shape_rule_errors(shapes, attrs, message):
    with pytest.raises(ShapeError, match="Reduce: ") as e:
        shape_of("reduce", *shapes, computation=Fn(add), **attrs)
    assert message in str(e.value)


def test_reduce_shapes():
    assert str(shape_of("reduce", "f32[4,5,6]", "f32[]", computation=Fn(add), dimensions=(0, 2))) == "f32[5]"
    s = shape_of("reduce", "f32[5,7]", "s32[5,7]", "f32[]", "s32[]", computation=Fn(add), dimensions=(1,))
    assert str(s) == "(f32[5], s32[5])"


@needs_elementwise
def test_reduce_computation_signature_checked():
    b = xe.XlaBuilder("r")
    x = xe.Parameter(b, 0, xe.Shape("f32", (2, 3)))
    bad = xe.XlaBuilder("bad")
    p = xe.Parameter(bad, 0, xe.Shape("s32", ()))
    q = xe.Parameter(bad, 1, xe.Shape("s32", ()))
    xe.Add(p, q)
    with pytest.raises(ShapeError, match=r"Reduce: parameter 0 of computation .* is s32\[\], expected f32\[\]"):
        xe.Reduce(x, np.float32(0), bad.build(), dimensions=[1])


# -- ReduceWindow ---------------------------------------------------------------------------

@pytest.mark.parametrize("fn", both(np.maximum))
def test_reduce_window_spec_2x3_max(fn):
    """The spec's picture: f32[4,6], window 2x3, stride 2x3, VALID -> f32[2,2] of window maxima."""
    x = np.array([[7, 2, 5, 3, 10, 2], [3, 8, 9, 3, 4, 2], [1, 5, 7, 5, 6, 1], [0, 6, 2, 7, 2, 8]], f32)
    out = run("reduce-window", x, f32(-np.inf), computation=fn, window_dimensions=(2, 3),
              window_strides=(2, 3), padding="VALID")
    np.testing.assert_array_equal(out, [[9, 10], [7, 8]])


@pytest.mark.parametrize("fn", both(np.minimum))
def test_reduce_window_spec_padding_example(fn):
    x = np.array([10000, 1000, 100, 10, 1], f32)
    big = f32(np.finfo(f32).max)
    valid = run("reduce-window", x, big, computation=fn, window_dimensions=(3,), window_strides=(2,),
                padding="VALID")
    same = run("reduce-window", x, big, computation=fn, window_dimensions=(3,), window_strides=(2,),
               padding="SAME")
    np.testing.assert_array_equal(valid, [100, 1])
    np.testing.assert_array_equal(same, [1000, 10, 1])


@pytest.mark.parametrize("fn", both(add))
def test_reduce_window_padding_and_holes_do_not_contribute(fn):
    """XLA:CPU: padding cells and base-dilation holes are skipped, not filled with init."""
    ones = np.ones(3, f32)
    out = run("reduce-window", ones, f32(10), computation=fn, window_dimensions=(3,), window_strides=(1,),
              padding=((1, 1),))
    np.testing.assert_array_equal(out, [12, 13, 12])
    out = run("reduce-window", np.array([1, 2, 3], f32), f32(10), computation=fn, window_dimensions=(2,),
              window_strides=(1,), padding=((0, 0),), base_dilations=(2,))
    np.testing.assert_array_equal(out, [11, 12, 12, 13])


def test_reduce_window_negative_padding_crops():
    out = run("reduce-window", np.arange(5, dtype=f32), f32(0), computation=Fn(add), window_dimensions=(2,),
              window_strides=(1,), padding=((-1, 1),))
    np.testing.assert_array_equal(out, [3, 5, 7, 4])  # XLA:CPU's answer


def test_reduce_window_cumsum_and_dilations():
    x = np.arange(1, 9, dtype=f32).reshape(1, 8)
    out = run("reduce-window", x, f32(0), computation=Fn(add), window_dimensions=(1, 8), window_strides=(1, 1),
              padding=((0, 0), (7, 0)))
    np.testing.assert_array_equal(out, np.cumsum(x, axis=1))
    s = shape_of("reduce-window", "f32[4,6]", "f32[]", computation=Fn(np.maximum), window_dimensions=(2, 2),
                 window_strides=(1, 1), padding=((0, 0), (0, 0)), base_dilations=(2, 1), window_dilations=(1, 2))
    assert str(s) == "f32[6,4]"


def test_reduce_window_variadic():
    v = np.array([3, 1, 4, 1, 5, 9, 2, 6], f32)
    i = np.arange(8, dtype=np.int32)
    values, index = run("reduce-window", v, i, f32(-np.inf), np.int32(0), computation=Fn(_jax_argmax),
                        window_dimensions=(3,), window_strides=(2,), padding="VALID")
    np.testing.assert_array_equal(values, [4, 5, 9])
    np.testing.assert_array_equal(index, [2, 4, 5])


def test_reduce_window_same_padding_shape():
    s = shape_of("reduce-window", "f32[2,7,7,3]", "f32[]", computation=Fn(np.maximum),
                 window_dimensions=(1, 3, 3, 1), window_strides=(1, 2, 2, 1), padding="SAME")
    assert str(s) == "f32[2,4,4,3]"


@pytest.mark.parametrize("attrs, message", [
    (dict(window_dimensions=(2,), window_strides=(1, 1), padding="VALID"), "window_dimensions=[2] has 1 entries"),
    (dict(window_dimensions=(2, 0), window_strides=(1, 1), padding="VALID"), "window_dimensions[1]=0 must be positive"),
    (dict(window_dimensions=(2, 2), window_strides=(1, -1), padding="VALID"), "window_strides[1]=-1 must be positive"),
    (dict(window_dimensions=(2, 2), window_strides=(1, 1), padding=((0, 0),)), "padding=[(0, 0)] has 1 entries"),
    (dict(window_dimensions=(2, 2), window_strides=(1, 1), padding="FULL"), "padding='FULL'"),
    (dict(window_dimensions=(2, 2), window_strides=(1, 1), padding="VALID", base_dilations=(0, 1)),
     "base_dilations[0]=0 must be positive"),
    (dict(window_dimensions=(2, 2), window_strides=(1, 1), padding="VALID", window_dilations=(1, 1, 1)),
     "window_dilations=[1, 1, 1] has 3 entries"),
])
def test_reduce_window_shape_rule_errors(attrs, message):
    with pytest.raises(ShapeError, match="ReduceWindow: ") as e:
        shape_of("reduce-window", "f32[4,6]", "f32[]", computation=Fn(add), **attrs)
    assert message in str(e.value)


def test_reduce_window_operand_errors():
    with pytest.raises(ShapeError, match=r"ReduceWindow: init_values\[0\] is s32\[\]"):
        shape_of("reduce-window", "f32[4]", "s32[]", computation=Fn(add), window_dimensions=(2,),
                 window_strides=(1,), padding="VALID")


def _window_case(draw):
    rank = draw(st.integers(1, 2))
    dims = [draw(st.integers(0, 5)) for _ in range(rank)]
    window = [draw(st.integers(1, 3)) for _ in range(rank)]
    strides = [draw(st.integers(1, 3)) for _ in range(rank)]
    pads = [(draw(st.integers(-1, 2)), draw(st.integers(-1, 2))) for _ in range(rank)]
    base = [draw(st.integers(1, 3)) for _ in range(rank)]
    wdil = [draw(st.integers(1, 2)) for _ in range(rank)]
    return dims, dict(window_dimensions=tuple(window), window_strides=tuple(strides), padding=tuple(pads),
                      base_dilations=tuple(base), window_dilations=tuple(wdil))


@settings(max_examples=60, deadline=None)
@given(st.data(), st.booleans())
def test_reduce_window_index_map_equals_reference(data, elementwise):
    """The index map applied by plain loops (init, then every element read) == the reference."""
    dims, attrs = _window_case(data.draw)
    x = np.random.default_rng(len(str(attrs))).integers(-50, 50, dims).astype(np.int32)
    init = np.int32(1000)
    try:
        shape = shape_of("reduce-window", Shape.of(x), Shape.of(init), computation=Fn(add), **attrs)
    except ShapeError:
        return
    want = run("reduce-window", x, init, computation=Fn(add, elementwise), **attrs)
    imap = registry.get("reduce-window").index_map(x, init, shape=shape, computation=Fn(add), **attrs)
    got = np.full(shape.dims, init, np.int32)
    for access in imap:
        for _, i in access.reads:
            got[access.index] += x[i]
        cells = access.detail["cells"]
        assert len(cells) == int(np.prod(attrs["window_dimensions"]))
        assert len(access.reads) == sum(c[2] == "operand" for c in cells)
    np.testing.assert_array_equal(got, want)


def test_windows_in_blocks_give_the_same_result(monkeypatch):
    """Large windows are reduced in blocks of results; the blocks join to the same answer."""
    from xla_explorer.ops import reduction
    x = np.random.default_rng(3).integers(0, 5, (5, 9)).astype(f32)
    window = dict(window_dimensions=(2, 3), window_strides=(1, 2), padding=((1, 0), (2, 1)))
    whole = run("reduce-window", x, f32(0), computation=Fn(add), **window)
    source = np.arange(whole.size, dtype=f32).reshape(whole.shape)
    scattered = _sas(x, source, **window)
    monkeypatch.setattr(reduction, "_BLOCK", 7)
    np.testing.assert_array_equal(run("reduce-window", x, f32(0), computation=Fn(add), **window), whole)
    np.testing.assert_array_equal(_sas(x, source, **window), scattered)


def test_reduce_window_index_map_detail():
    x = np.zeros((3,), f32)
    attrs = dict(computation=Fn(add), window_dimensions=(3,), window_strides=(1,), padding=((1, 1),),
                 base_dilations=(2,), window_dilations=(1,))
    shape = shape_of("reduce-window", "f32[3]", "f32[]", **attrs)
    assert shape.dims == (5,)
    a = registry.get("reduce-window").index_map(x, f32(0), shape=shape, **attrs)[0]
    # padded, dilated base: [P, x0, h, x1, h, x2, P]; window 0 covers P, x0, h
    assert [c[2] for c in a.detail["cells"]] == ["padding", "operand", "hole"]
    assert a.reads == ((0, (0,)),) and a.detail["padding_cells"] == ((0,),) and a.detail["hole_cells"] == ((2,),)


# -- SelectAndScatter -----------------------------------------------------------------------

ge = lambda a, b: np.greater_equal(a, b)  # noqa: E731


def _sas(operand, source, init=0, select=ge, scatter=add, elementwise=True, **window):
    operand = np.asarray(operand, f32)
    return run("select-and-scatter", operand, np.asarray(source, f32), f32(init),
               select=Fn(select, elementwise), scatter=Fn(scatter, elementwise), **window)


@pytest.mark.parametrize("elementwise", [True, False])
def test_select_and_scatter_spec_examples(elementwise):
    # (1) non-overlapping windows
    out = _sas([[7, 2, 5, 3, 10, 2], [3, 8, 9, 3, 4, 2]], [[2, 6]], elementwise=elementwise,
               window_dimensions=(2, 3), window_strides=(2, 3), padding="VALID")
    np.testing.assert_array_equal(out, [[0, 0, 0, 0, 6, 0], [0, 0, 2, 0, 0, 0]])
    # (2) overlapping windows both select the 9: 2 + 6 = 8
    out = _sas([[7, 2, 5, 3, 8], [3, 8, 9, 3, 4], [1, 5, 7, 5, 6], [0, 6, 2, 10, 2]], [[2, 6]],
               elementwise=elementwise, window_dimensions=(3, 3), window_strides=(2, 2), padding="VALID")
    want = np.zeros((4, 5), f32)
    want[1, 2] = 8
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("elementwise", [True, False])
def test_select_and_scatter_ties_and_padding(elementwise):
    """XLA:CPU: ties pick the first cell in window order; padding cells are never picked."""
    out = _sas(np.zeros((3, 3)), [[1, 2], [3, 4]], elementwise=elementwise, window_dimensions=(2, 2),
               window_strides=(2, 2), padding=((0, 1), (0, 1)))
    np.testing.assert_array_equal(out, [[1, 0, 2], [0, 0, 0], [3, 0, 4]])
    out = _sas(np.full((2, 2), -np.inf), np.ones((2, 2)), elementwise=elementwise, window_dimensions=(2, 2),
               window_strides=(1, 1), padding=((1, 0), (1, 0)))
    np.testing.assert_array_equal(out, [[4, 0], [0, 0]])


def test_select_and_scatter_maxpool_grad():
    x = np.random.default_rng(0).permutation(48).reshape(6, 8).astype(f32)
    g = np.arange(12, dtype=f32).reshape(3, 4)
    out = _sas(x, g, window_dimensions=(2, 2), window_strides=(2, 2), padding="VALID")
    blocks = x.reshape(3, 2, 4, 2).transpose(0, 2, 1, 3).reshape(3, 4, 4)
    want = np.zeros_like(x)
    for i in range(3):
        for j in range(4):
            di, dj = divmod(int(np.argmax(blocks[i, j])), 2)
            want[2 * i + di, 2 * j + dj] = g[i, j]
    np.testing.assert_array_equal(out, want)


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_select_and_scatter_index_map_equals_reference(data):
    rank = data.draw(st.integers(1, 2))
    dims = [data.draw(st.integers(1, 5)) for _ in range(rank)]
    window = dict(window_dimensions=tuple(data.draw(st.integers(1, 3)) for _ in range(rank)),
                  window_strides=tuple(data.draw(st.integers(1, 2)) for _ in range(rank)),
                  padding=tuple((data.draw(st.integers(0, 1)), data.draw(st.integers(0, 1))) for _ in range(rank)))
    x = np.random.default_rng(sum(dims)).integers(0, 3, dims).astype(f32)  # many ties
    try:
        src_shape = shape_of("reduce-window", Shape.of(x), "f32[]", computation=Fn(add), **window)
    except ShapeError:
        return
    source = np.arange(1, 1 + int(np.prod(src_shape.dims)), dtype=f32).reshape(src_shape.dims)
    attrs = dict(select=Fn(ge), scatter=Fn(add), **window)
    shape = shape_of("select-and-scatter", Shape.of(x), Shape.of(source), "f32[]", **attrs)
    want = run("select-and-scatter", x, source, f32(0), **attrs)
    np.testing.assert_array_equal(want, _sas(x, source, elementwise=False, **window))
    imap = registry.get("select-and-scatter").index_map(x, source, f32(0), shape=shape, **attrs)
    got = np.zeros_like(x)
    for access in imap:
        for w in access.writes:
            got[w] += source[access.index]
            # the written element is a maximum of the elements the window reads
            assert x[w] == max(x[i] for _, i in access.reads)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("shapes, message", [
    (["f32[4,6]", "f32[2,3]", "f32[]"], "source is f32[2,3] but the windows of operand f32[4,6]"),
    (["f32[4,6]", "s32[2,2]", "f32[]"], "same element type"),
    (["f32[4,6]", "f32[2,2]", "f32[2]"], "init_value must be a scalar f32[]"),
])
def test_select_and_scatter_shape_rule_errors(shapes, message):
    with pytest.raises(ShapeError, match="SelectAndScatter: ") as e:
        shape_of("select-and-scatter", *shapes, select=Fn(ge), scatter=Fn(add), window_dimensions=(2, 3),
                 window_strides=(2, 3), padding="VALID")
    assert message in str(e.value)


def test_windows_match_xla_cpu_through_jax():
    """Random windows (strides, negative padding, dilations, a non-identity init) against
    XLA:CPU itself, when jax is installed."""
    jax = pytest.importorskip("jax")
    from jax import lax
    from jax._src.lax.windowed_reductions import _select_and_scatter
    rng = np.random.default_rng(7)
    checked = 0
    for _ in range(40):
        rank = int(rng.integers(1, 3))
        dims = tuple(int(d) for d in rng.integers(0, 6, rank))
        w, s = tuple(int(d) for d in rng.integers(1, 4, rank)), tuple(int(d) for d in rng.integers(1, 4, rank))
        p = tuple((int(a), int(b)) for a, b in rng.integers(-1, 3, (rank, 2)))
        bd, wd = tuple(int(d) for d in rng.integers(1, 4, rank)), tuple(int(d) for d in rng.integers(1, 3, rank))
        x = rng.integers(-9, 9, dims).astype(f32)
        try:
            shape_of("reduce-window", Shape.of(x), "f32[]", computation=Fn(add), window_dimensions=w,
                     window_strides=s, padding=p, base_dilations=bd, window_dilations=wd)
        except ShapeError:
            continue
        want = jax.jit(lambda x: lax.reduce_window(x, f32(100), lax.add, w, s, p, bd, wd))(x)
        got = run("reduce-window", x, f32(100), computation=Fn(add), window_dimensions=w, window_strides=s,
                  padding=p, base_dilations=bd, window_dilations=wd)
        np.testing.assert_array_equal(got, np.asarray(want))
        checked += 1
        if dims and min(dims) > 0 and all(q >= 0 for pair in p for q in pair):  # no dilations here
            source_shape = shape_of("reduce-window", Shape.of(x), "f32[]", computation=Fn(add),
                                    window_dimensions=w, window_strides=s, padding=p)
            src = rng.integers(1, 9, source_shape.dims).astype(f32)
            xs = rng.integers(0, 3, dims).astype(f32)  # ties
            want = jax.jit(lambda o, so: _select_and_scatter(o, lax.ge, w, s, p, so, f32(0), lax.add))(xs, src)
            np.testing.assert_array_equal(_sas(xs, src, window_dimensions=w, window_strides=s, padding=p),
                                          np.asarray(want))
    assert checked > 10


# -- Sort -------------------------------------------------------------------------------------

def lt0(*p):
    return np.less(p[0], p[1])


@pytest.mark.parametrize("fn", both(lt0))
def test_sort_spec_example(fn):
    out = run("sort", np.array([3, 1], np.int32), np.array([42, 50], np.int32), np.array([-3.0, 1.1], f32),
              comparator=fn, dimension=0)
    np.testing.assert_array_equal(out[0], [1, 3])
    np.testing.assert_array_equal(out[1], [50, 42])
    np.testing.assert_array_equal(out[2], np.array([1.1, -3.0], f32))


@pytest.mark.parametrize("fn", both(lt0))
def test_sort_rows_and_columns(fn):
    x = np.array([[3, 1, 2], [9, 7, 8]], np.int32)
    np.testing.assert_array_equal(run("sort", x, comparator=fn, dimension=1), np.sort(x, axis=1))
    np.testing.assert_array_equal(run("sort", x.T.copy(), comparator=fn, dimension=0), np.sort(x.T, axis=0))


def _canonical_total_lt(a, b):
    """JAX's comparator: NaN and -0.0 canonicalised, then compared by total order."""
    def key(x):
        x = np.where(x == 0, f32(0), np.where(x != x, f32(np.nan), x)).astype(f32)
        bits = x.view(np.int32)
        return np.where(bits < 0, bits ^ np.int32(0x7FFFFFFF), bits)
    return key(np.asarray(a, f32)) < key(np.asarray(b, f32))


@pytest.mark.parametrize("elementwise", [True, False])
def test_sort_specials_total_order(elementwise):
    x = np.array([np.nan, 1, -np.inf, -0.0, 0.0, np.inf, -np.nan, -1, 0.0, -0.0], f32)
    out = run("sort", x, comparator=Fn(lambda a, b: _canonical_total_lt(a, b), elementwise), dimension=0)
    np.testing.assert_array_equal(out[:8], [-np.inf, -1, -0.0, 0.0, 0.0, -0.0, 1, np.inf])
    np.testing.assert_array_equal(np.signbit(out[2:6]), [True, False, False, True])  # stable among zeros
    assert np.isnan(out[8:]).all()


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 70), st.integers(1, 3), st.integers(0, 2 ** 16), st.booleans())
def test_sort_is_stable(n, rows, seed, elementwise):
    """argsort through Sort((keys, iota)) with a comparator on the keys only == a stable argsort."""
    keys = np.random.default_rng(seed).integers(0, 3, (rows, n)).astype(np.int32)
    iota = np.broadcast_to(np.arange(n, dtype=np.int32), keys.shape).copy()
    out_keys, perm = run("sort", keys, iota, comparator=Fn(lambda a, b, c, d: a < b, elementwise), dimension=1,
                         is_stable=True)
    np.testing.assert_array_equal(perm, np.argsort(keys, axis=1, kind="stable"))
    np.testing.assert_array_equal(out_keys, np.sort(keys, axis=1))


def test_sort_lexicographic_two_keys():
    a = np.array([2, 1, 2, 1, 0, 2, 1, 0], np.int32)
    b = np.array([5, 3, 1, 3, 9, 0, 2, 4], np.int32)
    c = np.arange(8, dtype=f32)

    def comp(a0, a1, b0, b1, c0, c1):
        return (a0 < a1) | ((a0 == a1) & (b0 < b1))

    for elementwise in (True, False):
        sa, sb, sc = run("sort", a, b, c, comparator=Fn(comp, elementwise), dimension=0, is_stable=True)
        order = np.lexsort((b, a))
        np.testing.assert_array_equal(sc, c[order])


def test_sort_inconsistent_comparator_still_permutes():
    """A non-strict comparator (<=) is not a strict weak order: the result is still a permutation."""
    x = np.array([3, 1, 3, 2, 1], np.int32)
    out = run("sort", x, comparator=Fn(lambda a, b: a <= b), dimension=0)
    np.testing.assert_array_equal(np.sort(out), np.sort(x))


@pytest.mark.parametrize("shapes, attrs, message", [
    (["f32[3]", "f32[4]"], dict(dimension=0), "operands[1] is f32[4] but operands[0] is f32[3]"),
    (["f32[3,4]"], dict(dimension=2), "dimension=2 is out of range for operands of rank 2"),
    (["f32[]"], dict(dimension=0), "dimension=0 is out of range for operands of rank 0"),
])
def test_sort_shape_rule_errors(shapes, attrs, message):
    with pytest.raises(ShapeError, match="Sort: ") as e:
        shape_of("sort", *shapes, comparator=Fn(lt0), **attrs)
    assert message in str(e.value)


def test_sort_shapes():
    assert str(shape_of("sort", "f32[5,6]", "s32[5,6]", comparator=Fn(lt0), dimension=1)) == "(f32[5,6], s32[5,6])"
    assert str(shape_of("sort", "f32[5,6]", comparator=Fn(lt0), dimension=0)) == "f32[5,6]"


# -- TopK ---------------------------------------------------------------------------------------

def test_topk_doc_example():
    values, index = run("topk", np.array([9., 3., 6., 4., 10.], f32), k=3, largest=True)
    np.testing.assert_array_equal(values, [10, 9, 6])
    np.testing.assert_array_equal(index, [4, 0, 2])
    assert index.dtype == np.int32


def test_topk_total_order_and_ties_like_xla_cpu():
    x = np.array([1, np.nan, 3, -np.nan, -0., 0., np.inf, -np.inf, 3, 0.], f32)
    values, index = run("topk", x, k=10, largest=True)
    np.testing.assert_array_equal(index, [1, 6, 2, 8, 0, 5, 9, 4, 7, 3])  # XLA:CPU's answer
    np.testing.assert_array_equal(np.signbit(values), [0, 0, 0, 0, 0, 0, 0, 1, 1, 1])
    _, index = run("topk", np.array([2, 1, 2, 0, 1], np.int32), k=5)
    np.testing.assert_array_equal(index, [0, 2, 1, 4, 3])
    values, index = run("topk", np.array([3, 250, 7, 250], np.uint8), k=4)
    np.testing.assert_array_equal(values, [250, 250, 7, 3])
    np.testing.assert_array_equal(index, [1, 3, 2, 0])


def test_topk_smallest_and_batch():
    x = np.array([[5, 1, 4, 1], [0, 0, 9, -1]], np.int32)
    values, index = run("topk", x, k=2, largest=False)
    np.testing.assert_array_equal(values, [[1, 1], [-1, 0]])
    np.testing.assert_array_equal(index, [[1, 3], [3, 0]])


@pytest.mark.parametrize("shape, k, message", [
    ("f32[4,10]", 11, "k=11 must be in [0, 10]"),
    ("f32[4,10]", -1, "k=-1 must be in [0, 10]"),
    ("f32[]", 1, "rank >= 1"),
    ("c64[4]", 1, "complex"),
])
def test_topk_shape_rule_errors(shape, k, message):
    with pytest.raises(ShapeError, match="TopK: ") as e:
        shape_of("topk", shape, k=k)
    assert message in str(e.value)


def test_topk_shape():
    assert str(shape_of("topk", "bf16[4,10]", k=3)) == "(bf16[4,3], s32[4,3])"


# -- HLO text: attributes parse and print back as XLA writes them --------------------------

HLO = """HloModule m, entry_computation_layout={(f32[4,6]{1,0})->f32[6,4]{1,0}}

max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}

ge {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT g = pred[] compare(a, b), direction=GE
}

lt {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  c = s32[] parameter(2)
  d = s32[] parameter(3)
  ROOT l = pred[] compare(a, b), direction=LT
}

ENTRY main {
  x = f32[4,6]{1,0} parameter(0)
  init = f32[] constant(-inf)
  rw = f32[7,5]{1,0} reduce-window(x, init), window={size=2x2 pad=0_1x1_0 lhs_dilate=2x1 rhs_dilate=1x2}, to_apply=max
  r = f32[4]{0} reduce(x, init), dimensions={1}, to_apply=max
  pooled = f32[2,2]{1,0} reduce-window(x, init), window={size=2x3 stride=2x3}, to_apply=max
  sas = f32[4,6]{1,0} select-and-scatter(x, pooled, init), window={size=2x3 stride=2x3}, select=ge, scatter=max
  iota = s32[4,6]{1,0} iota(), iota_dimension=1
  sort = (f32[4,6]{1,0}, s32[4,6]{1,0}) sort(x, iota), dimensions={1}, is_stable=true, to_apply=lt
  topk = (f32[4,3]{1,0}, s32[4,3]{1,0}) topk(x), k=3, largest=true
  ROOT out = f32[6,4]{1,0} reduce-window(x, init), window={size=2x2 lhs_dilate=2x1 rhs_dilate=1x2}, to_apply=max
}
"""


def test_hlo_attributes_parse_and_print():
    comp = xe.parse_hlo(HLO)
    rw = comp.instruction("rw")
    assert rw.attrs["window_dimensions"] == (2, 2) and rw.attrs["padding"] == ((0, 1), (1, 0))
    assert rw.attrs["base_dilations"] == (2, 1) and rw.attrs["window_dilations"] == (1, 2)
    assert rw.attrs["window_strides"] == (1, 1)
    assert comp.instruction("sort").attrs["dimension"] == 1 and comp.instruction("sort").attrs["is_stable"]
    assert comp.instruction("topk").attrs == {"k": 3, "largest": True}
    assert comp.instruction("sas").attrs["select"].name == "ge"
    text = comp.as_hlo_text()
    for line in ("window={size=2x2 pad=0_1x1_0 lhs_dilate=2x1 rhs_dilate=1x2}, to_apply=max",
                 "dimensions={1}, to_apply=max", "window={size=2x3 stride=2x3}, select=ge, scatter=max",
                 "dimensions={1}, is_stable=true, to_apply=lt", "topk(x), k=3, largest=true"):
        assert line in text
    assert xe.parse_hlo(text).as_hlo_text() == text


@needs_elementwise
def test_hlo_module_runs_and_verifies():
    comp = xe.parse_hlo(HLO).verify()
    x = np.random.default_rng(1).standard_normal((4, 6)).astype(f32)
    out = comp.run(x)
    want = run("reduce-window", x, f32(-np.inf), computation=Fn(np.maximum), window_dimensions=(2, 2),
               window_strides=(1, 1), padding=((0, 0), (0, 0)), base_dilations=(2, 1), window_dilations=(1, 2))
    np.testing.assert_array_equal(out, want)


# -- through the builder (needs the elementwise ops for the computations) -------------------

@needs_elementwise
def test_builder_reduce_and_reduce_window():
    b = xe.XlaBuilder("b")
    x = xe.Parameter(b, 0, xe.Shape("f32", (4, 6)))
    r = xe.Reduce(x, np.float32(0), lambda a, c: xe.Add(a, c), dimensions=[0, 1])
    assert str(r.shape) == "f32[]"
    w = xe.ReduceWindow(x, np.float32(-np.inf), lambda a, c: xe.Max(a, c), [2, 3], [2, 3], "SAME")
    assert str(w.shape) == "f32[2,2]"
    comp = b.build(xe.Tuple(r, w))
    text = comp.as_hlo_text()
    assert "reduce-window(" in text and "window={size=2x3 stride=2x3}" in text
    v = np.arange(24, dtype=f32).reshape(4, 6)
    total, pooled = comp.run(v)
    assert total == v.sum()
    np.testing.assert_array_equal(pooled, [[8, 11], [20, 23]])


@needs_elementwise
def test_eager_sort_default_comparator_and_topk():
    out = xe.Sort(np.array([3, 1, 2], np.int32))
    np.testing.assert_array_equal(out, [1, 2, 3])
    keys, vals = xe.Sort([np.array([3, 1], np.int32), np.array([42, 50], np.int32)])
    np.testing.assert_array_equal(vals, [50, 42])
    values, index = xe.TopK(np.array([9., 3., 6., 4., 10.], f32), 3)
    np.testing.assert_array_equal(index, [4, 0, 2])


@needs_elementwise
def test_eager_select_and_scatter_and_argmax():
    x = np.array([[7, 2, 5, 3, 10, 2], [3, 8, 9, 3, 4, 2]], f32)
    out = xe.SelectAndScatter(x, lambda a, c: xe.Ge(a, c), [2, 3], [2, 3], "VALID", np.array([[2, 6]], f32),
                              np.float32(0), lambda a, c: xe.Add(a, c))
    np.testing.assert_array_equal(out, [[0, 0, 0, 0, 6, 0], [0, 0, 2, 0, 0, 0]])

    def argmax(m, a, v, i):
        take = xe.Ge(v, m)
        return xe.Select(take, v, m), xe.Select(take, i, a)

    v = np.array([[3, 9, 2, 9]], f32)
    values, index = xe.Reduce([v, np.arange(4, dtype=np.int32)[None]], [np.float32(-np.inf), np.int32(0)],
                              argmax, [1])
    np.testing.assert_array_equal(index, [3])
