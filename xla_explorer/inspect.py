"""Looking inside a computation: the index map of one instruction, values per instruction."""
from dataclasses import dataclass

import numpy as np

from .ops import registry
from .ops.index_map import Unknown
from .shapes import Shape


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
    import difflib
    everything = [i.name for c in comp.computations for i in c.instructions]
    names = [n for n in everything if registry.OPS.get(comp.instruction(n).opcode)
             and registry.OPS[comp.instruction(n).opcode].index_map is not None]
    close = difflib.get_close_matches(str(name), everything, n=5)
    raise KeyError(f"no instruction {name!r} in {comp.name}" + (f"; did you mean {', '.join(close)}?" if close else "")
                   + f" (instructions with index maps: {', '.join(names) or 'none'})")


@dataclass
class InstructionValues:
    """One execution of one instruction: what an index map or a picture of it needs.

    ``operands`` and ``result`` are the values of the run (``known``), or, shapes only,
    ``Unknown`` placeholders (constants, and what the computation computes from constants
    alone, stay known).  For a collective they cover every device, stacked along a new
    leading axis (``devices == (num_replicas, num_partitions)``)."""
    instruction: object
    computation: object
    op: object
    operands: list
    result: object
    known: bool
    record: object = None
    devices: tuple = None
    invocation: int = 0
    #: eager instances (``xe.index_map("gather", ...)``): the result shape and attributes
    #: (with an instruction they are the instruction's)
    shape: object = None
    attrs: dict = None

    @property
    def label(self):
        inst = self.instruction
        where = "" if self.record is None or not self.record.stack else \
            " in " + " > ".join(f"{i}" + (f"#{k}" if k else "") for _, i, k in self.record.stack)
        return inst.name + (f" (invocation {self.invocation})" if self.invocation else "") + where


def is_collective(op):
    return op.opcode in registry.CATEGORIES.get("collective", ()) and op.index_map is not None


def instruction_operands(comp, name, *args, invocation=0, trace=None):
    """The operand values (and result) of the ``invocation``-th execution of instruction
    ``name`` (any computation of ``comp``): from ``trace``, or from tracing ``comp`` on
    ``args`` (keeping only this instruction and its operands); with neither, shapes only."""
    from .trace import Trace
    computation, inst = _find(comp, name)
    op = registry.get(inst.opcode)
    if args and isinstance(args[0], Trace) and trace is None and len(args) == 1:
        trace, args = args[0], ()
    if trace is None and args:
        trace = _trace_for(comp, inst, args)
    if trace is None:
        return _shapes_only(comp, computation, inst, op)
    if is_collective(op):
        n = trace.num_devices
        views = [trace.for_device(d) for d in range(n)]
        per_device = [v.operand_values(inst.name, invocation) for v in views]
        operands = [np.stack([np.asarray(p[k]) for p in per_device]) for k in range(len(inst.operands))]
        results = [v.value(inst.name, invocation) for v in views]
        result = tuple(np.stack([np.asarray(r[j]) for r in results]) for j in range(len(results[0]))) \
            if isinstance(results[0], tuple) else np.stack([np.asarray(r) for r in results])
        return InstructionValues(inst, computation, op, operands, result, True, views[0].get(inst.name, invocation),
                                 (trace.num_replicas, trace.num_partitions), invocation)
    record = trace.get(inst.name, invocation)
    return InstructionValues(inst, computation, op, list(trace.operand_values(inst.name, invocation)),
                             trace.value(inst.name, invocation), True, record, None, invocation)


def _trace_for(comp, inst, args):
    """The trace of ``comp`` on ``args`` keeping ``inst``.  A module that is not partitioned
    but exchanges data between devices (a collective, pmap-style) runs replicated, the same
    ``args`` on every device (``replica_count`` of the module, else as many devices as its
    collectives' replica groups name, at least 2)."""
    from .executors import spmd
    if not spmd.is_partitioned(comp):
        collectives = [i for c in comp.computations for i in c.instructions
                       if i.opcode in registry.OPS and is_collective(registry.OPS[i.opcode])]
        if collectives:
            info = spmd.SpmdInfo(comp)
            count = info.num_replicas if info.num_replicas > 1 else \
                max(_device_count(comp, i)[0] for i in collectives)
            return comp.trace_replicated([list(args)] * count, keep=[inst.name])
    return comp.trace(*args, keep=[inst.name])


#: shapes only: what a computation computes from its constants alone is evaluated when its
#: result has at most this many elements (iota-made indices, constant tables)
FOLD_LIMIT = 1 << 16


def _shapes_only(comp, computation, inst, op):
    known = _fold_constants(computation, inst)
    devices = None
    if is_collective(op):
        devices = _device_count(comp, inst)
        n = devices[0] * devices[1]
        operands = [Unknown(Shape(o.shape.element_type, (n,) + tuple(o.shape.dims))) for o in inst.operands]
        shapes = inst.shape.tuple_shapes if inst.shape.is_tuple else [inst.shape]
        stacked = [Unknown(Shape(s.element_type, (n,) + tuple(s.dims))) for s in shapes]
        result = tuple(stacked) if inst.shape.is_tuple else stacked[0]
        return InstructionValues(inst, computation, op, operands, result, False, None, devices)
    operands = [known.get(o, None) if o in known else _unknown(o.shape) for o in inst.operands]
    result = known.get(inst, _unknown(inst.shape))
    return InstructionValues(inst, computation, op, operands, result, inst in known, None, None)


def _unknown(shape):
    if shape.is_tuple:
        return tuple(_unknown(s) for s in shape.tuple_shapes)
    return Unknown(shape)


def _fold_constants(computation, upto):
    """{instruction: value} of what ``computation`` computes from constants alone, up to
    ``upto``: small results only, nothing random, nothing that talks to other devices."""
    from .executors.reference import ExecutionContext, run_instruction
    skip = registry.CATEGORIES.get("rng", set()) | registry.CATEGORIES.get("collective", set())
    known = {}
    for inst in computation.instructions[:computation.instructions.index(upto) + 1]:
        if inst.opcode == "parameter" or inst.opcode in skip or not all(o in known for o in inst.operands):
            continue
        if inst.opcode == "constant":
            known[inst] = inst.attrs["literal"]
            continue
        shapes = inst.shape.tuple_shapes if inst.shape.is_tuple else [inst.shape]
        if any(not s.is_array or not s.is_static or np.prod(s.dims, dtype=np.int64) > FOLD_LIMIT for s in shapes):
            continue
        try:
            op = registry.get(inst.opcode)
            if op.needs_context or op.reference is None:
                continue
            known[inst] = run_instruction(op, inst.name, [known[o] for o in inst.operands], inst.shape,
                                          inst.attrs, ExecutionContext())
        except Exception:  # noqa: BLE001 - what cannot be folded stays unknown
            continue
    return known


def _device_count(comp, inst):
    """(replicas, partitions) of a module for a shapes-only collective: the module's own
    (partitioned modules), else enough replicas for the ids the instruction names."""
    from .executors import spmd
    info = spmd.SpmdInfo(comp)
    if info.num_replicas * info.num_partitions > 1:
        return info.num_replicas, info.num_partitions
    ids = [i for g in inst.attrs.get("replica_groups") or () for i in g]
    ids += [i for p in inst.attrs.get("source_target_pairs") or () for i in p]
    count = inst.attrs.get("split_count") or inst.attrs.get("shard_count")
    return max([i + 1 for i in ids] + [int(count or 0), 2]), 1


def index_map(target, instruction=None, *args, invocation=0, trace=None, **attrs):
    """``index_map(comp, "gather.1", *module_args, invocation=0)`` or ``index_map("pad", *values, **attrs)``.

    For an instruction of a module -- in any of its computations: a fusion body, a while
    body (``invocation=k``: its k-th execution), a reduce body -- the operand values come
    from the run's trace (``trace=comp.trace(...)`` reuses one).  With no arguments the map
    is built from shapes only: nothing is allocated, and where the map depends on values
    that are not known (Gather's indices) its accesses say ``unknown`` instead of
    pretending they are zeros.  A collective's map covers every device: operands and
    result are stacked along a new leading device axis.

    Collectives and their devices: a partitioned module (shard_map, pjit) takes its global
    arguments and runs every device.  A module that is not partitioned but has collectives
    (pmap-style, replicated) takes *one device's* arguments and runs replicated with the
    same arguments on every device -- the module's ``replica_count``, else as many
    devices as its replica groups name (at least 2).  For different arguments per device,
    pass a trace: ``index_map(comp, name, trace=comp.trace_replicated([args_0, args_1, ...]))``.
    Operands of different shapes (a variadic all-reduce of ``(f32[4], f32[2,3])``): the map's
    domain is ``(device, k)``, ``k`` the element's place in the device's results flattened
    one after the other (see ``ops.collective._per_operand``).
    """
    from .computation import XlaComputation
    if isinstance(target, XlaComputation):
        if not isinstance(instruction, str):
            raise TypeError("index_map(comp, 'gather.1', *args): name the instruction")
        iv = instruction_operands(target, instruction, *args, invocation=invocation, trace=trace)
        return map_of(iv)
    op = op_by_name(target)
    if op.index_map is None:
        raise NotImplementedError(f"{op.name} ({op.opcode}) has no index map; ops with index maps: "
                                  f"{', '.join(sorted(o for o, d in registry.OPS.items() if d.index_map))}")
    values = ((instruction,) if instruction is not None else ()) + args
    operands = [v if isinstance(v, Unknown) else np.asarray(v) for v in values]
    shape, traced, dctx = eager_instance(op, operands, attrs)
    iv = InstructionValues(None, None, op, operands, None, False, None,
                           (dctx.num_replicas, dctx.num_partitions) if dctx is not None else None, 0, shape, traced)
    return map_of(iv)


def map_of(iv):
    """The IndexMap of an ``InstructionValues``."""
    from .executors.reference import bind_attrs, ExecutionContext
    op = iv.op
    if op.index_map is None:
        raise NotImplementedError(f"{op.name} ({op.opcode}) has no index map; ops with index maps: "
                                  f"{', '.join(sorted(o for o, d in registry.OPS.items() if d.index_map))}")
    attrs = iv.attrs if iv.instruction is None else _plain(iv.instruction.attrs)
    shape = iv.shape if iv.instruction is None else iv.instruction.shape
    kwargs = bind_attrs(attrs, ExecutionContext())
    if is_collective(op):
        r, p = iv.devices
        kwargs["ctx"] = ExecutionContext(num_replicas=r, num_partitions=p)
    return op.index_map(*iv.operands, shape=shape, **kwargs)


def eager_operands(op, values, attrs):
    """The InstructionValues of ``op`` on ``values`` (NumPy values, or ``Unknown``s for
    shapes only) with ``attrs``: the result from the reference (a collective's: every
    simulated device's, stacked)."""
    from .builder import _eager_value
    from .executors.reference import ExecutionContext, bind_attrs, run_instruction
    operands = [v if isinstance(v, Unknown) else _eager_value(v) for v in values]
    shape, traced, dctx = eager_instance(op, operands, attrs)
    known = not any(isinstance(v, Unknown) for v in operands)
    devices = (dctx.num_replicas, dctx.num_partitions) if dctx is not None else None
    if not known:
        result = _unknown(shape)
    elif dctx is not None:
        result = _collective_result(op, operands, traced, dctx)
    else:
        result = run_instruction(op, op.name, operands, shape, traced, ExecutionContext())
    return InstructionValues(None, None, op, operands, result, known, None, devices, 0, shape,
                             bind_attrs(traced, ExecutionContext()))


def _collective_result(op, operands, attrs, dctx):
    """The stacked per-device results of a collective on stacked operands (simulated devices)."""
    from .builder import XlaBuilder, Parameter, apply_op
    from .executors.reference import run, run_on_devices
    b = XlaBuilder(f"{op.name}_devices")
    params = [Parameter(b, i, Shape.of(_first(v)), f"operand{i}") for i, v in enumerate(operands)]
    comp = b.build(apply_op(op.opcode, params, dict(attrs)))
    per_device = run_on_devices(lambda c: run(comp, [np.asarray(v)[c.device_id] for v in operands], ctx=c),
                                dctx.num_replicas, dctx.num_partitions)
    if isinstance(per_device[0], tuple):
        return tuple(np.stack([r[j] for r in per_device]) for j in range(len(per_device[0])))
    return np.stack(per_device)


def eager_instance(op, operands, attrs):
    """(result shape, attributes, device context or None) of ``op`` on ``operands``; a
    collective's operands are stacked per device (``num_partitions=`` in ``attrs`` splits
    the devices into replicas x partitions)."""
    from .executors.reference import ExecutionContext
    if not is_collective(op):
        shape, traced = instance(op, operands, attrs)
        return shape, traced, None
    attrs = dict(attrs)
    partitions = int(attrs.pop("num_partitions", 1))
    n = int(np.shape(operands[0])[0]) if operands else 0
    one = [_first(v) for v in operands]
    shape, traced = instance(op, one, attrs)
    return shape, traced, ExecutionContext(num_replicas=max(n // partitions, 1), num_partitions=partitions)


def _first(v):
    from .shapes import Shape as _Shape
    if isinstance(v, Unknown):
        return Unknown(_Shape(v.xla_shape.element_type, v.shape[1:]))
    return np.asarray(v)[0]


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


