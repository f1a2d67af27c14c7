"""Reductions, windows and sorting: Reduce, ReduceWindow, SelectAndScatter, Sort, TopK.

Each op follows the spec's "Operation Semantics" page (spec/001 for the newest
arguments: variadic ReduceWindow, dilations; total-order comparisons for Sort).  Rule
labels (``# reduce_c4``) are StableHLO's constraint numbers for the same op.

Where XLA leaves something open, the reference picks one documented answer:

- the order in which a reduction combines elements is unspecified in XLA.  Here an
  element-wise computation (``region.is_elementwise``) is applied pairwise (a balanced
  tree over the reduced elements, then ``computation(init, tree)``); any other
  computation is folded left to right from ``init`` as the spec's recursion
  ``f_0 = f(init, v_0), f_1 = f(f_0, v_1), ...`` writes it;
- padding cells and base-dilation holes of a window are skipped, as XLA's evaluator and
  its CPU/GPU emitters skip them (a window that is all padding gives the init value);
- Sort is always stable (a valid answer for ``is_stable=False`` too);
- SelectAndScatter combines the source values that select the same element in source
  order (row-major).
"""
import functools

import numpy as np

from .. import dtypes
from ..builder import XlaOp, apply_op
from ..coerce import as_int, as_int_list
from ..hlo.attrs import int_tuples
from ..errors import ShapeError
from ..hlo.attrs import Attr, Window, parse_ints
from ..shapes import Shape
from .arguments import describe
from . import registry
from .index_map import Access, Candidates, IndexMap, is_unknown


# -- helpers shared by the ops of this family -------------------------------------------

def _as_list(x):
    """One operand or a sequence of operands -> a list."""
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _dims_of(x):
    if isinstance(x, XlaOp):
        return x.shape.dims
    return np.shape(x)


def _scalar(element_type):
    return Shape(element_type, ())


def _check_region(opname, kw, comp, param_types, result_types):
    """``comp`` takes scalars of ``param_types`` and returns scalars of ``result_types``
    (a tuple when there are several; a 1-tuple is accepted for one).  Python callables
    not traced yet (``xe.index_map("reduce", ...)``) are not checked."""
    if comp is None:
        raise ShapeError(f"{opname}: the {kw} computation is required")
    params = getattr(comp, "parameter_shapes", None)
    if params is None:
        return
    name = getattr(comp, "name", None) or getattr(getattr(comp, "computation", None), "name", "?")
    want = ", ".join(f"{t}[]" for t in param_types)
    if len(params) != len(param_types):
        raise ShapeError(f"{opname}: {kw} {name} takes {len(params)} parameters "
                         f"({', '.join(map(str, params))}) but {opname} calls it with "
                         f"{len(param_types)} scalars ({want})")
    for i, (p, t) in enumerate(zip(params, param_types)):
        if not (p.is_array and p.rank == 0 and p.element_type == t):
            raise ShapeError(f"{opname}: parameter {i} of {kw} {name} is {p}, expected {t}[] "
                             f"(the parameters must be {want})")
    out = comp.result_shape
    leaves = list(out.tuple_shapes) if out.is_tuple else [out]
    got = [s.element_type if s.is_array and s.rank == 0 else str(s) for s in leaves]
    if got != list(result_types):
        want_out = (f"{result_types[0]}[]" if len(result_types) == 1 else
                    "(" + ", ".join(f"{t}[]" for t in result_types) + ")")
        raise ShapeError(f"{opname}: {kw} {name} returns {out}, expected {want_out}")


def _callable(comp):
    """A computation attribute as a callable (index maps may get an unbound HloComputation)."""
    if comp is None or callable(comp):
        return comp
    from ..executors.reference import ExecutionContext, Region
    return Region(comp, ExecutionContext())


def _elementwise(fn):
    return bool(getattr(fn, "is_elementwise", False))


def _call(region, args, n):
    """Call a region and return its ``n`` results as a list."""
    out = region(*args)
    if isinstance(out, (tuple, list)):
        out = list(out)
        if len(out) != n:
            raise ValueError(f"the computation returned {len(out)} values, expected {n}")
        return out
    if n != 1:
        raise ValueError(f"the computation returned one value, expected a tuple of {n}")
    return [out]


def _fold(region, inits, elems, valid, dtypes_out):
    """Combine ``elems[k][r..., j]`` over ``j`` (the last axis) into one value per ``r``,
    starting from ``inits``; elements where ``valid`` is False are skipped.

    Element-wise regions: a pairwise tree, vectorised over ``r`` (log2 of the element count
    region calls), then ``region(init, tree)``.  Other regions: the spec's left fold,
    one scalar call per element.
    """
    n = len(elems)
    lead, count = elems[0].shape[:-1], elems[0].shape[-1]
    inits = [np.asarray(i, dtype=dt) for i, dt in zip(inits, dtypes_out)]
    if count == 0 or int(np.prod(lead, dtype=np.int64)) == 0:
        return [np.full(lead, i, dtype=dt) for i, dt in zip(inits, dtypes_out)]
    if _elementwise(region):
        acc = list(elems)
        ok = valid
        while acc[0].shape[-1] > 1:
            k = acc[0].shape[-1]
            half = k // 2
            left = [a[..., 0:2 * half:2] for a in acc]
            right = [a[..., 1:2 * half:2] for a in acc]
            both = _call(region, left + right, n)
            if ok is not None:
                lv, rv = ok[..., 0:2 * half:2], ok[..., 1:2 * half:2]
                both = [np.where(lv & rv, c, np.where(lv, lft, rgt))
                        for c, lft, rgt in zip(both, left, right)]
                new_ok = lv | rv
            if k % 2:
                both = [np.concatenate([c, a[..., -1:]], axis=-1) for c, a in zip(both, acc)]
                if ok is not None:
                    new_ok = np.concatenate([new_ok, ok[..., -1:]], axis=-1)
            acc = [np.asarray(c, dtype=dt) for c, dt in zip(both, dtypes_out)]
            if ok is not None:
                ok = new_ok
        last = [a[..., 0] for a in acc]
        out = _call(region, [np.broadcast_to(i, lead) for i in inits] + last, n)
        out = [np.asarray(o, dtype=dt) for o, dt in zip(out, dtypes_out)]
        if ok is not None:
            out = [np.where(ok[..., 0], o, i).astype(dt) for o, i, dt in zip(out, inits, dtypes_out)]
        return [np.broadcast_to(o, lead).copy() for o in out]
    results = [np.empty(lead, dtype=dt) for dt in dtypes_out]
    for r in np.ndindex(*lead):
        acc = list(inits)
        for j in range(count):
            if valid is None or valid[r + (j,)]:
                acc = _call(region, acc + [np.asarray(e[r + (j,)]) for e in elems], n)
        for res, a in zip(results, acc):
            res[r] = a
    return results


def _collate(arrays, shape):
    """The spec's Collate: one array, or a tuple of them when the result is a tuple."""
    return tuple(arrays) if shape.is_tuple else arrays[0]


def _split_operands(opname, shapes):
    """Reduce and ReduceWindow take N operands then N init values."""
    if not shapes or len(shapes) % 2:
        raise ShapeError(f"{opname}: takes N operands and N init_values (N >= 1), got "
                         f"{len(shapes)} arrays ({', '.join(map(str, shapes))})")
    n = len(shapes) // 2
    operands, inits = shapes[:n], shapes[n:]
    for i, s in enumerate(operands):
        if not s.is_array:
            raise ShapeError(f"{opname}: operands[{i}] must be an array, got {s}")
        # reduce_c1 (reduce_window_c2): all operands have the same dimensions
        if s.dims != operands[0].dims:
            raise ShapeError(f"{opname}: operands[{i}] is {s} but operands[0] is {operands[0]}; "
                             "all operands must have the same dimensions")
    for i, (s, op) in enumerate(zip(inits, operands)):
        # reduce_c2: init_values[i] is a scalar of type T_i (the same check for ReduceWindow, c3)
        if not s.is_array or s.rank != 0:
            raise ShapeError(f"{opname}: init_values[{i}] must be a scalar, got {s}")
        if s.element_type != op.element_type:
            raise ShapeError(f"{opname}: init_values[{i}] is {s} but operands[{i}] has element type "
                             f"{op.element_type}; they must have the same type")
    return operands, inits


# -- Reduce ------------------------------------------------------------------------------

def Reduce(operands, init_values, computation, dimensions):
    """Wraps XLA's Reduce: fold ``dimensions`` of ``operands`` with ``computation``.

    For N operands of types ``T_0..T_{N-1}`` (all of one shape) and N scalar init values,
    ``computation`` takes ``(acc_0, ..., acc_{N-1}, x_0, ..., x_{N-1})`` and returns the
    new accumulators (a tuple when N > 1).  The result drops ``dimensions`` (the other
    dimensions keep their order); for N > 1 it is a tuple of N arrays.  Each result element
    is ``f(... f(f(init, v_0), v_1) ..., v_{K-1})`` over the elements reduced into it, in an
    order XLA leaves open::

        Reduce(np.array([[1, 2, 3], [4, 5, 6]], np.float32), np.float32(0),
               lambda a, b: Add(a, b), dimensions=[0])      # -> [5, 7, 9]
    """
    ops, inits = _as_list(operands), _as_list(init_values)
    if len(ops) != len(inits):
        raise ShapeError(f"Reduce: {len(ops)} operands but {len(inits)} init_values; give one "
                         "init value per operand")
    return apply_op("reduce", ops + inits, {"dimensions": dimensions, "computation": computation})


def _reduce_params(kw, shapes, attrs, index=None):
    n = len(shapes) // 2
    return [_scalar(s.element_type) for s in shapes[n:]] + [_scalar(s.element_type) for s in shapes[:n]]


def _reduce_shape_rule(*shapes, computation, dimensions):
    operands, inits = _split_operands("Reduce", shapes)
    rank = operands[0].rank
    dimensions = tuple(int(d) for d in dimensions)
    for d in dimensions:
        # reduce_c4: 0 <= dimensions[i] < rank(operand)
        if not 0 <= d < rank:
            raise ShapeError(f"Reduce: dimensions={list(dimensions)} has {d}, out of range for "
                             f"operands of rank {rank} ({operands[0]})")
    # reduce_c5: the dimensions are unique
    if len(set(dimensions)) != len(dimensions):
        raise ShapeError(f"Reduce: dimensions={list(dimensions)} repeats a dimension")
    types = [s.element_type for s in inits]
    # reduce_c6: computation has type (T_0..T_{N-1}, T_0..T_{N-1}) -> Collate(T_0..T_{N-1})
    _check_region("Reduce", "computation", computation, types + [s.element_type for s in operands], types)
    dims = [operands[0].dims[d] for d in range(rank) if d not in dimensions]
    results = [Shape(t, dims) for t in types]
    return results[0] if len(results) == 1 else Shape.tuple(results)


def _reduce_reference(*values, shape, computation, dimensions):
    n = len(values) // 2
    operands, init_values = values[:n], values[n:]
    rank = operands[0].ndim
    reduced = sorted(int(d) for d in dimensions)
    kept = [d for d in range(rank) if d not in reduced]
    result_dims = tuple(operands[0].shape[d] for d in kept)
    count = int(np.prod([operands[0].shape[d] for d in reduced], dtype=np.int64))
    # operand[r..., d...]: the kept dimensions first, the reduced ones last, row-major
    elems = [np.transpose(op, kept + reduced).reshape(result_dims + (count,)) for op in operands]
    out_shapes = shape.tuple_shapes if shape.is_tuple else [shape]
    results = _fold(computation, init_values, elems, None, [s.dtype for s in out_shapes])
    return _collate(results, shape)


def _reduce_index_map(*values, shape, computation, dimensions):
    n = len(values) // 2
    operand_shape = np.shape(values[0])
    reduced = sorted(int(d) for d in dimensions)
    kept = [d for d in range(len(operand_shape)) if d not in reduced]
    domain = shape.tuple_shapes[0].dims if shape.is_tuple else shape.dims

    def fn(result_index):
        reads = []
        for reduced_index in np.ndindex(*[operand_shape[d] for d in reduced]):
            operand_index = [0] * len(operand_shape)
            for d, i in zip(kept, result_index):
                operand_index[d] = i
            for d, i in zip(reduced, reduced_index):
                operand_index[d] = int(i)
            reads.extend((k, tuple(operand_index)) for k in range(n))
        return Access(result_index, reads=tuple(reads), source="operand" if reads else "init",
                      detail={"reduced_dimensions": tuple(reduced), "kept_dimensions": tuple(kept)})

    return IndexMap("reduce", domain, fn, operand_shapes=[np.shape(v) for v in values],
                    result_shape=shape, kind="reduce", combiner=computation)


registry.register("reduce", "Reduce", "reduction", _reduce_shape_rule, _reduce_reference,
                  attrs=(Attr("dimensions", "ints"), Attr("computation", "computation", hlo="to_apply")),
                  index_map=_reduce_index_map, computation_params=_reduce_params,
                  categories=("reduction",))
describe("reduce", init_values={"of": "operands"}, example={"operands": ["f32[2,3]"], "init_values": [("f32[]", 0)], "computation": "Add",
                           "dimensions": [1]})


# -- windows (ReduceWindow, SelectAndScatter) -------------------------------------------

PADDING, HOLE = -1, -2


def _resolve_padding(opname, padding, dims, window_dimensions, window_strides, base_dilations=None,
                     window_dilations=None):
    """``"SAME"`` / ``"VALID"`` or (low, high) pairs -> a tuple of (low, high) pairs.

    SAME pads (split low-first, the extra cell high) so that the result has
    ``ceil(dilated_size / stride)`` elements; VALID does not pad.
    """
    rank = len(dims)
    if isinstance(padding, str):
        kind = padding.upper()
        if kind == "VALID":
            return tuple((0, 0) for _ in range(rank))
        if kind != "SAME":
            raise ShapeError(f"{opname}: padding={padding!r}; use 'SAME', 'VALID' or (low, high) pairs")
        if len(window_dimensions) != rank or len(window_strides) != rank:
            raise ShapeError(f"{opname}: padding='SAME' needs window_dimensions and window_strides of "
                             f"length {rank} (the rank), got {list(window_dimensions)} and "
                             f"{list(window_strides)}")
        base_dilations = base_dilations or (1,) * rank
        window_dilations = window_dilations or (1,) * rank
        pads = []
        for n, w, s, bd, wd in zip(dims, window_dimensions, window_strides, base_dilations, window_dilations):
            if n is None or s <= 0:
                raise ShapeError(f"{opname}: padding='SAME' needs static sizes and positive strides")
            size = (n - 1) * bd + 1 if n > 0 else 0
            out = -(-size // s)
            total = max((out - 1) * s + (w - 1) * wd + 1 - size, 0)
            pads.append((total // 2, total - total // 2))
        return tuple(pads)
    if not isinstance(padding, (list, tuple, np.ndarray)):
        raise ShapeError(f"{opname}: padding={padding!r} must be 'SAME', 'VALID' or a list of "
                         "(low, high) pairs, one per dimension")
    return int_tuples(opname, "padding", padding, (2,), "(low, high)")


def _check_window(opname, operand, window_dimensions, window_strides, padding, base_dilations,
                  window_dilations):
    """The window rules shared by ReduceWindow and SelectAndScatter; returns the result dims."""
    rank = operand.rank
    fields = [("window_dimensions", window_dimensions), ("window_strides", window_strides),
              ("padding", padding), ("base_dilations", base_dilations),
              ("window_dilations", window_dilations)]
    for name, v in fields:
        # reduce_window_c4, c6, c8, c10, c12: one entry per operand dimension
        if len(v) != rank:
            raise ShapeError(f"{opname}: {name}={[tuple(x) if isinstance(x, tuple) else x for x in v]} "
                             f"has {len(v)} entries but the operand {operand} has rank {rank}; "
                             "give one per dimension")
    for name, v in fields:
        if name == "padding":
            continue
        for i, x in enumerate(v):
            # reduce_window_c5, c7, c9, c11: sizes, strides and dilations are positive
            if int(x) <= 0:
                raise ShapeError(f"{opname}: {name}[{i}]={x} must be positive ({name}={list(v)})")
    dims = []
    for d in range(rank):
        n = operand.dims[d]
        if n is None:
            dims.append(None)
            continue
        dilated = (n - 1) * base_dilations[d] + 1 if n > 0 else 0
        padded = padding[d][0] + dilated + padding[d][1]
        window = (window_dimensions[d] - 1) * window_dilations[d] + 1
        # result size: the number of window positions that fit in the padded, dilated base
        dims.append(0 if padded < window else (padded - window) // window_strides[d] + 1)
    return dims


def _window_axis(n, size, stride, pad_low, base_dilation, window_dilation, positions):
    """One dimension of the window geometry: for each result position ``r`` in ``positions``
    and window position ``w``, the operand index read, or PADDING / HOLE.

    The window's cell sits at ``p = r * stride + w * window_dilation`` in the padded,
    base-dilated operand; ``q = p - pad_low`` is its place in the dilated operand, a real
    element ``q / base_dilation`` when ``q`` is inside and divisible by the dilation.
    """
    r = np.asarray(positions).reshape(-1, 1)
    w = np.arange(size).reshape(1, -1)
    p = r * stride + w * window_dilation
    q = p - pad_low
    dilated = (n - 1) * base_dilation + 1 if n > 0 else 0
    inside = (q >= 0) & (q < dilated)
    return np.where(~inside, PADDING, np.where(q % base_dilation != 0, HOLE, q // base_dilation))


def _window_cells(result_index, operand_dims, window_dimensions, window_strides, padding,
                  base_dilations, window_dilations):
    """The window of one result element, cell by cell in row-major window order:
    ``(window_index, padded_index, kind, operand_index)``, kind "operand"/"padding"/"hole"."""
    per_dim = []
    for d, r in enumerate(result_index):
        axis = _window_axis(operand_dims[d], window_dimensions[d], window_strides[d], padding[d][0],
                            base_dilations[d], window_dilations[d], [r])[0]
        per_dim.append(axis)
    cells = []
    for window_index in np.ndindex(*window_dimensions):
        codes = [int(per_dim[d][w]) for d, w in enumerate(window_index)]
        padded = tuple(int(r * window_strides[d] + w * window_dilations[d])
                       for d, (r, w) in enumerate(zip(result_index, window_index)))
        if any(c == PADDING for c in codes):
            kind, operand_index = "padding", None
        elif any(c == HOLE for c in codes):
            kind, operand_index = "hole", None
        else:
            kind, operand_index = "operand", tuple(codes)
        cells.append((tuple(int(w) for w in window_index), padded, kind, operand_index))
    return cells


def _window_values(operands, positions, window_dimensions, window_strides, padding, base_dilations,
                   window_dilations, with_index=False):
    """The windows at result ``positions`` (one array of positions per dimension) of every
    operand at once: arrays ``[out..., K]`` (K cells, row-major), the mask of cells that
    are real elements (not padding, not holes) and, ``with_index``, their flat operand
    indices."""
    rank = operands[0].ndim
    index, valid = [], np.ones((1,) * (2 * rank), bool)
    for d in range(rank):
        axis = _window_axis(operands[0].shape[d], window_dimensions[d], window_strides[d], padding[d][0],
                            base_dilations[d], window_dilations[d], positions[d])
        shape = [1] * (2 * rank)
        shape[d], shape[rank + d] = axis.shape
        axis = axis.reshape(shape)
        valid = valid & (axis >= 0)
        index.append(np.maximum(axis, 0))
    out_dims = tuple(len(p) for p in positions)
    full = out_dims + tuple(window_dimensions)
    valid = np.broadcast_to(valid, full)
    count = int(np.prod(window_dimensions, dtype=np.int64))
    values = []
    for op in operands:
        if op.size == 0 or not valid.any():
            v = np.zeros(full, op.dtype)
        else:
            v = op[tuple(index)] if rank else op[()]
        values.append(np.broadcast_to(v, full).reshape(out_dims + (count,)))
    flat_index = None
    if with_index:
        flat_index = np.zeros(full, np.int64)
        if rank:
            flat_index = np.ravel_multi_index(tuple(np.broadcast_to(i, full) for i in index),
                                              [max(int(n), 1) for n in operands[0].shape])
        flat_index = flat_index.reshape(out_dims + (count,))
    return values, valid.reshape(out_dims + (count,)), flat_index


#: window cells materialised at once (the references work in blocks of results below it)
_BLOCK = 1 << 22


def _in_blocks(out_dims, count, fn):
    """``fn(positions) -> [array, ...]`` for all result positions, in blocks along the largest
    result dimension so that at most about ``_BLOCK`` window cells exist at once; the
    blocks' arrays are joined along that dimension."""
    positions = [np.arange(n) for n in out_dims]
    total = int(np.prod(out_dims, dtype=np.int64)) * count
    if total <= _BLOCK or not out_dims:
        return fn(positions)
    d = int(np.argmax(out_dims))
    step = max(1, out_dims[d] * _BLOCK // total)
    parts = []
    for start in range(0, out_dims[d], step):
        block = list(positions)
        block[d] = positions[d][start:start + step]
        parts.append(fn(block))
    return [np.concatenate(arrays, axis=d) for arrays in zip(*parts)]


def _window_attrs(opname, dims, window_dimensions, window_strides, padding, base_dilations=None,
                  window_dilations=None):
    rank = len(dims)
    window_dimensions = as_int_list(opname, "window_dimensions", window_dimensions)
    window_strides = as_int_list(opname, "window_strides", window_strides) if window_strides is not None \
        else (1,) * rank
    base_dilations = as_int_list(opname, "base_dilations", base_dilations) if base_dilations is not None \
        else (1,) * rank
    window_dilations = as_int_list(opname, "window_dilations", window_dilations) if window_dilations is not None \
        else (1,) * rank
    padding = _resolve_padding(opname, padding, dims, window_dimensions, window_strides, base_dilations,
                               window_dilations)
    return window_dimensions, window_strides, padding, base_dilations, window_dilations


# -- ReduceWindow ------------------------------------------------------------------------

_REDUCE_WINDOW = Window({"size": "window_dimensions", "stride": "window_strides", "pad": "padding",
                         "lhs_dilate": "base_dilations", "rhs_dilate": "window_dilations"})


def ReduceWindow(operands, init_values, computation, window_dimensions, window_strides, padding,
                 base_dilations=None, window_dilations=None):
    """Wraps XLA's ReduceWindow: reduce every window of ``operands`` with ``computation``.

    The operand is (conceptually) base-dilated (``base_dilations - 1`` holes between
    elements) and padded (``padding``: (low, high) pairs, or "SAME"/"VALID"); a window of
    ``window_dimensions`` cells spaced by ``window_dilations`` moves by ``window_strides``
    over it.  Result element ``r`` folds the real elements of the window at
    ``r * window_strides`` (padding and holes do not contribute) starting from the init
    value.  N operands (with N init values) reduce together, as in Reduce::

        ReduceWindow(np.array([10000, 1000, 100, 10, 1], np.float32), np.float32(np.inf),
                     lambda a, b: Min(a, b), [3], [2], "SAME")        # -> [1000, 10, 1]
    """
    ops, inits = _as_list(operands), _as_list(init_values)
    if len(ops) != len(inits):
        raise ShapeError(f"ReduceWindow: {len(ops)} operands but {len(inits)} init_values; give one "
                         "init value per operand")
    dims = _dims_of(ops[0])
    wd, ws, pad, bd, wdl = _window_attrs("ReduceWindow", dims, window_dimensions, window_strides, padding,
                                         base_dilations, window_dilations)
    return apply_op("reduce-window", ops + inits,
                    {"window_dimensions": wd, "window_strides": ws, "padding": pad, "base_dilations": bd,
                     "window_dilations": wdl, "computation": computation})


def _reduce_window_shape_rule(*shapes, computation, window_dimensions, window_strides, padding,
                              base_dilations=None, window_dilations=None):
    operands, inits = _split_operands("ReduceWindow", shapes)
    wd, ws, pad, bd, wdl = _window_attrs("ReduceWindow", operands[0].dims, window_dimensions,
                                         window_strides, padding, base_dilations, window_dilations)
    dims = _check_window("ReduceWindow", operands[0], wd, ws, pad, bd, wdl)
    types = [s.element_type for s in inits]
    # reduce_window_c13: computation has type (T_0..T_{N-1}, T_0..T_{N-1}) -> Collate(T_0..T_{N-1})
    _check_region("ReduceWindow", "computation", computation, types + [s.element_type for s in operands],
                  types)
    results = [Shape(t, dims) for t in types]
    return results[0] if len(results) == 1 else Shape.tuple(results)


def _reduce_window_reference(*values, shape, computation, window_dimensions, window_strides, padding,
                             base_dilations=None, window_dilations=None):
    n = len(values) // 2
    operands, init_values = values[:n], values[n:]
    out_shapes = shape.tuple_shapes if shape.is_tuple else [shape]
    wd, ws, pad, bd, wdl = _window_attrs("ReduceWindow", operands[0].shape, window_dimensions, window_strides,
                                         padding, base_dilations, window_dilations)

    def reduce_block(positions):
        windows, valid, _ = _window_values(operands, positions, wd, ws, pad, bd, wdl)
        return _fold(computation, init_values, windows, valid, [s.dtype for s in out_shapes])

    results = _in_blocks(out_shapes[0].dims, int(np.prod(wd, dtype=np.int64)), reduce_block)
    return _collate(results, shape)


def _reduce_window_index_map(*values, shape, computation, window_dimensions, window_strides, padding,
                             base_dilations=None, window_dilations=None):
    """Per result element: the operand elements of its window (``reads``, every operand
    for N > 1), and in ``detail``: ``window_position`` (the window's first cell in the
    padded, dilated operand), ``cells`` (each window cell: window index, padded index,
    "operand"/"padding"/"hole", operand index), ``padding_cells`` and ``hole_cells``."""
    n = len(values) // 2
    operand_dims = np.shape(values[0])
    wd, ws, pad, bd, wdl = _window_attrs("ReduceWindow", operand_dims, window_dimensions, window_strides,
                                         padding, base_dilations, window_dilations)
    domain = shape.tuple_shapes[0].dims if shape.is_tuple else shape.dims

    def fn(result_index):
        cells = _window_cells(result_index, operand_dims, wd, ws, pad, bd, wdl)
        reads = tuple((k, c[3]) for c in cells if c[2] == "operand" for k in range(n))
        detail = {
            "window_position": tuple(int(r * s) for r, s in zip(result_index, ws)),
            "cells": cells,
            "padding_cells": tuple(c[0] for c in cells if c[2] == "padding"),
            "hole_cells": tuple(c[0] for c in cells if c[2] == "hole"),
        }
        return Access(result_index, reads=reads, source="operand" if reads else "init", detail=detail)

    return IndexMap("reduce-window", domain, fn, operand_shapes=[np.shape(v) for v in values],
                    result_shape=shape, kind="reduce", combiner=computation)


registry.register("reduce-window", "ReduceWindow", "reduction", _reduce_window_shape_rule,
                  _reduce_window_reference,
                  attrs=(_REDUCE_WINDOW, Attr("computation", "computation", hlo="to_apply")),
                  index_map=_reduce_window_index_map, computation_params=_reduce_params,
                  categories=("reduction",))
describe("reduce-window", init_values={"of": "operands"}, example={"operands": ["f32[4,4]"], "init_values": [("f32[]", 0)], "computation": "Add",
                                  "window_dimensions": [2, 2], "window_strides": [2, 2], "padding": [(0, 0), (0, 0)]})


# -- SelectAndScatter --------------------------------------------------------------------

_SELECT_AND_SCATTER_WINDOW = Window({"size": "window_dimensions", "stride": "window_strides",
                                     "pad": "padding"})


def SelectAndScatter(operand, select, window_dimensions, window_strides, padding, source, init_value,
                     scatter):
    """Wraps XLA's SelectAndScatter: in each window of ``operand`` pick one element with
    ``select``, and combine the window's ``source`` value into that element of the result
    with ``scatter``; elements nobody picks keep ``init_value``.

    ``select(a, b)`` is called with ``a`` earlier in the window (row-major) than ``b``; True
    keeps ``a``.  ``source`` has the shape ReduceWindow would give on ``operand`` with the
    same window; the result has the shape of ``operand``.  It is the gradient of max
    pooling (select = GE, scatter = Add)::

        SelectAndScatter(x, lambda a, b: Ge(a, b), [2, 2], [2, 2], "VALID", g,
                         np.float32(0), lambda a, b: Add(a, b))
    """
    dims = _dims_of(operand)
    wd, ws, pad, _, _ = _window_attrs("SelectAndScatter", dims, window_dimensions, window_strides, padding)
    return apply_op("select-and-scatter", [operand, source, init_value],
                    {"window_dimensions": wd, "window_strides": ws, "padding": pad,
                     "select": select, "scatter": scatter})


def _select_and_scatter_params(kw, shapes, attrs, index=None):
    operand, source, init_value = shapes
    if kw == "select":
        return [_scalar(operand.element_type)] * 2
    return [_scalar(init_value.element_type), _scalar(source.element_type)]


def _select_and_scatter_shape_rule(operand, source, init_value, *, select, scatter, window_dimensions,
                                   window_strides, padding):
    if not operand.is_array:
        raise ShapeError(f"SelectAndScatter: operand must be an array, got {operand}")
    wd, ws, pad, bd, wdl = _window_attrs("SelectAndScatter", operand.dims, window_dimensions, window_strides,
                                         padding)
    dims = _check_window("SelectAndScatter", operand, wd, ws, pad, bd, wdl)
    # select_and_scatter_c2: source has the shape of ReduceWindow(operand) with this window
    if not source.is_array or source.rank != operand.rank or any(
            a is not None and b is not None and a != b for a, b in zip(source.dims, dims)):
        raise ShapeError(f"SelectAndScatter: source is {source} but the windows of operand {operand} "
                         f"(window_dimensions={list(wd)}, window_strides={list(ws)}, padding={list(pad)}) "
                         f"give {Shape(operand.element_type, dims)}; source needs one element per window")
    # select_and_scatter_c1, c3: source and init_value have the element type of operand
    if source.element_type != operand.element_type:
        raise ShapeError(f"SelectAndScatter: source is {source} but operand is {operand}; they must have "
                         "the same element type")
    if not init_value.is_array or init_value.rank != 0 or init_value.element_type != operand.element_type:
        raise ShapeError(f"SelectAndScatter: init_value must be a scalar {operand.element_type}[], got "
                         f"{init_value}")
    t = operand.element_type
    # select_and_scatter_c9, c10: select is (T, T) -> pred; scatter is (T, T) -> T
    _check_region("SelectAndScatter", "select", select, [t, t], ["pred"])
    _check_region("SelectAndScatter", "scatter", scatter, [t, t], [t])
    return Shape(t, operand.dims)


def _selected_cells(operand, select, source_dims, window):
    """For each source element (window), the flat operand index ``select`` picks, or -1 when
    the window holds no operand element (all padding).

    The window's cells are visited in row-major order; the first real cell is selected,
    and a later cell ``b`` replaces the selected ``a`` when ``select(a, b)`` is False.
    """
    return _in_blocks(tuple(source_dims), int(np.prod(window[0], dtype=np.int64)),
                      lambda positions: [_select_in_windows(operand, select, positions, window)])[0]


def _select_in_windows(operand, select, positions, window):
    (values,), valid, flat_index = _window_values([operand], positions, *window, with_index=True)
    count = values.shape[-1]
    lead = values.shape[:-1]
    if _elementwise(select):
        has = valid[..., 0].copy()
        selected = np.where(has, 0, -1)
        current = values[..., 0]
        for k in range(1, count):
            keep = np.asarray(select(current, values[..., k]), dtype=bool)
            take = valid[..., k] & (~has | ~keep)
            selected = np.where(take, k, selected)
            current = np.where(take, values[..., k], current)
            has |= valid[..., k]
    else:
        selected = np.full(lead, -1, np.int64)
        for s in np.ndindex(*lead):
            for k in range(count):
                if not valid[s + (k,)]:
                    continue
                if selected[s] < 0 or not bool(select(np.asarray(values[s + (selected[s],)]),
                                                       np.asarray(values[s + (k,)]))):
                    selected[s] = k
    cell = np.maximum(selected, 0)[..., None]
    return np.where(selected >= 0, np.take_along_axis(flat_index, cell, axis=-1)[..., 0], -1)


def _select_and_scatter_reference(operand, source, init_value, *, shape, select, scatter,
                                  window_dimensions, window_strides, padding):
    wd, ws, pad, bd, wdl = _window_attrs("SelectAndScatter", operand.shape, window_dimensions, window_strides,
                                         padding)
    target = _selected_cells(operand, select, source.shape, (wd, ws, pad, bd, wdl)).reshape(-1)
    values = source.reshape(-1)
    result = np.full(operand.size, init_value, dtype=shape.dtype)
    keep = target >= 0
    target, values = target[keep], values[keep]
    if _elementwise(scatter):
        # apply the values aimed at one element in source order: round t applies the t-th
        order = np.argsort(target, kind="stable")
        target, values = target[order], values[order]
        starts = np.r_[True, target[1:] != target[:-1]] if target.size else np.zeros(0, bool)
        rank = np.arange(target.size) - np.maximum.accumulate(np.where(starts, np.arange(target.size), 0))
        for t in range(int(rank.max()) + 1 if rank.size else 0):
            m = rank == t
            result[target[m]] = np.asarray(scatter(result[target[m]], values[m]), dtype=shape.dtype)
    else:
        for t, v in zip(target, values):
            result[t] = scatter(np.asarray(result[t]), np.asarray(v))
    return result.reshape(operand.shape)


def _select_and_scatter_index_map(operand, source, init_value, *, shape, select, scatter, window_dimensions,
                                  window_strides, padding):
    """Per source element (window): the operand elements its window reads, the result
    element it is scattered to (``writes``; none when the window is all padding), and
    ``detail`` as ReduceWindow's plus ``selected``.  The selection runs ``select`` on the
    operand's values, as the reference does."""
    unknown = is_unknown(operand)  # shapes only: which element is selected is not known
    operand = operand if unknown else np.asarray(operand)
    wd, ws, pad, bd, wdl = _window_attrs("SelectAndScatter", operand.shape, window_dimensions, window_strides,
                                         padding)
    selected = None if unknown else _selected_cells(operand, _callable(select), np.shape(source),
                                                    (wd, ws, pad, bd, wdl))

    def fn(source_index):
        cells = _window_cells(source_index, operand.shape, wd, ws, pad, bd, wdl)
        reads = tuple((0, c[3]) for c in cells if c[2] == "operand")
        if unknown:  # the selected element is one of the window's
            return Access(source_index, reads=reads, writes=tuple(index for _, index in reads),
                          source="operand" if reads else "padding", unknown=True,
                          detail={"window_position": tuple(int(r * s) for r, s in zip(source_index, ws)),
                                  "cells": cells, "padding_cells": tuple(c[0] for c in cells if c[2] == "padding"),
                                  "selected": None, "source_index": source_index})
        flat = int(selected[source_index])
        written = tuple(int(i) for i in np.unravel_index(flat, operand.shape)) if flat >= 0 else None
        detail = {"window_position": tuple(int(r * s) for r, s in zip(source_index, ws)), "cells": cells,
                  "padding_cells": tuple(c[0] for c in cells if c[2] == "padding"),
                  "selected": written, "source_index": source_index}
        return Access(source_index, reads=reads, writes=(written,) if written is not None else (),
                      source="operand" if reads else "padding", skipped=written is None, detail=detail)

    return IndexMap("select-and-scatter", np.shape(source), fn,
                    operand_shapes=[operand.shape, np.shape(source), ()], result_shape=shape,
                    domain="source", kind="scatter", combiner=scatter)


registry.register("select-and-scatter", "SelectAndScatter", "reduction", _select_and_scatter_shape_rule,
                  _select_and_scatter_reference,
                  attrs=(_SELECT_AND_SCATTER_WINDOW, Attr("select", "computation"),
                         Attr("scatter", "computation")),
                  index_map=_select_and_scatter_index_map, computation_params=_select_and_scatter_params,
                  categories=("reduction", "data_movement"))
describe("select-and-scatter", select={"region": "select"},
         example={"operand": {"shape": "f32[4,4]", "source": "random"}, "select": "Compare(a, b, 'GE')",
                  "window_dimensions": [2, 2], "window_strides": [2, 2], "padding": [(0, 0), (0, 0)],
                  "source": "f32[2,2]", "init_value": ("f32[]", 0), "scatter": "Add"})


# -- Sort --------------------------------------------------------------------------------

class _SortDimension:
    """``dimensions={1}`` <-> ``dimension=1`` (sort names one dimension, in braces)."""

    hlo, kws = "dimensions", ("dimension",)
    arg_kinds = {"dimension": "dim"}

    def parse(self, raw, resolve):
        dims = parse_ints(raw)
        if len(dims) != 1:
            from ..errors import HloParseError
            raise HloParseError(f"sort: dimensions={raw} must name exactly one dimension")
        return {"dimension": dims[0]}

    def missing(self):
        return None

    def coerce(self, attrs, op):
        if "dimension" in attrs:
            attrs["dimension"] = as_int(op, "dimension", attrs["dimension"])

    def format(self, attrs, inst, name_of):
        return "{" + str(int(attrs["dimension"])) + "}"


def Sort(operands, comparator=None, dimension=-1, is_stable=False):
    """Wraps XLA's Sort: sort ``operands`` (one array, or several of one shape sorted
    together as tuples) along ``dimension`` (default: the last).

    ``comparator`` gets 2N scalars ``(lhs_0, rhs_0, lhs_1, rhs_1, ...)`` and returns True
    when ``lhs`` goes before ``rhs``; by default ``lhs_0 < rhs_0`` (operand 0 is the key).
    With ``is_stable`` elements the comparator finds equal keep their order (this
    reference is always stable)::

        Sort([np.array([3, 1], np.int32), np.array([42, 50], np.int32)])
        # -> ([1, 3], [50, 42])
    """
    ops = _as_list(operands)
    rank = len(_dims_of(ops[0])) if ops else 0
    d = as_int("Sort", "dimension", dimension)
    if d < 0:
        d += rank
    if comparator is None:
        comparator = _default_less_than
    return apply_op("sort", ops, {"dimension": d, "is_stable": is_stable, "comparator": comparator})


def _default_less_than(*params):
    from .. import ops
    if not hasattr(ops, "Lt"):
        raise NotImplementedError("Sort: the default comparator needs the Lt op (elementwise family); "
                                  "pass comparator= explicitly")
    return ops.Lt(params[0], params[1])


def _sort_params(kw, shapes, attrs, index=None):
    return [_scalar(s.element_type) for s in shapes for _ in range(2)]


def _sort_shape_rule(*shapes, comparator, dimension, is_stable=False):
    if not shapes:
        raise ShapeError("Sort: needs at least one operand")
    first = shapes[0]
    for i, s in enumerate(shapes):
        if not s.is_array:
            raise ShapeError(f"Sort: operands[{i}] must be an array, got {s}")
        # sort_c3: all operands have the same dimensions (element types may differ)
        if s.dims != first.dims:
            raise ShapeError(f"Sort: operands[{i}] is {s} but operands[0] is {first}; all operands must "
                             "have the same dimensions")
    # sort_c4: 0 <= dimension < rank
    if not 0 <= int(dimension) < first.rank:
        raise ShapeError(f"Sort: dimension={dimension} is out of range for operands of rank {first.rank} "
                         f"({first})")
    # sort_c5: comparator has type (T_0, T_0, ..., T_{N-1}, T_{N-1}) -> pred
    _check_region("Sort", "comparator", comparator, [s.element_type for s in shapes for _ in range(2)],
                  ["pred"])
    return first if len(shapes) == 1 else Shape.tuple(shapes)


def _stable_merge_sort(comparator, columns):
    """A stable bottom-up merge sort of every row at once, for element-wise comparators.

    Runs of ``width`` sorted elements merge in pairs (A, B).  An element of A moves to
    ``start + (its index in A) + #{b in B : less(b, it)}`` and one of B to ``start + (its
    index in B) + #{a in A : not less(it, a)}`` (equal elements: A's first, so the sort
    is stable); both counts are binary searches in the other sorted run, every element's
    step done by one vectorised comparator call.  Returns the permutation ``[rows, m]``,
    or None when the comparator is not a strict weak order (two elements would land on
    one place).
    """
    rows, m = columns[0].shape
    row = np.arange(rows)[:, None]
    pos = np.arange(m)
    order = np.broadcast_to(pos, (rows, m)).copy()
    width = 1
    while width < m:
        start = pos - pos % (2 * width)            # where this pair of runs begins
        in_a = pos - start < width
        b_start = start + width
        a_len = np.minimum(width, m - start)
        b_len = np.clip(m - b_start, 0, width)
        other = np.where(in_a, b_start, start)     # the run to search
        mine = pos - np.where(in_a, start, b_start)
        lo = np.zeros((rows, m), np.int64)
        hi = np.broadcast_to(np.where(in_a, b_len, a_len), (rows, m)).copy()
        x = [c[row, order] for c in columns]
        while (lo < hi).any():
            mid = (lo + hi) // 2
            candidate = order[row, np.minimum(other + mid, m - 1)]
            y = [c[row, candidate] for c in columns]
            # A asks less(candidate, x); B asks less(x, candidate)
            lhs = [np.where(in_a, yc, xc) for xc, yc in zip(x, y)]
            rhs = [np.where(in_a, xc, yc) for xc, yc in zip(x, y)]
            less = np.broadcast_to(np.asarray(comparator(*[v for pair in zip(lhs, rhs) for v in pair]),
                                              dtype=bool), (rows, m))
            right = np.where(in_a, less, ~less)
            active = lo < hi
            lo = np.where(active & right, mid + 1, lo)
            hi = np.where(active & ~right, mid, hi)
        new_pos = start + mine + lo
        if not (np.sort(new_pos, axis=1) == pos).all():
            return None
        merged = np.empty_like(order)
        merged[row, new_pos] = order
        order = merged
        width *= 2
    return order


def _stable_python_sort(comparator, columns):
    """Python's stable sort, row by row, one scalar comparator call per question: for
    comparators that are not element-wise or not strict weak orders."""
    rows, m = columns[0].shape
    order = np.empty((rows, m), np.int64)
    for r in range(rows):
        row = [np.asarray(c[r]) for c in columns]

        def before(a, b):  # sorted() only asks "a < b", i.e. whether this is negative
            return -1 if bool(comparator(*[x for col in row for x in (col[a], col[b])])) else 0

        order[r] = sorted(range(m), key=functools.cmp_to_key(before))
    return order


def _sort_order(operands, comparator, dimension):
    """(rows of the operands with ``dimension`` last, the permutation ``[rows, m]``):
    sorted row ``r`` is ``columns[r, order[r]]``."""
    moved = [np.moveaxis(op, dimension, -1) for op in operands]
    lead, m = moved[0].shape[:-1], moved[0].shape[-1]
    rows = int(np.prod(lead, dtype=np.int64))
    columns = [a.reshape(rows, m) for a in moved]
    order = None
    if m > 1 and rows > 0 and _elementwise(comparator):
        order = _stable_merge_sort(comparator, columns)
    if order is None:
        order = _stable_python_sort(comparator, columns) if m > 1 and rows > 0 else \
            np.broadcast_to(np.arange(m), (rows, m))
    return moved[0].shape, columns, order


def _sort_reference(*operands, shape, comparator, dimension, is_stable=False):
    moved_shape, columns, order = _sort_order(operands, comparator, dimension)
    results = [np.moveaxis(np.take_along_axis(c, order, axis=1).reshape(moved_shape), -1, dimension)
               for c in columns]
    return tuple(results) if shape.is_tuple else results[0]


def _sort_index_map(*operands, shape, comparator, dimension, is_stable=False):
    """Per result index: the operand position it came from (the same for every operand:
    ``reads[j]`` is what result ``j`` copies).  The permutation is the reference's own,
    computed from the keys once; with unknown keys (shapes only) it is unknown."""
    dims = tuple(np.shape(operands[0]))
    unknown = is_unknown(operands)
    if not unknown:
        moved_shape, _, order = _sort_order([np.asarray(o) for o in operands], comparator, dimension)
        order = order.reshape(moved_shape)
    rank = len(dims)

    def access(result_index):
        row = tuple(i for d, i in enumerate(result_index) if d != dimension)
        position = result_index[dimension]
        if unknown:  # any element of the row along `dimension`
            ranges = [(0, n) if d == dimension else (i, i + 1) for d, (i, n) in enumerate(zip(result_index, dims))]
            return Access(result_index, reads=Candidates(ranges, range(len(operands))), unknown=True,
                          detail={"dimension": dimension, "position": position})
        source = int(order[row + (position,)])
        operand_index = tuple(source if d == dimension else i for d, i in enumerate(result_index))
        return Access(result_index, reads=tuple((j, operand_index) for j in range(len(operands))),
                      detail={"dimension": dimension, "position": position, "source_position": source,
                              "operand_index": operand_index, "rank": rank})

    return IndexMap("sort", dims, access, operand_shapes=tuple(Shape.of(o) for o in operands), result_shape=shape,
                    kind="copy")


registry.register("sort", "Sort", "reduction", _sort_shape_rule, _sort_reference,
                  attrs=(_SortDimension(), Attr("is_stable", "bool", default=False),
                         Attr("comparator", "computation", hlo="to_apply")),
                  index_map=_sort_index_map, computation_params=_sort_params, categories=("data_movement",))
describe("sort", comparator={"region": "comparator"},
         example={"operands": [{"shape": "f32[2,4]", "source": "random"}]})


# -- TopK --------------------------------------------------------------------------------

def TopK(operand, k, largest=True):
    """Wraps XLA's TopK: the ``k`` largest (``largest=False``: smallest) entries along the
    last dimension and their indices, ``(values, s32 indices)``, values in order.

    Floats are ordered by total order (-NaN < -Inf < ... < -0.0 < +0.0 < ... < +Inf < +NaN,
    what XLA:CPU gives); equal entries come lower index first::

        TopK(np.array([9., 3., 6., 4., 10.], np.float32), 3)   # -> ([10, 9, 6], [4, 0, 2])
    """
    return apply_op("topk", [operand], {"k": k, "largest": largest})


def _topk_shape_rule(operand, *, k, largest=True):
    # an array of a real (non-complex) type, rank >= 1
    if not operand.is_array or operand.rank == 0:
        raise ShapeError(f"TopK: operand must be an array of rank >= 1, got {operand}")
    if operand.element_type in dtypes.COMPLEX:
        raise ShapeError(f"TopK: operand {operand} is complex; complex numbers have no order")
    last = operand.dims[-1]
    # 0 <= k <= size of the last dimension
    if k < 0 or (last is not None and k > last):
        raise ShapeError(f"TopK: k={k} must be in [0, {last}] (the last dimension of {operand})")
    dims = operand.dims[:-1] + (k,)
    return Shape.tuple([Shape(operand.element_type, dims), Shape("s32", dims)])


def _total_order_key(x):
    """Integers that order like XLA's total order of ``x`` (floats: -NaN ... +NaN, -0 < +0)."""
    if x.dtype == np.bool_:
        return x.astype(np.int8)
    if dtypes.from_numpy(x.dtype) in dtypes.FLOATING:
        bits = x.astype(np.float64).view(np.int64)
        return np.where(bits < 0, bits ^ np.int64(0x7FFFFFFFFFFFFFFF), bits)
    return x


def _topk_order(operand, k, largest):
    key = _total_order_key(operand)
    # a stable sort, descending (~key reverses the order of integers) or ascending
    return np.argsort(~key if largest else key, axis=-1, kind="stable")[..., :k]


def _topk_reference(operand, *, shape, k, largest=True):
    order = _topk_order(operand, k, largest)
    values = np.take_along_axis(operand, order, axis=-1)
    return values, order.astype(np.int32)


def _topk_index_map(operand, *, shape, k, largest=True):
    """Per result index ``[..., p]``: the operand element ``[..., q]`` that is the p-th
    largest (smallest); ``values`` copies it and ``indices`` holds ``q``."""
    unknown = is_unknown(operand)
    order = None if unknown else _topk_order(np.asarray(operand), k, largest)
    dims = tuple(np.shape(operand))[:-1] + (int(k),)

    def access(result_index):
        if unknown:  # any element of the last dimension's row
            n = np.shape(operand)[-1]
            return Access(result_index, reads=Candidates([(i, i + 1) for i in result_index[:-1]] + [(0, n)]),
                          unknown=True, detail={"position": result_index[-1]})
        q = int(order[result_index])
        operand_index = tuple(result_index[:-1]) + (q,)
        return Access(result_index, reads=((0, operand_index),),
                      detail={"position": result_index[-1], "source_position": q, "operand_index": operand_index,
                              "largest": largest})

    return IndexMap("topk", dims, access, operand_shapes=(Shape.of(operand),), result_shape=shape, kind="copy")


registry.register("topk", "TopK", "reduction", _topk_shape_rule, _topk_reference,
                  attrs=(Attr("k", "int"), Attr("largest", "bool", default=True, always_print=True)),
                  index_map=_topk_index_map, categories=("data_movement",))
describe("topk", k={"minimum": 0}, example={"operand": {"shape": "f32[2,5]", "source": "random"}, "k": 2})

# -- Scan --------------------------------------------------------------------------------

def Scan(inputs, inits, computation, dimension, is_reverse=False, is_associative=None):
    """Wraps XLA's Scan (HLO ``scan``, from ``chlo.scan``): a loop along ``dimension`` that
    carries state and emits one slice per step.

    With N ``inputs`` (arrays of one size ``n`` along ``dimension``) and M ``inits`` (the
    initial carries), step ``k = 0, 1, ..., n-1`` (``n-1, ..., 0`` when ``is_reverse``) calls
    ``computation(x_0[k], ..., x_{N-1}[k], c_0, ..., c_{M-1})`` -- ``x_j[k]`` is input j's
    slice at k, ``dimension`` removed -- which returns K output slices and M new carries.
    The result is the tuple ``(y_0, ..., y_{K-1}, c_0, ..., c_{M-1})``: the output slices
    stacked along ``dimension``, then the final carries.  ``is_associative`` is a promise
    about ``computation`` that XLA may use to reorder; it never changes the result here.
    In HLO: ``scan(x, init), dimensions={0}, num_carries=1, to_apply=f``::

        Scan(np.int32([1, 2, 3, 4]), np.int32(0), lambda x, c: (Add(x, c), Add(x, c)),
             dimension=0)      # -> ([1, 3, 6, 10], 10): a running sum
    """
    xs, cs = _as_list(inputs), _as_list(inits)
    # the attribute schema checks the values (an integer dimension, bool flags): no int()/bool() here
    attrs = {"dimensions": (as_int("Scan", "dimension", dimension),), "num_carries": len(cs),
             "is_reverse": is_reverse, "is_associative": is_associative, "computation": computation}
    return apply_op("scan", xs + cs, attrs)


def _scan_split(shapes, num_carries, dimensions):
    """(inputs, inits, the scan dimension) of a scan's operand shapes, checked."""
    m = int(num_carries)
    if not 0 <= m <= len(shapes):
        raise ShapeError(f"Scan: num_carries={m} but the scan has {len(shapes)} operands (N inputs, then "
                         f"num_carries inits)")
    inputs, inits = list(shapes[:len(shapes) - m]), list(shapes[len(shapes) - m:])
    if not inputs:
        raise ShapeError(f"Scan: needs at least one input before the {m} inits (the inputs give the "
                         f"number of steps)")
    dims = tuple(int(d) for d in dimensions)
    if len(dims) != 1:
        raise ShapeError(f"Scan: dimensions={list(dims)} must name exactly one dimension (the one scanned)")
    d = dims[0]
    for i, s in enumerate(inputs):
        if not s.is_array:
            raise ShapeError(f"Scan: inputs[{i}] must be an array, got {s}")
        if not 0 <= d < s.rank:
            raise ShapeError(f"Scan: dimension {d} is out of range for inputs[{i}] {s} (rank {s.rank})")
        if s.dims[d] != inputs[0].dims[d]:
            raise ShapeError(f"Scan: inputs[{i}] {s} has {s.dims[d]} elements along dimension {d} but "
                             f"inputs[0] {inputs[0]} has {inputs[0].dims[d]}; every input is scanned in step")
    for i, s in enumerate(inits):
        if not s.is_array:
            raise ShapeError(f"Scan: inits[{i}] must be an array, got {s}")
    return inputs, inits, d


def _scan_slice(s, d):
    return Shape(s.element_type, s.dims[:d] + s.dims[d + 1:])


def _scan_params(kw, shapes, attrs, index=None):
    inputs, inits, d = _scan_split(shapes, attrs.get("num_carries", 0), attrs.get("dimensions", (0,)))
    return [_scan_slice(s, d) for s in inputs] + list(inits)


def _scan_shape_rule(*shapes, computation, dimensions, num_carries, is_reverse=False, is_associative=None):
    inputs, inits, d = _scan_split(shapes, num_carries, dimensions)
    params = [_scan_slice(s, d) for s in inputs] + inits
    if computation is None:
        raise ShapeError("Scan: the computation is required")
    got = getattr(computation, "parameter_shapes", None)
    if got is not None:
        name = getattr(computation, "name", None) or getattr(getattr(computation, "computation", None), "name", "?")
        if [str(p) for p in got] != [str(p) for p in params]:
            raise ShapeError(f"Scan: computation {name} takes ({', '.join(map(str, got))}) but Scan calls it "
                             f"with the input slices (dimension {d} removed) and the carries: "
                             f"({', '.join(map(str, params))})")
        out = computation.result_shape
        leaves = list(out.tuple_shapes) if out.is_tuple else [out]
        m = len(inits)
        if len(leaves) < m:
            raise ShapeError(f"Scan: computation {name} returns {out}: fewer than the {m} carries it must "
                             f"return last")
        outputs, carries = leaves[:len(leaves) - m], leaves[len(leaves) - m:]
        for i, (c, init) in enumerate(zip(carries, inits)):
            if str(c) != str(init):
                raise ShapeError(f"Scan: computation {name} returns carry {i} as {c} but inits[{i}] is {init}; "
                                 f"a carry keeps its shape")
        n = inputs[0].dims[d]
        results = []
        for i, y in enumerate(outputs):
            if not y.is_array or d > y.rank:
                raise ShapeError(f"Scan: output {i} of computation {name} is {y}; dimension {d} cannot be "
                                 f"inserted into it to stack the {n} steps")
            results.append(Shape(y.element_type, y.dims[:d] + (n,) + y.dims[d:]))
        return Shape.tuple(results + list(inits))
    # an untraced callable (index maps on values): outputs like the inputs
    return Shape.tuple([Shape(s.element_type, s.dims) for s in inputs] + list(inits))


def _scan_reference(*values, shape, computation, dimensions, num_carries, is_reverse=False,
                    is_associative=None):
    m = int(num_carries)
    inputs, carries = values[:len(values) - m], list(values[len(values) - m:])
    d = int(dimensions[0])
    n = np.shape(inputs[0])[d]
    leaves = list(shape.tuple_shapes)
    outputs = [np.empty(s.dims, s.dtype) for s in leaves[:len(leaves) - m]]
    steps = range(n - 1, -1, -1) if is_reverse else range(n)
    for k in steps:
        x_k = [np.take(x, k, axis=d) for x in inputs]             # input slices at step k
        result = _call(computation, x_k + carries, len(outputs) + m)
        for y, y_k in zip(outputs, result[:len(outputs)]):
            y[(slice(None),) * d + (k,)] = y_k                    # output slice k, stacked along d
        carries = [np.asarray(c, dtype=s.dtype) for c, s in zip(result[len(outputs):], leaves[len(outputs):])]
    return tuple(outputs) + tuple(carries)


def _scan_index_map(*values, shape, computation, dimensions, num_carries, is_reverse=False,
                    is_associative=None):
    """Output element ``index`` (of the first output) depends on the inits and on every input
    slice the scan has visited by its step: positions ``0..k`` along the dimension (``k..n-1``
    reversed), at the same other coordinates when the slices have the outputs' shape."""
    m = int(num_carries)
    inputs = values[:len(values) - m]
    d = int(dimensions[0])
    n = np.shape(inputs[0])[d]
    leaves = list(shape.tuple_shapes)
    if len(leaves) == m:
        raise NotImplementedError("Scan index map: this scan has no outputs (only carries)")
    domain = leaves[0].dims

    def fn(index):
        k = index[d]
        visited = range(k, n) if is_reverse else range(k + 1)
        reads = []
        for j, x in enumerate(inputs):
            rest = np.shape(x)[:d] + np.shape(x)[d + 1:]
            same = rest == tuple(index[:d] + index[d + 1:])
            others = [tuple(index[:d] + index[d + 1:])] if same else list(np.ndindex(*rest))
            for p in visited:
                for o in others:
                    reads.append((j, tuple(int(i) for i in o[:d]) + (p,) + tuple(int(i) for i in o[d:])))
        return Access(index, reads=tuple(reads), source="operand",
                      detail={"step": k, "steps_visited": tuple(visited), "scan_dimension": d})

    return IndexMap("scan", domain, fn, operand_shapes=[np.shape(v) for v in values], result_shape=shape,
                    kind="reduce", combiner=computation)


registry.register("scan", "Scan", "reduction", _scan_shape_rule, _scan_reference,
                  attrs=(Attr("dimensions", "ints"), Attr("num_carries", "int"),
                         Attr("is_reverse", "bool", default=False), Attr("is_associative", "bool", default=None),
                         Attr("computation", "computation", hlo="to_apply")),
                  index_map=_scan_index_map, computation_params=_scan_params, categories=("reduction",))
describe("scan", inputs={"kind": "arrays"}, inits={"kind": "arrays"}, computation={"region": "scanner"},
         dimension={"kind": "dim", "of": "inputs"},
         example={"inputs": [{"shape": "f32[2,4]", "source": "random"}], "inits": [("f32[2]", 0)],
                  "computation": "running Add", "dimension": 1})

__all__ = ["Reduce", "ReduceWindow", "SelectAndScatter", "Sort", "TopK", "Scan"]
