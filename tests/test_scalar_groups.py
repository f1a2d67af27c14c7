"""Fused groups of integer / pred scalars run as Python functions (``cpu.scalar_group``):
the same values as the NumPy reference and as the fused Numba loop they replace, for
every integer type at its edges (wrap-around), every op they take; anything else keeps
the loop."""
import itertools

import numpy as np
import pytest

import xla_explorer as xe

pytest.importorskip("numba")

from xla_explorer.executors import numba_executor  # noqa: E402
from xla_explorer.executors.cpu import scalar_group  # noqa: E402
from xla_explorer.executors.fusion import fusion_plan  # noqa: E402

INTS = ["s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64"]


def _edges(t):
    info = np.iinfo(np.dtype(xe.Shape(t, ()).dtype))
    vals = {info.min, info.max, 0, 1, 2, info.max // 2 + 1, info.max - 1, info.min + 1}
    if info.min < 0:
        vals |= {-1, -2, info.min // 2}
    return sorted(vals)


def _binary(t, make):
    b = xe.XlaBuilder("scalars")
    x = xe.Parameter(b, 0, xe.Shape(t, ()), "x")
    y = xe.Parameter(b, 1, xe.Shape(t, ()), "y")
    return b.build(make(b, x, y))


def _groups(comp):
    return [s.group for s in fusion_plan(comp.entry).steps if s.group is not None]


def _check(comp, args):
    want = comp.run(*args)
    got = comp.run(*args, backend="numba")
    again = comp.run(*args, backend="numba")   # the run plan's step
    assert got.dtype == want.dtype and got.shape == want.shape == ()
    assert got.tobytes() == want.tobytes() and again.tobytes() == want.tobytes(), (args, got, want)


def _pairs(t):
    dtype = np.dtype(xe.Shape(t, ()).dtype)
    e = _edges(t)
    return [(dtype.type(a), dtype.type(b)) for a, b in itertools.product(e, e)]


OPS = {
    "add": lambda b, x, y: xe.Add(x, y),
    "sub": lambda b, x, y: xe.Sub(x, y),
    "mul": lambda b, x, y: xe.Mul(x, y),
    "max": lambda b, x, y: xe.Max(x, y),
    "min": lambda b, x, y: xe.Min(x, y),
    "and": lambda b, x, y: xe.And(x, y),
    "or": lambda b, x, y: xe.Or(x, y),
    "xor": lambda b, x, y: xe.Xor(x, y),
    "neg_add": lambda b, x, y: xe.Add(xe.Neg(x), y),
    "abs_sub": lambda b, x, y: xe.Sub(xe.Abs(x), y),
    "not_xor": lambda b, x, y: xe.Xor(xe.Not(x), y),
    "select_lt": lambda b, x, y: xe.Select(xe.Lt(x, y), xe.Add(x, y), xe.Sub(y, x)),
    "clamp": lambda b, x, y: xe.Clamp(xe.Min(x, y), xe.Mul(x, y), xe.Max(x, y)),
}


@pytest.mark.parametrize("t", INTS)
@pytest.mark.parametrize("op", sorted(OPS))
def test_integer_scalar_ops_wrap_as_the_reference(t, op):
    if op in ("neg_add", "abs_sub") and t.startswith("u"):
        pytest.skip("negate and abs take signed integers")
    comp = _binary(t, OPS[op])
    (group,) = _groups(comp)
    assert scalar_group.scalar_runner(group) is not None
    for args in _pairs(t):
        _check(comp, args)


@pytest.mark.parametrize("direction", ["Eq", "Ne", "Lt", "Le", "Gt", "Ge"])
@pytest.mark.parametrize("t", ["s8", "s32", "u32", "u64", "s64"])
def test_compares_and_pred_logic(direction, t):
    def make(b, x, y):
        c = getattr(xe, direction)(x, y)
        d = xe.Lt(y, x)
        p = xe.Xor(xe.Or(c, d), xe.And(c, xe.Not(d)))
        return xe.Select(p, xe.ConvertElementType(c, t), xe.ConvertElementType(xe.Ne(x, y), t))
    comp = _binary(t, make)
    (group,) = _groups(comp)
    assert scalar_group.scalar_runner(group) is not None
    for args in _pairs(t):
        _check(comp, args)


@pytest.mark.parametrize("src,dst", [(a, b) for a in INTS + ["pred"] for b in INTS + ["pred"] if a != b])
def test_converts_between_integer_types_wrap(src, dst):
    b = xe.XlaBuilder("convert")
    x = xe.Parameter(b, 0, xe.Shape(src, ()), "x")
    comp = b.build(xe.Add(xe.ConvertElementType(x, dst), xe.ConvertElementType(x, dst))
                   if dst != "pred" else xe.Xor(xe.ConvertElementType(x, dst), xe.ConstantR0(b, np.bool_(True))))
    (group,) = _groups(comp)
    assert scalar_group.scalar_runner(group) is not None
    dtype = np.dtype(xe.Shape(src, ()).dtype)
    vals = [False, True] if src == "pred" else _edges(src)
    for v in vals:
        _check(comp, (dtype.type(v),))


def test_dynamic_update_slice_clamps_from_jax():
    """The clamps JAX emits before a dynamic-update-slice: two scalar groups, in Python;
    negative, in-range and far-out starts as the reference has them."""
    pytest.importorskip("jax")
    from jax import lax
    x = np.arange(48, dtype=np.float32).reshape(6, 8)
    u = -np.ones((2, 3), np.float32)
    comp = xe.from_jax(lambda x, u, k: lax.dynamic_update_slice(x, u, (k, k)), x, u, np.int32(0))
    groups = _groups(comp)
    assert groups and all(scalar_group.scalar_runner(g) is not None for g in groups)
    for k in [0, 1, 3, 5, 7, -1, -3, -6, -7, 2**31 - 1, -2**31]:
        k = np.int32(k)
        want = comp.run(x, u, k)
        for _ in range(2):
            got = comp.run(x, u, k, backend="numba")
            np.testing.assert_array_equal(got, want)


def test_floats_and_arrays_keep_the_loop():
    b = xe.XlaBuilder("f")
    x = xe.Parameter(b, 0, xe.Shape("f32", ()), "x")
    comp = b.build(xe.Add(x, x))
    (group,) = _groups(comp)
    assert scalar_group.scalar_runner(group) is None
    b = xe.XlaBuilder("v")
    x = xe.Parameter(b, 0, xe.Shape("s32", (3,)), "x")
    comp = b.build(xe.Add(x, x))
    (group,) = _groups(comp)
    assert scalar_group.scalar_runner(group) is None
    b = xe.XlaBuilder("div")
    x = xe.Parameter(b, 0, xe.Shape("s32", ()), "x")
    comp = b.build(xe.Div(xe.Add(x, x), x))
    (group,) = _groups(comp)
    assert scalar_group.scalar_runner(group) is None
    for v in (np.int32(0), np.int32(-2**31), np.int32(7)):
        _check(comp, (v,))


def test_the_runner_is_used_by_the_backend():
    b = xe.XlaBuilder("s")
    x = xe.Parameter(b, 0, xe.Shape("s32", ()), "x")
    comp = b.build(xe.Add(x, xe.ConstantR0(b, np.int32(1))))
    comp.run(np.int32(1), backend="numba")
    (group,) = _groups(comp)
    runner = numba_executor._backend("cpu").group_runner(group, "ieee")
    assert hasattr(runner, "source")
    out = runner([np.asarray(np.int32(2**31 - 1)), np.asarray(np.int32(1))])
    assert out.dtype == np.int32 and out.shape == () and int(out) == -2**31
