"""Exercises on While: run the loop in your head (the final state), and the rules that tie
condition and body to the loop state."""
import numpy as np

from .. import ops
from .core import Call, Computation, Generator, ints, register, spec_literal


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
            bad_body = Computation("body", lambda s: (_gte(s, 0),), "body((i, acc)) = (i)",
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
