"""CUDA kernels of the reduction family: reduce, reduce-window, select-and-scatter, sort,
topk; and how every kernel with a called computation gets it: as a device function.

A region (a reduce body, a comparator, a scatter combiner) becomes the source of a
``@cuda.jit(device=True)`` function on scalars, one statement per instruction, written
by the same emitters as the fused loops (``executors.emit``)::

    @cuda.jit(device=True)
    def region(p0, p1, p2, p3):          # argmax: (value, index) accumulators, then elements
        v4 = np.bool_(p0 > p2) ...
        return v7, v8

and the kernel that calls it is generated around it for the op's number of operands
(``region_module``).  Both are compiled once per region structure and cached on disk.
A region with an instruction the emitters cannot write (a non-scalar op, a type without
a carrier) raises NotImplementedError naming it.

Reduce and reduce-window run one thread per result element, folding its elements in
row-major order from the init values (XLA leaves the order open; floats may differ from
the reference's pairwise order in the last bits).  Select-and-scatter selects per window
(one thread per source element), then combines the source values into the selected
elements in source order (``indexing.apply_updates``).  Sort runs a stable bottom-up
merge sort per row (one thread per row) on a permutation, then permutes every operand;
topk ranks each element among its row (one thread per element).
"""
import math

import numpy as np

from ... import fpenv
from ...ops.reduction import _window_attrs
from . import kernel
from .shape import cuda, fill, host_api, ints, launch, new_value, params, prod, row_major_strides, static_dims

# -- regions as device functions -----------------------------------------------------------------

_ALIASES = {"reshape", "bitcast", "copy", "broadcast"}   # scalar to scalar: the value itself


def _literal(value, t):
    """Python source of a scalar constant (exact; the carrier cast is added by ``finish``)."""
    v = np.asarray(value)[()]
    if t == "pred":
        return "True" if bool(v) else "False"
    if np.issubdtype(np.asarray(v).dtype, np.integer):
        return str(int(v))

    def real(x):
        x = float(x)
        if math.isnan(x):
            return "math.nan"
        if math.isinf(x):
            return "math.inf" if x > 0 else "-math.inf"
        return repr(x)
    if np.iscomplexobj(v):
        return f"complex({real(v.real)}, {real(v.imag)})"
    return real(v)


def region_function(comp, name="region"):
    """(source of a CUDA device function computing ``comp`` on scalars, whether it
    returns a tuple); cached on the computation."""
    cache = comp.__dict__.setdefault("_cuda_region", {})
    name_key = (name, fpenv.flushing())   # (the source depends on the floating-point environment)
    if name_key in cache:
        return cache[name_key]
    from ..emit import can_emit, emit, finish
    names = {p: f"p{k}" for k, p in enumerate(comp.parameters)}
    lines = []
    for k, inst in enumerate(comp.instructions):
        op = inst.opcode
        if op == "parameter":
            continue
        if op == "tuple":
            names[inst] = tuple(names[o] for o in inst.operands)
            continue
        if op == "get-tuple-element" and isinstance(names.get(inst.operands[0]), tuple):
            names[inst] = names[inst.operands[0]][inst.attrs["index"]]
            continue
        if not inst.shape.is_array or inst.shape.rank != 0 or any(
                not o.shape.is_array or o.shape.rank != 0 for o in inst.operands):
            raise NotImplementedError(f"backend='cuda': the computation {comp.name} has {inst.name} "
                                      f"({op} {inst.shape}), not an op on scalars; only scalar regions "
                                      f"compile to device functions")
        if op in _ALIASES:
            names[inst] = names[inst.operands[0]]
            continue
        if op == "constant":
            expr = _literal(inst.attrs["literal"], inst.shape.element_type)
        elif can_emit(inst):
            expr = emit(inst, *[names[o] for o in inst.operands])
        else:
            raise NotImplementedError(f"backend='cuda': the computation {comp.name} has {inst.name} "
                                      f"({op} {inst.shape}), which the scalar emitters (executors/emit.py) "
                                      f"cannot write")
        names[inst] = f"v{k}"
        lines.append(f"    v{k} = {finish(expr, inst.shape.element_type)}")
    result = names[comp.root]
    is_tuple = isinstance(result, tuple)
    ret = "(" + ", ".join(result) + ("," if len(result) == 1 else "") + ")" if is_tuple else result
    params_ = ", ".join(names[p] for p in comp.parameters)
    src = (f"@cuda.jit(device=True)\ndef {name}({params_}):\n" + "\n".join(lines)
           + ("\n" if lines else "") + f"    return {ret}\n")
    cache[name_key] = (src, is_tuple)
    return cache[name_key]


def call(fn, args, targets, is_tuple):
    """A statement assigning region ``fn``'s results to ``targets``."""
    lhs = ", ".join(targets) + ("," if is_tuple and len(targets) == 1 else "")
    if not is_tuple and len(targets) != 1:
        raise NotImplementedError(f"a region returning one value where {len(targets)} are expected")
    return f"{lhs} = {fn}({', '.join(args)})"


_modules = {}


def region_module(kind, regions, text):
    """Compile kernel source ``text`` together with the device functions of ``regions``
    (a dict name -> computation); cached by content."""
    sources = "".join(region_function(c, name)[0] + "\n" for name, c in regions.items())
    key = (kind, sources, text)
    if key not in _modules:
        from .fused import compile_source
        _modules[key] = compile_source(f"cuda_{kind}", sources + "\n" + text)
    return _modules[key]


def _names(prefix, n):
    return [f"{prefix}{k}" for k in range(n)]


def _computation(region):
    return getattr(region, "computation", region)


# -- reduce ------------------------------------------------------------------------------------

def _reduce_kernel(comp, n):
    _, is_tuple = region_function(comp)
    outs, ins, inits, accs = _names("out", n), _names("in", n), _names("init", n), _names("a", n)
    text = (f"@cuda.jit\ndef reduce_kernel(n, {', '.join(outs + ins + inits)}, out_dims, out_strides, "
            f"red_dims, red_strides, count):\n"
            "    i = cuda.grid(1)\n"
            "    if i < n:\n"
            "        r = i\n"
            "        base = 0\n"
            "        for d in range(out_dims.shape[0] - 1, -1, -1):\n"
            "            size = out_dims[d]\n"
            "            base += (r % size) * out_strides[d]\n"
            "            r //= size\n"
            + "".join(f"        {a} = {init}[0]\n" for a, init in zip(accs, inits))
            + "        for k in range(count):\n"
            "            r = k\n"
            "            j = base\n"
            "            for d in range(red_dims.shape[0] - 1, -1, -1):\n"
            "                size = red_dims[d]\n"
            "                j += (r % size) * red_strides[d]\n"
            "                r //= size\n"
            f"            {call('region', accs + [f'{x}[j]' for x in ins], accs, is_tuple)}\n"
            + "".join(f"        {o}[i] = {a}\n" for o, a in zip(outs, accs)))
    return region_module("reduce", {"region": comp}, text).reduce_kernel


def _out_shapes(shape):
    return list(shape.tuple_shapes) if shape.is_tuple else [shape]


def _collate(outs, shape):
    return tuple(outs) if shape.is_tuple else outs[0]


@kernel("reduce")
def reduce(*values, shape, computation, dimensions):
    n = len(values) // 2
    operands, inits = values[:n], values[n:]
    in_dims = operands[0].shape
    reduced = sorted(int(d) for d in dimensions)
    kept = [d for d in range(len(in_dims)) if d not in reduced]
    out_dims = [in_dims[d] for d in kept]
    outs = [new_value(out_dims, s.dtype) for s in _out_shapes(shape)]
    fn = _reduce_kernel(_computation(computation), n)
    strides = row_major_strides(in_dims)
    dims_d, ostr_d, rdims_d, rstr_d = params(("reduce", tuple(in_dims), tuple(reduced)), lambda: (
        ints(out_dims), ints(strides[d] for d in kept), ints(in_dims[d] for d in reduced),
        ints(strides[d] for d in reduced)))
    launch(fn, outs[0].size, *[o.flat() for o in outs], *[v.flat() for v in operands], *[v.flat() for v in inits],
           dims_d, ostr_d, rdims_d, rstr_d, prod(in_dims[d] for d in reduced))
    return _collate(outs, shape)


# -- windows -------------------------------------------------------------------------------------

#: the loop that finds window cell ``c`` of result element ``i`` in the operand: ``j`` its
#: flat index, ``ok`` False when the cell is padding or a hole of the base dilation
_WINDOW_CELL = """\
{pad}r = i
{pad}w = c
{pad}j = 0
{pad}ok = True
{pad}for d in range(out_dims.shape[0] - 1, -1, -1):
{pad}    size = out_dims[d]
{pad}    wsize = win_dims[d]
{pad}    p = (r % size) * win_strides[d] + (w % wsize) * win_dilations[d] - pad_low[d]
{pad}    r //= size
{pad}    w //= wsize
{pad}    if p < 0 or p >= dilated_dims[d] or p % base_dilations[d] != 0:
{pad}        ok = False
{pad}    else:
{pad}        j += (p // base_dilations[d]) * in_strides[d]
"""
_WINDOW_ARGS = "out_dims, win_dims, win_strides, win_dilations, pad_low, dilated_dims, base_dilations, in_strides"


def _window_params(in_dims, out_dims, wd, ws, pad, bd, wdl):
    key = ("window", tuple(in_dims), tuple(out_dims), wd, ws, pad, bd, wdl)
    return params(key, lambda: (
        ints(out_dims), ints(wd), ints(ws), ints(wdl), ints(p[0] for p in pad),
        ints((n - 1) * b + 1 if n > 0 else 0 for n, b in zip(in_dims, bd)), ints(bd),
        ints(row_major_strides(in_dims))))


def _reduce_window_kernel(comp, n):
    _, is_tuple = region_function(comp)
    outs, ins, inits, accs = _names("out", n), _names("in", n), _names("init", n), _names("a", n)
    text = (f"@cuda.jit\ndef reduce_window_kernel(n, {', '.join(outs + ins + inits)}, {_WINDOW_ARGS}, count):\n"
            "    i = cuda.grid(1)\n"
            "    if i < n:\n"
            + "".join(f"        {a} = {init}[0]\n" for a, init in zip(accs, inits))
            + "        for c in range(count):\n"
            + _WINDOW_CELL.format(pad=" " * 12)
            + "            if ok:\n"
            f"                {call('region', accs + [f'{x}[j]' for x in ins], accs, is_tuple)}\n"
            + "".join(f"        {o}[i] = {a}\n" for o, a in zip(outs, accs)))
    return region_module("reduce_window", {"region": comp}, text).reduce_window_kernel


@kernel("reduce-window")
def reduce_window(*values, shape, computation, window_dimensions, window_strides, padding, base_dilations=None,
                  window_dilations=None):
    n = len(values) // 2
    operands, inits = values[:n], values[n:]
    in_dims = operands[0].shape
    window = _window_attrs("ReduceWindow", in_dims, window_dimensions, window_strides, padding, base_dilations,
                           window_dilations)
    out_shapes = _out_shapes(shape)
    out_dims = static_dims(out_shapes[0], "ReduceWindow")
    outs = [new_value(out_dims, s.dtype) for s in out_shapes]
    fn = _reduce_window_kernel(_computation(computation), n)
    launch(fn, outs[0].size, *[o.flat() for o in outs], *[v.flat() for v in operands], *[v.flat() for v in inits],
           *_window_params(in_dims, out_dims, *window), prod(window[0]))
    return _collate(outs, shape)


# -- select-and-scatter --------------------------------------------------------------------------

def _select_kernel(comp):
    text = (f"@cuda.jit\ndef select_kernel(n, targets, order, operand, {_WINDOW_ARGS}, count):\n"
            "    i = cuda.grid(1)\n"
            "    if i < n:\n"
            "        selected = -1\n"
            "        current = operand[0]\n"
            "        for c in range(count):\n"
            + _WINDOW_CELL.format(pad=" " * 12)
            + "            if ok:\n"
            "                v = operand[j]\n"
            "                if selected < 0 or not select(current, v):\n"
            "                    selected = j\n"
            "                    current = v\n"
            "        targets[i] = selected\n"
            "        order[i] = i\n")
    return region_module("select", {"select": comp}, text).select_kernel


@kernel("select-and-scatter")
def select_and_scatter(operand, source, init_value, *, shape, select, scatter, window_dimensions, window_strides,
                       padding):
    from .indexing import apply_updates
    in_dims = operand.shape
    window = _window_attrs("SelectAndScatter", in_dims, window_dimensions, window_strides, padding)
    result = new_value(in_dims, shape.dtype)
    launch(fill, result.size, result.flat(), init_value.flat())
    if result.size == 0 or source.size == 0:
        return result
    # each window picks one operand element: its flat index, or -1 (the window is all padding)
    targets = host_api.device_array(source.size, np.int64)
    order = host_api.device_array(source.size, np.int64)
    launch(_select_kernel(_computation(select)), source.size, targets, order, operand.flat(),
           *_window_params(in_dims, source.shape, *window), prod(window[0]))
    apply_updates(_computation(scatter), [result], [source], targets, order)
    return result


# -- sort ---------------------------------------------------------------------------------------

def _sort_kernel(comp, n):
    ins = _names("in", n)
    less_b_a = ", ".join(f"{x}[y], {x}[x_]" for x in ins)
    text = (f"@cuda.jit\ndef sort_rows(rows, m, perm, tmp, lead_dims, lead_strides, stride, {', '.join(ins)}):\n"
            "    r = cuda.grid(1)\n"
            "    if r < rows:\n"
            "        base = 0\n"
            "        rem = r\n"
            "        for d in range(lead_dims.shape[0] - 1, -1, -1):\n"
            "            size = lead_dims[d]\n"
            "            base += (rem % size) * lead_strides[d]\n"
            "            rem //= size\n"
            "        o = r * m\n"
            "        for k in range(m):\n"
            "            perm[o + k] = k\n"
            "        src = perm\n"
            "        dst = tmp\n"
            "        in_tmp = False\n"
            "        width = 1\n"
            "        while width < m:\n"     # merge runs of `width` pairwise, stably
            "            start = 0\n"
            "            while start < m:\n"
            "                mid = min(start + width, m)\n"
            "                end = min(start + 2 * width, m)\n"
            "                a = start\n"
            "                b = mid\n"
            "                for k in range(start, end):\n"
            "                    take_b = a >= mid\n"
            "                    if not take_b and b < end:\n"
            "                        x_ = base + src[o + a] * stride\n"
            "                        y = base + src[o + b] * stride\n"
            f"                        take_b = less({less_b_a})\n"   # b goes first only if strictly less
            "                    if take_b:\n"
            "                        dst[o + k] = src[o + b]\n"
            "                        b += 1\n"
            "                    else:\n"
            "                        dst[o + k] = src[o + a]\n"
            "                        a += 1\n"
            "                start += 2 * width\n"
            "            src, dst = dst, src\n"
            "            in_tmp = not in_tmp\n"
            "            width *= 2\n"
            "        if in_tmp:\n"
            "            for k in range(m):\n"
            "                perm[o + k] = tmp[o + k]\n")
    return region_module("sort", {"less": comp}, text).sort_rows


@cuda.jit
def _permute_rows(n, out, src, m, lead_dims, lead_strides, stride, perm):
    t = cuda.grid(1)
    if t < n:
        r = t // m
        base = 0
        for d in range(lead_dims.shape[0] - 1, -1, -1):
            size = lead_dims[d]
            base += (r % size) * lead_strides[d]
            r //= size
        out[base + (t % m) * stride] = src[base + perm[t] * stride]


@kernel("sort")
def sort(*operands, shape, comparator, dimension, is_stable=False):
    dims = operands[0].shape
    m = dims[dimension]
    rows = prod(dims) // m if m else 0
    if m <= 1 or rows == 0:
        return _collate(list(operands), shape)   # nothing moves (values are never written after)
    strides = row_major_strides(dims)
    lead = [d for d in range(len(dims)) if d != dimension]
    lead_d, lead_str_d = params(("rows", tuple(dims), dimension), lambda: (
        ints(dims[d] for d in lead), ints(strides[d] for d in lead)))
    perm = host_api.device_array(rows * m, np.int64)
    tmp = host_api.device_array(rows * m, np.int64)
    launch(_sort_kernel(_computation(comparator), len(operands)), rows, m, perm, tmp, lead_d, lead_str_d,
           strides[dimension], *[v.flat() for v in operands])
    outs = []
    for v in operands:
        out = new_value(dims, v.dtype)
        launch(_permute_rows, out.size, out.flat(), v.flat(), m, lead_d, lead_str_d, strides[dimension], perm)
        outs.append(out)
    return _collate(outs, shape)


# -- topk ---------------------------------------------------------------------------------------

@cuda.jit
def _float_keys(n, bits, keys, mask):
    """Integers ordered as the floats' total order: negative floats get their magnitude
    bits flipped (-NaN < -Inf < ... < -0.0 < +0.0 < ... < +Inf < +NaN)."""
    i = cuda.grid(1)
    if i < n:
        b = np.int64(bits[i])
        if b < 0:
            b = b ^ mask
        keys[i] = b


@cuda.jit
def _topk(n, m, k, largest, keys, values, out_values, out_indices):
    """Element t of its row goes to position rank = #elements before it (greater keys, or
    equal keys at lower indices, for largest); ranks below k are the result."""
    t = cuda.grid(1)
    if t < n:
        row = t // m
        e = t % m
        key = keys[t]
        rank = 0
        for x in range(m):
            other = keys[row * m + x]
            if largest:
                before = other > key or (other == key and x < e)
            else:
                before = other < key or (other == key and x < e)
            if before:
                rank += 1
        if rank < k:
            out_values[row * k + rank] = values[t]
            out_indices[row * k + rank] = e


@kernel("topk")
def topk(operand, *, shape, k, largest=True):
    dims = operand.shape
    m = dims[-1]
    out_dims = tuple(dims[:-1]) + (k,)
    values = new_value(out_dims, operand.dtype)
    indices = new_value(out_dims, np.int32)
    if values.size == 0:
        return values, indices
    flat = operand.flat()
    if operand.dtype.kind == "f" or flat.dtype.kind == "f":   # narrow floats are carried as f32
        width = flat.dtype.itemsize
        keys = host_api.device_array(operand.size, np.int64)
        launch(_float_keys, operand.size, flat.view(np.int32 if width == 4 else np.int64), keys,
               (1 << (8 * width - 1)) - 1)
    elif flat.dtype == np.bool_:
        keys = flat.view(np.uint8)
    else:
        keys = flat
    launch(_topk, operand.size, m, k, bool(largest), keys, flat, values.flat(), indices.flat())
    return values, indices

