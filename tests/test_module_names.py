"""Instruction names are unique across a module, as in XLA, in memory as printed: a trace
keys its records by name, so two instructions never share one."""
import numpy as np
import pytest

import xla_explorer as xe
from xla_explorer.executors import reference

f32, s32 = np.float32, np.int32


def names_of(comp):
    """[(computation, [instruction names])] in module order."""
    return [(c.name, [i.name for i in c.instructions]) for c in comp.computations]


def assert_prints_as_in_memory(comp):
    """The printed text names every computation and instruction as the module does."""
    again = xe.parse_hlo(comp.as_hlo_text())
    assert names_of(again) == names_of(comp)
    everything = [n for _, ns in names_of(comp) for n in ns]
    assert len(everything) == len(set(everything))


def counting_loop(limit=3):
    b = xe.XlaBuilder("loop")
    init = xe.Parameter(b, 0, xe.Shape("s32", ()), "init")
    return b.build(xe.While(lambda r: xe.Lt(r, xe.Constant(r.builder, s32(limit))),
                            lambda r: xe.Add(r, xe.Constant(r.builder, s32(1))), init))


def test_a_while_condition_and_body_traced_from_callables_do_not_share_parameter_names():
    comp = counting_loop(3)
    cond, body = comp.entry.root.attrs["condition"], comp.entry.root.attrs["body"]
    p_cond, p_body = cond.parameters[0].name, body.parameters[0].name
    assert p_cond != p_body and {p_cond, p_body} == {"p0", "p0.1"}
    assert_prints_as_in_memory(comp)
    t = comp.trace(s32(0))
    # the condition runs once more than the body: separate counts, separate records
    assert t.count(p_cond) == 4 and t.count(p_body) == 3
    assert [r.computation for r in t.invocations(p_body)] == [body.name] * 3
    assert t.value(p_body, 2) == 2 and t.value(p_cond, 3) == 3


def test_reusing_a_built_computation_never_renames_it():
    a = xe.XlaBuilder("add")
    add = a.build(xe.Add(xe.Parameter(a, 0, "f32[]", "x"), xe.Parameter(a, 1, "f32[]", "y")))
    before = add.as_hlo_text()
    m = xe.XlaBuilder("main")
    x = xe.Parameter(m, 0, "f32[4]", "x")       # the same name as add's parameter
    comp = m.build(xe.Add(xe.Reduce(x, f32(0), add, dimensions=[0]), xe.Reduce(x, f32(1), add, dimensions=[0])))
    assert add.as_hlo_text() == before
    assert_prints_as_in_memory(comp)
    assert x.name == "x.1" and comp.entry.parameters[0] is x.inst   # the new module's own name moved
    assert comp.run(np.ones(4, f32)) == 9
    # a second computation with the same names, reused beside the first: copied under new names
    a2 = xe.XlaBuilder("add")
    mul = a2.build(xe.Mul(xe.Parameter(a2, 0, "f32[]", "x"), xe.Parameter(a2, 1, "f32[]", "y")))
    mul_before = mul.as_hlo_text()
    m2 = xe.XlaBuilder("main2")
    q = xe.Parameter(m2, 0, "f32[4]", "q")
    both = m2.build(xe.Add(xe.Reduce(q, f32(0), add, dimensions=[0]), xe.Reduce(q, f32(1), mul, dimensions=[0])))
    assert add.as_hlo_text() == before and mul.as_hlo_text() == mul_before
    assert_prints_as_in_memory(both)
    assert len({c.name for c in both.computations}) == 3
    assert both.run(np.full(4, 2, f32)) == 8 + 16
    t = both.trace(np.full(4, 2, f32))
    assert sum(t.count(p.name) for c in both.computations if c is not both.entry for p in c.parameters) > 0


def test_building_twice_leaves_the_first_module_as_it_was():
    b = xe.XlaBuilder("twice")
    x = xe.Parameter(b, 0, "f32[3]", "x")
    y = xe.Map([x], lambda v: xe.Mul(v, v), dimensions=[0])
    first = b.build(y)
    text = first.as_hlo_text()
    z = xe.Map([y], lambda v: xe.Add(v, v), dimensions=[0])   # its body's parameter is p0 too
    second = b.build(z)
    assert first.as_hlo_text() == text
    assert_prints_as_in_memory(second)
    np.testing.assert_array_equal(second.run(f32([1, 2, 3])), [2, 8, 18])


def test_any_display_name_becomes_an_identifier_in_memory_too():
    b = xe.XlaBuilder("a builder")
    p = xe.Parameter(b, 0, "f32[]", "my x")
    q = xe.Parameter(b, 1, "f32[]", "my_x")
    comp = b.build(xe.Add(p, q))
    assert {p.name, q.name} == {"my_x", "my_x.1"} and comp.entry.name == "a_builder"
    assert_prints_as_in_memory(comp)
    assert comp.trace(f32(1), f32(2)).value(p.name) == 1


def test_parsed_text_repeating_a_name_gets_xla_suffixes_in_text_order():
    comp = xe.parse_hlo("""HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY main {
  a = f32[4] parameter(0)
  z = f32[] constant(0)
  ROOT s = f32[] reduce(a, z), dimensions={0}, to_apply=add
}""")
    assert names_of(comp) == [("add", ["a", "b", "s"]), ("main", ["a.1", "z", "s.1"])]
    assert_prints_as_in_memory(comp)
    t = comp.trace(f32([1, 2, 3, 4]))
    assert t.value("s.1") == 10 and t.get("a.1").computation == "main"


def test_a_computation_may_share_a_name_with_an_instruction():
    # what JAX prints for an FFT: computation fft.1 and instruction fft.1 (separate namespaces)
    comp = xe.parse_hlo("""HloModule m
neg.1 {
  p = f32[2] parameter(0)
  ROOT neg.1 = f32[2] negate(p)
}
ENTRY main {
  x = f32[2] parameter(0)
  ROOT neg.2 = f32[2] call(x), to_apply=neg.1
}""")
    assert "ROOT neg.1 = f32[2]{0} negate(p)" in comp.as_hlo_text()
    assert_prints_as_in_memory(comp)


def test_a_module_edited_to_repeat_a_name_is_refused_naming_both_places():
    comp = counting_loop(2)
    cond, body = comp.entry.root.attrs["condition"], comp.entry.root.attrs["body"]
    body.parameters[0].name = cond.parameters[0].name
    with pytest.raises(xe.HloParseError, match=rf"'{cond.parameters[0].name}' is used twice .*computation "
                                               rf"{cond.name} and .*computation {body.name}"):
        comp.trace(s32(0))
    with pytest.raises(xe.HloParseError, match="unique across a module"):
        comp.verify()


def test_only_regions_evaluated_on_whole_arrays_are_batched():
    b = xe.XlaBuilder("cond")
    p = xe.Parameter(b, 0, "pred[]", "p")
    x = xe.Parameter(b, 1, "f32[4]", "x")
    branch = xe.Conditional(p, x, lambda v: xe.Neg(v), x, lambda v: xe.Add(v, v))
    total = xe.Reduce(branch, f32(0), xe.Add, dimensions=[0])
    comp = b.build(total)
    t = comp.trace(np.bool_(True), f32([1, 2, 3, 4]))
    taken = [r for r in t.records if r.depth == 1 and r.stack[-1][1] == branch.name]
    summed = [r for r in t.records if r.depth == 1 and r.stack[-1][1] == total.name]
    assert taken and not any(r.batched for r in taken)          # f32[4] values of f32[4] instructions
    assert all(np.shape(r.value) == (4,) for r in taken if r.kept)
    # the reduce body (f32[] instructions) folded on arrays is batched; its last fold, on scalars, is not
    assert summed and any(r.batched for r in summed)
    assert all(r.batched == (np.ndim(r.value) > 0) for r in summed if r.opcode == "parameter")
    # a while body of element-wise instructions on its declared f32[4] state: not batched either
    w = xe.XlaBuilder("w")
    s = xe.Parameter(w, 0, "(s32[], f32[4])", "s")
    loop = xe.While(lambda st: xe.Lt(xe.GetTupleElement(st, 0), s32(2)),
                    lambda st: xe.Tuple(xe.Add(xe.GetTupleElement(st, 0), s32(1)),
                                        xe.Add(xe.GetTupleElement(st, 1), xe.GetTupleElement(st, 1))), s)
    wt = w.build(loop).trace((s32(0), f32([1, 2, 3, 4])))
    assert not any(r.batched for r in wt.records)
    assert reference.Region(loop.inst.attrs["body"], reference.ExecutionContext()).is_elementwise


def test_a_reused_module_whose_callee_clashes_is_copied_with_its_callers():
    def adder(name):
        a = xe.XlaBuilder(name)
        return a.build(xe.Add(xe.Parameter(a, 0, "f32[]", "x"), xe.Parameter(a, 1, "f32[]", "y")))

    inner = adder("sum")
    o = xe.XlaBuilder("outer")
    v = xe.Parameter(o, 0, "f32[3]", "v")
    outer = o.build(xe.Reduce(v, f32(0), inner, dimensions=[0]))   # outer calls inner
    other = adder("sum")                                           # same names again, another module
    texts = [m.as_hlo_text() for m in (inner, outer, other)]
    m = xe.XlaBuilder("main")
    w = xe.Parameter(m, 0, "f32[3]", "w")
    # other is called first, so it keeps its names: inner, deeper, is copied, and outer with it
    both = m.build(xe.Add(xe.Reduce(w, f32(1), other, dimensions=[0]), xe.Call(outer, w)))
    assert [m.as_hlo_text() for m in (inner, outer, other)] == texts     # nothing reused changed
    assert_prints_as_in_memory(both)
    assert both.run(f32([1, 2, 3])) == 7 + 6
    assert other.entry in both.computations and inner.entry not in both.computations
    # the copy of the clashing computation is called by a copy of its caller, in this module only
    called = {c.name for c in both.computations}
    assert len(called) == 4 and both.computation("outer") is not outer.entry
