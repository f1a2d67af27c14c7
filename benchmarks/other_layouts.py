"""Workloads beyond the sweep's: other layouts, ranks and ops that real programs use.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/other_layouts.py [NAME ...]

``benchmarks/run.py`` sweeps each op family along its minor and one major dimension; the
issue is judged on layouts it does not show too.  This runs a fixed list of other shapes
(middle dimensions of rank-3 arrays, several reduced dimensions, 1-D windows, NHWC
pooling, matrix-vector products, grouped convolutions, scatters of single elements, bf16,
f16 and complex element-wise ops, activations, loops and scans, batching-dimension
gathers) from the HLO JAX lowers them to, each interleaved with ``jax.jit`` of the same
function as ``run.py`` does (compile excluded, medians), and prints numba/JAX per workload
with the 1-minute load average, and a Markdown table at the end.  Names on the command
line select workloads by substring.  Results are checked against JAX's (``run._same``).
Timings are not tests.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import against_jax  # noqa: E402  (puts the repository first on sys.path)



def workloads(rng):
    import jax
    import jax.numpy as jnp
    from jax import lax

    def f32(*s):
        return rng.standard_normal(s, dtype=np.float32)

    def ints(n, high):
        return rng.integers(0, high, n).astype(np.int32)

    conv = lax.conv_general_dilated

    def _rnn(h, xs, w):
        def step(h, x):
            h = jnp.tanh(h @ w + x)
            return h, h
        return lax.scan(step, h, xs)[1]

    def _rnn_vector(h, xs, w):
        def step(h, x):
            h = jnp.tanh(w @ h + x)
            return h, h
        return lax.scan(step, h, xs)[1]

    def _lstm(xs, wx, wh, b):
        def step(c, x):
            h, cell = c
            i, f, g, o = jnp.split(x @ wx + h @ wh + b, 4, axis=-1)
            cell = jax.nn.sigmoid(f) * cell + jax.nn.sigmoid(i) * jnp.tanh(g)
            h = jax.nn.sigmoid(o) * jnp.tanh(cell)
            return (h, cell), h
        z = jnp.zeros((xs.shape[1], wh.shape[0]), xs.dtype)
        return lax.scan(step, (z, z), xs)[1]

    def _mlp_train(w1, w2, x, y):
        def loss(p):
            h = jax.nn.relu(x @ p[0])
            return jnp.mean(jax.nn.log_softmax(h @ p[1]) * y)

        def body(i, p):
            g = jax.grad(loss)(p)
            return jax.tree_util.tree_map(lambda a, b: a - 0.01 * b, p, g)
        return lax.fori_loop(0, 50, body, (w1, w2))[0]

    return {
        "reduce sum, middle dimension of [64,256,64]": (lambda x: x.sum(axis=1), [f32(64, 256, 64)]),
        "reduce sum of everything, [1024,1024]": (lambda x: x.sum(), [f32(1024, 1024)]),
        "reduce max over dimensions 0 and 2 of [64,128,128]": (lambda x: x.max(axis=(0, 2)), [f32(64, 128, 128)]),
        "mean over batch and space, NCHW [16,64,32,32]": (lambda x: x.mean(axis=(0, 2, 3)), [f32(16, 64, 32, 32)]),
        "transpose [64,128,128] -> (2,1,0)": (lambda x: jnp.transpose(x, (2, 1, 0)), [f32(64, 128, 128)]),
        "transpose NHWC -> NCHW [32,64,64,16]": (lambda x: jnp.transpose(x, (0, 3, 1, 2)), [f32(32, 64, 64, 16)]),
        "cumsum, middle dimension of [64,256,64]": (lambda x: jnp.cumsum(x, axis=1), [f32(64, 256, 64)]),
        "sort along the major dimension of [4096,256]": (lambda x: jnp.sort(x, axis=0), [f32(4096, 256)]),
        "argmax, middle dimension of [64,256,64]": (lambda x: jnp.argmax(x, axis=1), [f32(64, 256, 64)]),
        "moving sum, 1-D window 5 stride 1, [1M]": (
            lambda x: lax.reduce_window(x, 0.0, lax.add, (5,), (1,), "VALID"), [f32(1 << 20)]),
        "max-pool 2x2/2 NHWC [16,64,64,32]": (
            lambda x: lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID"),
            [f32(16, 64, 64, 32)]),
        "sum-pool 3x3/1 SAME NCHW [16,32,64,64]": (
            lambda x: lax.reduce_window(x, 0.0, lax.add, (1, 1, 3, 3), (1, 1, 1, 1), "SAME"), [f32(16, 32, 64, 64)]),
        "matrix-vector [2048,2048] @ [2048]": (lambda a, v: a @ v, [f32(2048, 2048), f32(2048)]),
        "row vector-matrix [1,512] @ [512,512]": (lambda a, b: a @ b, [f32(1, 512), f32(512, 512)]),
        "batched dot [32,256,256] x [32,256,256]": (
            lambda a, b: jnp.einsum("bij,bjk->bik", a, b), [f32(32, 256, 256), f32(32, 256, 256)]),
        "conv NHWC 3x3 SAME [8,64,64,32] * [3,3,32,64]": (
            lambda x, w: conv(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")),
            [f32(8, 64, 64, 32), f32(3, 3, 32, 64)]),
        "conv 1-D NWC width 5 [16,1024,64] * [5,64,64]": (
            lambda x, w: conv(x, w, (1,), "SAME", dimension_numbers=("NWC", "WIO", "NWC")),
            [f32(16, 1024, 64), f32(5, 64, 64)]),
        "depthwise conv NHWC 3x3 [8,64,64,32]": (
            lambda x, w: conv(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"),
                              feature_group_count=32), [f32(8, 64, 64, 32), f32(3, 3, 1, 32)]),
        "gather 2M elements x[i, j] of [2048,2048]": (
            lambda x, i, j: x[i, j], [f32(2048, 2048), ints(2_000_000, 2048), ints(2_000_000, 2048)]),
        "scatter-add of 1M single elements into [1M]": (
            lambda x, i, u: x.at[i].add(u), [f32(1 << 20), ints(1 << 20, 1 << 20), f32(1 << 20)]),
        "embedding lookup, 4096 rows of [50000,128]": (lambda t, i: t[i], [f32(50000, 128), ints(4096, 50000)]),
        "pad with interior padding, middle dimension of [64,256,64]": (
            lambda x: lax.pad(x, np.float32(0), [(0, 0, 0), (2, 3, 1), (0, 0, 0)]), [f32(64, 256, 64)]),
        "concatenate 3 along the middle dimension, [64,128,64]": (
            lambda a, b, c: jnp.concatenate([a, b, c], axis=1), [f32(64, 128, 64) for _ in range(3)]),
        "layer norm [4096,512]": (
            lambda x: (x - x.mean(-1, keepdims=True)) / jnp.sqrt(x.var(-1, keepdims=True) + 1e-5), [f32(4096, 512)]),
        "GELU (tanh form) [4M]": (lambda x: jax.nn.gelu(x), [f32(1 << 22)]),
        "s32 row sums [2048,2048]": (lambda x: x.sum(axis=1), [rng.integers(-100, 100, (2048, 2048)).astype(np.int32)]),
        "bf16 add [2048,2048]": (
            lambda x, y: x + y, [f32(2048, 2048).astype(jnp.bfloat16), f32(2048, 2048).astype(jnp.bfloat16)]),
        # added 2 Dec 2026: transcendental activations, f16 and complex, loops, and index
        # patterns JAX's own library functions emit (calls, batching-dimension gathers)
        "softplus [4M]": (jax.nn.softplus, [f32(1 << 22)]),
        "GELU (erf form) [4M]": (lambda x: jax.nn.gelu(x, approximate=False), [f32(1 << 22)]),
        "SiLU [4M]": (jax.nn.silu, [f32(1 << 22)]),
        "log(|x| + 1) [4M]": (lambda x: jnp.log(jnp.abs(x) + 1), [f32(1 << 22)]),
        "where(x > 0, x, y) [4M]": (lambda x, y: jnp.where(x > 0, x, y), [f32(1 << 22), f32(1 << 22)]),
        "f16 multiply [4M]": (lambda x, y: x * y, [f32(1 << 22).astype(np.float16), f32(1 << 22).astype(np.float16)]),
        "f16 row means [2048,2048]": (lambda x: x.mean(axis=1), [f32(2048, 2048).astype(np.float16)]),
        "c64 multiply [1M]": (lambda x, y: x * y, [(f32(1 << 20) + 1j * f32(1 << 20)).astype(np.complex64),
                                                  (f32(1 << 20) + 1j * f32(1 << 20)).astype(np.complex64)]),
        "f32 -> s32 convert [4M]": (lambda x: (x * 100).astype(jnp.int32), [f32(1 << 22)]),
        "fori_loop of 100 steps on [1024]": (lambda x: lax.fori_loop(0, 100, lambda i, c: c * 0.99 + 1.0, x),
                                            [f32(1024)]),
        "RNN scan, 64 steps of tanh(h @ W + x) [32,128]": (_rnn, [f32(32, 128), f32(64, 32, 128), f32(128, 128) * 0.1]),
        "RNN scan, one sequence, 128 steps of tanh(W @ h + x) [256]": (
            _rnn_vector, [f32(256), f32(128, 256), f32(256, 256) * 0.05]),
        "moving-average scan, 1000 steps of [256], stacked maxima": (
            lambda c, xs: lax.scan(lambda c, x: (c * 0.9 + x * 0.1, jnp.maximum(c, x)), c, xs)[1],
            [f32(256), f32(1000, 256)]),
        "gradient descent, 200 steps of least squares [512,32]": (
            lambda w, x, y: lax.fori_loop(0, 200, lambda i, w: w - 0.01 * x.T @ (x @ w - y) / 512, w),
            [np.zeros(32, np.float32), f32(512, 32), f32(512)]),
        "logistic regression, 200 steps [512,32]": (
            lambda w, x, y: lax.fori_loop(
                0, 200, lambda i, w: w - 0.1 * x.T @ (jax.nn.sigmoid(x @ w) - (y > 0)) / 512, w),
            [np.zeros(32, np.float32), f32(512, 32), f32(512)]),
        "MLP training loop, 50 SGD steps, [128,32] -> 64 -> 10": (
            _mlp_train, [f32(32, 64) * 0.1, f32(64, 10) * 0.1, f32(128, 32), f32(128, 10)]),
        "LSTM scan, 32 steps, batch 16, 64 in, 128 hidden": (
            _lstm, [f32(32, 16, 64), f32(64, 512) * 0.1, f32(128, 512) * 0.1, f32(512) * 0.1]),
        "take_along_axis, 64 of each row of [2048,2048]": (
            lambda x, i: jnp.take_along_axis(x, i, axis=1),
            [f32(2048, 2048), rng.integers(0, 2048, (2048, 64)).astype(np.int32)]),
        "small batched dot [4096,8,8] x [4096,8,8]": (
            lambda a, b: jnp.einsum("bij,bjk->bik", a, b), [f32(4096, 8, 8), f32(4096, 8, 8)]),
        "transposed conv (lhs dilation 2) NHWC [8,32,32,32] * [3,3,32,32]": (
            lambda x, w: conv(x, w, (1, 1), [(1, 2), (1, 2)], lhs_dilation=(2, 2),
                              dimension_numbers=("NHWC", "HWIO", "NHWC")), [f32(8, 32, 32, 32), f32(3, 3, 32, 32)]),
        "max-pool 3x3/2 NCHW [32,64,64,64]": (
            lambda x: lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, 3, 3), (1, 1, 2, 2), "VALID"),
            [f32(32, 64, 64, 64)]),
        "segment_sum of 1M into 1000": (lambda d, s: jax.ops.segment_sum(d, s, 1000), [f32(1 << 20), ints(1 << 20, 1000)]),
        # added 3 Dec 2026: ops real JAX programs emit that the lists above lack: sorts that
        # return indices, scans along the minor dimension, one-hot, integer and u8 arithmetic,
        # dynamic slices, rolls, strided slices, pred reductions, RNG, control flow, vmap
        "argsort rows of [1024,1024]": (lambda x: jnp.argsort(x, axis=-1), [f32(1024, 1024)]),
        "top_k 8 of each row of [4096,1024]": (lambda x: lax.top_k(x, 8)[0], [f32(4096, 1024)]),
        "cumsum, minor dimension of [2048,2048]": (lambda x: jnp.cumsum(x, axis=1), [f32(2048, 2048)]),
        "cummax, minor dimension of [2048,2048]": (lambda x: lax.cummax(x, axis=1), [f32(2048, 2048)]),
        "one_hot of 16384 labels into 1000": (lambda i: jax.nn.one_hot(i, 1000), [ints(16384, 1000)]),
        "clip [4M]": (lambda x: jnp.clip(x, -0.5, 0.5), [f32(1 << 22)]),
        "softmax along axis 0 of [2048,2048]": (lambda x: jax.nn.softmax(x, axis=0), [f32(2048, 2048)]),
        "log_softmax [4096,512]": (lambda x: jax.nn.log_softmax(x, axis=-1), [f32(4096, 512)]),
        "f32 -> bf16 -> f32 round trip [4M]": (lambda x: x.astype(jnp.bfloat16).astype(jnp.float32), [f32(1 << 22)]),
        "s32 multiply-add [4M]": (lambda a, b: a * b + 7, [ints(1 << 22, 1 << 16), ints(1 << 22, 1 << 16)]),
        "s32 shifts and bitwise [4M]": (lambda a: ((a << 3) ^ (a >> 2)) & 0x7FFF, [ints(1 << 22, 1 << 30)]),
        "u8 image normalise [32,224,224,3]": (
            lambda x: (x.astype(jnp.float32) / 255.0 - 0.5) / 0.25,
            [rng.integers(0, 256, (32, 224, 224, 3)).astype(np.uint8)]),
        "dynamic_slice [512,2048] of [4096,2048]": (
            lambda x, i: lax.dynamic_slice(x, (i, 0), (512, 2048)), [f32(4096, 2048), np.int32(1000)]),
        "dynamic_update_slice [512,2048] into [4096,2048]": (
            lambda x, u, i: lax.dynamic_update_slice(x, u, (i, 0)), [f32(4096, 2048), f32(512, 2048), np.int32(1000)]),
        "roll by 3 along the minor dimension of [2048,2048]": (lambda x: jnp.roll(x, 3, axis=1), [f32(2048, 2048)]),
        "broadcast row + tile, [2048,2048] + [2048]": (
            lambda x, b: x + jnp.tile(b, (2048, 1)), [f32(2048, 2048), f32(2048)]),
        "any / all of x > 0 rows of [2048,2048]": (
            lambda x: jnp.any(x > 3, axis=1) | ~jnp.all(x > -3, axis=1), [f32(2048, 2048)]),
        "argmin rows of [2048,2048]": (lambda x: jnp.argmin(x, axis=1), [f32(2048, 2048)]),
        "avg-pool 2x2/2 NCHW [16,64,64,64]": (
            lambda x: lax.reduce_window(x, 0.0, lax.add, (1, 1, 2, 2), (1, 1, 2, 2), "VALID") / 4,
            [f32(16, 64, 64, 64)]),
        "strided slice x[:, ::2] of [2048,2048]": (lambda x: x[:, ::2], [f32(2048, 2048)]),
        "reverse the minor dimension of [2048,2048]": (lambda x: x[:, ::-1], [f32(2048, 2048)]),
        "iota mod 7 + x [2048,2048]": (
            lambda x: x + (jnp.arange(2048 * 2048, dtype=jnp.int32).reshape(2048, 2048) % 7), [f32(2048, 2048)]),
        "jax.random.uniform [1M], fixed key": (
            lambda x: x + jax.random.uniform(jax.random.PRNGKey(0), (1 << 20,)), [f32(1 << 20)]),
        "sort pairs: argsort then take [1M]": (lambda x: x[jnp.argsort(x)], [f32(1 << 20)]),
        "conv NHWC 3x3 stride 2 [8,64,64,32] * [3,3,32,64]": (
            lambda x, w: conv(x, w, (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")),
            [f32(8, 64, 64, 32), f32(3, 3, 32, 64)]),
        "bf16 dot [512,512] @ [512,512]": (
            lambda a, b: a @ b, [f32(512, 512).astype(jnp.bfloat16), f32(512, 512).astype(jnp.bfloat16)]),
        "einsum ij,ik->jk [4096,256] [4096,256]": (
            lambda a, b: jnp.einsum("ij,ik->jk", a, b), [f32(4096, 256), f32(4096, 256)]),
        "while_loop halving until max < 1 [1M]": (
            lambda x: lax.while_loop(lambda c: jnp.max(jnp.abs(c)) >= 1.0, lambda c: c * 0.5, x), [f32(1 << 20) * 100]),
        "lax.cond on the sum [1M]": (
            lambda x: lax.cond(x.sum() > 0, lambda y: y * 2.0, lambda y: y - 1.0, x), [f32(1 << 20)]),
        "vmap'd dot of 4096 vectors of 64": (
            jax.vmap(lambda a, b: jnp.dot(a, b)), [f32(4096, 64), f32(4096, 64)]),
        # added 7 Dec 2026: transcendental ops JAX emits as one HLO instruction
        # (jax.scipy.special.erf, jnp.expm1; jnp.sinh is expm1 and exp), and a max-reduce
        # over short rows (softmax's first pass)
        "erf [4M]": (jax.scipy.special.erf, [f32(1 << 22)]),
        "expm1 [4M]": (jnp.expm1, [f32(1 << 22)]),
        "sinh [4M]": (jnp.sinh, [f32(1 << 22)]),
        "row maxima of [4096,256]": (lambda x: x.max(axis=1), [f32(4096, 256)]),
    }


def main(argv=None):
    only = (argv if argv is not None else sys.argv[1:])
    rows = []
    for name, (f, args) in workloads(np.random.default_rng(0)).items():
        if only and not any(o in name for o in only):
            continue
        try:
            n, j, agrees = against_jax(f, args, budget=1.5)
        except Exception as e:  # noqa: BLE001 - a failing workload is reported, the others run
            print(f"{name}: {type(e).__name__}: {str(e)[:200]}", flush=True)
            continue
        load = os.getloadavg()[0]
        rows.append((name, n, j, load, agrees))
        print(f"{name:60s} numba {n * 1e3:8.3f} ms  jax {j * 1e3:8.3f} ms  numba/jax {n / j:5.2f}  load {load:.1f}"
              + ("" if agrees else "  DIFFERS FROM JAX"), flush=True)
    print("\n| workload | numba | JAX | numba/JAX |\n|---|---|---|---|")
    for name, n, j, _, agrees in rows:
        ratio = f"**{n / j:.2f}**" if n > j else f"{n / j:.2f}"
        print(f"| {name} | {n * 1e3:.2f} ms | {j * 1e3:.2f} ms | {ratio}{'' if agrees else ' (differs)'} |")
    if rows:
        loads = [r[3] for r in rows]
        print(f"\nload {min(loads):.1f}-{max(loads):.1f}; {sum(r[1] > r[2] for r in rows)} of {len(rows)} above 1.0")


if __name__ == "__main__":
    main()
