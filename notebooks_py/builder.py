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
# # Build a computation op by op, then step through it
#
# [![Binder](https://mybinder.org/badge_logo.svg)](https://mybinder.org/v2/gh/xla-explorer/xla_explorer/main?labpath=notebooks%2Fbuilder.ipynb)
#
# Two widgets over the same library:
#
# - `BuilderWidget`: declare parameters, pick an op (every op of the registry, by
#   family), its operands and attributes. The result shape appears as soon as the op is
#   fully set, or the `ShapeError` that the spec's rule raises, in red. "Add" records it.
# - `StepperWidget`: run the computation on the reference executor and walk through it
#   like a debugger -- step, step into loops and calls, step out, run to, breakpoints --
#   with the values going in and coming out.
#
# The widgets know no op: shapes, errors, values and index maps all come from
# `xla_explorer` itself.

# %%
import numpy as np
import xla_explorer as xe
from xla_explorer.widgets import BuilderWidget, IndexMapStepper, StepperWidget

# %% [markdown]
# ## 1. The builder
#
# Try it: add a parameter `f32[3,4]` named `x` and one `s32[2,1]` named `i`, choose
# the *indexing* family and `Gather`, type `x` and `i` as operands (Enter adds each),
# and fill the fields. Attributes are Python literals (`[1, 4]`); a computation is the
# name of an op function (`Add`, `Max`) or of a sub-computation built below; a value is
# its name (`gather.1`). An error shows beside the field it is about; "Undo" takes the
# last op back. The module returns every value no other op uses (pick one as `root`).

# %%
bw = BuilderWidget("demo")
bw

# %% [markdown]
# The widget is driven by traitlets, so the same steps can be written in code (and the
# widget above follows along):

# %%
bw.add_parameter("f32[3,4]", "x")
bw.add_parameter("s32[2,1]", "i")
bw.op_name = "Gather"
bw.operands = ["x", "i"]
bw.attrs_text = ("offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0], "
                 "index_vector_dim=1, slice_sizes=[1, 4]")
print("shape:", bw.shape_text)

# %% [markdown]
# A slice wider than the operand breaks a rule of Gather: the widget shows which one,
# with the values, and does not raise.

# %%
bw.attrs_text = bw.attrs_text.replace("slice_sizes=[1, 4]", "slice_sizes=[1, 5]")
print("error:", bw.error)

# %%
bw.attrs_text = bw.attrs_text.replace("slice_sizes=[1, 5]", "slice_sizes=[1, 4]")
gather = bw.add()
bw.op_name = "Constant"
bw.operands = []
bw.attrs_text = "value=1.0"
one = bw.add()
bw.op_name = "Add"
bw.operands = [gather.name, one.name]
bw.attrs_text = ""
print("shape:", bw.shape_text)
bw.add()
print(bw.hlo)

# %% [markdown]
# `bw.computation` is the `XlaComputation` built so far; `bw.run(...)` runs it (the
# "Run" row does the same with the backend picked and the inputs typed per parameter:
# `iota`, `zeros`, `ones`, `random`, `random(7)` or a literal). Row index 7 is out of
# bounds: Gather clamps the start so that the whole slice stays inside the operand, so it
# reads the last row.

# %%
x_val = np.arange(12, dtype=np.float32).reshape(3, 4)
i_val = np.array([[1], [7]], dtype=np.int32)
bw.run(x_val, i_val)

# %%
bw.inputs["i"].value = "[[1], [7]]"
bw.run()
print(bw.run_text)

# %% [markdown]
# `bw.python_code()` is the Python that rebuilds the same module with the library's own
# functions (the "Python" tab shows it too): copy it into a script.

# %%
print(bw.python_code())

# %% [markdown]
# ## 1b. Control flow: sub-computations in nested builders
#
# A `While` needs two computations: the condition and the body. "New sub-computation"
# (or `bw.new_computation(name, *parameter_shapes)`) opens a nested builder; what it
# builds is called by its name in any argument field. Here the loop state is
# `(i, v)`: the body doubles `v` and counts `i` up, the condition stops at `i == 3`.
# A Python function works too: `bw.add_computation(name, fn, *parameter_shapes)`.

# %%
loop = BuilderWidget("doubling")
loop.add_parameter("f32[3]", "v")


def add(b, op_name, operands, attrs=""):
    """Pick the op, its operands and arguments, press Add (what the controls do)."""
    b.op_name, b.operands, b.attrs_text = op_name, operands, attrs
    result = b.add()
    assert result is not None, b.error
    return result.name


zero = add(loop, "Constant", [], "value=0")
init = add(loop, "Tuple", [zero, "v"])

cond = loop.new_computation("cond", "(s32[], f32[3])")
i = add(cond, "GetTupleElement", ["cond_p0"], "index=0")
add(cond, "Compare", [i, add(cond, "Constant", [], "value=3")], "comparison_direction='LT'")

body = loop.new_computation("body", "(s32[], f32[3])")
i = add(body, "GetTupleElement", ["body_p0"], "index=0")
v = add(body, "GetTupleElement", ["body_p0"], "index=1")
one = add(body, "Constant", [], "value=1")
doubled = add(body, "Add", [v, v])
add(body, "Tuple", [add(body, "Add", [i, one]), doubled])

add(loop, "While", [], f"condition=cond, body=body, init={init}")
print(loop.hlo)
loop

# %%
loop.run(np.ones(3, np.float32))

# %% [markdown]
# A body that returns the wrong shape is refused, with the rule beside the `body` field:

# %%
half = loop.new_computation("half", "(s32[], f32[3])")
add(half, "GetTupleElement", ["half_p0"], "index=0")
loop.op_name, loop.operands, loop.attrs_text = "While", [], f"condition=cond, body=half, init={init}"
print(loop.error_control, "->", loop.error)

# %% [markdown]
# ## 2. Step through it, into the loop
#
# `StepperWidget(comp, *args)` is a debugger over one run: **step** goes to the next
# instruction of the computation you are in (a `while` is one step), **step into** enters
# what the instruction runs (a loop's body, the branch a conditional took, a call, a
# fusion, a reduce's combiner), **step out** goes back to the caller, **run to** jumps to
# an instruction (`name#k`: its k-th execution), breakpoints stop **continue**, **back**
# undoes a move and the slider is the whole run as a timeline. The call stack is shown
# on top, the graph of the computation you are in below it, with the current instruction
# glowing. When jax is installed each value is compared with XLA's on the same operands,
# and elements that differ are marked in red.

# %%
x3 = np.float32([1, 2, 3])
stepper = StepperWidget(loop.computation, x3)
stepper

# %% [markdown]
# The same moves in code: to the `while`, into its body at iteration 2, over to the
# doubling, and back out.

# %%
loop_name = next(name for name in loop.values if name.startswith("while"))
stepper.run_to(loop_name)
stepper.step_into(iteration=2)
print(stepper.location)
stepper.run_to(doubled)
print(stepper.location_text)
print(stepper.value_text)
stepper.step_out()
print(stepper.location, stepper.value)

# %% [markdown]
# ## 3. Inside one op: its index map, step by step
#
# Which element of `x` does each result element of the gather read? Steps 4 to 7 read
# the last row: their start index was clamped.

# %%
steps = IndexMapStepper(bw.computation, gather.name, x_val, i_val)
steps.step = 4
print(steps.access_text)
steps
