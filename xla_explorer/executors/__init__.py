"""Executors: ``reference`` (NumPy, the oracle); the CPU and CUDA kernel layers register later."""
