"""The Numba executor's control-flow steps (``executors/numba_control.py``): a while's,
a call's and a conditional's computations run by their programs directly, and a scan's
stacked results updated in place.  Every result is compared with the steps turned off
(``ENABLED = False``: the walk's code, bit for bit) and with the NumPy reference."""
import numpy as np
import pytest

import xla_explorer as xe
from xla_explorer import progress
from xla_explorer.executors import numba_control

# a scan: ys[i] = tanh(c) * x[i], c += x[i]; the stacked ys updated through a call (JAX's form)
SCAN = """
HloModule scan

cond {
  s = (s32[], f32[N,R], f32[T,N,R], f32[T,N,R]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  t = s32[] constant(T)
  ROOT lt = pred[] compare(i, t), direction=LT
}

upd {
  buf = f32[T,N,R] parameter(0)
  row = f32[N,R] parameter(1)
  k = s32[] parameter(2)
  r3 = f32[1,N,R] reshape(row)
  z = s32[] constant(0)
  ROOT d = f32[T,N,R] dynamic-update-slice(buf, r3, k, z, z)
}

body {
  s = (s32[], f32[N,R], f32[T,N,R], f32[T,N,R]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  c = f32[N,R] get-tuple-element(s), index=1
  ys = f32[T,N,R] get-tuple-element(s), index=2
  xs = f32[T,N,R] get-tuple-element(s), index=3
  z = s32[] constant(0)
  xi3 = f32[1,N,R] dynamic-slice(xs, i, z, z), dynamic_slice_sizes={1,N,R}
  xi = f32[N,R] reshape(xi3)
  th = f32[N,R] tanh(c)
  y = f32[N,R] multiply(th, xi)
  c2 = f32[N,R] add(c, xi)
  ys2 = f32[T,N,R] call(ys, y, i), to_apply=upd
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  ROOT out = (s32[], f32[N,R], f32[T,N,R], f32[T,N,R]) tuple(i2, c2, ys2, xs)
}

ENTRY main {
  c0 = f32[N,R] parameter(0)
  xs = f32[T,N,R] parameter(1)
  i0 = s32[] constant(0)
  zero = f32[] constant(0)
  ys0 = f32[T,N,R] broadcast(zero), dimensions={}
  init = (s32[], f32[N,R], f32[T,N,R], f32[T,N,R]) tuple(i0, c0, ys0, xs)
  w = (s32[], f32[N,R], f32[T,N,R], f32[T,N,R]) while(init), condition=cond, body=body
  ROOT ys = f32[T,N,R] get-tuple-element(w), index=2
}
"""


def _scan(T, N, R, text=SCAN):
    return xe.parse_hlo(text.replace("T,", f"{T},").replace("(T)", f"({T})").replace("N,", f"{N},")
                        .replace("R]", f"{R}]").replace("N]", f"{N}]").replace("R}", f"{R}}}"))


def _runs(make, args, n=4):
    """The numba results of ``n`` runs with the control steps and without, and the reference."""
    out = {}
    for on in (False, True):
        numba_control.ENABLED = on
        try:
            comp = make()
            out[on] = [comp.run(*args, backend="numba") for _ in range(n)]
        finally:
            numba_control.ENABLED = True
    return out[False], out[True], make().run(*args, backend="numpy")


def _same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a.view(np.uint8), b.view(np.uint8))


@pytest.mark.parametrize("T,N,R", [(1, 1, 1), (5, 3, 7), (64, 32, 128), (3, 1, 300)])
def test_scan_stack_updated_in_place_is_the_same(T, N, R):
    rng = np.random.default_rng(T * 1000 + N)
    c0 = rng.standard_normal((N, R), dtype=np.float32)
    xs = rng.standard_normal((T, N, R), dtype=np.float32)
    keep = c0.copy(), xs.copy()
    old, new, ref = _runs(lambda: _scan(T, N, R), (c0, xs))
    for a, b in zip(old, new):
        assert _same_bits(a, b)
    assert _same_bits(new[-1], new[0])   # the constant's broadcast never written
    np.testing.assert_allclose(new[-1], ref, rtol=1e-6, atol=1e-6)
    assert _same_bits(c0, keep[0]) and _same_bits(xs, keep[1])   # the arguments untouched
    comp = _scan(T, N, R)
    assert numba_control.carried_updates(_body(comp), next(c for c in comp.computations if c.name == "cond")) == (2,)


def test_initial_stack_is_an_argument_and_left_alone():
    # the stack's first value the caller's array: never written (the first iteration copies)
    text = SCAN.replace("""  zero = f32[] constant(0)
  ys0 = f32[T,N,R] broadcast(zero), dimensions={}
""", "  ys0 = f32[T,N,R] parameter(2)\n")
    rng = np.random.default_rng(3)
    args = (rng.standard_normal((4, 8), dtype=np.float32), rng.standard_normal((6, 4, 8), dtype=np.float32),
            rng.standard_normal((6, 4, 8), dtype=np.float32))
    keep = [a.copy() for a in args]
    old, new, ref = _runs(lambda: _scan(6, 4, 8, text), args)
    for a, b in zip(old, new):
        assert _same_bits(a, b)
    np.testing.assert_allclose(new[-1], ref, rtol=1e-6, atol=1e-6)
    for a, k in zip(args, keep):
        assert _same_bits(a, k)
    # the result is a new array each run: an earlier run's result is not written by a later one
    assert not any(np.shares_memory(new[0], a) for a in args)


def _body(comp):
    return next(c for c in comp.computations if c.name == "body")


@pytest.mark.parametrize("change", [
    # the old stack also returned: not in place
    ("ROOT out = (s32[], f32[N,R], f32[T,N,R], f32[T,N,R]) tuple(i2, c2, ys2, xs)",
     "ROOT out = (s32[], f32[N,R], f32[T,N,R], f32[T,N,R]) tuple(i2, c2, ys2, ys)"),
    # the old stack read by another op too (its row for the next carry)
    ("  c2 = f32[N,R] add(c, xi)\n",
     "  ysr3 = f32[1,N,R] dynamic-slice(ys, i, z, z), dynamic_slice_sizes={1,N,R}\n"
     "  ysr = f32[N,R] reshape(ysr3)\n  c3 = f32[N,R] add(c, xi)\n  c2 = f32[N,R] add(c3, ysr)\n"),
    # the new stack read again by the body (written into the carry too)
    ("ROOT out = (s32[], f32[N,R], f32[T,N,R], f32[T,N,R]) tuple(i2, c2, ys2, xs)",
     "ROOT out = (s32[], f32[N,R], f32[T,N,R], f32[T,N,R]) tuple(i2, c2, ys2, ys2)"),
    # the condition reads the stack (a memo of the run could know it by its identity)
    ("  ROOT lt = pred[] compare(i, t), direction=LT\n",
     "  ys = f32[T,N,R] get-tuple-element(s), index=2\n"
     "  y0 = f32[1,1,1] slice(ys), slice={[0:1], [0:1], [0:1]}\n  r = f32[] reshape(y0)\n"
     "  big = f32[] constant(1e30)\n  small = pred[] compare(r, big), direction=LT\n"
     "  lt0 = pred[] compare(i, t), direction=LT\n  ROOT lt = pred[] and(lt0, small)\n"),
])
def test_stack_not_in_place_where_the_old_or_new_value_lives_on(change):
    text = SCAN.replace(*change)
    assert change[1] in text
    comp = _scan(5, 2, 3, text)
    assert numba_control.carried_updates(_body(comp), next(c for c in comp.computations if c.name == "cond")) == ()
    rng = np.random.default_rng(5)
    args = (rng.standard_normal((2, 3), dtype=np.float32), rng.standard_normal((5, 2, 3), dtype=np.float32))
    old, new, ref = _runs(lambda: _scan(5, 2, 3, text), args)
    for a, b in zip(old, new):
        assert _same_bits(a, b)
    np.testing.assert_allclose(new[-1], ref, rtol=1e-6, atol=1e-6)


def test_dus_in_the_body_itself_and_a_dtype_of_each_kind():
    for ty, make in (("s32", lambda r, s: r.integers(-9, 9, s).astype(np.int32)),
                     ("f64", lambda r, s: r.standard_normal(s)),
                     ("pred", lambda r, s: r.integers(0, 2, s).astype(bool)),
                     ("f16", lambda r, s: r.standard_normal(s).astype(np.float16))):
        text = f"""
HloModule direct
cond {{
  s = (s32[], {ty}[9,4], {ty}[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  t = s32[] constant(11)
  ROOT lt = pred[] compare(i, t), direction=LT
}}
body {{
  s = (s32[], {ty}[9,4], {ty}[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  ys = {ty}[9,4] get-tuple-element(s), index=1
  v = {ty}[4] get-tuple-element(s), index=2
  r = {ty}[1,4] reshape(v)
  z = s32[] constant(0)
  ys2 = {ty}[9,4] dynamic-update-slice(ys, r, i, z)
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  ROOT out = (s32[], {ty}[9,4], {ty}[4]) tuple(i2, ys2, v)
}}
ENTRY main {{
  ys0 = {ty}[9,4] parameter(0)
  v = {ty}[4] parameter(1)
  i0 = s32[] constant(-3)
  init = (s32[], {ty}[9,4], {ty}[4]) tuple(i0, ys0, v)
  w = (s32[], {ty}[9,4], {ty}[4]) while(init), condition=cond, body=body
  ROOT ys = {ty}[9,4] get-tuple-element(w), index=1
}}
"""
        # (starts from -3 to 10: clamped at both ends, as the kernel clamps them)
        assert numba_control.carried_updates(_body(xe.parse_hlo(text))) == (1,)
        rng = np.random.default_rng(7)
        args = (make(rng, (9, 4)), make(rng, (4,)))
        keep = [a.copy() for a in args]
        old, new, ref = _runs(lambda: xe.parse_hlo(text), args)
        for a, b in zip(old, new):
            assert _same_bits(a, b), ty
        assert _same_bits(new[-1], ref), ty
        for a, k in zip(args, keep):
            assert _same_bits(a, k)


LOOP = """
HloModule loop
inner {
  a = f32[K] parameter(0)
  h = f32[] constant(0.5)
  hb = f32[K] broadcast(h), dimensions={}
  m = f32[K] multiply(a, hb)
  o = f32[] constant(1)
  ob = f32[K] broadcast(o), dimensions={}
  ROOT r = f32[K] add(m, ob)
}
neg {
  a = f32[K] parameter(0)
  ROOT n = f32[K] negate(a)
}
same {
  ROOT a = f32[K] parameter(0)
}
cond {
  s = (s32[], f32[K]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  t = s32[] constant(25)
  ROOT lt = pred[] compare(i, t), direction=LT
}
body {
  s = (s32[], f32[K]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[K] get-tuple-element(s), index=1
  y = f32[K] call(x), to_apply=inner
  two = s32[] constant(2)
  ev = s32[] remainder(i, two)
  zero = s32[] constant(0)
  even = pred[] compare(ev, zero), direction=EQ
  w = f32[K] conditional(even, y, y), true_computation=same, false_computation=neg
  three = s32[] constant(3)
  k = s32[] remainder(i, three)
  km = s32[] subtract(k, three)
  kk = s32[] add(k, k)
  sel = s32[] select(even, kk, km)
  z = f32[K] conditional(sel, w, w, w), branch_computations={neg, same, inner}
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  ROOT out = (s32[], f32[K]) tuple(i2, z)
}
ENTRY main {
  x = f32[K] parameter(0)
  i0 = s32[] constant(0)
  init = (s32[], f32[K]) tuple(i0, x)
  w = (s32[], f32[K]) while(init), condition=cond, body=body
  ROOT r = f32[K] get-tuple-element(w), index=1
}
"""


def _loop(K):
    return xe.parse_hlo(LOOP.replace("[K]", f"[{K}]"))


@pytest.mark.parametrize("K", [1, 7, 4096])
def test_calls_and_conditionals_in_a_loop(K):
    # branch index -3..4 (out of range: the last branch), a pred conditional, a call
    x = np.random.default_rng(K).standard_normal(K, dtype=np.float32)
    old, new, ref = _runs(lambda: _loop(K), (x,))
    for a, b in zip(old, new):
        assert _same_bits(a, b)
    np.testing.assert_allclose(new[-1], ref, rtol=1e-6)


def test_progress_listener_sees_the_nested_runs():
    comp = _scan(6, 2, 3)
    args = (np.ones((2, 3), np.float32), np.ones((6, 2, 3), np.float32))
    want = [comp.run(*args, backend="numba") for _ in range(3)][-1]
    seen = []
    listener = seen.append
    progress.subscribe(listener)
    try:
        got = comp.run(*args, backend="numba")
    finally:
        progress.unsubscribe(listener)
    assert _same_bits(got, want)
    assert seen


def test_size_limit_lowered_after_the_programs_are_built():
    comp = _scan(8, 16, 64)   # the stack: 32 KiB
    args = (np.ones((16, 64), np.float32), np.ones((8, 16, 64), np.float32))
    want = [comp.run(*args, backend="numba") for _ in range(3)][-1]
    old = xe.set_size_limit(16 << 10)
    try:
        with pytest.raises(xe.SizeLimitError):
            comp.run(*args, backend="numba")
    finally:
        xe.set_size_limit(old)
    assert _same_bits(comp.run(*args, backend="numba"), want)


def test_the_in_place_path_is_taken(monkeypatch):
    # (the tests above would pass without it: here its donated operands are counted)
    hits = []
    real = numba_control.in_place_update

    def spy(inst, fn, backend):
        step = real(inst, fn, backend)

        def counted(values, ctx, backend):
            donated = getattr(numba_control._local, "donated", None)
            if donated and any(values[0] is d for d in donated):
                hits.append(inst.name)
            return step(values, ctx, backend)
        return counted
    monkeypatch.setattr(numba_control, "in_place_update", spy)
    from xla_explorer.executors import compiled_scan
    monkeypatch.setattr(compiled_scan, "ENABLED", False)   # (the run program's path: the loop compiled whole has none)
    comp = _scan(7, 3, 5)
    args = (np.ones((3, 5), np.float32), np.ones((7, 3, 5), np.float32))
    for _ in range(3):
        comp.run(*args, backend="numba")
    hits.clear()
    comp.run(*args, backend="numba")
    assert hits == ["d"] * 6   # every iteration but the first


def test_stack_updated_through_a_fusion_as_an_optimised_module_has_it():
    # XLA's optimised scan: the update a loop fusion whose root is the dynamic-update-slice
    text = SCAN.replace("ys2 = f32[T,N,R] call(ys, y, i), to_apply=upd",
                        "ys2 = f32[T,N,R] fusion(ys, y, i), kind=kLoop, calls=upd")
    assert "fusion(ys, y, i)" in text
    assert numba_control.carried_updates(_body(_scan(9, 4, 16, text))) == (2,)
    rng = np.random.default_rng(11)
    args = (rng.standard_normal((4, 16), dtype=np.float32), rng.standard_normal((9, 4, 16), dtype=np.float32))
    keep = [a.copy() for a in args]
    old, new, ref = _runs(lambda: _scan(9, 4, 16, text), args)
    for a, b in zip(old, new):
        assert _same_bits(a, b)
    np.testing.assert_allclose(new[-1], ref, rtol=1e-6, atol=1e-6)
    for a, k in zip(args, keep):
        assert _same_bits(a, k)


@pytest.mark.parametrize("T,N,R", [(5, 3, 7), (9, 1, 1)])
def test_an_in_place_row_clamps_its_start_as_the_kernel(T, N, R):
    """The in-place update of whole trailing dimensions (one block of the flat stack): a start
    below 0 and past the last row clamped as the kernel clamps it (3i - 2: -2, 1, 4, ...)."""
    text = SCAN.replace("  ys2 = f32[T,N,R] call(ys, y, i), to_apply=upd\n",
                        "  three = s32[] constant(3)\n  two = s32[] constant(2)\n"
                        "  i3 = s32[] multiply(i, three)\n  km = s32[] subtract(i3, two)\n"
                        "  ys2 = f32[T,N,R] call(ys, y, km), to_apply=upd\n")
    rng = np.random.default_rng(T)
    args = (rng.standard_normal((N, R), dtype=np.float32), rng.standard_normal((T, N, R), dtype=np.float32))
    old, new, ref = _runs(lambda: _scan(T, N, R, text), args)
    for a, b in zip(old, new):
        assert _same_bits(a, b)
    np.testing.assert_allclose(new[-1], ref, rtol=1e-6, atol=1e-6)
