"""The fast pass of fused loops converting f16 (``cpu.fused.RowLoopSource._row_lines``).

Each block of ``F16_BLOCK`` elements of a row is converted by the bare F16C instructions
first, and computed again by the exact conversions when a NaN was read or stored; the
bits must be those of the exact loop (``fused.BARE_F16 = False``) whatever the values:
NaNs with payloads (signalling ones, which the bare conversions quiet: a negate, a max
carry them to the result) in one operand, only in later blocks or only in the first, NaN
made by the op (inf * 0), overflow to inf, -0.0, denormal inputs and results, in both
float environments; same-shape, row-broadcast, column-broadcast and scalar f16 operands;
rows of 0, 1, an odd number and a block plus one elements; the parallel loop's blocks.
"""
import numpy as np
import pytest

import xla_explorer as xe

pytest.importorskip("numba")

from xla_explorer.executors import fusion  # noqa: E402
from xla_explorer.executors.cpu import fused, half  # noqa: E402

B = fused.F16_BLOCK
#: f16 NaNs: signalling and quiet, payloads, both signs
NANS = np.uint16([0x7C01, 0x7D55, 0xFC01, 0x7E00, 0xFE00, 0x7FFF, 0xFD00, 0x7E01])
#: other special f16 values: infinities, zeros, denormals, the largest finite, and factors
#: whose product is 65504 / 65520 (the overflow tie: to inf) / just below it
SPECIALS = np.uint16([0x7C00, 0xFC00, 0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x83FF, 0x0400, 0x7BFF,
                      0xFBFF, 0x5BFF, 0x5BFF, 0x5C00, 0x5800, 0x3C00, 0xBC00, 0x0200])

MODES = ("flush", "ieee")


@pytest.fixture(autouse=True)
def _fast_on_every_row():
    """The fast pass on rows of every length (``F16_FAST_ROW``), the switch restored after."""
    row = fused.F16_FAST_ROW
    fused.F16_FAST_ROW = 1
    yield
    fused.BARE_F16, fused.F16_FAST_ROW = True, row


def _f16(rng, n, nan_at=()):
    """n f16 values: normal ones of every scale (products overflow and underflow), denormals,
    the specials cycled through; NaNs at the positions ``nan_at`` only."""
    x = (rng.standard_normal(n, dtype=np.float32) * np.float32(2.0) ** rng.integers(-12, 9, n)).astype(np.float16)
    bits = x.view(np.uint16)
    tiny = rng.random(n) < 0.1
    bits[tiny] = rng.integers(0, 0x400, int(tiny.sum()), dtype=np.uint16) | (bits[tiny] & 0x8000)   # denormals
    k = np.arange(n)
    every = rng.random(n) < 0.15
    bits[every] = SPECIALS[k[every] % SPECIALS.size]
    nan_at = np.asarray(nan_at, np.int64)
    nan_at = nan_at[nan_at < n]
    bits[nan_at] = NANS[np.arange(nan_at.size) % NANS.size]
    return bits.view(np.float16)


def _run_both(make, args, mode):
    """The bits of a fresh computation ``make()`` run with the fast pass on and off."""
    out = []
    for bare in (True, False):
        fused.BARE_F16 = bare
        got = make().run(*args, backend="numba", denormals=mode)
        out.append(np.ascontiguousarray(got).view(f"u{got.dtype.itemsize}").copy())
    fused.BARE_F16 = True
    return out


def _check(make, args, want_fast=True):
    if want_fast and half.HAS_F16C:   # the fast pass is there, and on
        group = fusion.fusion_plan(make().entry).groups[0]
        src, _, static = fused.compile_loop(group, narrow=True)
        assert src.fast_pass and static[2][-1] is True
    for mode in MODES:
        fast, exact = _run_both(make, args, mode)
        bad = np.nonzero(fast.reshape(-1) != exact.reshape(-1))[0]
        assert bad.size == 0, (mode, bad[:5], fast.reshape(-1)[bad[:5]], exact.reshape(-1)[bad[:5]])
        # and, away from NaNs (whose payloads the reference need not keep), the reference's
        want = make().run(*args, denormals=mode)
        w = np.ascontiguousarray(want).view(f"u{want.dtype.itemsize}")
        nan = np.isnan(np.asarray(want, np.float32))
        np.testing.assert_array_equal(exact[~nan], w[~nan])


def _binary(shape, body, t="f16"):
    def make():
        b = xe.XlaBuilder("f16_rows")
        p, q = xe.Parameter(b, 0, xe.Shape(t, shape), "x"), xe.Parameter(b, 1, xe.Shape(t, shape), "y")
        return b.build(body(p, q))
    return make


BODIES = {
    "x * y": lambda p, q: xe.Mul(p, q),
    # an f32 result: only the reads convert; a negate and a max carry a signalling NaN's
    # payload to it (the bare conversions quiet it)
    "f32(max(-x, y))": lambda p, q: xe.ConvertElementType(xe.Max(xe.Neg(p), q), "f32"),
}


@pytest.mark.parametrize("L", [0, 1, 7, B + 1])
@pytest.mark.parametrize("body", list(BODIES))
def test_rows_fast_equals_exact(L, body):
    rng = np.random.default_rng(L)
    n = 3 * L
    x, y = _f16(rng, n), _f16(rng, n)
    y.view(np.uint16)[:min(n, 4)] = 0x7C00                   # inf * 0: a NaN the op makes
    x.view(np.uint16)[:min(n, 4)] = [0x0000, 0x8000, 0x7C00, 0x0001][:min(n, 4)]
    x.view(np.uint16)[[k for k in (n - 1, n // 2 + 1) if 4 <= k < n]] = 0x7C01   # (a signalling NaN)
    _check(_binary((3, L), BODIES[body]), (x.reshape(3, L), y.reshape(3, L)), want_fast=L > 0)


@pytest.mark.parametrize("where", ["none", "first", "late", "one operand"])
def test_nans_in_some_blocks_only(where):
    """NaNs in no block, only the first, only the last ones, only in y: each block its own."""
    n = 4 * B + 5
    rng = np.random.default_rng(3)
    at = {"none": [], "first": [0, 5, B - 1], "late": [3 * B, 4 * B + 4], "one operand": []}[where]
    x = _f16(rng, n, at)
    y = _f16(rng, n, [2 * B + 1, 4 * B] if where == "one operand" else at[::-1])
    for body in BODIES:
        _check(_binary((n,), BODIES[body]), (x, y))


def test_broadcast_and_scalar_operands():
    """max(max(-column, scalar), x * row), stored as f16: a contiguous broadcast, one constant
    along the row, a scalar read as in[0]; NaNs in each (a signalling one carried to the
    store by the negate and the maxes), in later blocks only for the row."""
    R, L = 5, 2 * B + 3
    rng = np.random.default_rng(7)
    x = _f16(rng, R * L, [3 * L + B + 2]).reshape(R, L)
    row, col = _f16(rng, L, [B + 7]), _f16(rng, R, [4])
    col.view(np.uint16)[1] = 0x7C01

    def make():
        b = xe.XlaBuilder("f16_bcast_rows")
        p = xe.Parameter(b, 0, xe.Shape("f16", (R, L)), "x")
        r = xe.Parameter(b, 1, xe.Shape("f16", (L,)), "row")
        c = xe.Parameter(b, 2, xe.Shape("f16", (R,)), "col")
        s = xe.Parameter(b, 3, xe.Shape("f16", ()), "s")
        v = xe.Max(xe.Neg(xe.BroadcastInDim(c, (R, L), [0])), xe.BroadcastInDim(s, (R, L), []))
        return b.build(xe.Max(v, xe.Mul(p, xe.BroadcastInDim(r, (R, L), [1]))))
    for scalar in (np.float16(-0.0), np.float16(-6e-8), np.uint16(0x7D55).view(np.float16)):
        _check(make, (x, row, col, scalar))


def test_f32_to_f16_store_only():
    """f32 -> f16: only the store converts (f32 NaN payloads, denormals of both types,
    the overflow threshold, in the last block only for the NaNs)."""
    n = 2 * B + 1
    rng = np.random.default_rng(11)
    f = (rng.standard_normal(n, dtype=np.float32) * np.float32(2.0) ** rng.integers(-30, 18, n)).astype(np.float32)
    u = f.view(np.uint32)
    u[:6] = [0x477FEFFF, 0x477FF000, 0x33000000, 0x33000001, 0x00000001, 0x80000000]
    u[-4:] = [0x7F800001, 0xFFC00001, 0x7FA00000, 0x7F802000]

    def make():
        b = xe.XlaBuilder("to_f16_rows")
        return b.build(xe.ConvertElementType(xe.Parameter(b, 0, xe.Shape("f32", (n,)), "x"), "f16"))
    _check(make, (f,))


def test_blocks_of_the_parallel_loop():
    """The parallel loop's blocks of a row (``run_loop``'s ``blk``, a multiple of 16, not of
    F16_BLOCK) cut into the fast pass's, a NaN in one of them: the kernels' shared text
    run by the serial one with such blocks (no prange compiled here)."""
    n = 5 * B + 9
    rng = np.random.default_rng(13)
    x, y = _f16(rng, n, [2 * B + 17]), _f16(rng, n)
    group = fusion.fusion_plan(_binary((n,), BODIES["f32(max(-x, y))"])().entry).groups[0]
    src, (_, ser), (odims, inner, params, _) = fused.compile_loop(group, narrow=True)
    assert src.fast_pass or not half.HAS_F16C
    outs = []
    for blk in (B + B // 2 + 16, 48, n):
        for fast in ([True, False] if src.fast_pass else []):
            out = np.empty(n, np.float32)
            ser(n, out, x.view(np.uint16), y.view(np.uint16), odims, inner, blk, *params[:-1], fast)
            outs.append(out)
    for out in outs[1:]:
        np.testing.assert_array_equal(out.view(np.uint32), outs[0].view(np.uint32))


def test_short_rows_leave_it_off():
    """By default a row shorter than ``F16_FAST_ROW`` runs the exact pass alone."""
    fused.F16_FAST_ROW = 64
    for L, on in ((63, False), (64, True)):
        b = xe.XlaBuilder("f16_short_rows")
        p, r = xe.Parameter(b, 0, xe.Shape("f16", (4, L)), "x"), xe.Parameter(b, 1, xe.Shape("f16", (L,)), "r")
        group = fusion.fusion_plan(b.build(xe.Mul(p, xe.BroadcastInDim(r, (4, L), [1]))).entry).groups[0]
        src = fused.RowLoopSource(group, narrow=True)
        params = fused._params(src)[2]
        assert src.mdims[-1] == L and (not half.HAS_F16C or params[-1] is on)


def test_no_fast_pass_without_f16():
    """A bf16 or f32 loop has no fast pass (and no ``fast`` argument)."""
    for t in ("bf16", "f32"):
        group = fusion.fusion_plan(_binary((8,), BODIES["x * y"], t)().entry).groups[0]
        src = fused.RowLoopSource(group, narrow=True)
        assert not src.fast_pass and "fast" not in src.arguments()


def test_bare_conversions_differ_only_on_nans():
    """Why the NaN test: the bare conversions agree with the exact ones on every f16 and
    every f32 tested but NaNs, and quiet a signalling NaN."""
    if not half.HAS_F16C:
        pytest.skip("no F16C")
    from numba import njit

    @njit
    def widen(h, out, fn_out):
        for i in range(h.shape[0]):
            out[i] = half.f16_bits_to_f32_hw(h[i])
            fn_out[i] = half.f16_bits_to_f32(h[i])

    h = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    a, b = np.empty(h.size, np.float32), np.empty(h.size, np.float32)
    widen(h, a, b)
    nan = ((h & 0x7FFF) > 0x7C00)
    np.testing.assert_array_equal(a.view(np.uint32)[~nan], b.view(np.uint32)[~nan])
    assert (a.view(np.uint32)[h == 0x7C01] != b.view(np.uint32)[h == 0x7C01]).all()
