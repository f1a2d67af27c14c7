"""ReduceWindow, SelectAndScatter and Reduce animations.

ReduceWindow and SelectAndScatter draw the operand padded and base-dilated: elements at
``padding_low + index * base_dilation``, padding cells and dilation holes between and
around (pale, static).  A step highlights its window there: the elements it reads, the
padding cells and holes it covers (window dilation spaces the window's cells).
SelectAndScatter steps through the source: the window, the element ``select`` picks and
the result element the source value is scattered into (a collision when an earlier
window picked the same element); the result grid shows the running values.
"""
import numpy as np

from ..ops import registry
from ..ops.reduction import _window_attrs
from ..ops.index_map import Unknown
from .model import (Animator, Grid, RunningWrites, TEXT_CELLS, _type, combiner_name, element, fmt_index, fmt_list,
                    fmt_value, val)

CROPPED, PADDING, HOLE, ELEMENT = 3, 2, 1, 0


def padded_lattice(shape, padding, base_dilations):
    """Per dimension: (lattice, origin, codes): the (offset, step, size) of the elements in
    the lattice, the lattice position of padded index 0, and each lattice cell's kind."""
    lattice, origins, codes = [], [], []
    for n, (low, high), bd in zip(shape, padding, base_dilations):
        dilated = (n - 1) * bd + 1 if n > 0 else 0
        padded = low + dilated + high
        lo = min(0, low)
        size = max(padded, low + dilated) - lo
        origin = -lo
        p = np.arange(size) - origin          # the padded index of each lattice cell
        q = p - low                           # its index in the base-dilated operand
        code = np.where((p < 0) | (p >= padded), CROPPED,
                        np.where((q < 0) | (q >= dilated), PADDING, np.where(q % bd != 0, HOLE, ELEMENT)))
        lattice.append((low + origin, bd, size))
        origins.append(origin)
        codes.append(code)
    return lattice, origins, codes


def padded_grid(name, value, padding, base_dilations):
    value = val(value)
    lattice, origins, codes = padded_lattice(value.shape, padding, base_dilations)
    how = (["padded"] if any(lo or hi for lo, hi in padding) else []) + \
        (["base-dilated"] if any(b > 1 for b in base_dilations) else [])
    grid = Grid(name, value, title=f"{name} {_type(value)}" + ("\n" + ", ".join(how) if how else ""),
                lattice=lattice)
    # a cell's kind is the strongest of its dimensions' kinds (cropped > padding > hole)
    for role, code in (("hole", HOLE), ("padding", PADDING), ("cropped", CROPPED)):
        grid.add_static(role, [c == code for c in codes], "any")
    grid.origin = tuple(origins)
    return grid


def _terms(names_values, limit=6):
    shown = names_values[:limit]
    more = len(names_values) - len(shown)
    return shown, more


def _fold_text(f, init_name, init_value, cells, result_value):
    """``result = init + a + b`` (or ``f(init, a, b)``) with names, then with values."""
    shown, more = _terms(cells)
    names = [init_name] + [n for n, _ in shown] + ([f"... {more} more"] if more else [])
    values = [fmt_value(init_value)] + [fmt_value(v) for _, v in shown] + (["..."] if more else [])
    if f in ("+", "*", "and", "or", "xor"):
        sep = f" {f} "
        return [f"   = {sep.join(names)}", f"   = {sep.join(values)} = {fmt_value(result_value)}"]
    return [f"   = {f}({', '.join(names)})", f"   = {f}({', '.join(values)}) = {fmt_value(result_value)}"]


class _Variadic(Animator):
    def _n(self, ctx):
        return len(ctx.operands) // 2

    def operand_names(self, ctx):
        n = self._n(ctx)
        if n == 1:
            return ["operand", "init_value"]
        return [f"operands[{k}]" for k in range(n)] + [f"init_values[{k}]" for k in range(n)]

    def mark_init(self, ctx, marks):
        for name in self.names(ctx)[self._n(ctx):]:
            marks.elem(name, (), "init")


class ReduceWindowAnimator(_Variadic):
    opcodes = ("reduce-window",)

    def window(self, ctx):
        a = ctx.attrs
        return _window_attrs("ReduceWindow", np.shape(ctx.operands[0]), a["window_dimensions"],
                             a["window_strides"], a["padding"], a.get("base_dilations"), a.get("window_dilations"))

    def make_grids(self, ctx):
        wd, ws, pad, bd, wdl = self.window(ctx)
        n = self._n(ctx)
        names = self.names(ctx)
        grids = super().make_grids(ctx)
        for k in range(n):
            grids[k] = padded_grid(names[k], ctx.operands[k], pad, bd)
        return grids

    def mark(self, ctx, marks, a, state):
        super().mark(ctx, marks, a, state)
        self.mark_init(ctx, marks)
        for name in self.names(ctx)[:self._n(ctx)]:
            origin = marks.grids[name].origin
            for _, padded, kind, _ in a.detail["cells"]:
                role = {"operand": "read", "padding": "padding", "hole": "hole"}[kind]
                marks.pos(name, [p + o for p, o in zip(padded, origin)], role)

    def explain(self, ctx, a, state):
        wd, ws, pad, bd, wdl = self.window(ctx)
        d = a.detail
        cells = d["cells"]
        kinds = [c[2] for c in cells]
        n = self._n(ctx)
        names = self.names(ctx)
        lines = [f"result_index    = {fmt_index(a.index)}",
                 f"window_position = result_index * window_strides = {fmt_index(a.index)} * {fmt_list(ws)}"
                 f" = {fmt_index(d['window_position'])}",
                 "   (in the operand padded by " + ", ".join(f"({lo}, {hi})" for lo, hi in pad)
                 + (f" and base-dilated by {fmt_list(bd)}" if any(b > 1 for b in bd) else "") + ")",
                 f"window: window_dimensions = {fmt_list(wd)}" + (f", window_dilations = {fmt_list(wdl)}"
                                                                   if any(w > 1 for w in wdl) else ""),
                 f"   {len(cells)} cells: {kinds.count('operand')} elements, {kinds.count('padding')} padding, "
                 f"{kinds.count('hole')} holes (padding and holes do not take part)"]
        f = combiner_name(ctx.attrs["computation"], "computation")
        results = ctx.results
        res = element("result" if n == 1 else "result[0]", a.index)
        reads0 = [c[3] for c in cells if c[2] == "operand"]
        operand = val(ctx.operands[0])
        lines.append(f"{res} = reduce with {f}:" if n == 1 else f"{res}, ... = reduce with {f} (variadic):")
        lines += _fold_text(f, names[n], ctx.operands[n], [(element(names[0], i), operand[i]) for i in reads0],
                            val(results[0])[tuple(a.index)])
        return "\n".join(lines)


class SelectAndScatterAnimator(Animator):
    opcodes = ("select-and-scatter",)
    operand_names = ("operand", "source", "init_value")

    def window(self, ctx):
        a = ctx.attrs
        return _window_attrs("SelectAndScatter", np.shape(ctx.operands[0]), a["window_dimensions"],
                             a["window_strides"], a["padding"])

    def make_grids(self, ctx):
        wd, ws, pad, bd, wdl = self.window(ctx)
        grids = super().make_grids(ctx)
        grids[0] = padded_grid("operand", ctx.operands[0], pad, bd)
        return grids

    def domain(self, ctx):
        return "source"

    def schedule(self, ctx):
        """Each source element's target (the element ``select`` picks), in source order,
        from the reference's own selection (``ops.reduction._selected_cells``)."""
        from ..ops.reduction import _selected_cells
        operand, source, init = ctx.operands
        if isinstance(operand, Unknown):
            return None
        shape = tuple(np.shape(operand))
        targets = _selected_cells(np.asarray(operand), ctx.attrs["select"], np.shape(source), self.window(ctx))
        if isinstance(source, Unknown) or isinstance(init, Unknown) or isinstance(ctx.results[0], Unknown):
            return RunningWrites(shape, targets, label="select-and-scatter")
        fn = ctx.attrs["scatter"]
        dtype = np.asarray(ctx.results[0]).dtype
        return RunningWrites(shape, targets, [np.asarray(source)], [np.full(shape, init, dtype=dtype)], fn,
                             bool(getattr(fn, "is_elementwise", False)), label="select-and-scatter")

    def mark(self, ctx, marks, a, state):
        super().mark(ctx, marks, a, state)
        origin = marks.grids["operand"].origin
        for _, padded, kind, _ in a.detail["cells"]:
            if kind == "padding":
                marks.pos("operand", [p + o for p, o in zip(padded, origin)], "padding")
        selected = a.detail["selected"]
        state["step"] = None
        if selected is not None:
            marks.elem("operand", selected, "selected")
            if "rw" in state:   # (old, source, new values) from the running values (none: shapes only)
                step = state["rw"].step(state["at"])
                state["step"] = None if step is None else tuple(v[0] for v in step)

    def values(self, ctx, state):
        if "rw" not in state or np.prod(state["rw"].shape, dtype=np.int64) > TEXT_CELLS:
            return {}
        after = state["rw"].values_after(state["at"])
        return {} if after is None else {"result": after[0]}

    def explain(self, ctx, a, state):
        wd, ws, pad, bd, wdl = self.window(ctx)
        d = a.detail
        operand = val(ctx.operands[0])
        cells = d["cells"]
        lines = [f"source_index    = {fmt_index(a.index)}",
                 f"window_position = source_index * window_strides = {fmt_index(a.index)} * {fmt_list(ws)}"
                 f" = {fmt_index(d['window_position'])}",
                 "   (in the operand padded by " + ", ".join(f"({lo}, {hi})" for lo, hi in pad) + ")",
                 f"window: {len(cells)} cells, {sum(c[2] == 'operand' for c in cells)} elements"]
        selected = d["selected"]
        if selected is None:
            lines.append("the window holds only padding: nothing is selected, the source value is dropped")
            return "\n".join(lines)
        sel = _select_name(ctx.attrs["select"])
        lines.append(f"select ({sel}) picks {element('operand', selected)} = {fmt_value(operand[tuple(selected)])}")
        f = combiner_name(ctx.attrs["scatter"], "scatter")
        res, src = element("result", selected), element("source", a.index)
        step = state.get("step")
        if f in ("+", "*"):
            lines.append(f"{res} = {res} {f} {src}")
            if step:
                lines.append(f"   = {fmt_value(step[0])} {f} {fmt_value(step[1])} = {fmt_value(step[2])}")
        else:
            lines.append(f"{res} = {f}({res}, {src})")
            if step:
                lines.append(f"   = {f}({fmt_value(step[0])}, {fmt_value(step[1])}) = {fmt_value(step[2])}")
        earlier = state["written"].get((0, tuple(selected)))
        if earlier is not None:
            lines.append(f"COLLISION: {res} was already chosen at step {earlier[0] + 1} "
                         f"(source {fmt_index(earlier[1])}); scatter combines them")
        else:
            lines.append(f"(every result element starts at init_value = {fmt_value(ctx.operands[2])})")
        return "\n".join(lines)


def _select_name(fn):
    comp = getattr(fn, "computation", None)
    root = getattr(comp, "root", None)
    if root is not None and root.opcode == "compare":
        return root.attrs.get("comparison_direction", "compare")
    return combiner_name(fn, "select")


class ReduceAnimator(_Variadic):
    opcodes = ("reduce",)

    def mark(self, ctx, marks, a, state):
        super().mark(ctx, marks, a, state)
        self.mark_init(ctx, marks)

    def explain(self, ctx, a, state):
        d = a.detail
        n = self._n(ctx)
        names = self.names(ctx)
        operand = val(ctx.operands[0])
        reads = [i for k, i in a.reads if k == 0]
        f = combiner_name(ctx.attrs["computation"], "computation")
        res = element("result" if n == 1 else "result[0]", a.index)
        lines = [f"result_index = {fmt_index(a.index)}",
                 f"dimensions reduced = {list(d['reduced_dimensions'])}, kept = {list(d['kept_dimensions'])}",
                 f"{res} = reduce with {f} over {len(reads)} elements:"]
        lines += _fold_text(f, names[n], ctx.operands[n], [(element(names[0], i), operand[i]) for i in reads],
                            val(ctx.results[0])[tuple(a.index)])
        return "\n".join(lines)


for _animator in (ReduceWindowAnimator(), SelectAndScatterAnimator(), ReduceAnimator()):
    for _opcode in _animator.opcodes:
        registry.register_layer("animation", _opcode, _animator)


class SortAnimator(Animator):
    """Sort and TopK: each result element comes from one position of its row (the
    permutation the reference computed from the keys)."""
    opcodes = ("sort", "topk")

    def operand_names(self, ctx):
        n = len(ctx.operands)
        return ["operand"] if n == 1 else [f"operands[{k}]" for k in range(n)]

    def result_names(self, ctx):
        if ctx.opcode == "topk":
            return ["values", "indices"]
        return super().result_names(ctx)

    def mark(self, ctx, marks, a, state):
        super().mark(ctx, marks, a, state)
        # every result moves the same way (TopK's indices too): this element of each is this step's
        for name in self.result_names(ctx):
            if name != self.domain(ctx):
                marks.elem(name, a.index, "current")

    def explain(self, ctx, a, state):
        d = a.detail
        names = self.names(ctx)
        q, index = d["source_position"], d["operand_index"]
        row = ", ".join(":" if k == (len(a.index) - 1 if ctx.opcode == "topk" else d["dimension"]) else str(i)
                        for k, i in enumerate(a.index))
        if ctx.opcode == "topk":
            which = "largest" if d["largest"] else "smallest"
            return "\n".join([f"result_index = {fmt_index(a.index)}",
                              f"the k={np.shape(ctx.results[0])[-1]} {which} entries of operand[{row}], in order",
                              f"   (equal entries: lower index first)",
                              f"position {d['position']} of them is operand[{row}] position {q}",
                              f"{element('values', a.index)} = {element('operand', index)} = "
                              f"{fmt_value(val(ctx.operands[0])[tuple(index)])}",
                              f"{element('indices', a.index)} = {q}"])
        f = combiner_name(ctx.attrs["comparator"], "comparator")
        lines = [f"result_index = {fmt_index(a.index)}",
                 f"the row {names[0]}[{row}] (dimension {d['dimension']}) sorted by the comparator ({f})",
                 f"position {d['position']} of the sorted row holds position {q} of the operand",
                 "   (every operand moves the same way; equal keys keep their order when stable)"]
        for j, rname in enumerate(self.result_names(ctx)):
            lines.append(f"{element(rname, a.index)} = {element(names[j], index)} = "
                         f"{fmt_value(val(ctx.operands[j])[tuple(index)])}")
        return "\n".join(lines)


registry.register_layer("animation", "sort", SortAnimator())
registry.register_layer("animation", "topk", SortAnimator())
