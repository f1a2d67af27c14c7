# ---
# jupyter:
#   jupytext:
#     formats: notebooks///ipynb,notebooks_py///py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # The op playground and the stepper
#
# [![Binder](https://mybinder.org/badge_logo.svg)](https://mybinder.org/v2/gh/xla-explorer/xla_explorer/main?labpath=notebooks%2Fplayground.ipynb)
#
# Two widgets to learn XLA's operations by touching them:
#
# - `OpPlayground(op)`: one control for every argument of an op. Change one and the
#   result shape is inferred again at once; a call the spec forbids shows the rule it
#   breaks *beside the control at fault*, with the values that would be legal there.
#   The result values, the HLO, the graph and the index map follow every change.
# - `StepperWidget(comp, *args)`: walk through a whole computation, one instruction at a
#   time, with the values going in and coming out.
#
# The widgets know no op: the controls come from each op's argument description, shapes
# and errors from its shape rule, values from the NumPy reference, reads from its index map.

# %%
import numpy as np
import xla_explorer as xe
from xla_explorer.widgets import OpPlayground, StepperWidget

# %% [markdown]
# ## 1. Gather, by hand
#
# Gather cuts `slice_sizes`-shaped windows out of `operand`, one window per row of
# `start_indices`. Things to try:
#
# - set `slice_sizes` to `1 5`: a window wider than the operand. The error appears next
#   to `slice_sizes`, with the sizes that would fit;
# - switch `start_indices` to *random*: indices out of range are *clamped*, so the whole
#   window stays inside (look at the index map tab);
# - change `operand` to `f32[3,4,2]` and watch which attributes complain.

# %%
pg = OpPlayground("Gather")
pg

# %% [markdown]
# ## 2. The same, in code
#
# Each control is in `.controls` (by argument name; the array operands are also in
# `.inputs`), and the results are traitlets: `.shape_text`, `.error`, `.error_control`
# (the argument the error is about), `.legal` and `.result`. A second playground, driven
# from code (the one above stays yours):

# %%
demo = OpPlayground("Gather", graph=False)
demo.controls["slice_sizes"].value = (1, 5)
print("error:  ", demo.error)
print("beside: ", demo.error_control)
print(demo.legal)

# %%
demo.controls["slice_sizes"].value = (1, 2)
print(demo.shape_text)
print(demo.result)

# %% [markdown]
# ## 3. Windows and padding
#
# ReduceWindow folds every window of the operand with a computation (a dropdown of the
# binary ops). `padding` takes explicit `(low, high)` pairs per dimension, or `SAME` /
# `VALID`. Try `window_strides` `1 1`, then `padding` `SAME`, then `computation` `Max`.

# %%
OpPlayground("ReduceWindow")

# %% [markdown]
# Pad takes a `(low, high, interior)` triple per dimension. Negative `low` / `high`
# crop; a negative `interior` is illegal, and the playground says which values are:

# %%
pad = OpPlayground("Pad", padding_config=[(1, 1, -1), (0, 0, 1)], graph=False)
print(pad.error)
print(pad.legal)

# %% [markdown]
# ## 4. Loops: a While with a tuple state
#
# A loop's state is often a tuple: a counter and the values it works on. `condition` and
# `body` are Python expressions of the state `x` (`x[0]` is its first element): pick a
# preset or type your own and press Enter. Try `body` = `(x[0] + 1, x[1] * 2)`, then
# `(x[0] + 1, x[1])[0]` (a body must give back the whole state: the error says so), and a
# body that never ends the loop (`(x[0], x[1])`): the run is stopped after 2 s, and says so.

# %%
loop_pg = OpPlayground("While", init="(s32[], f32[3])", graph=False)
loop_pg

# %% [markdown]
# ## 5. Collectives on simulated devices
#
# A collective runs on several devices at once. The playground simulates as many as the
# replica groups name, with one operand value per device (iota counts on from one device to
# the next), and shows every device's operand and result side by side; the index map tab
# shows which device's elements each result element combines. Try `replica_groups`
# `[[0, 1, 2, 3]]`, or the `computation` `Max`.

# %%
OpPlayground("AllReduce", replica_groups=[[0, 2], [1, 3]], graph=False)

# %% [markdown]
# ## 6. Every op
#
# Any op with a shape rule opens in the playground, by API name or HLO opcode, starting
# from a legal call. The dropdown at the top switches op; so does `.op`:

# %%
pg_any = OpPlayground("sort", graph=False)
pg_any.op = "DynamicUpdateSlice"
print(pg_any.op, list(pg_any.controls), pg_any.shape_text)

# %% [markdown]
# The status table's `widget` column is what the playground actually builds:

# %%
table = xe.status_table(file=open("/dev/null", "w"))
built = [op for op, _, _, cells in table.rows if cells["widget"] != "-"]
print(f"{len(built)} of {len(table.rows)} ops open in the playground;",
      "not:", [op for op, _, _, cells in table.rows if cells["widget"] == "-"])

# %% [markdown]
# ## 7. Stepping through a computation
#
# A small program with a loop: the state is a counter and a vector; the vector doubles
# while its sum is below 100, then it is reversed. The stepper runs it on the reference
# executor and shows each instruction with its operands' and its result's values. Press
# **step** until the `while`, then **step into**: you are in the loop's body, at its first
# iteration (the location line says which); **step out** goes back to the loop.

# %%
b = xe.XlaBuilder("doubling")
x = xe.Parameter(b, 0, xe.Shape("f32", (3,)), "x")


def below_100(s):
    return xe.Lt(xe.Reduce(xe.GetTupleElement(s, 1), np.float32(0), xe.Add, dimensions=[0]), np.float32(100))


def double(s):
    return xe.Tuple(xe.GetTupleElement(s, 0) + 1, xe.GetTupleElement(s, 1) * 2)


loop = xe.While(below_100, double, xe.Tuple(xe.Constant(b, np.int32(0)), x))
comp = b.build(xe.Rev(xe.GetTupleElement(loop, 1), dimensions=[0]))
x_val = np.float32([1, 2, 3])
print(comp.run(x_val))

# %%
st = StepperWidget(comp, x_val)
st

# %% [markdown]
# ## 8. Long work shows its progress
#
# A first run on the Numba backend compiles its kernels, a long loop takes its time, a
# big animation renders frame by frame: a bar in the cell says what is going on, and the
# notebook's interrupt button (■) stops the work between two steps.
#
# The first Numba run of a session loads Numba and its kernels (a few seconds), and each
# kernel not compiled before compiles (seconds each; then it is cached on disk): the bars
# say which kernel is compiling and, once done, how long compiling took.

# %%
b = xe.XlaBuilder("softplus")
x = xe.Parameter(b, 0, xe.Shape("f32", (1000,)), "x")
softplus = b.build(xe.Log1p(xe.Exp(x)))
print(softplus.run(np.linspace(-3, 3, 1000, dtype=np.float32), backend="numba")[:3])

# %% [markdown]
# This loop counts to 10000 on the NumPy reference, one iteration at a time:

# %%
b = xe.XlaBuilder("count")
n = xe.Parameter(b, 0, xe.Shape("s32", ()), "n")
count = b.build(xe.While(lambda s: xe.Lt(s, np.int32(10000)), lambda s: xe.Add(s, np.int32(1)), n))
print(count.run(np.int32(0)))

