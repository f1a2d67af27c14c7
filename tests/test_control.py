"""Tuples, calls and control flow: the spec's examples, shape rules, eager and built forms."""
import numpy as np
import pytest

import xla_explorer as xe

F32 = xe.Shape("f32", ())
S32 = xe.Shape("s32", ())


def test_while_spec_example_counts_to_1000():
    # the spec's example: while (result < 1000) result = result + 1
    b = xe.XlaBuilder("loop")
    init = xe.Parameter(b, 0, S32, "init")
    w = xe.While(lambda r: xe.Lt(r, xe.Constant(r.builder, np.int32(1000))),
                 lambda r: xe.Add(r, xe.Constant(r.builder, np.int32(1))), init)
    assert w.shape == S32
    comp = b.build(w)
    assert comp.run(np.int32(0)) == 1000
    assert comp.run(np.int32(5000)) == 5000  # condition false at once: the init comes back


def test_while_with_tuple_state():
    b = xe.XlaBuilder("fori")
    state = xe.Parameter(b, 0, xe.Shape.parse("(s32[], f32[3])"), "state")

    def cond(s):
        return xe.Lt(xe.GetTupleElement(s, 0), xe.Constant(s.builder, np.int32(4)))

    def body(s):
        i, x = xe.GetTupleElement(s, 0), xe.GetTupleElement(s, 1)
        return xe.Tuple(xe.Add(i, xe.Constant(s.builder, np.int32(1))), xe.Add(x, x))

    comp = b.build(xe.While(cond, body, state))
    i, x = comp.run((np.int32(0), np.ones(3, np.float32)))
    assert i == 4
    np.testing.assert_array_equal(x, np.full(3, 16, np.float32))
    text = comp.as_hlo_text()
    assert "while(" in text and "condition=" in text and "body=" in text
    assert xe.parse_hlo(text).run((np.int32(1), np.ones(3, np.float32)))[0] == 4


def test_while_shape_rules():
    b = xe.XlaBuilder("bad")
    x = xe.Parameter(b, 0, S32, "x")
    with pytest.raises(xe.ShapeError, match="condition must return pred"):
        xe.While(lambda r: r, lambda r: r, x)
    with pytest.raises(xe.ShapeError, match="body returns f32"):
        xe.While(lambda r: xe.Lt(r, r), lambda r: xe.Constant(r.builder, np.float32(1)), x)


def test_conditional_pred_form():
    b = xe.XlaBuilder("cond")
    p = xe.Parameter(b, 0, xe.Shape("pred", ()), "p")
    x = xe.Parameter(b, 1, F32, "x")
    y = xe.Parameter(b, 2, S32, "y")
    c = xe.Conditional(p, x, lambda v: xe.Add(v, v), y,
                       lambda v: xe.ConvertElementType(v, "f32"))
    comp = b.build(c)
    assert comp.run(True, np.float32(3), np.int32(7)) == 6
    assert comp.run(False, np.float32(3), np.int32(7)) == 7


def test_conditional_branch_index_form_and_out_of_range():
    b = xe.XlaBuilder("switch")
    i = xe.Parameter(b, 0, S32, "i")
    x = xe.Parameter(b, 1, F32, "x")
    branches = [lambda v: xe.Add(v, v), lambda v: xe.Mul(v, v), lambda v: xe.Neg(v)]
    comp = b.build(xe.Conditional(i, branches, [x, x, x]))
    got = [float(comp.run(np.int32(k), np.float32(3))) for k in (0, 1, 2, 7, -1)]
    assert got == [6.0, 9.0, -3.0, -3.0, -3.0]  # out of range: the last branch, as XLA does


def test_conditional_shape_rules():
    b = xe.XlaBuilder("bad")
    p = xe.Parameter(b, 0, xe.Shape("pred", ()), "p")
    x = xe.Parameter(b, 1, F32, "x")
    with pytest.raises(xe.ShapeError, match="branch 1 returns s32"):
        xe.Conditional(p, x, lambda v: v, x, lambda v: xe.Constant(v.builder, np.int32(1)))
    i = xe.Parameter(b, 2, xe.Shape("s32", (2,)), "i")
    with pytest.raises(xe.ShapeError, match="selector must be pred"):
        xe.Conditional(i, [lambda v: v], [x])


def test_call_and_map():
    sub = xe.XlaBuilder("double")
    v = xe.Parameter(sub, 0, xe.Shape("f32", (2,)), "v")
    double = sub.build(xe.Add(v, v))
    b = xe.XlaBuilder("main")
    x = xe.Parameter(b, 0, xe.Shape("f32", (2,)), "x")
    comp = b.build(xe.Call(double, x))
    np.testing.assert_array_equal(comp.run(np.array([1, 2], np.float32)), [2, 4])
    assert "to_apply=" in comp.as_hlo_text()
    # Map: a scalar computation at every index (eager)
    out = xe.Map([np.array([1, 2, 3], np.float32), np.array([10, 20, 30], np.float32)],
                 lambda a, c: xe.Add(xe.Mul(a, a), c))
    np.testing.assert_array_equal(out, [11, 24, 39])
    with pytest.raises(xe.ShapeError, match="takes 1 parameters"):
        xe.Call(double, x, x)


def test_map_shape_rules():
    with pytest.raises(xe.ShapeError, match="same dimensions"):
        xe.Map([np.zeros(2, np.float32), np.zeros(3, np.float32)], lambda a, c: a)


def test_tuple_and_get_tuple_element_rules():
    b = xe.XlaBuilder("t")
    x = xe.Parameter(b, 0, F32, "x")
    t = xe.Tuple(x, xe.Tuple(x, x))
    assert str(t.shape) == "(f32[], (f32[], f32[]))"
    with pytest.raises(xe.ShapeError, match=r"index=2 is out of range.*2 elements"):
        xe.GetTupleElement(t, 2)
    with pytest.raises(xe.ShapeError, match="must be a tuple"):
        xe.GetTupleElement(x, 0)


def test_after_all_opt_barrier_dimension_sizes():
    b = xe.XlaBuilder("misc")
    x = xe.Parameter(b, 0, xe.Shape("f32", (5, 3)), "x")
    tok = xe.AfterAll(b, [xe.CreateToken(b), xe.CreateToken(b)])
    assert tok.shape.is_token
    n = xe.GetDimensionSize(x, 0)
    assert n.shape == S32
    dyn = xe.SetDimensionSize(x, xe.Constant(b, np.int32(2)), 0)
    assert str(dyn.shape) == "f32[<=5,3]"
    barrier = xe.OptimizationBarrier(xe.Tuple(x, n))
    comp = b.build(xe.Tuple(barrier, dyn, tok))
    (xv, nv), dv, tv = comp.run(np.ones((5, 3), np.float32))
    assert nv == 5 and dv.shape == (2, 3)
    with pytest.raises(xe.ShapeError, match="dimension=2 is out of range"):
        xe.GetDimensionSize(x, 2)


def test_parameters_must_be_numbered_densely():
    b = xe.XlaBuilder("gaps")
    xe.Parameter(b, 1, F32, "x")
    with pytest.raises(xe.ShapeError, match="0..n-1"):
        b.build()
    with pytest.raises(xe.ShapeError, match="already used"):
        xe.Parameter(b, 1, F32, "y")


def test_run_checks_arguments():
    b = xe.XlaBuilder("args")
    x = xe.Parameter(b, 0, xe.Shape("f32", (2,)), "x")
    comp = b.build(xe.Tuple(x))
    with pytest.raises(xe.ExecutionError, match="takes 1 arguments"):
        comp.run()
    with pytest.raises(xe.ExecutionError, match=r"expected f32\[2\].*shape \[3\]"):
        comp.run(np.zeros(3, np.float32))
    with pytest.raises(xe.ExecutionError, match="dtype int32"):
        comp.run(np.zeros(2, np.int32))
    # plain Python values take the parameter's type
    assert comp.run([1.5, 2])[0].dtype == np.float32


def test_huge_results_refused_before_allocating():
    b = xe.XlaBuilder("huge")
    x = xe.Parameter(b, 0, F32, "x")
    big = xe.Broadcast(x, [1 << 20, 1 << 20])  # shapes are symbolic: building is fine
    assert str(big.shape) == "f32[1048576,1048576]"
    comp = b.build(big)
    with pytest.raises(xe.SizeLimitError, match="more than the limit"):
        comp.run(np.float32(1))
    with pytest.raises(xe.SizeLimitError, match="Broadcast"):
        xe.Broadcast(np.float32(1), [1 << 20, 1 << 20])
