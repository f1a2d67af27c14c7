"""The Numba executor's own machinery: fusion plans, fused loops, control flow, the cache."""
import os
import subprocess
import sys

import numpy as np
import pytest

import xla_explorer as xe

pytest.importorskip("numba")


def _chain():
    b = xe.XlaBuilder("chain")
    x = xe.Parameter(b, 0, xe.Shape("f32", (3, 4)), "x")
    y = xe.Parameter(b, 1, xe.Shape("f32", (4,)), "y")
    z = xe.Add(xe.Mul(x, x), y, broadcast_dimensions=[1])
    return b.build(xe.Max(xe.Tanh(z), xe.Constant(b, np.float32(0.1))))


def test_fusion_plan_groups_an_elementwise_chain_into_one_loop():
    plan = _chain().fusion_plan()
    loops = plan.groups
    assert len(loops) == 1
    assert [m.opcode for m in loops[0].members] == ["multiply", "broadcast", "add", "tanh", "broadcast", "maximum"]
    assert {i.name for i in loops[0].inputs} >= {"x", "y"}
    assert "fused loop" in str(plan)


def test_fused_loop_matches_reference():
    comp = _chain()
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 4)).astype(np.float32)
    y = rng.normal(size=4).astype(np.float32)
    np.testing.assert_allclose(comp.run(x, y, backend="numba"), comp.run(x, y), rtol=1e-6, atol=1e-7)


def test_unfused_plan_runs_every_op_alone():
    comp = _chain()
    plan = comp.fusion_plan(fuse=False)
    assert all(len(g.members) == 1 for g in plan.groups)


def test_a_value_used_twice_is_materialised_once():
    b = xe.XlaBuilder("shared")
    x = xe.Parameter(b, 0, xe.Shape("f32", (5,)), "x")
    e = xe.Exp(x)
    comp = b.build(xe.Tuple(xe.Add(e, e), xe.Mul(e, x)))
    plan = comp.fusion_plan()
    roots = [g.root.opcode for g in plan.groups]
    assert "exponential" in roots  # two users in two groups: exp is computed once, stored
    x_val = np.linspace(-1, 1, 5, dtype=np.float32)
    for got, want in zip(comp.run(x_val, backend="numba"), comp.run(x_val)):
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_control_flow_runs_on_numba():
    b = xe.XlaBuilder("loop")
    state = xe.Parameter(b, 0, xe.Shape.parse("(s32[], f32[3])"), "s")

    def cond(s):
        return xe.Lt(xe.GetTupleElement(s, 0), xe.Constant(s.builder, np.int32(5)))

    def body(s):
        i, v = xe.GetTupleElement(s, 0), xe.GetTupleElement(s, 1)
        return xe.Tuple(xe.Add(i, xe.Constant(s.builder, np.int32(1))), xe.Mul(v, xe.Constant(s.builder, np.float32(2))))

    comp = b.build(xe.While(cond, body, state))
    i, v = comp.run((np.int32(0), np.ones(3, np.float32)), backend="numba")
    assert i == 5
    np.testing.assert_array_equal(v, np.full(3, 32, np.float32))


def test_intermediates_are_freed_after_their_last_use():
    comp = _chain()
    seen = []
    from xla_explorer.executors.numba_executor import run
    run(comp, [np.ones((3, 4), np.float32), np.ones(4, np.float32)],
        on_value=lambda inst, v: seen.append(inst.name))
    plan = comp.fusion_plan()
    # every value read by a later step has a last use recorded, so it is dropped after it
    for step in plan.steps:
        reads = step.group.inputs if step.group is not None else step.inst.operands
        for r in reads:
            assert r in plan.last_use


def test_compiled_loops_are_cached_on_disk(tmp_path):
    """A fresh process finds the fused loop compiled by an earlier one (cache=True): Numba's
    own counters of the generated loops say the first process compiled (a cache miss) and
    the second loaded machine code (a hit, no miss), whatever the machine's load."""
    env = dict(os.environ, XLA_EXPLORER_CACHE=str(tmp_path / "generated"), NUMBA_CACHE_DIR=str(tmp_path / "numba"))
    code = ("import numpy as np, xla_explorer as xe\n"
            "from numba.core.dispatcher import Dispatcher\n"
            "from xla_explorer.executors import jit_cache\n"
            "b = xe.XlaBuilder('c'); x = xe.Parameter(b, 0, xe.Shape('f32', (8,)), 'x')\n"
            "comp = b.build(xe.Mul(xe.Add(x, x), x))\n"
            "comp.run(np.ones(8, np.float32), backend='numba')\n"
            "hits = misses = 0\n"
            "for m in list(jit_cache._modules.values()):\n"
            "    for f in vars(m).values():  # the loops generated in m (not the library it imports)\n"
            "        if isinstance(f, Dispatcher) and f.py_func.__module__ == m.__name__:\n"
            "            hits += sum(f.stats.cache_hits.values()); misses += sum(f.stats.cache_misses.values())\n"
            "print(hits, misses)\n")

    def run():
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        return tuple(int(v) for v in out.stdout.split()[-2:])
    hits, misses = run()
    assert hits == 0 and misses >= 1, (hits, misses)  # compiled
    files = list(tmp_path.rglob("*.nbi"))
    assert files, "no Numba cache index written"
    hits, misses = run()
    assert hits >= 1 and misses == 0, (hits, misses)  # the warm run loads machine code instead of compiling


@pytest.mark.parametrize("damage", ["truncated data", "foreign module", "garbled index"])
def test_unreadable_cache_entry_is_compiled_again(tmp_path, damage):
    """A disk-cache entry Numba cannot read (cut short, pickled under another module's
    name, a garbled index) is a cache miss: the run gives the right answer, warns once
    naming the kernel, and its save mends the entry, so the next process loads it again."""
    env = dict(os.environ, XLA_EXPLORER_CACHE=str(tmp_path / "generated"), NUMBA_CACHE_DIR=str(tmp_path / "numba"),
               PYTHONWARNINGS="default")
    code = ("import numpy as np, xla_explorer as xe\n"
            "b = xe.XlaBuilder('c'); x = xe.Parameter(b, 0, xe.Shape('f32', (8,)), 'x')\n"
            "comp = b.build(xe.Mul(xe.Add(x, x), xe.Constant(b, np.float32(3))))\n"
            "print(comp.run(np.arange(8, dtype=np.float32), backend='numba').tolist())\n")

    def run():
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        assert out.stdout.split("\n")[-2] == str([6.0 * i for i in range(8)]), out.stdout
        return out.stderr
    run()
    generated = [p for p in (tmp_path / "numba").rglob("*.nb*") if "generated" in p.name or "fused" in p.name]
    assert generated, sorted(p.name for p in (tmp_path / "numba").rglob("*"))
    for path in generated:
        if damage == "truncated data" and path.suffix == ".nbc":
            path.write_bytes(path.read_bytes()[:40])
        elif damage == "foreign module" and path.suffix == ".nbc":
            path.write_bytes(b"c<dynamic>\nK\n.")  # a pickle of a global whose module does not exist
        elif damage == "garbled index" and path.suffix == ".nbi":
            path.write_bytes(b"garbage\n")
    err = run()
    assert "could not be read" in err and "compiling it again" in err, err
    assert "could not be read" not in run()  # mended: the next process loads what the last one saved


def test_missing_kernel_is_a_clear_error(monkeypatch):
    from xla_explorer.ops import registry
    b = xe.XlaBuilder("rev")
    x = xe.Parameter(b, 0, xe.Shape("f32", (3,)), "x")
    comp = b.build(xe.Rev(x, [0]))
    from xla_explorer.executors import cpu
    cpu.load()
    monkeypatch.delitem(registry.LAYERS["cpu"], "reverse", raising=False)
    with pytest.raises(NotImplementedError, match=r"Rev \(reverse\): no CPU kernel"):
        comp.run(np.ones(3, np.float32), backend="numba")


def test_pooled_results_are_not_overwritten_while_held():
    """Large results come from a buffer pool: a buffer is reused only when nothing refers
    to it any more, so results kept by the caller stay as they were."""
    n = 1 << 21  # 8 MB of f32: from the pool
    b = xe.XlaBuilder("pooled")
    x = xe.Parameter(b, 0, xe.Shape("f32", (n,)), "x")
    comp = b.build(xe.Exp(xe.Mul(x, xe.Constant(b, np.float32(0.5)))))
    b = xe.XlaBuilder("pooled_rw")
    y = xe.Parameter(b, 0, xe.Shape("f32", (1, 256, 256, 32)), "y")
    rw = b.build(xe.ReduceWindow(y, xe.Constant(b, np.float32(0)), lambda a, c: xe.Add(a, c), [1, 3, 3, 1],
                                 [1, 1, 1, 1], [(0, 0), (1, 1), (1, 1), (0, 0)]))
    rng = np.random.default_rng(0)
    for c, shape in ((comp, (n,)), (rw, (1, 256, 256, 32))):
        a1, a2 = rng.normal(size=shape).astype(np.float32), rng.normal(size=shape).astype(np.float32)
        r1 = c.run(a1, backend="numba")
        keep = r1.copy()
        r2 = c.run(a2, backend="numba")
        c.run(a1 * 2, backend="numba")  # a result nobody keeps: its buffer is free again
        r3 = c.run(a2, backend="numba")
        np.testing.assert_array_equal(r1, keep)
        np.testing.assert_array_equal(r2, r3)
        assert not np.shares_memory(r1, r2) and not np.shares_memory(r2, r3)


def test_map_and_dimension_sizes_on_numba():
    b = xe.XlaBuilder("map")
    x = xe.Parameter(b, 0, xe.Shape("s32", (3, 4)), "x")
    y = xe.Parameter(b, 1, xe.Shape("s32", (3, 4)), "y")
    m = xe.Map([x, y], lambda a, c: xe.Div(xe.Mul(a, a), c))  # integer division by zero inside
    d = xe.SetDimensionSize(x, xe.Constant(b, np.int32(2)), 0)
    comp = b.build(xe.Tuple(m, xe.GetDimensionSize(x, 1), d))
    rng = np.random.default_rng(0)
    xv = rng.integers(-50, 50, (3, 4)).astype(np.int32)
    yv = rng.integers(-2, 3, (3, 4)).astype(np.int32)
    for got, want in zip(comp.run(xv, yv, backend="numba"), comp.run(xv, yv)):
        np.testing.assert_array_equal(got, want)


def test_status_table_says_how_the_executor_runs_every_op():
    table = xe.status_table(file=open(os.devnull, "w"))
    for opcode, _, _, cells in table.rows:
        assert cells["cpu"] != "-", opcode
    assert table.cell("while", "cpu").startswith("executor")
    assert table.cell("all-reduce", "cpu").startswith("simulated")
    assert table.cell("broadcast", "cpu") == "fused loop"


def test_a_run_takes_one_thread_while_the_machine_is_busy(monkeypatch):
    """numba_setup.enter_run: other processes keeping every core busy (as the load average
    says), a run's kernels take one thread; the caller's thread count is given back after
    the run, and whatever the load when the policy is turned off."""
    import numba
    from xla_explorer.executors import numba_setup
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("one thread only")
    b = xe.XlaBuilder("busy")
    x = xe.Parameter(b, 0, xe.Shape("f32", (4, 3)), "x")
    comp = b.build(xe.Transpose(x, [1, 0]))
    a = np.arange(12, dtype=np.float32).reshape(4, 3)
    seen = []
    numba.set_num_threads(2)
    monkeypatch.setattr(numba_setup, "LOAD_AWARE", True)
    for busy in (True, False):
        monkeypatch.setattr(numba_setup, "machine_busy", lambda busy=busy: busy)
        seen.clear()
        out = comp.run(a, backend="numba", on_value=lambda inst, v: seen.append(numba.get_num_threads()))
        np.testing.assert_array_equal(out, a.T)
        assert set(seen) == ({1} if busy else {2})
        assert numba.get_num_threads() == 2
    monkeypatch.setattr(numba_setup, "LOAD_AWARE", False)
    monkeypatch.setattr(numba_setup, "machine_busy", lambda: True)
    seen.clear()
    comp.run(a, backend="numba", on_value=lambda inst, v: seen.append(numba.get_num_threads()))
    assert set(seen) == {2}


def test_busy_means_other_processes_not_this_one(monkeypatch):
    """The load average counts this process's own threads: a long run of its own on an
    idle machine must not make it think the machine busy (its kernels would then run on
    one thread); others' load above the core count - 0.5 does."""
    from xla_explorer.executors import numba_setup as ns
    cores = ns._CORES
    clock = {"t": 1000.0, "cpu": 0.0, "load": 0.0}
    monkeypatch.setattr(ns.time, "process_time", lambda: clock["cpu"])
    monkeypatch.setattr(ns.os, "getloadavg", lambda: (clock["load"], 0.0, 0.0))
    monkeypatch.setattr(ns, "_load", [0.0] * 5)

    def run_for(seconds, own_cores, load):
        for _ in range(int(seconds)):       # a read every second, as runs would
            clock["t"] += 1.0
            clock["cpu"] += own_cores
            clock["load"] = load
            monkeypatch.setattr(ns.time, "monotonic", lambda: clock["t"])
            busy = ns.machine_busy()
        return busy

    # this process alone keeps every core busy for minutes: not busy
    assert run_for(400, cores, cores + 1.0) is False
    assert abs(ns.own_load() - cores) < 0.1
    # others add as much load again: busy
    assert run_for(5, cores / 2, 2.0 * cores + 1.0) is True
    # this process idle, others busy: busy; others gone: not busy
    assert run_for(400, 0.0, cores + 1.0) is True
    assert ns.own_load() < 0.1
    assert run_for(5, 0.0, 0.2) is False


def test_a_busy_machine_gives_the_same_bits(monkeypatch):
    """A float sum of one long row is cut into parts by the thread count (then joined):
    on a busy machine (one thread) the parts stay those of Numba's thread count, so the
    rounding does not follow the load."""
    import numba
    from xla_explorer.executors import numba_setup
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("one thread only")
    b = xe.XlaBuilder("sum")
    x = xe.Parameter(b, 0, xe.Shape("f32", (1 << 20,)), "x")
    comp = b.build(xe.Reduce(x, xe.Constant(b, np.float32(0)), lambda p, q: xe.Add(p, q), [0]))
    a = np.random.default_rng(0).standard_normal(1 << 20).astype(np.float32) * 1e3
    numba.set_num_threads(2)
    monkeypatch.setattr(numba_setup, "LOAD_AWARE", True)
    out = {}
    for busy in (False, True):
        monkeypatch.setattr(numba_setup, "machine_busy", lambda busy=busy: busy)
        out[busy] = comp.run(a, backend="numba")
    assert out[True].tobytes() == out[False].tobytes()


def test_a_cache_entry_of_another_signature_is_compiled_again(tmp_path):
    """Two processes compiling one kernel at once can leave its index naming, for one
    signature, a data file another signature's save overwrote (seen in CI: ``_dus_clamped``'s
    int64 starts given its int16 starts' code, "can't unbox array from PyObject").  Such an
    entry is a miss: the right answer, a warning naming the kernel, compiled again."""
    (tmp_path / "crossmod.py").write_text(
        "from numba import njit\n"
        "@njit(cache=True)\n"
        "def twice(x):\n"
        "    return x + x\n")
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"), PYTHONWARNINGS="default",
               PYTHONPATH=str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    code = ("import numpy as np\n"
            "from xla_explorer.executors import numba_setup\n"
            "numba_setup.numba()   # (the guard is installed with the configuration)\n"
            "import crossmod\n"
            "print(crossmod.twice(np.arange(3, dtype=np.int64)).tolist(), crossmod.twice(np.ones(2)).tolist())\n")

    def run():
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        assert out.stdout.split("\n")[-2] == "[0, 2, 4] [2.0, 2.0]", out.stdout + out.stderr
        return out.stderr
    run()
    data = sorted((tmp_path / "numba").rglob("crossmod.twice*.nbc"))
    assert len(data) == 2, data
    first, second = (p.read_bytes() for p in data)
    data[0].write_bytes(second)   # each signature's entry now holds the other's code
    data[1].write_bytes(first)
    err = run()
    assert "holds another signature's code" in err and "crossmod.twice" in err, err
