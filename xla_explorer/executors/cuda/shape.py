"""CUDA kernels of the shape family (transpose, reverse, broadcast, iota, concatenate,
reshape, bitcast, copy, dynamic-reshape, the dimension-size ops), and the pieces every
CUDA family module shares: device values, cached index parameters, host round trips.

Data movement is one kernel, one thread per result element::

    j = base + sum(result_index[d] * strides[d])     # strides in elements, per result dim
    out[i] = src[j]

A transpose permutes the operand's strides, a reverse negates them (``base`` starts at the
far end), a slice multiplies them, a broadcast sets them to 0.  ``dims`` and ``strides``
are small int64 device arrays made once per configuration (``params``), so one compiled
kernel serves every rank and configuration (numba compiles it once per element type).
Values on the device are never written after they are made, so a reshape (and a
``bitcast`` that keeps the type) shares its operand's buffer instead of copying it.
"""
import numpy as np

from ...errors import ExecutionError
from ...ops import registry
from . import DeviceValue, carrier_dtype_of, cuda_module, kernel, launch_config, run_kernel

cuda = cuda_module()   # kernels only: see host_api


class _HostApi:
    """numba.cuda's host functions (allocations, copies) for host code.  Kernels use the
    module global ``cuda``, which the simulator swaps for its fake module while a kernel
    runs -- in another thread's host code too (collectives simulate devices as threads) --
    so host code reaches numba.cuda through this object instead."""

    def __getattr__(self, name):
        return getattr(cuda_module(), name)


host_api = _HostApi()


# -- shared helpers ------------------------------------------------------------------------

def prod(dims):
    n = 1
    for d in dims:
        n *= int(d)
    return n


def row_major_strides(dims):
    """Element strides of a C-contiguous array of ``dims``."""
    strides, s = [0] * len(dims), 1
    for d in range(len(dims) - 1, -1, -1):
        strides[d] = s
        s *= int(dims[d])
    return strides


def ints(values):
    return np.asarray(list(values), dtype=np.int64).reshape(-1)


_params = {}


def params(key, build):
    """The device copies of ``build()``'s int64 arrays (other items pass as they are),
    made once per ``key`` (an op's shapes and attributes): index parameters stay on the
    device between runs."""
    hit = _params.get(key)
    if hit is None:
        if len(_params) > 4096:
            _params.clear()
        hit = _params[key] = tuple(host_api.to_device(np.ascontiguousarray(a)) if isinstance(a, np.ndarray) else a
                                   for a in build())
    return hit


def new_value(dims, dtype):
    """An uninitialised DeviceValue of ``dims`` (flat storage, the type's carrier)."""
    dims = tuple(int(d) for d in dims)
    n = prod(dims)
    return DeviceValue(host_api.device_array(n if dims else 1, carrier_dtype_of(np.dtype(dtype))), dtype, dims)


def launch(fn, n, *args):
    """Run kernel ``fn(n, *args)`` with one thread per element of ``n`` (none when empty)."""
    if n > 0:
        run_kernel(fn, launch_config(n), n, *args)


def single(fn, *args):
    """Run kernel ``fn(*args)`` as one thread (setting up scalars, serial loops)."""
    run_kernel(fn, (1, 1), *args)


def static_dims(shape, where):
    if any(d is None for d in shape.dims):
        raise ExecutionError(f"{where}: backend='cuda' needs static result sizes, got {shape}")
    return tuple(int(d) for d in shape.dims)


def to_host(value):
    """A device value (or a tuple of them) as NumPy arrays of its XLA type."""
    if isinstance(value, tuple):
        return tuple(to_host(v) for v in value)
    if not isinstance(value, DeviceValue):
        return value
    host = value.array.copy_to_host().reshape(value.shape)
    return host.astype(value.dtype) if host.dtype != value.dtype else host


def to_device(value):
    """A NumPy array (or a tuple of them) as DeviceValues in their carrier types."""
    if isinstance(value, tuple):
        return tuple(to_device(v) for v in value)
    if isinstance(value, DeviceValue) or not isinstance(value, (np.ndarray, np.generic)):
        return value
    arr = np.asarray(value)
    carrier = carrier_dtype_of(arr.dtype)
    flat = np.ascontiguousarray(arr.astype(carrier) if arr.dtype != carrier else arr).reshape(-1)
    return DeviceValue(host_api.to_device(flat), arr.dtype, arr.shape)


def host_kernel(opcode, note="host (numpy)"):
    """A kernel that copies its operands to the host, runs the NumPy reference there and
    copies the result back: for ops with no CUDA library in this project (FFT, Cholesky,
    triangular solve).  The status table shows ``note``."""
    def run(*values, shape, ctx=None, **attrs):
        from ..reference import conform
        opdef = registry.get(opcode)
        if opdef.needs_context:
            attrs["ctx"] = ctx
        host = [to_host(v) for v in values]
        from ..reference import guard_reference
        guard_reference(opcode, host, shape, attrs)
        out = opdef.reference(*host, shape=shape, **attrs)
        return to_device(conform(out, shape, f"{opdef.name} (host)"))
    run.status_note = note
    run.needs_context = True
    run.__name__ = f"host_{opcode.replace('-', '_')}"
    return run


# -- kernels --------------------------------------------------------------------------------

@cuda.jit(device=True)
def strided_offset(i, dims, strides):
    """sum(index_d * strides[d]) for the row-major index of flat position ``i`` in ``dims``
    (the one address computation the strided kernels share)."""
    r = i
    j = 0
    for d in range(dims.shape[0] - 1, -1, -1):
        size = dims[d]
        j += (r % size) * strides[d]
        r //= size
    return j


@cuda.jit(device=True)
def dot_index(a, b):
    """sum(a[d] * b[d]) of two small index arrays."""
    j = 0
    for d in range(a.shape[0]):
        j += a[d] * b[d]
    return j


@cuda.jit
def strided_copy(n, out, src, dims, strides, base):
    """out[i] = src[base + sum(index_d * strides[d])], index = the row-major index of i in dims."""
    i = cuda.grid(1)
    if i < n:
        out[i] = src[base + strided_offset(i, dims, strides)]


@cuda.jit
def strided_place(n, out, src, dims, strides, base):
    """out[base + sum(index_d * strides[d])] = src[i]: src's elements placed into out."""
    i = cuda.grid(1)
    if i < n:
        out[base + strided_offset(i, dims, strides)] = src[i]


@cuda.jit
def fill(n, out, value):
    """out[i] = value[0]."""
    i = cuda.grid(1)
    if i < n:
        out[i] = value[0]


@cuda.jit
def fill_zero(n, out):
    i = cuda.grid(1)
    if i < n:
        out[i] = 0


def gather_strided(value, out_dims, strides, base):
    """A new value of ``out_dims``: element i reads ``value`` at base + index . strides."""
    out = new_value(out_dims, value.dtype)
    dims_d, strides_d = params(("strided", tuple(out_dims), tuple(strides)),
                               lambda: (ints(out_dims), ints(strides)))
    launch(strided_copy, out.size, out.flat(), value.flat(), dims_d, strides_d, int(base))
    return out


def copy_value(value):
    """A copy of ``value`` in a new device buffer (device to device)."""
    out = new_value(value.shape, value.dtype)
    if value.size:
        out.flat().copy_to_device(value.flat())
    return out


# -- transpose, reverse, broadcast ------------------------------------------------------------

@kernel("transpose")
def transpose(operand, *, shape, permutation):
    # result index i reads operand index with operand_index[permutation[k]] = result_index[k]
    src_strides = row_major_strides(operand.shape)
    return gather_strided(operand, [operand.shape[p] for p in permutation],
                          [src_strides[p] for p in permutation], 0)


@kernel("reverse")
def reverse(operand, *, shape, dimensions):
    # in a reversed dimension of size N: operand_index = N - 1 - result_index
    strides = row_major_strides(operand.shape)
    base = 0
    for d in dimensions:
        if operand.shape[d] > 0:
            base += (operand.shape[d] - 1) * strides[d]
        strides[d] = -strides[d]
    return gather_strided(operand, operand.shape, strides, base)


@kernel("broadcast")
def broadcast(operand, *, shape, out_dim_size, broadcast_dimensions):
    # operand_index[d] = 0 if dim(operand, d) == 1 else result_index[broadcast_dimensions[d]]
    out_dims = static_dims(shape, "BroadcastInDim")
    src_strides = row_major_strides(operand.shape)
    strides = [0] * len(out_dims)
    for d, r in enumerate(broadcast_dimensions):
        strides[r] = src_strides[d] if operand.shape[d] != 1 else 0
    return gather_strided(operand, out_dims, strides, 0)


# -- iota (the fusion plan makes every iota a loop; this kernel serves a direct call) ---------

_iota_kernels = {}


def _iota_kernel(t):
    if t not in _iota_kernels:
        from ..emit import finish
        from .fused import compile_source
        src = ("@cuda.jit\ndef iota(n, out, inner, size):\n    i = cuda.grid(1)\n    if i < n:\n"
               f"        out[i] = {finish('np.int64((i // inner) % size)', t)}\n")
        _iota_kernels[t] = compile_source("cuda_iota", src).iota
    return _iota_kernels[t]


@kernel("iota")
def iota(*, shape, iota_dimension):
    dims = static_dims(shape, "Iota")
    out = new_value(dims, shape.dtype)
    inner = prod(dims[iota_dimension + 1:])
    launch(_iota_kernel(shape.element_type), out.size, out.flat(), inner, dims[iota_dimension])
    return out


# -- concatenate -------------------------------------------------------------------------------

@kernel("concatenate")
def concatenate(*operands, shape, dimension):
    # operand k lands at offset (sizes of operands 0..k-1 along dimension) along dimension
    out_dims = static_dims(shape, "Concatenate")
    out = new_value(out_dims, shape.dtype)
    out_strides = row_major_strides(out_dims)
    offset = 0
    for op in operands:
        if op.size:
            dims_d, strides_d = params(("strided", tuple(op.shape), tuple(out_strides)),
                                       lambda op=op: (ints(op.shape), ints(out_strides)))
            launch(strided_place, op.size, out.flat(), op.flat(), dims_d, strides_d,
                   offset * out_strides[dimension])
        offset += op.shape[dimension]
    return out


# -- reshape, bitcast, copy, dynamic-reshape -------------------------------------------------------

def _view(value, dims, dtype=None):
    """``value``'s buffer seen with other dimensions (row-major): no copy."""
    return DeviceValue(value.flat() if value.size else value.array, dtype or value.dtype, tuple(dims))


@kernel("reshape")
def reshape(operand, *, shape, new_sizes):
    return _view(operand, static_dims(shape, "Reshape"))


@kernel("bitcast")
def bitcast(operand, *, shape):
    dims = static_dims(shape, "Bitcast")
    if np.dtype(shape.dtype) == operand.dtype:
        return _view(operand, dims)
    from .elementwise import reinterpret
    return reinterpret(operand, shape.element_type, dims)


@kernel("copy")
def copy(operand, *, shape):
    if isinstance(operand, tuple):
        return tuple(copy(v, shape=s) for v, s in zip(operand, shape.tuple_shapes))
    return copy_value(operand)


@kernel("dynamic-reshape")
def dynamic_reshape(operand, *dim_sizes, shape):
    sizes = [int(to_host(s)) for s in dim_sizes]   # run-time sizes: a few scalars to the host
    for i, (size, d, b) in enumerate(zip(sizes, shape.dims, shape.bounds)):
        limit = d if d is not None else b
        if size < 0 or (limit is not None and size > limit):
            raise ExecutionError(f"DynamicReshape: dim_sizes[{i}]={size} is outside [0, {limit}] ({shape})")
    if prod(sizes) != operand.size:
        raise ExecutionError(f"DynamicReshape: dim_sizes={sizes} has {prod(sizes)} elements but the "
                             f"operand has {operand.size}")
    return _view(operand, sizes)


@kernel("get-dimension-size")
def get_dimension_size(operand, *, shape, dimensions):
    return to_device(np.int32(operand.shape[dimensions[0]]))


@kernel("set-dimension-size")
def set_dimension_size(operand, size, *, shape, dimensions):
    d = dimensions[0]
    n = int(to_host(size))
    if not 0 <= n <= operand.shape[d]:
        raise ExecutionError(f"SetDimensionSize: size={n} is outside [0, {operand.shape[d]}] for dimension {d}")
    dims = list(operand.shape)
    dims[d] = n
    return gather_strided(operand, dims, row_major_strides(operand.shape), 0)
