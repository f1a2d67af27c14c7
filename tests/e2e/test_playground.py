"""The op playground in JupyterLab: change a control as a student would, read the page."""

PLAYGROUND = ".xe-playground >> nth=0"  # the first one of notebooks/playground.ipynb: `pg`


def test_playground_error_beside_the_control(notebook):
    notebook.open("notebooks/playground.ipynb")
    notebook.run_all()
    pg = notebook.page.locator(PLAYGROUND)
    shape = pg.locator(".xe-shape")
    assert "→ f32[2,4]" in shape.inner_text()
    notebook.screenshot("playground_gather", pg)

    # a window wider than the operand: the rule and the legal sizes beside slice_sizes
    notebook.set_control("slice_sizes", [1, 5], within=pg)
    beside = pg.locator(".xe-row:has(.xe-arg-slice_sizes) .xe-error")
    beside.filter(has_text="slice_sizes[1]=5 is larger than operand dimension 1").wait_for()
    assert "legal here: slice_sizes[1] = 0..4" in beside.inner_text()
    assert "no result" in shape.inner_text()
    others = pg.locator(".xe-row:not(:has(.xe-arg-slice_sizes)) .xe-error")
    assert all(not t.strip() for t in others.all_inner_texts())  # only beside the control at fault
    assert notebook.execute("print(pg.error_control, pg.shape_text == '')").split() == ["slice_sizes", "True"]
    notebook.screenshot("playground_error", pg)

    # legal again: the shape, the values and the HLO follow
    notebook.set_control("slice_sizes", [1, 2], within=pg)
    shape.filter(has_text="f32[2,2]").wait_for()
    assert not beside.inner_text().strip()
    pg.locator(".lm-TabBar-tab", has_text="HLO").click()
    assert "slice_sizes={1,2}" in pg.locator(".jupyter-widgets pre", has_text="HloModule").inner_text()

    # a dropdown: random indices
    notebook.set_control("start_indices", "f32[2,1]", within=pg)  # the shape box, first input of the operand
    pg.locator(".xe-row:has(.xe-arg-start_indices) .xe-error").filter(
        has_text="start_indices must have an integer element type").wait_for()
    notebook.set_control("start_indices", "s32[2,1]", within=pg)
    shape.filter(has_text="f32[2,2]").wait_for()
    pg.locator(".lm-TabBar-tab", has_text="index map").click()
    notebook.screenshot("playground_index_map", pg)

    # the long loop at the end of the notebook left its progress bar, finished
    bar = notebook.page.locator(".xe-progress").last
    assert "numpy: count" in bar.inner_text() and "done in" in bar.inner_text()
    notebook.screenshot("progress_bar", bar)
