"""How fast the graph of a big program arrives: time to the first picture, and per expansion.

    python benchmarks/graph_bench.py [--quick] [--no-readme] [--sizes 2,8,32]

The programs are the gradients of small transformers from JAX (``jax.grad`` of a loss
through N layers of attention, an MLP and a normalisation, each layer in its own
``jax.named_scope``), imported as JAX lowers them and as XLA:CPU optimizes them (fusions),
from ~300 to ~10,000 instructions.  For each: the time of ``comp.graph().svg()`` (building
the hierarchy and the picture, and Graphviz's layouts: the first picture is laid out again
with fewer groups open while it is wider than a notebook), the number of nodes drawn, the
picture's width in points (at most 720 fits JupyterLab's default output area), and the
time of ``graph.expand(group).svg()`` for the three biggest closed groups of the first
picture.  For the smallest program it also times the whole graph, every group open (what
``comp.graph()`` drew before groups existed).

Wall-clock seconds are what a user waits; "cpu" adds this process's and Graphviz's CPU
time, steadier on a busy machine.  Writes benchmarks/results/graph.json,
docs/images/graph_bench.png and the table in README.md between the
``<!-- graph-bench -->`` markers.  Timings are not tests.
"""
import argparse
import json
import os
import pathlib
import platform
import resource
import statistics
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import xla_explorer as xe  # noqa: E402
from xla_explorer.render import dot as _dot  # noqa: E402

#: layers of the lowered and the optimized programs (~300 to ~10,000 instructions)
SIZES = {"lowered": (2, 6, 20, 70), "optimized": (1, 3, 10, 32)}
QUICK = {"lowered": (2, 6), "optimized": (1,)}
GOALS = {"first picture": 5.0, "expansion": 2.0}
#: seconds given to Graphviz for the whole graph of the smallest programs
WHOLE_TIMEOUT = 120


def transformer_grad(layers, optimized, width=64, tokens=16):
    """``jax.grad`` of a transformer-like loss with ``layers`` layers, as an XlaComputation."""
    import jax
    import jax.numpy as jnp

    def loss(params, x):
        h = x
        for i, (wq, wk, wv, w1, w2) in enumerate(params):
            with jax.named_scope(f"layer{i}"):
                with jax.named_scope("attention"):
                    q, k, v = h @ wq, h @ wk, h @ wv
                    h = h + jax.nn.softmax(q @ k.T / np.sqrt(width), axis=-1) @ v
                with jax.named_scope("mlp"):
                    h = h + jnp.tanh(jax.nn.relu(h @ w1) @ w2)
                with jax.named_scope("norm"):
                    h = (h - h.mean(-1, keepdims=True)) / jnp.sqrt(h.var(-1, keepdims=True) + 1e-5)
        return jnp.mean(h ** 2)

    rng = np.random.default_rng(0)
    params = [tuple((rng.normal(size=(width, width)) / np.sqrt(width)).astype(np.float32) for _ in range(5))
              for _ in range(layers)]
    x = rng.normal(size=(tokens, width)).astype(np.float32)
    lowered = jax.jit(jax.grad(loss)).lower(params, x)
    return xe.from_jax(lowered, optimized=optimized)


class Clock:
    """Wall time and CPU time (this process and the children it waited for: ``dot``)."""

    def __enter__(self):
        self.wall, self.cpu = time.perf_counter(), self._cpu()
        return self

    def __exit__(self, *exc):
        self.wall = time.perf_counter() - self.wall
        self.cpu = self._cpu() - self.cpu

    @staticmethod
    def _cpu():
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        return time.process_time() + kids.ru_utime + kids.ru_stime


def measure(comp, whole=False):
    from xla_explorer.render import graph as _graph
    _dot._CACHE.clear()
    _graph._HIERARCHIES.clear()  # a module's groups are found once: time the first time
    n = sum(len(c.instructions) for c in comp.computations)
    with Clock() as first:
        graph = comp.graph()
        svg = graph.svg()
    _graph._HIERARCHIES.clear()
    with Clock() as model:
        comp.graph()
    row = {"instructions": n, "computations": len(comp.computations), "first_s": first.wall,
           "first_cpu_s": first.cpu, "model_s": model.wall, "nodes": len(graph.nodes),
           "edges": len(graph.edges), "svg_kb": len(svg) / 1024, "width_pt": graph.width_pt()}
    closed = {k for node in graph.nodes for k in node.toggles if k not in graph.opened}
    biggest = sorted(closed, key=lambda k: -graph.hierarchy.group(k).size)[:3]
    times, cpus, sizes = [], [], []
    for key in biggest:
        with Clock() as c:
            opened = graph.expand(key)
            opened.svg()
        times.append(c.wall)
        cpus.append(c.cpu)
        sizes.append(len(opened.nodes))
    if times:
        row.update(expand_s=statistics.median(times), expand_max_s=max(times), expand_cpu_s=statistics.median(cpus),
                   expanded_nodes=max(sizes))
    if whole:  # every group open: one node per instruction, as before groups existed
        import subprocess
        try:
            with Clock() as c:
                source = comp.graph(expand="all").source
                subprocess.run(["dot", "-Tsvg"], input=source.encode(), capture_output=True, timeout=WHOLE_TIMEOUT)
            row["whole_s"] = c.wall
        except subprocess.TimeoutExpired:
            row["whole_s"] = None  # did not finish
    return row


def table(rows):
    lines = ["| program | instructions | computations | first picture (s) | nodes drawn | width (pt) | "
             "expand a group (s, median / max of 3) |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        exp = f"{r['expand_s']:.2f} / {r['expand_max_s']:.2f}" if "expand_s" in r else "—"
        layers = f"{r['layers']} layer" + ("s" if r["layers"] != 1 else "")
        lines.append(f"| {r['program']}, {layers} | {r['instructions']:,} | {r['computations']} | "
                     f"{r['first_s']:.2f} | {r['nodes']} | {r.get('width_pt', float('nan')):,.0f} | {exp} |")
    return "\n".join(lines)


def plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4), dpi=110)
    for program, marker in (("lowered", "o"), ("optimized", "s")):
        rs = sorted((r for r in rows if r["program"] == program), key=lambda r: r["instructions"])
        if not rs:
            continue
        x = [r["instructions"] for r in rs]
        ax.plot(x, [r["first_s"] for r in rs], marker=marker, label=f"first picture ({program})")
        ax.plot(x, [r.get("expand_s", np.nan) for r in rs], marker=marker, linestyle="--",
                label=f"expand a group ({program})")
    for what, goal in GOALS.items():
        ax.axhline(goal, color="grey", linewidth=0.8, linestyle=":")
        ax.annotate(f"goal: {what} ≤ {goal:g} s", (0.01, goal), xycoords=("axes fraction", "data"),
                    fontsize=9, color="dimgrey", va="bottom")
    for r in rows:
        if "whole_s" in r:
            said = f"{r['whole_s']:.1f} s" if r["whole_s"] is not None else f"not done in {WHOLE_TIMEOUT} s"
            ax.annotate(f"every node drawn, expand='all' ({r['program']}, {r['instructions']}): {said}",
                        (0.99, 0.62 if r["program"] == "lowered" else 0.55), xycoords="axes fraction",
                        ha="right", fontsize=8, color="dimgrey")
    ax.set_xscale("log")
    ax.set_xlabel("instructions in the module")
    ax.set_ylabel("seconds (wall clock)")
    ax.set_title("comp.graph() of jax.grad(transformer): time to SVG")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(0.0, 0.9))
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def update_readme(text):
    readme = ROOT / "README.md"
    content = readme.read_text()
    start, end = "<!-- graph-bench -->", "<!-- /graph-bench -->"
    if start not in content or end not in content:
        print("README.md has no <!-- graph-bench --> markers: table not written", file=sys.stderr)
        return
    head, rest = content.split(start, 1)
    _, tail = rest.split(end, 1)
    readme.write_text(head + start + "\n" + text + "\n" + end + tail)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the two smallest sizes only")
    parser.add_argument("--no-readme", action="store_true")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "graph.json"))
    parser.add_argument("--replot", action="store_true", help="redraw the plot and table from --out, no run")
    opts = parser.parse_args(argv)
    if opts.replot:
        saved = json.loads(pathlib.Path(opts.out).read_text())
        return report(saved["rows"], saved["machine"], readme=not opts.no_readme)
    sizes = QUICK if opts.quick else SIZES
    rows = []
    for program, layer_counts in sizes.items():
        for i, layers in enumerate(layer_counts):
            with Clock() as imported:
                comp = transformer_grad(layers, optimized=program == "optimized")
            row = measure(comp, whole=i == 0)
            row.update(program=program, layers=layers, import_s=imported.wall)
            rows.append(row)
            print(f"{program:9} {layers:3} layers {row['instructions']:6,} instructions: first picture "
                  f"{row['first_s']:.2f} s (cpu {row['first_cpu_s']:.2f}, model {row['model_s']:.2f}), "
                  f"{row['nodes']} nodes; expand {row.get('expand_s', float('nan')):.2f} s"
                  + (f"; whole graph {row['whole_s']} s" if "whole_s" in row else ""), flush=True)
    machine = f"{os.cpu_count()} cores, {platform.machine()}, load {os.getloadavg()[0]:.1f} at the end"
    out = pathlib.Path(opts.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"machine": machine, "rows": rows}, indent=1))
    report(rows, machine, readme=not opts.no_readme and not opts.quick)


def report(rows, machine, readme=True):
    """The plot (docs/images/graph_bench.png), the table, and the README's copy of it."""
    image = ROOT / "docs" / "images" / "graph_bench.png"
    plot(rows, image)
    text = table(rows)
    whole = [r for r in rows if "whole_s" in r]
    if whole:
        text += "\n\nThe whole graph of the smallest programs, every group open (`expand=\"all\"`, one box per instruction): " + \
            ", ".join(f"{r['instructions']:,} instructions " +
                      (f"{r['whole_s']:.1f} s" if r["whole_s"] is not None else f"not done in {WHOLE_TIMEOUT} s")
                      for r in whole) + "."
    text += f"\n\nMeasured by `python benchmarks/graph_bench.py` on {machine}."
    print(text)
    if readme:
        update_readme(text)


if __name__ == "__main__":
    main()
