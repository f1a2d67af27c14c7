"""``GraphWidget``: the graph of a module to explore in Jupyter (anywidget).

    from xla_explorer.widgets import GraphWidget
    gw = GraphWidget(comp)                 # or GraphWidget(comp, x, y): values of a run
    gw                                     # click a group to open or close it, drag to pan,
                                           # wheel to zoom, hover for attributes and source line
    gw.expand("layer3"); gw.collapse("layer3")
    gw.search("f32[64,64]")                # what the search box finds, closed groups included
    gw.highlight("dot.12")                 # "where am I": its groups open, the node marked
    gw.follow(stepper)                     # ... following a StepperWidget's location
    gw.save("view.svg")                    # the current view (svg, png, pdf, dot)
    GraphWidget(comp, x, invocation=3)     # values of a loop body's 4th iteration (0-based);
    gw.show_invocation(5)                  # ... another one, the open groups kept

The picture is ``comp.graph(...)`` (``xla_explorer.render``): the widget keeps the open
groups (``opened``), the marked instructions (``highlighted``) and the search
(``query`` -> ``results``) as traitlets, and redraws in Python; its JavaScript
(``graph.js``) only shows the SVG, pans, zooms, and sends clicks.
"""
import pathlib

import traitlets

try:
    import anywidget
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError("GraphWidget needs anywidget: pip install 'xla_explorer[widgets]' (or pip install anywidget)") from e

from xla_explorer.errors import quote
from xla_explorer.render import graph_of
from xla_explorer.render.graph import FORMATS

#: search results listed at most
MAX_RESULTS = 40


class GraphWidget(anywidget.AnyWidget):
    """The interactive graph of ``comp`` (an XlaComputation); ``args`` (optional) are run
    to show values.  ``options`` go to ``comp.graph`` (``max_nodes``, ``rankdir``, ...)."""

    _esm = pathlib.Path(__file__).with_name("graph.js")

    svg = traitlets.Unicode("").tag(sync=True)
    #: svg element id -> {"kind", "name" | "group", "toggles": [group keys], "anchor", "tip"}
    nodes = traitlets.Dict().tag(sync=True)
    opened = traitlets.List(traitlets.Unicode()).tag(sync=True)
    highlighted = traitlets.List().tag(sync=True)
    query = traitlets.Unicode("").tag(sync=True)
    results = traitlets.List().tag(sync=True)
    more_results = traitlets.Bool(False).tag(sync=True)
    #: svg id of the node to bring into view (the last one revealed or highlighted)
    focus = traitlets.Unicode("").tag(sync=True)
    status = traitlets.Unicode("").tag(sync=True)
    error = traitlets.Unicode("").tag(sync=True)
    height = traitlets.Int(560).tag(sync=True)
    filename = traitlets.Unicode("graph").tag(sync=True)
    #: which run of an instruction that ran several times the values show (see graph_of)
    invocation = traitlets.Int(0).tag(sync=True)
    #: the last run there is to show (the most any instruction ran, less one; 0: no choice)
    max_invocation = traitlets.Int(0).tag(sync=True)

    def __init__(self, comp, *args, values=None, height=560, invocation=0, **options):
        if args and values is not None:
            raise ValueError("give the run's arguments or values=, not both")
        self.comp = comp
        self._args, self._values, self._options = args, values, options
        # the args are traced: values show inside called computations too
        self._first = graph_of(comp, values=values, args=args or None, invocation=invocation, **options)
        self.graph = self._first
        super().__init__(height=height, filename=_safe(getattr(comp, "name", "graph")), invocation=invocation,
                         max_invocation=_most_runs(self._first) - 1)
        self._drawing = False
        self.on_msg(self._on_message)
        self._show(self._first)

    # -- the API ---------------------------------------------------------------------------------
    def expand(self, *targets):
        """Open groups (keys, computation or scope names; an instruction's name opens the
        groups around it)."""
        return self._redraw(lambda g: g.expand(*targets))

    def collapse(self, *targets):
        """Close groups (an instruction's name: its innermost group)."""
        return self._redraw(lambda g: g.collapse(*targets))

    def toggle(self, key):
        """Open the group ``key`` if it is closed, close it if open."""
        return self.collapse(key) if key in self.graph.opened else self.expand(key)

    def reset(self):
        """Back to the first picture (nothing marked)."""
        self.set_trait("highlighted", [])
        self.focus = ""
        return self._redraw(lambda g: self._first)

    def highlight(self, *targets, reveal=True):
        """Mark instructions: names, ``(computation, name)`` pairs, or a stepper's
        ``location`` (a list of ``(computation, instruction, invocation)``: every frame).
        ``reveal``: open the groups around them (else their closed group is marked)."""
        def change(g):
            if reveal:
                g = g.expand(*[t for target in targets for t in _frames(target)])
            return g.highlight(*targets)
        self._redraw(change)
        self.set_trait("highlighted", [_jsonable(t) for t in targets])
        marked = [n.id for n in self.graph.nodes if n.highlight]
        self.focus = marked[-1] if marked else ""
        return self

    def follow(self, stepper, names=("position",)):
        """Highlight ``stepper.location`` now and each time it moves (a StepperWidget or any
        object with a ``location`` and traitlets ``names``)."""
        def update(_=None):
            location = getattr(stepper, "location", None)
            if location:
                self.highlight(list(location))
        stepper.observe(update, names=[n for n in names if stepper.has_trait(n)] or traitlets.All)
        update()
        return self

    def search(self, query, limit=MAX_RESULTS):
        """Instructions matching ``query`` (name, opcode, shape, scope; ``op:``, ``name:``,
        ``shape:``, ``scope:`` for one field), in closed groups too: what the box lists."""
        self.query = query
        return self.graph.find(query, limit=limit)

    def reveal(self, name):
        """Open the groups around instruction ``name`` and mark it (a search result's click)."""
        return self.highlight(name, reveal=True)

    def show_invocation(self, invocation):
        """Show the values of another run (a while body's k-th iteration: ``k``; or a dict
        ``{computation name: k}``), the open groups and marks kept.  Needs the run's
        arguments or a trace as values (not a dict of values)."""
        if not self._args and not (hasattr(self._values, "records") and hasattr(self._values, "count")):
            self.error = "show_invocation needs the run: GraphWidget(comp, *args) or values=comp.trace(...)"
            return self
        opened, marks = set(self.graph.opened), self.graph.view.highlighted

        def change(_):
            first = graph_of(self.comp, values=self._values, args=self._args or None, invocation=invocation,
                             **self._options)
            self._first = first
            return first.view.redraw(opened=opened, highlight=marks)
        self._redraw(change)
        if not self.error and isinstance(invocation, int):
            self.set_trait("invocation", invocation)
        return self

    def save(self, path, format=None, dpi=None):
        """Write the current view (svg, png, pdf, dot)."""
        return self.graph.save(path, format=format, dpi=dpi)

    # -- drawing ---------------------------------------------------------------------------------
    def _redraw(self, change):
        try:
            graph = change(self.graph)
        except (KeyError, ValueError, TypeError) as e:
            self.error = str(e.args[0]) if isinstance(e, KeyError) and e.args else str(e)
            self.status = ""
            return self
        self._show(graph)
        return self

    def _show(self, graph):
        self.status = "drawing…"
        try:
            svg = graph.svg()
        except Exception as e:  # Graphviz missing or failing: say so beside the picture
            self.error = f"{type(e).__name__}: {e}"
            self.status = ""
            return
        self.graph = graph
        self.error = ""
        with self.hold_sync():
            self.nodes = _node_info(graph)
            self.opened = sorted(graph.opened)
            self.svg = svg
            n = sum(1 for node in graph.nodes if node.kind == "instruction")
            g = sum(1 for node in graph.nodes if node.kind == "group")
            self.status = f"{n} instructions and {g} closed groups shown, of {len(graph.hierarchy):,}"
        if self.query:
            self._search()

    @traitlets.observe("query")
    def _on_query(self, change):
        self._search()

    def _search(self):
        found = self.graph.find(self.query, limit=MAX_RESULTS + 1) if self.query.strip() else []
        shown = {n.name for n in self.graph.nodes if n.kind == "instruction"}
        rows = []
        for item in found[:MAX_RESULTS]:
            groups = [g for g in self.graph.hierarchy.enclosing(item) if g.kind != "module"]
            where = " / ".join(g.label for g in reversed(groups)) or item.computation.name
            rows.append({"index": item.index, "name": item.inst.name, "opcode": item.inst.opcode,
                         "shape": self.graph.hierarchy.shape_text(item.inst), "where": where,
                         "shown": item.inst.name in shown})
        self.more_results = len(found) > MAX_RESULTS
        self.results = rows

    def _on_message(self, _widget, content, _buffers):
        event = content.get("event")
        if event == "toggle":
            info = self.nodes.get(content.get("id"), {})
            keys = info.get("toggles", [])
            if not keys:
                return
            if any(k not in self.graph.opened for k in keys):
                self.expand(*[k for k in keys if k not in self.graph.opened])
            else:
                self.collapse(*keys)
        elif event == "reveal":
            item = self.graph.hierarchy.items[int(content["index"])]
            self.highlight((item.computation.name, item.inst.name))
        elif event == "reset":
            self.reset()
        elif event == "invocation":
            try:
                k = int(content.get("k"))
            except (TypeError, ValueError):
                self.error = f"invocation: a run number 0..{self.max_invocation}, not {quote(content.get('k'))}"
                return
            self.show_invocation(k)


def _most_runs(graph):
    """How many times the instruction that ran most ran (1 without a run's values)."""
    runs = graph.view.options.get("runs") if graph.view is not None else None
    return max((count for count, _ in (runs or {}).values()), default=1)


def _node_info(graph):
    """What the JavaScript needs to know of each drawn node and cluster."""
    hier = graph.hierarchy
    out = {}
    for node in graph.nodes:
        if node.kind == "more":
            continue
        info = {"kind": node.kind, "toggles": list(node.toggles), "tip": _tip(node)}
        if node.kind == "group":
            group = hier.group(node.group)
            info.update(group=node.group, anchor=f"cluster_{group.index}")
        else:
            info.update(name=node.name, anchor=node.id)
        out[node.id] = info
    for c in graph.clusters:
        group = hier.groups.get(c.group)
        if group is None or group.kind == "module":
            continue
        if group.kind == "computation":
            anchor = f"n{group.caller.index}"
        else:
            anchor = f"g{group.index}"
        out[c.id] = {"kind": "cluster", "group": c.group, "toggles": [c.group], "anchor": anchor,
                     "tip": f"{c.tooltip or c.label}\n{c.signature}\nclick the title to close"}
    return out


def _tip(node):
    lines = [node.tooltip or node.title]
    if node.kind == "instruction":
        lines += [a for a in node.attributes if a not in node.tooltip]
        if node.calls:
            lines += node.calls + ["click to open"]
    return "\n".join(line for line in lines if line)


def _frames(target):
    """The (computation, instruction) targets inside one highlight target."""
    if isinstance(target, list):
        return [tuple(f[:2]) for f in target]
    return [target]


def _jsonable(target):
    if isinstance(target, (list, tuple)):
        return [_jsonable(t) for t in target]
    return target if isinstance(target, (str, int, float)) else str(target)


def _safe(name):
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in str(name)) or "graph"


__all__ = ["GraphWidget", "FORMATS"]
