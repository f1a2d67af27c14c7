"""The Numba executors: ``backend="numba"`` (CPU) and ``backend="cuda"`` (numba-cuda).

They walk a computation as the reference does, with two differences that are XLA's own:
element-wise chains run as fused loops (``fusion.fusion_plan``), and every other op runs
its compiled kernel from the layer's table (``registry.LAYERS["cpu"]`` or ``["cuda"]``).
Control flow (tuples, calls, while, conditional) is interpreted here, its bodies run by
the same executor (in a run program, by their own programs: ``numba_control``); an
intermediate is freed as soon as its last reader ran.

Collectives exchange data between simulated devices exactly as in the reference (the
exchange is a simulation, not a computation): they run the reference's code.
"""
import weakref

import numpy as np

from .. import dtypes, fpenv, progress
from ..errors import ExecutionError, ShapeError
from ..ops import registry
from .. import shapes
from ..hlo.verify import _dynamic_operands, run_shape
from ..shapes import check_size
from . import fusion as _fusion
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
        # (a large array found clean once in a run is not scanned again: reduction.flush_in_run)
        return self._cpu.reduction.flush_in_run(value)

    def run_group(self, group, values, clean=()):
        return self.group_runner(group, "flush" if fpenv.flushing() else "ieee", clean)(values)

    def group_runner(self, group, mode, clean=()):
        """``group``'s fused loop as a function of its input values, for the environment
        ``mode`` (the loop's source depends on it): compiled, sized and typed once.
        ``clean``: the inputs known to hold no denormal (flushing them changes nothing:
        the loop does not)."""
        runners = group.__dict__.setdefault("_cpu", {})
        cleaned = tuple(i for i in group.inputs if i in clean) if clean and mode == "flush" else ()
        runners_key = (mode, cleaned) if cleaned else mode
        runner = runners.get(runners_key)
        if runner is not None:
            return runner
        cpu = self._cpu
        if group.kind == "gather":   # a gather with its start indices' computation
            runner = runners[runners_key] = cpu.indexing.fused_gather_runner(group, mode)
            return runner
        if group.kind == "dot":   # a dot written in its transpose's layout (the walk's run_op)
            runner = runners[runners_key] = _dot_runner(group, self)
            return runner
        if group.root.shape.is_array and group.root.shape.rank == 0:
            # integer / pred scalars (dynamic-update-slice's clamps): a Python function, no loop
            from .cpu.scalar_group import scalar_runner
            runner = scalar_runner(group)
            if runner is not None:
                runners[runners_key] = runner
                return runner
        runner = _view_runner(group)
        if runner is not None:
            runners[runners_key] = runner
            return runner
        # (narrow: bf16 and f16 values in and out as their bits, converted in the loop)
        src, compiled, static = cpu.fused.compile_loop(group, cleaned, narrow=True)
        shape = group.root.shape
        # what every run needs, computed once: sizes, the carrier types in and out
        n = int(np.prod(shape.dims, dtype=np.int64))
        out_dtype = _BF16_BITS if shape.element_type in _BITS_IN else _carrier_dtype(shape.element_type)
        wants = [_BITS_IN.get(i.shape.element_type) or _carrier_dtype(i.shape.element_type)
                 for i in src.inputs]
        dims, final_dtype = shape.dims, shape.dtype
        run_loop = cpu.fused.run_loop
        if 0 < n < static[3] and n * out_dtype.itemsize < cpu.shape.BufferPool.MIN_BYTES:
            # a small loop (a scalar index computation: dynamic-update-slice's clamps): its
            # serial loop called directly, its output not pooled (what run_loop and empty
            # do for it, without their Python steps: about 1 us of a 3 us scalar loop)
            ser, (odims, inner, params, _) = compiled[1], static
            np_empty = np.empty

            def small_runner(values):
                out = np_empty(n, out_dtype)
                inputs = [v.reshape(-1) if type(v) is np.ndarray and v.dtype == w and v.flags.c_contiguous
                          else _as_carrier(v, w) for v, w in zip(values, wants)]
                ser(n, out, *inputs, odims, inner, inner, *params)
                out = out.reshape(dims)
                if out.dtype != final_dtype:
                    out = _from_carrier(out, final_dtype)
                return out
            runners[runners_key] = small_runner
            return small_runner

        # (what ``empty`` and ``run_loop`` decide from n alone, decided here: the pool or
        # not, the serial loop called directly below the loop's thread threshold)
        nbytes, take, np_empty = n * out_dtype.itemsize, cpu.shape.POOL.take, np.empty
        pooled = nbytes >= cpu.shape.BufferPool.MIN_BYTES
        serial = 0 < n < static[3]
        ser, (odims, inner, params, _) = compiled[1], static
        same = out_dtype == final_dtype

        def runner(values):
            # pooled: a computation run again writes into mapped pages
            out = take(nbytes).view(out_dtype) if pooled else np_empty(n, out_dtype)
            inputs = [v.reshape(-1) if type(v) is np.ndarray and v.dtype == w and v.flags.c_contiguous
                      else _as_carrier(v, w) for v, w in zip(values, wants)]
            if serial:
                ser(n, out, *inputs, odims, inner, inner, *params)
            else:
                run_loop(compiled, n, out, inputs, static)
            out = out.reshape(dims)
            return out if same else _from_carrier(out, final_dtype)
        runners[runners_key] = runner
        return runner


def _view_runner(group):
    """A group that is one broadcast adding or removing size-1 dimensions only (JAX's
    ``f32[256] -> f32[256,1]`` around a softmax's row reductions): the same elements in
    the same order, so its value is the operand's C-contiguous array seen with the
    result's dims (what the reshape kernel returns), not a copy by a loop; None otherwise."""
    root = group.root
    if group.members != [root] or root.opcode != "broadcast" or not root.shape.is_array \
            or not root.shape.is_static:
        return None
    (x,) = root.operands
    mapping = list(root.attrs["broadcast_dimensions"])
    if not x.shape.is_array or not x.shape.is_static or x.shape.numel != root.shape.numel \
            or mapping != sorted(set(mapping)) or x.shape.dtype != root.shape.dtype:
        return None
    dims, dtype = tuple(root.shape.dims), np.dtype(root.shape.dtype)

    def view(values):
        v = values[0]
        if type(v) is np.ndarray and v.dtype == dtype and v.flags.c_contiguous:
            return v.reshape(dims)
        return np.array(v, dtype, order="C").reshape(dims)
    return view


def _dot_operands(group):
    """Where each operand of a ``fusion.DotTranspose``'s dot is among the group's inputs."""
    return [group.inputs.index(o) for o in group.dot.operands]


def _dot_runner(group, backend, clean=None, raw=False):
    where, extra = _dot_operands(group), {"out_permutation": group.permutation}
    dot = group.dot
    return lambda values: run_op(dot, [values[i] for i in where], None, backend, clean, extra, raw)


def run_substeps(group, values, backend):
    """A group the backend has no fused kernel for (``fusion.GatherFusion`` on CUDA): the
    steps it replaced, in order, each size guarded before it allocates."""
    env = dict(zip(group.inputs, values))
    for s in group.substeps:
        if s.group is not None:
            root = s.group.root
            _check_size(root, root.shape, root.opcode, _carrier_dtype(root.shape.element_type).itemsize)
            env[s.inst] = backend.run_group(s.group, [env[x] for x in s.group.inputs])
        else:
            env[s.inst] = run_op(s.inst, [env[o] for o in s.inst.operands], None, backend)
    return env[group.root]


def _carrier_dtype(t):
    from .emit import carrier_dtype
    return carrier_dtype(t)


def _as_carrier(value, want):
    from .cpu.shape import contiguous
    arr = np.asarray(value)
    if type(want) is _Bf16Bits:   # a bf16 / f16 input of a narrow loop: its bits, no conversion
        if arr.dtype != want.of:
            arr = arr.astype(want.of)
        return contiguous(arr).reshape(-1).view(_BF16_BITS)
    if arr.dtype != want:
        if arr.dtype == _BF16 and want == np.float32 and arr.size >= _FAST_CONVERT:
            from .cpu.elementwise import bf16_to_f32
            return bf16_to_f32(arr)
        if arr.dtype == _F16 and want == np.float32 and arr.size >= _FAST_CONVERT:
            from .cpu.half import f16_to_f32
            return f16_to_f32(arr)
        arr = arr.astype(want)
    return contiguous(arr).reshape(-1)


def _from_carrier(out, final_dtype):
    """A fused loop's result, computed in its carrier type, as its element type."""
    if out.dtype == _BF16_BITS and final_dtype in (_BF16, _F16):   # a narrow loop's bits
        return out.view(final_dtype)
    if final_dtype == _BF16 and out.dtype == np.float32 and out.size >= _FAST_CONVERT:
        from .cpu.elementwise import f32_to_bf16
        return f32_to_bf16(out, final_dtype)
    if final_dtype == _F16 and out.dtype == np.float32 and out.size >= _FAST_CONVERT:
        from .cpu.half import f32_to_f16
        return f32_to_f16(out)
    return out.astype(final_dtype)


#: bf16 arrays of this many elements or more go to and from their f32 carrier by the
#: Numba passes of ``cpu.elementwise`` (ml_dtypes' astype below: fewer Python steps)
_FAST_CONVERT = 1 << 12
_BF16 = np.dtype(dtypes.to_numpy("bf16"))
#: (``cpu.fused.BF16_BITS``: a narrow loop's bf16 result, as bits)
_BF16_BITS = np.dtype(np.uint16)


class _Bf16Bits:
    """The ``want`` of a narrow loop's bf16 (or f16: ``of``) input (``_as_carrier``): its
    bits as uint16, not a conversion to uint16 (no dtype equals it, so every such value goes
    through ``_as_carrier``, which views it).  (Not an attribute ``dtype``: ``np.dtype``
    would read it, and an f16 array's dtype would equal the marker.)"""

    def __init__(self, of=_BF16):
        self.of = of


_BF16_IN = _Bf16Bits()
_F16 = np.dtype(np.float16)
#: XLA type -> the ``want`` of a narrow loop's input of that type (``cpu.fused.NARROW_BITS``)
_BITS_IN = {"bf16": _BF16_IN, "f16": _Bf16Bits(_F16)}


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
        if any(isinstance(v, Region) for v in kwargs.values()):
            return kwargs
        _KWARGS[inst] = kwargs
    # a copy: run_op adds the run's ctx to it, which must not stay in the remembered dict
    return dict(kwargs)


def run_op(inst, values, ctx, backend, clean=None, extra=None, raw=False):
    """Run one instruction.  ``clean``: per operand, whether its value is known to hold no
    denormal (``_evaluate`` tracks it), so that flushing it again can be skipped.
    ``extra``: keyword arguments the run plan adds for the kernel (a dot's
    ``out_permutation``).  ``raw``: its result left unflushed (``_leave_raw``: every reader
    flushes it as it reads it)."""
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
        # (the operands known clean are the body's clean parameters: an optimised HLO's dot
        # fusion does not scan again what the caller's loop flushed)
        # (``raw``: the body's root, a dot, left unflushed -- ``_leave_raw``)
        if raw:
            return evaluate(callee, values, ctx, backend, clean_params=_clean_mask(clean), raw_root=True)
        return evaluate(callee, values, ctx, backend, clean_params=_clean_mask(clean))
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
    if extra:
        kwargs.update(extra)
    if getattr(kernel, "needs_context", False) or opdef.needs_context:
        kwargs["ctx"] = ctx
    mask, flush_result = _denormal_rule(opdef, inst, kwargs)
    if clean is not None:
        mask = [m and not c for m, c in zip(mask, clean)]
    if raw:
        flush_result = False
    return _call_kernel(kernel, values, shape, kwargs, tuple(mask) if any(mask) else None, flush_result,
                        opdef, inst, backend)


def _call_kernel(kernel, values, shape, kwargs, mask, flush_result, opdef, inst, backend):
    """``kernel`` on ``values``: the operands ``mask`` marks (a tuple; None: none) flushed of
    denormals first, or by the kernel in its own pass over them (``flushes_operands``: the
    cpu reduce), the result flushed if ``flush_result``; a failure re-raised naming the op.
    The walk's ``run_op`` and the run plan's steps both end here."""
    if mask is not None:
        if getattr(kernel, "flushes_operands", False):
            kwargs = dict(kwargs, flush=mask)
        else:
            values = [backend.flush(v) if m else v for v, m in zip(values, mask)]
    try:
        out = kernel(*values, shape=shape, **kwargs)
    except Exception as e:
        _raise_named(e, opdef, inst, backend)
    return backend.flush(out) if flush_result else out


def _raise_named(e, opdef, inst, backend):
    """Re-raise a kernel's exception ``e`` naming the op and the instruction."""
    if isinstance(e, (NotImplementedError, ExecutionError, ShapeError)):
        named = name_instruction(e, f"{opdef.name} {inst.name}", inst.name)
        if named is None:
            raise e
        raise named from e
    raise ExecutionError(f"{opdef.name} {inst.name} ({backend.name} kernel): {type(e).__name__}: {e}") from e


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


def _clean_mask(clean):
    """A call's per-operand clean flags as the key of its body's programs: None when none
    is known clean (or not flushing)."""
    return tuple(bool(c) for c in clean) if clean is not None and any(clean) else None


def evaluate(computation, args, ctx, backend, on_value=None, clean_params=None, raw_root=False):
    """``clean_params``: per parameter, whether its value is known to hold no denormal (a
    call's or fusion's operands, ``"flush"`` mode), or None; the body is tracked (and its
    program kept) per mask.  ``raw_root``: the root, a dot, left unflushed (its caller's
    readers flush it as they read it: ``_leave_raw``); a program of its own."""
    plan = fusion_plan(computation, fuse=backend.fuse)
    if clean_params is not None and not fpenv.flushing():
        clean_params = None
    if raw_root and (on_value is not None or not _raw_root_ok(computation, plan, backend)):
        raw_root = False
    if raw_root:
        clean_params = _RawRoot(clean_params)
    # a computation run before runs its program (``_program``: the steps decided once);
    # a first run, a run over a lowered size limit, a run watched value by value walk it
    program = _program(computation, plan, backend, clean_params) if on_value is None else None
    # the run's progress, for a notebook's progress bar (a first run compiles its kernels:
    # announced); nested computations run inside the outer run's task
    if progress._running:
        if program is not None:
            return program.run(args, ctx, backend, None)
        return _evaluate(computation, plan, args, ctx, backend, on_value, None, clean_params)
    flag = "_ran_on_" + backend.layer
    if program is not None and not progress._listeners and computation.__dict__.get(flag):
        return program.run(args, ctx, backend, None)   # nobody listens: no task at all
    first = not computation.__dict__.get(flag)
    with progress.task(f"{backend.layer}: {computation.name}", total=len(plan.steps), announce=first) as t:
        if program is not None:
            out = program.run(args, ctx, backend, t)
        else:
            out = _evaluate(computation, plan, args, ctx, backend, on_value, t, clean_params)
    computation.__dict__[flag] = True
    return out


def _clean_after(inst, step, clean):
    """Whether ``inst``'s value holds no denormal (``"flush"`` mode): a fused loop's or a bits
    op's (copy, slice, gather, ...: nothing flushed, nothing computed) when every operand's
    does; a flushed result's.  Parameters and control flow are not known (False)."""
    if step.group is not None and step.group.kind == "dot":   # as its dot's value
        return _clean_after(step.group.dot, _fusion.Step(step.group.dot), clean)
    if step.group is None and inst.opcode in ("call", "fusion"):   # as its body's root
        callee = inst.attrs["computation"] if inst.opcode == "call" else inst.attrs["calls"]
        mask = _clean_mask([o in clean for o in inst.operands])
        return inst.shape.is_array and callee.__dict__.get("_numba_root_clean", {}).get(mask, False)
    if step.group is not None:
        flushed = step.group.__dict__.get("_flushes_result")
        if flushed is None:
            from .emit import flushes_result
            flushed = step.group.__dict__["_flushes_result"] = flushes_result(step.group.root)
        # (an input the loop flushes wherever it reads it is as good as clean there)
        return flushed or _never_denormal(step.group.root) or all(
            o in clean or _flushes_on_read(step.group, o) for o in _value_inputs(step.group))
    if inst.opcode == "constant":
        return _clean_literal(inst)
    if _never_denormal(inst):
        return True
    rule = _RULES.get(inst)
    if rule is None or not inst.shape.is_array:
        return False
    mask, flush_result = rule
    return flush_result or (not any(mask) and all(o in clean for o in inst.operands))


def _never_denormal(inst):
    """Whether ``inst`` is a convert whose every result is zero or at least the smallest
    normal of its type, whatever its operand holds: from an integer or pred, or from a float
    type whose smallest denormal is that large (f16 and the f8 types into f32 / f64: ``x.mean``
    of f16 sums its f32 convert, which needs no flushing then)."""
    if inst.opcode != "convert" or not inst.shape.is_array or inst.shape.element_type not in fpenv.TINY:
        return False
    src = inst.operands[0].shape
    if not src.is_array:
        return False
    s = src.element_type
    if s == "pred" or s in dtypes.INTEGRAL:
        return True
    if s.startswith("c"):
        return False
    try:
        smallest = float(dtypes.finfo(s).smallest_subnormal)
    except (TypeError, ValueError, AttributeError, KeyError):
        return False
    return smallest >= fpenv.TINY[inst.shape.element_type]


def _flushes_on_read(group, x):
    """Whether fused loop ``group``'s emitted code (``loopgen.LoopSource``, ``"flush"`` mode,
    ``x`` not among its clean inputs) flushes input ``x`` wherever it reads it, so that
    its value is the one it computes from ``x`` flushed: every member reading ``x`` flushes
    that operand (``emit.flush_functions``), not left out as a denormal-blind op's or a sum
    before one (``sum_before_blind``'s exemption); or is a broadcast, not the root, whose
    readers all flush it so.  (A CPU loop of an f32 / f64 root of rank > 0: not a view, a
    scalar or a gather's runner; remembered on the group.)"""
    memo = group.__dict__.setdefault("_flushes_on_read", {})
    got = memo.get(x)
    if got is None:
        got = memo[x] = _flushes_on_read_of(group, x)
    return got


def _flushes_on_read_of(group, x):
    from .emit import denormal_blind, flush_functions, squares_it, sum_before_blind
    if (group.kind != "loop" or x not in group.inputs or x in group.members or not fpenv.flushing()
            or not group.root.shape.is_array or group.root.shape.rank == 0
            or group.root.shape.element_type not in ("f32", "f64")
            or not x.shape.is_array or x.shape.element_type not in ("f32", "f64")):
        return False
    readers = {}
    for m in group.members:
        for o in m.operands:
            readers.setdefault(o, []).append(m)

    def flushes(m, v):   # member m flushes its operand v at every position it reads it
        if m.opcode in ("constant", "iota", "broadcast") or denormal_blind(m):
            return False
        us = readers.get(m)
        if m is not group.root and us and (all(denormal_blind(u) for u in us) or all(squares_it(u, m) for u in us)) \
                and sum_before_blind(m):
            return False   # (LoopSource leaves its operands unflushed)
        fns = flush_functions(m)
        return all(fns[k] for k, o in enumerate(m.operands) if o is v)

    for m in readers.get(x, ()):
        if m.opcode == "broadcast":
            if m is group.root or not readers.get(m) or not all(flushes(u, m) for u in readers[m]):
                return False
        elif not flushes(m, x):
            return False
    return bool(readers.get(x))


def _leave_raw(step, plan, backend):
    """Whether the result of the dot of ``step`` (a dot, or a dot written transposed) can
    be left unflushed (``"flush"`` mode): its only readers are fused loops of the same
    computation that flush it wherever they read it (``_flushes_on_read``), and it is not
    the computation's result -- nothing else sees it (not the user, not a kernel reading
    raw values, a call, a tuple, a loop, nor the scan memo). Its value is then not clean.
    (Remembered on the plan.)"""
    if backend.layer != "cpu" or not fpenv.flushing():
        return False
    memo = plan.__dict__.setdefault("_leave_raw", {})
    got = memo.get(step.inst)
    if got is None:
        got = memo[step.inst] = _leave_raw_of(step, plan, backend)
    return got


#: (a switch for A/B measurements) a dot's result left unflushed where its readers flush it
_LEAVE_RAW = True


def _leave_raw_of(step, plan, backend):
    v = step.inst
    if not _LEAVE_RAW or v is plan.computation.root or not v.shape.is_array:
        return False
    if step.group is None and v.opcode in ("call", "fusion"):
        # an optimised HLO's dot fusion: its body's root left unflushed (``raw_root``)
        callee = v.attrs["computation"] if v.opcode == "call" else v.attrs["calls"]
        if not _raw_root_ok(callee, fusion_plan(callee, fuse=backend.fuse), backend):
            return False
    else:
        dot = step.group.dot if step.group is not None and step.group.kind == "dot" else (
            v if step.group is None and v.opcode == "dot" else None)
        if dot is None or not _denormal_rule(registry.get(dot.opcode), dot, {})[1]:   # (a dot binds no region)
            return False
    readers = [st for st in plan.steps if v in (st.group.inputs if st.group is not None else st.inst.operands)]
    return bool(readers) and all(_reader_flushes(st, v, backend) for st in readers)


def _reader_flushes(st, v, backend):
    """Whether step ``st`` flushes value ``v`` wherever it reads it, ``v`` not being clean:
    a fused loop that does (``_flushes_on_read``); a call or fusion whose body's parameters
    ``v`` is each read only by such loops of the body, none its root."""
    if st.group is not None:
        return _flushes_on_read(st.group, v)
    inst = st.inst
    if inst.opcode not in ("call", "fusion"):
        return False
    callee = inst.attrs["computation"] if inst.opcode == "call" else inst.attrs["calls"]
    cplan = fusion_plan(callee, fuse=backend.fuse)
    for p, o in zip(callee.parameters, inst.operands):
        if o is not v:
            continue
        if p is cplan.computation.root:
            return False
        readers = [q for q in cplan.steps if p in (q.group.inputs if q.group is not None else q.inst.operands)]
        if not readers or not all(q.group is not None and _flushes_on_read(q.group, p) for q in readers):
            return False
    return True


def _value_inputs(group):
    """The inputs of fused loop ``group`` whose values can reach its result's values: all but
    those read only through pred values (a compare's operands: a relu gradient's bias, only
    in its condition), and but pred inputs -- a pred holds no denormal, and a loop's value
    computed from pred values (select's choice, convert) holds none either.  (Remembered on
    the group.)"""
    got = group.__dict__.get("_value_inputs")
    if got is None:
        members = set(group.members)
        seen, stack, reached = set(), [group.root], []
        while stack:
            m = stack.pop()
            if m in seen:
                continue
            seen.add(m)
            pred = m.shape.is_array and m.shape.element_type == "pred"
            if m not in members:
                if not pred:
                    reached.append(m)
            elif not pred:
                stack.extend(m.operands)
        got = group.__dict__["_value_inputs"] = tuple(reached)
    return got


def _clean_literal(inst):
    """Whether constant ``inst``'s literal holds no denormal that the environment flushes
    (a reduce's init value, a scale factor: not scanned again; remembered)."""
    got = _CLEAN_LITERALS.get(inst)
    if got is None:
        got = False
        if inst.shape.is_array:
            try:
                v = np.asarray(inst.attrs["literal"])
                flushed = fpenv.flush(v, inst.shape.element_type)
                got = flushed is v or np.asarray(flushed).tobytes() == v.tobytes()
            except Exception:   # (not a plain array literal: not known clean)
                got = False
        _CLEAN_LITERALS[inst] = got = bool(got)
    return got


#: constant instruction -> whether its literal holds no denormal (``_clean_literal``)
_CLEAN_LITERALS = weakref.WeakKeyDictionary()


def _initial_clean(computation, clean_params):
    """The values known to hold no denormal before a computation's first step (``"flush"``
    mode; None otherwise): the parameters ``clean_params`` marks."""
    if not fpenv.flushing():
        return None
    if isinstance(clean_params, _RawRoot):
        clean_params = clean_params.mask
    if clean_params is None:
        return set()
    return {p for p, c in zip(computation.parameters, clean_params) if c}


class _RawRoot(tuple):
    """A ``clean_params`` key (``evaluate``'s): the mask (or None) of a body whose root, a
    dot, is left unflushed (``raw_root``): its program and its root's cleanliness apart."""

    def __new__(cls, mask):
        self = tuple.__new__(cls, ("raw-root", mask))
        return self

    @property
    def mask(self):
        return self[1]


def _raw_root_ok(computation, plan, backend):
    """Whether ``computation``'s root is a dot's value (a dot, or one written transposed)
    whose result the environment flushes, that no step of the body reads."""
    if backend.layer != "cpu" or not fpenv.flushing():
        return False
    root = plan.computation.root   # (its inlined calls' copies: the plan's computation)
    st = next((st for st in plan.steps if st.inst is root), None)
    if st is None or any(root in (q.group.inputs if q.group is not None else q.inst.operands) for q in plan.steps):
        return False
    dot = st.group.dot if st.group is not None and st.group.kind == "dot" else (
        root if st.group is None and root.opcode == "dot" else None)
    return dot is not None and _denormal_rule(registry.get(dot.opcode), dot, {})[1]


def _note_root_clean(computation, plan, clean_params, clean):
    """Remember, per mask of clean parameters, whether the computation's root (its plan's)
    is clean (its caller's ``_clean_after``)."""
    if clean is not None:
        if isinstance(clean_params, _RawRoot):   # (its root not clean: nothing to tell)
            return
        computation.__dict__.setdefault("_numba_root_clean", {})[clean_params] = plan.computation.root in clean


def _evaluate(computation, plan, args, ctx, backend, on_value, task, clean_params=None):
    env = dict(zip(computation.parameters, args))
    root = plan.computation.root   # (the root of its inlined form: ``fusion.inline_calls``)
    # instructions whose values are known to hold no denormal: not flushed again
    clean = _initial_clean(computation, clean_params)
    for k, step in enumerate(plan.steps):
        inst = step.inst
        if task is not None and task is not progress.QUIET:
            task.note(f"step {k + 1} of {len(plan.steps)}: " + (
                f"a fused loop of {len(step.group.members)} ops" if step.group is not None else inst.name))
        # (a dot's result its readers flush as they read it: not scanned, not clean; not
        # where a watcher sees the values)
        raw = clean is not None and on_value is None and (
            _leave_raw(step, plan, backend) or inst is root and isinstance(clean_params, _RawRoot))
        if step.group is not None:
            # the loop's output (in its carrier type, f16 -> f32) is allocated: guard it first
            groot = step.group.root
            _check_size(groot, groot.shape, groot.opcode, _carrier_dtype(groot.shape.element_type).itemsize)
            inputs = [env[x] for x in step.group.inputs]
            if step.group.kind == "dot" and backend.layer == "cpu":
                dot = step.group.dot
                value = _dot_runner(step.group, backend, None if clean is None else [
                    o in clean for o in dot.operands], raw)(inputs)
            else:
                # (the loop the program will run: its clean inputs not flushed again, one compile)
                value = (backend.run_group(step.group, inputs, clean) if clean and backend.layer == "cpu"
                         else backend.run_group(step.group, inputs))
        elif inst.opcode == "parameter":
            value = env[inst]
        else:
            value = run_op(inst, [env[o] for o in inst.operands], ctx, backend,
                           None if clean is None else [o in clean for o in inst.operands], raw=raw)
        if clean is not None and not raw and _clean_after(inst, step, clean):
            clean.add(inst)
        env[inst] = value
        if task is not None:
            task.advance()
        if on_value is not None:
            # (the original computation's instructions: a call's for its inlined root's value;
            # none for the rest of an inlined call, as for a call's inside before)
            dot = plan.reported(step.group.dot) if step.group is not None and step.group.kind == "dot" else None
            if dot is not None and backend.layer == "cpu":
                # the dot's own value: the transposed result seen back in the dot's layout
                on_value(dot, np.transpose(value, np.argsort(step.group.permutation)))
            reported = plan.reported(inst)
            if reported is not None:
                on_value(reported, value)
            for same in plan.merged(inst):   # (instructions computing the same value: merged)
                on_value(same, value)
        reads = step.group.inputs if step.group is not None else inst.operands
        for o in reads:
            if plan.last_use.get(o) == k and o is not root and o in env:
                del env[o]
    _note_root_clean(computation, plan, clean_params, clean)
    # every step ran once in this environment: its kernels compiled, its sizes counted,
    # its denormal rules known -- what later runs need is decided now
    if _program(computation, plan, backend, clean_params) is None:
        built = (_Program.build(computation, plan, backend) if clean_params is None
                 else _Program.build(computation, plan, backend, clean_params=clean_params))
        _programs(computation)[_program_key(backend, clean_params)] = built
    return env[root]


# -- run programs ----------------------------------------------------------------------------
#
# A computation's walk decides the same things on every run: which steps run (the fusion
# plan), each kernel and its keyword arguments, the static sizes and their check against
# the size limit, what to flush around each kernel, which values die after which step.
# After a first run (which compiles the kernels and fills those caches) they are decided
# once, into a ``_Program``: a list of steps, each a function of its operand values, the
# slots of those values and the slots that die after it.  A later run converts its
# arguments, calls the steps in order and returns -- about a microsecond per step.


def _programs(computation):
    return computation.__dict__.setdefault("_numba_programs", {})


def _program_key(backend, clean_params=None):
    key = (backend.layer, backend.fuse, "flush" if fpenv.flushing() else "ieee")
    return key if clean_params is None else key + (clean_params,)


def _program(computation, plan, backend, clean_params=None):
    """The computation's program for this backend and environment (and mask of clean
    parameters), or None (not run yet, its plan changed, or a size over the limit in
    force: the walk then says which)."""
    program = computation.__dict__.get("_numba_programs", {}).get(_program_key(backend, clean_params))
    if program is None or program.plan is not plan or program.max_bytes > shapes.MAX_BYTES:
        return None
    return program


class _Program:
    """A computation's steps for one backend and environment (see above)."""

    __slots__ = ("plan", "steps", "labels", "nslots", "params", "root", "max_bytes", "template", "straight",
                 "ctx_free")

    def run(self, args, ctx, backend, task):
        if task is None or task is progress.QUIET:
            return self.straight(args, ctx, backend)
        return self.walk(args, ctx, backend, task)

    def walk(self, args, ctx, backend, task):
        """``run`` step by step over the slots (``straight``'s meaning; a task's notes)."""
        env = self.template[:]   # the constants' values in their slots (CPU: the literals)
        for slot, a in zip(self.params, args):
            env[slot] = a
        if task is None or task is progress.QUIET:
            for fn, ins, out, dead in self.steps:
                env[out] = fn([env[i] for i in ins], ctx, backend)
                for d in dead:
                    env[d] = None
        else:
            n = len(self.plan.steps)
            task.advance(n - len(self.steps))   # the parameters' steps: nothing to do
            for k, (fn, ins, out, dead) in enumerate(self.steps):
                task.note(f"step {k + 1 + n - len(self.steps)} of {n}: {self.labels[k]}")
                env[out] = fn([env[i] for i in ins], ctx, backend)
                task.advance()
                for d in dead:
                    env[d] = None
        return env[self.root]

    @classmethod
    def build(cls, computation, plan, backend, clean_params=None):
        self = cls()
        self.plan = plan
        slot = {}
        for k, step in enumerate(plan.steps):
            slot[step.inst] = k
        for p in computation.parameters:
            slot.setdefault(p, len(slot))
        self.nslots = len(slot)
        self.params = [slot[p] for p in computation.parameters]
        root = plan.computation.root
        self.root = slot[root]
        flushing = fpenv.flushing()
        clean = _initial_clean(computation, clean_params)   # as _evaluate tracks it (static)
        steps, labels, max_bytes = [], [], 0
        epilogues = {}   # loop root -> its step's maker (_fused_reduce's epilogues)
        template = [None] * self.nslots
        for k, step in enumerate(plan.steps):
            inst = step.inst
            if step.group is None and inst.opcode == "constant" and backend.layer == "cpu":
                # a CPU constant's value is its literal (CpuBackend.constant): in its slot from
                # the start, as a parameter's, not a step per run
                template[k] = backend.constant(inst.attrs["literal"])
                if clean is not None and _clean_after(inst, step, clean):
                    clean.add(inst)
                continue
            reads = step.group.inputs if step.group is not None else inst.operands
            dead = tuple(sorted({slot[o] for o in reads if plan.last_use.get(o) == k and o is not root}))
            raw = clean is not None and (_leave_raw(step, plan, backend)   # (as _evaluate has it)
                                         or inst is root and isinstance(clean_params, _RawRoot))
            if step.group is not None and step.group.kind == "dot" and backend.layer == "cpu":
                dot = step.group.dot
                where = _dot_operands(step.group)
                fn, size = _op_step(dot, backend, None if clean is None else [o in clean for o in dot.operands],
                                    {"out_permutation": step.group.permutation}, raw)
                if where != list(range(len(where))):
                    fn = _ctx_free((lambda f, w: lambda values, ctx, backend: f([values[i] for i in w], ctx, backend))(
                        fn, where), fn)
                max_bytes = max(max_bytes, size, _SIZES[step.group.root])
                label = f"{dot.name} written transposed ({inst.name})"
            elif step.group is not None:
                groot = step.group.root
                max_bytes = max(max_bytes, _SIZES[groot])
                fn = _group_step(step.group, backend, "flush" if flushing else "ieee", clean)
                label = f"a fused loop of {len(step.group.members)} ops"
                if groot in epilogues:   # run by a row fold before it (its value picked up here)
                    fn = _ctx_free(epilogues.pop(groot)(fn), fn)
                    label += " (run by the row fold)"
                made = _argmax_iota(step.group, plan, backend, fn)
                if made is not None:   # computed once: the same every run
                    line, inputs = made
                    fn = _ctx_free((lambda v: lambda values, ctx, backend: v)(line))
                    label += " (an argmax's indices, made once)"
                    for i, v in inputs:   # an iota only this loop reads: not made again either
                        j = next((j for j, st in enumerate(steps) if st[2] == slot.get(i)), None)
                        if j is not None and i is not root and all(
                                st.group is step.group for st in plan.steps
                                if i in (st.group.inputs if st.group is not None else st.inst.operands)):
                            steps[j] = (_ctx_free((lambda v: lambda values, ctx, backend: v)(v)),) + steps[j][1:]
            elif inst.opcode == "parameter":   # its value is in its slot from the start
                continue
            elif backend.layer == "cpu" and _copy_of_dead_transpose(inst, plan, k, flushing):
                # a layout copy of a transposed value nothing else reads (XLA's transpose
                # fusions: transpose, then copy to the default layout): the transpose's
                # result is a new array already, so it is the copy's (a second pass over it
                # saved: 0.3-0.5 ms of 4-8 MiB in the CNN forward program)
                fn = _ctx_free(lambda values, ctx, backend: values[0])
                label = f"{inst.name} (the transpose's result)"
            else:
                fn, size = _op_step(inst, backend, None if clean is None else [o in clean for o in inst.operands],
                                    raw=raw)
                if inst.opcode == "dynamic-update-slice":   # (in place in a while: numba_control)
                    from .numba_control import in_place_update
                    fn = in_place_update(inst, fn, backend)
                max_bytes = max(max_bytes, size)
                label = inst.name
                fused = _fused_reduce(inst, plan, k, steps, slot, backend, clean, fn)
                if fused is not None:   # the loop it reads folds its rows: both steps replaced
                    j, loop_step, reduce_step, more, kind = fused
                    steps[j] = (_ctx_free(loop_step, steps[j][0]),) + steps[j][1:]
                    fn = _ctx_free(reduce_step, fn)
                    # (a second Reduce of the same value takes the loop's step over: its label)
                    labels[j] = labels[j].split(" folding its ")[0] + f" folding its {kind}"
                    epilogues.update(more)
                    if more:
                        labels[j] += ", then " + ", ".join(e.name for e in more)
            if clean is not None and not raw and _clean_after(inst, step, clean):
                clean.add(inst)
            steps.append((fn, tuple(slot[o] for o in reads), k, dead))
            labels.append(label)
        _note_root_clean(computation, plan, clean_params, clean)
        self.steps, self.labels, self.max_bytes, self.template = steps, labels, max_bytes, template
        self.straight = _straight(self)
        self.ctx_free = all(getattr(st[0], "ctx_free", False) for st in steps)
        return self


def _copy_of_dead_transpose(inst, plan, k, flushing):
    """Whether step ``k``'s ``inst`` is a copy of a static array whose operand is a plain
    transpose step's value (on the CPU a new array of the kernel's, ``cpu.shape.transpose``:
    never a view of its operand) read last here and not the root: that value can be the
    copy's own.  Not where the copy's denormal rule flushes."""
    if inst.opcode != "copy" or len(inst.operands) != 1 or not inst.shape.is_array or not inst.shape.is_static:
        return False
    t = inst.operands[0]
    if t.opcode != "transpose" or plan.last_use.get(t) != k or t is plan.computation.root \
            or t.shape.dims != inst.shape.dims \
            or t.shape.dtype != inst.shape.dtype:
        return False
    step = next((st for st in plan.steps if st.inst is t), None)
    if step is None or step.group is not None:
        return False
    if flushing:
        rule = _RULES.get(inst)
        if rule is None or any(rule[0]) or rule[1]:
            return False
    return True


#: programs of more steps run by ``_Program.walk`` (a generated function of that many lines
#: would take longer to compile than its runs save)
_STRAIGHT_MAX_STEPS = 4000


def _straight(program):
    """``program.walk`` without a task as one generated Python function of (args, ctx,
    backend): each slot a local variable, each step one call of its function on the list
    of its operands' values, a value's slot emptied after its last reader (what frees it:
    a pooled buffer serves the next run), the root's value returned.  Slots read before a
    step writes them start as the walk's do: parameters from ``args``, the others from the
    template (constants).  The walk's loop over the steps, its tuple unpacking and its
    list comprehension cost about 0.3 us a step; a local variable read costs nothing."""
    steps = program.steps
    if len(steps) > _STRAIGHT_MAX_STEPS:
        return lambda args, ctx, backend: program.walk(args, ctx, backend, None)
    names = {"T": program.template}
    lines = ["def straight(args, ctx, backend):"]
    written = set()
    for k, p in enumerate(program.params):
        lines.append(f"    v{p} = args[{k}]")
        written.add(p)
    body = []
    for k, (fn, ins, out, dead) in enumerate(steps):
        for i in ins:
            if i not in written:
                lines.append(f"    v{i} = T[{i}]")
                written.add(i)
        names[f"f{k}"] = fn
        operands = ", ".join(f"v{i}" for i in ins)
        inline = getattr(fn, "inline", None)
        expr = getattr(fn, "expr", None)
        if expr is not None:   # a tuple's or get-tuple-element's step as its expression (numba_control)
            from .numba_control import step_expression
            expr = step_expression(expr, [f"v{i}" for i in ins])
        if expr is not None:
            body.append(f"    v{out} = {expr}")
        elif inline is not None:
            # a prepared step's body in place (its frame, its list of operands and its
            # star-call cost about 0.2 us): the kernel's function while the table holds it,
            # its errors named as the step names them; else the step itself
            names[f"g{k}"], names[f"o{k}"], names[f"k{k}"], names[f"p{k}"], names[f"n{k}"] = inline
            body += [f"    if g{k}(o{k}) is k{k}:",
                     "        try:",
                     f"            v{out} = p{k}({operands})",
                     "        except Exception as e:",
                     f"            n{k}(e, backend)",
                     "    else:",
                     f"        v{out} = f{k}([{operands}], ctx, backend)"]
        else:
            body.append(f"    v{out} = f{k}([{operands}], ctx, backend)")
        written.add(out)
        if dead:
            body.append("    " + " = ".join(f"v{d}" for d in dead) + " = None")
    if program.root not in written:
        lines.append(f"    v{program.root} = T[{program.root}]")
    lines += body + [f"    return v{program.root}"]
    exec(compile("\n".join(lines), "<run program>", "exec"), names)
    return names["straight"]


def _argmax_iota(group, plan, backend, fn):
    """The value of a loop of iotas, broadcasts and constants, whose inputs are iotas and
    constants (a value no argument changes), that only recognised argmax / argmin reduces
    read as their indices (JAX's broadcast iota along the reduced dimension), as a
    read-only broadcast of its line along the reduced dimensions, when it is constant along
    the others (the kernel then reads one line instead of an array as large as the
    operand, as XLA fuses the iota into the reduce); else None."""
    fixed = ("iota", "broadcast", "constant")
    if (backend.layer != "cpu" or group.kind != "loop" or group.root is plan.computation.root
            or any(m.opcode not in fixed for m in group.members)
            or any(i.opcode not in ("iota", "constant") for i in group.inputs)
            or not group.root.shape.is_array or not group.root.shape.is_static or not group.root.shape.numel):
        return None
    root = group.root
    red = backend._cpu.reduction
    readers = [st.inst for st in plan.steps
               if root in (st.group.inputs if st.group is not None else st.inst.operands)]
    dims = set()
    for r in readers:
        if (r.opcode != "reduce" or len(r.operands) != 4 or r.operands[1] is not root or r.operands[0] is root
                or r.operands[2] is root or r.operands[3] is root
                or red._argminmax_plan(r.attrs["computation"]) is None):
            return None
        dims.add(tuple(sorted(int(d) for d in r.attrs["dimensions"])))
    if len(dims) != 1:
        return None
    reduced = dims.pop()
    inputs = []
    for i in group.inputs:
        if i.opcode == "constant":
            inputs.append(backend.constant(i.attrs["literal"]))
            continue
        st = next((st for st in plan.steps if st.inst is i and st.group is not None and st.group.kind == "loop"
                   and st.group.members == [i]), None)
        if st is None:
            return None
        inputs.append(_group_step(st.group, backend, "ieee")([], None, backend))
    value = fn(inputs, None, backend)
    if type(value) is not np.ndarray or value.shape != tuple(root.shape.dims):
        return None
    line = value[tuple(slice(None) if d in reduced else slice(0, 1) for d in range(value.ndim))]
    view = np.broadcast_to(line, value.shape)
    if not np.array_equal(view, value):
        return None
    return view, [(i, v) for i, v in zip(group.inputs, inputs) if i.opcode == "iota"]


def _read_besides(x, plan, *readers):
    """Whether a fused fold's loop value ``x`` is read by a step other than ``readers`` (the
    Reduce, its epilogue) or is the result: then the loop writes it, else it need not."""
    return x is plan.computation.root or any(
        x in (st.group.inputs if st.group is not None else st.inst.operands)
        for st in plan.steps if st.inst not in readers)


def _flat_carriers(values, wants):
    """A fused loop's operand values as the flat carrier arrays its kernel takes."""
    return [v.reshape(-1) if type(v) is np.ndarray and v.dtype == w and v.flags.c_contiguous
            else _as_carrier(v, w) for v, w in zip(values, wants)]


def _picked_up(folded, reduce_fn, result_dims, final_dtype, flush_result):
    """A fused fold's Reduce step: the folds its loop's step left in ``folded`` (keyed by the
    id of the loop's value), as the Reduce's result; the Reduce's own step where the value
    is another (the loop's step ran its plain loop)."""
    def reduce_step(values, ctx, backend):
        got = folded.pop(id(values[0]), None)
        if got is None or got[0] is not values[0]:
            return reduce_fn(values, ctx, backend)
        res = got[1].reshape(result_dims)
        if res.dtype != final_dtype:
            res = res.astype(final_dtype)
        return backend.flush(res) if flush_result else res
    return reduce_step


def _fused_reduce(inst, plan, k, steps, slot, backend, clean, reduce_fn):
    """A Reduce folding the value of a fused loop along its trailing dimensions (a softmax's
    row sum of its exp) as the loop computes it (``cpu.fused.compile_reduce_loop``): (the
    index in ``steps`` of the loop's step, its new step, the Reduce's new step, the
    epilogues' step makers, which it folds: "rows" or "columns"), or None.
    The loop's step computes its value as before and the Reduce's result beside it, which
    the Reduce's step picks up (keyed by the loop's value); when the run decides otherwise
    (a thread count that cuts rows in parts) the Reduce's own step runs.

    Taken only where the Reduce's kernel would fold whole rows with no flushing of its
    operand (it holds no denormal, or the mode is not flushing): one standard combiner, a
    constant init, an f32 / f64 / integer type computed in itself."""
    if backend.layer != "cpu" or inst.opcode != "reduce" or len(inst.operands) != 2:
        return None
    x, init = inst.operands
    loop = next((st for st in plan.steps if st.group is not None and st.group.kind == "loop"
                 and st.group.root is x), None)
    init_step = next((st for st in plan.steps if st.inst is init), None)
    if loop is None or init_step is None or init.opcode != "constant" or plan.steps.index(loop) > k:
        return None
    t = inst.shape.element_type
    if t not in ("f32", "f64", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64") or x.shape.element_type != t:
        return None
    if not x.shape.is_static or not inst.shape.is_array:
        return None
    cpu = backend._cpu
    red = cpu.reduction
    kernel = registry.LAYERS["cpu"].get("reduce")
    if kernel is not red.reduce_kernel:
        return None
    comp = inst.attrs["computation"]
    code = red._standard_code(CompiledRegion(comp, None, backend), t)
    if code is None:
        return None
    dims = tuple(x.shape.dims)
    reduced = tuple(sorted(int(d) for d in inst.attrs["dimensions"]))
    groups = red._reduce_groups(dims, frozenset(reduced))
    block = [i for i, (_, r) in enumerate(groups) if r]
    if len(block) != 1:
        return None   # not one block of reduced dimensions
    R = groups[block[0]][0]
    A = red.product([g for g, _ in groups[:block[0]]])
    B = red.product([g for g, _ in groups[block[0] + 1:]])
    n = A * R * B
    if n == 0 or B > 1 and not _COLUMN_FOLDS:
        return None
    flushing = fpenv.flushing()
    mask, flush_result = _RULES.get(inst, ((), False)) if flushing else ((), False)
    if flushing and (inst not in _RULES or (mask and mask[0] and x not in clean)):
        return None   # the kernel would check (or flush) its operand
    literal = np.asarray(init.attrs["literal"])
    if flushing and len(mask) > 1 and mask[1]:
        literal = np.asarray(fpenv.flush(literal, t))
    dtype = _carrier_dtype(t)
    if dtype != np.dtype(inst.shape.dtype):
        return None
    init_value = dtype.type(literal[()])
    j = next((i for i, st in enumerate(steps) if st[2] == slot[x]), None)
    if j is None:
        return None
    group = loop.group
    if B > 1:
        return _fused_cols(inst, x, plan, j, group, clean if flushing else (), A, R, B, dtype, init_value, code,
                           flush_result, backend, reduce_fn)
    mode = "flush" if flushing else "ieee"
    epi = _epilogue(inst, x, plan, backend, clean if flushing else (), A, R, dtype) if _EPILOGUES else None
    try:
        src, compiled, static = cpu.fused.compile_reduce_loop(
            group, clean if flushing else (), epi[:3] if epi is not None else None)
    except Exception:   # (a loop Numba does not compile this way: the two steps as they were)
        epi = None
        try:
            src, compiled, static = cpu.fused.compile_reduce_loop(group, clean if flushing else ())
        except Exception:
            return None
    plain_loop = steps[j][0]
    # the Reduce (and the epilogue) the only readers of the loop's value: it need not be written
    keep = _read_besides(x, plan, inst, *([epi[4]] if epi is not None else []))
    done = {}   # the epilogue's results, keyed by the loop's value (as ``folded``)
    if epi is not None:
        esrc, e_in, _, estatic, eroot = epi
        edims = eroot.shape.dims
        e_odims, _, e_params, _ = estatic
        tiny = dtype.type(fpenv.TINY[t] if flush_result and t in fpenv.TINY else 0)
    wants = [_carrier_dtype(i.shape.element_type) for i in src.inputs]
    xdims, result_dims, final_dtype = x.shape.dims, inst.shape.dims, inst.shape.dtype
    empty, run, arb, parts = cpu.shape.empty, cpu.fused.run_reduce_loop, red.reduce_arb, red.row_parts
    folded = {}

    def loop_step(values, ctx, backend):
        # _arb_pass folds whole rows (P = 1) when the rows are many or the operand small,
        # else each row in P parts (few rows: a whole-array max), joined by a second fold:
        # the same cut (``row_parts``) and the same folds here (no epilogue then: it reads
        # whole rows' folds)
        P = parts(A, R, n)
        if P > 1 and epi is not None:
            return plain_loop(values, ctx, backend)
        out = empty(n, dtype) if keep else np.empty(0, dtype)   # (not kept: a token)
        inputs = _flat_carriers(values, wants)
        if P > 1:
            part_folds = np.empty(A * P, dtype)
            run(compiled, n, out, inputs, static, A, R, part_folds, init_value, code, keep, P=P)
            sums = np.empty(A, dtype)
            arb(part_folds, A, P, 1, 1, code, init_value, True, sums)
        elif epi is None:
            sums = np.empty(A, dtype)
            run(compiled, n, out, inputs, static, A, R, sums, init_value, code, keep)
        else:
            sums = np.empty(A, dtype)
            eout = empty(n, dtype)
            run(compiled, n, out, inputs, static, A, R, sums, init_value, code, keep,
                (eout, e_odims, *e_params, np.empty(A, dtype), flush_result, tiny))
        if keep:
            out = out.reshape(xdims)
        if len(folded) > 8:
            folded.clear()
            done.clear()
        folded[id(out)] = (out, sums)
        if epi is not None:
            done[id(out)] = (out, eout.reshape(edims))
        return out

    reduce_step = _picked_up(folded, reduce_fn, result_dims, final_dtype, flush_result)

    epilogues = {}
    if epi is not None:
        def epilogue_step(plain):
            def step(values, ctx, backend):
                got = done.pop(id(values[e_in]), None)
                if got is None or got[0] is not values[e_in]:
                    return plain(values, ctx, backend)
                return got[1]
            return step
        epilogues[eroot] = epilogue_step
    return j, loop_step, reduce_step, epilogues, "rows"


#: (a switch for A/B measurements) a row fold runs the loop reading its rows and folds
_EPILOGUES = True

#: (a switch for A/B measurements and the tests) a Reduce folding columns of a fused loop's
#: value (x as [A, R, B], B > 1) folds them as the loop computes them (``_fused_cols``)
_COLUMN_FOLDS = True


def _fused_cols(inst, x, plan, j, group, clean, A, R, B, dtype, init_value, code, flush_result, backend, reduce_fn):
    """``_fused_reduce`` of a Reduce over one block of dimensions that kept ones follow (x as
    [A, R, B]): the loop's step folds the columns as ``reduction._arb_pass`` does
    (``cpu.fused.compile_reduce_cols_loop``: the same parts, ``row_parts``', the same
    order, so the same bits) and the Reduce's step picks the folds up."""
    cpu = backend._cpu
    red, n = cpu.reduction, A * R * B
    try:
        src, compiled, static = cpu.fused.compile_reduce_cols_loop(group, clean)
    except Exception:   # (a loop Numba does not compile this way: the two steps as they were)
        return None
    keep = _read_besides(x, plan, inst)
    wants = [_carrier_dtype(i.shape.element_type) for i in src.inputs]
    xdims, result_dims, final_dtype = x.shape.dims, inst.shape.dims, inst.shape.dtype
    empty, run, arb, parts = cpu.shape.empty, cpu.fused.run_reduce_cols_loop, red.reduce_arb, red.row_parts
    folded = {}

    def loop_step(values, ctx, backend):
        P = parts(A, R, n)   # (``_arb_pass``'s cut of the columns' rows)
        out = empty(n, dtype) if keep else np.empty(0, dtype)   # (not kept: a token)
        inputs = _flat_carriers(values, wants)
        folds = np.empty(A * P * B, dtype)
        run(compiled, n, out, inputs, static, A, R, B, folds, init_value, code, keep, P)
        if P > 1:   # the parts joined: [A, P, B] over P, from init
            sums = np.empty(A * B, dtype)
            arb(folds, A, P, B, 1, code, init_value, True, sums)
            folds = sums
        if keep:
            out = out.reshape(xdims)
        if len(folded) > 8:
            folded.clear()
        folded[id(out)] = (out, folds)
        return out

    reduce_step = _picked_up(folded, reduce_fn, result_dims, final_dtype, flush_result)
    return j, loop_step, reduce_step, {}, "columns"


def _epilogue(inst, x, plan, backend, clean, A, R, dtype):
    """The loop a fused row fold can run on each row after its fold (``fused.compile_reduce
    _loop``'s epilogue: a softmax's division by its row sums), or None: a loop over x's
    dimensions (rows of R, as the fold's) whose inputs are x itself and the Reduce's result
    through reshapes and broadcasts of the same elements only (its value at row t is fold
    t), read as one value per row.  (RowLoopSource, which input is x, which the folds,
    its static parameters, its root.)"""
    from .scalar_lib import bcast_row
    cpu = backend._cpu
    for st in plan.steps:
        g = st.group
        if (g is None or g.kind != "loop" or x not in g.inputs or len(g.inputs) != 2
                or tuple(g.root.shape.dims) != tuple(x.shape.dims) or g.root.shape.element_type != x.shape.element_type
                or np.dtype(g.root.shape.dtype) != dtype):
            continue
        s = g.inputs[1 - g.inputs.index(x)]
        v = s
        while v is not inst:   # back to the Reduce through reshapes and broadcasts of A elements
            vs = next((q for q in plan.steps if q.inst is v), None)
            if vs is None or not v.shape.is_array or v.shape.numel != A or len(v.operands) < 1:
                break
            if vs.group is None and v.opcode in ("reshape", "bitcast"):
                v = v.operands[0]
            elif (vs.group is not None and vs.group.kind == "loop" and len(vs.group.members) == 1
                  and v.opcode == "broadcast"):
                v = v.operands[0]
            else:
                break
        if v is not inst:
            continue
        try:
            esrc = cpu.fused.RowLoopSource(g, [i for i in clean if i is x])
        except AssertionError:
            continue
        if int(esrc.mdims[-1]) != R:
            continue
        k_s = g.inputs.index(s)
        static = cpu.fused._params(esrc)
        # the folds' broadcast: one value per row, row t's being fold t
        bcasts = [k for k, (kind, inst2, _) in enumerate(esrc.param_values) if kind == "bcast"]
        if any(kind == "iota" for kind, _, _ in esrc.param_values) or len(bcasts) != 1 or esrc.param_values[bcasts[0]][1] is not s or esrc._steps[0] != 0:
            continue
        odims, strides = static[0], static[2][bcasts[0]]
        rows = sorted({0, 1, A // 2, A - 2, A - 1} & set(range(A)))
        if any(int(bcast_row(r, odims, strides)) != r for r in rows):
            continue
        return esrc, g.inputs.index(x), k_s, static, g.root
    return None


def _group_step(group, backend, mode, clean=None):
    runner = getattr(backend, "group_runner", None)
    if runner is not None:
        run_loop = runner(group, mode, clean) if clean and backend.layer == "cpu" else runner(group, mode)
        return _ctx_free(lambda values, ctx, backend: run_loop(values))
    return _ctx_free(lambda values, ctx, backend: backend.run_group(group, values))


def _op_step(inst, backend, clean, extra=None, raw=False):
    """One instruction's step: (function of its operand values, the bytes it allocates).
    ``extra``: keyword arguments the plan adds for the kernel (``run_op``'s); ``raw``: its
    result left unflushed (``run_op``'s)."""
    op = inst.opcode
    if op == "tuple":
        fn = _ctx_free(lambda values, ctx, backend: tuple(values))
        fn.expr = ("tuple",)   # (what _straight writes in its place: numba_control.step_expression)
        return fn, 0
    if op == "get-tuple-element":
        index = inst.attrs["index"]
        fn = _ctx_free(lambda values, ctx, backend: values[0][index])
        fn.expr = ("get-tuple-element", index)
        return fn, 0
    if op == "constant":
        literal = inst.attrs["literal"]
        return _ctx_free(lambda values, ctx, backend: backend.constant(literal)), 0
    if op in ("while", "call", "fusion", "conditional"):
        # (their computations' programs run directly: numba_control)
        from .numba_control import control_step
        made = control_step(inst, backend, clean, raw)
        if made is not None:
            return made, 0
    kernel = registry.LAYERS.get(backend.layer, {}).get(op)
    if op in _CONTROL or op == "scan" or kernel is None or _dynamic_operands(inst) \
            or inst not in _SIZES or inst not in _RULES and fpenv.flushing():
        # control flow, simulated devices, run-time shapes: the walk's own code
        return (lambda values, ctx, backend: run_op(inst, values, ctx, backend, clean, extra, raw)), 0
    opdef = registry.get(op)
    table = registry.LAYERS[backend.layer]
    shape = inst.shape
    kwargs = _KWARGS.get(inst)      # None: an attribute is a computation, bound per run (its context)
    if extra and kwargs is not None:
        kwargs = dict(kwargs, **extra)
    needs_ctx = getattr(kernel, "needs_context", False) or opdef.needs_context
    mask, flush_result = _RULES[inst] if fpenv.flushing() else ((), False)
    if clean is not None:
        mask = [m and not c for m, c in zip(mask, clean)]
    mask = tuple(mask) if any(mask) else None
    if raw:
        flush_result = False
    # a kernel's ``prepare`` hook (cpu/shape.py): its Python set-up decided once for the
    # step's static shapes and attributes; a function of the operand values, or None
    # (``prepare_regions``: its computations are bound without a run context, so that the
    # hook can recognise a standard combiner; its prepared function never calls them.
    # The denormal rule stays the step's: marked operands flushed before the prepared
    # function, or by it (``flushes_operands``: ``flush=`` the mask), its result after.)
    prepare = getattr(kernel, "prepare", None)
    fast = None
    pkw = kwargs
    if prepare is not None and kwargs is None and getattr(kernel, "prepare_regions", False):
        pkw = bind(inst.attrs, None, backend)
        if extra:
            pkw.update(extra)
    flushes = getattr(kernel, "flushes_operands", False)
    if prepare is not None and pkw is not None and not needs_ctx \
            and (mask is None and not flush_result or getattr(kernel, "prepare_flushing", False)) \
            and all(o.shape.is_array and o.shape.is_static for o in inst.operands):
        if mask is not None and flushes:
            pkw = dict(pkw, flush=mask)
        fast = prepare([o.shape for o in inst.operands], shape=shape, **pkw)
    if fast is not None and mask is None and not flush_result:
        def prepared_step(values, ctx, backend):
            if table.get(op) is not kernel:   # the kernel table changed since: the walk's code
                return run_op(inst, values, ctx or ExecutionContext(), backend, clean, extra, raw)
            try:
                return fast(*values)
            except Exception as e:
                _raise_named(e, opdef, inst, backend)
        # (what _straight calls in its place while the table holds the kernel: its
        # function of the operands, and what names the instruction in its errors)
        prepared_step.inline = (table.get, op, kernel, fast, lambda e, backend: _raise_named(e, opdef, inst, backend))
        return _ctx_free(prepared_step), _SIZES[inst]
    if fast is not None:
        pre = None if mask is None or flushes else mask
        # (a prepared function that flushes its own result, having looked for its denormals
        # as it wrote it: ``flushes_result``, the reduce-window sum's long rows)
        flush_result = flush_result and not getattr(fast, "flushes_result", False)

        def prepared_flushing_step(values, ctx, backend):
            if table.get(op) is not kernel:
                return run_op(inst, values, ctx or ExecutionContext(), backend, clean, extra, raw)
            if pre is not None:
                values = [backend.flush(v) if m else v for v, m in zip(values, pre)]
            try:
                out = fast(*values)
            except Exception as e:
                _raise_named(e, opdef, inst, backend)
            return backend.flush(out) if flush_result else out
        return _ctx_free(prepared_flushing_step), _SIZES[inst]

    def step(values, ctx, backend):
        if table.get(op) is not kernel:   # the kernel table changed since: the walk's code
            return run_op(inst, values, ctx or ExecutionContext(), backend, clean, extra, raw)
        kw = kwargs
        if kw is None:
            kw = bind(inst.attrs, ctx, backend)
            if extra:
                kw.update(extra)
        if needs_ctx:
            kw = dict(kw, ctx=ctx)
        return _call_kernel(kernel, values, shape, kw, mask, flush_result, opdef, inst, backend)
    # (a step whose keyword arguments are decided once and whose kernel takes no context)
    return (_ctx_free(step) if kwargs is not None and not needs_ctx else step), _SIZES[inst]


def _ctx_free(fn, *inner):
    """Mark step ``fn`` as one that reads no run context (its ``ctx`` may be None), when the
    steps it calls (``inner``) read none either; a program of such steps only runs without
    one (``_fast_run``: making it cost 0.3 us a run).  Unmarked steps read it."""
    fn.ctx_free = all(getattr(f, "ctx_free", False) for f in inner)
    return fn


def run(module, args, device="cpu", fuse=True, ctx=None, on_value=None, channels=None):
    backend = _backend(device, fuse)
    mplan = _module_plan(module, backend)
    if ctx is None and mplan.partitioned:
        from . import spmd
        from .reference import run_on_devices
        info = spmd.SpmdInfo(module)

        def work(c):
            return run(module, args, device, fuse, ctx=c)
        return run_on_devices(work, info.num_replicas, info.num_partitions, channels=channels, spmd=info)[0]
    plain = ctx is None and on_value is None and channels is None
    args = mplan.arguments(module, args, backend)
    ctx = ctx or ExecutionContext(channels=channels)
    # one thread when other processes keep the cores busy (numba_setup.enter_run)
    threads = enter_run() if device == "cpu" else 0
    memo = backend._cpu.reduction if device == "cpu" else None
    # a run's remembered reduces (cpu.reduction.begin_run): its own, in this thread only
    outer_memo = memo.begin_run() if memo is not None else None
    try:
        out = evaluate(module.entry, args, ctx, backend, on_value)
    except Exception as e:
        _interrupted(e)
        raise
    finally:
        leave_run(threads)
        if memo is not None:
            memo.end_run(outer_memo)
    if plain and device == "cpu" and fuse is True and module.__dict__.get("_numba_fast", (None,))[0] is not mplan \
            and module.entry.__dict__.get("_ran_on_cpu"):
        # (mplan, the fast run, what it answers when it cannot run: XlaComputation.run reads it)
        module.__dict__["_numba_fast"] = (mplan, _fast_run(module, mplan, backend), _MISS)
    if type(out) is np.ndarray and out.dtype == mplan.result_dtype and out.shape == mplan.result_dims:
        return out   # what conform returns for it
    return conform(_host_tree(out, backend), module.entry.root.shape, module.name)


def _interrupted(e):
    """A Ctrl-C that Python lost inside LLVM's code generation, raised as what it was."""
    from .jit_cache import interrupted_compile
    if interrupted_compile(e):
        where = str(e).split(" (", 1)[0] if isinstance(e, ExecutionError) else "a fused loop"
        raise KeyboardInterrupt(f"interrupted while Numba compiled the kernel of {where} (the "
                                f"kernel is kept for this process: run again)") from e


#: what a fast run answers when it cannot run: the caller then takes ``run``'s path
_MISS = object()


def _fast_run(module, mplan, backend):
    """A CPU module's later runs without ``run``'s Python steps (``run_numba`` tries it
    first; 8-13 us of fixed cost a run before).  Made after a plain run (no context,
    watcher or channels; not partitioned) of an entry that has run once with progress
    known; it answers ``_MISS`` -- and ``run`` decides everything as before -- unless
    every decision ``run`` and ``evaluate`` would take comes out as they remembered it:
    the same entry (its length and root: ``_module_plan``'s key) and compile budgets, a
    program for the current denormal environment built on the entry's current fusion
    plan within the size limit in force, nobody listening to progress outside a task,
    and each argument an array (or NumPy scalar) of its parameter's exact dtype and dims
    (anything else goes through ``entry_arguments``' conversions and errors).  What the
    run itself does is ``run``'s: a context, the thread count (``enter_run``), the
    reduce memo of the run (``begin_run`` / ``end_run``), the program, the result's
    check.  It holds no state of a run: threads and reentrant runs each have their own."""
    entry = module.entry
    n, root, fuse = len(entry.instructions), entry.root, backend.fuse
    budget, red = _fusion.MAX_FUSED_LOOPS, backend._cpu.reduction
    region_budget = red.MAX_REGION_KERNELS
    programs = _programs(entry)
    key_flush, key_ieee = (backend.layer, fuse, "flush"), (backend.layer, fuse, "ieee")
    params = tuple(mplan.params)
    nparams = len(params)
    rdtype, rdims, rshape, name = mplan.result_dtype, mplan.result_dims, root.shape, module.name
    begin_run, end_run, ndarray, generic = red.begin_run, red.end_run, np.ndarray, np.generic
    edict = entry.__dict__
    fusion_module, shapes_module, env_module = _fusion, shapes, fpenv

    def fast(args):
        # _module_plan's key, the budgets, progress as evaluate reads them
        if module.entry is not entry or len(entry.instructions) != n or entry.root is not root \
                or fusion_module.MAX_FUSED_LOOPS != budget or red.MAX_REGION_KERNELS != region_budget \
                or progress._listeners and not progress._running:
            return _MISS
        # _program's answer: the environment's program, on the entry's fusion plan, in the limit
        program = programs.get(key_flush if env_module._mode == "flush" else key_ieee)
        planned = edict.get("_fusion_plan")
        if program is None or planned is None or planned[0] != fuse or program.plan is not planned[1] \
                or program.max_bytes > shapes_module.MAX_BYTES:
            return _MISS
        # ``_ModulePlan.arguments``' exact arguments
        if type(args) is not tuple or len(args) != nparams:
            return _MISS
        k = 0
        for a, (dtype, dims) in zip(args, params):
            if type(a) is ndarray:
                if not (a.dtype is dtype or a.dtype == dtype) or a.shape != dims:
                    return _MISS
            elif isinstance(a, generic) and a.dtype == dtype and a.shape == dims:
                args = args[:k] + (np.asarray(a),) + args[k + 1:]
            else:
                return _MISS
            k += 1
        # (a program whose steps read no context runs without one)
        ctx = None if program.ctx_free else ExecutionContext()
        threads = enter_run()
        outer_memo = begin_run()
        try:
            out = program.straight(args, ctx, backend)
        except Exception as e:
            _interrupted(e)
            raise
        finally:
            leave_run(threads)
            end_run(outer_memo)
        if type(out) is ndarray and out.dtype == rdtype and out.shape == rdims:
            return out
        return conform(_host_tree(out, backend), rshape, name)
    return fast


class _ModulePlan:
    """What every run of a module decides the same way until its entry changes: it is
    verified (``hlo.verify``), fusion-planned with one budget (``plan_module``), its region
    kernels budgeted, partitioned or not; the parameters' exact dtypes and static dims,
    the result's."""

    def __init__(self, module, backend):
        from ..hlo.verify import verify
        from . import spmd
        verify(module)
        # (spmd.is_partitioned reads every instruction: tens of microseconds a call)
        self.partitioned = spmd.is_partitioned(module)
        # one compile budget for the whole module (fused loops; the CPU's region kernels)
        plan_module(module, fuse=backend.fuse)
        if backend.layer == "cpu":
            backend._cpu.reduction.budget_regions(module)
        entry = module.entry
        self.params = [(p.shape.dtype, p.shape.dims) if p.shape.is_array and p.shape.is_static else (None, None)
                       for p in entry.parameters]
        rs = entry.root.shape
        self.result_dtype, self.result_dims = (rs.dtype, rs.dims) if rs.is_array and rs.is_static else (None, None)

    def arguments(self, module, args, backend):
        """``entry_arguments``: an array (or a NumPy scalar) of the parameter's exact dtype
        and dims is taken as it is (what ``as_argument`` returns for it); anything else --
        Python numbers and lists, other dtypes or shapes -- goes through it."""
        if type(args) is tuple and len(args) == len(self.params):
            out = []
            for a, (dtype, dims) in zip(args, self.params):
                t = type(a)
                if t is np.ndarray:
                    # (``is`` first: NumPy's dtypes of the built-in types are one object each)
                    if (a.dtype is dtype or a.dtype == dtype) and a.shape == dims:
                        out.append(a)
                        continue
                elif isinstance(a, np.generic) and a.dtype == dtype and a.shape == dims:
                    out.append(np.asarray(a))
                    continue
                break
            else:
                return out if backend.layer == "cpu" else [backend.to_device(a) for a in out]
        return [_device_tree(a, backend) for a in entry_arguments(module, args)]


def _module_plan(module, backend):
    """The module's ``_ModulePlan``, remembered until the entry (its length, its root) or
    the compile budgets change."""
    entry = module.entry
    key = (entry, len(entry.instructions), entry.root, _fusion.MAX_FUSED_LOOPS,
           backend._cpu.reduction.MAX_REGION_KERNELS if backend.layer == "cpu" else None)
    plans = module.__dict__.setdefault("_numba_plans", {})
    cached = plans.get((backend.layer, backend.fuse))
    if cached is None or cached[0] != key:
        cached = plans[(backend.layer, backend.fuse)] = (key, _ModulePlan(module, backend))
    return cached[1]


def run_numba(module, args, **options):
    if not options:   # a module run before: its fast run, where nothing it decided changed
        fast = module.__dict__.get("_numba_fast")
        if fast is not None:
            out = fast[1](args)
            if out is not _MISS:
                return out
    return run(module, args, device="cpu", **options)


def run_cuda(module, args, **options):
    return run(module, args, device="cuda", **options)
