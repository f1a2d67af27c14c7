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
# # Broadcasting, with sizes known only at run time
#
# [![Binder](https://mybinder.org/badge_logo.svg)](https://mybinder.org/v2/gh/xla-explorer/xla_explorer/main?labpath=notebooks%2Fbroadcasting.ipynb)
#
# `f32[3,1] + f32[1,4]` is `f32[3,4]`: everyone knows broadcasting for static shapes. But XLA
# shapes may also have a **dynamic** dimension, `?`, whose size is known only when the program
# runs, or a **bounded** one, `<=N`: dynamic, and at most N. What shape does `f32[?,3] +
# f32[1,3]` have? When is `f32[?] + f32[4]` legal?
#
# MLIR answers with the `Broadcastable` trait (spec/002): three small tables, for one dimension,
# for whole shapes, and for checking a declared result. xla_explorer's builder follows them
# (`xla_explorer.shapes`); this notebook goes through them with the code that implements them.

# %%
import numpy as np
import xla_explorer as xe
from xla_explorer.shapes import infer_dim, infer_result_shape, infer_shape, verify_broadcast


def S(text):
    return xe.Shape.parse(text)


def fmt(dims):
    return "[" + ",".join("?" if d is None else str(d) for d in dims) + "]"

# %% [markdown]
# ## 1. One dimension: `InferDim`
#
# Each dimension is one of three kinds: dynamic `?`, static `1`, static `>1`. For two operands'
# sizes `dim0` and `dim1` (in either order) the inferred size is:
#
# | `dim0` | `dim1` | inferred | at run time |
# | --- | --- | --- | --- |
# | `?` | `?` | `?` | whichever is 1 stretches to the other; both > 1 and different: undefined |
# | `?` | `1` | `?` | the 1 stretches to the run-time size |
# | `?` | `N>1` | `N` | the `?` must turn out to be 1 or N |
# | `1` | `1` | `1` | |
# | `1` | `N>1` | `N` | the 1 stretches |
# | `N>1` | `M>1` | `N` | an error at build time unless N == M |
#
# The third line is the interesting one: a static size wins over a dynamic one, because the only
# legal run-time sizes for `?` are 1 and N, and both give N. `infer_dim` is this table, with
# `None` for `?`:

# %%
for d0, d1 in [(None, None), (None, 1), (None, 4), (1, 1), (1, 4), (4, 4)]:
    print(f"{'?' if d0 is None else d0:>2} with {'?' if d1 is None else d1:>2} -> "
          f"{'?' if infer_dim(d0, d1) is None else infer_dim(d0, d1)}")
try:
    infer_dim(3, 4)
except xe.ShapeError as e:
    print(e)

# %% [markdown]
# ## 2. Whole shapes: `InferShape` and `InferResultShape`
#
# Ranks are equalized first: the shorter shape gets 1s on the *left* (so a vector lines up with
# a matrix's rows, as in NumPy). Then `InferDim` runs per dimension. For more than two
# operands, the inferred shape is folded over them one by one.

# %%
for a, b in [("[?,3]", "[1,3]"), ("[?,1]", "[5]"), ("[2,?,1]", "[?,4]"), ("[?]", "[?]")]:
    dims_a = [None if t == "?" else int(t) for t in a[1:-1].split(",")]
    dims_b = [None if t == "?" else int(t) for t in b[1:-1].split(",")]
    print(f"{a:8} + {b:6} -> {fmt(infer_shape(dims_a, dims_b))}")
print("three operands [?,1], [1,5], [3,1,1] ->",
      fmt(infer_result_shape([S("f32[?,1]"), S("f32[1,5]"), S("f32[3,1,1]")])))

# %% [markdown]
# The builder uses exactly this when an element-wise op gets operands of different shapes:
# the shape of `Add` below is known before anything runs.

# %%
b = xe.XlaBuilder("dyn")
x = xe.Parameter(b, 0, S("f32[?,3]"), "x")
row = xe.Parameter(b, 1, S("f32[1,3]"), "row")
col = xe.Parameter(b, 2, S("f32[4,1]"), "col")
print("f32[?,3] + f32[1,3] ->", xe.Add(x, row).shape)
print("f32[?,3] + f32[4,1] ->", xe.Add(x, col).shape, "  (the ? must be 1 or 4 at run time)")

# %% [markdown]
# ## 3. Bounded dimensions `<=N`
#
# A bounded dimension is dynamic with a known maximum: XLA can allocate the maximum and carry
# the actual size beside the buffer. For broadcasting it behaves as `?` does, and the bound
# travels with it: `f32[<=4,3] + f32[1,3]` is `f32[<=4,3]`. Combined with a plain `?`, the
# bound is the better knowledge and is kept.

# %%
bx = xe.XlaBuilder("bounded")
p = xe.Parameter(bx, 0, S("f32[<=4,3]"), "p")
q = xe.Parameter(bx, 1, S("f32[1,3]"), "q")
r = xe.Parameter(bx, 2, S("f32[?,3]"), "r")
print(xe.Add(p, q).shape, xe.Add(p, r).shape)
print("is dimension 0 dynamic?", p.shape.is_dynamic_dimension(0), "| bound:", p.shape.bounds[0])

# %% [markdown]
# At run time a bounded parameter takes any size up to its bound, and refuses more:

# %%
twice = xe.XlaBuilder("twice")
v = xe.Parameter(twice, 0, S("f32[<=4]"), "v")
comp = twice.build(v * 2.0)
print(comp.run(np.arange(3, dtype=np.float32)))
try:
    comp.run(np.arange(5, dtype=np.float32))
except xe.ExecutionError as e:
    print(e)

# %% [markdown]
# ## 4. What `?` means when the program runs
#
# The trait leaves one case to run time: two `?` sizes that both turn out larger than 1 and
# different. MLIR calls that undefined behaviour; our reference executor stops with an error
# naming the instruction.

# %%
bb = xe.XlaBuilder("both_dynamic")
u = xe.Parameter(bb, 0, S("f32[?,3]"), "u")
w = xe.Parameter(bb, 1, S("f32[?,3]"), "w")
both = bb.build(xe.Add(u, w))
print(both.run(np.ones((2, 3), np.float32), np.ones((2, 3), np.float32)))        # 2 and 2
print(both.run(np.ones((1, 3), np.float32), np.arange(6, dtype=np.float32).reshape(2, 3)))  # 1 stretches
try:
    both.run(np.ones((2, 3), np.float32), np.ones((3, 3), np.float32))           # 2 and 3
except xe.ExecutionError as e:
    print("ExecutionError:", str(e)[:120])

# %% [markdown]
# A program can ask for a dynamic size with `GetDimensionSize` (an `s32[]` known at run time):

# %%
bs = xe.XlaBuilder("size")
z = xe.Parameter(bs, 0, S("f32[<=8]"), "z")
size = bs.build(xe.GetDimensionSize(z, 0))
print([int(size.run(np.zeros(n, np.float32))) for n in (0, 3, 8)])

# %% [markdown]
# ## 5. Checking a declared result: `Verify`
#
# When an op's result type is written down (in HLO text, or in MLIR), the trait checks it
# against the inferred shape, dimension by dimension:
#
# | inferred | declared | |
# | --- | --- | --- |
# | `?` | `?` | OK |
# | `?` | static | **error**: the operands cannot promise a static size |
# | static | `?` | OK: a declared result may know less than the operands do |
# | static | static | OK if equal |

# %%
cases = [(["f32[?,3]", "f32[1,3]"], [None, 3]),
         (["f32[?,3]", "f32[1,3]"], [4, 3]),
         (["f32[2,3]", "f32[3]"], [None, 3]),
         (["f32[2,3]", "f32[3]"], [2, 4]),
         (["f32[2,3]", "f32[3]"], [2, 3, 1])]
for operands, declared in cases:
    try:
        verify_broadcast([S(t) for t in operands], declared)
        verdict = "OK"
    except xe.ShapeError as e:
        verdict = "error: " + str(e).split(": ", 1)[1]
    print(f"{' + '.join(operands):22} declared {fmt(declared):9} {verdict}")

# %% [markdown]
# ## 6. The other spelling: `broadcast_dimensions`
#
# The XlaBuilder API also lets a lower-rank operand name the dimensions of the higher-rank one
# it lines up with, instead of padding with 1s on the left: `Add(matrix, vector,
# broadcast_dimensions=[0])` adds the vector to every *column*. The same `InferDim` table then
# applies to the dimensions that meet.

# %%
m = np.arange(6, dtype=np.float32).reshape(2, 3)
print(xe.Add(m, np.float32([100, 200]), broadcast_dimensions=[0]))
bd = xe.XlaBuilder("bd")
mat = xe.Parameter(bd, 0, S("f32[?,3]"), "mat")
vec = xe.Parameter(bd, 1, S("f32[5]"), "vec")
print(xe.Add(mat, vec, broadcast_dimensions=[0]).shape, " (the ? meets 5: it must be 1 or 5)")

# %% [markdown]
# **Exercises.** (1) What is `f32[?,1,4] + f32[3,?,1]`? Check with `infer_shape`. (2) Which
# declared results are legal for `f32[<=4] + f32[1]`: `f32[<=4]`, `f32[?]`, `f32[4]`? (3) Why
# may a declared result be *more* dynamic than the inferred one, but not less?
