"""Random numbers (ops/rng.py): RngUniform / RngNormal (HLO ``rng``) and RngBitGenerator.

RngBitGenerator must match XLA:CPU bit for bit: the generators are checked against the
Random123 known-answer vectors, the corpus' XLA outputs, and (when jax is installed)
XLA itself over widths, shapes and counter carries."""
import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import xla_explorer as xe
from xla_explorer.executors.reference import ExecutionContext
from xla_explorer.ops import registry, rng

try:
    import jax
    from jax import lax
    jax.config.update("jax_platforms", "cpu")
except Exception:  # noqa: BLE001 - jax is optional
    jax = None

S = xe.Shape


def raises(message):
    return pytest.raises(xe.ShapeError, match=re.escape(message))


def hexes(words):
    return [f"{int(w):08x}" for w in words]


# -- the generators: Random123's known-answer tests ---------------------------------------------

def test_philox4x32_10_known_answers():
    assert hexes(rng.philox4x32([0, 0, 0, 0], [0, 0])) == ["6627e8d5", "e169c58d", "bc57ac4c", "9b00dbd8"]
    assert hexes(rng.philox4x32([0xFFFFFFFF] * 4, [0xFFFFFFFF] * 2)) == ["408f276d", "41c83b0e", "a20bc7c6", "6d5451fd"]
    assert hexes(rng.philox4x32([0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344], [0xA4093822, 0x299F31D0])) == \
        ["d16cfe09", "94fdcceb", "5001e420", "24126ea1"]


def test_threefry2x32_20_known_answers():
    assert hexes(rng.threefry2x32([0, 0], [0, 0])) == ["6b200159", "99ba4efe"]
    assert hexes(rng.threefry2x32([0xFFFFFFFF] * 2, [0xFFFFFFFF] * 2)) == ["1cb996fc", "bb002be7"]
    assert hexes(rng.threefry2x32([0x243F6A88, 0x85A308D3], [0x13198A2E, 0x03707344])) == ["c4923a9c", "483df7a0"]


# -- RngBitGenerator against XLA's outputs in the corpus ------------------------------------------

def test_rbg_default_is_philox_corpus(load_case):
    case = load_case("rbg_random_bits")
    state = case["inputs"][0].reshape(2, 2).view(np.uint64).reshape(2)  # as the module bitcasts it
    new_state, bits = xe.RngBitGenerator("rng_default", state, "u32[4,8]")
    np.testing.assert_array_equal(bits, case["outputs"][0])
    # the counter (state[1]) advanced by the 8 Philox calls of 4 words each
    np.testing.assert_array_equal(new_state, [state[0], state[1] + np.uint64(8)])
    _, philox_bits = xe.RngBitGenerator("rng_philox", state, "u32[4,8]")
    np.testing.assert_array_equal(philox_bits, bits)


def test_rbg_three_fry_corpus(load_case):
    case = load_case("rng_bit_generator_threefry")
    state = case["inputs"][0].reshape(2, 2).view(np.uint64).reshape(2)
    new_state, bits = xe.RngBitGenerator("rng_three_fry", state, "u32[3,5]")
    np.testing.assert_array_equal(bits, case["outputs"][1])
    np.testing.assert_array_equal(new_state.view(np.uint32), case["outputs"][0])


def test_rbg_state_layouts():
    # u64[3] Philox state: (key, counter low, counter high); the carry reaches the high word
    state = np.array([5, 2 ** 64 - 1, 7], np.uint64)
    new_state, bits = xe.RngBitGenerator("rng_philox", state, "u32[8]")
    np.testing.assert_array_equal(new_state, [5, 1, 8])
    key = [5, 0]
    want = [rng.philox4x32([0xFFFFFFFF, 0xFFFFFFFF, 7, 0], key), rng.philox4x32([0, 0, 8, 0], key)]
    np.testing.assert_array_equal(bits, np.concatenate([np.array(w) for w in want]))
    # u64[2] Philox state: the key doubles as the counter's high half
    _, bits2 = xe.RngBitGenerator("rng_default", np.array([5, 3], np.uint64), "u32[4]")
    np.testing.assert_array_equal(bits2, rng.philox4x32([3, 0, 5, 0], key))
    # Threefry: element i uses counter state[1] + i
    _, words = xe.RngBitGenerator("rng_three_fry", np.array([9, 4], np.uint64), "u64[3]")
    for i in range(3):
        lo, hi = rng.threefry2x32([4 + i, 0], [9, 0])
        assert int(words[i]) == int(lo) | (int(hi) << 32)


def test_rbg_widths_and_types():
    state = np.array([11, 22], np.uint64)
    _, u32 = xe.RngBitGenerator("rng_default", state, "u32[5]")
    _, u8 = xe.RngBitGenerator("rng_default", state, "u8[5]")
    _, s16 = xe.RngBitGenerator("rng_default", state, "s16[5]")
    np.testing.assert_array_equal(u8, u32.astype(np.uint8))           # narrow: the low bits
    np.testing.assert_array_equal(s16.view(np.uint16), u32.astype(np.uint16))
    new_state, f32 = xe.RngBitGenerator("rng_default", state, "f32[5]")
    np.testing.assert_array_equal(f32.view(np.uint32), u32)           # same bits, reinterpreted
    new64, u64 = xe.RngBitGenerator("rng_default", state, "u64[3]")
    assert u64.dtype == np.uint64 and int(new64[1]) == 22 + 2        # 6 words -> 2 Philox calls
    _, scalar = xe.RngBitGenerator("rng_three_fry", state, "u32[]")
    assert scalar.shape == () and scalar.dtype == np.uint32


def test_rbg_shape_rules_and_hlo():
    with raises("RngBitGenerator: initial_state must be a u64 vector, got u32[4]"):
        xe.RngBitGenerator("rng_default", np.zeros(4, np.uint32), "u32[2]")
    with raises("RngBitGenerator: rng_three_fry needs initial_state u64[2], got u64[3]"):
        xe.RngBitGenerator("rng_three_fry", np.zeros(3, np.uint64), "u32[2]")
    with raises("RngBitGenerator: rng_philox needs initial_state u64[2 or u64[3], got u64[4]"):
        xe.RngBitGenerator("rng_philox", np.zeros(4, np.uint64), "u32[2]")
    with raises("RngBitGenerator: the output must be an array of 8, 16, 32 or 64-bit integers or floats, got pred[2]"):
        xe.RngBitGenerator("rng_philox", np.zeros(2, np.uint64), "pred[2]")
    with raises("RngBitGenerator: algorithm='rng_mt19937' must be one of rng_default, rng_three_fry, rng_philox"):
        xe.RngBitGenerator("rng_mt19937", np.zeros(2, np.uint64), "u32[2]")
    b = xe.XlaBuilder("rbg")
    s = xe.Parameter(b, 0, S("u64", (2,)), "s")
    out = xe.RngBitGenerator("philox", s, "u32[3,5]")
    assert str(out.shape) == "(u64[2], u32[3,5])"
    text = b.build(out).as_hlo_text()
    assert "rng-bit-generator(s), algorithm=rng_philox" in text
    comp = xe.parse_hlo(text)
    assert comp.as_hlo_text() == text
    state = np.array([1, 2], np.uint64)
    for got, want in zip(comp.run(state), xe.RngBitGenerator("rng_philox", state, "u32[3,5]")):
        np.testing.assert_array_equal(got, want)


@pytest.mark.skipif(jax is None, reason="jax not installed")
@settings(max_examples=30, deadline=None)
@given(st.sampled_from(["rng_default", "rng_philox", "rng_three_fry"]),
       st.sampled_from([np.uint8, np.uint16, np.uint32, np.uint64]),
       st.lists(st.integers(1, 5), max_size=3),
       st.lists(st.integers(0, 2 ** 32 - 1), min_size=4, max_size=4), st.booleans())
def test_rbg_matches_xla(algorithm, dtype, dims, key, carry):
    key = np.array(key, np.uint32)
    if carry:  # a counter about to wrap around
        key[2:] = 0xFFFFFFFF
    alg = {"rng_default": lax.RandomAlgorithm.RNG_DEFAULT, "rng_philox": lax.RandomAlgorithm.RNG_PHILOX,
           "rng_three_fry": lax.RandomAlgorithm.RNG_THREE_FRY}[algorithm]
    with jax.enable_x64(True):  # u64 results; jax takes the u32[4] key as the module above does
        want_state, want_bits = jax.jit(lambda k: lax.rng_bit_generator(k, tuple(dims), dtype=dtype,
                                                                        algorithm=alg))(key)
    got_state, got_bits = xe.RngBitGenerator(algorithm, key.view(np.uint64), S(xe.dtypes.from_numpy(dtype), dims))
    np.testing.assert_array_equal(got_state.view(np.uint32), np.asarray(want_state))
    assert got_bits.dtype == dtype
    np.testing.assert_array_equal(got_bits, np.asarray(want_bits))


# -- RngUniform / RngNormal ---------------------------------------------------------------------

def test_rng_uniform_ranges_and_types():
    u = xe.RngUniform(np.float32(2.0), np.float32(3.0), "f32[1000]")
    assert u.dtype == np.float32 and u.shape == (1000,) and u.min() >= 2.0 and u.max() < 3.0
    i = xe.RngUniform(np.int32(-3), np.int32(4), S("s32", (500,)))
    assert i.dtype == np.int32 and set(np.unique(i)) <= set(range(-3, 4)) and len(np.unique(i)) == 7
    p = xe.RngUniform(np.bool_(False), np.bool_(True), ("pred", (10,)))
    assert p.dtype == np.bool_
    n = xe.RngNormal(np.float32(10.0), np.float32(2.0), "f32[4000]")
    assert n.dtype == np.float32 and abs(n.mean() - 10) < 0.3 and abs(n.std() - 2) < 0.3


def test_rng_uses_the_run_context():
    op = registry.get("rng")
    shape = S("f32", (5,))
    args = (np.float32(0), np.float32(1))
    a = op.reference(*args, shape=shape, distribution="rng_uniform", ctx=ExecutionContext(rng_seed=3))
    b = op.reference(*args, shape=shape, distribution="rng_uniform", ctx=ExecutionContext(rng_seed=3))
    np.testing.assert_array_equal(a, b)


def test_rng_shape_rules_and_hlo():
    with raises("RngUniform: a must be a scalar, got f32[2]"):
        xe.RngUniform(np.zeros(2, np.float32), np.float32(1), "f32[3]")
    with raises("RngUniform: b s32[] must have the output's element type (f32[3])"):
        xe.RngUniform(np.float32(0), np.int32(1), "f32[3]")
    with raises("RngNormal: the output must have a floating element type, got s32[3]"):
        xe.RngNormal(np.int32(0), np.int32(1), "s32[3]")
    with raises("RngNormal: sigma must be a scalar"):
        xe.RngNormal(np.float32(0), np.ones(1, np.float32), "f32[3]")
    with raises("RngUniform: the output must have a boolean, integral or floating element type, got c64[3]"):
        xe.RngUniform(np.complex64(0), np.complex64(1), "c64[3]")
    b = xe.XlaBuilder("rng")
    lo = xe.Parameter(b, 0, S("f32", ()), "lo")
    hi = xe.Parameter(b, 1, S("f32", ()), "hi")
    r = xe.RngNormal(lo, hi, "f32[2,3]")
    assert str(r.shape) == "f32[2,3]"
    text = b.build(r).as_hlo_text()
    assert "f32[2,3]{1,0} rng(lo, hi), distribution=rng_normal" in text
    comp = xe.parse_hlo(text)
    assert comp.as_hlo_text() == text
    assert comp.run(np.float32(0), np.float32(1)).shape == (2, 3)
