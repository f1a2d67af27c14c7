"""CPU kernels of the shape family: transpose, reverse, concatenate, reshape, bitcast,
copy, dynamic-reshape; and the strided-copy machinery the slicing and indexing kernels
share.

Data movement never computes on values, so a kernel moves *bits*: every array is viewed
as unsigned integers of its element's width (``uint8`` for pred and s8, ``uint16`` for
bf16/f16, ``uint32`` for f32/s32, ``uint64`` for f64/c64; c128 stays ``complex128``), and
one compiled kernel serves every element type of a width.

Most data-movement ops are one loop nest::

    for every index (i0, ..., iN) of ``dims``:
        dst[dst_base + sum(i_d * dst_strides[d])] = src[src_base + sum(i_d * src_strides[d])]

with the ``dims`` and strides (in elements, negative for a reversal) computed per op in
Python and passed as run-time int64 arrays: a transpose permutes the source strides, a
reverse negates them, a slice multiplies them.  ``plan_copy`` first merges dimensions
that are contiguous on both sides and drops size-1 dimensions, so a plain copy is one
run, and a transposed copy is walked in tiles (``_tile_row``) so that both the reads and
the writes stay within a few cache lines per tile, a plain one transposed in registers
(``_block_transpose``: vector loads, shuffles, vector stores), for f32 (and for narrower
words whose rows share cache sets) into a small buffer whose rows are copied out as runs
(``_staging``: rows a power of two of lines apart otherwise map a block onto one set).

``broadcast`` and ``iota`` have no kernel here: the fusion plan makes every one of them a
fused loop (a lone one is a one-member loop group), so the executor never asks for one.
"""
import functools
import itertools
import os
import platform
import sys
import threading

import numpy as np
from llvmlite import ir
from numba import njit, types, uint64
from numba.core import cgutils
from numba.extending import intrinsic

from ..numba_setup import MOVE_PARALLEL_THRESHOLD, get_threads, numba
from . import kernel

numba()  # configure numba (threading layer) before the first compile

_opts = dict(cache=True, nogil=True)

#: element width in bytes -> the unsigned type whose bits a data-movement kernel moves
_WORDS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64, 16: np.complex128}


# -- carriers ----------------------------------------------------------------------------

def word_dtype(dtype):
    return np.dtype(_WORDS[np.dtype(dtype).itemsize])


def words(array):
    """``array``'s elements as a flat C-contiguous array of unsigned words (a view when it can)."""
    a = contiguous(array)
    return a.reshape(-1).view(word_dtype(a.dtype))


def contiguous(array):
    """``np.asarray(array, order="C")``, but a large strided view (a transposed result, a
    moved axis) is copied by the tiled strided copy below: NumPy's copy of a transposed
    array runs 3-4x slower (no tiling, one thread)."""
    a = np.asarray(array)
    if a.flags.c_contiguous or a.size < 4096 or a.dtype.itemsize not in _WORDS or a.dtype.hasobject:
        return np.asarray(a, order="C")   # (keeps a 0-d array 0-d, as ascontiguousarray does not)
    item = a.itemsize
    if any(st % item for st in a.strides):
        return np.asarray(a, order="C")
    # a flat view of the memory the array spans, from its lowest address, and where the
    # array's first element sits in it
    lowest = tuple(n - 1 if st < 0 else 0 for n, st in zip(a.shape, a.strides))
    start = a[tuple(slice(i, i + 1) for i in lowest)]
    span = 1 + sum((n - 1) * abs(st) for n, st in zip(a.shape, a.strides)) // item
    flat = np.lib.stride_tricks.as_strided(start, shape=(span,), strides=(item,), writeable=False)
    base = sum(i * abs(st) for i, st in zip(lowest, a.strides)) // item
    word = word_dtype(a.dtype)
    out = POOL.take(a.size * item).view(word)
    strided_copy(out, 0, row_major_strides(a.shape), flat.view(word), base, tuple(st // item for st in a.strides),
                 a.shape)
    return out.view(a.dtype).reshape(a.shape)


class BufferPool:
    """Large result buffers, reused once nothing refers to them any more.

    Writing into freshly allocated memory costs a page fault per page (up to 3.5x the
    time of writing into memory already mapped, measured on this project's machines):
    a computation run again and again (a benchmark, a training loop) would pay it for
    every large result.  The pool keeps the last large buffers it handed out; a buffer is
    free again when the pool's reference is the only one left (every array made from it
    is a view that refers to it), and then it serves the next request of the same size.
    At most ``limit`` bytes are kept; ``limit = 0`` turns the pool off.
    """

    #: buffers smaller than this come from NumPy's allocator.  Not larger: glibc serves
    #: blocks of 128 KiB-32 MiB from its heap and gives freed pages back to the system
    #: (trim), so an MLP step's 0.5-1.6 MiB intermediates page-faulted afresh every run
    #: (a 784x512 f32 update took 1.0 ms instead of 0.2; the whole step 18.9 -> 14.7 ms
    #: of CPU with 256 KiB instead of 4 MiB here)
    MIN_BYTES = 1 << 18

    def __init__(self, limit=256 << 20):
        self.limit = limit
        self._buffers = []  # least recently handed out first
        self._lock = threading.Lock()

    def take(self, nbytes):
        """A uint8 buffer of ``nbytes`` bytes (contents undefined), aligned (``aligned_buffer``)."""
        if nbytes < self.MIN_BYTES or nbytes > self.limit:
            return np.empty(nbytes, np.uint8)
        with self._lock:
            bufs = self._buffers
            for k in range(len(bufs)):
                # free: the aligned buffer referred to by the pool's entry and
                # getrefcount's argument alone, its whole allocation by those two and the
                # buffer (a view of the buffer refers to the allocation, NumPy collapsing
                # bases; the buffer itself or an object made by the buffer protocol, to it)
                # (no local names for them: those would be references too)
                e = bufs[k]
                if e[1].nbytes == nbytes and sys.getrefcount(e[1]) == 2 and sys.getrefcount(e[0]) == 3:
                    bufs.append(bufs.pop(k))
                    return e[1]
            entry = aligned_buffer(nbytes)
            bufs.append(entry)
            total = sum(e[1].nbytes for e in bufs)
            k = 0
            while total > self.limit and k < len(bufs) - 1:
                if sys.getrefcount(bufs[k][1]) == 2 and sys.getrefcount(bufs[k][0]) == 3:
                    total -= bufs.pop(k)[1].nbytes
                else:
                    k += 1
            # buffers still in use when the limit is reached are simply forgotten
            while total > self.limit and len(bufs) > 1:
                total -= bufs.pop(0)[1].nbytes
            return entry[1]

    def clear(self):
        with self._lock:
            self._buffers.clear()


#: a pooled buffer of at least this many bytes starts on a 2 MiB boundary
#: (``aligned_buffer``); smaller ones on a 4 KiB one
HUGE_PAGE_BYTES = 2 << 20


def aligned_buffer(nbytes):
    """(allocation, buffer): a uint8 buffer of ``nbytes`` bytes inside a NumPy allocation
    a little larger, the buffer starting on a 4 KiB page, and on a 2 MiB boundary when it
    is 2 MiB or more.

    glibc's large blocks start 16 bytes past a page: every row of a result then began in
    the middle of a cache line (a line stored non-temporally only in part), and NumPy's
    transparent-huge-page advice (allocations of 4 MiB or more) got the 2 MiB pages that
    fall wholly inside the block (a 4 MiB result: one, the rest in 4 KiB pages, 1024 of
    the TLB's entries).  Aligned, a 2 MiB-aligned span of the advised allocation is
    mapped in huge pages where the kernel has them (THP ``always`` or ``madvise``; the
    pages of the allocation outside the buffer are never touched, so never mapped).
    Measured on the AMD EPYC (one thread, min / median of 60, load 0.2), the [128, 128, 64]
    -> (1, 0, 2) row-tile copy of 4 MiB: 0.260 / 0.276 -> 0.186 / 0.190 ms, source and
    result in huge pages."""
    align = HUGE_PAGE_BYTES if nbytes >= HUGE_PAGE_BYTES else 4096
    raw = np.empty(nbytes + align, np.uint8)
    off = -raw.ctypes.data % align
    return raw, raw[off:off + nbytes]


#: the pool every data-movement kernel takes its results from
POOL = BufferPool()


def new_words(shape, n=None):
    """An uninitialised flat word array for a result of ``shape`` (n elements)."""
    if n is None:
        n = shape.numel
    dtype = word_dtype(shape.dtype)
    return POOL.take(n * dtype.itemsize).view(dtype)


def empty(dims, dtype):
    """An uninitialised array of ``dims`` and ``dtype`` for a kernel's result, from the
    pool when it is large (so a computation run again writes into mapped pages)."""
    dtype = np.dtype(dtype)
    dims = (int(dims),) if isinstance(dims, (int, np.integer)) else tuple(dims)
    n = product(dims)
    if n * dtype.itemsize < BufferPool.MIN_BYTES:
        return np.empty(dims, dtype)
    return np.ndarray(dims, dtype, POOL.take(n * dtype.itemsize))


def copy_words(array):
    """``words(array)`` copied into a new buffer (by both threads when it is larger than the
    cache holds: ``streamed``; a copy in the cache is as fast in one)."""
    src = words(array)
    out = POOL.take(src.nbytes).view(src.dtype)
    if src.size >= MOVE_PARALLEL_THRESHOLD:
        strided_copy(out, 0, (1,), src, 0, (1,), (src.size,))
    elif src.size:
        _copy_flat(out, src)
    return out


def as_result(flat, shape):
    """A flat word array seen as the result: ``shape``'s dtype and dims."""
    return flat.view(shape.dtype).reshape(shape.dims)


def threads():
    return get_threads()


class _Job:
    """One ``in_threads`` call: its parts, claimed in turn by whichever thread is free."""

    __slots__ = ("fn", "args", "n", "per", "parts", "claim", "done", "finished", "errors")

    def work(self):
        while True:
            c = next(self.claim)   # next() of an itertools.count is atomic under the GIL
            if c >= self.parts:
                return
            try:
                self.fn(c * self.per, min(self.n, (c + 1) * self.per), *self.args)
            except BaseException as e:  # noqa: BLE001 - re-raised by the caller
                self.errors.append(e)
            if next(self.done) == self.parts - 1:
                self.finished.release()   # the last part: the caller may go on


def _worker(inbox):
    while True:
        inbox.get().work()


_inboxes = []   # one queue.SimpleQueue per worker thread
_workers_lock = threading.Lock()


def _workers(count):
    """The inboxes of ``count`` worker threads (started on first use; daemons, blocked on
    their inbox between jobs, so they cost nothing while idle)."""
    if len(_inboxes) < count:
        import queue
        with _workers_lock:
            while len(_inboxes) < count:
                inbox = queue.SimpleQueue()
                threading.Thread(target=_worker, args=(inbox,), name=f"xla_explorer_kernel_{len(_inboxes)}",
                                 daemon=True).start()
                _inboxes.append(inbox)
    return _inboxes


def _forget_workers():   # a forked child has none of its parent's threads (and no holder of the lock)
    global _workers_lock
    _inboxes.clear()
    _workers_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_workers)


def in_threads(fn, n, parallel, *args, compiled=False):
    """``fn(lo, hi, *args)`` over [0, n): with ``parallel``, cut into about four parts per
    Numba thread, which the calling thread and worker threads take in turn (``fn`` is a
    ``nogil`` Numba function, so they run at once).  The caller waits only for parts another
    thread has started: when another process holds a core and a worker does not get to
    run, the caller does its parts too instead of waiting for it.

    A launch costs about 10-15 us on this project's 2-core machines (an OpenMP ``prange``
    launch with passive workers about 9 us; ``concurrent.futures`` with a semaphore, used
    before, 40 us): the workers wait on a ``queue.SimpleQueue`` (a lock in C) and the last
    part to finish releases one lock the caller waits on, so a launch is two thread
    wake-ups and a few Python steps per part.  It saves the compilation of a parallel
    wrapper (over a second each, cold) and does not spin-wait when another process wants
    the core.  ``compiled``: the caller knows ``fn`` ran for these argument types before
    (no call on an empty range first, below: a dispatch of its arguments, 1-3 us)."""
    k = min(threads(), n) if parallel else 1
    if k <= 1:
        fn(0, n, *args)
        return
    job = _Job()
    parts = min(n, 4 * k)
    job.per = per = -(-n // parts)
    job.parts = -(-n // per)
    job.fn, job.args, job.n = fn, args, n
    job.claim, job.done = itertools.count(), itertools.count()
    job.errors = []
    job.finished = threading.Lock()
    job.finished.acquire()
    # compile (or load) fn for these argument types here, on an empty range, before other
    # threads call it: Numba compiling one function in several threads at once can fail
    # ("no compiled object yet for <Library ...>")
    if not compiled:
        fn(0, 0, *args)
    for inbox in _workers(k - 1)[:k - 1]:
        inbox.put(job)
    job.work()
    job.finished.acquire()   # every part done, whoever took it
    # a worker that has not woken yet still holds the job in its inbox (a busy machine: the
    # caller did its parts): let the job hold no array, or the pool would see the result's
    # buffer still in use and allocate a new one for the next result (no part is claimed
    # any more, so nothing reads these again)
    job.fn = job.args = None
    if job.errors:
        raise job.errors[0]


def row_major_strides(dims):
    strides, s = [0] * len(dims), 1
    for d in range(len(dims) - 1, -1, -1):
        strides[d] = s
        s *= dims[d]
    return tuple(strides)


def product(dims):
    n = 1
    for d in dims:
        n *= int(d)
    return n


# -- the strided copy ------------------------------------------------------------------------

class CopyPlan:
    """One loop nest ``dst[dbase + i.dstr] = src[sbase + i.sstr]`` over ``dims`` (merged),
    with the way to walk it: rows of the last dimension (``chunk`` elements per work item)
    or square tiles of ``tile`` over dimension ``tile_dim`` and the last one."""

    __slots__ = ("dims", "dstr", "sstr", "n", "tile_dim", "tile", "chunk", "row_tile", "tiled", "vb", "run",
                 "streams", "traffic", "nt", "lanes", "spread")

    def __repr__(self):
        return (f"CopyPlan(dims={self.dims.tolist()}, dst_strides={self.dstr.tolist()}, "
                f"src_strides={self.sstr.tolist()}, tile_dim={self.tile_dim}, tile={self.tile}, chunk={self.chunk}, "
                f"row_tile={self.row_tile}, tiled={self.tiled}, vb={self.vb}, run={self.run}, "
                f"streams={self.streams}, traffic={self.traffic}, nt={self.nt}, lanes={self.lanes}, spread={self.spread})")


def merge_dims(dims, *strides):
    """Drop size-1 dimensions and merge neighbours that are contiguous in every stride list
    (``stride[d] == stride[d+1] * dims[d+1]``): the same loop nest with fewer dimensions.
    Returns (dims, [strides...]); at least one dimension."""
    kept = [(int(n), [int(s[d]) for s in strides]) for d, n in enumerate(dims) if n != 1]
    out = []
    for n, st in kept:
        if out:
            pn, pst = out[-1]
            if all(p == s * n for p, s in zip(pst, st)):
                out[-1] = (pn * n, st)
                continue
        out.append((n, st))
    if not out:
        out = [(1, [1] * len(strides))]
    return tuple(n for n, _ in out), [tuple(st[k] for _, st in out) for k in range(len(strides))]


#: a copy of rows (of at least ``NT_ROW_BYTES``) that reads and writes more than
#: ``NT_TRAFFIC_BYTES`` (``CopyPlan.traffic``; as ``STREAM_THREADED_BYTES``) stores the
#: result's whole lines non-temporally (``CopyPlan.nt``): a result that does not fit the
#: last-level cache beside its source is not read again from it, and a line written whole
#: need not be read from memory first.  Measured on the AMD EPYC (the kernel alone, three results in turn,
#: min / median of 30, load 4.7): 32 MiB f32 copied 2.95 / 6.65 -> 1.70 / 2.09 ms in one
#: thread; a stride-2 slice of 32 MiB 1.53 / 1.63 -> 1.36 / 1.45 (columns), 1.32 / 2.18 ->
#: 1.13 / 1.42 (rows).
NT_TRAFFIC_BYTES = 24 << 20
NT_ROW_BYTES = 1024

#: whether a transposition of short rows in row tiles (``_rowtiles_range``) stores the
#: result's whole lines non-temporally, whatever its size.  (From 6aeaf86 on it did so by
#: mistake, the flag overwritten by the tile count, and a measurement made then of 256-byte
#: rows said they "did not gain": both sides of it stored non-temporally.)  Measured on the
#: AMD EPYC, the kernel alone, one thread, min / median, load 1.2, f32 (1, 0, 2) with the
#: source and the result 2 MiB-aligned (pooled buffers, ``aligned_buffer``), non-temporal
#: against plain stores: [128, 128, 64] 0.188 / 0.190 against 0.335 / 0.349 ms,
#: [256, 128, 32] 0.206 / 0.220 against 0.334 / 0.353, [64, 64, 128] 0.093 / 0.095
#: against 0.157 / 0.169, [16, 128, 64] 0.028 / 0.030 against 0.041 / 0.048, 64 MiB
#: [512, 512, 64] 3.83 / 3.91 against 6.88 / 7.39.  Plain stores suffer from 4 KiB
#: aliasing (the result's rows at the same offsets in a page as the source's rows read
#: next): with the source 16 bytes past a page (a NumPy array) they took 0.168 / 0.185 at
#: [128, 128, 64], 7.2 / 7.3 at 64 MiB, non-temporal stores 0.188 / 0.190 and 3.79 / 3.83.
NT_ROW_TILES = True


#: element width -> (tile, register block, run) of a staged transposition (``_tile_staged``)
_STAGED = {1: (128, 16, 256), 2: (64, 16, 128), 4: (32, 8, 128)}


def _sets(stride, rows):
    """How many of the L1 cache's 64 sets (of 64-byte lines; bits 6-11 of an address) the
    starts of ``rows`` rows ``stride`` bytes apart fall into."""
    return len({(k * stride >> 6) & 63 for k in range(rows)})


def _staging(plan, itemsize, src_row, dst_row, run):
    """Whether a plain transposition (unit steps along the source's and the result's
    contiguous dimensions; rows ``src_row`` and ``dst_row`` elements apart) goes through a
    small buffer (``_tile_staged``), and with which tile.

    A register block reads ``vb`` source rows at one column and writes ``vb`` result rows
    at one column: when the rows are a power of two of cache lines apart (a 1024 x 1024
    f32 matrix: 4 KiB), all of them fall into one set of the 8-way L1 cache, and the
    block's 16 lines evict one another before the neighbouring block reads (or completes)
    the rest of them: a 1024^2 f32 transposition took 0.58-0.70 ms against 0.27-0.33 for
    1008^2 or rows padded to 1040 (one thread, load 2-3).  Staged, a tile's blocks are
    transposed into a buffer whose rows are ``run`` elements long (apart by a few lines:
    no two of a block's rows in one set) and the buffer's rows are then copied out as runs
    of ``run`` elements: 1024^2 f32 0.28-0.35 ms.  For f32 (8 x 8 blocks, half lines: a
    block's 8 source rows fit the 8 ways) it is as fast or faster at every size measured
    (256^2 0.86x, 1008^2 0.96x, 2896^2 0.7x); for u8 / u16 only where rows do share sets
    (elsewhere it cost 1.1-1.5x); u64 and wider blocks (8 rows of whole lines) do not
    conflict and stay direct; so do results whose rows are shorter than 32 elements (``run``:
    runs of 8-16 copied out of the buffer cost more than they save: f32[8, 131072].T
    1.3-1.4x, f32[16, 65536].T 1.1-1.2x)."""
    staged = _STAGED.get(itemsize)
    if staged is None or run < 32:
        return
    rows = 16
    if itemsize != 4 and _sets(src_row * itemsize, rows) == rows and _sets(dst_row * itemsize, rows) == rows:
        return
    plan.tile, plan.vb, plan.run = staged


#: a copy of at most this many bytes (its source and result within half of a 32 MiB L3)
#: walks its row tiles 4 rows at a time, a larger one 8 (``plan_copy``)
ROW_TILE_CACHED_BYTES = 8 << 20


#: the most lanes (result row length) an interleaving copy (``_interleave_range``) takes,
#: and the elements of the source rows per work item
INTERLEAVE_LANES = 8
INTERLEAVE_CHUNK = 4096


def _interleaved(dims, dstr, sstr):
    """The dimension ``a`` of a merged loop nest whose result rows (the last dimension, unit
    steps in the result) are 2-``INTERLEAVE_LANES`` elements read from as many source rows
    ``sstr[-1]`` apart, ``a`` running along those rows (unit steps in the source) and
    between the result's rows (a step of the row length there); -1 when there is none."""
    r = len(dims)
    c = dims[-1]
    if r < 2 or not 2 <= c <= INTERLEAVE_LANES or dstr[-1] != 1 or abs(sstr[-1]) <= 1:
        return -1
    for a in range(r - 1):
        if sstr[a] == 1 and dstr[a] == c and dims[a] >= 2 * c:
            return a
    return -1


def _spread_from(dims, dstr, sstr):
    """The dimension ``a`` of a merged loop nest whose source rows are 2-``INTERLEAVE_LANES``
    elements (along ``a``: unit steps in the source) spread over as many long result rows
    (the last dimension: unit steps in the result, steps of the row length in the source);
    -1 when there is none."""
    r = len(dims)
    if r < 2 or dstr[-1] != 1:
        return -1
    for a in range(r - 1):
        c = dims[a]
        if sstr[a] == 1 and 2 <= c <= INTERLEAVE_LANES and sstr[-1] == c and abs(dstr[a]) > 1 \
                and dims[-1] >= 2 * c:
            return a
    return -1


@functools.lru_cache(maxsize=4096)
def plan_copy(dims, dst_strides, src_strides, itemsize, nthreads):
    """The CopyPlan of a loop nest (all arguments tuples/ints, so that it can be cached)."""
    mdims, (dstr, sstr) = merge_dims(dims, dst_strides, src_strides)
    plan = CopyPlan()
    plan.dims = np.array(mdims, np.int64)
    plan.dstr = np.array(dstr, np.int64)
    plan.sstr = np.array(sstr, np.int64)
    plan.n = product(mdims)
    r = len(mdims)
    plan.tile_dim, plan.tile, plan.vb, plan.run = -1, 0, 0, 0
    plan.lanes, plan.spread = 0, False
    # a result whose contiguous rows are a few (2-8) elements from as many long source
    # rows (NCHW -> NHWC with few channels, [c, n] -> [n, c]), or the other way round
    # (NHWC -> NCHW: the source's rows of a few elements spread over as many long result
    # rows): ``_interleave_range``, at about a copy's speed
    a = _interleaved(mdims, dstr, sstr)
    if a >= 0:
        plan.tile_dim, plan.lanes = a, mdims[-1]
    else:
        a = _spread_from(mdims, dstr, sstr)
        if a >= 0:
            plan.tile_dim, plan.lanes, plan.spread = a, mdims[a], True
    # the last dimension is read with a large stride, another one is (nearly) contiguous in
    # the source: a transposition, walked in tiles
    if not plan.lanes and r >= 2 and abs(sstr[-1]) > 1 and abs(dstr[-1]) <= 1 and mdims[-1] >= 4:
        a = min(range(r - 1), key=lambda d: abs(sstr[d]))
        if abs(sstr[a]) < abs(sstr[-1]) and mdims[a] >= 4:
            plan.tile_dim = a
            plan.tile = {1: 128, 2: 64, 4: 64}.get(itemsize, 32)
            plan.vb = 16 if itemsize == 4 else 8   # register blocks of whole lines for f32
            if sstr[a] == 1 and dstr[-1] == 1:
                _staging(plan, itemsize, abs(sstr[-1]), abs(dstr[a]), mdims[-1])
    # short rows contiguous on both sides, the rows before them in another order in the
    # source (a transposition of blocks: [a, b, 64] -> [b, a, 64]): walked in tiles of
    # ``row_tile`` rows that are neighbours in the result (dimension r - 2), all the
    # source-neighbour rows of dimension ``a`` through each, so that a tile writes runs
    # of ``row_tile`` rows and reads ``row_tile`` sequential streams (rows one by one in
    # the result's order: 0.32 ms for 4 MiB of rows of 64 f32; tiles of 4 rows 0.12 ms,
    # NumPy's plain copy 0.09 ms, on an earlier machine).  Measured on the AMD EPYC (one
    # thread, min of 150 interleaved, load 3.8; NumPy's plain copy 0.114-0.118 ms): at
    # 4 MiB, rows of 64 f32 [128, 128, 64] 0.142 ms in tiles of 4 result rows against
    # 0.221 in the tiles of 16 source rows (4 KiB runs) taken before, [64, 256, 64] 0.145
    # against 0.180, rows of 32 f32 0.150 against 0.157, of 128 f32 0.134 against 0.130;
    # beyond the cache (32 MiB, min of 12) tiles of 8: 3.2 / 2.8 / 3.6 ms for rows of 64 /
    # 128 / 32 f32 against 3.1 / 2.7 / 4.2 before.  Fewer rows a tile where that would
    # leave under four work items per thread
    plan.row_tile, plan.tiled = 0, -1
    if r >= 3 and sstr[-1] == 1 and dstr[-1] == 1 and mdims[-1] * itemsize <= 512:
        a = min(range(r - 1), key=lambda d: abs(sstr[d]))
        if a != r - 2 and abs(sstr[a]) == mdims[-1] and abs(sstr[a]) < abs(sstr[r - 2]) and mdims[a] >= 2:
            plan.tile_dim, plan.tiled = a, r - 2
            most = 4 if product(mdims) * itemsize <= ROW_TILE_CACHED_BYTES else 8
            plan.row_tile = max(2, min(most, mdims[r - 2] // (4 * nthreads)))
    # a walk that moves rows at the copy's speed in one thread (runs copied, reversed or
    # every other element kept; tiles of whole rows), and the bytes it reads and writes
    # (a stride-2 row reads its lines twice over: ``streamed``)
    plan.streams = plan.tile == 0 and (plan.row_tile > 0 or plan.lanes > 0 or (dstr[-1] == 1 and abs(sstr[-1]) <= 2))
    plan.traffic = plan.n * itemsize * (1 + max(1, abs(sstr[-1])))
    # rows of at least NT_ROW_BYTES copied (or every other element kept), the source and
    # the result together larger than the last-level cache: the result's whole lines
    # stored non-temporally (no read of each line before it is written; ``NT_TRAFFIC_BYTES``)
    # Row tiles store non-temporally at every size (``NT_ROW_TILES``)
    plan.nt = bool(plan.streams and not plan.row_tile and dstr[-1] == 1 and sstr[-1] in (1, 2) and itemsize <= 8
                   and mdims[-1] * itemsize >= NT_ROW_BYTES and plan.traffic > NT_TRAFFIC_BYTES) \
        or (plan.row_tile > 0 and NT_ROW_TILES and itemsize <= 8)
    rows = plan.n // mdims[-1]
    plan.chunk = mdims[-1]
    if plan.lanes:   # work items of ``chunk`` elements along the long rows
        plan.chunk = min(mdims[-1 if plan.spread else plan.tile_dim], INTERLEAVE_CHUNK)
        plan.traffic = 2 * plan.n * itemsize
    if rows < 4 * nthreads and mdims[-1] >= 8192:
        # few long rows: cut them so that every thread gets work
        plan.chunk = max(4096, -(-mdims[-1] // (4 * nthreads)))
    return plan


@njit(inline="always", **_opts)
def _offsets(row, dims, dstr, sstr, last):
    """(dst, src) offsets of row ``row`` of the dimensions before ``last`` (row-major)."""
    do = 0
    so = 0
    rem = row
    for d in range(last - 1, -1, -1):
        c = rem % dims[d]
        rem //= dims[d]
        do += c * dstr[d]
        so += c * sstr[d]
    return do, so


def _lanes(itemsize):
    """Elements of ``itemsize`` bytes in a 64-byte vector (a cache line, an AVX-512 register)."""
    return max(1, 64 // itemsize)


def _even_codegen(store):
    """The code of ``_copy_even`` / ``_even_nt``, its vector of even lanes stored by
    ``store(builder, value, ptr, size)``."""

    def codegen(context, builder, sig, args):
        dstv, dov, srcv, sov = args
        dptr = builder.gep(context.make_array(sig.args[0])(context, builder, dstv).data, [dov])
        sptr = builder.gep(context.make_array(sig.args[2])(context, builder, srcv).data, [sov])
        elt = context.get_data_type(sig.args[0].dtype)
        size = context.get_abi_sizeof(elt)
        n = _lanes(size)
        i64 = ir.IntType(64)
        if not isinstance(elt, ir.IntType):
            for j in range(n):
                v = builder.load(builder.gep(sptr, [ir.Constant(i64, 2 * j)]))
                builder.store(v, builder.gep(dptr, [ir.Constant(i64, j)]))
            return context.get_dummy_value()
        vec = ir.VectorType(elt, n)
        lo = builder.load(builder.bitcast(sptr, vec.as_pointer()), align=size)
        hi = builder.load(builder.bitcast(builder.gep(sptr, [ir.Constant(i64, n)]), vec.as_pointer()), align=size)
        even = builder.shuffle_vector(lo, hi, ir.Constant(ir.VectorType(ir.IntType(32), n), list(range(0, 2 * n, 2))))
        store(builder, even, builder.bitcast(dptr, vec.as_pointer()), size)
        return context.get_dummy_value()

    return codegen


@intrinsic
def _copy_even(typingctx, dst, do, src, so):
    """``dst[do:do + n] = src[so:so + 2n:2]`` for n = ``_lanes`` of the element: two vector
    loads and one shuffle that keeps the even lanes.  (LLVM vectorises the scalar loop
    with a gather instruction, slower than scalar code on this project's machines.)
    Reads ``src[so + 2n - 1]``, one element past the last it copies.  Element types that
    are not integers (c128 words) are moved one element at a time."""
    return types.void(dst, do, src, so), _even_codegen(lambda b, v, ptr, size: b.store(v, ptr, align=size))


_X86 = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686", "x86")


def _nt_store(builder, value, ptr, align):
    """A store with LLVM's ``!nontemporal`` hint (``vmovntdq``: the line is written to memory
    without being read into the cache first)."""
    st = builder.store(value, ptr, align=align)
    st.set_metadata("nontemporal", builder.module.add_metadata([ir.Constant(ir.IntType(32), 1)]))


@intrinsic
def _line_nt(typingctx, dst, do, src, so):
    """``dst[do:do + n] = src[so:so + n]`` for n = ``_lanes`` of the (integer) element: one
    cache line, ``dst + do`` aligned to 64 bytes, stored non-temporally."""

    def codegen(context, builder, sig, args):
        dstv, dov, srcv, sov = args
        dptr = builder.gep(context.make_array(sig.args[0])(context, builder, dstv).data, [dov])
        sptr = builder.gep(context.make_array(sig.args[2])(context, builder, srcv).data, [sov])
        elt = context.get_data_type(sig.args[0].dtype)
        size = context.get_abi_sizeof(elt)
        if not isinstance(elt, ir.IntType):   # (c128 words: plain stores, never taken by a plan)
            for j in range(_lanes(size)):
                k = ir.Constant(ir.IntType(64), j)
                builder.store(builder.load(builder.gep(sptr, [k])), builder.gep(dptr, [k]))
            return context.get_dummy_value()
        vec = ir.VectorType(elt, _lanes(size))
        v = builder.load(builder.bitcast(sptr, vec.as_pointer()), align=size)
        _nt_store(builder, v, builder.bitcast(dptr, vec.as_pointer()), 64)
        return context.get_dummy_value()

    return types.void(dst, do, src, so), codegen


@intrinsic
def _even_nt(typingctx, dst, do, src, so):
    """``_copy_even`` with its store non-temporal: ``dst + do`` aligned to 64 bytes (one line;
    c128 words: plain stores, never taken by a plan)."""
    return types.void(dst, do, src, so), _even_codegen(lambda b, v, ptr, size: _nt_store(b, v, ptr, 64))


@intrinsic
def _line_offset(typingctx, dst, do):
    """Elements from ``dst + do`` to the next 64-byte boundary (0 when it is one)."""

    def codegen(context, builder, sig, args):
        dstv, dov = args
        ptr = builder.gep(context.make_array(sig.args[0])(context, builder, dstv).data, [dov])
        size = context.get_abi_sizeof(context.get_data_type(sig.args[0].dtype))
        i64 = ir.IntType(64)
        gap = builder.and_(builder.neg(builder.ptrtoint(ptr, i64)), ir.Constant(i64, 63))
        return builder.udiv(gap, ir.Constant(i64, size))

    return types.int64(dst, do), codegen


@intrinsic
def _sfence(typingctx):
    """``sfence``: the non-temporal stores before it are visible to other threads after it
    (on other processors than x86, a sequentially consistent fence)."""

    def codegen(context, builder, sig, args):
        if _X86:
            fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), []),
                                                "llvm.x86.sse.sfence")
            builder.call(fn, [])
        else:
            builder.fence("seq_cst")
        return context.get_dummy_value()

    return types.void(), codegen


@njit(inline="always", **_opts)
def _run_nt(dst, do, src, so, n):
    """``dst[do:do + n] = src[so:so + n]`` (integer words), the whole lines of the result
    stored non-temporally, the partial ones at its ends as usual."""
    lanes = 64 // dst.itemsize
    head = min(n, _line_offset(dst, do))
    for j in range(head):
        dst[uint64(do + j)] = src[uint64(so + j)]
    j = head
    while j + lanes <= n:
        _line_nt(dst, do + j, src, so + j)
        j += lanes
    for k in range(j, n):
        dst[uint64(do + k)] = src[uint64(so + k)]


@njit(inline="always", **_opts)
def _even_run_nt(dst, do, src, so, n):
    """``dst[do:do + n] = src[so:so + 2n:2]`` (integer words), the whole lines of the result
    stored non-temporally (``_even_nt``; it reads one element past the pair it keeps, so
    the last element is copied alone)."""
    lanes = 64 // dst.itemsize
    head = min(n, _line_offset(dst, do))
    for j in range(head):
        dst[uint64(do + j)] = src[uint64(so + 2 * j)]
    j = head
    while j + lanes < n:
        _even_nt(dst, do + j, src, so + 2 * j)
        j += lanes
    for k in range(j, n):
        dst[uint64(do + k)] = src[uint64(so + 2 * k)]


#: a run of at least this many bytes whose destination lies 1-63 bytes after its source,
#: modulo 4 KiB, is copied by a loop, not by memmove (``_move``)
ALIASED_RUN_BYTES = 2048


@intrinsic
def _move(typingctx, dst, do, src, so, n):
    """``dst[do:do + n] = src[so:so + n]`` by ``llvm.memmove`` (the C library's memmove: a
    long run copied at NumPy's speed; the element loop ran 20-25% slower inside the copy
    kernels on an earlier machine, as fast on the AMD EPYC).

    Except where the destination lies 1-63 bytes after the source modulo 4 KiB and the run
    is 2 KiB or more: there glibc's memmove (``rep movsb`` from 2 KiB) runs 5-12x slower
    on the AMD EPYC (4 KiB aliasing: every load waits on a recent store to the same offset
    in a page; a 256 KiB copy 7.5 us, 88 us with the destination 16 bytes ahead), and two
    equal heap blocks allocated one after the other are 16 bytes apart modulo 4 KiB.  Such
    a run (the arrays not overlapping) is copied by an element loop (vectorised; 7.7 us)."""

    def codegen(context, builder, sig, args):
        dstv, dov, srcv, sov, nv = args
        d = builder.gep(context.make_array(sig.args[0])(context, builder, dstv).data, [dov])
        s = builder.gep(context.make_array(sig.args[2])(context, builder, srcv).data, [sov])
        size = context.get_abi_sizeof(context.get_data_type(sig.args[0].dtype))
        i64 = ir.IntType(64)
        di, si = builder.ptrtoint(d, i64), builder.ptrtoint(s, i64)
        nbytes = builder.mul(nv, ir.Constant(i64, size))
        delta = builder.and_(builder.sub(di, si), ir.Constant(i64, 4095))
        aliased = builder.icmp_unsigned("<", builder.sub(delta, ir.Constant(i64, 1)), ir.Constant(i64, 63))
        long_run = builder.icmp_signed(">=", nbytes, ir.Constant(i64, ALIASED_RUN_BYTES))
        # (a real overlap, the destination ahead inside the source, needs memmove's order)
        ahead = builder.icmp_unsigned(">", di, si)
        inside = builder.icmp_unsigned("<", builder.sub(di, si), nbytes)
        overlap = builder.and_(ahead, inside)
        loop = builder.and_(builder.and_(aliased, long_run), builder.not_(overlap))
        with builder.if_else(loop) as (then, otherwise):
            with then:
                with cgutils.for_range(builder, nv) as it:
                    v = builder.load(builder.gep(s, [it.index]))
                    builder.store(v, builder.gep(d, [it.index]))
            with otherwise:
                cgutils.raw_memmove(builder, d, s, nv, size)
        return context.get_dummy_value()

    return types.void(dst, do, src, so, n), codegen


@njit(**_opts)
def _copy_flat(dst, src):
    """``dst[:] = src`` (flat arrays of one type) through ``_move``: NumPy's copy is glibc's
    memmove, whatever the arrays' offsets modulo 4 KiB."""
    _move(dst, 0, src, 0, src.shape[0])


@njit(inline="always", **_opts)
def _copy_run(dst, do, ds, src, so, ss, j0, j1):
    # positions are cast to unsigned: Numba then knows they are not negative (no
    # wrap-around test per access), and LLVM vectorises the loop
    if j1 - j0 == 1:  # one element (an element gather): no loop to set up
        dst[uint64(do + j0 * ds)] = src[uint64(so + j0 * ss)]
    elif ds == 1 and ss == 1:
        if j1 - j0 >= 64:   # (a shorter run is copied faster by the loop than by a call)
            _move(dst, do + j0, src, so + j0, j1 - j0)
        else:
            for j in range(j0, j1):
                dst[uint64(do + j)] = src[uint64(so + j)]
    elif ds == 1 and ss == -1:  # a reversed row
        for j in range(j0, j1):
            dst[uint64(do + j)] = src[uint64(so - j)]
    elif ds == 1 and ss == 2:  # every other element (x[..., ::2]): vectors of the even lanes
        n = 64 // dst.itemsize if dst.itemsize < 64 else 1
        j = j0
        while j + n < j1:  # (one element left at least: _copy_even reads one past its last)
            _copy_even(dst, do + j, src, so + 2 * j)
            j += n
        for j in range(j, j1):
            dst[uint64(do + j)] = src[uint64(so + 2 * j)]
    else:
        for j in range(j0, j1):
            dst[uint64(do + j * ds)] = src[uint64(so + j * ss)]


@njit(inline="always", **_opts)
def _copy_run_nt(dst, do, ds, src, so, ss, j0, j1, nt):
    """``_copy_run``; with ``nt`` a run of unit or stride-2 steps (the result's unit) has its
    whole lines stored non-temporally (``_run_nt``, ``_even_run_nt``)."""
    if nt and ds == 1 and ss == 1:
        _run_nt(dst, do + j0, src, so + j0, j1 - j0)
    elif nt and ds == 1 and ss == 2:
        _even_run_nt(dst, do + j0, src, so + 2 * j0, j1 - j0)
    else:
        _copy_run(dst, do, ds, src, so, ss, j0, j1)


@njit(**_opts)
def _rows_range(i0, i1, dst, dbase, src, sbase, dims, dstr, sstr, chunk, nch, nt):
    """Work items [i0, i1) of the loop nest: ``chunk`` elements of a row each (``nch`` per
    row).  Whole rows (nch = 1) follow one another with their coordinates counted up
    like an odometer: no division per row (a transposition of rows of 64 spent most of
    its time dividing).  ``nt``: the result's lines stored non-temporally (``CopyPlan.nt``)."""
    r = dims.shape[0]
    L = dims[r - 1]
    ds, ss = dstr[r - 1], sstr[r - 1]
    if nch > 1 or r == 1:
        for w in range(i0, i1):
            row = w // nch
            c = w - row * nch
            j0 = c * chunk
            do, so = _offsets(row, dims, dstr, sstr, r - 1)
            _copy_run_nt(dst, dbase + do, ds, src, sbase + so, ss, j0, min(L, j0 + chunk), nt)
        if nt:
            _sfence()
        return
    coord = np.empty(r - 1, np.int64)
    rem = i0
    do = dbase
    so = sbase
    for d in range(r - 2, -1, -1):
        c = rem % dims[d]
        rem //= dims[d]
        coord[d] = c
        do += c * dstr[d]
        so += c * sstr[d]
    for _ in range(i0, i1):
        _copy_run_nt(dst, do, ds, src, so, ss, 0, L, nt)
        d = r - 2
        while d >= 0:
            coord[d] += 1
            do += dstr[d]
            so += sstr[d]
            if coord[d] < dims[d]:
                break
            do -= dims[d] * dstr[d]
            so -= dims[d] * sstr[d]
            coord[d] = 0
            d -= 1
    if nt:
        _sfence()


def _block_transpose(n):
    """A Numba intrinsic ``f(dst, do, dstride, src, so, sstride)``: the ``n`` x ``n`` block
    whose row r is ``src[so + r * sstride:][:n]`` written transposed, its column c to
    ``dst[do + c * dstride:][:n]``.  The rows are loaded as ``n``-lane vectors and
    transposed in registers by log2(n) rounds of two-input shuffles (each round swaps the
    off-diagonal h x h sub-blocks of every 2h x 2h block, h = n/2, ..., 1), then stored as
    vectors: a transposition LLVM does not find on its own (its loops of scalar loads and
    stores ran 1.3x (power-of-two rows) to 4x slower for f32, 5x for u8/u16).  Element
    types that are not integers (c128 words) are moved one element at a time."""

    def codegen(context, builder, sig, args):
        dstv, dov, dsv, srcv, sov, ssv = args
        dst = context.make_array(sig.args[0])(context, builder, dstv).data
        src = context.make_array(sig.args[3])(context, builder, srcv).data
        elt = context.get_data_type(sig.args[0].dtype)
        i64 = ir.IntType(64)

        def at(ptr, base, stride, r):
            return builder.gep(ptr, [builder.add(base, builder.mul(stride, ir.Constant(i64, r)))])

        if not isinstance(elt, ir.IntType):
            for r in range(n):
                for c in range(n):
                    v = builder.load(builder.gep(at(src, sov, ssv, r), [ir.Constant(i64, c)]))
                    builder.store(v, builder.gep(at(dst, dov, dsv, c), [ir.Constant(i64, r)]))
            return context.get_dummy_value()
        vec = ir.VectorType(elt, n)
        align = context.get_abi_sizeof(elt)
        rows = [builder.load(builder.bitcast(at(src, sov, ssv, r), vec.as_pointer()), align=align)
                for r in range(n)]
        h = n // 2
        while h:
            keep = ir.Constant(ir.VectorType(ir.IntType(32), n), [j if not j & h else n + j - h for j in range(n)])
            swap = ir.Constant(ir.VectorType(ir.IntType(32), n), [j + h if not j & h else n + j for j in range(n)])
            for r in range(n):
                if not r & h:
                    a, b = rows[r], rows[r + h]
                    rows[r] = builder.shuffle_vector(a, b, keep)
                    rows[r + h] = builder.shuffle_vector(a, b, swap)
            h //= 2
        for c in range(n):
            builder.store(rows[c], builder.bitcast(at(dst, dov, dsv, c), vec.as_pointer()), align=align)
        return context.get_dummy_value()

    def typer(typingctx, dst, do, dstride, src, so, sstride):
        return types.void(dst, do, dstride, src, so, sstride), codegen

    typer.__name__ = f"_transpose{n}x{n}"
    return intrinsic(typer)


_transpose8 = _block_transpose(8)
_transpose16 = _block_transpose(16)


@njit(inline="always", **_opts)
def _tile_vec(dst, do, da, src, so, ss, ni, nj, vb):
    """The ``ni`` x ``nj`` tile ``dst[do + i * da + j] = src[so + j * ss + i]`` (a plain
    transposition): ``vb`` x ``vb`` register blocks (``_transpose8``/``16``) over the part
    they cover, element by element along the edges.  The blocks go along i (the source's
    rows) innermost: each source line is read whole by consecutive blocks."""
    fi = ni - ni % vb
    fj = nj - nj % vb
    for j in range(0, fj, vb):
        for i in range(0, fi, vb):
            if vb == 16:
                _transpose16(dst, do + i * da + j, da, src, so + j * ss + i, ss)
            else:
                _transpose8(dst, do + i * da + j, da, src, so + j * ss + i, ss)
    for i in range(fi, ni):   # the rows of the result below the blocks
        o = do + i * da
        for j in range(nj):
            dst[uint64(o + j)] = src[uint64(so + j * ss + i)]
    for i in range(fi):       # and the columns right of them
        o = do + i * da
        for j in range(fj, nj):
            dst[uint64(o + j)] = src[uint64(so + j * ss + i)]


@njit(**_opts)
def _outer_bases(outer, last, a, dims, dstr, sstr, dbase, sbase):
    """Offsets in the result and the source of the ``outer``-th index of dimensions
    ``last``, ``last - 1``, ..., 0 without dimension ``a`` (the last one fastest)."""
    do = dbase
    so = sbase
    rem = outer
    for d in range(last, -1, -1):
        if d == a:
            continue
        c = rem % dims[d]
        rem //= dims[d]
        do += c * dstr[d]
        so += c * sstr[d]
    return do, so


@njit(inline="always", **_opts)
def _block(dst, do, dstride, src, so, sstride, vb):
    if vb == 16:
        _transpose16(dst, do, dstride, src, so, sstride)
    else:
        _transpose8(dst, do, dstride, src, so, sstride)


@njit(inline="always", **_opts)
def _tile_staged(dst, do, da, src, so, ss, ni, nj, buf, run, vb):
    """The ``ni`` x ``nj`` tile ``dst[do + i * da + j] = src[so + j * ss + i]`` (a plain
    transposition) through ``buf``, ``run`` columns of it at a time: ``vb`` x ``vb``
    register blocks (element by element along the edges) write the transposed part into
    ``buf`` (row i at ``i * run``), whose rows are then copied out to the result's rows
    (see ``_staging``)."""
    fi = ni - ni % vb
    for j0 in range(0, nj, run):
        mj = min(run, nj - j0)
        fj = mj - mj % vb
        s0 = so + j0 * ss
        for j in range(0, fj, vb):
            for i in range(0, fi, vb):
                _block(buf, i * run + j, run, src, s0 + j * ss + i, ss, vb)
        for i in range(fi, ni):   # the rows below the blocks
            for j in range(mj):
                buf[uint64(i * run + j)] = src[uint64(s0 + j * ss + i)]
        for i in range(fi):       # and the columns right of them
            for j in range(fj, mj):
                buf[uint64(i * run + j)] = src[uint64(s0 + j * ss + i)]
        for i in range(ni):
            o = do + i * da + j0
            b = i * run
            for j in range(mj):
                dst[uint64(o + j)] = buf[uint64(b + j)]


@njit(**_opts)
def _tile_row(w, dst, dbase, src, sbase, dims, dstr, sstr, a, tile, na, buf, vb, run):
    """Row of tiles ``w``: the other dimensions' index and the tile's place along ``a``;
    then every tile along the last dimension: register blocks when both contiguous sides
    have unit steps (through ``buf`` when ``run``: ``_tile_staged``; else straight into
    the result: ``_tile_vec``), otherwise through ``buf``: read the source along ``a``
    (contiguous there), write the result along the last dimension (contiguous)."""
    r = dims.shape[0]
    outer = w // na
    ta = w - outer * na
    do, so = _outer_bases(outer, r - 2, a, dims, dstr, sstr, dbase, sbase)
    i0 = ta * tile
    ni = min(dims[a], i0 + tile) - i0
    da, sa = dstr[a], sstr[a]
    ds, ss = dstr[r - 1], sstr[r - 1]
    if sa == 1 and ds == 1:
        # a plain transposition (unit steps on both contiguous sides): register blocks
        # over the whole row of tiles
        if run:
            _tile_staged(dst, do + i0 * da, da, src, so + i0, ss, ni, dims[r - 1], buf, run, vb)
        else:
            _tile_vec(dst, do + i0 * da, da, src, so + i0, ss, ni, dims[r - 1], vb)
        return
    for j0 in range(0, dims[r - 1], tile):
        nj = min(dims[r - 1], j0 + tile) - j0
        for j in range(nj):
            s = so + (j0 + j) * ss + i0 * sa
            for i in range(ni):
                buf[uint64(j * tile + i)] = src[uint64(s + i * sa)]
        for i in range(ni):
            o = do + (i0 + i) * da + j0 * ds
            for j in range(nj):
                dst[uint64(o + j * ds)] = buf[uint64(j * tile + i)]


@njit(**_opts)
def _tiles_range(w0, w1, dst, dbase, src, sbase, dims, dstr, sstr, a, tile, vb, run):
    """Rows of tiles [w0, w1): ``tile`` x ``tile`` blocks of dimension ``a`` and the last
    one.  A transposition reads a column of the source and writes a row of the result; a
    block copied through a small buffer reads whole cache lines of the source and writes
    whole lines of the result (a power-of-two row length would otherwise map a column's
    lines onto a few cache sets)."""
    na = (dims[a] + tile - 1) // tile
    buf = np.empty(tile * max(tile, run), dst.dtype)
    for w in range(w0, w1):
        _tile_row(w, dst, dbase, src, sbase, dims, dstr, sstr, a, tile, na, buf, vb, run)


@njit(**_opts)
def _rowtiles_range(w0, w1, dst, dbase, src, sbase, dims, dstr, sstr, a, tile, t, nt):
    """Tiles [w0, w1) of rows of the last dimension (unit steps on both sides): ``tile``
    rows along dimension ``t`` times all rows along the other of ``a`` (the source's
    neighbour rows) and r - 2 (the result's), ``t`` being one of them; the other
    dimensions' index and the tile's place along ``t`` from the work item."""
    r = dims.shape[0]
    L = dims[r - 1]
    f = r - 2 if t == a else a
    # (the strides in locals: read from their arrays inside the loops, they were read
    # again after every store, which may alias them as far as LLVM knows)
    nf, df, sf = dims[f], dstr[f], sstr[f]
    dt, st = dstr[t], sstr[t]
    # (the tile count is not named ``nt``: that name, the flag, was once overwritten by it,
    # and every row tile then stored non-temporally)
    ntiles = (dims[t] + tile - 1) // tile
    for w in range(w0, w1):
        outer = w // ntiles
        tt = w - outer * ntiles
        do, so = _outer_bases(outer, r - 3, a, dims, dstr, sstr, dbase, sbase)
        i0 = tt * tile
        i1 = min(dims[t], i0 + tile)
        for j in range(nf):
            dj = do + j * df
            sj = so + j * sf
            for i in range(i0, i1):
                o = dj + i * dt
                s = sj + i * st
                if nt:
                    _run_nt(dst, o, src, s, L)
                else:
                    for k in range(L):
                        dst[uint64(o + k)] = src[uint64(s + k)]
    if nt:
        _sfence()


@njit(inline="always", **_opts)
def _interleave(dst, do, src, so, ss, n, c):
    """``dst[do + i * c + k] = src[so + k * ss + i]`` for i < n, k < c (a literal after
    inlining: the k loop unrolled, the c source rows read as streams, the result written
    in order)."""
    for i in range(n):
        o = do + i * c
        s = so + i
        for k in range(c):
            dst[uint64(o + k)] = src[uint64(s + k * ss)]


@njit(inline="always", **_opts)
def _spread(dst, do, ds, src, so, n, c):
    """``dst[do + k * ds + i] = src[so + i * c + k]`` for i < n, k < c (``_interleave``'s
    inverse: the source read in order, c result rows written as streams)."""
    for i in range(n):
        s = so + i * c
        o = do + i
        for k in range(c):
            dst[uint64(o + k * ds)] = src[uint64(s + k)]


@njit(**_opts)
def _interleave_range(w0, w1, dst, dbase, src, sbase, dims, dstr, sstr, a, chunk, spread):
    """Work items [w0, w1) of an interleaving copy (``_interleaved``): ``chunk`` elements
    along dimension ``a`` of one index of the other dimensions but the last, each element
    the ``dims[-1]`` source rows' elements written side by side.  ``spread``: the other
    way round (``_interleaved(dims, sstr, dstr)``: ``chunk`` elements along the last
    dimension, each the ``dims[a]`` source elements side by side written to as many result
    rows, ``_spread``)."""
    r = dims.shape[0]
    ds, ss = dstr[a], sstr[r - 1]
    c = dims[a] if spread else dims[r - 1]
    na = dims[r - 1] if spread else dims[a]
    nch = (na + chunk - 1) // chunk
    for w in range(w0, w1):
        outer = w // nch
        i0 = (w - outer * nch) * chunk
        n = min(na, i0 + chunk) - i0
        # (the other dimensions than ``a`` and the last: the same in both directions)
        do, so = _outer_bases(outer, r - 2, a, dims, dstr, sstr, dbase, sbase)
        if spread:   # dims[a] lanes, the long rows along the last dimension
            do += i0
            so += i0 * c
            if c == 2:
                _spread(dst, do, ds, src, so, n, 2)
            elif c == 3:
                _spread(dst, do, ds, src, so, n, 3)
            elif c == 4:
                _spread(dst, do, ds, src, so, n, 4)
            elif c == 5:
                _spread(dst, do, ds, src, so, n, 5)
            elif c == 6:
                _spread(dst, do, ds, src, so, n, 6)
            elif c == 7:
                _spread(dst, do, ds, src, so, n, 7)
            else:
                _spread(dst, do, ds, src, so, n, 8)
            continue
        do += i0 * c
        so += i0
        if c == 2:
            _interleave(dst, do, src, so, ss, n, 2)
        elif c == 3:
            _interleave(dst, do, src, so, ss, n, 3)
        elif c == 4:
            _interleave(dst, do, src, so, ss, n, 4)
        elif c == 5:
            _interleave(dst, do, src, so, ss, n, 5)
        elif c == 6:
            _interleave(dst, do, src, so, ss, n, 6)
        elif c == 7:
            _interleave(dst, do, src, so, ss, n, 7)
        else:
            _interleave(dst, do, src, so, ss, n, 8)


#: a streaming copy (``CopyPlan.streams``) that reads and writes at most this many bytes runs
#: in the calling thread (``streamed``); None: measured at the first use (``_stream_limit``)
STREAM_THREADED_BYTES = None
#: the limit where one thread moves cached data as fast as two (the AMD EPYC below)
STREAM_CACHED_BYTES = 24 << 20


def _stream_limit():
    """``STREAM_CACHED_BYTES`` where one thread copies a cached 4 MiB at least as fast as two,
    else 0 (every streaming copy of ``MOVE_PARALLEL_THRESHOLD`` elements in threads).  On
    the AMD EPYC one thread copied 4 MiB at 64 GB/s (read + write) and two lost 5-15%; on
    the 2-core Xeon (Sapphire Rapids VM, L2 2 MiB a core) one thread moves about 26 GB/s
    and two pay from 256 KiB: a stride-2 slice of 16 MiB 1.16 -> 0.75 ms, concatenating
    three [64,128,64] 0.55 -> 0.44, JAX 1.02 and 0.56 (medians, interleaved).  The min of
    seven copies each way, interleaved (about 5 ms, once a process, in the main thread:
    another thread -- a kernel's worker, a widget's run -- gets the EPYC's limit without
    measuring)."""
    global STREAM_THREADED_BYTES
    if threading.current_thread() is not threading.main_thread():
        return STREAM_CACHED_BYTES
    if threads() <= 1:
        STREAM_THREADED_BYTES = STREAM_CACHED_BYTES
        return STREAM_THREADED_BYTES
    import time
    n = 1 << 20
    src = np.ones(n, np.uint32)
    dst = np.empty(n, np.uint32)
    fn, items, extra = copy_launch(plan_copy((n,), (1,), (1,), 4, threads()))
    one, two = [], []
    for _ in range(8):
        t = time.perf_counter()
        fn(0, items, dst, 0, src, 0, *extra)
        one.append(time.perf_counter() - t)
        t = time.perf_counter()
        in_threads(fn, items, True, dst, 0, src, 0, *extra)
        two.append(time.perf_counter() - t)
    # (the first of each: compiled or loaded, pages touched)
    STREAM_THREADED_BYTES = STREAM_CACHED_BYTES if min(one[1:]) <= min(two[1:]) else 0
    return STREAM_THREADED_BYTES


def streamed(nbytes):
    """Whether a kernel that streams ``nbytes`` (read and written together) at the copy's
    speed runs in one thread, whatever its element count.

    In the last-level cache one thread already moves data at the cache's speed, and a second
    one does not pay for its launch and wake-up.  Measured on the AMD EPYC (2 cores, min /
    median of 150 interleaved, load 1.4, the kernel alone): a 4 MiB f32 copy 0.130 / 0.133
    ms in one thread (64 GB/s read + write), 0.151 / 0.175 in two; a stride-2 slice of
    4 MiB 0.092 / 0.094 against 0.109 / 0.135; [128, 128, 64] -> [128, 128, 64] (rows of 64
    kept) 0.140 / 0.145 against 0.161 / 0.188; two threads lost by 5-15% up to 12 MiB
    copied (24 MiB moved).  Through the run (the benchmark's 4 MiB transpose of rows of
    64): two threads on the idle machine 0.249 ms, one thread at load 1.7 0.18-0.21.  Out of
    the cache (32 MiB: 64 MiB moved) two threads pay (that transposition 3.0 -> 1.8 ms,
    min, load 2.5).  Kernels whose per-thread work is slower than a copy (transposes of
    elements, element and column gathers) keep ``MOVE_PARALLEL_THRESHOLD`` alone.  Not so on
    every machine: the limit is measured (``_stream_limit``)."""
    limit = STREAM_THREADED_BYTES
    if limit is None:
        limit = _stream_limit()
    return nbytes <= limit


def copy_parallel(plan):
    """Whether ``plan`` runs in threads (``in_threads``)."""
    return plan.n >= MOVE_PARALLEL_THRESHOLD and not (plan.streams and streamed(plan.traffic))


def copy_launch(plan):
    """How ``run_copy`` runs ``plan``: (the range kernel, its work items, its arguments
    after ``dst, dbase, src, sbase``)."""
    if plan.lanes:
        a, chunk = plan.tile_dim, plan.chunk
        long = int(plan.dims[-1 if plan.spread else a])
        items = -(-long // chunk) * (plan.n // (long * plan.lanes))
        return _interleave_range, items, (plan.dims, plan.dstr, plan.sstr, a, chunk, plan.spread)
    if plan.tile:
        a, tile = plan.tile_dim, plan.tile
        items = -(-int(plan.dims[a]) // tile) * (plan.n // (int(plan.dims[a]) * int(plan.dims[-1])))
        return _tiles_range, items, (plan.dims, plan.dstr, plan.sstr, a, tile, plan.vb, plan.run)
    if plan.row_tile:
        a, tile, t = plan.tile_dim, plan.row_tile, plan.tiled
        items = -(-int(plan.dims[t]) // tile) * (plan.n // (int(plan.dims[a]) * int(plan.dims[-2]) * int(plan.dims[-1])))
        return _rowtiles_range, items, (plan.dims, plan.dstr, plan.sstr, a, tile, t, plan.nt)
    nch = -(-int(plan.dims[-1]) // plan.chunk)
    items = nch * (plan.n // int(plan.dims[-1]))
    return _rows_range, items, (plan.dims, plan.dstr, plan.sstr, plan.chunk, nch, plan.nt)


def run_copy(plan, dst, dbase, src, sbase):
    """Run a CopyPlan: ``dst`` and ``src`` are flat word arrays of one dtype.

    Large copies are shared by ``in_threads``, not by a ``prange`` loop: a ``prange``
    loop hands each thread its half up front and waits for the slowest, so on a machine
    whose other processes keep the cores busy, a 4 MiB transposition took 5-8 ms (median)
    in two threads and 1.5 ms in one; with ``in_threads`` the calling thread takes the
    parts a descheduled worker has not started."""
    fn, items, extra = copy_launch(plan)
    in_threads(fn, items, copy_parallel(plan), dst, dbase, src, sbase, *extra)


def strided_copy(dst, dbase, dst_strides, src, sbase, src_strides, dims):
    """``dst[dbase + i.dst_strides] = src[sbase + i.src_strides]`` for every index i of ``dims``."""
    if product(dims) == 0:
        return
    plan = plan_copy(tuple(dims), tuple(dst_strides), tuple(src_strides), dst.dtype.itemsize, threads())
    run_copy(plan, dst, dbase, src, sbase)


def gathered_copy(operand, shape, src_base, src_strides):
    """A result of ``shape`` whose element at index i is operand[src_base + i.src_strides]
    (strides in elements of the row-major operand): transpose, reverse, slice."""
    n = shape.numel
    out = new_words(shape, n)
    if n:
        strided_copy(out, 0, row_major_strides(shape.dims), words(operand), src_base, src_strides, shape.dims)
    return as_result(out, shape)


# -- prepared kernels -----------------------------------------------------------------------
#
# A run plan (``numba_executor._Program``) calls a kernel's ``prepare`` hook once per step,
# with the operands' static shapes and the attributes: what every run of the kernel would
# compute again in Python (strides, the copy plan, work items, word types) is decided
# there, and the step then calls the returned function of the operand values.  For copies
# that run in the calling thread (fewer than MOVE_PARALLEL_THRESHOLD elements) the Python
# set-up was most of the run (a 256 KiB slice: 12 us, its loop 4 us); a larger one is
# prepared too (``threaded_copy``: a plan per thread count).  The prepared function checks
# that each operand is a C-contiguous array of the static dims and dtype, and otherwise
# calls the kernel.

def serial_copy(plan):
    """``run_copy(plan, dst, dbase, src, sbase)`` in the calling thread, as a function of
    those four, its walk and work-item count decided once."""
    fn, items, extra = copy_launch(plan)
    return lambda dst, dbase, src, sbase: fn(0, items, dst, dbase, src, sbase, *extra)


def threaded_copy(dims, dst_strides, src_strides, itemsize):
    """``strided_copy`` of a large loop nest (``MOVE_PARALLEL_THRESHOLD`` elements or more)
    as a function of ``dst, dbase, src, sbase``, shared by ``in_threads``: the copy plan
    and its launch decided once per thread count (the run's: ``numba_setup.enter_run``
    takes one thread on a busy machine), not per call (plan_copy's cache key and the
    launch's arithmetic: 20-25 us of a 4 MiB stride-2 slice's 160, one thread, load 4)."""
    launches = {}   # (thread count, the source writeable: its Numba type) -> launch, in threads

    def copy(dst, dbase, src, sbase):
        key = (threads(), src.flags.writeable)
        got = launches.get(key)
        if got is None:   # (the first call of its kind: in_threads compiles fn first)
            plan = plan_copy(dims, dst_strides, src_strides, itemsize, key[0])
            fn, items, extra, parallel = launches[key] = (*copy_launch(plan), copy_parallel(plan))
            in_threads(fn, items, parallel, dst, dbase, src, sbase, *extra)
            return
        fn, items, extra, parallel = got
        if parallel:
            in_threads(fn, items, True, dst, dbase, src, sbase, *extra, compiled=True)
        else:   # (a streaming copy in the cache: the calling thread, ``streamed``)
            fn(0, items, dst, dbase, src, sbase, *extra)
    return copy


def serial(shape):
    """Whether a result of ``shape`` is moved in the calling thread by a word kernel (the
    prepared paths' condition)."""
    return (shape.is_array and shape.is_static and 0 < shape.numel < MOVE_PARALLEL_THRESHOLD
            and np.dtype(shape.dtype).itemsize in _WORDS and not np.dtype(shape.dtype).hasobject)


#: a prepared kernel's result: ``ndarray(dims, dtype, out)`` sees its flat word buffer with
#: the result's dims and dtype in one call (``out.view(dtype).reshape(dims)`` made two
#: arrays: 0.46 -> 0.25 us a step)
ndarray = np.ndarray


def word_reader(operand_shape):
    """A function of an operand value: its flat words when it is a C-contiguous array of
    ``operand_shape``'s dims and dtype, else None (the caller then runs the kernel)."""
    dims, dtype = tuple(operand_shape.dims), np.dtype(operand_shape.dtype)
    word = word_dtype(dtype)
    ndarray, frombuffer = np.ndarray, np.frombuffer

    def read(x):
        # (frombuffer: the flat words of the C-contiguous array, writeable as it is, in one
        # call; reshape(-1).view(word) made two arrays: 0.76 -> 0.43 us a read)
        if type(x) is ndarray and x.dtype == dtype and x.shape == dims and x.flags.c_contiguous:
            return frombuffer(x, word)
        return None
    return read


def large(shape):
    """Whether a result of ``shape`` is moved by a word kernel in threads (``threaded_copy``)."""
    return (shape.is_array and shape.is_static and shape.numel >= MOVE_PARALLEL_THRESHOLD
            and np.dtype(shape.dtype).itemsize in _WORDS and not np.dtype(shape.dtype).hasobject)


def prepared_gathered_copy(operand_shape, shape, src_base, src_strides, kernel):
    """``gathered_copy`` prepared (see above), or None; ``kernel``: the general path.
    ``src_base`` None: a base known per run (a dynamic-slice's), the function's second
    argument, its other arguments ``kernel``'s after the operand."""
    if not (serial(shape) or large(shape)) or np.dtype(operand_shape.dtype).itemsize != np.dtype(shape.dtype).itemsize:
        return None
    word = word_dtype(shape.dtype)
    nbytes, dtype, dims = shape.numel * word.itemsize, shape.dtype, shape.dims
    if serial(shape):
        copy = serial_copy(plan_copy(tuple(dims), row_major_strides(dims), tuple(src_strides), word.itemsize,
                                     threads()))
    else:
        copy = threaded_copy(tuple(dims), row_major_strides(dims), tuple(src_strides), word.itemsize)
    read = word_reader(operand_shape)
    take = POOL.take
    # a result the pool does not keep: NumPy's words at once (take's bytes seen as words
    # made two arrays: 0.66 -> 0.18 us of a small transpose's 3)
    small, numel, empty = nbytes < BufferPool.MIN_BYTES, shape.numel, np.empty

    if src_base is None:
        def run_at(operand, base, *rest):
            src = read(operand)
            if src is None:
                return kernel(operand, *rest)
            out = empty(numel, word) if small else take(nbytes).view(word)
            copy(out, 0, src, base)
            return ndarray(dims, dtype, out)
        return run_at

    def run(operand):
        src = read(operand)
        if src is None:
            return kernel(operand)
        out = empty(numel, word) if small else take(nbytes).view(word)
        copy(out, 0, src, src_base)
        return ndarray(dims, dtype, out)
    return run


# -- the kernels ------------------------------------------------------------------------------

@kernel("transpose")
def transpose(operand, *, shape, permutation):
    # result index i reads operand_index with operand_index[permutation[d]] = i[d]:
    # the result's stride along d is the operand's stride along permutation[d]
    strides = row_major_strides(operand.shape)
    return gathered_copy(operand, shape, 0, tuple(strides[p] for p in permutation))


def _transpose_prepare(operand_shapes, *, shape, permutation):
    strides = row_major_strides(operand_shapes[0].dims)
    return prepared_gathered_copy(operand_shapes[0], shape, 0, tuple(strides[p] for p in permutation),
                                  lambda x: transpose(x, shape=shape, permutation=permutation))


transpose.prepare = _transpose_prepare


@kernel("reverse")
def reverse(operand, *, shape, dimensions):
    # in a reversed dimension of size N the result's index i reads N - 1 - i: start at the
    # end and walk back
    strides = list(row_major_strides(operand.shape))
    base = 0
    for d in set(dimensions):
        if operand.shape[d] > 0:
            base += (operand.shape[d] - 1) * strides[d]
        strides[d] = -strides[d]
    return gathered_copy(operand, shape, base, tuple(strides))


def _reverse_prepare(operand_shapes, *, shape, dimensions):
    dims = operand_shapes[0].dims
    strides = list(row_major_strides(dims))
    base = 0
    for d in set(dimensions):
        if dims[d] > 0:
            base += (dims[d] - 1) * strides[d]
        strides[d] = -strides[d]
    return prepared_gathered_copy(operand_shapes[0], shape, base, tuple(strides),
                                  lambda x: reverse(x, shape=shape, dimensions=dimensions))


reverse.prepare = _reverse_prepare


@kernel("concatenate")
def concatenate(*operands, shape, dimension):
    # operand k fills, in every row of the dimensions before `dimension`, the run that
    # starts after the runs of operands 0..k-1: one copy plan per operand, all of them
    # run as the work items of one launch (one wait for the threads, not one per operand)
    out = new_words(shape)
    outer = product(shape.dims[:dimension])
    row = product(shape.dims[dimension:])
    inner = product(shape.dims[dimension + 1:])
    pieces = []   # (first work item, items, plan, where in out, the operand's words)
    offset = items = 0
    for x in operands:
        run = product(x.shape[dimension:])
        if run and outer:
            plan = plan_copy((outer, run), (row, 1), (run, 1), out.dtype.itemsize, threads())
            nch = -(-int(plan.dims[-1]) // plan.chunk)
            k = nch * (plan.n // int(plan.dims[-1]))
            pieces.append((items, k, plan, nch, offset * inner, words(x)))
            items += k
        offset += x.shape[dimension]
    if len(pieces) == 1:
        _, _, plan, _, dbase, src = pieces[0]
        run_copy(plan, out, dbase, src, 0)
    elif pieces:
        for _, _, plan, nch, dbase, src in pieces:   # compiled (loaded) before threads call it
            _rows_range(0, 0, out, dbase, src, 0, plan.dims, plan.dstr, plan.sstr, plan.chunk, nch, plan.nt)

        def part(lo, hi):
            for first, k, plan, nch, dbase, src in pieces:
                a, b = max(lo, first), min(hi, first + k)
                if a < b:
                    _rows_range(a - first, b - first, out, dbase, src, 0, plan.dims, plan.dstr, plan.sstr,
                                plan.chunk, nch, plan.nt)

        in_threads(part, items, shape.numel >= MOVE_PARALLEL_THRESHOLD
                   and not streamed(2 * shape.numel * out.dtype.itemsize))
    return as_result(out, shape)


def _read_only(a):
    """A read-only view of ``a``: the operands a kernel takes as one tuple then have one
    Numba type, whichever of them the caller can write (a tuple of a read-only and a
    writeable array is heterogeneous: a loop over it does not compile)."""
    v = a.view()
    v.flags.writeable = False
    return v


def _one_type(srcs):
    """The flat operands ``srcs`` (a tuple) as one Numba type: as they are when all are
    writeable or none is, else every one a read-only view (``_read_only``).  The views
    cost 0.6 us each and a read-only array's dispatch 0.8 us more: of an 8x8 concatenate's
    6.8 us step, 2.9 (load 5)."""
    w = [s.flags.writeable for s in srcs]
    if all(w) or not any(w):
        return srcs
    return tuple([_read_only(s) for s in srcs])


def _concatenate_prepare(operand_shapes, *, shape, dimension):
    """The concatenate prepared for a run plan: below ``MOVE_PARALLEL_THRESHOLD`` every row
    of the result in one call (``_concat_rows``) or one serial copy per operand; above it
    every row's runs as the work items of one ``in_threads`` launch (``_concat_range``,
    runs cut into pieces where the rows are too few to share), decided per thread count; in
    the calling thread while what it reads and writes stays in the cache (``streamed``)."""
    if not (serial(shape) or large(shape)) or any(np.dtype(s.dtype) != np.dtype(shape.dtype)
                                                  for s in operand_shapes):
        return None
    word = word_dtype(shape.dtype)
    nbytes, dtype, dims = shape.numel * word.itemsize, shape.dtype, shape.dims
    outer = product(dims[:dimension])
    row = product(dims[dimension:])
    inner = product(dims[dimension + 1:])
    reads = [word_reader(s) for s in operand_shapes]
    take = POOL.take
    runs = np.array([product(s.dims[dimension:]) for s in operand_shapes], np.int64)
    offsets = np.array([sum(s.dims[dimension] for s in operand_shapes[:k]) * inner
                        for k in range(len(operand_shapes))], np.int64)
    if large(shape):
        if not (1 < len(operand_shapes) <= _CONCAT_ROWS_MAX and outer):
            return None
        launches = {}   # thread count -> (work items, chunk, pieces of each run)
        # (rows copied: in the calling thread while they stream in the cache, ``streamed``)
        parallel = not streamed(2 * nbytes)

        def launch(k):
            # whole runs when the rows are enough to share, else runs cut into pieces of
            # at least 4096 elements, about 4 a thread
            chunk = max(1, int(runs.max()))
            if outer < 4 * k:
                chunk = max(4096, -(-row // (4 * k)))
            nch = np.array([-(-int(r) // chunk) for r in runs], np.int64)
            got = launches[k] = (outer * int(nch.sum()), chunk, nch)
            return got

        def run_large(*operands):
            srcs = tuple([read(x) for read, x in zip(reads, operands)])
            if any(s is None for s in srcs):
                return concatenate(*operands, shape=shape, dimension=dimension)
            srcs = _one_type(srcs)
            out = take(nbytes).view(word)
            k = threads()
            got = launches.get(k)
            if got is None:   # (the first call for this count: in_threads compiles first)
                items, chunk, nch = launch(k)
                in_threads(_concat_range, items, parallel, out, srcs, runs, offsets, row, chunk, nch)
            else:
                items, chunk, nch = got
                if parallel:
                    in_threads(_concat_range, items, True, out, srcs, runs, offsets, row, chunk, nch, compiled=True)
                else:
                    _concat_range(0, items, out, srcs, runs, offsets, row, chunk, nch)
            return ndarray(dims, dtype, out)
        return run_large
    pieces = []   # (operand index, where in out, the serial copy): as the kernel's pieces
    offset = 0
    for k, s in enumerate(operand_shapes):
        run = product(s.dims[dimension:])
        if run and outer:
            plan = plan_copy((outer, run), (row, 1), (run, 1), word.itemsize, threads())
            pieces.append((k, offset * inner, serial_copy(plan)))
        offset += s.dims[dimension]
    if 1 < len(operand_shapes) <= _CONCAT_ROWS_MAX and outer:
        # every row of the result in one call, its operands' runs in turn: the result
        # written in order, one dispatch (a 2 x 128 KiB concatenate: 15.9 us in two copy
        # plans' calls, 9.1 us their plain row copies)

        def run_rows(*operands):
            srcs = tuple([read(x) for read, x in zip(reads, operands)])
            if any(s is None for s in srcs):
                return concatenate(*operands, shape=shape, dimension=dimension)
            out = take(nbytes).view(word)
            _concat_rows(out, _one_type(srcs), runs, offsets, outer, row)
            return ndarray(dims, dtype, out)
        return run_rows

    def run(*operands):
        srcs = [read(x) for read, x in zip(reads, operands)]
        if any(s is None for s in srcs):
            return concatenate(*operands, shape=shape, dimension=dimension)
        out = take(nbytes).view(word)
        for k, dbase, copy in pieces:
            copy(out, dbase, srcs[k], 0)
        return ndarray(dims, dtype, out)
    return run


#: the most operands a prepared concatenate copies in one call (a tuple of arrays: Numba
#: compiles a version per count)
_CONCAT_ROWS_MAX = 8


@njit(**_opts)
def _concat_rows(out, srcs, runs, offsets, outer, row):
    """Rows [0, outer) of a concatenate's result (``row`` elements each): operand k's run
    of ``runs[k]`` elements of that row at ``offsets[k]``."""
    for o in range(outer):
        ob = o * row
        for k in range(len(srcs)):
            n = runs[k]
            if n > 0:
                _copy_run(out, ob + offsets[k], 1, srcs[k], o * n, 1, 0, n)


@njit(**_opts)
def _concat_range(w0, w1, out, srcs, runs, offsets, row, chunk, nch):
    """Work items [w0, w1) of a concatenate's result, in the result's order: per row of
    ``row`` elements, operand k's run of ``runs[k]`` elements in ``nch[k]`` pieces of
    ``chunk``."""
    per = 0
    for k in range(len(srcs)):
        per += nch[k]
    for w in range(w0, w1):
        o = w // per
        c = w - o * per
        k = 0
        while c >= nch[k]:
            c -= nch[k]
            k += 1
        n = runs[k]
        j0 = c * chunk
        _copy_run(out, o * row + offsets[k], 1, srcs[k], o * n, 1, j0, min(n, j0 + chunk))


concatenate.prepare = _concatenate_prepare


@kernel("copy")
def copy(operand, *, shape):
    if isinstance(operand, tuple):
        return tuple(copy(v, shape=s) for v, s in zip(operand, shape.tuple_shapes))
    return as_result(copy_words(operand), shape)


@kernel("reshape", note="view (no copy)")
def reshape(operand, *, shape, new_sizes):
    # row-major: a reshape of a contiguous array is the same buffer seen with other sizes
    return np.reshape(np.ascontiguousarray(operand), shape.dims)


def _view_prepare(kernel):
    """A run plan's ``prepare`` hook for a kernel that returns its operand's elements seen
    with other dims (reshape, a same-dtype bitcast): the C-contiguous operand of the static
    dtype viewed with the result's dims, without the kernel call's Python steps; the kernel
    itself for any other operand."""
    def prepare(operand_shapes, *, shape, **attrs):
        xs = operand_shapes[0]
        if not (shape.is_array and shape.is_static) or np.dtype(xs.dtype) != np.dtype(shape.dtype) \
                or xs.numel != shape.numel:
            return None
        dims, dtype = tuple(shape.dims), np.dtype(shape.dtype)

        def run(operand):
            if type(operand) is np.ndarray and operand.dtype == dtype and operand.flags.c_contiguous:
                return operand.reshape(dims)
            return kernel(operand, shape=shape, **attrs)
        return run
    return prepare


reshape.prepare = _view_prepare(reshape)


@kernel("bitcast", note="view (no copy)")
def bitcast(operand, *, shape):
    from ...ops.shape import bitcast_view
    return bitcast_view(operand, shape)


bitcast.prepare = _view_prepare(bitcast)   # a same-dtype one (another dtype: the kernel's view)


@kernel("dynamic-reshape", note="view (no copy)")
def dynamic_reshape(operand, *dim_sizes, shape):
    from ...ops.shape import dynamic_reshape_sizes
    return np.reshape(np.ascontiguousarray(operand), dynamic_reshape_sizes(operand, dim_sizes, shape))
