"""Symbolic execution: ``XlaBuilder`` records ops as HLO instructions, shape-checked at once.

This is the pipeline of tf2xla (spec/004): an op call does not compute anything, it
records an instruction whose shape the op's shape rule infers (raising ``ShapeError``
if the spec forbids the call); ``build`` closes the recording into an
``XlaComputation`` that executors run.  The same op functions called on NumPy arrays
run eagerly through the reference executor.
"""
import contextlib
import inspect
import itertools
import threading

import numpy as np

from . import dtypes
from .coerce import as_int, short
from .errors import ExecutionError, HloParseError, ShapeError
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

    # -- operator sugar: each operator records the spec op of the same meaning --------------
    # (Python scalars take the other operand's element type, as in the op functions.)
    def _bin(self, name, other, swap=False):
        from . import ops
        from .op_sugar import operand_like
        if not operand_like(other):
            return NotImplemented
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
    # XLA's remainder keeps the sign of the dividend (C's fmod), unlike Python's %
    def __mod__(self, o): return self._bin("Rem", o)
    def __rmod__(self, o): return self._bin("Rem", o, True)
    def __pow__(self, o): return self._bin("Pow", o)
    def __rpow__(self, o): return self._bin("Pow", o, True)
    def __matmul__(self, o): return self._matmul(o, False)
    def __rmatmul__(self, o): return self._matmul(o, True)
    def __and__(self, o): return self._bin("And", o)
    def __rand__(self, o): return self._bin("And", o, True)
    def __or__(self, o): return self._bin("Or", o)
    def __ror__(self, o): return self._bin("Or", o, True)
    def __xor__(self, o): return self._bin("Xor", o)
    def __rxor__(self, o): return self._bin("Xor", o, True)
    def __lshift__(self, o): return self._bin("ShiftLeft", o)
    def __rlshift__(self, o): return self._bin("ShiftLeft", o, True)
    def __rshift__(self, o): return self._bin(self._shift_right(), o)
    def __rrshift__(self, o): return self._bin(self._shift_right(), o, True)
    # comparisons give pred arrays; == and != too, as in NumPy and JAX (hashing stays by identity)
    def __lt__(self, o): return self._bin("Lt", o)
    def __le__(self, o): return self._bin("Le", o)
    def __gt__(self, o): return self._bin("Gt", o)
    def __ge__(self, o): return self._bin("Ge", o)
    def __eq__(self, o): return self._bin("Eq", o)
    def __ne__(self, o): return self._bin("Ne", o)

    def __neg__(self):
        from . import ops
        return ops.Neg(self)

    def __pos__(self):
        return self

    def __abs__(self):
        from . import ops
        return ops.Abs(self)

    def __invert__(self):
        from . import ops
        return ops.Not(self)

    def _shift_right(self):
        # Python's >> on integers keeps the sign: arithmetic for signed types, logical for unsigned
        return "ShiftRightLogical" if str(self.shape.element_type).startswith("u") else "ShiftRightArithmetic"

    def _matmul(self, other, swap):
        """``a @ b`` as NumPy's matmul: Dot for vectors and matrices, DotGeneral with the
        leading dimensions as batch dimensions from rank 3 on (ranks must then agree)."""
        from . import ops
        from .op_sugar import operand_like
        if not operand_like(other):
            return NotImplemented
        lhs, rhs = (other, self) if swap else (self, other)
        ranks = [x.shape.rank if isinstance(x, XlaOp) else np.ndim(x) for x in (lhs, rhs)]
        if min(ranks) == 0:
            raise ShapeError(f"matmul (@): operands must have rank >= 1, got ranks {ranks}; use * to scale")
        if max(ranks) <= 2:
            return ops.Dot(lhs, rhs)
        if ranks[0] != ranks[1]:
            raise ShapeError(f"matmul (@): ranks {ranks[0]} and {ranks[1]} differ; above rank 2 both operands "
                             "need the same batch dimensions (broadcast one first, or call DotGeneral)")
        batch = list(range(ranks[0] - 2))
        return ops.DotGeneral(lhs, rhs, lhs_contracting_dimensions=[ranks[0] - 1],
                              rhs_contracting_dimensions=[ranks[1] - 2],
                              lhs_batch_dimensions=batch, rhs_batch_dimensions=batch)

    @property
    def T(self):
        """The transpose: dimensions in reverse order."""
        from . import ops
        return ops.Transpose(self, list(range(self.shape.rank))[::-1])

    # -- indexing: x[1], x[:, 2:5], x[::-1], x[..., None], x[i] for a traced scalar i ---------
    def __getitem__(self, index_):
        """Basic NumPy indexing, recorded as Slice (steps > 0), Rev (negative steps), Reshape
        (integer indices drop a dimension, None adds one) and, for a traced integer scalar,
        DynamicSlice (whose start XLA clamps into bounds, unlike NumPy)."""
        from .op_sugar import index
        return index(self, index_)

    def __iter__(self):
        # a Python loop over a static first dimension unrolls: one slice per row, as jax does
        dims = self.shape.dims if self.shape.is_array else ()
        if not dims:
            raise TypeError(f"iterating over the scalar {self!r}: a scalar has nothing to iterate over.")
        if dims[0] is None:
            raise TypeError(f"iterating over {self!r}: dimension 0 is dynamic, so a Python loop cannot know "
                            "how often to run; loop with While instead.")
        return (self[i] for i in range(dims[0]))

    def __len__(self):
        dims = self.shape.dims if self.shape.is_array else ()
        if not dims:
            raise TypeError(f"len() of the scalar {self!r}")
        if dims[0] is None:
            raise TypeError(f"len() of {self!r}: dimension 0 is dynamic; GetDimensionSize gives it at run time")
        return dims[0]

    # -- Python control flow on a traced value: explain why it cannot work --------------------
    def __bool__(self):
        from .op_sugar import NO_VALUE, USE_CONTROL_OPS
        raise TypeError(f"{self!r} used as a Python bool (in `if`, `while`, `and`, `or`, `not`): {NO_VALUE} "
                        f"{USE_CONTROL_OPS}")

    def _no_number(self, kind):
        from .op_sugar import NO_VALUE, USE_CONTROL_OPS
        raise TypeError(f"{kind}({self!r}): {NO_VALUE} {USE_CONTROL_OPS}")

    def __int__(self): return self._no_number("int")
    def __float__(self): return self._no_number("float")
    def __complex__(self): return self._no_number("complex")
    def __index__(self): return self._no_number("operator.index")

    def __array__(self, *args, **kwargs):
        from .op_sugar import NO_VALUE
        raise TypeError(f"np.asarray({self!r}): {NO_VALUE} Build the computation and run it "
                        "(b.build(op).run(...)) to get its value.")

    # NumPy defers to our reflected operators (np.float32(2) * op records a multiply)
    __array_ufunc__ = None

    __hash__ = object.__hash__


class XlaBuilder:
    """Records instructions.  ``build(root)`` returns the ``XlaComputation``."""

    def __init__(self, name="computation"):
        if not isinstance(name, str):
            raise ShapeError(f"XlaBuilder: name must be a string, got {short(name)} ({type(name).__name__})")
        self.name = name
        self.instructions = []
        self.parameters = {}

    def add(self, opcode, shape, operands=(), attrs=None, name=None, extra=None):
        inst = Instruction(name or _fresh(opcode), opcode, shape, [o.inst for o in operands], attrs, extra)
        self.instructions.append(inst)
        _journal_add(self, inst)
        return XlaOp(self, inst)

    def parameter(self, parameter_number, shape, name=None):
        parameter_number = as_int("Parameter", "parameter_number", parameter_number, minimum=0,
                                  maximum=(1 << 63) - 1)
        shape = _parameter_shape(shape)
        if name is not None and not isinstance(name, str):
            raise ShapeError(f"Parameter: name must be a string, got {short(name)} ({type(name).__name__})")
        if parameter_number in self.parameters:
            raise ShapeError(f"Parameter: parameter number {parameter_number} is already used in "
                             f"builder {self.name!r} (by {self.parameters[parameter_number].name})")
        with transaction():
            op = self.add("parameter", shape, (), {"parameter_number": parameter_number},
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


# -- transactions: an op that raises leaves its builder exactly as it was ---------------------

_state = threading.local()


def _journal_add(builder, inst):
    journal = getattr(_state, "journal", None)
    if journal is not None:
        journal.append((builder, inst))


@contextlib.contextmanager
def transaction():
    """Everything recorded inside is undone if the block raises (constants made for NumPy
    operands, parameters, the first ops of a composite op such as AllToAll).  Nested
    transactions join the outermost one."""
    if getattr(_state, "journal", None) is not None:
        yield
        return
    _state.journal = journal = []
    try:
        yield
    except BaseException:
        for builder, inst in reversed(journal):
            if builder.instructions and builder.instructions[-1] is inst:
                builder.instructions.pop()
            elif inst in builder.instructions:
                builder.instructions.remove(inst)
            if inst.opcode == "parameter":
                number = inst.attrs.get("parameter_number")
                if builder.parameters.get(number) is inst:
                    del builder.parameters[number]
        raise
    finally:
        _state.journal = None


def _parameter_shape(shape):
    from .shapes import as_shape
    if isinstance(shape, str):
        return Shape.parse(shape)
    if not isinstance(shape, Shape):
        try:
            return as_shape(shape)
        except TypeError:
            raise ShapeError(f"Parameter: shape must be a Shape or shape text such as 'f32[2,3]', got "
                             f"{short(shape)} ({type(shape).__name__})") from None
    return shape


def _unique_param_name(name, number):
    # a given name is kept as it is (XlaComputation makes names unique per module: hlo.names)
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
    """Wraps XLA's Parameter: input ``parameter_number`` (an integer >= 0) of the
    computation, of ``shape`` (a Shape or shape text)."""
    _check_builder("Parameter", builder)
    return builder.parameter(parameter_number, shape, name)


def _check_builder(op, builder):
    if not isinstance(builder, XlaBuilder):
        raise ShapeError(f"{op}: builder must be an XlaBuilder, got {short(builder)} ({type(builder).__name__})")


def _not_a_value(value, where):
    return ShapeError(f"{where}: {short(value)} ({type(value).__name__}) is not an array value; expected "
                      f"an XlaOp, a NumPy array or a Python number")


def literal_array(value, element_type=None, where="Constant"):
    """A NumPy array for a constant: Python scalars become s32/f32/pred/c64 as in XlaBuilder.
    Values that are not numbers (None, text, objects) and Python integers that do not fit
    s32 are refused (a ShapeError naming ``where``), never stored as something else."""
    if isinstance(value, XlaOp):
        raise ShapeError(f"{where}: {value!r} is an op being built, not a value; use it as an operand")
    if value is None or isinstance(value, (str, bytes, dict, set)) or callable(value):
        raise _not_a_value(value, where)
    if element_type is not None:
        try:
            element_type = element_type if isinstance(element_type, str) else dtypes.from_numpy(element_type)
            dt = dtypes.to_numpy(dtypes.check_type(element_type))
        except (TypeError, ValueError):
            raise ShapeError(f"{where}: element_type={element_type!r} is not an XLA array element type") from None
        src = _numeric_array(value, where)
        _check_exact(src, dt, element_type, where)
        return src.astype(dt)
    if isinstance(value, np.ndarray) or isinstance(value, np.generic):
        arr = np.asarray(value)
        try:
            dtypes.from_numpy(arr.dtype)
        except ValueError:
            raise ShapeError(f"{where}: a NumPy array of dtype {arr.dtype} has no XLA element type") from None
        return arr
    arr = _numeric_array(value, where)
    if arr.dtype == np.float64:
        arr = arr.astype(np.float32)
    elif arr.dtype == np.int64:
        _check_exact(arr, np.dtype(np.int32), "s32", where)
        arr = arr.astype(np.int32)
    elif arr.dtype == np.complex128:
        arr = arr.astype(np.complex64)
    return arr


def _numeric_array(value, where):
    try:
        arr = np.asarray(value)
    except (ValueError, TypeError, OverflowError) as e:
        raise ShapeError(f"{where}: {short(value)} is not an array of numbers ({e})") from None
    if arr.dtype.kind not in "biufc" and arr.dtype not in dtypes._BY_DTYPE:
        raise _not_a_value(value, where)
    return arr


def _check_exact(src, dt, element_type, where):
    """Integers must fit the target integer type (no silent wrap-around or truncation)."""
    if dt.kind in "iub" and src.dtype.kind in "fc" and src.size:
        if np.iscomplexobj(src) or not np.all(np.isfinite(src)) or np.any(src != np.trunc(src)):
            raise ShapeError(f"{where}: {short(src.tolist() if src.size < 9 else src)} is not exactly "
                             f"representable as {element_type} (no rounding: convert it first)")
        lo, hi = (0, 1) if dt.kind == "b" else (int(np.iinfo(dt).min), int(np.iinfo(dt).max))
        if float(src.real.min()) < lo or float(src.real.max()) > hi:
            raise ShapeError(f"{where}: {short(src.tolist() if src.size < 9 else src)} does not fit {element_type}")
        return
    if dt.kind in "iu" and src.dtype.kind in "iu" and src.size:
        info = np.iinfo(dt)
        lo, hi = int(src.min()), int(src.max())
        if lo < info.min or hi > info.max:
            raise ShapeError(f"{where}: {lo if lo < info.min else hi} does not fit {element_type} "
                             f"([{info.min}, {info.max}])")


def Constant(builder, value, element_type=None):
    """Wraps XLA's ConstantLiteral: an array known when building (scalars: f32/s32/pred)."""
    _check_builder("Constant", builder)
    arr = literal_array(value, element_type)
    from .shapes import check_size
    check_size(Shape(dtypes.from_numpy(arr.dtype), arr.shape), "Constant")
    return builder.add("constant", Shape(dtypes.from_numpy(arr.dtype), arr.shape), (), {"literal": arr})


def ConstantR0(builder, value, element_type=None):
    return Constant(builder, value, element_type)


# ---------------------------------------------------------------------------------------
# Applying an op: the one function every op's public wrapper calls

def _builder_of(values, op="op"):
    builder, first = None, None
    for k, v in enumerate(values):
        if isinstance(v, XlaOp):
            if builder is not None and v.builder is not builder:
                raise ShapeError(f"{op}: operand {k} ({v.name}) belongs to builder {v.builder.name!r} but "
                                 f"operand {first} to builder {builder.name!r}; ops of two builders cannot "
                                 f"be combined")
            if builder is None:
                builder, first = v.builder, k
    return builder


def apply_op(opcode, operands, attrs=None, *, name=None, builder=None):
    """Record (builder mode) or evaluate (eager mode) op ``opcode`` on ``operands``.

    Operands are XlaOps of one builder (NumPy values among them become constants), or
    all NumPy values (eager).  Attributes are checked against the op's schema first
    (``hlo.attrs.coerce_attrs``).  Computation attributes may be Python callables: they are
    traced with the parameter shapes the op's ``computation_params`` gives.  If anything
    raises, the builder is left as it was.
    """
    from .hlo.attrs import coerce_attrs
    from .ops import registry  # here, not at the top: the op families import this module
    op = registry.get(opcode)
    if not isinstance(operands, (list, tuple)):
        raise ShapeError(f"{op.name}: operands must be a list, got {short(operands)}")
    with transaction():
        attrs = coerce_attrs(op, attrs or {})
        found = _builder_of(operands, op.name)
        if builder is not None:
            _check_builder(op.name, builder)
        if builder is not None and found is not None and found is not builder:
            raise ShapeError(f"{op.name}: the operands belong to builder {found.name!r}, not {builder.name!r}")
        builder = builder or found
        if builder is not None:
            operands = [o if isinstance(o, XlaOp) else Constant(builder, _operand_value(op, k, o))
                        for k, o in enumerate(operands)]
            shapes = [o.shape for o in operands]
        else:
            operands = [_eager_value(_operand_value(op, k, o)) for k, o in enumerate(operands)]
            shapes = [_value_shape(o) for o in operands]
        attrs = _trace_computations(op, shapes, attrs, builder)
        shape = infer_shape(op, shapes, attrs)
        if builder is not None:
            return builder.add(opcode, shape, operands, attrs, name=name)
    from .executors.reference import eager
    return eager(op, operands, shape, attrs)


def _value_shape(v):
    """The shape of an eager value: an array, a token, or a tuple of them."""
    from .executors.reference import Token
    if isinstance(v, tuple):
        return Shape.tuple([_value_shape(x) for x in v])
    if isinstance(v, Token):
        return Shape.token()
    return Shape.of(v)


def _operand_value(op, k, v):
    """An operand given as a value: a number, an array, a tuple of values or a token."""
    if isinstance(v, tuple):
        return tuple(_operand_value(op, k, x) for x in v)
    from .executors.reference import Token
    if isinstance(v, Token):
        return v
    return literal_array(v, where=f"{op.name}: operand {k}")


def infer_shape(op, shapes, attrs):
    """Run the op's shape rule; malformed arguments become ShapeErrors naming the op."""
    try:
        shape = op.shape_rule(*shapes, **attrs)
    except ShapeError as e:
        if op.name in str(e) or op.opcode in str(e).lower():
            raise
        raise type(e)(f"{op.name}: {e}") from None   # a rule deep inside (a Shape) named nothing
    except (TypeError, IndexError, KeyError, ValueError, AttributeError, OverflowError, ZeroDivisionError,
            RecursionError) as e:
        raise ShapeError(f"{op.name}: invalid arguments for {op.name} with operand shapes "
                         f"{[str(s) for s in shapes]}: {type(e).__name__}: {e}") from e
    if not isinstance(shape, Shape):
        raise ShapeError(f"{op.name}: the shape rule gave {short(shape)}, not a Shape")
    return shape


def _eager_value(v):
    if isinstance(v, tuple):
        return tuple(_eager_value(x) for x in v)
    from .executors.reference import Token
    if isinstance(v, Token):
        return v
    return literal_array(v)


def _trace_computations(op, shapes, attrs, builder):
    """Callables (and XlaComputations) given for computation attributes -> HloComputations."""
    out = dict(attrs)
    for a in op.attrs:
        kind = getattr(a, "kind", None)
        if kind not in ("computation", "computations") or attrs.get(a.kw) is None:
            continue
        v = attrs[a.kw]
        if all(isinstance(c, HloComputation) for c in (v if kind == "computations" else [v])):
            continue
        if op.computation_params is None:
            raise ShapeError(f"{op.name}: {a.kw} must be an XlaComputation here (a Python callable cannot "
                             f"be traced for this op)")
        if kind == "computations":
            out[a.kw] = [_as_computation(op, a.kw, c, shapes, attrs, i) for i, c in enumerate(v)]
        else:
            out[a.kw] = _as_computation(op, a.kw, v, shapes, attrs, None)
    return out


def _as_computation(op, kw, fn, shapes, attrs, index):
    from .computation import XlaComputation
    if isinstance(fn, XlaComputation):
        return fn.entry
    if isinstance(fn, HloComputation):
        return fn
    params = op.computation_params(kw, shapes, attrs) if index is None else \
        op.computation_params(kw, shapes, attrs, index)
    where = f"{op.name}: {kw}" + ("" if index is None else f"[{index}]")
    return trace(fn, params, name=f"{op.name.lower()}_{kw}", where=where)


def _signature_text(param_shapes):
    return "(" + ", ".join(str(s) for s in param_shapes) + ")"


def _check_arity(fn, param_shapes, where):
    """A callable that cannot take one argument per parameter is refused before it runs."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # builtins without a signature: calling them says what is wrong
    try:
        sig.bind(*param_shapes)
    except TypeError:
        n = len(param_shapes)
        raise ShapeError(f"{where}: the computation must take {n} parameter{'s' * (n != 1)} "
                         f"{_signature_text(param_shapes)}, but the callable's signature is {sig}") from None


def trace(fn, param_shapes, name="region", where=None):
    """Trace a Python callable on parameters of the given shapes into an HloComputation.

    ``where`` names the op and attribute in errors: a callable of the wrong arity, one
    that raises, or one that returns something else than ops or numbers is a ShapeError
    that says which signature was expected."""
    where = where or name
    param_shapes = list(param_shapes)
    if not callable(fn):
        raise ShapeError(f"{where}: expected a callable or an XlaComputation, got {short(fn)}")
    _check_arity(fn, param_shapes, where)
    sub = XlaBuilder(_fresh(name))
    params = [Parameter(sub, i, s, f"p{i}") for i, s in enumerate(param_shapes)]
    try:
        result = fn(*params)
    except (ShapeError, HloParseError, ExecutionError, NotImplementedError) as e:
        if where.split(":")[0] in str(e):
            raise
        raise type(e)(f"{where}: while tracing the computation {_signature_text(param_shapes)}: {e}") from e
    except Exception as e:  # noqa: BLE001 - any error of user code becomes one naming the op
        raise ShapeError(f"{where}: the callable raised {type(e).__name__}: {e} when traced with "
                         f"parameters {_signature_text(param_shapes)}") from e
    if isinstance(result, (tuple, list)):
        from . import ops
        result = ops.Tuple(*[r if isinstance(r, XlaOp) else _traced_constant(sub, r, where, param_shapes)
                             for r in result])
    elif not isinstance(result, XlaOp):
        result = _traced_constant(sub, result, where, param_shapes)
    if result.builder is not sub:
        raise ShapeError(f"{where}: the traced function returned an op of another builder "
                         f"({result.builder.name!r}); use only its parameters and new ops")
    return sub.computation(result)


def _traced_constant(sub, value, where, param_shapes):
    try:
        return Constant(sub, value)
    except ShapeError:
        raise ShapeError(f"{where}: the computation {_signature_text(param_shapes)} returned {short(value)} "
                         f"({type(value).__name__}); it must return an op (or a tuple of ops) built from "
                         f"its parameters") from None


# ---------------------------------------------------------------------------------------
# The public op functions: one wrapper around each (applied in ``ops/__init__``)

#: argument names that hold operands (arrays, XlaOps) in the public op functions
_OPERAND_ARGS = frozenset({
    "a", "b", "lhs", "rhs", "operand", "operands", "pred", "on_true", "on_false", "min", "max", "init",
    "init_value", "init_values", "initial_state", "elements", "args", "mu", "sigma", "scale", "offset",
    "mean", "variance", "grad_output", "scatter_indices", "updates", "update", "source", "padding_value",
    "tuple_data", "token", "tokens", "context", "size", "dim_sizes", "inputs", "inits",
})
_PROJECT_ERRORS = (ShapeError, HloParseError, ExecutionError, NotImplementedError)
_BARE_ERRORS = (TypeError, ValueError, IndexError, KeyError, AttributeError, OverflowError, ZeroDivisionError)


class CallError(ShapeError, TypeError):
    """A call that does not fit the op function's signature (a ShapeError naming the op; a
    TypeError too, as Python raises for a bad call)."""


def public_op(fn):
    """``fn`` (a public op function such as ``Gather``) made safe to call with anything:

    - a call that does not fit its signature, an operand that is None, text or an op of
      another builder is a ShapeError naming the op and the argument;
    - it is a transaction: if it raises, every builder is left exactly as it was;
    - an error that escapes it is a project error whose message starts with the op's name
      (a bare TypeError/ValueError/... from deep inside becomes a ShapeError)."""
    import functools
    name = fn.__name__
    sig = inspect.signature(fn)
    operand_params = [p for p in sig.parameters.values() if p.name in _OPERAND_ARGS]
    builder_param = sig.parameters.get("builder")

    @functools.wraps(fn)
    def op_function(*args, **kwargs):
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as e:
            raise CallError(f"{name}: {e}; call it as {name}{sig}") from None
        if builder_param is not None and bound.arguments.get("builder") is not None:
            _check_builder(name, bound.arguments["builder"])  # None: eager (Iota(None, ...))
        _check_operand_args(name, bound, operand_params)
        try:
            with transaction():
                return fn(*args, **kwargs)
        except _PROJECT_ERRORS as e:
            if isinstance(e, HloParseError) or str(e).startswith(name) or f"{name}:" in str(e):
                raise
            raise _with_prefix(e, name) from e
        except _BARE_ERRORS as e:
            raise ShapeError(f"{name}: {type(e).__name__}: {e}") from e

    op_function.__wrapped_op__ = fn
    return op_function


def _with_prefix(e, name):
    try:
        return type(e)(f"{name}: {e}")
    except Exception:  # noqa: BLE001 - an error class with another constructor
        return ShapeError(f"{name}: {type(e).__name__}: {e}")


def _check_operand_args(name, bound, operand_params):
    builder, first = None, None
    for p in operand_params:
        if p.name not in bound.arguments:
            continue
        value = bound.arguments[p.name]
        many = p.kind == p.VAR_POSITIONAL or (isinstance(value, list) and p.name.endswith("s"))
        items = list(value) if many and isinstance(value, (list, tuple)) else [value]
        for k, v in enumerate(items):
            label = f"{p.name}[{k}]" if many else p.name
            if v is None and not (p.default is None and not many):
                raise ShapeError(f"{name}: {label} is None; expected an XlaOp, a NumPy array or a number")
            if isinstance(v, (str, bytes)):
                raise ShapeError(f"{name}: {label} is text ({short(v)}); expected an XlaOp, a NumPy array "
                                 f"or a number")
            if isinstance(v, XlaOp):
                if builder is not None and v.builder is not builder:
                    raise ShapeError(f"{name}: {label} ({v.name}) belongs to builder {v.builder.name!r}, but "
                                     f"{first} to builder {builder.name!r}; ops of two builders cannot be "
                                     f"combined")
                if builder is None:
                    builder, first = v.builder, label


__all__ = ["XlaBuilder", "XlaOp", "Parameter", "Constant", "ConstantR0", "apply_op", "trace", "public_op",
           "transaction",
           "computation_closure", "check_size"]
