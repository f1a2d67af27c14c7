"""The fused loops' select reads both operands first and picks one (``scalar_lib.pick``,
a blend that vectorises) instead of reading only the chosen one: the same values for
every element type, a random predicate, NaN payloads and signed zeros, operands that
are parameters, broadcasts and computed values, in one thread and in several."""
import numpy as np
import pytest

import xla_explorer as xe
from denormkit import discrete_values

pytest.importorskip("numba")


def _values(t, n, rng):
    dt = xe.Shape(t, ()).dtype
    discrete = discrete_values(dt, n, rng)
    if discrete is not None:
        return discrete
    if np.dtype(dt).kind == "c":
        return (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dt)
    x = rng.standard_normal(n).astype(np.float32)
    x[::7] = np.float32(-0.0)
    x[3::11] = np.uint32(0x7FC01234).view(np.float32)  # a NaN with a payload
    return x.astype(dt)


def _bits(a):
    """The bytes of float and complex values (NaN payloads, signed zeros), else the values."""
    a = np.ascontiguousarray(a)
    return a if a.dtype.kind in "iub" else a.view(np.uint8)


@pytest.mark.parametrize("t", ["f32", "f64", "bf16", "f16", "s32", "u8", "s64", "pred", "c64"])
def test_select_in_a_fused_loop_picks_the_same_bits_as_the_reference(t):
    rng = np.random.default_rng(3)
    for n in (1, 37, 300_001):
        b = xe.XlaBuilder("sel")
        p = xe.Parameter(b, 0, xe.Shape("pred", (n,)), "p")
        x = xe.Parameter(b, 1, xe.Shape(t, (n,)), "x")
        y = xe.Parameter(b, 2, xe.Shape(t, (n,)), "y")
        s = xe.Parameter(b, 3, xe.Shape(t, ()), "s")
        # parameters both ways, a broadcast scalar, and a select of a select
        r1 = xe.Select(p, x, y)
        r2 = xe.Select(xe.Not(p), xe.Broadcast(s, (n,)), r1)
        comp = b.build(xe.Tuple(r1, r2, xe.Select(p, r2, x)))
        args = [rng.integers(0, 2, n).astype(np.bool_), _values(t, n, rng), _values(t, n, rng),
                _values(t, 1, rng)[0]]
        want = comp.run(*args)
        got = comp.run(*args, backend="numba")
        for g, w in zip(got, want):
            np.testing.assert_array_equal(_bits(g), _bits(w), err_msg=f"{t} {n}")
