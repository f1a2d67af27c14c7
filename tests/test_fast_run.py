"""The numba executor's fast run (``numba_executor._fast_run``): a CPU module run before runs
its program without ``run``'s Python steps, and whatever ``run`` would decide differently
-- another argument dtype, shape or kind, other options, another denormal environment, a
lowered size limit, an edited module, other compile budgets, a progress listener -- goes
through ``run`` again, with its results and errors.  Results are the bits of the first
run (the walk), in every thread."""
import threading

import numpy as np
import pytest

import xla_explorer as xe

pytest.importorskip("numba")

from xla_explorer.executors import numba_executor  # noqa: E402

F32 = np.float32


def _module(n=4):
    b = xe.XlaBuilder("fast")
    x = xe.Parameter(b, 0, xe.Shape("f32", (n, n)), "x")
    k = xe.Parameter(b, 1, xe.Shape("s32", ()), "k")
    t = xe.Transpose(xe.Add(x, x), [1, 0])          # a fused loop, then a kernel
    s = xe.DynamicSlice(t, [k, k], [2, 2])
    return b.build(xe.Tuple(xe.Mul(t, xe.Constant(b, F32(3))), s))


def _want(x, k):
    t = (x + x).T
    k = min(max(int(k), 0), x.shape[0] - 2)
    return (t * F32(3)).astype(F32), t[k:k + 2, k:k + 2]


def _same(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert type(g) is np.ndarray and g.dtype == w.dtype and g.shape == w.shape
        assert g.tobytes() == w.tobytes()


@pytest.fixture
def walks(monkeypatch):
    """The runs that went through ``numba_executor.run`` (not the fast run)."""
    made = []
    real = numba_executor.run

    def run(module, args, *a, **k):
        made.append(module.name)
        return real(module, args, *a, **k)
    monkeypatch.setattr(numba_executor, "run", run)
    return made


def test_later_runs_take_the_fast_run_with_the_first_runs_bits(walks):
    comp = _module()
    x = np.arange(16, dtype=F32).reshape(4, 4) - F32(7.5)
    first = comp.run(x, np.int32(1), backend="numba")
    _same(first, _want(x, 1))
    for k in (np.int32(1), np.array(2, np.int32), np.int32(-5), np.int32(9)):
        _same(comp.run(x, k, backend="numba"), _want(x, k))
    _same(comp.run(x.T, np.int32(0), backend="numba"), _want(x.T, 0))   # a transposed argument: as it is
    assert walks == ["fast"]


def test_what_the_fast_run_does_not_decide_goes_through_run(walks, monkeypatch):
    comp = _module()
    x = np.ones((4, 4), F32)
    comp.run(x, np.int32(0), backend="numba")
    comp.run(x, np.int32(0), backend="numba")
    assert len(walks) == 1
    # arguments the fast run does not take as they are: converted or refused by run
    _same(comp.run(x.tolist(), 0, backend="numba"), _want(x, 0))
    with pytest.raises(xe.ExecutionError, match="dtype float64"):
        comp.run(x.astype(np.float64), np.int32(0), backend="numba")
    with pytest.raises(xe.ExecutionError, match=r"shape \[2, 8\]"):
        comp.run(x.reshape(2, 8), np.int32(0), backend="numba")
    with pytest.raises(xe.ExecutionError, match="dtype int64"):
        comp.run(x, np.int64(0), backend="numba")
    with pytest.raises(xe.ExecutionError, match="takes 2 arguments|2 arguments"):
        comp.run(x, backend="numba")
    assert len(walks) == 6
    # options: a watched run, an unfused one
    seen = []
    comp.run(x, np.int32(0), backend="numba", on_value=lambda inst, v: seen.append(inst.name))
    assert seen and len(walks) == 7
    _same(comp.run(x, np.int32(1), backend="numba", fuse=False), _want(x, 1))
    assert len(walks) == 8
    _same(comp.run(x, np.int32(1), backend="numba"), _want(x, 1))   # (the plan fused again: run)
    assert len(walks) == 9
    # compile budgets changed: run plans again
    from xla_explorer.executors import fusion
    monkeypatch.setattr(fusion, "MAX_FUSED_LOOPS", fusion.MAX_FUSED_LOOPS - 1)
    _same(comp.run(x, np.int32(1), backend="numba"), _want(x, 1))
    assert len(walks) == 10
    _same(comp.run(x, np.int32(1), backend="numba"), _want(x, 1))   # and the new fast run is taken
    assert len(walks) == 10


def test_a_lowered_size_limit_and_the_denormal_environment_are_read_every_run(walks):
    comp = _module(64)    # 16 KiB values
    x = np.full((64, 64), 1e-40, F32)
    x[0, 0] = 1
    comp.run(x, np.int32(0), backend="numba")
    flushed = comp.run(x, np.int32(0), backend="numba")
    assert flushed[0][1, 1] == 0 and len(walks) == 1
    old = xe.set_size_limit(8 << 10)
    try:
        with pytest.raises(xe.SizeLimitError):
            comp.run(x, np.int32(0), backend="numba")
    finally:
        xe.set_size_limit(old)
    assert len(walks) == 2
    ieee = comp.run(x, np.int32(0), backend="numba", denormals="ieee")
    _same(ieee, _want(x, 0))    # NumPy's arithmetic keeps denormals
    assert ieee[0][1, 1] != 0 and len(walks) == 3
    for _ in range(2):
        _same(comp.run(x, np.int32(0), backend="numba", denormals="ieee"), ieee)
        _same(comp.run(x, np.int32(0), backend="numba", denormals="flush"), flushed)
    assert len(walks) == 3


def test_an_edited_module_and_a_listener_go_through_run(walks):
    from xla_explorer import progress
    comp = _module()
    x = np.ones((4, 4), F32)
    comp.run(x, np.int32(0), backend="numba")
    events = []
    with progress.listening(events.append):
        comp.run(x, np.int32(0), backend="numba")
    assert len(walks) == 2 and events[-1].kind == "end" and events[-1].task.status == "done"
    other = _module()
    comp.entry = other.entry     # another entry: its own plan
    comp.run(x, np.int32(0), backend="numba")
    assert len(walks) == 3
    comp.run(x, np.int32(0), backend="numba")
    assert len(walks) == 3


def test_threads_run_one_module_at_the_same_time():
    comp = _module(32)
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((32, 32)).astype(F32) for _ in range(4)]
    wants = [comp.run(x, np.int32(k)) for k, x in enumerate(xs)]
    for k, x in enumerate(xs):
        comp.run(x, np.int32(k), backend="numba")
    errors = []

    def work(k):
        try:
            for _ in range(200):
                _same(comp.run(xs[k], np.int32(k), backend="numba"), wants[k])
        except Exception as e:   # noqa: BLE001 (reported below)
            errors.append(e)
    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_a_run_inside_a_run_and_the_reduce_memo(monkeypatch):
    """A fast run inside another run's step (a kernel that runs a module: as a widget's
    callback could) keeps the outer run's reduce memo, and each run starts its own."""
    from xla_explorer.executors.cpu import reduction
    from xla_explorer.ops import registry
    inner = _module()
    x = np.ones((4, 4), F32)
    inner.run(x, np.int32(0), backend="numba")
    inner.run(x, np.int32(0), backend="numba")
    b = xe.XlaBuilder("outer")
    y = xe.Parameter(b, 0, xe.Shape("f32", (4, 4)), "y")
    outer = b.build(xe.Neg(xe.Rev(y, [0])))
    memos = []
    real = registry.LAYERS["cpu"]["reverse"]

    def reverse(operand, **kw):
        memos.append(reduction._memo.d)
        _same(inner.run(x, np.int32(0), backend="numba"), _want(x, 0))
        memos.append(reduction._memo.d)
        return real(operand, **kw)
    monkeypatch.setitem(registry.LAYERS["cpu"], "reverse", reverse)
    for _ in range(3):
        np.testing.assert_array_equal(outer.run(x * 2, backend="numba"), -(x * 2)[::-1])
    assert len(memos) == 6 and all(m is not None for m in memos)
    assert all(memos[k] is memos[k + 1] for k in range(0, 6, 2))
    assert getattr(reduction._memo, "d", None) is None


def test_a_program_reading_the_run_context_gets_one_each_run():
    """Steps that read the context (an rng op run by the walk's code, replica-id) get the
    run's own; a program of prepared steps and loops runs without one."""
    b = xe.XlaBuilder("ctx")
    lo = xe.Parameter(b, 0, xe.Shape("f32", ()), "lo")
    r = xe.RngUniform(lo, xe.Constant(b, F32(1)), xe.Shape("f32", (3,)))
    rid = xe.ConvertElementType(xe.ReplicaId(b), "f32")
    comp = b.build(xe.Add(r, xe.Broadcast(rid, [3])))
    first = comp.run(F32(0), backend="numba")
    for _ in range(3):   # a fresh context each run: the same seed, the same draws
        np.testing.assert_array_equal(comp.run(F32(0), backend="numba"), first)
    (program,) = comp.entry.__dict__["_numba_programs"].values()
    assert not program.ctx_free
    plain = _module()
    x = np.ones((4, 4), F32)
    plain.run(x, np.int32(0), backend="numba")
    assert all(p.ctx_free for p in plain.entry.__dict__["_numba_programs"].values())


def test_a_program_too_long_for_one_function_walks_its_steps(monkeypatch):
    monkeypatch.setattr(numba_executor, "_STRAIGHT_MAX_STEPS", 1)
    comp = _module()
    x = np.arange(16, dtype=F32).reshape(4, 4)
    for k in range(3):
        _same(comp.run(x, np.int32(k), backend="numba"), _want(x, k))
    (program,) = comp.entry.__dict__["_numba_programs"].values()
    assert "straight" not in program.straight.__name__


def test_a_prepared_steps_error_names_its_instruction(monkeypatch):
    """A prepared step run in place by the program's function (``_straight``) names the op
    and the instruction in its errors, as the step itself does (a progress listener's
    runs walk the steps)."""
    from xla_explorer import progress
    from xla_explorer.ops import registry
    kernel = registry.LAYERS["cpu"]["transpose"]

    def prepare(operand_shapes, **kw):
        def run(x):
            raise ValueError("boom")
        return run
    monkeypatch.setattr(kernel, "prepare", prepare)
    comp = _module()
    x = np.ones((4, 4), F32)
    comp.run(x, np.int32(0), backend="numba")     # the walk: the kernel itself
    name = next(i.name for i in comp.entry.instructions if i.opcode == "transpose")
    for _ in range(2):
        with pytest.raises(xe.ExecutionError, match=rf"Transpose {name} \(numba kernel\): ValueError: boom"):
            comp.run(x, np.int32(0), backend="numba")
    with progress.listening(lambda event: None):
        with pytest.raises(xe.ExecutionError, match=rf"Transpose {name} \(numba kernel\): ValueError: boom"):
            comp.run(x, np.int32(0), backend="numba")
