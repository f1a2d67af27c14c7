"""Integer divide and remainder of 32 bits or fewer, which the Numba loops compute through
f64 (``scalar_lib.int_div_s32`` and friends), against the NumPy reference bit for bit:
every pair of edge values (0, +-1, the extremes, their neighbours) and random pairs of all
magnitudes, in each integer type, serial and parallel loops."""
import zlib

import numpy as np
import pytest

import xla_explorer as xe

pytest.importorskip("numba")

TYPES = ["s8", "s16", "s32", "u8", "u16", "u32", "s64", "u64"]


def _module(t, n, op):
    return xe.parse_hlo(f"""
HloModule m
ENTRY main {{
  a = {t}[{n}] parameter(0)
  b = {t}[{n}] parameter(1)
  ROOT r = {t}[{n}] {op}(a, b)
}}""")


def _values(t, rng):
    info = np.iinfo(("int" if t[0] == "s" else "uint") + t[1:])
    lo, hi = int(info.min), int(info.max)
    edge = sorted({v for v in (0, 1, -1, 2, -2, 3, 7, -7, lo, lo + 1, hi, hi - 1, hi // 2, lo // 2, 255, 256, 65535,
                               65536, 46341, -46341) if lo <= v <= hi})
    a = np.array([x for x in edge for _ in edge], dtype=object)
    b = np.array([y for _ in edge for y in edge], dtype=object)
    # random pairs of all magnitudes: a uniform, b of random bit length
    dt = np.dtype(info.dtype)
    ra = rng.integers(lo, hi, 4000, dtype=dt, endpoint=True)
    bits = rng.integers(0, info.bits, 4000)
    rb = (rng.integers(0, 1 << 62, 4000) >> (62 - bits)).astype(np.uint64).astype(dt)
    if lo < 0:
        rb = np.where(rng.random(4000) < 0.5, rb, -rb).astype(dt)
    return np.concatenate([a.astype(dt), ra]), np.concatenate([b.astype(dt), rb])


@pytest.mark.parametrize("t", TYPES)
@pytest.mark.parametrize("op", ["divide", "remainder"])
def test_int_divide_remainder_matches_reference(t, op):
    rng = np.random.default_rng(zlib.crc32(f"{t} {op}".encode()))
    a, b = _values(t, rng)
    with np.errstate(all="ignore"):
        for reps in (1, 40):            # 40 copies: big enough for the parallel loop
            aa, bb = np.tile(a, reps), np.tile(b, reps)
            m = _module(t, aa.size, op)
            want = m.run(aa, bb, backend="numpy")
            got = m.run(aa, bb, backend="numba")
            assert want.dtype == got.dtype
            bad = np.nonzero(want != got)[0]
            assert bad.size == 0, [(aa[i], bb[i], want[i], got[i]) for i in bad[:5]]


def test_remainder_of_iota_by_a_constant_fused():
    """The benchmark's shape: iota % 7 added to an f32 array, with negative iota values."""
    m = xe.parse_hlo("""
HloModule m
ENTRY main {
  x = f32[3000] parameter(0)
  i = s32[3000] iota(), iota_dimension=0
  o = s32[3000] constant({})
  c = s32[] constant(-1500)
  cb = s32[3000] broadcast(c), dimensions={}
  j = s32[3000] add(i, cb)
  s = s32[] constant(-7)
  sb = s32[3000] broadcast(s), dimensions={}
  r = s32[3000] remainder(j, sb)
  q = s32[3000] divide(j, sb)
  t = s32[3000] add(r, q)
  f = f32[3000] convert(t)
  ROOT y = f32[3000] add(x, f)
}""".replace("  o = s32[3000] constant({})\n", ""))
    x = np.random.default_rng(1).standard_normal(3000).astype(np.float32)
    np.testing.assert_array_equal(m.run(x, backend="numba"), m.run(x, backend="numpy"))
