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
# # 1. Element-wise ops: arithmetic, edge cases, comparisons, conversions, broadcasting
#
# [![Binder](https://mybinder.org/badge_logo.svg)](https://mybinder.org/v2/gh/xla-explorer/xla_explorer/main?labpath=notebooks%2F01_elementwise.ipynb)
#
# Element-wise ops look like the easiest part of XLA: `result[i] = lhs[i] + rhs[i]` at every
# index. The interesting part is at the edges: what an integer division by zero gives,
# where NaN and `-0.0` sort, how a float becomes an `u8`, and how two shapes of different
# rank meet. This notebook goes through each, and checks the answers against XLA itself
# (through JAX) where that is instructive.

# %%
import numpy as np
import xla_explorer as xe

# %% [markdown]
# ## 1. Arithmetic, eagerly and in a builder
#
# The spec lists the binary arithmetic ops (`Add`, `Sub`, `Mul`, `Div`, `Rem`, `Max`, `Min`,
# plus the logical and bitwise `And`/`Or`/`Xor`, shifts, `Pow`, `Atan2`, `Complex`). Both
# operands are arrays of one element type `T`; the result has the broadcast shape of the two.
# On NumPy arrays the op functions run at once:

# %%
xe.Add(np.float32([1, 2, 3]), np.float32([10, 20, 30])), xe.Mul(np.int8([64]), np.int8([2]))

# %% [markdown]
# `Mul(64, 2)` in `s8` is `-128`: integer arithmetic wraps around modulo 2^bits, as in C on
# two's-complement machines. In a builder nothing runs: each call records an instruction and
# infers its shape. Mixing element types breaks the "both of type T" rule at once; XLA
# never converts implicitly, you write `ConvertElementType`.

# %%
b = xe.XlaBuilder("arith")
x = xe.Parameter(b, 0, xe.Shape("f32", (3,)), "x")
n = xe.Parameter(b, 1, xe.Shape("s32", (3,)), "n")
try:
    xe.Add(x, n)
except xe.ShapeError as e:
    print("ShapeError:", e)
y = xe.Add(x, xe.ConvertElementType(n, "f32"))
print(b.build(y).as_hlo_text())

# %% [markdown]
# ## 2. Integer edge cases
#
# The spec says that an integer division "overflow" -- dividing (or taking the remainder) by
# zero, or `INT_MIN / -1` for signed types -- gives an *implementation-defined* value. For
# `Rem` it fixes the sign: the result takes the dividend's sign and is smaller in magnitude
# than the divisor. xla_explorer follows what XLA:CPU does (the HLO corpus pins it down):
#
# | expression | result |
# | --- | --- |
# | `x / 0` | `-1` (all bits set; for unsigned types the largest value) |
# | `x % 0` | `x` |
# | `INT_MIN / -1` | `INT_MIN` |
# | `INT_MIN % -1` | `0` |
# | `x << n`, `n >=` bit width (or negative) | `0` |
# | `x >> n` arithmetic, `n >=` bit width | the sign fill: `0` or `-1` |
# | `x >> n` logical, `n >=` bit width | `0` |
#
# Build a small program with all of them and run it on the reference:

# %%
b = xe.XlaBuilder("int_edges")
x = xe.Parameter(b, 0, xe.Shape("s32", (6,)), "x")
y = xe.Parameter(b, 1, xe.Shape("s32", (6,)), "y")
int_edges = b.build(xe.Tuple(xe.Div(x, y), xe.Rem(x, y), xe.ShiftLeft(x, y),
                             xe.ShiftRightArithmetic(x, y), xe.ShiftRightLogical(x, y)))
x_val = np.int32([7, -7, 5, -2**31, -2**31, -8])
y_val = np.int32([2, 2, 0, -1, 0, 40])
for name, value in zip(["div", "rem", "shl", "sra", "srl"], int_edges.run(x_val, y_val)):
    print(f"{name:4}", value)

# %% [markdown]
# Division truncates toward zero (`-7 / 2 = -3`, `-7 % 2 = -1`), unlike NumPy's `//` and `%`
# which round toward minus infinity:

# %%
np.int32(-7) // np.int32(2), np.int32(-7) % np.int32(2)

# %% [markdown]
# Is that really what XLA does? `comp.diff` runs every instruction on the reference and
# again on XLA (through JAX), each fed the same operand values, and reports where they differ:

# %%
int_edges.diff(x_val, y_val)

# %% [markdown]
# Unsigned division by zero gives the largest value (all bits set), and `Pow` with a
# negative integer exponent gives 0 (except for bases 1 and -1):

# %%
print(xe.Div(np.uint8([9, 9]), np.uint8([2, 0])))
print(xe.Pow(np.int32([2, 2, 1, -1, 3]), np.int32([10, -1, -5, -3, 0])))

# %% [markdown]
# ## 3. Floats: NaN and -0.0 in comparisons, `Max` and `Min`
#
# The spec says comparisons of floats follow IEEE 754: NaN is *unordered*, so every
# comparison with a NaN is false except `Ne`, and `-0.0 == +0.0`. Comparisons return `pred`.

# %%
lhs = np.float32([1.0, np.nan, -0.0, 2.0])
rhs = np.float32([np.nan, np.nan, 0.0, 1.0])
for op in (xe.Eq, xe.Ne, xe.Lt, xe.Ge):
    print(f"{op.__name__:3}", op(lhs, rhs))

# %% [markdown]
# `Max` and `Min` propagate NaN (if either side is NaN the result is NaN, unlike C's
# `fmax`), and they tell the zeros apart: `Max(-0.0, +0.0)` is `+0.0` and `Min` gives `-0.0`,
# whichever side each zero is on. The sign of a zero is invisible when printed next to other
# numbers, so look at `np.signbit`:

# %%
a = np.float32([1.0, np.nan, -0.0, 0.0])
c = np.float32([np.nan, 3.0, 0.0, -0.0])
print("max", xe.Max(a, c), "signbit", np.signbit(xe.Max(a, c)))
print("min", xe.Min(a, c), "signbit", np.signbit(xe.Min(a, c)))

# %% [markdown]
# `Sign` keeps the zero's sign and returns NaN for NaN:

# %%
xe.Sign(np.float32([-3.0, -0.0, 0.0, 7.0, np.nan]))

# %% [markdown]
# ### Tiny numbers: XLA:CPU reads denormals as zero
#
# Floats smaller than the smallest *normal* number (`2**-126`, about `1.2e-38`, for `f32`) are
# *denormal*: IEEE 754 keeps them, NumPy keeps them. XLA:CPU does not: it runs every program with
# the processor's *denormals-are-zero* and *flush-to-zero* modes on, so an `f32`, `f64` or `bf16`
# computation reads a denormal operand as a zero of the same sign, and writes zero where a result
# would be denormal. `Max(-1, -2**-149)` is `-0.0`, not `-2**-149`, and `Ceil(2**-149)` is `0`, not
# `1`. xla_explorer does what XLA does; `xe.float_env(denormals="ieee")` switches to exact IEEE.

# %%
d = np.float32(2.0**-149)                      # the smallest f32 denormal
a, b = np.float32([-1, -d, d]), np.float32([-d, -0.0, 1])
print("XLA:CPU  max", xe.Max(a, b), " min", xe.Min(a, b), " ceil", xe.Ceil(a))
with xe.float_env(denormals="ieee"):
    print("IEEE     max", xe.Max(a, b), " min", xe.Min(a, b), " ceil", xe.Ceil(a))
print("NumPy    max", np.maximum(a, b), " min", np.minimum(a, b), " ceil", np.ceil(a))

# %% [markdown]
# Ops that only move bits keep a denormal (`Neg`, `Abs`, `Select`, copies and slices), and `f16`
# keeps its own: XLA:CPU computes `f16` in `f32`, where `f16`'s denormals are normal numbers. A whole
# computation follows the same rules on every backend (`comp.run(x, denormals="ieee")` switches one
# run); the `jax` backend runs XLA itself, which always flushes. XLA says so too:

# %%
print("Neg keeps it:", xe.Neg(np.float32([d])), "  f16:", xe.Max(np.float16([-1]), np.float16([-2.0**-24])))
try:
    import jax
    from jax import lax
    print("XLA via JAX  max", jax.jit(lax.max)(a, b), " ceil", jax.jit(lax.ceil)(a))
except ImportError:
    print("(JAX is not installed: XLA cannot be asked here)")

# %% [markdown]
# ## 4. The total order
#
# The newer spec adds a second kind of float comparison: `Compare(..., compare_type=
# "TOTALORDER")` (and the helpers `LtTotalOrder`, `EqTotalOrder`, ...). Every value gets a
# place, NaNs and signed zeros included:
#
# `-NaN < -Inf < negative numbers < -0.0 < +0.0 < positive numbers < +Inf < +NaN`
#
# It is what a sort needs: a comparator that is a strict weak order even with NaNs present.
# Below, row `i` and column `j` show `vals[i] < vals[j]`: the total order gives a clean
# upper triangle, IEEE leaves holes at the NaNs and the zeros.

# %%
neg_nan = np.copysign(np.float32(np.nan), np.float32(-1))
vals = np.array([neg_nan, -np.inf, -1.0, -0.0, 0.0, 1.0, np.inf, np.nan], np.float32)
print("signbit      ", np.signbit(vals).astype(int))
print("LtTotalOrder\n", xe.LtTotalOrder(vals[:, None], vals[None, :]).astype(int))
print("Lt (IEEE)\n", xe.Lt(vals[:, None], vals[None, :]).astype(int))

# %% [markdown]
# With the total order, a NaN equals itself and `-0.0` does not equal `+0.0`:

# %%
xe.Compare(vals, vals, "EQ", "TOTALORDER"), xe.Compare(np.float32([-0.0]), np.float32([0.0]), "EQ", "TOTALORDER")

# %% [markdown]
# ## 5. Conversions: saturation, rounding, NaN
#
# `ConvertElementType(operand, new_element_type)` converts each element like C++'s
# `static_cast`; the dimensions stay. The spec leaves the out-of-range cases open; XLA:CPU
# does this:
#
# - float to integer: truncate toward zero, *saturate* at the type's limits (`Inf` too),
#   NaN becomes `0`;
# - integer to narrower integer: wrap (keep the low bits);
# - to a narrower float (`f32 -> bf16`, `f16`, `f8...`): round to nearest, ties to even;
#   too large becomes `Inf` (or NaN for `f8e4m3fn`, which has no infinity);
# - anything to `pred`: `x != 0`.

# %%
f = np.float32([-1.7, 2.5, 300.0, np.inf, -1e10, np.nan])
print("f32 ", f)
print("s8  ", xe.ConvertElementType(f, "s8"))
print("u8  ", xe.ConvertElementType(f, "u8"))
print("s32 -> u8  ", xe.ConvertElementType(np.int32([300, -1, 255]), "u8"))
print("f32 -> pred", xe.ConvertElementType(np.float32([0.0, -0.0, 0.5, np.nan]), "pred"))

# %% [markdown]
# Rounding to nearest even, where it shows: `2**24 + 1` is the first integer an `f32`
# cannot hold (it lies halfway between two floats and goes to the even one); `1 + 2**-8` lies
# exactly between two `bf16` values (7 mantissa bits) and rounds down to `1.0`, while
# `1 + 3 * 2**-9` rounds up; `70000` is above `f16`'s largest value, 65504.

# %%
print(xe.ConvertElementType(np.int32([2**24 + 1, 2**24 + 3]), "f32").astype(np.int64))
print(xe.ConvertElementType(np.float32([1 + 2**-8, 1 + 3 * 2**-9, 70000.0]), "bf16"))
print(xe.ConvertElementType(np.float32([1 + 2**-11, 70000.0, 1e-8]), "f16"))
print(xe.ConvertElementType(np.float32([448.0, 500.0]), "f8e4m3fn"))

# %% [markdown]
# Two relatives: `BitcastConvertType` keeps the bits and changes how they are read, and
# `ReducePrecision` rounds a float to a smaller exponent and mantissa but keeps its type (a
# way to simulate `f16` arithmetic in `f32`).

# %%
print(xe.BitcastConvertType(np.float32([1.0, -0.0]), "s32"))
print(xe.BitcastConvertType(np.float32([1.0]), "u8"))   # a narrower type adds a dimension
print(xe.ReducePrecision(np.float32([1 + 2**-11, 70000.0]), mantissa_bits=10, exponent_bits=5))

# %% [markdown]
# The same conversions, checked against XLA instruction by instruction:

# %%
b = xe.XlaBuilder("conversions")
x = xe.Parameter(b, 0, xe.Shape("f32", (6,)), "x")
conversions = b.build(xe.Tuple(*(xe.ConvertElementType(x, t) for t in ("s8", "u8", "s32", "bf16", "f16"))))
conversions.diff(f)

# %% [markdown]
# ## 6. Broadcasting
#
# ### Scalars and size-1 dimensions
#
# Two shapes are compatible when, dimension by dimension, the sizes are equal or one of
# them is 1 (a "degenerate" dimension, which is repeated). A scalar goes with anything.
# In a builder, the broadcast becomes an explicit HLO `broadcast` instruction: HLO's
# element-wise instructions only ever see operands of the result's shape.

# %%
b = xe.XlaBuilder("degenerate")
col = xe.Parameter(b, 0, xe.Shape("f32", (3, 1)), "col")
row = xe.Parameter(b, 1, xe.Shape("f32", (1, 4)), "row")
outer = xe.Mul(col, row)
print(outer.shape)
degenerate = b.build(xe.Add(outer, xe.Constant(b, np.float32(100))))
print(degenerate.as_hlo_text())
degenerate.run(np.float32([[1], [2], [3]]), np.float32([[1, 10, 100, 1000]]))

# %% [markdown]
# ### Different ranks: `broadcast_dimensions`
#
# To combine a matrix with a vector, the spec's variant `Op(lhs, rhs, broadcast_dimensions)`
# says which dimensions of the higher-rank shape the lower-rank operand's dimensions map
# to; the other dimensions are filled with size 1 and then broadcast as above. With a
# `f32[2,3]` matrix, `broadcast_dimensions=[1]` lines a vector of 3 up with the columns (it is
# added to every row), `[0]` lines a vector of 2 up with the rows.

# %%
m = np.arange(6, dtype=np.float32).reshape(2, 3)
print(xe.Add(m, np.float32([10, 20, 30]), broadcast_dimensions=[1]))
print(xe.Add(m, np.float32([100, 200]), broadcast_dimensions=[0]))

# %% [markdown]
# The 2018 page allows different ranks without `broadcast_dimensions` only with a scalar.
# xla_explorer also accepts them the way NumPy and MLIR's `Broadcastable` trait do (the
# lower rank is padded with 1s on the *left*), so `f32[2,3] + f32[3]` works but
# `f32[2,3] + f32[2]` does not: the error names the dimension where the sizes clash, and a
# wrong `broadcast_dimensions` is caught the same way.

# %%
b = xe.XlaBuilder("ranks")
mat = xe.Parameter(b, 0, xe.Shape("f32", (2, 3)), "mat")
vec2 = xe.Parameter(b, 1, xe.Shape("f32", (2,)), "vec2")
vec3 = xe.Parameter(b, 2, xe.Shape("f32", (3,)), "vec3")
print(xe.Add(mat, vec3).shape, xe.Add(mat, vec2, broadcast_dimensions=[0]).shape)
for bad in (lambda: xe.Add(mat, vec2), lambda: xe.Add(mat, vec3, broadcast_dimensions=[0])):
    try:
        bad()
    except xe.ShapeError as e:
        print("ShapeError:", e)

# %% [markdown]
# ### Dynamic dimensions: the `Broadcastable` trait
#
# MLIR's `Broadcastable` trait extends the rule to dimensions whose size is only known at run
# time (`?`). Per dimension, with `dim0` and `dim1` the two operands' sizes:
#
# | `dim0` | `dim1` | inferred | why |
# | --- | --- | --- | --- |
# | `?` | `?` | `?` | either may turn out to be 1 |
# | `?` | `1` | `?` | the 1 stretches to whatever `?` is |
# | `?` | `N > 1` | `N` | `?` must be 1 or N at run time |
# | `1` | `N` | `N` | the usual degenerate broadcast |
# | `N` | `M` | error unless `N == M` | |
#
# `xla_explorer.shapes.infer_shape` is that table (ranks are first equalised by adding 1s on
# the left), and the builder uses it: a parameter can have a dynamic (`?`) or bounded
# (`<=N`) dimension.

# %%
from xla_explorer.shapes import infer_shape, verify_broadcast

for d0, d1 in [([None], [None]), ([None], [1]), ([None], [4]), ([1], [4]), ([4], [2, 3, 4])]:
    print(d0, d1, "->", infer_shape(d0, d1))

b = xe.XlaBuilder("dynamic")
p = xe.Parameter(b, 0, xe.Shape("f32", (None, 3)), "p")
q = xe.Parameter(b, 1, xe.Shape("f32", (1, 3)), "q")
r = xe.Parameter(b, 2, xe.Shape("f32", (4, 1)), "r")
print(xe.Add(p, q).shape, xe.Add(p, r).shape, xe.Shape("f32", ("<=8", 3)))

# %% [markdown]
# The trait also *verifies* a declared result type against the inferred one: a result may
# be more dynamic than inferred (`4` declared as `?` is fine) but not less (two `?` operands
# cannot promise a static `4`).

# %%
verify_broadcast([[4]], [None])          # fine: a static size may be relaxed to ?
try:
    verify_broadcast([[None], [None]], [4])
except xe.ShapeError as e:
    print("ShapeError:", e)

# %% [markdown]
# ## 7. Fast: the same program on compiled kernels
#
# `backend="numba"` runs the program as compiled loops (element-wise chains fused into one),
# and gives the same bits as the reference on these edge cases:

# %%
for got, want in zip(int_edges.run(x_val, y_val, backend="numba"), int_edges.run(x_val, y_val)):
    np.testing.assert_array_equal(got, want)
print("numba == numpy on every edge case")
