"""Tuples, calls and control flow: Tuple, GetTupleElement, Call, Map, While, Conditional,
AfterAll, OptimizationBarrier, GetDimensionSize, SetDimensionSize; and what optimized HLO
adds (fusion, copy, bitcast)."""
from ..builder import apply_op
from ..errors import ShapeError
from ..hlo.attrs import Attr
from ..shapes import Shape
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

__all__ = ["Tuple", "GetTupleElement"]
