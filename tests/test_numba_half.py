"""f16 in the Numba executor: its f32 carrier reached on the bits (``executors/cpu/half.py``).

The conversions must be NumPy's ``astype`` bit for bit (what the executor used before, and
the reference uses): every f16 widened; f32 narrowed at every exponent around every
rounding boundary (ties, one below, one above, at each bit position, so the denormal
results' boundaries too), NaN payloads, infinities, the overflow threshold, and random
patterns (all 2^32 f32 were checked once, offline).  Fused loops read f16 operands and
store f16 results on their bits; their results must be the reference's.
"""
import numpy as np
import pytest

import xla_explorer as xe

pytest.importorskip("numba")


def _sweep(fn):
    from numba import njit

    @njit(error_model="numpy")
    def loop(x, out):
        for i in range(x.shape[0]):
            out[i] = fn(x[i])
    return loop


def _boundary_f32_bits():
    """f32 patterns at each rounding boundary: for every sign and exponent, mantissas whose
    low k bits are a tie, one below, one above, zero or all ones (k = 1..23), over a few
    high parts; NaN payloads; the overflow threshold's neighbours; random patterns."""
    rng = np.random.default_rng(16)
    out = []
    for k in range(1, 24):
        half = 1 << (k - 1)
        low = np.uint32([half, half - 1, half + 1, 0, (1 << k) - 1])
        high = rng.integers(0, 1 << (23 - k), 6, dtype=np.uint64).astype(np.uint32) << np.uint32(k) \
            if k < 23 else np.uint32([0])
        high = np.concatenate([high, np.uint32([0, ((1 << (23 - k)) - 1) << k])])
        mant = (high[:, None] | low[None, :]).reshape(-1) & np.uint32(0x7FFFFF)
        exps = np.arange(256, dtype=np.uint32) << np.uint32(23)
        v = (exps[:, None] | mant[None, :]).reshape(-1)
        out += [v, v | np.uint32(0x80000000)]
    out.append(np.uint32([0x7F800001, 0x7F801FFF, 0x7F802000, 0x7FC00000, 0x7FC00001, 0x7FA00000, 0xFF800001,
                          0xFFFFFFFF, 0x7FFFFFFF, 0x7F800000, 0xFF800000, 0x477FE000, 0x477FEFFF, 0x477FF000,
                          0x477FF001, 0x47800000, 0x38800000, 0x387FFFFF, 0x387FF000, 0x33000000, 0x33000001,
                          0x32FFFFFF, 0x33400000, 0x00000001, 0x80000001, 0x80000000, 0]))
    out.append(rng.integers(0, 1 << 32, 300_000, dtype=np.uint64).astype(np.uint32))
    return np.concatenate(out)


def _variants(half, name):
    """The integer version of a conversion, and its F16C version where the CPU has F16C."""
    out = [getattr(half, name + "_int")]
    if half.HAS_F16C:
        out.append(getattr(half, name + "_f16c"))
    assert getattr(half, name) in out
    return out


_EVERY_F16 = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)


def test_every_f16_widens_as_numpy():
    from xla_explorer.executors.cpu import half
    want = _EVERY_F16.view(np.float16).astype(np.float32).view(np.uint32)
    np.testing.assert_array_equal(half.f16_to_f32(_EVERY_F16.view(np.float16)).view(np.uint32), want)
    for fn in _variants(half, "f16_bits_to_f32"):   # the scalar functions the fused loops call
        got = np.empty(_EVERY_F16.size, np.float32)
        _sweep(fn)(_EVERY_F16, got)
        np.testing.assert_array_equal(got.view(np.uint32), want)
    # strided, 2-D, small and empty operands
    x = _EVERY_F16.view(np.float16).reshape(256, 256)[::3, 1::2]
    np.testing.assert_array_equal(half.f16_to_f32(x).view(np.uint32), x.astype(np.float32).reshape(-1).view(np.uint32))
    assert half.f16_to_f32(np.zeros(0, np.float16)).size == 0
    np.testing.assert_array_equal(half.f16_to_f32(np.float16(-3.5)), [-3.5])


def test_f32_narrows_as_numpy():
    from xla_explorer.executors.cpu import half
    bits = _boundary_f32_bits()
    f = bits.view(np.float32)
    with np.errstate(all="ignore"):
        want = f.astype(np.float16).view(np.uint16)
    for fn in _variants(half, "f32_to_f16_bits"):
        out = np.empty(f.size, np.uint16)
        _sweep(fn)(f, out)
        bad = np.nonzero(out != want)[0]
        assert bad.size == 0, [(hex(bits[i]), hex(out[i]), hex(want[i])) for i in bad[:8]]
    np.testing.assert_array_equal(half.f32_to_f16(f).view(np.uint16), want)
    y = f[:f.size // 10 * 10].reshape(-1, 10)[:, ::-3]   # strided, 2-D
    got = half.f32_to_f16(y)
    assert got.shape == y.shape and got.dtype == np.float16
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(got.view(np.uint16), y.astype(np.float16).view(np.uint16))
    assert half.f32_to_f16(np.zeros((0, 3), np.float32)).shape == (0, 3)


def _specials():
    """f16 values of every kind: NaNs with payloads (signalling too), infinities, zeros,
    denormals, the largest finite."""
    return np.uint16([0x7C01, 0xFE00, 0x7D55, 0xFC01, 0x7C00, 0xFC00, 0x0000, 0x8000, 0x0001, 0x83FF,
                      0x03FF, 0x0400, 0x7BFF, 0xFBFF, 0x3C00, 0x3555]).view(np.float16)


@pytest.mark.parametrize("n", [0, 1, 7, 4099, 1 << 17, 1 << 19])
def test_f16_fused_loops_equal_the_reference(n):
    rng = np.random.default_rng(n + 1)
    x = (rng.standard_normal(n, dtype=np.float32) * 300).astype(np.float16)
    y = rng.standard_normal(n, dtype=np.float32).astype(np.float16)
    s = _specials()
    x[:min(n, s.size)] = s[:n]
    y[:min(n, s.size)] = s[::-1][:n]
    F = xe.Shape("f16", (n,))
    for mode in ("flush", "ieee"):
        b = xe.XlaBuilder("f16_loop")
        p, q = xe.Parameter(b, 0, F, "x"), xe.Parameter(b, 1, F, "y")
        v = xe.Add(xe.Mul(p, q), p)
        for root in (v, xe.ConvertElementType(v, "f32"), xe.ConvertElementType(xe.Mul(p, q), "bf16"),
                     xe.Mul(xe.ConvertElementType(p, "f32"), xe.ConvertElementType(q, "f32"))):
            comp = b.build(root)
            got, want = comp.run(x, y, backend="numba", denormals=mode), comp.run(x, y, denormals=mode)
            assert got.dtype == want.dtype and got.shape == want.shape
            nan = np.isnan(want.astype(np.float32))
            assert np.array_equal(np.isnan(got.astype(np.float32)), nan)
            np.testing.assert_array_equal(got[~nan].view(np.uint8 if got.dtype.itemsize == 1 else f"u{got.dtype.itemsize}"),
                                          want[~nan].view(np.uint8 if want.dtype.itemsize == 1 else f"u{want.dtype.itemsize}"))


def test_f16_nan_payloads_travel_as_before():
    """A negate or a copy of f16 NaNs keeps what NumPy's astype to f32 and back made of
    their payloads (the executor's conversions before the bits were read in the loop);
    f32 -> f16 conversion of NaNs with payloads likewise; broadcast operands (rows,
    columns, scalars) and a non-contiguous operand read as their bits."""
    every = _EVERY_F16.view(np.float16).reshape(256, 256)
    b = xe.XlaBuilder("neg")
    P = xe.Shape("f16", (256, 256))
    p = xe.Parameter(b, 0, P, "x")
    comp = b.build(xe.Neg(p))
    with np.errstate(all="ignore"):
        want = (-every.astype(np.float32)).astype(np.float16)
    np.testing.assert_array_equal(comp.run(every, backend="numba").view(np.uint16), want.view(np.uint16))
    t = every.T   # non-contiguous
    with np.errstate(all="ignore"):
        want = (-t.astype(np.float32)).astype(np.float16)
    np.testing.assert_array_equal(comp.run(t, backend="numba").view(np.uint16), want.view(np.uint16))
    # f32 NaN payloads (and every boundary pattern) stored as f16
    f = _boundary_f32_bits().view(np.float32)
    f = f[:f.size // 64 * 64].reshape(-1, 64)
    b = xe.XlaBuilder("to_f16")
    comp = b.build(xe.ConvertElementType(xe.Parameter(b, 0, xe.Shape("f32", f.shape), "y"), "f16"))
    with np.errstate(all="ignore"):
        want = f.astype(np.float16)
    for mode in ("flush", "ieee"):
        got = comp.run(f, backend="numba", denormals=mode)
        ok = ~np.isnan(want) | np.isnan(got)
        assert ok.all()
        if mode == "ieee":   # (flush mode flushes f32 denormal operands first: zeros either way)
            np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
        else:
            np.testing.assert_array_equal(got.view(np.uint16), comp.run(f, denormals=mode).view(np.uint16))
    # broadcasts: a row, a column, a scalar
    rng = np.random.default_rng(5)
    x = rng.standard_normal((64, 96), dtype=np.float32).astype(np.float16)
    x.reshape(-1)[:8] = _specials()[:8]
    row, col = x[3].copy(), x[:, 5].copy()
    b = xe.XlaBuilder("f16_bcast")
    p = xe.Parameter(b, 0, xe.Shape("f16", (64, 96)), "x")
    r = xe.Parameter(b, 1, xe.Shape("f16", (96,)), "row")
    c = xe.Parameter(b, 2, xe.Shape("f16", (64,)), "col")
    s = xe.Parameter(b, 3, xe.Shape("f16", ()), "s")
    v = xe.Add(xe.Mul(p, xe.BroadcastInDim(r, (64, 96), [1])), xe.BroadcastInDim(c, (64, 96), [0]))
    comp = b.build(xe.Sub(xe.Neg(v), xe.BroadcastInDim(s, (64, 96), [])))
    args = (x, row, col, np.float16(0.5))
    got, want = comp.run(*args, backend="numba"), comp.run(*args)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got[~nan].view(np.uint16), want[~nan].view(np.uint16))


def test_f16_reduction_operand_widened_on_the_bits():
    """A reduction's f16 operand reaches its f32 carrier by ``half.f16_to_f32`` (a row mean of
    a big operand): the reference's result."""
    rng = np.random.default_rng(9)
    x = rng.standard_normal((300, 517), dtype=np.float32).astype(np.float16)
    import jax.numpy as jnp
    comp = xe.from_jax(lambda a: (a.mean(axis=1), a.sum(axis=0)), x)
    got, want = comp.run(x, backend="numba"), comp.run(x)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype == np.float16
        np.testing.assert_array_equal(g.view(np.uint16), w.view(np.uint16))
    del jnp


@pytest.mark.parametrize("dst", ["s32", "s16", "s8", "u16", "u8", "u32", "s64"])
def test_f32_to_integer_converts_equal_the_reference(dst):
    """f32 -> integer in a fused loop (``scalar_lib.f32_to_int`` for 32 bits or fewer, in
    f32 and int32; ``float_to_int`` otherwise): toward zero, saturating, NaN -> 0, at every
    rounding boundary pattern, the limits and their neighbours (all 2^32 f32 were checked
    once, offline, against ``float_to_int`` for s32, s16, s8, u16, u8)."""
    bits = _boundary_f32_bits()
    lim = np.float32([2.0 ** 31, 2.0 ** 32, 2.0 ** 15, 2.0 ** 16, 2.0 ** 7, 2.0 ** 8, 2.0 ** 63])
    near = np.concatenate([np.nextafter(lim, np.float32(0)), lim, np.nextafter(lim, np.float32(np.inf))])
    f = np.concatenate([bits.view(np.float32), near, -near, np.float32([0.5, -0.5, 0.99999994, -0.99999994,
                                                                      -1.0, 1.5, -1.5, np.nan, np.inf, -np.inf])])
    f = f[:f.size // 32 * 32].reshape(-1, 32)
    for mode in ("flush", "ieee"):
        b = xe.XlaBuilder("to_int")
        comp = b.build(xe.ConvertElementType(xe.Parameter(b, 0, xe.Shape("f32", f.shape), "x"), dst))
        with np.errstate(all="ignore"):
            got, want = comp.run(f, backend="numba", denormals=mode), comp.run(f, denormals=mode)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    x = f.T   # (non-contiguous)
    b = xe.XlaBuilder("to_int_t")
    comp = b.build(xe.ConvertElementType(xe.Mul(xe.Parameter(b, 0, xe.Shape("f32", x.shape), "x"),
                                                xe.ConstantR0(b, 100.0, "f32")), dst))
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(comp.run(x, backend="numba"), comp.run(x))
