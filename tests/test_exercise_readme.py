"""The README's classroom section runs as written: its Python block executes, and what its
comments claim holds (its nbgrader commands are run by tests/test_assignment.py)."""
import ast
import pathlib
import re

import numpy as np

import xla_explorer as xe

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def readme_blocks(title, language):
    """The ``language`` code blocks of the README's section ``## title``."""
    text = README.read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return re.findall(rf"```{language}\n(.*?)```", text[start:end if end > 0 else None], re.S)


def run_keeping_values(code):
    """Execute ``code``; the values of its top-level expressions, in order (what a notebook shows)."""
    tree = ast.parse(code)
    shown = []
    scope = {"xe": xe, "np": np, "_show": shown.append}
    for node in tree.body:
        if isinstance(node, ast.Expr):
            node = ast.Expr(ast.Call(ast.Name("_show", ast.Load()), [node.value], []))
        exec(compile(ast.fix_missing_locations(ast.Module([node], [])), "README.md", "exec"), scope)  # noqa: S102
    return shown


def test_the_classroom_python_block_runs_and_does_what_its_comments_say():
    (code,) = readme_blocks("Classroom exercises", "python")
    shape_check, sheet, solution, fix_check, implement_check = run_keeping_values(code)
    # a shape answer judged by the shape rule (read, not "could not read the answer")
    assert not shape_check.correct and "could not read" not in shape_check.message
    assert len(sheet) == 5 and "Exercise 5." in str(sheet)
    assert solution.answer is not None and str(solution)
    assert fix_check.correct, fix_check  # replica groups in the spec's notation
    assert implement_check.correct and "configurations" in implement_check.message, implement_check
