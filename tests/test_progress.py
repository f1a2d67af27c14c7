"""Progress of long work: the core hook (``xla_explorer.progress``), the executors and the
animations reporting to it, an interrupt stopping a run, and the notebook's progress bar."""
import time

import numpy as np
import pytest

import xla_explorer as xe
from xla_explorer import progress


class FakeClock:
    """``progress``'s clock, moved by the test: what a task shows after some time does not
    depend on how loaded the machine is.  ``tick`` seconds pass at every reading."""

    def __init__(self, tick=0.0):
        self.now, self.tick = 1000.0, tick

    def perf_counter(self):
        self.now += self.tick
        return self.now

    def sleep(self, seconds):
        self.now += seconds


@pytest.fixture
def clock(monkeypatch):
    fake = FakeClock()
    monkeypatch.setattr(progress, "time", fake)
    return fake


@pytest.fixture
def events():
    seen = []

    def listener(e):
        seen.append((e.kind, e.task.label, e.task.done, e.task.total, e.task.detail, e.task.status, e.task.depth))
    with progress.listening(listener):
        yield seen


def test_task_events(events, monkeypatch):
    monkeypatch.setattr(progress, "MIN_INTERVAL", 0.0)
    with progress.task("outer", total=2) as t:
        t.advance(detail="a")
        with progress.task("inner") as inner:
            progress.beat("deep")
            assert progress.current() is inner and inner.parent is t
        t.advance(detail="b")
    assert [e[0] for e in events] == ["start", "update", "start", "update", "end", "update", "end"]
    assert events[1][2:5] == (1, 2, "a") and events[3][4] == "deep" and events[3][6] == 1
    assert events[-1][5] == "done" and progress.current() is None


def test_updates_are_throttled(events, clock):
    clock.tick = 1e-5  # 100000 steps take a second: ~10 updates at MIN_INTERVAL = 0.1 s
    with progress.task("many", total=100000) as t:
        for _ in range(100000):
            t.advance()
    updates = sum(e[0] == "update" for e in events)
    assert events[-1][2] == 100000 and 5 <= updates <= 12, updates


def test_time_limit_stops_work_at_a_beat(monkeypatch):
    with progress.time_limit(60):
        progress.beat("fine")  # within the limit: nothing happens
    clock = iter([0.0, 0.0, 5.0])
    monkeypatch.setattr(progress.time, "perf_counter", lambda: next(clock))
    with pytest.raises(progress.OutOfTime, match="stopped after 1 s, at while: iteration 3") as e:
        with progress.time_limit(1):
            progress.beat("while: iteration 2")
            progress.beat("while: iteration 3")
    assert e.value.detail == "while: iteration 3" and not progress._limits


def test_interrupted_and_failed_tasks(events):
    with pytest.raises(KeyboardInterrupt):
        with progress.task("stopped"):
            raise KeyboardInterrupt
    with pytest.raises(ValueError):
        with progress.task("broken"):
            raise ValueError("x")
    assert [e[5] for e in events if e[0] == "end"] == ["interrupted", "failed"]
    assert progress.current() is None


def test_nobody_listening_costs_nothing_and_a_broken_listener_breaks_nothing(capsys):
    with progress.task("quiet", total=3) as t:
        assert t is progress.QUIET
        t.advance()
    progress.beat("nothing running")
    with progress.listening(lambda e: 1 / 0):
        with progress.task("watched") as t:
            t.advance()
    assert capsys.readouterr().err == ""


def test_a_compiling_kernel_is_named_at_once_and_its_time_goes_on(events, monkeypatch):
    monkeypatch.setattr(progress, "MIN_INTERVAL", 1e9)  # no ordinary update gets through
    monkeypatch.setattr(progress, "TICK", 0.01)
    with progress.task("cpu: f", total=2) as t:
        t.advance(detail="step 1 of 2: exp")
        with progress.compiling("cpu.elementwise.exp_loop"):
            with progress.compiling("scalar_lib.exp_f32"):  # one it calls: part of the outer one
                assert t.detail == "step 1 of 2: exp · compiling cpu.elementwise.exp_loop"
            deadline = time.monotonic() + 5
            while sum(e[0] == "update" for e in events) < 3 and time.monotonic() < deadline:
                time.sleep(0.01)  # the compiler holds the thread; the ticker sends the task meanwhile
        assert t.detail == "step 1 of 2: exp" and t.compiled == 1 and t.compile_seconds > 0
    updates = [e for e in events if e[0] == "update"]
    assert len(updates) >= 3 and {e[4] for e in updates} == {"step 1 of 2: exp · compiling cpu.elementwise.exp_loop"}
    with progress.compiling("nothing running"):  # no task: nothing to say, nothing breaks
        pass
    assert progress._compiling == []


def test_numba_compiles_reach_the_running_task(events):
    pytest.importorskip("numba")
    from xla_explorer.executors import numba_setup
    nb = numba_setup.numba()  # registers the listener of Numba's compile events

    @nb.njit  # a new function: it compiles on its first call
    def triple_plus_one(a):
        return a * 3 + 1
    with progress.task("cpu: f") as t:
        assert triple_plus_one(2) == 7
        triple_plus_one(3)  # compiled already
    assert t.compiled == 1
    detail = [e[4] for e in events if e[0] == "update"]
    assert any(d.startswith("compiling ") and d.endswith(".triple_plus_one") for d in detail), detail
    assert numba_setup.kernel_name(type("K", (), {"__module__": "xla_explorer_generated.fused_0123abcd",
                                                   "__qualname__": "loop_ser"})) == "generated fused loop loop_ser"


def test_the_first_numba_run_loading_its_kernels_is_announced(events, monkeypatch):
    pytest.importorskip("numba")
    from xla_explorer.executors import cpu
    cpu.load()
    events.clear()
    monkeypatch.setattr(cpu, "_loaded", False)  # as in a fresh kernel (the imports are done: quick)
    cpu.load()
    start, end = events[0], events[-1]
    assert start[:2] == ("start", "cpu: loading Numba and its kernels") and end[0] == "end"
    assert end[2] == end[3] == len(cpu.FAMILIES) and end[5] == "done"


def test_finished_tasks_are_remembered_with_their_time(events):
    with progress.task("numpy: outer", total=1) as t:
        with progress.task("replica 0"):
            pass
        t.advance()
    with pytest.raises(KeyboardInterrupt):
        with progress.task("numpy: stopped"):
            raise KeyboardInterrupt
    last = list(progress.finished)[-2:]   # the nested task is part of its outer one
    assert [(t.label, t.status) for t in last] == [("numpy: outer", "done"), ("numpy: stopped", "interrupted")]
    assert all(t.elapsed >= 0 and t.ended is not None for t in last)


def test_text_when_nobody_listens_in_an_interactive_session(monkeypatch, capsys):
    monkeypatch.setattr(progress, "_interactive", lambda: True)
    with progress.task("numba: f", announce=True):
        pass
    with progress.task("numpy: f"):  # not announced: quick work prints nothing
        pass
    err = capsys.readouterr().err
    assert "xla_explorer: numba: f (the first run compiles kernels" in err and "numba: f: done in" in err
    assert "numpy: f" not in err


def _softplus():
    b = xe.XlaBuilder("softplus")
    x = xe.Parameter(b, 0, xe.Shape("f32", (64,)), "x")
    return b.build(xe.Log1p(xe.Exp(xe.Neg(xe.Abs(x)))) + xe.Max(x, np.float32(0)))


def test_executors_report_their_runs(events):
    comp = _softplus()
    x = np.linspace(-3, 3, 64, dtype=np.float32)
    comp.run(x)
    assert events[0][:2] == ("start", "numpy: softplus") and events[-1][0] == "end"
    assert events[-1][2] == events[-1][3] == len(comp.entry.instructions)
    events.clear()
    pytest.importorskip("numba")
    fast = comp.run(x, backend="numba")
    np.testing.assert_allclose(fast, comp.run(x), rtol=1e-6)
    cpu = [e for e in events if e[1] == "cpu: softplus"]
    assert cpu[0][0] == "start" and cpu[-1][0] == "end" and cpu[-1][4].startswith("step ")


def test_a_first_numba_run_is_announced(events):
    pytest.importorskip("numba")
    announced = []
    with progress.listening(lambda e: announced.append(e.task.announce) if e.kind == "start" else None):
        comp = _softplus()
        comp.run(np.ones(64, np.float32), backend="numba")
        comp.run(np.ones(64, np.float32), backend="numba")
    assert announced == [True, False]


def test_a_while_loop_beats_and_an_interrupt_stops_the_run(events, monkeypatch):
    monkeypatch.setattr(progress, "MIN_INTERVAL", 0.0)
    b = xe.XlaBuilder("count")
    x = xe.Parameter(b, 0, xe.Shape("s32", ()), "x")
    comp = b.build(xe.While(lambda s: xe.Lt(s, np.int32(50)), lambda s: xe.Add(s, np.int32(1)), x))
    assert comp.run(np.int32(0)) == 50
    assert any(e[4] == "while: iteration 20" for e in events)

    def interrupt(e):  # the notebook's interrupt, arriving during the loop
        if e.kind == "update" and e.task.detail == "while: iteration 10":
            raise KeyboardInterrupt
    events.clear()
    with progress.listening(interrupt):
        with pytest.raises(KeyboardInterrupt):
            comp.run(np.int32(0))
    assert events[-1][0] == "end" and events[-1][5] == "interrupted"
    assert comp.run(np.int32(0)) == 50  # nothing left half-done


def test_rendering_an_animation_reports_frames(events):
    pytest.importorskip("matplotlib")
    anim = xe.animate("pad", np.arange(4, dtype=np.float32), np.float32(0), padding_config=[(1, 1, 1)])
    anim.to_jshtml()
    assert events[0][1] == "rendering Pad" and events[-1][2] == events[-1][3] == len(anim.frames)


# -- the notebook's progress bar ------------------------------------------------------------------

@pytest.fixture
def bars(clock):
    pytest.importorskip("ipywidgets")
    from xla_explorer.widgets.progress import NotebookProgress
    shown = []
    listener = NotebookProgress(delay=0.05, display=shown.append)
    with progress.listening(listener):
        yield shown


def test_an_announced_task_shows_a_bar_at_once(bars, clock):
    with progress.task("numba: f", total=4, announce=True) as t:
        assert len(bars) == 1 and "numba: f" in bars[0].label.value
        t.advance(detail="step 1 of 4: exp")
        clock.sleep(0.06)  # slower than the delay: the bar stays, with its time
    bar = bars[0]
    assert bar.shown and bar.bar.bar_style == "success" and "done in 0.1 s" in bar.text.value
    assert "interrupt the kernel" not in bar.text.value


def test_quick_work_leaves_no_bar_and_slow_work_gets_one(bars, clock, monkeypatch):
    monkeypatch.setattr(progress, "MIN_INTERVAL", 0.0)
    with progress.task("numpy: quick", total=2) as t:
        clock.sleep(0.04)  # quicker than the delay (0.05 s)
        t.advance()
    assert bars == []
    with progress.task("numpy: slow", total=3) as t:
        clock.sleep(0.06)
        t.advance(detail="while.1")
        assert len(bars) == 1 and "1 of 3" in bars[0].text.value and "interrupt the kernel" in bars[0].text.value
        with progress.task("replica 1") as inner:
            inner.note("iteration 3")
            t.advance()
        assert bars[0].sub == ""
    assert bars[0].bar.value == 1.0


def test_a_bar_says_how_many_kernels_compiled(bars, clock):
    with progress.task("cpu: f", total=1, announce=True) as t:
        with progress.compiling("cpu.shape.rows_ser"):
            clock.sleep(1.5)
        t.advance()
    assert "done in 1.5 s (1 kernel compiled in 1.5 s)" in bars[0].text.value


def test_an_interrupted_run_says_so(bars):
    with pytest.raises(KeyboardInterrupt):
        with progress.task("cpu: f", total=10, announce=True) as t:
            t.advance()
            raise KeyboardInterrupt
    assert bars[0].bar.bar_style == "warning" and "interrupted" in bars[0].text.value


def test_widgets_subscribe_only_in_a_kernel():
    pytest.importorskip("ipywidgets")
    import xla_explorer.widgets as widgets
    assert not widgets._in_kernel() and widgets._notebook_progress not in progress._listeners
    from xla_explorer.widgets import show_progress
    listener = show_progress(True)
    assert listener in progress._listeners
    assert show_progress(False) is None and listener not in progress._listeners
