"""One element-wise op at a time, each against ``jax.jit`` of the same function.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/elementwise_survey.py [--f64] [NAME ...]

``other_layouts.py`` measures workloads as programs use them; this lists the element-wise
ops XLA has (transcendentals, integer and bit ops, conversions, complex arithmetic, narrow
floats) one by one on 2M elements, so that an op whose code is a library call an element
where XLA's vectorises shows as the outlier it is (the 7 Dec survey found f32 ``erf`` at 25x
JAX's time, c64 ``abs`` at 36x).  ``--f64``: the float ops in f64 (``jax_enable_x64``).
Interleaved medians (``run.interleaved``), compile excluded; results checked against JAX's
(``run._same``).  Timings are not tests.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import against_jax  # noqa: E402  (puts the repository first on sys.path)


N = 1 << 21


def cases(f64):
    import jax
    import jax.numpy as jnp
    from jax import lax
    rng = np.random.default_rng(0)
    ft = np.float64 if f64 else np.float32
    x = rng.standard_normal(N).astype(ft)
    pos = np.abs(x) + ft(0.1)
    unit = np.clip(x, -0.9, 0.9)
    out = {
        "exp": (jnp.exp, [x]), "expm1": (jnp.expm1, [x]), "log": (jnp.log, [pos]), "log1p": (jnp.log1p, [pos]),
        "tanh": (jnp.tanh, [x]), "logistic": (jax.nn.sigmoid, [x]), "erf": (lax.erf, [x]),
        "erf_inv": (lax.erf_inv, [unit]), "sin": (jnp.sin, [x]), "cos": (jnp.cos, [x]), "tan": (jnp.tan, [x]),
        "atan": (jnp.arctan, [x]), "atan2": (lambda a: jnp.arctan2(a, 1.5), [x]), "asin": (jnp.arcsin, [unit]),
        "acos": (jnp.arccos, [unit]), "atanh": (jnp.arctanh, [unit]), "sinh": (jnp.sinh, [x]),
        "cosh": (jnp.cosh, [x]), "cbrt": (jnp.cbrt, [x]), "pow": (lambda a: a ** 1.7, [pos]),
        "sqrt": (jnp.sqrt, [pos]), "rsqrt": (lax.rsqrt, [pos]), "lgamma": (lax.lgamma, [pos]),
        "digamma": (lax.digamma, [pos]), "round": (jnp.round, [x]), "sign": (jnp.sign, [x]),
        "nextafter": (lambda a: jnp.nextafter(a, ft(1)), [x]), "remainder": (lambda a: a % ft(0.7), [x]),
        "is_finite": (jnp.isfinite, [x]), "maximum": (jnp.maximum, [x, x[::-1].copy()]),
    }
    if f64:
        return out
    i32 = rng.integers(-1000, 1000, N).astype(np.int32)
    c = (x + 1j * x[::-1]).astype(np.complex64)
    out.update({
        "s32 divide by 7": (lambda a: a // 7, [i32]), "s32 remainder by 13": (lambda a: a % 13, [i32]),
        "u32 divide by 7": (lambda a: a // np.uint32(7), [np.abs(i32).astype(np.uint32)]),
        "popcnt": (lax.population_count, [i32]), "clz": (lax.clz, [i32]),
        "u32 rotate by 13": (lambda a: (a << np.uint32(13)) | (a >> np.uint32(19)), [i32.astype(np.uint32)]),
        "s32 shift by a variable amount": (lambda a, b: (a << (b & 31)) ^ (a >> (b & 7)), [i32, i32[::-1].copy()]),
        "u8 shift left by 3": (lambda a: a << np.uint8(3), [i32.astype(np.uint8)]),
        "f32 -> f16": (lambda a: a.astype(jnp.float16), [x]), "s32 -> f32": (lambda a: a.astype(jnp.float32), [i32]),
        "bf16 exp": (jnp.exp, [x.astype(jnp.bfloat16)]), "bf16 tanh": (jnp.tanh, [x.astype(jnp.bfloat16)]),
        "f16 exp": (jnp.exp, [x.astype(np.float16)]),
        "c64 abs": (jnp.abs, [c]), "c64 exp": (jnp.exp, [c]), "c64 multiply": (lambda a: a * a[::-1], [c]),
        "c64 divide": (lambda a: a / (a + 1), [c]),
        "jnp.select of 2 conditions": (lambda a: jnp.select([a > 1, a < -1], [a, -a], 0.0), [x]),
    })
    return out


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    f64 = "--f64" in argv
    only = [a for a in argv if a != "--f64"]
    import jax
    if f64:
        jax.config.update("jax_enable_x64", True)
    rows = []
    for name, (f, args) in cases(f64).items():
        if only and not any(o in name for o in only):
            continue
        try:
            n, j, agrees = against_jax(f, args, budget=1.0)
        except Exception as e:  # noqa: BLE001 - a failing op is reported, the others run
            print(f"{name}: {type(e).__name__}: {str(e)[:200]}", flush=True)
            continue
        rows.append((name, n, j, agrees))
        print(f"{name:30s} numba {n * 1e3:8.3f} ms  jax {j * 1e3:8.3f} ms  numba/jax {n / j:6.2f}"
              + ("" if agrees else "  DIFFERS FROM JAX"), flush=True)
    print(f"\n| op ({'f64' if f64 else 'f32 unless named'}, 2M elements) | numba | JAX | numba/JAX |\n|---|---|---|---|")
    for name, n, j, agrees in sorted(rows, key=lambda r: -r[1] / r[2]):
        ratio = f"**{n / j:.2f}**" if n > j else f"{n / j:.2f}"
        print(f"| {name} | {n * 1e3:.2f} ms | {j * 1e3:.2f} ms | {ratio}{'' if agrees else ' (differs)'} |")
    if rows:
        print(f"\n{sum(r[1] > r[2] for r in rows)} of {len(rows)} above 1.0; load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
