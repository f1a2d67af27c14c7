"""The op registry: one record per HLO opcode, filled by the family modules.

Executors, the HLO parser and printer, the graph renderer and the status table all find
ops here by HLO opcode (``"gather"``, ``"reduce-window"``); nothing else keeps a list of
op names.  Other layers (CPU and CUDA kernels, animators, widgets) keep tables of their
own keyed by opcode and register them with ``register_layer``.

An op's pieces, as the family modules write them:

``shape_rule(*operand_shapes, **attrs) -> Shape``
    one check per rule of the spec, raising ``ShapeError`` naming op, argument, values.
``reference(*operand_values, shape, **attrs) -> value``
    the NumPy reference: the executable spec.  Computation attributes arrive as callables
    (``Region`` objects, see ``executors.reference``); ``shape`` is the result shape from
    the shape rule.  With ``needs_context=True`` it also gets ``ctx`` (the run's
    ``ExecutionContext``: replicas, channels, RNG state).
``index_map(*operand_values, shape, **attrs) -> IndexMap``
    for data-movement ops: which operand elements each result element reads.
``computation_params(kw, operand_shapes, attrs) -> [Shape, ...]``
    the parameter shapes a Python callable given for attribute ``kw`` is traced with.
``attrs_from_shape(shape) -> dict``
    attributes HLO text carries in the result shape (``new_element_type`` of convert).
"""
from dataclasses import dataclass, field
from typing import Callable, Optional

#: opcode -> OpDef
OPS = {}
#: API name (CamelCase) -> opcode
NAMES = {}
#: layer name -> {opcode: implementation}; "cpu", "cuda", "graph", "animation", "widget", "exercise"
LAYERS = {}

#: op categories, plain sets of opcodes, used by tests, graph colours and docs alike
CATEGORIES = {
    "elementwise": set(), "unary": set(), "binary": set(), "comparison": set(),
    "data_movement": set(), "reduction": set(), "linalg": set(), "control": set(),
    "collective": set(), "rng": set(), "constant": set(), "other": set(),
}


@dataclass
class OpDef:
    opcode: str
    name: str
    family: str
    shape_rule: Callable
    reference: Optional[Callable] = None
    attrs: tuple = ()
    index_map: Optional[Callable] = None
    computation_params: Optional[Callable] = None
    attrs_from_shape: Optional[Callable] = None
    needs_context: bool = False
    categories: frozenset = field(default_factory=frozenset)
    #: which operands are index arrays (gather's start_indices): animators show their values
    doc: str = ""
    #: how the op meets denormal numbers under XLA:CPU's flush-to-zero (see ``fpenv.rule_of``)
    denormals: object = None

    def attr_schema(self):
        return self.attrs

    @property
    def kws(self):
        return tuple(kw for a in self.attrs for kw in a.kws)


def register(opcode, name, family, shape_rule, reference=None, *, attrs=(), index_map=None,
             computation_params=None, attrs_from_shape=None, needs_context=False, categories=(),
             doc="", denormals=None):
    """Register one op; returns its OpDef.  Registering an opcode twice is an error."""
    if opcode in OPS:
        raise ValueError(f"opcode {opcode!r} registered twice")
    op = OpDef(opcode, name, family, shape_rule, reference, tuple(attrs), index_map,
               computation_params, attrs_from_shape, needs_context, frozenset(categories), doc,
               denormals)
    OPS[opcode] = op
    if name:
        NAMES.setdefault(name, opcode)
    for c in categories:
        CATEGORIES.setdefault(c, set()).add(opcode)
    return op


def get(opcode):
    """The OpDef of an HLO opcode; unknown opcodes get an error that says so."""
    _load_families()
    try:
        return OPS[opcode]
    except KeyError:
        raise NotImplementedError(
            f"HLO opcode {opcode!r} is not implemented in xla_explorer "
            f"(see xla_explorer.status_table())") from None


def by_name(name):
    _load_families()
    return OPS[NAMES[name]]


def register_layer(layer, opcode, impl):
    LAYERS.setdefault(layer, {})[opcode] = impl


_loaded = False


def _load_families():
    global _loaded
    if not _loaded:
        _loaded = True
        from . import _families  # noqa: F401  (imports every family module)


def all_ops():
    _load_families()
    return dict(OPS)
