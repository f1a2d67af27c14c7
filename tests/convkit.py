"""Generated convolutions with Inf and NaN inputs, XLA:CPU's results for them (jax.jit) and
the comparison (used by tests/test_fidelity.py and scripts/conv_specials_vs_xla.py)."""
import numpy as np

TYPES = {"f32": np.float32, "f64": np.float64, "f16": np.float16}


def _dtype(t):
    if t == "bf16":
        import ml_dtypes
        return ml_dtypes.bfloat16
    return TYPES[t]


def case(seed, lhs_dilation=None):
    """A random convolution: (element type, kwargs of lax.conv_general_dilated, lhs, rhs),
    operands of small integers with a few Inf, -Inf and NaN;
    ``lhs_dilation=True`` forces some lhs dilation above 1, ``False`` none."""
    rng = np.random.default_rng(seed)
    n = int(rng.choice([1, 1, 2, 2, 2, 3]))
    t = str(rng.choice(["f32"] * 6 + ["f64", "f16", "bf16"]))
    fgc = bgc = 1
    r = rng.random()
    if r < 0.15:
        fgc = int(rng.integers(2, 4))
    elif r < 0.25:
        bgc = int(rng.integers(2, 4))
    B = int(rng.integers(1, 3)) * bgc
    I = int(rng.integers(1, 3))
    F = I * fgc
    O = int(rng.integers(1, 3)) * fgc * bgc
    ld = [int(rng.choice([1, 1, 2, 3])) for _ in range(n)]
    if lhs_dilation is True and all(d == 1 for d in ld):
        ld[int(rng.integers(n))] = int(rng.integers(2, 4))
    if lhs_dilation is False:
        ld = [1] * n
    rd = [int(rng.choice([1, 1, 1, 2])) for _ in range(n)]
    strides = [int(rng.choice([1, 1, 1, 2])) for _ in range(n)]
    in_sizes, k_sizes, pads = [], [], []
    for d in range(n):
        for _ in range(100):
            size, k = int(rng.integers(1, 6)), int(rng.integers(1, 4))
            lo, hi = int(rng.integers(-1, 4)), int(rng.integers(-1, 4))
            base = (size - 1) * ld[d] + 1 + lo + hi
            window = (k - 1) * rd[d] + 1
            if base >= window:
                break
        else:
            size, k, lo, hi = 3, 1, 0, 0
        in_sizes.append(size)
        k_sizes.append(k)
        pads.append((lo, hi))
    dt = _dtype(t)
    lhs = rng.integers(-3, 4, (B, F, *in_sizes)).astype(np.float32)
    rhs = rng.integers(-3, 4, (O, I, *k_sizes)).astype(np.float32)
    specials = [np.inf, -np.inf, np.nan]
    for arr, p in ((lhs, rng.random() * 0.3), (rhs, rng.random() * 0.4)):
        mask = rng.random(arr.shape) < p
        arr[mask] = rng.choice(specials, int(mask.sum()))
    spatial = "".join("DHW"[3 - n:])
    layouts = [("NC" + spatial, "OI" + spatial, "NC" + spatial),
               ("N" + spatial + "C", spatial + "IO", "N" + spatial + "C")]
    dn = layouts[int(rng.integers(2))]
    if dn[0][1] != "C":
        lhs = np.moveaxis(lhs, 1, -1)
        rhs = np.moveaxis(np.moveaxis(rhs, 0, -1), 0, -2)   # [O, I, k...] -> [k..., I, O]
    kwargs = dict(window_strides=tuple(strides), padding=tuple(pads), lhs_dilation=tuple(ld),
                  rhs_dilation=tuple(rd), dimension_numbers=dn, feature_group_count=fgc,
                  batch_group_count=bgc)
    return t, kwargs, lhs.astype(dt), rhs.astype(dt)


def xla_and_hlo(kwargs, lhs, rhs):
    """XLA:CPU's result (jax.jit) and the program's HLO text."""
    import jax
    from jax import lax
    # 64-bit for this call only: a global switch would change the dtypes of every later
    # test's JAX program in the session (int64 indices in scans, f64 constants).
    with jax.enable_x64(True):
        f = jax.jit(lambda x, w: lax.conv_general_dilated(x, w, **kwargs))
        want = np.asarray(f(lhs, rhs))
        return want, f.lower(lhs, rhs).as_text(dialect="hlo")


def agree(got, want):
    got, want = np.asarray(got).astype(np.float64), np.asarray(want).astype(np.float64)
    if got.shape != want.shape:
        return False
    nan_g, nan_w = np.isnan(got), np.isnan(want)
    if not np.array_equal(nan_g, nan_w):
        return False
    inf_g, inf_w = np.isinf(got), np.isinf(want)
    if not np.array_equal(inf_g, inf_w) or not np.array_equal(got[inf_g], want[inf_w]):
        return False
    fin = ~(nan_w | inf_w)
    return bool(np.allclose(got[fin], want[fin], rtol=2e-2, atol=1e-1))
