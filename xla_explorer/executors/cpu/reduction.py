"""CPU kernels of the reduction family: Reduce, ReduceWindow, SelectAndScatter, Sort, TopK.

Two kinds of kernels, as XLA:CPU has them:

- *standard combiners* (a region that is one ``add`` / ``multiply`` / ``maximum`` /
  ``minimum`` / ``and`` / ``or`` / ``xor`` of its parameters, ``CompiledRegion.combiner``)
  run module-level kernels that take the combiner as a run-time code: one compile per
  element type, never per configuration.  Reduce views the operand as ``[A, R, B]``
  (kept, reduced, kept; one pass per group of reduced dimensions) so the inner loop is
  contiguous and vectorises; ReduceWindow vectorises over the trailing dimensions the
  window does not move along (the channels of NHWC pooling).
- any other region (variadic argmax, a sort comparator, a select) is *generated*: the
  region's instructions become a scalar Numba function (the element-wise emitters of the
  fused loops write its statements), and a kernel specialised to it is generated around
  it, written to the on-disk cache like a fused loop.  Those kernels combine in exactly
  the reference's order (a balanced pairwise tree over the window's cells in row-major
  order, skipped cells not counted, then ``region(init, tree)``), so even a region that is
  not associative gives the reference's bits.

Window geometry (strides, padding, dilations) arrives in every kernel as a run-time
array (``window_geometry``); per result coordinate a kernel lists the operand index each
window position reads along each dimension, -1 for padding and base-dilation holes.

Sort recognises the comparators JAX and ``Sort``'s default emit (a ``LT``/``GT`` on one key,
possibly through JAX's NaN / -0.0 canonicalisation and ``TOTALORDER``, several keys
compared lexicographically): their keys become integers ordered like the comparator and a
stable Numba sort orders them (an LSD radix sort for rows of 512 and more, a merge sort
below; several keys: one stable pass per key, the least significant first).  Any other
comparator gets a generated merge sort calling it (the reference's answer whenever the
comparator is a strict weak order).  TopK keeps the k best of each row in a small sorted
buffer (k <= 64) or sorts the row.

A region that cannot be compiled (an op without a scalar emitter, generated code Numba
rejects) runs the NumPy reference: slow, but right (``_FALLBACKS`` says why).
"""
import functools
import hashlib
import math
import pathlib
import threading
import weakref

import numpy as np

from ... import dtypes, fpenv
from ...ops import reduction as spec
from ...ops import registry
from ..jit_cache import load_source
from ..numba_setup import MOVE_PARALLEL_THRESHOLD, PARALLEL_THRESHOLD, numba, split_threads
from ..reference import Region
from ..scalar_lib import fmax, fmin
from . import kernel
from . import elementwise
from .elementwise import flush_denormals
from .shape import contiguous, empty, in_threads, product

nb = numba()
njit, prange = nb.njit, nb.prange
_opts = dict(cache=True, nogil=True, error_model="numpy")

#: standard combiner codes (run-time arguments of the module-level kernels)
ADD, MUL, MAX, MIN, AND, OR, XOR = range(7)
_CODES = {"add": ADD, "multiply": MUL, "maximum": MAX, "minimum": MIN, "and": AND, "or": OR, "xor": XOR}
#: on pred: add is or, multiply is and, maximum is or, minimum is and
_PRED_CODES = {ADD: OR, MUL: AND, MAX: OR, MIN: AND}
#: floats narrower than f32 compute in f32 (rounded back at the end)
_NARROW = {"bf16", "f16", "f8e4m3fn", "f8e5m2"}


def _threads():
    return nb.get_num_threads()


# ---------------------------------------------------------------------------------------
# Run-time helpers shared by the kernels

def _carrier(t):
    """The NumPy dtype an XLA type is computed in: f32 for the narrow floats, uint8 for
    pred (bits move unchanged), the type itself otherwise."""
    if t in _NARROW:
        return np.dtype(np.float32)
    if t == "pred":
        return np.dtype(np.uint8)
    return dtypes.to_numpy(t)


def _to_carrier(value, t):
    a = np.asarray(value)
    want = _carrier(t)
    if t == "pred":
        return contiguous(a).view(np.uint8)
    return contiguous(a.astype(want, copy=False))


def _from_carrier(a, t):
    if t == "pred":
        return a.view(np.bool_)
    want = dtypes.to_numpy(t)
    return a if a.dtype == want else a.astype(want)


def _kind(t):
    """Which module-level kernel family computes type ``t``: float, int or None (complex)."""
    if t in dtypes.FLOATING:
        return "float"
    if t in dtypes.INTEGRAL or t == "pred":
        return "int"
    return None


def _standard_code(region, t):
    """The combiner code of a one-op region on type ``t``, or None."""
    name = getattr(region, "combiner", None)
    code = _CODES.get(name)
    kind = _kind(t)
    if code is None or kind is None:
        return None
    if kind == "float" and code > MIN:
        return None
    if t in _NARROW and code in (ADD, MUL):
        return None  # rounded after every op, in the reference's order: the generated fold
    if t == "pred":
        code = _PRED_CODES.get(code, code)
    return code


def _reference_fallback(opcode, values, shape, attrs, why):
    """Run the NumPy reference (regions as reference ``Region``s): for regions that cannot
    be compiled.  Correct, slow; ``why`` is kept for ``explain_fallbacks``."""
    _FALLBACKS[opcode] = why
    from ..reference import guard_reference
    guard_reference(opcode, values, shape, attrs)
    bound = {}
    for k, v in attrs.items():
        if isinstance(v, Region):
            bound[k] = Region(v.computation, v.ctx)
        else:
            bound[k] = v
    return registry.get(opcode).reference(*values, shape=shape, **bound)


#: opcode -> why the last call ran the reference instead of a kernel (for the curious)
_FALLBACKS = {}

#: from this many contiguous elements per window cell on, ReduceWindow combines them as vectors
_VECTOR_BLOCK = 8


def window_geometry(in_dims, out_dims, wd, ws, pad, bd, wdl, block_trailing=False):
    """A window as the kernels read it: (nout, C, odims, geo, maxwin, ncell).

    ``geo[d]`` = (operand size, stride, low padding, base dilation, window dilation, window
    size, operand stride) of dimension d; with ``block_trailing`` the trailing dimensions
    the window does not move along (size 1, stride 1, no padding or dilation) are left out
    and form contiguous blocks of C elements (the channels of NHWC pooling), else C = 1.
    Each kernel derives, per result coordinate, the operand index every window position
    reads (``_axis_codes``), so nothing here grows with the window times the result."""
    rank = len(in_dims)
    k = rank
    if block_trailing:
        while k > 0 and wd[k - 1] == 1 and ws[k - 1] == 1 and tuple(pad[k - 1]) == (0, 0) and bd[k - 1] == 1 \
                and in_dims[k - 1] == out_dims[k - 1]:
            k -= 1
    C = product(in_dims[k:])
    istr = _strides(in_dims[:k]) * C
    geo = np.array([[in_dims[d], ws[d], pad[d][0], bd[d], wdl[d], wd[d], istr[d]] for d in range(k)],
                   np.int64).reshape(k, 7)
    odims = np.array(out_dims[:k], np.int64)
    nout = product(out_dims[:k])
    ncell = product(wd[:k])
    maxwin = max([int(w) for w in wd[:k]] + [1])
    return nout, C, odims, geo, maxwin, ncell


_window_geometry = functools.lru_cache(maxsize=256)(window_geometry)


@njit(**_opts)
def _axis_codes(o, g, codes):
    """codes[w] = the operand index window position w of result coordinate o reads along
    one dimension (g = geo[d]), or -1 for padding and base-dilation holes: the cell sits at
    p = o * stride + w * window_dilation in the padded, dilated operand; q = p - low
    padding is a real element q / base_dilation when inside and divisible."""
    size, stride, low, bdil, wdil, win = g[0], g[1], g[2], g[3], g[4], g[5]
    dilated = (size - 1) * bdil + 1 if size > 0 else 0
    q = o * stride - low
    for w in range(win):
        if q < 0 or q >= dilated:
            codes[w] = -1
        elif bdil == 1:
            codes[w] = q
        else:
            codes[w] = q // bdil if q % bdil == 0 else -1
        q += wdil


@njit(**_opts)
def _axis_real(o, g, offs):
    """offs[:n] = the operand offsets (index times stride) of the real cells of result
    coordinate o along one dimension, in window order; returns n."""
    size, stride, low, bdil, wdil, win, step = g[0], g[1], g[2], g[3], g[4], g[5], g[6]
    dilated = (size - 1) * bdil + 1 if size > 0 else 0
    q = o * stride - low
    n = 0
    for w in range(win):
        if 0 <= q < dilated and (bdil == 1 or q % bdil == 0):
            offs[n] = (q // bdil) * step
            n += 1
        q += wdil
    return n


@njit(**_opts)
def _first_coords(lo, odims, oc):
    r = lo
    for d in range(odims.shape[0] - 1, -1, -1):
        oc[d] = r % odims[d]
        r //= odims[d]


@njit(**_opts)
def _next_coords(odims, oc):
    """Advance the result coordinates in row-major order; returns the first dimension
    that changed (those after it changed too)."""
    d = odims.shape[0] - 1
    while d >= 0:
        oc[d] += 1
        if oc[d] < odims[d]:
            return d
        oc[d] = 0
        d -= 1
    return 0


@njit(**_opts)
def _window_offsets(vt, vn, wc, offs):
    """The operand offsets of the real cells of one window, in row-major window order,
    into offs; returns their count.  vt[d, :vn[d]] lists dimension d's real cells."""
    m = vn.shape[0]
    if m == 0:
        offs[0] = 0
        return 1
    for d in range(m):
        if vn[d] == 0:
            return 0
        wc[d] = 0
    last = m - 1
    lastrow = vt[last]
    nl = vn[last]
    nv = 0
    while True:
        off = 0
        for d in range(last):
            off += vt[d, wc[d]]
        for j in range(nl):
            offs[nv] = off + lastrow[j]
            nv += 1
        d = last - 1
        while d >= 0:
            wc[d] += 1
            if wc[d] < vn[d]:
                break
            wc[d] = 0
            d -= 1
        if d < 0:
            return nv


def _strides(dims):
    out = np.ones(len(dims), np.int64)
    for d in range(len(dims) - 2, -1, -1):
        out[d] = out[d + 1] * dims[d + 1]
    return out


def _chunks(n, parallel):
    """How many chunks a parallel loop over ``n`` items is cut into."""
    return max(1, min(n, 8 * _threads())) if parallel else 1


# ---------------------------------------------------------------------------------------
# Standard combiners: scalar folds (floats: NaN-propagating max/min as the reference)

# Indexing note: the loops index slices with their range variable (x[lo:hi][i]) rather than
# x[lo + i]: Numba then knows the index is not negative, drops the wrap-around test and
# LLVM vectorises the loop (3x on ReduceWindow measured).

@njit(fastmath={"reassoc"}, **_opts)
def _sum_range(xs, acc):
    # reassociation lets LLVM vectorise the sum (XLA reassociates reductions too)
    for i in range(xs.shape[0]):
        acc += xs[i]
    return acc


@njit(inline="always", **_opts)
def _halve(code, xs, h, dst):
    """dst[j] = xs[j] combined with xs[j + h], j < h (multiply, maximum, minimum); dst
    may be xs (each j reads j and j + h, writes j)."""
    if code == MUL:
        for j in range(h):
            dst[j] = xs[j] * xs[j + h]
    elif code == MAX:
        for j in range(h):
            dst[j] = fmax(xs[j], xs[j + h])
    else:
        for j in range(h):
            dst[j] = fmin(xs[j], xs[j + h])


@njit(inline="always", **_opts)
def _halve_plain(code, xs, h, dst):
    """``_halve`` of maximum / minimum by a plain comparison (one instruction a lane, where
    ``fmax`` takes six for its NaN and signed-zero rules); returns whether a NaN was seen
    (then the caller folds again with ``fmax``)."""
    seen = 0
    if code == MAX:
        for j in range(h):
            a, b = xs[j], xs[j + h]
            dst[j] = a if a > b else b
            seen |= (a != a) | (b != b)
    else:
        for j in range(h):
            a, b = xs[j], xs[j + h]
            dst[j] = a if a < b else b
            seen |= (a != a) | (b != b)
    return seen != 0


@njit(**_opts)
def _fold_halving(code, xs, acc, lanes, plain):
    """acc combined with xs (n >= 2) by halving: the two halves combined element-wise (a
    vectorised loop), then the halves of that, ...: a balanced tree, six times faster than
    16 running lanes (the same value up to which NaN's payload wins; products rounded in
    tree order).  ``plain``: maximum / minimum by plain comparisons; returns (value, True)
    unless a NaN or a zero result needs ``fmax``'s rules (value, False)."""
    n = xs.shape[0]
    if n % 2:
        acc = _op(code, acc, xs[n - 1])
    h = n // 2
    if plain:
        if _halve_plain(code, xs, h, lanes):
            return acc, False
    else:
        _halve(code, xs, h, lanes)
    m = h
    while m > 1:
        if m % 2:
            acc = _op(code, acc, lanes[m - 1])
        h = m // 2
        if plain:
            _halve_plain(code, lanes, h, lanes)
        else:
            _halve(code, lanes, h, lanes)
        m = h
    res = _op(code, acc, lanes[0])
    return res, not plain or res != 0


def _key_bits(xs):
    """(xs viewed as signed integers of its width, the magnitude mask, infinity's bits, the
    sign bit's position), all of that integer type (no widening in the loops): for f32 and
    f64, chosen when Numba compiles."""
    if xs.dtype == np.float32:
        return xs.view(np.int32), np.int32(0x7FFFFFFF), np.int32(0x7F800000), np.int32(31)
    return xs.view(np.int64), np.int64(0x7FFFFFFFFFFFFFFF), np.int64(0x7FF0000000000000), np.int64(63)


@nb.extending.overload(_key_bits, inline="always")
def _key_bits_impl(xs):
    if xs.dtype == nb.types.float32:
        return lambda xs: (xs.view(np.int32), np.int32(0x7FFFFFFF), np.int32(0x7F800000), np.int32(31))
    return lambda xs: (xs.view(np.int64), np.int64(0x7FFFFFFFFFFFFFFF), np.int64(0x7FF0000000000000), np.int64(63))


def _narrow(v, like):
    """v (an integer Numba widened to 64 bits) as the integer type of ``like``: keeps the
    key loops in 32-bit lanes for f32 (vpmaxsd: 1.5x faster than in 64-bit lanes)."""
    return type(like)(v)


@nb.extending.overload(_narrow, inline="always")
def _narrow_impl(v, like):
    if like == nb.types.int32:
        return lambda v, like: np.int32(v)
    return lambda v, like: np.int64(v)


@njit(**_opts)
def _max_keys(code, xs, acc, lanes):
    """acc combined with xs by maximum / minimum, computed on integer keys: the float's
    bits with the magnitude of the negative ones flipped order like the floats (-0.0 just
    below +0.0), and an integer maximum vectorises where a float one with NaN rules does
    not.  Returns (value, True), or (?, False) when a NaN is there (a magnitude above
    infinity's) or the result is a zero: then fmax's rules (which NaN, the sign of zero)
    decide.  The maximum of numbers does not depend on the order of combination, so
    otherwise it is the tree's value.  (The halving fold it replaces wrote half the row
    and spent two thirds of its time in its later, short passes.)  ``lanes``: scratch."""
    bits, mag, inf, sign = _key_bits(xs)
    best = bits[0] ^ ((bits[0] >> sign) & mag)
    high = bits[0] & mag
    best = _narrow(best, mag)
    high = _narrow(high, mag)
    if code == MAX:
        for i in range(bits.shape[0]):
            b = bits[i]
            best = max(best, _narrow(b ^ ((b >> sign) & mag), mag))
            high = max(high, _narrow(b & mag, mag))
    else:
        for i in range(bits.shape[0]):
            b = bits[i]
            best = min(best, _narrow(b ^ ((b >> sign) & mag), mag))
            high = max(high, _narrow(b & mag, mag))
    if high > inf:
        return acc, False
    out = _key_bits(lanes[:1])[0]
    out[0] = best ^ ((best >> sign) & mag)
    res = _op(code, acc, lanes[0])
    return res, res != 0


@njit(**_opts)
def _fold_float(code, x, lo, hi, acc, lanes):
    """acc combined with x[lo:hi] (floats: add, multiply, maximum, minimum); ``lanes`` is
    scratch space for half of x[lo:hi] (at least 16)."""
    xs = x[lo:hi]
    if code == ADD:
        return _sum_range(xs, acc)
    n = xs.shape[0]
    if n >= 32:
        if code != MUL:
            # plain comparisons first; a NaN or a zero maximum (whose sign fmax decides) is
            # folded again with fmax's rules
            res, ok = _max_keys(code, xs, acc, lanes)
            if ok:
                return res
        return _fold_halving(code, xs, acc, lanes, False)[0]
    for i in range(n):
        acc = _op(code, acc, xs[i])
    return acc


@njit(**_opts)
def _fold_int(code, x, lo, hi, acc):
    """acc combined with x[lo:hi] (integers wrap: the caller stores into the narrow type)."""
    xs = x[lo:hi]
    n = xs.shape[0]
    if code == ADD:
        for i in range(n):
            acc += xs[i]
    elif code == MUL:
        for i in range(n):
            acc *= xs[i]
    elif code == MAX:
        for i in range(n):
            acc = max(acc, xs[i])
    elif code == MIN:
        for i in range(n):
            acc = min(acc, xs[i])
    elif code == AND:
        for i in range(n):
            acc &= xs[i]
    elif code == OR:
        for i in range(n):
            acc |= xs[i]
    else:
        for i in range(n):
            acc ^= xs[i]
    return acc


@njit(inline="always", **_opts)
def _rows_float(code, x, base, out, obase, n):
    """out[obase:obase+n] combined element-wise with x[base:base+n] (vectorises)."""
    xs = x[base:base + n]
    os = out[obase:obase + n]
    if code == ADD:
        for b in range(n):
            os[b] += xs[b]
    elif code == MUL:
        for b in range(n):
            os[b] *= xs[b]
    elif code == MAX:
        for b in range(n):
            os[b] = fmax(os[b], xs[b])
    else:
        for b in range(n):
            os[b] = fmin(os[b], xs[b])


@njit(inline="always", **_opts)
def _rows_int(code, x, base, out, obase, n):
    xs = x[base:base + n]
    os = out[obase:obase + n]
    if code == ADD:
        for b in range(n):
            os[b] += xs[b]
    elif code == MUL:
        for b in range(n):
            os[b] *= xs[b]
    elif code == MAX:
        for b in range(n):
            os[b] = max(os[b], xs[b])
    elif code == MIN:
        for b in range(n):
            os[b] = min(os[b], xs[b])
    elif code == AND:
        for b in range(n):
            os[b] &= xs[b]
    elif code == OR:
        for b in range(n):
            os[b] |= xs[b]
    else:
        for b in range(n):
            os[b] ^= xs[b]


@njit(inline="always", **_opts)
def _rows_float_np(code, x, base, out, obase, n):
    """``_rows_float`` of maximum / minimum by NumPy's ``maximum`` / ``minimum``, which
    vectorise where ``fmax`` / ``fmin`` do not (6x slower on a column maximum: LLVM keeps
    their selects scalar).  Their values are fmax's / fmin's -- a NaN wins, the first of
    two NaNs -- except between +0.0 and -0.0 (the first operand, where fmax takes +0.0,
    fmin -0.0): ``_plain_undecided`` finds the results that may differ."""
    xs = x[base:base + n]
    os = out[obase:obase + n]
    if code == MAX:
        for b in range(n):
            os[b] = np.maximum(os[b], xs[b])
    else:
        for b in range(n):
            os[b] = np.minimum(os[b], xs[b])


@njit(inline="always", **_opts)
def _rows2_float(code, x, base, out, obase, n, np_max, step):
    """``_rows_float`` (``np_max``: ``_rows_float_np``) of two rows, x[base:] then
    x[base + step:] (step >= n), in one loop: each result element combined with the first row's, then
    the second's, the order of two passes (the same bits), reading two streams at once
    and the results once instead of twice."""
    x0 = x[base:base + n]
    x1 = x[base + step:base + step + n]
    os = out[obase:obase + n]
    if code == ADD:
        for b in range(n):
            os[b] = (os[b] + x0[b]) + x1[b]
    elif code == MUL:
        for b in range(n):
            os[b] = (os[b] * x0[b]) * x1[b]
    elif code == MAX:
        if np_max:
            for b in range(n):
                os[b] = np.maximum(np.maximum(os[b], x0[b]), x1[b])
        else:
            for b in range(n):
                os[b] = fmax(fmax(os[b], x0[b]), x1[b])
    else:
        if np_max:
            for b in range(n):
                os[b] = np.minimum(np.minimum(os[b], x0[b]), x1[b])
        else:
            for b in range(n):
                os[b] = fmin(fmin(os[b], x0[b]), x1[b])


@njit(inline="always", **_opts)
def _rows2_int(code, x, base, out, obase, n, step):
    """``_rows_int`` of two rows (x[base:], x[base + step:]) in one loop (integers: any order is exact)."""
    x0 = x[base:base + n]
    x1 = x[base + step:base + step + n]
    os = out[obase:obase + n]
    if code == ADD:
        for b in range(n):
            os[b] += x0[b] + x1[b]
    elif code == MUL:
        for b in range(n):
            os[b] *= x0[b] * x1[b]
    elif code == MAX:
        for b in range(n):
            os[b] = max(os[b], max(x0[b], x1[b]))
    elif code == MIN:
        for b in range(n):
            os[b] = min(os[b], min(x0[b], x1[b]))
    elif code == AND:
        for b in range(n):
            os[b] &= x0[b] & x1[b]
    elif code == OR:
        for b in range(n):
            os[b] |= x0[b] | x1[b]
    else:
        for b in range(n):
            os[b] ^= x0[b] ^ x1[b]


@njit(inline="always", **_opts)
def _rows4_float(code, x, base, out, obase, n, np_max, step):
    """``_rows2_float`` of four rows x[base + k * step:], k = 0..3, in one loop: each result
    combined with the rows in order (the bits of two ``_rows2_float``), the results read
    and written once for four rows (short rows: 1.4x faster than pairs, rows of 64)."""
    x0 = x[base:base + n]
    x1 = x[base + step:base + step + n]
    x2 = x[base + 2 * step:base + 2 * step + n]
    x3 = x[base + 3 * step:base + 3 * step + n]
    os = out[obase:obase + n]
    if code == ADD:
        for b in range(n):
            os[b] = (((os[b] + x0[b]) + x1[b]) + x2[b]) + x3[b]
    elif code == MUL:
        for b in range(n):
            os[b] = (((os[b] * x0[b]) * x1[b]) * x2[b]) * x3[b]
    elif code == MAX:
        if np_max:
            for b in range(n):
                os[b] = np.maximum(np.maximum(np.maximum(np.maximum(os[b], x0[b]), x1[b]), x2[b]), x3[b])
        else:
            for b in range(n):
                os[b] = fmax(fmax(fmax(fmax(os[b], x0[b]), x1[b]), x2[b]), x3[b])
    else:
        if np_max:
            for b in range(n):
                os[b] = np.minimum(np.minimum(np.minimum(np.minimum(os[b], x0[b]), x1[b]), x2[b]), x3[b])
        else:
            for b in range(n):
                os[b] = fmin(fmin(fmin(fmin(os[b], x0[b]), x1[b]), x2[b]), x3[b])


@njit(inline="always", **_opts)
def _rows4_int(code, x, base, out, obase, n, step):
    """``_rows2_int`` of four rows in one loop."""
    x0 = x[base:base + n]
    x1 = x[base + step:base + step + n]
    x2 = x[base + 2 * step:base + 2 * step + n]
    x3 = x[base + 3 * step:base + 3 * step + n]
    os = out[obase:obase + n]
    if code == ADD:
        for b in range(n):
            os[b] += (x0[b] + x1[b]) + (x2[b] + x3[b])
    elif code == MUL:
        for b in range(n):
            os[b] *= (x0[b] * x1[b]) * (x2[b] * x3[b])
    elif code == MAX:
        for b in range(n):
            os[b] = max(os[b], max(max(x0[b], x1[b]), max(x2[b], x3[b])))
    elif code == MIN:
        for b in range(n):
            os[b] = min(os[b], min(min(x0[b], x1[b]), min(x2[b], x3[b])))
    elif code == AND:
        for b in range(n):
            os[b] &= (x0[b] & x1[b]) & (x2[b] & x3[b])
    elif code == OR:
        for b in range(n):
            os[b] |= (x0[b] | x1[b]) | (x2[b] | x3[b])
    else:
        for b in range(n):
            os[b] ^= (x0[b] ^ x1[b]) ^ (x2[b] ^ x3[b])


def _rows4(code, x, base, out, obase, n, np_max, step):
    """Four rows at once: ``_rows4_float`` or ``_rows4_int`` by the element type."""
    if x.dtype.kind in "fc":
        _rows4_float.py_func(code, x, base, out, obase, n, np_max, step)
    else:
        _rows4_int.py_func(code, x, base, out, obase, n, step)


@nb.extending.overload(_rows4)
def _rows4_by_type(code, x, base, out, obase, n, np_max, step):
    if isinstance(x.dtype, nb.types.Float):
        return lambda code, x, base, out, obase, n, np_max, step: _rows4_float(code, x, base, out, obase, n, np_max,
                                                                              step)
    return lambda code, x, base, out, obase, n, np_max, step: _rows4_int(code, x, base, out, obase, n, step)


def _rows2(code, x, base, out, obase, n, np_max, step):
    """Two rows at once: ``_rows2_float`` or ``_rows2_int`` by the element type."""
    if x.dtype.kind in "fc":
        _rows2_float.py_func(code, x, base, out, obase, n, np_max, step)
    else:
        _rows2_int.py_func(code, x, base, out, obase, n, step)


@nb.extending.overload(_rows2)
def _rows2_by_type(code, x, base, out, obase, n, np_max, step):
    if isinstance(x.dtype, nb.types.Float):
        return lambda code, x, base, out, obase, n, np_max, step: _rows2_float(code, x, base, out, obase, n, np_max,
                                                                              step)
    return lambda code, x, base, out, obase, n, np_max, step: _rows2_int(code, x, base, out, obase, n, step)


def _rows_plain(code, x, base, out, obase, n):
    """Floats: ``_rows_float_np``; integers: ``_rows_int`` (exact)."""
    if x.dtype.kind in "fc":
        _rows_float_np.py_func(code, x, base, out, obase, n)
    else:
        _rows_int.py_func(code, x, base, out, obase, n)


@nb.extending.overload(_rows_plain, inline="always")
def _rows_plain_by_type(code, x, base, out, obase, n):
    if isinstance(x.dtype, nb.types.Float):
        return lambda code, x, base, out, obase, n: _rows_float_np(code, x, base, out, obase, n)
    return lambda code, x, base, out, obase, n: _rows_int(code, x, base, out, obase, n)


def _plain_undecided(x, os):
    """Whether ``_rows_plain`` may have kept other bits than ``fmax`` / ``fmin``: floats with
    a zero result (+0.0 or -0.0 is their rule); integers never."""
    if x.dtype.kind in "fc":
        return bool((os == 0).any())
    return False


@nb.extending.overload(_plain_undecided, inline="always")
def _plain_undecided_by_type(x, os):
    if isinstance(x.dtype, nb.types.Float):
        def impl(x, os):
            for b in range(os.shape[0]):
                if os[b] == 0:
                    return True
            return False
        return impl
    return lambda x, os: False


def _rows(code, x, base, out, obase, n):
    """``_rows_float`` or ``_rows_int`` by the element type (chosen when Numba compiles the
    caller, so one kernel body serves both; this Python body is for stepping through)."""
    (_rows_float if x.dtype.kind in "fc" else _rows_int).py_func(code, x, base, out, obase, n)


def _fold(code, x, lo, hi, acc, lanes):
    """``_fold_float`` (which uses ``lanes``) or ``_fold_int`` by the element type."""
    if x.dtype.kind in "fc":
        return _fold_float.py_func(code, x, lo, hi, acc, lanes)
    return _fold_int.py_func(code, x, lo, hi, acc)


@nb.extending.overload(_fold, inline="always")
def _fold_by_type(code, x, lo, hi, acc, lanes):
    if isinstance(x.dtype, (nb.types.Float, nb.types.Complex)):
        return lambda code, x, lo, hi, acc, lanes: _fold_float(code, x, lo, hi, acc, lanes)
    return lambda code, x, lo, hi, acc, lanes: _fold_int(code, x, lo, hi, acc)


@nb.extending.overload(_rows, inline="always")
def _rows_by_type(code, x, base, out, obase, n):
    if isinstance(x.dtype, (nb.types.Float, nb.types.Complex)):
        return lambda code, x, base, out, obase, n: _rows_float(code, x, base, out, obase, n)
    return lambda code, x, base, out, obase, n: _rows_int(code, x, base, out, obase, n)


# ---------------------------------------------------------------------------------------
# Reduce with a standard combiner: x viewed as [A, R, B], out as [A, P, B]
# (P > 1 cuts R into P parts for parallelism when A is small; a second pass joins them)

def _mag_bits(xs):
    """(xs viewed as unsigned integers of its width, the magnitude mask), of that type."""
    if xs.dtype == np.float32:
        return xs.view(np.uint32), np.uint32(0x7FFFFFFF)
    return xs.view(np.uint64), np.uint64(0x7FFFFFFFFFFFFFFF)


@nb.extending.overload(_mag_bits, inline="always")
def _mag_bits_impl(xs):
    if xs.dtype == nb.types.float32:
        return lambda xs: (xs.view(np.uint32), np.uint32(0x7FFFFFFF))
    return lambda xs: (xs.view(np.uint64), np.uint64(0x7FFFFFFFFFFFFFFF))


def _narrow_u(v, like):
    """v (an unsigned integer Numba widened to 64 bits) as the unsigned type of ``like``."""
    return type(like)(v)


@nb.extending.overload(_narrow_u, inline="always")
def _narrow_u_impl(v, like):
    if like == nb.types.uint32:
        return lambda v, like: np.uint32(v)
    return lambda v, like: np.uint64(v)


def _low_bits(x, tiny):
    """The bits of the magnitude ``tiny`` (> 0) less one, as ``_mag_bits``'s type (f32 /
    f64; other types: 0, never used): a magnitude m (its bits) is a nonzero denormal,
    0 < m < tiny, exactly when m - 1 (unsigned, wrapping at 0) is below it."""
    if x.dtype.kind != "f":
        return np.uint64(0)
    bits = np.array([tiny], x.dtype).view(_mag_bits(x[:0])[0].dtype)
    return bits[0] - bits.dtype.type(1)


@nb.extending.overload(_low_bits, inline="always")
def _low_bits_impl(x, tiny):
    if x.dtype in (nb.types.float32, nb.types.float64):
        def impl(x, tiny):
            s = np.empty(1, x.dtype)
            s[0] = tiny
            bits, mag = _mag_bits(s)
            return _narrow_u(bits[0] - _narrow_u(1, mag), mag)
        return impl
    return lambda x, tiny: np.uint64(0)


@njit(fastmath={"reassoc"}, **_opts)
def _sum_checked_float(xs, acc, low):
    """``_sum_checked`` of f32 / f64."""
    bits, mag = _mag_bits(xs)
    one = _narrow_u(1, mag)
    lowest = _narrow_u(mag | ~mag, mag)
    for i in range(xs.shape[0]):
        acc += xs[i]
        lowest = min(lowest, _narrow_u((bits[i] & mag) - one, mag))
    return acc, lowest < low


@njit(fastmath={"reassoc"}, **_opts)
def _sum_checked_other(xs, acc, tiny):
    den = False
    for i in range(xs.shape[0]):
        a = xs[i]
        acc += a
        den |= (abs(a) < tiny) & (a != 0)
    return acc, den


def _sum_checked(xs, acc, low):
    """``_sum_range`` that also tells whether xs holds a denormal (0 < |x| < tiny, ``low``
    from ``_low_bits``): the flushing environment's check of the operand, in the same pass
    over it.  The check is an unsigned minimum of the magnitudes' bits less one (three
    integer instructions a vector, where the float tests abs(a) < tiny, a != 0 took five:
    the checked sum was 1.4x slower than the plain one).  Other types (never checked: the
    caller's ``tiny`` is 0) fold as before."""
    if xs.dtype.kind == "f":
        return _sum_checked_float.py_func(xs, acc, low)
    return _sum_checked_other.py_func(xs, acc, 0)


@nb.extending.overload(_sum_checked, inline="always")
def _sum_checked_by_type(xs, acc, low):
    if xs.dtype in (nb.types.float32, nb.types.float64):
        return lambda xs, acc, low: _sum_checked_float(xs, acc, low)
    return lambda xs, acc, low: _sum_checked_other(xs, acc, 0)


@njit(**_opts)
def _denormal_float(bits, mag, low):
    """``_has_denormal`` of f32 / f64 by ``_sum_checked``'s integer test, on their bits."""
    one = _narrow_u(1, mag)
    lowest = _narrow_u(mag | ~mag, mag)
    for i in range(bits.shape[0]):
        lowest = min(lowest, _narrow_u((bits[i] & mag) - one, mag))
    return lowest < low


def _denormal_below(bits, mag, low):
    """Whether ``bits`` (``_mag_bits``'s view of f32 / f64, magnitude mask ``mag``) holds a
    nonzero denormal, ``low`` from ``_low_bits``; other types: False (never checked)."""
    if bits.dtype.kind == "u" and mag.dtype == bits.dtype:
        return _denormal_float.py_func(bits, mag, low)
    return False


@nb.extending.overload(_denormal_below, inline="always")
def _denormal_below_by_type(bits, mag, low):
    if bits.dtype in (nb.types.uint32, nb.types.uint64) and mag == bits.dtype:
        return lambda bits, mag, low: _denormal_float(bits, mag, low)
    return lambda bits, mag, low: False


def _check_bits(x):
    """(x's ``_mag_bits`` view, its mask) for f32 / f64; (x, 0) for other types (their
    check answers False)."""
    if x.dtype.kind == "f":
        return _mag_bits(x)
    return x, 0


@nb.extending.overload(_check_bits, inline="always")
def _check_bits_impl(x):
    if x.dtype in (nb.types.float32, nb.types.float64):
        return lambda x: _mag_bits(x)
    return lambda x: (x, np.int64(0))


@njit(inline="always", **_opts)
def _cols_fold(code, x, base, stride, r0, start, r1, n, out, obase, init, use_init, xb, mag, tiny, low):
    """out[obase:obase + n] = rows [r0, r1) of x (row r: x[base + r * stride:][:n]) folded
    element-wise, row after row (from row ``start``, after init or row r0); returns whether
    a denormal was read (``tiny`` > 0 only, and then n == stride: whole rows)."""
    den = False
    first = base + r0 * stride
    for b in range(n):
        out[obase + b] = init if use_init else x[first + b]
    if tiny > 0:
        den = _denormal_below(xb[first:first + n], mag, low)
    # (rows two at a time: ``_rows2``, the same order of combination as row by row)
    if code == MAX or code == MIN:
        # NumPy's maximum / minimum: fmax's / fmin's bits unless a result is a zero
        # (which sign): then the rows are folded again by fmax / fmin
        r = start
        while r + 3 < r1:
            _rows4(code, x, base + r * stride, out, obase, n, True, stride)
            r += 4
        while r + 1 < r1:
            _rows2(code, x, base + r * stride, out, obase, n, True, stride)
            r += 2
        if r < r1:
            _rows_plain(code, x, base + r * stride, out, obase, n)
        if not _plain_undecided(x, out[obase:obase + n]):
            return den
        for b in range(n):
            out[obase + b] = init if use_init else x[first + b]
    r = start
    while r < r1:
        k = 4 if r + 3 < r1 else 2 if r + 1 < r1 else 1
        if k == 4:
            _rows4(code, x, base + r * stride, out, obase, n, False, stride)
        elif k == 2:
            _rows2(code, x, base + r * stride, out, obase, n, False, stride)
        else:
            _rows(code, x, base + r * stride, out, obase, n)
        if tiny > 0:  # (the rows just read, still in cache)
            den |= _denormal_below(xb[base + r * stride:base + (r + k) * stride], mag, low)
        r += k
    return den


@njit(**_opts)
def _arb_task(x, A, R, B, P, code, init, use_init, out, t, chunk, lanes, tiny, low):
    """Part t % P of row t // P; returns whether a denormal was met (``tiny`` > 0 only)."""
    a = t // P
    p = t - a * P
    r0 = p * chunk
    r1 = min(R, r0 + chunk)
    start = r0 if use_init else r0 + 1
    den = False
    if B == 1:
        acc = init if use_init else x[a * R + r0]
        if code == ADD and tiny > 0:
            out[t], den = _sum_checked(x[a * R + start:a * R + r1], acc, low)
            den |= (abs(acc) < tiny) & (acc != 0)
        else:
            out[t] = _fold(code, x, a * R + start, a * R + r1, acc, lanes)
    else:
        xb, mag = _check_bits(x)  # (viewed once: a view a row cost 6 ns a row of 64)
        den = _cols_fold(code, x, a * R * B, B, r0, start, r1, B, out, t * B, init, use_init, xb, mag, tiny, low)
    return den


@njit(**_opts)
def _has_denormal(xs, tiny):
    den = False
    for i in range(xs.shape[0]):
        a = xs[i]
        den |= (abs(a) < tiny) & (a != 0)
    return den


#: rows of a maximum / minimum from this length on go two a loop (two streams read at
#: once); shorter rows one a loop (pairs measured slower on short rows)
_MAX_PAIR_MIN = 1024


@njit(**_opts)
def _max_rows_float(lo, hi, x, R, s, code, init, use_init, out, lanes, pair_min):
    """Rows [lo, hi) of x[A, R] folded by maximum / minimum (floats) as ``_fold`` folds each
    (``_max_keys``, else ``_fold``'s own path): the integer view made once, not per row
    (its slices cost ~40 ns a row: half a row of 256's time); rows of ``pair_min`` and more
    two a loop (each row's keys its own: the same bits).  Each row's key and magnitude
    maxima are kept, then decoded for all rows in one loop and combined with the init after
    it (that work done per row after its key loop, through a one-element scratch, cost as
    much as the loop on rows of 256: f32[4096, 256], one thread, 0.16 -> 0.09 ms)."""
    if R - s < 32:
        for t in range(lo, hi):
            out[t] = _fold(code, x, t * R + s, (t + 1) * R, init if use_init else x[t * R], lanes)
        return
    bits, mag, inf, sign = _key_bits(x)
    n = hi - lo
    keys = np.empty(max(n, 0), bits.dtype)
    highs = np.empty(max(n, 0), bits.dtype)
    t = lo
    while R - s >= pair_min and t + 1 < hi:
        r0 = bits[t * R + s:(t + 1) * R]
        r1 = bits[(t + 1) * R + s:(t + 2) * R]
        b0 = _narrow(r0[0] ^ ((r0[0] >> sign) & mag), mag)
        h0 = _narrow(r0[0] & mag, mag)
        b1 = _narrow(r1[0] ^ ((r1[0] >> sign) & mag), mag)
        h1 = _narrow(r1[0] & mag, mag)
        if code == MAX:
            for i in range(r0.shape[0]):
                u = r0[i]
                v = r1[i]
                b0 = max(b0, _narrow(u ^ ((u >> sign) & mag), mag))
                h0 = max(h0, _narrow(u & mag, mag))
                b1 = max(b1, _narrow(v ^ ((v >> sign) & mag), mag))
                h1 = max(h1, _narrow(v & mag, mag))
        else:
            for i in range(r0.shape[0]):
                u = r0[i]
                v = r1[i]
                b0 = min(b0, _narrow(u ^ ((u >> sign) & mag), mag))
                h0 = max(h0, _narrow(u & mag, mag))
                b1 = min(b1, _narrow(v ^ ((v >> sign) & mag), mag))
                h1 = max(h1, _narrow(v & mag, mag))
        keys[t - lo], highs[t - lo] = b0, h0
        keys[t + 1 - lo], highs[t + 1 - lo] = b1, h1
        t += 2
    for t in range(t, hi):
        row = bits[t * R + s:(t + 1) * R]
        best = _narrow(row[0] ^ ((row[0] >> sign) & mag), mag)
        high = _narrow(row[0] & mag, mag)
        if code == MAX:
            for i in range(row.shape[0]):
                b = row[i]
                best = max(best, _narrow(b ^ ((b >> sign) & mag), mag))
                high = max(high, _narrow(b & mag, mag))
        else:
            for i in range(row.shape[0]):
                b = row[i]
                best = min(best, _narrow(b ^ ((b >> sign) & mag), mag))
                high = max(high, _narrow(b & mag, mag))
        keys[t - lo], highs[t - lo] = best, high
    # the keys decoded into the results' bits, then each combined with its init (or first
    # element), or folded by ``_fold``'s rules where a NaN or a zero result needs them
    dec = np.empty(max(n, 0), x.dtype)
    db = _key_bits(dec)[0]
    for k in range(n):
        key = keys[k]
        db[k] = key ^ ((key >> sign) & mag)
    for k in range(n):
        t = lo + k
        acc = init if use_init else x[t * R]
        if highs[k] <= inf:
            res = _op(code, acc, dec[k])
            if res != 0:
                out[t] = res
                continue
        out[t] = _fold(code, x, t * R + s, (t + 1) * R, acc, lanes)


def _max_rows(lo, hi, x, R, s, code, init, use_init, out, lanes):
    """Floats: ``_max_rows_float``; integers: ``_fold`` row by row."""
    if x.dtype.kind == "f":
        return _max_rows_float.py_func(lo, hi, x, R, s, code, init, use_init, out, lanes, _MAX_PAIR_MIN)
    for t in range(lo, hi):
        acc = init if use_init else x[t * R]
        out[t] = _fold(code, x, t * R + s, (t + 1) * R, acc, lanes)


@nb.extending.overload(_max_rows)
def _max_rows_by_type(lo, hi, x, R, s, code, init, use_init, out, lanes):
    if isinstance(x.dtype, nb.types.Float):
        return lambda lo, hi, x, R, s, code, init, use_init, out, lanes: _max_rows_float(
            lo, hi, x, R, s, code, init, use_init, out, lanes, _MAX_PAIR_MIN)

    def impl(lo, hi, x, R, s, code, init, use_init, out, lanes):
        for t in range(lo, hi):
            acc = init if use_init else x[t * R]
            out[t] = _fold(code, x, t * R + s, (t + 1) * R, acc, lanes)
    return impl


@njit(fastmath={"reassoc"}, **_opts)
def _sum_pair(r0, r1, a, b):
    """``_sum_range`` of two rows of one length in one loop: the same vectorised loop for
    each (LLVM's lanes, their join and the tail's order as ``_sum_range``'s, so the same
    bits: tests/test_numba_reduce_fast.py holds them equal for every length up to 130 and
    long rows), reading two streams from memory at once."""
    for i in range(r0.shape[0]):
        a += r0[i]
        b += r1[i]
    return a, b


@njit(inline="always", **_opts)
def _sum_rows(lo, hi, x, R, s, init, use_init, out, tiny, low, den):
    """Rows [lo, hi) of x[A, R] summed (from element s, after acc = init or the row's first
    element), two rows at a time (``_sum_pair``: a memory-bound sum of 32-128 MiB read
    two streams at once, one stream being slower on this project's EPYC).  ``tiny`` > 0
    (floats under flushing): den[t] tells whether row t (or its pair) holds a denormal,
    checked on the pair's bits just read (in cache; the check inside the sum's loop would
    change how LLVM vectorises it, and so the bits)."""
    xb, mag = _check_bits(x)
    init_den = use_init and tiny > 0 and (abs(init) < tiny) & (init != 0)
    t = lo
    # (pairs where they pay: rows up to 1024, where the one-row loop's per-row cost shows
    # -- 3x faster at 32, 1.1x at 512 -- or an operand of 16 MiB and more, read from memory;
    # rows of 2048 in cache ran 15% slower in pairs: the check is a second pass over them)
    paired = R <= 1024 or x.shape[0] >= (1 << 22)
    while paired and t + 1 < hi:
        a0 = init if use_init else x[t * R]
        a1 = init if use_init else x[(t + 1) * R]
        out[t], out[t + 1] = _sum_pair(x[t * R + s:(t + 1) * R], x[(t + 1) * R + s:(t + 2) * R], a0, a1)
        if tiny > 0:
            d = init_den or _denormal_below(xb[t * R:(t + 2) * R], mag, low)
            den[t] = d
            den[t + 1] = d
        t += 2
    for t in range(t, hi):
        acc = init if use_init else x[t * R]
        if tiny > 0:
            out[t], d = _sum_checked(x[t * R + s:(t + 1) * R], acc, low)
            den[t] = d | ((abs(acc) < tiny) & (acc != 0))
        else:
            out[t] = _sum_range(x[t * R + s:(t + 1) * R], acc)


@njit(**_opts)
def _arb_chunk(lo, hi, x, A, R, B, P, code, init, use_init, out, tiny, den):
    """Tasks [lo, hi) of reducing x[A, R, B] over R (cut in P parts) into out[A, P, B].
    Task t is part t % P of row t // P.  ``tiny`` > 0 (float sums under flushing): den[t]
    tells whether task t read a denormal (the caller flushes and reduces again)."""
    chunk = (R + P - 1) // P
    lanes = np.empty(max(16, chunk // 2 + 1), x.dtype)
    low = _low_bits(x, tiny) if tiny > 0 else _low_bits(x, 1)
    if B == 1 and P == 1:
        # whole contiguous rows (the common case), without the per-task divisions and with
        # the sum's vectorised loop inlined: over 2x faster on rows of 512
        s = 0 if use_init else 1
        if code == MAX or code == MIN:
            _max_rows(lo, hi, x, R, s, code, init, use_init, out, lanes)
            return
        if code == ADD:
            _sum_rows(lo, hi, x, R, s, init, use_init, out, tiny, low, den)
            return
        for t in range(lo, hi):
            acc = init if use_init else x[t * R]
            out[t] = _fold(code, x, t * R + s, (t + 1) * R, acc, lanes)
        return
    for t in range(lo, hi):
        den[t] = _arb_task(x, A, R, B, P, code, init, use_init, out, t, chunk, lanes, tiny, low)


@njit(**_opts)
def _cols_chunk(lo, hi, x, A, R, B, per, code, init, use_init, out):
    """Tasks [lo, hi) of reducing x[A, R, B] over R into out[A, B] (no denormal check):
    task t folds columns [k * per, (k + 1) * per) of x[a] (a, k = divmod(t, blocks)), each
    column in the order of ``_arb_task``'s (the same bits), so that a few long-column folds
    (A small, R too short to cut) run in several threads."""
    nblk = (B + per - 1) // per
    xb, mag = _check_bits(x)
    low = _low_bits(x, 1)
    tiny = x.dtype.type(0)
    start = 0 if use_init else 1
    for t in range(lo, hi):
        a = t // nblk
        b0 = (t - a * nblk) * per
        n = min(B, b0 + per) - b0
        _cols_fold(code, x, a * R * B + b0, B, 0, start, R, n, out, a * B + b0, init, use_init, xb, mag, tiny, low)


def reduce_arb(x, A, R, B, P, code, init, use_init, out, parallel=False, tiny=None):
    """Reduce x[A, R, B] over R (cut in P parts) into out[A, P, B].  With ``parallel`` the
    A * P tasks are cut into one part per thread, run by Python threads on the one
    compiled (nogil) function (``shape.in_threads``): a ``prange`` twin would cost almost
    2 s more compilation on a cold cache.  ``tiny``: (float sums under flushing) the
    smallest normal; returns whether a denormal was read."""
    den = np.zeros(A * P, np.bool_)
    t = x.dtype.type(0 if tiny is None else tiny)
    in_threads(_arb_chunk, A * P, parallel, x, A, R, B, P, code, init, use_init, out, t, den)
    return bool(den.any())


@functools.lru_cache(maxsize=512)
def _reduce_groups(dims, reduced):
    """Collapse ``dims`` into alternating groups [(size, is_reduced)], size-1 dims dropped."""
    groups = []
    for d, n in enumerate(dims):
        if n == 1:
            continue
        r = d in reduced
        if groups and groups[-1][1] == r:
            groups[-1] = (groups[-1][0] * n, r)
        else:
            groups.append((n, r))
    return tuple(groups)


def row_parts(A, R, n):
    """How many parts ``_arb_pass`` cuts each of A rows of R into (n: the pass's elements),
    each folded from its first element, joined by a second fold: 1 unless the pass runs in
    threads (MOVE_PARALLEL_THRESHOLD) and the rows are fewer than four a thread.  The parts
    change a float sum's rounding, so every path folding these rows (``numba_executor
    ._fused_reduce``'s loop) cuts them here, by the thread count ``split_threads`` gives
    (not the load)."""
    want = 4 * split_threads()
    if n < MOVE_PARALLEL_THRESHOLD or A >= want:
        return 1
    P = max(1, min(-(-want // A), R // 1024))
    return -(-R // -(-R // P))   # (parts of ceil(R / P): no part left empty)


#: rows cut in parts (``row_parts``: a whole-array sum) run their parts in threads from this
#: many elements on; below, in the calling thread -- the same parts, so the same bits.  A
#: launch of the threads costs 14 us while they are busy, 65-75 us once they have idled a
#: few milliseconds (this project's 2-core VM); the f32 sum of 1M elements, P = 8, median us
#: serial / in threads: 49-60 / 94-140 in cache, 264-275 / 206-352 from memory; 2M 105-122 /
#: 93-162; 4M 234-295 / 273-274; 8M 503-977 / 642-769
PARTS_PARALLEL = 1 << 22


def _arb_pass(x, A, R, B, code, init, use_init, tiny=None):
    """One reduction of x[A, R, B] over R; returns out[A, B] (flat), or None when ``tiny``
    (float sums under flushing: the smallest normal) is given and x holds a denormal."""
    n = A * R * B
    P = row_parts(A, R, n)
    parallel = n >= (MOVE_PARALLEL_THRESHOLD if P == 1 else PARTS_PARALLEL) and A * P > 1
    if P == 1 and tiny is None and B >= 1024 and A < 4 * split_threads() and n >= MOVE_PARALLEL_THRESHOLD:
        # few long columns, R too short to cut: the columns cut in blocks (of 512 and more)
        # instead, a block a task (every column folded as one task would: the same bits)
        per = max(512, -(-B * A // (4 * split_threads())))
        per = -(-per // 16) * 16
        out = np.empty(A * B, x.dtype)
        in_threads(_cols_chunk, A * (-(-B // per)), True, x, A, R, B, per, code, init, use_init, out)
        return out
    out = np.empty(A * P * B, x.dtype)
    if reduce_arb(x, A, R, B, P, code, init, use_init and P == 1, out, parallel, tiny):
        return None
    if P > 1:  # join the parts: [A, P, B] over P
        out2 = np.empty(A * B, x.dtype)
        reduce_arb(out, A, P, B, 1, code, init, use_init, out2)
        out = out2
    return out


@njit(**_opts)
def _init_each(lo, hi, x, code, init, out, tiny, den):
    """out[i] = init combined with x[i], i in [lo, hi): a reduce over dimensions of size 1
    (``_fold`` of one element: ``acc = init`` then one ``_combine``, the same bits).  One
    loop per combiner, so that each vectorises.  ``tiny`` > 0 (float sums under flushing):
    den[0] is set when the part reads a denormal (only ever set: parts run in threads)."""
    xs = x[lo:hi]
    o = out[lo:hi]
    n = xs.shape[0]
    if tiny > 0 and _has_denormal(xs, tiny):
        den[0] = True
    if code == ADD:
        for i in range(n):
            o[i] = _combine(ADD, init, xs[i])
    elif code == MUL:
        for i in range(n):
            o[i] = _combine(MUL, init, xs[i])
    elif code == MAX:
        for i in range(n):
            o[i] = _combine(MAX, init, xs[i])
    elif code == MIN:
        for i in range(n):
            o[i] = _combine(MIN, init, xs[i])
    else:
        for i in range(n):
            o[i] = _combine(code, init, xs[i])


def _init_combined(x, code, init, tiny=None):
    """Reduce of flat carrier ``x`` over nothing (every reduced dimension has size 1): each
    element combined with ``init``, one element-wise pass (a fold per element was 12 ns an
    element: the pred[2048,64,1] reduce-and of ``take_along_axis``'s bounds check took 1.6
    ms).  None, as ``_arb_pass``, when ``tiny`` is given and x holds a denormal."""
    out = np.empty(x.size, x.dtype)
    den = np.zeros(1, np.bool_)
    t = x.dtype.type(0 if tiny is None else tiny)
    in_threads(_init_each, x.size, x.size >= MOVE_PARALLEL_THRESHOLD, x, code, init, out, t, den)
    return None if den[0] else out


def _next_group(groups, code, dtype):
    """The reduced group the next pass folds: the last (the rows, when it ends the shape),
    except where the order of combination does not change the result (maximum, minimum,
    the bitwise ops; integers) and the rows are short (up to 1024): there the reduced
    group before them goes first, a fold of columns of every later element (a vectorised
    pass over the operand: 2.2x faster than folding rows of 128 first, [64,128,128] over
    0 and 2), leaving the rows' fold a smaller array."""
    red = [k for k, (_, r) in enumerate(groups) if r]
    i = red[-1]
    if (len(red) < 2 or i != len(groups) - 1 or groups[i][0] > 1024
            or not (code in (MAX, MIN, AND, OR, XOR) or dtype.kind in "biu")):
        return i
    j = red[-2]
    return j if product([s for s, _ in groups[j + 1:]]) >= 64 else i


def _reduce_standard(x, dims, reduced, code, init, tiny=None, reorder=True):
    """Reduce carrier array ``x`` over ``reduced`` with a standard combiner; flat result.
    ``tiny`` (float sums under flushing): the smallest normal: None is returned when x
    holds a denormal (checked in the first pass over x, the only one reading it).
    ``reorder``: the passes may go in ``_next_group``'s order (a float result holding a NaN
    is then reduced again in the plain order: which NaN's payload wins depends on it)."""
    groups = list(_reduce_groups(tuple(dims), frozenset(reduced)))
    x0 = x = x.reshape(-1)
    if not any(r for _, r in groups):  # nothing (or only size-1 dimensions) reduced
        return _init_combined(x, code, init, tiny)
    moved = False
    while True:
        i = _next_group(groups, code, x.dtype) if reorder else max(k for k, (_, r) in enumerate(groups) if r)
        moved |= i != max(k for k, (_, r) in enumerate(groups) if r)
        last = sum(1 for _, r in groups if r) == 1
        A = product([s for s, _ in groups[:i]])
        B = product([s for s, _ in groups[i + 1:]])
        x = _arb_pass(x, A, groups[i][0], B, code, init, last, tiny)
        if last and moved and x.dtype.kind == "f" and np.isnan(x).any():
            return _reduce_standard(x0, dims, reduced, code, init, None, False)
        if last or x is None:
            return x
        tiny = None
        # drop the reduced group; its neighbours (both kept) merge
        rest = groups[:i] + groups[i + 1:]
        groups = []
        for s, r in rest:
            if groups and groups[-1][1] == r:
                groups[-1] = (groups[-1][0] * s, r)
            else:
                groups.append((s, r))


# ---------------------------------------------------------------------------------------
# ReduceWindow with a standard combiner: the trailing dimensions the window does not move
# along form a contiguous block of C elements, combined as vectors

@njit(inline="always", **_opts)
def _slides(o, g):
    """Whether the window at result coordinate o (o >= 1) and at o - 1 lies wholly inside
    the operand along one dimension (g = geo[d]), without base dilation: then its cells
    are those at o - 1 moved by one stride."""
    size, stride, low, bdil, wdil, win = g[0], g[1], g[2], g[3], g[4], g[5]
    q = o * stride - low
    return bdil == 1 and o >= 1 and q - stride >= 0 and q + (win - 1) * wdil < size


@njit(**_opts)
def _rw_chunk(lo, hi, code, x, C, odims, geo, maxwin, ncell, init, out, tiny, found):
    """Results [lo, hi), blocks of C.  ``tiny`` > 0: also whether the operand holds a
    denormal (0 < |v| < tiny; found[0] = 1 then, and the caller runs again on the flushed
    operand), checked a slab of the first windowed dimension at a time as the windows
    first reach it (each once, just before the folds read it from the cache)."""
    m = odims.shape[0]
    den = False
    last = -1                       # the last slab of the first windowed dimension checked
    vt0 = np.empty(maxwin, np.int64)
    if tiny > 0 and m == 0:
        den = _has_denormal(x, tiny)
    oc = np.empty(m, np.int64)
    wc = np.empty(m, np.int64)
    vt = np.empty((m, maxwin), np.int64)
    vn = np.empty(m, np.int64)
    offs = np.empty(max(ncell, 1), np.int64)
    acc = np.empty(C, out.dtype)  # the block is combined here (in cache), then stored once
    _first_coords(lo, odims, oc)
    changed = 0
    nv = -1
    for o in range(lo, hi):
        if nv >= 0 and changed == m - 1 and _slides(oc[m - 1], geo[m - 1]):
            # the window moved along the last dimension, inside the operand before and
            # after: every cell's offset moves by the same step
            step = geo[m - 1, 1] * geo[m - 1, 6]
            for v in range(nv):
                offs[v] += step
        else:
            for d in range(changed, m):
                vn[d] = _axis_real(oc[d], geo[d], vt[d])
            nv = _window_offsets(vt, vn, wc, offs)
        if tiny > 0 and changed == 0 and m > 0:
            slab = geo[0, 6]
            for v in range(_axis_real(oc[0], geo[0], vt0)):
                if vt0[v] > last:
                    den |= _has_denormal(x[vt0[v]:vt0[v] + slab], tiny)
                    last = vt0[v]
        for c in range(C):
            acc[c] = init
        if code == ADD:  # the common case, without a branch per cell
            for v in range(nv):
                xs = x[offs[v]:offs[v] + C]
                for c in range(C):
                    acc[c] += xs[c]
        elif code == MAX:   # (``_vmax``: fmax's values, vectorised)
            for v in range(nv):
                xs = x[offs[v]:offs[v] + C]
                for c in range(C):
                    acc[c] = _vmax(acc[c], xs[c])
        elif code == MIN:
            for v in range(nv):
                xs = x[offs[v]:offs[v] + C]
                for c in range(C):
                    acc[c] = _vmin(acc[c], xs[c])
        else:
            for v in range(nv):
                _run(code, x, offs[v], acc)
        os = out[o * C:(o + 1) * C]
        for c in range(C):
            os[c] = acc[c]
        changed = _next_coords(odims, oc)
    if den:
        found[0] = 1


def reduce_window(nout, nchunks, code, x, C, odims, geo, maxwin, ncell, init, out, tiny=0, found=None):
    """ReduceWindow with a standard combiner: result position o (of nout, each a block of C contiguous
    elements) folds the real cells of its window, in row-major order.  With nchunks > 1
    the positions are cut into one contiguous part per thread, run by Python threads
    (``shape.in_threads``) on the one compiled (nogil) function: a ``prange`` wrapper
    would cost a second compilation of over a second on a cold cache."""
    if found is None:
        found = np.zeros(1, np.uint8)
    in_threads(_rw_chunk, nout, nchunks > 1, code, x, C, odims, geo, maxwin, ncell, init, out,
               x.dtype.type(tiny) if x.dtype.kind == "f" else x.dtype.type(0), found)


# ---------------------------------------------------------------------------------------
# ReduceWindow with a standard combiner, separably: one pass per windowed dimension
#
# A standard combiner is associative and commutative, so the fold over a window's real cells
# is the fold, along the last windowed dimension, of the folds along the others: one 1-D
# reduce-window per windowed dimension (the last first), each reading [A, N, B] and writing
# [A, M, B].  Along the contiguous dimension (B = 1) a pass combines whole result rows with
# shifted input rows (vectorised over the result row, NCHW pooling); along another one
# (B > 1) it combines rows of B.  A 3x3 window costs 3 + 3 combines a result instead of 9.
# Empty partial windows hold the combiner's identity (-0.0 for float sums, -inf for max,
# ...); the last pass starts from ``init``, so a result is init combined with its real
# cells, as the reference folds them.  Floats are summed in another order than the
# reference's (within its tolerance); integers give the same bits.  The leading dimensions
# the window does not touch are items (channel planes): each thread runs all the passes of
# its items through two scratch buffers that stay in cache.

@njit(inline="always", **_opts)
def _vmax(a, b):
    """``fmax(a, b)`` bit for bit, in a form LLVM vectorises (``fmax``'s selects stay scalar:
    2-3x slower on a pooling's rows): NumPy's maximum -- the first NaN, else the larger,
    else (a tie) a -- and for two zeros their sum, +0.0 unless both are -0.0, as fmax
    has it.  Integers: the larger (the zero case is 0 + 0)."""
    r = np.maximum(a, b)
    return (a + b) if (a == 0) & (b == 0) else r


@njit(inline="always", **_opts)
def _vmin(a, b):
    """``fmin(a, b)`` bit for bit, vectorised as ``_vmax``: for two zeros -((-a) - b), -0.0
    unless both are +0.0."""
    r = np.minimum(a, b)
    return -((-a) - b) if (a == 0) & (b == 0) else r


@njit(**_opts)
def _op(code, a, b):
    if code == ADD:
        return a + b
    if code == MUL:
        return a * b
    if code == MAX:
        return fmax(a, b)
    return fmin(a, b)


@njit(**_opts)
def _op_int(code, a, b):
    if code == ADD:
        return a + b
    if code == MUL:
        return a * b
    if code == MAX:
        return max(a, b)
    if code == MIN:
        return min(a, b)
    if code == AND:
        return a & b
    if code == OR:
        return a | b
    return a ^ b


def _combine(code, a, b):
    """``_op`` or ``_op_int`` by the element type (chosen when Numba compiles the caller)."""
    return (_op if isinstance(a, (float, np.floating)) else _op_int).py_func(code, a, b)


@nb.extending.overload(_combine)
def _combine_by_type(code, a, b):
    if isinstance(a, nb.types.Float):
        return lambda code, a, b: _op(code, a, b)
    return lambda code, a, b: _op_int(code, a, b)


@njit(**_opts)
def _run_float(code, src, base, os):
    """os combined element-wise with src[base:base + len(os)] (floats).  A function of its
    own, not inlined at Numba's level: each of the passes' call sites would otherwise
    compile its own copy of the four vectorised loops (seconds of compilation)."""
    xs = src[base:base + os.shape[0]]
    if code == ADD:
        for j in range(os.shape[0]):
            os[j] += xs[j]
    elif code == MUL:
        for j in range(os.shape[0]):
            os[j] *= xs[j]
    elif code == MAX:
        for j in range(os.shape[0]):
            os[j] = _vmax(os[j], xs[j])
    else:
        for j in range(os.shape[0]):
            os[j] = _vmin(os[j], xs[j])


@njit(**_opts)
def _run_int(code, src, base, os):
    xs = src[base:base + os.shape[0]]
    n = os.shape[0]
    if code == ADD:
        for j in range(n):
            os[j] += xs[j]
    elif code == MUL:
        for j in range(n):
            os[j] *= xs[j]
    elif code == MAX:
        for j in range(n):
            os[j] = max(os[j], xs[j])
    elif code == MIN:
        for j in range(n):
            os[j] = min(os[j], xs[j])
    elif code == AND:
        for j in range(n):
            os[j] &= xs[j]
    elif code == OR:
        for j in range(n):
            os[j] |= xs[j]
    else:
        for j in range(n):
            os[j] ^= xs[j]


def _run(code, src, base, os):
    """``_run_float`` or ``_run_int`` by the element type (chosen when Numba compiles the caller)."""
    (_run_float if src.dtype.kind == "f" else _run_int).py_func(code, src, base, os)


@nb.extending.overload(_run)
def _run_by_type(code, src, base, os):
    if isinstance(src.dtype, nb.types.Float):
        return lambda code, src, base, os: _run_float(code, src, base, os)
    return lambda code, src, base, os: _run_int(code, src, base, os)


@njit(**_opts)
def _deinterleave(xr, s, ph, L):
    """ph[p * L + i] = xr[i * s + p]: the s phases of a row, each contiguous."""
    n = xr.shape[0]
    if s == 2:  # the usual pooling stride, spelled out so that LLVM vectorises it
        h = n // 2
        even = ph[0:h]
        odd = ph[L:L + h]
        for i in range(h):
            even[i] = xr[2 * i]
            odd[i] = xr[2 * i + 1]
        if n % 2:
            ph[h] = xr[n - 1]
        return
    for p in range(s):
        for i in range((n - p + s - 1) // s):
            ph[p * L + i] = xr[i * s + p]


@njit(**_opts)
def _fold_cells(code, src, bases, off, nv, os, fresh, use_start, start, ident):
    """os[j] = the fold of the cells src[bases[w] + off + j] (w < nv) in window order, from
    the first cell (``fresh``) or from os[j] itself, then ``start`` when ``use_start``:
    (((c0 op c1) op c2) ... ) op start, the order of a copy and one run per cell, in few
    vectorised passes over os (a window of up to five cells in one pass, a longer one
    three cells in the first, two in each further one, for sums, maxima and minima; the others a copy and runs: each loop here is compiled
    into every caller).  A pass that is not
    the last ends with op ``ident`` (the combiner's identity), which leaves a combined
    value's bits as they are (v + -0.0, v * 1, max(v, -inf), ... are v, a NaN included:
    it is already quiet), so every pass is one loop whatever the window."""
    n = os.shape[0]
    if fresh and nv == 0:
        for j in range(n):
            os[j] = start
        return
    if code > MIN or code == MUL:   # (products: a copy and runs, fewer loops to compile)
        for w in range(nv + (1 if use_start else 0)):
            if w == nv:
                for j in range(n):
                    os[j] = _combine(code, os[j], start)
            elif w == 0 and fresh:
                _copy_from(src, bases[0] + off, os)
            else:
                _run(code, src, bases[w] + off, os)
        return
    w = 0
    if fresh:
        # (up to five cells in the first pass: a window of 4 or 5 in one; the identity that
        # ended a pass of three before leaves the bits as they are, so they are the same)
        k = min(nv, 5) if nv <= 5 else 3
        t = start if use_start and k == nv else ident
        a = src[bases[0] + off:bases[0] + off + n]
        if k == 1:
            if use_start and nv == 1:
                for j in range(n):
                    os[j] = _combine(code, a[j], t)
            else:
                _copy_from(src, bases[0] + off, os)
        elif k == 2:
            b = src[bases[1] + off:bases[1] + off + n]
            if code == ADD:
                for j in range(n):
                    os[j] = (a[j] + b[j]) + t
            elif code == MAX:
                for j in range(n):
                    os[j] = _vmax(_vmax(a[j], b[j]), t)
            else:
                for j in range(n):
                    os[j] = _vmin(_vmin(a[j], b[j]), t)
        elif k == 3:
            b = src[bases[1] + off:bases[1] + off + n]
            c = src[bases[2] + off:bases[2] + off + n]
            if code == ADD:
                for j in range(n):
                    os[j] = ((a[j] + b[j]) + c[j]) + t
            elif code == MAX:
                for j in range(n):
                    os[j] = _vmax(_vmax(_vmax(a[j], b[j]), c[j]), t)
            else:
                for j in range(n):
                    os[j] = _vmin(_vmin(_vmin(a[j], b[j]), c[j]), t)
        elif k == 4:
            b = src[bases[1] + off:bases[1] + off + n]
            c = src[bases[2] + off:bases[2] + off + n]
            d = src[bases[3] + off:bases[3] + off + n]
            if code == ADD:
                for j in range(n):
                    os[j] = (((a[j] + b[j]) + c[j]) + d[j]) + t
            elif code == MAX:
                for j in range(n):
                    os[j] = _vmax(_vmax(_vmax(_vmax(a[j], b[j]), c[j]), d[j]), t)
            else:
                for j in range(n):
                    os[j] = _vmin(_vmin(_vmin(_vmin(a[j], b[j]), c[j]), d[j]), t)
        else:
            b = src[bases[1] + off:bases[1] + off + n]
            c = src[bases[2] + off:bases[2] + off + n]
            d = src[bases[3] + off:bases[3] + off + n]
            e = src[bases[4] + off:bases[4] + off + n]
            if code == ADD:
                for j in range(n):
                    os[j] = ((((a[j] + b[j]) + c[j]) + d[j]) + e[j]) + t
            elif code == MAX:
                for j in range(n):
                    os[j] = _vmax(_vmax(_vmax(_vmax(_vmax(a[j], b[j]), c[j]), d[j]), e[j]), t)
            else:
                for j in range(n):
                    os[j] = _vmin(_vmin(_vmin(_vmin(_vmin(a[j], b[j]), c[j]), d[j]), e[j]), t)
        w = k
    elif nv == 0 and use_start:
        for j in range(n):
            os[j] = _combine(code, os[j], start)
    while w < nv:
        k = min(nv - w, 2)
        t = start if use_start and w + k == nv else ident
        a = src[bases[w] + off:bases[w] + off + n]
        if k == 1:
            if code == ADD:
                for j in range(n):
                    os[j] = (os[j] + a[j]) + t
            elif code == MAX:
                for j in range(n):
                    os[j] = _vmax(_vmax(os[j], a[j]), t)
            else:
                for j in range(n):
                    os[j] = _vmin(_vmin(os[j], a[j]), t)
        else:
            b = src[bases[w + 1] + off:bases[w + 1] + off + n]
            if code == ADD:
                for j in range(n):
                    os[j] = ((os[j] + a[j]) + b[j]) + t
            elif code == MAX:
                for j in range(n):
                    os[j] = _vmax(_vmax(_vmax(os[j], a[j]), b[j]), t)
            else:
                for j in range(n):
                    os[j] = _vmin(_vmin(_vmin(os[j], a[j]), b[j]), t)
        w += k


def _edges_from_start(code, start, use_start):
    """Whether a result whose window holds padding, folded from ``start`` over its real
    cells only (``_edge_cells``), has the bits of the padded fold (the identity in the
    padding, ``start`` combined last when ``use_start``): always without a start (the
    identity drops out exactly: v op ident = ident op v = v, bit for bit) and for
    integers (exact, associative, commutative); for floats only a sum from +0.0 (then
    -0.0 + v + ... + 0.0 and 0.0 + v + ... round alike and agree on zeros' signs)."""
    if not use_start:
        return True
    if isinstance(start, (float, np.floating)):
        return code == ADD and start == 0 and not np.signbit(start)
    return True


@nb.extending.overload(_edges_from_start)
def _edges_from_start_by_type(code, start, use_start):
    if isinstance(start, nb.types.Float):
        return lambda code, start, use_start: (not use_start) or (code == ADD and start == 0
                                                                  and math.copysign(1.0, start) > 0)
    return lambda code, start, use_start: True


@njit(**_opts)
def _deinterleave_at(xr, ph, e0, o0):
    """ph[e0 + i] = xr[2 * i], ph[o0 + i] = xr[2 * i + 1]: a row's elements straight into
    the two phases of its padded row (stride 2), wherever its first element falls."""
    n = xr.shape[0]
    h = n // 2
    even = ph[e0:e0 + h]
    odd = ph[o0:o0 + h]
    for i in range(h):
        even[i] = xr[2 * i]
        odd[i] = xr[2 * i + 1]
    if n % 2:
        ph[e0 + h] = xr[n - 1]


@njit(**_opts)
def _copy_from(src, base, os):
    xs = src[base:base + os.shape[0]]
    for j in range(os.shape[0]):
        os[j] = xs[j]


@njit(**_opts)
def _edge_cells(x, xrow, out, orow, m0, m1, g, code, start):
    """Results m0 <= m < m1 of a row (B = 1), cell by cell, real cells only."""
    N, s, low, bdil, wdil, win = g[1], g[4], g[5], g[6], g[7], g[8]
    dilated = (N - 1) * bdil + 1 if N > 0 else 0
    for m in range(m0, m1):
        acc = start
        q = m * s - low
        for w in range(win):
            if 0 <= q < dilated and q % bdil == 0:
                acc = _combine(code, acc, x[xrow + q // bdil])
            q += wdil
        out[orow + m] = acc


#: a pass along the contiguous dimension works on blocks of rows of about this many elements
_ROW_BLOCK = 8192
#: a window's cells are folded into this many results at a time (16 KiB of f32: in cache)
_FOLD_CHUNK = 4096

# How a pass walks its rows (the tasks of ``_separable``)
_VECTORS, _BLOCKS, _PADDED = range(3)


@njit(**_opts)
def _row_scratch(passes):
    """Scratch elements for the passes: a block of rows' phases, or a padded row (P) and
    its phases (P + stride)."""
    n = _ROW_BLOCK + 1
    for k in range(passes.shape[0]):
        M, s, wdil, win = passes[k, 3], passes[k, 4], passes[k, 7], passes[k, 8]
        P = (M - 1) * s + (win - 1) * wdil + 1
        n = max(n, max(passes[k, 1], 2 * P) + 2 * s + 1)
    return n


@njit(**_opts)
def _separable(lo, hi, xin, yout, passes, item_in, item_out, scratch, code, ident, init, use_init, by_rows, tiny,
               found):
    """Items [lo, hi) of ``xin`` through every pass into ``yout`` (the last pass starting
    from init), two scratch buffers in turn between passes; or, ``by_rows``, rows [lo, hi)
    of the one pass in ``passes`` (a big item, its passes one after the other).

    A pass over one windowed dimension reads x [A, N, B] and writes out [A, M, B]; its
    geometry g = (A, N, B, M, stride, low padding, base dilation, window dilation,
    window size).  Scratch: ``ph`` (``_row_scratch`` elements), ``bases`` (window size).
    ``use_start``: the results are combined with ``start`` (False when it is the combiner's
    identity ``ident``).  Every fold is ``_fold_cells``' (cells in window order, then the
    start).

    - B > 1 (``_VECTORS``): each result row of B is the fold of the input rows of B its
      window covers, combined as vectors.
    - B = 1: the result row is combined with shifted runs of the input row.  A stride s > 1
      reads every s-th element, so the s phases of the input are made contiguous first
      (ph[p * L + i] = row[i * s + p]); then every window cell is a contiguous run of one
      phase.  When the rows are exactly s times the result rows (``_BLOCKS``: SAME and
      VALID pooling of a multiple of the stride), a block of rows is one long row, and the
      positions whose window crosses two rows or the padding are recomputed cell by cell
      afterwards; otherwise (``_PADDED``) each row is first copied into scratch with its
      padding and base-dilation holes holding ``ident``, so that every result is interior.

    Every task ends in the same few loops (one call site each: each site of a vectorised
    loop costs a few tenths of a second of compilation).  All of it is one function: Numba compiles a called function into every caller again
    (seconds here), so the passes are a loop, not a helper called per item."""
    npass = passes.shape[0]
    ph = np.empty(_row_scratch(passes), xin.dtype)
    maxwin = 1
    for k in range(npass):
        maxwin = max(maxwin, passes[k, 8])
    bases = np.empty(maxwin, np.int64)
    buf0 = np.empty(0 if by_rows else scratch, xin.dtype)
    buf1 = np.empty(0 if by_rows else scratch, xin.dtype)
    n_items = 1 if by_rows else hi - lo
    for step in range(n_items * npass):
        # step: pass k of item it, reading x [A, N, B] and writing out [A, M, B], rows a0..a1
        it = lo + step // npass
        k = step % npass
        g = passes[k]
        last = k == npass - 1
        if by_rows:
            x, out, a0, a1 = xin, yout, lo, hi
        else:
            x = xin[it * item_in:(it + 1) * item_in] if k == 0 else (buf1 if k % 2 == 0 else buf0)
            out = yout[it * item_out:(it + 1) * item_out] if last else (buf0 if k % 2 == 0 else buf1)
            a0, a1 = 0, g[0]
        start = init if last else ident
        use_start = use_init and last
        if tiny > 0 and k == 0:
            # whether the operand (the item, or the rows) holds a denormal, read just before
            # the first pass reads it (so from the cache then); found[0] = 1
            xs = xin[it * item_in:(it + 1) * item_in] if not by_rows else x[a0 * g[1] * g[2]:a1 * g[1] * g[2]]
            if _has_denormal(xs, tiny):
                found[0] = 1
        N, B, M = g[1], g[2], g[3]
        s, low, bdil, wdil, win = g[4], g[5], g[6], g[7], g[8]
        dilated = (N - 1) * bdil + 1 if N > 0 else 0
        # results whose window lies inside the operand (no base dilation): m_lo <= m < m_hi
        m_lo, m_hi = M, M
        if bdil == 1:
            m_lo = min(M, max(0, (low + s - 1) // s))
            q_last = N - 1 - (win - 1) * wdil + low  # m * s <= q_last
            m_hi = max(m_lo, min(M, q_last // s + 1 if q_last >= 0 else 0))
        if B > 1:
            mode, R, ntasks = _VECTORS, 1, (a1 - a0) * M
        elif bdil == 1 and N < _ROW_BLOCK and (M * s == N or (
                s > 1 and N < M * s <= _ROW_BLOCK and N >= s and _edges_from_start(code, start, use_start))):
            # (rows shorter than s results: M * s > N, an odd row of SAME pooling: each
            # row's phases are placed as those of a row of M * s elements, the slots past
            # its end unread by the results computed there; the edge results recomputed
            # from the real cells give the padded fold's bits: ``_edges_from_start``)
            R = _ROW_BLOCK // (M * s)
            mode, ntasks = _BLOCKS, (a1 - a0 + R - 1) // R
        else:
            mode, R, ntasks = _PADDED, 1, a1 - a0
        P = (M - 1) * s + (win - 1) * wdil + 1   # _PADDED: the padded positions the results read
        plain = bdil == 1 and low <= 0 and P - low <= N   # ... all of them real elements
        # B > 1 with short rows of B: the results whose windows lie inside the operand
        # (m_lo <= m < m_hi) of each row of A at once, as runs over the s phases of its
        # rows of B (ph[(p * Lr + j) * B + b] = x[a, j * s + p, b]; s = 1: x itself):
        # result m's cell w is row m + c // s of phase c % s (c = w * wdil - low), so
        # each cell is one contiguous run for all of them -- the tasks' cells, order and
        # start, without a task per result
        batched = mode == _VECTORS and bdil == 1 and m_hi - m_lo >= 2 and B < 64 and N * B <= ph.shape[0]
        if batched:
            Lr = (N + s - 1) // s
            for a in range(a0, a1):
                src = x
                xb = a * N * B
                if s > 1:
                    src = ph
                    xb = 0
                    for i in range(N):
                        _copy_from(x, (a * N + i) * B, ph[((i % s) * Lr + i // s) * B:((i % s) * Lr + i // s + 1) * B])
                os = out[(a * M + m_lo) * B:(a * M + m_hi) * B]
                for w in range(win):
                    c = w * wdil - low
                    bases[w] = xb + (((c % s) * Lr + m_lo + c // s) * B if s > 1 else (m_lo + c) * B)
                _fold_cells(code, src, bases, 0, win, os, True, use_start, start, ident)
        for t in range(ntasks):
            a, r, k0, k1 = a0, 1, 0, 0
            from_ph = s > 1 and mode != _VECTORS
            nv = 0
            if batched:
                m = t % M
                if m_lo <= m < m_hi:
                    continue
            if mode == _VECTORS:
                a = a0 + t // M
                m = t - (a - a0) * M
                ob = (a * M + m) * B
                os = out[ob:ob + B]
                q = m * s - low
                if bdil == 1:   # (no division per cell: most windows)
                    for w in range(win):
                        if 0 <= q < N:
                            bases[nv] = (a * N + q) * B
                            nv += 1
                        q += wdil
                else:
                    for w in range(win):
                        if 0 <= q < dilated and q % bdil == 0:
                            bases[nv] = (a * N + q // bdil) * B
                            nv += 1
                        q += wdil
                L = 0
                row = x[0:0]
            elif mode == _BLOCKS:
                a = a0 + t * R
                r = min(R, a1 - a)
                L = r * M
                k0, k1 = 0, r * M
                for w in range(win):  # the positions whose cells all lie in the block
                    c = w * wdil - low
                    off = c // s if s > 1 else c
                    k0 = max(k0, -off)
                    k1 = min(k1, r * M - off)
                os = out[a * M + k0:a * M + max(k0, k1)]
                if k1 > k0:
                    for w in range(win):
                        c = w * wdil - low
                        bases[w] = (c % s) * L + k0 + c // s if s > 1 else a * N + k0 + c
                    nv = win
                row = x[a * N:(a + r) * N]
                if M * s != N:
                    # the phases row by row, as those of rows of M * s (s > 1)
                    if nv:
                        for i in range(r):
                            xr = x[(a + i) * N:(a + i + 1) * N]
                            if s == 2:
                                _deinterleave_at(xr, ph, i * M, L + i * M)
                            else:
                                for q in range(N):
                                    ph[(q % s) * L + i * M + q // s] = xr[q]
                            for q in range(N, M * s):
                                ph[(q % s) * L + i * M + q // s] = ident
                    row = x[0:0]  # (the phases are ready)
            else:
                a = a0 + t
                L = (P + s - 1) // s
                os = out[a * M:(a + 1) * M]
                xrow = a * N
                if plain:
                    row = x[xrow - low:xrow - low + P]
                elif s == 2 and bdil == 1:
                    # the phases straight from the operand row (no padded copy): padded
                    # position k is phase k % 2, index k // 2; element q is at k = q + low
                    k_a, k_b = min(P, max(0, low)), max(0, min(P, low + N))
                    for k in range(k_a):
                        ph[(k % 2) * L + k // 2] = ident
                    for k in range(max(k_a, k_b), P):
                        ph[(k % 2) * L + k // 2] = ident
                    if k_b > k_a:
                        h = k_a // 2
                        e0, o0 = (h, L + h) if k_a % 2 == 0 else (L + h, h + 1)
                        _deinterleave_at(x[xrow + k_a - low:xrow + k_b - low], ph, e0, o0)
                    row = x[0:0]  # (read nothing more: the phases are ready)
                else:
                    row = ph[L * s + s:L * s + s + P]
                    # padded position k holds element q = (k - low) / bdil when that is one
                    k_a, k_b = min(P, max(0, low)), max(0, min(P, low + dilated))
                    for k in range(k_a):
                        row[k] = ident
                    for k in range(max(k_a, k_b), P):
                        row[k] = ident
                    if bdil == 1:
                        if k_b > k_a:
                            _copy_from(x, xrow + k_a - low, row[k_a:k_b])
                    else:
                        for k in range(k_a, k_b):
                            q = k - low
                            row[k] = x[xrow + q // bdil] if q % bdil == 0 else ident
                for w in range(win):
                    c = w * wdil
                    bases[w] = (c % s) * L + c // s if s > 1 else c
                nv = win
                from_ph = s > 1
                if s == 1 and not plain:
                    from_ph = True  # the padded row lies in ph (bases count from its start)
                    for w in range(win):
                        bases[w] += L * s + s
                elif s == 1:
                    for w in range(win):
                        bases[w] += xrow - low
            if from_ph and s > 1 and nv and row.shape[0]:
                _deinterleave(row, s, ph, L)
            # the fold of the window cells (and the start), in chunks of results that stay
            # in the first-level cache (a long row or row of B would otherwise go to
            # memory once per pass)
            n_os = os.shape[0]
            for j0 in range(0, max(n_os, 1), _FOLD_CHUNK):
                _fold_cells(code, ph if from_ph else x, bases, j0, nv, os[j0:min(n_os, j0 + _FOLD_CHUNK)], True,
                            use_start, start, ident)
            if mode == _BLOCKS:
                # rows placed as rows of M * s > N (identities in the slots past their ends):
                # when every window reaches no further back than the previous row's slots
                # and no further on than the row's own, the block's fold read exactly the
                # padded window of every result it made (the padded fold's cells, order
                # and start): only the results outside [k0, k1) are recomputed
                whole = M * s != N and low <= M * s - N and (win - 1) * wdil - low < s
                for i in range(r):
                    rw = a + i
                    if whole:
                        lo_end, hi_start = max(0, k0 - i * M), min(M, k1 - i * M)
                    else:
                        lo_end, hi_start = max(m_lo, k0 - i * M), min(m_hi, k1 - i * M)
                    if hi_start <= lo_end:
                        lo_end, hi_start = M, M
                    for side in range(2):
                        e0, e1 = (0, lo_end) if side == 0 else (hi_start, M)
                        if e1 > e0:
                            _edge_cells(x, rw * N, out, rw * M, e0, e1, g, code, start)


#: a pass along the contiguous dimension (B = 1) with rows of this many results and more
#: runs as chunks of ``_FOLD_CHUNK`` results (``_row_chunks``), in threads
_LONG_ROW = 1 << 15


@njit(**_opts)
def _row_chunks(lo, hi, x, out, g, code, ident, start, use_start, nch, tiny, found, out_tiny, out_found):
    """Tasks [lo, hi) of a pass along the contiguous dimension (B = 1) with long rows: task t
    makes results [c * _FOLD_CHUNK, (c + 1) * _FOLD_CHUNK) of row t // nch (c = t % nch).
    The padded positions those results read are gathered into scratch (``ident`` in the
    padding and the base-dilation holes; read in place when they are all real elements
    and s = 1), an s > 1 stride's phases made contiguous, and each result folds its
    window's cells in window order, then ``start`` (``use_start``): the cells, order and
    start of ``_separable``'s padded rows, so its bits, with every run in cache and a
    row's parts in several threads.  ``tiny`` > 0: also whether what the results read holds
    a denormal (found[0] = 1), checked as it comes into the cache; ``out_tiny`` > 0:
    whether a result is a denormal (out_found[0] = 1), checked as it is written (the
    executor's scan of the result after the kernel, one more pass, not needed then)."""
    N, M = g[1], g[3]
    s, low, bdil, wdil, win = g[4], g[5], g[6], g[7], g[8]
    dilated = (N - 1) * bdil + 1 if N > 0 else 0
    span = (_FOLD_CHUNK - 1) * s + (win - 1) * wdil + 1
    L = (span + s - 1) // s
    seg = np.empty(span, x.dtype)
    ph = np.empty(L * s if s > 1 else 0, x.dtype)
    bases = np.empty(max(win, 1), np.int64)
    for t in range(lo, hi):
        a = t // nch
        m0 = (t - a * nch) * _FOLD_CHUNK
        m1 = min(M, m0 + _FOLD_CHUNK)
        if m1 <= m0:
            continue
        P = (m1 - m0 - 1) * s + (win - 1) * wdil + 1
        k0 = m0 * s - low            # the dilated position of the first padded one read
        xrow = a * N
        os = out[a * M + m0:a * M + m1]
        if bdil == 1 and k0 >= 0 and k0 + P <= N:
            src, sbase = x, xrow + k0    # all real elements: read in place
        else:
            src, sbase = seg, 0
            if bdil == 1:
                k_a, k_b = min(P, max(0, -k0)), max(0, min(P, N - k0))
                for k in range(k_a):
                    seg[k] = ident
                for k in range(max(k_a, k_b), P):
                    seg[k] = ident
                if k_b > k_a:
                    _copy_from(x, xrow + k0 + k_a, seg[k_a:k_b])
            else:
                for k in range(P):
                    q = k0 + k
                    seg[k] = x[xrow + q // bdil] if 0 <= q < dilated and q % bdil == 0 else ident
        if tiny > 0 and _has_denormal(src[sbase:sbase + P], tiny):
            found[0] = 1
        if s > 1:
            _deinterleave(src[sbase:sbase + P], s, ph, L)
            src, sbase = ph, 0
        for w in range(win):
            c = w * wdil
            bases[w] = sbase + ((c % s) * L + c // s if s > 1 else c)
        _fold_cells(code, src, bases, 0, win, os, True, use_start, start, ident)
        if out_tiny > 0 and _has_denormal(os, out_tiny):
            out_found[0] = 1


def _is_long_row(g):
    return g[2] == 1 and g[3] >= _LONG_ROW and not _is_sliding(g) and not _scan_kind(g)


#: from this window size on (no window dilation), a pass slides: see ``_sliding``
_SLIDING_MIN = 16


@njit(**_opts)
def _sliding(lo, hi, x, out, g, code, ident, start, use_start, tb):
    """Tasks [lo, hi) of a pass with a long window (cumulative sums and maxima: JAX's
    ``cumsum`` on the CPU is a ReduceWindow as long as the axis), in time independent of
    the window size (van Herk / Gil-Werman): the padded sequence is cut into blocks of
    the window size w; g holds the fold of each block's prefix, h of each block's suffix;
    the window starting at k is h[k] when k starts a block, else h[k] combined with
    g[k + w - 1] (the end of the next block's prefix).  Exact for the combiners (it only
    regroups them).  ``tb`` sequences are done at once, as the rows of [padded position,
    tb] tiles, so every step is a vectorised run: tb columns of one row of A (B > 1), or
    tb rows of A (B = 1, gathered)."""
    A, N, B, M = g[0], g[1], g[2], g[3]
    s, low, bdil, w = g[4], g[5], g[6], g[8]
    dilated = (N - 1) * bdil + 1 if N > 0 else 0
    P = (M - 1) * s + w
    gb = np.empty(P * tb, x.dtype)
    hb = np.empty(P * tb, x.dtype)
    tmp = np.empty(tb, x.dtype)
    ntiles = (B + tb - 1) // tb if B > 1 else 1
    for t in range(lo, hi):
        if B > 1:
            a = t // ntiles
            c0 = (t - a * ntiles) * tb
            r = min(tb, B - c0)
        else:
            a = t * tb
            c0 = 0
            r = min(tb, A - a)
        # the padded tile into hb: row k = position k of the tb sequences
        for k in range(P):
            row = hb[k * r:(k + 1) * r]
            q = k - low
            if 0 <= q < dilated and q % bdil == 0:
                if B > 1:
                    _copy_from(x, (a * N + q // bdil) * B + c0, row)
                else:
                    for j in range(r):
                        row[j] = x[(a + j) * N + q // bdil]
            else:
                for j in range(r):
                    row[j] = ident
        for k in range(P):  # block prefixes
            _copy_from(hb, k * r, gb[k * r:(k + 1) * r])
            if k % w != 0:
                _run(code, gb, (k - 1) * r, gb[k * r:(k + 1) * r])
        for k in range(P - 2, -1, -1):  # block suffixes, in place
            if k % w != w - 1:
                _run(code, hb, (k + 1) * r, hb[k * r:(k + 1) * r])
        for m in range(M):
            k = m * s
            res = tmp[:r]
            _copy_from(hb, k * r, res)
            if k % w != 0:
                _run(code, gb, (k + w - 1) * r, res)
            if use_start:
                for j in range(r):
                    res[j] = _combine(code, start, res[j])
            if B > 1:
                _copy_from(res, 0, out[(a * M + m) * B + c0:(a * M + m) * B + c0 + r])
            else:
                for j in range(r):
                    out[(a + j) * M + m] = res[j]


def _scan_kind(g):
    """1 when every window of the pass starts at the first element (a cumulative fold:
    JAX's cumsum), -1 when every window ends at the last (a reversed one), else 0; for
    B > 1 only when result m's window ends (starts) at element m itself."""
    A, N, B, M, s, low, bdil, wdil, win = (int(v) for v in g)
    if s != 1 or bdil != 1 or wdil != 1 or N == 0:
        return 0
    if low >= M - 1 and (B == 1 or (win - 1 == low and M == N)):
        return 1
    if win - 1 - low >= N - 1 and (B == 1 or (low == 0 and M == N)):
        return -1
    return 0


@njit(**_opts)
def _scan(lo, hi, x, out, g, code, ident, start, use_start, kind):
    """Tasks [lo, hi) of a cumulative pass (``_scan_kind``): each sequence folded once from
    its first element on (kind 1) or from its last (kind -1), result m read from the
    running folds.  B = 1: task a is row a, its folds in scratch (one dependent combine per
    element, no window at all); B > 1: task a is the [N, B] slab of row a, folded row by
    row as vectors straight into the result."""
    A, N, B, M = g[0], g[1], g[2], g[3]
    low, win = g[5], g[8]
    run = np.empty(N if B == 1 else 0, x.dtype)
    for a in range(lo, hi):
        if B == 1:
            xr = x[a * N:(a + 1) * N]
            acc = ident
            if kind == 1:
                for i in range(N):
                    acc = _combine(code, acc, xr[i])
                    run[i] = acc
            else:
                for i in range(N - 1, -1, -1):
                    acc = _combine(code, xr[i], acc)
                    run[i] = acc
            orow = out[a * M:(a + 1) * M]
            for m in range(M):
                if kind == 1:
                    i = m - low + win - 1          # the window's last element
                    if i < 0:                      # an empty window: the start value
                        orow[m] = start
                        continue
                    v = run[min(i, N - 1)]
                else:
                    i = m - low                    # its first element
                    if i > N - 1:
                        orow[m] = start
                        continue
                    v = run[max(i, 0)]
                orow[m] = _combine(code, start, v) if use_start else v
        else:
            base = a * N * B
            first = 0 if kind == 1 else N - 1
            step = 1 if kind == 1 else -1
            _copy_from(x, base + first * B, out[base + first * B:base + (first + 1) * B])
            m = first + step
            for _ in range(N - 1):
                row = out[base + m * B:base + (m + 1) * B]
                _copy_from(x, base + m * B, row)
                _run(code, out, base + (m - step) * B, row)
                m += step
            if use_start:
                for j in range(base, base + N * B):
                    out[j] = _combine(code, start, out[j])


def _sliding_tile(g):
    """Sequences per tile: the tile's three [P, tb] arrays in about 384 KiB of f32."""
    P = (int(g[3]) - 1) * int(g[4]) + int(g[8])
    tb = max(8, (98304 // max(1, 3 * P)) // 8 * 8)
    return min(tb, int(g[2]) if g[2] > 1 else int(g[0]))


def _is_sliding(g):
    return g[8] >= _SLIDING_MIN and g[7] == 1


@functools.lru_cache(maxsize=256)
def separable_plan(in_dims, out_dims, wd, ws, pad, bd, wdl):
    """(items, item_in, item_out, passes, scratch) of a separable ReduceWindow: ``passes``
    an int64 table, one row (A, N, B, M, stride, low, base dilation, window dilation,
    window size) per windowed dimension of an item, the last dimension first."""
    rank = len(in_dims)
    trivial = [wd[d] == 1 and ws[d] == 1 and tuple(pad[d]) == (0, 0) and bd[d] == 1 and in_dims[d] == out_dims[d]
               for d in range(rank)]
    k = 0
    while k < rank - 1 and trivial[k]:
        k += 1
    items = product(in_dims[:k])
    cur = list(in_dims[k:])
    outs = list(out_dims[k:])
    rows, scratch = [], 0
    for d in range(len(cur) - 1, -1, -1):
        if trivial[k + d] and not (d == 0 and not rows):
            continue
        A, B = product(cur[:d]), product(cur[d + 1:])
        rows.append((A, cur[d], B, outs[d], ws[k + d], pad[k + d][0], bd[k + d], wdl[k + d], wd[k + d]))
        cur[d] = outs[d]
        scratch = max(scratch, product(cur))
    passes = np.array(rows, np.int64).reshape(len(rows), 9)
    return items, product(in_dims[k:]), product(out_dims[k:]), passes, scratch


def _identity(code, dtype):
    """The combiner's identity in ``dtype`` (the value of an empty partial window)."""
    if dtype.kind == "f":
        return dtype.type({ADD: -0.0, MUL: 1.0, MAX: -np.inf, MIN: np.inf}[code])
    info = np.iinfo(dtype)
    return dtype.type({ADD: 0, MUL: 1, MAX: info.min, MIN: info.max, AND: info.max if info.min == 0 else -1,
                       OR: 0, XOR: 0}[code])


def _pass_plan(items, passes):
    """The static part of running ``passes`` pass by pass over the whole array (the items
    are more rows of A; sliding, cumulative and long-row passes): per pass, (g, last, kind,
    long row?, sliding tile, tasks), decided from the shapes alone (a prepared step's, once)."""
    plan = []
    for k in range(len(passes)):
        g = passes[k].copy()
        g[0] *= items
        kind = _scan_kind(g)
        long_row = not kind and _is_long_row(g)
        tb = tasks = 0
        if kind:
            tasks = int(g[0])
        elif long_row:
            tasks = int(g[0]) * -(-int(g[3]) // _FOLD_CHUNK)
        elif _is_sliding(g):
            tb = _sliding_tile(g)
            tasks = int(g[0]) * -(-int(g[2]) // tb) if g[2] > 1 else -(-int(g[0]) // tb)
        else:
            tasks = int(g[0])
        plan.append((g, k == len(passes) - 1, kind, long_row, tb, tasks))
    return plan


def _run_pass_plan(plan, x, out, code, ident, init, use_init, parallel, tiny, found, out_tiny=0):
    """``reduce_window_separable``'s passes over the whole array, as ``_pass_plan`` has them:
    ``tiny`` > 0 checks the operand (the first pass as it reads it where it can, else a scan
    in threads first; found[0] = 1 when it holds a denormal); ``out_tiny`` > 0: returns
    whether a result is a denormal (the last pass's long-row chunks check what they write,
    else a scan in threads after the passes)."""
    none = x.dtype.type(0)
    out_tiny = x.dtype.type(out_tiny) if x.dtype.kind == "f" else none
    out_found = np.zeros(1, np.uint8)
    src = x
    for k, (g, last, kind, long_row, tb, tasks) in enumerate(plan):
        dst = out if last else empty(int(g[0] * g[3] * g[2]), x.dtype)
        start, use = (init, use_init) if last else (ident, False)
        check = tiny if k == 0 else none
        if check > 0 and (kind or not long_row):
            if _has_denormal_threads(x, check):
                found[0] = 1
            check = none
        if kind:
            in_threads(_scan, tasks, parallel, src, dst, g, code, ident, start, use, kind)
        elif long_row:
            nch = -(-int(g[3]) // _FOLD_CHUNK)
            in_threads(_row_chunks, tasks, parallel, src, dst, g, code, ident, start, use, nch, check, found,
                       out_tiny if last else none, out_found)
            if last:
                return bool(out_found[0])
        elif tb:
            in_threads(_sliding, tasks, parallel, src, dst, g, code, ident, start, use, tb)
        else:
            in_threads(_separable, tasks, parallel, src, dst, g.reshape(1, 9), 0, 0, 0, code, ident, start,
                       use, True, none, found)
        src = dst
    return bool(out_tiny > 0 and _has_denormal_threads(out, out_tiny))


def reduce_window_separable(x, in_dims, out_dims, wd, ws, pad, bd, wdl, code, init, out, tiny=0, found=None,
                            out_tiny=0):
    """ReduceWindow of flat ``x`` with a standard combiner into flat ``out``, by passes.
    ``tiny`` > 0: found[0] = 1 when the operand holds a denormal (0 < |v| < tiny) that a
    result reads (the caller flushes it and runs again), checked by the first pass as it
    reads the operand where it can, by a scan in threads before it otherwise.
    ``out_tiny`` > 0: returns whether a result is a denormal (its flush is the caller's):
    checked as the results are written by long rows' chunks, by a scan in threads after
    the passes otherwise; (with 0, False)."""
    items, item_in, item_out, passes, scratch = separable_plan(in_dims, out_dims, wd, ws, pad, bd, wdl)
    ident = _identity(code, x.dtype)
    use_init = ident.tobytes() != x.dtype.type(init).tobytes()
    work = x.size * max(1, int(sum(min(w, _SLIDING_MIN) for w in passes[:, 8])))
    parallel = work >= 2 * MOVE_PARALLEL_THRESHOLD  # (work: combines, a fraction of a ns each)
    if found is None:
        found = np.zeros(1, np.uint8)
    tiny = x.dtype.type(tiny) if x.dtype.kind == "f" else x.dtype.type(0)
    none = x.dtype.type(0)
    out_tiny = x.dtype.type(out_tiny) if x.dtype.kind == "f" else none
    if _pool_minor2(passes, code, items, item_in, item_out, x.shape[0]):
        in_threads(_pool2d, items, parallel, x, out, passes[1, 1], passes[0, 1], passes[1, 3], passes[0, 3],
                   passes[1, 8], passes[0, 8], passes[1, 4], passes[0, 4], code, init, use_init, tiny, found,
                   bool(POOL_RUNS and passes[0, 3] < 128 and passes[1, 4] <= 2))
        return bool(out_tiny > 0 and _has_denormal_threads(out, out_tiny))
    if any(_is_sliding(g) or _is_long_row(g) for g in passes):
        return _run_pass_plan(_pass_plan(items, passes), x, out, code, ident, init, use_init, parallel, tiny,
                              found, out_tiny)
    if not parallel or items >= 2 * _threads() or len(passes) == 1 and passes[0, 0] < 2 * _threads():
        in_threads(_separable, items, parallel, x, out, passes, item_in, item_out, scratch, code, ident, init,
                   use_init, False, tiny, found)
        return bool(out_tiny > 0 and _has_denormal_threads(out, out_tiny))
    # a few big items: pass by pass over the whole array, each pass's rows in threads
    for it in range(items):
        src = x[it * item_in:(it + 1) * item_in]
        for k in range(len(passes)):
            g = passes[k:k + 1]
            last = k == len(passes) - 1
            dst = out[it * item_out:(it + 1) * item_out] if last else empty(int(g[0, 0] * g[0, 3] * g[0, 2]), x.dtype)
            in_threads(_separable, int(g[0, 0]), True, src, dst, g, 0, 0, 0, code, ident, init if last else ident,
                       use_init and last, True, tiny if k == 0 else none, found)
            src = dst
    return bool(out_tiny > 0 and _has_denormal_threads(out, out_tiny))


def _pool_minor2(passes, code, items, item_in, item_out, n):
    """Whether the plan is a maximum or minimum pooling over the two minor dimensions (NCHW)
    with every window inside the operand: a row pass (B = 1) and a column pass over its
    rows (A = 1), no padding, no dilation -- ``_pool2d``'s case."""
    if code not in (MAX, MIN) or passes.shape[0] != 2 or items * item_in != n:
        return False
    g, h = passes[0], passes[1]
    for p in (g, h):
        if p[5] != 0 or p[6] != 1 or p[7] != 1 or p[3] < 1 or (p[3] - 1) * p[4] + p[8] > p[1]:
            return False
    return g[2] == 1 and h[0] == 1 and h[2] == g[3] and g[0] == h[1] and item_in == g[0] * g[1] \
        and item_out == h[3] * h[2]


@njit(inline="always", **_opts)
def _minmax_into(code, dst, src, n):
    """dst[:n] = max (``code`` MAX) or min of dst[:n] and src[:n], element by element (the
    test outside the loop: each loop vectorises)."""
    if code == MAX:
        for j in range(n):
            dst[j] = _vmax(dst[j], src[j])
    else:
        for j in range(n):
            dst[j] = _vmin(dst[j], src[j])


@njit(inline="always", **_opts)
def _minmax_const(code, dst, v, n):
    """dst[:n] = max (``code`` MAX) or min of dst[:n] and the scalar v."""
    if code == MAX:
        for j in range(n):
            dst[j] = _vmax(dst[j], v)
    else:
        for j in range(n):
            dst[j] = _vmin(dst[j], v)


#: (a switch for A/B measurements) short result rows of a pooling fold their window's rows
#: as one long run (``_pool2d``'s ``long_runs``)
POOL_RUNS = True


@njit(**_opts)
def _pool2d(lo, hi, x, out, H, W, OH, OW, kh, kw, sh, sw, code, init, use_init, tiny, found, long_runs):
    """Items [lo, hi) ([H, W] images) of a maximum / minimum pooling with every window
    inside the image, both separable passes fused per image: each row's window folds
    (cells in window order) into a scratch of [H, OW] that stays in the first-level
    cache, then each result row folds its window's rows in order, then the init value
    (``use_init``).  The cells and order of ``_separable``'s two passes, less their
    ``op ident`` ends (which leave the bits as they are), so its bits, without the passes'
    short runs per row and with one read of the operand.  ``tiny`` > 0: found[0] = 1 when
    an image holds a denormal (the caller flushes and runs again)."""
    L = (W + sw - 1) // sw
    rows = np.empty(H * L, x.dtype)   # row r's results at r * L
    whole = W % sw == 0   # (the image's phases are its rows' phases, one after the other)
    ph = np.empty(H * L * sw + 1 if whole else L * sw + 1, x.dtype)
    # ``long_runs``: short result rows (LLVM's vector loop takes 64 f32 a turn: rows of 31
    # ran as scalar code) fold the window's rows as one long run, at most twice the work
    M = ((OH - 1) * sh + 1) * L
    tmp = np.empty(M if long_runs else 0, x.dtype)
    for it in range(lo, hi):
        xb = it * H * W
        if tiny > 0 and _has_denormal(x[xb:xb + H * W], tiny):
            found[0] = 1
        if whole:
            # every row at once, as one long run per window cell (the positions past a
            # row's OW results read the next row's cells and are never used)
            LL = H * L
            if sw > 1:
                _deinterleave(x[xb:xb + H * W], sw, ph, LL)
            else:
                _copy_from(x, xb, ph[:LL])
            n = LL - (kw - 1) // sw
            _copy_from(ph, 0, rows[:n])
            for w in range(1, kw):
                c = ph[(w % sw) * LL + w // sw:(w % sw) * LL + w // sw + n]
                _minmax_into(code, rows, c, n)
        else:
            for r in range(H):
                rb = rows[r * L:r * L + OW]
                xr = x[xb + r * W:xb + (r + 1) * W]
                _deinterleave(xr, sw, ph, L)
                for j in range(OW):
                    rb[j] = ph[j]
                for w in range(1, kw):
                    c = ph[(w % sw) * L + w // sw:(w % sw) * L + w // sw + OW]
                    _minmax_into(code, rb, c, OW)
        if long_runs:
            # the window's rows of all results at once: tmp[m] folds rows[m + k * L], k <
            # kh, for m up to the last result row's end -- result row i at i * sh * L, the
            # positions between (sh - 1 rows of L a result row) done for nothing
            _copy_from(rows, 0, tmp)
            for k in range(1, kh):
                _minmax_into(code, tmp, rows[k * L:k * L + M], M)
            if use_init:
                _minmax_const(code, tmp, init, M)
            for i in range(OH):
                ob = out[(it * OH + i) * OW:(it * OH + i + 1) * OW]
                _copy_from(tmp, i * sh * L, ob)
            continue
        for i in range(OH):
            ob = out[(it * OH + i) * OW:(it * OH + i + 1) * OW]
            r0 = i * sh * L
            for j in range(OW):
                ob[j] = rows[r0 + j]
            for k in range(1, kh):
                rk = rows[r0 + k * L:r0 + k * L + OW]
                _minmax_into(code, ob, rk, OW)
            if use_init:
                _minmax_const(code, ob, init, OW)


def _has_denormal_threads(x, tiny):
    """Whether flat float ``x`` holds a denormal, scanned in threads."""
    parts = 8 * _threads()
    per = -(-x.size // parts)
    marks = np.zeros(parts, np.bool_)
    in_threads(_denormal_parts, parts, x.size >= MOVE_PARALLEL_THRESHOLD, x, per, tiny, marks)
    return bool(marks.any())


# ---------------------------------------------------------------------------------------
# Generated code: a region as a scalar function, kernels specialised to it

class NotCompilable(Exception):
    """A region with an instruction that has no scalar emitter."""


def _header():
    from .fused import _HEADER
    return _HEADER


def _literal(value, t):
    """Source text of a scalar constant of XLA type ``t``, in its carrier type."""
    from ..emit import carrier
    c = carrier(t)
    v = np.asarray(value)
    if t == "pred":
        return "True" if bool(v) else "False"
    if t in dtypes.COMPLEX:
        z = complex(v)
        return f"{c}(complex({_float_text(z.real)}, {_float_text(z.imag)}))"
    if t in dtypes.FLOATING:
        return f"{c}({_float_text(float(v.astype(np.float64)))})"
    i = int(v)
    if i >= 2 ** 63:
        return f"{c}(np.int64({i - 2 ** 64}))"
    return f"{c}({i})"


def _float_text(x):
    if math.isnan(x):
        return "-math.nan" if math.copysign(1.0, x) < 0 else "math.nan"
    if math.isinf(x):
        return "math.inf" if x > 0 else "-math.inf"
    return repr(x)


#: the most instructions a region compiled into a kernel may have (Numba's compile time
#: grows faster than a function's body): a bigger one runs through the reference
MAX_REGION_INSTRUCTIONS = 64
#: the most distinct regions one module compiles into kernels (about 1 s of Numba compile
#: time each, cached on disk after): the module's other regions run through the reference
MAX_REGION_KERNELS = 16


def budget_regions(module):
    """Bound the module's compile time: the regions of its kernels (reduce, sort, scatter,
    map... computations, not control-flow bodies) beyond the first MAX_REGION_KERNELS
    distinct ones (by their source) are marked to run through the reference.  Remembered
    on the module until its entry changes."""
    key = (module.entry, len(module.entry.instructions), MAX_REGION_KERNELS)
    if module.__dict__.get("_cpu_regions") == key:
        return
    from ..numba_executor import _CONTROL
    sources = set()
    for comp in reversed(module.computations):   # the entry first, callers before callees
        for inst in comp.instructions:
            if inst.opcode in _CONTROL:
                continue
            for region in inst.called_computations():
                try:
                    text = region_source(region, "f")
                except NotCompilable:
                    continue
                if text in sources:
                    continue
                if len(sources) < MAX_REGION_KERNELS:
                    sources.add(text)
                else:
                    region._cpu_scalar = (False, f"the module compiles at most {MAX_REGION_KERNELS} distinct "
                                                 f"regions into kernels (its compile time stays bounded)")
    module.__dict__["_cpu_regions"] = key


def region_source(comp, name):
    """The scalar Numba source of region ``comp``: ``def name(p0, p1, ...)`` returning one
    carrier value or a tuple.  Raises NotCompilable for an instruction without emitter, a
    region of more than MAX_REGION_INSTRUCTIONS, or one marked by ``budget_regions``."""
    from ..emit import can_emit, emit, finish, supported_type
    marked = getattr(comp, "_cpu_scalar", None)
    if marked is not None and not marked[0]:
        raise NotCompilable(marked[1])
    if len(comp.instructions) > MAX_REGION_INSTRUCTIONS:
        raise NotCompilable(f"{comp.name} has {len(comp.instructions)} instructions; regions of at most "
                            f"{MAX_REGION_INSTRUCTIONS} are compiled")
    names = {}
    for k, p in enumerate(comp.parameters):
        if not (p.shape.is_array and p.shape.rank == 0 and supported_type(p.shape.element_type)):
            raise NotCompilable(f"parameter {p.name} is {p.shape}")
        names[p] = f"p{k}"
    body = []
    for n, inst in enumerate(comp.instructions):
        op = inst.opcode
        if op == "parameter":
            continue
        if op == "tuple":
            names[inst] = tuple(names[o] for o in inst.operands)
            continue
        if op == "get-tuple-element":
            src = names[inst.operands[0]]
            if not isinstance(src, tuple):
                raise NotCompilable("get-tuple-element of a non-tuple")
            names[inst] = src[inst.attrs["index"]]
            continue
        if not (inst.shape.is_array and inst.shape.rank == 0 and supported_type(inst.shape.element_type)):
            raise NotCompilable(f"{inst.name} is {inst.shape}")
        t = inst.shape.element_type
        if op == "constant":
            expr = _literal(inst.attrs["literal"], t)
        elif op in ("reshape", "bitcast", "copy", "broadcast") and len(inst.operands) == 1 \
                and inst.operands[0].shape.element_type == t:
            expr = names[inst.operands[0]]  # scalar to scalar: the value itself
        elif can_emit(inst):
            expr = finish(emit(inst, *[names[o] for o in inst.operands]), t)
        else:
            raise NotCompilable(f"{op} ({inst.name}) has no scalar emitter")
        names[inst] = f"t{n}"
        body.append(f"    t{n} = {expr}")
    root = names[comp.root]
    if isinstance(root, tuple) and len(root) == 1:
        ret = root[0]  # a 1-tuple returns its element: callers unpack N > 1 values only
    elif isinstance(root, tuple):
        ret = "(" + ", ".join(root) + ")"
    else:
        ret = root
    args = ", ".join(f"p{k}" for k in range(len(comp.parameters)))
    return (f"@njit(cache=True, nogil=True, error_model='numpy', inline='always')\n"
            f"def {name}({args}):\n" + "\n".join(body) + f"\n    return {ret}\n")


_generated = {}


def _generate(kind, regions, kernel_source):
    """Load (once per source) a module with the regions' scalar functions and a kernel."""
    parts = [_header(), f"# {kind}"]
    for name, comp in regions:
        parts.append(region_source(comp, name))
    parts.append(kernel_source)
    text = "\n".join(parts)
    module = _generated.get(text)
    if module is None:
        module = _generated[text] = load_source(kind, text)
    return module


_NumbaError = nb.core.errors.NumbaError


def _uncompilable(region, error):
    """Remember that the code generated for ``region`` did not compile (the reference runs
    it from now on); returns the reason."""
    why = f"generated code did not compile: {type(error).__name__}: {str(error).splitlines()[0]}"
    region.computation._cpu_scalar = (False, why)
    return why


def _region_compiled(region):
    """(True, None) when the region compiles, else (False, reason) (cached on the region)."""
    comp = region.computation
    cached = getattr(comp, "_cpu_scalar", None)
    if cached is None:
        try:
            region_source(comp, "f")
            cached = (True, None)
        except NotCompilable as e:
            cached = (False, str(e))
        comp._cpu_scalar = cached
    return cached


# ---------------------------------------------------------------------------------------
# The generated window fold: Reduce and ReduceWindow with any region, N operands

def _fold_kernel_source(types):
    """A window fold over N operands of carrier ``types`` in the reference's tree order."""
    from ..emit import carrier
    n = len(types)
    ins = ", ".join(f"in{k}" for k in range(n))
    inits = ", ".join(f"init{k}" for k in range(n))
    outs = ", ".join(f"out{k}" for k in range(n))
    vs = ", ".join(f"v{k}" for k in range(n))
    ss = ", ".join(f"s{k}[sp]" for k in range(n))
    tup = lambda names: names  # noqa: E731  (one value: a scalar, several: a tuple)
    lines = []
    for par, loop in (("par", "prange"), ("ser", "range")):
        lines.append(f"""
@njit(cache=True, nogil=True, error_model='numpy', parallel={par == 'par'})
def fold_{par}(nout, nchunks, odims, geo, maxwin, ncell, {ins}, {inits}, {outs}):
    m = odims.shape[0]
    per = (nout + nchunks - 1) // nchunks
    for ch in {loop}(nchunks):
        oc = np.empty(m, np.int64)
        wc = np.empty(m, np.int64)
        ct = np.empty((m, maxwin), np.int64)
        sl = np.empty(64, np.int64)
        sv = np.empty(64, np.bool_)
""" + "".join(f"        s{k} = np.empty(64, {carrier(t)})\n" for k, t in enumerate(types)) + """
        _first_coords(ch * per, odims, oc)
        changed = 0
        for o in range(ch * per, min(nout, (ch + 1) * per)):
            for d in range(changed, m):
                _axis_codes(oc[d], geo[d], ct[d])
            for d in range(m):
                wc[d] = 0
            sp = 0
            for cell in range(ncell):
                off = 0
                valid = True
                for d in range(m):
                    t = ct[d, wc[d]]
                    if t < 0:
                        valid = False
                    off += t * geo[d, 6]
""" + "".join(f"                v{k} = in{k}[off] if valid else init{k}\n" for k in range(n)) + f"""
                lvl = 0
                while sp > 0 and sl[sp - 1] == lvl:
                    sp -= 1
                    if sv[sp]:
                        if valid:
                            {tup(vs)} = region({ss}, {vs})
                        else:
""" + "".join(f"                            v{k} = s{k}[sp]\n" for k in range(n)) + """
                            valid = True
                    lvl += 1
""" + "".join(f"                s{k}[sp] = v{k}\n" for k in range(n)) + """
                sl[sp] = lvl
                sv[sp] = valid
                sp += 1
                d = m - 1
                while d >= 0:
                    wc[d] += 1
                    if wc[d] < geo[d, 5]:
                        break
                    wc[d] = 0
                    d -= 1
""" + "".join(f"            v{k} = init{k}\n" for k in range(n)) + """
            valid = False
            if sp > 0:
                sp -= 1
""" + "".join(f"                v{k} = s{k}[sp]\n" for k in range(n)) + f"""
                valid = sv[sp]
                while sp > 0:
                    sp -= 1
                    if sv[sp]:
                        if valid:
                            {tup(vs)} = region({ss}, {vs})
                        else:
""" + "".join(f"                            v{k} = s{k}[sp]\n" for k in range(n)) + f"""
                            valid = True
            if valid:
                {tup(vs)} = region({inits}, {vs})
            else:
""" + "".join(f"                v{k} = init{k}\n" for k in range(n))
            + "".join(f"            out{k}[o] = v{k}\n" for k in range(n))
            + "            changed = _next_coords(odims, oc)\n")
    return "\n".join(lines)


#: generated kernels call this module's window helpers: Numba's cache does not notice a change
#: in another file, so their text carries this file's hash (a new text is a new cache file)
_SELF_HASH = hashlib.sha256(pathlib.Path(__file__).read_bytes()).hexdigest()[:16]
_GEOMETRY_IMPORT = ("from xla_explorer.executors.cpu.reduction import _axis_codes, _first_coords, _next_coords"
                    f"  # reduction.py {_SELF_HASH}\n")


def _generated_fold(region, types, values, inits, geometry, out_types):
    """Run the generated window fold; ``geometry`` from ``window_geometry`` (C == 1).
    Returns the flat results in carrier types."""
    module = _generate("fold", [("region", region.computation)], _GEOMETRY_IMPORT + _fold_kernel_source(types))
    nout, _, odims, geo, maxwin, ncell = geometry
    outs = [np.empty(nout, _carrier(t)) for t in out_types]
    parallel = nout * max(ncell, 1) >= PARALLEL_THRESHOLD and nout > 1
    fn = module.fold_par if parallel else module.fold_ser
    ins = [_to_carrier(v, t).reshape(-1) for v, t in zip(values, types)]
    cinit = [_carrier(t).type(_to_carrier(i, t)[()]) for i, t in zip(inits, types)]
    if any(v.size == 0 for v in ins):  # every cell is a skipped one: give the kernel a dummy
        ins = [np.zeros(1, v.dtype) for v in ins]
    fn(nout, _chunks(nout, parallel), odims, geo, maxwin, ncell, *ins, *cinit, *outs)
    return outs


def _fold_rows_source(types):
    """Reduce's fold when the reduced dimensions are one block: x viewed as [A, R, B],
    result t = (a, b) folds x[a, :, b] (every cell real), in the reference's tree order."""
    from ..emit import carrier
    n = len(types)
    ins = ", ".join(f"in{k}" for k in range(n))
    inits = ", ".join(f"init{k}" for k in range(n))
    outs = ", ".join(f"out{k}" for k in range(n))
    vs = ", ".join(f"v{k}" for k in range(n))
    ss = ", ".join(f"s{k}[sp]" for k in range(n))
    text = ""
    for par, loop in (("par", "prange"), ("ser", "range")):
        text += f"""
@njit(cache=True, nogil=True, error_model='numpy', parallel={par == 'par'})
def rows_{par}(A, R, B, nchunks, {ins}, {inits}, {outs}):
    total = A * B
    per = (total + nchunks - 1) // nchunks
    for ch in {loop}(nchunks):
        sl = np.empty(64, np.int64)
""" + "".join(f"        s{k} = np.empty(64, {carrier(t)})\n" for k, t in enumerate(types)) + """
        for t in range(ch * per, min(total, (ch + 1) * per)):
            a = t // B
            base = a * R * B + (t - a * B)
            sp = 0
            for r in range(R):
""" + "".join(f"                v{k} = in{k}[base + r * B]\n" for k in range(n)) + f"""
                lvl = 0
                while sp > 0 and sl[sp - 1] == lvl:
                    sp -= 1
                    {vs} = region({ss}, {vs})
                    lvl += 1
""" + "".join(f"                s{k}[sp] = v{k}\n" for k in range(n)) + """
                sl[sp] = lvl
                sp += 1
            sp -= 1
""" + "".join(f"            v{k} = s{k}[sp]\n" for k in range(n)) + f"""
            while sp > 0:
                sp -= 1
                {vs} = region({ss}, {vs})
            {vs} = region({inits}, {vs})
""" + "".join(f"            out{k}[t] = v{k}\n" for k in range(n))
    text += _fold_cols_source(types)
    return text


def _fold_cols_source(types):
    """The same fold for B > 1, 64 results (columns) at a time: every row of the block
    read contiguously and merged into a stack of 64-wide rows by the same tree (the tree
    depends on R only), so each column gets the reference's order while the memory is
    read along rows, not down a column per result."""
    from ..emit import carrier
    n = len(types)
    ins = ", ".join(f"in{k}" for k in range(n))
    inits = ", ".join(f"init{k}" for k in range(n))
    outs = ", ".join(f"out{k}" for k in range(n))

    def merge(left, indent):
        args = ", ".join(left(k) for k in range(n)) + ", " + ", ".join(f"c{k}[j]" for k in range(n))
        lines = [f"r_ = region({args})"]
        lines += [f"c{k}[j] = r_[{k}]" if n > 1 else f"c{k}[j] = r_" for k in range(n)]
        return "".join(" " * indent + line + "\n" for line in lines)

    text = ""
    for par, loop in (("par", "prange"), ("ser", "range")):
        text += f"""
@njit(cache=True, nogil=True, error_model='numpy', parallel={par == 'par'})
def cols_{par}(A, R, B, nchunks, {ins}, {inits}, {outs}):
    nb = (B + 63) // 64
    total = A * nb
    per = (total + nchunks - 1) // nchunks
    for ch in {loop}(nchunks):
        sl = np.empty(64, np.int64)
""" + "".join(f"        s{k} = np.empty((64, 64), {carrier(t)})\n        c{k} = np.empty(64, {carrier(t)})\n"
              for k, t in enumerate(types)) + """
        for t in range(ch * per, min(total, (ch + 1) * per)):
            a = t // nb
            b0 = (t - a * nb) * 64
            w = min(64, B - b0)
            base = a * R * B + b0
            sp = 0
            for r in range(R):
                row = base + r * B
                for j in range(w):
""" + "".join(f"                    c{k}[j] = in{k}[row + j]\n" for k in range(n)) + """
                lvl = 0
                while sp > 0 and sl[sp - 1] == lvl:
                    sp -= 1
                    for j in range(w):
""" + merge(lambda k: f"s{k}[sp, j]", 24) + """
                    lvl += 1
                for j in range(w):
""" + "".join(f"                    s{k}[sp, j] = c{k}[j]\n" for k in range(n)) + """
                sl[sp] = lvl
                sp += 1
            sp -= 1
            for j in range(w):
""" + "".join(f"                c{k}[j] = s{k}[sp, j]\n" for k in range(n)) + """
            while sp > 0:
                sp -= 1
                for j in range(w):
""" + merge(lambda k: f"s{k}[sp, j]", 20) + """
            for j in range(w):
""" + merge(lambda k: f"init{k}", 16) + "".join(f"                out{k}[a * B + b0 + j] = c{k}[j]\n" for k in range(n))
    return text


def _generated_rows(region, types, values, inits, A, R, B):
    """Run the generated [A, R, B] fold (R >= 1); flat results in carrier types."""
    module = _generate("rows", [("region", region.computation)], _fold_rows_source(types))
    outs = [np.empty(A * B, _carrier(t)) for t in types]
    parallel = A * R * B >= PARALLEL_THRESHOLD and A * B > 1
    ins = [_to_carrier(v, t).reshape(-1) for v, t in zip(values, types)]
    cinit = [_carrier(t).type(_to_carrier(i, t)[()]) for i, t in zip(inits, types)]
    if B >= 16:  # columns: 64 at a time, rows read contiguously
        tasks = A * -(-B // 64)
        (module.cols_par if parallel and tasks > 1 else module.cols_ser)(
            A, R, B, _chunks(tasks, parallel), *ins, *cinit, *outs)
        return outs
    (module.rows_par if parallel else module.rows_ser)(A, R, B, _chunks(A * B, parallel), *ins, *cinit, *outs)
    return outs


# ---------------------------------------------------------------------------------------
# Recognised argmax / argmin regions (JAX's): a linear fold instead of the tree
#
# JAX's argmax region takes (a_v, a_i, b_v, b_i) and returns
#     p = a_v > b_v or a_v != a_v                 (argmin: <)
#     (a_v if p else b_v,  a_i if (p or (a_v == b_v and a_i < b_i)) else b_i).
# On any sequence of elements, folded in any bracketing that keeps their order (the
# reference's pairwise tree, a left-to-right fold), this gives one answer:
# - a NaN present: the first NaN, value and index (a NaN on the left is kept; on the
#   right it replaces a number);
# - else the value is the *last* element numerically equal to the maximum (on a tie p is
#   False and b's value is taken: the sign of a zero maximum comes from the last zero),
#   and the index is the smallest index among the elements equal to the maximum.
# (Joining two parts L, R: the maximum of L beats R's when larger, R's wins ties, so
# "the last maximum" of L + R; the index picks by (value, -index), a total preorder.)
# So a row can be reduced by a vectorised maximum and a second scan for the index, and
# columns by the region itself applied left to right as vectors: the same bits as the
# tree.  Under the "flush" float environment the region's compares read denormals as
# zeros: a row or column holding one runs the generated tree kernel instead.

def _argminmax_plan(comp):
    """(is_max, nan_check) when ``comp`` is JAX's argmax / argmin region (above); None
    otherwise.  ``nan_check`` is required for float values (without it a NaN makes the
    selection depend on the bracketing)."""
    cached = comp.__dict__.get("_cpu_argminmax", False)
    if cached is False:
        try:
            cached = _match_argminmax(comp)
        except (KeyError, IndexError, AttributeError):
            cached = None
        comp.__dict__["_cpu_argminmax"] = cached
    return cached


def _compare_of(inst, lhs, rhs):
    """The direction of ``compare(lhs, rhs)`` written either way round (seen from lhs), or
    None; compares of another type than the operands' (TOTALORDER) are not recognised."""
    if inst.opcode != "compare" or inst.attrs.get("compare_type") not in (None, "FLOAT", "SIGNED", "UNSIGNED"):
        return None
    d = inst.attrs["comparison_direction"]
    if inst.operands[0] is lhs and inst.operands[1] is rhs:
        return d
    if inst.operands[0] is rhs and inst.operands[1] is lhs:
        return _FLIPPED[d]
    return None


def _either(inst, opcode, test_a, test_b):
    """Whether ``inst`` is ``opcode(x, y)`` with test_a(x) and test_b(y), either order."""
    if inst.opcode != opcode or len(inst.operands) != 2:
        return False
    x, y = inst.operands
    return (test_a(x) and test_b(y)) or (test_a(y) and test_b(x))


def _match_argminmax(comp):
    params = comp.parameters
    root = comp.root
    if len(params) != 4 or root.opcode != "tuple" or len(root.operands) != 2:
        return None
    av, ai, bv, bi = params
    vt, it = av.shape.element_type, ai.shape.element_type
    if bv.shape.element_type != vt or bi.shape.element_type != it:
        return None
    if it not in dtypes.INTEGRAL or not (vt in dtypes.INTEGRAL or vt in ("pred", "f16", "bf16", "f32", "f64")):
        return None   # (pred: jnp.select's argmax over its stacked conditions)
    sv, si = root.operands
    if sv.opcode != "select" or si.opcode != "select":
        return None
    if sv.operands[1:] != [av, bv] or si.operands[1:] != [ai, bi]:
        return None
    p, q = sv.operands[0], si.operands[0]
    floats = vt not in dtypes.INTEGRAL and vt != "pred"
    # p: compare(a_v, b_v, GT | LT), or (floats) that or'ed with compare(a_v, a_v, NE)
    nan_check = False
    strict = _compare_of(p, av, bv)
    if strict is None and p.opcode == "or" and len(p.operands) == 2:
        for c, n in (p.operands, p.operands[::-1]):
            if _compare_of(n, av, av) == "NE" and _compare_of(c, av, bv) in ("GT", "LT"):
                strict, nan_check = _compare_of(c, av, bv), True
                break
    if strict not in ("GT", "LT") or (floats and not nan_check):
        return None
    # q: or(p, and(compare(a_v, b_v, EQ), compare(a_i, b_i, LT)))
    tie = lambda x: _either(x, "and", lambda e: _compare_of(e, av, bv) == "EQ",  # noqa: E731
                            lambda s: _compare_of(s, ai, bi) == "LT")
    if not _either(q, "or", lambda x: x is p, tie):
        return None
    return strict == "GT", nan_check


@njit(inline="always", **_opts)
def _arg_pick(av, ai, bv, bi, is_max, nan_check):
    """The recognised region itself: (value, index) of a combined with b (bitwise ``|`` and
    ``&``, not Python's ``or`` and ``and``: no branch an element)."""
    p = (av > bv) if is_max else (av < bv)
    if nan_check:
        p = p | (av != av)
    q = p | ((av == bv) & (ai < bi))
    return (av if p else bv), (ai if q else bi)


@njit(inline="always", **_opts)
def _is_denormal(a, tiny):
    return abs(a) < tiny and a != 0


#: lanes of the vectorised fold of a row (independent running (value, index) pairs,
#: combined at the end)
_ARG_LANES = 32


@njit(**_opts)
def _argminmax_rows(lo, hi, x, idx, R, shared, is_max, nan_check, tiny, initv, initi, vout, iout, bad):
    """Rows [lo, hi) of x[A, R] (flat) with their indices idx[A, R] (``shared``: idx[R], every
    row's, as JAX's iota along the row is): vout / iout = the
    recognised region folded over the row, then ``region(init, fold)``; rows whose maximum
    is a zero or a denormal and that hold a denormal, under flushing (``tiny`` > 0), are
    marked in ``bad`` (the caller reruns them).

    One pass: lane j of a block of L keeps the maximum of the row's elements j mod L and
    the smallest index among those equal to it (branch-free selects LLVM vectorises; a
    lane's sum of a - a turns NaN at a NaN or an infinity, the only sign of them the pass
    keeps: a row so flagged is scanned for a NaN); the lanes are then combined.  Without
    a NaN that is the maximum and the smallest index among the elements equal to it,
    whatever the lanes' grouping; the value a zero maximum takes (the last zero's sign)
    and a NaN row (the first NaN) are found by a scan of the row.  Flushing changes nothing unless the
    maximum is a zero or a denormal (a normal maximum M > 0: the denormals, and the zeros
    they flush to, stay below it; M < 0: no element is a denormal; the NaNs stay where
    they are), so only such rows are scanned for denormals."""
    L = _ARG_LANES
    lv = np.empty(L, x.dtype)
    li = np.empty(L, idx.dtype)
    nn = np.empty(L, x.dtype)
    for t in range(lo, hi):
        xs = x[t * R:(t + 1) * R]
        js = idx[0:R] if shared else idx[t * R:(t + 1) * R]
        full = R // L * L
        m = xs[0]
        i = js[0]
        nans = False
        k0 = 1
        if full:
            for j in range(L):
                a = xs[j]
                lv[j] = a
                li[j] = js[j]
                nn[j] = a - a   # NaN for a NaN (or an infinity): summed, a lane's flag
            for b in range(L, full, L):
                blk = xs[b:b + L]
                jb = js[b:b + L]
                for j in range(L):
                    a = blk[j]
                    c = lv[j]
                    jj = jb[j]
                    ci = li[j]
                    nn[j] += a - a
                    win = (a > c) if is_max else (a < c)
                    lo_i = jj if jj < ci else ci
                    li[j] = jj if win else (lo_i if a == c else ci)
                    lv[j] = a if win else c
            m = lv[0]
            i = li[0]
            flag = nn[0]
            for j in range(1, L):
                c = lv[j]
                ci = li[j]
                flag += nn[j]
                if (c > m) if is_max else (c < m):
                    m = c
                    i = ci
                elif c == m and ci < i:
                    i = ci
            if flag != flag:   # a NaN, or only an infinity: look
                for j in range(full):
                    nans |= xs[j] != xs[j]
            k0 = full
        for k in range(k0, R):
            a = xs[k]
            c = js[k]
            nans |= a != a
            if (a > m) if is_max else (a < m):
                m = a
                i = c
            elif a == m and c < i:
                i = c
        if nans:  # the first NaN (m, i are meaningless: a NaN lane is never replaced)
            k = 0
            while xs[k] == xs[k]:
                k += 1
            v, i = xs[k], js[k]
        else:
            if tiny and abs(m) < tiny:   # a zero or denormal maximum: flushing may decide
                den = False
                for k in range(R):
                    den |= _is_denormal(xs[k], tiny)
                if den:
                    bad[t] = True
                    continue
            v = m
            if m == 0:   # the value is the last maximum: a zero's sign is the last zero's
                k = R - 1
                while xs[k] != m:
                    k -= 1
                v = xs[k]
        vout[t], iout[t] = _arg_pick(initv, initi, v, i, is_max, nan_check)


@njit(**_opts)
def _argminmax_cols(lo, hi, x, idx, R, B, nblk, shared, is_max, nan_check, tiny, initv, initi, vout, iout, bad):
    """Tasks [lo, hi) of x[A, R, B] folded over R: task t is a block of up to 256 columns
    of row t // nblk, folded left to right by the region as vectors (its own order of
    combination is one the tree is equal to: see above).  ``shared``: idx is idx[R], the
    index of every column's element r (JAX's iota along R).  The running pairs are kept in
    scratch rows of the task's own (not in slices of the results, which LLVM cannot tell
    apart from x: it kept the loop scalar), the region's picks written out, and the rows
    checked for denormals (``tiny`` > 0) in loops of their own: 2-6x faster (f32[3, 2M]:
    3.6 -> 1.7 ms; jnp.select's pred argmax: 7.3 -> 0.6 ms)."""
    W = 256
    check = tiny > 0
    vs = np.empty(W, x.dtype)
    ix = np.empty(W, idx.dtype)
    for t in range(lo, hi):
        a = t // nblk
        b0 = (t - a * nblk) * W
        w = min(W, B - b0)
        base = a * R * B + b0
        den = False
        row = x[base:base + w]
        if shared:
            i0 = idx[0]
            for j in range(w):
                vs[j] = row[j]
                ix[j] = i0
        else:
            irow = idx[base:base + w]
            for j in range(w):
                vs[j] = row[j]
                ix[j] = irow[j]
        if check:
            for j in range(w):
                den |= _is_denormal(row[j], tiny)
        for r in range(1, R):
            row = x[base + r * B:base + r * B + w]
            if shared:
                ci = idx[r]
                for j in range(w):
                    bv = row[j]
                    av = vs[j]
                    ai = ix[j]
                    p = (av > bv) if is_max else (av < bv)
                    if nan_check:
                        p = p | (av != av)
                    q = p | ((av == bv) & (ai < ci))
                    vs[j] = av if p else bv
                    ix[j] = ai if q else ci
            else:
                irow = idx[base + r * B:base + r * B + w]
                for j in range(w):
                    bv = row[j]
                    bi = irow[j]
                    av = vs[j]
                    ai = ix[j]
                    p = (av > bv) if is_max else (av < bv)
                    if nan_check:
                        p = p | (av != av)
                    q = p | ((av == bv) & (ai < bi))
                    vs[j] = av if p else bv
                    ix[j] = ai if q else bi
            if check:
                for j in range(w):
                    den |= _is_denormal(row[j], tiny)
        if den:
            bad[t] = True
            continue
        vo = vout[a * B + b0:a * B + b0 + w]
        io = iout[a * B + b0:a * B + b0 + w]
        for j in range(w):
            vo[j], io[j] = _arg_pick(initv, initi, vs[j], ix[j], is_max, nan_check)


def _shared_line(ix, reduced):
    """The index operand's values along the reduced dimensions as one flat line when they
    are the same for every kept coordinate (``ix`` a broadcast view: its kept dimensions'
    strides 0, as the run plan hands a recognised argmax its iota), else None."""
    if type(ix) is not np.ndarray or ix.ndim == 0:
        return None
    if any(ix.strides[d] != 0 for d in range(ix.ndim) if d not in reduced and ix.shape[d] > 1):
        return None
    return np.ascontiguousarray(ix[tuple(slice(None) if d in reduced else 0 for d in range(ix.ndim))]).reshape(-1)


def _argminmax(plan, types, operands, inits, A, R, B, reduced=()):
    """The recognised argmax / argmin over x[A, R, B]: flat (values, indices) in carrier
    types, or None when a denormal meets the flushing compares (the caller runs the tree).
    ``reduced``: the reduced dimensions (an index operand constant along the others is
    read as one line of R)."""
    is_max, nan_check = plan
    x = _to_carrier(operands[0], types[0]).reshape(-1)
    pred = x.dtype == np.bool_   # (folded as the bytes 0 and 1: False < True)
    if pred:
        x = np.ascontiguousarray(x).view(np.uint8)
    line = _shared_line(operands[1], reduced) if reduced else None
    shared = line is not None
    idx = _to_carrier(line if shared else operands[1], types[1]).reshape(-1)
    initv = x.dtype.type(_to_carrier(inits[0], types[0])[()])
    initi = idx.dtype.type(_to_carrier(inits[1], types[1])[()])
    flushing = types[0] not in dtypes.INTEGRAL and not pred and fpenv.flushing(types[0])
    tiny = x.dtype.type(fpenv.TINY[types[0]] if flushing else 0)
    vout = np.empty(A * B, x.dtype)
    iout = np.empty(A * B, idx.dtype)
    parallel = A * R * B >= MOVE_PARALLEL_THRESHOLD
    if B == 1:
        bad = np.zeros(A, np.bool_)
        in_threads(_argminmax_rows, A, parallel and A > 1, x, idx, R, shared, is_max, nan_check, tiny, initv, initi,
                   vout, iout, bad)
    else:
        nblk = -(-B // 256)
        bad = np.zeros(A * nblk, np.bool_)
        in_threads(_argminmax_cols, A * nblk, parallel and A * nblk > 1, x, idx, R, B, nblk, shared, is_max,
                   nan_check, tiny, initv, initi, vout, iout, bad)
    if bad.any():
        return None
    return [vout.view(np.bool_) if pred else vout, iout]


# ---------------------------------------------------------------------------------------
# Reduce

@njit(**_opts)
def _denormal_parts(lo, hi, x, per, tiny, found):
    """found[k] = whether part k (x[k * per:(k + 1) * per]) holds a denormal, parts [lo, hi)."""
    for k in range(lo, hi):
        found[k] = _has_denormal(x[k * per:(k + 1) * per], tiny)


@njit(**_opts)
def _any_below(xs, tiny):
    """Whether some |x| < tiny (a zero or a denormal; NaN is not)."""
    found = False
    for i in range(xs.shape[0]):
        found |= abs(xs[i]) < tiny
    return found


def _flushed(v):
    """``flush_denormals(v)``, for a large f32 / f64 operand after a scan in threads (the
    executor's scan is one thread, and almost never finds anything)."""
    t = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}.get(getattr(v, "dtype", None))
    if t is not None and v.size >= MOVE_PARALLEL_THRESHOLD and v.flags.c_contiguous and fpenv.flushing(t):
        flat = v.reshape(-1)
        parts = 8 * _threads()
        per = -(-flat.size // parts)
        found = np.zeros(parts, np.bool_)
        in_threads(_denormal_parts, parts, True, flat, per, flat.dtype.type(fpenv.TINY[t]), found)
        if not found.any():
            return v
    return flush_denormals(v)


#: (a switch for A/B measurements) max / min under flushing in one pass
_ONE_PASS_PICK = True


@kernel("reduce")
def reduce_kernel(*values, shape, computation, dimensions, flush=()):
    """``flush``: per value, whether the executor's denormal rule wants it flushed (the
    kernel does it: a float sum checks its operand in its own pass over it, and flushes
    and reduces again only if it met a denormal; every other value is flushed here)."""
    n = len(values) // 2
    out_shapes = list(shape.tuple_shapes) if shape.is_tuple else [shape]
    types = [s.element_type for s in out_shapes]
    code0 = _standard_code(computation, types[0]) if n == 1 and types[0] in ("f32", "f64") else None
    checked = code0 == ADD
    # a maximum / minimum under flushing reads its operand unflushed, and only a result of
    # magnitude below the smallest normal (a zero or a denormal) makes it flush and reduce
    # again: otherwise flushing cannot change it.  (Say the maximum M of the values is
    # normal and positive: every denormal, and the zero it flushes to, is below M, which
    # flushing keeps; M normal and negative: no value is a denormal; M infinite: the same
    # infinities are there; a NaN: which NaN a fold keeps depends only on where the NaNs
    # are, which flushing keeps.  The minimum likewise.)
    picked = _ONE_PASS_PICK and code0 in (MAX, MIN) and bool(flush) and bool(flush[0])
    if any(flush):
        values = [_flushed(v) if m and not (k == 0 and (checked or picked)) else v
                  for k, (v, m) in enumerate(zip(values, flush))]
    operands, inits = values[:n], values[n:]
    dims = tuple(np.shape(operands[0]))
    reduced = tuple(sorted(int(d) for d in dimensions))
    count = product([dims[d] for d in reduced])
    result_dims = out_shapes[0].dims
    if count == 0 or product(result_dims) == 0:
        res = [np.full(s.dims, np.asarray(i), dtype=s.dtype) for s, i in zip(out_shapes, inits)]
        return tuple(res) if shape.is_tuple else res[0]
    code = _standard_code(computation, types[0]) if n == 1 else None
    if code is not None:
        t = types[0]
        x = _to_carrier(operands[0], t)
        init = x.dtype.type(_to_carrier(inits[0], t)[()])
        tiny = fpenv.TINY[t] if checked and flush and flush[0] else None
        flat = _reduce_standard(x, dims, reduced, code, init, tiny)
        if picked and _any_below(flat, flat.dtype.type(fpenv.TINY[t])):
            flat = None   # a zero or denormal maximum / minimum: what flushing gives decides
        if flat is None:  # a denormal in the operand (rare): flushed, reduced again
            flat = _reduce_standard(_to_carrier(flush_denormals(operands[0]), t), dims, reduced, code, init)
        return _from_carrier(flat.reshape(result_dims), t)
    ok, why = _region_compiled(computation)
    if not ok:
        return _reference_fallback("reduce", values, shape, {"computation": computation,
                                                              "dimensions": dimensions}, why)
    # Reduce is the window fold whose window spans the reduced dimensions
    rank = len(dims)
    kept = [d for d in range(rank) if d not in reduced]
    groups = _reduce_groups(dims, frozenset(reduced))
    block = [k for k, (_, r) in enumerate(groups) if r]
    try:
        if len(block) == 1:  # the reduced dimensions are one block: x as [A, R, B]
            i = block[0]
            A = product([g for g, _ in groups[:i]])
            B = product([g for g, _ in groups[i + 1:]])
            plan = _argminmax_plan(computation.computation) if n == 2 else None
            outs = (_argminmax(plan, types, operands, inits, A, groups[i][0], B, frozenset(reduced)) if plan
                    else None)
            if outs is None:
                outs = _generated_rows(computation, types, operands, inits, A, groups[i][0], B)
        else:
            outs = _generated_fold(computation, types, operands, inits, _reduce_geometry(dims, reduced), types)
    except _NumbaError as e:
        return _reference_fallback("reduce", values, shape, {"computation": computation, "dimensions": dimensions},
                                   _uncompilable(computation, e))
    res = [_from_carrier(o.reshape([dims[d] for d in kept]), t) for o, t in zip(outs, types)]
    return tuple(res) if shape.is_tuple else res[0]


#: the executor passes its denormal rule's mask as ``flush=`` instead of flushing first
reduce_kernel.flushes_operands = True

def _reduce_geometry(dims, reduced):
    """Reduce as a window spanning the reduced dimensions (one result per kept index)."""
    rank = len(dims)
    out = tuple(1 if d in reduced else n for d, n in enumerate(dims))
    win = tuple(n if d in reduced else 1 for d, n in enumerate(dims))
    return _window_geometry(tuple(dims), out, win, (1,) * rank, ((0, 0),) * rank, (1,) * rank, (1,) * rank)


# ---------------------------------------------------------------------------------------
# ReduceWindow

@kernel("reduce-window")
def reduce_window_kernel(*values, shape, computation, window_dimensions, window_strides, padding,
                         base_dilations=None, window_dilations=None, flush=()):
    """``flush``: per value, whether the executor's denormal rule wants it flushed (done
    here: a float operand of a standard combiner by the kernels themselves, which check
    what they read and run again on the flushed operand when it held a denormal; others
    after a scan, in threads when large)."""
    tiny = 0
    if any(flush):
        tiny = _deferred_flush(values, flush, computation)
        values = [_flushed(v) if m and not (k == 0 and tiny) else v for k, (v, m) in enumerate(zip(values, flush))]
    n = len(values) // 2
    operands, inits = values[:n], values[n:]
    out_shapes = list(shape.tuple_shapes) if shape.is_tuple else [shape]
    types = [s.element_type for s in out_shapes]
    in_dims = tuple(np.shape(operands[0]))
    wd, ws, pad, bd, wdl = spec._window_attrs("ReduceWindow", in_dims, window_dimensions, window_strides,
                                              padding, base_dilations, window_dilations)
    out_dims = tuple(out_shapes[0].dims)
    if product(out_dims) == 0:
        res = [np.empty(s.dims, s.dtype) for s in out_shapes]
        return tuple(res) if shape.is_tuple else res[0]
    code = _standard_code(computation, types[0]) if n == 1 else None
    if code is not None:
        t = types[0]
        x = _to_carrier(operands[0], t).reshape(-1)
        init = x.dtype.type(_to_carrier(inits[0], t)[()])
        nout, C, odims, geo, maxwin, ncell = _window_geometry(in_dims, out_dims, wd, ws, pad, bd, wdl, True)
        if x.size == 0:  # every cell is padding: the result is the init value
            return _from_carrier(np.full(out_dims, init, x.dtype), t)
        out = empty(nout * C, x.dtype)
        found = np.zeros(1, np.uint8)
        for again in range(2):
            # a window over the contiguous dimension (NCHW pooling, C = 1) or short blocks: by
            # separable passes; long blocks of trailing dimensions the window does not move
            # along (NHWC's channels) are combined as vectors of C, cell by cell, which reads
            # the operand once and needs no intermediate, unless the window is long (a
            # cumulative sum: the separable passes slide)
            if len(in_dims) and (C < _VECTOR_BLOCK or max(wd) >= _SLIDING_MIN):
                reduce_window_separable(x, in_dims, out_dims, tuple(wd), tuple(ws), tuple(map(tuple, pad)),
                                        tuple(bd), tuple(wdl), code, init, out, tiny, found)
            else:
                parallel = nout * C * max(ncell, 1) >= PARALLEL_THRESHOLD and nout > 1
                reduce_window(nout, 2 if parallel else 1, code, x, C, odims, geo, maxwin, ncell, init, out, tiny,
                              found)
            if not found[0]:
                break
            x, tiny = flush_denormals(x), 0   # (a denormal was read: again, on the flushed operand)
            found[0] = 0
        return _from_carrier(out.reshape(out_dims), t)
    if tiny:   # (not a standard combiner after all: flushed here)
        operands = [flush_denormals(operands[0])] + list(operands[1:])
        values = tuple(operands) + tuple(inits)
    ok, why = _region_compiled(computation)
    if not ok:
        return _reference_fallback("reduce-window", values, shape, dict(
            computation=computation, window_dimensions=wd, window_strides=ws, padding=pad, base_dilations=bd,
            window_dilations=wdl), why)
    geometry = _window_geometry(in_dims, out_dims, wd, ws, pad, bd, wdl)
    if any(np.size(v) == 0 for v in operands):
        geometry = geometry[:5] + (0,)  # every cell is padding
    try:
        outs = _generated_fold(computation, types, operands, inits, geometry, types)
    except _NumbaError as e:
        return _reference_fallback("reduce-window", values, shape, dict(
            computation=computation, window_dimensions=wd, window_strides=ws, padding=pad, base_dilations=bd,
            window_dilations=wdl), _uncompilable(computation, e))
    res = [_from_carrier(o.reshape(out_dims), t) for o, t in zip(outs, types)]
    return tuple(res) if shape.is_tuple else res[0]


#: the executor passes its denormal rule's mask as ``flush=`` instead of flushing first
reduce_window_kernel.flushes_operands = True


def _deferred_flush(values, flush, computation):
    """The denormal threshold when the kernels check the one float operand of a standard
    combiner for denormals as they read it (``tiny`` > 0: found[0] = 1, then they run again
    on the flushed operand) instead of a scan of their own before, else 0."""
    if len(values) != 2 or not flush[0] or getattr(computation, "combiner", None) not in _CODES:
        return 0
    v = values[0]
    t = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}.get(getattr(v, "dtype", None))
    if t is None or type(v) is not np.ndarray or not v.flags.c_contiguous or not fpenv.flushing(t):
        return 0
    return fpenv.TINY[t]


# -- prepared reduce and reduce-window (``numba_executor._op_step``) ----------------------------
#
# A run plan's step of a reduce or reduce-window with a standard combiner decides once what
# the kernel decides in Python on every run from the static shapes and attributes (the
# combiner's code, the window's attributes and geometry, the separable passes, the reduced
# groups, threads or not): a 256 KiB pooling spent about as long there as in its passes.
# The init value stays a run-time value; the denormal mask arrives as ``flush=`` (the
# kernels' own handling of it, as below); anything else -- other operand values, a region
# that is not one op, tuples, narrow floats and pred (their carriers) -- is the kernel's.

def _plain_carrier(t):
    """Whether values of XLA type ``t`` are their own carrier (no conversion in or out)."""
    return t not in _NARROW and t != "pred" and _kind(t) is not None


def _reduce_window_prepare(operand_shapes, *, shape, computation, window_dimensions, window_strides, padding,
                           base_dilations=None, window_dilations=None, flush=()):
    if shape.is_tuple or len(operand_shapes) != 2 or not shape.is_static:
        return None
    xs = operand_shapes[0]
    t = shape.element_type
    code = _standard_code(computation, t)
    if code is None or xs.element_type != t or not _plain_carrier(t) or not xs.dims or xs.numel == 0 \
            or shape.numel == 0:
        return None
    in_dims, out_dims = tuple(xs.dims), tuple(shape.dims)
    wd, ws, pad, bd, wdl = spec._window_attrs("ReduceWindow", in_dims, window_dimensions, window_strides,
                                              padding, base_dilations, window_dilations)
    nout, C, odims, geo, maxwin, ncell = _window_geometry(in_dims, out_dims, wd, ws, pad, bd, wdl, True)
    dtype = np.dtype(shape.dtype)
    kw = dict(shape=shape, computation=computation, window_dimensions=window_dimensions,
              window_strides=window_strides, padding=padding, base_dilations=base_dilations,
              window_dilations=window_dilations, flush=flush)
    marks = tuple(bool(m) for m in flush) if any(flush) else None
    if C < _VECTOR_BLOCK or max(wd) >= _SLIDING_MIN:
        args = (tuple(wd), tuple(ws), tuple(map(tuple, pad)), tuple(bd), tuple(wdl))
        items, item_in, item_out, passes, scratch = separable_plan(in_dims, out_dims, *args)
        ident = _identity(code, dtype)
        ident_bytes = ident.tobytes()
        work = product(in_dims) * max(1, int(sum(min(w, _SLIDING_MIN) for w in passes[:, 8])))
        parallel = work >= 2 * MOVE_PARALLEL_THRESHOLD
        # a float sum's or product's result (flushing) has its denormals found by the passes
        # (``checks_result``): no scan of the result after the step
        sums = code in (ADD, MUL) and dtype.kind == "f" and fpenv.flushing(t)
        if any(_is_sliding(g) or _is_long_row(g) for g in passes):
            # long windows (cumulative sums, long pooling windows), long rows: pass by pass,
            # as reduce_window_separable runs them (the same plan, the same kernel calls)
            pass_plan = _pass_plan(items, passes)

            def compute(x, init, out, tiny, found, out_tiny=0):
                return _run_pass_plan(pass_plan, x, out, code, ident, init, ident_bytes != init.tobytes(), parallel,
                                      tiny, found, out_tiny)
            checks_result = sums
        elif parallel:
            # a large pooling in threads: how depends on the run's thread count (the kernel's
            # own way, its Python set-up done here once), for the sums that check their result
            if not sums:
                return None

            def compute(x, init, out, tiny, found, out_tiny=0):
                return reduce_window_separable(x, in_dims, out_dims, *args, code, init, out, tiny, found, out_tiny)
            checks_result = True
        else:
            def compute(x, init, out, tiny, found, out_tiny=0):   # reduce_window_separable's serial path
                _separable(0, items, x, out, passes, item_in, item_out, scratch, code, ident, init,
                           ident_bytes != init.tobytes(), False, tiny, found)
                return False
            checks_result = False
    else:
        chunks = 2 if nout * C * max(ncell, 1) >= PARALLEL_THRESHOLD and nout > 1 else 1

        def compute(x, init, out, tiny, found, out_tiny=0):
            reduce_window(nout, chunks, code, x, C, odims, geo, maxwin, ncell, init, out, tiny, found)
            return False
        checks_result = False
    n_out, scalar = nout * C, dtype.type
    # (a sum's result flushed here, the kernel having looked for its denormals as it wrote it:
    # the executor's flush after the step, a scan of the result, is then skipped)
    out_tiny = scalar(fpenv.TINY[t]) if checks_result else scalar(0)

    # the operand's flush deferred as the kernel defers it: the passes check what they read
    tiny = scalar(fpenv.TINY[t]) if marks is not None and marks[0] and dtype.kind == "f" and fpenv.flushing(t) \
        else scalar(0)
    if tiny:
        marks = (False,) + marks[1:]
    nothing = scalar(0)

    def run(operand, init_value):
        if marks is not None:
            operand, init_value = [_flushed(v) if m else v for v, m in zip((operand, init_value), marks)]
        if type(operand) is not np.ndarray or operand.dtype != dtype or operand.shape != in_dims \
                or not operand.flags.c_contiguous:
            res = reduce_window_kernel(operand, init_value, **dict(kw, flush=(bool(tiny), False)))
            return flush_denormals(res) if checks_result else res
        init = scalar(np.asarray(init_value, dtype)[()])
        out = empty(n_out, dtype)
        found = np.zeros(1, np.uint8)
        den_out = compute(operand.reshape(-1), init, out, tiny, found, out_tiny)
        if found[0]:   # a denormal in the operand (rare): flushed, computed again
            den_out = compute(flush_denormals(operand).reshape(-1), init, out, nothing, found, out_tiny)
        res = out.reshape(out_dims)
        return flush_denormals(res) if den_out else res
    if checks_result:
        run.flushes_result = True   # (numba_executor: no flush of the result after the step)
    return run


reduce_window_kernel.prepare = _reduce_window_prepare


def _reduce_prepare(operand_shapes, *, shape, computation, dimensions, flush=()):
    if shape.is_tuple or len(operand_shapes) != 2 or not shape.is_static:
        return None
    xs = operand_shapes[0]
    t = shape.element_type
    code = _standard_code(computation, t)
    if code is None or xs.element_type != t or not _plain_carrier(t) or xs.numel == 0 or shape.numel == 0:
        return None
    dims, result_dims = tuple(xs.dims), tuple(shape.dims)
    reduced = tuple(sorted(int(d) for d in dimensions))
    if product([dims[d] for d in reduced]) == 0:
        return None
    dtype = np.dtype(shape.dtype)
    scalar = dtype.type
    checked = t in ("f32", "f64") and code == ADD
    tiny = fpenv.TINY[t] if checked and flush and flush[0] else None
    # as the kernel: a checked sum's operand is flushed only if its pass met a denormal
    marks = tuple(bool(m) and not (k == 0 and checked) for k, m in enumerate(flush)) if any(flush) else None

    memo = product(dims) >= _MEMO_MIN and product(result_dims) <= _MEMO_MAX

    def run(operand, init_value):
        x, init_v = operand, init_value
        if marks is not None:
            x, init_v = [_flushed(v) if m else v for v, m in zip((operand, init_value), marks)]
        if type(x) is not np.ndarray or x.dtype != dtype or x.shape != dims:
            return reduce_kernel(operand, init_value, shape=shape, computation=computation, dimensions=dimensions,
                                 flush=flush)
        init = scalar(np.asarray(init_v, dtype)[()])
        runs = getattr(_memo, "d", None) if memo else None
        if runs is not None:
            key = (id(x), dtype, dims, reduced, code, init.tobytes(), tiny, marks)
            got = runs.get(key)
            if got is not None and got[0]() is x:
                # a copy: two outputs of a run must not be one array (a caller may write one)
                return got[1].copy()
        flat = _reduce_standard(contiguous(x), dims, reduced, code, init, tiny)
        if flat is None:  # a denormal in the operand (rare): flushed, reduced again
            flat = _reduce_standard(contiguous(flush_denormals(x)), dims, reduced, code, init)
        out = flat.reshape(result_dims)
        if runs is not None:
            if len(runs) >= 16:
                runs.clear()
            runs[key] = (weakref.ref(x), out)
        return out
    return run


# A run reduces one array the same way twice where JAX's lowering calls a function that
# recomputes what its caller computed (layer norm: ``x.var`` sums x again for its mean;
# XLA inlines the call and the two reduces become one).  A prepared standard reduce of a
# large operand remembers its result for the rest of the run, keyed by the operand -- the
# very array object, alive (a weak reference: arrays are not written once made) -- and
# everything else the result depends on.  (A kernel that wrote into an operand in place
# would have to end the memo first.)  A second use gets a copy.
#
# The memo belongs to the run and to the thread that runs it (``begin_run`` /
# ``end_run``): outside a run, in another thread (a kernel's worker, a second run at the
# same time: a widget's), nothing is remembered, so an array a user changes between two
# runs is never answered from the first.
_memo = threading.local()
_MEMO_MIN = 1 << 16     # operand elements: below, the look-up is not worth its cost
_MEMO_MAX = 1 << 16     # result elements: above, the memo would keep large results alive


def begin_run():
    """Start this thread's memo of reduces (and of arrays scanned clean) for a run; returns
    what ``end_run`` restores (the memos of a run this one runs inside, or None)."""
    prev = getattr(_memo, "d", None), getattr(_memo, "clean", None)
    _memo.d = {}
    _memo.clean = {}
    return prev


def end_run(prev):
    """Forget the run's remembered reduces and scans (see above)."""
    _memo.d, _memo.clean = prev if prev is not None else (None, None)


# An array a run flushes twice (an argument two dots read, under flushing: x by the forward
# dot and by the weight gradient's) is scanned once: a scan that finds no denormal returns
# the array itself, and arrays are not written once made, so the same array object, alive,
# needs no second scan within the run.  The same memo's rules (this thread's run only, weak
# references) as the reduces' above.
#: elements: below, a scan costs about what the look-up does (a loop's weights, read by its dot
#: every iteration, f32[128, 128]: scanned once a run, the RNN scan 4.10 -> 3.94 ms)
_SCAN_MEMO_MIN = 1 << 13


def flush_in_run(x):
    """``flush_denormals(x)``; a large array found clean is remembered for the rest of the
    run (a second call returns it without a scan)."""
    seen = getattr(_memo, "clean", None) if type(x) is np.ndarray and x.size >= _SCAN_MEMO_MIN else None
    if seen is None:
        return elementwise.flush_denormals(x)
    got = seen.get(id(x))
    if got is not None and got() is x:
        return x
    out = elementwise.flush_denormals(x)
    if out is x:
        if len(seen) >= 64:
            seen.clear()
        seen[id(x)] = weakref.ref(x)
    return out


def known_clean(x):
    """Whether ``flush_in_run`` would return ``x`` without a scan (found clean in this run)."""
    seen = getattr(_memo, "clean", None) if type(x) is np.ndarray and x.size >= _SCAN_MEMO_MIN else None
    if seen is None:
        return False
    got = seen.get(id(x))
    return got is not None and got() is x


def note_clean(x):
    """Remember ``x`` as found clean by a scan of the caller's own (``flush_in_run``'s memo)."""
    seen = getattr(_memo, "clean", None) if type(x) is np.ndarray and x.size >= _SCAN_MEMO_MIN else None
    if seen is not None:
        if len(seen) >= 64:
            seen.clear()
        seen[id(x)] = weakref.ref(x)


reduce_kernel.prepare = _reduce_prepare
reduce_kernel.prepare_regions = True
reduce_kernel.prepare_flushing = True
reduce_window_kernel.prepare_regions = True
reduce_window_kernel.prepare_flushing = True

# ---------------------------------------------------------------------------------------
# SelectAndScatter: pass 1 picks one operand element per window (parallel over windows),
# pass 2 applies the source values in source order (serial: the reference's order)

GE, GT, LE, LT, EQ, NE = range(6)
_DIRECTIONS = {"GE": GE, "GT": GT, "LE": LE, "LT": LT, "EQ": EQ, "NE": NE}
_FLIPPED = {"GE": "LE", "GT": "LT", "LE": "GE", "LT": "GT", "EQ": "EQ", "NE": "NE"}


def _standard_select(region):
    """The direction code of a select region ``compare(a, b)`` (IEEE order), or None."""
    comp = region.computation
    root, params = comp.root, comp.parameters
    if root.opcode != "compare" or len(params) != 2 or len(comp.instructions) != 3:
        return None
    if root.attrs.get("compare_type") not in (None, "FLOAT", "SIGNED", "UNSIGNED"):
        return None
    d = root.attrs["comparison_direction"]
    if root.operands == [params[0], params[1]]:
        return _DIRECTIONS[d]
    if root.operands == [params[1], params[0]]:
        return _DIRECTIONS[_FLIPPED[d]]
    return None


@njit(inline="always", **_opts)
def _compare(code, a, b):
    if code == GE:
        return a >= b
    if code == GT:
        return a > b
    if code == LE:
        return a <= b
    if code == LT:
        return a < b
    if code == EQ:
        return a == b
    return a != b


@njit(**_opts)
def _select_chunk(lo, hi, code, x, odims, geo, maxwin, ncell, sel):
    m = odims.shape[0]
    oc = np.empty(m, np.int64)
    wc = np.empty(m, np.int64)
    vt = np.empty((m, maxwin), np.int64)
    vn = np.empty(m, np.int64)
    offs = np.empty(max(ncell, 1), np.int64)
    _first_coords(lo, odims, oc)
    changed = 0
    for s in range(lo, hi):
        for d in range(changed, m):
            vn[d] = _axis_real(oc[d], geo[d], vt[d])
        nv = _window_offsets(vt, vn, wc, offs)
        best = -1
        cur = x[0]
        for k in range(nv):
            v = x[offs[k]]
            # the first real cell is selected; a later b replaces a when select(a, b) is False
            if best < 0 or not _compare(code, cur, v):
                best = offs[k]
                cur = v
        sel[s] = best
        changed = _next_coords(odims, oc)


def select_windows(n, nchunks, code, x, odims, geo, maxwin, ncell, sel):
    """SelectAndScatter's pass 1: sel[s] = the flat operand index window s selects (-1: none);
    with nchunks > 1 in Python threads on the one compiled function (``shape.in_threads``)."""
    in_threads(_select_chunk, n, nchunks > 1, code, x, odims, geo, maxwin, ncell, sel)


@njit(**_opts)
def scatter_float(code, sel, src, out):
    """SelectAndScatter's pass 2 (floats), in source order."""
    for s in range(sel.shape[0]):
        t = sel[s]
        if t >= 0:
            a, b = out[t], src[s]
            if code == ADD:
                out[t] = a + b
            elif code == MUL:
                out[t] = a * b
            elif code == MAX:
                out[t] = fmax(a, b)
            else:
                out[t] = fmin(a, b)


@njit(**_opts)
def scatter_int(code, sel, src, out):
    """SelectAndScatter's pass 2 (integers, pred as uint8), in source order."""
    for s in range(sel.shape[0]):
        t = sel[s]
        if t >= 0:
            a, b = out[t], src[s]
            if code == ADD:
                out[t] = a + b
            elif code == MUL:
                out[t] = a * b
            elif code == MAX:
                out[t] = max(a, b)
            elif code == MIN:
                out[t] = min(a, b)
            elif code == AND:
                out[t] = a & b
            elif code == OR:
                out[t] = a | b
            else:
                out[t] = a ^ b


_SAS_SOURCE = """
@njit(cache=True, nogil=True, error_model='numpy', parallel={par})
def select_{name}(n, nchunks, x, odims, geo, maxwin, ncell, sel):
    m = odims.shape[0]
    per = (n + nchunks - 1) // nchunks
    for ch in {loop}(nchunks):
        oc = np.empty(m, np.int64)
        wc = np.empty(m, np.int64)
        vt = np.empty((m, maxwin), np.int64)
        vn = np.empty(m, np.int64)
        offs = np.empty(max(ncell, 1), np.int64)
        _first_coords(ch * per, odims, oc)
        changed = 0
        for s in range(ch * per, min(n, (ch + 1) * per)):
            for d in range(changed, m):
                vn[d] = _axis_real(oc[d], geo[d], vt[d])
            nv = _window_offsets(vt, vn, wc, offs)
            best = -1
            cur = x[0]
            for k in range(nv):
                v = x[offs[k]]
                if best < 0 or not select(cur, v):
                    best = offs[k]
                    cur = v
            sel[s] = best
            changed = _next_coords(odims, oc)
"""

_SCATTER_SOURCE = """
@njit(cache=True, nogil=True, error_model='numpy')
def scatter_pass(sel, src, out):
    for s in range(sel.shape[0]):
        t = sel[s]
        if t >= 0:
            out[t] = scatter(out[t], src[s])
"""


@kernel("select-and-scatter")
def select_and_scatter_kernel(operand, source, init_value, *, shape, select, scatter, window_dimensions,
                              window_strides, padding):
    t = shape.element_type
    in_dims = tuple(np.shape(operand))
    wd, ws, pad, bd, wdl = spec._window_attrs("SelectAndScatter", in_dims, window_dimensions, window_strides,
                                              padding)
    src_dims = tuple(np.shape(source))
    nsrc = product(src_dims)
    x = _to_carrier(operand, t).reshape(-1)
    src = _to_carrier(source, t).reshape(-1)
    out = np.full(x.size, _to_carrier(init_value, t)[()], x.dtype)
    if nsrc == 0 or x.size == 0:
        return _from_carrier(out.reshape(in_dims), t)
    sel_code = _standard_select(select) if _kind(t) is not None else None
    scatter_code = _standard_code(scatter, t)
    generated = None
    if sel_code is None or scatter_code is None:
        for region in (select, scatter):
            ok, why = _region_compiled(region)
            if not ok:
                return _reference_fallback("select-and-scatter", [operand, source, init_value], shape, dict(
                    select=select, scatter=scatter, window_dimensions=wd, window_strides=ws, padding=pad), why)
        source_text = ("from xla_explorer.executors.cpu.reduction import _axis_real, _window_offsets, "
                       f"_first_coords, _next_coords  # reduction.py {_SELF_HASH}\n"
                       + "".join(_SAS_SOURCE.format(name=name, par=name == "par", loop=loop)
                                 for name, loop in (("par", "prange"), ("ser", "range"))) + _SCATTER_SOURCE)
        generated = _generate("select_scatter", [("select", select.computation), ("scatter", scatter.computation)],
                              source_text)
    nout, _, odims, geo, maxwin, ncell = _window_geometry(in_dims, src_dims, wd, ws, pad, bd, wdl)
    sel = np.empty(nsrc, np.int64)
    parallel = nsrc * ncell >= PARALLEL_THRESHOLD and nsrc > 1
    nchunks = _chunks(nsrc, parallel)
    if generated is None:
        select_windows(nsrc, nchunks, sel_code, x, odims, geo, maxwin, ncell, sel)
        (scatter_float if _kind(t) == "float" else scatter_int)(scatter_code, sel, src, out)
    else:
        try:
            fn = generated.select_par if parallel else generated.select_ser
            fn(nsrc, nchunks, x, odims, geo, maxwin, ncell, sel)
            generated.scatter_pass(sel, src, out)
        except _NumbaError as e:
            _uncompilable(select, e)
            return _reference_fallback("select-and-scatter", [operand, source, init_value], shape, dict(
                select=select, scatter=scatter, window_dimensions=wd, window_strides=ws, padding=pad),
                _uncompilable(scatter, e))
    return _from_carrier(out.reshape(in_dims), t)


# ---------------------------------------------------------------------------------------
# Sort: recognised comparators sort integer keys; others get a generated merge sort

def _is_const(inst, test):
    if inst.opcode != "constant" or inst.shape.rank != 0:
        return False
    try:
        return bool(test(np.asarray(inst.attrs["literal"]).astype(np.float64)[()]))
    except (TypeError, ValueError):
        return False


def _key_of(inst, params):
    """(parameter number, canonicalised?) when ``inst`` is a parameter, or JAX's
    canonicalisation of one: ``select(x != x, nan, select(x == 0, 0, x))``."""
    if inst.opcode == "parameter" and inst in params:
        return params.index(inst), False
    if inst.opcode != "select":
        return None
    pred, nan, rest = inst.operands
    if not (pred.opcode == "compare" and pred.attrs["comparison_direction"] == "NE"
            and pred.operands[0] is pred.operands[1] and _is_const(nan, math.isnan)):
        return None
    p = pred.operands[0]
    if p not in params or rest.opcode != "select":
        return None
    pred2, zero, same = rest.operands
    if not (pred2.opcode == "compare" and pred2.attrs["comparison_direction"] == "EQ" and same is p
            and pred2.operands[0] is p and _is_const(pred2.operands[1], lambda v: v == 0)
            and _is_const(zero, lambda v: v == 0 and math.copysign(1.0, v) > 0)):
        return None
    return params.index(p), True


def _key_compare(inst, params):
    """(operand k, direction, canonicalised, compare type) for ``compare(key(p_2k), key(p_2k+1))``
    written either way round (direction then seen from lhs_k's side)."""
    if inst.opcode != "compare":
        return None
    a, b = (_key_of(o, params) for o in inst.operands)
    if a is None or b is None or a[1] != b[1] or {a[0], b[0]} != {2 * (min(a[0], b[0]) // 2),
                                                                   2 * (min(a[0], b[0]) // 2) + 1}:
        return None
    d = inst.attrs["comparison_direction"]
    if a[0] % 2:  # compare(rhs, lhs)
        d = _FLIPPED[d]
    return a[0] // 2, d, a[1], inst.attrs.get("compare_type") == "TOTALORDER"


def _lexicographic(inst, params):
    """[(operand, descending, canonicalised, totalorder), ...] when the comparator is
    ``less_0 or (equal_0 and (less_1 or ...))`` with less = LT / GT on one key."""
    c = _key_compare(inst, params)
    if c is not None:
        k, d, canon, total = c
        return [(k, d == "GT", canon, total)] if d in ("LT", "GT") else None
    if inst.opcode != "or" or len(inst.operands) != 2:
        return None
    for first, second in (inst.operands, inst.operands[::-1]):
        head = _lexicographic(first, params)
        if head is None or len(head) != 1 or second.opcode != "and":
            continue
        for eq, rest in (second.operands, second.operands[::-1]):
            e = _key_compare(eq, params)
            if e is None or e[1] != "EQ" or (e[0], e[2], e[3]) != (head[0][0], head[0][2], head[0][3]):
                continue
            tail = _lexicographic(rest, params)
            if tail is not None:
                return head + tail
    return None


def sort_keys_plan(comp):
    """The recognised form of a sort comparator (see ``_lexicographic``), or None."""
    cached = getattr(comp, "_cpu_sort_plan", False)
    if cached is False:
        cached = None
        try:
            plan = _lexicographic(comp.root, comp.parameters)
        except (KeyError, IndexError):
            plan = None
        if plan is not None:
            types = [comp.parameters[2 * k].shape.element_type for k, *_ in plan]
            if not any(t in dtypes.COMPLEX for t in types):
                cached = plan
        comp._cpu_sort_plan = cached
    return cached


@njit(**_opts)
def float_keys(bits, inf_bits, nan_bits, small_bits, canonical, ieee, descending, out):
    """Integer keys ordered like the floats whose bit patterns (signed ints) are ``bits``:
    the sign-magnitude pattern made two's complement (XLA's total order), after
    ``canonical`` (every NaN made ``nan_bits``, -0.0 made +0.0) or ``ieee`` (-0.0 == +0.0;
    returns False at the first NaN: IEEE order is then no order).  ``descending`` reverses.
    Magnitudes below ``small_bits`` are zeros there (1: zero only; the smallest normal's bits
    when flushing: XLA:CPU's compares, canonicalising ones included, read denormals as 0)."""
    magnitude = (1 << (bits.itemsize * 8 - 1)) - 1
    for i in range(bits.shape[0]):
        b = bits[i]
        a = b & magnitude
        if a > inf_bits:  # NaN
            if ieee:
                return False
            if canonical:
                b = nan_bits
        elif a < small_bits and (canonical or ieee):
            b = 0
        k = b ^ magnitude if b < 0 else b
        out[i] = ~k if descending else k
    return True


def _order_key(x, t, canonical, total, descending):
    """int32 / int64 keys ordered as the comparator orders ``x``; None when a NaN makes
    an IEEE comparison no order at all."""
    if t in ("f16", "bf16", "f32", "f64"):
        signed = np.dtype(f"i{x.dtype.itemsize}")
        bits = np.ascontiguousarray(x).reshape(-1).view(signed)
        special = np.array([np.inf, np.nan], x.dtype).view(signed).astype(np.int64)
        key = np.empty(bits.size, np.int32 if x.dtype.itemsize <= 4 else np.int64)
        small = 1
        if fpenv.flushing(t):
            small = int(np.array(fpenv.TINY[t], x.dtype).reshape(1).view(signed)[0])
        if not float_keys(bits, special[0], special[1], small, bool(canonical), not total, bool(descending), key):
            return None
        return key.reshape(x.shape)
    if t in dtypes.FLOATING:  # f8: the same, in NumPy
        if canonical or not total:
            if not total and np.isnan(x).any():
                return None
            x = np.where(np.isnan(x), np.asarray(np.nan, x.dtype), x)
            x = np.where(x == 0, np.zeros((), x.dtype), x)  # -0.0 == +0.0
        signed = np.dtype(f"i{x.dtype.itemsize}")
        bits = np.ascontiguousarray(x).view(signed)
        key = np.where(bits < 0, bits ^ np.iinfo(signed).max, bits).astype(np.int32)
    elif t == "u64":
        key = np.ascontiguousarray(x).view(np.int64) ^ np.int64(-2 ** 63)
    elif t in ("u32", "s64"):
        key = x.astype(np.int64)
    else:
        key = x.astype(np.int32)
    return ~key if descending else key


_RUN = 16


@njit(**_opts)
def merge_sort_rows(lo, hi, k, v, m):
    """Stable sort of rows [lo, hi) of k[rows, m] (flat) carrying v: insertion-sorted runs
    of 16, then bottom-up merges ping-ponging with scratch rows tk/tv."""
    tk = np.empty(m, k.dtype)
    tv = np.empty(m, v.dtype)
    for r in range(lo, hi):
        rk = k[r * m:(r + 1) * m]
        rv = v[r * m:(r + 1) * m]
        for s in range(0, m, _RUN):
            e = min(s + _RUN, m)
            for i in range(s + 1, e):
                key, val = rk[i], rv[i]
                j = i - 1
                while j >= s and rk[j] > key:
                    rk[j + 1] = rk[j]
                    rv[j + 1] = rv[j]
                    j -= 1
                rk[j + 1] = key
                rv[j + 1] = val
        width = _RUN
        in_temp = False
        while width < m:
            sk, sv, dk, dv = (tk, tv, rk, rv) if in_temp else (rk, rv, tk, tv)
            for s in range(0, m, 2 * width):
                mid = min(s + width, m)
                e = min(s + 2 * width, m)
                i, j, o = s, mid, s
                while i < mid and j < e:
                    if sk[j] < sk[i]:
                        dk[o] = sk[j]
                        dv[o] = sv[j]
                        j += 1
                    else:
                        dk[o] = sk[i]
                        dv[o] = sv[i]
                        i += 1
                    o += 1
                while i < mid:
                    dk[o] = sk[i]
                    dv[o] = sv[i]
                    i += 1
                    o += 1
                while j < e:
                    dk[o] = sk[j]
                    dv[o] = sv[j]
                    j += 1
                    o += 1
            in_temp = not in_temp
            width *= 2
        if in_temp:
            for i in range(m):
                rk[i] = tk[i]
                rv[i] = tv[i]


@njit(**_opts)
def radix_sort_rows(lo, hi, k, v, m):
    """Stable LSD radix sort of rows [lo, hi) of the signed integer keys k[rows, m] (flat)
    carrying v: one byte per pass, the top byte's sign bit flipped.  The histograms of
    every byte come from one read of the keys; a pass whose byte is the same for every
    key is skipped.  (Element loops throughout: array assignments such as ``k[:] = tk``
    cost over a second more compilation.)"""
    tk = np.empty(m, k.dtype)
    tv = np.empty(m, v.dtype)
    counts = np.empty((8, 256), np.int64)
    nbytes = k.itemsize
    top = nbytes - 1
    for r in range(lo, hi):
        rk = k[r * m:(r + 1) * m]
        rv = v[r * m:(r + 1) * m]
        for b in range(nbytes):
            for d in range(256):
                counts[b, d] = 0
        for i in range(m):
            key = rk[i]
            for b in range(top):
                counts[b, (key >> (8 * b)) & 0xFF] += 1
            counts[top, ((key >> (8 * top)) & 0xFF) ^ 0x80] += 1
        src_k, src_v, dst_k, dst_v = rk, rv, tk, tv
        swapped = False
        for b in range(nbytes):
            shift = 8 * b
            flip = 0x80 if b == top else 0
            hist = counts[b]
            skip = False
            for d in range(256):
                if hist[d] == m:
                    skip = True
            if skip:
                continue
            total = 0
            for d in range(256):
                c = hist[d]
                hist[d] = total
                total += c
            for i in range(m):
                key = src_k[i]
                d = ((key >> shift) & 0xFF) ^ flip
                at = hist[d]
                dst_k[at] = key
                dst_v[at] = src_v[i]
                hist[d] = at + 1
            src_k, src_v, dst_k, dst_v = dst_k, dst_v, src_k, src_v
            swapped = not swapped
        if swapped:
            for i in range(m):
                rk[i] = tk[i]
                rv[i] = tv[i]


#: rows at least this long are radix sorted (shorter ones merge sorted)
_RADIX_MIN = 512


def sort_rows(k, v, rows, m, parallel=False):
    """Stable sort of each row of k[rows, m] (flat) carrying v: a radix sort for long
    rows, a merge sort for short ones (only the one needed is compiled).  With
    ``parallel`` the rows are cut into one part per thread (``shape.in_threads``)."""
    in_threads(radix_sort_rows if m >= _RADIX_MIN else merge_sort_rows, rows, parallel, k, v, m)


@njit(**_opts)
def _gather_rows_range(lo, hi, src, perm, m, out):
    """out[r, j] = src[r, perm[r, j]] for rows [lo, hi) (flat arrays)."""
    for r in range(lo, hi):
        base = r * m
        for j in range(m):
            out[base + j] = src[base + perm[base + j]]


def gather_rows(src, perm, rows, m, out, parallel=False):
    """out[r, j] = src[r, perm[r, j]] (flat arrays), rows in threads with ``parallel``."""
    in_threads(_gather_rows_range, rows, parallel, src, perm, m, out)


def _stable_order(keys, rows, m, carry=None):
    """The stable lexicographic order of rows by ``keys`` (most significant first):
    one stable sort per key, least significant first.  Returns perm[rows * m]; with
    ``carry`` (one key; an array of rows * m unsigned ints) the sort carries those values
    instead of indices and returns them in sorted order (no gather afterwards)."""
    index_type = np.int32 if m < 2 ** 31 else np.int64
    perm = carry if carry is not None else np.tile(np.arange(m, dtype=index_type), rows)
    first = True
    for key in reversed(keys):
        k = key.reshape(-1) if first else key.reshape(-1)[_flat_perm(perm, rows, m)]
        if not first or not k.flags.writeable or not k.flags.c_contiguous:
            k = np.array(k, copy=True)
        first = False
        sort_rows(k, perm, rows, m, rows > 1 and rows * m >= PARALLEL_THRESHOLD)
    return perm


def _flat_perm(perm, rows, m):
    return perm.astype(np.int64) + np.repeat(np.arange(rows, dtype=np.int64) * m, m)


def _apply_order(columns, perm, rows, m):
    """Each (rows, m) column reordered by perm, bits moved as unsigned ints."""
    out = []
    for c in columns:
        c = np.ascontiguousarray(c).reshape(-1)
        if c.dtype.itemsize in (1, 2, 4, 8) and c.dtype.kind != "c":
            u = c.view(f"u{c.dtype.itemsize}")
            res = np.empty_like(u)
            gather_rows(u, perm, rows, m, res, rows > 1 and u.size >= PARALLEL_THRESHOLD)
            out.append(res.view(c.dtype))
        else:
            out.append(np.take_along_axis(c.reshape(rows, m), perm.reshape(rows, m).astype(np.int64),
                                          axis=1).reshape(-1))
    return out


_SORT_SOURCE = """
@njit(cache=True, nogil=True, error_model='numpy', inline='always')
def less(base, i, j, {cols}):
    return cmp({pairs})


@njit(cache=True, nogil=True, error_model='numpy')
def _sort_row(base, p, t, m, {cols}):
    for s in range(0, m, 16):
        e = min(s + 16, m)
        for i in range(s + 1, e):
            x = p[i]
            j = i - 1
            while j >= s and less(base, x, p[j], {cols}):
                p[j + 1] = p[j]
                j -= 1
            p[j + 1] = x
    width = 16
    src, dst = p, t
    swapped = False
    while width < m:
        for s in range(0, m, 2 * width):
            mid = min(s + width, m)
            e = min(s + 2 * width, m)
            i, j, o = s, mid, s
            while i < mid and j < e:
                if less(base, src[j], src[i], {cols}):
                    dst[o] = src[j]
                    j += 1
                else:
                    dst[o] = src[i]
                    i += 1
                o += 1
            while i < mid:
                dst[o] = src[i]
                i += 1
                o += 1
            while j < e:
                dst[o] = src[j]
                j += 1
                o += 1
        src, dst = dst, src
        swapped = not swapped
        width *= 2
    if swapped:
        for i in range(m):
            p[i] = t[i]


@njit(cache=True, nogil=True, error_model='numpy', parallel={par})
def sort_{name}(rows, m, nchunks, perm, {cols}):
    per = (rows + nchunks - 1) // nchunks
    for c in {loop}(nchunks):
        t = np.empty(m, np.int64)
        for r in range(c * per, min(rows, (c + 1) * per)):
            _sort_row(r * m, perm[r * m:(r + 1) * m], t, m, {cols})
"""


def _generated_sort(comparator, columns, types, rows, m):
    """Stable merge sort of the rows with the generated comparator; perm[rows * m]."""
    n = len(columns)
    cols = ", ".join(f"c{k}" for k in range(n))
    pairs = ", ".join(f"c{k}[base + i], c{k}[base + j]" for k in range(n))
    # the helper functions once, the row loop twice (parallel and serial)
    head, loop_src = _SORT_SOURCE.split("\n\n@njit(cache=True, nogil=True, error_model='numpy', parallel={par})")
    text = head.format(cols=cols, pairs=pairs)
    for name, loop in (("par", "prange"), ("ser", "range")):
        text += ("\n\n@njit(cache=True, nogil=True, error_model='numpy', parallel={par})" + loop_src).format(
            cols=cols, name=name, par=name == "par", loop=loop)
    module = _generate("sort", [("cmp", comparator.computation)], text)
    perm = np.tile(np.arange(m, dtype=np.int64), rows)
    ins = [_to_carrier(c, t).reshape(-1) for c, t in zip(columns, types)]
    parallel = rows > 1 and rows * m >= PARALLEL_THRESHOLD
    (module.sort_par if parallel else module.sort_ser)(rows, m, _chunks(rows, parallel), perm, *ins)
    return perm


@kernel("sort")
def sort_kernel(*operands, shape, comparator, dimension, is_stable=False):
    types = [s.element_type for s in (shape.tuple_shapes if shape.is_tuple else [shape])]
    dims = np.shape(operands[0])
    moved = [np.moveaxis(np.asarray(op), dimension, -1) for op in operands]
    lead, m = moved[0].shape[:-1], moved[0].shape[-1]
    rows = product(lead)
    if m <= 1 or rows == 0:
        res = [np.array(op, copy=True) for op in operands]
        return tuple(res) if shape.is_tuple else res[0]
    columns = [np.ascontiguousarray(a).reshape(rows, m) for a in moved]
    perm = None
    plan = sort_keys_plan(comparator.computation)
    if plan is not None:
        keys = [_order_key(columns[k], types[k], canon, total, desc) for k, desc, canon, total in plan]
        if all(key is not None for key in keys):
            c = columns[0]
            if len(columns) == 1 and c.dtype.itemsize in (1, 2, 4, 8) and c.dtype.kind != "c":
                # one operand: the sort carries its bits, nothing to gather afterwards
                bits = np.array(c.reshape(-1).view(f"u{c.dtype.itemsize}"), copy=True)
                out = _stable_order(keys, rows, m, carry=bits).view(c.dtype).reshape(moved[0].shape)
                return np.ascontiguousarray(np.moveaxis(out, -1, dimension))
            perm = _stable_order(keys, rows, m)
    if perm is None:
        ok, why = _region_compiled(comparator)
        if not ok or plan is not None:  # (a recognised IEEE comparison meeting a NaN: no strict order)
            return _reference_fallback("sort", operands, shape, dict(
                comparator=comparator, dimension=dimension, is_stable=is_stable),
                why or "an IEEE comparison of NaN keys is no strict weak order")
        try:
            perm = _generated_sort(comparator, columns, types, rows, m)
        except _NumbaError as e:
            return _reference_fallback("sort", operands, shape, dict(
                comparator=comparator, dimension=dimension, is_stable=is_stable), _uncompilable(comparator, e))
    sorted_columns = _apply_order(columns, perm, rows, m)
    res = [np.moveaxis(c.reshape(moved[0].shape), -1, dimension) for c in sorted_columns]
    res = [np.ascontiguousarray(r) for r in res]
    assert res[0].shape == dims
    return tuple(res) if shape.is_tuple else res[0]


# ---------------------------------------------------------------------------------------
# TopK: a stable sort of total-order keys (descending for largest), the first k

@njit(**_opts)
def _smallest_k(key, k, bk, bi):
    """The k smallest keys of a row with their indices, ascending, equal keys in index
    order (what a stable sort's first k are): a sorted buffer, insertion per candidate."""
    n = 0
    for i in range(key.shape[0]):
        x = key[i]
        if n == k:
            if x >= bk[k - 1]:
                continue
            j = k - 1
        else:
            j = n
            n += 1
        while j > 0 and bk[j - 1] > x:
            bk[j] = bk[j - 1]
            bi[j] = bi[j - 1]
            j -= 1
        bk[j] = x
        bi[j] = i


@njit(**_opts)
def _smallest_k_range(lo, hi, key, m, k, out_index):
    bk = np.empty(k, key.dtype)
    for r in range(lo, hi):
        _smallest_k(key[r * m:(r + 1) * m], k, bk, out_index[r * k:(r + 1) * k])


def smallest_k_rows(key, rows, m, k, out_index, parallel=False):
    """out_index[r, :k] = the indices of the k smallest keys of row r (stable order); rows
    in Python threads with ``parallel`` (``shape.in_threads``)."""
    in_threads(_smallest_k_range, rows, parallel, key, m, k, out_index)


#: TopK selects with a buffer up to this k, and sorts whole rows beyond it
_TOPK_SELECT = 64


@kernel("topk")
def topk_kernel(operand, *, shape, k, largest=True):
    x = np.asarray(operand)
    t = shape.tuple_shapes[0].element_type
    lead, m = x.shape[:-1], x.shape[-1]
    rows = product(lead)
    out_dims = shape.tuple_shapes[0].dims
    if rows == 0 or k == 0 or m == 0:
        return np.empty(out_dims, x.dtype), np.empty(out_dims, np.int32)
    column = np.ascontiguousarray(x).reshape(rows, m)
    if t == "pred":
        key = column.astype(np.int32)
        key = ~key if largest else key
    else:
        key = _order_key(column, t, False, True, bool(largest))
    if k <= _TOPK_SELECT:
        index = np.empty(rows * k, np.int32)
        parallel = rows > 1 and rows * m >= PARALLEL_THRESHOLD
        smallest_k_rows(np.ascontiguousarray(key).reshape(-1), rows, m, k, index, parallel)
        index = index.reshape(rows, k)
    else:
        index = _stable_order([key], rows, m).reshape(rows, m)[:, :k].astype(np.int32)
    values = np.take_along_axis(column, index.astype(np.int64), axis=1)
    return values.reshape(out_dims), index.reshape(out_dims)
