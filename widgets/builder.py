"""``BuilderWidget``: build a module op by op, sub-computations included, run it, export it.

A thin adapter: the op list comes from the registry, the argument fields from each op's
public function (its signature), the result shape or the ``ShapeError`` from calling
that function on an ``XlaBuilder``, the HLO text from the printer, the graph from
``xla_explorer.render`` and the run from ``XlaComputation.run``.  The widget knows no op.

Sub-computations (a while body, a reduce's combiner, a sort comparator) are built in a
nested ``BuilderWidget`` (``bw.new_computation("body")``) or given as a Python callable
or an ``XlaComputation`` (``bw.add_computation("body", fn, "f32[]", ...)``); in any
argument field they are called by their name.  ``bw.python_code()`` is the Python that
rebuilds the same module with the public API.
"""
import html
import inspect
import time
from collections import Counter

import traitlets
import ipywidgets as w

import xla_explorer as xe
from xla_explorer.computation import XlaComputation
from xla_explorer.errors import quote
from xla_explorer.ops import registry

from ._text import (attribute_params, buildable_ops, call_with_accepted, doc_html, expression_code, fault_of,
                    format_value, identifier, join_attrs, literal_code, make_input, parse_value, pre, scrolled_svg,
                    split_attrs, svg_of, takes_builder)

RED = "#b00020"
#: computations offered in the computation fields' lists, besides the ones built here
COMMON_COMPUTATIONS = ("Add", "Mul", "Max", "Min", "And", "Or", "Lt", "Gt", "Ge", "Le")
#: the name of the tuple a module returns when several values are left unused
OUTPUTS = "outputs"
#: the controls an error can be beside, besides the argument fields and the input boxes
_FIXED_CONTROLS = {"parameter", "op", "operands", "add", "root", "backend", "run", "computation name"}


class _Session:
    """What a BuilderWidget shares with its nested ones: the instruction counter (names are
    unique across the module), the sub-computations by name, the Python names taken."""

    def __init__(self):
        self.counter = 0
        self.subs = {}        # name -> BuilderWidget (nested) or _Given
        self.uses = Counter() # sub name -> recorded ops that call it (it cannot change then)
        self.taken = set()    # Python identifiers of the generated code

    def next(self):
        self.counter += 1
        return self.counter


class _Action:
    """One recorded call: what was called (for undo and for the generated code)."""

    def __init__(self, code, start, params, results, subs):
        self.code = code          # the Python line(s) of the call
        self.start = start        # len(builder.instructions) before it
        self.params = params      # builder.parameters before it
        self.results = results    # value names it made
        self.subs = subs          # sub-computations it calls


class _Given:
    """A sub-computation given as a Python callable (traced here) or an XlaComputation."""

    def __init__(self, name, computation, code):
        self.name, self.computation, self.code = name, computation, code
        self.code_var = None

    def module(self):
        return self.computation


class _Refused(ValueError):
    """A refused input, with the control it is about."""

    def __init__(self, message, control):
        super().__init__(message)
        self.control = control


class BuilderWidget(w.VBox):
    """Build a module one op at a time.

    Declare parameters (a shape text such as ``f32[3,4]``), pick an op (by family), its
    operands (value names; type one and press Enter) and its arguments (Python literals;
    a sub-computation or an op function, such as ``Add``, by name; a value by its name).
    The inferred result shape shows at once, or the ``ShapeError`` in red beside the
    field it is about; "Add" records the op, "Undo" takes the last one back.

    The module returns ``root`` (a value name), or by default every value no other op
    uses (a tuple when there are several), so the HLO and the graph show all that was built.
    "Run" runs it on the chosen backend with the inputs typed per parameter (``iota``,
    ``zeros``, ``ones``, ``random``, ``random(7)`` or a literal).

    Traitlets: ``op_name`` (API name, ``"Gather"``; an opcode is accepted), ``operands``
    (value names or expressions), ``attrs_text`` (``"offset_dims=[1], slice_sizes=[1, 4]"``),
    ``root``, ``backend``; read-only: ``shape_text``, ``error`` and ``error_control`` (the
    control the error is about: an argument name, ``"operands"``, ``"parameter"``, ...),
    ``hlo``, ``run_text``, ``run_error``.  ``.computation`` is the module built so far,
    ``.run(*args)`` runs it, ``.python_code()`` rebuilds it in Python.
    """

    op_name = traitlets.Unicode("")
    operands = traitlets.List(traitlets.Unicode())
    attrs_text = traitlets.Unicode("")
    root = traitlets.Unicode("")
    backend = traitlets.Unicode("numpy")
    shape_text = traitlets.Unicode("", read_only=True)
    error = traitlets.Unicode("", read_only=True)
    error_control = traitlets.Unicode("", read_only=True)
    hlo = traitlets.Unicode("", read_only=True)
    run_text = traitlets.Unicode("", read_only=True)
    run_error = traitlets.Unicode("", read_only=True)

    def __init__(self, name="built", *, _parent=None, **kwargs):
        super().__init__(**kwargs)
        self.parent = _parent
        self._session = _parent._session if _parent is not None else _Session()
        self.name = name
        self.builder = xe.XlaBuilder(name)
        #: value name -> XlaOp, in the order they were made
        self.values = {}
        self.actions = []
        self.exception = None
        self._module = None
        self._code_names = {}   # value name -> Python expression in the generated code
        self.var = identifier("b" if _parent is None else f"b_{name}", self._session.taken)
        self._ops = buildable_ops()
        self._by_name = {opdef.name: opcode for opcode, (opdef, _) in self._ops.items()}
        self._syncing = self._quiet = False
        self._errors = {}       # control name -> the HTML beside it
        self._drawn_error = None  # the ShapeError the graph shows, if any

        counts = Counter(opdef.family for opdef, _ in self._ops.values())
        # the family with the most ops first shown (elementwise, today)
        self._family = w.Dropdown(options=sorted(counts), value=counts.most_common(1)[0][0], description="family")
        self._op = w.Dropdown(description="op")
        self._signature = w.HTML()
        self._operands = w.TagsInput(value=[], allow_duplicates=True)
        self._operand_entry = w.Combobox(placeholder="value name, Enter adds it", ensure_option=False,
                                         continuous_update=False, layout=w.Layout(width="220px"))
        self._available = w.HTML()
        self._fields_box = w.VBox()
        self._fields = {}
        self._result = w.HTML()
        self._add = w.Button(description="Add", button_style="primary", tooltip="record this op")
        self._undo = w.Button(description="Undo", tooltip="take the last recorded op back")
        self._param_shape = w.Text(value="f32[3,4]", description="shape", continuous_update=False)
        self._param_name = w.Text(value="", placeholder="x", description="name", continuous_update=False)
        self._add_param = w.Button(description="Add parameter")
        self._root = w.Dropdown(description="root", options=[("(every unused value)", "")], value="")
        self._hlo = w.HTML()
        self._graph = w.HTML()
        self._code = w.HTML()
        tabs = w.Tab(children=[self._hlo, self._graph, self._code])
        for k, title in enumerate(("HLO", "graph", "Python")):
            tabs.set_title(k, title)

        self._family.observe(self._on_family, names="value")
        self._op.observe(lambda ch: self._set_op(ch["new"]), names="value")
        w.link((self._operands, "value"), (self, "operands"))
        self._operand_entry.observe(self._on_operand_entry, names="value")
        self._add.on_click(lambda _: self.add())
        self._undo.on_click(lambda _: self.undo())
        self._add_param.on_click(lambda _: self.add_parameter(self._param_shape.value, self._param_name.value or None))
        w.link((self._root, "value"), (self, "root"))

        rows = [
            w.HBox([w.Label("parameter"), self._param_shape, self._param_name, self._add_param,
                    self._error_label("parameter")]),
            w.HBox([self._family, self._op, self._error_label("op")]), self._signature,
            w.HBox([w.Label("operands"), self._operands, self._operand_entry, self._error_label("operands")]),
            self._available,
            self._fields_box, w.HBox([self._add, self._undo, self._result, self._error_label("add")]),
            w.HBox([self._root, self._error_label("root")]),
        ]
        if _parent is None:
            rows += [self._subs_box(), self._run_box()]
        self.add_class("xe-builder" if _parent is None else "xe-builder-nested")
        for part, cls in ((self._operand_entry, "xe-operand-entry"), (self._operands, "xe-operands"),
                          (self._result, "xe-result"), (self._hlo, "xe-hlo"), (self._graph, "xe-graph"),
                          (self._signature, "xe-signature")):
            part.add_class(cls)
        self.children = rows + [tabs]
        self._on_family({"new": self._family.value})
        self._refresh_module()

    # -- errors beside their control --------------------------------------------------------

    def _error_label(self, control):
        label = w.HTML(layout=w.Layout(max_width="60%"))
        label.add_class("xe-error")  # CSS classes: what browser tests find the parts by
        label.add_class("xe-error-" + control.replace(" ", "-"))
        self._errors[control] = label
        return label

    def _put_error(self, message, control, trait="error"):
        """Show ``message`` beside ``control`` (every other label of that kind cleared)."""
        run_controls = {"backend", "run"} | {c for c in self._errors if c.startswith("input ")}
        mine = run_controls if trait == "run_error" else set(self._errors) - run_controls
        for name in mine:
            if name in self._errors:
                self._errors[name].value = ""
        if message and control in self._errors:
            self._errors[control].value = pre(message, RED)

    def _fault(self, exc, fields=()):
        """The control an exception is about."""
        if isinstance(exc, _Refused):
            return exc.control
        message = str(exc)
        control = fault_of(message, list(fields) + ["operands", "operand"])
        if control is None:  # no argument named: the one whose value the message quotes
            quoted = [(len(v), k) for k, v in ((k, self._fields[k].value.strip().strip("'\"")) for k in fields
                                                if k in self._fields) if len(v) > 1 and v in message]
            control = max(quoted)[1] if quoted else None
        return "operands" if control == "operand" else control or "add"

    # -- choosing the op ------------------------------------------------------------------

    def _on_family(self, change):
        ops = sorted((opdef.name, opcode) for opcode, (opdef, _) in self._ops.items()
                     if opdef.family == change["new"])
        wanted = self._by_name.get(self.op_name)
        if wanted not in [opcode for _, opcode in ops]:
            wanted = ops[0][1] if ops else None
        self._quiet = True  # new options reset the dropdown's value: not a choice of the user
        try:
            self._op.options = [(f"{name}  ({opcode})", opcode) for name, opcode in ops]
            self._op.value = wanted
        finally:
            self._quiet = False
        self._set_op(wanted)

    def _set_op(self, opcode):
        if not self._quiet and opcode and self._ops[opcode][0].name != self.op_name:
            self.op_name = self._ops[opcode][0].name

    @traitlets.validate("op_name")
    def _valid_op(self, proposal):
        name = proposal["value"]
        if name in self._ops:  # an opcode
            name = self._ops[name][0].name
        if name not in self._by_name:
            raise traitlets.TraitError(f"unknown op {quote(name)}; ops: {', '.join(sorted(self._by_name))}")
        return name

    @traitlets.observe("op_name")
    def _on_op_name(self, change):
        opcode = self._by_name[change["new"]]
        opdef, fn = self._ops[opcode]
        if self._family.value != opdef.family:
            self._family.value = opdef.family
        if self._op.value != opcode:
            self._op.value = opcode
        self._signature.value = doc_html(fn)
        self._rebuild_fields()
        self._preview()

    @property
    def opdef(self):
        return self._ops[self._by_name[self.op_name]][0] if self.op_name else None

    @property
    def function(self):
        return self._ops[self._by_name[self.op_name]][1] if self.op_name else None

    # -- operands: the tags, and the entry box (Enter adds) ---------------------------------

    def _on_operand_entry(self, change):
        text = (change["new"] or "").strip()
        if text:
            self.operands = list(self.operands) + [text]
            self._operand_entry.value = ""

    # -- attribute fields <-> attrs_text --------------------------------------------------

    def _rebuild_fields(self):
        if not self.op_name:
            return
        try:
            old = split_attrs(self.attrs_text)
        except ValueError:
            old = {}
        hlo_kws = set(self.opdef.kws)
        kinds = {kw: getattr(a, "kind", "") for a in self.opdef.attrs for kw in a.kws}
        fields, rows = {}, []
        for p in attribute_params(self.function, len(self.operands)):
            hint = "required" if p.default is p.empty else f"default {p.default!r}"
            where = "HLO attribute" if p.name in hlo_kws else "argument"
            common = dict(value=old.get(p.name, ""), description=p.name, placeholder=hint,
                          tooltip=f"{where}; {hint}", continuous_update=False,
                          style={"description_width": "initial"}, layout=w.Layout(width="60%"))
            if kinds.get(p.name, "").startswith("computation"):
                field = w.Combobox(options=self._computation_options(), ensure_option=False, **common)
            else:
                field = w.Text(**common)
            field.observe(self._on_field, names="value")
            fields[p.name] = field
            row = w.HBox([field, self._error_label(p.name)])
            row.add_class("xe-row")
            row.add_class(f"xe-arg-{p.name}")
            rows.append(row)
        for name in set(self._errors) - set(fields) - _FIXED_CONTROLS:
            if not name.startswith("input "):
                del self._errors[name]
        self._fields = fields
        self._fields_box.children = rows
        kept = {k: v for k, v in old.items() if k in fields}
        self._sync_attrs_text(join_attrs(kept))

    def _computation_options(self):
        subs = [n for n in self._session.subs if n != self.name]
        return subs + [n for n in COMMON_COMPUTATIONS if hasattr(xe, n)]

    def _on_field(self, change):
        if not self._syncing:
            self._sync_attrs_text(join_attrs({k: f.value for k, f in self._fields.items()}))
            self._preview()

    def _sync_attrs_text(self, text):
        self._syncing = True
        try:
            self.attrs_text = text
        finally:
            self._syncing = False

    @traitlets.observe("attrs_text")
    def _on_attrs_text(self, change):
        if self._syncing:  # the fields changed it: they preview
            return
        try:
            parts = split_attrs(change["new"])
        except ValueError:
            parts = None  # the preview shows the error
        if parts is not None:
            self._syncing = True
            try:
                for k, f in self._fields.items():
                    f.value = parts.get(k, "")
            finally:
                self._syncing = False
        self._preview()

    @traitlets.observe("operands")
    def _on_operands(self, change):
        if list(self._operands.value) != list(change["new"]):
            self._operands.value = list(change["new"])
        self._rebuild_fields()  # the fields are what the operands leave of the signature
        self._preview()

    # -- names: values, sub-computations, op functions ---------------------------------------

    def _functions(self):
        return {n: getattr(xe, n) for n in xe.ops.__all__ if callable(getattr(xe, n, None))}

    def _names(self):
        """name -> object for reading arguments (values win over computations over functions)."""
        names = self._functions()
        for name, sub in self._session.subs.items():
            if sub is not self:
                names[name] = _LazySub(sub)
        names.update(self.values)
        return names

    def _code_namespace(self):
        """name -> Python expression in the generated code."""
        names = {n: f"xe.{n}" for n in self._functions()}
        for name, sub in self._session.subs.items():
            if sub is not self:
                names[name] = sub.code_var
        names.update(self._code_names)
        return names

    def _read(self, text, where, names):
        try:
            value = parse_value(text, names)
        except ValueError as e:
            raise _Refused(f"{self.op_name}: {where}: {e}", "operands" if where.startswith("operand") else where)
        return _resolve(value, self)

    # -- the op call: preview and record --------------------------------------------------

    def _call(self):
        """Call the op function on the builder; returns (result, code, subs used)."""
        if not self.op_name:
            raise _Refused("choose an op", "op")
        fn, names = self.function, self._names()
        args = [self._read(t, f"operand {k} ({quote(t)})", names) for k, t in enumerate(self.operands)]
        attrs = {}
        try:
            texts = split_attrs(self.attrs_text)
        except ValueError as e:
            raise _Refused(f"{self.op_name}: {e}", "add") from None
        for kw, text in texts.items():
            attrs[kw] = self._read(text, kw, names)
        used = _subs_in(args, self) | _subs_in(list(attrs.values()), self)
        call_args = ([self.builder] if takes_builder(fn) else []) + args
        try:
            inspect.signature(fn).bind(*call_args, **attrs)
        except TypeError as e:
            missing = [p.name for p in attribute_params(fn, len(args))
                       if p.default is p.empty and p.name not in attrs]
            raise _Refused(f"{self.op_name}: {e}; the signature is {fn.__name__}{inspect.signature(fn)}",
                           missing[0] if missing and "missing" in str(e) else "add") from None
        result = fn(*call_args, **attrs)
        return result, self._call_code(fn, texts), used

    def _call_code(self, fn, texts):
        code_names = self._code_namespace()
        parts = [self.var] if takes_builder(fn) else []
        parts += [expression_code(t, code_names) for t in self.operands]
        parts += [f"{kw}={expression_code(t, code_names)}" for kw, t in texts.items()]
        return f"xe.{fn.__name__}({', '.join(parts)})"

    def _transaction(self):
        return len(self.builder.instructions), dict(self.builder.parameters)

    def _rollback(self, state):
        n, params = state
        del self.builder.instructions[n:]
        self.builder.parameters.clear()
        self.builder.parameters.update(params)

    def _preview(self):
        """Infer the shape of the op as set, recording nothing (the builder is restored)."""
        if not self.op_name:
            return
        state = self._transaction()
        result, exc = None, None
        try:
            result = self._call()[0]
            if hasattr(result, "inst"):
                self.builder.computation(result)  # what Add checks too: the module must still build
        except Exception as e:  # shown, not raised: the user is typing
            exc = e
        finally:
            self._rollback(state)
        self._show(result, exc)

    def _show(self, result, exc, control=None):
        self.exception = exc
        if exc is None:
            text = _shape_text(result)
            self.set_trait("error", "")
            self.set_trait("error_control", "")
            self.set_trait("shape_text", text)
            self._result.value = f"<b>→ {html.escape(text)}</b>"
            self._put_error("", None)
        else:
            message = str(exc) if isinstance(exc, (xe.ShapeError, ValueError)) else f"{type(exc).__name__}: {exc}"
            control = control or self._fault(exc, self._fields)
            self.set_trait("shape_text", "")
            self.set_trait("error", message)
            self.set_trait("error_control", control)
            self._result.value = pre("✗ (see the message beside " + control + ")", RED) \
                if control != "add" else ""
            self._put_error(message, control)
        drawn = exc if isinstance(exc, xe.ShapeError) else None
        if drawn is not None or self._drawn_error is not None:
            self._drawn_error = drawn
            self._graph.value = self._graph_html()

    def _frozen(self):
        """Why this (nested) builder can no longer change, or ''."""
        n = self._session.uses.get(self.name, 0) if self.parent is not None else 0
        if n:
            return (f"{self.name} is called by {n} recorded op(s): it cannot change any more "
                    "(undo those ops, or make a new sub-computation)")
        return ""

    def add(self):
        """Record the op as set ("Add"); returns the new XlaOp (None if it is refused)."""
        frozen = self._frozen()
        if frozen:
            self._show(None, _Refused(frozen, "add"))
            return None
        state = self._transaction()
        try:
            result, code, used = self._call()
        except Exception as e:
            self._rollback(state)
            self._show(None, e)
            return None
        return self._record(state, result, code, used)

    def add_parameter(self, shape, name=None):
        """Declare parameter number len(parameters) of ``shape`` (``"f32[3,4]"`` or a Shape)."""
        frozen = self._frozen()
        if frozen:
            self._show(None, _Refused(frozen, "parameter"))
            return None
        number = len(self.builder.parameters)
        # names are unique across the module (as XLA's verifier wants; the trace finds
        # instructions by name): a nested builder's parameters are named after it
        name = name or (f"p{number}" if self.parent is None else f"{self.name}_p{number}")
        if name in self._all_value_names() or name in self._session.subs or name == self._root_widget().name:
            self._show(None, _Refused(f"Parameter: the name {quote(name)} is taken", "parameter"))
            return None
        state = self._transaction()
        try:
            op = xe.Parameter(self.builder, number, shape, name)
        except Exception as e:
            self._rollback(state)
            self._show(None, e, "parameter")
            return None
        code = f"xe.Parameter({self.var}, {number}, xe.Shape.parse({str(op.shape)!r}), {name!r})"
        op = self._record(state, op, code, set(), control="parameter")
        if op is not None:
            self._preview()
        return op

    def _record(self, state, result, code, used, control=None):
        start = state[0]
        self._rename(self.builder.instructions[start:])
        results = list(result) if isinstance(result, (tuple, list)) else [result]
        results = [r for r in results if hasattr(r, "inst")]
        names = [r.name for r in results]
        clash = [n for n in names if n in self.values]
        if clash:
            self._rollback(state)
            self._show(None, _Refused(f"{self.op_name}: the name {quote(clash[0])} is taken", control or "add"))
            return None
        saved = dict(self.values), dict(self._code_names), self._module
        var = identifier(names[0] if len(names) == 1 and names else f"{self.op_name.lower()}_out",
                         self._session.taken)
        for k, r in enumerate(results):
            self.values[r.name] = r
            self._code_names[r.name] = var if hasattr(result, "inst") else f"{var}[{k}]"
        try:
            self._module = None
            self._build()  # the module must still build (parameter numbers, ...): or it is refused
        except Exception as e:
            self._rollback(state)
            self.values, self._code_names, self._module = saved[0], saved[1], saved[2]
            self._session.taken.discard(var)
            self._show(None, e, control)
            return None
        self.actions.append(_Action(f"{var} = {code}", start, state[1], names, sorted(used)))
        self._session.uses.update(used)
        self._refresh_module()
        self._show(result, None)
        return result

    def _rename(self, insts, traced=False):
        """Readable names: gather.3 for the 3rd op of the session; computations traced from
        callables (``computation=Add``) and what they contain, too."""
        known = {id(s.module().entry) for s in self._session.subs.values() if s.module() is not None}
        seen = set()

        def visit(comp):
            if id(comp) in seen or id(comp) in known:
                return
            seen.add(id(comp))
            comp.name = f"{comp.name.rsplit('.', 1)[0]}.{self._session.next()}"
            for inst in comp.instructions:
                # p0 of every traced computation: numbered too, so that names stay unique
                inst.name = f"{inst.opcode if inst.opcode != 'parameter' else inst.name}.{self._session.next()}"
                for callee in inst.called_computations():
                    visit(callee)

        for inst in insts:
            if inst.opcode != "parameter":
                inst.name = f"{inst.opcode}.{self._session.next()}"
            elif traced:
                inst.name = f"{inst.name}.{self._session.next()}"
            for callee in inst.called_computations():
                visit(callee)

    def undo(self):
        """Take the last recorded op (or parameter) back; returns its value names."""
        frozen = self._frozen()
        if frozen:
            self._show(None, _Refused(frozen, "add"))
            return []
        if not self.actions:
            self._show(None, _Refused("nothing to undo", "add"))
            return []
        action = self.actions.pop()
        self._rollback((action.start, action.params))
        for name in action.results:
            self.values.pop(name, None)
            expr = self._code_names.pop(name, None)
            if expr:
                self._session.taken.discard(expr.split("[")[0])
        self._session.uses.subtract(action.subs)
        self._session.uses += Counter()  # drop zero counts
        if self.root and self.root not in self.values:
            self.root = ""
        self._module = None
        self._refresh_module()
        self._preview()
        return action.results

    # -- sub-computations -----------------------------------------------------------------

    def _check_sub_name(self, name):
        if not isinstance(name, str) or not name.isidentifier():
            raise _Refused(f"a sub-computation needs a name that is a Python identifier, got {quote(name)}",
                           "computation name")
        if name in self._session.subs or name == self._root_widget().name:
            raise _Refused(f"a computation named {quote(name)} exists already", "computation name")
        if name in self._functions() or name in self._all_value_names():
            raise _Refused(f"{quote(name)} names an op function or a value already: pick another name",
                           "computation name")

    def _root_widget(self):
        top = self
        while top.parent is not None:
            top = top.parent
        return top

    def _all_value_names(self):
        names = set(self._root_widget().values)
        for sub in self._session.subs.values():
            if isinstance(sub, BuilderWidget):
                names |= set(sub.values)
            else:
                names |= {i.name for c in sub.computation.computations for i in c.instructions}
        return names

    def new_computation(self, name, *parameter_shapes):
        """A nested builder for sub-computation ``name`` (shown below); parameters may be
        declared here (``"f32[]"``, ...) or in it.  Its module is called ``name`` in the
        argument fields of every builder of this widget.  Returns the nested BuilderWidget."""
        try:
            self._check_sub_name(name)
        except _Refused as e:
            self._sub_error(e)
            return None
        sub = BuilderWidget(name, _parent=self._root_widget())
        for k, shape in enumerate(parameter_shapes):
            if sub.add_parameter(shape) is None:
                self._sub_error(_Refused(f"{name}: parameter {k}: {sub.error}", "computation name"))
                return None
        self._register_sub(name, sub)
        return sub

    def add_computation(self, name, fn, *parameter_shapes):
        """Sub-computation ``name`` from an ``XlaComputation`` or a Python callable, traced
        on parameters of ``parameter_shapes`` (``"f32[]"`` or Shapes).  Returns its module."""
        from xla_explorer.builder import trace
        try:
            self._check_sub_name(name)
            if isinstance(fn, XlaComputation):
                comp = fn
                clash = sorted({i.name for c in comp.computations for i in c.instructions} & self._all_value_names())
                if clash:
                    raise _Refused(f"{name}: instruction names {clash} are taken in this module (names are "
                                   "unique across a module); rename them in the given computation",
                                   "computation name")
                code = _module_code(comp, name, self._session.taken)
            elif callable(fn):
                shapes = [xe.Shape.parse(s) if isinstance(s, str) else s for s in parameter_shapes]
                try:
                    entry = trace(fn, shapes, name=name)
                except Exception as e:
                    raise _Refused(f"{name}: tracing {getattr(fn, '__name__', 'the callable')} on "
                                   f"({', '.join(map(str, shapes))}) failed: {type(e).__name__}: {e}",
                                   "computation name") from None
                entry.name = name
                comp = XlaComputation(entry)
                self._rename(list(entry.instructions), traced=True)
                code = _module_code(comp, name, self._session.taken)
            else:
                raise _Refused(f"{name}: expected an XlaComputation or a callable, got {type(fn).__name__}",
                               "computation name")
        except _Refused as e:
            self._sub_error(e)
            return None
        given = _Given(name, comp, code[1])
        given.code_var = code[0]
        self._register_sub(name, given)
        return comp

    def _sub_error(self, exc):
        top = self._root_widget()
        top._show(None, exc, "computation name")

    def _register_sub(self, name, sub):
        top = self._root_widget()
        self._session.subs[name] = sub
        if isinstance(sub, BuilderWidget):
            sub.code_var = identifier(name, self._session.taken)
            top._subs.children = list(top._subs.children) + [sub]
            top._subs.set_title(len(top._subs.children) - 1, name)
        else:
            top._given.value += pre(f"{name}: given, {sub.computation.program_shape()}")
        top._errors["computation name"].value = ""
        for widget in [top] + [s for s in self._session.subs.values() if isinstance(s, BuilderWidget)]:
            widget._rebuild_fields()
            widget._refresh_names()

    def module(self):
        """This builder's module, or None while it has nothing to build."""
        try:
            return self._build()
        except Exception:
            return None

    def _subs_box(self):
        self._sub_name = w.Text(placeholder="body", description="name", continuous_update=False,
                                layout=w.Layout(width="200px"))
        new = w.Button(description="New sub-computation", tooltip="a nested builder for a while body, a "
                       "reduce combiner, a sort comparator, a branch...", layout=w.Layout(width="auto"))
        new.on_click(lambda _: self.new_computation(self._sub_name.value.strip()))
        self._subs = w.Accordion(children=[])
        self._given = w.HTML()
        return w.VBox([w.HBox([w.Label("sub-computation"), self._sub_name, new,
                               self._error_label("computation name")]), self._given, self._subs])

    # -- the module -----------------------------------------------------------------------

    def _root_ops(self):
        """What the module returns: the chosen root, or every value no op uses."""
        if self.root:
            return self.values[self.root]
        used = {id(o) for inst in self.builder.instructions for o in inst.operands}
        ops = [v for v in self.values.values() if id(v.inst) not in used and v.inst.opcode != "parameter"]
        if not ops:
            ops = list(self.values.values())[-1:]
        return ops[0] if len(ops) == 1 else ops

    def _root_code(self):
        root = self._root_ops()
        if isinstance(root, list):
            return "[" + ", ".join(self._code_names[r.name] for r in root) + "]"
        return self._code_names[root.name]

    def _build(self):
        if self._module is not None:
            return self._module
        if not self.values:
            raise xe.ShapeError(f"{self.name}: nothing built yet (add a parameter, then ops)")
        n = len(self.builder.instructions)
        try:
            comp = self.builder.build(self._root_ops())
        finally:
            made = self.builder.instructions[n:]  # the tuple of several unused values
            del self.builder.instructions[n:]
        for inst in made:
            inst.name = OUTPUTS
        self._module = comp
        return comp

    @property
    def computation(self):
        """The XlaComputation built so far."""
        return self._build()

    @traitlets.validate("root")
    def _valid_root(self, proposal):
        name = proposal["value"]
        if name and name not in self.values:
            raise traitlets.TraitError(f"root: no value named {quote(name)}; the values are {', '.join(self.values)}")
        if name != self.root and self._frozen():
            raise traitlets.TraitError(self._frozen())
        return name

    @traitlets.observe("root")
    def _on_root(self, change):
        self._module = None
        self._refresh_module()

    def _refresh_names(self):
        values = list(self.values)
        self._available.value = ("<small>values: " + html.escape(", ".join(values)) + "</small>") if values else ""
        self._operand_entry.options = values + [n for n in self._session.subs if n != self.name]
        options = [("(every unused value)", "")] + [(v, v) for v in values]
        if list(self._root.options) != options:
            keep = self.root if self.root in values else ""
            self._root.options = options
            self._root.value = keep

    def _refresh_module(self):
        self._refresh_names()
        try:
            text = self._build().as_hlo_text() if self.values else ""
        except Exception as e:
            text = f"(no module yet: {e})"
        self.set_trait("hlo", text)
        self._hlo.value = pre(text or "(empty: add a parameter, then ops)")
        self._graph.value = self._graph_html()
        try:
            code = self._root_widget().python_code() if self._root_widget().values else ""
        except Exception as e:  # shown, so that a gap in the generator is visible, not silent
            code = f"# no Python yet: {type(e).__name__}: {e}"
        top = self._root_widget()
        top._code.value = pre(code or "# (empty: add a parameter, then ops)")
        if self.parent is None:
            self._refresh_inputs()

    def _graph_html(self):
        """The graph of the module; with a ShapeError, all that was built and the failed op
        as a red node."""
        try:
            from xla_explorer import render
            graph_of, graph_of_builder = render.graph_of, render.graph_of_builder
        except (ImportError, AttributeError):
            return pre("graph: xla_explorer.render is not available (the HLO tab shows the module)")
        if not self.builder.instructions:
            return pre("(empty: add a parameter, then ops)")
        exc = self.exception if isinstance(self.exception, xe.ShapeError) else None
        try:
            if exc is not None:
                operands = [v for v in (self.values.get(n) for n in self.operands) if v is not None]
                graph = call_with_accepted(graph_of_builder, self.builder, error=exc, operands=operands,
                                           opcode=self.op_name)
            else:
                graph = graph_of(self._build())
            svg = svg_of(graph)
        except Exception as e:  # no `dot` program, or a renderer limitation: say so, keep going
            return pre(f"graph: could not render ({type(e).__name__}: {e})")
        return scrolled_svg(svg) if svg else pre("graph: the renderer returned nothing to show")

    # -- running ----------------------------------------------------------------------------

    def _run_box(self):
        self._backend = w.Dropdown(options=available_backends(), value="numpy", description="backend")
        w.link((self._backend, "value"), (self, "backend"))
        self._inputs_box = w.VBox()
        self.inputs = {}
        self._run_button = w.Button(description="Run", button_style="success",
                                    tooltip="run the module on the backend with these inputs")
        self._run_button.on_click(lambda _: self._on_run())
        self._run_out = w.HTML()
        self._progress = w.VBox()  # a bar while a run takes long (a first Numba run compiles)
        return w.VBox([w.HBox([w.Label("run"), self._backend, self._error_label("backend"), self._run_button,
                               self._error_label("run")]),
                       self._inputs_box, self._progress, self._run_out])

    @traitlets.validate("backend")
    def _valid_backend(self, proposal):
        options = available_backends()
        if proposal["value"] not in options:
            raise traitlets.TraitError(f"backend {quote(proposal['value'])} is not available here; "
                                       f"available: {', '.join(options)}")
        return proposal["value"]

    def _refresh_inputs(self):
        params = [inst for inst in self.builder.instructions if inst.opcode == "parameter"]
        params.sort(key=lambda i: i.attrs["parameter_number"])
        old = {k: box.value for k, box in self.inputs.items()}
        self.inputs = {}
        rows = []
        for p in params:
            box = w.Text(value=old.get(p.name, "iota"), description=p.name,
                         placeholder="iota, zeros, ones, random, random(7) or a literal",
                         tooltip=f"the value of {p.name}: {p.shape}", continuous_update=False,
                         style={"description_width": "initial"})
            self.inputs[p.name] = box
            rows.append(w.HBox([box, w.Label(str(p.shape)), self._error_label(f"input {p.name}")]))
        self._inputs_box.children = rows

    def input_values(self):
        """The parameters' values from the input boxes, in parameter order."""
        out = []
        for inst in sorted((i for i in self.builder.instructions if i.opcode == "parameter"),
                           key=lambda i: i.attrs["parameter_number"]):
            text = self.inputs[inst.name].value if inst.name in getattr(self, "inputs", {}) else "iota"
            try:
                out.append(make_input(text, inst.shape, seed=inst.attrs["parameter_number"]))
            except Exception as e:
                raise _Refused(f"input {inst.name} ({inst.shape}): {e}", f"input {inst.name}") from None
        return out

    def run(self, *args, backend=None, **options):
        """Run the module on ``args`` (default: the input boxes) on ``backend`` (default:
        the picker's); returns the result and shows it."""
        backend = backend or self.backend
        comp = self._build()
        if not args and comp.parameter_shapes:
            args = self.input_values()
        started = time.perf_counter()
        result = comp.run(*args, backend=backend, **options)
        took = time.perf_counter() - started
        text = format_value(result, "result") + f"\n({backend}, {took * 1e3:.1f} ms)"
        self.set_trait("run_text", text)
        self.set_trait("run_error", "")
        if self.parent is None:
            self._run_out.value = pre(text)
            self._put_error("", None, "run_error")
        return result

    def _on_run(self):
        """The Run button: the result, or the error beside the input, backend or button."""
        if self.backend != "numpy":
            self._run_out.value = pre(f"running on {self.backend} (the first run compiles its kernels) ...")
        try:
            with self._progress_bars():
                self.run()
        except Exception as e:
            message = str(e) if isinstance(e, (ValueError, RuntimeError)) else f"{type(e).__name__}: {e}"
            if isinstance(e, _Refused):
                control = e.control
            else:
                control = fault_of(message, [f"input {n}" for n in self.inputs] + list(self.inputs))
                control = f"input {control}" if control in self.inputs else control or \
                    ("backend" if self.backend in message else "run")
            self.set_trait("run_error", message)
            self.set_trait("run_text", "")
            self._run_out.value = ""
            self._put_error(message, control, "run_error")

    def _progress_bars(self):
        """While the Run button's work runs, the library's progress (xla_explorer.progress)
        shows as a bar here, under the inputs: a button's callback has no cell output."""
        import contextlib
        from xla_explorer import progress
        from . import progress as bars

        @contextlib.contextmanager
        def showing():
            self._progress.children = ()
            # every bar of the run under the inputs (a first Numba run: loading, then the run)
            listener = bars.NotebookProgress(delay=0.3, display=lambda bar: setattr(
                self._progress, "children", self._progress.children + (bar,)))
            notebook = bars._listener  # the notebook's own listener would print to the log: paused
            if notebook is not None:
                progress.unsubscribe(notebook)
            progress.subscribe(listener)
            try:
                yield
            finally:
                progress.unsubscribe(listener)
                if notebook is not None:
                    progress.subscribe(notebook)
                # a quick task's bar was closed when it ended: only the ones left stay
                self._progress.children = tuple(bar for bar in self._progress.children if bar.shown)
        return showing()

    # -- the Python that rebuilds it ----------------------------------------------------------

    def python_code(self):
        """Python that rebuilds this module with the public API (``comp`` at the end holds it;
        the last lines give instructions the names they have here)."""
        top = self._root_widget()
        if top is not self:
            return top.python_code()
        lines = ["import numpy as np", "import xla_explorer as xe", ""]
        done = set()

        def emit(widget, result_var):
            for action in widget.actions:
                for name in action.subs:
                    if name not in done:
                        done.add(name)
                        sub = self._session.subs[name]
                        if isinstance(sub, BuilderWidget):
                            emit(sub, sub.code_var)
                        else:
                            lines.extend(sub.code + [""])
            lines.append(f"{widget.var} = xe.XlaBuilder({widget.name!r})")
            lines.extend(a.code for a in widget.actions)
            lines.append(f"{result_var} = {widget.var}.build({widget._root_code()})")
            lines.append("")

        emit(self, "comp")
        comp = self._build()
        names = [(c.name, [i.name for i in c.instructions]) for c in comp.computations]
        lines.append("# the names shown in the widget (op functions number instructions across a session)")
        lines.append("names = [")
        lines.extend(f"    ({c!r}, {insts!r})," for c, insts in names)
        lines.append("]")
        lines.append("for computation, (name, instruction_names) in zip(comp.computations, names):")
        lines.append("    computation.name = name")
        lines.append("    for instruction, instruction_name in zip(computation.instructions, instruction_names):")
        lines.append("        instruction.name = instruction_name")
        return "\n".join(lines) + "\n"


class _LazySub:
    """A sub-computation named in an argument: its module, taken when the argument is read."""

    def __init__(self, sub):
        self.sub = sub


def _resolve(value, widget):
    if isinstance(value, _LazySub):
        comp = value.sub.module()
        if comp is None:
            raise _Refused(f"{widget.op_name}: sub-computation {value.sub.name!r} has nothing built yet "
                           "(add its parameters and ops)", "add")
        return comp
    if isinstance(value, list):
        return [_resolve(v, widget) for v in value]
    if isinstance(value, tuple):
        return tuple(_resolve(v, widget) for v in value)
    return value


def _subs_in(values, widget):
    """Names of the sub-computations whose modules appear in ``values``."""
    found, by_id = set(), {}
    for name, sub in widget._session.subs.items():
        comp = sub.module() if sub is not widget else None
        if comp is not None:
            by_id[id(comp)] = name

    def walk(v):
        if isinstance(v, (list, tuple)):
            for x in v:
                walk(x)
        elif id(v) in by_id:
            found.add(by_id[id(v)])
    walk(values)
    return found


def available_backends():
    """The backends this machine runs: numpy always; numba, cuda (a GPU or the simulator)
    and jax when installed."""
    import importlib.util
    out = ["numpy"]
    if importlib.util.find_spec("numba") is not None:
        out.append("numba")
        try:
            from numba import cuda
            if cuda.is_available():
                out.append("cuda")
        except Exception:  # numba-cuda missing or broken: no cuda backend offered
            pass
    if importlib.util.find_spec("jax") is not None:
        out.append("jax")
    return out


def _shape_text(result):
    if isinstance(result, (tuple, list)):
        return "(" + ", ".join(str(r.shape) for r in result) + ")"
    return str(result.shape)


# -- Python for a given computation: op calls when they rebuild it exactly, else its HLO text ---

def _module_code(comp, name, taken):
    """(variable, lines) of Python rebuilding ``comp`` (an XlaComputation): builder calls when
    every instruction's op function, called with its operands and attributes, gives back
    the same instruction; ``xe.parse_hlo`` of its text otherwise."""
    var = identifier(name, taken)
    try:
        lines = _rebuild_lines(comp, var, set(taken))
    except Exception:  # an attribute with no literal, a call that fails: the HLO text rebuilds it
        lines = None
    if lines is None:
        return var, [f"{var} = xe.parse_hlo('''", *comp.as_hlo_text().splitlines(), "''')"]
    taken |= {line.split(" = ", 1)[0] for line in lines if " = " in line}
    return var, lines


def _rebuild_lines(comp, var, taken):
    from xla_explorer.hlo.printer import instruction_attributes
    lines, comp_vars = [], {}
    for hc in comp.computations:
        bvar = identifier(f"b_{hc.name}", taken)
        scratch = xe.XlaBuilder(hc.name)
        ops, op_vars = {}, {}
        lines.append(f"{bvar} = xe.XlaBuilder({hc.name!r})")
        for inst in hc.instructions:
            v = identifier(inst.name, taken)
            if inst.opcode == "parameter":
                n = inst.attrs["parameter_number"]
                op = xe.Parameter(scratch, n, inst.shape, inst.name)
                code = f"xe.Parameter({bvar}, {n}, xe.Shape.parse({str(inst.shape)!r}), {inst.name!r})"
            elif inst.opcode == "constant":
                op = xe.Constant(scratch, inst.attrs["literal"])
                code = f"xe.Constant({bvar}, {literal_code(inst.attrs['literal'])})"
            else:
                opdef = registry.get(inst.opcode)
                fn = getattr(xe, opdef.name, None)
                if fn is None:
                    return None
                kwargs, kw_code = {}, []
                for k, value in inst.attrs.items():
                    if k == "shape":
                        continue
                    if hasattr(value, "instructions"):  # a called computation
                        kwargs[k] = value
                        kw_code.append(f"{k}={comp_vars[id(value)]}")
                    else:
                        kwargs[k] = value
                        kw_code.append(f"{k}={literal_code(value)}")
                n = len(scratch.instructions)
                pre_args = [scratch] if takes_builder(fn) else []
                op = fn(*pre_args, *[ops[id(o)] for o in inst.operands], **kwargs)
                made = scratch.instructions[n:]
                if len(made) != 1 or made[0].opcode != inst.opcode or made[0].shape != inst.shape or \
                        instruction_attributes(made[0]) != instruction_attributes(inst):
                    return None
                args = ([bvar] if pre_args else []) + [op_vars[id(o)] for o in inst.operands]
                code = f"xe.{fn.__name__}({', '.join(args + kw_code)})"
            ops[id(inst)], op_vars[id(inst)] = op, v
            lines.append(f"{v} = {code}")
        if len(scratch.computation(ops[id(hc.root)]).instructions) != len(hc.instructions):
            return None  # instructions the root does not use: build() would drop them
        cvar = var if hc is comp.entry else identifier(hc.name, taken)
        comp_vars[id(hc)] = cvar
        lines.append(f"{cvar} = {bvar}.build({op_vars[id(hc.root)]})")
    return lines
