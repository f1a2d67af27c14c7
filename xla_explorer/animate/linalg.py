"""Convolution and Dot animations: each result element is a sum of products; a step
highlights the lhs and rhs elements it multiplies.

A 2-D convolution has rank-4 arrays: by default the result is drawn over its spatial
dimensions (batch 0, output feature 0), the lhs as a row of its input features' spatial
planes (batch 0) and the kernel likewise (output feature 0), so that every element a
step reads is in sight (``dims=`` / ``fixed=`` choose otherwise).
"""
import numpy as np

from ..ops import registry
from ..ops.linalg import _dimension_numbers
from .model import Animator, element, fmt_index, fmt_value, val


def _products(ctx, pairs, limit=4):
    """One line per product, names and values: ``lhs[0, 1] * rhs[1, 0] = 2 * 3``."""
    lhs, rhs = val(ctx.operands[0]), val(ctx.operands[1])
    lines = []
    for k, (li, ri) in enumerate(pairs[:limit]):
        lines.append(f"   {'+' if k else ' '} {element('lhs', li)} * {element('rhs', ri)}"
                     f" = {fmt_value(lhs[li])} * {fmt_value(rhs[ri])}")
    if len(pairs) > limit:
        lines.append(f"   + ... ({len(pairs) - limit} more)")
    return lines


class ConvolutionAnimator(Animator):
    opcodes = ("convolution",)
    operand_names = ("lhs", "rhs")

    def _dn(self, ctx):
        return _dimension_numbers("Convolution", ctx.attrs.get("dimension_numbers"), np.ndim(ctx.operands[0]))

    def default_view(self, ctx, grid):
        if grid.rank <= 3:
            return None, None
        dn = self._dn(ctx)
        if grid.name == "lhs":
            spatial = tuple(dn.input_spatial_dimensions)
            dims = ((dn.input_feature_dimension,) + spatial[-2:]) if len(spatial) >= 2 else None
        elif grid.name == "rhs":
            spatial = tuple(dn.kernel_spatial_dimensions)
            dims = ((dn.kernel_input_feature_dimension,) + spatial[-2:]) if len(spatial) >= 2 else None
        else:
            dims = tuple(dn.output_spatial_dimensions)[-2:]
        return dims, None

    def explain(self, ctx, a, state):
        d = a.detail
        dn = self._dn(ctx)
        out_spatial = [a.index[k] for k in dn.output_spatial_dimensions]
        pairs = d["pairs"]
        value = val(ctx.results[0])[tuple(a.index)]
        return "\n".join([
            f"result_index = {fmt_index(a.index)}",
            f"   batch {a.index[dn.output_batch_dimension]}, output feature {a.index[dn.output_feature_dimension]},"
            f" spatial {fmt_index(out_spatial)}",
            f"   group {d['group']}, lhs batch {d['input_batch']}",
            f"{d['window_positions_in_padding']} window positions fall in padding or lhs-dilation holes",
            f"{element('result', a.index)} = sum of {len(pairs)} products:"]
            + (_products(ctx, pairs) if pairs else ["   (none: 0)"]) + [f"   = {fmt_value(value)}"])


class DotAnimator(Animator):
    opcodes = ("dot",)
    operand_names = ("lhs", "rhs")

    def explain(self, ctx, a, state):
        pairs = a.detail["pairs"]
        value = val(ctx.results[0])[tuple(a.index)]
        return "\n".join([f"result_index = {fmt_index(a.index)}",
                          f"   batch {fmt_index(a.detail['batch_index'])}, lhs free "
                          f"{fmt_index(a.detail['lhs_free_index'])}, rhs free {fmt_index(a.detail['rhs_free_index'])}",
                          f"{element('result', a.index)} = sum over the contracting dimensions "
                          f"({len(pairs)} products):"]
                         + (_products(ctx, pairs) if pairs else ["   (none: 0)"]) + [f"   = {fmt_value(value)}"])


for _animator in (ConvolutionAnimator(), DotAnimator()):
    for _opcode in _animator.opcodes:
        registry.register_layer("animation", _opcode, _animator)
