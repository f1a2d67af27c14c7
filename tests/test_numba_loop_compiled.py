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
    cl._loops.clear()   # (what this module's loops decide, below)
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
        # (by name: the executor's plan may run a copy of a called computation's loop)
        took = [next((t for j, t in list(cl._loops.items()) if j.name == i.name), None) for i in loops]
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


# -- the loop cut in two: control (scalars, small arrays) and leaf blocks run in place --------

def test_large_state_runs_in_leaf_blocks_on_threads():
    """An array of 2^17 elements (over BLOCK and the parallel threshold): its blocks run all
    the iterations in place, on several threads, with the reference's bits; an array read
    in place and never written rides along."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal(1 << 17).astype(np.float32)
    y = rng.standard_normal(1 << 17).astype(np.float32)

    def f(x, y):
        return lax.fori_loop(0, 9, lambda i, c: (c[0] * 0.75 + c[1] * i.astype(jnp.float32), c[1]), (x, y))
    _same(xe.from_jax(f, x, y), x, y, compiled=True)


def test_swapped_arrays_of_two_sizes_and_a_small_one():
    """Leaf arrays of two element counts (two leaf functions), two of them swapped every
    iteration (each reads the other's old value: all reads of an element before its
    writes), and a small array (control) beside them."""
    a = np.linspace(-3, 3, 300, dtype=np.float32)
    b = np.linspace(5, -1, 300, dtype=np.float32)
    c = np.arange(1000, dtype=np.int32)
    s = np.arange(8, dtype=np.float32)

    def f(a, b, c, s):
        def body(i, st):
            a, b, c, s = st
            return b, a * 0.5 + b, c * 3 + i, s + 1.0
        return lax.fori_loop(0, 7, body, (a, b, c, s))
    _same(xe.from_jax(f, a, b, c, s), a, b, c, s, compiled=True)


def test_small_tables_read_by_scalars():
    """threefry's pattern: u32[4] tables carried and swapped, their elements sliced out as
    scalars (shift amounts) that a large array's update reads; the tables are control, the
    large array a leaf reading the recorded scalars."""
    x = np.arange(5000, dtype=np.uint32) * np.uint32(2654435761)
    t1 = np.array([13, 15, 26, 6], np.uint32)
    t2 = np.array([17, 29, 16, 24], np.uint32)

    def f(x, t1, t2):
        def body(i, st):
            x, t1, t2 = st
            r0 = lax.squeeze(lax.slice(t1, (0,), (1,)), (0,))
            r1 = lax.squeeze(lax.slice(t1, (3,), (4,)), (0,))
            x = (x << r0 | x >> (np.uint32(32) - r0)) ^ (x + r1 + i.astype(jnp.uint32))
            return x, t2, t1
        return lax.fori_loop(0, 5, body, (x, t1, t2))
    _same(xe.from_jax(f, x, t1, t2), x, t1, t2, compiled=True)


def test_random_uniform_takes_the_compiled_loop():
    """jax.random.uniform's threefry while loop (u32[n] halves, u32[4] rotation tables)."""
    import jax
    x = np.zeros(4096, np.float32)
    f = lambda x: x + jax.random.uniform(jax.random.PRNGKey(7), (4096,))  # noqa: E731
    _same(xe.from_jax(f, x), x, compiled=True)


def test_many_calls_of_recorded_iterations(monkeypatch):
    """More iterations than one call records (_MAX_RECORDED made 7): the leaves resume where
    the last call left them, the scalars too; and the control's buffers turn over."""
    monkeypatch.setattr(cl, "_MAX_RECORDED", 7)
    x = np.linspace(-1, 1, 700, dtype=np.float32)
    s = np.linspace(0, 1, 10, dtype=np.float32)

    def f(x, s):
        return lax.fori_loop(0, 30, lambda i, c: (c[0] * 0.9 + i.astype(jnp.float32) * c[1][0], c[1] * 1.1), (x, s))
    _same(xe.from_jax(f, x, s), x, s, compiled=True)


def test_denormals_made_in_leaf_blocks():
    """The flushing rules op by op in a leaf (an operand known flushed is not flushed again;
    the state's values, the caller's included, are), under both environments."""
    x = np.full(4096, 1e-30, np.float32) * np.linspace(-1, 1, 4096, dtype=np.float32)
    x[::7] = np.float32(1e-40)   # denormal inputs
    f = lambda x: lax.fori_loop(0, 5, lambda i, c: c * np.float32(1e-5) / 1.0001 - 1e-45, x)  # noqa: E731
    _same(xe.from_jax(f, x), x, compiled=True)
    with xe.float_env(denormals="ieee"):
        _same(xe.from_jax(f, x), x, compiled=True)


def test_pass_through_denormal_state_is_not_flushed():
    """A leaf array the body passes on unchanged in a swap keeps its denormals (the
    reference flushes operands as ops read them, not the state)."""
    a = np.full(500, 1e-40, np.float32)
    b = np.linspace(1, 2, 500, dtype=np.float32)
    f = lambda a, b: lax.fori_loop(0, 4, lambda i, c: (c[1], c[0]), (a, b))  # noqa: E731
    _same(xe.from_jax(f, a, b), a, b)


# -- leaves in the processor's DAZ mode ---------------------------------------------------------

def _leaf_source(comp):
    loops = [i for c in comp.computations for i in c.instructions if i.opcode == "while"]
    return cl.CompiledLoop(loops[0])._source()[0]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_daz_leaves_keep_the_flush_rules(dtype, monkeypatch):
    """A leaf of arithmetic in ``"flush"`` mode runs with MXCSR's DAZ bit set (x86) and its
    operands read by arithmetic are not flushed first: denormals the loop makes, denormals
    of the caller's array and of a scalar it reads, results that round to the smallest
    normal or below it: the reference's bits, as with the switch off (then every operand is
    flushed in the code)."""
    tiny = np.finfo(dtype).tiny
    x = np.concatenate([np.array([tiny * 0.5, -tiny * 0.25, tiny, -tiny * 1.5, 0.0, -0.0, np.inf, np.nan, 1.0]),
                        np.random.default_rng(4).standard_normal(4000) * tiny * 8]).astype(dtype)
    s = dtype(tiny * 0.75)   # (a denormal scalar operand)

    def f(x, s):
        return lax.fori_loop(0, 6, lambda i, c: c * dtype(0.6) + s - c * c * dtype(1e-3) / dtype(1.0001), x)

    def build():
        import jax
        with jax.enable_x64(dtype == np.float64):
            return xe.from_jax(f, x, s)
    comp = build()
    src = _leaf_source(comp)
    if cl._X86:
        assert "_mxcsr_or(" in src
    _same(comp, x, s, compiled=True)
    monkeypatch.setattr(cl, "DAZ", False)
    assert "_mxcsr_or(" not in _leaf_source(comp)
    comp = build()
    _same(comp, x, s, compiled=True)


def test_daz_leaves_only_where_every_op_allows_it():
    """tanh reads a denormal operand as itself (its rule): a leaf with it keeps the flushes
    and the mode off; in ``"ieee"`` mode nothing is flushed and the mode is never set."""
    x = np.linspace(-1e-37, 1e-37, 3000, dtype=np.float32)
    f = lambda x: lax.fori_loop(0, 4, lambda i, c: jnp.tanh(c * 0.5) * 1.5, x)  # noqa: E731
    comp = xe.from_jax(f, x)
    assert "_mxcsr_or(" not in _leaf_source(comp)
    _same(comp, x, compiled=True)
    with xe.float_env(denormals="ieee"):
        g = lambda x: lax.fori_loop(0, 4, lambda i, c: c * 0.5 + 1e-39, x)  # noqa: E731
        comp = xe.from_jax(g, x)
        assert "_mxcsr_or(" not in _leaf_source(comp)
        _same(comp, x, compiled=True)


@pytest.mark.parametrize("chunk", [1, 3000, 1 << 24])
def test_calls_cut_by_the_chunk_size_give_the_same_bits(chunk, monkeypatch):
    """The loop's iterations cut into calls of ``_CHUNK_ELEMENTS`` element steps (one
    iteration a call, a few, all in one): leaf arrays updated in place, control arrays
    turned between buffers and the recorded scalars carried from call to call, as one
    call computes them."""
    monkeypatch.setattr(cl, "_CHUNK_ELEMENTS", chunk)
    x = np.linspace(-3, 3, 1000, dtype=np.float32)
    t1, t2 = np.array([13, 15, 26, 6], np.uint32), np.array([17, 29, 16, 24], np.uint32)
    u = np.arange(1000, dtype=np.uint32) * np.uint32(2654435761)

    def f(x, t1, t2, u):
        def body(i, st):
            x, t1, t2, u = st
            r = lax.squeeze(lax.slice(t1, (0,), (1,)), (0,))
            return x * 0.9 + i.astype(jnp.float32), t2, t1 + 1, (u << r) | (u >> (np.uint32(32) - r))
        return lax.fori_loop(0, 11, body, (x, t1, t2, u))
    _same(xe.from_jax(f, x, t1, t2, u), x, t1, t2, u, compiled=True)
