"""Shape ops (ops/shape.py): the spec's worked examples, one negative test per shape rule,
index maps against the references (hypothesis), and the HLO attribute codecs."""
import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import xla_explorer as xe
from xla_explorer.ops import registry


def raises(message):
    """pytest.raises(ShapeError) whose message contains ``message`` literally."""
    return pytest.raises(xe.ShapeError, match=re.escape(message))


def via_index_map(imap, operands):
    """Build the result element by element from the index map (plain Python loops)."""
    out = np.empty(imap.domain_shape, dtype=operands[0].dtype)
    for access in imap:
        assert access.source == "operand" and len(access.reads) == 1
        (k, operand_index), = access.reads
        out[access.index] = operands[k][operand_index]
    return out


def index_map(opcode, *operands, **attrs):
    op = registry.get(opcode)
    shape = op.shape_rule(*[xe.Shape.of(o) for o in operands], **attrs)
    return op.index_map(*operands, shape=shape, **attrs)


# the spec's 24-element example array for Reshape and Collapse
V = np.array([[[10, 11, 12], [15, 16, 17]],
              [[20, 21, 22], [25, 26, 27]],
              [[30, 31, 32], [35, 36, 37]],
              [[40, 41, 42], [45, 46, 47]]], np.float32)


# -- spec examples ---------------------------------------------------------------------------

def test_broadcast_spec_example():
    out = xe.Broadcast(np.float32(2.0), broadcast_sizes=[2, 3])
    assert out.dtype == np.float32 and out.shape == (2, 3) and (out == 2.0).all()


def test_broadcast_prepends_dimensions():
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    out = xe.Broadcast(x, [4])
    assert out.shape == (4, 2, 3)
    for i in range(4):
        np.testing.assert_array_equal(out[i], x)


def test_broadcast_in_dim_corpus_mapping():
    # shape_broadcast_reshape_transpose: f32[2,3] -> f32[4,2,5,3], dimensions={1,3}
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = xe.BroadcastInDim(x, out_dim_size=[4, 2, 5, 3], broadcast_dimensions=[1, 3])
    for i0, i1, i2, i3 in np.ndindex(4, 2, 5, 3):
        assert out[i0, i1, i2, i3] == x[i1, i3]


def test_broadcast_in_dim_expands_size_one():
    x = np.array([[7], [8]], np.int8)                      # s8[2,1]
    out = xe.BroadcastInDim(x, [2, 3], [0, 1])
    np.testing.assert_array_equal(out, [[7, 7, 7], [8, 8, 8]])
    assert out.dtype == np.int8


def test_collapse_spec_examples():
    np.testing.assert_array_equal(xe.Collapse(V, [0, 1, 2]), V.reshape(24))
    # The spec's page shows the results of {0,1} and {1,2} swapped (f32[4x6] for {0,1});
    # its rule -- the collapsed dimensions become one dimension *in their place*, of the
    # product's size -- and XLA itself (XlaBuilder::Collapse, xla_client_test's
    # Collapse(s32[2,2,2], [1,2]) == [[1,2,3,4],[5,6,7,8]]) give f32[8x3] for {0,1}.
    np.testing.assert_array_equal(xe.Collapse(V, [0, 1]),
                                  [[10, 11, 12], [15, 16, 17], [20, 21, 22], [25, 26, 27],
                                   [30, 31, 32], [35, 36, 37], [40, 41, 42], [45, 46, 47]])
    np.testing.assert_array_equal(xe.Collapse(V, [1, 2]),
                                  [[10, 11, 12, 15, 16, 17], [20, 21, 22, 25, 26, 27],
                                   [30, 31, 32, 35, 36, 37], [40, 41, 42, 45, 46, 47]])
    s = np.array([[[1, 2], [3, 4]], [[5, 6], [7, 8]]], np.int32)
    np.testing.assert_array_equal(xe.Collapse(s, [1, 2]), [[1, 2, 3, 4], [5, 6, 7, 8]])


def test_reshape_spec_examples():
    np.testing.assert_array_equal(xe.Reshape(V, [0, 1, 2], [24]), [10, 11, 12, 15, 16, 17, 20, 21, 22, 25, 26, 27,
                                                                   30, 31, 32, 35, 36, 37, 40, 41, 42, 45, 46, 47])
    np.testing.assert_array_equal(xe.Reshape(V, [0, 1, 2], [8, 3]),
                                  [[10, 11, 12], [15, 16, 17], [20, 21, 22], [25, 26, 27],
                                   [30, 31, 32], [35, 36, 37], [40, 41, 42], [45, 46, 47]])
    np.testing.assert_array_equal(xe.Reshape(V, [1, 2, 0], [24]), [10, 20, 30, 40, 11, 21, 31, 41, 12, 22, 32, 42,
                                                                   15, 25, 35, 45, 16, 26, 36, 46, 17, 27, 37, 47])
    np.testing.assert_array_equal(xe.Reshape(V, [1, 2, 0], [8, 3]),
                                  [[10, 20, 30], [40, 11, 21], [31, 41, 12], [22, 32, 42],
                                   [15, 25, 35], [45, 16, 26], [36, 46, 17], [27, 37, 47]])
    np.testing.assert_array_equal(xe.Reshape(V, [1, 2, 0], [2, 6, 2]),
                                  [[[10, 20], [30, 40], [11, 21], [31, 41], [12, 22], [32, 42]],
                                   [[15, 25], [35, 45], [16, 26], [36, 46], [17, 27], [37, 47]]])


def test_reshape_scalar_special_cases():
    s = xe.Reshape(np.array([[5]], np.float32), [0, 1], [])
    assert s.shape == () and s == 5
    m = xe.Reshape(np.float32(5), [], [1, 1])
    assert m.shape == (1, 1) and m[0, 0] == 5
    assert xe.Reshape(np.arange(6, dtype=np.int32), new_sizes=[2, 3]).tolist() == [[0, 1, 2], [3, 4, 5]]


def test_concatenate_spec_examples():
    out = xe.Concatenate([np.array([2, 3]), np.array([4, 5]), np.array([6, 7])], 0)
    np.testing.assert_array_equal(out, [2, 3, 4, 5, 6, 7])
    a = np.array([[1, 2], [3, 4], [5, 6]], np.int32)
    b = np.array([[7, 8]], np.int32)
    np.testing.assert_array_equal(xe.Concatenate(a, b, dimension=0), [[1, 2], [3, 4], [5, 6], [7, 8]])


def test_concatenate_with_empty_operand():
    a = np.ones((2, 0), np.float32)
    b = np.zeros((2, 3), np.float32)
    assert xe.Concatenate(a, b, a, dimension=1).shape == (2, 3)


def test_transpose_spec_rule():
    y = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    out = xe.Transpose(y, permutation=[2, 0, 1])
    # input_dimensions[permutation[i]] = output_dimensions[i]
    assert out.shape == (4, 2, 3)
    for i0, i1, i2 in np.ndindex(*out.shape):
        assert out[i0, i1, i2] == y[i1, i2, i0]


def test_rev_spec_rule():
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    out = xe.Rev(x, dimensions=[1])
    # index i of a reversed dimension of size N is index N - 1 - i
    for i, j in np.ndindex(3, 4):
        assert out[i, j] == x[i, 4 - 1 - j]
    np.testing.assert_array_equal(xe.Rev(x, [0, 1]), x[::-1, ::-1])
    np.testing.assert_array_equal(xe.Rev(x, []), x)


def test_iota_spec_examples():
    np.testing.assert_array_equal(xe.Iota(None, xe.Shape("s32", (4, 8)), 0), np.repeat(np.arange(4)[:, None], 8, 1))
    np.testing.assert_array_equal(xe.Iota(None, "s32[4,8]", 1), np.repeat(np.arange(8)[None, :], 4, 0))
    f = xe.Iota(None, "f32[7]", 0)
    assert f.dtype == np.float32 and f.tolist() == list(range(7))
    u = xe.Iota(None, "u8[2,3,4]", 0)
    assert u.dtype == np.uint8 and u[1].min() == 1


def test_iota_type_size_form_and_bf16():
    import ml_dtypes
    out = xe.Iota(None, "bf16", 5)
    assert out.dtype == ml_dtypes.bfloat16 and out.astype(np.float32).tolist() == [0, 1, 2, 3, 4]
    # integers are counted exactly, then converted: 257 rounds to 256 in bf16
    assert float(xe.Iota(None, "bf16[300]", 0)[257]) == 256.0
    c = xe.Iota(None, "c64[3]", 0)
    assert c.dtype == np.complex64 and c.tolist() == [0, 1, 2]


# -- builder mode: recorded instructions and HLO attributes -------------------------------------

def _fmt(inst):
    """The HLO attributes of an instruction as the printer would write them (schema order)."""
    op = registry.get(inst.opcode)
    parts = []
    for a in op.attrs:
        text = a.format(inst.attrs, inst, lambda c: c.name)
        if text is not None:
            parts.append(f"{a.hlo}={text}")
    return ", ".join(parts)


def test_builder_records_hlo_opcodes_and_attrs():
    b = xe.XlaBuilder("shapes")
    x = xe.Parameter(b, 0, xe.Shape("f32", (2, 3)), "x")
    y = xe.Parameter(b, 1, xe.Shape("f32", (2, 3, 4)), "y")
    bc = xe.BroadcastInDim(x, [4, 2, 5, 3], [1, 3])
    assert (bc.inst.opcode, str(bc.shape), _fmt(bc.inst)) == ("broadcast", "f32[4,2,5,3]", "dimensions={1,3}")
    tr = xe.Transpose(y, [2, 0, 1])
    assert (tr.inst.opcode, str(tr.shape), _fmt(tr.inst)) == ("transpose", "f32[4,2,3]", "dimensions={2,0,1}")
    rs = xe.Reshape(y, [4, 6])
    assert (rs.inst.opcode, str(rs.shape), _fmt(rs.inst)) == ("reshape", "f32[4,6]", "")
    rv = xe.Rev(y, [0, 2])
    assert (rv.inst.opcode, _fmt(rv.inst)) == ("reverse", "dimensions={0,2}")
    cc = xe.Concatenate(x, x, x, dimension=1)
    assert (cc.inst.opcode, str(cc.shape), _fmt(cc.inst)) == ("concatenate", "f32[2,9]", "dimensions={1}")
    io = xe.Iota(b, "s32[3,5]", 1)
    assert (io.inst.opcode, str(io.shape), _fmt(io.inst)) == ("iota", "s32[3,5]", "iota_dimension=1")
    bs = xe.Broadcast(x, [7])
    assert (str(bs.shape), _fmt(bs.inst)) == ("f32[7,2,3]", "dimensions={1,2}")
    # the old Reshape form records a transpose, then a reshape
    old = xe.Reshape(y, [1, 2, 0], [24])
    assert old.inst.opcode == "reshape" and old.inst.operands[0].opcode == "transpose"
    assert xe.Collapse(y, [1, 2]).inst.opcode == "reshape"


def test_builder_run_matches_eager():
    b = xe.XlaBuilder("run")
    x = xe.Parameter(b, 0, xe.Shape("f32", (2, 3)), "x")
    out = xe.Concatenate(xe.Rev(x, [1]), xe.Transpose(xe.Reshape(x, [3, 2]), [1, 0]), dimension=0)
    comp = b.build(xe.Tuple(out, xe.Broadcast(x, [2]), xe.Iota(b, "s32[2,2]", 0)))
    xv = np.arange(6, dtype=np.float32).reshape(2, 3)
    got = comp.run(xv)
    want = np.concatenate([xv[:, ::-1], xv.reshape(3, 2).T])
    np.testing.assert_array_equal(got[0], want)
    np.testing.assert_array_equal(got[1], np.stack([xv, xv]))
    np.testing.assert_array_equal(got[2], [[0, 0], [1, 1]])


def test_concatenate_codec_parse_and_format():
    codec = registry.get("concatenate").attrs[0]
    assert codec.hlo == "dimensions" and codec.parse("{1}", None) == {"dimension": 1}
    with pytest.raises(xe.HloParseError):
        codec.parse("{0,1}", None)
    assert codec.missing() is None


def test_attrs_from_shape():
    s = xe.Shape.parse("f32[4,2,5,3]")
    assert registry.get("broadcast").attrs_from_shape(s) == {"out_dim_size": (4, 2, 5, 3)}
    assert registry.get("reshape").attrs_from_shape(s) == {"new_sizes": (4, 2, 5, 3)}
    assert registry.get("iota").attrs_from_shape(s) == {"shape": s}


def test_copy_bitcast_dynamic_reshape():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    copy = registry.get("copy")
    out = copy.reference(x, shape=xe.Shape.of(x))
    np.testing.assert_array_equal(out, x)
    assert out is not x
    bitcast = registry.get("bitcast")
    s = xe.Shape("f32", (3, 2))
    assert bitcast.shape_rule(xe.Shape.of(x), shape=s) == s
    np.testing.assert_array_equal(bitcast.reference(x, shape=s), x.reshape(3, 2))
    u = bitcast.reference(x, shape=xe.Shape("u8", (24,)))
    assert u.dtype == np.uint8 and u.view(np.float32).tolist() == list(range(6))
    np.testing.assert_array_equal(xe.Copy(x), x)
    np.testing.assert_array_equal(xe.Bitcast(x, "s32[6]"), x.reshape(-1).view(np.int32))
    b = xe.XlaBuilder("hlo_only")
    p = xe.Parameter(b, 0, xe.Shape("f32", (2, 3)))
    assert xe.Copy(p).inst.opcode == "copy" and str(xe.Bitcast(p, "u16[12]").shape) == "u16[12]"
    with raises("Bitcast: the operand f32[2,3] has 192 bits but the result f32[4] has 128"):
        bitcast.shape_rule(xe.Shape.of(x), shape=xe.Shape("f32", (4,)))
    d = xe.DynamicReshape(np.arange(6, dtype=np.int32), [np.int32(2), np.int32(3)], [6, 3], [True, False])
    assert d.shape == (2, 3)
    b = xe.XlaBuilder("dyn")
    p = xe.Parameter(b, 0, xe.Shape("s32", (6,)))
    assert str(xe.DynamicReshape(p, [np.int32(2), np.int32(3)], [6, 3], [True, False]).shape) == "s32[<=6,3]"


# -- negative tests: one per shape rule ----------------------------------------------------------

F23 = np.zeros((2, 3), np.float32)


def test_broadcast_errors():
    with raises("BroadcastInDim: broadcast_dimensions=[0] has 1 entries but the operand f32[2,3] has rank 2"):
        xe.BroadcastInDim(F23, [2, 3], [0])
    with raises("BroadcastInDim: broadcast_dimensions[1]=2 is out of range for a result of rank 2"):
        xe.BroadcastInDim(F23, [2, 3], [0, 2])
    with raises("BroadcastInDim: broadcast_dimensions=[1, 0] must be strictly increasing"):
        xe.BroadcastInDim(F23, [3, 2], [1, 0])
    with raises("BroadcastInDim: broadcast_dimensions=[1, 1] must be strictly increasing"):
        xe.BroadcastInDim(np.zeros((3, 3), np.float32), [3, 3], [1, 1])
    with raises("BroadcastInDim: operand dimension 1 has size 3 (f32[2,3]), which is neither 1 nor out_dim_size[1]=4"):
        xe.BroadcastInDim(F23, [2, 4], [0, 1])
    with raises("BroadcastInDim: out_dim_size[0]=-1 is negative"):
        xe.BroadcastInDim(F23, [-1, 2, 3], [1, 2])
    with raises("Broadcast: broadcast_sizes[0]=-2 is negative"):
        xe.Broadcast(F23, [-2])
    with raises("BroadcastInDim: broadcast_dimensions must be a list of integers"):
        xe.BroadcastInDim(F23, [2, 3], [0.5, 1])


def test_reshape_errors():
    with raises("Reshape: new_sizes=[4, 2] has 8 elements but the operand f32[2,3] has 6"):
        xe.Reshape(F23, [4, 2])
    with raises("Reshape: dimensions=[0, 0] must be a permutation of the operand's dimensions [0, 1]"):
        xe.Reshape(F23, [0, 0], [6])
    with raises("Reshape: new_sizes[0]=-6 is negative"):
        xe.Reshape(F23, [-6, -1])
    with raises("Collapse: dimensions=[0, 2] must be an in-order, consecutive subset"):
        xe.Collapse(V, [0, 2])
    with raises("Collapse: dimensions=[1, 0] must be an in-order, consecutive subset"):
        xe.Collapse(V, [1, 0])
    with raises("Collapse: dimensions=[2, 3] must be an in-order, consecutive subset"):
        xe.Collapse(V, [2, 3])


def test_transpose_rev_errors():
    with raises("Transpose: permutation=[0, 0] is not a permutation of the operand's dimensions [0, 1] (f32[2,3])"):
        xe.Transpose(F23, [0, 0])
    with raises("Transpose: permutation=[0] is not a permutation"):
        xe.Transpose(F23, [0])
    with raises("Rev: dimensions[0]=2 is out of range for the operand f32[2,3] of rank 2"):
        xe.Rev(F23, [2])
    with raises("Rev: dimensions=[1, 1] names a dimension twice"):
        xe.Rev(F23, [1, 1])


def test_concatenate_errors():
    with raises("Concatenate: needs at least one operand"):
        xe.Concatenate([], 0)
    with raises("Concatenate: dimension=2 is out of range for operands of rank 2 (f32[2,3])"):
        xe.Concatenate(F23, F23, dimension=2)
    with raises("scalars cannot be concatenated"):
        xe.Concatenate(np.float32(1), np.float32(2), dimension=0)
    with raises("Concatenate: operand 1 (s32[2,3]) has element type s32 but operand 0 (f32[2,3]) has f32"):
        xe.Concatenate(F23, np.zeros((2, 3), np.int32), dimension=0)
    with raises("Concatenate: operand 1 (f32[6]) has rank 1 but operand 0 (f32[2,3]) has rank 2"):
        xe.Concatenate(F23, np.zeros(6, np.float32), dimension=0)
    with raises("Concatenate: operand 1 (f32[2,4]) differs from operand 0 (f32[2,3]) in dimension 1 (4 vs 3); "
                "only dimension 0 may differ"):
        xe.Concatenate(F23, np.zeros((2, 4), np.float32), dimension=0)
    with raises("Concatenate: dimension is required"):
        xe.Concatenate(F23, F23)


def test_iota_errors():
    with raises("Iota: iota_dimension=2 is out of range for s32[4,8] of rank 2"):
        xe.Iota(None, "s32[4,8]", 2)
    with raises("Iota does not make scalars"):
        xe.Iota(None, "s32[]", 0)
    with raises("Iota: the result must be an array of numbers"):
        xe.Iota(None, "pred[3]", 0)


# -- hypothesis: index maps against the references ----------------------------------------------

dims_st = st.lists(st.integers(0, 4), min_size=0, max_size=3)


def _array(dims, seed=0):
    return np.random.default_rng(seed).integers(-100, 100, size=dims).astype(np.int32)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_broadcast_index_map_matches_reference(data):
    out_dim_size = data.draw(st.lists(st.integers(0, 4), min_size=0, max_size=4))
    rank = data.draw(st.integers(0, len(out_dim_size)))
    broadcast_dimensions = sorted(data.draw(st.permutations(range(len(out_dim_size))))[:rank])
    operand_dims = [data.draw(st.sampled_from([1, out_dim_size[d]])) for d in broadcast_dimensions]
    x = _array(operand_dims)
    out = xe.BroadcastInDim(x, out_dim_size, broadcast_dimensions)
    imap = index_map("broadcast", x, out_dim_size=tuple(out_dim_size), broadcast_dimensions=tuple(broadcast_dimensions))
    np.testing.assert_array_equal(via_index_map(imap, [x]), out)
    # and with NumPy's own broadcasting (operand dims moved into place)
    expanded = [1] * len(out_dim_size)
    for d, r in enumerate(broadcast_dimensions):
        expanded[r] = operand_dims[d]
    np.testing.assert_array_equal(out, np.broadcast_to(x.reshape(expanded), out_dim_size))


@settings(max_examples=60, deadline=None)
@given(dims_st, st.data())
def test_reshape_index_map_matches_reference(dims, data):
    x = _array(dims)
    n = x.size
    # new sizes: a random factorisation of n (plus some 1s)
    new_sizes = []
    rest = n
    for _ in range(data.draw(st.integers(0, 3))):
        f = data.draw(st.sampled_from([d for d in range(1, rest + 1) if rest % d == 0] or [1]))
        new_sizes.append(f)
        rest //= max(f, 1)
    new_sizes.append(rest)
    if n == 0:
        new_sizes = data.draw(st.lists(st.integers(0, 3), min_size=1, max_size=3).filter(lambda s: 0 in s))
    out = xe.Reshape(x, new_sizes)
    imap = index_map("reshape", x, new_sizes=tuple(new_sizes))
    np.testing.assert_array_equal(via_index_map(imap, [x]), out)
    np.testing.assert_array_equal(out.reshape(-1), x.reshape(-1))


@settings(max_examples=60, deadline=None)
@given(dims_st, st.data())
def test_transpose_and_rev_index_maps_match_reference(dims, data):
    x = _array(dims)
    permutation = data.draw(st.permutations(range(len(dims))))
    out = xe.Transpose(x, permutation)
    np.testing.assert_array_equal(via_index_map(index_map("transpose", x, permutation=tuple(permutation)), [x]), out)
    dimensions = data.draw(st.lists(st.sampled_from(range(len(dims))), unique=True)) if dims else []
    rev = xe.Rev(x, dimensions)
    np.testing.assert_array_equal(via_index_map(index_map("reverse", x, dimensions=tuple(dimensions)), [x]), rev)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 4), min_size=1, max_size=3), st.data())
def test_concatenate_index_map_matches_reference(dims, data):
    dimension = data.draw(st.integers(0, len(dims) - 1))
    n = data.draw(st.integers(1, 4))
    operands = []
    for k in range(n):
        d = list(dims)
        d[dimension] = data.draw(st.integers(0, 3))
        operands.append(_array(d, seed=k))
    out = xe.Concatenate(*operands, dimension=dimension)
    imap = index_map("concatenate", *operands, dimension=dimension)
    np.testing.assert_array_equal(via_index_map(imap, operands), out)
    # the reads name the operand number
    for access in imap:
        (k, _), = access.reads
        assert access.detail["operand_number"] == k


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=3), st.data())
def test_iota_values(dims, data):
    d = data.draw(st.integers(0, len(dims) - 1))
    out = xe.Iota(None, xe.Shape("s64", dims), d)
    for index in np.ndindex(*dims):
        assert out[index] == index[d]


# -- optional: against jax.lax ------------------------------------------------------------------

def test_against_jax_lax():
    jax = pytest.importorskip("jax")
    from jax import lax
    y = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    np.testing.assert_array_equal(xe.Transpose(y, [2, 0, 1]), np.asarray(lax.transpose(y, (2, 0, 1))))
    np.testing.assert_array_equal(xe.Rev(y, [0, 2]), np.asarray(lax.rev(y, (0, 2))))
    x = y[0, :, :1]
    np.testing.assert_array_equal(xe.BroadcastInDim(x, [5, 3, 2], [1, 2]),
                                  np.asarray(lax.broadcast_in_dim(x, (5, 3, 2), (1, 2))))
    np.testing.assert_array_equal(xe.Iota(None, "s32[3,5]", 1),
                                  np.asarray(lax.broadcasted_iota(np.int32, (3, 5), 1)))
    del jax
