"""One trace of a run: every invocation of every instruction, in every computation.

``comp.trace(*args)`` runs the NumPy reference (the executable spec) and records each
instruction it executes -- in the entry computation, in called computations, fusion
bodies, a while loop's condition and body once per iteration, the conditional branch
that was taken, reduce / sort / scatter / map bodies -- as a ``TraceRecord`` keyed by the
instruction's module-unique name and its *invocation* (the k-th time that instruction
ran), with the call stack that led there.  Index maps, the stepper, graph overlays and
``diff`` all read this one trace.

What "every invocation" means is what the reference actually does, no more:

* a body made only of element-wise instructions (``add``, ``maximum``, a ``select``
  comparator ...) is called by the reduce / sort / scatter / map reference on whole
  arrays at once (a reduce folds pairwise in a balanced tree: a handful of calls, not one
  per element).  Its records then have ``batched=True``: their values are arrays although
  their ``shape`` says scalar.
* any other body is called once per element (or per comparison), so a big sort with a
  non-element-wise comparator makes many records.  ``max_records`` caps how many are
  stored; ``count(name)`` stays exact.

Big runs keep what is asked for, not everything: ``keep=`` names instructions (or is a
predicate on records) whose values are kept, and their operands' values with them; the
byte budget ``max_bytes`` bounds what is kept.  A record whose value was not kept still
exists (``kept=False``); ``Trace.cut`` says when the budget, not ``keep``, dropped values.
"""
import threading

import numpy as np

from .errors import ExecutionError

#: the default byte budget for kept values (``comp.trace(..., max_bytes=...)`` changes it)
DEFAULT_MAX_BYTES = 512 * 2**20
#: the default cap on stored records (counts stay exact beyond it)
DEFAULT_MAX_RECORDS = 1_000_000


class TraceRecord:
    """One execution of one instruction.

    ``seq``: its position in ``Trace.records`` (start order: a call / while / fusion record
    comes before the records of its body; its value is filled when it finishes);
    ``name``, ``opcode``, ``computation`` (the computation's name), ``instruction`` (the
    HLO instruction); ``invocation``: this is the k-th execution of ``name``; ``stack``:
    ``(computation, instruction, invocation)`` frames of the calling instructions, entry
    first; ``location == stack + ((computation, name, invocation),)``; ``parent``: the
    calling record's seq (None in the entry); ``depth == len(stack)``; ``operands``: the
    seqs of the records that gave its operand values (None for a parameter: its value
    came from the caller); ``value`` (None when not ``kept``); ``batched``: an element-wise
    body run on whole arrays (see the module docstring); ``device``.
    """

    __slots__ = ("seq", "instruction", "computation", "invocation", "stack", "parent", "operands",
                 "value", "kept", "nbytes", "batched", "device", "done")

    def __init__(self, seq, instruction, computation, invocation, stack, parent, operands, batched, device):
        self.seq, self.instruction, self.computation = seq, instruction, computation
        self.invocation, self.stack, self.parent, self.operands = invocation, stack, parent, operands
        self.batched, self.device = batched, device
        self.value, self.kept, self.nbytes, self.done = None, False, 0, False

    @property
    def name(self):
        return self.instruction.name

    @property
    def opcode(self):
        return self.instruction.opcode

    @property
    def shape(self):
        return self.instruction.shape

    @property
    def depth(self):
        return len(self.stack)

    @property
    def location(self):
        return self.stack + ((self.computation, self.name, self.invocation),)

    def __repr__(self):
        where = " > ".join(f"{i}#{k}" for _, i, k in self.stack)
        state = ("kept" if self.kept else ("running" if not self.done else "not kept")) + (", batched" if self.batched else "")
        return (f"<TraceRecord {self.seq}: {self.name}#{self.invocation} ({self.opcode} {self.shape}) in "
                f"{self.computation}{' via ' + where if where else ''}, {state}>")


def _nbytes(value):
    if isinstance(value, (tuple, list)):
        return sum(_nbytes(v) for v in value)
    return int(getattr(value, "nbytes", 0))


class _Budget:
    """The byte budget, shared by the devices of one trace (threads)."""

    def __init__(self, max_bytes):
        self.max_bytes = DEFAULT_MAX_BYTES if max_bytes is None else max_bytes
        self.used = 0
        self.cut = 0          # records whose value the budget refused
        self.cut_at = None    # (device, seq) of the first of them
        self._lock = threading.Lock()

    def take(self, nbytes, record):
        with self._lock:
            if self.used + nbytes > self.max_bytes:
                self.cut += 1
                if self.cut_at is None:
                    self.cut_at = (record.device, record.seq)
                return False
            self.used += nbytes
            return True


class _Frame:
    """One call of a computation: which record ran each of its instructions."""
    __slots__ = ("computation", "caller", "stack", "seqs", "batched")

    def __init__(self, computation, caller, stack, batched):
        self.computation, self.caller, self.stack, self.seqs, self.batched = computation, caller, stack, {}, batched


class Recorder:
    """What one device's reference run reports to (``ctx.tracer``; see ``reference.evaluate``)."""

    def __init__(self, device=0, keep=None, budget=None, max_records=DEFAULT_MAX_RECORDS, module=None):
        self.device = device
        self.records = []
        self.by_name = {}
        self.counts = {}
        self.running = []          # records whose instruction is executing (the call stack)
        self.budget = budget or _Budget(None)
        self.max_records = max_records
        self.dropped_records = 0
        self._keep_names = self._keep_fn = None
        if keep is None:
            pass
        elif callable(keep):
            self._keep_fn = keep
        else:
            names = [keep] if isinstance(keep, str) else list(keep)
            if module is not None:
                known = {i.name for c in module.computations for i in c.instructions}
                unknown = [n for n in names if n not in known]
                if unknown:
                    raise KeyError(f"keep= names {unknown}, which are not instructions of {module.name}")
            self._keep_names = frozenset(names)

    # -- the hooks reference.evaluate calls ---------------------------------------------
    def enter(self, computation, batched):
        caller = self.running[-1] if self.running else None
        return _Frame(computation.name, caller, caller.location if caller is not None else (), batched)

    def start(self, frame, inst):
        n = self.counts.get(inst.name, 0)
        self.counts[inst.name] = n + 1
        seqs = frame.seqs
        operands = None if inst.opcode == "parameter" else tuple(seqs.get(o) for o in inst.operands)
        rec = TraceRecord(len(self.records), inst, frame.computation, n, frame.stack,
                          frame.caller.seq if frame.caller is not None else None, operands, frame.batched,
                          self.device)
        if len(self.records) < self.max_records:
            self.records.append(rec)
            self.by_name.setdefault(inst.name, []).append(rec)
        else:
            rec.seq = None
            self.dropped_records += 1
        seqs[inst] = rec.seq
        self.running.append(rec)
        return rec

    def finish(self, rec, value, env):
        self.running.pop()
        rec.done = True
        if rec.seq is None:
            return
        if self._wants(rec):
            self._keep(rec, value)
            if rec.operands:
                for o, seq in zip(rec.instruction.operands, rec.operands):
                    if seq is not None and o in env:
                        self._keep(self.records[seq], env[o])

    def fail(self):
        if self.running:
            self.running.pop().done = True

    def _wants(self, rec):
        if self._keep_names is not None:
            return rec.instruction.name in self._keep_names
        if self._keep_fn is not None:
            return bool(self._keep_fn(rec))
        return True

    def _keep(self, rec, value):
        if rec.kept:
            return
        nbytes = _nbytes(value)
        if self.budget.take(nbytes, rec):
            rec.value, rec.kept, rec.nbytes = value, True, nbytes


class Trace:
    """The records of one run (see the module docstring); ``t.result`` is what ``run`` returns.

    For a module that runs on several simulated devices (shard_map / pmap, or
    ``trace_replicated``) each device has its own records: ``t.records`` and the look-ups
    are device ``t.device``'s (0 unless this is ``t.for_device(d)``)."""

    def __init__(self, module, recorders, result, budget, error=None, device=0, results=None, topology=(1, 1)):
        self.module, self._recorders, self.result = module, recorders, result
        #: the simulated devices: ``num_replicas * num_partitions == num_devices``
        self.num_replicas, self.num_partitions = topology
        self._budget, self.error, self.device = budget, error, device
        #: every device's result (one element for a single-device run)
        self.results = results if results is not None else [result]
        rec = recorders[device]
        self.records, self._by_name, self._counts = rec.records, rec.by_name, rec.counts
        self._dropped_records = rec.dropped_records

    # -- devices ------------------------------------------------------------------------
    @property
    def num_devices(self):
        return len(self._recorders)

    def for_device(self, device):
        """The same trace seen from device ``device``."""
        if not 0 <= device < len(self._recorders):
            raise IndexError(f"device {device}: the run had {len(self._recorders)} device(s)")
        return Trace(self.module, self._recorders, self.results[device] if device < len(self.results) else None,
                     self._budget, self.error, device, self.results, (self.num_replicas, self.num_partitions))

    # -- look-ups -----------------------------------------------------------------------
    def count(self, name):
        """How many times instruction ``name`` ran (exact, even beyond ``max_records``)."""
        self._check_name(name)
        return self._counts.get(name, 0)

    def invocations(self, name):
        """The records of instruction ``name``, in the order they ran."""
        self._check_name(name)
        return list(self._by_name.get(name, ()))

    def get(self, name, invocation=0):
        """The record of the ``invocation``-th execution of instruction ``name``."""
        self._check_name(name)
        recs = self._by_name.get(name, ())
        if not -len(recs) <= invocation < len(recs):
            ran = self._counts.get(name, 0)
            if ran == 0:
                inst = self.module.instruction(name)
                where = self._computation_of(inst)
                raise KeyError(f"{name} ({inst.opcode} in {where}) never ran in this trace"
                               f"{' on device %d' % self.device if self.num_devices > 1 else ''}: "
                               f"{self._why_not_run(where)}")
            if invocation < ran:
                raise KeyError(f"{name} ran {ran} times but only the first {len(recs)} records were stored "
                               f"(max_records); pass a larger max_records= to comp.trace")
            raise KeyError(f"{name} ran {ran} time{'s' if ran != 1 else ''}: invocation is 0..{ran - 1}, "
                           f"not {invocation}")
        return recs[invocation]

    def value(self, name, invocation=0):
        """The value instruction ``name`` produced in its ``invocation``-th execution."""
        rec = self.get(name, invocation)
        if not rec.kept:
            raise ExecutionError(self._not_kept(rec))
        return rec.value

    def operand_values(self, name, invocation=0):
        """The values the ``invocation``-th execution of ``name`` got as operands."""
        rec = self.get(name, invocation)
        if rec.operands is None:
            raise ExecutionError(f"{name} is a parameter of {rec.computation}: its value comes from the "
                                 f"caller ({'entry argument' if rec.parent is None else self.records[rec.parent].name})"
                                 f"; use t.value({name!r}, {invocation})")
        out = []
        for o, seq in zip(rec.instruction.operands, rec.operands):
            orec = self.records[seq] if seq is not None else None
            if orec is None or not orec.kept:
                raise ExecutionError(f"operand {o.name} of {name}#{invocation}: " +
                                     (self._not_kept(orec, for_operands_of=name) if orec is not None
                                      else "its record was not stored (max_records)"))
            out.append(orec.value)
        return out

    def entry_values(self):
        """{instruction: value} for the entry computation's instructions that were kept."""
        return {r.instruction: r.value for r in self.records if r.parent is None and r.kept}

    def children(self, record):
        """The records run directly by ``record``'s call (its body's instructions)."""
        seq = record.seq if isinstance(record, TraceRecord) else record
        return [r for r in self.records[seq + 1:] if r.parent == seq]

    @property
    def cut(self):
        """True when the byte budget dropped values that ``keep`` asked for."""
        return self._budget.cut > 0

    @property
    def kept_bytes(self):
        return self._budget.used

    @property
    def records_cut(self):
        """How many records ``max_records`` left out (their counts are still exact)."""
        return self._dropped_records

    # -- messages -----------------------------------------------------------------------
    def _check_name(self, name):
        if name in self._counts or name in self._by_name:
            return
        try:
            self.module.instruction(name)
        except KeyError:
            import difflib
            names = [i.name for c in self.module.computations for i in c.instructions]
            close = difflib.get_close_matches(name, names, n=5)
            raise KeyError(f"no instruction {name!r} in {self.module.name}"
                           + (f"; did you mean {', '.join(close)}?" if close else "")
                           + f" (instructions that ran: {', '.join(list(self._counts)[:40])}"
                           + (" ..." if len(self._counts) > 40 else "") + ")") from None

    def _computation_of(self, inst):
        for c in self.module.computations:
            if inst in c.instructions:
                return c.name
        return "?"

    def _why_not_run(self, comp_name):
        callers = [f"{i.name} ({i.opcode})" for c in self.module.computations for i in c.instructions
                   if any(getattr(cc, "name", None) == comp_name for cc in i.called_computations())]
        if self.error is not None:
            return f"the run stopped early ({type(self.error).__name__}: {self.error})"
        if callers:
            return (f"{comp_name} is called by {', '.join(callers)}, which did not run it (a branch not "
                    f"taken, a loop that ran zero times)")
        return f"{comp_name} is not called by the entry computation"

    def _not_kept(self, rec, for_operands_of=None):
        what = f"the value of {rec.name}#{rec.invocation} was not kept"
        if self._budget.cut and self._budget.cut_at is not None and rec.nbytes == 0 and self._wanted(rec):
            return (f"{what}: the byte budget (max_bytes={self._budget.max_bytes}) was spent "
                    f"({self._budget.used} bytes kept, {self._budget.cut} values dropped); pass a larger "
                    f"max_bytes= to comp.trace, or keep fewer instructions with keep=[...]")
        target = for_operands_of or rec.name
        return f"{what}; trace with keep=[{target!r}] (its operands are kept with it), or keep=None for all"

    def _wanted(self, rec):
        r = self._recorders[self.device]
        return r._wants(rec) or any(r._wants(c) for c in self.records[rec.seq + 1:]
                                    if c.operands and rec.seq in c.operands)

    def summary(self):
        n_inst = len(self._counts)
        kept = sum(1 for r in self.records if r.kept)
        text = (f"trace of {self.module.name}: {len(self.records)} records of {n_inst} instructions"
                f"{' on device %d of %d' % (self.device, self.num_devices) if self.num_devices > 1 else ''}, "
                f"{kept} values kept ({self._budget.used / 2**20:.1f} MiB)")
        if self._budget.cut:
            text += (f"; the byte budget (max_bytes={self._budget.max_bytes}) dropped {self._budget.cut} "
                     f"values from record {self._budget.cut_at[1]} on")
        if self._dropped_records:
            text += f"; {self._dropped_records} records beyond max_records not stored (counts are exact)"
        if self.error is not None:
            text += f"; the run failed: {type(self.error).__name__}: {self.error}"
        return text

    def __repr__(self):
        return f"<Trace {self.summary()}>"

    def __len__(self):
        return len(self.records)

    def __iter__(self):
        return iter(self.records)


def trace(module, *args, keep=None, max_bytes=None, max_records=DEFAULT_MAX_RECORDS, channels=None):
    """Run ``module`` on ``args`` with the NumPy reference and record every instruction.

    Returns a ``Trace`` (``t.result`` is what ``module.run(*args)`` returns).  ``keep``:
    instruction names whose values (and their operands' values) are kept, or a predicate
    ``keep(record) -> bool``; None keeps every value.  ``max_bytes``: the budget for kept
    values (default 512 MiB).  ``max_records``: how many records are stored.  A run that
    fails raises its error with the partial trace as ``error.trace``.
    A partitioned (shard_map / pmap) module runs every simulated device, each traced."""
    from .executors import reference, spmd
    budget = _Budget(max_bytes)
    if spmd.is_partitioned(module):
        info = spmd.SpmdInfo(module)
        n = info.num_replicas * info.num_partitions
        recorders = [Recorder(d, keep, budget, max_records, module) for d in range(n)]

        def work(ctx):
            ctx.tracer = recorders[ctx.device_id]
            return reference.run(module, args, ctx=ctx)

        return _finish(module, recorders, budget, lambda: reference.run_on_devices(
            work, info.num_replicas, info.num_partitions, channels=channels, spmd=info),
            (info.num_replicas, info.num_partitions))
    recorder = Recorder(0, keep, budget, max_records, module)
    ctx = reference.ExecutionContext(channels=channels)
    ctx.tracer = recorder
    return _finish(module, [recorder], budget, lambda: [reference.run(module, args, ctx=ctx)])


def trace_replicated(module, per_replica_args, keep=None, max_bytes=None, max_records=DEFAULT_MAX_RECORDS,
                     num_partitions=None, channels=None):
    """``module.run_replicated(per_replica_args)`` traced: one record list per device
    (``t.for_device(d)``); ``t.results`` has every device's result."""
    from .executors import reference, spmd
    budget = _Budget(max_bytes)
    n = len(per_replica_args)
    if num_partitions is None:
        num_partitions = spmd.num_partitions(module)
    if n == 0 or n % num_partitions:
        raise ExecutionError(f"trace_replicated: {n} argument lists for a module of {num_partitions} partitions")
    recorders = [Recorder(d, keep, budget, max_records, module) for d in range(n)]

    def runner(m, a, ctx):
        ctx.tracer = recorders[ctx.device_id]
        return reference.run(m, a, ctx=ctx)

    if spmd.is_partitioned(module):
        go = lambda: spmd.run_per_device(module, per_replica_args, num_partitions,  # noqa: E731
                                         channels=channels, runner=runner)
    else:
        go = lambda: reference.run_on_devices(  # noqa: E731
            lambda ctx: runner(module, per_replica_args[ctx.device_id], ctx),
            n // num_partitions, num_partitions, channels=channels)
    return _finish(module, recorders, budget, go, (n // num_partitions, num_partitions))


def _finish(module, recorders, budget, go, topology=(1, 1)):
    try:
        results = go()
    except BaseException as e:
        partial = Trace(module, recorders, None, budget, error=e, topology=topology)
        try:
            e.trace = partial
        except AttributeError:
            pass
        if hasattr(e, "add_note"):
            e.add_note("(the partial trace up to the failure is error.trace)")
        raise
    return Trace(module, recorders, results[0], budget, results=list(results), topology=topology)


__all__ = ["Trace", "TraceRecord", "Recorder", "trace", "trace_replicated", "DEFAULT_MAX_BYTES"]
