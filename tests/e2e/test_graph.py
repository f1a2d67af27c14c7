"""The GraphWidget in a real JupyterLab: a 455-instruction module starts collapsed; a click
opens a group in place, the search finds an instruction inside a closed group and reveals
it, hovering shows attributes and the source line, the wheel zooms, a drag pans, and the
SVG button downloads the view."""
import inspect
import re

import nbformat

from test_graph_hierarchy import synthetic

SETUP = ("import random\nimport xla_explorer as xe\nfrom xla_explorer.widgets import GraphWidget\n"
         + inspect.getsource(synthetic)
         + "\ncomp = xe.parse_hlo(synthetic())\ngw = GraphWidget(comp, height=520)\ngw\n")


def _transform(page):
    return page.eval_on_selector(".xe-graph-widget .xe-canvas", "e => e.style.transform")


def test_graph_widget_expand_search_hover(notebook):
    notebook.open(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(SETUP)]), "graph_widget.ipynb")
    notebook.run_all()
    page = notebook.page
    widget = page.locator(".xe-graph-widget").first
    widget.locator("svg g.node.xe-toggle").first.wait_for()
    notebook.screenshot("graph_first_picture", widget)
    assert notebook.illegible(widget) == []  # its first picture at its own size: every label legible
    groups = page.eval_on_selector_all(".xe-graph-widget svg g.node.xe-toggle",
                                       "els => els.map(e => e.id).filter(id => id.startsWith('g'))")
    assert groups, "closed groups are drawn as clickable nodes"

    # click a closed group: it opens in place (its cluster appears), the kernel knows
    group = groups[1]
    key = notebook.execute(f"print(gw.nodes[{group!r}]['group'])").strip()
    cluster = notebook.execute(f"print(gw.nodes[{group!r}]['anchor'])").strip()
    widget.locator(f"svg g#{group}").click()
    widget.locator(f"svg g#{cluster}").wait_for()
    assert key in notebook.execute("print(gw.opened)")
    notebook.screenshot("graph_group_opened", widget)

    # search an instruction inside a closed group (the called computation body7), reveal it
    search = widget.locator("input.xe-search")
    search.fill("exponential")
    rows = widget.locator(".xe-results .xe-result")
    rows.filter(has_text="body7").first.wait_for()
    assert rows.count() == 30
    notebook.screenshot("graph_search", widget)
    rows.filter(has_text="body7").first.click()
    found = widget.locator("svg g.node.xe-found")
    found.wait_for()
    assert notebook.execute("print(gw.nodes[gw.focus]['name'])").strip() == "e7"
    assert "body7" in notebook.execute("print(gw.opened)")
    notebook.screenshot("graph_search_revealed", widget)

    # hover an instruction: its attributes and its source line
    node_id = notebook.execute("print(next(k for k, v in gw.nodes.items() if v.get('name') == 'c7'))").strip()
    widget.locator(f"svg g#{node_id}").hover()
    tip = widget.locator(".xe-tip")
    tip.wait_for(state="visible")
    text = tip.inner_text()
    assert "c7" in text and "call" in text and "model.py:17" in text
    notebook.screenshot("graph_hover", widget)

    # the wheel zooms, a drag pans
    before = _transform(page)
    box = widget.locator(".xe-view").bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.wheel(0, -400)
    page.wait_for_function("b => document.querySelector('.xe-graph-widget .xe-canvas').style.transform !== b", arg=before)
    zoomed = _transform(page)
    scale = lambda t: float(re.search(r"scale\(([-\d.e]+)\)", t).group(1))  # noqa: E731
    assert scale(zoomed) > scale(before)
    page.mouse.move(box["x"] + 40, box["y"] + 40)
    page.mouse.down()
    page.mouse.move(box["x"] + 140, box["y"] + 90, steps=5)
    page.mouse.up()
    assert _transform(page) != zoomed

    # the view downloads as SVG and as PNG (drawn by the browser from the SVG)
    with page.expect_download() as info:
        widget.locator("button.xe-svg").click()
    data = open(info.value.path(), encoding="utf-8").read()
    assert "<svg" in data and 'id="g' in data
    with page.expect_download() as info:
        widget.locator("button.xe-png").click()
    assert open(info.value.path(), "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    assert info.value.suggested_filename == "synth.png"
    assert not widget.locator(".xe-run").is_visible()  # no run's values: no run to choose


RUN = ("import numpy as np\nimport xla_explorer as xe\nfrom xla_explorer.widgets import GraphWidget\n"
       "from test_graph_hierarchy import WHILE\n"
       "gw = GraphWidget(xe.parse_hlo(WHILE), np.float32([1, 2, 3]))\ngw\n")


def test_graph_widget_run_box_shows_another_iteration(notebook):
    import pathlib
    tests = pathlib.Path(__file__).resolve().parents[1]
    setup = f"import sys\nsys.path.insert(0, {str(tests)!r})\n" + RUN
    notebook.open(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(setup)]), "graph_run.ipynb")
    notebook.run_all()
    widget = notebook.page.locator(".xe-graph-widget").first
    box = widget.locator("input.xe-invocation")
    box.wait_for(state="visible")
    assert box.get_attribute("max") == "4"
    box.fill("2")
    box.press("Enter")
    box.blur()
    widget.locator("svg text", has_text="run 2 shown").first.wait_for()
    assert notebook.execute("print(gw.invocation)").strip() == "2"
    notebook.screenshot("graph_run_box", widget)
