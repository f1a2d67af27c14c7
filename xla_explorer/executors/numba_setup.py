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
    return nb


#: below this many elements a kernel runs its serial version (no thread launch)
PARALLEL_THRESHOLD = 1 << 15

#: the same for kernels doing well under a nanosecond of work per element (copies, gathers,
#: pads, sums, fused arithmetic without transcendentals): below it the serial loop takes
#: under about 100 us, which two threads do not beat by more than a launch costs (20-60
#: us with passive OpenMP workers, more on a loaded machine)
MOVE_PARALLEL_THRESHOLD = 1 << 18
