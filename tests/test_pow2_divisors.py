"""A float division by a constant power of two computed as the multiply by its reciprocal
(``emit._power_of_two_reciprocal``): the reference's bits for every kind of value --
denormal quotients, overflow, zeros, NaN, Inf -- in both floating-point modes, f32, f64
and bf16; other divisors stay divisions."""
import numpy as np
import pytest
import jax
from jax import lax

import xla_explorer as xe
from xla_explorer.executors import emit


def _values(dtype):
    info = np.finfo(dtype)
    rng = np.random.default_rng(7)
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, float(info.tiny), -float(info.tiny),
               float(info.tiny) * 0.75, float(info.tiny) * 3.0, float(info.max), -float(info.max),
               float(info.max) / 3, float(info.smallest_subnormal), 3.0 * float(info.smallest_subnormal)]
    wide = rng.standard_normal(3000) * np.exp2(rng.integers(info.minexp - 30, info.maxexp, 3000))
    with np.errstate(over="ignore"):
        return np.concatenate([special, wide]).astype(dtype)


def _bits(v):
    v = np.asarray(v)
    return v.view(f"u{v.dtype.itemsize}")


def _same(f, x, dtype):
    with jax.enable_x64(dtype == np.float64):
        comp = xe.from_jax(f, x)
    want = np.asarray(comp.run(x, backend="numpy"))
    got = np.asarray(comp.run(x, backend="numba"))
    nan = np.isnan(want.astype(np.float64))
    np.testing.assert_array_equal(np.isnan(got.astype(np.float64)), nan)
    np.testing.assert_array_equal(_bits(got)[~nan], _bits(want)[~nan])


@pytest.mark.parametrize("denormals", ["flush", "ieee"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("c", [2.0, 0.25, -4.0, 2.0 ** 100, 2.0 ** -100, 2.0 ** 126, 2.0 ** 127, 3.0, -0.1])
def test_divisions_by_constants_match_the_reference(denormals, dtype, c):
    x = _values(dtype)
    with xe.float_env(denormals=denormals):
        _same(lambda v: v * 1 / dtype(c) + 0, x, dtype)


@pytest.mark.parametrize("denormals", ["flush", "ieee"])
def test_bf16_divisions_by_powers_of_two(denormals):
    import ml_dtypes
    x = _values(np.float32).astype(ml_dtypes.bfloat16)
    with xe.float_env(denormals=denormals):
        for c in (2.0, 0.5, 2.0 ** -120, 2.0 ** 127):
            _same(lambda v: v * 1 / ml_dtypes.bfloat16(c), x, np.float32)


def test_which_divisors_become_multiplies():
    from xla_explorer.hlo.ir import Instruction
    from xla_explorer.shapes import Shape

    def div_by(c, t="f32"):
        dt = Shape(t, ()).dtype
        k = Instruction("c", "constant", Shape(t, ()), [], {"literal": np.array(c, dt)})
        b = Instruction("b", "broadcast", Shape(t, (4,)), [k], {"broadcast_dimensions": ()})
        x = Instruction("x", "parameter", Shape(t, (4,)), [])
        return Instruction("d", "divide", Shape(t, (4,)), [x, b])
    assert emit._power_of_two_reciprocal(div_by(0.25)) == 4.0
    assert emit._power_of_two_reciprocal(div_by(-8.0)) == -0.125
    assert emit._power_of_two_reciprocal(div_by(2.0 ** 126)) == 2.0 ** -126
    assert emit._power_of_two_reciprocal(div_by(2.0 ** 127)) is None     # (1/c denormal in f32)
    assert emit._power_of_two_reciprocal(div_by(2.0 ** 127, "f64")) == 2.0 ** -127
    for c in (3.0, 0.1, 0.0, np.inf, np.nan, 1e-45):
        assert emit._power_of_two_reciprocal(div_by(c)) is None, c
    assert emit._power_of_two_reciprocal(div_by(4, "s32")) is None


def test_switch_off_divides(monkeypatch):
    monkeypatch.setattr(emit, "POW2_DIVISORS", False)
    x = _values(np.float32)
    _same(lambda v: lax.div(v * 1, np.float32(0.5)), x, np.float32)
