"""The reference executor: walk a computation and call each op's NumPy reference.

It is the oracle every other executor is tested against, so it does nothing clever:
values live in a dict keyed by instruction, each instruction's reference gets its
operands' values, its attributes, and its result shape (from the shape rule), and
called computations arrive as ``Region`` callables.  Intermediates are dropped after
their last use.
"""
import threading

import numpy as np

from .. import dtypes
from ..errors import ExecutionError, ShapeError
from ..hlo.ir import HloComputation
from ..ops import registry
from ..shapes import Shape, check_size


class Token:
    """The value of a ``token[]``: orders side effects, carries nothing."""

    def __repr__(self):
        return "Token()"


class Rendezvous:
    """Where simulated devices meet for a collective: each gives a value, all get the list."""

    def __init__(self, num_devices):
        self.n = num_devices
        self._barrier = threading.Barrier(num_devices) if num_devices > 1 else None
        self._slots = {}
        self._lock = threading.Lock()

    def exchange(self, key, device, value):
        """Block until every device gave its value for ``key``; return them by device."""
        if self.n == 1:
            return [value]
        with self._lock:
            self._slots.setdefault(key, [None] * self.n)[device] = value
        self._barrier.wait()
        values = list(self._slots[key])
        self._barrier.wait()
        with self._lock:
            self._slots.pop(key, None)
        return values

    def abort(self):
        if self._barrier is not None:
            self._barrier.abort()


class ExecutionContext:
    """What a run knows beyond the values: devices, the collectives' meeting point, channels."""

    def __init__(self, replica_id=0, partition_id=0, num_replicas=1, num_partitions=1,
                 rendezvous=None, channels=None, rng_seed=0):
        self.replica_id, self.partition_id = replica_id, partition_id
        self.num_replicas, self.num_partitions = num_replicas, num_partitions
        self.rendezvous = rendezvous or Rendezvous(1)
        #: simulated host channels: {"infeed": [...], "outfeed": [...], channel_id: [...]}
        self.channels = channels if channels is not None else {}
        self.rng = np.random.default_rng(rng_seed)
        self._counter = 0

    @property
    def device_id(self):
        return self.replica_id * self.num_partitions + self.partition_id

    @property
    def num_devices(self):
        return self.num_replicas * self.num_partitions

    def next_key(self, what):
        """A per-device sequence number: the n-th collective of every device meets the n-th."""
        self._counter += 1
        return (what, self._counter)


class Region:
    """A called computation (a reduce body, a comparator, a while body) as a callable."""

    def __init__(self, computation, ctx):
        self.computation, self.ctx = computation, ctx
        self._elementwise = None

    def __call__(self, *args):
        # an element-wise region called on whole arrays computes every element at once;
        # its instructions then produce arrays, not the scalars their shapes say
        batched = self.is_elementwise and any(np.ndim(a) for a in args if not isinstance(a, tuple))
        return evaluate(self.computation, list(args), self.ctx, batched=batched)

    @property
    def parameter_shapes(self):
        return self.computation.parameter_shapes

    @property
    def result_shape(self):
        return self.computation.result_shape

    @property
    def is_elementwise(self):
        """True when every instruction works element by element, so calling the region on
        whole arrays (instead of scalars) computes it for every element at once."""
        if self._elementwise is None:
            ok = registry.CATEGORIES["elementwise"] | {"parameter", "constant", "tuple", "get-tuple-element"}
            self._elementwise = all(i.opcode in ok and (i.opcode != "constant" or i.shape.rank == 0)
                                    for i in self.computation.instructions)
        return self._elementwise

    def __repr__(self):
        return f"<Region {self.computation.name} {self.computation.signature()}>"


def bind_attrs(attrs, ctx):
    """Replace computation attributes by Region callables."""
    out = {}
    for k, v in attrs.items():
        if isinstance(v, HloComputation):
            out[k] = Region(v, ctx)
        elif isinstance(v, (list, tuple)) and v and all(isinstance(c, HloComputation) for c in v):
            out[k] = [Region(c, ctx) for c in v]
        else:
            out[k] = v
    return out


def run_instruction(op, inst_name, values, shape, attrs, ctx, batched=False):
    if op.reference is None:
        raise NotImplementedError(f"{op.name} ({op.opcode}): the NumPy reference is not implemented "
                                  f"(see xla_explorer.status_table())")
    check_size(shape, f"{op.name} {inst_name}")
    kwargs = bind_attrs(attrs, ctx)
    kwargs.pop("shape", None)  # an op's declared result shape (iota, custom-call) is `shape` itself
    if op.needs_context:
        kwargs["ctx"] = ctx
    try:
        out = op.reference(*values, shape=shape, **kwargs)
    except (ShapeError, NotImplementedError, ExecutionError):
        raise
    except threading.BrokenBarrierError:
        raise
    except Exception as e:
        raise ExecutionError(f"{op.name} {inst_name}: {type(e).__name__}: {e}") from e
    return conform(out, shape, f"{op.name} {inst_name}", batched)


def conform(value, shape, where, batched=False):
    """Check a reference's result against its shape; cast a dtype slip, refuse a wrong shape
    (``batched``: an element-wise region run on whole arrays, only the dtype is checked)."""
    if shape.is_tuple:
        if not isinstance(value, (tuple, list)) or len(value) != len(shape.tuple_shapes):
            raise ExecutionError(f"{where}: expected a tuple of {len(shape.tuple_shapes)} values for {shape}")
        return tuple(conform(v, s, where, batched) for v, s in zip(value, shape.tuple_shapes))
    if shape.is_token:
        return value if isinstance(value, Token) else Token()
    arr = np.asarray(value)
    if arr.dtype != shape.dtype:
        arr = arr.astype(shape.dtype)
    if shape.is_static and arr.shape != shape.dims and not batched:
        raise ExecutionError(f"{where}: the reference produced shape {arr.shape}, the shape rule says {shape}")
    return arr


def evaluate(computation, args, ctx, on_value=None, batched=False):
    """Evaluate ``computation`` on ``args``; ``on_value(inst, value)`` sees every value."""
    if len(args) != len(computation.parameters):
        raise ExecutionError(f"computation {computation.name} takes {len(computation.parameters)} "
                             f"arguments, got {len(args)}")
    last_use = {}
    for pos, inst in enumerate(computation.instructions):
        for o in inst.operands:
            last_use[o] = pos
    env = {}
    params = {p: a for p, a in zip(computation.parameters, args)}
    for pos, inst in enumerate(computation.instructions):
        if inst.opcode == "parameter":
            value = params[inst]
        else:
            op = registry.get(inst.opcode)
            value = run_instruction(op, inst.name, [env[o] for o in inst.operands], inst.shape,
                                    inst.attrs, ctx, batched)
        env[inst] = value
        if on_value is not None:
            on_value(inst, value)
        for o in set(inst.operands):
            if last_use.get(o) == pos and o is not computation.root:
                del env[o]
    return env[computation.root]


def as_argument(value, shape, where):
    """An argument for a parameter of ``shape``: Python values take the parameter's type."""
    if shape.is_tuple:
        return tuple(as_argument(v, s, f"{where}[{i}]") for i, (v, s) in enumerate(zip(value, shape.tuple_shapes)))
    if shape.is_token:
        return Token()
    if not isinstance(value, (np.ndarray, np.generic)):
        value = np.asarray(value, dtype=shape.dtype)
    arr = np.asarray(value)
    if arr.dtype != shape.dtype:
        raise ExecutionError(f"{where}: expected {shape} but the argument has dtype {arr.dtype} "
                             f"({dtypes.from_numpy(arr.dtype) if arr.dtype in dtypes._BY_DTYPE else '?'}); "
                             f"convert it with .astype(np.{shape.dtype.name})")
    if len(shape.dims) != arr.ndim or any(d is not None and d != a for d, a in zip(shape.dims, arr.shape)):
        raise ExecutionError(f"{where}: expected {shape} but the argument has shape {list(arr.shape)}")
    return arr


def run(module, args, ctx=None, on_value=None):
    """Run an XlaComputation on NumPy arguments (the ``numpy`` backend)."""
    from . import spmd
    if ctx is None and spmd.is_partitioned(module):
        return spmd.run_partitioned(module, args, on_value=on_value)
    entry = module.entry
    if len(args) != len(entry.parameters):
        raise ExecutionError(f"{module.name} takes {len(entry.parameters)} arguments "
                             f"({', '.join(str(p.shape) for p in entry.parameters)}), got {len(args)}")
    args = [as_argument(a, p.shape, f"argument {i} ({p.name})") for i, (a, p) in enumerate(zip(args, entry.parameters))]
    ctx = ctx or ExecutionContext()
    return evaluate(entry, args, ctx, on_value)


def run_replicated(module, per_replica_args, backend="numpy", num_partitions=1, channels=None):
    """Run ``module`` on every simulated device at once (threads), one arg list each."""
    n = len(per_replica_args)
    rendezvous = Rendezvous(n)
    results, errors = [None] * n, [None] * n
    shared_channels = channels if channels is not None else {}

    def work(d):
        replica, partition = divmod(d, num_partitions)
        ctx = ExecutionContext(replica, partition, n // num_partitions, num_partitions, rendezvous,
                               shared_channels)
        try:
            results[d] = run(module, per_replica_args[d], ctx=ctx)
        except BaseException as e:  # noqa: B902 - reported below, the others released
            errors[d] = e
            rendezvous.abort()

    threads = [threading.Thread(target=work, args=(d,), daemon=True) for d in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for e in errors:
        if e is not None and not isinstance(e, threading.BrokenBarrierError):
            raise e
    for e in errors:
        if e is not None:
            raise e
    return results


def eager(op, values, shape, attrs):
    """Eager mode: run one op's reference on NumPy values."""
    return run_instruction(op, op.name, values, shape, attrs, ExecutionContext())


def verify_module(module):
    """Check every instruction's shape against its op's shape rule (layouts ignored)."""
    from ..builder import infer_shape
    for comp in module.computations:
        for inst in comp.instructions:
            if inst.opcode == "parameter":
                continue
            op = registry.get(inst.opcode)
            inferred = infer_shape(op, [o.shape for o in inst.operands], inst.attrs)
            if not inferred.compatible(inst.shape):
                raise ShapeError(f"{op.name} {inst.name}: the module says {inst.shape} but the shape "
                                 f"rule infers {inferred}")
