"""The examples in the op APIs' docstrings are what they say: every ``>>>`` line of the
``xla_explorer.ops`` modules runs, and its result is the one written beside it.

The docstrings give results in two ways, both checked here:

- doctest's way, the repr on the next lines (compared with whitespace normalized, so that
  an array written on one line matches NumPy's multi-line repr);
- a trailing comment, ``>>> Rev(np.array([1, 2, 3], np.int32), dimensions=[0])   # [3, 2, 1]``:
  the comment's last literal (after any prose and a colon) is evaluated and compared by
  value with the result (NaN equal to NaN, the dtype not compared).  A comment that is prose
  only (``# f32[2,3], all 2.0``) is not compared; the example must still run.
"""
import ast
import doctest
import importlib
import pkgutil
import re

import numpy as np
import pytest

import xla_explorer.ops as ops_pkg

MODULES = sorted(m.name for m in pkgutil.iter_modules(ops_pkg.__path__, "xla_explorer.ops."))


def _examples():
    out = []
    finder = doctest.DocTestFinder(exclude_empty=True)
    for name in MODULES:
        mod = importlib.import_module(name)
        for test in finder.find(mod):
            if test.examples and test.filename == mod.__file__:
                out.append(pytest.param(test, id=test.name))
    return out


def _comment_value(source):
    """The literal a trailing ``# ...`` comment of the example's first line gives, or None."""
    first = source.splitlines()[0]
    m = re.search(r"#\s*(.*)$", first)
    if not m or "doctest:" in m.group(1):
        return None
    text = m.group(1).rsplit(":", 1)[-1].strip()
    try:
        return ast.literal_eval(text.replace("nan", "None").replace("inf", "1e999"))
    except (ValueError, SyntaxError):
        return None


def _same_value(got, want):
    got = np.asarray(got)
    want = np.asarray(want, dtype=object)
    if got.shape != want.shape:
        return False
    for g, w in zip(got.reshape(-1).tolist(), want.reshape(-1).tolist()):
        if w is None:                                    # a NaN was written
            if not (isinstance(g, (float, complex)) and g != g):
                return False
        elif g != w and not (isinstance(g, float) and abs(g - w) <= 1e-6 * max(1.0, abs(w))):
            return False
    return True


EXAMPLES = _examples()


def test_there_are_examples():
    assert len(EXAMPLES) >= 50, [p.id for p in EXAMPLES]


@pytest.mark.parametrize("test", EXAMPLES)
def test_docstring_example(test):
    globs = dict(test.globs, nan=float("nan"), inf=float("inf"))
    checker = doctest.OutputChecker()
    flags = doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS
    compared = 0
    for ex in test.examples:
        if ex.options.get(doctest.SKIP):
            continue
        try:
            node = compile(ex.source, test.name, "eval")
        except SyntaxError:
            exec(compile(ex.source, test.name, "exec"), globs)
            continue
        value = eval(node, globs)
        if ex.want:
            assert checker.check_output(ex.want, repr(value) + "\n", flags), (
                f"{test.name}: {ex.source.strip()}\n  the docstring says {ex.want.strip()}\n  "
                f"it gives {value!r}")
            compared += 1
            continue
        want = _comment_value(ex.source)
        if want is not None:
            assert _same_value(value, want), (
                f"{test.name}: {ex.source.strip()}\n  the comment says {want!r}\n  it gives {value!r}")
            compared += 1
    assert compared or all(ex.want == "" and _comment_value(ex.source) is None for ex in test.examples)
