"""Index-map animations (matplotlib): see how Gather, Scatter, ReduceWindow, Pad and the
other data-movement ops move every element.

    anim = xe.animate("gather", operand, start_indices, offset_dims=[1], ...)
    anim = xe.animate(comp, "gather.1", *module_args)   # an instruction of a program
    anim                     # in Jupyter: plays (HTML/JavaScript, no extension needed)
    anim.save("gather.gif")  # Pillow
    anim.frame(3)            # step 3 as a matplotlib Figure
    anim.frames[3].cells     # which cells of which grid step 3 highlights, by role
    anim.stepper()           # a slider over the frames (ipywidgets)

Options: ``max_steps=200`` (longer maps show their first steps, or ``sample=True``
evenly spaced ones; the title says which), ``dims=(a, b)`` and ``fixed={d: i}`` to draw
arrays of rank above 3 (two or three dimensions drawn, the others fixed; a dict keyed by
grid name, ``dims={"operand": (0, 2)}``, picks per grid).

Importing this package registers the animators in the registry's "animation" layer; it
does not import matplotlib, which is imported when something is drawn.
"""
import sys
import types

from . import core
from . import indexing, linalg, reduction, shape, slicing  # noqa: F401  (register the animators)
from .core import Animation, Animator, Frame, Grid, ROLES, animated


def animate(comp_or_opcode, instruction=None, *args, dims=None, fixed=None, max_steps=200, sample=False, **attrs):
    """An animation of an op's index map.

    ``animate(comp, "gather.1", *module_args)``: an instruction of a computation (its
    operand values come from running the module on the arguments; with no arguments, or
    for an instruction inside a called computation, operands are constants or zeros).
    ``animate("gather", operand, start_indices, offset_dims=..., ...)``: an op (HLO opcode
    or API name) on values, attributes as keywords.
    """
    return core.animate(comp_or_opcode, instruction, *args, dims=dims, fixed=fixed, max_steps=max_steps,
                        sample=sample, **attrs)


class _CallableModule(types.ModuleType):
    """``xla_explorer.animate`` is this package once imported (Python binds a package's
    submodule over the attribute of the same name): calling it calls ``animate``."""

    def __call__(self, *args, **kwargs):
        return animate(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule

__all__ = ["animate", "animated", "Animation", "Animator", "Frame", "Grid", "ROLES"]
