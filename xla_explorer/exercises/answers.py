"""Reading a student's answer safely: whatever is given, ``check`` must answer with feedback.

An answer can be anything a notebook cell evaluates to: text, nested lists, NumPy arrays,
a generator that never ends, a string of a hundred thousand brackets, an object whose
``__iter__`` raises.  Before any exercise looks at it, ``bounded`` copies it into plain
Python values (str, bool, int, float, complex, None, tuple, list, dict, frozenset and a few
library types) with limits on depth, element count and text length, so that judging
takes bounded time and memory, and ``parse_literal`` reads typed text without recursion
beyond ``MAX_DEPTH``.  Anything over a limit raises ``AnswerError`` (a ``ValueError``),
which ``check`` turns into feedback.
"""
import ast
import itertools
import re
import reprlib

import numpy as np

#: nesting deeper than any answer needs (a rank-8 array of pairs of indices is depth 10)
MAX_DEPTH = 24
#: elements in one answer (values exercises are small: a few hundred elements at most)
MAX_ITEMS = 100_000
#: characters of typed text
MAX_TEXT = 20_000
#: an integer beyond this is no index, size or attribute of any exercise
MAX_INT = 1 << 62


class AnswerError(ValueError):
    """The answer cannot be read (malformed, too big, too deep); the message says why."""


_short = reprlib.Repr()
_short.maxstring = 60
_short.maxother = 60
_short.maxlist = _short.maxtuple = _short.maxdict = _short.maxset = 8
_short.maxlevel = 3


def short_repr(answer):
    """``repr`` for a message: cut short, and never raising."""
    try:
        text = _short.repr(answer)
    except Exception:  # noqa: BLE001 - a student's object whose __repr__ fails
        text = f"<{type(answer).__name__} object>"
    return text if len(text) <= 200 else text[:197] + "..."


def short_text(text, limit=400):
    """An error's message for feedback: whole when it is a sentence or two (ours name what is
    missing at the end), cut at the end past ``limit`` (a student's exception may be huge)."""
    try:
        text = str(text)
    except Exception:  # noqa: BLE001 - an exception whose __str__ fails
        return "(no message)"
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _library_types():
    from ..errors import ShapeError
    from ..shapes import Shape
    return (Shape, ShapeError)


def bounded(answer):
    """A plain copy of ``answer`` within the limits above (raises ``AnswerError``)."""
    keep = _library_types()
    budget = [MAX_ITEMS]

    def spend(n=1):
        budget[0] -= n
        if budget[0] < 0:
            raise AnswerError(f"the answer has more than {MAX_ITEMS:,} elements; no exercise needs that many")

    def walk(x, depth):
        if depth > MAX_DEPTH:
            raise AnswerError(f"the answer is nested more than {MAX_DEPTH} levels deep")
        spend()
        if x is None or isinstance(x, (bool, float, complex)):
            return x
        if isinstance(x, int):
            if abs(x) > MAX_INT:
                raise AnswerError("a number in the answer is far too large to be an index, a size or an "
                                  "attribute value")
            return x
        if isinstance(x, str):
            if len(x) > MAX_TEXT:
                raise AnswerError(f"the answer text is {len(x):,} characters long; answers are short "
                                  f"(at most {MAX_TEXT:,})")
            return x
        if isinstance(x, np.generic):
            return walk(x.item(), depth) if x.dtype.kind in "biufc" else str(x)
        if isinstance(x, np.ndarray):
            if x.size > budget[0]:
                raise AnswerError(f"the answer has {x.size:,} elements; no exercise needs that many")
            if x.dtype.kind not in "biufc":
                raise AnswerError(f"an array of {x.dtype} is not an answer; use numbers")
            spend(x.size)
            return x.copy()  # small and numeric: kept as an array (its dtype tells f16 from f32)
        if isinstance(x, keep) or (isinstance(x, type) and issubclass(x, keep)):
            return x
        if depth == 0 and callable(x) and not isinstance(x, type) and not _iterable(x):
            return x  # a function: the answer of an "implement" exercise (other kinds refuse it)
        if isinstance(x, dict):
            if len(x) > budget[0]:
                raise AnswerError("the answer has too many entries")
            return {walk(k, depth + 1): walk(v, depth + 1) for k, v in list(x.items())}
        if isinstance(x, (tuple, list, set, frozenset, range)) or _iterable(x):
            items = list(itertools.islice(iter(x), budget[0] + 1))
            if len(items) > budget[0]:
                raise AnswerError(f"the answer has more than {MAX_ITEMS:,} elements (an endless iterator?)")
            out = [walk(i, depth + 1) for i in items]
            if isinstance(x, (set, frozenset)):
                return frozenset(_hashable(i) for i in out)
            return tuple(out) if isinstance(x, tuple) else out
        raise AnswerError(f"a {type(x).__name__} is not an answer")

    try:
        return walk(answer, 0)
    except AnswerError:
        raise
    except RecursionError:
        raise AnswerError(f"the answer is nested too deeply (more than {MAX_DEPTH} levels)") from None
    except MemoryError:
        raise AnswerError("the answer is too big to read") from None
    except Exception as e:  # noqa: BLE001 - a student's object failing while it is read
        raise AnswerError(f"reading the answer failed: {type(e).__name__}: {short_repr(str(e))}") from None


def _iterable(x):
    if isinstance(x, (str, bytes, bytearray, memoryview)):
        return False
    try:
        iter(x)
    except Exception:  # noqa: BLE001 - not iterable
        return False
    return True


def _hashable(x):
    if isinstance(x, list):
        return tuple(_hashable(i) for i in x)
    if isinstance(x, dict):
        return tuple(sorted((repr(k), _hashable(v)) for k, v in x.items()))
    if isinstance(x, np.ndarray):
        return tuple(_hashable(i) for i in x.tolist())
    return x


# =========================================================================================
# Typed answers: Python literals, or the spec's braces
# =========================================================================================

_TOKEN = re.compile(r"""\s*(?:
    (?P<num>[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|inf(?:inity)?|nan)(?![A-Za-z_0-9]))
  | (?P<word>[A-Za-z_][A-Za-z_0-9]*)
  | (?P<str>"[^"]*"|'[^']*')
  | (?P<open>[\[{(])
  | (?P<close>[\]})])
  | (?P<comma>,)
  | (?P<colon>:))""", re.X | re.I)


def parse_literal(text):
    """Answers typed as text: Python literals, or the spec's ``{{1, 2}, {3, 4}}``, ``true``,
    ``NaN``, ``-inf``; bare words become strings (``padding``, ``skipped``).  Raises
    ``AnswerError`` (a ``ValueError``) for text it cannot read, too long or nested too deep."""
    if not isinstance(text, str):
        raise AnswerError(f"expected text, got a {type(text).__name__}")
    if len(text) > MAX_TEXT:
        raise AnswerError(f"the answer text is {len(text):,} characters long; answers are short "
                          f"(at most {MAX_TEXT:,})")
    if _depth(text) > MAX_DEPTH:
        raise AnswerError(f"the answer is nested more than {MAX_DEPTH} levels deep")
    if "{" not in text:  # braces are the spec's arrays (or dicts), never Python sets
        try:
            return bounded(ast.literal_eval(text))
        except AnswerError:
            raise
        except Exception:  # noqa: BLE001 - not a Python literal: read it as the spec's notation
            pass
    tokens, pos = [], 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise AnswerError(f"cannot read {short_repr(text)} at {text[pos:pos + 10]!r}")
        pos = m.end()
        kind = m.lastgroup
        tokens.append((kind, m.group(kind)))
    if not tokens:
        raise AnswerError("the answer is empty")
    items, i = _parse_value(tokens, 0, 0)
    if i != len(tokens):
        if tokens[i][0] == "comma":  # "1, 2" without brackets: a tuple
            rest = [items]
            while i < len(tokens) and tokens[i][0] == "comma":
                v, i = _parse_value(tokens, i + 1, 0)
                rest.append(v)
            if i == len(tokens):
                return tuple(rest)
        raise AnswerError(f"cannot read {short_repr(text)}: unexpected {tokens[i][1]!r}")
    return items


def _depth(text):
    """The bracket nesting depth of ``text`` (no recursion, linear time)."""
    depth = best = 0
    for c in text:
        if c in "[{(":
            depth += 1
            best = max(best, depth)
        elif c in "]})":
            depth -= 1
    return best


def _parse_value(tokens, i, depth):
    if depth > MAX_DEPTH:
        raise AnswerError(f"the answer is nested more than {MAX_DEPTH} levels deep")
    if i >= len(tokens):
        raise AnswerError("the answer ends too early")
    kind, text = tokens[i]
    if kind == "num":
        low = text.lower().lstrip("+")
        if "nan" in low:
            return float("nan"), i + 1
        if "inf" in low:
            return (-np.inf if low.startswith("-") else np.inf), i + 1
        if any(c in text for c in ".eE"):
            return float(text), i + 1
        if len(text.lstrip("+-")) > 19:
            raise AnswerError("a number in the answer is far too large to be an index, a size or an "
                              "attribute value")
        return int(text), i + 1
    if kind == "word":
        return {"true": True, "false": False}.get(text.lower(), text), i + 1
    if kind == "str":
        return text[1:-1], i + 1
    if kind == "open":
        close = {"[": "]", "{": "}", "(": ")"}[text]
        items, keys, i = [], [], i + 1
        while i < len(tokens) and tokens[i][1] != close:
            v, i = _parse_value(tokens, i, depth + 1)
            if i < len(tokens) and tokens[i][0] == "colon":
                keys.append(v)
                v, i = _parse_value(tokens, i + 1, depth + 1)
            items.append(v)
            if i < len(tokens) and tokens[i][0] == "comma":
                i += 1
            elif i < len(tokens) and tokens[i][1] != close:
                raise AnswerError(f"expected ',' or {close!r}, found {tokens[i][1]!r}")
        if i >= len(tokens):
            raise AnswerError(f"missing {close!r}")
        if keys:
            if len(keys) != len(items):
                raise AnswerError("a dict needs a key for every value")
            try:
                return dict(zip(keys, items)), i + 1
            except TypeError:
                raise AnswerError("a dict key must be a name or a number") from None
        return (tuple(items) if text == "(" else items), i + 1
    raise AnswerError(f"unexpected {text!r}")
