"""CUDA kernels of the slicing family: slice, dynamic-slice, dynamic-update-slice, pad.

Slice is a strided copy (``shape.strided_copy``).  The dynamic ops read their start
indices on the device: a one-thread kernel per dimension clamps one start index
(``adjusted_start_indices = clamp(0, start_indices, shape(operand) - sizes)``, compared
as unsigned for unsigned types, so a huge u64 index stays huge) into a small int64
array the copy kernel reads; nothing goes to the host.  Pad runs one thread per result
element that inverts ``result_index = edge_padding_low + operand_index * (interior_padding + 1)``.
"""
import numpy as np

from . import kernel
from .shape import (copy_value, cuda, dot_index, gather_strided, host_api, strided_offset, ints, launch, new_value, params, row_major_strides,
                    single, static_dims)


@kernel("slice")
def slice_(operand, *, shape, start_indices, limit_indices, strides=None):
    # result[result_index] = operand[start_indices + result_index * strides]
    strides = strides or (1,) * len(operand.shape)
    src = row_major_strides(operand.shape)
    base = sum(s * st for s, st in zip(start_indices, src))
    return gather_strided(operand, static_dims(shape, "Slice"), [st * k for st, k in zip(src, strides)], base)


# -- dynamic start indices --------------------------------------------------------------------

@cuda.jit
def _clamp_signed(src, out, d, limit):
    if cuda.grid(1) == 0:
        v = np.int64(src[0])
        if v < 0:
            v = 0
        if v > limit:
            v = limit
        out[d] = v


@cuda.jit
def _clamp_unsigned(src, out, d, limit):
    if cuda.grid(1) == 0:
        v = np.uint64(src[0])
        if v > np.uint64(limit):
            out[d] = limit
        else:
            out[d] = np.int64(v)


def adjusted_starts(start_indices, operand_dims, sizes):
    """An int64 device array: clamp(0, start_indices[d], operand_dims[d] - sizes[d])."""
    starts = host_api.device_array(max(len(operand_dims), 1), np.int64)
    for d, (s, dim, size) in enumerate(zip(start_indices, operand_dims, sizes)):
        clamp = _clamp_unsigned if s.dtype.kind == "u" else _clamp_signed
        single(clamp, s.flat(), starts, d, int(dim) - int(size))
    return starts


@cuda.jit
def _offset_copy(n, out, src, dims, src_strides, starts):
    """out[i] = src[sum((starts[d] + index_d) * src_strides[d])], index of i in dims."""
    i = cuda.grid(1)
    if i < n:
        out[i] = src[dot_index(starts, src_strides) + strided_offset(i, dims, src_strides)]


@cuda.jit
def _offset_place(n, out, src, dims, out_strides, starts):
    """out[sum((starts[d] + index_d) * out_strides[d])] = src[i]."""
    i = cuda.grid(1)
    if i < n:
        out[dot_index(starts, out_strides) + strided_offset(i, dims, out_strides)] = src[i]


@kernel("dynamic-slice")
def dynamic_slice(operand, *start_indices, shape, slice_sizes):
    # result[result_index] = operand[adjusted_start_indices + result_index]
    out = new_value(static_dims(shape, "DynamicSlice"), operand.dtype)
    if out.size:
        starts = adjusted_starts(start_indices, operand.shape, slice_sizes)
        dims_d, strides_d = params(("offset", tuple(slice_sizes), tuple(operand.shape)),
                                   lambda: (ints(slice_sizes), ints(row_major_strides(operand.shape))))
        launch(_offset_copy, out.size, out.flat(), operand.flat(), dims_d, strides_d, starts)
    return out


@kernel("dynamic-update-slice")
def dynamic_update_slice(operand, update, *start_indices, shape):
    # result = operand, with result[adjusted_start_indices + update_index] = update[update_index]
    out = copy_value(operand)
    if update.size:
        starts = adjusted_starts(start_indices, operand.shape, update.shape)
        dims_d, strides_d = params(("offset", tuple(update.shape), tuple(operand.shape)),
                                   lambda: (ints(update.shape), ints(row_major_strides(operand.shape))))
        launch(_offset_place, update.size, out.flat(), update.flat(), dims_d, strides_d, starts)
    return out


# -- pad --------------------------------------------------------------------------------------

@cuda.jit
def _pad(n, out, src, padding_value, out_dims, operand_dims, operand_strides, low, step):
    i = cuda.grid(1)
    if i < n:
        r = i
        j = 0
        inside = True
        for d in range(out_dims.shape[0] - 1, -1, -1):
            size = out_dims[d]
            # invert result_index = edge_padding_low + operand_index * (interior_padding + 1)
            q = r % size - low[d]
            r //= size
            if q < 0 or q % step[d] != 0:
                inside = False
            else:
                q //= step[d]
                if q >= operand_dims[d]:
                    inside = False
                else:
                    j += q * operand_strides[d]
        if inside:
            out[i] = src[j]
        else:
            out[i] = padding_value[0]


@kernel("pad")
def pad(operand, padding_value, *, shape, padding_config):
    out_dims = static_dims(shape, "Pad")
    out = new_value(out_dims, operand.dtype)
    key = ("pad", tuple(operand.shape), tuple(out_dims), tuple(tuple(t) for t in padding_config))
    dims_d, op_dims_d, op_strides_d, low_d, step_d = params(key, lambda: (
        ints(out_dims), ints(operand.shape), ints(row_major_strides(operand.shape)),
        ints(t[0] for t in padding_config), ints(t[2] + 1 for t in padding_config)))
    launch(_pad, out.size, out.flat(), operand.flat(), padding_value.flat(), dims_d, op_dims_d, op_strides_d,
           low_d, step_d)
    return out
