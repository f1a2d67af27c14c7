"""The while loop compiled whole into one Numba function (executors/compiled_loop.py):
numba against the reference, bit for bit, for loops that take the path and loops that
do not."""
import numpy as np
import pytest
from jax import lax
import jax.numpy as jnp

import xla_explorer as xe
from xla_explorer.executors import compiled_loop as cl


def _bits(v):
    v = np.asarray(v)
    return v.view(np.uint8) if v.dtype.itemsize == 1 else v.view(f"u{v.dtype.itemsize}")


def _same(comp, *args, compiled=None):
    want = comp.run(*args, backend="numpy")
    got = comp.run(*args, backend="numba")
    got = comp.run(*args, backend="numba")   # (the second run: the run program's steps)
    want = want if isinstance(want, tuple) else (want,)
    got = got if isinstance(got, tuple) else (got,)
    for w, g in zip(want, got):
        assert np.asarray(w).dtype == np.asarray(g).dtype
        np.testing.assert_array_equal(_bits(g), _bits(w))
    if compiled is not None:
        # which path each while took: compiled_loop remembers a CompiledLoop, or why not
        loops = [i for c in comp.computations for i in c.instructions if i.opcode == "while"]
        assert loops, "no while loop in the module"
        took = [cl._loops.get(i) for i in loops]
        assert all(t is not None for t in took), "a while loop never reached compiled_loop"
        assert any(not isinstance(t, Exception) for t in took) == compiled, took


@pytest.mark.parametrize("n", [0, 1, 7])
def test_trip_counts_and_tuple_carry(n):
    x = np.array([1.5, -0.0, np.nan, np.inf, 1e-39, -3.0, 2.0 ** -126, 65504.0], np.float32)
    k = np.arange(8, dtype=np.int32) * 1000000000

    m = np.int32(n)   # a traced trip count: JAX keeps the while even for 0 and 1 steps

    def f(x, k, m):
        def body(i, c):
            a, b, p = c
            return a * 0.5 + 1e-38, b * 3 + i, jnp.logical_not(p) | (a > 0)
        return lax.fori_loop(0, m, body, (x, k, x < 1))
    _same(xe.from_jax(f, x, k, m), x, k, m, compiled=True)


def test_denormals_made_in_the_loop():
    x = np.full(16, 1e-30, np.float32) * np.linspace(-1, 1, 16, dtype=np.float32)
    f = lambda x: lax.fori_loop(0, 5, lambda i, c: c * np.float32(1e-5) / 1.0001 - 1e-45, x)  # noqa: E731
    _same(xe.from_jax(f, x), x, compiled=True)
    with xe.float_env(denormals="ieee"):
        _same(xe.from_jax(f, x), x, compiled=True)


def test_f16_and_scalar_carry():
    x = (np.arange(32, dtype=np.float32) * 0.37).astype(np.float16)

    def f(x):
        return lax.fori_loop(0, 9, lambda i, c: (c[0] * 1.7 - c[1], c[1] * 0.5), (x, jnp.float16(3.0)))
    _same(xe.from_jax(f, x), x, compiled=True)


def test_while_with_data_dependent_condition():
    x = np.float32(1.0)
    f = lambda x: lax.while_loop(lambda c: c[1] < 1000.0, lambda c: (c[0] + 1, c[1] * 1.5), (0, x))  # noqa: E731
    _same(xe.from_jax(f, x), x, compiled=True)


def test_loop_that_does_not_qualify():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    f = lambda x: lax.fori_loop(0, 3, lambda i, c: c + c.sum(axis=1, keepdims=True) * 1e-3, x)  # noqa: E731
    _same(xe.from_jax(f, x), x, compiled=False)


def test_nested_loops():
    x = np.linspace(-2, 2, 10, dtype=np.float32)

    def f(x):
        return lax.fori_loop(0, 3, lambda i, c: lax.fori_loop(0, 4, lambda j, d: d * 0.9 + 0.1, c) - 1.0, x)
    _same(xe.from_jax(f, x), x)


def test_disabled_gives_the_same():
    x = np.linspace(-2, 2, 10, dtype=np.float32)
    f = lambda x: lax.fori_loop(0, 6, lambda i, c: jnp.tanh(c) * 2.5, x)  # noqa: E731
    _same(xe.from_jax(f, x), x, compiled=True)
