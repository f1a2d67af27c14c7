"""Under flushing, a dot's large operand to flush is scanned for denormals while the
product runs on it as it is (``linalg._flushed_dot``: the scans among the product's parts
in one ``in_threads`` launch), the product computed again from the flushed operand when a
scan finds a denormal.  The results are bit for bit those of the previous way (the operand
flushed first, then the product: ``_CONCURRENT_SCAN_BYTES`` set out of reach), for clean
operands and for operands with one denormal anywhere, in every layout the kernel takes
(matrix-vector, vector-matrix, batched, transposed operands and results, non-contiguous
operands), every flushed type, and in one thread."""
import numpy as np
import pytest

import xla_explorer as xe

pytest.importorskip("numba")
jax = pytest.importorskip("jax")
jnp = jax.numpy

from xla_explorer import fpenv  # noqa: E402
from xla_explorer.executors.cpu import linalg, reduction  # noqa: E402

DENORMAL = {np.float32: np.float32(1e-40), np.float64: np.float64(1e-310)}


def _bits(a):
    a = np.asarray(a)
    return a.view(np.uint8)


@pytest.fixture
def threshold(monkeypatch):
    """Run a program both ways: ``go(comp, args)`` -> (new result, old result)."""
    def go(comp, args):
        monkeypatch.setattr(linalg, "_CONCURRENT_SCAN_BYTES", 1 << 12)
        new = comp.run(*args, backend="numba")
        monkeypatch.setattr(linalg, "_CONCURRENT_SCAN_BYTES", 1 << 62)
        old = comp.run(*args, backend="numba")
        monkeypatch.setattr(linalg, "_CONCURRENT_SCAN_BYTES", 1 << 12)
        return new, old
    return go


def _with_denormal(x, where, value):
    x = np.array(x)
    x.reshape(-1)[where] = value
    return x


CASES = {
    "matrix-vector": (lambda a, v: a @ v, [(301, 257), (257,)]),
    "vector-matrix": (lambda v, a: v @ a, [(1, 129), (129, 255)]),
    "matrix-matrix": (lambda a, b: a @ b, [(97, 64), (64, 33)]),
    "big rows split": (lambda a, b: a @ b, [(400, 128), (128, 96)]),       # >= _SPLIT_WORK: the row parts
    "batched": (lambda a, b: jnp.einsum("bij,bjk->bik", a, b), [(6, 33, 40), (6, 40, 17)]),
    "big batched": (lambda a, b: jnp.einsum("bij,bjk->bik", a, b), [(8, 96, 96), (8, 96, 96)]),
    "transposed operand": (lambda a, v: a.T @ v, [(129, 300), (129,)]),
    "transposed result": (lambda a, b: (a @ b).T, [(70, 50), (50, 90)]),
    "sliced operand": (lambda a, v: a[:, 1:] @ v, [(200, 65), (64,)]),
    "attention-like": (lambda q, k: jnp.einsum("bthd,bshd->bhts", q, k), [(2, 31, 3, 16), (2, 29, 3, 16)]),
}


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("case", sorted(CASES))
def test_bits_as_before(case, dt, threshold):
    f, shapes = CASES[case]
    rng = np.random.default_rng(len(case))
    args = [rng.standard_normal(s).astype(dt) for s in shapes]
    with jax.enable_x64(dt == np.float64):
        comp = xe.from_jax(f, *args)
    new, old = threshold(comp, args)
    assert _bits(new).tobytes() == _bits(old).tobytes()
    ref = comp.run(*args, backend="numpy")
    np.testing.assert_allclose(np.asarray(new), np.asarray(ref), rtol=1e-4 if dt == np.float32 else 1e-12,
                               atol=1e-4 if dt == np.float32 else 1e-12)
    # a denormal in either operand (zeros elsewhere), near the start, last or inside, the other
    # operand huge: found, the product computed again from the flushed operand -- zeros,
    # the old bits, where the raw product holds 1e-40 * 1e30 = 1e-10
    big = 1e30 if dt == np.float32 else 1e300
    for i in range(len(args)):
        for where in (1, -1, args[i].size // 2 + 1):   # (the sliced case drops column 0)
            bad = [np.full_like(args[1 - i], big)] * 2
            bad[i] = _with_denormal(np.zeros_like(args[i]), where, DENORMAL[dt])
            new, old = threshold(comp, bad)
            assert _bits(new).tobytes() == _bits(old).tobytes(), (i, where)
            assert not np.any(np.asarray(new)), (i, where)
            with fpenv.float_env("ieee"):   # (the test would catch a product left unflushed)
                assert np.any(np.asarray(comp.run(*bad, backend="numba")))


@pytest.mark.parametrize("t", ["c64", "bf16"])
def test_other_flushed_types(t, threshold):
    import ml_dtypes
    rng = np.random.default_rng(5)
    if t == "c64":
        a = (rng.standard_normal((130, 70)) + 1j * rng.standard_normal((130, 70))).astype(np.complex64)
        v = (rng.standard_normal(70) + 1j * rng.standard_normal(70)).astype(np.complex64)
        tiny = np.complex64(1e-40 + 1j)
    else:
        a = rng.standard_normal((300, 70)).astype(ml_dtypes.bfloat16)
        v = rng.standard_normal(70).astype(ml_dtypes.bfloat16)
        tiny = np.array(2.0 ** -130, np.float32).astype(ml_dtypes.bfloat16)
    comp = xe.from_jax(lambda a, v: a @ v, a, v)
    new, old = threshold(comp, [a, v])
    assert _bits(new).tobytes() == _bits(old).tobytes()
    bad = _with_denormal(np.zeros_like(a), 7, tiny)
    big = np.full_like(v, 1e30)
    new, old = threshold(comp, [bad, big])
    assert _bits(new).tobytes() == _bits(old).tobytes()
    with fpenv.float_env("ieee"):
        raw = comp.run(bad, big, backend="numba")
    assert not np.array_equal(_bits(new), _bits(raw))


def test_one_thread_and_ieee(threshold, monkeypatch):
    rng = np.random.default_rng(2)
    a, v = rng.standard_normal((500, 300)).astype(np.float32), rng.standard_normal(300).astype(np.float32)
    a[3, 4] = np.float32(1e-40)
    comp = xe.from_jax(lambda a, v: a @ v, a, v)
    monkeypatch.setattr(linalg, "threads", lambda: 1)
    new, old = threshold(comp, [a, v])
    assert _bits(new).tobytes() == _bits(old).tobytes()
    monkeypatch.undo()
    with fpenv.float_env("ieee"):
        new, old = threshold(comp, [a, v])
        assert _bits(new).tobytes() == _bits(old).tobytes()


def test_flushed_dot_directly(monkeypatch):
    """``dot_kernel(flush=...)`` and its prepared function, outside a run: the kernel's
    result is the product of the flushed operands; a clean scanned operand is remembered
    for the run (``reduction.known_clean``) and not scanned again."""
    from xla_explorer.shapes import Shape
    monkeypatch.setattr(linalg, "_CONCURRENT_SCAN_BYTES", 1 << 12)
    # (BLAS's path: a matrix-vector product this size runs ``_matvec`` otherwise, its own
    # sums, tests/test_numba_matvec.py)
    monkeypatch.setattr(linalg, "_MATVEC_MIN", 1 << 62)
    rng = np.random.default_rng(4)
    a, v = rng.standard_normal((512, 128)).astype(np.float32), rng.standard_normal(128).astype(np.float32)
    assert a.size >= reduction._SCAN_MEMO_MIN
    shape = Shape.of(np.empty(512, np.float32))
    kw = dict(shape=shape, lhs_contracting_dimensions=(1,), rhs_contracting_dimensions=(0,))
    run = linalg._dot_prepare([Shape.of(a), Shape.of(v)], flush=(True, True), **kw)
    for fn in (lambda x, y: linalg.dot_kernel(x, y, flush=(True, True), **kw), run):
        np.testing.assert_array_equal(_bits(fn(a, v)), _bits(np.matmul(a, v)))
        bad = _with_denormal(a, 100, np.float32(-1e-40))
        np.testing.assert_array_equal(_bits(fn(bad, v)), _bits(np.matmul(_with_denormal(a, 100, 0), v)))
    prev = reduction.begin_run()
    try:
        assert not reduction.known_clean(a)
        run(a, v)
        assert reduction.known_clean(a)
        scans = []
        monkeypatch.setattr(linalg, "_Scans", lambda arrays: scans.append(arrays))
        run(a, v)
        assert scans == []
    finally:
        reduction.end_run(prev)


def test_the_unfused_walk(monkeypatch):
    """The walk's ``_call_kernel`` (``fuse=False``) hands the mask to the kernel too."""
    rng = np.random.default_rng(6)
    a, v = rng.standard_normal((300, 200)).astype(np.float32), rng.standard_normal(200).astype(np.float32)
    comp = xe.from_jax(lambda a, v: a @ v, a, v)
    bad = _with_denormal(np.zeros_like(a), 4321, np.float32(1e-40))
    big = np.full_like(v, 1e30)
    for x, y in ((a, v), (bad, big)):
        monkeypatch.setattr(linalg, "_CONCURRENT_SCAN_BYTES", 1 << 12)
        new = comp.run(x, y, backend="numba", fuse=False)
        monkeypatch.setattr(linalg, "_CONCURRENT_SCAN_BYTES", 1 << 62)
        old = comp.run(x, y, backend="numba", fuse=False)
        assert _bits(new).tobytes() == _bits(old).tobytes()
    assert not np.any(new)
