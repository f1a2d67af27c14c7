"""The op playground's model: one call of an op, as argument values, rebuilt on every change.

``OpCall("Gather")`` holds a value for each argument of the op's public function (see
``ops.arguments``): a ``Source`` for each array operand (a shape, and values from
``iota``, a seeded ``random`` draw or ``typed`` text), Python values for the attributes,
a label of ``region_choices`` for a sub-computation.  ``build()`` calls the op function
on a fresh ``XlaBuilder`` with one parameter per operand and returns an ``Outcome``: the
computation and its result shape, or the ``ShapeError`` with the argument it is about and
what would make the call legal (found by asking the shape rule about nearby values);
``run()`` adds the result values from the NumPy reference (a collective's from
``run_replicated`` on as many simulated devices as its replica groups name, one operand
value per device, stacked device-first).

No widget library here: ``xla_explorer.widgets.OpPlayground`` shows this model.
"""
import ast
import inspect
import re
from dataclasses import dataclass, field, replace

import numpy as np

from . import dtypes, progress
from .builder import Parameter, XlaBuilder, XlaOp
from .errors import ShapeError
from .ops import arguments as _args
from .ops import registry
from .shapes import Shape

#: the playground makes operands and runs results up to this many elements (it answers at once)
MAX_ELEMENTS = 100_000
SOURCES = ("iota", "random", "typed")
#: element types offered for operands and dtype arguments (the sub-byte and fp8 ones left out)
ELEMENT_TYPES = ("f32", "f64", "f16", "bf16", "s32", "s64", "s8", "s16", "u32", "u64", "u8", "u16", "pred",
                 "c64", "c128")
#: element types tried, in order, for an op whose arguments have no example (Not wants s32...)
_TRIED_TYPES = ("f32", "s32", "pred", "c64", "u32")
#: "(default)": a computation or dtype argument left to the function's default
DEFAULT = "(default)"
#: a collective runs on one more device than the largest id its groups name (this many when
#: they name none), at most MAX_DEVICES
DEFAULT_DEVICES = 2
MAX_DEVICES = 8
#: seconds a run may take before it is stopped (the playground answers at once; an endless
#: While loop is stopped and says so)
RUN_SECONDS = 2.0


@dataclass(frozen=True)
class Source:
    """An array operand: its shape (text, as HLO writes it) and where its values come from."""

    shape: str = "f32[2,3]"
    source: str = "iota"
    seed: int = 0
    typed: str = ""

    def parsed_shape(self, name="operand"):
        try:
            return Shape.parse(self.shape) if isinstance(self.shape, str) else Shape(*self.shape)
        except (ShapeError, ValueError) as e:
            raise OperandError(name, f"{name}: cannot read the shape {self.shape!r}: {e}") from None


class OperandError(ShapeError):
    """An operand the playground cannot make (bad shape text, typed values that do not fit)."""

    def __init__(self, argument, message):
        super().__init__(message)
        self.argument = argument


def operand_value(src, name="operand", devices=None):
    """The NumPy value of a ``Source`` (a tuple for a tuple shape).  ``devices``: one value
    per simulated device, stacked (dimension 0 is the device): iota counts on from one
    device to the next, a random draw differs per device, typed values are the same on
    every device unless they have the leading device dimension."""
    shape = src.parsed_shape(name)
    if devices is not None:
        if not shape.is_array:
            raise OperandError(name, f"{name}: a collective's operand is an array, not {shape}")
        stacked = Shape(shape.element_type, (devices,) + tuple(shape.dims))
        if src.source == "typed":
            try:
                return _value(stacked, src, name, 0)
            except OperandError:
                return np.stack([_value(shape, src, name, 0)] * devices)
        return _value(stacked, src, name, 0)
    return _value(shape, src, name, 0)


def _value(shape, src, name, k):
    if shape.is_tuple:
        return tuple(_value(s, src, f"{name}[{i}]", k + i) for i, s in enumerate(shape.tuple_shapes))
    if shape.element_type == "token":
        from .executors.reference import Token
        return Token()
    if any(d is None for d in shape.dims):
        raise OperandError(name, f"{name}: {shape} has a dynamic dimension; give its size")
    size = int(np.prod(shape.dims, dtype=np.int64))
    if size > MAX_ELEMENTS:
        raise OperandError(name, f"{name}: {shape} has {size} elements; the playground makes operands of at "
                                 f"most {MAX_ELEMENTS}")
    dtype = dtypes.to_numpy(shape.element_type)
    t = shape.element_type
    if src.source == "iota":
        base = np.arange(size)
        value = (base % 2).astype(bool) if t == "pred" else base
    elif src.source == "random":
        rng = np.random.default_rng(int(src.seed) + k)
        if t == "pred":
            value = rng.random(size) < 0.5
        elif dtypes.is_integral(t):
            value = rng.integers(0 if dtypes.is_unsigned(t) else -5, 10, size)
        elif dtypes.is_complex(t):
            value = np.round(rng.standard_normal(size), 2) + 1j * np.round(rng.standard_normal(size), 2)
        else:
            value = np.round(rng.standard_normal(size), 2)
    elif src.source == "typed":
        value = _typed(src.typed, shape, name)
        return value.astype(dtype)
    else:
        raise OperandError(name, f"{name}: source {src.source!r} is not one of {', '.join(SOURCES)}")
    return value.reshape(shape.dims).astype(dtype)


_SPECIAL = {"inf": "float('inf')", "nan": "float('nan')", "true": "True", "false": "False"}


def _typed(text, shape, name):
    src = re.sub(r"\b(inf|nan|true|false)\b", lambda m: _SPECIAL[m.group(1)], (text or "").strip())
    if not src:
        raise OperandError(name, f"{name}: type the values (a number, or nested lists such as [[1, 2], [3, 4]])")
    try:
        value = _literal(ast.parse(src, mode="eval").body)
    except (SyntaxError, ValueError) as e:
        raise OperandError(name, f"{name}: cannot read {text!r} as numbers ({e})") from None
    try:
        return np.broadcast_to(np.asarray(value), shape.dims).copy()
    except ValueError:
        raise OperandError(name, f"{name}: the typed values have shape {list(np.shape(value))}, which does not "
                                 f"fit {shape}") from None


def _literal(node):
    if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "float" and len(node.args) == 1:
        return float(ast.literal_eval(node.args[0]))
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_literal(e) for e in node.elts]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_literal(node.operand)
    return ast.literal_eval(node)


@dataclass
class Outcome:
    """What a build of the call gives."""

    computation: object = None
    #: the name of the op's instruction in the computation
    instruction: str = None
    shape: Shape = None
    error: str = ""
    #: the argument the error is about ("" when none is named)
    argument: str = ""
    #: what would make the call legal, as text ("" when the probes found nothing)
    legal: str = ""
    #: the operands' values, in parameter order
    arguments: tuple = ()
    #: the operands' names, as the arguments call them (``start_indices[1]``)
    names: tuple = ()
    #: the other arguments as the op function took them (argument name -> value; a
    #: computation as its callable): for eager calls (``xe.index_map_view(op, *values, **attrs)``)
    attrs: dict = field(default_factory=dict)
    #: a collective: how many simulated devices it runs on (its operand values are stacked,
    #: dimension 0 the device, and ``result`` is the list of the devices' results); else None
    devices: int = None
    result: object = None
    #: why there are no result values ("" when there are)
    not_run: str = ""

    @property
    def ok(self):
        return not self.error

    @property
    def shape_text(self):
        return str(self.shape) if self.shape is not None else ""


#: ops that no public function records alone: a send-done waits for the send that Send
#: records with it (its operand must be that send).  Their playground is that call's, the
#: op's own instruction its result.
RECORDED_BY = {"send-done": "send", "recv-done": "recv"}


class OpCall:
    """One call of an op (opcode or API name), argument by argument.

    ``values``: argument name -> value (a ``Source`` for an array, a list of them for a
    list of arrays, a label for a computation, Python values otherwise).  ``set(name,
    value)`` changes one and keeps the per-dimension arguments one entry per dimension.
    """

    def __init__(self, op, **values):
        self._describe(op)
        self.values = starting_values(RECORDED_BY.get(self.opdef.opcode, self.opdef.opcode))
        for name, value in values.items():
            self.set(name, value)

    def _describe(self, op):
        self.opdef = _args._opdef(op)
        # the call that records the op: its own public function, or the one it is part of
        made_by = _args._opdef(RECORDED_BY.get(self.opdef.opcode, self.opdef.opcode))
        self.function = _args.op_function(made_by)
        self.args = _args.arguments(made_by.opcode)
        self.by_name = {a.name: a for a in self.args}
        self.explicit_signature = _args._DESCRIPTIONS.get(made_by.opcode, _args._Description()).signature
        #: the argument set last: an error naming it is shown beside it
        self.last_set = None
        self.values = {}
        #: computation arguments holding an expression typed by hand (kept when the state changes)
        self.typed = set()

    @property
    def name(self):
        return self.opdef.name

    def set(self, name, value):
        """Set one argument; returns the names of the arguments that changed with it."""
        if name not in self.by_name:
            raise KeyError(f"{self.name} has no argument {name!r}; its arguments: {', '.join(self.by_name)}")
        arg = self.by_name[name]
        self.values[name] = _normalise(arg, value)
        self.last_set = name
        if arg.kind == "computation" and arg.region in _args.EXPRESSION_REGIONS:
            typed = self.values[name] not in (None, DEFAULT) and self.values[name] not in self.choices(arg)
            (self.typed.add if typed else self.typed.discard)(name)
        # the others follow it; a per-dimension list set by hand stays as given (a wrong
        # length is the shape rule's to report, beside it); an empty one gets the defaults
        fixed = {name} if self.values[name] else set()
        return {name} | conform(self.args, self.values, fixed=fixed) | self._valid_computations()

    def _valid_computations(self):
        """Computation labels that no longer fit (Reduce of 2 operands: other choices) reset."""
        changed = set()
        for a in self.args:
            if a.kind == "computation" and self.values.get(a.name) not in (None, DEFAULT) and a.name not in self.typed:
                choices = self.choices(a)
                if self.values[a.name] not in choices:
                    self.values[a.name] = next(iter(choices))
                    changed.add(a.name)
            elif a.kind == "computations" and self.values.get(a.name):
                choices = self.choices(a)
                labels = tuple(_closest(label, choices) for label in self.values[a.name])
                if labels != self.values[a.name]:
                    self.values[a.name] = labels
                    changed.add(a.name)
        return changed

    # -- building ------------------------------------------------------------------------

    @property
    def is_collective(self):
        return self.opdef.opcode in registry.CATEGORIES.get("collective", ())

    def devices(self, values=None):
        """How many simulated devices a collective runs on: one more than the largest device
        id its replica groups (or source-target pairs) name; with none named, its shard or
        split count, else ``DEFAULT_DEVICES``.  None for an op that is no collective."""
        if not self.is_collective:
            return None
        values = self.values if values is None else values
        ids = [i for a in self.args if a.kind == "groups" for g in values.get(a.name) or () for i in g
               if isinstance(i, (int, np.integer))]
        if ids:
            return max(max(ids) + 1, 1)
        counts = [values.get(n) for n in ("shard_count", "split_count") if isinstance(values.get(n), int)]
        return max(counts + [DEFAULT_DEVICES])

    def build(self, values=None):
        """Call the op on a fresh builder: an ``Outcome`` with the shape or the error."""
        values = self.values if values is None else values
        b = XlaBuilder(f"playground_{self.opdef.opcode.replace('-', '_')}")
        devices = self.devices(values)
        try:
            call_args, call_kwargs, params, arrays = self._call_arguments(
                b, values, devices if devices is not None and devices <= MAX_DEVICES else None)
            result = self.function(*call_args, **call_kwargs)
            root = result if isinstance(result, XlaOp) else list(result)
            if self.opdef.opcode in RECORDED_BY:  # the op's own value is the result (Recv's is a part of it)
                root = XlaOp(b, next(i for i in reversed(b.instructions) if i.opcode == self.opdef.opcode))
            comp = b.build(root)
            _readable_names(comp)
        except ShapeError as e:
            argument = getattr(e, "argument", None) or blame(str(e), self.args, self.last_set)
            return Outcome(error=str(e), argument=argument)
        except NotImplementedError as e:
            return Outcome(error=f"{self.name}: {e}", argument="")
        inst = _own_instruction(comp, self.opdef.opcode)
        # parameters the op made itself (Parameter) get values of their shapes too
        names = list(self._names)
        for p in comp.entry.parameters[len(arrays):]:
            arrays.append(operand_value(Source(str(p.shape)), p.name))
            names.append(p.name)
        return Outcome(computation=comp, instruction=inst, shape=comp.result_shape, arguments=tuple(arrays),
                       names=tuple(names), attrs=dict(self._attrs), devices=devices)

    def explain(self, outcome=None):
        """``outcome`` (built when not given), with ``legal`` filled in when it failed."""
        outcome = outcome or self.build()
        if not outcome.ok and outcome.argument:
            outcome.legal = self.legal_values(outcome.argument, outcome.error)
        return outcome

    def run(self, outcome=None):
        """``outcome`` with the result values from the NumPy reference (or why not)."""
        outcome = outcome or self.build()
        if not outcome.ok:
            return outcome
        n = outcome.devices
        if n is not None and n > MAX_DEVICES:
            named = next((a.name for a in self.args if a.kind == "groups"), "the arguments")
            outcome.not_run = (f"{named} name {n} devices; the playground simulates at most {MAX_DEVICES} "
                               f"(comp.run_replicated runs any number)")
            return outcome
        size = _elements(outcome.shape) * (n or 1)
        if size > MAX_ELEMENTS:
            outcome.not_run = f"the result has {size} elements; the playground runs results of at most {MAX_ELEMENTS}"
            return outcome
        try:
            with progress.time_limit(RUN_SECONDS):
                if n is not None:  # one run per simulated device, the collective exchanging data
                    per_device = [[a[d] for a in outcome.arguments] for d in range(n)]
                    outcome.result = outcome.computation.run_replicated(per_device, backend="numpy")
                else:
                    outcome.result = outcome.computation.run(*outcome.arguments, backend="numpy")
        except Exception as e:  # a run-time error is shown, never raised into the UI
            late = _out_of_time(e)
            if late is not None:  # the executor names the op it stopped in: the time limit is the news
                hint = ": does the condition ever become false?" if self.opdef.opcode == "while" else ""
                outcome.not_run = f"{self.name}: the run was {late}{hint}"
            else:
                outcome.not_run = f"{type(e).__name__}: {e}"
        return outcome

    def _call_arguments(self, b, values, devices=None):
        """(positional args, keyword args, parameter XlaOps, operand values) of the call;
        ``devices``: the values stacked for that many simulated devices."""
        number, params, arrays = 0, {}, []
        self._names, self._attrs = [], {}

        def parameter(name, src):
            nonlocal number
            value = operand_value(src, name, devices)
            # an HLO name for start_indices[1]: start_indices.1
            op = Parameter(b, number, src.parsed_shape(name), name.replace("[", ".").replace("]", ""))
            number += 1
            arrays.append(value)
            self._names.append(name)
            return op

        given = {}
        for arg in self.args:
            v = values.get(arg.name)
            if arg.kind == "array":
                given[arg.name] = parameter(arg.name, v)
            elif arg.kind in ("arrays", "scalars"):
                given[arg.name] = [parameter(f"{arg.name}[{k}]", s) for k, s in enumerate(v)]
            elif arg.kind in ("computation", "computations"):
                c = self._computation(arg, v, values)
                if c is not None:
                    given[arg.name] = c
            elif v is None and not arg.required:
                continue  # left to the function's default
            else:
                given[arg.name] = _python_value(arg, v)
            if arg.name in given and arg.kind not in _args.OPERAND_KINDS:
                self._attrs[arg.name] = given[arg.name]
        if self.explicit_signature is not None:
            return [given[a.name] for a in self.args if a.name in given], {}, params, arrays
        sig = inspect.signature(self.function)
        bound = sig.bind_partial()
        if "builder" in sig.parameters:
            bound.arguments["builder"] = b
        for p in sig.parameters.values():
            if p.name in given:
                bound.arguments[p.name] = tuple(given[p.name]) if p.kind is p.VAR_POSITIONAL else given[p.name]
        return list(bound.args), dict(bound.kwargs), params, arrays

    def _computation(self, arg, v, values):
        if arg.kind == "computations":
            n = _length_of(self.by_name, values, arg.of, count=True) if arg.of else len(v or ())
            labels = list(v or ())
            return [self.choices(arg, values)[label] for label in labels[:n]]
        if v in (None, DEFAULT):
            if arg.required:
                raise ShapeError(f"{self.name}: {arg.name} is required; pick one")
            return None
        choices = self.choices(arg, values)
        if v not in choices and arg.region in _args.EXPRESSION_REGIONS and isinstance(v, str):
            try:  # an expression typed by hand
                return _args.expression(v)
            except SyntaxError as e:
                raise ShapeError(f"{self.name}: {arg.name}: cannot read {v!r} as a Python expression of the "
                                 f"state x ({e.msg})") from None
        if v not in choices:
            raise ShapeError(f"{self.name}: {arg.name}={v!r} is not one of {', '.join(choices)}")
        return choices[v]

    def choices(self, arg, values=None):
        """The choices of an enum, dtype or computation argument ({label: value} for a
        computation; labels otherwise), "(default)" first where the argument is optional."""
        arg = self.by_name[arg] if isinstance(arg, str) else arg
        values = self.values if values is None else values
        if arg.kind in ("computation", "computations"):
            out = {DEFAULT: None} if arg.kind == "computation" and not arg.required else {}
            out.update(_args.region_choices(arg.region, self._region_arity(arg, values),
                                            self._region_shape(arg, values)))
            return out
        if arg.kind == "dtype":
            return ((DEFAULT,) if not arg.required else ()) + tuple(arg.choices or ELEMENT_TYPES)
        if arg.kind == "enum":
            return ((None,) if not arg.required and arg.default is None else ()) + tuple(arg.choices)
        return ()

    def _region_arity(self, arg, values):
        """How many operands a computation argument combines (Reduce of N operands: N)."""
        arrays = [a for a in self.args if a.kind == "arrays"]
        if arg.kind == "computations":
            return 1  # a branch takes its one operand
        if arg.region in ("reducer", "function") and arrays:
            return max(1, len(values.get(arrays[0].name) or ()))
        return 1

    def _region_shape(self, arg, values):
        """The shape of a computation's one parameter where its choices depend on it (a
        While's loop state, a Conditional branch's operand): the first operand's; else None."""
        if arg.region not in _args.EXPRESSION_REGIONS + ("function",):
            return None
        ref = self.by_name.get(arg.of) if arg.of in self.by_name else \
            next((a for a in self.args if a.kind in ("array", "arrays")), None)
        v = values.get(ref.name) if ref is not None else None
        src = v[0] if isinstance(v, (list, tuple)) and v else v
        if not isinstance(src, Source):
            return None
        try:
            return src.parsed_shape()
        except ShapeError:
            return None

    # -- what would be legal ---------------------------------------------------------------

    def legal_values(self, name, error, budget=48):
        """Text saying which values of argument ``name`` would make the call legal, all else
        kept, found by building the call with nearby values (shape inference only)."""
        arg = self.by_name.get(name)
        if arg is None:
            return ""
        candidates = list(_candidates(arg, self.values.get(name), error, self))[:budget]
        tried = [int(v) for label, _ in candidates for v in [label.partition(" = ")[2]] if re.fullmatch(r"-?\d+", v)]
        good = []
        for label, value in candidates:
            trial = dict(self.values)
            trial[name] = value
            conform(self.args, trial, fixed={name})
            if self.build(trial).ok:
                good.append(label)
        return _summarise(good, top=max(tried) if tried else None)


def _out_of_time(e):
    """The ``progress.OutOfTime`` that ``e`` is or was raised from (None if none)."""
    while e is not None:
        if isinstance(e, progress.OutOfTime):
            return e
        e = e.__cause__ or e.__context__
    return None


def _closest(label, choices):
    """``label`` where it is a choice, else the same function in the new choices ("Neg" and
    "Neg (each element)" for an array and a tuple operand), else the first choice."""
    if label in choices:
        return label
    base = label[:-len(_args.EACH)] if label.endswith(_args.EACH) else label
    for c in (base, base + _args.EACH):
        if c in choices:
            return c
    return next(iter(choices))


def _summarise(good, most=6, top=None):
    """``["k = 0", "k = 1", "k = 2", "d = s32"]`` -> ``"legal here: k = 0..2; d = s32"``
    (a run of integers reaching ``top``, the largest tried, reads "0 or more")."""
    if not good:
        return ""
    keyed = {}
    for label in good:
        key, _, value = label.partition(" = ")
        if value not in keyed.setdefault(key, []):
            keyed[key].append(value)
    parts = []
    for key, values in keyed.items():
        if all(re.fullmatch(r"-?\d+", v) for v in values):
            text = _ranges(sorted({int(v) for v in values}), top)
        else:
            text = " or ".join(values[:most]) + (" ..." if len(values) > most else "")
        parts.append(f"{key} = {text}")
    return "legal here: " + "; ".join(parts[:most]) + (" ..." if len(parts) > most else "")


def _ranges(ints, top=None):
    runs, start = [], ints[0]
    for a, b in zip(ints, ints[1:] + [None]):
        if b != a + 1:
            if a == top and start != a:
                runs.append(f"{start} or more")
            else:
                runs.append(str(start) if start == a else f"{start}..{a}")
            start = b
    return ", ".join(runs)


def _candidates(arg, value, error, call):
    """(label, value) pairs to try for argument ``arg`` now ``value``."""
    kind = arg.kind
    rank = _max_rank(call)
    ints = range(-1, max(8, 2 * _max_size(call)) + 1)
    if kind in ("int", "dim"):
        for i in ints:
            if i != value:
                yield f"{arg.name} = {i}", i
    elif kind == "bool":
        yield f"{arg.name} = {not value}", (not value)
    elif kind in ("enum", "dtype", "computation"):
        for c in call.choices(arg):
            if c != value:
                yield f"{arg.name} = {c}", c
    elif kind in _args.PER_DIMENSION and isinstance(value, (list, tuple)) and \
            _length_of(call.by_name, call.values, arg.of) not in (None, len(value) + arg.drop):
        trial = dict(call.values)
        conform(call.args, trial)
        yield f"{arg.name} = {list(trial[arg.name])}", trial[arg.name]
    elif kind in ("sizes", "dims") and isinstance(value, (list, tuple)):
        m = re.search(re.escape(arg.name) + r"\[(\d+)\]", error)
        if m and int(m.group(1)) < len(value):
            k = int(m.group(1))
            for i in ints:
                if i != value[k]:
                    yield f"{arg.name}[{k}] = {i}", tuple(value[:k]) + (i,) + tuple(value[k + 1:])
        elif kind == "dims":
            for k in range(len(value)):
                shorter = tuple(value[:k]) + tuple(value[k + 1:])
                yield f"{arg.name} = {list(shorter)}", shorter
            for i in range(rank + 1):
                longer = tuple(value) + (i,)
                yield f"{arg.name} = {list(longer)}", longer
            for k in range(len(value)):
                for i in range(rank + 1):
                    if i != value[k]:
                        other = tuple(value[:k]) + (i,) + tuple(value[k + 1:])
                        yield f"{arg.name} = {list(other)}", other
    elif kind in ("padding", "padding_config") and isinstance(value, (list, tuple)):
        m = re.search(re.escape(arg.name) + r"\[(\d+)\]", error)
        rows = [int(m.group(1))] if m and int(m.group(1)) < len(value) else range(len(value))
        for k in rows:
            for j in range(len(value[k])):
                for i in range(-2, 9):
                    if i != value[k][j]:
                        entry = tuple(value[k][:j]) + (i,) + tuple(value[k][j + 1:])
                        yield (f"{arg.name}[{k}][{j}] = {i}",
                               tuple(value[:k]) + (entry,) + tuple(value[k + 1:]))
    elif kind == "array" and isinstance(value, Source):
        try:
            shape = value.parsed_shape(arg.name)
        except ShapeError:
            return
        others = [call.values[a.name] for a in call.args if a.kind == "array" and a.name != arg.name]
        for o in others:
            if o.shape != value.shape:
                yield f"{arg.name} = {o.shape}", replace(value, shape=o.shape)
        if not shape.is_tuple:
            for t in ELEMENT_TYPES:
                if t != shape.element_type:
                    text = str(Shape(t, shape.dims))
                    yield f"{arg.name} = {text}", replace(value, shape=text)
            if shape.dims:
                yield f"{arg.name} = {Shape(shape.element_type, ())}", replace(value, shape=str(Shape(shape.element_type, ())))


def _max_rank(call):
    ranks = [0]
    for a in call.args:
        for src in _sources(a, call.values.get(a.name)):
            try:
                s = src.parsed_shape()
                ranks.append(0 if s.is_tuple else len(s.dims))
            except ShapeError:
                pass
    return max(ranks)


def _max_size(call):
    sizes = [0]
    for a in call.args:
        for src in _sources(a, call.values.get(a.name)):
            try:
                s = src.parsed_shape()
                sizes.extend(d for d in ([] if s.is_tuple else s.dims) if d is not None)
            except ShapeError:
                pass
    return min(max(sizes), 32)


def _sources(arg, value):
    if arg.kind == "array" and isinstance(value, Source):
        return [value]
    if arg.kind in ("arrays", "scalars"):
        return [v for v in value or () if isinstance(v, Source)]
    return []


def blame(message, args, prefer=None):
    """The argument an error message is about: ``prefer`` (the one just changed) when the
    message names it, else the first argument it names (after the op's name), as a word or
    indexed (``slice_sizes[1]``); "" when it names none."""
    body = message.split(":", 1)[1] if ":" in message else message

    def named(name):
        return re.search(r"(?<![\w.])" + re.escape(name) + r"(?![\w])", body)
    # "Reduce: computation: ...", "Gather: slice_sizes[1]=5 ...": the argument the rule is about
    lead = re.match(r"\s*(\w+)\s*(?:\[|=|:)", body)
    if lead and lead.group(1) in {a.name for a in args}:
        return lead.group(1)
    if prefer and named(prefer):
        return prefer
    best, where = "", len(body) + 1
    for a in args:
        m = named(a.name)
        if m and m.start() < where:
            best, where = a.name, m.start()
    return best


# -- values: starting values, normalising, per-dimension lengths -------------------------------------

def _normalise(arg, value):
    """A value as the call keeps it (Sources for arrays, tuples for lists)."""
    if arg.kind == "array":
        return _source(value)
    if arg.kind in ("arrays", "scalars"):
        return [_source(v) for v in (value or ())]
    if arg.kind in ("sizes", "dims", "flags") and isinstance(value, (list, tuple, np.ndarray)):
        return tuple(bool(x) if arg.kind == "flags" else int(x) for x in value)
    if arg.kind in ("padding", "padding_config") and isinstance(value, (list, tuple)):
        return tuple(tuple(int(x) for x in t) for t in value)
    if arg.kind == "computations":
        return tuple(value or ())
    if arg.kind == "groups" and isinstance(value, (list, tuple)):
        return tuple(tuple(int(x) for x in g) for g in value)
    return value


def as_source(v):
    """An operand as the playground keeps it: a ``Source`` from a shape text (``"f32[2,3]"``),
    a ``(shape text, values)`` pair, an array (its values typed) or a dict of fields."""
    return _source(v)


def _source(v):
    if isinstance(v, Source):
        return v
    if isinstance(v, str):
        return Source(shape=v)
    if isinstance(v, Shape):
        return Source(shape=str(v))
    if isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], str):
        return Source(shape=v[0], source="typed", typed=repr(np.asarray(v[1]).tolist()))
    if isinstance(v, dict):
        return Source(**v)
    if isinstance(v, (np.ndarray, np.generic)):
        a = np.asarray(v)
        return Source(shape=str(Shape.of(a)), source="typed", typed=repr(a.tolist()))
    raise ShapeError(f"an operand is a shape text (\"f32[2,3]\"), a (shape, values) pair or a Source; got {v!r}")


def _python_value(arg, v):
    if arg.kind == "padding" and isinstance(v, str):
        return v
    if arg.kind in ("sizes", "dims", "flags") and v is not None:
        return list(v)
    if arg.kind in ("padding", "padding_config") and v is not None:
        return [tuple(t) for t in v]
    if arg.kind == "groups" and v is not None:
        return [list(g) for g in v]
    if arg.kind == "literal":
        return _literal(ast.parse(str(v), mode="eval").body) if isinstance(v, str) else v
    return v


def _rank_of(src):
    try:
        s = src.parsed_shape()
    except ShapeError:
        return None
    return None if s.is_tuple else len(s.dims)


def _length_of(by_name, values, of, count=False):
    """How many entries a per-dimension argument following ``of`` has: its rank, or with
    ``count`` (a list of operands or branches following a list) its length; None: unknown."""
    if of is None or of not in by_name:
        return None
    ref, v = by_name[of], values.get(of)
    if count:
        return len(v) if isinstance(v, (list, tuple)) else None
    if ref.kind == "array" and isinstance(v, Source):
        return _rank_of(v)
    if ref.kind == "arrays" and v:
        return _rank_of(v[0])
    if ref.kind in ("dims", "sizes", "flags", "scalars", "computations") and isinstance(v, (list, tuple)):
        return len(v)
    return None


def _fill(arg):
    if arg.fill is not None:
        return arg.fill
    return {"scalars": Source("s32[]", "typed", 0, "0"), "sizes": 1, "padding": (0, 0),
            "padding_config": (0, 0, 0), "flags": False}.get(arg.kind)


def conform(args, values, fixed=()):
    """Give each per-dimension argument one entry per dimension of the array it follows
    (entries cut, or added with the argument's fill); returns the names it changed."""
    by_name = {a.name: a for a in args}
    changed = set()
    for a in args:
        # per-dimension lists; branch lists and operand lists that follow another list
        if a.name in fixed or a.kind not in _args.PER_DIMENSION + ("computations", "arrays") or not a.of:
            continue
        v = values.get(a.name)
        if v is None or isinstance(v, str):  # left to the default, or "SAME" / "VALID"
            continue
        n = _length_of(by_name, values, a.of, count=a.kind in ("computations", "arrays"))
        if n is None:
            continue
        n = max(0, n - a.drop)
        v = list(v)
        if len(v) != n:
            fill = _fill(a) if a.kind not in ("computations", "arrays") else (v[-1] if v else None)
            values[a.name] = _normalise(a, (v + [fill] * n)[:n]) if fill is not None or len(v) > n else values[a.name]
            changed.add(a.name)
    return changed


def _default_value(arg):
    if arg.kind == "array":
        return Source()
    if arg.kind == "arrays":
        return [Source()]
    if arg.kind == "scalars":
        return []
    if arg.kind == "computation":
        return None if not arg.required else next(iter(_args.region_choices(arg.region, 1)))
    if arg.kind == "computations":
        return ()
    if not arg.required and arg.kind in _args.PER_DIMENSION:
        return ()  # filled per dimension by conform (strides 1, no padding, no reversal)
    if not arg.required:
        return arg.default
    return {"enum": (arg.choices or (None,))[0], "dtype": "f32", "dim": 0, "dims": (), "sizes": (),
            "padding": (), "padding_config": (), "flags": (), "int": arg.minimum or 0, "float": 0.0,
            "bool": False, "str": "", "shape": "f32[2,3]", "groups": (), "literal": "0"}[arg.kind]


_STARTING = {}


def starting_values(opcode):
    """The values a playground of ``opcode`` starts with: its declared example, or defaults
    (with the first element type the op accepts); a copy, to change at will."""
    if opcode not in _STARTING:
        _STARTING[opcode] = _find_start(opcode)
    return dict(_STARTING[opcode])


def _find_start(opcode):
    args = _args.arguments(opcode)
    values = {a.name: _normalise(a, _default_value(a)) for a in args}
    example = _args.example(opcode)
    if example:
        for name, v in example.items():
            values[name] = _normalise({a.name: a for a in args}[name], v)
    conform(args, values)
    if example:
        return values
    # no example: the defaults, with the first element type the op takes for every operand
    call = OpCall.__new__(OpCall)
    call._describe(opcode)
    for t in _TRIED_TYPES:
        trial = {k: _retype(a, v, t) for a in args for k, v in [(a.name, values[a.name])]}
        if call.build(trial).ok:
            return trial
    return values


def _retype(arg, value, t):
    if arg.kind == "array":
        return replace(value, shape=value.shape.replace("f32", t, 1))
    if arg.kind == "arrays":
        return [replace(v, shape=v.shape.replace("f32", t, 1)) for v in value]
    return value


def _elements(shape):
    if shape is None:
        return 0
    if shape.is_tuple:
        return sum(_elements(s) for s in shape.tuple_shapes)
    return int(np.prod([d or 0 for d in shape.dims], dtype=np.int64))


def _readable_names(comp):
    """``gather``, ``add.2``, ``while_body`` rather than ``gather.351``, ``while_body.874``
    (builders number names across all builders); unique in the module, the entry's first.
    The entry's parameters keep the arguments' names."""
    taken = {}

    def fresh(base):
        k = taken[base] = taken.get(base, 0) + 1
        return base if k == 1 else f"{base}.{k}"
    entry = comp.entry
    for inst in entry.parameters:
        taken[inst.name] = 1
    for c in [entry] + [c for c in comp.computations if c is not entry]:
        if c is not entry:
            c.name = fresh(re.sub(r"\.\d+$", "", c.name))
        for inst in c.instructions:
            if c is entry and inst.opcode == "parameter":
                continue
            inst.name = fresh(inst.opcode if inst.opcode != "parameter" else re.sub(r"[._]\d+$", "", inst.name))


def _own_instruction(comp, opcode):
    insts = comp.entry.instructions
    for inst in reversed(insts):
        if inst.opcode == opcode:
            return inst.name
    return comp.entry.root.name


def buildable(op):
    """True when the playground builds ``op`` from its starting values; else the reason."""
    try:
        call = OpCall(op)
    except NotImplementedError as e:
        return str(e)
    outcome = call.build()
    return True if outcome.ok else outcome.error


__all__ = ["OpCall", "Outcome", "RECORDED_BY", "Source", "as_source", "operand_value", "blame", "conform", "starting_values", "buildable",
           "MAX_ELEMENTS", "SOURCES", "ELEMENT_TYPES"]
