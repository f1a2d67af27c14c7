"""CPU kernels of the ops that compute little: Map and the dynamic dimension sizes.

Map runs its computation as a generated Numba loop when the computation compiles to a
scalar function (``reduction.region_source``); otherwise the reference applies it.
"""
import numpy as np

from . import kernel
from .reduction import NotCompilable, _NumbaError, _generate


def _map_loop(region, n):
    ins = [f"in{k}" for k in range(n)]
    source = (f"@njit(cache=True, nogil=True, parallel=True, error_model='numpy')\n"
              f"def map_loop(out, {', '.join(ins)}):\n"
              f"    for i in prange(out.shape[0]):\n"
              f"        out[i] = region({', '.join(f'{x}[i]' for x in ins)})\n")
    return _generate("map", [("region", region.computation)], source).map_loop


@kernel("map", note="generated Numba loop (regions that do not compile: reference)")
def map_(*operands, shape, computation, dimensions=None):
    from ..emit import carrier_dtype
    from ...ops import registry
    try:
        loop = _map_loop(computation, len(operands))
        out = np.empty(int(np.prod(shape.dims, dtype=np.int64)), carrier_dtype(shape.element_type))
        ins = [np.ascontiguousarray(np.asarray(v).astype(carrier_dtype(_type(v)), copy=False)).reshape(-1)
               for v in operands]
        loop(out, *ins)
        return out.reshape(shape.dims).astype(shape.dtype, copy=False)
    except (NotCompilable, _NumbaError):
        from ...executors.reference import Region, guard_reference
        guard_reference("map", operands, shape)
        ref = registry.OPS["map"].reference
        return ref(*operands, shape=shape, computation=Region(computation.computation, computation.ctx))


def _type(value):
    from ... import dtypes
    return dtypes.from_numpy(np.asarray(value).dtype)


@kernel("get-dimension-size", note="no data: the size of the value")
def get_dimension_size(operand, *, shape, dimensions):
    return np.int32(np.shape(operand)[dimensions[0]])


@kernel("set-dimension-size", note="view (no copy)")
def set_dimension_size(operand, size, *, shape, dimensions):
    from ...ops import registry
    return registry.OPS["set-dimension-size"].reference(operand, size, shape=shape, dimensions=dimensions)
