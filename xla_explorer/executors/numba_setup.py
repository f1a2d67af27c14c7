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
import os

_done = False


def numba():
    """Import numba (configured), or say how to get it."""
    global _done
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
    return nb


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
