"""The graph of an HLO module as plain data: nodes, edges and clusters, before any drawing.

The full picture (``build_model``) is the one XLA's HLO graph dumper draws: one node per
instruction (opcode, name, shape, the attributes that define it), one edge per operand,
and one cluster per called computation (reduce bodies, comparators, while bodies and
conditions, branches, call targets, fusions), linked to its caller by a dashed "call"
edge.  A trivial called computation -- one binary op of its two parameters, like the
``add`` of a sum -- is summarised on its caller (``to_apply=add``) instead.  Big modules
are drawn with closed groups (``Node.kind == "group"``): ``hierarchy`` finds the groups,
``view`` builds the model of any choice of open ones, this full picture included.

The DOT emitter (``dot.py``) draws this model and the tests read it, so what a test
checks is what is drawn.  Colours come from the op categories of the registry
(``registry.CATEGORIES``); this module keeps no list of op names.
"""
import difflib
from dataclasses import dataclass, field

from ..hlo.attrs import split_top
from ..hlo.ir import HloComputation
from ..hlo.literal import format_literal
from ..hlo.printer import instruction_attributes
from ..ops import registry

#: the colour categories, first match wins (``constant`` also holds parameters and iota)
CATEGORY_ORDER = ("constant", "collective", "control", "linalg", "reduction", "data_movement",
                  "elementwise", "other")
#: category -> (fill colour, legend text)
CATEGORY_STYLE = {
    "constant": ("#ffe0b2", "parameter / constant"),
    "elementwise": ("#e3f2fd", "elementwise"),
    "data_movement": ("#dcedc8", "data movement"),
    "reduction": ("#e1bee7", "reduction"),
    "linalg": ("#fff59d", "dot / convolution"),
    "control": ("#cfd8dc", "control flow"),
    "collective": ("#f8bbd0", "collective"),
    "other": ("#d7ccc8", "other"),
    "unknown": ("#ffffff", "not in the registry"),
    "group": ("#f5f5f5", "closed group (click or expand=)"),
    "error": ("#ffcdd2", "shape error"),
}
#: attributes that say nothing about an op's semantics; shown with all_attributes=True
NOISE = frozenset({"metadata", "frontend_attributes", "sharding", "backend_config", "statistics_viz",
                   "origin", "schedule", "op_name", "source_file", "source_line"})
#: longest attribute or shape text on one line of a node
WIDTH = 56


@dataclass
class Node:
    """One box of the graph: an instruction, a failed op, or a "… N more" stand-in."""
    id: str                      # DOT identifier
    kind: str                    # "instruction" | "failed" | "more"
    title: str                   # the first line (opcode)
    name: str = ""               # the instruction's name
    shape: str = ""              # result shape text
    attributes: list = field(default_factory=list)  # "key=value" strings
    constant: str = ""           # a small constant's value
    stats: list = field(default_factory=list)       # value lines after a run
    alert: bool = False          # NaN or Inf among the values
    image: bytes = None          # PNG heatmap of the value
    category: str = "unknown"
    cluster: str = None          # id of the cluster holding the node, None at top level
    error: str = None            # a shape error to show on the node
    tooltip: str = ""
    is_root: bool = False
    inst: object = None          # the Instruction drawn, when there is one
    group: str = None            # kind "group": the key of the closed group drawn
    toggles: list = field(default_factory=list)  # keys of the groups a click opens or closes
    calls: list = field(default_factory=list)    # "▸ calls ..." lines of closed called computations
    source: str = ""             # "file.py:12" from the metadata
    highlight: bool = False      # "where am I"

    @property
    def color(self):
        return CATEGORY_STYLE["error" if self.error else self.category][0]


@dataclass
class Edge:
    """``src -> dst``: an operand (``kind="operand"``), a call of a sub-computation
    (``"call"``: from the caller node to the callee's root), or a cut-off stand-in (``"more"``)."""
    src: str
    dst: str
    kind: str = "operand"
    label: str = ""
    operand_index: int = None    # set when the consumer has more than one operand
    attribute: str = None        # call edges: the caller's attribute (to_apply, body, ...)
    cluster: str = None          # call edges: the callee's cluster id
    count: int = 1               # values carried (edges from or into a closed group)


@dataclass
class Cluster:
    """A called computation drawn as a box around its instructions."""
    id: str                      # "cluster_<n>"
    label: str                   # the computation's name
    signature: str = ""
    parent: str = None           # enclosing cluster id, None at top level
    root: str = None             # node id of the computation's root
    computation: object = None
    group: str = None            # the key of the open group drawn
    kind: str = "computation"    # "computation" | "module" | "scope" | "part"
    highlight: bool = False
    tooltip: str = ""            # scopes and parts: the full path (the label is its last part)


@dataclass
class GraphModel:
    title: str = ""
    nodes: list = field(default_factory=list)
    edges: list = field(default_factory=list)
    clusters: list = field(default_factory=list)
    #: categories present, in legend order
    legend: list = field(default_factory=list)
    #: lay out for speed (pictures of closed groups): edge labels placed after the layout
    #: (``xlabel``) and a bounded network simplex (see ``dot.to_dot``)
    quick_layout: bool = False

    def by_id(self, node_id):
        for n in self.nodes:
            if n.id == node_id:
                return n
        raise KeyError(node_id)

    def node(self, name):
        """The node of the instruction called ``name`` (the first, if several share it)."""
        for n in self.nodes:
            if n.name == name and n.kind != "more":
                return n
        names = [n.name for n in self.nodes if n.name]
        close = difflib.get_close_matches(name, names, n=5)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise KeyError(f"no instruction named {name!r} in the graph{hint}")

    def cluster(self, label):
        """The cluster of the computation called ``label``."""
        for c in self.clusters:
            if c.label == label:
                return c
        raise KeyError(f"no cluster for computation {label!r}; clusters: "
                       f"{', '.join(c.label for c in self.clusters) or 'none'}")

    def nodes_in(self, cluster_id):
        return [n for n in self.nodes if n.cluster == cluster_id]

    def edges_into(self, name, kind=None):
        nid = self.node(name).id
        return [e for e in self.edges if e.dst == nid and (kind is None or e.kind == kind)]

    def edges_from(self, name, kind=None):
        nid = self.node(name).id
        return [e for e in self.edges if e.src == nid and (kind is None or e.kind == kind)]

    def update_legend(self):
        present = {("error" if n.error else n.category) for n in self.nodes if n.kind != "more"}
        self.legend = [c for c in (*CATEGORY_ORDER, "group", "unknown", "error") if c in present]


# -- small texts ----------------------------------------------------------------------------
def category_of(opcode):
    """The colour category of an opcode, from the registry's category sets."""
    if opcode not in registry.OPS:
        return "unknown"
    for category in CATEGORY_ORDER:
        if opcode in registry.CATEGORIES.get(category, ()):
            return category
    return "other"


def shape_text(shape):
    """A shape as XLA prints it, with its layout only when that is not the default."""
    def default_layout(s):
        return s.is_tuple and all(default_layout(t) for t in s.tuple_shapes) or \
            not s.is_tuple and (s.layout is None or tuple(s.layout) == tuple(range(s.rank - 1, -1, -1)))
    return shape.to_string(layout=not default_layout(shape))


def wrap(text, width=WIDTH, max_lines=4):
    """Break ``text`` into lines of at most ``width`` characters, after a comma or a space
    when it can."""
    lines, cur = [], ""
    for piece in _pieces(text):
        while len(piece) > width:  # a piece longer than a line is cut where it must
            if cur:
                lines.append(cur)
                cur = ""
            lines.append(piece[:width])
            piece = piece[width:]
        if len(cur) + len(piece) > width and cur:
            lines.append(cur.rstrip())
            cur = piece.lstrip()
        else:
            cur += piece
    if cur.strip():
        lines.append(cur.rstrip())
    if len(lines) > max_lines:
        lines = lines[:max_lines]
        lines[-1] = lines[-1][:width - 1] + "…"
    return lines


def _pieces(text):
    pieces, start = [], 0
    for i, c in enumerate(text):
        if c in ", ":
            pieces.append(text[start:i + 1])
            start = i + 1
    pieces.append(text[start:])
    return [p for p in pieces if p]


def trivial_summary(comp):
    """One word for a computation that is a single binary op of its two parameters
    (``add``, ``maximum``, ``compare LT``); None for anything bigger.  Parameters in the
    swapped order are said so (``compare GT (p1, p0)``)."""
    if len(comp.instructions) != 3 or len(comp.parameters) != 2:
        return None
    root, (p0, p1) = comp.root, comp.parameters
    if root is None or root.opcode == "parameter" or len(root.operands) != 2 or root.called_computations():
        return None
    if root.operands == [p0, p1]:
        order = ""
    elif root.operands == [p1, p0]:
        order = " (p1, p0)"
    else:
        return None
    words = [root.opcode] + [text for key, text in instruction_attributes(root) if key not in NOISE]
    return " ".join(words) + order


def called(inst, module_computations):
    """(hlo attribute, computation) pairs an instruction calls.  Unregistered opcodes keep
    their attributes as raw text; names of the module's computations there count too."""
    out = []
    for kw, value in inst.attrs.items():
        if isinstance(value, HloComputation):
            out.append((_hlo_key(inst.opcode, kw), value))
        elif isinstance(value, (list, tuple)) and value and isinstance(value[0], HloComputation) and \
                all(isinstance(c, HloComputation) for c in value):
            key = _hlo_key(inst.opcode, kw)
            out.extend((f"{key}[{i}]" if len(value) > 1 else key, c) for i, c in enumerate(value))
    for key, raw in inst.extra.items():
        if not isinstance(raw, str) or key in NOISE:  # metadata and the like name no computation
            continue
        text = raw.strip()
        names = split_top(text[1:-1]) if text.startswith("{") and text.endswith("}") else [text]
        names = [n.strip().lstrip("%") for n in names]
        if names and all(n in module_computations for n in names):
            out.extend((f"{key}[{i}]" if len(names) > 1 else key, module_computations[n])
                       for i, n in enumerate(names))
    return out


def _hlo_key(opcode, kw):
    """The HLO attribute name of an op's keyword argument (``computation`` -> ``to_apply``)."""
    op = registry.OPS.get(opcode)
    for a in (op.attrs if op else ()):
        if kw in a.kws:
            return a.hlo
    return kw


# -- building ---------------------------------------------------------------------------------
def instruction_node(inst, node_id="n0", calls=None, all_attributes=False, max_constant_elements=8):
    """The ``Node`` of one instruction (the graph layer's renderer for every opcode).

    ``calls``: the instruction's (attribute, computation) pairs (``called``); they are
    left out of the attribute lines, the caller of this function draws them."""
    title = inst.opcode
    if inst.opcode == "parameter":
        title = f"parameter {inst.attrs.get('parameter_number', '')}".strip()
    node = Node(node_id, "instruction", title, name=inst.name, shape=shape_text(inst.shape),
                category=category_of(inst.opcode), inst=inst)
    call_keys = {key.split("[")[0] for key, _ in (called(inst, {}) if calls is None else calls)}
    for key, text in instruction_attributes(inst):
        if key in call_keys or (key in NOISE and not all_attributes):
            continue
        node.attributes.append(f"{key}={text}")
    if inst.opcode == "constant":
        literal = inst.attrs.get("literal")
        if literal is not None and 0 < getattr(literal, "size", 1) <= max_constant_elements:
            node.constant = format_literal(literal, inst.shape.element_type)
    if inst.error is not None:
        node.error = str(inst.error)
    node.tooltip = f"{inst.name} = {inst.shape.to_string(layout=True)} {inst.opcode}"
    return node


def build_model(entry, computations=(), *, values=None, expand_trivial=False, subcomputations=True,
                all_attributes=False, max_constant_elements=8, heatmaps=True, title=None):
    """The ``GraphModel`` of computation ``entry`` and everything it calls, every group open.

    ``computations``: every computation of the module (to resolve calls of opcodes the
    registry does not know, kept as raw text); ``values``: {instruction or name: value}.
    """
    from .hierarchy import Hierarchy
    from .view import view_model
    hier = Hierarchy(entry, computations, expand_trivial=expand_trivial, subcomputations=subcomputations)
    return view_model(hier, hier.groups, values=values, all_attributes=all_attributes,
                      max_constant_elements=max_constant_elements, heatmaps=heatmaps, scope_clusters=False,
                      title=title if title is not None else f"{entry.name}  {_signature(entry)}")


def _signature(comp):
    try:
        return comp.signature()
    except AttributeError:  # a builder's partial computation has no root yet
        return ""
