"""CPU kernels of the element-wise family, for what a fused loop does not compute.

Every element-wise op normally runs inside a fused loop (``executors/emit.py`` writes its
scalar code), so the executor asks for these kernels only when the fusion plan left an
instruction out of every loop:

- ``bitcast-convert``: the same bytes read as another type (with a width change a minor
  dimension appears or disappears): a view of the operand's buffer, no computation;
- the few cases an emitter refuses (``accepts``): complex ``tan``, ``tanh``, ``rsqrt`` and
  ``atan2`` (NumPy's C99 rules for infinities are long to port), ``reduce-precision`` and
  TOTALORDER ``compare`` on the fnuz f8 types (their bits are not ordered as f32's); any op
  on a type without a loop carrier (``f8e8m0fnu``, ``f4e2m1fn``); ``select`` of whole
  tuples.  These call the reference's NumPy function on the whole array (vectorised),
  which the status table notes as "numpy".
"""
import numpy as np

from ...ops import registry
from . import kernel


@kernel("bitcast-convert")
def bitcast_convert(operand, *, shape, new_element_type):
    """Reinterpret the bytes (little-endian: element k of a new minor dimension is the k-th
    lowest-addressed piece); a view of a contiguous operand."""
    x = np.ascontiguousarray(operand)
    if x.dtype.itemsize * 8 != _bits(x.dtype) or shape.dtype.itemsize * 8 != _bits(shape.dtype) or (
            np.dtype(shape.dtype) != x.dtype and np.bool_ in (shape.dtype.type, x.dtype.type)):   # (a pred is a bit)
        return registry.get("bitcast-convert").reference(operand, shape=shape, new_element_type=new_element_type)
    return x.reshape(-1).view(shape.dtype).reshape(shape.dims)


def _bits(dtype):
    from ... import dtypes
    return dtypes.bit_width(dtypes.from_numpy(dtype))


def _reference_kernel(opcode):
    opdef = registry.OPS[opcode]

    def run(*values, shape, **attrs):
        return opdef.reference(*values, shape=shape, **attrs)
    run.__name__ = run.__qualname__ = f"{opcode.replace('-', '_')}_numpy"
    run.__doc__ = f"{opdef.name} on the whole array with the reference's NumPy code (not fused)."
    return run


#: ops whose emitter refuses some operand types: the status table names them
_PARTLY_NUMPY = {"tan": "numpy (complex)", "tanh": "numpy (complex)", "rsqrt": "numpy (complex)",
                 "atan2": "numpy (complex)", "reduce-precision": "numpy (fnuz f8)",
                 "compare": "numpy (TOTALORDER fnuz f8)"}


def _register_fallbacks():
    registry.all_ops()  # every family registered
    for opcode in sorted(registry.CATEGORIES["elementwise"]):
        if opcode == "constant":
            continue
        kernel(opcode, note=_PARTLY_NUMPY.get(opcode))(_reference_kernel(opcode))


_register_fallbacks()
