"""The floating-point environment of a run: what happens to denormal numbers.

XLA:CPU runs every executable with the processor's *denormals-are-zero* (DAZ) and
*flush-to-zero* (FTZ) modes switched on: its CPU client wraps each execution in
``tsl::port::ScopedFlushDenormal`` (``xla/pjrt/cpu/cpu_client.cc``), as TensorFlow's thread
pools do, and no flag turns that off.  So on XLA:CPU, an f32, f64 or bf16 *computation*

- reads a denormal operand (``|x| <`` the smallest normal number, ``2**-126`` for f32 and
  bf16, ``2**-1022`` for f64) as a zero of the same sign, and
- writes a zero of the same sign where the exact result would be denormal.

f16 and the f8 types are computed in f32, where their denormals are normal numbers: they
are never flushed.  Complex numbers are flushed part by part.  An op that only *moves*
bits (copy, reshape, slice, gather, negate, abs, select, bitcast, a conversion done on the
bits) keeps a denormal as it is; the two cases are told apart op by op (``rule_of``), as
measured against XLA:CPU through JAX 0.10.2, and every executor honours them.

Two modes, switchable (``"flush"``, XLA:CPU's, is the default):

>>> import xla_explorer as xe
>>> xe.get_float_env()
FloatEnv(denormals='flush')
>>> with xe.float_env(denormals="ieee"):     # exact IEEE 754: denormals kept
...     r = comp.run(x)                        # doctest: +SKIP
>>> comp.run(x, denormals="ieee")            # the same, for one run   # doctest: +SKIP
>>> xe.set_float_env(denormals="ieee")       # for everything that follows   # doctest: +SKIP

The ``jax`` backend runs XLA itself: on XLA:CPU it always flushes, so it refuses to run in
``"ieee"`` mode rather than answer something else.

XLA:CPU's own algorithms read some denormals on their bits, and the reference copies what
was measured (``scripts/denormals_vs_xla.py``): f32 ``cbrt`` of a denormal is
``-5.5951735e-16``; ``atan2`` (``ops.elementwise.xla_atan2``) gives NaN for two f32
denormals and ``-pi`` for a positive f64 denormal over a negative x; ``pow`` reads a
denormal base as ``2**-150`` (f32) or ``2**-1075`` (f64).  Simplifications (XLA's quirks the
reference does not copy): complex ``expm1``/``rsqrt``/``tan``/``tanh``/``pow`` of denormal parts (the sign of a
zero), ``atan2(y, 1.0)`` with a constant 1 (LLVM makes it ``atan``, which keeps a denormal),
and a bf16 compare with a constant zero that LLVM rewrites into a test on the bits.
"""
import contextlib
import threading

import numpy as np

from . import dtypes

#: the modes: XLA:CPU's (DAZ + FTZ) and exact IEEE 754
MODES = ("flush", "ieee")
#: element types whose denormals XLA:CPU flushes (computed in f32/f64 hardware)
FLUSHED_TYPES = frozenset({"f32", "f64", "bf16", "c64", "c128"})
#: the smallest normal number of each flushed type (of its parts, for complex)
TINY = {"f32": float(np.finfo(np.float32).tiny), "bf16": float(np.finfo(np.float32).tiny),
        "c64": float(np.finfo(np.float32).tiny), "f64": float(np.finfo(np.float64).tiny),
        "c128": float(np.finfo(np.float64).tiny)}

_lock = threading.Lock()
_mode = "flush"


class FloatEnv:
    """A floating-point environment: ``denormals`` is ``"flush"`` or ``"ieee"``."""

    __slots__ = ("denormals",)

    def __init__(self, denormals="flush"):
        self.denormals = _check_mode(denormals)

    @property
    def flushes(self):
        return self.denormals == "flush"

    def __eq__(self, other):
        return isinstance(other, FloatEnv) and other.denormals == self.denormals

    def __hash__(self):
        return hash(self.denormals)

    def __repr__(self):
        return f"FloatEnv(denormals={self.denormals!r})"


def _check_mode(mode):
    if mode not in MODES:
        raise ValueError(f"denormals={mode!r} is not a floating-point mode; use 'flush' (XLA:CPU's "
                         f"default: denormal operands read as 0, denormal results written as 0) or "
                         f"'ieee' (exact IEEE 754, denormals kept)")
    return mode


def get_float_env():
    """The current environment (``FloatEnv(denormals='flush')`` unless changed)."""
    return FloatEnv(_mode)


def set_float_env(denormals="flush"):
    """Set the environment for every later run and eager op; returns the previous one."""
    global _mode
    mode = _check_mode(denormals)
    with _lock:
        previous, _mode = _mode, mode
    return FloatEnv(previous)


@contextlib.contextmanager
def float_env(denormals="flush"):
    """``with float_env(denormals="ieee"): ...`` runs the block in that environment (every
    backend, every thread of the process) and restores the previous one after it."""
    previous = set_float_env(denormals)
    try:
        yield get_float_env()
    finally:
        set_float_env(previous.denormals)


def flushing(element_type=None):
    """True when the current mode flushes (values of ``element_type``, if given)."""
    return _mode == "flush" and (element_type is None or element_type in FLUSHED_TYPES)


# -- flushing NumPy values -------------------------------------------------------------------

def _type_name(x):
    try:
        return dtypes.from_numpy(x.dtype)
    except ValueError:
        return None


def flush(x, element_type=None):
    """``x`` with its denormals replaced by zeros of the same sign, when its type is one XLA:CPU
    flushes (in either mode: callers decide when to flush).  Other values come back as they are."""
    if isinstance(x, tuple):
        return tuple(flush(v) for v in x)
    if not isinstance(x, (np.ndarray, np.generic)):
        return x
    t = element_type or _type_name(x)
    if t not in FLUSHED_TYPES:
        return x
    if np.ndim(x) == 0 and t in ("f32", "f64", "bf16"):
        # one value (a reduce's init, a scalar operand), not denormal: as it is, without the
        # errstate and temporaries below (6 us a call; the value is exact in a Python float)
        if not 0 < abs(float(x)) < TINY[t]:
            return x
    if t in ("c64", "c128"):
        re, im = flush(x.real, "f32" if t == "c64" else "f64"), flush(x.imag, "f32" if t == "c64" else "f64")
        if re is x.real and im is x.imag:
            return x
        out = np.empty(np.shape(x), x.dtype)
        out.real, out.imag = re, im
        return out if isinstance(x, np.ndarray) else out[()]
    with np.errstate(all="ignore"):
        small = np.abs(x.astype(np.float64) if t == "bf16" else x) < TINY[t]
        small &= x != 0
        if not np.any(small):
            return x
        return np.where(small, x * np.zeros((), x.dtype), x).astype(x.dtype, copy=False)


# -- which operands and results of an op are flushed ------------------------------------------

#: rule values: flush every float operand and the result / nothing / the result only
ARITHMETIC, BITS, RESULT = "arithmetic", "bits", "result"


def rule_of(op, operand_types, result_type, attrs=None):
    """(flush operand k?, ..., flush the result?) for ``op`` (an ``OpDef``) on these types,
    whatever the mode.  ``op.denormals`` says it: ``"arithmetic"`` (operands and result),
    ``"bits"`` (nothing), ``"result"``, or a callable of ``(operand_types, result_type, attrs)``;
    unset, an element-wise or linear-algebra op computes (``"arithmetic"``), any other moves
    data or leaves the arithmetic to its called computations (``"bits"``)."""
    rule = getattr(op, "denormals", None)
    if rule is None:
        rule = ARITHMETIC if op.categories & {"elementwise", "linalg"} else BITS
    if callable(rule):
        rule = rule(operand_types, result_type, attrs or {})
    if rule == ARITHMETIC:
        return tuple(t in FLUSHED_TYPES for t in operand_types), result_type in FLUSHED_TYPES
    if rule == BITS:
        return (False,) * len(operand_types), False
    if rule == RESULT:
        return (False,) * len(operand_types), result_type in FLUSHED_TYPES
    mask, result = rule
    return tuple(bool(m) and t in FLUSHED_TYPES for m, t in zip(mask, operand_types)), \
        bool(result) and result_type in FLUSHED_TYPES


def element_types(shape):
    """The element type of an array shape (None for tuples and tokens)."""
    return shape.element_type if shape.is_array else None


__all__ = ["FloatEnv", "get_float_env", "set_float_env", "float_env", "flush", "flushing", "rule_of",
           "MODES", "FLUSHED_TYPES"]


def _value_type(v):
    return _type_name(v) if isinstance(v, (np.ndarray, np.generic)) else None


def prepare(op, values, shape, attrs=None):
    """For an executor about to run ``op``: its operand values flushed as its rule says in the
    current mode, and whether to flush its result (``flush(result)``) afterwards."""
    if _mode != "flush":
        return values, False
    mask, result = rule_of(op, [_value_type(v) for v in values], element_types(shape), attrs)
    if any(mask):
        values = [flush(v) if m else v for v, m in zip(values, mask)]
    return values, result
