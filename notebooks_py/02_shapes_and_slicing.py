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
# # 2. Shapes and slicing: reshape, transpose, broadcast, rev, concatenate, slice, pad
#
# [![Binder](https://mybinder.org/badge_logo.svg)](https://mybinder.org/v2/gh/xla-explorer/xla_explorer/main?labpath=notebooks%2F02_shapes_and_slicing.ipynb)
#
# These ops compute nothing: every result element is a copy of one operand element (or a
# padding value). So each one is fully described by its *index map*: for a result index,
# which operand index it reads. xla_explorer has that map for every op in this notebook;
# `xe.index_map` prints it and `xe.animate` draws it, with the spec's formula filled in.

# %%
import numpy as np
import xla_explorer as xe


def show(imap, count=4):
    """The first `count` steps of an index map: result index <- operand index."""
    for access in list(imap)[:count]:
        reads = ", ".join(f"operand {k}{list(i)}" for k, i in access.reads) or access.source
        print(f"result{list(access.index)} <- {reads}" + ("   (clamped)" if access.clamped else ""))


# %% [markdown]
# ## 1. Reshape and Collapse
#
# Reshape, as the spec describes it, first flattens the operand into one long vector and
# then fills a new shape from it; both in row-major order (the last dimension varies
# fastest). The product of `new_sizes` must equal the operand's element count. The spec's
# running example is a `f32[4x2x3]` array `v`:

# %%
v = np.array([[[10, 11, 12], [15, 16, 17]], [[20, 21, 22], [25, 26, 27]],
              [[30, 31, 32], [35, 36, 37]], [[40, 41, 42], [45, 46, 47]]], np.float32)
xe.Reshape(v, new_sizes=[8, 3])

# %% [markdown]
# The older form `Reshape(operand, dimensions, new_sizes)` flattens in the order that
# `dimensions` gives (most major first), which is a transpose followed by a reshape; the
# builder records exactly those two instructions. With `dimensions={1,2,0}` the 24 values
# come out column by column of the original:

# %%
b = xe.XlaBuilder("reshape_021")
vp = xe.Parameter(b, 0, xe.Shape("f32", (4, 2, 3)), "v")
reshape_021 = b.build(xe.Reshape(vp, dimensions=[1, 2, 0], new_sizes=[8, 3]))
print(reshape_021.as_hlo_text())
reshape_021.run(v)

# %% [markdown]
# The index map of a reshape goes through the *linear* (row-major) position:

# %%
show(xe.index_map("reshape", v, new_sizes=[8, 3]))

# %% [markdown]
# `Collapse(operand, dimensions)` merges consecutive dimensions, given in order, into one of
# their product's size; it is a reshape. Out-of-order or non-adjacent dimensions break its
# rule, and a reshape that changes the element count breaks Reshape's:

# %%
print(xe.Collapse(v, dimensions=[0, 1]).shape, xe.Collapse(v, dimensions=[1, 2]).shape)
for bad in (lambda: xe.Collapse(v, dimensions=[0, 2]), lambda: xe.Reshape(v, new_sizes=[5, 5])):
    try:
        bad()
    except xe.ShapeError as e:
        print("ShapeError:", e)

# %% [markdown]
# A one-element array reshapes to a scalar and back:

# %%
xe.Reshape(np.float32([[5]]), new_sizes=[]), xe.Reshape(np.float32(5), new_sizes=[1, 1])

# %% [markdown]
# ## 2. Transpose
#
# `Transpose(operand, permutation)` renumbers the dimensions: result dimension `i` is
# operand dimension `permutation[i]`. Element-wise: the result index, scattered back through
# the permutation, is the operand index.

# %%
t = xe.Transpose(v, permutation=[2, 0, 1])
print(t.shape)
show(xe.index_map("transpose", v, permutation=[2, 0, 1]))

# %% [markdown]
# ## 3. Broadcast and BroadcastInDim
#
# `Broadcast(operand, broadcast_sizes)` adds new dimensions on the *left*; the new indices
# are ignored, so every slice is a copy. `BroadcastInDim(operand, out_dim_size,
# broadcast_dimensions)` is the general form (and HLO's only `broadcast`): operand dimension
# `d` becomes result dimension `broadcast_dimensions[d]`, and must have size 1 or that
# dimension's size.

# %%
print(xe.Broadcast(np.float32(2.0), broadcast_sizes=[2, 3]))
row = np.float32([1, 2])
print(xe.BroadcastInDim(row, out_dim_size=[3, 2], broadcast_dimensions=[1]))
print(xe.BroadcastInDim(row, out_dim_size=[2, 3], broadcast_dimensions=[0]))
try:
    xe.BroadcastInDim(np.float32([1, 2, 3]), out_dim_size=[3, 2], broadcast_dimensions=[1])
except xe.ShapeError as e:
    print("ShapeError:", e)

# %% [markdown]
# Which operand element does result `[2, 1]` read when the vector goes to dimension 1?

# %%
print(xe.index_map("BroadcastInDim", row, out_dim_size=[3, 2], broadcast_dimensions=[1])[2, 1])

# %% [markdown]
# ## 4. Rev
#
# `Rev(operand, dimensions)` reverses the listed dimensions: in a reversed dimension of size
# N, index `i` reads `N - 1 - i`. The spec mentions its use in convolution gradients (the
# kernel flipped along its spatial dimensions).

# %%
m = np.arange(12, dtype=np.float32).reshape(4, 3)
print(xe.Rev(m, dimensions=[0]))
show(xe.index_map("Rev", m, dimensions=[0, 1]), 3)

# %% [markdown]
# ## 5. Concatenate
#
# `Concatenate(operands..., dimension)`: N >= 1 arrays of the same rank, equal in every
# dimension except `dimension` (XLA has no ragged arrays), joined in order. Scalars cannot be
# concatenated, as they have no dimension to join along. The spec's two examples:

# %%
print(xe.Concatenate(np.int32([2, 3]), np.int32([4, 5]), np.int32([6, 7]), dimension=0))
a = np.float32([[1, 2], [3, 4], [5, 6]])
c = np.float32([[7, 8]])
print(xe.Concatenate(a, c, dimension=0))
try:
    xe.Concatenate(np.zeros((2, 3), np.float32), np.zeros((2, 4), np.float32), dimension=0)
except xe.ShapeError as e:
    print("ShapeError:", e)

# %% [markdown]
# The index map names the operand each result element comes from, and the offset subtracted:

# %%
print(xe.index_map("Concatenate", a, c, dimension=0)[3, 1].detail)

# %% [markdown]
# ## 6. Slice, with strides
#
# `Slice(operand, start_indices, limit_indices, strides)` cuts out a box: from `start`
# (inclusive) to `limit` (exclusive) per dimension, taking every `strides[d]`-th element.
# So `operand_index = start_indices + result_index * strides`, and dimension `d` of the
# result has `ceil((limit - start) / stride)` elements. The spec's 2-D example, then a
# strided slice:

# %%
b4 = np.arange(12, dtype=np.float32).reshape(4, 3)
print(xe.Slice(b4, start_indices=[2, 1], limit_indices=[4, 3]))
x = np.arange(20, dtype=np.float32).reshape(4, 5)
print(xe.Slice(x, start_indices=[0, 1], limit_indices=[4, 5], strides=[2, 3]))

# %% [markdown]
# The bounds are static, so they are checked when the op is built:

# %%
for kw in (dict(start_indices=[0, 1], limit_indices=[5, 5]),
           dict(start_indices=[2, 1], limit_indices=[1, 5]),
           dict(start_indices=[0, 0], limit_indices=[4, 5], strides=[0, 1])):
    try:
        xe.Slice(x, **kw)
    except xe.ShapeError as e:
        print("ShapeError:", e)

# %% [markdown]
# The strided slice, animated: each frame is one result element, the operand cell it reads,
# and the formula with the numbers in.

# %%
xe.animate("slice", x, start_indices=[0, 1], limit_indices=[4, 5], strides=[2, 3])

# %% [markdown]
# ## 7. DynamicSlice: starts known at run time, clamped
#
# `DynamicSlice(operand, start_indices, slice_sizes)`: the sizes are static, the starts are
# run-time integer scalars. Before slicing, each start is *clamped* into
# `[0, dim - slice_size]`, so the slice is always in bounds: a start that is too large
# slides the window back, a negative one moves it to 0. (The spec asks for starts >= 0 and
# start + size <= dim; the clamp says what happens when they are not.)

# %%
b = xe.XlaBuilder("dynamic_slice")
op = xe.Parameter(b, 0, xe.Shape("f32", (4, 3)), "b")
s0 = xe.Parameter(b, 1, xe.Shape("s32", ()), "s0")
s1 = xe.Parameter(b, 2, xe.Shape("s32", ()), "s1")
dynamic_slice = b.build(xe.DynamicSlice(op, [s0, s1], slice_sizes=[2, 2]))
print(dynamic_slice.as_hlo_text())
print(dynamic_slice.run(b4, np.int32(2), np.int32(1)))    # the spec's example: in bounds
print(dynamic_slice.run(b4, np.int32(3), np.int32(-5)))   # clamped to [2, 0]

# %% [markdown]
# The index map keeps both starts, the given and the adjusted one:

# %%
ds = dynamic_slice.entry.root.name
m = xe.index_map(dynamic_slice, ds, b4, np.int32(3), np.int32(-5))
print(m[0, 0].detail)
show(m)

# %%
xe.animate(dynamic_slice, ds, b4, np.int32(3), np.int32(-5))

# %% [markdown]
# ## 8. DynamicUpdateSlice
#
# `DynamicUpdateSlice(operand, update, start_indices)` is the write: the result is `operand`
# with the block `update` written at the (clamped) start, and everything else unchanged. The
# spec's example writes a 3x2 block at `[1, 1]`; starting it at `[5, 7]` clamps to the same
# place, `[4 - 3, 3 - 2] = [1, 1]`.

# %%
u = np.float32([[12, 13], [14, 15], [16, 17]])
print(xe.DynamicUpdateSlice(b4, u, [np.int32(1), np.int32(1)]))
print(np.array_equal(xe.DynamicUpdateSlice(b4, u, [np.int32(5), np.int32(7)]),
                     xe.DynamicUpdateSlice(b4, u, [np.int32(1), np.int32(1)])))

# %% [markdown]
# Its index map is over the *result*: each element comes from the update or from the
# operand (operand 0 is `operand`, 1 is `update`):

# %%
dus = xe.index_map("dynamic-update-slice", b4, u, np.int32(5), np.int32(7))
print(dus[0, 0].detail["from"], dus[0, 0].reads)
print(dus[3, 2].detail["from"], dus[3, 2].reads)

# %% [markdown]
# ## 9. Pad: edge, interior and negative padding
#
# `Pad(operand, padding_value, padding_config)` has, per dimension, a triple
# `(edge_padding_low, edge_padding_high, interior_padding)`:
#
# - `interior_padding` copies of `padding_value` go between every two neighbouring elements
#   (never negative);
# - then `edge_padding_low` / `edge_padding_high` values go at the start / end. A *negative*
#   edge padding removes that many elements instead -- from the interior-padded array, since
#   interior padding happens first.
#
# Operand element `i` lands at `edge_padding_low + i * (interior_padding + 1)`, and the result
# has `low + high + n + (n - 1) * interior` elements along that dimension.

# %%
print(xe.Pad(np.float32([1, 2, 3]), np.float32(0), padding_config=[(2, 1, 1)]))
print(xe.Pad(np.float32([1, 2, 3]), np.float32(0), padding_config=[(-2, 1, 2)]))

# %% [markdown]
# In the second line the interior-padded vector is `[1 0 0 2 0 0 3]`; the low padding of -2
# cuts `1 0`, the high padding of 1 adds a `0`. In two dimensions, and as an animation
# (padding cells, and the cells that negative padding crops, are coloured):

# %%
small = np.float32([[1, 2, 3], [4, 5, 6], [7, 8, 9]])
config = [(1, -1, 1), (-1, 1, 0)]
print(xe.Pad(small, np.float32(0), padding_config=config))
show(xe.index_map("pad", small, np.float32(0), padding_config=config))

# %%
xe.animate("pad", small, np.float32(0), padding_config=config)

# %% [markdown]
# A result of negative size is refused when the op is built, with the arithmetic shown:

# %%
try:
    xe.Pad(x, np.float32(0), padding_config=[(-3, -3, 0), (0, 0, 0)])
except xe.ShapeError as e:
    print("ShapeError:", e)
