"""ipywidgets UIs over xla_explorer: build a computation op by op, step through one.

- ``BuilderWidget()``: pick ops from the registry, see each result shape (or the
  ``ShapeError``) as you set operands and attributes, record the op, read the HLO.
- ``StepperWidget(comp, *args)``: one instruction at a time, with its operand and
  result values from the reference executor.
- ``IndexMapStepper(comp, "gather.1", *args)``: one index-map step at a time (the
  animation's stepper when ``xla_explorer.animate`` is there, text otherwise).

Installed as ``xla_explorer.widgets``; the core package never imports ipywidgets.
"""
try:
    import ipywidgets  # noqa: F401
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError("xla_explorer.widgets needs ipywidgets: pip install 'xla_explorer[widgets]'") from e

from .builder import BuilderWidget
from .stepper import IndexMapStepper, StepperWidget

__all__ = ["BuilderWidget", "StepperWidget", "IndexMapStepper"]
