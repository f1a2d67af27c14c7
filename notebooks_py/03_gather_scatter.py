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
# # 3. Gather and Scatter, step by step
#
# [![Binder](https://mybinder.org/badge_logo.svg)](https://mybinder.org/v2/gh/xla-explorer/xla_explorer/main?labpath=notebooks%2F03_gather_scatter.ipynb)
#
# `Gather` is XLA's one op for every kind of indexing read: `x[i]`, `x[i, j]`, `take`,
# `gather_nd`, embedding lookups, a batch of dynamic slices. `Scatter` is the matching
# write (`x.at[i].add(u)`, `.set`, `.max`, ...). Their attributes (the "dimension numbers")
# are famously hard to read. Here we take the spec's own examples apart one result element
# at a time, with index maps and animations, then look at what XLA does when indices are
# out of bounds, how `jax.vmap` adds *batching dimensions*, and what happens when several
# updates land on the same element.

# %%
import numpy as np
import xla_explorer as xe

# %% [markdown]
# ## 1. The spec's first example: a batch of dynamic slices
#
# Take 5 slices of size `[8, 6]` out of a `[16, 11]` array. Each slice's start is a pair
# `(X, Y)`, so the 5 starts form an `s32[5, 2]` array, `start_indices`. The attributes say:
#
# - `index_vector_dim=1`: the dimension of `start_indices` that holds each start vector;
# - `start_index_map=[0, 1]`: component `k` of a start vector is an index into operand
#   dimension `start_index_map[k]`;
# - `slice_sizes=[8, 6]`: the size of every slice;
# - `offset_dims=[1, 2]`: the result dimensions that index *inside* a slice; the others
#   (here dimension 0) are the *batch dimensions*, one per start vector.
#
# So the result is `f32[5, 8, 6]`, and `result[G, O0, O1] = operand[X + O0, Y + O1]` where
# `(X, Y) = start_indices[G]`.

# %%
operand = np.arange(16 * 11, dtype=np.float32).reshape(16, 11)
starts = np.array([[0, 0], [2, 3], [8, 5], [4, 1], [7, 2]], np.int32)
batch_of_slices = dict(offset_dims=[1, 2], collapsed_slice_dims=[], start_index_map=[0, 1],
                       index_vector_dim=1, slice_sizes=[8, 6])

b = xe.XlaBuilder("slices")
op = xe.Parameter(b, 0, xe.Shape("f32", (16, 11)), "operand")
si = xe.Parameter(b, 1, xe.Shape("s32", (5, 2)), "start_indices")
g = xe.Gather(op, si, **batch_of_slices)
print(g.shape)
slices = b.build(g)
print(slices.as_hlo_text())

# %% [markdown]
# The spec's formal recipe, for one result index `Out`:
#
# 1. the batch dimensions of `Out` pick a start vector `S` out of `start_indices`;
# 2. `S` is spread into a full operand index `S_in` through `start_index_map` (zeros elsewhere);
# 3. the offset dimensions of `Out` are spread into `O_in`, skipping the
#    `collapsed_slice_dims` (zeros there);
# 4. the operand index is `S_in + O_in`.
#
# The index map records every one of these intermediate indices, under the names the
# StableHLO spec uses:

# %%
gather = slices.entry.root.name
imap = xe.index_map(slices, gather, operand, starts)
access = imap[2, 3, 4]
for key in ("batch_index", "start_index", "full_start_index", "offset_index", "full_offset_index",
            "operand_index"):
    print(f"{key:18} {access.detail[key]}")
print("value:", slices.run(operand, starts)[2, 3, 4], "==", operand[11, 9])

# %% [markdown]
# Explore it: hover (or click) a result element, and the start vector it used, the slice
# it lies in and the element it reads light up, with the formula above filled in for it.
# The result has rank 3: its first dimension (which slice) has a slider of its own.

# %%
xe.index_map_view(slices, gather, operand, starts)

# %% [markdown]
# The same as an animation (for GIFs and slides; `.save("gather.gif")`): 12 of the 240
# steps, the first row whole, then the rest in even strides.

# %%
xe.animate(slices, gather, operand, starts, max_steps=12)

# %% [markdown]
# ## 2. More batch dimensions
#
# The start vectors may themselves be arranged in several dimensions: with `start_indices`
# of shape `[4, 5, 2]` (and `index_vector_dim=2`) there are 4x5 slices, and the result is
# `[4, 5, 8, 6]`. `offset_dims` also chooses *where* the slice dimensions go among the
# batch dimensions:

# %%
b = xe.XlaBuilder("more_batch_dims")
op = xe.Parameter(b, 0, xe.Shape("f32", (16, 11)), "operand")
si = xe.Parameter(b, 1, xe.Shape("s32", (4, 5, 2)), "start_indices")
common = dict(collapsed_slice_dims=[], start_index_map=[0, 1], index_vector_dim=2, slice_sizes=[8, 6])
print(xe.Gather(op, si, offset_dims=[2, 3], **common).shape)
print(xe.Gather(op, si, offset_dims=[1, 3], **common).shape)

# %% [markdown]
# ## 3. `gather_nd`: collapsed dimensions and a partial start vector
#
# The spec's last example picks whole rows: each start vector has *one* component `X` (a row
# number), mapped to operand dimension 0 by `start_index_map=[0]`; the slice is `[1, 11]`
# (one full row), and its size-1 dimension 0 is dropped from the result by
# `collapsed_slice_dims=[0]`. With indices of shape `[4, 5, 1]` the result is `[4, 5, 11]`:
# `result[G0, G1, O0] = operand[indices[G0, G1, 0], O0]`, NumPy's `operand[rows]`.

# %%
rows = np.random.default_rng(0).integers(0, 16, size=(4, 5, 1)).astype(np.int32)
gather_nd = dict(offset_dims=[2], collapsed_slice_dims=[0], start_index_map=[0], index_vector_dim=2,
                 slice_sizes=[1, 11])
picked = xe.Gather(operand, rows, **gather_nd)
print(picked.shape, np.array_equal(picked, operand[rows[..., 0]]))
print(xe.index_map("gather", operand, rows, **gather_nd)[1, 2, 7].detail["full_offset_index"])

# %% [markdown]
# Collapsing a dimension needs a slice size of 1 there (the only offset into it is 0), and
# a slice cannot be larger than the operand. Both are checked while building:

# %%
b = xe.XlaBuilder("errors")
op = xe.Parameter(b, 0, xe.Shape("f32", (16, 11)), "operand")
si = xe.Parameter(b, 1, xe.Shape("s32", (5, 2)), "start_indices")
for kw in (dict(batch_of_slices, slice_sizes=[8, 12]),
           dict(batch_of_slices, offset_dims=[1], collapsed_slice_dims=[0]),
           dict(batch_of_slices, start_index_map=[0])):
    try:
        xe.Gather(op, si, **kw)
    except xe.ShapeError as e:
        print("ShapeError:", e)

# %% [markdown]
# ## 4. `index_vector_dim`
#
# The spec's examples keep the start vectors in the *last* dimension of `start_indices`, but
# any dimension will do: `index_vector_dim` names it. The same 5 starts, stored as
# `s32[2, 5]` (one row per component), give the same result with `index_vector_dim=0`. And
# when `index_vector_dim` equals the rank of `start_indices`, every element is a start vector
# of length 1 (an implicit trailing dimension of size 1): row numbers `s32[4, 5]` with
# `index_vector_dim=2`.

# %%
by_column = xe.Gather(operand, starts.T.copy(), **dict(batch_of_slices, index_vector_dim=0))
print(np.array_equal(by_column, slices.run(operand, starts)))
implicit = xe.Gather(operand, rows[..., 0], **gather_nd)
print(implicit.shape, np.array_equal(implicit, picked))

# %% [markdown]
# ## 5. Out of bounds: starts are clamped
#
# The 2018 page says nothing about starts that put a slice partly outside the operand. XLA
# does what `DynamicSlice` does: it *clamps* each start into `[0, dim - slice_size]`, so a
# slice is always read whole and in bounds. A start of `(15, 10)` with slices of `[8, 6]`
# reads the slice at `(8, 5)`; a negative start reads at 0.

# %%
oob = np.array([[15, 10], [-3, 2]], np.int32)
b = xe.XlaBuilder("clamped")
op = xe.Parameter(b, 0, xe.Shape("f32", (16, 11)), "operand")
si = xe.Parameter(b, 1, xe.Shape("s32", (2, 2)), "start_indices")
clamped = b.build(xe.Gather(op, si, **batch_of_slices))
out = clamped.run(operand, oob)
print(np.array_equal(out[0], operand[8:16, 5:11]), np.array_equal(out[1], operand[0:8, 2:8]))
access = xe.index_map(clamped, clamped.entry.root.name, operand, oob)[0, 0, 0]
print(access.clamped, access.detail["full_start_index_before_clamp"], "->", access.detail["full_start_index"])

# %% [markdown]
# XLA itself agrees (the `jax` backend runs the same HLO on XLA:CPU):

# %%
np.array_equal(clamped.run(operand, oob, backend="jax"), out)

# %% [markdown]
# In the picture, the slice drawn at its clamped start is coloured differently:

# %%
xe.animate(clamped, clamped.entry.root.name, operand, oob, max_steps=8)

# %% [markdown]
# Without the arguments there are no start indices to read: the map is built from the
# shapes alone (nothing is allocated, so this works for an operand of any size) and says
# what it does not know. Each result element reads *one of* the elements its offset
# allows, here one of the 9 x 6 cells of the operand a clamped start can reach:

# %%
unknown = xe.index_map(clamped, clamped.entry.root.name)[0, 0, 0]
print(unknown.unknown, len(unknown.reads), unknown.reads)

# %% [markdown]
# ## 6. Batching dimensions: what `jax.vmap` emits
#
# The newer spec adds `operand_batching_dims` and `start_indices_batching_dims`. They pair a
# dimension of the operand with a dimension of the indices: result batch element `b` reads
# operand batch element `b`, no start index needed. It is exactly what `vmap` of an indexing
# op needs: each row of `xs` is indexed with its own row of `ids`.

# %%
from xla_explorer.jax_bridge import load_jax

jax = load_jax()
xs = np.arange(15, dtype=np.float32).reshape(3, 5)
ids = np.array([[4, 0], [1, 1], [2, -2]], np.int32)
per_row = xe.from_jax(jax.vmap(lambda row, i: row[i]), xs, ids)
print(per_row.as_hlo_text())

# %% [markdown]
# JAX first turns negative indices into positive ones (`i + 5` where `i < 0`, the `select`),
# then gathers with `operand_batching_dims={0}` paired with `start_indices_batching_dims={0}`.
# In the index map this shows up as a `full_batching_index`, added to the start:

# %%
# the run's trace finds the gather wherever JAX put it (here the entry computation)
vgather = next(r.name for r in per_row.trace(xs, ids).records if r.opcode == "gather")
access = xe.index_map(per_row, vgather, xs, ids)[2, 1]
for key in ("batch_index", "full_start_index", "full_batching_index", "operand_index"):
    print(f"{key:20} {access.detail[key]}")
print(per_row.run(xs, ids))
per_row.diff(xs, ids)

# %%
xe.animate(per_row, vgather, xs, ids)

# %% [markdown]
# ## 7. Scatter: the write
#
# `Scatter(operand, scatter_indices, updates, update_computation, ...)` runs the gather recipe
# the other way round, over the *updates*: each update element `U` finds its operand index `I`
# (its scatter dimensions pick a start vector, `scatter_dims_to_operand_dims` spreads it,
# the window dimensions are the offsets, `inserted_window_dims` are the size-1 dimensions
# left out of the window), and the result there becomes
# `update_computation(result[I], updates[U])`. The spec insists on the argument order: the
# current value first, the update second.
#
# `x.at[idx].add(u)` on a vector is the simplest case: windows of one element.

# %%
vector_add = dict(update_window_dims=[], inserted_window_dims=[0], scatter_dims_to_operand_dims=[0],
                  index_vector_dim=1)
b = xe.XlaBuilder("scatter_add")
x = xe.Parameter(b, 0, xe.Shape("f32", (6,)), "x")
i = xe.Parameter(b, 1, xe.Shape("s32", (5, 1)), "idx")
u = xe.Parameter(b, 2, xe.Shape("f32", (5,)), "u")
scatter_add = b.build(xe.Scatter(x, i, u, lambda a, c: xe.Add(a, c), **vector_add))
print(scatter_add.as_hlo_text())
x_val = np.zeros(6, np.float32)
idx_val = np.array([[1], [3], [1], [5], [1]], np.int32)
u_val = np.float32([10, 20, 30, 40, 50])
scatter_add.run(x_val, idx_val, u_val)

# %% [markdown]
# Index 1 received three updates, which *collide*: they are combined one after the other,
# `((0 + 10) + 30) + 50 = 90`. The scatter's index map is over the updates, with the
# result elements each one writes:

# %%
for access in xe.index_map(scatter_add, scatter_add.entry.root.name, x_val, idx_val, u_val):
    print("update", list(access.index), "-> result", [list(w[1]) for w in access.writes])

# %%
xe.animate(scatter_add, scatter_add.entry.root.name, x_val, idx_val, u_val)

# %% [markdown]
# ## 8. Out of bounds: whole windows are skipped
#
# Unlike Gather, Scatter does **not** clamp. XLA skips an update window that does not fit
# entirely inside the operand -- the whole window, even if part of it would fit. Here 2x2
# windows go into a 4x3 operand: the window at `[0, 0]` and the one at `[2, 1]` fit; `[3, 0]`
# sticks out at the bottom, `[1, -1]` at the left and `[0, 2]` at the right, so all three
# are skipped.

# %%
windows = dict(update_window_dims=[1, 2], inserted_window_dims=[], scatter_dims_to_operand_dims=[0, 1],
               index_vector_dim=1)
b = xe.XlaBuilder("windows")
o = xe.Parameter(b, 0, xe.Shape("f32", (4, 3)), "operand")
si = xe.Parameter(b, 1, xe.Shape("s32", (5, 2)), "scatter_indices")
up = xe.Parameter(b, 2, xe.Shape("f32", (5, 2, 2)), "updates")
scatter_windows = b.build(xe.Scatter(o, si, up, lambda a, c: xe.Add(a, c), **windows))
o_val = np.zeros((4, 3), np.float32)
si_val = np.array([[0, 0], [2, 1], [3, 0], [1, -1], [0, 2]], np.int32)
up_val = np.arange(1, 21, dtype=np.float32).reshape(5, 2, 2)
print(scatter_windows.run(o_val, si_val, up_val))
smap = xe.index_map(scatter_windows, scatter_windows.entry.root.name, o_val, si_val, up_val)
print("skipped windows:", sorted({a.index[0] for a in smap if a.skipped}))
np.array_equal(scatter_windows.run(o_val, si_val, up_val, backend="jax"),
               scatter_windows.run(o_val, si_val, up_val))

# %%
xe.animate(scatter_windows, scatter_windows.entry.root.name, o_val, si_val, up_val, max_steps=20)

# %% [markdown]
# ## 9. Non-commutative combiners and the order of updates
#
# The spec says the order in which colliding updates are applied is not defined, so with a
# combiner that is not commutative and associative the result is not either. XLA:CPU applies
# them in row-major order of the scatter indices, and xla_explorer does the same. A combiner
# that *shows* the order: `a * 10 + c` writes the updates as the digits of a number.

# %%
b = xe.XlaBuilder("digits")
x = xe.Parameter(b, 0, xe.Shape("f32", (4,)), "x")
i = xe.Parameter(b, 1, xe.Shape("s32", (5, 1)), "idx")
u = xe.Parameter(b, 2, xe.Shape("f32", (5,)), "u")
digits = b.build(xe.Scatter(x, i, u, lambda a, c: xe.Add(xe.Mul(a, np.float32(10)), c), **vector_add))
args = (np.zeros(4, np.float32), np.array([[2], [0], [2], [2], [9]], np.int32), np.float32([1, 5, 2, 3, 7]))
for backend in ("numpy", "numba", "jax"):
    print(f"{backend:6}", digits.run(*args, backend=backend))

# %% [markdown]
# Element 2 got updates 1, 2 and 3 in that order (`123`); the update for index 9 was skipped.
# "Set" semantics (`x.at[i].set(u)`) are the combiner `lambda a, c: c`: the last colliding
# update in row-major order wins. And the current value really is the first argument:

# %%
print(xe.Scatter(args[0], args[1], args[2], lambda a, c: c, **vector_add))
print(xe.Scatter(np.ones(4, np.float32), args[1], args[2], lambda a, c: xe.Sub(a, c), **vector_add))
