"""Shapes in XLA's syntax, and broadcasting as MLIR's Broadcastable trait states it."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import xla_explorer as xe
from xla_explorer import dtypes
from xla_explorer.shapes import infer_dim, infer_result_shape, infer_shape, verify_broadcast


def test_shape_strings():
    assert str(xe.Shape("f32", (2, 3))) == "f32[2,3]"
    assert str(xe.Shape("f32", (None, 3))) == "f32[?,3]"
    assert str(xe.Shape("s32", ("<=5", 2))) == "s32[<=5,2]"
    assert str(xe.Shape("pred", ())) == "pred[]"
    assert str(xe.Shape.token()) == "token[]"
    assert str(xe.Shape.parse("(f32[2,3], s32[])")) == "(f32[2,3], s32[])"


def test_parse_layouts_and_comments():
    s = xe.Shape.parse("f32[3,4]{0,1}")
    assert s == xe.Shape("f32", (3, 4)) and s.layout == (0, 1)
    assert s.to_string(layout=True) == "f32[3,4]{0,1}"
    t = xe.Shape.parse("(f32[4]{0}, /*index=1*/s32[2,2]{1,0:T(8,128)}, token[])")
    assert [str(x) for x in t.tuple_shapes] == ["f32[4]", "s32[2,2]", "token[]"]
    assert xe.Shape.parse("((f32[], s8[1]), u64[2])").tuple_shapes[0].is_tuple


@pytest.mark.parametrize("bad", ["f33[2]", "f32[2", "f32[a]", "(f32[2]", "f32[2] junk"])
def test_parse_errors_say_what_was_expected(bad):
    with pytest.raises(xe.ShapeError, match="expected"):
        xe.Shape.parse(bad)


def test_every_primitive_type_has_a_dtype():
    for name in ["pred", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64", "f16", "bf16", "f32",
                 "f64", "c64", "c128", "f8e4m3fn", "f8e5m2"]:
        dt = dtypes.to_numpy(name)
        assert dtypes.from_numpy(dt) == name
        assert str(xe.Shape(name, (1,))) == f"{name}[1]"


def test_negative_dimension_refused():
    with pytest.raises(xe.ShapeError, match="negative"):
        xe.Shape("f32", (2, -1))


# -- the Broadcastable trait's tables -----------------------------------------------------

@pytest.mark.parametrize("d0,d1,want", [
    (None, None, None), (None, 1, None), (1, 1, 1), (None, 4, 4), (1, 4, 4), (4, 4, 4), (1, None, None),
    (4, None, 4), (4, 1, 4)])
def test_infer_dim_table(d0, d1, want):
    assert infer_dim(d0, d1) == want
    assert infer_dim(d1, d0) == want


def test_infer_dim_mismatch():
    with pytest.raises(xe.ShapeError, match="3 and 2"):
        infer_dim(3, 2)


def test_trait_examples():
    assert infer_shape([1, 2], [1, 2]) == (1, 2)
    assert infer_shape([None], [None]) == (None,)
    assert infer_shape([1], [4]) == (4,)
    assert infer_shape([4], [2, 3, 4]) == (2, 3, 4)
    verify_broadcast([[4]], [None])  # static inferred, dynamic result: OK
    verify_broadcast([[2], [2]], [2])


@pytest.mark.parametrize("operands,result,match", [
    ([[3], [2]], [None], "not broadcast-compatible"),
    ([[3], [3]], [1, 3], "rank"),
    ([[None], [None]], [4], "only determine it at run time"),
    ([[2], [2]], [4], "broadcast to 2"),
    ([[1], [1]], [4], "broadcast to 1"),
])
def test_trait_incorrect_uses(operands, result, match):
    with pytest.raises(xe.ShapeError, match=match):
        verify_broadcast(operands, result)


def test_unranked_operands_are_skipped():
    assert infer_result_shape([None, None]) is None
    assert infer_result_shape([None, [2, 3]]) == (2, 3)
    verify_broadcast([None], [7])


dims = st.lists(st.integers(1, 4), min_size=0, max_size=4)


@given(dims, dims)
def test_static_broadcast_agrees_with_numpy(a, b):
    try:
        want = np.broadcast_shapes(tuple(a), tuple(b))
    except ValueError:
        with pytest.raises(xe.ShapeError):
            infer_shape(a, b)
        return
    assert infer_shape(a, b) == want


@given(st.lists(st.sampled_from([None, 1, 3]), max_size=3), st.lists(st.sampled_from([None, 1, 3]), max_size=3))
def test_dynamic_broadcast_is_symmetric_and_sound(a, b):
    r1 = infer_shape(a, b)
    assert r1 == infer_shape(b, a)
    # any run-time sizes that agree with the static ones broadcast to a compatible shape
    for rt in (1, 3):
        ra = [rt if d is None else d for d in a]
        rb = [rt if d is None else d for d in b]
        real = np.broadcast_shapes(tuple(ra), tuple(rb))
        assert all(i is None or i == r for i, r in zip(r1, real))


@given(st.lists(st.one_of(st.integers(0, 9), st.just("?"), st.integers(1, 9).map(lambda n: f"<={n}")), max_size=4),
       st.sampled_from(["f32", "s8", "pred", "bf16", "c64", "u64"]))
def test_shape_text_round_trip(dims, t):
    s = xe.Shape(t, dims)
    assert xe.Shape.parse(str(s)) == s
    assert xe.Shape.parse(s.to_string(layout=True)) == s
