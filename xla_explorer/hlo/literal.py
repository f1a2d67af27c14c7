"""Constant literals in HLO text: ``constant(1.5)``, ``constant({ {1, 2}, {3, 4} })``."""
import math

import numpy as np

from .. import dtypes
from ..errors import HloParseError


def format_literal(arr, element_type):
    arr = np.asarray(arr)
    if arr.ndim == 0:
        return format_scalar(arr[()], element_type)

    def rec(a):
        if a.ndim == 1:
            return "{" + ", ".join(format_scalar(x, element_type) for x in a) + "}"
        return "{ " + ", ".join(rec(x) for x in a) + " }"
    return rec(arr)


def format_scalar(x, element_type):
    if element_type == "pred":
        return "true" if bool(x) else "false"
    if element_type in dtypes.COMPLEX:
        comp = dtypes.complex_component(element_type)
        return f"({format_scalar(np.real(x), comp)}, {format_scalar(np.imag(x), comp)})"
    if element_type in dtypes.FLOATING:
        v = float(x)
        if v != v:
            return "-nan" if math.copysign(1.0, v) < 0 else "nan"
        if v in (float("inf"), float("-inf")):
            return "inf" if v > 0 else "-inf"
        text = str(np.asarray(x, dtype=dtypes.to_numpy(element_type))[()])  # shortest round-trip form
        if text.endswith(".0"):
            text = text[:-2]
        return text
    return str(int(x))


def parse_literal(text, shape):
    """Parse a literal of ``shape`` (an array Shape) into a NumPy array."""
    tokens = _tokens(text)
    pos = [0]

    def value():
        if pos[0] >= len(tokens):
            raise HloParseError(f"constant literal {text!r} ends early")
        tok = tokens[pos[0]]
        if tok == "{":
            pos[0] += 1
            items = []
            while tokens[pos[0]] != "}":
                items.append(value())
                if tokens[pos[0]] == ",":
                    pos[0] += 1
            pos[0] += 1
            return items
        if tok == "(":
            pos[0] += 1
            re_ = value()
            if tokens[pos[0]] == ",":
                pos[0] += 1
            im = value()
            if tokens[pos[0]] != ")":
                raise HloParseError(f"constant literal {text!r}: expected ')' of a complex number")
            pos[0] += 1
            return complex(re_, im)
        pos[0] += 1
        return _scalar(tok, shape.element_type, text)

    if text.strip() in ("{...}", "..."):
        return None  # elided by the printer: the value is unknown
    v = value()
    if shape.element_type == "pred":
        arr = np.array(v, dtype=np.bool_)
    elif shape.element_type in dtypes.INTEGRAL:
        arr = np.array(v, dtype=object).astype(shape.dtype) if np.ndim(v) else np.array(v).astype(shape.dtype)
    elif shape.element_type in dtypes.COMPLEX:
        arr = np.array(v, dtype=np.complex128).astype(shape.dtype)
    else:
        arr = np.array(v, dtype=np.float64).astype(shape.dtype)
    dims = tuple(d for d in shape.dims)
    if arr.shape != dims:
        if arr.size == int(np.prod(dims)) and (arr.ndim <= 1 or arr.size == 0):
            arr = arr.reshape(dims)
        else:
            raise HloParseError(f"constant literal has shape {list(arr.shape)}, the instruction says {shape}")
    return arr


def _scalar(tok, element_type, text):
    t = tok.lower()
    if t in ("true", "false"):
        return t == "true"
    if t in ("nan", "+nan"):
        return float("nan")
    if t == "-nan":
        return -float("nan")
    if t in ("inf", "+inf"):
        return float("inf")
    if t == "-inf":
        return float("-inf")
    try:
        if element_type in dtypes.INTEGRAL or element_type == "pred":
            return int(tok, 0) if not any(c in tok for c in ".eE") or tok.lower().startswith("0x") else int(float(tok))
        return float(tok)
    except ValueError:
        raise HloParseError(f"constant literal {text!r}: {tok!r} is not a {element_type} value") from None


def _tokens(text):
    out, cur = [], []
    for c in text:
        if c in "{}(),":
            if cur:
                out.append("".join(cur))
                cur = []
            out.append(c)
        elif c.isspace():
            if cur:
                out.append("".join(cur))
                cur = []
        else:
            cur.append(c)
    if cur:
        out.append("".join(cur))
    return out
