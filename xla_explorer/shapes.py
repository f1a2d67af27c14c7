"""Shapes in XLA's syntax, and broadcasting as MLIR's Broadcastable trait states it.

``Shape("f32", (2, 3))`` prints ``f32[2,3]``; a dimension is an ``int`` (static), ``None``
(dynamic, ``?``) or bounded dynamic (``<=N``, given as the string ``"<=N"`` or via
``bounds``).  Tuple shapes hold other shapes; ``token[]`` is a shape of its own.
Layouts (``{1,0}``) are accepted by the parser and kept for printing, but never change
a value: values here are logical arrays.
"""
import math
import os
import re

from . import dtypes
from .errors import ShapeError, quote

#: a dimension must be below this (XLA stores sizes as int64)
MAX_DIMENSION = 1 << 63
#: tuple shapes nest at most this deep (deeper nesting is refused, never recursed into)
MAX_NESTING = 64
#: the most dimensions an array may have (NumPy's own limit: values could not be held)
MAX_RANK = 64


def _limit_from_environment():
    text = os.environ.get("XLA_EXPLORER_MAX_BYTES", "")
    try:
        return int(float(text)) if text.strip() else 2 << 30
    except ValueError:
        return 2 << 30


#: The one size limit: no array xla_explorer allocates -- a result, an intermediate, an
#: eager op's value, an index map's or an animation's operands, every simulated device's
#: copy of a collective's result -- may need more than this many bytes; it is refused
#: (SizeLimitError) before anything is allocated.  Default 2 GiB; set it with
#: ``xla_explorer.set_size_limit(nbytes)`` or the environment variable
#: ``XLA_EXPLORER_MAX_BYTES`` (read at import).
MAX_BYTES = _limit_from_environment()


def size_limit():
    """The size limit in bytes (see ``MAX_BYTES``)."""
    return MAX_BYTES


def set_size_limit(nbytes):
    """Set the size limit (bytes) for every backend; returns the previous limit."""
    global MAX_BYTES
    from .coerce import as_int
    old, MAX_BYTES = MAX_BYTES, as_int("set_size_limit", "nbytes", nbytes, minimum=0)
    return old


class Shape:
    __slots__ = ("element_type", "dims", "bounds", "layout", "tuple_shapes", "_depth")

    def __init__(self, element_type, dims=(), bounds=None, layout=None, tuple_shapes=None):
        self._depth = 0
        if tuple_shapes is not None or element_type == "tuple":
            self.element_type = "tuple"
            self.tuple_shapes = tuple(tuple_shapes or ())
            self.dims, self.bounds, self.layout = (), (), None
            for i, s in enumerate(self.tuple_shapes):
                if not isinstance(s, Shape):
                    raise ShapeError(f"Shape: tuple element {i} is {s!r}, not a Shape")
            self._depth = 1 + max((s._depth for s in self.tuple_shapes), default=0)
            if self._depth > MAX_NESTING:
                raise ShapeError(f"Shape: tuple shapes nest {self._depth} deep; at most {MAX_NESTING} levels "
                                 f"are supported")
            return
        if not isinstance(element_type, str):
            try:
                if element_type is None:
                    raise TypeError   # np.dtype(None) is float64: None must not mean f64
                element_type = dtypes.from_numpy(element_type)
            except (TypeError, ValueError):
                raise ShapeError(f"Shape: element type {element_type!r} is neither an XLA type name ('f32') nor "
                                 f"a NumPy dtype with one") from None
        try:
            self.element_type = dtypes.check_type(element_type)
        except ShapeError as e:
            raise ShapeError(f"Shape: {e}") from None
        if isinstance(dims, (str, bytes)) or not hasattr(dims, "__iter__"):
            if not isinstance(dims, int):
                raise ShapeError(f"Shape: dims must be a list of sizes, got {dims!r}")
        self.tuple_shapes = None
        if isinstance(dims, int):
            dims = (dims,)
        out_dims, out_bounds = [], []
        if len(dims) > MAX_RANK:
            raise ShapeError(f"Shape: {element_type} of rank {len(dims)}: arrays have at most {MAX_RANK} dimensions "
                             f"(NumPy's limit)")
        for i, d in enumerate(dims):
            b = None if bounds is None else bounds[i]
            if isinstance(d, str):
                d = d.strip()
                if d == "?":
                    d = None
                elif d.startswith("<=") and d[2:].isdigit():
                    d, b = None, int(d[2:])
                elif d.isdigit():
                    d = int(d)
                else:
                    raise ShapeError(f"Shape: dimension {i} is {d!r}, not a size, '?' or '<=N'")
            elif d is not None:
                from .coerce import is_int, short
                if not is_int(d):  # 2.9 is not a size (nor True); numpy integers are
                    raise ShapeError(f"Shape: dimension {i} must be an integer, got {short(d)} "
                                     f"({type(d).__name__}) in {element_type}{short(list(dims))}")
                d = int(d)
                if d < 0:
                    raise ShapeError(f"Shape: dimension {i} is negative ({d}) in {element_type}{list(dims)}")
            if d is not None and d >= MAX_DIMENSION:
                raise ShapeError(f"Shape: dimension {i} is {d}, not below 2**63 (XLA's sizes are int64)")
            if b is not None:
                from .coerce import as_int
                b = as_int("Shape", f"bound of dimension {i}", b, minimum=0)
                if b >= MAX_DIMENSION:
                    raise ShapeError(f"Shape: the bound of dimension {i} is {b}, not below 2**63")
            out_dims.append(d)
            out_bounds.append(b)
        self.dims = tuple(out_dims)
        self.bounds = tuple(out_bounds)
        self.layout = tuple(layout) if layout is not None else None

    # -- constructors -------------------------------------------------------------------
    @classmethod
    def tuple(cls, shapes):
        return cls("tuple", tuple_shapes=[s if isinstance(s, Shape) else Shape.parse(s) for s in shapes])

    @classmethod
    def token(cls):
        return cls("token")

    @classmethod
    def scalar(cls, element_type):
        return cls(element_type, ())

    @classmethod
    def parse(cls, text):
        """Parse XLA's shape syntax: ``f32[3,4]{1,0}``, ``s32[?,<=5]``, ``(f32[], token[])``."""
        parser = _ShapeText(text)
        shape = parser.shape()
        parser.end()
        return shape

    @classmethod
    def of(cls, value):
        """The shape of a NumPy array or scalar (or a tuple of them)."""
        import numpy as np
        if isinstance(value, (tuple, list)):
            return cls.tuple([cls.of(v) for v in value])
        if hasattr(value, "xla_shape"):  # ops.index_map.Unknown: a shape without values
            return value.xla_shape
        arr = np.asarray(value)
        return cls(dtypes.from_numpy(arr.dtype), arr.shape)

    # -- properties ---------------------------------------------------------------------
    @property
    def is_tuple(self):
        return self.element_type == "tuple"

    @property
    def is_token(self):
        return self.element_type == "token"

    @property
    def is_array(self):
        return not self.is_tuple and not self.is_token

    @property
    def rank(self):
        return len(self.dims)

    @property
    def dtype(self):
        return dtypes.to_numpy(self.element_type)

    @property
    def is_static(self):
        if self.is_tuple:
            return all(s.is_static for s in self.tuple_shapes)
        return all(d is not None for d in self.dims)

    def is_dynamic_dimension(self, i):
        return self.dims[i] is None

    @property
    def numel(self):
        """The element count, a Python int (a dynamic size counts its bound, or 0)."""
        n = 1
        for i, d in enumerate(self.dims):
            n *= d if d is not None else (self.bounds[i] or 0)
        return n

    @property
    def nbytes(self):
        """The bytes the array (or every leaf of a tuple) takes, a Python int."""
        return sum(leaf.numel * leaf.dtype.itemsize for leaf in self.leaves() if leaf.is_array)

    def with_type(self, element_type):
        return Shape(element_type, self.dims, self.bounds)

    def with_dims(self, dims):
        return Shape(self.element_type, dims)

    # -- value semantics (layouts do not count) -----------------------------------------
    def _key(self):
        if self.is_tuple:
            return ("tuple", tuple(s._key() for s in self.tuple_shapes))
        return (self.element_type, self.dims, self.bounds)

    def __eq__(self, other):
        if isinstance(other, str):
            other = Shape.parse(other)
        return isinstance(other, Shape) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def compatible(self, other):
        """Equal up to dynamic dimensions (a ``?`` matches any size)."""
        if self.is_tuple or other.is_tuple:
            return (self.is_tuple and other.is_tuple and len(self.tuple_shapes) == len(other.tuple_shapes)
                    and all(a.compatible(b) for a, b in zip(self.tuple_shapes, other.tuple_shapes)))
        return (self.element_type == other.element_type and self.rank == other.rank
                and all(a is None or b is None or a == b for a, b in zip(self.dims, other.dims)))

    def dim_str(self, i):
        d = self.dims[i]
        if d is not None:
            return str(d)
        return f"<={self.bounds[i]}" if self.bounds[i] is not None else "?"

    def __str__(self):
        return self.to_string(layout=False)

    def to_string(self, layout=False):
        if self.is_tuple:
            return "(" + ", ".join(s.to_string(layout) for s in self.tuple_shapes) + ")"
        if self.is_token:
            return "token[]"
        text = f"{self.element_type}[{','.join(self.dim_str(i) for i in range(self.rank))}]"
        if layout and self.rank:
            lay = self.layout if self.layout is not None else tuple(range(self.rank - 1, -1, -1))
            text += "{" + ",".join(map(str, lay)) + "}"
        return text

    def __repr__(self):
        return f"Shape({str(self)!r})"

    def leaves(self):
        """The array shapes of a (nested) tuple shape, depth first."""
        if self.is_tuple:
            return [leaf for s in self.tuple_shapes for leaf in s.leaves()]
        return [self]


class _ShapeText:
    _TOKEN = re.compile(r"\s*([A-Za-z][A-Za-z0-9]*)")

    def __init__(self, text, pos=0):
        self.text, self.pos = text, pos

    def error(self, what):
        text = self.text if len(self.text) <= 80 else self.text[max(0, self.pos - 40):self.pos + 40]
        raise ShapeError(f"Shape.parse: expected {what} at column {self.pos + 1} of {text!r}")

    def skip(self):
        while self.pos < len(self.text) and self.text[self.pos] in " \t\n":
            self.pos += 1
        # comments such as /*index=5*/ inside tuple shapes
        while self.text.startswith("/*", self.pos):
            end = self.text.find("*/", self.pos)
            if end < 0:
                self.error("the end of a /* comment */")
            self.pos = end + 2
            while self.pos < len(self.text) and self.text[self.pos] in " \t\n":
                self.pos += 1

    def peek(self):
        self.skip()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def expect(self, ch):
        if self.peek() != ch:
            self.error(repr(ch))
        self.pos += 1

    def end(self):
        if self.peek():
            self.error("the end of the shape")

    def shape(self, depth=0):
        if self.peek() == "(":
            if depth >= MAX_NESTING:
                self.error(f"at most {MAX_NESTING} levels of nested tuples, not more")
            self.pos += 1
            parts = []
            if self.peek() != ")":
                parts.append(self.shape(depth + 1))
                while self.peek() == ",":
                    self.pos += 1
                    parts.append(self.shape(depth + 1))
            self.expect(")")
            return Shape.tuple(parts)
        m = self._TOKEN.match(self.text, self.pos)
        if not m:
            self.error("an element type (f32, s32, pred, ...) or '('")
        name = m.group(1)
        if name not in dtypes.ALL_TYPES:
            self.error(f"a known element type, not {quote(name)}")
        self.pos = m.end()
        if name == "token":
            if self.peek() == "[":
                self.pos += 1
                self.expect("]")
            return Shape.token()
        self.expect("[")
        dims = []
        if self.peek() != "]":
            dims.append(self.dim())
            while self.peek() == ",":
                self.pos += 1
                dims.append(self.dim())
        self.expect("]")
        layout = None
        if self.peek() == "{":
            layout = self.layout()
        return Shape(name, dims, layout=layout)

    def dim(self):
        self.skip()
        m = re.compile(r"(<=\s*\d+|\?|\d+)").match(self.text, self.pos)
        if not m:
            self.error("a dimension size (an integer, '?' or '<=N')")
        self.pos = m.end()
        return m.group(1).replace(" ", "")

    def layout(self):
        start = self.pos
        depth = 0
        while self.pos < len(self.text):
            c = self.text[self.pos]
            depth += (c == "{") - (c == "}")
            self.pos += 1
            if depth == 0:
                break
        if depth:
            self.pos = start
            self.error("the '}' closing the layout")
        body = self.text[start + 1:self.pos - 1]
        minor = body.split(":")[0].strip()
        if not minor:
            return None
        try:
            return tuple(int(x) for x in minor.split(","))
        except ValueError:
            return None


def as_shape(x):
    if isinstance(x, Shape):
        return x
    if isinstance(x, str):
        return Shape.parse(x)
    raise TypeError(f"expected a Shape or shape text, got {type(x).__name__}")


# ---------------------------------------------------------------------------------------
# Broadcasting: MLIR's Broadcastable trait (spec/002), dynamic dims included.

def infer_dim(dim0, dim1, *, op="broadcast", dim=None):
    """The trait's InferDim table: ``None`` is a dynamic (``?``) size."""
    if dim0 is None and dim1 is None:
        return None
    if dim0 is None:
        return None if dim1 == 1 else dim1          # (?, 1) -> ?; (?, >1) -> dim1
    if dim1 is None:
        return None if dim0 == 1 else dim0          # (1, ?) -> ?; (>1, ?) -> dim0
    if dim0 == 1:
        return dim1
    if dim1 == 1 or dim0 == dim1:
        return dim0
    where = "" if dim is None else f" in result dimension {dim}"
    raise ShapeError(f"{op}: sizes {dim0} and {dim1}{where} are not broadcast-compatible "
                     "(static sizes must be equal, or one of them 1)")


def _dims(s):
    return list(s.dims) if isinstance(s, Shape) else [None if d in (None, "?") else int(d) for d in s]


def infer_shape(dims0, dims1, *, op="broadcast"):
    """InferShape: expand the shorter rank with 1s on the left, then InferDim per dimension."""
    a, b = _dims(dims0), _dims(dims1)
    rank = max(len(a), len(b))
    a = [1] * (rank - len(a)) + a
    b = [1] * (rank - len(b)) + b
    return tuple(infer_dim(x, y, op=op, dim=i) for i, (x, y) in enumerate(zip(a, b)))


def infer_result_shape(operand_shapes, *, op="broadcast"):
    """InferResultShape over any number of operands (``None`` entries are unranked)."""
    ranked = [s for s in operand_shapes if s is not None]
    if not ranked:
        return None
    inferred = tuple(_dims(ranked[0]))
    for s in ranked[1:]:
        inferred = infer_shape(inferred, s, op=op)
    return inferred


def verify_broadcast(operand_shapes, result_dims, *, op="broadcast"):
    """The trait's Verify: the result must be compatible with the inferred shape."""
    inferred = infer_result_shape(operand_shapes, op=op)
    if result_dims is None or inferred is None:
        return
    actual = _dims(result_dims)
    if len(inferred) != len(actual):
        raise ShapeError(f"{op}: the result has rank {len(actual)} but the operands broadcast to "
                         f"rank {len(inferred)} ({_fmt(inferred)} vs result {_fmt(actual)})")
    for i, (inf, act) in enumerate(zip(inferred, actual)):
        if inf is None and act is not None:
            raise ShapeError(f"{op}: result dimension {i} is static ({act}) but the operands only "
                             f"determine it at run time (inferred {_fmt(inferred)}, result {_fmt(actual)})")
        if act is not None and inf != act:
            raise ShapeError(f"{op}: result dimension {i} is {act} but the operands broadcast to {inf} "
                             f"(inferred {_fmt(inferred)}, result {_fmt(actual)})")


def _fmt(dims):
    return "[" + ",".join("?" if d is None else str(d) for d in dims) + "]"


def check_size(shape, op, *, itemsize=None, copies=1, what="the result"):
    """Refuse an array of ``shape`` that would take more than the size limit, before anything
    is allocated.  ``itemsize``: bytes per element when it is computed wider than its type
    (the reference computes f32 in f64: 8); ``copies``: how many such arrays exist at once
    (one per simulated device, or an executor's temporaries).  Returns the bytes."""
    total, wide = 0, ""
    for leaf in shape.leaves():
        if not leaf.is_array:
            continue
        size = leaf.dtype.itemsize
        if itemsize and itemsize > size:
            size, wide = itemsize, f" (computed at {itemsize} bytes an element)"
        total += leaf.numel * size * copies
    if total > MAX_BYTES:
        from .errors import SizeLimitError
        per = "" if copies == 1 else f" x {copies} copies"
        raise SizeLimitError(f"{op}: {what} {shape} needs {total:,} bytes{wide}{per}, more than the limit of "
                             f"{MAX_BYTES:,} bytes; refused before allocating (raise it with "
                             f"xla_explorer.set_size_limit(nbytes) or XLA_EXPLORER_MAX_BYTES)")
    return total


def check_count(count, itemsize, op, what):
    """The size guard for arrays that are not an instruction's value (index maps, animation
    grids): ``count`` elements of ``itemsize`` bytes."""
    total = int(count) * int(itemsize)
    if total > MAX_BYTES:
        from .errors import SizeLimitError
        raise SizeLimitError(f"{op}: {what} needs {total:,} bytes ({int(count):,} elements), more than the limit "
                             f"of {MAX_BYTES:,} bytes; refused before allocating (raise it with "
                             f"xla_explorer.set_size_limit(nbytes) or XLA_EXPLORER_MAX_BYTES)")
    return total


def prod(dims):
    """The product of sizes as a Python int (never wraps around, unlike np.prod)."""
    return math.prod(int(d) for d in dims)
