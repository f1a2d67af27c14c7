"""``scan`` (HLO's newest op, from ``chlo.scan``): shape rule, reference, every backend, HLO
text, graph and index map.

Expected values come from XLA:CPU through JAX 0.10.2: the StableHLO interpreter's own scan
tests (stablehlo/tests/interpret/chlo/scan.mlir) compiled by XLA:CPU, whose HLO text (printed by
``jax._src.lib._jax.mlir.mlir_module_to_xla_computation``) is pasted below as it was printed,
and jax.jit of ``lax.associative_scan`` / ``jnp.cumsum`` / ``lax.cummax`` / ``lax.cumprod``.
"""
import numpy as np
import pytest

import xla_explorer as xe

BACKENDS = ["numpy", "numba", "cuda", "jax"]
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def _backend_ok(backend):
    if backend == "jax":
        pytest.importorskip("jax")
    if backend in ("numba", "cuda"):
        pytest.importorskip("numba")


CUMSUM_HLO = """HloModule main, entry_computation_layout={(s32[4]{0}, s32[])->(s32[4]{0}, s32[])}

region_0.1 {
  Arg_0.2 = s32[] parameter(0)
  Arg_1.2 = s32[] parameter(1)
  add.1 = s32[] add(Arg_0.2, Arg_1.2)
  ROOT tuple.1 = (s32[], s32[]) tuple(add.1, add.1)
}

ENTRY main.2 {
  Arg_0.3 = s32[4]{0} parameter(0)
  Arg_1.3 = s32[] parameter(1)
  scan.1 = (s32[4]{0}, s32[]) scan(Arg_0.3, Arg_1.3), dimensions={0}, num_carries=1, to_apply=region_0.1
  get-tuple-element.2 = s32[4]{0} get-tuple-element(scan.1), index=0
  get-tuple-element.3 = s32[] get-tuple-element(scan.1), index=1
  ROOT tuple.3 = (s32[4]{0}, s32[]) tuple(get-tuple-element.2, get-tuple-element.3)
}
"""

#: scan_cummax of scan.mlir: two inputs (values, positions), two carries; ties keep the last index
CUMMAX_HLO = """HloModule cummax

region_0.1 {
  cur_val = s32[] parameter(0)
  cur_idx = s32[] parameter(1)
  run_val = s32[] parameter(2)
  run_idx = s32[] parameter(3)
  new_val = s32[] maximum(run_val, cur_val)
  gt = pred[] compare(run_val, cur_val), direction=GT
  eq = pred[] compare(run_val, cur_val), direction=EQ
  max_idx = s32[] maximum(run_idx, cur_idx)
  tie_or_less = s32[] select(eq, max_idx, cur_idx)
  new_idx = s32[] select(gt, run_idx, tie_or_less)
  ROOT t = (s32[], s32[], s32[], s32[]) tuple(new_val, new_idx, new_val, new_idx)
}

ENTRY main {
  x = s32[5]{0} parameter(0)
  i = s32[5]{0} parameter(1)
  v0 = s32[] parameter(2)
  i0 = s32[] parameter(3)
  ROOT scan.1 = (s32[5]{0}, s32[5]{0}, s32[], s32[]) scan(x, i, v0, i0), dimensions={0}, num_carries=2, to_apply=region_0.1
}
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_running_sum_as_xla_cpu(backend):
    """XLA:CPU: ([1, 3, 6, 10], 10)."""
    _backend_ok(backend)
    comp = xe.parse_hlo(CUMSUM_HLO)
    ys, total = comp.run(np.int32([1, 2, 3, 4]), np.int32(0), backend=backend)
    np.testing.assert_array_equal(ys, [1, 3, 6, 10])
    assert total == 10 and total.dtype == np.int32


@pytest.mark.parametrize("backend", BACKENDS)
def test_interpreter_cases_dimension_reverse_and_two_carries(backend):
    _backend_ok(backend)
    b = xe.XlaBuilder("dim1")
    x = xe.Parameter(b, 0, xe.Shape("s32", (2, 3)))
    c = xe.Parameter(b, 1, xe.Shape("s32", (2,)))
    both = lambda a, r: (xe.Add(a, r), xe.Add(a, r))  # noqa: E731
    forward, backward = xe.Scan(x, c, both, dimension=1), xe.Scan(x, c, both, dimension=1, is_reverse=True)
    comp = b.build(xe.Tuple(*[xe.GetTupleElement(s, k) for s in (forward, backward) for k in (0, 1)]))
    ys, carry, ys_rev, carry_rev = comp.run(np.int32([[1, 2, 3], [4, 5, 6]]), np.int32([0, 0]), backend=backend)
    np.testing.assert_array_equal(ys, [[1, 3, 6], [4, 9, 15]])          # scan_cumsum_dim1
    np.testing.assert_array_equal(carry, [6, 15])
    np.testing.assert_array_equal(ys_rev, [[6, 5, 3], [15, 11, 6]])     # suffix sums, as scan_cumsum_reverse
    np.testing.assert_array_equal(carry_rev, [6, 15])
    vals, idx, last_val, last_idx = xe.parse_hlo(CUMMAX_HLO).run(
        np.int32([3, 1, 4, 1, 5]), np.int32([0, 1, 2, 3, 4]), np.int32(-2 ** 31), np.int32(0), backend=backend)
    np.testing.assert_array_equal(vals, [3, 3, 4, 4, 5])                 # scan_cummax
    np.testing.assert_array_equal(idx, [0, 0, 2, 2, 4])
    assert (last_val, last_idx) == (5, 4)


@pytest.mark.parametrize("backend", BACKENDS)
def test_scan_agrees_with_jaxs_associative_scan_lowering(backend):
    """jax.jit: associative_scan(add) and cumsum of x: [0.5, -0.75, 2.25, 4.25, 3.5, 7.5];
    cummax: [0.5, 0.5, 3, 3, 3, 4]; cumprod(reverse=True): [11.25, 22.5, -18, -6, -3, 4].  The
    HLO JAX emits for associative_scan (slices, pads, adds) gives the same on our executors."""
    _backend_ok(backend)
    x = np.float32([0.5, -1.25, 3.0, 2.0, -0.75, 4.0])
    b = xe.XlaBuilder("cum")
    p = xe.Parameter(b, 0, xe.Shape("f32", (6,)))
    zero, one, low = (xe.Constant(b, np.float32(v)) for v in (0, 1, -np.inf))
    twice = lambda f: lambda a, r: (f(a, r), f(a, r))  # noqa: E731
    first = lambda s: xe.GetTupleElement(s, 0)  # noqa: E731
    comp = b.build(xe.Tuple(first(xe.Scan(p, zero, twice(xe.Add), 0)), first(xe.Scan(p, low, twice(xe.Max), 0)),
                            first(xe.Scan(p, one, twice(xe.Mul), 0, is_reverse=True))))
    cumsum, cummax, cumprod = comp.run(x, backend=backend)
    np.testing.assert_allclose(cumsum, [0.5, -0.75, 2.25, 4.25, 3.5, 7.5], rtol=1e-6)
    np.testing.assert_array_equal(cummax, [0.5, 0.5, 3.0, 3.0, 3.0, 4.0])
    np.testing.assert_allclose(cumprod, [11.25, 22.5, -18.0, -6.0, -3.0, 4.0], rtol=1e-6)
    if backend == "jax":
        import jax.numpy as jnp
        from jax import lax
        lowered = xe.from_jax(lambda v: lax.associative_scan(jnp.add, v), x)
        assert "scan(" not in lowered.as_hlo_text()   # JAX lowers it to slices, pads and adds
        for be in ("numpy", "numba"):
            np.testing.assert_allclose(lowered.run(x, backend=be), cumsum, rtol=1e-6)


def test_scan_without_carries_and_with_is_associative_round_trips():
    b = xe.XlaBuilder("sq")
    p = xe.Parameter(b, 0, xe.Shape("f32", (4,)))
    comp = b.build(xe.Scan(p, [], lambda a: xe.Mul(a, a), 0, is_associative=True))
    text = comp.as_hlo_text()
    assert "num_carries=0" in text and "is_associative=true" in text and "is_reverse" not in text
    again = xe.parse_hlo(text)
    assert again.as_hlo_text() == text
    (ys,) = again.run(np.float32([0, 1, 2, 3]))          # XLA:CPU: [0, 1, 4, 9]
    np.testing.assert_array_equal(ys, [0, 1, 4, 9])


def test_shape_rule_names_the_rule_and_the_values():
    b = xe.XlaBuilder("bad")
    p = xe.Parameter(b, 0, xe.Shape("f32", (3, 4)))
    c = xe.Parameter(b, 1, xe.Shape("f32", (3,)))
    add2 = lambda a, r: (xe.Add(a, r), xe.Add(a, r))  # noqa: E731
    with pytest.raises(xe.ShapeError, match=r"Scan: dimension 2 is out of range for inputs\[0\] f32\[3,4\]"):
        xe.Scan(p, c, add2, dimension=2)
    r = xe.XlaBuilder("scalar_add")
    u, v = xe.Parameter(r, 0, xe.Shape("f32", ()), "u"), xe.Parameter(r, 1, xe.Shape("f32", ()), "v")
    scalar_add = r.build(xe.Tuple(xe.Add(u, v), xe.Add(u, v)))
    with pytest.raises(xe.ShapeError, match=r"Scan: computation .* takes \(f32\[\], f32\[\]\) but Scan calls "
                                            r"it with .*\(f32\[4\], f32\[3\]\)"):
        xe.Scan(p, c, scalar_add, dimension=0)   # slices along 0 are f32[4]; the carry is f32[3]
    with pytest.raises(xe.ShapeError, match="exactly one dimension"):
        xe.parse_hlo(CUMSUM_HLO.replace("dimensions={0}", "dimensions={0,0}")).verify()
    with pytest.raises(xe.ShapeError, match="num_carries=3"):
        xe.parse_hlo(CUMSUM_HLO.replace("num_carries=1", "num_carries=3")).verify()


def test_graph_index_map_and_status_table():
    comp = xe.parse_hlo(CUMSUM_HLO)
    m = xe.index_map(comp, "scan.1", np.int32([1, 2, 3, 4]), np.int32(0))
    assert m.kind == "reduce"
    assert [r[1] for r in m[(2,)].reads] == [(0,), (1,), (2,)]       # output 2 has seen inputs 0..2
    source = comp.graph().source
    assert "scan" in source and "region_0.1" in source    # the node, and its region as a cluster
    table = xe.status_table(file=open("/dev/null", "w"))
    for layer, want in (("reference", "yes"), ("index map", "yes"), ("jax", "yes"), ("graph", "yes")):
        assert table.cell("scan", layer) == want
    if table.cell("scan", "cpu") != "-":
        assert table.cell("scan", "cpu").startswith("executor")
