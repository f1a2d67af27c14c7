"""Slice, DynamicSlice, DynamicUpdateSlice and Pad animations.

Each steps through the result.  Slice marks the strided selection in the operand;
DynamicSlice and DynamicUpdateSlice show the start indices and the window at its
clamped start; Pad marks its padding cells (edge and interior) in the result and the
operand elements cropped by negative edge padding, and a padding step highlights the
padding value.
"""
from fractions import Fraction

import numpy as np

from ..ops import registry
from ..ops.index_map import Unknown
from ..shapes import Shape
from .model import Animator, Grid, element, fmt_index, fmt_list, fmt_value, val


def _value_line(a, ctx, name="operand", k=0):
    index = next(i for j, i in a.reads if j == k)
    v = val(ctx.operands[k])[tuple(index)]
    return f"{element('result', a.index)} = {element(name, index)} = {fmt_value(v)}"


class SliceAnimator(Animator):
    opcodes = ("slice",)

    def make_grids(self, ctx):
        grids = super().make_grids(ctx)
        operand = grids[0]
        strides = ctx.attrs.get("strides") or (1,) * operand.rank
        masks = []
        for n, s, lim, st in zip(operand.shape, ctx.attrs["start_indices"], ctx.attrs["limit_indices"], strides):
            i = np.arange(n)
            masks.append((i >= s) & (i < lim) & ((i - s) % st == 0))
        operand.add_static("window", masks, "all")
        return grids

    def explain(self, ctx, a, state):
        d = a.detail
        return "\n".join([f"result_index  = {fmt_index(a.index)}",
                          "operand_index = start_indices + result_index * strides",
                          f"              = {fmt_list(d['start_indices'])} + {fmt_index(a.index)} * "
                          f"{fmt_list(d['strides'])} = {fmt_index(d['operand_index'])}",
                          _value_line(a, ctx)])


class _DynamicAnimator(Animator):
    """The start indices (N scalar operands from ``first``) drawn as one rank-1 grid."""
    first = 1

    def names(self, ctx):
        return list(self.fixed_names) + [None] * (len(ctx.operands) - self.first)

    def operand_grid(self, ctx, k):
        if k < self.first:
            return self.fixed_names[k], None
        return "start_indices", (lambda index: (k - self.first,))

    def make_grids(self, ctx):
        grids = super().make_grids(ctx)
        values = ctx.operands[self.first:]
        if any(isinstance(v, Unknown) for v in values):
            starts = Unknown(Shape("s64", (len(values),)))
        else:
            starts = np.array([np.asarray(v).item() for v in values])
        grid = Grid("start_indices", starts, title=f"start_indices ({len(values)} scalars)")
        return grids[:self.first] + [grid] + grids[self.first:]

    def mark_starts(self, marks, ctx):
        for k in range(len(ctx.operands) - self.first):
            marks.elem("start_indices", (k,), "index")

    def clamp_lines(self, a, ctx, sizes_name, sizes):
        d = a.detail
        upper = [n - s for n, s in zip(np.shape(ctx.operands[0]), sizes)]
        return [f"adjusted_start_indices = clamp(start_indices = {fmt_list(d['start_indices'])}, 0,",
                f"                           shape(operand) - {sizes_name} = {fmt_list(upper)})",
                f"                       = {fmt_list(d['adjusted_start_indices'])}"
                + ("   <- clamped" if a.clamped else "")]


class DynamicSliceAnimator(_DynamicAnimator):
    opcodes = ("dynamic-slice",)
    fixed_names = ("operand",)

    def mark(self, ctx, marks, a, state):
        super().mark(ctx, marks, a, state)
        self.mark_starts(marks, ctx)
        if not a.unknown:   # shapes only: the start is unknown, the candidates are marked
            marks.box("operand", a.detail["adjusted_start_indices"], ctx.attrs["slice_sizes"],
                      "clamped" if a.clamped else "window")

    def explain(self, ctx, a, state):
        d = a.detail
        return "\n".join([f"result_index = {fmt_index(a.index)}"] + self.clamp_lines(a, ctx, "slice_sizes",
                                                                                    ctx.attrs["slice_sizes"]) +
                         [f"operand_index = adjusted_start_indices + result_index = {fmt_index(d['operand_index'])}",
                          _value_line(a, ctx)])


class DynamicUpdateSliceAnimator(_DynamicAnimator):
    opcodes = ("dynamic-update-slice",)
    fixed_names = ("operand", "update")
    first = 2

    def mark(self, ctx, marks, a, state):
        super().mark(ctx, marks, a, state)
        self.mark_starts(marks, ctx)
        if not a.unknown:
            marks.box("result", a.detail["adjusted_start_indices"], np.shape(ctx.operands[1]),
                      "clamped" if a.clamped else "window")

    def explain(self, ctx, a, state):
        d = a.detail
        update_index = [i - s for i, s in zip(a.index, d["adjusted_start_indices"])]
        inside = d["from"] == "update"
        lines = [f"result_index = {fmt_index(a.index)}"]
        lines += self.clamp_lines(a, ctx, "shape(update)", np.shape(ctx.operands[1]))
        lines += [f"update_index = result_index - adjusted_start_indices = {fmt_list(update_index)}",
                  "   inside the update" if inside else "   outside the update: the operand shows through",
                  _value_line(a, ctx, "update", 1) if inside else _value_line(a, ctx)]
        return "\n".join(lines)


class PadAnimator(Animator):
    opcodes = ("pad",)
    operand_names = ("operand", "padding_value")

    def make_grids(self, ctx):
        grids = super().make_grids(ctx)
        operand, result = grids[0], grids[-1]
        config = ctx.attrs["padding_config"]
        is_element, cropped = [], []
        for d, (low, high, interior) in enumerate(config):
            i = np.arange(result.shape[d])
            q, r = np.divmod(i - low, interior + 1)
            is_element.append((i >= low) & (r == 0) & (q < operand.shape[d]))
            target = low + np.arange(operand.shape[d]) * (interior + 1)
            cropped.append((target < 0) | (target >= result.shape[d]))
        result.add_static("padding", [~m for m in is_element], "any")
        operand.add_static("cropped", cropped, "any")
        return grids

    def mark(self, ctx, marks, a, state):
        super().mark(ctx, marks, a, state)
        if not a.reads:
            marks.elem("padding_value", (), "padding")

    def explain(self, ctx, a, state):
        d = a.detail
        low, inter = d["edge_padding_low"], d["interior_padding"]
        q = [Fraction(i - lo, n + 1) for i, lo, n in zip(a.index, low, inter)]
        lines = [f"result_index  = {fmt_index(a.index)}",
                 "operand_index = (result_index - edge_padding_low) / (interior_padding + 1)",
                 f"              = ({fmt_index(a.index)} - {fmt_list(low)}) / {fmt_list([n + 1 for n in inter])}"
                 f" = {fmt_list(q)}"]
        if a.reads:
            lines.append(_value_line(a, ctx))
        else:
            lines += [f"   {reason}" for reason in d["padding"]]
            lines.append(f"{element('result', a.index)} = padding_value = {fmt_value(ctx.operands[1])}")
        negative = [(dim, lo, hi) for dim, (lo, hi) in enumerate(zip(low, d["edge_padding_high"])) if lo < 0 or hi < 0]
        if negative:
            lines.append("negative edge padding crops operand elements:")
            lines += [f"   dimension {dim}: edge_padding_low {lo}, edge_padding_high {hi}" for dim, lo, hi in negative]
        return "\n".join(lines)


for _animator in (SliceAnimator(), DynamicSliceAnimator(), DynamicUpdateSliceAnimator(), PadAnimator()):
    for _opcode in _animator.opcodes:
        registry.register_layer("animation", _opcode, _animator)
