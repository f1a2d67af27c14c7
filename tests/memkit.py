"""Measuring what the NumPy reference allocates, op by op (used by tests/test_reliability.py;
``python tests/memkit.py`` fits ``executors.reference_memory``'s table).

``examples(n, dtype)`` gives legal calls of (nearly) every op whose arrays hold about
``n`` elements; ``measure(example)`` runs one eagerly under ``tracemalloc`` (NumPy reports
its buffers to it) and returns the peak of new allocations and the reference's estimate for
the same call (``executors.reference.reference_bytes``), so that a test can check that the
estimate is an upper bound of what is really allocated, and not a wildly generous one.
"""
import tracemalloc

import numpy as np

F32, I32 = np.float32, np.int32


def _values(dtype, shape, seed=0):
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return rng.random(shape) > 0.5
    if dt.kind in "iu":
        return rng.integers(1, 100, shape).astype(dt)
    if dt.kind == "c":
        return (rng.random(shape) + 1j * rng.random(shape) + 0.5).astype(dt)
    return (rng.random(shape) + 0.5).astype(dt)


class Sized:
    """``xe.<api>(*args, **kwargs)``, run eagerly; ``fns``: callables made in the process."""

    def __init__(self, opcode, api, args, kwargs=None):
        self.opcode, self.api, self.args, self.kwargs = opcode, api, list(args), dict(kwargs or {})

    def __repr__(self):
        return f"<Sized {self.opcode}: {self.api} {[getattr(a, 'shape', a) for a in self.args][:3]}>"


def elementwise_examples(n, dtype):
    """Every element-wise op that takes operands of ``dtype`` (found by trying a small call)."""
    import xla_explorer as xe
    from xla_explorer.ops import registry

    import fuzzkit
    out = []
    for opcode, op in sorted(registry.all_ops().items()):
        if "elementwise" not in op.categories or not op.name or not hasattr(xe, op.name):
            continue
        ex = fuzzkit.examples().get(opcode)
        if not ex:
            continue
        ex = ex[0]
        args, k = [], 0
        for a in ex.args:
            if isinstance(a, (np.ndarray, np.generic)):
                t = np.bool_ if opcode == "select" and k == 0 else dtype
                args.append(_values(t, (n,), seed=k))
                k += 1
            else:
                args.append(a)
        small = [x[:4] if isinstance(x, np.ndarray) else x for x in args]
        try:
            getattr(xe, ex.api)(*small, **ex.kwargs)
        except Exception:  # noqa: BLE001 - the op does not take this type
            continue
        out.append(Sized(opcode, ex.api, args, ex.kwargs))
    return out


def other_examples(n, dtype=F32):
    """The data-movement, reduction, linear-algebra, control and RNG ops on arrays of about
    ``n`` elements of ``dtype`` (a float or complex type), rank 2 (``[n/64, 64]``)."""
    import xla_explorer as xe
    R = max(2, n // 64)
    x = _values(dtype, (R, 64))
    x4 = _values(dtype, (max(1, n // 512), 8, 8, 8))
    s = np.dtype(dtype).type(0)
    idx = np.random.default_rng(1).integers(0, R, (R, 1)).astype(I32)
    add = lambda a, b: xe.Add(a, b)   # noqa: E731
    ex = [
        Sized("broadcast", "BroadcastInDim", [x[0], [R, 64], [1]]),
        Sized("broadcast", "BroadcastInDim", [x4[0], [x4.shape[0], 8, 8, 8], [1, 2, 3]]),
        Sized("reshape", "Reshape", [x, [64, R]]),
        Sized("transpose", "Transpose", [x, [1, 0]]),
        Sized("transpose", "Transpose", [x4, [3, 1, 2, 0]]),
        Sized("reverse", "Rev", [x, [0, 1]]),
        Sized("concatenate", "Concatenate", [x, x], {"dimension": 0}),
        Sized("iota", "Iota", [None, f"{'f32' if np.dtype(dtype) == F32 else 's32'}[{R},64]", 0]),
        Sized("copy", "Copy", [x]),
        Sized("slice", "Slice", [x, [1, 1], [R, 63], [1, 1]]),
        Sized("slice", "Slice", [x4, [0, 1, 1, 1], [x4.shape[0], 7, 7, 7], [1, 2, 1, 2]]),
        Sized("dynamic-slice", "DynamicSlice", [x, [I32(1), I32(1)], [R - 1, 63]]),
        Sized("dynamic-update-slice", "DynamicUpdateSlice", [x, x[: R // 2], [I32(1), I32(0)]]),
        Sized("pad", "Pad", [x, s, [(1, 2, 1), (0, 1, 0)]]),
        Sized("pad", "Pad", [x4, s, [(1, 2, 0), (0, 1, 1), (1, 1, 0), (0, 0, 1)]]),
        Sized("gather", "Gather", [x, idx], dict(offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0],
                                                 index_vector_dim=1, slice_sizes=[1, 64])),
        Sized("scatter", "Scatter", [x, idx, x, add], dict(update_window_dims=[1], inserted_window_dims=[0],
                                                           scatter_dims_to_operand_dims=[0], index_vector_dim=1)),
        Sized("reduce", "Reduce", [x, s, add, [1]]),
        Sized("reduce", "Reduce", [x, s, add, [0]]),
        Sized("reduce", "Reduce", [x4, s, lambda a, b: xe.Max(a, b), [1, 3]]),
        Sized("reduce-window", "ReduceWindow", [x, s, add, [2, 3], [1, 1], [(1, 1), (1, 1)]]),
        Sized("reduce-window", "ReduceWindow", [x4, s, add, [1, 2, 2, 2], [1, 1, 1, 1], [(0, 0)] * 4]),
        Sized("sort", "Sort", [x], {"dimension": 1}),
        Sized("sort", "Sort", [x], {"dimension": 0, "is_stable": True}),
        Sized("dot", "Dot", [x, x.T.copy()[:, :64]]),
        Sized("dot", "DotGeneral", [x4, x4], dict(lhs_contracting_dimensions=[3], rhs_contracting_dimensions=[3],
                                                  lhs_batch_dimensions=[0, 1], rhs_batch_dimensions=[0, 1])),
        Sized("convolution", "ConvGeneralDilated",
              [_values(dtype, (max(1, n // 4096), 4, 32, 32)), _values(dtype, (4, 4, 3, 3)), [1, 1],
               [(1, 1), (1, 1)]]),
        Sized("convolution", "ConvGeneralDilated",
              [_values(dtype, (max(1, n // 4096), 4, 32, 32)), _values(dtype, (4, 4, 3, 3)), [1, 1],
               [(1, 1), (1, 1)]], dict(lhs_dilation=[2, 2], rhs_dilation=[2, 1])),
        Sized("tuple", "Tuple", [x, x]),
        Sized("opt-barrier", "OptimizationBarrier", [x]),
        Sized("map", "Map", [[x, x], add, [0, 1]]),
        Sized("call", "Call", [lambda v: xe.Neg(v), x]),
        Sized("all-reduce", "AllReduce", [x, add], {"replica_groups": [[0]]}),
        Sized("all-gather", "AllGather", [x, 0], {"shard_count": 1}),
        Sized("collective-permute", "CollectivePermute", [x, [(0, 0)]]),
    ]
    if np.dtype(dtype).kind == "f":
        ex += [
            Sized("select-and-scatter", "SelectAndScatter",
                  [x, lambda a, b: xe.Ge(a, b), [2, 2], [2, 2], "VALID", _values(dtype, (R // 2, 32)), s, add]),
            Sized("topk", "TopK", [x, 8]),
            Sized("cholesky", "Cholesky", [np.tile(np.eye(8, dtype=dtype) * 4 + 1, (max(1, n // 64), 1, 1))],
                  {"lower": True}),
            Sized("triangular-solve", "TriangularSolve",
                  [np.tile(np.eye(8, dtype=dtype) * 2, (max(1, n // 64), 1, 1)), _values(dtype, (max(1, n // 64), 8, 8))],
                  dict(left_side=True, lower=True, unit_diagonal=False, transpose_a="NO_TRANSPOSE")),
            Sized("batch-norm-training", "BatchNormTraining", [x4, _values(dtype, (8,)), _values(dtype, (8,)), 1e-3, 1]),
            Sized("batch-norm-inference", "BatchNormInference",
                  [x4, *[_values(dtype, (8,)) for _ in range(4)], 1e-3, 1]),
            Sized("batch-norm-grad", "BatchNormGrad",
                  [x4, _values(dtype, (8,)), _values(dtype, (8,)), _values(dtype, (8,)), x4, 1e-3, 1]),
            Sized("fft", "Fft", [x, "RFFT", [64]]) if np.dtype(dtype) in (F32, np.float64) else None,
            Sized("rng", "RngUniform", [np.dtype(dtype).type(0), np.dtype(dtype).type(1), f"f32[{R},64]"])
            if np.dtype(dtype) == F32 else None,
            Sized("scan", "Scan", [x, x[0], lambda v, c: (xe.Add(v, c), xe.Add(v, c))], {"dimension": 0}),
        ]
    if np.dtype(dtype).kind == "c":
        ex.append(Sized("fft", "Fft", [x, "FFT", [64]]))
    ex.append(Sized("rng-bit-generator", "RngBitGenerator", ["rng_default", np.array([1, 2], np.uint64), f"u32[{R},64]"]))
    return [e for e in ex if e is not None]


def measure(example, detail=False):
    """(peak bytes newly allocated while the op runs eagerly, the estimate the reference's
    size guard made for it): the call runs once first, so imports and caches are warm.
    ``detail``: also what the estimate was made of, ``(E, rank, class, item size)`` for the
    example's own op."""
    import xla_explorer as xe
    from xla_explorer.executors import reference, reference_memory as rm
    fn = getattr(xe, example.api)
    fn(*example.args, **example.kwargs)
    estimates, seen, original = [], [], reference.reference_bytes

    def recording(op, values, shape, attrs=None):
        out = original(op, values, shape, attrs)
        estimates.append(out[0])
        if op.opcode == example.opcode:
            seen.append(rm.work_elements(op, values, shape, attrs) + rm.work_class(values, shape))
        return out
    reference.reference_bytes = recording
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        result = fn(*example.args, **example.kwargs)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
        reference.reference_bytes = original
    del result
    if detail:
        return peak, max(estimates, default=0), max(seen, default=(0, 0, "float", 1))
    return peak, max(estimates, default=0)


FIT_DTYPES = ("float16", "float32", "float64", "complex64", "complex128", "bool", "uint8", "int32", "int64")


def examples(n, dtype):
    dtype = np.dtype(dtype)
    out = elementwise_examples(n, dtype)
    if dtype.kind in "fc":
        out += other_examples(n, dtype)
    return out


def fit(n=1 << 18, dtypes=FIT_DTYPES, out=None):
    """Measure every example in every type and fit ``(a, b)`` per op and class (the
    ``reference_memory.WORK`` table): ``b`` the steepest growth with the item size, ``a`` what
    is left at most.  Prints the table as Python."""
    import collections
    import math
    import sys
    from xla_explorer.executors import reference_memory as rm
    out = out or sys.stdout
    points = collections.defaultdict(list)
    for dt in dtypes:
        seen = collections.Counter()
        for ex in examples(n, dt):
            seen[ex.api] += 1   # the same call in every type: the growth with the item size is per call
            try:
                peak, _, (E, rank, cls, item) = measure(ex, detail=True)
            except Exception as e:  # noqa: BLE001 - the op does not take this type here
                print(f"# {dt} {ex}: {type(e).__name__}", file=out)
                continue
            if E:
                index = rm.WORK.get(ex.opcode, rm.Work()).index
                points[ex.opcode, cls].append((item, peak / E - index * 8 * rank, ex.api, seen[ex.api]))
    table = collections.defaultdict(dict)
    for (opcode, cls), pts in sorted(points.items()):
        b = max([0.0] + [(v2 - v1) / (i2 - i1) for i1, v1, *c1 in pts for i2, v2, *c2 in pts
                         if i2 > i1 and c1 == c2])
        pts = [p[:2] for p in pts]
        b = math.ceil(b * 2) / 2
        a = math.ceil(max(v - b * i for i, v in pts))
        table[opcode][cls] = (max(a, 0), b if b != int(b) else int(b))
    for opcode, classes in sorted(table.items()):
        parts = ", ".join(f"{c}={classes[c]}" for c in ("float", "half", "complex", "int") if c in classes)
        print(f"    {opcode!r}: ({parts}),", file=out)
    return table


if __name__ == "__main__":
    fit()
