"""The jax backend: every instruction lowered to jax.lax and run by XLA (executors/jax_lowering.py),
``comp.to_jax()`` and its round trip through ``from_jax``, and ``comp.diff`` against XLA.

Partitioned programs need several devices: this module asks for host devices before
anything uses jax (``ensure_host_devices``).  If jax was already in use with fewer than
4 devices, the tests that need them run again in a subprocess that has them."""
import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest

from xla_explorer.executors import jax_lowering as jl

jl.ensure_host_devices()  # before JAX's first use: host devices for the partitioned programs

jax = pytest.importorskip("jax")
jnp = jax.numpy

import xla_explorer as xe  # noqa: E402
from conftest import CORPUS, corpus_cases  # noqa: E402
from xla_explorer.diff import compare_arrays  # noqa: E402
from xla_explorer.ops import registry  # noqa: E402

MANY_DEVICES = len(jax.devices()) >= 4
needs_devices = pytest.mark.skipif(not MANY_DEVICES, reason="needs 4 devices; runs in a subprocess instead "
                                                            "(test_partitioned_tests_in_subprocess)")

_runner = None
if (CORPUS.parent / "tools" / "run_corpus.py").exists():
    _spec = importlib.util.spec_from_file_location("run_corpus_jax", CORPUS.parent / "tools" / "run_corpus.py")
    _runner = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_runner)
CASES = corpus_cases() if _runner is not None else []


def _leaves(v):
    if isinstance(v, tuple):
        for x in v:
            yield from _leaves(x)
    elif hasattr(v, "dtype"):
        yield v


def _assert_same(got, want, rtol=1e-5, atol=1e-6):
    got, want = list(_leaves(got)), list(_leaves(want))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, w.dtype, g.shape, w.shape)
        if g.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g.astype(np.complex128), w.astype(np.complex128), rtol=rtol, atol=atol)


# ---------------------------------------------------------------------------------------
# The corpus through backend="jax": XLA's outputs, as the corpus runner checks them

@pytest.mark.skipif(not CASES, reason="HLO corpus not found")
@pytest.mark.parametrize("case", CASES)
def test_corpus_case_jax(case):
    if case.startswith("coll_") and not MANY_DEVICES:
        pytest.skip("needs 4 devices; runs in a subprocess instead")
    res = _runner.run_one(xe, str(CORPUS / case), "jax", "global")
    assert res["status"] == "pass", f"{case}: {res['reason']}\n{res.get('traceback', '')}"


def test_partitioned_tests_in_subprocess():
    if MANY_DEVICES:
        pytest.skip("this process has the devices: the partitioned tests ran here")
    env = dict(os.environ, XLA_FLAGS=(os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"))
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__,
                          "-k", "partitioned or coll_"], cwd=os.path.dirname(__file__), env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]


# ---------------------------------------------------------------------------------------
# Ops the corpus does not reach: the jax backend against the NumPy reference

R = np.random.default_rng(0)


def _f32(*s):
    return R.normal(size=s).astype(np.float32)


SNIPPETS = {
    "map": ("""HloModule m
f {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  m = f32[] multiply(a, b)
  ROOT r = f32[] add(m, a)
}
ENTRY e {
  x = f32[3,4] parameter(0)
  y = f32[3,4] parameter(1)
  ROOT r = f32[3,4] map(x, y), dimensions={0,1}, to_apply=f
}""", lambda: [_f32(3, 4), _f32(3, 4)]),
    "scatter_general_update": ("""HloModule m
upd {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  two = f32[] constant(2)
  t = f32[] multiply(a, two)
  ROOT r = f32[] add(t, b)
}
ENTRY e {
  x = f32[5,3] parameter(0)
  i = s32[4,1] parameter(1)
  u = f32[4,3] parameter(2)
  ROOT r = f32[5,3] scatter(x, i, u), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=upd
}""", lambda: [_f32(5, 3), np.array([[0], [2], [4], [7]], np.int32), _f32(4, 3)]),
    "scatter_overwrite_index_vector_first": ("""HloModule m
upd {
  a = s32[] parameter(0)
  ROOT b = s32[] parameter(1)
}
ENTRY e {
  x = s32[6] parameter(0)
  i = s32[1,3] parameter(1)
  u = s32[3] parameter(2)
  ROOT r = s32[6] scatter(x, i, u), update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=0, to_apply=upd
}""", lambda: [np.arange(6, dtype=np.int32), np.array([[5, 0, 2]], np.int32), np.array([10, 20, 30], np.int32)]),
    "gather_index_vector_first": ("""HloModule m
ENTRY e {
  x = f32[4,5] parameter(0)
  i = s32[2,3] parameter(1)
  ROOT r = f32[3,2,2] gather(x, i), offset_dims={1,2}, collapsed_slice_dims={}, start_index_map={0,1}, index_vector_dim=0, slice_sizes={2,2}
}""", lambda: [_f32(4, 5), np.array([[0, 3, 9], [1, -2, 4]], np.int32)]),
    "sort_descending_comparator": ("""HloModule m
cmp {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  c = s32[] parameter(2)
  d = s32[] parameter(3)
  ROOT r = pred[] compare(a, b), direction=GT
}
ENTRY e {
  x = f32[3,6] parameter(0)
  i = s32[3,6] iota(), iota_dimension=1
  ROOT r = (f32[3,6], s32[3,6]) sort(x, i), dimensions={1}, is_stable=true, to_apply=cmp
}""", lambda: [np.round(_f32(3, 6))]),
    "topk_smallest_and_largest": ("""HloModule m
ENTRY e {
  x = f32[2,7] parameter(0)
  s = (f32[2,3], s32[2,3]) topk(x), k=3, largest=false
  l = (f32[2,3], s32[2,3]) topk(x), k=3, largest=true
  ROOT r = ((f32[2,3], s32[2,3]), (f32[2,3], s32[2,3])) tuple(s, l)
}""", lambda: [np.round(_f32(2, 7))]),
    "switch_index_out_of_range": ("""HloModule m
b0 {
  p = f32[2] parameter(0)
  ROOT r = f32[2] add(p, p)
}
b1 {
  p = f32[2] parameter(0)
  ROOT r = f32[2] negate(p)
}
ENTRY e {
  k = s32[] parameter(0)
  x = f32[2] parameter(1)
  ROOT r = f32[2] conditional(k, x, x), branch_computations={b0, b1}
}""", lambda: [np.int32(-3), _f32(2)]),
    "batch_norm": ("""HloModule m
ENTRY e {
  x = f32[2,3,4] parameter(0)
  s = f32[3] parameter(1)
  o = f32[3] parameter(2)
  t = (f32[2,3,4], f32[3], f32[3]) batch-norm-training(x, s, o), epsilon=0.001, feature_index=1
  m = f32[3] get-tuple-element(t), index=1
  v = f32[3] get-tuple-element(t), index=2
  i = f32[2,3,4] batch-norm-inference(x, s, o, m, v), epsilon=0.001, feature_index=1
  g = (f32[2,3,4], f32[3], f32[3]) batch-norm-grad(x, s, m, v, i), epsilon=0.001, feature_index=1
  ROOT r = ((f32[2,3,4], f32[3], f32[3]), f32[2,3,4], (f32[2,3,4], f32[3], f32[3])) tuple(t, i, g)
}""", lambda: [_f32(2, 3, 4), _f32(3), _f32(3)]),
    "reduce_window_variadic_argmax": ("""HloModule m
argmax {
  a = f32[] parameter(0)
  ai = s32[] parameter(1)
  b = f32[] parameter(2)
  bi = s32[] parameter(3)
  gt = pred[] compare(a, b), direction=GE
  v = f32[] select(gt, a, b)
  i = s32[] select(gt, ai, bi)
  ROOT r = (f32[], s32[]) tuple(v, i)
}
ENTRY e {
  x = f32[7] parameter(0)
  i = s32[7] iota(), iota_dimension=0
  ninf = f32[] constant(-inf)
  z = s32[] constant(-1)
  ROOT r = (f32[4], s32[4]) reduce-window(x, i, ninf, z), window={size=3 stride=2 pad=1_1}, to_apply=argmax
}""", lambda: [_f32(7)]),
    "select_and_scatter_min": ("""HloModule m
sel {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = pred[] compare(a, b), direction=LE
}
sc {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}
ENTRY e {
  x = f32[6,6] parameter(0)
  s = f32[2,2] parameter(1)
  z = f32[] constant(0)
  ROOT r = f32[6,6] select-and-scatter(x, s, z), window={size=3x3 stride=3x3}, select=sel, scatter=sc
}""", lambda: [_f32(6, 6), _f32(2, 2)]),
    "cholesky_upper_triangular_solve_transpose": ("""HloModule m
ENTRY e {
  a = f32[4,4] parameter(0)
  b = f32[4,3] parameter(1)
  u = f32[4,4] cholesky(a), lower=false
  x = f32[4,3] triangular-solve(u, b), left_side=true, lower=false, unit_diagonal=false, transpose_a=TRANSPOSE
  ROOT r = (f32[4,4], f32[4,3]) tuple(u, x)
}""", lambda: [(lambda m: (m @ m.T + 4 * np.eye(4)).astype(np.float32))(_f32(4, 4)), _f32(4, 3)]),
    "fft_rfft_irfft_ifft": ("""HloModule m
ENTRY e {
  x = f32[3,8] parameter(0)
  r = c64[3,5] fft(x), fft_type=RFFT, fft_length={8}
  i = f32[3,8] fft(r), fft_type=IRFFT, fft_length={8}
  c = c64[3,5] fft(r), fft_type=IFFT, fft_length={5}
  ROOT t = (c64[3,5], f32[3,8], c64[3,5]) tuple(r, i, c)
}""", lambda: [_f32(3, 8)]),
    "clz_popcnt_integer_power_logistic": ("""HloModule m
ENTRY e {
  x = u32[5] parameter(0)
  y = s32[5] parameter(1)
  c = u32[5] count-leading-zeros(x)
  p = u32[5] popcnt(x)
  w = s32[5] power(y, y)
  l = f32[5] convert(y)
  g = f32[5] logistic(l)
  ROOT t = (u32[5], u32[5], s32[5], f32[5]) tuple(c, p, w, g)
}""", lambda: [np.array([0, 1, 255, 2**31, 12345], np.uint32), np.array([0, 1, 2, 3, -2], np.int32)]),
    "convolution_window_reversal": ("""HloModule m
ENTRY e {
  x = f32[1,2,7] parameter(0)
  k = f32[3,2,3] parameter(1)
  ROOT r = f32[1,3,5] convolution(x, k), window={size=3 rhs_reversal=1}, dim_labels=bf0_oi0->bf0
}""", lambda: [_f32(1, 2, 7), _f32(3, 2, 3)]),
    "dynamic_slices_huge_unsigned_start": ("""HloModule m
ENTRY e {
  x = f32[5,4] parameter(0)
  i = u32[] parameter(1)
  j = u32[] parameter(2)
  s = f32[2,3] dynamic-slice(x, i, j), dynamic_slice_sizes={2,3}
  z = f32[2,3] negate(s)
  u = f32[5,4] dynamic-update-slice(x, z, j, i)
  ROOT t = (f32[2,3], f32[5,4]) tuple(s, u)
}""", lambda: [_f32(5, 4), np.uint32(4000000000), np.uint32(1)]),
    "copy_bitcast_reverse_pad": ("""HloModule m
ENTRY e {
  x = f32[2,3] parameter(0)
  c = f32[2,3] copy(x)
  b = s32[6] bitcast(c)
  r = s32[6] reverse(b), dimensions={0}
  seven = s32[] constant(7)
  r2 = s32[2,3] reshape(r)
  p = s32[5,5] pad(r2, seven), padding=1_1_1x0_2
  ROOT t = (s32[6], s32[5,5]) tuple(r, p)
}""", lambda: [_f32(2, 3)]),
    "while_opt_barrier_token_dimension_size": ("""HloModule m
c {
  s = (s32[], f32[3]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  three = s32[] constant(3)
  ROOT lt = pred[] compare(i, three), direction=LT
}
b {
  s = (s32[], f32[3]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[3] get-tuple-element(s), index=1
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  x1 = f32[3] sine(x)
  ROOT t = (s32[], f32[3]) tuple(i1, x1)
}
ENTRY e {
  x = f32[3] parameter(0)
  zero = s32[] constant(0)
  t0 = (s32[], f32[3]) tuple(zero, x)
  w = (s32[], f32[3]) while(t0), condition=c, body=b
  ob = (s32[], f32[3]) opt-barrier(w)
  tok = token[] after-all()
  d = s32[] get-dimension-size(x), dimensions={0}
  g0 = s32[] get-tuple-element(ob), index=0
  g1 = f32[3] get-tuple-element(ob), index=1
  ROOT r = (s32[], f32[3], s32[], token[]) tuple(g0, g1, d, tok)
}""", lambda: [_f32(3)]),
}


@pytest.mark.parametrize("name", sorted(SNIPPETS))
def test_snippet_jax_matches_reference(name):
    text, make_args = SNIPPETS[name]
    comp = xe.parse_hlo(text)
    args = make_args()
    got = comp.run(*args, backend="jax")
    _assert_same(got, comp.run(*args))
    if comp.result_shape.is_tuple and "token" in str(comp.result_shape):
        assert isinstance(got[-1], xe.executors.reference.Token)


def test_builder_made_computation_runs_on_jax_jit_and_op_by_op():
    b = xe.XlaBuilder("fori")
    state = xe.Parameter(b, 0, xe.Shape.parse("(s32[], f32[3])"), "state")

    def cond(s):
        return xe.Lt(xe.GetTupleElement(s, 0), xe.Constant(s.builder, np.int32(4)))

    def body(s):
        i, x = xe.GetTupleElement(s, 0), xe.GetTupleElement(s, 1)
        return xe.Tuple(xe.Add(i, xe.Constant(s.builder, np.int32(1))), xe.Add(x, x))

    comp = b.build(xe.While(cond, body, state))
    arg = (np.int32(0), np.arange(3, dtype=np.float32))
    want = comp.run(arg)
    _assert_same(comp.run(arg, backend="jax"), want)
    _assert_same(xe.jax_bridge.run_jax(comp, [arg], jit=False), want)


def test_results_keep_exact_types():
    comp = xe.from_jax(lambda x: (x.astype(jnp.bfloat16) * 2, (x > 0), x.astype(jnp.int8)),
                       np.linspace(-2, 2, 5, dtype=np.float32))
    got = comp.run(np.linspace(-2, 2, 5, dtype=np.float32), backend="jax")
    assert [g.dtype.name for g in got] == ["bfloat16", "bool", "int8"]
    assert all(isinstance(g, np.ndarray) for g in got)


# ---------------------------------------------------------------------------------------
# The layer table and errors

# opcodes without a lowering, each for a reason (host channels, dynamic shapes; parameters
# are the walker's own)
UNLOWERED = {"parameter", "infeed", "outfeed", "send", "send-done", "recv", "recv-done",
             "set-dimension-size", "dynamic-reshape"}


def test_every_rule_is_the_jax_layer_of_its_opcode():
    layer = registry.LAYERS["jax"]
    assert set(layer) == set(jl.RULES)
    assert all(layer[op] is jl.RULES[op] for op in jl.RULES)
    missing = set(registry.all_ops()) - set(jl.RULES)
    assert missing <= UNLOWERED, f"opcodes with no jax lowering: {sorted(missing - UNLOWERED)}"


def test_an_op_without_lowering_is_named():
    comp = xe.parse_hlo("""HloModule m
ENTRY e {
  tok = token[] after-all()
  inf = ((f32[2]), token[]) infeed(tok)
  d = (f32[2]) get-tuple-element(inf), index=0
  ROOT x = f32[2] get-tuple-element(d), index=0
}""")
    with pytest.raises(NotImplementedError, match="jax backend: no lowering for opcode infeed"):
        comp.run(backend="jax")
    other = xe.parse_hlo("""HloModule m
ENTRY e {
  x = f32[2] parameter(0)
  ROOT y = f32[2] custom-call(x), custom_call_target="my_thing"
}""")
    with pytest.raises(NotImplementedError, match="custom-call target 'my_thing'"):
        other.run(np.ones(2, np.float32), backend="jax")


@pytest.mark.skipif(not CASES, reason="HLO corpus not found")
def test_too_few_devices_says_how_to_get_them(monkeypatch):
    comp = xe.parse_hlo((CORPUS / "coll_pmap_psum" / "module.hlo").read_text())
    one = jax.devices()[:1]
    monkeypatch.setattr(jax, "devices", lambda *a, **k: one)
    with pytest.raises(xe.ExecutionError, match="xla_force_host_platform_device_count"):
        comp.run(np.zeros((4, 3, 5), np.float32), np.zeros((4, 6), np.int32), backend="jax", cache=False)


# ---------------------------------------------------------------------------------------
# to_jax and the round trip through from_jax

def _program(w, x, n):
    def body(i, carry):
        h = jnp.tanh(carry @ w) + i
        return h / (1 + jnp.sum(jnp.abs(h), axis=1, keepdims=True))
    h = jax.lax.fori_loop(0, 3, body, x)
    return jnp.sort(h, axis=1), jnp.argmax(h, axis=1), jnp.take(h, n, axis=0)


def test_to_jax_is_jittable_and_round_trips():
    rng = np.random.default_rng(3)
    w = rng.normal(size=(4, 4)).astype(np.float32)
    x = rng.normal(size=(5, 4)).astype(np.float32)
    n = np.array([4, 0, 9, -1], np.int32)
    comp = xe.from_jax(_program, w, x, n)
    f = comp.to_jax()
    _assert_same(tuple(np.asarray(v) for v in jax.jit(f)(w, x, n)), comp.run(w, x, n), rtol=1e-5)
    again = xe.from_jax(f, w, x, n)
    for seed in range(3):
        r = np.random.default_rng(seed)
        args = (r.normal(size=(4, 4)).astype(np.float32), r.normal(size=(5, 4)).astype(np.float32),
                r.integers(-6, 6, size=4).astype(np.int32))
        _assert_same(again.run(*args), comp.run(*args), rtol=1e-5)


# ---------------------------------------------------------------------------------------
# diff: a planted mismatch is found at its instruction and element

def _perturbed(monkeypatch, opcode, change):
    op = registry.OPS[opcode]
    original = op.reference

    def reference(*values, **kw):
        out = original(*values, **kw)
        return change(out, kw)
    monkeypatch.setattr(op, "reference", reference)


def test_diff_finds_a_planted_mismatch(monkeypatch):
    def f(a, b):
        c = a * b
        return jnp.tanh(c).sum(axis=1), c + 1
    a, b = _f32(3, 4), _f32(3, 4)
    comp = xe.from_jax(f, a, b)
    clean = comp.diff(a, b)
    assert clean.ok and clean.first_mismatch is None and clean.mismatches() == []

    def change(out, kw):
        out = np.array(out)
        if out.shape == (3, 4):
            out[1, 2] += 0.5
        return out
    _perturbed(monkeypatch, "multiply", change)
    report = comp.diff(a, b)
    multiply = next(i.name for i in comp.entry.instructions if i.opcode == "multiply")
    assert report.first_mismatch.name == multiply
    assert [r.name for r in report.mismatches()] == [multiply]  # local: the users see the same operands
    row = report[multiply]
    assert row.indices == [(1, 2)] and row.count == 1 and row.size == 12
    assert row.max_abs == pytest.approx(0.5, rel=1e-5)
    text = str(report)
    assert "mismatch" in text and multiply in text and "[1, 2]" in text
    assert multiply in report._repr_html_() and "<table>" in report._repr_html_()


def test_diff_indices_of_a_tuple_result_start_with_the_element(monkeypatch):
    x = np.array([[3, 1, 2], [0, 5, 4]], np.float32)
    i = np.arange(6, dtype=np.int32).reshape(2, 3)
    comp = xe.from_jax(lambda v, k: jax.lax.sort((v, k), num_keys=1), x, i)

    def change(out, kw):
        if isinstance(out, tuple) and len(out) == 2 and np.shape(out[1]) == (2, 3):
            idx = np.array(out[1])
            idx[1, 0] += 7
            return out[0], idx
        return out
    _perturbed(monkeypatch, "sort", change)
    report = comp.diff(x, i)
    row = report.first_mismatch
    assert row.opcode == "sort" and row.shape.is_tuple
    assert row.indices == [(1, 1, 0)]  # element 1 of the tuple, at [1, 0]


def test_diff_reports_an_instruction_jax_cannot_run():
    comp = xe.parse_hlo("""HloModule m
ENTRY e {
  tok = token[] after-all()
  inf = ((f32[2]), token[]) infeed(tok)
  d = (f32[2]) get-tuple-element(inf), index=0
  x = f32[2] get-tuple-element(d), index=0
  ROOT y = f32[2] negate(x)
}""")
    report = comp.diff(channels={"infeed": [(np.array([1, 2], np.float32),)]})
    assert [r.name for r in report.errors()] == ["inf"] and not report.ok
    assert "no lowering for opcode infeed" in report["inf"].note
    assert report["y"].ok and report["y"].size == 2  # the rest still compared, on the reference's values


@needs_devices
@pytest.mark.skipif(not CASES, reason="HLO corpus not found")
def test_diff_partitioned_mismatch_on_one_device(monkeypatch):
    text = (CORPUS / "coll_pmap_psum" / "module.hlo").read_text()
    comp = xe.parse_hlo(text)
    a = _f32(4, 3, 5)
    b = np.arange(24, dtype=np.int32).reshape(4, 6)
    assert comp.diff(a, b).ok
    op = registry.OPS["all-reduce"]
    original = op.reference

    def reference(*values, ctx, **kw):
        out = original(*values, ctx=ctx, **kw)
        if ctx.device_id == 2 and np.asarray(out).dtype == np.float32:
            out = np.array(out)
            out[0, 1] += 1.0
        return out
    monkeypatch.setattr(op, "reference", reference)
    report = comp.diff(a, b)
    row = report.first_mismatch
    assert row.opcode == "call" and [r.name for r in report.mismatches()] == [row.name]
    assert row.indices == [(0, 2, 0, 0, 1)]  # tuple element 0, device 2, index [0, 0, 1]


def test_compare_arrays_tolerances():
    want = np.array([1.0, -2.0, np.nan, np.inf, 0.0], np.float32)
    ok = want * np.float32(1 + 1e-7)
    assert not compare_arrays(ok, want, "f32")[2].any()
    bad = want.copy()
    bad[1] = -2.001
    bad[2] = 1.0
    assert list(np.flatnonzero(compare_arrays(bad, want, "f32")[2])) == [1, 2]
    import ml_dtypes
    b16 = np.array([1.0, 100.0], ml_dtypes.bfloat16)
    assert not compare_arrays(b16, np.array([1.0, 100.5], ml_dtypes.bfloat16), "bf16")[2].any()
    ints = np.array([1, 2, 3], np.int32)
    assert list(np.flatnonzero(compare_arrays(ints + np.array([0, 1, 0], np.int32), ints, "s32")[2])) == [1]


# ---------------------------------------------------------------------------------------
# Partitioned programs on several devices

@needs_devices
def test_partitioned_shard_map_collectives_on_axes_and_general_paths(monkeypatch):
    from jax.sharding import Mesh, PartitionSpec as P
    mesh = Mesh(np.array(jax.devices()[:4]).reshape(2, 2), ("x", "y"))

    def body(a, b):
        return (jax.lax.psum(a, "x"), jax.lax.pmax(a, "y"), jax.lax.pmin(b, ("x", "y")),
                jax.lax.all_gather(a, "y", axis=1, tiled=True), jax.lax.all_to_all(a, "x", 0, 0, tiled=True),
                jax.lax.psum_scatter(b, "y", scatter_dimension=0, tiled=True),
                jax.lax.ppermute(a, "y", perm=[(0, 1), (1, 0)]), jnp.sort(a, axis=1),
                jax.lax.axis_index(("x", "y"))[None])
    f = jax.shard_map(body, mesh=mesh, in_specs=(P("x", "y"), P("x")),
                      out_specs=(P("x", "y"), P("x", "y"), P(), P("x"), P("x", "y"), P("x", "y"), P("x", "y"),
                                 P("x", "y"), P(("x", "y"))), check_vma=False)
    a, b = _f32(4, 6), _f32(4, 4)
    want = tuple(np.asarray(v) for v in jax.jit(f)(a, b))
    comp = xe.from_jax(f, a, b)
    _assert_same(comp.run(a, b), want, rtol=1e-6)
    _assert_same(comp.run(a, b, backend="jax"), want, rtol=1e-6)
    # the general paths: shards cut and joined by slices, collectives through all_gather
    monkeypatch.setattr(jl, "SHARDINGS_AS_SPECS", False)
    monkeypatch.setattr(jl, "COLLECTIVES_ON_AXES", False)
    _assert_same(comp.run(a, b, backend="jax", cache=False), want, rtol=1e-6)
    assert comp.diff(a, b).ok


UNEVEN = """HloModule uneven, num_partitions=4

add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}

body {
  p = f32[2,3] parameter(0)
  r = f32[2,3] all-reduce(p), channel_id=1, replica_groups={{0,1},{2,3}}, use_global_device_ids=true, to_apply=add
  i = u32[] partition-id()
  f = f32[] convert(i)
  b = f32[2,3] broadcast(f), dimensions={}
  ROOT s = f32[2,3] add(r, b)
}

ENTRY e {
  a = f32[7,3] parameter(0), sharding=SHARD
  s = f32[7,3] custom-call(a), custom_call_target="Sharding", sharding=SHARD
  l = f32[2,3] custom-call(s), custom_call_target="SPMDFullToShardShape", sharding={manual}
  c = f32[2,3] call(l), to_apply=body
  m = f32[2,3] custom-call(c), custom_call_target="Sharding", sharding={manual}
  ROOT g = f32[7,3] custom-call(m), custom_call_target="SPMDShardToFullShape", sharding=SHARD
}
"""


@needs_devices
@pytest.mark.parametrize("sharding", ["{devices=[4,1]<=[4]}", "{devices=[4,1]3,1,2,0}"])
def test_partitioned_uneven_and_permuted_shards(sharding):
    comp = xe.parse_hlo(UNEVEN.replace("SHARD", sharding))
    a = np.arange(21, dtype=np.float32).reshape(7, 3)
    np.testing.assert_array_equal(comp.run(a, backend="jax"), comp.run(a))
    assert comp.diff(a).ok


@needs_devices
@pytest.mark.skipif(not CASES, reason="HLO corpus not found")
def test_partitioned_to_jax_round_trip():
    comp = xe.parse_hlo((CORPUS / "coll_shmap_2d_psum_allgather" / "module.hlo").read_text())
    a = _f32(4, 6)
    again = xe.from_jax(comp.to_jax(), a)
    _assert_same(again.run(a), comp.run(a))
    _assert_same(again.run(a, backend="jax"), comp.run(a, backend="jax"))
