"""Gather and Scatter: slices at run-time positions, read (Gather) or combined in (Scatter).

Both are written as the StableHLO spec states them (``docs/spec.md``, gather/scatter with
the batching dimensions of the 2024 RFC), with the spec's names for every intermediate
index: ``batch_index``, ``start_index``, ``full_start_index``, ``full_batching_index``,
``offset_index``, ``full_offset_index``, ``operand_index`` (Gather) and
``update_scatter_index``, ``update_window_index``, ``full_window_index``,
``result_index`` (Scatter).  Where XLA pins what the spec leaves open, XLA wins
(see ``../shared/hlo_corpus/README.md``):

- Gather clamps every start index so that the whole slice is in bounds (huge unsigned
  indices included);
- Scatter skips an update window that is even partly out of bounds (the spec only drops
  the out-of-bounds *elements*); the updates are applied in XLA:CPU's order: scatter
  indices in row-major order, each window whole, so duplicates combine in that order
  through ``update_computation`` (which matters for non-commutative computations).

The shape rules carry the spec's constraint labels (``gather_c1`` ... ``scatter_c25``).
"""
import numpy as np

from .. import dtypes
from ..builder import apply_op
from ..coerce import as_bool, as_int_list
from ..errors import ShapeError
from ..hlo.attrs import Attr
from ..hlo.ir import HloComputation
from ..shapes import Shape
from .arguments import describe
from . import registry
from .index_map import Access, Candidates, IndexMap, is_unknown

# -- helpers shared by both ops ----------------------------------------------------------

#: any start index beyond this is out of bounds for every array; unsigned 64-bit indices are
#: capped here before becoming int64, so huge values stay huge and nothing overflows
_HUGE_INDEX = 1 << 62


def _index_values(indices):
    """Index values as int64, exactly where it matters (see ``_HUGE_INDEX``)."""
    a = np.asarray(indices)
    if a.dtype == np.uint64:
        a = np.minimum(a, np.uint64(_HUGE_INDEX))
    return a.astype(np.int64)


def _ints(v, op, name):
    return as_int_list(op, name, v)


def _unique(v):
    return len(set(v)) == len(v)


def _sorted(v):
    return list(v) == sorted(v)


def _same_dim(a, b):
    """Equal sizes; a dynamic size (None) matches anything."""
    return a is None or b is None or a == b


def _dims_text(shape):
    return f"{list(shape.dims)}".replace(" ", "")


def _check_in_range(op, name, values, upper, what):
    for i, d in enumerate(values):
        if not 0 <= d < upper:
            raise ShapeError(f"{op}: {name}[{i}]={d} is out of range for {what}; "
                             f"it must be in [0, {upper})")


def _batch_position(d_start, index_vector_dim):
    """Where dimension ``d_start`` of the indices sits in ``batch_index`` (which skips the
    index vector dimension): the spec's ``d_start - (d_start < index_vector_dim ? 0 : 1)``."""
    return d_start - (0 if d_start < index_vector_dim else 1)


def _indices_batch_dims(indices_rank, index_vector_dim):
    """The dimensions of the indices that are not the index vector, in order."""
    return [d for d in range(indices_rank) if d != index_vector_dim]


def _index_vectors(indices, index_vector_dim):
    """The indices with the index vector as the last dimension (a trailing 1 is added
    when ``index_vector_dim == rank``), as int64: ``vectors[batch_index] == start_index``."""
    a = _index_values(indices)
    if index_vector_dim == a.ndim:
        return a[..., np.newaxis]
    return np.moveaxis(a, index_vector_dim, -1)


# =========================================================================================
# Gather
# =========================================================================================

def Gather(operand, start_indices, *, offset_dims, collapsed_slice_dims, start_index_map,
           index_vector_dim, slice_sizes, operand_batching_dims=(), start_indices_batching_dims=(),
           indices_are_sorted=False, unique_indices=False):
    """Wraps XLA's Gather: slices of ``operand`` of size ``slice_sizes`` taken at the start
    positions held in ``start_indices``, stitched together.

    For every ``result_index`` (the spec's formulas, names as in the StableHLO spec):

    - ``batch_dims`` are the result dimensions not in ``offset_dims``;
      ``batch_index = result_index[batch_dims...]``;
    - ``start_index = start_indices[bi0, ..., :, ..., biN]`` (the ``:`` at
      ``index_vector_dim``; when ``index_vector_dim == rank(start_indices)`` the index
      vector is the single element ``start_indices[batch_index]``);
    - ``full_start_index[start_index_map[k]] = clamp(start_index[k], 0,
      dim(operand, d) - slice_sizes[d])``, 0 elsewhere -- XLA clamps so the whole slice
      is in bounds, so a result element never reads out of bounds;
    - ``full_batching_index[operand_batching_dims[i]] = batch_index[position of
      start_indices_batching_dims[i]]`` (what ``jax.vmap`` of an indexing op emits);
    - ``offset_index = result_index[offset_dims...]``; ``full_offset_index`` inserts 0
      at ``collapsed_slice_dims`` and ``operand_batching_dims``;
    - ``result[result_index] = operand[full_start_index + full_batching_index +
      full_offset_index]``.

    ``indices_are_sorted`` is a promise XLA may use (recorded, no effect here);
    ``unique_indices`` is accepted for JAX's signature but HLO's gather has no such
    attribute, so it is not recorded.

    Example: rows 2 and 0 of a 3x4 array (``x[[2, 0]]``)::

        Gather(x, np.array([[2], [0]]), offset_dims=[1], collapsed_slice_dims=[0],
               start_index_map=[0], index_vector_dim=1, slice_sizes=[1, 4])  # f32[2,4]
    """
    as_bool("Gather", "unique_indices", unique_indices)  # checked, but not an attribute of HLO's gather (see the docstring)
    attrs = {
        "offset_dims": _ints(offset_dims, "Gather", "offset_dims"),
        "collapsed_slice_dims": _ints(collapsed_slice_dims, "Gather", "collapsed_slice_dims"),
        "start_index_map": _ints(start_index_map, "Gather", "start_index_map"),
        "operand_batching_dims": _ints(operand_batching_dims, "Gather", "operand_batching_dims"),
        "start_indices_batching_dims": _ints(start_indices_batching_dims, "Gather",
                                             "start_indices_batching_dims"),
        "index_vector_dim": index_vector_dim,
        "slice_sizes": _ints(slice_sizes, "Gather", "slice_sizes"),
        "indices_are_sorted": indices_are_sorted,
    }
    return apply_op("gather", [operand, start_indices], attrs)


def _gather_shape_rule(operand, start_indices, *, offset_dims, collapsed_slice_dims, start_index_map,
                       index_vector_dim, slice_sizes, operand_batching_dims=(),
                       start_indices_batching_dims=(), indices_are_sorted=False):
    op = "Gather"
    offset_dims, collapsed, start_index_map = tuple(offset_dims), tuple(collapsed_slice_dims), tuple(start_index_map)
    batching, si_batching, slice_sizes = (tuple(operand_batching_dims), tuple(start_indices_batching_dims),
                                          tuple(slice_sizes))
    if not operand.is_array or not start_indices.is_array:
        raise ShapeError(f"{op}: operand and start_indices must be arrays, got {operand} and {start_indices}")
    # gather_i2: start_indices is a tensor of integer type
    if start_indices.element_type not in dtypes.INTEGRAL:
        raise ShapeError(f"{op}: start_indices must have an integer element type, got {start_indices}")
    rank, si_rank = operand.rank, start_indices.rank
    # gather_c2
    if not 0 <= index_vector_dim <= si_rank:
        raise ShapeError(f"{op}: index_vector_dim={index_vector_dim} is out of range for start_indices "
                         f"{start_indices}; it must be in [0, {si_rank}] (= rank means an implicit "
                         f"trailing dimension of size 1)")
    # gather_c3
    index_vector_size = start_indices.dims[index_vector_dim] if index_vector_dim < si_rank else 1
    if not _same_dim(index_vector_size, len(start_index_map)):
        raise ShapeError(f"{op}: start_index_map has {len(start_index_map)} entries {list(start_index_map)} "
                         f"but the index vectors of start_indices {start_indices} (dimension "
                         f"index_vector_dim={index_vector_dim}) have {index_vector_size}")
    # gather_c20
    if len(slice_sizes) != rank:
        raise ShapeError(f"{op}: slice_sizes {list(slice_sizes)} has {len(slice_sizes)} entries but the "
                         f"operand {operand} has rank {rank}")
    # gather_c1
    if len(offset_dims) + len(collapsed) + len(batching) != rank:
        raise ShapeError(f"{op}: the operand {operand} has rank {rank} but offset_dims {list(offset_dims)}, "
                         f"collapsed_slice_dims {list(collapsed)} and operand_batching_dims {list(batching)} "
                         f"have {len(offset_dims)} + {len(collapsed)} + {len(batching)} entries")
    batch_rank = si_rank - (1 if index_vector_dim < si_rank else 0)
    result_rank = batch_rank + len(offset_dims)
    # gather_c4
    if not (_unique(offset_dims) and _sorted(offset_dims)):
        raise ShapeError(f"{op}: offset_dims {list(offset_dims)} must be sorted and without repeats")
    # gather_c5
    _check_in_range(op, "offset_dims", offset_dims, result_rank, f"the result of rank {result_rank}")
    # gather_c6
    if not _unique(collapsed + batching):
        raise ShapeError(f"{op}: collapsed_slice_dims {list(collapsed)} and operand_batching_dims "
                         f"{list(batching)} must not repeat a dimension")
    # gather_c7
    if not _sorted(collapsed):
        raise ShapeError(f"{op}: collapsed_slice_dims {list(collapsed)} must be sorted")
    # gather_c8
    _check_in_range(op, "collapsed_slice_dims", collapsed, rank, f"the operand {operand}")
    # gather_c9
    for d in collapsed:
        if slice_sizes[d] > 1:
            raise ShapeError(f"{op}: slice_sizes[{d}]={slice_sizes[d]} must be 0 or 1 because dimension {d} "
                             f"is in collapsed_slice_dims {list(collapsed)}")
    # gather_c10
    if not _sorted(batching):
        raise ShapeError(f"{op}: operand_batching_dims {list(batching)} must be sorted")
    # gather_c11
    _check_in_range(op, "operand_batching_dims", batching, rank, f"the operand {operand}")
    # gather_c12
    for d in batching:
        if slice_sizes[d] > 1:
            raise ShapeError(f"{op}: slice_sizes[{d}]={slice_sizes[d]} must be 0 or 1 because dimension {d} "
                             f"is in operand_batching_dims {list(batching)}")
    # gather_c13
    if not _unique(si_batching):
        raise ShapeError(f"{op}: start_indices_batching_dims {list(si_batching)} must not repeat a dimension")
    # gather_c14
    _check_in_range(op, "start_indices_batching_dims", si_batching, si_rank, f"start_indices {start_indices}")
    # gather_c15
    if index_vector_dim in si_batching:
        raise ShapeError(f"{op}: index_vector_dim={index_vector_dim} must not be one of "
                         f"start_indices_batching_dims {list(si_batching)}")
    # gather_c16
    if len(batching) != len(si_batching):
        raise ShapeError(f"{op}: operand_batching_dims {list(batching)} and start_indices_batching_dims "
                         f"{list(si_batching)} must have the same number of entries")
    # gather_c17
    for d_operand, d_start in zip(batching, si_batching):
        if not _same_dim(operand.dims[d_operand], start_indices.dims[d_start]):
            raise ShapeError(f"{op}: batching dimensions must have equal sizes: operand dimension {d_operand} "
                             f"of {operand} is {operand.dim_str(d_operand)} but start_indices dimension "
                             f"{d_start} of {start_indices} is {start_indices.dim_str(d_start)}")
    # gather_c18
    if not _unique(start_index_map + batching):
        raise ShapeError(f"{op}: start_index_map {list(start_index_map)} must not repeat a dimension nor "
                         f"name one of operand_batching_dims {list(batching)}")
    # gather_c19
    _check_in_range(op, "start_index_map", start_index_map, rank, f"the operand {operand}")
    # gather_c21
    for d, size in enumerate(slice_sizes):
        if size < 0:
            raise ShapeError(f"{op}: slice_sizes[{d}]={size} is negative")
        if operand.dims[d] is not None and size > operand.dims[d]:
            raise ShapeError(f"{op}: slice_sizes[{d}]={size} is larger than operand dimension {d} ({operand})")
    # gather_c22: batch sizes from start_indices at batch_dims, slice sizes at offset_dims
    batch_dim_sizes = [start_indices.dims[d] for d in _indices_batch_dims(si_rank, index_vector_dim)]
    offset_dim_sizes = [slice_sizes[d] for d in _offset_operand_dims(rank, collapsed, batching)]
    dims = []
    for d in range(result_rank):
        dims.append(offset_dim_sizes.pop(0) if d in offset_dims else batch_dim_sizes.pop(0))
    # gather_c23: the result has the operand's element type
    return Shape(operand.element_type, dims)


def _offset_operand_dims(rank, collapsed_slice_dims, operand_batching_dims):
    """The operand dimensions the offset dimensions index, in order (the spec's
    ``remapped_offset_dims``): all but the collapsed and the batching ones."""
    return [d for d in range(rank) if d not in collapsed_slice_dims and d not in operand_batching_dims]


def _gather_reference(operand, start_indices, *, shape, offset_dims, collapsed_slice_dims, start_index_map,
                      index_vector_dim, slice_sizes, operand_batching_dims=(), start_indices_batching_dims=(),
                      indices_are_sorted=False):
    if operand.ndim == 0:  # a scalar operand: every result element is that scalar
        return np.full(shape.dims, operand, shape.dtype)
    if 0 in operand.shape or 0 in slice_sizes:
        # every slice is empty, so nothing can be read: XLA:CPU gives zeros
        return np.zeros(shape.dims, shape.dtype)
    # result_index[:, *r] is the index of result element r (one row per result dimension)
    result_index = np.indices(shape.dims, dtype=np.int64)
    batch_dims = [d for d in range(shape.rank) if d not in offset_dims]
    batch_index = result_index[batch_dims]
    start_index = _index_vectors(start_indices, index_vector_dim)[tuple(batch_index)]  # [..., k]

    full_start_index = np.zeros((operand.ndim,) + shape.dims, np.int64)
    for d_start, d_operand in enumerate(start_index_map):
        full_start_index[d_operand] = np.clip(start_index[..., d_start], 0,
                                              operand.shape[d_operand] - slice_sizes[d_operand])

    full_batching_index = np.zeros_like(full_start_index)
    for d_operand, d_start in zip(operand_batching_dims, start_indices_batching_dims):
        full_batching_index[d_operand] = batch_index[_batch_position(d_start, index_vector_dim)]

    offset_index = result_index[list(offset_dims)]
    full_offset_index = np.zeros_like(full_start_index)
    full_offset_index[_offset_operand_dims(operand.ndim, collapsed_slice_dims, operand_batching_dims)] = offset_index

    operand_index = full_start_index + full_batching_index + full_offset_index
    return operand[tuple(operand_index)]


def _gather_index_map(operand, start_indices, *, shape, offset_dims, collapsed_slice_dims, start_index_map,
                      index_vector_dim, slice_sizes, operand_batching_dims=(), start_indices_batching_dims=(),
                      indices_are_sorted=False):
    """Per result index, in plain Python: the operand element read, with every intermediate."""
    operand_shape = np.shape(operand)
    indices = start_indices if is_unknown(start_indices) else np.asarray(start_indices)
    rank = len(operand_shape)
    batch_dims = [d for d in range(shape.rank) if d not in offset_dims]
    remapped_offset_dims = _offset_operand_dims(rank, collapsed_slice_dims, operand_batching_dims)

    def access(result_index):
        batch_index = [result_index[d] for d in batch_dims]
        if index_vector_dim == indices.ndim:
            start_indices_index = [tuple(batch_index)]
        else:
            start_indices_index = [tuple(batch_index[:index_vector_dim]) + (k,) + tuple(batch_index[index_vector_dim:])
                                   for k in range(len(start_index_map))]
        offset_index = [result_index[d] for d in offset_dims]
        if is_unknown(indices):  # shapes only: the start is unknown, so is the element read
            return _gather_candidates(result_index, batch_dims, batch_index, start_indices_index, offset_index)
        start_index = [int(indices[i]) for i in start_indices_index]
        unclamped, full_start_index = [0] * rank, [0] * rank
        for d_start, d_operand in enumerate(start_index_map):
            unclamped[d_operand] = start_index[d_start]
            full_start_index[d_operand] = min(max(start_index[d_start], 0),
                                              operand_shape[d_operand] - slice_sizes[d_operand])
        full_batching_index = [0] * rank
        for d_operand, d_start in zip(operand_batching_dims, start_indices_batching_dims):
            full_batching_index[d_operand] = batch_index[_batch_position(d_start, index_vector_dim)]
        offset_index = [result_index[d] for d in offset_dims]
        full_offset_index = [0] * rank
        for d_operand, o in zip(remapped_offset_dims, offset_index):
            full_offset_index[d_operand] = o
        operand_index = tuple(s + b + o for s, b, o in zip(full_start_index, full_batching_index, full_offset_index))
        empty = 0 in operand_shape or 0 in slice_sizes  # empty slices: the result is 0 (XLA:CPU)
        detail = {
            "batch_dims": batch_dims, "batch_index": batch_index,
            "start_indices_index": start_indices_index, "start_index": start_index,
            "full_start_index_before_clamp": unclamped, "full_start_index": full_start_index,
            "full_batching_index": full_batching_index,
            "offset_dims": list(offset_dims), "offset_index": offset_index,
            "full_offset_index": full_offset_index, "operand_index": list(operand_index),
            "empty_slice": empty,
        }
        return Access(result_index, reads=() if empty else ((0, operand_index),),
                      source="init" if empty else "operand",
                      clamped=unclamped != full_start_index, detail=detail)

    def _gather_candidates(result_index, batch_dims, batch_index, start_indices_index, offset_index):
        # a dimension the start indices pick: any clamped start plus the offset; a batching
        # dimension: the batch index; any other: the offset alone
        full_offset_index = [0] * rank
        for d_operand, o in zip(remapped_offset_dims, offset_index):
            full_offset_index[d_operand] = o
        ranges = [(o, o + 1) for o in full_offset_index]
        for d_operand in start_index_map:
            ranges[d_operand] = (full_offset_index[d_operand],
                                 operand_shape[d_operand] - slice_sizes[d_operand] + full_offset_index[d_operand] + 1)
        for d_operand, d_start in zip(operand_batching_dims, start_indices_batching_dims):
            b = batch_index[_batch_position(d_start, index_vector_dim)]
            ranges[d_operand] = (b + full_offset_index[d_operand], b + full_offset_index[d_operand] + 1)
        empty = 0 in operand_shape or 0 in slice_sizes
        return Access(result_index, reads=() if empty else Candidates(ranges), unknown=True, detail={
            "batch_dims": batch_dims, "batch_index": batch_index, "start_indices_index": start_indices_index,
            "offset_dims": list(offset_dims), "offset_index": offset_index, "full_offset_index": full_offset_index,
            "empty_slice": empty})

    return IndexMap("gather", shape.dims, access, operand_shapes=(Shape.of(operand), Shape.of(indices)),
                    result_shape=shape, kind="copy")


registry.register(
    "gather", "Gather", "indexing", _gather_shape_rule, _gather_reference,
    attrs=(Attr("offset_dims", "ints"), Attr("collapsed_slice_dims", "ints"), Attr("start_index_map", "ints"),
           Attr("operand_batching_dims", "ints", default=()),
           Attr("start_indices_batching_dims", "ints", default=()),
           Attr("index_vector_dim", "int"), Attr("slice_sizes", "ints"),
           Attr("indices_are_sorted", "bool", default=False)),
    index_map=_gather_index_map, categories=("data_movement",))
describe("gather", slice_sizes={"kind": "sizes"}, index_vector_dim={"of": "start_indices"},
         start_indices_batching_dims={"of": "start_indices"},
         example={"operand": "f32[3,4]", "start_indices": ("s32[2,1]", [[2], [0]]), "offset_dims": [1],
                  "collapsed_slice_dims": [0], "start_index_map": [0], "index_vector_dim": 1, "slice_sizes": [1, 4]})


# =========================================================================================
# Scatter
# =========================================================================================

def Scatter(operands, scatter_indices, updates, update_computation, *, update_window_dims, inserted_window_dims,
            scatter_dims_to_operand_dims, index_vector_dim, input_batching_dims=(),
            scatter_indices_batching_dims=(), indices_are_sorted=False, unique_indices=False):
    """Wraps XLA's Scatter: ``operands`` with windows at the positions in ``scatter_indices``
    combined with ``updates`` through ``update_computation``.

    ``operands`` and ``updates`` are one array each, or lists of N arrays of one shape
    (variadic: the result is then a tuple of N arrays).  ``update_computation`` takes 2N
    scalars, the N current values then the N update values, and returns the N new values.

    For every ``update_index`` of ``updates[0]`` (the spec's names):

    - ``update_scatter_dims`` are the update dimensions not in ``update_window_dims``;
      ``update_scatter_index = update_index[update_scatter_dims...]``;
    - ``start_index = scatter_indices[si0, ..., :, ..., siN]`` (``:`` at ``index_vector_dim``);
    - ``full_start_index[scatter_dims_to_operand_dims[k]] = start_index[k]``, 0 elsewhere;
    - ``full_batching_index[input_batching_dims[i]] = update_scatter_index[position of
      scatter_indices_batching_dims[i]]``;
    - ``update_window_index = update_index[update_window_dims...]``; ``full_window_index``
      inserts 0 at ``inserted_window_dims`` and ``input_batching_dims``;
    - ``result_index = full_start_index + full_batching_index + full_window_index`` and
      ``results[result_index] = update_computation(results[result_index], updates[update_index])``.

    XLA (not the spec) decides two things: a window that is even partly out of bounds is
    skipped entirely (no clamping, unlike Gather), and the updates are applied scatter
    index by scatter index in row-major order, so duplicates combine in that order.

    Example: ``x.at[idx].add(u)`` for a vector ``x``::

        Scatter(x, idx[:, None], u, lambda a, b: Add(a, b), update_window_dims=[],
                inserted_window_dims=[0], scatter_dims_to_operand_dims=[0], index_vector_dim=1)
    """
    variadic = isinstance(operands, (list, tuple))
    operands = list(operands) if variadic else [operands]
    updates = list(updates) if isinstance(updates, (list, tuple)) else [updates]
    if len(operands) != len(updates):
        raise ShapeError(f"Scatter: {len(operands)} operands but {len(updates)} updates; "
                         f"each operand needs its own updates array (scatter_c5)")
    attrs = {
        "update_window_dims": _ints(update_window_dims, "Scatter", "update_window_dims"),
        "inserted_window_dims": _ints(inserted_window_dims, "Scatter", "inserted_window_dims"),
        "scatter_dims_to_operand_dims": _ints(scatter_dims_to_operand_dims, "Scatter",
                                              "scatter_dims_to_operand_dims"),
        "input_batching_dims": _ints(input_batching_dims, "Scatter", "input_batching_dims"),
        "scatter_indices_batching_dims": _ints(scatter_indices_batching_dims, "Scatter",
                                               "scatter_indices_batching_dims"),
        "index_vector_dim": index_vector_dim,
        "indices_are_sorted": indices_are_sorted,
        "unique_indices": unique_indices,
        "update_computation": update_computation,
    }
    return apply_op("scatter", operands + [scatter_indices] + updates, attrs)


def _split_scatter_operands(values):
    """``(inputs..., scatter_indices, updates...)`` -> (inputs, scatter_indices, updates)."""
    n = (len(values) - 1) // 2
    return list(values[:n]), values[n], list(values[n + 1:])


def _scatter_computation_params(kw, operand_shapes, attrs, index=None):
    inputs, _, _ = _split_scatter_operands(operand_shapes)
    scalars = [Shape(s.element_type, ()) for s in inputs]
    return scalars + scalars


def _compatible_types(a, b):
    # XLA compares a computation's types with the operands' ignoring float precision
    return a == b or (a in dtypes.FLOATING and b in dtypes.FLOATING)


def _scatter_shape_rule(*shapes, update_window_dims, inserted_window_dims, scatter_dims_to_operand_dims,
                        index_vector_dim, update_computation=None, input_batching_dims=(),
                        scatter_indices_batching_dims=(), indices_are_sorted=False, unique_indices=False):
    op = "Scatter"
    # scatter_c5
    if len(shapes) < 3 or len(shapes) % 2 == 0:
        raise ShapeError(f"{op}: expected N operands, scatter_indices and N updates (N >= 1), "
                         f"got {len(shapes)} arrays")
    inputs, indices, updates = _split_scatter_operands(shapes)
    for s in list(inputs) + [indices] + list(updates):
        if not s.is_array:
            raise ShapeError(f"{op}: every operand must be an array, got {s}")
    window_dims, inserted = tuple(update_window_dims), tuple(inserted_window_dims)
    sdtod, batching, si_batching = (tuple(scatter_dims_to_operand_dims), tuple(input_batching_dims),
                                    tuple(scatter_indices_batching_dims))
    operand, update = inputs[0], updates[0]
    # scatter_i2: scatter_indices is a tensor of integer type
    if indices.element_type not in dtypes.INTEGRAL:
        raise ShapeError(f"{op}: scatter_indices must have an integer element type, got {indices}")
    # scatter_c1
    for i, s in enumerate(inputs):
        if s.rank != operand.rank or not all(_same_dim(a, b) for a, b in zip(s.dims, operand.dims)):
            raise ShapeError(f"{op}: all operands must have one shape: operand 0 is {operand}, operand {i} is {s}")
    # scatter_c3
    for i, s in enumerate(updates):
        if s.rank != update.rank or not all(_same_dim(a, b) for a, b in zip(s.dims, update.dims)):
            raise ShapeError(f"{op}: all updates must have one shape: updates 0 is {update}, updates {i} is {s}")
    # scatter_c6
    for i, (s, u) in enumerate(zip(inputs, updates)):
        if s.element_type != u.element_type:
            raise ShapeError(f"{op}: updates {i} ({u}) must have the element type of operand {i} ({s})")
    rank, si_rank = operand.rank, indices.rank
    # scatter_c22
    if not 0 <= index_vector_dim <= si_rank:
        raise ShapeError(f"{op}: index_vector_dim={index_vector_dim} is out of range for scatter_indices "
                         f"{indices}; it must be in [0, {si_rank}] (= rank means an implicit trailing "
                         f"dimension of size 1)")
    # scatter_c2
    if len(window_dims) + len(inserted) + len(batching) != rank:
        raise ShapeError(f"{op}: the operand {operand} has rank {rank} but update_window_dims "
                         f"{list(window_dims)}, inserted_window_dims {list(inserted)} and input_batching_dims "
                         f"{list(batching)} have {len(window_dims)} + {len(inserted)} + {len(batching)} entries")
    # scatter_c7
    if not (_unique(window_dims) and _sorted(window_dims)):
        raise ShapeError(f"{op}: update_window_dims {list(window_dims)} must be sorted and without repeats")
    # scatter_c8
    _check_in_range(op, "update_window_dims", window_dims, update.rank, f"the updates {update}")
    # scatter_c9
    if not _unique(inserted + batching):
        raise ShapeError(f"{op}: inserted_window_dims {list(inserted)} and input_batching_dims {list(batching)} "
                         f"must not repeat a dimension")
    # scatter_c10
    if not _sorted(inserted):
        raise ShapeError(f"{op}: inserted_window_dims {list(inserted)} must be sorted")
    # scatter_c11
    _check_in_range(op, "inserted_window_dims", inserted, rank, f"the operand {operand}")
    # scatter_c12
    if not _sorted(batching):
        raise ShapeError(f"{op}: input_batching_dims {list(batching)} must be sorted")
    # scatter_c13
    _check_in_range(op, "input_batching_dims", batching, rank, f"the operand {operand}")
    # scatter_c14
    if not _unique(si_batching):
        raise ShapeError(f"{op}: scatter_indices_batching_dims {list(si_batching)} must not repeat a dimension")
    # scatter_c15
    _check_in_range(op, "scatter_indices_batching_dims", si_batching, si_rank, f"scatter_indices {indices}")
    # scatter_c16
    if index_vector_dim in si_batching:
        raise ShapeError(f"{op}: index_vector_dim={index_vector_dim} must not be one of "
                         f"scatter_indices_batching_dims {list(si_batching)}")
    # scatter_c17
    if len(batching) != len(si_batching):
        raise ShapeError(f"{op}: input_batching_dims {list(batching)} and scatter_indices_batching_dims "
                         f"{list(si_batching)} must have the same number of entries")
    # scatter_c18
    for d_input, d_start in zip(batching, si_batching):
        if not _same_dim(operand.dims[d_input], indices.dims[d_start]):
            raise ShapeError(f"{op}: batching dimensions must have equal sizes: operand dimension {d_input} of "
                             f"{operand} is {operand.dim_str(d_input)} but scatter_indices dimension {d_start} "
                             f"of {indices} is {indices.dim_str(d_start)}")
    # scatter_c19
    index_vector_size = indices.dims[index_vector_dim] if index_vector_dim < si_rank else 1
    if not _same_dim(index_vector_size, len(sdtod)):
        raise ShapeError(f"{op}: scatter_dims_to_operand_dims has {len(sdtod)} entries {list(sdtod)} but the "
                         f"index vectors of scatter_indices {indices} (dimension index_vector_dim="
                         f"{index_vector_dim}) have {index_vector_size}")
    # scatter_c20
    if not _unique(sdtod + batching):
        raise ShapeError(f"{op}: scatter_dims_to_operand_dims {list(sdtod)} must not repeat a dimension nor "
                         f"name one of input_batching_dims {list(batching)}")
    # scatter_c21
    _check_in_range(op, "scatter_dims_to_operand_dims", sdtod, rank, f"the operand {operand}")
    # scatter_c4: updates = scatter sizes at update_scatter_dims, window sizes at update_window_dims
    update_scatter_dim_sizes = [indices.dims[d] for d in _indices_batch_dims(si_rank, index_vector_dim)]
    if update.rank != len(update_scatter_dim_sizes) + len(window_dims):
        raise ShapeError(f"{op}: the updates {update} must have rank {len(update_scatter_dim_sizes)} (the "
                         f"dimensions of scatter_indices {indices} but index_vector_dim) + "
                         f"{len(window_dims)} (update_window_dims {list(window_dims)})")
    update_scatter_dims = [d for d in range(update.rank) if d not in window_dims]
    for d, size in zip(update_scatter_dims, update_scatter_dim_sizes):
        if not _same_dim(update.dims[d], size):
            raise ShapeError(f"{op}: updates dimension {d} of {update} is {update.dim_str(d)} but the matching "
                             f"dimension of scatter_indices {indices} is {size}")
    for d, d_input in zip(window_dims, _offset_operand_dims(rank, inserted, batching)):
        size, bound = update.dims[d], operand.dims[d_input]
        if size is not None and bound is not None and size > bound:
            raise ShapeError(f"{op}: updates dimension {d} ({update}) is a window dimension of size {size}, "
                             f"larger than operand dimension {d_input} ({operand})")
    # scatter_c23
    if isinstance(update_computation, HloComputation):
        params, result = update_computation.parameter_shapes, update_computation.result_shape
        results = result.tuple_shapes if (len(inputs) > 1 and result.is_tuple) else (result,)
        want = [s.element_type for s in inputs] * 2
        if (len(params) != len(want) or len(results) != len(inputs)
                or not all(p.is_array and p.rank == 0 and _compatible_types(p.element_type, t)
                           for p, t in zip(list(params) + list(results), want + want[:len(inputs)]))):
            expected = ", ".join(want)
            raise ShapeError(f"{op}: update_computation must take {len(want)} scalars ({expected}) and return "
                             f"{len(inputs)}, got {update_computation.signature()}")
    # scatter_c24
    if len(inputs) == 1:
        return operand
    return Shape.tuple(inputs)


def _scatter_plan(operand_shape, scatter_indices, updates_shape, *, update_window_dims, inserted_window_dims,
                  scatter_dims_to_operand_dims, index_vector_dim, input_batching_dims,
                  scatter_indices_batching_dims):
    """The spec's indices for every update element at once, each an array with one row per
    dimension and the updates' shape after it; plus ``in_bounds`` (XLA: the whole window)."""
    rank = len(operand_shape)
    update_index = np.indices(updates_shape, dtype=np.int64)
    update_scatter_dims = [d for d in range(len(updates_shape)) if d not in update_window_dims]
    update_scatter_index = update_index[update_scatter_dims]
    start_index = _index_vectors(scatter_indices, index_vector_dim)[tuple(update_scatter_index)]  # [..., k]

    full_start_index = np.zeros((rank,) + tuple(updates_shape), np.int64)
    for d_start, d_input in enumerate(scatter_dims_to_operand_dims):
        full_start_index[d_input] = start_index[..., d_start]

    full_batching_index = np.zeros_like(full_start_index)
    for d_input, d_start in zip(input_batching_dims, scatter_indices_batching_dims):
        full_batching_index[d_input] = update_scatter_index[_batch_position(d_start, index_vector_dim)]

    update_window_index = update_index[list(update_window_dims)]
    window_operand_dims = _offset_operand_dims(rank, inserted_window_dims, input_batching_dims)
    full_window_index = np.zeros_like(full_start_index)
    full_window_index[window_operand_dims] = update_window_index

    result_index = full_start_index + full_batching_index + full_window_index

    # XLA skips a window unless it fits whole: 0 <= start and start + window size <= dim,
    # written so that nothing overflows for huge start indices
    window_size = [1] * rank
    for d, d_input in zip(update_window_dims, window_operand_dims):
        window_size[d_input] = updates_shape[d]
    window_start = full_start_index + full_batching_index
    in_bounds = np.ones(tuple(updates_shape), bool)
    for d in range(rank):
        in_bounds &= (window_start[d] >= 0) & (window_start[d] <= operand_shape[d] - window_size[d])
    return {"update_scatter_dims": update_scatter_dims, "update_scatter_index": update_scatter_index,
            "start_index": start_index, "full_start_index": full_start_index,
            "full_batching_index": full_batching_index, "update_window_index": update_window_index,
            "full_window_index": full_window_index, "result_index": result_index, "in_bounds": in_bounds}


def _schedule(values, update_scatter_dims, update_window_dims):
    """An updates-shaped array flattened in XLA's order: scatter indices in row-major
    order (the ``update_scatter_dims``), each window in row-major order within."""
    lead = values.ndim - len(update_scatter_dims) - len(update_window_dims)
    perm = list(range(lead)) + [lead + d for d in list(update_scatter_dims) + list(update_window_dims)]
    return np.transpose(values, perm).reshape(values.shape[:lead] + (int(np.prod(values.shape[lead:])),))


def _occurrence(targets):
    """For each target, how many earlier entries have the same value (0 for the first)."""
    order = np.argsort(targets, kind="stable")
    sorted_targets = targets[order]
    position = np.arange(len(targets))
    first = np.ones(len(targets), bool)
    first[1:] = sorted_targets[1:] != sorted_targets[:-1]
    group_start = np.maximum.accumulate(np.where(first, position, 0))
    occurrence = np.empty(len(targets), np.int64)
    occurrence[order] = position - group_start
    return occurrence


def _scatter_reference(*values, shape, update_computation, update_window_dims, inserted_window_dims,
                       scatter_dims_to_operand_dims, index_vector_dim, input_batching_dims=(),
                       scatter_indices_batching_dims=(), indices_are_sorted=False, unique_indices=False):
    inputs, scatter_indices, updates = _split_scatter_operands(values)
    n = len(inputs)
    operand_shape = inputs[0].shape
    plan = _scatter_plan(operand_shape, scatter_indices, updates[0].shape,
                         update_window_dims=update_window_dims, inserted_window_dims=inserted_window_dims,
                         scatter_dims_to_operand_dims=scatter_dims_to_operand_dims,
                         index_vector_dim=index_vector_dim, input_batching_dims=input_batching_dims,
                         scatter_indices_batching_dims=scatter_indices_batching_dims)
    results = [np.array(x, copy=True).reshape(-1) for x in inputs]

    # every update element in XLA's order; the skipped windows left out
    in_bounds = _schedule(plan["in_bounds"], plan["update_scatter_dims"], update_window_dims)
    result_index = _schedule(plan["result_index"], plan["update_scatter_dims"], update_window_dims)[:, in_bounds]
    targets = np.ravel_multi_index(tuple(result_index), operand_shape) if operand_shape else \
        np.zeros(result_index.shape[1], np.int64)
    update_values = [_schedule(np.asarray(u), plan["update_scatter_dims"], update_window_dims)[in_bounds]
                     for u in updates]

    def apply(sel):
        current = [r[targets[sel]] for r in results]
        new = update_computation(*current, *[u[sel] for u in update_values])
        new = tuple(new) if n > 1 else (new,)
        for r, v in zip(results, new):
            r[targets[sel]] = np.asarray(v).astype(r.dtype, copy=False)

    if getattr(update_computation, "is_elementwise", False):
        # rounds of updates in which no two hit the same element: round r applies, for every
        # element, its r-th update; order per element is kept, so any computation is exact
        occurrence = _occurrence(targets)
        for r in range(int(occurrence.max()) + 1 if len(targets) else 0):
            apply(occurrence == r)
    else:
        for i in range(len(targets)):  # one update at a time, on scalars
            apply(i)
    out = tuple(r.reshape(operand_shape) for r in results)
    return out if n > 1 else out[0]


def _scatter_index_map(*values, shape, update_computation, update_window_dims, inserted_window_dims,
                       scatter_dims_to_operand_dims, index_vector_dim, input_batching_dims=(),
                       scatter_indices_batching_dims=(), indices_are_sorted=False, unique_indices=False):
    """Per update index, in plain Python: the result index it combines into, or skipped."""
    inputs, scatter_indices, updates = _split_scatter_operands(values)
    n = len(inputs)
    operand_shape = tuple(np.shape(inputs[0]))
    updates_shape = tuple(np.shape(updates[0]))
    indices = scatter_indices if is_unknown(scatter_indices) else np.asarray(scatter_indices)
    rank = len(operand_shape)
    update_scatter_dims = [d for d in range(len(updates_shape)) if d not in update_window_dims]
    window_operand_dims = _offset_operand_dims(rank, inserted_window_dims, input_batching_dims)
    window_size = [1] * rank
    for d, d_input in zip(update_window_dims, window_operand_dims):
        window_size[d_input] = updates_shape[d]
    window_shape = [updates_shape[d] for d in update_window_dims]
    window_count = int(np.prod(window_shape, dtype=np.int64))
    scatter_shape = [updates_shape[d] for d in update_scatter_dims]

    def access(update_index):
        update_scatter_index = [update_index[d] for d in update_scatter_dims]
        if index_vector_dim == indices.ndim:
            indices_index = [tuple(update_scatter_index)]
        else:
            indices_index = [tuple(update_scatter_index[:index_vector_dim]) + (k,)
                             + tuple(update_scatter_index[index_vector_dim:])
                             for k in range(len(scatter_dims_to_operand_dims))]
        reads = tuple((n + 1 + j, update_index) for j in range(n))
        if is_unknown(indices):  # shapes only: where the update goes is not known
            window_index = [update_index[d] for d in update_window_dims]
            full_window = [0] * rank
            for d_input, w in zip(window_operand_dims, window_index):
                full_window[d_input] = w
            ranges = [(w, w + 1) for w in full_window]
            for d_input in scatter_dims_to_operand_dims:
                ranges[d_input] = (full_window[d_input], operand_shape[d_input] - window_size[d_input]
                                   + full_window[d_input] + 1)
            for d_input, d_start in zip(input_batching_dims, scatter_indices_batching_dims):
                b = update_scatter_index[_batch_position(d_start, index_vector_dim)]
                ranges[d_input] = (b + full_window[d_input], b + full_window[d_input] + 1)
            return Access(update_index, reads=reads, writes=Candidates(ranges, range(n)), unknown=True, detail={
                "update_scatter_dims": update_scatter_dims, "update_scatter_index": update_scatter_index,
                "scatter_indices_index": indices_index, "update_window_dims": list(update_window_dims),
                "update_window_index": window_index, "full_window_index": full_window})
        start_index = [int(indices[i]) for i in indices_index]
        full_start_index = [0] * rank
        for d_start, d_input in enumerate(scatter_dims_to_operand_dims):
            full_start_index[d_input] = start_index[d_start]
        full_batching_index = [0] * rank
        for d_input, d_start in zip(input_batching_dims, scatter_indices_batching_dims):
            full_batching_index[d_input] = update_scatter_index[_batch_position(d_start, index_vector_dim)]
        update_window_index = [update_index[d] for d in update_window_dims]
        full_window_index = [0] * rank
        for d_input, w in zip(window_operand_dims, update_window_index):
            full_window_index[d_input] = w
        result_index = tuple(s + b + w for s, b, w in zip(full_start_index, full_batching_index, full_window_index))
        window_start = [s + b for s, b in zip(full_start_index, full_batching_index)]
        skipped = not all(0 <= s <= dim - size for s, dim, size in zip(window_start, operand_shape, window_size))
        scatter_position = int(np.ravel_multi_index(update_scatter_index, scatter_shape)) if scatter_shape else 0
        window_position = int(np.ravel_multi_index(update_window_index, window_shape)) if window_shape else 0
        detail = {
            "update_scatter_dims": update_scatter_dims, "update_scatter_index": update_scatter_index,
            "scatter_indices_index": indices_index, "start_index": start_index,
            "full_start_index": full_start_index, "full_batching_index": full_batching_index,
            "update_window_dims": list(update_window_dims), "update_window_index": update_window_index,
            "full_window_index": full_window_index, "result_index": list(result_index),
            "window_start": window_start, "window_size": window_size,
            # position in XLA's order of application (duplicates combine in this order)
            "schedule_position": scatter_position * window_count + window_position,
        }
        writes = () if skipped else tuple((j, result_index) for j in range(n))
        return Access(update_index, reads=reads, writes=writes, skipped=skipped, detail=detail)

    return IndexMap("scatter", updates_shape, access, operand_shapes=tuple(Shape.of(v) for v in values),
                    result_shape=shape, domain="updates", combiner=update_computation, kind="scatter")


registry.register(
    "scatter", "Scatter", "indexing", _scatter_shape_rule, _scatter_reference,
    attrs=(Attr("update_window_dims", "ints"), Attr("inserted_window_dims", "ints"),
           Attr("scatter_dims_to_operand_dims", "ints"),
           Attr("input_batching_dims", "ints", default=()),
           Attr("scatter_indices_batching_dims", "ints", default=()),
           Attr("index_vector_dim", "int"),
           Attr("indices_are_sorted", "bool", default=False), Attr("unique_indices", "bool", default=False),
           Attr("update_computation", "computation", hlo="to_apply")),
    index_map=_scatter_index_map, computation_params=_scatter_computation_params,
    categories=("data_movement",))
describe("scatter", scatter_indices_batching_dims={"of": "scatter_indices"},
         example={"operands": ["f32[3,3]"], "scatter_indices": ("s32[2]", [0, 2]), "updates": ("f32[2,3]", 1),
                  "update_computation": "Add", "update_window_dims": [1], "inserted_window_dims": [0],
                  "scatter_dims_to_operand_dims": [0], "index_vector_dim": 1})

__all__ = ["Gather", "Scatter"]
