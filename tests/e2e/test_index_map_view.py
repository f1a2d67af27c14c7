"""The index-map view in a real JupyterLab: hovering a result cell lights the operand cells
it reads (the kernel draws, the browser forwards the hover); clicking pins; the
animation's player shows its first frame after Run All without a click, and the stepper
a picture (not the text of a Figure) in a fresh kernel."""
import json

import nbformat

SETUP = """
import numpy as np, xla_explorer as xe
operand = np.arange(42, dtype=np.float32).reshape(6, 7)
starts = np.array([[0, 0], [5, 6], [2, 3], [-1, 2], [4, 1]], np.int32)
v = xe.index_map_view("gather", operand, starts, offset_dims=[1, 2], collapsed_slice_dims=[],
                      start_index_map=[0, 1], index_vector_dim=1, slice_sizes=[2, 3])
v
"""

ANIMATION = """
xe.animate("reverse", np.arange(12, dtype=np.float32).reshape(3, 4), dimensions=[1], max_steps=4)
"""

STEPPER = """
xe.animate("pad", np.arange(6, dtype=np.float32).reshape(2, 3), np.float32(0),
           padding_config=[(1, 1, 1), (0, 1, 0)], max_steps=5).stepper()
"""


def _cell(page, grid, index):
    return page.locator(f'.xe-index-map-view rect[data-grid="{grid}"][data-index="{json.dumps(list(index))}"]')


def _read_cells(page):
    return {(e["grid"], tuple(json.loads(e["index"]))) for e in page.eval_on_selector_all(
        '.xe-index-map-view rect[data-role="read"]', "els => els.map(e => ({grid: e.dataset.grid, index: e.dataset.index}))")}


def test_hover_lights_the_operand_cells_read(notebook):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code) for code in (SETUP, ANIMATION, STEPPER)])
    notebook.open(nb, "index_map_view.ipynb")
    notebook.run_all()
    page = notebook.page
    view = page.locator(".xe-index-map-view").first
    view.wait_for()
    # hover result[1, 0, 1]: its start [5, 6] is clamped to [4, 4], it reads operand[4, 5]
    _cell(page, "result", (1, 0, 1)).hover()
    page.locator('.xe-index-map-view rect[data-grid="result"][data-role="current"][data-index="[1, 0, 1]"]').wait_for()
    assert _read_cells(page) == {("operand", (4, 5))}
    clamped = page.eval_on_selector_all('.xe-index-map-view rect[data-grid="operand"][data-role="clamped"]',
                                        "els => els.map(e => e.dataset.index)")
    assert {tuple(json.loads(i)) for i in clamped} == {(4, 4), (4, 6), (5, 4), (5, 5), (5, 6)}
    indices = page.eval_on_selector_all('.xe-index-map-view rect[data-grid="start_indices"][data-role="index"]',
                                        "els => els.map(e => e.dataset.index)")
    assert {tuple(json.loads(i)) for i in indices} == {(1, 0), (1, 1)}
    assert "operand[4, 5] = 33" in view.inner_text()
    assert notebook.execute("print(v.selected)").strip() == "(1, 0, 1)"
    notebook.screenshot("index_map_view_hover", view)
    # click pins result[3, 1, 2] (start [-1, 2] clamped to [0, 2]: reads operand[1, 4]); hovering elsewhere keeps it
    _cell(page, "result", (3, 1, 2)).click()
    page.locator('.xe-index-map-view rect[data-role="read"][data-index="[1, 4]"]').wait_for()
    _cell(page, "result", (0, 0, 0)).hover()
    page.wait_for_timeout(400)
    assert _read_cells(page) == {("operand", (1, 4))}
    notebook.screenshot("index_map_view_pinned", view)
    # the animation's player shows its first frame as an image right after Run All
    img = page.locator(".xe-animation img").first
    img.wait_for()
    assert page.evaluate("(e) => e.complete && e.naturalWidth > 100", img.element_handle())
    page.locator(".xe-animation button[data-act=next]").first.click()
    page.locator(".xe-animation .xe-count", has_text="2 / 4").wait_for()
    notebook.screenshot("animation_player", page.locator(".xe-animation").first)
    # the stepper shows a picture in a fresh kernel (no '<Figure size ...>' text)
    out = page.locator(".jp-OutputArea-output").nth(2)
    stepper_img = out.locator("img").first
    stepper_img.wait_for()
    assert "Figure size" not in out.inner_text()
    assert page.evaluate("(e) => e.complete && e.naturalWidth > 100", stepper_img.element_handle())
    notebook.screenshot("animation_stepper", out)
