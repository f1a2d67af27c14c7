"""The Numba executors: ``backend="numba"`` (CPU) and ``backend="cuda"`` (numba-cuda).

They walk a computation as the reference does, with two differences that are XLA's own:
element-wise chains run as fused loops (``fusion.fusion_plan``), and every other op runs
its compiled kernel from the layer's table (``registry.LAYERS["cpu"]`` or ``["cuda"]``).
Control flow (tuples, calls, while, conditional) is interpreted here, its bodies run by
the same executor; an intermediate is freed as soon as its last reader ran.

Collectives exchange data between simulated devices exactly as in the reference (the
exchange is a simulation, not a computation): they run the reference's code.
"""
import weakref

import numpy as np

from .. import fpenv, progress
from ..errors import ExecutionError, ShapeError
from ..ops import registry
from .. import shapes
from ..hlo.verify import run_shape
from ..shapes import check_size
from .fusion import fusion_plan, plan_module
from .loopgen import broadcast_strides
from .numba_setup import enter_run, leave_run
from .reference import ExecutionContext, Region, Token, conform, entry_arguments, name_instruction

#: ops interpreted by the executor itself (no data is computed)
_CONTROL = {"parameter", "tuple", "get-tuple-element", "call", "fusion", "while", "conditional",
            "opt-barrier", "constant", "after-all"}


class CompiledRegion(Region):
    """A called computation for kernels: callable (run by this executor), and, for the
    kernels that want it, compiled as a scalar Numba function (``scalar_fn``) or
    recognised as a standard combiner (``combiner``: "add", "max", ...)."""

    def __init__(self, computation, ctx, backend):
        super().__init__(computation, ctx)
        self.backend = backend
        self._combiner = False

    def __call__(self, *args):
        return evaluate(self.computation, list(args), self.ctx, self.backend)

    @property
    def combiner(self):
        """The region's operation when it is one binary op of its two parameters, in order
        (``add``, ``multiply``, ``maximum``, ``minimum``, ``and``, ``or``, ``xor``), or
        ``"second"`` when it returns its second parameter (scatter's overwrite); else None."""
        if self._combiner is False:
            self._combiner = standard_combiner(self.computation)
        return self._combiner


def standard_combiner(comp):
    params = comp.parameters
    root = comp.root
    if len(params) != 2:
        return None
    if root is params[1]:
        return "second"
    if root is params[0]:
        return "first"
    if (root.opcode in ("add", "multiply", "maximum", "minimum", "and", "or", "xor")
            and len(comp.instructions) == 3 and root.operands == [params[0], params[1]]):
        return root.opcode
    if (root.opcode in ("add", "multiply", "maximum", "minimum", "and", "or", "xor")
            and len(comp.instructions) == 3 and root.operands == [params[1], params[0]]):
        return root.opcode  # commutative
    return None


class CpuBackend:
    name = "numba"
    layer = "cpu"

    def __init__(self, fuse=True):
        self.fuse = fuse
        from . import cpu
        cpu.load()
        self._cpu = cpu  # its family modules, imported by load()

    # values live in host memory
    def to_device(self, value):
        return value

    def to_host(self, value):
        return value

    def constant(self, literal):
        return literal

    def flush(self, value):
        return self._cpu.elementwise.flush_denormals(value)

    def run_group(self, group, values):
        cpu = self._cpu
        mode = "flush" if fpenv.flushing() else "ieee"    # the loop's source depends on it
        prepared = group.__dict__.setdefault("_cpu", {}).get(mode)
        if prepared is None:
            src, compiled, static = cpu.fused.compile_loop(group)
            shape = group.root.shape
            # what every run needs, computed once: sizes, the carrier types in and out
            prepared = group._cpu[mode] = (compiled, static, int(np.prod(shape.dims, dtype=np.int64)),
                                           _carrier_dtype(shape.element_type), shape,
                                           [_carrier_dtype(i.shape.element_type) for i in src.inputs])
        compiled, static, n, out_dtype, shape, wants = prepared
        out = cpu.shape.empty(n, out_dtype)  # pooled: a computation run again writes into mapped pages
        inputs = [v.reshape(-1) if type(v) is np.ndarray and v.dtype == w and v.flags.c_contiguous
                  else _as_carrier(v, w) for v, w in zip(values, wants)]
        cpu.fused.run_loop(compiled, n, out, inputs, static)
        out = out.reshape(shape.dims)
        if out.dtype != shape.dtype:
            out = out.astype(shape.dtype)
        return out


def _carrier_dtype(t):
    from .emit import carrier_dtype
    return carrier_dtype(t)


def _as_carrier(value, want):
    from .cpu.shape import contiguous
    arr = np.asarray(value)
    if arr.dtype != want:
        arr = arr.astype(want)
    return contiguous(arr).reshape(-1)


def _static_params(src):
    """The loop's run-time arguments that do not depend on values: sizes, strides, constants."""
    odims = np.array(src.group.root.shape.dims, np.int64)
    params = []
    for kind, inst, reader in src.param_values:
        if kind == "bcast":
            params.append(np.array(broadcast_strides(reader, tuple(odims)), np.int64))
        elif kind == "constant":
            params.append(_carrier_dtype(inst.shape.element_type).type(np.asarray(inst.attrs["literal"])[()]))
        elif kind == "iota":
            d = inst.attrs["iota_dimension"]
            dims = inst.shape.dims
            inner = int(np.prod(dims[d + 1:], dtype=np.int64))
            params.append(np.array([inner, dims[d]], np.int64))
    return odims, params


_cpu_backends = {}


def _backend(device, fuse=True):
    if device == "cpu":
        # a CpuBackend holds nothing but ``fuse``: one per setting serves every run
        backend = _cpu_backends.get(fuse)
        if backend is None:
            backend = _cpu_backends[fuse] = CpuBackend(fuse)
        return backend
    if device == "cuda":
        from .cuda import CudaBackend
        return CudaBackend(fuse)
    raise ValueError(f"unknown device {device!r}")


def bind(attrs, ctx, backend):
    """The kernel's keyword arguments: computations as CompiledRegions, no ``shape``."""
    from .reference import bind_attrs
    out = bind_attrs(attrs, ctx, lambda comp: CompiledRegion(comp, ctx, backend))
    out.pop("shape", None)
    return out


#: instruction -> bytes of its result (shapes are static: counted once, compared with the
#: limit in force at each run)
_SIZES = weakref.WeakKeyDictionary()
#: instruction -> its kernel's keyword arguments, for instructions without computations
_KWARGS = weakref.WeakKeyDictionary()


def _check_size(inst, shape, name, itemsize=None):
    size = _SIZES.get(inst)
    if size is None or size > shapes.MAX_BYTES:
        size = _SIZES[inst] = check_size(shape, f"{name} {inst.name}", itemsize=itemsize)


def _bound(inst, ctx, backend):
    """``bind(inst.attrs, ...)``, remembered when no attribute is a computation (the bound
    regions hold the run's context)."""
    kwargs = _KWARGS.get(inst)
    if kwargs is None:
        kwargs = bind(inst.attrs, ctx, backend)
        if not any(isinstance(v, Region) for v in kwargs.values()):
            _KWARGS[inst] = kwargs
        return kwargs
    return dict(kwargs)


def run_op(inst, values, ctx, backend, clean=None):
    """Run one instruction.  ``clean``: per operand, whether its value is known to hold no
    denormal (``_evaluate`` tracks it), so that flushing it again can be skipped."""
    op = inst.opcode
    if op == "constant":
        return backend.constant(inst.attrs["literal"])
    if op == "tuple":
        return tuple(values)
    if op == "get-tuple-element":
        return values[0][inst.attrs["index"]]
    if op == "opt-barrier":
        return values[0]
    if op == "after-all":
        return Token()
    if op in ("call", "fusion"):
        callee = inst.attrs["computation"] if op == "call" else inst.attrs["calls"]
        return evaluate(callee, values, ctx, backend)
    if op == "while":
        cond, body = inst.attrs["condition"], inst.attrs["body"]
        state = values[0]
        while bool(backend.to_host(evaluate(cond, [state], ctx, backend))):
            state = evaluate(body, [state], ctx, backend)
        return state
    if op == "scan":
        return _scan(inst, values, ctx, backend)
    if op == "conditional":
        selector = backend.to_host(values[0])
        branches = inst.attrs.get("branch_computations")
        if branches is None:
            return (evaluate(inst.attrs["true_computation"], [values[1]], ctx, backend) if bool(selector)
                    else evaluate(inst.attrs["false_computation"], [values[2]], ctx, backend))
        k = int(selector)
        if not 0 <= k < len(branches):
            k = len(branches) - 1
        return evaluate(branches[k], [values[1 + k]], ctx, backend)
    opdef = registry.get(op)
    kernel = registry.LAYERS.get(backend.layer, {}).get(op)
    if kernel is None:
        if "collective" in opdef.categories or op in _SIMULATED:
            return _simulated(opdef, inst, values, ctx, backend)
        raise NotImplementedError(f"{opdef.name} ({op}): no {backend.layer.upper()} kernel yet for backend="
                                  f"{backend.name!r} (see xla_explorer.status_table()); run it with "
                                  f"backend='numpy'")
    shape = run_shape(inst, values)   # inst.shape, or the run's static sizes for dynamic operands
    if shape is inst.shape:
        _check_size(inst, shape, opdef.name)
    else:
        check_size(shape, f"{opdef.name} {inst.name}")
    kwargs = _bound(inst, ctx, backend)
    if getattr(kernel, "needs_context", False) or opdef.needs_context:
        kwargs["ctx"] = ctx
    mask, flush_result = _denormal_rule(opdef, inst, kwargs)
    if clean is not None:
        mask = [m and not c for m, c in zip(mask, clean)]
    if any(mask):
        if getattr(kernel, "flushes_operands", False):  # (in its own pass over them: cpu reduce)
            kwargs = dict(kwargs, flush=tuple(mask))
        else:
            values = [backend.flush(v) if m else v for v, m in zip(values, mask)]
    try:
        out = kernel(*values, shape=shape, **kwargs)
    except (NotImplementedError, ExecutionError, ShapeError) as e:
        named = name_instruction(e, f"{opdef.name} {inst.name}", inst.name)
        if named is None:
            raise
        raise named from e
    except Exception as e:
        raise ExecutionError(f"{opdef.name} {inst.name} ({backend.name} kernel): {type(e).__name__}: {e}") from e
    return backend.flush(out) if flush_result else out


def _denormal_rule(opdef, inst, kwargs):
    """What to flush around a kernel in the ``"flush"`` environment (``fpenv``): the op's rule;
    and for a reduce, reduce-window or select-and-scatter whose region is one add / multiply /
    maximum / minimum (the kernels combine with their own code, not the region's flushing
    ops), its float operands and results -- exact for maximum and minimum; a denormal
    *partial* sum is not flushed."""
    if not fpenv.flushing():
        return (), False
    cached = _RULES.get(inst)
    if cached is None:
        cached = _RULES[inst] = _denormal_rule_of(opdef, inst, kwargs)
    return cached


#: instruction -> its denormal rule (mask, flush result), computed once
_RULES = weakref.WeakKeyDictionary()


def _denormal_rule_of(opdef, inst, kwargs):
    types = [o.shape.element_type if o.shape.is_array else None for o in inst.operands]
    if opdef.opcode in ("reduce", "reduce-window", "select-and-scatter"):
        regions = [v for v in kwargs.values() if isinstance(v, CompiledRegion)]
        if opdef.opcode != "select-and-scatter" and regions and all(
                r.combiner in ("maximum", "minimum") for r in regions):
            # the maximum (minimum) of flushed values is the flushed maximum: flushing
            # keeps the order (a denormal becomes a zero of its sign, +0 > -0 as fmax has
            # it), so only the result is flushed -- no scan of a large operand
            return (False,) * len(types), True
        if any(r.combiner in ("add", "multiply", "maximum", "minimum") for r in regions):
            return tuple(t in fpenv.FLUSHED_TYPES for t in types), True
    return fpenv.rule_of(opdef, types, inst.shape.element_type if inst.shape.is_array else None, inst.attrs)


#: ops whose work is the simulation of devices and hosts, not computation
_SIMULATED = {"replica-id", "partition-id", "infeed", "outfeed", "send", "recv", "send-done", "recv-done",
              "rng", "custom-call"}


def _scan(inst, values, ctx, backend):
    """``scan`` as the executor's own loop (like ``while``): each step takes the inputs'
    slices, runs the region with this backend's kernels and fused loops, and stores the
    output slices; slicing and stacking happen on the host (one copy of each input)."""
    m = int(inst.attrs["num_carries"])
    d = int(inst.attrs["dimensions"][0])
    region = inst.attrs["computation"]
    inputs = [backend.to_host(v) for v in values[:len(values) - m]]
    carries = list(values[len(values) - m:])
    leaves = list(inst.shape.tuple_shapes)
    outputs = [np.empty(s.dims, s.dtype) for s in leaves[:len(leaves) - m]]
    n = inputs[0].shape[d]
    for k in (range(n - 1, -1, -1) if inst.attrs.get("is_reverse") else range(n)):
        # np.array, not np.ascontiguousarray: that makes a 0-d slice (a 1-D input's) 1-D
        args = [backend.to_device(np.array(np.take(x, k, axis=d), order="C")) for x in inputs] + carries
        result = evaluate(region, args, ctx, backend)
        result = list(result) if isinstance(result, tuple) else [result]
        for y, y_k in zip(outputs, result[:len(outputs)]):
            y[(slice(None),) * d + (k,)] = backend.to_host(y_k)
        carries = result[len(outputs):]
    return tuple(backend.to_device(y) for y in outputs) + tuple(carries)


def handled_without_kernel(opcode):
    """How the numba/cuda executors run an op that has no kernel (None: they cannot)."""
    if opcode == "scan":
        return "executor (a loop of the region's kernels)"
    if opcode in _CONTROL:
        return "executor (no data computed)"
    if opcode in ("broadcast", "iota"):
        return "fused loop"
    opdef = registry.OPS.get(opcode)
    if opcode in _SIMULATED or (opdef is not None and "collective" in opdef.categories):
        return "simulated devices/hosts (reference)"
    return None


def _simulated(opdef, inst, values, ctx, backend):
    from .reference import run_instruction
    host = [_host_tree(v, backend) for v in values]
    out = run_instruction(opdef, inst.name, host, inst.shape, inst.attrs, ctx)
    return _device_tree(out, backend)


def _host_tree(v, backend):
    if isinstance(v, tuple):
        return tuple(_host_tree(x, backend) for x in v)
    if isinstance(v, Token):
        return v
    return backend.to_host(v)


def _device_tree(v, backend):
    if isinstance(v, tuple):
        return tuple(_device_tree(x, backend) for x in v)
    if isinstance(v, Token):
        return v
    return backend.to_device(v)


def evaluate(computation, args, ctx, backend, on_value=None):
    plan = fusion_plan(computation, fuse=backend.fuse)
    # the run's progress, for a notebook's progress bar (a first run compiles its kernels:
    # announced); nested computations run inside the outer run's task
    if progress.current() is not None:
        return _evaluate(computation, plan, args, ctx, backend, on_value, None)
    first = not computation.__dict__.get("_ran_on_" + backend.layer)
    with progress.task(f"{backend.layer}: {computation.name}", total=len(plan.steps), announce=first) as t:
        out = _evaluate(computation, plan, args, ctx, backend, on_value, t)
    computation.__dict__["_ran_on_" + backend.layer] = True
    return out


def _clean_after(inst, step, clean):
    """Whether ``inst``'s value holds no denormal (``"flush"`` mode): a fused loop's or a bits
    op's (copy, slice, gather, ...: nothing flushed, nothing computed) when every operand's
    does; a flushed result's.  Parameters and control flow are not known (False)."""
    if step.group is not None:
        flushed = step.group.__dict__.get("_flushes_result")
        if flushed is None:
            from .emit import flushes_result
            flushed = step.group.__dict__["_flushes_result"] = flushes_result(step.group.root)
        return flushed or all(o in clean for o in step.group.inputs)
    rule = _RULES.get(inst)
    if rule is None or not inst.shape.is_array:
        return False
    mask, flush_result = rule
    return flush_result or (not any(mask) and all(o in clean for o in inst.operands))


def _evaluate(computation, plan, args, ctx, backend, on_value, task):
    env = dict(zip(computation.parameters, args))
    root = computation.root
    # instructions whose values are known to hold no denormal: not flushed again
    clean = set() if fpenv.flushing() else None
    for k, step in enumerate(plan.steps):
        inst = step.inst
        if task is not None and task is not progress.QUIET:
            task.note(f"step {k + 1} of {len(plan.steps)}: " + (
                f"a fused loop of {len(step.group.members)} ops" if step.group is not None else inst.name))
        if step.group is not None:
            # the loop's output (in its carrier type, f16 -> f32) is allocated: guard it first
            groot = step.group.root
            _check_size(groot, groot.shape, groot.opcode, _carrier_dtype(groot.shape.element_type).itemsize)
            value = backend.run_group(step.group, [env[x] for x in step.group.inputs])
        elif inst.opcode == "parameter":
            value = env[inst]
        else:
            value = run_op(inst, [env[o] for o in inst.operands], ctx, backend,
                           None if clean is None else [o in clean for o in inst.operands])
        if clean is not None and _clean_after(inst, step, clean):
            clean.add(inst)
        env[inst] = value
        if task is not None:
            task.advance()
        if on_value is not None:
            on_value(inst, value)
        reads = step.group.inputs if step.group is not None else inst.operands
        for o in reads:
            if plan.last_use.get(o) == k and o is not root and o in env:
                del env[o]
    return env[root]


def run(module, args, device="cpu", fuse=True, ctx=None, on_value=None, channels=None):
    backend = _backend(device, fuse)
    if ctx is None and _partitioned(module):
        from ..hlo.verify import verify
        verify(module)
        from . import spmd
        from .reference import run_on_devices
        info = spmd.SpmdInfo(module)

        def work(c):
            return run(module, args, device, fuse, ctx=c)
        return run_on_devices(work, info.num_replicas, info.num_partitions, channels=channels, spmd=info)[0]
    entry = module.entry
    args = [_device_tree(a, backend) for a in entry_arguments(module, args)]
    # one compile budget for the whole module (fused loops; the CPU's region kernels)
    plan_module(module, fuse=backend.fuse)
    if backend.layer == "cpu":
        backend._cpu.reduction.budget_regions(module)
    ctx = ctx or ExecutionContext(channels=channels)
    # one thread when other processes keep the cores busy (numba_setup.enter_run)
    threads = enter_run() if device == "cpu" else 0
    try:
        out = evaluate(entry, args, ctx, backend, on_value)
    finally:
        leave_run(threads)
    return conform(_host_tree(out, backend), entry.root.shape, module.name)


def _partitioned(module):
    """spmd.is_partitioned, remembered on the module (it reads every instruction: tens of
    microseconds a call); recomputed when the entry changes."""
    from . import spmd
    key = (module.entry, len(module.entry.instructions))
    cached = module.__dict__.get("_numba_partitioned")
    if cached is None or cached[0] != key:
        cached = module.__dict__["_numba_partitioned"] = (key, spmd.is_partitioned(module))
    return cached[1]


def run_numba(module, args, **options):
    return run(module, args, device="cpu", **options)


def run_cuda(module, args, **options):
    return run(module, args, device="cuda", **options)
