"""Index-map pictures: see how Gather, Scatter, ReduceWindow, Pad, the collectives and the
other data-movement ops move every element.

    anim = xe.animate("gather", operand, start_indices, offset_dims=[1], ...)
    anim = xe.animate(comp, "gather.1", *module_args, invocation=0)  # any instruction
    anim                     # in Jupyter: a player (the first frame shows without scripts)
    anim.save("gather.gif")  # Pillow; .png / .svg / .pdf one frame (frame=k)
    anim.frame(3)            # step 3 as a matplotlib Figure
    anim.frames[3].cells     # which cells of which grid step 3 highlights, by role
    anim.stepper()           # a slider over the frames (ipywidgets)
    xe.index_map_view(comp, "gather.1", *module_args)   # interactive: hover a result element

One model (``model``: grids, marks, steps, the formula filled in), laid out once
(``scene``) and drawn two ways: ``draw`` (matplotlib figures, Pillow frames for GIF and
HTML) and ``view`` (the interactive SVG view), so the pictures cannot disagree.

Options: ``max_steps=60`` (a longer map shows its first row of steps, then the rest in
even strides; ``sample="even"`` or ``"first"`` choose otherwise; the title says which),
``dims=(a, b)`` and ``fixed={d: i}`` to draw arrays of rank above 3 (a dict keyed by grid
name, ``dims={"operand": (0, 2)}``, picks per grid).  Big arrays are drawn through a
window around the cells a step marks.

Importing this package registers the animators in the registry's "animation" layer; it
does not import matplotlib, Pillow or ipywidgets, which are imported when something is
drawn.
"""
import sys
import types

from . import draw, model, scene, view  # noqa: F401  (no matplotlib, Pillow or widgets imported here)
from . import collective, indexing, linalg, reduction, shape, slicing  # noqa: F401  (register the animators)
from .model import Animation, Animator, Frame, Grid, ROLES, STATIC, animated


def animate(comp_or_opcode, instruction=None, *args, dims=None, fixed=None, max_steps=60, sample=True, **attrs):
    """An animation of an op's index map.

    ``animate(comp, "gather.1", *module_args, invocation=0)``: an instruction in any
    computation of a module (its operand values come from the run's trace; with no
    arguments, shapes only: what the values would decide is shown as unknown).
    ``animate("gather", operand, start_indices, offset_dims=..., ...)``: an op (HLO opcode
    or API name) on values, attributes as keywords.
    """
    return model.animate(comp_or_opcode, instruction, *args, dims=dims, fixed=fixed, max_steps=max_steps,
                         sample=sample, **attrs)


def index_map_view(comp_or_opcode, instruction=None, *args, **kw):
    """The interactive index-map view (see ``view.IndexMapView``)."""
    from .view import index_map_view as _view
    return _view(comp_or_opcode, instruction, *args, **kw)


class _CallableModule(types.ModuleType):
    """``xla_explorer.animate`` is this package once imported (Python binds a package's
    submodule over the attribute of the same name): calling it calls ``animate``."""

    def __call__(self, *args, **kwargs):
        return animate(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule

__all__ = ["animate", "index_map_view", "animated", "Animation", "Animator", "Frame", "Grid", "ROLES", "STATIC"]
