"""Steppers: a run one instruction at a time (a debugger), an index map one element at a time.

Thin adapters: the run's records (every invocation of every instruction, nested
computations included) come from ``comp.trace`` (the reference executor), XLA's values
from ``xla_explorer.diff``, steps of an op from its registered index map (through
``xe.animate`` when the animate package is there), graphs from ``xla_explorer.render``.
"""
import html
import itertools
from collections import Counter

import numpy as np
import traitlets
import ipywidgets as w

import xla_explorer as xe
from xla_explorer.errors import quote

from ._text import (animate_function, call_with_accepted, format_access, format_diff, format_value, highlight_svg,
                    pre, scrolled_svg, svg_of, value_html)

RED = "#b00020"


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


class StepperWidget(w.VBox):
    """A debugger over one run of ``comp`` on ``args``: every instruction of every
    computation, every invocation, from the run's trace (``comp.trace``).

    ``step()`` goes to the next instruction of the current computation (over calls and
    loops; at the end of a body, back to its caller), ``step_into()`` into what the
    current instruction runs (a call, a fusion, the taken branch of a conditional, a
    while loop's body -- ``step_into(iteration=k)`` its k-th iteration --, a reduce's or
    sort's body), ``step_out()`` to the caller, ``run_to(name)`` (``invocation=k``) to
    the next execution of an instruction, ``continue_()`` to the next ``breakpoints``
    entry (``"add.3"``, or ``"add.3#2"`` for one invocation), ``step_back()`` to where
    the last command came from, ``restart()``.  Commands that cannot go anywhere leave
    the position and say why in ``error`` (beside the control, in the widget).

    Shows the call stack (``location``: ``[(computation, instruction, invocation), ...]``,
    entry first), the instruction's HLO line, its operands' and result's values (``value``)
    and the graph of the computation it is in, the instruction glowing, with the values
    this call has computed so far.  ``against="jax"`` (the default when jax is installed):
    each value is compared with XLA's for the same instruction on the same operand values
    (``xla_explorer.diff``) and the elements that differ are marked in red, XLA's value on
    hover.  ``against=`` a function of the same arguments (or the expected value) and
    ``backend="numba"`` / ``"cuda"`` compare the whole result at the entry's root.

    Traitlets: ``position`` (the record number in the trace; the timeline slider),
    ``breakpoints``; read-only ``instruction``, ``value_text``, ``location_text``,
    ``compare_text``, ``error``, ``error_control``.
    """

    position = traitlets.Int(0)
    breakpoints = traitlets.List(traitlets.Unicode())
    instruction = traitlets.Unicode("", read_only=True)
    value_text = traitlets.Unicode("", read_only=True)
    location_text = traitlets.Unicode("", read_only=True)
    compare_text = traitlets.Unicode("", read_only=True)
    error = traitlets.Unicode("", read_only=True)
    error_control = traitlets.Unicode("", read_only=True)

    def __init__(self, comp, *args, against="auto", backend="numpy", graph=True, radius=2, keep=None,
                 max_bytes=None, **kwargs):
        super().__init__(**kwargs)
        self.comp, self.args = comp, args
        self.run_error = None
        try:
            self.trace = comp.trace(*args, keep=keep, max_bytes=max_bytes)
        except Exception as e:  # a run that fails is still stepped up to the failure
            partial = getattr(e, "trace", None)
            if partial is None or not partial.records:
                raise
            self.trace, self.run_error = partial, e
        self.records = self.trace.records
        if not self.records:
            raise ValueError(f"{comp.name}: the run recorded no instruction")
        self._index_records()
        self._lines = _hlo_lines_all(comp)
        self._history = []
        self._diffs = {}
        self.radius = radius
        self._want_graph = graph
        self.against = _resolve_against(against)
        self._comparisons = self._compare(backend, against if not isinstance(against, str) else None)
        self._build_ui()
        self._show(0)

    # -- the trace, indexed for moving around ----------------------------------------------

    def _index_records(self):
        """children of each record, in order; the call (frame) each record belongs to and
        which iteration (k-th call of that computation by that caller) it is."""
        self._kids = {}
        frame_of, open_frames, iteration, frames = {}, {}, Counter(), {}
        self._rank = {}  # seq -> its place among its caller's records (a step is O(1) in long loops)
        for r in self.records:
            kids = self._kids.setdefault(r.parent, [])
            self._rank[r.seq] = len(kids)
            kids.append(r.seq)
            key = (r.parent, r.computation)
            f = open_frames.get(key)
            if f is None or r.name in f[1]:  # each instruction runs once per call: a repeat is a new call
                f = (len(frames), set(), iteration[key])
                iteration[key] += 1
                open_frames[key] = f
                frames[f[0]] = []
            f[1].add(r.name)
            frame_of[r.seq] = f
            frames[f[0]].append(r.seq)
        self._frame_of, self._frames = frame_of, frames
        self.n_records = len(self.records)

    @property
    def record(self):
        """The TraceRecord of the current position."""
        return self.records[self.position]

    @property
    def current(self):
        """The Instruction of the current position."""
        return self.record.instruction

    @property
    def location(self):
        """The call stack, entry first: ``[(computation, instruction, invocation), ...]``."""
        return [tuple(f) for f in self.record.location]

    @property
    def value(self):
        """The current instruction's value (None if the trace did not keep it)."""
        return self.record.value

    def iteration(self, record=None):
        """Which call of its computation by its caller a record belongs to (a loop's iteration)."""
        rec = self.record if record is None else record
        return self._frame_of[rec.seq][2]

    # -- commands ---------------------------------------------------------------------------

    def _go(self, seq, control=""):
        self._clear_error()
        if seq != self.position:
            self._history.append(self.position)
            self.position = seq
        return self

    def _refuse(self, message, control):
        self.set_trait("error", message)
        self.set_trait("error_control", control)
        for label in self._error_labels.values():
            label.value = ""
        self._error_labels[control].value = pre(message, RED)
        return self

    def _clear_error(self):
        if self.error:
            self.set_trait("error", "")
            self.set_trait("error_control", "")
            for label in self._error_labels.values():
                label.value = ""

    def step(self):
        """The next instruction of this computation (calls run over); at the end of a
        call, the instruction after the one that made it (a loop's next iteration first)."""
        rec = at = self.record
        while True:  # at the end of a call: on after the instruction that made it, as a debugger does
            siblings = self._kids[at.parent]
            k = self._rank[at.seq]
            if k + 1 < len(siblings):
                return self._go(siblings[k + 1])
            if at.parent is None:
                break
            at = self.records[at.parent]
        return self._refuse(f"{rec.name} is the last instruction the run executed"
                            + (f" (it failed: {self.run_error})" if self.run_error else "")
                            + "; step_back() or restart()", "step")

    def step_into(self, iteration=None):
        """Into what the current instruction runs: its first instruction (a while loop: its
        body, at ``iteration`` -- default the first; a conditional: the taken branch).  An
        instruction that runs no computation: the same as ``step()``."""
        rec = self.record
        kids = self._kids.get(rec.seq, [])
        if not kids:
            if iteration is not None:
                return self._refuse(f"{rec.name} ({rec.opcode}) runs no computation: no iteration "
                                    f"{iteration} to step into", "step into")
            return self.step()
        target = kids[0]
        if rec.opcode == "while":
            body = rec.instruction.attrs["body"].name
            starts = [s for s in kids if self.records[s].computation == body and
                      self._frames[self._frame_of[s][0]][0] == s]
            if iteration is not None:
                if not 0 <= iteration < len(starts):
                    return self._refuse(f"{rec.name}#{rec.invocation} ran its body {len(starts)} time(s): "
                                        f"iteration is 0..{len(starts) - 1}, not {iteration}", "step into")
                target = starts[iteration]
            elif starts:
                target = starts[0]
        elif iteration is not None:
            calls = [s for s in kids if self._frames[self._frame_of[s][0]][0] == s]
            if not 0 <= iteration < len(calls):
                return self._refuse(f"{rec.name}#{rec.invocation} made {len(calls)} call(s): "
                                    f"iteration is 0..{len(calls) - 1}, not {iteration}", "step into")
            target = calls[iteration]
        return self._go(target)

    def step_out(self):
        """Back to the instruction that called the current computation (its value complete)."""
        rec = self.record
        if rec.parent is None:
            return self._refuse(f"{rec.name} is in the entry computation {rec.computation}: there is "
                                "nothing to step out to", "step out")
        return self._go(rec.parent)

    def step_back(self):
        """Back to the position before the last command."""
        if not self._history:
            return self._refuse("nothing to go back to", "back")
        seq = self._history.pop()
        self._clear_error()
        self.position = seq
        return self

    def restart(self):
        """Back to the first instruction of the run."""
        return self._go(0)

    def run_to(self, name, invocation=None):
        """To the next execution of instruction ``name`` after here (or to its
        ``invocation``-th execution, wherever it is)."""
        try:
            if invocation is not None:
                return self._go(self.trace.get(name, invocation).seq)
            ran = self.trace.invocations(name)
        except KeyError as e:
            return self._refuse(str(e).strip('"'), "run to")
        after = [r.seq for r in ran if r.seq > self.position]
        if not after:
            n = self.trace.count(name)
            return self._refuse(f"{name} does not run after here: it ran {n} time(s)"
                                + (", all before this position; restart() or run_to(name, invocation=k)" if n
                                   else f" ({self.trace._why_not_run(self.trace._computation_of(self.comp.instruction(name)))})"),
                                "run to")
        return self._go(after[0])

    def continue_(self):
        """To the next instruction in ``breakpoints`` (``"name"`` or ``"name#invocation"``);
        with none ahead, to the end of the run."""
        wanted = set(self.breakpoints)
        for r in self.records[self.position + 1:]:
            if r.name in wanted or f"{r.name}#{r.invocation}" in wanted:
                return self._go(r.seq)
        last = self._kids[None][-1]
        if last == self.position:
            return self._refuse("no breakpoint ahead, and this is the end of the run", "continue")
        self._go(last)
        self.set_trait("error", "")
        return self

    def toggle_breakpoint(self, name=None):
        """Add (or remove) a breakpoint at ``name`` (default: the current instruction)."""
        name = name or self.record.name
        self.breakpoints = [b for b in self.breakpoints if b != name] if name in self.breakpoints \
            else list(self.breakpoints) + [name]
        return self

    @traitlets.validate("position")
    def _valid_position(self, proposal):
        k = proposal["value"]
        if not 0 <= k < self.n_records:
            raise traitlets.TraitError(f"position {k} is outside 0..{self.n_records - 1} (the run has "
                                       f"{self.n_records} records)")
        return k

    @traitlets.validate("breakpoints")
    def _valid_breakpoints(self, proposal):
        for b in proposal["value"]:
            name, _, inv = b.partition("#")
            try:
                self.trace._check_name(name)
            except KeyError as e:
                raise traitlets.TraitError(f"breakpoint {quote(b)}: {str(e).strip(chr(34))}") from None
            if inv and not inv.isdigit():
                raise traitlets.TraitError(f"breakpoint {quote(b)}: after '#' comes an invocation number, got {quote(inv)}")
        return list(proposal["value"])

    @traitlets.observe("position")
    def _on_position(self, change):
        self._show(change["new"])

    # -- the comparisons ----------------------------------------------------------------------

    def _compare(self, backend, against):
        """Whole-result comparisons shown at the entry's root (backends, a function)."""
        out = []
        if backend != "numpy":
            try:
                out.append((f"backend {backend!r}", self.comp.run(*self.args, backend=backend)))
            except Exception as e:
                out.append((f"backend {backend!r}", e))
        if against is not None:
            try:
                value = against(*self.args) if callable(against) else against
                out.append(("against", tuple(value) if isinstance(value, list) else value))
            except Exception as e:
                out.append(("against", e))
        return out

    def diff_row(self, record=None):
        """XLA's value of the record's instruction on the same operand values, compared: a
        ``DiffRow`` (None without jax, for a parameter, or when the values were not kept)."""
        rec = self.record if record is None else record
        if self.against != "jax" or rec.opcode == "parameter" or not rec.kept:
            return None
        if rec.seq not in self._diffs:
            from xla_explorer.diff import DiffRow, diff_instruction
            try:
                if _batched(rec):
                    caller = self.records[rec.parent]
                    raise ValueError(f"an element-wise body run on whole arrays (its values are arrays, its "
                                     f"shape says {rec.shape}): compared through {caller.name}, which calls it")
                operands = self.trace.operand_values(rec.name, rec.invocation)
            except Exception as e:  # operands not kept, or a batched body
                row = DiffRow(rec.name, rec.opcode, rec.shape, "skipped", note=str(e))
            else:
                row = diff_instruction(rec.instruction, operands, rec.value, module=self.comp)
            self._diffs[rec.seq] = row
        return self._diffs[rec.seq]

    # -- the view -------------------------------------------------------------------------------

    def _build_ui(self):
        def button(label, tip, fn, icon=""):
            b = w.Button(description=label, tooltip=tip, icon=icon, layout=w.Layout(width="auto"))
            b.on_click(lambda _: fn())
            return b
        self._buttons = {
            "restart": button("restart", "back to the first instruction", self.restart, "fast-backward"),
            "back": button("back", "where the last command came from", self.step_back, "undo"),
            "step": button("step", "the next instruction here (over calls and loops)", self.step, "step-forward"),
            "step into": button("step into", "into the call / loop body / taken branch / fusion",
                                self.step_into, "sign-in"),
            "step out": button("step out", "back to the calling instruction", self.step_out, "sign-out"),
            "continue": button("continue", "to the next breakpoint", self.continue_, "play"),
        }
        self._slider = w.IntSlider(value=0, min=0, max=self.n_records - 1, description="record",
                                   continuous_update=False, layout=w.Layout(width="420px"))
        self._play = w.Play(value=0, min=0, max=self.n_records - 1, interval=700)
        w.jslink((self._play, "value"), (self._slider, "value"))
        w.link((self._slider, "value"), (self, "position"))
        names = list(dict.fromkeys(r.name for r in self.records))
        self._run_to = w.Combobox(options=names, placeholder="instruction name, Enter runs to it",
                                  description="run to", ensure_option=False, continuous_update=False)
        self._run_to.observe(self._on_run_to, names="value")
        self._breaks = w.TagsInput(value=[], allow_duplicates=False, tooltip="name, or name#invocation")
        self._breaks.observe(self._on_breaks, names="value")
        self._toggle = button("breakpoint here", "toggle a breakpoint at the current instruction",
                              self.toggle_breakpoint, "circle")
        # the buttons share one line for their refusals, right under them
        commands = w.HTML()
        commands.add_class("xe-error-commands")
        self._error_labels = {k: commands for k in ("restart", "step", "step into", "step out", "back", "continue")}
        self._error_labels.update({k: w.HTML() for k in ("run to", "breakpoints")})
        self._location = w.HTML()
        self._instruction = w.HTML()
        self._values = w.HTML()
        self._graph = w.HTML()
        # CSS classes: what browser tests (and a notebook's own styles) find the parts by
        self.add_class("xe-stepper")
        for part, cls in ((self._location, "xe-location"), (self._instruction, "xe-instruction"),
                          (self._values, "xe-values"), (self._graph, "xe-graph"), (self._run_to, "xe-run-to"),
                          (self._breaks, "xe-breakpoints")):
            part.add_class(cls)
        for name, label in self._error_labels.items():
            label.add_class("xe-error")
            if label is not commands:
                label.add_class("xe-error-" + name.replace(" ", "-"))
        row1 = w.HBox(list(self._buttons.values()))
        self.children = [
            row1, commands, w.HBox([self._play, self._slider]),
            w.HBox([self._run_to, self._error_labels["run to"]]),
            w.HBox([w.Label("breakpoints"), self._breaks, self._toggle, self._error_labels["breakpoints"]]),
            self._location, self._instruction, self._values,
        ] + ([self._graph] if self._want_graph else [])

    def _on_breaks(self, change):
        """Tags typed in the box: kept when they name instructions, else refused beside it."""
        if list(change["new"]) == list(self.breakpoints):
            return
        try:
            self.breakpoints = list(change["new"])
        except traitlets.TraitError as e:
            self._refuse(str(e), "breakpoints")
            self._breaks.value = list(self.breakpoints)

    @traitlets.observe("breakpoints")
    def _on_breakpoints(self, change):
        if list(self._breaks.value) != list(change["new"]):
            self._breaks.value = list(change["new"])
        if self.error_control == "breakpoints":
            self._clear_error()

    def _on_run_to(self, change):
        text = (change["new"] or "").strip()
        if not text:
            return
        name, _, inv = text.partition("#")
        if inv and not inv.isdigit():
            self._refuse(f"run to {quote(text)}: after '#' comes an invocation number", "run to")
        else:
            self.run_to(name, int(inv) if inv else None)
        self._run_to.value = ""

    def _show(self, k):
        rec = self.records[k]
        line = self._lines.get(rec.instruction) or _print(rec.instruction)
        self.set_trait("instruction", line)
        self.set_trait("location_text", self._location_text(rec))
        row = self.diff_row(rec)
        self.set_trait("compare_text", _diff_text(row, self.against) if row is not None else "")
        self.set_trait("value_text", self._value_text(rec, row))
        if self._slider.value != k:
            self._slider.value = k
        self._location.value = self._location_html(rec)
        self._instruction.value = pre(line)
        self._values.value = self._values_html(rec, row)
        if self._want_graph:
            self._graph.value = self._graph_html(rec)

    def _location_text(self, rec):
        parts = [f"{comp}: {name}#{inv}" for comp, name, inv in rec.location]
        frame = self._frame_of[rec.seq]
        if rec.parent is not None:
            caller = self.records[rec.parent]
            what = "iteration" if caller.opcode == "while" else "call"
            parts[-1] += f"  ({what} {frame[2]} of {rec.computation} by {caller.name}#{caller.invocation})"
        return "  ›  ".join(parts)

    def _location_html(self, rec):
        frames = list(rec.location)
        cells = []
        for k, (comp, name, inv) in enumerate(frames):
            last = k == len(frames) - 1
            style = f"font-weight:bold; color:{_highlight_colour()}" if last else "color:#444"
            cells.append(f"<span style='{style}'>{html.escape(comp)}: {html.escape(name)}"
                         f"<sub>#{inv}</sub></span>")
        step = f"record {rec.seq} of 0..{self.n_records - 1}"  # as the slider counts
        if rec.parent is not None:
            caller = self.records[rec.parent]
            what = "iteration" if caller.opcode == "while" else "call"
            step += f" · {what} {self.iteration(rec)} of {html.escape(rec.computation)}"
        if _batched(rec):
            step += " · element-wise body run on whole arrays (values are arrays)"
        return (f"<div style='font-size:13px'>{' &nbsp;›&nbsp; '.join(cells)}"
                f"<br><small style='color:#666'>{step}</small></div>")

    def _value_text(self, rec, row):
        parts = []
        inst = rec.instruction
        if inst.opcode == "parameter":
            n = inst.attrs.get("parameter_number")
            if rec.parent is None:
                parts.append(f"argument {n}")
            else:
                caller = self.records[rec.parent]
                parts.append(f"parameter {n} of {rec.computation}, from {caller.name}#{caller.invocation}")
        elif inst.operands:
            parts.append("operands:")
            try:
                values = self.trace.operand_values(rec.name, rec.invocation)
            except Exception as e:
                parts.append("  " + str(e))
            else:
                parts.extend(_indent(format_value(v, o.name)) for o, v in zip(inst.operands, values))
        parts.append("result:")
        parts.append(_indent(format_value(rec.value, inst.name) if rec.kept else
                             f"{inst.name}: not kept ({self.trace._not_kept(rec)})"))
        if row is not None:
            parts.append(_diff_text(row, self.against))
        return "\n".join(parts + self._notes(rec))

    def _notes(self, rec):
        """The whole-result comparisons (at the entry's root) and the run's failure (at its end)."""
        out = []
        if rec.parent is None and rec.instruction is self.comp.entry.root:
            for label, value in self._comparisons:
                if isinstance(value, Exception):
                    out.append(f"{label}: failed: {type(value).__name__}: {value}")
                else:
                    out.append(format_diff(rec.value, value, label))
        if self.run_error is not None and rec.seq == self.n_records - 1:
            out.append(f"the run failed here: {type(self.run_error).__name__}: {self.run_error}")
        return out

    def _values_html(self, rec, row):
        inst = rec.instruction
        blocks = []
        if inst.opcode != "parameter" and inst.operands:
            try:
                values = self.trace.operand_values(rec.name, rec.invocation)
            except Exception:
                values = None
            if values is not None:
                cells = "".join(f"<div style='margin-right:16px'>{value_html(v, o.name)}</div>"
                                for o, v in zip(inst.operands, values))
                blocks.append(f"<div><b>operands</b><div style='display:flex; flex-wrap:wrap'>{cells}</div></div>")
        if rec.kept:
            got, want = rec.value, (row.want if row is not None and row.status in ("ok", "mismatch") else None)
            blocks.append(f"<div><b>result</b>{value_html(got, inst.name, want=want, shape=inst.shape)}</div>")
        else:
            blocks.append(pre(f"{inst.name}: not kept ({self.trace._not_kept(rec)})"))
        if row is not None:
            colour = {"ok": "#1a7f37", "mismatch": RED}.get(row.status, "#8a6d00")
            blocks.append(pre(_diff_text(row, self.against), colour))
        if self._notes(rec):
            blocks.append(pre("\n".join(self._notes(rec))))
        return "<div style='font-size:12px'>" + "".join(blocks) + "</div>"

    def _frame_values(self, rec):
        """{instruction: value} of the current call, as far as it has run."""
        seqs = self._frames[self._frame_of[rec.seq][0]]
        return {self.records[s].instruction: self.records[s].value for s in seqs
                if s <= rec.seq and self.records[s].kept and not _batched(self.records[s])}

    def _graph_html(self, rec):
        """The graph of the computation the instruction is in, around it, it glowing."""
        try:
            from xla_explorer.render import graph_of
        except ImportError:
            return pre("graph: xla_explorer.render is not available")
        try:
            comp = self.comp.computation(rec.computation)
            target = self.comp if comp is self.comp.entry else comp
            where = f"{rec.computation}" + (f" (call {self.iteration(rec)})" if rec.parent is not None else "")
            graph = call_with_accepted(graph_of, target, values=self._frame_values(rec), around=rec.name,
                                       radius=self.radius, title=where, highlight=[rec.name])
            svg = svg_of(graph)
            if svg and hasattr(graph, "node"):  # the renderer's "where am I" border, and a glow around it
                svg = highlight_svg(svg, graph.node(rec.name).id, _highlight_colour())
        except Exception as e:  # no `dot` program, ...: say so, the rest works
            return pre(f"graph: could not render ({type(e).__name__}: {e})")
        return scrolled_svg(svg) if svg else pre("graph: the renderer returned nothing to show")


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


def _highlight_colour():
    """The renderer's colour for "where am I" (one colour, one meaning, in every picture)."""
    try:
        from xla_explorer.render.dot import HIGHLIGHT
        return HIGHLIGHT
    except ImportError:
        return "#ff6d00"


def _batched(rec):
    """An element-wise body run on whole arrays (its value kept): values shaped unlike the
    instruction."""
    if not rec.batched:
        return False
    shape = rec.shape
    return not shape.is_tuple and not shape.is_token and rec.kept and \
        np.shape(rec.value) != tuple(shape.dims)


def _resolve_against(against):
    """"jax" (per instruction, against XLA) or None; "auto": "jax" when jax is installed."""
    if against == "auto":
        import importlib.util
        return "jax" if importlib.util.find_spec("jax") is not None else None
    if isinstance(against, str) and against != "jax":
        raise ValueError(f"against={against!r}: the per-instruction oracle is 'jax' (or a function of the "
                         "arguments, or the expected value)")
    return against if isinstance(against, str) else None


def _diff_text(row, against):
    label = f"numpy vs {against}"
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


def _hlo_lines_all(comp):
    """{instruction: its line of the module's HLO text}, every computation."""
    from xla_explorer.hlo.ir import computation_closure
    blocks, current = [], None
    for line in comp.as_hlo_text().splitlines():
        if line.endswith("{") and not line.startswith(" ") and not line.startswith("HloModule"):
            current = []
            blocks.append(current)
        elif line.strip() == "}":
            current = None
        elif current is not None and line.strip():
            current.append(line.strip())
    out = {}
    for c, lines in zip(computation_closure(comp.entry), blocks):
        if len(lines) == len(c.instructions):
            out.update(zip(c.instructions, lines))
    return out


def _print(inst):
    from xla_explorer.hlo.printer import print_instruction
    return print_instruction(inst)


def _indent(text):
    return "\n".join("  " + line for line in text.splitlines())
