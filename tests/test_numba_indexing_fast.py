"""The two fast paths of executors/cpu/indexing.py against the NumPy reference, bit for bit:

- the gather of single elements with one start index and one batching dimension
  (``take_along_axis``: ``batch1_range``): clamped indices (negative, past the end, huge),
  sizes 1, runs of exactly the shortest length it takes, the batch coordinate repeating
  (a dimension before it), the parallel split, every width of element moved as bits;
- the serial scatter of single elements with one start index (``_SINGLE_K1_TIGHT_HEAD``:
  x.at[i].add(u), segment_sum): out-of-range and negative indices skipped, duplicates
  applied in order (f32 sums and a combiner that is not commutative), NaN, -0.0 and
  denormals in both floating-point environments, sizes 0 and 1, a stride above 1, each
  standard combiner and element type class, the overwrite and a compiled region.

Shapes are small but take the paths (asserted on the plans); the checks run each
computation twice on numba (the walk and the run plan), as test_numba_data_movement does.
"""
import numpy as np
import pytest

import xla_explorer as xe
from xla_explorer import fpenv

pytest.importorskip("numba")

from test_numba_data_movement import _region, check, values  # noqa: E402

from xla_explorer.executors.cpu import indexing as cpu_indexing  # noqa: E402
from xla_explorer.executors.numba_setup import MOVE_PARALLEL_THRESHOLD  # noqa: E402

RUN = cpu_indexing._BATCH1_MIN_RUN   # the shortest run of positions the gather path takes
M = 19   # positions a run in most cases: the vectorised loop and its remainder


# =========================================================================================
# gather: one batching dimension, one start index, single elements
# =========================================================================================

def _along(ivd_implicit=False, batch_operand_dim=0, lead=0):
    """take_along_axis's gather dimension numbers: indices [lead.., B, M(, 1)] into an
    operand [B, N] (``batch_operand_dim`` 0) or [N, B] (1)."""
    gathered = 1 - batch_operand_dim
    return dict(offset_dims=[], collapsed_slice_dims=[gathered], start_index_map=[gathered],
                operand_batching_dims=[batch_operand_dim], start_indices_batching_dims=[lead],
                index_vector_dim=lead + 2, slice_sizes=[1, 1])


def _indices(shape, n, dtype, seed=1):
    """Indices of ``shape`` into a dimension of n: in range, negative, past the end, huge."""
    rng = np.random.default_rng(seed)
    info = np.iinfo(dtype)
    pool = np.array([0, n - 1, n, -1, -n - 3, 2 * n + 5], np.int64)
    i = rng.integers(-n - 2, 2 * n + 2, size=shape)
    i = np.where(rng.random(shape) < 0.3, pool[rng.integers(0, len(pool), size=shape)], i)
    i = np.clip(i, info.min, min(info.max, 1 << 62)).astype(dtype)
    huge = rng.random(shape) < 0.1
    i[huge] = np.array([info.max, info.min], dtype)[rng.integers(0, 2, int(huge.sum()))]
    return i


def _gather_plan(x, i, dims):
    return cpu_indexing._gather_plan(
        x.shape, i.shape, tuple(i.shape[:dims["index_vector_dim"]]), tuple(dims["offset_dims"]),
        tuple(dims["collapsed_slice_dims"]), tuple(dims["start_index_map"]), dims["index_vector_dim"],
        tuple(dims["slice_sizes"]), tuple(dims["operand_batching_dims"]), tuple(dims["start_indices_batching_dims"]))


def _check_gather(x, i, dims, fast=True):
    if i.shape[-1] != 1:
        i = i[..., None]   # (the index vector dimension: explicit)
    assert (_gather_plan(x, i, dims).batch1 is not None) == fast
    check(lambda p, q: xe.Gather(p, q, **dims), x, i)


@pytest.mark.parametrize("t", ["pred", "bf16", "f32", "s64", "c128", "u8", "f16", "f64"])
def test_gather_batch1_every_width(t):
    x = values((5, 7), t)
    _check_gather(x, _indices((5, M), 7, np.int32), _along())


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.int8, np.uint8, np.uint32, np.uint64])
def test_gather_batch1_clamps_every_index_type(dtype):
    n = 100 if np.iinfo(dtype).max > 100 else 7
    x = values((3, n), "f32")
    _check_gather(x, _indices((3, 2 * M + 1), n, dtype), _along())


def test_gather_batch1_nan_and_signed_zero_bits():
    x = np.array([[np.nan, -0.0, 0.0, -np.inf], [-0.0, np.float32(-np.nan), 1e-45, 3.0]], np.float32)
    i = np.tile(np.arange(-1, 5, dtype=np.int32), (2, 3))   # -1 and 4 clamp to 0 and 3
    _check_gather(x, i, _along())


def test_gather_batch1_sizes_one_and_the_shortest_run():
    _check_gather(values((1, 1), "f32"), _indices((1, M), 1, np.int32), _along())   # every index clamps to 0
    _check_gather(values((1, 9), "s64"), _indices((1, RUN), 9, np.int64), _along())
    _check_gather(values((6, 9), "f32"), _indices((6, RUN), 9, np.int32), _along())
    _check_gather(values((4, 9), "f32"), _indices((4, RUN - 1), 9, np.int32), _along(), fast=False)


def test_gather_batch1_layouts():
    # the operand's batching dimension last; the index vector dimension implicit; the batch
    # coordinate repeating under a leading indices dimension ((p // M) % B)
    x = values((11, 4), "f32")
    _check_gather(x, _indices((4, M + 2), 11, np.int32), _along(batch_operand_dim=1))
    x = values((4, 11), "f32")
    i = _indices((4, M), 11, np.int32)
    dims = dict(_along(), index_vector_dim=2)
    assert _gather_plan(x, i[..., None], dims).batch1 is not None
    check(lambda p, q: xe.Gather(p, q, **dims), x, i)
    dims = _along(lead=1)
    _check_gather(values((3, 13), "f32"), _indices((2, 3, M - 2), 13, np.int32), dims)


def test_gather_batch1_in_threads():
    b = -(-MOVE_PARALLEL_THRESHOLD // 64) + 3   # (positions enough for the parallel kernel)
    _check_gather(values((b, 9), "f32"), _indices((b, 64), 9, np.int32, seed=4), _along())


# =========================================================================================
# scatter: single elements, one start index, the serial loop
# =========================================================================================

ROWS = dict(update_window_dims=[], inserted_window_dims=[0], scatter_dims_to_operand_dims=[0], index_vector_dim=1)


def _segments(n, size, seed=2):
    """n scatter indices into ``size``: duplicates, out of range both sides, huge."""
    i = _indices((n,), size, np.int32, seed=seed)
    rng = np.random.default_rng(seed)
    return np.where(rng.random(n) < 0.5, rng.integers(0, max(size // 3, 1), n), i).astype(np.int32)[:, None]


def _check_scatter(x, i, u, combiner, dims=ROWS):
    plan = cpu_indexing._scatter_plan(x.shape, i.shape, u.shape, tuple(dims["update_window_dims"]),
                                      tuple(dims["inserted_window_dims"]), tuple(dims["scatter_dims_to_operand_dims"]),
                                      dims["index_vector_dim"], (), ())
    assert plan.K == 1 and plan.W == 1 and int(np.prod(plan.wl[0])) == 1 and plan.bmap.shape[1] == 0
    return check(lambda p, q, v: xe.Scatter(p, q, v, _region(combiner), **dims), x, i, u)


def _floats(n, seed, infinities=True):
    """f32 values with NaN, -0.0, infinities and denormals among them.  One NaN: with
    infinities the one inf - inf makes (sign set), else +NaN.  (Which of two NaN operands a
    sum keeps is the compiler's choice: numba's region loops and the reference can differ.)"""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n).astype(np.float32) * np.float32(3)
    special = [-np.nan, np.inf, -np.inf] if infinities else [np.nan]
    special = np.array(special + [-0.0, 0.0, 1e-40, -3e-39, 1.5e-38, -1.2e-38], np.float32)
    return np.where(rng.random(n) < 0.25, special[rng.integers(0, len(special), n)], x)


@pytest.mark.parametrize("env", ["flush", "ieee"])
@pytest.mark.parametrize("combiner", ["add", "maximum", "update_after_half", "second"])
def test_scatter_single_f32_in_order(env, combiner):
    with fpenv.float_env(env):
        for infinities in (True, False):
            _check_scatter(_floats(23, 0, infinities), _segments(600, 23), _floats(600, 1, infinities), combiner)


def test_scatter_single_sums_are_sequential():
    # updates whose sum depends on the order: 1, 1e8 and -1e8 into one element
    u = np.array([1e8, 1.0, -1e8, 1.0, 3e-39, -3e-39, 1.2e-38, -1.1754942e-38] * 8, np.float32)
    i = np.zeros((u.size, 1), np.int32)
    for env in ("flush", "ieee"):
        with fpenv.float_env(env):
            _check_scatter(np.array([0.0, 2e-39], np.float32), i, u, "add")
            _check_scatter(np.array([2e-39, -0.0], np.float32), i + 1, u, "add")


# (each case compiles its own scatter kernel: a few seconds each in a cold CI run)
@pytest.mark.parametrize("t,combiner", [("s32", "add"), ("s32", "update_minus"), ("u8", "add"), ("s64", "minimum"),
                                        ("pred", "xor"), ("bf16", "add"), ("f64", "minimum"), ("c64", "add")])
def test_scatter_single_element_types(t, combiner):
    x = values((17,), t)
    u = values((300,), t, seed=5)
    _check_scatter(x, _segments(300, 17, seed=3), u, combiner)


def test_scatter_single_f64_denormals_both_environments():
    u = np.array([1e-310, -2e-308, 3e-308, -0.0, np.nan, 2.2250738585072014e-308, -1e-320] * 9)
    x = np.array([0.0, 1e-312, -0.0])
    i = _segments(u.size, 3, seed=6)
    for env in ("flush", "ieee"):
        with fpenv.float_env(env):
            _check_scatter(x, i, u, "add")
            _check_scatter(x, i, u, "maximum")


def test_scatter_single_sizes_zero_and_one():
    _check_scatter(_floats(1, 2), _segments(40, 1), _floats(40, 3), "add")       # one element: top 0
    _check_scatter(_floats(5, 2), _segments(1, 5), _floats(1, 3), "add")          # one update
    _check_scatter(_floats(5, 2), np.array([[-1]], np.int32), _floats(1, 3), "add")   # skipped
    _check_scatter(_floats(5, 2), np.zeros((0, 1), np.int32), _floats(0, 3), "add")   # none


def test_scatter_single_index_types_and_implicit_index_vector():
    x, u = _floats(9, 4), _floats(200, 5)
    for dtype in (np.int64, np.uint8, np.uint64):
        _check_scatter(x, _indices((200, 1), 9, dtype, seed=7), u, "add")
    dims = dict(ROWS, index_vector_dim=1)
    i = _segments(200, 9)[:, 0]   # [n]: the index vector dimension implicit
    check(lambda p, q, v: xe.Scatter(p, q, v, _region("add"), **dims), x, i, u)


def test_scatter_single_into_a_column_and_a_row():
    # operand [6, 3]: a start index of dimension 0 (stride 3) and one of dimension 1 (stride 1)
    x = _floats(18, 6).reshape(6, 3)
    u = _floats(150, 7)
    dims = dict(update_window_dims=[], inserted_window_dims=[0, 1], scatter_dims_to_operand_dims=[0],
                index_vector_dim=1)
    _check_scatter(x, _segments(150, 6), u, "add", dims)
    _check_scatter(x, _segments(150, 3), u, "update_after_half", dict(dims, scatter_dims_to_operand_dims=[1]))
