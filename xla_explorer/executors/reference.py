"""The reference executor: walk a computation and call each op's NumPy reference.

It is the oracle every other executor is tested against, so it does nothing clever:
values live in a dict keyed by instruction, each instruction's reference gets its
operands' values, its attributes, and its result shape (from the shape rule), and
called computations arrive as ``Region`` callables.  Intermediates are dropped after
their last use.
"""
import threading
import time

import numpy as np

from .. import dtypes, fpenv, progress
from ..errors import ExecutionError, ShapeError
from ..hlo.ir import HloComputation
from ..ops import registry
from ..hlo.verify import run_shape
from ..shapes import check_size


class Token:
    """The value of a ``token[]``: orders side effects, carries nothing."""

    def __repr__(self):
        return "Token()"


class Rendezvous:
    """Where simulated devices meet for a collective: each gives a value, all get the list.

    Devices are threads.  ``exchange(key, device, value, participants)`` blocks until every
    participant gave its value for ``key`` and returns them in ``participants`` order (all
    devices, in device order, by default).  A device that can never be met (it failed, it
    finished, or every live device waits at some other collective) turns into an
    ``ExecutionError`` naming who waits where, instead of a hang; ``timeout`` seconds is the
    last resort for a device stuck elsewhere (an endless while loop).
    """

    #: seconds a device waits for the others at one collective before giving up
    DEFAULT_TIMEOUT = 120.0

    def __init__(self, num_devices, timeout=None):
        self.n = num_devices
        self.timeout = self.DEFAULT_TIMEOUT if timeout is None else timeout
        self._cond = threading.Condition()
        self._slots = {}      # (key, participants) -> {device: value}
        self._taken = {}      # (key, participants) -> how many participants read the values
        self._waiting = {}    # device -> (key, participants) it waits at
        self._done = set()    # devices whose program ended (normally or not)
        self._aborted = False

    def exchange(self, key, device, value, participants=None):
        """Give ``value`` for ``key``; return every participant's value, in participants order."""
        participants = tuple(range(self.n)) if participants is None else tuple(int(p) for p in participants)
        if participants == (device,):
            return [value]
        if device not in participants:
            raise ExecutionError(f"device {device} takes part in collective {key} but is not among its "
                                 f"participants {list(participants)}")
        bad = [p for p in participants if not 0 <= p < self.n]
        if bad:
            raise ExecutionError(f"collective {key}: devices {bad} do not exist (there are {self.n} "
                                 f"devices, 0..{self.n - 1}); check replica_groups / source_target_pairs")
        slot_key = (key, participants)
        deadline = time.monotonic() + self.timeout
        with self._cond:
            slot = self._slots.setdefault(slot_key, {})
            slot[device] = value
            self._waiting[device] = slot_key
            self._cond.notify_all()
            try:
                while len(slot) < len(participants):
                    if self._aborted:
                        raise threading.BrokenBarrierError
                    stuck = self._stuck(slot_key, slot)
                    if stuck:
                        raise ExecutionError(f"device {device} waits forever at collective {key} with "
                                             f"participants {list(participants)}: {stuck}")
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise ExecutionError(f"device {device} waited {self.timeout:g} s at collective {key} "
                                             f"for participants {sorted(set(participants) - set(slot))}; "
                                             f"{self._where()}")
                    self._cond.wait(min(left, 1.0))
            finally:
                self._waiting.pop(device, None)
            values = [slot[p] for p in participants]
            self._taken[slot_key] = self._taken.get(slot_key, 0) + 1
            if self._taken[slot_key] == len(participants):
                del self._slots[slot_key], self._taken[slot_key]
        return values

    def _stuck(self, slot_key, slot):
        """Why ``slot`` can never fill, or '' while it still can."""
        missing = [p for p in slot_key[1] if p not in slot]
        gone = [p for p in missing if p in self._done]
        if gone:
            return f"devices {gone} already finished without reaching it"
        running = [d for d in range(self.n) if d not in self._done and d not in self._waiting]
        if not running and not any(len(s) == len(k[1]) for k, s in self._slots.items()):
            return "every device waits at a collective that others never reach (" + self._where() + ")"
        return ""

    def _where(self):
        at = {d: k[0] for d, k in self._waiting.items()}
        return "devices waiting: " + (", ".join(f"{d} at {at[d]}" for d in sorted(at)) or "none") + \
            (f"; finished: {sorted(self._done)}" if self._done else "")

    def done(self, device):
        """Device ``device`` will not come to any further collective."""
        with self._cond:
            self._done.add(device)
            self._cond.notify_all()

    def abort(self):
        """Release every waiting device (a device failed): they raise BrokenBarrierError."""
        with self._cond:
            self._aborted = True
            self._cond.notify_all()


class ExecutionContext:
    """What a run knows beyond the values: devices, the collectives' meeting point, channels."""

    def __init__(self, replica_id=0, partition_id=0, num_replicas=1, num_partitions=1,
                 rendezvous=None, channels=None, rng_seed=0, spmd=None):
        self.replica_id, self.partition_id = replica_id, partition_id
        self.num_replicas, self.num_partitions = num_replicas, num_partitions
        self._rendezvous = rendezvous   # one device's is made when first used (a run rarely does)
        #: simulated host channels: {"infeed": [...], "outfeed": [...], channel_id: [...]}
        self.channels = channels if channels is not None else {}
        self._rng_seed, self._rng = rng_seed, None   # the generator is made when first used
        #: the partitioned module's meshes and shardings (``executors.spmd``), when it has any
        self.spmd = spmd
        #: the instruction being run (ops whose meaning depends on the module look at it)
        self.instruction = None
        #: a ``trace.Recorder`` when the run is traced (``comp.trace``), else None
        self.tracer = None
        self._counters = {}

    @property
    def rendezvous(self):
        if self._rendezvous is None:
            self._rendezvous = Rendezvous(1)
        return self._rendezvous

    @rendezvous.setter
    def rendezvous(self, value):
        self._rendezvous = value

    @property
    def rng(self):
        """A seeded NumPy generator (made on first use: it costs 6 us, every run)."""
        if self._rng is None:
            self._rng = np.random.default_rng(self._rng_seed)
        return self._rng

    @rng.setter
    def rng(self, value):
        self._rng = value

    @property
    def device_id(self):
        return self.replica_id * self.num_partitions + self.partition_id

    @property
    def num_devices(self):
        return self.num_replicas * self.num_partitions

    def next_key(self, what):
        """A per-device sequence number per kind of meeting: the n-th ``what`` of every device
        meets the n-th ``what`` of the others."""
        n = self._counters[what] = self._counters.get(what, 0) + 1
        return (what, n)


class Region:
    """A called computation (a reduce body, a comparator, a while body) as a callable."""

    def __init__(self, computation, ctx):
        self.computation, self.ctx = computation, ctx
        self._elementwise = None

    def __call__(self, *args):
        # an element-wise region called on whole arrays computes every element at once;
        # its instructions then produce arrays, not the scalars their shapes say.  A region
        # called on arguments of its declared shapes (a conditional's branch, a while body
        # on arrays) is an ordinary call, whatever its instructions
        batched = self.is_elementwise and not all(
            _has_shape(a, p.shape) for a, p in zip(args, self.computation.parameters))
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


def _has_shape(value, shape):
    """True when ``value`` (an array, a token or a tuple of them) has the dimensions of
    ``shape`` (a dynamic dimension: any size up to its bound)."""
    if shape.is_tuple:
        return isinstance(value, (tuple, list)) and len(value) == len(shape.tuple_shapes) and \
            all(_has_shape(v, s) for v, s in zip(value, shape.tuple_shapes))
    if not shape.is_array:
        return True
    dims = np.shape(value)
    return len(dims) == len(shape.dims) and all(d is None or d == n for d, n in zip(shape.dims, dims))


def bind_attrs(attrs, ctx, wrap=None):
    """Replace computation attributes by callables: ``Region``s, or what ``wrap(computation)``
    makes (the other executors' compiled or lowered regions)."""
    wrap = wrap or (lambda comp: Region(comp, ctx))
    out = {}
    for k, v in attrs.items():
        if isinstance(v, HloComputation):
            out[k] = wrap(v)
        elif isinstance(v, (list, tuple)) and v and all(isinstance(c, HloComputation) for c in v):
            out[k] = [wrap(c) for c in v]
        else:
            out[k] = v
    return out


def reference_bytes(op, values, shape, attrs=None):
    """(bytes, how): at most what the NumPy reference of ``op`` allocates to compute
    ``shape`` from ``values``, measured op by op (``reference_memory``)."""
    from .reference_memory import reference_bytes as estimate
    return estimate(op, values, shape, attrs)


def check_reference_size(op, where, values, shape, ctx=None, attrs=None):
    """The size guard of the reference: refuse, before it runs, an instruction whose
    reference would allocate more than the size limit (its result, widened temporaries,
    index arrays; once per simulated device)."""
    total, how = reference_bytes(op, values, shape, attrs)
    copies = ctx.num_devices if ctx is not None else 1
    from ..shapes import MAX_BYTES
    total *= copies
    if total > MAX_BYTES:
        from ..errors import SizeLimitError
        per_device = "" if copies == 1 else f" x {copies} simulated devices"
        raise SizeLimitError(f"{where}: the NumPy reference would need about {total:,} bytes for the result "
                             f"{shape} ({how}{per_device}), more than "
                             f"the limit of {MAX_BYTES:,} bytes; refused before allocating (raise it with "
                             f"xla_explorer.set_size_limit(nbytes), or use backend='numba')")


def _array_leaves(values):
    for v in values:
        if isinstance(v, (tuple, list)):
            yield from _array_leaves(v)
        elif isinstance(v, np.ndarray) or isinstance(v, np.generic):
            yield v


def guard_reference(opcode, values, shape, attrs=None):
    """The reference's size guard for a compiled backend's kernel that falls back to the
    NumPy reference (op by op, regions that do not compile, non-finite convolutions): the
    error names the op; the executor adds the instruction."""
    op = registry.get(opcode)
    check_reference_size(op, op.name, values, shape, None, attrs)


def run_instruction(op, inst_name, values, shape, attrs, ctx, batched=False):
    if op.reference is None:
        raise NotImplementedError(f"{op.name} ({op.opcode}): the NumPy reference is not implemented "
                                  f"(see xla_explorer.status_table())")
    check_size(shape, f"{op.name} {inst_name}", copies=ctx.num_devices)
    check_reference_size(op, f"{op.name} {inst_name}", values, shape, ctx, attrs)
    kwargs = bind_attrs(attrs, ctx)
    kwargs.pop("shape", None)  # an op's declared result shape (iota, custom-call) is `shape` itself
    if op.needs_context:
        kwargs["ctx"] = ctx
    values, flush_result = fpenv.prepare(op, values, shape, attrs)  # XLA:CPU's denormals-are-zero
    try:
        out = op.reference(*values, shape=shape, **kwargs)
    except (ShapeError, NotImplementedError, ExecutionError) as e:
        named = name_instruction(e, f"{op.name} {inst_name}", inst_name)
        if named is None:
            raise
        raise named from e
    except threading.BrokenBarrierError:
        raise
    except Exception as e:
        raise ExecutionError(f"{op.name} {inst_name}: {type(e).__name__}: {e}") from e
    out = conform(out, shape, f"{op.name} {inst_name}", batched)
    return fpenv.flush(out) if flush_result else out    # and flush-to-zero


def name_instruction(e, where, inst_name):
    """``e`` again with ``where`` (op and instruction) in front, when its message does not
    name the instruction yet (a collective's or a target's own error); None if it does."""
    if inst_name in str(e):
        return None
    try:
        named = type(e)(f"{where}: {e}")
    except Exception:  # noqa: BLE001 - an error class with another constructor: leave it
        return None
    for note in getattr(e, "__notes__", ()):
        named.add_note(note)
    return named


def conform(value, shape, where, batched=False):
    """Check a reference's result against its shape; cast a dtype slip, refuse a wrong shape
    (``batched``: an element-wise region run on whole arrays, only the dtype is checked)."""
    if shape.is_tuple:
        if not isinstance(value, (tuple, list)) or len(value) != len(shape.tuple_shapes):
            raise ExecutionError(f"{where}: expected a tuple of {len(shape.tuple_shapes)} values for {shape}")
        return tuple(conform(v, s, where, batched) for v, s in zip(value, shape.tuple_shapes))
    if shape.is_token:
        return value if isinstance(value, Token) else Token()
    try:
        arr = np.asarray(value)
        if arr.dtype != shape.dtype:
            arr = arr.astype(shape.dtype)
    except (ValueError, TypeError) as e:
        raise ExecutionError(f"{where}: the result ({type(value).__name__}) is not an array of {shape} ({e})") from None
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
    # a traced run (``xla_explorer.trace``) reports each instruction's start and end; an
    # ordinary run pays one test per instruction
    tracer = ctx.tracer
    frame = tracer.enter(computation, batched) if tracer is not None else None
    for pos, inst in enumerate(computation.instructions):
        if tracer is not None:
            record = tracer.start(frame, inst)
        try:
            if inst.opcode == "parameter":
                value = params[inst]
            else:
                op = registry.get(inst.opcode)
                ctx.instruction = inst
                values = [env[o] for o in inst.operands]
                shape = run_shape(inst, values) if not batched else inst.shape
                value = run_instruction(op, inst.name, values, shape, inst.attrs, ctx, batched)
        except BaseException:
            if tracer is not None:
                tracer.fail()
            raise
        if tracer is not None:
            tracer.finish(record, value, env)
        env[inst] = value
        if on_value is not None:
            on_value(inst, value)
        for o in set(inst.operands):
            if last_use.get(o) == pos and o is not computation.root:
                del env[o]
    return env[computation.root]


def as_argument(value, shape, where):
    """An argument for a parameter of ``shape``.  NumPy arrays and scalars must have its
    dtype; Python numbers and (nested) lists take the parameter's type where the conversion
    is exact: ``2.9`` or ``2**40`` for an ``s32[]``, ``None``, text, a bool for a number,
    a finite value that overflows to inf are refused with an ExecutionError naming the
    parameter and the shape it expects."""
    if shape.is_tuple:
        if not isinstance(value, (tuple, list)) or len(value) != len(shape.tuple_shapes):
            raise ExecutionError(f"{where}: expected a tuple of {len(shape.tuple_shapes)} values for {shape}, "
                                 f"got {_short(value)}")
        return tuple(as_argument(v, s, f"{where}[{i}]") for i, (v, s) in enumerate(zip(value, shape.tuple_shapes)))
    if shape.is_token:
        return Token()
    if not isinstance(value, (np.ndarray, np.generic)):
        value = _exact_python_value(value, shape, where)
    arr = np.asarray(value)
    if arr.dtype != shape.dtype:
        raise ExecutionError(f"{where}: expected {shape} but the argument has dtype {arr.dtype} "
                             f"({dtypes.from_numpy(arr.dtype) if arr.dtype in dtypes._BY_DTYPE else '?'}); "
                             f"convert it with .astype(np.{shape.dtype.name})")
    if len(shape.dims) != arr.ndim or any(d is not None and d != a for d, a in zip(shape.dims, arr.shape)) \
            or any(d is None and b is not None and a > b for d, b, a in zip(shape.dims, shape.bounds, arr.shape)):
        raise ExecutionError(f"{where}: expected {shape} but the argument has shape {list(arr.shape)}")
    return arr


def _short(v):
    from ..coerce import short
    return f"{short(v)} ({type(v).__name__})"


def _exact_python_value(value, shape, where):
    """A Python value (number, bool, nested list) as an array of ``shape``'s type, or an
    ExecutionError when that would change it."""
    t = shape.element_type
    if value is None or isinstance(value, (str, bytes, dict, set)) or callable(value):
        raise ExecutionError(f"{where}: expected {shape}, got {_short(value)}")
    try:
        src = np.asarray(value)
    except (ValueError, TypeError, OverflowError) as e:
        raise ExecutionError(f"{where}: expected {shape}, got {_short(value)} ({e})") from None
    if src.dtype == object and src.size and all(isinstance(x, int) and not isinstance(x, bool) for x in src.flat):
        pass  # Python ints beyond 64 bits: the range check below refuses them
    elif src.dtype.kind not in "biufc":
        raise ExecutionError(f"{where}: expected {shape}, got {_short(value)}: not an array of numbers")
    kind = "b" if t == "pred" else "iu" if t in dtypes.INTEGRAL else "c" if t in dtypes.COMPLEX else "f"
    if kind == "b" and src.dtype.kind != "b" and src.size:
        raise ExecutionError(f"{where}: expected {shape} (True/False), got {_short(value)}")
    if kind != "b" and src.dtype.kind == "b" and src.size:
        raise ExecutionError(f"{where}: expected {shape} (numbers), got booleans {_short(value)}")
    if kind == "iu" and src.size:
        if src.dtype.kind in "fc":
            if np.iscomplexobj(src) or not np.all(np.isfinite(src)) or np.any(src != np.trunc(src)):
                raise ExecutionError(f"{where}: expected {shape} (integers), got {_short(value)}: not exactly an "
                                     f"integer (no rounding here: convert it first)")
        info = dtypes.iinfo(t)
        lo, hi = (min(src.flat), max(src.flat)) if src.dtype == object else (src.min(), src.max())
        if lo < int(info.min) or hi > int(info.max):
            raise ExecutionError(f"{where}: expected {shape}, got {_short(value)}: "
                                 f"{lo if lo < int(info.min) else hi} is outside [{int(info.min)}, {int(info.max)}]")
        return np.asarray(src.astype(object) if src.dtype == object else src).astype(shape.dtype)
    if kind == "f" and src.dtype.kind == "c" and src.size and np.any(np.imag(src) != 0):
        raise ExecutionError(f"{where}: expected {shape} (real numbers), got complex {_short(value)}")
    if src.dtype == object:
        src = src.astype(np.float64)
    with np.errstate(all="ignore"):
        arr = (src.real if kind == "f" and src.dtype.kind == "c" else src).astype(shape.dtype)
    if kind in "fc" and src.size and np.any(np.isinf(arr) & np.isfinite(src)):
        raise ExecutionError(f"{where}: expected {shape}, got {_short(value)}: a value overflows {t} to inf")
    return arr


def entry_arguments(module, args):
    """What every backend does first: verify the module (``hlo.verify``: the same
    ShapeError everywhere for a module that lies), then check and convert the arguments
    (the same ExecutionError everywhere for an argument that does not fit)."""
    from ..hlo.verify import verify
    verify(module)
    entry = module.entry
    if not isinstance(args, (list, tuple)):
        args = (args,)
    if len(args) != len(entry.parameters):
        raise ExecutionError(f"{module.name} takes {len(entry.parameters)} arguments "
                             f"({', '.join(str(p.shape) for p in entry.parameters)}), got {len(args)}")
    return [as_argument(a, p.shape, _ArgumentName(module.name, i, p))
            for i, (a, p) in enumerate(zip(args, entry.parameters))]


class _ArgumentName:
    """``"<module>: argument i (name: shape)"``, written only when an error names it:
    printing the shape cost about 10 us per argument on every run."""

    __slots__ = ("module", "index", "param")

    def __init__(self, module, index, param):
        self.module, self.index, self.param = module, index, param

    def __str__(self):
        return f"{self.module}: argument {self.index} ({self.param.name}: {self.param.shape})"


def run(module, args, ctx=None, on_value=None, channels=None):
    """Run an XlaComputation on NumPy arguments (the ``numpy`` backend).

    ``channels`` are the simulated host channels (``{"infeed": [values...]}``; outfeed and
    host sends are collected into it).  A partitioned (SPMD) module gets its global
    arguments and simulates its devices (see ``executors.spmd``)."""
    from . import spmd
    if ctx is None and spmd.is_partitioned(module):
        from ..hlo.verify import verify
        verify(module)
        return spmd.run_partitioned(module, args, on_value=on_value, channels=channels)
    entry = module.entry
    args = entry_arguments(module, args)
    ctx = ctx or ExecutionContext(channels=channels)
    if progress.current() is not None:  # inside another run (a replica, a JAX comparison)
        return evaluate(entry, args, ctx, on_value)
    # the run's progress (a notebook's progress bar), one step per entry instruction
    with progress.task(f"numpy: {module.name}", total=len(entry.instructions)) as t:
        if t is progress.QUIET:  # nobody listens: not one call more per instruction
            return evaluate(entry, args, ctx, on_value)

        def step(inst, value):
            t.advance(detail=inst.name)
            if on_value is not None:
                on_value(inst, value)
        return evaluate(entry, args, ctx, step)


def run_replicated(module, per_replica_args, backend="numpy", num_partitions=None, channels=None,
                   timeout=None):
    """Run ``module`` on every simulated device at once (threads), one arg list each;
    returns one result per device (device ``d`` is replica ``d // num_partitions``,
    partition ``d % num_partitions``).  ``num_partitions`` defaults to the module's own
    (its header, mesh or shardings).  A partitioned module may get each device's local
    shards: they are placed into the global arguments its program starts from, and each
    device's results are cut back to its own shards."""
    from . import spmd
    from ..hlo.verify import verify
    verify(module)
    if not isinstance(per_replica_args, (list, tuple)) or not all(isinstance(a, (list, tuple))
                                                                    for a in per_replica_args):
        raise ExecutionError("run_replicated: give one list of arguments per device, e.g. [[a0], [a1]]")
    n = len(per_replica_args)
    if num_partitions is None:
        num_partitions = spmd.num_partitions(module)
    if n == 0 or n % num_partitions:
        raise ExecutionError(f"run_replicated: {n} argument lists for a module of {num_partitions} "
                             f"partitions; give a multiple of {num_partitions} (one list per device)")
    runner = device_runner(backend)
    if spmd.is_partitioned(module):
        return spmd.run_per_device(module, per_replica_args, num_partitions, channels=channels, timeout=timeout,
                                   runner=runner)
    return run_on_devices(lambda ctx: runner(module, per_replica_args[ctx.device_id], ctx),
                          n // num_partitions, num_partitions, channels=channels, timeout=timeout)


def device_runner(backend):
    """``runner(module, args, ctx)`` running one simulated device's program on ``backend``."""
    if backend == "numpy":
        return lambda module, args, ctx: run(module, args, ctx=ctx)
    if backend in ("numba", "cuda"):
        from .numba_executor import run as run_numba
        device = "cpu" if backend == "numba" else "cuda"
        return lambda module, args, ctx: run_numba(module, args, device=device, ctx=ctx)
    if backend == "jax":
        raise NotImplementedError(
            "run_replicated(backend='jax'): simulated devices are for the numpy, numba and cuda backends; "
            "on XLA, run the partitioned module with comp.run(*global_args, backend='jax'), which uses "
            "JAX's devices")
    raise ValueError(f"unknown backend {backend!r} for run_replicated (numpy, numba, cuda)")


def run_on_devices(work, num_replicas, num_partitions, channels=None, timeout=None, spmd=None):
    """Call ``work(ctx)`` once per simulated device, each in a thread of its own, with one
    ``Rendezvous`` for their collectives; the results by device.  The first failure is
    raised (the other devices are released from their collectives, not left hanging)."""
    n = num_replicas * num_partitions
    from .spmd import MAX_DEVICES
    if not 1 <= n <= MAX_DEVICES:
        raise ExecutionError(f"{num_replicas} replicas x {num_partitions} partitions: a run simulates 1 to "
                             f"{MAX_DEVICES} devices")
    rendezvous = Rendezvous(n, timeout)
    shared_channels = channels if channels is not None else {}
    results, errors = [None] * n, [None] * n

    def device(d):
        replica, partition = divmod(d, num_partitions)
        ctx = ExecutionContext(replica, partition, num_replicas, num_partitions, rendezvous,
                               shared_channels, spmd=spmd)
        try:
            results[d] = work(ctx)
        except BaseException as e:  # noqa: B902 - reported below, the others released
            errors[d] = e
            rendezvous.abort()
        finally:
            rendezvous.done(d)

    if n == 1:
        device(0)
    else:
        threads = [threading.Thread(target=device, args=(d,), daemon=True, name=f"xla-device-{d}")
                   for d in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    failed = [(d, e) for d, e in enumerate(errors) if e is not None]
    # the cause first: the others only saw their collectives broken
    failed.sort(key=lambda de: isinstance(de[1], threading.BrokenBarrierError))
    if failed:
        d, e = failed[0]
        if n > 1 and hasattr(e, "add_note"):
            e.add_note(f"(on simulated device {d}: replica {d // num_partitions}, partition {d % num_partitions})")
        raise e
    return results


def eager(op, values, shape, attrs):
    """Eager mode: run one op's reference on NumPy values."""
    return run_instruction(op, op.name, values, shape, attrs, ExecutionContext())


def verify_module(module):
    """Check every instruction's shape against its op's shape rule (see ``hlo.verify``)."""
    from ..hlo.verify import verify_module as _verify
    _verify(module)
