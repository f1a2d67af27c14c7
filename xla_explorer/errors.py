"""The errors xla_explorer raises: each names the op, the rule it broke and the values."""


class ShapeError(ValueError):
    """An op's arguments break one of the spec's shape rules (raised at build time)."""


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
        super().__init__(f"{where}{message}{caret}")
        self.line, self.column = line, column


class ExecutionError(RuntimeError):
    """A run-time failure of an instruction (bad argument values, a missing channel, ...)."""


class RunShapeError(ExecutionError, ShapeError):
    """A shape rule broken by the sizes a run's values have (dynamic dimensions): a failure
    of the run (``ExecutionError``) and of the op's rule (``ShapeError``) alike, so either
    ``except`` catches it."""


class SizeLimitError(ShapeError):
    """A result would be larger than the configured element limit: refused before allocating."""
