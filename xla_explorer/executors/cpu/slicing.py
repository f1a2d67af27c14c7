"""CPU kernels of the slicing family: slice, dynamic-slice, dynamic-update-slice, pad.

Slices are strided copies (``shape.gathered_copy``): the result's index i reads the
operand at ``start + i * strides``, i.e. from ``base = start . operand_strides`` with the
strides ``strides * operand_strides``.  Dynamic starts are clamped in Python first,
exactly as the reference clamps them (``ops.slicing._adjusted_start_indices``: Python
integers, so a huge u64 start is the huge number it is).

Pad writes each row of the result (its last dimension) once: a row that lies in edge or
interior padding of an outer dimension is all ``padding_value``; any other row is
filled and then receives its operand row at ``edge_padding_low + j * (interior + 1)``
(negative edge padding crops: only the operand elements that land inside are copied).
The rows (and pieces of long rows) are independent, so they run in parallel
(``shape.in_threads``).
"""
import functools

import numpy as np
from numba import int64, njit, uint64

from ...ops.slicing import _adjusted_start_indices
from ..numba_setup import MOVE_PARALLEL_THRESHOLD
from . import kernel
from .shape import (_WORDS, POOL, _move, as_result, copy_words, gathered_copy, in_threads, large, new_words,
                    prepared_gathered_copy, row_major_strides, serial, streamed, strided_copy, threads, word_dtype,
                    word_reader, words)

_opts = dict(cache=True, nogil=True)
ndarray = np.ndarray   # (shape.ndarray: a prepared kernel's result seen in one call)
_WORD_SIZES = tuple(_WORDS)


@kernel("slice")
def slice_(operand, *, shape, start_indices, limit_indices, strides=None):
    strides = strides or (1,) * operand.ndim
    op_strides = row_major_strides(operand.shape)
    base = sum(s * st for s, st in zip(start_indices, op_strides))
    return gathered_copy(operand, shape, base, tuple(s * st for s, st in zip(strides, op_strides)))


def _slice_prepare(operand_shapes, *, shape, start_indices, limit_indices, strides=None):
    dims = operand_shapes[0].dims
    steps = strides or (1,) * len(dims)
    op_strides = row_major_strides(dims)
    base = sum(s * st for s, st in zip(start_indices, op_strides))
    return prepared_gathered_copy(operand_shapes[0], shape, base, tuple(s * st for s, st in zip(steps, op_strides)),
                                  lambda x: slice_(x, shape=shape, start_indices=start_indices,
                                                   limit_indices=limit_indices, strides=strides))


slice_.prepare = _slice_prepare


@kernel("dynamic-slice")
def dynamic_slice(operand, *start_indices, shape, slice_sizes):
    adjusted_start_indices = _adjusted_start_indices(start_indices, operand.shape, slice_sizes)
    op_strides = row_major_strides(operand.shape)
    base = sum(s * st for s, st in zip(adjusted_start_indices, op_strides))
    return gathered_copy(operand, shape, base, op_strides)


def _dynamic_slice_prepare(operand_shapes, *, shape, slice_sizes):
    """The kernel prepared (``shape.prepared_gathered_copy``): the copy planned once, each
    start clamped per run as ``_adjusted_start_indices`` clamps it, in Python integers (a
    u64 start stays the large number it is).  A scan's row, f32[32, 128] of [64, 32, 128]:
    the plan and strides were most of its step."""
    xs = operand_shapes[0]
    strides = row_major_strides(xs.dims)
    copy = prepared_gathered_copy(xs, shape, None, strides,
                                  lambda x, *starts: dynamic_slice(x, *starts, shape=shape, slice_sizes=slice_sizes))
    if copy is None:
        return None
    bounds = tuple(zip(strides, (d - z for d, z in zip(xs.dims, slice_sizes))))

    def run(operand, *start_indices):
        base = 0
        for k, (stride, top) in zip(start_indices, bounds):
            k = int(k)
            base += (0 if k < 0 else top if k > top else k) * stride
        return copy(operand, base, *start_indices)
    return run


dynamic_slice.prepare = _dynamic_slice_prepare


@kernel("dynamic-update-slice")
def dynamic_update_slice(operand, update, *start_indices, shape):
    adjusted_start_indices = _adjusted_start_indices(start_indices, operand.shape, update.shape)
    n = shape.numel
    rows = n // shape.dims[-1] if n and shape.dims else 0
    if update.size == 0 or rows < 4 * threads():
        # nothing to place, or too few rows to share: the operand's copy, then the update
        result = copy_words(operand)
        if update.size:
            op_strides = row_major_strides(operand.shape)
            base = sum(s * st for s, st in zip(adjusted_start_indices, op_strides))
            strided_copy(result, base, op_strides, words(update), 0, row_major_strides(update.shape), update.shape)
        return as_result(result, shape)
    # one pass: every row of the result written once, from the operand or the update
    result = new_words(shape, n)
    in_threads(_dus_rows, rows, _dus_parallel(n, np.dtype(shape.dtype).itemsize), result, words(operand), words(update),
               np.array(shape.dims, np.int64), np.array(adjusted_start_indices, np.int64),
               np.array(update.shape, np.int64))
    return as_result(result, shape)


def _dus_parallel(n, itemsize):
    """Whether the one-pass dynamic-update-slice of ``n`` elements runs in threads: from
    ``MOVE_PARALLEL_THRESHOLD`` elements, unless what it reads and writes (every element
    read once, from the operand or the update, and written once) stays in the cache
    (``shape.streamed``: it streams rows like a copy; f32[1024, 1024] with a quarter of its
    rows updated, one thread at load 2.7: 0.251 ms (median) through the run against 0.275
    in two, and 0.303 in two on the idle machine)."""
    return n >= MOVE_PARALLEL_THRESHOLD and not streamed(2 * n * itemsize)


def _dus_prepare(operand_shapes, *, shape):
    """The one-pass path of the kernel prepared (``shape.prepared_gathered_copy``'s rules):
    the start indices are clamped per run, as the kernel clamps them; in the calling thread,
    or shared by ``in_threads`` where the kernel shares its rows (``_dus_parallel``)."""
    xs, us = operand_shapes[0], operand_shapes[1]
    n = shape.numel if shape.is_array and shape.is_static else 0
    rows = n // shape.dims[-1] if n and shape.dims else 0
    if not (serial(shape) or large(shape)) or us.numel == 0 or rows < 4 * threads() \
            or np.dtype(xs.dtype) != np.dtype(shape.dtype) or np.dtype(us.dtype) != np.dtype(shape.dtype):
        return None
    parallel = _dus_parallel(n, np.dtype(shape.dtype).itemsize)
    word = word_dtype(shape.dtype)
    nbytes, dtype, dims = n * word.itemsize, shape.dtype, shape.dims
    read_x, read_u = word_reader(xs), word_reader(us)
    rdims = np.array(dims, np.int64)
    udims = np.array(us.dims, np.int64)
    # the largest start of each dimension (``_adjusted_start_indices``' clamp, its bounds
    # computed once: 2.2 -> 1.9 us of a 256 KiB update's 20 us step, load 5)
    limits = tuple(d - s for d, s in zip(xs.dims, us.dims))
    take = POOL.take
    # start indices that are 0-d arrays of one integer type whose values all fit int64 (not
    # u64): clamped by the kernel's call (``_dus_clamped``), not by Python per index (2.5 of
    # a 256 KiB update's 18 us step, load 5)
    itypes = {np.dtype(s.dtype) for s in operand_shapes[2:]}
    itype = itypes.pop() if len(itypes) == 1 else None
    if itype is not None and not (itype.kind == "i" or itype.kind == "u" and itype.itemsize < 8) \
            or any(s.dims for s in operand_shapes[2:]):
        itype = None
    rlimits = np.array(limits, np.int64)

    def run(operand, update, *start_indices):
        x, u = read_x(operand), read_u(update)
        if x is None or u is None:
            return dynamic_update_slice(operand, update, *start_indices, shape=shape)
        out = take(nbytes).view(word)
        if parallel:
            start = np.array([min(max(int(k), 0), m) for k, m in zip(start_indices, limits)], np.int64)
            in_threads(_dus_rows, rows, True, out, x, u, rdims, start, udims)
        elif itype is not None and all(type(k) is np.ndarray and k.dtype == itype and not k.shape
                                       for k in start_indices):
            _dus_clamped(out, x, u, rdims, start_indices, rlimits, udims)
        else:
            start = np.array([min(max(int(k), 0), m) for k, m in zip(start_indices, limits)], np.int64)
            _dus_rows(0, rows, out, x, u, rdims, start, udims)
        return ndarray(dims, dtype, out)
    return run


@njit(**_opts)
def _dus_clamped(out, x, u, dims, starts, limits, udims):
    """Every row of ``_dus_rows``, the start indices (a tuple of 0-d integer arrays) first
    clamped to [0, limits] as ``_adjusted_start_indices`` clamps them."""
    r = dims.shape[0]
    start = np.empty(r, np.int64)
    for d in range(r):
        start[d] = min(max(int64(starts[d][()]), 0), limits[d])
    rows = 1
    for d in range(r - 1):
        rows *= dims[d]
    _dus_rows(0, rows, out, x, u, dims, start, udims)


dynamic_update_slice.prepare = _dus_prepare


@njit(**_opts)
def _dus_rows(w0, w1, out, x, u, dims, start, udims):
    """Rows [w0, w1) of a dynamic-update-slice's result (rows of the last dimension): the
    operand's row, with the update's row in [start, start + update width) where the row
    lies inside the update along every outer dimension."""
    r = dims.shape[0]
    width = dims[r - 1]
    c0 = start[r - 1]
    uw = udims[r - 1]
    for w in range(w0, w1):
        rem = w
        urow = 0
        ustride = 1
        inside = True
        for d in range(r - 2, -1, -1):
            t = rem % dims[d] - start[d]
            rem //= dims[d]
            if t < 0 or t >= udims[d]:
                inside = False
                break
            urow += t * ustride
            ustride *= udims[d]
        o = w * width
        if not inside:
            for k in range(width):
                out[uint64(o + k)] = x[uint64(o + k)]
            continue
        for k in range(c0):
            out[uint64(o + k)] = x[uint64(o + k)]
        uo = urow * uw
        oc = o + c0
        for k in range(uw):
            out[uint64(oc + k)] = u[uint64(uo + k)]
        for k in range(c0 + uw, width):
            out[uint64(o + k)] = x[uint64(o + k)]


# -- Pad ----------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=1024)
def _pad_plan(operand_dims, result_dims, padding_config):
    """Per dimension (int64 arrays): low, interior + 1, operand size; and for the last
    dimension the operand range [j0, j1) that lands inside the result."""
    if not operand_dims:  # a scalar: one row of one element, no padding
        operand_dims, result_dims, padding_config = (1,), (1,), ((0, 0, 0),)
    low = np.array([c[0] for c in padding_config], np.int64)
    step = np.array([c[2] + 1 for c in padding_config], np.int64)
    size = np.array(operand_dims, np.int64)
    rdims = np.array(result_dims, np.int64)
    lo, st, n, width = int(low[-1]), int(step[-1]), operand_dims[-1], result_dims[-1]
    # result position lo + j * st must lie in [0, width)
    j0 = max(0, (-lo + st - 1) // st)
    j1 = min(n, (width - 1 - lo) // st + 1) if width - 1 - lo >= 0 else 0
    j1 = max(j1, j0)
    return low, step, size, rdims, j0, j1


@njit(inline="always", **_opts)
def _pad_cols(k0, k1, lo, st, j0, j1):
    """The operand elements j of a row that land in result positions [k0, k1): lo + j * st in it."""
    return max(j0, -((lo - k0) // st)), min(j1, -((lo - k1) // st))


@njit(inline="always", **_opts)
def _pad_span(out, o, k0, k1, src, s, padding, pad, lo, st, jl, jh):
    """Result positions [k0, k1) of the row at ``o``: padding, or the operand row at ``s``
    spread out (``lo``, ``st``: the last dimension's low padding and interior + 1; the
    operand elements j in [jl, jh) land in [k0, k1), ``_pad_cols``)."""
    if padding or jh <= jl:
        for k in range(k0, k1):
            out[uint64(o + k)] = pad
    elif st == 1:
        # edge padding, the operand row, edge padding
        for k in range(k0, lo + jl):
            out[uint64(o + k)] = pad
        if jh - jl >= 64:
            _move(out, o + lo + jl, src, s + jl, jh - jl)
        else:
            for j in range(jl, jh):
                out[uint64(o + lo + j)] = src[uint64(s + j)]
        for k in range(lo + jh, k1):
            out[uint64(o + k)] = pad
    elif st == 2:
        # one interior element between neighbours, written in one pass (LLVM
        # vectorises the pairs); a common case: the gradient of a stride-2 convolution
        for k in range(k0, lo + 2 * jl):
            out[uint64(o + k)] = pad
        for j in range(jl, jh - 1):
            out[uint64(o + lo + 2 * j)] = src[uint64(s + j)]
            out[uint64(o + lo + 2 * j + 1)] = pad
        last = lo + 2 * (jh - 1)
        out[uint64(o + last)] = src[uint64(s + jh - 1)]
        for k in range(last + 1, k1):
            out[uint64(o + k)] = pad
    else:
        # padding everywhere, then the operand elements in their places (in cache)
        for k in range(k0, k1):
            out[uint64(o + k)] = pad
        for j in range(jl, jh):
            out[uint64(o + lo + j * st)] = src[uint64(s + j)]


@njit(**_opts)
def _pad_piece(w, out, src, pad, low, step, size, rdims, j0, j1, chunk, nch):
    """Result positions [k0, k1) of one row (``chunk`` of them: long rows are cut)."""
    r = rdims.shape[0]
    width = rdims[r - 1]
    row = w // nch
    k0 = (w - row * nch) * chunk
    k1 = min(width, k0 + chunk)
    o = row * width
    # which operand row lands in result row `row`: per outer dimension invert
    # result_index = edge_padding_low + operand_index * (interior_padding + 1)
    rem = row
    s = 0
    sstride = size[r - 1]
    padding = False
    for d in range(r - 2, -1, -1):
        i = rem % rdims[d]
        rem //= rdims[d]
        t = i - low[d]
        if t < 0 or t % step[d] != 0 or t // step[d] >= size[d]:
            padding = True  # edge or interior padding of an outer dimension
            break
        s += (t // step[d]) * sstride
        sstride *= size[d]
    lo = low[r - 1]
    st = step[r - 1]
    jl, jh = _pad_cols(k0, k1, lo, st, j0, j1)
    _pad_span(out, o, k0, k1, src, s, padding, pad, lo, st, jl, jh)


@njit(**_opts)
def _pad_range(w0, w1, out, src, pad, low, step, size, rdims, j0, j1, chunk, nch):
    """Work items [w0, w1): rows of the result (pieces of ``chunk`` positions of long rows):
    padding, or an operand row spread out."""
    for w in range(w0, w1):
        _pad_piece(w, out, src, pad, low, step, size, rdims, j0, j1, chunk, nch)


@kernel("pad")
def pad(operand, padding_value, *, shape, padding_config):
    n = shape.numel
    out = new_words(shape, n)
    if n:
        pad_word = words(np.asarray(padding_value, shape.dtype))[0]
        low, step, size, rdims, j0, j1 = _pad_plan(tuple(operand.shape), tuple(shape.dims),
                                                   tuple(tuple(c) for c in padding_config))
        if operand.size == 0:
            j0 = j1 = 0
        width = shape.dims[-1] if shape.dims else 1
        chunk = width
        if n // width < 4 * threads() and width >= 8192:  # few long rows: cut them
            chunk = max(4096, -(-width // (4 * threads())))
        nch = -(-width // chunk)
        # shared by in_threads (not a prange loop): the caller takes the parts a descheduled
        # worker has not started, and no parallel wrapper to compile
        in_threads(_pad_range, nch * (n // width), _pad_parallel(n, operand.size, shape.dtype, step, width), out,
                   words(operand), pad_word, low, step, size, rdims, j0, j1, chunk, nch)
    return as_result(out, shape)


#: result rows of at least this many bytes copied whole: a pad streams at a copy's speed
_PAD_LONG_ROW_BYTES = 1024


def _pad_parallel(n, operand_size, dtype, step, width):
    """Whether a pad of ``n`` result elements (rows of ``width``) runs in threads: from
    ``MOVE_PARALLEL_THRESHOLD`` elements, except where its rows are long and copied whole (no
    interior padding in the last dimension) and what it reads and writes stays in the cache
    (``shape.streamed``: a 4 MiB pad of rows, f32[1448, 724] from f32[724, 724], one thread at
    load 2.7: 0.200 ms against 0.230 in two; on the idle machine two took 0.248).  Short rows
    cost a row's set-up each, more than their bytes: f32[64, 516, 64] from [64, 256, 64] with
    interior padding of the middle dimension (rows of 256 bytes) took 3.19 ms in one thread,
    2.00 in two (median of 40 interleaved, idle), as a kernel slower than a copy does."""
    itemsize = np.dtype(dtype).itemsize
    long_rows = int(width) * itemsize >= _PAD_LONG_ROW_BYTES
    return n >= MOVE_PARALLEL_THRESHOLD and not (
        int(step[-1]) == 1 and long_rows and streamed((n + operand_size) * itemsize))


def _pad_prepare(operand_shapes, *, shape, padding_config):
    """The pad prepared for a run plan: which operand row lands in each result row
    (``_pad_row_offsets``) computed once, so that a run walks the rows without dividing
    (``_pad_rows``); in the calling thread below ``MOVE_PARALLEL_THRESHOLD``, shared by
    ``in_threads`` above it, as the kernel shares its rows (f32[64, 256, 64] with interior
    padding of its middle dimension, 33 024 result rows of 64: 1.80 ms through the
    kernel's per-row divisions, one thread, load 5)."""
    xs = operand_shapes[0]
    if not (shape.is_array and shape.is_static) or shape.numel == 0 or np.dtype(xs.dtype) != np.dtype(shape.dtype) \
            or xs.numel == 0 or np.dtype(shape.dtype).itemsize not in _WORD_SIZES or np.dtype(shape.dtype).hasobject:
        return None
    n = shape.numel
    word = word_dtype(shape.dtype)
    nbytes, dtype, dims = n * word.itemsize, np.dtype(shape.dtype), shape.dims
    low, step, size, rdims, j0, j1 = _pad_plan(tuple(xs.dims), tuple(dims), tuple(tuple(c) for c in padding_config))
    width = dims[-1] if dims else 1
    srow = _pad_row_offsets(low, step, size, rdims)
    lo, st = int(low[-1]), int(step[-1])
    read = word_reader(xs)
    take = POOL.take
    parallel = _pad_parallel(n, xs.numel, dtype, step, dims[-1] if dims else 1)
    cuts = {}   # thread count -> (work items, chunk, chunks a row), as the kernel cuts rows

    def cut(k):
        chunk, nch = width, 1
        if n // width < 4 * k and width >= 8192:   # few long rows: cut them
            chunk = max(4096, -(-width // (4 * k)))
            nch = -(-width // chunk)
        got = cuts[k] = (nch * (n // width), chunk, nch)
        return got

    def run(operand, padding_value):
        src = read(operand)
        if src is None:
            return pad(operand, padding_value, shape=shape, padding_config=padding_config)
        out = take(nbytes).view(word)
        if type(padding_value) is ndarray and padding_value.dtype == dtype:   # (a literal: one view, not three)
            pad_word = np.frombuffer(padding_value, word)[0]
        else:
            pad_word = np.asarray(padding_value, dtype).reshape(-1).view(word)[0]
        k = threads()
        items, chunk, nch = cuts.get(k) or cut(k)
        if parallel:
            in_threads(_pad_rows, items, True, out, src, pad_word, srow, width, lo, st, j0, j1, chunk, nch)
        else:
            _pad_rows(0, items, out, src, pad_word, srow, width, lo, st, j0, j1, chunk, nch)
        return ndarray(dims, dtype, out)
    return run


pad.prepare = _pad_prepare


@njit(**_opts)
def _pad_rows(w0, w1, out, src, pad, srow, width, lo, st, j0, j1, chunk, nch):
    """``_pad_range`` with each result row's operand offset read from ``srow`` (-1: a row
    of padding), computed once by the prepared kernel: no divisions per row (a 256 KiB pad
    with interior padding of its rows spent most of its time on them)."""
    if nch == 1:   # whole rows: the same columns in each
        jl, jh = _pad_cols(0, width, lo, st, j0, j1)
        for w in range(w0, w1):
            s = srow[w]
            _pad_span(out, w * width, 0, width, src, s, s < 0, pad, lo, st, jl, jh)
        return
    for w in range(w0, w1):
        row = w // nch
        k0 = (w - row * nch) * chunk
        k1 = min(width, k0 + chunk)
        jl, jh = _pad_cols(k0, k1, lo, st, j0, j1)
        s = srow[row]
        _pad_span(out, row * width, k0, k1, src, s, s < 0, pad, lo, st, jl, jh)


def _pad_row_offsets(low, step, size, rdims):
    """Per result row (row-major over every dimension but the last), the offset of the
    operand row that lands in it, or -1 when it lies in edge or interior padding."""
    r = len(rdims)
    rows = int(np.prod(rdims[:-1], dtype=np.int64))
    ok = np.ones(rows, bool)
    s = np.zeros(rows, np.int64)
    if r > 1:
        idx = np.indices(tuple(int(d) for d in rdims[:-1])).reshape(r - 1, -1)
        sstride = int(size[-1])
        for d in range(r - 2, -1, -1):
            t = idx[d] - low[d]
            ok &= (t >= 0) & (t % step[d] == 0) & (t // step[d] < size[d])
            s += (t // step[d]) * sstride
            sstride *= int(size[d])
    return np.where(ok, s, -1).astype(np.int64)
