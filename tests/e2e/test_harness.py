"""The harness itself, on plain ipywidgets: a control found by its description, changed in
the browser, reaches the kernel, and the kernel's answer reaches the page."""
import nbformat

CODE = """
import ipywidgets as w
direction = w.Dropdown(options=["EQ", "LT", "GT"], value="EQ", description="direction")
size = w.IntText(value=3, description="size")
flag = w.Checkbox(value=False, description="flag")
out = w.HTML()
def show(_=None):
    out.value = f"<b class='answer'>{direction.value} {size.value} {flag.value}</b>"
for c in (direction, size, flag):
    c.observe(show, names="value")
show()
small = w.HTML("<span style='font-size:8px'>tiny print</span>")
cut = w.HTML("<div style='width:40px; overflow:hidden; white-space:nowrap'>a line far too long for its box</div>")
w.VBox([direction, size, flag, out, small, cut])
"""


def test_a_widget_round_trip(notebook):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(CODE)])
    notebook.open(nb, "harness.ipynb")
    notebook.run_all()
    answer = notebook.page.locator(".answer")
    assert answer.inner_text() == "EQ 3 False"
    notebook.set_control("direction", "LT")
    notebook.set_control("size", 5)
    notebook.set_control("flag", True)
    answer.filter(has_text="LT 5 True").wait_for()
    assert notebook.execute("print(direction.value, size.value)").strip() == "LT 5"
    path = notebook.screenshot("harness", notebook.page.locator(".jp-OutputArea-output").first)
    assert path.stat().st_size > 1000
    # the legibility check finds what a student could not read, and nothing else
    assert notebook.illegible(answer) == []
    found = notebook.illegible(notebook.page.locator(".jp-OutputArea-output").first)
    assert len(found) == 2 and found[0].startswith("8.0 px: SPAN tiny print") and "cut (" in found[1], found
