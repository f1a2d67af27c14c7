"""The operators of ``XlaOp`` (``x[1:3]``, ``x @ w``, ``x < 0``, ``bool(x)``): each records the spec
op of the same meaning, or explains why Python cannot do it while tracing.

Kept apart from ``builder`` so that the builder module stays about recording; ``XlaOp``'s
dunder methods call these functions.
"""
import numpy as np

from . import dtypes
from .errors import ShapeError

NO_VALUE = ("while building, an XlaOp has a shape but no value yet: each op call only records an "
            "instruction (symbolic execution), and the values exist when the computation runs.")
USE_CONTROL_OPS = ("A Python `if` or `while` runs once, while tracing, so it can depend only on shapes and "
                   "constants. To decide on a traced value, record the decision: Select(pred, on_true, on_false) "
                   "picks element by element, Conditional(pred, true_operand, true_computation, false_operand, "
                   "false_computation) runs one of two computations, While(condition, body, init) loops.")


def operand_like(x):
    """What an operator can take as its other operand: an op, a NumPy value or a Python number."""
    from .builder import XlaOp
    return isinstance(x, (XlaOp, np.ndarray, np.generic, int, float, complex, bool))


def index(op, index):
    """``op[index]`` recorded as Slice, Rev, Reshape and DynamicSlice (see ``XlaOp.__getitem__``)."""
    from . import ops
    from .builder import XlaOp
    if not isinstance(index, tuple):
        index = (index,)
    if not op.shape.is_array:
        raise TypeError(f"indexing {op!r}: a tuple-shaped op is taken apart with GetTupleElement(op, i)")
    for i in index:
        if not (i is None or i is Ellipsis or isinstance(i, (slice, XlaOp))
                or (isinstance(i, (int, np.integer)) and not isinstance(i, (bool, np.bool_)))):
            raise TypeError(f"{op!r}[{i!r}]: only integers, slices, None, ... and traced integer scalars index an "
                            "XlaOp; for arrays of indices record a Gather (see the gather notebook)")
    if sum(i is Ellipsis for i in index) > 1:
        raise ShapeError(f"{op!r}: an index can have only one ellipsis (...)")
    dims = op.shape.dims
    used = sum(i is not None and i is not Ellipsis for i in index)
    if used > len(dims):
        raise ShapeError(f"{op!r}: too many indices ({used}) for rank {len(dims)}")
    k = next((n for n, i in enumerate(index) if i is Ellipsis), len(index))
    index = index[:k] + (slice(None),) * (len(dims) - used) + index[k + 1:]  # '...' or the end: all the rest
    starts, limits, strides, reverse, dynamic, out_dims = [], [], [], [], {}, []
    d = 0
    for i in index:
        if i is None:
            out_dims.append(("new", None))
            continue
        n = dims[d]
        if n is None and not (isinstance(i, slice) and i == slice(None)):
            raise ShapeError(f"{op!r}[...]: dimension {d} is dynamic; only ':' indexes it")
        if isinstance(i, XlaOp):
            if i.shape.rank != 0 or str(i.shape.element_type)[0] not in "su":
                raise TypeError(f"{op!r}[{i!r}]: a traced index must be an integer scalar; arrays of indices "
                                "need a Gather")
            dynamic[d] = i
            starts.append(0), limits.append(n), strides.append(1)
        elif isinstance(i, slice):
            if n is None:
                starts.append(0), limits.append(None), strides.append(1)
                out_dims.append(("keep", d))
                d += 1
                continue
            start, stop, step = i.indices(n)
            r = range(start, stop, step)
            if step < 0:
                reverse.append(d)
                start = n - 1 - r[0] if len(r) else 0
                step = -step
            else:
                start = r[0] if len(r) else 0
            starts.append(start), limits.append(start + (len(r) - 1) * step + 1 if len(r) else start)
            strides.append(step)
            out_dims.append(("keep", d))
        else:
            k = int(i)
            if not -n <= k < n:
                raise ShapeError(f"{op!r}[...]: index {k} is out of bounds for dimension {d} of size {n}")
            k %= n
            starts.append(k), limits.append(k + 1), strides.append(1)
        d += 1
    x = ops.Rev(op, reverse) if reverse else op
    if any(lim is None for lim in limits):
        if any(s != 0 or st != 1 for s, st in zip(starts, strides)) or dynamic:
            raise ShapeError(f"{op!r}[...]: slicing an array with dynamic dimensions is supported only with ':'")
    elif dynamic:
        zero = np.zeros((), dtypes.to_numpy(next(iter(dynamic.values())).shape.element_type))
        x = ops.Slice(x, starts, limits, strides) if (starts, strides) != ([0] * len(dims), [1] * len(dims)) \
            or limits != list(dims) else x
        sizes = [1 if k in dynamic else x.shape.dims[k] for k in range(len(dims))]
        x = ops.DynamicSlice(x, [dynamic.get(k, zero) for k in range(len(dims))], sizes)
    elif (starts, limits, strides) != ([0] * len(dims), list(dims), [1] * len(dims)):
        x = ops.Slice(x, starts, limits, strides)
    new_dims = [1 if kind == "new" else x.shape.dims[k] for kind, k in out_dims]
    if tuple(new_dims) != tuple(x.shape.dims):
        x = ops.Reshape(x, new_sizes=new_dims)
    return x
