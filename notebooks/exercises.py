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
# # Exercises: a classroom sheet
#
# [![Binder](https://mybinder.org/badge_logo.svg)](https://mybinder.org/v2/gh/xla-explorer/xla_explorer/main?labpath=notebooks%2Fexercises.ipynb)
#
# `xe.exercises` generates exercises on XLA's ops from a seed and a level, so every student
# can get their own sheet and the teacher can regenerate it. Each exercise shows the
# operands and attributes as the spec writes them, checks an answer, gives progressive
# hints and a worked solution. The answers are never typed in by hand: the library's own
# shape rules, NumPy references and index maps judge them, so a generated exercise is as
# right as the executable spec.
#
# Five kinds: predict the result **shape**, say whether a call is **legal** (and which
# argument breaks a rule), predict the **values**, say which element a result element
# **reads**, and fill in an **attribute** that produces a target. Levels go from 1 (small,
# rank 1-2) to 3 (batching dimensions, negative padding, dilations, out-of-bounds starts).

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
# A student's answer, checked by Gather's shape rule. A wrong answer gets the reasoning:
# where each dimension of the result comes from, with the values of this call.

# %%
ex.check("s32[3,2]")

# %% [markdown]
# Hints come one at a time, from the general idea to the first step with the values:

# %%
print(ex.hint())
print(ex.hint())

# %%
ex.check(ex.solution().answer)

# %% [markdown]
# ## 2. Which element is read?
#
# At level 2 the index can be out of bounds. The answer comes from Gather's index map, and
# the solution walks through the spec's intermediate indices (`batch_index`,
# `full_start_index`, the clamping, `operand_index`).

# %%
ex = xe.exercises.make("gather", seed=9, level=2, kind="read")
ex

# %%
ex.solution()

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
print(ex.check("{0, 0, 4, 1, 0}", reveal=False))

# %%
print(ex.solution())

# %% [markdown]
# ## 5. A quiz for the class
#
# `quiz` assembles a sheet; the same seed gives the same sheet. `answer_key()` is for the
# teacher, `check(answers)` and `score(answers)` grade a student's list of answers.

# %%
sheet = xe.exercises.quiz(ops=["slice", "dynamic-slice", "reduce-window", "scatter"], n=4, seed=2021, level=2)
sheet

# %%
print(sheet.answer_key())

# %%
print("score of the answer key:", sheet.score([ex.solution() for ex in sheet]), "/", len(sheet))

# %% [markdown]
# ## 6. In a widget
#
# With ipywidgets installed, `ex.widget()` gives a text box with Check, Hint and Solution
# buttons (answers typed as Python or spec literals).

# %%
ex = xe.exercises.make("reverse", seed=4, level=2, kind="read")
try:
    ui = ex.widget()
except ImportError:
    ui = "ipywidgets is not installed: pip install 'xla_explorer[widgets]'"
ui
