"""Graphs of HLO computations, drawn with Graphviz (``comp.graph()``).

``graph_of(comp, **options)`` (what ``XlaComputation.graph`` calls) and
``graph_of_builder(builder, error=...)`` return an ``HloGraph``; see ``render.graph``.
Importing this package does not import the ``graphviz`` package: it is used only when
a graph is drawn, and Graphviz's ``dot`` program is looked for then.

Modules: ``model`` (the graph as nodes, edges, clusters), ``hierarchy`` (the groups a big
module collapses by: called computations, JAX scopes, parts), ``view`` (the model of a
hierarchy with some groups open), ``select`` (neighbourhood and path views), ``values``
(statistics and heatmaps of run values), ``dot`` (DOT text and running ``dot``), ``graph``
(the displayable object: ``expand``, ``collapse``, ``find``, ``highlight``).
"""
from ..ops import registry
from .dot import GraphvizNotFoundError, dot_available
from .graph import FORMATS, HloGraph, graph_of, graph_of_builder
from .model import GraphModel, build_model, category_of, instruction_node


def _register_graph_layer():
    """The renderer is generic: every registered opcode is drawn by ``instruction_node``."""
    for opcode in registry.all_ops():
        registry.register_layer("graph", opcode, instruction_node)


_register_graph_layer()

__all__ = ["HloGraph", "graph_of", "graph_of_builder", "GraphvizNotFoundError", "dot_available",
           "GraphModel", "build_model", "category_of", "instruction_node", "FORMATS"]
