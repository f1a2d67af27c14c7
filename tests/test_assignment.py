"""The classroom round trip: ``python -m xla_explorer.exercises assignment`` writes the teacher's
and the student's notebooks with nbgrader; the student's has no solution in it; nbgrader's
autograder gives a completed notebook full marks and the untouched student notebook zero,
without crashing."""
import json
import os
import pathlib
import re
import shlex
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


def _readme_commands():
    """The README's nbgrader block: its ``python -m xla_explorer.exercises`` command lines (as
    argument lists) and its comments."""
    text = (pathlib.Path(__file__).resolve().parents[1] / "README.md").read_text()
    start = text.index("### Graded assignments (nbgrader)")
    block = re.search(r"```bash\n(.*?)```", text[start:], re.S).group(1)
    commands = [shlex.split(line.split("#")[0])[3:] for line in block.splitlines()
                if line.startswith("python -m xla_explorer.exercises ")]
    return commands, [line.split("#", 1)[1] for line in block.splitlines() if "#" in line]


@pytest.fixture(scope="module")
def assignment(tmp_path_factory):
    out = tmp_path_factory.mktemp("course")
    (command, _), _ = _readme_commands()  # the README's own command, its folder "course" here
    assert command[0] == "assignment" and command[command.index("--out") + 1] == "course"
    printed = _cli(*[str(out) if a == "course" else a for a in command])
    teacher = out / "source" / NAME / f"{NAME}.ipynb"
    student = out / "release" / NAME / f"{NAME}.ipynb"
    assert str(teacher) in printed and str(student) in printed
    _, comments = _readme_commands()
    for path in (teacher, student):  # the files the README's comments name
        assert any(str(path.relative_to(out.parent)).replace(out.name, "course", 1) in c for c in comments), path
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


def test_a_completed_notebook_gets_full_marks_with_the_readmes_command(assignment, tmp_path):
    out, teacher, student, _ = assignment
    (_, command), comments = _readme_commands()
    done = _completed(teacher, student, tmp_path / "done.ipynb")
    args = [str(out) if a == "course" else str(done) if a == "completed.ipynb" else a for a in command]
    printed = _cli(*args)
    assert "ada: 6 / 6" in printed and any("-> ada: 6 / 6" in c for c in comments), printed


def test_partial_credit_one_point_per_right_exercise(assignment, tmp_path):
    out, teacher, student, _ = assignment
    nb = json.loads(_completed(teacher, student, tmp_path / "half.ipynb").read_text())
    spoiled = 0
    for cell in nb["cells"]:  # exercises 2, 4 and 6: a wrong or malformed answer
        gid = _grade_id(cell)
        if gid in ("answer_2", "answer_4", "answer_6"):
            cell["source"] = {"answer_2": "answer_2 = 'f32[1,1,1,1,1]'", "answer_4": "answer_4 = '{{{'",
                              "answer_6": "answer_6 = None"}[gid]
            spoiled += 1
    assert spoiled == 3
    (tmp_path / "half.ipynb").write_text(json.dumps(nb))
    assert _grade(out, tmp_path / "half.ipynb", "bea") == (3.0, 6.0)


def test_the_untouched_student_notebook_gets_zero_without_crashing(assignment):
    out, _, _, student_path = assignment
    assert _grade(out, student_path, "blank") == (0.0, 6.0)
    autograded = json.loads((out / "autograded" / "blank" / NAME / f"{NAME}.ipynb").read_text())
    errors = [o.get("ename") for c in autograded["cells"] if _grade_id(c).startswith("check_")
              for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert len(errors) == 6 and set(errors) <= {"NameError", "AssertionError"}  # each check failed, none crashed


def test_nbgraders_own_validator_passes_the_teachers_notebook_and_fails_every_check_of_the_students(assignment):
    out, _, _, student = assignment
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))

    def validate(*args):
        proc = subprocess.run([sys.executable, "-m", "nbgrader", "validate", *args], cwd=out, capture_output=True,
                              text=True, timeout=600, env=env)
        return proc.stdout + proc.stderr
    teacher = out / "source" / NAME / f"{NAME}.ipynb"
    assert "Success! Your notebook passes all the tests." in validate(str(teacher))
    assert "Success! The notebook does not pass any tests." in validate("--invert", str(student))
