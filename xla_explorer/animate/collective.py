"""Collective animations: every device at once.

A collective's operand and result are drawn stacked over the devices (dimension 0 is the
device; a rank-2 value per device is a row of per-device slices).  A step is one element
of one device's result: the devices of its group are named, and the elements it copies
(all-gather, all-to-all, collective-permute, collective-broadcast) or combines
(all-reduce, reduce-scatter) light up in the other devices' operands.
"""
import numpy as np

from ..ops import registry
from ..ops.index_map import Unknown
from ..shapes import Shape
from .model import Animator, Grid, combiner_name, element, fmt_index, fmt_value, val

_OPCODES = ("all-reduce", "all-gather", "all-to-all", "collective-permute", "reduce-scatter",
            "collective-broadcast")


class CollectiveAnimator(Animator):
    opcodes = _OPCODES

    def operand_names(self, ctx):
        n = len(ctx.operands)
        return ["operand"] if n == 1 else [f"operands[{k}]" for k in range(n)]

    @staticmethod
    def layout(ctx):
        """Operands of different shapes: ``(result, dims, offset)`` per result of the map's
        flattened domain (``ops.collective._per_operand``); None otherwise."""
        return getattr(ctx.index_map, "result_layout", None)

    def domain(self, ctx):
        return "results" if self.layout(ctx) else super().domain(ctx)

    def make_grids(self, ctx):
        grids = super().make_grids(ctx)
        for g in grids:
            g.title = g.title.replace(g.name + " ", f"{g.name} on {g.shape[0]} devices ", 1) \
                + "\n(dimension 0: the device)"
        layout = self.layout(ctx)
        if layout:   # the domain: each device's results one after the other
            n, total = ctx.index_map.domain_shape
            if any(isinstance(r, Unknown) for r in ctx.results):
                flat = Unknown(Shape(_leaves(ctx.shape)[0].element_type, (n, total)))
            else:
                flat = np.empty((n, total), object)
                for (j, dims, offset), r in zip(layout, ctx.results):
                    flat[:, offset:offset + int(np.prod(dims, dtype=np.int64))] = np.asarray(r).reshape(n, -1)
            parts = ", then ".join(f"result[{j}] {s}" for j, s in enumerate(_leaves(ctx.shape)))
            grids.append(Grid("results", flat, title=f"results on {n} devices, flattened: {parts}\n"
                                                    "(dimension 0: the device; the operands differ in shape)"))
        return grids

    def explain(self, ctx, a, state):
        d = a.detail
        dev, index = a.index[0], tuple(a.index[1:])
        group = d.get("group")
        names = self.names(ctx)
        res = f"result@{dev}{fmt_index(index)}"
        lines = [f"device {dev}, result_index = {fmt_index(index)}"]
        result_value = ctx.results[0]
        if "result" in d:   # operands of different shapes: result j on its own
            j, index = d["result"], tuple(d["result_index"])
            res = f"result[{j}]@{dev}{fmt_index(index)}"
            lines = [f"device {dev}, result[{j}] index {fmt_index(index)} (element {a.index[1]} of the results, "
                     f"flattened: result[{j}] starts at {d['result_offsets'][j]})"]
            result_value = ctx.results[j]
        if group is not None:
            lines.append(f"its group: devices {list(group)}" + (f" (it is number {d['position']})"
                                                                 if "position" in d else ""))
        if not a.reads:
            lines.append(f"{res} = 0   (device {dev} receives nothing: no source / no group)")
            return "\n".join(lines)
        values = [val(ctx.operands[k])[tuple(i)] for k, i in a.reads]
        if ctx.index_map.kind == "reduce":
            f = combiner_name(ctx.attrs["computation"], "computation")
            terms = [f"{names[k]}@{i[0]}{fmt_index(i[1:])}" for k, i in a.reads]
            if ctx.opcode == "reduce-scatter":
                lines.append(f"block {d['position']} of the group's reduction: operand index "
                             f"{fmt_index(d['operand_index'])}")
            sep = f" {f} " if len(f) == 1 else ", "
            lines.append(f"{res} = " + (sep.join(terms) if len(f) == 1 else f"{f}({', '.join(terms)})"))
            lines.append("   = " + (sep.join(fmt_value(v) for v in values) if len(f) == 1 else
                                    f"{f}({', '.join(fmt_value(v) for v in values)})")
                         + f" = {fmt_value(val(result_value)[(dev,) + index])}")
            lines.append("   (combined in group order, left to right)")
            return "\n".join(lines)
        k, i = a.reads[0]
        src = i[0]
        if ctx.opcode == "all-gather":
            lines.append(f"along dimension {ctx.attrs['all_gather_dim']}: block {d['block']} of the result comes "
                         f"from group member {d['block']}, device {src}")
        elif ctx.opcode == "all-to-all" and "block" in d:
            lines.append(f"along dimension {ctx.attrs.get('split_dimension')}: block {d['block']} comes from "
                         f"device {src}, which sent its block {d['position']} (block size {d['block_size']})")
        elif ctx.opcode == "collective-permute":
            lines.append(f"source_target_pairs sends device {src}'s operand to device {dev}")
        elif ctx.opcode == "collective-broadcast":
            lines.append(f"the group's first device, {src}, sends its operand to every member")
        lines.append(f"{res} = {names[k]}@{src}{fmt_index(i[1:])} = {fmt_value(values[0])}")
        return "\n".join(lines)


def _leaves(shape):
    return list(shape.tuple_shapes) if shape.is_tuple else [shape]


for _opcode in _OPCODES:
    registry.register_layer("animation", _opcode, CollectiveAnimator())
