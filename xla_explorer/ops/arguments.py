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


def _typed(p, v):
    """``v`` as a scalar of ``p``'s element type (for constants inside a traced region)."""
    from .. import dtypes
    return np.asarray(v, dtype=dtypes.to_numpy(p.shape.element_type))


def region_choices(region, n=1):
    """{label: Python callable} for a computation argument of family ``region`` on ``n``
    operands; each callable is made of the library's op functions and traced by the op.

    - ``reducer`` (Reduce, ReduceWindow, Scatter, AllReduce; SelectAndScatter's scatter):
      a binary op, applied to each of the n (accumulator, value) pairs;
    - ``comparator`` (Sort): ``Compare(lhs_0, rhs_0, direction)``;
    - ``select`` (SelectAndScatter): ``Compare(a, b, direction)``;
    - ``predicate`` (While's condition) and ``body`` (its body), on an array state;
    - ``function`` (Map, Call, Conditional's branches): a unary op (n = 1), or a binary op
      folded over the n arguments;
    - ``scanner`` (Scan): a binary op of the slice and the carry, returned as the output slice
      and the new carry (a running sum, product, maximum...).
    """
    from .. import ops as api
    if region == "reducer":
        return {name: _pairwise(fn, n) for name, fn in _binary_functions().items()}
    if region in ("comparator", "select"):
        directions = _DIRECTIONS if region == "comparator" else ("GE", "GT", "LE", "LT", "EQ", "NE")
        return {f"Compare(a, b, {d!r})": (lambda d: lambda *p: api.Compare(p[0], p[1], d))(d) for d in directions}
    if region == "predicate":
        def reduce_all(x, fn, init):
            return api.Reduce(x, _typed(x, init), fn, dimensions=list(range(len(x.shape.dims))))
        return {
            "max(x) < 10": lambda x: api.Lt(reduce_all(x, api.Max, np.iinfo(np.int32).min if x.shape.element_type[0]
                                                       in "su" else -np.inf), _typed(x, 10)),
            "sum(x) < 100": lambda x: api.Lt(reduce_all(x, api.Add, 0), _typed(x, 100)),
            "false (no iteration)": lambda x: api.Ne(_typed(x, 0), _typed(x, 0)),
        }
    if region == "scanner":   # Scan: (slice, carry) -> (output slice, new carry), a running fold
        return {f"running {name}": _running(fn) for name, fn in _binary_functions().items()}
    if region == "body":
        return {"x + 1": lambda x: api.Add(x, _typed(x, 1)), "x * 2": lambda x: api.Mul(x, _typed(x, 2)),
                "x + x": lambda x: api.Add(x, x)}
    if region == "function":
        if n == 1:
            return dict(_unary_functions())
        return {name: _folded(fn) for name, fn in _binary_functions().items()}
    raise ValueError(f"unknown computation family {region!r}")


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
