"""CUDA kernels of gather and scatter, with XLA's rules for bad indices.

Gather: one thread per result element computes the spec's indices on the fly, per
operand dimension ``d``::

    operand_index[d] = clamp(start_index[k], 0, dim(operand, d) - slice_sizes[d])  (start_index_map[k] = d)
                     + batch_index[...]                                           (operand_batching_dims)
                     + result_index[offset_dims[j]]                               (the j-th offset dim)

Each operand dimension's role is a row of a small int64 table (``_gather_table``), so
one compiled kernel serves every configuration.  Indices are read as int64; u64 indices
are first capped at 2**62 (``_HUGE_INDEX`` of the spec layer: still out of bounds, no
overflow).

Scatter: ``_scatter_targets`` gives every update element, in XLA's order (scatter
indices row-major, each window whole), the flat result index it combines into, or -1
when its window is not entirely in bounds (XLA skips it).  ``apply_updates`` then
combines the updates in that order: one thread per result element scanning the list
(every computation exact, colliding updates in order), or, when that scan would be too
long, one thread applying the whole list serially.
"""
import numpy as np

from ...ops.indexing import _HUGE_INDEX, _batch_position, _offset_operand_dims
from . import kernel, simulated
from .reduction import _collate, _computation, _names, call, region_function, region_module
from .shape import (copy_value, cuda, fill, fill_zero, host_api, ints, launch, new_value, params, row_major_strides,
                    single, static_dims)


@cuda.jit
def _cap_u64(n, src, out, huge):
    i = cuda.grid(1)
    if i < n:
        v = src[i]
        if v > np.uint64(huge):
            out[i] = huge
        else:
            out[i] = np.int64(v)


def index_array(indices):
    """The indices' device array, readable as int64 (u64 capped at 2**62)."""
    flat = indices.flat()
    if flat.dtype != np.uint64:
        return flat
    out = host_api.device_array(max(indices.size, 1), np.int64)
    launch(_cap_u64, indices.size, flat, out, _HUGE_INDEX)
    return out


def _indices_layout(indices_dims, index_vector_dim):
    """(strides of the indices' batch dimensions in order, stride of the index vector)."""
    strides = row_major_strides(indices_dims)
    batch = [strides[d] for d in range(len(indices_dims)) if d != index_vector_dim]
    return batch, strides[index_vector_dim] if index_vector_dim < len(indices_dims) else 0


# -- gather ---------------------------------------------------------------------------------------

@cuda.jit
def _gather(n, out, operand, indices, out_dims, out_inner, batch, vector_stride, table):
    i = cuda.grid(1)
    if i < n:
        # the start indices' position for this result element's batch_index
        base = 0
        for b in range(batch.shape[0]):
            rd = batch[b, 0]
            base += ((i // out_inner[rd]) % out_dims[rd]) * batch[b, 1]
        j = 0
        for d in range(table.shape[0]):
            x = 0
            k = table[d, 3]
            if k >= 0:   # full_start_index, clamped so that the slice is in bounds
                s = np.int64(indices[base + k * vector_stride])
                hi = table[d, 0] - table[d, 2]
                if s < 0:
                    s = 0
                if s > hi:
                    s = hi
                x += s
            rd = table[d, 4]
            if rd >= 0:  # full_batching_index
                x += (i // out_inner[rd]) % out_dims[rd]
            rd = table[d, 5]
            if rd >= 0:  # full_offset_index
                x += (i // out_inner[rd]) % out_dims[rd]
            j += x * table[d, 1]
        out[i] = operand[j]


def _gather_table(operand_dims, indices_dims, out_dims, offset_dims, collapsed_slice_dims, start_index_map,
                  index_vector_dim, slice_sizes, operand_batching_dims, start_indices_batching_dims):
    rank = len(operand_dims)
    batch_dims = [d for d in range(len(out_dims)) if d not in offset_dims]
    batch_strides, vector_stride = _indices_layout(indices_dims, index_vector_dim)
    strides = row_major_strides(operand_dims)
    # columns: size, stride, slice size, k of start_index_map, result dim of the batching index,
    # result dim of the offset index (-1: none)
    table = np.full((rank, 6), -1, np.int64)
    for d in range(rank):
        table[d, :3] = operand_dims[d], strides[d], slice_sizes[d]
    for k, d in enumerate(start_index_map):
        table[d, 3] = k
    for d, d_start in zip(operand_batching_dims, start_indices_batching_dims):
        table[d, 4] = batch_dims[_batch_position(d_start, index_vector_dim)]
    for d, rd in zip(_offset_operand_dims(rank, collapsed_slice_dims, operand_batching_dims), offset_dims):
        table[d, 5] = rd
    batch = np.array([[rd, s] for rd, s in zip(batch_dims, batch_strides)], np.int64).reshape(-1, 2)
    return ints(out_dims), ints(row_major_strides(out_dims)), batch, vector_stride, table


@kernel("gather")
def gather(operand, start_indices, *, shape, offset_dims, collapsed_slice_dims, start_index_map, index_vector_dim,
           slice_sizes, operand_batching_dims=(), start_indices_batching_dims=(), indices_are_sorted=False):
    out_dims = static_dims(shape, "Gather")
    out = new_value(out_dims, shape.dtype)
    if out.size == 0:
        return out
    if len(operand.shape) == 0:          # every result element is the scalar operand
        launch(fill, out.size, out.flat(), operand.flat())
        return out
    if operand.size == 0 or 0 in slice_sizes:   # empty slices: XLA:CPU gives zeros
        launch(fill_zero, out.size, out.flat())
        return out
    key = ("gather", operand.shape, start_indices.shape, out_dims, tuple(offset_dims), tuple(collapsed_slice_dims),
           tuple(start_index_map), index_vector_dim, tuple(slice_sizes), tuple(operand_batching_dims),
           tuple(start_indices_batching_dims))
    out_dims_d, out_inner_d, batch_d, vector_stride, table_d = params(key, lambda: _gather_table(
        operand.shape, start_indices.shape, out_dims, offset_dims, collapsed_slice_dims, start_index_map,
        index_vector_dim, slice_sizes, operand_batching_dims, start_indices_batching_dims))
    launch(_gather, out.size, out.flat(), operand.flat(), index_array(start_indices), out_dims_d, out_inner_d,
           batch_d, vector_stride, table_d)
    return out


# -- scatter ---------------------------------------------------------------------------------------

@cuda.jit
def _scatter_targets(n, targets, order, indices, schedule, num_scatter, batch_strides, vector_stride, table):
    """For update element p (in XLA's order): order[p] = its flat position in updates,
    targets[p] = the flat result index it combines into, or -1 (its window is skipped)."""
    p = cuda.grid(1)
    if p < n:
        u = 0
        base = 0
        for s in range(schedule.shape[0]):
            c = (p // schedule[s, 1]) % schedule[s, 0]
            u += c * schedule[s, 2]
            if s < num_scatter:
                base += c * batch_strides[s]
        order[p] = u
        t = 0
        ok = True
        for d in range(table.shape[0]):
            start = 0     # window_start = full_start_index + full_batching_index
            k = table[d, 3]
            if k >= 0:
                start = np.int64(indices[base + k * vector_stride])
            s = table[d, 4]
            if s >= 0:
                start += (p // schedule[s, 1]) % schedule[s, 0]
            if start < 0 or start > table[d, 0] - table[d, 2]:
                ok = False
            s = table[d, 5]
            if s >= 0:    # + full_window_index
                start += (p // schedule[s, 1]) % schedule[s, 0]
            t += start * table[d, 1]
        if ok:
            targets[p] = t
        else:
            targets[p] = -1


def _scatter_tables(operand_dims, indices_dims, updates_dims, update_window_dims, inserted_window_dims,
                    scatter_dims_to_operand_dims, index_vector_dim, input_batching_dims,
                    scatter_indices_batching_dims):
    rank = len(operand_dims)
    update_scatter_dims = [d for d in range(len(updates_dims)) if d not in update_window_dims]
    order = update_scatter_dims + list(update_window_dims)     # XLA's order of application
    sizes = [updates_dims[d] for d in order]
    update_strides = row_major_strides(updates_dims)
    inner = row_major_strides(sizes)
    schedule = np.array([[sizes[s], inner[s], update_strides[d]] for s, d in enumerate(order)],
                        np.int64).reshape(-1, 3)
    batch_strides, vector_stride = _indices_layout(indices_dims, index_vector_dim)
    window_operand_dims = _offset_operand_dims(rank, inserted_window_dims, input_batching_dims)
    # columns: size, stride, window size, k of scatter_dims_to_operand_dims, schedule position of
    # the batching index, schedule position of the window index (-1: none)
    table = np.full((rank, 6), -1, np.int64)
    strides = row_major_strides(operand_dims)
    for d in range(rank):
        table[d, :3] = operand_dims[d], strides[d], 1
    for j, (d, ud) in enumerate(zip(window_operand_dims, update_window_dims)):
        table[d, 2] = updates_dims[ud]
        table[d, 5] = len(update_scatter_dims) + j
    for k, d in enumerate(scatter_dims_to_operand_dims):
        table[d, 3] = k
    for d, d_start in zip(input_batching_dims, scatter_indices_batching_dims):
        table[d, 4] = _batch_position(d_start, index_vector_dim)
    return schedule, len(update_scatter_dims), ints(batch_strides) if batch_strides else ints([0]), \
        vector_stride, table


#: the most (result elements x updates) the one-thread-per-result-element scan may cost;
#: above it, one thread applies the updates serially
PARALLEL_SCAN_MAX = 1 << 12 if simulated() else 1 << 24


def _apply_kernels(comp, n):
    _, is_tuple = region_function(comp)
    outs, upds, accs = _names("out", n), _names("upd", n), _names("a", n)
    text = (f"@cuda.jit\ndef apply_scan(n, {', '.join(outs + upds)}, targets, order, count):\n"
            "    i = cuda.grid(1)\n"
            "    if i < n:\n"
            + "".join(f"        {a} = {o}[i]\n" for a, o in zip(accs, outs))
            + "        for p in range(count):\n"
            "            if targets[p] == i:\n"
            "                q = order[p]\n"
            f"                {call('region', accs + [f'{u}[q]' for u in upds], accs, is_tuple)}\n"
            + "".join(f"        {o}[i] = {a}\n" for a, o in zip(accs, outs))
            + f"\n\n@cuda.jit\ndef apply_serial({', '.join(outs + upds)}, targets, order, count):\n"
            "    if cuda.grid(1) == 0:\n"
            "        for p in range(count):\n"
            "            t = targets[p]\n"
            "            if t >= 0:\n"
            "                q = order[p]\n"
            f"                {call('region', [f'{o}[t]' for o in outs] + [f'{u}[q]' for u in upds], accs, is_tuple)}\n"
            + "".join(f"                {o}[t] = {a}\n" for a, o in zip(accs, outs)))
    module = region_module("scatter_apply", {"region": comp}, text)
    return module.apply_scan, module.apply_serial


def apply_updates(comp, results, updates, targets, order):
    """Combine ``updates[k][order[p]]`` into ``results[k][targets[p]]`` for p in order
    (skipping targets of -1), in place, through region ``comp``."""
    scan, serial = _apply_kernels(comp, len(results))
    n, count = results[0].size, int(targets.shape[0])
    if n * count <= PARALLEL_SCAN_MAX:
        launch(scan, n, *[r.flat() for r in results], *[u.flat() for u in updates], targets, order, count)
    else:
        single(serial, *[r.flat() for r in results], *[u.flat() for u in updates], targets, order, count)


@kernel("scatter")
def scatter(*values, shape, update_computation, update_window_dims, inserted_window_dims,
            scatter_dims_to_operand_dims, index_vector_dim, input_batching_dims=(), scatter_indices_batching_dims=(),
            indices_are_sorted=False, unique_indices=False):
    n = (len(values) - 1) // 2
    inputs, indices, updates = values[:n], values[n], values[n + 1:]
    results = [copy_value(v) for v in inputs]
    count = updates[0].size
    if count and results[0].size:
        key = ("scatter", inputs[0].shape, indices.shape, updates[0].shape, tuple(update_window_dims),
               tuple(inserted_window_dims), tuple(scatter_dims_to_operand_dims), index_vector_dim,
               tuple(input_batching_dims), tuple(scatter_indices_batching_dims))
        schedule_d, num_scatter, batch_strides_d, vector_stride, table_d = params(key, lambda: _scatter_tables(
            inputs[0].shape, indices.shape, updates[0].shape, update_window_dims, inserted_window_dims,
            scatter_dims_to_operand_dims, index_vector_dim, input_batching_dims, scatter_indices_batching_dims))
        targets = host_api.device_array(count, np.int64)
        order = host_api.device_array(count, np.int64)
        launch(_scatter_targets, count, targets, order, index_array(indices), schedule_d, num_scatter,
               batch_strides_d, vector_stride, table_d)
        apply_updates(_computation(update_computation), results, updates, targets, order)
    return _collate(results, shape)
