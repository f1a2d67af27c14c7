"""Symbolic execution: ``XlaBuilder`` records ops as HLO instructions, shape-checked at once.

This is the pipeline of tf2xla (spec/004): an op call does not compute anything, it
records an instruction whose shape the op's shape rule infers (raising ``ShapeError``
if the spec forbids the call); ``build`` closes the recording into an
``XlaComputation`` that executors run.  The same op functions called on NumPy arrays
run eagerly through the reference executor.
"""
import itertools

import numpy as np

from . import dtypes
from .errors import ShapeError
from .hlo.ir import HloComputation, Instruction, computation_closure
from .shapes import Shape, check_size

_ids = itertools.count(1)


def _fresh(base):
    return f"{base}.{next(_ids)}"


class XlaOp:
    """A value being built: an instruction of a builder, with its shape known."""

    __slots__ = ("builder", "inst")

    def __init__(self, builder, inst):
        self.builder, self.inst = builder, inst

    @property
    def shape(self):
        return self.inst.shape

    @property
    def name(self):
        return self.inst.name

    def __repr__(self):
        return f"XlaOp({self.inst.name}: {self.shape})"

    # arithmetic sugar for the tour; each is the spec op of the same name
    def _bin(self, name, other, swap=False):
        from . import ops
        a, b = (other, self) if swap else (self, other)
        return getattr(ops, name)(a, b)

    def __add__(self, o): return self._bin("Add", o)
    def __radd__(self, o): return self._bin("Add", o, True)
    def __sub__(self, o): return self._bin("Sub", o)
    def __rsub__(self, o): return self._bin("Sub", o, True)
    def __mul__(self, o): return self._bin("Mul", o)
    def __rmul__(self, o): return self._bin("Mul", o, True)
    def __truediv__(self, o): return self._bin("Div", o)
    def __rtruediv__(self, o): return self._bin("Div", o, True)

    def __neg__(self):
        from . import ops
        return ops.Neg(self)

    __hash__ = object.__hash__


class XlaBuilder:
    """Records instructions.  ``build(root)`` returns the ``XlaComputation``."""

    def __init__(self, name="computation"):
        self.name = name
        self.instructions = []
        self.parameters = {}

    def add(self, opcode, shape, operands=(), attrs=None, name=None, extra=None):
        inst = Instruction(name or _fresh(opcode), opcode, shape, [o.inst for o in operands], attrs, extra)
        self.instructions.append(inst)
        return XlaOp(self, inst)

    def parameter(self, parameter_number, shape, name=None):
        if parameter_number in self.parameters:
            raise ShapeError(f"Parameter: parameter number {parameter_number} is already used in "
                             f"builder {self.name!r} (by {self.parameters[parameter_number].name})")
        op = self.add("parameter", shape, (), {"parameter_number": int(parameter_number)},
                      name=_unique_param_name(name, parameter_number))
        self.parameters[parameter_number] = op.inst
        return op

    def computation(self, root=None):
        """The recorded instructions as an HloComputation (ops not reaching the root dropped)."""
        if root is None:
            if not self.instructions:
                raise ShapeError(f"XlaBuilder {self.name!r}: build() of a builder with no ops")
            root = XlaOp(self, self.instructions[-1])
        if isinstance(root, (tuple, list)):
            from . import ops
            root = ops.Tuple(*root)
        if not isinstance(root, XlaOp) or root.builder is not self:
            raise ShapeError(f"XlaBuilder {self.name!r}: the root must be an op of this builder, got {root!r}")
        numbers = sorted(self.parameters)
        if numbers != list(range(len(numbers))):
            raise ShapeError(f"XlaBuilder {self.name!r}: parameter numbers must be 0..n-1, got {numbers}")
        live = _reachable(root.inst)
        # parameters stay even when unused: they are the computation's signature
        insts = [i for i in self.instructions if i in live or i.opcode == "parameter"]
        params = [self.parameters[n] for n in numbers]
        return HloComputation(self.name, insts, root.inst, params)

    def build(self, root=None):
        from .computation import XlaComputation
        return XlaComputation(self.computation(root))


def _unique_param_name(name, number):
    # a given name is kept as it is (the printer makes names unique per module)
    return str(name) if name else _fresh("parameter")


def _reachable(root):
    seen, stack = set(), [root]
    while stack:
        inst = stack.pop()
        if inst in seen:
            continue
        seen.add(inst)
        stack.extend(inst.operands)
    return seen


# ---------------------------------------------------------------------------------------
# Parameters and constants

def Parameter(builder, parameter_number, shape, name=None):
    """Wraps XLA's Parameter: input ``parameter_number`` of the computation, of ``shape``."""
    if isinstance(shape, str):
        shape = Shape.parse(shape)
    return builder.parameter(parameter_number, shape, name)


def literal_array(value, element_type=None):
    """A NumPy array for a constant: Python scalars become s32/f32/pred/c64 as in XlaBuilder."""
    if element_type is not None:
        return np.asarray(value, dtype=dtypes.to_numpy(element_type))
    if isinstance(value, np.ndarray) or isinstance(value, np.generic):
        arr = np.asarray(value)
        dtypes.from_numpy(arr.dtype)  # raises for dtypes XLA has no name for
        return arr
    arr = np.asarray(value)
    if arr.dtype == np.float64:
        arr = arr.astype(np.float32)
    elif arr.dtype == np.int64:
        arr = arr.astype(np.int32)
    elif arr.dtype == np.complex128:
        arr = arr.astype(np.complex64)
    return arr


def Constant(builder, value, element_type=None):
    """Wraps XLA's ConstantLiteral: an array known when building (scalars: f32/s32/pred)."""
    arr = literal_array(value, element_type)
    return builder.add("constant", Shape(dtypes.from_numpy(arr.dtype), arr.shape), (), {"literal": arr})


def ConstantR0(builder, value, element_type=None):
    return Constant(builder, value, element_type)


# ---------------------------------------------------------------------------------------
# Applying an op: the one function every op's public wrapper calls

def _builder_of(values):
    builder = None
    for v in values:
        if isinstance(v, XlaOp):
            if builder is not None and v.builder is not builder:
                raise ShapeError(f"ops of two different builders ({builder.name!r} and "
                                 f"{v.builder.name!r}) cannot be combined")
            builder = v.builder
    return builder


def apply_op(opcode, operands, attrs=None, *, name=None, builder=None):
    """Record (builder mode) or evaluate (eager mode) op ``opcode`` on ``operands``.

    Operands are XlaOps of one builder (NumPy values among them become constants), or
    all NumPy values (eager).  Computation attributes may be Python callables: they are
    traced with the parameter shapes the op's ``computation_params`` gives.
    """
    from .ops import registry  # here, not at the top: the op families import this module
    op = registry.get(opcode)
    attrs = dict(attrs or {})
    found = _builder_of(operands)
    if builder is not None and found is not None and found is not builder:
        raise ShapeError(f"{op.name}: the operands belong to builder {found.name!r}, not {builder.name!r}")
    builder = builder or found
    if builder is not None:
        operands = [o if isinstance(o, XlaOp) else Constant(builder, o) for o in operands]
        shapes = [o.shape for o in operands]
    else:
        operands = [_eager_value(o) for o in operands]
        shapes = [Shape.of(o) for o in operands]
    attrs = _trace_computations(op, shapes, attrs, builder)
    shape = infer_shape(op, shapes, attrs)
    if builder is not None:
        return builder.add(opcode, shape, operands, attrs, name=name)
    from .executors.reference import eager
    return eager(op, operands, shape, attrs)


def infer_shape(op, shapes, attrs):
    """Run the op's shape rule; malformed arguments become ShapeErrors naming the op."""
    try:
        return op.shape_rule(*shapes, **attrs)
    except ShapeError:
        raise
    except (TypeError, IndexError, KeyError, ValueError, AttributeError) as e:
        raise ShapeError(f"{op.name}: invalid arguments for {op.name} with operand shapes "
                         f"{[str(s) for s in shapes]}: {type(e).__name__}: {e}") from e


def _eager_value(v):
    if isinstance(v, tuple):
        return tuple(_eager_value(x) for x in v)
    from .executors.reference import Token
    if isinstance(v, Token):
        return v
    return literal_array(v)


def _trace_computations(op, shapes, attrs, builder):
    """Callables (and XlaComputations) given for computation attributes -> HloComputations."""
    from .computation import XlaComputation
    if op.computation_params is None:
        return attrs
    out = dict(attrs)
    for kw, v in attrs.items():
        if isinstance(v, (list, tuple)) and v and all(callable(c) or isinstance(c, (XlaComputation, HloComputation)) for c in v) \
                and not any(isinstance(c, (int, np.integer)) for c in v):
            out[kw] = [_as_computation(op, kw, c, shapes, attrs, i) for i, c in enumerate(v)]
        elif isinstance(v, (XlaComputation, HloComputation)) or (callable(v) and not isinstance(v, type)):
            out[kw] = _as_computation(op, kw, v, shapes, attrs, None)
    return out


def _as_computation(op, kw, fn, shapes, attrs, index):
    from .computation import XlaComputation
    if isinstance(fn, XlaComputation):
        return fn.entry
    if isinstance(fn, HloComputation):
        return fn
    params = op.computation_params(kw, shapes, attrs) if index is None else \
        op.computation_params(kw, shapes, attrs, index)
    return trace(fn, params, name=f"{op.name.lower()}_{kw}")


def trace(fn, param_shapes, name="region"):
    """Trace a Python callable on parameters of the given shapes into an HloComputation."""
    sub = XlaBuilder(_fresh(name))
    params = [Parameter(sub, i, s, f"p{i}") for i, s in enumerate(param_shapes)]
    result = fn(*params)
    if isinstance(result, (tuple, list)):
        from . import ops
        result = ops.Tuple(*[r if isinstance(r, XlaOp) else Constant(sub, r) for r in result])
    elif not isinstance(result, XlaOp):
        result = Constant(sub, result)
    if result.builder is not sub:
        raise ShapeError(f"{name}: the traced function returned an op of another builder "
                         f"({result.builder.name!r}); use only its parameters and new ops")
    return sub.computation(result)


__all__ = ["XlaBuilder", "XlaOp", "Parameter", "Constant", "ConstantR0", "apply_op", "trace",
           "computation_closure", "check_size"]
