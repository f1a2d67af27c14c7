"""Reduces over dimensions of size 1 only planned as the element-wise op they compute
(``fusion.unit_reduces``): f(init, x) in its readers' loop instead of a step of its own,
for pred and integer types with one commutative combiner; the user's HLO unchanged, a
watched run names the reduce, and every result has the NumPy reference's bits."""
import numpy as np
import pytest
import jax.numpy as jnp

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


def _opcodes(comp):
    return [s.inst.opcode for s in comp.fusion_plan().steps if s.group is None]


def _module(t, combiner, init, xdims, dims, tail="n"):
    """A reduce of x (t[xdims]) over ``dims`` with init ``init``, its result compared with
    a second parameter by a reader (``tail``: "n" = not, so a loop reads it)."""
    odims = [n for k, n in enumerate(xdims) if k not in dims]
    sh = lambda d: f"{t}[{','.join(map(str, d))}]"  # noqa: E731
    read = f"  ROOT out = {sh(odims)} not(r)" if tail == "n" else f"  ROOT out = {sh(odims)} add(r, y)"
    return f"""
HloModule unit
comb {{
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  ROOT c = {t}[] {combiner}(a, b)
}}
ENTRY main {{
  x = {sh(xdims)} parameter(0)
  y = {sh(odims)} parameter(1)
  i = {t}[] constant({init})
  r = {sh(odims)} reduce(x, i), dimensions={{{','.join(map(str, dims))}}}, to_apply=comb
{read}
}}
"""


@pytest.mark.parametrize("t,combiner,init", [
    ("pred", "and", "true"), ("pred", "or", "false"), ("pred", "xor", "true"),
    ("s32", "add", "7"), ("s32", "multiply", "-3"), ("s32", "maximum", "5"), ("s32", "minimum", "-5"),
    ("u8", "add", "250"), ("s8", "or", "1"), ("u64", "xor", "18446744073709551615"), ("s16", "and", "-2")])
@pytest.mark.parametrize("xdims,dims", [((6, 4, 1), (2,)), ((1, 6, 1, 4), (0, 2)), ((5, 1), (1,))])
def test_unit_reduce_is_the_op_in_a_loop(t, combiner, init, xdims, dims):
    tail = "n" if t == "pred" or combiner in ("and", "or", "xor") else "a"
    comp = xe.parse_hlo(_module(t, combiner, init, xdims, dims, tail))
    before = [(i.name, i.opcode) for i in comp.entry.instructions]
    rng = np.random.default_rng(len(xdims) + len(t))
    odims = tuple(n for k, n in enumerate(xdims) if k not in dims)
    if t == "pred":
        x, y = rng.random(xdims) < 0.5, rng.random(odims) < 0.5
    else:
        info = np.iinfo(np.dtype({"s32": np.int32, "u8": np.uint8, "s8": np.int8, "u64": np.uint64,
                                  "s16": np.int16}[t]))
        x = rng.integers(info.min, info.max, xdims, dtype=info.dtype, endpoint=True)
        y = rng.integers(info.min, info.max, odims, dtype=info.dtype, endpoint=True)
    _same(comp, x, y)
    assert "reduce" not in _opcodes(comp)
    assert [(i.name, i.opcode) for i in comp.entry.instructions] == before   # (planned, not changed)


@pytest.mark.parametrize("hlo", [
    _module("f32", "add", "0", (6, 1), (1,), "a"),      # floats: the reduce's own rules
    _module("s32", "subtract", "3", (6, 1), (1,), "a"),  # not commutative
    _module("s32", "add", "0", (6, 2), (1,), "a"),       # a dimension of 2
])
def test_other_reduces_keep_their_step(hlo):
    comp = xe.parse_hlo(hlo)
    rng = np.random.default_rng(1)
    t = comp.entry.parameters[0].shape
    x = rng.standard_normal(t.dims).astype(t.dtype) * 100
    y = rng.standard_normal(comp.entry.parameters[1].shape.dims).astype(t.dtype)
    _same(comp, x, y)
    assert "reduce" in _opcodes(comp)


def test_take_along_axis_checks_its_bounds_in_a_loop():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((64, 128), dtype=np.float32)
    i = rng.integers(-140, 140, (64, 16)).astype(np.int32)   # (out of bounds too: NaN)
    comp = xe.from_jax(lambda x, i: jnp.take_along_axis(x, i, axis=1, mode="fill"), x, i)
    _same(comp, x, i)
    assert "reduce" not in _opcodes(comp)
    got = np.asarray(comp.run(x, i, backend="numba"))
    want = np.where((i >= -128) & (i < 128), np.take_along_axis(x, np.where(i < 0, i + 128, i).clip(0, 127), 1), np.nan)
    np.testing.assert_array_equal(got, want)


def test_a_watched_run_names_the_reduce():
    comp = xe.parse_hlo(_module("s32", "maximum", "0", (6, 4, 1), (2,), "a"))
    rng = np.random.default_rng(4)
    args = [rng.integers(-9, 9, (6, 4, 1)).astype(np.int32), rng.integers(-9, 9, (6, 4)).astype(np.int32)]
    want = {}
    reference.run(comp, list(args), on_value=lambda inst, v: want.__setitem__(inst, v))
    for fuse in (True, True, False):
        seen = []
        numba_executor.run(comp, list(args), fuse=fuse, on_value=lambda inst, v: seen.append((inst, v)))
        assert all(i in comp.entry.instructions for i, _ in seen), [i.name for i, _ in seen]
        # (a fused loop's members are not reported, as any element-wise op's; unfused, all are)
        assert ("r" in [i.name for i, _ in seen]) == (not fuse)
        for inst, v in seen:
            assert _bits(v) == _bits(want[inst]), inst.name


def test_off_switch(monkeypatch):
    monkeypatch.setattr(fusion, "UNIT_REDUCES", False)
    comp = xe.parse_hlo(_module("pred", "and", "true", (6, 4, 1), (2,)))
    assert "reduce" in _opcodes(comp)
    rng = np.random.default_rng(5)
    _same(comp, rng.random((6, 4, 1)) < 0.5, rng.random((6, 4)) < 0.5)
