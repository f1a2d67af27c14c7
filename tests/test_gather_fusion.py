"""A gather fused with the computation of its start indices (``fusion.GatherFusion``): the
plan fuses exactly the patterns JAX writes (``x[i, j]``: each index wrapped, reshaped,
concatenated), and the fused CPU loop agrees with the reference bit for bit -- negative
and out-of-range indices (clamped), every index type, index vectors anywhere in the
indices, batching dimensions, slices of rows and of columns, serial and parallel; the
CUDA backend runs the same plan's original steps."""
import os

import numpy as np
import pytest

import xla_explorer as xe

pytest.importorskip("numba")

from xla_explorer.executors.numba_setup import PARALLEL_THRESHOLD  # noqa: E402

RNG = np.random.default_rng(27)


@pytest.fixture(autouse=True)
def _threads_from_small_sizes(monkeypatch):
    """The gathers go parallel from ``MOVE_PARALLEL_THRESHOLD`` (1 MiB of f32): here from
    ``PARALLEL_THRESHOLD``, so that the sizes past it below run the parallel loops."""
    from xla_explorer.executors.cpu import indexing
    from xla_explorer.executors.cpu import shape as cpu_shape
    monkeypatch.setattr(indexing, "MOVE_PARALLEL_THRESHOLD", PARALLEL_THRESHOLD)
    monkeypatch.setattr(cpu_shape, "STREAM_THREADED_BYTES", 0)   # (row gathers too: ``shape.streamed``)
_NP = {"s8": np.int8, "s16": np.int16, "s32": np.int32, "s64": np.int64, "u8": np.uint8, "u32": np.uint32,
       "u64": np.uint64}


def _wrapped(name, t, dims, n):
    """HLO lines: ``name`` = select(p < 0, p + n, p) of parameter-like ``name``_in (JAX's
    wrap-around of a negative index), of type t and dims."""
    d = ",".join(map(str, dims))
    return f"""  {name}_zero = {t}[] constant(0)
  {name}_zb = {t}[{d}] broadcast({name}_zero), dimensions={{}}
  {name}_lt = pred[{d}] compare({name}_in, {name}_zb), direction=LT
  {name}_n = {t}[] constant({n})
  {name}_nb = {t}[{d}] broadcast({name}_n), dimensions={{}}
  {name}_add = {t}[{d}] add({name}_in, {name}_nb)
  {name} = {t}[{d}] select({name}_lt, {name}_add, {name}_in)
"""


def _elements_2d(t, rows, cols, n, index_type="s32"):
    """x[i, j] as JAX lowers it."""
    it = index_type
    text = f"""HloModule elements
ENTRY main {{
  x = {t}[{rows},{cols}] parameter(0)
  i_in = {it}[{n}] parameter(1)
  j_in = {it}[{n}] parameter(2)
{_wrapped("i", it, [n], rows)}{_wrapped("j", it, [n], cols)}  ri = {it}[{n},1] reshape(i)
  rj = {it}[{n},1] reshape(j)
  ij = {it}[{n},2] concatenate(ri, rj), dimensions={{1}}
  ROOT g = {t}[{n}] gather(x, ij), offset_dims={{}}, collapsed_slice_dims={{0,1}}, start_index_map={{0,1}}, index_vector_dim=1, slice_sizes={{1,1}}
}}
"""
    return xe.parse_hlo(text)


def _fused(comp):
    return [s.group for s in comp.fusion_plan().steps if s.group is not None and s.group.kind == "gather"]


def _indices(it, n, size, rng=RNG):
    """Indices of type ``it`` in and out of [0, size), negative ones where the type has them;
    for unsigned 64-bit also huge ones (past int64)."""
    info = np.iinfo(_NP[it])
    lo = max(int(info.min), -2 * size - 3)
    hi = min(int(info.max), 2 * size + 3)
    v = rng.integers(lo, hi + 1, n).astype(_NP[it])
    if it == "u64":
        v[::7] = np.uint64(2 ** 64 - 5)
        v[1::7] = np.uint64(2 ** 63 + 11)
    return v


def _check(comp, *args):
    want = comp.run(*args)
    got = comp.run(*args, backend="numba")
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
    return want


@pytest.mark.parametrize("index_type", ["s8", "s16", "s32", "s64", "u8", "u32", "u64"])
@pytest.mark.parametrize("n", [53, PARALLEL_THRESHOLD + 9])
def test_elements_2d_fused_and_exact(index_type, n):
    comp = _elements_2d("f32", 11, 7, n, index_type)
    [g] = _fused(comp)
    assert [m.opcode for m in g.members].count("concatenate") == 1 and len(g.components) == 2
    x = RNG.normal(size=(11, 7)).astype(np.float32)
    i, j = _indices(index_type, n, 11), _indices(index_type, n, 7)
    want = _check(comp, x, i, j)
    # the values themselves: wrap once, then clamp into the operand (XLA)
    wi = np.clip(np.where(i < 0, i + 11, i).astype(np.float64), 0, 10).astype(int) if index_type[0] == "s" else \
        np.minimum(i, 10).astype(int)
    wj = np.clip(np.where(j < 0, j + 7, j).astype(np.float64), 0, 6).astype(int) if index_type[0] == "s" else \
        np.minimum(j, 6).astype(int)
    if index_type not in ("s8", "u8"):   # (a narrow type's i + n wraps around in the type itself)
        np.testing.assert_array_equal(want, x[wi, wj])


@pytest.mark.parametrize("t", ["pred", "bf16", "s64", "c128"])
def test_elements_of_every_width(t):
    comp = _elements_2d(t, 5, 6, 40)
    x = (RNG.normal(size=(5, 6)) * 10).astype({"pred": bool, "bf16": np.float32, "s64": np.int64,
                                                 "c128": np.complex128}[t])
    if t == "bf16":
        import ml_dtypes
        x = x.astype(ml_dtypes.bfloat16)
    _check(comp, x, _indices("s32", 40, 5), _indices("s32", 40, 6))


def _text(body, params):
    return "HloModule m\nENTRY main {\n" + params + body + "}\n"


@pytest.mark.parametrize("n", [29, PARALLEL_THRESHOLD + 3])
def test_rows_and_columns_with_wrapped_indices(n):
    """x[i] of a matrix (whole rows: slices) and x[:, i] (columns: positions minor)."""
    rows = f"""  x = f32[13,37] parameter(0)
  i_in = s32[{n}] parameter(1)
{_wrapped("i", "s32", [n], 13)}  ri = s32[{n},1] reshape(i)
  ROOT g = f32[{n},37] gather(x, ri), offset_dims={{1}}, collapsed_slice_dims={{0}}, start_index_map={{0}}, index_vector_dim=1, slice_sizes={{1,37}}
"""
    cols = f"""  x = f32[37,13] parameter(0)
  i_in = s32[{n}] parameter(1)
{_wrapped("i", "s32", [n], 13)}  ri = s32[{n},1] reshape(i)
  ROOT g = f32[37,{n}] gather(x, ri), offset_dims={{0}}, collapsed_slice_dims={{1}}, start_index_map={{1}}, index_vector_dim=1, slice_sizes={{37,1}}
"""
    for body, dims in ((rows, (13, 37)), (cols, (37, 13))):
        comp = xe.parse_hlo(_text(body, ""))
        assert len(_fused(comp)) == 1
        _check(comp, RNG.normal(size=dims).astype(np.float32), _indices("s32", n, 13))


def test_windows_of_a_3d_operand():
    """Slices of several rows (x[i, j:j+3, :] style windows), start indices clamped so the
    window fits; the index vector first in the indices (index_vector_dim 0)."""
    n = 17
    body = f"""  x = s32[6,9,5] parameter(0)
  i_in = s32[{n}] parameter(1)
  j_in = s32[{n}] parameter(2)
{_wrapped("i", "s32", [n], 6)}{_wrapped("j", "s32", [n], 9)}  ri = s32[1,{n}] reshape(i)
  rj = s32[1,{n}] reshape(j)
  ij = s32[2,{n}] concatenate(ri, rj), dimensions={{0}}
  ROOT g = s32[{n},3,5] gather(x, ij), offset_dims={{1,2}}, collapsed_slice_dims={{0}}, start_index_map={{0,1}}, index_vector_dim=0, slice_sizes={{1,3,5}}
"""
    comp = xe.parse_hlo(_text(body, ""))
    assert len(_fused(comp)) == 1
    _check(comp, RNG.integers(-99, 99, (6, 9, 5)).astype(np.int32), _indices("s32", n, 6), _indices("s32", n, 9))


def test_batching_dims_and_an_index_vector_in_the_middle():
    """Batching dimensions (vmap of a gather), indices [B, K, M] with the index vector in
    the middle (positions p = b * M + m), one component computed, one read from a
    two-component parameter."""
    B, M = 4, 5
    body = f"""  x = f32[{B},7,8,3] parameter(0)
  i_in = s32[{B},{M}] parameter(1)
  jk = s32[{B},2,{M}] parameter(2)
{_wrapped("i", "s32", [B, M], 7)}  ri = s32[{B},1,{M}] reshape(i)
  idx = s32[{B},3,{M}] concatenate(ri, jk), dimensions={{1}}
  ROOT g = f32[{B},{M}] gather(x, idx), offset_dims={{}}, collapsed_slice_dims={{1,2,3}}, start_index_map={{1,2,3}}, operand_batching_dims={{0}}, start_indices_batching_dims={{0}}, index_vector_dim=1, slice_sizes={{1,1,1,1}}
"""
    comp = xe.parse_hlo(_text(body, ""))
    [g] = _fused(comp)
    assert [(c[1], c[2]) for c in g.components] == [(1, 0), (2, 0), (2, 1)]
    jk = np.stack([RNG.integers(-3, 11, (B, M)), RNG.integers(-3, 6, (B, M))], axis=1).astype(np.int32)
    _check(comp, RNG.normal(size=(B, 7, 8, 3)).astype(np.float32), _indices("s32", B * M, 7).reshape(B, M), jk)


def test_iota_and_broadcast_components():
    """take_along_axis style: a row index from an iota, a column index computed from a
    parameter and a broadcast vector (read through its index map)."""
    R, C = 6, 9
    body = f"""  x = f32[{R},{C}] parameter(0)
  k = s32[{R},4] parameter(1)
  off = s32[4] parameter(2)
  io = s32[{R},4] iota(), iota_dimension=0
  ob = s32[{R},4] broadcast(off), dimensions={{1}}
  col = s32[{R},4] add(k, ob)
  ri = s32[{R},4,1] reshape(io)
  rc = s32[{R},4,1] reshape(col)
  idx = s32[{R},4,2] concatenate(ri, rc), dimensions={{2}}
  ROOT g = f32[{R},4] gather(x, idx), offset_dims={{}}, collapsed_slice_dims={{0,1}}, start_index_map={{0,1}}, index_vector_dim=2, slice_sizes={{1,1}}
"""
    comp = xe.parse_hlo(_text(body, ""))
    [g] = _fused(comp)
    assert {"iota", "broadcast", "add"} <= {m.opcode for m in g.members}
    x = RNG.normal(size=(R, C)).astype(np.float32)
    k, off = RNG.integers(-4, 12, (R, 4)).astype(np.int32), RNG.integers(-2, 3, 4).astype(np.int32)
    want = _check(comp, x, k, off)
    np.testing.assert_array_equal(want, np.take_along_axis(x, np.clip(k + off, 0, C - 1), axis=1))


def test_not_fused_where_the_indices_are_needed_elsewhere():
    """The concatenated indices are a result too (the root's operand) or the only thing
    is a reshape of a parameter (jnp.take): the gather runs its own kernel."""
    n = 10
    shared = f"""  x = f32[4,4] parameter(0)
  i_in = s32[{n}] parameter(1)
  j_in = s32[{n}] parameter(2)
{_wrapped("i", "s32", [n], 4)}  ri = s32[{n},1] reshape(i)
  rj = s32[{n},1] reshape(j_in)
  ij = s32[{n},2] concatenate(ri, rj), dimensions={{1}}
  g = f32[{n}] gather(x, ij), offset_dims={{}}, collapsed_slice_dims={{0,1}}, start_index_map={{0,1}}, index_vector_dim=1, slice_sizes={{1,1}}
  ROOT t = (f32[{n}], s32[{n},2]) tuple(g, ij)
"""
    comp = xe.parse_hlo(_text(shared, ""))
    assert not _fused(comp)
    take = f"""  x = f32[4,4] parameter(0)
  i = s32[{n}] parameter(1)
  ri = s32[{n},1] reshape(i)
  ROOT g = f32[{n},4] gather(x, ri), offset_dims={{1}}, collapsed_slice_dims={{0}}, start_index_map={{0}}, index_vector_dim=1, slice_sizes={{1,4}}
"""
    assert not _fused(xe.parse_hlo(_text(take, "")))
    # the concatenate of two parameters alone is fused: its pass over the indices goes
    plain = shared.replace("  ROOT t = (f32[10], s32[10,2]) tuple(g, ij)\n", "").replace("  g = ", "  ROOT g = ")
    comp = xe.parse_hlo(_text(plain, ""))
    assert len(_fused(comp)) == 1
    _check(comp, RNG.normal(size=(4, 4)).astype(np.float32), _indices("s32", n, 4), _indices("s32", n, 4))


@pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") != "1", reason="CUDA runs in the simulator in tests")
def test_cuda_runs_the_steps_it_does_not_fuse():
    comp = _elements_2d("f32", 6, 5, 30)
    assert _fused(comp)
    args = (RNG.normal(size=(6, 5)).astype(np.float32), _indices("s32", 30, 6), _indices("s32", 30, 5))
    np.testing.assert_array_equal(comp.run(*args, backend="cuda"), comp.run(*args))
