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
# The same map drives the reference's tests, the kernels' tests and the animations, so a
# picture cannot disagree with the semantics.

# %%
gather = comp.entry.root.operands[0].name
m = xe.index_map(comp, gather, x_val, i_val)
for access in list(m)[:5]:
    print(access.index, "reads", access.reads, "clamped" if access.clamped else "")

# %% [markdown]
# The map, interactive: hover (or click) a result element and the slice window that
# produces it lights up, at its clamped start, with the spec's formula filled in.
# `xe.animate` draws the same picture as frames (for GIFs and slides).

# %%
xe.index_map_view(comp, gather, x_val, i_val)

# %% [markdown]
# ### Try it: the op playground
#
# Every op opens in a playground, one control per argument. Set `slice_sizes` to `1 5`:
# the rule it breaks appears beside it, with the sizes that would fit; the values, HLO,
# graph and index map tabs follow every change. (More in `playground.ipynb`.)

# %%
from xla_explorer.widgets import OpPlayground

OpPlayground("Gather", graph=False)

# %% [markdown]
# ## 4. The graph, with values
#
# Every instruction with its shape and the attributes that define it; after a run, each
# node shows its value's range and a small heatmap.

# %%
comp.graph(args=(x_val, i_val))

# %% [markdown]
# ## 5. Eager mode: the same op functions on NumPy arrays
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
# ## 6. Real programs: HLO text as JAX and XLA print it

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
# ## 7. Fast: the Numba executor
#
# `backend="numba"` runs compiled kernels; chains of element-wise ops become one fused
# loop, as XLA fuses them. The plan is visible:

# %%
b = xe.XlaBuilder("softplus_rows")
table = xe.Parameter(b, 0, xe.Shape("f32", (10_000, 64)), "table")
rows = xe.Parameter(b, 1, xe.Shape("s32", (4_096, 1)), "rows")
picked = xe.Gather(table, rows, offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0],
                   index_vector_dim=1, slice_sizes=[1, 64])
one = xe.Constant(b, np.float32(1))
fast = b.build(xe.Log(xe.Add(one, xe.Exp(xe.Mul(picked, xe.Constant(b, np.float32(0.5)))))))
print(fast.fusion_plan())

t_val = np.random.default_rng(0).normal(size=(10_000, 64)).astype(np.float32)
r_val = np.random.default_rng(1).integers(0, 10_000, size=(4_096, 1)).astype(np.int32)
np.testing.assert_allclose(fast.run(t_val, r_val, backend="numba"), fast.run(t_val, r_val), rtol=1e-5)

# %% [markdown]
# ## 8. XLA itself as the oracle: JAX
#
# `from_jax` imports what JAX hands to XLA; `backend="jax"` runs any computation on XLA;
# `diff` compares every instruction of the reference with XLA's value.

# %%
from xla_explorer.jax_bridge import load_jax

jax = load_jax()  # jax with several CPU devices (for section 9)
jnp = jax.numpy


def mlp(w, x):
    return jnp.tanh(x @ w).sum(axis=1)


w = np.random.default_rng(2).normal(size=(4, 3)).astype(np.float32)
x = np.random.default_rng(3).normal(size=(5, 4)).astype(np.float32)
prog = xe.from_jax(mlp, w, x)
print(prog.run(w, x), prog.run(w, x, backend="jax"))
prog.diff(w, x)

# %% [markdown]
# ### Index maps anywhere in a real program
#
# The gradient of an embedding lookup: JAX puts the gather and the scatter-add of its
# transpose inside called computations. `comp.trace` records every instruction the run
# executes, in every computation, so `xe.index_map` and `xe.index_map_view` work on any
# of them with the values it really saw. Hover a result element of the view: the table
# rows it reads light up, with the formula filled in beside.

# %%
table = np.arange(24, dtype=np.float32).reshape(6, 4)
ids = np.array([4, 0, 4], np.int32)


def loss(table, ids):
    return (jnp.take(table, ids, axis=0) ** 2).sum()


grad = xe.from_jax(jax.grad(loss), table, ids)
t = grad.trace(table, ids)
take = next(r for r in t.records if r.opcode == "gather")
print(take.name, "runs in", take.computation, "called by", take.stack)
xe.index_map_view(grad, take.name, trace=t)

# %% [markdown]
# ### Step through the run: the stepper
#
# A debugger for any program, built, parsed or imported from JAX: **step** goes to the next
# instruction, **step into** enters what it runs (a call, a fusion, a loop's body at an
# iteration, the branch a conditional took), **step out** goes back to the caller; the
# location line is the call stack. Here it has run to the gather inside its called
# computation; each value is compared with XLA's (the elements that differ would be red).
# Press **step out**, then **step** on. (More in `playground.ipynb`.)

# %%
from xla_explorer.widgets import StepperWidget

StepperWidget(grad, table, ids).run_to(take.name)

# %% [markdown]
# The scatter-add of the gradient: id 4 appears twice, so two rows of updates combine
# into row 4 of the result (a collision).

# %%
scatter = next(r for r in t.records if r.opcode == "scatter")
xe.animate(grad, scatter.name, trace=t)

# %% [markdown]
# ## 9. Four devices: simulated, and real
#
# A `shard_map` program with a collective. The reference simulates the four devices
# (threads meeting at each collective); JAX runs it on four real (host) devices.

# %%
from jax.sharding import Mesh, PartitionSpec as P

mesh = Mesh(np.array(jax.devices()[:4]), ("i",))


def total(a):
    return jax.lax.psum(a * 2, "i")


sharded = jax.shard_map(total, mesh=mesh, in_specs=P("i"), out_specs=P())
a = np.arange(8, dtype=np.float32).reshape(4, 2)
spmd = xe.from_jax(sharded, a)
simulated, real = spmd.run(a), spmd.run(a, backend="jax")
print(simulated, real)
np.testing.assert_allclose(simulated, real)

# %% [markdown]
# ## 10. What is implemented where
#
# The table is generated from the registries: one row per HLO opcode, one column per layer.

# %%
table = xe.status_table()
