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
# # 5. Linear algebra: Dot, DotGeneral, convolutions, FFT, Cholesky, TriangularSolve
#
# [![Binder](https://mybinder.org/badge_logo.svg)](https://mybinder.org/v2/gh/xla-explorer/xla_explorer/main?labpath=notebooks%2F05_linalg.ipynb)
#
# Two ops do nearly all of a neural network's arithmetic: `dot` (every matmul, every
# `einsum`) and `convolution`. Both are sums of products; what makes them hard to read in
# HLO is their *dimension numbers*: which dimension of which operand plays which role.
# Their index maps list, for a result element, every pair of elements multiplied.

# %%
import numpy as np
import xla_explorer as xe

# %% [markdown]
# ## 1. Dot
#
# `Dot(lhs, rhs)` is the classic product, chosen by the operands' ranks: vector . vector is
# a scalar, matrix . vector a vector, matrix . matrix a matrix. It sums over the last
# dimension of `lhs` and the first (for a matrix: the one before last) of `rhs`; those
# *contracted* dimensions must have the same size.

# %%
m = np.float32([[1, 2], [3, 4]])
print(xe.Dot(np.float32([1, 2]), np.float32([3, 4])), xe.Dot(m, np.float32([1, 1])))
print(xe.Dot(m, m))
try:
    xe.Dot(m, np.float32([1, 1, 1]))
except xe.ShapeError as e:
    print("ShapeError:", e)

# %% [markdown]
# ## 2. DotGeneral and its dimension numbers
#
# `DotGeneral(lhs, rhs, dimension_numbers)` names the dimensions explicitly, in a
# `DotDimensionNumbers`:
#
# - `lhs_contracting_dimensions` / `rhs_contracting_dimensions`: summed over, pairwise;
# - `lhs_batch_dimensions` / `rhs_batch_dimensions`: matched pairwise, not summed (one
#   independent product per batch index).
#
# Every other dimension is *free*. The result is the batch dimensions, then `lhs`'s free
# dimensions, then `rhs`'s. The spec's first example contracts dimension 1 of both
# operands, which is `lhs @ rhs.T`:

# %%
lhs = np.float32([[1, 2, 3], [4, 5, 6]])
rhs = np.float32([[1, 1, 1], [2, 2, 2]])
xe.DotGeneral(lhs, rhs, lhs_contracting_dimensions=[1], rhs_contracting_dimensions=[1])

# %% [markdown]
# The index map of one result element lists the pairs of elements multiplied together; the
# animation shows them for every result element:

# %%
nt = dict(lhs_contracting_dimensions=[1], rhs_contracting_dimensions=[1])
print(xe.index_map("dot", lhs, rhs, **nt)[1, 1].detail["pairs"])
xe.animate("dot", lhs, rhs, **nt)

# %% [markdown]
# The spec's second example is a batch of two 2x2 matmuls (batch dimension 0 on both
# sides). The dimension numbers can be a `DotDimensionNumbers`, keywords, or JAX's nested
# tuple `((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch))`:

# %%
bl = np.float32([[[1, 2], [3, 4]], [[5, 6], [7, 8]]])
br = np.stack([np.eye(2, dtype=np.float32)] * 2)
dn = xe.DotDimensionNumbers(lhs_contracting_dimensions=[2], rhs_contracting_dimensions=[1],
                            lhs_batch_dimensions=[0], rhs_batch_dimensions=[0])
print(np.array_equal(xe.DotGeneral(bl, br, dn), xe.DotGeneral(bl, br, (([2], [1]), ([0], [0])))))
xe.DotGeneral(bl, br, dn)

# %% [markdown]
# The 2018 page allowed exactly one contracting dimension and wanted batch dimensions to
# come first. Today's `dot` is more general, and JAX emits it freely: several contracting
# dimensions (in any order, paired by position), batch dimensions anywhere. Each case is an
# `einsum`:

# %%
a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
c = np.arange(24, dtype=np.float32).reshape(4, 3, 2)
two = xe.DotGeneral(a, c, lhs_contracting_dimensions=[1, 2], rhs_contracting_dimensions=[1, 0])
print(two.shape, np.allclose(two, np.einsum("ajk,kjb->ab", a, c)))

a = np.arange(24, dtype=np.float32).reshape(3, 2, 4)      # m, batch, k
c = np.arange(40, dtype=np.float32).reshape(4, 5, 2)      # k, n, batch
inner = xe.DotGeneral(a, c, lhs_contracting_dimensions=[2], rhs_contracting_dimensions=[0],
                      lhs_batch_dimensions=[1], rhs_batch_dimensions=[2])
print(inner.shape, np.allclose(inner, np.einsum("mbk,knb->bmn", a, c)))

# %% [markdown]
# What JAX emits for an `einsum`, and the same product checked against XLA:

# %%
from xla_explorer.jax_bridge import load_jax

jax = load_jax()
jnp = jax.numpy
q = np.random.default_rng(0).normal(size=(2, 3, 4)).astype(np.float32)
k = np.random.default_rng(1).normal(size=(2, 5, 4)).astype(np.float32)
scores = xe.from_jax(lambda q, k: jnp.einsum("bqd,bkd->bqk", q, k), q, k)
print(scores.as_hlo_text())
scores.diff(q, k)

# %% [markdown]
# The accumulation type: the sum runs in the result type, which `preferred_element_type`
# may widen. Two `s8` operands multiplied into an `s8` wrap around; asked for `s32`, they
# do not:

# %%
i8 = dict(lhs_contracting_dimensions=[1], rhs_contracting_dimensions=[0])
print(xe.DotGeneral(np.int8([[100, 100]]), np.int8([[100], [100]]), **i8))
print(xe.DotGeneral(np.int8([[100, 100]]), np.int8([[100], [100]]), preferred_element_type="s32", **i8))

# %% [markdown]
# ## 3. Convolution
#
# In the spec's words, a convolution is an n-dimensional *window* (the kernel, `rhs`)
# moving over an n-dimensional *base area* (the input, `lhs`); at every position it takes
# the sum of products between the window and the piece of the base under it, over all
# input features too. By default `lhs` is `[batch, feature, spatial...]`, `rhs` is
# `[output-feature, input-feature, spatial...]` and the result `[batch, feature,
# spatial...]`.
#
# A 2x2 kernel that subtracts the element down-right of each element, over a 4x4 input:

# %%
x = np.arange(1, 17, dtype=np.float32).reshape(1, 1, 4, 4)
kern = np.float32([[[[1, 0], [0, -1]]]])
print(xe.ConvWithGeneralPadding(x, kern, [1, 1], [(0, 0), (0, 0)])[0, 0])
print(xe.Conv(np.ones((1, 1, 3, 3), np.float32), np.ones((1, 1, 3, 3), np.float32), [1, 1], "SAME")[0, 0])

# %% [markdown]
# The second line is a 3x3 box sum with `"SAME"` padding (zeros added so the output keeps
# the input's 3x3 size): corners see 4 elements, edges 6, the centre 9.
#
# ### Dimension numbers
#
# Real programs rarely use that default layout. `dimension_numbers` says where batch,
# feature and spatial dimensions are, for the input, the kernel and the output. JAX and
# TensorFlow write it as layout strings (`("NHWC", "HWIO", "NHWC")`); HLO writes it as
# `dim_labels=b01f_01io->b01f` (`b` batch, `f` feature, `i`/`o` kernel input/output feature,
# digits the spatial dimensions in order).

# %%
xn = x.transpose(0, 2, 3, 1).copy()        # NCHW -> NHWC
kn = kern.transpose(2, 3, 1, 0).copy()     # OIHW -> HWIO
r1 = xe.ConvGeneralDilated(xn, kn, [1, 1], "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC"))
r2 = xe.ConvGeneralDilated(xn, kn, [1, 1], "VALID", dimension_numbers="b01f_01io->b01f")
print(r1.shape, np.array_equal(r1, r2))
print(xe.ConvDimensionNumbers(input_batch_dimension=0, input_feature_dimension=3, input_spatial_dimensions=(1, 2),
                              kernel_input_feature_dimension=2, kernel_output_feature_dimension=3,
                              kernel_spatial_dimensions=(0, 1), output_batch_dimension=0,
                              output_feature_dimension=3, output_spatial_dimensions=(1, 2)))

# %% [markdown]
# ### Padding and dilations
#
# `padding` adds zeros around the base area (negative values crop). `rhs_dilation` spreads
# the kernel's taps apart (d - 1 holes between them: *atrous* convolution); `lhs_dilation`
# spreads the input apart (holes filled with zeros), which is how a *transposed*
# convolution is written. Here the 2x2 kernel with `rhs_dilation=2` reaches 2 elements
# away, on an input padded by 1 on every side:

# %%
b = xe.XlaBuilder("atrous")
p = xe.Parameter(b, 0, xe.Shape("f32", (1, 4, 4, 1)), "x")
w = xe.Parameter(b, 1, xe.Shape("f32", (2, 2, 1, 1)), "w")
atrous = b.build(xe.ConvGeneralDilated(p, w, [1, 1], [(1, 1), (1, 1)], rhs_dilation=[2, 2],
                                       dimension_numbers=("NHWC", "HWIO", "NHWC")))
print(atrous.as_hlo_text())
print(atrous.run(xn, kn)[0, :, :, 0])
atrous.diff(xn, kn)

# %% [markdown]
# For result `[0, 0, 0, 0]` three of the four taps fall in the padding; only one product
# remains. The animation walks the first 9 output positions:

# %%
conv = atrous.entry.root.name
print(xe.index_map(atrous, conv, xn, kn)[0, 0, 0, 0].detail)
xe.animate(atrous, conv, xn, kn, max_steps=9)

# %% [markdown]
# `lhs_dilation=2` on a 1-D input `[1, 2, 3]` makes the base `[1, 0, 2, 0, 3]`; padded by 1 and
# convolved with `[1, 1]`, every input value is repeated twice (a nearest-neighbour
# upsampling written as a transposed convolution):

# %%
xe.ConvGeneralDilated(np.float32([[[1, 2, 3]]]), np.float32([[[1, 1]]]), [1], [(1, 1)], lhs_dilation=[2])

# %% [markdown]
# ### Feature groups
#
# `feature_group_count = G` splits the input features, and the kernel's output features,
# into G consecutive groups; group `g` of the output only sees group `g` of the input. The
# kernel's input-feature dimension has the size of one group. With G equal to the number
# of input features this is a *depthwise* convolution. Below, 4 input features in 2 groups:
# output feature 0 reads input features 0 and 1, output feature 1 reads 2 and 3.

# %%
x1 = np.arange(20, dtype=np.float32).reshape(1, 4, 5)           # [batch, feature, width]
k1 = np.float32([[[1], [10]], [[100], [1000]]])                   # [out, in per group, width]
print(xe.ConvGeneralDilated(x1, k1, [1], "VALID", feature_group_count=2)[0])
grouped = dict(window_strides=[1], padding=[(0, 0)], feature_group_count=2)
access = xe.index_map("ConvGeneralDilated", x1, k1, **grouped)[0, 1, 2]
print("group", access.detail["group"], "pairs", access.detail["pairs"])

# %%
xe.animate("ConvGeneralDilated", x1, k1, max_steps=10, **grouped)

# %% [markdown]
# The group count must divide the feature sizes; the error says which:

# %%
try:
    xe.ConvGeneralDilated(x1, k1, [1], "VALID", feature_group_count=3)
except xe.ShapeError as e:
    print("ShapeError:", e)

# %% [markdown]
# `batch_group_count` does the same with the input *batch* and the output features (it
# appears in the gradient of a grouped convolution with respect to its kernel): here two
# batch elements, each convolved with its own output feature.

# %%
xe.ConvGeneralDilated(np.arange(6, dtype=np.float32).reshape(2, 1, 3), np.ones((2, 1, 2), np.float32),
                      [1], "VALID", batch_group_count=2)

# %% [markdown]
# ## 4. FFT
#
# `Fft(operand, fft_type, fft_length)` transforms the innermost `len(fft_length)` dimensions
# (1 to 3). `FFT` and `IFFT` go complex to complex (the inverse divides by N). `RFFT` takes a
# real signal and keeps only the non-redundant half of its spectrum, `N // 2 + 1` entries;
# `IRFFT` goes back, and needs `fft_length` to know N.

# %%
sig = np.float32([0, 1, 0, -1, 0, 1, 0, -1])          # two periods of a sine
spectrum = xe.Fft(sig, "RFFT", [8])
print(spectrum.shape, np.round(spectrum, 3))
print(xe.Fft(spectrum, "IRFFT", [8]))
print(np.round(xe.Fft(sig.astype(np.complex64), "FFT", [8]), 3))

# %%
b = xe.XlaBuilder("rfft")
s = xe.Parameter(b, 0, xe.Shape("f32", (2, 8)), "x")
rfft = b.build(xe.Fft(s, "RFFT", [8]))
print(rfft.as_hlo_text())
rfft.diff(np.stack([sig, np.arange(8, dtype=np.float32)]))

# %%
try:
    xe.Fft(sig, "RFFT", [6])
except xe.ShapeError as e:
    print("ShapeError:", e)

# %% [markdown]
# ## 5. Cholesky and TriangularSolve
#
# `Cholesky(a, lower)` factors a symmetric positive definite matrix as `l @ l.T` (`l` lower
# triangular) or `u.T @ u`. `TriangularSolve(a, b, left_side, lower, unit_diagonal,
# transpose_a)` solves `op(a) @ x = b` (or `x @ op(a) = b`) for a triangular `a`. Together
# they solve `A x = b`: `L y = b`, then `L^T x = y`. Leading dimensions are batch dimensions.

# %%
A = np.float32([[4, 12, -16], [12, 37, -43], [-16, -43, 98]])
rhs_b = np.float32([[1], [2], [3]])
b = xe.XlaBuilder("cho_solve")
a_p = xe.Parameter(b, 0, xe.Shape("f32", (3, 3)), "a")
b_p = xe.Parameter(b, 1, xe.Shape("f32", (3, 1)), "b")
L = xe.Cholesky(a_p)
y = xe.TriangularSolve(L, b_p, left_side=True, lower=True)
cho_solve = b.build(xe.TriangularSolve(L, y, left_side=True, lower=True, transpose_a="TRANSPOSE"))
print(cho_solve.as_hlo_text())
print(cho_solve.run(A, rhs_b).ravel(), np.linalg.solve(A, rhs_b).ravel())
cho_solve.diff(A, rhs_b)

# %% [markdown]
# Both ops read only one triangle of `a` (the other may hold anything), and with
# `unit_diagonal` not even its diagonal:

# %%
L_val = xe.Cholesky(A)
junk = L_val + np.triu(np.full((3, 3), 99, np.float32), 1)          # garbage above the diagonal
print(np.array_equal(xe.TriangularSolve(junk, rhs_b), xe.TriangularSolve(L_val, rhs_b)))
print(xe.TriangularSolve(np.float32([[5, 0], [3, 7]]), np.float32([[1], [2]]), unit_diagonal=True).ravel())

# %% [markdown]
# The spec leaves two things to the implementation: what the *other* triangle of the result
# holds, and the result for a matrix that is not positive definite. The reference writes zeros
# in the other triangle, and NaN everywhere for a matrix that is not positive definite; the
# `jax` backend (which runs JAX's own Cholesky) keeps the zeros above the diagonal. Both
# are allowed, so a difference here is not a bug:

# %%
b = xe.XlaBuilder("cholesky")
cholesky = b.build(xe.Cholesky(xe.Parameter(b, 0, xe.Shape("f32", (2, 2)), "a")))
not_pd = np.float32([[1, 2], [2, 1]])
print(cholesky.run(not_pd))
print(cholesky.run(not_pd, backend="jax"))
