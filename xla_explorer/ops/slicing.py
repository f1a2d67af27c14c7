"""Slicing ops: Slice, DynamicSlice, DynamicUpdateSlice, Pad.

Each reference reads like the spec's formula; each op has an index map that says, for a
result element, which operand element it copies (or that it is padding), with the
clamping of dynamic start indices made explicit.

XLA semantics the corpus pins down (hlo_corpus/README.md): a dynamic start index is
clamped so that the whole slice (or update) is in bounds, whatever its integer type,
huge unsigned values included; Pad's edge padding may be negative (it crops), interior
padding may not.
"""
import numpy as np

from .. import dtypes
from ..builder import XlaOp, apply_op
from ..errors import ShapeError
from ..hlo.attrs import Attr, PaddingConfig, SliceAttr
from ..shapes import Shape
from . import registry
from .index_map import Access, IndexMap
from .shape import Reshape, Slice as _unused  # noqa: F401  (placeholder, replaced below)
