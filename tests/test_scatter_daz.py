"""f32 / f64 scatter-adds under flushing run in the processor's denormals-are-zero mode
(``cpu.indexing._DAZ_ADD``): a plain add per update, the stored results scanned after the
kernel and the scatter run again with the flushing code where one is denormal.  Every
result must have the bits of the flushing code (the switch off) and of the reference:
sums that fall below the normal range and are added to again, sums left denormal at the
end, denormal updates, an operand's own denormals where no update lands, signed zeros,
windows of rows (the parallel kernel), and the IEEE environment (no DAZ there)."""
import numpy as np
import pytest

import xla_explorer as xe

pytest.importorskip("numba")

from xla_explorer import fpenv  # noqa: E402
from xla_explorer.executors.cpu import indexing  # noqa: E402

ADD = """
HloModule scatter_add
add {{
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  ROOT s = {t}[] add(a, b)
}}
ENTRY main {{
  x = {t}[{n}{row}] parameter(0)
  i = s32[{m},1] parameter(1)
  u = {t}[{m}{row}] parameter(2)
  ROOT r = {t}[{n}{row}] scatter(x, i, u), update_window_dims={{{wdims}}}, inserted_window_dims={{0}}, scatter_dims_to_operand_dims={{0}}, index_vector_dim=1, to_apply=add
}}
"""


def _module(t, n, m, row=None):
    return xe.parse_hlo(ADD.format(t=t, n=n, m=m, row="" if row is None else f",{row}",
                                   wdims="" if row is None else "1"))


def _bits(a):
    a = np.asarray(a)
    return a.dtype, a.shape, a.reshape(-1).view(np.uint8).tobytes()


def _check(t, x, i, u, row=None, mode="flush"):
    """The numba results (both runs: the walk and the program) against the flushing code's
    and the reference's bits."""
    n, m = x.shape[0], u.shape[0]
    args = (x, i.reshape(m, 1).astype(np.int32), u)
    with fpenv.float_env(denormals=mode):
        indexing.DAZ_ADD = False
        try:
            plain = _module(t, n, m, row)
            base = [plain.run(*args, backend="numba") for _ in range(2)][-1]
        finally:
            indexing.DAZ_ADD = True
        comp = _module(t, n, m, row)
        want = comp.run(*args, backend="numpy")
        for _ in range(2):
            got = comp.run(*args, backend="numba")
            assert _bits(got) == _bits(base)
            assert _bits(got) == _bits(want)
    return got


def _tiny(t):
    return float(np.finfo(np.float32 if t == "f32" else np.float64).tiny)


def _dt(t):
    return np.float32 if t == "f32" else np.float64


@pytest.mark.parametrize("t", ["f32", "f64"])
@pytest.mark.parametrize("n", [1000, 1 << 16])
def test_random_adds_have_the_flushing_codes_bits(t, n):
    rng = np.random.default_rng(n)
    m = 1 << 17
    x = rng.standard_normal(n).astype(_dt(t))
    u = rng.standard_normal(m).astype(_dt(t))
    i = rng.integers(-2, n + 2, m)   # (some out of bounds: skipped)
    _check(t, x, i, u)


@pytest.mark.parametrize("t", ["f32", "f64"])
def test_sums_below_the_normal_range(t):
    tiny, dt = _tiny(t), _dt(t)
    x = np.array([1.5 * tiny, 1.5 * tiny, -1.25 * tiny, 0.0, -0.0, 3.0, tiny / 4, 1.0], dt)
    # element 0: 1.5t - t = 0.5t (flushed to 0), then + t: t.  Element 1: left at 0.5t, a
    # denormal at the end (flushed: 0).  Element 2: -1.25t + t = -0.25t -> -0.  Element 3:
    # + a denormal update (read as 0).  Element 4: -0 + -denormal = -0.  Element 5: 3 + -3.
    # Element 6: an operand's denormal no update reaches (its bits kept).  7: plain.
    i = np.array([0, 0, 1, 2, 3, 4, 5, 7, 7])
    u = np.array([-tiny, tiny, -tiny, tiny, tiny / 8, -tiny / 8, -3.0, 0.5, 0.25], dt)
    got = _check(t, x, i, u)
    assert got[0] == tiny and got[1] == 0 and np.signbit(got[2]) and got[2] == 0
    assert got[6] == dt(tiny / 4)   # untouched: the operand's own bits


@pytest.mark.parametrize("t", ["f32", "f64"])
def test_an_intermediate_denormal_is_read_as_zero_and_no_rerun_is_needed(t, monkeypatch):
    tiny, dt = _tiny(t), _dt(t)
    x = np.array([1.5 * tiny, 2.0], dt)
    i = np.array([0, 0, 1])
    u = np.array([-tiny, tiny, 1.0], dt)   # 0.5t (denormal, read as 0 next), then t
    reruns = []
    real = indexing._flushed_rerun
    monkeypatch.setattr(indexing, "_flushed_rerun", lambda out: reruns.append(real(out)) or reruns[-1])
    got = _check(t, x, i, u)
    assert got[0] == tiny and got[1] == 3.0
    assert reruns and not any(reruns)   # the DAZ kernel's result was the answer


@pytest.mark.parametrize("t", ["f32", "f64"])
def test_windows_of_rows_in_threads(t):
    rng = np.random.default_rng(7)
    tiny, dt = _tiny(t), _dt(t)
    n, m, row = 64, 4096, 96
    x = rng.standard_normal((n, row)).astype(dt)
    u = rng.standard_normal((m, row)).astype(dt)
    x[3, :8] = 1.5 * tiny
    u[:4, :8] = -tiny                     # sums into the denormal range, and back out
    i = rng.integers(0, n, m)
    i[:4] = 3
    _check(t, x, i, u, row=row)


def test_the_ieee_environment_keeps_denormals():
    tiny = _tiny("f32")
    x = np.array([1.5 * tiny, 1.0], np.float32)
    got = _check("f32", x, np.array([0, 1]), np.array([-tiny, 1.0], np.float32), mode="ieee")
    assert got[0] == np.float32(0.5 * tiny)
