"""Looking inside a computation: the index map of one instruction, values per instruction."""
import numpy as np

from .errors import ExecutionError
from .ops import registry


def instruction_values(comp, *args, backend="numpy"):
    """Run ``comp`` on ``args`` and return {instruction: value} for every instruction of the
    entry computation (device 0 of a partitioned module).  The values come from the run's
    trace (``comp.trace``), which also has every called computation's values."""
    if backend != "numpy":
        raise ValueError("instruction values come from the numpy reference executor")
    from .trace import trace
    return trace(comp, *args, keep=_entry_only, max_bytes=float("inf")).entry_values()


def _entry_only(record):
    return record.parent is None


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
            operands = [o.attrs["literal"] if o.opcode == "constant" else _zeros(o.shape, f"index_map {inst.name}")
                        for o in inst.operands]
        return op.index_map(*operands, shape=inst.shape, **bind_attrs(_plain(inst.attrs), ExecutionContext()))
    op = op_by_name(target)
    if op.index_map is None:
        raise NotImplementedError(f"{op.name} ({op.opcode}) has no index map")
    operands = [np.asarray(v) for v in ((instruction,) if instruction is not None else ()) + args]
    shape, attrs = instance(op, operands, attrs)
    return op.index_map(*operands, shape=shape, **bind_attrs(attrs, ExecutionContext()))


def op_by_name(target):
    """The OpDef of an HLO opcode (``"reduce-window"``) or an API name (``"ReduceWindow"``)."""
    ops = registry.all_ops()
    if target in ops:
        return ops[target]
    if target in registry.NAMES:
        return registry.by_name(target)
    raise NotImplementedError(f"unknown op {target!r}: give an HLO opcode ('gather') or an API name ('Gather')")


def instance(op, operands, attrs):
    """(result shape, attributes) of ``op`` on values shaped like ``operands``, the attributes
    as the op's public function records them: ``"SAME"`` padding made explicit, callables
    traced, defaults filled in.  Arguments the public function does not take positionally
    (a list of start indices, say) fall back to the raw attributes and the shape rule."""
    from . import builder as bld
    from .shapes import Shape
    fn = getattr(__import__("xla_explorer"), op.name, None)
    if fn is not None:
        b = bld.XlaBuilder(f"{op.name}_instance")
        params = [bld.Parameter(b, i, Shape.of(v), f"operand{i}") for i, v in enumerate(operands)]
        try:
            fn(*params, **attrs)
        except TypeError:
            pass
        else:
            inst = next(i for i in reversed(b.instructions) if i.opcode == op.opcode)
            if [o.attrs.get("parameter_number") for o in inst.operands] == list(range(len(operands))):
                return inst.shape, _plain(inst.attrs)
    shapes = [Shape.of(v) for v in operands]
    traced = bld._trace_computations(op, shapes, attrs, None)
    return bld.infer_shape(op, shapes, traced), traced


def _plain(attrs):
    return {k: v for k, v in attrs.items() if k != "shape"}


def _zeros(shape, where="index map"):
    """Stand-in operand values (zeros) when only shapes matter: guarded by the size limit."""
    from .shapes import check_size
    check_size(shape, where, what="a stand-in operand")
    if shape.is_tuple:
        return tuple(_zeros(s, where) for s in shape.tuple_shapes)
    return np.zeros(shape.dims, shape.dtype)
