"""BroadcastInDim, Transpose, Rev, Concatenate, Reshape and Copy animations: each result
element is a copy of one operand element, which the step highlights."""
import numpy as np

from ..ops import registry
from .model import Animator, element, fmt_index, fmt_value, val


def _copy_line(ctx, a, names):
    k, index = a.reads[0]
    v = val(ctx.operands[k])[tuple(index)]
    return f"{element('result', a.index)} = {element(names[k], index)} = {fmt_value(v)}"


class BroadcastAnimator(Animator):
    opcodes = ("broadcast",)

    def explain(self, ctx, a, state):
        d = a.detail
        shape = np.shape(ctx.operands[0])
        parts = [f"dim {k}: " + ("0 (size 1)" if shape[k] == 1 else f"result_index[{b}] = {a.index[b]}")
                 for k, b in enumerate(d["broadcast_dimensions"])]
        return "\n".join([f"result_index  = {fmt_index(a.index)}",
                          f"broadcast_dimensions = {list(d['broadcast_dimensions'])}",
                          "operand_index[d] = result_index[broadcast_dimensions[d]]",
                          "                   (0 where dim(operand, d) = 1)"]
                         + [f"   {p}" for p in parts] +
                         [f"operand_index = {fmt_index(d['operand_index'])}", _copy_line(ctx, a, ["operand"])])


class TransposeAnimator(Animator):
    opcodes = ("transpose",)

    def explain(self, ctx, a, state):
        d = a.detail
        return "\n".join([f"result_index = {fmt_index(a.index)}",
                          f"permutation  = {list(d['permutation'])}",
                          "operand_index[permutation[i]] = result_index[i]",
                          f"operand_index = {fmt_index(d['operand_index'])}", _copy_line(ctx, a, ["operand"])])


class ReverseAnimator(Animator):
    opcodes = ("reverse",)

    def explain(self, ctx, a, state):
        d = a.detail
        shape = np.shape(ctx.operands[0])
        parts = [f"   dim {k}: {shape[k]} - 1 - {a.index[k]} = {d['operand_index'][k]}" for k in d["dimensions"]]
        return "\n".join([f"result_index = {fmt_index(a.index)}",
                          f"dimensions   = {list(d['dimensions'])}",
                          "operand_index[d] = dim(operand, d) - 1 - result_index[d] for d in dimensions"]
                         + parts + [f"operand_index = {fmt_index(d['operand_index'])}",
                                    _copy_line(ctx, a, ["operand"])])


class ConcatenateAnimator(Animator):
    def operand_names(self, ctx):
        return [f"operands[{k}]" for k in range(len(ctx.operands))]

    opcodes = ("concatenate",)

    def explain(self, ctx, a, state):
        d = a.detail
        dim = ctx.attrs["dimension"]
        k = d["operand_number"]
        size = np.shape(ctx.operands[k])[dim]
        return "\n".join([f"result_index = {fmt_index(a.index)}",
                          f"result_index[dimension={dim}] = {a.index[dim]} falls in operands[{k}]",
                          f"   (positions {d['offset']} to {d['offset'] + size - 1} along dimension {dim})",
                          f"operand_index = result_index - [offset {d['offset']} in dimension {dim}]"
                          f" = {fmt_index(d['operand_index'])}",
                          _copy_line(ctx, a, self.names(ctx))])


class ReshapeAnimator(Animator):
    opcodes = ("reshape", "copy", "bitcast", "dynamic-reshape")

    def operand_names(self, ctx):
        return ["operand"] + [f"dim_sizes[{k}]" for k in range(len(ctx.operands) - 1)]

    def explain(self, ctx, a, state):
        k, index = a.reads[0]
        if ctx.opcode == "copy":
            return "\n".join([f"result_index = {fmt_index(a.index)}", _copy_line(ctx, a, ["operand"])])
        if ctx.opcode == "bitcast":
            d = a.detail
            lo, hi = d["operand_linear"]
            lines = [f"result_index = {fmt_index(a.index)}",
                     f"row-major position in the result = {d['linear_index']}: bits {d['bits'][0]} to "
                     f"{d['bits'][1] - 1} of the buffer",
                     "   (values here are row-major: a bitcast keeps the order of the bytes)"]
            if lo == hi:
                lines.append(f"they are operand element {lo} (row-major) = {element('operand', index)}")
            else:
                lines.append(f"they are in operand elements {lo} to {hi} (row-major)")
            lines.append(f"{element('result', a.index)} = {fmt_value(val(ctx.result)[tuple(a.index)])}"
                         f"   ({element('operand', index)} = {fmt_value(val(ctx.operands[0])[tuple(index)])})")
            return "\n".join(lines)
        shape = ctx.index_map.domain_shape
        linear = int(np.ravel_multi_index(a.index, shape)) if shape else 0
        return "\n".join([f"result_index = {fmt_index(a.index)}",
                          f"row-major position in the result = {linear}",
                          f"the element at row-major position {linear} of the operand: {fmt_index(index)}",
                          _copy_line(ctx, a, ["operand"])])


for _animator in (BroadcastAnimator(), TransposeAnimator(), ReverseAnimator(), ConcatenateAnimator(),
                  ReshapeAnimator()):
    for _opcode in _animator.opcodes:
        registry.register_layer("animation", _opcode, _animator)
