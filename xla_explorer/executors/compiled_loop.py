"""A ``while`` loop compiled whole into Numba functions: no Python runs per iteration.

A ``fori_loop`` whose body computes ``c * 0.99 + 1`` on f32[1024] costs the run program's
step about 8 us of Python an iteration (the condition's and the body's nested runs, the
body's call) for well under a microsecond of arithmetic.  Where the condition and the body
(with the calls and fusions they make, inlined) are made only of

* parameters, tuples, get-tuple-elements, scalar constants,
* element-wise ops with a scalar emitter (``emit.can_emit``), on scalars or on arrays of one
  element count (rank-0 operands read as scalars: select's predicate, clamp's bounds),
* broadcasts of scalars, and reshapes / bitcasts / copies / broadcasts that keep an
  array's elements in their row-major order (its flat index unchanged),
* slices of one element of a carried array, read as a scalar (threefry's rotation tables),

and the state is a flat tuple of arrays of types with a carrier (``emit``: no complex, no
sub-byte integers), the loop is generated as Numba functions, each op the statement its
emitter writes, every operand and result flushed as the op's rule says in ``"flush"`` mode
(``emit.emit``; an operand known flushed -- a flushing op's result, a constant that is no
denormal -- is not flushed again, which changes no value) and narrow floats rounded after
every op (``emit.finish``).  The values are the reference's, bit for bit, as the fused
loops' are.

The loop is cut in two (``CompiledLoop._source``).  Its *control* -- the condition, the
scalars, and the carried arrays of at most ``SMALL`` elements or with an element a scalar
reads -- runs iteration by iteration in ``control``, its arrays in two buffers written in
turn (the first iteration reads the caller's array, never written), and records the
scalars the other arrays read, one value an iteration.  Every other carried array (a
*leaf*) depends only on its own elements at the same flat index and on those scalars:
nothing mixes its elements.  So a ``leaf`` function per element count runs all of a call's
iterations on a block of ``BLOCK`` elements at a time, in cache and in place (an array read
and written at the same index vectorises; two buffers written in turn did not: 0.38 ->
0.04 ms for that ``fori_loop``), on several threads (``cpu.shape.in_threads``) for large
arrays.  Scalars are carried in one-element arrays, read at the start and written at the
end (no boxing of NaN payloads).  A call runs at most ``limit`` iterations (about 2^24
elements of work, at most ``_MAX_RECORDED`` recorded): between calls Python can deliver a
Ctrl-C.

The step falls back to the run program's nested runs (``numba_control``) for loops that do
not qualify, while a progress listener watches (it sees every nested run), for state
values not of the loop's static types, for buffers over the size limit, and for control
arrays of more than ``MAX_ELEMENTS`` elements (serial, iteration by iteration).
"""
import re
import weakref

import numpy as np

from .. import dtypes, fpenv, progress, shapes
from ..shapes import prod

#: (an A/B switch for benchmarks and tests) whether while steps try the compiled loop
ENABLED = True

#: control arrays (read by the loop's scalars) of more elements than this: the old way (their
#: fused loops' threads)
MAX_ELEMENTS = 1 << 16

#: the work of one call of the compiled function, in array elements (a chunk's iterations).
#: Each call is a pass of the leaves over their arrays: 2^22 cut 9 iterations of f32[1M]
#: into 3 passes over 8 MiB, 0.94 ms against 0.39 in one (jax 0.64; threefry's 5 rounds
#: of a jax.random.uniform [1M]: 3.5 -> 1.7 ms, jax 3.1).  A call of 2^24 element steps
#: takes milliseconds (0.2 s of library calls at most): Ctrl-C waits that long
_CHUNK_ELEMENTS = 1 << 24

#: arrays of at most this many elements are the loop's control (run iteration by iteration)
SMALL = 64

#: (an A/B switch for benchmarks and tests) leaves whose ops allow it run in the processor's
#: denormals-are-zero mode in ``"flush"`` mode, their lazily read operands not flushed
#: (``CompiledLoop._source``)
DAZ = True
_DAZ_BIT = 0x40   # (MXCSR's DAZ bit: ``cpu.linalg._DAZ``)
_DAZ_IMPORT = "from xla_explorer.executors.cpu.linalg import _mxcsr_or, _mxcsr_load\n"
_X86 = __import__("platform").machine().lower() in ("x86_64", "amd64", "x86", "i386", "i686")
_FLUSH_CALL = re.compile(r"\bc?ftz(?:_pos)?(?:32|64)\(")


class _Members:
    """A leaf's instructions as ``loopgen.daz_safe`` reads a group: ``members``."""
    __slots__ = ("members",)

    def __init__(self, members):
        self.members = members

#: a leaf function's block of elements, run through all of a call's iterations in cache
BLOCK = 256

#: the most iterations one call records the scalars of (its trajectory arrays' length)
_MAX_RECORDED = 1 << 16

#: leaf work (elements x iterations) from which a leaf runs on several threads
_PARALLEL_WORK = 1 << 20

_PASS = ("reshape", "bitcast", "copy")


class NotCompiled(Exception):
    """The loop holds something this module does not generate (the reason)."""


def _callee(inst):
    return inst.attrs["computation"] if inst.opcode == "call" else inst.attrs["calls"]


def _structural(inst, values, inline):
    """Whether ``inst`` is a parameter, tuple, get-tuple-element, call or fusion, its value
    (a tuple of values, one of a tuple's, ``inline(callee, operand values)``) put in
    ``values``."""
    op = inst.opcode
    if op == "parameter":
        return True
    if op == "tuple":
        values[inst] = tuple(values[o] for o in inst.operands)
    elif op == "get-tuple-element":
        src = values[inst.operands[0]]
        if not isinstance(src, tuple):
            raise NotCompiled("get-tuple-element of a non-tuple")
        values[inst] = src[inst.attrs["index"]]
    elif op in ("call", "fusion"):
        values[inst] = inline(_callee(inst), [values[o] for o in inst.operands])
    else:
        return False
    return True


def _live(computation):
    """The instructions the root depends on, in the computation's order."""
    seen = {computation.root}
    stack = [computation.root]
    while stack:
        for o in stack.pop().operands:
            if o not in seen:
                seen.add(o)
                stack.append(o)
    return [i for i in computation.instructions if i in seen]


class _Scalar:
    """A scalar value of the loop; ``flushed``: known free of denormals where the environment
    flushes (a flushing op's result, a constant that is not one), so its readers do not
    flush it again."""
    __slots__ = ("name", "type", "flushed")

    def __init__(self, name, t, flushed=False):
        self.name, self.type, self.flushed = name, t, flushed


class _Array:
    """An array value of the loop: ``expr`` is its element at the flat index ``i``."""
    __slots__ = ("count", "type", "expr", "state", "flushed")

    def __init__(self, count, t, expr, state=None, flushed=False):
        self.count, self.type, self.expr, self.state, self.flushed = count, t, expr, state, flushed


class _Generator:
    def __init__(self, daz_counts=()):
        self.scalar_lines = []      # the condition's or the body's scalar statements
        self.groups = {}            # element count -> the statements of its loop
        self.members = {}           # element count -> the instructions of its loop
        #: element counts whose loops run in DAZ mode (leaf functions: ``_source``): an
        #: operand their ops read lazily (``loopgen.reads_lazily``) is not flushed
        self.daz_counts = frozenset(daz_counts)
        self.n = 0
        self.types = {}             # scalar name -> its XLA type
        self.constants = {}         # scalar name -> its statement, for a constant's scalars
        self.reads = set()          # the state arrays scalars read an element of (a slice)

    def _name(self):
        self.n += 1
        return f"t{self.n}"

    def inline(self, computation, args, depth=0):
        """The value of ``computation``'s root (a _Scalar, an _Array or a tuple of them) on
        ``args`` (its parameters' values), its statements appended."""
        from .emit import can_emit, emit, finish, flushes_result, supported_type
        from .cpu.reduction import _literal
        if depth > 8:
            raise NotCompiled("calls nested too deep")
        if len(args) != len(computation.parameters):
            raise NotCompiled("parameter count")
        values = dict(zip(computation.parameters, args))
        for inst in _live(computation):
            op = inst.opcode
            if _structural(inst, values, lambda c, args: self.inline(c, args, depth + 1)):
                continue
            shape = inst.shape
            if not (shape.is_array and shape.is_static):
                raise NotCompiled(f"{inst.name} is {shape}")
            t = shape.element_type
            if not supported_type(t) or t in ("c64", "c128", "s4", "s2", "u4", "u2"):
                raise NotCompiled(f"{inst.name}: type {t}")
            ops = [values[o] for o in inst.operands]
            if any(isinstance(v, tuple) for v in ops):
                raise NotCompiled(f"{inst.name} reads a tuple")
            if op == "constant":
                if shape.rank != 0 or "literal" not in inst.attrs:
                    raise NotCompiled(f"{inst.name}: an array constant")
                name = self._name()
                line = f"{name} = {_literal(inst.attrs['literal'], t)}"
                self.scalar_lines.append(line)
                self.constants[name] = line
                self.types[name] = t
                values[inst] = _Scalar(name, t, _not_denormal(inst.attrs["literal"], t))
                continue
            if op == "slice" and prod(shape.dims) == 1 and len(ops) == 1 and ops[0].type == t:
                v = ops[0]   # one element of a carried array, at the start of the iteration
                if isinstance(v, _Scalar):
                    values[inst] = v
                    continue
                if v.state is None or v.expr != f"cur{v.state}[i]":
                    raise NotCompiled(f"{inst.name}: a slice of a computed array")
                odims = inst.operands[0].shape.dims
                flat = 0
                for d, start in zip(odims, inst.attrs["start_indices"]):
                    flat = flat * int(d) + int(start)
                name = self._name()
                self.scalar_lines.append(f"{name} = cur{v.state}[{flat}]")
                self.types[name] = t
                self.reads.add(v.state)
                values[inst] = _Scalar(name, t)
                continue
            if op in _PASS + ("broadcast",) and len(ops) == 1 and ops[0].type == t:
                v = ops[0]
                if shape.rank == 0:
                    if not isinstance(v, _Scalar):
                        raise NotCompiled(f"{inst.name}: an array to a scalar")
                    values[inst] = v
                    continue
                if isinstance(v, _Scalar):   # (a scalar broadcast, or reshaped to [1]: its value everywhere)
                    values[inst] = _Array(prod(shape.dims), t, v.name, flushed=v.flushed)
                    continue
                dims = inst.attrs.get("broadcast_dimensions") if op == "broadcast" else None
                if prod(shape.dims) == v.count and (op != "broadcast" or list(dims) == sorted(dims)):
                    values[inst] = _Array(v.count, t, v.expr, v.state, v.flushed)   # (the same flat elements)
                    continue
                raise NotCompiled(f"{inst.name}: {op} that moves elements")
            if not can_emit(inst):
                raise NotCompiled(f"{op} ({inst.name}) has no scalar emitter")
            if any(o.shape.element_type in ("c64", "c128") for o in inst.operands):
                raise NotCompiled(f"{inst.name}: a complex operand")
            arrays = [v for v in ops if isinstance(v, _Array)]
            flushed = [k for k, v in enumerate(ops) if v.flushed]
            if arrays and arrays[0].count in self.daz_counts:
                from .loopgen import reads_lazily
                flushed = sorted(set(flushed) | {k for k in range(len(ops)) if reads_lazily(inst, k)})
            expr = finish(emit(inst, *[v.name if isinstance(v, _Scalar) else v.expr for v in ops],
                               flushed=flushed), t)
            clean = flushes_result(inst)
            name = self._name()
            if not arrays:
                if shape.rank != 0 and prod(shape.dims) != 1:
                    raise NotCompiled(f"{inst.name}: an array of scalars")
                if shape.rank != 0:
                    self.groups.setdefault(1, []).append(f"{name} = {expr}")
                    values[inst] = _Array(1, t, name, flushed=clean)
                else:
                    self.scalar_lines.append(f"{name} = {expr}")
                    self.types[name] = t
                    values[inst] = _Scalar(name, t, clean)
                continue
            count = prod(shape.dims)
            if shape.rank == 0 or any(v.count != count for v in arrays):
                raise NotCompiled(f"{inst.name}: operands of other element counts")
            self.groups.setdefault(count, []).append(f"{name} = {expr}")
            self.members.setdefault(count, []).append(inst)
            values[inst] = _Array(count, t, name, flushed=clean)
        return values[computation.root]


def _loop_end(slots, new_scalars):
    """The generated lines that end an iteration of the ``while k < limit`` loop (the
    scalars' new values, each "w" slot's buffers turned: ``cur`` the one just written,
    ``nxt`` the one read -- the caller's ``x`` never written: ``b`` after the first), and
    the function after it (scalars written back, ``return k, done``)."""
    ind, ind2 = "    ", "    " * 2
    lines = []
    if new_scalars:
        lines.append(f"{ind2}{', '.join(a for a, _ in new_scalars)} = {', '.join(b for _, b in new_scalars)}")
    for j, s in enumerate(slots):
        if s == "w":
            lines += [f"{ind2}old{j} = cur{j}", f"{ind2}cur{j} = nxt{j}", f"{ind2}nxt{j} = b{j} if k == 0 else old{j}"]
    lines.append(f"{ind2}k += 1")
    lines += [f"{ind}sc{j}[0] = s{j}" for j, s in enumerate(slots) if s == "s"]
    return lines + [f"{ind}return k, done"]


def _turn(env, j, k):
    """After a call that ran k > 0 iterations: slot j's buffers for the next call (``x`` the
    value, ``a`` and ``b`` the two others; as ``_loop_end`` turns them)."""
    a, b = env[f"a{j}"], env[f"b{j}"]
    cur = a if k % 2 else b
    env[f"x{j}"], env[f"a{j}"], env[f"b{j}"] = cur, (b if cur is a else a), cur


def _last(env, j, k):
    """Slot j's value after the last call (k iterations): the buffer it wrote last."""
    return (env[f"a{j}"] if k % 2 else env[f"b{j}"]) if k else env[f"x{j}"]


def _given_up(loop, e, ran):
    """Whether exception ``e`` of the first call (``ran`` == 0) of ``loop``'s generated code
    is Numba not compiling it: then the mode's function is remembered as NotCompiled (the
    run program's steps from now on) and the caller returns None."""
    from .cpu.reduction import _NumbaError
    if isinstance(e, _NumbaError) and ran == 0:
        loop._functions[fpenv._mode] = NotCompiled(f"did not compile: {e}")
        return True
    return False


def _results(state, slots, env, k, dims, dts, own):
    """The loop's state after its last call (k iterations) from the buffers in ``env``: "r"
    slots the caller's values, "s" the scalars' cells, "w" the buffer written last, and
    the slots of ``own`` (slot -> env prefix) the loop's own arrays, each in its type."""
    from .numba_executor import _from_carrier
    out = []
    for j, v, s, d, dt in zip(range(len(state)), state, slots, dims, dts):
        if s == "r":
            out.append(v)
            continue
        arr = env[f"sc{j}"] if s == "s" else env[f"{own[s]}{j}"] if s in own else _last(env, j, k)
        arr = arr if arr.dtype == dt else _from_carrier(arr, dt)
        out.append(arr.reshape(d))
    return tuple(out)


def _not_denormal(literal, t):
    """Whether a scalar constant's value is not a float denormal (nothing to flush), for the
    types the loops flush (``loopgen._TINY``: their smallest normals)."""
    from .loopgen import _TINY
    tiny = _TINY.get(t)
    if tiny is None:
        return False
    try:
        v = abs(float(np.asarray(literal).reshape(-1)[0]))
    except (TypeError, ValueError, IndexError):
        return False
    return v == 0.0 or v >= tiny or v != v


def _state_types(shape):
    if not shape.is_tuple:
        raise NotCompiled("the state is not a tuple")
    out = []
    for s in shape.tuple_shapes:
        if not (s.is_array and s.is_static):
            raise NotCompiled(f"a state element is {s}")
        out.append((s.element_type, tuple(int(d) for d in s.dims)))
    return out


#: types no loop is generated for (no carrier with a scalar emitter)
_BAD_TYPES = ("c64", "c128", "s4", "s2", "u4", "u2")


def _state_of(loop, inst):
    """Set ``loop``'s while ``inst``, state ``types`` ((type, dims) per element), their
    ``carriers``, ``dims`` and NumPy ``dtypes``; NotCompiled for a type with no carrier."""
    from .emit import carrier_dtype, supported_type
    loop.inst = inst
    loop.types = _state_types(inst.shape)
    for t, _ in loop.types:
        if not supported_type(t) or t in _BAD_TYPES:
            raise NotCompiled(f"a state element of type {t}")
    loop.carriers = [carrier_dtype(t) for t, _ in loop.types]
    loop.dims = [d for _, d in loop.types]
    loop.dtypes = [np.dtype(dtypes.to_numpy(t)) for t, _ in loop.types]


class CompiledLoop:
    """A while instruction's loop as one function (see the module's doc); ``run(state)``:
    the loop's result, or None where the caller must run it the old way."""

    def __init__(self, inst):
        _state_of(self, inst)
        self._functions = {}   # mode -> (function, written slots) or an exception
        self._source()   # (raises NotCompiled for a loop that does not qualify)

    def _source(self):
        """(source text, layout) for the environment in force (``emit`` writes its flushes;
        ``_function`` keys the result by that mode).  ``layout.slots``: per state element "s"
        a scalar, "w" an array the control function writes (two buffers in turn), "y" an
        array a leaf function updates in place, "r" an array read in place.

        The loop is cut in two.  Its *control* -- the condition, the scalars, and the arrays
        scalars read an element of or of at most ``SMALL`` elements (threefry's rotation
        tables) -- runs iteration by iteration in ``control``, which records the scalars
        the other arrays read (their *trajectory*, one value an iteration).  Every other
        array's elements depend only on their own earlier values and those scalars (its ops
        keep the flat index: nothing mixes elements), so ``leaf`` functions run all the
        iterations for a block of elements at a time, in cache and in place (loops over an
        array read and written at the same index vectorise; two buffers written in turn
        did not), on several threads for large arrays: the same operations on the same
        values, so the same bits.

        In ``"flush"`` mode on x86 a leaf whose ops all compute the same values with the
        processor's denormals-are-zero bit set (``loopgen.daz_safe``: arithmetic, compares,
        selects, the f32 functions checked for it; no tanh, whose rule reads a denormal
        operand as itself) runs with it set (``DAZ``): its ops' operands read only by
        arithmetic are not flushed first (``_Generator.daz_counts``; each result is flushed
        as before), where that leaves a flush out."""
        text, layout, leaf_members = self._source_with(())
        if not (DAZ and _X86 and fpenv.flushing() and leaf_members):
            return text, layout
        from .loopgen import daz_safe
        counts = {n for n, members in leaf_members.items()
                  if daz_safe(_Members(members)) and not any(m.opcode == "tanh" for m in members)}
        if not counts:
            return text, layout
        daz_text, daz_layout, _ = self._source_with(counts)
        if len(_FLUSH_CALL.findall(daz_text)) >= len(_FLUSH_CALL.findall(text)):
            return text, layout
        return daz_text, daz_layout

    def _source_with(self, daz_counts):
        """``_source``'s (text, layout) with the leaves of ``daz_counts`` elements in DAZ
        mode, and the instructions of each leaf (element count -> its loop's members)."""
        from .emit import carrier_dtype
        inst = self.inst
        cond, body = inst.attrs["condition"], inst.attrs["body"]
        state = []
        for j, (t, dims) in enumerate(self.types):
            if len(dims) == 0:
                state.append(_Scalar(f"s{j}", t))
            else:
                state.append(_Array(prod(dims), t, f"cur{j}[i]", j))
        gc = _Generator()
        c = gc.inline(cond, [tuple(state)])
        if not isinstance(c, _Scalar) or c.type != "pred" or gc.groups:
            raise NotCompiled("the condition is not a scalar pred of scalars")
        gb = _Generator(daz_counts)
        gb.n = gc.n
        root = gb.inline(body, [tuple(state)])
        if not isinstance(root, tuple) or len(root) != len(state):
            raise NotCompiled("the body's root is not the state's tuple")
        counts = [prod(dims) if len(dims) else 0 for _, dims in self.types]
        control_counts = {n for n in counts if 0 < n <= SMALL} | {counts[j] for j in gc.reads | gb.reads}
        slots = []
        new_scalars = []
        writes = {}       # control: element count -> lines
        leaf_writes = {}  # leaf: element count -> (state index, expression)
        for j, (v, (t, dims)) in enumerate(zip(root, self.types)):
            if isinstance(v, tuple) or v.type != t:
                raise NotCompiled("the body's result is not of the state's types")
            if len(dims) == 0:
                if not isinstance(v, _Scalar):
                    raise NotCompiled("a scalar state element made an array")
                slots.append("s")
                new_scalars.append((f"s{j}", v.name))
                continue
            if isinstance(v, _Scalar):
                v = _Array(prod(dims), t, v.name)
            if v.count != prod(dims):
                raise NotCompiled("an array of another size")
            if v.state == j and v.expr == f"cur{j}[i]":
                slots.append("r")
                continue
            if v.count in control_counts:
                if v.count > MAX_ELEMENTS:
                    raise NotCompiled("a state array too large for one thread read by the loop's scalars")
                slots.append("w")
                writes.setdefault(v.count, []).append(f"nxt{j}[i] = {v.expr}")
            else:
                slots.append("y")
                leaf_writes.setdefault(v.count, []).append((j, v.expr))
        for count in gb.groups:
            if count not in writes and count not in leaf_writes:
                raise NotCompiled("an array value the loop does not carry")
        scalar_types = dict(gb.types)
        scalar_types.update({f"s{j}": t for j, (t, dims) in enumerate(self.types) if len(dims) == 0})
        ind, ind2, ind3, ind4 = "    ", "    " * 2, "    " * 3, "    " * 4
        # the leaf functions, one per element count: the scalars each reads
        leaves = []          # (function name, count, parameter names)
        leaf_text = []
        recorded = []        # the trajectory's scalars, in order
        for n_leaf, (count, outs) in enumerate(sorted(leaf_writes.items())):
            lines = gb.groups.get(count, []) + [f"w{j} = {e}" for j, e in outs]
            names = sorted({m for m in re.findall(r"\b[st]\d+\b", "\n".join(lines)) if m in scalar_types}
                           - {ln.split(" = ", 1)[0] for ln in lines}, key=lambda m: (m[0], int(m[1:])))
            consts = [gb.constants[m] for m in names if m in gb.constants]
            traced = [m for m in names if m not in gb.constants]
            recorded += [m for m in traced if m not in recorded]
            params = ["lo", "hi", "k"]
            for j, s in enumerate(slots):
                if counts[j] != count:
                    continue
                params += [f"x{j}", f"y{j}"] if s == "y" else [f"r{j}"] if s == "r" else []
            params += [f"tr_{m}" for m in traced]
            fname = f"leaf{n_leaf}"
            text = ["@njit(cache=True, nogil=True, error_model='numpy')", f"def {fname}({', '.join(params)}):"]
            daz = count in daz_counts
            if daz:   # (the mode is the calling thread's: set for the call, restored after it)
                text.append(f"{ind}mx_ = _mxcsr_or({_DAZ_BIT})")
            text += [ind + x for x in consts]
            text += [f"{ind}for b0 in range(lo, hi, {BLOCK}):", f"{ind2}b1 = min(b0 + {BLOCK}, hi)"]
            # (the block as views indexed from 0: Numba then knows i >= 0 and leaves out the
            # negative-index wrap-around, which kept the loops from vectorising: 10x slower)
            for j, s in enumerate(slots):
                if counts[j] == count and s in "ry":
                    text.append(f"{ind2}cur{j} = {'y' if s == 'y' else 'r'}{j}[b0:b1]")
            for j, _ in outs:
                text += [f"{ind2}src{j} = x{j}[b0:b1]",
                         f"{ind2}for i in range(cur{j}.shape[0]):", f"{ind3}cur{j}[i] = src{j}[i]"]
            text += [f"{ind2}for kk in range(k):"]
            text += [f"{ind3}{m} = tr_{m}[kk]" for m in traced]
            text += [f"{ind3}for i in range(cur{outs[0][0]}.shape[0]):"]
            text += [ind4 + x for x in lines] + [f"{ind4}cur{j}[i] = w{j}" for j, _ in outs]
            if daz:
                text.append(f"{ind}_mxcsr_load(mx_)")
            text.append(f"{ind}return 0")
            leaf_text.append("\n".join(text))
            leaves.append((fname, count, tuple(params[3:])))
        # the control function: the loop's iterations, the scalars the leaves read recorded
        params = ["limit"]
        for j, s in enumerate(slots):
            if s == "s":
                params.append(f"sc{j}")
            elif s == "r" and counts[j] in control_counts:
                params.append(f"x{j}")
            elif s == "w":
                params += [f"x{j}", f"a{j}", f"b{j}"]
        params += [f"tr_{m}" for m in recorded]
        lines = ["@njit(cache=True, nogil=True, error_model='numpy')",
                 f"def control({', '.join(params)}):"]
        for j, s in enumerate(slots):
            if s == "s":
                lines.append(f"{ind}s{j} = sc{j}[0]")
            elif s == "r" and counts[j] in control_counts:
                lines.append(f"{ind}cur{j} = x{j}")
            elif s == "w":
                lines += [f"{ind}cur{j} = x{j}", f"{ind}nxt{j} = a{j}"]
        lines += [f"{ind}k = 0", f"{ind}done = False", f"{ind}while k < limit:"]
        lines += [ind2 + x for x in gc.scalar_lines]
        lines += [f"{ind2}if not {c.name}:", f"{ind2}    done = True", f"{ind2}    break"]
        lines += [ind2 + x for x in gb.scalar_lines]
        lines += [f"{ind2}tr_{m}[k] = {m}" for m in recorded]
        for count, out in writes.items():
            first = out[0].split("[", 1)[0]
            lines.append(f"{ind2}for i in range({first}.shape[0]):")
            lines += [ind2 + ind + x for x in gb.groups.get(count, []) + out]
        lines += _loop_end(slots, new_scalars)
        text = "\n".join(lines) + "\n\n\n" + "\n\n\n".join(leaf_text) + "\n"
        if daz_counts:
            text = _DAZ_IMPORT + text
        layout = _Layout(tuple(slots), tuple(params[1:]), tuple(leaves),
                         tuple((m, carrier_dtype(scalar_types[m])) for m in recorded))
        return text, layout, {n: gb.members.get(n, []) for n in leaf_writes}

    def _function(self, mode):
        got = self._functions.get(mode)
        if got is None:
            from .cpu.fused import _HEADER
            from .jit_cache import load_source
            try:
                text, layout = self._source()
                module = load_source("whileloop", _HEADER + f"# while {self.inst.name}\n" + text)
                got = (module.control, [(getattr(module, f), n, p) for f, n, p in layout.leaves], layout)
            except NotCompiled as e:
                got = e
            self._functions[mode] = got
        return got

    def run(self, state):
        if progress._listeners or type(state) is not tuple or len(state) != len(self.types):
            return None
        got = self._function(fpenv._mode)
        if type(got) is not tuple:
            return None
        control, leaves, layout = got
        global _as_carrier, _in_threads
        if _in_threads is None:
            from .numba_executor import _as_carrier
            from .cpu.shape import in_threads as _in_threads
        limit_bytes = shapes.MAX_BYTES
        env = {}
        work = 1
        for j, v, s, dims, want, dt in zip(range(len(state)), state, layout.slots, self.dims, self.carriers,
                                           self.dtypes):
            if type(v) is not np.ndarray or v.dtype != dt or v.shape != dims:
                return None
            if s == "s":
                sc = np.empty(1, want)
                sc[0] = v
                env[f"sc{j}"] = sc
                continue
            # (the caller's array as it is where it is its own carrier: never written)
            x = v.reshape(-1) if want == dt and v.flags.c_contiguous else _as_carrier(v, want)
            env[f"x{j}"] = x
            if s == "r":
                env[f"r{j}"] = x
                continue
            if (2 if s == "w" else 1) * x.nbytes > limit_bytes:
                return None
            work += x.size
            if s == "w":
                env[f"a{j}"], env[f"b{j}"] = np.empty_like(x), np.empty_like(x)
            else:
                env[f"y{j}"] = np.empty_like(x)
        limit = max(1, _CHUNK_ELEMENTS // work)
        if layout.recorded:
            limit = min(limit, _MAX_RECORDED)
            for m, dt in layout.recorded:
                env[f"tr_{m}"] = np.empty(limit, dt)
        control_args = [env[p] for p in layout.control]
        ran = 0
        while True:
            try:
                k, done = control(limit, *control_args)
                if k:
                    for fn, count, params in leaves:
                        _in_threads(fn, count, count * k >= _PARALLEL_WORK and count >= 8 * BLOCK, k,
                                    *[env[p] for p in params], compiled=ran > 0)
            except Exception as e:
                if _given_up(self, e, ran):
                    return None
                raise
            ran += k
            if done:
                break
            if k:
                for j in layout.written:
                    if layout.slots[j] == "w":
                        _turn(env, j, k)
                    else:
                        env[f"x{j}"] = env[f"y{j}"]
                control_args = [env[p] for p in layout.control]
        if ran == 0:
            return state
        return _results(state, layout.slots, env, k, self.dims, self.dtypes, {"y": "y"})


_as_carrier = _in_threads = None   # (numba_executor's and cpu.shape's, imported on first use)


class _Layout:
    """What ``run`` passes: the slots, the control function's parameters, the leaf functions
    (name, element count, parameters after lo, hi, k) and the recorded scalars (name,
    carrier dtype)."""
    __slots__ = ("slots", "control", "leaves", "recorded", "written")

    def __init__(self, slots, control, leaves, recorded):
        self.slots, self.control, self.leaves, self.recorded = slots, control, leaves, recorded
        self.written = tuple(j for j, s in enumerate(slots) if s in "wy")


_loops = weakref.WeakKeyDictionary()   # while instruction -> its CompiledLoop or why not


def compiled_loop(inst, backend):
    """The CompiledLoop of a while ``inst`` on ``backend``, or None where it does not qualify."""
    return _cached(_loops, CompiledLoop, ENABLED, inst, backend)


def _cached(cache, cls, enabled, inst, backend):
    """``cls(inst)`` made once per while instruction (or why not, remembered in ``cache``):
    None where it does not qualify, is switched off, or the backend is not the fused CPU's."""
    if not enabled or backend.layer != "cpu" or not backend.fuse:
        return None
    cached = cache.get(inst)
    if cached is None:
        try:
            cached = cls(inst)
        except NotCompiled as e:
            cached = e
        cache[inst] = cached
    return None if isinstance(cached, Exception) else cached
