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
# # 6. Control flow: Tuple, Call, Map, While, Conditional
#
# [![Binder](https://mybinder.org/badge_logo.svg)](https://mybinder.org/v2/gh/xla-explorer/xla_explorer/main?labpath=notebooks%2F06_control_flow.ipynb)
#
# An XLA program is a set of *computations*: the entry one, and the ones it calls, loops
# over or branches into. Every shape is static, so a loop's state keeps one shape through
# every iteration and both branches of a conditional return the same shape. Values that
# travel together -- a loop counter and an accumulator -- travel as a *tuple*.

# %%
import numpy as np
import xla_explorer as xe

# %% [markdown]
# ## 1. Tuples
#
# `Tuple(elements...)` groups values of any shapes, like C++'s `std::tuple`;
# `GetTupleElement(t, index)` takes one back out. The index is a compile-time constant, so
# the element's shape is known while building. Tuples nest.

# %%
b = xe.XlaBuilder("tuples")
v = xe.Parameter(b, 0, xe.Shape("f32", (10,)), "v")
s = xe.Parameter(b, 1, xe.Shape("s32", ()), "s")
t = xe.Tuple(v, s)
print(t.shape, "->", xe.GetTupleElement(t, 1).shape)
print(xe.Tuple(t, v).shape)
try:
    xe.GetTupleElement(t, 2)
except xe.ShapeError as e:
    print("ShapeError:", e)

# %% [markdown]
# Tuple shapes have a text form, and eagerly a tuple is a Python tuple of arrays:

# %%
print(xe.Shape.parse("((f32[10], s32[]), f32[10])"))
xe.Tuple(np.float32([1, 2]), np.int32(5))

# %% [markdown]
# ## 2. Call
#
# `Call(computation, args...)` runs another computation on the arguments, which must match
# its parameters in number and shape. A computation is built like any other, with its own
# builder; HLO prints it as a separate block that the `call` names with `to_apply=`.

# %%
sb = xe.XlaBuilder("softplus")
x = xe.Parameter(sb, 0, xe.Shape("f32", (3,)), "x")
softplus = sb.build(xe.Log1p(xe.Exp(x)))

b = xe.XlaBuilder("caller")
p = xe.Parameter(b, 0, xe.Shape("f32", (3,)), "p")
caller = b.build(xe.Add(xe.Call(softplus, p), xe.Call(softplus, xe.Neg(p))))
print(caller.as_hlo_text())
caller.run(np.float32([-1, 0, 1]))

# %%
b = xe.XlaBuilder("wrong_args")
try:
    xe.Call(softplus, xe.Parameter(b, 0, xe.Shape("f32", (4,)), "q"))
except xe.ShapeError as e:
    print("ShapeError:", e)

# %% [markdown]
# ## 3. Map
#
# `Map(operands, computation, dimensions)` applies a *scalar* computation at every index of
# N operands of one shape: `result[i] = computation(op0[i], op1[i], ...)`. Anything the
# computation can express works per element, branches included (here with `Select`):

# %%
xe.Map([np.float32([1, 2, 3]), np.float32([4, 5, 6])],
       lambda a, c: xe.Select(xe.Gt(a, np.float32(1.5)), xe.Mul(a, c), c))

# %%
b = xe.XlaBuilder("squares")
a = xe.Parameter(b, 0, xe.Shape("f32", (2, 2)), "a")
squares = b.build(xe.Map([a], lambda e: xe.Mul(e, e), dimensions=[0, 1]))
print(squares.as_hlo_text())
squares.run(np.float32([[1, 2], [3, 4]]))

# %% [markdown]
# ## 4. While: the spec's example
#
# `While(condition, body, init)`: starting from `init`, run `body` for as long as
# `condition` says true; the result is the state after the last run of the body. The state
# has a type `T` fixed for the whole loop; `condition` maps `T` to `pred[]`, `body` maps `T`
# to `T`.
#
# The spec's example is a training-loop skeleton: the state is a tuple of an `s32`
# iteration counter and an `f32[10]` accumulator; for 1000 iterations the body adds a
# constant vector to the accumulator and increments the counter. Condition and body are
# computations of their own:

# %%
state = xe.Shape.tuple([xe.Shape("s32", ()), xe.Shape("f32", (10,))])

cb = xe.XlaBuilder("condition")
st = xe.Parameter(cb, 0, state, "state")
condition = cb.build(xe.Lt(xe.GetTupleElement(st, 0), xe.Constant(cb, np.int32(1000))))

bb = xe.XlaBuilder("body")
st = xe.Parameter(bb, 0, state, "state")
iteration = xe.Add(xe.GetTupleElement(st, 0), xe.Constant(bb, np.int32(1)))
new_vector = xe.Add(xe.GetTupleElement(st, 1), xe.Constant(bb, np.arange(10, dtype=np.float32)))
body = bb.build(xe.Tuple(iteration, new_vector))

b = xe.XlaBuilder("training_loop")
init = xe.Tuple(xe.Constant(b, np.int32(0)), xe.Constant(b, np.zeros(10, np.float32)))
loop = xe.While(condition, body, init)
training_loop = b.build(loop)
print(training_loop.as_hlo_text())

# %%
training_loop.run()

# %% [markdown]
# The first picture of a small module draws every instruction of the entry; when the whole
# is wider than a notebook, a loop's condition and body are named on the `while`'s node
# (`training_loop.graph()` draws four nodes). `expand` opens them as clusters attached to the
# `while`:

# %%
training_loop.graph(expand="all")

# %% [markdown]
# A body whose result has another shape than its parameter breaks the loop's rule at once:

# %%
b = xe.XlaBuilder("bad_loop")
try:
    xe.While(condition, lambda st: xe.GetTupleElement(st, 1),
             xe.Tuple(xe.Constant(b, np.int32(0)), xe.Constant(b, np.zeros(10, np.float32))))
except xe.ShapeError as e:
    print("ShapeError:", e)

# %% [markdown]
# ## 5. Stepping into a loop
#
# `StepperWidget(comp, *args)` is a debugger over one run of a computation. In the entry
# computation the whole loop is a single step -- the `while` takes the initial tuple and
# returns the final one -- but **step into** enters its body (at the first iteration, or
# at the one you ask for), **step** walks on through the body and then through the
# condition of the next iteration, and **step out** goes back to the `while`. The call
# stack on top says where you are: `doubling: while.N#0 › body: ...#2` is the body's
# instruction in its iteration 2. Here a small loop -- double a vector 4 times -- with the
# condition and body given as Python functions (traced into computations).

# %%
from xla_explorer.widgets import StepperWidget

b = xe.XlaBuilder("doubling")
x = xe.Parameter(b, 0, xe.Shape("f32", (3,)), "x")
start = xe.Tuple(xe.Constant(b, np.int32(0)), x)
doubled = xe.While(lambda st: xe.Lt(xe.GetTupleElement(st, 0), np.int32(4)),
                   lambda st: xe.Tuple(xe.Add(xe.GetTupleElement(st, 0), np.int32(1)),
                                       xe.Mul(xe.GetTupleElement(st, 1), np.float32(2))),
                   start)
doubling = b.build(xe.GetTupleElement(doubled, 1))
x_val = np.float32([1, 2, 3])
stepper = StepperWidget(doubling, x_val)
stepper

# %% [markdown]
# The widget is driven by its methods (the buttons call them), so the same walk can be
# written in code. Step over the entry computation, one instruction at a time:

# %%
stepper.restart()
print(stepper.location_text)
while True:
    stepper.step()
    if stepper.error:  # the end of the run: the message says so
        break
    print(stepper.location_text)

# %% [markdown]
# Now into the loop: run to the `while`, step into its body at iteration 2, and walk the
# body to its end and on into the condition of iteration 3. The body's multiply doubles
# `[4, 8, 12]` into `[8, 16, 24]`.

# %%
stepper.restart()  # run_to goes forward, to the next execution
stepper.run_to(doubled.name)
stepper.step_into(iteration=2)
for _ in range(len(doubled.inst.attrs["body"].instructions) + 1):
    print(stepper.location_text)
    stepper.step()
print(stepper.location_text)

# %%
multiply = next(i.name for i in doubled.inst.attrs["body"].instructions if i.opcode == "multiply")
stepper.run_to(multiply, invocation=2)
print(stepper.value_text)
stepper.step_out()
print(stepper.location, stepper.value)

# %% [markdown]
# A breakpoint stops **continue** at every execution of an instruction (`name#k`: only
# its k-th): here at each iteration's multiply, the vector doubling as it goes.

# %%
stepper.restart()
stepper.breakpoints = [multiply]
for _ in range(4):
    stepper.continue_()
    print(stepper.location[-1], stepper.value)

# %% [markdown]
# ## 6. Conditional, in both forms
#
# `Conditional(pred, true_operand, true_computation, false_operand, false_computation)` runs
# *one* of two computations, each on its own operand (they may have different types); both
# must return the same shape. Only the chosen branch runs.

# %%
b = xe.XlaBuilder("if_else")
pr = xe.Parameter(b, 0, xe.Shape("pred", ()), "pred")
xv = xe.Parameter(b, 1, xe.Shape("f32", (3,)), "x")
n = xe.Parameter(b, 2, xe.Shape("s32", ()), "n")
if_else = b.build(xe.Conditional(pr, xv, lambda t: xe.Mul(t, np.float32(2)),
                                 n, lambda k: xe.Broadcast(xe.ConvertElementType(k, "f32"), broadcast_sizes=[3])))
print(if_else.as_hlo_text())
print(if_else.run(np.bool_(True), np.float32([1, 2, 3]), np.int32(7)))
print(if_else.run(np.bool_(False), np.float32([1, 2, 3]), np.int32(7)))

# %% [markdown]
# The newer form, `Conditional(branch_index, branch_computations, branch_operands)`, is a
# `switch`: an `s32` index picks one of N branches. An index out of range (negative or too
# large) runs the *last* branch -- and XLA agrees:

# %%
b = xe.XlaBuilder("switch")
bi = xe.Parameter(b, 0, xe.Shape("s32", ()), "branch_index")
xv = xe.Parameter(b, 1, xe.Shape("f32", (3,)), "x")
switch = b.build(xe.Conditional(bi, [lambda t: xe.Neg(t), lambda t: xe.Exp(t), lambda t: xe.Mul(t, t)],
                                [xv, xv, xv]))
xs = np.float32([1, 2, 3])
for index in (0, 1, 2, 7, -1):
    ours, xla = switch.run(np.int32(index), xs), switch.run(np.int32(index), xs, backend="jax")
    print(f"{index:2}", ours, np.allclose(ours, xla))

# %%
b = xe.XlaBuilder("bad_branches")
pr = xe.Parameter(b, 0, xe.Shape("pred", ()), "pred")
xv = xe.Parameter(b, 1, xe.Shape("f32", (3,)), "x")
try:
    xe.Conditional(pr, xv, lambda t: t, xv, lambda t: xe.ConvertElementType(t, "s32"))
except xe.ShapeError as e:
    print("ShapeError:", e)

# %% [markdown]
# ## 7. What JAX emits
#
# `jax.lax.fori_loop` becomes a `while` over a tuple that carries the loop counter along
# with the values (the body is a `call` of the function you gave), and `jax.lax.switch` a
# `conditional` with an index, which JAX `clamp`s into range itself first:

# %%
from xla_explorer.jax_bridge import load_jax

jax = load_jax()
jnp = jax.numpy


def program(i, x):
    x = jax.lax.fori_loop(0, 3, lambda _, v: v * 2 + 1, x)
    return jax.lax.switch(i, [jnp.sin, jnp.cos, jnp.tanh], x)


fx = np.float32([0.1, 0.2])
prog = xe.from_jax(program, np.int32(1), fx)
print(prog.as_hlo_text())
print(prog.run(np.int32(1), fx), prog.run(np.int32(1), fx, backend="jax"))
