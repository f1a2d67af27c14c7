"""Flushes a fused loop leaves out under the flushing environment because the value cannot
be denormal (``loopgen.LoopSource._never_denormal``): a sum with a scalar constant of at
least 2^-100 (f32, bf16; 2^-900 f64), a product of a flushed value and a constant of at
least 1, an f32 / bf16 tanh of a flushed value; and the squares' sign-free flush
(``emit``: ``ftz_pos32``).  Each loop must give the bits of the loop with every flush
(the switches off), for denormal, tiny, huge, infinite and NaN operands, and constants on
both sides of the thresholds; and tanh_f32 must be, bit for bit, the formula it was."""
import numpy as np
import pytest

import xla_explorer as xe

pytest.importorskip("numba")

from xla_explorer.executors import emit, loopgen  # noqa: E402


def _values(t):
    dt = np.float64 if t == "f64" else np.float32
    tiny = float(np.finfo(dt).tiny)
    e = -900 if t == "f64" else -100
    v = [0.0, -0.0, tiny, -tiny, tiny / 2, -tiny / 2, tiny / 1024, tiny * 3, 1.5 * tiny, -1.25 * tiny,
         2.0 ** (e - 2), 2.0 ** e, -(2.0 ** e), 2.0 ** (e + 1), 1.5 * 2.0 ** e, 2.0 ** -60, 1e-30, 1e-8, 0.5,
         1.0, -1.0, 3.0, 0.625, -0.625, 9.5, 20.0, 44.0, 89.0, -80.0, 1e30, -3e38, np.inf, -np.inf, np.nan]
    v += [float(np.nextafter(dt(tiny), dt(0))), -float(np.nextafter(dt(tiny), dt(0)))]
    v += [-c for c in _constants(t) if np.isfinite(c)]   # sums that cancel
    return np.array(v, np.float64)


def _constants(t):
    dt = np.float64 if t == "f64" else np.float32
    tiny = float(np.finfo(dt).tiny)
    e = -900 if t == "f64" else -100
    return [1.0, -1.0, 0.5, 2.0, 0.999, -1.0000001, 2.0 ** e, -(2.0 ** e), 2.0 ** (e - 1), 1.5 * 2.0 ** (e - 1),
            2.0 ** (e // 2), -3 * 2.0 ** (e // 2), tiny, 0.0, -0.0, 1e30, np.inf, -np.inf, np.nan]


def _np(t):
    return xe.Shape(t, ()).dtype


def _bits(t, a):
    return np.asarray(a).view({"bf16": np.uint16, "f64": np.uint64}.get(t, np.uint32))


BODIES = {
    "x + c": lambda x, y, c: xe.Add(x, c),
    "c - x": lambda x, y, c: xe.Sub(c, x),
    "(x * y) - c": lambda x, y, c: xe.Sub(xe.Mul(x, y), c),
    "x * c": lambda x, y, c: xe.Mul(x, c),
    "c * (x * y)": lambda x, y, c: xe.Mul(c, xe.Mul(x, y)),
    "(x * c) * y": lambda x, y, c: xe.Mul(xe.Mul(x, c), y),
    "tanh(x * y) + y": lambda x, y, c: xe.Add(xe.Tanh(xe.Mul(x, y)), y),
    "tanh(x) * c": lambda x, y, c: xe.Mul(xe.Tanh(x), c),
    # bounds carried through: (x + c) is 0 or >= c's half ulp, times c
    "((x + c) * c) * c": lambda x, y, c: xe.Mul(xe.Mul(xe.Add(x, c), c), c),
    "(tanh(x) + c) * 0.5 * y": lambda x, y, c: xe.Mul(xe.Mul(xe.Add(xe.Tanh(x), c), np.array(0.5, x.shape.dtype)), y),
    "(x * x) * y": lambda x, y, c: xe.Mul(xe.Mul(x, x), y),
    # a negate / abs of a flushed value is flushed: its readers do not flush it again
    "abs(x * y) + y": lambda x, y, c: xe.Add(xe.Abs(xe.Mul(x, y)), y),
    "-(x * c) * y": lambda x, y, c: xe.Mul(xe.Neg(xe.Mul(x, c)), y),
    # a product only a sum with a constant reads is left unflushed (Horner: p * z + c)
    "c - (x * y)": lambda x, y, c: xe.Sub(c, xe.Mul(x, y)),
    "((x * y) + c) * y + c": lambda x, y, c: xe.Add(xe.Mul(xe.Add(xe.Mul(x, y), c), y), c),
    "(x * x) + c": lambda x, y, c: xe.Add(xe.Mul(x, x), c),
    "gelu": lambda x, y, c: xe.Mul(x, xe.Mul(np.array(0.5, x.shape.dtype), xe.Add(np.array(1, x.shape.dtype), xe.Tanh(
        xe.Mul(np.array(0.797884583, x.shape.dtype), xe.Add(x, xe.Mul(np.array(0.044715, x.shape.dtype),
                                                                     xe.Mul(xe.Mul(x, x), x)))))))),
}


def _build(t, shape, body, c):
    b = xe.XlaBuilder("kept")
    x = xe.Parameter(b, 0, xe.Shape(t, shape), "x")
    y = xe.Parameter(b, 1, xe.Shape(t, shape), "y")
    return b.build(body(x, y, np.array(c, _np(t))))


@pytest.mark.parametrize("t", ["f32", "bf16", "f64"])
@pytest.mark.parametrize("name", list(BODIES))
def test_left_out_flushes_change_no_bit(t, name, monkeypatch):
    v = _values(t)
    a, b = np.meshgrid(v, v, indexing="ij")
    x, y = a.astype(_np(t)), b.astype(_np(t))
    consts = _constants(t) if "c" in name.replace("tanh", "") else [1.0]
    for c in consts:
        got = {}
        for on in (True, False):
            monkeypatch.setattr(loopgen, "NEVER_DENORMAL", on)
            monkeypatch.setattr(emit, "_FTZ_POS", on)
            comp = _build(t, x.shape, BODIES[name], c)   # (a new computation: its loop generated again)
            with xe.float_env(denormals="flush"):
                got[on] = comp.run(x, y, backend="numba")
                if on:
                    want = comp.run(x, y)
        # bits, but a NaN only as a NaN: which of two NaN operands a product returns is
        # LLVM's choice of operand order (x86 returns the first), which any change to a
        # loop may flip, flushes or not
        nan = np.isnan(np.asarray(got[False], np.float64))
        assert np.array_equal(np.isnan(np.asarray(got[True], np.float64)), nan), f"c = {c!r}"
        np.testing.assert_array_equal(_bits(t, got[True])[~nan], _bits(t, got[False])[~nan], err_msg=f"c = {c!r}")
        if "tanh" not in name and name != "gelu" and t != "bf16":   # (+ - * exact: the reference's bits too;
            # bf16's products near 2^-126 round twice here, as before: only close)
            # (a NaN's sign and payload: the executors' own business)
            g, w = np.asarray(got[True]), np.asarray(want)
            nan = np.isnan(np.asarray(w, np.float64))
            assert np.array_equal(np.isnan(np.asarray(g, np.float64)), nan)
            np.testing.assert_array_equal(_bits(t, g)[~nan], _bits(t, w)[~nan], err_msg=f"c = {c!r}")
        elif "tanh(x) + c" not in name:   # (1 + tanh cancels: the tanhs' ulp grow without bound there)
            np.testing.assert_allclose(np.asarray(got[True], np.float64), np.asarray(want, np.float64),
                                       rtol=3e-6 if t == "f32" else (1e-2 if t == "bf16" else 1e-14),
                                       atol=1e-37 if t != "f64" else 0, equal_nan=True)


@pytest.mark.parametrize("t", ["f32", "bf16", "f64"])
def test_odd_sizes_and_a_broadcast_row(t):
    """The same loops over sizes 0, 1, 7 and 1001, with the constant row broadcast along the
    major dimension (not a scalar: its flushes stay)."""
    rng = np.random.default_rng(1)
    for n in (0, 1, 7, 1001):
        x = (rng.standard_normal((3, n)) * np.where(rng.random((3, n)) < 0.3, 1e-38, 1.0)).astype(_np(t))
        for name in ("x + c", "x * c", "gelu"):
            comp = _build(t, x.shape, BODIES[name], 2.0)
            with xe.float_env(denormals="flush"):
                np.testing.assert_allclose(np.asarray(comp.run(x, x, backend="numba"), np.float64),
                                           np.asarray(comp.run(x, x), np.float64),
                                           rtol={"f32": 1e-5, "bf16": 1e-2}.get(t, 1e-12),   # (tanh's ulp, x (1 + tanh) cancelling)
                                           atol=1e-7 if t != "f64" else 0)
        b = xe.XlaBuilder("row")
        p = xe.Parameter(b, 0, xe.Shape(t, (3, n)), "x")
        r = xe.Parameter(b, 1, xe.Shape(t, (n,)), "r")
        comp = b.build(xe.Add(xe.Mul(p, p), r, broadcast_dimensions=[1]))
        row = (x[0] * 1e-30).astype(_np(t))
        with xe.float_env(denormals="flush"):
            np.testing.assert_array_equal(_bits(t, comp.run(x, row, backend="numba")), _bits(t, comp.run(x, row)))


def test_the_loop_leaves_out_exactly_these_flushes():
    from xla_explorer.executors import fusion
    from xla_explorer.executors.loopgen import LoopSource
    cases = [("x + c", 1.0, 0), ("x + c", 2.0 ** -101, 1), ("x + c", np.nan, 0), ("x * c", -2.0, 0),
             ("x * c", 0.5, 1), ("tanh(x) * c", 0.5, 1), ("tanh(x) * c", 1.0, 0), ("(x * x) * y", 1.0, 1),
             ("((x + c) * c) * c", 1.0, 0), ("((x + c) * c) * c", 2.0 ** -50, 1), ("((x + c) * c) * c", 2.0 ** -100, 2),
             ("gelu", 1.0, 5)]
    for name, c, result_flushes in cases:
        comp = _build("f32", (4, 4), BODIES[name], c)
        with xe.float_env(denormals="flush"):
            groups = fusion.fusion_plan(comp.entry).groups
            assert len(groups) == 1
            body = LoopSource(groups[0]).body
        # the flushes of computed values (t<k> = ...ftz32(...)), not of the parameters read
        flushes = sum("ftz32(" in line and line.startswith("t") for line in body)
        assert flushes == result_flushes, (name, c, body)
    comp = _build("f32", (4, 4), BODIES["(x * x) * y"], 1.0)
    with xe.float_env(denormals="flush"):
        assert any("ftz_pos32(" in line for line in LoopSource(fusion.fusion_plan(comp.entry).groups[0]).body)


def _old_tanh_f32():
    """tanh_f32 before ``_exp_tanh_f32``: the small / large select with ``exp_f32``."""
    from numba import njit
    from xla_explorer.executors.scalar_lib import exp_f32

    @njit(fastmath={"contract"}, error_model="numpy")
    def old(x):
        x = np.float32(x)
        a = abs(x)
        z = x * x
        p = np.float32(-0.005691985599696636) * z + np.float32(0.020626291632652283)
        p = p * z + np.float32(-0.05373531952500343)
        p = p * z + np.float32(0.13331381976604462)
        p = p * z + np.float32(-0.3333328068256378)
        small = x + x * z * p
        e = exp_f32(a + a)
        large = np.float32(1.0) - np.float32(2.0) / (e + np.float32(1.0))
        r = small if a < np.float32(0.625) else large
        return np.int32(np.float32(r).view(np.int32) | (np.float32(x).view(np.int32) & np.int32(-2147483648))).view(
            np.float32)
    return old


def test_tanh_f32_is_the_old_formula_bit_for_bit_and_keeps_normals_normal():
    """Every 61st f32 bit pattern (70M values: every exponent, both signs, NaN payloads),
    and every f32 from 2^-127 to 2^-120 and around the branch point and the clamp: the bits
    of the old formula; a normal input never gives a denormal (``_never_denormal``'s tanh).
    (All 2^32 were checked once, in the same way.)"""
    from numba import njit
    from xla_explorer.executors.scalar_lib import tanh_f32
    old = _old_tanh_f32()

    @njit(error_model="numpy")
    def both(x, a, b):
        for i in range(x.shape[0]):
            a[i] = old(x[i])
            b[i] = tanh_f32(x[i])
    tiny = np.float32(np.finfo(np.float32).tiny)
    parts = [np.arange(0, 2 ** 32, 61, dtype=np.uint64).astype(np.uint32)]
    for lo in (0x00000000, 0x3F200000 - 40000, 0x41A00000 - 40000, 0x7F800000 - 1000, 0xFF800000 - 1000):
        parts.append(np.arange(lo, lo + 80000, dtype=np.uint64).astype(np.uint32))
    parts.append(np.arange(0x00400000, 0x04000000, 7, dtype=np.uint32))
    u = np.concatenate(parts)
    for x in (u.view(np.float32), (u | np.uint32(0x80000000)).view(np.float32)):
        a, b = np.empty_like(x), np.empty_like(x)
        both(x, a, b)
        np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))
        normal = np.abs(x) >= tiny
        assert not np.any(normal & (np.abs(b) < tiny))
