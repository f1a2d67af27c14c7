"""Fuzzing for reliability (the reliability issue's suite): random illegal attribute values
for every registered op, generated from the registry's attribute schemas; random hand-edits
of the HLO corpus, parsed and run on numpy and numba; bad ``run`` arguments; huge modules;
dynamic sizes at run time; a student's actions on BuilderWidget; answers to exercises.

Every case runs in a worker process (``fuzzkit.Worker``): a crash or a hang is observed and
fails the test, it does not end the test run.  The property, case by case: a project error
(ShapeError, HloParseError, ExecutionError, SizeLimitError, NotImplementedError) whose
message names the op or the line -- or success, with the backends agreeing and no input
modified.  Examples are bounded and derandomized under CI (see conftest.py); the full
counts come from ``scripts/probe_reliability.py``.
"""
import os
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fuzzkit

#: XLA_EXPLORER_FUZZ_SCALE=10 runs ten times as many examples (a longer search, by hand)
SCALE = max(1, int(os.environ.get("XLA_EXPLORER_FUZZ_SCALE", "1")))


def fuzz(max_examples):
    return settings(max_examples=max_examples * SCALE, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def worker():
    w = fuzzkit.Worker(timeout=120)
    yield w
    w.close()


def _verdicts(worker, cases):
    out = []
    for case in cases:
        opcode, index, mode, kw, bad = case
        ex = fuzzkit.examples()[opcode][index]
        outcome = worker.call_safe("run_op_case", opcode, index, mode, kw, bad.value if bad else None)
        out.append((fuzzkit.classify_op(outcome, opcode, ex.api, bad), case, outcome))
    return out


def test_every_registered_op_has_a_legal_example():
    assert fuzzkit.no_example() == []


def test_the_examples_are_legal_eagerly_and_symbolically(worker):
    cases = [(op, i, mode, None, None) for op, exs in sorted(fuzzkit.examples().items())
             for i in range(len(exs)) for mode in ("eager", "symbolic")]
    bad = [(v, c, o) for v, c, o in _verdicts(worker, cases) if v != "fine" or o["kind"] not in ("ok", "error")]
    assert not bad, bad[:5]
    # a base example may only fail where running needs what no example gives (host channels)
    failing = {c[0] for v, c, o in _verdicts(worker, cases) if o["kind"] == "error"}
    assert failing <= {"infeed", "recv", "recv-done", "send", "send-done"}, failing


# -- attributes: illegal values from the schema ----------------------------------------------------

_OPS = sorted(fuzzkit.examples())


@st.composite
def attribute_cases(draw):
    opcode = draw(st.sampled_from(_OPS))
    index = draw(st.integers(0, len(fuzzkit.examples()[opcode]) - 1))
    kinds = fuzzkit.case_kinds(opcode, index)
    if not kinds:
        return opcode, index, "eager", None, None
    kw, kind, required, in_schema = draw(st.sampled_from(kinds))
    mode = draw(st.sampled_from(["eager", "symbolic", "apply"] if in_schema else ["eager", "symbolic"]))
    generated = st.one_of(
        st.integers(-2 ** 70, 2 ** 70), st.floats(allow_nan=True), st.text(max_size=4), st.booleans(),
        st.lists(st.one_of(st.integers(-3, 9), st.floats(-3, 9), st.booleans(), st.text(max_size=1)), max_size=4),
        st.lists(st.lists(st.integers(-2, 5), max_size=3), max_size=3))
    if draw(st.booleans()):
        bad = draw(st.sampled_from(fuzzkit.bad_values(kind, required)))
    else:
        value = draw(generated)
        bad = fuzzkit.Bad(value, fuzzkit.must_refuse(kind, value))
    return opcode, index, mode, kw, bad


@fuzz(250)
@given(case=attribute_cases())
def test_illegal_attributes_are_refused_naming_the_op(worker, case):
    verdict, case, outcome = _verdicts(worker, [case])[0]
    assert verdict == "fine", (case, outcome)


@fuzz(120)
@given(data=st.data())
def test_bad_operands_are_refused_naming_the_op(worker, data):
    opcode = data.draw(st.sampled_from(_OPS))
    ex = fuzzkit.examples()[opcode][0]
    positions = [p for p in range(len(ex.args)) if fuzzkit.is_operand(ex, p)]
    if not positions:
        return
    pos = data.draw(st.sampled_from(positions))
    value, must = data.draw(st.sampled_from(fuzzkit.BAD_OPERANDS))
    mode = data.draw(st.sampled_from(["eager", "symbolic"]))
    outcome = worker.call_safe("run_operand_case", opcode, 0, mode, pos, value)
    verdict = fuzzkit.classify_op(outcome, opcode, ex.api, fuzzkit.Bad(value, must))
    assert verdict == "fine", (opcode, pos, value, mode, outcome)


def test_the_builders_own_functions_refuse_bad_arguments(worker):
    bad = []
    for case in fuzzkit.builder_api_cases():
        outcome = worker.call_safe("run_api_case", case)
        verdict = fuzzkit.classify_op(outcome, case[0], case[0], fuzzkit.Bad(None, case[-1]))
        if verdict != "fine":
            bad.append((case, outcome))
    assert not bad, bad[:5]


# -- HLO text: hand-edits of real modules, parsed and run on numpy and numba ----------------------

_CORPUS = fuzzkit.corpus_texts()
needs_corpus = pytest.mark.skipif(not _CORPUS, reason="the HLO corpus (../shared/hlo_corpus) is not there")


@needs_corpus
@fuzz(30)
@given(name=st.sampled_from(sorted(_CORPUS) or ["-"]), seed=st.integers(0, 2 ** 16), count=st.integers(1, 3))
def test_mutated_corpus_modules_parse_and_run_or_fail_clearly(worker, name, seed, count):
    text = fuzzkit.mutations(_CORPUS[name], random.Random(seed), count)
    outcome = worker.call_safe("run_hlo_case", text, ("numpy", "numba"))
    assert fuzzkit.classify_hlo(outcome) == "fine", (name, seed, count, outcome)


@needs_corpus
@fuzz(60)
@given(name=st.sampled_from(sorted(_CORPUS) or ["-"]), seed=st.integers(0, 2 ** 16))
def test_bad_run_arguments_are_refused_naming_the_parameter(worker, name, seed):
    rng = random.Random(seed)
    cases = fuzzkit.bad_argument_lists(_CORPUS[name], rng)
    if not cases:
        return
    args, must = rng.choice(cases)
    outcome = worker.call_safe("run_args_case", _CORPUS[name], args, ("numpy", "numba"))
    assert fuzzkit.classify_args(outcome, must) == "fine", (name, seed, outcome)


@pytest.mark.parametrize("name, text", fuzzkit.huge_modules(), ids=[n for n, _ in fuzzkit.huge_modules()])
def test_huge_modules_are_refused_before_allocating(worker, name, text):
    outcome = worker.call_safe("run_hlo_case", text, ("numpy", "numba"))
    assert outcome["kind"] == "error" and outcome["type"] in ("SizeLimitError", "HloParseError", "ShapeError"), \
        outcome
    assert fuzzkit.classify_hlo(outcome) == "fine", outcome


# -- the harness itself --------------------------------------------------------------------------------

def test_a_crash_in_the_worker_is_observed_and_the_next_case_runs(worker):
    outcome = worker.call_safe("crash_for_test")
    assert outcome["kind"] == "crash" and fuzzkit.classify_hlo(outcome) == "crash"
    ok = worker.call_safe("run_op_case", "add", 0, "eager", None, None)
    assert ok == {"kind": "ok", "agree": True}


@fuzz(25)
@given(kind=st.sampled_from(sorted(fuzzkit._DYNAMIC_BODIES)), bound=st.integers(1, 12), static=st.integers(0, 12),
       n=st.integers(0, 14), m=st.integers(0, 14))
def test_dynamic_sizes_at_run_time_are_checked_on_every_backend(worker, kind, bound, static, n, m):
    outcome = worker.call_safe("run_dynamic_case", kind, bound, static, n, m)
    assert fuzzkit.classify_dynamic(outcome) == "fine", (kind, bound, static, n, m, outcome)


def _widget_cases():
    try:
        return fuzzkit.widget_cases()
    except ImportError:
        return []


_WIDGET_CASES = _widget_cases()


@pytest.mark.skipif(not _WIDGET_CASES, reason="ipywidgets is not installed")
@fuzz(15)
@given(case=st.sampled_from(_WIDGET_CASES or [None]))
def test_builder_widget_survives_any_student_action(worker, case):
    outcome = worker.call_safe("run_widget_case", *case)
    assert fuzzkit.classify_widget(outcome) == "fine", (case, outcome)


@fuzz(20)
@given(case=st.sampled_from(fuzzkit.check_cases()))
def test_exercise_check_answers_any_answer_with_feedback(worker, case):
    outcome = worker.call_safe("run_check_case", *case)
    assert fuzzkit.classify_check(outcome) == "fine", (case, outcome)
