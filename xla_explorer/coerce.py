"""Strict conversion of the values users give for attributes: one set of rules for every op.

A dimension list takes integers (Python ints, NumPy integer scalars, 1-D integer arrays)
and nothing else: ``2.9``, ``"01"``, ``True`` are refused, never truncated, read digit by
digit or taken for 1.  A flag takes a bool (``"False"`` is refused: it is truthy).  Each
function returns the value in the form the shape rules and the HLO printer use (Python
ints, tuples) or raises a ``ShapeError`` naming the op, the argument and the value.

The ops' attribute schemas (``hlo.attrs.Attr`` and friends) call these from
``builder.apply_op``, so every op gets the same rules without repeating them.
"""
import reprlib

import numpy as np

from .errors import ShapeError, quote

_repr = reprlib.Repr()
_repr.maxlist = _repr.maxtuple = 8
_repr.maxstring = _repr.maxother = 60
_repr.maxlevel = 3


def short(v):
    """A repr of a user value short enough for an error message (huge lists are cut)."""
    if isinstance(v, np.ndarray):
        if v.size <= 8:
            return f"np.array({v.tolist()!r}, {v.dtype})"
        return f"<{v.dtype} array of shape {list(v.shape)}>"
    try:
        return _repr.repr(v)
    except Exception:  # noqa: BLE001 - a user object whose repr fails still gets a message
        return f"<{type(v).__name__} object>"


def is_int(x):
    """A Python or NumPy integer (bools are not integers here: ``True`` is not ``1``)."""
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def _integer_array(x):
    return isinstance(x, np.ndarray) and x.dtype.kind in "iu"


#: XLA keeps integer attributes as int64
INT64 = (-(1 << 63), (1 << 63) - 1)


def _int64(op, arg, v):
    if not INT64[0] <= v <= INT64[1]:
        raise ShapeError(f"{op}: {arg}={v} does not fit int64 (XLA's integer attributes are int64)")
    return v


def as_int(op, arg, v, minimum=None, maximum=None):
    """An integer attribute (a 0-d integer array counts), as a Python int."""
    if _integer_array(v) and v.ndim == 0:
        v = v[()]
    if not is_int(v):
        raise ShapeError(f"{op}: {arg} must be an integer, got {short(v)} ({type(v).__name__})")
    v = _int64(op, arg, int(v))
    if minimum is not None and v < minimum:
        raise ShapeError(f"{op}: {arg}={v} must be >= {minimum}")
    if maximum is not None and v > maximum:
        raise ShapeError(f"{op}: {arg}={v} must be <= {maximum}")
    return v


def as_int_list(op, arg, v, minimum=None):
    """A list of integers (list, tuple, range, 1-D integer array) as a tuple of Python ints."""
    if _integer_array(v) and v.ndim == 1:
        v = v.tolist()
    if not isinstance(v, (list, tuple, range)):
        raise ShapeError(f"{op}: {arg} must be a list of integers, got {short(v)} ({type(v).__name__})")
    out = []
    for i, x in enumerate(v):
        if _integer_array(x) and x.ndim == 0:
            x = x[()]
        if not is_int(x):
            raise ShapeError(f"{op}: {arg} must be a list of integers, but {arg}[{i}]={short(x)} is not one "
                             f"({arg}={short(v)})")
        x = _int64(op, f"{arg}[{i}]", int(x))
        if minimum is not None and x < minimum:
            raise ShapeError(f"{op}: {arg}[{i}]={x} must be >= {minimum} ({arg}={short(v)})")
        out.append(x)
    return tuple(out)


def as_size_list(op, arg, v):
    """Result sizes: integers >= 0, or None for a dynamic (``?``) size."""
    if _integer_array(v) and v.ndim == 1:
        v = v.tolist()
    if not isinstance(v, (list, tuple, range)):
        raise ShapeError(f"{op}: {arg} must be a list of sizes (integers), got {short(v)} ({type(v).__name__})")
    out = []
    for i, x in enumerate(v):
        if x is None:
            out.append(None)
            continue
        if _integer_array(x) and x.ndim == 0:
            x = x[()]
        if not is_int(x):
            raise ShapeError(f"{op}: {arg} must be a list of sizes (integers), but {arg}[{i}]={short(x)} is not "
                             f"one ({arg}={short(v)})")
        if x < 0:
            raise ShapeError(f"{op}: {arg}[{i}]={int(x)} is negative; sizes must be >= 0 ({arg}={short(v)})")
        out.append(_int64(op, f"{arg}[{i}]", int(x)))
    return tuple(out)


def as_int_lists(op, arg, v):
    """A list of integer lists (replica groups, source-target pairs) as a tuple of tuples."""
    if _integer_array(v) and v.ndim == 2:
        v = v.tolist()
    if not isinstance(v, (list, tuple)):
        raise ShapeError(f"{op}: {arg} must be a list of lists of integers, got {short(v)} ({type(v).__name__})")
    return tuple(as_int_list(op, f"{arg}[{i}]", g) for i, g in enumerate(v))


def as_bool(op, arg, v):
    """A flag: ``True``/``False`` (or a NumPy bool); ``"False"``, ``0``, ``None`` are refused."""
    if isinstance(v, np.ndarray) and v.ndim == 0 and v.dtype == np.bool_:
        v = v[()]
    if not isinstance(v, (bool, np.bool_)):
        raise ShapeError(f"{op}: {arg} must be True or False, got {short(v)} ({type(v).__name__})")
    return bool(v)


def as_float(op, arg, v):
    """A real number (int or float, not a bool or a string), as a Python float."""
    if isinstance(v, np.ndarray) and v.ndim == 0 and v.dtype.kind in "iuf":
        v = v[()]
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise ShapeError(f"{op}: {arg} must be a number, got {short(v)} ({type(v).__name__})")
    return float(v)


def as_str(op, arg, v, choices=None):
    """A text attribute; with ``choices``, one of them (compared upper-case when they all are)."""
    if not isinstance(v, str):
        v = getattr(v, "name", v)   # enums such as FftType.FFT
    if not isinstance(v, str):
        raise ShapeError(f"{op}: {arg} must be a string, got {short(v)} ({type(v).__name__})")
    if choices is not None:
        if all(c == c.upper() for c in choices):
            v = v.upper()
        if v not in choices:
            raise ShapeError(f"{op}: {arg}={quote(v)} is not one of {', '.join(choices)}")
    return v


def is_computation(v):
    from .computation import XlaComputation
    from .hlo.ir import HloComputation
    return isinstance(v, (XlaComputation, HloComputation)) or (callable(v) and not isinstance(v, type))


def as_computation(op, arg, v):
    """A computation attribute: an XlaComputation (or HloComputation) or a Python callable."""
    if not is_computation(v):
        raise ShapeError(f"{op}: {arg} must be an XlaComputation or a Python callable (traced into one), "
                         f"got {short(v)} ({type(v).__name__})")
    return v


def as_computations(op, arg, v):
    if not isinstance(v, (list, tuple)) or not v:
        raise ShapeError(f"{op}: {arg} must be a non-empty list of computations (XlaComputations or "
                         f"callables), got {short(v)} ({type(v).__name__})")
    return [as_computation(op, f"{arg}[{i}]", c) for i, c in enumerate(v)]
