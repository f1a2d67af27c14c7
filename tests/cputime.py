"""The CPU time of a piece of work, for the few tests where time itself is the point.

A wall clock counts whatever else the machine runs (CI shares two cores with other jobs,
and a loaded machine stretched one of these tests past its bound); the process's CPU time
counts the work of this process only, so it stays put under load.  Where a count of work
says the same thing (steps, calls, cache hits), tests count instead.
"""
import time


def cpu_seconds(fn, *args, **kw):
    """(CPU seconds of this process spent in ``fn(*args, **kw)``, its result)."""
    start = time.process_time()
    result = fn(*args, **kw)
    return time.process_time() - start, result


def best_cpu_seconds(fn, *, runs=3, below=None):
    """The least CPU time of up to ``runs`` calls of ``fn()`` and the first call's result.
    Once a call took less than ``below`` seconds the rest are skipped: a passing check
    costs one call, a slow one is measured again before the test fails."""
    best, first = float("inf"), None
    for k in range(runs):
        took, result = cpu_seconds(fn)
        if k == 0:
            first = result
        best = min(best, took)
        if below is not None and best < below:
            break
    return best, first
