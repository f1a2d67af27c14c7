"""The HLO corpus: XLA's own outputs against the reference executor, case by case.

Each case is parsed, its shapes re-inferred by our shape rules, printed and parsed
back, and run; results are compared with XLA:CPU's as ../shared/tools/run_corpus.py
compares them (it is imported, not copied)."""
import importlib.util

import pytest

import xla_explorer as xe
from conftest import CORPUS, corpus_cases

_runner = None
if (CORPUS.parent / "tools" / "run_corpus.py").exists():
    spec = importlib.util.spec_from_file_location("run_corpus", CORPUS.parent / "tools" / "run_corpus.py")
    _runner = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(_runner)

CASES = corpus_cases()
pytestmark = pytest.mark.skipif(_runner is None or not CASES, reason="HLO corpus not found")


def _text(case):
    return (CORPUS / case / "module.hlo").read_text()


@pytest.mark.parametrize("case", CASES)
def test_corpus_case_numpy(case):
    res = _runner.run_one(xe, str(CORPUS / case), "numpy", "global")
    assert res["status"] == "pass", f"{case}: {res['reason']}\n{res.get('traceback', '')}"


@pytest.mark.parametrize("case", [c for c in CASES if c.startswith("coll_")])
def test_corpus_case_per_device(case):
    res = _runner.run_one(xe, str(CORPUS / case), "numpy", "per-device")
    assert res["status"] == "pass", f"{case}: {res['reason']}\n{res.get('traceback', '')}"


@pytest.mark.parametrize("case", CASES)
def test_corpus_shapes_reinferred(case):
    """Our shape rules agree with every shape XLA printed."""
    xe.parse_hlo(_text(case)).verify()


@pytest.mark.parametrize("case", CASES)
def test_corpus_print_parse_round_trip(case):
    comp = xe.parse_hlo(_text(case))
    text = comp.as_hlo_text()
    again = xe.parse_hlo(text)
    assert again.as_hlo_text() == text
    assert [str(s) for s in again.parameter_shapes] == [str(s) for s in comp.parameter_shapes]
    assert str(again.result_shape) == str(comp.result_shape)
