"""ipywidgets UIs over xla_explorer: play with one op, build a computation op by op, step
through one.

- ``OpPlayground("Gather")``: a control per argument of the op; the result shape, or the
  broken rule beside the control at fault, at every change; values, HLO, graph, index map.
- progress bars for long work (a first Numba run compiling its kernels, a long run, a big
  animation), shown in the cell that runs it (``show_progress(False)`` turns them off).
- ``BuilderWidget()``: pick ops from the registry, see each result shape (or the
  ``ShapeError``, beside the argument at fault) as you set operands and attributes,
  record the op; sub-computations in nested builders (While, Conditional, Call, Sort,
  SelectAndScatter...); run it on a backend; ``python_code()`` rebuilds it.
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

from xla_explorer.playground import buildable

_CLASSES = {"OpPlayground": ".playground", "ProgressBar": ".progress", "NotebookProgress": ".progress",
            "show_progress": ".progress", "BuilderWidget": ".builder", "StepperWidget": ".stepper", "IndexMapStepper": ".stepper",
            "GraphWidget": ".graph"}


class _PlaygroundLayer:
    """The status table's "widget" entry: ``OpPlayground`` builds this op from its starting
    values (checked when this module is imported; ipywidgets is imported only when a
    widget is made)."""

    def __repr__(self):
        return "OpPlayground"


for _opcode in registry.all_ops():
    if buildable(_opcode) is True:
        registry.register_layer("widget", _opcode, _PlaygroundLayer())


def _in_kernel():
    import sys
    shell = getattr(sys.modules.get("IPython"), "get_ipython", lambda: None)()
    return shell is not None and getattr(shell, "kernel", None) is not None


def _notebook_progress(event):
    """Progress bars in a notebook kernel: the listener is made (ipywidgets imported) at the
    first long task, not when this module is imported."""
    from xla_explorer import progress
    from .progress import show_progress
    progress.unsubscribe(_notebook_progress)
    show_progress(True)(event)


if _in_kernel():
    from xla_explorer import progress as _progress
    _progress.subscribe(_notebook_progress)


def __getattr__(name):
    if name not in _CLASSES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        import ipywidgets  # noqa: F401
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("xla_explorer.widgets needs ipywidgets: pip install 'xla_explorer[widgets]'") from e
    return getattr(importlib.import_module(_CLASSES[name], __name__), name)


__all__ = ["OpPlayground", "show_progress", "NotebookProgress", "ProgressBar", "BuilderWidget", "StepperWidget", "IndexMapStepper"]
