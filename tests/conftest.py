"""Shared test set-up: where the HLO corpus is, and how to load a case."""
import importlib.util
import os
import pathlib

import pytest
from hypothesis import settings

# No per-example deadline: a first example may include a Numba compile.  In CI the
# examples are derandomized, so a submission's result does not depend on the draw.
settings.register_profile("default", deadline=None)
settings.register_profile("ci", deadline=None, derandomize=True)
settings.load_profile("ci" if os.environ.get("CI") else "default")

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")  # CUDA kernels run in the simulator in tests
# the threaded kernels run even when the machine is busy (numba_setup.enter_run)
os.environ.setdefault("XLA_EXPLORER_LOAD_AWARE", "0")

ROOT = pathlib.Path(__file__).resolve().parents[1]
CORPUS = pathlib.Path(os.environ.get("XLA_EXPLORER_CORPUS", ROOT.parent / "shared" / "hlo_corpus"))


def _load_case_module():
    path = CORPUS / "load_case.py"
    if not path.exists():
        return None
    spec = importlib.util.spec_from_file_location("corpus_load_case", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


LOADER = _load_case_module()


def corpus_cases():
    if not CORPUS.exists():
        return []
    return sorted(p.name for p in CORPUS.iterdir() if (p / "case.json").exists())


@pytest.fixture
def load_case():
    if LOADER is None:
        pytest.skip(f"HLO corpus not found at {CORPUS}")
    return lambda name: LOADER.load_case(str(CORPUS / name))


def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (``scripts/test.sh``: ``--dist loadgroup``) a test function's cases
    run on one worker, so the kernels they share compile once; a file whose tests share a
    module- or session-scoped fixture of ours (a JupyterLab server, a graded assignment)
    runs on one worker, and the session fixtures of a folder (tests/e2e) keep its files on
    one, so none is built twice.  Different functions of one file spread over the workers:
    one file's kernels (test_numba_data_movement) are not a long pole."""
    for item in items:
        path, _, rest = item.nodeid.partition("::")
        group = f"{path}::{rest.split('[', 1)[0]}"
        shared = [(d.scope, pathlib.Path(d.func.__code__.co_filename).resolve())
                  for defs in item._fixtureinfo.name2fixturedefs.values() for d in defs
                  if d.scope != "function" and hasattr(d.func, "__code__")]
        shared = [(scope, where) for scope, where in shared if where.is_relative_to(ROOT / "tests")]
        if any(scope == "session" for scope, _ in shared):   # the folder of its conftest.py
            group = min(str(where.parent.relative_to(ROOT)) for scope, where in shared if scope == "session")
        elif shared:
            group = path
        item.add_marker(pytest.mark.xdist_group(group))
