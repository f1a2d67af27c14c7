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
from ..errors import ShapeError
from .core import (Call, Feedback, Generator, ValuesExercise, _form, _same_values, computation, index_text, ints, py_literal,
                   register, scalar_text, spec_attr, spec_literal, type_text, values_example)
from .kinds import FixExercise, replica_declarations


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

    def run_replicated(self, attrs=None):
        return [np.asarray(r) for r in self.program(attrs).run_replicated([list(v) for v in self.replicas])]

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


# -- the kinds on simulated replicas: one replica's values, fix a broken call ----------------------

class CollectiveValuesExercise(ValuesExercise):
    """What does replica r get?  Every replica's operand is shown; one replica's result asked."""

    def setup(self, rng):
        self.results = self.call.run_replicated()
        n = len(self.results)
        # a replica whose result is not its own operand when there is one (a permute's zeros, a group's sum)
        own = [d for d in range(n) if not np.array_equal(self.results[d], self.call.replicas[d][0])]
        self.replica = int(rng.choice(own or list(range(n))))
        self.expected = self.results[self.replica]

    def body(self):
        return replica_declarations(self.call) + ["", self.call.call_text(
            prefix=f"run on {len(self.call.replicas)} replicas: ")]

    def question(self):
        return (f"What does replica {self.replica} get ({Shape.of(self.expected)})? Answer with its values, "
                f"{values_example(np.ndim(self.expected))}.")

    def kind_hint(self):
        return (f"Find the replicas replica {self.replica} meets (its replica group, or the pair that names it as "
                "target), then what each of them sends.")

    def step_hint(self):
        return f"Replica {self.replica}'s result is {type_text(self.expected)}."

    def reasoning(self):
        return self.generator.replica_steps(self.call, self.results)

    def code(self):
        return self.call.replicated_code() + f"\nresult = result[{self.replica}]"


class CollectiveFixExercise(FixExercise):
    """A collective call breaks a rule (replica groups that overlap, a dimension out of range...);
    the answer is the attribute value that makes it legal and gives the meant result on every
    replica.  Replica groups and pairs may be written as the spec does: {{0,2},{1,3}}."""

    def _meant(self, call):
        return call.run_replicated()

    def body(self):
        lines = replica_declarations(self.call) + ["", self.call.call_text(prefix=f"run on {len(self.call.replicas)} "
                                                                             "replicas: "), "", "raises:", "",
                                                   f"    ShapeError: {self.error}", "", "meant results:"]
        for d, r in enumerate(self.target):
            head = f"    replica {d}: "
            lines.append(f"{head}{spec_literal(r, len(head))};  // {type_text(r)}")
        return lines

    def question(self):
        h = self.hidden[0]
        # letters, not ids: an example must not be the answer
        form = "groups of replica ids, written as the spec does, {{a,b},{c,d}}, or [[a, b], [c, d]]" \
            if h == "replica_groups" else \
            "(source, target) pairs, written as the spec does, {{a,b},{c,d}}, or [(a, b), (c, d)]" \
            if h == "source_target_pairs" else None
        return (f"The error names what is wrong. Which value of {h} fixes the call, so that every replica gets "
                f"its meant result?\nAnswer the value: "
                + (form or _form(h, self.intended.attrs[h]))
                + ".")

    def step_hint(self):
        return f"The argument at fault is {self.hidden[0]}; replica 0's meant result is {type_text(self.target[0])}."

    def code(self):
        return self.intended.replicated_code()

    def judge(self, answer, reveal):
        if isinstance(answer, str):
            answer = self._parse_text(answer)
        h = self.hidden[0]
        if isinstance(answer, dict):
            answer = answer.get(h)
        value = self.generator.normalize_attr(h, answer)
        shown = f"{h}={spec_attr(value, h)}"
        why = "\n".join(self.reasoning())
        wrong = (lambda text: Feedback(False, text + ("\n" + why if reveal else self._hint_line()),
                                       self.answer_value() if reveal else None))
        attrs = dict(self.call.attrs, **{h: value})
        try:
            self.call.shape(attrs)
        except ShapeError as e:
            return wrong(f"With {shown} the call is illegal: {e}")
        try:  # the shape rule cannot know the replica count: an id beyond it fails when run
            results = self.call.run_replicated(attrs)
        except Exception as e:  # noqa: BLE001 - the simulator's message names the op and the ids
            return wrong(f"With {shown} the call fails on {len(self.target)} replicas: {e}")
        for d, (want, got) in enumerate(zip(self.target, results)):
            if Shape.of(got) != Shape.of(want):
                return wrong(f"With {shown} replica {d} gets {type_text(got)}, but its meant result is "
                             f"{type_text(want)}.")
            same = _same_values(want, np.asarray(got))
            if not np.all(same):
                first = tuple(int(i) for i in np.argwhere(~same)[0])
                return wrong(f"With {shown} the call is legal, but replica {d} gets result{index_text(first)} = "
                             f"{scalar_text(got[first])}, while its meant result has {scalar_text(want[first])}.")
        ours = self.intended.attrs[h]
        extra = "" if spec_attr(value, h) == spec_attr(ours, h) else \
            f"\n(The exercise meant {h}={spec_attr(ours, h)}; yours works too.)"
        return Feedback(True, f"With {shown} every replica gets its meant result." + extra + "\n" + why,
                        self.answer_value())


class _CollectiveGenerator(Generator):
    kinds = ("replicas", "values", "shape", "legal")
    kind_classes = {"values": CollectiveValuesExercise, "fix": CollectiveFixExercise}
    titles = {"values": "what does one replica get?"}

    def _call(self, api, opcode, replicas, attrs, display):
        c = CollectiveCall(opcode, [("x", replicas[0])], attrs, [("operand", "x")] + display, api=api)
        c.replicas = [[v] for v in replicas]
        return c

    def replicas_problem(self, rng, level, kind):
        return self.problem(rng, level, kind)

    def replica_steps(self, call, results):
        return [self.rule] + [f"replica {d}: {spec_literal(r)}" for d, r in enumerate(results)]

    def value_steps(self, call, index, result, k=None):
        """Why one replica's result has its values: every replica's result, by the rule."""
        return self.replica_steps(call, call.run_replicated())

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

