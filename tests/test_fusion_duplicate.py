"""Cheap element-wise ops read by several fused loops are recomputed in each of them
(``fusion._duplicate``), as XLA duplicates them: a log-softmax's ``x - max`` is read by the
exp-sum's loop and by the output's, and is no longer a loop (an array written and read
back) of its own; its broadcast operand goes into both loops with it.  Expensive ops (an
exp), copies that would read more than they save, and loops beyond the fusion
budget keep the old plan; every result has the bits of the plan without copies and the
reference's values."""
import numpy as np
import pytest

import xla_explorer as xe
from xla_explorer.executors import fusion

pytest.importorskip("numba")


def _bits(a):
    a = np.asarray(a)
    return a.dtype, a.shape, a.reshape(-1).view(np.uint8).tobytes()


def _run(comp, args):
    out = None
    for _ in range(2):   # the first run walks the plan, the second runs its program
        got = comp.run(*args, backend="numba")
        bits = [_bits(g) for g in got] if isinstance(got, tuple) else [_bits(got)]
        assert out is None or bits == out
        out = bits
    return got, out


def _same(comp, *args, rebuild=None):
    """Numba's result: the bits of the plan without copies (``DUPLICATE_CHEAP`` off; a float
    sum's bits are the kernels' own, not the reference's), the reference's values."""
    got, bits = _run(comp, args)
    before, fusion.DUPLICATE_CHEAP = fusion.DUPLICATE_CHEAP, False
    try:
        _, old = _run((rebuild or (lambda: xe.parse_hlo(comp.as_hlo_text())))(), args)
    finally:
        fusion.DUPLICATE_CHEAP = before
    assert bits == old
    want = comp.run(*args, backend="numpy")
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        g, w = np.asarray(g), np.asarray(w)
        np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
        ok = ~np.isnan(w)
        np.testing.assert_allclose(g[ok], w[ok], rtol=1e-5, atol=1e-6)


def _loops(comp):
    """{root name: [member names]} of the plan's fused loops."""
    return {s.group.root.name: [m.name for m in s.group.members]
            for s in comp.fusion_plan().steps if s.group is not None}


LOG_SOFTMAX = """
HloModule log_softmax
max_f32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}
add_f32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY main {
  x = f32[64,48] parameter(0)
  ninf = f32[] constant(-inf)
  mx = f32[64] reduce(x, ninf), dimensions={1}, to_apply=max_f32
  bmx = f32[64,48] broadcast(mx), dimensions={0}
  shifted = f32[64,48] subtract(x, bmx)
  e = f32[64,48] exponential(shifted)
  zero = f32[] constant(0)
  sums = f32[64] reduce(e, zero), dimensions={1}, to_apply=add_f32
  logs = f32[64] log(sums)
  blog = f32[64,48] broadcast(logs), dimensions={0}
  ROOT out = f32[64,48] subtract(shifted, blog)
}
"""


def _x(shape, seed=0):
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32) * 4
    flat = x.reshape(-1)
    flat[:6] = [np.inf, -np.inf, np.nan, 0.0, -0.0, np.float32(1e-39)]
    return x


def test_log_softmax_recomputes_the_shift_in_both_loops():
    comp = xe.parse_hlo(LOG_SOFTMAX)
    _same(comp, _x((64, 48)))
    loops = _loops(comp)
    assert "shifted" not in loops and "bmx" not in loops   # no loop (no array) of their own
    assert {"bmx", "shifted", "e"} <= set(loops["e"])
    assert {"bmx", "shifted", "blog", "out"} <= set(loops["out"])


def test_the_switch_gives_the_old_plan():
    fusion.DUPLICATE_CHEAP = False
    try:
        comp = xe.parse_hlo(LOG_SOFTMAX)
        _same(comp, _x((64, 48), 1))
        assert "shifted" in _loops(comp)
    finally:
        fusion.DUPLICATE_CHEAP = True


def _two_readers(op_text, readers=2, extra_params=""):
    """y = op(...) read by ``readers`` loops (each a transcendental of y plus a parameter:
    not cheap, so each reader is a loop of its own; a different one each, so that no two
    are one value to ``fusion.merge_duplicates``), their results a tuple."""
    ops = ["exponential", "tanh", "sine", "cosine", "logistic"]
    lines = [f"  r{k} = f32[32,40] {ops[k]}(y)\n  u{k} = f32[32,40] add(r{k}, p)" for k in range(readers)]
    outs = ", ".join(f"u{k}" for k in range(readers))
    types = ", ".join("f32[32,40]" for _ in range(readers))
    return f"""
HloModule two
ENTRY main {{
  a = f32[32,40] parameter(0)
  b = f32[32,40] parameter(1)
  p = f32[32,40] parameter(2){extra_params}
  y = f32[32,40] {op_text}
{chr(10).join(lines)}
  ROOT t = ({types}) tuple({outs})
}}
"""


def _args(n=3, seed=2):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((32, 40)).astype(np.float32) for _ in range(n)]


def test_a_cheap_op_of_two_arrays_is_copied_into_two_loops_not_three():
    two = xe.parse_hlo(_two_readers("add(a, b)", 2))
    _same(two, *_args())
    loops = _loops(two)
    assert "y" not in loops and all("y" in members for members in loops.values())
    three = xe.parse_hlo(_two_readers("add(a, b)", 3))
    _same(three, *_args())
    assert "y" in _loops(three)   # three copies would read six arrays for the two it saves


def test_a_cheap_op_of_one_array_is_copied_into_every_reader():
    comp = xe.parse_hlo(_two_readers("negate(a)", 3))
    _same(comp, *_args())
    loops = _loops(comp)
    assert "y" not in loops and sum("y" in members for members in loops.values()) == 3


def test_an_expensive_op_stays_a_loop_of_its_own():
    comp = xe.parse_hlo(_two_readers("exponential(a)", 2))
    _same(comp, *_args())
    assert "y" in _loops(comp)


def test_a_copy_read_by_an_unfused_op_is_materialised():
    # y is read by a loop and by a dot (no loop): it must be an array of its own
    comp = xe.parse_hlo("""
HloModule mixed
ENTRY main {
  a = f32[32,32] parameter(0)
  y = f32[32,32] negate(a)
  e = f32[32,32] exponential(y)
  d = f32[32,32] dot(y, a), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT t = (f32[32,32], f32[32,32]) tuple(e, d)
}
""")
    _same(comp, _args(1)[0][:, :32].copy())
    assert "y" in _loops(comp)


def test_loops_beyond_the_budget_still_give_the_reference_values(monkeypatch):
    # a budget of one distinct loop: the second reader's loop runs op by op, and reads
    # the copies (shifted, bmx) as values computed on their own
    monkeypatch.setattr(fusion, "MAX_FUSED_LOOPS", 1)
    comp = xe.parse_hlo(LOG_SOFTMAX)
    _same(comp, _x((64, 48), 3))
    steps = [s.inst.name for s in comp.fusion_plan().steps]
    assert "shifted" in steps


def test_jax_log_softmax_and_layer_norm_match_the_reference():
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    x = _x((16, 96), 4)
    for f in (lambda x: jax.nn.log_softmax(x, axis=-1),
              lambda x: (x - x.mean(-1, keepdims=True)) / jnp.sqrt(x.var(-1, keepdims=True) + 1e-5)):
        comp = xe.from_jax(f, x)
        _same(comp, x, rebuild=lambda: xe.from_jax(f, x))
        want = np.asarray(jax.jit(f)(x))
        got = comp.run(x, backend="numba")
        fin = np.isfinite(want)
        np.testing.assert_allclose(got[fin], want[fin], rtol=2e-5, atol=1e-5)
