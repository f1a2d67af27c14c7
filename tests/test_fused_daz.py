"""Fused loops run in the processor's denormals-are-zero mode (``loopgen``'s DAZ mode, x86):
the flushes of lazy values left out, the operands that arithmetic reads left to the mode.
Each loop must give the bits of the loop without the mode (``loopgen.DAZ`` off) for
denormal, tiny, huge, infinite and NaN operands, serial and in threads, over long rows and
rows of three; it must leave the thread's MXCSR as it found it; loops whose code reads a
denormal as itself (tanh of a raw parameter) or that compute in narrow floats do not take
the mode; and the f32 functions it may call keep their values in it (``scripts/daz_functions.py``
checks all 2^32 operands; here every denormal and a sample)."""
import importlib.util
import os
import platform
import re

import numpy as np
import pytest

import xla_explorer as xe

pytest.importorskip("numba")

from xla_explorer.executors import fusion, loopgen  # noqa: E402
from xla_explorer.executors.cpu import fused  # noqa: E402

x86 = pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="MXCSR is x86's")


def _values(t):
    dt = np.float64 if t == "f64" else np.float32
    tiny = float(np.finfo(dt).tiny)
    v = [0.0, -0.0, tiny, -tiny, tiny / 2, -tiny / 2, tiny / 1024, -tiny / 3, tiny * 3, 1.5 * tiny,
         float(np.nextafter(dt(tiny), dt(0))), 2.0 ** -60, -(2.0 ** -70), 1e-30, 1e-20, 1e-8, 0.5, 1.0, -1.0, 3.0,
         0.625, -0.7, 9.5, 20.0, 89.0, -104.0, 1e30, -3e38, np.inf, -np.inf, np.nan]
    return np.array(v, np.float64)


def _c(x, v):
    return np.array(v, x.shape.dtype)


BODIES = {
    "gelu": lambda x, y: xe.Mul(x, xe.Mul(_c(x, 0.5), xe.Add(_c(x, 1), xe.Tanh(
        xe.Mul(_c(x, 0.797884583), xe.Add(x, xe.Mul(_c(x, 0.044715), xe.Mul(xe.Mul(x, x), x)))))))),
    "silu": lambda x, y: xe.Mul(x, xe.Logistic(xe.Mul(x, y))),
    "x * y * y - x": lambda x, y: xe.Sub(xe.Mul(xe.Mul(x, y), y), x),
    "(x - y) / sqrt(x * x + 1e-30)": lambda x, y: xe.Div(xe.Sub(x, y), xe.Sqrt(xe.Add(xe.Mul(x, x), _c(x, 1e-30)))),
    "rsqrt(x * y) * y": lambda x, y: xe.Mul(xe.Rsqrt(xe.Mul(x, y)), y),
    "log(x * y) + log1p(x * x)": lambda x, y: xe.Add(xe.Log(xe.Mul(x, y)), xe.Log1p(xe.Mul(x, x))),
    "exp(x * y - y)": lambda x, y: xe.Exp(xe.Sub(xe.Mul(x, y), y)),
    "select(x * y > 1e-38, x * y, -y)": lambda x, y: xe.Select(xe.Gt(xe.Mul(x, y), _c(x, 1e-38)), xe.Mul(x, y),
                                                              xe.Neg(y)),
    "max(x * y, y * 1e-3) + x": lambda x, y: xe.Add(xe.Max(xe.Mul(x, y), xe.Mul(y, _c(x, 1e-3))), x),
    "abs(x * y) * 3 + x": lambda x, y: xe.Add(xe.Mul(xe.Abs(xe.Mul(x, y)), _c(x, 3)), x),
    "tanh(x * y) * y": lambda x, y: xe.Mul(xe.Tanh(xe.Mul(x, y)), y),
    # values passed on lazily (select, negate, abs, max, min, clamp of lazy values)
    "select(x > 0, x * y, y * 3) * y": lambda x, y: xe.Mul(xe.Select(xe.Gt(x, _c(x, 0)), xe.Mul(x, y),
                                                                     xe.Mul(y, _c(x, 3))), y),
    "select(x > y, x, x * y) * y": lambda x, y: xe.Mul(xe.Select(xe.Gt(x, y), x, xe.Mul(x, y)), y),
    # (a raw parameter passed on: tanh reads a denormal as itself, not lazily)
    "tanh(select(x > y, x, x * y))": lambda x, y: xe.Tanh(xe.Select(xe.Gt(x, y), x, xe.Mul(x, y))),
    "-(x * y) * y + abs(x * y - y)": lambda x, y: xe.Add(xe.Mul(xe.Neg(xe.Mul(x, y)), y),
                                                         xe.Abs(xe.Sub(xe.Mul(x, y), y))),
    "min(max(x * y, -y), y * 1e-30) * x": lambda x, y: xe.Mul(xe.Min(xe.Max(xe.Mul(x, y), xe.Neg(y)),
                                                                     xe.Mul(y, _c(x, 1e-30))), x),
    "clamp(-y, x * y, y) - x": lambda x, y: xe.Sub(xe.Clamp(xe.Neg(y), xe.Mul(x, y), y), x),
    "select(x > 0, tanh(x * y), -(x * y)) * y": lambda x, y: xe.Mul(xe.Select(xe.Gt(x, _c(x, 0)), xe.Tanh(xe.Mul(x, y)),
                                                                              xe.Neg(xe.Mul(x, y))), y),
    "tanh(x) + x * y": lambda x, y: xe.Add(xe.Tanh(x), xe.Mul(x, y)),
    "s32(x * 1e6 * y) + 1": lambda x, y: xe.Add(xe.ConvertElementType(xe.Mul(xe.Mul(x, _c(x, 1e6)), y), "s32"),
                                                 np.array(1, np.int32)),
}
F64_BODIES = ("x * y * y - x", "select(x > 0, x * y, y * 3) * y", "select(x > y, x, x * y) * y",
              "-(x * y) * y + abs(x * y - y)", "min(max(x * y, -y), y * 1e-30) * x", "clamp(-y, x * y, y) - x", "(x - y) / sqrt(x * x + 1e-30)", "select(x * y > 1e-38, x * y, -y)",
              "max(x * y, y * 1e-3) + x", "abs(x * y) * 3 + x", "rsqrt(x * y) * y")


def _build(t, shape, body):
    b = xe.XlaBuilder("daz")
    x = xe.Parameter(b, 0, xe.Shape(t, shape), "x")
    y = xe.Parameter(b, 1, xe.Shape(t, shape), "y")
    return b.build(body(x, y))


def _bits(a):
    a = np.asarray(a)
    return a.view({8: np.uint64, 4: np.uint32, 2: np.uint16, 1: np.uint8}[a.dtype.itemsize])


def _same_bits(got, want, msg=""):
    # bits, but a NaN only as a NaN (which NaN operand an op returns is LLVM's operand order)
    g, w = np.asarray(got), np.asarray(want)
    nan = np.isnan(w.astype(np.float64)) if w.dtype.kind == "f" else np.zeros(w.shape, bool)
    if w.dtype.kind == "f":
        assert np.array_equal(np.isnan(g.astype(np.float64)), nan), msg
    np.testing.assert_array_equal(_bits(g)[~nan], _bits(w)[~nan], err_msg=msg)


def _run_both(t, shape, body, x, y, monkeypatch):
    got = {}
    for on in (True, False):
        monkeypatch.setattr(loopgen, "DAZ", on)
        comp = _build(t, shape, body)   # (a new computation: its loop generated again)
        with xe.float_env(denormals="flush"):
            got[on] = comp.run(x, y, backend="numba")
    return got


def _source(t, shape, body):
    comp = _build(t, shape, body)
    with xe.float_env(denormals="flush"):
        groups = [g for g in fusion.fusion_plan(comp.entry).groups if g.kind == "loop"]
        assert len(groups) == 1
        return fused._source(groups[0], (), False)


@x86
@pytest.mark.parametrize("t", ["f32", "f64", "bf16"])
@pytest.mark.parametrize("name", list(BODIES))
def test_a_daz_loop_has_the_bits_of_the_loop_without_it(t, name, monkeypatch):
    if t != "f32" and name not in F64_BODIES:
        pytest.skip("f32 functions")
    v = _values(t)
    a, b = np.meshgrid(v, v, indexing="ij")
    dt = xe.Shape(t, ()).dtype
    x, y = a.astype(np.float32).astype(dt) if t == "bf16" else a.astype(dt), \
        b.astype(np.float32).astype(dt) if t == "bf16" else b.astype(dt)
    got = _run_both(t, x.shape, BODIES[name], x, y, monkeypatch)
    _same_bits(got[True], got[False], name)


@x86
@pytest.mark.parametrize("name", ["gelu", "silu", "x * y * y - x", "tanh(x * y) * y", "(x - y) / sqrt(x * x + 1e-30)"])
@pytest.mark.parametrize("shape", [(300_000,), (100_000, 3), (5, 70_001)])
def test_in_threads_and_over_short_rows(name, shape, monkeypatch):
    """Sizes from ``fused.PARALLEL_THRESHOLD`` up: the ``prange`` loop, its chunks setting the
    mode (rows of three: many work items a chunk), with denormals a third of the values."""
    rng = np.random.default_rng(7)
    scale = np.where(rng.random(shape) < 0.3, 1e-39, 1.0)
    x = (rng.standard_normal(shape) * scale).astype(np.float32)
    y = (rng.standard_normal(shape) * np.where(rng.random(shape) < 0.3, 1e-20, 1.0)).astype(np.float32)
    got = _run_both("f32", shape, BODIES[name], x, y, monkeypatch)
    _same_bits(got[True], got[False], name)


@x86
def test_the_modes_are_taken_where_they_save_a_flush_and_only_there():
    gelu = _source("f32", (4, 4), BODIES["gelu"])
    assert gelu.daz and not gelu.daz_broken
    plain = fused.RowLoopSource(gelu.group)
    assert fused._flushes(gelu) < fused._flushes(plain)
    # of the values per element, the stored result's flush is left (the parameter read, the
    # products before tanh: DAZ's); the constants' (read once a row) stay
    read = re.compile(r"ftz32\(s_in\d+\[j\]\)")
    assert "ftz32(" in gelu.body[-1] and not any(read.search(line) for line in gelu.body), gelu.body
    assert any(read.search(line) for line in plain.body)
    # tanh of a parameter: its rule reads a denormal as itself (tanh(d) = d), which the mode
    # would read as zero
    raw = _source("f32", (4, 4), lambda x, y: xe.Mul(xe.Tanh(x), y))
    assert not raw.daz
    # bf16: its operands read lazily, its values all flushed (its rounding works on bits)
    bf = _source("bf16", (4, 4), BODIES["x * y * y - x"])
    assert bf.daz and all("ftz32(" in line for line in bf.body if line.startswith("t")), bf.body
    # f16, and ops outside the mode's list (a remainder of floats, a sine), never
    for body, t in ((BODIES["x * y * y - x"], "f16"),
                    (lambda x, y: xe.Rem(xe.Mul(x, y), y), "f32"), (lambda x, y: xe.Mul(xe.Sin(x), y), "f32")):
        assert not _source(t, (4, 4), body).daz
    # nothing to leave out (max reads its operands' signs: their flushes stay): the plain loop
    assert not _source("f32", (4, 4), lambda x, y: xe.Max(x, y)).daz
    # x + y: its operands' flushes are the mode's, the stored sum's stays
    add = _source("f32", (4, 4), lambda x, y: xe.Add(x, y))
    assert add.daz and fused._flushes(add) == 1
    # an ieee environment flushes nothing: no mode either
    comp = _build("f32", (4, 4), BODIES["gelu"])
    with xe.float_env(denormals="ieee"):
        g = [g for g in fusion.fusion_plan(comp.entry).groups if g.kind == "loop"][0]
        assert not fused._source(g, (), False).daz


@x86
def test_tanh_of_a_raw_denormal_is_the_denormal_itself():
    """tanh's rule keeps a tiny operand as its value (tanh(d) = d for a denormal d): a loop
    whose tanh reads a raw parameter, through a select, does not take the mode, and stores d."""
    d = np.array([1e-40, -1e-41, 2.0 ** -149, 0.3], np.float32)
    y = np.full_like(d, -1.0)
    comp = _build("f32", d.shape, BODIES["tanh(select(x > y, x, x * y))"])
    with xe.float_env(denormals="flush"):
        got = np.asarray(comp.run(d, y, backend="numba"))
    _same_bits(got[:3], d[:3])
    np.testing.assert_allclose(got[3], np.tanh(np.float32(0.3)), rtol=1e-6)


@x86
def test_the_thread_finds_its_mxcsr_as_it_left_it():
    from numba import njit
    from xla_explorer.executors.cpu.linalg import _mxcsr_or

    @njit
    def mode():
        return _mxcsr_or(0)
    before = mode()
    rng = np.random.default_rng(3)
    for shape in ((64,), (300_000,)):
        x = rng.standard_normal(shape).astype(np.float32)
        comp = _build("f32", shape, BODIES["gelu"])
        with xe.float_env(denormals="flush"):
            comp.run(x, x, backend="numba")
        assert mode() == before
        # and a denormal computed in Python afterwards is still one
        assert np.float32(1e-38) * np.float32(1e-2) != 0


def _daz_functions():
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts", "daz_functions.py")
    spec = importlib.util.spec_from_file_location("daz_functions", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@x86
def test_the_functions_a_daz_loop_calls_keep_their_values_in_it():
    """Every f32 denormal (both signs), every 509th bit pattern, and the patterns around the
    smallest normal and the functions' branch points; all 2^32 by the script."""
    mod = _daz_functions()
    parts = [np.arange(0, 0x00800000, dtype=np.uint32), np.arange(0x80000000, 0x80800000, dtype=np.uint32),
             np.arange(0, 2 ** 32, 509, dtype=np.uint64).astype(np.uint32)]
    for lo in (0x00800000, 0x3F200000, 0x3F800000, 0x42B00000, 0xC2B00000, 0x7F800000, 0xFF800000):
        parts.append(np.arange(lo - 20000, lo + 20000, dtype=np.uint64).astype(np.uint32))
    bits = np.concatenate(parts)
    assert set(mod.FUNCTIONS) >= {"exp_f32", "tanh_f32", "logistic_f32", "log_f32", "log1p_f32"}
    for name in mod.FUNCTIONS:
        bad = mod.differences(name, bits)
        assert bad.size == 0, (name, [hex(int(b)) for b in bad[:5]])
