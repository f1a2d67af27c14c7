"""What tracing costs the NumPy reference: a plain run against ``comp.trace`` (keeping
every value, and keeping one instruction's), in one process, interleaved.

    python benchmarks/trace_overhead.py [--iterations 2000]

The workload is a while loop of scalar updates (the reference's worst case: tiny
instructions, so per-instruction bookkeeping shows).  An untraced run pays one ``is
None`` test per instruction; the ratios say what the trace adds when it is asked for.
Timings are not tests.
"""
import argparse
import pathlib
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import xla_explorer as xe  # noqa: E402


def loop(iterations):
    b = xe.XlaBuilder("loop")
    state = xe.Parameter(b, 0, xe.Shape.parse("(s32[], f32[4])"), "state")

    def cond(s):
        return xe.Lt(xe.GetTupleElement(s, 0), xe.Constant(s.builder, np.int32(iterations)))

    def body(s):
        i, x = xe.GetTupleElement(s, 0), xe.GetTupleElement(s, 1)
        y = xe.Add(xe.Mul(x, xe.Constant(s.builder, np.float32(1.0001))), xe.Constant(s.builder, np.float32(1)))
        return xe.Tuple(xe.Add(i, xe.Constant(s.builder, np.int32(1))), y)

    return b.build(xe.While(cond, body, state))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    comp = loop(args.iterations)
    arg = (np.int32(0), np.ones(4, np.float32))
    body_add = next(i.name for c in comp.computations for i in c.instructions
                    if i.opcode == "add" and i.shape.element_type == "f32")
    runs = {"run": lambda: comp.run(arg),
            "trace (keep all)": lambda: comp.trace(arg),
            "trace (keep one)": lambda: comp.trace(arg, keep=[body_add])}
    times = {k: [] for k in runs}
    for _ in range(args.repeats):
        for name, fn in runs.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    base = statistics.median(times["run"])
    records = len(comp.trace(arg).records)
    print(f"{records} instructions executed per run")
    for name, ts in times.items():
        m = statistics.median(ts)
        print(f"{name:18} {m * 1e3:8.1f} ms  {m / base:5.2f}x the plain run  {m / records * 1e6:6.2f} us/instruction")


if __name__ == "__main__":
    main()
