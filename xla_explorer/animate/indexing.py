"""Gather and Scatter animations.

Gather steps through the result: each step shows the start indices read from
``start_indices``, the slice window at its (clamped) start in the operand, and the one
operand element the result element copies.  Scatter steps through the updates in XLA's
order of application (scatter indices row-major, then each window row-major): each step
shows the indices used, the update's window in the result, the element it combines into,
collisions (an element combined again) and skipped out-of-bounds windows; the result
grid shows the running values.
"""
import numpy as np

from ..ops import registry
from ..ops.index_map import Unknown
from .model import Animator, RunningWrites, TEXT_CELLS, combiner_name, element, fmt_index, fmt_list, fmt_value, val


def sliced(name, indices):
    """``start_indices[1, :]`` for the index vector read at ``indices`` (a list of indices)."""
    indices = [tuple(int(i) for i in ix) for ix in indices]
    if len(indices) == 1:
        return element(name, indices[0])
    varying = [d for d in range(len(indices[0])) if len({ix[d] for ix in indices}) > 1]
    if len(varying) == 1:
        d = varying[0]
        parts = [":" if k == d else str(i) for k, i in enumerate(indices[0])]
        return f"{name}[{', '.join(parts)}]"
    return f"{name}[{', '.join(fmt_index(ix) for ix in indices)}]"


def _dims(ds):
    return "{" + ",".join(str(int(d)) for d in ds) + "}"


class GatherAnimator(Animator):
    opcodes = ("gather",)
    operand_names = ("operand", "start_indices")

    def mark(self, ctx, marks, a, state):
        super().mark(ctx, marks, a, state)
        d = a.detail
        for ix in d["start_indices_index"]:
            marks.elem("start_indices", ix, "index")
        if not d["empty_slice"] and not a.unknown:
            start = [s + b for s, b in zip(d["full_start_index"], d["full_batching_index"])]
            marks.box("operand", start, ctx.attrs["slice_sizes"], "clamped" if a.clamped else "window")

    def explain(self, ctx, a, state):
        d = a.detail
        operand = val(ctx.operands[0])
        sizes = list(ctx.attrs["slice_sizes"])
        upper = [n - s for n, s in zip(operand.shape, sizes)]
        lines = [f"result_index     = {fmt_index(a.index)}",
                 f"batch_index      = result_index[batch_dims={_dims(d['batch_dims'])}] = "
                 f"{fmt_index(d['batch_index'])}",
                 f"start_index      = {sliced('start_indices', d['start_indices_index'])} = "
                 f"{fmt_list(d['start_index'])}",
                 f"full_start_index = clamp({fmt_list(d['full_start_index_before_clamp'])}, 0,",
                 f"                     shape(operand) - slice_sizes = {fmt_list(upper)})",
                 f"                 = {fmt_list(d['full_start_index'])}" + ("   <- clamped" if a.clamped else "")]
        if ctx.attrs.get("operand_batching_dims"):
            lines.append(f"full_batching_index = {fmt_list(d['full_batching_index'])}")
        lines += [f"offset_index     = result_index[offset_dims={_dims(d['offset_dims'])}] = "
                  f"{fmt_index(d['offset_index'])}",
                  f"full_offset_index = {fmt_list(d['full_offset_index'])}",
                  "operand_index    = full_start_index + " + ("full_batching_index + " if
                                                          ctx.attrs.get("operand_batching_dims") else "")
                  + "full_offset_index",
                  f"                 = {fmt_list(d['operand_index'])}"]
        if d["empty_slice"]:
            lines.append(f"{element('result', a.index)} = 0   (the slice is empty)")
        else:
            v = operand[tuple(d["operand_index"])]
            lines.append(f"{element('result', a.index)} = {element('operand', d['operand_index'])} = {fmt_value(v)}")
        return "\n".join(lines)


    def explain_unknown(self, ctx, a, state):
        d = a.detail
        lines = [f"result_index     = {fmt_index(a.index)}",
                 f"batch_index      = result_index[batch_dims={_dims(d['batch_dims'])}] = "
                 f"{fmt_index(d['batch_index'])}",
                 f"start_index      = {sliced('start_indices', d['start_indices_index'])} = ?",
                 "                   (the index values are unknown: shapes only)",
                 f"offset_index     = result_index[offset_dims={_dims(d['offset_dims'])}] = "
                 f"{fmt_index(d['offset_index'])}",
                 "operand_index    = clamp(start) + full_offset_index"]
        if a.reads:
            box = ", ".join(f"{lo}" if hi == lo + 1 else f"{lo}:{hi}" for lo, hi in a.reads.ranges)
            lines.append(f"it reads one of {len(a.reads)} elements: operand[{box}]")
        return "\n".join(lines)


class ScatterAnimator(Animator):
    opcodes = ("scatter",)

    def _n(self, ctx):
        return (len(ctx.operands) - 1) // 2

    def operand_names(self, ctx):
        n = self._n(ctx)
        if n == 1:
            return ["inputs", "scatter_indices", "updates"]
        return [f"inputs[{j}]" for j in range(n)] + ["scatter_indices"] + [f"updates[{j}]" for j in range(n)]

    def domain(self, ctx):
        return self.names(ctx)[self._n(ctx) + 1]

    def step_dims(self, ctx):
        window = list(ctx.attrs["update_window_dims"])
        rank = len(ctx.index_map.domain_shape)
        return tuple([d for d in range(rank) if d not in window] + window)

    def schedule(self, ctx):
        """Every update's target in XLA's order of application (the steps' order), from
        the reference's own plan (``ops.indexing._scatter_plan``)."""
        from ..ops.indexing import _scatter_plan, _schedule
        n = self._n(ctx)
        inputs, indices, updates = ctx.operands[:n], ctx.operands[n], ctx.operands[n + 1:]
        if isinstance(indices, Unknown):
            return None
        a = ctx.attrs
        shape = tuple(np.shape(inputs[0]))
        plan = _scatter_plan(shape, np.asarray(indices), tuple(np.shape(updates[0])),
                             update_window_dims=a["update_window_dims"],
                             inserted_window_dims=a["inserted_window_dims"],
                             scatter_dims_to_operand_dims=a["scatter_dims_to_operand_dims"],
                             index_vector_dim=a["index_vector_dim"],
                             input_batching_dims=a.get("input_batching_dims") or (),
                             scatter_indices_batching_dims=a.get("scatter_indices_batching_dims") or ())
        order = (plan["update_scatter_dims"], a["update_window_dims"])
        in_bounds = _schedule(plan["in_bounds"], *order)
        where = _schedule(plan["result_index"], *order)
        targets = np.where(in_bounds, np.ravel_multi_index(tuple(where), shape, mode="clip") if shape else 0, -1)
        if any(isinstance(x, Unknown) for x in ctx.operands):
            return RunningWrites(shape, targets, label="scatter")
        fn = a["update_computation"]
        return RunningWrites(shape, targets, [_schedule(np.asarray(u), *order) for u in updates],
                             [np.asarray(x) for x in inputs], fn, bool(getattr(fn, "is_elementwise", False)),
                             label="scatter")

    def mark(self, ctx, marks, a, state):
        super().mark(ctx, marks, a, state)
        d = a.detail
        for ix in d["scatter_indices_index"]:
            marks.elem("scatter_indices", ix, "index")
        if not a.unknown:   # shapes only: where the window goes is unknown, its candidates are marked
            for name in self.result_names(ctx):
                marks.box(name, d["window_start"], d["window_size"], "skipped" if a.skipped else "window")
        # (old, update, new values) of this step, from the running values (none: shapes only)
        state["step"] = state["rw"].step(state["at"]) if "rw" in state else None

    def values(self, ctx, state):
        if "rw" not in state or np.prod(state["rw"].shape, dtype=np.int64) > TEXT_CELLS:
            return {}
        after = state["rw"].values_after(state["at"])
        return {} if after is None else dict(zip(self.result_names(ctx), after))

    def explain(self, ctx, a, state):
        d = a.detail
        n = self._n(ctx)
        names = self.names(ctx)
        inputs = val(ctx.operands[0])
        lines = [f"update_index         = {fmt_index(a.index)}",
                 f"update_scatter_index = update_index[update_scatter_dims={_dims(d['update_scatter_dims'])}]"
                 f" = {fmt_index(d['update_scatter_index'])}",
                 f"start_index          = {sliced('scatter_indices', d['scatter_indices_index'])}"
                 f" = {fmt_list(d['start_index'])}",
                 f"full_start_index     = {fmt_list(d['full_start_index'])}"]
        if ctx.attrs.get("input_batching_dims"):
            lines.append(f"full_batching_index  = {fmt_list(d['full_batching_index'])}")
        lines += [f"update_window_index  = update_index[update_window_dims={_dims(d['update_window_dims'])}]"
                  f" = {fmt_index(d['update_window_index'])}",
                  f"full_window_index    = {fmt_list(d['full_window_index'])}",
                  "result_index = full_start_index + " + ("full_batching_index + " if
                                                        ctx.attrs.get("input_batching_dims") else "")
                  + "full_window_index",
                  f"             = {fmt_list(d['result_index'])}"]
        if a.skipped:
            upper = [s - w for s, w in zip(inputs.shape, d["window_size"])]
            lines += [f"window_start = {fmt_list(d['window_start'])}, window_size = {fmt_list(d['window_size'])}",
                      "SKIPPED: the window must fit: 0 <= window_start <= shape(inputs) - window_size",
                      f"                                                 = {fmt_list(upper)}"]
            return "\n".join(lines)
        target = tuple(d["result_index"])
        f = combiner_name(ctx.attrs["update_computation"], "update_computation")
        res = [element(r, target) for r in self.result_names(ctx)]
        upd = [element(u, a.index) for u in names[n + 1:]]
        step = state.get("step")
        if f == "replace":
            lines.append(f"{res[0]} = {upd[0]}" + (f" = {fmt_value(step[1][0])}" if step else ""))
        elif f in ("+", "*", "-", "max", "min", "and", "or", "xor") and n == 1:
            expr = f"{res[0]} {f} {upd[0]}" if len(f) == 1 else f"{f}({res[0]}, {upd[0]})"
            lines.append(f"{res[0]} = {expr}")
            if step:
                vals = f"{fmt_value(step[0][0])} {f} {fmt_value(step[1][0])}" if len(f) == 1 else \
                    f"{f}({fmt_value(step[0][0])}, {fmt_value(step[1][0])})"
                lines.append(f"   = {vals} = {fmt_value(step[2][0])}")
        else:
            lines.append(f"{', '.join(res)} = {f}({', '.join(res + upd)})")
            if step:
                lines.append(f"   = {f}({', '.join(fmt_value(v) for v in step[0] + step[1])})"
                             f" = {', '.join(fmt_value(v) for v in step[2])}")
        earlier = state["written"].get((0, target))
        if earlier is not None:
            lines.append(f"COLLISION: {res[0]} was already updated at step {earlier[0] + 1} "
                         f"(update {fmt_index(earlier[1])}); {f} combines them")
        return "\n".join(lines)


for _animator in (GatherAnimator(), ScatterAnimator()):
    for _opcode in _animator.opcodes:
        registry.register_layer("animation", _opcode, _animator)
