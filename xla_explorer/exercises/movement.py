"""Exercises on the ops that move data without computing: Slice, DynamicSlice,
DynamicUpdateSlice, Pad, Transpose, BroadcastInDim, Concatenate, Reshape, Rev."""
import numpy as np

from ..shapes import Shape
from .core import Call, Generator, distinct, index_text, ints, register, scalar_text, spec_attr


def _pick(rng, seq):
    return seq[int(rng.integers(len(seq)))]


def _dims(call, name="operand"):
    return np.shape(call.value(name))


def _replace(t, i, v):
    t = list(t)
    t[i] = v
    return tuple(t)


# -- Slice ------------------------------------------------------------------------------------

class SliceExercises(Generator):
    opcode = "slice"
    rule = ("Slice keeps the box from start_indices (inclusive) to limit_indices (exclusive), taking every "
            "strides[d]-th element of dimension d.")
    formula = ("dim(result, d) = ceil((limit_indices[d] - start_indices[d]) / strides[d]); "
               "result[result_index] = operand[start_indices + result_index * strides]")
    read_formula = "operand_index = start_indices + result_index * strides"

    def problem(self, rng, level, kind):
        if level == 1:
            dims = [ints(rng, 5, 8)]
        elif level == 2:
            dims = [ints(rng, 3, 5), ints(rng, 3, 6)]
        else:
            dims = [ints(rng, 2, 4) for _ in range(ints(rng, 2, 3))]
        starts, limits, strides = [], [], []
        for n in dims:
            stride = 1 if level == 1 else ints(rng, 1, 2 if level == 2 else 3)
            start = ints(rng, 0, n - 2)
            limits.append(ints(rng, start + 1, n))
            starts.append(start)
            strides.append(stride)
        return Call("slice", [("operand", distinct(rng, dims, level))],
                    {"start_indices": tuple(starts), "limit_indices": tuple(limits), "strides": tuple(strides)},
                    [("operand", "operand"), ("attr", "start_indices"), ("attr", "limit_indices"),
                     ("attr", "strides")])

    def mutations(self, call):
        dims, a = _dims(call), call.attrs
        d = len(dims) - 1
        return [
            ("limit_indices", lambda c, rng: c.with_attrs(limit_indices=_replace(a["limit_indices"], d, dims[d] + 1))),
            ("start_indices", lambda c, rng: c.with_attrs(start_indices=_replace(
                a["start_indices"], 0, a["limit_indices"][0] + 1))),
            ("strides", lambda c, rng: c.with_attrs(strides=_replace(a["strides"], 0, 0))),
            ("limit_indices", lambda c, rng: c.with_attrs(limit_indices=a["limit_indices"][:-1])),
        ]

    def hidden_attrs(self, call, level):
        return ("start_indices", "limit_indices") if level == 1 else ("start_indices", "limit_indices", "strides")

    def access_steps(self, call, access):
        a = call.attrs
        idx = access.reads[0][1]
        terms = " ".join(f"{s} + {i}*{st} = {o};" for s, i, st, o in
                         zip(a["start_indices"], access.index, a["strides"], idx))
        return [self.read_formula, f"per dimension, start + result_index * stride: {terms}",
                f"result{index_text(access.index)} = operand{index_text(idx)} = "
                f"{scalar_text(call.value('operand')[tuple(idx)])}"]

    def shape_steps(self, call, shape):
        a = call.attrs
        lines = []
        for d, (s, l, st) in enumerate(zip(a["start_indices"], a["limit_indices"], a["strides"])):
            lines.append(f"dim(result, {d}) = ceil((limit_indices[{d}] - start_indices[{d}]) / strides[{d}]) "
                         f"= ceil(({l} - {s}) / {st}) = {shape.dims[d]}")
        return lines + [f"The result is {shape} ({self.type_rule})."]


# -- DynamicSlice ------------------------------------------------------------------------------

def _starts(rng, dims, sizes, level):
    """Start indices: in bounds at level 1; one beyond the end (clamped) often at level 2;
    anywhere from -3 to past the end at level 3."""
    starts = [ints(rng, 0, n - s) for n, s in zip(dims, sizes)]
    if level == 2 and rng.random() < 0.6:
        d = int(rng.integers(len(dims)))
        starts[d] = ints(rng, dims[d] - sizes[d] + 1, dims[d] + 2)
    elif level == 3:
        starts = [ints(rng, -3, n + 2) for n in dims]
    return starts


class DynamicSliceExercises(Generator):
    opcode = "dynamic-slice"
    hidden = ("slice_sizes",)
    implement_operands = ("operand", "*start_indices")
    rule = ("DynamicSlice takes the block of slice_sizes that starts at run-time start_indices; each start "
            "is clamped so that the whole block is in bounds.")
    formula = ("adjusted_start_indices = clamp(start_indices, 0, shape(operand) - slice_sizes); "
               "result[result_index] = operand[adjusted_start_indices + result_index]")
    read_formula = formula

    def problem(self, rng, level, kind):
        dims = [ints(rng, 5, 8)] if level == 1 else [ints(rng, 3, 5), ints(rng, 3, 5)]
        sizes = [ints(rng, 2, 3)] if level == 1 else [ints(rng, 1, n - 1) for n in dims]
        starts = _starts(rng, dims, sizes, level)
        names = [f"start{d}" for d in range(len(dims))]
        return Call("dynamic-slice", [("operand", distinct(rng, dims, level))]
                    + [(n, np.int32(s)) for n, s in zip(names, starts)],
                    {"slice_sizes": tuple(sizes)},
                    [("operand", "operand"), ("list", names), ("attr", "slice_sizes")],
                    args={n: "start_indices" for n in names})

    def mutations(self, call):
        dims, sizes = _dims(call), call.attrs["slice_sizes"]
        out = [
            ("slice_sizes", lambda c, rng: c.with_attrs(slice_sizes=_replace(sizes, 0, dims[0] + 1))),
            ("slice_sizes", lambda c, rng: c.with_attrs(slice_sizes=sizes + (1,))),
            ("start_indices", lambda c, rng: c.with_operand("start0", np.float32(c.value("start0")))),
        ]
        if len(dims) > 1:
            out.append(("start_indices", lambda c, rng: c.with_operand("start1", np.int64(c.value("start1")))))
        return out

    def shape_steps(self, call, shape):
        return [f"shape(result) = slice_sizes = {spec_attr(call.attrs['slice_sizes'])}, with the operand's element "
                f"type: {shape}.",
                "The start indices do not change the shape: they are read at run time and clamped."]

    def attribute_steps(self, call, hidden):
        return [f"The target is {Shape.of(call.run())}, and shape(result) = slice_sizes, so slice_sizes = "
                f"{spec_attr(call.attrs['slice_sizes'])}.", self.formula]


# -- DynamicUpdateSlice ---------------------------------------------------------------------------

class DynamicUpdateSliceExercises(Generator):
    opcode = "dynamic-update-slice"
    kinds = ("shape", "values", "read", "legal")
    read_names_operand = True
    rule = ("DynamicUpdateSlice writes the block update into operand at run-time start_indices; each start "
            "is clamped so that the whole update fits.")
    formula = ("adjusted_start_indices = clamp(start_indices, 0, shape(operand) - shape(update)); "
               "result[adjusted_start_indices + update_index] = update[update_index]; "
               "every other result element is operand[result_index]")
    read_formula = formula

    def problem(self, rng, level, kind):
        dims = [ints(rng, 5, 7)] if level == 1 else [ints(rng, 3, 5), ints(rng, 3, 5)]
        sizes = [2] if level == 1 else [ints(rng, 1, n - 1) for n in dims]
        starts = _starts(rng, dims, sizes, level)
        names = [f"start{d}" for d in range(len(dims))]
        update = distinct(rng, sizes, 2) + (100 if level == 1 else 0)
        if level > 1:
            update = -update  # negative: never mistaken for an operand element
        return Call("dynamic-update-slice",
                    [("operand", distinct(rng, dims, level)), ("update", update.astype(np.int32))]
                    + [(n, np.int32(s)) for n, s in zip(names, starts)], {},
                    [("operand", "operand"), ("operand", "update"), ("list", names)],
                    args={n: "start_indices" for n in names})

    def mutations(self, call):
        dims = _dims(call)
        update = call.value("update")
        big = list(update.shape)
        big[0] = dims[0] + 1

        def fewer_starts(c, rng):
            names = [n for n, _ in c.operands if n.startswith("start")]
            if len(names) < 2:
                return None
            c.operands = [(n, v) for n, v in c.operands if n != names[-1]]
            c.display = [("operand", "operand"), ("operand", "update"), ("list", names[:-1])]
            return c
        return [
            ("update", lambda c, rng: c.with_operand("update", np.zeros(big, np.int32))),
            ("update", lambda c, rng: c.with_operand("update", update.astype(np.float32))),
            ("update", lambda c, rng: c.with_operand("update", update[np.newaxis])),
            ("start_indices", fewer_starts),
        ]

    def shape_steps(self, call, shape):
        u = Shape.of(call.value("update"))
        return [f"DynamicUpdateSlice returns the operand's shape: {shape}.",
                f"The update {u} must fit in it: " + ", ".join(
                    f"{a} <= {b}" for a, b in zip(u.dims, shape.dims)) + "; the start indices are clamped at run time."]

    def read_question(self, call, index):
        return (f"Which element does result{index_text(index)} copy: one of operand or one of update?\n"
                "Answer (\"operand\", index) or (\"update\", index), e.g. (\"update\", (0, 1)).")


# -- Pad --------------------------------------------------------------------------------------

class PadExercises(Generator):
    opcode = "pad"
    hidden = ("padding_config",)
    detail_skip = ("formula",)
    rule = ("Pad puts interior_padding copies of padding_value between neighbouring elements, then "
            "edge_padding_low / edge_padding_high at the ends; a negative edge padding crops.")
    formula = ("dim(result, d) = edge_padding_low + dim(operand, d) + max(dim(operand, d) - 1, 0) * "
               "interior_padding + edge_padding_high; result[edge_padding_low + operand_index * "
               "(interior_padding + 1)] = operand[operand_index]")
    read_formula = ("result_index = edge_padding_low + operand_index * (interior_padding + 1): "
                    "operand_index = (result_index - edge_padding_low) / (interior_padding + 1) when that is "
                    "a whole number in range; otherwise the element is padding")

    def problem(self, rng, level, kind):
        while True:
            if level == 1:
                dims = [ints(rng, 3, 4)]
                config = [(ints(rng, 0, 2), ints(rng, 0, 2), 0)]
            elif level == 2:
                dims = [ints(rng, 2, 3), ints(rng, 2, 3)]
                config = [(ints(rng, 0, 2), ints(rng, 0, 2), ints(rng, 0, 2)) for _ in dims]
            else:
                dims = [ints(rng, 2, 4), ints(rng, 2, 3)]
                config = [(ints(rng, -1, 2), ints(rng, -1, 2), ints(rng, 0, 2)) for _ in dims]
                if all(lo >= 0 and hi >= 0 for lo, hi, _ in config):
                    config[0] = (-1,) + config[0][1:]
            out = [n + lo + hi + (n - 1) * i for n, (lo, hi, i) in zip(dims, config)]
            if level == 1 or (0 < int(np.prod(out)) <= 48 and any(i for _, _, i in config)):
                break
        return Call("pad", [("operand", distinct(rng, dims, level, low=1)), ("padding_value", np.int32(0))],
                    {"padding_config": tuple(config)},
                    [("operand", "operand"), ("operand", "padding_value"), ("attr", "padding_config")])

    def mutations(self, call):
        config, dims = call.attrs["padding_config"], _dims(call)
        return [
            ("padding_config", lambda c, rng: c.with_attrs(padding_config=_replace(config, 0, config[0][:2] + (-1,)))),
            ("padding_config", lambda c, rng: c.with_attrs(padding_config=_replace(
                config, 0, (-(dims[0] + (dims[0] - 1) * config[0][2] + 2), 0, config[0][2])))),
            ("padding_config", lambda c, rng: c.with_attrs(padding_config=config[:-1]) if len(config) > 1
             else c.with_attrs(padding_config=config + ((0, 0, 0),))),
            ("padding_value", lambda c, rng: c.with_operand("padding_value", np.float32(0))),
        ]

    def shape_steps(self, call, shape):
        lines = []
        for d, (n, (lo, hi, i)) in enumerate(zip(_dims(call), call.attrs["padding_config"])):
            lines.append(f"dim(result, {d}) = edge_padding_low + dim(operand, {d}) + max(dim(operand, {d}) - 1, 0) "
                         f"* interior_padding + edge_padding_high = {lo} + {n} + {max(n - 1, 0)}*{i} + {hi} "
                         f"= {shape.dims[d]}")
        return lines + [f"The result is {shape}."]

    def read_question(self, call, index):
        return (f"Which element of operand does result{index_text(index)} copy?\n"
                "Answer with its index, e.g. (1, 0), or \"padding\" if it is padding.")

    def access_steps(self, call, access):
        lines = [self.read_formula]
        operand = call.value("operand")
        for d, (i, (lo, hi, interior)) in enumerate(zip(access.index, call.attrs["padding_config"])):
            q, r = divmod(i - lo, interior + 1)
            head = f"dimension {d}: ({i} - {lo}) / ({interior} + 1) = {i - lo}/{interior + 1}"
            if i < lo:
                lines.append(f"{head}: before the first element, low edge padding")
            elif r:
                lines.append(f"{head}: not a whole number, interior padding")
            elif q >= operand.shape[d]:
                lines.append(f"{head} = {q}: past the last element, high edge padding")
            else:
                lines.append(f"{head} = {q}")
        if access.reads:
            idx = access.reads[0][1]
            lines.append(f"result{index_text(access.index)} = operand{index_text(idx)} = "
                         f"{scalar_text(operand[tuple(idx)])}")
        else:
            lines.append(f"result{index_text(access.index)} is padding: padding_value = "
                         f"{scalar_text(call.value('padding_value'))}")
        return lines

    def attribute_steps(self, call, hidden):
        lines = [f"padding_config = {spec_attr(call.attrs['padding_config'])} (one (low, high, interior) "
                 "triple per dimension):"]
        target = Shape.of(call.run())
        for d, (n, (lo, hi, i)) in enumerate(zip(_dims(call), call.attrs["padding_config"])):
            lines.append(f"  dimension {d}: {lo} + {n} + {max(n - 1, 0)}*{i} + {hi} = {target.dims[d]} elements")
        return lines + ["Other triples giving the same target are right too."]


# -- Transpose ------------------------------------------------------------------------------------

class TransposeExercises(Generator):
    opcode = "transpose"
    hidden = ("permutation",)
    rule = "Transpose permutes the dimensions: result dimension i is operand dimension permutation[i]."
    formula = ("dim(result, i) = dim(operand, permutation[i]); result[result_index] = operand[operand_index] "
               "with operand_index[permutation[i]] = result_index[i]")
    read_formula = "operand_index[permutation[i]] = result_index[i]"

    def problem(self, rng, level, kind):
        if level == 1:
            dims, perm = [2, 3] if rng.random() < 0.5 else [3, 2], (1, 0)
        else:
            rank = 3 if level == 2 else ints(rng, 3, 4)
            dims = [ints(rng, 2, 3) for _ in range(rank)] if rank == 3 else [2] * rank
            perm = tuple(range(rank))
            while perm == tuple(range(rank)):
                perm = tuple(int(p) for p in rng.permutation(rank))
        return Call("transpose", [("operand", distinct(rng, dims, level))], {"permutation": tuple(perm)},
                    [("operand", "operand"), ("attr", "permutation")])

    def mutations(self, call):
        p = call.attrs["permutation"]
        return [
            ("permutation", lambda c, rng: c.with_attrs(permutation=(p[0],) + p[:-1])),
            ("permutation", lambda c, rng: c.with_attrs(permutation=_replace(p, 0, len(p)))),
            ("permutation", lambda c, rng: c.with_attrs(permutation=p[:-1])),
        ]

    def access_steps(self, call, access):
        p, idx = call.attrs["permutation"], access.reads[0][1]
        return [self.read_formula] + [
            f"operand_index[permutation[{i}]] = operand_index[{p[i]}] = result_index[{i}] = {access.index[i]}"
            for i in range(len(p))] + [f"result{index_text(access.index)} = operand{index_text(idx)} = "
                                       f"{scalar_text(call.value('operand')[tuple(idx)])}"]

    def shape_steps(self, call, shape):
        dims, p = _dims(call), call.attrs["permutation"]
        return [f"dim(result, {i}) = dim(operand, permutation[{i}]) = dim(operand, {p[i]}) = {dims[p[i]]}"
                for i in range(len(p))] + [f"The result is {shape}."]


# -- BroadcastInDim ---------------------------------------------------------------------------------

class BroadcastExercises(Generator):
    opcode = "broadcast"
    hidden = ("broadcast_dimensions",)
    rule = ("BroadcastInDim copies operand into an array of out_dim_size: operand dimension d becomes result "
            "dimension broadcast_dimensions[d] (its size must be 1 or equal); the other result dimensions "
            "repeat the operand.  Broadcast(operand, broadcast_sizes) puts new dimensions in front.")
    formula = ("operand_index[d] = 0 if dim(operand, d) == 1 else result_index[broadcast_dimensions[d]]; "
               "dim(operand, d) must be 1 or out_dim_size[broadcast_dimensions[d]]")
    read_formula = formula

    def problem(self, rng, level, kind):
        if kind == "shape":  # the Broadcast form: the sizes go in front
            dims = [ints(rng, 2, 4) for _ in range(1 if level == 1 else 2)]
            sizes = tuple(ints(rng, 2, 3) for _ in range(1 if level < 3 else 2))
            n = len(sizes)
            return Call("broadcast", [("operand", distinct(rng, dims, level))],
                        {"out_dim_size": sizes + tuple(dims), "broadcast_dimensions": tuple(range(n, n + len(dims)))},
                        [("operand", "operand"), ("shown", "broadcast_sizes", sizes)], api="Broadcast")
        if level == 1:
            n = ints(rng, 2, 3)
            dims, out_rank = [n], 2
            bd = (ints(rng, 0, 1),)
        else:
            out_rank = 3
            dims = [ints(rng, 2, 3), 1]
            if rng.random() < 0.5:
                dims.reverse()
            bd = tuple(sorted(int(x) for x in rng.choice(3, 2, replace=False)))
        out = [ints(rng, 2, 3) for _ in range(out_rank)]
        for d, r in enumerate(bd):
            if dims[d] != 1:
                out[r] = dims[d]
        if level == 3 and rng.random() < 0.5:  # a size-1 dimension may also stay size 1
            out[bd[dims.index(1)]] = 1
        return Call("broadcast", [("operand", distinct(rng, dims, level))],
                    {"out_dim_size": tuple(out), "broadcast_dimensions": bd},
                    [("operand", "operand"), ("attr", "out_dim_size"), ("attr", "broadcast_dimensions")],
                    api="BroadcastInDim")

    def mutations(self, call):
        if call.api == "Broadcast":
            return []
        bd, out, dims = call.attrs["broadcast_dimensions"], call.attrs["out_dim_size"], _dims(call)
        d = next((i for i, n in enumerate(dims) if n != 1), 0)
        muts = [
            ("out_dim_size", lambda c, rng: c.with_attrs(out_dim_size=_replace(out, bd[d], dims[d] + 1))),
            ("broadcast_dimensions", lambda c, rng: c.with_attrs(broadcast_dimensions=_replace(bd, len(bd) - 1,
                                                                                               len(out)))),
            ("broadcast_dimensions", lambda c, rng: c.with_attrs(broadcast_dimensions=bd[:-1] if len(bd) > 1
                                                                 else bd + (0,))),
        ]
        if len(bd) > 1:
            muts.append(("broadcast_dimensions", lambda c, rng: c.with_attrs(broadcast_dimensions=bd[::-1])))
        return muts

    def shape_steps(self, call, shape):
        dims = _dims(call)
        if call.api == "Broadcast":
            sizes = call.attrs["out_dim_size"][:len(call.attrs["out_dim_size"]) - len(dims)]
            return [f"Broadcast puts broadcast_sizes {spec_attr(sizes)} in front of the operand's dimensions "
                    f"{spec_attr(dims)}: {spec_attr(shape.dims)}.", f"The result is {shape}."]
        bd, out = call.attrs["broadcast_dimensions"], call.attrs["out_dim_size"]
        lines = [f"The result's sizes are out_dim_size = {spec_attr(out)}."]
        for d, r in enumerate(bd):
            lines.append(f"operand dimension {d} (size {dims[d]}) goes to result dimension {r} (size {out[r]}): "
                         + ("size 1 repeats" if dims[d] == 1 else "the sizes agree"))
        return lines + [f"The result is {shape}."]

    def attribute_steps(self, call, hidden):
        dims, bd, out = _dims(call), call.attrs["broadcast_dimensions"], call.attrs["out_dim_size"]
        return [f"broadcast_dimensions = {spec_attr(bd)}:"] + [
            f"  operand dimension {d} (size {dims[d]}) is result dimension {r} (size {out[r]})"
            for d, r in enumerate(bd)] + ["broadcast_dimensions must increase, and each operand size must be 1 "
                                          "or the size of its result dimension."]


# -- Concatenate ------------------------------------------------------------------------------------

class ConcatenateExercises(Generator):
    opcode = "concatenate"
    hidden = ("dimension",)
    implement_operands = ("*operands",)
    read_names_operand = True
    rule = "Concatenate joins its operands along dimension, in order; every other dimension must agree."
    formula = ("dim(result, dimension) = the sum of the operands' sizes in dimension; result index i along "
               "dimension reads operand k at i - (the sizes of operands 0..k-1)")
    read_formula = formula
    detail_skip = ("operand_number",)

    def problem(self, rng, level, kind):
        if level == 1:
            count, rank = 2, 1
        elif level == 2:
            count, rank = ints(rng, 2, 3), 2
        else:
            count, rank = 3, 3
        dimension = 0 if rank == 1 else ints(rng, 0, rank - 1)
        common = [ints(rng, 2, 3) if rank < 3 else 2 for _ in range(rank)]
        shapes = []
        for _ in range(count):
            s = list(common)
            s[dimension] = ints(rng, 1, 3) if rank < 3 else ints(rng, 1, 2)
            shapes.append(s)
        pool = distinct(rng, [sum(int(np.prod(s)) for s in shapes)], level)
        names, operands, start = "abc", [], 0
        for k, s in enumerate(shapes):
            n = int(np.prod(s))
            operands.append((names[k], pool[start:start + n].reshape(s)))
            start += n
        return Call("concatenate", operands, {"dimension": dimension},
                    [("operand", n) for n, _ in operands] + [("attr", "dimension")])

    def mutations(self, call):
        dimension, b = call.attrs["dimension"], call.value("b")
        muts = [
            ("b", lambda c, rng: c.with_operand("b", b.astype(np.float32))),
            ("dimension", lambda c, rng: c.with_attrs(dimension=b.ndim)),
            ("b", lambda c, rng: c.with_operand("b", b[np.newaxis])),
        ]
        if b.ndim > 1:
            other = next(d for d in range(b.ndim) if d != dimension)
            shape = list(b.shape)
            shape[other] += 1
            muts.append(("b", lambda c, rng: c.with_operand("b", np.zeros(shape, b.dtype))))
        return muts

    def shape_steps(self, call, shape):
        d = call.attrs["dimension"]
        sizes = [np.shape(v)[d] for _, v in call.operands]
        return [f"dim(result, {d}) = " + " + ".join(map(str, sizes)) + f" = {sum(sizes)}",
                "the other dimensions are the operands' (equal by the rules)",
                f"The result is {shape}."]

    def read_question(self, call, index):
        return (f"Which operand element does result{index_text(index)} copy?\n"
                "Answer (operand name, index), e.g. (\"b\", (0, 1)).")

    def attribute_steps(self, call, hidden):
        d = call.attrs["dimension"]
        return [f"dimension = {d}: the target's dimension {d} has " + " + ".join(
            str(np.shape(v)[d]) for _, v in call.operands) + " elements, the operands one after another."]


# -- Reshape ------------------------------------------------------------------------------------------

_FACTORS = {6: [(2, 3), (3, 2), (6,), (1, 6), (3, 1, 2)], 8: [(2, 4), (4, 2), (2, 2, 2), (8,)],
            12: [(3, 4), (4, 3), (2, 6), (6, 2), (2, 3, 2), (12,)]}


class ReshapeExercises(Generator):
    opcode = "reshape"
    kinds = ("values", "read", "legal")
    rule = ("Reshape refills the operand's elements, in row-major order, into an array of new_sizes; the "
            "numbers of elements must be equal.")
    formula = ("linear = the row-major position of result_index in new_sizes; result[result_index] = "
               "operand[the index at row-major position linear of the operand]")
    read_formula = formula

    def problem(self, rng, level, kind):
        n = _pick(rng, [6, 8] if level == 1 else [6, 8, 12])
        shapes = _FACTORS[n]
        if level == 1:
            old, new = (n,), _pick(rng, [s for s in shapes if len(s) == 2])
        else:
            old = _pick(rng, [s for s in shapes if len(s) == (2 if level == 2 else 3)] or [shapes[0]])
            new = old
            while new == old:
                new = _pick(rng, shapes)
        return Call("reshape", [("operand", distinct(rng, old, level))], {"new_sizes": tuple(new)},
                    [("operand", "operand"), ("attr", "new_sizes")])

    def mutations(self, call):
        s = call.attrs["new_sizes"]
        return [("new_sizes", lambda c, rng: c.with_attrs(new_sizes=_replace(s, 0, s[0] + 1))),
                ("new_sizes", lambda c, rng: c.with_attrs(new_sizes=s + (2,)))]

    def shape_steps(self, call, shape):
        n = int(np.prod(_dims(call)))
        return [f"new_sizes = {spec_attr(call.attrs['new_sizes'])} holds {int(np.prod(shape.dims))} elements and "
                f"the operand {n}: equal, so the call is legal.", f"The result is {shape}."]


# -- Rev ------------------------------------------------------------------------------------------------

class RevExercises(Generator):
    opcode = "reverse"
    kinds = ("values", "read", "attribute", "legal")
    hidden = ("dimensions",)
    rule = "Rev reverses the order of the elements along each of dimensions."
    formula = ("in a reversed dimension d of size N: operand_index[d] = N - 1 - result_index[d]; the other "
               "dimensions keep their index")
    read_formula = formula

    def problem(self, rng, level, kind):
        rank = level
        dims = [ints(rng, 4, 6)] if rank == 1 else [ints(rng, 2, 4 if rank == 2 else 3) for _ in range(rank)]
        k = ints(rng, 1, rank)
        reversed_dims = tuple(sorted(int(d) for d in rng.choice(rank, k, replace=False)))
        return Call("reverse", [("operand", distinct(rng, dims, level))], {"dimensions": reversed_dims},
                    [("operand", "operand"), ("attr", "dimensions")])

    def mutations(self, call):
        d = call.attrs["dimensions"]
        rank = len(_dims(call))
        return [("dimensions", lambda c, rng: c.with_attrs(dimensions=d + (d[0],))),
                ("dimensions", lambda c, rng: c.with_attrs(dimensions=d + (rank,)))]

    def access_steps(self, call, access):
        dims, idx = _dims(call), access.reads[0][1]
        lines = [self.read_formula]
        for d, i in enumerate(access.index):
            if d in call.attrs["dimensions"]:
                lines.append(f"dimension {d} is reversed: {dims[d]} - 1 - {i} = {idx[d]}")
            else:
                lines.append(f"dimension {d} is not reversed: {i}")
        return lines + [f"result{index_text(access.index)} = operand{index_text(idx)} = "
                        f"{scalar_text(call.value('operand')[tuple(idx)])}"]

    def shape_steps(self, call, shape):
        return [f"Rev keeps the operand's shape: {shape}; dimensions {spec_attr(call.attrs['dimensions'])} must be "
                "distinct dimensions of the operand."]


for _g in (SliceExercises, DynamicSliceExercises, DynamicUpdateSliceExercises, PadExercises, TransposeExercises,
           BroadcastExercises, ConcatenateExercises, ReshapeExercises, RevExercises):
    register(_g())
