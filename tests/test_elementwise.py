"""Element-wise ops: the spec's examples, XLA:CPU's edge cases, shape and dtype rules, and
builder-level broadcasting (builder vs eager vs NumPy, dynamic dimensions included).

The expected values of the edge cases were produced by XLA:CPU (jaxlib 0.10.2) compiling
the same one-instruction HLO modules; they are written out here so that these tests need
nothing but NumPy.
"""
import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import xla_explorer as xe
from xla_explorer.ops import registry
from xla_explorer.shapes import infer_shape

inf, nan = np.inf, np.nan
bf16 = ml_dtypes.bfloat16


def same(got, want):
    """Exact equality: dtype, shape, values (NaN == NaN; the sign of zero counts)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    if xe.dtypes.from_numpy(got.dtype) in xe.dtypes.FLOATING | xe.dtypes.COMPLEX:
        g, w = got.astype(np.complex128), want.astype(np.complex128)
        for a, b in ((g.real, w.real), (g.imag, w.imag)):
            assert np.array_equal(np.isnan(a), np.isnan(b)), (got, want)
            ok = np.isnan(a) | ((a == b) & (np.signbit(a) == np.signbit(b)))
            assert ok.all(), (got, want)
    else:
        assert np.array_equal(got, want), (got, want)


def shape_error(fn, *words):
    with pytest.raises(xe.ShapeError) as e:
        fn()
    for w in words:
        assert w in str(e.value), str(e.value)
    return str(e.value)


# -- the spec's worked examples ---------------------------------------------------------------

def test_spec_clamp_example():
    same(xe.Clamp(np.int32(0), np.int32([-1, 5, 9]), np.int32(6)), np.int32([0, 5, 6]))


def test_spec_select_examples():
    pred = np.array([True, False, False, True])
    v1, v2 = np.int32([1, 2, 3, 4]), np.int32([100, 200, 300, 400])
    same(xe.Select(pred, v1, v2), np.int32([1, 200, 300, 4]))
    same(xe.Select(np.bool_(True), v1, v2), np.int32([1, 2, 3, 4]))


def test_spec_select_tuples_with_scalar_pred():
    b = xe.XlaBuilder("sel")
    t = xe.Tuple(xe.Parameter(b, 0, xe.Shape("f32", (2,)), "a"), xe.Parameter(b, 1, xe.Shape("s32", ()), "i"))
    f = xe.Tuple(xe.Parameter(b, 2, xe.Shape("f32", (2,)), "c"), xe.Parameter(b, 3, xe.Shape("s32", ()), "j"))
    p = xe.Parameter(b, 4, xe.Shape("pred", ()), "p")
    comp = b.build(xe.Select(p, t, f))
    a, c = np.float32([1, 2]), np.float32([3, 4])
    out = comp.run(a, np.int32(5), c, np.int32(6), np.bool_(False))
    same(out[0], c)
    same(out[1], np.int32(6))
    shape_error(lambda: xe.Select(xe.Parameter(b, 5, xe.Shape("pred", (2,))), t, f), "Select", "scalar pred")


def test_spec_convert_example():
    same(xe.ConvertElementType(np.int32([0, 1, 2]), "f32"), np.float32([0, 1, 2]))


def test_spec_bitcast_width_examples():
    # spec/001: f32[10] -> f16[10,2]; f32[] -> f16[2]; f16[10,2] -> f32[10]
    rule = registry.get("bitcast-convert").shape_rule
    assert str(rule(xe.Shape("f32", (10,)), new_element_type="f16")) == "f16[10,2]"
    assert str(rule(xe.Shape("f32", ()), new_element_type="f16")) == "f16[2]"
    assert str(rule(xe.Shape("f16", (10, 2)), new_element_type="f32")) == "f32[10]"
    x = np.float32([1.0, -2.5, 3e-40])
    same(xe.BitcastConvertType(xe.BitcastConvertType(x, "u8"), "f32"), x)       # round trip
    same(xe.BitcastConvertType(np.float32(1.0), "u8"), np.uint8([0, 0, 128, 63]))  # little-endian
    same(xe.BitcastConvertType(np.float32([1.0]), "s32"), np.int32([1065353216]))


def test_spec_sign_table():
    # spec/001: sgn(x) is -1, -0, NaN, +0 or 1
    same(xe.Sign(np.float32([-3, -0.0, 0.0, 2, nan, -inf])), np.float32([-1, -0.0, 0.0, 1, nan, -1]))
    same(xe.Sign(np.int32([-5, 0, 7, -2**31])), np.int32([-1, 0, 1, -1]))


def test_spec_unary_definitions():
    x = np.float32([0.25, 1.0, 2.0])
    np.testing.assert_allclose(xe.Exp(x), np.exp(x), rtol=1e-6)
    np.testing.assert_allclose(xe.Expm1(np.float32([1e-10])), [1e-10], rtol=1e-6)
    np.testing.assert_allclose(xe.Log1p(np.float32([1e-10])), [1e-10], rtol=1e-6)
    np.testing.assert_allclose(xe.Rsqrt(x), 1 / np.sqrt(x), rtol=1e-6)
    np.testing.assert_allclose(xe.Cbrt(np.float32([-8, 27])), [-2, 3], rtol=1e-6)
    np.testing.assert_allclose(xe.Erf(x), [math.erf(v) for v in x], rtol=1e-6)
    np.testing.assert_allclose(xe.Logistic(np.float32([0, 100, -100])), [0.5, 1, 0], atol=1e-30)
    np.testing.assert_allclose(xe.Tan(x), np.tan(x.astype(np.float64)), rtol=1e-6)
    same(xe.IsFinite(np.float32([1, inf, -inf, nan])), np.array([True, False, False, False]))
    same(xe.Imag(np.float32([3, -1])), np.float32([0, 0]))                 # imag of a float: 0
    same(xe.Real(np.float32([3, -1])), np.float32([3, -1]))                # real of a float: itself
    same(xe.Real(np.complex64([1 + 2j])), np.float32([1]))
    same(xe.Imag(np.complex128([1 + 2j])), np.float64([2]))
    same(xe.Not(np.array([True, False])), np.array([False, True]))
    same(xe.Not(np.uint8([0x0F])), np.uint8([0xF0]))
    assert xe.LogicalNot is xe.Not and xe.LogicalAnd is xe.And and xe.LogicalOr is xe.Or


def test_spec_different_rank_broadcast_dimensions():
    # the spec: a matrix and a vector, the vector's dimension 0 going to the matrix's dimension 0 or 1
    m = np.float32([[1, 2, 3], [4, 5, 6]])
    same(xe.Add(m, np.float32([10, 20]), broadcast_dimensions=[0]), m + np.float32([[10], [20]]))
    same(xe.Add(np.float32([10, 20, 30]), m, broadcast_dimensions=[1]), m + np.float32([10, 20, 30]))


# -- XLA:CPU's integer edge cases ----------------------------------------------------------------

def test_integer_division_and_remainder_edges():
    x, y = np.int8([-128, -128, 7, -7, 7, 0]), np.int8([-1, 0, -2, 2, 0, 0])
    same(xe.Div(x, y), np.int8([-128, -1, -3, -3, -1, -1]))
    same(xe.Rem(x, y), np.int8([0, -128, 1, -1, 7, 0]))
    same(xe.Div(np.uint8([7, 255, 0]), np.uint8([2, 0, 0])), np.uint8([3, 255, 255]))  # x/0: all bits set
    same(xe.Rem(np.uint8([7, 255, 0]), np.uint8([2, 0, 0])), np.uint8([1, 255, 0]))    # x%0 = x
    big = np.iinfo(np.int64).min
    same(xe.Div(np.int64([big, 9]), np.int64([-1, 0])), np.int64([big, -1]))
    same(xe.Rem(np.int64([big, 9]), np.int64([-1, 0])), np.int64([0, 9]))


def test_integer_wraparound():
    same(xe.Abs(np.int32([-2**31, -3])), np.int32([-2**31, 3]))
    same(xe.Neg(np.int32([-2**31])), np.int32([-2**31]))
    same(xe.Neg(np.uint32([1])), np.uint32([2**32 - 1]))
    same(xe.Add(np.int32([2**31 - 1]), np.int32([1])), np.int32([-2**31]))
    same(xe.Mul(np.int8([64, -128]), np.int8([2, -1])), np.int8([-128, -128]))
    same(xe.Sub(np.uint8([0]), np.uint8([1])), np.uint8([255]))


def test_shifts():
    same(xe.ShiftLeft(np.int32([1, 1, 1, 1, -1]), np.int32([0, 31, 32, 33, -1])), np.int32([1, -2**31, 0, 0, 0]))
    same(xe.ShiftRightLogical(np.int32([-8, -8, -8, -8]), np.int32([1, 28, 32, -1])), np.int32([2147483644, 15, 0, 0]))
    same(xe.ShiftRightArithmetic(np.int32([-8, -8, 8, -8]), np.int32([1, 32, 33, -1])), np.int32([-4, -1, 0, -1]))
    # on unsigned types the arithmetic shift copies the top bit too
    same(xe.ShiftRightArithmetic(np.uint8([0x80, 0x81, 0x7F, 0xFF]), np.uint8([1, 7, 8, 200])),
         np.uint8([192, 255, 0, 255]))
    same(xe.ShiftLeft(np.uint64([1]), np.uint64([63])), np.uint64([2**63]))


def test_integer_power():
    base = np.int32([2, 2, -1, -1, 1, 0, 0, 2, 2, 3, -2])
    exponent = np.int32([10, -1, -3, -4, -5, 0, -1, 64, 65, 64, 31])
    # only the exponent's low 6 bits count (2^64 = 1, 2^65 = 2); negative: 0 unless the base is +-1
    same(xe.Pow(base, exponent), np.int32([1024, 0, -1, 1, 1, 1, 0, 1, 2, 1, -2**31]))
    # unsigned exponents with the top bit set count as negative; 255 is -1
    same(xe.Pow(np.uint8([2, 1, 255, 255, 3, 2]), np.uint8([128, 200, 129, 130, 127, 7])),
         np.uint8([0, 1, 255, 1, 171, 128]))


def test_clz_popcnt():
    same(xe.Clz(np.int32([0, 1, -1, 2**30])), np.int32([32, 31, 0, 1]))
    same(xe.Clz(np.uint64([0, 1, 2**63])), np.uint64([64, 63, 0]))
    same(xe.Clz(np.uint8([1, 0, 255])), np.uint8([7, 8, 0]))
    same(xe.PopulationCount(np.int16([0, -1, 255, -32768])), np.int16([0, 16, 8, 1]))


def test_bitwise_and_pred_arithmetic():
    same(xe.And(np.uint8([12]), np.uint8([10])), np.uint8([8]))
    same(xe.Or(np.uint8([12]), np.uint8([10])), np.uint8([14]))
    same(xe.Xor(np.uint8([12]), np.uint8([10])), np.uint8([6]))
    t, f = np.array([True, True, False]), np.array([True, False, False])
    same(xe.And(t, f), t & f)
    same(xe.Add(t, f), t | f)          # pred add is or
    same(xe.Mul(t, f), t & f)          # pred multiply is and
    same(xe.Max(t, f), t | f)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["s8", "u8", "s16"]), st.data())
def test_integer_ops_match_exact_arithmetic(t, data):
    """Wrapped results equal exact integer arithmetic modulo 2^bits."""
    info = np.iinfo(xe.dtypes.to_numpy(t))
    ints = st.integers(int(info.min), int(info.max))
    xs = data.draw(st.lists(ints, min_size=1, max_size=8))
    ys = data.draw(st.lists(ints, min_size=len(xs), max_size=len(xs)))
    x, y = np.array(xs, info.dtype), np.array(ys, info.dtype)

    def wrap(v):
        v %= 1 << info.bits
        return v - (1 << info.bits) if info.min < 0 and v > info.max else v

    def trunc_div(a, b):
        if b == 0:
            return -1
        q = abs(a) // abs(b)
        return q if (a < 0) == (b < 0) else -q

    same(xe.Add(x, y), np.array([wrap(a + b) for a, b in zip(xs, ys)], info.dtype))
    same(xe.Mul(x, y), np.array([wrap(a * b) for a, b in zip(xs, ys)], info.dtype))
    same(xe.Div(x, y), np.array([wrap(trunc_div(a, b)) for a, b in zip(xs, ys)], info.dtype))
    same(xe.Rem(x, y), np.array([wrap(a - b * trunc_div(a, b)) if b else a for a, b in zip(xs, ys)], info.dtype))


# -- floats --------------------------------------------------------------------------------------

def test_nan_compare_is_unordered():
    x, y = np.float32([1, nan, nan, -0.0]), np.float32([nan, 1, nan, 0.0])
    same(xe.Eq(x, y), np.array([False, False, False, True]))
    same(xe.Ne(x, y), np.array([True, True, True, False]))
    for op in (xe.Lt, xe.Le, xe.Gt, xe.Ge):
        same(op(x, y)[:3], np.array([False, False, False]))
    same(xe.Le(x, y)[3:], np.array([True]))


def test_total_order():
    neg_nan = np.uint32([0xFFC00000]).view(np.float32)[0]
    ordered = np.array([neg_nan, -inf, -1.0, -1e-45, -0.0, 0.0, 1e-45, 1.0, inf, nan], np.float32)
    x, y = np.repeat(ordered, len(ordered)), np.tile(ordered, len(ordered))
    i, j = np.repeat(np.arange(len(ordered)), len(ordered)), np.tile(np.arange(len(ordered)), len(ordered))
    same(xe.LtTotalOrder(x, y), i < j)
    same(xe.LeTotalOrder(x, y), i <= j)
    same(xe.EqTotalOrder(x, y), i == j)
    same(xe.NeTotalOrder(x, y), i != j)
    same(xe.GtTotalOrder(x, y), i > j)
    same(xe.GeTotalOrder(x, y), i >= j)
    same(xe.Compare(x, y, "LT", "TOTALORDER"), i < j)
    # integers: the total order is the usual one, and XlaBuilder records no TOTALORDER type
    b = xe.XlaBuilder("to")
    c = xe.LtTotalOrder(xe.Parameter(b, 0, xe.Shape("s32", (2,))), xe.Parameter(b, 1, xe.Shape("s32", (2,))))
    assert c.inst.attrs["compare_type"] is None


def test_unsigned_vs_signed_compare():
    bits = np.uint32([0x80000000, 1])
    same(xe.Lt(bits, np.uint32([1, 2])), np.array([False, True]))
    same(xe.Lt(bits.view(np.int32), np.int32([1, 2])), np.array([True, True]))


def test_max_min_propagate_nan_and_order_zeros():
    x, y = np.float32([1, nan, -0.0, 0.0, -inf]), np.float32([2, 0, 0.0, -0.0, nan])
    same(xe.Max(x, y), np.float32([2, nan, 0.0, 0.0, nan]))
    same(xe.Min(x, y), np.float32([1, nan, -0.0, -0.0, nan]))


def test_float_binary_specials():
    same(xe.Pow(np.float32([-8, -8, 0, 0, nan, 1, -inf, -inf, 2]), np.float32([1 / 3, 3, -1, 0, 0, nan, 3, 0.5, -inf])),
         np.float32([nan, -512, inf, 1, 1, 1, -inf, inf, 0]))
    same(xe.Rem(np.float32([5.5, -5.5, inf, 5, -0.0]), np.float32([2, 2, 2, inf, 1])), np.float32([1.5, -1.5, nan, 5, -0.0]))
    same(xe.Atan2(np.float32([0, -0.0, 0, -0.0, 1, inf]), np.float32([0, 0, -0.0, -0.0, 0, inf])),
         np.float32([0, -0.0, np.pi, -np.pi, np.pi / 2, np.pi / 4]))
    same(xe.Div(np.float16([1, 1, -1, 0]), np.float16([3, 0, 0, 0])), np.float16([0.333251953125, inf, -inf, nan]))


def test_bf16_arithmetic_rounds_once():
    x = np.array([1, 1, 256, 3e38], bf16)
    y = np.array([2**-8, 3 * 2**-8, 1, 3e38], bf16)
    same(xe.Add(x, y), np.array([1.0, 1.015625, 256.0, inf], bf16))   # ties to even; overflow to Inf


def test_rounding():
    x = np.float32([0.5, 1.5, 2.5, -0.5, -2.5, 0.49999997, -0.3])
    same(xe.Round(x), np.float32([1, 2, 3, -1, -3, 0, -0.0]))               # half away from zero
    same(xe.RoundNearestEven(x), np.float32([0, 2, 2, -0.0, -2, 0, -0.0]))  # half to even
    same(xe.Floor(np.float32([-1.5, -0.0, inf])), np.float32([-2, -0.0, inf]))
    same(xe.Ceil(np.float32([-1.5, 0.2, nan])), np.float32([-1, 1, nan]))
    same(xe.Round(np.array([2.5, -0.5], bf16)), np.array([3, -1], bf16))


# -- conversions ---------------------------------------------------------------------------------

def test_convert_float_to_int_truncates_and_saturates():
    x = np.float32([3e9, -3e9, nan, inf, -inf, -0.9, 2.9, -2.9])
    same(xe.ConvertElementType(x, "s32"), np.int32([2**31 - 1, -2**31, 0, 2**31 - 1, -2**31, 0, 2, -2]))
    same(xe.ConvertElementType(np.float32([300, -5, nan, 255.9, -0.9]), np.uint8), np.uint8([255, 0, 0, 255, 0]))
    same(xe.ConvertElementType(np.float64([1.8e19, 2e19, -5]), "u64"), np.uint64([18000000000000000000, 2**64 - 1, 0]))
    same(xe.ConvertElementType(np.float64([9.3e18, -9.3e18]), "s64"), np.int64([2**63 - 1, -2**63]))


def test_convert_to_narrower_floats():
    same(xe.ConvertElementType(np.float32([1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-8 + 2**-20, 3.4e38, -3.4e38, 2**-130]), "bf16"),
         np.array([1.0, 1.015625, 1.0078125, inf, -inf, 7.346839692639297e-40], bf16))
    same(xe.ConvertElementType(np.float32([65504, 65519, 65520, 2**-24, 2**-25, 2**-25 * 1.5]), "f16"),
         np.float16([65504, 65504, inf, 2**-24, 0, 2**-24]))
    same(xe.ConvertElementType(np.float32([448, 464, 465, 1e6, -1e6, inf]), "f8e4m3fn"),
         np.array([448, 448, nan, nan, nan, nan], ml_dtypes.float8_e4m3fn))   # no Inf: overflow is NaN
    same(xe.ConvertElementType(np.float32([57344, 61439, 61440, inf]), "f8e5m2"),
         np.array([57344, 57344, inf, inf], ml_dtypes.float8_e5m2))


def test_convert_integers_and_pred():
    same(xe.ConvertElementType(np.int32([16777217, 16777219, 2**31 - 1]), "f32"), np.float32([16777216, 16777220, 2**31]))
    same(xe.ConvertElementType(np.int32([127, 128, 255, -129, 256]), "s8"), np.int8([127, -128, -1, 127, 0]))
    same(xe.ConvertElementType(np.uint32([255, 2**32 - 1, 128]), "s8"), np.int8([-1, -1, -128]))
    same(xe.ConvertElementType(np.float32([0, -0.0, nan, 2, -inf]), "pred"), np.array([False, False, True, True, True]))
    same(xe.ConvertElementType(np.array([True, False]), "f32"), np.float32([1, 0]))
    same(xe.ConvertElementType(np.complex64([1.5 + 2j, -3e9]), "s32"), np.int32([1, -2**31]))   # the real part
    same(xe.ConvertElementType(np.float32([1.5, nan]), "c64"), np.complex64([1.5, complex(nan, 0)]))


def test_reduce_precision():
    x = np.float32([2**-14, 2**-15, 2**-14 * (1 - 2**-12), 65504, 65519, 65520, 1 + 2**-11, 1 + 3 * 2**-11, nan, -inf])
    # f16-like: ties to even, overflow to Inf, denormals of the new format flushed to zero
    same(xe.ReducePrecision(x, mantissa_bits=10, exponent_bits=5),
         np.float32([2**-14, 0, 2**-14, 65504, 65504, inf, 1, 1 + 2**-9, nan, -inf]))
    same(xe.ReducePrecision(np.float32([1e-45, 1 + 2**-8, 1 + 3 * 2**-8, 3.4e38, 2**-130]), 7, 8),
         np.float32([0, 1, 1.015625, inf, 2**-130]))   # bf16-like: same exponent range, denormals rounded
    same(xe.ReducePrecision(np.float16([2**-24, 2**-15]), mantissa_bits=10, exponent_bits=5),
         np.float16([2**-24, 2**-15]))                 # f16 to its own format: nothing changes
    same(xe.ReducePrecision(np.float16([2**-24, 2**-6, 2**-7, 255, 256, 1.0625, 1.1875]), mantissa_bits=3, exponent_bits=4),
         np.float16([0, 2**-6, 0, inf, inf, 1, 1.25]))
    payload = np.uint32([0x7F800001, 0xFFC00001]).view(np.float32)
    same(xe.ReducePrecision(payload, mantissa_bits=0, exponent_bits=5).view(np.uint32), payload.view(np.uint32))


# -- complex -------------------------------------------------------------------------------------

def test_complex_ops():
    same(xe.Complex(np.float32([1, 0]), np.float32([2, inf])), np.complex64([1 + 2j, complex(0, inf)]))
    same(xe.Complex(np.float64([1]), np.float64([2])), np.complex128([1 + 2j]))
    same(xe.Abs(np.complex64([3 + 4j, complex(nan, inf), complex(inf, 0)])), np.float32([5, nan, inf]))
    np.testing.assert_allclose(xe.Sign(np.complex64([3 + 4j, 0])), np.complex64([0.6 + 0.8j, 0]), rtol=1e-6)
    s = xe.Sign(np.complex64([complex(inf, 0)]))
    assert np.isnan(s.real[0]) and s.imag[0] == 0                    # XLA: part by part, inf/inf
    q = xe.Div(np.complex64([1 + 1j, 1 + 1j, -1 + 2j, complex(inf, inf), 3 + 4j]),
               np.complex64([0, complex(inf, inf), complex(0, -0.0), 1 + 1j, 1 - 2j]))
    want = [complex(inf, inf), 0, complex(-inf, inf), complex(inf, nan), -1 + 2j]
    for g, w in zip(q, want):
        for a, b in ((g.real, w.real), (g.imag, w.imag)):
            assert np.isnan(a) == np.isnan(b) and np.isinf(a) == np.isinf(b), (g, w)
            assert np.isnan(a) or a == b or abs(a - b) <= 1e-6 * abs(b), (g, w)
    p = xe.Pow(np.complex64([0, 0, 0, 2j]), np.complex64([0, 1, -1, 2]))
    same(p[:2], np.complex64([1, 0]))
    assert np.isnan(p[2].real)
    np.testing.assert_allclose(p[3], -4, atol=1e-5)
    same(xe.Eq(np.complex64([1 + 2j, nan]), np.complex64([1 + 2j, nan])), np.array([True, False]))
    same(xe.Lt(np.complex64([1 + 2j, 1 + 5j, 2]), np.complex64([1 + 3j, 2, 1 + 9j])), np.array([True, True, False]))


# -- categories and the registry -----------------------------------------------------------------

ELEMENTWISE = """abs negate sign not exponential exponential-minus-one log log-plus-one sqrt rsqrt cbrt sine cosine
tan tanh floor ceil round-nearest-afz round-nearest-even logistic erf is-finite real imag count-leading-zeros
popcnt add subtract multiply divide remainder maximum minimum power atan2 complex and or xor shift-left
shift-right-arithmetic shift-right-logical compare select clamp convert reduce-precision""".split()


def test_registry_categories():
    ops = registry.all_ops()
    for opcode in ELEMENTWISE:
        assert opcode in ops and ops[opcode].family == "elementwise", opcode
        assert opcode in registry.CATEGORIES["elementwise"], opcode
    assert "bitcast-convert" in ops and "bitcast-convert" not in registry.CATEGORIES["elementwise"]
    assert {"add", "atan2", "shift-left"} <= registry.CATEGORIES["binary"]
    assert {"abs", "popcnt", "is-finite"} <= registry.CATEGORIES["unary"]
    assert "compare" in registry.CATEGORIES["comparison"]


def test_references_run_on_arrays_for_scalar_shapes():
    """A vectorised region runs scalar-shaped instructions on whole arrays."""
    scalar = xe.Shape("s32", ())
    got = registry.get("add").reference(np.int32([1, 2]), np.int32([3, 4]), shape=scalar)
    same(np.asarray(got), np.int32([4, 6]))
    got = registry.get("select").reference(np.array([True, False]), np.float32([1, 2]), np.float32([3, 4]),
                                           shape=xe.Shape("f32", ()))
    same(np.asarray(got), np.float32([1, 4]))


# -- shape and dtype rules -----------------------------------------------------------------------

def test_dtype_rules():
    f, i, u, p = np.float32([1]), np.int32([1]), np.uint32([1]), np.array([True])
    shape_error(lambda: xe.Add(f, i), "Add", "f32[1]", "s32[1]", "same element type")
    shape_error(lambda: xe.ShiftLeft(f, f), "ShiftLeft", "f32", "integers")
    shape_error(lambda: xe.ShiftLeft(p, p), "ShiftLeft", "pred")
    shape_error(lambda: xe.And(f, f), "And", "f32")
    shape_error(lambda: xe.Not(f), "Not", "f32")
    shape_error(lambda: xe.Exp(i), "Exp", "s32", "floats")
    shape_error(lambda: xe.Floor(i), "Floor", "s32")
    shape_error(lambda: xe.IsFinite(i), "IsFinite", "s32")
    shape_error(lambda: xe.Abs(u), "Abs", "u32")
    shape_error(lambda: xe.Sign(u), "Sign", "u32")
    shape_error(lambda: xe.Clz(f), "Clz", "f32")
    shape_error(lambda: xe.PopulationCount(p), "PopulationCount", "pred")
    shape_error(lambda: xe.Cbrt(np.complex64([1])), "Cbrt", "c64")
    shape_error(lambda: xe.Erf(np.complex64([1])), "Erf", "c64")
    shape_error(lambda: xe.Rem(np.complex64([1]), np.complex64([1])), "Rem", "c64")
    shape_error(lambda: xe.Atan2(i, i), "Atan2", "s32")
    shape_error(lambda: xe.Complex(np.float16([1]), np.float16([1])), "Complex", "f16", "f32 or f64")
    shape_error(lambda: xe.Real(i), "Real", "s32")
    shape_error(lambda: xe.Sub(p, p), "Sub", "pred")
    shape_error(lambda: xe.Neg(p), "Neg", "pred")


def test_compare_rules():
    i = np.int32([1])
    shape_error(lambda: xe.Compare(i, i, "XX"), "Compare", "'XX'", "EQ, NE")
    shape_error(lambda: xe.Compare(i, i, "LT", "FLOAT"), "Compare", "FLOAT", "s32", "SIGNED")
    shape_error(lambda: xe.Compare(np.uint8([1]), np.uint8([1]), "LT", "SIGNED"), "UNSIGNED")
    shape_error(lambda: xe.Compare(np.float32([1]), np.float32([1]), "LT", "SIGNED"), "FLOAT or TOTALORDER")
    shape_error(lambda: xe.Compare(i, i, "LT", "BOGUS"), "BOGUS")
    same(xe.Compare(i, i, "le"), np.array([True]))                      # directions in any case


def test_hlo_level_binary_shapes_must_match():
    rule = registry.get("add").shape_rule
    shape_error(lambda: rule(xe.Shape("f32", (1,)), xe.Shape("f32", (3,))), "Add", "f32[1]", "f32[3]", "same shape")
    shape_error(lambda: rule(xe.Shape("f32", ()), xe.Shape("f32", (3,))), "same shape")
    assert str(rule(xe.Shape("f32", (None, 3)), xe.Shape("f32", (2, None)))) == "f32[2,3]"
    assert str(rule(xe.Shape("f32", (None,)), xe.Shape("f32", (1,)))) == "f32[?]"
    assert str(rule(xe.Shape("f32", ("<=4",)), xe.Shape("f32", (None,)))) == "f32[<=4]"
    shape_error(lambda: rule(xe.Shape.tuple([xe.Shape("f32", ())]), xe.Shape("f32", ())), "Add", "must be an array")


def test_builder_broadcast_errors():
    a23 = np.ones((2, 3), np.float32)
    shape_error(lambda: xe.Add(a23, np.ones((3, 2), np.float32)), "Add", "sizes 2 and 3", "f32[2,3]", "f32[3,2]")
    shape_error(lambda: xe.Add(a23, np.ones(2, np.float32), broadcast_dimensions=[1]),
                "Add", "broadcast_dimensions=[1]", "size 2", "size 3")
    shape_error(lambda: xe.Add(a23, np.ones(2, np.float32), broadcast_dimensions=[0, 1]), "has 2 entries", "rank 1")
    shape_error(lambda: xe.Add(a23, np.ones(2, np.float32), broadcast_dimensions=[2]), "out of range")
    shape_error(lambda: xe.Add(np.ones((2, 3, 4), np.float32), a23, broadcast_dimensions=[1, 0]), "strictly increasing")
    shape_error(lambda: xe.Add(a23, a23, broadcast_dimensions=[1, 0]), "identity")


def test_select_clamp_rules():
    f3, f2 = np.ones(3, np.float32), np.ones(2, np.float32)
    shape_error(lambda: xe.Select(np.array([True, False]), f3, f3), "Select", "pred[2]", "f32[3]")
    shape_error(lambda: xe.Select(np.ones(3, np.int32), f3, f3), "Select", "s32")
    shape_error(lambda: xe.Select(np.array([True] * 3), f3, np.ones(3, np.int32)), "Select", "same element type")
    shape_error(lambda: xe.Clamp(f2, f3, np.float32(1)), "Clamp", "min f32[2]", "f32[3]")
    shape_error(lambda: xe.Clamp(np.int32(0), f3, np.float32(1)), "Clamp", "s32")
    same(xe.Clamp(np.float32([-1, 0, 0]), np.float32([nan, -5, 5]), np.float32([1, 1, 1])), np.float32([nan, 0, 1]))
    same(xe.Select(np.array([True, False]), np.float32(1), np.float32([5, 6])), np.float32([1, 6]))


def test_conversion_rules():
    f = np.float32([1])
    shape_error(lambda: xe.ConvertElementType(f, "f99"), "ConvertElementType", "'f99'")
    shape_error(lambda: xe.ConvertElementType(f, object), "ConvertElementType")
    shape_error(lambda: xe.BitcastConvertType(np.uint8([1, 2, 3]), "f32"), "BitcastConvertType", "size 4", "u8[3]")
    shape_error(lambda: xe.BitcastConvertType(np.complex64([1]), "f64"), "complex and real")
    shape_error(lambda: xe.BitcastConvertType(np.complex64([1]), "c128"), "size 2", "c64[1]")
    shape_error(lambda: xe.BitcastConvertType(np.array([True, False]), "s32"), "pred", "size 4")  # a pred is a byte
    shape_error(lambda: xe.ReducePrecision(f, mantissa_bits=-1, exponent_bits=5), "ReducePrecision", "mantissa_bits=-1")
    shape_error(lambda: xe.ReducePrecision(f, mantissa_bits=3, exponent_bits=0), "exponent_bits=0", ">= 1")
    shape_error(lambda: xe.ReducePrecision(np.int32([1]), mantissa_bits=3, exponent_bits=4), "ReducePrecision", "s32")
    shape_error(lambda: xe.ReducePrecision(f, mantissa_bits=2.5, exponent_bits=4), "integer")


# -- builder mode: explicit broadcasts, HLO text, weak-typed Python scalars ------------------------

def test_builder_records_broadcasts_and_round_trips():
    b = xe.XlaBuilder("bc")
    x = xe.Parameter(b, 0, xe.Shape("f32", (2, 3)), "x")
    v = xe.Parameter(b, 1, xe.Shape("f32", (2,)), "v")
    y = xe.Mul(x, v, broadcast_dimensions=[0])
    c = xe.GtTotalOrder(y, 0.5)                      # a Python float takes f32; broadcast from a scalar
    s = xe.Select(c, y, 0.0)
    r = xe.ReducePrecision(xe.Clamp(-1.0, s, 1.0), mantissa_bits=7, exponent_bits=8)
    out = xe.Tuple(xe.ConvertElementType(r, "bf16"), xe.BitcastConvertType(r, "u8"))
    comp = b.build(out)
    text = comp.as_hlo_text()
    assert "broadcast(v), dimensions={0}" in text
    assert "direction=GT, type=TOTALORDER" in text
    assert "reduce-precision(" in text and "exponent_bits=8, mantissa_bits=7" in text
    assert "bf16[2,3]{1,0} convert(" in text and "u8[2,3,4]{2,1,0} bitcast-convert(" in text
    again = xe.parse_hlo(text)
    assert again.as_hlo_text() == text
    args = (np.float32([[0.1, 0.6, 2.0], [-3.0, 0.2, 0.9]]), np.float32([1.0, 2.0]))
    want = comp.run(*args)
    got = again.run(*args)
    same(got[0], want[0])
    same(got[1], want[1])
    yy = args[0] * args[1][:, None]
    same(want[0], np.clip(np.where(yy > 0.5, yy, 0), -1, 1).astype(bf16))


def test_weak_python_scalars():
    x = np.array([1.5, 2.5], bf16)
    same(xe.Mul(x, 2), np.array([3, 5], bf16))            # 2 takes bf16, like a weak type
    same(xe.Add(np.int8([1]), 2), np.int8([3]))
    shape_error(lambda: xe.Add(np.int32([1]), 1.5), "Add", "s32", "f32")   # no silent truncation
    b = xe.XlaBuilder("w")
    p = xe.Parameter(b, 0, xe.Shape("f16", (3,)))
    assert (p * 2).shape == xe.Shape("f16", (3,))
    assert (1 - p).shape == xe.Shape("f16", (3,))


# -- hypothesis: broadcasting in builder mode, eager mode and NumPy ---------------------------------

@st.composite
def broadcastable_shapes(draw):
    """Two shapes that broadcast NumPy-style (ranks may differ, size-1 dims anywhere)."""
    result = draw(st.lists(st.integers(1, 4), min_size=0, max_size=4))
    shapes = []
    for _ in range(2):
        rank = draw(st.integers(0, len(result)))
        dims = result[len(result) - rank:]
        shapes.append(tuple(d if draw(st.booleans()) else 1 for d in dims))
    return shapes


@settings(max_examples=40, deadline=None)
@given(broadcastable_shapes(), st.sampled_from(["Add", "Sub", "Mul", "Max", "Lt"]))
def test_broadcasting_builder_eager_numpy_agree(shapes, name):
    (ls, rs) = shapes
    rng = np.random.default_rng(0)
    x = rng.standard_normal(ls).astype(np.float32)
    y = rng.standard_normal(rs).astype(np.float32)
    fn = getattr(xe, name)
    eager = fn(x, y)
    numpy_fn = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Max": np.maximum, "Lt": np.less}[name]
    same(eager, numpy_fn(x, y))
    b = xe.XlaBuilder("h")
    op = fn(xe.Parameter(b, 0, xe.Shape("f32", ls)), xe.Parameter(b, 1, xe.Shape("f32", rs)))
    assert op.shape.dims == infer_shape(ls, rs)
    comp = b.build(op)
    # the recorded binary op has equal operand shapes; broadcasts made them so
    binary = comp.entry.root
    assert binary.operands[0].shape.dims == binary.operands[1].shape.dims == op.shape.dims
    same(comp.run(x, y), eager)


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_broadcast_dimensions_form(data):
    high = tuple(data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=4)))
    chosen = sorted(data.draw(st.sets(st.integers(0, len(high) - 1))))
    low = tuple(high[d] if data.draw(st.booleans()) else 1 for d in chosen)
    x = np.arange(int(np.prod(high)), dtype=np.int32).reshape(high)
    y = np.arange(int(np.prod(low)), dtype=np.int32).reshape(low) * 100
    # NumPy: put the low operand's dims where broadcast_dimensions says, 1 elsewhere
    expanded = [1] * len(high)
    for i, d in enumerate(chosen):
        expanded[d] = low[i]
    want = x + y.reshape(expanded)
    same(xe.Add(x, y, broadcast_dimensions=chosen), want)
    same(xe.Add(y, x, broadcast_dimensions=chosen), want)
    b = xe.XlaBuilder("bd")
    op = xe.Add(xe.Parameter(b, 0, xe.Shape("s32", high)), xe.Parameter(b, 1, xe.Shape("s32", low)),
                broadcast_dimensions=chosen)
    same(b.build(op).run(x, y), want)


@settings(max_examples=40, deadline=None)
@given(broadcastable_shapes(), st.data())
def test_broadcasting_with_dynamic_dims(shapes, data):
    """Dynamic sizes: the builder's result shape is infer_shape's, and running with concrete
    values that fit gives NumPy's result."""
    (ls, rs) = shapes
    ldyn = tuple(None if data.draw(st.booleans()) else d for d in ls)
    rdyn = tuple(None if data.draw(st.booleans()) else d for d in rs)
    b = xe.XlaBuilder("dyn")
    op = xe.Add(xe.Parameter(b, 0, xe.Shape("f32", ldyn)), xe.Parameter(b, 1, xe.Shape("f32", rdyn)))
    assert op.shape.dims == infer_shape(ldyn, rdyn)
    # run with the static sizes only where the static result does not depend on a size-1 vs N choice
    if all(d is not None for d in op.shape.dims) or ls == rs:
        x, y = np.ones(ls, np.float32), np.full(rs, 2, np.float32)
        got = b.build(op).run(x, y)
        same(got, x + y)


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_a_scalar_against_a_bounded_dimension_is_broadcast_to_the_bound_and_sized_at_run_time(backend):
    """As XlaBuilder does it: ``broadcast`` to the bound, then ``set-dimension-size`` to the
    dynamic operand's ``get-dimension-size``, so both operands of the element-wise op have the
    same size at run time (a ``f32[1]`` broadcast would break HLO's same-shape rule)."""
    if backend == "numba":
        pytest.importorskip("numba")
    b = xe.XlaBuilder("twice")
    v = xe.Parameter(b, 0, "f32[<=4]", "v")
    comp = b.build(xe.Mul(v, np.float32(2)))
    text = comp.as_hlo_text()
    assert "f32[4]{0} broadcast(" in text and "set-dimension-size(" in text and "get-dimension-size(v)" in text
    same(comp.run(np.arange(3, dtype=np.float32), backend=backend), np.arange(3, dtype=np.float32) * 2)
    same(comp.run(np.arange(4, dtype=np.float32), backend=backend), np.arange(4, dtype=np.float32) * 2)
    with pytest.raises(xe.ExecutionError, match="v"):
        comp.run(np.arange(5, dtype=np.float32), backend=backend)


def test_a_run_time_size_mismatch_is_an_execution_error_and_a_shape_error():
    b = xe.XlaBuilder("both")
    u = xe.Parameter(b, 0, "f32[?,3]", "u")
    w = xe.Parameter(b, 1, "f32[?,3]", "w")
    comp = b.build(xe.Add(u, w))
    with pytest.raises(xe.ExecutionError, match=r"add.*f32\[2,3\], f32\[3,3\]") as info:
        comp.run(np.ones((2, 3), np.float32), np.ones((3, 3), np.float32))
    assert isinstance(info.value, xe.ShapeError)
