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

Window geometry (strides, padding, dilations) arrives in every kernel as run-time tables:
for each dimension and result coordinate, the operand index each window position reads,
or -1 for padding and base-dilation holes.

Sort recognises the comparators JAX and ``Sort``'s default emit (a ``LT``/``GT`` on one key,
possibly through JAX's NaN / -0.0 canonicalisation and ``TOTALORDER``, several keys
compared lexicographically): their keys become integers ordered like the comparator and a
stable Numba merge sort orders them.  Any other comparator gets a generated merge sort
calling it.  A region that cannot be compiled (an op without a scalar emitter) runs the
NumPy reference: slow, but right.
"""
import functools
import math

import numpy as np

from ... import dtypes
from ...ops import reduction as spec
from ...ops import registry
from ..jit_cache import load_source
from ..numba_setup import PARALLEL_THRESHOLD, numba
from ..reference import Region
from ..scalar_lib import fmax, fmin
from . import kernel

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
        return np.asarray(a, order="C").view(np.uint8)
    return np.asarray(a.astype(want, copy=False), order="C")


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
    bound = {}
    for k, v in attrs.items():
        if isinstance(v, Region):
            bound[k] = Region(v.computation, v.ctx)
        else:
            bound[k] = v
    return registry.get(opcode).reference(*values, shape=shape, **bound)


#: opcode -> why the last call ran the reference instead of a kernel (for the curious)
_FALLBACKS = {}


def _window_tables(in_dims, out_dims, win, strides, pad_low, base_dil, win_dil):
    """Per dimension d and result coordinate o, the operand index window position w reads
    (``table[toff[d] + o * win[d] + w]``), or -1 for padding and base-dilation holes."""
    parts, offsets, at = [], [], 0
    for n, o, w, s, lo, bd, wd in zip(in_dims, out_dims, win, strides, pad_low, base_dil, win_dil):
        r = np.arange(o, dtype=np.int64)[:, None]
        k = np.arange(w, dtype=np.int64)[None, :]
        q = r * s + k * wd - lo
        dilated = (n - 1) * bd + 1 if n > 0 else 0
        inside = (q >= 0) & (q < dilated) & (q % bd == 0)
        parts.append(np.where(inside, q // bd, -1).reshape(-1))
        offsets.append(at)
        at += o * w
    table = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    return np.ascontiguousarray(table, np.int64), np.array(offsets, np.int64)


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

@njit(fastmath={"reassoc"}, **_opts)
def _sum_range(x, lo, hi, acc):
    # reassociation lets LLVM vectorise the sum (XLA reassociates reductions too)
    for i in range(lo, hi):
        acc += x[i]
    return acc


@njit(**_opts)
def _fold_float(code, x, lo, hi, acc):
    """acc combined with x[lo:hi] (floats: add, multiply, maximum, minimum)."""
    if code == ADD:
        return _sum_range(x, lo, hi, acc)
    if code == MUL:
        for i in range(lo, hi):
            acc *= x[i]
    elif code == MAX:
        for i in range(lo, hi):
            acc = fmax(acc, x[i])
    else:
        for i in range(lo, hi):
            acc = fmin(acc, x[i])
    return acc


@njit(**_opts)
def _fold_int(code, x, lo, hi, acc):
    """acc combined with x[lo:hi] (integers wrap: the caller stores into the narrow type)."""
    if code == ADD:
        for i in range(lo, hi):
            acc += x[i]
    elif code == MUL:
        for i in range(lo, hi):
            acc *= x[i]
    elif code == MAX:
        for i in range(lo, hi):
            acc = max(acc, x[i])
    elif code == MIN:
        for i in range(lo, hi):
            acc = min(acc, x[i])
    elif code == AND:
        for i in range(lo, hi):
            acc &= x[i]
    elif code == OR:
        for i in range(lo, hi):
            acc |= x[i]
    else:
        for i in range(lo, hi):
            acc ^= x[i]
    return acc


@njit(**_opts)
def _rows_float(code, x, base, out, obase, n):
    """out[obase:obase+n] combined element-wise with x[base:base+n] (vectorises)."""
    if code == ADD:
        for b in range(n):
            out[obase + b] += x[base + b]
    elif code == MUL:
        for b in range(n):
            out[obase + b] *= x[base + b]
    elif code == MAX:
        for b in range(n):
            out[obase + b] = fmax(out[obase + b], x[base + b])
    else:
        for b in range(n):
            out[obase + b] = fmin(out[obase + b], x[base + b])


@njit(**_opts)
def _rows_int(code, x, base, out, obase, n):
    if code == ADD:
        for b in range(n):
            out[obase + b] += x[base + b]
    elif code == MUL:
        for b in range(n):
            out[obase + b] *= x[base + b]
    elif code == MAX:
        for b in range(n):
            out[obase + b] = max(out[obase + b], x[base + b])
    elif code == MIN:
        for b in range(n):
            out[obase + b] = min(out[obase + b], x[base + b])
    elif code == AND:
        for b in range(n):
            out[obase + b] &= x[base + b]
    elif code == OR:
        for b in range(n):
            out[obase + b] |= x[base + b]
    else:
        for b in range(n):
            out[obase + b] ^= x[base + b]


# ---------------------------------------------------------------------------------------
# Reduce with a standard combiner: x viewed as [A, R, B], out as [A, P, B]
# (P > 1 cuts R into P parts for parallelism when A is small; a second pass joins them)

@njit(**_opts)
def _arb_task_float(x, A, R, B, P, code, init, use_init, out, t, chunk):
    a = t // P
    p = t - a * P
    r0 = p * chunk
    r1 = min(R, r0 + chunk)
    start = r0 if use_init else r0 + 1
    if B == 1:
        acc = init if use_init else x[a * R + r0]
        out[t] = _fold_float(code, x, a * R + start, a * R + r1, acc)
    else:
        obase = t * B
        first = (a * R + r0) * B
        for b in range(B):
            out[obase + b] = init if use_init else x[first + b]
        for r in range(start, r1):
            _rows_float(code, x, (a * R + r) * B, out, obase, B)


@njit(**_opts)
def _arb_task_int(x, A, R, B, P, code, init, use_init, out, t, chunk):
    a = t // P
    p = t - a * P
    r0 = p * chunk
    r1 = min(R, r0 + chunk)
    start = r0 if use_init else r0 + 1
    if B == 1:
        acc = init if use_init else x[a * R + r0]
        out[t] = _fold_int(code, x, a * R + start, a * R + r1, acc)
    else:
        obase = t * B
        first = (a * R + r0) * B
        for b in range(B):
            out[obase + b] = init if use_init else x[first + b]
        for r in range(start, r1):
            _rows_int(code, x, (a * R + r) * B, out, obase, B)


@njit(**_opts)
def reduce_arb_float(x, A, R, B, P, code, init, use_init, out):
    """Reduce x[A, R, B] over R (cut in P parts) into out[A, P, B]: floats."""
    chunk = (R + P - 1) // P
    for t in range(A * P):
        _arb_task_float(x, A, R, B, P, code, init, use_init, out, t, chunk)


@njit(parallel=True, **_opts)
def reduce_arb_float_par(x, A, R, B, P, code, init, use_init, out):
    chunk = (R + P - 1) // P
    for t in prange(A * P):
        _arb_task_float(x, A, R, B, P, code, init, use_init, out, t, chunk)


@njit(**_opts)
def reduce_arb_int(x, A, R, B, P, code, init, use_init, out):
    """Reduce x[A, R, B] over R (cut in P parts) into out[A, P, B]: integers and pred."""
    chunk = (R + P - 1) // P
    for t in range(A * P):
        _arb_task_int(x, A, R, B, P, code, init, use_init, out, t, chunk)


@njit(parallel=True, **_opts)
def reduce_arb_int_par(x, A, R, B, P, code, init, use_init, out):
    chunk = (R + P - 1) // P
    for t in prange(A * P):
        _arb_task_int(x, A, R, B, P, code, init, use_init, out, t, chunk)


_ARB = {("float", False): reduce_arb_float, ("float", True): reduce_arb_float_par,
        ("int", False): reduce_arb_int, ("int", True): reduce_arb_int_par}


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


def _arb_pass(x, kind, A, R, B, code, init, use_init):
    """One reduction of x[A, R, B] over R; returns out[A, B] (flat)."""
    n = A * R * B
    parallel = n >= PARALLEL_THRESHOLD
    P = 1
    if parallel:
        want = 4 * _threads()
        if A < want:
            P = max(1, min(-(-want // A), R // 1024))
            chunk = -(-R // P)
            P = -(-R // chunk)
        parallel = A * P > 1
    out = np.empty(A * P * B, x.dtype)
    _ARB[(kind, parallel)](x, A, R, B, P, code, init, use_init and P == 1, out)
    if P > 1:  # join the parts: [A, P, B] over P
        out2 = np.empty(A * B, x.dtype)
        _ARB[(kind, False)](out, A, P, B, 1, code, init, use_init, out2)
        out = out2
    return out


def _reduce_standard(x, dims, reduced, code, kind, init):
    """Reduce carrier array ``x`` over ``reduced`` with a standard combiner; flat result."""
    groups = list(_reduce_groups(tuple(dims), frozenset(reduced)))
    x = x.reshape(-1)
    if not any(r for _, r in groups):  # nothing (or only size-1 dimensions) reduced
        return _arb_pass(x, kind, x.size, 1, 1, code, init, True)
    while True:
        i = max(k for k, (_, r) in enumerate(groups) if r)
        last = sum(1 for _, r in groups if r) == 1
        A = int(np.prod([s for s, _ in groups[:i]], dtype=np.int64))
        B = int(np.prod([s for s, _ in groups[i + 1:]], dtype=np.int64))
        x = _arb_pass(x, kind, A, groups[i][0], B, code, init, last)
        if last:
            return x
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

@njit(**_opts)
def _rw_chunk_float(lo, hi, code, x, C, odims, wdims, ncell, table, toff, istr, init, out):
    m = odims.shape[0]
    oc = np.empty(m, np.int64)
    wc = np.empty(m, np.int64)
    for o in range(lo, hi):
        r = o
        for d in range(m - 1, -1, -1):
            oc[d] = r % odims[d]
            r //= odims[d]
            wc[d] = 0
        ob = o * C
        for c in range(C):
            out[ob + c] = init
        for cell in range(ncell):
            off = 0
            ok = True
            for d in range(m):
                t = table[toff[d] + oc[d] * wdims[d] + wc[d]]
                if t < 0:
                    ok = False
                off += t * istr[d]
            if ok:
                _rows_float(code, x, off, out, ob, C)
            d = m - 1
            while d >= 0:
                wc[d] += 1
                if wc[d] < wdims[d]:
                    break
                wc[d] = 0
                d -= 1


@njit(**_opts)
def _rw_chunk_int(lo, hi, code, x, C, odims, wdims, ncell, table, toff, istr, init, out):
    m = odims.shape[0]
    oc = np.empty(m, np.int64)
    wc = np.empty(m, np.int64)
    for o in range(lo, hi):
        r = o
        for d in range(m - 1, -1, -1):
            oc[d] = r % odims[d]
            r //= odims[d]
            wc[d] = 0
        ob = o * C
        for c in range(C):
            out[ob + c] = init
        for cell in range(ncell):
            off = 0
            ok = True
            for d in range(m):
                t = table[toff[d] + oc[d] * wdims[d] + wc[d]]
                if t < 0:
                    ok = False
                off += t * istr[d]
            if ok:
                _rows_int(code, x, off, out, ob, C)
            d = m - 1
            while d >= 0:
                wc[d] += 1
                if wc[d] < wdims[d]:
                    break
                wc[d] = 0
                d -= 1


@njit(**_opts)
def reduce_window_float(nout, nchunks, code, x, C, odims, wdims, ncell, table, toff, istr, init, out):
    """ReduceWindow, floats: result position o (of nout, each a block of C) folds the
    window cells the tables name."""
    _rw_chunk_float(0, nout, code, x, C, odims, wdims, ncell, table, toff, istr, init, out)


@njit(parallel=True, **_opts)
def reduce_window_float_par(nout, nchunks, code, x, C, odims, wdims, ncell, table, toff, istr, init, out):
    per = (nout + nchunks - 1) // nchunks
    for k in prange(nchunks):
        _rw_chunk_float(k * per, min(nout, (k + 1) * per), code, x, C, odims, wdims, ncell, table, toff, istr,
                        init, out)


@njit(**_opts)
def reduce_window_int(nout, nchunks, code, x, C, odims, wdims, ncell, table, toff, istr, init, out):
    """ReduceWindow, integers and pred."""
    _rw_chunk_int(0, nout, code, x, C, odims, wdims, ncell, table, toff, istr, init, out)


@njit(parallel=True, **_opts)
def reduce_window_int_par(nout, nchunks, code, x, C, odims, wdims, ncell, table, toff, istr, init, out):
    per = (nout + nchunks - 1) // nchunks
    for k in prange(nchunks):
        _rw_chunk_int(k * per, min(nout, (k + 1) * per), code, x, C, odims, wdims, ncell, table, toff, istr,
                      init, out)


_RW = {("float", False): reduce_window_float, ("float", True): reduce_window_float_par,
       ("int", False): reduce_window_int, ("int", True): reduce_window_int_par}


@functools.lru_cache(maxsize=256)
def _rw_plan(in_dims, out_dims, wd, ws, pad, bd, wdl, block_trailing=True):
    """The tables of a window, with the trailing dimensions the window does not move along
    (size 1, stride 1, no padding or dilation) collapsed into a block of C elements."""
    rank = len(in_dims)
    k = rank
    if block_trailing:
        while k > 0 and wd[k - 1] == 1 and ws[k - 1] == 1 and pad[k - 1] == (0, 0) and bd[k - 1] == 1 \
                and in_dims[k - 1] == out_dims[k - 1]:
            k -= 1
    C = int(np.prod(in_dims[k:], dtype=np.int64))
    table, toff = _window_tables(in_dims[:k], out_dims[:k], wd[:k], ws[:k], [p[0] for p in pad[:k]],
                                 bd[:k], wdl[:k])
    istr = _strides(in_dims[:k]) * C
    odims = np.array(out_dims[:k], np.int64)
    wdims = np.array(wd[:k], np.int64)
    ncell = int(np.prod(wd[:k], dtype=np.int64))
    nout = int(np.prod(out_dims[:k], dtype=np.int64))
    return nout, C, odims, wdims, ncell, table, toff, istr


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


def region_source(comp, name):
    """The scalar Numba source of region ``comp``: ``def name(p0, p1, ...)`` returning one
    carrier value or a tuple.  Raises NotCompilable for an instruction without emitter."""
    from ..emit import EMITTERS, can_emit, finish, supported_type
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
            expr = finish(EMITTERS[op](inst, *[names[o] for o in inst.operands]), t)
        else:
            raise NotCompilable(f"{op} ({inst.name}) has no scalar emitter")
        names[inst] = f"t{n}"
        body.append(f"    t{n} = {expr}")
    root = names[comp.root]
    if isinstance(root, tuple):
        ret = "(" + ", ".join(root) + ("," if len(root) == 1 else "") + ")"
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
    tup = lambda names: names + ("," if n == 1 else "")  # noqa: E731
    lines = []
    for par, loop in (("par", "prange"), ("ser", "range")):
        lines.append(f"""
@njit(cache=True, nogil=True, error_model='numpy', parallel={par == 'par'})
def fold_{par}(nout, nchunks, odims, wdims, ncell, table, toff, istr, {ins}, {inits}, {outs}):
    m = odims.shape[0]
    per = (nout + nchunks - 1) // nchunks
    for ch in {loop}(nchunks):
        oc = np.empty(m, np.int64)
        wc = np.empty(m, np.int64)
        sl = np.empty(64, np.int64)
        sv = np.empty(64, np.bool_)
""" + "".join(f"        s{k} = np.empty(64, {carrier(t)})\n" for k, t in enumerate(types)) + f"""
        for o in range(ch * per, min(nout, (ch + 1) * per)):
            r = o
            for d in range(m - 1, -1, -1):
                oc[d] = r % odims[d]
                r //= odims[d]
                wc[d] = 0
            sp = 0
            for cell in range(ncell):
                off = 0
                valid = True
                for d in range(m):
                    t = table[toff[d] + oc[d] * wdims[d] + wc[d]]
                    if t < 0:
                        valid = False
                    off += t * istr[d]
""" + "".join(f"                v{k} = in{k}[off] if valid else init{k}\n" for k in range(n)) + f"""
                lvl = 0
                while sp > 0 and sl[sp - 1] == lvl:
                    sp -= 1
                    if sv[sp]:
                        if valid:
                            {tup(vs)} = region({ss}, {vs})
                        else:
""" + "".join(f"                            v{k} = s{k}[sp]\n" for k in range(n)) + f"""
                            valid = True
                    lvl += 1
""" + "".join(f"                s{k}[sp] = v{k}\n" for k in range(n)) + f"""
                sl[sp] = lvl
                sv[sp] = valid
                sp += 1
                d = m - 1
                while d >= 0:
                    wc[d] += 1
                    if wc[d] < wdims[d]:
                        break
                    wc[d] = 0
                    d -= 1
""" + "".join(f"            v{k} = init{k}\n" for k in range(n)) + f"""
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
            + "".join(f"            out{k}[o] = v{k}\n" for k in range(n)))
    return "\n".join(lines)


def _generated_fold(region, types, values, inits, geometry, out_types):
    """Run the generated window fold; ``geometry`` = (nout, odims, wdims, ncell, table,
    toff, istr) with C == 1.  Returns the flat results in carrier types."""
    module = _generate("fold", [("region", region.computation)], _fold_kernel_source(types))
    nout, odims, wdims, ncell, table, toff, istr = geometry
    outs = [np.empty(nout, _carrier(t)) for t in out_types]
    parallel = nout * max(ncell, 1) >= PARALLEL_THRESHOLD and nout > 1
    fn = module.fold_par if parallel else module.fold_ser
    ins = [_to_carrier(v, t).reshape(-1) for v, t in zip(values, types)]
    cinit = [_carrier(t).type(_to_carrier(i, t)[()]) for i, t in zip(inits, types)]
    if any(v.size == 0 for v in ins):  # every cell is a skipped one: give the kernel a dummy
        ins = [np.zeros(1, v.dtype) for v in ins]
    fn(nout, _chunks(nout, parallel), odims, wdims, ncell, table, toff, istr, *ins, *cinit, *outs)
    return outs


# ---------------------------------------------------------------------------------------
# Reduce

@kernel("reduce")
def reduce_kernel(*values, shape, computation, dimensions):
    n = len(values) // 2
    operands, inits = values[:n], values[n:]
    out_shapes = list(shape.tuple_shapes) if shape.is_tuple else [shape]
    types = [s.element_type for s in out_shapes]
    dims = tuple(np.shape(operands[0]))
    reduced = tuple(sorted(int(d) for d in dimensions))
    count = int(np.prod([dims[d] for d in reduced], dtype=np.int64))
    result_dims = out_shapes[0].dims
    if count == 0 or int(np.prod(result_dims, dtype=np.int64)) == 0:
        res = [np.full(s.dims, np.asarray(i), dtype=s.dtype) for s, i in zip(out_shapes, inits)]
        return tuple(res) if shape.is_tuple else res[0]
    code = _standard_code(computation, types[0]) if n == 1 else None
    if code is not None:
        t = types[0]
        x = _to_carrier(operands[0], t)
        init = _to_carrier(inits[0], t)[()]
        flat = _reduce_standard(x, dims, reduced, code, _kind(t), x.dtype.type(init))
        return _from_carrier(flat.reshape(result_dims), t)
    ok, why = _region_compiled(computation)
    if not ok:
        return _reference_fallback("reduce", values, shape, {"computation": computation,
                                                              "dimensions": dimensions}, why)
    # Reduce is the window fold whose window spans the reduced dimensions
    rank = len(dims)
    kept = [d for d in range(rank) if d not in reduced]
    geometry = _reduce_geometry(dims, reduced)
    outs = _generated_fold(computation, types, operands, inits, geometry, types)
    res = [_from_carrier(o.reshape([dims[d] for d in kept]), t) for o, t in zip(outs, types)]
    return tuple(res) if shape.is_tuple else res[0]


@functools.lru_cache(maxsize=256)
def _reduce_geometry(dims, reduced):
    out = tuple(1 if d in reduced else n for d, n in enumerate(dims))
    win = tuple(n if d in reduced else 1 for d, n in enumerate(dims))
    rank = len(dims)
    table, toff = _window_tables(dims, out, win, (1,) * rank, (0,) * rank, (1,) * rank, (1,) * rank)
    nout = int(np.prod(out, dtype=np.int64))
    return (nout, np.array(out, np.int64), np.array(win, np.int64), int(np.prod(win, dtype=np.int64)), table,
            toff, _strides(dims))


# ---------------------------------------------------------------------------------------
# ReduceWindow

@kernel("reduce-window")
def reduce_window_kernel(*values, shape, computation, window_dimensions, window_strides, padding,
                         base_dilations=None, window_dilations=None):
    n = len(values) // 2
    operands, inits = values[:n], values[n:]
    out_shapes = list(shape.tuple_shapes) if shape.is_tuple else [shape]
    types = [s.element_type for s in out_shapes]
    in_dims = tuple(np.shape(operands[0]))
    wd, ws, pad, bd, wdl = spec._window_attrs("ReduceWindow", in_dims, window_dimensions, window_strides,
                                              padding, base_dilations, window_dilations)
    out_dims = tuple(out_shapes[0].dims)
    if int(np.prod(out_dims, dtype=np.int64)) == 0:
        res = [np.empty(s.dims, s.dtype) for s in out_shapes]
        return tuple(res) if shape.is_tuple else res[0]
    code = _standard_code(computation, types[0]) if n == 1 else None
    if code is not None:
        t = types[0]
        x = _to_carrier(operands[0], t).reshape(-1)
        init = x.dtype.type(_to_carrier(inits[0], t)[()])
        nout, C, odims, wdims, ncell, table, toff, istr = _rw_plan(in_dims, out_dims, wd, ws, pad, bd, wdl)
        if x.size == 0:
            ncell = 0  # every cell is padding: the result is the init value
            x = np.zeros(1, x.dtype)
        out = np.empty(nout * C, x.dtype)
        parallel = nout * C * max(ncell, 1) >= PARALLEL_THRESHOLD and nout > 1
        _RW[(_kind(t), parallel)](nout, _chunks(nout, parallel), code, x, C, odims, wdims, ncell, table, toff,
                                  istr, init, out)
        return _from_carrier(out.reshape(out_dims), t)
    ok, why = _region_compiled(computation)
    if not ok:
        return _reference_fallback("reduce-window", values, shape, dict(
            computation=computation, window_dimensions=wd, window_strides=ws, padding=pad, base_dilations=bd,
            window_dilations=wdl), why)
    nout, C, odims, wdims, ncell, table, toff, istr = _rw_plan(in_dims, out_dims, wd, ws, pad, bd, wdl, False)
    if any(np.size(v) == 0 for v in operands):
        ncell = 0
    outs = _generated_fold(computation, types, operands, inits, (nout, odims, wdims, ncell, table, toff, istr),
                           types)
    res = [_from_carrier(o.reshape(out_dims), t) for o, t in zip(outs, types)]
    return tuple(res) if shape.is_tuple else res[0]
