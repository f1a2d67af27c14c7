"""Shape ops: Broadcast, BroadcastInDim, Reshape, Collapse, Transpose, Rev, Concatenate,
Iota; and what HLO text adds: ``copy``, ``bitcast`` (optimized HLO), ``dynamic-reshape``.

These ops move data without computing on it.  Each reference follows the spec's formula
for ``result[result_index]``; each data-movement op also has an index map (see
``index_map.py``) saying which operand element every result element is a copy of.
Values are logical arrays in row-major order: layouts (``{1,0}``) never change a result.

References: XLA's Operation Semantics (spec/operation_semantics_2018.md, spec/001) and,
for the rule labels (``transpose_c2``), the StableHLO specification of the same ops.
"""
import numpy as np

from .. import dtypes
from ..builder import XlaOp, apply_op, literal_array
from ..coerce import as_bool, as_int, as_int_list, as_size_list, is_int
from ..errors import ExecutionError, HloParseError, ShapeError
from ..hlo.attrs import Attr, parse_ints
from ..shapes import Shape, as_shape
from .arguments import describe
from . import registry
from .index_map import Access, Candidates, IndexMap, is_unknown


# -- helpers shared with slicing.py ----------------------------------------------------------

# the one set of rules for attribute values (xla_explorer.coerce), under the names used here
_is_int = is_int
int_list = as_int_list
int_arg = as_int
size_list = as_size_list


def check_array(op, arg, shape):
    if not shape.is_array:
        raise ShapeError(f"{op}: {arg} must be an array, got {shape}")


def shape_of(value):
    """The shape of an XlaOp, or of a value given eagerly (NumPy array, Python scalar)."""
    if isinstance(value, XlaOp):
        return value.shape
    return Shape.of(literal_array(value))


def _product(dims):
    n = 1
    for d in dims:
        n *= d
    return n


def linear_index(index, dims):
    """Row-major position of ``index`` in an array of ``dims``."""
    linear = 0
    for i, d in zip(index, dims):
        linear = linear * d + i
    return linear


def delinearize(linear, dims):
    """The index at row-major position ``linear`` of an array of ``dims``."""
    index = []
    for d in reversed(dims):
        linear, i = divmod(linear, d)
        index.append(i)
    return tuple(reversed(index))


def _index_map(opcode, shape, operands, access, kind="copy"):
    return IndexMap(opcode, shape.dims, access, operand_shapes=tuple(Shape.of(v) for v in operands),
                    result_shape=shape, kind=kind)


def _fmt(dims):
    return "[" + ",".join("?" if d is None else str(d) for d in dims) + "]"


# -- Broadcast / BroadcastInDim (HLO `broadcast`) ------------------------------------------------

def BroadcastInDim(operand, out_dim_size, broadcast_dimensions):
    """Wraps XLA's BroadcastInDim: ``operand`` copied into an array of sizes ``out_dim_size``.

    Operand dimension ``d`` becomes result dimension ``broadcast_dimensions[d]``; it must have
    size 1 (then it is repeated) or the size of that result dimension.  The result dimensions
    no operand dimension maps to repeat the operand::

        operand_index[d] = 0 if dim(operand, d) == 1 else result_index[broadcast_dimensions[d]]
        result[result_index] = operand[operand_index]

    >>> BroadcastInDim(np.array([1, 2], np.int32), out_dim_size=[3, 2], broadcast_dimensions=[1])
    array([[1, 2], [1, 2], [1, 2]], dtype=int32)
    """
    out_dim_size = size_list("BroadcastInDim", "out_dim_size", out_dim_size)
    broadcast_dimensions = int_list("BroadcastInDim", "broadcast_dimensions", broadcast_dimensions)
    return apply_op("broadcast", [operand],
                    {"out_dim_size": out_dim_size, "broadcast_dimensions": broadcast_dimensions})


def Broadcast(operand, broadcast_sizes):
    """Wraps XLA's Broadcast: new dimensions of sizes ``broadcast_sizes`` added on the left.

    With ``broadcast_sizes = {a0, ..., aN}`` and operand dimensions ``{b0, ..., bM}`` the
    result has dimensions ``{a0, ..., aN, b0, ..., bM}`` and
    ``result[i0, ..., iN, j0, ..., jM] = operand[j0, ..., jM]``.  It records the same HLO
    ``broadcast`` as BroadcastInDim.

    >>> Broadcast(np.float32(2.0), broadcast_sizes=[2, 3])   # f32[2,3], all 2.0
    """
    broadcast_sizes = size_list("Broadcast", "broadcast_sizes", broadcast_sizes)
    if any(s is None for s in broadcast_sizes):
        raise ShapeError(f"Broadcast: broadcast_sizes must be static sizes, got {list(broadcast_sizes)}")
    operand_shape = shape_of(operand)
    check_array("Broadcast", "operand", operand_shape)
    n = len(broadcast_sizes)
    return apply_op("broadcast", [operand],
                    {"out_dim_size": broadcast_sizes + operand_shape.dims,
                     "broadcast_dimensions": tuple(range(n, n + operand_shape.rank))})


def _broadcast_shape_rule(operand, *, out_dim_size, broadcast_dimensions):
    op = "BroadcastInDim"
    check_array(op, "operand", operand)
    out_dim_size = size_list(op, "out_dim_size", out_dim_size)
    broadcast_dimensions = int_list(op, "broadcast_dimensions", broadcast_dimensions)
    # broadcast_in_dim_c2: one result dimension for each operand dimension
    if len(broadcast_dimensions) != operand.rank:
        raise ShapeError(f"{op}: broadcast_dimensions={list(broadcast_dimensions)} has "
                         f"{len(broadcast_dimensions)} entries but the operand {operand} has rank "
                         f"{operand.rank}; give one result dimension per operand dimension")
    for i, d in enumerate(broadcast_dimensions):
        # broadcast_in_dim_c3: 0 <= broadcast_dimensions < rank(result)
        if not 0 <= d < len(out_dim_size):
            raise ShapeError(f"{op}: broadcast_dimensions[{i}]={d} is out of range for a result of rank "
                             f"{len(out_dim_size)} (out_dim_size={_fmt(out_dim_size)})")
        # XLA: strictly increasing (which implies broadcast_in_dim_c4, is_unique)
        if i > 0 and broadcast_dimensions[i - 1] >= d:
            raise ShapeError(f"{op}: broadcast_dimensions={list(broadcast_dimensions)} must be strictly "
                             f"increasing: broadcast_dimensions[{i}]={d} comes after "
                             f"{broadcast_dimensions[i - 1]} (use Transpose to reorder dimensions)")
        # broadcast_in_dim_c5: dim(operand, i) is 1 or the size of the result dimension
        size, out = operand.dims[i], out_dim_size[d]
        if size is not None and out is not None and size != 1 and size != out:
            raise ShapeError(f"{op}: operand dimension {i} has size {size} ({operand}), which is neither "
                             f"1 nor out_dim_size[{d}]={out} (broadcast_dimensions[{i}]={d})")
    return Shape(operand.element_type, out_dim_size)


def _broadcast_reference(operand, *, shape, out_dim_size, broadcast_dimensions):
    # Give the operand the result's rank: operand dimension d sits at broadcast_dimensions[d],
    # every other result dimension has size 1.  Repeating the size-1 dimensions is then
    # operand_index[d] = 0 if dim(operand, d) == 1 else result_index[broadcast_dimensions[d]].
    expanded_sizes = [1] * shape.rank
    for d, result_dim in enumerate(broadcast_dimensions):
        expanded_sizes[result_dim] = operand.shape[d]
    return np.broadcast_to(operand.reshape(expanded_sizes), shape.dims).copy()


def _broadcast_index_map(operand, *, shape, out_dim_size, broadcast_dimensions):
    def access(result_index):
        operand_index = tuple(0 if operand.shape[d] == 1 else result_index[broadcast_dimensions[d]]
                              for d in range(operand.ndim))
        return Access(result_index, reads=((0, operand_index),),
                      detail={"operand_index": operand_index,
                              "broadcast_dimensions": tuple(broadcast_dimensions)})
    return _index_map("broadcast", shape, [operand], access)


registry.register(
    "broadcast", "BroadcastInDim", "shape", _broadcast_shape_rule, _broadcast_reference,
    attrs=(Attr("broadcast_dimensions", "ints", hlo="dimensions"),),
    index_map=_broadcast_index_map,
    # HLO carries the result sizes only in the result shape
    attrs_from_shape=lambda shape: {"out_dim_size": tuple(shape.dims)},
    categories=("data_movement",))
describe("broadcast", out_dim_size={"kind": "dims"},
         example={"operand": "f32[3]", "out_dim_size": [2, 3], "broadcast_dimensions": [1]})


# -- Reshape / Collapse (HLO `reshape`) ----------------------------------------------------------

def Reshape(operand, dimensions=None, new_sizes=None):
    """Wraps XLA's Reshape: the operand's elements, in row-major order, refilled into an array
    of sizes ``new_sizes`` (the products of the sizes must be equal).

    ``Reshape(operand, new_sizes)`` or ``Reshape(operand, dimensions, new_sizes)``: the older
    form first transposes the operand so that ``dimensions`` (a permutation) are in order
    from most major to most minor; it records a ``transpose`` and then a ``reshape``::

        linear = row-major position of result_index in new_sizes
        result[result_index] = operand[the index at row-major position `linear` of the operand]

    >>> Reshape(np.arange(6, dtype=np.int32), new_sizes=[2, 3])   # [[0, 1, 2], [3, 4, 5]]
    """
    if new_sizes is None:  # Reshape(operand, new_sizes)
        dimensions, new_sizes = None, dimensions
    if new_sizes is None:
        raise ShapeError("Reshape: new_sizes is required (Reshape(operand, new_sizes))")
    new_sizes = size_list("Reshape", "new_sizes", new_sizes)
    if dimensions is not None:
        dimensions = int_list("Reshape", "dimensions", dimensions)
        operand_shape = shape_of(operand)
        if sorted(dimensions) != list(range(operand_shape.rank)):
            raise ShapeError(f"Reshape: dimensions={list(dimensions)} must be a permutation of the "
                             f"operand's dimensions {list(range(operand_shape.rank))} ({operand_shape})")
        if list(dimensions) != list(range(operand_shape.rank)):
            operand = Transpose(operand, dimensions)
    return apply_op("reshape", [operand], {"new_sizes": new_sizes})


def Collapse(operand, dimensions):
    """Wraps XLA's Collapse: the consecutive, in-order ``dimensions`` merged into one dimension
    of their product's size, at the place of the first; records a ``reshape``.

    >>> Collapse(np.zeros((4, 2, 3), np.float32), dimensions=[1, 2]).shape   # (4, 6)
    """
    dimensions = int_list("Collapse", "dimensions", dimensions)
    operand_shape = shape_of(operand)
    check_array("Collapse", "operand", operand_shape)
    if not dimensions:
        raise ShapeError("Collapse: dimensions must name at least one dimension")
    # in-order, consecutive subset of the operand's dimensions
    expected = list(range(dimensions[0], dimensions[0] + len(dimensions)))
    if list(dimensions) != expected or not 0 <= dimensions[0] or dimensions[-1] >= operand_shape.rank:
        raise ShapeError(f"Collapse: dimensions={list(dimensions)} must be an in-order, consecutive subset "
                         f"of the operand's dimensions {list(range(operand_shape.rank))} ({operand_shape}), "
                         f"e.g. [0, 1] or [1, 2], not [1, 0] or [0, 2]")
    dims = operand_shape.dims
    merged = dims[dimensions[0]:dimensions[-1] + 1]
    merged_size = None if any(d is None for d in merged) else _product(merged)
    new_sizes = dims[:dimensions[0]] + (merged_size,) + dims[dimensions[-1] + 1:]
    return apply_op("reshape", [operand], {"new_sizes": new_sizes})


def _reshape_shape_rule(operand, *, new_sizes):
    op = "Reshape"
    check_array(op, "operand", operand)
    new_sizes = size_list(op, "new_sizes", new_sizes)
    # reshape_c2: size(operand) = size(result)
    if operand.is_static and all(s is not None for s in new_sizes):
        if _product(operand.dims) != _product(new_sizes):
            raise ShapeError(f"{op}: new_sizes={list(new_sizes)} has {_product(new_sizes)} elements but the "
                             f"operand {operand} has {_product(operand.dims)}; the numbers of elements "
                             f"must be equal")
    return Shape(operand.element_type, new_sizes)


def _reshape_reference(operand, *, shape, new_sizes):
    # row-major: the operand's elements, flattened in order, refill the result in order
    return np.reshape(operand, shape.dims).copy()


def _reshape_index_map(operand, *, shape, new_sizes):
    def access(result_index):
        linear = linear_index(result_index, shape.dims)
        operand_index = delinearize(linear, operand.shape)
        return Access(result_index, reads=((0, operand_index),),
                      detail={"linear_index": linear, "operand_index": operand_index})
    return _index_map("reshape", shape, [operand], access)


registry.register(
    "reshape", "Reshape", "shape", _reshape_shape_rule, _reshape_reference,
    index_map=_reshape_index_map,
    attrs_from_shape=lambda shape: {"new_sizes": tuple(shape.dims)},
    categories=("data_movement",))
describe("reshape", dimensions={"kind": "dims"}, new_sizes={"kind": "dims"},
         example={"operand": "f32[2,3]", "new_sizes": [3, 2]})


# -- Transpose -------------------------------------------------------------------------------

def Transpose(operand, permutation):
    """Wraps XLA's Transpose: the operand's dimensions permuted, so that
    ``dim(result, i) = dim(operand, permutation[i])`` and
    ``result[result_index] = operand[operand_index]`` with
    ``operand_index[permutation[i]] = result_index[i]``.

    >>> Transpose(np.zeros((2, 3, 4), np.float32), permutation=[2, 0, 1]).shape   # (4, 2, 3)
    """
    return apply_op("transpose", [operand], {"permutation": int_list("Transpose", "permutation", permutation)})


def _transpose_shape_rule(operand, *, permutation):
    op = "Transpose"
    check_array(op, "operand", operand)
    permutation = int_list(op, "permutation", permutation)
    # transpose_c2: permutation is a permutation of range(rank(operand))
    if sorted(permutation) != list(range(operand.rank)):
        raise ShapeError(f"{op}: permutation={list(permutation)} is not a permutation of the operand's "
                         f"dimensions {list(range(operand.rank))} ({operand})")
    # transpose_c4: dim(result, i) = dim(operand, permutation[i])
    return Shape(operand.element_type, [operand.dims[p] for p in permutation],
                 bounds=[operand.bounds[p] for p in permutation])


def _transpose_reference(operand, *, shape, permutation):
    return np.transpose(operand, permutation).copy()


def _transpose_index_map(operand, *, shape, permutation):
    def access(result_index):
        operand_index = [0] * len(permutation)
        for i, p in enumerate(permutation):
            operand_index[p] = result_index[i]
        operand_index = tuple(operand_index)
        return Access(result_index, reads=((0, operand_index),),
                      detail={"operand_index": operand_index, "permutation": tuple(permutation)})
    return _index_map("transpose", shape, [operand], access)


registry.register(
    "transpose", "Transpose", "shape", _transpose_shape_rule, _transpose_reference,
    attrs=(Attr("permutation", "ints", hlo="dimensions"),),
    index_map=_transpose_index_map, categories=("data_movement",))
describe("transpose", example={"operand": "f32[2,3]", "permutation": [1, 0]})


# -- Rev (HLO `reverse`) -----------------------------------------------------------------------

def Rev(operand, dimensions):
    """Wraps XLA's Rev: the order of elements reversed along ``dimensions``: in a reversed
    dimension of size N, index i of the result is index N - 1 - i of the operand.

    >>> Rev(np.array([1, 2, 3], np.int32), dimensions=[0])   # [3, 2, 1]
    """
    return apply_op("reverse", [operand], {"dimensions": int_list("Rev", "dimensions", dimensions)})


def _reverse_shape_rule(operand, *, dimensions):
    op = "Rev"
    check_array(op, "operand", operand)
    dimensions = int_list(op, "dimensions", dimensions)
    for i, d in enumerate(dimensions):
        # reverse_c3: 0 <= dimensions < rank(result)
        if not 0 <= d < operand.rank:
            raise ShapeError(f"{op}: dimensions[{i}]={d} is out of range for the operand {operand} of rank "
                             f"{operand.rank}")
    # reverse_c2: is_unique(dimensions)
    if len(set(dimensions)) != len(dimensions):
        raise ShapeError(f"{op}: dimensions={list(dimensions)} names a dimension twice; each dimension "
                         f"may be reversed once")
    return operand


def _reverse_reference(operand, *, shape, dimensions):
    return np.flip(operand, axis=tuple(dimensions)).copy()


def _reverse_index_map(operand, *, shape, dimensions):
    def access(result_index):
        # in a reversed dimension d of size N: operand_index[d] = N - 1 - result_index[d]
        operand_index = tuple(operand.shape[d] - 1 - i if d in dimensions else i
                              for d, i in enumerate(result_index))
        return Access(result_index, reads=((0, operand_index),),
                      detail={"operand_index": operand_index, "dimensions": tuple(dimensions)})
    return _index_map("reverse", shape, [operand], access)


registry.register(
    "reverse", "Rev", "shape", _reverse_shape_rule, _reverse_reference,
    attrs=(Attr("dimensions", "ints"),), index_map=_reverse_index_map, categories=("data_movement",))
describe("reverse", example={"operand": "f32[2,3]", "dimensions": [0]})


# -- Concatenate ---------------------------------------------------------------------------------

class ConcatDimension:
    """``dimensions={1}`` (HLO keeps a list of exactly one) <-> ``dimension=1``."""

    hlo = "dimensions"
    kws = ("dimension",)
    arg_kinds = {"dimension": "dim"}

    def parse(self, raw, resolve):
        try:
            dims = parse_ints(raw)
        except ValueError as e:
            raise HloParseError(f"attribute dimensions={raw}: expected {{d}} ({e})") from None
        if len(dims) != 1:
            raise HloParseError(f"attribute dimensions={raw}: concatenate takes exactly one dimension")
        return {"dimension": dims[0]}

    def missing(self):
        return None

    def coerce(self, attrs, op):
        if "dimension" in attrs:
            attrs["dimension"] = as_int(op, "dimension", attrs["dimension"])

    def format(self, attrs, inst, name_of):
        if attrs.get("dimension") is None:
            return None
        return "{" + str(int(attrs["dimension"])) + "}"


def Concatenate(*operands, dimension=None):
    """Wraps XLA's ConcatInDim: the ``operands`` (N >= 1 arrays, equal except in ``dimension``)
    joined along ``dimension``, in order.  ``Concatenate(a, b, c, dimension=1)``, or the
    spec's ``Concatenate([a, b, c], 1)``.  Result index ``i`` along ``dimension`` reads operand
    ``k`` at ``i - (sizes of operands 0..k-1 along dimension)``.

    >>> Concatenate(np.int32([2, 3]), np.int32([4, 5]), np.int32([6, 7]), dimension=0)
    array([2, 3, 4, 5, 6, 7], dtype=int32)
    """
    if len(operands) == 2 and isinstance(operands[0], (list, tuple)) and dimension is None and _is_int(operands[1]):
        operands, dimension = operands[0], operands[1]
    elif len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = operands[0]
    if dimension is None:
        raise ShapeError("Concatenate: dimension is required (Concatenate(a, b, dimension=0))")
    return apply_op("concatenate", list(operands), {"dimension": int_arg("Concatenate", "dimension", dimension)})


def _concatenate_shape_rule(*operands, dimension):
    op = "Concatenate"
    dimension = int_arg(op, "dimension", dimension)
    # concatenate_c3: 0 < size(inputs)
    if not operands:
        raise ShapeError(f"{op}: needs at least one operand")
    for k, s in enumerate(operands):
        check_array(op, f"operand {k}", s)
    first = operands[0]
    # concatenate_c4: 0 <= dimension < rank(inputs[0]); rank-0 arrays have no dimension
    if not 0 <= dimension < first.rank:
        raise ShapeError(f"{op}: dimension={dimension} is out of range for operands of rank {first.rank} "
                         f"({first})" + ("; scalars cannot be concatenated" if first.rank == 0 else ""))
    for k, s in enumerate(operands[1:], start=1):
        # concatenate_c1: same element type
        if s.element_type != first.element_type:
            raise ShapeError(f"{op}: operand {k} ({s}) has element type {s.element_type} but operand 0 "
                             f"({first}) has {first.element_type}; all must be equal")
        # concatenate_c2: same shape except in `dimension`
        if s.rank != first.rank:
            raise ShapeError(f"{op}: operand {k} ({s}) has rank {s.rank} but operand 0 ({first}) has rank "
                             f"{first.rank}; all operands must have the same rank")
        for d in range(first.rank):
            a, b = first.dims[d], s.dims[d]
            if d != dimension and a is not None and b is not None and a != b:
                raise ShapeError(f"{op}: operand {k} ({s}) differs from operand 0 ({first}) in dimension {d} "
                                 f"({b} vs {a}); only dimension {dimension} may differ")
    # concatenate_c6: dim(result, dimension) = sum of dim(inputs..., dimension)
    sizes = [s.dims[dimension] for s in operands]
    dims = list(first.dims)
    dims[dimension] = None if any(x is None for x in sizes) else sum(sizes)
    for d in range(first.rank):  # a static size among the operands settles a dynamic one
        if d != dimension and dims[d] is None:
            dims[d] = next((s.dims[d] for s in operands if s.dims[d] is not None), None)
    return Shape(first.element_type, dims)


def _concatenate_reference(*operands, shape, dimension):
    return np.concatenate(operands, axis=dimension).astype(shape.dtype, copy=False)


def _concatenate_index_map(*operands, shape, dimension):
    # offsets[k]: where operand k starts along `dimension` in the result
    offsets = np.cumsum([0] + [o.shape[dimension] for o in operands]).tolist()

    def access(result_index):
        i = result_index[dimension]
        k = next(k for k in range(len(operands)) if offsets[k] <= i < offsets[k + 1])
        operand_index = result_index[:dimension] + (i - offsets[k],) + result_index[dimension + 1:]
        return Access(result_index, reads=((k, operand_index),),
                      detail={"operand_number": k, "offset": offsets[k], "operand_index": operand_index})
    return _index_map("concatenate", shape, operands, access)


registry.register(
    "concatenate", "Concatenate", "shape", _concatenate_shape_rule, _concatenate_reference,
    attrs=(ConcatDimension(),), index_map=_concatenate_index_map, categories=("data_movement",))
describe("concatenate", example={"operands": ["f32[2,3]", "f32[1,3]"], "dimension": 0})


# -- Iota ----------------------------------------------------------------------------------------

def Iota(builder, shape, iota_dimension=0):
    """Wraps XLA's Iota: an array of ``shape`` counting 0, 1, 2, ... along ``iota_dimension``:
    ``result[result_index] = result_index[iota_dimension]`` (for floats: the integer,
    converted).  ``builder=None`` computes it eagerly.  The older form
    ``Iota(builder, "s32", size)`` gives a rank-1 array.

    >>> Iota(None, "s32[2,3]", iota_dimension=1)   # [[0, 1, 2], [0, 1, 2]]
    """
    if isinstance(shape, str) and shape in dtypes.DTYPES:  # Iota(builder, type, size)
        shape, iota_dimension = Shape(shape, (int_arg("Iota", "size", iota_dimension),)), 0
    elif not isinstance(shape, (str, Shape)):
        raise ShapeError(f"Iota: shape must be a Shape or shape text such as 's32[4,8]', got {shape!r}")
    return apply_op("iota", [], {"shape": as_shape(shape),
                                 "iota_dimension": int_arg("Iota", "iota_dimension", iota_dimension)},
                    builder=builder)


def _iota_shape_rule(*, shape, iota_dimension):
    op = "Iota"
    if not shape.is_array or shape.element_type not in dtypes.NUMERIC:
        raise ShapeError(f"Iota: the result must be an array of numbers (integers, floats or complex), "
                         f"got {shape}")
    # iota_c1: 0 <= iota_dimension < rank(result); so Iota of a scalar is refused
    if not 0 <= iota_dimension < shape.rank:
        raise ShapeError(f"{op}: iota_dimension={iota_dimension} is out of range for {shape} of rank "
                         f"{shape.rank}" + ("; Iota does not make scalars" if shape.rank == 0 else ""))
    return shape


def _iota_reference(*, shape, iota_dimension):
    # count with integers, then convert: the spec's ConvertElementType(Iota(...)) for floats
    count = np.arange(shape.dims[iota_dimension], dtype=np.int64)
    expanded_sizes = [1] * shape.rank
    expanded_sizes[iota_dimension] = shape.dims[iota_dimension]
    return np.broadcast_to(count.reshape(expanded_sizes), shape.dims).astype(shape.dtype)


registry.register(
    "iota", "Iota", "shape", _iota_shape_rule, _iota_reference,
    attrs=(Attr("iota_dimension", "int"),),
    attrs_from_shape=lambda shape: {"shape": shape}, categories=("constant",))
describe("iota", shape={"kind": "shape"}, example={"shape": "s32[2,3]", "iota_dimension": 1})


# -- copy, bitcast: optimized HLO -----------------------------------------------------------------

def Copy(operand):
    """HLO's ``copy`` (optimized HLO, no XlaBuilder function): a copy of ``operand``.  XLA
    inserts it to change a layout; with logical arrays it is the identity."""
    return apply_op("copy", [operand])


def _copy_shape_rule(operand):
    return operand


def _copy_reference(operand, *, shape):
    if isinstance(operand, tuple):
        return tuple(_copy_reference(v, shape=s) for v, s in zip(operand, shape.tuple_shapes))
    return np.array(operand, copy=True)


def _copy_index_map(operand, *, shape):
    return _index_map("copy", shape, [operand], lambda index: Access(index, reads=((0, index),)))


# `copy` only changes the layout in XLA; with logical arrays it is the identity
registry.register("copy", "Copy", "shape", _copy_shape_rule, _copy_reference,
                  index_map=_copy_index_map, categories=("data_movement",))


def Bitcast(operand, shape):
    """HLO's ``bitcast`` (optimized HLO, no XlaBuilder function): the operand's bits seen as
    ``shape``, which must hold the same number of bits.  Here: a row-major reshape, with
    the bytes reinterpreted when the element type changes (see the note in the reference).

    >>> Bitcast(np.arange(6, dtype=np.float32), "f32[2,3]")   # [[0, 1, 2], [3, 4, 5]]
    """
    return apply_op("bitcast", [operand], {"shape": as_shape(shape)})


def _bitcast_shape_rule(operand, *, shape):
    op = "Bitcast"
    check_array(op, "operand", operand)
    check_array(op, "result", shape)
    if operand.is_static and shape.is_static:
        bits_in = operand.numel * dtypes.bit_width(operand.element_type)
        bits_out = shape.numel * dtypes.bit_width(shape.element_type)
        if bits_in != bits_out:
            raise ShapeError(f"{op}: the operand {operand} has {bits_in} bits but the result {shape} has "
                             f"{bits_out}; a bitcast cannot change the number of bits")
    return shape


def _bitcast_reference(operand, *, shape):
    # SIMPLIFICATION: XLA's `bitcast` reinterprets the buffer under the result's *layout*.
    # Values here are logical row-major arrays, so a bitcast is a row-major reshape (and a
    # reinterpretation of the bytes when the element type changes).  A bitcast that
    # relies on a non-default layout (a physical transpose) is not modelled.
    return bitcast_view(operand, shape).copy()


def bitcast_view(operand, shape):
    """``operand``'s row-major elements seen with ``shape``'s dimensions and element type
    (no copy; shared with the CPU kernel, which returns the view itself)."""
    flat = np.ascontiguousarray(operand).reshape(-1)
    if operand.dtype != shape.dtype:
        if dtypes.bit_width(shape.element_type) != shape.dtype.itemsize * 8 or \
                dtypes.bit_width(dtypes.from_numpy(operand.dtype)) != operand.dtype.itemsize * 8:
            raise NotImplementedError(f"Bitcast: sub-byte element types ({dtypes.from_numpy(operand.dtype)} "
                                      f"-> {shape.element_type}) are not supported")
        flat = flat.view(shape.dtype)
    return flat.reshape(shape.dims)


def _bitcast_index_map(operand, *, shape):
    """Row-major element order (see the simplification above): result element ``L``
    (row-major) holds bits ``[L*r, (L+1)*r)`` of the buffer, ``r`` its bit width, so it
    reads the operand elements that hold those bits (one, or several / part of one when
    the element type changes width)."""
    in_dims = tuple(np.shape(operand))
    r = dtypes.bit_width(shape.element_type)
    o = dtypes.bit_width(Shape.of(operand).element_type)

    def access(result_index):
        linear = linear_index(result_index, shape.dims)
        first, last = linear * r // o, ((linear + 1) * r - 1) // o
        reads = tuple((0, delinearize(q, in_dims)) for q in range(first, last + 1))
        return Access(result_index, reads=reads,
                      detail={"linear_index": linear, "bits": (linear * r, (linear + 1) * r),
                              "operand_linear": (first, last), "operand_index": reads[0][1]})
    return _index_map("bitcast", shape, [operand], access)


registry.register("bitcast", "Bitcast", "shape", _bitcast_shape_rule, _bitcast_reference,
                  attrs_from_shape=lambda shape: {"shape": shape}, index_map=_bitcast_index_map,
                  categories=("data_movement",))
describe("bitcast", shape={"kind": "shape"}, example={"operand": "f32[6]", "shape": "f32[2,3]"})


# -- dynamic-reshape ------------------------------------------------------------------------------

def DynamicReshape(operand, dim_sizes, new_size_bounds, dims_are_dynamic):
    """Wraps XLA's DynamicReshape: like Reshape, with the result sizes given at run time by
    the scalars ``dim_sizes``; ``new_size_bounds`` are their static bounds and
    ``dims_are_dynamic[i]`` says whether result dimension i is dynamic (``<=N``)."""
    op = "DynamicReshape"
    new_size_bounds = int_list(op, "new_size_bounds", new_size_bounds)
    if not isinstance(dims_are_dynamic, (list, tuple, np.ndarray)):
        raise ShapeError(f"{op}: dims_are_dynamic must be a list of bools, got {dims_are_dynamic!r}")
    dims_are_dynamic = [as_bool(op, f"dims_are_dynamic[{i}]", x) for i, x in enumerate(dims_are_dynamic)]
    if len(dims_are_dynamic) != len(new_size_bounds) or len(dim_sizes) != len(new_size_bounds):
        raise ShapeError(f"{op}: dim_sizes ({len(dim_sizes)}), new_size_bounds ({len(new_size_bounds)}) and "
                         f"dims_are_dynamic ({len(dims_are_dynamic)}) must have one entry per result dimension")
    element_type = shape_of(operand).element_type
    shape = Shape(element_type, [None if dyn else b for b, dyn in zip(new_size_bounds, dims_are_dynamic)],
                  bounds=[b if dyn else None for b, dyn in zip(new_size_bounds, dims_are_dynamic)])
    return apply_op("dynamic-reshape", [operand, *dim_sizes], {"shape": shape})


def _dynamic_reshape_shape_rule(operand, *dim_sizes, shape):
    op = "DynamicReshape"
    check_array(op, "operand", operand)
    if shape.element_type != operand.element_type:
        raise ShapeError(f"{op}: the result {shape} must have the operand's element type ({operand})")
    if len(dim_sizes) != shape.rank:
        raise ShapeError(f"{op}: got {len(dim_sizes)} dim_sizes for a result of rank {shape.rank} ({shape})")
    for i, s in enumerate(dim_sizes):
        if s.rank != 0 or s.element_type not in dtypes.INTEGRAL:
            raise ShapeError(f"{op}: dim_sizes[{i}] must be an integer scalar, got {s}")
    return shape


def dynamic_reshape_sizes(operand, dim_sizes, shape):
    """The run-time sizes of a dynamic-reshape, checked against the result's bounds and the
    operand's element count (shared with the kernels)."""
    sizes = [int(s) for s in dim_sizes]
    for i, (size, d, b) in enumerate(zip(sizes, shape.dims, shape.bounds)):
        limit = d if d is not None else b
        if size < 0 or (limit is not None and size > limit):
            raise ExecutionError(f"DynamicReshape: dim_sizes[{i}]={size} is outside [0, {limit}] ({shape})")
    if _product(sizes) != operand.size:
        raise ExecutionError(f"DynamicReshape: dim_sizes={sizes} has {_product(sizes)} elements but the "
                             f"operand has {operand.size}")
    return sizes


def _dynamic_reshape_reference(operand, *dim_sizes, shape):
    return np.reshape(operand, dynamic_reshape_sizes(operand, dim_sizes, shape)).copy()


def _dynamic_reshape_index_map(operand, *dim_sizes, shape):
    """As Reshape's map, over the result's run-time sizes (``dim_sizes``); with unknown
    sizes (shapes only) the domain is the bounds and the elements read are unknown."""
    if is_unknown(dim_sizes):
        dims = [d if d is not None else b for d, b in zip(shape.dims, shape.bounds)]
        whole = Candidates([(0, n) for n in np.shape(operand)])
        return IndexMap("dynamic-reshape", dims, lambda index: Access(index, reads=whole, unknown=True, detail={}),
                        operand_shapes=(Shape.of(operand),), result_shape=shape, kind="copy")
    sizes = dynamic_reshape_sizes(operand, dim_sizes, shape)
    in_dims = tuple(np.shape(operand))

    def access(result_index):
        linear = linear_index(result_index, sizes)
        operand_index = delinearize(linear, in_dims)
        return Access(result_index, reads=((0, operand_index),),
                      detail={"linear_index": linear, "operand_index": operand_index, "sizes": list(sizes)})
    return IndexMap("dynamic-reshape", sizes, access, operand_shapes=(Shape.of(operand),), result_shape=shape,
                    kind="copy")


registry.register("dynamic-reshape", "DynamicReshape", "shape", _dynamic_reshape_shape_rule,
                  _dynamic_reshape_reference, attrs_from_shape=lambda shape: {"shape": shape},
                  index_map=_dynamic_reshape_index_map, categories=("data_movement",))
describe("dynamic-reshape", new_size_bounds={"kind": "dims"},
         dims_are_dynamic={"kind": "flags", "of": "new_size_bounds"},
         example={"operand": "f32[6]", "dim_sizes": [("s32[]", 2), ("s32[]", 3)], "new_size_bounds": [2, 3],
                  "dims_are_dynamic": [False, False]})

__all__ = ["Broadcast", "BroadcastInDim", "Reshape", "Collapse", "Transpose", "Rev", "Concatenate",
           "Iota", "DynamicReshape", "Copy", "Bitcast"]
