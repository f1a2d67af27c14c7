"""Executors: ``reference`` (NumPy, the oracle), ``numba_executor`` with its CPU and CUDA
kernel layers, ``spmd`` (simulated devices), ``jax_lowering`` (real XLA through JAX)."""
import importlib


def import_families(package, families):
    """Import ``package.<family>`` for each family that exists (each registers its kernels)."""
    for fam in families:
        try:
            importlib.import_module(f"{package}.{fam}")
        except ModuleNotFoundError as e:
            if e.name != f"{package}.{fam}":
                raise
