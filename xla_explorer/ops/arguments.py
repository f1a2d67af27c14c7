"""The arguments of each op's public function, described for tools that make calls.

A playground control, an example generator or a form needs, per argument of ``Gather``,
more than a Python signature says: that ``operand`` is an array, that ``slice_sizes``
holds one integer per dimension of ``operand``, that ``comparison_direction`` is one of
six words.  Most of it the library already states, and is read from there:

- the public function's signature: the names, their order and their defaults;
- the shape rule's positional parameters: which arguments are operands (arrays);
- the op's attribute schema (``Attr``, ``Window``, ``PaddingConfig``...): each keyword's
  kind (``arg_kinds``), an enum's ``choices``, an integer's ``minimum``.

What none of those say, a family module declares next to the op with
``describe(opcode, example=..., **hints)``: the kind of an argument that is no HLO
attribute (``new_element_type`` is a dtype), the array a per-dimension list follows
(``of=``), and a legal example call to start from.

Kinds (``Arg.kind``):

==============  ================================================================
array           one array operand
arrays          a list of array operands (a ``*args`` parameter or a list)
scalars         one integer scalar operand per dimension of ``of`` (dynamic starts)
computation     a sub-computation, picked from ``region_choices(arg.region, n)``
computations    a list of them (Conditional's branches)
enum            one of ``choices``
dtype           an element type
dim             one dimension number of ``of``
dims            a list of integers of any length (dimension numbers, mostly)
sizes           one integer per dimension of ``of`` (per element, when ``of`` is a list)
padding         a (low, high) pair per dimension of ``of``, or "SAME" / "VALID"
padding_config  a (low, high, interior) triple per dimension of ``of``
flags           one bool per dimension of ``of``
int, float, bool, str
shape           a shape, as text (``"f32[2,3]"``)
groups          lists of device ids (replica groups, source-target pairs)
literal         the value of a constant (a Python literal)
==============  ================================================================
"""
import inspect
from dataclasses import dataclass, field, replace

import numpy as np

from . import registry

KINDS = ("array", "arrays", "scalars", "computation", "computations", "enum", "dtype", "dim", "dims", "sizes",
         "padding", "padding_config", "flags", "int", "float", "bool", "str", "shape", "groups", "literal")
#: kinds whose value is made of operands (the arrays a computation is built on)
OPERAND_KINDS = ("array", "arrays", "scalars")
#: kinds with one entry per dimension of the array ``of``
PER_DIMENSION = ("scalars", "sizes", "padding", "padding_config", "flags")

REQUIRED = inspect.Parameter.empty


@dataclass(frozen=True)
class Arg:
    """One argument of an op's public function."""

    name: str
    kind: str
    default: object = REQUIRED
    #: enum: the values; dtype: the element types offered
    choices: tuple = None
    #: the array argument whose rank (per-dimension kinds) or dimensions (dim, dims) this follows
    of: str = None
    minimum: int = None
    #: computation: which family of sub-computations fits ("reducer", "comparator", ...)
    region: str = None
    #: per-dimension kinds: the entry a new dimension gets (sizes: 1, a window's neutral size)
    fill: object = None
    #: per-dimension kinds: how many of ``of``'s dimensions have no entry (a convolution's
    #: window covers its rank - 2 spatial dimensions)
    drop: int = 0
    doc: str = ""

    @property
    def required(self):
        return self.default is REQUIRED


@dataclass
class _Description:
    hints: dict = field(default_factory=dict)
    example: dict = None
    #: the arguments in call order, when the signature cannot say (``Conditional(*args)``)
    signature: tuple = None


_DESCRIPTIONS = {}


def describe(opcode, example=None, signature=None, **hints):
    """Declare what the signature and the schema do not say about an op's arguments.

    ``hints``: argument name -> ``Arg`` fields as a dict (``of="operand"``, ``kind="dtype"``).
    ``example``: argument name -> value of a legal call; an array is a shape text
    (``"f32[3,4]"``) or ``(shape text, values)``, a list of arrays a list of those.
    ``signature``: the ``Arg``s in call order, for a function taking ``*args``.
    """
    d = _DESCRIPTIONS.setdefault(opcode, _Description())
    d.hints.update(hints)
    if example is not None:
        d.example = dict(example)
    if signature is not None:
        d.signature = tuple(signature)


def example(opcode):
    """The declared example call of an op (argument name -> value), or None."""
    registry.all_ops()
    d = _DESCRIPTIONS.get(opcode)
    return dict(d.example) if d and d.example else None


def op_function(opdef):
    """The public function of an op (``xla_explorer.Gather``), found by its registry name."""
    import importlib
    for module in ("xla_explorer.ops", "xla_explorer"):
        fn = getattr(importlib.import_module(module), opdef.name or "", None)
        if callable(fn):
            return fn
    return None


def _schema_kinds(opdef):
    kinds, extra = {}, {}
    for a in opdef.attrs:
        for kw, kind in getattr(a, "arg_kinds", {}).items():
            kinds[kw] = kind
            extra[kw] = {"choices": getattr(a, "choices", None), "minimum": getattr(a, "minimum", None)}
    return kinds, extra


def _shape_rule_operands(opdef):
    try:
        params = inspect.signature(opdef.shape_rule).parameters.values()
    except (TypeError, ValueError):
        return set()
    return {p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)}


def _operand_names():
    from ..builder import _OPERAND_ARGS  # the names the public functions give their operands
    return _OPERAND_ARGS


_PLURAL = {"operands", "init_values", "elements", "args", "tokens", "dim_sizes"}


class NotDescribed(NotImplementedError):
    """An op whose arguments cannot be described yet: says which argument and why."""


def arguments(op):
    """The ``Arg``s of an op's public function in call order (``op``: opcode or API name).
    Raises ``NotDescribed`` naming the argument no rule or hint describes."""
    opdef = _opdef(op)
    d = _DESCRIPTIONS.get(opdef.opcode, _Description())
    if d.signature is not None:
        return d.signature
    fn = op_function(opdef)
    if fn is None:
        raise NotDescribed(f"{opdef.opcode}: no public function (it appears in HLO text only)")
    kinds, extra = _schema_kinds(opdef)
    rule_operands = _shape_rule_operands(opdef)
    out = []
    for p in inspect.signature(fn).parameters.values():
        if p.name == "builder" or p.kind is p.VAR_KEYWORD:
            continue
        hint = dict(d.hints.get(p.name, {}))
        if hint.get("kind") == "skip":
            continue
        default = p.default if p.kind is not p.VAR_POSITIONAL else ()
        kind = hint.pop("kind", None)
        if kind is None:
            if p.kind is p.VAR_POSITIONAL or p.name in _PLURAL:
                kind = "arrays"
            elif p.name in kinds:
                kind = kinds[p.name]
            elif p.name in rule_operands or p.name in _operand_names():
                kind = "array"
            elif p.kind is p.KEYWORD_ONLY and default is not REQUIRED:
                continue  # an alternative spelling of another argument (all_gather_dimension=)
            else:
                raise NotDescribed(f"{opdef.name}: argument {p.name!r} is neither an operand nor in the "
                                   f"attribute schema; describe it (ops.arguments.describe)")
        fields = {k: v for k, v in extra.get(p.name, {}).items() if v is not None}
        fields.update(hint)
        if kind in ("computation", "computations") and "region" not in fields:
            fields["region"] = "reducer" if kind == "computation" else "function"
        out.append(Arg(p.name, kind, default, **fields))
    first_array = next((a.name for a in out if a.kind in ("array", "arrays")), None)
    return tuple(replace(a, of=first_array) if a.of is None and a.kind in PER_DIMENSION + ("dim", "dims") else a
                 for a in out)


def _opdef(op):
    ops = registry.all_ops()
    if op in ops:
        return ops[op]
    if op in registry.NAMES:
        return ops[registry.NAMES[op]]
    raise NotImplementedError(f"unknown op {op!r}: give an HLO opcode (\"gather\") or an API name (\"Gather\")")


# -- sub-computations a control can offer ----------------------------------------------------

#: the binary ops offered first as a reduction's computation (the others follow, by name)
_REDUCERS_FIRST = ("Add", "Max", "Min", "Mul", "And", "Or")
_DIRECTIONS = ("LT", "GT", "LE", "GE", "EQ", "NE")


def _binary_functions():
    ops = registry.all_ops()
    names = sorted(ops[oc].name for oc in registry.CATEGORIES.get("binary", ()) if oc in ops)
    first = [n for n in _REDUCERS_FIRST if n in names]
    from .. import ops as api
    return {n: getattr(api, n) for n in first + [n for n in names if n not in first]}


def _unary_functions():
    ops = registry.all_ops()
    names = sorted(ops[oc].name for oc in registry.CATEGORIES.get("unary", ()) if oc in ops)
    from .. import ops as api
    first = [n for n in ("Neg", "Abs", "Exp", "Sqrt") if n in names]
    return {n: getattr(api, n) for n in first + [n for n in names if n not in first]}


def region_choices(region, n=1, shape=None):
    """{label: Python callable} for a computation argument of family ``region`` on ``n``
    operands; each callable is made of the library's op functions and traced by the op.
    ``shape``: the shape of the one parameter, where it matters (a tuple loop state, a
    tuple branch operand); None: an array.

    - ``reducer`` (Reduce, ReduceWindow, Scatter, AllReduce; SelectAndScatter's scatter):
      a binary op, applied to each of the n (accumulator, value) pairs;
    - ``comparator`` (Sort): ``Compare(lhs_0, rhs_0, direction)``;
    - ``select`` (SelectAndScatter): ``Compare(a, b, direction)``;
    - ``predicate`` (While's condition) and ``body`` (its body): Python expressions of the
      loop state ``x`` (``EXPRESSION_REGIONS``: the label is the code, see ``expression``),
      element by element for a tuple state (``x[0] < 10``, ``(x[0] + 1, x[1] * 2)``);
    - ``function`` (Map, Call, Conditional's branches): a unary op (n = 1; on a tuple
      operand, applied to each element), or a binary op folded over the n arguments;
    - ``scanner`` (Scan): a binary op of the slice and the carry, returned as the output slice
      and the new carry (a running sum, product, maximum...).
    """
    if region == "reducer":
        return {name: _pairwise(fn, n) for name, fn in _binary_functions().items()}
    if region in ("comparator", "select"):
        from .. import ops as api
        directions = _DIRECTIONS if region == "comparator" else ("GE", "GT", "LE", "LT", "EQ", "NE")
        return {f"Compare(a, b, {d!r})": (lambda d: lambda *p: api.Compare(p[0], p[1], d))(d) for d in directions}
    if region in EXPRESSION_REGIONS:
        return {text: expression(text) for text in _expressions(region, shape)}
    if region == "scanner":   # Scan: (slice, carry) -> (output slice, new carry), a running fold
        return {f"running {name}": _running(fn) for name, fn in _binary_functions().items()}
    if region == "function":
        if n == 1 and shape is not None and shape.is_tuple:
            return {name + EACH: _each(fn) for name, fn in _unary_functions().items()}
        if n == 1:
            return dict(_unary_functions())
        return {name: _folded(fn) for name, fn in _binary_functions().items()}
    raise ValueError(f"unknown computation family {region!r}")


# -- computations as expressions of the parameter ``x`` --------------------------------------------

#: a unary function applied to each element of a tuple operand is labelled "Neg" + EACH
EACH = " (each element)"
#: computation families whose choices are Python expressions of ``x``, which a student may edit
EXPRESSION_REGIONS = ("predicate", "body")
_NO_ITERATION = "False  # no iteration"


def _numeric(s):
    """An element a preset computes with: a real (non-pred, non-complex) array."""
    return s.is_array and s.element_type != "pred" and not s.element_type.startswith("c")


def _expressions(region, shape):
    """The preset expressions of a loop state of ``shape`` (None: an array)."""
    if shape is None or not shape.is_tuple:
        if region == "predicate":
            return ["max(x) < 10", "sum(x) < 100", _NO_ITERATION]
        return ["x + 1", "x * 2", "x + x"]
    elements = list(shape.tuple_shapes)
    numeric = [k for k, s in enumerate(elements) if _numeric(s)]
    if region == "predicate":
        out = []
        for k in numeric:
            out += [f"x[{k}] < 10"] if elements[k].rank == 0 else [f"max(x[{k}]) < 10", f"sum(x[{k}]) < 100"]
        return out + [_NO_ITERATION]
    changes = [k for k, s in enumerate(elements) if s.is_array and s.element_type != "pred"]

    def state(fn):
        parts = [fn(k) if k in changes else f"x[{k}]" for k in range(len(elements))]
        return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"
    if not changes:
        return ["x"]
    out = [state(lambda k: f"x[{k}] + 1")]
    if len(changes) > 1:
        out.append(state(lambda k: f"x[{k}] + 1" if k == changes[0] else f"x[{k}] * 2"))
    out.append(state(lambda k: f"x[{k}] * 2"))
    return out


class _TupleState:
    """A tuple-shaped parameter as an expression sees it: ``x[k]`` is its element k (a
    GetTupleElement, recorded when used), ``len(x)``; returned whole, the parameter itself."""

    def __init__(self, op):
        self.op = op

    def __getitem__(self, k):
        from .. import ops as api
        n = len(self.op.shape.tuple_shapes)
        if not isinstance(k, int) or not -n <= k < n:
            raise IndexError(f"x[{k!r}]: the state {self.op.shape} has elements 0..{n - 1}")
        return api.GetTupleElement(self.op, k % n)

    def __len__(self):
        return len(self.op.shape.tuple_shapes)

    def __iter__(self):
        return (self[k] for k in range(len(self)))


def _reduce_all(fn, identity):
    def reduce(x):
        from .. import dtypes
        from .. import ops as api
        if isinstance(x, _TupleState):
            raise TypeError(f"{fn.__name__.lower()}(x) of a tuple state: reduce one element, as in "
                            f"{fn.__name__.lower()}(x[1])")
        if not hasattr(x, "shape") or x.shape.rank == 0:
            return x
        t = x.shape.element_type
        init = identity(dtypes.to_numpy(t)) if t != "pred" else np.bool_(identity is _lowest)
        return api.Reduce(x, np.asarray(init, dtype=dtypes.to_numpy(t)), fn, dimensions=list(range(x.shape.rank)))
    return reduce


def _lowest(dt):
    return np.iinfo(dt).min if np.issubdtype(dt, np.integer) else -np.inf


def _highest(dt):
    return np.iinfo(dt).max if np.issubdtype(dt, np.integer) else np.inf


_NAMESPACE = {}


def _namespace():
    """What an expression may use: ``x``, every public op function, ``np``, and ``max``,
    ``min``, ``sum`` of a whole array (a Reduce to a scalar)."""
    if not _NAMESPACE:
        import xla_explorer as xe
        from .. import ops as api
        _NAMESPACE.update({n: getattr(api, n) for n in dir(api) if n[:1].isupper() and callable(getattr(api, n))})
        _NAMESPACE.update(np=np, xe=xe, max=_reduce_all(api.Max, _lowest), min=_reduce_all(api.Min, _highest),
                          sum=_reduce_all(api.Add, lambda dt: 0), len=len)
    return _NAMESPACE


def expression(text, param="x"):
    """A Python callable of one parameter computing ``text``, an expression of ``param``
    (``"x[0] < 10"``, ``"(x[0] + 1, x[1] * 2)"``), for an op to trace; a tuple-shaped
    parameter is indexed element by element.  A text that is not an expression raises
    ``SyntaxError``; a name it does not know fails when traced, naming it."""
    code = compile(text.strip(), f"<{text.strip()}>", "eval")
    namespace = _namespace()

    def computation(p):
        arg = _TupleState(p) if p.shape.is_tuple else p
        try:
            out = eval(code, {"__builtins__": {}, **namespace}, {param: arg})  # noqa: S307 - the student's own code
        except NameError as e:
            raise NameError(f"{e}: the expression may use {param} (the parameter), np, the op functions "
                            "(Add, Select, ...), max, min and sum") from None
        if isinstance(out, _TupleState):
            return out.op
        if isinstance(out, tuple):
            return tuple(o.op if isinstance(o, _TupleState) else o for o in out)
        return out
    computation.__name__ = "expression"
    computation.text = text
    return computation


def _each(fn):
    def each(x):
        from .. import ops as api
        return api.Tuple(*[fn(api.GetTupleElement(x, k)) for k in range(len(x.shape.tuple_shapes))])
    each.__name__ = f"{fn.__name__}_each"
    return each


def _running(fn):
    def scanner(x, carry):
        new = fn(x, carry)
        return new, new
    scanner.__name__ = f"running_{fn.__name__}"
    return scanner


def _pairwise(fn, n):
    if n == 1:
        return fn

    def reducer(*p):
        return tuple(fn(p[i], p[n + i]) for i in range(n))
    reducer.__name__ = f"{fn.__name__}_x{n}"
    return reducer


def _folded(fn):
    def folded(*p):
        acc = p[0]
        for x in p[1:]:
            acc = fn(acc, x)
        return acc
    folded.__name__ = fn.__name__
    return folded
