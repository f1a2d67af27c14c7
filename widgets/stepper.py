"""Steppers: a computation one instruction at a time, an index map one element at a time.

Thin adapters: values come from ``xla_explorer.inspect.instruction_values`` (the
reference executor), steps of an op from its registered index map (through
``xe.animate`` when the animate package is there), graphs from ``xla_explorer.render``.
"""
import itertools

import traitlets
import ipywidgets as w

import xla_explorer as xe
from xla_explorer.inspect import instruction_values

from ._text import (animate_function, format_access, format_diff, format_value, highlight_svg, inline_svg, pre,
                    svg_of)


class _Steps(w.VBox):
    """A slider and a Play button driving the ``step`` traitlet."""

    step = traitlets.Int(0)

    def _controls(self, count, interval=700):
        last = max(count - 1, 0)
        self._slider = w.IntSlider(value=0, min=0, max=last, description="step")
        self._play = w.Play(value=0, min=0, max=last, interval=interval)
        w.jslink((self._play, "value"), (self._slider, "value"))
        w.link((self._slider, "value"), (self, "step"))
        self._count = w.Label()
        return w.HBox([self._play, self._slider, self._count])

    @traitlets.validate("step")
    def _valid_step(self, proposal):
        k, n = proposal["value"], self.n_steps
        if not 0 <= k < max(n, 1):
            raise traitlets.TraitError(f"step {k} is outside 0..{n - 1}")
        return k

    def next(self):
        if self.step + 1 < self.n_steps:
            self.step += 1
        return self

    def previous(self):
        if self.step > 0:
            self.step -= 1
        return self


class StepperWidget(_Steps):
    """Step through the entry computation of ``comp`` run on ``args``, one instruction a step.

    Shows the instruction's HLO line, its operands' and result's values (small arrays in
    full, big ones as shape, min / max / mean and NaN count) and, when ``xla_explorer.render``
    is there, the graph around the instruction, highlighted.  Comparisons:
    ``against="jax"``: every step shows how real XLA's value of that instruction differs
    from the reference's (``comp.diff``); ``against=`` a function of the same arguments
    (or the expected value) and ``backend="numba"`` / ``"cuda"``: the root step shows how
    their results differ from the reference's.

    Traitlets: ``step``; ``instruction`` (the HLO line) and ``value_text`` (read-only).
    """

    instruction = traitlets.Unicode("", read_only=True)
    value_text = traitlets.Unicode("", read_only=True)

    def __init__(self, comp, *args, backend="numpy", against=None, graph=True, **kwargs):
        super().__init__(**kwargs)
        self.comp, self.args = comp, args
        #: {instruction: value} from the reference executor
        self.values = instruction_values(comp, *args)
        self.instructions = list(comp.entry.instructions)
        self.n_steps = len(self.instructions)
        self._lines = _hlo_lines(comp)
        self._comparisons = self._compare(backend, against)
        self._want_graph = graph
        self._instruction = w.HTML()
        self._values = w.HTML()
        self._graph = w.HTML()
        controls = self._controls(self.n_steps)
        self.children = [controls, self._instruction, self._values] + ([self._graph] if graph else [])
        self._show(0)

    def _compare(self, backend, against):
        """Whole-result comparisons shown at the root; ``against="jax"`` is per instruction
        (``comp.diff``: each instruction on XLA, fed the reference's operand values)."""
        out = []
        self.report = None
        if backend != "numpy":
            try:
                out.append((f"backend {backend!r}", self.comp.run(*self.args, backend=backend)))
            except Exception as e:
                out.append((f"backend {backend!r}", e))
        if isinstance(against, str):
            try:
                self.report = self.comp.diff(*self.args, against=against)
            except Exception as e:
                out.append((f"against {against!r}", e))
        elif against is not None:
            try:
                value = against(*self.args) if callable(against) else against
                out.append(("against", tuple(value) if isinstance(value, list) else value))
            except Exception as e:
                out.append(("against", e))
        return out

    @property
    def current(self):
        """The Instruction of the current step."""
        return self.instructions[self.step]

    @traitlets.observe("step")
    def _on_step(self, change):
        self._show(change["new"])

    def _show(self, k):
        inst = self.instructions[k]
        line = self._lines.get(inst) or _print(inst)
        self.set_trait("instruction", line)
        self.set_trait("value_text", self._value_text(inst))
        self._count.value = f"{k + 1} / {self.n_steps}  {inst.name}"
        self._instruction.value = pre(line)
        self._values.value = pre(self.value_text)
        if self._want_graph:
            self._graph.value = self._graph_html(inst)

    def _value_text(self, inst):
        parts = []
        if inst.opcode == "parameter":
            parts.append(f"argument {inst.attrs.get('parameter_number')}")
        elif inst.operands:
            parts.append("operands:")
            parts.extend(_indent(format_value(self.values[o], o.name)) for o in inst.operands)
        parts.append("result:")
        parts.append(_indent(format_value(self.values[inst], inst.name)))
        if self.report is not None and inst.opcode != "parameter":  # arguments are the same on both sides
            parts.append(_diff_row_text(self.report, inst))
        if inst is self.comp.entry.root:
            for label, value in self._comparisons:
                if isinstance(value, Exception):
                    parts.append(f"{label}: failed: {type(value).__name__}: {value}")
                else:
                    parts.append(format_diff(self.values[inst], value, label))
        return "\n".join(parts)

    def _graph_html(self, inst):
        """The graph around the current instruction, it glowing, with the run's values."""
        if not hasattr(self.comp, "graph"):
            return pre("graph: xla_explorer.render is not available")
        try:
            graph = self.comp.graph(values=self.values, around=inst.name)
            svg = svg_of(graph)
            if svg and hasattr(graph, "node"):
                svg = highlight_svg(svg, graph.node(inst.name).id)
        except Exception as e:  # no `dot` program, ...: say so, the rest works
            return pre(f"graph: could not render ({type(e).__name__}: {e})")
        return inline_svg(svg) if svg else pre("graph: the renderer returned nothing to show")


class IndexMapStepper(_Steps):
    """One step of an op's index map at a time: which elements a result element reads.

    ``IndexMapStepper(comp, "gather.1", *args)`` or ``IndexMapStepper("pad", operand,
    padding_value, padding_config=...)``, as ``xe.index_map``.  With the animate package
    it wraps ``xe.animate(...).stepper()`` (the pictures) and adds the text of each step;
    without it, the text alone.  At most ``max_steps`` steps are listed.

    Traitlets: ``step``; ``access_text`` (read-only): the step's reads, writes,
    clamped / skipped and the spec's intermediate indices.
    """

    access_text = traitlets.Unicode("", read_only=True)

    def __init__(self, target, instruction=None, *args, max_steps=200, use_animation=True, **attrs):
        super().__init__()
        #: the op's IndexMap (from the library: ``xe.index_map``)
        self.index_map = xe.index_map(target, instruction, *args, **attrs)
        self.operand_names, self.result_name = _names(target, instruction, self.index_map)
        self.animation, note = None, ""
        if use_animation:
            self.animation, note = _animation(target, instruction, args, attrs)
        if self.animation is not None:
            self.accesses = [f.access for f in self.animation.frames]
            self.explanations = [f.text for f in self.animation.frames]
        else:
            self.accesses = list(itertools.islice(iter(self.index_map), max_steps))
            self.explanations = [""] * len(self.accesses)
        self.n_steps = len(self.accesses)
        total = len(self.index_map)
        self._text = w.HTML()
        controls = self._controls(self.n_steps)
        head = f"{self.index_map!r}" + (f": the first {self.n_steps} of {total} steps" if total > self.n_steps else "")
        children = [w.HTML(pre(head + (f"\n{note}" if note else "")))]
        if self.animation is not None:
            try:
                box = self.animation.stepper()
                w.link((box.slider, "value"), (self, "step"))
                children.append(box)
            except Exception as e:  # no matplotlib backend, ...: the text still works
                children.append(w.HTML(pre(f"(animation stepper unavailable: {type(e).__name__}: {e})")))
                children.append(controls)
        else:
            children.append(controls)
        self.children = children + [self._text]
        self._show(0)

    @traitlets.observe("step")
    def _on_step(self, change):
        self._show(change["new"])

    @property
    def access(self):
        """The ``Access`` of the current step."""
        return self.accesses[self.step] if self.accesses else None

    def _show(self, k):
        if not self.accesses:
            self.set_trait("access_text", "(the index map has no steps: an empty domain)")
        else:
            text = format_access(self.accesses[k], self.operand_names, self.result_name,
                                 None if self.index_map.domain == "result" else self.index_map.domain,
                                 detail=not self.explanations[k])
            if self.explanations[k]:
                text = self.explanations[k] + "\n" + text
            self.set_trait("access_text", text)
            self._count.value = f"{k + 1} / {self.n_steps}"
        self._text.value = pre(self.access_text)


def _diff_row_text(report, inst):
    row = report.by_instruction().get(inst.name)
    label = f"{report.backend} vs {report.against}"
    if row is None:
        return f"{label}: not compared"
    if row.status in ("error", "skipped"):
        return f"{label}: {row.status} {row.note}".rstrip()
    text = (f"{label}: {row.status}; max |difference| {row.max_abs:.3g}, "
            f"{row.count} of {row.size} elements beyond tolerance")
    if row.indices:
        text += "; first at " + ", ".join(str(list(i)) for i in row.indices[:3])
    return text


def _names(target, instruction, imap):
    """Names for the operands and the result in the step texts."""
    from xla_explorer.computation import XlaComputation
    if isinstance(target, XlaComputation):
        inst = target.instruction(instruction)
        return [o.name for o in inst.operands], inst.name
    import inspect
    from xla_explorer.ops import registry
    from ._text import op_function
    ops = registry.all_ops()
    opdef = ops[target] if target in ops else registry.by_name(target)
    fn = op_function(opdef)
    names = []
    if fn is not None:
        names = [p.name for p in inspect.signature(fn).parameters.values()
                 if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name != "builder"]
    return names[:len(imap.operand_shapes)] if imap.operand_shapes else names, "result"


def _animation(target, instruction, args, attrs):
    fn = animate_function()
    if fn is None:
        return None, "(xla_explorer.animate is not available: the steps are shown as text)"
    try:
        return fn(target, instruction, *args, **attrs), ""
    except Exception as e:
        return None, f"(no animation: {type(e).__name__}: {e}; the steps are shown as text)"


def _hlo_lines(comp):
    """{instruction: its line of the module's HLO text} for the entry computation."""
    lines, inside = [], False
    for line in comp.as_hlo_text().splitlines():
        if line.startswith("ENTRY "):
            inside = True
        elif inside and line.strip() == "}":
            break
        elif inside:
            lines.append(line.strip())
    insts = comp.entry.instructions
    return dict(zip(insts, lines)) if len(lines) == len(insts) else {}


def _print(inst):
    from xla_explorer.hlo.printer import print_instruction
    return print_instruction(inst)


def _indent(text):
    return "\n".join("  " + line for line in text.splitlines())
