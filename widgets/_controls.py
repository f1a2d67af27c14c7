"""One ipywidgets control per kind of op argument (``xla_explorer.ops.arguments.KINDS``).

Each control has a ``description`` (the argument's name: its label on screen, and how
tests and browser scripts find it) and a ``value``: the argument's value as
``xla_explorer.playground.OpCall`` keeps it (a ``Source`` for an array operand, a tuple
for a per-dimension list, a label for a computation...).  Setting ``value`` redraws the
control; editing it sets ``value``.  What the values mean is the library's business.
"""
import ast

import ipywidgets as w
import traitlets

from xla_explorer.errors import quote
from xla_explorer.ops.arguments import EXPRESSION_REGIONS
from xla_explorer.playground import DEFAULT, SOURCES, Source, as_source

LABEL_WIDTH = "15em"
ENTRY = w.Layout(width="4.5em")
SMALL_BUTTON = w.Layout(width="2.2em", padding="0")
ERROR_RED = "#b00020"


def label_width(names):
    """A label column wide enough for the longest of ``names`` at the notebook's 13 px font
    (an argument name averages about 0.55 em a character): no label is cut."""
    longest = max((len(n) for n in names), default=0)
    return f"{max(6.0, round(longest * 0.56 + 0.6, 1))}em"


#: composite labels right-aligned like ipywidgets' own descriptions (a Label is a flex box:
#: justify), their text ending where a description's ends and their inputs starting where its input does
def css():
    return w.HTML("<style>.xe-playground .xe-label { justify-content: flex-end; padding-right: 0; margin-right: 6px; "
                  "box-sizing: border-box; overflow: hidden; text-overflow: ellipsis; }</style>")


def label(text, tooltip="", width=LABEL_WIDTH):
    """The label of a composite control: the same look (and CSS class) as an ipywidgets
    description, so that a composite is found by its label like any other control."""
    lab = w.Label(text, layout=w.Layout(width=width, flex="0 0 auto"), tooltip=tooltip or None)
    lab.add_class("xe-label")
    return lab


class Composite(w.HBox):
    """A control made of several widgets, led by a label with its description."""

    description = traitlets.Unicode("")
    value = traitlets.Any(None, allow_none=True)

    def __init__(self, description, value=None, tooltip="", label_width=LABEL_WIDTH, **kwargs):
        super().__init__(layout=w.Layout(align_items="center", flex_flow="row wrap"), **kwargs)
        self.description = description
        self.add_class("xe-control")
        self._label = label(description, tooltip, label_width)
        self._quiet = False
        self.value = value
        self._draw()

    @traitlets.observe("value")
    def _on_value(self, change):
        if not self._quiet:
            self._draw()

    def _emit(self, value):
        """An edit of the parts: becomes ``value`` without redrawing the parts."""
        self._quiet = True
        try:
            self.value = value
        finally:
            self._quiet = False

    def _draw(self):
        raise NotImplementedError


def _int_entry(value, on_change, tooltip=""):
    box = w.IntText(value=int(value), layout=ENTRY, tooltip=tooltip or None)
    box.observe(on_change, names="value")
    return box


class IntList(Composite):
    """A list of integers, one box per entry: ``sizes`` (one per dimension, the length set
    by the operand) or ``dims`` (any length: + and − buttons).  ``None`` (an optional
    argument left to its default) shows "(default)"."""

    def __init__(self, description, value=(), fixed=False, none_default=False, tooltip="", flags=False,
                 label_width=LABEL_WIDTH):
        self.fixed, self.none_default, self.flags = fixed, none_default, flags
        self._entries = []
        self._more = w.Button(description="+", layout=SMALL_BUTTON, tooltip="add an entry")
        self._less = w.Button(description="−", layout=SMALL_BUTTON, tooltip="remove the last entry")
        self._note = w.HTML()
        self._more.on_click(lambda _: self.set_entries(list(self.value or ()) + [False if flags else 0]))
        self._less.on_click(lambda _: self.set_entries(list(self.value or ())[:-1]))
        super().__init__(description, value, tooltip, label_width)

    def set_entries(self, entries):
        # an argument whose default is None goes back to it when its last entry goes
        self.value = None if not entries and self.none_default else tuple(entries)

    def _changed(self, _=None):
        if not self._quiet:  # not while _draw sets the entries
            self._emit(tuple(bool(e.value) if self.flags else int(e.value) for e in self._entries))

    def _draw(self):
        values = list(self.value) if self.value is not None else []
        if len(self._entries) != len(values):
            self._entries = [
                (w.Checkbox(value=bool(v), indent=False, layout=w.Layout(width="2em"))
                 if self.flags else w.IntText(value=int(v), layout=ENTRY, tooltip=f"{self.description}[{k}]"))
                for k, v in enumerate(values)]
            for e in self._entries:
                e.observe(self._changed, names="value")
        else:
            self._quiet = True
            try:
                for e, v in zip(self._entries, values):
                    e.value = bool(v) if self.flags else int(v)
            finally:
                self._quiet = False
        self._note.value = "<i>(default)</i>" if self.value is None else ("<i>(none)</i>" if not values else "")
        buttons = [] if self.fixed else [self._more, self._less]
        self.children = [self._label, *self._entries, *buttons, self._note]


class Tuples(Composite):
    """Per dimension a (low, high) pair (``padding``, with "SAME" / "VALID" offered too) or
    a (low, high, interior) triple (``padding_config``)."""

    def __init__(self, description, value=(), width=2, modes=False, tooltip="", label_width=LABEL_WIDTH):
        self.width = width
        self._mode = w.Dropdown(options=["pairs", "SAME", "VALID"], layout=w.Layout(width="6.5em")) if modes else None
        self._rows = []
        if self._mode is not None:
            self._mode.observe(self._on_mode, names="value")
        super().__init__(description, value, tooltip, label_width)

    def _on_mode(self, change):
        if self._quiet:
            return
        # back to pairs: empty, and the playground gives each dimension (0, 0)
        self.value = change["new"] if change["new"] != "pairs" else ()

    def _changed(self, _=None):
        if not self._quiet:
            self._emit(tuple(tuple(int(b.value) for b in row) for row in self._rows))

    def _draw(self):
        v = self.value
        if self._mode is not None:
            self._quiet = True
            try:
                self._mode.value = v if isinstance(v, str) else "pairs"
            finally:
                self._quiet = False
        rows = [] if isinstance(v, str) or v is None else [tuple(t) for t in v]
        if len(rows) != len(self._rows):
            names = ("low", "high", "interior")[:self.width]
            self._rows = [[_int_entry(x, self._changed, f"{self.description}[{d}] {names[j]}") for j, x in enumerate(t)]
                          for d, t in enumerate(rows)]
        else:
            self._quiet = True
            try:
                for row, t in zip(self._rows, rows):
                    for b, x in zip(row, t):
                        b.value = int(x)
            finally:
                self._quiet = False
        groups = [w.HBox(row, layout=w.Layout(border="1px solid #ccc", margin="0 4px 0 0")) for row in self._rows]
        self.children = [self._label] + ([self._mode] if self._mode is not None else []) + groups


class TextValue(Composite):
    """A value typed as text: an optional integer, replica groups, a string.  ``parse``
    turns the text into the value (raising ``ValueError`` with a message); the text that
    did not parse is kept in ``.text`` and ``value`` becomes ``ParseFailure``."""

    def __init__(self, description, value=None, parse=None, fmt=None, placeholder="", tooltip="",
                 label_width=LABEL_WIDTH):
        self.parse = parse or (lambda text: text)
        self.fmt = fmt or (lambda v: "" if v is None else str(v))
        self._text = w.Text(placeholder=placeholder, continuous_update=False, layout=w.Layout(width="16em"))
        self._text.observe(self._on_text, names="value")
        super().__init__(description, value, tooltip, label_width)

    def _on_text(self, change):
        if self._quiet:
            return
        try:
            self._emit(self.parse(change["new"]))
        except ValueError as e:
            self._emit(ParseFailure(str(e)))

    def _draw(self):
        if isinstance(self.value, ParseFailure):
            return
        self._quiet = True
        try:
            self._text.value = self.fmt(self.value)
        finally:
            self._quiet = False
        self.children = [self._label, self._text]


class ParseFailure:
    """The value of a text control whose text does not read: the message says why."""

    def __init__(self, message):
        self.message = message

    def __repr__(self):
        return f"ParseFailure({self.message!r})"


def parse_optional_int(text):
    text = text.strip()
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{quote(text)} is not an integer (leave it empty for the default)") from None


def parse_literal(text):
    text = text.strip()
    if not text:
        return ()
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        raise ValueError(f"cannot read {quote(text)}: write lists of integers, such as [[0, 1], [2, 3]]") from None


class ArrayInput(Composite):
    """An array operand: its shape (text, as HLO writes it: ``f32[3,4]``) and where its values
    come from: ``iota`` (0, 1, 2, ...), ``random`` (with a seed) or ``typed`` values."""

    def __init__(self, description, value=None, tooltip="", label_width=LABEL_WIDTH):
        self._shape = w.Text(continuous_update=False, layout=w.Layout(width="10em"), tooltip="shape, as f32[3,4]")
        self._source = w.Dropdown(options=SOURCES, layout=w.Layout(width="7em"), tooltip="where the values come from")
        self._seed = w.IntText(layout=w.Layout(width="5em"), tooltip="the random seed")
        self._typed = w.Text(continuous_update=False, placeholder="[[1, 2], [3, 4]] or 0",
                             layout=w.Layout(width="16em"), tooltip="the values: a number, or nested lists")
        self._seed_label = w.HTML("seed")
        for part in (self._shape, self._source, self._seed, self._typed):
            part.observe(self._changed, names="value")
        super().__init__(description, value or Source(), tooltip, label_width)
        self.children = [self._label, self._shape, self._source, self._seed_label, self._seed, self._typed]

    @traitlets.validate("value")
    def _valid_value(self, proposal):
        # "f32[3,4]", ("s32[2]", [0, 1]), an array: what OpCall takes for an operand
        try:
            return as_source(proposal["value"])
        except ValueError as e:
            raise traitlets.TraitError(str(e)) from None

    def _changed(self, _=None):
        if self._quiet:
            return
        self._emit(Source(self._shape.value.strip(), self._source.value, int(self._seed.value), self._typed.value))
        self._show_parts()

    def _show_parts(self):
        random, typed = self._source.value == "random", self._source.value == "typed"
        for part in (self._seed, self._seed_label):
            part.layout.display = None if random else "none"
        self._typed.layout.display = None if typed else "none"

    def _draw(self):
        v = self.value
        self._quiet = True
        try:
            self._shape.value, self._source.value = v.shape, v.source
            self._seed.value, self._typed.value = int(v.seed), v.typed
        finally:
            self._quiet = False
        self._show_parts()


class ArrayList(w.HBox):
    """A list of array operands (``operands``, ``*args``, dynamic start indices): an
    ``ArrayInput`` each, named ``name[k]``, and + / − unless the length is fixed.

    One box holding its label, its buttons and its items (a line each, by wrapping), so
    that the widget labelled ``operands`` holds every input of the argument."""

    description = traitlets.Unicode("")
    value = traitlets.Any(None, allow_none=True)

    def __init__(self, description, value=(), fixed=False, tooltip="", label_width=LABEL_WIDTH):
        super().__init__(layout=w.Layout(flex_flow="row wrap", align_items="center"))
        self.description, self.fixed, self.label_width = description, fixed, label_width
        self.add_class("xe-control")
        self.items = []
        self._quiet = False
        self._more = w.Button(description="+", layout=SMALL_BUTTON, tooltip="add an operand")
        self._less = w.Button(description="−", layout=SMALL_BUTTON, tooltip="remove the last operand")
        self._more.on_click(lambda _: self._resize(1))
        self._less.on_click(lambda _: self._resize(-1))
        self._head = [label(description, tooltip, label_width)] + ([] if fixed else [self._more, self._less]) + \
            [w.Box(layout=w.Layout(flex="0 0 100%", height="0", margin="0"))]  # the items start a new line
        self.value = list(value or ())
        self._draw()

    def _resize(self, by):
        items = list(self.value or ())
        if by > 0:
            items.append(items[-1] if items else Source())
        elif items:
            items.pop()
        self.value = items

    @traitlets.observe("value")
    def _on_value(self, change):
        if not self._quiet:
            self._draw()

    @traitlets.validate("value")
    def _valid_value(self, proposal):
        try:
            return [as_source(v) for v in proposal["value"] or ()]
        except ValueError as e:
            raise traitlets.TraitError(str(e)) from None

    def _item_changed(self, _=None):
        self._quiet = True
        try:
            self.value = [item.value for item in self.items]
        finally:
            self._quiet = False

    def _draw(self):
        values = list(self.value or ())
        if len(values) != len(self.items):
            self.items = [ArrayInput(f"{self.description}[{k}]", v, label_width=self.label_width)
                          for k, v in enumerate(values)]
            for item in self.items:
                item.layout.width = "100%"
            for item in self.items:
                item.observe(self._item_changed, names="value")
        else:
            for item, v in zip(self.items, values):
                item.value = v
        self.children = self._head + self.items


class ChoiceList(Composite):
    """A list of choices (Conditional's branch computations), one dropdown each."""

    def __init__(self, description, value=(), options=(), tooltip="", label_width=LABEL_WIDTH):
        self.options = list(options)
        self._boxes = []
        super().__init__(description, value, tooltip, label_width)

    def _changed(self, _=None):
        if not self._quiet:
            self._emit(tuple(b.value for b in self._boxes))

    def set_options(self, options):
        """New choices (a branch operand became a tuple): the boxes are drawn again."""
        self.options = list(options)
        self._boxes = []
        self._draw()

    def _draw(self):
        values = list(self.value or ())
        if len(values) != len(self._boxes):
            self._boxes = [w.Dropdown(options=self.options, value=v if v in self.options else self.options[0],
                                      layout=w.Layout(width="13em")) for v in values]
            for b in self._boxes:
                b.observe(self._changed, names="value")
        else:
            self._quiet = True
            try:
                for b, v in zip(self._boxes, values):
                    b.value = v
            finally:
                self._quiet = False
        self.children = [self._label, *self._boxes]


def make_control(arg, value, choices=(), label_width=LABEL_WIDTH):
    """The control for one ``Arg``, showing ``value``; its label ``label_width`` wide."""
    name, kind = arg.name, arg.kind
    style = {"description_width": label_width}
    wide = w.Layout(width="auto")
    menu = w.Layout(width=f"calc({label_width} + 18em)")
    number = w.Layout(width=f"calc({label_width} + 4.5em + 8px)")  # its box as wide as a per-dimension entry
    tip = _tooltip(arg)
    lw = {"label_width": label_width}
    if kind == "array":
        return ArrayInput(name, value, tip, **lw)
    if kind in ("arrays", "scalars"):
        return ArrayList(name, value, fixed=kind == "scalars" or arg.of is not None, tooltip=tip, **lw)
    if kind == "computation" and arg.region in EXPRESSION_REGIONS:
        # an expression of the parameter x: the presets offered, any expression typed
        return w.Combobox(options=[c for c in choices if c != DEFAULT], value=value or "", description=name,
                          ensure_option=False, continuous_update=False, style=style, layout=menu,
                          placeholder="an expression of x, e.g. x[0] < 10",
                          tooltip=tip + "; type any expression of the state x (Enter), or pick one")
    if kind in ("enum", "dtype", "computation"):
        options = [(DEFAULT if c in (None, DEFAULT) else str(c), None if c in (None, DEFAULT) else c) for c in choices]
        menu_box = w.Dropdown(options=options, description=name, style=style, layout=menu, tooltip=tip)
        set_value(menu_box, value if value in [o[1] for o in options] else options[0][1])
        return menu_box
    if kind == "computations":
        return ChoiceList(name, value, [c for c in choices if c != DEFAULT], tip, **lw)
    if kind in ("sizes", "dims", "flags"):
        return IntList(name, value, fixed=kind != "dims", none_default=not arg.required and arg.default is None,
                       tooltip=tip, flags=kind == "flags", **lw)
    if kind in ("padding", "padding_config"):
        return Tuples(name, value, width=2 if kind == "padding" else 3, modes=kind == "padding", tooltip=tip, **lw)
    if kind in ("int", "dim"):
        if value is None or (not arg.required and arg.default is None):
            return TextValue(name, value, parse_optional_int, placeholder="(default)", tooltip=tip, **lw)
        return w.IntText(value=int(value), description=name, style=style, tooltip=tip, layout=number)
    if kind == "float":
        return w.FloatText(value=float(value), description=name, style=style, tooltip=tip, layout=number)
    if kind == "bool":
        return w.Checkbox(value=bool(value), description=name, style=style, tooltip=tip, layout=wide)
    if kind == "groups":
        return TextValue(name, value, parse_literal, fmt=lambda v: str([list(g) for g in v or ()]),
                         placeholder="[[0, 1], [2, 3]]", tooltip=tip, **lw)
    if kind in ("str", "shape", "literal"):
        optional = not arg.required and arg.default is None
        return TextValue(name, value, (lambda t: t.strip() or None) if optional else (lambda t: t.strip()),
                         placeholder="(default)" if optional else "", tooltip=tip, **lw)
    raise NotImplementedError(f"no control for arguments of kind {kind!r} ({name})")


def set_value(ctl, value):
    """``ctl.value = value``; a Dropdown's "(default)" option (value None) by its index, as
    ipywidgets reads ``value=None`` as "nothing selected" and shows an empty box."""
    if isinstance(ctl, w.Dropdown) and value is None:
        values = [o[1] if isinstance(o, tuple) else o for o in ctl.options]
        if None in values:
            ctl.index = values.index(None)
            return
    ctl.value = value


def _tooltip(arg):
    parts = [arg.kind]
    if arg.of:
        parts.append(f"follows {arg.of}")
    if not arg.required:
        parts.append(f"default {arg.default!r}")
    if arg.doc:
        parts.append(arg.doc)
    return "; ".join(parts)
