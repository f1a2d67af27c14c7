"""The classroom round trip: ``python -m xla_explorer.exercises assignment`` writes the teacher's
and the student's notebooks with nbgrader; the student's has no solution in it; nbgrader's
autograder gives a completed notebook full marks and the untouched student notebook zero,
without crashing."""
import json
import os
import re
import subprocess
import sys

import pytest

pytest.importorskip("nbgrader")
pytest.importorskip("nbclient")

NAME = "xla_exercises"


def _source(cell):
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def _grade_id(cell):
    return cell["metadata"].get("nbgrader", {}).get("grade_id", "")


def _cli(*args):
    out = subprocess.run([sys.executable, "-m", "xla_explorer.exercises", *args], capture_output=True, text=True,
                         timeout=600, env=dict(os.environ))
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


@pytest.fixture(scope="module")
def assignment(tmp_path_factory):
    out = tmp_path_factory.mktemp("course")
    printed = _cli("assignment", "--ops", "gather,pad,scatter", "--n", "6", "--seed", "0", "--out", str(out))
    teacher = out / "source" / NAME / f"{NAME}.ipynb"
    student = out / "release" / NAME / f"{NAME}.ipynb"
    assert str(teacher) in printed and str(student) in printed
    return out, json.loads(teacher.read_text()), json.loads(student.read_text()), student


def test_the_teacher_has_solutions_and_the_student_none(assignment):
    out, teacher, student, _ = assignment
    solutions = {_grade_id(c): _source(c) for c in teacher["cells"] if _grade_id(c).startswith("answer_")}
    assert len(solutions) == 6 and all("### BEGIN SOLUTION" in s for s in solutions.values())
    text = json.dumps(student)
    assert "BEGIN SOLUTION" not in text and "END SOLUTION" not in text
    for gid, src in solutions.items():
        body = re.search(r"### BEGIN SOLUTION\n(.*?)\n### END SOLUTION", src, re.S).group(1)
        assert body.startswith(gid + " = ") or f"def {gid}(" in body
        for line in body.splitlines():
            if len(line.strip()) > 12 and not line.startswith(("import ", "from ")):
                assert json.dumps(line)[1:-1] not in text, f"{gid}'s solution ({line!r}) is in the student notebook"
    # the prompts name the ops; the checks are the same checkers a student calls
    checks = [_source(c) for c in student["cells"] if _grade_id(c).startswith("check_")]
    assert len(checks) == 6 and all(f"SHEET[{k}].check(answer_{k + 1})" in c for k, c in enumerate(checks))
    teacher_checks = [_source(c) for c in teacher["cells"] if _grade_id(c).startswith("check_")]
    assert checks == teacher_checks
    points = [c["metadata"]["nbgrader"].get("points") for c in student["cells"] if _grade_id(c).startswith("check_")]
    assert points == [1] * 6
    setup = next(_source(c) for c in student["cells"] if _grade_id(c) == "setup")
    assert "teacher=True" not in setup and setup.count("xe.exercises.make(") == 6


def _completed(teacher, student, path):
    answers = {_grade_id(c): re.sub(r"### (BEGIN|END) SOLUTION\n?", "", _source(c))
               for c in teacher["cells"] if _grade_id(c).startswith("answer_")}
    nb = json.loads(json.dumps(student))
    for cell in nb["cells"]:
        gid = _grade_id(cell)
        if gid in answers:
            cell["source"] = answers[gid]
    path.write_text(json.dumps(nb))
    return path


def _grade(out, notebook, student):
    printed = _cli("grade", str(out), str(notebook), "--student", student)
    m = re.search(rf"{student}: ([\d.]+) / ([\d.]+)", printed)
    assert m, printed
    return float(m.group(1)), float(m.group(2))


def test_a_completed_notebook_gets_full_marks(assignment, tmp_path):
    out, teacher, student, _ = assignment
    assert _grade(out, _completed(teacher, student, tmp_path / "done.ipynb"), "ada") == (6.0, 6.0)


def test_the_untouched_student_notebook_gets_zero_without_crashing(assignment):
    out, _, _, student_path = assignment
    assert _grade(out, student_path, "blank") == (0.0, 6.0)
    autograded = json.loads((out / "autograded" / "blank" / NAME / f"{NAME}.ipynb").read_text())
    errors = [o.get("ename") for c in autograded["cells"] if _grade_id(c).startswith("check_")
              for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert len(errors) == 6 and set(errors) <= {"NameError", "AssertionError"}  # each check failed, none crashed
