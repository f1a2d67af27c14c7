"""``HloGraph``: the graph of a computation as an object that shows itself.

    g = comp.graph()                      # in Jupyter, displays itself (SVG)
    g.save("g.svg"); g.save("g.png")      # svg, png, pdf, dot
    g.source                              # the DOT text (no Graphviz needed)
    comp.graph(args=(x, y))               # values after a run: stats, NaN/Inf, heatmaps
    comp.graph(around="dot.3", radius=2)  # the neighbourhood of one instruction
    comp.graph(path=("x.1", "add.7"))     # every path between two instructions

Drawing needs Graphviz's ``dot`` program; without it ``GraphvizNotFoundError`` says how
to install it.  ``g.model`` is the drawn graph as data (nodes, edges, clusters).
"""
import pathlib
import tempfile

from ..hlo.ir import HloComputation, Instruction
from . import dot as _dot
from .model import Edge, Node, build_model, shape_text
from .select import neighbourhood, paths

FORMATS = ("svg", "png", "pdf", "dot")


class HloGraph:
    """A drawn HLO graph: ``.source`` (DOT), ``.save(path)``, ``.pipe(fmt)``, ``.model``."""

    def __init__(self, model, *, legend=True, rankdir="TB"):
        self.model = model
        self.legend, self.rankdir = legend, rankdir

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
        return self.model.node(name)

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
            return _dot.run_dot(_dot.to_dot(self.model, legend=self.legend, rankdir=self.rankdir, dpi=dpi), format)
        with tempfile.TemporaryDirectory(prefix="xla_explorer_graph_") as folder:
            for name, data in images.items():
                pathlib.Path(folder, name).write_bytes(data)
            source = _dot.to_dot(self.model, legend=self.legend, rankdir=self.rankdir, images=folder, dpi=dpi)
            out = _dot.run_dot(source, format)
        if format == "svg":
            out = _dot.inline_images(out.decode("utf-8"), images).encode("utf-8")
        return out

    def svg(self):
        return self.pipe("svg").decode("utf-8")

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
        kinds = [n for n in self.model.nodes if n.kind != "more"]
        return (f"<HloGraph {self.model.title}: {len(kinds)} nodes, {len(self.model.edges)} edges, "
                f"{len(self.model.clusters)} clusters>")


def graph_of(comp, *, values=None, args=None, around=None, radius=2, path=None, legend=True,
             expand_trivial=False, subcomputations=True, all_attributes=False, max_constant_elements=8,
             heatmaps=True, rankdir="TB", title=None):
    """The ``HloGraph`` of an ``XlaComputation`` (or an ``HloComputation``).

    values:      {instruction or name: value}, e.g. ``xe.inspect.instruction_values(comp, *args)``;
                 each node then shows min / max / mean, NaN and Inf counts, and a heatmap
    args:        run the reference executor on these arguments to get the values
    around, radius: only the instructions at most ``radius`` edges from ``around``
    path:        (a, b): only the instructions on paths between a and b
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
        from ..inspect import instruction_values
        values = instruction_values(comp, *args)
    model = build_model(entry, computations, values=values, expand_trivial=expand_trivial,
                        subcomputations=subcomputations, all_attributes=all_attributes,
                        max_constant_elements=max_constant_elements, heatmaps=heatmaps,
                        title=title if title is not None else _title(name, entry))
    if around is not None:
        model = neighbourhood(model, around, radius)
    elif path is not None:
        a, b = path
        model = paths(model, a, b)
    return HloGraph(model, legend=legend, rankdir=rankdir)


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
