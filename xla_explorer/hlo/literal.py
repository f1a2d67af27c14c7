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
            sign = "-" if math.copysign(1.0, v) < 0 else ""
            payload = _nan_payload(x, element_type)
            return f"{sign}nan" if payload is None else f"{sign}nan(0x{payload:x})"
        if v in (float("inf"), float("-inf")):
            return "inf" if v > 0 else "-inf"
        text = str(np.asarray(x, dtype=dtypes.to_numpy(element_type))[()])  # shortest round-trip form
        if text.endswith(".0"):
            text = text[:-2]
        return text
    return str(int(x))


def _mantissa_bits(element_type):
    return int(dtypes.finfo(element_type).nmant)


def _nan_payload(x, element_type):
    """A NaN's mantissa bits as XLA prints them (``nan(0x7fffff)``), or None for the canonical
    quiet NaN (only the top mantissa bit set), which XLA prints as plain ``nan``."""
    arr = np.asarray(x, dtype=dtypes.to_numpy(element_type))
    if arr.dtype.itemsize not in (1, 2, 4, 8):
        return None
    bits = int(arr.reshape(1).view(f"u{arr.dtype.itemsize}")[0])
    m = _mantissa_bits(element_type)
    payload = bits & ((1 << m) - 1)
    return None if payload == 1 << (m - 1) else payload


class _NaN(float):
    """A NaN with an explicit sign and payload (``-nan(0x1)``): its bits are set exactly once
    the literal has its type (a cast through f64 would quiet or shift them)."""

    def __new__(cls, negative, payload):
        self = super().__new__(cls, -math.nan if negative else math.nan)
        self.negative, self.payload = negative, payload
        return self


def _payload_positions(values):
    """[(flat index, _NaN)] of a literal's nested value lists (row-major, no recursion)."""
    out, stack, k = [], [iter([values])], 0
    while stack:
        item = next(stack[-1], StopIteration)
        if item is StopIteration:
            stack.pop()
        elif isinstance(item, list):
            stack.append(iter(item))
        else:
            if isinstance(item, _NaN):
                out.append((k, item, None))
            elif isinstance(item, _ComplexNaNs):
                out.append((k, item.re, item.im))
            k += 1
    return out


class _ComplexNaNs(complex):
    """A complex value with a NaN payload in a part (``(nan(0x1), 0)``)."""

    def __new__(cls, re, im):
        self = super().__new__(cls, float(re), float(im))
        self.re = re if isinstance(re, _NaN) else None
        self.im = im if isinstance(im, _NaN) else None
        return self


def _set_nan_bits(arr, positions, element_type):
    """Write the exact bits of the payload NaNs into ``arr`` (of ``element_type``)."""
    if not positions:
        return arr
    part_type = dtypes.complex_component(element_type) if element_type in dtypes.COMPLEX else element_type
    m = _mantissa_bits(part_type)
    nbits = dtypes.bit_width(part_type)
    arr = np.array(arr, order="C")   # a copy; (np.ascontiguousarray makes a 0-d array 1-d)
    flat = arr.reshape(-1)
    if element_type in dtypes.COMPLEX:
        parts = flat.view(dtypes.to_numpy(part_type)).reshape(-1, 2)
    else:
        parts = flat.reshape(-1, 1)
    words = parts.view(f"u{parts.dtype.itemsize}")
    exponent = ((1 << (nbits - 1)) - 1) & ~((1 << m) - 1)   # all exponent bits set
    for k, re, im in positions:
        for col, nan in ((0, re), (1, im)):
            if nan is None:
                continue
            payload = nan.payload & ((1 << m) - 1)
            words[k, col] = (int(nan.negative) << (nbits - 1)) | exponent | (payload or 1 << (m - 1))
    return arr


def parse_literal(text, shape):
    """Parse a literal of ``shape`` (an array Shape) into a NumPy array."""
    if text.strip() in ("{...}", "..."):
        return None  # elided by the printer: the value is unknown
    if not shape.is_array:
        raise HloParseError(f"a constant of shape {shape} is not supported (only array constants)")
    v = _values(_tokens(text), shape.element_type, text)
    payloads = _payload_positions(v) if shape.element_type in dtypes.FLOATING | dtypes.COMPLEX else []
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
    return _set_nan_bits(arr, payloads, shape.element_type) if payloads else arr


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
            re, im = _scalar(parts[0], "f64", text), _scalar(parts[2], "f64", text)
            top.append(_ComplexNaNs(re, im) if isinstance(re, _NaN) or isinstance(im, _NaN) else complex(re, im))
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
    if "nan(" in t:   # a NaN with its payload (mantissa bits), as XLA prints non-canonical NaNs
        sign, _, rest = t.partition("nan(")
        if sign not in ("", "+", "-") or not rest.endswith(")"):
            raise HloParseError(f"constant literal {_short(text)}: {tok!r} is not a NaN (nan(0x...))")
        try:
            payload = int(rest[:-1], 0)
        except ValueError:
            raise HloParseError(f"constant literal {_short(text)}: {tok!r} has no payload number") from None
        if element_type in dtypes.INTEGRAL or element_type == "pred":
            raise HloParseError(f"constant literal {_short(text)}: {tok!r} is not a {element_type} value")
        return _NaN(sign == "-", payload)
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
    in_nan = False   # inside "nan(0x...)": its parentheses belong to the token
    for c in text:
        if in_nan:
            cur.append(c)
            in_nan = c != ")"
            continue
        if c == "(" and "".join(cur[-3:]).lower() == "nan":
            cur.append(c)
            in_nan = True
            continue
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
