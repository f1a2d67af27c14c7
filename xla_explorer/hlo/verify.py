"""The one check every module passes before any executor runs it.

A module can lie: hand-edited HLO text declares ``f32[100000000] add(f32[3], f32[3])``,
a parameter number is missing, an operand comes after its user.  The NumPy reference
would notice late; a compiled kernel trusts the declared shape and reads memory its
buffers do not back.  So ``verify(module)`` runs first, on every backend, and refuses
such a module with the same error everywhere:

- each computation's parameters are numbered 0..n-1, once each;
- instruction names are unique across the module (an ``HloParseError`` naming both
  places otherwise, as XLA's verifier refuses it; a run's trace keys records by name);
- every operand is an instruction of the same computation defined before its user (the
  parser has already ordered the text and refused cycles and undefined names);
- every instruction's declared shape is what its op's shape rule infers from its
  operands and attributes (which checks attribute ranges and enum values too), up to
  layouts and dynamic sizes -- a static size no bigger than the other side's bound for a
  dynamic one (``f32[20]`` is not an ``add`` of ``f32[<=10]``s; ``f32[7]`` may be, and
  ``run_shape`` checks it at run time on every backend); a constant's literal has the
  declared shape;
- no instruction's value would need more bytes than the size limit (``shapes.MAX_BYTES``);
- computations call each other at most ``MAX_CALL_DEPTH`` deep (the executors run a
  called computation by calling into it: a deeper chain would exhaust Python's stack).

The result is remembered on the module (until its entry changes), so a module run in a
loop is verified once.
"""
import weakref

import numpy as np

from ..errors import RunShapeError, ShapeError, SizeLimitError, quote
from ..ops import registry
from ..shapes import MAX_NESTING, Shape, check_size
from .attrs import sharding_error

#: how deep computations may call each other (a while body calling a reduce body: 2)
MAX_CALL_DEPTH = MAX_NESTING


def verify(module):
    """Verify ``module`` (an XlaComputation) unless it was verified as it is now; returns it."""
    key = (module.entry, len(module.entry.instructions), module.entry.root)
    if module.__dict__.get("_verified") != key:
        verify_module(module)
        module.__dict__["_verified"] = key
    return module


def verify_module(module):
    """Check every computation of ``module`` (see the module docstring); raises ShapeError
    (SizeLimitError for a value over the size limit) naming the instruction and its line."""
    registry.all_ops()
    computations = module.computations   # callees before their callers
    depth = {}
    for comp in computations:
        callees = [c for inst in comp.instructions for c in inst.called_computations()]
        depth[id(comp)] = 1 + max((depth.get(id(c), 0) for c in callees), default=0)
        if depth[id(comp)] > MAX_CALL_DEPTH:
            raise ShapeError(f"computation {comp.name}: computations call each other {depth[id(comp)]} deep; at most "
                             f"{MAX_CALL_DEPTH} levels are supported")
    _check_unique_names(module, computations)
    inferred = {}   # shared by the module's computations: a big module repeats a few ops
    for comp in computations:
        verify_computation(comp, inferred)


def _check_unique_names(module, computations):
    """Instruction names are unique across a module (XLA's verifier refuses a repeat too):
    a run's trace keys its records by name."""
    from ..errors import HloParseError
    from .names import duplicate_names
    twice = duplicate_names(computations)
    if twice:
        name, first, c1, second, c2 = twice[0]
        raise HloParseError(f"instruction name {name!r} is used twice in module {module.name}: {where(first)} in "
                            f"computation {c1.name} and {where(second)} in computation {c2.name}; instruction "
                            f"names must be unique across a module (XLA's verifier refuses it too); rename one"
                            + (f" ({len(twice) - 1} more repeated: "
                               f"{', '.join(sorted({t[0] for t in twice[1:]})[:5])})" if len(twice) > 1 else ""))


def where(inst):
    line = getattr(inst, "line", None)
    return inst.name if line is None else f"{inst.name} (line {line})"


def verify_computation(comp, inferred=None):
    position = {inst: k for k, inst in enumerate(comp.instructions)}
    if comp.root not in position:
        raise ShapeError(f"computation {comp.name}: its root {comp.root.name} is not one of its instructions")
    _check_parameters(comp)
    for k, inst in enumerate(comp.instructions):
        for o in inst.operands:
            if o not in position:
                raise ShapeError(f"{where(inst)}: operand {o.name} is not an instruction of computation "
                                 f"{comp.name}")
            if position[o] >= k:
                raise ShapeError(f"{where(inst)}: operand {o.name} is defined after it (operands come first; "
                                 f"a cycle?) in computation {comp.name}")
        _check_instruction(inst, inferred)


def _check_parameters(comp):
    params = [i for i in comp.instructions if i.opcode == "parameter"]
    numbers = []
    for p in params:
        n = p.attrs.get("parameter_number")
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise ShapeError(f"{where(p)}: parameter number {n!r} must be an integer >= 0")
        numbers.append(n)
    if sorted(numbers) != list(range(len(numbers))):
        raise ShapeError(f"computation {comp.name}: parameter numbers must be 0..{len(numbers) - 1}, each once; "
                         f"got {sorted(numbers)}")
    if set(comp.parameters) != set(params) or len(comp.parameters) != len(params):
        raise ShapeError(f"computation {comp.name}: its parameter list does not match its parameter instructions")


def _frozen(v):
    """``v`` as a hashable key that tells ``1``, ``True`` and ``1.0`` apart (lists as tuples);
    raises TypeError for what cannot be hashed (arrays)."""
    if isinstance(v, (list, tuple)):
        return (type(v).__name__,) + tuple(_frozen(x) for x in v)
    hash(v)
    return (type(v).__name__, v)


def _rule_key(inst):
    """What the shape rule of ``inst`` reads -- its opcode, operand shapes (layouts aside:
    verification compares shapes up to layouts) and attributes -- or None when an
    attribute cannot be a key (a literal array)."""
    try:
        return (inst.opcode, tuple(o.shape for o in inst.operands),
                tuple((k, _frozen(v)) for k, v in sorted(inst.attrs.items())))
    except TypeError:
        return None


def _check_instruction(inst, memo=None):
    shape = inst.shape
    if not isinstance(shape, Shape):
        raise ShapeError(f"{where(inst)}: its shape is {shape!r}, not a Shape")
    op = registry.OPS.get(inst.opcode)
    if op is None:
        raise NotImplementedError(f"{where(inst)}: HLO opcode {quote(inst.opcode)} is not implemented in xla_explorer "
                                  f"(see xla_explorer.status_table())")
    sharding = inst.attrs.get("sharding") or inst.extra.get("sharding")
    if isinstance(sharding, str) and "devices=" in sharding:
        why = sharding_error(sharding)
        if why:
            raise ShapeError(f"{where(inst)}: sharding={sharding}: {why}")
    if inst.opcode == "parameter":
        return
    try:
        check_size(shape, op.name)
    except SizeLimitError:   # the message names the instruction (built only when it is needed)
        check_size(shape, f"{op.name} {where(inst)}")
    if inst.opcode == "constant":
        literal = inst.attrs.get("literal")
        if literal is not None and shape.is_static and tuple(np.shape(literal)) != shape.dims:
            raise ShapeError(f"{where(inst)}: the constant's literal has shape {list(literal.shape)} but the "
                             f"instruction declares {shape}")
        return
    # the rule's answer for the same opcode, operand shapes and attributes is remembered
    # for the module (a 3,000-op chain verifies in a third of the time); failures are not
    key = _rule_key(inst) if memo is not None else None
    inferred = memo.get(key) if key is not None else None
    if inferred is None:
        try:
            inferred = _infer_shape()(op, [o.shape for o in inst.operands], inst.attrs)
        except ShapeError as e:
            raise type(e)(f"{op.name} {where(inst)}: {e}") from None
        if key is not None:
            memo[key] = inferred
    if not inferred.compatible(shape) or (
            not (inferred.is_static and shape.is_static) and not within_bounds(inferred, shape)):
        operands = ", ".join(str(o.shape) for o in inst.operands)
        raise ShapeError(f"{op.name} {where(inst)}: the module declares {shape} but the shape rule infers "
                         f"{inferred} from its operands ({operands}) and attributes")


def _infer_shape():
    # builder imports this module: imported on first use, then kept (an import statement
    # run per instruction cost a few microseconds of the verification's ~30)
    global _INFER
    if _INFER is None:
        from ..builder import infer_shape
        _INFER = infer_shape
    return _INFER


_INFER = None


def within_bounds(a, b):
    """Whether no static size of one shape exceeds the other's bound for that dimension (a
    static ``f32[20]`` claimed from operands of ``f32[<=10]`` cannot be; ``compatible``
    lets a dynamic dimension match any size)."""
    if a.is_tuple or b.is_tuple:
        return all(within_bounds(x, y) for x, y in zip(a.tuple_shapes or (), b.tuple_shapes or ()))
    if not (a.is_array and b.is_array):
        return True
    for x, y in ((a, b), (b, a)):
        for d, (dim, bound) in enumerate(zip(x.dims, x.bounds or (None,) * x.rank)):
            other = y.dims[d] if d < y.rank else None
            if dim is None and bound is not None and other is not None and other > bound:
                return False
    return True


#: instruction -> whether an operand has a dynamic dimension
_DYNAMIC = weakref.WeakKeyDictionary()


def _dynamic_operands(inst):
    """Whether any operand of ``inst`` has a dynamic dimension (remembered)."""
    flag = _DYNAMIC.get(inst)
    if flag is None:
        flag = _DYNAMIC[inst] = any(not o.shape.is_static for o in inst.operands if isinstance(o.shape, Shape))
    return flag


def _run_shape(declared, value):
    """The static shape ``value`` has at run time (``declared`` gives types and tuples)."""
    if declared.is_tuple:
        return Shape.tuple([_run_shape(s, v) for s, v in zip(declared.tuple_shapes, value)])
    if not declared.is_array:
        return declared
    return Shape(declared.element_type, tuple(int(d) for d in getattr(value, "shape", np.shape(value))))


def _degenerate_to_unbounded(inst, shapes):
    """Unbounded sizes (``?``) broadcast as the builder means them (XlaBuilder's implicit
    broadcasting of unbounded dimensions): an element-wise operand of run-time size 1 where
    it is declared ``?``, or declared 1 where the result is ``?``, counts as the other
    operands' run-time size there (the builder has no bound to broadcast to, so it leaves
    such an operand as it is, and the verifier accepts 1 against ``?``).  Bounded sizes
    (``<=n``) get no such leeway: the builder broadcasts to the bound and sets the size."""
    dims, bounds = inst.shape.dims, inst.shape.bounds
    if not inst.shape.is_array:
        return shapes
    rank = len(dims)
    same = [s.is_array and s.rank == rank for s in shapes]
    out = list(shapes)
    for i, (o, s) in enumerate(zip(inst.operands, shapes)):
        if not same[i] or not o.shape.is_array:
            continue
        run = list(s.dims)
        for k in range(rank):
            declared = (o.shape.dims[k], o.shape.bounds[k])
            unbounded = declared == (None, None) or (declared[0] == 1 and (dims[k], bounds[k]) == (None, None))
            if unbounded and run[k] == 1:
                run[k] = max(t.dims[k] for t, ok in zip(shapes, same) if ok)
        out[i] = Shape(s.element_type, tuple(run))
    return out


def run_shape(inst, values):
    """The result shape of ``inst`` for the operand values of this run: ``inst.shape`` when
    its operands are static (verified once); for dynamic operands the shape rule again on
    their run-time sizes, which must fit what the module declares -- a ShapeError naming
    the op, the rule's complaint and the sizes otherwise (the compiled backends' kernels
    get this static shape, never a ``?``)."""
    if not _dynamic_operands(inst):
        return inst.shape
    op = registry.get(inst.opcode)
    try:
        shapes = [_run_shape(o.shape, v) for o, v in zip(inst.operands, values)]
    except (TypeError, ValueError):
        return inst.shape
    if "elementwise" in op.categories:
        shapes = _degenerate_to_unbounded(inst, shapes)
    sizes = ", ".join(str(s) for s in shapes)
    from ..builder import infer_shape
    try:
        inferred = infer_shape(op, shapes, inst.attrs)
    except ShapeError as e:
        raise RunShapeError(f"{op.name} {where(inst)}: at run time its operands are {sizes}: {e}") from None
    if not inferred.compatible(inst.shape) or not within_bounds(inferred, inst.shape):
        raise RunShapeError(f"{op.name} {where(inst)}: at run time its operands are {sizes}, from which the shape "
                         f"rule infers {inferred}, but the module declares {inst.shape}")
    return inferred if inferred.is_static else inst.shape
