"""Linear algebra: Dot, DotGeneral, the convolutions, Fft, Cholesky, TriangularSolve, the
batch norms, and the LAPACK custom-calls JAX emits on CPU instead of the native ops.

XLA:CPU accumulates a dot or a convolution in the result type (s8 x s8 -> s32 wraps as
s32 arithmetic does; bf16 x bf16 -> f32 sums in f32).  The references sum in int64 /
uint64 (the same bits after wrapping to the result type: integers agree bit for bit) and
in float64 / complex128, rounding once at the end: a simplification, so float results can
differ from XLA's in the last bits (within the corpus' accumulation tolerance).

Spec: operation_semantics (Dot, DotGeneral, ConvWithGeneralPadding, BatchNorm*), spec/001
(Fft, Cholesky, TriangularSolve, batch_group_count); XLA's CholeskyExpander for what
XLA:CPU puts in the other triangle; LAPACK's documentation for the custom-call targets.
"""
import re
from itertools import product
from typing import NamedTuple

import numpy as np

from .. import dtypes
from ..builder import XlaOp, apply_op
from ..coerce import as_int, as_int_list
from ..errors import HloParseError, ShapeError
from ..hlo.attrs import Attr, Window, int_tuples
from ..shapes import Shape
from .arguments import describe
from . import conv_paths, custom_call, registry
from .index_map import Access, IndexMap

# ---------------------------------------------------------------------------------------
# Helpers shared by the family


def _compute_dtype(element_type):
    """The NumPy dtype a reference accumulates in before rounding to ``element_type``."""
    if element_type in dtypes.COMPLEX:
        return np.complex128
    if element_type in dtypes.FLOATING:
        return np.float64
    if element_type in dtypes.UNSIGNED:
        return np.uint64
    return np.int64  # signed integers and pred


def _as_result(value, shape):
    """Round an accumulated value to the result type (pred: any nonzero is true)."""
    value = np.asarray(value)
    if shape.element_type == "pred":
        return value != 0
    return value.astype(shape.dtype)


def _shape_of(x):
    if isinstance(x, XlaOp):
        return x.shape
    return Shape.of(x)


def _type_name(t):
    """``"f32"``, ``np.float32`` or ``Shape`` -> the XLA element type name (None stays None)."""
    if t is None:
        return None
    if isinstance(t, Shape):
        return t.element_type
    if isinstance(t, str) and t in dtypes.ALL_TYPES:
        return t
    return dtypes.from_numpy(t)


def _precision_text(precision_config):
    """``("highest", "highest")`` or raw ``"{highest,highest}"`` -> the HLO text (or None)."""
    if precision_config is None or isinstance(precision_config, str):
        return precision_config
    names = [str(getattr(p, "name", p)).lower() for p in precision_config]
    return "{" + ",".join(names) + "}"


def _type_class(t):
    if t == "pred":
        return "pred"
    if t in dtypes.COMPLEX:
        return "complex"
    if t in dtypes.FLOATING:
        return "floating"
    if t in dtypes.INTEGRAL:
        return "integral"
    return t


def _result_type(op, lhs, rhs, preferred_element_type):
    """XLA's dot/conv result type: both operands of one type (floats may differ in
    precision: the wider one wins), then ``preferred_element_type`` if given."""
    lt, rt = lhs.element_type, rhs.element_type
    for name, s in (("lhs", lhs), ("rhs", rhs)):
        if not s.is_array or s.element_type not in dtypes.NUMERIC | dtypes.PRED:
            raise ShapeError(f"{op}: {name} must be an array of numbers, got {s}")
    if lt != rt and not (_type_class(lt) == _type_class(rt) and _type_class(lt) in ("floating", "complex")):
        raise ShapeError(f"{op}: lhs and rhs element types differ ({lhs} vs {rhs}); only floating "
                         "types of different precision may be mixed")
    base = lt if dtypes.bit_width(lt) >= dtypes.bit_width(rt) else rt
    pref = _type_name(preferred_element_type)
    if pref is None or pref == base:
        return base
    if pref not in dtypes.NUMERIC | dtypes.PRED:
        raise ShapeError(f"{op}: preferred_element_type={pref} is not a numeric type")
    # XLA's MaybeUpcast: an integer result may not be narrower than its operands
    if base not in dtypes.FLOATING and dtypes.bit_width(pref) < dtypes.bit_width(base):
        raise ShapeError(f"{op}: preferred_element_type={pref} is narrower than the operand type {base}")
    return pref


def _check_dims(op, what, dims, rank, operand):
    for d in dims:
        if not 0 <= d < rank:
            raise ShapeError(f"{op}: {what} has dimension {d}, out of range for {operand} (rank {rank})")


# ---------------------------------------------------------------------------------------
# DotGeneral and Dot  (HLO `dot`)


class DotDimensionNumbers(NamedTuple):
    """DotGeneral's dimension numbers, named as the spec's DotDimensionNumbers fields."""
    lhs_contracting_dimensions: tuple = ()
    rhs_contracting_dimensions: tuple = ()
    lhs_batch_dimensions: tuple = ()
    rhs_batch_dimensions: tuple = ()


_DOT_DIMS = DotDimensionNumbers._fields


def DotGeneral(lhs, rhs, dimension_numbers=None, *, lhs_contracting_dimensions=(),
               rhs_contracting_dimensions=(), lhs_batch_dimensions=(), rhs_batch_dimensions=(),
               precision_config=None, preferred_element_type=None):
    """Wraps XLA's DotGeneral: the sum of products over the contracting dimensions.

    ``dimension_numbers`` is a ``DotDimensionNumbers``, a dict of its fields, or JAX's
    ``((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch))``; or give the four
    fields as keywords.  The result's dimensions are the batch dimensions, then lhs's free
    (neither batch nor contracting) ones, then rhs's free ones::

        result[b..., l..., r...] = sum_c lhs[b..., l..., c...] * rhs[b..., c..., r...]

    (with each index group placed at the dimensions the numbers name).  The sum runs in
    the result type, ``preferred_element_type`` when given (s8 x s8 -> s32).

    >>> DotGeneral(np.array([[1., 2, 3], [4, 5, 6]], np.float32), np.ones((2, 3), np.float32),
    ...            lhs_contracting_dimensions=[1], rhs_contracting_dimensions=[1])
    array([[ 6.,  6.], [15., 15.]], dtype=float32)
    """
    dims = dict(lhs_contracting_dimensions=lhs_contracting_dimensions,
                rhs_contracting_dimensions=rhs_contracting_dimensions,
                lhs_batch_dimensions=lhs_batch_dimensions, rhs_batch_dimensions=rhs_batch_dimensions)
    if dimension_numbers is not None:
        dims = _dot_dimension_numbers(dimension_numbers)._asdict()
    attrs = dict(dims)  # the attribute schema checks the dimension lists (hlo.attrs.coerce_attrs)
    attrs["precision_config"] = _precision_text(precision_config)
    attrs["preferred_element_type"] = _type_name(preferred_element_type)
    return apply_op("dot", [lhs, rhs], attrs)


def _dot_dimension_numbers(dn):
    if isinstance(dn, DotDimensionNumbers):
        return dn
    if isinstance(dn, dict):
        return DotDimensionNumbers(**{k: tuple(v) for k, v in dn.items()})
    if hasattr(dn, "lhs_contracting_dimensions"):  # XLA's proto or a look-alike
        return DotDimensionNumbers(*(tuple(getattr(dn, f)) for f in _DOT_DIMS))
    (lc, rc), (lb, rb) = dn  # JAX's ((lhs_contract, rhs_contract), (lhs_batch, rhs_batch))
    return DotDimensionNumbers(tuple(lc), tuple(rc), tuple(lb), tuple(rb))


def Dot(lhs, rhs, precision_config=None, preferred_element_type=None):
    """Wraps XLA's Dot: vector.vector -> scalar, matrix.vector -> vector, matrix.matrix ->
    matrix; the sum of products over the second dimension of ``lhs`` (the first when it is
    a vector) and the first of ``rhs``.  It is the DotGeneral with those contracting
    dimensions (HLO has only ``dot``).

    >>> Dot(np.array([[1., 2], [3, 4]], np.float32), np.array([1., 1], np.float32))
    array([3., 7.], dtype=float32)
    """
    ls, rs = _shape_of(lhs), _shape_of(rhs)
    for name, s in (("lhs", ls), ("rhs", rs)):
        if not s.is_array or s.rank not in (1, 2):  # the spec's table: vectors and matrices
            raise ShapeError(f"Dot: {name} must be a vector or a matrix, got {s} "
                             "(use DotGeneral for other ranks)")
    return DotGeneral(lhs, rhs, lhs_contracting_dimensions=[ls.rank - 1], rhs_contracting_dimensions=[0],
                      precision_config=precision_config, preferred_element_type=preferred_element_type)


def _dot_shape_rule(lhs, rhs, *, lhs_contracting_dimensions=(), rhs_contracting_dimensions=(),
                    lhs_batch_dimensions=(), rhs_batch_dimensions=(), precision_config=None,
                    preferred_element_type=None):
    op = "DotGeneral"
    element_type = _result_type(op, lhs, rhs, preferred_element_type)
    lc, rc = tuple(lhs_contracting_dimensions), tuple(rhs_contracting_dimensions)
    lb, rb = tuple(lhs_batch_dimensions), tuple(rhs_batch_dimensions)
    # dot_c1: as many contracting (batch) dimensions on each side
    if len(lc) != len(rc):
        raise ShapeError(f"{op}: lhs_contracting_dimensions={list(lc)} and rhs_contracting_dimensions="
                         f"{list(rc)} must have the same length")
    if len(lb) != len(rb):
        raise ShapeError(f"{op}: lhs_batch_dimensions={list(lb)} and rhs_batch_dimensions={list(rb)} "
                         "must have the same length")
    # dot_c2: dimension numbers in range and not repeated within an operand
    for side, s, c, b in (("lhs", lhs, lc, lb), ("rhs", rhs, rc, rb)):
        _check_dims(op, f"{side}_contracting_dimensions={list(c)}", c, s.rank, s)
        _check_dims(op, f"{side}_batch_dimensions={list(b)}", b, s.rank, s)
        if len(set(c + b)) != len(c + b):
            raise ShapeError(f"{op}: {side} dimension numbers repeat a dimension (contracting "
                             f"{list(c)}, batch {list(b)}) for {s}")
    # dot_c3: paired dimensions have equal sizes
    for what, ld, rd in (("contracting", lc, rc), ("batch", lb, rb)):
        for i, (a, b) in enumerate(zip(ld, rd)):
            la, rb_ = lhs.dims[a], rhs.dims[b]
            if la is not None and rb_ is not None and la != rb_:
                raise ShapeError(f"{op}: {what} dimension {i} has size {la} in lhs (dimension {a} of "
                                 f"{lhs}) but {rb_} in rhs (dimension {b} of {rhs})")
    batch = [lhs.dims[d] for d in lb]
    lhs_free = [lhs.dims[d] for d in range(lhs.rank) if d not in lc + lb]
    rhs_free = [rhs.dims[d] for d in range(rhs.rank) if d not in rc + rb]
    return Shape(element_type, batch + lhs_free + rhs_free)


_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _dot_subscripts(lhs_rank, rhs_rank, lc, rc, lb, rb):
    """The einsum formula of a DotGeneral: batch, lhs free, rhs free."""
    letters = iter(_LETTERS)
    lhs_sub, rhs_sub = [None] * lhs_rank, [None] * rhs_rank
    out = []
    for a, b in zip(lb, rb):
        lhs_sub[a] = rhs_sub[b] = next(letters)
        out.append(lhs_sub[a])
    for a, b in zip(lc, rc):
        lhs_sub[a] = rhs_sub[b] = next(letters)
    for subs in (lhs_sub, rhs_sub):
        for d, s in enumerate(subs):
            if s is None:
                subs[d] = next(letters)
                out.append(subs[d])
    return f"{''.join(lhs_sub)},{''.join(rhs_sub)}->{''.join(out)}"


def _dot_reference(lhs, rhs, *, shape, lhs_contracting_dimensions=(), rhs_contracting_dimensions=(),
                   lhs_batch_dimensions=(), rhs_batch_dimensions=(), **_):
    acc = _compute_dtype(shape.element_type)
    formula = _dot_subscripts(lhs.ndim, rhs.ndim, lhs_contracting_dimensions, rhs_contracting_dimensions,
                              lhs_batch_dimensions, rhs_batch_dimensions)
    if any(lhs.shape[d] == 0 for d in lhs_contracting_dimensions):
        # an empty sum is 0 (np.einsum may return uninitialised memory for an empty contraction)
        return _as_result(np.zeros(shape.dims, acc), shape)
    with np.errstate(all="ignore"):
        result = np.einsum(formula, lhs.astype(acc), rhs.astype(acc), optimize=acc in (np.float64, np.complex128))
    return _as_result(result, shape)


def _dot_index_map(lhs, rhs, *, shape, lhs_contracting_dimensions=(), rhs_contracting_dimensions=(),
                   lhs_batch_dimensions=(), rhs_batch_dimensions=(), **_):
    """Each result element multiplies the (lhs, rhs) pairs along the contracting dimensions."""
    lc, rc = tuple(lhs_contracting_dimensions), tuple(rhs_contracting_dimensions)
    lb, rb = tuple(lhs_batch_dimensions), tuple(rhs_batch_dimensions)
    lhs_free = [d for d in range(lhs.ndim) if d not in lc + lb]
    rhs_free = [d for d in range(rhs.ndim) if d not in rc + rb]
    contracting_sizes = [lhs.shape[d] for d in lc]

    def access(index):
        nb, nl = len(lb), len(lhs_free)
        batch_index, lhs_free_index, rhs_free_index = index[:nb], index[nb:nb + nl], index[nb + nl:]
        pairs = []
        for contracting_index in np.ndindex(*contracting_sizes):
            li, ri = [0] * lhs.ndim, [0] * rhs.ndim
            for groups, dims, target in ((batch_index, lb, li), (batch_index, rb, ri),
                                         (contracting_index, lc, li), (contracting_index, rc, ri),
                                         (lhs_free_index, lhs_free, li), (rhs_free_index, rhs_free, ri)):
                for v, d in zip(groups, dims):
                    target[d] = int(v)
            pairs.append((tuple(li), tuple(ri)))
        reads = tuple(r for li, ri in pairs for r in ((0, li), (1, ri)))
        return Access(index, reads=reads, source="operand",
                      detail={"pairs": pairs, "batch_index": batch_index,
                              "lhs_free_index": lhs_free_index, "rhs_free_index": rhs_free_index})

    return IndexMap("dot", shape.dims, access, operand_shapes=(Shape.of(lhs), Shape.of(rhs)),
                    result_shape=shape, kind="reduce", combiner="sum of products")


_PRECISION = Attr("precision_config", "raw", hlo="operand_precision", default=None)

registry.register(
    "dot", "DotGeneral", "linalg", _dot_shape_rule, _dot_reference,
    attrs=(Attr("lhs_batch_dimensions", "ints", hlo="lhs_batch_dims", default=()),
           Attr("lhs_contracting_dimensions", "ints", hlo="lhs_contracting_dims", default=()),
           Attr("rhs_batch_dimensions", "ints", hlo="rhs_batch_dims", default=()),
           Attr("rhs_contracting_dimensions", "ints", hlo="rhs_contracting_dims", default=()),
           _PRECISION),
    index_map=_dot_index_map,
    # the result type is the preferred element type (HLO writes it only in the result shape)
    attrs_from_shape=lambda shape: {"preferred_element_type": shape.element_type},
    categories=("linalg",))
describe("dot", dimension_numbers={"kind": "skip"}, precision_config={"kind": "skip"},
         preferred_element_type={"kind": "dtype"}, rhs_contracting_dimensions={"of": "rhs"},
         rhs_batch_dimensions={"of": "rhs"},
         example={"lhs": "f32[2,3]", "rhs": "f32[3,2]", "lhs_contracting_dimensions": [1],
                  "rhs_contracting_dimensions": [0]})
registry.NAMES.setdefault("Dot", "dot")


# ---------------------------------------------------------------------------------------
# Convolution  (HLO `convolution`): Conv, ConvWithGeneralPadding, ConvWithGeneralDimensions,
# ConvGeneral, ConvGeneralDilated


class ConvDimensionNumbers(NamedTuple):
    """Which dimension of lhs (input), rhs (kernel) and the output plays which role;
    the spatial lists pair up by position.  HLO writes it as ``dim_labels=b01f_01io->b01f``."""
    input_batch_dimension: int
    input_feature_dimension: int
    input_spatial_dimensions: tuple
    kernel_input_feature_dimension: int
    kernel_output_feature_dimension: int
    kernel_spatial_dimensions: tuple
    output_batch_dimension: int
    output_feature_dimension: int
    output_spatial_dimensions: tuple

    def __str__(self):
        return format_dim_labels(self)

    # the spec's orders: lhs [batch, z, spatial...], rhs [output-z, input-z, spatial...], output [batch, z, ...]
    @property
    def lhs_order(self):
        return (self.input_batch_dimension, self.input_feature_dimension, *self.input_spatial_dimensions)

    @property
    def rhs_order(self):
        return (self.kernel_output_feature_dimension, self.kernel_input_feature_dimension,
                *self.kernel_spatial_dimensions)

    @property
    def output_order(self):
        return (self.output_batch_dimension, self.output_feature_dimension, *self.output_spatial_dimensions)

    @classmethod
    def default(cls, num_spatial_dims):
        """The spec's order: lhs [batch, z, spatial...], rhs [output-z, input-z, spatial...]."""
        spatial = tuple(range(2, 2 + num_spatial_dims))
        return cls(0, 1, spatial, 1, 0, spatial, 0, 1, spatial)


def format_dim_labels(dn):
    """``ConvDimensionNumbers`` -> ``"b01f_01io->b01f"`` (spatial dimension i written as digit i)."""
    def labels(rank, roles):
        out = ["?"] * rank
        for ch, d in roles:
            out[d] = ch
        return "".join(out)
    n = len(dn.input_spatial_dimensions)
    lhs_rank, rhs_rank, out_rank = n + 2, len(dn.kernel_spatial_dimensions) + 2, len(dn.output_spatial_dimensions) + 2
    lhs = labels(lhs_rank, [("b", dn.input_batch_dimension), ("f", dn.input_feature_dimension)]
                 + [(str(i), d) for i, d in enumerate(dn.input_spatial_dimensions)])
    rhs = labels(rhs_rank, [("i", dn.kernel_input_feature_dimension), ("o", dn.kernel_output_feature_dimension)]
                 + [(str(i), d) for i, d in enumerate(dn.kernel_spatial_dimensions)])
    out = labels(out_rank, [("b", dn.output_batch_dimension), ("f", dn.output_feature_dimension)]
                 + [(str(i), d) for i, d in enumerate(dn.output_spatial_dimensions)])
    return f"{lhs}_{rhs}->{out}"


def parse_dim_labels(text):
    """``"b01f_01io->b01f"`` -> ``ConvDimensionNumbers``."""
    m = re.fullmatch(r"\s*(\w+)_(\w+)->(\w+)\s*", text)
    if not m:
        raise ValueError(f"dim_labels={text!r}: expected lhs_rhs->out, e.g. b01f_01io->b01f")

    def roles(labels, letters, what):
        found, spatial = {}, {}
        for pos, ch in enumerate(labels):
            if ch.isdigit():
                if int(ch) in spatial:
                    raise ValueError(f"dim_labels={text!r}: spatial dimension {ch} twice in {what} {labels!r}")
                spatial[int(ch)] = pos
            elif ch in letters:
                if ch in found:
                    raise ValueError(f"dim_labels={text!r}: {ch!r} twice in {what} {labels!r}")
                found[ch] = pos
            else:
                raise ValueError(f"dim_labels={text!r}: unexpected {ch!r} in {what} {labels!r} "
                                 f"(expected {' and '.join(letters)} and spatial digits)")
        missing = [ch for ch in letters if ch not in found]
        if missing or sorted(spatial) != list(range(len(spatial))):
            raise ValueError(f"dim_labels={text!r}: {what} {labels!r} needs {' and '.join(letters)} and "
                             "spatial digits 0..n-1")
        return [found[ch] for ch in letters], tuple(spatial[i] for i in range(len(spatial)))

    (b, f), in_sp = roles(m.group(1), "bf", "lhs")
    (i, o), k_sp = roles(m.group(2), "io", "rhs")
    (ob, of), out_sp = roles(m.group(3), "bf", "output")
    if not len(in_sp) == len(k_sp) == len(out_sp):
        raise ValueError(f"dim_labels={text!r}: lhs, rhs and output have different numbers of spatial dimensions")
    return ConvDimensionNumbers(b, f, in_sp, i, o, k_sp, ob, of, out_sp)


class DimLabels:
    """Attribute codec: HLO ``dim_labels=b01f_01io->b01f`` <-> ``dimension_numbers``."""

    hlo = "dim_labels"
    kws = ("dimension_numbers",)
    arg_kinds = {"dimension_numbers": "str"}  # HLO's dim_labels text, "b01f_01io->b01f"

    def parse(self, raw, resolve):
        try:
            return {"dimension_numbers": parse_dim_labels(raw)}
        except ValueError as e:
            raise HloParseError(str(e)) from None

    def missing(self):
        return None

    def coerce(self, attrs, op):
        dn = attrs.get("dimension_numbers")
        if dn is None:
            return
        if not isinstance(dn, ConvDimensionNumbers):
            raise ShapeError(f"{op}: dimension_numbers must be a ConvDimensionNumbers, got {dn!r}")
        attrs["dimension_numbers"] = ConvDimensionNumbers(*(
            as_int_list(op, f"dimension_numbers.{f}", v) if f.endswith("dimensions") else as_int(op, f"dimension_numbers.{f}", v)
            for f, v in zip(ConvDimensionNumbers._fields, dn)))

    def format(self, attrs, inst, name_of):
        dn = attrs.get("dimension_numbers")
        if dn is None:
            return None
        rank = len(inst.operands[0].shape.dims) if inst.operands else 2
        return format_dim_labels(conv_dimension_numbers(dn, rank - 2))


def conv_dimension_numbers(dimension_numbers, num_spatial_dims):
    """Accepts a ``ConvDimensionNumbers``, HLO's ``"b01f_01io->b01f"``, JAX's
    ``("NHWC", "HWIO", "NHWC")`` or None (the spec's default order)."""
    dn = dimension_numbers
    if dn is None:
        return ConvDimensionNumbers.default(num_spatial_dims)
    if isinstance(dn, ConvDimensionNumbers):
        return dn
    if isinstance(dn, str):
        return parse_dim_labels(dn)
    if isinstance(dn, dict):
        return ConvDimensionNumbers(**{k: tuple(v) if isinstance(v, (list, tuple)) else v for k, v in dn.items()})
    if len(dn) == 3 and all(isinstance(s, str) for s in dn):
        lhs_spec, rhs_spec, out_spec = dn
        # JAX's convention: spatial dimensions pair up by letter, in the kernel spec's order
        spatial = [c for c in rhs_spec if c not in "IO"]
        return ConvDimensionNumbers(
            lhs_spec.index("N"), lhs_spec.index("C"), tuple(lhs_spec.index(c) for c in spatial),
            rhs_spec.index("I"), rhs_spec.index("O"), tuple(rhs_spec.index(c) for c in spatial),
            out_spec.index("N"), out_spec.index("C"), tuple(out_spec.index(c) for c in spatial))
    if len(dn) == 9:
        return ConvDimensionNumbers(*dn)
    raise TypeError(f"dimension_numbers={dn!r}: expected a ConvDimensionNumbers, 'b01f_01io->b01f', "
                    "or ('NHWC', 'HWIO', 'NHWC')")


def make_padding(input_sizes, window_sizes, window_strides, padding):
    """XLA's MakePadding: ``"VALID"`` -> no padding; ``"SAME"`` -> pad (low, high) so that
    output size = ceil(input / stride), the odd element on the high side."""
    if not isinstance(padding, str):
        return int_tuples("ConvGeneralDilated", "padding", padding, (2,), "(low, high)")
    kind = padding.upper()
    if kind == "VALID":
        return tuple((0, 0) for _ in input_sizes)
    if kind != "SAME":
        raise ShapeError(f"padding={padding!r}: expected 'SAME', 'VALID' or a list of (low, high) pairs")
    pads = []
    for n, k, s in zip(input_sizes, window_sizes, window_strides):
        out = -(-n // s)
        needed = max(0, (out - 1) * s + k - n)
        pads.append((needed // 2, needed - needed // 2))
    return tuple(pads)


def _dilated(size, dilation):
    return 0 if size == 0 else (size - 1) * dilation + 1


def ConvGeneralDilated(lhs, rhs, window_strides, padding, lhs_dilation=None, rhs_dilation=None,
                       dimension_numbers=None, feature_group_count=1, batch_group_count=1,
                       precision_config=None, preferred_element_type=None, window_reversal=None):
    """Wraps XLA's ConvGeneralDilated: the convolution of neural networks.

    A window of the (dilated by ``rhs_dilation``) kernel slides over the base area: the
    input ``lhs`` dilated by ``lhs_dilation`` (d-1 zeros between elements) and padded by
    ``padding`` (``(low, high)`` per spatial dimension, negative crops; or ``"SAME"`` /
    ``"VALID"``), in steps of ``window_strides``.  For output ``(b, oz, o...)``::

        result[b, oz, o...] = sum_{iz, k...} padded[b, iz, o*stride + k*rhs_dilation ...]
                                             * rhs[oz, iz, k...]

    ``feature_group_count`` G splits the input features and the kernel's output features
    into G consecutive groups convolved pairwise; ``batch_group_count`` does the same with
    the input batch and the output features.  ``dimension_numbers`` says where batch,
    feature and spatial dimensions are (``"b01f_01io->b01f"``, ``("NHWC", "HWIO", "NHWC")``).

    An Inf or NaN kernel value over a padding cell or an lhs-dilation hole: XLA:CPU gives
    NaN (0 * Inf) when Eigen's patch extraction runs the convolution and skips the cell
    otherwise; the reference follows its choice, rewrites included (``ops.conv_paths``).

    >>> ConvGeneralDilated(np.ones((1, 1, 4), np.float32), np.ones((1, 1, 2), np.float32), [1], "VALID")
    array([[[2., 2., 2.]]], dtype=float32)
    """
    ls, rs = _shape_of(lhs), _shape_of(rhs)
    n = ls.rank - 2
    dn = _dimension_numbers("ConvGeneralDilated", dimension_numbers, ls.rank)
    op = "ConvGeneralDilated"
    window_strides = as_int_list(op, "window_strides", window_strides)
    lhs_dilation = as_int_list(op, "lhs_dilation", [1] * n if lhs_dilation is None else lhs_dilation)
    rhs_dilation = as_int_list(op, "rhs_dilation", [1] * n if rhs_dilation is None else rhs_dilation)
    if padding is None or not isinstance(padding, (str, list, tuple, np.ndarray)):
        raise ShapeError(f"{op}: padding must be 'SAME', 'VALID' or a list of (low, high) pairs, got {padding!r}")
    if isinstance(padding, str):
        try:
            in_sizes = [_dilated(ls.dims[d], ld) for d, ld in zip(dn.input_spatial_dimensions, lhs_dilation)]
            k_sizes = [_dilated(rs.dims[d], rd) for d, rd in zip(dn.kernel_spatial_dimensions, rhs_dilation)]
        except (IndexError, TypeError):
            raise ShapeError(f"ConvGeneralDilated: padding={padding!r} needs the spatial dimensions of lhs "
                             f"{ls} and rhs {rs} ({dn})") from None
        if len(window_strides) != len(in_sizes):
            raise ShapeError(f"ConvGeneralDilated: window_strides={list(window_strides)} must have one entry "
                             f"per spatial dimension ({len(in_sizes)})")
        padding = make_padding(in_sizes, k_sizes, window_strides, padding)
    attrs = {
        "window_strides": window_strides,
        "padding": padding,
        "lhs_dilation": lhs_dilation,
        "rhs_dilation": rhs_dilation,
        "window_reversal": [False] * n if window_reversal is None else window_reversal,
        "dimension_numbers": dn,
        "feature_group_count": feature_group_count,
        "batch_group_count": batch_group_count,
        "precision_config": _precision_text(precision_config),
        "preferred_element_type": _type_name(preferred_element_type),
    }
    return apply_op("convolution", [lhs, rhs], attrs)


def ConvGeneral(lhs, rhs, window_strides, padding, dimension_numbers=None, feature_group_count=1,
                batch_group_count=1, precision_config=None, preferred_element_type=None):
    """Wraps XLA's ConvGeneral: ConvGeneralDilated without dilations."""
    return ConvGeneralDilated(lhs, rhs, window_strides, padding, None, None, dimension_numbers,
                              feature_group_count, batch_group_count, precision_config, preferred_element_type)


def ConvWithGeneralDimensions(lhs, rhs, window_strides, padding, dimension_numbers,
                              feature_group_count=1, batch_group_count=1, precision_config=None,
                              preferred_element_type=None):
    """Wraps XLA's ConvWithGeneralDimensions: ``padding`` is ``"SAME"`` or ``"VALID"``,
    the dimension layout is ``dimension_numbers``."""
    return ConvGeneralDilated(lhs, rhs, window_strides, padding, None, None, dimension_numbers,
                              feature_group_count, batch_group_count, precision_config, preferred_element_type)


def ConvWithGeneralPadding(lhs, rhs, window_strides, padding, lhs_dilation=None, rhs_dilation=None,
                           feature_group_count=1, batch_group_count=1, precision_config=None,
                           preferred_element_type=None):
    """Wraps XLA's ConvWithGeneralPadding: lhs is [batch, z, spatial...], rhs is
    [output-z, input-z, spatial...]; ``padding`` is (low, high) per spatial dimension."""
    return ConvGeneralDilated(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation, None,
                              feature_group_count, batch_group_count, precision_config, preferred_element_type)


def Conv(lhs, rhs, window_strides, padding, feature_group_count=1, batch_group_count=1,
         precision_config=None, preferred_element_type=None):
    """Wraps XLA's Conv: as ConvWithGeneralPadding with ``padding`` ``"SAME"`` (pad with
    zeros so that, strides aside, the output has the input's spatial size) or ``"VALID"``
    (no padding).

    >>> Conv(np.ones((1, 1, 3, 3), np.float32), np.ones((1, 1, 3, 3), np.float32), [1, 1], "SAME")[0, 0]
    array([[4., 6., 4.], [6., 9., 6.], [4., 6., 4.]], dtype=float32)
    """
    return ConvGeneralDilated(lhs, rhs, window_strides, padding, None, None, None, feature_group_count,
                              batch_group_count, precision_config, preferred_element_type)


def _conv_geometry(op, lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
                   window_reversal, dimension_numbers):
    """Check the window against the spatial dimensions; return the filled-in window."""
    dn = dimension_numbers
    n = len(dn.input_spatial_dimensions)
    # conv_c1: lhs, rhs and output have rank n+2 with every dimension named once
    for what, s, dims in (("lhs", lhs, dn.lhs_order), ("rhs", rhs, dn.rhs_order)):
        if s.rank != n + 2:
            raise ShapeError(f"{op}: {what} {s} must have rank {n + 2} ({n} spatial dimensions, "
                             f"dim_labels={format_dim_labels(dn)})")
        if sorted(dims) != list(range(n + 2)):
            raise ShapeError(f"{op}: the {what} dimension numbers {list(dims)} must name each dimension of "
                             f"{s} once")
    out_dims = dn.output_order
    if len(dn.kernel_spatial_dimensions) != n or sorted(out_dims) != list(range(n + 2)):
        raise ShapeError(f"{op}: the output dimension numbers {list(out_dims)} must name each of {n + 2} "
                         "dimensions once")

    def filled(name, v, default):
        v = tuple(v) if v is not None and len(v) else tuple(default for _ in range(n))
        if len(v) != n:  # conv_c2: one window entry per spatial dimension
            raise ShapeError(f"{op}: {name}={list(v)} must have {n} entries, one per spatial dimension")
        return v

    strides = filled("window_strides", window_strides, 1)
    pads = filled("padding", padding, (0, 0))
    ld = filled("lhs_dilation", lhs_dilation, 1)
    rd = filled("rhs_dilation", rhs_dilation, 1)
    rev = filled("window_reversal", window_reversal, False)
    for i in range(n):
        if strides[i] < 1:
            raise ShapeError(f"{op}: window_strides[{i}]={strides[i]} must be positive")
        if ld[i] < 1 or rd[i] < 1:
            raise ShapeError(f"{op}: dilations must be positive (lhs_dilation[{i}]={ld[i]}, "
                             f"rhs_dilation[{i}]={rd[i]})")
        k = rhs.dims[dn.kernel_spatial_dimensions[i]]
        if k is not None and k < 1:  # XLA: a window has no non-positive dimension
            raise ShapeError(f"{op}: the kernel's spatial dimension {dn.kernel_spatial_dimensions[i]} "
                             f"has size {k} in {rhs}; window sizes must be positive")
    return strides, tuple(tuple(int(x) for x in p) for p in pads), ld, rd, tuple(bool(r) for r in rev)


def _dimension_numbers(op, dimension_numbers, rank):
    try:
        return conv_dimension_numbers(dimension_numbers, max(rank - 2, 0))
    except (TypeError, ValueError, IndexError) as e:
        raise ShapeError(f"{op}: {e}") from None


def _conv_shape_rule(lhs, rhs, *, window_strides=(), padding=(), lhs_dilation=(), rhs_dilation=(),
                     window_reversal=(), dimension_numbers=None, feature_group_count=1, batch_group_count=1,
                     precision_config=None, preferred_element_type=None):
    op = "Convolution"
    element_type = _result_type(op, lhs, rhs, preferred_element_type)
    dn = _dimension_numbers(op, dimension_numbers, lhs.rank)
    strides, pads, ld, rd, _ = _conv_geometry(
        op, lhs, rhs, window_strides=window_strides, padding=padding, lhs_dilation=lhs_dilation,
        rhs_dilation=rhs_dilation, window_reversal=window_reversal, dimension_numbers=dn)
    fgc, bgc = int(feature_group_count), int(batch_group_count)
    batch = lhs.dims[dn.input_batch_dimension]
    in_features = lhs.dims[dn.input_feature_dimension]
    k_in = rhs.dims[dn.kernel_input_feature_dimension]
    k_out = rhs.dims[dn.kernel_output_feature_dimension]
    # conv_c3: group counts are positive and at most one of them is above 1
    if fgc < 1 or bgc < 1:
        raise ShapeError(f"{op}: feature_group_count={fgc} and batch_group_count={bgc} must be positive")
    if fgc > 1 and bgc > 1:
        raise ShapeError(f"{op}: feature_group_count={fgc} and batch_group_count={bgc} cannot both be > 1")
    if None not in (in_features, k_in, k_out, batch):
        # conv_c4: input features = feature_group_count * the kernel's input features
        if in_features % fgc:
            raise ShapeError(f"{op}: the input feature dimension ({in_features} in {lhs}) must be a multiple of "
                             f"feature_group_count={fgc}")
        if in_features // fgc != k_in:
            raise ShapeError(f"{op}: the input feature dimension ({in_features} in {lhs}) divided by "
                             f"feature_group_count={fgc} must equal the kernel's input feature dimension "
                             f"({k_in} in {rhs})")
        # conv_c5: the kernel's output features split into the groups
        if k_out % fgc:
            raise ShapeError(f"{op}: the kernel's output feature dimension ({k_out} in {rhs}) must be a multiple "
                             f"of feature_group_count={fgc}")
        if k_out % bgc:
            raise ShapeError(f"{op}: the kernel's output feature dimension ({k_out} in {rhs}) must be a multiple "
                             f"of batch_group_count={bgc}")
        # conv_c6: the input batch splits into batch_group_count groups
        if batch % bgc:
            raise ShapeError(f"{op}: the input batch dimension ({batch} in {lhs}) must be a multiple of "
                             f"batch_group_count={bgc}")
    out = [None] * lhs.rank
    out[dn.output_batch_dimension] = None if batch is None else batch // bgc
    out[dn.output_feature_dimension] = k_out
    for i, (d_in, d_k, d_out) in enumerate(zip(dn.input_spatial_dimensions, dn.kernel_spatial_dimensions,
                                               dn.output_spatial_dimensions)):
        size, k = lhs.dims[d_in], rhs.dims[d_k]
        if size is None or k is None:
            continue
        padded = _dilated(size, ld[i]) + pads[i][0] + pads[i][1]
        window = _dilated(k, rd[i])
        out[d_out] = 0 if window > padded else (padded - window) // strides[i] + 1
    return Shape(element_type, out)


def _dilate_and_pad(x, axes, dilations, pads):
    """The base area: ``x`` with d-1 zeros between elements and (low, high) zeros at the
    ends of each of ``axes`` (negative padding crops)."""
    for ax, d, (lo, hi) in zip(axes, dilations, pads):
        n = x.shape[ax]
        size = max(_dilated(n, d) + lo + hi, 0)
        target = lo + np.arange(n) * d  # where element i lands in the padded dimension
        keep = (target >= 0) & (target < size)
        out_shape = list(x.shape)
        out_shape[ax] = size
        out = np.zeros(out_shape, x.dtype)
        dst = [slice(None)] * x.ndim
        src = [slice(None)] * x.ndim
        dst[ax], src[ax] = target[keep], np.nonzero(keep)[0]
        out[tuple(dst)] = x[tuple(src)]
        x = out
    return x


def conv_path_of(lhs_type, x_shape, w_shape, out_shape, result_type, strides, pads, ld, rd, rev, fgc, bgc):
    """:func:`conv_paths.conv_path` for canonical shapes ``x[B, F, spatial...]``, ``w[O, I,
    kernel...]`` and ``out[B', O, spatial...]``: which XLA:CPU algorithm (and rewrite) the
    reference copies for Inf and NaN over padding and lhs-dilation holes."""
    return conv_paths.conv_path(lhs_type, result_type, x_shape[0], x_shape[1], tuple(x_shape[2:]), w_shape[0],
                                w_shape[1], tuple(w_shape[2:]), out_shape[0], tuple(out_shape[2:]), strides, pads,
                                ld, rd, rev, fgc, bgc)


def has_nonfinite(*values):
    """Whether any float or complex value holds an Inf or NaN: where a kernel's shortcuts
    (zero padding, Winograd's transforms, which mix neighbouring values) would turn them
    into other answers than the reference's, it runs the reference instead."""
    with np.errstate(all="ignore"):
        for v in values:
            v = np.asarray(v)
            name = dtypes.from_numpy(v.dtype)
            if name in dtypes.COMPLEX and not np.isfinite(v).all():
                return True
            if name in dtypes.FLOATING and not np.isfinite(v.astype(np.float32 if v.itemsize < 4 else v.dtype)).all():
                return True
    return False


def _canonical_conv(x, w, out_sizes, strides, pads, ld, rd, groups, batch_groups, zero_cells):
    """``x[B, F, spatial...]`` (*) ``w[O, I, kernel...]`` into ``[B', O, out...]`` (window
    already reversed); padding and holes multiplied as zeros when ``zero_cells``, else skipped."""
    n = len(strides)
    result = np.zeros(out_sizes, x.dtype)
    if not (result.size and x.size and w.size):
        return result
    padded = _dilate_and_pad(x, range(2, 2 + n), ld, pads)
    # the cells of the padded, dilated base that are real elements (the others are zeros
    # multiplied by the kernel, or skipped: conv_paths)
    real = _dilate_and_pad(np.ones(x.shape[2:], np.int8), range(n), ld, pads).astype(bool)
    B, F = x.shape[:2]
    O = w.shape[0]
    # group g pairs input features (feature groups) or input batches (batch groups) of
    # group g with the kernel's output features of group g; both split major-first
    w_groups = w.reshape(groups, O // groups, *w.shape[1:])
    for kernel_index in product(*(range(k) for k in w.shape[2:])):
        window = tuple(slice(k * r, k * r + (o - 1) * s + 1, s)
                       for k, r, o, s in zip(kernel_index, rd, out_sizes[2:], strides))
        patch = padded[(slice(None), slice(None)) + window]  # [B, F, out spatial...]
        w_k = w_groups[(Ellipsis,) + tuple(kernel_index)]   # [groups, O/groups, I]
        with np.errstate(all="ignore"):
            if batch_groups:
                patch = patch.reshape(groups, B // groups, F, *patch.shape[2:])
                part = np.einsum("gbi...,goi->bgo...", patch, w_k)
            else:
                patch = patch.reshape(B, groups, F // groups, *patch.shape[2:])
                part = np.einsum("bgi...,goi->bgo...", patch, w_k)
            part = part.reshape(result.shape)
            if not zero_cells:   # padding and holes contribute nothing (not 0 * w: no NaN from Inf)
                part = np.where(real[window], part, part.dtype.type(0))
            result += part
    return result


def _conv_reference(lhs, rhs, *, shape, window_strides=(), padding=(), lhs_dilation=(), rhs_dilation=(),
                    window_reversal=(), dimension_numbers=None, feature_group_count=1, batch_group_count=1, **_):
    dn = _dimension_numbers("Convolution", dimension_numbers, lhs.ndim)
    strides, pads, ld, rd, rev = _conv_geometry(
        "Convolution", Shape.of(lhs), Shape.of(rhs), window_strides=window_strides, padding=padding,
        lhs_dilation=lhs_dilation, rhs_dilation=rhs_dilation, window_reversal=window_reversal,
        dimension_numbers=dn)
    n = len(strides)
    acc = _compute_dtype(shape.element_type)
    fgc, bgc = int(feature_group_count), int(batch_group_count)
    # canonical layouts: x[batch, feature, spatial...], w[out_feature, in_feature, spatial...]
    x = np.transpose(lhs, dn.lhs_order).astype(acc)
    w = np.transpose(rhs, dn.rhs_order).astype(acc)
    w = np.flip(w, axis=tuple(2 + i for i in range(n) if rev[i]))
    out_perm = dn.output_order
    out_sizes = tuple(shape.dims[d] for d in out_perm)  # [batch, out_feature, spatial...]
    path = conv_path_of(dtypes.from_numpy(np.asarray(lhs).dtype), x.shape, w.shape, out_sizes, shape.element_type,
                        strides, pads, ld, rd, rev, fgc, bgc)
    if path.rewrite == "batch-group-dimension":
        # XLA's ConvolutionGroupConverter: the batch group as a spatial dimension of size G,
        # dilated by G (window G, stride G - 1): other groups' kernel values meet holes
        G, (B, F), (O, I) = bgc, x.shape[:2], w.shape[:2]
        xg = np.moveaxis(x.reshape(G, B // G, F, *x.shape[2:]), 0, -1)
        wg = np.moveaxis(w.reshape(G, O // G, I, *w.shape[2:]), 0, -1)
        r = _canonical_conv(xg, wg, (out_sizes[0], O // G) + out_sizes[2:] + (G,), strides + (G - 1,),
                            pads + ((0, 0),), ld + (G,), rd + (1,), 1, False, path.zero_cells)
        result = np.moveaxis(r, -1, 1).reshape(out_sizes)
    elif path.rewrite == "feature-group-mask":
        # ConvolutionGroupConverter for one input feature per group: the kernel widened to
        # every input feature, zeros outside the group (an Inf input times that zero is NaN)
        O, F = w.shape[0], x.shape[1]
        wide = np.zeros((O, F) + w.shape[2:], w.dtype)
        wide[np.arange(O), np.arange(O) // (O // fgc)] = w[:, 0]
        result = _canonical_conv(x, wide, out_sizes, strides, pads, ld, rd, 1, False, path.zero_cells)
    else:
        result = _canonical_conv(x, w, out_sizes, strides, pads, ld, rd, max(fgc, bgc), bgc > 1, path.zero_cells)
    return _as_result(np.transpose(result, np.argsort(out_perm)), shape)


def _conv_index_map(lhs, rhs, *, shape, window_strides=(), padding=(), lhs_dilation=(), rhs_dilation=(),
                    window_reversal=(), dimension_numbers=None, feature_group_count=1, batch_group_count=1, **_):
    """Per result element, the (lhs, rhs) element pairs it multiplies; window positions that
    fall in padding or between dilated elements contribute nothing and are left out."""
    dn = _dimension_numbers("Convolution", dimension_numbers, lhs.ndim)
    strides, pads, ld, rd, rev = _conv_geometry(
        "Convolution", Shape.of(lhs), Shape.of(rhs), window_strides=window_strides, padding=padding,
        lhs_dilation=lhs_dilation, rhs_dilation=rhs_dilation, window_reversal=window_reversal,
        dimension_numbers=dn)
    B = lhs.shape[dn.input_batch_dimension]
    I = rhs.shape[dn.kernel_input_feature_dimension]
    O = rhs.shape[dn.kernel_output_feature_dimension]
    in_sizes = [lhs.shape[d] for d in dn.input_spatial_dimensions]
    k_sizes = [rhs.shape[d] for d in dn.kernel_spatial_dimensions]
    groups = max(feature_group_count, batch_group_count)

    def access(index):
        b, oz = index[dn.output_batch_dimension], index[dn.output_feature_dimension]
        out_pos = [index[d] for d in dn.output_spatial_dimensions]
        group = oz // (O // groups)
        batch = group * (B // groups) + b if batch_group_count > 1 else b
        pairs, skipped = [], 0
        for kernel_index in product(*(range(k) for k in k_sizes)):
            spatial = []
            for i, k in enumerate(kernel_index):
                dilated_pos = out_pos[i] * strides[i] + k * rd[i] - pads[i][0]
                if dilated_pos % ld[i] or not 0 <= dilated_pos // ld[i] < in_sizes[i]:
                    break  # padding or a hole of lhs dilation
                spatial.append(dilated_pos // ld[i])
            else:
                kernel_pos = [k_sizes[i] - 1 - k if rev[i] else k for i, k in enumerate(kernel_index)]
                for iz in range(I):
                    feature = group * I + iz if feature_group_count > 1 else iz
                    li, ri = [0] * lhs.ndim, [0] * rhs.ndim
                    li[dn.input_batch_dimension], li[dn.input_feature_dimension] = batch, feature
                    ri[dn.kernel_output_feature_dimension], ri[dn.kernel_input_feature_dimension] = oz, iz
                    for d, v in zip(dn.input_spatial_dimensions, spatial):
                        li[d] = v
                    for d, v in zip(dn.kernel_spatial_dimensions, kernel_pos):
                        ri[d] = v
                    pairs.append((tuple(li), tuple(ri)))
                continue
            skipped += 1
        reads = tuple(r for li, ri in pairs for r in ((0, li), (1, ri)))
        return Access(index, reads=reads, source="operand" if pairs else "padding",
                      detail={"pairs": pairs, "group": group, "input_batch": batch,
                              "window_positions_in_padding": skipped})

    return IndexMap("convolution", shape.dims, access, operand_shapes=(Shape.of(lhs), Shape.of(rhs)),
                    result_shape=shape, kind="reduce", combiner="sum of products")


def _conv_window_size(inst):
    dn = inst.attrs["dimension_numbers"]
    return [inst.operands[1].shape.dims[d] for d in dn.kernel_spatial_dimensions]


registry.register(
    "convolution", "ConvGeneralDilated", "linalg", _conv_shape_rule, _conv_reference,
    attrs=(Window({"stride": "window_strides", "pad": "padding", "lhs_dilate": "lhs_dilation",
                   "rhs_dilate": "rhs_dilation", "rhs_reversal": "window_reversal"},
                  size_from=_conv_window_size),
           DimLabels(),
           Attr("feature_group_count", "int", default=1),
           Attr("batch_group_count", "int", default=1),
           _PRECISION),
    index_map=_conv_index_map,
    attrs_from_shape=lambda shape: {"preferred_element_type": shape.element_type},
    categories=("linalg",))
describe("convolution", window_strides={"drop": 2}, padding={"drop": 2}, lhs_dilation={"drop": 2},
         rhs_dilation={"drop": 2}, window_reversal={"drop": 2}, precision_config={"kind": "skip"},
         preferred_element_type={"kind": "dtype"},
         example={"lhs": "f32[1,1,4,4]", "rhs": ("f32[1,1,3,3]", 1), "window_strides": [1, 1],
                  "padding": [(1, 1), (1, 1)]})
for _name in ("Conv", "ConvWithGeneralPadding", "ConvWithGeneralDimensions", "ConvGeneral"):
    registry.NAMES.setdefault(_name, "convolution")


# ---------------------------------------------------------------------------------------
# Fft  (HLO `fft`)

FFT_TYPES = ("FFT", "IFFT", "RFFT", "IRFFT")


def Fft(operand, fft_type, fft_length):
    """Wraps XLA's Fft: the discrete Fourier transform over the ``len(fft_length)`` (1 to
    3) innermost dimensions.  ``FFT`` / ``IFFT``: complex to complex, forward / inverse
    (1/N-scaled); ``RFFT``: real to complex, the innermost dimension shrinks to
    ``fft_length[-1] // 2 + 1`` (the conjugate-symmetric half is dropped); ``IRFFT``:
    complex to real, the innermost dimension grows back to ``fft_length[-1]``.

    >>> Fft(np.array([1, 0, 0, 0], np.complex64), "FFT", [4])
    array([1.+0.j, 1.+0.j, 1.+0.j, 1.+0.j], dtype=complex64)
    """
    return apply_op("fft", [operand], {"fft_type": fft_type, "fft_length": fft_length})


def _fft_shape_rule(operand, *, fft_type, fft_length):
    op = "Fft"
    fft_length = tuple(fft_length)
    k = len(fft_length)
    if fft_type not in FFT_TYPES:
        raise ShapeError(f"{op}: fft_type={fft_type!r} must be one of {', '.join(FFT_TYPES)}")
    if not 1 <= k <= 3:  # fft_c1: 1 to 3 transformed dimensions
        raise ShapeError(f"{op}: fft_length={list(fft_length)} must have 1 to 3 entries")
    if not operand.is_array or operand.rank < k:  # fft_c2
        raise ShapeError(f"{op}: the operand {operand} must have rank >= len(fft_length) = {k}")
    if any(n < 0 for n in fft_length):
        raise ShapeError(f"{op}: fft_length={list(fft_length)} has a negative length")
    inner = operand.dims[-k:]
    t = operand.element_type
    if fft_type in ("FFT", "IFFT"):
        if t not in dtypes.COMPLEX:  # fft_c3
            raise ShapeError(f"{op}: {fft_type} needs a complex operand, got {operand}")
        if any(d is not None and d != n for d, n in zip(inner, fft_length)):
            # XLA's shape inference does not check this, its backends assume it
            raise ShapeError(f"{op}: {fft_type} transforms the innermost dimensions {list(inner)} of {operand}; "
                             f"fft_length={list(fft_length)} must equal them")
        return operand
    if fft_type == "RFFT":
        if t not in ("f32", "f64"):  # fft_c4
            raise ShapeError(f"{op}: RFFT needs an f32 or f64 operand, got {operand}")
        if any(d is not None and d != n for d, n in zip(inner, fft_length)):
            raise ShapeError(f"{op}: RFFT needs the innermost dimensions of {operand} to equal fft_length="
                             f"{list(fft_length)}")
        dims = list(operand.dims)
        if fft_length[-1] != 0:
            dims[-1] = fft_length[-1] // 2 + 1
        return Shape("c64" if t == "f32" else "c128", dims)
    if t not in dtypes.COMPLEX:  # IRFFT, fft_c5
        raise ShapeError(f"{op}: IRFFT needs a complex operand, got {operand}")
    if any(d is not None and d != n for d, n in zip(inner[:-1], fft_length[:-1])):
        raise ShapeError(f"{op}: IRFFT needs all but the innermost of the last {k} dimensions of {operand} to "
                         f"equal fft_length={list(fft_length)}")
    last = inner[-1]
    if last is not None and (last != 0 or fft_length[-1] != 0) and last != fft_length[-1] // 2 + 1:
        raise ShapeError(f"{op}: IRFFT needs the innermost dimension of {operand} to be fft_length[-1] // 2 + 1 "
                         f"= {fft_length[-1] // 2 + 1}")
    dims = list(operand.dims)
    dims[-1] = fft_length[-1]
    return Shape(dtypes.complex_component(t), dims)


def fft_nd(x, fft_type, fft_length):
    """The FFT of kind ``fft_type`` over the last ``len(fft_length)`` dimensions of ``x``
    (shared with the CPU kernel, which keeps c64 in single precision)."""
    axes = tuple(range(x.ndim - len(fft_length), x.ndim))
    if fft_type == "FFT":
        return np.fft.fftn(x, axes=axes)
    if fft_type == "IFFT":
        return np.fft.ifftn(x, axes=axes)
    if fft_type == "RFFT":
        return np.fft.rfftn(x, s=fft_length, axes=axes)
    return np.fft.irfftn(x, s=fft_length, axes=axes)


def _fft_reference(operand, *, shape, fft_type, fft_length):
    if 0 in shape.dims or 0 in operand.shape:
        return np.zeros(shape.dims, shape.dtype)
    x = operand.astype(np.complex128 if fft_type != "RFFT" else np.float64)
    return fft_nd(x, fft_type, fft_length).astype(shape.dtype)


registry.register("fft", "Fft", "linalg", _fft_shape_rule, _fft_reference,
                  attrs=(Attr("fft_type", "str", choices=FFT_TYPES), Attr("fft_length", "ints")),
                  categories=("linalg",))
describe("fft", example={"operand": "c64[4]", "fft_type": "FFT", "fft_length": [4]})


# ---------------------------------------------------------------------------------------
# Cholesky  (HLO `cholesky`)


def Cholesky(a, lower=True):
    """Wraps XLA's Cholesky: for symmetric (Hermitian) positive definite matrices,
    ``l`` lower triangular with ``a = l @ l^H`` (``lower``), else ``u`` upper with
    ``a = u^H @ u``.  Only that triangle of ``a`` is read; leading dimensions are batch.

    XLA leaves the other triangle implementation-defined: XLA:CPU (the CholeskyExpander)
    writes zeros there, and a matrix that is not positive definite comes back all NaN,
    which is what this reference does.

    >>> Cholesky(np.array([[4., 2], [2, 5]], np.float32))
    array([[2., 0.], [1., 2.]], dtype=float32)
    """
    return apply_op("cholesky", [a], {"lower": lower})


def _square_batch_rule(op, what, s):
    if not s.is_array or s.element_type not in dtypes.FLOATING | dtypes.COMPLEX:
        raise ShapeError(f"{op}: {what} must be an array of a floating or complex type, got {s}")
    if s.rank < 2:
        raise ShapeError(f"{op}: {what} must have rank >= 2 (a batch of matrices), got {s}")


def _cholesky_shape_rule(a, *, lower=False):
    _square_batch_rule("Cholesky", "a", a)  # cholesky_c1
    if None not in a.dims[-2:] and a.dims[-1] != a.dims[-2]:  # cholesky_c2: square matrices
        raise ShapeError(f"Cholesky: a must be a batch of square matrices, got {a}")
    return a


def _cholesky_lower(a):
    """Cholesky-Crout on the lower triangle of ``a`` (batched, float64/complex128).

    Returns ``(l, pivots)``: ``l`` with zeros above the diagonal and ``pivots[..., j]``
    the value whose square root is ``l[..., j, j]`` (not positive: not positive definite).
    """
    n = a.shape[-1]
    l = np.zeros_like(a)
    pivots = np.zeros(a.shape[:-1], a.dtype)
    with np.errstate(all="ignore"):
        for j in range(n):
            row = l[..., j, :j]
            pivot = a[..., j, j] - np.sum(row * np.conj(row), axis=-1)
            pivots[..., j] = pivot
            l_jj = np.sqrt(pivot.real) if np.iscomplexobj(a) else np.sqrt(pivot)
            l[..., j, j] = l_jj
            below = a[..., j + 1:, j]
            if j:  # (np.einsum of an empty contraction may return uninitialised memory)
                below = below - np.einsum("...ik,...k->...i", l[..., j + 1:, :j], np.conj(row))
            l[..., j + 1:, j] = below / l_jj[..., None]
    return l, pivots


def _cholesky_reference(a, *, shape, lower=False):
    x = a.astype(_compute_dtype(shape.element_type))
    if not lower:  # XLA transposes (no conjugate), factors the lower triangle, transposes back
        x = np.swapaxes(x, -1, -2)
    l, _ = _cholesky_lower(x)
    # XLA:CPU: a NaN square root anywhere (not positive definite) makes the whole matrix NaN
    failed = np.isnan(np.diagonal(l, axis1=-2, axis2=-1).real).any(axis=-1)
    l[failed] = np.nan
    if not lower:
        l = np.swapaxes(l, -1, -2)
    return l.astype(shape.dtype)


registry.register("cholesky", "Cholesky", "linalg", _cholesky_shape_rule, _cholesky_reference,
                  attrs=(Attr("lower", "bool", default=False),), categories=("linalg",))
describe("cholesky", example={"a": ("f32[3,3]", [[4, 2, 0], [2, 5, 1], [0, 1, 3]]), "lower": True})


# ---------------------------------------------------------------------------------------
# TriangularSolve  (HLO `triangular-solve`)

TRANSPOSE_KINDS = ("NO_TRANSPOSE", "TRANSPOSE", "ADJOINT")


def TriangularSolve(a, b, left_side=True, lower=True, unit_diagonal=False, transpose_a="NO_TRANSPOSE"):
    """Wraps XLA's TriangularSolve: solves ``op(a) @ x = b`` (``left_side``) or
    ``x @ op(a) = b`` for ``x``, ``a`` lower (``lower``) or upper triangular, ``op(a)`` =
    ``a``, ``a^T`` or ``a^H`` (``transpose_a`` = ``NO_TRANSPOSE``, ``TRANSPOSE``,
    ``ADJOINT``).  Only that triangle of ``a`` is read, and with ``unit_diagonal`` not even
    its diagonal (taken as ones).  Leading dimensions are batch dimensions.

    >>> TriangularSolve(np.array([[2., 0], [1, 1]], np.float32), np.array([[2.], [3]], np.float32))
    array([[1.], [2.]], dtype=float32)
    """
    if isinstance(transpose_a, bool):
        transpose_a = "TRANSPOSE" if transpose_a else "NO_TRANSPOSE"
    return apply_op("triangular-solve", [a, b], {"left_side": left_side, "lower": lower,
                                                  "unit_diagonal": unit_diagonal, "transpose_a": transpose_a})


def _triangular_solve_shape_rule(a, b, *, left_side=False, lower=False, unit_diagonal=False,
                                 transpose_a="NO_TRANSPOSE"):
    op = "TriangularSolve"
    _square_batch_rule(op, "a", a)  # triangular_solve_c1
    _square_batch_rule(op, "b", b)
    if a.element_type != b.element_type:
        raise ShapeError(f"{op}: a and b must have the same element type, got {a} and {b}")
    if a.rank != b.rank:  # triangular_solve_c2: the same batch dimensions
        raise ShapeError(f"{op}: a {a} and b {b} must have the same rank")
    if a.dims[:-2] != b.dims[:-2]:
        raise ShapeError(f"{op}: a {a} and b {b} must have the same batch dimensions")
    if None not in a.dims[-2:] and a.dims[-1] != a.dims[-2]:  # triangular_solve_c3
        raise ShapeError(f"{op}: a must be a batch of square matrices, got {a}")
    m, side = (b.dims[-2], "b's second-to-last") if left_side else (b.dims[-1], "b's last")
    if None not in (m, a.dims[-1]) and m != a.dims[-1]:  # triangular_solve_c4
        raise ShapeError(f"{op}: with left_side={left_side}, {side} dimension ({m} in {b}) must equal the "
                         f"size of a ({a.dims[-1]} in {a})")
    if transpose_a not in TRANSPOSE_KINDS:
        raise ShapeError(f"{op}: transpose_a={transpose_a!r} must be one of {', '.join(TRANSPOSE_KINDS)}")
    return b


def _substitute(m, b, lower):
    """Solve ``m @ x = b`` for triangular ``m`` (batched): forward or back substitution."""
    n = m.shape[-1]
    x = np.zeros(np.broadcast_shapes(m.shape[:-2], b.shape[:-2]) + b.shape[-2:], np.result_type(m, b))
    with np.errstate(all="ignore"):
        for i in (range(n) if lower else reversed(range(n))):
            solved = slice(0, i) if lower else slice(i + 1, n)
            rest = 0
            if (i if lower else n - 1 - i):  # (np.einsum of an empty contraction may return garbage)
                rest = np.einsum("...k,...kj->...j", m[..., i, solved], x[..., solved, :])
            x[..., i, :] = (b[..., i, :] - rest) / m[..., i, i][..., None]
    return x


def solve_triangular(a, b, *, left_side, lower, unit_diagonal, transpose_a):
    """The solution of TriangularSolve, computed in ``a``'s dtype (the references' core)."""
    n = a.shape[-1]
    tri = np.tril(a) if lower else np.triu(a)  # only this triangle of a is read
    if unit_diagonal:
        tri = tri.copy()
        tri[..., np.arange(n), np.arange(n)] = 1
    op_a, op_lower = tri, lower
    if transpose_a != "NO_TRANSPOSE":
        op_a, op_lower = np.swapaxes(tri, -1, -2), not lower
        if transpose_a == "ADJOINT":
            op_a = np.conj(op_a)
    if left_side:
        return _substitute(op_a, b, op_lower)
    # x @ op(a) = b  <=>  op(a)^T @ x^T = b^T
    xt = _substitute(np.swapaxes(op_a, -1, -2), np.swapaxes(b, -1, -2), not op_lower)
    return np.swapaxes(xt, -1, -2)


def _triangular_solve_reference(a, b, *, shape, left_side=False, lower=False, unit_diagonal=False,
                                transpose_a="NO_TRANSPOSE"):
    acc = _compute_dtype(shape.element_type)
    x = solve_triangular(a.astype(acc), b.astype(acc), left_side=left_side, lower=lower,
                         unit_diagonal=unit_diagonal, transpose_a=transpose_a)
    return x.astype(shape.dtype)


registry.register(
    "triangular-solve", "TriangularSolve", "linalg", _triangular_solve_shape_rule, _triangular_solve_reference,
    attrs=(Attr("left_side", "bool", default=False), Attr("lower", "bool", default=False),
           Attr("unit_diagonal", "bool", default=False),
           Attr("transpose_a", "str", default="NO_TRANSPOSE", always_print=True, choices=TRANSPOSE_KINDS)),
    categories=("linalg",))
describe("triangular-solve", example={"a": ("f32[3,3]", [[2, 0, 0], [1, 3, 0], [0, 1, 4]]), "b": "f32[3,2]",
                                     "left_side": True, "lower": True})


# ---------------------------------------------------------------------------------------
# BatchNormTraining, BatchNormInference, BatchNormGrad


def BatchNormTraining(operand, scale, offset, epsilon, feature_index):
    """Wraps XLA's BatchNormTraining: per feature ``l`` (dimension ``feature_index``),
    the mean ``mu_l`` and (biased) variance ``sigma2_l`` over all other dimensions, and
    ``y = scale_l * (x - mu_l) / sqrt(sigma2_l + epsilon) + offset_l``.
    Returns the tuple ``(output, batch_mean, batch_var)``.
    """
    return apply_op("batch-norm-training", [operand, scale, offset],
                    {"epsilon": epsilon, "feature_index": feature_index})


def BatchNormInference(operand, scale, offset, mean, variance, epsilon, feature_index):
    """Wraps XLA's BatchNormInference: BatchNormTraining's normalisation with the given
    ``mean`` and ``variance`` instead of the batch's: ``scale * (x - mean) /
    sqrt(variance + epsilon) + offset`` per feature; the result has ``operand``'s shape."""
    return apply_op("batch-norm-inference", [operand, scale, offset, mean, variance],
                    {"epsilon": epsilon, "feature_index": feature_index})


def BatchNormGrad(operand, scale, mean, variance, grad_output, epsilon, feature_index):
    """Wraps XLA's BatchNormGrad: the gradients of batch norm with respect to ``operand``,
    ``scale`` and ``offset``, per feature ``l`` (sums over all other dimensions, N of them)::

        c_l = mean(grad_output * (x - mean_l)) / (variance_l + epsilon)
        grad_operand = scale_l / sqrt(variance_l + epsilon)
                       * (grad_output - mean(grad_output) - c_l * (x - mean_l))
        grad_scale_l = sum(grad_output * (x - mean_l) / sqrt(variance_l + epsilon))
        grad_offset_l = sum(grad_output)

    Returns the tuple ``(grad_operand, grad_scale, grad_offset)``.
    """
    return apply_op("batch-norm-grad", [operand, scale, mean, variance, grad_output],
                    {"epsilon": epsilon, "feature_index": feature_index})


def _batch_norm_rule(op, operand, feature_index, vectors, same_shape=()):
    if not operand.is_array or operand.element_type not in dtypes.FLOATING:  # batch_norm_c1
        raise ShapeError(f"{op}: operand must be an array of a floating type, got {operand}")
    if not 0 <= feature_index < operand.rank:  # batch_norm_c2
        raise ShapeError(f"{op}: feature_index={feature_index} is out of range for operand {operand} "
                         f"(rank {operand.rank})")
    features = operand.dims[feature_index]
    for name, s in vectors:  # batch_norm_c3: one value per feature, of the operand's type
        if not s.is_array or s.rank != 1:
            raise ShapeError(f"{op}: {name} must be a vector (rank 1), got {s}")
        if s.element_type != operand.element_type:
            raise ShapeError(f"{op}: {name} {s} must have the operand's element type ({operand})")
        if None not in (s.dims[0], features) and s.dims[0] != features:
            raise ShapeError(f"{op}: {name} {s} must have one element per feature: dimension "
                             f"{feature_index} of {operand} has size {features}")
    for name, s in same_shape:
        if s != operand:
            raise ShapeError(f"{op}: {name} {s} must have the operand's shape {operand}")
    return Shape(operand.element_type, (features,))


def _bn_training_shape_rule(operand, scale, offset, *, epsilon, feature_index):
    vec = _batch_norm_rule("BatchNormTraining", operand, feature_index, (("scale", scale), ("offset", offset)))
    return Shape.tuple([operand, vec, vec])


def _bn_inference_shape_rule(operand, scale, offset, mean, variance, *, epsilon, feature_index):
    _batch_norm_rule("BatchNormInference", operand, feature_index,
                     (("scale", scale), ("offset", offset), ("mean", mean), ("variance", variance)))
    return operand


def _bn_grad_shape_rule(operand, scale, mean, variance, grad_output, *, epsilon, feature_index):
    vec = _batch_norm_rule("BatchNormGrad", operand, feature_index,
                           (("scale", scale), ("mean", mean), ("variance", variance)),
                           (("grad_output", grad_output),))
    return Shape.tuple([operand, vec, vec])


def _per_feature(v, ndim, feature_index):
    """A per-feature vector shaped to broadcast along ``feature_index``."""
    shape = [1] * ndim
    shape[feature_index] = -1
    return v.astype(np.float64).reshape(shape)


def _bn_training_reference(operand, scale, offset, *, shape, epsilon, feature_index):
    x = operand.astype(np.float64)
    other = tuple(d for d in range(x.ndim) if d != feature_index)
    mean = x.mean(axis=other, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=other, keepdims=True)
    with np.errstate(all="ignore"):
        y = (_per_feature(scale, x.ndim, feature_index) * (x - mean) / np.sqrt(var + epsilon)
             + _per_feature(offset, x.ndim, feature_index))
    t = shape.tuple_shapes[0].dtype
    return y.astype(t), mean.reshape(-1).astype(t), var.reshape(-1).astype(t)


def _bn_inference_reference(operand, scale, offset, mean, variance, *, shape, epsilon, feature_index):
    x = operand.astype(np.float64)
    f = lambda v: _per_feature(v, x.ndim, feature_index)  # noqa: E731
    with np.errstate(all="ignore"):
        y = f(scale) * (x - f(mean)) / np.sqrt(f(variance) + epsilon) + f(offset)
    return y.astype(shape.dtype)


def _bn_grad_reference(operand, scale, mean, variance, grad_output, *, shape, epsilon, feature_index):
    x, dy = operand.astype(np.float64), grad_output.astype(np.float64)
    f = lambda v: _per_feature(v, x.ndim, feature_index)  # noqa: E731
    other = tuple(d for d in range(x.ndim) if d != feature_index)
    centered = x - f(mean)
    with np.errstate(all="ignore"):
        c = (dy * centered).mean(axis=other, keepdims=True) / (f(variance) + epsilon)
        grad_operand = f(scale) / np.sqrt(f(variance) + epsilon) * (
            dy - dy.mean(axis=other, keepdims=True) - c * centered)
        grad_scale = (dy * centered / np.sqrt(f(variance) + epsilon)).sum(axis=other)
    grad_offset = dy.sum(axis=other)
    t = shape.tuple_shapes[0].dtype
    return grad_operand.astype(t), grad_scale.astype(t), grad_offset.astype(t)


_BN_ATTRS = (Attr("epsilon", "float"), Attr("feature_index", "int"))
registry.register("batch-norm-training", "BatchNormTraining", "linalg", _bn_training_shape_rule,
                  _bn_training_reference, attrs=_BN_ATTRS, categories=("linalg",))
describe("batch-norm-training", feature_index={"kind": "dim"},
         example={"operand": {"shape": "f32[2,3]", "source": "random"}, "scale": ("f32[3]", 1), "offset": ("f32[3]", 0),
                  "epsilon": 0.001, "feature_index": 1})
registry.register("batch-norm-inference", "BatchNormInference", "linalg", _bn_inference_shape_rule,
                  _bn_inference_reference, attrs=_BN_ATTRS, categories=("linalg",))
describe("batch-norm-inference", feature_index={"kind": "dim"},
         example={"operand": {"shape": "f32[2,3]", "source": "random"}, "scale": ("f32[3]", 1), "offset": ("f32[3]", 0),
                  "mean": ("f32[3]", 0), "variance": ("f32[3]", 1), "epsilon": 0.001, "feature_index": 1})
registry.register("batch-norm-grad", "BatchNormGrad", "linalg", _bn_grad_shape_rule, _bn_grad_reference,
                  attrs=_BN_ATTRS, categories=("linalg",))
describe("batch-norm-grad", feature_index={"kind": "dim"},
         example={"operand": {"shape": "f32[2,3]", "source": "random"}, "scale": ("f32[3]", 1), "mean": ("f32[3]", 0),
                  "variance": ("f32[3]", 1), "grad_output": ("f32[2,3]", 1), "epsilon": 0.001, "feature_index": 1})


# ---------------------------------------------------------------------------------------
# LAPACK custom-calls: what jnp.linalg lowers to on CPU (``lapack_<t><routine>_ffi``,
# t = s, d, c, z).  Matrices are the last two dimensions, leading ones are batch (HLO
# operand layouts such as {0,1} do not change the logical values).  Options arrive in
# ``backend_config={uplo = 76 : ui8, ...}`` as ASCII codes of LAPACK's letters.


def lapack_options(backend_config):
    """``{diag = 78 : ui8, side = 76 : ui8}`` -> ``{"diag": "N", "side": "L"}``."""
    out = {}
    for key, value in re.findall(r"(\w+)\s*=\s*(-?\d+)\s*:\s*\w+", backend_config or ""):
        out[key] = chr(int(value))
    return out


def _lapack_input(x):
    return x.astype(np.complex128 if np.iscomplexobj(x) else np.float64)


def _potrf(a, *, shape, backend_config=None, **_):
    """?potrf: (a) -> (factor, info).  The factor is in the ``uplo`` triangle; LAPACK
    leaves the other triangle as it was (the input's values).  ``info`` is 0, or j+1 for
    the first column j whose pivot is not positive (that matrix is then not factored:
    JAX replaces it with NaN)."""
    uplo = lapack_options(backend_config).get("uplo", "L")
    x = _lapack_input(a)
    lower_data = x if uplo == "L" else np.conj(np.swapaxes(x, -1, -2))
    l, pivots = _cholesky_lower(lower_data)
    bad = ~(pivots.real > 0)
    info = np.where(bad.any(axis=-1), bad.argmax(axis=-1) + 1, 0).astype(np.int32)
    factor = l if uplo == "L" else np.conj(np.swapaxes(l, -1, -2))
    keep_other = np.triu(np.ones(x.shape[-2:], bool), 1) if uplo == "L" else np.tril(np.ones(x.shape[-2:], bool), -1)
    factor = np.where(keep_other, x, factor)
    return factor.astype(shape.tuple_shapes[0].dtype), info.reshape(shape.tuple_shapes[1].dims)


_TRANS = {"N": "NO_TRANSPOSE", "T": "TRANSPOSE", "C": "ADJOINT"}


def _trsm(a, b, *, shape, backend_config=None, **_):
    """?trsm: (a, b) -> x with op(a) @ x = b (side L) or x @ op(a) = b (side R)."""
    o = lapack_options(backend_config)
    x = solve_triangular(_lapack_input(a), _lapack_input(b), left_side=o.get("side", "L") == "L",
                         lower=o.get("uplo", "L") == "L", unit_diagonal=o.get("diag", "N") == "U",
                         transpose_a=_TRANS[o.get("trans_x", "N")])
    return x.astype(shape.dtype)


def _abs1(x):
    """LAPACK's pivot size: |x| for reals, |re| + |im| for complex (i?amax)."""
    return np.abs(x.real) + np.abs(x.imag) if np.iscomplexobj(x) else np.abs(x)


def _getrf(a, *, shape, **_):
    """?getrf: (a) -> (lu, ipiv, info): a = p @ l @ u with partial pivoting; ``lu`` holds
    u and the unit lower l below the diagonal, ``ipiv`` the 1-based row swapped with row i
    at step i, ``info`` j+1 for the first exactly zero pivot (0 if none)."""
    lu = _lapack_input(a).copy()
    m, n = lu.shape[-2:]
    k = min(m, n)
    batch = lu.shape[:-2]
    ipiv = np.zeros(batch + (k,), np.int32)
    info = np.zeros(batch, np.int32)
    rows = np.arange(m)
    with np.errstate(all="ignore"):
        for j in range(k):
            p = j + np.argmax(_abs1(lu[..., j:, j]), axis=-1)  # the first largest entry
            ipiv[..., j] = p + 1
            # swap rows j and p of every matrix of the batch
            perm = np.broadcast_to(rows, batch + (m,)).copy()
            perm[..., j] = p
            np.put_along_axis(perm, p[..., None], j, axis=-1)
            lu = np.take_along_axis(lu, perm[..., :, None], axis=-2)
            pivot = lu[..., j, j]
            zero = pivot == 0
            info = np.where(zero & (info == 0), j + 1, info).astype(np.int32)
            scale = np.where(zero, 0, 1 / np.where(zero, 1, pivot))
            lu[..., j + 1:, j] *= scale[..., None]
            lu[..., j + 1:, j + 1:] -= lu[..., j + 1:, j, None] * lu[..., j, None, j + 1:]
    t = shape.tuple_shapes
    return lu.astype(t[0].dtype), ipiv.reshape(t[1].dims), info.reshape(t[2].dims)


def _householder(alpha, x):
    """LAPACK's ?larfg, batched: (beta, tau, v) with (I - tau v v^H)^H [alpha; x] = [beta; 0],
    v = [1; v_rest] and beta real; tau = 0 (H = I) when x is zero and alpha real."""
    xnorm = np.sqrt(np.sum(np.abs(x) ** 2, axis=-1))
    alphr, alphi = alpha.real, alpha.imag
    identity = (xnorm == 0) & (alphi == 0)
    norm = np.sqrt(alphr ** 2 + alphi ** 2 + xnorm ** 2)
    beta = -np.copysign(norm, alphr)
    with np.errstate(all="ignore"):
        tau = (beta - alphr) / beta - 1j * alphi / beta if np.iscomplexobj(alpha) else (beta - alpha) / beta
        v = x / (alpha - beta)[..., None]
    tau = np.where(identity, 0, tau)
    beta = np.where(identity, alphr, beta)
    v = np.where(identity[..., None], x, v)
    return beta, tau, v


def _geqrf(a, *, shape, **_):
    """?geqrf: (a) -> (a_out, tau): Householder QR.  ``a_out`` holds r on and above the
    diagonal and the reflectors' vectors v_i (v_i[i] = 1 implied) below; a = q r with
    q = H_1 ... H_k, H_i = I - tau_i v_i v_i^H."""
    x = _lapack_input(a).copy()
    m, n = x.shape[-2:]
    k = min(m, n)
    taus = np.zeros(x.shape[:-2] + (k,), x.dtype)
    for i in range(k):
        beta, tau, v = _householder(x[..., i, i], x[..., i + 1:, i])
        taus[..., i] = tau
        x[..., i, i] = beta
        x[..., i + 1:, i] = v
        if i + 1 < n:  # apply H_i^H to the trailing columns
            full_v = np.concatenate([np.ones(x.shape[:-2] + (1,), x.dtype), v], axis=-1)
            w = np.einsum("...r,...rc->...c", np.conj(full_v), x[..., i:, i + 1:])
            x[..., i:, i + 1:] -= np.conj(tau)[..., None, None] * full_v[..., :, None] * w[..., None, :]
    t = shape.tuple_shapes
    return x.astype(t[0].dtype), taus.astype(t[1].dtype)


def _orgqr(a, tau, *, shape, **_):
    """?orgqr / ?ungqr: (a, tau) -> q, the first n columns of H_1 ... H_k (a is m x n)."""
    x = _lapack_input(a)
    tau = tau.astype(x.dtype)
    m, n = x.shape[-2:]
    k = tau.shape[-1]
    q = np.broadcast_to(np.eye(m, n, dtype=x.dtype), x.shape).copy()
    for i in reversed(range(k)):
        v = np.concatenate([np.ones(x.shape[:-2] + (1,), x.dtype), x[..., i + 1:, i]], axis=-1)
        w = np.einsum("...r,...rc->...c", np.conj(v), q[..., i:, :])
        q[..., i:, :] -= tau[..., i, None, None] * v[..., :, None] * w[..., None, :]
    return q.astype(shape.dtype)


def _syevd(a, *, shape, backend_config=None, **_):
    """?syevd / ?heevd: (a) -> (eigenvectors, eigenvalues ascending, info), reading the
    ``uplo`` triangle.  Eigenvector signs (phases) are not unique: they may differ from
    LAPACK's."""
    o = lapack_options(backend_config)
    w, v = np.linalg.eigh(_lapack_input(a), UPLO=o.get("uplo", "L"))
    t = shape.tuple_shapes
    return v.astype(t[0].dtype), w.astype(t[1].dtype), np.zeros(t[2].dims, np.int32)


def _gesdd(a, *, shape, backend_config=None, **_):
    """?gesdd: (a) -> (a_destroyed, s, u, vt, info); mode A (full u, vt), S (reduced) or
    N (singular values only: u and vt are left zero).  Singular vectors are unique only
    up to signs (phases)."""
    mode = lapack_options(backend_config).get("mode", "A")
    x = _lapack_input(a)
    t = shape.tuple_shapes
    if mode == "N":
        s = np.linalg.svd(x, compute_uv=False)
        u, vt = np.zeros(t[2].dims, x.dtype), np.zeros(t[3].dims, x.dtype)
    else:
        u, s, vt = np.linalg.svd(x, full_matrices=(mode == "A"))
    return (x.astype(t[0].dtype), s.astype(t[1].dtype), u.astype(t[2].dtype), vt.astype(t[3].dtype),
            np.zeros(t[4].dims, np.int32))


for _t in "sdcz":
    custom_call.register_target(f"lapack_{_t}potrf_ffi", _potrf)
    custom_call.register_target(f"lapack_{_t}trsm_ffi", _trsm)
    custom_call.register_target(f"lapack_{_t}getrf_ffi", _getrf)
    custom_call.register_target(f"lapack_{_t}geqrf_ffi", _geqrf)
    custom_call.register_target(f"lapack_{_t}{'orgqr' if _t in 'sd' else 'ungqr'}_ffi", _orgqr)
    custom_call.register_target(f"lapack_{_t}{'syevd' if _t in 'sd' else 'heevd'}_ffi", _syevd)
    custom_call.register_target(f"lapack_{_t}gesdd_ffi", _gesdd)


__all__ = ["Dot", "DotGeneral", "DotDimensionNumbers", "Conv", "ConvWithGeneralPadding",
           "ConvWithGeneralDimensions", "ConvGeneral", "ConvGeneralDilated", "ConvDimensionNumbers",
           "Fft", "Cholesky", "TriangularSolve", "BatchNormTraining", "BatchNormInference", "BatchNormGrad"]
