"""The exercise bank: every generator's own solution passes its check, perturbed answers
fail with a message that names the rule or the values, prompts show the attributes,
exercises are deterministic per seed, and the module needs no optional dependency."""
import copy
import io
import os
import subprocess
import sys

import numpy as np
import pytest

import xla_explorer as xe
from xla_explorer import exercises as E
from xla_explorer.errors import ShapeError
from xla_explorer.exercises.core import Call, as_index, parse_literal, spec_attr, spec_literal
from xla_explorer.ops import registry

#: the ops the bank must cover (the brief's list, by HLO opcode)
REQUIRED = ("gather", "scatter", "reduce-window", "pad", "dynamic-slice", "dynamic-update-slice", "slice",
            "transpose", "broadcast", "concatenate", "reshape", "reverse", "reduce", "dot", "convolution",
            "select", "clamp", "divide", "remainder", "shift-left", "shift-right-logical",
            "shift-right-arithmetic", "convert", "sort", "while")

SEEDS = (0, 1, 2)
CASES = [(op, kind, level) for op, kinds in E.available().items() for kind in kinds for level in E.LEVELS]


def _exercises(op, kind, level):
    seeds = SEEDS[:1] if kind == "implement" else SEEDS  # one implement check runs ~40 configurations
    return [E.make(op, seed=s, level=level, kind=kind, teacher=True) for s in seeds]


# -- perturbing an answer so that it is wrong -------------------------------------------------------

def _bump(x):
    """A different value of the same kind."""
    if isinstance(x, (bool, np.bool_)):
        return not x
    if isinstance(x, float) and np.isnan(x):
        return 0.0
    if isinstance(x, float) and np.isinf(x):
        return 1.0
    return x + 1


def _perturb_array(a):
    a = np.array(a, copy=True, order="C")
    if a.dtype.kind == "f":
        a = a.astype(np.float64)  # + 1 must not round away (2052 + 1 is 2052 in f16)
    flat = a.reshape(-1)  # a view of the C-ordered copy
    if a.dtype == np.bool_:
        flat[0] = ~flat[0]
    elif a.dtype.kind == "f" and not np.isfinite(flat[0]):
        flat[0] = 1
    elif a.dtype.kind in "iu" and flat[0] == np.iinfo(a.dtype).max:
        flat[0] = flat[0] - 1
    else:
        flat[0] = flat[0] + 1
    return a


def _perturb_attr(v):
    if isinstance(v, xe.Shape):  # Bitcast's shape: one size off
        return xe.Shape(v.element_type, list(v.dims[:-1]) + [v.dims[-1] + 1])
    if isinstance(v, dict):
        k = next(iter(v))
        return dict(v, **{k: _perturb_attr(v[k])})
    if isinstance(v, tuple) and v:
        return v[:-1] + (_perturb_attr(v[-1]),)
    if isinstance(v, tuple):
        return (1,)
    return _bump(v)


def _perturb(ex, answer):
    if ex.kind == "shape":
        if str(answer).startswith("illegal"):
            return (1, 2, 3)
        if str(answer).startswith("("):  # a tuple-shaped result: one size of its last element off
            last = xe.Shape.parse(answer).tuple_shapes[-1]
            dims = list(last.dims)
            dims[-1] += 1
            return str(answer)[:str(answer).rindex(str(last))] + str(xe.Shape(last.element_type, dims)) + ")"
        dims = list(xe.Shape.parse(answer).dims)
        if not dims:
            return (1,)
        dims[0] += 1
        return tuple(dims)
    if ex.kind == "legal":
        return "illegal: operand" if answer == "legal" else "legal"
    if ex.kind == "values":
        if isinstance(answer, tuple):
            return (_perturb_array(answer[0]),) + answer[1:]
        return _perturb_array(answer)
    if ex.kind == "replicas":
        return [_perturb_array(answer[0])] + list(answer[1:])
    if ex.kind == "implement":
        def off_by_one(*operands, **attrs):
            return np.asarray(answer(*operands, **attrs)) + 1
        return off_by_one
    if ex.kind == "read":
        if answer in ("padding", "skipped"):
            return tuple(0 for _ in ex.index) if answer == "skipped" else (0,) * np.ndim(ex.call.values[0])
        if isinstance(answer, list):  # a set of indices or pairs
            if answer:
                return answer[1:]
            zero = (0,) * np.ndim(ex.call.values[0])
            return [(zero, (0,) * np.ndim(ex.call.values[1]))] if ex.mode == "pairs" else [zero]
        if isinstance(answer, tuple) and isinstance(answer[0], str):
            return (answer[0], answer[1][:-1] + (answer[1][-1] + 1,))
        return answer[:-1] + (answer[-1] + 1,)
    return _perturb_attr(answer)


# -- the bank ------------------------------------------------------------------------------------------

def test_the_bank_covers_the_required_ops():
    missing = [op for op in REQUIRED if op not in E.available()]
    assert not missing, f"no exercises for {missing}"


def test_status_table_exercise_column_is_filled():
    table = xe.status_table(file=io.StringIO())
    empty = [op for op in REQUIRED if table.cell(op, "exercise") == "-"]
    assert not empty
    assert all(op in registry.LAYERS["exercise"] for op in REQUIRED)


@pytest.mark.parametrize("op,kind,level", CASES, ids=[f"{o}-{k}-{lv}" for o, k, lv in CASES])
def test_solution_passes_and_a_perturbed_answer_fails(op, kind, level):
    for ex in _exercises(op, kind, level):
        sol = ex.solution(teacher=True)
        fb = ex.check(sol)
        assert fb.correct, f"{ex!r}: its own solution fails:\n{ex.prompt}\n{fb}"
        assert ex.check(copy.deepcopy(sol.answer)).correct
        wrong = _perturb(ex, sol.answer)
        fb = ex.check(wrong)
        if kind in ("attribute", "fix", "indexing") and fb.correct:
            # a different attribute may give the same target: the check must have run it
            attrs = dict(ex.call.attrs, **({ex.hidden[0]: wrong} if len(ex.hidden) == 1 else wrong))
            attrs = {k: ex.generator.normalize_attr(k, v) for k, v in attrs.items()}
            np.testing.assert_array_equal(ex.call.run(attrs), ex.target)
            continue
        assert not fb.correct, f"{ex!r}: the wrong answer {wrong!r} passes:\n{ex.prompt}"
        _assert_teaches(ex, fb, sol.answer)
        hidden = ex.check(wrong, reveal=False)
        assert not hidden.correct and hidden.expected is None


def _assert_teaches(ex, fb, answer):
    """The message of a wrong answer names the rule or the values."""
    msg = fb.message
    assert len(msg) > 30, msg
    if ex.kind == "values":
        assert "result" in msg and any(c.isdigit() or c in "NTtf" for c in msg), msg
    elif ex.kind == "shape":
        if ex.error is not None:
            assert type(ex.call).__name__ and str(ex.error)[:20] in msg, msg
        elif ex.target is None:
            assert str(answer) in msg or "dim(" in msg or "dimension" in msg, msg
    elif ex.kind == "legal":
        assert (ex.error is not None and str(ex.error)[:20] in msg) or "legal" in msg, msg
    elif ex.kind == "read":
        assert "[" in msg and ("result" in msg or "updates" in msg), msg
    else:
        assert "target" in msg or "illegal" in msg or "result" in msg, msg


@pytest.mark.parametrize("op", sorted(E.available()))
def test_prompts_show_operands_and_attributes(op):
    for kind in E.available()[op]:
        for level in E.LEVELS:
            ex = E.make(op, seed=1, level=level, kind=kind)
            text = ex.prompt
            assert ex.call.api + "(" in text
            hidden = ex.hidden if kind in ("attribute", "indexing") else ()
            for entry in ex.call.display:
                if entry[0] in ("attr", "shown"):
                    kw = entry[1]
                    if kw in hidden:
                        assert f"{kw}=?" in text
                    else:
                        value = entry[2] if entry[0] == "shown" else ex.call.attrs[kw]
                        assert f"{kw}={spec_attr(value, kw)}" in text, (kw, text)
            for name, value in ex.call.operands:
                assert f"let {name}:" in text
                if kind in ("values", "read", "attribute"):
                    assert spec_literal(value).split("\n")[0][:12] in text
            assert ex.question() in text
            assert "```" in ex._repr_markdown_() and "<pre>" in ex._repr_html_()
            compile(ex.code(), "<exercise>", "exec")  # the Python form is valid code


@pytest.mark.parametrize("op", sorted(E.available()))
def test_exercises_are_deterministic_per_seed(op):
    for level in E.LEVELS:
        a, b = E.make(op, seed=5, level=level), E.make(op, seed=5, level=level)
        assert a.kind == b.kind and a.prompt == b.prompt
        assert str(a.solution(teacher=True)) == str(b.solution(teacher=True))
    prompts = {E.make(op, seed=s, level=2, kind=E.available()[op][0]).prompt for s in range(6)}
    assert len(prompts) > 1, "different seeds should give different exercises"


def test_the_same_seed_gives_the_same_problem_for_every_kind():
    calls = {kind: E.make("pad", seed=4, level=2, kind=kind).call for kind in ("values", "read", "attribute")}
    assert len({spec_literal(c.value("operand")) + str(c.attrs) for c in calls.values()}) == 1


def test_generators_are_the_status_layer_and_callable():
    gen = registry.LAYERS["exercise"]["gather"]
    ex = gen(seed=3, level=1, kind="shape")
    assert ex.opcode == "gather" and ex.kind == "shape"
    assert "gather" in repr(gen)


def test_op_names_resolve():
    assert E.make("Gather", seed=3).opcode == "gather"
    assert E.make("DotGeneral", seed=1).opcode == "dot"
    assert E.make("Dot", seed=1).opcode == "dot"
    assert E.make("Rev", seed=1).opcode == "reverse"
    assert E.make("dynamic_slice", seed=1).opcode == "dynamic-slice"
    assert xe.exercises.make("gather", seed=3, level=1).prompt
    with pytest.raises(KeyError, match="no exercises"):
        E.make("cholesky")
    with pytest.raises(ValueError, match="kinds"):
        E.make("convert", kind="shape")
    with pytest.raises(ValueError, match="level"):
        E.make("pad", level=4)


# -- answers in the forms a student writes them ----------------------------------------------------------

def test_shape_answers_in_many_forms():
    ex = next(e for s in range(40) for e in [E.make("gather", seed=s, level=1, kind="shape")])
    shape = xe.Shape.parse(ex.solution(teacher=True).answer)
    for answer in (str(shape), shape, tuple(shape.dims), list(shape.dims), "x".join(map(str, shape.dims)),
                   str(tuple(shape.dims))):
        assert ex.check(answer).correct, answer
    wrong_type = str(shape).replace("s32", "f32")
    fb = ex.check(wrong_type)
    assert not fb.correct and "element type" in fb.message
    assert not ex.check("illegal").correct


def test_an_illegal_shape_exercise_takes_illegal_as_the_answer():
    ex = next(e for s in range(200) for e in [E.make("gather", seed=s, level=2, kind="shape")] if e.error)
    assert ex.check("illegal").correct
    assert ex.check(ShapeError).correct
    assert ex.check(ex.solution(teacher=True).answer).correct
    fb = ex.check((2, 3))
    assert not fb.correct and "illegal" in fb.message and "Gather:" not in fb.message  # a student: no answer
    fb = ex.check((2, 3), teacher=True)
    assert not fb.correct and "Gather:" in fb.message


def test_legal_answers_name_the_argument():
    ex = next(e for s in range(100) for e in [E.make("slice", seed=s, level=1, kind="legal")] if e.error)
    arg = ex.solution(teacher=True).answer.split(":")[1].strip()
    assert ex.check(arg).correct and ex.check(f"illegal: {arg}").correct
    fb = ex.check("illegal")
    assert not fb.correct and "which argument" in fb.message
    assert not ex.check(True).correct and not ex.check("legal").correct
    legal = next(e for s in range(100) for e in [E.make("slice", seed=s, level=1, kind="legal")] if e.error is None)
    assert legal.check(True).correct and legal.check("legal").correct
    assert not legal.check("illegal: strides").correct


def test_values_answers_in_spec_text_and_nested_lists():
    ex = E.make("pad", seed=0, level=1, kind="values")
    expected = ex.solution(teacher=True).answer
    assert ex.check(spec_literal(expected)).correct
    assert ex.check(expected.tolist()).correct
    fb = ex.check(expected.tolist()[:-1])
    assert not fb.correct and "shape" in fb.message
    fb = ex.check("not a literal ]")
    assert not fb.correct and "could not read" in fb.message


def test_values_checks_floats_to_the_types_precision():
    ex = next(e for s in range(50) for e in [E.make("convert", seed=s, level=3, kind="values")]
              if e.call.attrs["new_element_type"] == "f16")
    expected = np.asarray(ex.solution(teacher=True).answer, np.float64)
    assert ex.check(expected.tolist()).correct
    wrong = expected.copy()
    finite = np.isfinite(wrong) & (wrong != 0)
    wrong[finite] += np.abs(wrong[finite]) * 1e-3  # half an f16 ulp is ~5e-4 relative
    if finite.any():
        assert not ex.check(wrong.tolist()).correct


def test_read_answers_padding_skipped_and_operand_names():
    pad = next(e for s in range(100) for e in [E.make("pad", seed=s, level=2, kind="read")]
               if e.solution(teacher=True).answer == "padding")
    assert pad.check("padding").correct and not pad.check((0, 0)).correct
    sc = next(e for s in range(100) for e in [E.make("scatter", seed=s, level=3, kind="read")]
              if e.solution(teacher=True).answer == "skipped")
    assert sc.check("skipped").correct
    fb = sc.check((0, 0))
    assert not fb.correct and "skip" in fb.message
    dus = E.make("dynamic-update-slice", seed=0, level=1, kind="read")
    name, idx = dus.solution(teacher=True).answer
    assert dus.check((name, idx)).correct and dus.check(f"({name!r}, {tuple(idx)})").correct
    other = "operand" if name == "update" else "update"
    assert not dus.check((other, idx)).correct


def test_read_answers_for_windows_are_sets():
    ex = E.make("reduce-window", seed=0, level=1, kind="read")
    answer = ex.solution(teacher=True).answer
    assert ex.check(list(reversed(answer))).correct
    assert ex.check([i[0] for i in answer]).correct  # rank 1: plain integers


def test_gather_read_explains_with_the_index_map_detail():
    ex = next(e for s in range(100) for e in [E.make("gather", seed=s, level=2, kind="read")] if e.access.clamped)
    text = "\n".join(ex.reasoning())
    assert "full_start_index" in text and "clamped" in text and "operand_index" in text
    fb = ex.check(tuple(ex.access.detail["full_start_index_before_clamp"]))
    assert not fb.correct and "full_start_index" in fb.message


def test_attribute_answers_accept_any_attribute_that_gives_the_target():
    ex = E.make("slice", seed=0, level=1, kind="attribute")
    sol = ex.solution(teacher=True).answer
    assert ex.check(sol).correct
    assert ex.check(tuple(sol[h] for h in ex.hidden)).correct
    starts, limits = sol["start_indices"], sol["limit_indices"]
    fb = ex.check({"start_indices": starts, "limit_indices": (limits[0] + 50,)})
    assert not fb.correct and "illegal" in fb.message and "limit_indices" in fb.message
    pad = E.make("pad", seed=2, level=1, kind="attribute")
    assert pad.check(str(list(pad.solution(teacher=True).answer))).correct  # typed as text


# -- hints, solutions, quizzes --------------------------------------------------------------------------

def test_hints_are_progressive():
    ex = E.make("gather", seed=3, level=1, kind="read")
    hints = [ex.hint() for _ in range(len(ex.hints) + 1)]
    assert hints[0].startswith("Hint 1/") and hints[1].startswith("Hint 2/")
    assert len(set(hints[:-1])) == len(ex.hints)
    assert "no more hints" in hints[-1]
    assert not any("First step" in h for h in ex.hints)  # the worked solution's first step: teachers only
    assert any("First step" in h for h in E.make("gather", seed=3, level=1, kind="read", teacher=True).hints)


def test_solution_carries_runnable_code():
    ex = E.make("slice", seed=2, level=2, kind="values")
    sol = ex.solution(teacher=True)
    scope = {}
    exec(sol.code, scope)  # noqa: S102 - the generated snippet, run as a student would
    np.testing.assert_array_equal(scope["result"], sol.answer)
    assert "Answer" in sol._repr_markdown_() and "<pre>" in sol._repr_html_()


def test_quiz_sheet():
    q = E.quiz(ops=["gather", "pad", "Slice"], n=5, seed=1)
    assert len(q) == 5 and {ex.opcode for ex in q} <= {"gather", "pad", "slice"}
    assert str(q) == str(E.quiz(ops=["gather", "pad", "Slice"], n=5, seed=1))
    answers = [ex.solution(teacher=True) for ex in q]
    assert all(f.correct for f in q.check(answers)) and q.score(answers) == 5
    assert q.score([None] * 5) == 0
    assert "Exercise 5" in q._repr_markdown_() and "<h3>" in q._repr_html_()
    with pytest.raises(E.TeacherOnly):
        q.answer_key()
    assert "1." in q.answer_key(teacher=True)
    only = E.quiz(n=4, seed=0, kinds=["values"])
    assert all(ex.kind == "values" for ex in only)
    assert all(ex.kind == "shape" for ex in E.quiz(n=6, seed=3, kinds=["shape"]))  # ops without shape kinds skipped


def test_parse_literal():
    assert parse_literal("{{1, 2}, {3, 4}}") == [[1, 2], [3, 4]]
    assert parse_literal("(1, 2)") == (1, 2)
    assert parse_literal("1, 2") == (1, 2)
    assert parse_literal("{true, false}") == [True, False]
    v = parse_literal("{NaN, -inf, 2.5}")
    assert np.isnan(v[0]) and v[1] == -np.inf and v[2] == 2.5
    assert parse_literal("padding") == "padding"
    assert parse_literal("{'slice_sizes': {1, 4}}") == {"slice_sizes": [1, 4]}
    assert as_index([1, 2]) == (1, 2) and as_index(3) == (3,) and as_index("x") is None


def test_call_text_and_code():
    call = Call("slice", [("operand", np.arange(5, dtype=np.int32))],
                {"start_indices": (1,), "limit_indices": (4,), "strides": (2,)},
                [("operand", "operand"), ("attr", "start_indices"), ("attr", "limit_indices"), ("attr", "strides")])
    assert call.call_text() == "Slice(operand, start_indices={1}, limit_indices={4}, strides={2})"
    assert call.call_text(python=True) == "xe.Slice(operand, start_indices=[1], limit_indices=[4], strides=[2])"
    assert call.declarations() == ["let operand: s32[5] = {0, 1, 2, 3, 4};"]
    np.testing.assert_array_equal(call.run(), [1, 3])
    assert str(call.shape()) == "s32[2]"


def test_level_three_reaches_the_hard_cases():
    def some(op, kind, pred, n=30):
        return any(pred(E.make(op, seed=s, level=3, kind=kind)) for s in range(n))
    assert some("gather", "values", lambda e: e.call.attrs["operand_batching_dims"])
    assert some("pad", "values", lambda e: any(lo < 0 or hi < 0 for lo, hi, _ in e.call.attrs["padding_config"]))
    assert some("reduce-window", "values",
                lambda e: max(e.call.attrs["window_dilations"] + e.call.attrs["base_dilations"]) > 1)
    assert some("scatter", "read", lambda e: e.access.skipped)
    assert some("dynamic-slice", "read", lambda e: e.access.clamped)
    assert some("convolution", "values", lambda e: max(e.call.attrs["lhs_dilation"] + e.call.attrs["rhs_dilation"]) > 1)
    assert some("dot", "values", lambda e: e.call.attrs["lhs_batch_dimensions"])


def test_widget_front_end():
    pytest.importorskip("ipywidgets")
    ex = E.make("pad", seed=0, level=1, kind="values")
    ui = ex.widget()
    ui.answer_box.value = spec_literal(ex.solution(teacher=True).answer)
    ui.buttons[0].click()
    assert "Correct" in ui.output.value
    ui.buttons[1].click()
    assert "Hint 1" in ui.output.value
    assert [b.description for b in ui.buttons] == ["Check", "Hint"]  # no Solution button for students
    ui.answer_box.value = spec_literal(ex.solution(teacher=True).answer + 1)
    ui.buttons[0].click()
    assert "Not quite" in ui.output.value and spec_literal(ex.solution(teacher=True).answer) not in ui.output.value


def test_the_module_imports_no_optional_dependency_and_is_deterministic_across_processes():
    code = ("import sys, xla_explorer.exercises as E; ex = E.make('gather', seed=1, level=3, kind='read'); "
            "ex.solution(teacher=True); "
            "heavy = [m for m in ('numba', 'matplotlib', 'ipywidgets', 'jax', 'graphviz', 'scipy') "
            "if m in sys.modules]; "
            "print(heavy); print(ex.prompt); sys.exit(1 if heavy else 0)")
    env = dict(os.environ, PYTHONHASHSEED="12345")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert E.make("gather", seed=1, level=3, kind="read").prompt in out.stdout


def test_every_data_movement_op_and_every_family_has_exercises():
    bank = E.available()
    missing = sorted(registry.CATEGORIES["data_movement"] - set(bank))
    assert not missing, f"data-movement ops without exercises: {missing}"
    families = {op.family for op in registry.OPS.values()}
    covered = {registry.get(op).family for op in bank}
    assert families <= covered, f"families without exercises: {sorted(families - covered)}"
    kinds = {k for ks in bank.values() for k in ks}
    assert {"indexing", "fix", "implement", "replicas"} <= kinds
    assert {"gather", "scatter"} <= {op for op, ks in bank.items() if "indexing" in ks}
    assert {op for op, ks in bank.items() if "replicas" in ks} >= {"all-reduce", "all-gather", "all-to-all",
                                                                  "collective-permute"}


def test_indexing_stories_cover_the_five_described_indexings():
    titles = {E.make(op, seed=s, level=lv, kind="indexing").call.story[0].split(":")[0].split(" ")[-1]
              for op in ("gather", "scatter") for lv in E.LEVELS for s in range(2)}
    text = " ".join(sorted(titles)).lower()
    for name in ("lookup", "gather_nd", "take_along_axis", "sum", "encoding"):
        assert name in text, (name, titles)


def test_implement_runs_the_students_function_on_generated_configurations():
    ex = E.make("pad", seed=0, level=1, kind="implement")
    calls = []

    def spy(operand, padding_value, *, padding_config):
        calls.append(padding_config)
        return np.asarray(xe.Pad(operand, padding_value, padding_config=padding_config))
    assert ex.check(spy).correct and len({str(c) for c in calls}) > 10
    fb = ex.check(lambda operand, padding_value, *, padding_config: operand)  # ignores the padding
    assert not fb.correct and "Pad(" in fb.message and fb.expected is None
    assert not ex.check("np.pad").correct  # text is not a function (and is never run)

    def exits(*args, **kwargs):
        raise SystemExit(3)
    assert "SystemExit" in ex.check(exits).message
