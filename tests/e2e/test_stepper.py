"""The stepper in JupyterLab: step into a while body with the buttons, read the page."""
import nbformat

from loopkit import LOOP  # the loop of the headless stepper tests: 3 iterations, a reduce and a conditional

CODE = f'''import numpy as np
import xla_explorer as xe
from xla_explorer.widgets import StepperWidget
comp = xe.parse_hlo({LOOP!r})
st = StepperWidget(comp, np.float32([1, 2, 3]))
st'''


def test_stepper_steps_into_a_while_body(notebook):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(CODE)])
    notebook.open(nb, "stepper_while.ipynb")
    notebook.run_all()
    st = notebook.page.locator(".xe-stepper")
    location = st.locator(".xe-location")
    location.filter(has_text="main: x").wait_for()
    button = lambda text: st.locator("button", has_text=text).first  # noqa: E731

    for _ in range(3):  # x -> start -> init -> w
        button("step").click()
    location.filter(has_text="main: w").wait_for()
    assert "while(init)" in st.locator(".xe-instruction").inner_text()

    button("step into").click()
    location.filter(has_text="body: s2").wait_for()
    assert "iteration 0 of body" in location.inner_text()
    assert notebook.execute("print(st.location)").strip() == "[('main', 'w', 0), ('body', 's2', 0)]"
    graph = st.locator(".xe-graph svg")
    graph.wait_for()
    drawn = graph.text_content()
    assert "body" in drawn and "while" not in drawn  # the body's graph
    assert st.locator(".xe-graph svg g.node[style*='drop-shadow']").count() == 1  # the current node glows

    for _ in range(6):  # s2 -> i2 -> x2 -> one -> next -> zero -> total
        button("step").click()
    location.filter(has_text="body: total").wait_for()
    values = st.locator(".xe-values")
    values.filter(has_text="total: f32[]").wait_for()
    assert "6" in values.locator("table").last.inner_text()
    values.filter(has_text="numpy vs jax: ok").wait_for()  # compared with XLA on the same operands
    notebook.screenshot("stepper_while_body", st)

    # the run-to box: the second time the double branch ran (iteration 2)
    box = st.locator(".xe-run-to input")
    box.fill("twice#1")
    box.press("Enter")
    location.filter(has_text="double: twice").wait_for()
    assert "iteration" not in location.inner_text() or "call 0 of double" in location.inner_text()
    assert notebook.execute("print(st.location[-2:])").strip() == "[('body', 'y', 2), ('double', 'twice', 1)]"

    button("step out").click()
    location.filter(has_text="body: y").wait_for()
    button("step out").click()
    button("step out").click()  # in the entry: refused, under the buttons
    error = st.locator(".xe-error-commands")
    error.filter(has_text="nothing to step out to").wait_for()
    notebook.screenshot("stepper_step_out_refused", st)
