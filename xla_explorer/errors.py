"""The errors xla_explorer raises: each names the op, the rule it broke and the values."""
import re

#: characters of a user's text an error message quotes (5,000 digits typed in a box, or a
#: 100 kB line of HLO, must not come back whole)
QUOTE_CHARS = 60


def quote(text, limit=QUOTE_CHARS):
    """``repr(text)`` for an error message: whole when short, else its first ``limit``
    characters, "..." and its length (something else than text: its repr, cut alike)."""
    if not isinstance(text, str):
        try:
            shown = repr(text)
        except Exception:  # noqa: BLE001 - a user object whose repr fails
            return f"<{type(text).__name__} object>"
        return shown if len(shown) <= limit else f"{shown[:limit]}... ({len(shown):,} characters)"
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({len(text):,} characters)"


#: longer than any word the library writes, and than a parse error's window of its line
_LONG_WORD = re.compile(r"\S{%d,}" % (2 * QUOTE_CHARS + 11))


def clip(message):
    """``message`` with every run of more than 130 characters without a space (an echoed
    name, number or token: nothing the library writes itself is that long) cut to its
    first 60 and its length -- the net under the messages that quote user text."""
    if not isinstance(message, str) or len(message) <= 2 * QUOTE_CHARS + 10:
        return message
    return _LONG_WORD.sub(lambda m: f"{m.group()[:QUOTE_CHARS]}... ({len(m.group()):,} characters)", message)


class ShapeError(ValueError):
    """An op's arguments break one of the spec's shape rules (raised at build time)."""

    def __init__(self, *args):
        super().__init__(*(clip(a) for a in args))


class HloParseError(ValueError):
    """HLO text that does not parse; the message points at the line and column."""

    def __init__(self, message, line=None, column=None, text_line=None):
        where = ""
        if line is not None:
            where = f"line {line}, column {column}: "
        caret = ""
        if text_line is not None and column is not None:
            # a window of the line around the column (lines of HLO can be very long)
            start = max(0, column - 1 - 60)
            shown = text_line[start:column - 1 + 60]
            prefix = "..." if start else ""
            caret = f"\n  {prefix}{shown}{'...' if len(text_line) > column - 1 + 60 else ''}" \
                    f"\n  {' ' * (len(prefix) + column - 1 - start)}^"
        super().__init__(f"{where}{clip(str(message))}{caret}")
        self.line, self.column = line, column


class ExecutionError(RuntimeError):
    """A run-time failure of an instruction (bad argument values, a missing channel, ...)."""

    def __init__(self, *args):
        super().__init__(*(clip(a) for a in args))


class RunShapeError(ExecutionError, ShapeError):
    """A shape rule broken by the sizes a run's values have (dynamic dimensions): a failure
    of the run (``ExecutionError``) and of the op's rule (``ShapeError``) alike, so either
    ``except`` catches it."""


class SizeLimitError(ShapeError):
    """A result would be larger than the configured element limit: refused before allocating."""
