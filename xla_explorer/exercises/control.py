"""Exercises on While (run the loop in your head: the final state; the rules that tie condition
and body to the loop state) and Map (a scalar computation applied at every index)."""
import numpy as np

from .. import ops
from .core import Call, Computation, Generator, distinct, index_text, ints, register, scalar_text, spec_attr, spec_literal


def _gte(s, i):
    return ops.GetTupleElement(s, i)


def _state_text(state):
    return spec_literal(tuple(np.asarray(v) for v in state)) if isinstance(state, tuple) else spec_literal(state)


class WhileExercises(Generator):
    opcode = "while"
    kinds = ("values", "legal")
    rule = ("While runs body on the loop state as long as condition(state) is true, and returns the final "
            "state; condition returns pred[] and body returns a state of init's shape.")
    formula = "state = init; while condition(state): state = body(state); result = state"
    implement_name = "while_loop"  # "while" is a Python keyword
    implement_state = True
    implement_hint = ("Keep the state in a variable; call condition on it before every iteration, body to get "
                      "the next state.")
    implement_note = ("A tuple state comes in and goes out as a Python tuple of NumPy scalars, in order; "
                      "return the final state the same way.")

    def problem(self, rng, level, kind):
        if level == 1:
            n, x0 = ints(rng, 10, 40), ints(rng, 1, 3)
            if rng.random() < 0.5:
                c = ints(rng, 0, 1)
                body = Computation("body", lambda x: ops.Add(ops.Mul(x, np.int32(2)), np.int32(c)),
                                   f"body(x) = x * 2 + {c}", f"lambda x: xe.Add(xe.Mul(x, np.int32(2)), np.int32({c}))")
            else:
                step = ints(rng, 3, 5)
                body = Computation("body", lambda x: ops.Add(x, np.int32(step)), f"body(x) = x + {step}",
                                   f"lambda x: xe.Add(x, np.int32({step}))")
            cond = Computation("cond", lambda x: ops.Lt(x, np.int32(n)), f"cond(x) = x < {n}",
                               f"lambda x: xe.Lt(x, np.int32({n}))")
            init = np.int32(x0)
        elif level == 2 or rng.random() < 0.4:
            n = ints(rng, 3, 5)
            i0 = 0 if level == 2 else n + ints(rng, 0, 1)  # level 3: the condition is false at once
            a0 = ints(rng, 1, 3)
            if rng.random() < 0.5:
                body = Computation("body",
                                   lambda s: (ops.Add(_gte(s, 0), np.int32(1)), ops.Mul(_gte(s, 1), np.int32(2))),
                                   "body((i, acc)) = (i + 1, acc * 2)",
                                   "lambda s: (xe.Add(xe.GetTupleElement(s, 0), np.int32(1)), "
                                   "xe.Mul(xe.GetTupleElement(s, 1), np.int32(2)))")
            else:
                body = Computation("body",
                                   lambda s: (ops.Add(_gte(s, 0), np.int32(1)), ops.Add(_gte(s, 1), _gte(s, 0))),
                                   "body((i, acc)) = (i + 1, acc + i)",
                                   "lambda s: (xe.Add(xe.GetTupleElement(s, 0), np.int32(1)), "
                                   "xe.Add(xe.GetTupleElement(s, 1), xe.GetTupleElement(s, 0)))")
            cond = Computation("cond", lambda s: ops.Lt(_gte(s, 0), np.int32(n)), f"cond((i, acc)) = i < {n}",
                               f"lambda s: xe.Lt(xe.GetTupleElement(s, 0), np.int32({n}))")
            init = (np.int32(i0), np.int32(a0))
        else:  # Collatz: count the steps down to 1
            x0 = [3, 5, 6, 12][int(rng.integers(4))]

            def collatz(s):
                x = _gte(s, 1)
                even = ops.Eq(ops.Rem(x, np.int32(2)), np.int32(0))
                return ops.Add(_gte(s, 0), np.int32(1)), ops.Select(even, ops.Div(x, np.int32(2)),
                                                                     ops.Add(ops.Mul(x, np.int32(3)), np.int32(1)))
            body = Computation("body", collatz, "body((i, x)) = (i + 1, x / 2 if x % 2 == 0 else 3 * x + 1)",
                               "lambda s: (xe.Add(xe.GetTupleElement(s, 0), np.int32(1)), xe.Select(xe.Eq(xe.Rem("
                               "xe.GetTupleElement(s, 1), np.int32(2)), np.int32(0)), xe.Div(xe.GetTupleElement(s, 1), "
                               "np.int32(2)), xe.Add(xe.Mul(xe.GetTupleElement(s, 1), np.int32(3)), np.int32(1))))")
            cond = Computation("cond", lambda s: ops.Gt(_gte(s, 1), np.int32(1)), "cond((i, x)) = x > 1",
                               "lambda s: xe.Gt(xe.GetTupleElement(s, 1), np.int32(1))")
            init = (np.int32(0), np.int32(x0))
        return Call("while", [("init", init)], {"condition": cond, "body": body},
                    [("attr", "condition"), ("attr", "body"), ("kwoperand", "init")])

    def mutations(self, call):
        tup = isinstance(call.value("init"), tuple)
        if tup:
            bad_body = Computation("body", lambda s: (_gte(s, 0),), "body((i, acc)) = (i,)",
                                   "lambda s: (xe.GetTupleElement(s, 0),)")
            bad_cond = Computation("cond", lambda s: ops.Sub(np.int32(10), _gte(s, 0)), "cond((i, acc)) = 10 - i",
                                   "lambda s: xe.Sub(np.int32(10), xe.GetTupleElement(s, 0))")
        else:
            bad_body = Computation("body", lambda x: ops.ConvertElementType(ops.Add(x, np.int32(1)), "f32"),
                                   "body(x) = f32(x + 1)",
                                   "lambda x: xe.ConvertElementType(xe.Add(x, np.int32(1)), 'f32')")
            bad_cond = Computation("cond", lambda x: ops.Sub(np.int32(10), x), "cond(x) = 10 - x",
                                   "lambda x: xe.Sub(np.int32(10), x)")
        return [("body", lambda c, rng: c.with_attrs(body=bad_body)),
                ("condition", lambda c, rng: c.with_attrs(condition=bad_cond))]

    def values_steps(self, call, result, k=None):
        cond, body = call.attrs["condition"].fn, call.attrs["body"].fn
        state = call.value("init")
        states = [state]
        while bool(np.asarray(cond(state))) and len(states) < 60:
            state = body(state)
            state = tuple(state) if isinstance(state, (tuple, list)) else state
            states.append(state)
        lines = [self.formula, f"{call.attrs['condition'].text}; {call.attrs['body'].text}",
                 "state: " + " -> ".join(_state_text(s) for s in states),
                 f"{call.attrs['condition'].name}({_state_text(states[-1])}) is false: the loop stops after "
                 f"{len(states) - 1} iteration{'s' if len(states) != 2 else ''}."]
        return lines + [f"result = {_state_text(result)}"]

    def value_steps(self, call, index, result, k=None):
        return self.values_steps(call, result)

    def shape_steps(self, call, shape):
        return [f"While returns a state of init's shape: {shape}."]


register(WhileExercises())


# -- Map ------------------------------------------------------------------------------------------

def _map_function(rng, level):
    """(computation, operand count, element types) for a level: one s32 operand at level 1, two
    at level 2, a pred and two s32 (a select) or three s32 at level 3."""
    if level == 1:
        k, c = ints(rng, 2, 3), ints(rng, 1, 5)
        return Computation("f", lambda x: ops.Add(ops.Mul(x, np.int32(k)), np.int32(c)), f"f(x) = x * {k} + {c}",
                           f"lambda x: xe.Add(xe.Mul(x, np.int32({k})), np.int32({c}))",
                           numpy=lambda x: x * np.int32(k) + np.int32(c)), ["s32"]
    if level == 2:
        if rng.random() < 0.5:
            return Computation("f", lambda x, y: ops.Add(ops.Mul(x, np.int32(10)), y), "f(x, y) = x * 10 + y",
                               "lambda x, y: xe.Add(xe.Mul(x, np.int32(10)), y)",
                               numpy=lambda x, y: x * np.int32(10) + y), ["s32", "s32"]
        return Computation("f", lambda x, y: ops.Sub(ops.Max(x, y), ops.Min(x, y)), "f(x, y) = max(x, y) - min(x, y)",
                           "lambda x, y: xe.Sub(xe.Max(x, y), xe.Min(x, y))",
                           numpy=lambda x, y: np.maximum(x, y) - np.minimum(x, y)), ["s32", "s32"]
    if rng.random() < 0.5:
        return Computation("f", lambda p, x, y: ops.Select(p, x, ops.Neg(y)), "f(p, x, y) = x if p else -y",
                           "lambda p, x, y: xe.Select(p, x, xe.Neg(y))",
                           numpy=lambda p, x, y: x if p else -y), ["pred", "s32", "s32"]
    return Computation("f", lambda x, y, z: ops.Add(ops.Mul(x, y), z), "f(x, y, z) = x * y + z",
                       "lambda x, y, z: xe.Add(xe.Mul(x, y), z)", numpy=lambda x, y, z: x * y + z), ["s32", "s32", "s32"]


class MapExercises(Generator):
    opcode = "map"
    kinds = ("values", "legal")
    implement_operands = ("*operands",)
    rule = ("Map applies a scalar computation at every index: result[i] = computation(operand_0[i], operand_1[i], "
            "...); the operands have one shape, the computation takes one scalar of each operand's type and "
            "returns a scalar, and dimensions lists every dimension in order.")
    formula = "result[index] = computation(operands[0][index], ..., operands[N-1][index]); shape(result) = shape(operands[0])"

    def problem(self, rng, level, kind):
        comp, types = _map_function(rng, level)
        dims = [ints(rng, 4, 5)] if level == 1 else [2, ints(rng, 2, 3)]
        names = ["x", "y", "z"][:len(types)] if types[0] != "pred" else ["p", "x", "y"]
        operands = []
        for k, (name, t) in enumerate(zip(names, types)):
            if t == "pred":
                value = rng.random(dims) < 0.5
            else:
                value = distinct(rng, dims, level).astype(np.int32)
                if level > 1:
                    value = (value % 10).astype(np.int32)  # one digit: f(x, y) = x * 10 + y reads at a glance
            operands.append((name, value))
        return Call("map", operands, {"computation": comp, "dimensions": tuple(range(len(dims)))},
                    [("list", names), ("attr", "computation"), ("attr", "dimensions")],
                    args={n: "operands" for n in names})

    def mutations(self, call):
        rank = np.ndim(call.values[0])
        first, (name, value) = call.operands[0], call.operands[-1]
        muts = [("dimensions", lambda c, rng: c.with_attrs(dimensions=tuple(reversed(range(rank))) if rank > 1
                                                            else (0, 1))),
                ("dimensions", lambda c, rng: c.with_attrs(dimensions=tuple(range(rank))[1:] or (1,)))]
        if len(call.operands) > 1:
            muts.append((name, lambda c, rng: c.with_operand(name, np.concatenate([value, value], axis=-1))))
        muts.append(("computation", lambda c, rng: c.with_attrs(computation=Computation(
            "g", lambda *a: ops.Add(a[0], a[0]), "g(x) = x + x", "lambda x: xe.Add(x, x)", numpy=lambda x: x + x))
            if len(call.operands) > 1 else None))
        return muts

    def values_steps(self, call, result, k=None):
        comp = call.attrs["computation"]
        lines = [self.formula, comp.text]
        n = result.size
        for p in sorted({0, n // 2, n - 1}):
            index = tuple(int(i) for i in np.unravel_index(p, result.shape))
            lines += self.value_steps(call, index, result)
        return lines + [f"result = {spec_literal(result, 9)}"]

    def value_steps(self, call, index, result, k=None):
        comp = call.attrs["computation"]
        args = ", ".join(f"{n}{index_text(index)}" for n, _ in call.operands)
        values = ", ".join(scalar_text(v[index]) for _, v in call.operands)
        return [f"result{index_text(index)} = {comp.name}({args}) = {comp.name}({values}) = "
                f"{scalar_text(result[index])}"]

    def shape_steps(self, call, shape):
        return [f"Map keeps the operands' dimensions, with the computation's result type: {shape}.",
                f"dimensions = {spec_attr(call.attrs['dimensions'])}: every dimension, in order."]


register(MapExercises())
