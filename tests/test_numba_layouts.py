"""The CPU kernels' layout-specific paths against the reference: every dimension a window,
a reduction, a broadcast or a gathered slice can run along, serial and parallel.

Integers are compared bit for bit; floats within the accumulation tolerance where the
kernel may sum in another order.  Shapes are random (seeded) and small, plus one size
past ``PARALLEL_THRESHOLD`` per path so that the threaded version runs too.
"""
import numpy as np
import pytest

import xla_explorer as xe

pytest.importorskip("numba")

from xla_explorer.executors.numba_setup import PARALLEL_THRESHOLD  # noqa: E402

RNG = np.random.default_rng(15)


def _values(shape, t, rng=RNG):
    if t.startswith("f"):
        return rng.normal(size=shape).astype(t.replace("f", "float"))
    return rng.integers(-50, 50, size=shape).astype({"s32": np.int32, "s8": np.int8, "u8": np.uint8}[t])


def _check(comp, *args, exact=True):
    got = comp.run(*args, backend="numba")
    want = comp.run(*args)
    if exact:
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-5)


# -- fused loops: broadcasts and iotas constant or contiguous along the row ------------------

def _random_broadcast_case(rng, big):
    rank = int(rng.integers(1, 5))
    dims = [int(rng.integers(1, 6)) for _ in range(rank)]
    if big:  # past the parallel threshold, with one long or many short rows
        dims[int(rng.integers(0, rank))] = PARALLEL_THRESHOLD // max(1, int(np.prod(dims))) + 3
    kept = sorted(d for d in range(rank) if rng.random() < 0.5)
    # a kept dimension of size 1 in the operand broadcasts along the result dimension
    operand = [1 if rng.random() < 0.2 else dims[d] for d in kept]
    return dims, kept, operand


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("t", ["s32", "f32"])
def test_fused_broadcasts_match_the_reference(seed, t):
    rng = np.random.default_rng(seed)
    dims, kept, operand = _random_broadcast_case(rng, big=seed % 3 == 0)
    b = xe.XlaBuilder("bcast")
    x = xe.Parameter(b, 0, xe.Shape(t, tuple(dims)), "x")
    y = xe.Parameter(b, 1, xe.Shape(t, tuple(operand)), "y")
    yb = xe.BroadcastInDim(y, tuple(dims), kept)
    io = xe.Iota(b, xe.Shape(t, tuple(dims)), int(rng.integers(0, len(dims))))
    r = xe.Mul(xe.Add(x, yb), io)
    comp = b.build(xe.Sub(r, xe.Constant(b, np.array(3, dtype=xe.Shape(t, ()).dtype))))
    _check(comp, _values(dims, t, rng), _values(operand, t, rng), exact=True)


def test_a_broadcast_read_by_two_loops_is_computed_in_each():
    b = xe.XlaBuilder("shared_bcast")
    x = xe.Parameter(b, 0, xe.Shape("s32", (40, 30)), "x")
    v = xe.Parameter(b, 1, xe.Shape("s32", (30,)), "v")
    vb = xe.BroadcastInDim(v, (40, 30), [1])
    io = xe.Iota(b, xe.Shape("s32", (40, 30)), 0)
    comp = b.build(xe.Tuple(xe.Add(xe.Mul(x, vb), io), xe.Sub(vb, io)))
    plan = comp.fusion_plan()
    assert [g.root.opcode for g in plan.groups] == ["add", "subtract"]
    assert all({"broadcast", "iota"} <= {m.opcode for m in g.members} for g in plan.groups)
    args = (_values((40, 30), "s32"), _values((30,), "s32"))
    for g, w in zip(comp.run(*args, backend="numba"), comp.run(*args)):
        np.testing.assert_array_equal(g, w)
