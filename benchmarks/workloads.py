"""Benchmark workloads: each builds one XlaComputation and its inputs.

Every workload is defined once, with the builder, so the NumPy reference, the Numba
executor and JAX (through ``comp.to_jax()``) run the very same computation.
"""
import numpy as np

import xla_explorer as xe

F32 = "f32"


def _b(name):
    return xe.XlaBuilder(name)


def gather_rows(rng, n=8192, d=256, k=8192):
    b = _b("gather_rows")
    x = xe.Parameter(b, 0, xe.Shape(F32, (n, d)), "x")
    i = xe.Parameter(b, 1, xe.Shape("s32", (k, 1)), "i")
    g = xe.Gather(x, i, offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0],
                  index_vector_dim=1, slice_sizes=[1, d])
    return b.build(g), [rng.normal(size=(n, d)).astype(np.float32), rng.integers(0, n, (k, 1)).astype(np.int32)]


def gather_elements(rng, n=1 << 22, k=1 << 22):
    b = _b("gather_elements")
    x = xe.Parameter(b, 0, xe.Shape(F32, (n,)), "x")
    i = xe.Parameter(b, 1, xe.Shape("s32", (k, 1)), "i")
    g = xe.Gather(x, i, offset_dims=[], collapsed_slice_dims=[0], start_index_map=[0],
                  index_vector_dim=1, slice_sizes=[1])
    return b.build(g), [rng.normal(size=n).astype(np.float32), rng.integers(0, n, (k, 1)).astype(np.int32)]


def scatter_add(rng, n=4096, d=128, k=16384):
    b = _b("scatter_add")
    x = xe.Parameter(b, 0, xe.Shape(F32, (n, d)), "x")
    i = xe.Parameter(b, 1, xe.Shape("s32", (k, 1)), "i")
    u = xe.Parameter(b, 2, xe.Shape(F32, (k, d)), "u")
    s = xe.Scatter(x, i, u, lambda a, c: xe.Add(a, c), update_window_dims=[1], inserted_window_dims=[0],
                   scatter_dims_to_operand_dims=[0], index_vector_dim=1)
    return b.build(s), [np.zeros((n, d), np.float32), rng.integers(0, n, (k, 1)).astype(np.int32),
                        rng.normal(size=(k, d)).astype(np.float32)]


def _reduce_window(name, rng, init, fn, shape=(1, 512, 512, 32)):
    b = _b(name)
    x = xe.Parameter(b, 0, xe.Shape(F32, shape), "x")
    r = xe.ReduceWindow(x, xe.Constant(b, np.float32(init)), fn, window_dimensions=[1, 3, 3, 1],
                        window_strides=[1, 2, 2, 1], padding=[(0, 0), (1, 1), (1, 1), (0, 0)])
    return b.build(r), [rng.normal(size=shape).astype(np.float32)]


def reduce_window_max(rng):
    return _reduce_window("reduce_window_max", rng, -np.inf, lambda a, c: xe.Max(a, c))


def reduce_window_sum(rng):
    return _reduce_window("reduce_window_sum", rng, 0.0, lambda a, c: xe.Add(a, c))


def pad_interior_negative(rng, n=2048):
    b = _b("pad")
    x = xe.Parameter(b, 0, xe.Shape(F32, (n, n)), "x")
    p = xe.Pad(x, xe.Constant(b, np.float32(0)), padding_config=[(-3, 5, 1), (4, -2, 1)])
    return b.build(p), [rng.normal(size=(n, n)).astype(np.float32)]


def elementwise_chain(rng, n=1 << 22):
    b = _b("elementwise_chain")
    x = xe.Parameter(b, 0, xe.Shape(F32, (n,)), "x")
    y = xe.Parameter(b, 1, xe.Shape(F32, (n,)), "y")
    two = xe.Constant(b, np.float32(2))
    r = xe.Max(xe.Sub(xe.Mul(xe.Add(x, y), two), y), xe.Mul(x, y))
    return b.build(r), [rng.normal(size=n).astype(np.float32), rng.normal(size=n).astype(np.float32)]


def transcendental_chain(rng, n=1 << 22):
    b = _b("transcendental_chain")
    x = xe.Parameter(b, 0, xe.Shape(F32, (n,)), "x")
    r = xe.Mul(xe.Tanh(xe.Add(xe.Mul(x, xe.Constant(b, np.float32(2))), xe.Constant(b, np.float32(1)))),
               xe.Exp(xe.Neg(xe.Abs(x))))
    return b.build(r), [rng.normal(size=n).astype(np.float32)]


def batched_dot(rng, batch=64, m=256, k=256, n=256):
    b = _b("batched_dot")
    x = xe.Parameter(b, 0, xe.Shape(F32, (batch, m, k)), "x")
    y = xe.Parameter(b, 1, xe.Shape(F32, (batch, k, n)), "y")
    d = xe.DotGeneral(x, y, lhs_contracting_dimensions=[2], rhs_contracting_dimensions=[1],
                      lhs_batch_dimensions=[0], rhs_batch_dimensions=[0])
    return b.build(d), [rng.normal(size=(batch, m, k)).astype(np.float32),
                        rng.normal(size=(batch, k, n)).astype(np.float32)]


def conv2d(rng, shape=(8, 64, 64, 32), kernel=(3, 3, 32, 64)):
    b = _b("conv2d")
    x = xe.Parameter(b, 0, xe.Shape(F32, shape), "x")
    w = xe.Parameter(b, 1, xe.Shape(F32, kernel), "w")
    c = xe.ConvGeneralDilated(x, w, window_strides=[1, 1], padding=[(1, 1), (1, 1)],
                              dimension_numbers=("NHWC", "HWIO", "NHWC"))
    return b.build(c), [rng.normal(size=shape).astype(np.float32), rng.normal(size=kernel).astype(np.float32)]


def reduce_dims(rng, shape=(64, 128, 512)):
    b = _b("reduce_dims")
    x = xe.Parameter(b, 0, xe.Shape(F32, shape), "x")
    r = xe.Reduce(x, xe.Constant(b, np.float32(0)), lambda a, c: xe.Add(a, c), dimensions=[0, 2])
    return b.build(r), [rng.normal(size=shape).astype(np.float32)]


def sort(rng, n=1 << 20):
    b = _b("sort")
    x = xe.Parameter(b, 0, xe.Shape(F32, (n,)), "x")
    return b.build(xe.Sort(x, dimension=0)), [rng.normal(size=n).astype(np.float32)]


WORKLOADS = {
    "gather rows": (gather_rows, "data"),
    "gather elements": (gather_elements, "data"),
    "scatter-add (duplicates)": (scatter_add, "data"),
    "reduce-window max 3x3/2": (reduce_window_max, "data"),
    "reduce-window sum 3x3/2": (reduce_window_sum, "data"),
    "pad interior+negative": (pad_interior_negative, "data"),
    "element-wise chain": (elementwise_chain, "ew"),
    "transcendental chain": (transcendental_chain, "ew"),
    "batched dot-general": (batched_dot, "compute"),
    "conv 2-D": (conv2d, "compute"),
    "reduce over 2 dims": (reduce_dims, "data"),
    "sort 1M": (sort, "compute"),
}
