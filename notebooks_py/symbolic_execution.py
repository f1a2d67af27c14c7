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
# # Symbolic execution: how a Python function becomes HLO
#
# [![Binder](https://mybinder.org/badge_logo.svg)](https://mybinder.org/v2/gh/xla-explorer/xla_explorer/main?labpath=notebooks%2Fsymbolic_execution.ipynb)
#
# TensorFlow's bridge to XLA (tf2xla) rests on one idea. An ordinary kernel takes arrays of
# numbers and returns arrays of numbers. An XLA kernel is handed *placeholders* instead, values
# known only by their shape and element type, and calls the builder to **record** the
# instructions that will compute its result later. Running the program once on placeholders
# writes the program down; that is *symbolic execution*. The recorded program (HLO) is then
# compiled and run on real data, as often as we like.
#
# xla_explorer works the same way. This notebook goes through it step by step:
#
# 1. recording ops with the builder,
# 2. tracing a Python function,
# 3. what a Python `if` or loop does while tracing,
# 4. `Select`, `Conditional` and `While` instead,
# 5. the op registry, which maps each op to its rules, as tf2xla maps each TF op to its kernel.

# %%
import numpy as np
import xla_explorer as xe

# %% [markdown]
# ## 1. Recording ops with the builder
#
# The same op functions work on two kinds of input. On NumPy arrays they compute at once
# (eager):

# %%
xe.Add(np.array([1, 2, 3], np.float32), np.float32(10))

# %% [markdown]
# On a `Parameter` of an `XlaBuilder` they compute nothing: each call appends one instruction
# to the builder and hands back an `XlaOp`, a reference to that instruction. Its shape is known
# at once, because the op's shape rule ran; its value is not, because there is none yet.

# %%
b = xe.XlaBuilder("demo")
x = xe.Parameter(b, 0, xe.Shape("f32", (3,)), "x")
y = xe.Add(x, np.float32(10))
z = y * y                      # operators record ops too: this is a multiply
print(y, z)
for inst in b.instructions:
    print(f"  {inst.name:14} {inst.opcode:10} {inst.shape}")

# %% [markdown]
# A mistake is caught while recording, before anything runs: the shape rule names the op, the
# rule and the values.

# %%
try:
    xe.Add(x, np.ones(4, np.float32))
except xe.ShapeError as e:
    print(e)

# %% [markdown]
# `build` closes the recording into a computation: HLO text, which any executor can run, as
# often as needed and on any values of the declared shapes.

# %%
comp = b.build(z)
print(comp.as_hlo_text())
print(comp.run(np.array([0, 1, 2], np.float32)))
print(comp.run(np.array([-10, 5, 0.5], np.float32)))

# %% [markdown]
# ## 2. Tracing a Python function
#
# Tracing is this recording, driven by a Python function: make one parameter per argument,
# call the function on them, build what it returns. Five lines:

# %%
def trace(fn, *shapes):
    """Record fn on placeholders of the given shapes: its HLO computation."""
    b = xe.XlaBuilder(fn.__name__)
    params = [xe.Parameter(b, i, xe.Shape.parse(s), f"arg{i}") for i, s in enumerate(shapes)]
    return b.build(fn(*params))


def softplus_sum(x, w):
    h = x @ w                               # Dot
    return xe.Log1p(xe.Exp(h)) + 1.0        # log(1 + e^h) + 1, element-wise


comp = trace(softplus_sum, "f32[2,3]", "f32[3,4]")
print(comp.as_hlo_text())

# %% [markdown]
# The Python function ran exactly once, on placeholders. What it left behind is the program;
# the function itself is no longer needed to run it:

# %%
xv = np.arange(6, dtype=np.float32).reshape(2, 3) / 6
wv = np.ones((3, 4), np.float32)
print(comp.run(xv, wv))
print(np.log1p(np.exp(xv @ wv)) + 1)   # NumPy agrees

# %% [markdown]
# This is what `jax.jit` does too: `xe.from_jax` shows what JAX records for a function, in the
# same HLO.
#
# ## 3. Python control flow while tracing
#
# While tracing, Python runs the function once. Everything Python decides, it decides *then*,
# from what it knows then: shapes, element types, constants. So:
#
# **An `if` on a shape** is fine, and specializes the program: each shape gets the branch it
# takes, and the other branch leaves no trace.

# %%
def normalize(x):
    if x.shape.rank == 2:          # a Python decision, on the shape: known while tracing
        return x / xe.Reduce(x, np.float32(0), lambda a, c: a + c, dimensions=[1])[:, None]
    return x / xe.Reduce(x, np.float32(0), lambda a, c: a + c, dimensions=[0])


for shape in ("f32[4]", "f32[2,4]"):
    ops = [i.opcode for i in trace(normalize, shape).entry.instructions]
    print(f"{shape:9} -> {ops}")

# %% [markdown]
# **A Python loop over a range** unrolls: three turns record three multiplies. The program has
# no loop in it, only the loop's body written out three times.

# %%
def cube(x):
    y = x
    for _ in range(2):
        y = y * x
    return y


print(trace(cube, "f32[3]").as_hlo_text())

# %% [markdown]
# **An `if` on a value** cannot work: while tracing, `x > 0` is a placeholder for a `pred`
# array that will exist only when the program runs. Python has to pick a branch *now*, so the
# placeholder refuses to be a `bool` and says why:

# %%
def relu_wrong(x):
    if x > 0:
        return x
    return x * 0


try:
    trace(relu_wrong, "f32[]")
except TypeError as e:
    print(e)

# %% [markdown]
# The same goes for `while x > 0`, `x and y`, `int(x)` and `range(n)` with a traced `n`.
#
# ## 4. Recording the decision instead
#
# The fix is to put the decision into the program, where it is made on every run:
#
# - `Select(pred, on_true, on_false)` chooses element by element (both sides are computed);
# - `Conditional(pred, true_operand, true_computation, false_operand, false_computation)` runs
#   one of two sub-computations, traced from Python functions;
# - `While(condition, body, init)` repeats a traced body as long as a traced condition holds.

# %%
def relu(x):
    return xe.Select(x > 0, x, 0.0)      # the scalar 0.0 is broadcast to x's shape


def safe_log(x):
    # a scalar decision: only the branch taken runs
    return xe.Conditional(x > 0, x, lambda t: xe.Log(t), x, lambda t: t * 0 - np.inf)


relu_comp, log_comp = trace(relu, "f32[5]"), trace(safe_log, "f32[]")
print(relu_comp.run(np.array([-2, -0.5, 0, 0.5, 2], np.float32)))
print(log_comp.run(np.float32(np.e)), log_comp.run(np.float32(-1)))
print(log_comp.as_hlo_text())

# %% [markdown]
# A loop whose number of turns depends on a value: halve `x` until it is below 1, counting the
# turns. The loop state is a tuple `(count, x)`; condition and body are traced once each.

# %%
def halvings(x):
    def condition(state):
        return xe.GetTupleElement(state, 1) >= 1.0

    def body(state):
        count, v = xe.GetTupleElement(state, 0), xe.GetTupleElement(state, 1)
        return xe.Tuple(count + 1, v / 2.0)

    return xe.GetTupleElement(xe.While(condition, body, xe.Tuple(np.int32(0), x)), 0)


halve = trace(halvings, "f32[]")
print([int(halve.run(np.float32(v))) for v in (0.5, 1, 7, 1000)])   # no re-tracing for new values

# %% [markdown]
# The unrolled `cube` and this `While` are the two ends of one trade: unrolling gives the
# compiler straight-line code to fuse, but its length is fixed while tracing; a `While` keeps
# one copy of the body and decides the trip count at run time.
#
# ## 5. The op registry
#
# In tf2xla each TensorFlow op that XLA can compile has an XLA kernel registered for it, under
# the op's name; the kernel's job is to emit XLA ops for that TF op, for the shapes it is given. Compiling a graph looks each op up
# and lets its kernel record. Our registry plays that role one level lower: every HLO opcode has
# one record, and everything that needs to know about an op finds it there.

# %%
from xla_explorer.ops import registry

gather = registry.get("gather")
print(gather.name, "| family:", gather.family, "| attributes:", gather.kws)
print("shape rule:", gather.shape_rule.__name__, "| reference:", gather.reference.__name__,
      "| index map:", gather.index_map.__name__)
print(len(registry.OPS), "ops;", "API name 'DotGeneral' ->", registry.NAMES["DotGeneral"])

# %% [markdown]
# The builder uses the record's shape rule while recording, the reference executor its NumPy
# reference, the animators its index map, the exercise bank both; the CPU and CUDA kernels
# register beside it under the same opcode. `xe.status_table()` is generated from these tables.
#
# A "kernel" in tf2xla's sense is then just a Python function of `XlaOp`s: a high-level
# operation that records several HLO ops. Softmax, for example, records a reduce, a
# broadcast, an exponential and a divide; no new op is needed:

# %%
def softmax(x):
    m = xe.Reduce(x, np.float32(-np.inf), lambda a, c: xe.Max(a, c), dimensions=[1])
    e = xe.Exp(x - m[:, None])
    return e / xe.Reduce(e, np.float32(0), lambda a, c: a + c, dimensions=[1])[:, None]


sm = trace(softmax, "f32[2,3]")
print([i.opcode for i in sm.entry.instructions])
out = sm.run(np.array([[1, 2, 3], [0, 0, 0]], np.float32))
print(out, out.sum(axis=1))

# %% [markdown]
# **Exercises.** (1) Write `clip(x, lo, hi)` with `Select` and trace it; then with `Clamp`:
# how many instructions does each record? (2) Make `cube` take the power `n` as a traced
# `s32[]` argument: which control-flow op do you need? (3) `xe.from_jax(lambda x: jnp.where(x >
# 0, x, 0.), np.ones(3, np.float32))`: which op does JAX record for `jnp.where`?
