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
# # Collectives: one program, many devices
#
# [![Binder](https://mybinder.org/badge_logo.svg)](https://mybinder.org/v2/gh/xla-explorer/xla_explorer/main?labpath=notebooks%2Fcollectives.ipynb)
#
# A collective is an op that every device runs at the same point of the same program, each on
# its own data, and that exchanges data between them: a sum over all devices (`AllReduce`),
# everyone's pieces concatenated (`AllGather`), pieces swapped (`AllToAll`), a shift around a
# ring (`CollectivePermute`). xla_explorer runs a program on **simulated devices**: one
# thread per replica, meeting at each collective. No GPU or cluster needed.
#
# This notebook builds each collective by hand on 4 simulated replicas, step by step, then
# writes the same program in JAX with `shard_map` and runs it both on JAX's host devices and on
# our simulator.

# %%
import os

# JAX makes its CPU devices when it is first imported: ask for 4 before anything imports it
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=4")

import numpy as np
import xla_explorer as xe

N = 4   # replicas


def per_replica(fn, shape):
    """The program every replica runs: fn of one parameter of the given shape."""
    b = xe.XlaBuilder(fn.__name__)
    return b.build(fn(xe.Parameter(b, 0, xe.Shape.parse(shape), "x")))


def show(title, inputs, outputs):
    print(title)
    for d, (i, o) in enumerate(zip(inputs, outputs)):
        print(f"  replica {d}: {np.array2string(np.asarray(i[0])):>24}  ->  {np.array2string(np.asarray(o))}")


# each replica's own data: replica d holds [10d, 10d+1]
inputs = [[np.array([10 * d, 10 * d + 1], np.float32)] for d in range(N)]

# %% [markdown]
# ## 1. AllReduce and replica groups
#
# `AllReduce(x, computation)` combines `x` of every replica, element by element, with
# `computation`, and gives every replica the result. With no `replica_groups`, all replicas form
# one group.

# %%
all_sum = per_replica(lambda x: xe.AllReduce(x, lambda a, b: a + b), "f32[2]")
show("AllReduce(x, add)", inputs, all_sum.run_replicated(inputs))
print([line.strip() for line in all_sum.as_hlo_text().splitlines() if "all-reduce(" in line][0])

# %% [markdown]
# `replica_groups` splits the replicas into independent groups; each group reduces on its own.
# `{{0,1},{2,3}}` pairs neighbours, `{{0,2},{1,3}}` pairs replicas two apart: a 2x2 mesh
# reduced along one axis or the other.

# %%
for groups in ([[0, 1], [2, 3]], [[0, 2], [1, 3]]):
    comp = per_replica(lambda x: xe.AllReduce(x, lambda a, b: a + b, replica_groups=groups), "f32[2]")
    show(f"AllReduce, replica_groups={groups}", inputs, comp.run_replicated(inputs))

# %% [markdown]
# A replica belongs to one group at most; the shape rule says so while building:

# %%
try:
    per_replica(lambda x: xe.AllReduce(x, lambda a, b: a + b, replica_groups=[[0, 1], [1, 2]]), "f32[2]")
except xe.ShapeError as e:
    print(e)

# %% [markdown]
# ## 2. AllGather
#
# `AllGather(x, all_gather_dim, shard_count)`: every replica gets the concatenation, along
# `all_gather_dim`, of all replicas' `x`, in replica order. The result is `shard_count` times
# larger along that dimension.

# %%
gather = per_replica(lambda x: xe.AllGather(x, all_gather_dim=0, shard_count=N), "f32[2]")
print(gather.result_shape)
show("AllGather(x, all_gather_dim=0)", inputs, gather.run_replicated(inputs))

# %% [markdown]
# ## 3. AllToAll, step by step
#
# `AllToAll(x, split_dimension, concat_dimension, split_count)` is a transpose across devices:
#
# 1. each replica cuts its `x` into `split_count` blocks along `split_dimension`;
# 2. block `j` of replica `i` is sent to replica `j`;
# 3. each replica concatenates the blocks it received, in sender order, along
#    `concat_dimension`.
#
# With 4 replicas each holding a row of 4, replica `j` ends up with column `j`.

# %%
rows = [[np.arange(4, dtype=np.float32) + 10 * d] for d in range(N)]
a2a = per_replica(lambda x: xe.AllToAll(x, split_dimension=0, concat_dimension=0, split_count=N), "f32[4]")
out = a2a.run_replicated(rows)

print("step 1, the blocks each replica cuts:")
for i, (r,) in enumerate(rows):
    print(f"  replica {i}: " + "  ".join(f"block {j} = {r[j:j + 1]}" for j in range(N)))
print("step 2-3, what each replica receives, in sender order:")
for j in range(N):
    print(f"  replica {j}: " + " ".join(f"from {i}: {rows[i][0][j]:4.0f}" for i in range(N)) + f"  ->  {out[j]}")
np.testing.assert_array_equal(np.stack(out), np.stack([r[0] for r in rows]).T)   # a transpose

# %% [markdown]
# ## 4. CollectivePermute
#
# `CollectivePermute(x, source_target_pairs)`: replica `s` sends its `x` to replica `t` for each
# pair `(s, t)`. A replica that receives nothing gets zeros. Here, a shift around a ring, and a
# broken ring where replica 0 receives from no one:

# %%
ring = [(i, (i + 1) % N) for i in range(N)]
shift = per_replica(lambda x: xe.CollectivePermute(x, ring), "f32[2]")
show(f"CollectivePermute, pairs={ring}", inputs, shift.run_replicated(inputs))
chain = per_replica(lambda x: xe.CollectivePermute(x, ring[:-1]), "f32[2]")
show(f"CollectivePermute, pairs={ring[:-1]}", inputs, chain.run_replicated(inputs))

# %% [markdown]
# A replica may send to at most one target and receive from at most one source:

# %%
try:
    per_replica(lambda x: xe.CollectivePermute(x, [(0, 1), (2, 1)]), "f32[2]")
except xe.ShapeError as e:
    print(e)

# %% [markdown]
# ## 5. Which replica am I?
#
# `ReplicaId` is the one value that differs between replicas of the same program with the same
# data. With it a program can pick its own piece of a shared array, as a sharded program does:

# %%
def my_piece(x):
    start = xe.ConvertElementType(xe.ReplicaId(x.builder), "s32") * 2
    return xe.DynamicSlice(x, [start], [2])


pieces = per_replica(my_piece, "f32[8]")
shared = np.arange(8, dtype=np.float32)
print(pieces.run_replicated([[shared]] * N))

# %% [markdown]
# ## 6. The same program from JAX: `shard_map` on host devices
#
# JAX writes such programs with `shard_map`: a function of one device's shard, run on every
# device of a mesh, with named collectives (`psum`, `all_gather`, `all_to_all`, `ppermute`).
# JAX lowers it to one partitioned HLO module; `xe.from_jax` imports it, and `comp.run` runs
# it on simulated devices, splitting the input the way the sharding says.

# %%
try:
    import jax
    from jax.sharding import Mesh
    from jax.sharding import PartitionSpec as P
    have_devices = len(jax.devices()) >= N
except ImportError:
    have_devices = False
print("JAX with 4 host devices:", have_devices)

# %%
if have_devices:
    mesh = Mesh(np.array(jax.devices()[:N]), ("d",))

    def per_device(x):                     # x: this device's f32[4] piece of an f32[16]
        return (jax.lax.psum(x, "d"),
                jax.lax.all_gather(x, "d", tiled=True),
                jax.lax.all_to_all(x, "d", 0, 0, tiled=True),
                jax.lax.ppermute(x, "d", perm=ring))

    f = jax.shard_map(per_device, mesh=mesh, in_specs=P("d"), out_specs=(P("d"),) * 4)
    a = np.arange(16, dtype=np.float32)
    comp = xe.from_jax(f, a)
    for line in comp.as_hlo_text().splitlines():
        if any(k in line for k in ("all-reduce(", "all-gather(", "all-to-all(", "collective-permute(")):
            print(line.strip()[:150])

# %% [markdown]
# The module names the same four collectives with the replica groups and pairs of sections
# 1-4. Run by JAX on its 4 CPU devices and by our simulator, the results agree:

# %%
if have_devices:
    ours, theirs = comp.run(a), jax.jit(f)(a)
    for name, o, t in zip(("psum", "all_gather", "all_to_all", "ppermute"), ours, theirs):
        print(f"{name:10} agree: {np.array_equal(o, np.asarray(t))}   {np.asarray(o)[:8]} ...")

# %% [markdown]
# **Exercises.** (1) With 4 replicas and `replica_groups=[[0, 1, 2, 3]]`, what does
# `AllGather(x, all_gather_dim=1, shard_count=4)` give for `x` of shape `f32[2,3]`? Check your
# answer by running it. (2) Write a ring all-reduce out of
# `N - 1` `CollectivePermute`s and additions, and compare it with `AllReduce`.
