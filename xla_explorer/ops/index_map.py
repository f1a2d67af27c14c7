"""Index maps: for each result element, which operand elements it reads (or writes).

Every data-movement op registers an ``index_map(*operand_values, shape, **attrs)``
returning an ``IndexMap``.  The reference's tests, the kernels' tests and the animators
all read the same map, so a picture cannot disagree with the semantics.

An ``IndexMap`` iterates over its *domain* (the result, or Scatter's updates) in
row-major order and gives one ``Access`` per index:

- ``reads``: ``((operand_number, operand_index), ...)`` the elements this result element
  is computed from, in order (one for a copy, a window's worth for ReduceWindow;
  empty when the element is padding);
- ``writes``: for Scatter-like maps, the result indices this domain element updates;
- ``source``: ``"operand"``, or ``"padding"`` (Pad's padding value, a window's padded
  cell), or ``"init"``;
- ``skipped`` / ``clamped``: Scatter's out-of-bounds updates, Gather's clamped starts;
- ``unknown``: the map depends on values that are not known (a shapes-only map: the
  operand is an ``Unknown``).  Then ``reads`` / ``writes`` are ``Candidates``: every
  element the access *may* touch, whatever the values (a gather's element reads one
  operand element of the column its offset fixes), never a guess of one;
- ``detail``: the spec's intermediate indices by their names (``batch_index``,
  ``full_start_index``, ``offset_index``, ...), for explanations.

Shapes only: an operand whose values are not known is an ``Unknown(shape)``, which has
the array's ``shape``, ``dtype`` and ``ndim`` but no elements (nothing is allocated, so
the map of a gather from ``f32[100000,100000]`` costs nothing); reading an element gives
``UNKNOWN``.  Maps whose reads depend on values (Gather's indices, Sort's keys ...)
check ``is_unknown`` and return ``Access(..., unknown=True)``.

Collectives are mapped over every device at once: their operand values are the
devices' operands stacked along a new leading axis (device number first), and so is the
domain: ``Access((device, *result_index), reads=((k, (source_device, *index)),))``.
Where an op has several results of one shape (Sort, a variadic collective), a ``copy``
map's ``reads[j]`` is what result ``j`` copies.
"""
import math
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class Access:
    index: tuple
    reads: tuple = ()
    writes: tuple = ()
    source: str = "operand"
    skipped: bool = False
    clamped: bool = False
    detail: dict = field(default_factory=dict, compare=False, hash=False)
    unknown: bool = False


class Candidates:
    """The elements an access may read or write when the values deciding it are unknown:
    every index of the box ``ranges`` (``(start, stop)`` per dimension) of each operand
    (or result) in ``numbers``, as ``(number, index)`` pairs.  It behaves as the tuple of
    those pairs without building it (a column of 100000 rows costs nothing)."""

    def __init__(self, ranges, numbers=(0,), extra=()):
        self.ranges = tuple((int(a), int(b)) for a, b in ranges)
        self.numbers = tuple(int(k) for k in numbers)
        #: single (number, index) pairs listed before the box (DynamicUpdateSlice's operand element)
        self.extra = tuple((int(k), tuple(int(i) for i in index)) for k, index in extra)
        self._box = int(np.prod([max(b - a, 0) for a, b in self.ranges], dtype=np.int64))

    def __len__(self):
        return len(self.extra) + self._box * len(self.numbers)

    def __bool__(self):
        return len(self) > 0

    def __iter__(self):
        yield from self.extra
        for k in self.numbers:
            for index in np.ndindex(*[max(b - a, 0) for a, b in self.ranges]):
                yield k, tuple(a + int(i) for (a, _), i in zip(self.ranges, index))

    def __getitem__(self, i):
        if not -len(self) <= i < len(self):
            raise IndexError(i)
        i %= len(self)
        if i < len(self.extra):
            return self.extra[i]
        k, rest = divmod(i - len(self.extra), self._box)
        sizes = [b - a for a, b in self.ranges]
        index = np.unravel_index(rest, sizes) if sizes else ()
        return self.numbers[k], tuple(a + int(j) for (a, _), j in zip(self.ranges, index))

    def __contains__(self, item):
        k, index = item
        index = tuple(int(i) for i in index)
        return (k, index) in self.extra or (k in self.numbers and len(index) == len(self.ranges) and
                                            all(a <= i < b for (a, b), i in zip(self.ranges, index)))

    def __eq__(self, other):
        return isinstance(other, Candidates) and \
            (self.ranges, self.numbers, self.extra) == (other.ranges, other.numbers, other.extra)

    __hash__ = None

    def __repr__(self):
        box = "[" + ", ".join(f"{a}" if b == a + 1 else f"{a}:{b}" for a, b in self.ranges) + "]"
        extra = "".join(f"{k} @ {list(i)} or " for k, i in self.extra)
        return f"Candidates({extra}{', '.join(str(k) for k in self.numbers)} @ {box})"


class _UnknownValue:
    """An element of an ``Unknown`` array."""
    __slots__ = ()

    def __repr__(self):
        return "UNKNOWN"

    def __str__(self):
        return "?"

    def __int__(self):
        raise UnknownValueError("an index value is not known (shapes only): pass the module's "
                                "arguments to see which elements are read")

    __index__ = __float__ = __bool__ = __int__


#: what reading an element of an ``Unknown`` gives
UNKNOWN = _UnknownValue()


class UnknownValueError(ValueError):
    """A value was needed that a shapes-only index map does not have."""


class Unknown:
    """An operand of known shape and unknown values: nothing is allocated.

    ``Unknown(Shape("f32", (100000, 100000)))``: ``.shape``, ``.dtype``, ``.ndim``,
    ``.size``; indexing gives ``UNKNOWN`` (or a smaller ``Unknown`` for a slice);
    turning it into a NumPy array raises ``UnknownValueError``."""

    def __init__(self, shape):
        from ..shapes import Shape
        self.xla_shape = shape if isinstance(shape, Shape) else Shape.parse(str(shape))
        # a dynamic dimension counts at its bound (its size is a value, and not known)
        bounds = self.xla_shape.bounds or (None,) * len(self.xla_shape.dims)
        self.shape = tuple(int(d if d is not None else (b or 0)) for d, b in zip(self.xla_shape.dims, bounds))
        self.dtype = self.xla_shape.dtype
        self.ndim = len(self.shape)
        self.size = int(np.prod(self.shape, dtype=np.int64))
        self.nbytes = 0

    def __getitem__(self, index):
        index = index if isinstance(index, tuple) else (index,)
        if all(isinstance(i, (int, np.integer)) for i in index) and len(index) == self.ndim:
            return UNKNOWN
        from ..shapes import Shape
        return Unknown(Shape(self.xla_shape.element_type, np.empty(self.shape, dtype=[])[index].shape))

    def __len__(self):
        return self.shape[0]

    def __array__(self, *args, **kwargs):
        raise UnknownValueError(f"the values of this {self.xla_shape} are not known (shapes only); pass the "
                                f"module's arguments to xe.index_map / xe.animate to use them")

    def __repr__(self):
        return f"Unknown({self.xla_shape})"


def is_unknown(value):
    """True for an ``Unknown`` array or the ``UNKNOWN`` element (or a tuple holding one)."""
    if isinstance(value, (tuple, list)):
        return any(is_unknown(v) for v in value)
    return isinstance(value, (Unknown, _UnknownValue))


class IndexMap:
    """The map of one op instance.  ``fn(index) -> Access`` is evaluated lazily."""

    def __init__(self, opcode, domain_shape, fn, *, operand_shapes=(), result_shape=None,
                 domain="result", combiner=None, kind="copy"):
        self.opcode = opcode
        self.domain_shape = tuple(int(d) for d in domain_shape)
        self._fn = fn
        self.operand_shapes = tuple(operand_shapes)
        self.result_shape = result_shape
        #: "result" (one Access per result element) or "updates" (Scatter: per update element)
        self.domain = domain
        #: "copy" (the result element is the one element read, or padding),
        #: "reduce" (the result combines all elements read), "scatter" (updates combine into writes)
        self.kind = kind
        self.combiner = combiner

    def __getitem__(self, index):
        index = tuple(int(i) for i in (index if isinstance(index, (tuple, list)) else (index,)))
        if len(index) != len(self.domain_shape) or any(not 0 <= i < d for i, d in zip(index, self.domain_shape)):
            raise IndexError(f"{self.opcode} index map: index {list(index)} is outside the "
                             f"{self.domain} shape {list(self.domain_shape)}")
        return self._fn(index)

    def __iter__(self):
        for index in np.ndindex(*self.domain_shape):
            yield self._fn(tuple(int(i) for i in index))

    def __len__(self):
        return math.prod(self.domain_shape)  # a Python int: no wrap-around for huge domains

    def __repr__(self):
        return (f"<IndexMap {self.opcode}: {self.kind} over {self.domain} "
                f"{list(self.domain_shape)}>")
