"""A reduce whose reduced dimensions all have size 1 is each element combined with the
init (``reduction._init_combined``, one element-wise pass): bit for bit the reference's,
for every standard combiner and element type, special values and inits, under both
float environments, in one thread and in several (JAX's ``take_along_axis`` ends its
bounds check with such a reduce-and over pred[n, k, 1])."""
import numpy as np
import pytest

import xla_explorer as xe
from denormkit import discrete_values

pytest.importorskip("numba")

_OPS = {"add": xe.Add, "mul": xe.Mul, "max": xe.Max, "min": xe.Min, "and": xe.And, "or": xe.Or, "xor": xe.Xor}


def _tiny(t):
    """The smallest normal of float type t (bf16 has f32's exponent range)."""
    return float(np.finfo(np.float32 if t == "bf16" else xe.Shape(t, ()).dtype).tiny)


def _bits(a):
    a = np.asarray(a)
    return a.view(f"u{a.dtype.itemsize}") if a.dtype.kind == "f" else a


def _values(t, n, rng):
    dt = xe.Shape(t, ()).dtype
    discrete = discrete_values(dt, n, rng)
    if discrete is not None:
        return discrete
    x = rng.standard_normal(n).astype(dt)
    tiny = _tiny(t)
    special = np.array([np.nan, -np.nan, 0.0, -0.0, np.inf, -np.inf, tiny / 2, -tiny / 4, tiny, 1e30],
                       np.float64).astype(dt)
    x[rng.integers(0, n, 4 * len(special))] = np.tile(special, 4)
    return x


def _inits(t):
    dt = xe.Shape(t, ()).dtype
    if t == "pred":
        return [True, False]
    if np.dtype(dt).kind in "iu":
        info = np.iinfo(dt)
        return [0, 1, info.max, info.min, 7]
    tiny = _tiny(t)
    return [0.0, -0.0, 1.0, -np.inf, np.inf, np.nan, tiny / 2, -2.5]


@pytest.mark.parametrize("t", ["f32", "f64", "s32", "s8", "u8", "s64", "pred", "bf16", "f16"])
def test_reduce_over_size_one_dimensions_is_the_init_combined_with_each_element(t):
    rng = np.random.default_rng(11)
    dt = xe.Shape(t, ()).dtype
    kind = "pred" if t == "pred" else ("int" if np.dtype(dt).kind in "iu" else "float")
    names = {"pred": ["and", "or", "xor", "max", "min"], "int": list(_OPS),
             "float": ["add", "mul", "max", "min"]}[kind]
    for dims, reduced in [((2048, 1), [1]), ((3, 1, 5), [1]), ((1, 300001, 1), [0, 2]), ((1,), [0]), ((0, 1), [1])]:
        n = int(np.prod(dims))
        xv = _values(t, max(n, 1), rng)[:n].reshape(dims)
        for name in names:
            b = xe.XlaBuilder("r")
            x = xe.Parameter(b, 0, xe.Shape(t, dims), "x")
            init = xe.Parameter(b, 1, xe.Shape(t, ()), "init")
            comp = b.build(xe.Reduce(x, init, lambda a, c: _OPS[name](a, c), reduced))
            for iv in _inits(t):
                iv = np.asarray(iv).astype(dt)[()]
                for env in ("flush", "ieee"):
                    with xe.float_env(denormals=env):
                        want = comp.run(xv, iv)
                        got = comp.run(xv, iv, backend="numba")
                    assert got.shape == want.shape and got.dtype == want.dtype
                    if kind == "float":  # which NaN's payload a maximum keeps is fmax's
                        nan = np.isnan(np.asarray(want, np.float64))
                        np.testing.assert_array_equal(np.isnan(np.asarray(got, np.float64)), nan)
                        np.testing.assert_array_equal(_bits(got)[~nan], _bits(want)[~nan],
                                                      err_msg=f"{t} {dims} {name} {iv} {env}")
                    else:
                        np.testing.assert_array_equal(got, want, err_msg=f"{t} {dims} {name} {iv}")
