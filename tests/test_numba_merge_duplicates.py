"""Instructions that compute what an earlier one does planned as that one
(``fusion.merge_duplicates``, XLA's common-subexpression elimination): JAX's layer norm
sums ``x`` once for ``jnp.mean`` and again inside ``jnp.var``'s call, and after inlining
the two are one pass.  Only the same opcode, operands, shape, layout and attributes merge
(called computations compared by structure, metadata ignored); ops with effects or random
state, control flow, copies and the root never; a watched run still names each merged
instruction; results keep the NumPy reference's bits, and the user's HLO is unchanged."""
import contextlib

import numpy as np
import pytest

import xla_explorer as xe
from xla_explorer.executors import fusion

pytest.importorskip("numba")


def _bits(a):
    a = np.asarray(a)
    return a.dtype, a.shape, a.reshape(-1).view(np.uint8).tobytes()


@contextlib.contextmanager
def _unmerged():
    fusion.MERGE_DUPLICATES = False
    try:
        yield
    finally:
        fusion.MERGE_DUPLICATES = True


def _same(make, *args):
    """``make()``'s numba results: the bits of the plan without merging, and the
    reference's values (a sum's order is the kernel's own); the merged computation."""
    with _unmerged():
        other = make()
        base = [other.run(*args, backend="numba") for _ in range(2)][-1]
    comp = make()
    want = comp.run(*args, backend="numpy")
    for _ in range(2):   # the first run walks the plan, the second runs its program
        got = comp.run(*args, backend="numba")
        if isinstance(want, tuple):
            assert [_bits(g) for g in got] == [_bits(b) for b in base]
            for g, w in zip(got, want):
                np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
        else:
            assert _bits(got) == _bits(base)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    return comp, got


def _opcodes(comp):
    return [s.inst.opcode for s in comp.fusion_plan().steps]


TWO_SUMS = """
HloModule two_sums
add_a {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b), metadata={op_name="first"}
}
add_b {
  p = f32[] parameter(0)
  q = f32[] parameter(1)
  ROOT t = f32[] add(p, q), metadata={op_name="second"}
}
var {
  y = f32[8,16] parameter(0)
  z = f32[] constant(0)
  r2 = f32[8] reduce(y, z), dimensions={1}, to_apply=add_b
  c16 = f32[] constant(16)
  c = f32[8] broadcast(c16), dimensions={}
  ROOT m2 = f32[8] divide(r2, c)
}
ENTRY main {
  x = f32[8,16] parameter(0)
  zero = f32[] constant(0)
  r1 = f32[8] reduce(x, zero), dimensions={1}, to_apply=add_a
  n = f32[] constant(16)
  nb = f32[8] broadcast(n), dimensions={}
  m1 = f32[8] divide(r1, nb)
  m2c = f32[8] call(x), to_apply=var
  ROOT out = f32[8] subtract(m1, m2c)
}
"""


def test_the_sum_in_a_call_is_the_callers_sum():
    x = np.random.default_rng(0).standard_normal((8, 16), dtype=np.float32)
    comp, got = _same(lambda: xe.parse_hlo(TWO_SUMS), x)
    assert not got.any()   # (the two means are one value: their difference is 0)
    before = [(i.name, i.opcode, tuple(o.name for o in i.operands)) for i in xe.parse_hlo(TWO_SUMS).entry.instructions]
    plan = comp.fusion_plan()
    assert _opcodes(comp).count("reduce") == 1
    assert [s.inst.name for s in plan.steps if s.inst.opcode == "reduce"] == ["r1"]
    # the user's computation is unchanged
    assert [(i.name, i.opcode, tuple(o.name for o in i.operands)) for i in comp.entry.instructions] == before
    with _unmerged():
        assert _opcodes(xe.parse_hlo(TWO_SUMS)).count("reduce") == 2


def test_different_reducers_constants_and_dimensions_are_not_merged():
    text = """
HloModule apart
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] maximum(a, b)
}
ENTRY main {
  x = f32[8,16] parameter(0)
  zero = f32[] constant(0)
  one = f32[] constant(1)
  negz = f32[] constant(-0)
  r1 = f32[8] reduce(x, zero), dimensions={1}, to_apply=add
  r2 = f32[8] reduce(x, zero), dimensions={1}, to_apply=max
  r3 = f32[8] reduce(x, one), dimensions={1}, to_apply=add
  r4 = f32[8] reduce(x, negz), dimensions={1}, to_apply=add
  r5 = f32[16] reduce(x, zero), dimensions={0}, to_apply=add
  s5 = f32[8] slice(r5), slice={[0:8]}
  a = f32[8] add(r1, r2)
  b = f32[8] add(r3, r4)
  c = f32[8] add(a, b)
  ROOT out = f32[8] add(c, s5)
}
"""
    x = np.random.default_rng(1).standard_normal((8, 16), dtype=np.float32)
    comp, _ = _same(lambda: xe.parse_hlo(text), x)
    assert _opcodes(comp).count("reduce") == 5


def test_random_numbers_and_the_root_are_never_merged():
    text = """
HloModule rng
ENTRY main {
  s = u64[2] parameter(0)
  g1 = (u64[2], u32[16]) rng-bit-generator(s), algorithm=rng_philox
  g2 = (u64[2], u32[16]) rng-bit-generator(s), algorithm=rng_philox
  v1 = u32[16] get-tuple-element(g1), index=1
  v2 = u32[16] get-tuple-element(g2), index=1
  d = u32[16] add(v1, v2)
  e = u32[16] add(v1, v2)
  f = u32[16] multiply(d, e)
  ROOT t = (u32[16], u32[16]) tuple(f, d)
}
"""
    seed = np.array([1, 2], np.uint64)
    comp, got = _same(lambda: xe.parse_hlo(text), seed)
    assert _bits(got[0]) == _bits((got[1] * got[1]).astype(np.uint32))
    # the two generators stay two steps (each has random state of its own to XLA)
    assert _opcodes(comp).count("rng-bit-generator") == 2
    # d and e: one value, computed once
    assert len([m for s in comp.fusion_plan().steps if s.group is not None
                for m in s.group.members if m.opcode == "add"]) == 1


def test_two_returned_values_stay_two_arrays():
    text = """
HloModule two
ENTRY main {
  x = f32[64] parameter(0)
  a = f32[64] exponential(x)
  b = f32[64] exponential(x)
  ROOT t = (f32[64], f32[64]) tuple(a, b)
}
"""
    comp, got = _same(lambda: xe.parse_hlo(text), np.linspace(-1, 1, 64, dtype=np.float32))
    assert _bits(got[0]) == _bits(got[1]) and not np.shares_memory(got[0], got[1])
    # a root that repeats an earlier value is kept as it is
    root_dup = """
HloModule r
ENTRY main {
  x = f32[4] parameter(0)
  a = f32[4] exponential(x)
  ROOT b = f32[4] exponential(x)
}
"""
    comp, _ = _same(lambda: xe.parse_hlo(root_dup), np.arange(4, dtype=np.float32))
    assert comp.fusion_plan().steps[-1].inst.name == "b"


def test_layouts_tell_transposes_apart():
    text = """
HloModule lay
ENTRY main {
  x = f32[4,6]{1,0} parameter(0)
  t = f32[6,4]{0,1} transpose(x), dimensions={1,0}
  u = f32[6,4]{1,0} transpose(x), dimensions={1,0}
  a = f32[6,4]{1,0} copy(t)
  ROOT s = f32[6,4] add(a, u)
}
"""
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    comp, got = _same(lambda: xe.parse_hlo(text), x)
    assert _bits(got) == _bits((x.T + x.T).astype(np.float32))
    insts = {i.name for i in comp.fusion_plan().computation.instructions}
    assert {"t", "u"} <= insts   # (two layouts of one value: not merged)


def test_a_watched_run_names_each_merged_instruction():
    text = TWO_SUMS.replace("ROOT out = f32[8] subtract(m1, m2c)", """r1b = f32[8] reduce(x, zero), dimensions={1}, to_apply=add_b
  d = f32[8] subtract(m1, m2c)
  ROOT out = f32[8] add(d, r1b)""")
    comp = xe.parse_hlo(text)
    x = np.random.default_rng(2).standard_normal((8, 16), dtype=np.float32)
    seen = {}
    comp.run(x, backend="numba", on_value=lambda inst, v: seen.__setitem__(inst.name, np.array(v)))
    # r1 is run once, and r1b (the same sum, merged) is reported with its value
    assert [s.inst.name for s in comp.fusion_plan().steps if s.inst.opcode == "reduce"] == ["r1"]
    np.testing.assert_allclose(seen["r1"], x.sum(axis=1, dtype=np.float32), rtol=1e-5)
    assert _bits(seen["r1b"]) == _bits(seen["r1"])
    assert [i.name for i in comp.fusion_plan().merged(comp.fusion_plan().steps[2].inst)] == ["r1b"]


def test_layer_norm_from_jax_reads_x_once_for_both_sums():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    x = np.random.default_rng(3).standard_normal((64, 32), dtype=np.float32)
    comp, _ = _same(lambda: xe.from_jax(
        lambda x: (x - x.mean(-1, keepdims=True)) / jnp.sqrt(x.var(-1, keepdims=True) + 1e-5), x), x)
    reduces = [s for s in comp.fusion_plan().steps if s.inst.opcode == "reduce"]
    assert len(reduces) == 2   # the sum of x (once, not twice) and the sum of squares
