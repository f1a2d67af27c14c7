"""``HloGraph``: the graph of a computation as an object that shows itself.

    g = comp.graph()                      # in Jupyter, displays itself (SVG)
    g.save("g.svg"); g.save("g.png")      # svg, png, pdf, dot
    g.source                              # the DOT text (no Graphviz needed)
    comp.graph(args=(x, y))               # values after a run: stats, NaN/Inf, heatmaps
    comp.graph(around="dot.3", radius=2)  # the neighbourhood of one instruction
    comp.graph(path=("x.1", "add.7"))     # every path between two instructions

A module of more than ``FULL_VIEW`` instructions starts collapsed: groups (called
computations, JAX's scopes, parts of long ones; see ``render.hierarchy``) drawn as one
node each, opened level by level while the picture stays within ``MAX_NODES`` nodes.

    g.expand("fused_computation.3")       # a new graph with that group open (or several)
    g.expand("multiply.12")               # the groups around an instruction opened
    g.collapse("main.1:jit(f)/jvp(f)")    # ... closed; comp.graph(expand=[...], collapse=[...])
    g.find("dot"), g.find("f32[64,64]")   # instructions anywhere, closed groups included
    g.highlight("multiply.12")            # "where am I": its node, or its closed group's, marked
    comp.graph(expand="all")              # everything (slow to lay out for thousands of nodes)

Drawing needs Graphviz's ``dot`` program; without it ``GraphvizNotFoundError`` says how
to install it.  ``g.model`` is the drawn graph as data (nodes, edges, clusters).
"""
import collections
import pathlib
import re
import tempfile
import weakref

from ..hlo.ir import HloComputation, Instruction
from . import dot as _dot
from .hierarchy import Group, Hierarchy, Item
from .model import Edge, Node, shape_text
from .select import neighbourhood, paths
from .view import view_model

FORMATS = ("svg", "png", "pdf", "dot")
_SVG_SIZE = re.compile(r'<svg width="([\d.]+)pt" height="([\d.]+)pt"')
#: modules with at most this many instructions are drawn whole, every group open
FULL_VIEW = 200
#: most nodes of the first picture of a bigger module (Graphviz lays this out in a second)
MAX_NODES = 40
#: widest first picture, in points: JupyterLab's output area in its default layout (a
#: 1400-px window, the file browser open) is 968 px = 726 pt wide; a wider SVG is cut there
#: (JupyterLab shows it at its own size) or shrunk below 10-px text (VS Code, Notebook 7,
#: nbviewer scale it to the width).  The smallest text is 8 pt = 10.7 px at this size.
MAX_WIDTH_PT = 720
#: modules of at most this many instructions keep every instruction of the entry in their
#: first picture: when the whole module is wider than ``MAX_WIDTH_PT`` only its called
#: computations close, innermost first (a while loop's body, condition and call side by
#: side: 41 instructions, 1,970 pt whole; its entry with the body and condition closed
#: fits), never its scopes or parts
ALWAYS_WHOLE = 60
#: the node budgets the first picture may take, most first (the distinct pictures they
#: make are searched for the biggest that fits ``MAX_WIDTH_PT``)
FIT_STEPS = tuple(range(MAX_NODES, 9, -2))


class HloGraph:
    """A drawn HLO graph: ``.source`` (DOT), ``.save(path)``, ``.pipe(fmt)``, ``.model``;
    for a module's graph also ``.expand``, ``.collapse``, ``.find``, ``.highlight``."""

    def __init__(self, model, *, legend=True, rankdir="TB", view=None):
        self.model = model
        self.legend, self.rankdir = legend, rankdir
        self.view = view  # the _View state behind a module's graph (None: a fixed picture)
        self._svg = None  # drawn once: the model is not changed after a graph is made

    # -- groups -----------------------------------------------------------------------------
    @property
    def hierarchy(self):
        """The module's groups (``render.hierarchy.Hierarchy``)."""
        return self._state().hier

    @property
    def opened(self):
        """The keys of the open groups."""
        return frozenset(self._state().opened)

    def expand(self, *targets):
        """A new graph with groups opened in place: group keys, computation or scope names,
        or instruction names (the groups around them); ``"all"``: every group."""
        state = self._state()
        return state.redraw(opened=state.opened | state.resolve_open(targets))

    def collapse(self, *targets):
        """A new graph with these groups closed (an instruction's name: its innermost group)."""
        state = self._state()
        return state.redraw(opened=state.opened - state.resolve_close(targets))

    def highlight(self, *targets):
        """A new graph marking instructions or groups (orange): an instruction inside a
        closed group marks the group.  ``targets``: names, (computation, name) pairs, or a
        stepper's ``location`` list (every frame marked)."""
        state = self._state()
        return state.redraw(highlight=list(targets))

    def find(self, query, limit=None):
        """Instructions matching ``query`` (name, opcode, shape or scope; see
        ``Hierarchy.find``), closed groups included: ``Item``s with ``.inst`` and ``.group``."""
        return self._state().hier.find(query, limit=limit)

    def _state(self):
        if self.view is None:
            raise TypeError("this graph is a fixed picture (around=, path= or a builder's): "
                            "expand, collapse and highlight work on a module's comp.graph()")
        return self.view

    # -- the graph as data ------------------------------------------------------------------
    @property
    def nodes(self):
        return self.model.nodes

    @property
    def edges(self):
        return self.model.edges

    @property
    def clusters(self):
        return self.model.clusters

    def node(self, name):
        try:
            return self.model.node(name)
        except KeyError:
            if self.view is None:
                raise
            groups = self.view.closed_around(name)
            if not groups:
                raise
            raise KeyError(f"instruction {name!r} is inside the closed group {groups[-1].key!r}: "
                           f"graph.expand({name!r}) opens the groups around it") from None

    @property
    def source(self):
        """The DOT text (heatmap images left out: they exist only in rendered output)."""
        return _dot.to_dot(self.model, legend=self.legend, rankdir=self.rankdir)

    # -- drawing ----------------------------------------------------------------------------
    def pipe(self, format="svg", dpi=None):
        """The graph drawn by Graphviz's ``dot`` in ``format`` (svg, png, pdf), as bytes."""
        if format not in ("svg", "png", "pdf"):
            raise ValueError(f"unknown format {format!r}; use one of svg, png, pdf (or save a .dot)")
        images = {_dot.image_name(n): n.image for n in self.model.nodes if n.image is not None}
        if not images:
            return _dot.run_dot_cached(_dot.to_dot(self.model, legend=self.legend, rankdir=self.rankdir, dpi=dpi),
                                       format)
        with tempfile.TemporaryDirectory(prefix="xla_explorer_graph_") as folder:
            for name, data in images.items():
                pathlib.Path(folder, name).write_bytes(data)
            source = _dot.to_dot(self.model, legend=self.legend, rankdir=self.rankdir, images=folder, dpi=dpi)
            out = _dot.run_dot(source, format)
        if format == "svg":
            out = _dot.inline_images(out.decode("utf-8"), images).encode("utf-8")
        return out

    def svg(self):
        if self._svg is None:
            self._svg = self.pipe("svg").decode("utf-8")
        return self._svg

    def width_pt(self):
        """The drawing's width in points (Graphviz's layout; 72 points an inch, 96 px)."""
        m = _SVG_SIZE.search(self.svg())
        return float(m.group(1)) if m else 0.0

    def save(self, path, format=None, dpi=None):
        """Write the graph to ``path``; the format is its suffix (svg, png, pdf, dot) unless
        given.  Returns the path."""
        path = pathlib.Path(path)
        fmt = (format or path.suffix.lstrip(".")).lower()
        if fmt == "gv":
            fmt = "dot"
        if fmt not in FORMATS:
            raise ValueError(f"cannot save a graph as {fmt!r}: use a path ending in "
                             f"{', '.join('.' + f for f in FORMATS)} (or pass format=)")
        if fmt == "dot":
            path.write_text(self.source)
        else:
            path.write_bytes(self.pipe(fmt, dpi=dpi))
        return path

    def _repr_svg_(self):
        return self.svg()

    def _repr_mimebundle_(self, include=None, exclude=None):
        """Jupyter's display: the SVG, or without Graphviz a note on how to install it."""
        try:
            bundle = {"image/svg+xml": self.svg()}
        except _dot.GraphvizNotFoundError as e:
            return {"text/plain": f"{self!r}\n\n{e}"}
        bundle["text/plain"] = repr(self)
        return bundle

    def __repr__(self):
        kinds = [n for n in self.model.nodes if n.kind not in ("more", "group")]
        groups = sum(n.kind == "group" for n in self.model.nodes)
        closed = f", {groups} closed groups of {len(self.view.hier):,} instructions" if groups else ""
        return (f"<HloGraph {self.model.title}: {len(kinds)} nodes{closed}, {len(self.model.edges)} edges, "
                f"{len(self.model.clusters)} clusters>")


def graph_of(comp, *, values=None, args=None, around=None, radius=2, path=None, legend=True,
             expand_trivial=False, subcomputations=True, all_attributes=False, max_constant_elements=8,
             heatmaps=True, rankdir="TB", title=None, expand=None, collapse=None, max_nodes=None,
             highlight=None, invocation=0):
    """The ``HloGraph`` of an ``XlaComputation`` (or an ``HloComputation``).

    values:      {instruction or name: value}, or a trace (``comp.trace(*args)``); each node
                 then shows min / max / mean, NaN and Inf counts, and a heatmap; an
                 instruction that ran several times (a loop body) shows its first run
    args:        trace a run of the reference executor on these arguments for the values
                 (called computations' instructions included)
    invocation:  which run of an instruction that ran several times the values show (a
                 while body's k-th iteration: ``invocation=k``), counted at each call site
                 (a computation called from two places shows each site's own values); one
                 that ran fewer times shows its last run, the entry's its only one.  A dict ``{computation name:
                 k}`` picks per computation (the others: their first run)
    around, radius: only the instructions at most ``radius`` edges from ``around``
    path:        (a, b): only the instructions on paths between a and b
    expand, collapse: groups to open or close (keys, computation or scope names,
                 instruction names: the groups around them); ``expand="all"`` opens all
    max_nodes:   most nodes of the first picture (default: the whole module up to
                 ``FULL_VIEW`` instructions, else ``MAX_NODES``)
    highlight:   instructions or groups to mark ("where am I")
    legend:      draw the colour legend
    expand_trivial: draw one-op bodies (``to_apply=add``) as clusters too
    subcomputations: False: name called computations on their callers, draw no clusters
    all_attributes: also show metadata, sharding, frontend_attributes, backend_config
    max_constant_elements: constants with at most this many elements show their value
    heatmaps:    draw a heatmap of each value (with ``values``/``args``)
    rankdir:     "TB" (data flows down), "LR", "BT" (as XLA's dumper) or "RL"
    """
    if around is not None and path is not None:
        raise ValueError("give around= or path=, not both")
    entry, computations, name = _entry_of(comp)
    if args is not None:
        if values is not None:
            raise ValueError("give values= or args=, not both")
        from ..trace import trace
        # every computation's values, the first run of each instruction (a loop body's
        # first iteration): what a node shows, and a bounded memory for long loops
        pick, started = _picker(invocation), collections.Counter()

        def keep(rec):  # runs counted per call site, in the order they finish (= they ran)
            key = (_site(rec), rec.name)
            started[key] += 1
            return started[key] - 1 <= pick(rec.computation)
        values = trace(comp, *args, keep=keep)
    elif invocation != 0 and not (hasattr(values, "records") and hasattr(values, "count")):
        raise ValueError("invocation= picks a run from a trace: give args= or values=comp.trace(...)")
    runs = {}
    if hasattr(values, "records") and hasattr(values, "count"):  # a Trace: comp.trace(*args)
        values, runs = _trace_values(values, _picker(invocation))
    hier = _hierarchy(comp, entry, computations, expand_trivial, subcomputations)
    options = dict(values=values, runs=runs, all_attributes=all_attributes, max_constant_elements=max_constant_elements,
                   heatmaps=heatmaps, title=title if title is not None else _title(name, entry))
    if around is not None or path is not None:
        only = None
        if around is not None and radius >= 0:  # draw the neighbourhood and its rim, not the module
            only = hier.near(hier.item(around), radius + 1)
        model = view_model(hier, hier.groups, scope_clusters=False, only=only, **options)
        if around is not None:
            model = neighbourhood(model, around, radius)
        else:
            a, b = path
            model = paths(model, a, b)
        return HloGraph(model, legend=legend, rankdir=rankdir)
    marks = [] if highlight is None else ([highlight] if isinstance(highlight, (str, tuple)) else list(highlight))
    if max_nodes is None and expand is None and collapse is None:
        return _fitted(hier, options, legend, rankdir, marks)
    if max_nodes is None and len(hier) <= FULL_VIEW:
        opened = set(hier.groups)
    else:
        opened = hier.default_open(max_nodes or MAX_NODES)
    state = _View(hier, opened, options, legend, rankdir, [])
    if expand is not None:
        state.opened |= state.resolve_open([expand] if isinstance(expand, str) else expand)
    if collapse is not None:
        state.opened -= state.resolve_close([collapse] if isinstance(collapse, str) else collapse)
    return state.redraw(highlight=marks)


def _fitted(hier, options, legend, rankdir, marks):
    """The first picture: the whole module (up to ``FULL_VIEW`` instructions), else its
    top levels within ``MAX_NODES`` nodes -- or, when Graphviz lays that out wider than
    ``MAX_WIDTH_PT``, fewer open groups (``FIT_STEPS``), the first that fits (else the
    narrowest).  Measured, not guessed: the width comes from long edges and ranks of
    parallel values as much as from the node count (a 6-layer MLP's gradient: 46 nodes
    1,537 pt wide, 23 nodes 820 pt).  A module of at most ``ALWAYS_WHOLE`` instructions
    only closes called computations (``_closing_computations``) and is drawn whole when
    that does not fit either.  The choice is remembered per hierarchy and options; the
    SVG drawn to measure is the one shown.  Without Graphviz: the first candidate."""
    small = len(hier) <= ALWAYS_WHOLE
    if small:
        # values (a loop body's runs: invocation=), expand_trivial= and a highlight ask for
        # what is inside the called computations: those stay open, drawn whole however wide
        keep = set()
        if options.get("values") or hier.expand_trivial:
            keep = set(hier.groups)
        state = _View(hier, set(), options, legend, rankdir, [])
        for mark in (m for target in marks for m in state.resolve_marks(target)):
            keep |= {g.key for g in (mark.ancestors() if isinstance(mark, Group) else hier.enclosing(mark))}
            keep.add(mark.key if isinstance(mark, Group) else mark.group.key)
        steps = _closing_computations(hier, keep)
    else:
        budgets = ([None] if len(hier) <= FULL_VIEW else []) + list(FIT_STEPS)
        steps = [frozenset(hier.groups) if b is None else frozenset(hier.default_open(b)) for b in budgets]
    key = (legend, rankdir, bool(options.get("values")), options.get("heatmaps"), options.get("all_attributes"),
           options.get("max_constant_elements"), frozenset(keep) if small else None)
    fits = hier.__dict__.setdefault("fitted", {})
    candidates, seen = [], set()
    for opened in steps:
        if opened not in seen:
            seen.add(opened)
            candidates.append(opened)
    if key in fits:
        candidates = [candidates[min(fits[key], len(candidates) - 1)]]
    drawn = {}  # candidate index -> (width, graph)

    def draw(i):
        if i not in drawn:
            graph = _View(hier, candidates[i], options, legend, rankdir, []).redraw(highlight=marks)
            drawn[i] = (graph.width_pt(), graph)
        return drawn[i]
    if len(candidates) == 1 or not _dot.dot_available():
        return _View(hier, candidates[0], options, legend, rankdir, []).redraw(highlight=marks)
    if small:  # a few candidates, each closing more: the first that fits, else the whole module
        i = 0
        while draw(i)[0] > MAX_WIDTH_PT and i + 1 < len(candidates):
            i += 1
    elif draw(0)[0] > MAX_WIDTH_PT:
        # fewer open groups make narrower pictures (mostly: measured on the benchmark's
        # gradients): a binary search for the biggest that fits, a few layouts, not one each
        lo, hi = 1, len(candidates) - 1
        while lo <= hi:
            mid = (lo + hi) // 2
            if draw(mid)[0] <= MAX_WIDTH_PT:
                hi = mid - 1
            else:
                lo = mid + 1
    fitting = [i for i, (w, _) in drawn.items() if w <= MAX_WIDTH_PT]
    choice = min(fitting) if fitting else 0 if small else min(drawn, key=lambda i: drawn[i][0])
    fits[key] = choice
    return drawn[choice][1]


def _closing_computations(hier, keep=()):
    """The open groups of a small module's candidate pictures: all of them, then with the
    called computations nested deepest closed, and so on up to the entry's callees (a
    fusion or a comparator inside a sort's body closes before the body): the entry's
    instructions, its scopes and parts, and the groups in ``keep`` always open."""
    def depth(group):
        return sum(g.kind == "computation" for g in group.ancestors()) + 1
    nested = collections.defaultdict(set)  # depth -> computation group keys
    for g in hier.groups.values():
        if g.kind == "computation" and g.key not in keep:
            nested[depth(g)].add(g.key)
    opened, steps = set(hier.groups), [frozenset(hier.groups)]
    for d in sorted(nested, reverse=True):
        opened -= nested[d]
        steps.append(frozenset(opened))
    return steps


_HIERARCHIES = weakref.WeakKeyDictionary()  # module -> {options: (fingerprint, Hierarchy)}


def _hierarchy(comp, entry, computations, expand_trivial, subcomputations):
    """The module's Hierarchy, built once per module (a stepper draws at every step); a
    module whose instruction counts changed since gets a new one."""
    fingerprint = tuple(len(c.instructions) for c in computations)
    try:
        cached = _HIERARCHIES.setdefault(comp, {})
    except TypeError:  # not weakly referenceable
        cached = {}
    key = (expand_trivial, subcomputations)
    if key in cached and cached[key][0] == fingerprint:
        return cached[key][1]
    hier = Hierarchy(entry, computations, debug_sections=getattr(comp, "debug_sections", None),
                     expand_trivial=expand_trivial, subcomputations=subcomputations)
    cached[key] = fingerprint, hier
    return hier


def _picker(invocation):
    """computation name -> the invocation wanted (``invocation``: an int or a dict)."""
    if isinstance(invocation, dict):
        wanted = dict(invocation)
        for k in wanted.values():
            if not isinstance(k, int) or k < 0:
                raise ValueError(f"invocation= wants runs counted from 0, got {invocation!r}")
        return lambda computation: wanted.get(computation, 0)
    if isinstance(invocation, bool) or not isinstance(invocation, int) or invocation < 0:
        raise ValueError(f"invocation= is a run counted from 0 (a while body's k-th iteration), or a dict "
                         f"{{computation name: k}}; got {invocation!r}")
    return lambda computation: invocation


def _site(rec):
    """The name of the instruction that called a record's computation (None: the entry)."""
    return rec.stack[-1][1] if rec.stack else None


def _trace_values(t, pick):
    """The values a picture shows from a trace: ({instruction: value, (calling instruction's
    name, instruction): value}, {the same keys: (how many times it ran, the run shown)}).
    Runs are counted per call site (a reduce body shared by two reduces, a function called
    twice: each site its own runs); the run shown is the one ``pick`` wants, or the last
    before it.  The key without a site is the instruction's first call site's."""
    values, runs, local, shown = {}, {}, collections.Counter(), {}
    for rec in t.records:
        inst = rec.instruction
        key = (_site(rec), inst)
        j = local[key]
        local[key] += 1
        if not rec.kept or j > pick(rec.computation):
            continue
        if key not in shown or j > shown[key]:
            values[key], shown[key] = rec.value, j
    first = {}
    for (site, inst) in shown:
        first.setdefault(inst, (site, inst))
    for key, j in shown.items():
        runs[key] = (local[key], j)
    for inst, key in first.items():
        values[inst], runs[inst] = values[key], runs[key]
    return values, runs


class _View:
    """What a module's graph is drawn from: the hierarchy, the open groups, the options."""

    def __init__(self, hier, opened, options, legend, rankdir, highlight):
        self.hier, self.opened, self.options = hier, set(opened), options
        self.legend, self.rankdir, self.highlighted = legend, rankdir, highlight

    def redraw(self, opened=None, highlight=None):
        state = _View(self.hier, self.opened if opened is None else opened, self.options, self.legend,
                      self.rankdir, self.highlighted if highlight is None else highlight)
        state.opened.add(self.hier.root.key)
        marks = [m for target in state.highlighted for m in self.resolve_marks(target)]
        # scope and part boxes only once some are closed: a module with just called
        # computations closed (a small module's first picture) reads as the whole one does
        grouping = any(g.kind in ("scope", "part") and g.key not in state.opened for g in self.hier.groups.values())
        model = view_model(self.hier, state.opened, highlight=marks, scope_clusters=grouping, **self.options)
        return HloGraph(model, legend=self.legend, rankdir=self.rankdir, view=state)

    def resolve_open(self, targets):
        out = set()
        for target in targets:
            if isinstance(target, str) and target == "all":
                out |= set(self.hier.groups)
                continue
            groups, _ = self.hier.resolve(target)
            out |= {g.key for g in groups}
        return out

    def resolve_close(self, targets):
        out = set()
        for target in targets:
            groups, item = self.hier.resolve(target)
            if item is not None:  # an instruction: its innermost group
                groups = groups[:1]
            else:  # the named groups, not their ancestors
                groups = self.hier.groups_named(target)
            out |= {g.key for g in groups if g is not self.hier.root}
        return out

    def resolve_marks(self, target):
        """Items and Groups for one highlight target (a stepper location: each frame)."""
        if isinstance(target, (Item, Group)):
            return [target]
        if isinstance(target, list):  # [(computation, instruction, invocation), ...]
            return [m for frame in target for m in self.resolve_marks(tuple(frame))]
        groups, item = self.hier.resolve(target)
        return [item] if item is not None else groups[:1]

    def closed_around(self, name):
        """The closed groups around instruction ``name``, innermost first."""
        try:
            groups = self.hier.enclosing(name)
        except KeyError:
            return []
        return [g for g in groups if g.key not in self.opened]


def graph_of_builder(builder, error=None, operands=(), opcode=None, **options):
    """The graph of what an ``XlaBuilder`` recorded so far; with ``error`` (the ShapeError
    of an op that failed) a red "failed" node shows the message, fed by ``operands``
    (the XlaOps given to the failed op).  Options as for ``graph_of``."""
    insts = list(builder.instructions)
    params = sorted((i for i in insts if i.opcode == "parameter"), key=lambda i: i.attrs.get("parameter_number", 0))
    partial = HloComputation(builder.name, insts, None, params)  # no root until build()
    title = options.pop("title", None)
    if title is None:
        title = f"{builder.name}  (being built{': ' + opcode + ' failed' if error is not None and opcode else ''})"
    graph = graph_of(partial, title=title, **options)
    if error is not None:
        _add_failed_node(graph.model, error, operands, opcode)
        graph._svg = None  # the picture changed
    return graph


def _add_failed_node(model, error, operands, opcode):
    message = str(error)
    op_name = opcode or (message.split(":", 1)[0] if ":" in message[:40] else "op")
    failed = Node("failed", "failed", f"{op_name} (failed)", error=message, category="unknown",
                  tooltip=message)
    model.nodes.append(failed)
    insts = [o.inst if hasattr(o, "inst") else o for o in operands]
    insts = [i for i in insts if isinstance(i, Instruction)]
    many = len(insts) > 1
    for i, inst in enumerate(insts):
        try:
            src = next(n.id for n in model.nodes if n.inst is inst)
        except StopIteration:
            continue  # an operand the view left out
        text = shape_text(inst.shape)
        model.edges.append(Edge(src, failed.id, "operand", f"{i}: {text}" if many else text,
                                operand_index=i if many else None))
    model.update_legend()


def _entry_of(comp):
    """(entry computation, all computations, module name) of what ``graph_of`` is given."""
    if isinstance(comp, HloComputation):
        return comp, [comp], comp.name
    if hasattr(comp, "entry") and hasattr(comp, "computations"):
        return comp.entry, comp.computations, comp.name
    raise TypeError(f"graph_of expects an XlaComputation or HloComputation, got {type(comp).__name__}")


def _title(name, entry):
    if entry.root is None:
        return name
    return name if name == entry.name else f"{name}: {entry.name}"


__all__ = ["HloGraph", "graph_of", "graph_of_builder", "FORMATS"]
