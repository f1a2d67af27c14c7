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
    if text.strip() in ("{...}", "..."):
        return None  # elided by the printer: the value is unknown
    if not shape.is_array:
        raise HloParseError(f"a constant of shape {shape} is not supported (only array constants)")
    v = _values(_tokens(text), shape.element_type, text)
    if shape.element_type == "pred":
        arr = np.array(v, dtype=object)
        if arr.size and not all(x is True or x is False or (isinstance(x, int) and x in (0, 1)) for x in arr.flat):
            raise HloParseError(f"constant literal {_short(text)}: a pred value is true or false")
        arr = arr.astype(np.bool_)
    elif shape.element_type in dtypes.INTEGRAL:
        arr = np.array(v, dtype=object)
        info = dtypes.iinfo(shape.element_type)
        bad = [x for x in arr.flat if isinstance(x, float) or not int(info.min) <= x <= int(info.max)]
        if bad:
            raise HloParseError(f"constant literal {_short(text)}: {bad[0]!r} is not a {shape.element_type} value "
                                f"(integers in [{int(info.min)}, {int(info.max)}])")
        arr = arr.astype(shape.dtype)
    elif shape.element_type in dtypes.COMPLEX:
        arr = np.array(v, dtype=np.complex128).astype(shape.dtype)
    else:
        wide = np.array(v, dtype=np.float64)
        with np.errstate(all="ignore"):
            arr = wide.astype(shape.dtype)
        if np.any(np.isinf(arr.astype(np.float64)) & np.isfinite(wide)):
            raise HloParseError(f"constant literal {_short(text)}: a value is too large for {shape.element_type}")
    dims = tuple(d for d in shape.dims)
    if arr.shape != dims:
        if arr.size == math.prod(d or 0 for d in dims) and (arr.ndim <= 1 or arr.size == 0):
            arr = arr.reshape(dims)
        else:
            raise HloParseError(f"constant literal has shape {list(arr.shape)}, the instruction says {shape}")
    return arr


def _short(text):
    return repr(text) if len(text) <= 80 else repr(text[:77] + "...")


def _values(tokens, element_type, text):
    """The nested lists of a literal's tokens, without recursion (an explicit stack)."""
    root, stack, i, n = [], [], 0, len(tokens)
    top = root
    while i < n:
        tok = tokens[i]
        if tok == "{":
            new = []
            top.append(new)
            stack.append(top)
            top = new
        elif tok == "}":
            if not stack:
                raise HloParseError(f"constant literal {_short(text)}: a '}}' closes nothing")
            top = stack.pop()
        elif tok == ",":
            pass
        elif tok == "(":   # a complex number: (re, im)
            parts = tokens[i + 1:i + 5]
            if len(parts) < 4 or parts[1] != "," or parts[3] != ")":
                raise HloParseError(f"constant literal {_short(text)}: a complex number is written (re, im)")
            top.append(complex(_scalar(parts[0], "f64", text), _scalar(parts[2], "f64", text)))
            i += 4
        elif tok == ")":
            raise HloParseError(f"constant literal {_short(text)}: a ')' closes nothing")
        else:
            top.append(_scalar(tok, element_type, text))
        i += 1
    if stack:
        raise HloParseError(f"constant literal {_short(text)} ends early: a '{{' is not closed")
    if len(root) != 1:
        raise HloParseError(f"constant literal {_short(text)}: expected one value, got {len(root)}")
    return root[0]


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
            if not any(c in tok for c in ".eE") or tok.lower().startswith("0x"):
                try:
                    return int(tok, 0)
                except ValueError:
                    return int(tok, 10)  # "007": leading zeros
            value = float(tok)
            if value != int(value):  # 2.5 is no integer: never truncated
                return value
            return int(value)
        return float(tok)
    except (ValueError, OverflowError):
        raise HloParseError(f"constant literal {_short(text)}: {tok!r} is not a {element_type} value") from None


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
