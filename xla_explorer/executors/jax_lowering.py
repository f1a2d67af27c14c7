"""The ``jax`` layer: every HLO instruction lowered to the matching ``jax.lax`` call.

``comp.run(*args, backend="jax")`` walks a computation like the reference executor
(``executors.reference``) does, with the same value conventions (a tuple-shaped value is
a Python tuple, a token is ``None`` inside and ``Token()`` outside), but each instruction
calls its *lowering rule* on jax values instead of its NumPy reference, and the whole
entry computation runs under ``jax.jit``: XLA itself computes the result.  Called
computations (reduce bodies, comparators, while bodies, branches) become Python
functions, lowered the same way, that ``lax.reduce``, ``lax.while_loop``, ... trace.

A rule is ``rule(*operand_values, shape, ctx, **attrs)``: the instruction's attributes
as the op registry names them (``offset_dims``, ``window_strides``, ...), computation
attributes as ``Lowered`` callables, ``shape`` the result shape and ``ctx`` the
``LoweringContext`` (``ctx.instruction`` is the instruction).  ``RULES`` maps HLO opcodes
to rules; each is registered as the ``"jax"`` layer of its opcode
(``registry.LAYERS["jax"]``).  An opcode without a rule raises
``NotImplementedError("jax backend: no lowering for opcode X")``.

Public ``jax.lax`` is used wherever it says what XLA does.  Where it does not, the rule
says so and reaches one level down (all in jax 0.10):

* ``compare`` with ``type=TOTALORDER``: JAX's internal ``lt_to`` / ``le_to`` / ``eq_to``;
* ``scatter`` whose update computation is not one binary op of its two parameters (or
  the plain overwrite): ``lax.scatter_p`` with the computation traced to a jaxpr;
* ``select-and-scatter``: ``jax._src.lax.windowed_reductions._select_and_scatter``;
* ``sort`` with any comparator, ``topk`` of the smallest, integer ``power`` (``lax.pow``
  refuses integers) and ``logistic`` (``lax.logistic`` expands to ``1/(1+exp(-x))``):
  small primitives of this module whose MLIR lowering emits the HLO op itself;
* ``dynamic-slice`` / ``dynamic-update-slice`` pass ``allow_negative_indices=False``
  (XLA clamps negative starts; lax would wrap them); gather and scatter use
  ``mode=PROMISE_IN_BOUNDS``, which is XLA's own clamping / skipping.

Partitioned modules (``shard_map`` / ``pmap`` programs, see ``executors.spmd``) run on a
``jax.sharding.Mesh`` of JAX's devices: the module's Shardy mesh, or one axis
``"_devices"`` of ``num_partitions`` devices.  A per-device value between the
``*GlobalToLocal*`` / ``*FullToShard*`` and ``*LocalToGlobal*`` / ``*ShardToFull*``
custom-calls is a ``Manual`` value: the shards of all devices stacked along a new leading
axis that is split over every mesh axis.  An instruction with ``Manual`` operands (the
``call`` of the manual body) runs under ``jax.shard_map`` over the whole mesh, so its
collectives are JAX's ``psum`` / ``all_gather`` / ``all_to_all`` / ``ppermute`` /
``psum_scatter`` over the mesh axes that make up its replica groups (groups that no set
of axes makes up go through an ``all_gather`` and a per-device table).  Shardings that a
``PartitionSpec`` of the mesh expresses place the shards with ``shard_map`` itself;
others (uneven shards, sub-axes) are cut and joined with static slices.

64-bit types: ``run`` works under ``jax.enable_x64(True)``; a function from ``to_jax``
needs x64 enabled by its caller when the module has 64-bit values.
"""
import functools
import hashlib
import itertools
import os
import sys
import weakref

import numpy as np

from .. import dtypes
from ..errors import ExecutionError
from ..ops import registry
from ..shapes import Shape

#: filled by ``load()``: the jax modules (this module imports without jax)
jax = lax = jnp = None

#: HLO opcode -> lowering rule
RULES = {}

#: place shards with shard_map's PartitionSpecs where a spec expresses the sharding (False:
#: always cut and join with static slices; the general path, for tests)
SHARDINGS_AS_SPECS = True
#: collectives over the mesh axes that make up their groups (False: always an all_gather
#: of every device and a per-device table; the general path, for tests)
COLLECTIVES_ON_AXES = True

#: how many host (CPU) devices to ask XLA for when jax is first imported by this module;
#: ``XLA_EXPLORER_HOST_DEVICES=0`` leaves XLA_FLAGS alone
DEFAULT_HOST_DEVICES = 8


def rule(*opcodes):
    """Decorator: ``fn`` is the lowering rule of ``opcodes`` (and their ``"jax"`` layer)."""
    def deco(fn):
        for opcode in opcodes:
            RULES[opcode] = fn
            registry.register_layer("jax", opcode, fn)
        return fn
    return deco


# ---------------------------------------------------------------------------------------
# Loading jax (several host devices for partitioned programs)

def ensure_host_devices(n=None):
    """Ask XLA:CPU for ``n`` host devices (default 8, or ``$XLA_EXPLORER_HOST_DEVICES``)
    while that is still possible: before jax is imported this adds
    ``--xla_force_host_platform_device_count=n`` to ``XLA_FLAGS``; after the import but
    before JAX's first use it sets ``jax_num_cpu_devices``.  A count the user already
    chose (either way) is left alone.  Returns nothing; ``jax.devices()`` tells."""
    if n is None:
        n = int(os.environ.get("XLA_EXPLORER_HOST_DEVICES", DEFAULT_HOST_DEVICES))
    if n <= 0:
        return
    flags = os.environ.get("XLA_FLAGS", "")
    if "jax" not in sys.modules:
        if "xla_force_host_platform_device_count" not in flags:
            os.environ["XLA_FLAGS"] = (flags + f" --xla_force_host_platform_device_count={n}").strip()
        return
    if "xla_force_host_platform_device_count" in flags:
        return
    try:
        import jax as _jax
        from jax._src import xla_bridge
        if not getattr(xla_bridge, "_backends", {True: 1}) and _jax.config.jax_num_cpu_devices < 0:
            _jax.config.update("jax_num_cpu_devices", n)
    except Exception:  # noqa: BLE001 - an older or newer jax: its own device count stays
        pass


def load():
    """Import jax (setting up host devices first, see ``ensure_host_devices``)."""
    global jax, lax, jnp
    if jax is None:
        ensure_host_devices()
        try:
            import jax as _jax
            import jax.numpy as _jnp
            from jax import lax as _lax
        except ImportError:
            raise ImportError("the jax backend needs jax: pip install 'xla_explorer[jax]' "
                              "(or pip install jax)") from None
        jax, lax, jnp = _jax, _lax, _jnp
        # per-device values pass through jit (diff evaluates instructions on them)
        jax.tree_util.register_pytree_node(Manual, lambda m: ((m.data,), None), lambda _, c: Manual(c[0]))
    return jax


# ---------------------------------------------------------------------------------------
# Lowering context, lowered computations, per-device values

class Manual:
    """A per-device value of a partitioned program: device position ``k``'s value is
    ``data[k]`` (the shards stacked along a leading axis split over every mesh axis)."""

    __slots__ = ("data",)

    def __init__(self, data):
        self.data = data

    @property
    def shape(self):
        return tuple(self.data.shape[1:])

    def __repr__(self):
        return f"<Manual {self.data.dtype}{list(self.shape)} x {self.data.shape[0]} devices>"


class LoweringContext:
    """What the rules of one module share: its SPMD set-up (``spmd``, None for a plain
    module), whether they run inside ``shard_map`` (``manual``) and the instruction."""

    def __init__(self, module=None, spmd=None, manual=False):
        self.module, self.spmd, self.manual = module, spmd, manual
        self.instruction = None

    def inside_shard_map(self):
        return LoweringContext(self.module, self.spmd, manual=True)

    @property
    def num_devices(self):
        return self.spmd.size if (self.spmd is not None and self.manual) else 1

    def device_position(self):
        """This device's position in the mesh (a traced int32), 0 outside shard_map."""
        if self.spmd is None or not self.manual:
            return jnp.int32(0)
        return lax.axis_index(self.spmd.axes)


class Lowered:
    """A called computation lowered to a Python function of jax values."""

    def __init__(self, computation, ctx):
        self.computation, self.ctx = computation, ctx

    def __call__(self, *args):
        return evaluate(self.computation, list(args), self.ctx)

    @property
    def parameter_shapes(self):
        return self.computation.parameter_shapes

    @property
    def result_shape(self):
        return self.computation.result_shape

    def __repr__(self):
        return f"<Lowered {self.computation.name} {self.computation.signature()}>"


def bind_attrs(attrs, ctx):
    from .reference import bind_attrs as bind
    return bind(attrs, ctx, lambda comp: Lowered(comp, ctx))


def _leaves(value):
    if isinstance(value, (tuple, list)):
        for v in value:
            yield from _leaves(v)
    elif value is not None:
        yield value


def _has_manual(values):
    return any(isinstance(v, Manual) for v in _leaves(values))


def _map_tree(fn, value):
    if isinstance(value, (tuple, list)):
        return tuple(_map_tree(fn, v) for v in value)
    return None if value is None else fn(value)


#: opcodes that move Manual values around without computing (no shard_map needed)
_STRUCTURAL = {"tuple", "get-tuple-element", "opt-barrier"}
#: custom-call targets that take or make Manual values themselves
_SPMD_TARGETS = {"xla.sdy.GlobalToLocalShape", "xla.sdy.LocalToGlobalShape", "xla.sdy.FuncResultSharding",
                 "Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape"}


def lower_instruction(inst, operands, ctx):
    """The value of ``inst`` (not a parameter) from its operands' jax values."""
    fn = RULES.get(inst.opcode)
    if fn is None:
        raise NotImplementedError(f"jax backend: no lowering for opcode {inst.opcode} ({inst.name})")
    spmd_call = inst.opcode == "custom-call" and inst.attrs.get("custom_call_target") in _SPMD_TARGETS
    if not ctx.manual and inst.opcode not in _STRUCTURAL and not spmd_call and _has_manual(operands):
        return _in_shard_map(inst, operands, ctx)
    value = _apply(fn, inst, operands, ctx)
    return value


def _apply(fn, inst, operands, ctx):
    ctx.instruction = inst
    kwargs = bind_attrs(inst.attrs, ctx)
    kwargs.pop("shape", None)
    try:
        value = fn(*operands, shape=inst.shape, ctx=ctx, **kwargs)
    except (NotImplementedError, ExecutionError):
        raise
    except Exception as e:
        if type(e).__module__.startswith("jax") and "Tracer" in type(e).__name__:
            raise
        raise ExecutionError(f"jax backend: {inst.opcode} {inst.name}: {type(e).__name__}: {e}") from e
    return _check(value, inst.shape, inst)


def _check(value, shape, inst):
    """The rule's value has the instruction's shape and type (a lowering bug otherwise)."""
    if shape.is_tuple:
        if not isinstance(value, (tuple, list)) or len(value) != len(shape.tuple_shapes):
            raise ExecutionError(f"jax backend: the lowering of {inst.opcode} {inst.name} gave "
                                 f"{type(value).__name__}, expected a tuple for {shape}")
        return tuple(_check(v, s, inst) for v, s in zip(value, shape.tuple_shapes))
    if shape.is_token:
        return None
    dims = tuple(value.shape)
    dtype = value.data.dtype if isinstance(value, Manual) else value.dtype
    if shape.is_static and (dims != tuple(shape.dims) or np.dtype(dtype) != shape.dtype):
        raise ExecutionError(f"jax backend: the lowering of {inst.opcode} {inst.name} gave "
                             f"{np.dtype(dtype)}{list(dims)}, the instruction is {shape}")
    return value


def evaluate(computation, args, ctx, on_value=None):
    """Evaluate ``computation`` on jax values (tracers under jit), rule by rule."""
    if len(args) != len(computation.parameters):
        raise ExecutionError(f"computation {computation.name} takes {len(computation.parameters)} "
                             f"arguments, got {len(args)}")
    params = {p: a for p, a in zip(computation.parameters, args)}
    env = {}
    last_use = {}
    for pos, inst in enumerate(computation.instructions):
        for o in inst.operands:
            last_use[o] = pos
    for pos, inst in enumerate(computation.instructions):
        if inst.opcode == "parameter":
            value = params[inst]
        else:
            value = lower_instruction(inst, [env[o] for o in inst.operands], ctx)
        env[inst] = value
        if on_value is not None:
            on_value(inst, value)
        for o in set(inst.operands):
            if last_use.get(o) == pos and o is not computation.root:
                del env[o]
    return env[computation.root]


# ---------------------------------------------------------------------------------------
# Whole modules: to_jax, run

def _uses_64_bits(module):
    wide = {"s64", "u64", "f64", "c128"}

    def walk(shape):
        if shape.is_tuple:
            return any(walk(s) for s in shape.tuple_shapes)
        return shape.element_type in wide
    return any(walk(i.shape) for c in module.computations for i in c.instructions)


def lower_module(module):
    """The module's entry as a Python function of jax arrays (jittable): ``to_jax``."""
    load()
    from . import spmd as spmd_mod
    state = SpmdLowering(module) if spmd_mod.is_partitioned(module) else None
    entry = module.entry
    wide = _uses_64_bits(module)

    def fn(*args):
        if len(args) != len(entry.parameters):
            raise TypeError(f"{module.name} takes {len(entry.parameters)} arguments "
                            f"({', '.join(str(p.shape) for p in entry.parameters)}), got {len(args)}")
        if wide and not jax.config.jax_enable_x64:
            raise ExecutionError(f"{module.name} has 64-bit values: enable them in JAX first "
                                 "(jax.config.update('jax_enable_x64', True), or "
                                 "`with jax.enable_x64(True):` around the call)")
        out = evaluate(entry, list(args), LoweringContext(module, state))
        if _has_manual(out):
            raise ExecutionError(f"{module.name}: the entry returns per-device values (no "
                                 "LocalToGlobalShape / SPMDShardToFullShape joins them)")
        return out

    fn.__name__ = fn.__qualname__ = _identifier(module.name)
    fn.__doc__ = (f"{module.name} {entry.signature()} lowered to jax.lax (xla_explorer); "
                  "takes and returns jax arrays, a tuple for a tuple result.")
    fn.module = module
    return fn


def _identifier(name):
    out = "".join(c if c.isalnum() or c == "_" else "_" for c in str(name))
    return out if out and not out[0].isdigit() else "_" + out


_JITTED = weakref.WeakKeyDictionary()


def _fingerprint(module):
    try:
        return hashlib.sha1(module.as_hlo_text().encode()).hexdigest()
    except Exception:  # noqa: BLE001 - unprintable: no caching
        return None


def jitted(module, cache=True):
    """``jax.jit`` of ``lower_module(module)``, kept while the module's HLO text stays the same."""
    load()
    key = _fingerprint(module) if cache else None
    if key is not None:
        hit = _JITTED.get(module)
        if hit is not None and hit[0] == key:
            return hit[1]
    f = jax.jit(lower_module(module), keep_unused=True)
    if key is not None:
        _JITTED[module] = (key, f)
    return f


def to_jax_value(value):
    """NumPy values (tuples, Tokens) -> jax arrays (tuples, None)."""
    from .reference import Token
    if isinstance(value, (tuple, list)):
        return tuple(to_jax_value(v) for v in value)
    if value is None or isinstance(value, Token):
        return None
    if isinstance(value, Manual):
        return value
    return jnp.asarray(value)


def to_numpy(value, shape, where="jax backend"):
    """jax results -> what the reference executor returns for ``shape``."""
    from .reference import Token, conform
    if shape.is_tuple:
        return tuple(to_numpy(v, s, where) for v, s in zip(value, shape.tuple_shapes))
    if shape.is_token:
        return Token()
    return conform(np.asarray(value), shape, where)


def run(module, args, jit=True, cache=True):
    """``comp.run(*args, backend="jax")``: the module lowered to jax.lax, run by XLA on
    JAX's devices (``jit=False``: op by op, for debugging).  Returns NumPy values of the
    exact types, as the reference executor does."""
    from .reference import entry_arguments
    args = entry_arguments(module, args)
    load()
    entry = module.entry
    check_float_env()
    with jax.enable_x64(True):
        f = jitted(module, cache) if jit else lower_module(module)
        out = f(*[to_jax_value(a) for a in args])
        return to_numpy(out, entry.root.shape, f"jax backend ({module.name})")


def check_float_env():
    """XLA:CPU flushes denormals in every run (its client sets the processor's DAZ and FTZ
    modes; no flag turns them off): in the ``"ieee"`` environment the jax backend would
    silently answer for the other one, so it refuses."""
    from .. import fpenv
    if fpenv.get_float_env().denormals == "ieee" and jax.default_backend() == "cpu":
        raise ExecutionError(
            "backend='jax' cannot run with denormals='ieee': XLA:CPU always treats denormal operands as "
            "zero and flushes denormal results (its CPU client sets DAZ/FTZ around every run, and no flag "
            "turns that off).  Use denormals='flush' (the default) with the jax backend, or run the 'ieee' "
            "environment on backend='numpy', 'numba' or 'cuda'.")


def eval_instruction(inst, operands, ctx):
    """One instruction evaluated eagerly with jax on the given operand values (NumPy
    values, or ``Manual`` stacks of per-device values); NumPy (or Manual) result."""
    load()
    check_float_env()
    with jax.enable_x64(True):
        ops = [to_jax_value(v) for v in operands]
        if _has_manual(ops):
            # shard_map outside jit runs its body primitive by primitive (slowly): jit it
            value = jax.jit(lambda *xs: lower_instruction(inst, list(xs), ctx))(*ops)
        else:
            value = lower_instruction(inst, ops, ctx)
        return _map_tree(lambda v: Manual(np.asarray(v.data)) if isinstance(v, Manual) else np.asarray(v), value)


# ---------------------------------------------------------------------------------------
# Small primitives for HLO that public lax does not emit

@functools.lru_cache(maxsize=None)
def _primitives():
    """(sort_p, hlo_p): a sort with any comparator, and one elementwise HLO op by name."""
    from jax._src import core, dispatch
    from jax._src.interpreters import mlir
    from jax._src.lib.mlir import ir
    from jax._src.lib.mlir.dialects import hlo

    sort_p = core.Primitive("xla_explorer_sort")
    sort_p.multiple_results = True
    sort_p.def_impl(functools.partial(dispatch.apply_primitive, sort_p))
    sort_p.def_abstract_eval(lambda *avals, **params: [core.ShapedArray(a.shape, a.dtype) for a in avals])

    def sort_lowering(lctx, *operands, dimension, is_stable, comparator):
        types = [mlir.aval_to_ir_type(lctx.module_context, a) for a in lctx.avals_out]
        op = hlo.SortOp(types, list(operands), dimension=mlir.i64_attr(dimension),
                        is_stable=ir.BoolAttr.get(is_stable))
        scalars = [core.ShapedArray((), a.dtype) for a in lctx.avals_in for _ in (0, 1)]
        block = op.comparator.blocks.append(*[mlir.aval_to_ir_type(lctx.module_context, a) for a in scalars])
        with ir.InsertionPoint(block):
            lower = mlir.lower_fun(lambda *args: comparator(*args), multiple_results=False)
            sub = lctx.replace(primitive=None, avals_in=scalars, avals_out=[core.ShapedArray((), np.bool_)])
            out = lower(sub, *block.arguments)
            flat, _ = mlir.ir_tree_registry.flatten(out)
            hlo.return_(flat)
        return op.results

    mlir.register_lowering(sort_p, sort_lowering)

    hlo_p = core.Primitive("xla_explorer_hlo_elementwise")
    hlo_p.def_impl(functools.partial(dispatch.apply_primitive, hlo_p))
    hlo_p.def_abstract_eval(lambda *avals, op: core.ShapedArray(avals[0].shape, avals[0].dtype))

    def hlo_lowering(lctx, *operands, op):
        return [getattr(hlo, op)(*operands)]

    mlir.register_lowering(hlo_p, hlo_lowering)
    return sort_p, hlo_p


def _hlo_op(op, *operands):
    """The elementwise HLO op ``op`` (``"power"``, ``"logistic"``) itself."""
    return _primitives()[1].bind(*operands, op=op)


def _sort(operands, dimension, is_stable, comparator):
    return tuple(_primitives()[0].bind(*operands, dimension=int(dimension), is_stable=bool(is_stable),
                                       comparator=comparator))


# ---------------------------------------------------------------------------------------
# Elementwise

def _real_part(x):
    return lax.real(x) if jnp.iscomplexobj(x) else x


def _imag_part(x):
    return lax.imag(x) if jnp.iscomplexobj(x) else jnp.zeros_like(x)


def _power(x, y):
    if jnp.issubdtype(x.dtype, jnp.inexact):
        return lax.pow(x, y)
    return _hlo_op("power", x, y)  # lax.pow refuses integers; HLO power takes them


_UNARY = {
    "abs": lambda x: lax.abs(x), "negate": lambda x: lax.neg(x), "sign": lambda x: lax.sign(x),
    "not": lambda x: lax.bitwise_not(x), "exponential": lambda x: lax.exp(x),
    "exponential-minus-one": lambda x: lax.expm1(x), "log": lambda x: lax.log(x),
    "log-plus-one": lambda x: lax.log1p(x), "sqrt": lambda x: lax.sqrt(x), "rsqrt": lambda x: lax.rsqrt(x),
    "cbrt": lambda x: lax.cbrt(x), "sine": lambda x: lax.sin(x), "cosine": lambda x: lax.cos(x),
    "tan": lambda x: lax.tan(x), "tanh": lambda x: lax.tanh(x),
    "logistic": lambda x: _hlo_op("logistic", x),  # lax.logistic expands to 1/(1+exp(-x))
    "erf": lambda x: lax.erf(x), "floor": lambda x: lax.floor(x), "ceil": lambda x: lax.ceil(x),
    "round-nearest-afz": lambda x: lax.round(x, lax.RoundingMethod.AWAY_FROM_ZERO),
    "round-nearest-even": lambda x: lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN),
    "is-finite": lambda x: lax.is_finite(x), "real": _real_part, "imag": _imag_part,
    "count-leading-zeros": lambda x: lax.clz(x), "popcnt": lambda x: lax.population_count(x),
}

def _on_pred_or_complex(opcode, lax_fn):
    """``lax_fn``, except on pred (add, multiply: XLA's OR and AND, which jax.lax refuses) and
    complex (maximum, minimum: lax.max orders complex numbers lexicographically itself, XLA
    compares the real parts only): there the HLO op itself."""
    def fn(a, b):
        if a.dtype == np.bool_ or jnp.iscomplexobj(a):
            return _hlo_op(opcode, a, b)
        return lax_fn(a, b)
    return fn


_BINARY = {
    "add": _on_pred_or_complex("add", lambda a, b: lax.add(a, b)),
    "subtract": lambda a, b: lax.sub(a, b),
    "multiply": _on_pred_or_complex("multiply", lambda a, b: lax.mul(a, b)),
    "divide": lambda a, b: lax.div(a, b),
    "remainder": lambda a, b: lax.rem(a, b),
    "maximum": _on_pred_or_complex("maximum", lambda a, b: lax.max(a, b)),
    "minimum": _on_pred_or_complex("minimum", lambda a, b: lax.min(a, b)),
    "power": _power, "atan2": lambda a, b: lax.atan2(a, b),
    "complex": lambda a, b: lax.complex(a, b), "and": lambda a, b: lax.bitwise_and(a, b),
    "or": lambda a, b: lax.bitwise_or(a, b), "xor": lambda a, b: lax.bitwise_xor(a, b),
    "shift-left": lambda a, b: lax.shift_left(a, b),
    "shift-right-arithmetic": lambda a, b: lax.shift_right_arithmetic(a, b),
    "shift-right-logical": lambda a, b: lax.shift_right_logical(a, b),
}


def _unary_rule(fn):
    return lambda x, *, shape, ctx, **_: fn(x)


def _binary_rule(fn):
    return lambda a, b, *, shape, ctx, **_: fn(a, b)


for _op, _fn in _UNARY.items():
    rule(_op)(_unary_rule(_fn))
for _op, _fn in _BINARY.items():
    rule(_op)(_binary_rule(_fn))


def _total_order():
    from jax._src.lax import lax as lax_internal
    return lax_internal.lt_to_p, lax_internal.le_to_p, lax_internal.eq_to_p


def compare(lhs, rhs, direction, compare_type=None):
    if compare_type == "TOTALORDER" and jnp.issubdtype(lhs.dtype, jnp.floating):
        lt, le, eq = _total_order()  # JAX's internal total-order compares (lt_to, le_to, eq_to)
        if direction == "EQ":
            return eq.bind(lhs, rhs)
        if direction == "NE":
            return lax.bitwise_not(eq.bind(lhs, rhs))
        if direction == "LT":
            return lt.bind(lhs, rhs)
        if direction == "LE":
            return le.bind(lhs, rhs)
        if direction == "GT":
            return lt.bind(rhs, lhs)
        if direction == "GE":
            return le.bind(rhs, lhs)
    fn = {"EQ": lax.eq, "NE": lax.ne, "LT": lax.lt, "LE": lax.le, "GT": lax.gt, "GE": lax.ge}.get(direction)
    if fn is None:
        raise ExecutionError(f"compare: unknown direction {direction!r}")
    if jnp.iscomplexobj(lhs) and direction not in ("EQ", "NE"):
        # lax refuses to order complex numbers; XLA:CPU's LT/GT are lexicographic, its LE/GE
        # compare the real parts only (as the reference)
        xr, yr, xi, yi = lax.real(lhs), lax.real(rhs), lax.imag(lhs), lax.imag(rhs)
        if direction in ("LE", "GE"):
            return fn(xr, yr)
        return lax.bitwise_or(fn(xr, yr), lax.bitwise_and(lax.eq(xr, yr), fn(xi, yi)))
    return fn(lhs, rhs)


@rule("compare")
def _compare(lhs, rhs, *, shape, ctx, comparison_direction, compare_type=None, **_):
    return compare(lhs, rhs, comparison_direction, compare_type)


@rule("select")
def _select(pred, on_true, on_false, *, shape, ctx, **_):
    return lax.select(pred, on_true, on_false)


@rule("clamp")
def _clamp(lo, x, hi, *, shape, ctx, **_):
    return lax.clamp(lo, x, hi)


@rule("convert")
def _convert(x, *, shape, ctx, **_):
    return lax.convert_element_type(x, shape.dtype)


@rule("bitcast-convert")
def _bitcast_convert(x, *, shape, ctx, **_):
    if jnp.iscomplexobj(x) and np.dtype(x.dtype) != shape.dtype:
        return _bitcast_complex_width(x, shape.dtype)
    if np.bool_ in (np.dtype(x.dtype).type, shape.dtype.type) and np.dtype(x.dtype) != shape.dtype:
        return _bitcast_pred(x, shape.dtype)
    return lax.bitcast_convert_type(x, shape.dtype)


def _bitcast_pred(x, dtype):
    """To or from pred, a pred being a byte (as XLA stores it; lax refuses bool bitcasts):
    through u8, a byte that is not zero reading as true."""
    if dtype == np.bool_:
        return lax.bitcast_convert_type(x, np.uint8) != 0
    return lax.bitcast_convert_type(x.astype(np.uint8), dtype)


def _bitcast_complex_width(x, dtype):
    """c128 <-> c64[2] through the parts (lax refuses complex bitcasts that change the type):
    c128 (re, im) holds the bytes of c64[0] in re and of c64[1] in im, each c64 being its
    (low, high) f32 halves."""
    if np.dtype(x.dtype) == np.complex128:                       # c128[...] -> c64[..., 2]
        halves = [lax.bitcast_convert_type(p, np.float32) for p in (lax.real(x), lax.imag(x))]
        pairs = jnp.stack(halves, axis=-2)                       # [..., part, (low, high)]
        return lax.complex(pairs[..., 0], pairs[..., 1])
    parts = [lax.bitcast_convert_type(jnp.stack([lax.real(x[..., k]), lax.imag(x[..., k])], axis=-1),
                                      np.float64) for k in (0, 1)]   # c64[..., 2] -> c128[...]
    return lax.complex(parts[0], parts[1])


@rule("reduce-precision")
def _reduce_precision(x, *, shape, ctx, exponent_bits, mantissa_bits, **_):
    return lax.reduce_precision(x, exponent_bits=int(exponent_bits), mantissa_bits=int(mantissa_bits))


# ---------------------------------------------------------------------------------------
# Control

@rule("constant")
def _constant(*, shape, ctx, literal=None, **_):
    if literal is None:
        raise ExecutionError("constant: its value was elided in the HLO text ({...}); print the module "
                             "with large constants to run it")

    def make(value, s):
        if s.is_tuple:
            return tuple(make(v, t) for v, t in zip(value, s.tuple_shapes))
        return jnp.asarray(np.asarray(value, dtype=s.dtype).reshape(s.dims))
    return make(literal, shape)


@rule("tuple")
def _tuple(*values, shape, ctx, **_):
    return tuple(values)


@rule("get-tuple-element")
def _gte(value, *, shape, ctx, index, **_):
    return value[int(index)]


@rule("call")
def _call(*args, shape, ctx, computation, **_):
    return computation(*args)


@rule("fusion")
def _fusion(*args, shape, ctx, calls, **_):
    return calls(*args)


@rule("map")
def _map(*operands, shape, ctx, computation, dimensions=None, **_):
    fn = computation
    for _ in range(shape.rank):
        fn = jax.vmap(fn)
    return fn(*operands)


@rule("while")
def _while(init, *, shape, ctx, condition, body, **_):
    return lax.while_loop(lambda c: condition(c), lambda c: body(c), init)


@rule("conditional")
def _conditional(selector, *operands, shape, ctx, true_computation=None, false_computation=None,
                 branch_computations=None, **_):
    if branch_computations is None:
        return lax.cond(selector, lambda a, b: true_computation(a), lambda a, b: false_computation(b),
                        operands[0], operands[1])
    n = len(branch_computations)
    # XLA runs the last branch for an index out of range (lax.switch would clamp a negative one to 0)
    index = jnp.where((selector < 0) | (selector >= n), n - 1, selector).astype(jnp.int32)
    branches = [functools.partial(lambda k, *ops: branch_computations[k](ops[k]), k) for k in range(n)]
    return lax.switch(index, branches, *operands)


@rule("scan")
def _scan(*operands, shape, ctx, computation, dimensions, num_carries, is_reverse=False, **_):
    """HLO scan as ``lax.scan`` (which JAX lowers to a while loop): the scan dimension moved
    to the front and back, the region's outputs then carries split as in HLO."""
    m = int(num_carries)
    d = int(dimensions[0])
    xs = tuple(jnp.moveaxis(x, d, 0) for x in operands[:len(operands) - m])
    inits = tuple(operands[len(operands) - m:])

    def step(carry, x):
        result = computation(*x, *carry)
        result = tuple(result) if isinstance(result, (tuple, list)) else (result,)
        k = len(result) - m
        return tuple(result[k:]), tuple(result[:k])

    final, ys = lax.scan(step, inits, xs, reverse=bool(is_reverse))
    return tuple(jnp.moveaxis(y, 0, d) for y in ys) + tuple(final)


@rule("after-all")
def _after_all(*tokens, shape, ctx, **_):
    return None


@rule("opt-barrier")
def _opt_barrier(value, *, shape, ctx, **_):
    if _has_manual(value):
        return value
    return lax.optimization_barrier(value)


@rule("get-dimension-size")
def _get_dimension_size(x, *, shape, ctx, dimensions, **_):
    d = dimensions[0] if isinstance(dimensions, (tuple, list)) else dimensions
    return jnp.asarray(x.shape[int(d)], jnp.int32)


# ---------------------------------------------------------------------------------------
# Shapes, slicing

@rule("broadcast")
def _broadcast(x, *, shape, ctx, broadcast_dimensions=(), **_):
    return lax.broadcast_in_dim(x, tuple(shape.dims), tuple(broadcast_dimensions))


@rule("reshape")
def _reshape(x, *, shape, ctx, **_):
    return lax.reshape(x, tuple(shape.dims))


@rule("transpose")
def _transpose(x, *, shape, ctx, permutation, **_):
    return lax.transpose(x, tuple(permutation))


@rule("reverse")
def _reverse(x, *, shape, ctx, dimensions, **_):
    return lax.rev(x, tuple(dimensions))


@rule("concatenate")
def _concatenate(*xs, shape, ctx, dimension, **_):
    return lax.concatenate(list(xs), int(dimension))


@rule("iota")
def _iota(*, shape, ctx, iota_dimension, **_):
    return lax.broadcasted_iota(shape.dtype, tuple(shape.dims), int(iota_dimension))


@rule("copy")
def _copy(x, *, shape, ctx, **_):
    return x


@rule("bitcast")
def _bitcast(x, *, shape, ctx, **_):
    # as the reference: a row-major reshape (bytes reinterpreted when the type changes)
    if np.dtype(x.dtype) != shape.dtype:
        if np.dtype(x.dtype).itemsize != shape.dtype.itemsize:
            raise NotImplementedError("jax backend: a bitcast that changes the element width")
        x = lax.bitcast_convert_type(x, shape.dtype)
    return lax.reshape(x, tuple(shape.dims))


@rule("slice")
def _slice(x, *, shape, ctx, start_indices, limit_indices, strides=None, **_):
    return lax.slice(x, tuple(start_indices), tuple(limit_indices), tuple(strides) if strides else None)


@rule("dynamic-slice")
def _dynamic_slice(x, *starts, shape, ctx, slice_sizes, **_):
    return lax.dynamic_slice(x, list(starts), tuple(slice_sizes), allow_negative_indices=False)


@rule("dynamic-update-slice")
def _dynamic_update_slice(x, update, *starts, shape, ctx, **_):
    return lax.dynamic_update_slice(x, update, list(starts), allow_negative_indices=False)


@rule("pad")
def _pad(x, value, *, shape, ctx, padding_config=(), **_):
    return lax.pad(x, value, [tuple(int(v) for v in t) for t in padding_config])


# ---------------------------------------------------------------------------------------
# Gather / scatter

def _index_vector_last(indices, index_vector_dim, batching_dims):
    """lax puts the index vector in the last dimension of the indices: move it there."""
    r = indices.ndim
    ivd = int(index_vector_dim)
    if ivd == r:
        return lax.expand_dims(indices, (r,)), tuple(batching_dims)
    if ivd == r - 1:
        return indices, tuple(batching_dims)
    perm = [d for d in range(r) if d != ivd] + [ivd]
    return lax.transpose(indices, perm), tuple(d if d < ivd else d - 1 for d in batching_dims)


@rule("gather")
def _gather(operand, indices, *, shape, ctx, offset_dims, collapsed_slice_dims, start_index_map,
            index_vector_dim, slice_sizes, operand_batching_dims=(), start_indices_batching_dims=(),
            indices_are_sorted=False, **_):
    indices, batching = _index_vector_last(indices, index_vector_dim, start_indices_batching_dims)
    dn = lax.GatherDimensionNumbers(offset_dims=tuple(offset_dims), collapsed_slice_dims=tuple(collapsed_slice_dims),
                                    start_index_map=tuple(start_index_map),
                                    operand_batching_dims=tuple(operand_batching_dims),
                                    start_indices_batching_dims=batching)
    # PROMISE_IN_BOUNDS: XLA's own gather, which clamps the starts
    return lax.gather(operand, indices, dn, tuple(slice_sizes), indices_are_sorted=bool(indices_are_sorted),
                      mode=lax.GatherScatterMode.PROMISE_IN_BOUNDS)


def binary_kind(computation):
    """``"add"``, ``"multiply"``, ``"maximum"``, ``"minimum"``, ``"and"``, ``"or"`` when the
    computation is that op of its two parameters, ``"overwrite"`` when it returns its
    second parameter; else None."""
    comp = computation.computation if isinstance(computation, Lowered) else computation
    if len(comp.parameters) != 2:
        return None
    p0, p1 = comp.parameters
    root = comp.root
    if root is p1:
        return "overwrite"
    if root.opcode in ("add", "multiply", "maximum", "minimum", "and", "or") and \
            set(map(id, root.operands)) == {id(p0), id(p1)} and len(root.operands) == 2:
        return root.opcode
    return None


_SCATTERS = {"add": "scatter_add", "multiply": "scatter_mul", "maximum": "scatter_max",
             "minimum": "scatter_min", "overwrite": "scatter"}


@rule("scatter")
def _scatter(*ops, shape, ctx, update_window_dims, inserted_window_dims, scatter_dims_to_operand_dims,
             index_vector_dim, update_computation, input_batching_dims=(), scatter_indices_batching_dims=(),
             indices_are_sorted=False, unique_indices=False, **_):
    if len(ops) != 3:
        raise NotImplementedError(f"jax backend: scatter of {(len(ops) - 1) // 2} operands at once (lax "
                                  "scatters one array)")
    operand, indices, updates = ops
    indices, batching = _index_vector_last(indices, index_vector_dim, scatter_indices_batching_dims)
    dn = lax.ScatterDimensionNumbers(update_window_dims=tuple(update_window_dims),
                                     inserted_window_dims=tuple(inserted_window_dims),
                                     scatter_dims_to_operand_dims=tuple(scatter_dims_to_operand_dims),
                                     operand_batching_dims=tuple(input_batching_dims),
                                     scatter_indices_batching_dims=batching)
    mode = lax.GatherScatterMode.PROMISE_IN_BOUNDS  # XLA's own scatter: out-of-bounds windows skipped
    kind = binary_kind(update_computation)
    flags = dict(indices_are_sorted=bool(indices_are_sorted), unique_indices=bool(unique_indices), mode=mode)
    if kind in _SCATTERS and not (kind != "overwrite" and operand.dtype == np.bool_):
        return getattr(lax, _SCATTERS[kind])(operand, indices, updates, dn, **flags)
    # any other update computation: lax.scatter_p with the computation traced to a jaxpr
    from jax._src import core
    from jax._src.lax import lax as lax_internal
    from jax._src.lax import slicing
    jaxpr, consts = lax_internal._reduction_jaxpr(lambda a, b: update_computation(a, b),
                                                  core.ShapedArray((), operand.dtype))
    return slicing.scatter_p.bind(operand, indices, updates, update_jaxpr=jaxpr, update_consts=consts,
                                  dimension_numbers=dn, **flags)


# ---------------------------------------------------------------------------------------
# Reductions, windows, sort

def _fold_fn(computation, n):
    if n == 1:
        return lambda a, b: computation(a, b)
    return lambda a, b: tuple(computation(*a, *b))


@rule("reduce")
def _reduce(*ops, shape, ctx, dimensions, computation, **_):
    n = len(ops) // 2
    operands, inits = ops[:n], ops[n:]
    if n == 1:
        return lax.reduce(operands[0], inits[0], _fold_fn(computation, 1), tuple(dimensions))
    return tuple(lax.reduce(tuple(operands), tuple(inits), _fold_fn(computation, n), tuple(dimensions)))


def _pairs(padding):
    return tuple((int(lo), int(hi)) for lo, hi in padding)


@rule("reduce-window")
def _reduce_window(*ops, shape, ctx, window_dimensions, window_strides, padding, computation,
                   base_dilations=None, window_dilations=None, **_):
    n = len(ops) // 2
    operands, inits = ops[:n], ops[n:]
    rank = len(window_dimensions)
    args = dict(window_dimensions=tuple(window_dimensions),
                window_strides=tuple(window_strides) if window_strides else (1,) * rank,
                padding=_pairs(padding) if len(padding) else ((0, 0),) * rank,
                base_dilation=tuple(base_dilations) if base_dilations else (1,) * rank,
                window_dilation=tuple(window_dilations) if window_dilations else (1,) * rank)
    if n == 1:
        return lax.reduce_window(operands[0], inits[0], _fold_fn(computation, 1), **args)
    return tuple(lax.reduce_window(tuple(operands), tuple(inits), _fold_fn(computation, n), **args))


@rule("select-and-scatter")
def _select_and_scatter(operand, source, init_value, *, shape, ctx, window_dimensions, window_strides,
                        padding, select, scatter, **_):
    # lax has only the add-scatter / ge-select form in public; the general op is internal
    from jax._src.lax.windowed_reductions import _select_and_scatter as sas
    rank = len(window_dimensions)
    return sas(operand, lambda a, b: select(a, b), tuple(window_dimensions),
               tuple(window_strides) if window_strides else (1,) * rank,
               _pairs(padding) if len(padding) else ((0, 0),) * rank, source, init_value,
               lambda a, b: scatter(a, b))


@rule("sort")
def _sort_rule(*operands, shape, ctx, dimension, comparator, is_stable=False, **_):
    out = _sort(operands, dimension, is_stable, comparator)
    return out if shape.is_tuple else out[0]


def _total_lt(a, b):
    lt, _, _ = _total_order()
    return lt.bind(a, b) if jnp.issubdtype(a.dtype, jnp.floating) else lax.lt(a, b)


@rule("topk")
def _topk(x, *, shape, ctx, k, largest=True, **_):
    k = int(k)
    if largest:
        values, idx = lax.top_k(x, k)
        return values, idx.astype(jnp.int32)
    # the k smallest: a stable ascending sort (total order) of (values, indices), cut at k
    iota = lax.broadcasted_iota(jnp.int32, x.shape, x.ndim - 1)
    values, idx = _sort((x, iota), x.ndim - 1, True, lambda a, b, i, j: _total_lt(a, b))
    return (lax.slice_in_dim(values, 0, k, axis=x.ndim - 1), lax.slice_in_dim(idx, 0, k, axis=x.ndim - 1))


# ---------------------------------------------------------------------------------------
# Linear algebra

_PRECISIONS = {"default": "DEFAULT", "high": "HIGH", "highest": "HIGHEST"}


def _precision(text):
    if not text:
        return None
    names = [p.strip().lower() for p in str(text).strip("{}").split(",") if p.strip()]
    try:
        ps = [lax.Precision[_PRECISIONS[n]] for n in names]
    except KeyError:
        return None
    return tuple(ps) if len(ps) == 2 else (ps[0] if ps else None)


@rule("dot")
def _dot(lhs, rhs, *, shape, ctx, lhs_batch_dimensions=(), lhs_contracting_dimensions=(),
         rhs_batch_dimensions=(), rhs_contracting_dimensions=(), precision_config=None, **_):
    dims = ((tuple(lhs_contracting_dimensions), tuple(rhs_contracting_dimensions)),
            (tuple(lhs_batch_dimensions), tuple(rhs_batch_dimensions)))
    return lax.dot_general(lhs, rhs, dims, precision=_precision(precision_config),
                           preferred_element_type=shape.dtype)


@rule("convolution")
def _convolution(lhs, rhs, *, shape, ctx, window_strides=(), padding=(), lhs_dilation=(), rhs_dilation=(),
                 window_reversal=(), dimension_numbers=None, feature_group_count=1, batch_group_count=1,
                 precision_config=None, **_):
    from ..ops.linalg import conv_dimension_numbers
    dn = conv_dimension_numbers(dimension_numbers, lhs.ndim - 2)
    n = len(dn.input_spatial_dimensions)
    if window_reversal and any(window_reversal):  # lax has no reversal: reverse the kernel
        rhs = lax.rev(rhs, tuple(d for d, r in zip(dn.kernel_spatial_dimensions, window_reversal) if r))
    jdn = lax.ConvDimensionNumbers(lhs_spec=tuple(dn.lhs_order), rhs_spec=tuple(dn.rhs_order),
                                   out_spec=tuple(dn.output_order))
    return lax.conv_general_dilated(
        lhs, rhs, tuple(window_strides) or (1,) * n, _pairs(padding) if len(padding) else ((0, 0),) * n,
        lhs_dilation=tuple(lhs_dilation) or None, rhs_dilation=tuple(rhs_dilation) or None,
        dimension_numbers=jdn, feature_group_count=int(feature_group_count),
        batch_group_count=int(batch_group_count), precision=_precision(precision_config),
        preferred_element_type=shape.dtype)


@rule("fft")
def _fft(x, *, shape, ctx, fft_type, fft_length, **_):
    return lax.fft(x, lax.FftType[str(fft_type).upper()], tuple(int(n) for n in fft_length))


def _adjoint(x):
    x = jnp.swapaxes(x, -1, -2)
    return lax.conj(x) if jnp.iscomplexobj(x) else x


@rule("cholesky")
def _cholesky(a, *, shape, ctx, lower=False, **_):
    if lower:
        return lax.linalg.cholesky(a, symmetrize_input=False)
    # the upper factor U (A = U^H U) from the upper triangle: U = cholesky(A^H)^H
    return _adjoint(lax.linalg.cholesky(_adjoint(a), symmetrize_input=False))


@rule("triangular-solve")
def _triangular_solve(a, b, *, shape, ctx, left_side=False, lower=False, unit_diagonal=False,
                      transpose_a="NO_TRANSPOSE", **_):
    return lax.linalg.triangular_solve(a, b, left_side=bool(left_side), lower=bool(lower),
                                       transpose_a=transpose_a != "NO_TRANSPOSE",
                                       conjugate_a=transpose_a == "ADJOINT", unit_diagonal=bool(unit_diagonal))


def _per_feature(v, ndim, feature_index):
    dims = [1] * ndim
    dims[feature_index] = -1
    return v.reshape(dims)


@rule("batch-norm-training")
def _bn_training(x, scale, offset, *, shape, ctx, epsilon, feature_index, **_):
    other = tuple(d for d in range(x.ndim) if d != feature_index)
    mean = jnp.mean(x, axis=other, keepdims=True)
    var = jnp.mean(lax.square(x - mean), axis=other, keepdims=True)
    y = (_per_feature(scale, x.ndim, feature_index) * (x - mean) * lax.rsqrt(var + jnp.asarray(epsilon, x.dtype))
         + _per_feature(offset, x.ndim, feature_index))
    return y, mean.reshape(-1), var.reshape(-1)


@rule("batch-norm-inference")
def _bn_inference(x, scale, offset, mean, variance, *, shape, ctx, epsilon, feature_index, **_):
    f = functools.partial(_per_feature, ndim=x.ndim, feature_index=feature_index)
    return f(scale) * (x - f(mean)) * lax.rsqrt(f(variance) + jnp.asarray(epsilon, x.dtype)) + f(offset)


@rule("batch-norm-grad")
def _bn_grad(x, scale, mean, variance, dy, *, shape, ctx, epsilon, feature_index, **_):
    f = functools.partial(_per_feature, ndim=x.ndim, feature_index=feature_index)
    other = tuple(d for d in range(x.ndim) if d != feature_index)
    eps = jnp.asarray(epsilon, x.dtype)
    centered = x - f(mean)
    c = jnp.mean(dy * centered, axis=other, keepdims=True) / (f(variance) + eps)
    grad_operand = f(scale) * lax.rsqrt(f(variance) + eps) * (dy - jnp.mean(dy, axis=other, keepdims=True)
                                                              - c * centered)
    grad_scale = jnp.sum(dy * centered * lax.rsqrt(f(variance) + eps), axis=other)
    return grad_operand, grad_scale, jnp.sum(dy, axis=other)


# ---------------------------------------------------------------------------------------
# Random numbers

_ALGORITHMS = {"rng_default": "RNG_DEFAULT", "rng_three_fry": "RNG_THREE_FRY", "rng_philox": "RNG_PHILOX"}


@rule("rng-bit-generator")
def _rng_bit_generator(state, *, shape, ctx, algorithm="rng_default", **_):
    state_shape, data_shape = shape.tuple_shapes
    if tuple(state.shape) != (2,):
        raise NotImplementedError(f"jax backend: rng-bit-generator with a {state_shape} state (lax takes "
                                  "u64[2])")
    bits = dtypes.bit_width(data_shape.element_type)
    unsigned = np.dtype(f"uint{bits}")
    new_state, words = lax.rng_bit_generator(state, tuple(data_shape.dims), dtype=unsigned,
                                             algorithm=lax.RandomAlgorithm[_ALGORITHMS[algorithm]])
    if unsigned != data_shape.dtype:
        words = lax.bitcast_convert_type(words, data_shape.dtype)
    return new_state, words


@rule("rng")
def _rng(a, b, *, shape, ctx, distribution, **_):
    if distribution != "rng_uniform":
        raise NotImplementedError(f"jax backend: rng with distribution={distribution} (lax has only "
                                  "rng_uniform; use jax.random)")
    return lax.rng_uniform(a, b, tuple(shape.dims))


# ---------------------------------------------------------------------------------------
# Collectives: inside shard_map over the whole mesh (one replica, N partitions)

def _group_mode(channel_id, use_global_device_ids):
    from ..ops.collective import _group_mode as group_mode  # XLA's CollectiveOpGroupMode, defined once
    return group_mode(channel_id, use_global_device_ids)


def device_groups(ctx, replica_groups, channel_id, use_global_device_ids, what):
    """The groups of mesh positions that meet (every device in one), in group order."""
    n = ctx.num_devices
    mode = _group_mode(channel_id, use_global_device_ids)
    groups = [list(map(int, g)) for g in (replica_groups or ())]
    if mode in ("cross_replica", "cross_replica_and_partition"):
        # the ids are replica ids, and there is one replica
        bad = sorted({i for g in groups for i in g} - {0})
        if bad:
            raise ExecutionError(f"{what}: replica_groups name replicas {bad}, but the jax backend runs "
                                 "one replica")
        return [[p] for p in range(n)] if mode == "cross_replica" else [list(range(n))]
    if not groups:
        return [list(range(n))]
    spmd = ctx.spmd
    bad = sorted({i for g in groups for i in g if not 0 <= i < n})
    if bad:
        raise ExecutionError(f"{what}: replica_groups name devices {bad}, but the program runs on {n}")
    positions = spmd.positions if spmd is not None else {0: 0}
    out = [[positions[i] for i in g] for g in groups]
    missing = sorted(set(range(n)) - {p for g in out for p in g})
    if missing:
        raise ExecutionError(f"{what}: devices {missing} are in no group of replica_groups={groups}")
    return out


def _axes_of(ctx, groups):
    """The mesh axes whose devices make up exactly ``groups`` (in group order), or None."""
    if all(len(g) == 1 for g in groups):
        return ()
    spmd = ctx.spmd
    if spmd is None or not COLLECTIVES_ON_AXES:
        return None
    want = sorted(tuple(g) for g in groups)
    names = [a for a, _ in spmd.mesh_axes]
    for r in range(1, len(names) + 1):
        for subset in itertools.combinations(range(len(names)), r):
            if sorted(spmd.groups_over(subset)) == want:
                return tuple(names[i] for i in subset)
    return None


def _group_table(ctx, groups):
    """(members[N, G], rank[N]): each device's group (positions, in group order) and its
    rank in it, as constant tables to index with the device position."""
    size = len(groups[0])
    if any(len(g) != size for g in groups):
        raise NotImplementedError(f"jax backend: collective groups of different sizes {groups}")
    members = np.zeros((len(sum(groups, [])), size), np.int32)
    rank = np.zeros(len(members), np.int32)
    for g in groups:
        for k, p in enumerate(g):
            members[p], rank[p] = g, k
    return jnp.asarray(members), jnp.asarray(rank)


def _group_values(ctx, x, groups):
    """(values of my group stacked (G, ...), my rank in the group) via an all_gather of all."""
    everyone = lax.all_gather(x, ctx.spmd.axes, axis=0, tiled=False)
    members, rank = _group_table(ctx, groups)
    me = ctx.device_position()
    return jnp.take(everyone, members[me], axis=0), rank[me]


def _elementwise(computation, a, b):
    fn = computation
    for _ in range(a.ndim):
        fn = jax.vmap(fn)
    return fn(a, b)


def _fold(computation, values, count):
    acc = values[0]
    for i in range(1, count):
        acc = _elementwise(computation, acc, values[i])
    return acc


def _pack(values, shape):
    return tuple(values) if shape.is_tuple else values[0]


@rule("all-reduce")
def _all_reduce(*ops, shape, ctx, computation, replica_groups=(), channel_id=None, use_global_device_ids=False,
                **_):
    groups = device_groups(ctx, replica_groups, channel_id, bool(use_global_device_ids), "AllReduce")
    axes = _axes_of(ctx, groups)
    kind = binary_kind(computation)
    out = []
    for x in ops:
        if axes == ():
            out.append(x)
        elif axes is not None and kind in ("add", "maximum", "minimum") and x.dtype != np.bool_:
            fn = {"add": lax.psum, "maximum": lax.pmax, "minimum": lax.pmin}[kind]
            out.append(fn(x, axes))
        else:
            values, _ = _group_values(ctx, x, groups)
            out.append(_fold(computation, values, len(groups[0])))
    return _pack(out, shape)


@rule("all-gather")
def _all_gather(*ops, shape, ctx, all_gather_dim, replica_groups=(), channel_id=None,
                use_global_device_ids=False, **_):
    groups = device_groups(ctx, replica_groups, channel_id, bool(use_global_device_ids), "AllGather")
    axes = _axes_of(ctx, groups)
    d = int(all_gather_dim)
    out = []
    for x in ops:
        if axes == ():
            out.append(x)
        elif axes is not None:
            out.append(lax.all_gather(x, axes, axis=d, tiled=True))
        else:
            values, _ = _group_values(ctx, x, groups)
            out.append(lax.concatenate([values[i] for i in range(len(groups[0]))], d))
    return _pack(out, shape)


@rule("all-to-all")
def _all_to_all(*ops, shape, ctx, split_dimension=None, replica_groups=(), channel_id=None, **_):
    groups = device_groups(ctx, replica_groups, channel_id, None, "AllToAll")
    axes = _axes_of(ctx, groups)
    g = len(groups[0])
    if split_dimension is None:  # the tuple form: operand j goes to member j
        if axes == ():
            return tuple(ops)
        stacked = jnp.stack(ops)
        values, rank = _group_values(ctx, stacked, groups)
        return tuple(jnp.take(values[i], rank, axis=0) for i in range(g))
    d = int(split_dimension)
    x = ops[0]
    if axes == ():
        return x
    if axes is not None:
        return lax.all_to_all(x, axes, d, d, tiled=True)
    values, rank = _group_values(ctx, x, groups)
    size = x.shape[d] // g
    return lax.concatenate([lax.dynamic_slice_in_dim(values[i], rank * size, size, d) for i in range(g)], d)


@rule("collective-permute")
def _collective_permute(*ops, shape, ctx, source_target_pairs, channel_id=None, **_):
    n = ctx.num_devices
    pairs = [(int(s), int(t)) for s, t in source_target_pairs]
    bad = sorted({i for p in pairs for i in p if not 0 <= i < n})
    if bad:
        raise ExecutionError(f"CollectivePermute: source_target_pairs name devices {bad}, but the program "
                             f"runs on {n}")
    out = []
    for x in ops:
        if n == 1:
            out.append(x if (0, 0) in pairs else jnp.zeros_like(x))
        else:
            pos = ctx.spmd.positions
            out.append(lax.ppermute(x, ctx.spmd.axes, perm=[(pos[s], pos[t]) for s, t in pairs]))
    return _pack(out, shape)


@rule("reduce-scatter")
def _reduce_scatter(*ops, shape, ctx, computation, scatter_dimension, replica_groups=(), channel_id=None,
                    use_global_device_ids=False, **_):
    groups = device_groups(ctx, replica_groups, channel_id, bool(use_global_device_ids), "ReduceScatter")
    axes = _axes_of(ctx, groups)
    kind = binary_kind(computation)
    d = int(scatter_dimension)
    g = len(groups[0])
    out = []
    for x in ops:
        if axes == ():
            out.append(x)
        elif axes is not None and kind == "add" and x.dtype != np.bool_:
            out.append(lax.psum_scatter(x, axes, scatter_dimension=d, tiled=True))
        else:
            values, rank = _group_values(ctx, x, groups)
            reduced = _fold(computation, values, g)
            size = x.shape[d] // g
            out.append(lax.dynamic_slice_in_dim(reduced, rank * size, size, d))
    return _pack(out, shape)


@rule("collective-broadcast")
def _collective_broadcast(x, *, shape, ctx, replica_groups=(), channel_id=None, **_):
    n = ctx.num_devices
    groups = [list(map(int, g)) for g in (replica_groups or ())] or [list(range(n))]
    if n == 1:
        return x if any(0 in g for g in groups) else jnp.zeros_like(x)
    pos = ctx.spmd.positions
    root = np.full(n, -1, np.int32)
    for g in groups:
        for i in g:
            root[pos[i]] = pos[g[0]]
    everyone = lax.all_gather(x, ctx.spmd.axes, axis=0, tiled=False)
    mine = jnp.asarray(root)[ctx.device_position()]
    return jnp.where(mine >= 0, jnp.take(everyone, jnp.maximum(mine, 0), axis=0), jnp.zeros_like(x))


@rule("replica-id")
def _replica_id(*, shape, ctx, **_):
    return jnp.asarray(0, jnp.uint32)  # the jax backend runs one replica


@rule("partition-id")
def _partition_id(*, shape, ctx, **_):
    if ctx.spmd is None or not ctx.manual:
        return jnp.asarray(0, jnp.uint32)
    ids = ctx.spmd.ids
    pos = ctx.device_position()
    if np.array_equal(ids, np.arange(len(ids))):
        return pos.astype(jnp.uint32)
    return jnp.asarray(ids, jnp.uint32)[pos]


# ---------------------------------------------------------------------------------------
# Partitioned modules: the mesh, shard_map, the SPMD custom-calls

class SpmdLowering:
    """A partitioned module's mesh on JAX's devices, and its shardings as PartitionSpecs."""

    def __init__(self, module):
        from . import spmd
        info = spmd.SpmdInfo(module)
        if info.num_replicas > 1:
            raise NotImplementedError(f"jax backend: {module.name} has {info.num_replicas} replicas; the jax "
                                      "backend runs partitioned modules of one replica")
        n = info.num_partitions
        meshes = [m for m in info.meshes.values() if m.size == n] or sorted(info.meshes.values(), key=lambda m: -m.size)
        if meshes and meshes[0].size == n and meshes[0].axes:
            mesh = meshes[0]
        else:
            mesh = spmd.Mesh([("_devices", n)])
        self.info, self.size = info, n
        self.mesh_axes = list(mesh.axes)
        self.sdy_mesh = mesh
        self.ids = np.asarray(mesh.device_ids, np.int64).reshape(-1)
        self.positions = {int(d): k for k, d in enumerate(self.ids)}
        self.axes = tuple(a for a, _ in self.mesh_axes)
        devices = jax.devices()
        if len(devices) < n:
            raise ExecutionError(
                f"{module.name} runs on {n} devices (num_partitions={n}) but JAX has {len(devices)} "
                f"({devices[0].platform}). On CPU, ask XLA for more host devices before jax is imported: "
                f"XLA_FLAGS=--xla_force_host_platform_device_count={max(n, 8)} (xla_explorer's jax backend "
                "adds that itself when it imports jax first), or jax.config.update('jax_num_cpu_devices', "
                f"{max(n, 8)}) before JAX's first use.")
        sizes = [s for _, s in self.mesh_axes]
        self.mesh = jax.sharding.Mesh(np.array(devices[:n], dtype=object).reshape(sizes), self.axes)

    def groups_over(self, subset):
        """The groups of positions that vary over the mesh axes ``subset`` (row-major)."""
        sizes = [s for _, s in self.mesh_axes]
        grid = np.arange(self.size).reshape(sizes)
        rest = [i for i in range(len(sizes)) if i not in subset]
        moved = np.transpose(grid, rest + list(subset)).reshape(-1, int(np.prod([sizes[i] for i in subset])))
        return [tuple(int(p) for p in row) for row in moved]

    def P(self, *spec):
        return jax.sharding.PartitionSpec(*spec)

    @property
    def stacked_spec(self):
        return jax.sharding.PartitionSpec(self.axes)

    def spec_for(self, tiling, dims):
        """A PartitionSpec of the mesh that cuts an array of ``dims`` as ``tiling`` does
        (evenly), or None."""
        from . import spmd
        if tiling is None or not SHARDINGS_AS_SPECS:
            return None
        rank = len(dims)
        if tiling.rank != rank:
            return None
        if any(d % t for d, t in zip(dims, tiling.tiles)):
            return None
        want = [[frozenset(int(x) for x in tiling.devices[idx].reshape(-1))]
                for idx in np.ndindex(*tiling.tiles)]
        for assign in itertools.product(range(rank + 1), repeat=len(self.mesh_axes)):
            dim_axes = [[(a, 1, None) for (a, _), where in zip(self.mesh_axes, assign) if where == d]
                        for d in range(rank)]
            cand = spmd.sdy_tiling(self.sdy_mesh, dim_axes)
            if tuple(cand.tiles) != tuple(tiling.tiles):
                continue
            got = [[frozenset(int(x) for x in cand.devices[idx].reshape(-1))] for idx in np.ndindex(*cand.tiles)]
            if got == want:
                return jax.sharding.PartitionSpec(*[tuple(a for a, _, _ in axes) if axes else None
                                                    for axes in dim_axes])
        return None

    def shard_map(self, fn, in_specs, out_specs):
        return jax.shard_map(fn, mesh=self.mesh, in_specs=in_specs, out_specs=out_specs, check_vma=False)


def _in_shard_map(inst, operands, ctx):
    """Run ``inst`` once per device under shard_map: Manual operands give each device its
    own value, others are the same on every device; every result is per device."""
    spmd = ctx.spmd
    if spmd is None:
        raise ExecutionError(f"jax backend: {inst.name} gets per-device values outside a partitioned module")
    flat, tree = jax.tree_util.tree_flatten(operands, is_leaf=lambda v: isinstance(v, Manual))
    manual = [isinstance(v, Manual) for v in flat]
    args = [v.data if m else v for v, m in zip(flat, manual)]
    in_specs = tuple(spmd.stacked_spec if m else spmd.P() for m in manual)
    fn = RULES[inst.opcode]
    out_tree = []

    def body(*local):
        local = [x[0] if m else x for x, m in zip(local, manual)]
        value = _apply(fn, inst, jax.tree_util.tree_unflatten(tree, local), ctx.inside_shard_map())
        leaves, t = jax.tree_util.tree_flatten(value)
        out_tree.append(t)
        return [x[None] for x in leaves]

    results = spmd.shard_map(body, in_specs, spmd.stacked_spec)(*args)
    return jax.tree_util.tree_unflatten(out_tree[-1], [Manual(r) for r in results])


def _need_spmd(ctx, target):
    if ctx.spmd is None:
        raise ExecutionError(f"jax backend: custom-call {target} outside a partitioned module")
    return ctx.spmd


def _to_local(spmd, x, tiling, local_shape, where):
    """A global array cut into per-device shards (a Manual value)."""
    spec = spmd.spec_for(tiling, tuple(x.shape))
    local_dims = tuple(local_shape.dims)
    if spec is not None and tuple(d // t for d, t in zip(x.shape, tiling.tiles)) == local_dims:
        return Manual(spmd.shard_map(lambda v: v[None], (spec,), spmd.stacked_spec)(x))
    # generic: pad to whole tiles and slice each device's tile out (static slices)
    shard = tiling.shard_dims(tuple(x.shape), where)
    if shard != local_dims:
        raise ExecutionError(f"{where}{list(x.shape)} cut by {tiling.text} gives {list(shard)} but the "
                             f"result is {local_shape}")
    full = [t * s for t, s in zip(tiling.tiles, shard)]
    padded = lax.pad(x, jnp.zeros((), x.dtype), [(0, f - d, 0) for f, d in zip(full, x.shape)])
    pieces = []
    for pos in range(spmd.size):
        index = tiling.tile_index(int(spmd.ids[pos]))
        if index is None:
            raise NotImplementedError(f"jax backend: {where}device {spmd.ids[pos]} holds no tile of {tiling.text}")
        start = [i * s for i, s in zip(index, shard)]
        pieces.append(lax.slice(padded, start, [b + s for b, s in zip(start, shard)]))
    return Manual(jnp.stack(pieces))


def _to_global(spmd, m, tiling, shape, where):
    """Per-device shards (a Manual value) joined into the global array of ``shape``."""
    local = m.shape
    dims = tuple(shape.dims)
    if tiling is None or tiling.is_replicated:
        if local != dims:
            raise ExecutionError(f"{where}a replicated result {shape} from shards of {list(local)}")
        return m.data[spmd.positions.get(0, 0)]
    spec = spmd.spec_for(tiling, dims)
    if spec is not None and tuple(d // t for d, t in zip(dims, tiling.tiles)) == local:
        return spmd.shard_map(lambda v: v[0], (spmd.stacked_spec,), spec)(m.data)
    shard = tiling.shard_dims(dims, where)
    if shard != local:
        raise ExecutionError(f"{where}shards of {list(local)}, but {tiling.text} of {shape} makes {list(shard)}")
    out = jnp.zeros(dims, m.data.dtype)
    for index in np.ndindex(*tiling.tiles):
        holders = sorted(int(d) for d in tiling.devices[index].reshape(-1))
        piece = m.data[spmd.positions[holders[0]]]
        start = [i * s for i, s in zip(index, shard)]
        size = [max(0, min(s, d - b)) for s, d, b in zip(shard, dims, start)]
        if 0 in size:
            continue
        out = lax.dynamic_update_slice(out, lax.slice(piece, [0] * len(size), size), start)
    return out


def _shapes(shape):
    return list(shape.tuple_shapes) if shape.is_tuple else [shape]


def _sdy_tilings(ctx, key, inst, shapes, target):
    from . import spmd as spmd_mod
    spmd = _need_spmd(ctx, target)
    fa = spmd_mod.parse_frontend_attributes(spmd_mod._raw(inst, "frontend_attributes"))
    text = fa.get(key, "")
    found = spmd_mod.parse_sdy_shardings(text)
    if len(found) != len(shapes):
        raise ExecutionError(f"custom-call {target}: {len(found)} shardings ({text}) for {len(shapes)} values")
    manual_axes = spmd_mod._manual_axes(fa)
    return [spmd.info.sdy(mesh, dims, manual_axes, text) for mesh, dims in found]


def _hlo_tiling(ctx, text, shape):
    from . import spmd as spmd_mod
    if not text:
        return None
    return spmd_mod.resolve(spmd_mod.parse_hlo_sharding(text), shape.rank, ctx.spmd.size)


def _spmd_custom_call(target, values, shape, ctx):
    from . import spmd as spmd_mod
    inst = ctx.instruction
    shapes = _shapes(shape)
    if target in ("Sharding", "xla.sdy.FuncResultSharding"):
        return _pack(list(values), shape)
    spmd = _need_spmd(ctx, target)
    where = f"custom-call {target} ({inst.name}): "
    if target == "xla.sdy.GlobalToLocalShape":
        tilings = _sdy_tilings(ctx, "xla.sdy.in_shardings", inst, shapes, target)
        return _pack([_to_local(spmd, v, t, s, where) for v, t, s in zip(values, tilings, shapes)], shape)
    if target == "xla.sdy.LocalToGlobalShape":
        tilings = _sdy_tilings(ctx, "xla.sdy.out_shardings", inst, shapes, target)
        return _pack([_to_global(spmd, _manual(v, where), t, s, where)
                      for v, t, s in zip(values, tilings, shapes)], shape)
    if target == "SPMDFullToShardShape":
        operand = inst.operands[0] if inst.operands else None
        text = spmd_mod._raw(operand, "sharding") if operand is not None else None
        tiling = _hlo_tiling(ctx, text, shape)
        if tiling is None:  # no sharding to read: tiles from the shapes, devices in iota order
            tiles = [g // max(s, 1) for g, s in zip(values[0].shape, shape.dims)]
            tiling = spmd_mod.Tiling(np.arange(spmd.size).reshape(tiles + [-1]), shape.rank, f"tiles {tiles}")
        return _to_local(spmd, values[0], tiling, shape, where)
    if target == "SPMDShardToFullShape":
        tiling = _hlo_tiling(ctx, spmd_mod._raw(inst, "sharding"), shape)
        return _to_global(spmd, _manual(values[0], where), tiling, shape, where)
    raise NotImplementedError(f"jax backend: custom-call target {target!r}")


def _manual(value, where):
    if not isinstance(value, Manual):
        raise ExecutionError(f"{where}expects per-device values (from GlobalToLocalShape / "
                             "SPMDFullToShardShape)")
    return value


# ---------------------------------------------------------------------------------------
# Custom calls: the SPMD ones, and typed-FFI targets forwarded to XLA as they are

def ffi_attributes(backend_config):
    """``{uplo = 76 : ui8, n = 3 : i64, eps = 1.0 : f32}`` -> ``{"uplo": np.uint8(76), ...}``."""
    import re
    out = {}
    text = str(backend_config or "")
    for key, value, kind in re.findall(r"(\w+)\s*=\s*([-+\w.]+)\s*:\s*(\w+)", text):
        if kind.startswith("ui"):
            out[key] = np.dtype(f"uint{kind[2:]}").type(int(value))
        elif kind.startswith("i") and kind[1:].isdigit():
            out[key] = np.dtype(f"int{kind[1:]}").type(int(value))
        elif kind.startswith("f") and kind[1:].isdigit():
            out[key] = np.dtype(f"float{kind[1:]}").type(float(value))
    for key, value in re.findall(r"(\w+)\s*=\s*(true|false)\b", text):
        out[key] = value == "true"
    return out


def _layouts_from(text):
    """``{f32[5,5]{0,1}, s32[]}`` -> [(1, 0), ()] (major-to-minor, as jax.ffi wants)."""
    from ..hlo.attrs import split_top
    out = []
    body = str(text).strip()
    if body.startswith("{") and body.endswith("}"):
        body = body[1:-1]
    for part in split_top(body):
        s = Shape.parse(part)
        out.append(tuple(reversed(s.layout)) if s.layout is not None else None)
    return out


@rule("custom-call")
def _custom_call(*values, shape, ctx, custom_call_target, backend_config=None, api_version=None,
                 custom_call_has_side_effect=False, **_):
    target = custom_call_target
    if target in _SPMD_TARGETS:
        return _spmd_custom_call(target, values, shape, ctx)
    if api_version != "API_VERSION_TYPED_FFI":
        raise NotImplementedError(f"jax backend: custom-call target {target!r} (api_version={api_version}); "
                                  "only typed-FFI targets are forwarded to XLA")
    inst = ctx.instruction
    if target.startswith("lapack_"):
        # jaxlib registers the LAPACK targets at import but fills in their routines lazily
        from jax._src.lax import linalg as linalg_internal
        linalg_internal.initialize_lapack()
    results = _shapes(shape)
    types = [jax.ShapeDtypeStruct(tuple(s.dims), s.dtype) for s in results]
    constraints = inst.extra.get("operand_layout_constraints") if inst is not None else None
    input_layouts = _layouts_from(constraints) if constraints else None
    output_layouts = [tuple(reversed(s.layout)) if s.layout is not None else None for s in results]
    call = jax.ffi.ffi_call(target, types if shape.is_tuple else types[0], input_layouts=input_layouts,
                            output_layouts=output_layouts if shape.is_tuple else output_layouts[0],
                            has_side_effect=bool(custom_call_has_side_effect))
    out = call(*values, **ffi_attributes(backend_config))
    return tuple(out) if shape.is_tuple else out


__all__ = ["RULES", "rule", "load", "run", "lower_module", "jitted", "eval_instruction", "Manual",
           "LoweringContext", "Lowered", "ensure_host_devices", "binary_kind"]
