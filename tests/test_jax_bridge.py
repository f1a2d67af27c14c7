"""from_jax: JAX's HLO (as lowered, and as XLA:CPU optimized it) imported and run."""
import numpy as np
import pytest

import xla_explorer as xe

jax = pytest.importorskip("jax")
jnp = jax.numpy


def _check(f, *args, optimized=False, rtol=1e-5):
    comp = xe.from_jax(f, *args, optimized=optimized)
    got = comp.run(*args)
    want = jax.jit(f)(*args)
    if isinstance(want, (tuple, list)):
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=rtol, atol=1e-6)
    else:
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=rtol, atol=1e-6)
    return comp


def test_elementwise_chain_lowered_and_optimized():
    x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    y = np.arange(12, dtype=np.float32).reshape(3, 4)
    f = lambda a, b: jnp.tanh(a) * 2 + b / 3  # noqa: E731
    _check(f, x, y)
    comp = _check(f, x, y, optimized=True)
    assert any(i.opcode == "fusion" for i in comp.entry.instructions)


def test_reduction_and_indexing_program():
    x = np.random.default_rng(0).normal(size=(5, 6)).astype(np.float32)
    idx = np.array([4, 0, 2, 9, -1], np.int32)
    f = lambda a, i: (a[i].sum(axis=1), jnp.max(a, axis=0), jnp.argmax(a, axis=1))  # noqa: E731
    _check(f, x, idx)
    _check(f, x, idx, optimized=True)


def test_control_flow_program():
    def f(x):
        return jax.lax.fori_loop(0, 5, lambda i, v: v * 1.5 + i, x)
    _check(f, np.ones(3, np.float32))
    _check(f, np.ones(3, np.float32), optimized=True)


def test_mlp_gradient():
    def loss(w, x):
        return jnp.mean(jnp.tanh(x @ w) ** 2)
    w = np.random.default_rng(1).normal(size=(4, 3)).astype(np.float32)
    x = np.random.default_rng(2).normal(size=(8, 4)).astype(np.float32)
    _check(jax.grad(loss), w, x, rtol=1e-4)
    _check(jax.grad(loss), w, x, optimized=True, rtol=1e-4)
