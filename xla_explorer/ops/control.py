"""Tuples, calls and control flow: Tuple, GetTupleElement, Call, Map, While, Conditional,
AfterAll, OptimizationBarrier, GetDimensionSize, SetDimensionSize; and what optimized HLO
adds (fusion, copy, bitcast)."""
import numpy as np

from .. import progress
from ..builder import apply_op
from ..errors import ExecutionError, ShapeError
from ..hlo.attrs import Attr
from ..shapes import Shape
from .arguments import Arg, describe
from . import registry


# -- Tuple ---------------------------------------------------------------------------------

def Tuple(*elements):
    """Wraps XLA's Tuple: a tuple of ``elements`` (any shapes, nested tuples included).

    ``Tuple(a, b).shape == (shape(a), shape(b))``; ``GetTupleElement(t, 1)`` gives ``b`` back.
    """
    if len(elements) == 1 and isinstance(elements[0], (list, tuple)):
        elements = tuple(elements[0])
    return apply_op("tuple", list(elements))


def _tuple_shape_rule(*shapes):
    return Shape.tuple(shapes)


def _tuple_reference(*values, shape):
    return tuple(values)


registry.register("tuple", "Tuple", "control", _tuple_shape_rule, _tuple_reference,
                  categories=("control",))
describe("tuple", example={"elements": ["f32[2,3]", "s32[]"]})


# -- GetTupleElement -----------------------------------------------------------------------

def GetTupleElement(tuple_data, index):
    """Wraps XLA's GetTupleElement: element ``index`` of a tuple (``0 <= index < len``)."""
    return apply_op("get-tuple-element", [tuple_data], {"index": index})


def _gte_shape_rule(tuple_shape, *, index):
    if not tuple_shape.is_tuple:
        raise ShapeError(f"GetTupleElement: the operand must be a tuple, got {tuple_shape}")
    n = len(tuple_shape.tuple_shapes)
    if not 0 <= index < n:
        raise ShapeError(f"GetTupleElement: index={index} is out of range for a tuple of {n} "
                         f"elements ({tuple_shape}); it must be in [0, {n})")
    return tuple_shape.tuple_shapes[index]


def _gte_reference(tuple_value, *, shape, index):
    return tuple_value[index]


registry.register("get-tuple-element", "GetTupleElement", "control", _gte_shape_rule, _gte_reference,
                  attrs=(Attr("index", "int"),), categories=("control",))
describe("get-tuple-element", example={"tuple_data": "(f32[2,3], s32[])", "index": 1})

__all__ = ["Tuple", "GetTupleElement"]


# -- Parameter and constant (the builder's Parameter/Constant record these) -----------------

def _parameter_shape_rule(*, parameter_number, shape):
    return shape


def _constant_shape_rule(*, literal, shape=None):
    if shape is not None:
        return shape
    return Shape.of(literal)


def _constant_reference(*, shape, literal):
    if literal is None:
        raise ExecutionError("constant: its value was elided in the HLO text ({...}); "
                             "print the module with large constants to run it")
    return literal


registry.register("parameter", "Parameter", "control", _parameter_shape_rule, None,
                  attrs_from_shape=lambda shape: {"shape": shape}, categories=("constant",))
describe("parameter", parameter_number={"kind": "int", "minimum": 0}, shape={"kind": "shape"},
         name={"kind": "str"}, example={"parameter_number": 0, "shape": "f32[2,3]", "name": "x"})
registry.register("constant", "Constant", "control", _constant_shape_rule, _constant_reference,
                  attrs_from_shape=lambda shape: {"shape": shape}, categories=("constant", "elementwise"),
                  denormals="bits")  # a literal is copied, never computed
describe("constant", value={"kind": "literal"}, element_type={"kind": "dtype"},
         example={"value": "[[1, 2], [3, 4]]"})


# -- Call ------------------------------------------------------------------------------------

def Call(computation, *args):
    """Wraps XLA's Call: ``computation(*args)``; the result has the computation's result shape."""
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        args = tuple(args[0])
    return apply_op("call", list(args), {"computation": computation})


def _check_signature(opname, what, comp, arg_shapes):
    params = comp.parameter_shapes
    if len(params) != len(arg_shapes):
        raise ShapeError(f"{opname}: {what} {comp.name} takes {len(params)} parameters "
                         f"({', '.join(map(str, params))}) but gets {len(arg_shapes)} arguments "
                         f"({', '.join(map(str, arg_shapes))})")
    for i, (p, a) in enumerate(zip(params, arg_shapes)):
        if not p.compatible(a):
            raise ShapeError(f"{opname}: parameter {i} of {what} {comp.name} is {p} but the argument is {a}")


def _call_shape_rule(*arg_shapes, computation):
    _check_signature("Call", "computation", computation, arg_shapes)
    return computation.result_shape


def _call_reference(*args, shape, computation):
    return computation(*args)


def _same_as_operands(kw, shapes, attrs, index=None):
    return list(shapes)


registry.register("call", "Call", "control", _call_shape_rule, _call_reference,
                  attrs=(Attr("computation", "computation", hlo="to_apply"),),
                  computation_params=_same_as_operands, categories=("control",))
describe("call", computation={"region": "function"}, example={"args": ["f32[2,3]", "f32[2,3]"], "computation": "Add"})


def _fusion_shape_rule(*arg_shapes, calls, kind="kLoop"):
    _check_signature("Fusion", "fused computation", calls, arg_shapes)
    return calls.result_shape


def _fusion_reference(*args, shape, calls, kind="kLoop"):
    return calls(*args)


# What XLA prints after optimization: a fusion runs its fused computation.
registry.register("fusion", "Fusion", "control", _fusion_shape_rule, _fusion_reference,
                  attrs=(Attr("kind", "str", default="kLoop", always_print=True),
                         Attr("calls", "computation")),
                  computation_params=_same_as_operands, categories=("control",))


# -- Map -------------------------------------------------------------------------------------

def Map(operands, computation, dimensions=None):
    """Wraps XLA's Map: ``computation`` (scalars -> scalar) applied at every index of the
    ``operands`` (all of one shape): ``result[i] = computation(op0[i], op1[i], ...)``."""
    if not isinstance(operands, (list, tuple)):
        operands = [operands]
    attrs = {"computation": computation}
    if dimensions is not None:
        attrs["dimensions"] = dimensions   # checked by the attribute schema (a list of integers)
    return apply_op("map", list(operands), attrs)


def _map_params(kw, shapes, attrs, index=None):
    return [Shape(s.element_type, ()) for s in shapes]


def _map_shape_rule(*shapes, computation, dimensions=None):
    if not shapes:
        raise ShapeError("Map: needs at least one operand")
    first = shapes[0]
    for i, s in enumerate(shapes[1:], 1):
        if s.dims != first.dims:
            raise ShapeError(f"Map: operand {i} has shape {s} but operand 0 has {first}; all operands "
                             "must have the same dimensions")
    if dimensions is not None and tuple(dimensions) != tuple(range(first.rank)):
        raise ShapeError(f"Map: dimensions={list(dimensions)} must be all dimensions in order "
                         f"({list(range(first.rank))}), as XLA requires")
    _check_signature("Map", "computation", computation, [Shape(s.element_type, ()) for s in shapes])
    out = computation.result_shape
    if not out.is_array or out.rank != 0:
        raise ShapeError(f"Map: the computation must return a scalar, it returns {out}")
    return Shape(out.element_type, first.dims)


def _map_reference(*operands, shape, computation, dimensions=None):
    if computation.is_elementwise:
        return computation(*operands)
    result = np.empty(shape.dims, shape.dtype)
    for index in np.ndindex(*shape.dims):
        result[index] = computation(*[op[index] for op in operands])
    return result


registry.register("map", "Map", "control", _map_shape_rule, _map_reference,
                  attrs=(Attr("dimensions", "ints", default=None), Attr("computation", "computation", hlo="to_apply")),
                  computation_params=_map_params, categories=("control",))
describe("map", computation={"region": "function"},
         example={"operands": ["f32[2,3]", "f32[2,3]"], "computation": "Max"})


# -- While -----------------------------------------------------------------------------------

def While(condition, body, init):
    """Wraps XLA's While: ``while condition(x): x = body(x)`` starting from ``init``.

    ``condition`` maps the loop state to ``pred[]``; ``body`` maps it to a new state of the
    same shape.  The result is the final state."""
    return apply_op("while", [init], {"condition": condition, "body": body})


def _while_shape_rule(init, *, condition, body):
    _check_signature("While", "condition", condition, [init])
    _check_signature("While", "body", body, [init])
    if condition.result_shape != Shape("pred", ()):
        raise ShapeError(f"While: the condition must return pred[], it returns {condition.result_shape}")
    if not body.result_shape.compatible(init):
        raise ShapeError(f"While: the body returns {body.result_shape} but the loop state (init) is {init}; "
                         "they must be the same")
    return init


def _while_reference(init, *, shape, condition, body):
    state, k = init, 0
    while bool(condition(state)):
        state = body(state)
        k += 1
        progress.beat(f"while: iteration {k}")  # a long loop shows it is alive, and stops on interrupt
    return state


registry.register("while", "While", "control", _while_shape_rule, _while_reference,
                  attrs=(Attr("condition", "computation"), Attr("body", "computation")),
                  computation_params=_same_as_operands, categories=("control",))
describe("while", condition={"region": "predicate"}, body={"region": "body"},
         example={"init": "f32[3]", "condition": "max(x) < 10", "body": "x + 1"})


# -- Conditional -----------------------------------------------------------------------------

def Conditional(*args):
    """Wraps XLA's Conditional, in its two forms:

    ``Conditional(pred, true_operand, true_computation, false_operand, false_computation)``
    runs one computation on its operand; ``Conditional(branch_index, branch_computations,
    branch_operands)`` runs ``branch_computations[branch_index]`` (an out-of-range index
    runs the last branch, as XLA does)."""
    if len(args) == 5:
        pred, t_op, t_comp, f_op, f_comp = args
        return apply_op("conditional", [pred, t_op, f_op],
                        {"true_computation": t_comp, "false_computation": f_comp})
    if len(args) == 3:
        index, comps, operands = args
        return apply_op("conditional", [index] + list(operands), {"branch_computations": list(comps)})
    raise ShapeError("Conditional: takes (pred, true_operand, true_computation, false_operand, "
                     f"false_computation) or (branch_index, branch_computations, branch_operands); got {len(args)} arguments")


def _conditional_params(kw, shapes, attrs, index=None):
    if kw == "true_computation":
        return [shapes[1]]
    if kw == "false_computation":
        return [shapes[2]]
    return [shapes[1 + index]]


def _branches(attrs):
    if attrs.get("branch_computations") is not None:
        return list(attrs["branch_computations"])
    return [attrs["true_computation"], attrs["false_computation"]]


def _conditional_shape_rule(selector, *operands, true_computation=None, false_computation=None,
                            branch_computations=None):
    attrs = dict(true_computation=true_computation, false_computation=false_computation,
                 branch_computations=branch_computations)
    branches = _branches(attrs)
    if selector.rank != 0 or selector.element_type not in ("pred", "s32"):
        raise ShapeError(f"Conditional: the selector must be pred[] or s32[], got {selector}")
    if branch_computations is None and selector.element_type != "pred":
        raise ShapeError(f"Conditional: the true/false form needs a pred[] predicate, got {selector}")
    if branch_computations is not None and selector.element_type != "s32":
        raise ShapeError(f"Conditional: the N-branch form needs an s32[] branch index, got {selector}")
    if len(branches) != len(operands):
        raise ShapeError(f"Conditional: {len(branches)} branch computations but {len(operands)} branch operands")
    if not branches:
        raise ShapeError("Conditional: needs at least one branch")
    for i, (comp, operand) in enumerate(zip(branches, operands)):
        _check_signature("Conditional", f"branch {i}", comp, [operand])
    out = branches[0].result_shape
    for i, comp in enumerate(branches[1:], 1):
        if not comp.result_shape.compatible(out):
            raise ShapeError(f"Conditional: branch {i} returns {comp.result_shape} but branch 0 returns {out}; "
                             "all branches must return the same shape")
    return out


def _conditional_reference(selector, *operands, shape, true_computation=None, false_computation=None,
                           branch_computations=None):
    if branch_computations is None:
        # pred form: operand 0 goes to the true branch
        return true_computation(operands[0]) if bool(selector) else false_computation(operands[1])
    index = int(selector)
    if not 0 <= index < len(branch_computations):
        index = len(branch_computations) - 1  # XLA: an out-of-range index runs the last branch
    return branch_computations[index](operands[index])


registry.register("conditional", "Conditional", "control", _conditional_shape_rule, _conditional_reference,
                  attrs=(Attr("true_computation", "computation", default=None),
                         Attr("false_computation", "computation", default=None),
                         Attr("branch_computations", "computations", default=None)),
                  computation_params=_conditional_params, categories=("control",))
describe("conditional", signature=(
    Arg("branch_index", "array"), Arg("branch_computations", "computations", region="function", of="branch_operands"),
    Arg("branch_operands", "arrays")),
    example={"branch_index": ("s32[]", 1), "branch_computations": ["Neg", "Abs"],
             "branch_operands": ["f32[2,3]", "f32[2,3]"]})


# -- Tokens and barriers ---------------------------------------------------------------------

def AfterAll(builder, tokens=()):
    """Wraps XLA's AfterAll: one token that comes after all ``tokens`` (orders side effects)."""
    return apply_op("after-all", list(tokens), {}, builder=builder)


def _after_all_shape_rule(*tokens):
    for i, t in enumerate(tokens):
        if not t.is_token:
            raise ShapeError(f"AfterAll: operand {i} must be a token, got {t}")
    return Shape.token()


def _after_all_reference(*tokens, shape):
    from ..executors.reference import Token
    return Token()


registry.register("after-all", "AfterAll", "control", _after_all_shape_rule, _after_all_reference,
                  categories=("control",))
describe("after-all", example={"tokens": ["token[]", "token[]"]})


def CreateToken(builder):
    """A fresh token (AfterAll of nothing)."""
    return AfterAll(builder, [])


def OptimizationBarrier(operand):
    """Wraps XLA's OptimizationBarrier: the identity, which no optimization moves ops across."""
    return apply_op("opt-barrier", [operand])


registry.register("opt-barrier", "OptimizationBarrier", "control", lambda s: s,
                  lambda v, shape: v, categories=("control",))


# -- Dynamic dimension sizes -----------------------------------------------------------------

def GetDimensionSize(operand, dimension):
    """Wraps XLA's GetDimensionSize: the (run-time) size of ``dimension`` as an s32[] scalar."""
    return apply_op("get-dimension-size", [operand], {"dimensions": (dimension,)})


def _dimension_arg(opname, operand, dimensions):
    if len(dimensions) != 1:
        raise ShapeError(f"{opname}: dimensions must name one dimension, got {list(dimensions)}")
    d = dimensions[0]
    if not 0 <= d < operand.rank:
        raise ShapeError(f"{opname}: dimension={d} is out of range for operand {operand} of rank {operand.rank}")
    return d


def _get_dimension_size_shape_rule(operand, *, dimensions):
    _dimension_arg("GetDimensionSize", operand, dimensions)
    return Shape("s32", ())


def _get_dimension_size_reference(operand, *, shape, dimensions):
    return np.int32(np.shape(operand)[dimensions[0]])


registry.register("get-dimension-size", "GetDimensionSize", "control", _get_dimension_size_shape_rule,
                  _get_dimension_size_reference, attrs=(Attr("dimensions", "ints"),), categories=("other",))
describe("get-dimension-size", dimension={"kind": "dim"}, example={"operand": "f32[2,3]", "dimension": 1})


def SetDimensionSize(operand, size, dimension):
    """Wraps XLA's SetDimensionSize: make ``dimension`` dynamic, with run-time size ``size``
    (an s32[] at most the static bound).  Here values are arrays of their run-time size,
    so the result is the operand's first ``size`` elements along ``dimension``."""
    return apply_op("set-dimension-size", [operand, size], {"dimensions": (dimension,)})


def _set_dimension_size_shape_rule(operand, size, *, dimensions):
    d = _dimension_arg("SetDimensionSize", operand, dimensions)
    if size.rank != 0 or size.element_type != "s32":
        raise ShapeError(f"SetDimensionSize: size must be an s32[] scalar, got {size}")
    dims, bounds = list(operand.dims), list(operand.bounds)
    bound = dims[d] if dims[d] is not None else bounds[d]
    dims[d], bounds[d] = None, bound
    return Shape(operand.element_type, dims, bounds)


def _set_dimension_size_reference(operand, size, *, shape, dimensions):
    d = dimensions[0]
    n = int(size)
    if not 0 <= n <= operand.shape[d]:
        raise ExecutionError(f"SetDimensionSize: size={n} is outside [0, {operand.shape[d]}] for dimension {d}")
    index = [slice(None)] * operand.ndim
    index[d] = slice(0, n)
    return operand[tuple(index)]


registry.register("set-dimension-size", "SetDimensionSize", "control", _set_dimension_size_shape_rule,
                  _set_dimension_size_reference, attrs=(Attr("dimensions", "ints"),), categories=("other",))
describe("set-dimension-size", dimension={"kind": "dim"},
         example={"operand": "f32[4]", "size": ("s32[]", 2), "dimension": 0})

__all__ += ["Call", "Map", "While", "Conditional", "AfterAll", "CreateToken", "OptimizationBarrier",
            "GetDimensionSize", "SetDimensionSize"]
