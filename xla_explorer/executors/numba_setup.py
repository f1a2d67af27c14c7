"""Numba's configuration for the kernels, set once before the first compile.

The ``omp`` threading layer launches a parallel loop in about 1.5 us, ``workqueue`` in
about 130 us (measured on this project's 2-core machines), which decides whether small
arrays gain from ``parallel=True``: prefer omp when it is available.
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
        if "NUMBA_THREADING_LAYER" not in os.environ:
            try:
                from numba.np.ufunc import omppool  # noqa: F401  (present only where omp is)
                nb.config.THREADING_LAYER = "omp"
            except ImportError:
                pass
    return nb


#: below this many elements a kernel runs its serial version (no thread launch)
PARALLEL_THRESHOLD = 1 << 15
