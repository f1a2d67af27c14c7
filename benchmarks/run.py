"""Benchmarks: the Numba executor against JAX (XLA:CPU) and the NumPy reference, in one run.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/run.py \\
        [--quick] [--only NAME] [--sizes N] [--no-readme] [--no-latency]

For every op family of ``workloads.SWEEP`` in both its layouts (the dimension it works
along minor or major) at every size (in-cache to several times the last-level cache),
and for the real programs of ``workloads.PROGRAMS`` (from their lowered and their
optimised HLO): the HLO JAX lowers the function to is run by ``backend="numba"`` and
timed *interleaved* with ``jax.jit`` of the same function (compile excluded; numba,
JAX, numba, JAX, ...), medians of repeated runs; a point whose ratio comes out above 1
is measured a second time and the runs pooled.  The reference (``backend="numpy"``) is
timed once or a few times, or skipped where a run would take minutes.  Results are
checked against JAX's.  Also: the machine's copy bandwidth (the yardstick of the
data-movement ops), the per-op dispatch overhead, the per-run overhead against ``jax.jit``
(``run_overhead``), the first-call latency in a fresh
process with a cold and a warm kernel cache.

Writes benchmarks/results/results.json, docs/images/benchmarks.png (time per element
against size) and the tables in README.md between the ``<!-- benchmarks -->`` markers.
Timings are not tests.
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
from workloads import MiB, PROGRAMS, SWEEP  # noqa: E402


def median_time(fn, min_reps=3, budget=1.5, max_reps=50):
    fn()  # warm-up (compiles)
    times = []
    start = time.perf_counter()
    while len(times) < min_reps or (time.perf_counter() - start < budget and len(times) < max_reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def interleaved(fa, fb, budget=2.0, min_reps=5, max_reps=60):
    """Median times of ``fa`` and ``fb`` run alternately (so that both see the same load)."""
    ta, tb = [], []
    start = time.perf_counter()
    while len(ta) < min_reps or (time.perf_counter() - start < budget and len(ta) < max_reps):
        t = time.perf_counter()
        fa()
        ta.append(time.perf_counter() - t)
        t = time.perf_counter()
        fb()
        tb.append(time.perf_counter() - t)
    return ta, tb


def against_jax(f, args, budget=1.5):
    """(numba's median, JAX's median, whether their results agree) of ``f`` on ``args``:
    the HLO JAX lowers it to run by ``backend="numba"``, interleaved with ``jax.jit`` of it
    (compile excluded: each is run once first)."""
    import jax
    import jax.numpy as jnp
    comp = xe.from_jax(f, *args)
    jf = jax.jit(f)
    jargs = [jnp.asarray(a) for a in args]
    want = np.asarray(jf(*jargs))
    got = comp.run(*args, backend="numba")
    tn, tj = interleaved(lambda: comp.run(*args, backend="numba"), lambda: jf(*jargs).block_until_ready(),
                         budget=budget)
    return statistics.median(tn), statistics.median(tj), _same(got, want)


def machine():
    info = {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count()}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        info["load_average"] = os.getloadavg()
    except OSError:
        pass
    import numba
    info["numba_threads"] = numba.get_num_threads()
    info["numba_threading_layer"] = numba.config.THREADING_LAYER
    try:
        import jax
        info["jax"] = jax.__version__
    except ImportError:
        pass
    info["numba"] = numba.__version__
    return info


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
    """Read + write GB/s of a 128 MiB copy by this machine's threads (the data-movement
    yardstick), the best of NumPy's one-thread copy and the executors' threaded copy."""
    from xla_explorer.executors.cpu.shape import copy_words
    src = np.ones(1 << 25, np.float32)
    dst = np.empty_like(src)
    t1 = median_time(lambda: np.copyto(dst, src), min_reps=5, budget=1.0)
    t2 = median_time(lambda: copy_words(src), min_reps=5, budget=1.0)
    return 2 * src.nbytes / min(t1, t2) / 1e9


def nbytes(values):
    if isinstance(values, (tuple, list)):
        return sum(nbytes(v) for v in values)
    if isinstance(values, dict):
        return sum(nbytes(v) for v in values.values())
    return np.asarray(values).nbytes


def _same(a, b):
    import jax
    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    if len(la) != len(lb):
        return False
    for x, y in zip(la, lb):
        x, y = np.asarray(x), np.asarray(y)
        if x.shape != y.shape:
            return False
        if x.dtype.kind in "biu":
            if not np.array_equal(x, y):
                return False
        elif not np.allclose(x.astype(np.float64), y.astype(np.float64), rtol=2e-3, atol=2e-3, equal_nan=True):
            return False
    return True


def measure(f, args, optimized=False, ref=True, budget=2.0, ref_limit=20.0):
    """Time one workload: numba and JAX interleaved, the reference apart."""
    import jax
    flat = jax.tree_util.tree_leaves(args)
    comp = xe.from_jax(f, *args, optimized=optimized)
    jf = jax.jit(f)
    jargs = jax.device_put(args)
    import numba
    # the load and the thread count with every point: the ratios are measured side by
    # side, but on a shared machine the absolute times are only as good as these
    from xla_explorer.executors import numba_setup
    row = {"load_average": os.getloadavg()[0], "numba_threads": numba.get_num_threads(),
           # whether the runs took one thread, the machine being busy (numba_setup.enter_run)
           "one_thread_busy": bool(numba_setup.LOAD_AWARE and numba_setup.machine_busy())}
    want = jax.block_until_ready(jf(*jargs))
    got = comp.run(*flat, backend="numba")
    row["agrees_with_jax"] = bool(_same(got, want))
    out_bytes = nbytes(jax.tree_util.tree_leaves(want))
    row["bytes"] = nbytes(flat) + out_bytes
    row["elements"] = int(sum(np.size(a) for a in flat))

    def numba_run():
        comp.run(*flat, backend="numba")

    def jax_run():
        jax.block_until_ready(jf(*jargs))

    tn, tj = interleaved(numba_run, jax_run, budget=budget)
    if statistics.median(tn) > statistics.median(tj):  # suspicious: measure again, pool the runs
        tn2, tj2 = interleaved(numba_run, jax_run, budget=budget)
        tn, tj = tn + tn2, tj + tj2
    row["numba_s"] = statistics.median(tn)
    row["jax_s"] = statistics.median(tj)
    row["numba_over_jax"] = row["numba_s"] / row["jax_s"]
    row["numba_gbs"] = row["bytes"] / row["numba_s"] / 1e9
    if ref:
        t = time.perf_counter()
        try:
            comp.run(*flat)
        except xe.SizeLimitError:  # the reference refuses sizes it would need gigabytes for
            return row
        first = time.perf_counter() - t
        row["numpy_s"] = first if first > ref_limit / 4 else min(first, median_time(
            lambda: comp.run(*flat), min_reps=1, budget=min(ref_limit, 3 * first), max_reps=5))
    return row


_LATENCY = """
import time, sys, numpy as np
sys.path.insert(0, {root!r}); sys.path.insert(0, {bench!r})
t0 = time.perf_counter()
import xla_explorer as xe
import jax
from workloads import SWEEP
build, layouts, kind, sizes = SWEEP[{name!r}]
f, args = build({layout!r}, sizes[0], np.random.default_rng(0))
comp = xe.from_jax(f, *args)
t1 = time.perf_counter()
import numba  # once per process, whatever the cache holds: timed apart
from xla_explorer.executors import cpu
cpu.load()
t2 = time.perf_counter()
comp.run(*args, backend="numba")
print(t2 - t1, time.perf_counter() - t2)
"""

LATENCY_CASES = (("softmax", "minor"), ("gather rows / columns", "major"), ("reduce-window max 3x3/2", "minor"))


def first_call_latency(name, layout):
    with tempfile.TemporaryDirectory() as cache:
        # both caches in a new folder: generated loops and the kernels of cpu/*.py
        env = dict(os.environ, XLA_EXPLORER_CACHE=cache, NUMBA_CACHE_DIR=cache)
        code = _LATENCY.format(root=str(ROOT), bench=str(ROOT / "benchmarks"), name=name, layout=layout)
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


def run_overhead(budget=1.5):
    """The whole per-run cost of a run that computes almost nothing: ``a + 1`` of f32[4,4]
    through ``comp.run(..., backend="numba")`` (argument checks, the run's program, one
    fused loop, the result) and through ``jax.jit``, interleaved; medians in microseconds."""
    import jax
    a = np.zeros((4, 4), np.float32)
    comp = xe.from_jax(lambda x: x + 1, a)
    jf = jax.jit(lambda x: x + 1)
    ja = jax.device_put(a)
    for _ in range(20):   # compiles, then the runs' programs
        comp.run(a, backend="numba")
        jax.block_until_ready(jf(ja))
    tn, tj = interleaved(lambda: comp.run(a, backend="numba"), lambda: jax.block_until_ready(jf(ja)),
                         budget=budget, min_reps=200, max_reps=20000)
    n, j = statistics.median(tn) * 1e6, statistics.median(tj) * 1e6
    return {"numba_us": n, "jax_us": j, "numba_over_jax": n / j, "load_average": os.getloadavg()[0]}


def _size_label(n):
    return f"{n // MiB} MiB" if n >= MiB else f"{n // 1024} KiB"


def _ratio(r, with_ref=False):
    if r is None or "numba_over_jax" not in r:
        return "-"
    text = f"{r['numba_over_jax']:.2f}"
    if not r.get("agrees_with_jax", True):
        text += " (differs)"
    text = f"**{text}**" if r["numba_over_jax"] > 1.0 else text
    if with_ref and r.get("numpy_s"):
        ref = r["numpy_s"] / r["numba_s"]
        text += f" ({ref:.0f}x)" if ref >= 10 else f" ({ref:.1f}x)"
    return text


def sweep_table(rows, sizes, bw):
    head = ("| op | layout | " + " | ".join(_size_label(s) for s in sizes)
            + " | numba GB/s, largest (% of the copy bandwidth measured beside it) |")
    lines = [head, "|" + "---|" * (len(sizes) + 3)]
    for (family, layout), points in rows.items():
        cells = [_ratio(points.get(s), with_ref=True) for s in sizes]
        largest = points[max(points)]
        gbs = f"{largest['numba_gbs']:.1f} ({100 * largest['numba_gbs'] / largest.get('copy_bandwidth_gbs', bw):.0f}%)" \
            if SWEEP[family][2] == "data" else "-"
        lines.append(f"| {family} | {layout} | " + " | ".join(cells) + f" | {gbs} |")
    return "\n".join(lines)


def program_table(rows):
    lines = ["| program | HLO | NumPy ref | numba | JAX | numba/JAX |", "|---|---|---|---|---|---|"]
    for (name, hlo), r in rows.items():
        ref = f"{r['numpy_s'] * 1e3:.0f} ms" if r.get("numpy_s") else "-"
        lines.append(f"| {name} | {hlo} | {ref} | {r['numba_s'] * 1e3:.2f} ms | {r['jax_s'] * 1e3:.2f} ms | "
                     f"{_ratio(r)} |")
    return "\n".join(lines)


def plot(rows, path):
    """Time per element against size, one panel per op family: numba (solid, dots), JAX
    (dashed), the reference (dotted); one colour per layout."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.lines import Line2D
    except ImportError:
        return False
    families = list(dict.fromkeys(f for f, _ in rows))
    cols = 3
    nrows = -(-len(families) // cols)
    plt.rcParams.update({"font.size": 11})
    fig, axes = plt.subplots(nrows, cols, figsize=(12, 2.9 * nrows + 0.6), squeeze=False)
    colours = ("tab:blue", "tab:orange")
    styles = (("numba_s", "-", "numba"), ("jax_s", "--", "JAX (jax.jit)"), ("numpy_s", ":", "NumPy reference"))
    for ax, family in zip(axes.flat, families):
        for k, ((fam, layout), points) in enumerate((key, p) for key, p in rows.items() if key[0] == family):
            sizes = sorted(points)
            x = [s / MiB for s in sizes]
            per = [points[s]["elements"] for s in sizes]
            for key, style, _ in styles:
                y = [points[s][key] / e * 1e9 if points[s].get(key) else np.nan for s, e in zip(sizes, per)]
                ax.plot(x, y, style, color=colours[k % 2], marker="o" if key == "numba_s" else None, ms=3,
                        label=layout if key == "numba_s" else None)
        ax.set_title(family, fontsize=11)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("operand size (MiB)")
        ax.set_ylabel("ns per element")
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=10, frameon=False, loc="best")  # the layouts (colours)
    for ax in list(axes.flat)[len(families):]:
        ax.axis("off")
    # the line styles once, for every panel
    fig.legend([Line2D([], [], color="black", ls=st, marker="o" if key == "numba_s" else None, ms=3)
                for key, st, _ in styles], [label for _, _, label in styles],
               loc="upper center", ncol=3, frameon=False, fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.45 / (2.9 * nrows + 0.6)))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True


def update_readme(text):
    readme = ROOT / "README.md"
    s = readme.read_text()
    start, end = "<!-- benchmarks -->", "<!-- /benchmarks -->"
    if start in s and end in s:
        s = s[:s.index(start) + len(start)] + "\n" + text + "\n" + s[s.index(end):]
        readme.write_text(s)


def render(data, bw_for_table=None):
    """The README text (tables, machine line) of a results dict; the plot beside it."""
    bw = bw_for_table or data["copy_bandwidth_gbs"]
    sweep, programs = {}, {}
    for r in data["sweep"]:
        sweep.setdefault((r["family"], r["layout"]), {})[r["size"]] = r
    # the order of SWEEP, whatever order the parts were run in
    order = [(f, lay) for f, (_, lays, _, _) in SWEEP.items() for lay in lays]
    sweep = dict(sorted(sweep.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else len(order)))
    for r in data["programs"]:
        programs[(r["program"], r["hlo"])] = r
    info, blas = data["machine"], data["blas"]
    md = []
    if programs:
        md.append(program_table(programs))
    if sweep:
        sizes_seen = sorted({s for points in sweep.values() for s in points})
        md.append("numba / JAX by operand size (below 1: numba is faster; bold: slower), and in brackets "
                  "the NumPy reference's time over numba's (where the reference ran):\n\n"
                  + sweep_table(sweep, sizes_seen, bw))
    loads = [r["load_average"] for r in data["sweep"] + data["programs"] if "load_average" in r]
    threads = sorted({r["numba_threads"] for r in data["sweep"] + data["programs"] if "numba_threads" in r})
    md.append(
        f"Machine: {info['cpu']}, {info['cores']} cores, Numba {info['numba']} on "
        f"{'/'.join(map(str, threads)) or info['numba_threads']} threads "
        f"({info['numba_threading_layer']} layer), JAX {info.get('jax', '?')}; BLAS {blas.get('internal_api', '?')} "
        f"{blas.get('version', '')} with {blas.get('architecture', '?')} kernels on {blas.get('num_threads', '?')} "
        f"threads (OPENBLAS_CORETYPE {data['openblas_coretype']}); copy bandwidth {_bw_text(data, bw)} (read + write); "
        f"dispatch overhead {data['dispatch_overhead_us']:.1f} us per op (8x8)"
        + (f"; a whole run of a one-op module {data['run_overhead']['numba_us']:.1f} us against jax.jit's "
           f"{data['run_overhead']['jax_us']:.1f} us" if data.get("run_overhead") else "")
        + (f"; the 1-minute load average while the points were measured: {min(loads):.1f} to {max(loads):.1f} "
           f"(median {statistics.median(loads):.1f}), the machine being shared" if loads else "")
        + _one_thread_note(data["sweep"] + data["programs"])
        + ". Measured by `python benchmarks/run.py`.")
    if data.get("first_call"):
        md[-1] += ("\nFirst call in a fresh process, after importing numba and the kernel modules "
                   "(cold cache / warm cache): " + "; ".join(
                       f"{n}: {v.get('cold_s', float('nan')):.2f} s / {v.get('warm_s', float('nan')):.2f} s"
                       for n, v in data["first_call"].items())
                   + f"; the imports themselves: "
                     f"{next(iter(data['first_call'].values())).get('import_s', float('nan')):.2f} s.")
    return "\n\n".join(md), sweep


def _bw_text(data, bw):
    if "copy_bandwidths_gbs" in data:
        lo, mid, hi = data["copy_bandwidths_gbs"]
        return f"{lo:.1f} to {hi:.1f} GB/s (median {mid:.1f}) as each piece of the run measured it"
    return f"{bw:.1f} GB/s"


def _one_thread_note(rows):
    rows = [r for r in rows if "one_thread_busy" in r]
    busy = sum(r["one_thread_busy"] for r in rows)
    if not busy:
        return ""
    return (f"; {busy} of the {len(rows)} points that recorded it ran the numba executor in one thread, the machine being busy "
            f"(`numba_setup.enter_run`: 1-minute load above the core count + 0.5)")


def assemble(out):
    """Merge the parts (``--part NAME`` runs) into results.json, the README and the plot:
    a run in pieces on a shared machine, each piece short enough to redo.  Where parts
    measured the same point, the newest wins."""
    parts = sorted(out.glob("partial.*.json"), key=lambda q: q.stat().st_mtime)
    if not parts:
        raise SystemExit(f"no parts in {out} (run with --part NAME first)")
    data = {"sweep": {}, "programs": {}}
    bws = []
    for q in parts:
        d = json.loads(q.read_text())
        for r in d["sweep"]:
            # the copy bandwidth measured by the same process, minutes apart at most: the
            # yardstick of this point's GB/s on a machine whose load keeps changing
            r.setdefault("copy_bandwidth_gbs", d["copy_bandwidth_gbs"])
            data["sweep"][(r["family"], r["layout"], r["size"])] = r
        for r in d["programs"]:
            data["programs"][(r["program"], r["hlo"])] = r
        bws.append(d["copy_bandwidth_gbs"])
        for k in ("dispatch_overhead_us", "run_overhead", "blas", "machine", "openblas_coretype", "first_call"):
            if d.get(k):
                data[k] = d[k]
    data["sweep"] = list(data["sweep"].values())
    data["programs"] = list(data["programs"].values())
    # the yardstick: the best copy any part saw (a loaded moment only lowers it)
    data["copy_bandwidth_gbs"] = max(bws)
    data["copy_bandwidths_gbs"] = [min(bws), statistics.median(bws), max(bws)]
    data["parts"] = [q.name for q in parts]
    (out / "results.json").write_text(json.dumps(data, indent=1))
    text, sweep = render(data)
    plot(sweep, ROOT / "docs" / "images" / "benchmarks.png")
    update_readme(text)
    print(text)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="shorter timing budgets, the reference only once")
    ap.add_argument("--only", action="append", help="run only the families / programs matching (substring)")
    ap.add_argument("--sizes", type=int, default=None, help="only the first N sizes of each family")
    ap.add_argument("--no-programs", action="store_true")
    ap.add_argument("--no-sweep", action="store_true")
    ap.add_argument("--no-readme", action="store_true")
    ap.add_argument("--no-latency", action="store_true")
    ap.add_argument("--part", help="write this run to benchmarks/results/partial.PART.json (a piece of the "
                                   "sweep, for --assemble)")
    ap.add_argument("--assemble", action="store_true",
                    help="merge every partial.*.json into results.json, the README tables and the plot")
    args = ap.parse_args(argv)
    out = ROOT / "benchmarks" / "results"
    out.mkdir(parents=True, exist_ok=True)
    if args.assemble:
        return assemble(out)
    import jax  # noqa: F401  (the sweep is measured against it)
    budget = 0.8 if args.quick else 2.0
    bw = copy_bandwidth()
    blas = blas_info()
    info = machine()
    print(f"machine: {info}; copy bandwidth {bw:.1f} GB/s (read + write); BLAS: {blas}; "
          f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', 'unset')}", flush=True)
    rng = np.random.default_rng(0)
    sweep, programs = {}, {}
    selected = lambda name: not args.only or any(o in name for o in args.only)  # noqa: E731
    all_sizes = sorted({s for _, _, _, sizes in SWEEP.values() for s in sizes})
    if args.sizes:
        all_sizes = all_sizes[:args.sizes]
    for family, (build, layouts, kind, sizes) in ({} if args.no_sweep else SWEEP).items():
        if not selected(family):
            continue
        for layout in layouts:
            points = {}
            ref_per_byte = 0.0  # the reference's time per operand byte at the last size
            for size in sizes:
                if size not in all_sizes:
                    continue
                try:
                    f, fargs = build(layout, size, rng)
                    # the reference where one run is predicted to take under a minute
                    ref = ref_per_byte * size < (15.0 if args.quick else 60.0)
                    r = measure(f, fargs, ref=ref, budget=budget, ref_limit=5.0 if args.quick else 20.0)
                    if r.get("numpy_s"):
                        ref_per_byte = r["numpy_s"] / size
                except Exception as e:  # noqa: BLE001 - a failing point is reported, the others run
                    print(f"{family} [{layout}] {_size_label(size)}: {type(e).__name__}: {str(e)[:200]}", flush=True)
                    continue
                r.update(family=family, layout=layout, size=size)
                points[size] = r
                print(f"{family:28s} {layout:10s} {_size_label(size):>8s}  numba {r['numba_s'] * 1e3:9.3f} ms  "
                      f"jax {r['jax_s'] * 1e3:9.3f} ms  numba/jax {r['numba_over_jax']:5.2f}  "
                      f"ref {r.get('numpy_s', float('nan')) * 1e3:9.1f} ms  {r['numba_gbs']:6.1f} GB/s  "
                      f"load {r['load_average']:.1f}"
                      + ("" if r["agrees_with_jax"] else "  DIFFERS FROM JAX"), flush=True)
            if points:
                sweep[(family, layout)] = points
    for name, build in ({} if args.no_programs else PROGRAMS).items():
        if not selected(name):
            continue
        for hlo, optimized in (("lowered", False), ("optimized", True)):
            try:
                f, fargs = build(np.random.default_rng(1))
                r = measure(f, fargs, optimized=optimized, budget=2 * budget, ref_limit=30.0)
            except Exception as e:  # noqa: BLE001
                print(f"{name} [{hlo}]: {type(e).__name__}: {str(e)[:200]}", flush=True)
                continue
            programs[(name, hlo)] = r
            print(f"{name:28s} {hlo:10s}  numba {r['numba_s'] * 1e3:9.3f} ms  jax {r['jax_s'] * 1e3:9.3f} ms  "
                  f"numba/jax {r['numba_over_jax']:5.2f}  ref {r.get('numpy_s', float('nan')) * 1e3:9.1f} ms  "
                  f"load {r['load_average']:.1f}"
                  + ("" if r["agrees_with_jax"] else "  DIFFERS FROM JAX"), flush=True)
    extra = {"copy_bandwidth_gbs": bw, "dispatch_overhead_us": dispatch_overhead() * 1e6, "blas": blas,
             "machine": info, "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE", "unset")}
    extra["machine"]["load_average_after"] = os.getloadavg()
    print(f"dispatch overhead per op on 8x8: {extra['dispatch_overhead_us']:.1f} us")
    extra["run_overhead"] = run_overhead()
    print("per-run overhead, a + 1 of f32[4,4]: numba {numba_us:.1f} us, jax.jit {jax_us:.1f} us, "
          "numba/jax {numba_over_jax:.2f} (load {load_average:.1f})".format(**extra["run_overhead"]))
    if not args.no_latency:
        extra["first_call"] = {f"{n} [{lay}]": first_call_latency(n, lay) for n, lay in LATENCY_CASES}
        for n, lat in extra["first_call"].items():
            print(f"first call in a fresh process, {n}: {lat}")
    full = not args.only and not args.sizes and not args.no_sweep and not args.no_programs and not args.part
    # a partial run (--only, --sizes, --part ...) leaves the full run's files alone
    name = "results.json" if full else f"partial.{args.part}.json" if args.part else "partial.json"
    data = {"sweep": [r for points in sweep.values() for r in points.values()],
            "programs": [dict(r, program=n, hlo=h) for (n, h), r in programs.items()], **extra}
    (out / name).write_text(json.dumps(data, indent=1))
    text, sweep = render(data, bw)
    if sweep:
        plot(sweep, ROOT / "docs" / "images" / "benchmarks.png" if full else out / "partial.png")
    print()
    print(text)
    if full and not args.no_readme:
        update_readme(text)


if __name__ == "__main__":
    main()
