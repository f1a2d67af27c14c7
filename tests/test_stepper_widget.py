"""Headless tests of StepperWidget, the debugger over a run's trace: every command, every
error path, on parsed, built and JAX-imported programs."""
import html
import shutil

import numpy as np
import pytest

import xla_explorer as xe
from loopkit import LOOP


@pytest.fixture(scope="module")
def widgets():
    pytest.importorskip("ipywidgets", reason="ipywidgets is not installed (pip install 'xla_explorer[widgets]')")
    import xla_explorer.widgets as widgets
    return widgets


X = np.float32([1, 2, 3])


@pytest.fixture
def loop(widgets):
    return widgets.StepperWidget(xe.parse_hlo(LOOP), X, against=None, graph=False)


def test_stepper_steps_over_the_entry(loop):
    st = loop
    assert st.location == [("main", "x", 0)] and st.instruction.startswith("x = f32[3]")
    assert "argument 0" in st.value_text and st.value.tolist() == [1, 2, 3]
    names = [st.record.name]
    while not st.error:
        st.step()
        names.append(st.record.name) if not st.error else None
    assert names == ["x", "start", "init", "w", "r"]  # the loop is one step here
    assert st.error_control == "step" and "last instruction" in st.error
    assert "#b00020" in st._error_labels["step"].value
    assert st.value.tolist() == [2, 4, 6]  # doubled, halved, doubled
    np.testing.assert_array_equal(st.value, xe.parse_hlo(LOOP).run(X))


def test_stepper_steps_into_a_while_body_and_its_calls(loop):
    st = loop.run_to("w")
    assert st.location == [("main", "w", 0)] and "while(init)" in st.instruction
    st.step_into()  # into the body, iteration 0 (the condition ran first: run_to("lt") shows it)
    assert st.location == [("main", "w", 0), ("body", "s2", 0)]
    assert "parameter 0 of body, from w#0" in st.value_text and "iteration 0 of body" in st.location_text
    st.run_to("total")
    assert st.location[-1] == ("body", "total", 0) and float(st.value) == 6
    st.step_into()  # a reduce's body, run on whole arrays
    assert st.location[-2:] == [("body", "total", 0), ("sum", "a", 0)] and st.record.batched
    st.step_out()
    assert st.location[-1] == ("body", "total", 0)
    st.step().step()  # big, p
    assert st.record.name == "p" and bool(st.value) is True
    st.step().step_into()  # the conditional runs its true branch: double
    assert st.location[-2:] == [("body", "y", 0), ("double", "d", 0)]
    st.step()
    assert st.record.name == "twice" and st.value.tolist() == [2, 4, 6]
    st.step()  # the end of the branch: on after the conditional
    assert st.location[-1] == ("body", "out", 0)
    st.step()  # the end of the body: the condition of the next iteration
    assert st.location == [("main", "w", 0), ("cond", "s", 1)] and "iteration 1 of cond" in st.location_text
    st.run_to("y").step_into()  # iteration 1: total 12, the false branch
    assert st.location[-2:] == [("body", "y", 1), ("halve", "h", 0)]
    st.step_out().step_out()
    assert st.location == [("main", "w", 0)]


def test_stepper_jumps(loop):
    st = loop
    st.run_to("w").step_into(iteration=2)
    assert st.location == [("main", "w", 0), ("body", "s2", 2)] and st.iteration() == 2
    assert st.value[0] == 2
    st.run_to("twice", invocation=1)  # the second time the double branch ran: iteration 2
    assert st.location[-2:] == [("body", "y", 2), ("double", "twice", 1)]
    st.step_back()
    assert st.location == [("main", "w", 0), ("body", "s2", 2)]
    st.restart()
    assert st.position == 0
    st.breakpoints = ["total#2", "twice"]
    st.continue_()
    assert st.location[-1] == ("double", "twice", 0)
    st.continue_()
    assert st.location[-1] == ("body", "total", 2) and float(st.value) == 6
    st.continue_()
    assert st.location[-1] == ("double", "twice", 1)
    st.continue_()  # no breakpoint ahead: the end
    assert st.record.name == "r" and st.error == ""
    st.toggle_breakpoint("twice")
    assert st.breakpoints == ["total#2"] and st._breaks.value == ["total#2"]
    st.toggle_breakpoint()
    assert st.breakpoints == ["total#2", "r"]
    st.position = 3  # the timeline
    assert st.record.name == "w" and st._slider.value == 3
    st._slider.value = 0
    assert st.position == 0
    st._run_to.value = "ab#4"  # the run-to box: name#invocation, Enter
    assert st.location[-1] == ("sum", "ab", 4) and st._run_to.value == ""


def test_stepper_refuses_with_reasons(loop):
    st = loop
    before = st.position
    cases = [
        (lambda: st.step_out(), "step out", "entry computation"),
        (lambda: st.step_back(), "back", "nothing to go back"),
        (lambda: st.run_to("nothing"), "run to", "no instruction 'nothing'"),
        (lambda: st.run_to("twice", invocation=5), "run to", "invocation is 0..1"),
        (lambda: st.step_into(iteration=0), "step into", "runs no computation"),
    ]
    for command, control, text in cases:
        command()
        assert st.error_control == control and text in st.error, (control, st.error)
        assert html.escape(text) in st._error_labels[control].value and st.position == before
    st.run_to("w")
    st.step_into(iteration=3)
    assert "ran its body 3 time(s): iteration is 0..2, not 3" in st.error and st.record.name == "w"
    st.run_to("x")  # it ran once, before here
    assert "does not run after here" in st.error
    st.run_to("r").step().continue_()
    assert "end of the run" in st.error
    with pytest.raises(Exception, match="outside 0..88"):
        st.position = 89
    with pytest.raises(Exception, match="no instruction 'bogus'"):
        st.breakpoints = ["bogus"]
    with pytest.raises(Exception, match="invocation number"):
        st.breakpoints = ["twice#x"]
    st._breaks.value = ["bogus"]  # typed in the box: refused beside it, the box put back
    assert st.error_control == "breakpoints" and st._breaks.value == [] and st.breakpoints == []
    st._run_to.value = "twice#x"
    assert st.error_control == "run to" and "invocation number" in st.error
    st.restart()  # a command that works clears the message
    assert st.error == "" and st._error_labels["run to"].value == ""


def test_stepper_on_a_built_program_with_a_call_and_a_fusion(widgets):
    b = xe.XlaBuilder("built")
    x = xe.Parameter(b, 0, xe.Shape("f32", (2, 2)), "x")
    sq = xe.Call(lambda a: xe.Mul(a, a), x)
    total = xe.Reduce(sq, np.float32(0), xe.Add, dimensions=[0, 1])
    st = widgets.StepperWidget(b.build(total), np.float32([[1, 2], [3, 4]]), against=None, graph=False)
    st.run_to(sq.name).step_into()
    assert st.location[0] == ("built", sq.name, 0) and st.location[-1][1] == "p0"
    st.step()
    assert st.value.tolist() == [[1, 4], [9, 16]]
    fused = xe.parse_hlo("""HloModule f
fused {
  p = f32[3] parameter(0)
  e = f32[3] exponential(p)
  ROOT n = f32[3] negate(e)
}
ENTRY main {
  x = f32[3] parameter(0)
  ROOT f = f32[3] fusion(x), kind=kLoop, calls=fused
}
""")
    st = widgets.StepperWidget(fused, np.float32([0, 1, 2]), against=None, graph=False)
    st.run_to("f").step_into().step()
    assert st.location == [("main", "f", 0), ("fused", "e", 0)]
    np.testing.assert_allclose(st.value, np.exp([0, 1, 2]), rtol=1e-6)


def test_stepper_stops_where_a_run_fails(widgets):
    comp = xe.parse_hlo("HloModule m\nENTRY e {\n  x = f32[3] parameter(0)\n  c = f32[3] constant({...})\n"
                        "  ROOT a = f32[3] add(x, c)\n}\n")
    st = widgets.StepperWidget(comp, X, against=None, graph=False)
    st.run_to("c")
    assert "the run failed here" in st.value_text and "elided" in st.value_text
    st.step()
    assert "failed" in st.error


def test_stepper_summarises_big_values_and_compares_the_result(widgets):
    comp = xe.parse_hlo("HloModule m\nENTRY e {\n  p = f32[100,100] parameter(0)\n"
                        "  ROOT l = f32[100,100] log(p)\n}\n")
    arg = np.linspace(-1, 1, 10000, dtype=np.float32).reshape(100, 100)
    st = widgets.StepperWidget(comp, arg, against=lambda a: np.log(np.abs(a)), graph=False)
    st.step()
    assert "l: f32[100,100] (10000 elements)" in st.value_text and "NaN 5000" in st.value_text
    assert "against: max |difference|" in st.value_text and "5000 of 10000" in st.value_text
    assert "…" in st._values.value  # the table shows a corner


def test_stepper_marks_the_elements_that_differ_from_xla(widgets):
    pytest.importorskip("jax", reason="jax is not installed")
    st = widgets.StepperWidget(xe.parse_hlo(LOOP), X, graph=False)
    assert st.against == "jax"
    st.run_to("w").step_into().run_to("twice")
    assert st.compare_text.startswith("numpy vs jax: ok") and "0 of 3 elements" in st.compare_text
    assert "equal to XLA" in st._values.value
    st.run_to("ab")  # a batched body: compared through its caller
    assert "skipped" in st.compare_text and "through total" in st.compare_text
    # make the reference wrong at one element: the row says so, the cell is marked
    st.run_to("twice", invocation=0)
    rec = st.record
    rec.value = rec.value.copy()
    rec.value[1] += 1
    st._diffs.clear()
    st.step_back().run_to("twice", invocation=0)
    assert st.compare_text.startswith("numpy vs jax: mismatch") and "1 of 3 elements" in st.compare_text
    assert "first at [1]" in st.compare_text
    assert "background:#fdd" in st._values.value and "title='XLA: 4'" in st._values.value
    assert st._values.value.count("background:#fdd") == 1


def test_stepper_reaches_every_instruction_of_a_jax_gradient(widgets):
    jax = pytest.importorskip("jax", reason="jax is not installed")
    jnp = jax.numpy

    def loss(params, x, y):
        (w1, b1), (w2, b2) = params
        h = jax.nn.relu(x @ w1 + b1)
        return -jnp.mean(jnp.sum(jax.nn.log_softmax(h @ w2 + b2) * y, axis=-1))

    rng = np.random.default_rng(0)
    params = ((rng.standard_normal((4, 8)).astype(np.float32), np.zeros(8, np.float32)),
              (rng.standard_normal((8, 3)).astype(np.float32), np.zeros(3, np.float32)))
    x, y = rng.standard_normal((5, 4)).astype(np.float32), np.eye(3, dtype=np.float32)[[0, 1, 2, 0, 1]]
    comp = xe.from_jax(jax.grad(loss), params, x, y)
    st = widgets.StepperWidget(comp, params[0][0], params[0][1], params[1][0], params[1][1], x, y,
                               against=None, graph=False)
    every = {i.name for c in comp.computations for i in c.instructions}
    seen = {st.record.name}
    while True:  # "step into" pressed again and again walks the whole run
        st.step_into()
        if st.error:
            break
        seen.add(st.record.name)
    assert len(every) > 100 and seen == every


def test_stepper_graph_of_the_computation_it_is_in(widgets):
    st = widgets.StepperWidget(xe.parse_hlo(LOOP), X, against=None)
    if not shutil.which("dot"):
        assert "graph:" in st._graph.value
        return
    st.run_to("w").step_into().run_to("next")
    svg = st._graph.value
    assert "xe-scroll" in svg and "<svg" in svg and "drop-shadow" in svg and "body (call 0)" in svg
    assert "while" not in svg  # the body's graph, not the entry's
