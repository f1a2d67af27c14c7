"""A reduce of a fused loop's value over few long rows (a whole-array ``max(abs(x))``, a
``sum(x * x)`` loss) folds the loop's elements as the loop computes them, each row in the
parts ``reduction._arb_pass`` cuts it into (``run_reduce_loop``'s P), joined by the same
second fold: the loop's value is not written and read back, and the result has the bits
of the loop and the Reduce run one after the other (``_fused_reduce`` off), for every
standard combiner and type, rows that do not divide evenly, NaNs, signed zeros, and a
value that other ops read too (kept)."""
import numpy as np
import pytest

import xla_explorer as xe

pytest.importorskip("numba")
jax = pytest.importorskip("jax")
jnp = jax.numpy

from xla_explorer.executors import numba_executor  # noqa: E402
from xla_explorer.executors.cpu import fused  # noqa: E402


@pytest.fixture
def parts(monkeypatch):
    seen = []
    orig = fused.run_reduce_loop

    def spy(*args, **kw):
        seen.append(kw.get("P", 1))
        return orig(*args, **kw)
    monkeypatch.setattr(fused, "run_reduce_loop", spy)
    return seen


def _bits(v):
    if isinstance(v, tuple):
        return [_bits(x) for x in v]
    v = np.asarray(v)
    return v.dtype, v.shape, v.tobytes()


def _unfused(f, args, monkeypatch):
    with monkeypatch.context() as m:
        m.setattr(numba_executor, "_fused_reduce", lambda *a, **k: None)
        comp = xe.from_jax(f, *args)
        comp.run(*args, backend="numba")
        return comp.run(*args, backend="numba")


def _f32(n, seed):
    return np.random.default_rng(seed).standard_normal(n).astype(np.float32)


def _s32(n, seed):
    return np.random.default_rng(seed).integers(-99, 99, n).astype(np.int32)


CASES = {
    "max |x|": (lambda x: jnp.max(jnp.abs(x)), lambda: [_f32(1 << 20, 0)]),
    "min 2x": (lambda x: jnp.min(x * 2), lambda: [_f32((1 << 20) + 37, 1)]),
    "sum x*x": (lambda x: jnp.sum(x * x), lambda: [_f32(1 << 20, 2)]),
    "sum x+1 odd": (lambda x: jnp.sum(x + 1), lambda: [_f32(1_000_003, 3)]),
    "prod": (lambda x: jnp.prod(1 + x * 1e-3), lambda: [_f32(600_001, 4)]),
    "rows max": (lambda x: jnp.max(x - 1, axis=1), lambda: [_f32(3 * 300_001, 5).reshape(3, 300_001)]),
    "s32 sum": (lambda x: jnp.sum(x * 3), lambda: [_s32(1 << 20, 6)]),
    "s32 max": (lambda x: jnp.max(x ^ 5), lambda: [_s32(1 << 20, 7)]),
    "kept": (lambda x: (jnp.sum(x * x), x * x), lambda: [_f32(1 << 20, 8)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_bits_of_the_unfused_steps(name, parts, monkeypatch):
    f, make = CASES[name]
    args = make()
    comp = xe.from_jax(f, *args)
    got = [comp.run(*args, backend="numba") for _ in range(2)]
    assert any(p > 1 for p in parts), "the fold in parts was not used"
    assert _bits(got[0]) == _bits(got[1]) == _bits(_unfused(f, args, monkeypatch))
    want = jax.jit(f)(*args)
    for g, w in zip(got[1] if isinstance(got[1], tuple) else (got[1],), want if isinstance(want, tuple) else (want,)):
        np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64),
                                   rtol=1e-3 if name == "prod" else 2e-5)   # (600,000 roundings)


@pytest.mark.parametrize("special", ["nan", "zeros", "inf"])
def test_specials(special, parts, monkeypatch):
    x = _f32(1 << 20, 9)
    if special == "nan":
        x[123_456] = np.nan
        x[900_001] = -np.nan
    elif special == "zeros":
        x[:] = 0.0
        x[::3] = -0.0
    else:
        x[5] = np.inf
        x[700_000] = -np.inf
    for f in (lambda x: jnp.max(x * 2), lambda x: jnp.min(x * 2), lambda x: jnp.sum(x * 2)):
        comp = xe.from_jax(f, x)
        got = comp.run(x, backend="numba")
        assert _bits(comp.run(x, backend="numba")) == _bits(got) == _bits(_unfused(f, [x], monkeypatch))
        ref = np.asarray(comp.run(x, backend="numpy"))
        assert np.array_equal(np.isnan(ref), np.isnan(got)) and (np.isnan(ref) or ref == got or abs(ref - got) < 1)
    assert any(p > 1 for p in parts)


def test_while_loop_condition(parts):
    x = _f32(1 << 20, 10) * 100
    f = lambda x: jax.lax.while_loop(lambda c: jnp.max(jnp.abs(c)) >= 1.0, lambda c: c * 0.5, x)  # noqa: E731
    comp = xe.from_jax(f, x)
    got = comp.run(x, backend="numba")
    assert _bits(got) == _bits(comp.run(x, backend="numpy")) == _bits(np.asarray(jax.jit(f)(x)))
    assert any(p > 1 for p in parts)
