"""Reshapes of broadcast chains and of integer iotas planned as broadcasts and iotas
(``fusion.fold_reshapes``): ``jnp.tile``'s reshape(broadcast(reshape(b))) is read by the
add's loop as a broadcast of ``b`` instead of materialised, ``arange(n).reshape(a, b)`` is
computed in its reader's loop; the user's HLO is left as it was, a watched run names its
instructions, and every result has the NumPy reference's bits."""
import numpy as np
import pytest

import xla_explorer as xe
from xla_explorer.executors import fusion, numba_executor, reference


def _bits(a):
    a = np.asarray(a)
    return a.dtype, a.shape, a.reshape(-1).view(np.uint8).tobytes()


def _same(comp, *args):
    want = comp.run(*args, backend="numpy")
    for _ in range(2):   # the first run walks the plan, the second runs its program
        got = comp.run(*args, backend="numba")
        assert _bits(got) == _bits(want)


def _steps(comp):
    return [(s.inst.opcode, s.group is not None and len(s.group.members) > 1) for s in comp.fusion_plan().steps]


TILE = """
HloModule tile
ENTRY main {
  x = f32[6,16] parameter(0)
  b = f32[16] parameter(1)
  r0 = f32[1,1,1,16] reshape(b)
  t4 = f32[1,1,1,16] broadcast(r0), dimensions={0,1,2,3}
  t5 = f32[1,1,16] reshape(t4)
  t6 = f32[6,1,1,16] broadcast(t5), dimensions={1,2,3}
  t7 = f32[6,16] reshape(t6)
  ROOT add = f32[6,16] add(x, t7)
}
"""


def test_tile_reads_the_row_through_one_broadcast():
    comp = xe.parse_hlo(TILE)
    before = [(i.name, i.opcode, tuple(o.name for o in i.operands)) for i in comp.entry.instructions]
    rng = np.random.default_rng(0)
    x, b = rng.standard_normal((6, 16), dtype=np.float32), rng.standard_normal(16, dtype=np.float32)
    _same(comp, x, b)
    # one fused loop reading b through a broadcast; no reshape or broadcast step left
    assert [op for op, _ in _steps(comp)] == ["parameter", "parameter", "add"]
    plan = comp.fusion_plan()
    bcast = [m for m in plan.steps[-1].group.members if m.opcode == "broadcast"]
    assert len(bcast) == 1 and bcast[0].operands[0].name == "b" and tuple(bcast[0].attrs["broadcast_dimensions"]) == (1,)
    assert plan.reported(bcast[0]).name == "t7"   # (the new broadcast computes t7's value)
    # the user's computation is unchanged
    assert [(i.name, i.opcode, tuple(o.name for o in i.operands)) for i in comp.entry.instructions] == before


def test_a_chain_read_twice_keeps_what_its_other_reader_needs():
    text = TILE.replace("ROOT add = f32[6,16] add(x, t7)",
                        "a = f32[6,16] add(x, t7)\n  ROOT t = (f32[6,16], f32[6,1,1,16]) tuple(a, t6)")
    comp = xe.parse_hlo(text)
    rng = np.random.default_rng(1)
    x, b = rng.standard_normal((6, 16), dtype=np.float32), rng.standard_normal(16, dtype=np.float32)
    want = comp.run(x, b, backend="numpy")
    for _ in range(2):
        got = comp.run(x, b, backend="numba")
        assert [_bits(g) for g in got] == [_bits(w) for w in want]


@pytest.mark.parametrize("jax_fn", ["tile3", "repeat_rows", "broadcast_to"])
def test_jax_broadcast_chains(jax_fn):
    import jax.numpy as jnp
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 6, 10), dtype=np.float32)
    fns = {
        "tile3": (lambda x, b: x + jnp.tile(b, (4, 6, 1)), rng.standard_normal(10, dtype=np.float32)),
        "repeat_rows": (lambda x, b: x * jnp.repeat(b[None], 6, axis=0).reshape(1, 6, 10),
                        rng.standard_normal(10, dtype=np.float32)),
        "broadcast_to": (lambda x, b: x - jnp.broadcast_to(b[:, None], (6, 10)).reshape(6, 10),
                         rng.standard_normal(6, dtype=np.float32)),
    }
    f, b = fns[jax_fn]
    comp = xe.from_jax(f, x, b)
    _same(comp, x, b)
    assert "reshape" not in [op for op, _ in _steps(comp)]


@pytest.mark.parametrize("dtype,shape", [("int32", (8, 12)), ("uint32", (2, 3, 16)), ("int16", (6, 1, 5))])
def test_arange_reshaped_is_computed_in_the_loop(dtype, shape):
    import jax.numpy as jnp
    n = int(np.prod(shape))
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    f = lambda x: x + (jnp.arange(n, dtype=dtype).reshape(shape) % 7).astype(jnp.float32)  # noqa: E731
    comp = xe.from_jax(f, x)
    _same(comp, x)
    assert "iota" not in [op for op, fused in _steps(comp) if not fused]


IOTA_CASES = """
HloModule iotas
ENTRY main {
  i = s32[24] iota(), iota_dimension=0
  r = s32[2,3,4] reshape(i)
  j = s32[4,6] iota(), iota_dimension=1
  q = s32[4,2,3] reshape(j)
  k = s32[4,6] iota(), iota_dimension=0
  m = s32[24] reshape(k)
  u = s32[24] iota(), iota_dimension=0
  v = s32[24] add(u, u)
  w = s32[4,6] reshape(u)
  ROOT t = (s32[2,3,4], s32[4,2,3], s32[24], s32[24], s32[4,6]) tuple(r, q, m, v, w)
}
"""


def test_iota_splits_merges_and_shared_iotas():
    """An iota split whole (folded), an iota's dimension split inside (folded), dimensions
    merged (not folded: the value is no sum of iotas of its dimensions), an iota with
    another reader (folded for the reshape, kept for the other)."""
    comp = xe.parse_hlo(IOTA_CASES)
    want = comp.run(backend="numpy")
    for _ in range(2):
        got = comp.run(backend="numba")
        assert [_bits(g) for g in got] == [_bits(w) for w in want]
    plan = comp.fusion_plan()
    assert [s.inst.name for s in plan.steps if s.inst.opcode == "reshape"] == ["m"]
    assert {plan.reported(s.inst).name for s in plan.steps if s.group is not None} >= {"r", "q", "w", "v"}


def test_a_watched_run_names_the_original_instructions():
    comp = xe.parse_hlo(TILE)
    rng = np.random.default_rng(4)
    args = [rng.standard_normal((6, 16), dtype=np.float32), rng.standard_normal(16, dtype=np.float32)]
    want = {}
    reference.run(comp, list(args), on_value=lambda inst, v: want.__setitem__(inst, v))
    for _ in range(2):
        seen = []
        numba_executor.run(comp, list(args), on_value=lambda inst, v: seen.append((inst, v)))
        assert all(i in comp.entry.instructions for i, _ in seen), [i.name for i, _ in seen]
        for inst, v in seen:
            assert _bits(v) == _bits(want[inst]), inst.name


def test_off_switch(monkeypatch):
    monkeypatch.setattr(fusion, "FOLD_RESHAPES", False)
    comp = xe.parse_hlo(TILE)
    assert "reshape" in [op for op, _ in _steps(comp)]
    rng = np.random.default_rng(5)
    _same(comp, rng.standard_normal((6, 16), dtype=np.float32), rng.standard_normal(16, dtype=np.float32))
