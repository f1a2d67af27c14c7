"""CPU loops' 32-bit shifts (executors/cpu/bits.py) and bitcast-converts inside fused loops
(emit's view of the scalar): the same bits as scalar_lib's functions and the reference."""
import numpy as np
import pytest
from numba import njit
import jax
import jax.numpy as jnp
from jax import lax

import xla_explorer as xe
from xla_explorer.executors import fusion, scalar_lib
from xla_explorer.executors.cpu import bits

_MASK = {8: 0xFF, 16: 0xFFFF, 32: 0xFFFFFFFF, 64: 0xFFFFFFFFFFFFFFFF}


def _pair(n):
    """A compiled loop computing each shift both ways on n-bit patterns (as emit writes them)."""
    src = f"""
@njit
def both(a, b, out, ref):
    for i in range(a.shape[0]):
        u = np.uint64(a[i]) & np.uint64({_MASK[n]})
        s = np.uint64(b[i]) & np.uint64({_MASK[n]})
        sg = np.int64(np.int{n}(a[i]))
        out[0, i] = bits.shift_left(u, s, {n})
        ref[0, i] = scalar_lib.shift_left(u, s, {n})
        out[1, i] = bits.shift_right_logical(u, s, {n})
        ref[1, i] = scalar_lib.shift_right_logical(u, s, {n})
        out[2, i] = np.uint64(bits.shift_right_arithmetic(sg, s, {n}))
        ref[2, i] = np.uint64(scalar_lib.shift_right_arithmetic(sg, s, {n}))
"""
    g = {"njit": njit, "np": np, "bits": bits, "scalar_lib": scalar_lib}
    exec(src, g)
    return g["both"]


@pytest.mark.parametrize("n", [8, 16, 32, 64])
def test_shifts_match_scalar_lib_in_the_low_n_bits(n):
    rng = np.random.default_rng(n)
    count = 1 << 14
    a = rng.integers(-2 ** 63, 2 ** 63, count, dtype=np.int64)
    # every amount from 0 to n + 7 (past the width: 0 or the sign fill), then any pattern
    # (negative amounts read as huge ones)
    b = np.concatenate([np.arange(count // 2) % (n + 8), rng.integers(-2 ** 63, 2 ** 63, count // 2)])
    out, ref = np.empty((3, count), np.uint64), np.empty((3, count), np.uint64)
    _pair(n)(a, b.astype(np.int64), out, ref)
    m = np.uint64(_MASK[n])
    np.testing.assert_array_equal(out & m, ref & m)   # (the loop's cast keeps the low n bits)


def _run_both(f, *args):
    with jax.enable_x64(True):   # (64-bit types stay 64-bit)
        comp = xe.from_jax(f, *args)
    want = comp.run(*args, backend="numpy")
    got = comp.run(*args, backend="numba")
    return comp, np.asarray(want), np.asarray(got)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"])
def test_shifts_in_fused_loops_match_the_reference(dtype):
    rng = np.random.default_rng(1)
    info = np.iinfo(dtype)
    n = info.bits
    x = rng.integers(info.min, info.max, 4096, dtype=dtype, endpoint=True)
    s = (np.arange(4096) % (n + 4)).astype(dtype)   # (amounts up to n + 3)
    if info.min < 0:
        s[::7] = -1   # a negative amount: all bits shifted out
    f = lambda x, s: (lax.shift_left(x, s) ^ lax.shift_right_logical(x, s)) + lax.shift_right_arithmetic(x, s)  # noqa: E731
    _, want, got = _run_both(f, x, s)
    np.testing.assert_array_equal(got, want)


def test_threefry_uniform_matches_jax():
    x = np.zeros(1 << 12, np.float32)
    f = lambda x: x + jax.random.uniform(jax.random.PRNGKey(7), x.shape)  # noqa: E731
    comp = xe.from_jax(f, x)   # (f32: without x64)
    want, got = np.asarray(comp.run(x, backend="numpy")), np.asarray(comp.run(x, backend="numba"))
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    np.testing.assert_array_equal(got.view(np.uint32), np.asarray(jax.jit(f)(x)).view(np.uint32))


def _specials32():
    return np.array([0, 1, 0x7FFFFF, 0x800000, 0x80000001, 0x7F800000, 0xFF800000, 0x7FC00001,
                     0xFFBFFFFF, 0x3F800000, 0x80000000, 0xFFFFFFFF], np.uint32)


def _loop_members(comp, opcode):
    """Whether an instruction of ``opcode`` is in a fused loop of the entry's plan."""
    plan = comp.entry.__dict__["_fusion_plan"][1]
    return any(m.opcode == opcode for g in plan.groups for m in g.members)


@pytest.mark.parametrize("denormals", ["flush", "ieee"])
def test_bitcast_inside_a_loop_keeps_every_bit(denormals):
    u = np.concatenate([_specials32(), np.random.default_rng(2).integers(0, 2 ** 32, 500).astype(np.uint32)])
    with xe.float_env(denormals=denormals):
        # u32 -> f32 in the middle of a loop: denormal patterns and NaN payloads pass as bits;
        # the add reads them as its rule says (flushed in "flush" mode)
        f = lambda u: (lax.bitcast_convert_type(u ^ jnp.uint32(1), jnp.float32) + 0.0,   # noqa: E731
                       lax.bitcast_convert_type(lax.bitcast_convert_type(u, jnp.int32) * 3, jnp.float32) * -1.0,
                       lax.bitcast_convert_type(u.astype(jnp.float32) * 0.5, jnp.int32) >> 3)
        comp = xe.from_jax(f, u)
        want = comp.run(u, backend="numpy")
        got = comp.run(u, backend="numba")
        assert _loop_members(comp, "bitcast-convert")
        for w, g in zip(want, got):
            w, g = np.asarray(w), np.asarray(g)
            assert w.dtype == g.dtype
            # NaN payloads: both as NumPy makes them; compare bits where neither is NaN
            wb, gb = w.view(np.uint32), g.view(np.uint32)
            nan = np.isnan(w) if w.dtype.kind == "f" else np.zeros(w.shape, bool)
            np.testing.assert_array_equal(np.isnan(g) if g.dtype.kind == "f" else nan, nan)
            np.testing.assert_array_equal(gb[~nan], wb[~nan])


def test_bitcast_of_a_nan_payload_is_exact():
    u = _specials32()
    f = lambda u: lax.bitcast_convert_type(lax.bitcast_convert_type(u + jnp.uint32(0), jnp.float32), jnp.uint32) + jnp.uint32(1)  # noqa: E731,E501
    comp, want, got = _run_both(f, u)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, u + np.uint32(1))


@pytest.mark.parametrize("pair", [("float64", "int64"), ("uint64", "float64"), ("int16", "uint16"), ("uint8", "int8")])
def test_bitcasts_of_other_widths_fuse(pair):
    src, dst = pair
    x = np.random.default_rng(3).integers(0, 255, 256).astype(np.uint8).view(np.uint8)
    x = np.frombuffer(np.tile(x, np.dtype(src).itemsize).tobytes(), src)[:256].copy()
    if np.dtype(src).kind == "f":
        x = np.nan_to_num(x, nan=1.0, posinf=2.0, neginf=-2.0)
    f = lambda x: lax.bitcast_convert_type(x * 2, dst) * 1  # noqa: E731
    comp, want, got = _run_both(f, x)
    np.testing.assert_array_equal(got.view(f"u{got.dtype.itemsize}"), want.view(f"u{want.dtype.itemsize}"))
    assert _loop_members(comp, "bitcast-convert")


def test_bitcast_of_another_width_is_not_fused():
    x = np.arange(8, dtype=np.float32)
    f = lambda x: lax.bitcast_convert_type(x + 1, jnp.uint8) + 1  # noqa: E731
    comp, want, got = _run_both(f, x)
    np.testing.assert_array_equal(got, want)
    assert not _loop_members(comp, "bitcast-convert")


def test_bitcast_switch_off_keeps_the_step(monkeypatch):
    monkeypatch.setattr(fusion, "BITCASTS", False)
    u = _specials32()
    f = lambda u: lax.bitcast_convert_type(u + jnp.uint32(0), jnp.float32) * 1.0  # noqa: E731
    comp, want, got = _run_both(f, u)
    assert not _loop_members(comp, "bitcast-convert")
    nan = np.isnan(want)
    np.testing.assert_array_equal(got.view(np.uint32)[~nan], want.view(np.uint32)[~nan])
