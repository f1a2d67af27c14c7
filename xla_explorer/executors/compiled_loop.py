"""A ``while`` loop compiled whole into one Numba function: no Python runs per iteration.

A ``fori_loop`` whose body computes ``c * 0.99 + 1`` on f32[1024] costs the run program's
step about 8 us of Python an iteration (the condition's and the body's nested runs, the
body's call) for well under a microsecond of arithmetic.  Where the condition and the body
(with the calls and fusions they make, inlined) are made only of

* parameters, tuples, get-tuple-elements, scalar constants,
* element-wise ops with a scalar emitter (``emit.can_emit``), on scalars or on arrays of one
  element count (rank-0 operands read as scalars: select's predicate, clamp's bounds),
* broadcasts of scalars, and reshapes / bitcasts / copies / broadcasts that keep an
  array's elements in their row-major order (its flat index unchanged),

and the state is a flat tuple of arrays of types with a carrier (``emit``: no complex, no
sub-byte integers), the whole loop is generated as one Numba function: the condition and
the scalar part of the body as local variables, the array part as one loop over the flat
index per element count, each op the statement its emitter writes, every operand and
result flushed as the op's rule says in ``"flush"`` mode (``emit.emit`` with nothing known
flushed: the reference's rule, op by op) and narrow floats rounded after every op
(``emit.finish``).  The values are the reference's, bit for bit, as the fused loops' are.

Carried arrays the body writes live in two buffers of their carrier type, written in turn
(the first iteration reads the caller's array, never written); the others are read in
place.  Scalars are carried in one-element arrays, read at the start and written at the
end (no boxing of NaN payloads).  The function runs at most ``limit`` iterations a call
(about 2^22 elements of work): between calls Python can deliver a Ctrl-C.

The step falls back to the run program's nested runs (``numba_control``) for loops that do
not qualify, while a progress listener watches (it sees every nested run), for state
values not of the loop's static types, for buffers over the size limit, and for arrays of
more than ``MAX_ELEMENTS`` elements (the fused loops run those on several threads; this
function is serial).
"""
import weakref

import numpy as np

from .. import dtypes, fpenv, progress, shapes
from ..shapes import prod

#: (an A/B switch for benchmarks and tests) whether while steps try the compiled loop
ENABLED = True

#: carried arrays of more elements than this run the old way (their fused loops' threads)
MAX_ELEMENTS = 1 << 16

#: the work of one call of the compiled function, in array elements (a chunk's iterations)
_CHUNK_ELEMENTS = 1 << 22

_PASS = ("reshape", "bitcast", "copy")


class NotCompiled(Exception):
    """The loop holds something this module does not generate (the reason)."""


def _callee(inst):
    return inst.attrs["computation"] if inst.opcode == "call" else inst.attrs["calls"]


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
    __slots__ = ("name", "type")

    def __init__(self, name, t):
        self.name, self.type = name, t


class _Array:
    """An array value of the loop: ``expr`` is its element at the flat index ``i``."""
    __slots__ = ("count", "type", "expr", "state")

    def __init__(self, count, t, expr, state=None):
        self.count, self.type, self.expr, self.state = count, t, expr, state


class _Generator:
    def __init__(self):
        self.scalar_lines = []      # the condition's or the body's scalar statements
        self.groups = {}            # element count -> the statements of its loop
        self.n = 0

    def _name(self):
        self.n += 1
        return f"t{self.n}"

    def inline(self, computation, args, depth=0):
        """The value of ``computation``'s root (a _Scalar, an _Array or a tuple of them) on
        ``args`` (its parameters' values), its statements appended."""
        from .emit import can_emit, emit, finish, supported_type
        from .cpu.reduction import _literal
        if depth > 8:
            raise NotCompiled("calls nested too deep")
        if len(args) != len(computation.parameters):
            raise NotCompiled("parameter count")
        values = dict(zip(computation.parameters, args))
        for inst in _live(computation):
            op = inst.opcode
            if op == "parameter":
                continue
            if op == "tuple":
                values[inst] = tuple(values[o] for o in inst.operands)
                continue
            if op == "get-tuple-element":
                src = values[inst.operands[0]]
                if not isinstance(src, tuple):
                    raise NotCompiled("get-tuple-element of a non-tuple")
                values[inst] = src[inst.attrs["index"]]
                continue
            if op in ("call", "fusion"):
                values[inst] = self.inline(_callee(inst), [values[o] for o in inst.operands], depth + 1)
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
                self.scalar_lines.append(f"{name} = {_literal(inst.attrs['literal'], t)}")
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
                    values[inst] = _Array(prod(shape.dims), t, v.name)
                    continue
                dims = inst.attrs.get("broadcast_dimensions") if op == "broadcast" else None
                if prod(shape.dims) == v.count and (op != "broadcast" or list(dims) == sorted(dims)):
                    values[inst] = _Array(v.count, t, v.expr, v.state)   # (the same flat elements)
                    continue
                raise NotCompiled(f"{inst.name}: {op} that moves elements")
            if not can_emit(inst):
                raise NotCompiled(f"{op} ({inst.name}) has no scalar emitter")
            if any(o.shape.element_type in ("c64", "c128") for o in inst.operands):
                raise NotCompiled(f"{inst.name}: a complex operand")
            arrays = [v for v in ops if isinstance(v, _Array)]
            expr = finish(emit(inst, *[v.name if isinstance(v, _Scalar) else v.expr for v in ops]), t)
            name = self._name()
            if not arrays:
                if shape.rank != 0 and prod(shape.dims) != 1:
                    raise NotCompiled(f"{inst.name}: an array of scalars")
                if shape.rank != 0:
                    self.groups.setdefault(1, []).append(f"{name} = {expr}")
                    values[inst] = _Array(1, t, name)
                else:
                    self.scalar_lines.append(f"{name} = {expr}")
                    values[inst] = _Scalar(name, t)
                continue
            count = prod(shape.dims)
            if shape.rank == 0 or any(v.count != count for v in arrays):
                raise NotCompiled(f"{inst.name}: operands of other element counts")
            self.groups.setdefault(count, []).append(f"{name} = {expr}")
            values[inst] = _Array(count, t, name)
        return values[computation.root]


def _state_types(shape):
    if not shape.is_tuple:
        raise NotCompiled("the state is not a tuple")
    out = []
    for s in shape.tuple_shapes:
        if not (s.is_array and s.is_static):
            raise NotCompiled(f"a state element is {s}")
        out.append((s.element_type, tuple(int(d) for d in s.dims)))
    return out


class CompiledLoop:
    """A while instruction's loop as one function (see the module's doc); ``run(state)``:
    the loop's result, or None where the caller must run it the old way."""

    def __init__(self, inst):
        from .emit import carrier_dtype, supported_type
        self.inst = inst
        self.types = _state_types(inst.shape)
        for t, dims in self.types:
            if not supported_type(t) or t in ("c64", "c128", "s4", "s2", "u4", "u2"):
                raise NotCompiled(f"a state element of type {t}")
            if len(dims) and prod(dims) > MAX_ELEMENTS:
                raise NotCompiled("a state array too large for one thread")
        self.carriers = [carrier_dtype(t) for t, _ in self.types]
        self.dtypes = [np.dtype(dtypes.to_numpy(t)) for t, _ in self.types]
        self._functions = {}   # mode -> (function, written slots) or an exception
        self._source()   # (raises NotCompiled for a loop that does not qualify)

    def _source(self):
        """(source text, slots: per state element "s" a scalar, "w" a written array, "r" an
        array read in place) for the environment in force (``emit`` writes its flushes;
        ``_function`` keys the result by that mode)."""
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
        gb = _Generator()
        gb.n = gc.n
        root = gb.inline(body, [tuple(state)])
        if not isinstance(root, tuple) or len(root) != len(state):
            raise NotCompiled("the body's root is not the state's tuple")
        slots = []
        new_scalars = []
        writes = {}   # element count -> lines
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
            slots.append("w")
            writes.setdefault(v.count, []).append(f"nxt{j}[i] = {v.expr}")
        for count in gb.groups:
            if count not in writes:
                raise NotCompiled("an array value the loop does not carry")
        args = ["limit"]
        for j, s in enumerate(slots):
            args += [f"sc{j}"] if s == "s" else [f"x{j}"] if s == "r" else [f"x{j}", f"a{j}", f"b{j}"]
        lines = ["@njit(cache=True, nogil=True, error_model='numpy')",
                 f"def loop({', '.join(args)}):"]
        ind = "    "
        for j, s in enumerate(slots):
            if s == "s":
                lines.append(f"{ind}s{j} = sc{j}[0]")
            elif s == "r":
                lines.append(f"{ind}cur{j} = x{j}")
            else:
                lines += [f"{ind}cur{j} = x{j}", f"{ind}nxt{j} = a{j}"]
        lines += [f"{ind}k = 0", f"{ind}done = False", f"{ind}while k < limit:"]
        ind2 = ind * 2
        lines += [ind2 + x for x in gc.scalar_lines]
        lines += [f"{ind2}if not {c.name}:", f"{ind2}    done = True", f"{ind2}    break"]
        lines += [ind2 + x for x in gb.scalar_lines]
        for count, out in writes.items():
            first = out[0].split("[", 1)[0]
            lines.append(f"{ind2}for i in range({first}.shape[0]):")
            lines += [ind2 + ind + x for x in gb.groups.get(count, []) + out]
        if new_scalars:
            lines.append(f"{ind2}{', '.join(a for a, _ in new_scalars)} = "
                         f"{', '.join(b for _, b in new_scalars)}{',' if len(new_scalars) == 1 else ''}")
        for j, s in enumerate(slots):
            if s == "w":
                lines += [f"{ind2}old{j} = cur{j}", f"{ind2}cur{j} = nxt{j}",
                          f"{ind2}nxt{j} = b{j} if k == 0 else old{j}"]
        lines.append(f"{ind2}k += 1")
        for j, s in enumerate(slots):
            if s == "s":
                lines.append(f"{ind}sc{j}[0] = s{j}")
        lines.append(f"{ind}return k, done")
        return "\n".join(lines) + "\n", tuple(slots)

    def _function(self, mode):
        got = self._functions.get(mode)
        if got is None:
            from .cpu.fused import _HEADER
            from .jit_cache import load_source
            try:
                text, slots = self._source()
                module = load_source("whileloop", _HEADER + f"# while {self.inst.name}\n" + text)
                got = (module.loop, slots)
            except NotCompiled as e:
                got = e
            self._functions[mode] = got
        return got

    def run(self, state):
        if progress._listeners or not isinstance(state, tuple) or len(state) != len(self.types):
            return None
        got = self._function(fpenv._mode)
        if isinstance(got, Exception):
            return None
        fn, slots = got
        from .numba_executor import _as_carrier, _from_carrier
        limit_bytes = shapes.MAX_BYTES
        args = []
        work = 1
        for v, s, (t, dims), want, dt in zip(state, slots, self.types, self.carriers, self.dtypes):
            if type(v) is not np.ndarray or v.dtype != dt or v.shape != dims:
                return None
            if s == "s":
                args.append(np.array(v, dtype=want).reshape(1))
                continue
            x = _as_carrier(v, want)
            if s == "r":
                args.append(x)
                continue
            if 2 * x.nbytes > limit_bytes:
                return None
            work += x.size
            args += [x, np.empty_like(x), np.empty_like(x)]
        limit = max(1, _CHUNK_ELEMENTS // work)
        ran = 0
        while True:
            try:
                k, done = fn(limit, *args)
            except Exception as e:   # (generated code Numba does not compile: the old way from now on)
                from .cpu.reduction import _NumbaError
                if isinstance(e, _NumbaError) and ran == 0:
                    self._functions[fpenv._mode] = NotCompiled(f"did not compile: {e}")
                    return None
                raise
            ran += k
            if k:
                p = 0
                for s in slots:
                    if s == "w":
                        x, a, b = args[p:p + 3]
                        cur = a if k % 2 else b
                        args[p:p + 3] = [cur, b if cur is a else a, cur]
                        p += 3
                    else:
                        p += 1
            if done:
                break
        if ran == 0:
            return state
        out = []
        p = 0
        for v, s, (t, dims), dt in zip(state, slots, self.types, self.dtypes):
            if s == "r":
                out.append(v)
                p += 1
                continue
            arr = args[p]
            p += 1 if s == "s" else 3
            arr = arr if arr.dtype == dt else _from_carrier(arr, dt)
            out.append(arr.reshape(dims))
        return tuple(out)


_loops = weakref.WeakKeyDictionary()   # while instruction -> its CompiledLoop or why not


def compiled_loop(inst, backend):
    """The CompiledLoop of a while ``inst`` on ``backend``, or None where it does not qualify."""
    if not ENABLED or backend.layer != "cpu" or not backend.fuse:
        return None
    cached = _loops.get(inst)
    if cached is None:
        try:
            cached = CompiledLoop(inst)
        except NotCompiled as e:
            cached = e
        _loops[inst] = cached
    return None if isinstance(cached, Exception) else cached
