"""Float matrix-vector products (``a @ v``, ``v @ a.T``, ``[1, K] @ [K, N]``) run ``linalg._matvec_rows``: one
pass over the matrix, its denormals read as zeros as XLA:CPU's DAZ reads them, instead of
BLAS beside a denormal scan (two passes over a memory-bound operand).  The values are the
reference's within a float sum's rounding, the same bits whatever the thread count, NaN
and infinities propagate, and a denormal in the matrix or the vector counts as zero under
flushing (a raw 1e-40 * 1e30 would be 1e-10) and as itself in "ieee"."""
import numpy as np
import pytest

import xla_explorer as xe
from xla_explorer import fpenv

pytest.importorskip("numba")
jax = pytest.importorskip("jax")
jnp = jax.numpy

from xla_explorer.executors.cpu import linalg, shape  # noqa: E402

FORMS = {
    "a @ v": lambda a, v: a @ v,
    "v @ a.T": lambda a, v: v @ a.T,
    "dot(a, v) * 2": lambda a, v: jnp.dot(a, v) * 2,
    "a @ v[:, None]": lambda a, v: a @ v[:, None],
    "v[None] @ a.T": lambda a, v: v[None] @ a.T,
}


@pytest.fixture
def spy(monkeypatch):
    calls = []
    orig = linalg._matvec

    def counted(*args):
        calls.append(args[0].shape)
        return orig(*args)
    monkeypatch.setattr(linalg, "_matvec", counted)
    return calls


def _operands(M, K, dt, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((M, K)).astype(dt), rng.standard_normal(K).astype(dt)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize("M,K", [(301, 257), (1030, 640), (17, 4099)])
def test_values_and_threads(form, dt, M, K, spy, monkeypatch):
    a, v = _operands(M, K, dt, M + K)
    f = FORMS[form]
    with jax.enable_x64(dt == np.float64):
        comp = xe.from_jax(f, a, v)
    got = [np.asarray(comp.run(a, v, backend="numba")).reshape(-1) for _ in range(2)]
    assert spy, "the matrix-vector kernel was not used"
    ref = np.asarray(comp.run(a, v, backend="numpy")).reshape(-1)
    exact = (a.astype(np.float64) @ v.astype(np.float64)) * (2 if "2" in form else 1)
    tol = 1e-5 if dt == np.float32 else 1e-13
    np.testing.assert_allclose(got[1], exact, rtol=tol, atol=tol * np.sqrt(K))
    np.testing.assert_allclose(got[1], ref, rtol=tol, atol=tol * np.sqrt(K))
    assert got[0].tobytes() == got[1].tobytes()
    monkeypatch.setattr(shape, "threads", lambda: 1)
    one = np.asarray(comp.run(a, v, backend="numba")).reshape(-1)
    assert one.tobytes() == got[1].tobytes()


def test_specials_propagate(spy):
    a, v = _operands(300, 200, np.float32, 1)
    a[3, 7], a[5, 0], a[9, 199] = np.nan, np.inf, -np.inf
    a[11, 4], a[11, 5] = np.inf, -np.inf    # inf - inf: NaN
    v[2] = 0.0
    a[13, 2] = np.inf                        # inf * 0: NaN
    comp = xe.from_jax(FORMS["a @ v"], a, v)
    got = np.asarray(comp.run(a, v, backend="numba"))
    want = np.asarray(jax.jit(FORMS["a @ v"])(a, v))
    assert spy
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    fin = np.isfinite(want)
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    np.testing.assert_array_equal(np.sign(got[~fin & ~np.isnan(want)]), np.sign(want[~fin & ~np.isnan(want)]))
    np.testing.assert_allclose(got[fin], want[fin], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dt,tiny,big", [(np.float32, 1e-40, 1e30), (np.float64, 1e-310, 1e300)])
@pytest.mark.parametrize("which", ["matrix", "vector"])
def test_denormals_read_as_zeros(dt, tiny, big, which, spy):
    a, v = _operands(260, 300, dt, 2)
    with jax.enable_x64(dt == np.float64):
        comp = xe.from_jax(FORMS["a @ v"], a, v)
    if which == "matrix":
        bad_a, bad_v = np.zeros_like(a), np.full_like(v, big)
        bad_a[7, 123] = dt(tiny)
        bad_a[8, 0] = -dt(tiny)
    else:
        bad_a, bad_v = np.full_like(a, big), np.zeros_like(v)
        bad_v[45] = dt(tiny)
    got = np.asarray(comp.run(bad_a, bad_v, backend="numba"))
    assert spy and not np.any(got)
    assert np.array_equal(got, np.asarray(comp.run(bad_a, bad_v, backend="numpy")))
    # the float mode is the caller's again (a kernel that set the hardware's DAZ restores it)
    assert np.float32(1e-40) * np.float32(1) != 0 and np.float64(1e-310) * 1.0 != 0
    with fpenv.float_env("ieee"):
        raw = np.asarray(comp.run(bad_a, bad_v, backend="numba"))
    assert np.any(raw)


def test_sums_that_round_to_a_denormal_are_flushed(spy):
    # each product normal, their sum a denormal: XLA:CPU's flush-to-zero makes it +-0
    a = np.zeros((300, 256), np.float32)
    v = np.zeros(256, np.float32)
    a[:, 0], a[:, 1], v[0], v[1] = 3e-38, -2.99e-38, 1.0, 1.0
    comp = xe.from_jax(FORMS["a @ v"], a, v)
    got = np.asarray(comp.run(a, v, backend="numba"))
    assert spy and not np.any(got)
    with fpenv.float_env("ieee"):
        assert np.all(np.asarray(comp.run(a, v, backend="numba")) != 0)


def test_small_and_other_shapes_keep_blas(spy):
    a, v = _operands(16, 16, np.float32, 3)
    comp = xe.from_jax(FORMS["a @ v"], a, v)
    np.testing.assert_allclose(comp.run(a, v, backend="numba"), a @ v, rtol=1e-5, atol=1e-5)
    m = np.random.default_rng(4).standard_normal((300, 200)).astype(np.float32)
    comp = xe.from_jax(lambda a, b: a @ b, m, m.T.copy())   # matrix-matrix
    np.testing.assert_allclose(comp.run(m, m.T.copy(), backend="numba"), m @ m.T, rtol=1e-4, atol=1e-4)
    assert not spy
