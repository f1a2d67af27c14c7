"""The CUDA layer (numba-cuda): fused loops and kernels on the GPU, values kept on it.

Values live on the device between instructions as ``DeviceValue`` (a device array in the
type's carrier: narrow floats as f32, exact because they are rounded) and are copied to
the host once, at the end.  Kernels run one thread per result element with a bounds
check and call the same ``@njit`` scalar helpers as the CPU loops.  Kernels register in
``registry.LAYERS["cuda"]`` with the CPU layer's calling convention, on DeviceValues.

Without a GPU, the CUDA simulator (``NUMBA_ENABLE_CUDASIM=1`` set before numba is first
imported) runs the same kernels in Python: slow, for small arrays and for tests.
"""
import os
import threading

import numpy as np

from ...errors import ExecutionError
from ...ops import registry
from ..emit import carrier_dtype

FAMILIES = ("fused", "elementwise", "shape", "slicing", "indexing", "reduction", "linalg", "rng")
THREADS = 256


def cuda_module():
    from ..numba_setup import numba
    numba()
    try:
        from numba import cuda
    except ImportError:
        raise ImportError("backend='cuda' needs numba-cuda: pip install 'xla_explorer[cuda]'") from None
    return cuda


def simulated():
    return os.environ.get("NUMBA_ENABLE_CUDASIM", "0") == "1"


def check_available():
    cuda = cuda_module()
    if simulated():
        return cuda
    try:
        ok = cuda.is_available()
    except Exception:  # noqa: BLE001 - a broken driver says the same as none
        ok = False
    if not ok:
        raise ExecutionError(
            "backend='cuda' needs an NVIDIA GPU with a working CUDA driver, and none was found. "
            "Run on the CPU with backend='numba' (compiled) or backend='numpy' (the reference); to try "
            "the CUDA kernels without a GPU, set NUMBA_ENABLE_CUDASIM=1 before numba is first imported "
            "(the simulator is slow: small arrays only).")
    return cuda


class DeviceValue:
    """An array on the device, in its type's carrier dtype, with its XLA shape's dtype."""

    __slots__ = ("array", "dtype", "shape")

    def __init__(self, array, dtype, shape):
        self.array, self.dtype, self.shape = array, np.dtype(dtype), tuple(shape)

    @property
    def size(self):
        return int(np.prod(self.shape, dtype=np.int64))

    def flat(self):
        """The device array as 1-D (a view)."""
        return self.array.reshape(self.size) if self.array.ndim != 1 else self.array

    def __repr__(self):
        return f"DeviceValue({self.dtype}, {list(self.shape)})"


def kernel(*opcodes, note=None):
    from ..cpu import kernel as _kernel
    return _kernel(*opcodes, note=note, layer="cuda")


_sim_lock = threading.RLock()


def run_kernel(fn, config, *args):
    """Launch ``fn[config](*args)``.  The simulator runs one kernel at a time (its kernel
    context is global): simulated devices (threads, for collectives) take turns."""
    if simulated():
        with _sim_lock:
            fn[config](*args)
    else:
        fn[config](*args)


def launch_config(n):
    """(blocks, threads per block) for one thread per element of ``n``.  The simulator runs
    every thread of a block as a Python thread: it gets no more threads than elements."""
    threads = THREADS if not simulated() else max(1, min(THREADS, n))
    blocks = max(1, (n + threads - 1) // threads)
    return blocks, threads


class CudaBackend:
    name = "cuda"
    layer = "cuda"

    def __init__(self, fuse=True):
        self.fuse = fuse
        self.cuda = check_available()
        _load()

    def to_device(self, value):
        if isinstance(value, DeviceValue):
            return value
        arr = np.asarray(value)
        carrier = carrier_dtype_of(arr.dtype)
        host = np.ascontiguousarray(arr.astype(carrier) if arr.dtype != carrier else arr)
        return DeviceValue(self.cuda.to_device(host.reshape(-1) if host.ndim == 0 else host), arr.dtype, arr.shape)

    def to_host(self, value):
        if not isinstance(value, DeviceValue):
            return value
        host = value.array.copy_to_host().reshape(value.shape)
        return host.astype(value.dtype) if host.dtype != value.dtype else host

    def empty(self, shape, dtype):
        carrier = carrier_dtype_of(np.dtype(dtype))
        n = int(np.prod(shape, dtype=np.int64))
        return DeviceValue(self.cuda.device_array(max(n, 1) if len(shape) == 0 else tuple(shape), carrier),
                           dtype, shape)

    def constant(self, literal):
        return self.to_device(literal)

    def run_group(self, group, values):
        from .fused import run_group
        return run_group(self, group, values)

    def flush(self, value):
        from .elementwise import flush_device
        return flush_device(value)


def carrier_dtype_of(dtype):
    from ... import dtypes
    try:
        return carrier_dtype(dtypes.from_numpy(dtype))
    except (KeyError, ValueError):
        return np.dtype(dtype)


_loaded = False


def _load():
    global _loaded
    if not _loaded:
        from ... import progress
        with progress.task("cuda: loading Numba and its kernels", total=len(FAMILIES), announce=True) as t:
            t.note("importing numba-cuda")
            cuda_module()  # numba and numba-cuda first: no half-filled table without them
            _loaded = True
            from .. import import_families
            import_families(__name__, FAMILIES, t)

