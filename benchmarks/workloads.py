"""Benchmark workloads: JAX functions whose HLO the executors run (``xe.from_jax``).

Every workload is a JAX function and its arguments: ``jax.jit`` runs it, and the
Numba executor and the NumPy reference run the HLO JAX lowers it to, so the three run
the very same computation.

``SWEEP``: one entry per op family, each in two layouts (the dimension it works along
is the contiguous, minor one, or a major one) at sizes from in-cache to several times
the last-level cache (``SIZES``, bytes of the main operand; compute-bound families
stop earlier).  ``PROGRAMS``: whole programs from JAX (an MLP training step, an
attention block, a CNN forward pass), as lowered and as XLA:CPU optimised them.
"""
import math

import numpy as np

KiB, MiB = 1 << 10, 1 << 20

#: main-operand sizes of the sweep: in L2, in L3, about the L3 of this project's
#: machines (32 MiB), four times it
SIZES = (256 * KiB, 4 * MiB, 32 * MiB, 128 * MiB)


def _jax():
    import jax
    import jax.numpy as jnp
    from jax import lax
    return jax, jnp, lax


def _square(nbytes, itemsize=4, minor=None):
    """(rows, cols) of a matrix of about ``nbytes``; ``minor`` fixes the column count."""
    n = max(1, nbytes // itemsize)
    if minor:
        return max(1, n // minor), minor
    side = int(math.sqrt(n))
    return side, max(1, n // side)


def _f32(rng, *shape):
    return rng.standard_normal(shape, dtype=np.float32)


# -- data movement ------------------------------------------------------------------------

def transpose(layout, nbytes, rng):
    _, jnp, _ = _jax()
    if layout == "minor":  # the contiguous dimension moves: a 2-D transpose
        r, c = _square(nbytes)
        return (lambda x: x.T), [_f32(rng, r, c)]
    r, c = _square(nbytes, minor=64)  # rows of 64 keep their place: [a, b, 64] -> [b, a, 64]
    a = max(1, int(math.sqrt(r)))
    return (lambda x: jnp.transpose(x, (1, 0, 2))), [_f32(rng, a, max(1, r // a), 64)]


def slice_(layout, nbytes, rng):
    r, c = _square(nbytes)
    if layout == "minor":
        return (lambda x: x[:, 1::2]), [_f32(rng, r, c)]
    return (lambda x: x[1::2, :]), [_f32(rng, r, c)]


def concatenate(layout, nbytes, rng):
    _, jnp, _ = _jax()
    r, c = _square(nbytes // 2)
    axis = 1 if layout == "minor" else 0
    return (lambda x, y: jnp.concatenate([x, y], axis=axis)), [_f32(rng, r, c), _f32(rng, r, c)]


def pad(layout, nbytes, rng):
    _, _, lax = _jax()
    r, c = _square(nbytes // 2)
    cfg = [(0, 0, 0), (3, -2, 1)] if layout == "minor" else [(3, -2, 1), (0, 0, 0)]
    return (lambda x: lax.pad(x, np.float32(0), cfg)), [_f32(rng, r, c)]


def reverse(layout, nbytes, rng):
    r, c = _square(nbytes)
    if layout == "minor":
        return (lambda x: x[:, ::-1]), [_f32(rng, r, c)]
    return (lambda x: x[::-1, :]), [_f32(rng, r, c)]


def broadcast_add(layout, nbytes, rng):
    r, c = _square(nbytes)
    if layout == "minor":  # a vector along the rows (a bias)
        return (lambda x, v: x + v), [_f32(rng, r, c), _f32(rng, c)]
    return (lambda x, v: x + v[:, None]), [_f32(rng, r, c), _f32(rng, r)]


def gather_rows(layout, nbytes, rng):
    _, jnp, _ = _jax()
    r, c = _square(nbytes, minor=256) if layout == "major" else _square(nbytes)
    if layout == "major":  # whole rows: x[i]
        i = rng.integers(0, r, r).astype(np.int32)
        return (lambda x, i: jnp.take(x, i, axis=0, mode="clip")), [_f32(rng, r, c), i]
    i = rng.integers(0, c, c).astype(np.int32)  # columns: x[:, i]
    return (lambda x, i: jnp.take(x, i, axis=1, mode="clip")), [_f32(rng, r, c), i]


def gather_elements(layout, nbytes, rng):
    _, jnp, _ = _jax()
    if layout == "1-D":  # x[i] of a vector
        n = nbytes // 4
        return (lambda x, i: jnp.take(x, i, mode="clip")), [_f32(rng, n), rng.integers(0, n, n).astype(np.int32)]
    r, c = _square(nbytes)  # x[i, j]: two-component index vectors
    n = r * c
    i, j = rng.integers(0, r, n).astype(np.int32), rng.integers(0, c, n).astype(np.int32)
    return (lambda x, i, j: x[i, j]), [_f32(rng, r, c), i, j]


def scatter_add(layout, nbytes, rng):
    if layout == "major":  # rows: x.at[i].add(u)
        r, c = _square(nbytes, minor=128)
        i = rng.integers(0, r, r // 2).astype(np.int32)
        return (lambda x, i, u: x.at[i].add(u)), [_f32(rng, r, c), i, _f32(rng, r // 2, c)]
    r, c = _square(nbytes)  # columns: x.at[:, i].add(u)
    i = rng.integers(0, c, c // 2).astype(np.int32)
    return (lambda x, i, u: x.at[:, i].add(u)), [_f32(rng, r, c), i, _f32(rng, r, c // 2)]


def dynamic_update_slice(layout, nbytes, rng):
    _, _, lax = _jax()
    r, c = _square(nbytes)
    if layout == "minor":  # a block of columns
        u = _f32(rng, r, max(1, c // 4))
    else:  # a block of rows
        u = _f32(rng, max(1, r // 4), c)
    return (lambda x, u, k: lax.dynamic_update_slice(x, u, (k, k))), [_f32(rng, r, c), u, np.int32(3)]


# -- windows and reductions --------------------------------------------------------------------

def _pool(layout, nbytes, rng, kind):
    _, jnp, lax = _jax()
    n = nbytes // 4
    if layout == "minor":  # NCHW: the window moves along the two minor dimensions
        side = max(8, int(math.sqrt(n // 32)))
        shape, win, strides = (max(1, n // (side * side)), side, side), (1, 3, 3), (1, 2, 2)
    else:  # NHWC: the channels are minor, the window moves along major dimensions
        side = max(8, int(math.sqrt(n // 32)))
        shape, win, strides = (side, side, max(1, n // (side * side))), (3, 3, 1), (2, 2, 1)
    init, op = (-jnp.inf, lax.max) if kind == "max" else (0.0, lax.add)
    return (lambda x: lax.reduce_window(x, init, op, win, strides, "SAME")), [_f32(rng, *shape)]


def reduce_window_max(layout, nbytes, rng):
    return _pool(layout, nbytes, rng, "max")


def reduce_window_sum(layout, nbytes, rng):
    return _pool(layout, nbytes, rng, "sum")


def reduce_sum(layout, nbytes, rng):
    r, c = _square(nbytes)
    axis = 1 if layout == "minor" else 0
    return (lambda x: x.sum(axis=axis)), [_f32(rng, r, c)]


def reduce_max(layout, nbytes, rng):
    r, c = _square(nbytes)
    axis = 1 if layout == "minor" else 0
    return (lambda x: x.max(axis=axis)), [_f32(rng, r, c)]


def argmax(layout, nbytes, rng):
    _, jnp, _ = _jax()
    r, c = _square(nbytes)
    axis = 1 if layout == "minor" else 0
    return (lambda x: jnp.argmax(x, axis=axis)), [_f32(rng, r, c)]


def cumsum(layout, nbytes, rng):
    _, jnp, _ = _jax()
    r, c = _square(nbytes, minor=512) if layout == "minor" else _square(nbytes)
    axis = 1 if layout == "minor" else 0
    if layout == "major":
        r, c = 512, max(1, nbytes // 4 // 512)
    return (lambda x: jnp.cumsum(x, axis=axis)), [_f32(rng, r, c)]


def sort(layout, nbytes, rng):
    _, jnp, _ = _jax()
    r, c = _square(nbytes, minor=1024)
    axis = 1 if layout == "minor" else 0
    if layout == "major":
        r, c = 1024, max(1, nbytes // 4 // 1024)
    return (lambda x: jnp.sort(x, axis=axis)), [_f32(rng, r, c)]


def softmax(layout, nbytes, rng):
    jax, _, _ = _jax()
    r, c = _square(nbytes, minor=256) if layout == "minor" else _square(nbytes)
    axis = 1 if layout == "minor" else 0
    return (lambda x: jax.nn.softmax(x, axis=axis)), [_f32(rng, r, c)]


# -- compute ----------------------------------------------------------------------------------

def dot(layout, nbytes, rng):
    _, jnp, _ = _jax()
    if layout == "batched":  # many small products: [b, 64, 64] @ [b, 64, 64]
        b = max(1, nbytes // 4 // (64 * 64))
        return (lambda x, y: jnp.einsum("bij,bjk->bik", x, y)), [_f32(rng, b, 64, 64), _f32(rng, b, 64, 64)]
    n = max(8, int(math.sqrt(nbytes // 4)))  # x^T y: contracting the major dimension
    return (lambda x, y: x.T @ y), [_f32(rng, n, n), _f32(rng, n, n)]


def conv(layout, nbytes, rng):
    _, _, lax = _jax()
    C = 32
    side = max(8, int(math.sqrt(nbytes // 4 // (8 * C))))
    if layout == "NHWC":
        dn, x, w = ("NHWC", "HWIO", "NHWC"), _f32(rng, 8, side, side, C), _f32(rng, 3, 3, C, C)
    else:
        dn, x, w = ("NCHW", "OIHW", "NCHW"), _f32(rng, 8, C, side, side), _f32(rng, C, C, 3, 3)
    return (lambda x, w: lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=dn)), [x, w]


#: family -> (build(layout, nbytes, rng), layouts, kind, sizes).  Kinds: "data" (moves
#: data: GB/s against the copy bandwidth), "window", "reduce", "compute".
SWEEP = {
    "transpose": (transpose, ("minor", "major"), "data", SIZES),
    "slice (stride 2)": (slice_, ("minor", "major"), "data", SIZES),
    "concatenate": (concatenate, ("minor", "major"), "data", SIZES),
    "pad (interior, negative)": (pad, ("minor", "major"), "data", SIZES),
    "reverse": (reverse, ("minor", "major"), "data", SIZES),
    "broadcast add": (broadcast_add, ("minor", "major"), "data", SIZES),
    "gather rows / columns": (gather_rows, ("major", "minor"), "data", SIZES),
    "gather elements": (gather_elements, ("1-D", "2-D"), "data", SIZES),
    "scatter-add rows / columns": (scatter_add, ("major", "minor"), "data", SIZES),
    "dynamic-update-slice": (dynamic_update_slice, ("minor", "major"), "data", SIZES),
    "reduce-window max 3x3/2": (reduce_window_max, ("minor", "major"), "window", SIZES),
    "reduce-window sum 3x3/2": (reduce_window_sum, ("minor", "major"), "window", SIZES),
    "reduce sum": (reduce_sum, ("minor", "major"), "reduce", SIZES),
    "reduce max": (reduce_max, ("minor", "major"), "reduce", SIZES),
    "argmax": (argmax, ("minor", "major"), "reduce", SIZES),
    "cumsum": (cumsum, ("minor", "major"), "reduce", SIZES[:3]),
    "softmax": (softmax, ("minor", "major"), "reduce", SIZES),
    "sort": (sort, ("minor", "major"), "compute", SIZES[:3]),
    "dot": (dot, ("batched", "transposed"), "compute", SIZES[:3]),
    "conv 3x3": (conv, ("NHWC", "NCHW"), "compute", SIZES[:3]),
}


# -- real programs ------------------------------------------------------------------------------

def mlp_step(rng):
    """One SGD step of a 784-512-512-10 MLP on a batch of 256 (softmax cross-entropy)."""
    jax, jnp, _ = _jax()

    def loss(params, x, y):
        h = x
        for w, b in params[:-1]:
            h = jax.nn.relu(h @ w + b)
        w, b = params[-1]
        return -jnp.mean(jnp.sum(jax.nn.log_softmax(h @ w + b) * y, axis=-1))

    def step(params, x, y):
        g = jax.grad(loss)(params, x, y)
        return jax.tree_util.tree_map(lambda p, d: p - 0.01 * d, params, g)

    params = [(0.05 * _f32(rng, 784, 512), np.zeros(512, np.float32)),
              (0.05 * _f32(rng, 512, 512), np.zeros(512, np.float32)),
              (0.05 * _f32(rng, 512, 10), np.zeros(10, np.float32))]
    y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 256)]
    return step, [params, _f32(rng, 256, 784), y]


def attention(rng):
    """A transformer block's attention (8 heads, causal mask, softmax) and layer norm,
    batch 4, 256 tokens, width 512."""
    jax, jnp, _ = _jax()

    def block(x, wq, wk, wv, wo):
        B, T, D = x.shape
        H = 8
        q, k, v = [(x @ w).reshape(B, T, H, D // H) for w in (wq, wk, wv)]
        s = jnp.einsum("bthd,bshd->bhts", q, k) / np.float32(np.sqrt(D // H))
        s = jnp.where(jnp.tril(jnp.ones((T, T), bool)), s, np.float32(-1e9))
        o = jnp.einsum("bhts,bshd->bthd", jax.nn.softmax(s, axis=-1), v).reshape(B, T, D)
        h = x + o @ wo
        mu = h.mean(-1, keepdims=True)
        var = ((h - mu) ** 2).mean(-1, keepdims=True)
        return (h - mu) / jnp.sqrt(var + 1e-5)

    return block, [_f32(rng, 4, 256, 512)] + [0.05 * _f32(rng, 512, 512) for _ in range(4)]


def cnn_forward(rng):
    """A small CNN's forward pass in NCHW: conv 3x3, relu, max-pool 2x2, twice, global
    average pool, dense; batch 16 of 3x64x64."""
    jax, jnp, lax = _jax()

    def net(x, w1, w2, w3):
        dn = ("NCHW", "OIHW", "NCHW")
        h = jax.nn.relu(lax.conv_general_dilated(x, w1, (1, 1), "SAME", dimension_numbers=dn))
        h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
        h = jax.nn.relu(lax.conv_general_dilated(h, w2, (1, 1), "SAME", dimension_numbers=dn))
        h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
        return h.mean(axis=(2, 3)) @ w3

    return net, [_f32(rng, 16, 3, 64, 64), 0.2 * _f32(rng, 32, 3, 3, 3), 0.1 * _f32(rng, 64, 32, 3, 3),
                 0.1 * _f32(rng, 64, 10)]


#: program -> build(rng); each runs from its lowered and from its optimised HLO
PROGRAMS = {
    "MLP training step": mlp_step,
    "attention block": attention,
    "CNN forward (NCHW)": cnn_forward,
}
