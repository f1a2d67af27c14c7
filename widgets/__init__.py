"""ipywidgets UIs over xla_explorer: build a computation op by op, step through one.

- ``BuilderWidget()``: pick ops from the registry, see each result shape (or the
  ``ShapeError``) as you set operands and attributes, record the op, read the HLO.
- ``StepperWidget(comp, *args)``: one instruction at a time, with its operand and
  result values from the reference executor.
- ``IndexMapStepper(comp, "gather.1", *args)``: one index-map step at a time (the
  animation's stepper when ``xla_explorer.animate`` is there, text otherwise).
- ``GraphWidget(comp)``: the graph of a big module to explore (anywidget): click a group
  to open it, search, hover, pan and zoom, export the view; ``.highlight(location)``.

Installed as ``xla_explorer.widgets``; the core package never imports ipywidgets.
"""
import importlib

from xla_explorer.ops import registry

from ._text import buildable_ops

_CLASSES = {"BuilderWidget": ".builder", "StepperWidget": ".stepper", "IndexMapStepper": ".stepper",
            "GraphWidget": ".graph"}


class _BuilderLayer:
    """The status table's "widget" entry: the BuilderWidget builds this op (ipywidgets is
    imported only when a widget is made)."""

    def __repr__(self):
        return "BuilderWidget"


for _opcode in buildable_ops():
    registry.register_layer("widget", _opcode, _BuilderLayer())


def __getattr__(name):
    if name not in _CLASSES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        import ipywidgets  # noqa: F401
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("xla_explorer.widgets needs ipywidgets: pip install 'xla_explorer[widgets]'") from e
    return getattr(importlib.import_module(_CLASSES[name], __name__), name)


__all__ = ["BuilderWidget", "StepperWidget", "IndexMapStepper"]
