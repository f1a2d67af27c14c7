"""``comp.trace``: every invocation of every instruction, on built, parsed and JAX programs."""
import numpy as np
import pytest

import xla_explorer as xe
from xla_explorer.executors import reference
from xla_explorer.ops import registry

from loopkit import LOOP as LOOP_HLO  # shared with the stepper tests


def loop_module():
    return xe.parse_hlo(LOOP_HLO)


def test_parsed_while_conditional_and_reduce_bodies():
    comp = loop_module()
    x = np.array([1, 2, 3], np.float32)
    t = comp.trace(x)
    np.testing.assert_array_equal(t.result, comp.run(x))
    # the condition runs once more than the body
    assert t.count("lt") == 4 and t.count("next") == 3 and t.count("w") == 1
    # iteration k of the body is invocation k of its instructions, with the while on the stack
    assert [int(t.value("next", k)) for k in range(3)] == [1, 2, 3]
    rec = t.get("total", 1)
    assert rec.computation == "body" and rec.stack == (("main", "w", 0),)
    assert rec.location == (("main", "w", 0), ("body", "total", 1))
    assert t.records[rec.parent].name == "w" and rec.depth == 1
    # total 6 < 10: doubled; 12: halved; 6: doubled
    assert [float(t.value("total", k)) for k in range(3)] == [6, 12, 6]
    assert t.count("twice") == 2 and t.count("m") == 1
    # `double` is element-wise, but a branch runs once per invocation on its declared f32[3]:
    # not batched (a reduce body folded on whole arrays is)
    taken = t.invocations("d") + t.invocations("twice") + t.invocations("m")
    assert len(taken) == 5 and not any(r.batched for r in taken)
    assert all(np.shape(r.value) == (3,) for r in taken)
    assert any(r.batched for r in t.invocations("ab"))
    assert t.get("m").stack == (("main", "w", 0), ("body", "y", 1))
    # the reduce body sits under the reduce: three levels deep
    ab = t.invocations("ab")[0]
    assert ab.stack[:2] == (("main", "w", 0), ("body", "total", 0)) and ab.depth == 2
    # operands come from the same call of the computation: iteration 2's total
    np.testing.assert_array_equal(t.operand_values("total", 1)[0], [2, 4, 6])
    # start order: a while record precedes its body's records, and holds the final value
    w = t.get("w")
    assert all(r.seq > w.seq for r in t.records if r.depth > 0)
    np.testing.assert_array_equal(w.value[1], t.result)
    assert [r.seq for r in t.records] == list(range(len(t.records)))


def test_errors_name_what_exists():
    t = loop_module().trace(np.array([40, 0, 0], np.float32))
    # totals 40, 20, 10: always halved, `double` never runs
    with pytest.raises(KeyError, match=r"twice \(add in double\) never ran.*called by y \(conditional\)"):
        t.get("twice")
    with pytest.raises(KeyError, match="ran 3 times: invocation is 0..2, not 5"):
        t.get("m", 5)
    with pytest.raises(KeyError, match="did you mean"):
        t.get("totl")
    assert t.count("twice") == 0 and t.invocations("twice") == []
    with pytest.raises(xe.ExecutionError, match="parameter of body"):
        t.operand_values("s2")


def test_keep_names_keeps_operands_and_budget_is_reported():
    comp = loop_module()
    x = np.array([1, 2, 3], np.float32)
    t = comp.trace(x, keep=["total"])
    assert t.get("total", 2).kept and t.get("x2", 2).kept and t.get("zero", 2).kept
    assert not t.get("next").kept and t.get("next").value is None
    np.testing.assert_array_equal(t.result, comp.run(x))  # the result does not depend on what is kept
    with pytest.raises(xe.ExecutionError, match=r"keep=\['next'\]"):
        t.value("next")
    with pytest.raises(KeyError, match="not instructions"):
        comp.trace(x, keep=["nope"])
    # a predicate: only the entry's values
    t = comp.trace(x, keep=lambda r: r.depth == 0)
    assert all(r.kept == (r.depth == 0) for r in t.records)
    # a budget of 40 bytes: the first values fit, then the trace says values were cut
    t = comp.trace(x, max_bytes=40)
    assert t.cut and t.kept_bytes <= 40 and "max_bytes=40" in repr(t)
    late = next(r for r in reversed(t.records) if not r.kept)
    with pytest.raises(xe.ExecutionError, match="max_bytes"):
        t.value(late.name, late.invocation)
    assert not comp.trace(x).cut


def test_max_records_keeps_counts_exact():
    b = xe.XlaBuilder("loop")
    init = xe.Parameter(b, 0, xe.Shape("s32", ()), "init")
    comp = b.build(xe.While(lambda r: xe.Lt(r, xe.Constant(r.builder, np.int32(100))),
                            lambda r: xe.Add(r, xe.Constant(r.builder, np.int32(1))), init))
    t = comp.trace(np.int32(0), max_records=50)
    assert len(t.records) == 50 and t.records_cut > 0
    add = next(i.name for c in comp.computations for i in c.instructions if i.opcode == "add")
    assert t.count(add) == 100
    with pytest.raises(KeyError, match="max_records"):
        t.get(add, 99)


def _rerun(t, rec):
    """The instruction of ``rec`` run again by its reference on the operands the trace kept."""
    op = registry.get(rec.opcode)
    return reference.run_instruction(op, rec.name, t.operand_values(rec.name, rec.invocation), rec.shape,
                                     rec.instruction.attrs, reference.ExecutionContext(), rec.batched)


def _same(a, b):
    if isinstance(a, tuple):
        return all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, reference.Token):
        return True
    return np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True)


def _check_every_record(t):
    """Each kept value is what its instruction computes from its kept operand values."""
    checked = 0
    for rec in t.records:
        if not rec.kept or rec.operands is None or rec.opcode in registry.CATEGORIES.get("rng", ()):
            continue
        assert _same(_rerun(t, rec), rec.value), rec
        checked += 1
    return checked


def test_every_value_is_what_its_instruction_computes():
    comp = loop_module()
    assert _check_every_record(comp.trace(np.array([1, 2, 3], np.float32))) > 20


def test_built_program_elementwise_bodies_are_batched():
    b = xe.XlaBuilder("demo")
    x = xe.Parameter(b, 0, xe.Shape("f32", (3, 4)), "x")
    r = xe.Reduce(x, xe.Constant(b, np.float32(0)), lambda a, c: xe.Add(a, c), dimensions=[1])
    comp = b.build(xe.Mul(r, r))
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = comp.trace(x)
    body = [r for r in t.records if r.depth == 1]
    # the reference folds an element-wise body pairwise on whole arrays: few calls, arrays as values
    assert body and all(r.batched for r in body)
    assert max(np.ndim(r.value) for r in body) >= 1
    assert t.count(body[-1].name) < 12
    np.testing.assert_array_equal(t.result, comp.run(x))


def test_error_carries_the_partial_trace():
    comp = xe.parse_hlo("""HloModule m
ENTRY main {
  x = f32[2] parameter(0)
  y = f32[2] add(x, x)
  tok = token[] after-all()
  inf = (f32[2], token[]) infeed(tok)
  v = f32[2] get-tuple-element(inf), index=0
  ROOT z = f32[2] add(y, v)
}""")
    with pytest.raises(xe.ExecutionError, match="Infeed") as info:
        comp.trace(np.ones(2, np.float32))
    t = info.value.trace
    np.testing.assert_array_equal(t.value("y"), [2, 2])
    assert t.get("inf").done and not t.get("inf").kept and t.count("z") == 0
    with pytest.raises(KeyError, match="stopped early"):
        t.get("z")


def test_instruction_values_and_diff_read_the_trace():
    from xla_explorer.inspect import instruction_values
    comp = loop_module()
    x = np.array([1, 2, 3], np.float32)
    values = instruction_values(comp, x)
    assert {i.name for i in values} == {i.name for i in comp.entry.instructions}
    np.testing.assert_array_equal(values[comp.entry.root], comp.run(x))


jax = pytest.importorskip("jax")
jnp = jax.numpy


def test_jax_scan_dynamic_slice_per_iteration():
    def f(x, i):
        def body(c, k):
            s = jax.lax.dynamic_slice(x, (k, np.int32(0)), (2, 4))
            return c + s.sum(), s
        return jax.lax.scan(body, 0.0, i)

    x = np.arange(32, dtype=np.float32).reshape(8, 4)
    i = np.array([0, 3, 7], np.int32)
    comp = xe.from_jax(f, x, i)
    t = comp.trace(x, i)
    ds = [r for r in t.records if r.opcode == "dynamic-slice" and r.shape.dims == (2, 4)]
    assert [r.invocation for r in ds] == [0, 1, 2]
    assert all(r.stack[0][1].startswith("while") for r in ds)
    # start 7 is clamped to 6: the last two rows
    for r, start in zip(ds, (0, 3, 6)):
        np.testing.assert_array_equal(r.value, x[start:start + 2])
    np.testing.assert_array_equal(t.result[1], np.stack([x[s:s + 2] for s in (0, 3, 6)]))
    assert _check_every_record(t) > 30


def test_jax_grad_of_take_and_optimized_fusions():
    x = np.arange(24, dtype=np.float32).reshape(6, 4)
    i = np.array([4, 0, 4], np.int32)

    def loss(x, i):
        return (jnp.take(x, i, axis=0) ** 2).sum()

    for optimized in (False, True):
        comp = xe.from_jax(jax.grad(loss), x, i, optimized=optimized)
        t = comp.trace(x, i)
        np.testing.assert_allclose(t.result, jax.grad(loss)(x, i))
        g = next(r for r in t.records if r.opcode == "gather")
        s = next(r for r in t.records if r.opcode == "scatter")
        assert g.depth >= 1 and s.depth >= 1   # inside a call (unoptimized) or a fusion (optimized)
        np.testing.assert_array_equal(g.value.reshape(3, 4), x[i])
        assert _check_every_record(t) > 5


def test_trace_replicated_all_reduce():
    b = xe.XlaBuilder("ar")
    x = xe.Parameter(b, 0, xe.Shape("f32", (3,)), "x")
    comp = b.build(xe.AllReduce(x, lambda a, c: xe.Add(a, c)))
    vals = [[np.full(3, d, np.float32)] for d in range(4)]
    t = comp.trace_replicated(vals)
    assert t.num_devices == 4
    name = comp.entry.root.name
    for d in range(4):
        td = t.for_device(d)
        np.testing.assert_array_equal(td.value(name), np.full(3, 6, np.float32))
        np.testing.assert_array_equal(td.operand_values(name)[0], vals[d][0])
