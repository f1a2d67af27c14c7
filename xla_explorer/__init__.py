"""xla_explorer: XLA's operation semantics, executable and visible.

Build a computation with the spec's ops (``xe.Gather``, ``xe.Pad``, ...), or parse HLO
text, see its shapes, run it on the NumPy reference executor, and look at how each op
maps indices.  ``xe.status_table()`` shows what is implemented in which layer.
"""
from . import dtypes
from .builder import Constant, ConstantR0, Parameter, XlaBuilder, XlaOp
from .computation import XlaComputation
from .errors import ExecutionError, HloParseError, ShapeError, SizeLimitError
from .fpenv import FloatEnv, float_env, get_float_env, set_float_env
from .ops import *  # noqa: F401,F403  (the op functions, named as in the spec)
from .ops import __all__ as _ops_all
from .ops.index_map import Access, IndexMap
from .shapes import Shape, set_size_limit, size_limit

__version__ = "0.1.0"


def parse_hlo(text):
    """Parse HLO text (as XLA prints it and as JAX emits it) into an XlaComputation."""
    from .hlo.parser import parse_hlo as _parse
    return _parse(text)


def from_jax(f, *args, **kwargs):
    """Import ``jax.jit(f).lower(*args)`` as an XlaComputation (needs jax)."""
    from .jax_bridge import from_jax as _from_jax
    return _from_jax(f, *args, **kwargs)


def index_map(comp_or_opcode, instruction=None, *args, **attrs):
    """The index map of an op: ``index_map(comp, "gather.1", *args, invocation=0)`` for an
    instruction in any computation of a module (its operands' values come from the run's
    trace, ``trace=comp.trace(...)`` reuses one; ``invocation=k`` is its k-th execution;
    with no args, shapes only: values that decide the map are unknown and the accesses
    say so), or ``index_map("pad", *operand_values, padding_config=...)`` for an op on values."""
    from .inspect import index_map as _index_map
    return _index_map(comp_or_opcode, instruction, *args, **attrs)


def animate(comp_or_opcode, instruction=None, *args, **kw):
    """An animation of an op's index map (matplotlib and Pillow draw it): ``animate(comp,
    "gather.1", *module_args, invocation=0)`` for an instruction in any computation of a
    module, or ``animate("gather", operand, start_indices, offset_dims=..., ...)`` for an
    op on values.  Displays itself in Jupyter; ``.save("gather.gif")``, ``.frame(k)``,
    ``.frames``, ``.stepper()``, ``.view()``.  Options: ``max_steps=60`` (a longer map:
    its first row of steps, then even strides), ``sample="even"`` / ``"first"``,
    ``dims=(a, b)``, ``fixed={d: i}``."""
    from .animate import animate as _animate
    return _animate(comp_or_opcode, instruction, *args, **kw)


def index_map_view(comp_or_opcode, instruction=None, *args, **kw):
    """The interactive index-map view (an anywidget in JupyterLab, Notebook 7 and VS Code;
    a static SVG without anywidget): ``index_map_view(comp, "gather.1",
    *module_args)`` or ``index_map_view("gather", operand, indices, **attrs)``.  Hover or
    click a result element: the operand elements it reads light up, with the formula
    filled in beside.  ``.select(index)``, ``.highlighted``, ``.formula`` for scripts."""
    from .animate import index_map_view as _view
    return _view(comp_or_opcode, instruction, *args, **kw)


def __getattr__(name):
    # xe.exercises: the classroom exercise bank, imported on first use
    if name == "exercises":
        import importlib
        return importlib.import_module(__name__ + ".exercises")
    raise AttributeError(f"module 'xla_explorer' has no attribute {name!r}")


def status_table(file=None):
    """Print (and return) the op x layer table, generated from the registries."""
    from .status import status_table as _status_table
    return _status_table(file=file)


__all__ = ["Shape", "XlaBuilder", "XlaOp", "XlaComputation", "Parameter", "Constant", "ConstantR0",
           "ShapeError", "HloParseError", "ExecutionError", "SizeLimitError", "parse_hlo", "from_jax",
           "index_map", "index_map_view", "animate", "status_table", "IndexMap", "Access", "dtypes",
           "set_size_limit", "size_limit", "FloatEnv", "float_env", "get_float_env", "set_float_env"] + list(_ops_all)
