"""CUDA kernels of the element-wise ops the fusion plan leaves out: bitcast-convert (and
the type-changing bitcast), map, and a host fallback for element-wise instructions no
emitter can write.

Element-wise instructions normally run as fused loops (``cuda.fused``): the fusion plan
takes every instruction ``emit.can_emit`` accepts.  What is left:

- ``bitcast-convert``: bits, not values.  A value is first turned into the raw bits of
  its XLA type (``raw_bits``: a free device view, except for the narrow floats carried
  as f32, whose bits are re-encoded by a kernel), the bytes are viewed as words of the
  new width (a width change adds or removes the minor dimension, little-endian, no
  data moves), and the words are turned into the new type's carrier (``from_bits``).
- ``map``: the mapped computation becomes a device function (``reduction.region_function``)
  called by one thread per element.
- any other element-wise instruction (a type or an op without an emitter, a select of
  tuples): its reference runs on the host (copy there, compute, copy back) -- slow and
  honest: the status table says so.
"""
import numpy as np

from ... import dtypes
from ...ops import registry
from . import DeviceValue, kernel
from .reduction import _computation, _names, region_module
from .shape import cuda, host_api, host_kernel, launch, new_value, static_dims, to_host

_UNSIGNED = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}

#: narrow floats (carried as f32): kind (0: bf16, the top half of f32; 1: IEEE-like),
#: exponent bits, mantissa bits, has infinities (f8e4m3fn has none: S.1111.111 is NaN)
_FORMATS = {"bf16": (0, 8, 7, 1), "f16": (1, 5, 10, 1), "f8e5m2": (1, 5, 2, 1), "f8e4m3fn": (1, 4, 3, 0)}


# -- narrow float bits <-> f32 bits -------------------------------------------------------------

@cuda.jit
def _encode_narrow(n, f32_bits, out, kind, e_bits, m_bits, has_inf):
    """The narrow float's bits of each f32 (a value of that format, exactly)."""
    i = cuda.grid(1)
    if i < n:
        b = np.int64(f32_bits[i])
        if kind == 0:
            out[i] = b >> 16
        else:
            width = e_bits + m_bits
            bias = (1 << (e_bits - 1)) - 1
            sign = ((b >> 31) & 1) << width
            exp = (b >> 23) & 0xFF
            man = b & 0x7FFFFF
            top = (1 << e_bits) - 1
            if exp == 0xFF:
                if has_inf == 0:
                    r = sign | ((1 << width) - 1)            # the format's NaN
                elif man == 0:
                    r = sign | (top << m_bits)               # +-Inf
                else:
                    m = man >> (23 - m_bits)
                    if m == 0:
                        m = 1 << (m_bits - 1)
                    r = sign | (top << m_bits) | m           # NaN, payload kept
            elif exp == 0:
                r = sign
            else:
                e = exp - 127 + bias
                if e >= 1:
                    r = sign | (e << m_bits) | (man >> (23 - m_bits))
                elif 23 - m_bits + 1 - e > 31:
                    r = sign
                else:                                        # a denormal of the format
                    r = sign | ((man | 0x800000) >> (23 - m_bits + 1 - e))
            out[i] = r


@cuda.jit
def _decode_narrow(n, bits, f32_bits, kind, e_bits, m_bits, has_inf):
    """The f32 bits of each narrow float."""
    i = cuda.grid(1)
    if i < n:
        h = np.int64(bits[i])
        if kind == 0:
            f32_bits[i] = h << 16
        else:
            width = e_bits + m_bits
            bias = (1 << (e_bits - 1)) - 1
            sign = ((h >> width) & 1) << 31
            e = (h >> m_bits) & ((1 << e_bits) - 1)
            m = h & ((1 << m_bits) - 1)
            top = (1 << e_bits) - 1
            if has_inf == 0 and e == top and m == (1 << m_bits) - 1:
                r = sign | 0x7FC00000
            elif has_inf != 0 and e == top:
                r = sign | (0xFF << 23) | (m << (23 - m_bits))
            elif e == 0:
                if m == 0:
                    r = sign
                else:                                        # a denormal: normalise
                    k = 0
                    while (m & (1 << m_bits)) == 0:
                        m <<= 1
                        k += 1
                    r = sign | ((1 - bias - k + 127) << 23) | ((m & ((1 << m_bits) - 1)) << (23 - m_bits))
            else:
                r = sign | ((e - bias + 127) << 23) | (m << (23 - m_bits))
            f32_bits[i] = r


def raw_bits(value):
    """The value's elements as unsigned words of its XLA type's width (flat, on the device)."""
    t = dtypes.from_numpy(value.dtype)
    flat = value.flat()
    if t in _FORMATS:
        out = host_api.device_array(max(value.size, 1), _UNSIGNED[value.dtype.itemsize])
        launch(_encode_narrow, value.size, flat.view(np.uint32), out, *_FORMATS[t])
        return out[:value.size]
    return flat.view(_UNSIGNED[flat.dtype.itemsize])


def from_bits(bits, t, dims):
    """A DeviceValue of XLA type ``t`` whose elements have the unsigned words ``bits``."""
    n = int(bits.shape[0])
    if t in _FORMATS:
        f32 = host_api.device_array(max(n, 1), np.uint32)
        launch(_decode_narrow, n, bits, f32, *_FORMATS[t])
        array = f32[:n].view(np.float32)
    else:
        from ..emit import carrier_dtype
        array = bits.view(carrier_dtype(t))
    return DeviceValue(array, dtypes.to_numpy(t), tuple(dims))


def reinterpret(value, t, dims):
    """``value``'s bytes read as elements of XLA type ``t`` with dimensions ``dims``."""
    if np.dtype(value.dtype).kind == "c":    # complex to complex: a view of the same bytes
        new = dtypes.to_numpy(t)
        return DeviceValue(value.flat().view(new) if new != np.dtype(value.dtype) else value.flat(), new,
                           tuple(dims))
    width = dtypes.bit_width(t) // 8
    return from_bits(raw_bits(value).view(np.uint8).view(_UNSIGNED[width]), t, dims)


@kernel("bitcast-convert")
def bitcast_convert(operand, *, shape, new_element_type):
    if shape.element_type == dtypes.from_numpy(operand.dtype):
        return DeviceValue(operand.array, operand.dtype, shape.dims)
    if "pred" in (shape.element_type, dtypes.from_numpy(operand.dtype)):   # a pred is one bit: on the host
        from .shape import to_device
        return to_device(registry.get("bitcast-convert").reference(to_host(operand), shape=shape,
                                                                     new_element_type=new_element_type))
    return reinterpret(operand, shape.element_type, shape.dims)


# -- map ------------------------------------------------------------------------------------

def _map_kernel(comp, n):
    ins = _names("in", n)
    text = (f"@cuda.jit\ndef map_kernel(n, out, {', '.join(ins)}):\n"
            "    i = cuda.grid(1)\n"
            "    if i < n:\n"
            f"        out[i] = region({', '.join(f'{x}[i]' for x in ins)})\n")
    return region_module("map", {"region": comp}, text).map_kernel


@kernel("map")
def map_(*operands, shape, computation, dimensions=None):
    out = new_value(static_dims(shape, "Map"), shape.dtype)
    launch(_map_kernel(_computation(computation), len(operands)), out.size, out.flat(),
           *[v.flat() for v in operands])
    return out


# -- element-wise instructions no emitter writes ---------------------------------------------------

#: ops whose emitter refuses some operand types (see cpu/elementwise.py): the status table names them
_PARTLY_HOST = {"tan": "host (numpy) for complex", "tanh": "host (numpy) for complex",
                "rsqrt": "host (numpy) for complex", "atan2": "host (numpy) for complex",
                "reduce-precision": "host (numpy) for fnuz f8"}


def _fallback(opcode):
    host = host_kernel(opcode)

    def run(*values, shape, **attrs):
        if opcode == "select" and values and isinstance(values[1], tuple):
            return values[1] if bool(to_host(values[0])) else values[2]   # a scalar pred picks a tuple
        return host(*values, shape=shape, **attrs)
    run.__name__ = f"{opcode.replace('-', '_')}_host"
    if opcode in _PARTLY_HOST:
        run.status_note = _PARTLY_HOST[opcode]
    run.needs_context = True
    return run


registry.all_ops()   # every family registered, so the category is complete
for _op in sorted(registry.CATEGORIES["elementwise"] - {"constant"}):
    kernel(_op)(_fallback(_op))


# -- flush to zero (fpenv): around kernels that compute without the fused loops' flushing ------

@cuda.jit
def _flush_kernel(n, x, out, tiny):
    i = cuda.grid(1)
    if i < n:
        v = x[i]
        out[i] = v * 0 if abs(v) < tiny else v


def flush_device(value):
    """``value`` (a DeviceValue, or a tuple of them) with its denormals replaced by zeros of
    their sign, as XLA:CPU's FTZ/DAZ modes see them (``fpenv.flush``); a new value."""
    from ... import fpenv
    if isinstance(value, tuple):
        return tuple(flush_device(v) for v in value)
    if not isinstance(value, DeviceValue):
        return value
    try:
        t = dtypes.from_numpy(value.dtype)
    except ValueError:
        return value
    if t not in fpenv.FLUSHED_TYPES:
        return value
    if t in dtypes.COMPLEX:   # (rare: complex dot, fft) through the host
        from .shape import to_device
        return to_device(fpenv.flush(to_host(value)))
    out = new_value(value.shape, value.dtype)
    launch(_flush_kernel, value.size, value.flat(), out.flat(), fpenv.TINY[t])
    return out
