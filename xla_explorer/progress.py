"""Progress of long work, reported to whoever listens; no widget library here.

Long work (compiling Numba kernels on a first run, a long run, rendering a big animation)
reports itself::

    with progress.task("numba: softplus", total=len(steps), announce=first_run) as t:
        for step in steps:
            t.advance(detail=step.name)     # before or after each step
    progress.beat("while: iteration 12")    # from deep inside (a loop): the detail only

and listeners (``xla_explorer.widgets`` shows a progress bar in the notebook) subscribe::

    progress.subscribe(fn)      # fn(event): event.kind is "start", "update" or "end"

``announce`` says the work is probably slow (a first run compiles): a listener may show
it at once; other tasks are worth showing only once they have taken a while.  Updates
reach listeners at most every ``MIN_INTERVAL`` seconds (a loop of a million iterations
sends a few dozen), start and end always.

Interrupting: the notebook's interrupt (a ``KeyboardInterrupt``) stops the work between
two steps; the task ends with ``status == "interrupted"`` and the exception goes on.  (A
button cannot do it: a busy kernel reads no widget message until the cell is done.)
With no listener, an announced task in an interactive session prints a line on stderr.

A kernel compiling (Numba, on a first run) holds the thread for seconds and reports
nothing itself: ``with progress.compiling(name):`` (entered from Numba's compile events)
makes the running task's detail "compiling <name>" at once, keeps its time going on
screen (a thread sends an update every ``TICK`` seconds) and counts the kernels compiled.

A caller that must answer quickly (the op playground reruns a call on every click) bounds
the work: ``with progress.time_limit(2.0):`` makes the next ``beat`` after 2 s raise
``OutOfTime`` (an endless ``while`` loop beats once per iteration).
"""
import collections
import sys
import threading
import time
from dataclasses import dataclass

#: seconds between two "update" events of one task
MIN_INTERVAL = 0.1

#: seconds between two "update" events while a kernel compiles (nothing else reports then)
TICK = 0.5

_listeners = []
_running = []  # the tasks in progress, innermost last

#: the last top-level tasks that ended (reported to a listener or announced), oldest first:
#: what ran, how it ended and how long it took (``t.label``, ``t.status``, ``t.elapsed``)
finished = collections.deque(maxlen=32)
_limits = []   # (deadline, seconds) of the time_limit blocks, innermost last
_compiling = []  # the kernels compiling now, outermost first (a kernel compiles those it calls)


@dataclass
class Event:
    kind: str  # "start", "update" or "end"
    task: "Task"


class Task:
    """One piece of long work: ``label``, ``done`` of ``total`` steps (``total`` None:
    unknown), the current ``detail``, ``depth`` (0: not inside another task), ``status``
    ("running", "done", "interrupted" or "failed"), ``elapsed`` seconds, and the kernels
    ``compiled`` while it ran, in ``compile_seconds``."""

    def __init__(self, label, total=None, announce=False, depth=0):
        self.label, self.total, self.announce, self.depth = label, total, announce, depth
        self.done, self.detail, self.status = 0, "", "running"
        self.compiled, self.compile_seconds = 0, 0.0
        self.started = time.perf_counter()
        self.ended = None
        self._sent = 0.0

    @property
    def elapsed(self):
        return (self.ended or time.perf_counter()) - self.started

    @property
    def parent(self):
        k = _running.index(self) if self in _running else -1
        return _running[k - 1] if k > 0 else None

    def advance(self, n=1, detail=None):
        """``n`` more steps done (and what is going on now)."""
        self.done += n
        if detail is not None:
            self.detail = detail
        self._update()

    def note(self, detail):
        """What is going on now, no step counted."""
        self.detail = detail
        self._update()

    def _update(self):
        now = time.perf_counter()
        if _listeners and now - self._sent >= MIN_INTERVAL:
            self._sent = now
            _emit("update", self)

    def __repr__(self):
        of = f"/{self.total}" if self.total is not None else ""
        return f"<Task {self.label!r} {self.done}{of} {self.status} {self.elapsed:.2f}s>"


class _Quiet:
    """The task when nobody listens: every report costs one call."""

    done, total, detail, status, depth = 0, None, "", "running", 0

    def advance(self, n=1, detail=None):
        pass

    def note(self, detail):
        pass


#: what ``task`` gives when nobody listens (reporters may test ``t is QUIET`` to skip work)
QUIET = _Quiet()


class task:
    """``with task(label, total=None, announce=False) as t:`` -- see the module's text."""

    def __init__(self, label, total=None, announce=False):
        self.label, self.total, self.announce = label, total, announce
        self.task = None

    def __enter__(self):
        if not _listeners and not (self.announce and _interactive()):
            return QUIET
        self.task = Task(self.label, self.total, self.announce, depth=len(_running))
        _running.append(self.task)
        if _listeners:
            _emit("start", self.task)
        else:
            print(f"xla_explorer: {self.label} (the first run compiles kernels; interrupt the kernel to stop) ...",
                  file=sys.stderr, flush=True)
        return self.task

    def __exit__(self, kind, value, tb):
        t = self.task
        if t is None:
            return False
        t.ended = time.perf_counter()
        t.status = "done" if kind is None else "interrupted" if issubclass(kind, KeyboardInterrupt) else "failed"
        if t in _running:
            _running.remove(t)
        if t.depth == 0:
            finished.append(t)
        if _listeners:
            _emit("end", t)
        else:
            print(f"xla_explorer: {self.label}: {t.status} in {t.elapsed:.1f} s", file=sys.stderr, flush=True)
        return False


def beat(detail):
    """From inside long work (a loop): the innermost running task's detail becomes
    ``detail``.  Nothing when no task is running; ``OutOfTime`` past a ``time_limit``."""
    if _limits and time.perf_counter() > _limits[-1][0]:
        raise OutOfTime(_limits[-1][1], detail)
    if _running:
        _running[-1].note(detail)


class compiling:
    """``with compiling(name):`` -- the kernel ``name`` compiles (see the module's text).
    The innermost running task's detail says so while it does; a kernel compiled while
    another compiles (one it calls) is part of that one."""

    def __init__(self, name):
        self.name, self.task, self._stop = name, None, None

    def __enter__(self):
        _compiling.append(self.name)
        t = current()
        if t is None or len(_compiling) > 1:
            return self
        self.task, self._before, self._started = t, t.detail, time.perf_counter()
        t.detail = (f"{t.detail} · " if t.detail else "") + f"compiling {self.name}"
        if _listeners:
            # sent now, whatever MIN_INTERVAL says: the compiler sends nothing for seconds,
            # and a ticker thread sends the task again meanwhile, so that its time goes on
            t._sent = time.perf_counter()
            _emit("update", t)
            self._stop = threading.Event()
            threading.Thread(target=_tick, args=(t, self._stop), name="xla_explorer progress", daemon=True).start()
        return self

    def __exit__(self, *exc):
        _compiling.pop()
        t = self.task
        if t is not None:
            if self._stop is not None:
                self._stop.set()
            t.compiled += 1
            t.compile_seconds += time.perf_counter() - self._started
            t.detail = self._before
        return False


def _tick(t, stop):
    # Event.wait, not time.sleep: the thread ends as soon as the compile does
    while not stop.wait(TICK):
        if t.status == "running":
            _emit("update", t)


class OutOfTime(RuntimeError):
    """Work stopped at a ``beat`` because a ``time_limit`` ran out: ``seconds``, ``detail``
    (where it was: "while: iteration 41873")."""

    def __init__(self, seconds, detail):
        super().__init__(f"stopped after {seconds:g} s, at {detail}")
        self.seconds, self.detail = seconds, detail


class time_limit:
    """``with time_limit(seconds):`` -- work that beats past ``seconds`` raises ``OutOfTime``."""

    def __init__(self, seconds):
        self.seconds = seconds

    def __enter__(self):
        _limits.append((time.perf_counter() + self.seconds, self.seconds))
        return self

    def __exit__(self, *exc):
        _limits.pop()
        return False


def current():
    """The innermost running task, or None."""
    return _running[-1] if _running else None


def subscribe(fn):
    """Call ``fn(event)`` for every start, update and end of a task (once per function)."""
    if fn not in _listeners:
        _listeners.append(fn)
    return fn


def unsubscribe(fn):
    if fn in _listeners:
        _listeners.remove(fn)


class listening:
    """``with listening(fn):`` -- subscribed inside the block only."""

    def __init__(self, fn):
        self.fn = fn

    def __enter__(self):
        subscribe(self.fn)
        return self.fn

    def __exit__(self, *exc):
        unsubscribe(self.fn)
        return False


def _emit(kind, t):
    for fn in list(_listeners):
        try:
            fn(Event(kind, t))
        except KeyboardInterrupt:
            raise
        except Exception:  # a broken listener must not break the work it watches
            pass


def _interactive():
    return hasattr(sys, "ps1") or bool(sys.flags.interactive) or "ipykernel" in sys.modules
