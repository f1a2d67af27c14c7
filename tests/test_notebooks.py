"""Notebooks are tested by executing them, top to bottom, in a fresh kernel."""
import pathlib

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOKS = sorted((pathlib.Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_executes(path):
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_matches_its_text_source(path):
    """Each notebook is paired with a jupytext percent-format .py; their code must agree."""
    source = path.with_suffix(".py")
    assert source.exists(), f"{path.name} has no paired {source.name}"
    nb = nbformat.read(path, as_version=4)
    text = source.read_text()
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.source.strip() in text, f"{path.name}: a code cell is not in {source.name}"
