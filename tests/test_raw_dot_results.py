"""Under flushing (``fpenv`` "flush"), a dot's result whose every reader flushes it as it
reads it is left unscanned (``numba_executor._leave_raw``): read only by fused loops that
flush it (the lowered HLO), across a fusion's boundary (the optimised HLO: a dot fusion's
root read by fusions whose loops flush their parameter).  Whatever reads it raw -- a
slice, a select, the result, a tuple -- keeps the scan.  The bits are those of the scanned
runs and of the unfused walk, no output holds a denormal, and "ieee" is unchanged."""
import numpy as np
import pytest

import xla_explorer as xe

pytest.importorskip("numba")
jax = pytest.importorskip("jax")
jnp = jax.numpy

from xla_explorer.executors import numba_executor  # noqa: E402

F32 = np.float32
TINY = np.finfo(F32).tiny


def _bits(a):
    a = np.asarray(a)
    return a.view(f"u{a.dtype.itemsize}") if a.dtype.kind == "f" else a


def _operands(n=40, k=24, m=33, seed=3):
    """x @ w whose products are denormal (1e-20 * 1e-20 ~ 1e-40) in most entries, a few
    normal; a bias of zeros and small normals (so x @ w + b keeps denormals of the dot
    where the bias is 0, unless the dot's result or its reader flushes)."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((n, k)) * 1e-20).astype(F32)
    w = (rng.standard_normal((k, m)) * 1e-20).astype(F32)
    x[0, :] = rng.standard_normal(k).astype(F32)   # row 0's results normal
    w[:, 0] = rng.standard_normal(k).astype(F32) * 1e19
    b = np.zeros(m, F32)
    b[::5] = F32(1e-3)
    c = rng.standard_normal((n, m)).astype(F32)
    d = np.matmul(x, w)
    assert np.any((d != 0) & (np.abs(d) < TINY)), "the dot must produce denormals"
    return x, w, b, c


def relu_bias(x, w, b, c):
    return jax.nn.relu(x @ w + b)


def bias_and_slice(x, w, b, c):   # a slice reads the dot raw
    d = x @ w
    return d + b, d[:, :3]


def returned_and_read(x, w, b, c):   # the dot is a result
    d = x @ w
    return d, d * 2.0 + b


def selected(x, w, b, c):   # a select passes the dot's value on unflushed
    return jnp.where(c > 0, x @ w, 0.0) + b


def grad_like(x, w, b, c):   # x^T (...) read by a subtract (an SGD update)
    d = x @ w
    return w - 0.5 * (x.T @ (d + b)), d.sum()


def exp_of(x, w, b, c):   # an exp reads it (denormal-blind: its operand not flushed)
    return jnp.exp(x @ w) + b


def broadcast_then_add(x, w, b, c):   # sliced; broadcast by a loop of its own (passed on raw: scanned)
    d = (x @ w)[:, :1]   # (a dot of one column)
    return d * 0.5 + b, jnp.broadcast_to(x[:, :1] @ w[:1, :1], c.shape) * 2.0 + c


def softmax_of(x, w, b, c):   # a max reduce and x - max (read raw, or a sum before exp)
    return jax.nn.softmax(x @ w + 0.0 * b, axis=-1), jax.nn.softmax(x @ w, axis=-1)


CASES = [relu_bias, bias_and_slice, returned_and_read, selected, grad_like, exp_of, broadcast_then_add,
         softmax_of]


def _runs(f, args, optimized, leave_raw, monkeypatch, runs=3):
    monkeypatch.setattr(numba_executor, "_LEAVE_RAW", leave_raw)
    comp = xe.from_jax(f, *args, optimized=optimized)
    outs = [comp.run(*args, backend="numba") for _ in range(runs)]   # the walk, then the program
    return comp, outs


def _raw_decisions(comp):
    got = {}
    for c in comp.computations:
        plan = getattr(c, "_fusion_plan", None)
        if plan:
            got.update({i.name: v for i, v in plan[1].__dict__.get("_leave_raw", {}).items()})
    return got


@pytest.mark.parametrize("optimized", [False, True], ids=["lowered", "optimized"])
@pytest.mark.parametrize("f", CASES, ids=lambda f: f.__name__)
def test_bits_as_scanned_and_no_denormal_seen(f, optimized, monkeypatch):
    args = _operands()
    with xe.float_env(denormals="flush"):
        _, old = _runs(f, args, optimized, False, monkeypatch)
        comp, new = _runs(f, args, optimized, True, monkeypatch)
        unfused = xe.from_jax(f, *args, optimized=optimized).run(*args, backend="numba", fuse=False)
        want = xe.from_jax(f, *args, optimized=optimized).run(*args)   # the reference
    for run in new + old[1:]:
        for a, o, u, r in zip(jax.tree_util.tree_leaves(run), jax.tree_util.tree_leaves(old[0]),
                              jax.tree_util.tree_leaves(unfused), jax.tree_util.tree_leaves(want)):
            np.testing.assert_array_equal(_bits(a), _bits(o))
            np.testing.assert_array_equal(_bits(a), _bits(u))
            a, r = np.asarray(a), np.asarray(r)
            assert not np.any((a != 0) & (np.abs(a) < TINY)), "a denormal seen"
            np.testing.assert_allclose(a, r, rtol=1e-5, atol=1e-6 * float(np.abs(r[np.isfinite(r)]).max(initial=0)))
    decided = _raw_decisions(comp)
    if not optimized:
        dots = {k: v for k, v in decided.items() if k.startswith(("dot", "transpose"))}
        if f in (relu_bias,):
            assert dots and all(dots.values()), decided   # read by its flushing loop only
        if f in (bias_and_slice, returned_and_read, selected):
            assert dots and not any(dots.values()), decided
    elif f is relu_bias:
        assert any(decided.values()), decided   # the dot fusion's root, across the boundary


def test_raw_dot_not_scanned_its_readers_flush(monkeypatch):
    """The lowered relu(x @ w + b): the dot's result is scanned with the switch off, not
    with it on (the add's loop flushes it), the same bits."""
    from xla_explorer.executors.cpu import elementwise
    x, w, b, c = _operands(n=300, k=16, m=260)   # 78000 elements: the scan's a real pass
    scanned = []
    real = elementwise.flush_denormals
    monkeypatch.setattr(elementwise, "flush_denormals", lambda v: scanned.append(np.shape(v)) or real(v))
    got = {}
    with xe.float_env(denormals="flush"):
        for leave_raw in (False, True):
            monkeypatch.setattr(numba_executor, "_LEAVE_RAW", leave_raw)
            comp = xe.from_jax(relu_bias, x, w, b, c)
            comp.run(x, w, b, c, backend="numba")
            del scanned[:]
            got[leave_raw] = comp.run(x, w, b, c, backend="numba")
            assert scanned.count((300, 260)) == (0 if leave_raw else 1), scanned
    np.testing.assert_array_equal(_bits(got[True]), _bits(got[False]))


@pytest.mark.parametrize("optimized", [False, True], ids=["lowered", "optimized"])
def test_ieee_unchanged(optimized, monkeypatch):
    args = _operands()
    with xe.float_env(denormals="ieee"):
        _, old = _runs(returned_and_read, args, optimized, False, monkeypatch)
        comp, new = _runs(relu_bias, args, optimized, True, monkeypatch)
        _, new2 = _runs(returned_and_read, args, optimized, True, monkeypatch)
        _, old2 = _runs(relu_bias, args, optimized, False, monkeypatch)
    assert not any(_raw_decisions(comp).values())
    for a, b in ((old, new2), (old2, new)):
        for r1, r2 in zip(a, b):
            for u, v in zip(jax.tree_util.tree_leaves(r1), jax.tree_util.tree_leaves(r2)):
                np.testing.assert_array_equal(_bits(u), _bits(v))
    d = np.asarray(old[-1][0])
    assert np.any((d != 0) & (np.abs(d) < TINY))   # ieee keeps the dot's denormals


@pytest.mark.parametrize("optimized", [False, True], ids=["lowered", "optimized"])
def test_a_watched_run_sees_the_dot_flushed(optimized, monkeypatch):
    """A run whose values are watched (``on_value``) sees every value as flushing makes it:
    the dot's too (not left raw there), after runs that left it raw; the same bits."""
    args = _operands()
    monkeypatch.setattr(numba_executor, "_LEAVE_RAW", True)
    with xe.float_env(denormals="flush"):
        comp = xe.from_jax(relu_bias, *args, optimized=optimized)
        plain = [comp.run(*args, backend="numba") for _ in range(2)]
        seen = []
        watched = comp.run(*args, backend="numba", on_value=lambda inst, v: seen.append((inst.name, np.array(v))))
        after = comp.run(*args, backend="numba")
    assert any(_raw_decisions(comp).values())
    assert seen
    for name, v in seen:
        if v.dtype == F32:
            assert not np.any((v != 0) & (np.abs(v) < TINY)), name
    for r in plain + [after]:
        np.testing.assert_array_equal(_bits(r), _bits(watched))
