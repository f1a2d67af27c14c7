#!/usr/bin/env python3
"""What XLA:CPU's denormal flushing costs the executors: each workload in ``"flush"`` mode (the
default, XLA:CPU's) and in ``"ieee"`` mode, on the Numba executor and the NumPy reference, with
jax.jit in the same run.

usage:  python benchmarks/flush_cost.py [--mib 4] [--repeat 5] [--out benchmarks/results/flush_cost.json]

Prints, per workload, the median seconds and the ratios flush / ieee (what flushing costs) and
numba-flush / jax.  The executors flush in software (a compare and a select per element that an
op's rule flushes, ``fpenv``); the processor's FTZ/DAZ bits (MXCSR) would do it for free, but
values carried wider than their type (bf16 in f32, f32 parts of complex numbers and some f32
steps in f64) would escape them, and Numba's worker threads each have their own MXCSR.
"""
import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def workloads(n):
    import jax.numpy as jnp
    rng = np.random.default_rng(0)
    x, y, z = (rng.standard_normal(n, dtype=np.float32) for _ in range(3))
    m = rng.standard_normal((n // 256, 256), dtype=np.float32)
    return {
        "f32 chain (mul, add, max, exp, tanh)": (lambda a, b, c: jnp.tanh(jnp.exp(jnp.maximum(a * b + c, 0) * 0.1)),
                                                 [x, y, z]),
        "f32 add": (lambda a, b: a + b, [x, y]),
        "f32 reduce sum (rows)": (lambda a: jnp.sum(a, 1), [m]),
        "f32 softmax (rows)": (lambda a: jnp.exp(a - a.max(1, keepdims=True))
                               / jnp.exp(a - a.max(1, keepdims=True)).sum(1, keepdims=True), [m]),
        "f64 chain (mul, add, max, exp)": (lambda a, b, c: jnp.exp(jnp.maximum(a * b + c, 0) * 0.1),
                                           [x.astype(np.float64), y.astype(np.float64), z.astype(np.float64)]),
    }


def _time(f, repeat):
    for _ in range(3):   # compiling (a first run may go on in the reference while Numba compiles)
        f()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mib", type=float, default=4, help="MiB of each f32 operand")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results", "flush_cost.json"))
    opts = parser.parse_args()
    import jax
    jax.config.update("jax_enable_x64", True)
    import xla_explorer as xe
    n = int(opts.mib * (1 << 20) // 4) // 256 * 256
    rows = []
    for name, (f, args) in workloads(n).items():
        jf = jax.jit(f)
        comp = xe.from_jax(f, *args)
        row = {"workload": name, "elements": n,
               "jax_s": _time(lambda: jax.block_until_ready(jf(*args)), opts.repeat)}
        for backend in ("numba", "numpy"):
            for mode in ("flush", "ieee"):
                row[f"{backend}_{mode}_s"] = _time(lambda: comp.run(*args, backend=backend, denormals=mode),
                                                   opts.repeat)
        row["numba_flush_over_ieee"] = row["numba_flush_s"] / row["numba_ieee_s"]
        row["numpy_flush_over_ieee"] = row["numpy_flush_s"] / row["numpy_ieee_s"]
        row["numba_flush_over_jax"] = row["numba_flush_s"] / row["jax_s"]
        rows.append(row)
        print(f"{name:40s} numba flush/ieee {row['numba_flush_over_ieee']:.2f}  numpy flush/ieee "
              f"{row['numpy_flush_over_ieee']:.2f}  numba(flush)/jax {row['numba_flush_over_jax']:.2f}  "
              f"(numba {row['numba_flush_s'] * 1e3:.1f} / {row['numba_ieee_s'] * 1e3:.1f} ms, "
              f"jax {row['jax_s'] * 1e3:.1f} ms)", flush=True)
    with open(opts.out, "w") as fh:
        json.dump({"mib": opts.mib, "repeat": opts.repeat, "cpus": os.cpu_count(), "rows": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
