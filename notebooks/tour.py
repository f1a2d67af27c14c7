# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # A tour of xla_explorer
#
# [![Binder](https://mybinder.org/badge_logo.svg)](https://mybinder.org/v2/gh/xla-explorer/xla_explorer/main?labpath=notebooks%2Ftour.ipynb)
#
# XLA programs are graphs of *operations* whose semantics the XLA "Operation Semantics"
# page defines. xla_explorer makes that page executable: every op has a shape rule that
# runs while you build, a NumPy reference that is the spec in code, and, for the ops
# that move data, an *index map* telling which operand elements each result element reads.

# %%
import numpy as np
import xla_explorer as xe

# %% [markdown]
# ## 1. Build a computation: shapes are known before anything runs
#
# Each op call records an HLO instruction and infers its shape (the "symbolic
# execution" of tf2xla). A call that the spec forbids fails at once, naming the rule.

# %%
b = xe.XlaBuilder("demo")
x = xe.Parameter(b, 0, xe.Shape("f32", (3, 4)), "x")
i = xe.Parameter(b, 1, xe.Shape("s32", (2, 1)), "i")
g = xe.Gather(x, i, offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0],
              index_vector_dim=1, slice_sizes=[1, 4])
print(g.shape)
y = xe.Add(g, xe.Constant(b, np.float32(1)))
comp = b.build(y)
print(comp.as_hlo_text())

# %%
try:
    xe.Gather(x, i, offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0],
              index_vector_dim=1, slice_sizes=[1, 5])
except xe.ShapeError as e:
    print("ShapeError:", e)

# %% [markdown]
# ## 2. Run it on the NumPy reference executor
#
# Out-of-bounds gather starts are *clamped* so the whole slice stays in bounds, as XLA does:
# row index 7 reads the last row.

# %%
x_val = np.arange(12, dtype=np.float32).reshape(3, 4)
i_val = np.array([[1], [7]], dtype=np.int32)
comp.run(x_val, i_val)

# %% [markdown]
# ## 3. Which elements does each result element read? The index map
#
# The same map drives the reference's tests and the animations.

# %%
gather = comp.entry.root.operands[0].name
m = xe.index_map(comp, gather, x_val, i_val)
for access in list(m)[:5]:
    print(access.index, "reads", access.reads, "clamped" if access.clamped else "")

# %% [markdown]
# ## 4. Eager mode: the same op functions on NumPy arrays
#
# `Pad` with interior padding (between elements) and negative edge padding (cropping):

# %%
xe.Pad(np.arange(1, 5, dtype=np.float32).reshape(2, 2), np.float32(0),
       padding_config=[(1, 1, 1), (-1, 0, 0)])

# %% [markdown]
# Sub-computations (reduce bodies, comparators, loop bodies) are Python functions, traced:

# %%
xe.Reduce(np.arange(6, dtype=np.float32).reshape(2, 3), np.float32(0),
          lambda a, c: xe.Add(a, c), dimensions=[1])

# %% [markdown]
# ## 5. Real programs: HLO text as JAX and XLA print it

# %%
text = """HloModule jit_f, entry_computation_layout={(f32[4]{0})->f32[]}

region_0.1 {
  a.1 = f32[] parameter(0)
  b.1 = f32[] parameter(1)
  ROOT max.1 = f32[] maximum(a.1, b.1)
}

ENTRY main.2 {
  x.1 = f32[4]{0} parameter(0)
  init.1 = f32[] constant(-inf)
  ROOT r.1 = f32[] reduce(x.1, init.1), dimensions={0}, to_apply=region_0.1
}
"""
prog = xe.parse_hlo(text)
prog.run(np.array([3, -1, 7, 2], np.float32))

# %% [markdown]
# ## 6. What is implemented where
#
# The table is generated from the registries: one row per HLO opcode, one column per layer.

# %%
table = xe.status_table()
