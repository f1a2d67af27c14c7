"""Control flow in the Numba executors' run programs: ``while``, ``call`` (and a ``fusion``
op run as a call), ``conditional`` as steps that run their computations' programs directly.

The walk's code for them (``numba_executor.run_op``) calls ``evaluate`` for every nested
run: a while's condition and body once an iteration, a call inside the body once more.
Each ``evaluate`` looks the computation's fusion plan and program up again, reads the
denormal environment, the size limit and progress, and only then runs the program's
generated function (``_straight``): 5-8 us of Python a nested run, 12-26 us an iteration
of a ``fori_loop`` whose body computes for 1.

A step made here (``control_step``) decides once what ``evaluate`` decides from the step's
static facts -- the callee, its mask of clean parameters, its raw root -- and at each nested
run checks only what can change between runs: that the callee's fusion plan is the one its
program was built on, that the program exists for the environment in force and fits the
size limit, that ``evaluate`` would run it without a progress task.  When all holds it calls
the program's generated function itself (what ``evaluate`` would do); otherwise it calls
``evaluate`` (a first run, a changed plan or limit, a listener: the walk decides, as before).
Results are the same values computed by the same kernels in the same order.
"""
from .. import fpenv, progress, shapes

#: whether run programs built from now on take the steps made here (False: the walk's code
#: for control flow, the kernel for every dynamic-update-slice -- an A/B switch for benchmarks)
ENABLED = True


def _nested(computation, backend, clean_params, raw_root):
    """A function of (args, ctx): ``evaluate(computation, args, ctx, backend,
    clean_params=clean_params, raw_root=raw_root)``, running the computation's program
    directly where ``evaluate`` would (see the module's doc)."""
    from . import numba_executor as ne
    evaluate, RawRoot, raw_ok = ne.evaluate, ne._RawRoot, ne._raw_root_ok
    d = computation.__dict__
    fuse, layer = backend.fuse, backend.layer
    flag = "_ran_on_" + layer
    env = fpenv
    limits = shapes
    listeners, running = progress._listeners, progress._running
    base = {"flush": (layer, fuse, "flush"), "ieee": (layer, fuse, "ieee")}
    if clean_params is not None:
        kwargs = {"clean_params": clean_params, "raw_root": True} if raw_root else {"clean_params": clean_params}
    else:
        kwargs = {"raw_root": True} if raw_root else {}

    def key_of(plan, mode):
        # evaluate's: a mask only in "flush" mode; a raw root where the plan allows it
        mask = clean_params if mode == "flush" else None
        if raw_root and raw_ok(computation, plan, backend):   # (read in ``mode``: the caller's)
            mask = RawRoot(mask)
        return base[mode] if mask is None else base[mode] + (mask,)

    simple = clean_params is None and not raw_root
    keys = {}   # (plan, mode) -> program key

    def run(args, ctx):
        planned = d.get("_fusion_plan")
        programs = d.get("_numba_programs")
        if planned is not None and programs is not None and planned[0] == fuse \
                and (running or not listeners and d.get(flag)):
            mode = env._mode
            if simple:
                program = programs.get(base[mode])
            else:
                plan = planned[1]
                key = keys.get((plan, mode))
                if key is None:
                    if len(keys) >= 8:   # (plans replaced: not kept alive here)
                        keys.clear()
                    key = keys[(plan, mode)] = key_of(plan, mode)
                program = programs.get(key)
            if program is not None and program.plan is planned[1] and program.max_bytes <= limits.MAX_BYTES:
                return program.straight(args, ctx, backend)
        return evaluate(computation, args, ctx, backend, **kwargs)
    return run


def control_step(inst, backend, clean, raw):
    """The run program's step of a ``while``, ``call``/``fusion`` or ``conditional`` (a
    function of (values, ctx, backend), as ``numba_executor._op_step``'s), or None for the
    other ops.  ``clean``: per operand, whether it is known clean (the step's static facts,
    as ``run_op`` gets them); ``raw``: the callee's root left unflushed."""
    from . import numba_executor as ne
    op = inst.opcode
    if not ENABLED:
        return None
    if op in ("call", "fusion"):
        callee = inst.attrs["computation"] if op == "call" else inst.attrs["calls"]
        body = _nested(callee, backend, ne._clean_mask(clean), bool(raw))

        def call_step(values, ctx, backend):
            return body(values, ctx)
        return call_step
    if op == "while":
        cond = _nested(inst.attrs["condition"], backend, None, False)
        body = _nested(inst.attrs["body"], backend, None, False)
        to_host = backend.to_host
        from .compiled_loop import compiled_loop
        from .compiled_scan import compiled_scan
        whole = compiled_loop(inst, backend) or compiled_scan(inst, backend)
        if whole is not None:   # (the whole loop one Numba function: none of the Python below an iteration)
            run_whole = whole.run

            def compiled_step(values, ctx, backend):
                out = run_whole(values[0])
                if out is not None:
                    return out
                state = values[0]
                while bool(to_host(cond([state], ctx))):
                    state = body([state], ctx)
                return state
            return compiled_step
        slots = carried_updates(inst.attrs["body"], inst.attrs["condition"]) if backend.layer == "cpu" else ()
        if slots:   # (its stacked results updated in place from the second iteration on)
            later = donating_body(body, slots)

            def scan_step(values, ctx, backend):
                state = values[0]
                if bool(to_host(cond([state], ctx))):
                    state = body([state], ctx)
                    while bool(to_host(cond([state], ctx))):
                        state = later([state], ctx)
                return state
            return scan_step

        def while_step(values, ctx, backend):
            state = values[0]
            while bool(to_host(cond([state], ctx))):
                state = body([state], ctx)
            return state
        return while_step
    if op == "conditional":
        branches = inst.attrs.get("branch_computations")
        to_host = backend.to_host
        if branches is None:
            on_true = _nested(inst.attrs["true_computation"], backend, None, False)
            on_false = _nested(inst.attrs["false_computation"], backend, None, False)

            def if_step(values, ctx, backend):
                if bool(to_host(values[0])):
                    return on_true([values[1]], ctx)
                return on_false([values[2]], ctx)
            return if_step
        runs = [_nested(b, backend, None, False) for b in branches]
        last = len(runs) - 1

        def case_step(values, ctx, backend):
            k = int(to_host(values[0]))
            if not 0 <= k <= last:
                k = last
            return runs[k]([values[1 + k]], ctx)
        return case_step
    return None


def step_expression(expr, operands):
    """The Python expression ``_straight`` writes for a step marked ``expr`` (a tuple's,
    ``("tuple",)``; a get-tuple-element's, ``("get-tuple-element", index)``) on its operands'
    variables: the step's own computation (``tuple(values)``, ``values[0][index]``) without
    its call (about 0.2 us a step; a while's body and condition have several).  None when
    ``ENABLED`` is off (the step's call, as before)."""
    if not ENABLED:
        return None
    if expr[0] == "tuple":
        return "(" + "".join(f"{o}, " for o in operands) + ")"
    if expr[0] == "get-tuple-element":
        return f"{operands[0]}[{int(expr[1])}]"
    raise ValueError(f"no expression for a step {expr!r}")


# -- a while's stacked results updated in place ----------------------------------------------
#
# ``lax.scan`` writes its per-step results into a loop-carried buffer: the body's
# dynamic-update-slice of tuple element i makes a new buffer of the whole stack every
# iteration (a 1 MiB copy a step of a 64-step scan of f32[32,128] rows: the step's main
# cost).  XLA updates the buffer in place when the old value is dead, and so does a while
# step here, where that is provably the same:
#
# * ``carried_updates(body)``: the tuple elements i whose only reader in the body is one
#   dynamic-update-slice D, as its operand (directly, or as the one parameter of a called
#   or fused computation whose root is D and that only D reads, as its operand), whose value (or the
#   call's) the body returns at position i of its root tuple and nowhere else, and that
#   nothing else reads; nor does the condition read element i (the run's memos of reduces
#   and of arrays scanned clean, ``cpu.reduction``, know an array by its identity: one the
#   condition read, then written in place, would be answered from the memo);
# * from the second iteration on, element i of the state is the value D made in the
#   iteration before (a new array of the kernel's, or the buffer it updated in place):
#   nothing but the state tuple refers to it, and the state before the body's run is dead
#   after it.  The while step names those arrays (``_local.donated``) while the body runs;
#   D's step (``in_place_update``) writes its update into its operand when that is one of
#   them, else runs its kernel.  The first iteration's operand (the caller's value: an
#   argument, a constant, a view) is never written.
#
# Only where the dynamic-update-slice flushes nothing (its values are copied bits: the same
# bits in place), its shapes static, its update of the operand's dtype.

import threading

_local = threading.local()


def _users(computation):
    users = {}
    for inst in computation.instructions:
        for k, o in enumerate(inst.operands):
            users.setdefault(o, []).append((inst, k))
    return users


def _root_dus_of_param(callee, j):
    """Whether ``callee``'s root is a dynamic-update-slice whose operand is its parameter
    ``j``, read nowhere else (not the update, not an index), and the root read by nothing."""
    root = callee.root
    if root.opcode != "dynamic-update-slice" or j >= len(callee.parameters):
        return False
    p = callee.parameters[j]
    users = _users(callee)
    return users.get(p, []) == [(root, 0)] and not users.get(root)


def carried_updates(body, condition=None):
    """The tuple elements of ``body``'s state updated in place from the second iteration
    on (see above): a tuple of indices, maybe empty.  ``condition``: the while's, which
    must not read them (a reduce of a stack remembered by the run, a scan of it found
    clean, would be taken for its value after a later update in place)."""
    read = set()
    if condition is not None:
        if len(condition.parameters) != 1:
            return ()
        cusers = _users(condition)
        for g, _ in cusers.get(condition.parameters[0], []):
            if g.opcode != "get-tuple-element":
                return ()
            if cusers.get(g) or g is condition.root:
                read.add(g.attrs["index"])
    params = body.parameters
    root = body.root
    if len(params) != 1 or root.opcode != "tuple" or not params[0].shape.is_tuple:
        return ()
    param = params[0]
    users = _users(body)
    gtes = users.get(param, [])
    if any(u.opcode != "get-tuple-element" for u, _ in gtes):
        return ()   # the whole state read (passed on, returned): not analysed
    found = []
    for i, v in enumerate(root.operands):
        if i in read or root.operands.count(v) != 1 or users.get(v) != [(root, i)]:
            continue
        readers = [r for g, _ in gtes if g.attrs["index"] == i for r in users.get(g, [])]
        if len(readers) != 1:
            continue
        (reader, k), = readers
        if reader is not v:
            continue
        if v.opcode == "dynamic-update-slice":
            ok = k == 0
        elif v.opcode in ("call", "fusion"):   # (an optimised module's dynamic-update-slice fusion)
            ok = _root_dus_of_param(v.attrs["computation"] if v.opcode == "call" else v.attrs["calls"], k)
        else:
            ok = False
        if ok:
            found.append(i)
    return tuple(found)


def donating_body(body_run, slots):
    """``body_run`` (a function of (args, ctx)) run with the state's elements ``slots``
    donated to their in-place updates (the caller donates only from the second iteration)."""
    def run(args, ctx):
        state = args[0]
        saved = getattr(_local, "donated", None)
        _local.donated = tuple(state[i] for i in slots)
        try:
            return body_run(args, ctx)
        finally:
            _local.donated = saved
    return run


def in_place_update(inst, fn, backend):
    """Step ``fn`` of a dynamic-update-slice ``inst`` (a run program's), or a step that
    writes the update into its operand when the operand is one the running while donated
    (see above) and runs ``fn`` otherwise."""
    if not ENABLED or inst.opcode != "dynamic-update-slice" or backend.layer != "cpu":
        return fn
    from . import numba_executor as ne
    shape = inst.shape
    xs, us = inst.operands[0].shape, inst.operands[1].shape
    if not (shape.is_array and shape.is_static and xs.is_array and xs.is_static and us.is_array
            and us.is_static and all(o.shape.is_array and o.shape.is_static for o in inst.operands[2:])):
        return fn
    if fpenv.flushing():
        rule = ne._RULES.get(inst)
        if rule is None or any(rule[0]) or rule[1]:
            return fn
    import numpy as np
    dims, udims = tuple(shape.dims), tuple(us.dims)
    if tuple(xs.dims) != dims or len(udims) != len(dims) or len(inst.operands) != 2 + len(dims):
        return fn
    limits = tuple(d - u for d, u in zip(dims, udims))
    dtype = np.dtype(shape.dtype)
    if np.dtype(xs.dtype) != dtype or np.dtype(us.dtype) != dtype:
        return fn
    ndarray, local = np.ndarray, _local
    opdef = ne.registry.get(inst.opcode)
    # an update of whole trailing dimensions (a scan's row of its stack: [1, 32, 128] into
    # [64, 32, 128]) is one block of the flat operand, at the first start times ``block``
    # (the other starts clamp to 0): a slice of the flat words, not a slice per dimension
    # (about 3 of a 64-step RNN scan's 60 us a step)
    whole = len(dims) >= 1 and udims[1:] == dims[1:]
    block = int(np.prod(dims[1:], dtype=np.int64)) if whole else 0
    size, top = int(np.prod(udims, dtype=np.int64)), limits[0] if limits else 0

    def step(values, ctx, backend):
        donated = getattr(local, "donated", None)
        if donated:
            x = values[0]
            u = values[1]
            if type(x) is ndarray and type(u) is ndarray and x.dtype == dtype and u.dtype == dtype \
                    and x.flags.writeable and x.shape == dims and u.shape == udims and any(x is d for d in donated):
                try:
                    # (the kernel's clamp: each start into [0, operand - update])
                    if whole and x.flags.c_contiguous and u.flags.c_contiguous:
                        k = int(values[2])
                        at = (0 if k < 0 else top if k > top else k) * block
                        x.reshape(-1)[at:at + size] = u.reshape(-1)
                    else:
                        at = tuple(slice(s, s + n) for s, n in zip(
                            (min(max(int(k), 0), m) for k, m in zip(values[2:], limits)), udims))
                        x[at] = u
                except Exception as e:
                    ne._raise_named(e, opdef, inst, backend)
                return x
        return fn(values, ctx, backend)
    step.ctx_free = getattr(fn, "ctx_free", False)
    return step
