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
    found = re.findall(r'<rect [^>]*data-grid="([^"]+)" data-index="([^"]+)" data-role="' + role + '"', html)
    return {(g, tuple(json.loads(i))) for g, i in found}


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


def test_the_widget_follows_hover_and_click_messages():
    pytest.importorskip("anywidget")
    w = gather_view()
    assert w.selected == (0, 0, 0) and "data-domain" in w.html
    w._on_msg(w, {"event": "hover", "grid": "result", "index": [3, 1, 2]}, [])
    assert w.selected == (3, 1, 2) and not w.view.pinned
    # start [-1, 2] is clamped to [0, 2]: result[3, 1, 2] reads operand[1, 4]
    assert w.highlighted["operand"][(1, 4)] == "read" and cells(w.html, "read") == {("operand", (1, 4))}
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
    texts = re.findall(r'font-family="DejaVu Sans Mono[^"]*"[^>]*>([^<]*)</text>', big.html())
    assert texts and max(len(t) for t in texts if re.fullmatch(r"[-0-9.e]+", t)) <= 6


def test_a_view_of_an_instruction_in_a_while_body_per_invocation():
    jax = pytest.importorskip("jax")
    x = np.arange(40, dtype=f32).reshape(10, 4)
    starts = np.array([0, 4, 9], s32)

    def f(x, starts):
        return jax.lax.scan(lambda c, k: (c, jax.lax.dynamic_slice(x, (k, 1), (3, 2))), 0.0, starts)[1]

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
