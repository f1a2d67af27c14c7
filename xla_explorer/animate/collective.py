"""Collective animations: every device at once.

A collective's operand and result are drawn stacked over the devices (dimension 0 is the
device; a rank-2 value per device is a row of per-device slices).  A step is one element
of one device's result: the devices of its group are named, and the elements it copies
(all-gather, all-to-all, collective-permute, collective-broadcast) or combines
(all-reduce, reduce-scatter) light up in the other devices' operands.
"""
import numpy as np

from ..ops import registry
from .model import Animator, combiner_name, element, fmt_index, fmt_value, val

_OPCODES = ("all-reduce", "all-gather", "all-to-all", "collective-permute", "reduce-scatter",
            "collective-broadcast")


class CollectiveAnimator(Animator):
    opcodes = _OPCODES

    def operand_names(self, ctx):
        n = len(ctx.operands)
        return ["operand"] if n == 1 else [f"operands[{k}]" for k in range(n)]

    def make_grids(self, ctx):
        grids = super().make_grids(ctx)
        for g in grids:
            g.title = g.title.replace(g.name + " ", f"{g.name} on {g.shape[0]} devices ", 1) \
                + "\n(dimension 0: the device)"
        return grids

    def explain(self, ctx, a, state):
        d = a.detail
        dev, index = a.index[0], tuple(a.index[1:])
        group = d.get("group")
        names = self.names(ctx)
        res = f"result@{dev}{fmt_index(index)}"
        lines = [f"device {dev}, result_index = {fmt_index(index)}"]
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
                         + f" = {fmt_value(val(ctx.results[0])[tuple(a.index)])}")
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


for _opcode in _OPCODES:
    registry.register_layer("animation", _opcode, CollectiveAnimator())
