"""The fusion budget counts work (``fusion.loop_cost``): scalar constants, their broadcasts
and converts that make no code are free, so a long constant-heavy element-wise chain (an
erf polynomial's Horner steps) is one fused loop, computed with its scalars read once per
row (``cpu.fused.RowLoopSource``), bit for bit the reference's; a truly huge expression is
still cut (``MAX_FUSED`` work, ``MAX_MEMBERS`` instructions a loop, ``MAX_FUSED_WORK`` a
module)."""
import re

import numpy as np
import pytest

import xla_explorer as xe
from xla_explorer.executors import fusion

pytest.importorskip("numba")

F32 = np.float32
#: a Horner polynomial's coefficients (erf-like: alternating, shrinking)
COEFFS = [(-1) ** k * 1.1283791 / (2 * k + 1) for k in range(16)]


def _horner(b, x, s, row, n):
    """sum c_k z^k with z = x * x (select(|x| < 1, z, 1 / z): a divide and a compare), plus a
    runtime scalar ``s`` and a row broadcast along the major dimension."""
    def scalar(c):   # (a broadcast of a constant: a NumPy value is folded into an array constant)
        return xe.Broadcast(xe.Constant(b, F32(c)), [3, n])
    one = scalar(1)
    z = xe.Mul(x, x)
    z = xe.Select(xe.Lt(xe.Abs(x), one), z, xe.Div(one, z))
    y = scalar(COEFFS[-1])
    for c in reversed(COEFFS[:-1]):
        y = xe.Add(xe.Mul(y, z), scalar(c))
    y = xe.Mul(xe.Sub(y, xe.Broadcast(s, [3, n])), xe.BroadcastInDim(row, [3, n], [1]))
    return xe.Mul(x, y)


def _build(n):
    b = xe.XlaBuilder("horner")
    x = xe.Parameter(b, 0, xe.Shape("f32", (3, n)), "x")
    s = xe.Parameter(b, 1, xe.Shape("f32", ()), "s")
    row = xe.Parameter(b, 2, xe.Shape("f32", (n,)), "row")
    return b.build(_horner(b, x, s, row, n))


def _values(n, rng):
    tiny = float(np.finfo(F32).tiny)
    special = [0.0, -0.0, tiny, -tiny, tiny / 2, -tiny / 4, 1e-20, 0.999, -1.0, 1.0, 1.5, -7.0, 1e19,
               np.inf, -np.inf, np.nan]
    x = rng.uniform(-3, 3, (3, n))
    flat = x.reshape(-1)
    flat[:min(len(special), flat.size)] = special[:flat.size]
    return x.astype(F32)


def _same_bits(got, want):
    got, want = np.asarray(got), np.asarray(want)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)   # (a NaN's sign and payload: the executors' own)
    np.testing.assert_array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))


def test_loop_cost_counts_only_work():
    b = xe.XlaBuilder("costs")
    x = xe.Parameter(b, 0, xe.Shape("f32", (4, 5)), "x")
    h = xe.Parameter(b, 1, xe.Shape("bf16", (4, 5)), "h")
    row = xe.Parameter(b, 2, xe.Shape("f32", (5,)), "row")
    k = xe.Constant(b, F32(2))
    parts = [xe.Mul(x, xe.Broadcast(k, [4, 5])), xe.BroadcastInDim(row, [4, 5], [1]),
             xe.ConvertElementType(h, "f32"), xe.ConvertElementType(x, "bf16"), xe.ConvertElementType(x, "s32"),
             xe.ConvertElementType(x, "f32")]
    comp = b.build(xe.Tuple(parts))
    cost = {i.name: fusion.loop_cost(i) for i in comp.entry.instructions}
    by_op = {}
    for i in comp.entry.instructions:
        key = i.opcode if i.opcode != "convert" else f"convert {i.operands[0].shape.element_type}->{i.shape.element_type}"
        if i.opcode == "broadcast":
            key += " of a scalar" if i.operands[0].shape.rank == 0 else " of a row"
        by_op.setdefault(key, set()).add(cost[i.name])
    assert by_op["constant"] == {0} and by_op["broadcast of a scalar"] == {0}
    assert by_op["broadcast of a row"] == {1} and by_op["multiply"] == {1}
    assert by_op["convert bf16->f32"] == {0}
    assert by_op["convert f32->bf16"] == {1} and by_op["convert f32->s32"] == {1}   # (rounding, code)
    assert by_op.get("convert f32->f32", {0}) == {0}


def test_a_constant_heavy_chain_is_one_loop():
    comp = _build(7)
    groups = [g for g in comp.fusion_plan().groups if len(g.members) > 1]
    assert len(groups) == 1, comp.fusion_plan()
    (g,) = groups
    assert g.root is comp.entry.root
    inside = [i for i in comp.entry.instructions if i.opcode not in ("parameter", "constant")]
    assert set(inside) <= set(g.members)
    assert len(g.members) > 50 > g.cost > 32           # more than the old 32-instruction cut
    assert g.cost == sum(fusion.loop_cost(m) for m in g.members) <= fusion.MAX_FUSED


@pytest.mark.parametrize("n", [0, 1, 7, 1001])
def test_the_loop_gives_the_references_bits(n):
    from xla_explorer.executors.cpu.fused import RowLoopSource
    rng = np.random.default_rng(n)
    comp = _build(n)
    x, row = _values(n, rng), rng.uniform(0.5, 2, n).astype(F32)
    row[:1] = -0.0
    (g,) = [g for g in comp.fusion_plan().groups if len(g.members) > 1]
    src = RowLoopSource(g)
    assert not any(re.search(r"\bin\d+\[0\]", line) for line in src.body)   # scalars read per row
    assert sum(line.startswith("v_in") for line in src.prelude) == len(COEFFS) + 2   # (and 1, and s)
    for env in ("flush", "ieee") if n == 1001 else ("flush",):   # (each mode a loop compiled)
        for s in (F32(0.25), F32(-0.0), F32(np.finfo(F32).tiny / 8)):
            with xe.float_env(denormals=env):
                _same_bits(comp.run(x, s, row, backend="numba"), comp.run(x, s, row))


def test_a_huge_expression_is_still_cut():
    b = xe.XlaBuilder("huge")
    x = xe.Parameter(b, 0, xe.Shape("f32", (64,)), "x")
    y = x
    for k in range(1000):
        y = xe.Add(xe.Mul(y, xe.Broadcast(xe.Constant(b, F32(1 + k / 4096)), [64])), x) if k % 3 else xe.Max(y, xe.Neg(x))
    comp = b.build(y)
    groups = comp.fusion_plan().groups
    assert len(groups) > 1
    assert max(g.cost for g in groups) == fusion.MAX_FUSED       # filled to the budget, no further
    assert all(len(g.members) <= fusion.MAX_MEMBERS for g in groups)
    kinds = {fusion._loop_kind(g): g.cost for g in groups if len(g.members) > 1}
    assert len(kinds) <= fusion.MAX_FUSED_LOOPS and sum(kinds.values()) <= fusion.MAX_FUSED_WORK


def test_free_instructions_are_bounded_too():
    b = xe.XlaBuilder("free")
    x = xe.Parameter(b, 0, xe.Shape("f32", (64,)), "x")
    y = xe.Neg(x)
    for _ in range(2 * fusion.MAX_MEMBERS):
        y = xe.ConvertElementType(y, "f32")      # costs nothing, but is a statement each
    comp = b.build(y)
    groups = comp.fusion_plan().groups
    assert len(groups) >= 2 and max(len(g.members) for g in groups) <= fusion.MAX_MEMBERS


def test_a_negate_or_abs_of_a_flushed_value_is_not_flushed_again():
    from xla_explorer.executors import loopgen
    b = xe.XlaBuilder("sign")
    x = xe.Parameter(b, 0, xe.Shape("f32", (5,)), "x")
    y = xe.Parameter(b, 1, xe.Shape("f32", (5,)), "y")
    comp = b.build(xe.Add(xe.Neg(xe.Abs(xe.Mul(x, y))), y))
    (g,) = comp.fusion_plan().groups
    with xe.float_env(denormals="flush"):
        src = loopgen.LoopSource(g)
    names = {m.opcode: src._names[m] for m in g.members}
    assert not any(f"ftz32({names[op]})" in line for line in src.body for op in ("abs", "negate")), src.body
    tiny = np.finfo(F32).tiny
    xv = np.array([tiny, -tiny, 3.0, -0.0, np.nan], F32)
    yv = np.array([0.25, 0.5, -2.0, 1.0, 1.0], F32)   # products: denormals, a normal, -0, NaN
    with xe.float_env(denormals="flush"):
        _same_bits(comp.run(xv, yv, backend="numba"), comp.run(xv, yv))
