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
# # Exercises: a classroom sheet
#
# [![Binder](https://mybinder.org/badge_logo.svg)](https://mybinder.org/v2/gh/xla-explorer/xla_explorer/main?labpath=notebooks%2Fexercises.ipynb)
#
# `xe.exercises` generates exercises on XLA's ops from a seed and a level, so every student
# can get their own sheet and the teacher can regenerate it. Each exercise shows the
# operands and attributes as the spec writes them, checks an answer and gives progressive
# hints. The answers are never typed in by hand: the library's own shape rules, NumPy
# references and index maps judge them, so a generated exercise is as right as the
# executable spec.
#
# This is the student's sheet: feedback says what is wrong and where to look, never the
# right answer. The teacher's copy (`make(..., teacher=True)`) shows worked solutions, and
# `python -m xla_explorer.exercises assignment ...` turns a sheet into an nbgrader
# assignment (see the README).

# %%
import numpy as np
import xla_explorer as xe

for opcode, kinds in xe.exercises.available().items():
    print(f"{opcode:24} {', '.join(kinds)}")

# %% [markdown]
# ## 1. Predict a shape
#
# An exercise displays itself; `print(ex.prompt)` gives the same as plain text.

# %%
ex = xe.exercises.make("gather", seed=3, level=1, kind="shape")
ex

# %% [markdown]
# A student's answer, checked by Gather's shape rule. A wrong answer is told which
# dimension is wrong and which formula to follow.

# %%
ex.check("s32[3,2]")

# %% [markdown]
# Hints come one at a time, from the general idea to the values of this exercise:

# %%
print(ex.hint())
print(ex.hint())

# %% [markdown]
# ## 2. Which element is read?
#
# At level 2 the index can be out of bounds: Gather clamps the start so the slice fits.
# The hints name the spec's intermediate indices to work out in order (`batch_index`,
# `full_start_index`, `operand_index`).

# %%
ex = xe.exercises.make("gather", seed=9, level=2, kind="read")
ex

# %%
print(ex.check((0, 0)))
for _ in range(4):
    print(ex.hint())

# %% [markdown]
# ## 3. Fill in the attribute
#
# Find a `padding_config` that turns the operand into the target. Any answer that produces
# the target is right: the check runs Pad with the student's attribute.

# %%
ex = xe.exercises.make("pad", seed=1, level=2, kind="attribute")
ex

# %%
ex.check([(0, 1, 0), (2, 2, 0)])

# %% [markdown]
# ## 4. Values at the edges: integer division, conversions
#
# What C leaves undefined, XLA pins down: `x / 0 = -1`, `INT_MIN / -1 = INT_MIN`, float to
# integer conversion saturates and maps NaN to 0. Answers may be typed as the spec writes
# arrays, `{1, 2, 3}`.

# %%
ex = xe.exercises.make("divide", seed=0, level=3, kind="values")
print(ex.prompt)
print(ex.check("{0, 0, 4, 1, 0}"))

# %% [markdown]
# Whatever is typed gets feedback, never a traceback: malformed text, an answer of the
# wrong kind, something huge.

# %%
for answer in ["{1, 2", "f32[2,4]", "[" * 100_000, range(10**12)]:
    print(ex.check(answer).message.splitlines()[0][:110])

# %% [markdown]
# ## 5. A quiz for the class
#
# `quiz` assembles a sheet; the same seed gives the same sheet. `check(answers)` and
# `score(answers)` grade a student's list of answers (None: not answered). The answer key
# is in the teacher's copy: `quiz(..., teacher=True).answer_key()`.

# %%
sheet = xe.exercises.quiz(ops=["slice", "dynamic-slice", "reduce-window", "scatter"], n=4, seed=2021, level=2)
sheet

# %%
answers = ["illegal: limit_indices", [[3, 7]], None, "s32[3,2]"]
for i, feedback in enumerate(sheet.check(answers), 1):
    print(i, feedback.message.splitlines()[0][:100])
print("score:", sheet.score(answers), "/", len(sheet))

# %% [markdown]
# ## 6. Dimension numbers, broken calls, NumPy implementations, replicas
#
# **indexing**: an indexing written in NumPy; write the Gather or Scatter dimension numbers
# that compute it. The check runs Gather with yours and compares with the NumPy result.

# %%
ex = xe.exercises.make("gather", seed=0, level=1, kind="indexing")
print(ex.prompt)
print(ex.check({"offset_dims": [0], "collapsed_slice_dims": [0], "start_index_map": [0],
                "index_vector_dim": 1, "slice_sizes": [1, 1]}))

# %% [markdown]
# **fix**: a call that raises; the error message says what is wrong.

# %%
ex = xe.exercises.make("pad", seed=2, level=2, kind="fix")
print(ex.prompt)

# %% [markdown]
# **implement**: write the op in NumPy. It is run against the library on configurations that
# hypothesis generates; the first disagreement, made as small as hypothesis can, is the
# feedback. `np.pad` knows no interior padding:

# %%
def pad(operand, padding_value, *, padding_config):
    return np.pad(operand, [(lo, hi) for lo, hi, _ in padding_config], constant_values=padding_value)


ex = xe.exercises.make("pad", seed=0, level=1, kind="implement")
print(ex.check(pad))

# %% [markdown]
# **replicas**: what each simulated device gets from a collective.

# %%
ex = xe.exercises.make("all-gather", seed=1, level=2, kind="replicas")
print(ex.prompt)

# %% [markdown]
# Collectives have **values** (what one replica gets) and **fix** exercises too; replica
# groups can be written as the spec writes them. A wrong answer is told what goes wrong,
# not the answer:

# %%
ex = xe.exercises.make("all-gather", seed=1, level=2, kind="fix")
print(ex.prompt)
print(ex.check("{{0,1},{2,3}}"))

# %% [markdown]
# An op with a computation: your function gets Reduce's `computation` (or Sort's comparator,
# Scatter's update_computation) as a Python function of NumPy scalars, `computation(a, b)`.

# %%
def reduce(operand, init_value, *, dimensions, computation):
    keep = [d for d in range(operand.ndim) if d not in dimensions]
    out = np.full([operand.shape[d] for d in keep], init_value)
    for i in np.ndindex(operand.shape):
        j = tuple(i[d] for d in keep)
        out[j] = computation(out[j], operand[i])
    return out


print(xe.exercises.make("reduce", seed=0, level=2, kind="implement").check(reduce))

# %% [markdown]
# ## 7. In a widget
#
# With ipywidgets installed, `ex.widget()` gives a text box with Check and Hint buttons
# (answers typed as Python or spec literals; for an **implement** exercise, the name of the
# function you defined).

# %%
ex = xe.exercises.make("reverse", seed=4, level=2, kind="read")
try:
    ui = ex.widget()
except ImportError:
    ui = "ipywidgets is not installed: pip install 'xla_explorer[widgets]'"
ui
