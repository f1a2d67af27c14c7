# ---
# jupyter:
#   jupytext:
#     formats: notebooks///ipynb,notebooks_py///py:percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 4. Reductions and windows: Reduce, ReduceWindow, SelectAndScatter, Sort, TopK
#
# [![Binder](https://mybinder.org/badge_logo.svg)](https://mybinder.org/v2/gh/xla-explorer/xla_explorer/main?labpath=notebooks%2F04_reductions_and_windows.ipynb)
#
# These ops take a *computation* as an argument: a small function of scalars (`Add`, `Max`,
# a comparator) that XLA applies over and over. In xla_explorer that argument is a Python
# function; it is traced into an HLO sub-computation, which you can see in the printed HLO.

# %%
import numpy as np
import xla_explorer as xe

# %% [markdown]
# ## 1. Reduce
#
# `Reduce(operands, init_values, computation, dimensions)` folds the listed `dimensions`
# away; the other dimensions keep their order, so the rank drops by `len(dimensions)`. The
# spec's 3-D example is a `4x2x3` array holding `1..6` in each of its 4 layers:

# %%
arr = np.tile(np.float32([[1, 2, 3], [4, 5, 6]]), (4, 1, 1))
add = lambda a, c: xe.Add(a, c)  # noqa: E731
for dims in ([0], [2], [0, 1], [0, 1, 2]):
    print(dims, "->", xe.Reduce(arr, np.float32(0), add, dimensions=dims).tolist())

# %% [markdown]
# The spec makes two promises and one warning:
#
# - the init value is always the *left* argument when it meets an element;
# - the init value may be used any number of times (so it should be the computation's
#   identity, 0 for `Add`);
# - the order of application is unspecified: `f(10, f(11, f(12, f(init, 13))))` is as valid
#   as a tree. A computation that is not associative gives results that depend on the
#   backend. Float addition is only approximately associative.
#
# An init value that is not an identity shows how many times it was used -- which is an
# implementation detail, not semantics:

# %%
xe.Reduce(np.float32([10, 11, 12, 13]), np.float32(100), add, dimensions=[0])

# %% [markdown]
# The index map of a reduce lists, for each result element, every operand element folded
# into it:

# %%
imap = xe.index_map("reduce", arr, np.float32(0), computation=add, dimensions=[0, 1])
print(imap)
print([index for _, index in imap[2].reads])

# %% [markdown]
# ## 2. Variadic Reduce: max and argmax together
#
# With N operands and N init values, the computation takes N accumulators and N elements
# and returns N new accumulators: the operands are reduced *in parallel*. The spec's example
# is argmax: reduce the values together with their indices (an `Iota`).
#
# Its pseudo-code compares the new value with the running *argmax* -- it means the running
# max -- and keeps the later index on ties. Because the order of evaluation is not fixed, a
# robust argmax should not depend on it: take the new pair when its value is larger, *or*
# equal with a smaller index. Then any association order gives the first maximal index.

# %%
def argmax(max_value, max_index, value, index):
    take = xe.Or(xe.Gt(value, max_value), xe.And(xe.Eq(value, max_value), xe.Lt(index, max_index)))
    return xe.Select(take, value, max_value), xe.Select(take, index, max_index)


b = xe.XlaBuilder("argmax")
x = xe.Parameter(b, 0, xe.Shape("f32", (2, 4)), "x")
iota = xe.Iota(b, xe.Shape("s32", (2, 4)), iota_dimension=1)
init = [xe.Constant(b, np.float32(-np.inf)), xe.Constant(b, np.int32(0))]
argmax_rows = b.build(xe.Reduce([x, iota], init, argmax, dimensions=[1]))
print(argmax_rows.as_hlo_text())

# %%
x_val = np.float32([[3, 9, 2, 9], [5, 1, 8, 0]])
print(argmax_rows.run(x_val))
argmax_rows.diff(x_val)

# %% [markdown]
# ## 3. ReduceWindow: pooling
#
# `ReduceWindow(operand, init_value, computation, window_dimensions, window_strides,
# padding)` reduces every *window* instead of whole dimensions: a box of
# `window_dimensions` slides over the operand in steps of `window_strides`, and each
# position gives one result element. The spec's example is a 2x3 max-pool with stride 2x3
# on a 4x6 matrix (`"VALID"`: only windows that fit):

# %%
pool_in = np.float32([[7, 2, 5, 1, 9, 3], [4, 8, 6, 2, 0, 5], [1, 3, 9, 7, 4, 6], [2, 6, 0, 8, 5, 1]])
mx = lambda a, c: xe.Max(a, c)  # noqa: E731
xe.ReduceWindow(pool_in, np.float32(-np.inf), mx, [2, 3], [2, 3], "VALID")

# %% [markdown]
# Padding is applied first, and the windows slide over the padded array. `"SAME"` pads so
# that, strides aside, the output keeps the input's size; padded cells do not contribute
# (it is as if they held the init value). A 1-D min-pool, window 3, stride 2:

# %%
v = np.float32([10000, 1000, 100, 10, 1])
mn = lambda a, c: xe.Min(a, c)  # noqa: E731
print(xe.ReduceWindow(v, np.float32(np.inf), mn, [3], [2], "SAME"))
print(xe.ReduceWindow(v, np.float32(np.inf), mn, [3], [2], [(1, 1)]))   # the same, explicitly

# %% [markdown]
# ### Dilations
#
# The newer spec adds two dilations. `window_dilations` spreads the window's cells apart (a
# window of 2 with dilation 2 reads elements 0 and 2: an "atrous" window);
# `base_dilations` spreads the *operand* apart, putting `d - 1` holes between elements
# (holes, like padding, take no part). Base dilation is what the gradient of a strided sum
# (or average) pool uses.

# %%
s = lambda a, c: xe.Add(a, c)  # noqa: E731
print(xe.ReduceWindow(np.float32([1, 2, 3, 4, 5]), np.float32(0), s, [2], [1], "VALID", window_dilations=[2]))
print(xe.ReduceWindow(np.float32([1, 2, 3]), np.float32(0), s, [2], [1], "VALID", base_dilations=[2]))

# %% [markdown]
# Everything at once: a 2x2 window, dilated by 2 along rows, stride 1x2, padding
# `(1, 1)` rows and `(1, 0)` columns. The HLO writes it as one `window={...}` attribute:

# %%
b = xe.XlaBuilder("pooling")
p = xe.Parameter(b, 0, xe.Shape("f32", (4, 6)), "x")
rw = xe.ReduceWindow(p, xe.Constant(b, np.float32(0)), s, [2, 2], [1, 2], [(1, 1), (1, 0)],
                     window_dilations=[2, 1])
pooling = b.build(rw)
print(pooling.as_hlo_text())
print(pooling.run(pool_in))
np.array_equal(pooling.run(pool_in), pooling.run(pool_in, backend="jax"))

# %% [markdown]
# The animation draws the operand *padded* (and dilated, where it is), with the window's
# cells, the padding it touches, and the sum written out:

# %%
rw_name = pooling.entry.root.name
print(xe.index_map(pooling, rw_name, pool_in)[0, 0].detail["padding_cells"])
xe.animate(pooling, rw_name, pool_in, max_steps=12)

# %% [markdown]
# ## 4. SelectAndScatter: the gradient of max-pooling
#
# `SelectAndScatter(operand, select, window_dimensions, window_strides, padding, source,
# init_value, scatter)` runs in two halves:
#
# 1. like a ReduceWindow, in each window it *selects* one element with `select(a, b)`,
#    which is called with `a` earlier in the window than `b` and returns true to keep `a`;
# 2. it *scatters* the window's `source` value onto the selected element, combining with
#    `scatter`; every element starts at `init_value`.
#
# With `select = Ge` and `scatter = Add` that is exactly the backward pass of max-pooling:
# each window's gradient flows to its maximum. Overlapping windows may select the same
# element; their contributions add up. This is what JAX emits for the gradient of a
# `reduce_window` max-pool (2x3 windows, stride 2x2, on a 4x5 input):

# %%
from xla_explorer.jax_bridge import load_jax

jax = load_jax()
jnp = jax.numpy


def max_pool(x):
    return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (2, 3), (2, 2), "VALID")


x = np.float32([[7, 2, 5, 3, 8], [3, 8, 9, 3, 4], [1, 5, 7, 5, 6], [0, 6, 2, 10, 2]])
g = np.float32([[2, 6], [3, 1]])
pool_grad = xe.from_jax(jax.grad(lambda x, g: (max_pool(x) * g).sum()), x, g)
print(pool_grad.as_hlo_text())

# %%
print(max_pool(x))
print(pool_grad.run(x, g))
pool_grad.diff(x, g)

# %% [markdown]
# The 9 at `[1, 2]` is the maximum of both top windows, so it receives `2 + 6 = 8`. The
# animation goes window by window (one step per `source` element):

# %%
sas = next(r.name for r in pool_grad.trace(x, g).records if r.opcode == "select-and-scatter")
xe.animate(pool_grad, sas, x, g)

# %% [markdown]
# Or hover a `source` element yourself: its window, the element `select` picked and the
# result element it is scattered into light up (a collision when another window picked
# it first):

# %%
xe.index_map_view(pool_grad, sas, x, g)

# %% [markdown]
# Ties: `select` sees the earlier element first, so `Ge` keeps the *first* of equal maxima
# and `Gt` the *last*:

# %%
flat = np.float32([[4, 4, 4]])
for sel in (xe.Ge, xe.Gt):
    print(sel.__name__, xe.SelectAndScatter(flat, lambda a, b: sel(a, b), [1, 3], [1, 3], "VALID",
                                            np.float32([[1]]), np.float32(0), s))

# %% [markdown]
# ## 5. Sort: comparators and stability
#
# `Sort(operands, comparator, dimension, is_stable)` sorts along one dimension. With several
# operands of one shape, they are permuted together; the comparator then receives the pairs
# `(lhs_0, rhs_0, lhs_1, rhs_1, ...)` and says whether `lhs` goes first. The spec's example,
# keys and values:

# %%
xe.Sort([np.int32([3, 1]), np.int32([42, 50])])

# %% [markdown]
# The default comparator is `lhs_0 < rhs_0`. For floats that is IEEE's `<`, which is not an
# order at all when NaNs are present; the spec calls the result implementation-defined. Here
# the reference and XLA:CPU disagree -- both are allowed, neither is useful:

# %%
keys = np.float32([2, np.nan, 1, -0.0, 0.0, 1, -np.inf])
b = xe.XlaBuilder("ieee_sort")
k = xe.Parameter(b, 0, xe.Shape("f32", (7,)), "k")
ieee_sort = b.build(xe.Sort(k))
print("reference", ieee_sort.run(keys))
print("XLA:CPU  ", ieee_sort.run(keys, backend="jax"))

# %% [markdown]
# With the total order as comparator the result is well defined (this is what `jnp.sort`
# emits): NaN last, `-0.0` before `+0.0`.

# %%
sorted_keys = xe.Sort(keys, lambda a, b: xe.LtTotalOrder(a, b))
print(sorted_keys, np.signbit(sorted_keys))

# %% [markdown]
# *Stability.* The 2018 page warns that sort is not stable; the newer one adds `is_stable`:
# elements the comparator finds equal keep their input order. Sorting `(key, position)`
# pairs by key alone shows it:

# %%
key = np.int32([2, 1, 2, 1, 0])
position = np.int32([0, 1, 2, 3, 4])
print(xe.Sort([key, position], lambda ka, kb, pa, pb: xe.Lt(ka, kb), is_stable=True))
print(xe.Sort([key, position], lambda ka, kb, pa, pb: xe.Gt(ka, kb), is_stable=True))

# %% [markdown]
# A comparator can look at every operand: ascending by key, then *descending* by position.

# %%
xe.Sort([key, position], lambda ka, kb, pa, pb: xe.Or(xe.Lt(ka, kb), xe.And(xe.Eq(ka, kb), xe.Gt(pa, pb))))

# %% [markdown]
# ## 6. TopK
#
# `TopK(operand, k, largest)` returns the `k` largest (or smallest) entries along the last
# dimension, in order, and their indices. Floats follow the total order, so a NaN counts as
# the largest value, and equal entries come lower index first. XLA:CPU agrees:

# %%
print(xe.TopK(np.float32([9, 3, 6, 4, 10]), 3))
b = xe.XlaBuilder("topk")
t = xe.Parameter(b, 0, xe.Shape("f32", (5,)), "x")
topk = b.build(xe.TopK(t, 3))
print(topk.as_hlo_text())
with_nan = np.float32([1, np.nan, 3, 3, -np.inf])
print(topk.run(with_nan))
print(topk.run(with_nan, backend="jax"))

# %%
xe.TopK(np.float32([[1, 5, 3], [7, 7, 0]]), 2, largest=False)
