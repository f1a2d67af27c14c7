"""Benchmarks: the Numba executor against the NumPy reference and JAX, in one run.

    python benchmarks/run.py [--quick] [--only NAME] [--no-readme]

For each workload (benchmarks/workloads.py): the median time of the NumPy reference,
``backend="numba"`` and, when jax is installed, ``jax.jit(comp.to_jax())`` (compile
excluded), all in this process after a warm-up; the ratios numba/JAX and
reference/numba; effective GB/s (bytes read + written / time) against the machine's
copy bandwidth measured here.  Also: first-call latency in a fresh process with a cold
and a warm kernel cache, and the per-op dispatch overhead on 8x8 arrays.

Writes benchmarks/results/results.json, docs/images/benchmarks.png and the table in
README.md between the ``<!-- benchmarks -->`` markers.  Timings are not tests.
"""
import argparse
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import xla_explorer as xe  # noqa: E402
from workloads import WORKLOADS  # noqa: E402


def median_time(fn, min_reps=3, budget=1.5):
    fn()  # warm-up (compiles)
    times = []
    start = time.perf_counter()
    while len(times) < min_reps or (time.perf_counter() - start < budget and len(times) < 50):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def blas_info():
    """Which BLAS kernels NumPy runs (OPENBLAS_CORETYPE may force older ones: the README
    says how the benchmark is run)."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return {"note": "threadpoolctl not installed"}
    for lib in threadpool_info():
        if lib.get("internal_api") in ("openblas", "mkl", "blis"):
            return {k: lib.get(k) for k in ("internal_api", "version", "architecture", "num_threads")}
    return {}


def copy_bandwidth():
    src = np.ones(1 << 25, np.float32)  # 128 MiB
    dst = np.empty_like(src)
    t = median_time(lambda: np.copyto(dst, src), min_reps=5, budget=1.0)
    return 2 * src.nbytes / t / 1e9


def nbytes(values):
    if isinstance(values, (tuple, list)):
        return sum(nbytes(v) for v in values)
    return np.asarray(values).nbytes


def jax_fn(comp):
    try:
        import jax
    except ImportError:
        return None
    to_jax = getattr(comp, "to_jax", None)
    if to_jax is None:
        return None
    f = jax.jit(to_jax())

    def run(*args):
        out = f(*args)
        jax.block_until_ready(out)
        return out
    return run


def bench(name, quick):
    make, kind = WORKLOADS[name]
    comp, args = make(np.random.default_rng(0))
    row = {"workload": name, "kind": kind}
    out = comp.run(*args, backend="numba")
    row["bytes"] = nbytes(args) + nbytes(out)
    row["numba_s"] = median_time(lambda: comp.run(*args, backend="numba"))
    row["numpy_s"] = median_time(lambda: comp.run(*args), min_reps=1 if quick else 3, budget=0.5 if quick else 2.0)
    jf = jax_fn(comp)
    if jf is not None:
        try:
            import jax
            jargs = [jax.device_put(a) for a in args]
            row["jax_s"] = median_time(lambda: jf(*jargs))
        except Exception as e:  # noqa: BLE001 - reported in the table
            row["jax_error"] = f"{type(e).__name__}: {e}"[:120]
    row["numba_gbs"] = row["bytes"] / row["numba_s"] / 1e9
    row["speedup_vs_numpy"] = row["numpy_s"] / row["numba_s"]
    if "jax_s" in row:
        row["numba_over_jax"] = row["numba_s"] / row["jax_s"]
    return row


_LATENCY = """
import time, sys, numpy as np
sys.path.insert(0, {root!r}); sys.path.insert(0, {bench!r})
t0 = time.perf_counter()
import xla_explorer as xe
from workloads import WORKLOADS
comp, args = WORKLOADS[{name!r}][0](np.random.default_rng(0))
t1 = time.perf_counter()
import numba  # once per process, whatever the cache holds: timed apart
from xla_explorer.executors import cpu
cpu.load()
t2 = time.perf_counter()
comp.run(*args, backend="numba")
print(t2 - t1, time.perf_counter() - t2)
"""


def first_call_latency(name):
    with tempfile.TemporaryDirectory() as cache:
        # both caches in a new folder: generated loops and the kernels of cpu/*.py
        env = dict(os.environ, XLA_EXPLORER_CACHE=cache, NUMBA_CACHE_DIR=cache)
        code = _LATENCY.format(root=str(ROOT), bench=str(ROOT / "benchmarks"), name=name)
        runs = []
        for _ in range(2):
            out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
            if out.returncode:
                return {"error": out.stderr.strip().splitlines()[-1][:120]}
            runs.append([float(v) for v in out.stdout.split()[-2:]])
    return {"import_s": runs[1][0], "cold_s": runs[0][1], "warm_s": runs[1][1]}


def dispatch_overhead():
    b = xe.XlaBuilder("dispatch")
    x = xe.Parameter(b, 0, xe.Shape("f32", (8, 8)), "x")
    v = x
    for _ in range(20):
        v = xe.Transpose(v, [1, 0])  # not element-wise: one kernel call each
    comp = b.build(v)
    a = np.ones((8, 8), np.float32)
    t = median_time(lambda: comp.run(a, backend="numba"), min_reps=20, budget=1.0)
    return t / 20


def table(rows, bw):
    head = "| workload | NumPy ref | numba | JAX | numba/JAX | ref/numba | numba GB/s (% of copy) |\n|---|---|---|---|---|---|---|"
    lines = [head]
    for r in rows:
        jax_s = f"{r['jax_s'] * 1e3:.2f} ms" if "jax_s" in r else "-"
        ratio = f"{r['numba_over_jax']:.2f}" if "numba_over_jax" in r else "-"
        lines.append(f"| {r['workload']} | {r['numpy_s'] * 1e3:.1f} ms | {r['numba_s'] * 1e3:.2f} ms | {jax_s} | "
                     f"{ratio} | {r['speedup_vs_numpy']:.0f}x | {r['numba_gbs']:.1f} ({100 * r['numba_gbs'] / bw:.0f}%) |")
    return "\n".join(lines)


def plot(rows, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    names = [r["workload"] for r in rows]
    fig, ax = plt.subplots(figsize=(9, 4.5))
    y = np.arange(len(rows))
    ax.barh(y - 0.2, [r.get("numba_over_jax", np.nan) for r in rows], 0.4, label="numba / JAX (lower is better)")
    ax.barh(y + 0.2, [1 / r["speedup_vs_numpy"] for r in rows], 0.4, label="numba / NumPy reference")
    ax.axvline(1.0, color="k", lw=0.8)
    ax.set_yticks(y, names)
    ax.set_xscale("log")
    ax.set_xlabel("time ratio (log scale)")
    ax.invert_yaxis()
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, frameon=False)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    return True


def update_readme(text):
    readme = ROOT / "README.md"
    s = readme.read_text()
    start, end = "<!-- benchmarks -->", "<!-- /benchmarks -->"
    if start in s and end in s:
        s = s[:s.index(start) + len(start)] + "\n" + text + "\n" + s[s.index(end):]
        readme.write_text(s)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer repeats of the slow reference")
    ap.add_argument("--only", action="append", help="run only these workloads (substring)")
    ap.add_argument("--no-readme", action="store_true")
    ap.add_argument("--no-latency", action="store_true")
    args = ap.parse_args(argv)
    names = [n for n in WORKLOADS if not args.only or any(o in n for o in args.only)]
    bw = copy_bandwidth()
    blas = blas_info()
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
          f"copy bandwidth {bw:.1f} GB/s (read + write); BLAS: {blas}; "
          f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', 'unset')}")
    rows = []
    for name in names:
        try:
            r = bench(name, args.quick)
        except Exception as e:  # noqa: BLE001 - a missing kernel is reported, the others run
            print(f"{name}: {type(e).__name__}: {str(e)[:160]}")
            continue
        rows.append(r)
        print(f"{name:28s} ref {r['numpy_s'] * 1e3:9.1f} ms  numba {r['numba_s'] * 1e3:8.2f} ms  "
              f"jax {r.get('jax_s', float('nan')) * 1e3:8.2f} ms  numba/jax {r.get('numba_over_jax', float('nan')):5.2f}  "
              f"ref/numba {r['speedup_vs_numpy']:6.0f}x  {r['numba_gbs']:5.1f} GB/s", flush=True)
    extra = {"copy_bandwidth_gbs": bw, "dispatch_overhead_us": dispatch_overhead() * 1e6, "blas": blas,
             "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE", "unset")}
    print(f"dispatch overhead per op on 8x8: {extra['dispatch_overhead_us']:.1f} us")
    if not args.no_latency:
        extra["first_call"] = {n: first_call_latency(n) for n in ("element-wise chain", "gather rows", "reduce-window max 3x3/2")}
        for n, lat in extra["first_call"].items():
            print(f"first call in a fresh process, {n}: {lat}")
    md = table(rows, bw)
    md += (f"\n\nCopy bandwidth {bw:.1f} GB/s; dispatch overhead {extra['dispatch_overhead_us']:.1f} us per op (8x8); "
           f"BLAS {blas.get('internal_api', '?')} {blas.get('version', '')} with {blas.get('architecture', '?')} kernels. "
           f"Measured by `python benchmarks/run.py` on {os.cpu_count()} cores.")
    if "first_call" in extra:
        md += ("\nFirst call of a workload in a fresh process, after importing numba and the kernel modules "
               "(cold cache / warm cache): " + "; ".join(
                   f"{n}: {v.get('cold_s', float('nan')):.2f} s / {v.get('warm_s', float('nan')):.2f} s"
                   for n, v in extra["first_call"].items())
               + f"; the imports themselves: {next(iter(extra['first_call'].values())).get('import_s', float('nan')):.2f} s.")
    print()
    print(md)
    out = ROOT / "benchmarks" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps({"rows": rows, **extra}, indent=1))
    plot(rows, ROOT / "docs" / "images" / "benchmarks.png")
    if not args.no_readme:
        update_readme(md)


if __name__ == "__main__":
    main()
