"""Converts whose results cannot be denormal (``numba_executor._never_denormal``): from an
integer or pred, or from a float type whose smallest denormal is at least the target's
smallest normal (f16 and the f8 types into f32 / f64).  Under the flushing environment
such a value needs no flushing by its readers, so a reduce of it folds the convert's rows
(``x.mean`` of f16: one pass over the f16 array, not a write and a read of its f32 copy);
a bf16 or f32 source (denormals that stay denormal) is still flushed.  Every result keeps
the bits of the unfolded run and agrees with the NumPy reference."""
import numpy as np
import pytest

import xla_explorer as xe

pytest.importorskip("numba")

from xla_explorer import fpenv  # noqa: E402
from xla_explorer.executors import numba_executor  # noqa: E402


def _mean_rows(t, dims):
    b = xe.XlaBuilder(f"mean_{t}")
    x = xe.Parameter(b, 0, xe.Shape(t, dims), "x")
    wide = xe.ConvertElementType(x, "f32")
    s = xe.Reduce(wide, xe.Constant(b, np.float32(0)), lambda p, q: xe.Add(p, q), [1])
    return b.build(xe.Div(s, xe.Constant(b, np.float32(dims[1]))))


def _labels(comp):
    return [label for c in comp.computations for p in c.__dict__.get("_numba_programs", {}).values()
            for label in p.labels]


def _bits(a):
    a = np.asarray(a)
    return a.dtype, a.shape, a.reshape(-1).view(np.uint8).tobytes()


@pytest.mark.parametrize("t", ["f16", "s32", "u8", "f8e5m2", "pred"])
def test_a_reduce_folds_the_rows_of_a_convert_that_cannot_be_denormal(t):
    rng = np.random.default_rng(4)
    dims = (512, 300)
    if t == "pred":
        x = rng.random(dims) < 0.5
    elif t in ("s32", "u8"):
        x = rng.integers(0, 100, dims).astype(xe.Shape(t, ()).dtype)
    else:   # (f16 and f8 denormals included: their f32 values are normal)
        x = (rng.standard_normal(dims) * 1e-3).astype(xe.Shape(t, ()).dtype)
        x.reshape(-1)[:64] = np.array(2.0 ** -24 if t == "f16" else 2.0 ** -16).astype(x.dtype)
    with fpenv.float_env(denormals="flush"):
        comp = _mean_rows(t, dims)
        want = comp.run(x, backend="numpy")
        got = [comp.run(x, backend="numba") for _ in range(2)]
        assert any("folding its rows" in label for label in _labels(comp)), _labels(comp)
        np.testing.assert_allclose(got[-1], want, rtol=1e-5, atol=1e-7)
        assert _bits(got[0]) == _bits(got[1])


@pytest.mark.parametrize("t", ["bf16", "f64"])
def test_a_convert_from_a_type_with_f32_denormals_is_still_flushed(t):
    dims = (64, 40)
    x = np.full(dims, 1e-39, np.float64).astype(xe.Shape(t, ()).dtype)   # f32 denormals once converted
    x[::2] = 1.0
    with fpenv.float_env(denormals="flush"):
        comp = _mean_rows(t, dims)
        want = comp.run(x, backend="numpy")
        for _ in range(2):
            got = comp.run(x, backend="numba")
            assert _bits(got) == _bits(want)   # the odd rows: the flushed denormals' mean, 0
    assert not got[1::2].any()


def test_which_converts_are_never_denormal():
    def convert(src, dst):
        b = xe.XlaBuilder("c")
        x = xe.Parameter(b, 0, xe.Shape(src, (4,)), "x")
        comp = b.build(xe.ConvertElementType(x, dst))
        return comp.entry.root

    never = numba_executor._never_denormal
    assert all(never(convert(s, d)) for s in ("pred", "s8", "u32", "s64", "f16", "f8e4m3fn", "f8e5m2")
               for d in ("f32", "f64"))
    assert never(convert("f32", "f64"))   # (an f32 denormal is a normal f64)
    assert not any(never(convert(s, "f32")) for s in ("bf16", "f32", "f64"))
    assert not never(convert("f32", "f16"))   # (f16 is not a flushed type: no rule)
