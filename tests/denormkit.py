"""Programs on operands with denormals, XLA:CPU's results for them (jax.jit, operands passed at
run time so that XLA flushes them as a program would) and the comparison (used by
tests/test_fidelity.py and scripts/denormals_vs_xla.py)."""
import numpy as np





def discrete_values(dtype, n, rng):
    """n random values of a pred or integer ``dtype`` over its whole range (numpy dtype), or
    None for other types (the caller makes its own floats)."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, n).astype(np.bool_)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, n, endpoint=True).astype(dtype)
    return None


def values(t):
    """A vector of type ``t`` (f32, f64, bf16, c64, c128): denormals of both signs among zeros,
    the smallest normals, ordinary numbers, Inf and NaN."""
    import ml_dtypes
    real = {"f32": np.float32, "f64": np.float64, "bf16": ml_dtypes.bfloat16, "c64": np.float32,
            "c128": np.float64}[t]
    fi = np.finfo(np.float32 if t in ("f32", "bf16", "c64") else np.float64)
    d = float(fi.smallest_subnormal) if t != "bf16" else 2.0 ** -133
    tiny = float(fi.tiny)
    v = [d, 3 * d, tiny / 2, tiny - d, tiny, 0.0, 1.0, 2.5, 1e-3, 100.0, np.inf, np.nan]
    v = v + [-x for x in v[:-1]]
    v = np.array(v, np.float64).astype(real)
    if t in ("c64", "c128"):
        re, im = np.meshgrid(v, v[[0, 1, 4, 5, 6, 12, 17, 21]])
        c = np.empty(re.shape, np.complex64 if t == "c64" else np.complex128)
        c.real, c.imag = re, im
        return c.ravel()
    return v


def pairs(t):
    """Every pair of ``values(t)``: two flat operands."""
    v = values(t)
    if v.size > 64:
        v = v[::3]
    a, b = np.meshgrid(v, v)
    return a.ravel(), b.ravel()


def run_xla(f, *args):
    import jax
    # 64-bit for this call only (f64/c128 operands): a global switch would leak into every
    # later test's JAX program in the session.
    with jax.enable_x64(True):
        jf = jax.jit(f)
        out = np.asarray(jf(*args))
        return out, jf.lower(*args).as_text(dialect="hlo")


def same(got, want, ulps=4):
    """Per element: equal bits, both NaN, or (for results that are normal numbers in both)
    within ``ulps`` units in the last place -- XLA's polynomial approximations of exp, log, ...
    are not NumPy's; a zero's sign and a denormal's flushing must match exactly."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return np.zeros(want.shape, bool)
    if want.dtype.kind == "c":
        return same(got.real, want.real, ulps) & same(got.imag, want.imag, ulps)
    if want.dtype.kind in "biu":
        return got == want
    g, w = got.astype(np.float64), want.astype(np.float64)
    eq = (np.isnan(g) & np.isnan(w)) | ((g == w) & (np.signbit(g) == np.signbit(w)))
    eps = {2: 2.0 ** -7, 4: 2.0 ** -23, 8: 2.0 ** -52}[want.dtype.itemsize]
    if want.dtype.itemsize == 2 and want.dtype.name != "bfloat16":
        eps = 2.0 ** -10
    tiny = {2: 2.0 ** -126, 4: 2.0 ** -126, 8: 2.0 ** -1022}[want.dtype.itemsize]
    normal = (np.abs(w) >= tiny) & (np.abs(g) >= tiny) & np.isfinite(w) & np.isfinite(g)
    with np.errstate(all="ignore"):
        close = normal & (np.abs(g - w) <= ulps * eps * np.abs(w))
    return eq | close


REAL, COMPLEX = ("f32", "f64", "bf16"), ("c64", "c128")


def ops():
    """name -> (types, arity, function of jax arrays)."""
    import jax.numpy as jnp
    from jax import lax
    unary = {"abs": lax.abs, "neg": lax.neg, "sign": lax.sign, "floor": lax.floor, "ceil": lax.ceil,
             "round": lax.round, "exp": lax.exp, "expm1": lax.expm1, "log": lax.log, "log1p": lax.log1p,
             "sqrt": lax.sqrt, "rsqrt": lax.rsqrt, "cbrt": lax.cbrt, "sin": lax.sin, "cos": lax.cos,
             "tan": lax.tan, "tanh": lax.tanh, "logistic": lax.logistic, "erf": lax.erf, "atan": lax.atan,
             "is_finite": lax.is_finite}
    complex_unary = ("abs", "neg", "sign", "exp", "expm1", "log", "log1p", "sqrt", "rsqrt", "sin", "cos",
                     "tan", "tanh", "logistic")
    binary = {"add": lax.add, "sub": lax.sub, "mul": lax.mul, "div": lax.div, "rem": lax.rem, "max": lax.max,
              "min": lax.min, "pow": lax.pow, "atan2": lax.atan2, "nextafter": lax.nextafter,
              "eq": lax.eq, "lt": lax.lt, "ge": lax.ge, "ne": lax.ne}
    complex_binary = ("add", "sub", "mul", "div", "pow", "eq", "ne")
    table = {}
    for name, f in unary.items():
        table[name] = (REAL + (COMPLEX if name in complex_unary else ()), 1, f)
    for name, f in binary.items():
        table[name] = (REAL + (COMPLEX if name in complex_binary else ()), 2, f)
    table["to_f64"] = (("f32",), 1, lambda x: x.astype(jnp.float64))
    table["to_f32"] = (("f64", "bf16"), 1, lambda x: x.astype(jnp.float32))
    table["to_bf16"] = (("f32",), 1, lambda x: x.astype(jnp.bfloat16))
    table["to_s32"] = (REAL, 1, lambda x: x.astype(jnp.int32))
    # compares with constants (LLVM may rewrite them into tests on the bits)
    table["lt_tiny_const"] = (REAL, 1, lambda x: x < jnp.asarray(np.finfo(np.float32).tiny / 4, x.dtype))
    table["eq_zero_const"] = (REAL, 1, lambda x: x == jnp.zeros((), x.dtype))
    table["gt_zero_const"] = (REAL, 1, lambda x: x > jnp.zeros((), x.dtype))
    # orders, reductions, scans
    table["sort"] = (REAL, 1, lambda x: lax.sort(x))
    table["argsort"] = (REAL, 1, lambda x: lax.sort((x, lax.iota(np.int32, x.shape[0])), num_keys=1)[1])
    table["reduce_sum"] = (REAL + COMPLEX, 1, lambda x: jnp.sum(jnp.broadcast_to(x[:, None], (x.shape[0], 3)), 0))
    # x + y, then - x: the partial sum x + y is a denormal for some pairs (flushed by XLA)
    table["sum_pairs"] = (REAL, 2, lambda x, y: jnp.sum(jnp.stack([x, y, -x]), 0))
    table["reduce_max"] = (REAL, 1, lambda x: jnp.max(x))
    table["reduce_prod"] = (REAL, 1, lambda x: jnp.prod(jnp.stack([x, jnp.full_like(x, 0.5)]), 0))
    table["cumsum"] = (REAL, 1, lambda x: jnp.cumsum(x))
    table["dot"] = (REAL + COMPLEX, 2, lambda x, y: x * 0 + jnp.dot(x[:8], y[:8]))
    return table
