"""A student's session in JupyterLab, on notebooks/playground.ipynb: the op playground and
the stepper, driven through the page as a person would (the issue's "done when").

Change a control and read the shape or the error beside it; hover a result cell of the
index map and see the operand cells it reads light up; step into a while loop's body with
the stepper's buttons and read where it is.  Screenshots go to tests/e2e/artifacts/."""
import json
import time

GATHER = ".xe-playground:has(.xe-arg-slice_sizes)"
LOOP = ".xe-playground:has(.xe-arg-body)"
COLLECTIVE = ".xe-playground:has(.xe-arg-replica_groups)"


def _read_cells(view):
    return {(e["grid"], tuple(json.loads(e["index"]))) for e in view.locator('rect[data-role="read"]').evaluate_all(
        "els => els.map(e => ({grid: e.dataset.grid, index: e.dataset.index}))")}


def test_a_student_session(notebook):
    notebook.open("notebooks/playground.ipynb")
    notebook.run_all()
    page = notebook.page

    # -- the playground: every control is found by its argument's name ------------------------
    pg = page.locator(GATHER).first
    for name in notebook.execute("print(*pg.controls)").split():
        notebook.control(name, within=pg)          # visible, exactly one, labelled with the name
    shape = pg.locator(".xe-shape")
    assert "→ f32[2,4]" in shape.inner_text()

    # a window wider than the operand: the rule and the legal sizes beside slice_sizes, nowhere else
    notebook.set_control("slice_sizes", [1, 5], within=pg)
    beside = pg.locator(".xe-row:has(.xe-arg-slice_sizes) .xe-error")
    beside.filter(has_text="slice_sizes[1]=5 is larger than operand dimension 1").wait_for()
    assert "legal here: slice_sizes[1] = 0..4" in beside.inner_text()
    assert "no result" in shape.inner_text()
    others = pg.locator(".xe-row:not(:has(.xe-arg-slice_sizes)) .xe-error")
    assert all(not t.strip() for t in others.all_inner_texts())
    assert notebook.execute("print(pg.error_control, pg.shape_text == '')").split() == ["slice_sizes", "True"]
    notebook.screenshot("session_playground_error", pg)
    assert notebook.illegible(pg) == []

    # legal again: the shape, the HLO and the index map follow
    notebook.set_control("slice_sizes", [1, 2], within=pg)
    shape.filter(has_text="f32[2,2]").wait_for()
    assert not beside.inner_text().strip()
    pg.locator(".lm-TabBar-tab", has_text="HLO").click()
    assert "slice_sizes={1,2}" in pg.locator("pre", has_text="HloModule").inner_text()

    # an operand's shape box: a float index array is refused beside start_indices
    notebook.set_control("start_indices", "f32[2,1]", within=pg)  # the shape box, its first input
    pg.locator(".xe-row:has(.xe-arg-start_indices) .xe-error").filter(
        has_text="start_indices must have an integer element type").wait_for()
    notebook.set_control("start_indices", "s32[2,1]", within=pg)
    shape.filter(has_text="f32[2,2]").wait_for()

    # -- the index map: hover result[0, 1], it reads operand[2, 1] (start index 2, column 1) ---
    pg.locator(".lm-TabBar-tab", has_text="index map").click()
    view = pg.locator(".xe-index-map-view")
    view.locator('rect[data-grid="result"][data-index="[0, 1]"]').hover()
    view.locator('rect[data-grid="result"][data-role="current"][data-index="[0, 1]"]').wait_for()
    assert _read_cells(view) == {("operand", (2, 1))}
    # the browser draws the hover itself; Python hears of it a moment later
    deadline = time.monotonic() + 10
    while (selected := notebook.execute("print(pg._index.children[0].selected)").strip()) != "(0, 1)" \
            and time.monotonic() < deadline:
        time.sleep(0.2)
    assert selected == "(0, 1)"
    notebook.screenshot("session_index_map_hover", pg)
    assert notebook.illegible(pg) == []

    # -- a loop with a tuple state: an expression typed as the body --------------------------
    loop = page.locator(LOOP).first
    notebook.set_control("body", "(x[0] + 1, x[1] * 2)", within=loop)
    loop.locator("pre", has_text="result[1]: f32[3]").filter(has_text="1024").wait_for()
    notebook.set_control("body", "(x[0] + 1, x[1])[0]", within=loop)
    loop.locator(".xe-row:has(.xe-arg-body) .xe-error").filter(has_text="the body returns s32[]").wait_for()
    assert notebook.execute("print(loop_pg.error_control)").strip() == "body"
    notebook.screenshot("session_loop_playground", loop)
    assert notebook.illegible(loop) == []

    # -- a collective: a column per simulated device ----------------------------------------
    collective = page.locator(COLLECTIVE).first
    assert "on each of 4 simulated devices" in collective.locator(".xe-shape").inner_text()
    assert "device 3" in collective.locator(".xe-values-devices").inner_text()
    assert notebook.illegible(collective) == []

    # -- the stepper: step to the while loop, into its body ------------------------------------
    st = page.locator(".xe-stepper").first
    location = st.locator(".xe-location")
    button = lambda text: st.locator("button", has_text=text).first  # noqa: E731
    instruction = st.locator(".xe-instruction")
    for _ in range(8):
        if " while(" in instruction.inner_text():
            break
        before = instruction.inner_text()
        button("step").click()
        # the instruction's line is drawn last: once it changed, the step is on the page
        page.wait_for_function("([e, t]) => e.innerText !== t", arg=[instruction.element_handle(), before])
    assert " while(" in instruction.inner_text()
    button("step into").click()
    location.filter(has_text="iteration 0 of").wait_for()
    where = json.loads(notebook.execute("import json; print(json.dumps(st.location))"))
    assert len(where) == 2 and where[0][0] == "doubling" and where[0][1].startswith("while")
    assert where[1][0] in location.inner_text() and where[1][1] in location.inner_text()
    notebook.screenshot("session_stepper_in_while_body", st)
    assert notebook.illegible(st) == []
    button("step out").click()
    # back at the loop in the entry: the body (and its iteration) leave the location line
    page.wait_for_function("([e, body]) => !e.innerText.includes(body)",
                           arg=[location.element_handle(), where[1][0]])
    assert where[0][1] in location.inner_text() and "iteration" not in location.inner_text()
    assert notebook.execute("import json; print(json.dumps(st.location))").strip() == json.dumps([where[0]])

    # the long loop at the end of the notebook left its progress bar, finished
    bar = page.locator(".xe-progress").last
    assert "numpy: count" in bar.inner_text() and "done in" in bar.inner_text()
    notebook.screenshot("session_progress_bar", bar)
    assert notebook.illegible(bar) == []
    # the first Numba run of the session: its bar names what it loaded and says it is done,
    # unless loading was quicker than the bar's delay (a warm machine): then it left no bar
    took, delay = map(float, notebook.execute(
        "from xla_explorer import progress; from xla_explorer.widgets import progress as bars\n"
        "t = [t for t in progress.finished if t.label == 'cpu: loading Numba and its kernels']\n"
        "print(t[-1].elapsed if t else -1, bars._listener.delay)").split())
    assert took >= 0, "the notebook's first Numba run loaded nothing"
    loading = page.locator(".xe-progress", has_text="cpu: loading Numba and its kernels")
    if took >= delay:
        assert loading.count() == 1 and "done in" in loading.inner_text()
        notebook.screenshot("session_numba_progress", page.locator(".xe-progress", has_text="cpu: ").last)
    else:
        assert loading.count() == 0
