"""Notebooks are tested by executing them, top to bottom, in a fresh kernel; each is paired
with a jupytext percent script in notebooks_py/ (jupytext.toml), and the pairs must agree."""
import pathlib

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
SOURCES = ROOT / "notebooks_py"
FORMATS = "notebooks///ipynb,notebooks_py///py:percent"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_executes(path):
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors


def _cells(nb):
    return [(c.cell_type, c.source.strip()) for c in nb.cells if c.source.strip()]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_matches_its_text_source(path):
    """The .ipynb and its notebooks_py/ script have the same cells (jupytext reads the script)."""
    jupytext = pytest.importorskip("jupytext")
    source = SOURCES / path.with_suffix(".py").name
    assert source.exists(), (f"{path.name} has no paired {source.relative_to(ROOT)}: write it with "
                             f"`jupytext --set-formats '{FORMATS}' {path.relative_to(ROOT)}`")
    nb = nbformat.read(path, as_version=4)
    assert nb.metadata.get("jupytext", {}).get("formats") == FORMATS, \
        f"{path.name}: its jupytext formats must be {FORMATS!r} (as jupytext.toml says)"
    text_nb = jupytext.read(source)
    assert _cells(text_nb) == _cells(nb), \
        f"{path.name} and {source.name} differ: run `jupytext --sync {path.relative_to(ROOT)}`"


def test_text_sources_live_apart_from_the_notebooks():
    """JupyterLab's file browser shows each lesson once: no .py beside the .ipynb files, and
    no script in notebooks_py/ without its notebook."""
    stray = sorted(p.name for p in (ROOT / "notebooks").glob("*.py"))
    assert not stray, (f"notebooks/ holds {stray}: text sources go in notebooks_py/ "
                       "(git mv them there; jupytext.toml pairs the two folders)")
    orphans = sorted(p.name for p in SOURCES.glob("*.py") if not (ROOT / "notebooks" / p.with_suffix(".ipynb").name).exists())
    assert not orphans, f"notebooks_py/{orphans} have no notebook: `jupytext --sync notebooks_py/NAME.py`"
    assert FORMATS in (ROOT / "jupytext.toml").read_text()
