"""One picture of a module: the ``GraphModel`` of a ``Hierarchy`` with some groups open.

Every instruction is drawn by the node of its *representative*: itself when all the
groups around it are open, else the outermost closed group (a node of its own), or, in a
closed called computation, its caller's node.  An edge of the picture is an operand edge
of the module between two different representatives: between two instructions as in the
full graph (one per operand, labelled with the shape), otherwise one edge per pair of
nodes, labelled with the value's shape or how many values cross.  A closed group's node
says what it holds: its instruction count, its commonest opcodes, the shapes of the
values going in and out, and where in the source it comes from.

A constant (or a broadcast of one...) at an open level is drawn only when one of its
users is drawn as an instruction (or it has none): constants feeding closed groups
would be many edges that say little.  With every group open and ``scope_clusters=False``
this is the full graph: one node per instruction, called computations as clusters
linked to their callers.
"""
import collections

import numpy as np

from .hierarchy import Group
from .model import Cluster, Edge, GraphModel, Node, instruction_node, shape_text, trivial_summary

#: shapes listed on a group node's "in" and "out" lines before "+N" (all of them on hover)
MAX_SHAPES = 2
#: pictures of more nodes are laid out for speed (``GraphModel.quick_layout``): the whole
#: gradient of a 12-layer CNN (108 nodes) took Graphviz 1.4 s of CPU with edge labels as
#: nodes of the layout, 0.1 s with labels placed after it
QUICK_LAYOUT_ABOVE = 60


def view_model(hier, opened, *, values=None, runs=None, all_attributes=False, max_constant_elements=8, heatmaps=True,
               title="", highlight=(), scope_clusters=True, only=None):
    """The ``GraphModel`` of ``hier`` with the groups whose keys are in ``opened`` open.

    ``highlight``: Items and Groups to mark (the "where am I" of a stepper): an item
    inside a closed group marks that group's node.  ``only``: draw just these items (their
    indices; a neighbourhood's), the others left out as if they were not there."""
    view = _View(hier, set(opened), values, runs, all_attributes, max_constant_elements, heatmaps, scope_clusters)
    view.only = None if only is None else set(only)
    return view.build(title, highlight)


class _View:
    def __init__(self, hier, opened, values, runs, all_attributes, max_constant_elements, heatmaps, scope_clusters):
        self.hier, self.opened = hier, opened | {hier.root.key}
        self.values, self.runs = values or {}, runs or {}
        self.all_attributes, self.max_constant_elements = all_attributes, max_constant_elements
        self.heatmaps, self.scope_clusters = heatmaps, scope_clusters
        self.model = GraphModel()
        self.rep = [None] * len(hier.items)   # item index -> node id that draws it
        self.group_nodes = {}                  # node id -> Group (closed groups drawn as nodes)
        self.group_cluster = {}                # group key -> cluster id (open groups drawn as clusters)
        self.inst_nodes = {}                   # node id -> Item
        self.only = None                       # item indices to draw (None: all)

    # -- nodes and clusters ---------------------------------------------------------------------
    def build(self, title, highlight):
        self.pending = []  # (constant Item, cluster): drawn only beside a user drawn
        self.visit(self.hier.root, None)
        for item, cluster in reversed(self.pending):  # users before the constants they use
            if self.only is not None or not item.users or any(self.rep[u.index] == f"n{u.index}" for u in item.users):
                if not (self.scope_clusters and self.inline(item)):
                    self.instruction(item, cluster)
        order = {}  # nodes in program order: a group where its first instruction is
        for it in self.hier.items:
            order.setdefault(self.rep[it.index], it.index)
        self.model.nodes.sort(key=lambda n: order.get(n.id, len(order)))
        self.edges()
        self.mark(highlight)
        self.model.title = title
        self.model.quick_layout = self.scope_clusters or len(self.model.nodes) > QUICK_LAYOUT_ABOVE
        self.model.update_legend()
        return self.model

    def visit(self, group, cluster):
        for child in group.children:
            if isinstance(child, Group):
                if child.key in self.opened:
                    self.visit(child, self.cluster(child, cluster) if self.scope_clusters else cluster)
                else:
                    node = self.group_node(child, cluster)
                    for it in child.items():
                        self.rep[it.index] = node.id
            elif self.only is not None and child.index not in self.only:
                for _, callee in child.callees:  # left out, but what it calls may be wanted
                    if callee.key in self.opened:
                        self.visit(callee, self.cluster(callee, cluster))
            elif child.constant:
                self.pending.append((child, cluster))
            else:
                self.instruction(child, cluster)

    def cluster(self, group, parent):
        cid = f"cluster_{group.index}"
        if group.kind in ("computation", "module"):
            try:
                signature = group.computation.signature()
            except AttributeError:
                signature = ""
            c = Cluster(cid, group.computation.name, signature, parent=parent, computation=group.computation)
            if group.shared > 1:  # one computation, several callers: this copy is its caller's
                c.label = f"{group.computation.name} (at {group.caller.inst.name})"
                c.tooltip = (f"{group.computation.name}, called from {group.shared} places: "
                             f"this is the call by {group.caller.inst.name}")
        else:
            c = Cluster(cid, group.label, f"{group.size:,} instructions", parent=parent,
                        tooltip=f"{group.kind}: {group.scope or group.key}\n{group.size:,} instructions")
        c.group, c.kind = group.key, group.kind
        self.group_cluster[group.key] = cid
        self.model.clusters.append(c)
        return cid

    def instruction(self, item, cluster):
        inst = item.inst
        node = instruction_node(inst, f"n{item.index}", item.calls, all_attributes=self.all_attributes,
                                max_constant_elements=self.max_constant_elements)
        node.cluster, node.is_root = cluster, inst is item.computation.root
        node.source = self.hier.sources.where(inst, meta=item.meta)
        if node.source:
            node.tooltip += f"\n{node.source}"
        self.model.nodes.append(node)
        self.inst_nodes[node.id] = item
        self.rep[item.index] = node.id
        self.overlay_value(node, item)
        callees = {id(g.computation) for _, g in item.callees}
        for key, callee in item.calls:
            group = self.hier.computation_group.get(id(callee))
            if group is None:  # a trivial body, or subcomputations=False: named on the caller
                summary = None if self.hier.expand_trivial else trivial_summary(callee)
                node.attributes.append(f"{key}={summary if summary is not None else callee.name}")
            elif id(callee) not in callees:  # past the copy budget: drawn beside its first caller
                node.toggles.append(group.key)
                if group.key not in self.opened:
                    node.attributes.append(f"{key}={callee.name} (drawn at {group.caller.inst.name})")
        for key, group in item.callees:
            node.toggles.append(group.key)
            shared = f" · shared by {group.shared} call sites" if group.shared > 1 else ""
            if group.key in self.opened:
                self.visit(group, self.cluster(group, cluster))
            else:
                node.calls.append(f"▸ {key}: {group.computation.name} · {_count(group.size)}{shared}")
                for it in group.items():
                    self.rep[it.index] = node.id

    def inline(self, item):
        """Write a small literal (a scalar constant, or a broadcast or reshape of one) on its
        users' nodes ("operand 1 = 0.5 (broadcast)"), as XLA's graph dumper does, instead of drawing
        its node: in a collapsed picture such constants were a third of an open scope's
        nodes and a column of its width.  Only beside users drawn as instructions."""
        inst, via = item.inst, []
        while inst.opcode in _THROUGH and len(inst.operands) == 1:
            via.append(inst.opcode)
            inst = inst.operands[0]
        # users in closed groups lose nothing worth an edge: a literal is no data flow
        drawn = [u for u in item.users if self.rep[u.index] == f"n{u.index}"]
        if inst.opcode != "constant" or not drawn:
            return False
        literal = inst.attrs.get("literal")
        if literal is None or getattr(literal, "size", 1) != 1:
            return False
        text = instruction_node(inst, max_constant_elements=1).constant
        if not text or len(text) > 24:
            return False
        text += f" ({via[0]})" if via else ""
        for user in drawn:
            node = self._node(f"n{user.index}")
            many = len(user.inst.operands) > 1
            for i, o in enumerate(user.inst.operands):
                if o is item.inst:
                    node.attributes.append(f"operand {i} = {text}" if many else f"operand = {text}")
        return True

    def group_node(self, group, cluster):
        node = Node(f"g{group.index}", "group", f"▸ {group.label}", name=_count(group.size),
                    category="group", cluster=cluster)
        node.group = group.key
        node.toggles = [group.key]
        self.model.nodes.append(node)
        self.group_nodes[node.id] = group
        return node

    def overlay_value(self, node, item):
        from .values import summarize
        inst = item.inst
        found, value = self.value_of(item)
        if not found:
            return
        s = summarize(value, heatmap=self.heatmaps)
        node.alert, node.image = s.alert, s.image
        node.stats = [] if node.constant else s.lines  # an inlined constant shows its value already
        node.tooltip = "\n".join([node.tooltip] + s.tooltip)
        runs, shown = self.runs.get(self.site_key(item), self.runs.get(inst, (1, 0)))
        if runs > 1:
            node.stats.append(f"ran {runs:,} times: " + ("the first shown" if shown == 0 else
                                                         "the last shown" if shown == runs - 1 else f"run {shown} shown"))

    # -- edges ---------------------------------------------------------------------------------
    def edges(self):
        rep, items, model = self.rep, self.hier.items, self.model
        grouped = collections.OrderedDict()   # (src, dst) -> [values], [operand indices]
        ins = collections.defaultdict(dict)   # group node id -> {id(value): value} entering
        outs = collections.defaultdict(dict)  # group node id -> {id(value): value} leaving
        for it in items:
            v = it.inst
            dst = rep[it.index]
            many = len(v.operands) > 1
            for i, (u, ui) in enumerate(zip(v.operands, it.operand_items)):
                if ui is None:
                    continue
                src = rep[ui.index]
                if src == dst or src is None or dst is None:  # None: a constant not drawn
                    continue
                if src in self.inst_nodes and dst in self.inst_nodes:
                    text = self.hier.shape_text(u)
                    if len(text) > 40:
                        text = text[:39] + "…"
                    model.edges.append(Edge(src, dst, "operand", label=f"{i}: {text}" if many else text,
                                            operand_index=i if many else None))
                    continue
                entry = grouped.setdefault((src, dst), ({}, []))
                entry[0][id(u)] = u
                if dst in self.inst_nodes and many:
                    entry[1].append(i)
                if dst in self.group_nodes:
                    ins[dst][id(u)] = u
                if src in self.group_nodes:
                    outs[src][id(u)] = u
        for (src, dst), (vals, indices) in grouped.items():
            vals = list(vals.values())
            label = _values_label(vals, self.hier.shape_text)
            if indices and len(vals) == 1:
                label = f"{','.join(map(str, sorted(set(indices))))}: {label}"
            model.edges.append(Edge(src, dst, "operand", label=label,
                                    operand_index=indices[0] if len(indices) == 1 else None, count=len(vals)))
        for nid, group in self.group_nodes.items():
            ri = group.home.root_item if group.home is not None else None
            if ri is not None and rep[ri.index] == nid:
                outs[nid][id(ri.inst)] = ri.inst
            self.describe(self._node(nid), group,
                          list(ins[nid].values()), list(outs[nid].values()))
        self.call_edges()

    def _node(self, nid):
        if not hasattr(self, "_nodes_by_id") or nid not in self._nodes_by_id:  # nodes are added while building
            self._nodes_by_id = {n.id: n for n in self.model.nodes}
        return self._nodes_by_id[nid]

    def call_edges(self):
        """A dashed edge from each caller to the root of each open computation it calls."""
        for nid, item in self.inst_nodes.items():
            for key, group in item.callees:
                if group.key not in self.opened or group.key not in self.group_cluster or group.root_item is None:
                    continue
                root = self.rep[group.root_item.index]
                if root is None:  # left out (``only``)
                    continue
                cid = self.group_cluster[group.key]
                for c in self.model.clusters:
                    if c.id == cid and c.root is None:
                        c.root = root
                self.model.edges.append(Edge(nid, root, "call", label=key, attribute=key, cluster=cid))

    def describe(self, node, group, ins, outs):
        """The lines of a closed group's node, compact: its short label, how many
        instructions and where in the source, the shapes going in and out, its commonest
        opcodes; the hover text says all of it (the full scope path, every shape)."""
        counts, files = self.hier.summary(group)
        counts = collections.Counter({op: k for op, k in counts.items() if op != "parameter"})
        ops = [f"{op} ×{k}" if k > 1 else op for op, k in counts.most_common(3)]
        if len(counts) > 3:
            ops.append("…")
        head = [_count(group.size)]
        if files:
            file, (_, lo, hi) = max(files.items(), key=lambda f: f[1][0])
            node.source = f"{file}:{lo}" + (f"–{hi}" if hi != lo else "")
            head.append(node.source)
        node.name = " · ".join(head)
        if ins:
            node.attributes.append("in: " + _shapes_line(ins, self.hier.shape_text))
        if outs:
            node.attributes.append("out: " + _shapes_line(outs, self.hier.shape_text))
        if ops:
            node.attributes.append(" · ".join(ops))
        path = group.scope or (group.computation.name if group.kind == "computation" else group.key)
        where = [g.label for g in reversed(group.ancestors()) if g.kind != "module"]
        lines = [f"{group.label}  ({group.kind}: {path})" if group.label != path else f"{group.kind}: {path}"]
        if where:
            lines.append("in " + " / ".join(where))
        lines.append(f"{group.size:,} instructions in {group.computation.name}"
                     + (f", {node.source}" if node.source else ""))
        if ins:
            lines.append("in: " + _shapes_line(ins, self.hier.shape_text, most=12))
        if outs:
            lines.append("out: " + _shapes_line(outs, self.hier.shape_text, most=12))
        if counts:
            lines.append(" · ".join(f"{op} ×{k}" if k > 1 else op for op, k in counts.most_common(12)))
        lines.append("click (or graph.expand(...)) to open")
        node.tooltip = "\n".join(lines)
        if self.values:
            self.group_alert(node, group)

    @staticmethod
    def site_key(item):
        """(calling instruction's name or None, instruction): how a trace's values of one call
        site are keyed (a computation called from several places has a value at each)."""
        home = item.home
        return (home.caller.inst.name if home is not None and home.caller is not None else None, item.inst)

    def value_of(self, item):
        """This call site's value of ``item`` when the values say, else the instruction's."""
        key = self.site_key(item)
        if key in self.values:
            return True, self.values[key]
        return _value_of(self.values, item.inst)

    def group_alert(self, node, group):
        bad = []
        for it in group.items():
            found, value = self.value_of(it)
            if found and _has_nonfinite(value):
                bad.append(it.inst.name)
        if bad:
            node.alert = True
            node.stats = [f"NaN/Inf in {len(bad)}: {', '.join(bad[:3])}" + (" …" if len(bad) > 3 else "")]

    def mark(self, highlight):
        for target in highlight or ():
            if isinstance(target, Group):
                cid = self.group_cluster.get(target.key)
                nid = None
                for item in target.items():
                    nid = self.rep[item.index]
                    break
                if cid is not None:
                    for c in self.model.clusters:
                        if c.id == cid:
                            c.highlight = True
                    continue
            else:
                nid = self.rep[target.index]
            if nid is not None:
                self._node(nid).highlight = True


# -- small helpers -------------------------------------------------------------------------------
#: what a literal written on its users may go through (one operand, the same values)
_THROUGH = frozenset({"broadcast", "reshape", "convert", "copy", "bitcast"})


def _count(n):
    return f"{n:,} instruction" + ("" if n == 1 else "s")


def _value_of(values, inst):
    if inst in values:
        return True, values[inst]
    if inst.name in values:
        return True, values[inst.name]
    return False, None


def _has_nonfinite(value):
    if isinstance(value, (tuple, list)):
        return any(_has_nonfinite(v) for v in value)
    try:
        arr = np.asarray(value)
        return arr.dtype.kind in "fc" and not np.isfinite(arr).all()
    except (TypeError, ValueError):
        return False


def _shapes_line(insts, text_of, most=None):
    """``f32[16,64]×3, f32[64,64]``: the shapes of some values, commonest first (``most``
    of them, ``MAX_SHAPES`` unless given, then "+N")."""
    most = MAX_SHAPES if most is None else most
    counts = collections.Counter(text_of(i) for i in insts)
    parts = [f"{s}×{k}" if k > 1 else s for s, k in counts.most_common(most)]
    if len(counts) > most:
        parts.append(f"+{len(counts) - most}")
    return ", ".join(parts)


def _values_label(vals, text_of):
    shapes = {text_of(v) for v in vals}
    if len(shapes) == 1:
        text = next(iter(shapes))
        if len(text) > 40:
            text = text[:39] + "…"
        return text if len(vals) == 1 else f"{len(vals)} × {text}"
    return f"{len(vals)} values"


__all__ = ["view_model"]
