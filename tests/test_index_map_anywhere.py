"""Index maps of any instruction of a real program, checked against the values of the run.

For chosen result elements, the operand elements an index map says are read must hold
exactly what the reference computed for that element (a copy: the one element; a
scatter: the input combined with every update aimed at it; an all-reduce: the sum).
"""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import xla_explorer as xe
from xla_explorer.inspect import instruction_operands, map_of
from xla_explorer.ops.index_map import Candidates, Unknown


def _results(iv):
    return list(iv.result) if isinstance(iv.result, tuple) else [iv.result]


def check_map(iv, limit=400):
    """Every (or the first ``limit``) domain element of the map agrees with the values."""
    m = map_of(iv)
    ops = [np.asarray(o) for o in iv.operands]
    results = [np.asarray(r) for r in _results(iv)]
    checked = 0
    if m.kind == "scatter":
        n = len(results)
        want = [np.array(ops[j], copy=True).astype(np.float64) for j in range(n)]
        for a in m:
            if a.skipped:
                continue
            for j, target in a.writes:
                k, index = a.reads[j]
                want[j][target] += ops[k][index]   # the programs below scatter with add
        for j in range(n):
            np.testing.assert_allclose(results[j], want[j], rtol=1e-6)
        return len(m)
    for a in m:
        if checked >= limit:
            break
        assert not a.unknown
        if m.kind == "copy":
            if a.source != "operand" or not a.reads:
                continue
            for j, r in enumerate(results):
                k, index = a.reads[j] if len(a.reads) == len(results) else a.reads[0]
                assert r[a.index] == ops[k][index], (a, r[a.index], ops[k][index])
        elif m.kind == "reduce":  # all-reduce with add
            assert np.isclose(results[0][a.index], sum(ops[k][i] for k, i in a.reads)), a
        checked += 1
    assert checked
    return checked


def test_gradient_of_an_embedding_lookup():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    table = np.arange(40, dtype=np.float32).reshape(10, 4)
    ids = np.array([[3, 9], [3, 0]], np.int32)

    def loss(table, ids):
        return (jnp.take(table, ids, axis=0) * jnp.arange(4.0)).sum()

    comp = xe.from_jax(jax.grad(loss), table, ids)
    t = comp.trace(table, ids)
    gathers = [r for r in t.records if r.opcode == "gather"]
    scatters = [r for r in t.records if r.opcode == "scatter"]
    assert gathers and scatters and all(r.depth >= 1 for r in gathers + scatters)  # inside called computations
    for r in gathers + scatters:
        iv = instruction_operands(comp, r.name, trace=t)
        check_map(iv)
    # the index map from the arguments directly (a trace of its own)
    m = xe.index_map(comp, gathers[0].name, table, ids)
    assert m[(1, 0, 2)].reads == ((0, (3, 2)),)
    # the duplicate id 3 collides in the gradient's scatter: both updates land on row 3
    ms = xe.index_map(comp, scatters[0].name, table, ids)
    rows = [w[1][0] for a in ms for w in a.writes]
    assert rows.count(3) == 2 * 4


def test_optimized_module_gathers_and_scatters_in_fusions():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    x = np.arange(48, dtype=np.float32).reshape(12, 4)
    i = np.array([5, 11, 5, 0], np.int32)

    def f(x, i):
        g = jnp.take(x, i, axis=0) * 2.0
        return jnp.zeros_like(x).at[i].add(g)

    comp = xe.from_jax(f, x, i, optimized=True)
    t = comp.trace(x, i)
    names = [r.name for r in t.records if r.opcode in ("gather", "scatter")]
    assert {t.get(n).opcode for n in names} == {"gather", "scatter"}
    assert any(t.get(n).stack and t.get(n).stack[-1][1] for n in names)  # inside a fusion (or its wrapper)
    for n in names:
        check_map(instruction_operands(comp, n, trace=t))
    np.testing.assert_allclose(t.result, np.asarray(jax.jit(f)(x, i)))


def test_scan_dynamic_slice_per_iteration():
    jax = pytest.importorskip("jax")
    x = np.arange(40, dtype=np.float32).reshape(10, 4)
    starts = np.array([0, 4, 9], np.int32)

    def f(x, starts):
        def body(c, k):
            return c, jax.lax.dynamic_slice(x, (k, np.int32(1)), (3, 2))
        return jax.lax.scan(body, 0.0, starts)[1]

    comp = xe.from_jax(f, x, starts)
    t = comp.trace(x, starts)
    name = next(r.name for r in t.records if r.opcode == "dynamic-slice" and r.shape.dims == (3, 2))
    assert t.count(name) == 3
    for k, start in enumerate((0, 4, 7)):  # 9 is clamped to 10 - 3 = 7
        iv = instruction_operands(comp, name, trace=t, invocation=k)
        check_map(iv)
        m = xe.index_map(comp, name, x, starts, invocation=k)
        assert m[(0, 0)].reads == ((0, (start, 1)),) and m[(0, 0)].clamped == (k == 2)
        assert iv.label.startswith(name) and "while" in iv.label


SHARD_MAP = textwrap.dedent("""
    import os, sys
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
    import numpy as np, jax, xla_explorer as xe
    from jax.sharding import Mesh, PartitionSpec as P
    try:
        from jax import shard_map
    except ImportError:
        from jax.experimental.shard_map import shard_map
    mesh = Mesh(np.array(jax.devices()[:4]), ("x",))
    f = shard_map(lambda a: jax.lax.all_to_all(a, "x", 1, 0, tiled=True), mesh=mesh,
                  in_specs=P("x", None), out_specs=P("x", None))
    a = np.arange(64, dtype=np.float32).reshape(8, 8)
    sys.stdout.write(xe.from_jax(f, a).as_hlo_text())
""")


@pytest.fixture(scope="module")
def shard_map_module():
    pytest.importorskip("jax")
    out = subprocess.run([sys.executable, "-c", SHARD_MAP], capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, JAX_PLATFORMS="cpu"))
    assert out.returncode == 0, out.stderr[-3000:]
    return xe.parse_hlo(out.stdout)


def test_shard_map_all_to_all(shard_map_module):
    comp = shard_map_module
    a = np.arange(64, dtype=np.float32).reshape(8, 8)
    t = comp.trace(a)
    assert t.num_devices == 4
    name = next(r.name for r in t.records if r.opcode == "all-to-all")
    iv = instruction_operands(comp, name, trace=t)
    assert iv.devices == (1, 4) and np.shape(iv.operands[0]) == (4, 2, 8)
    check_map(iv)
    m = map_of(iv)
    # device 2's column block 1 comes from device 1's rows, split-block 2 of dimension 1
    assert m[(2, 0, 3)].reads == ((0, (1, 0, 2 * 2 + 1)),)
    assert m[(2, 0, 3)].detail["source_device"] == 1
    # shapes only: the same map (who meets whom does not depend on values)
    shapes_only = xe.index_map(comp, name)
    assert shapes_only[(2, 0, 3)].reads == m[(2, 0, 3)].reads


# -- shapes only ----------------------------------------------------------------------------

def test_shapes_only_says_unknown_and_lists_candidates():
    b = xe.XlaBuilder("g")
    x = xe.Parameter(b, 0, xe.Shape("f32", (6, 4)), "x")
    i = xe.Parameter(b, 1, xe.Shape("s32", (3, 1)), "i")
    g = xe.Gather(x, i, offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0], index_vector_dim=1,
                  slice_sizes=[1, 4])
    comp = b.build(g)
    m = xe.index_map(comp, comp.entry.root.name)
    a = m[(1, 2)]
    assert a.unknown and isinstance(a.reads, Candidates) and len(a.reads) == 6
    assert a.reads[0] == (0, (0, 2)) and (0, (5, 2)) in a.reads and (0, (5, 1)) not in a.reads
    # the true read is one of the candidates
    xv, iv = np.arange(24, dtype=np.float32).reshape(6, 4), np.array([[2], [5], [0]], np.int32)
    known = xe.index_map(comp, comp.entry.root.name, xv, iv)
    for index in np.ndindex(3, 4):
        assert not known[index].unknown and known[index].reads[0] in m[index].reads


def test_shapes_only_folds_what_constants_decide():
    b = xe.XlaBuilder("g")
    x = xe.Parameter(b, 0, xe.Shape("f32", (6, 4)), "x")
    i = xe.Reshape(xe.Rev(xe.Iota(b, xe.Shape("s32", (3,)), 0), [0]), [3, 1])  # [[2], [1], [0]] from constants
    g = xe.Gather(x, i, offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0], index_vector_dim=1,
                  slice_sizes=[1, 4])
    comp = b.build(g)
    m = xe.index_map(comp, comp.entry.root.name)
    assert not m[(0, 1)].unknown and m[(0, 1)].reads == ((0, (2, 1)),)


def test_shapes_only_map_of_a_huge_gather_under_1_gib():
    code = textwrap.dedent("""
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
        import numpy as np, xla_explorer as xe
        b = xe.XlaBuilder("big")
        x = xe.Parameter(b, 0, xe.Shape("f32", (100000, 100000)), "x")
        i = xe.Parameter(b, 1, xe.Shape("s32", (5, 1)), "i")
        g = xe.Gather(x, i, offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0], index_vector_dim=1,
                      slice_sizes=[1, 100000])
        comp = b.build(g)
        m = xe.index_map(comp, comp.entry.root.name)
        a = m[(3, 99999)]
        assert a.unknown and len(a.reads) == 100000 and (0, (77, 99999)) in a.reads
        try:
            np.zeros((100000, 100000), np.float32)
        except MemoryError:
            print("ok: limited")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "ok: limited" in out.stdout, out.stderr[-3000:]


# -- the new maps, against their references ----------------------------------------------------

def _eager_check(opcode, *values, **attrs):
    from xla_explorer.inspect import eager_operands, op_by_name
    iv = eager_operands(op_by_name(opcode), values, attrs)
    m = map_of(iv)
    ops = [np.asarray(o) for o in iv.operands]
    results = [np.asarray(r) for r in _results(iv)]
    for a in m:
        if m.kind == "copy":
            if not a.reads:
                assert a.source == "init" and results[0][a.index] == 0
                continue
            k, index = a.reads[0]
            assert results[0][a.index] == ops[k][index]
            for j, (k, index) in enumerate(a.reads[:len(results)]):
                assert results[j][a.index] == ops[k][index]
        else:
            assert np.isclose(results[0][a.index], sum(ops[k][i] for k, i in a.reads))
    return m


def test_sort_and_top_k_say_where_each_result_came_from():
    rng = np.random.default_rng(0)
    keys = rng.integers(0, 5, (3, 6)).astype(np.float32)
    vals = np.arange(18, dtype=np.int32).reshape(3, 6)
    m = _eager_check("sort", keys, vals, dimension=1, comparator=lambda a, b, c, d: xe.Lt(a, b))
    # stable: equal keys keep their order
    row = [m[(0, p)].detail["source_position"] for p in range(6)]
    assert sorted(row) == list(range(6)) and list(keys[0, row]) == sorted(keys[0])
    m = _eager_check("topk", rng.standard_normal((2, 7)).astype(np.float32), k=3)
    assert m.domain_shape == (2, 3)
    shapes_only = xe.index_map("topk", Unknown(xe.Shape("f32", (2, 7))), k=3)
    assert shapes_only[(1, 2)].unknown and len(shapes_only[(1, 2)].reads) == 7


def test_bitcast_and_dynamic_reshape_keep_element_order():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    m = _eager_check("bitcast", x, shape=xe.Shape("f32", (2, 6)))
    assert m[(1, 0)].reads == ((0, (1, 2)),)
    m = xe.index_map("bitcast", x, shape=xe.Shape("u8", (3, 4, 4)))
    assert m[(2, 3, 1)].reads == ((0, (2, 3)),)
    m = xe.index_map("bitcast", np.arange(4, dtype=np.uint8), shape=xe.Shape("u16", (2,)))
    assert m[(1,)].reads == ((0, (2,)), (0, (3,)))
    b = xe.XlaBuilder("dr")
    p = xe.Parameter(b, 0, xe.Shape("f32", (12,)), "x")
    n = xe.Parameter(b, 1, xe.Shape("s32", ()), "n")
    r = xe.DynamicReshape(p, [n, xe.Constant(b, np.int32(4))], [6, 4], [True, False])
    comp = b.build(r)
    m = xe.index_map(comp, comp.entry.root.name, np.arange(12, dtype=np.float32), np.int32(3))
    assert m.domain_shape == (3, 4) and m[(2, 1)].reads == ((0, (9,)),)
    assert xe.index_map(comp, comp.entry.root.name)[(0, 0)].unknown


@pytest.mark.parametrize("opcode, attrs", [
    ("all-reduce", dict(computation=lambda a, b: xe.Add(a, b), replica_groups=[[0, 2], [1, 3]])),
    ("all-gather", dict(all_gather_dim=0, shard_count=2, replica_groups=[[0, 1], [2, 3]])),
    ("all-to-all", dict(split_dimension=0, concat_dimension=0, split_count=4)),
    ("collective-permute", dict(source_target_pairs=[(0, 1), (1, 2), (2, 0)])),
    ("reduce-scatter", dict(computation=lambda a, b: xe.Add(a, b), scatter_dimension=0, shard_count=2,
                            replica_groups=[[3, 0], [1, 2]])),
    ("collective-broadcast", dict(replica_groups=[[2, 0, 1]])),
])
def test_collectives_map_every_device(opcode, attrs):
    stacked = np.arange(4 * 4 * 2, dtype=np.float32).reshape(4, 4, 2) + 1
    m = _eager_check(opcode, stacked, **attrs)
    assert m.domain_shape[0] == 4
    if opcode == "collective-permute":
        assert m[(3, 0, 0)].source == "init" and m[(1, 2, 1)].reads == ((0, (0, 2, 1)),)
    if opcode == "reduce-scatter":  # device 0 is second in its group: block 1 of the sum of 3 and 0
        assert m[(0, 0, 0)].reads == ((0, (3, 2, 0)), (0, (0, 2, 0)))
