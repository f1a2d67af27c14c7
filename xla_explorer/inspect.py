"""Looking inside a computation: the index map of one instruction, values per instruction."""
import numpy as np

from .errors import ExecutionError
from .ops import registry


def instruction_values(comp, *args, backend="numpy"):
    """Run ``comp`` on ``args`` and return {instruction: value} for every instruction of the
    entry computation (the stepper's view)."""
    from .executors.reference import run
    values = {}
    if backend != "numpy":
        raise ValueError("instruction values come from the numpy reference executor")
    run(comp, args, on_value=lambda inst, v: values.__setitem__(inst, v))
    return values


def _find(comp, name):
    for c in comp.computations:
        for inst in c.instructions:
            if inst.name == name:
                return c, inst
    names = [i.name for c in comp.computations for i in c.instructions if registry.OPS.get(i.opcode)
             and registry.OPS[i.opcode].index_map is not None]
    raise KeyError(f"no instruction {name!r} in {comp.name}; instructions with index maps: {', '.join(names)}")


def index_map(target, instruction=None, *args, **attrs):
    """``index_map(comp, "gather.1", *module_args)`` or ``index_map("pad", *values, **attrs)``.

    For an instruction of a computation, its operand values come from running the
    module on ``args`` (when the instruction sits in the entry computation); with no args,
    operands that are constants or whose values do not matter (shapes only) are zeros.
    """
    from .computation import XlaComputation
    from .executors.reference import bind_attrs, ExecutionContext
    if isinstance(target, XlaComputation):
        comp, inst = _find(target, instruction)
        op = registry.get(inst.opcode)
        if op.index_map is None:
            raise NotImplementedError(f"{op.name} ({inst.opcode}) has no index map; ops with index maps: "
                                      f"{', '.join(sorted(o for o, d in registry.OPS.items() if d.index_map))}")
        if args:
            if comp is not target.entry:
                raise ExecutionError(f"{inst.name} is inside {comp.name}, not the entry computation: "
                                     "pass no arguments (shapes only) or pick an entry instruction")
            values = instruction_values(target, *args)
            operands = [values[o] for o in inst.operands]
        else:
            operands = [o.attrs["literal"] if o.opcode == "constant" else _zeros(o.shape) for o in inst.operands]
        return op.index_map(*operands, shape=inst.shape, **bind_attrs(_plain(inst.attrs), ExecutionContext()))
    op = registry.get(target) if target in registry.all_ops() else registry.by_name(target)
    if op.index_map is None:
        raise NotImplementedError(f"{op.name} ({op.opcode}) has no index map")
    operands = [np.asarray(v) for v in ((instruction,) if instruction is not None else ()) + args]
    from .builder import infer_shape
    from .shapes import Shape
    shape = infer_shape(op, [Shape.of(v) for v in operands], attrs)
    return op.index_map(*operands, shape=shape, **attrs)


def _plain(attrs):
    return {k: v for k, v in attrs.items() if k != "shape"}


def _zeros(shape):
    if shape.is_tuple:
        return tuple(_zeros(s) for s in shape.tuple_shapes)
    return np.zeros(shape.dims, shape.dtype)
