"""Element-wise ops: unary functions, binary arithmetic, comparisons, Select, Clamp and the
conversions (ConvertElementType, BitcastConvertType, ReducePrecision).

Every op here applies one scalar function at every index: ``result[i] = f(operand[i])`` or
``result[i] = f(lhs[i], rhs[i])``.  The unary and binary ops are one-liners made by two
factories over dtype classes (as JAX's ``lax`` makes them); what each computes is a small
NumPy function next to its registration.

Shapes.  In HLO the operands of a binary op have equal shapes (a ``?`` size matches any
size, as MLIR's Broadcastable trait says, spec/002).  The builder functions broadcast
first, as XlaBuilder does, recording explicit ``broadcast`` instructions: a scalar
operand, size-1 ("degenerate") dimensions and a lower rank (extended on the left, or
placed by ``broadcast_dimensions``) all follow ``xla_explorer.shapes.infer_shape``.

Values.  The references follow what XLA:CPU computes (the corpus README pins it down):

- integers wrap (two's complement); ``x / 0 = -1`` (all bits set), ``x % 0 = x``,
  ``INT_MIN / -1 = INT_MIN``, ``INT_MIN % -1 = 0``, ``abs(INT_MIN) = INT_MIN``; shift
  amounts are read as unsigned and ``>= bit width`` gives 0 (the sign fill for
  ``shift-right-arithmetic``, which on unsigned types replicates the top bit);
- integer ``power`` squares 6 times, as XLA's emitter does: only the exponent's low 6 bits
  count, and an exponent with its top bit set (negative; for unsigned types too) gives 0
  unless the base is 1 or -1 (all bits set);
- floats narrower than f64 are computed in f64 and rounded once to their type (XLA:CPU
  computes bf16/f16 in f32 and rounds; for + - * / sqrt the results are the same, for
  transcendentals within the corpus tolerances);
- denormals: in the default ``"flush"`` environment (``xla_explorer.fpenv``) an f32, f64 or
  bf16 computation reads a denormal operand as a zero of its sign and writes a zero where
  the result would be denormal, as XLA:CPU (it runs with the processor's DAZ and FTZ modes
  on); ops that move bits (negate, abs, select, real, imag, constants, bit-level
  conversions) keep them.  Each op's rule is its ``denormals=`` registration; the executors
  apply it, so the functions below compute exact IEEE values;
- ``maximum``/``minimum`` propagate NaN and order -0.0 < +0.0; ``compare`` is IEEE
  (NaN is unordered: only NE is true) unless ``type=TOTALORDER``:
  -NaN < -Inf < ... < -0.0 < +0.0 < ... < +Inf < +NaN;
- float -> integer conversion truncates toward zero, saturates and maps NaN to 0; float ->
  narrower float rounds to nearest even and overflows to Inf (NaN for f8e4m3fn);
- complex ``multiply`` and ``divide`` are XLA's algorithms (the naive product; Smith's
  division with C99's recovery only where both parts are NaN) computed in the parts' own
  precision with XLA:CPU's fused multiply-adds, so ``(1-2.5i) * (-inf+3e38i) = NaN+inf i``
  where C99 says ``-inf+inf i``; sign, abs, exp, expm1, sin, cos, sqrt, log, logistic and
  power follow XLA:CPU's formulas for infinite and NaN parts too (``abs(NaN+Inf i) =
  NaN``); ``rsqrt``, ``tan``, ``tanh`` and ``log1p`` use NumPy's C99 rules there
  (simplification).  Complex order is XLA:CPU's: ``maximum``/``minimum`` compare the real
  parts only (``max(1+1j, 1+2j) = 1+1j``: the first operand on a tie); ``compare`` LT and GT
  are lexicographic (real part, then imaginary part) while LE and GE look at the real parts
  only; TOTALORDER is refused for complex, as XLA's verifier refuses it.

References: the spec's element-wise sections (spec/operation_semantics_2018.md, spec/001),
StableHLO's spec for the dtype rules, XLA:CPU's outputs in ../shared/hlo_corpus.
"""
import math

import numpy as np

from .. import dtypes, fpenv
from ..builder import Constant, XlaOp, apply_op, literal_array
from ..errors import ShapeError
from ..hlo.attrs import Attr
from ..shapes import Shape, infer_dim, infer_shape
from .arguments import describe
from . import registry

# -- dtype classes (XLA element type names) ---------------------------------------------------

_pred = frozenset(dtypes.PRED)
_sint = frozenset(dtypes.SIGNED)
_uint = frozenset(dtypes.UNSIGNED)
_int = _sint | _uint
_float = frozenset(dtypes.FLOATING)
_complex = frozenset(dtypes.COMPLEX)
_signed = _sint | _float | _complex          # what abs and sign take
_num = _int | _float | _complex
_any = _num | _pred

_CLASS_NAMES = [(_pred, "pred"), (_sint, "signed integers"), (_uint, "unsigned integers"),
                (_float, "floats"), (_complex, "complex")]


def _describe(types):
    parts = [name for cls, name in _CLASS_NAMES if cls <= types]
    if not parts:
        return " or ".join(sorted(types))
    if {"signed integers", "unsigned integers"} <= set(parts):
        parts = [p for p in parts if p not in ("signed integers", "unsigned integers")]
        parts.insert(1 if "pred" in parts else 0, "integers")
    return ", ".join(parts)


# -- shape-rule helpers ------------------------------------------------------------------------

def _check_array(op, arg, shape):
    if not shape.is_array:
        raise ShapeError(f"{op}: {arg} must be an array, got {shape}")


def _check_type(op, arg, shape, types):
    _check_array(op, arg, shape)
    if shape.element_type not in types:
        raise ShapeError(f"{op}: {arg} has element type {shape.element_type} ({shape}), but {op} "
                         f"takes {_describe(types)}")


def _same_type(op, names, shapes):
    first = shapes[0]
    for name, s in zip(names[1:], shapes[1:]):
        if s.element_type != first.element_type:
            raise ShapeError(f"{op}: {names[0]} is {first} but {name} is {s}; the operands must have "
                             f"the same element type (convert one with ConvertElementType)")


def _same_dims(op, names, shapes):
    """HLO's rule: equal dimensions, where a dynamic size ``?`` matches any size (the
    Broadcastable trait's InferDim); returns the merged dims and bounds."""
    first = shapes[0]
    dims, bounds = list(first.dims), list(first.bounds)
    for name, s in zip(names[1:], shapes[1:]):
        if s.rank != first.rank or any(a is not None and b is not None and a != b
                                       for a, b in zip(dims, s.dims)):
            raise ShapeError(f"{op}: {names[0]} {first} and {name} {s} must have the same shape in HLO "
                             f"(the builder function {op}(...) broadcasts first; in HLO text add a "
                             f"broadcast instruction)")
        for i, (a, b) in enumerate(zip(dims, s.dims)):
            merged = infer_dim(a, b, op=op, dim=i)
            if merged is None and bounds[i] is None:
                bounds[i] = s.bounds[i]
            elif merged is not None:
                bounds[i] = None
            dims[i] = merged
    return tuple(dims), tuple(bounds)


def _element_type_name(op, value):
    """``"f32"``, ``np.float32``, ``np.dtype("float32")`` or ``ml_dtypes.bfloat16`` -> ``"f32"``."""
    if isinstance(value, str):
        if value not in dtypes.DTYPES:
            raise ShapeError(f"{op}: new_element_type={value!r} is not an XLA array element type; "
                             f"known: {', '.join(sorted(dtypes.DTYPES))}")
        return value
    try:
        if value is None or isinstance(value, (bool, int, float)):
            raise TypeError  # np.dtype(None) is float64: None must not mean f64
        return dtypes.from_numpy(value)
    except (TypeError, ValueError):
        raise ShapeError(f"{op}: new_element_type={value!r} is neither an XLA element type name "
                         f"('f32') nor a NumPy dtype with one") from None


# -- value helpers -----------------------------------------------------------------------------

_SUB_BYTE = {t for t in dtypes.DTYPES if dtypes.bit_width(t) != dtypes.to_numpy(t).itemsize * 8}


def _type_of(x):
    return dtypes.from_numpy(np.asarray(x).dtype)


def _wide(x):
    """Floats as f64 and complex as c128 (exact), so each op rounds once, to its result type."""
    x = np.asarray(x)
    name = _type_of(x)
    if name in _complex:
        return x.astype(np.complex128)
    if name in _float:
        return x.astype(np.float64)
    return x


def _to(value, shape):
    """``value`` rounded (floats: to nearest even) or wrapped (integers) to ``shape``'s type."""
    with np.errstate(all="ignore"):
        value = np.asarray(value)
        if shape.element_type in _SUB_BYTE and shape.element_type in _int:
            return _wrap_int(value, shape.element_type)
        # no reshape to shape.dims: a vectorised region runs scalar-shaped ops on whole arrays
        return value.astype(shape.dtype)


def _carrier(x):
    """Integers as NumPy computes them with wrap-around: sub-byte types (s4, u4, ...) in int64."""
    x = np.asarray(x)
    return x.astype(np.int64) if _type_of(x) in _SUB_BYTE else x


def _wrap_int(v, name):
    """Two's-complement wrap of integers ``v`` to the ``name`` type (for sub-byte types)."""
    n = dtypes.bit_width(name)
    v = np.asarray(v).astype(np.int64) & ((1 << n) - 1)
    if name in _sint:
        v = np.where(v >= 1 << (n - 1), v - (1 << n), v)
    return v.astype(dtypes.to_numpy(name))


def _contiguous(x):
    x = np.asarray(x)
    return x if x.flags.c_contiguous else x.copy(order="C")  # (ascontiguousarray makes 0-d 1-d)


def _bits(x):
    """The bit pattern of each integer of ``x``, as uint64 (the low bit_width bits)."""
    x = np.asarray(x)
    name = _type_of(x)
    n = dtypes.bit_width(name)
    if name in _SUB_BYTE:
        return (x.astype(np.int64) & ((1 << n) - 1)).astype(np.uint64), n
    return _contiguous(x).view(dtypes.to_numpy(dtypes.unsigned_of(name))).astype(np.uint64), n


def _from_bits(u, shape):
    name = shape.element_type
    if name in _SUB_BYTE:
        return _wrap_int(u.astype(np.int64), name)
    unsigned = dtypes.to_numpy(dtypes.unsigned_of(name))
    return _contiguous(u.astype(unsigned)).view(shape.dtype)


#: the IEEE types NumPy computes correctly rounded in their own precision, NaN payloads as
#: f64 keeps them (f16 is not: NumPy's half arithmetic changes some NaNs' payloads)
_NATIVE = (np.dtype(np.float32), np.dtype(np.float64))


def _elementwise(fn, native=False):
    """Run ``fn`` on integers with wrap-around, floats in f64, complex in c128; round to ``shape``.
    ``native``: ``fn`` is correctly rounded (+, -), so f32/f64 operands of the result's type
    are computed in that type -- the same bits as f64 rounded once (f64 has more than twice
    their precision plus two bits: double rounding is innocuous), without two f64 copies."""
    def reference(*values, shape):
        with np.errstate(all="ignore"):
            if native and shape.dtype in _NATIVE and all(
                    isinstance(v, np.ndarray) and v.dtype == shape.dtype for v in values):
                return np.asarray(fn(*values))
            values = [_wide(_carrier(v)) for v in values]
            return _to(fn(*values), shape)
    return reference


# -- weak-typed Python scalars and builder-level broadcasting -----------------------------------

def _python_scalar(v):
    return isinstance(v, (bool, int, float, complex)) and not isinstance(v, np.generic)


def _typed_like(v, element_type):
    """A Python scalar combined with a typed array takes the array's element type when that
    is the scalar's kind or wider (as JAX's weak types do): ``x_bf16 * 2`` is bf16, ``x_s32 +
    1.5`` keeps XlaBuilder's default (f32) and fails the dtype rule with a clear message."""
    if element_type is None or element_type not in dtypes.DTYPES:
        return v
    ok = (element_type in _pred if isinstance(v, bool) else
          element_type in _num if isinstance(v, int) else
          element_type in _float | _complex if isinstance(v, float) else
          element_type in _complex)
    if not ok:
        return v
    if isinstance(v, int) and not isinstance(v, bool) and element_type in _int:
        info = dtypes.iinfo(element_type)
        if not int(info.min) <= v <= int(info.max):
            return v
    with np.errstate(all="ignore"):
        return np.asarray(v).astype(dtypes.to_numpy(element_type))


def _element_type_of(v):
    if isinstance(v, XlaOp):
        return v.shape.element_type if v.shape.is_array else None
    if isinstance(v, (np.ndarray, np.generic)):
        try:
            return dtypes.from_numpy(v.dtype)
        except ValueError:
            return None
    return None


def _weak(values):
    """Python scalars take the element type of the first typed value."""
    like = next((t for t in map(_element_type_of, values) if t is not None), None)
    return [_typed_like(v, like) if _python_scalar(v) else v for v in values]


def _as_operands(values):
    """XlaOps of one builder (NumPy values become constants) or all NumPy arrays."""
    builder = next((v.builder for v in values if isinstance(v, XlaOp)), None)
    if builder is None:
        return [v if isinstance(v, tuple) else literal_array(v) for v in values]
    return [v if isinstance(v, XlaOp) else Constant(builder, v) for v in values]


def _shape_of(v):
    if isinstance(v, XlaOp):
        return v.shape
    return Shape.of(v)


def _binary_result_dims(op, lhs, rhs, broadcast_dimensions):
    """The broadcast result dims of ``lhs`` and ``rhs`` and, for each, where its dimensions
    go in the result."""
    if broadcast_dimensions is not None:
        from ..coerce import as_int_list   # integers only: 0.5 is refused, never truncated
        broadcast_dimensions = list(as_int_list(op, "broadcast_dimensions", broadcast_dimensions))
    if not broadcast_dimensions or lhs.rank == rhs.rank:
        if broadcast_dimensions and list(broadcast_dimensions) != list(range(lhs.rank)):
            raise ShapeError(f"{op}: broadcast_dimensions={list(broadcast_dimensions)} must be empty or the "
                             f"identity {list(range(lhs.rank))} for operands of the same rank "
                             f"({lhs} and {rhs})")
        try:
            dims = infer_shape(lhs, rhs, op=op)
        except ShapeError as e:
            raise ShapeError(f"{e} (lhs {lhs}, rhs {rhs})") from None
        maps = [tuple(range(len(dims) - s.rank, len(dims))) for s in (lhs, rhs)]
        return dims, maps
    low, high = (lhs, rhs) if lhs.rank < rhs.rank else (rhs, lhs)
    bd = [int(d) for d in broadcast_dimensions]
    if len(bd) != low.rank:
        raise ShapeError(f"{op}: broadcast_dimensions={bd} has {len(bd)} entries but the lower-rank "
                         f"operand {low} has rank {low.rank}; give one dimension of {high} per dimension")
    for i, d in enumerate(bd):
        if not 0 <= d < high.rank:
            raise ShapeError(f"{op}: broadcast_dimensions[{i}]={d} is out of range for the higher-rank "
                             f"operand {high} (rank {high.rank})")
        if i > 0 and bd[i - 1] >= d:
            raise ShapeError(f"{op}: broadcast_dimensions={bd} must be strictly increasing "
                             f"(broadcast_dimensions[{i}]={d} comes after {bd[i - 1]})")
    dims = list(high.dims)
    for i, d in enumerate(bd):
        try:
            dims[d] = infer_dim(low.dims[i], high.dims[d], op=op, dim=d)
        except ShapeError:
            raise ShapeError(f"{op}: dimension {i} of {low} (size {low.dim_str(i)}) goes to dimension {d} "
                             f"of {high} (size {high.dim_str(d)}) by broadcast_dimensions={bd}; the sizes "
                             f"must be equal or one of them 1") from None
    maps = [tuple(bd) if s is low else tuple(range(high.rank)) for s in (lhs, rhs)]
    return tuple(dims), maps


def _broadcast_to(value, shape, dims, mapping, sizes=None):
    """``value`` broadcast to ``dims`` (an HLO ``broadcast``: its dimension i goes to mapping[i]).

    A dynamic result size (``None`` in ``dims``) that ``value`` does not have itself (it has
    size 1 there, or no dimension) is done as XlaBuilder does it: broadcast to the bound, then
    ``set-dimension-size`` to the run-time size of the operand that is dynamic there
    (``sizes[k] = (bound, op, its dimension)``, from ``get-dimension-size``), so that both
    operands of the element-wise op have the same shape at run time.  An unbounded ``?`` size
    (no bound to broadcast to) is left to the element-wise op: the operand keeps size 1."""
    sizes = sizes or {}
    source = dict(zip(mapping, shape.dims))
    out, resize = [], []
    for k, d in enumerate(dims):
        if d is not None:
            out.append(d)
        elif source.get(k, 1) is None or k not in sizes:
            out.append(source.get(k, 1))
        else:
            out.append(sizes[k][0])
            resize.append(k)
    if shape.rank == len(out) and not resize and all(out[k] == s or s is None for k, s in source.items()):
        return value
    from .shape import BroadcastInDim  # the shape family owns `broadcast`
    from .control import GetDimensionSize, SetDimensionSize
    result = BroadcastInDim(value, out_dim_size=out, broadcast_dimensions=list(mapping))
    for k in resize:
        _, op, dim = sizes[k]
        result = SetDimensionSize(result, GetDimensionSize(op, dim), k)
    return result


def _dynamic_sizes(operands, dims):
    """For each bounded dynamic dimension k of the result ``dims``: (its bound, an operand that
    is dynamic there, that operand's dimension) — where its run-time size comes from.
    ``operands`` are (value, shape, mapping) triples; NumPy operands have static shapes."""
    sizes = {}
    for value, shape, mapping in operands:
        if not isinstance(value, XlaOp):
            continue
        for i, k in enumerate(mapping):
            if shape.dims[i] is None and shape.bounds[i] is not None and dims[k] is None:
                sizes.setdefault(k, (shape.bounds[i], value, i))
    return sizes


def _broadcast_binary(op, lhs, rhs, broadcast_dimensions=None):
    lhs, rhs = _as_operands(_weak([lhs, rhs]))
    ls, rs = _shape_of(lhs), _shape_of(rhs)
    if not (ls.is_array and rs.is_array) or ls.element_type != rs.element_type:
        return lhs, rhs  # the shape rule says what is wrong (the element types first)
    dims, (lmap, rmap) = _binary_result_dims(op, ls, rs, broadcast_dimensions)
    sizes = _dynamic_sizes([(lhs, ls, lmap), (rhs, rs, rmap)], dims)
    return _broadcast_to(lhs, ls, dims, lmap, sizes), _broadcast_to(rhs, rs, dims, rmap, sizes)


def _broadcast_scalars(values):
    """Scalar operands of a ternary op broadcast to the array operands' dims (XlaBuilder's
    TernaryOp does the same for Select and Clamp)."""
    shapes = [_shape_of(v) for v in values]
    at = next((i for i, s in enumerate(shapes) if s.is_array and s.rank > 0), None)
    if at is None:
        return values
    target = shapes[at]
    sizes = _dynamic_sizes([(values[at], target, tuple(range(target.rank)))], target.dims)
    return [_broadcast_to(v, s, target.dims, (), sizes) if s.is_array and s.rank == 0 else v
            for v, s in zip(values, shapes)]


# -- unary ops -----------------------------------------------------------------------------------

def _same(t):
    return t


def _component(t):
    return dtypes.complex_component(t) if t in _complex else t


def _to_pred(t):
    return "pred"


# -- how XLA:CPU's flush-to-zero meets each op (fpenv.rule_of; measured through jax 0.10.2) ------

def _bits_for_real(operand_types, result_type, attrs):
    """Real operands: the op moves bits (XLA:CPU's negate and abs flip or clear the sign bit;
    its sin, tan, tanh and expm1 return a tiny argument itself), so a denormal survives;
    complex operands are computed, and flushed."""
    return fpenv.ARITHMETIC if any(t in _complex for t in operand_types) else fpenv.BITS


def _bits_for_f32(operand_types, result_type, attrs):
    """tanh: f32 and bf16 return a tiny argument itself; f64 and complex compute (flushed)."""
    return fpenv.BITS if result_type in ("f32", "bf16") else fpenv.ARITHMETIC


def _divisor_only(operand_types, result_type, attrs):
    """remainder: fmod reads a denormal divisor as zero (x % 0 = NaN) but returns a smaller
    dividend's bits unchanged."""
    return (False, True), False


def _power_denormals(operand_types, result_type, attrs):
    """power: the C library's pow reads its arguments bit by bit (no DAZ: pow(-1, -2**-149) is
    NaN; a denormal base is read as 2**-150 or 2**-1075: ``xla_pow_of_denormal``), its last
    multiplication flushes a denormal result; complex power is computed."""
    return fpenv.ARITHMETIC if result_type in _complex else fpenv.RESULT


def _unary(opcode, name, types, fn, formula, example, result_type=_same, reference=None, denormals=None):
    """Register the unary op ``opcode`` (``result[i] = fn(operand[i])``) and return its API
    (``denormals``: how XLA:CPU's flush-to-zero meets it, see ``fpenv.rule_of``)."""
    def shape_rule(operand):
        _check_type(name, "operand", operand, types)
        return Shape(result_type(operand.element_type), operand.dims, operand.bounds)

    registry.register(opcode, name, "elementwise", shape_rule, reference or _elementwise(fn),
                      categories=("elementwise", "unary"), denormals=denormals)

    def api(operand):
        return apply_op(opcode, [operand])
    api.__name__ = api.__qualname__ = name
    api.__doc__ = (f"Wraps XLA's {name} (HLO ``{opcode}``): ``result[i] = {formula}`` at every "
                   f"index ``i``.\n\n    Operand: {_describe(types)}; the result has the operand's "
                   f"dimensions.\n\n    >>> {example}\n    ")
    return api


def _make_complex(real, imag):
    real, imag = np.broadcast_arrays(real, imag)
    result = np.empty(real.shape, np.result_type(real.dtype, np.complex64))
    result.real, result.imag = real, imag  # not real + 1j*imag: 1j*inf puts NaN in the real part
    return result


def _exp(x):
    if x.dtype.kind != "c":
        return np.exp(x)
    # e^(a+ib) = e^a (cos b + i sin b); a zero imaginary part stays zero (e^inf * 0 is not NaN)
    a, b = x.real, x.imag
    return _make_complex(np.exp(a) * np.cos(b), np.where(b == 0, b, np.exp(a) * np.sin(b)))


def _sin(x):
    if x.dtype.kind != "c":
        return np.sin(x)
    a, b = x.real, x.imag  # sin(a+ib) = sin a cosh b + i cos a sinh b, as XLA computes it
    return _make_complex(np.sin(a) * np.cosh(b), np.cos(a) * np.sinh(b))


def _cos(x):
    if x.dtype.kind != "c":
        return np.cos(x)
    a, b = x.real, x.imag  # cos(a+ib) = cos a cosh b - i sin a sinh b (so cos(0+inf i) = inf+nan i)
    return _make_complex(np.cos(a) * np.cosh(b), -np.sin(a) * np.sinh(b))


def _nan_in_nan_out(fn):
    """XLA:CPU's complex sqrt and log give NaN + NaN i when a part is NaN (C99: sqrt(NaN+inf i) = inf+inf i)."""
    def f(x):
        result = fn(x)
        if x.dtype.kind != "c":
            return result
        return np.where(np.isnan(x.real) | np.isnan(x.imag), complex(np.nan, np.nan), result)
    return f


def _logistic(x):
    if x.dtype.kind != "c":
        return 1 / (1 + np.exp(-x))
    return _complex_divide(np.ones_like(x), 1 + _exp(-x))


def _abs(x):
    if x.dtype.kind != "c":
        return np.abs(x)
    return np.where(np.isnan(x.real) | np.isnan(x.imag), np.nan, np.abs(x))  # XLA: NaN beats Inf


def _sign(x):
    if x.dtype.kind == "c":  # x / |x|, part by part (sign(inf+0j) = nan+0j as in XLA), 0 at 0
        mag = np.abs(x)
        safe = np.where(mag == 0, 1, mag)
        return np.where(mag == 0, x, _make_complex(x.real / safe, x.imag / safe))
    if x.dtype.kind == "f":
        return np.where((x == 0) | np.isnan(x), x, np.sign(x))  # sign(-0.0) = -0.0, sign(NaN) = NaN
    return np.sign(x)


def _round_afz(x):
    r = np.trunc(x)
    fraction = x - r  # exact
    return np.where(np.abs(fraction) >= 0.5, r + np.sign(x), r)


def _expm1(x):
    if x.dtype.kind != "c":
        return np.expm1(x)
    # expm1(a + ib) = expm1(a) cos(b) - 2 sin^2(b/2) + i e^a sin(b), accurate near 0
    a, b = x.real, x.imag
    return _make_complex(np.expm1(a) * np.cos(b) - 2 * np.sin(b / 2) ** 2,
                         np.where(b == 0, b, np.exp(a) * np.sin(b)))


def _log1p(x):
    if x.dtype.kind != "c":
        return np.log1p(x)
    a, b = x.real, x.imag
    # |1+z|^2 = 1 + (2a + a^2 + b^2): log1p of the small part keeps precision near 0
    return _make_complex(0.5 * np.log1p(a * (2 + a) + b * b), np.arctan2(b, 1 + a))


_erf_scalar = np.frompyfunc(math.erf, 1, 1)


def _erf(x):
    return np.asarray(_erf_scalar(x), dtype=np.float64)  # math.erf, element by element


def _clz(x, shape):
    u, n = _bits(x)
    length = np.zeros(u.shape, np.uint64)
    for s in (32, 16, 8, 4, 2, 1):
        high = u >> np.uint64(s)
        has = high != 0
        length += np.where(has, np.uint64(s), np.uint64(0))
        u = np.where(has, high, u)
    length += (u != 0).astype(np.uint64)
    return _to(n - length.astype(np.int64), shape)


def _popcnt(x, shape):
    u, n = _bits(x)
    count = np.zeros(u.shape, np.int64)
    for i in range(n):
        count += ((u >> np.uint64(i)) & np.uint64(1)).astype(np.int64)
    return _to(count, shape)


def _imag(x):
    return x.imag if x.dtype.kind == "c" else np.zeros_like(x)


Abs = _unary("abs", "Abs", _signed, _abs, "|operand[i]|", "Abs(np.int32([-2, 3]))   # [2, 3]",
             result_type=_component, denormals=_bits_for_real)
Neg = _unary("negate", "Neg", _num, np.negative, "-operand[i]", "Neg(np.float32([1, -0.0]))   # [-1., 0.]",
            denormals=fpenv.BITS)
def _sign_reference(x, *, shape):
    if shape.element_type not in _complex or not fpenv.flushing(shape.element_type):
        return _elementwise(_sign)(x, shape=shape)
    # XLA: select(|x| == 0, x, x / |x|).  Under DAZ a denormal x has |x| = 0, and the select
    # hands x back bit for bit; elsewhere the division computes (flushed)
    x = np.asarray(x)
    flushed = fpenv.flush(x)
    computed = fpenv.flush(_elementwise(_sign)(flushed, shape=shape))
    return np.where(np.abs(flushed) == 0, x, computed)


def _sign_denormals(operand_types, result_type, attrs):
    """Real sign computes (flushed); complex sign flushes inside its reference (above)."""
    return fpenv.BITS if result_type in _complex else fpenv.ARITHMETIC


Sign = _unary("sign", "Sign", _signed, None, "sgn(operand[i]): -1, -0, NaN, +0 or 1 (x/|x| for complex)",
              "Sign(np.float32([-3, -0.0, 2]))   # [-1., -0., 1.]", reference=_sign_reference,
              denormals=_sign_denormals)
Not = _unary("not", "Not", _int | _pred, np.invert, "!operand[i] (bitwise for integers)",
             "Not(np.array([True, False]))   # [False, True]")
Exp = _unary("exponential", "Exp", _float | _complex, _exp, "e^operand[i]",
             "Exp(np.float32([0, 1]))   # [1., 2.7182817]")
Expm1 = _unary("exponential-minus-one", "Expm1", _float | _complex, _expm1, "e^operand[i] - 1",
               "Expm1(np.float32([1e-10]))   # [1e-10]", denormals=_bits_for_real)
Log = _unary("log", "Log", _float | _complex, _nan_in_nan_out(np.log), "ln(operand[i])",
             "Log(np.float32([1, 0]))   # [0., -inf]")
Log1p = _unary("log-plus-one", "Log1p", _float | _complex, _log1p, "ln(1 + operand[i])",
               "Log1p(np.float32([1e-10]))   # [1e-10]")
Sqrt = _unary("sqrt", "Sqrt", _float | _complex, _nan_in_nan_out(np.sqrt), "sqrt(operand[i])",
              "Sqrt(np.float32([4, -1]))   # [2., nan]")
Rsqrt = _unary("rsqrt", "Rsqrt", _float | _complex, lambda x: 1 / np.sqrt(x), "1 / sqrt(operand[i])",
               "Rsqrt(np.float32([4, 0]))   # [0.5, inf]")
#: XLA:CPU's f32 cbrt of any denormal (its polynomial starts from the exponent bits, which
#: DAZ does not hide): -5.5951735e-16, bits 0xa6214518
XLA_CBRT_F32_OF_DENORMAL = float(np.uint32(0xa6214518).view(np.float32))


def _cbrt_reference(x, *, shape):
    t = shape.element_type
    if t not in ("f32", "bf16") or not fpenv.flushing(t):
        return _elementwise(np.cbrt)(x, shape=shape)   # f64 arrives flushed (its rule)
    with np.errstate(all="ignore"):
        x = _wide(_carrier(x))
        tiny = fpenv.TINY["f32"]
        return _to(np.where((x != 0) & (np.abs(x) < tiny), XLA_CBRT_F32_OF_DENORMAL, np.cbrt(x)), shape)


def _cbrt_denormals(operand_types, result_type, attrs):
    """f32 and bf16: XLA's polynomial (``_cbrt_reference``), not a flush; f64: computed."""
    return fpenv.BITS if result_type in ("f32", "bf16") else fpenv.ARITHMETIC


Cbrt = _unary("cbrt", "Cbrt", _float, np.cbrt, "cbrt(operand[i])", "Cbrt(np.float32([-8]))   # [-2.]",
              reference=_cbrt_reference, denormals=_cbrt_denormals)
Sin = _unary("sine", "Sin", _float | _complex, _sin, "sin(operand[i])", "Sin(np.float32([0]))   # [0.]",
             denormals=_bits_for_real)
Cos = _unary("cosine", "Cos", _float | _complex, _cos, "cos(operand[i])", "Cos(np.float32([0]))   # [1.]")
Tan = _unary("tan", "Tan", _float | _complex, np.tan, "tan(operand[i])", "Tan(np.float32([0]))   # [0.]",
             denormals=_bits_for_real)
Tanh = _unary("tanh", "Tanh", _float | _complex, np.tanh, "tanh(operand[i])", "Tanh(np.float32([-inf]))   # [-1.]",
              denormals=_bits_for_f32)
Logistic = _unary("logistic", "Logistic", _float | _complex, _logistic,
                  "1 / (1 + e^-operand[i])", "Logistic(np.float32([0]))   # [0.5]")
Erf = _unary("erf", "Erf", _float, _erf, "erf(operand[i]) = 2/sqrt(pi) * integral_0^x e^(-t^2) dt",
             "Erf(np.float32([0, inf]))   # [0., 1.]")
Floor = _unary("floor", "Floor", _float, np.floor, "floor(operand[i])", "Floor(np.float32([-1.5]))   # [-2.]")
Ceil = _unary("ceil", "Ceil", _float, np.ceil, "ceil(operand[i])", "Ceil(np.float32([-1.5]))   # [-1.]")
Round = _unary("round-nearest-afz", "Round", _float, _round_afz,
               "operand[i] rounded to the nearest integer, halfway cases away from zero",
               "Round(np.float32([0.5, -2.5]))   # [1., -3.]")
RoundNearestEven = _unary("round-nearest-even", "RoundNearestEven", _float, np.rint,
                          "operand[i] rounded to the nearest integer, halfway cases to even",
                          "RoundNearestEven(np.float32([0.5, -2.5]))   # [0., -2.]")
IsFinite = _unary("is-finite", "IsFinite", _float, np.isfinite,
                  "true if operand[i] is neither +-Inf nor NaN (a pred)",
                  "IsFinite(np.float32([1, inf, nan]))   # [True, False, False]", result_type=_to_pred)
Real = _unary("real", "Real", _float | _complex, np.real, "the real part of operand[i] (the value itself for floats)",
              "Real(np.complex64([1+2j]))   # [1.]", result_type=_component, denormals=fpenv.BITS)
Imag = _unary("imag", "Imag", _float | _complex, _imag, "the imaginary part of operand[i] (0 for floats)",
              "Imag(np.complex64([1+2j]))   # [2.]", result_type=_component, denormals=fpenv.BITS)
Clz = _unary("count-leading-zeros", "Clz", _int, None, "the number of leading zero bits of operand[i]",
             "Clz(np.uint8([1, 0, 255]))   # [7, 8, 0]", reference=_clz)
PopulationCount = _unary("popcnt", "PopulationCount", _int, None, "the number of bits set in operand[i]",
                         "PopulationCount(np.int8([-1, 5]))   # [8, 2]", reference=_popcnt)

#: the 2018 spec's name for Not
LogicalNot = Not


# -- binary ops ----------------------------------------------------------------------------------

def _binary(opcode, name, types, fn, formula, example, result_type=_same, reference=None, denormals=None):
    """Register the binary op ``opcode`` (``result[i] = fn(lhs[i], rhs[i])``) and return its API."""
    def shape_rule(lhs, rhs):
        _check_type(name, "lhs", lhs, types)
        _check_type(name, "rhs", rhs, types)
        _same_type(name, ("lhs", "rhs"), (lhs, rhs))
        dims, bounds = _same_dims(name, ("lhs", "rhs"), (lhs, rhs))
        return Shape(result_type(lhs.element_type), dims, bounds)

    registry.register(opcode, name, "elementwise", shape_rule, reference or _elementwise(fn),
                      categories=("elementwise", "binary"), denormals=denormals)
    describe(opcode, broadcast_dimensions={"kind": "dims", "of": "lhs"})

    def api(lhs, rhs, broadcast_dimensions=None):
        return apply_op(opcode, list(_broadcast_binary(name, lhs, rhs, broadcast_dimensions)))
    api.__name__ = api.__qualname__ = name
    api.__doc__ = (f"Wraps XLA's {name} (HLO ``{opcode}``): ``result[i] = {formula}`` at every "
                   f"index ``i``.\n\n    Operands: {_describe(types)}, both of the same type.  Shapes "
                   f"broadcast as in XlaBuilder: a scalar,\n    size-1 dimensions, a lower rank (on the "
                   f"left, or where ``broadcast_dimensions`` puts its\n    dimensions in the higher "
                   f"rank); explicit ``broadcast`` instructions are recorded.\n\n"
                   f"    >>> {example}\n    ")
    return api


def _int_divide(x, y):
    """Integer x / y rounded toward zero; x / 0 = -1 (all bits set), INT_MIN / -1 = INT_MIN."""
    zero = y == 0
    overflow = _int_min_by_minus_one(x, y)
    safe_y = np.where(zero | overflow, 1, y).astype(y.dtype)
    remainder = np.fmod(x, safe_y)                     # C's %: the sign of the dividend
    quotient = (x - remainder) // safe_y               # exact, so // rounds nothing
    all_bits = np.array(-1 if x.dtype.kind == "i" else np.iinfo(x.dtype).max).astype(x.dtype)
    return np.where(zero, all_bits, quotient)


def _int_remainder(x, y):
    """Integer x % y with the sign of x; x % 0 = x, INT_MIN % -1 = 0."""
    zero = y == 0
    safe_y = np.where(zero | _int_min_by_minus_one(x, y), 1, y).astype(y.dtype)
    return np.where(zero, x, np.fmod(x, safe_y))


def _int_min_by_minus_one(x, y):
    if x.dtype.kind != "i":
        return np.zeros(np.shape(x), bool)
    return (x == np.iinfo(x.dtype).min) & (y == -1)


#: NumPy's longdouble is wider than f64 (x87's 80-bit format on x86: 15-bit exponent)
_EXTENDED = np.finfo(np.longdouble).nmant > 52 and np.finfo(np.longdouble).maxexp > 1024


class _Parts:
    """Arithmetic on the parts of complex numbers as XLA:CPU does it: in the parts' own type
    (f32 for c64), every step rounded to it and, in the ``"flush"`` environment (``fpenv``),
    flushed to zero as the processor's FTZ mode does; ``fma`` where LLVM fuses ``a*b + c`` into
    one fused multiply-add (it does on every x86-64 with FMA and every ARM64).  Values are
    carried as f64 arrays (an f32 is exact in f64; ``a*b + c`` of f32s in f64 is an exact
    FMA but for a rare double rounding).  For f64 parts it is computed in NumPy's longdouble
    where that is wider (x86), else as ``a*b + c`` except where that differs beyond the last
    bit: a product that overflows while ``c`` is infinite gives ``c``, as the fused operation
    does (its unrounded product is finite)."""

    def __init__(self, part_type):
        self.f32 = part_type == "f32"
        self.ftz = fpenv.flushing(part_type)
        self.tiny = fpenv.TINY[part_type]

    def r(self, x):
        x = np.asarray(x, np.float64)
        if self.f32:
            x = x.astype(np.float32).astype(np.float64)
        if self.ftz:
            x = np.where((np.abs(x) < self.tiny) & (x != 0), x * 0.0, x)
        return x

    def mul(self, a, b):
        return self.r(a * b)

    def div(self, a, b):
        return self.r(a / b)

    def add(self, a, b):
        return self.r(a + b)

    def fma(self, a, b, c):
        if self.f32:
            return self.r(a * b + c)
        if _EXTENDED:  # x86: the 64-bit significand holds most of the product's 106 bits
            wide = np.asarray(a, np.longdouble) * np.asarray(b, np.longdouble) + np.asarray(c, np.longdouble)
            return self.r(wide.astype(np.float64))
        p = a * b
        overflow = np.isinf(p) & np.isfinite(a) & np.isfinite(b) & np.isinf(c)
        return self.r(np.where(overflow, c, p + c))

    def parts(self, x):
        return self.r(np.real(x)), self.r(np.imag(x))


def _complex_multiply(x, y, part_type):
    """XLA's complex multiply (xla/service/elemental_ir_emitter.cc, EmitComplexMultiply):
    (a+bi)(c+di) = (ac - bd) + (ad + bc)i in the parts' precision, with no recovery of
    infinities (not C99's Annex G: (1-2.5i)(-inf+3e38i) is NaN+inf i).  XLA:CPU's LLVM fuses one
    product of each part into an FMA; measured bit for bit against XLA:CPU (jax 0.10.2), the
    fused ones are a*c and b*c: re = fma(a, c, -(b*d)), im = fma(b, c, a*d)."""
    P = _Parts(part_type)
    a, b = P.parts(x)
    c, d = P.parts(y)
    return _make_complex(P.fma(a, c, -P.mul(b, d)), P.fma(b, c, P.mul(a, d)))


def _complex_divide(x, y, part_type="f64"):
    """XLA's complex division (xla/service/elemental_ir_emitter.cc, EmitComplexDivide): Smith's
    algorithm in the parts' precision, then -- only where both parts came out NaN -- C99's
    recovery of three cases: x/0, infinite/finite, finite/infinite.  The a*b + c steps are
    fused multiply-adds on XLA:CPU (checked bit for bit against it)."""
    P = _Parts(part_type)
    a_r, a_i = P.parts(x)
    b_r, b_i = P.parts(y)
    # Smith: divide by the larger part of the denominator (|b_r| < |b_i| is false for NaN)
    b_r_b_i_ratio = P.div(b_r, b_i)
    b_r_b_i_denom = P.fma(b_r_b_i_ratio, b_r, b_i)
    b_i_b_r_ratio = P.div(b_i, b_r)
    b_i_b_r_denom = P.fma(b_i_b_r_ratio, b_i, b_r)
    b_r_lt_b_i = np.abs(b_r) < np.abs(b_i)
    c_r = np.where(b_r_lt_b_i, P.div(P.fma(b_r_b_i_ratio, a_r, a_i), b_r_b_i_denom),
                   P.div(P.fma(b_i_b_r_ratio, a_i, a_r), b_i_b_r_denom))
    c_i = np.where(b_r_lt_b_i, P.div(P.fma(b_r_b_i_ratio, a_i, -a_r), b_r_b_i_denom),
                   P.div(P.fma(-b_i_b_r_ratio, a_r, a_i), b_i_b_r_denom))
    one, zero, inf = np.float64(1), np.float64(0), np.float64(np.inf)
    # case 1: x / 0 = inf with the signs of x's parts (and of b_r), unless x is NaN + NaN i
    zero_denominator = (b_r == 0) & (b_i == 0) & ~(np.isnan(a_r) & np.isnan(a_i))
    inf_with_sign_of_b_r = np.copysign(inf, b_r)
    zero_r, zero_i = P.mul(inf_with_sign_of_b_r, a_r), P.mul(inf_with_sign_of_b_r, a_i)
    # case 2: infinite / finite = inf in the direction of the quotient
    a_r_inf, a_i_inf = np.isinf(a_r), np.isinf(a_i)
    inf_num = (a_r_inf | a_i_inf) & (np.abs(b_r) != inf) & (np.abs(b_i) != inf)
    s_r = np.copysign(np.where(a_r_inf, one, zero), a_r)
    s_i = np.copysign(np.where(a_i_inf, one, zero), a_i)
    inf_r = P.mul(inf, P.fma(s_r, b_r, P.mul(s_i, b_i)))
    inf_i = P.mul(inf, P.fma(s_i, b_r, -P.mul(s_r, b_i)))
    # case 3: finite / infinite = 0 with the quotient's signs
    b_r_inf, b_i_inf = np.isinf(b_r), np.isinf(b_i)
    inf_den = (b_r_inf | b_i_inf) & (np.abs(a_r) != inf) & (np.abs(a_i) != inf)
    t_r = np.copysign(np.where(b_r_inf, one, zero), b_r)
    t_i = np.copysign(np.where(b_i_inf, one, zero), b_i)
    den_r = P.mul(zero, P.fma(a_r, t_r, P.mul(a_i, t_i)))
    den_i = P.mul(zero, P.fma(a_i, t_r, -P.mul(a_r, t_i)))
    both_nan = np.isnan(c_r) & np.isnan(c_i)
    re = np.where(both_nan & zero_denominator, zero_r,
                  np.where(both_nan & inf_num, inf_r, np.where(both_nan & inf_den, den_r, c_r)))
    im = np.where(both_nan & zero_denominator, zero_i,
                  np.where(both_nan & inf_num, inf_i, np.where(both_nan & inf_den, den_i, c_i)))
    return _make_complex(re, im)


def _part_type(shape):
    return dtypes.complex_component(shape.element_type)


def _multiply_reference(x, y, *, shape):
    if shape.element_type in _complex:
        with np.errstate(all="ignore"):
            return _to(_complex_multiply(np.asarray(x), np.asarray(y), _part_type(shape)), shape)
    return _elementwise(np.multiply)(x, y, shape=shape)


def _divide_reference(x, y, *, shape):
    if shape.element_type in _complex:
        with np.errstate(all="ignore"):
            return _to(_complex_divide(np.asarray(x), np.asarray(y), _part_type(shape)), shape)
    return _elementwise(_divide)(x, y, shape=shape)


def _divide(x, y):
    if x.dtype.kind in "iu":
        return _int_divide(x, y)
    return x / y


def _remainder(x, y):
    if x.dtype.kind in "iu":
        return _int_remainder(x, y)
    return np.fmod(x, y)


def _int_power(base, exponent):
    """XLA's integer power: 6 squarings (only the exponent's low 6 bits count), wrapping.  An
    exponent whose top bit is set is negative (for unsigned types too): the result is then 0,
    unless the base is 1 or -1 (all bits set)."""
    accumulator = np.ones_like(base)
    square = base.copy()
    e, n = _bits(exponent)
    negative = (e >> np.uint64(n - 1)) == 1
    base_bits, _ = _bits(base)
    unit = (base == 1) | (base_bits == np.uint64((1 << n) - 1))
    for _ in range(6):
        accumulator = np.where(e & np.uint64(1), accumulator * square, accumulator)
        square = square * square
        e = e >> np.uint64(1)
    return np.where(negative & ~unit, 0, accumulator).astype(base.dtype)


def _complex_power(x, y):
    """XLA's complex power, in the operands' own precision (its overflows are XLA's):
    (a+bi)^(c+di) = (a^2+b^2)^(c/2) e^(-d atan2(b,a)) (cos q + i sin q),
    q = c atan2(b,a) + d/2 ln(a^2+b^2); and 0^c = 1 (c = 0) or 0 (c > 0) for real c >= 0."""
    a, b, c, d = x.real, x.imag, y.real, y.imag
    aa_p_bb = a * a + b * b
    angle = np.arctan2(b, a)
    coefficient = np.power(aa_p_bb, c / 2) * np.exp(-d * angle)
    q = c * angle + d / 2 * np.log(aa_p_bb)
    result = _make_complex(coefficient * np.cos(q), coefficient * np.sin(q))
    zero_base = (aa_p_bb == 0) & (d == 0) & (c >= 0)
    zero_power = _make_complex(np.where(c == 0, 1, 0).astype(a.dtype), np.zeros_like(a))
    return np.where(zero_base, zero_power, result)


def _power(x, y):
    if x.dtype.kind in "iu":
        return _int_power(x, y)
    return np.power(x, y)


#: XLA:CPU's pow under DAZ reads a denormal base of either sign as 2**-150 (f32, bf16) or
#: 2**-1075 (f64) in magnitude: pow(d, 0.001) is 0.9012505 for every f32 denormal d, pow(d, -1)
#: is Inf (measured, jax 0.10.2; scripts/denormals_vs_xla.py)
XLA_POW_DENORMAL_EXPONENT = {"f32": -150, "bf16": -150, "f64": -1075}


def xla_pow_of_denormal(x, y, t):
    """pow(x, y) of a denormal ``x`` of type ``t`` as XLA:CPU gives it (float64 arrays): the
    sign as pow(+-1, y) (NaN for a negative x and a non-integer y), 2**(e * y) the magnitude."""
    with np.errstate(all="ignore"):
        return np.power(np.copysign(1.0, x), y) * np.exp2(XLA_POW_DENORMAL_EXPONENT[t] * y)


#: the bits of a signaling NaN by float type: (mask of exponent and quiet bit, their value
#: in a signaling NaN, mask of the payload below the quiet bit)
_SIGNALING = {"f32": (np.uint32, 0x7FC00000, 0x7F800000, 0x003FFFFF),
              "f64": (np.uint64, 0x7FF8000000000000, 0x7FF0000000000000, 0x0007FFFFFFFFFFFF)}


def _signaling(x, t):
    """Where ``x`` (of type ``t``, f32 or f64) is a signaling NaN."""
    bits_type, head_mask, head, payload = _SIGNALING[t]
    u = np.asarray(x).view(bits_type)
    return ((u & bits_type(head_mask)) == bits_type(head)) & ((u & bits_type(payload)) != 0)


def _power_reference(x, y, *, shape):
    t = shape.element_type
    if t in _complex:
        with np.errstate(all="ignore"):
            return _to(_complex_power(np.asarray(x), np.asarray(y)), shape)
    r = _real_power(x, y, shape)
    x, y = np.asarray(x), np.asarray(y)
    if t in _SIGNALING and x.dtype == y.dtype == shape.dtype:
        # pow(1, y) = pow(x, +-0) = 1, but a signaling NaN operand gives NaN: the C library's
        # rule (glibc 2.28 on), which XLA:CPU's pow follows (measured, jax 0.10.2, f32 and
        # f64). Made explicit on the typed bits: widening to f64 quiets a NaN, and NumPy's
        # own power answers 1 or NaN there by the processor's SIMD path.
        with np.errstate(invalid="ignore"):
            one = (x == 1) | (y == 0)
        signaling = _signaling(x, t) | _signaling(y, t)
        if np.any(one) or np.any(signaling):
            r = np.where(signaling, np.asarray(np.nan, shape.dtype), np.where(one, np.asarray(1, shape.dtype), r))
    return r


def _real_power(x, y, shape):
    t = shape.element_type
    if t in XLA_POW_DENORMAL_EXPONENT and fpenv.flushing(t):
        xw, yw = _wide(_carrier(x)), _wide(_carrier(y))
        denormal = (xw != 0) & (np.abs(xw) < fpenv.TINY[t])
        if np.any(denormal):
            with np.errstate(all="ignore"):
                r = np.where(denormal, xla_pow_of_denormal(xw, yw, t), _power(xw, yw))
            return _to(r, shape)
    return _elementwise(_power)(x, y, shape=shape)


def _maximum(x, y):
    """NaN-propagating maximum with -0.0 < +0.0.  Complex: XLA:CPU compares the real parts only,
    ``x if re(x) >= re(y) else y`` (so ``max(1+1j, 1+2j) = 1+1j``, and a NaN real part loses to
    a number on the left, wins on the right), as measured against XLA:CPU (jax 0.10.2)."""
    if x.dtype.kind == "c":
        return np.where(x.real >= y.real, x, y)
    result = np.maximum(x, y)
    if x.dtype.kind == "f":
        both_zero = (x == 0) & (y == 0)
        result = np.where(both_zero, np.where(np.signbit(x), y, x), result)
    return result


def _minimum(x, y):
    """NaN-propagating minimum with -0.0 < +0.0.  Complex: ``x if re(x) <= re(y) else y``
    (XLA:CPU compares the real parts only)."""
    if x.dtype.kind == "c":
        return np.where(x.real <= y.real, x, y)
    result = np.minimum(x, y)
    if x.dtype.kind == "f":
        both_zero = (x == 0) & (y == 0)
        result = np.where(both_zero, np.where(np.signbit(x), x, y), result)
    return result


def _atan2(y, x):
    if y.dtype.kind != "c":
        return np.arctan2(y, x)
    # atan2(y, x) = -i log((x + i y) / sqrt(x^2 + y^2)) for complex arguments
    return -1j * np.log((x + 1j * y) / np.sqrt(x * x + y * y))


def _complex_reference(lhs, rhs, *, shape):
    return _make_complex(lhs, rhs).astype(shape.dtype)


def _shift_amount(y):
    """Shift amounts are read as unsigned: -1 is huge, so it shifts everything out."""
    return _bits(y)[0]


def _shift_left(x, y, *, shape):
    u, n = _bits(x)
    amount = _shift_amount(y)
    mask = np.uint64((1 << n) - 1)
    shifted = (u << np.minimum(amount, np.uint64(n - 1))) & mask
    return _from_bits(np.where(amount >= n, np.uint64(0), shifted), shape)


def _shift_right_logical(x, y, *, shape):
    u, n = _bits(x)
    amount = _shift_amount(y)
    shifted = u >> np.minimum(amount, np.uint64(n - 1))
    return _from_bits(np.where(amount >= n, np.uint64(0), shifted), shape)


def _shift_right_arithmetic(x, y, *, shape):
    # the top bit is copied into the vacated bits, on unsigned types too; amounts >= the width
    # give the sign fill (all zeros or all ones)
    u, n = _bits(x)
    amount = np.minimum(_shift_amount(y), np.uint64(n - 1))
    mask = np.uint64((1 << n) - 1)
    negative = (u >> np.uint64(n - 1)) & np.uint64(1)
    fill = np.where(negative == 1, mask ^ (mask >> amount), np.uint64(0))
    return _from_bits((u >> amount) | fill, shape)


def _complex_of(t):
    return {"f32": "c64", "f64": "c128"}[t]


Add = _binary("add", "Add", _num | _pred, np.add, "lhs[i] + rhs[i] (or, for pred)",
              "Add(np.int32([1, 2]), np.int32(10))   # [11, 12]", reference=_elementwise(np.add, native=True))
Sub = _binary("subtract", "Sub", _num, np.subtract, "lhs[i] - rhs[i]",
              "Sub(np.uint8([0]), np.uint8([1]))   # [255]", reference=_elementwise(np.subtract, native=True))
Mul = _binary("multiply", "Mul", _num | _pred, None, "lhs[i] * rhs[i] (and, for pred)",
              "Mul(np.int8([64]), np.int8([2]))   # [-128]", reference=_multiply_reference)
Div = _binary("divide", "Div", _num, None, "lhs[i] / rhs[i] (integers: toward zero, x/0 = -1)",
              "Div(np.int32([7, -7, 5]), np.int32([2, 2, 0]))   # [3, -3, -1]", reference=_divide_reference)
Rem = _binary("remainder", "Rem", _int | _float, _remainder,
              "lhs[i] - rhs[i] * trunc(lhs[i] / rhs[i]) (the sign of lhs; x % 0 = x for integers)",
              "Rem(np.int32([7, -7, 5]), np.int32([2, 2, 0]))   # [1, -1, 5]", denormals=_divisor_only)
Max = _binary("maximum", "Max", _any, _maximum, "max(lhs[i], rhs[i]) (NaN if either is NaN)",
              "Max(np.float32([1, nan]), np.float32([2, 0]))   # [2., nan]")
Min = _binary("minimum", "Min", _any, _minimum, "min(lhs[i], rhs[i]) (NaN if either is NaN)",
              "Min(np.float32([1, nan]), np.float32([2, 0]))   # [1., nan]")
Pow = _binary("power", "Pow", _num, None, "lhs[i] ^ rhs[i]",
              "Pow(np.int32([2, 2]), np.int32([10, -1]))   # [1024, 0]",
              reference=_power_reference, denormals=_power_denormals)
def _atan2_denormals(operand_types, result_type, attrs):
    """Complex atan2 is computed (operands and result flushed); real atan2 flushes as XLA:CPU's
    own algorithms do, which is not a rule on operands (``_atan2_reference``: ``xla_atan2``)."""
    return fpenv.ARITHMETIC if result_type in _complex else fpenv.BITS


#: XLA:CPU's f32 atan2 of a normal y and a negative denormal x: pi/2 rounded down (its
#: polynomial reads x as -0 but not quite); 2**-966: below this |x|, its f64 atan2 of a
#: positive denormal y and a negative x is +pi, above it -pi
_HALF_PI_BELOW_F32 = float(np.nextafter(np.float32(np.pi / 2), np.float32(0)))
_ATAN2_F64_NEG_PI_FROM = 2.0 ** -966


def xla_atan2(y, x, t):
    """atan2 of float64 arrays holding values of the real type ``t`` as XLA:CPU computes it
    with denormals flushed (DAZ/FTZ), measured through jax 0.10.2 on x86-64 over every pair
    of zeros, denormals, normals and Inf of each sign (scripts/denormals_vs_xla.py).  Mostly it
    is the atan2 of the flushed operands, flushed; where a denormal meets the algorithm's
    tests on the raw bits it is not (f32 is XLA's polynomial, f64 the C library's):

    - a denormal y over a zero x: +-pi/2 (y is not read as zero there);
    - f32: a denormal y over a denormal x: NaN; over x == 1: y itself; a finite normal y over
      a negative denormal x: +-1.5707963 (pi/2 rounded down);
    - f64: a denormal y over a denormal x: +-pi/2; a positive denormal y over a negative
      normal x of magnitude 2**-966 or more: -pi (the sign of the flushed zero is lost)."""
    tiny = fpenv.TINY[t]
    with np.errstate(all="ignore"):
        dy = (y != 0) & (np.abs(y) < tiny)
        dx = (x != 0) & (np.abs(x) < tiny)
        r = np.arctan2(np.where(dy, y * 0, y), np.where(dx, x * 0, x))
        r = np.where((r != 0) & (np.abs(r) < tiny), r * 0, r)
        half_pi = np.copysign(np.pi / 2, y)
        r = np.where(dy & (x == 0), half_pi, r)
        if t == "f64":
            r = np.where(dy & dx, half_pi, r)
            return np.where(dy & (y > 0) & (x <= -_ATAN2_F64_NEG_PI_FROM) & np.isfinite(x), -np.pi, r)
        r = np.where(dy & dx, np.nan, r)
        r = np.where(dy & (x == 1), y, r)
        return np.where(dx & (x < 0) & ~dy & (y != 0) & np.isfinite(y), np.copysign(_HALF_PI_BELOW_F32, y), r)


def _atan2_reference(y, x, *, shape):
    t = shape.element_type
    if t in _complex or not fpenv.flushing(t):
        return _elementwise(_atan2)(y, x, shape=shape)
    with np.errstate(all="ignore"):
        return _to(xla_atan2(_wide(_carrier(y)), _wide(_carrier(x)), "f64" if t == "f64" else "f32"), shape)


Atan2 = _binary("atan2", "Atan2", _float | _complex, _atan2, "atan2(lhs[i], rhs[i]), the angle of (rhs[i], lhs[i])",
                "Atan2(np.float32([1]), np.float32([-1]))   # [2.3561945]", reference=_atan2_reference,
                denormals=_atan2_denormals)
Complex = _binary("complex", "Complex", frozenset({"f32", "f64"}), None,
                  "lhs[i] + i * rhs[i] (c64 from f32, c128 from f64)",
                  "Complex(np.float32([1]), np.float32([2]))   # [1.+2.j]", result_type=_complex_of,
                  reference=_complex_reference, denormals=fpenv.BITS)
And = _binary("and", "And", _int | _pred, np.bitwise_and, "lhs[i] & rhs[i] (logical for pred)",
              "And(np.uint8([12]), np.uint8([10]))   # [8]")
Or = _binary("or", "Or", _int | _pred, np.bitwise_or, "lhs[i] | rhs[i] (logical for pred)",
             "Or(np.uint8([12]), np.uint8([10]))   # [14]")
Xor = _binary("xor", "Xor", _int | _pred, np.bitwise_xor, "lhs[i] ^ rhs[i] (logical for pred)",
              "Xor(np.uint8([12]), np.uint8([10]))   # [6]")
ShiftLeft = _binary("shift-left", "ShiftLeft", _int, None, "lhs[i] << rhs[i] (0 when rhs[i] >= the bit width)",
                    "ShiftLeft(np.int32([1, 1]), np.int32([4, 32]))   # [16, 0]", reference=_shift_left)
ShiftRightArithmetic = _binary(
    "shift-right-arithmetic", "ShiftRightArithmetic", _int, None,
    "lhs[i] >> rhs[i], copying the top bit (the sign fill when rhs[i] >= the bit width)",
    "ShiftRightArithmetic(np.int32([-8, -8]), np.int32([1, 40]))   # [-4, -1]", reference=_shift_right_arithmetic)
ShiftRightLogical = _binary(
    "shift-right-logical", "ShiftRightLogical", _int, None,
    "lhs[i] >> rhs[i], filling with zeros (0 when rhs[i] >= the bit width)",
    "ShiftRightLogical(np.int32([-8]), np.int32([28]))   # [15]", reference=_shift_right_logical)

#: the 2018 spec's names for And and Or
LogicalAnd, LogicalOr = And, Or


# -- Compare -------------------------------------------------------------------------------------

_DIRECTIONS = ("EQ", "NE", "GE", "GT", "LE", "LT")
_COMPARE_TYPES = ("FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED")


def Compare(lhs, rhs, comparison_direction, compare_type=None, broadcast_dimensions=None):
    """Wraps XLA's Compare (HLO ``compare``): ``result[i] = lhs[i] <direction> rhs[i]``, a pred.

    ``comparison_direction`` is one of EQ NE GE GT LE LT.  ``compare_type`` (optional):
    FLOAT (IEEE: NaN is unordered, only NE is true; -0.0 == +0.0) or TOTALORDER (-NaN < -Inf <
    ... < -0.0 < +0.0 < ... < +Inf < +NaN) for floats, SIGNED or UNSIGNED for integers.
    Complex numbers: EQ/NE part by part, LT/GT lexicographically (real part first), LE/GE by
    the real parts only, as XLA:CPU compares them.  Shapes broadcast as for Add.

    >>> Compare(np.float32([1, nan]), np.float32([1, nan]), "EQ")   # [True, False]
    """
    # the attribute schema checks and upper-cases both (``hlo.attrs.coerce_attrs``)
    attrs = {"comparison_direction": comparison_direction, "compare_type": compare_type}
    return apply_op("compare", list(_broadcast_binary("Compare", lhs, rhs, broadcast_dimensions)), attrs)


def _compare_shape_rule(lhs, rhs, *, comparison_direction, compare_type=None):
    op = "Compare"
    _check_type(op, "lhs", lhs, _any)
    _check_type(op, "rhs", rhs, _any)
    _same_type(op, ("lhs", "rhs"), (lhs, rhs))
    # compare_c1 (StableHLO): the direction is one of six
    if comparison_direction not in _DIRECTIONS:
        raise ShapeError(f"{op}: comparison_direction={comparison_direction!r} is not one of "
                         f"{', '.join(_DIRECTIONS)}")
    t = lhs.element_type
    if compare_type is not None:
        allowed = (("FLOAT", "TOTALORDER") if t in _float else ("FLOAT",) if t in _complex else
                   ("SIGNED",) if t in _sint else ("UNSIGNED",))
        if compare_type not in _COMPARE_TYPES:
            raise ShapeError(f"{op}: compare_type={compare_type!r} is not one of {', '.join(_COMPARE_TYPES)}")
        # XLA's verifier: the comparison type must fit the element type
        if compare_type not in allowed:
            raise ShapeError(f"{op}: compare_type={compare_type} does not fit element type {t} ({lhs}); "
                             f"expected {' or '.join(allowed)}")
    dims, bounds = _same_dims(op, ("lhs", "rhs"), (lhs, rhs))
    return Shape("pred", dims, bounds)


def _total_order_key(x):
    """Floats as signed integers ordered like XLA's total order: each sign-magnitude bit
    pattern becomes a two's-complement one (negative values get their magnitude bits flipped)."""
    x = _contiguous(x)
    signed = np.dtype(f"i{x.dtype.itemsize}")
    s = x.view(signed)
    return np.where(s < 0, s ^ np.iinfo(signed).max, s)


def _compare_values(x, y, direction):
    return {"EQ": np.equal, "NE": np.not_equal, "GE": np.greater_equal, "GT": np.greater,
            "LE": np.less_equal, "LT": np.less}[direction](x, y)


def _compare_reference(lhs, rhs, *, shape, comparison_direction, compare_type=None):
    t = _type_of(lhs)
    total = compare_type == "TOTALORDER"
    if t in _complex:
        lhs, rhs = np.asarray(lhs), np.asarray(rhs)
        parts = (lhs.real, rhs.real, lhs.imag, rhs.imag)
        if total:
            parts = tuple(_total_order_key(p) for p in parts)
        xr, yr, xi, yi = parts
        if comparison_direction in ("EQ", "NE"):
            equal = (xr == yr) & (xi == yi)
            result = equal if comparison_direction == "EQ" else ~equal
        elif comparison_direction in ("LT", "GT"):  # lexicographic: real parts, then imaginary
            result = (_compare_values(xr, yr, comparison_direction) |
                      ((xr == yr) & _compare_values(xi, yi, comparison_direction)))
        else:  # XLA:CPU's LE and GE look at the real parts only (measured, jax 0.10.2)
            result = _compare_values(xr, yr, comparison_direction)
        return _to(result, shape)
    if total and t in _float:
        return _to(_compare_values(_total_order_key(lhs), _total_order_key(rhs), comparison_direction), shape)
    return _to(_compare_values(_wide(lhs), _wide(rhs), comparison_direction), shape)


def _compare_denormals(operand_types, result_type, attrs):
    """A FLOAT compare reads denormals as zeros (DAZ: -2**-149 == 0.0); TOTALORDER compares
    the bits as integers (XLA rewrites it so), where every denormal is itself."""
    return fpenv.BITS if attrs.get("compare_type") == "TOTALORDER" else fpenv.ARITHMETIC


registry.register("compare", "Compare", "elementwise", _compare_shape_rule, _compare_reference,
                  attrs=(Attr("comparison_direction", "str", hlo="direction", choices=_DIRECTIONS),
                         Attr("compare_type", "str", hlo="type", default=None, choices=_COMPARE_TYPES)),
                  categories=("elementwise", "comparison"), denormals=_compare_denormals)
describe("compare", broadcast_dimensions={"kind": "dims", "of": "lhs"},
         example={"lhs": "f32[2,3]", "rhs": {"shape": "f32[2,3]", "source": "random"}, "comparison_direction": "LT"})


def _comparison(direction, total_order=False):
    def api(lhs, rhs, broadcast_dimensions=None):
        compare_type = None
        if total_order:  # XlaBuilder: TOTALORDER for floats, the default order otherwise
            lhs, rhs = _as_operands(_weak([lhs, rhs]))
            if _shape_of(lhs).is_array and _shape_of(lhs).element_type in _float:
                compare_type = "TOTALORDER"
        return Compare(lhs, rhs, direction, compare_type, broadcast_dimensions)
    name = direction.capitalize() + ("TotalOrder" if total_order else "")
    api.__name__ = api.__qualname__ = name
    extra = ', "TOTALORDER"' if total_order else ""
    api.__doc__ = (f"Wraps XLA's {name}: ``Compare(lhs, rhs, \"{direction}\"{extra})``, a pred at "
                   f"every index.\n\n"
                   + ("    For floats: -NaN < -Inf < ... < -0.0 < +0.0 < ... < +Inf < +NaN.\n"
                      if total_order else "    IEEE comparison for floats: NaN is unordered.\n"))
    return api


Eq, Ne, Ge, Gt, Le, Lt = (_comparison(d) for d in _DIRECTIONS)
EqTotalOrder, NeTotalOrder, GeTotalOrder, GtTotalOrder, LeTotalOrder, LtTotalOrder = (
    _comparison(d, total_order=True) for d in _DIRECTIONS)


# -- Select --------------------------------------------------------------------------------------

def Select(pred, on_true, on_false):
    """Wraps XLA's Select (HLO ``select``): ``result[i] = on_true[i] if pred[i] else on_false[i]``.

    ``on_true`` and ``on_false`` have the same shape (tuples too, with a scalar ``pred``);
    ``pred`` is a pred array of the same dimensions, or a scalar that picks a whole operand
    (the builder broadcasts a scalar explicitly, as XlaBuilder does).

    >>> Select(np.array([True, False]), np.int32([1, 2]), np.int32([100, 200]))   # [1, 200]
    """
    on_true, on_false = _weak([on_true, on_false])
    values = _as_operands([pred, on_true, on_false])
    if not any(isinstance(v, tuple) or (isinstance(v, XlaOp) and v.shape.is_tuple) for v in values):
        values = _broadcast_scalars(values)
    return apply_op("select", values)


def _select_shape_rule(pred, on_true, on_false):
    op = "Select"
    if on_true.is_tuple or on_false.is_tuple:
        if on_true != on_false:
            raise ShapeError(f"{op}: on_true {on_true} and on_false {on_false} must have the same shape")
        # tuples count as scalars: the predicate picks a whole tuple
        if not (pred.is_array and pred.element_type == "pred" and pred.rank == 0):
            raise ShapeError(f"{op}: with tuple operands, pred must be a scalar pred, got {pred}")
        return on_true
    _check_type(op, "pred", pred, _pred)
    _check_array(op, "on_true", on_true)
    _check_array(op, "on_false", on_false)
    _same_type(op, ("on_true", "on_false"), (on_true, on_false))
    dims, bounds = _same_dims(op, ("on_true", "on_false"), (on_true, on_false))
    result = Shape(on_true.element_type, dims, bounds)
    if pred.rank != 0:  # a scalar pred is the spec's restricted broadcast
        try:
            _same_dims(op, ("pred", "on_true"), (pred, result))
        except ShapeError:
            raise ShapeError(f"{op}: pred {pred} must be a scalar or have the dimensions of on_true "
                             f"and on_false ({result})") from None
    return result


def _select_reference(pred, on_true, on_false, *, shape):
    if isinstance(on_true, tuple):
        if np.ndim(pred) == 0:
            return on_true if bool(pred) else on_false
        return tuple(np.where(pred, a, b) for a, b in zip(on_true, on_false))  # vectorised regions
    return _to(np.where(pred, on_true, on_false), shape)


registry.register("select", "Select", "elementwise", _select_shape_rule, _select_reference,
                  categories=("elementwise",), denormals=fpenv.BITS)
describe("select", example={"pred": {"shape": "pred[2,3]", "source": "random"}, "on_true": "f32[2,3]",
                           "on_false": ("f32[2,3]", 0)})


# -- Clamp ---------------------------------------------------------------------------------------

def Clamp(min, operand, max):  # noqa: A002 - the spec's argument names
    """Wraps XLA's Clamp (HLO ``clamp``): ``result[i] = min(max(min[i], operand[i]), max[i])``.

    ``min`` and ``max`` have the operand's shape or are scalars (broadcast explicitly by the
    builder, as XlaBuilder does); all three have the same element type.  NaN propagates.

    >>> Clamp(np.int32(0), np.int32([-1, 5, 9]), np.int32(6))   # [0, 5, 6]
    """
    values = _as_operands(_weak([operand, min, max]))
    operand, min, max = values
    values = _broadcast_scalars([min, operand, max])
    return apply_op("clamp", values)


def _clamp_shape_rule(min, operand, max):  # noqa: A002
    op = "Clamp"
    for arg, s in (("min", min), ("operand", operand), ("max", max)):
        _check_type(op, arg, s, _any)
    _same_type(op, ("operand", "min", "max"), (operand, min, max))
    dims, bounds = operand.dims, operand.bounds
    for arg, s in (("min", min), ("max", max)):
        if s.rank == 0:  # clamp: a scalar bound is the spec's restricted broadcast
            continue
        try:
            dims, bounds = _same_dims(op, ("operand", arg), (Shape(operand.element_type, dims, bounds), s))
        except ShapeError:
            raise ShapeError(f"{op}: {arg} {s} must be a scalar or have the operand's shape "
                             f"{operand}") from None
    return Shape(operand.element_type, dims, bounds)


def _clamp_reference(min, operand, max, *, shape):  # noqa: A002
    with np.errstate(all="ignore"):
        lo, x, hi = (_wide(v) for v in (min, operand, max))
        return _to(_minimum(_maximum(lo, x), hi), shape)


registry.register("clamp", "Clamp", "elementwise", _clamp_shape_rule, _clamp_reference,
                  categories=("elementwise",))
describe("clamp", example={"min": ("f32[]", 1), "operand": "f32[2,3]", "max": ("f32[]", 4)})


# -- ConvertElementType --------------------------------------------------------------------------

def ConvertElementType(operand, new_element_type):
    """Wraps XLA's ConvertElementType (HLO ``convert``): each element converted to
    ``new_element_type``, like C++'s ``static_cast``; the dimensions stay.

    Integers to floats and floats to narrower floats round to nearest even (overflow: Inf,
    NaN for f8e4m3fn); floats to integers truncate toward zero, saturate and map NaN to 0
    (XLA:CPU; the spec leaves it open); integers wrap; x -> pred is ``x != 0``; complex ->
    real keeps the real part.

    >>> ConvertElementType(np.float32([-1.7, 300, nan]), "u8")   # [0, 255, 0]
    """
    new_element_type = _element_type_name("ConvertElementType", new_element_type)
    return apply_op("convert", [operand], {"new_element_type": new_element_type})


def _convert_shape_rule(operand, *, new_element_type):
    op = "ConvertElementType"
    _check_array(op, "operand", operand)
    new_element_type = _element_type_name(op, new_element_type)
    return Shape(new_element_type, operand.dims, operand.bounds)


def _float_to_int(x, name):
    """Truncate toward zero; saturate at the type's limits; NaN -> 0 (XLA:CPU)."""
    n = dtypes.bit_width(name)
    info = dtypes.iinfo(name)
    upper = 2.0 ** (n - 1) if name in _sint else 2.0 ** n   # the first value out of range
    lower = -upper if name in _sint else 0.0
    t = np.trunc(x)
    too_big, too_small, nan = t >= upper, t < lower, np.isnan(t)
    safe = np.where(too_big | too_small | nan, 0, t)
    carrier = np.int64 if name in _sint or name in _SUB_BYTE else np.uint64
    result = safe.astype(carrier)
    result = np.where(too_big, np.array(int(info.max)).astype(carrier), result)
    result = np.where(too_small, np.array(int(info.min)).astype(carrier), result)
    return result


def _convert_reference(operand, *, shape, new_element_type):
    x = np.asarray(operand)
    source, target = _type_of(x), shape.element_type
    with np.errstate(all="ignore"):
        if source == target:
            return x.copy()
        if target == "pred":
            return _to(x != 0, shape)
        if source in _complex and target not in _complex:
            x, source = x.real, dtypes.complex_component(source)
        if source in _float and target in _int:
            return _to(_float_to_int(x.astype(np.float64), target), shape)
        if target in _SUB_BYTE or source in _SUB_BYTE:
            if target in _int:
                return _to(x.astype(np.int64), shape)
            x = x.astype(np.int64) if source in _int else x.astype(np.float64)
        # floats round to nearest even (ml_dtypes through f32 for bf16/f8, as XLA:CPU);
        # integers wrap; pred is 0 or 1
        return x.astype(shape.dtype)


def _convert_denormals(operand_types, result_type, attrs):
    """Conversions between f32 (bf16, c64 parts) and f64 run the processor's conversion
    instruction, which honours DAZ (f32 -> f64: a denormal operand becomes 0) and FTZ (f64 ->
    f32: a denormal result becomes 0); every other conversion works on the bits (bf16 <-> f32
    is a shift, f16 and f8 denormals are normal f32s, integers are never denormal)."""
    src = _component(operand_types[0]) if operand_types[0] else None
    dst = _component(result_type) if result_type else None
    if src in ("f32", "bf16") and dst == "f64":
        return (True,), False
    if src == "f64" and dst in ("f32", "bf16"):
        return (False,), True
    return fpenv.BITS


registry.register("convert", "ConvertElementType", "elementwise", _convert_shape_rule, _convert_reference,
                  attrs_from_shape=lambda shape: {"new_element_type": shape.element_type},
                  categories=("elementwise", "unary"), denormals=_convert_denormals)
describe("convert", new_element_type={"kind": "dtype"},
         example={"operand": {"shape": "f32[2,3]", "source": "random"}, "new_element_type": "s32"})


# -- BitcastConvertType --------------------------------------------------------------------------

def BitcastConvertType(operand, new_element_type):
    """Wraps XLA's BitcastConvertType (HLO ``bitcast-convert``): the same bits read as
    ``new_element_type``.

    Same widths: the dimensions stay (f32 -> s32).  A narrower type adds a last dimension of
    the width ratio (f32[3] -> u8[3,4], little-endian); a wider one removes a last dimension
    that must equal the ratio (u8[3,4] -> f32[3]; c128 -> c64[2]: the real part's 8 bytes, then
    the imaginary part's).  Complex <-> real and pred are refused.

    >>> BitcastConvertType(np.float32([1.0]), "s32")   # [1065353216]
    """
    new_element_type = _element_type_name("BitcastConvertType", new_element_type)
    return apply_op("bitcast-convert", [operand], {"new_element_type": new_element_type})


def _bitcast_width(t):
    """Bits of one element for BitcastConvertType: XLA stores a pred in a byte and bitcasts it
    as one (f64 -> pred[8]: each byte, true when it is not zero -- what XLA:CPU gives, and the
    shape jaxlib converts StableHLO's f64 -> 64 x i1 to; StableHLO itself counts i1 as one bit)."""
    return dtypes.bit_width(t)


def _bitcast_convert_shape_rule(operand, *, new_element_type):
    op = "BitcastConvertType"
    _check_array(op, "operand", operand)
    old, new = operand.element_type, _element_type_name(op, new_element_type)
    if (old in _complex) != (new in _complex):
        raise ShapeError(f"{op}: cannot bitcast between complex and real types ({old} -> {new})")
    old_bits, new_bits = _bitcast_width(old), _bitcast_width(new)
    # c128 <-> c64[2]: StableHLO's spec and interpreter allow it (its tests pin the bytes:
    # bitcast_convert_op_test_c128_to_c64); XLA:CPU refuses to compile it, JAX never emits it
    if max(old_bits, new_bits) % min(old_bits, new_bits):
        raise ShapeError(f"{op}: bit widths {old_bits} ({old}) and {new_bits} ({new}) do not divide")
    if old_bits > new_bits:  # a new minor dimension holds the pieces of each element
        return Shape(new, operand.dims + (old_bits // new_bits,), operand.bounds + (None,))
    if old_bits < new_bits:  # the minor dimension must hold exactly one new element
        ratio = new_bits // old_bits
        if operand.rank == 0 or operand.dims[-1] != ratio:
            raise ShapeError(f"{op}: converting {old} to the wider {new} needs a last dimension of size "
                             f"{ratio} (= {new_bits}/{old_bits} bits), got {operand}")
        return Shape(new, operand.dims[:-1], operand.bounds[:-1])
    return Shape(new, operand.dims, operand.bounds)


def _bitcast_convert_reference(operand, *, shape, new_element_type):
    x = _contiguous(operand)
    old, new = _type_of(x), shape.element_type
    if "pred" in (old, new) and old != new:   # a pred is a byte: true when not zero, written as 0 or 1
        if new == "pred":
            return (x.reshape(-1).view(np.uint8) != 0).reshape(shape.dims)
        return x.astype(np.uint8).reshape(-1).view(shape.dtype).reshape(shape.dims)
    if _type_of(x) in _SUB_BYTE or shape.element_type in _SUB_BYTE:
        raise NotImplementedError("BitcastConvertType: sub-byte types (s4, u4, ...) are not implemented "
                                  "in the reference")
    # little-endian: element k of the minor dimension is the k-th lowest-addressed piece
    return x.reshape(-1).view(shape.dtype).reshape(shape.dims)


registry.register("bitcast-convert", "BitcastConvertType", "elementwise", _bitcast_convert_shape_rule,
                  _bitcast_convert_reference,
                  attrs_from_shape=lambda shape: {"new_element_type": shape.element_type},
                  categories=("other",))  # not element-wise when the widths differ
describe("bitcast-convert", new_element_type={"kind": "dtype"},
         example={"operand": "f32[2,3]", "new_element_type": "s32"})


# -- ReducePrecision -----------------------------------------------------------------------------

def ReducePrecision(operand, mantissa_bits, exponent_bits):
    """Wraps XLA's ReducePrecision (HLO ``reduce-precision``): each float rounded to a format
    with ``exponent_bits`` and ``mantissa_bits`` and back, as XLA does it on the bits:

    - the mantissa is rounded to ``mantissa_bits`` bits, ties to even;
    - then values above the format's range become +-Inf, and values below its smallest
      normal number (its denormals included) become +-0;
    - NaN stays NaN (with its payload).

    >>> ReducePrecision(np.float32([1 + 2**-11, 70000]), mantissa_bits=10, exponent_bits=5)  # [1., inf]
    """
    return apply_op("reduce-precision", [operand],
                    {"exponent_bits": exponent_bits, "mantissa_bits": mantissa_bits})


def _reduce_precision_shape_rule(operand, *, exponent_bits, mantissa_bits):
    op = "ReducePrecision"
    _check_type(op, "operand", operand, _float)
    for name, v, least in (("exponent_bits", exponent_bits, 1), ("mantissa_bits", mantissa_bits, 0)):
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
            raise ShapeError(f"{op}: {name} must be an integer, got {v!r}")
        # reduce_precision_c2/c3: at least one exponent bit (zero vs Inf), mantissa_bits >= 0
        if v < least:
            raise ShapeError(f"{op}: {name}={v} must be >= {least}"
                             + (" (one exponent bit tells zero from infinity)" if least else ""))
    return Shape(operand.element_type, operand.dims, operand.bounds)


def _reduce_precision_reference(operand, *, shape, exponent_bits, mantissa_bits):
    x = np.asarray(operand)
    name = _type_of(x)
    if name in _SUB_BYTE:
        raise NotImplementedError(f"ReducePrecision: {name} is not implemented in the reference")
    info = dtypes.finfo(name)
    src_mantissa, src_exponent, n = int(info.nmant), int(info.nexp), x.dtype.itemsize * 8
    one = np.uint64(1)
    bits = _contiguous(x).view(f"u{x.dtype.itemsize}").astype(np.uint64)
    with np.errstate(all="ignore"):
        if mantissa_bits < src_mantissa:
            # round to nearest, ties to even: add half an ulp of the new format (minus one, plus
            # the last kept bit) and cut; a carry into the exponent is the correct result
            shift = np.uint64(src_mantissa - mantissa_bits)
            last_mantissa_bit = (bits >> shift) & one
            bias = last_mantissa_bit + (one << (shift - one)) - one
            bits = (bits + bias) & ~((one << shift) - one)
        if exponent_bits < src_exponent:
            exponent_mask = np.uint64(((1 << src_exponent) - 1) << src_mantissa)
            sign = bits & np.uint64(1 << (n - 1))
            src_bias, new_bias = (1 << (src_exponent - 1)) - 1, (1 << (exponent_bits - 1)) - 1
            exponent = bits & exponent_mask
            overflow = exponent > np.uint64((src_bias + new_bias) << src_mantissa)
            underflow = exponent <= np.uint64((src_bias - new_bias) << src_mantissa)  # denormals too
            bits = np.where(overflow, sign | exponent_mask, np.where(underflow, sign, bits))
        bits &= np.uint64((1 << n) - 1)
        result = bits.astype(f"u{x.dtype.itemsize}").view(x.dtype).reshape(x.shape)
        # NaN stays NaN with its payload, mantissa_bits=0 too: XLA:CPU's run-time code keeps it
        # (measured, jax 0.10.2; only XLA's constant folder, its evaluator, gives +Inf there)
        return np.where(np.isnan(x.astype(np.float64)), x, result).astype(shape.dtype)


registry.register("reduce-precision", "ReducePrecision", "elementwise", _reduce_precision_shape_rule,
                  _reduce_precision_reference,
                  attrs=(Attr("exponent_bits", "int"), Attr("mantissa_bits", "int")),
                  categories=("elementwise", "unary"),
                  denormals=fpenv.BITS)   # XLA does it on the bits (integer ops): no DAZ/FTZ
describe("reduce-precision", example={"operand": {"shape": "f32[2,3]", "source": "random"},
                                     "exponent_bits": 5, "mantissa_bits": 2})


__all__ = [
    # unary
    "Abs", "Neg", "Sign", "Not", "LogicalNot", "Exp", "Expm1", "Log", "Log1p", "Sqrt", "Rsqrt", "Cbrt",
    "Sin", "Cos", "Tan", "Tanh", "Logistic", "Erf", "Floor", "Ceil", "Round", "RoundNearestEven",
    "IsFinite", "Real", "Imag", "Clz", "PopulationCount",
    # binary
    "Add", "Sub", "Mul", "Div", "Rem", "Max", "Min", "Pow", "Atan2", "Complex", "And", "Or", "Xor",
    "LogicalAnd", "LogicalOr", "ShiftLeft", "ShiftRightArithmetic", "ShiftRightLogical",
    # comparisons
    "Compare", "Eq", "Ne", "Ge", "Gt", "Le", "Lt",
    "EqTotalOrder", "NeTotalOrder", "GeTotalOrder", "GtTotalOrder", "LeTotalOrder", "LtTotalOrder",
    # the rest
    "Select", "Clamp", "ConvertElementType", "BitcastConvertType", "ReducePrecision",
]
