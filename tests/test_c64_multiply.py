"""A c64 multiply in a fused loop runs on the parts as f32 (``scalar_lib.cmul_c64``): every
step rounded to f32 (and flushed in the flushing environment) as ``cmul`` rounds it in
complex128, so the values are the reference's, bit for bit, over all pairs of special
values (zeros of both signs, f32 denormals, infinities, NaNs, the largest finite values);
and the loop gives the bits it gave through ``cmul`` (``emit.C64_MULTIPLY`` off)."""
import numpy as np
import pytest

import xla_explorer as xe

pytest.importorskip("numba")

from xla_explorer.executors import emit  # noqa: E402

_SPECIAL = [0.0, -0.0, 1.0, -2.5, 1e-39, -3e-39, 1.2e-38, 3e38, -3.4e38, np.inf, -np.inf, np.nan, 1e-20, 7.0]


def _pairs():
    parts = np.array(_SPECIAL, np.float32)
    z = (parts[:, None] + 1j * parts[None, :]).reshape(-1).astype(np.complex64)   # every (re, im)
    x = np.repeat(z, z.size)
    y = np.tile(z, z.size)
    rng = np.random.default_rng(8)
    r = (rng.standard_normal(4096) + 1j * rng.standard_normal(4096)).astype(np.complex64)
    return np.concatenate([x, r]), np.concatenate([y, r[::-1] * np.float32(1e-19)])


def _multiply():
    b = xe.XlaBuilder("c64_mul")
    n = _pairs()[0].size
    x = xe.Parameter(b, 0, xe.Shape("c64", (n,)), "x")
    y = xe.Parameter(b, 1, xe.Shape("c64", (n,)), "y")
    return b.build(xe.Mul(x, y))


def _same(a, b):
    """Bit for bit, NaN parts as NaNs (their payload is the hardware's)."""
    a, b = (np.asarray(v).view(np.float32) for v in (a, b))
    nan = np.isnan(a)
    assert (nan == np.isnan(b)).all()
    np.testing.assert_array_equal(a[~nan].view(np.uint32), b[~nan].view(np.uint32))


@pytest.mark.parametrize("env", ["flush", "ieee"])
def test_a_c64_multiply_has_the_references_bits(env, monkeypatch):
    x, y = _pairs()
    got = []
    with xe.float_env(denormals=env):
        want = _multiply().run(x, y)
        for on in (True, False):
            monkeypatch.setattr(emit, "C64_MULTIPLY", on)
            comp = _multiply()
            got.append(comp.run(x, y, backend="numba"))
    _same(got[0], want)
    np.testing.assert_array_equal(np.asarray(got[0]).view(np.uint32), np.asarray(got[1]).view(np.uint32))
