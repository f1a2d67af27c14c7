"""Slicing ops (ops/slicing.py): Slice, DynamicSlice, DynamicUpdateSlice, Pad.

The spec's worked examples, XLA's clamping of out-of-bounds starts (huge unsigned ones
included), one negative test per shape rule, and hypothesis tests building each result
element by element from the index map and comparing with the reference."""
import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import xla_explorer as xe
from xla_explorer.ops import registry


def raises(message):
    return pytest.raises(xe.ShapeError, match=re.escape(message))


def via_index_map(imap, operands, padding_value=None):
    """Build the result element by element from the index map (plain Python loops)."""
    out = np.empty(imap.domain_shape, dtype=operands[0].dtype)
    for access in imap:
        if access.source == "padding":
            assert access.reads == ()
            out[access.index] = padding_value
        else:
            (k, operand_index), = access.reads
            out[access.index] = operands[k][operand_index]
    return out


def index_map(opcode, *operands, **attrs):
    op = registry.get(opcode)
    shape = op.shape_rule(*[xe.Shape.of(o) for o in operands], **attrs)
    return op.index_map(*operands, shape=shape, **attrs)


A = np.array([0.0, 1.0, 2.0, 3.0, 4.0], np.float32)
B = np.array([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0], [6.0, 7.0, 8.0], [9.0, 10.0, 11.0]], np.float32)


# -- spec examples ---------------------------------------------------------------------------

def test_slice_spec_examples():
    np.testing.assert_array_equal(xe.Slice(A, [2], [4]), [2.0, 3.0])
    np.testing.assert_array_equal(xe.Slice(B, [2, 1], [4, 3]), [[7.0, 8.0], [10.0, 11.0]])


def test_slice_strided_corpus_case():
    # shape_slice_strided_reverse: slice={[1:8:3], [0:8:2]} of f32[9,8] is f32[3,4]
    z = np.arange(72, dtype=np.float32).reshape(9, 8)
    out = xe.Slice(z, [1, 0], [8, 8], [3, 2])
    assert out.shape == (3, 4)
    for i, j in np.ndindex(3, 4):
        assert out[i, j] == z[1 + 3 * i, 0 + 2 * j]  # operand[start + result_index * strides]
    assert xe.Slice(z, [2, 1], [9, 8], [2, 3]).shape == (4, 3)
    assert xe.Slice(z, [3, 3], [3, 8]).shape == (0, 5)


def test_dynamic_slice_spec_examples():
    np.testing.assert_array_equal(xe.DynamicSlice(A, [np.int32(2)], [2]), [2.0, 3.0])
    np.testing.assert_array_equal(xe.DynamicSlice(B, [np.int32(2), np.int32(1)], [2, 2]), [[7.0, 8.0], [10.0, 11.0]])
    # the 2018 form: one rank-1 array of start indices, and its argument name size_indices
    np.testing.assert_array_equal(xe.DynamicSlice(B, np.array([2, 1], np.int32), size_indices=[2, 2]),
                                  [[7.0, 8.0], [10.0, 11.0]])


def test_dynamic_update_slice_spec_examples():
    np.testing.assert_array_equal(xe.DynamicUpdateSlice(A, np.array([5.0, 6.0], np.float32), [np.int32(2)]),
                                  [0.0, 1.0, 5.0, 6.0, 4.0])
    u = np.array([[12.0, 13.0], [14.0, 15.0], [16.0, 17.0]], np.float32)
    np.testing.assert_array_equal(xe.DynamicUpdateSlice(B, u, [np.int32(1), np.int32(1)]),
                                  [[0.0, 1.0, 2.0], [3.0, 12.0, 13.0], [6.0, 14.0, 15.0], [9.0, 16.0, 17.0]])


def test_pad_design_example_eager():
    out = xe.Pad(np.ones((2, 2), np.float32), np.float32(0), padding_config=[(1, 1, 1), (0, 0, 0)])
    assert isinstance(out, np.ndarray) and out.dtype == np.float32
    np.testing.assert_array_equal(out, [[0, 0], [1, 1], [0, 0], [1, 1], [0, 0]])


def test_pad_examples():
    x = np.array([1, 2, 3, 4], np.int32)
    z = np.int32(0)
    np.testing.assert_array_equal(xe.Pad(x, z, [(2, 3, 0)]), [0, 0, 1, 2, 3, 4, 0, 0, 0])   # edge padding
    np.testing.assert_array_equal(xe.Pad(x, z, [(0, 0, 1)]), [1, 0, 2, 0, 3, 0, 4])          # interior padding
    np.testing.assert_array_equal(xe.Pad(x, z, [(-1, -2, 0)]), [2])                          # negative: crops
    m = np.array([[1, 2, 3], [4, 5, 6]], np.int32)
    np.testing.assert_array_equal(xe.Pad(m, z, [(0, 2, 1), (1, 1, 2)]),
                                  [[0, 1, 0, 0, 2, 0, 0, 3, 0],
                                   [0, 0, 0, 0, 0, 0, 0, 0, 0],
                                   [0, 4, 0, 0, 5, 0, 0, 6, 0],
                                   [0, 0, 0, 0, 0, 0, 0, 0, 0],
                                   [0, 0, 0, 0, 0, 0, 0, 0, 0]])
    # interior padding comes first, then negative edge padding removes from the padded array
    np.testing.assert_array_equal(xe.Pad(m, z, [(-1, 0, 1), (1, -2, 1)]), [[0, 0, 0, 0], [0, 4, 0, 5]])
    # a no-op when all edge pairs are (0, 0) and interior paddings 0
    np.testing.assert_array_equal(xe.Pad(m, z, [(0, 0, 0), (0, 0)]), m)


def test_pad_corpus_case():
    # shape_concat_pad: pad(f32[3,4]) padding=-1_2_1x1_-2_2 is f32[6,9]; 2_1_3x0_0_5 of f32[3,1] is f32[12,1]
    b = np.arange(12, dtype=np.float32).reshape(3, 4)
    v = np.float32(-7)
    out = xe.Pad(b, v, [(-1, 2, 1), (1, -2, 2)])
    assert out.shape == (6, 9)
    assert xe.Pad(np.ones((3, 1), np.float32), v, [(2, 1, 3), (0, 0, 5)]).shape == (12, 1)
    for (i, j), value in np.ndenumerate(out):
        # invert result_index = edge_padding_low + operand_index * (interior_padding + 1)
        qi, ri = divmod(i + 1, 2)
        qj, rj = divmod(j - 1, 3)
        if ri == 0 and rj == 0 and 0 <= qi < 3 and 0 <= qj < 4 and j >= 1:
            assert value == b[qi, qj]
        else:
            assert value == v


# -- XLA's clamping of out-of-bounds starts --------------------------------------------------------

X67 = np.arange(42, dtype=np.float32).reshape(6, 7)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint8, np.uint32, np.uint64])
def test_dynamic_slice_clamps_any_integer_type(dtype):
    big = np.iinfo(dtype).max   # for unsigned types: a huge index, not -1
    out = xe.DynamicSlice(X67, [dtype(big), dtype(big)], [3, 4])
    np.testing.assert_array_equal(out, X67[3:6, 3:7])
    np.testing.assert_array_equal(xe.DynamicSlice(X67, [dtype(0), dtype(100)], [2, 2]), X67[0:2, 5:7])


def test_dynamic_slice_negative_start_clamps_to_zero():
    np.testing.assert_array_equal(xe.DynamicSlice(X67, [np.int32(-5), np.int32(-1)], [2, 3]), X67[0:2, 0:3])


def test_dynamic_update_slice_clamps_so_update_fits():
    u = -np.ones((2, 3), np.float32)
    out = xe.DynamicUpdateSlice(X67, u, [np.int32(10), np.int32(-1)])   # corpus: dynamic_update_slice_oob
    want = X67.copy()
    want[4:6, 0:3] = u
    np.testing.assert_array_equal(out, want)
    out = xe.DynamicUpdateSlice(X67, u, [np.uint64(2 ** 64 - 1), np.uint64(5)])
    want = X67.copy()
    want[4:6, 4:7] = u
    np.testing.assert_array_equal(out, want)
    assert (X67 == np.arange(42).reshape(6, 7)).all()   # the operand is not modified


def test_dynamic_slice_index_map_reports_clamping():
    imap = index_map("dynamic-slice", X67, np.int32(5), np.int32(-9), slice_sizes=(3, 4))
    access = imap[0, 0]
    assert access.clamped
    assert access.detail["start_indices"] == (5, -9)
    assert access.detail["adjusted_start_indices"] == (3, 0)
    assert access.reads == ((0, (3, 0)),)
    assert not index_map("dynamic-slice", X67, np.int32(1), np.int32(2), slice_sizes=(3, 4))[0, 0].clamped


def test_dynamic_update_slice_index_map_names_its_source():
    u = np.zeros((2, 3), np.float32)
    imap = index_map("dynamic-update-slice", X67, u, np.int32(1), np.int32(9))
    assert imap.kind == "copy"
    inside = imap[2, 5]   # adjusted start (1, 4): result (2, 5) is update (1, 1)
    assert inside.reads == ((1, (1, 1)),) and inside.detail["from"] == "update" and inside.clamped
    outside = imap[0, 0]
    assert outside.reads == ((0, (0, 0)),) and outside.detail["from"] == "operand"


def test_pad_index_map_details():
    m = np.array([[1, 2, 3], [4, 5, 6]], np.int32)
    imap = index_map("pad", m, np.int32(0), padding_config=((0, 2, 1), (1, 1, 2)))
    hit = imap[2, 4]
    assert hit.source == "operand" and hit.reads == ((0, (1, 1)),)
    assert hit.detail["edge_padding_low"] == (0, 1) and hit.detail["interior_padding"] == (1, 2)
    assert "edge_padding_low + operand_index * (interior_padding + 1)" in hit.detail["formula"]
    pad = imap[1, 0]
    assert pad.source == "padding" and pad.reads == ()
    assert pad.detail["padding"] == ("dimension 0: interior padding", "dimension 1: low edge padding")
    assert imap[4, 1].detail["padding"] == ("dimension 0: high edge padding",)


def test_builder_mode_and_hlo_attrs():
    b = xe.XlaBuilder("slicing")
    x = xe.Parameter(b, 0, xe.Shape("f32", (6, 7)), "x")
    i = xe.Parameter(b, 1, xe.Shape("s32", ()), "i")
    v = xe.Parameter(b, 2, xe.Shape("f32", ()), "v")
    starts = xe.Parameter(b, 3, xe.Shape("s32", (2,)), "starts")
    sl = xe.Slice(x, [0, 3], [6, 4], [2, 1])
    ds = xe.DynamicSlice(x, [i, i], [3, 4])
    ds2 = xe.DynamicSlice(x, starts, [2, 2])          # split into scalars: slice + reshape
    dus = xe.DynamicUpdateSlice(x, ds, [i, np.int32(1)])
    pd = xe.Pad(x, v, [(-1, 2, 1), (1, -2, 2)])
    assert str(sl.shape) == "f32[3,1]" and str(ds.shape) == "f32[3,4]" and str(dus.shape) == "f32[6,7]"
    assert str(pd.shape) == "f32[12,18]" and len(ds2.inst.operands) == 3

    def fmt(op):
        d = registry.get(op.inst.opcode)
        return ", ".join(f"{a.hlo}={a.format(op.inst.attrs, op.inst, None)}" for a in d.attrs)
    # XLA prints every stride as soon as one is not 1 (corpus: slice={[0:9:2], [3:4:1]})
    assert fmt(sl) == "slice={[0:6:2], [3:4:1]}"
    assert fmt(xe.Slice(x, [0, 0], [1, 3])) == "slice={[0:1], [0:3]}"
    assert fmt(ds) == "dynamic_slice_sizes={3,4}"
    assert fmt(pd) == "padding=-1_2_1x1_-2_2"
    assert fmt(xe.Pad(x, v, [(1, 0, 0), (0, 2, 0)])) == "padding=1_0x0_2"

    comp = b.build(xe.Tuple(sl, ds, ds2, dus, pd))
    xv = np.arange(42, dtype=np.float32).reshape(6, 7)
    got = comp.run(xv, np.int32(9), np.float32(-1), np.array([-3, 6], np.int32))
    np.testing.assert_array_equal(got[0], xv[0:6:2, 3:4])
    np.testing.assert_array_equal(got[1], xv[3:6, 3:7])
    np.testing.assert_array_equal(got[2], xv[0:2, 5:7])
    want = xv.copy()
    want[3:6, 1:5] = xv[3:6, 3:7]
    np.testing.assert_array_equal(got[3], want)
    np.testing.assert_array_equal(got[4], xe.Pad(xv, np.float32(-1), [(-1, 2, 1), (1, -2, 2)]))


# -- negative tests: one per shape rule ----------------------------------------------------------

F34 = np.zeros((3, 4), np.float32)


def test_slice_errors():
    with raises("Slice: limit_indices[1]=5 is larger than operand dimension 1 (f32[3,4])"):
        xe.Slice(F34, [0, 0], [3, 5])
    with raises("Slice: start_indices=[0] has 1 entries but the operand f32[3,4] has rank 2"):
        xe.Slice(F34, [0], [3, 4])
    with raises("Slice: strides=[1] has 1 entries but the operand f32[3,4] has rank 2"):
        xe.Slice(F34, [0, 0], [3, 4], [1])
    with raises("Slice: start_indices[0]=-1 is negative (f32[3,4])"):
        xe.Slice(F34, [-1, 0], [3, 4])
    with raises("Slice: limit_indices[1]=1 is smaller than start_indices[1]=2 (f32[3,4])"):
        xe.Slice(F34, [0, 2], [3, 1])
    with raises("Slice: strides[0]=0 must be positive (f32[3,4])"):
        xe.Slice(F34, [0, 0], [3, 4], [0, 1])
    with raises("Slice: start_indices must be a list of integers"):
        xe.Slice(F34, [0.0, 0], [3, 4])


def test_dynamic_slice_errors():
    i = np.int32(0)
    with raises("DynamicSlice: got 1 start indices for the operand f32[3,4] of rank 2"):
        xe.DynamicSlice(F34, [i], [1, 1])
    with raises("DynamicSlice: start_indices[1] must be an integer scalar, got f32[]"):
        xe.DynamicSlice(F34, [i, np.float32(0)], [1, 1])
    with raises("DynamicSlice: start_indices[0] must be an integer scalar, got s32[1]"):
        xe.DynamicSlice(F34, [np.array([0], np.int32), i], [1, 1])
    with raises("DynamicSlice: start_indices[1] is s64[] but start_indices[0] is s32[]; all start indices must "
                "have the same type"):
        xe.DynamicSlice(F34, [i, np.int64(0)], [1, 1])
    with raises("DynamicSlice: slice_sizes=[1] has 1 entries but the operand f32[3,4] has rank 2"):
        xe.DynamicSlice(F34, [i, i], [1])
    with raises("DynamicSlice: slice_sizes[0]=-1 is negative"):
        xe.DynamicSlice(F34, [i, i], [-1, 1])
    with raises("DynamicSlice: slice_sizes[1]=5 is larger than operand dimension 1 (f32[3,4])"):
        xe.DynamicSlice(F34, [i, i], [1, 5])


def test_dynamic_update_slice_errors():
    i = np.int32(0)
    with raises("DynamicUpdateSlice: update (s32[1,1]) must have the operand's element type (f32[3,4])"):
        xe.DynamicUpdateSlice(F34, np.zeros((1, 1), np.int32), [i, i])
    with raises("DynamicUpdateSlice: update (f32[1]) has rank 1 but the operand (f32[3,4]) has rank 2"):
        xe.DynamicUpdateSlice(F34, np.zeros(1, np.float32), [i, i])
    with raises("DynamicUpdateSlice: got 3 start indices for the operand f32[3,4] of rank 2"):
        xe.DynamicUpdateSlice(F34, np.zeros((1, 1), np.float32), [i, i, i])
    with raises("DynamicUpdateSlice: start_indices[0] must be an integer scalar, got f32[]"):
        xe.DynamicUpdateSlice(F34, np.zeros((1, 1), np.float32), [np.float32(0), i])
    with raises("DynamicUpdateSlice: start_indices[1] is u32[] but start_indices[0] is s32[]"):
        xe.DynamicUpdateSlice(F34, np.zeros((1, 1), np.float32), [i, np.uint32(0)])
    with raises("DynamicUpdateSlice: update dimension 1 (f32[1,5]) is larger than operand dimension 1 (f32[3,4])"):
        xe.DynamicUpdateSlice(F34, np.zeros((1, 5), np.float32), [i, i])


def test_pad_errors():
    v = np.float32(0)
    with raises("Pad: padding_value must be a scalar, got f32[1]"):
        xe.Pad(F34, np.zeros(1, np.float32), [(0, 0, 0), (0, 0, 0)])
    with raises("Pad: padding_value (s32[]) must have the operand's element type (f32[3,4])"):
        xe.Pad(F34, np.int32(0), [(0, 0, 0), (0, 0, 0)])
    with raises("Pad: padding_config has 1 entries but the operand f32[3,4] has rank 2"):
        xe.Pad(F34, v, [(0, 0, 0)])
    with raises("Pad: padding_config[1] has interior_padding=-1; interior padding cannot be negative"):
        xe.Pad(F34, v, [(0, 0, 0), (0, 0, -1)])
    with raises("Pad: dimension 0 of the result would have negative size -1 = 3 (operand) + -2 (edge_padding_low) "
                "+ 2*0 (interior) + -2 (edge_padding_high) (f32[3,4])"):
        xe.Pad(F34, v, [(-2, -2, 0), (0, 0, 0)])
    with raises("Pad: padding_config[0] must be a (low, high, interior) triple"):
        xe.Pad(F34, v, [(1,), (0, 0, 0)])


# -- hypothesis: index maps against the references ----------------------------------------------

dims_st = st.lists(st.integers(0, 5), min_size=0, max_size=3)


def _array(dims, seed=0):
    return np.random.default_rng(seed).integers(-100, 100, size=dims).astype(np.int32)


@settings(max_examples=80, deadline=None)
@given(dims_st, st.data())
def test_slice_index_map_matches_reference(dims, data):
    x = _array(dims)
    starts, limits, strides = [], [], []
    for d in dims:
        start = data.draw(st.integers(0, d))
        starts.append(start)
        limits.append(data.draw(st.integers(start, d)))
        strides.append(data.draw(st.integers(1, 3)))
    out = xe.Slice(x, starts, limits, strides)
    np.testing.assert_array_equal(out, x[tuple(slice(a, b, c) for a, b, c in zip(starts, limits, strides))])
    imap = index_map("slice", x, start_indices=tuple(starts), limit_indices=tuple(limits), strides=tuple(strides))
    np.testing.assert_array_equal(via_index_map(imap, [x]), out)


index_types = st.sampled_from([np.int8, np.int32, np.int64, np.uint8, np.uint32, np.uint64])


@settings(max_examples=80, deadline=None)
@given(dims_st, index_types, st.data())
def test_dynamic_slice_index_map_matches_reference(dims, index_type, data):
    x = _array(dims)
    info = np.iinfo(index_type)
    starts = [index_type(data.draw(st.one_of(st.integers(max(info.min, -8), 8),
                                             st.sampled_from([int(info.min), int(info.max)]))))
              for _ in dims]
    sizes = [data.draw(st.integers(0, d)) for d in dims]
    out = xe.DynamicSlice(x, starts, sizes)
    imap = index_map("dynamic-slice", x, *starts, slice_sizes=tuple(sizes))
    np.testing.assert_array_equal(via_index_map(imap, [x]), out)
    # the spec's clamp, written out once more
    adjusted = [min(max(int(s), 0), d - n) for s, d, n in zip(starts, dims, sizes)]
    np.testing.assert_array_equal(out, x[tuple(slice(a, a + n) for a, n in zip(adjusted, sizes))])
    if out.size:
        assert imap[(0,) * len(dims)].clamped == (tuple(adjusted) != tuple(int(s) for s in starts))


@settings(max_examples=80, deadline=None)
@given(dims_st, index_types, st.data())
def test_dynamic_update_slice_index_map_matches_reference(dims, index_type, data):
    x = _array(dims)
    update = _array([data.draw(st.integers(0, d)) for d in dims], seed=1) + 1000
    info = np.iinfo(index_type)
    starts = [index_type(data.draw(st.integers(max(info.min, -8), min(info.max, 8)))) for _ in dims]
    out = xe.DynamicUpdateSlice(x, update, starts)
    imap = index_map("dynamic-update-slice", x, update, *starts)
    np.testing.assert_array_equal(via_index_map(imap, [x, update]), out)
    assert (out >= 900).sum() == update.size   # the whole update is written, never cut


@settings(max_examples=100, deadline=None)
@given(dims_st, st.data())
def test_pad_index_map_matches_reference(dims, data):
    x = _array(dims) + 1000   # never equal to the padding value
    config = []
    for d in dims:
        interior = data.draw(st.integers(0, 3))
        padded = d + max(d - 1, 0) * interior
        low = data.draw(st.integers(-padded, 4))             # negative: crops
        high = data.draw(st.integers(-(padded + low), 4))    # keeps the result size >= 0
        config.append((low, high, interior))
    value = np.int32(-1)
    out = xe.Pad(x, value, config)
    imap = index_map("pad", x, value, padding_config=tuple(config))
    np.testing.assert_array_equal(via_index_map(imap, [x], padding_value=value), out)
    # independently: interior padding first, then edge padding (crop where negative)
    ref = x
    for axis, (low, high, interior) in enumerate(config):
        n = ref.shape[axis]
        spread_shape = list(ref.shape)
        spread_shape[axis] = n + max(n - 1, 0) * interior
        spread = np.full(spread_shape, value, np.int32)
        idx = [slice(None)] * ref.ndim
        idx[axis] = slice(0, None, interior + 1)
        spread[tuple(idx)] = ref
        pad_width = [(0, 0)] * ref.ndim
        pad_width[axis] = (max(low, 0), max(high, 0))
        spread = np.pad(spread, pad_width, constant_values=value)
        idx[axis] = slice(max(-low, 0), spread.shape[axis] - max(-high, 0))
        ref = spread[tuple(idx)]
    np.testing.assert_array_equal(out, ref)


# -- optional: against jax.lax ------------------------------------------------------------------

def test_against_jax_lax():
    pytest.importorskip("jax")
    from jax import lax
    x = np.arange(42, dtype=np.float32).reshape(6, 7)
    for config in [((-1, 2, 1), (1, -2, 2)), ((2, 1, 3), (0, 0, 5)), ((-3, -2, 1), (0, 1, 0))]:
        np.testing.assert_array_equal(xe.Pad(x, np.float32(-1), config), np.asarray(lax.pad(x, np.float32(-1), config)))
    np.testing.assert_array_equal(xe.Slice(x, [1, 0], [6, 7], [2, 3]), np.asarray(lax.slice(x, (1, 0), (6, 7), (2, 3))))
    # non-negative starts only: jax.lax first maps a negative start i to i + dim, raw HLO clamps it to 0
    for starts in [(5, 2), (100, 100), (0, 6)]:
        s = [np.int32(v) for v in starts]
        np.testing.assert_array_equal(xe.DynamicSlice(x, s, [3, 4]), np.asarray(lax.dynamic_slice(x, s, (3, 4))))
        u = -np.ones((2, 3), np.float32)
        np.testing.assert_array_equal(xe.DynamicUpdateSlice(x, u, s), np.asarray(lax.dynamic_update_slice(x, u, s)))
