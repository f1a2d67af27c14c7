"""CPU kernels of the linalg family: Dot, Convolution, Fft, Cholesky, TriangularSolve,
the batch norms.

Where XLA:CPU itself calls a library (Eigen / oneDNN matrix products, ducc FFT), these
kernels call NumPy's: a float DotGeneral becomes one batched matrix product
``[B, M, K] @ [B, K, N]`` (the operands transposed so that batch, free and contracting
dimensions are grouped), run by BLAS through ``np.matmul``; a convolution becomes an
im2col (a Numba kernel gathering every window into a row, padding and dilation holes as
zeros) and a BLAS product with the kernel as a ``[window * in_features, out_features]``
matrix, group by group, block of rows by block of rows (each block still in cache when
multiplied).  The 3x3 stride-1 convolutions of CNNs take Winograd's F(2x2, 3x3) instead
(2.25x fewer multiplications); with at most 4 in features (an image's channels) its
products are fused multiply-adds of our own, block by block in the cache, where this
process's BLAS computes such short products with exactly those bits (checked once per
shape of product: ``_fma_chain_matches``), else BLAS's.  A transposed convolution (lhs
dilation above 1) runs polyphase: one im2col + BLAS per residue class of its outputs
modulo the dilation, over the kernel taps that meet real input elements only.  Integer dots and convolutions
(s8 x s8 -> s32) run a Numba loop that accumulates in 64-bit integers, which wraps to the
same bits as accumulating in the result type, exactly as the reference.  FFT is
``numpy.fft``; Cholesky and TriangularSolve are Numba loops (Cholesky-Crout,
substitution) as the references write them; the batch norms are Numba passes over
``[rows, features, columns]`` in float64.

Floats: BLAS accumulates f32 products in f32 (the reference in f64, rounding once), so
results differ in the last bits, within the corpus' accumulation tolerance; bf16 and f16
operands are widened to f32 first (their products are exact there) and the result is
rounded once, as XLA:CPU does.

Denormals (``fpenv`` "flush"): the dot flushes its marked operands itself
(``flushes_operands``): a large one is scanned by one thread while the product runs on it
as it is, in the same launch of the threads (``_flushed_dot``); only when the scan finds a
denormal is the product computed again, from the flushed operand -- the same bits as
flushing first.  A float matrix-vector product (one operand a vector, no batch) is not
BLAS's: ``_matvec`` reads the matrix once in a loop of our own, four rows a pass over the
vector, with the hardware's flush-to-zero and denormals-are-zero set for its duration on
x86 (XLA:CPU's own mode: denormal operands, products and sums are zeros), where BLAS and a
scan read the memory-bound matrix twice.
"""
import functools
import itertools
import math
import platform
import threading

import numpy as np
from numba.extending import intrinsic

from ... import dtypes, fpenv
from ...ops import linalg as spec
from ...shapes import Shape
from ..numba_setup import PARALLEL_THRESHOLD, numba, split_threads
from . import kernel
from .elementwise import _MASKS, _any_denormal_part, has_nonfinite
from .reduction import _window_geometry, flush_in_run, known_clean, note_clean
from .shape import contiguous, empty, in_threads, threads

nb = numba()
njit, prange = nb.njit, nb.prange
_opts = dict(cache=True, nogil=True, error_model="numpy")


# ---------------------------------------------------------------------------------------
# BLAS through np.matmul, one BLAS thread per worker thread of ours
#
# OpenBLAS's own threads spin-wait for work: on this project's 2-core machines, with any
# other process busy, a 64 x 256x256x256 batched product took 1-2 s with OpenBLAS's two
# threads and 20 ms with one.  So the kernels switch OpenBLAS to one thread for their
# call (and back after), and split a big product over the kernels' worker threads
# (``shape.in_threads``; np.matmul releases the GIL), each running single-threaded BLAS on
# its part.

_blas = None


def openblas_paths():
    """The OpenBLAS libraries this process has loaded (Linux's /proc/self/maps), sorted by
    path; OSError elsewhere."""
    with open("/proc/self/maps") as f:
        return sorted({line.split()[-1] for line in f if "openblas" in line.lower() and ".so" in line})


def _openblas_threads():
    """(set, get) of the OpenBLAS NumPy is linked with, or None (another BLAS)."""
    global _blas
    if _blas is None:
        _blas = ()
        try:
            import ctypes
            for path in openblas_paths():
                lib = ctypes.CDLL(path)
                for name in ("scipy_openblas{}64_", "openblas{}64_", "scipy_openblas{}", "openblas{}"):
                    setter = getattr(lib, name.format("_set_num_threads"), None)
                    getter = getattr(lib, name.format("_get_num_threads"), None)
                    if setter is not None and getter is not None:
                        getter.restype = ctypes.c_int
                        _blas = (setter, getter)
                        break
                if _blas:
                    break
        except (OSError, AttributeError):  # not Linux, or no OpenBLAS: leave BLAS alone
            _blas = ()
    return _blas or None


_blas_lock = threading.Lock()
_blas_users = 0
_blas_before = None


def _blas_enter():
    """OpenBLAS to one thread while any kernel of ours multiplies (threads of an SPMD
    simulation may be in several at once: the first sets, the last restores)."""
    global _blas_users, _blas_before
    blas = _openblas_threads()
    if blas is None:
        return
    with _blas_lock:
        if _blas_users == 0:
            _blas_before = blas[1]()
            blas[0](1)
        _blas_users += 1


def _blas_leave():
    global _blas_users
    blas = _openblas_threads()
    if blas is None:
        return
    with _blas_lock:
        _blas_users -= 1
        if _blas_users == 0:
            blas[0](_blas_before)


#: a product of at least this many multiply-adds is split over the worker threads
_SPLIT_WORK = 1 << 22


def _blocks_part(lo, hi, work, starts, scratch):
    if hi > lo:
        buf = scratch()
        for i in range(lo, hi):
            work(starts[i], buf)


def in_blocks(work, starts, scratch, size, split_from=None):
    """``work(start, buffer)`` for every start, spread over the threads (``shape.in_threads``:
    the caller takes the parts a worker has not started; each part its own scratch buffer)
    when ``size`` is at least ``split_from`` (default _SPLIT_WORK), BLAS single-threaded
    meanwhile.  The blocks are cut by the caller (by size), so the threads change nothing
    of the results."""
    split_from = _SPLIT_WORK if split_from is None else split_from
    _blas_enter()
    try:
        in_threads(_blocks_part, len(starts), size >= split_from and len(starts) > 1, work, starts, scratch)
    finally:
        _blas_leave()


#: a batched product is shared by the threads batch by batch from this many multiply-adds
#: on (below: one np.matmul, which runs the same one BLAS call per matrix, so the same bits).
#: A worker's start and its cold caches cost more than half a small product saves: 16
#: products of 64x64x64 (4.2M multiply-adds) took 198 us a run shared, 166 us in one
#: thread (best of 3000, load 5.8)
_BATCH_SPLIT_WORK = 1 << 24

#: a big product split by rows is cut into this many parts whatever the thread count: a
#: cut changes BLAS's blocking and so the bits (not a batch split: one BLAS call per
#: matrix either way), so one thread (a busy machine) runs the same parts in turn
_ROW_PARTS = 2


def _matmul_batches(lo, hi, a, w, out):
    if hi > lo:
        np.matmul(a[lo:hi], w[lo:hi], out=out[lo:hi])


def _matmul_rows(lo, hi, a, w, out, step):
    for p in range(lo, hi):
        np.matmul(a[..., p * step:(p + 1) * step, :], w, out=out[..., p * step:(p + 1) * step, :])


def _product_or_scan(lo, hi, tasks, nprod, found):
    """``in_threads`` part of ``matmul`` with scans: tasks[:nprod] products (a, w, out), the
    rest denormal scans (bits, exponent, mantissa) setting found[0]."""
    for i in range(lo, hi):
        t = tasks[i]
        if i < nprod:
            np.matmul(t[0], t[1], out=t[2])
        else:
            _any_denormal_part(0, t[0].size, t[0], t[1], t[2], found)


def matmul(a, w, out, scan=None):
    """out[b...] = a[b...] @ w[b...] (arrays [batch..., M, K] and [batch..., K, N], any
    strides BLAS takes: see ``blas_operand``; w's batch dimensions may be 1), BLAS
    single-threaded in each thread.  A product of _SPLIT_WORK multiply-adds or more is
    shared by the threads (``shape.in_threads``: the caller takes the parts a worker has
    not started), by its first batch dimension (from _BATCH_SPLIT_WORK on), else by rows
    in _ROW_PARTS parts.  ``scan`` (a ``_Scans``): its denormal scans run by the threads
    in the same launch as the product's parts (cut as without it: the same bits)."""
    M, K = a.shape[-2:]
    N = w.shape[-1]
    B = math.prod(a.shape[:-2])
    work = B * M * K * N
    by_batch = a.ndim > 2 and a.shape[0] > 1 and w.shape[0] == a.shape[0]
    _blas_enter()
    try:
        if scan is not None and not scan.done:
            if work < _SPLIT_WORK or by_batch and work < _BATCH_SPLIT_WORK:
                prod = [(a, w, out)]
            elif by_batch:   # (one BLAS call per matrix however the batches are cut)
                per = -(-a.shape[0] // 4)
                prod = [(a[i:i + per], w[i:i + per], out[i:i + per]) for i in range(0, a.shape[0], per)]
            else:
                step = -(-M // _ROW_PARTS)
                prod = [(a[..., i:i + step, :], w, out[..., i:i + step, :]) for i in range(0, M, step)]
            tasks = prod + scan.parts
            in_threads(_product_or_scan, len(tasks), True, tasks, len(prod), scan.found)
            scan.done = True
            return out
        # (the row cut is the bits' and stays _SPLIT_WORK's; a batch split is not)
        if work < _SPLIT_WORK or by_batch and work < _BATCH_SPLIT_WORK:
            np.matmul(a, w, out=out)
        elif by_batch:
            in_threads(_matmul_batches, a.shape[0], True, a, w, out)
        else:
            step = -(-M // _ROW_PARTS)
            in_threads(_matmul_rows, -(-M // step), True, a, w, out, step)
        return out
    finally:
        _blas_leave()


#: an operand to flush of at least this many bytes is scanned for denormals by one thread
#: while the other computes the product on it as it is (the product is computed again,
#: from the flushed operand, in the rare case the scan finds one): the scan of a 16 MiB
#: matrix cost more than the matrix-vector product itself
_CONCURRENT_SCAN_BYTES = 1 << 22


class _Scans:
    """The denormal scans of the operands ``arrays`` (C-contiguous, of a flushed type), cut
    in parts for ``matmul``'s threads; ``found[0]`` set by a part that finds one."""

    __slots__ = ("arrays", "parts", "found", "done")

    def __init__(self, arrays):
        self.arrays, self.parts, self.done = arrays, [], False
        self.found = np.zeros(1, np.uint8)
        for x in arrays:
            word, exponent, mantissa, _ = _MASKS[fpenv._type_name(x)]
            bits = x.reshape(-1).view(word)
            per = -(-bits.size // (2 if x.nbytes >= 2 * _CONCURRENT_SCAN_BYTES else 1))
            self.parts.extend((bits[i:i + per], word(exponent), word(mantissa)) for i in range(0, bits.size, per))

    def clean(self):
        """Whether no operand holds a denormal (the scans a product did not run, run here);
        clean operands are remembered as ``flush_in_run``'s."""
        if not self.done:
            for bits, exponent, mantissa in self.parts:
                _any_denormal_part(0, bits.size, bits, exponent, mantissa, self.found)
            self.done = True
        if self.found[0]:
            return False
        for x in self.arrays:
            note_clean(x)
        return True


def _deferred_flush(values, flush):
    """The operands ``flush`` marks flushed (``flush_in_run``), except the large ones, left
    as they are for a ``_Scans`` (returned, or None) run with the product."""
    out, deferred = [], []
    for x, m in zip(values, flush):
        if m:
            if type(x) is np.ndarray and x.nbytes >= _CONCURRENT_SCAN_BYTES and x.flags.c_contiguous \
                    and fpenv._type_name(x) in _MASKS and threads() > 1 and not known_clean(x):
                deferred.append(x)
            else:
                x = flush_in_run(x)
        out.append(x)
    return out, (_Scans(deferred) if deferred else None)


def _flushed_dot(product, values, flush):
    """``product(*values, scan)`` of the operands ``flush`` marks flushed of denormals: the
    large ones scanned while it runs, the product computed again from them flushed when a
    scan finds a denormal (so the result is always the flushed operands' product)."""
    values, scan = _deferred_flush(values, flush)
    if scan is None:
        return product(*values, None)
    out = product(*values, scan)
    if scan.clean():
        return out
    return product(*(flush_in_run(x) if any(x is d for d in scan.arrays) else x for x in values), None)


# ---------------------------------------------------------------------------------------
# Matrix-vector products: one pass over the matrix, its denormals flushed as it is read

#: a float matrix-vector product of at least this many multiply-adds runs ``_matvec_rows``
#: instead of BLAS: memory-bound, it reads the matrix once, where BLAS beside a denormal
#: scan read it twice (a 16 MiB [2048, 2048] @ [2048] took 2.5 ms, JAX 1.5)
_MATVEC_MIN = 1 << 15
#: ... and is shared by the threads (by rows; the columns' ``_vecmat_cols`` always runs in
#: one: cut in column blocks it ran 1.5x slower in two) from this many on (each row one
#: thread's: the bits do not depend on the cut).  Measured, median us in two threads / one:
#: 2048 x 2048 560 / 819, 4096 x 1024 700 / 808, 512 x 512 53 / 26
_MATVEC_PARALLEL = 1 << 20


#: MXCSR's flush-to-zero and denormals-are-zero bits (x86): XLA:CPU's own float mode
#: MXCSR's denormals-are-zero bit alone (the fused loops' DAZ mode, ``cpu.fused``: results
#: IEEE's, flushed by the loops' own code)
_DAZ = 0x40
_FTZ_DAZ = 0x8000 | _DAZ
_X86 = platform.machine().lower() in ("x86_64", "amd64", "x86", "i386", "i686")
#: the smallest normal of the matrix-vector kernels' types (np.finfo costs a microsecond a call)
_TINY = {np.dtype(t): t(np.finfo(t).tiny) for t in (np.float32, np.float64)}


def _mxcsr_intrinsic(store_old):
    """An intrinsic that ors its argument into MXCSR and returns the old value
    (``store_old``), or that loads its argument into MXCSR; on machines without MXCSR it
    does nothing (returns 0): the kernels then flush by a select (``_matvec_rows``)."""
    from llvmlite import ir

    def typer(typingctx, bits):
        if not isinstance(bits, nb.types.Integer):
            return None

        def codegen(context, builder, signature, args):
            i32, i8p = ir.IntType(32), ir.IntType(8).as_pointer()
            value = builder.trunc(args[0], i32) if args[0].type.width > 32 else builder.zext(args[0], i32)
            if not _X86:
                return ir.Constant(ir.IntType(64), 0) if store_old else context.get_dummy_value()
            fnty = ir.FunctionType(ir.VoidType(), [i8p])
            load = builder.module.declare_intrinsic("llvm.x86.sse.ldmxcsr", fnty=fnty)
            slot = builder.alloca(i32)
            if store_old:
                save = builder.module.declare_intrinsic("llvm.x86.sse.stmxcsr", fnty=fnty)
                builder.call(save, [builder.bitcast(slot, i8p)])
                old = builder.load(slot)
                value = builder.or_(old, value)
            builder.store(value, slot)
            builder.call(load, [builder.bitcast(slot, i8p)])
            return builder.zext(old, ir.IntType(64)) if store_old else context.get_dummy_value()
        return (nb.types.int64 if store_old else nb.types.none)(bits), codegen
    typer.__name__ = "_mxcsr_or" if store_old else "_mxcsr_load"
    return intrinsic(typer)


_mxcsr_or = _mxcsr_intrinsic(True)
_mxcsr_load = _mxcsr_intrinsic(False)


@njit(fastmath={"reassoc", "contract"}, **_opts)
def _matvec_rows(lo, hi, a, v, out, tiny, select, mxcsr):
    """out[m] = sum_k a[m, k] * v[k] for the rows of groups [lo, hi) of the C-contiguous
    a[M, K] (group g: rows 4g .. 4g + 3, four sums a pass over v; the last group's rows one
    by one), summed in a's type in LLVM's vector lanes (``reassoc``: each row's order fixed
    by K and its group alone, not by the threads' cut).  Denormals: with ``mxcsr`` (x86:
    _FTZ_DAZ) the hardware reads them as zeros and flushes denormal results, as XLA:CPU
    runs; ``select`` (elsewhere) reads a's as zeros of their sign (``x * 0``: a NaN stays)."""
    old = _mxcsr_or(mxcsr)
    M, K = a.shape
    for g in range(lo, hi):
        m = 4 * g
        if m + 4 <= M and not select:
            r0, r1, r2, r3 = a[m], a[m + 1], a[m + 2], a[m + 3]
            s0 = s1 = s2 = s3 = tiny - tiny   # (zeros of a's type)
            for k in range(K):
                x = v[k]
                s0 += r0[k] * x
                s1 += r1[k] * x
                s2 += r2[k] * x
                s3 += r3[k] * x
            out[m], out[m + 1], out[m + 2], out[m + 3] = s0, s1, s2, s3
            continue
        for r in range(m, min(M, m + 4)):
            row = a[r]
            s = tiny - tiny
            if select:
                for k in range(K):
                    x = row[k]
                    x = x if abs(x) >= tiny else x * 0
                    s += x * v[k]
            else:
                for k in range(K):
                    s += row[k] * v[k]
            out[r] = s
    _mxcsr_load(old)


@njit(**_opts)
def _vecmat_cols(lo, hi, w, v, out, tiny, select, mxcsr):
    """out[n] = sum_k v[k] * w[k, n] for columns [lo, hi) of the C-contiguous w[K, N]: the
    rows of w added in k's order into the columns (vectorised along them; each column's
    order fixed by k alone).  ``select``, ``mxcsr``: as ``_matvec_rows``."""
    old = _mxcsr_or(mxcsr)
    K = w.shape[0]
    o = out[lo:hi]
    for n in range(hi - lo):
        o[n] = tiny - tiny
    for k in range(K):
        s = v[k]
        row = w[k, lo:hi]
        if select:
            for n in range(hi - lo):
                x = row[n]
                x = x if abs(x) >= tiny else x * 0
                o[n] += s * x
        else:
            for n in range(hi - lo):
                o[n] += s * row[n]
    _mxcsr_load(old)


def _matvec_side(ldims, rdims, lc, rc, lb, rb, t, lt, rt, out_permutation):
    """(which operand, 0: lhs or 1: rhs, is the matrix; whether it is contracted along its
    first dimension) of a matrix-vector product ``_matvec`` computes -- a rank-2 operand
    contracted along one dimension, the other a vector, no batch dimensions, all of one
    real float type (f32, f64), at least _MATVEC_MIN multiply-adds -- or None."""
    if t not in ("f32", "f64") or lt != t or rt != t or lb or rb or out_permutation not in (None, (0,)):
        return None
    for side, (md, vd, mc, vc) in enumerate(((ldims, rdims, lc, rc), (rdims, ldims, rc, lc))):
        # (a vector: rank 1, or rank 2 with a free dimension of 1: [1, K] @ [K, N])
        if len(md) == 2 and len(vd) in (1, 2) and len(vc) == 1 and math.prod(vd) == vd[vc[0]] \
                and tuple(mc) in ((0,), (1,)) and md[mc[0]] == vd[vc[0]] \
                and md[0] * md[1] >= _MATVEC_MIN and md[1 - mc[0]] > 1:
            return side, mc[0] == 0
    return None


def _matvec(matrix, vector, flush_matrix, flush_vector, by_columns=False):
    """[M, K] @ [K] -> [M] (``by_columns``: [K] @ [K, N] -> [N]) of C-contiguous operands
    (``_matvec_side``'s product); the marked operands flushed of denormals: the vector
    first, the matrix as it is read (by the hardware's DAZ on x86, which flushes the
    products' and the sums' denormals too, as XLA:CPU does)."""
    if flush_vector and not _X86:
        vector = flush_in_run(vector)
    n = matrix.shape[1] if by_columns else matrix.shape[0]
    out = empty(n, matrix.dtype)
    tiny = _TINY[matrix.dtype]
    # (x86: in "flush" mode always, whatever the operands' marks, so that the bits of the
    # sums do not depend on what a run knows clean)
    select = bool(flush_matrix) and not _X86 and not known_clean(matrix)
    mxcsr = _FTZ_DAZ if _X86 and fpenv.flushing() else 0
    parallel = matrix.size >= _MATVEC_PARALLEL and n >= 64
    if by_columns:
        _vecmat_cols(0, n, matrix, vector, out, tiny, select, mxcsr)
    else:
        in_threads(_matvec_rows, -(-n // 4), parallel, matrix, vector, out, tiny, select, mxcsr)
    return out


def blas_operand(x):
    """x ([batch..., rows, cols]) itself when NumPy's matmul hands its matrices to BLAS as
    they are -- one of the two last dimensions of unit stride, the other a valid leading
    dimension (a transposed or sliced view is passed with BLAS's transpose flag and
    leading dimension, as XLA folds a transpose into the dot), else a contiguous copy
    (NumPy would otherwise run its own, slow, loop)."""
    return x if _blas_matrices(x) else np.ascontiguousarray(x)


def _merged(x, batch, rows, cols):
    """x seen as [B, rows, cols] (B = the product of ``batch``) without copying, or as
    [batch..., rows, cols] where the batch dimensions cannot merge, or None where even
    the rows or the columns cannot (a copy is needed)."""
    B = math.prod(batch)
    for dims in ((B, rows, cols), tuple(batch) + (rows, cols)):
        try:
            return np.reshape(x, dims, copy=False)
        except ValueError:
            continue
    return None


def _float_compute(*types):
    """The NumPy dtype a float (or complex) product of these XLA types is computed in."""
    if any(t in dtypes.COMPLEX for t in types):
        return np.complex128 if any(t in ("c128", "f64") for t in types) else np.complex64
    if "f64" in types:
        return np.float64
    if all(t in dtypes.FLOATING for t in types):
        return np.float32
    return np.float64  # integers to a float result: exact products, wide sums


def _finish(value, shape):
    """Round a computed array to the result type (pred: nonzero is true)."""
    if shape.element_type == "pred":
        return np.asarray(value != 0)
    return np.asarray(value).astype(shape.dtype, copy=False)


def _as_int(x):
    """An integer or pred operand as an array Numba can multiply (pred as uint8)."""
    x = np.asarray(x)
    return x.view(np.uint8) if x.dtype == np.bool_ else x


# ---------------------------------------------------------------------------------------
# Integer matrix products: out[b, m, n] = sum_k a[b, m, k] * w[b, k, n], in 64 bits

@njit(**_opts)
def _int_rows(a, w, out, acc, lo, hi, M, K, N):
    for q in range(lo, hi):
        b = q // M
        m = q - b * M
        acc[:] = 0
        arow = a[b, m]
        for k in range(K):
            s = arow[k]
            if s != 0:
                wrow = w[b, k]
                for n in range(N):
                    acc[n] += s * wrow[n]
        orow = out[b, m]
        for n in range(N):
            orow[n] = acc[n]


@njit(**_opts)
def int_matmul(a, w, out, acc_zero):
    """Batched integer matrix product, accumulated in acc_zero's type (int64 / uint64)
    and wrapped into out's type on the store."""
    B, M, K = a.shape
    N = w.shape[2]
    acc = np.zeros(N, acc_zero.dtype)
    _int_rows(a, w, out, acc, 0, B * M, M, K, N)


@njit(parallel=True, **_opts)
def int_matmul_par(a, w, out, acc_zero):
    B, M, K = a.shape
    N = w.shape[2]
    rows = B * M
    nchunks = min(rows, 64)
    per = (rows + nchunks - 1) // nchunks
    for c in prange(nchunks):
        acc = np.zeros(N, acc_zero.dtype)
        _int_rows(a, w, out, acc, c * per, min(rows, (c + 1) * per), M, K, N)


def _int_product(a, w, out_dtype):
    """[B, M, K] x [B, K, N] -> [B, M, N] of integer (or pred) operands, wrapping."""
    a, w = np.ascontiguousarray(_as_int(a)), np.ascontiguousarray(_as_int(w))
    acc = np.zeros(1, np.uint64 if a.dtype.kind == "u" else np.int64)
    out = np.empty((a.shape[0], a.shape[1], w.shape[2]), np.int64 if out_dtype == np.bool_ else out_dtype)
    if out.size == 0:
        return out
    if a.shape[2] == 0:
        out[...] = 0
        return out
    work = a.shape[0] * a.shape[1] * a.shape[2] * w.shape[2]
    (int_matmul_par if work >= PARALLEL_THRESHOLD * 4 else int_matmul)(a, w, out, acc)
    return out


def _product(a, w, shape, operand_types, scan=None):
    """The batched product [B..., M, K] @ [B..., K, N] in the type ``shape`` asks for."""
    t = shape.element_type
    if t in dtypes.FLOATING or t in dtypes.COMPLEX:
        ct = _float_compute(t, *operand_types)
        out = empty(a.shape[:-1] + w.shape[-1:], ct)
        return matmul(blas_operand(a.astype(ct, copy=False)), blas_operand(w.astype(ct, copy=False)), out, scan)
    B = math.prod(a.shape[:-2])
    a, w = a.reshape((B,) + a.shape[-2:]), w.reshape((B,) + w.shape[-2:])
    if any(o in dtypes.FLOATING or o in dtypes.COMPLEX for o in operand_types):
        # floats to an integer / pred result: the reference sums in int64 after converting
        # the operands, so do the same here
        a, w = a.astype(np.int64), w.astype(np.int64)
    return _int_product(a, w, np.bool_ if t == "pred" else shape.dtype)


# ---------------------------------------------------------------------------------------
# DotGeneral

@functools.lru_cache(maxsize=512)
def _dot_plan(lhs_rank, rhs_rank, lc, rc, lb, rb):
    lhs_free = tuple(d for d in range(lhs_rank) if d not in lc + lb)
    rhs_free = tuple(d for d in range(rhs_rank) if d not in rc + rb)
    return lb + lhs_free + lc, rb + rc + rhs_free, lhs_free, rhs_free


def _blas_matrices(x):
    """Whether np.matmul hands x's matrices (its two last dimensions) to BLAS as they are
    (``blas_operand``'s condition; for a result: written in place, not through NumPy's loop)."""
    item = x.itemsize
    r, c = x.shape[-2:]
    sr, sc = x.strides[-2:]
    return ((sc == item or c == 1) and sr % item == 0 and sr // item >= max(c, 1)) or \
        ((sr == item or r == 1) and sc % item == 0 and sc // item >= max(r, 1))


def _transposed_product(a, w, shape, types, batch, M, N, perm, scan=None):
    """The float product written straight into the layout of ``transpose(dot, perm)``:
    the dot's result seen as a strided view of that array (``C^T`` of a 2-D product: NumPy
    passes BLAS the operands swapped, ``C^T = B^T A^T``); None where that view's matrices
    are not BLAS's (the caller transposes a product computed as usual)."""
    t = shape.element_type
    if not (t in dtypes.FLOATING or t in dtypes.COMPLEX):
        return None
    ct = _float_compute(t, *types)
    buf = empty(tuple(shape.dims[p] for p in perm), ct)
    inverse = [0] * len(perm)
    for i, p in enumerate(perm):
        inverse[p] = i
    out = _merged(np.transpose(buf, inverse), batch, M, N)
    if out is None or not _blas_matrices(out):
        return None
    if out.ndim != a.ndim:   # one of them keeps its batch dimensions apart: all three so
        a, w, out = (np.reshape(x, tuple(batch) + x.shape[-2:], copy=False) for x in (a, w, out))
    matmul(blas_operand(a.astype(ct, copy=False)), blas_operand(w.astype(ct, copy=False)), out, scan)
    return _finish(buf, shape)


@kernel("dot", note="BLAS (np.matmul); integers: Numba")
def dot_kernel(lhs, rhs, *, shape, lhs_contracting_dimensions=(), rhs_contracting_dimensions=(),
               lhs_batch_dimensions=(), rhs_batch_dimensions=(), precision_config=None,
               preferred_element_type=None, out_permutation=None, flush=()):
    """``out_permutation`` (the run plan's ``fusion.DotTranspose``): the result is returned
    as ``transpose(dot, out_permutation)``, computed in that layout where BLAS can write it.
    ``flush`` (``flushes_operands``): the operands it marks flushed of denormals
    (``_flushed_dot``: large ones scanned while the product runs)."""
    kw = dict(shape=shape, lhs_contracting_dimensions=lhs_contracting_dimensions,
              rhs_contracting_dimensions=rhs_contracting_dimensions, lhs_batch_dimensions=lhs_batch_dimensions,
              rhs_batch_dimensions=rhs_batch_dimensions, out_permutation=out_permutation)
    if type(lhs) is np.ndarray and type(rhs) is np.ndarray and shape.is_array:
        side = _matvec_side(lhs.shape, rhs.shape, tuple(int(d) for d in lhs_contracting_dimensions),
                            tuple(int(d) for d in rhs_contracting_dimensions), tuple(lhs_batch_dimensions),
                            tuple(rhs_batch_dimensions), shape.element_type, dtypes.from_numpy(lhs.dtype),
                            dtypes.from_numpy(rhs.dtype),
                            None if out_permutation is None else tuple(int(p) for p in out_permutation))
        if side is not None and np.dtype(shape.dtype) == lhs.dtype:
            side, by_columns = side
            mask = tuple(flush) if flush else (False, False)
            m, v = (lhs, rhs) if side == 0 else (rhs, lhs)
            return _matvec(np.ascontiguousarray(m), np.ascontiguousarray(v).reshape(-1), mask[side], mask[1 - side],
                           by_columns).reshape(shape.dims)
    if flush and any(flush):
        return _flushed_dot(lambda lhs, rhs, scan: _dot(lhs, rhs, scan=scan, **kw), (lhs, rhs), flush)
    return _dot(lhs, rhs, **kw)


def _dot(lhs, rhs, *, shape, lhs_contracting_dimensions, rhs_contracting_dimensions, lhs_batch_dimensions,
         rhs_batch_dimensions, out_permutation, scan=None):
    """``dot_kernel`` of flushed operands (or ones ``scan`` scans during the product)."""
    lhs, rhs = np.asarray(lhs), np.asarray(rhs)
    lc, rc = tuple(int(d) for d in lhs_contracting_dimensions), tuple(int(d) for d in rhs_contracting_dimensions)
    lb, rb = tuple(int(d) for d in lhs_batch_dimensions), tuple(int(d) for d in rhs_batch_dimensions)
    lperm, rperm, lhs_free, rhs_free = _dot_plan(lhs.ndim, rhs.ndim, lc, rc, lb, rb)
    # Python's integer product: np.prod costs microseconds a call, this kernel's own time
    # on a small batched product
    size = lambda x, dims: math.prod(x.shape[d] for d in dims)  # noqa: E731
    B, M, K, N = size(lhs, lb), size(lhs, lhs_free), size(lhs, lc), size(rhs, rhs_free)
    # the operands as [batch, M, K] and [batch, K, N] views where their strides allow (a
    # transposed operand, a head of attention's [b, t, h, d]: BLAS reads them in place),
    # copied where they do not
    batch = tuple(lhs.shape[d] for d in lb)
    a, w = _merged(np.transpose(lhs, lperm), batch, M, K), _merged(np.transpose(rhs, rperm), batch, K, N)
    if a is None:
        a = np.transpose(lhs, lperm).reshape(B, M, K)
    if w is None:
        w = np.transpose(rhs, rperm).reshape(B, K, N)
    if a.ndim != w.ndim:  # one merged its batch dimensions, the other could not
        a, w = a.reshape(batch + (M, K)), w.reshape(batch + (K, N))
    types = (dtypes.from_numpy(lhs.dtype), dtypes.from_numpy(rhs.dtype))
    if K == 0 or B * M * N == 0:
        out = np.zeros(shape.dims, shape.dtype)
    else:
        if out_permutation is not None:
            out = _transposed_product(a, w, shape, types, batch, M, N, tuple(out_permutation), scan)
            if out is not None:
                return out
        out = _finish(_product(a, w, shape, types, scan), shape).reshape(shape.dims)
    return out if out_permutation is None else contiguous(np.transpose(out, out_permutation))


def _dot_prepare(operand_shapes, *, shape, lhs_contracting_dimensions=(), rhs_contracting_dimensions=(),
                 lhs_batch_dimensions=(), rhs_batch_dimensions=(), precision_config=None,
                 preferred_element_type=None, out_permutation=None, flush=()):
    """The run plan's hook (``numba_executor._op_step``): a float product of operands of
    the result's type (f32, f64, c64, c128), its Python set-up decided once from the static
    shapes -- the dimension plan, the operands' [batch, M, K] / [batch, K, N] views (C
    strides: the same views, or copies, as ``dot_kernel`` makes), whether BLAS takes them
    as they are -- then the same ``matmul`` (or ``_transposed_product``) as the kernel, so
    the same bits.  Other types and values not C-contiguous of the static dims: the kernel.
    ``flush``: as the kernel's (``_flushed_dot``)."""
    if len(operand_shapes) != 2 or not shape.is_array or not shape.is_static:
        return None
    ls, rs = operand_shapes
    t = shape.element_type
    if t not in ("f32", "f64", "c64", "c128") or ls.element_type != t or rs.element_type != t:
        return None
    ct = np.dtype(_float_compute(t, t, t))
    if ct != np.dtype(shape.dtype):
        return None
    lc, rc = tuple(int(d) for d in lhs_contracting_dimensions), tuple(int(d) for d in rhs_contracting_dimensions)
    lb, rb = tuple(int(d) for d in lhs_batch_dimensions), tuple(int(d) for d in rhs_batch_dimensions)
    ldims, rdims = tuple(ls.dims), tuple(rs.dims)
    perm0 = tuple(int(p) for p in out_permutation) if out_permutation is not None else None
    side = _matvec_side(ldims, rdims, lc, rc, lb, rb, t, t, t, perm0)
    if side is not None:
        side, by_columns = side
        mask = tuple(flush) if flush else (False, False)
        fm, fv, out_dims = mask[side], mask[1 - side], tuple(shape.dims)

        def matvec(lhs, rhs):
            m, v = (lhs, rhs) if side == 0 else (rhs, lhs)
            if type(m) is not np.ndarray or type(v) is not np.ndarray or m.dtype != ct or v.dtype != ct \
                    or m.shape != (ldims if side == 0 else rdims):
                return dot_kernel(lhs, rhs, shape=shape, lhs_contracting_dimensions=lc, rhs_contracting_dimensions=rc,
                                  lhs_batch_dimensions=lb, rhs_batch_dimensions=rb, out_permutation=perm0,
                                  flush=mask if any(mask) else ())
            return _matvec(np.ascontiguousarray(m), np.ascontiguousarray(v).reshape(-1), fm, fv,
                           by_columns).reshape(out_dims)
        return matvec
    lperm, rperm, lhs_free, rhs_free = _dot_plan(len(ldims), len(rdims), lc, rc, lb, rb)
    B, M, K = (math.prod(ldims[d] for d in g) for g in (lb, lhs_free, lc))
    N = math.prod(rdims[d] for d in rhs_free)
    if K == 0 or B * M * N == 0:
        return None
    batch = tuple(ldims[d] for d in lb)

    def probe(dims):   # an array of these dims and C strides, without memory behind it
        strides, st = [0] * len(dims), ct.itemsize
        for d in range(len(dims) - 1, -1, -1):
            strides[d], st = st, st * dims[d]
        return np.lib.stride_tricks.as_strided(np.zeros(1, ct), shape=dims, strides=strides)
    a, w = _merged(np.transpose(probe(ldims), lperm), batch, M, K), _merged(np.transpose(probe(rdims), rperm), batch,
                                                                             K, N)
    a_shape = a.shape if a is not None else (B, M, K)
    w_shape = w.shape if w is not None else (B, K, N)
    if len(a_shape) != len(w_shape):
        a_shape, w_shape = batch + (M, K), batch + (K, N)
    # whether the views' matrices are BLAS's (else blas_operand copies them), decided on
    # the probes (a copy made by a reshape is C-contiguous: BLAS's)
    a_ok = a is None or _blas_matrices(np.reshape(a, a_shape, copy=False) if a.shape != a_shape else a)
    w_ok = w is None or _blas_matrices(np.reshape(w, w_shape, copy=False) if w.shape != w_shape else w)
    perm = tuple(int(p) for p in out_permutation) if out_permutation is not None else None
    types, dims = (t, t), tuple(shape.dims)
    out_shape = a_shape[:-1] + w_shape[-1:]
    kw = dict(shape=shape, lhs_contracting_dimensions=lc, rhs_contracting_dimensions=rc, lhs_batch_dimensions=lb,
              rhs_batch_dimensions=rb, out_permutation=perm)

    def core(lhs, rhs, scan):
        if type(lhs) is not np.ndarray or type(rhs) is not np.ndarray or lhs.dtype != ct or rhs.dtype != ct \
                or lhs.shape != ldims or rhs.shape != rdims or not lhs.flags.c_contiguous \
                or not rhs.flags.c_contiguous:
            return _dot(lhs, rhs, scan=scan, **kw)
        a = np.transpose(lhs, lperm).reshape(a_shape)
        w = np.transpose(rhs, rperm).reshape(w_shape)
        if not a_ok:
            a = np.ascontiguousarray(a)
        if not w_ok:
            w = np.ascontiguousarray(w)
        if perm is not None:
            out = _transposed_product(a, w, shape, types, batch, M, N, perm, scan)
            if out is not None:
                return out
        out = matmul(a, w, empty(out_shape, ct), scan).reshape(dims)
        return out if perm is None else contiguous(np.transpose(out, perm))

    mask = tuple(bool(f) for f in flush) if flush else (False, False)
    general = (lambda lhs, rhs: _flushed_dot(core, (lhs, rhs), mask)) if any(mask) else \
        (lambda lhs, rhs: core(lhs, rhs, None))
    if (len(ldims) == 2 and len(rdims) == 2 and not lb and tuple(lperm) == (0, 1) and tuple(rperm) == (0, 1)
            and perm is None and a_ok and w_ok and tuple(a_shape)[-2:] == ldims and tuple(w_shape)[-2:] == rdims
            and math.prod(a_shape) == math.prod(ldims) and math.prod(w_shape) == math.prod(rdims)
            and M * K * N < _SPLIT_WORK
            and max(math.prod(ldims), math.prod(rdims)) * ct.itemsize < _CONCURRENT_SCAN_BYTES):
        # a small [M, K] @ [K, N] of C-contiguous operands: what core and _flushed_dot do for
        # it (each flagged operand flushed in the run, one BLAS call in this thread), without
        # their views and checks (a scan's step: about 5 of its 60 us)
        fl, fr = mask
        matmul_, enter, leave, ndarray = np.matmul, _blas_enter, _blas_leave, np.ndarray

        def small(lhs, rhs):
            if type(lhs) is not ndarray or type(rhs) is not ndarray or lhs.dtype != ct or rhs.dtype != ct \
                    or lhs.shape != ldims or rhs.shape != rdims or not lhs.flags.c_contiguous \
                    or not rhs.flags.c_contiguous:
                return general(lhs, rhs)
            if fl:
                lhs = flush_in_run(lhs)
            if fr:
                rhs = flush_in_run(rhs)
            out = empty(out_shape, ct)   # (core's shapes: the very same BLAS call)
            enter()
            try:
                matmul_(lhs.reshape(a_shape), rhs.reshape(w_shape), out=out)
            finally:
                leave()
            return out.reshape(dims)
        return small
    return general


dot_kernel.prepare = _dot_prepare
#: (perf-small's ``_op_step``) the executor flushes the marked operands before the prepared
#: function and its result after, as around the kernel
dot_kernel.prepare_flushing = True
#: ``flush=`` the mask: the kernel flushes its marked operands itself (``_flushed_dot``)
dot_kernel.flushes_operands = True


# ---------------------------------------------------------------------------------------
# Convolution: im2col + matrix product

@njit(**_opts)
def im2col(x, rows_per_group, Bg, batch_groups, I, odims, geo, maxwin, ncell, bstride, patches, start):
    """patches[g, r, cell * I + i] = the input element window cell ``cell`` of output row
    ``start + r`` (batch, spatial position) of group g reads at in-feature i, or 0 for
    padding and lhs-dilation holes.  x is [batch, spatial..., features], flat; ``geo``
    from ``window_geometry`` (lhs dilation as the base dilation).  Per output row the
    cells' offsets are computed once, for every group (a depthwise convolution's 32
    groups of one feature each re-walked the window 32 times, 24 ns a cell: 10x slower)."""
    m = odims.shape[0]
    G = patches.shape[0]
    oc = np.empty(m, np.int64)
    wc = np.empty(m, np.int64)
    ct = np.empty((m, maxwin), np.int64)
    offs = np.empty(ncell, np.int64)
    nsp = rows_per_group // Bg
    for r in range(patches.shape[1]):
        rr = start + r
        bout = rr // nsp
        rest = rr - bout * nsp
        for d in range(m - 1, -1, -1):
            oc[d] = rest % odims[d]
            rest //= odims[d]
        for d in range(m):
            # ct[d, k]: the input index kernel position k reads along dimension d
            # (-1: padding or an lhs-dilation hole), as reduction._axis_codes
            size, stride, low, ldil, rdil, win = geo[d, 0], geo[d, 1], geo[d, 2], geo[d, 3], geo[d, 4], geo[d, 5]
            dilated = (size - 1) * ldil + 1 if size > 0 else 0
            q = oc[d] * stride - low
            for k in range(win):
                if q < 0 or q >= dilated:
                    ct[d, k] = -1
                elif ldil == 1:   # (no division: polyphase's classes, most convolutions)
                    ct[d, k] = q
                else:
                    ct[d, k] = q // ldil if q % ldil == 0 else -1
                q += rdil
            wc[d] = 0
        # offs[cell]: the cell's element offset in one image at feature 0, -1 for padding
        for cell in range(ncell):
            off = 0
            for d in range(m):
                t = ct[d, wc[d]]
                if t < 0:
                    off = -1
                    break
                off += t * geo[d, 6]
            offs[cell] = off
            d = m - 1
            while d >= 0:
                wc[d] += 1
                if wc[d] < geo[d, 5]:
                    break
                wc[d] = 0
                d -= 1
        for g in range(G):
            b_in = g * Bg + bout if batch_groups else bout
            base = b_in * bstride + (0 if batch_groups else g * I)
            row = patches[g, r]
            if I == 1:
                for cell in range(ncell):
                    o = offs[cell]
                    if o >= 0:
                        row[cell] = x[base + o]
                    else:
                        row[cell] = 0
            else:
                for cell in range(ncell):
                    o = offs[cell]
                    dst = row[cell * I:(cell + 1) * I]
                    if o >= 0:
                        src = x[base + o:base + o + I]
                        for i in range(I):
                            dst[i] = src[i]
                    else:
                        for i in range(I):
                            dst[i] = 0


#: elements of one block of im2col patches: each worker thread gathers a block of rows
#: and multiplies it while it is still in its core's cache
_PATCH_BLOCK = 1 << 18


# Winograd F(2x2, 3x3) (Lavin & Gray 2015): a 3x3 stride-1 convolution computes each 2x2
# output tile from a 4x4 input tile with 16 multiplications per (in, out) feature pair
# instead of 36: V = B^T d B (input), U = G g G^T (kernel), M = V . U summed over the in
# features (16 matrix products), Y = A^T M A (output).  The sums are the same up to
# rounding (the transforms add and halve), within the accumulation tolerance.

@njit(**_opts)
def _wino_input(xp, th, tw, t0, t1, V):
    """V[k, q - t0, c] = (B^T d B)[k] for the 4x4 input tiles d of tiles q in [t0, t1);
    ``xp`` is the input [batch, Hp, Wp, C] with its padding already in place (zeros), so
    every tile reads whole rows of C features (contiguous views: the loops vectorise)."""
    Hp, Wp, C = xp.shape[1], xp.shape[2], xp.shape[3]
    xf = xp.reshape(-1)
    rs = Wp * C                                     # one row of the image
    per = th * tw
    b = t0 // per
    i = (t0 // tw) % th
    j = t0 % tw
    for q in range(t0, t1):
        base = ((b * Hp + 2 * i) * Wp + 2 * j) * C
        o = q - t0
        for r in range(4):
            # row r of B^T d: d0 - d2, d1 + d2, d2 - d1, d1 - d3 (image rows ra and rb of
            # the tile), then V's rows 4r..4r+3 = that row times B: x0 - x2, x1 + x2,
            # x2 - x1, x1 - x3 -- in one loop, without temporaries in memory (2.5x faster)
            if r == 0:
                ra, rb = 0, 2
            elif r == 1:
                ra, rb = 1, 2
            elif r == 2:
                ra, rb = 2, 1
            else:
                ra, rb = 1, 3
            pa, pb = base + ra * rs, base + rb * rs
            a0, a1, a2, a3 = xf[pa:pa + C], xf[pa + C:pa + 2 * C], xf[pa + 2 * C:pa + 3 * C], xf[pa + 3 * C:pa + 4 * C]
            b0, b1, b2, b3 = xf[pb:pb + C], xf[pb + C:pb + 2 * C], xf[pb + 2 * C:pb + 3 * C], xf[pb + 3 * C:pb + 4 * C]
            v0, v1, v2, v3 = V[4 * r, o], V[4 * r + 1, o], V[4 * r + 2, o], V[4 * r + 3, o]
            if r == 1:
                for c in range(C):
                    x0, x1, x2, x3 = a0[c] + b0[c], a1[c] + b1[c], a2[c] + b2[c], a3[c] + b3[c]
                    v0[c] = x0 - x2
                    v1[c] = x1 + x2
                    v2[c] = x2 - x1
                    v3[c] = x1 - x3
            else:
                for c in range(C):
                    x0, x1, x2, x3 = a0[c] - b0[c], a1[c] - b1[c], a2[c] - b2[c], a3[c] - b3[c]
                    v0[c] = x0 - x2
                    v1[c] = x1 + x2
                    v2[c] = x2 - x1
                    v3[c] = x1 - x3
        j += 1  # the next tile, counted like an odometer (no division per tile)
        if j == tw:
            j = 0
            i += 1
            if i == th:
                i = 0
                b += 1


@njit(**_opts)
def _wino_output(M, th, tw, t0, t1, out):
    """out[b, 2i:2i+2, 2j:2j+2, :] = A^T m A for the tiles q in [t0, t1) (M is
    [16, tiles, O]); the parts of edge tiles beyond the output are dropped.  One loop over
    the features per tile, no temporaries in memory."""
    OH, OW, O = out.shape[1], out.shape[2], out.shape[3]
    per = th * tw
    b = t0 // per
    i = (t0 // tw) % th
    j = t0 % tw
    for q in range(t0, t1):
        o = q - t0
        full = 2 * i + 1 < OH and 2 * j + 1 < OW
        if full:
            r0, c0 = 2 * i, 2 * j
            for f in range(O):
                # indexed into M and out themselves, not through 20 row views: LLVM then
                # needs no overlap checks between the views (1.3-1.5x faster, same sums)
                # u = A^T m: rows (m_0s + m_1s + m_2s) and (m_1s - m_2s - m_3s), s = column
                u00 = M[0, o, f] + M[4, o, f] + M[8, o, f]
                u01 = M[1, o, f] + M[5, o, f] + M[9, o, f]
                u02 = M[2, o, f] + M[6, o, f] + M[10, o, f]
                u03 = M[3, o, f] + M[7, o, f] + M[11, o, f]
                u10 = M[4, o, f] - M[8, o, f] - M[12, o, f]
                u11 = M[5, o, f] - M[9, o, f] - M[13, o, f]
                u12 = M[6, o, f] - M[10, o, f] - M[14, o, f]
                u13 = M[7, o, f] - M[11, o, f] - M[15, o, f]
                # y = u A: columns (u0 + u1 + u2) and (u1 - u2 - u3)
                out[b, r0, c0, f] = u00 + u01 + u02
                out[b, r0, c0 + 1, f] = u01 - u02 - u03
                out[b, r0 + 1, c0, f] = u10 + u11 + u12
                out[b, r0 + 1, c0 + 1, f] = u11 - u12 - u13
        else:  # an edge tile: only the outputs inside
            m0, m1, m2, m3 = M[0, o], M[1, o], M[2, o], M[3, o]
            m4, m5, m6, m7 = M[4, o], M[5, o], M[6, o], M[7, o]
            m8, m9, m10, m11 = M[8, o], M[9, o], M[10, o], M[11, o]
            m12, m13, m14, m15 = M[12, o], M[13, o], M[14, o], M[15, o]
            y00 = out[b, 2 * i, 2 * j]
            for f in range(O):
                u00 = m0[f] + m4[f] + m8[f]
                u01 = m1[f] + m5[f] + m9[f]
                u02 = m2[f] + m6[f] + m10[f]
                u03 = m3[f] + m7[f] + m11[f]
                y00[f] = u00 + u01 + u02
                if 2 * j + 1 < OW:
                    out[b, 2 * i, 2 * j + 1, f] = u01 - u02 - u03
                if 2 * i + 1 < OH:
                    u10 = m4[f] - m8[f] - m12[f]
                    u11 = m5[f] - m9[f] - m13[f]
                    u12 = m6[f] - m10[f] - m14[f]
                    out[b, 2 * i + 1, 2 * j, f] = u10 + u11 + u12
                    if 2 * j + 1 < OW:
                        u13 = m7[f] - m11[f] - m15[f]
                        out[b, 2 * i + 1, 2 * j + 1, f] = u11 - u12 - u13
        j += 1
        if j == tw:
            j = 0
            i += 1
            if i == th:
                i = 0
                b += 1


@intrinsic
def _fma(typingctx, a, b, c):
    """a * b + c rounded once (LLVM's fma: the vfmadd of AVX2)."""
    if not (isinstance(a, nb.types.Float) and a == b == c):
        return None

    def codegen(context, builder, signature, args):
        return builder.fma(*args)
    return a(a, b, c), codegen


@njit(**_opts)
def _fma_products(V4, U4, M, n):
    """M[k, q, f] = sum_c V4[k, q, c] * U4[k, c, f] for q < n (in features padded with zeros
    to 4), accumulated from +0 in c's order by fused multiply-adds: the bits of OpenBLAS's
    Haswell kernels for a product this short (one rounding a term, in order;
    ``_fma_chain_matches`` checks it).  A padded term adds fma(0, 0, m) = m + 0 = m: m is
    never -0 (the chain starts at +0, and a round-to-nearest sum is -0 only when both
    terms are).  One loop over the out features per (k, q): it vectorises."""
    O = U4.shape[2]
    zero = U4.dtype.type(0)
    for k in range(16):
        for q in range(n):
            v0, v1, v2, v3 = V4[k, q, 0], V4[k, q, 1], V4[k, q, 2], V4[k, q, 3]
            for f in range(O):
                M[k, q, f] = _fma(v3, U4[k, 3, f], _fma(v2, U4[k, 2, f], _fma(v1, U4[k, 1, f],
                                                                              _fma(v0, U4[k, 0, f], zero))))


#: (compute dtype, in features, out features) -> whether NumPy's BLAS computes
#: Winograd's [tiles, C] @ [C, O] products with _fma_products' bits
_FMA_CHAINS = {}

#: Winograd with at most this many in features computes its products by _fma_products,
#: block by block with its transforms, where the BLAS products have those bits: such a
#: product is mostly stores (an image's 3 channels: M is 10x larger than V), and BLAS ran
#: it at 11 G multiply-adds/s
_WINO_FUSED_MAX_C = 4
#: tiles x out features of one block of the fused products (16 of them: M stays in L2)
_WINO_FUSED_M = 1 << 12


def _fma_chain_matches(ct, C, O):
    """Whether np.matmul (this process's BLAS, its kernels as OPENBLAS_CORETYPE picks them)
    gives the bits of ``_fma_products`` for Winograd's products of C in and O out features:
    compared once on random operands of wide exponents (a product as _winograd's blocks
    cut it, and a short one for the edge kernels); False where any bit differs."""
    key = (np.dtype(ct).str, C, O)
    ok = _FMA_CHAINS.get(key)
    if ok is None:
        rng = np.random.default_rng(20261202)
        ok = True
        for n in (_WINO_BLOCK, 67):
            V = (rng.standard_normal((16, n, C)) * np.exp2(rng.integers(-24, 24, (16, n, C)))).astype(ct)
            U = (rng.standard_normal((16, C, O)) * np.exp2(rng.integers(-24, 24, (16, C, O)))).astype(ct)
            V[:, ::7] = 0
            want = np.empty((16, n, O), ct)
            _blas_enter()
            try:
                np.matmul(V, U, out=want)
            finally:
                _blas_leave()
            got = np.empty_like(want)
            V4, U4 = np.zeros((16, n, 4), ct), np.zeros((16, 4, O), ct)
            V4[:, :, :C], U4[:, :C] = V, U
            _fma_products(V4, U4, got, n)
            word = np.uint32 if want.itemsize == 4 else np.uint64
            ok = ok and np.array_equal(want.view(word), got.view(word))
        _FMA_CHAINS[key] = ok
    return ok


_G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]])

#: tiles per block of the Winograd convolution (each block's transforms stay in cache)
_WINO_BLOCK = 512
#: a small convolution's tiles are cut into this many blocks (64 tiles at least each)
_WINO_PARTS = 4
#: the blocks are shared by the threads from this much work (tiles x 16 x in x out
#: features) on: the sweep's 256 KiB conv 3x3 (8.4M) ran 662 us at best of 1500 shared, 605
#: in one thread (NCHW 763 / 688; load 7.5); at 4 MiB (134M) sharing halves it
_WINO_SPLIT_WORK = 1 << 24


#: (w's shape, dtype, compute type) -> (a copy of w, its U): a program's weights are the same
#: from run to run, and U's two float64 products cost 60 us of a 0.75 ms convolution
_WINO_KERNELS = {}


def _wino_kernel(w, ct):
    """U[k, c, o] = (G g G^T)[k] of w [O, C, 3, 3] in float64, then the compute type ``ct``:
    two 2-D matrix products over all the (o, c) kernels at once (not an einsum, nor a
    batched product of 3x3 matrices: NumPy runs those one small matrix at a time, 0.15 ms
    for 32x32 kernels).  Remembered for the last w of each shape: a w of the same bits (its
    bytes compared) gets the same U."""
    key = (w.shape, w.dtype.str, np.dtype(ct).str)
    hit = _WINO_KERNELS.get(key)
    wbytes = np.ascontiguousarray(w).tobytes()   # (bytes compared: 4.7 us for 32x32 kernels, array_equal 14)
    if hit is not None and hit[0] == wbytes:
        return hit[1]
    O, C = w.shape[:2]
    OC = O * C
    t = (w.astype(np.float64).reshape(OC * 3, 3) @ _G.T).reshape(OC, 3, 4)            # g G^T
    t = (_G @ np.ascontiguousarray(t.transpose(1, 0, 2)).reshape(3, OC * 4)).reshape(4, O, C, 4)  # G (g G^T)
    U = np.ascontiguousarray(t.transpose(0, 3, 2, 1), dtype=ct).reshape(16, C, O)
    U.flags.writeable = False
    if len(_WINO_KERNELS) >= 32:
        _WINO_KERNELS.clear()
    _WINO_KERNELS[key] = (wbytes, U)
    return U


@njit(**_opts)
def _pad_from_channels(xn, xp, h0, h1, w0, w1, lo_h, lo_w):
    """xp[b, h, w, c] = xn[b, c, h - lo_h, w - lo_w] for h in [h0, h1), w in [w0, w1): the
    interior of Winograd's padded input from an NCHW array (a copy: the same bits)."""
    B, C = xn.shape[0], xn.shape[1]
    for b in range(B):
        if C == 3:   # an image's channels: the three rows interleaved in one loop
            for h in range(h0, h1):
                d = xp[b, h].reshape(-1)
                s0, s1, s2 = xn[b, 0, h - lo_h], xn[b, 1, h - lo_h], xn[b, 2, h - lo_h]
                for w in range(w0, w1):
                    d[3 * w] = s0[w - lo_w]
                    d[3 * w + 1] = s1[w - lo_w]
                    d[3 * w + 2] = s2[w - lo_w]
            continue
        for c in range(C):
            for h in range(h0, h1):
                src = xn[b, c, h - lo_h]
                dst = xp[b, h]
                for w in range(w0, w1):
                    dst[w, c] = src[w - lo_w]


def _winograd(x, w, pads, out_sp, ct):
    """The 3x3 stride-1 convolution of x [batch, H, W, C] with w [O, C, 3, 3] (already
    reversed where asked), padding (low, high) per spatial dimension: [batch, OH, OW, O]."""
    B, C = x.shape[0], x.shape[-1]
    O = w.shape[0]
    OH, OW = out_sp
    th, tw = -(-OH // 2), -(-OW // 2)
    U = _wino_kernel(w, ct)
    out = empty((B, OH, OW, O), ct)
    tiles = B * th * tw
    # blocks of at most _WINO_BLOCK tiles, at least 4 of them where there are 4 x 64 tiles
    # (a small convolution's tiles shared by the threads too); cut by the size alone, so
    # that the thread count changes nothing of the rounding
    block = min(_WINO_BLOCK, max(64, -(-tiles // _WINO_PARTS)))
    # the input with its padding in place, as large as the tiles read: tile (i, j) reads
    # rows 2i..2i+3 and columns 2j..2j+3 of it (a negative padding crops)
    H, W = x.shape[1], x.shape[2]
    (lo_h, _), (lo_w, _) = pads
    # (pooled and only its border zeroed: np.zeros' fresh pages page-faulted on every call)
    Hp, Wp = 2 * th + 2, 2 * tw + 2
    xp = empty((B, Hp, Wp, C), ct)
    h0, w0 = max(0, lo_h), max(0, lo_w)
    h1, w1 = min(Hp, lo_h + H), min(Wp, lo_w + W)
    if h1 > h0 and w1 > w0:
        xp[:, :h0] = 0
        xp[:, h1:] = 0
        xp[:, h0:h1, :w0] = 0
        xp[:, h0:h1, w1:] = 0
        xn = np.transpose(x, (0, 3, 1, 2))
        if C <= 4 and xn.flags.c_contiguous and not x.flags.c_contiguous:
            # an NCHW image's few channels: interleaved by a loop that reads its rows in
            # order (NumPy's strided copy moved 3 elements an inner loop: 0.34 ms for
            # [16,3,64,64], the loop about a quarter of that)
            _pad_from_channels(xn, xp, h0, h1, w0, w1, lo_h, lo_w)
        else:
            xp[:, h0:h1, w0:w1] = x[:, h0 - lo_h:h1 - lo_h, w0 - lo_w:w1 - lo_w]
    else:
        xp[...] = 0

    if C <= _WINO_FUSED_MAX_C and _fma_chain_matches(ct, C, O):
        # the products by _fma_products (BLAS's bits), in blocks whose M stays in L2 (each
        # tile's values depend on nothing else: any cut gives the same bits)
        U4 = np.zeros((16, 4, O), ct)
        U4[:, :C] = U
        fblock = max(16, min(_WINO_BLOCK, _WINO_FUSED_M // max(O, 1)))

        def fused(t0, scratch):
            V4, M = scratch
            t1 = min(tiles, t0 + fblock)
            _wino_input(xp, th, tw, t0, t1, V4[:, :, :C])
            _fma_products(V4, U4, M, t1 - t0)
            _wino_output(M, th, tw, t0, t1, out)

        in_blocks(fused, list(range(0, tiles, fblock)),
                  lambda: (np.zeros((16, fblock, 4), ct), empty((16, fblock, O), ct)), tiles * 16 * C * O,
                  _WINO_SPLIT_WORK)
        return out

    def work(t0, scratch):
        V, M = scratch
        t1 = min(tiles, t0 + block)
        n = t1 - t0
        _wino_input(xp, th, tw, t0, t1, V)
        np.matmul(V[:, :n], U, out=M[:, :n])
        _wino_output(M, th, tw, t0, t1, out)

    in_blocks(work, list(range(0, tiles, block)),
              lambda: (empty((16, block, C), ct), empty((16, block, O), ct)), tiles * 16 * C * O, _WINO_SPLIT_WORK)
    return out


def _winograd_applies(n, k_sizes, strides, ld, rd, groups, is_float, ct, rows, C, O):
    return (n == 2 and k_sizes == (3, 3) and tuple(strides) == (1, 1) and tuple(ld) == (1, 1)
            and tuple(rd) == (1, 1) and groups == 1 and is_float and ct in (np.float32, np.float64)
            and rows * C * O >= _WINO_MIN)


#: from this much work (output rows x in features x out features) on, Winograd
_WINO_MIN = 1 << 20


def _im2col_conv(x, w, wmat, groups, batch_groups, Bg, I, C, Og, out_sp, k_sizes, rows, kcols, strides, pads,
                 ld, rd, is_float, ct):
    """The convolution as im2col + matrix products: result [G, rows, Og]."""
    if not (rows and kcols and Og and x.size):
        return np.zeros((groups, rows, Og), ct if is_float else np.int64)
    result = empty((groups, rows, Og), ct if is_float else np.int64)  # every row written below
    in_sizes = tuple(x.shape[1:-1])
    geometry = _window_geometry(in_sizes, tuple(out_sp), tuple(k_sizes), tuple(strides), tuple(pads), tuple(ld),
                                tuple(rd))
    _, _, odims, geo, maxwin, ncell = geometry
    geo = geo.copy()
    geo[:, 6] *= C  # strides in elements of x[batch, spatial..., C]
    bstride = int(np.prod(in_sizes, dtype=np.int64)) * C
    xf = x.reshape(-1)
    block = max(1, min(rows, _PATCH_BLOCK // max(kcols * groups, 1)))
    geometry = (xf, rows, Bg, batch_groups, I, odims, geo, maxwin, ncell, bstride)

    def work(start, patches):
        stop = min(rows, start + block)
        part = patches[:, :stop - start]
        im2col(*geometry, part, start)  # serial Numba, without the GIL
        if is_float:
            for g in range(groups):
                np.matmul(part[g], wmat[g], out=result[g, start:stop])
        else:
            result[:, start:stop] = _int_product(part, wmat, np.int64)

    # scratch from the buffer pool: a fresh megabyte page-faults on every call
    in_blocks(work, list(range(0, rows, block)), lambda: empty((groups, block, kcols), xf.dtype),
              rows * kcols * Og * groups)
    return result


# Transposed convolutions (lhs dilation above 1), polyphase: along a dilated dimension
# the outputs o = c + P * j of one residue class c (P = ld / gcd(stride, ld)) see the
# dilated input at the same offsets modulo ld, so only every (ld / gcd(rd, ld))-th kernel
# tap ever meets a real element there, the others only the holes.  Each class is an
# ordinary convolution of the undilated input with that sub-kernel (stride
# stride / gcd(stride, ld), dilation rd / gcd(rd, ld), its own padding): im2col + BLAS
# over the real taps alone -- the same products in the same order as the full im2col's,
# without its zeros (BLAS's blocking of the shorter rows may round a last bit otherwise)
# -- or, where the sub-kernel is one cell that stays inside the input, BLAS on a view of
# the input itself.  Its results fill the class's strided positions.  The transposed conv
# NHWC [8,32,32,32] * [3,3,32,32] (4 classes of 1, 2, 2, 4 of the 9 taps): 2.6 ms, from
# im2col's 5.9 (bests of 40, load 4.4), the same bits.

def _poly_axis(out, stride, low, ld, rd, win):
    """The residue classes of one spatial dimension: P and per class c < min(P, out)
    (c, J, sub) -- J outputs, ``sub`` = (first tap, taps, the sub-convolution's low
    padding) or None where no tap meets a real element (its outputs are zeros)."""
    P = ld // math.gcd(stride, ld)
    step = ld // math.gcd(rd, ld)
    classes = []
    for c in range(min(P, out)):
        J = -(-(out - c) // P)
        k0 = next((k for k in range(min(win, step)) if (c * stride - low + k * rd) % ld == 0), None)
        sub = None if k0 is None else (k0, len(range(k0, win, step)), -((c * stride - low + k0 * rd) // ld))
        classes.append((c, J, sub))
    return P, step, classes


class _PolyClass:
    """One residue class of a polyphase convolution (``_poly_plan``)."""
    __slots__ = ("out", "J", "rows", "taps", "kcols", "wsel", "strides", "pads", "rd", "view")


def _poly_plan(p, in_sizes):
    """The classes of plan p's convolution (product of the dimensions' classes)."""
    axes = [_poly_axis(p.out_sp[d], p.strides[d], p.pads[d][0], p.ld[d], p.rd[d], p.k_sizes[d])
            for d in range(p.n)]
    plan = []
    for combo in itertools.product(*(a[2] for a in axes)):
        q = _PolyClass()
        q.out = tuple(slice(c, None, P) for (c, _, _), (P, _, _) in zip(combo, axes))
        q.J = tuple(J for _, J, _ in combo)
        q.rows = p.out_b * math.prod(q.J)
        plan.append(q)
        if any(sub is None for _, _, sub in combo):
            q.taps = None   # zeros
            continue
        q.taps = tuple(sub[1] for _, _, sub in combo)
        q.kcols = math.prod(q.taps) * p.I
        q.wsel = tuple(slice(sub[0], sub[0] + (sub[1] - 1) * step + 1, step)
                       for (_, _, sub), (_, step, _) in zip(combo, axes))
        q.strides = tuple(s // math.gcd(s, ld) for s, ld in zip(p.strides, p.ld))
        q.rd = tuple(rd // math.gcd(rd, ld) for rd, ld in zip(p.rd, p.ld))
        q.pads = tuple((sub[2], 0) for _, _, sub in combo)
        # one cell inside the input: the patches are the input itself at these positions
        inside = all(t == 1 and -lo >= 0 and -lo + (J - 1) * s < n
                     for t, (lo, _), J, s, n in zip(q.taps, q.pads, q.J, q.strides, in_sizes))
        q.view = tuple(slice(-lo, -lo + (J - 1) * s + 1, s) for (lo, _), J, s in zip(q.pads, q.J, q.strides)) \
            if inside and p.is_float else None
    return plan


#: polyphase from this many output rows per residue class on (or with one class): each
#: class costs a pass of its own, about 10 us, where im2col's rows cost about 0.05 us each
#: more than the classes' (2 x 12 x 12 x 16 -> 2 x 24 x 24 x 16, lhs dilation 2, 4
#: classes: 127 us im2col, 113 us polyphase; at 8 x 8 in: 71 us, 91 us)
_POLY_ROWS = 256


def _poly_applies(p, lhs):
    """Whether plan p's convolution runs polyphase: some lhs dilation above 1, enough rows
    for its residue classes, operands and result not empty."""
    classes = math.prod(ld // math.gcd(s, ld) for s, ld in zip(p.strides, p.ld))
    return any(ld > 1 for ld in p.ld) and not p.wino and (classes == 1 or p.rows >= _POLY_ROWS * classes) \
        and math.prod(lhs.shape) > 0 and p.rows > 0 and p.kcols > 0 and p.Og > 0


def _kernel_matrix(w, groups, Og, I, k_sizes, ct, is_float):
    """w [O, I, window...] as the im2col product's [G, window * I, Og] matrix."""
    kcols = math.prod(k_sizes) * I
    wmat = np.moveaxis(w.reshape((groups, Og, I) + k_sizes), (1, 2), (-1, -2)).reshape(groups, kcols, Og)
    return np.ascontiguousarray(wmat.astype(ct, copy=False) if is_float or ct == np.int64 else _as_int(wmat))


def _view_product(p, x, wmat, q):
    """A one-cell class on a view of x: result [G, rows, Og], or None where the view is
    not one matrix BLAS takes."""
    mats = []
    for g in range(p.groups):
        xs = x[g * p.Bg:(g + 1) * p.Bg] if p.batch_groups else x
        v = xs[(slice(None),) + q.view + (slice(None) if p.batch_groups else slice(g * p.I, (g + 1) * p.I),)]
        try:
            mats.append(np.reshape(v, (q.rows, p.I), copy=False))
        except ValueError:
            return None
        if not _blas_matrices(mats[-1]):
            return None
    result = empty((p.groups, q.rows, p.Og), p.ct)
    for g, a in enumerate(mats):
        matmul(a, wmat[g], result[g])
    return result


def _poly_conv(p, x, w):
    """The convolution of plan p (lhs dilation above 1) class by class: [G, rows, Og]."""
    groups, Og, out_b, is_float, ct = p.groups, p.Og, p.out_b, p.is_float, p.ct
    full = empty((groups, out_b) + p.out_sp + (Og,), ct if is_float else np.int64)
    for q in p.poly:
        dst = full[(slice(None), slice(None)) + q.out]
        if q.taps is None:
            dst[...] = 0
            continue
        wmat = _kernel_matrix(w[(slice(None), slice(None)) + q.wsel], groups, Og, p.I, q.taps, ct, is_float)
        res = _view_product(p, x, wmat, q) if q.view is not None else None
        if res is None:
            res = _im2col_conv(x, w, wmat, groups, p.batch_groups, p.Bg, p.I, p.C, Og, q.J, q.taps, q.rows,
                               q.kcols, q.strides, q.pads, (1,) * p.n, q.rd, is_float, ct)
        dst[...] = res.reshape((groups, out_b) + q.J + (Og,))
    return full.reshape((groups, p.rows, Og))


#: (operand shapes and types, attributes) -> the dimension numbers and the geometry
_CONV_SETUPS = {}


def _conv_setup(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation, window_reversal,
                dimension_numbers):
    """spec's dimension numbers and ``_conv_geometry`` for these operands, remembered: they
    parse the labels and build Shapes, about 50 us a call -- a tenth of a small
    convolution's time."""
    key = (lhs.shape, lhs.dtype.str, rhs.shape, rhs.dtype.str,
           repr((window_strides, padding, lhs_dilation, rhs_dilation, window_reversal, dimension_numbers)))
    setup = _CONV_SETUPS.get(key)
    if setup is None:
        dn = spec._dimension_numbers("Convolution", dimension_numbers, lhs.ndim)
        setup = dn, spec._conv_geometry(
            "Convolution", Shape.of(lhs), Shape.of(rhs), window_strides=window_strides, padding=padding,
            lhs_dilation=lhs_dilation, rhs_dilation=rhs_dilation, window_reversal=window_reversal,
            dimension_numbers=dn)
        if len(_CONV_SETUPS) >= 256:
            _CONV_SETUPS.clear()
        _CONV_SETUPS[key] = setup
    return setup


class _ConvPlan:
    """What a convolution's computation depends on beyond its operands' values: the
    dimension numbers, the geometry, the compute type, the algorithm and the layouts --
    from the operands' shapes and types and the attributes (``_conv_plan``)."""
    __slots__ = ("dn", "strides", "pads", "ld", "rd", "n", "ct", "is_float", "groups", "batch_groups", "xperm",
                 "wperm", "flip", "C", "O", "I", "Og", "Bg", "out_b", "out_sp", "k_sizes", "rows", "kcols",
                 "wino", "wino_contig", "poly", "out_perm", "shape")


#: (operand shapes and types, result shape, attributes) -> its _ConvPlan
_CONV_PLANS = {}


def _conv_plan(lhs, rhs, shape, window_strides, padding, lhs_dilation, rhs_dilation, window_reversal,
               dimension_numbers, feature_group_count, batch_group_count):
    """The _ConvPlan of these operands (arrays, or probes of their shapes and types),
    remembered: parsing the labels, the geometry and the layouts cost about 70 us a call."""
    key = (lhs.shape, lhs.dtype.str, rhs.shape, rhs.dtype.str, shape, repr((
        window_strides, padding, lhs_dilation, rhs_dilation, window_reversal, dimension_numbers,
        feature_group_count, batch_group_count)))
    plan = _CONV_PLANS.get(key)
    if plan is not None:
        return plan
    dn, (strides, pads, ld, rd, rev) = _conv_setup(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                                                   window_reversal, dimension_numbers)
    p = _ConvPlan()
    p.dn, p.strides, p.pads, p.ld, p.rd, p.shape = dn, strides, pads, ld, rd, shape
    p.n = n = len(strides)
    t = shape.element_type
    types = (dtypes.from_numpy(lhs.dtype), dtypes.from_numpy(rhs.dtype))
    p.is_float = is_float = t in dtypes.FLOATING or t in dtypes.COMPLEX
    if is_float:
        p.ct = ct = np.dtype(_float_compute(t, *types))
    elif any(o in dtypes.FLOATING or o in dtypes.COMPLEX for o in types):
        p.ct = ct = np.dtype(np.int64)
    else:
        p.ct = ct = _as_int(np.empty(0, lhs.dtype)).dtype
    p.groups = groups = max(int(feature_group_count), int(batch_group_count))
    p.batch_groups = batch_groups = int(batch_group_count) > 1
    # canonical layouts: x[batch, spatial..., features], w[out_features, in_features, spatial...]
    p.xperm = (dn.input_batch_dimension, *dn.input_spatial_dimensions, dn.input_feature_dimension)
    p.wperm = tuple(dn.rhs_order)
    p.flip = tuple(2 + i for i in range(n) if rev[i])
    B, p.C = lhs.shape[p.xperm[0]], lhs.shape[p.xperm[-1]]
    wdims = tuple(rhs.shape[d] for d in p.wperm)
    p.O, p.I = wdims[0], wdims[1]
    p.Og, p.Bg = p.O // groups, (B // groups if batch_groups else B)
    p.out_b = shape.dims[dn.output_batch_dimension]
    p.out_sp = tuple(shape.dims[d] for d in dn.output_spatial_dimensions)
    p.k_sizes = tuple(wdims[2:])
    p.rows = p.out_b * math.prod(p.out_sp)   # output rows per group
    p.kcols = math.prod(p.k_sizes) * p.I      # patch length
    p.wino = _winograd_applies(n, p.k_sizes, strides, ld, rd, groups, is_float, ct, p.rows, p.C, p.O) \
        and math.prod(lhs.shape) > 0
    # Winograd copies x into its padded input anyway: from the (NCHW: transposed) view
    # itself where NumPy's strided copy is quick -- few features (an image's 3 channels: 3x
    # faster than transposing first) or a small input -- else from x made contiguous by the
    # tiled transposition first (NumPy's copy of a large transposed view is 4x slower)
    p.wino_contig = not (p.C <= 4 or math.prod(lhs.shape) <= 1 << 16)
    p.poly = _poly_plan(p, tuple(lhs.shape[d] for d in p.xperm[1:-1])) \
        if _poly_applies(p, lhs) else None
    canon = {dn.output_batch_dimension: 0, dn.output_feature_dimension: n + 1}
    for i, d in enumerate(dn.output_spatial_dimensions):
        canon[d] = 1 + i
    p.out_perm = [canon[d] for d in range(n + 2)]
    if len(_CONV_PLANS) >= 256:
        _CONV_PLANS.clear()
    _CONV_PLANS[key] = p
    return p


def _conv_compute(p, lhs, rhs):
    """The convolution of finite operands by its plan ``p``."""
    ct, groups, O, Og, out_b, out_sp = p.ct, p.groups, p.O, p.Og, p.out_b, p.out_sp
    xv = np.transpose(lhs, p.xperm)
    w = np.transpose(rhs, p.wperm)
    if p.flip:
        w = np.flip(w, axis=p.flip)
    if p.wino:
        x = contiguous(xv) if p.wino_contig else xv
        result = _winograd(x.astype(ct, copy=False), np.ascontiguousarray(w.astype(ct, copy=False)), p.pads,
                           out_sp, ct)[None]
        result = result.reshape((1, p.rows, O))
    else:  # im2col: w as [G, window..., I, Og] -> [G, kcols, Og]
        is_float = p.is_float
        x = contiguous(xv)
        x = x.astype(ct, copy=False) if is_float or ct == np.int64 else _as_int(x)
        if p.poly is not None:
            result = _poly_conv(p, x, w)
        else:
            wmat = _kernel_matrix(w, groups, Og, p.I, p.k_sizes, ct, is_float)
            result = _im2col_conv(x, w, wmat, groups, p.batch_groups, p.Bg, p.I, p.C, Og, out_sp, p.k_sizes, p.rows,
                                  p.kcols, p.strides, p.pads, p.ld, p.rd, is_float, ct)
    # [G, batch, spatial..., Og] -> [batch, spatial..., G * Og] -> the output layout
    if groups == 1:   # (the same view as moveaxis' of a unit dimension, without its 10 us)
        result = result.reshape((out_b,) + out_sp + (O,))
    else:
        result = np.moveaxis(result.reshape((groups, out_b) + out_sp + (Og,)), 0, -2).reshape(
            (out_b,) + out_sp + (O,))
    result = np.transpose(result, p.out_perm)
    # in the output's own layout now (NCHW: a transposition by the tiled copy), so that its
    # readers get a contiguous array
    return _finish(contiguous(result), p.shape)


def _conv_nonfinite(lhs, rhs, shape, attrs):
    """A convolution with an Inf or NaN operand: the reference's (padding's zeros and
    Winograd's sums as the reference has them)."""
    from ..reference import guard_reference
    guard_reference("convolution", (lhs, rhs), shape, dict(
        padding=attrs["padding"], lhs_dilation=attrs["lhs_dilation"], dimension_numbers=attrs["dimension_numbers"]))
    return spec._conv_reference(lhs, rhs, shape=shape, **attrs)


@kernel("convolution", note="im2col, polyphase (lhs dilation) or Winograd F(2x2,3x3) (Numba) + BLAS (np.matmul)")
def conv_kernel(lhs, rhs, *, shape, window_strides=(), padding=(), lhs_dilation=(), rhs_dilation=(),
                window_reversal=(), dimension_numbers=None, feature_group_count=1, batch_group_count=1,
                precision_config=None, preferred_element_type=None):
    lhs, rhs = np.asarray(lhs), np.asarray(rhs)
    if has_nonfinite(lhs, rhs):
        return _conv_nonfinite(lhs, rhs, shape, dict(
            window_strides=window_strides, padding=padding, lhs_dilation=lhs_dilation, rhs_dilation=rhs_dilation,
            window_reversal=window_reversal, dimension_numbers=dimension_numbers,
            feature_group_count=feature_group_count, batch_group_count=batch_group_count))
    return _conv_compute(_conv_plan(lhs, rhs, shape, window_strides, padding, lhs_dilation, rhs_dilation,
                                    window_reversal, dimension_numbers, feature_group_count, batch_group_count),
                         lhs, rhs)


def _conv_prepare(operand_shapes, *, shape, window_strides=(), padding=(), lhs_dilation=(), rhs_dilation=(),
                  window_reversal=(), dimension_numbers=None, feature_group_count=1, batch_group_count=1,
                  precision_config=None, preferred_element_type=None):
    """The run plan's hook (``numba_executor._op_step``): the convolution's _ConvPlan made once
    from the static shapes, then per call the same check for Inf / NaN and the same
    ``_conv_compute`` as the kernel (the same bits); operands of other shapes or types
    than the static ones go to the kernel."""
    if len(operand_shapes) != 2 or not shape.is_array or not shape.is_static \
            or not all(o.is_array and o.is_static for o in operand_shapes):
        return None
    ls, rs = operand_shapes
    lt, rt = np.dtype(ls.dtype), np.dtype(rs.dtype)
    ldims, rdims = tuple(ls.dims), tuple(rs.dims)
    attrs = dict(window_strides=window_strides, padding=padding, lhs_dilation=lhs_dilation, rhs_dilation=rhs_dilation,
                 window_reversal=window_reversal, dimension_numbers=dimension_numbers,
                 feature_group_count=feature_group_count, batch_group_count=batch_group_count)
    def probe(dims, dt):   # an array of these dims and type, without memory behind it
        return np.lib.stride_tricks.as_strided(np.zeros(1, dt), shape=dims, strides=(0,) * len(dims))
    plan = _conv_plan(probe(ldims, lt), probe(rdims, rt), shape, **attrs)

    def run(lhs, rhs):
        if type(lhs) is not np.ndarray or type(rhs) is not np.ndarray or lhs.dtype != lt or rhs.dtype != rt \
                or lhs.shape != ldims or rhs.shape != rdims:
            return conv_kernel(lhs, rhs, shape=shape, **attrs)
        if has_nonfinite(lhs, rhs):
            return _conv_nonfinite(lhs, rhs, shape, attrs)
        return _conv_compute(plan, lhs, rhs)
    return run


conv_kernel.prepare = _conv_prepare
#: the executor flushes the marked operands before the prepared function and its result
#: after, as around the kernel
conv_kernel.prepare_flushing = True


# ---------------------------------------------------------------------------------------
# Fft: NumPy's pocketfft, in the operand's precision (c64 stays single, as XLA:CPU's)

@kernel("fft", note="numpy.fft")
def fft_kernel(operand, *, shape, fft_type, fft_length):
    from ...ops.linalg import fft_nd
    x = np.asarray(operand)
    if 0 in shape.dims or 0 in x.shape:
        return np.zeros(shape.dims, shape.dtype)
    return fft_nd(x, fft_type, fft_length).astype(shape.dtype, copy=False)


# ---------------------------------------------------------------------------------------
# Cholesky: Cholesky-Crout per matrix (Numba), as the reference; LAPACK for big matrices

@njit(**_opts)
def _cholesky_one(a, l):
    """Lower Cholesky factor of a (its lower triangle read) into l (zeroed); returns False
    when a square root was NaN (not positive definite)."""
    n = a.shape[0]
    ok = True
    for j in range(n):
        s = a[j, j]
        for k in range(j):
            s -= l[j, k] * np.conj(l[j, k])
        d = np.sqrt(s.real)
        if d != d:
            ok = False
        l[j, j] = d
        for i in range(j + 1, n):
            v = a[i, j]
            for k in range(j):
                v -= l[i, k] * np.conj(l[j, k])
            l[i, j] = v / d
    return ok


@njit(**_opts)
def cholesky_batch(a, l):
    """l[b] = the lower factor of a[b]; a matrix whose factorisation fails is all NaN."""
    for b in range(a.shape[0]):
        if not _cholesky_one(a[b], l[b]):
            l[b] = np.nan


@njit(parallel=True, **_opts)
def cholesky_batch_par(a, l):
    for b in prange(a.shape[0]):
        if not _cholesky_one(a[b], l[b]):
            l[b] = np.nan


#: from this size on Cholesky tries LAPACK (numpy.linalg) first
_LAPACK_MIN = 128


@kernel("cholesky", note="Numba (numpy.linalg's LAPACK from n=128)")
def cholesky_kernel(a, *, shape, lower=False):
    acc = np.complex128 if shape.element_type in dtypes.COMPLEX else np.float64
    x = np.asarray(a).astype(acc)
    if not lower:  # as XLA: transpose (no conjugate), factor the lower triangle, transpose back
        x = np.swapaxes(x, -1, -2)
    n = x.shape[-1]
    batch = x.shape[:-2]
    x = np.ascontiguousarray(x).reshape((int(np.prod(batch, dtype=np.int64)), n, n))
    l = None
    if n >= _LAPACK_MIN:
        try:
            l = np.linalg.cholesky(x)  # reads the lower triangle; raises if any matrix fails
        except np.linalg.LinAlgError:
            l = None
    if l is None:
        l = np.zeros_like(x)
        if x.size:
            many = x.shape[0] > 1 and x.shape[0] * n ** 3 >= PARALLEL_THRESHOLD
            (cholesky_batch_par if many else cholesky_batch)(x, l)
    l = l.reshape(batch + (n, n))
    if not lower:
        l = np.swapaxes(l, -1, -2)
    return l.astype(shape.dtype)


# ---------------------------------------------------------------------------------------
# TriangularSolve: forward / back substitution (Numba), vectorised over b's columns

@njit(**_opts)
def _substitute_one(m, b, x, lower):
    n = m.shape[0]
    for step in range(n):
        i = step if lower else n - 1 - step
        row = x[i]
        row[:] = b[i]
        lo, hi = (0, i) if lower else (i + 1, n)
        for k in range(lo, hi):
            c = m[i, k]
            xk = x[k]
            for j in range(row.shape[0]):
                row[j] -= c * xk[j]
        d = m[i, i]
        for j in range(row.shape[0]):
            row[j] /= d


@njit(**_opts)
def substitute_batch(m, b, x, lower):
    """x[t] solves m[t] @ x[t] = b[t] for triangular m[t] (lower or upper)."""
    for t in range(m.shape[0]):
        _substitute_one(m[t], b[t], x[t], lower)


@njit(parallel=True, **_opts)
def substitute_batch_par(m, b, x, lower):
    for t in prange(m.shape[0]):
        _substitute_one(m[t], b[t], x[t], lower)


@kernel("triangular-solve", note="Numba substitution")
def triangular_solve_kernel(a, b, *, shape, left_side=False, lower=False, unit_diagonal=False,
                            transpose_a="NO_TRANSPOSE"):
    acc = np.complex128 if shape.element_type in dtypes.COMPLEX else np.float64
    a, b = np.asarray(a).astype(acc), np.asarray(b).astype(acc)
    n = a.shape[-1]
    tri = np.tril(a) if lower else np.triu(a)  # only this triangle of a is read
    if unit_diagonal:
        tri[..., np.arange(n), np.arange(n)] = 1
    op_a, op_lower = tri, lower
    if transpose_a != "NO_TRANSPOSE":
        op_a, op_lower = np.swapaxes(tri, -1, -2), not lower
        if transpose_a == "ADJOINT":
            op_a = np.conj(op_a)
    if not left_side:  # x @ op(a) = b  <=>  op(a)^T @ x^T = b^T
        op_a, op_lower, b = np.swapaxes(op_a, -1, -2), not op_lower, np.swapaxes(b, -1, -2)
    batch = b.shape[:-2]
    count = int(np.prod(batch, dtype=np.int64))
    m3 = np.ascontiguousarray(np.broadcast_to(op_a, batch + op_a.shape[-2:])).reshape((count,) + op_a.shape[-2:])
    b3 = np.ascontiguousarray(b).reshape((count,) + b.shape[-2:])
    x = np.empty_like(b3)
    if x.size:
        many = count > 1 and x.size * n >= PARALLEL_THRESHOLD
        (substitute_batch_par if many else substitute_batch)(m3, b3, x, op_lower)
    x = x.reshape(b.shape)
    if not left_side:
        x = np.swapaxes(x, -1, -2)
    return x.astype(shape.dtype)


# ---------------------------------------------------------------------------------------
# Batch norms: per-feature sums over [A, F, B] (feature in the middle), in float64

SUMS, CENTERED, AFFINE, GRAD = range(4)


@njit(**_opts)
def _bn_rows(mode, lo, hi, c, x, y, v1, v2, v3, v4, out, s1, s2):
    """Rows [lo, hi) of x[A, F, B] (float64) for one step of a batch norm (``mode``):

    SUMS      s1[c, f] += sum_j y[a, f, j]
    CENTERED  s1[c, f] += sum_j (x - v1_f)^2,  s2[c, f] += sum_j (x - v1_f) * y
    AFFINE    out = x * v1_f + v2_f
    GRAD      out = v2_f * (y - v3_f - v4_f * (x - v1_f))
    """
    F, Bn = x.shape[1], x.shape[2]
    for a in range(lo, hi):
        for f in range(F):
            xr, yr, orow = x[a, f], y[a, f], out[a, f]
            if mode == SUMS:
                t = 0.0
                for j in range(Bn):
                    t += yr[j]
                s1[c, f] += t
            elif mode == CENTERED:
                sxx = 0.0
                sxy = 0.0
                for j in range(Bn):
                    d = xr[j] - v1[f]
                    sxx += d * d
                    sxy += d * yr[j]
                s1[c, f] += sxx
                s2[c, f] += sxy
            elif mode == AFFINE:
                for j in range(Bn):
                    orow[j] = xr[j] * v1[f] + v2[f]
            else:
                for j in range(Bn):
                    orow[j] = v2[f] * (yr[j] - v3[f] - v4[f] * (xr[j] - v1[f]))


@njit(**_opts)
def batch_norm_step(mode, nchunks, x, y, v1, v2, v3, v4, out, s1, s2):
    _bn_rows(mode, 0, x.shape[0], 0, x, y, v1, v2, v3, v4, out, s1, s2)


@njit(parallel=True, **_opts)
def batch_norm_step_par(mode, nchunks, x, y, v1, v2, v3, v4, out, s1, s2):
    A = x.shape[0]
    per = (A + nchunks - 1) // nchunks
    for c in prange(nchunks):
        _bn_rows(mode, c * per, min(A, (c + 1) * per), c, x, y, v1, v2, v3, v4, out, s1, s2)


def _bn(mode, x, y=None, v1=None, v2=None, v3=None, v4=None, out=None):
    """Run one batch-norm step; returns (per-feature sums 1, sums 2)."""
    A, F, Bn = x.shape
    parallel = x.size >= PARALLEL_THRESHOLD and A > 1
    # the chunks' partial sums are joined: their count must not follow the load
    nchunks = max(1, min(A, 4 * split_threads())) if parallel else 1
    s1, s2 = np.zeros((nchunks, F)), np.zeros((nchunks, F))
    empty = np.zeros(F)
    args = [v if v is not None else empty for v in (v1, v2, v3, v4)]
    if x.size:
        (batch_norm_step_par if parallel else batch_norm_step)(
            mode, nchunks, x, x if y is None else y, *args, x if out is None else out, s1, s2)
    return s1.sum(axis=0), s2.sum(axis=0)


def _bn_view(x, feature_index):
    """x as float64 [A, F, B] with the feature dimension in the middle."""
    dims = x.shape
    A = int(np.prod(dims[:feature_index], dtype=np.int64))
    Bn = int(np.prod(dims[feature_index + 1:], dtype=np.int64))
    return np.ascontiguousarray(x, dtype=np.float64).reshape(A, dims[feature_index], Bn)


@kernel("batch-norm-training")
def bn_training_kernel(operand, scale, offset, *, shape, epsilon, feature_index):
    x = _bn_view(np.asarray(operand), feature_index)
    A, F, Bn = x.shape
    count = A * Bn
    with np.errstate(all="ignore"):
        mean = _bn(SUMS, x)[0] / count
        var = _bn(CENTERED, x, v1=mean)[0] / count
        mul = np.asarray(scale, np.float64) / np.sqrt(var + epsilon)
        add = np.asarray(offset, np.float64) - mean * mul
    t = shape.tuple_shapes[0].dtype
    y = np.empty(x.shape, np.float64)
    _bn(AFFINE, x, v1=mul, v2=add, out=y)
    return y.reshape(np.shape(operand)).astype(t), mean.astype(t), var.astype(t)


@kernel("batch-norm-inference")
def bn_inference_kernel(operand, scale, offset, mean, variance, *, shape, epsilon, feature_index):
    x = _bn_view(np.asarray(operand), feature_index)
    with np.errstate(all="ignore"):
        mul = np.asarray(scale, np.float64) / np.sqrt(np.asarray(variance, np.float64) + epsilon)
        add = np.asarray(offset, np.float64) - np.asarray(mean, np.float64) * mul
    y = np.empty(x.shape, np.float64)
    _bn(AFFINE, x, v1=mul, v2=add, out=y)
    return y.reshape(np.shape(operand)).astype(shape.dtype)


@kernel("batch-norm-grad")
def bn_grad_kernel(operand, scale, mean, variance, grad_output, *, shape, epsilon, feature_index):
    x = _bn_view(np.asarray(operand), feature_index)
    dy = _bn_view(np.asarray(grad_output), feature_index)
    A, F, Bn = x.shape
    count = A * Bn
    mean = np.asarray(mean, np.float64)
    var = np.asarray(variance, np.float64)
    with np.errstate(all="ignore"):
        sum_dy = _bn(SUMS, x, y=dy)[0]
        sum_xdy = _bn(CENTERED, x, y=dy, v1=mean)[1]
        inv_std = 1 / np.sqrt(var + epsilon)
        c_f = (sum_xdy / count) / (var + epsilon)
        coef = np.asarray(scale, np.float64) * inv_std
        grad_scale = sum_xdy * inv_std
        grad = np.empty(x.shape, np.float64)
        _bn(GRAD, x, y=dy, v1=mean, v2=coef, v3=sum_dy / count, v4=c_f, out=grad)
    t = shape.tuple_shapes[0].dtype
    return grad.reshape(np.shape(operand)).astype(t), grad_scale.astype(t), sum_dy.astype(t)
