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
