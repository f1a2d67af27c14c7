"""Calls of small computations inlined into their caller's fusion plan (``fusion.inline_calls``):
element-wise work fuses across a ``call`` as XLA's call inliner lets it, the user's HLO is
left as it was, a watched run (``on_value``) names the original instructions, and every
result has the bits of the NumPy reference and of the plan without inlining."""
import numpy as np
import pytest

import xla_explorer as xe
from xla_explorer.executors import fusion, numba_executor, reference

# JAX's ``x % y`` (a call of ``remainder``, itself calling ``_where``), then ``+ b``
REM = """
HloModule rem

_where {
  p = pred[] parameter(0)
  a = f32[] parameter(1)
  b = f32[] parameter(2)
  ROOT s = f32[] select(p, a, b)
}

remainder {
  x = f32[N] parameter(0)
  y = f32[] parameter(1)
  zero = f32[] constant(0)
  eq = pred[] compare(y, zero), direction=EQ
  one = f32[] constant(1)
  w = f32[] call(eq, one, y), to_apply=_where
  wb = f32[N] broadcast(w), dimensions={}
  r = f32[N] remainder(x, wb)
  zb = f32[N] broadcast(zero), dimensions={}
  lt = pred[N] compare(r, zb), direction=LT
  lw = pred[] compare(w, zero), direction=LT
  lwb = pred[N] broadcast(lw), dimensions={}
  ne = pred[N] compare(lt, lwb), direction=NE
  nz = pred[N] compare(r, zb), direction=NE
  fix = pred[N] and(ne, nz)
  sum = f32[N] add(r, wb)
  ROOT out = f32[N] select(fix, sum, r)
}

ENTRY main {
  x = f32[N] parameter(0)
  b = f32[N] parameter(1)
  y = f32[] parameter(2)
  m = f32[N] call(x, y), to_apply=remainder
  ROOT add = f32[N] add(m, b)
}
"""


def _rem(n):
    return xe.parse_hlo(REM.replace("[N]", f"[{n}]"))


def _bits(a):
    a = np.asarray(a)
    return a.dtype, a.shape, a.reshape(-1).view(np.uint8).tobytes()


def _check(comp, args, denormals="ieee"):
    """The numba runs (twice: the walk, then the program) against the reference and the
    plan without inlining; the plan of the entry returned."""
    with xe.float_env(denormals=denormals):
        want = comp.run(*args, backend="numpy")
        got = [comp.run(*args, backend="numba") for _ in range(2)]
    for g in got:
        assert _bits(g) == _bits(want)
    return comp.fusion_plan()


def _specials(n, rng):
    v = rng.standard_normal(n, dtype=np.float32) * 10
    extra = np.array([np.nan, -0.0, 0.0, np.inf, -np.inf, 1e-40, -1e-40, 7.0, -7.0], np.float32)
    v[:min(n, extra.size)] = extra[:n]
    return v


def _opcodes(plan):
    return [s.inst.opcode for s in plan.steps]


@pytest.mark.parametrize("n", [0, 1, 9, 1031])
@pytest.mark.parametrize("denormals", ["ieee", "flush"])
def test_a_call_is_inlined_and_fused(n, denormals):
    rng = np.random.default_rng(n)
    comp = _rem(n)
    args = (_specials(n, rng), _specials(n, rng)[::-1].copy(), np.float32(-2.5))
    plan = _check(comp, args, denormals)
    assert "call" not in _opcodes(plan)   # the call, and the call inside it, inlined
    loop = next(s.group for s in plan.steps if s.group is not None and s.inst.name == "add")
    # the callee's remainder and select in the caller's loop with its add
    assert {"remainder", "select", "add"} <= {m.opcode for m in loop.members}
    # a divisor of 0 (the callee's where) and a denormal one
    for y in (np.float32(0), np.float32(1e-40)):
        _check(_rem(n), args[:2] + (y,), denormals)


def test_the_users_computation_is_left_as_it_was():
    comp = _rem(5)
    text = comp.as_hlo_text()
    entry = comp.entry
    insts = list(entry.instructions)
    operands = [list(i.operands) for i in insts]
    rng = np.random.default_rng(0)
    _check(comp, (_specials(5, rng), _specials(5, rng), np.float32(3)))
    assert comp.as_hlo_text() == text
    assert entry.instructions == insts and [i.operands for i in insts] == operands
    assert entry.root is insts[-1] and entry.root.operands[0].opcode == "call"
    planned = comp.fusion_plan().computation
    assert isinstance(planned, fusion.InlinedComputation) and planned.original is entry
    assert not any(i in entry.instructions for i in planned.instructions if i.opcode not in ("parameter",))


def test_off_switch_unfused_and_too_big_keep_the_call(monkeypatch):
    rng = np.random.default_rng(1)
    args = (_specials(33, rng), _specials(33, rng), np.float32(1.5))
    plans = {}
    for case in ("off", "unfused", "big"):
        comp = _rem(33)
        with monkeypatch.context() as m:
            if case == "off":
                m.setattr(fusion, "INLINE_CALLS", False)
            if case == "big":
                m.setattr(fusion, "MAX_INLINED", 5)   # remainder brings 16 (its call's one as 1)
            want = comp.run(*args, backend="numpy")
            fuse = case != "unfused"
            for _ in range(2):
                assert _bits(comp.run(*args, backend="numba", fuse=fuse)) == _bits(want)
            plans[case] = comp.fusion_plan(fuse=fuse)
    for case, plan in plans.items():
        assert "call" in _opcodes(plan), case


def test_no_inlining_of_effects_or_recursion():
    from xla_explorer.hlo.ir import HloComputation, Instruction
    comp = xe.parse_hlo("""
HloModule r
noisy {
  a = f32[4] parameter(0)
  lo = f32[] constant(0)
  hi = f32[] constant(1)
  u = f32[4] rng(lo, hi), distribution=rng_uniform
  ROOT s = f32[4] add(a, u)
}
ENTRY main {
  x = f32[4] parameter(0)
  ROOT c = f32[4] call(x), to_apply=noisy
}
""")
    assert not fusion.inlinable(comp.entry.root)
    p = Instruction("p", "parameter", xe.Shape("f32", ()), attrs={"parameter_number": 0})
    loop = HloComputation("loop", [p], p)
    me = Instruction("me", "call", xe.Shape("f32", ()), [p], {"computation": loop})
    loop.instructions.append(me)
    loop.root = me
    assert not fusion.inlinable(me)


# a call used twice (its value read by two loops), its computation called again elsewhere,
# and that computation also a reduce's
TWICE = """
HloModule twice

add_f {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

scale {
  v = f32[N] parameter(0)
  k = f32[] parameter(1)
  kb = f32[N] broadcast(k), dimensions={}
  ROOT m = f32[N] multiply(v, kb)
}

ENTRY main {
  x = f32[N] parameter(0)
  k = f32[] parameter(1)
  zero = f32[] constant(0)
  total = f32[] reduce(x, zero), dimensions={0}, to_apply=add_f
  k2 = f32[] call(total, k), to_apply=add_f
  c1 = f32[N] call(x, k2), to_apply=scale
  e = f32[N] abs(c1)
  t = f32[N] floor(c1)
  c2 = f32[N] call(t, k), to_apply=scale
  s = f32[N] add(e, c2)
  ROOT out = (f32[N], f32[N], f32[]) tuple(s, c1, k2)
}
"""


@pytest.mark.parametrize("n", [1, 8, 515])
def test_a_call_used_twice_and_a_computation_also_reduced_with(n):
    comp = xe.parse_hlo(TWICE.replace("[N]", f"[{n}]"))
    rng = np.random.default_rng(n)
    args = (_specials(n, rng) / 16, np.float32(-0.75))
    with xe.float_env(denormals="ieee"):
        want = comp.run(*args, backend="numpy")
        for _ in range(2):
            got = comp.run(*args, backend="numba")
            for g, w in zip(got, want):
                assert _bits(g) == _bits(w)
    plan = comp.fusion_plan()
    assert "call" not in _opcodes(plan) and "reduce" in _opcodes(plan)
    # the reduce's computation is still the user's, not inlined anywhere
    red = next(s.inst for s in plan.steps if s.inst.opcode == "reduce")
    add_f = next(c for c in comp.computations if c.name == "add_f")
    assert red.attrs["computation"] is add_f
    # both calls of ``scale`` inlined: two multiplies, each in a loop
    muls = [m for g in plan.groups for m in g.members if m.opcode == "multiply"]
    assert len({id(m) for m in muls}) == 2


WHILE = """
HloModule loop

step {
  v = f32[N] parameter(0)
  h = f32[] constant(0.5)
  hb = f32[N] broadcast(h), dimensions={}
  ROOT m = f32[N] multiply(v, hb)
}

shift {
  v = f32[N] parameter(0)
  d = f32[N] parameter(1)
  s = f32[N] call(v), to_apply=step
  ROOT a = f32[N] add(s, d)
}

cond {
  s = (s32[], f32[N], f32[N]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(5)
  ROOT lt = pred[] compare(i, n), direction=LT
}

body {
  s = (s32[], f32[N], f32[N]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  v = f32[N] get-tuple-element(s), index=1
  d = f32[N] get-tuple-element(s), index=2
  w = f32[N] call(v, d), to_apply=shift
  t0 = f32[N] abs(w)
  t = f32[N] sqrt(t0)
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  ROOT out = (s32[], f32[N], f32[N]) tuple(i2, t, d)
}

ENTRY main {
  x = f32[N] parameter(0)
  d = f32[N] parameter(1)
  i0 = s32[] constant(0)
  init = (s32[], f32[N], f32[N]) tuple(i0, x, d)
  w = (s32[], f32[N], f32[N]) while(init), condition=cond, body=body
  ROOT r = f32[N] get-tuple-element(w), index=1
}
"""


@pytest.mark.parametrize("n", [1, 7, 300])
@pytest.mark.parametrize("denormals", ["ieee", "flush"])
def test_nested_calls_inside_a_while_body(n, denormals):
    comp = xe.parse_hlo(WHILE.replace("[N]", f"[{n}]"))
    rng = np.random.default_rng(n)
    d = _specials(n, rng) / 8
    d[-1:] = 3e-39   # a denormal added each iteration
    _check(comp, (_specials(n, rng), d), denormals)
    body = next(c for c in comp.computations if c.name == "body")
    plan = fusion.fusion_plan(body)
    assert "call" not in _opcodes(plan)
    loop = next(s.group for s in plan.steps if s.group is not None and s.inst.name == "t")
    assert [m.opcode for m in loop.members if m.opcode != "broadcast"] == ["multiply", "add", "abs", "sqrt"]


def test_a_watched_run_names_the_original_instructions():
    text = REM.replace("ROOT add = f32[N] add(m, b)", "ROOT add = (f32[N], f32[N]) tuple(m, b)")
    comp = xe.parse_hlo(text.replace("[N]", "[6]"))
    rng = np.random.default_rng(2)
    args = (_specials(6, rng), _specials(6, rng), np.float32(2))
    want = {}
    reference.run(comp, list(args), on_value=lambda inst, v: want.__setitem__(inst, v))
    for _ in range(2):   # the first run walks its plan, the second too (watched runs walk)
        seen = []
        numba_executor.run(comp, list(args), on_value=lambda inst, v: seen.append((inst, v)))
        names = [i.name for i, _ in seen]
        assert all(i in comp.entry.instructions for i, _ in seen), names
        assert "m" in names   # the call, for its inlined root's value
        for inst, v in seen:
            if inst.shape.is_array:
                assert _bits(v) == _bits(want[inst]), inst.name
    assert "call" not in _opcodes(comp.fusion_plan())


EDGES = """
HloModule edges

ident {
  ROOT p = f32[N] parameter(0)
}

pair {
  a = f32[N] parameter(0)
  b = f32[N] parameter(1)
  m = f32[N] multiply(a, b)
  ROOT t = (f32[N], f32[N]) tuple(b, m)
}

ENTRY main {
  x = f32[N] parameter(0)
  y = f32[] parameter(1)
  yb = f32[N] broadcast(y), dimensions={}
  c = (f32[N], f32[N]) call(x, yb), to_apply=pair
  g0 = f32[N] get-tuple-element(c), index=0
  g1 = f32[N] get-tuple-element(c), index=1
  s = f32[N] subtract(g1, g0)
  ROOT i = f32[N] call(s), to_apply=ident
}
"""


@pytest.mark.parametrize("n", [1, 64])
def test_a_tuple_returning_call_and_an_identity_call_as_the_root(n):
    comp = xe.parse_hlo(EDGES.replace("[N]", f"[{n}]"))
    rng = np.random.default_rng(n)
    plan = _check(comp, (_specials(n, rng), np.float32(-3e-39)), "flush")
    _check(comp, (_specials(n, rng), np.float32(1.25)), "ieee")
    assert "call" not in _opcodes(plan)
    assert plan.computation.root.opcode == "subtract"   # the identity's value: its operand's
    seen = []
    numba_executor.run(comp, [_specials(n, rng), np.float32(2)], on_value=lambda inst, v: seen.append(inst))
    assert all(i in comp.entry.instructions for i in seen)
    assert "c" in [i.name for i in seen]   # the tuple call, for its inlined tuple
