"""``BuilderWidget``: build a computation op by op, with the shape inferred as you type.

A thin adapter: the op list comes from the registry, the argument fields from each op's
public function (its signature), the result shape or the ``ShapeError`` from calling
that function on an ``XlaBuilder``, the HLO text from the printer and the graph from
``xla_explorer.render``.  The widget itself knows no op.
"""
import inspect
from collections import Counter

import traitlets
import ipywidgets as w

import xla_explorer as xe

from ._text import (attribute_params, buildable_ops, call_with_accepted, inline_svg, join_attrs, parse_value,
                    pre, signature_text, split_attrs, svg_of, takes_builder)

RED = "#b00020"



class BuilderWidget(w.VBox):
    """Build a computation one op at a time.

    Declare parameters (a shape text such as ``f32[3,4]``), pick an op (by family), its
    operands among the values built so far and its attributes (Python literals; an op
    function's name, such as ``Add``, for a computation).  The inferred result shape
    shows at once, or the ``ShapeError`` in red; "Add" records the op.

    Traitlets: ``op_name`` (API name, ``"Gather"``; an opcode is accepted), ``operands``
    (value names), ``attrs_text`` (``"offset_dims=[1], slice_sizes=[1, 4]"``),
    ``shape_text`` and ``error`` (read-only results), ``hlo`` (the module's HLO text).
    ``.computation`` is the ``XlaComputation`` built so far, ``.run(*args)`` runs it.
    """

    op_name = traitlets.Unicode("")
    operands = traitlets.List(traitlets.Unicode())
    attrs_text = traitlets.Unicode("")
    shape_text = traitlets.Unicode("", read_only=True)
    error = traitlets.Unicode("", read_only=True)
    hlo = traitlets.Unicode("", read_only=True)

    def __init__(self, name="built", **kwargs):
        super().__init__(**kwargs)
        self.builder = xe.XlaBuilder(name)
        #: value name -> XlaOp, in the order they were made
        self.values = {}
        self.root = None
        self.exception = None
        self._ops = buildable_ops()
        self._by_name = {opdef.name: opcode for opcode, (opdef, _) in self._ops.items()}
        self._counter = 0
        self._syncing = self._quiet = False
        self._drawn_error = None  # the ShapeError the graph shows, if any

        counts = Counter(opdef.family for opdef, _ in self._ops.values())
        # the family with the most ops first shown (elementwise, today)
        self._family = w.Dropdown(options=sorted(counts), value=counts.most_common(1)[0][0], description="family")
        self._op = w.Dropdown(description="op")
        self._signature = w.HTML()
        self._operands = w.TagsInput(value=[], allow_duplicates=True)
        self._available = w.HTML()
        self._fields_box = w.VBox()
        self._fields = {}
        self._result = w.HTML()
        self._add = w.Button(description="Add", button_style="primary", tooltip="record this op")
        self._param_shape = w.Text(value="f32[3,4]", description="shape", continuous_update=False)
        self._param_name = w.Text(value="", placeholder="x", description="name", continuous_update=False)
        self._add_param = w.Button(description="Add parameter")
        self._hlo = w.HTML()
        self._graph = w.HTML()
        tabs = w.Tab(children=[self._hlo, self._graph])
        tabs.set_title(0, "HLO")
        tabs.set_title(1, "graph")

        self._family.observe(self._on_family, names="value")
        self._op.observe(lambda ch: self._set_op(ch["new"]), names="value")
        w.link((self._operands, "value"), (self, "operands"))
        self._add.on_click(lambda _: self.add())
        self._add_param.on_click(lambda _: self.add_parameter(self._param_shape.value,
                                                              self._param_name.value or None))
        self.children = [
            w.HBox([w.Label("parameter"), self._param_shape, self._param_name, self._add_param]),
            w.HBox([self._family, self._op]), self._signature,
            w.HBox([w.Label("operands"), self._operands, self._available]),
            self._fields_box, w.HBox([self._add, self._result]), tabs,
        ]
        self._on_family({"new": self._family.value})
        self._refresh_module()

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
            raise traitlets.TraitError(f"unknown op {name!r}; ops: {', '.join(sorted(self._by_name))}")
        return name

    @traitlets.observe("op_name")
    def _on_op_name(self, change):
        opcode = self._by_name[change["new"]]
        opdef, fn = self._ops[opcode]
        if self._family.value != opdef.family:
            self._family.value = opdef.family
        if self._op.value != opcode:
            self._op.value = opcode
        self._signature.value = pre(signature_text(fn))
        self._rebuild_fields()
        self._preview()

    @property
    def opdef(self):
        return self._ops[self._by_name[self.op_name]][0] if self.op_name else None

    @property
    def function(self):
        return self._ops[self._by_name[self.op_name]][1] if self.op_name else None

    # -- attribute fields <-> attrs_text --------------------------------------------------

    def _rebuild_fields(self):
        if not self.op_name:
            return
        try:
            old = split_attrs(self.attrs_text)
        except ValueError:
            old = {}
        hlo_kws = set(self.opdef.kws)
        fields = {}
        for p in attribute_params(self.function, len(self.operands)):
            hint = "required" if p.default is p.empty else f"default {p.default!r}"
            where = "HLO attribute" if p.name in hlo_kws else "argument"
            text = w.Text(value=old.get(p.name, ""), description=p.name, placeholder=hint,
                          tooltip=f"{where}; {hint}", continuous_update=False,
                          style={"description_width": "initial"}, layout=w.Layout(width="60%"))
            text.observe(self._on_field, names="value")
            fields[p.name] = text
        self._fields = fields
        self._fields_box.children = list(fields.values())
        kept = {k: v for k, v in old.items() if k in fields}
        self._sync_attrs_text(join_attrs(kept))

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
        self._rebuild_fields()  # the fields are what the operands leave of the signature
        self._preview()

    # -- the op call: preview and record --------------------------------------------------

    def _names(self):
        names = {opdef.name: fn for opdef, fn in self._ops.values()}
        names.update(self.values)
        return names

    def _call(self):
        """Call the op function on the builder; returns its result (an XlaOp or a tuple)."""
        if not self.op_name:
            raise ValueError("choose an op")
        fn = self.function
        missing = [n for n in self.operands if n not in self.values]
        if missing:
            raise ValueError(f"{self.op_name}: no value named {', '.join(map(repr, missing))}; "
                             f"the values are {', '.join(self.values) or 'none yet (add a parameter)'}")
        args = [self.values[n] for n in self.operands]
        names = self._names()
        attrs = {}
        for kw, text in split_attrs(self.attrs_text).items():
            try:
                attrs[kw] = parse_value(text, names)
            except ValueError as e:
                raise ValueError(f"{self.op_name}: attribute {kw}: {e}") from None
        if takes_builder(fn):
            args = [self.builder] + args
        try:
            inspect.signature(fn).bind(*args, **attrs)
        except TypeError as e:
            raise ValueError(f"{self.op_name}: {e}; the signature is {signature_text(fn)}") from None
        return fn(*args, **attrs)

    def _preview(self):
        """Infer the shape of the op as set, recording nothing (the builder is restored)."""
        if not self.op_name:
            return
        n, params = len(self.builder.instructions), dict(self.builder.parameters)
        result, exc = None, None
        try:
            result = self._call()
        except Exception as e:  # shown, not raised: the user is typing
            exc = e
        finally:
            del self.builder.instructions[n:]
            self.builder.parameters.clear()
            self.builder.parameters.update(params)
        self._show(result, exc)

    def _show(self, result, exc):
        self.exception = exc
        if exc is None:
            text = _shape_text(result)
            self.set_trait("error", "")
            self.set_trait("shape_text", text)
            self._result.value = f"<b>→ {text}</b>"
        else:
            message = str(exc) if isinstance(exc, (xe.ShapeError, ValueError)) else f"{type(exc).__name__}: {exc}"
            self.set_trait("shape_text", "")
            self.set_trait("error", message)
            self._result.value = pre(message, RED)
        drawn = self.exception if isinstance(self.exception, xe.ShapeError) else None
        if drawn is not None or self._drawn_error is not None:
            self._drawn_error = drawn
            self._graph.value = self._graph_html()

    def add(self):
        """Record the op as set ("Add"); returns the new XlaOp (None if the op is invalid)."""
        n, params = len(self.builder.instructions), dict(self.builder.parameters)
        try:
            result = self._call()
        except Exception as e:
            del self.builder.instructions[n:]
            self.builder.parameters.clear()
            self.builder.parameters.update(params)
            self._show(None, e)
            return None
        self._record(n, result)
        self._show(result, None)
        return result

    def add_parameter(self, shape, name=None):
        """Declare parameter number len(parameters) of ``shape`` (``"f32[3,4]"`` or a Shape)."""
        number = len(self.builder.parameters)
        n = len(self.builder.instructions)
        try:
            op = xe.Parameter(self.builder, number, shape, name or f"p{number}")
        except Exception as e:
            self._show(None, e)
            return None
        if op.name in self.values:
            del self.builder.instructions[n:]
            del self.builder.parameters[number]
            self._show(None, ValueError(f"Parameter: the name {op.name!r} is taken"))
            return None
        self._record(n, op, rename=False)
        self._preview()
        return op

    def _record(self, start, result, rename=True):
        for inst in self.builder.instructions[start:]:
            if rename:  # readable names: gather.3 for the 3rd op of this widget
                self._counter += 1
                inst.name = f"{inst.opcode}.{self._counter}"
            self.values[inst.name] = _op_of(self.builder, inst)
        results = result if isinstance(result, (tuple, list)) else (result,)
        self.root = results[-1] if len(results) == 1 else list(results)
        self._available.value = "<small>values: " + ", ".join(self.values) + "</small>"
        self._refresh_module()

    # -- the module -----------------------------------------------------------------------

    @property
    def computation(self):
        """The XlaComputation built so far (its root: the last op added)."""
        return self.builder.build(self.root)

    def run(self, *args, **options):
        return self.computation.run(*args, **options)

    def _refresh_module(self):
        try:
            text = self.computation.as_hlo_text() if self.values else ""
        except Exception as e:
            text = f"(no module yet: {e})"
        self.set_trait("hlo", text)
        self._hlo.value = pre(text or "(empty: add a parameter, then ops)")
        self._graph.value = self._graph_html()

    def _graph_html(self):
        """The graph of what is recorded; with a ShapeError, the failed op as a red node."""
        try:
            from xla_explorer import render
            graph_of_builder = render.graph_of_builder
        except (ImportError, AttributeError):
            return pre("graph: xla_explorer.render is not available (the HLO tab shows the module)")
        if not self.builder.instructions:
            return pre("(empty: add a parameter, then ops)")
        exc = self.exception if isinstance(self.exception, xe.ShapeError) else None
        operands = [self.values[n] for n in self.operands if n in self.values] if exc else ()
        try:
            svg = svg_of(call_with_accepted(graph_of_builder, self.builder, error=exc, operands=operands,
                                            opcode=self.op_name if exc else None))
        except Exception as e:  # no `dot` program, or a renderer limitation: say so, keep going
            return pre(f"graph: could not render ({type(e).__name__}: {e})")
        return inline_svg(svg) if svg else pre("graph: the renderer returned nothing to show")


def _shape_text(result):
    if isinstance(result, (tuple, list)):
        return "(" + ", ".join(str(r.shape) for r in result) + ")"
    return str(result.shape)


def _op_of(builder, inst):
    from xla_explorer.builder import XlaOp
    return XlaOp(builder, inst)

