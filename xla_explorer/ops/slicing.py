"""Slicing ops: Slice, DynamicSlice, DynamicUpdateSlice, Pad.

Each reference reads like the spec's formula; each op has an index map that says, for a
result element, which operand element it copies (or that it is padding), with the
clamping of dynamic start indices made explicit.

XLA semantics the corpus pins down (hlo_corpus/README.md): a dynamic start index is
clamped so that the whole slice (or update) is in bounds, whatever its integer type,
huge unsigned values included; Pad's edge padding may be negative (it crops), interior
padding may not.
"""
import numpy as np

from .. import dtypes
from ..builder import XlaOp, apply_op
from ..errors import ShapeError
from ..hlo.attrs import Attr, PaddingConfig, SliceAttr
from ..shapes import Shape
from .arguments import describe
from . import registry
from .index_map import Access, Candidates, IndexMap, is_unknown
from .shape import Reshape, check_array, int_list


def _index_map(opcode, shape, operands, access):
    return IndexMap(opcode, shape.dims, access, operand_shapes=tuple(Shape.of(v) for v in operands),
                    result_shape=shape, kind="copy")


# -- Slice ---------------------------------------------------------------------------------------

def Slice(operand, start_indices, limit_indices, strides=None):
    """Wraps XLA's Slice: the sub-array from ``start_indices`` (inclusive) to ``limit_indices``
    (exclusive), taking every ``strides[d]``-th element of dimension d (default 1)::

        result[result_index] = operand[start_indices + result_index * strides]
        dim(result, d) = ceil((limit_indices[d] - start_indices[d]) / strides[d])

    >>> Slice(np.array([0., 1., 2., 3., 4.], np.float32), start_indices=[2], limit_indices=[4])
    array([2., 3.], dtype=float32)
    """
    start_indices = int_list("Slice", "start_indices", start_indices)
    limit_indices = int_list("Slice", "limit_indices", limit_indices)
    strides = (1,) * len(start_indices) if strides is None else int_list("Slice", "strides", strides)
    return apply_op("slice", [operand], {"start_indices": start_indices, "limit_indices": limit_indices,
                                         "strides": strides})


def _slice_shape_rule(operand, *, start_indices, limit_indices, strides=None):
    op = "Slice"
    check_array(op, "operand", operand)
    start_indices = int_list(op, "start_indices", start_indices)
    limit_indices = int_list(op, "limit_indices", limit_indices)
    strides = (1,) * operand.rank if strides is None else int_list(op, "strides", strides)
    # slice_c2: one start, limit and stride per operand dimension
    for name, v in (("start_indices", start_indices), ("limit_indices", limit_indices), ("strides", strides)):
        if len(v) != operand.rank:
            raise ShapeError(f"{op}: {name}={list(v)} has {len(v)} entries but the operand {operand} has "
                             f"rank {operand.rank}; give one per dimension")
    dims = []
    for d, (start, limit, stride, size) in enumerate(zip(start_indices, limit_indices, strides, operand.dims)):
        # slice_c3: 0 <= start_indices <= limit_indices <= shape(operand)
        if start < 0:
            raise ShapeError(f"{op}: start_indices[{d}]={start} is negative ({operand})")
        if limit < start:
            raise ShapeError(f"{op}: limit_indices[{d}]={limit} is smaller than start_indices[{d}]={start} "
                             f"({operand})")
        if size is not None and limit > size:
            raise ShapeError(f"{op}: limit_indices[{d}]={limit} is larger than operand dimension {d} ({operand})")
        # slice_c4: 0 < strides
        if stride <= 0:
            raise ShapeError(f"{op}: strides[{d}]={stride} must be positive ({operand})")
        # slice_c5: dim(result, d) = ceil((limit - start) / stride)
        dims.append(-(-(limit - start) // stride))
    return Shape(operand.element_type, dims)


def _slice_reference(operand, *, shape, start_indices, limit_indices, strides=None):
    strides = strides or (1,) * operand.ndim
    # operand[start_indices + result_index * strides], every result_index at once
    return operand[tuple(slice(start, limit, stride)
                         for start, limit, stride in zip(start_indices, limit_indices, strides))].copy()


def _slice_index_map(operand, *, shape, start_indices, limit_indices, strides=None):
    strides = tuple(strides or (1,) * operand.ndim)

    def access(result_index):
        operand_index = tuple(s + i * st for s, i, st in zip(start_indices, result_index, strides))
        return Access(result_index, reads=((0, operand_index),),
                      detail={"operand_index": operand_index, "start_indices": tuple(start_indices),
                              "strides": strides})
    return _index_map("slice", shape, [operand], access)


registry.register("slice", "Slice", "slicing", _slice_shape_rule, _slice_reference,
                  attrs=(SliceAttr(),), index_map=_slice_index_map, categories=("data_movement",))
describe("slice", start_indices={"fill": 0}, example={"operand": "f32[4,5]", "start_indices": [1, 0], "limit_indices": [3, 5],
                          "strides": [1, 2]})


# -- dynamic start indices: the shared pieces ----------------------------------------------------

def _scalar_starts(start_indices):
    """Start indices as a list of scalars: the newest spec's form (a sequence of N scalar
    ops); the 2018 form (one rank-1 array) is split into scalars (Slice + Reshape)."""
    if isinstance(start_indices, XlaOp) and start_indices.shape.rank == 1:
        n = start_indices.shape.dims[0]
        return [Reshape(Slice(start_indices, [i], [i + 1]), []) for i in range(n)]
    if isinstance(start_indices, np.ndarray) and start_indices.ndim == 1:
        return [start_indices[i] for i in range(start_indices.shape[0])]  # NumPy scalars keep the type
    if isinstance(start_indices, (list, tuple)):
        return list(start_indices)
    return [start_indices]


def _check_start_indices(op, operand, start_indices):
    # one scalar start index per operand dimension
    if len(start_indices) != operand.rank:
        raise ShapeError(f"{op}: got {len(start_indices)} start indices for the operand {operand} of rank "
                         f"{operand.rank}; give one scalar start index per dimension")
    for i, s in enumerate(start_indices):
        # start indices are 0-dimensional integers
        if not s.is_array or s.rank != 0 or s.element_type not in dtypes.INTEGRAL:
            raise ShapeError(f"{op}: start_indices[{i}] must be an integer scalar, got {s}")
        # same_type(start_indices)
        if s.element_type != start_indices[0].element_type:
            raise ShapeError(f"{op}: start_indices[{i}] is {s} but start_indices[0] is {start_indices[0]}; "
                             f"all start indices must have the same type")


def _adjusted_start_indices(start_indices, operand_dims, sizes):
    """adjusted_start_indices = clamp(0, start_indices, shape(operand) - sizes), in Python ints
    (so that a huge u64 index is the large number it is, not a wrapped negative one)."""
    return tuple(min(max(int(start), 0), dim - size)
                 for start, dim, size in zip(start_indices, operand_dims, sizes))


# -- DynamicSlice --------------------------------------------------------------------------------

def DynamicSlice(operand, start_indices, slice_sizes=None, *, size_indices=None):
    """Wraps XLA's DynamicSlice: the ``slice_sizes`` sub-array starting at ``start_indices``
    (N integer scalars, known at run time; one rank-1 array is accepted too).  The start is
    clamped so that the slice is in bounds::

        adjusted_start_indices = clamp(0, start_indices, shape(operand) - slice_sizes)
        result[result_index] = operand[adjusted_start_indices + result_index]

    ``size_indices`` (the 2018 spec's name) is accepted for ``slice_sizes``.

    >>> a = np.array([0., 1., 2., 3., 4.], np.float32)
    >>> DynamicSlice(a, [np.int32(2)], slice_sizes=[2])   # [2., 3.]
    >>> DynamicSlice(a, [np.int32(9)], slice_sizes=[2])   # clamped to start 3: [3., 4.]
    """
    if slice_sizes is None:
        slice_sizes = size_indices
    if slice_sizes is None:
        raise ShapeError("DynamicSlice: slice_sizes is required")
    slice_sizes = int_list("DynamicSlice", "slice_sizes", slice_sizes)
    return apply_op("dynamic-slice", [operand, *_scalar_starts(start_indices)], {"slice_sizes": slice_sizes})


def _dynamic_slice_shape_rule(operand, *start_indices, slice_sizes):
    op = "DynamicSlice"
    check_array(op, "operand", operand)
    slice_sizes = int_list(op, "slice_sizes", slice_sizes)
    # dynamic_slice_c2, c3, c5: N integer scalars of one type
    _check_start_indices(op, operand, start_indices)
    # dynamic_slice_c2: one slice size per operand dimension
    if len(slice_sizes) != operand.rank:
        raise ShapeError(f"{op}: slice_sizes={list(slice_sizes)} has {len(slice_sizes)} entries but the operand "
                         f"{operand} has rank {operand.rank}")
    for d, (size, dim) in enumerate(zip(slice_sizes, operand.dims)):
        # dynamic_slice_c4: 0 <= slice_sizes <= shape(operand)
        if size < 0:
            raise ShapeError(f"{op}: slice_sizes[{d}]={size} is negative")
        if dim is not None and size > dim:
            raise ShapeError(f"{op}: slice_sizes[{d}]={size} is larger than operand dimension {d} ({operand})")
    # dynamic_slice_c5: shape(result) = slice_sizes
    return Shape(operand.element_type, slice_sizes)


def _dynamic_slice_reference(operand, *start_indices, shape, slice_sizes):
    adjusted_start_indices = _adjusted_start_indices(start_indices, operand.shape, slice_sizes)
    # result[result_index] = operand[adjusted_start_indices + result_index]
    return operand[tuple(slice(start, start + size)
                         for start, size in zip(adjusted_start_indices, slice_sizes))].copy()


def _known_starts(start_indices):
    """Each start as a Python int, or None where it is unknown (shapes only)."""
    return [None if is_unknown(s) else int(np.asarray(s)) for s in start_indices]


def _dynamic_slice_index_map(operand, *start_indices, shape, slice_sizes):
    if is_unknown(start_indices):  # shapes only: any clamped start, plus the result index
        # each start is clamped on its own: a start that constants fixed gives its dimension exactly
        low = [0 if s is None else a for s, a in zip(_known_starts(start_indices), _adjusted_start_indices(
            [s or 0 for s in _known_starts(start_indices)], np.shape(operand), slice_sizes))]
        high = [n - z if s is None else a for s, a, n, z in zip(_known_starts(start_indices), low,
                                                                   np.shape(operand), slice_sizes)]
        return _index_map("dynamic-slice", shape, [operand, *start_indices], lambda result_index: Access(
            result_index, reads=Candidates([(lo + i, hi + i + 1) for i, lo, hi in zip(result_index, low, high)]),
            unknown=True, detail={}))
    starts = tuple(int(s) for s in start_indices)
    adjusted = _adjusted_start_indices(starts, operand.shape, slice_sizes)
    clamped = adjusted != starts

    def access(result_index):
        operand_index = tuple(a + i for a, i in zip(adjusted, result_index))
        return Access(result_index, reads=((0, operand_index),), clamped=clamped,
                      detail={"start_indices": starts, "adjusted_start_indices": adjusted,
                              "operand_index": operand_index})
    return _index_map("dynamic-slice", shape, [operand, *start_indices], access)


registry.register("dynamic-slice", "DynamicSlice", "slicing", _dynamic_slice_shape_rule,
                  _dynamic_slice_reference, attrs=(Attr("slice_sizes", "ints", hlo="dynamic_slice_sizes"),),
                  index_map=_dynamic_slice_index_map, categories=("data_movement",))
describe("dynamic-slice", start_indices={"kind": "scalars"}, slice_sizes={"kind": "sizes"},
         example={"operand": "f32[3,4]", "start_indices": [("s32[]", 1), ("s32[]", 1)], "slice_sizes": [2, 2]})


# -- DynamicUpdateSlice --------------------------------------------------------------------------

def DynamicUpdateSlice(operand, update, start_indices):
    """Wraps XLA's DynamicUpdateSlice: ``operand`` with the block ``update`` written at
    ``start_indices`` (N integer scalars, known at run time; one rank-1 array is accepted
    too).  The start is clamped so that the update fits::

        adjusted_start_indices = clamp(0, start_indices, shape(operand) - shape(update))
        result[adjusted_start_indices + update_index] = update[update_index]
        result[result_index] = operand[result_index] everywhere else

    >>> DynamicUpdateSlice(np.array([0., 1., 2., 3., 4.], np.float32),
    ...                    np.array([5., 6.], np.float32), [np.int32(2)])   # [0., 1., 5., 6., 4.]
    """
    return apply_op("dynamic-update-slice", [operand, update, *_scalar_starts(start_indices)])


def _dynamic_update_slice_shape_rule(operand, update, *start_indices):
    op = "DynamicUpdateSlice"
    check_array(op, "operand", operand)
    check_array(op, "update", update)
    # dynamic_update_slice_c2: element_type(update) = element_type(operand)
    if update.element_type != operand.element_type:
        raise ShapeError(f"{op}: update ({update}) must have the operand's element type ({operand})")
    # dynamic_update_slice_c3: rank(update) = rank(operand)
    if update.rank != operand.rank:
        raise ShapeError(f"{op}: update ({update}) has rank {update.rank} but the operand ({operand}) has "
                         f"rank {operand.rank}")
    # dynamic_update_slice_c4, c5: N integer scalars of one type
    _check_start_indices(op, operand, start_indices)
    # dynamic_update_slice_c6: 0 <= shape(update) <= shape(operand)
    for d, (u, o) in enumerate(zip(update.dims, operand.dims)):
        if u is not None and o is not None and u > o:
            raise ShapeError(f"{op}: update dimension {d} ({update}) is larger than operand dimension {d} "
                             f"({operand}); the update must fit in the operand")
    # dynamic_update_slice_c1: type(operand) = type(result)
    return operand


def _dynamic_update_slice_reference(operand, update, *start_indices, shape):
    adjusted_start_indices = _adjusted_start_indices(start_indices, operand.shape, update.shape)
    result = operand.copy()
    result[tuple(slice(start, start + size)
                 for start, size in zip(adjusted_start_indices, update.shape))] = update
    return result


def _dynamic_update_slice_index_map(operand, update, *start_indices, shape):
    if is_unknown(start_indices):  # shapes only: the operand's element, or an update element
        known = _known_starts(start_indices)
        adjusted = _adjusted_start_indices([s or 0 for s in known], np.shape(operand), np.shape(update))
        # the adjusted start of dimension d lies in [low, high]: exactly known where constants fixed it
        low = [0 if s is None else a for s, a in zip(known, adjusted)]
        high = [n - u if s is None else a for s, a, n, u in zip(known, adjusted, np.shape(operand), np.shape(update))]

        def unknown_access(result_index):
            # update_index = result_index - adjusted start, inside the update
            ranges = [(max(0, i - hi), min(u, i - lo + 1)) for i, lo, hi, u in zip(result_index, low, high,
                                                                                  np.shape(update))]
            some = all(a < b for a, b in ranges)
            return Access(result_index, reads=Candidates(ranges if some else [(0, 0)] * len(ranges),
                                                         (1,) if some else (), extra=[(0, result_index)]),
                          unknown=True, detail={})
        return _index_map("dynamic-update-slice", shape, [operand, update, *start_indices], unknown_access)
    starts = tuple(int(s) for s in start_indices)
    adjusted = _adjusted_start_indices(starts, operand.shape, update.shape)
    clamped = adjusted != starts

    def access(result_index):
        update_index = tuple(i - a for i, a in zip(result_index, adjusted))
        inside = all(0 <= u < size for u, size in zip(update_index, update.shape))
        detail = {"start_indices": starts, "adjusted_start_indices": adjusted,
                  "from": "update" if inside else "operand"}
        if inside:  # operand 1, `update`
            detail["update_index"] = update_index
            return Access(result_index, reads=((1, update_index),), clamped=clamped, detail=detail)
        return Access(result_index, reads=((0, result_index),), clamped=clamped, detail=detail)
    return _index_map("dynamic-update-slice", shape, [operand, update, *start_indices], access)


registry.register("dynamic-update-slice", "DynamicUpdateSlice", "slicing", _dynamic_update_slice_shape_rule,
                  _dynamic_update_slice_reference, index_map=_dynamic_update_slice_index_map,
                  categories=("data_movement",))
describe("dynamic-update-slice", start_indices={"kind": "scalars"},
         example={"operand": "f32[3,4]", "update": ("f32[2,2]", 0), "start_indices": [("s32[]", 1), ("s32[]", 2)]})


# -- Pad -----------------------------------------------------------------------------------------

def _padding_triples(op, padding_config):
    """``padding_config`` as (edge_padding_low, edge_padding_high, interior_padding) triples;
    a (low, high) pair means no interior padding."""
    if not isinstance(padding_config, (list, tuple, np.ndarray)):
        raise ShapeError(f"{op}: padding_config must be a list of (low, high, interior) triples, "
                         f"got {padding_config!r}")
    triples = []
    for d, t in enumerate(padding_config):
        t = tuple(t) if isinstance(t, (list, tuple, np.ndarray)) else None
        if t is None or len(t) not in (2, 3):
            raise ShapeError(f"{op}: padding_config[{d}] must be a (low, high, interior) triple, "
                             f"got {padding_config[d]!r}")
        triples.append(int_list(op, f"padding_config[{d}]", t + (0,) * (3 - len(t))))
    return tuple(triples)


def Pad(operand, padding_value, padding_config):
    """Wraps XLA's Pad: ``operand`` spread out and surrounded by ``padding_value``.

    ``padding_config`` has one ``(edge_padding_low, edge_padding_high, interior_padding)``
    triple per dimension: ``interior_padding`` (>= 0) values go between neighbouring
    elements, then ``edge_padding_low``/``high`` at either end; a negative edge padding
    removes that many elements of the interior-padded operand instead::

        result_index = edge_padding_low + operand_index * (interior_padding + 1)
        result[result_index] = operand[operand_index]   (when result_index is in the result)
        every other result element is padding_value

    >>> Pad(np.ones((2, 2), np.float32), np.float32(0), padding_config=[(1, 1, 1), (0, 0, 0)])
    array([[0., 0.], [1., 1.], [0., 0.], [1., 1.], [0., 0.]], dtype=float32)
    """
    return apply_op("pad", [operand, padding_value], {"padding_config": _padding_triples("Pad", padding_config)})


def _pad_shape_rule(operand, padding_value, *, padding_config):
    op = "Pad"
    check_array(op, "operand", operand)
    padding_config = _padding_triples(op, padding_config)
    # the padding value is a scalar ...
    if not padding_value.is_array or padding_value.rank != 0:
        raise ShapeError(f"{op}: padding_value must be a scalar, got {padding_value}")
    # pad_c1: ... of the operand's element type
    if padding_value.element_type != operand.element_type:
        raise ShapeError(f"{op}: padding_value ({padding_value}) must have the operand's element type "
                         f"({operand})")
    # pad_c2: one (low, high, interior) triple per operand dimension
    if len(padding_config) != operand.rank:
        raise ShapeError(f"{op}: padding_config has {len(padding_config)} entries but the operand {operand} has "
                         f"rank {operand.rank}; give one (low, high, interior) triple per dimension")
    dims = []
    for d, ((low, high, interior), size) in enumerate(zip(padding_config, operand.dims)):
        # pad_c3: 0 <= interior_padding
        if interior < 0:
            raise ShapeError(f"{op}: padding_config[{d}] has interior_padding={interior}; interior padding "
                             f"cannot be negative")
        if size is None:
            dims.append(None)
            continue
        # pad_c4: dim(result) = dim(operand) + low + max(dim(operand) - 1, 0) * interior + high
        out = size + low + max(size - 1, 0) * interior + high
        if out < 0:
            raise ShapeError(f"{op}: dimension {d} of the result would have negative size {out} = {size} "
                             f"(operand) + {low} (edge_padding_low) + {max(size - 1, 0)}*{interior} (interior) "
                             f"+ {high} (edge_padding_high) ({operand})")
        dims.append(out)
    return Shape(operand.element_type, dims)


def _pad_reference(operand, padding_value, *, shape, padding_config):
    edge_padding_low = [t[0] for t in padding_config]
    interior_padding = [t[2] for t in padding_config]
    result = np.full(shape.dims, padding_value, dtype=shape.dtype)
    # per dimension: result_index = edge_padding_low + operand_index * (interior_padding + 1);
    # an operand element lands in the result only when that index is in bounds (negative
    # edge padding crops)
    operand_positions, result_positions = [], []
    for d in range(operand.ndim):
        operand_index = np.arange(operand.shape[d])
        result_index = edge_padding_low[d] + operand_index * (interior_padding[d] + 1)
        in_bounds = (result_index >= 0) & (result_index < shape.dims[d])
        operand_positions.append(operand_index[in_bounds])
        result_positions.append(result_index[in_bounds])
    result[np.ix_(*result_positions)] = operand[np.ix_(*operand_positions)]
    return result


def _pad_index_map(operand, padding_value, *, shape, padding_config):
    def access(result_index):
        operand_index, reasons = [], []
        for d, (i, (low, high, interior)) in enumerate(zip(result_index, padding_config)):
            # invert result_index = edge_padding_low + operand_index * (interior_padding + 1)
            q, r = divmod(i - low, interior + 1)
            if i < low:
                reasons.append(f"dimension {d}: low edge padding")
            elif r != 0:
                reasons.append(f"dimension {d}: interior padding")
            elif q >= operand.shape[d]:
                reasons.append(f"dimension {d}: high edge padding")
            operand_index.append(q)
        detail = {"edge_padding_low": tuple(t[0] for t in padding_config),
                  "edge_padding_high": tuple(t[1] for t in padding_config),
                  "interior_padding": tuple(t[2] for t in padding_config),
                  "formula": "result_index = edge_padding_low + operand_index * (interior_padding + 1)"}
        if reasons:
            detail["padding"] = tuple(reasons)
            return Access(result_index, reads=(), source="padding", detail=detail)
        detail["operand_index"] = tuple(operand_index)
        return Access(result_index, reads=((0, tuple(operand_index)),), detail=detail)
    return _index_map("pad", shape, [operand, padding_value], access)


registry.register("pad", "Pad", "slicing", _pad_shape_rule, _pad_reference,
                  attrs=(PaddingConfig(),), index_map=_pad_index_map, categories=("data_movement",))
describe("pad", example={"operand": "f32[2,3]", "padding_value": ("f32[]", 0),
                        "padding_config": [(1, 1, 0), (0, 0, 1)]})

__all__ = ["Slice", "DynamicSlice", "DynamicUpdateSlice", "Pad"]
