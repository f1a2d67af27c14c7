"""CUDA kernels of the linear algebra family: dot (DotGeneral), convolution, the batch norms;
fft, cholesky and triangular-solve run on the host.

Dot and convolution are naive: one thread per result element, looping over its
contracting elements (dot) or its window and input features (convolution), accumulating
as the reference does (float64 / complex128 for floats, int64 / uint64 for integers,
wrapped to the result type at the end) and rounding once to the result type.  No tiling,
no shared memory, no tensor cores: correct and readable, not fast.

There is no CUDA FFT or LAPACK library in this project (cuFFT / cuSOLVER would be the
real thing): fft, cholesky and triangular-solve copy their operands to the host, run the
NumPy reference and copy the result back; the status table says "host (numpy)".
"""
import numpy as np

from ... import dtypes
from ...ops.linalg import _conv_geometry, _dimension_numbers, conv_path_of
from ...shapes import Shape
from . import kernel
from .shape import (host_api, host_kernel, ints, launch, new_value, params, prod, row_major_strides, static_dims,
                    strided_offset)

_kernels = {}


def _accumulator(t):
    """The NumPy type name a dot or convolution with result type ``t`` sums in."""
    if t in dtypes.COMPLEX:
        return "np.complex128"
    if t in dtypes.FLOATING:
        return "np.float64"
    if t in dtypes.UNSIGNED:
        return "np.uint64"
    return "np.int64"


def _generated(kind, t, text):
    """Kernel source ``text`` specialised to result type ``t`` (ACC: the accumulator type;
    FINISH(x): the rounding to ``t``), compiled once per type."""
    key = (kind, t)
    if key not in _kernels:
        from ..emit import finish
        from .fused import compile_source
        text = text.replace("ACC", _accumulator(t)).replace("FINISH(acc)", finish("acc", t))
        _kernels[key] = getattr(compile_source(f"cuda_{kind}", text), kind)
    return _kernels[key]


# -- dot ------------------------------------------------------------------------------------------

_DOT = """
@cuda.jit
def dot(n, out, lhs, rhs, out_dims, out_lhs_strides, out_rhs_strides, con_dims, con_lhs_strides,
        con_rhs_strides, count):
    i = cuda.grid(1)
    if i < n:
        r = i
        lo = 0
        ro = 0
        for d in range(out_dims.shape[0] - 1, -1, -1):
            size = out_dims[d]
            c = r % size
            r //= size
            lo += c * out_lhs_strides[d]
            ro += c * out_rhs_strides[d]
        acc = ACC(0)
        for k in range(count):
            r = k
            lj = lo
            rj = ro
            for d in range(con_dims.shape[0] - 1, -1, -1):
                size = con_dims[d]
                c = r % size
                r //= size
                lj += c * con_lhs_strides[d]
                rj += c * con_rhs_strides[d]
            acc += ACC(lhs[lj]) * ACC(rhs[rj])
        out[i] = FINISH(acc)
"""


def _dot_params(lhs_dims, rhs_dims, lc, rc, lb, rb):
    ls, rs = row_major_strides(lhs_dims), row_major_strides(rhs_dims)
    lhs_free = [d for d in range(len(lhs_dims)) if d not in lc + lb]
    rhs_free = [d for d in range(len(rhs_dims)) if d not in rc + rb]
    # result dimensions: batch, lhs free, rhs free; each has a stride in lhs and in rhs (0: absent)
    out_dims = [lhs_dims[d] for d in lb] + [lhs_dims[d] for d in lhs_free] + [rhs_dims[d] for d in rhs_free]
    out_l = [ls[d] for d in lb] + [ls[d] for d in lhs_free] + [0] * len(rhs_free)
    out_r = [rs[d] for d in rb] + [0] * len(lhs_free) + [rs[d] for d in rhs_free]
    return (ints(out_dims), ints(out_l), ints(out_r), ints(lhs_dims[d] for d in lc), ints(ls[d] for d in lc),
            ints(rs[d] for d in rc))


@kernel("dot", note="naive (one thread per result element)")
def dot(lhs, rhs, *, shape, lhs_contracting_dimensions=(), rhs_contracting_dimensions=(), lhs_batch_dimensions=(),
        rhs_batch_dimensions=(), **_):
    out = new_value(static_dims(shape, "DotGeneral"), shape.dtype)
    lc, rc = tuple(lhs_contracting_dimensions), tuple(rhs_contracting_dimensions)
    lb, rb = tuple(lhs_batch_dimensions), tuple(rhs_batch_dimensions)
    p = params(("dot", lhs.shape, rhs.shape, lc, rc, lb, rb),
               lambda: _dot_params(lhs.shape, rhs.shape, lc, rc, lb, rb))
    launch(_generated("dot", shape.element_type, _DOT), out.size, out.flat(), lhs.flat(), rhs.flat(), *p,
           prod(lhs.shape[d] for d in lc))
    return out


# -- convolution ------------------------------------------------------------------------------

_CONV = """
@cuda.jit
def convolution(n, out, lhs, rhs, out_dims, out_inner, g, spatial, kernel_count):
    # g: out batch dim, out feature dim, lhs batch stride, lhs feature stride, rhs output-feature
    #    stride, rhs input-feature stride, B, I, O, groups, feature groups > 1, batch groups > 1,
    #    padding and holes are zeros multiplied rather than skipped (ops.conv_paths), XLA's
    #    rewrites: feature groups widened with zero kernel values, batch groups as a dilated
    #    dimension (other groups' kernel values times its holes)
    # spatial[s]: out dim, lhs stride, lhs size, kernel size, rhs stride, window stride,
    #    rhs dilation, lhs dilation, low padding, reversed
    i = cuda.grid(1)
    if i < n:
        b = (i // out_inner[g[0]]) % out_dims[g[0]]
        oz = (i // out_inner[g[1]]) % out_dims[g[1]]
        group = oz // (g[8] // g[9])
        batch = b
        if g[11] != 0:
            batch = group * (g[6] // g[9]) + b
        acc = ACC(0)
        for kc in range(kernel_count):
            r = kc
            lo = batch * g[2]
            ro = oz * g[4]
            ok = True
            for s in range(spatial.shape[0] - 1, -1, -1):
                ksize = spatial[s, 3]
                k = r % ksize
                r //= ksize
                od = spatial[s, 0]
                # the window cell's place in the dilated, padded lhs
                pos = ((i // out_inner[od]) % out_dims[od]) * spatial[s, 5] + k * spatial[s, 6] - spatial[s, 8]
                ld = spatial[s, 7]
                if pos < 0 or pos % ld != 0 or pos // ld >= spatial[s, 2]:
                    ok = False
                else:
                    lo += (pos // ld) * spatial[s, 1]
                if spatial[s, 9] != 0:
                    k = ksize - 1 - k
                ro += k * spatial[s, 4]
            if ok:
                for iz in range(g[7]):
                    feature = iz
                    if g[10] != 0:
                        feature = group * g[7] + iz
                    acc += ACC(lhs[lo + feature * g[3]]) * ACC(rhs[ro + iz * g[5]])
                if g[13] != 0:   # the other groups' input features times the widened kernel's zeros
                    for f in range(g[9]):
                        if f != group:
                            acc += ACC(lhs[lo + f * g[3]]) * ACC(0)
            elif g[12] != 0:   # padding as zeros times the kernel (XLA:CPU's Eigen path: Inf -> NaN)
                for iz in range(g[7]):
                    acc += ACC(0) * ACC(rhs[ro + iz * g[5]])
            if g[14] != 0:   # the other batch groups' kernel values over the group dimension's holes
                for m in range(g[9]):
                    if m != group:
                        for iz in range(g[7]):
                            acc += ACC(0) * ACC(rhs[ro + (m - group) * (g[8] // g[9]) * g[4] + iz * g[5]])
        out[i] = FINISH(acc)
"""


def _conv_params(lhs_dims, rhs_dims, out_dims, attrs, lhs_type="f32", result_type="f32"):
    dn = _dimension_numbers("Convolution", attrs.get("dimension_numbers"), len(lhs_dims))
    strides, pads, ld, rd, rev = _conv_geometry(
        "Convolution", Shape("f32", lhs_dims), Shape("f32", rhs_dims),
        window_strides=attrs.get("window_strides", ()), padding=attrs.get("padding", ()),
        lhs_dilation=attrs.get("lhs_dilation", ()), rhs_dilation=attrs.get("rhs_dilation", ()),
        window_reversal=attrs.get("window_reversal", ()), dimension_numbers=dn)
    fgc, bgc = int(attrs.get("feature_group_count", 1)), int(attrs.get("batch_group_count", 1))
    ls, rs = row_major_strides(lhs_dims), row_major_strides(rhs_dims)
    canonical = [[dims[d] for d in order] for dims, order in
                 ((lhs_dims, dn.lhs_order), (rhs_dims, dn.rhs_order), (out_dims, dn.output_order))]
    path = conv_path_of(lhs_type, *canonical, result_type, strides, pads, ld, rd, rev, fgc, bgc)
    g = [dn.output_batch_dimension, dn.output_feature_dimension, ls[dn.input_batch_dimension],
         ls[dn.input_feature_dimension], rs[dn.kernel_output_feature_dimension],
         rs[dn.kernel_input_feature_dimension], lhs_dims[dn.input_batch_dimension],
         rhs_dims[dn.kernel_input_feature_dimension], rhs_dims[dn.kernel_output_feature_dimension],
         max(fgc, bgc), int(fgc > 1), int(bgc > 1), int(path.zero_cells), int(path.rewrite == "feature-group-mask"),
         int(path.rewrite == "batch-group-dimension")]
    spatial = np.array([[od, ls[d_in], lhs_dims[d_in], rhs_dims[d_k], rs[d_k], strides[s], rd[s], ld[s], pads[s][0],
                         int(rev[s])]
                        for s, (d_in, d_k, od) in enumerate(zip(dn.input_spatial_dimensions,
                                                                dn.kernel_spatial_dimensions,
                                                                dn.output_spatial_dimensions))],
                       np.int64).reshape(-1, 10)
    kernel_count = prod(rhs_dims[d] for d in dn.kernel_spatial_dimensions)
    return ints(out_dims), ints(row_major_strides(out_dims)), ints(g), spatial, kernel_count


def _conv_key(attrs):
    return tuple(sorted((k, str(v)) for k, v in attrs.items()))


@kernel("convolution", note="naive (one thread per result element)")
def convolution(lhs, rhs, *, shape, **attrs):
    out_dims = static_dims(shape, "Convolution")
    out = new_value(out_dims, shape.dtype)
    if out.size == 0:
        return out
    lhs_type = dtypes.from_numpy(lhs.dtype)
    p = params(("conv", lhs.shape, rhs.shape, out_dims, _conv_key(attrs), lhs_type, shape.element_type),
               lambda: _conv_params(lhs.shape, rhs.shape, out_dims, attrs, lhs_type, shape.element_type))
    if lhs.size == 0 or rhs.size == 0:   # nothing to sum: zeros (kernel_count or I is 0, or B is)
        p = p[:4] + (0,)
    launch(_generated("convolution", shape.element_type, _CONV), out.size, out.flat(), lhs.flat(), rhs.flat(), *p)
    return out


# -- batch norm -----------------------------------------------------------------------------------
# Statistics per feature (one thread per feature, sums in float64), then one thread per element.

_BN_STATS = """
@cuda.jit
def bn_stats(nf, operand, other_dims, other_strides, feature_stride, count, mean, var):
    f = cuda.grid(1)
    if f < nf:
        total = np.float64(0)
        for k in range(count):
            j = f * feature_stride + strided_offset(k, other_dims, other_strides)
            total += np.float64(operand[j])
        m = total / np.float64(count)
        total = np.float64(0)
        for k in range(count):
            j = f * feature_stride + strided_offset(k, other_dims, other_strides)
            x = np.float64(operand[j]) - m
            total += x * x
        mean[f] = m
        var[f] = total / np.float64(count)
"""

_BN_GRAD_STATS = """
@cuda.jit
def bn_grad_stats(nf, operand, grad_output, mean, variance, epsilon, other_dims, other_strides, feature_stride,
                  count, stats):
    # stats[f]: mean(dy), mean(dy * centered) / (var + eps), sum(dy * centered) / sqrt(var + eps), sum(dy)
    f = cuda.grid(1)
    if f < nf:
        m = np.float64(mean[f])
        v = np.float64(variance[f]) + epsilon
        s_dy = np.float64(0)
        s_dyc = np.float64(0)
        for k in range(count):
            j = f * feature_stride + strided_offset(k, other_dims, other_strides)
            dy = np.float64(grad_output[j])
            s_dy += dy
            s_dyc += dy * (np.float64(operand[j]) - m)
        c = np.float64(count)
        stats[f, 0] = s_dy / c
        stats[f, 1] = s_dyc / c / v
        stats[f, 2] = s_dyc / (math.sqrt(v) if v >= 0 else math.nan)
        stats[f, 3] = s_dy
"""

_BN_APPLY = """
@cuda.jit
def bn_apply(n, out, operand, scale, offset, mean, var, epsilon, inner, nf):
    # y = scale * (x - mean) / sqrt(var + epsilon) + offset, per feature f of element i
    i = cuda.grid(1)
    if i < n:
        f = (i // inner) % nf
        v = np.float64(var[f]) + epsilon
        s = math.sqrt(v) if v >= 0 else math.nan
        acc = np.float64(scale[f]) * (np.float64(operand[i]) - np.float64(mean[f])) / s + np.float64(offset[f])
        out[i] = FINISH(acc)
"""

_BN_GRAD_APPLY = """
@cuda.jit
def bn_grad_apply(n, out, operand, grad_output, scale, mean, variance, epsilon, stats, inner, nf):
    # scale / sqrt(var + eps) * (dy - mean(dy) - c * (x - mean))
    i = cuda.grid(1)
    if i < n:
        f = (i // inner) % nf
        v = np.float64(variance[f]) + epsilon
        s = math.sqrt(v) if v >= 0 else math.nan
        centered = np.float64(operand[i]) - np.float64(mean[f])
        acc = np.float64(scale[f]) / s * (np.float64(grad_output[i]) - stats[f, 0] - stats[f, 1] * centered)
        out[i] = FINISH(acc)
"""

_BN_ROUND = """
@cuda.jit
def bn_round(n, out, values, stride, k):
    i = cuda.grid(1)
    if i < n:
        acc = values[i * stride + k]
        out[i] = FINISH(acc)
"""


def _feature_params(dims, feature_index):
    strides = row_major_strides(dims)
    other = [d for d in range(len(dims)) if d != feature_index]
    return params(("bn", tuple(dims), feature_index), lambda: (
        ints(dims[d] for d in other), ints(strides[d] for d in other)))


def _rounded(values, t, dtype, n, stride=1, k=0):
    """``values[i * stride + k]`` (float64 on the device) rounded to type ``t``."""
    out = new_value((n,), dtype)
    launch(_generated("bn_round", t, _BN_ROUND), n, out.flat(), values, stride, k)
    return out


@kernel("batch-norm-inference")
def batch_norm_inference(operand, scale, offset, mean, variance, *, shape, epsilon, feature_index):
    dims = operand.shape
    out = new_value(dims, shape.dtype)
    nf, inner = dims[feature_index], prod(dims[feature_index + 1:])
    launch(_generated("bn_apply", shape.element_type, _BN_APPLY), out.size, out.flat(), operand.flat(),
           scale.flat(), offset.flat(), mean.flat(), variance.flat(), float(epsilon), inner, nf)
    return out


@kernel("batch-norm-training")
def batch_norm_training(operand, scale, offset, *, shape, epsilon, feature_index):
    dims = operand.shape
    t = shape.tuple_shapes[0]
    nf, inner = dims[feature_index], prod(dims[feature_index + 1:])
    other_d, other_str_d = _feature_params(dims, feature_index)
    mean = host_api.device_array(max(nf, 1), np.float64)
    var = host_api.device_array(max(nf, 1), np.float64)
    launch(_generated("bn_stats", "f64", _BN_STATS), nf, operand.flat(), other_d, other_str_d,
           row_major_strides(dims)[feature_index], operand.size // nf if nf else 0, mean, var)
    out = new_value(dims, t.dtype)
    launch(_generated("bn_apply", t.element_type, _BN_APPLY), out.size, out.flat(), operand.flat(), scale.flat(),
           offset.flat(), mean, var, float(epsilon), inner, nf)
    return out, _rounded(mean, t.element_type, t.dtype, nf), _rounded(var, t.element_type, t.dtype, nf)


@kernel("batch-norm-grad")
def batch_norm_grad(operand, scale, mean, variance, grad_output, *, shape, epsilon, feature_index):
    dims = operand.shape
    t = shape.tuple_shapes[0]
    nf, inner = dims[feature_index], prod(dims[feature_index + 1:])
    other_d, other_str_d = _feature_params(dims, feature_index)
    stats = host_api.device_array((max(nf, 1), 4), np.float64)
    launch(_generated("bn_grad_stats", "f64", _BN_GRAD_STATS), nf, operand.flat(), grad_output.flat(), mean.flat(),
           variance.flat(), float(epsilon), other_d, other_str_d, row_major_strides(dims)[feature_index],
           operand.size // nf if nf else 0, stats)
    grad_operand = new_value(dims, t.dtype)
    launch(_generated("bn_grad_apply", t.element_type, _BN_GRAD_APPLY), grad_operand.size, grad_operand.flat(),
           operand.flat(), grad_output.flat(), scale.flat(), mean.flat(), variance.flat(), float(epsilon), stats,
           inner, nf)
    column = stats.reshape(max(nf, 1) * 4)
    return (grad_operand, _rounded(column, t.element_type, t.dtype, nf, 4, 2),
            _rounded(column, t.element_type, t.dtype, nf, 4, 3))


# -- host routines ------------------------------------------------------------------------------

kernel("fft")(host_kernel("fft"))
kernel("cholesky")(host_kernel("cholesky"))
kernel("triangular-solve")(host_kernel("triangular-solve"))
