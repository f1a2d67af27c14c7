"""The interactive index-map view, headless: selection, highlighted cells, the formula,
dimension pickers and sliders for rank > 2, windows for big arrays, the widget's messages."""
import json
import re

import numpy as np
import pytest

import xla_explorer as xe
from xla_explorer.animate.view import IndexMapView, svg

f32, s32 = np.float32, np.int32


def gather_view(**kw):
    operand = np.arange(42, dtype=f32).reshape(6, 7)
    starts = np.array([[0, 0], [5, 6], [2, 3], [-1, 2], [4, 1]], s32)
    return xe.index_map_view("gather", operand, starts, offset_dims=[1, 2], collapsed_slice_dims=[],
                             start_index_map=[0, 1], index_vector_dim=1, slice_sizes=[2, 3], **kw)


def cells(html, role):
    """(grid, index) of the SVG cells drawn with ``role``."""
    out = set()
    for tag in re.findall(r"<rect [^>]*>", html):
        attrs = dict(re.findall(r'([\w-]+)="([^"]*)"', tag))
        if attrs.get("data-role") == role and "data-index" in attrs:
            out.add((attrs["data-grid"], tuple(json.loads(attrs["data-index"]))))
    return out


def test_selecting_a_result_element_lights_what_it_reads():
    v = gather_view(widget=False)
    assert isinstance(v, IndexMapView)
    v.select((1, 0, 1))   # start [5, 6] clamped to [4, 4]: reads operand[4, 5]
    h = v.highlighted
    assert h["operand"][(4, 5)] == "read"
    assert {i for i, r in h["operand"].items() if r == "clamped"} == {(4, 4), (4, 6), (5, 4), (5, 5), (5, 6)}
    assert h["start_indices"] == {(1, 0): "index", (1, 1): "index"}
    assert h["result"] == {(1, 0, 1): "current"}
    assert "result[1, 0, 1] = operand[4, 5] = 33" in v.formula and "<- clamped" in v.formula
    html = v.html()
    assert cells(html, "read") == {("operand", (4, 5))}
    assert ("result", (1, 0, 1)) in cells(html, "current")
    # every text is at least 10 px and the SVG scales (viewBox)
    sizes = [float(s) for s in re.findall(r'font-size="([0-9.]+)"', html)]
    assert min(sizes) >= 10 and "viewBox=" in html
    with pytest.raises(IndexError, match="outside the result shape"):
        v.select((5, 0, 0))


def hover_data(html):
    """The data the browser draws hovers from, decoded as the browser does: {domain index:
    ({(grid, element index or cell number): role}, formula)} of every drawn domain element."""
    data = json.loads(re.search(r'<script type="application/json" class="xe-data">(.*?)</script>', html, re.S)
                      .group(1).replace("<\\/", "</"))
    by_k = {}   # (grid, cell number) -> element index (None: padding, a hole)
    for tag in re.findall(r"<rect [^>]*>", html):
        attrs = dict(re.findall(r'([\w-]+)="([^"]*)"', tag))
        if "data-k" in attrs:
            by_k[(attrs["data-grid"], int(attrs["data-k"]))] = \
                tuple(json.loads(attrs["data-index"])) if "data-index" in attrs else None
    out = {}
    for k, (patterns, lines, _) in data["cells"].items():
        lit = {}
        for grid, p in zip(data["grids"], patterns):
            for a, b, code in re.findall(r"(\d+)(?:-(\d+))?([a-z])", data["patterns"][p]):
                for j in range(int(a), int(b or a) + 1):
                    index = by_k[(grid, j)]
                    lit[(grid, index if index is not None else j)] = data["roles"][ord(code) - 97][0]
        out[tuple(data["indices"][k])] = (lit, "\n".join(data["lines"][n] for n in lines))
    return out


def test_the_hover_data_lights_what_selecting_each_element_lights():
    v = gather_view(widget=False)
    data = hover_data(v.html())
    assert len(data) == 30   # every element of the result: its window is the whole result
    for index, (lit, formula) in data.items():
        v.select(index)
        expected = {(g, i): r for g, cells in v.highlighted.items() for i, r in cells.items()}
        assert lit == expected and formula == v.formula
    # the page carries its own hover script (no kernel): the data is read by xeWire
    assert "<script>" in v.html() and "xeWire(document.currentScript.previousElementSibling" in v.html()


def test_hover_data_is_bounded_by_the_window_and_notes_cells_outside_it():
    sizes = []
    for rows, cols in ((200, 300), (2000, 1500)):
        operand = np.arange(rows * cols, dtype=f32).reshape(rows, cols)
        v = xe.index_map_view("transpose", operand, permutation=[1, 0], widget=False)   # windows of 16 x 20
        html = v.html()
        sizes.append(len(html))
    data = hover_data(html)
    assert len(data) == 16 * 20 and max(sizes) < 250_000 and max(sizes) < 1.1 * min(sizes)
    # result[0, 19] reads operand[19, 0]: outside the operand's window (around operand[0, 0])
    lit, formula = data[(0, 19)]
    assert lit == {("result", (0, 19)): "current"} and "outside the drawn windows: 1 in operand" in formula


def test_the_widget_follows_hover_and_click_messages():
    pytest.importorskip("anywidget")
    w = gather_view()
    assert w.selected == (0, 0, 0) and "data-domain" in w.html
    before = w.html
    w._on_msg(w, {"event": "hover", "grid": "result", "index": [3, 1, 2]}, [])
    assert w.selected == (3, 1, 2) and not w.view.pinned
    # start [-1, 2] is clamped to [0, 2]: result[3, 1, 2] reads operand[1, 4]; the browser drew it
    # from the data (Python does not draw a hover again)
    assert w.highlighted["operand"][(1, 4)] == "read" and w.html == before
    assert hover_data(w.html)[(3, 1, 2)][0][("operand", (1, 4))] == "read"
    assert "<script>" not in w.html and "xe-data" in w.html   # the widget's own code draws hovers
    w._on_msg(w, {"event": "click", "grid": "result", "index": [2, 0, 0]}, [])
    w._on_msg(w, {"event": "hover", "grid": "result", "index": [4, 0, 0]}, [])
    assert w.selected == (2, 0, 0) and w.view.pinned   # pinned: hovering elsewhere does not move it
    w._on_msg(w, {"event": "hover", "grid": "operand", "index": [0, 0]}, [])
    assert w.selected == (2, 0, 0)
    w._on_msg(w, {"event": "click", "grid": "result", "index": [2, 0, 0]}, [])
    assert not w.view.pinned
    w._on_msg(w, {"event": "fixed", "grid": "nope", "dim": 0, "value": "1"}, [])   # an error is shown, not raised
    assert "KeyError" in w.html
    assert w.select((4, 1, 2)).formula.endswith("operand[5, 3] = 38")


def test_rank_above_two_picks_dimensions_and_sliders_follow_the_selection():
    operand = np.arange(2 * 3 * 4 * 5, dtype=f32).reshape(2, 3, 4, 5)
    v = xe.index_map_view("transpose", operand, permutation=[3, 2, 1, 0], widget=False)
    op, res = v.animation.grid("operand"), v.animation.grid("result")
    assert op.dims == (2, 3) and set(op.fixed) == {0, 1}
    v.select((4, 3, 2, 1))     # reads operand[1, 2, 3, 4]
    assert op.fixed == {0: 1, 1: 2} and res.fixed == {0: 4, 1: 3}
    assert cells(v.html(), "read") == {("operand", (1, 2, 3, 4))}
    html = v.html()
    assert 'data-control="dims"' in html and 'data-control="fixed"' in html
    v.handle({"event": "dims", "grid": "operand", "which": "row", "value": "0"})
    assert op.dims == (0, 3) and op.fixed == {1: 2, 2: 3}
    assert cells(v.html(), "read") == {("operand", (1, 2, 3, 4))}
    v.handle({"event": "fixed", "grid": "operand", "dim": 1, "value": "0"})   # a slider: another slice
    assert op.fixed[1] == 0 and not cells(v.html(), "read")


def test_big_arrays_show_a_window_around_the_selection():
    b = xe.XlaBuilder("big")
    x = xe.Parameter(b, 0, xe.Shape("f32", (100000, 100000)), "x")
    i = xe.Parameter(b, 1, xe.Shape("s32", (5, 1)), "i")
    g = xe.Gather(x, i, offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0], index_vector_dim=1,
                  slice_sizes=[1, 100000])
    comp = b.build(g)
    v = xe.index_map_view(comp, comp.entry.root.name, widget=False)   # shapes only: nothing allocated
    v.select((3, 70000))
    html = v.html()
    assert "Index values unknown" in html and html.count("<rect") < 1200
    assert ("result", (3, 70000)) in cells(html, "current")
    assert any(grid == "operand" and index[1] == 70000 for grid, index in cells(html, "candidate"))
    assert ">70000<" in html and "window: rows" in html
    before = next(p.window for p in v._scene().panels if p.grid == "result")
    v.pan("result", 0, 1)
    after = next(p.window for p in v._scene().panels if p.grid == "result")
    assert after[1] == before[1] + before[3] // 2
    # values formatted to fit their cells
    big = xe.index_map_view("reverse", np.linspace(-1e9, 1e9, 40).astype(f32).reshape(4, 10) * np.pi,
                            dimensions=[1], widget=False)
    texts = re.findall(r'class="xe-c xe-mid xe-m xe-v"[^>]*>([^<]*)</text>', big.html())   # the cells' values
    assert texts and max(len(t) for t in texts if re.fullmatch(r"[-0-9.e]+", t)) <= 6
    # small magnitudes keep a digit in the notation that fits (not '-0.0…')
    from xla_explorer.animate.model import fmt_cell
    assert [fmt_cell(f32(v)) for v in (-0.0058760266, 0.000456, 123456, 0.1234567, -0.0456)] == \
        ["-6e-3", "5e-4", "1.2e5", "0.123", "-0.05"]


def test_a_view_of_an_instruction_in_a_while_body_per_invocation():
    jax = pytest.importorskip("jax")
    x = np.arange(40, dtype=f32).reshape(10, 4)
    starts = np.array([0, 4, 9], s32)

    def f(x, starts):
        return jax.lax.scan(lambda c, k: (c, jax.lax.dynamic_slice(x, (k, np.int32(1)), (3, 2))), 0.0, starts)[1]

    comp = xe.from_jax(f, x, starts)
    t = comp.trace(x, starts)
    name = next(r.name for r in t.records if r.opcode == "dynamic-slice" and r.shape.dims == (3, 2))
    v = xe.index_map_view(comp, name, trace=t, invocation=2, widget=False)
    v.select((0, 1))
    assert v.highlighted["operand"][(7, 2)] == "read"   # start 9 clamped to 7
    assert "while" in v.animation.title and "invocation 2" in v.animation.title
    assert "<- clamped" in v.formula


def test_collective_view_names_the_source_device():
    stacked = np.arange(4 * 2 * 4, dtype=f32).reshape(4, 2, 4)
    v = xe.index_map_view("all-to-all", stacked, split_dimension=1, concat_dimension=1, split_count=4,
                          widget=False)
    v.select((2, 1, 0))     # device 2, block 0 of dimension 1 comes from device 0's block 2
    assert v.highlighted["operand"] == {(0, 1, 2): "read"}
    assert "block 0 comes from device 0" in v.formula


def test_svg_escapes_and_is_well_formed():
    import xml.dom.minidom
    v = gather_view(widget=False)
    xml.dom.minidom.parseString(svg(v._scene(), "result"))


def test_the_formula_sits_beside_the_grids_when_there_is_room_else_under_them():
    for width, beside in ((960, True), (700, False)):
        v = gather_view(widget=False)
        v.max_width = width
        scene, data = v.picture()
        panels = {p.grid: p for p in scene.panels}
        fx, fy, line_h, px = scene.formula_at
        if beside:   # top right, beside the operand and the indices; the result row under it
            assert fx > panels["start_indices"].x + panels["start_indices"].width and fy < panels["operand"].y + 20
            assert panels["result"].y > fy + max(len(c[1]) for c in data["cells"].values()) * line_h
        else:
            assert fy > max(p.y + p.height for p in panels.values())
        assert scene.width <= width + 14 and min(scene.fonts()) >= 10 and px >= 10


def test_every_frame_of_an_animation_puts_its_formula_in_one_place():
    from xla_explorer.animate.draw import scenes
    operand = np.arange(42, dtype=f32).reshape(6, 7)
    starts = np.array([[0, 0], [5, 6], [2, 3], [-1, 2], [4, 1]], s32)
    anim = xe.animate("gather", operand, starts, offset_dims=[1, 2], collapsed_slice_dims=[], start_index_map=[0, 1],
                      index_vector_dim=1, slice_sizes=[2, 3], max_steps=8)
    anim.width = 900
    assert len({s.formula_at for s in scenes(anim, width=900)}) == 1
