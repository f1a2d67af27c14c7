"""The while loop of whole-array steps compiled into one Numba function
(executors/compiled_scan.py): the run program's bits (the same emitters, flushes and BLAS
call), the reference's values, for loops that take the path and loops that do not."""
import numpy as np
import pytest
import jax
from jax import lax
import jax.numpy as jnp

import xla_explorer as xe
from xla_explorer.executors import compiled_scan as cs
from xla_explorer.executors.cpu import linalg
from xla_explorer.executors.cpu.blas_call import NO_TRANS, TRANS, gemm32, gemm64, gemm_addresses

pytestmark = pytest.mark.skipif(gemm_addresses() is None, reason="NumPy is not linked with OpenBLAS")


def _bits(v):
    v = np.asarray(v)
    return v.view(np.uint8) if v.dtype.itemsize == 1 else v.view(f"u{v.dtype.itemsize}")


def _whiles(comp):
    return [i for c in comp.computations for i in c.instructions if i.opcode == "while"]


def _check(f, *args, compiled, rtol=1e-5):
    """numba with the compiled scan against numba without it (bit for bit) and against the
    reference (close: the reference's dot sums in its own order); ``compiled``: whether
    the loop took the compiled scan."""
    cs._scans.clear()
    cs.ENABLED = False
    try:
        want = xe.from_jax(f, *args).run(*args, backend="numba")
    finally:
        cs.ENABLED = True
    comp = xe.from_jax(f, *args)
    got = comp.run(*args, backend="numba")
    again = comp.run(*args, backend="numba")
    ref = comp.run(*args, backend="numpy")
    for w, g, a, r in zip(*(v if isinstance(v, tuple) else (v,) for v in (want, got, again, ref))):
        np.testing.assert_array_equal(_bits(g), _bits(w))
        np.testing.assert_array_equal(_bits(a), _bits(w))
        np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(r, np.float64), rtol=rtol, atol=rtol)
    took = [next((t for j, t in list(cs._scans.items()) if j.name == i.name), None) for i in _whiles(comp)]
    took = [t for t in took if t is not None]   # (none: compiled_loop took the loop first)
    if compiled:   # (and its function compiled and ran: a variant list, not an exception)
        assert took and not all(isinstance(t, Exception) for t in took), took   # (a nest: the inner at least)
        assert all(isinstance(v, list) for t in took if not isinstance(t, Exception) for v in t._functions.values()), \
            took
    else:
        assert all(isinstance(t, Exception) for t in took), took
    return got


def _rnn(h, xs, w):
    def step(h, x):
        h = jnp.tanh(h @ w + x)
        return h, h
    return lax.scan(step, h, xs)[1]


def test_gemm_call_has_matmuls_bits():
    """The BLAS call from Numba code gives np.matmul's bits, plain and transposed operands."""
    from numba import njit

    @njit
    def mm(addr, ta, tb, a, b, c, m, n, k, single):
        if single:
            gemm32(addr, ta, tb, m, n, k, np.int64(a.ctypes.data), a.shape[1], np.int64(b.ctypes.data), b.shape[1],
                   np.int64(c.ctypes.data), n)
        else:
            gemm64(addr, ta, tb, m, n, k, np.int64(a.ctypes.data), a.shape[1], np.int64(b.ctypes.data), b.shape[1],
                   np.int64(c.ctypes.data), n)
    rng = np.random.default_rng(0)
    s, d = gemm_addresses()[:2]
    for dt, addr in ((np.float32, s), (np.float64, d)):
        for m, k, n in ((32, 128, 128), (3, 5, 2), (17, 70, 33)):
            for ta in (False, True):
                for tb in (False, True):
                    a = rng.standard_normal((k, m) if ta else (m, k)).astype(dt)
                    b = rng.standard_normal((n, k) if tb else (k, n)).astype(dt)
                    linalg._blas_enter()
                    try:
                        want = np.matmul(a.T if ta else a, b.T if tb else b)
                        got = np.empty((m, n), dt)
                        mm(addr, TRANS if ta else NO_TRANS, TRANS if tb else NO_TRANS, a, b, got, m, n, k,
                           dt == np.float32)
                    finally:
                        linalg._blas_leave()
                    np.testing.assert_array_equal(_bits(got), _bits(want))


def test_rnn_scan():
    rng = np.random.default_rng(1)
    h, xs, w = (rng.standard_normal(s, dtype=np.float32) for s in ((32, 128), (16, 32, 128), (128, 128)))
    _check(_rnn, h, xs, w * 0.1, compiled=True)


@pytest.mark.parametrize("mode", ["flush", "ieee"])
def test_denormals_in_every_operand(mode):
    """Denormal initial state, weights and inputs (the first iteration reads the caller's
    h, the later ones the loop's own), in both environments."""
    rng = np.random.default_rng(2)
    h = rng.standard_normal((8, 16), dtype=np.float32) * np.float32(1e-39)
    xs = rng.standard_normal((5, 8, 16), dtype=np.float32) * np.float32(1e-38)
    w = rng.standard_normal((16, 16), dtype=np.float32)
    w[::3] *= np.float32(1e-40)
    with xe.float_env(denormals=mode):
        _check(_rnn, h, xs, w, compiled=True)
        _check(lambda h, xs, w: _rnn(h, xs, w) * 1e-30, h, xs, w * 1e-3, compiled=True)


def test_f64_transposed_operands_bias_and_two_stacks():
    """f64, both operands transposed (``h @ w.T``, ``w2.T @ h``-like contractions), a bias
    broadcast along the features, a scalar carried beside, two stacked outputs."""
    from jax import config
    config.update("jax_enable_x64", True)
    try:
        rng = np.random.default_rng(3)
        h = rng.standard_normal((6, 10))
        xs = rng.standard_normal((7, 6, 10))
        w = rng.standard_normal((10, 10)) * 0.3
        v = rng.standard_normal((6, 6)) * 0.2
        bias = rng.standard_normal(10)

        def f(h, xs, w, v, bias):
            def step(c, x):
                h, s = c
                a = jnp.tanh(h @ w.T + bias + x)
                b = v.T @ a * s
                return (b, s * 0.9), (a, b - 1.0)
            return lax.scan(step, (h, 1.5), xs)
        _check(f, h, xs, w, v, bias, compiled=True, rtol=1e-12)
    finally:
        config.update("jax_enable_x64", False)


def test_strided_dynamic_slices_and_updates_clamped():
    """Slices and updates along a middle dimension (copies, not blocks) at starts past the
    ends (clamped as XLA clamps them)."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((4, 12, 8), dtype=np.float32)
    w = rng.standard_normal((8, 8), dtype=np.float32) * 0.5

    def f(x, w):
        def body(i, c):
            out, h = c
            sl = lax.dynamic_slice(x, (0, 3 * i - 2, 0), (4, 1, 8)).reshape(4, 8)
            h = jnp.maximum(h @ w + sl, 0.0)
            return lax.dynamic_update_slice(out, h.reshape(4, 1, 8), (0, 2 * i - 1, 0)), h
        return lax.fori_loop(0, 9, body, (jnp.zeros((4, 12, 8), jnp.float32), jnp.ones((4, 8), jnp.float32)))
    _check(f, x, w, compiled=True)


def test_chunked_calls_carry_the_state(monkeypatch):
    """A call of the function runs ``limit`` iterations; the next goes on from its buffers."""
    monkeypatch.setattr(cs, "_CHUNK_WORK", 1)
    rng = np.random.default_rng(5)
    h, xs, w = (rng.standard_normal(s, dtype=np.float32) for s in ((4, 8), (11, 4, 8), (8, 8)))
    _check(_rnn, h, xs, w * 0.3, compiled=True)


@pytest.mark.parametrize("case", ["vector dot", "batched", "no dot", "stack read"])
def test_loops_that_do_not_qualify(case):
    rng = np.random.default_rng(6)
    w = rng.standard_normal((8, 8), dtype=np.float32) * 0.3
    if case == "vector dot":   # (NumPy's dot of two vectors: not a BLAS call made here)
        f = lambda h, w: lax.fori_loop(0, 4, lambda i, c: jnp.tanh(c * jnp.dot(c, w[0])), h)  # noqa: E731
        args = (rng.standard_normal(8, dtype=np.float32), w)
    elif case == "batched":
        f = lambda h, w: lax.fori_loop(0, 4, lambda i, c: jnp.einsum("bij,jk->bik", c, w), h)  # noqa: E731
        args = (rng.standard_normal((2, 3, 8), dtype=np.float32), w)
    elif case == "no dot":
        f = lambda h, w: lax.fori_loop(0, 4, lambda i, c: jnp.tanh(c + w), h)  # noqa: E731
        args = (rng.standard_normal((8, 8), dtype=np.float32), w)
    else:   # the stack is read besides its update: not updated in place
        def f(h, w):
            def body(i, c):
                out, h = c
                h = jnp.tanh(h @ w + lax.dynamic_slice(out, (jnp.maximum(i - 1, 0), 0, 0), (1, 2, 8))[0])
                return lax.dynamic_update_slice(out, h[None], (i, 0, 0)), h
            return lax.fori_loop(0, 3, body, (jnp.zeros((3, 2, 8), jnp.float32), h))
        args = (rng.standard_normal((2, 8), dtype=np.float32), w)
    _check(f, *args, compiled=False)


def test_one_scalar_beside_arrays_compiles():
    """compiled_loop's state of one scalar and an array: its update line is not a tuple."""
    from xla_explorer.executors import compiled_loop as cl
    x = np.linspace(-3, 3, 40, dtype=np.float32)
    f = lambda x: lax.while_loop(lambda c: c[0] < 10, lambda c: (c[0] + 1, c[1] * 0.5 + 1.0), (0, x))[1]  # noqa: E731
    cl._loops.clear()
    comp = xe.from_jax(f, x)
    np.testing.assert_array_equal(_bits(comp.run(x, backend="numba")), _bits(comp.run(x, backend="numpy")))
    took = [t for j, t in cl._loops.items()]
    assert took and all(isinstance(fn, tuple) for t in took for fn in t._functions.values()), took


def test_product_carried_directly_and_swapped_states():
    """A product that is the carried value itself (its buffer becomes the next state's), two
    carried arrays swapped every iteration, in both environments."""
    rng = np.random.default_rng(7)
    a = rng.standard_normal((5, 6), dtype=np.float32)
    c = rng.standard_normal((5, 6), dtype=np.float32)
    w = rng.standard_normal((6, 6), dtype=np.float32) * 0.4

    def f(a, c, w):
        return lax.fori_loop(0, 6, lambda i, s: (s[1] @ w, s[0], s[2] + 1.0), (a, c, jnp.zeros(3, jnp.float32)))
    for mode in ("flush", "ieee"):
        with xe.float_env(denormals=mode):
            _check(f, a, c, w, compiled=True)


def test_lstm_gates_sliced():
    """An LSTM cell's scan: two products, the gates split by static slices along the
    features (copies) and rows (blocks), sigmoid and tanh, two carried arrays."""
    rng = np.random.default_rng(8)
    B, H, X, T = 4, 8, 5, 6
    xs = rng.standard_normal((T, B, X), dtype=np.float32)
    wx = rng.standard_normal((X, 4 * H), dtype=np.float32) * 0.3
    wh = rng.standard_normal((H, 4 * H), dtype=np.float32) * 0.3
    bias = rng.standard_normal(4 * H, dtype=np.float32) * 0.1

    def f(xs, wx, wh, bias):
        def step(c, x):
            h, cell = c
            g = x @ wx + h @ wh + bias
            i, fg, gg, o = jnp.split(g, 4, axis=-1)
            cell = jax.nn.sigmoid(fg) * cell + jax.nn.sigmoid(i) * jnp.tanh(gg)
            h = jax.nn.sigmoid(o) * jnp.tanh(cell)
            return (h, cell), h[1:3, ::2]
        z = jnp.zeros((B, H), jnp.float32)
        return lax.scan(step, (z, z), xs)
    _check(f, xs, wx, wh, bias, compiled=True)


@pytest.mark.parametrize("variant", ["reverse", "unroll", "nested", "mixed types"])
def test_scan_variants(variant):
    """Reverse scans (the slice index counts down), unrolled bodies (two steps an iteration),
    a scan inside a loop (the inner one compiled), bf16 and pred values beside an f32 product."""
    rng = np.random.default_rng(9)
    h = rng.standard_normal((3, 8), dtype=np.float32)
    xs = rng.standard_normal((7, 3, 8), dtype=np.float32)
    w = rng.standard_normal((8, 8), dtype=np.float32) * 0.4

    def step(h, x):
        h = jnp.tanh(h @ w + x)
        return h, h
    if variant == "reverse":
        f = lambda h, xs: lax.scan(step, h, xs, reverse=True)  # noqa: E731
    elif variant == "unroll":
        f = lambda h, xs: lax.scan(step, h, xs, unroll=2)  # noqa: E731
    elif variant == "nested":
        f = lambda h, xs: lax.fori_loop(0, 3, lambda i, c: lax.scan(step, c, xs)[0] * 0.5, h)  # noqa: E731
    else:
        def f(h, xs):
            def mixed(c, x):
                h, k = c
                z = (h @ w).astype(jnp.bfloat16) + x.astype(jnp.bfloat16)
                h = jnp.maximum(z, 0).astype(jnp.float32)
                return (h, k + jnp.int32(2)), (z, h > 0.5, k)
            return lax.scan(mixed, (h, jnp.int32(0)), xs)
    _check(f, h, xs, compiled=True, rtol=2e-2 if variant == "mixed types" else 1e-5)


@pytest.mark.parametrize("n", [64, 256])
@pytest.mark.parametrize("mode", ["flush", "ieee"])
def test_single_sequence_rnn_matrix_vector(n, mode):
    """``W @ h`` and ``h @ U`` with a vector h: BLAS's gemv (64: under the kernel's
    threshold) or the executor's own matrix-vector kernel (256), as the run program calls
    them; denormal weights and inputs."""
    rng = np.random.default_rng(10)
    h = rng.standard_normal(n, dtype=np.float32)
    xs = rng.standard_normal((5, n), dtype=np.float32)
    w = rng.standard_normal((n, n), dtype=np.float32) * np.float32(0.5 / np.sqrt(n))
    u = rng.standard_normal((n, n), dtype=np.float32) * np.float32(0.5 / np.sqrt(n))
    w[:3] *= np.float32(1e-39)
    xs[:, ::7] *= np.float32(1e-39)

    def f(h, xs, w, u):
        def step(h, x):
            h = jnp.tanh(w @ h + h @ u + x)
            return h, h[None] @ w.T
        return lax.scan(step, h, xs)
    with xe.float_env(denormals=mode):
        _check(f, h, xs, w, u, compiled=True)


def test_scans_without_products():
    """A scan of element-wise steps over a sequence (an exponential moving average, stacked):
    compiled here (compiled_loop takes no dynamic slices); one whose iteration moves more
    than ``_MAX_SERIAL`` elements is left to the run program's threads."""
    rng = np.random.default_rng(11)

    def ema(c, xs):
        return lax.scan(lambda c, x: (c * 0.9 + x * 0.1, jnp.maximum(c, x)), c, xs)
    small = (rng.standard_normal(64, dtype=np.float32), rng.standard_normal((50, 64), dtype=np.float32))
    _check(ema, *small, compiled=True)
    big = (rng.standard_normal(1 << 18, dtype=np.float32), rng.standard_normal((3, 1 << 18), dtype=np.float32))
    _check(ema, *big, compiled=False)


def test_convergence_loops_with_orderless_reduces():
    """Jacobi iterations until ``max(abs(x_new - x))`` is small (a float maximum carried and
    tested), a condition that folds a whole array itself, integer and pred folds; with NaNs
    and signed zeros in the folded values."""
    rng = np.random.default_rng(12)
    n = 48
    a = rng.standard_normal((n, n), dtype=np.float32) * np.float32(0.02) + np.eye(n, dtype=np.float32) * 4
    bvec = rng.standard_normal(n, dtype=np.float32)

    def jacobi(a, bvec):
        d = jnp.diag(a)
        r = a - jnp.diag(d)

        def body(c):
            x, _, k = c
            xn = (bvec - r @ x) / d
            return xn, jnp.max(jnp.abs(xn - x)), k + 1
        return lax.while_loop(lambda c: (c[1] > 1e-6) & (c[2] < 100), body, (jnp.zeros_like(bvec), jnp.inf, 0))
    _check(jacobi, a, bvec, compiled=True)

    def folds(a, bvec):
        def body(c):
            x, k, m, i = c
            x = jnp.tanh(a @ x) * 2.0 - 0.0
            return x, k + jnp.sum((x > 0).astype(jnp.int32)), m | jnp.any(jnp.isnan(x)), i + 1
        return lax.while_loop(lambda c: (jnp.min(c[0]) > -1.9) & (c[1] < 500) & (c[3] < 40), body,
                              (bvec, jnp.int32(0), jnp.bool_(False), jnp.int32(0)))
    _check(folds, a, bvec, compiled=True)
    zeros = bvec * 0.0
    zeros[::2] = -0.0
    _check(folds, a * 0.0, zeros, compiled=True)
    _check(folds, a, np.where(np.arange(n) == 5, np.nan, bvec).astype(np.float32), compiled=True)


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")   # (NumPy's, of the NaNs' products)
@pytest.mark.parametrize("mode", ["flush", "ieee"])
def test_training_loop_with_sums(mode):
    """A training loop's reduces through the kernel's own fold: the loss's sum (carried),
    the bias gradient's column sums, row maxima; denormals in the folded values (a float
    sum that meets one folds the flushed operand again), NaNs of several payloads."""
    rng = np.random.default_rng(13)
    x = rng.standard_normal((64, 16), dtype=np.float32)
    y = rng.standard_normal((64, 4), dtype=np.float32)
    w = rng.standard_normal((16, 4), dtype=np.float32) * np.float32(0.1)
    x[3, :5] = np.float32(1e-39)

    def train(w, x, y):
        def body(i, c):
            w, bias, loss = c
            err = x @ w + bias - y
            g = x.T @ err / 64.0
            return w - 0.1 * g, bias - 0.1 * err.sum(axis=0) / 64.0, loss + jnp.sum(err * err) + jnp.max(err, axis=1)[0]
        return lax.fori_loop(0, 20, body, (w, jnp.zeros(4, jnp.float32), jnp.float32(0)))
    with xe.float_env(denormals=mode):
        _check(train, w, x, y, compiled=True, rtol=1e-4)
        nan = np.array([0x7FC00001, 0xFFC00002, 0x7FA00003], np.uint32).view(np.float32)
        x2 = x.copy()
        x2[[1, 7, 40], 0] = nan
        _check(train, w, x2, y, compiled=True)


def test_mlp_training_loop():
    """``jax.grad`` of a two-layer MLP's log-softmax loss in a ``fori_loop``: products with
    transposed operands, relu's select, row maxima and sums, a reduce over a dimension of
    size 1 (``_init_each``), the mean."""
    rng = np.random.default_rng(14)

    def f32(*s):
        return rng.standard_normal(s, dtype=np.float32)

    def train(w1, w2, x, y):
        def loss(p):
            h = jax.nn.relu(x @ p[0])
            return jnp.mean(jax.nn.log_softmax(h @ p[1]) * y)

        def body(i, p):
            g = jax.grad(loss)(p)
            return jax.tree_util.tree_map(lambda a, b: a - 0.01 * b, p, g)
        return lax.fori_loop(0, 5, body, (w1, w2))
    _check(train, f32(8, 16) * 0.1, f32(16, 5) * 0.1, f32(12, 8), f32(12, 5), compiled=True)


@pytest.mark.parametrize("mode", ["flush", "ieee"])
def test_gradient_descent_hoists_invariants(mode):
    """``0.01 * x.T`` of the loop's invariant x computed once a call (its bits those of an
    iteration's), x with denormals; constants used by the condition and the body."""
    rng = np.random.default_rng(15)
    x = rng.standard_normal((40, 6), dtype=np.float32)
    x[::5, 2] = np.float32(3e-39)
    y = rng.standard_normal(40, dtype=np.float32)

    def gd(w, x, y):
        return lax.fori_loop(0, 30, lambda i, w: w - 0.01 * x.T @ (x @ w - y) / 40 + 1e-39, w)
    with xe.float_env(denormals=mode):
        _check(gd, np.zeros(6, np.float32), x, y, compiled=True)


def test_unsigned_and_out_of_range_starts():
    """Dynamic slices and updates at u32 / u64 / s64 starts, some past the ends (huge
    unsigned ones clamp to the last start, as XLA clamps them)."""
    from jax import config
    config.update("jax_enable_x64", True)
    try:
        rng = np.random.default_rng(16)
        xs = rng.standard_normal((6, 4), dtype=np.float32)
        w = rng.standard_normal((4, 4), dtype=np.float32)

        def f(xs, w):
            def body(i, c):
                out, h = c
                s64 = jnp.int64(7) * i - 9
                u64 = jnp.where(i > 2, jnp.uint64(0xFFFFFFFFFFFFFFFF), i.astype(jnp.uint64))
                u32 = (i * 3).astype(jnp.uint32)
                x = lax.dynamic_slice(xs, (u64, jnp.uint64(0)), (1, 4))
                h = jnp.tanh(h @ w + x + lax.dynamic_slice(xs, (s64, jnp.int64(0)), (1, 4)))
                out = lax.dynamic_update_slice(out, h, (u32, jnp.uint32(0)))
                return out, h
            return lax.fori_loop(0, 6, body, (jnp.zeros((6, 4), jnp.float32), jnp.ones((1, 4), jnp.float32)))
        _check(f, xs, w, compiled=True)
    finally:
        config.update("jax_enable_x64", False)


@pytest.mark.parametrize("case", ["returned elsewhere", "through a reshape", "input kept", "old value returned"])
def test_updates_in_place_only_of_the_carried_value(case):
    """A dynamic-update-slice of a carried array is written in place only where the loop
    returns it as that array's next value and nothing else reads the old one: an update of
    one array returned in another's place, one through a reshape, one of an array the loop
    also passes on unchanged leave the caller's arrays as they were."""
    rng = np.random.default_rng(17)
    w = rng.standard_normal((4, 4), dtype=np.float32)
    stack = rng.standard_normal((5, 2, 4), dtype=np.float32)
    keep = stack.copy()

    def f(stack, w):
        def body(i, c):
            s, t, h = c
            h = jnp.tanh(h @ w)
            if case == "returned elsewhere":
                return t, lax.dynamic_update_slice(s, h[None], (i, 0, 0)), h
            if case == "through a reshape":
                return lax.dynamic_update_slice(s.reshape(5, 2, 4), h[None], (i, 0, 0)), t, h
            if case == "old value returned":   # (the update's operand returned beside it)
                return lax.dynamic_update_slice(s, h[None], (i, 0, 0)), s, h
            return s, lax.dynamic_update_slice(s, h[None], (i, 0, 0)), h
        return lax.fori_loop(0, 5, body, (stack, stack * 2.0, jnp.ones((2, 4), jnp.float32)))
    _check(f, stack, w, compiled=case == "through a reshape")
    np.testing.assert_array_equal(stack, keep)
