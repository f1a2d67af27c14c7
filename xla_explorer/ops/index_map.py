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
- ``detail``: the spec's intermediate indices by their names (``batch_index``,
  ``full_start_index``, ``offset_index``, ...), for explanations.
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
