"""GraphWidget without a browser: traitlets set, messages sent as the JavaScript sends
them, and their effect on the picture (the browser test is tests/e2e/test_graph.py)."""
import pathlib

import pytest

import xla_explorer as xe
from xla_explorer import render

pytest.importorskip("anywidget")
pytestmark = pytest.mark.skipif(not render.dot_available(), reason="Graphviz's dot is not installed")

from test_graph_hierarchy import synthetic  # noqa: E402


@pytest.fixture(scope="module")
def comp():
    return xe.parse_hlo(synthetic(layers=30))


@pytest.fixture
def gw(comp):
    from xla_explorer.widgets import GraphWidget
    return GraphWidget(comp)


def click(gw, svg_id):
    gw._on_message(gw, {"event": "toggle", "id": svg_id}, [])


def test_first_picture_and_what_the_page_needs(gw):
    assert gw.svg.startswith("<?xml") or "<svg" in gw.svg
    groups = {k: v for k, v in gw.nodes.items() if v["kind"] == "group"}
    assert groups and all(f'id="{k}"' in gw.svg for k in groups)
    info = next(iter(groups.values()))
    assert info["toggles"] == [info["group"]] and info["anchor"].startswith("cluster_")
    assert "instructions" in info["tip"] and "click" in info["tip"]
    assert "closed groups shown" in gw.status and not gw.error
    assert pathlib.Path(type(gw)._esm).name == "graph.js" if isinstance(type(gw)._esm, pathlib.Path) else True


def test_click_opens_a_group_in_place_and_closes_it(gw):
    gid, info = next((k, v) for k, v in gw.nodes.items() if v["kind"] == "group")
    before = gw.svg
    click(gw, gid)
    assert info["group"] in gw.opened and info["anchor"] in gw.nodes  # its cluster, clickable
    assert gw.nodes[info["anchor"]]["toggles"] == [info["group"]]
    click(gw, info["anchor"])  # the cluster's title: closes it again
    assert info["group"] not in gw.opened and gw.svg == before


def test_caller_node_opens_its_called_computation(gw):
    gw.expand("c3")  # an instruction's name: the groups around it open
    caller = next(k for k, v in gw.nodes.items() if v.get("name") == "c3")
    assert gw.nodes[caller]["toggles"] == ["body3"] and "click to open" in gw.nodes[caller]["tip"]
    click(gw, caller)
    assert "body3" in gw.opened and any(v.get("name") == "e3" for v in gw.nodes.values())


def test_search_lists_instructions_in_closed_groups_and_reveals_them(gw):
    gw.query = "exponential"
    assert len(gw.results) == 30 and not any(r["shown"] for r in gw.results)
    r = gw.results[7]
    assert r["opcode"] == "exponential" and "body7" in r["where"]
    gw._on_message(gw, {"event": "reveal", "index": r["index"]}, [])
    marked = [k for k, v in gw.nodes.items() if v.get("name") == "e7" and k == gw.focus]
    assert marked and "body7" in gw.opened
    assert 'COLOR="#ff6d00"' in gw.graph.source
    gw.query = "shape:f32[8]"
    assert gw.more_results and len(gw.results) == 40


def test_highlight_follows_a_location(gw):
    gw.highlight([("main", "c4", 0), ("body4", "n4", 0)])
    assert {"layer4", "body4"} <= {k.split(":")[-1].split("/")[0] for k in gw.opened} | set(gw.opened)
    marked = {n.name for n in gw.graph.nodes if n.highlight}
    assert marked == {"c4", "n4"}
    gw.highlight("h9_2", reveal=False)
    assert [n.kind for n in gw.graph.nodes if n.highlight] == ["group"]


def test_follow_a_stepper_like_object(gw):
    traitlets = pytest.importorskip("traitlets")

    class Stepper(traitlets.HasTraits):
        position = traitlets.Int(0)

        @property
        def location(self):
            return [("main", f"h{self.position}_1", 0)]

    st = Stepper()
    gw.follow(st)
    assert [n.name for n in gw.graph.nodes if n.highlight] == ["h0_1"]
    st.position = 12
    assert [n.name for n in gw.graph.nodes if n.highlight] == ["h12_1"]


def test_errors_show_beside_the_picture(gw):
    svg = gw.svg
    gw.expand("no-such-group")
    assert "no group" in gw.error and gw.svg == svg
    gw.reset()
    assert not gw.error


def test_save_the_current_view(gw, tmp_path):
    gw.expand("layer2")
    path = gw.save(tmp_path / "view.svg")
    assert "layer2" in path.read_text() or "mix" in path.read_text()
    png = gw.save(tmp_path / "view.png").read_bytes()
    assert png.startswith(b"\x89PNG")


def test_follow_the_real_stepper_into_a_loop_body():
    import numpy as np
    from test_graph_hierarchy import WHILE
    from xla_explorer.widgets import GraphWidget, StepperWidget
    comp = xe.parse_hlo(WHILE)
    st = StepperWidget(comp, np.float32([1, 2, 3]), against=None, graph=False)
    gw = GraphWidget(comp, max_nodes=4).follow(st)
    st.run_to("w")
    st.step_into()
    frames = [name for _, name, _ in st.location]
    assert frames[0] == "w" and {n.name for n in gw.graph.nodes if n.highlight} == set(frames)
    assert gw.nodes[gw.focus]["name"] == frames[-1]


def test_invocation_shows_another_run_keeping_the_view():
    import numpy as np
    from test_graph_hierarchy import WHILE
    from xla_explorer.widgets import GraphWidget
    comp = xe.parse_hlo(WHILE)
    w = GraphWidget(comp, np.float32([1, 2, 3]), invocation=1, max_nodes=4)
    w.expand("y")
    assert w.invocation == 1 and w.graph.node("y").stats[0].startswith("min 4  max 12")
    opened = set(w.opened)
    w.show_invocation(3)
    assert w.invocation == 3 and w.graph.node("y").stats[0].startswith("min 16  max 48")
    assert set(w.opened) == opened and not w.error
    assert w.max_invocation == 4  # the condition ran 5 times (the body 4): the box offers runs 0..4
    w._on_message(w, {"event": "invocation", "k": 2}, [])  # the box, as the page sends it
    assert w.invocation == 2 and w.graph.node("y").stats[0].startswith("min 8  max 24")
    w.show_invocation(-1)  # a bad run: said beside the picture, the picture kept
    assert "invocation=" in w.error and w.invocation == 2
    plain = GraphWidget(comp)
    plain.show_invocation(2)
    assert "needs the run" in plain.error and plain.max_invocation == 0
