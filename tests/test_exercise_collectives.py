"""Collectives on simulated replicas as "values" (one replica's result) and "fix" (repair a call
from its ShapeError) exercises, replica groups written as the spec does ({{0,2},{1,3}});
Bitcast's fix exercise, answered with a shape."""
import numpy as np

from xla_explorer import exercises as E

COLLECTIVES = ("all-reduce", "all-gather", "all-to-all", "collective-permute", "reduce-scatter")


def test_every_collective_has_values_and_fix_and_bitcast_has_fix():
    bank = E.available()
    for op in COLLECTIVES:
        assert {"replicas", "values", "fix"} <= set(bank[op]), (op, bank[op])
    assert "fix" in bank["bitcast"]


def test_replica_groups_in_the_spec_notation_fix_a_call():
    ex = E.make("all-gather", seed=1, level=2, kind="fix")
    assert ex.hidden == ("replica_groups",) and "names id 1 twice" in ex.prompt
    assert "meant results:" in ex.prompt and "replica 3:" in ex.prompt and "{{a,b},{c,d}}" in ex.prompt
    assert ex.check("{{0,2},{1,3}}").correct
    assert ex.check([[0, 2], [1, 3]]).correct
    assert not ex.check(((2, 0), (3, 1))).correct  # AllGather concatenates in group order
    fb = ex.check("{{0,1},{2,3}}")  # legal, but another result
    assert not fb.correct and "replica 0 gets" in fb.message and fb.expected is None
    assert "{{0,2},{1,3}}" not in fb.message  # a student never sees the answer
    fb = ex.check("{{0,1},{1,3}}")
    assert not fb.correct and "illegal" in fb.message and "names id 1 twice" in fb.message
    fb = ex.check("{{0,9},{1,3}}")  # the shape rule cannot know the replica count: run, and told
    assert not fb.correct and "fails on 4 replicas" in fb.message
    for bad in ("{{0,2}", "x", 10 ** 12, [[10 ** 12]], None, [[]]):
        fb = ex.check(bad)
        assert not fb.correct and fb.message
    teacher = E.make("all-gather", seed=1, level=2, kind="fix", teacher=True)
    assert teacher.check("{{0,1},{2,3}}").expected == ((0, 2), (1, 3))


def test_every_collective_fix_and_values_exercise_passes_its_own_answer_and_fails_a_wrong_one():
    for op in COLLECTIVES:
        for level in E.LEVELS:
            fix = E.make(op, seed=3, level=level, kind="fix", teacher=True)
            assert fix.check(fix.solution().answer).correct, fix.prompt
            values = E.make(op, seed=3, level=level, kind="values")
            replica = values.replica
            assert f"What does replica {replica} get" in values.prompt
            want = values.call.run_replicated()[replica]
            assert values.check(want.tolist()).correct
            fb = values.check((want + 1).tolist())
            assert not fb.correct and fb.expected is None and "should be" not in fb.message


def test_a_permute_values_exercise_asks_for_a_replica_that_receives_something_else():
    ex = E.make("collective-permute", seed=1, level=3, kind="values")
    own = ex.call.replicas[ex.replica][0]
    assert not np.array_equal(ex.expected, own)
    assert ex.check(ex.expected.tolist()).correct
    assert ex.check("{" + ", ".join(str(int(v)) for v in ex.expected) + "}").correct


def test_bitcast_fix_takes_a_shape_as_text():
    ex = E.make("bitcast", seed=0, level=2, kind="fix")
    assert "a bitcast cannot change the number of bits" in ex.prompt
    assert "a shape: element type and sizes" in ex.prompt
    right = str(E.make("bitcast", seed=0, level=2, kind="fix", teacher=True).solution().answer)
    assert ex.check(right).correct and ex.check(" " + right + " ").correct
    fb = ex.check("s32[5,5]")
    assert not fb.correct and "800" in fb.message  # the bits of the wrong shape
    fb = ex.check("f32[")
    assert not fb.correct and "could not read" in fb.message
