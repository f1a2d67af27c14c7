"""Numba's configuration for the kernels, set once before the first compile.

The ``omp`` threading layer launches a parallel loop in about 1.5 us, ``workqueue`` in
about 130 us (measured on this project's 2-core machines), which decides whether small
arrays gain from ``parallel=True``: prefer omp when it is available.

OpenMP's workers spin-wait between parallel loops by default.  On a machine whose cores
are shared with other processes that is ruinous: a 128K-element fused loop took 8-28 ms
(median) instead of 40-60 us whenever another process kept a core busy, because the
spinning workers and the other process fight for the cores.  With
``OMP_WAIT_POLICY=passive`` the workers sleep at once: 63 us whether the machine is idle
or loaded (about 20 us more per launch than spinning on an idle machine).  It is set
here, before Numba loads its OpenMP pool, unless the user set it.
"""
import math
import os
import threading
import time

_done = False


def numba():
    """Import numba (configured), or say how to get it."""
    global _done, _nb
    if _nb is not None:   # (kernels ask for it on every call: the import statement took ~0.3 us)
        return _nb
    try:
        import numba as nb
    except ImportError:
        raise ImportError("backend='numba' needs numba: pip install 'xla_explorer[numba]'") from None
    if not _done:
        _done = True
        # read by OpenMP when Numba first loads its thread pool (the first parallel loop)
        os.environ.setdefault("OMP_WAIT_POLICY", "passive")
        if "NUMBA_THREADING_LAYER" not in os.environ:
            try:
                from numba.np.ufunc import omppool  # noqa: F401  (present only where omp is)
                nb.config.THREADING_LAYER = "omp"
            except ImportError:
                pass
        _report_compiles()
        _guard_cache()
    _nb = nb
    return nb


_nb = None  # numba, imported and configured


def _report_compiles():
    """Numba's compile events (``numba.core.event``, "numba:compile": a kernel compiling
    for the first time, not one loaded from the disk cache) -> ``progress.compiling``, so
    that a first run's bar says which kernel it is compiling rather than sitting still."""
    from numba.core import event

    from .. import progress

    class Compiles(event.Listener):
        def __init__(self):
            self.open = []  # the progress.compiling blocks entered, a start event each

        def on_start(self, ev):
            block = progress.compiling(kernel_name(ev.data["dispatcher"].py_func))
            block.__enter__()
            self.open.append(block)

        def on_end(self, ev):
            if self.open:
                self.open.pop().__exit__(None, None, None)

    event.register("numba:compile", Compiles())


def _guard_cache():
    """A disk-cache entry Numba cannot read is a cache miss, not an error.

    Numba's ``Cache.load_overload`` raises whatever unpickling its entry raises: a data
    file cut short (a process killed while writing it, a full disk) gives
    ``UnpicklingError: pickle data was truncated``, and an entry written by the same
    function loaded under another module name (a kernel file exec'd by hand) gives
    ``ModuleNotFoundError: No module named '<dynamic>'`` -- on every later run, in every
    process, until someone deletes the file.  Here such an entry is reported once (a
    ``RuntimeWarning`` naming the kernel) and compiled again; saving the new code then
    overwrites the entry (an unreadable index is removed first), so the cache mends itself."""
    import warnings

    from numba.core import caching

    from .jit_cache import interrupted_compile

    cls = caching.Cache
    if getattr(cls.load_overload, "_xla_explorer_guard", False):
        return
    load, save = cls.load_overload, cls.save_overload

    def load_overload(self, sig, target_context):
        try:
            got = load(self, sig, target_context)
        except Exception as e:  # noqa: BLE001  (KeyboardInterrupt is not caught)
            warnings.warn(f"Numba's disk cache entry for {kernel_name(self._py_func)} could not be "
                          f"read ({type(e).__name__}: {e}); compiling it again "
                          f"(cache: {self._cache_path})", RuntimeWarning, stacklevel=2)
            return None
        # an entry of another signature under this one's name (two processes that compiled
        # the same function at once numbered their data files alike; one overwrote the
        # other's): its code would unbox the arguments as another type ("can't unbox array
        # from PyObject"), so it is a miss, compiled again and saved over
        args = getattr(getattr(got, "signature", None), "args", None)
        if got is not None and args is not None and tuple(args) != tuple(sig):
            warnings.warn(f"Numba's disk cache entry for {kernel_name(self._py_func)} holds another "
                          f"signature's code ({tuple(args)} for {tuple(sig)}); compiling it again "
                          f"(cache: {self._cache_path})", RuntimeWarning, stacklevel=2)
            return None
        return got

    def save_overload(self, sig, data):
        try:
            return save(self, sig, data)
        except Exception as e:  # noqa: BLE001  (an index that cannot be read: start it again)
            if interrupted_compile(e):   # a Ctrl-C lost inside LLVM: the executor raises it again
                raise
            try:
                os.remove(self._cache_file._index_path)
                return save(self, sig, data)
            except Exception as e:  # noqa: BLE001  (the compiled code is used; only the cache is lost)
                warnings.warn(f"Numba's disk cache could not save {kernel_name(self._py_func)} "
                              f"({type(e).__name__}: {e})", RuntimeWarning, stacklevel=2)

    load_overload._xla_explorer_guard = True
    cls.load_overload, cls.save_overload = load_overload, save_overload


def kernel_name(fn):
    """What a student reads for a Numba kernel: ``cpu.reduction._arb_chunk``, ``generated
    fused loop loop_ser`` (generated source), the module and name of any other."""
    module, name = fn.__module__ or "", fn.__qualname__.replace(".<locals>", "")
    if module.startswith("xla_explorer_generated."):
        return f"generated {module.rsplit('.', 1)[1].rsplit('_', 1)[0]} loop {name}"
    for prefix in ("xla_explorer.executors.", "xla_explorer."):
        if module.startswith(prefix):
            return f"{module[len(prefix):]}.{name}"
    return f"{module}.{name}"


#: below this many elements a kernel runs its serial version (no thread launch)
PARALLEL_THRESHOLD = 1 << 15

#: the same for kernels doing well under a nanosecond of work per element (copies, gathers,
#: pads, sums, fused arithmetic without transcendentals): below it the serial loop takes
#: under about 100 us, which two threads do not beat by more than a launch costs (20-60
#: us with passive OpenMP workers, more on a loaded machine)
MOVE_PARALLEL_THRESHOLD = 1 << 18


#: ``XLA_EXPLORER_LOAD_AWARE=0`` turns off the one-thread runs of a busy machine (below):
#: the tests set it, so that the threaded kernels run whatever else the machine does
LOAD_AWARE = os.environ.get("XLA_EXPLORER_LOAD_AWARE", "1") != "0"

_load = [0.0, 0.0, 0.0, 0.0, 0.0]
# [when read, 1-minute load average, this process's CPU time then, its recent CPU use
#  (cores, averaged like the load average), the load average less that]
_CORES = os.cpu_count() or 1  # (os.cpu_count() takes about 6 us: read once)

#: the kernel's load average decays over a minute (Linux: a sample every 5 s, weight
#: exp(-5/60)); this process's own CPU use is averaged the same way
_LOAD_WINDOW_S = 60.0


def own_load(now=None):
    """This process's recent CPU use in cores (all its threads: Numba's, XLA's, Python's),
    averaged over about a minute as the kernel averages the load; read by ``machine_busy``."""
    _sample(time.monotonic() if now is None else now)
    return _load[3]


def _sample(now):
    cpu = time.process_time()
    dt = now - _load[0]
    if _load[0] == 0.0:        # first read: nothing to average yet
        _load[3] = 0.0
    elif dt > 0:
        rate = max(0.0, (cpu - _load[2]) / dt)
        w = math.exp(-dt / _LOAD_WINDOW_S)
        _load[3] = _load[3] * w + rate * (1.0 - w)
    try:
        _load[1] = os.getloadavg()[0]
    except OSError:
        _load[1] = 0.0
    _load[0], _load[2] = now, cpu
    _load[4] = _load[1] - _load[3]


def machine_busy():
    """Whether other processes already keep every core busy: the 1-minute load average,
    less this process's own recent CPU use (``own_load``), above the core count - 0.5.
    Read at most every half second.

    The load average counts this process's threads too: a long computation of its own
    (two Numba threads, XLA's, a benchmark's) pushed a 2-core machine's load over the old
    rule's core count + 0.5 by itself, and its kernels then ran on one thread on an
    otherwise idle machine.  A thread that waits for a core counts in the load but uses
    no CPU, so on a machine others keep busy the estimate of their load errs high, which
    is the safe side."""
    now = time.monotonic()
    if now - _load[0] > 0.5:
        _sample(now)
    return _load[4] > _CORES - 0.5


def enter_run():
    """The threads a run's kernels use: Numba's, or one on a busy machine; returns the
    count to give back to ``leave_run`` (0: nothing changed).

    A parallel kernel waits for its slowest thread, and on a machine whose cores other
    processes keep busy a thread waits for the scheduler for milliseconds: on 2 shared
    cores at load 8-12, a 4 MiB transposition took 40 ms (median) in two threads and
    1.8 ms in one, a 4 MiB pad 0.7 ms and 0.3 ms.  (GNU OpenMP's ``OMP_DYNAMIC`` makes
    the same choice from the 15-minute load.)  Numba's thread count is per thread, so
    this changes nothing outside the run."""
    if not LOAD_AWARE or not machine_busy():
        return 0
    prev = get_threads()
    if prev <= 1:
        return 0
    _set_threads(1)
    _lowered.prev = prev
    return prev


def leave_run(prev):
    if prev:
        _lowered.prev = 0
        _set_threads(prev)


def get_threads():
    """``numba.get_num_threads()`` (this thread's count), without its Python steps once the
    pool is up: the public function takes a multiprocessing lock on every call (1-1.5 us
    measured, 3-5 us on a loaded machine; a busy run's enter and leave called it three times)."""
    return (_fast[0] or _thread_fns()[0])()


def _set_threads(n):
    """``numba.set_num_threads(n)`` for a count ``get_threads`` returned (or 1)."""
    (_fast[1] or _thread_fns()[1])(n)


_fast = [None, None]   # Numba's C get / set of the thread count, once its pool is running


def _thread_fns():
    nb = numba()
    get, put = nb.get_num_threads, nb.set_num_threads
    get()   # (starts Numba's thread pool, which sets the C functions up)
    try:
        from numba.np.ufunc import parallel
        cget, cset = parallel._get_num_threads, parallel._set_num_threads
        if parallel._is_initialized and callable(cget) and callable(cset) and cget() == get():
            _fast[0], _fast[1] = cget, cset
            return cget, cset
    except (ImportError, AttributeError):   # another Numba: its public functions
        pass
    return get, put


_lowered = threading.local()  # .prev: the thread count enter_run lowered to 1 (0: none)


def split_threads():
    """The thread count that decides how a kernel cuts work whose cut changes the rounding
    (a float sum's parts, joined afterwards): Numba's, or the count ``enter_run`` lowered,
    so that a busy machine runs the same parts in one thread and gives the same bits."""
    return getattr(_lowered, "prev", 0) or get_threads()
