"""``OpPlayground``: one op, a control per argument, the result re-inferred on every change.

A thin adapter over ``xla_explorer.playground.OpCall`` (the model: argument values, the
build, the error and the argument it is about, what would be legal, the run on the NumPy
reference).  The controls come from the op's argument description
(``xla_explorer.ops.arguments``), the graph from ``xla_explorer.render``, the index map
from ``xe.index_map_view`` (or the index-map stepper where that is not there).
"""
import html
import inspect

import ipywidgets as w
import traitlets

import xla_explorer as xe
from xla_explorer.ops import arguments as op_arguments
from xla_explorer.ops import registry
from xla_explorer.playground import DEFAULT, RECORDED_BY, OpCall, buildable

from ._controls import ERROR_RED, ParseFailure, css, label_width, make_control, set_value
from ._text import format_value, pre, scrolled_svg, svg_of, value_html


class OpPlayground(w.VBox):
    """Play with one op: ``OpPlayground("Gather")``, ``OpPlayground("pad", padding_config=...)``.

    Every argument of the op's function has a control (``.controls[name]``, its
    ``description`` the argument's name; ``.inputs[name]`` the array operands): a shape and
    a value source per operand, a dropdown per enum, dtype or sub-computation, one box per
    dimension for windows, strides, paddings and dimension numbers.  Each change rebuilds
    the call: ``.shape_text`` is the result shape, or ``.error`` the rule it breaks, shown
    beside the control ``.error_control`` names with what would be legal there; the values
    (``.result``), the HLO, the graph and the index map follow.

    A While's ``condition`` and ``body`` are Python expressions of the loop state ``x``
    (``x[0] < 10``, ``(x[0] + 1, x[1] * 2)`` for a tuple state): presets to pick, any
    expression to type.  A collective runs on as many simulated devices as its replica
    groups name, one operand value per device: ``.result`` is the list of the devices'
    results, the values tab has a column per device, the index map shows every device.

    ``.call`` is the model (``xla_explorer.playground.OpCall``), ``.computation`` the
    computation built, ``.outcome`` the last build.
    """

    op = traitlets.Unicode("")
    shape_text = traitlets.Unicode("", read_only=True)
    error = traitlets.Unicode("", read_only=True)
    error_control = traitlets.Unicode("", read_only=True)
    #: what would make the call legal ("legal here: slice_sizes[1] = 0..4"), when found
    legal = traitlets.Unicode("", read_only=True)
    result = traitlets.Any(None, read_only=True, allow_none=True)
    result_text = traitlets.Unicode("", read_only=True)
    hlo = traitlets.Unicode("", read_only=True)

    def __init__(self, op="Gather", graph=True, index_map=True, **values):
        super().__init__()
        self.add_class("xe-playground")
        self._show_graph, self._show_index_map = graph, index_map
        self.controls, self.inputs = {}, {}
        self._errors = {}  # argument name -> the HTML beside its control
        self._syncing = False
        self.call, self.outcome = None, None
        self._pending = dict(values)
        names = sorted({opdef.name for oc, opdef in registry.all_ops().items() if buildable(oc) is True})
        self._op = w.Dropdown(options=names, description="op", layout=w.Layout(width="22em"))
        self._op.observe(lambda ch: setattr(self, "op", ch["new"]), names="value")
        self._signature = w.HTML()
        self._operand_box, self._attr_box = w.VBox(), w.VBox()
        self._shape = w.HTML()
        self._shape.add_class("xe-shape")
        self._general_error = w.HTML()
        self._general_error.add_class("xe-error")
        self._values, self._hlo, self._graph, self._index = w.HTML(), w.HTML(), w.HTML(), w.VBox()
        self._tabs = w.Tab(children=[self._values, self._hlo, self._graph, self._index])
        for k, title in enumerate(("values", "HLO", "graph", "index map")):
            self._tabs.set_title(k, title)
        self.children = [css(), w.HBox([self._op]), self._signature,
                         w.HTML("<b>operands</b>"), self._operand_box,
                         w.HTML("<b>attributes</b>"), self._attr_box,
                         self._shape, self._general_error, self._tabs]
        self.op = op

    # -- the op ----------------------------------------------------------------------------

    @traitlets.validate("op")
    def _valid_op(self, proposal):
        try:
            opdef = op_arguments._opdef(proposal["value"])
        except NotImplementedError as e:
            raise traitlets.TraitError(str(e)) from None
        ok = buildable(opdef.opcode)
        if ok is not True:
            raise traitlets.TraitError(f"the playground cannot build {opdef.name}: {ok}")
        return opdef.name

    @traitlets.observe("op")
    def _on_op(self, change):
        values, self._pending = self._pending, {}
        self.call = OpCall(change["new"], **values)
        if self._op.value != change["new"]:
            self._op.value = change["new"]
        self._signature.value = _signature_html(self.call)
        self._make_controls()
        self._refresh()

    def _make_controls(self):
        self.controls, self.inputs, self._errors = {}, {}, {}
        operand_rows, attr_rows = [], []
        # one label column for all the controls, as wide as the longest name ("operands[0]" too)
        width = label_width([a.name + ("[0]" if a.kind in ("arrays", "scalars") else "") for a in self.call.args])
        self._op.style.description_width = width
        self._op.layout.width = f"calc({width} + 14em)"
        for arg in self.call.args:
            ctl = make_control(arg, self.call.values.get(arg.name), self.call.choices(arg), width)
            ctl.add_class(f"xe-arg-{arg.name}")
            ctl.observe(lambda ch, name=arg.name: self._on_control(name, ch["new"]), names="value")
            self.controls[arg.name] = ctl
            err = w.HTML(layout=w.Layout(margin=f"0 0 0 calc({width} + 10px)"))
            err.add_class("xe-error")
            self._errors[arg.name] = err
            row = w.VBox([ctl, err])
            row.add_class("xe-row")
            if arg.kind in op_arguments.OPERAND_KINDS:
                self.inputs[arg.name] = ctl
                operand_rows.append(row)
            else:
                attr_rows.append(row)
        self._operand_box.children = operand_rows or [w.HTML("<i>(none)</i>")]
        self._attr_box.children = attr_rows or [w.HTML("<i>(none)</i>")]

    # -- a change --------------------------------------------------------------------------

    def _on_control(self, name, value):
        if self._syncing:
            return
        if isinstance(value, ParseFailure):
            self._show_failure(name, f"{self.call.name}: {name}: {value.message}")
            return
        try:
            changed = self.call.set(name, value)
        except Exception as e:  # a value the model refuses: shown beside the control
            self._show_failure(name, str(e))
            return
        # the controls the model changed (the one edited too, when the model completed it)
        self._sync_options()
        self._sync({n for n in changed if n != name or self.call.values[n] != value})
        self._refresh()

    def _sync(self, names):
        """Show the model's values in the controls it changed (per-dimension lengths...)."""
        self._syncing = True
        try:
            for name in names:
                set_value(self.controls[name], self.call.values[name])
        finally:
            self._syncing = False

    def _sync_options(self):
        """Computation choices follow the operands (a tuple loop state: element-wise presets;
        Reduce of two operands: reducers of pairs); before the values, which are among them."""
        self._syncing = True
        try:
            for arg in self.call.args:
                if arg.kind not in ("computation", "computations"):
                    continue
                ctl, labels = self.controls[arg.name], [c for c in self.call.choices(arg) if c != DEFAULT]
                if isinstance(ctl, w.Combobox):
                    if list(ctl.options) != labels:
                        ctl.options = labels
                elif arg.kind == "computations":
                    if ctl.options != labels:
                        ctl.set_options(labels)
                        ctl.value = self.call.values[arg.name]
                elif [o[0] for o in ctl.options if o[1] is not None] != labels:
                    ctl.options = [(str(c), None if c == DEFAULT else c) for c in self.call.choices(arg)]
                    set_value(ctl, self.call.values[arg.name])
        finally:
            self._syncing = False

    def _refresh(self):
        outcome = self.call.run(self.call.explain())
        self.outcome = outcome
        self.set_trait("shape_text", outcome.shape_text)
        self.set_trait("error", outcome.error)
        self.set_trait("error_control", outcome.argument if outcome.error else "")
        self.set_trait("legal", outcome.legal)
        self.set_trait("result", outcome.result)
        self._show_errors(outcome)
        if outcome.ok:
            where = f" on each of {outcome.devices} simulated devices" if outcome.devices else ""
            self._shape.value = (f"<div style='font-size:15px; margin:6px 0'>→ <b><code>{html.escape(outcome.shape_text)}"
                                 f"</code></b>{where}</div>")
            self.set_trait("result_text", _result_text(outcome) if outcome.result is not None
                           else f"(not run: {outcome.not_run})")
            self.set_trait("hlo", outcome.computation.as_hlo_text())
        else:
            where = f" (see <b>{html.escape(outcome.argument)}</b>)" if outcome.argument else ""
            self._shape.value = f"<div style='font-size:15px; margin:6px 0; color:{ERROR_RED}'>✗ no result{where}</div>"
            self.set_trait("result_text", "")
            self.set_trait("hlo", "")
        self._values.value = _devices_html(outcome) if outcome.ok and outcome.devices and \
            outcome.result is not None else pre(self._values_text(outcome))
        self._hlo.value = pre(self.hlo or "(no computation: the call is not legal)")
        self._graph.value = self._graph_html(outcome) if self._show_graph else pre("(graph=False)")
        self._index.children = [self._index_map_view(outcome)] if self._show_index_map else []

    def _show_errors(self, outcome):
        for name, box in self._errors.items():
            box.value = _error_html(outcome.error, outcome.legal) if outcome.error and name == outcome.argument else ""
        self._general_error.value = _error_html(outcome.error, outcome.legal) \
            if outcome.error and not outcome.argument else ""

    def _show_failure(self, name, message):
        """A control whose text does not read: its message beside it, nothing rebuilt."""
        self.set_trait("error", message)
        self.set_trait("error_control", name)
        self.set_trait("legal", "")
        self.set_trait("shape_text", "")
        self.set_trait("result", None)
        for other, box in self._errors.items():
            box.value = _error_html(message, "") if other == name else ""
        self._general_error.value = ""
        self._shape.value = f"<div style='color:{ERROR_RED}'>✗ no result (see <b>{html.escape(name)}</b>)</div>"

    # -- the views -------------------------------------------------------------------------

    def _values_text(self, outcome):
        if not outcome.ok:
            return "(no values: the call is not legal)"
        lines = [format_value(v, name) for name, v in zip(outcome.names, outcome.arguments)]
        lines.append(self.result_text)
        return "\n".join(lines)

    def _graph_html(self, outcome):
        if not outcome.ok:
            return pre("(no graph: the call is not legal)")
        try:
            svg = svg_of(outcome.computation.graph())
        except Exception as e:  # no `dot` program, no graphviz package: say so, keep going
            return pre(f"graph: could not render ({type(e).__name__}: {e})")
        return scrolled_svg(svg) if svg else pre("graph: the renderer returned nothing")

    def _index_map_view(self, outcome):
        opdef = self.call.opdef
        if not outcome.ok:
            return w.HTML(pre("(no index map: the call is not legal)"))
        if opdef.index_map is None:
            return w.HTML(pre(f"{opdef.name} has no index map (it computes values rather than moving them)"))
        if outcome.result is None:
            return w.HTML(pre(f"(no index map: {outcome.not_run})"))
        args = outcome.arguments
        try:
            view = getattr(xe, "index_map_view", None)
            if view is not None:
                # a collective: every device at once, the operands stacked device-first
                shown = view(opdef.opcode, *args, **outcome.attrs) if outcome.devices else \
                    view(outcome.computation, outcome.instruction, *args)
                # the anywidget; without anywidget, the static view's HTML
                return shown if isinstance(shown, w.Widget) else w.HTML(shown._repr_html_())
            from .stepper import IndexMapStepper
            return IndexMapStepper(outcome.computation, outcome.instruction, *args, use_animation=False)
        except Exception as e:  # an index map the views cannot show: the other tabs still work
            return w.HTML(pre(f"(index map unavailable: {type(e).__name__}: {e})"))

    # -- for code ----------------------------------------------------------------------------

    @property
    def computation(self):
        """The XlaComputation of the call as set (None while it is not legal)."""
        return self.outcome.computation if self.outcome is not None else None


def _result_text(outcome):
    if outcome.devices:
        return "\n".join(format_value(r, f"result on device {d}") for d, r in enumerate(outcome.result))
    return format_value(outcome.result, "result")


def _devices_html(outcome):
    """A collective's values: a column per simulated device, a row per operand and the result."""
    n = outcome.devices
    head = "".join(f"<th style='padding:2px 12px; text-align:left'>device {d}</th>" for d in range(n))
    rows = []
    for name, stacked in zip(outcome.names, outcome.arguments):
        cells = "".join(f"<td style='padding:2px 12px; vertical-align:top'>{value_html(stacked[d], name)}</td>"
                        for d in range(n))
        rows.append(f"<tr>{cells}</tr>")
    cells = "".join(f"<td style='padding:2px 12px; vertical-align:top; border-top:1px solid #ccc'>"
                    f"{value_html(r, 'result')}</td>" for r in outcome.result)
    rows.append(f"<tr>{cells}</tr>")
    return (f"<div class='xe-values-devices' style='font-size:13px; overflow-x:auto'>"
            f"<table style='border-collapse:collapse'><tr>{head}</tr>"
            + "".join(rows) + "</table></div>")


def _signature_html(call):
    params = ", ".join(a.name if a.required else f"{a.name}={a.default!r}" for a in call.args)
    paragraphs = (inspect.getdoc(call.function) or "").strip().split("\n\n")
    doc = paragraphs[0]
    if doc.rstrip().endswith(":") and len(paragraphs) > 1:  # "in its two forms:" -> the forms too
        doc += " " + paragraphs[1]
    doc = html.escape(doc.replace("\n", " ").replace("::", ":")).replace("``", "")
    name = call.function.__name__ if call.opdef.opcode in RECORDED_BY else call.name
    if name != call.name:  # SendDone: made by Send, which records it
        doc += html.escape(f" ({call.name} is recorded by {name}: its value is the result here.)")
    return (f"<div style='font-size:13px'><code>{html.escape(name)}({html.escape(params)})</code>"
            f"<br><span style='color:#555'>{doc}</span></div>")


def _error_html(message, legal):
    body = html.escape(message)
    if legal:
        body += f"<br><span style='color:#1b5e20'>{html.escape(legal)}</span>"
    return f"<div style='color:{ERROR_RED}; font-size:12px; white-space:pre-wrap'>✗ {body}</div>"
