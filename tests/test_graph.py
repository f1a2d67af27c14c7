"""The graph renderer: the structure of the drawn graph (nodes, edges, clusters, labels),
read from its model and its DOT text; a few graphs drawn by Graphviz's ``dot``."""
import re
import struct
import subprocess
import sys
import zlib

import numpy as np
import pytest

import xla_explorer as xe
from xla_explorer import render
from xla_explorer.ops import registry
from xla_explorer.render import dot as dotmod
from xla_explorer.render.graph import ALWAYS_WHOLE, MAX_WIDTH_PT
from xla_explorer.render.model import CATEGORY_STYLE, category_of, trivial_summary, wrap
from xla_explorer.render.values import heatmap_png, summarize

from conftest import CORPUS, corpus_cases

needs_dot = pytest.mark.skipif(not render.dot_available(),
                               reason="Graphviz's dot is not installed (apt-get install graphviz)")

SIMPLE = """
HloModule simple, entry_computation_layout={(f32[2,3]{1,0})->(f32[3,2]{0,1}, f32[2,3]{1,0})}

ENTRY main {
  x = f32[2,3]{1,0} parameter(0), metadata={op_name="x" source_file="a.py"}
  c = f32[] constant(0.5)
  big = f32[4,4]{1,0} constant({{1,2,3,4},{5,6,7,8},{9,10,11,12},{13,14,15,16}})
  b = f32[2,3]{1,0} broadcast(c), dimensions={}
  t = f32[3,2]{0,1} transpose(x), dimensions={1,0}
  s = f32[2,3]{1,0} add(x, b)
  ROOT out = (f32[3,2]{0,1}, f32[2,3]{1,0}) tuple(t, s)
}
"""

REDUCE = """
HloModule reduce_mod

add_f32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

clipped_add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  s = f32[] add(a, b)
  lim = f32[] constant(10)
  ROOT m = f32[] minimum(s, lim)
}

desc {
  p0 = f32[] parameter(0)
  p1 = f32[] parameter(1)
  ROOT gt = pred[] compare(p1, p0), direction=LT
}

ENTRY main {
  x = f32[4,5]{1,0} parameter(0)
  zero = f32[] constant(0)
  r = f32[4]{0} reduce(x, zero), dimensions={1}, to_apply=add_f32
  q = f32[5]{0} reduce(x, zero), dimensions={0}, to_apply=clipped_add
  srt = f32[4]{0} sort(r), dimensions={0}, to_apply=desc
  ROOT out = (f32[4]{0}, f32[5]{0}) tuple(srt, q)
}
"""


def parse(text):
    return xe.parse_hlo(text)


def corpus_module(case):
    return parse((CORPUS / case / "module.hlo").read_text())


def needs_case(case):
    return pytest.mark.skipif(not (CORPUS / case / "module.hlo").exists(), reason=f"corpus case {case} not found")


# -- the package stays light ----------------------------------------------------------------
def test_importing_render_does_not_import_graphviz():
    code = ("import sys, xla_explorer as xe, xla_explorer.render; xe.status_table(file=open('/dev/null', 'w')); "
            "print('graphviz' in sys.modules, 'matplotlib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_status_table_shows_graph_for_every_op():
    table = xe.status_table(file=open("/dev/null", "w"))
    for opcode in registry.all_ops():
        assert table.cell(opcode, "graph") == "yes", opcode


def test_comp_graph_is_graph_of():
    comp = parse(SIMPLE)
    g = comp.graph(legend=False)
    assert isinstance(g, render.HloGraph) and not g.legend
    assert [n.name for n in g.nodes] == [i.name for i in comp.entry.instructions]


# -- nodes and edges ----------------------------------------------------------------------------
def test_one_node_per_instruction_with_opcode_name_shape():
    g = parse(SIMPLE).graph()
    assert len(g.nodes) == 7
    t = g.node("t")
    assert (t.title, t.shape) == ("transpose", "f32[3,2]{0,1}")  # non-default layout shown
    assert g.node("s").shape == "f32[2,3]"                      # default layout not
    assert g.node("x").title == "parameter 0"
    assert g.node("out").is_root and not g.node("s").is_root
    assert "dimensions={1,0}" in t.attributes
    label = dotmod.node_label(t, images=None)
    assert "<B>transpose</B>" in label and "f32[3,2]{0,1}" in label and "dimensions={1,0}" in label


def test_edges_carry_operand_shape_and_index():
    g = parse(SIMPLE).graph()
    into_s = g.model.edges_into("s")
    assert [(g.model.by_id(e.src).name, e.label, e.operand_index) for e in into_s] == \
        [("x", "0: f32[2,3]", 0), ("b", "1: f32[2,3]", 1)]
    (into_t,) = g.model.edges_into("t")
    assert (into_t.label, into_t.operand_index) == ("f32[2,3]", None)  # one operand: no index
    assert len(g.edges) == 6


def test_metadata_is_noise_unless_asked():
    comp = parse(SIMPLE)
    assert not any(a.startswith("metadata") for a in comp.graph().node("x").attributes)
    assert any(a.startswith("metadata=") for a in comp.graph(all_attributes=True).node("x").attributes)


def test_small_constants_inlined_big_ones_not():
    g = parse(SIMPLE).graph()
    assert g.node("c").constant == "0.5"
    assert g.node("big").constant == ""
    assert parse(SIMPLE).graph(max_constant_elements=16).node("big").constant.startswith("{")


def test_colours_come_from_the_registry_categories():
    g = parse(SIMPLE).graph()
    for n in g.nodes:
        expected = "unknown" if n.inst.opcode not in registry.OPS else next(
            (c for c in ("constant", "collective", "control", "linalg", "reduction", "data_movement",
                         "elementwise", "other") if n.inst.opcode in registry.CATEGORIES[c]), "other")
        assert n.category == expected
        assert n.color == CATEGORY_STYLE[expected][0]
    assert g.node("x").category == "constant"  # parameters are coloured with constants
    assert g.node("t").category == "data_movement"
    assert g.node("out").category == "control"
    assert set(g.model.legend) == {n.category for n in g.nodes}
    assert 'ID="legend"' in g.source and 'ID="legend"' not in parse(SIMPLE).graph(legend=False).source


def test_unregistered_opcode_gets_a_neutral_colour():
    comp = parse("ENTRY e {\n  x = f32[3] parameter(0)\n  ROOT y = f32[3] my-new-op(x), flavour=sweet\n}")
    node = comp.graph().node("y")
    assert category_of("my-new-op") == "unknown"
    assert node.category == "unknown" and node.color == "#ffffff"
    assert node.attributes == ["flavour=sweet"]
    assert "unknown" in comp.graph().model.legend


def test_dot_text_matches_the_model():
    g = corpus_module("while_fori_loop").graph() if (CORPUS / "while_fori_loop").exists() else parse(REDUCE).graph()
    src = g.source
    node_ids = re.findall(r"^\s+(n\d+) \[label=", src, re.M)
    assert sorted(node_ids) == sorted(n.id for n in g.nodes)
    edges = re.findall(r"^\s+(n\d+) -> (n\d+)", src, re.M)
    assert len(edges) == len(g.edges)
    assert len(re.findall(r"subgraph cluster_\d+ \{", src)) == len(g.clusters)


# -- sub-computations ---------------------------------------------------------------------------
def test_trivial_body_summarised_and_expandable():
    comp = parse(REDUCE)
    g = comp.graph()
    assert "to_apply=add" in g.node("r").attributes
    assert "to_apply=compare LT (p1, p0)" in g.node("srt").attributes  # swapped operands said
    assert [c.label for c in g.clusters] == ["clipped_add"]  # not trivial: a cluster
    (call,) = g.model.edges_from("q", kind="call")
    assert call.label == "to_apply" and g.model.by_id(call.dst).name == "m"
    assert call.dst == g.model.cluster("clipped_add").root
    g2 = comp.graph(expand_trivial=True)
    assert {c.label for c in g2.clusters} == {"add_f32", "clipped_add", "desc"}
    assert not any(a.startswith("to_apply") for a in g2.node("r").attributes)
    assert [e.label for e in g2.model.edges_from("r", kind="call")] == ["to_apply"]


def test_trivial_summary_rule():
    comp = parse(REDUCE)
    assert trivial_summary(comp.computation("add_f32")) == "add"
    assert trivial_summary(comp.computation("clipped_add")) is None
    assert trivial_summary(comp.entry) is None


def test_subcomputations_false_names_them_on_the_caller():
    g = parse(REDUCE).graph(subcomputations=False)
    assert not g.clusters and "to_apply=clipped_add" in g.node("q").attributes


@needs_case("while_fori_loop")
def test_while_body_and_condition_are_clusters_nested_calls_inside():
    g = corpus_module("while_fori_loop").graph(expand="all")  # the first picture closes them to fit
    body, cond, call = (g.model.cluster(n) for n in ("region_0.2", "region_1.3", "closed_call.1"))
    assert body.parent is None and cond.parent is None
    assert call.parent == body.id  # the call inside the body is drawn inside the body
    calls = {e.label: e for e in g.model.edges_from("while.7", kind="call")}
    assert set(calls) == {"condition", "body"}
    assert calls["body"].dst == body.root and g.model.by_id(body.root).name == "tuple.3"
    assert calls["condition"].dst == cond.root and g.model.by_id(cond.root).name == "lt.1"
    assert {n.name for n in g.model.nodes_in(call.id)} >= {"add.4", "tuple.1", "Arg_0.1"}
    src = g.source
    assert f"subgraph {body.id} {{" in src and f"ltail={body.id}" in src and "style=dashed" in src


@needs_case("switch_three_branches")
def test_conditional_branches_are_clusters():
    g = corpus_module("switch_three_branches").graph(expand="all")
    labels = sorted(e.label for e in g.model.edges_from("cond.1", kind="call"))
    assert labels == ["branch_computations[0]", "branch_computations[1]", "branch_computations[2]"]
    assert [c.label for c in g.clusters] == ["region_0.1", "region_1.2", "region_2.3"]


def test_calls_of_unregistered_opcodes_are_resolved_by_name():
    text = REDUCE.replace("reduce(x, zero), dimensions={0}", "my-reduce(x, zero), dims={0}")
    g = parse(text).graph()
    assert [e.label for e in g.model.edges_from("q", kind="call")] == ["to_apply"]
    assert g.node("q").attributes == ["dims={0}"]


def test_fusion_is_a_cluster():
    text = """
fused {
  p0 = f32[3] parameter(0)
  p1 = f32[3] parameter(1)
  m = f32[3] multiply(p0, p1)
  ROOT e = f32[3] exponential(m)
}
ENTRY main {
  a = f32[3] parameter(0)
  b = f32[3] parameter(1)
  ROOT f = f32[3] fusion(a, b), kind=kLoop, calls=fused
}"""
    g = parse(text).graph()
    (call,) = g.model.edges_from("f", kind="call")
    assert call.label == "calls" and g.model.cluster("fused").root == call.dst
    assert "kind=kLoop" in g.node("f").attributes


# -- errors -------------------------------------------------------------------------------------
def test_instruction_error_is_drawn_red_with_its_message():
    comp = parse(SIMPLE)
    comp.entry.instruction("s").error = xe.ShapeError("Add: lhs f32[2,3] and rhs f32[3,2] differ")
    g = comp.graph()
    node = g.node("s")
    assert node.error.startswith("Add: lhs f32[2,3]") and node.color == CATEGORY_STYLE["error"][0]
    assert "error" in g.model.legend
    label = dotmod.node_label(node, None)
    assert dotmod.ERROR_RED in label and "Add: lhs f32[2,3] and rhs" in label


def test_builder_partial_graph_with_failed_node():
    b = xe.XlaBuilder("demo")
    x = xe.Parameter(b, 0, "f32[2,3]")
    y = xe.Transpose(x, permutation=(1, 0))
    with pytest.raises(xe.ShapeError) as info:
        xe.Add(x, y)
    g = render.graph_of_builder(b, error=info.value, operands=[x, y], opcode="add")
    failed = g.model.by_id("failed")
    assert failed.kind == "failed" and failed.title == "add (failed)"
    assert failed.error == str(info.value) and "Add" in failed.error
    into = [e for e in g.edges if e.dst == "failed"]
    assert [(g.model.by_id(e.src).name, e.label) for e in into] == [(x.name, "0: f32[2,3]"), (y.name, "1: f32[3,2]")]
    assert not any(n.is_root for n in g.nodes)  # nothing is the root of a computation being built
    assert "(failed)" in g.source and "add failed" in g.model.title


def test_builder_graph_without_error():
    b = xe.XlaBuilder("ok")
    x = xe.Parameter(b, 0, "f32[2,3]")
    xe.Transpose(x, permutation=(1, 0))
    g = render.graph_of_builder(b)
    assert [n.title for n in g.nodes] == ["parameter 0", "transpose"] and len(g.edges) == 1


def test_missing_dot_says_how_to_install(monkeypatch):
    g = parse(SIMPLE).graph()
    monkeypatch.setenv("PATH", "/nonexistent")
    assert "digraph" in g.source  # the DOT text needs no Graphviz
    with pytest.raises(render.GraphvizNotFoundError) as info:
        g.pipe("svg")
    message = str(info.value)
    for hint in ("apt-get install graphviz", "brew install graphviz", "conda install -c conda-forge graphviz",
                 "binder/apt.txt"):
        assert hint in message
    bundle = g._repr_mimebundle_()
    assert "image/svg+xml" not in bundle and "apt-get install graphviz" in bundle["text/plain"]


# -- values ---------------------------------------------------------------------------------------
MOVE = """
ENTRY main {
  x = f32[2,3] parameter(0)
  t = f32[3,2] transpose(x), dimensions={1,0}
  ROOT r = f32[6] reshape(t)
}
"""


def test_values_from_args_give_stats_nan_inf_and_heatmap():
    comp = parse(MOVE)
    x = np.array([[1, 2, np.nan], [4, np.inf, -6]], np.float32)
    g = comp.graph(args=(x,))
    t = g.node("t")
    assert t.stats == ["min -6  max 4  mean 0.25", "NaN 1  Inf 1"] and t.alert
    assert "NaN = 1" in t.tooltip and "+Inf = 1, -Inf = 0" in t.tooltip
    assert t.image.startswith(b"\x89PNG")
    assert "NaN 1  Inf 1" in dotmod.node_label(t, None)
    assert comp.graph(args=(x,), heatmaps=False).node("t").image is None


def test_values_by_instruction_or_name():
    comp = parse(MOVE)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    from xla_explorer.inspect import instruction_values
    values = instruction_values(comp, x)
    assert comp.graph(values=values).node("r").stats == ["min 0  max 5  mean 2.5"]
    assert comp.graph(values={"r": x.reshape(6)}).node("r").stats == ["min 0  max 5  mean 2.5"]
    assert comp.graph(values={"r": x.reshape(6)}).node("t").stats == []
    with pytest.raises(ValueError):
        comp.graph(values=values, args=(x,))


def test_summaries_of_each_kind_of_value():
    import ml_dtypes
    assert summarize(np.float32(2.5)).lines == ["= 2.5"]
    assert summarize(np.int32(7)).lines == ["= 7"]
    assert summarize(np.array([3, -1, 4], np.int32)).lines == ["min -1  max 4  mean 2"]
    assert summarize(np.array([True, False, True])).lines == ["true 2 / 3"]
    assert summarize(np.zeros((0, 3), np.float32)).lines == ["empty"]
    assert summarize(np.array([3 + 4j, np.nan], np.complex64)).lines == ["|x| min 5  max 5  mean 5", "NaN 1  Inf 0"]
    assert summarize(np.array([1, 2], ml_dtypes.bfloat16)).lines == ["min 1  max 2  mean 1.5"]
    assert summarize(np.array([np.nan, np.nan], np.float32)).lines == ["no finite values", "NaN 2  Inf 0"]
    tup = summarize((np.ones(2, np.float32), np.int32(1)))
    assert tup.lines == ["[0] min 1  max 1  mean 1", "[1] = 1"] and tup.image is None


def _png_size_and_pixels(data):
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    w, h = struct.unpack(">II", data[16:24])
    idat = data.index(b"IDAT")
    length = struct.unpack(">I", data[idat - 4:idat])[0]
    raw = zlib.decompress(data[idat + 4:idat + 4 + length])
    rows = np.frombuffer(raw, np.uint8).reshape(h, 1 + 3 * w)[:, 1:].reshape(h, w, 3)
    return w, h, rows


def test_heatmap_png_is_a_valid_image_with_special_colours():
    assert heatmap_png(np.float32(1)) is None
    w, h, px = _png_size_and_pixels(heatmap_png(np.array([0, np.nan, np.inf, -np.inf, 1], np.float32)))
    cell = w // 5
    assert w == 5 * cell and h >= 8
    assert tuple(px[0, cell]) == (255, 0, 255) and tuple(px[0, 2 * cell]) == (255, 255, 255)
    assert tuple(px[0, 3 * cell]) == (0, 0, 0)
    w, h, _ = _png_size_and_pixels(heatmap_png(np.random.rand(300, 500)))  # big arrays are sampled
    assert w <= 96 and h <= 40


# -- large graphs ---------------------------------------------------------------------------------
CHAIN = """
ENTRY main {
  x = f32[4] parameter(0)
  a = f32[4] negate(x)
  b = f32[4] exponential(a)
  c = f32[4] add(b, x)
  d = f32[4] abs(c)
  ROOT e = f32[4] sqrt(d)
}
"""


def test_neighbourhood_view_marks_what_is_cut():
    g = parse(CHAIN).graph(around="b", radius=1)
    kept = sorted(n.name for n in g.nodes if n.kind == "instruction")
    assert kept == ["a", "b", "c"]
    more = [n for n in g.nodes if n.kind == "more"]
    assert sorted(n.tooltip for n in more) == ["cut off: d", "cut off: x", "cut off: x"]
    labels = {(g.model.by_id(e.src).name, g.model.by_id(e.dst).name, e.label) for e in g.edges if e.kind == "more"}
    assert ("c", "", "+1 more") in labels and ("", "a", "+1 more") in labels
    assert "around b, radius 1" in g.model.title
    assert parse(CHAIN).graph(around="b", radius=0).model.nodes[0].name == "b"


def test_path_view_keeps_the_nodes_between():
    comp = parse(CHAIN)
    g = comp.graph(path=("a", "d"))
    assert sorted(n.name for n in g.nodes if n.kind == "instruction") == ["a", "b", "c", "d"]
    assert sorted(n.name for n in comp.graph(path=("d", "a")).nodes if n.kind == "instruction") == ["a", "b", "c", "d"]
    with pytest.raises(ValueError, match="no path"):
        parse(SIMPLE).graph(path=("t", "s"))
    with pytest.raises(KeyError, match="did you mean"):
        comp.graph(around="bb")


@needs_case("while_fori_loop")
def test_neighbourhood_keeps_the_clusters_of_kept_nodes():
    g = corpus_module("while_fori_loop").graph(around="while.7", radius=1)
    kept = {n.name for n in g.nodes if n.kind == "instruction"}
    assert {"while.7", "tuple.3", "lt.1", "while.6"} <= kept
    assert sorted(c.label for c in g.clusters) == ["region_0.2", "region_1.3"]


def test_wrap_breaks_long_text():
    assert wrap("short") == ["short"]
    lines = wrap("(" + ", ".join(["f32[3,4]"] * 20) + ")", width=30)
    assert all(len(line) <= 30 for line in lines) and len(lines) == 4 and lines[-1].endswith("…")


# -- the corpus, and drawing ------------------------------------------------------------------------
@pytest.mark.parametrize("case", corpus_cases())
def test_every_corpus_case_has_a_graph(case):
    comp = corpus_module(case)
    first = comp.graph()
    # the first picture is the whole module, or (a big one wider than a notebook) collapsed to fit
    if len(first.hierarchy) > ALWAYS_WHOLE and render.dot_available():
        assert first.width_pt() <= MAX_WIDTH_PT or {n.kind for n in first.nodes} >= {"group"}
    g = comp.graph(expand="all")
    drawn = {id(n.inst) for n in g.nodes}
    assert all(id(i) in drawn for i in comp.entry.instructions)
    for c in g.clusters:
        assert {id(i) for i in c.computation.instructions} <= drawn
    assert g.source.startswith("digraph")


@needs_dot
@needs_case("while_fori_loop")
def test_a_small_wide_module_closes_its_called_computations_to_fit():
    """41 instructions, 1,970 pt wide whole (the body, the condition and the call in the
    body side by side): the first picture keeps every instruction of the entry, closes the
    body and condition (on the while's node) and fits a notebook; expanding reaches all."""
    comp = corpus_module("while_fori_loop")
    whole = comp.graph(expand="all")
    assert whole.width_pt() > MAX_WIDTH_PT
    g = comp.graph()
    assert g.width_pt() <= MAX_WIDTH_PT
    names = {n.name for n in g.nodes if n.kind == "instruction"}
    assert {i.name for i in comp.entry.instructions} <= names
    assert not any(n.kind == "group" for n in g.nodes) and not g.clusters  # no scope or part boxes
    assert {"region_0.2", "region_1.3"}.isdisjoint(g.opened)
    assert any("body: region_0.2" in line for line in g.node("while.7").calls)
    for _ in range(5):  # every instruction reachable by expanding what the picture offers
        closed = [k for n in g.nodes for k in n.toggles if k not in g.opened]
        if not closed:
            break
        g = g.expand(*closed)
    assert {(n.name, id(n.inst)) for n in g.nodes} == {(n.name, id(n.inst)) for n in whole.nodes}
    # what asks for the inside of the loop keeps it open: a highlight there, values
    assert "region_0.2" in comp.graph(highlight="add.9").opened
    assert "region_0.2" in comp.graph(args=(np.ones((3, 4), np.float32),)).opened


DRAWN = ["while_fori_loop", "reduce_argmax_argmin_variadic", "switch_three_branches",
         "sort_multi_operand_num_keys", "real_attention_noncausal"]


@needs_dot
@pytest.mark.parametrize("case", [c for c in DRAWN if c in corpus_cases()])
def test_corpus_graphs_draw(case):
    svg = corpus_module(case).graph()._repr_svg_()
    assert svg.lstrip().startswith("<?xml") or "<svg" in svg[:500]
    assert svg.count('class="node"') >= len(corpus_module(case).entry.instructions)


@needs_dot
def test_save_every_format(tmp_path):
    g = parse(MOVE).graph(args=(np.arange(6, dtype=np.float32).reshape(2, 3),))
    assert g.save(tmp_path / "g.svg").read_text().count("data:image/png;base64,") == 3
    assert "xe_heat_" not in (tmp_path / "g.svg").read_text()  # the heatmaps are inlined
    assert g.save(tmp_path / "g.png").read_bytes()[:4] == b"\x89PNG"
    assert g.save(tmp_path / "g.pdf").read_bytes()[:4] == b"%PDF"
    assert g.save(tmp_path / "g.dot").read_text() == g.source
    assert g.save(tmp_path / "graph.out", format="svg").read_text().count("<svg") == 1
    with pytest.raises(ValueError, match="cannot save"):
        g.save(tmp_path / "g.jpeg")


@needs_dot
def test_jupyter_display_and_tooltips():
    g = parse(MOVE).graph(args=(np.array([[1, 2, 3], [4, 5, np.nan]], np.float32),))
    bundle = g._repr_mimebundle_()
    assert "<svg" in bundle["image/svg+xml"] and bundle["text/plain"].startswith("<HloGraph")
    assert "NaN = 1" in bundle["image/svg+xml"]  # the stats tooltip


@needs_dot
def test_builder_failure_draws():
    b = xe.XlaBuilder("demo")
    x = xe.Parameter(b, 0, "f32[2,3]")
    try:
        xe.Reshape(x, new_sizes=(5,))
    except xe.ShapeError as e:
        g = render.graph_of_builder(b, error=e, operands=[x], opcode="reshape")
    else:
        pytest.skip("Reshape accepted a bad size")
    assert "reshape (failed)" in g.svg()
