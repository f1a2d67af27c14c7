"""The index-map view in a real JupyterLab: hovering a result cell lights the operand cells
it reads (the browser draws it from the data the kernel sent with the picture: no round
trip, a busy kernel changes nothing); clicking pins; the picture saved as HTML hovers with
no kernel at all; the animation's player shows its first frame after Run All without a
click, and the stepper a picture (not the text of a Figure) in a fresh kernel."""
import json
import time

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


def _read_cells(page, role="read"):
    return {(e["grid"], tuple(json.loads(e["index"]))) for e in page.eval_on_selector_all(
        f'.xe-index-map-view rect[data-role="{role}"]',
        "els => els.map(e => ({grid: e.dataset.grid, index: e.dataset.index}))")}


#: result element -> the operand element it reads (start [5, 6] clamps to [4, 4], [-1, 2] to [0, 2])
READS = {(1, 0, 1): (4, 5), (3, 1, 2): (1, 4), (0, 0, 0): (0, 0), (4, 1, 2): (5, 3), (2, 1, 2): (3, 5),
         (4, 0, 0): (4, 1), (1, 1, 0): (5, 4)}
OPERAND = [[7 * r + c for c in range(7)] for r in range(6)]


def _python_sees(notebook, code, expected, timeout=10):
    """What ``code`` prints in the kernel becomes ``expected`` (messages arrive a little later)."""
    deadline, got = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        got = notebook.execute(code).strip()
        if got == expected:
            return
        time.sleep(0.2)
    assert got == expected


def _hover_each(page, scope=".xe-index-map-view"):
    """Hover every element of READS in turn, quickly; each time the cells and the formula are
    those of the element at once (the browser draws them; nothing waits for a kernel)."""
    took = []
    for index, read in READS.items():
        t0 = time.monotonic()
        page.locator(f'{scope} rect[data-grid="result"][data-index="{json.dumps(list(index))}"]').hover()
        current = page.eval_on_selector_all(f'{scope} rect[data-role="current"]', "els => els.map(e => e.dataset.index)")
        took.append(time.monotonic() - t0)
        assert [tuple(json.loads(i)) for i in current] == [index]
        assert _read_cells(page) == {("operand", read)}
        text = page.locator(f"{scope} g.xe-formula").text_content()
        assert f"operand[{read[0]}, {read[1]}] = {OPERAND[read[0]][read[1]]}" in text
        assert f"result[{', '.join(map(str, index))}]" in page.locator(f"{scope} text.xe-counter").text_content()
    return took


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
    _python_sees(notebook, "print(v.selected)", "(1, 0, 1)")   # Python hears of the hover afterwards
    notebook.screenshot("index_map_view_hover", view)
    # the room JupyterLab gives: the formula sits beside the grids, its text legible (>= 10 px)
    box = page.locator(".xe-index-map-view g.xe-formula").bounding_box()
    indices = page.locator('.xe-index-map-view rect[data-grid="start_indices"]').last.bounding_box()
    assert box["x"] > indices["x"] + indices["width"] and box["y"] < indices["y"]
    assert min(float(x) for x in page.eval_on_selector_all(
        ".xe-index-map-view text", "els => els.map(e => getComputedStyle(e).fontSize.replace('px', ''))")) >= 10
    # many hovers in a row while the kernel sleeps (it could answer nothing): each is drawn
    # at once.  The proof reads the sleep's own messages, not kernel.status (a status message
    # from the control channel can say 'idle' while the shell still sleeps): the sleep has
    # printed that it started and has no reply yet, before and after the hovers
    kernel = "window.jupyterapp.shell.currentWidget.sessionContext.session.kernel"
    page.evaluate(f"""() => {{
        window.xeSleep = {{started: false, done: false}};
        const future = {kernel}.requestExecute({{code: "import time; print('sleeping', flush=True); time.sleep(600)"}});
        future.onIOPub = (msg) => {{
            if (msg.header.msg_type === 'stream' && msg.content.text.includes('sleeping')) window.xeSleep.started = true;
        }};
        future.done.then(() => {{ window.xeSleep.done = true; }}, () => {{ window.xeSleep.done = true; }});
    }}""")
    page.wait_for_function("() => window.xeSleep.started")
    took = _hover_each(page)
    assert not page.evaluate("() => window.xeSleep.done"), \
        f"the hovers took {sum(took):.1f} s: the kernel's sleep ended before they did"
    notebook.screenshot("index_map_view_hover_busy_kernel", view)
    page.evaluate(f"() => {kernel}.interrupt()")
    # once the kernel is free, Python knows the last element hovered
    page.wait_for_function("() => window.xeSleep.done", timeout=30_000)
    page.wait_for_function(f"() => {kernel}.status === 'idle'", timeout=30_000)
    last = list(READS)[-1]
    _python_sees(notebook, f"print(v.selected, v.highlighted['operand'][{READS[last]}])", f"{last} read")
    # click pins result[3, 1, 2] (start [-1, 2] clamped to [0, 2]: reads operand[1, 4]); hovering elsewhere keeps it
    _cell(page, "result", (3, 1, 2)).click()
    page.locator('.xe-index-map-view rect[data-role="read"][data-index="[1, 4]"]').wait_for()
    _cell(page, "result", (0, 0, 0)).hover()
    page.wait_for_timeout(400)
    assert _read_cells(page) == {("operand", (1, 4))}
    _python_sees(notebook, "print(v.selected, v.view.pinned)", "(3, 1, 2) True")
    notebook.screenshot("index_map_view_pinned", view)
    # the picture saved as a page: no kernel, no widget library; hovering works the same
    static = notebook.page.context.new_page()
    try:
        static.set_content("<!doctype html><html><body>" + notebook.execute(
            "v.select((0, 0, 0)); v.view.pinned = False; print(v.view.html())") + "</body></html>")
        took = _hover_each(static)
        screenshot_static = static.locator(".xe-index-map-view")
        notebook.screenshot("index_map_view_static_page", screenshot_static)
    finally:
        static.close()
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
