"""What the NumPy reference allocates for one instruction, op by op: the size guard of
eager ops and of ``backend="numpy"`` (``reference.check_reference_size``).

The estimate is ``E x (bytes per element x MARGIN + SLACK)``:

- ``E`` is the number of elements the op's work is counted in: the largest of its result
  and operands, or more where the reference materialises something bigger -- a
  convolution's padded, dilated input; the windows of ``reduce-window`` and
  ``select-and-scatter`` (built in blocks of ``reduction._BLOCK`` cells: one block);
- bytes per element are ``a + b x itemsize + index x 8 x rank`` with ``(a, b)`` per op and
  per class of element type (``float``: f32 and f64, ``half``: floats of 8 or 16 bits,
  which are always widened, ``complex``, ``int``: integers and pred), the
  item size the widest of the op's operands and results, and ``index`` the int64 index
  rows some ops build, one per dimension (gather, scatter).  The figures are measured with
  ``tracemalloc`` over every element type (``python tests/memkit.py`` prints them and the
  fit): floats are computed in f64 and complex numbers in c128, so ``a`` is mostly those
  widened temporaries, ``b`` the values kept in their own type.

A ``reduce``'s bytes per element follow its region instead (``_reduce_work``: the
region's ops' own figures on half the elements, its operands copied once): an ``add``
region widens nothing, a ``maximum`` one widens to f64.  An op missing from ``WORK`` (a new
one) gets ``DEFAULT``, generous.  So a 60M-element f32
``exp`` (about 25 bytes an element: the operand and the result in f64, the f32 result)
runs under the 2 GiB default, as does a 100M-element f32 ``add`` (computed in f32: 10
bytes an element), and a 5-billion-element one is refused before anything is allocated.
"""
import math

from .. import dtypes

#: what the estimate adds to the measured figures (other shapes than the ones measured), and
#: bytes an element for the allocator's slack (small arrays cost relatively more)
MARGIN = 1.25
SLACK = 1


class Work:
    """Bytes per element of E: ``a + b x itemsize`` for the op's class of element type,
    plus ``index x 8 x rank``."""

    __slots__ = ("float", "half", "complex", "int", "index")

    def __init__(self, float=(72, 0), complex=(144, 0), int=(72, 0), index=0, half=None):  # noqa: A002
        self.float, self.complex, self.int, self.index = float, complex, int, index
        self.half = float if half is None else half

    def per_element(self, cls, itemsize, rank):
        a, b = getattr(self, cls)
        return a + b * itemsize + self.index * 8 * rank

    def __repr__(self):
        return (f"Work(float={self.float}, half={self.half}, complex={self.complex}, int={self.int}, "
                f"index={self.index})")


#: an op without a measured entry: the old single factor (9 widened values, index rows)
DEFAULT = Work((72, 0), (144, 0), (72, 0), 4)


def _leaves(shape):
    return [s for s in shape.leaves() if s.is_array]


def _value_leaves(values):
    import numpy as np
    for v in values:
        if isinstance(v, (tuple, list)):
            yield from _value_leaves(v)
        elif isinstance(v, (np.ndarray, np.generic)):
            yield v


def _class(types):
    if any(t in dtypes.COMPLEX for t in types):
        return "complex"
    floats = [t for t in types if t in dtypes.FLOATING]
    if floats:
        return "float" if any(dtypes.bit_width(t) > 16 for t in floats) else "half"
    return "int"


def work_elements(op, values, shape, attrs):
    """(E, rank): the elements the op's work is counted in, and the largest rank."""
    import numpy as np
    leaves = _leaves(shape)
    vals = list(_value_leaves(values))
    elements = max([s.numel for s in leaves] + [int(np.size(v)) for v in vals] + [0])
    rank = max([s.rank for s in leaves] + [int(np.ndim(v)) for v in vals] + [0])
    special = _SPECIAL.get(op.opcode)
    if special is not None and attrs is not None and vals:
        try:
            elements = max(elements, special(vals, shape, attrs))
        except (TypeError, ValueError, KeyError, IndexError, AttributeError):
            pass   # malformed attributes: the shape rule has refused them already
    return elements, rank


def work_class(values, shape):
    """(class, item size): the class of element type the op computes in (complex if any of
    its operands or results is, else float if any is, else int) and the widest item size."""
    import numpy as np
    types = [s.element_type for s in _leaves(shape)]
    items = [s.dtype.itemsize for s in _leaves(shape)]
    for v in _value_leaves(values):
        dt = np.asarray(v).dtype
        try:
            types.append(dtypes.from_numpy(dt))
        except ValueError:
            pass
        items.append(dt.itemsize)
    return _class(types), max(items + [1])


def reference_bytes(op, values, shape, attrs=None):
    """(bytes, how): at most what the reference of ``op`` allocates computing ``shape``."""
    elements, rank = work_elements(op, values, shape, attrs)
    if not elements:
        return 0, ""
    cls, itemsize = work_class(values, shape)
    work = WORK.get(op.opcode, DEFAULT)
    bytes_per = _REGION.get(op.opcode, _no_region)(values, attrs, cls, itemsize)
    if bytes_per is None:
        bytes_per = work.per_element(cls, itemsize, rank)
    per = math.ceil(bytes_per * MARGIN) + SLACK
    return elements * per, f"{elements:,} elements x {per} bytes of work each"


# -- ops whose work is their region's ------------------------------------------------------

def _no_region(values, attrs, cls, itemsize):
    return None


def _region_ops(attrs, key):
    """The instructions of the region ``attrs[key]`` that compute (parameters, tuples and
    constants aside), or None when it calls further computations or cannot be read."""
    comp = (attrs or {}).get(key)
    comp = getattr(comp, "computation", comp)   # a Region wraps the HloComputation
    insts = getattr(comp, "instructions", None)
    if not insts:
        return None
    out = []
    for inst in insts:
        if inst.called_computations():
            return None
        if inst.opcode not in ("parameter", "tuple", "get-tuple-element", "constant"):
            out.append(inst.opcode)
    return out


def _reduce_work(values, attrs, cls, itemsize):
    """Bytes per element of a ``reduce``: the operands laid out with the reduced dimensions
    last (a copy of each, ``itemsize``), the tree's first level (half the elements: each
    region op's own work on them, the level's values kept in their type), then less.
    The single measured figure covered the most widening region (``maximum``, 42 bytes an
    f32 element) for every region: an f32 ``add`` reduce was estimated 7x its peak."""
    ops = _region_ops(attrs, "computation")
    if ops is None:
        return None
    n = max(1, len(values) // 2)
    region = sum(WORK.get(o, DEFAULT).per_element(cls, itemsize, 0) for o in ops)
    return 1.5 * n * itemsize + 0.5 * region + 2


_REGION = {"reduce": _reduce_work}


# -- E for the ops that materialise more than their operands and result -------------------

def _conv_base(vals, shape, attrs):
    """A convolution's input, dilated and padded, in f64 (the reference's ``padded``)."""
    from ..ops.linalg import conv_dimension_numbers
    lhs = vals[0]
    dn = conv_dimension_numbers(attrs.get("dimension_numbers"), lhs.ndim - 2)
    n = lhs.ndim - 2
    pads = list(attrs.get("padding") or [(0, 0)] * n)
    dil = list(attrs.get("lhs_dilation") or [1] * n)
    total = lhs.shape[dn.input_batch_dimension] * lhs.shape[dn.input_feature_dimension]
    for i, d in enumerate(dn.input_spatial_dimensions):
        size = lhs.shape[d]
        dilated = (size - 1) * int(dil[i]) + 1 if size else 0
        total *= max(0, dilated + int(pads[i][0]) + int(pads[i][1]))
    return total


def _window_block(out_dims, window):
    """Window cells the reference materialises at once (``reduction._in_blocks``)."""
    from ..ops.reduction import _BLOCK
    count = math.prod(int(w) for w in window)
    out_dims = [int(d) for d in out_dims]
    total = math.prod(out_dims) * count
    if total <= _BLOCK or not out_dims:
        return total
    d = max(range(len(out_dims)), key=lambda k: (out_dims[k], -k))
    step = max(1, out_dims[d] * _BLOCK // total)
    return total // out_dims[d] * min(step, out_dims[d])


def _reduce_window_cells(vals, shape, attrs):
    out = _leaves(shape)[0].dims
    return _window_block(out, attrs["window_dimensions"])


def _select_and_scatter_cells(vals, shape, attrs):
    return _window_block(vals[1].shape, attrs["window_dimensions"])


_SPECIAL = {
    "convolution": _conv_base,
    "reduce-window": _reduce_window_cells,
    "select-and-scatter": _select_and_scatter_cells,
}


#: int64 index rows per dimension that an op builds (bytes: index x 8 x rank an element)
_INDEX = {"gather": 6, "scatter": 6}

#: (a, b) per op and class, fitted by ``python tests/memkit.py`` (2**18 elements, every
#: element type); a class not measured takes the float figures (complex: twice ``a``)
_MEASURED = {
    'abs': dict(float=(17, 1), half=(19, 0), complex=(34, 1), int=(1, 2)),
    'add': dict(float=(0, 2.5), half=(27, 0), complex=(49, 3), int=(1, 2)),
    'all-gather': dict(float=(1, 1), half=(3, 0), complex=(1, 1)),
    'all-reduce': dict(float=(1, 0), half=(1, 0), complex=(1, 0)),
    'and': dict(int=(1, 2)),
    'atan2': dict(float=(51, 0), half=(27, 0), complex=(81, 2)),
    'batch-norm-grad': dict(float=(49, 0), half=(49, 0)),
    'batch-norm-inference': dict(float=(25, 0), half=(25, 0)),
    'batch-norm-training': dict(float=(23, 0.5), half=(25, 0)),
    'broadcast': dict(float=(1, 1), half=(3, 0), complex=(1, 1)),
    'call': dict(float=(15, 1.5), half=(19, 0), complex=(33, 1)),
    'cbrt': dict(float=(17, 1), half=(19, 0)),
    'ceil': dict(float=(17, 1), half=(19, 0)),
    'cholesky': dict(float=(18, 1), half=(20, 0)),
    'clamp': dict(float=(58, 0), half=(58, 0), complex=(82, 3), int=(1, 2)),
    'collective-permute': dict(float=(1, 0), half=(1, 0), complex=(1, 0)),
    'compare': dict(float=(18, 0), half=(18, 0), complex=(4, 2)),
    'complex': dict(complex=(1, 2)),
    'concatenate': dict(float=(1, 1), half=(3, 0), complex=(1, 1)),
    'convert': dict(float=(44, 0), half=(44, 0), complex=(44, 0), int=(5, 0)),
    'convolution': dict(float=(36, 0.5), half=(38, 0), complex=(74, 1)),
    'copy': dict(float=(1, 1), half=(3, 0), complex=(1, 1)),
    'cosine': dict(float=(17, 1), half=(19, 0), complex=(45, 1.5)),
    'count-leading-zeros': dict(int=(41, 0.5)),
    'divide': dict(float=(25, 1), half=(27, 0), complex=(198, 3.5), int=(2, 4.5)),
    'dot': dict(float=(23, 0.5), half=(25, 0), complex=(49, 2)),
    'dynamic-slice': dict(float=(0, 1), half=(2, 0), complex=(0, 1)),
    'dynamic-update-slice': dict(float=(1, 1), half=(3, 0), complex=(1, 1)),
    'erf': dict(float=(49, 0), half=(49, 0)),
    'exponential': dict(float=(17, 1), half=(19, 0), complex=(45, 1.5)),
    'exponential-minus-one': dict(float=(17, 1), half=(19, 0), complex=(45, 1.5)),
    'fft': dict(complex=(5, 5.5)),
    'floor': dict(float=(17, 1), half=(19, 0)),
    'gather': dict(float=(7, 1.5), half=(11, 0), complex=(9, 1)),
    'imag': dict(float=(17, 1), half=(19, 0), complex=(17, 0.5)),
    'iota': dict(float=(5, 0), int=(5, 0)),
    'is-finite': dict(float=(11, 0), half=(11, 0)),
    'log': dict(float=(17, 1), half=(19, 0), complex=(50, 1)),
    'log-plus-one': dict(float=(17, 1), half=(19, 0), complex=(45, 1.5)),
    'logistic': dict(float=(23, 0.5), half=(25, 0), complex=(266, 1)),
    'map': dict(float=(0, 2.5), half=(27, 0), complex=(49, 3)),
    'maximum': dict(float=(42, 0), half=(42, 0), complex=(49, 3), int=(1, 2)),
    'minimum': dict(float=(42, 0), half=(42, 0), complex=(49, 3), int=(1, 2)),
    'multiply': dict(float=(25, 1), half=(27, 0), complex=(54, 4.5), int=(1, 2)),
    'negate': dict(float=(17, 1), half=(19, 0), complex=(33, 1), int=(1, 2)),
    'not': dict(int=(1, 2)),
    'opt-barrier': dict(float=(1, 0), half=(1, 0), complex=(1, 0)),
    'or': dict(int=(1, 2)),
    'pad': dict(float=(1, 1.5), half=(4, 0), complex=(1, 1.5)),
    'popcnt': dict(int=(33, 0)),
    'power': dict(float=(42, 1), half=(27, 0), complex=(2, 7), int=(27, 4)),
    'real': dict(float=(9, 1), half=(11, 0), complex=(17, 0.5)),
    'reduce': dict(float=(19, 1.5), half=(23, 0), complex=(21, 3)),
    'reduce-precision': dict(float=(8, 7.5), half=(36, 0)),
    'reduce-window': dict(float=(0, 3), half=(17, 0), complex=(22, 3)),
    'remainder': dict(float=(25, 1), half=(27, 0), int=(2, 3)),
    'reshape': dict(float=(1, 1), half=(3, 0), complex=(1, 1)),
    'reverse': dict(float=(1, 1), half=(3, 0), complex=(1, 1)),
    'rng': dict(float=(14, 0)),
    'rng-bit-generator': dict(int=(25, 0)),
    'round-nearest-afz': dict(float=(42, 0), half=(42, 0)),
    'round-nearest-even': dict(float=(17, 1), half=(19, 0)),
    'rsqrt': dict(float=(23, 0.5), half=(25, 0), complex=(45, 1.5)),
    'scan': dict(float=(0, 1.5), half=(4, 0)),
    'scatter': dict(float=(65, 2.5), half=(71, 0), complex=(54, 5.5)),
    'select': dict(float=(1, 2), half=(5, 0), complex=(1, 2), int=(1, 2)),
    'select-and-scatter': dict(float=(18, 1.5), half=(21, 0)),
    'shift-left': dict(int=(33, 1)),
    'shift-right-arithmetic': dict(int=(41, 1)),
    'shift-right-logical': dict(int=(33, 1)),
    'sign': dict(float=(26, 0), half=(26, 0), complex=(66, 1), int=(1, 2)),
    'sine': dict(float=(17, 1), half=(19, 0), complex=(45, 1.5)),
    'slice': dict(float=(0, 1), half=(2, 0), complex=(0, 1)),
    'sort': dict(float=(67, 4.5), half=(77, 0), complex=(55, 6)),
    'sqrt': dict(float=(17, 1), half=(19, 0), complex=(50, 1)),
    'subtract': dict(float=(0, 2.5), half=(27, 0), complex=(49, 3), int=(1, 2)),
    'tan': dict(float=(17, 1), half=(19, 0), complex=(33, 2)),
    'tanh': dict(float=(15, 1.5), half=(19, 0), complex=(33, 2)),
    'topk': dict(float=(26, 0), half=(26, 0)),
    'transpose': dict(float=(1, 1), half=(3, 0), complex=(1, 1)),
    'triangular-solve': dict(float=(36, 0), half=(36, 0)),
    'tuple': dict(float=(1, 0), half=(1, 0), complex=(1, 0)),
    'xor': dict(int=(1, 2)),
}


def _table():
    out = {}
    for opcode in set(_MEASURED) | set(_INDEX):
        m = dict(_MEASURED.get(opcode, {}))
        if "float" in m:
            m.setdefault("half", m["float"])
            m.setdefault("int", m["float"])
            m.setdefault("complex", (2 * m["float"][0], m["float"][1]))
        out[opcode] = Work(**m, index=_INDEX.get(opcode, 0))
    return out


#: opcode -> Work
WORK = _table()
