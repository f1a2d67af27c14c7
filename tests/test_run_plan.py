"""The numba/cuda executors' run programs (``numba_executor._Program``): decided once after a
first run, reused by later runs, and set aside when what they decided changes -- the module,
the argument's dtype or shape, the size limit, the denormal environment."""
import numpy as np
import pytest

import xla_explorer as xe

pytest.importorskip("numba")

from xla_explorer.executors import numba_executor  # noqa: E402

F32 = np.float32


def _module(n=4):
    b = xe.XlaBuilder("plan")
    x = xe.Parameter(b, 0, xe.Shape("f32", (n, n)), "x")
    t = xe.Transpose(xe.Add(x, x), [1, 0])          # a fused loop, then a kernel
    return b.build(xe.Mul(t, xe.Constant(b, F32(3))))


@pytest.fixture
def builds(monkeypatch):
    """The programs built, as (computation name, flush mode)."""
    made = []
    real = numba_executor._Program.build.__func__

    def build(cls, computation, plan, backend):
        made.append((computation.name, numba_executor._program_key(backend)[2]))
        return real(cls, computation, plan, backend)
    monkeypatch.setattr(numba_executor._Program, "build", classmethod(build))
    return made


def _want(x):
    return ((x + x).T * F32(3)).astype(F32)


def test_a_program_is_built_once_and_reused(builds):
    comp = _module()
    x = np.arange(16, dtype=F32).reshape(4, 4)
    for _ in range(4):
        np.testing.assert_array_equal(comp.run(x, backend="numba"), _want(x))
    assert [name for name, _ in builds] == ["plan"]
    programs = comp.entry.__dict__["_numba_programs"]
    (program,) = programs.values()
    assert [s[1] for s in program.steps] and program.max_bytes == 64


def test_other_dtypes_and_shapes_are_refused_or_converted_as_before(builds):
    comp = _module()
    x = np.arange(16, dtype=F32).reshape(4, 4)
    comp.run(x, backend="numba")
    comp.run(x, backend="numba")
    with pytest.raises(xe.ExecutionError, match=r"argument 0 .*expected f32\[4,4\].* dtype float64"):
        comp.run(x.astype(np.float64), backend="numba")
    with pytest.raises(xe.ExecutionError, match=r"expected f32\[4,4\] but the argument has shape \[2, 8\]"):
        comp.run(x.reshape(2, 8), backend="numba")
    # a nested list of exact values is converted; a transposed (non-contiguous) array is fine
    np.testing.assert_array_equal(comp.run(x.tolist(), backend="numba"), _want(x))
    np.testing.assert_array_equal(comp.run(x.T, backend="numba"), _want(x.T))
    s32 = xe.XlaBuilder("s")
    comp32 = s32.build(xe.Add(xe.Parameter(s32, 0, xe.Shape("s32", ()), "i"), xe.Constant(s32, np.int32(1))))
    assert comp32.run(2, backend="numba") == 3 and comp32.run(2, backend="numba") == 3
    with pytest.raises(xe.ExecutionError, match="not exactly an integer"):
        comp32.run(2.9, backend="numba")
    assert comp32.run(np.int32(5), backend="numba") == 6     # a NumPy scalar of the exact dtype
    with pytest.raises(xe.ExecutionError, match="dtype int64"):
        comp32.run(np.int64(5), backend="numba")
    assert len(builds) == 2   # one program each: the refused and converted arguments built none


def test_an_edited_module_gets_a_new_plan(builds):
    comp = _module()
    x = np.arange(16, dtype=F32).reshape(4, 4)
    comp.run(x, backend="numba")
    comp.run(x, backend="numba")
    other = xe.XlaBuilder("other")
    y = xe.Parameter(other, 0, xe.Shape("f32", (4, 4)), "y")
    comp.entry = other.build(xe.Neg(y)).entry
    np.testing.assert_array_equal(comp.run(x, backend="numba"), -x)
    np.testing.assert_array_equal(comp.run(x, backend="numba"), -x)
    assert [name for name, _ in builds] == ["plan", "other"]


def test_a_lowered_size_limit_is_checked_again():
    comp = _module(64)    # 16 KiB values
    x = np.ones((64, 64), F32)
    comp.run(x, backend="numba")
    comp.run(x, backend="numba")
    old = xe.set_size_limit(8 << 10)
    try:
        with pytest.raises(xe.SizeLimitError, match="16,384 bytes|16 KiB|16384"):
            comp.run(x, backend="numba")
    finally:
        xe.set_size_limit(old)
    np.testing.assert_array_equal(comp.run(x, backend="numba"), _want(x))


def test_the_denormal_environment_has_a_program_each(builds):
    b = xe.XlaBuilder("denormal")
    x = xe.Parameter(b, 0, xe.Shape("f32", (3,)), "x")
    comp = b.build(xe.Mul(xe.Transpose(x, [0]), xe.Constant(b, F32(1))))
    tiny = np.array([1e-40, 1.0, -1e-41], F32)
    for _ in range(3):
        np.testing.assert_array_equal(comp.run(tiny, backend="numba", denormals="ieee"), tiny)
        np.testing.assert_array_equal(comp.run(tiny, backend="numba", denormals="flush"), [0, 1, 0])
    assert sorted(builds) == [("denormal", "flush"), ("denormal", "ieee")]


def test_a_reduce_flushes_its_denormal_operand_in_every_run():
    """(the cpu reduce flushes its operand in its own pass: ``flush=`` from the program too)"""
    b = xe.XlaBuilder("sum")
    x = xe.Parameter(b, 0, xe.Shape("f32", (2, 3)), "x")
    comp = b.build(xe.Reduce(x, np.float32(0), lambda a, c: xe.Add(a, c), [1]))
    tiny = np.array([[1e-40, 2e-40, 1e-40], [1.0, 1e-40, 2.0]], F32)
    ieee = comp.run(tiny, denormals="ieee")
    for _ in range(3):
        np.testing.assert_array_equal(comp.run(tiny, backend="numba", denormals="flush"), [0, 3])
        np.testing.assert_array_equal(comp.run(tiny, backend="numba", denormals="ieee"), ieee)
    assert ieee[0] != 0


def test_a_swapped_kernel_is_called(monkeypatch):
    """A program holds no stale kernel: a kernel table changed after the first runs is read."""
    comp = _module()
    x = np.ones((4, 4), F32)
    comp.run(x, backend="numba")
    comp.run(x, backend="numba")
    from xla_explorer.ops import registry
    monkeypatch.delitem(registry.LAYERS["cpu"], "transpose")
    with pytest.raises(NotImplementedError, match="transpose"):
        comp.run(x, backend="numba")


def test_progress_listeners_still_see_every_step():
    from xla_explorer import progress
    comp = _module()
    x = np.ones((4, 4), F32)
    comp.run(x, backend="numba")
    comp.run(x, backend="numba")
    events = []
    with progress.listening(events.append):
        comp.run(x, backend="numba")
    task = events[-1].task
    assert events[-1].kind == "end" and task.status == "done" and task.done == task.total == len(comp.fusion_plan().steps)


@pytest.mark.parametrize("fuse", [True, False])
def test_the_cuda_simulator_runs_its_program(builds, fuse):
    from xla_explorer.executors.cuda import simulated
    if not simulated():
        pytest.skip("the CUDA tests run in numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1)")
    from xla_explorer.executors.numba_executor import run_cuda
    comp = _module()
    x = np.arange(16, dtype=F32).reshape(4, 4)
    for _ in range(3):
        np.testing.assert_array_equal(run_cuda(comp, (x,), fuse=fuse), _want(x))
    assert len(builds) == 1 and ("cuda", fuse) in {k[:2] for k in comp.entry.__dict__["_numba_programs"]}


def _bits(a):
    a = np.asarray(a)
    return a.view(f"u{a.dtype.itemsize}") if a.dtype.kind == "f" else a


def _loop_and_reduce(b, x, t, reduced, combiner, init):
    """exp(x - 1) (floats) or x * 3 + 1 (integers), and its reduce over ``reduced``."""
    dt = xe.Shape(t, ()).dtype
    if t in ("f32", "f64"):
        e = xe.Exp(xe.Sub(x, xe.Constant(b, dt.type(1))))
    else:
        e = xe.Add(xe.Mul(x, xe.Constant(b, dt.type(3))), xe.Constant(b, dt.type(1)))
    return e, xe.Reduce(e, xe.Constant(b, dt.type(init)), combiner, reduced)


def _loop_then_reduce(t, dims, reduced, combiner, init, also_loop=True):
    """exp(x - 1) (floats) or x * 3 + 1 (integers) as a fused loop, reduced over ``reduced``;
    the loop's value also an output (so it is written), or not."""
    b = xe.XlaBuilder("loop_reduce")
    x = xe.Parameter(b, 0, xe.Shape(t, dims), "x")
    e, r = _loop_and_reduce(b, x, t, reduced, combiner, init)
    return b.build(xe.Tuple(r, e) if also_loop else r)


@pytest.mark.parametrize("t", ["f32", "f64", "s32", "u8"])
def test_a_reduce_of_a_loops_rows_folds_them_in_the_loop(t, monkeypatch):
    """A Reduce along the trailing dimensions of a fused loop's value runs in the loop's
    step (``_fused_reduce``): from the second run on (the program), bit for bit what the
    first run (the walk: loop, then the Reduce's kernel) gives -- float sums in the kernel's
    pairing over rows of 1 to 1000, odd lengths, sum / max / min / product, serial and
    parallel loops, the loop's value returned too or not, both denormal environments;
    a reduction over a major dimension or over everything still right."""
    from xla_explorer.executors.cpu import fused
    monkeypatch.setattr(fused, "PARALLEL_THRESHOLD", 1 << 12)
    rng = np.random.default_rng(12)
    dt = xe.Shape(t, ()).dtype
    combiners = [(lambda a, c: xe.Add(a, c), 0), (lambda a, c: xe.Max(a, c), -np.inf if t[0] == "f" else 0),
                 (lambda a, c: xe.Min(a, c), np.inf if t[0] == "f" else 7), (lambda a, c: xe.Mul(a, c), 1)]
    cases = [((64, 257), [1]), ((7, 1000), [1]), ((300, 1), [1]), ((5, 3, 31), [1, 2]), ((1, 5000), [1]),
             ((2, 1, 40), [2]), ((40, 9), [0]), ((6, 50), [0, 1]), ((600, 130), [1])]
    for dims, reduced in cases:
        for k, (combiner, init) in enumerate(combiners):
            for also_loop in (True, False):
                comp = _loop_then_reduce(t, dims, reduced, combiner, init, also_loop)
                if t[0] == "f":
                    x = rng.standard_normal(dims).astype(dt) * (0.01 if k == 3 else 3)
                else:
                    x = rng.integers(0, 50, dims).astype(dt)
                for env in ("flush", "ieee"):
                    with xe.float_env(denormals=env):
                        first = comp.run(x, backend="numba")
                        second = comp.run(x, backend="numba")
                        want = comp.run(x)
                    first, second, want = (v if also_loop else (v,) for v in (first, second, want))
                    for f, s, w in zip(first, second, want):
                        np.testing.assert_array_equal(_bits(s), _bits(f), err_msg=f"{dims} {reduced} {k} {env}")
                        np.testing.assert_allclose(np.asarray(s, np.float64), np.asarray(w, np.float64),
                                                   rtol=1e-4 if t[0] == "f" else 0)
    comp = _loop_then_reduce(t, (64, 257), [1], combiners[0][0], 0)
    x = np.ones((64, 257), dt)
    comp.run(x, backend="numba")
    comp.run(x, backend="numba")
    labels = numba_executor._programs(comp.entry)
    assert any("folding its rows" in lab for p in labels.values() for lab in p.labels)


def _normalised(t, dims, reduced, combiner, init, op, also_e=False):
    """e = exp(x - 1) (integers: x * 3 + 1), s = reduce(e), reshaped to e's rank with 1s and
    broadcast back: op(e, s) (a softmax's division when op is Div and the combiner Add)."""
    b = xe.XlaBuilder("normalised")
    x = xe.Parameter(b, 0, xe.Shape(t, dims), "x")
    e, r = _loop_and_reduce(b, x, t, reduced, combiner, init)
    kept = [d for d in range(len(dims)) if d not in reduced]
    r1 = xe.Reshape(r, [1 if d in reduced else dims[d] for d in range(len(dims))])
    s = xe.BroadcastInDim(r1, dims, list(range(len(dims))))
    y = op(e, s)
    assert kept == list(range(len(kept)))
    return b.build(xe.Tuple(y, e) if also_e else y)


@pytest.mark.parametrize("t", ["f32", "f64", "s32"])
def test_a_loop_reading_a_row_fold_runs_in_the_folds_step(t, monkeypatch):
    """A loop reading a row-folded loop's value and the folds broadcast along its rows (a
    softmax's division) runs in the fold's step, on each row after its fold (``_epilogue``):
    from the second run on bit for bit what the walk gives (loop, Reduce, reshape, loop),
    over rows of 1 to 1000, several trailing reduced dimensions, sum / max folds, divide /
    multiply / subtract, serial and parallel loops, the first loop's value an output too,
    both denormal environments (the folds flushed as the Reduce's result is)."""
    from xla_explorer.executors.cpu import fused
    monkeypatch.setattr(fused, "PARALLEL_THRESHOLD", 1 << 12)
    rng = np.random.default_rng(13)
    dt = xe.Shape(t, ()).dtype
    add, mx = (lambda a, c: xe.Add(a, c), 0), (lambda a, c: xe.Max(a, c), -np.inf if t[0] == "f" else 0)
    variants = [(add, xe.Div if t[0] == "f" else xe.Mul, False), (add, xe.Mul, True), (mx, xe.Sub, False)]
    cases = [((64, 257), [1]), ((7, 1000), [1]), ((300, 1), [1]), ((5, 3, 31), [1, 2]), ((1, 50), [1]),
             ((600, 130), [1])]
    for dims, reduced in cases:
        for k, ((combiner, init), op, also_e) in enumerate(variants):
            comp = _normalised(t, dims, reduced, combiner, init, op, also_e)
            if t[0] == "f":
                # exponents far below the maximum: denormal sums and quotients under "ieee"
                x = (rng.standard_normal(dims) * 3 - rng.choice([0, 95], dims)).astype(dt)
            else:
                x = rng.integers(0, 50, dims).astype(dt)
            for env in ("flush", "ieee"):
                with xe.float_env(denormals=env):
                    runs = [comp.run(x, backend="numba") for _ in range(3)]
                runs = [v if also_e else (v,) for v in runs]
                for later in runs[1:]:
                    for f, s in zip(runs[0], later):
                        np.testing.assert_array_equal(_bits(s), _bits(f),
                                                      err_msg=f"{dims} {reduced} {k} {op.__name__} {env}")
    comp = _normalised(t, (64, 257), [1], add[0], 0, xe.Mul)
    x = np.ones((64, 257), dt)
    comp.run(x, backend="numba")
    comp.run(x, backend="numba")
    labels = [lab for p in numba_executor._programs(comp.entry).values() for lab in p.labels]
    assert any("run by the row fold" in lab for lab in labels), labels


def test_jax_softmax_divides_each_row_after_its_sum():
    """jax.nn.softmax along the minor dimension: the division runs in the exp loop's step;
    the later runs' bits are the first run's, with and without flushing (logits spread so
    that some exponentials are denormal), and agree with the reference."""
    jax = pytest.importorskip("jax")
    rng = np.random.default_rng(14)
    for dims in [(64, 256), (3, 5, 70), (1, 9), (9, 1)]:
        x = (rng.standard_normal(dims) * 40).astype(np.float32)
        comp = xe.from_jax(lambda v: jax.nn.softmax(v, axis=-1), x)
        for env in ("flush", "ieee"):
            with xe.float_env(denormals=env):
                runs = [comp.run(x, backend="numba") for _ in range(3)]
                want = comp.run(x)
            for later in runs[1:]:
                np.testing.assert_array_equal(_bits(later), _bits(runs[0]), err_msg=f"{dims} {env}")
            np.testing.assert_allclose(runs[-1], want, rtol=1e-5, atol=1e-30)
        if dims[-1] > 1:
            labels = [lab for c in comp.computations for p in c.__dict__.get("_numba_programs", {}).values()
                      for lab in p.labels]
            assert any("run by the row fold" in lab for lab in labels), labels


def test_a_loop_does_not_flush_inputs_known_clean():
    """Under flushing a fused loop reads the values the executor knows hold no denormal (a
    flushing loop's result, a reduce of one) unflushed: bit for bit the unfused run's (op
    by op, every operand flushed by its rule), first run and program alike, over inputs
    full of denormals; the loop's source flushes the parameter it reads but not the clean
    values."""
    from xla_explorer.executors.loopgen import LoopSource
    tiny = np.finfo(F32).tiny

    def build():
        b = xe.XlaBuilder("clean")
        x = xe.Parameter(b, 0, xe.Shape("f32", (64, 300)), "x")
        y = xe.Parameter(b, 1, xe.Shape("f32", (64, 300)), "y")
        e = xe.Mul(x, xe.Constant(b, F32(0.5)))                       # flushed result: clean
        s = xe.Reduce(e, xe.Constant(b, F32(0)), lambda a, c: xe.Add(a, c), [0])
        r = xe.Add(xe.Div(e, y), xe.Sub(e, s, broadcast_dimensions=[1]))   # reads e and s (clean), y (not)
        return b.build(xe.Tuple(r, s))
    comp = build()
    rng = np.random.default_rng(13)
    vals = np.array([0.0, -0.0, tiny, -tiny, tiny / 2, -tiny / 3, 3 * tiny, 1.0, -2.0, 1e-30], F32)
    xv = rng.choice(vals, (64, 300)).astype(F32)
    yv = rng.choice(vals, (64, 300)).astype(F32)
    with xe.float_env(denormals="flush"):
        first = comp.run(xv, yv, backend="numba")
        second = comp.run(xv, yv, backend="numba")
        unfused = build().run(xv, yv, backend="numba", fuse=False)
        want = comp.run(xv, yv)
    for f, s_, u, w in zip(first, second, unfused, want):
        np.testing.assert_array_equal(_bits(s_), _bits(f))
        np.testing.assert_array_equal(_bits(s_), _bits(u))
        np.testing.assert_array_equal(np.isnan(s_), np.isnan(w))
    group = [g for g in comp.fusion_plan().groups if g.root.opcode == "add"][0]
    clean = [i for i in group.inputs if i.opcode != "parameter"]
    assert clean and any(i.opcode == "parameter" for i in group.inputs)
    assert ("flush", tuple(clean)) in group.__dict__["_cpu"]   # the program's loop skips them
    with xe.float_env(denormals="flush"):
        body = LoopSource(group, clean).body
        flushing_all = LoopSource(group).body
    flushed = " ".join(line for line in body if line.startswith("f"))
    assert "in" in flushed and len(body) < len(flushing_all)


def test_a_run_reduces_one_array_the_same_way_once(monkeypatch):
    """Layer norm as JAX lowers it sums x twice (its mean, and again inside ``x.var``'s
    call): the second prepared reduce of the same array object is the first's result
    (``reduction.begin_run``), within one run only -- an argument changed in place between
    runs gives the new result -- and results are those of the walk."""
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    from xla_explorer.executors.cpu import reduction
    rng = np.random.default_rng(15)
    x = rng.standard_normal((512, 256)).astype(F32)
    f = lambda v: (v - v.mean(-1, keepdims=True)) / jnp.sqrt(v.var(-1, keepdims=True) + 1e-5)  # noqa: E731
    comp = xe.from_jax(f, x)
    first = comp.run(x, backend="numba")
    np.testing.assert_allclose(first, comp.run(x), rtol=1e-5, atol=1e-6)
    calls = []
    real = reduction._reduce_standard
    monkeypatch.setattr(reduction, "_reduce_standard", lambda *a, **k: calls.append(a[0].size) or real(*a, **k))
    second = comp.run(x, backend="numba")
    np.testing.assert_array_equal(_bits(second), _bits(first))
    sums = [n for n in calls if n == x.size]
    assert len(sums) == 1, calls           # x summed once, not twice
    x *= 2                                  # the same array, other values: nothing remembered from before
    third = comp.run(x, backend="numba")
    np.testing.assert_allclose(third, comp.run(x), rtol=1e-5, atol=1e-6)
    assert getattr(reduction._memo, "d", None) is None


def test_remembered_reduces_are_not_shared_outputs_or_threads():
    """A run that returns one reduce twice gets two arrays (a caller may write one); a run
    in another thread at the same time remembers nothing of this one's."""
    import threading
    from xla_explorer.executors.cpu import reduction
    b = xe.XlaBuilder("twice")
    x = xe.Parameter(b, 0, xe.Shape("f32", (512, 256)), "x")
    zero = xe.Constant(b, np.float32(0))
    s1 = xe.Reduce(x, zero, lambda p, q: xe.Add(p, q), [1])
    s2 = xe.Reduce(x, zero, lambda p, q: xe.Add(p, q), [1])
    comp = b.build(xe.Tuple(s1, s2))
    a = np.random.default_rng(3).standard_normal((512, 256)).astype(F32)
    want = comp.run(a)
    comp.run(a, backend="numba")
    p, q = comp.run(a, backend="numba")     # (the second run is the prepared plan's)
    np.testing.assert_allclose(p, want[0], rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(_bits(q), _bits(p))
    assert not np.shares_memory(p, q)
    p[:] = 7
    assert (q != 7).any()
    seen = []
    t = threading.Thread(target=lambda: seen.append(getattr(reduction._memo, "d", "unset")))
    reduction.begin_run()
    try:
        t.start()
        t.join()
    finally:
        reduction.end_run(None)
    assert seen == ["unset"]


_FUSED_DOTS = """
HloModule fused_dots

fused_scale {
  p0 = f32[8,16] parameter(0)
  c = f32[] constant(0.5)
  b = f32[8,16] broadcast(c), dimensions={}
  ROOT m = f32[8,16] multiply(p0, b)
}

fused_dot {
  a = f32[8,16] parameter(0)
  w = f32[16,4] parameter(1)
  ROOT d = f32[8,4] dot(a, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

fused_dot2 {
  a = f32[8,4] parameter(0)
  w = f32[4,3] parameter(1)
  ROOT d = f32[8,3] dot(a, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

ENTRY main {
  x = f32[8,16] parameter(0)
  w1 = f32[16,4] parameter(1)
  w2 = f32[4,3] parameter(2)
  s = f32[8,16] fusion(x), kind=kLoop, calls=fused_scale
  d1 = f32[8,4] fusion(s, w1), kind=kOutput, calls=fused_dot
  ROOT d2 = f32[8,3] fusion(d1, w2), kind=kOutput, calls=fused_dot2
}
"""


def test_fusion_bodies_know_which_operands_are_clean(monkeypatch):
    """An optimised HLO's dot fusions (``fusion`` ops whose body is a dot): the operands the
    caller knows hold no denormal (a flushing loop's result, a flushed dot's) are the body's
    clean parameters, not scanned again, and a body whose root is clean makes the fusion's
    value clean; bit for bit the reference's flushing over inputs full of denormals, first
    run and program alike, and the same body called with other masks keeps its own program."""
    from xla_explorer.executors.cpu import elementwise
    tiny = np.finfo(F32).tiny
    comp = xe.parse_hlo(_FUSED_DOTS)
    rng = np.random.default_rng(5)
    vals = np.array([0.0, -0.0, tiny, -tiny, tiny / 2, 3 * tiny, 1.0, -2.0, 1e-20, 1e-19], F32)
    x, w1, w2 = (rng.choice(vals, dims).astype(F32) for dims in ((8, 16), (16, 4), (4, 3)))
    scanned = []
    real = elementwise.flush_denormals
    monkeypatch.setattr(elementwise, "flush_denormals", lambda v: scanned.append(np.shape(v)) or real(v))
    with xe.float_env(denormals="flush"):
        want = comp.run(x, w1, w2)
        runs = [comp.run(x, w1, w2, backend="numba") for _ in range(3)]
    for got in runs:
        np.testing.assert_array_equal(_bits(got), _bits(runs[0]))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=0)
    # per run: w1, w2 and the two dots' results; never the loop's value (8, 16) nor d1 as
    # d2's operand
    assert scanned.count((8, 16)) == 0 and scanned.count((8, 4)) == 3
    assert sorted(scanned[-4:]) == [(4, 3), (8, 3), (8, 4), (16, 4)]


def test_values_read_only_through_a_condition_or_constants_are_not_scanned(monkeypatch):
    """Under flushing a loop's result is clean when every input that reaches its values is
    (a relu gradient: the bias and the pre-activation only in the compare; the chosen
    values a flushed dot's and a constant's), so the dot reading it does not scan it; a
    select that picks an unclean input is still flushed, and a constant holding a denormal
    (a reduce's init) still is: bit for bit the unfused run, first run and program alike."""
    from xla_explorer.executors.cpu import elementwise
    tiny = np.finfo(F32).tiny

    def build():
        b = xe.XlaBuilder("relu_grad")
        g = xe.Parameter(b, 0, xe.Shape("f32", (24, 40)), "g")
        w1 = xe.Parameter(b, 1, xe.Shape("f32", (40, 48)), "w1")
        h = xe.Parameter(b, 2, xe.Shape("f32", (24, 48)), "h")
        bias = xe.Parameter(b, 3, xe.Shape("f32", (48,)), "bias")
        w2 = xe.Parameter(b, 4, xe.Shape("f32", (48, 16)), "w2")
        d = xe.Dot(g, w1)                                   # a flushed result: clean
        cond = xe.Gt(xe.Add(h, bias, broadcast_dimensions=[1]), xe.Constant(b, F32(0)))
        s = xe.Select(cond, d, xe.Broadcast(xe.Constant(b, F32(0)), [24, 48]))   # clean
        s2 = xe.Select(cond, h, d)                          # picks h: not clean
        red = xe.Reduce(h, xe.Constant(b, F32(tiny / 4)), lambda a, c: xe.Add(a, c), [0])
        return b.build(xe.Tuple(xe.Dot(s, w2), xe.Dot(s2, w2), red, s))
    comp = build()
    rng = np.random.default_rng(21)
    vals = np.array([0.0, -0.0, tiny, -tiny, tiny / 2, -tiny / 3, 3 * tiny, 1.0, -2.0, 1e-30], F32)
    big = np.array([1e20, -3e19, 1.0, 0.0, -1.0], F32)
    g, h, bias = (rng.choice(vals, dims).astype(F32) for dims in ((24, 40), (24, 48), (48,)))
    w1 = rng.standard_normal((40, 48)).astype(F32)
    w2 = rng.choice(big, (48, 16)).astype(F32)
    with xe.float_env(denormals="flush"):
        unfused = build().run(g, w1, h, bias, w2, backend="numba", fuse=False)
        want = comp.run(g, w1, h, bias, w2)
        scanned = []
        real = elementwise.flush_denormals
        monkeypatch.setattr(elementwise, "flush_denormals", lambda v: scanned.append(np.shape(v)) or real(v))
        runs = [comp.run(g, w1, h, bias, w2, backend="numba") for _ in range(3)]
    for got in runs:
        for k, (x, u, w) in enumerate(zip(got, unfused, want)):
            np.testing.assert_array_equal(_bits(x), _bits(u), err_msg=str(k))
            np.testing.assert_array_equal(np.isnan(x), np.isnan(w))
            np.testing.assert_allclose(x, w, rtol=1e-5, atol=1e-5 * float(np.abs(w).max()))
    # per run (3 runs): g, w1, d (the dot's result), the reduce's result, w2 and the result of
    # each dot, and s2 by its dot -- not s (it was scanned before its condition was known)
    assert scanned.count((24, 48)) == 2 * 3 and len(scanned) == 9 * 3, scanned
    from xla_explorer.executors.numba_executor import _clean_literal, _value_inputs
    (clean_loop,) = [gr for gr in comp.fusion_plan().groups if gr.root.opcode == "select" and
                     gr.root.operands[1].opcode == "dot"]
    (picks_h,) = [gr for gr in comp.fusion_plan().groups if gr.root.opcode == "select" and gr is not clean_loop]
    assert sorted(i.opcode for i in _value_inputs(clean_loop)) == ["constant", "dot"]
    assert sorted(i.opcode for i in _value_inputs(picks_h)) == ["dot", "parameter"]
    consts = {float(np.asarray(i.attrs["literal"])): i for i in comp.entry.instructions if i.opcode == "constant"}
    with xe.float_env(denormals="flush"):
        assert _clean_literal(consts[0.0]) and not _clean_literal(consts[float(F32(tiny / 4))])


def test_an_argument_two_dots_flush_is_scanned_once_a_run(monkeypatch):
    """Under flushing a large argument two dots read (an MLP's x: the forward dot's and the
    weight gradient's operand) is scanned once a run when it holds no denormal (the same
    array object: ``reduction.flush_in_run``); one holding denormals is flushed for both; an
    argument changed in place between runs is scanned again (the memo is the run's); the
    bits of the unfused walk and of the reference."""
    from xla_explorer.executors.cpu import elementwise, reduction
    tiny = np.finfo(F32).tiny
    n, k = 256, 300   # x: 76800 elements, above the memo's minimum

    def build():
        b = xe.XlaBuilder("two_dots")
        x = xe.Parameter(b, 0, xe.Shape("f32", (n, k)), "x")
        w = xe.Parameter(b, 1, xe.Shape("f32", (k, 8)), "w")
        g = xe.Parameter(b, 2, xe.Shape("f32", (n, 8)), "g")
        xg = xe.DotGeneral(x, g, lhs_contracting_dimensions=[0], rhs_contracting_dimensions=[0])   # x^T g
        return b.build(xe.Tuple(xe.Dot(x, w), xg))
    comp = build()
    rng = np.random.default_rng(8)
    x = rng.standard_normal((n, k)).astype(F32)
    w = (rng.standard_normal((k, 8)) * 1e20).astype(F32)
    g = (rng.standard_normal((n, 8)) * 1e20).astype(F32)
    scanned = []
    real = elementwise.flush_denormals
    monkeypatch.setattr(elementwise, "flush_denormals", lambda v: scanned.append(np.shape(v)) or real(v))
    with xe.float_env(denormals="flush"):
        for dirty in (False, True, False):
            if dirty:
                x[3, 5], x[200, 7], x[0, 0] = tiny / 2, -tiny / 8, 3 * tiny
            elif x[3, 5] != x[3, 6]:
                x[3, 5] = x[200, 7] = 1.0
            want = comp.run(x, w, g)
            unfused = build().run(x, w, g, backend="numba", fuse=False)
            for _ in range(3):
                del scanned[:]
                got = comp.run(x, w, g, backend="numba")
                assert scanned.count((n, k)) == (2 if dirty else 1), scanned
                for a, u, r in zip(got, unfused, want):
                    np.testing.assert_array_equal(_bits(a), _bits(u))
                    np.testing.assert_allclose(a, r, rtol=1e-5, atol=1e-5 * float(np.abs(r).max()))
            if dirty:   # the denormals mattered: x * 1e20 is no denormal
                clean_x = np.where(np.abs(x) < tiny, F32(0), x)
                np.testing.assert_array_equal(_bits(got[0]), _bits(build().run(clean_x, w, g, backend="numba")[0]))
    assert getattr(reduction._memo, "clean", None) is None   # outside a run: nothing remembered
