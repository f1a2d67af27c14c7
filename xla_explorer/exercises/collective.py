"""Exercises on the collectives, run on simulated replicas: AllReduce, AllGather, AllToAll,
CollectivePermute, ReduceScatter.  Their kinds: ``replicas`` (each replica's result),
``shape`` and ``legal``.

A collective call's attributes are its Python function's keywords (``shard_count``,
``split_count`` ... included); the program every replica runs is built with that function,
so its shape rule and the simulator (``run_replicated``) judge the answers."""
import numpy as np

from .. import ops
from ..builder import Parameter, XlaBuilder
from ..shapes import Shape
from .core import Call, Generator, computation, ints, py_literal, register, spec_literal


def _pick(rng, seq):
    return seq[int(rng.integers(len(seq)))]


class CollectiveCall(Call):
    """A collective call: ``replicas`` holds each replica's operand values (the first is
    ``operands``); shapes and results come from the program built with the op's function."""

    def program(self, attrs=None):
        attrs = self.run_attrs(attrs)
        b = XlaBuilder(self.opcode.replace("-", "_"))
        params = [Parameter(b, i, Shape.of(v), name) for i, (name, v) in enumerate(self.operands)]
        return b.build(getattr(ops, self.api)(*params, **attrs))

    def shape(self, attrs=None):
        return self.program(attrs).result_shape

    def run_replicated(self):
        return [np.asarray(r) for r in self.program().run_replicated([list(v) for v in self.replicas])]

    def run(self, attrs=None):
        raise NotImplementedError(f"{self.api} needs replicas: run_replicated()")

    def replicated_code(self):
        lines = ["import numpy as np", "import xla_explorer as xe", "", "b = xe.XlaBuilder('collective')"]
        for i, (n, v) in enumerate(self.operands):
            lines.append(f"{n} = xe.Parameter(b, {i}, xe.Shape.parse({str(Shape.of(v))!r}), {n!r})")
        lines.append("comp = b.build(" + self.call_text(python=True) + ")")
        lines.append("per_replica = [" + ", ".join("[" + ", ".join(py_literal(x) for x in vals) + "]"
                                                    for vals in self.replicas) + "]")
        lines.append("result = comp.run_replicated(per_replica)")
        return "\n".join(lines)

    def code(self, hidden=(), target=None):
        return self.replicated_code()


def _replica_values(rng, n, dims, level):
    """Replica d's operand: small distinct numbers, 10*d + k at level 1 (the value tells the owner)."""
    size = int(np.prod(dims))
    if level == 1:
        return [(10 * d + np.arange(size)).reshape(dims).astype(np.int32) for d in range(n)]
    vals = rng.choice(np.arange(1, 100), size=n * size, replace=False).astype(np.int32)
    return [vals[d * size:(d + 1) * size].reshape(dims) for d in range(n)]


def _groups_for(rng, n, level):
    if level == 1 or n < 4:
        return ()
    return _pick(rng, [((0, 1), (2, 3)), ((0, 2), (1, 3)), ((0, 1, 2, 3),)])


class _CollectiveGenerator(Generator):
    kinds = ("replicas", "shape", "legal")

    def _call(self, api, opcode, replicas, attrs, display):
        c = CollectiveCall(opcode, [("x", replicas[0])], attrs, [("operand", "x")] + display, api=api)
        c.replicas = [[v] for v in replicas]
        return c

    def replicas_problem(self, rng, level, kind):
        return self.problem(rng, level, kind)

    def replica_steps(self, call, results):
        return [self.rule] + [f"replica {d}: {spec_literal(r)}" for d, r in enumerate(results)]

    def shape_steps(self, call, shape):
        return [self.formula, f"The result is {shape}."]


class AllReduceExercises(_CollectiveGenerator):
    opcode = "all-reduce"
    rule = ("AllReduce combines x of every replica in a group, element by element, with the computation; every "
            "member of the group gets the result. Empty replica_groups: all replicas form one group.")
    formula = "result@r = computation over the replicas g of r's group of x@g, element by element"

    def problem(self, rng, level, kind):
        n = 2 if level == 1 else 4
        kind_ = "add" if level < 3 else _pick(rng, ["add", "max", "min"])
        reps = _replica_values(rng, n, [ints(rng, 2, 3)], level)
        return self._call("AllReduce", "all-reduce", reps,
                          {"computation": computation(kind_, kind_), "replica_groups": _groups_for(rng, n, level)},
                          [("attr", "computation"), ("attr", "replica_groups")])

    def mutations(self, call):
        return [("replica_groups", lambda c, rng: c.with_attrs(replica_groups=((0, 1), (1, 2)))),
                ("replica_groups", lambda c, rng: c.with_attrs(replica_groups=((0, 0),)))]


class AllGatherExercises(_CollectiveGenerator):
    opcode = "all-gather"
    rule = ("AllGather concatenates, along all_gather_dim, x of every replica in a group, in group order; every "
            "member gets the whole. The result is shard_count times larger along that dimension.")
    formula = ("result@r = Concatenate(x@g[0], ..., x@g[shard_count - 1], dimension=all_gather_dim), g the "
               "group of r")

    def problem(self, rng, level, kind):
        n = 2 if level == 1 else 4
        groups = _groups_for(rng, n, level)
        dims = [ints(rng, 2, 3)] if level < 3 else [2, ints(rng, 1, 2)]
        reps = _replica_values(rng, n, dims, level)
        shard = len(groups[0]) if groups else n
        return self._call("AllGather", "all-gather", reps,
                          {"all_gather_dim": ints(rng, 0, len(dims) - 1), "shard_count": shard,
                           "replica_groups": groups},
                          [("attr", "all_gather_dim"), ("attr", "shard_count"), ("attr", "replica_groups")])

    def mutations(self, call):
        rank = np.ndim(call.value("x"))
        return [("all_gather_dim", lambda c, rng: c.with_attrs(all_gather_dim=rank)),
                ("replica_groups", lambda c, rng: c.with_attrs(replica_groups=((0, 1), (1, 2))))]


class AllToAllExercises(_CollectiveGenerator):
    opcode = "all-to-all"
    rule = ("AllToAll: every replica cuts x into split_count blocks along split_dimension and sends block j to "
            "the j-th replica of its group; each replica concatenates what it receives, in sender order, along "
            "concat_dimension.")
    formula = ("result@g[j] = Concatenate(block_j(x@g[0]), ..., block_j(x@g[n - 1]), "
               "dimension=concat_dimension)")

    def problem(self, rng, level, kind):
        n = 2 if level == 1 else 4
        dims = [n * ints(rng, 1, 2)] if level < 3 else [n, 2]
        reps = _replica_values(rng, n, dims, level)
        concat = 0 if level < 3 else ints(rng, 0, 1)
        return self._call("AllToAll", "all-to-all", reps,
                          {"split_dimension": 0, "concat_dimension": concat, "split_count": n},
                          [("attr", "split_dimension"), ("attr", "concat_dimension"), ("attr", "split_count")])

    def mutations(self, call):
        rank = np.ndim(call.value("x"))
        return [("split_dimension", lambda c, rng: c.with_attrs(split_dimension=rank)),
                ("concat_dimension", lambda c, rng: c.with_attrs(concat_dimension=rank))]


class CollectivePermuteExercises(_CollectiveGenerator):
    opcode = "collective-permute"
    rule = ("CollectivePermute: for each pair (source, target) the x of replica source becomes the result on "
            "replica target; a replica that is no target gets zeros.")
    formula = "result@t = x@s if (s, t) is in source_target_pairs, else zeros"

    def problem(self, rng, level, kind):
        n = 3 if level == 1 else 4
        reps = _replica_values(rng, n, [2], level)
        perm = [int(p) for p in rng.permutation(n)]
        pairs = tuple((i, perm[i]) for i in range(n) if level == 1 or i != perm[i])
        if level == 3 and len(pairs) > 1:
            pairs = pairs[:-1]  # someone receives nothing: zeros
        if not pairs:
            pairs = ((0, 1),)
        return self._call("CollectivePermute", "collective-permute", reps, {"source_target_pairs": pairs},
                          [("attr", "source_target_pairs")])

    def mutations(self, call):
        return [("source_target_pairs", lambda c, rng: c.with_attrs(source_target_pairs=((0, 1), (2, 1)))),
                ("source_target_pairs", lambda c, rng: c.with_attrs(source_target_pairs=((0, 1), (0, 2))))]


class ReduceScatterExercises(_CollectiveGenerator):
    opcode = "reduce-scatter"
    rule = ("ReduceScatter is an AllReduce whose result is cut into shard_count blocks along scatter_dimension: "
            "the i-th replica of each group gets block i.")
    formula = "result@g[i] = block_i(AllReduce(x, computation)) along scatter_dimension"

    def problem(self, rng, level, kind):
        n = 2 if level == 1 else 4
        groups = _groups_for(rng, n, level)
        shard = len(groups[0]) if groups else n
        reps = _replica_values(rng, n, [shard * ints(rng, 1, 2)], level)
        return self._call("ReduceScatter", "reduce-scatter", reps,
                          {"computation": computation("add", "add"), "scatter_dimension": 0, "shard_count": shard,
                           "replica_groups": groups},
                          [("attr", "computation"), ("attr", "scatter_dimension"), ("attr", "shard_count"),
                           ("attr", "replica_groups")])

    def mutations(self, call):
        return [("scatter_dimension", lambda c, rng: c.with_attrs(scatter_dimension=1)),
                ("shard_count", lambda c, rng: c.with_attrs(shard_count=c.attrs["shard_count"] + 1))]


for _g in (AllReduceExercises, AllGatherExercises, AllToAllExercises, CollectivePermuteExercises,
           ReduceScatterExercises):
    register(_g())

