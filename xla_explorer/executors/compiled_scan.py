"""A ``while`` loop of whole-array steps -- products, dynamic slices and updates, element-wise
ops -- compiled into one Numba function: ``lax.scan``'s loop without Python per iteration.

An RNN's ``lax.scan`` (``h = tanh(h @ W + x[t])``, each ``h`` stacked into the result) is a
while whose body takes a dynamic slice of the inputs, multiplies, adds, applies tanh and
writes a dynamic-update-slice into the stack.  The run program's while step (the nested
runs of ``numba_control``) costs about 20 us of Python an iteration around a product of
8-12 us; XLA's whole iteration is about 18.  ``compiled_loop`` compiles loops whose arrays
never mix their elements and that slice nothing; this module (tried after it) compiles the
others, step by step, where they are made of:

* parameters, tuples, get-tuple-elements, calls and fusions (inlined), constants (an
  array constant -- a closure's weights -- passed to the function);
* element-wise ops with a scalar emitter (``emit.can_emit``) on arrays of one element count
  and scalars: consecutive ones run as one loop over the flat index (values kept in
  registers, stored only where a later step reads them);
* reshapes, bitcasts, copies and broadcasts that keep the row-major order, broadcasts of a
  scalar and of a contiguous run of dimensions (a bias along the features); transposes,
  static slices and concatenations (a block of the operand a view, anything else a copy;
  of a loop invariant, once a call);
* ``dot`` of f32 (f64) matrices and vectors as the executor's dot kernel computes them
  (``_dot``): ``cblas_?gemm`` / ``cblas_?gemv`` of the OpenBLAS NumPy is linked with,
  called from the generated code (``cpu.blas_call``) -- the calls ``np.matmul`` makes, so
  the same bits -- on one BLAS thread, or the kernel's own matrix-vector loops; in
  ``"flush"`` mode operands flushed first (a loop invariant once a call of the function)
  and results after, as the kernel's rule says;
* ``dynamic-slice`` with scalar starts (clamped as XLA clamps them): a contiguous block is a
  view at an offset, anything else a copy;
* ``dynamic-update-slice`` of a carried array read by nothing else (``numba_control``'s
  ``carried_updates`` rule): written in place into the loop's own copy of it.

The condition is made of the same steps.  A reduce with a standard combiner over one
block of dimensions of a small array calls the reduce kernel's own serial fold
(``_reduce``): a ``max(abs(delta))`` convergence test, a loss's sum, a bias gradient's
column sums.  Carried arrays the body computes anew are two buffers
written in turn; the first iteration reads the caller's arrays and never writes them.
Values are the run program's, bit for bit (the same emitters, flushes and BLAS calls;
``tests/test_compiled_scan.py``).  The function runs in one thread: loops with more than
``_MAX_SERIAL`` elements of element-wise work an iteration, products the kernel splits
among threads, are left to the run program.  A call of the function runs at most
``limit`` iterations (about ``_CHUNK_WORK`` of work): between calls Python can deliver a
Ctrl-C.  Loops that do not qualify, progress listeners, state values of other types or
shapes, and buffers over the size limit take the run program's steps as before.
Measured (one process, numba before / after / JAX): the RNN scan above 2.5-3.4 / 0.95-1.4 /
0.9-1.5 ms, a moving average of 1000 steps 14.6 / 0.37 / 0.68, 200 steps of least-squares
gradient descent 8.0 / 0.76 / 0.67.
"""
import itertools
import re
import weakref

import numpy as np

from .. import fpenv, progress, shapes
from ..shapes import prod
from .compiled_loop import (_BAD_TYPES, _PASS, NotCompiled, _cached, _given_up, _live, _loop_end, _not_denormal,
                            _results, _state_of, _structural, _turn)

#: (an A/B switch for benchmarks and tests) whether while steps try the compiled scan
ENABLED = True

#: a call's work (elements moved or computed, a product's multiply-adds / 16)
_CHUNK_WORK = 1 << 25

#: loops with more element-wise work an iteration than this (elements computed or moved
#: outside the products) are left to the run program, whose fused loops share it among the
#: threads from ``MOVE_PARALLEL_THRESHOLD`` on: here it is serial (a Python iteration of
#: the run program costs 10-40 us, about this much single-threaded work)
_MAX_SERIAL = 1 << 17



class _Buf:
    """A buffer of the generated function.  The text written names it by a token
    (``@k@``), replaced by ``name`` at assembly (``_Builder.names``): a step's result buffer
    may become the carried array's next buffer (``nxt{j}``) after the lines that write it."""
    __slots__ = ("name", "count", "carrier", "kind", "token")

    def __init__(self, b, name, count, carrier, kind):
        self.name, self.count, self.carrier, self.kind = name, count, carrier, kind
        self.token = f"@{len(b.bufs)}@"
        b.bufs.append(self)

    def __str__(self):
        return self.token


class _Scalar:
    """A scalar value; ``const``: a loop invariant (a constant, or computed from constants),
    defined in the prologue."""
    __slots__ = ("name", "type", "flushed", "const")

    def __init__(self, name, t, flushed=False, const=False):
        self.name, self.type, self.flushed, self.const = name, t, flushed, const


class _Arr:
    """An array value: ``var`` its element in ``group``'s loop (a lazy value), and/or ``buf``
    (at ``offset``, a scalar's name or None) holding its elements; or ``scalar`` (a scalar
    broadcast); or ``run`` = (buffer, inner, n): element i is ``buf[(i // inner) % n]``."""
    __slots__ = ("dims", "type", "flushed", "group", "var", "buf", "offset", "scalar", "run", "state", "dus", "inv")

    def __init__(self, dims, t, flushed=False):
        self.dims, self.type, self.flushed = tuple(dims), t, flushed
        self.group = self.var = self.buf = self.offset = self.scalar = self.run = None
        self.state = self.dus = None
        self.inv = False    # (a loop invariant in a buffer: the prologue's, or a state passed on)

    @property
    def count(self):
        return prod(self.dims)

    def alias(self, dims):
        a = _Arr(dims, self.type, self.flushed)
        a.group, a.var, a.buf, a.offset, a.scalar, a.run = self.group, self.var, self.buf, self.offset, self.scalar, \
            self.run
        a.inv = self.inv   # (not ``state``: only the carried value itself is updated in place)
        return a


class _Group:
    """Consecutive element-wise steps of one element count: one loop over ``i``."""
    __slots__ = ("count", "lines")

    def __init__(self, count):
        self.count, self.lines = count, []


class _Builder:
    def __init__(self):
        self.items = []          # the iteration's program: lines (str) and groups
        self.open = None         # the group the next element-wise step of its count joins
        self.n = 0
        self.scratch = []        # buffers allocated at the start of a call
        self.prologue = []       # lines run once a call (flushed copies of loop invariants)
        self.uses = {}           # id(value) -> (value, operand uses)
        self.work = 1
        self.serial = 0
        self.flushed_copies = {}  # id(an invariant's buffer) -> its flushed copy
        self.updates = []        # the values of the in-place dynamic-update-slices
        self.bufs = []           # token number -> buffer
        self.consts = []         # (parameter name, array) of the array constants

    def names(self, text):
        """``text`` with every buffer token replaced by the buffer's name."""
        return re.sub(r"@(\d+)@", lambda m: self.bufs[int(m.group(1))].name, text)

    def name(self, prefix="t"):
        self.n += 1
        return f"{prefix}{self.n}"

    def scratch_buf(self, count, t):
        from .emit import carrier
        b = _Buf(self, self.name("buf"), count, carrier(t), "scratch")
        self.scratch.append(b)
        return b

    def line(self, text):
        """An iteration-level statement after everything so far (closes the open group)."""
        self.items.append(text)
        self.open = None

    def scalar_line(self, text):
        """A statement of scalars only: before the open group (it reads nothing it computes)."""
        if self.open is not None:
            self.items.insert(self.items.index(self.open), text)
        else:
            self.items.append(text)

    def group(self, count):
        if self.open is None or self.open.count != count:
            self.open = _Group(count)
            self.items.append(self.open)
            self.moved(count)
        return self.open

    def moved(self, n):
        """Element work an iteration outside the products (serial here; the run program's
        loops share theirs among threads)."""
        self.work += n
        self.serial += n

    def use(self, v):
        self.uses[id(v)] = (v, self.used(v) + 1)   # (the value kept: its id is not reused)

    def used(self, v):
        return self.uses.get(id(v), (None, 0))[1]

    # -- element access -----------------------------------------------------------------
    def elem(self, v, group=None, index="i"):
        """The expression of ``v``'s element at ``index`` (in ``group``'s loop, where a lazy
        value of that group is its variable)."""
        if isinstance(v, _Scalar):
            return v.name
        if v.scalar is not None:
            return v.scalar
        if v.var is not None and v.group is group and index == "i":
            return v.var
        if v.run is not None:
            b, inner, n = v.run
            return f"{b}[({index} // {inner}) % {n}]" if inner > 1 else f"{b}[{index} % {n}]"
        self.materialize(v)
        return f"{v.buf}[{v.offset} + {index}]" if v.offset is not None else f"{v.buf}[{index}]"

    def materialize(self, v):
        """Give ``v`` a buffer (a lazy value: stored by its group's loop)."""
        if v.buf is not None:
            return
        if v.var is None:
            raise NotCompiled("a value with no elements")   # (not reached: scalars and runs read directly)
        b = self.scratch_buf(v.count, v.type)
        v.group.lines.append(f"{b}[i] = {v.var}")
        v.buf = b

    def contiguous(self, v):
        """``v`` in a buffer of its own row-major elements (a copy of a broadcast)."""
        if v.buf is None and (v.scalar is not None or v.run is not None):
            b = self.scratch_buf(v.count, v.type)
            g = self.group(v.count)
            g.lines.append(f"{b}[i] = {self.elem(v, g)}")
            v2 = v.alias(v.dims)
            v2.scalar = v2.run = None
            v2.buf = b
            self.open = None
            return v2
        if v.buf is None and v.group is self.open:
            self.open = None    # (its loop must run before the step that reads the buffer)
        self.materialize(v)
        return v


def _clamped_starts(b, starts, dims, sizes):
    """Scalar names of the clamped start indices (XLA: each into [0, dim - size])."""
    out = []
    for s, d, n in zip(starts, dims, sizes):
        if not isinstance(s, _Scalar):
            raise NotCompiled("a start index that is not a scalar")
        top = int(d) - int(n)
        name = b.name("o")
        if s.type.startswith("u"):   # (a huge unsigned start clamps to the top, not through a negative int64)
            b.scalar_line(f"{name} = np.int64(min(np.uint64({s.name}), np.uint64({top})))")
        else:
            b.scalar_line(f"{name} = min(max(np.int64({s.name}), 0), {top})")
        out.append(name)
    return out


def _block(dims, sizes):
    """Whether a slice of ``sizes`` of an array of ``dims`` is one contiguous run of its
    row-major elements (1s, then one partial dimension, then whole ones)."""
    k = 0
    while k < len(dims) and sizes[k] == 1:
        k += 1
    return all(sizes[d] == dims[d] for d in range(k + 1, len(dims)))


def _strides(dims):
    st, out = 1, []
    for d in reversed(dims):
        out.append(st)
        st *= int(d)
    return out[::-1]


def _copy_lines(dst, dst_off, src, src_off, sizes, dst_dims, src_dims, b):
    """Nested loops copying a box of ``sizes`` from ``src`` (at the flat offset expression
    ``src_off``) to ``dst`` (at ``dst_off``), each of the arrays' own dims."""
    ind = "    "
    lines, ds, ss = [], _strides(dst_dims), _strides(src_dims)
    idx = [b.name("d") for _ in sizes]
    for k, (n, v) in enumerate(zip(sizes, idx)):
        lines.append(ind * k + f"for {v} in range({int(n)}):")
    de = " + ".join([dst_off] + [f"{v} * {s}" for v, s in zip(idx, ds)])
    se = " + ".join([src_off] + [f"{v} * {s}" for v, s in zip(idx, ss)])
    lines.append(ind * len(sizes) + f"{dst}[{de}] = {src}[{se}]")
    return lines


def _flush_rule(inst):
    from ..ops import registry
    types = [o.shape.element_type if o.shape.is_array else None for o in inst.operands]
    return fpenv.rule_of(registry.get(inst.opcode), types, inst.shape.element_type if inst.shape.is_array else None,
                         inst.attrs)


def _inline(b, computation, args, depth=0):
    from .emit import can_emit, emit, finish, flushes_result, supported_type, _FTZ
    from .cpu.reduction import _literal
    if depth > 8:
        raise NotCompiled("calls nested too deep")
    if len(args) != len(computation.parameters):
        raise NotCompiled("parameter count")
    values = dict(zip(computation.parameters, args))
    flushing = fpenv.flushing()
    for inst in _live(computation):
        op = inst.opcode
        if _structural(inst, values, lambda c, args: _inline(b, c, args, depth + 1)):
            continue
        shape = inst.shape
        if not (shape.is_array and shape.is_static):
            raise NotCompiled(f"{inst.name} is {shape}")
        t = shape.element_type
        if not supported_type(t) or t in _BAD_TYPES:
            raise NotCompiled(f"{inst.name}: type {t}")
        ops = [values[o] for o in inst.operands]
        if any(isinstance(v, tuple) for v in ops):
            raise NotCompiled(f"{inst.name} reads a tuple")
        if any(o.shape.element_type in _BAD_TYPES for o in inst.operands):
            raise NotCompiled(f"{inst.name}: an operand's type")
        for v in ops:
            b.use(v)
        dims = tuple(int(d) for d in shape.dims)
        if op == "constant":
            if "literal" not in inst.attrs:
                raise NotCompiled(f"{inst.name}: a constant without its literal")
            if shape.rank != 0:
                values[inst] = _array_constant(b, inst, dims, t)
                continue
            name = b.name()
            b.prologue.append(f"{name} = {_literal(inst.attrs['literal'], t)}")   # (once a call)
            values[inst] = _Scalar(name, t, _not_denormal(inst.attrs["literal"], t), const=True)
            continue
        if op in _PASS + ("broadcast",) and len(ops) == 1 and ops[0].type == t:
            v = ops[0]
            if shape.rank == 0:
                if not isinstance(v, _Scalar):
                    raise NotCompiled(f"{inst.name}: an array to a scalar")
                values[inst] = v
                continue
            if isinstance(v, _Scalar):
                a = _Arr(dims, t, v.flushed)
                a.scalar, a.inv = v.name, v.const
                values[inst] = a
                continue
            if prod(dims) == v.count and (op != "broadcast" or list(inst.attrs["broadcast_dimensions"])
                                          == sorted(inst.attrs["broadcast_dimensions"])):
                values[inst] = v.alias(dims)
                continue
            if op == "broadcast":
                bd = [int(d) for d in inst.attrs["broadcast_dimensions"]]
                kept = [d for k, d in enumerate(bd) if v.dims[k] != 1]
                if kept and kept == list(range(kept[0], kept[-1] + 1)) and v.run is None and v.scalar is None:
                    src = b.contiguous(v)
                    if src.offset is not None:
                        raise NotCompiled(f"{inst.name}: a broadcast of a view")
                    a = _Arr(dims, t, v.flushed)
                    a.run = (src.buf if src.buf is not None else src, prod(dims[kept[-1] + 1:]), v.count)
                    a.inv = src.inv
                    values[inst] = a
                    continue
            raise NotCompiled(f"{inst.name}: {op} that moves elements")
        if op == "slice" and prod(dims) == 1 and len(ops) == 1 and ops[0].type == t and not isinstance(ops[0], _Scalar):
            v = b.contiguous(ops[0])   # (one element, read as a scalar)
            flat = 0
            for d, start in zip(v.dims, inst.attrs["start_indices"]):
                flat = flat * int(d) + int(start)
            name = b.name()
            at = f"{v.offset} + {flat}" if v.offset is not None else str(flat)
            b.line(f"{name} = {v.buf}[{at}]")
            values[inst] = _Scalar(name, t)
            continue
        if op == "slice" and len(ops) == 1 and isinstance(ops[0], _Arr) and ops[0].type == t:
            values[inst] = _static_slice(b, ops[0], [int(x) for x in inst.attrs["start_indices"]],
                                         [int(x) for x in inst.attrs.get("strides") or [1] * len(dims)], dims, t)
            continue
        if op in ("dynamic-slice", "dynamic-update-slice"):
            if flushing and (any(_flush_rule(inst)[0]) or _flush_rule(inst)[1]):
                raise NotCompiled(f"{inst.name}: a flushing {op}")
            values[inst] = (_dynamic_slice if op == "dynamic-slice" else _dynamic_update)(b, inst, ops, dims, t)
            continue
        if op == "concatenate" and ops and all(isinstance(v, _Arr) and v.type == t for v in ops):
            values[inst] = _concatenate(b, ops, int(inst.attrs["dimension"]), dims, t)
            continue
        if op == "transpose" and len(ops) == 1 and isinstance(ops[0], _Arr) and ops[0].type == t:
            values[inst] = _transpose(b, ops[0], [int(p) for p in inst.attrs["permutation"]], dims, t)
            continue
        if op == "dot":
            values[inst] = _dot(b, inst, ops, dims, t, flushing, _FTZ)
            continue
        if op == "reduce":
            values[inst] = _reduce(b, inst, ops, t, flushing, _FTZ)
            continue
        if not can_emit(inst):
            raise NotCompiled(f"{op} ({inst.name}) has no scalar emitter")
        arrays = [v for v in ops if isinstance(v, _Arr)]
        clean = flushes_result(inst)
        if not clean and op == "tanh" and t == "f32" and ops[0].flushed:
            # (its rule keeps a denormal operand's denormal, so it flushes nothing; but no normal
            # f32 has a denormal tanh_f32 -- checked over all of them -- so a flushed operand's
            # tanh is flushed: an RNN's carried h needs no flush before the next product)
            clean = True
        if not arrays:
            if shape.rank != 0 and prod(dims) != 1:
                raise NotCompiled(f"{inst.name}: an array of scalars")
            expr = finish(emit(inst, *[v.name for v in ops], flushed=[k for k, v in enumerate(ops) if v.flushed]), t)
            name = b.name()
            const = all(v.const for v in ops)
            if const:   # (of constants only: once a call)
                b.prologue.append(f"{name} = {expr}")
            else:
                b.scalar_line(f"{name} = {expr}")
            values[inst] = _Scalar(name, t, clean, const) if shape.rank == 0 else \
                _scalar_array(name, dims, t, clean, const)
            continue
        count = prod(dims)
        if shape.rank == 0 or any(v.count != count for v in arrays):
            raise NotCompiled(f"{inst.name}: operands of other element counts")
        if all(v.const if isinstance(v, _Scalar) else v.inv for v in ops):
            # of loop invariants only (JAX's ``0.01 * x.T`` in a gradient step): once a call,
            # into a buffer of the prologue -- the same values as an iteration's
            expr = finish(emit(inst, *[b.elem(v) for v in ops], flushed=[k for k, v in enumerate(ops) if v.flushed]), t)
            dst = _Buf(b, b.name("p"), count, None, "prologue")
            b.prologue += [f"{dst} = np.empty({count}, {_carrier_of(t)})", f"for i in range({count}):",
                           f"    {dst}[i] = {expr}"]
            a = _Arr(dims, t, clean)
            a.buf, a.inv = dst, True
            values[inst] = a
            continue
        g = b.group(count)
        args = [b.elem(v, g) for v in ops]
        g = b.group(count)   # (reading a broadcast or a lazy value of another loop may have closed it)
        expr = finish(emit(inst, *args, flushed=[k for k, v in enumerate(ops) if v.flushed]), t)
        name = b.name()
        g.lines.append(f"{name} = {expr}")
        a = _Arr(dims, t, clean)
        a.group, a.var = g, name
        values[inst] = a
    return values[computation.root]


def _array_constant(b, inst, dims, t):
    """An array constant (a closure's weights): a loop invariant passed to the function."""
    from .emit import carrier_dtype
    try:
        lit = np.asarray(inst.attrs["literal"])
        arr = np.ascontiguousarray(np.broadcast_to(lit, dims).reshape(-1).astype(carrier_dtype(t)))
    except (TypeError, ValueError) as e:
        raise NotCompiled(f"{inst.name}: its literal ({e})")
    if arr.size != prod(dims) or arr.nbytes > shapes.MAX_BYTES:
        raise NotCompiled(f"{inst.name}: its literal's size")
    name = b.name("k")
    a = _Arr(dims, t, False)   # (its readers flush it as their rules say)
    a.buf, a.inv = _Buf(b, name, prod(dims), None, "const"), True
    b.consts.append((name, arr))
    return a


def _reduce(b, inst, ops, t, flushing, ftz):
    """A reduce with one standard combiner over one block of dimensions (or only dimensions
    of size 1), of fewer than ``MOVE_PARALLEL_THRESHOLD`` elements: the reduce kernel's own
    serial fold (``cpu.reduction._arb_chunk`` / ``_init_each``, what its
    ``_reduce_standard`` runs in one thread there, with P = 1 part a row), called from the
    generated code -- so the same bits, NaN
    payloads and float sums' rounding included.  In ``"flush"`` mode as the kernel: a float
    sum checks its operand as it folds and, where it met a denormal, folds the flushed
    operand again; a product folds the flushed operand; maximum and minimum fold it as it
    is; the init is flushed and so is the result (the executor's rule for the kernel)."""
    from ..ops import registry
    from .numba_setup import MOVE_PARALLEL_THRESHOLD
    from .cpu import reduction as red
    from .emit import carrier
    from .numba_executor import CompiledRegion, _denormal_rule_of
    region = inst.attrs.get("computation")
    if len(ops) != 2 or not isinstance(ops[0], _Arr) or not isinstance(ops[1], _Scalar) or not inst.shape.is_array \
            or region is None or ops[0].type != t or ops[1].type != t:
        raise NotCompiled(f"{inst.name}: a reduce of one array")
    v, init = ops
    shim = CompiledRegion(region, None, None)   # (its combiner, as the kernel reads it; never called here)
    code = red._standard_code(shim, t)
    if code is None or t in red._NARROW and code not in (red.MAX, red.MIN):
        raise NotCompiled(f"{inst.name}: a reduce without a standard combiner the kernel folds")
    reduced = frozenset(int(d) for d in inst.attrs["dimensions"])
    groups = red._reduce_groups(tuple(v.dims), reduced)
    block = [k for k, (_, r) in enumerate(groups) if r]
    n = v.count
    if len(block) > 1 or n >= MOVE_PARALLEL_THRESHOLD:
        raise NotCompiled(f"{inst.name}: a reduce of several blocks, or one the kernel shares among threads")
    if block:
        i = block[0]
        A, R, B = prod(g for g, _ in groups[:i]), groups[i][0], prod(g for g, _ in groups[i + 1:])
    else:   # (only dimensions of size 1 reduced: each element combined with the init, ``_init_each``)
        A, R, B = n, 1, 1
    mask, result = _denormal_rule_of(registry.get("reduce"), inst, {"computation": shim}) if flushing \
        else ((), False)
    c = carrier(t)
    x = b.contiguous(v)
    at = x.offset or 0
    xv = f"{x.buf}[{at}:{at} + {n}]"
    if mask and mask[0] and code == red.MUL:   # (the kernel folds the flushed operand)
        f = b.scratch_buf(n, t)
        g = b.group(n)
        g.lines.append(f"{f}[i] = {ftz[t]}({b.elem(x, g)})")
        b.open = None
        xv = str(f)
    start = f"{ftz[t]}({init.name})" if len(mask) > 1 and mask[1] and not init.flushed and t in ftz else init.name
    out, den = b.scratch_buf(A * B, t), b.name("den")
    checked = bool(mask) and mask[0] and code == red.ADD and t in ("f32", "f64")
    tiny = f"{c}({fpenv.TINY[t]!r})" if checked else f"{c}(0)"
    if block:
        call = (f"_arb_chunk(I(0), I({A}), {{x}}, I({A}), I({R}), I({B}), I(1), I({code}), {c}({start}), "
                f"np.bool_(True), {out}, {{tiny}}, {den})")
    else:
        call = f"_init_each(I(0), I({n}), {{x}}, I({code}), {c}({start}), {out}, {{tiny}}, {den})"
    b.line(f"{den} = np.zeros({A}, np.bool_)")
    b.line(call.format(x=xv, tiny=tiny))
    if checked:   # (a denormal met: the flushed operand folded again)
        f = b.scratch_buf(n, t)
        b.line(f"if {den}.any():")
        b.line(f"    for i in range({n}):")
        b.line(f"        {f}[i] = {ftz[t]}({x.buf}[{at} + i])")
        b.line("    " + call.format(x=f, tiny=f"{c}(0)"))
    b.moved(n)
    rdims = tuple(int(d) for d in inst.shape.dims)
    if not rdims:
        name = b.name()
        b.line(f"{name} = {ftz[t]}({out}[0])" if result and t in ftz else f"{name} = {out}[0]")
        return _Scalar(name, t, bool(result))
    if result and t in ftz:
        g = b.group(A * B)
        g.lines.append(f"{out}[i] = {ftz[t]}({out}[i])")   # (the next element-wise steps join this loop)
    a = _Arr(rdims, t, bool(result))
    a.buf = out
    return a


def _scalar_array(name, dims, t, flushed, const=False):
    a = _Arr(dims, t, flushed)
    a.scalar, a.inv = name, const
    return a


def _dynamic_slice(b, inst, ops, dims, t):
    src = ops[0]
    if isinstance(src, _Scalar):
        raise NotCompiled(f"{inst.name}: a slice of a scalar")
    sizes = [int(s) for s in inst.attrs["slice_sizes"]]
    src = b.contiguous(src)
    starts = _clamped_starts(b, ops[1:], src.dims, sizes)
    st = _strides(src.dims)
    off = " + ".join(([src.offset] if src.offset is not None else []) + [f"{o} * {s}" for o, s in zip(starts, st)])
    if _block(src.dims, sizes):
        name = b.name("o")
        b.scalar_line(f"{name} = {off}")
        a = _Arr(dims, t, src.flushed)
        a.buf, a.offset = src.buf, name
        return a
    dst = b.scratch_buf(prod(dims), t)
    for ln in _copy_lines(dst, "0", src.buf, off, sizes, sizes, src.dims, b):
        b.line(ln)
    b.moved(prod(dims))
    a = _Arr(dims, t, src.flushed)
    a.buf = dst
    return a


def _static_slice(b, v, starts, strides, dims, t):
    """A slice: a view at an offset where it is one block of the operand (unit strides), else a
    copy (a loop invariant's once a call)."""
    v = b.contiguous(v)
    st = _strides(v.dims)
    off = sum(s * k for s, k in zip(starts, st))
    base = f"{v.offset} + {off}" if v.offset is not None else str(off)
    if all(k == 1 for k in strides) and _block(v.dims, dims):
        a = _Arr(dims, t, v.flushed)
        a.buf, a.offset, a.inv = v.buf, base, v.inv
        return a
    return _gathered(b, v, dims, t, base, [s * k for s, k in zip(st, strides)])


def _concatenate(b, ops, axis, dims, t):
    """A concatenation into a buffer: each operand a block of it where the dimensions before
    ``axis`` are 1s (a loop that an operand's own loop may compute into), else a copy."""
    dst = b.scratch_buf(prod(dims), t)
    st, at = _strides(dims), 0
    for v in ops:
        if all(d == 1 for d in dims[:axis]):
            g = b.group(v.count)
            g.lines.append(f"{dst}[{at * st[axis]} + i] = {b.elem(v, g)}")
        else:
            v = b.contiguous(v)
            src_off = v.offset if v.offset is not None else "0"
            for ln in _copy_lines(dst, str(at * st[axis]), v.buf, src_off, v.dims, dims, v.dims, b):
                b.line(ln)
            b.moved(v.count)
        at += v.dims[axis]
    b.open = None   # (the next steps read the buffer whole)
    a = _Arr(dims, t, all(v.flushed for v in ops))
    a.buf = dst
    return a


def _transpose(b, v, perm, dims, t):
    """A copy in the result's row-major order (the run program's transpose kernel makes one:
    a dot then reads it as it reads that); a loop invariant's once a call."""
    v = b.contiguous(v)
    src_st = _strides(v.dims)
    return _gathered(b, v, dims, t, v.offset or "0", [src_st[p] for p in perm])


def _gathered(b, v, dims, t, base, steps):
    """A copy of ``v``'s elements into a new buffer of ``dims`` (row-major): the result's
    element at index (d0, d1, ...) is ``v.buf[base + d0 * steps[0] + d1 * steps[1] ...]``;
    run each iteration, or once a call for a loop invariant (in the prologue)."""
    dst = _Buf(b, b.name("p"), prod(dims), None, "prologue") if v.inv else b.scratch_buf(prod(dims), t)
    idx = [b.name("d") for _ in dims]
    ind = "    "
    lines = [ind * k + f"for {x} in range({n}):" for k, (x, n) in enumerate(zip(idx, dims))]
    de = " + ".join(f"{x} * {st}" for x, st in zip(idx, _strides(dims))) or "0"
    se = " + ".join([str(base)] + [f"{x} * {st}" for x, st in zip(idx, steps)])
    lines.append(ind * len(dims) + f"{dst}[{de}] = {v.buf}[{se}]")
    if v.inv:
        b.prologue += [f"{dst} = np.empty({prod(dims)}, {_carrier_of(t)})"] + lines
    else:
        for ln in lines:
            b.line(ln)
        b.moved(prod(dims))
    a = _Arr(dims, t, v.flushed)
    a.buf, a.inv = dst, v.inv
    return a


def _carrier_of(t):
    from .emit import carrier
    return carrier(t)


def _dynamic_update(b, inst, ops, dims, t):
    x, u = ops[0], ops[1]
    if not isinstance(x, _Arr) or x.state is None or x.buf is None or x.offset is not None or x.dims != dims:
        raise NotCompiled(f"{inst.name}: an update of an array the loop does not carry")
    if isinstance(u, _Scalar):
        u = _scalar_array(u.name, (), u.type, u.flushed)
    sizes = [int(s) for s in inst.operands[1].shape.dims]
    if u.type != t:
        raise NotCompiled(f"{inst.name}: an update of another type")
    starts = _clamped_starts(b, ops[2:], dims, sizes)
    st = _strides(dims)
    off = " + ".join(f"{o} * {s}" for o, s in zip(starts, st)) or "0"
    if _block(dims, sizes):
        name = b.name("o")
        b.scalar_line(f"{name} = {off}")
        g = b.group(prod(sizes))   # (joins the loop that computes the update, if it is the open one)
        g.lines.append(f"{x.buf}[{name} + i] = {b.elem(u, g)}")
    else:
        u = b.contiguous(u)
        src_off = u.offset if u.offset is not None else "0"
        for ln in _copy_lines(x.buf, off, u.buf, src_off, sizes, dims, sizes, b):
            b.line(ln)
        b.moved(prod(sizes))
    # (the open loop stays open: only the root reads the updated array, ``_build`` checks)
    a = _Arr(dims, t, False)
    a.buf, a.dus = x.buf, x.state
    b.updates.append(a)
    return a


def _dot(b, inst, ops, dims, t, flushing, ftz):
    """A product as the executor's dot kernel computes it (``cpu.linalg._dot_prepare``): a
    matrix-vector product of at least ``_MATVEC_MIN`` multiply-adds by its own kernel
    (``_matvec_rows`` / ``_vecmat_cols``, called serially: each row's sum is one thread's, so
    the bits do not depend on the cut; x86 only, where the kernel reads denormals in the
    processor's DAZ/FTZ mode and flushes nothing itself); any other by the BLAS call
    ``np.matmul`` makes (``gemv`` where one side is a vector, else ``gemm``), its operands
    flushed before and its result after as the kernel's rule says."""
    from .cpu.linalg import _FTZ_DAZ, _MATVEC_PARALLEL, _SPLIT_WORK, _TINY, _X86, _matvec_side
    lhs, rhs = ops
    at = inst.attrs
    lc, rc = [int(d) for d in at.get("lhs_contracting_dimensions", ())], \
        [int(d) for d in at.get("rhs_contracting_dimensions", ())]
    if t not in ("f32", "f64") or any(o.shape.element_type != t for o in inst.operands) \
            or not isinstance(lhs, _Arr) or not isinstance(rhs, _Arr) or len(lhs.dims) not in (1, 2) \
            or len(rhs.dims) not in (1, 2) or at.get("lhs_batch_dimensions") or at.get("rhs_batch_dimensions") \
            or len(lc) != 1 or len(rc) != 1 or at.get("out_permutation") is not None:
        raise NotCompiled(f"{inst.name}: a dot that is not one product of two {t} matrices or vectors")
    ld, rd = lhs.dims, rhs.dims
    K = ld[lc[0]]
    M = prod(d for k, d in enumerate(ld) if k != lc[0])
    N = prod(d for k, d in enumerate(rd) if k != rc[0])
    if K < 1 or M < 1 or N < 1 or M * N * K >= _SPLIT_WORK or prod(dims) != M * N or (M == 1 and N == 1):
        raise NotCompiled(f"{inst.name}: a large product or a vector's dot (the kernel's own paths)")
    width = "32" if t == "f32" else "64"
    item = 4 if t == "f32" else 8
    out = b.scratch_buf(M * N, t)
    side = _matvec_side(ld, rd, lc, rc, (), (), t, t, t, None)
    if side is not None:
        if not _X86:
            raise NotCompiled(f"{inst.name}: the matrix-vector kernel flushes by selects here")
        if prod(ld) * prod(rd) // K >= _MATVEC_PARALLEL:
            raise NotCompiled(f"{inst.name}: a matrix-vector product the kernel shares among threads")
        side, by_columns = side
        m, v = (b.contiguous(lhs), b.contiguous(rhs)) if side == 0 else (b.contiguous(rhs), b.contiguous(lhs))
        mr, mc = m.dims
        b.open = None
        tiny = f"np.float{width}({float(_TINY[np.dtype(f'float{width}')])!r})"
        mx = _FTZ_DAZ if flushing else 0
        mat = f"{m.buf}[{m.offset or 0}:{m.offset or 0} + {mr * mc}].reshape(({mr}, {mc}))"
        vec = f"{v.buf}[{v.offset or 0}:{v.offset or 0} + {v.count}]"
        if by_columns:
            b.line(f"_vecmat_cols(I(0), I({mc}), {mat}, {vec}, {out}, {tiny}, np.bool_(False), I({mx}))")
        else:
            b.line(f"_matvec_rows(I(0), I({-(-mr // 4)}), {mat}, {vec}, {out}, {tiny}, np.bool_(False), I({mx}))")
        b.work += mr * mc + M * N
        res = _Arr(dims, t, bool(flushing))   # (FTZ: no denormal result)
        res.buf = out
        return res
    mask, result = _flush_rule(inst) if flushing else ((False, False), False)
    mats = []
    for v, m in zip((lhs, rhs), mask):
        if m and not v.flushed:
            if v.inv and v.buf is not None and v.offset is None:
                f = b.flushed_copies.get(id(v.buf), (None, None))[1]
                if f is None:   # (a loop invariant: flushed once a call)
                    f = _Buf(b, b.name("f"), v.count, None, "flushed")
                    b.flushed_copies[id(v.buf)] = (v.buf, f)   # (the buffer kept: its id is not reused)
                    b.prologue += [f"{f} = np.empty({v.count}, {_carrier_of(t)})", f"for i in range({v.count}):",
                                   f"    {f}[i] = {ftz[t]}({v.buf}[i])"]
                w = _Arr(v.dims, t, True)
                w.buf, w.inv = f, True
                v = w
            else:
                g = b.group(v.count)
                e = b.elem(v, g)
                g = b.group(v.count)
                f = b.scratch_buf(v.count, t)
                g.lines.append(f"{f}[i] = {ftz[t]}({e})")
                w = _Arr(v.dims, t, True)
                w.buf = f
                v = w
        mats.append(b.contiguous(v))
    b.open = None
    a, w = mats

    def ptr(v):
        base = f"np.int64({v.buf}.ctypes.data)"   # (uintp + int64 would be a float in Numba)
        return f"{base} + {v.offset} * {item}" if v.offset is not None else base
    if M == 1 or N == 1:   # gemv: NumPy's call for a matrix and a vector (or a [1, K] / [K, 1] one)
        if M == 1:   # y[N] = x[K] @ B: B stored [K, N] (contracted first: transposed) or [N, K]
            mat, vec, rows, cols, trans = w, a, rd[0], rd[1] if len(rd) == 2 else 1, rc[0] == 0
        else:        # y[M] = A @ x[K]: A stored [M, K] or [K, M] (contracted first: transposed)
            mat, vec, rows, cols, trans = a, w, ld[0], ld[1] if len(ld) == 2 else 1, lc[0] == 0
        b.line(f"gemv{width}(addr{width}v, {112 if trans else 111}, {rows}, {cols}, {ptr(mat)}, {cols}, {ptr(vec)}, "
               f"np.int64({out}.ctypes.data))")
    else:
        ta, tb = lc[0] == 0, rc[0] == 1
        if a.buf is w.buf and (a.offset or "0") == (w.offset or "0") and ta != tb:
            raise NotCompiled(f"{inst.name}: a product of a matrix and its own transpose (NumPy's syrk)")
        b.line(f"gemm{width}(addr{width}, {112 if ta else 111}, {112 if tb else 111}, {M}, {N}, {K}, {ptr(a)}, "
               f"{ld[1]}, {ptr(w)}, {rd[1]}, np.int64({out}.ctypes.data), {N})")
    b.work += M * N * K // 16 + M * N
    res = _Arr(dims, t, bool(result))
    res.buf = out
    if result:
        g = b.group(M * N)
        g.lines.append(f"{out}[i] = {ftz[t]}({out}[i])")   # (the next element-wise steps join this loop)
    return res


def _passed_on(body):
    """The state elements ``body``'s root tuple returns as it got them."""
    root, params = body.root, body.parameters
    if root.opcode != "tuple" or len(params) != 1:
        return set()
    return {j for j, o in enumerate(root.operands)
            if o.opcode == "get-tuple-element" and o.operands[0] is params[0] and o.attrs["index"] == j}


def _rendered(items):
    """The iteration's lines of ``items`` (statements, and groups as loops over ``i``)."""
    ind, lines = "    ", []
    for item in items:
        if isinstance(item, str):
            lines.append(ind * 2 + item)
        elif item.lines:
            lines.append(f"{ind * 2}for i in range({item.count}):")
            lines += [ind * 3 + x for x in item.lines]
    return lines


class CompiledScan:
    """A while instruction's loop as one function (see the module's doc); ``run(state)``:
    the loop's result, or None where the caller must run it the old way."""

    def __init__(self, inst):
        from .cpu.blas_call import gemm_addresses
        _state_of(self, inst)
        self.addresses = gemm_addresses()
        self._functions = {}
        self._source()

    def _source(self):
        """The variants of the loop's function for the environment in force: a list of
        (assumed, source text, slots, work per iteration, constants), the first to try first.

        In ``"flush"`` mode a carried array the body computes anew as a flushed value (a
        tanh's, an add's) is flushed from the second iteration on, so its readers need not
        flush it again -- but in the first it is the caller's.  So the first variant, for
        callers whose arrays ``assumed`` hold no denormal (``run`` checks), takes them as
        flushed; the second assumes nothing."""
        plain = self._build(frozenset())
        if not plain[5]:
            return [plain[:5]]
        fast = self._build(plain[5])
        return [fast[:5], plain[:5]] if plain[5] <= fast[5] else [plain[:5]]

    def _build(self, assumed):
        """(assumed, source text, slots, work per iteration, the array constants (name,
        array), the computed-anew arrays whose new value is flushed): slots per state element
        "s" a scalar, "r" passed on unchanged, "w" computed anew (two buffers in turn), "u"
        updated in place (the loop's own copy)."""
        inst = self.inst
        cond, body = inst.attrs["condition"], inst.attrs["body"]
        b = _Builder()
        passed = _passed_on(body)
        state = []
        for j, (t, dims) in enumerate(self.types):
            if len(dims) == 0:
                state.append(_Scalar(f"s{j}", t))
                continue
            a = _Arr(dims, t, j in assumed)
            a.buf, a.state = _Buf(b, f"cur{j}", prod(dims), None, "state"), j
            a.inv = j in passed
            state.append(a)
        c = _inline(b, cond, [tuple(state)])
        if not isinstance(c, _Scalar) or c.type != "pred":
            raise NotCompiled("the condition is not a scalar pred")
        cond_items, b.items, b.open = b.items, [], None
        root = _inline(b, body, [tuple(state)])
        if not isinstance(root, tuple) or len(root) != len(state):
            raise NotCompiled("the body's root is not the state's tuple")
        if b.serial > _MAX_SERIAL:
            raise NotCompiled(f"{b.serial} elements of element-wise work an iteration: the run program's threads")
        slots, tail, new_scalars, flushed_anew = [], [], [], set()
        for j, (v, (t, dims)) in enumerate(zip(root, self.types)):
            if isinstance(v, tuple) or v.type != t:
                raise NotCompiled("the body's result is not of the state's types")
            if not dims:
                if not isinstance(v, _Scalar):
                    raise NotCompiled("a scalar state element made an array")
                slots.append("s")
                new_scalars.append((f"s{j}", v.name))
                continue
            if isinstance(v, _Scalar):
                v = _scalar_array(v.name, dims, t, v.flushed)
            if v is state[j] and j in passed:
                slots.append("r")
                continue
            if v.dus == j:
                # in place: the carried array read by its update alone, the update by the root alone
                if b.used(state[j]) != 1 or b.used(v) != 0 or root.count(v) != 1 or any(r is state[j] for r in root):
                    raise NotCompiled("an updated array read by other steps")
                slots.append("u")
                continue
            if v.count != prod(dims):
                raise NotCompiled("an array of another size")
            slots.append("w")
            if v.flushed:
                flushed_anew.add(j)
            if v.var is not None:
                v.group.lines.append(f"nxt{j}[i] = {v.var}")
            elif v.buf is not None and v.buf.kind == "scratch" and v.offset is None \
                    and not any(v.buf is r.buf for k, r in enumerate(root) if k != j and isinstance(r, _Arr)):
                v.buf.name, v.buf.kind = f"nxt{j}", "state"   # (the step writes its result there)
            else:
                tail.append((j, v))
        if any(slots[a.dus] != "u" or root[a.dus] is not a for a in b.updates):
            # (an update in place of a carried array the loop does not return as that update:
            # it would write the caller's array, or one another step reads)
            raise NotCompiled("an array updated in place that is not the carried value's update")
        for j, v in tail:
            g = b.group(v.count)
            g.lines.append(f"nxt{j}[i] = {b.elem(v, g)}")
        # assembly
        ind = "    "
        params = ["limit", "addr32", "addr64", "addr32v", "addr64v"]
        for j, s in enumerate(slots):
            params += [f"sc{j}"] if s == "s" else [f"x{j}", f"a{j}", f"b{j}"] if s == "w" else [f"x{j}"]
        params += [name for name, _ in b.consts]
        lines = ["@njit(cache=True, nogil=True, error_model='numpy')", f"def scan({', '.join(params)}):"]
        for j, s in enumerate(slots):
            if s == "s":
                lines.append(f"{ind}s{j} = sc{j}[0]")
            elif s == "w":
                lines += [f"{ind}cur{j} = x{j}", f"{ind}nxt{j} = a{j}"]
            else:
                lines.append(f"{ind}cur{j} = x{j}")
        for buf in b.scratch:
            if buf.kind == "scratch":
                lines.append(f"{ind}{buf} = np.empty({buf.count}, {buf.carrier})")
        lines += [ind + x for x in b.prologue]
        lines += [f"{ind}k = 0", f"{ind}done = False", f"{ind}while k < limit:"]
        lines += _rendered(cond_items)
        lines += [f"{ind * 2}if not {c.name}:", f"{ind * 3}done = True", f"{ind * 3}break"]
        lines += _rendered(b.items)
        lines += _loop_end(slots, new_scalars)
        return (assumed, b.names("\n".join(lines) + "\n"), tuple(slots), b.work, tuple(b.consts),
                frozenset(flushed_anew))

    def _function(self, mode):
        """The variants (assumed, function, slots, work, constants) for ``mode``, or why not."""
        got = self._functions.get(mode)
        if got is None:
            from .cpu.fused import _HEADER
            from .jit_cache import load_source
            try:
                got = []
                for assumed, text, slots, work, consts in self._source():
                    header = _HEADER + _CALLS
                    module = load_source("whilescan", header + f"# while {self.inst.name}\n" + text)
                    got.append((assumed, module.scan, slots, work, consts))
            except NotCompiled as e:
                got = e
            self._functions[mode] = got
        return got

    def run(self, state):
        if progress._listeners or type(state) is not tuple or len(state) != len(self.types) \
                or self.addresses is None:
            return None
        got = self._function(fpenv._mode)
        if type(got) is not list:
            return None
        global _as_carrier, _blas_enter, _blas_leave, _flush_denormals
        if _as_carrier is None:
            from .numba_executor import _as_carrier
            from .cpu.linalg import _blas_enter, _blas_leave
            from .cpu.elementwise import flush_denormals as _flush_denormals
        for variant, (assumed, fn, slots, work, consts) in enumerate(got):
            if all(type(state[j]) is np.ndarray and _flush_denormals(state[j]) is state[j] for j in assumed):
                break   # (the caller's arrays hold no denormal: they are as flushed as the later iterations')
        limit_bytes = shapes.MAX_BYTES
        env = {}
        for j, v, s, dims, want, dt in zip(itertools.count(), state, slots, self.dims, self.carriers, self.dtypes):
            if type(v) is not np.ndarray or v.dtype != dt or v.shape != dims:
                return None
            if s == "s":
                sc = np.empty(1, want)
                sc[0] = v
                env[f"sc{j}"] = sc
                continue
            if (2 if s == "w" else 1) * v.nbytes > limit_bytes:
                return None
            if s == "u":   # (the loop's own copy, updated in place)
                env[f"x{j}"] = np.array(v.reshape(-1), dtype=want) if want == dt else _as_carrier(v, want).copy()
                continue
            x = v.reshape(-1) if want == dt and v.flags.c_contiguous else _as_carrier(v, want)
            env[f"x{j}"] = x
            if s == "w":
                env[f"a{j}"], env[f"b{j}"] = np.empty_like(x), np.empty_like(x)
        names = ["limit", "addr32", "addr64", "addr32v", "addr64v"]
        for j, s in enumerate(slots):
            names += [f"sc{j}"] if s == "s" else [f"x{j}", f"a{j}", f"b{j}"] if s == "w" else [f"x{j}"]
        for name, arr in consts:
            env[name] = arr
            names.append(name)
        limit = max(1, _CHUNK_WORK // work)
        env["limit"], (env["addr32"], env["addr64"], env["addr32v"], env["addr64v"]) = limit, self.addresses
        ran = k = 0
        _blas_enter()
        try:
            while True:
                try:
                    k, done = fn(*[env[p] for p in names])
                except Exception as e:
                    if _given_up(self, e, ran):
                        return None
                    raise
                ran += k
                if done:
                    break
                if k:
                    for j, s in enumerate(slots):
                        if s == "w":
                            _turn(env, j, k)
        finally:
            _blas_leave()
        if ran == 0:
            return state
        return _results(state, slots, env, k, self.dims, self.dtypes, {"u": "x"})


#: what the generated module imports beside ``cpu.fused._HEADER``
_CALLS = ("from xla_explorer.executors.cpu.blas_call import gemm32, gemm64, gemv32, gemv64\n"
          "from xla_explorer.executors.cpu.linalg import _matvec_rows, _vecmat_cols\n"
          "from xla_explorer.executors.cpu.reduction import _arb_chunk, _init_each\n"
          # (the kernels called with the types their Python callers pass -- int64, not Numba's
          # literal ints, bool -- so that no second specialisation of them is compiled)
          "I = np.int64\n")

_as_carrier = _blas_enter = _blas_leave = _flush_denormals = None   # (imported on first use)

_scans = weakref.WeakKeyDictionary()   # while instruction -> its CompiledScan or why not


def compiled_scan(inst, backend):
    """The CompiledScan of a while ``inst`` on ``backend``, or None where it does not qualify."""
    return _cached(_scans, CompiledScan, ENABLED, inst, backend)
