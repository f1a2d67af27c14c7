"""CPU kernels of the indexing family: gather and scatter.

Both ops are loops over *slices*: Gather copies one slice of the operand per index vector
(``batch`` position ``p``), Scatter combines one window of updates per scatter index.
Everything that depends on the dimension numbers is computed once in Python (and
cached) as int64 tables the kernels read at run time, so a kernel compiles once per
element type, never per configuration:

- index vector ``k`` of position ``p`` sits at ``((p // inner) * K + k) * inner + p % inner``
  in the flat indices (``inner``: the product of the index dimensions after
  ``index_vector_dim``; 1 when the index vector is last or implicit);
- ``imap[0, k]`` is the operand stride of dimension ``start_index_map[k]`` and
  ``imap[1, k]`` the largest valid start there (``dim - slice size``);
- ``bmap`` (batching dimensions): position ``p``'s coordinate along a batch dimension is
  ``(p // bmap[1, i]) % bmap[2, i]``, which moves the operand by ``bmap[0, i]``;
- a slice / window is a strided loop nest (dims, destination strides, source strides:
  the rows of ``sl`` / ``wl``), merged as in ``shape.plan_copy`` so that whole rows
  are contiguous runs (the "row gather" is one run per index).

Gather clamps each start into the operand (XLA); element types are moved as bits
(``shape.words``).  Gather is parallel over (position, row of the slice).  A gather
fused with the computation of its start indices (``fusion.GatherFusion``: ``x[i, j]``
as JAX writes it) runs a generated loop that computes each position's index components
(the fused loops' statements, ``loopgen.LoopSource``) and gathers, with the same plan
and the same placement of slices (``_place``) as the gather's own kernel; one source per
structure, cached on disk like the fused loops.

Scatter applies the updates in XLA's order (scatter index by scatter index in row-major
order, each window whole, in row-major order) and skips a window that does not fit
whole.  Its combiner is compiled into the kernel, whose source is generated and cached
on disk as the fused loops are (``jit_cache.load_source``): one kernel per element type
serves the standard combiners (add, multiply, maximum, minimum, and, or, xor), picked by
a run-time ``code``; the overwrite moves bits; any other element-wise region is compiled
from its instructions with the fused loops' emitters (``emit.EMITTERS``).  A region that
cannot be compiled runs through the NumPy reference.  The parallel scatter is
deterministic: thread ``t`` owns the result positions ``[lo_t, hi_t)`` and walks all the
updates in order, applying only those that land in its range, so every result element
sees its updates in exactly the reference's order, whatever the combiner.
"""
import functools
import math

import numpy as np
from numba import njit, prange, uint64
from numba.core.errors import NumbaError

from ... import dtypes, fpenv
from ...ops.indexing import (_HUGE_INDEX, _batch_position, _index_values, _offset_operand_dims, _scatter_reference,
                             _split_scatter_operands)
from ..emit import _FTZ, can_emit, carrier, carrier_dtype, emit, finish, supported_type
from ..jit_cache import load_source
from ..loopgen import LoopSource
from ..numba_setup import MOVE_PARALLEL_THRESHOLD, PARALLEL_THRESHOLD
from . import kernel
from .linalg import _DAZ, _X86
from .shape import (POOL, _copy_flat, _copy_run, _move, as_result, copy_words, in_threads, merge_dims, new_words,
                    product, row_major_strides, streamed, strided_copy, threads, word_dtype, word_reader, words)

_opts = dict(cache=True, nogil=True)
ndarray = np.ndarray   # (shape.ndarray: a prepared kernel's result seen in one call)


def _indices(indices):
    """The indices as a flat int32 or int64 array (the two types the kernels take); other
    integer types become int64, u64 capped as the reference caps it (huge stays huge)."""
    a = np.asarray(indices)
    if a.dtype not in (np.int32, np.int64):
        a = _index_values(a)
    return np.ascontiguousarray(a).reshape(-1)


def _table(rows, n):
    """An int64 table of ``len(rows)`` rows and n columns."""
    return np.array(rows, np.int64).reshape(len(rows), n)


def _index_layout(indices_dims, index_vector_dim):
    """``inner``: the product of the index dimensions after ``index_vector_dim``."""
    return product(indices_dims[index_vector_dim + 1:]) if index_vector_dim < len(indices_dims) else 1


def _batching_table(pairs, ostr, batch_sizes, index_vector_dim):
    """bmap for (operand dim, indices dim) batching pairs: stride, divisor, size."""
    cols = []
    for d_operand, d_indices in pairs:
        pos = _batch_position(d_indices, index_vector_dim)
        cols.append((ostr[d_operand], product(batch_sizes[pos + 1:]), batch_sizes[pos]))
    return _table([[c[i] for c in cols] for i in range(3)], len(cols))


# =========================================================================================
# Gather
# =========================================================================================

class GatherPlan:
    __slots__ = ("nb", "K", "inner", "imap", "bmap", "S", "dmap", "sl", "nrows", "take", "positions_minor", "batch1",
                 "call")


@functools.lru_cache(maxsize=1024)
def _gather_plan(odims, idims, rdims, offset_dims, collapsed_slice_dims, start_index_map, index_vector_dim,
                 slice_sizes, operand_batching_dims, start_indices_batching_dims):
    plan = GatherPlan()
    ostr, rstr = row_major_strides(odims), row_major_strides(rdims)
    batch_dims = [d for d in range(len(rdims)) if d not in offset_dims]
    batch_sizes = [rdims[d] for d in batch_dims]
    plan.nb = product(batch_sizes)
    plan.K = len(start_index_map)
    plan.inner = _index_layout(idims, index_vector_dim)
    plan.imap = _table([[ostr[d] for d in start_index_map],
                        [odims[d] - slice_sizes[d] for d in start_index_map]], plan.K)
    plan.bmap = _batching_table(zip(operand_batching_dims, start_indices_batching_dims), ostr, batch_sizes,
                                index_vector_dim)
    # where slice p starts in the result: p * S when the offset dimensions are the last ones
    remapped = _offset_operand_dims(len(odims), collapsed_slice_dims, operand_batching_dims)
    slice_dims = [slice_sizes[d] for d in remapped]
    if tuple(offset_dims) == tuple(range(len(batch_dims), len(rdims))):
        plan.S, plan.dmap = product(slice_dims), _table([[], [], []], 0)
    else:
        plan.S = -1
        plan.dmap = _table([[rstr[d] for d in batch_dims],
                            [product(batch_sizes[j + 1:]) for j in range(len(batch_dims))], batch_sizes],
                           len(batch_dims))
    dims, (dstr, sstr) = merge_dims(slice_dims, [rstr[d] for d in offset_dims], [ostr[d] for d in remapped])
    plan.sl = _table([dims, dstr, sstr], len(dims))
    plan.nrows = product(dims[:-1])
    # positions minor in the result (x[:, i]: the batch dimension last): walk the slice
    # elements outside and the positions inside (``by_element``)
    batch_strides = [rstr[d] for d in batch_dims if rdims[d] > 1]
    slice_strides = [s for n, s in zip(dims, dstr) if n > 1]
    plan.positions_minor = bool(plan.S < 0 and batch_strides and slice_strides
                                and min(batch_strides) < min(slice_strides))
    # with one start index (K = 1) the index of position p is idx[p], whatever inner is
    plan.take = plan.K == 1 and not operand_batching_dims and plan.S >= 0 and plan.nrows == 1
    plan.batch1 = _batch1_args(plan)
    plan.call = {}
    return plan


#: the shortest run of positions sharing their batch coordinate that ``batch1_range`` takes
#: (131072 f32 positions, one thread, min of 20, load 7-8, against the blocked loop of
#: ``_elems``: runs of 1: 14-18 vs 17-21 ms (three slices a position), 2: 3.1 vs 9-17,
#: 4: 0.28 vs 13-19, 16 and more: 0.09-0.18 vs 9-17)
_BATCH1_MIN_RUN = 2


def _batch1_args(plan):
    """(top, stride, run, size, batch stride) of a gather of single elements with one start
    index and one batching dimension whose coordinate changes every ``run`` positions, at
    least ``_BATCH1_MIN_RUN`` of them (``take_along_axis``: x[b, i[b, j]]); else None.  It
    runs in threads from ``MOVE_PARALLEL_THRESHOLD`` positions as the others do (f32[2048,
    2048], 64 a row, 131072 positions: one thread 0.14 ms, two 0.16 (min, load 2.6); 262144
    from f32[512, 512]: 0.138 vs 0.107 (min), the medians equal, load 3)."""
    if not (plan.K == 1 and plan.bmap.shape[1] == 1 and plan.nrows == 1 and plan.sl[0, 0] == 1
            and not plan.take and not plan.positions_minor):
        return None
    bstride, run, size = (int(v) for v in plan.bmap[:, 0])
    if run < _BATCH1_MIN_RUN:
        return None
    return int(plan.imap[1, 0]), int(plan.imap[0, 0]), run, size, bstride


#: a gather of whole rows (``take``) of at least this many bytes each streams like a copy
#: (``_gather_call``)
_STREAMED_ROW_BYTES = 512


def _gather_call(plan, n, itemsize):
    """The kernel of a gather of ``plan`` with ``n`` result elements of ``itemsize`` bytes, as
    a function of (out, src, idx): the result's, the operand's words and the flat int32/int64
    indices.  Decided once per plan and threshold (kept on the plan): what does not depend on
    the indices (where each position's slice lands in the result, the kernel, whether it runs
    in threads).  A gather of long rows (``x[i]``, rows of ``_STREAMED_ROW_BYTES`` or more,
    each one run copied) reads and writes at the copy's speed: in the calling thread while
    that stays in the cache (``shape.streamed``; rows of 256 f32 from f32[4096, 256], load
    2.8: 0.264 ms (median) through the run in one thread, 0.267 in two)."""
    parallel = n >= MOVE_PARALLEL_THRESHOLD
    if (parallel and plan.take and plan.sl[2, 0] == 1 and plan.sl[0, 0] * itemsize >= _STREAMED_ROW_BYTES
            and streamed(2 * n * itemsize)):
        parallel = False
    call = plan.call.get(parallel)
    if call is not None:
        return call
    nb, K, inner, imap, bmap, S, dmap, sl, nrows = (plan.nb, plan.K, plan.inner, plan.imap, plan.bmap, plan.S,
                                                    plan.dmap, plan.sl, plan.nrows)
    if plan.positions_minor:
        do = np.empty(nb, np.int64)
        _destinations(do, dmap)
        runs = nb == 1 or bool(np.all(np.diff(do) == 1))
        ne = product(sl[0])
        par = parallel and ne > 1

        def call(out, src, idx):
            so = np.empty(nb, np.int64)
            _start_offsets(so, idx, K, inner, imap, bmap)
            in_threads(by_element, ne, par, out, src, so, do, sl, runs, _ROW_BUFFER_FROM)
    elif plan.batch1 is not None:
        args = plan.batch1
        if parallel:
            def call(out, src, idx):
                _shared(batch1_range, nb, out, src, idx, *args)
        else:
            def call(out, src, idx):
                batch1_range(0, nb, out, src, idx, *args)
    elif nrows == 1 and sl[0, 0] == 1 and not plan.take:
        if parallel:
            def call(out, src, idx):
                _shared(elems_range, nb, out, src, idx, K, inner, imap, bmap)
        else:
            def call(out, src, idx):
                elems_ser(out, src, idx, nb, K, inner, imap, bmap)
    elif plan.take and sl[0, 0] == 1:
        top, stride = imap[1, 0], imap[0, 0]
        if parallel:
            def call(out, src, idx):
                _shared(take1_range, nb, out, src, idx, top, stride)
        else:
            def call(out, src, idx):
                take1_ser(out, src, idx, nb, top, stride)
    elif plan.take:
        top, stride, L, ss = imap[1, 0], imap[0, 0], sl[0, 0], sl[2, 0]
        if parallel:
            def call(out, src, idx):
                _shared(take_range, nb, out, src, idx, top, stride, L, ss)
        else:
            def call(out, src, idx):
                take_ser(out, src, idx, nb, top, stride, L, ss)
    else:
        slices = gather_par if parallel else gather_ser

        def call(out, src, idx):
            slices(out, src, idx, nb, K, inner, imap, bmap, S, dmap, sl, nrows)
    plan.call[parallel] = call
    return call


@njit(inline="always", **_opts)
def _place(p, row, so, out, src, S, dmap, sl):
    """Row ``row`` of position p's slice, which starts at ``so`` in the operand, into the
    result."""
    if S >= 0:
        do = p * S
    else:
        do = 0
        for j in range(dmap.shape[1]):
            do += ((p // dmap[1, j]) % dmap[2, j]) * dmap[0, j]
    r = sl.shape[1]
    rem = row
    for d in range(r - 2, -1, -1):
        c = rem % sl[0, d]
        rem //= sl[0, d]
        do += c * sl[1, d]
        so += c * sl[2, d]
    _copy_run(out, do, sl[1, r - 1], src, so, sl[2, r - 1], 0, sl[0, r - 1])


@njit(**_opts)
def _gather_item(w, out, src, idx, K, inner, imap, bmap, S, dmap, sl, nrows):
    """Work item w: row ``row`` of the slice of position ``p``."""
    if nrows == 1:
        p = w
        row = 0
    else:
        p = w // nrows
        row = w - p * nrows
    _place(p, row, _start_offset(p, idx, K, inner, imap[0], imap[1], bmap), out, src, S, dmap, sl)


@njit(parallel=True, **_opts)
def gather_par(out, src, idx, nb, K, inner, imap, bmap, S, dmap, sl, nrows):
    """Every (position, slice row) pair, in parallel."""
    for w in prange(nb * nrows):
        _gather_item(w, out, src, idx, K, inner, imap, bmap, S, dmap, sl, nrows)


@njit(**_opts)
def gather_ser(out, src, idx, nb, K, inner, imap, bmap, S, dmap, sl, nrows):
    for w in range(nb * nrows):
        _gather_item(w, out, src, idx, K, inner, imap, bmap, S, dmap, sl, nrows)


@njit(inline="always", **_opts)
def _take_item(p, out, src, idx, top, stride, L, ss):
    v = np.int64(idx[uint64(p)])
    if v < 0:
        v = 0
    elif v > top:
        v = top
    _copy_run(out, p * L, 1, src, v * stride, ss, 0, L)


_compiled = set()   # (range kernel, the arguments' types) that ran: ``_shared``


def _shared(fn, n, out, src, idx, *args):
    """``in_threads(fn, n, True, out, src, idx, *args)``: the positions of a gather shared by
    the threads in parts that whichever thread is free takes, rather than a ``prange``
    loop's fixed halves (a gather of a million single elements waits for its slowest
    thread: 1.3 ms (median, two threads, load 2.7) with a worker that another process
    kept from its core, 0.83 ms when both ran); ``compiled`` where these argument types ran
    before (a range kernel per element, index and source type, writeable or not)."""
    key = (fn, out.dtype, src.dtype, idx.dtype, src.flags.writeable)
    known = key in _compiled
    in_threads(fn, n, True, out, src, idx, *args, compiled=known)
    if not known:
        _compiled.add(key)


@njit(**_opts)
def take_range(lo, hi, out, src, idx, top, stride, L, ss):
    """Positions [lo, hi) of ``take_par``'s loop."""
    for p in range(lo, hi):
        _take_item(p, out, src, idx, top, stride, L, ss)


@njit(**_opts)
def take1_range(lo, hi, out, src, idx, top, stride):
    """Positions [lo, hi) of ``take1_par``'s loop."""
    for p in range(lo, hi):
        v = min(max(np.int64(idx[uint64(p)]), 0), top)
        out[uint64(p)] = src[uint64(v * stride)]


@njit(**_opts)
def batch1_range(lo, hi, out, src, idx, top, stride, run, size, bstride):
    """Positions [lo, hi) of a gather of single elements with one start index (position p's
    is idx[p], clamped into [0, top]) and one batching dimension, whose coordinate
    (p // run) % size moves the operand by ``bstride``: per run of positions that share it,
    its offset once, then a loop of loads alone that vectorises (gathers)."""
    p = lo
    while p < hi:
        q = p // run
        end = min(hi, (q + 1) * run)
        s = src[(q % size) * bstride:]
        o = out[p:end]
        i = idx[p:end]
        for j in range(end - p):
            o[j] = s[uint64(min(max(np.int64(i[j]), 0), top) * stride)]
        p = end


@njit(**_opts)
def elems_range(lo, hi, out, src, idx, K, inner, imap, bmap):
    """Positions [lo, hi) of a gather of single elements (``_elems``)."""
    _elems(lo, hi, out, src, idx, K, inner, imap, bmap)


@njit(parallel=True, **_opts)
def take_par(out, src, idx, nb, top, stride, L, ss):
    """The common gather (``x[i]``, ``x[i, :]``, ``take``): one start index per position
    (then position p's index is idx[p]), no batching dimensions, and each slice is one
    run of L elements, written at p * L."""
    for p in prange(nb):
        _take_item(p + 0, out, src, idx, top, stride, L, ss)


@njit(**_opts)
def take_ser(out, src, idx, nb, top, stride, L, ss):
    for p in range(nb):
        _take_item(p, out, src, idx, top, stride, L, ss)


@njit(parallel=True, **_opts)
def take1_par(out, src, idx, nb, top, stride):
    """take of single elements (``x[i]`` of a vector): one load and one store per position,
    written branch-free so the loop vectorises (gathers)."""
    for p in prange(nb):
        v = min(max(np.int64(idx[uint64(p)]), 0), top)
        out[uint64(p)] = src[uint64(v * stride)]


@njit(**_opts)
def take1_ser(out, src, idx, nb, top, stride):
    for p in range(nb):
        v = min(max(np.int64(idx[uint64(p)]), 0), top)
        out[uint64(p)] = src[uint64(v * stride)]


@njit(inline="always", **_opts)
def _clamped(idx, at, top):
    return min(max(np.int64(idx[uint64(at)]), 0), top)


@njit(inline="always", **_opts)
def _elems(lo, hi, out, src, idx, K, inner, imap, bmap):
    """Positions [lo, hi) of a gather of single elements: each start index clamped into
    the operand ([0, dim - 1]), times its stride; batching dimensions add their
    coordinate's stride.  The index vectors of one to three components, last in the
    indices and without batching, are spelled out branch-free so that the loop
    vectorises (AVX-512 gathers); any other layout runs the general loop."""
    if inner == 1 and bmap.shape[1] == 0 and 1 <= K <= 3:
        s0, t0 = imap[0, 0], imap[1, 0]
        if K == 1:
            for p in range(lo, hi):
                out[uint64(p)] = src[uint64(_clamped(idx, p, t0) * s0)]
        elif K == 2:
            s1, t1 = imap[0, 1], imap[1, 1]
            for p in range(lo, hi):
                out[uint64(p)] = src[uint64(_clamped(idx, 2 * p, t0) * s0 + _clamped(idx, 2 * p + 1, t1) * s1)]
        else:
            s1, t1, s2, t2 = imap[0, 1], imap[1, 1], imap[0, 2], imap[1, 2]
            for p in range(lo, hi):
                out[uint64(p)] = src[uint64(_clamped(idx, 3 * p, t0) * s0 + _clamped(idx, 3 * p + 1, t1) * s1
                                            + _clamped(idx, 3 * p + 2, t2) * s2)]
        return
    # any other layout, in blocks: the offsets first (index arithmetic, batching
    # coordinates counted up as p advances rather than divided out), then the loads alone,
    # so that the loads of a block are all in flight together (4-14x faster on
    # take_along_axis than one position at a time)
    stride = imap[0].copy()
    top = imap[1].copy()
    nbat = bmap.shape[1]
    count = np.empty(nbat, np.int64)
    left = np.empty(nbat, np.int64)
    boff = 0
    for i in range(nbat):
        q = lo // bmap[1, i]
        count[i] = q % bmap[2, i]
        left[i] = bmap[1, i] - (lo - q * bmap[1, i])
        boff += count[i] * bmap[0, i]
    off = np.empty(min(hi - lo, 2048), np.int64)
    for b0 in range(lo, hi, 2048):
        b1 = min(hi, b0 + 2048)
        for p in range(b0, b1):
            off[p - b0] = _index_offset(p, idx, K, inner, stride, top)
        if nbat:
            for p in range(b0, b1):
                off[p - b0] += boff
                for i in range(nbat):
                    left[i] -= 1
                    if left[i] == 0:
                        left[i] = bmap[1, i]
                        count[i] += 1
                        boff += bmap[0, i]
                        if count[i] == bmap[2, i]:
                            count[i] = 0
                            boff -= bmap[2, i] * bmap[0, i]
        o = out[b0:b1]
        for q in range(b1 - b0):
            o[q] = src[uint64(off[q])]


@njit(inline="always", **_opts)
def _index_offset(p, idx, K, inner, stride, top):
    """Where position p's slice starts in the operand, batching dimensions aside: each
    start index clamped (``top[k]``: dim - slice size) times its stride (XLA:
    full_start_index[start_index_map[k]] = clamp(start_index[k], 0, dim - slice size))."""
    if inner == 1:
        base = p * K
    else:
        q = p // inner
        base = q * K * inner + (p - q * inner)
    so = 0
    for k in range(K):
        so += _clamped(idx, base + k * inner, top[k]) * stride[k]
    return so


@njit(inline="always", **_opts)
def _start_offset(p, idx, K, inner, stride, top, bmap):
    """Where position p's slice starts in the operand: its start indices' offset plus the
    batching dimensions' strides."""
    so = _index_offset(p, idx, K, inner, stride, top)
    for i in range(bmap.shape[1]):
        so += ((p // bmap[1, i]) % bmap[2, i]) * bmap[0, i]
    return so


@njit(**_opts)
def _start_offsets(so, idx, K, inner, imap, bmap):
    """so[p]: where position p's slice starts in the operand."""
    stride = imap[0].copy()
    top = imap[1].copy()
    for p in range(so.shape[0]):
        so[p] = _start_offset(p, idx, K, inner, stride, top, bmap)


@njit(**_opts)
def _destinations(do, dmap):
    """do[p]: where position p's slice starts in the result."""
    for p in range(do.shape[0]):
        o = 0
        for j in range(dmap.shape[1]):
            o += ((p // dmap[1, j]) % dmap[2, j]) * dmap[0, j]
        do[p] = o


#: a gather of columns from an operand of more than ``_ROW_BUFFER_FROM`` bytes (not in the
#: last-level cache) copies each operand row it reads from into a buffer first when the
#: columns it reads span at most ``_ROW_BUFFER_BYTES`` (and not much more than it gathers)
_ROW_BUFFER_BYTES = 1 << 16
_ROW_BUFFER_FROM = 16 << 20


@njit(**_opts)
def by_element(lo, hi, out, src, so, do, sl, runs, buffer_from):
    """Elements [lo, hi) of the slice of a gather whose positions are the result's minor
    dimension (``x[:, i]``): for each element of the slice (outer), every position
    (inner), so that the result is written along its rows and each row of the operand is
    read while in cache.  Threads share the elements through ``in_threads``: the
    ``prange`` version of this loop compiled to code 2.3x slower in one thread.
    ``runs``: the positions are consecutive in the result (do[p] = do[0] + p, as in
    ``x[:, i]``): each element's positions are then written as one run, 1.6x faster.
    And when the positions read a span of at most ``_ROW_BUFFER_BYTES`` of the operand
    (not much wider than they are many), that span is first copied into a buffer
    (``_move``: read in order, at the copy's speed) and gathered from there, when the
    operand is larger than ``buffer_from`` bytes (``_ROW_BUFFER_FROM``): the random reads of an operand row not in
    any cache each waited for their line (x[:, i] of f32[2896, 2896], load 5, one thread
    17.3 -> 14.3 ms, two 20.2 -> 13.8; of f32[5792, 5792] 88 -> 63, 92 -> 54); from the
    last-level cache they are faster than the copy (f32[1024, 1024]: 0.45 -> 0.54 ms)."""
    r = sl.shape[1]
    nb = so.shape[0]
    smin = 0
    span = 0
    if runs and nb and src.size * src.itemsize > buffer_from:
        smin = so[0]
        smax = so[0]
        for p in range(nb):
            v = so[p]
            if v < smin:
                smin = v
            if v > smax:
                smax = v
        span = smax - smin + 1
        if span * src.itemsize > _ROW_BUFFER_BYTES or span > 4 * nb + 64 or span < 64:
            span = 0
    buf = np.empty(span, src.dtype)
    rel = so
    if span:
        rel = so - smin
    for e in range(lo, hi):
        rem = e
        doff = 0
        soff = 0
        for d in range(r - 1, -1, -1):
            c = rem % sl[0, d]
            rem //= sl[0, d]
            doff += c * sl[1, d]
            soff += c * sl[2, d]
        if span:
            _move(buf, 0, src, soff + smin, span)
            o = out[do[0] + doff:do[0] + doff + nb]
            for p in range(nb):
                o[p] = buf[uint64(rel[p])]
        elif runs:
            o = out[do[0] + doff:do[0] + doff + nb]
            s = src[soff:]
            for p in range(nb):
                o[p] = s[uint64(so[p])]
        else:
            for p in range(nb):
                out[uint64(do[p] + doff)] = src[uint64(so[p] + soff)]


@njit(parallel=True, **_opts)
def elems_par(out, src, idx, nb, K, inner, imap, bmap):
    """A gather of single elements (every slice size 1, any number of start indices, batching
    dimensions): position p's result is one element, at out[p] whatever the offset
    dimensions (they all have size 1).  Blocks of 4096 positions in parallel."""
    for c in prange((nb + 4095) // 4096):
        _elems(c * 4096, min(nb, (c + 1) * 4096), out, src, idx, K, inner, imap, bmap)


@njit(**_opts)
def elems_ser(out, src, idx, nb, K, inner, imap, bmap):
    _elems(0, nb, out, src, idx, K, inner, imap, bmap)


@kernel("gather")
def gather(operand, start_indices, *, shape, offset_dims, collapsed_slice_dims, start_index_map, index_vector_dim,
           slice_sizes, operand_batching_dims=(), start_indices_batching_dims=(), indices_are_sorted=False):
    n = shape.numel
    if operand.ndim == 0:  # every result element is the scalar
        return np.full(shape.dims, operand, shape.dtype)
    if 0 in operand.shape or 0 in slice_sizes:  # empty slices: XLA:CPU gives zeros
        return np.zeros(shape.dims, shape.dtype)
    out = new_words(shape, n)
    if n:
        plan = _gather_plan(tuple(operand.shape), tuple(np.shape(start_indices)), tuple(shape.dims),
                            tuple(offset_dims), tuple(collapsed_slice_dims), tuple(start_index_map),
                            int(index_vector_dim), tuple(slice_sizes), tuple(operand_batching_dims),
                            tuple(start_indices_batching_dims))
        _gather_call(plan, n, np.dtype(shape.dtype).itemsize)(out, words(operand), _indices(start_indices))
    return as_result(out, shape)


_INDEX_TYPES = (np.dtype(np.int32), np.dtype(np.int64))


def _gather_prepare(operand_shapes, *, shape, offset_dims, collapsed_slice_dims, start_index_map, index_vector_dim,
                    slice_sizes, operand_batching_dims=(), start_indices_batching_dims=(), indices_are_sorted=False):
    """``gather`` prepared for a run plan (see ``shape.py``'s prepared kernels): the plan and
    the kernel decided once; a run checks its operands, takes the result's buffer and calls
    the kernel (x[:, i] of f32[256, 256]: the kernel's own set-up was 10-20 us of 25-30)."""
    oshape, ishape = operand_shapes
    dtype = np.dtype(shape.dtype)
    if (not shape.is_array or shape.numel == 0 or oshape.rank == 0 or 0 in oshape.dims or 0 in slice_sizes
            or dtype.itemsize not in (1, 2, 4, 8, 16) or dtype.hasobject
            or np.dtype(oshape.dtype).itemsize != dtype.itemsize):
        return None
    n = shape.numel
    plan = _gather_plan(tuple(oshape.dims), tuple(ishape.dims), tuple(shape.dims), tuple(offset_dims),
                        tuple(collapsed_slice_dims), tuple(start_index_map), int(index_vector_dim), tuple(slice_sizes),
                        tuple(operand_batching_dims), tuple(start_indices_batching_dims))
    call = _gather_call(plan, n, dtype.itemsize)
    read = word_reader(oshape)
    idims, dims = tuple(ishape.dims), tuple(shape.dims)
    word = word_dtype(dtype)
    nbytes = n * word.itemsize
    take = POOL.take
    attrs = dict(shape=shape, offset_dims=offset_dims, collapsed_slice_dims=collapsed_slice_dims,
                 start_index_map=start_index_map, index_vector_dim=index_vector_dim, slice_sizes=slice_sizes,
                 operand_batching_dims=operand_batching_dims, start_indices_batching_dims=start_indices_batching_dims)

    def run(operand, start_indices):
        src = read(operand)
        if (src is None or type(start_indices) is not np.ndarray or start_indices.dtype not in _INDEX_TYPES
                or start_indices.shape != idims or not start_indices.flags.c_contiguous):
            return gather(operand, start_indices, **attrs)
        out = take(nbytes).view(word)
        call(out, src, start_indices.reshape(-1))
        return ndarray(dims, dtype, out)
    return run


gather.prepare = _gather_prepare


# -- a gather fused with the computation of its start indices (fusion.GatherFusion) --------

# The generated loops: {args} the index inputs, the element-wise loop's run-time arguments;
# {body} the statements that compute ``so``, where position i's slice starts in the operand.
_FUSED_GATHER_SOURCE = '''
from numba import uint64
from xla_explorer.executors.cpu.indexing import _place


@njit(cache=True, nogil=True, error_model="numpy")
def elems(lo, hi, out, src, {args}):
    """Single elements: out[i] = the element at position i's start, for i in [lo, hi), in
    blocks: the offsets first (the index arithmetic vectorises), then the loads alone (all
    in flight together): 1.5-1.75x faster than one position at a time on x[i, j]."""
{setup}
    off = np.empty(1024, np.int64)
    for b0 in range(lo, hi, 1024):
        b1 = min(hi, b0 + 1024)
        for i in range(b0, b1):
{body12}
            off[i - b0] = so
        for q in range(b1 - b0):
            out[uint64(b0 + q)] = src[uint64(off[q])]


@njit(parallel=True, cache=True, nogil=True)
def elems_par(nb, out, src, {args}):
    """Blocks of 4096 positions in parallel."""
    for c in prange((nb + 4095) // 4096):
        elems(c * 4096, min(nb, (c + 1) * 4096), out, src, {args})


@njit(cache=True, nogil=True, error_model="numpy")
def slices(lo, hi, out, src, {args}, S, dmap, sl, nrows):
    """Slices: the (position, slice row) pairs w in [lo, hi)."""
{setup}
    for w in range(lo, hi):
        i = w // nrows
        row = w - i * nrows
{body}
        _place(i, row, so, out, src, S, dmap, sl)


@njit(parallel=True, cache=True, nogil=True)
def slices_par(nw, out, src, {args}, S, dmap, sl, nrows):
    """Blocks of 256 (position, slice row) pairs in parallel."""
    for c in prange((nw + 255) // 256):
        slices(c * 256, min(nw, (c + 1) * 256), out, src, {args}, S, dmap, sl, nrows)


@njit(cache=True, nogil=True, error_model="numpy")
def offsets(nb, off, {args}):
    """off[i]: where position i's slice starts in the operand."""
{setup}
    for i in range(nb):
{body}
        off[i] = so
'''


class _PositionSource(LoopSource):
    """The element-wise members' statements at position ``i``: each input read once per
    position, indexed unsigned (``ui``: a signed index costs a wrap-around test per read,
    which made the parallel loop 3-4x slower, measured on x[i, j]); scalars read once
    before the loop (``setup``: LLVM does not hoist them, the stores to the result might
    alias them)."""

    def __init__(self, group):
        self.setup, self.reads = [], []
        super().__init__(group)

    def _input_expr(self, operand, reader):
        expr = super()._input_expr(operand, reader)
        if not expr.endswith("[0]"):
            return expr
        name = f"v_{expr[:-3]}"
        if f"{name} = {expr}" not in self.setup:
            self.setup.append(f"{name} = {expr}")
        return name

    def same_expr(self, array):
        if f"e_{array} = {array}[ui]" not in self.reads:
            self.reads.append(f"e_{array} = {array}[ui]")
        return f"e_{array}"


def _fused_gather_source(group):
    """The source of ``group``'s loops (``_FUSED_GATHER_SOURCE``), the LoopSource of its
    element-wise members (or None) and its index inputs (instructions, in argument order:
    the element-wise loop's inputs first, then the components read directly)."""
    ew = group.elementwise
    src = _PositionSource(ew) if ew is not None else None
    inputs = list(src.inputs) if src is not None else []
    names = src._names if src is not None else {}
    for x, _, _ in group.components:
        if x not in names and x not in inputs:
            inputs.append(x)
    K = len(group.components)
    body = ["ui = uint64(i)"]
    if any(m > 1 for _, m, _ in group.components):
        body += ["q_ = i // inner", "r_ = i - q_ * inner"]
    if src is not None:
        body += src.reads + src.body
    terms = []
    for k, (x, m, c) in enumerate(group.components):
        if x in names:
            e = names[x]
        else:
            j = inputs.index(x)
            e = f"in{j}[ui]" if m == 1 else f"in{j}[uint64((q_ * {m} + {c}) * inner + r_)]"
        if x.shape.element_type == "u64":   # a huge unsigned index stays huge (clamped below)
            e = f"min({e}, np.uint64({_HUGE_INDEX}))"
        body.append(f"g{k} = min(max(np.int64({e}), 0), top_{k})")
        terms.append(f"g{k} * stride_{k}")
    body.append("so = " + " + ".join(terms))
    if group.root.attrs.get("operand_batching_dims"):
        body += ["for b_ in range(bmap.shape[1]):", "    so += ((i // bmap[1, b_]) % bmap[2, b_]) * bmap[0, b_]"]
    setup = [f"stride_{k} = imap[0, {k}]\ntop_{k} = imap[1, {k}]" for k in range(K)] + \
        (src.setup if src is not None else [])
    args = ", ".join([f"in{j}" for j in range(len(inputs))] + ["odims", "inner", "imap", "bmap"]
                     + (src.params if src is not None else []))

    def indent(lines, n):
        return "\n".join(" " * n + line for text in lines for line in text.split("\n"))
    from .fused import _HEADER
    text = _HEADER + f"\n# fused gather: {group.signature()}; components " + \
        ", ".join(f"{x.shape.element_type}:{m}:{c}" + (":loop" if x in names else "") for x, m, c in group.components) + \
        "\n" + _FUSED_GATHER_SOURCE.format(args=args, setup=indent(setup, 4), body=indent(body, 8),
                                           body12=indent(body, 12))
    return text, src, inputs


_fused_gather_modules = {}


def _prepare_fused_gather(group):
    from ..numba_executor import _static_params
    text, src, inputs = _fused_gather_source(group)
    module = _fused_gather_modules.get(text)
    if module is None:
        module = _fused_gather_modules[text] = load_source("gather_fused", text)
    g = group.root
    a = g.attrs
    operand, indices = g.operands
    plan = _gather_plan(tuple(operand.shape.dims), tuple(indices.shape.dims), tuple(g.shape.dims),
                        tuple(a["offset_dims"]), tuple(a["collapsed_slice_dims"]), tuple(a["start_index_map"]),
                        int(a["index_vector_dim"]), tuple(a["slice_sizes"]),
                        tuple(a.get("operand_batching_dims", ())), tuple(a.get("start_indices_batching_dims", ())))
    if src is not None:
        odims, params = _static_params(src)
    else:
        odims, params = np.zeros(0, np.int64), []
    if plan.positions_minor:
        how = "minor"
    elif plan.nrows == 1 and plan.sl[0, 0] == 1:
        how = "elements"
    else:
        how = "slices"
    wants = [(group.inputs.index(x), carrier_dtype(x.shape.element_type)) for x in inputs]
    return module, plan, how, group.inputs.index(operand), wants, (odims, plan.inner, plan.imap, plan.bmap, *params)


def fused_gather_runner(group, mode):
    """A ``fusion.GatherFusion`` on the CPU, as a function of its input values: one loop
    computes each position's start indices (its element-wise members, the components read
    where they lie) and gathers.  ``mode``: the floating-point environment the element-wise
    code is generated for (``"flush"`` or ``"ieee"``)."""
    module, plan, how, at, wants, static = _prepare_fused_gather(group)
    shape = group.root.shape
    n = shape.numel
    # (x[i, j] of 65536 elements: 0.057 ms on one thread, 0.068 ms on two, load 13)
    parallel = n >= MOVE_PARALLEL_THRESHOLD
    nb, nw, S, dmap, sl, nrows = plan.nb, plan.nb * plan.nrows, plan.S, plan.dmap, plan.sl, plan.nrows
    kernel = {"elements": module.elems_par if parallel else module.elems,
              "slices": module.slices_par if parallel else module.slices}.get(how)
    if how == "minor":   # where each position's slice lands: static, decided once
        do = np.empty(nb, np.int64)
        _destinations(do, dmap)
        ne = product(sl[0])
        runs = nb == 1 or bool(np.all(np.diff(do) == 1))

    def run(values):
        ins = []
        for j, w in wants:
            v = values[j]
            ins.append(v.reshape(-1) if type(v) is np.ndarray and v.dtype == w and v.flags.c_contiguous
                       else np.ascontiguousarray(np.asarray(v), dtype=w).reshape(-1))
        out = new_words(shape, n)
        src = words(values[at])
        if how == "elements":
            if parallel:
                kernel(nb, out, src, *ins, *static)
            else:
                kernel(0, nb, out, src, *ins, *static)
        elif how == "slices":
            if parallel:
                kernel(nw, out, src, *ins, *static, S, dmap, sl, nrows)
            else:
                kernel(0, nw, out, src, *ins, *static, S, dmap, sl, nrows)
        else:
            so = np.empty(nb, np.int64)
            module.offsets(nb, so, *ins, *static)
            in_threads(by_element, ne, parallel and ne > 1, out, src, so, do, sl, runs, _ROW_BUFFER_FROM)
        return as_result(out, shape)
    return run


# =========================================================================================
# Scatter
# =========================================================================================

class ScatterPlan:
    __slots__ = ("nsc", "K", "inner", "imap", "bmap", "W", "umap", "wl", "span")


@functools.lru_cache(maxsize=1024)
def _scatter_plan(odims, idims, udims, update_window_dims, inserted_window_dims, scatter_dims_to_operand_dims,
                  index_vector_dim, input_batching_dims, scatter_indices_batching_dims):
    plan = ScatterPlan()
    rank = len(odims)
    ostr, ustr = row_major_strides(odims), row_major_strides(udims)
    update_scatter_dims = [d for d in range(len(udims)) if d not in update_window_dims]
    scatter_sizes = [udims[d] for d in update_scatter_dims]
    plan.nsc = product(scatter_sizes)
    plan.K = len(scatter_dims_to_operand_dims)
    plan.inner = _index_layout(idims, index_vector_dim)
    window_operand_dims = _offset_operand_dims(rank, inserted_window_dims, input_batching_dims)
    window_size = [1] * rank
    for d, d_input in zip(update_window_dims, window_operand_dims):
        window_size[d_input] = udims[d]
    # a start k is valid in [0, dim - window size]: the window fits whole
    plan.imap = _table([[ostr[d] for d in scatter_dims_to_operand_dims],
                        [odims[d] - window_size[d] for d in scatter_dims_to_operand_dims]], plan.K)
    plan.bmap = _batching_table(zip(input_batching_dims, scatter_indices_batching_dims), ostr, scatter_sizes,
                                index_vector_dim)
    if tuple(update_window_dims) == tuple(range(len(update_scatter_dims), len(udims))):
        plan.W, plan.umap = product(udims[d] for d in update_window_dims), _table([[], [], []], 0)
    else:
        plan.W = -1
        plan.umap = _table([[ustr[d] for d in update_scatter_dims],
                            [product(scatter_sizes[j + 1:]) for j in range(len(scatter_sizes))], scatter_sizes],
                           len(scatter_sizes))
    dims, (dstr, sstr) = merge_dims([udims[d] for d in update_window_dims],
                                    [ostr[d] for d in window_operand_dims], [ustr[d] for d in update_window_dims])
    plan.wl = _table([dims, dstr, sstr], len(dims))
    plan.span = sum((n - 1) * s for n, s in zip(dims, dstr))
    return plan


# The generated scatter: {outs}/{upds} are the N result and update arrays, {combine} the
# combiner's statements on the scalars a0.., b0.. (current values, update values).
_SCATTER_SOURCE = '''
@njit(cache=True, nogil=True)
def apply(lo, hi, code, {outs}, idx, {upds}, K, inner, imap, bmap, W, umap, wl, span, nsc):
    """Apply, in order, every update whose result position lies in [lo, hi)."""
    r = wl.shape[1]
    nrows = 1
    for d in range(r - 1):
        nrows *= wl[0, d]
    L = wl[0, r - 1]
    ds = wl[1, r - 1]
    us = wl[2, r - 1]
    single = nrows == 1 and L == 1  # windows of one element
    if single and bmap.shape[1] == 0 and W >= 0 and (K == 1 or (K > 1 and inner == 1)):
        # single elements, the index vectors' components consecutive (x.at[i].add(u),
        # x.at[i, j].add(u)): the loads, the tests and the combining alone, no branch on the
        # layout per update (3-4x faster for a vector's million updates)
        s0 = imap[0, 0]
        top = imap[1, 0]
        if K == 1:
{single_k1}
            return
{single_k}
        return
    for p in range(nsc):
        base = 0
        if K == 1:
            # one start index per position: position p's is idx[p]
            v = np.int64(idx[np.uint64(p)])
            if v < 0 or v > imap[1, 0]:  # the window does not fit whole: skipped
                continue
            base = v * imap[0, 0]
        else:
            q = p // inner
            rr = p - q * inner
            fits = True
            for k in range(K):
                v = np.int64(idx[np.uint64((q * K + k) * inner + rr)])
                if v < 0 or v > imap[1, k]:
                    fits = False
                    break
                base += v * imap[0, k]
            if not fits:
                continue
        for i in range(bmap.shape[1]):
            base += ((p // bmap[1, i]) % bmap[2, i]) * bmap[0, i]
        if base >= hi or base + span < lo:
            continue
        if W >= 0:
            ub = p * W
        else:
            ub = 0
            for j in range(umap.shape[1]):
                ub += ((p // umap[1, j]) % umap[2, j]) * umap[0, j]
        if single:
            t = np.uint64(base)
            u = np.uint64(ub)
{combine_single}
            continue
        for row in range(nrows):
            to = base
            uo = ub
            rem = row
            for d in range(r - 2, -1, -1):
                c = rem % wl[0, d]
                rem //= wl[0, d]
                to += c * wl[1, d]
                uo += c * wl[2, d]
            if to >= hi or to + (L - 1) * ds < lo:
                continue
            if to >= lo and to + (L - 1) * ds < hi:
                # the whole row is this thread's: no test per element (the loop vectorises)
{combine_row}
                continue
            for j in range(L):
                tj = to + j * ds
                if tj >= lo and tj < hi:
                    t = np.uint64(tj)
                    u = np.uint64(uo + j * us)
{combine}


@njit(parallel=True, cache=True, nogil=True)
def scatter_par(nthreads, total, code, {outs}, idx, {upds}, K, inner, imap, bmap, W, umap, wl, span, nsc):
    """Thread t owns the result positions [t * chunk, (t + 1) * chunk)."""
    chunk = (total + nthreads - 1) // nthreads
    for t in prange(nthreads):
{daz_on}        apply(t * chunk, min(total, (t + 1) * chunk), code, {outs}, idx, {upds}, K, inner, imap, bmap, W, umap, wl,
              span, nsc)
{daz_off}

@njit(cache=True, nogil=True)
def scatter_ser(nthreads, total, code, {outs}, idx, {upds}, K, inner, imap, bmap, W, umap, wl, span, nsc):
{daz_on_ser}    apply(0, total, code, {outs}, idx, {upds}, K, inner, imap, bmap, W, umap, wl, span, nsc)
{daz_off_ser}'''

#: the standard combiners, by the carrier's kind: "b" pred, "i" integers, "f" floats, "c" complex
_COMBINERS = {
    "add": {"b": "{a} or {b}", "i": "{a} + {b}", "f": "{a} + {b}", "c": "{a} + {b}"},
    "multiply": {"b": "{a} and {b}", "i": "{a} * {b}", "f": "{a} * {b}", "c": "{a} * {b}"},
    "maximum": {"b": "{a} or {b}", "i": "max({a}, {b})", "f": "fmax({a}, {b})"},
    "minimum": {"b": "{a} and {b}", "i": "min({a}, {b})", "f": "fmin({a}, {b})"},
    "and": {"b": "{a} and {b}", "i": "{a} & {b}"},
    "or": {"b": "{a} or {b}", "i": "{a} | {b}"},
    "xor": {"b": "{a} != {b}", "i": "{a} ^ {b}"},
}


def _kind(t):
    k = carrier_dtype(t).kind
    return {"u": "i"}.get(k, k)


def _literal(inst):
    """A scalar constant as Python source."""
    v = np.asarray(inst.attrs.get("literal"))
    if v.shape != ():
        return None
    v = v[()]
    if isinstance(v, (bool, np.bool_)):
        return "True" if v else "False"
    if isinstance(v, (np.integer, int)):
        return str(int(v))

    def real(x):
        x = float(x)
        if math.isnan(x):
            return "math.nan"
        if math.isinf(x):
            return "math.inf" if x > 0 else "-math.inf"
        return repr(x)
    if isinstance(v, (np.complexfloating, complex)):
        return f"complex({real(v.real)}, {real(v.imag)})"
    return real(v)


def _region_statements(comp, arg_names):
    """Statements computing the region ``comp`` on scalars named ``arg_names`` (its
    parameters in order), with the fused loops' emitters; and the names of its N results.
    None when some instruction cannot be emitted."""
    from .reduction import MAX_REGION_INSTRUCTIONS
    marked = getattr(comp, "_cpu_scalar", None)
    if (marked is not None and not marked[0]) or len(comp.instructions) > MAX_REGION_INSTRUCTIONS:
        return None   # over the module's compile budget, or too big to compile in bounded time
    names = dict(zip(comp.parameters, arg_names))
    lines = []
    root = comp.root
    for k, inst in enumerate(comp.instructions):
        if inst.opcode == "parameter":
            continue
        if inst.opcode == "tuple" and inst is root:
            continue
        if not inst.shape.is_array or inst.shape.rank != 0 or not supported_type(inst.shape.element_type):
            return None
        if inst.opcode == "constant":
            expr = _literal(inst)
            if expr is None:
                return None
        elif can_emit(inst) and all(o in names for o in inst.operands):
            expr = emit(inst, *[names[o] for o in inst.operands])
        else:
            return None
        names[inst] = f"v{k}"
        lines.append(f"v{k} = {finish(expr, inst.shape.element_type)}")
    results = root.operands if root.opcode == "tuple" else [root]
    if any(r not in names for r in results):
        return None
    return lines, [names[r] for r in results]


#: the run-time code of each standard combiner (the ``code`` argument of a standard kernel)
_CODES = ("add", "multiply", "maximum", "minimum", "and", "or", "xor")
#: the code of f32 / f64 addition under flushing run in the processor's denormals-are-zero
#: mode (x86), its flushes left out: ``_daz_add`` below
_DAZ_ADD = len(_CODES)
#: (a switch for A/B measurements and tests) scatter-adds of f32 / f64 under flushing run
#: with ``_DAZ_ADD``
DAZ_ADD = True


# An f32 / f64 scatter-add under flushing computes, per update, ftz(ftz(a) + ftz(b)): three
# tests an update (the operands' and the sum's magnitudes against the smallest normal), which
# made a million random adds into f32[1000] 0.46 -> 0.86 ms, into f32[1M] 1.2 -> 2.7 ms.  With
# MXCSR's denormals-are-zero bit set (FTZ left off, as the fused loops run), the processor's
# add reads a denormal operand as the zero of its sign that ftz makes: a plain a + b gives
# ftz(a) + ftz(b), and a sum that is denormal, stored unflushed, is read as ftz of it by the
# next add at its element.  So only the stored results can differ from the flushed ones: a
# scan of the result after the kernel finds whether any is denormal, and where one is (a sum
# that fell below the normal range, or an operand's own denormal) the scatter runs again with
# the flushing code.  (Machines without MXCSR keep the flushing code.)


def _daz_add(t):
    """Whether a scatter-add of type ``t`` runs with ``_DAZ_ADD`` (see above)."""
    return DAZ_ADD and _X86 and t in ("f32", "f64") and fpenv.flushing(t)


def _flushed_rerun(out):
    """Whether the result ``out`` of a ``_DAZ_ADD`` kernel holds a denormal (then the
    scatter runs again with the flushing code: see above)."""
    from .elementwise import _any_denormal, _word_masks
    word, exponent, mantissa, _ = _word_masks(out.dtype)
    return _any_denormal(out.reshape(-1).view(word), exponent, mantissa)


def _class(t):
    return "b" if t == "pred" else _kind(t)


def _how(region, types):
    """Which kind of scatter kernel combines with ``region``: "second" (overwrite),
    "standard" (a standard combiner the element type has) or "region"."""
    comb = region.combiner
    if comb == "second":
        return "second"
    if comb in _COMBINERS and len(types) == 1 and _class(types[0]) in _COMBINERS[comb]:
        return "standard"
    return "region"


def _combine_expr(name, t, a, b):
    """The standard combiner ``name`` on type ``t`` of expressions ``a`` and ``b`` (None if the
    type has none): XLA's complex multiply (``cmul``); in the ``"flush"`` environment operands
    and result flushed to zero, as the region's own op would flush them (``emit.emit``)."""
    template = _COMBINERS[name].get(_class(t))
    if template is None:
        return None
    flush = fpenv.flushing(t)
    if name == "multiply" and _class(t) == "c":
        return f"cmul(np.complex128({a}), np.complex128({b}), {t == 'c64'}, {flush})"
    if not flush:
        return template.format(a=a, b=b)
    ftz = _FTZ[t]
    return f"{ftz}({template.format(a=f'{ftz}({a})', b=f'{ftz}({b})')})"


def _combine_lines(how, region, types):
    """The combiner as statements on a0.. (current values) and b0.. (update values) that
    store into out0.. at ``t``; None when the region cannot be compiled.  One source (one
    compiled kernel) serves

    - the overwrite (``second``) for every element type of a width: bits are moved;
    - the standard combiners of one element type: they are selected at run time by
      ``code`` (an if-chain the loop branches on, the same way every time);
    - one other region and its element types, compiled from the region's instructions."""
    n = len(types)
    if how == "second":
        return [f"out{j}[t] = upd{j}[u]" for j in range(n)]
    if how == "standard":
        t = types[0]
        lines = ["a0 = out0[t]", "b0 = upd0[u]"]
        for code, name in enumerate(_CODES):
            expr = _combine_expr(name, t, "a0", "b0")
            if expr is not None:
                lines += [f"{'if' if len(lines) == 2 else 'elif'} code == {code}:",
                          f"    out0[t] = {finish(expr, t)}"]
        if _daz_add(t):
            lines += [f"elif code == {_DAZ_ADD}:", f"    out0[t] = {finish('a0 + b0', t)}"]
        return lines
    comp = region.computation
    params = comp.parameters
    if len(params) != 2 * n:
        return None
    loads = []
    for j in range(n):
        for side, arr, p in (("a", "out", params[j]), ("b", "upd", params[n + j])):
            if not p.shape.is_array or p.shape.rank != 0 or not supported_type(p.shape.element_type):
                return None
            loads.append(f"{side}{j} = {carrier(p.shape.element_type)}({arr}{j}[{'t' if side == 'a' else 'u'}])")
    body = _region_statements(comp, [f"a{j}" for j in range(n)] + [f"b{j}" for j in range(n)])
    if body is None:
        return None
    lines, results = body
    if len(results) != n:
        return None
    stores = [f"out{j}[t] = {finish(r, t)}" for j, (r, t) in enumerate(zip(results, types))]
    return loads + lines + stores


#: the loop over single-element updates (``_single_loops``) up to the combining: with one
#: index component (x.at[i].add(u)), and with K consecutive ones (x.at[i, j].add(u))
_SINGLE_K1_HEAD = [
    "for p in range(nsc):",
    "    v = np.int64(idx[np.uint64(p)])",
    "    if v < 0 or v > top:  # the window does not fit whole: skipped",
    "        continue",
    "    base = v * s0",
    "    if base < lo or base >= hi:",
    "        continue",
    "    t = np.uint64(base)",
    "    u = np.uint64(p * W)",
]
_SINGLE_K_HEAD = [
    "for p in range(nsc):",
    "    v = np.int64(idx[np.uint64(p * K)])",
    "    if v < 0 or v > top:",
    "        continue",
    "    base = v * s0",
    "    for k in range(1, K):",
    "        v = np.int64(idx[np.uint64(p * K + k)])",
    "        if v < 0 or v > imap[1, k]:",
    "            base = -1",
    "            break",
    "        base += v * imap[0, k]",
    "    if base < lo or base >= hi:",
    "        continue",
    "    t = np.uint64(base)",
    "    u = np.uint64(p * W)",
]


#: the tight loop of ``_single_k1_loops``: no range test (every update's element is the
#: call's), a negative index wraps above ``utop`` (one test skips both sides), W = 1
_SINGLE_K1_TIGHT_HEAD = [
    "for p in range(nsc):",
    "    v = np.uint64(np.int64(idx[np.uint64(p)]))",
    "    if v > utop:  # the window does not fit whole: skipped",
    "        continue",
    "    t = v * us0",
    "    u = np.uint64(p)",
]


def _single_k1_loops(how, region, types, lines):
    """The loops over single-element updates with one start index: where the call owns
    every element an update can land on (the serial kernel: ``whole``) a tight loop
    (``_SINGLE_K1_TIGHT_HEAD``: no range test, one unsigned test of the index), else the
    loops with a range test per update.  The combining is the same (flushing: the test of
    the operands and the result per update stays a branch; a select, or a test of the
    result alone after a check of the input and the updates up front, made the chain of
    one element's sum longer: 3.3 -> 9.6 ms for a million sorted f32 adds into f32[1000],
    and no faster on random ones).  A million random f32 adds into f32[1000], one thread,
    min of 60, load 7.4: 0.85 ms -> 0.56 ms."""
    out = ["whole = W == 1 and top >= 0 and lo <= 0 and top * s0 < hi",
           "utop = np.uint64(top)",
           "us0 = np.uint64(s0)"]
    tight = _single_loops(how, region, types, lines, _SINGLE_K1_TIGHT_HEAD)
    old = _single_loops(how, region, types, lines, _SINGLE_K1_HEAD)
    return out + ["if whole:"] + ["    " + line for line in tight] + ["else:"] + ["    " + line for line in old]


def _single_loops(how, region, types, lines, head):
    """The loop ``head`` over single-element updates with the combiner: for the standard
    combiners one loop per ``code`` (chosen once, not per update: a million f32 adds into
    f32[1M], one thread, min of 20, load 4.8: 5.9 ms with the choice in the loop, 3.4 ms
    without), else one loop around ``lines``."""
    if how != "standard":
        return head + ["    " + line for line in lines]
    t = types[0]
    # flushing a real type: the plain combination where neither operand nor the result is
    # below the smallest normal (then flushing changes none of them: the same bits), the
    # flushed one otherwise.  A NaN makes the minimum NaN or leaves it at most the other
    # values: the flushed combination again wherever one of them is below the normal range
    # (the same million f32 adds, CPU time of 40, load 3: 3.5-3.9 -> 2.7-2.8 ms)
    fast = fpenv.flushing(t) and _class(t) == "f" and t in fpenv.TINY
    out = []
    for code, name in enumerate(_CODES):
        expr = _combine_expr(name, t, "a0", "b0")
        if expr is None:
            continue
        out.append(f"{'if' if not out else 'elif'} code == {code}:")
        out += ["    " + line for line in head]
        out += ["        a0 = out0[t]", "        b0 = upd0[u]"]
        if fast:
            plain = _COMBINERS[name]["f"].format(a="a0", b="b0")
            out += [f"        c0 = {plain}",   # (s0 is the start index's stride)
                    f"        if min(abs(a0), abs(b0), abs(c0)) >= {fpenv.TINY[t]!r}:",
                    f"            out0[t] = {finish('c0', t)}",
                    "        else:",
                    f"            out0[t] = {finish(expr, t)}"]
        else:
            out.append(f"        out0[t] = {finish(expr, t)}")
    if _daz_add(t):
        out.append(f"elif code == {_DAZ_ADD}:")
        out += ["    " + line for line in head]
        out.append(f"        out0[t] = {finish('out0[t] + upd0[u]', t)}")
    return out


def _row_lines(how, region, types, lines):
    """The combiner applied to a whole row of L elements (``to``/``uo`` its first result
    and update positions, ``ds``/``us`` their steps): for the standard combiners one loop
    per ``code`` (the choice is made once per row, not per element), else a loop around
    ``lines``."""
    step = ["t = np.uint64(to + j * ds)", "u = np.uint64(uo + j * us)"]
    if how != "standard":
        return ["for j in range(L):"] + ["    " + line for line in step + lines]
    t = types[0]
    out = []
    for code, name in enumerate(_CODES):
        expr = _combine_expr(name, t, "out0[t]", "upd0[u]")
        if expr is not None:
            out += [f"{'if' if not out else 'elif'} code == {code}:", "    for j in range(L):"]
            out += ["        " + line for line in step]
            out.append(f"        out0[t] = {finish(expr, t)}")
    if _daz_add(t):
        out += [f"elif code == {_DAZ_ADD}:", "    for j in range(L):"]
        out += ["        " + line for line in step]
        out.append(f"        out0[t] = {finish('out0[t] + upd0[u]', t)}")
    return out


#: compiled scatter kernels of the overwrite and the standard combiners; those of other
#: regions are kept on their computation (``_cpu_scatter``)
_generated = {}


def _slot(how, region, types):
    """Where the kernel of this combiner and these types is kept: (cache, key)."""
    if how == "region":   # (its source depends on the floating-point environment)
        return region.computation.__dict__.setdefault("_cpu_scatter", {}), (types, fpenv.flushing())
    if how == "standard" and fpenv.flushing(types[0]):
        return _generated, (how, types[0], "flush", _daz_add(types[0]))
    return _generated, (how, types[0] if how == "standard" else len(types))


def _scatter_kernels(region, types):
    """(par, ser, as_bits, code) for this combiner and these element types, or None."""
    how = _how(region, types)
    code = _CODES.index(region.combiner) if how == "standard" else -1
    cache, key = _slot(how, region, types)
    if key not in cache:
        lines = _combine_lines(how, region, types)
        if lines is None:
            cache[key] = None
        else:
            from .fused import _DAZ_HEADER, _HEADER
            n = len(types)
            what = {"second": "overwrite (bits)", "standard": f"standard combiners on {types[0]}"}.get(
                how, f"a region on {', '.join(types)}")  # no name: equal regions share the source
            daz = how == "standard" and _daz_add(types[0])
            source = _HEADER + (_DAZ_HEADER if daz else "") + f"\n# scatter: {what}\n" + \
                _SCATTER_SOURCE.format(outs=", ".join(f"out{j}" for j in range(n)),
                                       daz_on=(" " * 8 + f"mx_ = _mxcsr_or({_DAZ} if code == {_DAZ_ADD} else 0)\n"
                                               if daz else ""),
                                       daz_off=(" " * 8 + "_mxcsr_load(mx_)\n" if daz else ""),
                                       daz_on_ser=(" " * 4 + f"mx_ = _mxcsr_or({_DAZ} if code == {_DAZ_ADD} else 0)\n"
                                                   if daz else ""),
                                       daz_off_ser=(" " * 4 + "_mxcsr_load(mx_)\n" if daz else ""),
                                       upds=", ".join(f"upd{j}" for j in range(n)),
                                       combine="\n".join(" " * 20 + line for line in lines),
                                       combine_row="\n".join(" " * 16 + line
                                                              for line in _row_lines(how, region, types, lines)),
                                       combine_single="\n".join(" " * 12 + line for line in lines),
                                       single_k1="\n".join(" " * 12 + line for line in _single_k1_loops(
                                           how, region, types, lines)),
                                       single_k="\n".join(" " * 8 + line for line in _single_loops(
                                           how, region, types, lines, _SINGLE_K_HEAD)))
            module = load_source("scatter", source)
            cache[key] = (module.scatter_par, module.scatter_ser, how == "second")
    if cache[key] is None:
        return None
    return (*cache[key], code)


def _scatter_streams(plan, total, nupdates, itemsize):
    """Whether a scatter of whole rows (windows whose rows are runs of at least
    ``_STREAMED_ROW_BYTES`` on both sides) streams like a copy in the cache: the input's copy,
    then each update row read and combined into its result row (``shape.streamed``; then
    the calling thread does it alone: 4096 rows of 128 f32 added into f32[8192, 128], load
    2.7, through the run: 0.494 ms (median) in one thread, 0.630 in two)."""
    L, ds, us = plan.wl[0, -1], plan.wl[1, -1], plan.wl[2, -1]
    return (ds == 1 and us == 1 and L * itemsize >= _STREAMED_ROW_BYTES
            and streamed((2 * total + 3 * nupdates) * itemsize))


def _carried_copy(x, dtype):
    """``x`` flat, as ``dtype`` (bf16 -> f32 for arithmetic), in a new buffer."""
    if x.dtype == dtype:
        return copy_words(x).view(dtype)
    out = POOL.take(x.size * dtype.itemsize).view(dtype)
    np.copyto(out, np.asarray(x).reshape(-1), casting="unsafe")
    return out


def _scatter_fallback(values, shape, update_computation, attrs):
    """Run the NumPy reference with the region as a reference Region (it can then be
    applied to whole arrays of updates at once when it is element-wise)."""
    from ..reference import Region, guard_reference
    guard_reference("scatter", values, shape, attrs)
    region = Region(update_computation.computation, update_computation.ctx)
    return _scatter_reference(*values, shape=shape, update_computation=region, **attrs)


@kernel("scatter", note="numba (regions that are not element-wise: reference)")
def scatter(*values, shape, update_computation, update_window_dims, inserted_window_dims,
            scatter_dims_to_operand_dims, index_vector_dim, input_batching_dims=(), scatter_indices_batching_dims=(),
            indices_are_sorted=False, unique_indices=False):
    inputs, scatter_indices, updates = _split_scatter_operands(values)
    n = len(inputs)
    types = tuple(dtypes.from_numpy(x.dtype) for x in inputs)
    shapes = shape.tuple_shapes if n > 1 else (shape,)
    attrs = dict(update_window_dims=update_window_dims, inserted_window_dims=inserted_window_dims,
                 scatter_dims_to_operand_dims=scatter_dims_to_operand_dims, index_vector_dim=index_vector_dim,
                 input_batching_dims=input_batching_dims, scatter_indices_batching_dims=scatter_indices_batching_dims)
    kernels = None if update_computation.combiner == "first" else _scatter_kernels(update_computation, types)
    if kernels is None and update_computation.combiner != "first":
        return _scatter_fallback(values, shape, update_computation, attrs)
    total = inputs[0].size
    nupdates = updates[0].size
    if kernels is None or total == 0 or nupdates == 0:  # nothing changes
        out = tuple(np.array(x, copy=True, order="C") for x in inputs)
        return out if n > 1 else out[0]
    par, ser, as_bits, code = kernels
    if as_bits:
        outs = [copy_words(x) for x in inputs]
        upds = [words(u) for u in updates]
    else:
        outs = [_carried_copy(x, carrier_dtype(t)) for x, t in zip(inputs, types)]
        upds = [np.ascontiguousarray(u, dtype=carrier_dtype(t)).reshape(-1) for u, t in zip(updates, types)]
    plan = _scatter_plan(tuple(inputs[0].shape), tuple(np.shape(scatter_indices)), tuple(updates[0].shape),
                         tuple(update_window_dims), tuple(inserted_window_dims), tuple(scatter_dims_to_operand_dims),
                         int(index_vector_dim), tuple(input_batching_dims), tuple(scatter_indices_batching_dims))
    nthreads = threads()
    # every thread reads every scatter index: that pays when the windows are large enough
    # for the combining to outweigh the reading, and, an add an element, from as many
    # updates as a copy (x.at[i].add(u), 2 threads, load 3, interleaved: 32768 updates
    # 0.062 ms serial vs 0.109 parallel, 131072 updates 0.16 vs 0.23)
    parallel = (nthreads > 1 and nupdates >= MOVE_PARALLEL_THRESHOLD and total >= 2 * nthreads
                and nupdates >= 16 * plan.nsc and not _scatter_streams(plan, total, nupdates, outs[0].itemsize))
    daz = code == 0 and not as_bits and n == 1 and _daz_add(types[0])   # (see ``_DAZ_ADD``)
    try:
        run = par if parallel else ser
        rest = (plan.K, plan.inner, plan.imap, plan.bmap, plan.W, plan.umap, plan.wl, plan.span, plan.nsc)
        idx = _indices(scatter_indices)
        run(nthreads, total, _DAZ_ADD if daz else code, *outs, idx, *upds, *rest)
        if daz and _flushed_rerun(outs[0]):
            outs = [_carried_copy(x, carrier_dtype(t)) for x, t in zip(inputs, types)]
            run(nthreads, total, code, *outs, idx, *upds, *rest)
    except NumbaError:
        # the generated code does not compile (an emitter that does not cover these
        # types): remember that, and use the reference
        cache, key = _slot(_how(update_computation, types), update_computation, types)
        cache[key] = None
        return _scatter_fallback(values, shape, update_computation, attrs)
    results = []
    for o, s in zip(outs, shapes):
        if as_bits:
            results.append(as_result(o, s))
        else:
            results.append((o if o.dtype == s.dtype else o.astype(s.dtype)).reshape(s.dims))
    return tuple(results) if n > 1 else results[0]



def _scatter_prepare(operand_shapes, *, shape, update_computation, update_window_dims, inserted_window_dims,
                     scatter_dims_to_operand_dims, index_vector_dim, input_batching_dims=(),
                     scatter_indices_batching_dims=(), indices_are_sorted=False, unique_indices=False):
    """``scatter`` prepared for a run plan (``shape.py``'s prepared kernels): one input whose
    type is its own carrier (or an overwrite, which moves bits), its compiled kernel, plan
    and combiner code decided once; a run checks its operands, copies the input into the
    result's buffer and calls the kernel (x.at[i].add(u) of f32[512, 128], 256 rows: the
    kernel's own set-up was about 20 us of 45).  None where the kernel would do something
    else (several inputs, nothing to scatter, a region run by the reference)."""
    if len(operand_shapes) != 3 or not shape.is_array or not shape.is_static:
        return None
    xs, ishape, us = operand_shapes
    t = xs.element_type
    if (update_computation.combiner == "first" or xs.numel == 0 or us.numel == 0 or ishape.element_type not in
            ("s32", "s64") or us.element_type != t or xs.dims != shape.dims or xs.element_type != shape.element_type):
        return None
    kernels = _scatter_kernels(update_computation, (t,))
    if kernels is None:
        return None
    par, ser, as_bits, code = kernels
    dtype = np.dtype(shape.dtype)
    work = word_dtype(dtype) if as_bits else carrier_dtype(t)
    if work.itemsize != dtype.itemsize or (not as_bits and work != dtype):
        return None   # (a bf16 / f16 sum: computed in f32, converted by the kernel)
    idims, udims, dims = tuple(ishape.dims), tuple(us.dims), tuple(shape.dims)
    plan = _scatter_plan(tuple(xs.dims), idims, udims, tuple(update_window_dims), tuple(inserted_window_dims),
                         tuple(scatter_dims_to_operand_dims), int(index_vector_dim), tuple(input_batching_dims),
                         tuple(scatter_indices_batching_dims))
    total, nupdates = xs.numel, us.numel
    # the kernel's choice of its parallel loop, but for the run's thread count
    wide = (nupdates >= MOVE_PARALLEL_THRESHOLD and nupdates >= 16 * plan.nsc
            and not _scatter_streams(plan, total, nupdates, dtype.itemsize))
    args = (plan.K, plan.inner, plan.imap, plan.bmap, plan.W, plan.umap, plan.wl, plan.span, plan.nsc)
    read_x, read_u = word_reader(xs), word_reader(us)
    nbytes, big = total * dtype.itemsize, total >= MOVE_PARALLEL_THRESHOLD
    daz = code == 0 and not as_bits and _daz_add(t)
    fast_code = _DAZ_ADD if daz else code
    itypes = _INDEX_TYPES
    take = POOL.take
    attrs = dict(shape=shape, update_computation=update_computation, update_window_dims=update_window_dims,
                 inserted_window_dims=inserted_window_dims, scatter_dims_to_operand_dims=scatter_dims_to_operand_dims,
                 index_vector_dim=index_vector_dim, input_batching_dims=input_batching_dims,
                 scatter_indices_batching_dims=scatter_indices_batching_dims, indices_are_sorted=indices_are_sorted,
                 unique_indices=unique_indices)

    def run(operand, indices, updates):
        x, u = read_x(operand), read_u(updates)
        if (x is None or u is None or type(indices) is not np.ndarray or indices.dtype not in itypes
                or indices.shape != idims or not indices.flags.c_contiguous):
            return scatter(operand, indices, updates, **attrs)
        out = take(nbytes).view(x.dtype)
        if big:
            strided_copy(out, 0, (1,), x, 0, (1,), (total,))
        else:
            _copy_flat(out, x)
        if not as_bits:
            out, u = out.view(work), u.view(work)
        nthreads = threads()
        kernel = par if wide and nthreads > 1 and total >= 2 * nthreads else ser
        idx = indices.reshape(-1)
        kernel(nthreads, total, fast_code, out, idx, u, *args)
        if daz and _flushed_rerun(out):   # (see ``_DAZ_ADD``)
            again = out.view(x.dtype)
            if big:
                strided_copy(again, 0, (1,), x, 0, (1,), (total,))
            else:
                _copy_flat(again, x)
            kernel(nthreads, total, code, out, idx, u, *args)
        return ndarray(dims, dtype, out)
    return run


scatter.prepare = _scatter_prepare
scatter.prepare_regions = True
