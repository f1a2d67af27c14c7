#!/usr/bin/env python3
"""Ops on operands with denormals on XLA:CPU (jax.jit) and on xla_explorer, element by element.

usage:  python scripts/denormals_vs_xla.py [--backends numpy,numba] [--types f32,f64,bf16,c64,c128]
                                           [--ops cbrt,atan2] [--show 3]

Each op runs on vectors of denormals of both signs, zeros, the smallest normals, ordinary
numbers, Inf and NaN (every pair of them for binary ops), passed at run time (XLA:CPU flushes
them as it does in a program; constants would be folded by its evaluator, which does not).
The same program's HLO (``jax.jit(...).lower``) runs on each backend in the default
``denormals="flush"`` mode.  An element agrees when its bits are equal (a zero's sign
included), both are NaN, or both are normal numbers within 4 ulps (XLA's polynomial exp,
log, ... are not NumPy's).  Prints, per op and type, the elements that agree.  The operands
and the comparison are tests/denormkit.py.
"""
import argparse
import os
import sys
import warnings

import numpy as np

warnings.filterwarnings("ignore")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from denormkit import COMPLEX, REAL, ops, pairs, run_xla, same, values  # noqa: E402

def run_case(name, t, backends):
    """{backend: (agreeing elements, elements)} of op ``name`` on type ``t``."""
    import xla_explorer as xe
    types, arity, f = ops()[name]
    args = (values(t),) if arity == 1 else pairs(t)
    args = tuple(a.copy() for a in args)
    if name == "argsort":   # finite values only: a NaN's place is an implementation choice
        args = (args[0][np.isfinite(args[0].astype(np.float64))],)
    want, hlo = run_xla(f, *args)
    comp = xe.parse_hlo(hlo)
    out = {}
    for b in backends:
        try:
            got = comp.run(*args, backend=b)
            ok = same(got, np.asarray(want))
            out[b] = (int(ok.sum()), int(ok.size), got, np.asarray(want), args)
        except Exception as e:  # noqa: BLE001 - counted as a disagreement
            out[b] = (0, int(np.asarray(want).size), f"{type(e).__name__}: {e}", np.asarray(want), args)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backends", default="numpy")
    parser.add_argument("--types", default=",".join(REAL + COMPLEX))
    parser.add_argument("--ops", default="")
    parser.add_argument("--show", type=int, default=3, help="print this many differing elements per op")
    opts = parser.parse_args()
    backends = opts.backends.split(",")
    names = opts.ops.split(",") if opts.ops else list(ops())
    total = {b: [0, 0] for b in backends}
    for name in names:
        types = ops()[name][0]
        for t in opts.types.split(","):
            if t not in types:
                continue
            try:
                res = run_case(name, t, backends)
            except Exception as e:  # noqa: BLE001 - XLA refuses it
                print(f"SKIP {name} {t}: {str(e).splitlines()[0][:100]}")
                continue
            line, diffs = [], []
            for b, (ok, n, got, want, args) in res.items():
                total[b][0] += ok
                total[b][1] += n
                line.append(f"{b} {ok}/{n}")
                if ok < n and opts.show:
                    if isinstance(got, str):
                        diffs.append(f"   {b}: {got[:200]}")
                        continue
                    bad = np.flatnonzero(~same(got, want))[:opts.show]
                    for i in bad:
                        ins = ", ".join(repr(a.ravel()[i]) if a.size == want.size else "..." for a in args)
                        diffs.append(f"   {b} {name}({ins}) = {got.ravel()[i]!r}, XLA {want.ravel()[i]!r}")
            print(f"{name:14s} {t:5s} " + "  ".join(line) + ("" if all(r[0] == r[1] for r in res.values())
                                                           else "   <--"))
            for d in diffs:
                print(d)
    for b, (ok, n) in total.items():
        print(f"{b}: {ok}/{n} elements agree ({100 * ok / max(n, 1):.2f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
