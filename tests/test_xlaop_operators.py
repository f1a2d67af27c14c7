"""XlaOp's Python operators record the spec ops NumPy's operators mean (checked by running
them against NumPy), and Python control flow on a traced value explains itself."""
import operator

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import xla_explorer as xe

X = np.arange(12, dtype=np.float32).reshape(3, 4) - 3
W = np.linspace(-1, 1, 8, dtype=np.float32).reshape(4, 2)


def _run(fn, *values):
    b = xe.XlaBuilder("sugar")
    params = [xe.Parameter(b, k, xe.Shape.of(v), f"p{k}") for k, v in enumerate(values)]
    return b.build(fn(*params)).run(*values)


BINARY = [operator.add, operator.sub, operator.mul, operator.truediv, operator.pow, operator.lt, operator.le,
          operator.gt, operator.ge, operator.eq, operator.ne]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy's own 0/0 in the expected values
@pytest.mark.parametrize("fn", BINARY, ids=[f.__name__ for f in BINARY])
def test_binary_operators_and_their_reflected_forms(fn):
    y = np.float32(2)
    np.testing.assert_allclose(_run(lambda a: fn(a, 2.0), X), fn(X, y), rtol=1e-6)
    np.testing.assert_allclose(_run(lambda a: fn(2.0, a), X), fn(y, X), rtol=1e-6)
    np.testing.assert_allclose(_run(lambda a: fn(a, a), X), fn(X, X), rtol=1e-6)
    np.testing.assert_allclose(_run(lambda a: fn(y, a), X), fn(y, X), rtol=1e-6)  # NumPy scalar on the left


def test_matmul_unary_bitwise_and_transpose():
    np.testing.assert_allclose(_run(lambda a, w: a @ w, X, W), X @ W, rtol=1e-6)
    np.testing.assert_allclose(_run(lambda a: a @ W, X), X @ W, rtol=1e-6)
    np.testing.assert_allclose(_run(lambda w: X @ w, W), X @ W, rtol=1e-6)
    a3 = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    b3 = np.arange(40, dtype=np.float32).reshape(2, 4, 5)
    np.testing.assert_allclose(_run(lambda a, b: a @ b, a3, b3), a3 @ b3)
    for got, want in zip(_run(lambda a: (-a, +a, abs(a), a.T, a % 3), X), (-X, X, abs(X), X.T, np.fmod(X, 3))):
        np.testing.assert_array_equal(got, want)
    i = np.array([-8, -1, 0, 5, 127], np.int8)
    out = _run(lambda v: (v & 3, v | 3, v ^ 3, v << 1, v >> 1, ~v, 3 & v), i)
    for got, want in zip(out, (i & 3, i | 3, i ^ 3, i << 1, i >> 1, ~i, 3 & i)):
        np.testing.assert_array_equal(got, want)
    u = np.array([0x80, 7], np.uint8)
    np.testing.assert_array_equal(_run(lambda v: v >> 1, u), u >> 1)  # logical for unsigned


INDICES = [1, -1, (1, 2), (slice(None), slice(1, 3)), (slice(None, None, -1), slice(None, None, 2)),
           (Ellipsis, None), (None, slice(1, 2), slice(-2, None, -2)), slice(5, 1), (2, slice(1, None)),
           (Ellipsis, -1), (slice(None, None, -2),)]


@pytest.mark.parametrize("index", INDICES, ids=[repr(i) for i in INDICES])
def test_basic_indexing_agrees_with_numpy(index):
    np.testing.assert_array_equal(_run(lambda a: a[index], X), X[index])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.integers(-4, 3), st.builds(slice, st.none() | st.integers(-5, 5),
                                                        st.none() | st.integers(-5, 5),
                                                        st.none() | st.sampled_from([1, 2, 3, -1, -2]))),
                min_size=1, max_size=2))
def test_random_slices_agree_with_numpy(index):
    index = tuple(index)
    try:
        want = X[index]
    except IndexError:
        with pytest.raises(xe.ShapeError, match="out of bounds"):
            _run(lambda a: a[index], X)
        return
    np.testing.assert_array_equal(_run(lambda a: a[index], X), want)


def test_a_traced_index_is_a_dynamic_slice_clamped_as_xla_does():
    i = np.int32(2)
    np.testing.assert_array_equal(_run(lambda a, k: a[k], X, i), X[2])
    np.testing.assert_array_equal(_run(lambda a, k: a[k, 1:], X, i), X[2, 1:])
    np.testing.assert_array_equal(_run(lambda a, k: a[k], X, np.int32(9)), X[2])  # clamped into bounds
    b = xe.XlaBuilder("k")
    x = xe.Parameter(b, 0, xe.Shape("f32", (3, 4)))
    assert "DynamicSlice" not in repr(x[1]) and x[xe.Parameter(b, 1, xe.Shape("s32", ()))].inst.opcode == "reshape"


def test_python_control_flow_on_a_traced_value_explains_itself():
    b = xe.XlaBuilder("c")
    x = xe.Parameter(b, 0, xe.Shape("f32", (3,)), "x")
    for attempt in (lambda: bool(x > 0), lambda: x and x, lambda: int(x), lambda: float(x), lambda: range(x),
                    lambda: np.asarray(x)):
        with pytest.raises(TypeError) as info:
            attempt()
        text = str(info.value)
        assert "no value yet" in text
    with pytest.raises(TypeError, match="Conditional.*While"):
        if x > 0:
            pass
    # a Python loop over a static dimension unrolls, and equality by identity still works
    assert len(x) == 3 and [r.shape.rank for r in x] == [0, 0, 0]
    assert x in [x] and (x == None) is False  # noqa: E711 - comparing with None is identity
    assert {x: 1}[x] == 1
    with pytest.raises(TypeError, match="Gather"):
        x[[0, 1]]
    with pytest.raises(xe.ShapeError, match="out of bounds"):
        x[3]
