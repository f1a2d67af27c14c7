"""Graphs of big modules: the hierarchy they collapse by, and the pictures of it.

Modules are generated as HLO text (layers of scoped ops, called computations, trivial
reduce bodies, constants), a few hundred instructions, so these tests stay quick; one
small JAX program checks the scopes and source lines JAX records."""
import random

import numpy as np
import pytest

import xla_explorer as xe
from xla_explorer import render
from xla_explorer.render.graph import ALWAYS_WHOLE, FULL_VIEW, MAX_NODES, MAX_WIDTH_PT
from xla_explorer.render.hierarchy import MAX_CHILDREN, Group, Hierarchy, scope_of_op_name

needs_dot = pytest.mark.skipif(not render.dot_available(),
                               reason="Graphviz's dot is not installed (apt-get install graphviz)")


def synthetic(layers=30, width=8, metadata=True, seed=0, debug=False):
    """HLO text of a module of ``layers`` scopes ``layer{k}`` (sub-scopes ``mix`` and
    ``act``), each ``width`` element-wise ops with links back to earlier layers, a call of
    a 4-instruction computation and a sum (a trivial ``add`` body) per layer."""
    rng = random.Random(seed)
    meta = (lambda scope, k: f', metadata={{op_name="jit(f)/layer{k}/{scope}" source_file="model.py" '
            f'source_line={10 + k}}}') if metadata else (lambda scope, k: "")
    lines = ["HloModule synth", "", "add {", "  a = f32[] parameter(0)", "  b = f32[] parameter(1)",
             "  ROOT s = f32[] add(a, b)", "}", ""]
    for k in range(layers):
        # instruction names are unique across a module (as in what JAX prints)
        lines += [f"body{k} {{", f"  p{k} = f32[8] parameter(0)",
                  f"  e{k} = f32[8] exponential(p{k}){meta('act/exp', k)}",
                  f"  n{k} = f32[8] negate(e{k}){meta('act/neg', k)}",
                  f"  ROOT m{k} = f32[8] multiply(e{k}, n{k}){meta('act/mul', k)}", "}", ""]
    body = ["  x = f32[8] parameter(0)", "  zero = f32[] constant(0)", "  one = f32[] constant(1)",
            "  ones = f32[8] broadcast(one), dimensions={}"]
    history, sums = ["x"], []
    for k in range(layers):
        body.append(f"  w{k} = f32[8] parameter({k + 1})")
        h = f"h{k}_0"
        body.append(f"  {h} = f32[8] add({history[-1]}, w{k}){meta('mix/add', k)}")
        for j in range(1, width):
            scope = "mix" if j < width // 2 else "act"
            other = rng.choice(history[-3:])
            op = rng.choice(["add", "multiply", "subtract", "maximum"])
            second = rng.choice([other, "ones"])
            body.append(f"  h{k}_{j} = f32[8] {op}({h}, {second}){meta(scope + '/' + op, k)}")
            h = f"h{k}_{j}"
        body.append(f"  c{k} = f32[8] call({h}), to_apply=body{k}{meta('act/call', k)}")
        body.append(f"  r{k} = f32[] reduce(c{k}, zero), dimensions={{0}}, to_apply=add{meta('sum/reduce', k)}")
        history.append(f"c{k}")
        sums.append(f"r{k}")
    body.append(f"  ROOT out = ({', '.join(['f32[8]'] + ['f32[]'] * len(sums))}) tuple({history[-1]}, {', '.join(sums)})")
    lines += ["ENTRY main {", *body, "}", ""]
    return "\n".join(lines)


@pytest.fixture(scope="module")
def big():
    return xe.parse_hlo(synthetic())


def all_instructions(comp):
    """(computation name, instruction name) of every instruction the hierarchy holds."""
    hier = Hierarchy(comp.entry, comp.computations)
    return hier, {(it.computation.name, it.inst.name) for it in hier.items}


def drawn(graph):
    items = graph.hierarchy.items
    return {(items[int(n.id[1:])].computation.name, n.name) for n in graph.nodes if n.kind == "instruction"}


# -- the hierarchy -------------------------------------------------------------------------------
def test_scope_of_op_name():
    assert scope_of_op_name("jit(f)/transpose(jvp(layer3))/dot_general") == ("jit(f)", "transpose(jvp(layer3))")
    assert scope_of_op_name("jit(f)/jvp(jit(relu))/max") == ("jit(f)", "jvp(jit(relu))")
    assert scope_of_op_name("x") == () and scope_of_op_name("") == ()
    assert scope_of_op_name("jit(f)/a/mul;jit(f)/b/add") == ("jit(f)", "a")  # merged ops: the first


def test_groups_follow_scopes_and_calls(big):
    hier = Hierarchy(big.entry, big.computations)
    layer = hier.group("layer3")
    assert layer.kind == "scope" and layer.scope == "layer3"  # "jit(f)", shared by all, left out
    assert {c.label for c in layer.children if isinstance(c, Group)} >= {"mix", "act"}
    body = hier.group("body3")
    assert body.kind == "computation" and body.caller.inst.name == "c3"
    assert body.parent is hier.item("c3").group
    assert "add" not in hier.groups  # a trivial body is no group: its callers name it
    # sizes add up, every instruction once
    assert hier.root.size == len(hier.items) == sum(len(c.instructions) for c in big.computations
                                                       if c.name != "add")


def test_constants_and_parameters_go_where_their_users_are(big):
    hier = Hierarchy(big.entry, big.computations)
    assert hier.item("w5").group.key.startswith("main:layer5")  # used by layer5 only
    # used by every layer's sum: at the top (in a part of the top, 30 layers being too many)
    assert {g.kind for g in hier.enclosing("zero")} == {"part", "module"}
    assert hier.item("ones").constant and not hier.item("x").constant


def test_every_group_opens_onto_a_small_picture():
    comp = xe.parse_hlo(synthetic(layers=40, width=12, metadata=False))
    hier = Hierarchy(comp.entry, comp.computations)
    parts = [g for g in hier.groups.values() if g.kind == "part"]
    assert parts, "a module without metadata is cut into parts"
    for g in hier.groups.values():
        assert sum(isinstance(c, Group) or not c.constant for c in g.children) <= MAX_CHILDREN, g


# -- the pictures --------------------------------------------------------------------------------
def test_small_modules_are_drawn_whole():
    comp = xe.parse_hlo(synthetic(layers=2, width=4))  # 625 pt wide whole: fits a notebook
    assert len(Hierarchy(comp.entry, comp.computations)) <= FULL_VIEW
    g = comp.graph()
    assert not [n for n in g.nodes if n.kind == "group"]
    assert drawn(g) == all_instructions(comp)[1]
    assert {c.label for c in g.clusters} == {"body0", "body1"}  # no scope clusters


@needs_dot
def test_a_small_module_wider_than_a_notebook_closes_only_called_computations():
    comp = xe.parse_hlo(synthetic(layers=3, width=4))  # 778 pt whole
    assert len(Hierarchy(comp.entry, comp.computations)) <= ALWAYS_WHOLE
    assert comp.graph(expand="all").width_pt() > MAX_WIDTH_PT
    g = comp.graph()
    assert g.width_pt() <= MAX_WIDTH_PT
    assert not [n for n in g.nodes if n.kind == "group"] and not g.clusters  # scopes open, unboxed
    entry = {("main", i.name) for i in comp.entry.instructions if not i.opcode == "constant"}
    assert entry <= drawn(g) and not any(c.startswith("body") for c in g.opened)
    assert drawn(g.expand("body0", "body1", "body2")) == all_instructions(comp)[1]


def test_first_picture_of_a_big_module_is_small(big):
    g = big.graph()
    assert len(Hierarchy(big.entry, big.computations)) > FULL_VIEW
    groups = [n for n in g.nodes if n.kind == "group"]
    assert groups and len([n for n in g.nodes if not n.inst or not n.inst.opcode == "constant"]) <= MAX_NODES
    node = groups[0]
    assert node.title.startswith("▸ ") and "instruction" in node.name
    assert any(a.startswith("in: ") for a in node.attributes) or node.shape.startswith("out: ")


def test_every_instruction_is_reachable_by_expanding(big):
    _, everything = all_instructions(big)
    g = big.graph()
    for _ in range(50):
        closed = [k for n in g.nodes for k in n.toggles if k not in g.opened]
        if not closed:
            break
        g = g.expand(*closed)
    assert drawn(g) == everything
    # and one at a time: expanding by an instruction's name draws it
    hier = g.hierarchy
    for item in random.Random(1).sample(hier.items, 25):
        assert big.graph().expand((item.computation.name, item.inst.name)).node(item.inst.name) is not None


def representative(graph, item):
    """Node id drawing ``item``, worked out from the open groups alone."""
    for g in reversed(graph.hierarchy.enclosing(item)):  # outermost first
        if g.key in graph.opened:
            continue
        if g.kind == "computation":
            return representative(graph, g.caller)
        return f"g{g.index}"
    return f"n{item.index}"


@pytest.mark.parametrize("opened", ["default", "some", "all"])
def test_edges_are_exactly_those_between_groups(big, opened):
    g = big.graph()
    if opened == "some":
        g = g.expand("layer4", "body7", "h12_3").collapse("layer4/mix")
    elif opened == "all":
        g = g.expand("all")
    hier = g.hierarchy
    ids = {n.id for n in g.nodes}
    expected = set()
    for it in hier.items:
        for u in it.operand_items:  # this call site's operands (a shared computation has a copy per site)
            if u is None:
                continue
            src, dst = representative(g, u), representative(g, it)
            if src != dst and src in ids:  # a constant is drawn only beside a user drawn
                expected.add((src, dst))
    got = {(e.src, e.dst) for e in g.edges if e.kind == "operand"}
    assert got == expected
    for e in g.edges:  # every node an edge names is drawn
        assert e.src in ids and e.dst in ids


def test_expand_and_collapse_in_place(big):
    g = big.graph()
    key = next(n.group for n in g.nodes if n.kind == "group")
    opened = g.expand(key)
    assert key in opened.opened and key not in g.opened
    assert f"g{opened.hierarchy.group(key).index}" not in {n.id for n in opened.nodes}
    assert any(c.group == key for c in opened.clusters)
    back = opened.collapse(key)
    assert back.opened == g.opened and back.source == g.source
    with pytest.raises(KeyError, match="closed group"):
        g.node("e0")  # inside body0, closed
    with pytest.raises(KeyError, match="no group"):
        g.expand("layer999")


def test_search_finds_instructions_in_closed_groups(big):
    g = big.graph()
    shown = {n.name for n in g.nodes if n.kind == "instruction"}
    hits = g.find("exponential")
    assert len(hits) == 30 and all(h.inst.opcode == "exponential" for h in hits)
    assert not shown & {h.inst.name for h in hits}
    assert [h.inst.name for h in g.find("h7_3")] == ["h7_3"]
    assert {h.inst.name for h in g.find("shape:f32[]")} >= {"r0", "zero"}
    assert {h.inst.name for h in g.find("scope:layer2/sum")} == {"r2"}
    assert g.find("op:negate") == [h for h in g.find("negate") if h.inst.opcode == "negate"]
    hit = hits[5]
    assert g.expand((hit.computation.name, hit.inst.name)).node(hit.inst.name).inst is hit.inst


def test_highlight_marks_the_node_or_its_closed_group(big):
    g = big.graph(highlight="h20_2")
    marked = [n for n in g.nodes if n.highlight]
    assert len(marked) == 1 and marked[0].kind == "group"
    assert "h20_2" in {it.inst.name for it in g.hierarchy.group(marked[0].group).items()}
    opened = g.expand("h20_2")
    assert [n.name for n in opened.nodes if n.highlight] == ["h20_2"]
    # a stepper's location: (computation, instruction, invocation) frames
    located = big.graph().highlight([("main", "c4", 0), ("body4", "e4", 0)]).expand("body4")
    assert {n.name for n in located.nodes if n.highlight} == {"c4", "e4"}
    assert 'COLOR="#ff6d00"' in located.source


def test_source_lines_from_metadata(big):
    g = big.graph(expand="h3_1")
    assert g.node("h3_1").source == "model.py:13"
    group = next(n for n in g.nodes if n.kind == "group" and n.group.startswith("main:layer7"))
    assert group.source == "model.py:17"


def test_stack_frame_sections_give_source_lines():
    text = """HloModule m

FileNames
1 "/home/me/train.py"

FunctionNames
1 "loss"

FileLocations
1 {file_name_id=1 function_name_id=1 line=42 end_line=42 column=3 end_column=9}

StackFrames
1 {file_location_id=1 parent_frame_id=0}

ENTRY e {
  x = f32[2] parameter(0), metadata={op_name="x"}
  ROOT y = f32[2] negate(x), metadata={op_name="jit(loss)/neg" stack_frame_id=1}
}
"""
    comp = xe.parse_hlo(text)
    assert comp.graph().node("y").source == "train.py:42"
    assert "StackFrames\n1 {file_location_id=1" in comp.as_hlo_text()  # printed back
    assert xe.parse_hlo(comp.as_hlo_text()).graph().node("y").source == "train.py:42"


def test_values_show_in_open_nodes_and_alert_on_closed_groups(big):
    values = {"h2_1": np.array([1.0, np.nan], np.float32), "x": np.ones(8, np.float32)}
    g = big.graph(values=values)
    bad = [n for n in g.nodes if n.alert]
    assert len(bad) == 1 and bad[0].kind == "group" and "h2_1" in bad[0].stats[0]
    assert g.expand("h2_1").node("h2_1").alert


@needs_dot
def test_big_module_draws_and_expands(big):
    g = big.graph()
    svg = g.svg()
    assert svg.count('class="node"') >= len(g.nodes) and 'id="g' in svg
    key = next(n.group for n in g.nodes if n.kind == "group")
    assert g.expand(key).svg() != svg


def test_jax_scopes_and_source_lines():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy

    def f(ws, x):
        for i, w in enumerate(ws):
            with jax.named_scope(f"layer{i}"):
                x = jnp.tanh(x @ w)
        return jnp.sum(x ** 2)

    ws = [np.eye(4, dtype=np.float32) for _ in range(2)]
    comp = xe.from_jax(jax.grad(f), ws, np.ones((2, 4), np.float32))
    hier = Hierarchy(comp.entry, comp.computations, debug_sections=comp.debug_sections)
    scopes = {g.scope for g in hier.groups.values() if g.kind == "scope"}
    assert any("layer0" in s for s in scopes) and any(s.startswith("transpose") for s in scopes)
    g = comp.graph(max_nodes=8)
    assert any(n.kind == "group" for n in g.nodes)
    tanh = g.expand(g.find("op:tanh")[0].inst.name).node(g.find("op:tanh")[0].inst.name)
    assert tanh.source.startswith("test_graph_hierarchy.py:")


WHILE = """HloModule loop

cond {
  s = (s32[], f32[3]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(4)
  ROOT lt = pred[] compare(i, n), direction=LT
}

body {
  s = (s32[], f32[3]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[3] get-tuple-element(s), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  two = f32[] constant(2)
  b = f32[3] broadcast(two), dimensions={}
  y = f32[3] multiply(x, b)
  ROOT t = (s32[], f32[3]) tuple(j, y)
}

ENTRY main {
  x0 = f32[3] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[3]) tuple(zero, x0)
  w = (s32[], f32[3]) while(init), condition=cond, body=body
  ROOT out = f32[3] get-tuple-element(w), index=1
}
"""


def test_values_inside_called_computations_from_the_trace():
    comp = xe.parse_hlo(WHILE)
    x = np.float32([1, 2, 3])
    g = comp.graph(args=(x,))
    y = g.node("y")  # in the while body: its first iteration
    assert y.stats and y.stats[0].startswith("min 2  max 6") and "ran 4 times: the first shown" in y.stats
    assert g.node("out").stats[0].startswith("min 16  max 48")
    same = comp.graph(values=comp.trace(x))  # a trace given as values
    assert same.node("y").stats == y.stats


def test_invocation_picks_the_run_shown():
    comp = xe.parse_hlo(WHILE)
    x = np.float32([1, 2, 3])
    g = comp.graph(args=(x,), invocation=2)  # the body's third iteration: y = x * 2**3
    assert g.node("y").stats[0].startswith("min 8  max 24") and "ran 4 times: run 2 shown" in g.node("y").stats
    assert g.node("out").stats[0].startswith("min 16  max 48")  # the entry ran once: its run
    last = comp.graph(args=(x,), invocation=9)  # fewer runs than that: the last one
    assert last.node("y").stats[0].startswith("min 16  max 48") and "ran 4 times: the last shown" in last.node("y").stats
    by_comp = comp.graph(values=comp.trace(x), invocation={"body": 1})
    assert by_comp.node("y").stats[0].startswith("min 4  max 12")
    assert by_comp.node("lt").stats == comp.graph(args=(x,)).node("lt").stats  # cond: its first run
    for bad in (-1, 1.5, True, {"body": -2}):
        with pytest.raises(ValueError, match="invocation="):
            comp.graph(args=(x,), invocation=bad)
    with pytest.raises(ValueError, match="invocation= picks a run from a trace"):
        comp.graph(values={"y": x}, invocation=1)


def test_a_word_names_forward_and_backward_scopes():
    text = synthetic(layers=12).replace('op_name="jit(f)/layer1/', 'op_name="jit(f)/transpose(jvp(layer1))/')
    comp = xe.parse_hlo(text.replace('op_name="jit(f)/layer11/', 'op_name="jit(f)/jvp(layer1)/'))
    hier = Hierarchy(comp.entry, comp.computations)
    assert {g.scope for g in hier.groups_named("layer1")} == {"transpose(jvp(layer1))", "jvp(layer1)"}
    with pytest.raises(KeyError, match="names 2 groups"):
        hier.group("layer1")
    g = comp.graph(max_nodes=8).expand("layer1")
    assert {hier.groups_named("layer1")[0].key, hier.groups_named("layer1")[1].key} <= g.opened
    assert not {k for k in g.collapse("layer1").opened if "layer1)" in k}


@pytest.mark.parametrize("name,radius", [("h5_3", 2), ("e0", 1), ("c4", 2), ("zero", 1), ("out", 0)])
def test_around_draws_the_neighbourhood_of_the_whole_graph(big, name, radius):
    """around= builds nodes for the neighbourhood and its rim only: the same picture."""
    from xla_explorer.render.model import build_model
    from xla_explorer.render.select import neighbourhood
    fast = big.graph(around=name, radius=radius)
    full = neighbourhood(build_model(big.entry, big.computations), name, radius)
    assert sorted((n.id, n.title, n.name, tuple(n.attributes), n.tooltip.split("\n")[0]) for n in fast.nodes) == \
        sorted((n.id, n.title, n.name, tuple(n.attributes), n.tooltip.split("\n")[0]) for n in full.nodes)
    assert sorted((e.src, e.dst, e.kind, e.label) for e in fast.edges) == \
        sorted((e.src, e.dst, e.kind, e.label) for e in full.edges)
    assert {c.label for c in fast.clusters} == {c.label for c in full.clusters}


def test_group_numbers_are_unique(big):
    """Node and cluster ids come from group numbers: merged scopes must not free theirs."""
    hier = Hierarchy(big.entry, big.computations)
    numbers = [g.index for g in hier.groups.values()]
    assert len(numbers) == len(set(numbers))
    g = big.graph(expand="all")
    ids = [n.id for n in g.nodes] + [c.id for c in g.clusters]
    assert len(ids) == len(set(ids))


@needs_dot
def test_first_picture_of_a_deep_gradient_fits_a_notebook():
    """jax.grad of a 6-layer MLP (69 instructions, drawn whole 1,400 pt wide before): the
    first picture fits JupyterLab's default output width with no text under 8 pt (10.7 px)."""
    import re
    jax = pytest.importorskip("jax")
    jnp = jax.numpy

    def loss(ws, x):
        for w in ws:
            x = jnp.tanh(x @ w)
        return jnp.mean(x ** 2)

    ws = [np.eye(16, dtype=np.float32) for _ in range(6)]
    comp = xe.from_jax(jax.grad(loss), ws, np.ones((4, 16), np.float32))
    g = comp.graph()
    assert len(g.hierarchy) > ALWAYS_WHOLE and g.width_pt() <= MAX_WIDTH_PT
    assert 10 <= len(g.nodes) and any(n.kind == "group" for n in g.nodes)
    sizes = [float(s) for s in re.findall(r'font-size="([\d.]+)"', g.svg())]
    assert sizes and min(sizes) >= 8
    # the literals are written on their users, not drawn: no scalar constant node is left open
    assert not any(n.inst is not None and n.inst.opcode == "constant" and n.inst.shape.rank == 0 for n in g.nodes)
    assert comp.graph().width_pt() == g.width_pt()  # the choice is remembered, the same picture


def test_group_labels_are_short_with_the_full_path_on_hover():
    from xla_explorer.render.hierarchy import short_scope
    assert short_scope("transpose(jvp(layer3))") == "layer3 · backward"
    assert short_scope("jvp(mlp)") == "mlp" and short_scope("jit(loss)") == "loss"
    assert short_scope("transpose(jvp())") == "backward" and short_scope("jvp()") == "forward"
    assert short_scope("cond[branch=1]") == "cond[branch=1]" and short_scope("layer0") == "layer0"
    text = synthetic(layers=12).replace('op_name="jit(f)/layer1/', 'op_name="jit(f)/transpose(jvp(layer1))/')
    comp = xe.parse_hlo(text)
    g = comp.graph(max_nodes=20)
    back = next(n for n in g.nodes if n.kind == "group" and n.group == "main:transpose(jvp(layer1))")
    assert back.title == "▸ layer1 · backward"
    # compact: count and source on one line, in and out shapes, opcodes; every line short
    assert back.name.startswith(f"{g.hierarchy.group(back.group).size} instructions · model.py:")
    assert [a.split(":")[0] for a in back.attributes[:2]] == ["in", "out"]
    assert all(len(a) <= 48 for a in back.attributes)
    assert "transpose(jvp(layer1))" in back.tooltip  # the full path on hover
    flat = Hierarchy(xe.parse_hlo(synthetic(layers=6, metadata=False)).entry)  # no scopes: parts
    parts = [grp for grp in flat.groups.values() if grp.kind == "part" and grp.label != "parameters"]
    assert len(parts) > 2 and all(p.label == "operations" or p.label.startswith("part ") for p in parts)


SHARED = """HloModule shared

f {
  p = f32[4] parameter(0)
  e = f32[4] exponential(p)
  ROOT n = f32[4] negate(e)
}

clip {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  s = f32[] add(a, b)
  lim = f32[] constant(10)
  ROOT m = f32[] minimum(s, lim)
}

ENTRY main {
  x = f32[4] parameter(0)
  c1 = f32[4] call(x), to_apply=f
  c2 = f32[4] call(c1), to_apply=f
  zero = f32[] constant(0)
  r1 = f32[] reduce(c1, zero), dimensions={0}, to_apply=clip
  r2 = f32[] reduce(c2, zero), dimensions={0}, to_apply=clip
  ROOT out = (f32[], f32[]) tuple(r1, r2)
}
"""


def test_a_computation_called_from_several_places_is_drawn_at_each():
    comp = xe.parse_hlo(SHARED)
    g = comp.graph()  # small: everything open
    hier = g.hierarchy
    f, clip = (comp.computation(n) if hasattr(comp, "computation") else next(c for c in comp.computations if c.name == n)
               for n in ("f", "clip"))
    assert [s.key for s in hier.sites[id(f)]] == ["f", "f@c2"] and [s.caller.name for s in hier.sites[id(f)]] == ["c1", "c2"]
    assert [s.caller.name for s in hier.sites[id(clip)]] == ["r1", "r2"] and hier.group("clip@r2").shared == 2
    labels = {c.label for c in g.clusters}
    assert {"f (at c1)", "f (at c2)", "clip (at r1)", "clip (at r2)"} <= labels
    assert sum(n.name == "e" for n in g.nodes) == 2 and len(g.find("op:exponential")) == 2
    # each caller's dashed call edge goes to its own copy's root, and each copy's edges stay inside it
    roots = {g.model.by_id(e.src).name: e.dst for e in g.edges if e.kind == "call" and e.attribute == "to_apply"}
    assert roots["c1"] != roots["c2"] and {g.model.by_id(roots[c]).name for c in ("c1", "c2")} == {"n"}
    for site in hier.sites[id(f)]:
        e, n = (it for it in site.items() if it.inst.name in ("e", "n"))
        assert any(edge.src == f"n{e.index}" and edge.dst == f"n{n.index}" for edge in g.edges)
    # expand and collapse per call site
    closed = comp.graph(collapse=["f", "f@c2", "clip", "clip@r2"])
    c1 = closed.node("c1")
    assert any("shared by 2 call sites" in line for line in c1.calls)
    one = closed.expand("f@c2")
    assert "f@c2" in one.opened and "f" not in one.opened
    assert [c.label for c in one.clusters if c.computation is f] == ["f (at c2)"]
    assert one.node("c1").calls and not one.node("c2").calls
    assert sum(n.name == "e" for n in one.nodes) == 1
    # every instruction of every copy is reachable
    assert {f"n{it.index}" for it in hier.items} == {n.id for n in comp.graph(expand="all").nodes}


def test_each_call_site_shows_its_own_values():
    comp = xe.parse_hlo(SHARED)
    x = np.float32([0, 1, 2, 3])
    g = comp.graph(args=(x,))
    es = [n for n in g.nodes if n.name == "e"]
    assert len(es) == 2
    at = {n.cluster: n for n in es}
    first, second = (next(c for c in g.clusters if c.label == f"f (at {s})") for s in ("c1", "c2"))
    assert at[first.id].stats[0].startswith("min 1  max 20.09")            # exp(x)
    assert at[second.id].stats[0].startswith("min 1.892e-09  max 0.3679")  # exp(-exp(x))
    assert not any("ran" in line for line in at[second.id].stats)          # once at this site
    # a shared reduce body: each reduce's own folds, counted per reduce
    ms = {n.cluster: n.stats for n in g.nodes if n.name == "m"}
    r1, r2 = (next(c.id for c in g.clusters if c.label == f"clip (at {s})") for s in ("r1", "r2"))
    assert ms[r1] != ms[r2] and "ran 3 times: the first shown" in ms[r1] and "ran 3 times: the first shown" in ms[r2]
    again = comp.graph(args=(x,), invocation=1)
    assert all("ran 3 times: run 1 shown" in n.stats for n in again.nodes if n.name == "m")
    assert [n.stats for n in again.nodes if n.name == "e"] == [n.stats for n in es]  # each ran once per site
