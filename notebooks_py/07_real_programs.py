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
# # 7. Real programs: an MLP's gradient, as JAX hands it to XLA and as XLA compiles it
#
# [![Binder](https://mybinder.org/badge_logo.svg)](https://mybinder.org/v2/gh/xla-explorer/xla_explorer/main?labpath=notebooks%2F07_real_programs.ipynb)
#
# The earlier notebooks built small computations by hand. Real HLO comes from a front end:
# here JAX. We import the gradient of a tiny classifier (an embedding lookup, one hidden
# layer, a softmax cross-entropy), look at its graph, find the ops from the earlier
# notebooks inside it -- a gather, a scatter, reductions -- and ask them what they read.
# Then we run it on three executors and compare with XLA instruction by instruction, look
# at what XLA:CPU actually compiled: fusions, and finally explore a program of a thousand
# instructions whose graph starts collapsed.

# %%
import collections
import re

import numpy as np
import xla_explorer as xe
from xla_explorer.jax_bridge import load_jax

jax = load_jax()
jnp = jax.numpy


def hlo_line(comp, name):
    """The HLO text line of instruction `name`, without its metadata."""
    for line in comp.as_hlo_text().splitlines():
        if re.match(rf"\s*(ROOT )?{re.escape(name)} = ", line):
            return re.sub(r", metadata=\{[^}]*\}", "", line.strip())

# %% [markdown]
# ## 1. The program
#
# Token ids pick rows of an embedding table `E` (a gather), a `tanh` layer and a linear layer
# give 3 logits per token, and the loss is the mean negative log-probability of each
# token's label (`take_along_axis`, another gather). Token 3 appears twice.

# %%
rng = np.random.default_rng(0)
params = dict(E=rng.normal(size=(10, 4)).astype(np.float32),
              W1=(rng.normal(size=(4, 8)) * 0.5).astype(np.float32),
              W2=(rng.normal(size=(8, 3)) * 0.5).astype(np.float32))
ids = np.int32([3, 7, 3, 1, 9])
labels = np.int32([0, 2, 1, 1, 0])


def loss(params, ids, labels):
    h = jnp.tanh(params["E"][ids] @ params["W1"])
    logp = jax.nn.log_softmax(h @ params["W2"])
    return -jnp.take_along_axis(logp, labels[:, None], axis=1).mean()


grad = xe.from_jax(jax.grad(loss), params, ids, labels)
print(grad.program_shape())
collections.Counter(i.opcode for c in grad.computations for i in c.instructions).most_common()

# %% [markdown]
# `from_jax` is `jax.jit(f).lower(*args)` printed as HLO text and parsed. JAX flattens the
# `params` dict into three parameters (in key order), so the module takes five arrays and
# returns the three gradients. Nested `jax.jit`s (here inside `log_softmax` and
# `take_along_axis`) become `call`s of their own computations.

# %%
args = (params["E"], params["W1"], params["W2"], ids, labels)
text = grad.as_hlo_text()
print(re.sub(r", metadata=\{[^}]*\}", "", text[text.index("ENTRY"):]))  # metadata: see section 6

# %% [markdown]
# ## 2. The graph
#
# One node per instruction with its shape, called computations as clusters. The whole
# program is already large:

# %%
grad.graph()

# %% [markdown]
# A neighbourhood is easier to read: the embedding gather, two steps each way, with the values
# of a run overlaid (range, mean, a small heatmap):

# %%
gather = next(i.name for i in grad.entry.instructions if i.opcode == "gather")
grad.graph(args=args, around=gather, radius=2)

# %% [markdown]
# ## 3. Inside the program: the gather, the scatter, a reduce
#
# The embedding lookup is the `gather_nd` pattern of notebook 3 (`collapsed_slice_dims={0}`,
# `slice_sizes={1,4}`: whole rows). JAX first maps negative ids to `id + 10`, the `select`
# before it. Its index map, evaluated on the real arguments:

# %%
print(hlo_line(grad, gather))
for access in list(xe.index_map(grad, gather, *args))[::4]:
    print(f"result{list(access.index)} <- E{list(access.reads[0][1])}")

# %%
xe.animate(grad, gather, *args, max_steps=20)

# %% [markdown]
# The gradient of a gather is a scatter-add into a zero table: each token's gradient row is
# added to its embedding's row. Token 3 appears twice, so its two rows *collide* and add up --
# the reason the gradient of an embedding lookup must be a scatter with `add`, not a `set`:

# %%
scatter = next(i.name for i in grad.entry.instructions if i.opcode == "scatter")
print(hlo_line(grad, scatter))
writes = collections.defaultdict(list)
for access in xe.index_map(grad, scatter, *args):
    writes[access.writes[0][1][0]].append(access.index[0])
print({row: sorted(set(tokens)) for row, tokens in sorted(writes.items())})
xe.animate(grad, scatter, *args, max_steps=12)

# %% [markdown]
# The reductions of the softmax live inside the called `log_softmax` computation. For an
# instruction outside the entry computation the index map takes no arguments (what a reduce
# reads does not depend on the values): each of the 5 results folds the 3 logits of its row.

# %%
comp_name, reduce_name = next((c.name, i.name) for c in grad.computations for i in c.instructions
                              if i.opcode == "reduce")
print(comp_name, hlo_line(grad, reduce_name))
imap = xe.index_map(grad, reduce_name)
print(imap, [index for _, index in imap[2].reads])

# %% [markdown]
# ## 4. Run it three ways, and compare with XLA
#
# The NumPy reference, the Numba executor (compiled loops; the first call compiles, a few
# seconds), and XLA itself through JAX. All three agree with `jax.grad` run directly:

# %%
expected = jax.grad(loss)(params, ids, labels)
for backend in ("numpy", "numba", "jax"):
    got = grad.run(*args, backend=backend)
    ok = all(np.allclose(g, expected[k], atol=1e-5) for g, k in zip(got, ("E", "W1", "W2")))
    print(f"{backend:6} matches jax.grad: {ok}")

# %% [markdown]
# `diff` goes further: every instruction of the entry computation is evaluated again on XLA,
# fed the reference's own operand values, so a disagreement would show up at the
# instruction that makes it instead of spreading to everything after it. Float results are
# compared with a tolerance that depends on the type (`f32`: relative 1e-5).

# %%
report = grad.diff(*args)
report

# %% [markdown]
# ## 5. What XLA:CPU compiled: fusions
#
# `from_jax(..., optimized=True)` imports the HLO *after* XLA's optimisation passes. The
# program is no longer a list of small ops: chains of element-wise ops, and the ops that
# feed them, are *fused* into single `fusion` instructions, each calling a fused
# computation (a loop XLA generates code for); matmuls go to a library (`kCustom` fusions);
# reshapes that move no data became `bitcast`s. Each instruction also carries `metadata`
# (the JAX operation it came from); it is parsed and printed back, and left out below to
# keep the lines short.

# %%
optimized = xe.from_jax(jax.grad(loss), params, ids, labels, optimized=True)
text = optimized.as_hlo_text()
print(re.sub(r", metadata=\{[^}]*\}", "", text[text.index("ENTRY"):]))

# %%
print(collections.Counter(i.opcode for i in optimized.entry.instructions))
print(collections.Counter(i.attrs.get("kind") for i in optimized.entry.instructions if i.opcode == "fusion"))

# %% [markdown]
# Two rewrites are worth a look. The embedding gather now keeps the row dimension as a size-1
# offset dimension and `bitcast`s it away (free, in a row-major layout); and the
# `take_along_axis` gather/scatter pair, which used batching dimensions in the HLO JAX
# emitted, now builds explicit 2-D indices by concatenating an `iota` (the row number) to the
# labels:

# %%
for comp in optimized.computations:
    for inst in comp.instructions:
        if inst.opcode in ("gather", "scatter", "concatenate", "iota"):
            print(f"{comp.name}:\n   {hlo_line(optimized, inst.name)}")

# %% [markdown]
# The optimized module is a program like any other: the graph shows each fusion as a cluster
# with its fused computation, and it runs on the reference executor and diffs against XLA
# the same way.

# %%
optimized.graph()

# %%
got = optimized.run(*args)
print(all(np.allclose(g, expected[k], atol=1e-5) for g, k in zip(got, ("E", "W1", "W2"))))
optimized.diff(*args)

# %% [markdown]
# ## 6. A bigger program: a graph that starts collapsed
#
# A transformer's training step has thousands of instructions, and no drawing of thousands
# of boxes is readable (or quick: Graphviz needs minutes for a few hundred). JAX records
# where each instruction came from in its `metadata`: the `op_name` names the scopes
# (`jit(loss)/transpose(jvp(layer1))/mlp/dot_general`: the backward pass of `layer1`'s MLP)
# and `stack_frame_id` the source line. The graph groups instructions by those scopes and
# by called computations, and a big module's first picture shows the top groups closed:
# one box each, with its instruction count, its commonest ops, the shapes going in and
# out, and its lines of this notebook. Here six layers of attention and an MLP, each in
# a `jax.named_scope`: the forward pass runs down (`jvp(layer0)` to `jvp(layer5)`), the
# backward pass back up (`transpose(jvp(layer5))` to `transpose(jvp(layer0))`), and every
# weight, a parameter, feeds both:

# %%
def layer_loss(layers, x):
    for i, (wq, wk, wv, w1, w2) in enumerate(layers):
        with jax.named_scope(f"layer{i}"):
            with jax.named_scope("attention"):
                q, k, v = x @ wq, x @ wk, x @ wv
                x = x + jax.nn.softmax(q @ k.T / 4.0, axis=-1) @ v
            with jax.named_scope("mlp"):
                x = x + jnp.tanh(jax.nn.relu(x @ w1) @ w2)
    return jnp.mean(x ** 2)


layers = [tuple((rng.normal(size=(16, 16)) / 4).astype(np.float32) for _ in range(5)) for _ in range(6)]
x = rng.normal(size=(8, 16)).astype(np.float32)
big = xe.from_jax(jax.grad(layer_loss), layers, x)
print(sum(len(c.instructions) for c in big.computations), "instructions")
g = big.graph()
g

# %% [markdown]
# `expand` opens a group in place (`collapse` closes it): by its name, its key, or the name
# of an instruction inside it (every group around it opens). `"layer1/attention"` names the
# attention of both `jvp(layer1)` and `transpose(jvp(layer1))`:

# %%
g.expand("layer1/attention")

# %% [markdown]
# `find` searches every instruction, those inside closed groups too, by name, opcode,
# shape or scope (`op:dot`, `shape:f32[16,16]`, `scope:layer2/mlp` for one field). The
# backward pass of the last layer's MLP has these matrix products:

# %%
for item in g.find("scope:transpose(jvp(layer5))/mlp"):
    if item.inst.opcode == "dot":
        print(item.inst.name, item.inst.shape, " in", item.group.key)

# %% [markdown]
# `highlight` marks an instruction ("where am I", as the stepper uses it): its node when it
# is drawn, else the closed group around it. With the values of a run (`args=`, from the
# run's trace: instructions inside called computations get theirs too):

# %%
dot = next(i for i in g.find("scope:transpose(jvp(layer5))/mlp") if i.inst.opcode == "dot")
big.graph(args=jax.tree_util.tree_leaves((layers, x)), expand=[dot.inst.name], highlight=dot.inst.name)

# %% [markdown]
# In JupyterLab the `GraphWidget` does the same with the mouse: click a closed group to open
# it (click an open group's title to close it), type in the search box to find
# instructions anywhere and click one to reveal it, hover a node for its attributes and
# source line, drag to pan, wheel to zoom, and download the current view as SVG or PNG.
# `gw.follow(stepper)` keeps a `StepperWidget`'s current instruction highlighted.

# %%
from xla_explorer.widgets import GraphWidget

gw = GraphWidget(big)
gw

# %%
gw.highlight(dot.inst.name)
print(gw.status, "| marked:", [n.name for n in gw.graph.nodes if n.highlight])
