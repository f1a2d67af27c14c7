"""The CPU layer: Numba kernels, one module per op family (as the spec layer has them).

Kernels register in ``registry.LAYERS["cpu"]`` keyed by HLO opcode with the reference's
calling convention ``kernel(*values, shape, **attrs)``; computation attributes arrive
as ``CompiledRegion`` objects (see ``executors.numba_executor``).  A kernel that calls a
library routine instead of a Numba loop (FFT, Cholesky, BLAS) says so in
``status_note``, which the status table shows.
"""
from ...ops import registry

FAMILIES = ("fused", "elementwise", "shape", "slicing", "indexing", "reduction", "linalg", "control",
            "collective", "rng")


def kernel(*opcodes, note=None, layer="cpu"):
    """Register the decorated function as the ``layer`` kernel of ``opcodes``."""
    def register(fn):
        if note:
            fn.status_note = note
        for op in opcodes:
            registry.register_layer(layer, op, fn)
        return fn
    return register


_loaded = False


def load():
    """Import every family module of the CPU layer (registering its kernels)."""
    global _loaded
    if not _loaded:
        from ... import progress
        from ..numba_setup import numba
        # the first Numba run of a session waits for this (2-3 s, measured): a bar at once
        with progress.task("cpu: loading Numba and its kernels", total=len(FAMILIES), announce=True) as t:
            t.note("importing numba")
            numba()  # without numba: an ImportError saying how to install it, and no half-filled table
            _loaded = True
            from .. import import_families
            import_families(__name__, FAMILIES, t)
            t.note("Numba's NumPy implementations")
            _prepare_numba()


def _prepare_numba():
    """Numba's once-per-process set-up, done with the imports rather than in the first
    kernel call: loading the first compiled kernel (even from the disk cache) makes Numba
    import and register its NumPy implementations (0.25 s, measured), which no later
    kernel pays again."""
    try:
        from numba.core.registry import cpu_target
        cpu_target.target_context.refresh()
    except Exception:  # noqa: BLE001 - an optimisation only: the first call does it otherwise
        pass
