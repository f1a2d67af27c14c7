#!/usr/bin/env python3
"""Generated convolutions with Inf and NaN inputs on XLA:CPU (jax.jit) and on xla_explorer.

usage:  python scripts/conv_specials_vs_xla.py [--cases 400] [--seed 0] [--lhs-dilation]
                                                [--backends numpy,numba] [--show 5]

Each case is a random ``lax.conv_general_dilated`` (1 to 3 spatial dimensions, padding
negative to wide, strides, lhs and rhs dilation, feature and batch groups, dimension numbers,
f32 mostly, also f64, f16, bf16) whose operands hold small integers and a few Inf, -Inf and
NaN.  XLA:CPU runs it through jax.jit; the same program's HLO (``jax.jit(...).lower``) runs
on each backend.  A case agrees when NaN, +Inf and -Inf sit at the same places and the finite
values are close.  Prints the agreement per backend, overall and for convolutions with lhs
dilation.  The generator is tests/convkit.py (tests/test_fidelity.py runs a few of its cases).
"""
import argparse
import os
import sys
import warnings

warnings.filterwarnings("ignore")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from convkit import agree, case, xla_and_hlo  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lhs-dilation", action="store_true", help="only convolutions with lhs dilation")
    parser.add_argument("--backends", default="numpy")
    parser.add_argument("--show", type=int, default=5, help="print this many disagreements")
    opts = parser.parse_args()
    import xla_explorer as xe
    backends = opts.backends.split(",")
    counts = {b: {"all": [0, 0], "lhs dilation": [0, 0]} for b in backends}
    shown = 0
    for k in range(opts.cases):
        t, kwargs, lhs, rhs = case(opts.seed + k, True if opts.lhs_dilation else None)
        try:
            want, hlo = xla_and_hlo(kwargs, lhs, rhs)
        except Exception as e:  # noqa: BLE001 - XLA refuses it: not a case
            print(f"SKIP {opts.seed + k}: {str(e).splitlines()[0][:120]}")
            continue
        comp = xe.parse_hlo(hlo)
        for b in backends:
            try:
                ok = agree(comp.run(lhs, rhs, backend=b), want)
            except Exception as e:  # noqa: BLE001 - counted as a disagreement
                ok = False
                print(f"ERROR {b} {opts.seed + k}: {type(e).__name__}: {e}")
            keys = ["all"] + (["lhs dilation"] if any(d > 1 for d in kwargs["lhs_dilation"]) else [])
            for key in keys:
                counts[b][key][0] += ok
                counts[b][key][1] += 1
            if not ok and shown < opts.show:
                shown += 1
                print(f"DIFF {b} seed {opts.seed + k} {t} lhs{lhs.shape} rhs{rhs.shape} {kwargs}")
    for b in backends:
        print(b, "  ".join(f"{key}: {ok}/{n} ({100 * ok / max(n, 1):.1f}%)" for key, (ok, n) in counts[b].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
