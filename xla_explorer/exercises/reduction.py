"""Exercises on Reduce, ReduceWindow (padding, strides, dilations) and Sort."""
import numpy as np

from .. import ops
from .core import (Call, Computation, Generator, computation, distinct, index_text, ints, plain, register,
                   scalar_text, spec_attr, spec_literal)


def _replace(t, i, v):
    t = list(t)
    t[i] = v
    return tuple(t)


def _body(rng, level):
    """A reduction body with its init value and element type: add/mul on s32, max/min on f32."""
    kind = "add" if level == 1 else ["add", "max", "min", "mul"][int(rng.integers(4))]
    init = {"add": np.int32(0), "mul": np.int32(1), "max": np.float32(-np.inf), "min": np.float32(np.inf)}[kind]
    return computation(kind, kind), init


def _operand(rng, dims, level, init):
    values = distinct(rng, dims, level)
    if init.dtype == np.int32 and init == 1:  # products stay small
        values = rng.integers(1, 4, size=dims).astype(np.int32)
    return values.astype(init.dtype)


class ReduceExercises(Generator):
    opcode = "reduce"
    read_mode = "set"
    hidden = ("dimensions",)
    rule = ("Reduce folds the dimensions listed in dimensions with computation, starting from init_value; "
            "the result keeps the other dimensions, in order.")
    formula = ("result[kept_index] = computation(...computation(init_value, operand[i_0])..., operand[i_K]) over "
               "every index i of the operand that agrees with kept_index on the kept dimensions; shape(result) = "
               "the operand's dimensions not in dimensions")
    read_formula = "result[kept_index] combines every operand element whose kept dimensions equal kept_index"

    def problem(self, rng, level, kind):
        comp, init = _body(rng, level)
        if level == 1:
            dims, reduced = [ints(rng, 2, 3), ints(rng, 3, 4)], (ints(rng, 0, 1),)
        elif level == 2:
            dims = [ints(rng, 2, 3), ints(rng, 2, 3), 2] if rng.random() < 0.5 else [ints(rng, 2, 4), ints(rng, 2, 4)]
            reduced = (ints(rng, 0, len(dims) - 1),)
        else:
            dims = [2, ints(rng, 2, 3), ints(rng, 2, 3)]
            reduced = tuple(sorted(int(d) for d in rng.choice(3, ints(rng, 2, 3), replace=False)))
        return Call("reduce", [("operand", _operand(rng, dims, level, init)), ("init_value", init)],
                    {"dimensions": reduced, "computation": comp},
                    [("operand", "operand"), ("operand", "init_value"), ("attr", "computation"),
                     ("attr", "dimensions")])

    def mutations(self, call):
        d = call.attrs["dimensions"]
        rank = np.ndim(call.value("operand"))
        init = call.value("init_value")
        other = np.float32(init) if init.dtype == np.int32 else np.int32(0)
        return [("dimensions", lambda c, rng: c.with_attrs(dimensions=d + (rank,))),
                ("dimensions", lambda c, rng: c.with_attrs(dimensions=d + (d[0],))),
                ("init_value", lambda c, rng: c.with_operand("init_value", other))]

    def shape_steps(self, call, shape):
        dims, d = np.shape(call.value("operand")), call.attrs["dimensions"]
        kept = [i for i in range(len(dims)) if i not in d]
        return [f"The operand is {spec_attr(dims)}; dimensions={spec_attr(d)} are folded away and the dimensions "
                f"{spec_attr(kept)} stay, in order: {spec_attr([dims[i] for i in kept])}.",
                f"The result is {shape} (the init value's element type)."]

    def attribute_steps(self, call, hidden):
        d = call.attrs["dimensions"]
        return [f"dimensions = {spec_attr(d)}: the target keeps the operand's other dimensions, and each of its "
                "elements folds the operand elements along the reduced ones."]


class ReduceWindowExercises(Generator):
    opcode = "reduce-window"
    read_mode = "set"
    hidden = ("window_dimensions", "window_strides")
    rule = ("ReduceWindow slides a window of window_dimensions cells (window_dilations apart) by window_strides "
            "over the operand, base-dilated (base_dilations - 1 holes between elements) and padded; each result "
            "element folds the real elements under its window into init_value with computation.")
    formula = ("dim(result, d) = (padded - window) // window_strides[d] + 1, with padded = pad_low + (dim(operand, d) "
               "- 1) * base_dilations[d] + 1 + pad_high and window = (window_dimensions[d] - 1) * "
               "window_dilations[d] + 1")
    read_formula = ("cell w of the window of result r sits at r * window_strides + w * window_dilations in the "
                    "padded, dilated operand; minus pad_low, divided by base_dilations, it is an operand index "
                    "when that is a whole number in range (else padding, or a hole of the base dilation)")

    def problem(self, rng, level, kind):
        comp, init = _body(rng, level)
        for _ in range(100):
            rank = 1 if level == 1 else ints(rng, 1, 2)
            dims = [ints(rng, 5, 8)] if rank == 1 else [ints(rng, 3, 4) for _ in range(2)]
            window = [ints(rng, 2, 3) if rank == 1 else ints(rng, 1, 2) for _ in dims]
            strides = [ints(rng, 1, 2) for _ in dims]
            padding = [(0, 0)] * rank if level == 1 else [(ints(rng, 0, 1), ints(rng, 0, 1)) for _ in dims]
            base = [1] * rank
            wdil = [1] * rank
            if level == 3:
                base = [ints(rng, 1, 2) for _ in dims]
                wdil = [ints(rng, 1, 2) for _ in dims]
                if base == [1] * rank and wdil == [1] * rank:
                    wdil[0] = 2
            out = [(lo + (n - 1) * b + 1 + hi - ((w - 1) * wd + 1)) // s + 1
                   for n, w, s, (lo, hi), b, wd in zip(dims, window, strides, padding, base, wdil)]
            if all(o > 0 for o in out) and int(np.prod(out)) <= 24:
                break
        attrs = {"window_dimensions": tuple(window), "window_strides": tuple(strides), "padding": tuple(padding),
                 "base_dilations": tuple(base), "window_dilations": tuple(wdil), "computation": comp}
        shown = ["window_dimensions", "window_strides", "padding"] + (["base_dilations", "window_dilations"]
                                                                      if level == 3 else [])
        return Call("reduce-window", [("operand", _operand(rng, dims, level, init)), ("init_value", init)], attrs,
                    [("operand", "operand"), ("operand", "init_value"), ("attr", "computation")]
                    + [("attr", k) for k in shown])

    def mutations(self, call):
        a = call.attrs
        muts = [("window_dimensions", lambda c, rng: c.with_attrs(
                    window_dimensions=_replace(a["window_dimensions"], 0, 0))),
                ("window_strides", lambda c, rng: c.with_attrs(window_strides=_replace(a["window_strides"], 0, 0))),
                ("window_dimensions", lambda c, rng: c.with_attrs(window_dimensions=a["window_dimensions"] + (1,))),
                ("padding", lambda c, rng: c.with_attrs(padding=a["padding"] + ((0, 0),)))]
        if any(b > 1 for b in a["base_dilations"]) or any(w > 1 for w in a["window_dilations"]):
            muts.append(("base_dilations", lambda c, rng: c.with_attrs(
                base_dilations=_replace(a["base_dilations"], 0, 0))))
        return muts

    def shape_steps(self, call, shape):
        a = call.attrs
        lines = []
        for d, n in enumerate(np.shape(call.value("operand"))):
            lo, hi = a["padding"][d]
            b, w = a["base_dilations"][d], a["window_dimensions"][d]
            wd, s = a["window_dilations"][d], a["window_strides"][d]
            dilated = (n - 1) * b + 1
            padded = lo + dilated + hi
            win = (w - 1) * wd + 1
            lines.append(f"dimension {d}: dilated = ({n} - 1) * {b} + 1 = {dilated}; padded = {lo} + {dilated} + {hi} "
                         f"= {padded}; window = ({w} - 1) * {wd} + 1 = {win}; dim(result, {d}) = ({padded} - {win}) "
                         f"// {s} + 1 = {shape.dims[d]}")
        return lines + [f"The result is {shape} (the init value's element type)."]

    def access_steps(self, call, access):
        operand = call.value("operand")
        lines = [self.read_formula, f"the window of result{index_text(access.index)} starts at "
                 f"{plain(access.detail['window_position'])} in the padded, dilated operand:"]
        for w, padded, kind, oi in access.detail["cells"]:
            what = f"operand{index_text(oi)} = {scalar_text(operand[oi])}" if kind == "operand" else kind
            lines.append(f"  cell {plain(w)} at {plain(padded)}: {what}")
        n = sum(1 for c in access.detail["cells"] if c[2] == "operand")
        lines.append(f"result{index_text(access.index)} combines {n} operand element{'s' if n != 1 else ''}"
                     + (" (only the init value)" if n == 0 else "") + ".")
        return lines

    def attribute_steps(self, call, hidden):
        a = call.attrs
        return [f"window_dimensions = {spec_attr(a['window_dimensions'])}, window_strides = "
                f"{spec_attr(a['window_strides'])}: each target element folds a window of that size, and the "
                "windows move by the strides."] + self.shape_steps(call, call.shape())


def _less(n, greater=False):
    fn = ops.Gt if greater else ops.Lt
    sym, name = (">", "greater") if greater else ("<", "less")
    compare = (lambda a, b: a > b) if greater else (lambda a, b: a < b)
    if n == 1:
        return Computation(name, lambda a, b: fn(a, b), f"{name}(a, b) = a {sym} b",
                           f"lambda a, b: xe.{fn.__name__}(a, b)", numpy=compare)
    return Computation(name, lambda a, b, c, d: fn(a, b),
                       f"{name}(keys_lhs, keys_rhs, values_lhs, values_rhs) = keys_lhs {sym} keys_rhs",
                       f"lambda a, b, c, d: xe.{fn.__name__}(a, b)", numpy=lambda a, b, c, d: compare(a, b))


class SortExercises(Generator):
    opcode = "sort"
    kinds = ("values", "legal")
    implement_operands = ("*operands",)
    implement_note = ("With one operand return an array; with several, a tuple of arrays, one per operand in "
                      "their order (the comparator then takes two scalars of each operand: lhs, rhs of the first, "
                      "lhs, rhs of the second, ...).")
    rule = ("Sort reorders every 1-D slice along dimension so that comparator(lhs, rhs) is true when lhs comes "
            "first; several operands sort together, ordered by the comparator on their elements, like the "
            "columns of a table.")
    formula = ("along dimension, result[i] goes before result[i + 1] unless comparator(result[i + 1], result[i]); "
               "with is_stable, elements the comparator finds equal keep their order")

    def problem(self, rng, level, kind):
        greater = level > 1 and rng.random() < 0.5
        if level < 3:
            dims = [ints(rng, 5, 6)] if level == 1 else [ints(rng, 2, 3), ints(rng, 3, 4)]
            dimension = 0 if level == 1 else ints(rng, 0, 1)
            operand = distinct(rng, dims, 2)
            return Call("sort", [("operand", operand)],
                        {"dimension": dimension, "is_stable": False, "comparator": _less(1, greater)},
                        [("operand", "operand"), ("attr", "comparator"), ("attr", "dimension"), ("attr", "is_stable")])
        n = ints(rng, 5, 6)
        keys = rng.integers(0, 4, size=n).astype(np.int32)
        keys[-1] = keys[0]  # a tie: stability decides the order
        values = (100 + 10 * np.arange(n)).astype(np.int32)
        return Call("sort", [("keys", keys), ("values", values)],
                    {"dimension": 0, "is_stable": True, "comparator": _less(2, greater)},
                    [("list", ["keys", "values"]), ("attr", "comparator"), ("attr", "dimension"),
                     ("attr", "is_stable")], args={"keys": "operands", "values": "operands"})

    def mutations(self, call):
        first = call.values[0]
        n = len(call.operands)
        muts = [("dimension", lambda c, rng: c.with_attrs(dimension=first.ndim)),
                ("comparator", lambda c, rng: c.with_attrs(comparator=Computation(
                    "minus", (lambda a, b: ops.Sub(a, b)) if n == 1 else (lambda a, b, x, y: ops.Sub(a, b)),
                    "minus(a, b) = a - b", "lambda a, b: xe.Sub(a, b)" if n == 1 else
                    "lambda a, b, c, d: xe.Sub(a, b)")))]
        if n == 2:
            muts.append(("values", lambda c, rng: c.with_operand("values", c.value("values")[:-1])))
        return muts

    def values_steps(self, call, result, k=None):
        comp, d = call.attrs["comparator"], call.attrs["dimension"]
        lines = [self.formula]
        if len(call.operands) == 1:
            operand = call.values[0]
            moved, out = np.moveaxis(operand, d, -1), np.moveaxis(result, d, -1)
            for row in range(min(2, int(np.prod(moved.shape[:-1])))):
                ix = np.unravel_index(row, moved.shape[:-1]) if moved.ndim > 1 else ()
                lines.append(f"slice {plain(list(ix))} along dimension {d}: {spec_literal(moved[ix])} -> "
                             f"{spec_literal(out[ix])} (by {comp.name})")
        else:
            keys, values = call.values
            lines.append(f"keys {spec_literal(keys)} sorted by {comp.name} -> {spec_literal(result[0])}; equal keys "
                         "keep their order (is_stable=true)")
            lines.append(f"values move with their keys: {spec_literal(values)} -> {spec_literal(result[1])}")
        lines.append(f"result = {spec_literal(result, 9)}")
        return lines

    def value_steps(self, call, index, result, k=None):
        return self.values_steps(call, result)

    def shape_steps(self, call, shape):
        return [f"Sort keeps the operands' shapes: {shape}."]


register(ReduceExercises())
register(ReduceWindowExercises())
register(SortExercises())
