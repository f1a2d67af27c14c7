"""Binder builds and runs: binder/ names a Python that repo2docker honours, installs pinned
versions from constraints.txt (the one place they are pinned, which the test and tour scripts
use too), fails the build when the tour fails, and the badges point at the repository named
in pyproject.toml.  The slow test builds a fresh environment from binder/ alone, as
repo2docker would, and runs the tour and one more notebook in it."""
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
BINDER = ROOT / "binder"


def _name(requirement):
    return re.split(r"[<>=!~\[; ]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _pins():
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            assert "==" in line, f"constraints.txt: {line!r} is not pinned with =="
            pins[_name(line)] = line.split("==", 1)[1]
    return pins


def _python_version():
    text = (BINDER / "runtime.txt").read_text().strip()
    m = re.fullmatch(r"python-(3\.\d+)", text)
    assert m, f"binder/runtime.txt says {text!r}; repo2docker reads python-3.X"
    return m.group(1)


def test_binder_names_its_python_and_installs_pinned_versions():
    version = _python_version()
    assert tuple(map(int, version.split("."))) >= (3, 11), "jax >= 0.8 (the notebooks' API) needs Python 3.11+"
    lines = [x.split("#", 1)[0].strip() for x in (BINDER / "requirements.txt").read_text().splitlines()]
    lines = [x for x in lines if x]
    assert "-c ../constraints.txt" in lines and "-e .[notebook]" in lines, lines
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = _pins()
    needed = project["dependencies"] + [r for extra in ("notebook", "test", "classroom")
                                        for r in project["optional-dependencies"][extra]]
    missing = sorted({_name(r) for r in needed} - set(pins))
    assert not missing, f"constraints.txt pins no version of {missing}: run scripts/lock.sh"
    for script in ("test.sh", "tour.sh"):
        text = (ROOT / "scripts" / script).read_text()
        assert "-c constraints.txt" in text, f"scripts/{script} must install through constraints.txt"


def test_post_build_fails_the_build_when_the_tour_fails():
    text = (BINDER / "postBuild").read_text()
    assert "set -euo pipefail" in text and "notebooks/tour.ipynb" in text
    assert "|| true" not in text and "exit 1" in text
    assert os.access(BINDER / "postBuild", os.X_OK)
    assert "graphviz" in (BINDER / "apt.txt").read_text().split()


def test_badges_point_at_the_repository_written_once():
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "badges.py"), "--check"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    head = (ROOT / "README.md").read_text().splitlines()[:5]
    assert any("mybinder.org/v2/gh/" in line for line in head), "the README's badge belongs at its top"
    url = re.search(r'^Repository\s*=\s*"https://github\.com/([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M)
    assert url, "pyproject.toml: [project.urls] Repository = \"https://github.com/OWNER/NAME\""
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        text = nb.read_text()
        assert f"mybinder.org/v2/gh/{url.group(1)}/main?labpath=notebooks%2F{nb.name}" in text, nb.name


def _fresh_python():
    version = _python_version()
    for exe in (f"python{version}", "python3", sys.executable):
        path = shutil.which(exe) or (exe if os.path.isabs(exe) else None)
        if not path:
            continue
        got = subprocess.run([path, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                             capture_output=True, text=True).stdout.strip()
        if got == version:
            return path
    pytest.skip(f"binder/runtime.txt names Python {version}, which is not installed here "
                f"(no python{version} on PATH): the fresh Binder environment cannot be built")


def _run(cmd, env, timeout, what):
    start = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, cwd=ROOT)
    assert out.returncode == 0, f"{what} failed ({out.returncode}):\n{(out.stdout + out.stderr)[-4000:]}"
    return time.perf_counter() - start


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_fresh_environment_from_binder_alone_runs_the_tour_and_a_lesson():
    """What repo2docker does, on the Python runtime.txt names: pip install -r
    binder/requirements.txt from the repository root, then binder/postBuild (the tour); then
    one more notebook.  pip's own cache keeps a rerun to installing, not downloading."""
    python = _fresh_python()
    with tempfile.TemporaryDirectory(prefix="binder-env-") as tmp:
        venv = pathlib.Path(tmp) / "venv"
        subprocess.run([python, "-m", "venv", str(venv)], check=True)
        env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
        env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", XLA_EXPLORER_CACHE=str(pathlib.Path(tmp) / "cache"),
                   JUPYTER_PLATFORM_DIRS="1", PIP_DISABLE_PIP_VERSION_CHECK="1", JUPYTER_CONFIG_DIR=str(pathlib.Path(tmp) / "jupyter"))
        env.pop("NUMBA_ENABLE_CUDASIM", None)
        pip = _run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-compile", "-r",
                    "binder/requirements.txt"],
                   env, 600, "pip install -r binder/requirements.txt")
        versions = subprocess.run([str(venv / "bin" / "python"), "-c",
                                   "import jax, numpy, numba, xla_explorer; print(jax.__version__, numpy.__version__, "
                                   "numba.__version__, xla_explorer.__file__)"],
                                  capture_output=True, text=True, env=env).stdout.split()
        pins = _pins()
        assert versions[:3] == [pins["jax"], pins["numpy"], pins["numba"]], versions
        assert versions[3].startswith(str(ROOT)), versions  # the package is this checkout
        tour = _run(["bash", str(BINDER / "postBuild")], env, 600, "binder/postBuild (the tour)")
        lesson = _run([str(venv / "bin" / "jupyter"), "nbconvert", "--to", "notebook", "--execute",
                       "notebooks/symbolic_execution.ipynb", "--output-dir", tmp], env, 300,
                      "the symbolic_execution notebook")
    print(f"binder env: pip {pip:.0f} s, tour {tour:.0f} s, lesson {lesson:.0f} s")
