"""Executors: ``reference`` (NumPy, the oracle), ``numba_executor`` with its CPU and CUDA
kernel layers, ``spmd`` (simulated devices), ``jax_lowering`` (real XLA through JAX)."""
import importlib


def import_families(package, families, task=None):
    """Import ``package.<family>`` for each family that exists (each registers its kernels);
    ``task`` (a ``progress`` task) advances by one a family."""
    for fam in families:
        if task is not None:
            task.note(f"{fam} ops")
        try:
            importlib.import_module(f"{package}.{fam}")
        except ModuleNotFoundError as e:
            if e.name != f"{package}.{fam}":
                raise
        if task is not None:
            task.advance()
