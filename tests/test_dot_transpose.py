"""A dot whose only reader is a transpose (``fusion.DotTranspose``): one step, the dot
writing the transposed layout (BLAS with swapped operands or a strided output), as XLA
folds the transpose into the dot.  Compared with the NumPy reference within the dot
tests' tolerance (a different BLAS call rounds differently); the first run (the walk)
and the later runs (the run plan) give the same bits; the fold only happens where the
dot's value has no other reader."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import xla_explorer as xe

pytest.importorskip("numba")

from test_numba_reduction_linalg import F32, _args, assert_same, dot_problems, param  # noqa: E402

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _folded(comp):
    return [s.group for s in comp.fusion_plan().steps if s.group is not None and s.group.kind == "dot"]


def _dot_then_transpose(ld, rd, lc, rc, lb, rb, t, pref, perm, extra_reader=False):
    b = xe.XlaBuilder("dot_t")
    d = xe.DotGeneral(param(b, 0, t, ld), param(b, 1, t, rd), lhs_contracting_dimensions=lc,
                      rhs_contracting_dimensions=rc, lhs_batch_dimensions=lb, rhs_batch_dimensions=rb,
                      preferred_element_type=pref)
    out = xe.Transpose(d, perm)
    if extra_reader:
        return b.build(xe.Tuple(out, d))
    return b.build(out)


def _run_three(comp, args):
    """The walk's run and two run-plan runs: the same bits."""
    runs = [comp.run(*args, backend="numba") for _ in range(3)]
    for r in runs[1:]:
        for x, y in zip(runs[0] if isinstance(runs[0], tuple) else (runs[0],), r if isinstance(r, tuple) else (r,)):
            np.testing.assert_array_equal(x, y)
    return runs[0]


@SETTINGS
@given(p=dot_problems(), types=st.sampled_from([(F32, None), ("s8", "s32"), ("bf16", F32), ("bf16", None),
                                                  ("f64", None), ("c64", None)]),
       data=st.data(), seed=st.integers(0, 99))
def test_dot_then_any_transpose(p, types, data, seed):
    ld, rd, lc, rc, lb, rb = p
    t, pref = types
    rank = len(lb) + (len(ld) - len(lc) - len(lb)) + (len(rd) - len(rc) - len(rb))
    perm = data.draw(st.permutations(list(range(rank))))
    comp = _dot_then_transpose(ld, rd, lc, rc, lb, rb, t, pref, perm)
    assert len(_folded(comp)) == 1
    args = _args(np.random.default_rng(seed), comp, low=-100, high=100)
    assert_same(comp.run(*args), _run_three(comp, args))


@pytest.mark.parametrize("lhs,rhs,lc,rc,lb,rb,perm", [
    ((256, 512), (256, 784), [0], [0], [], [], [1, 0]),          # the MLP's gradient x^T g, lowered
    ((33, 65), (65, 17), [1], [0], [], [], [1, 0]),              # odd sizes
    ((1, 7), (7, 5), [1], [0], [], [], [1, 0]),                  # one row
    ((6, 1), (1, 9), [1], [0], [], [], [1, 0]),                  # contracting size 1
    ((3, 40, 50), (3, 50, 30), [2], [1], [0], [0], [0, 2, 1]),   # batched C^T
    ((3, 40, 50), (3, 50, 30), [2], [1], [0], [0], [2, 0, 1]),   # batch in the middle: strided rows
    ((2, 4, 48, 48), (2, 4, 48, 16), [3], [2], [0, 1], [0, 1], [0, 2, 1, 3]),   # attention: [b,h,t,d] -> [b,t,h,d]
    ((2, 4, 48, 48), (2, 4, 48, 16), [3], [2], [0, 1], [0, 1], [1, 3, 0, 2]),   # matrices not BLAS's: copied
    ((5, 6, 7), (7, 4, 3), [2], [0], [], [], [3, 2, 0, 1]),      # free groups of two dimensions, permuted inside
])
def test_dot_transpose_shapes(lhs, rhs, lc, rc, lb, rb, perm):
    comp = _dot_then_transpose(lhs, rhs, lc, rc, lb, rb, F32, None, perm)
    assert len(_folded(comp)) == 1
    assert "written transposed" in str(comp.fusion_plan())
    args = _args(np.random.default_rng(len(lhs) + sum(perm)), comp)
    got = _run_three(comp, args)
    assert got.flags.c_contiguous
    assert_same(comp.run(*args), got, rtol=1e-4)


def test_strided_output_is_written_by_blas_directly():
    """Where the dot's result seen in the transposed layout has BLAS matrices, the kernel
    writes there (no product computed first and copied)."""
    from xla_explorer.executors.cpu import linalg
    rng = np.random.default_rng(3)
    lhs = rng.standard_normal((2, 4, 24, 24), dtype=np.float32)
    rhs = rng.standard_normal((2, 4, 24, 8), dtype=np.float32)
    shape = xe.Shape(F32, (2, 4, 24, 8))
    kw = dict(lhs_contracting_dimensions=[3], rhs_contracting_dimensions=[2], lhs_batch_dimensions=[0, 1],
              rhs_batch_dimensions=[0, 1])
    want = np.transpose(linalg.dot_kernel(lhs, rhs, shape=shape, **kw), (0, 2, 1, 3))
    got = linalg.dot_kernel(lhs, rhs, shape=shape, out_permutation=(0, 2, 1, 3), **kw)
    assert got.shape == (2, 24, 4, 8) and got.flags.c_contiguous
    np.testing.assert_array_equal(got, want)   # the same BLAS call per head, written strided
    # a 2-D C^T = B^T A^T: what NumPy's matmul computes for a transposed output
    a, w = rng.standard_normal((30, 20), dtype=np.float32), rng.standard_normal((20, 10), dtype=np.float32)
    got = linalg.dot_kernel(a, w, shape=xe.Shape(F32, (30, 10)), lhs_contracting_dimensions=[1],
                            rhs_contracting_dimensions=[0], out_permutation=(1, 0))
    np.testing.assert_array_equal(got, np.matmul(w.T, a.T))


def test_no_fold_where_the_dot_has_another_reader_or_is_the_root():
    comp = _dot_then_transpose((4, 5), (5, 6), [1], [0], [], [], F32, None, [1, 0], extra_reader=True)
    assert not _folded(comp)
    args = _args(np.random.default_rng(1), comp)
    assert_same(comp.run(*args), _run_three(comp, args))
    b = xe.XlaBuilder("root")
    comp = b.build(xe.DotGeneral(param(b, 0, F32, (4, 5)), param(b, 1, F32, (5, 6)),
                                 lhs_contracting_dimensions=[1], rhs_contracting_dimensions=[0]))
    assert not _folded(comp)
    with_fuse_off = _dot_then_transpose((4, 5), (5, 6), [1], [0], [], [], F32, None, [1, 0])
    assert not [s for s in with_fuse_off.fusion_plan(fuse=False).steps if s.group is not None]


def test_denormals_flushed_around_the_folded_dot():
    """Flush mode (XLA:CPU's): a denormal operand reads as zero and a denormal product is
    written as zero, as the reference has it; ieee keeps both."""
    tiny = np.float32(1e-39)
    a = np.array([[tiny, 1.0], [2.0, 3.0], [1.0, 1.0]], np.float32)        # [3, 2]
    w = np.array([[1e-3, 1.0, 0.0, 1.0], [0.0, 0.0, 1.0, 1.0]], np.float32)  # [2, 4]
    a[2, 0] = np.float32(2e-36)   # its products with 1e-3: denormal
    comp = _dot_then_transpose(a.shape, w.shape, [1], [0], [], [], F32, None, [1, 0])
    assert _folded(comp)
    for mode in ("flush", "ieee"):
        want = comp.run(a, w, denormals=mode)
        got = [comp.run(a, w, backend="numba", denormals=mode) for _ in range(3)]
        for g in got:
            np.testing.assert_array_equal(g, want)
    assert comp.run(a, w, backend="numba", denormals="flush")[0, 2] == 0
    assert comp.run(a, w, backend="numba", denormals="ieee")[0, 2] != 0


def test_walk_sees_the_dots_value():
    """A run watched value by value (``on_value``) still sees the dot's own value."""
    from xla_explorer.executors import numba_executor
    comp = _dot_then_transpose((3, 4), (4, 5), [1], [0], [], [], F32, None, [1, 0])
    args = _args(np.random.default_rng(2), comp)
    seen = {}
    numba_executor.run(comp, args, on_value=lambda inst, v: seen.__setitem__(inst.opcode, np.array(v)))
    np.testing.assert_array_equal(seen["dot"].T, seen["transpose"])
    assert_same(args[0] @ args[1], seen["dot"])


@SETTINGS
@given(p=dot_problems(), t=st.sampled_from([F32, "f64", "c64"]), transposed=st.booleans(), data=st.data(),
       seed=st.integers(0, 99))
def test_prepared_dot_same_bits_as_the_kernel(p, t, transposed, data, seed):
    """The run plan's prepared dot (``linalg._dot_prepare``) against ``dot_kernel`` on the
    same operands: the same views, copies and BLAS calls, so the same bits; with and
    without an output permutation; a value that is not C-contiguous takes the kernel."""
    from xla_explorer.executors.cpu import linalg
    ld, rd, lc, rc, lb, rb = p
    b = xe.XlaBuilder("pd")
    comp = b.build(xe.DotGeneral(param(b, 0, t, ld), param(b, 1, t, rd), lhs_contracting_dimensions=lc,
                                 rhs_contracting_dimensions=rc, lhs_batch_dimensions=lb, rhs_batch_dimensions=rb))
    shape = comp.entry.root.shape
    perm = tuple(data.draw(st.permutations(list(range(shape.rank))))) if transposed else None
    kw = dict(lhs_contracting_dimensions=lc, rhs_contracting_dimensions=rc, lhs_batch_dimensions=lb,
              rhs_batch_dimensions=rb, out_permutation=perm)
    run = linalg._dot_prepare(comp.parameter_shapes, shape=shape, **kw)
    args = _args(np.random.default_rng(seed), comp)
    if run is None:   # an empty product: the kernel's zeros
        assert 0 in shape.dims or any(ld[d] == 0 for d in lc)
        return
    want = linalg.dot_kernel(*args, shape=shape, **kw)
    got = run(*args)
    assert got.shape == want.shape and got.dtype == want.dtype and got.flags.c_contiguous
    np.testing.assert_array_equal(got, want)
    if args[0].ndim >= 1 and args[0].shape[-1] > 1:   # a strided value: the kernel's path
        x = np.repeat(args[0], 2, axis=-1)[..., ::2]
        np.testing.assert_array_equal(run(x, args[1]), linalg.dot_kernel(x, args[1], shape=shape, **kw))


@pytest.mark.parametrize("mode", ["ieee", "flush"])
@pytest.mark.parametrize("fold", [False, True])
def test_prepared_dot_in_a_run_plan(mode, fold):
    """The plan's dot step (plain, or folded with its transpose) is the prepared function,
    the denormal rule around it in flush mode: walk and plan give the same bits, a denormal
    operand reads as zero and a denormal product is written as zero under flushing."""
    b = xe.XlaBuilder("pplan")
    d = xe.DotGeneral(param(b, 0, F32, (40, 30)), param(b, 1, F32, (40, 20)), lhs_contracting_dimensions=[0],
                      rhs_contracting_dimensions=[0])
    comp = b.build(xe.Transpose(d, [1, 0]) if fold else xe.Add(d, d))
    args = _args(np.random.default_rng(5), comp)
    args[0][3, 4] = np.float32(1e-39)
    args[0][:, 7] = 0
    args[0][0, 7] = np.float32(1e-20)
    args[1][:, 5] = 0
    args[1][0, 5] = np.float32(1e-20)      # column 7 x column 5: one denormal product
    runs = [comp.run(*args, backend="numba", denormals=mode) for _ in range(3)]
    for r in runs[1:]:
        np.testing.assert_array_equal(r, runs[0])
    steps = [fn.__name__ for prog in comp.entry.__dict__["_numba_programs"].values() for fn, *_ in prog.steps]
    assert any(name.startswith("prepared") for name in steps), steps
    want = comp.run(*args, denormals=mode)
    assert_same(want, runs[0], rtol=1e-4)
    product = runs[0][5, 7] if fold else runs[0][7, 5]
    assert (product == 0) == (mode == "flush")
