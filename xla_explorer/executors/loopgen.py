"""Generate the source of a fused loop from a FusionGroup (shared by the CPU and CUDA code).

The loop body computes one result element ``i``: inputs are read at ``i`` (same shape),
at ``0`` (scalars) or through a broadcast's index map; every member is one statement
``t<k> = carrier(expression)``.  The source depends on the group's structure and types
only, never on sizes or constant values (those are run-time arguments), so one compiled
loop serves every size; in ``"flush"`` mode, whether a scalar constant is large enough to
leave a flush out (``LoopSource._never_denormal``) is part of the structure.
"""
import math
import re
from fractions import Fraction

import numpy as np

from .. import fpenv
from .emit import (carrier_dtype, denormal_blind, emit, emits_result_flush, finish, flush_functions,
                   flushes_result, squares_it, sum_before_blind)


#: (a switch for A/B measurements and tests) flushes of values that cannot be denormal left
#: out (``LoopSource._never_denormal``, ``LoopSource._sign_of_flushed``)
NEVER_DENORMAL = True


#: the smallest normal of each flushed real type (bf16's is f32's)
_TINY = {"f32": 2.0 ** -126, "bf16": 2.0 ** -126, "f64": 2.0 ** -1022}


# -- loops run with the processor's denormals-are-zero mode on ---------------------------------
#
# A flush is four vector instructions (``scalar_lib.ftz32``); an f32 GELU computes about 60
# an element, seven of them flushes.  With MXCSR's DAZ bit set (x86; FTZ left off: results
# are IEEE's, rounded to denormals as the reference rounds them) every arithmetic
# instruction reads a denormal operand as the zero of its sign that flushing it would make.
# So in a loop run in that mode (``LoopSource(daz=True)``, ``cpu.fused``) an operand needs no
# flush where the op reading it reads it only by such instructions (``reads_lazily``), and a
# value's own flush can be left out where every reader reads it so and it is not the stored
# result: it is *lazy*, maybe denormal, but seen flushed wherever it is read.  A loop takes
# the mode only when every member is an op whose code computes the same values in it
# (``daz_safe``): arithmetic, compares, selects, sign and bit ops, conversions but to pred,
# and the f32 functions below, each checked over all 2^32 f32 operands x to give in that mode
# the value ``ftz(f(x))`` it gives on ``ftz(x)`` without it (``scripts/daz_functions.py``).
# Only values computed per element are lazy (``LoopSource._varying``): what depends on
# constants and per-row values alone may be hoisted out of the loop, ahead of the mode's set.

#: (a switch for A/B measurements and the tests) CPU loops of ``daz_safe`` members run in the
#: DAZ mode with their lazy flushes left out
DAZ = True

#: ops whose code reads their f32 / f64 operands only by arithmetic instructions (IEEE's,
#: NumPy's sqrt): a denormal operand read in DAZ mode is the zero flushing it makes
_LAZY_ARITHMETIC = {"add", "subtract", "multiply", "divide", "sqrt", "rsqrt", "compare"}
#: f32 functions whose ``scalar_lib`` code, in DAZ mode, gives ftz(f(x)) = ftz(f(ftz(x))) for
#: every f32 x (all 2^32 checked, ``scripts/daz_functions.py``): they read lazily too
_LAZY_F32 = {"exponential", "tanh", "logistic", "log", "log-plus-one"}
#: ops whose code computes the same values in DAZ mode on the operands their rule gives them
#: (flushed where it flushes; the raw bits where it does not, which they then move, compare
#: to constants that no denormal is near or convert to integers: 0 either way): with
#: ``_LAZY_F32`` (f32 only: f64's are library calls) the members a DAZ loop may have.  Not
#: convert to pred (``x != 0``: a compare of raw bits), nor remainder, power, atan2, cbrt,
#: expm1, sine, cosine, tan, erf (library calls or raw dividends)
_DAZ_OPS = {"constant", "broadcast", "iota", "add", "subtract", "multiply", "divide", "sqrt", "rsqrt", "compare",
            "select", "maximum", "minimum", "clamp", "negate", "abs", "sign", "floor", "ceil", "round-nearest-even",
            "and", "or", "xor", "not", "shift-left", "shift-right-logical", "shift-right-arithmetic", "popcnt",
            "count-leading-zeros", "convert"}
#: integer ops (no float operand): the processor's float mode does not touch them
_DAZ_INT_OPS = {"remainder", "power"}
#: (bf16: computed in f32 and rounded on its bits, its operands read lazily by arithmetic as
#: f32's; its values are never lazy -- the rounding of a denormal sum may make the smallest
#: normal, which a reader would not see flushed -- nor passed on)
_DAZ_TYPES = {"pred", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64", "f32", "f64", "bf16"}


def daz_safe(group):
    """Whether every member of ``group`` computes the same values in DAZ mode (see above),
    so that its loop may run in it."""
    for m in group.members:
        types = [m.shape.element_type if m.shape.is_array else None] + \
                [o.shape.element_type if o.shape.is_array else None for o in m.operands]
        if not all(t in _DAZ_TYPES for t in types):
            return False
        floats = any(t in ("f32", "f64") for t in types)
        if m.opcode in _LAZY_F32:
            if not all(t == "f32" for t in types):
                return False
        elif m.opcode in _DAZ_INT_OPS:
            if floats:
                return False
        elif m.opcode not in _DAZ_OPS:
            return False
        elif m.opcode == "convert" and m.shape.element_type == "pred":
            return False
    return True


#: ops that pass an operand's value on (select, negate, abs) or pick one of their flushed
#: operands (max, min, clamp): their value is lazy when the values they pass are
_PASSING = {"select", "negate", "abs", "maximum", "minimum", "clamp"}


def reads_lazily(u, k):
    """Whether member ``u`` reads its operand ``k`` (f32, f64, bf16) only by instructions that, in
    DAZ mode, see a denormal as the zero its flush makes (a lazy value needs no flush for it)."""
    o = u.operands[k]
    if not (o.shape.is_array and u.shape.is_array) or o.shape.element_type not in ("f32", "f64", "bf16"):
        return False
    t = o.shape.element_type
    if u.opcode == "compare":
        return u.attrs.get("compare_type") != "TOTALORDER"
    if u.opcode in _LAZY_F32:
        return t == "f32" and u.shape.element_type == "f32"
    return u.opcode in _LAZY_ARITHMETIC and u.shape.element_type == t


class LoopSource:
    #: an element's own index in the expressions the loop reads (what varies per element)
    _ELEMENT = re.compile(r"\bi\b")

    def __init__(self, group, clean=(), daz=False):
        """``clean``: inputs known to hold no denormal (the executor's tracking, ``"flush"``
        mode): not flushed again where the loop reads them.  ``daz``: the loop runs in DAZ
        mode (the caller sets it, around the loop: see above), its lazy values unflushed;
        ``daz_broken`` says when a member cannot (its loop must not take the mode)."""
        self.group = group
        self.daz = bool(daz and DAZ and fpenv.flushing())
        self.daz_broken = False
        self._varying = set()   # members computed per element (``_ELEMENT``)
        self._clean = set(clean)
        self.inputs = list(group.inputs)          # runtime arrays, in argument order
        self.params = []                          # names of extra runtime arguments
        self.param_values = []                    # how to compute them: ("bcast", input k, member) / ("iota", member)
        self.body = []
        self._names = {}
        self._flushed = set()   # members whose value is already flushed to zero (fpenv)
        self._flushed_values = {}   # (flush function, expression) -> its flushed temporary
        self._least = {}   # member -> a lower bound of its nonzero finite |values| (``_never_denormal``)
        self._build()

    def _input_expr(self, operand, reader):
        k = self.inputs.index(operand)
        if operand.shape.rank == 0 and reader.shape.rank != 0:
            return f"in{k}[0]"                     # a scalar (broadcast or not): no index arithmetic
        if reader.opcode == "broadcast":
            p = f"bs{len(self.params)}"
            self.params.append(p)
            self.param_values.append(("bcast", operand, reader))
            return self.indexed_expr(f"in{k}", p)
        return self.same_expr(f"in{k}")

    # How an element is addressed (the CPU's row loops override these three)
    def indexed_expr(self, array, p):
        """``array`` read through a broadcast whose strides are the run-time argument ``p``."""
        return f"{array}[bcast_index(i, odims, {p})]"

    def same_expr(self, array):
        """``array`` of the group's own dimensions, at the element computed."""
        return f"{array}[i]"

    def iota_expr(self, p):
        return f"coordinate(i, {p}[0], {p}[1])"

    def _passing(self, readers):
        """The members that pass lazy values on (``_PASSING``): not the stored result, of an
        f32 / f64 value every reader of which reads it lazily or passes it on too, and whose
        values passed on are flushed or lazy wherever the loop computes them (``_settled``:
        their reference values hold no denormal; max, min and clamp flush theirs, by rule).
        Then a lazy operand gives a lazy value: the one it picks, seen flushed by its readers."""
        members = self.group.members
        settled = set()
        for m in members:
            if self._settled(m, settled):
                settled.add(m)
        passing = set()
        for u in reversed(members):   # (readers come after what they read)
            t = u.shape.element_type if u.shape.is_array else None
            if u.opcode not in _PASSING or u is self.group.root or t not in ("f32", "f64") or not readers.get(u):
                continue
            values = u.operands[1:] if u.opcode == "select" else u.operands
            if not all(o.shape.is_array and o.shape.element_type == t for o in values):
                continue
            if u.opcode in ("select", "negate", "abs") and not all(o in settled or o in self._clean for o in values):
                continue
            if all(v in passing or reads_lazily(v, k) for v in readers[u] for k, o in enumerate(v.operands)
                   if o is u):
                passing.add(u)
        return passing

    def _settled(self, m, settled):
        """Whether member ``m``'s value, as the loop computes it, is flushed or lazy (its
        reference value holds no denormal): its rule flushes its result, or it picks flushed
        operands, or it is a clean input's broadcast, or it passes settled values on."""
        if m.opcode == "broadcast":
            return m.operands[0] in self._clean
        if m.opcode == "constant":
            c = _scalar_constant(m)
            return c is not None and not 0 < abs(c) < _TINY.get(m.shape.element_type, 0.0)
        if emits_result_flush(m) or flushes_result(m):
            return True
        if m.opcode in ("select", "negate", "abs"):
            values = m.operands[1:] if m.opcode == "select" else m.operands
            return all(o in settled or o in self._clean for o in values)
        return False

    def _varies(self, o, expr):
        """Whether operand ``o`` (read as ``expr``) is computed per element."""
        return o in self._varying if o in self._names else bool(self._ELEMENT.search(expr))

    def _build(self):
        readers = {}   # member -> the members reading it
        for m in self.group.members:
            for o in m.operands:
                readers.setdefault(o, []).append(m)
        passing = self._passing(readers) if self.daz else set()
        for n, m in enumerate(self.group.members):
            t = m.shape.element_type
            lazy = False
            if m.opcode == "constant":
                # scalar constants are runtime arguments too: the code does not depend on them
                p = f"c{len(self.params)}"
                self.params.append(p)
                self.param_values.append(("constant", m, None))
                expr = p
            elif m.opcode == "broadcast":
                expr = self._input_expr(m.operands[0], m)
                if m.operands[0] in self._clean:   # its values are its clean operand's
                    self._flushed.add(m)
                if self._ELEMENT.search(expr):
                    self._varying.add(m)
            elif m.opcode == "iota":
                p = f"io{len(self.params)}"
                self.params.append(p)
                self.param_values.append(("iota", m, None))
                expr = self.iota_expr(p)
                if self._ELEMENT.search(expr):
                    self._varying.add(m)
            else:
                args = [self._names[o] if o in self._names else self._input_expr(o, m) for o in m.operands]
                if any(self._varies(o, a) for o, a in zip(m.operands, args)):
                    self._varying.add(m)
                flushed = [k for k, o in enumerate(m.operands) if o in self._flushed or o in self._clean]
                if self.daz:
                    if m.opcode == "tanh" and 0 not in flushed and _scalar_constant(m.operands[0]) is None:
                        # (its rule reads a denormal operand as itself, the tiny tanh it is:
                        # in DAZ mode the code would compute on a zero)
                        self.daz_broken = True
                    # operands its rule flushes, computed per element, that it reads lazily:
                    # DAZ flushes them
                    fns = flush_functions(m)
                    flushed = sorted(set(flushed) | {k for k, (o, a) in enumerate(zip(m.operands, args))
                                                     if fns[k] and reads_lazily(m, k) and self._varies(o, a)})
                    # a lazy value: per element, its flush emitted (its rule's), every reader
                    # reading it lazily; not the stored result
                    lazy = (m is not self.group.root and m in self._varying and t in ("f32", "f64")
                            and bool(readers.get(m)) and emits_result_flush(m)
                            and all(u in passing or reads_lazily(u, k) for u in readers[m]
                                    for k, o in enumerate(u.operands) if o is m))
                # a value only denormal-blind ops read (exp(x - max)) is left unflushed
                blind = (m is not self.group.root and bool(readers.get(m))
                         and all(denormal_blind(u) for u in readers[m]))
                # a value only squares read ((x - mean)^2): its flush, and an add's operands'
                # flushes, change no square (``squares_it``)
                squared = (m is not self.group.root and bool(readers.get(m))
                           and all(squares_it(u, m) for u in readers[m]))
                # a value only sums with a large constant read (an erf polynomial's p * z,
                # read by p * z + c): its flush changes no sum (``_big_sum_of``)
                summed = (m is not self.group.root and bool(readers.get(m))
                          and all(self._big_sum_of(u, m) for u in readers[m]))
                if (blind or squared) and sum_before_blind(m):
                    flushed = list(range(len(m.operands)))   # (its operands' flushes change no exp)
                # a sum with a large constant: no flush changes it (``_never_denormal``)
                sum_kept = self._never_denormal(m, flushed) == "sum"
                if sum_kept:
                    flushed = list(range(len(m.operands)))
                # a value read or made outside the flushing ops is flushed once, then reused
                for k, fn in enumerate(flush_functions(m)):
                    if fn and k not in flushed:
                        key = (fn, args[k])
                        if key not in self._flushed_values:
                            self._flushed_values[key] = f"f{len(self._flushed_values)}"
                            self.body.append(f"{self._flushed_values[key]} = {fn}({args[k]})")
                        args[k] = self._flushed_values[key]
                        flushed.append(k)
                kept = "sum" if sum_kept else self._never_denormal(m, flushed)
                if kept == "product":   # (factors at least the smallest normal: nothing to flush)
                    flushed = sorted(set(flushed) | {k for k, o in enumerate(m.operands)
                                                     if self._least_of(o, k, flushed) >= _TINY[m.shape.element_type]})
                expr = emit(m, *args, flushed=flushed, flush_result=not (blind or squared or kept or summed or lazy))
                if flushes_result(m) and not (blind or summed) or squared or kept or lazy or m in passing \
                        or self._sign_of_flushed(m, flushed):
                    self._flushed.add(m)   # (squared, lazy: as good as flushed for its readers)
            name = f"t{n}"
            self._names[m] = name
            self.body.append(f"{name} = {finish(expr, t)}")

    def _big_sum_of(self, u, m):
        """Whether ``u`` is m + c or c + m or m - c or c - m with a scalar constant |c| >=
        2^-100 (f32, bf16; 2^-900 f64) or not finite, in ``"flush"`` mode: ``_never_denormal``'s
        ``"sum"``, which flushes neither operand, as a denormal m + c rounds to c = 0 + c."""
        t = u.shape.element_type
        if (not NEVER_DENORMAL or not fpenv.flushing() or u.opcode not in ("add", "subtract") or t not in _TINY
                or not flushes_result(u) or len(u.operands) != 2 or list(u.operands).count(m) != 1
                or not all(o.shape.is_array and o.shape.element_type == t for o in u.operands)):
            return False
        c = _scalar_constant(u.operands[1] if u.operands[0] is m else u.operands[0])
        return c is not None and not abs(c) < (2.0 ** -900 if t == "f64" else 2.0 ** -100)

    def _sign_of_flushed(self, m, flushed):
        """Whether ``m`` is a real float negate or abs of a flushed value (``"flush"`` mode):
        its value is flushed too (a sign change makes no denormal), so its readers do not
        flush it again (an erf's abs(x) < 1 and 1 / abs(x))."""
        t = m.shape.element_type
        return (NEVER_DENORMAL and fpenv.flushing() and m.opcode in ("negate", "abs") and t in _TINY
                and m.operands[0].shape.element_type == t and 0 in flushed)

    def _least_of(self, o, k, flushed):
        """A lower bound of operand ``o``'s (number ``k``) nonzero finite |values| as the
        loop reads it (0: none known; inf: it has none, a zero, infinity or NaN constant)."""
        c = _scalar_constant(o)
        if c is not None:
            return math.inf if c == 0 or not math.isfinite(c) else (abs(c) if abs(c) >= _TINY[o.shape.element_type] else 0.0)
        if o in self._least:
            return self._least[o]
        return _TINY[o.shape.element_type] if (k in flushed or o in self._flushed or o in self._clean) else 0.0

    def _never_denormal(self, m, flushed):
        """Why ``m``'s value can hold no denormal in ``"flush"`` mode, so that its flush is
        left out (four vector instructions of a GELU's ~120 an element), or None; it notes
        in ``_least`` a lower bound L of its nonzero finite |values| (flushed values:
        2^-126 f32 and bf16, 2^-1022 f64).  ``"sum"``: an add / subtract of a scalar
        constant c with |c| >= 2^-100 (f32, bf16; 2^-900 f64) or not finite: a denormal
        other operand a is below half c's ulp (>= 2^-124), so a + c rounds to c = 0 + c,
        its flush changes nothing; when |a| >= |c| / 2 both are multiples of q = c's half
        ulp, so a small exact sum (a subnormal sum is exact) is a multiple of q, when
        |a| < |c| / 2 the sum is above |c| / 2: L = q >= 2^-124 (rounding keeps a sum at
        least a power of two q there).  ``"product"``: a multiply whose factors' bounds
        multiply to at least the smallest normal (a flushed value times a constant >= 1;
        GELU's 0.5 (1 + tanh(...)), whose sum is 0 or >= 2^-24): the exact |a b| >= La Lb,
        and rounding keeps it at least the smallest normal; L = La Lb less the rounding
        (1 - 2^-20 f32, 2^-6 bf16).
        ``"tanh"``: an f32 / bf16 tanh of a flushed operand: ``tanh_f32`` of a normal f32
        is normal (all of them checked, ``tests/test_fused_kept_flushes.py``), of +-0 a
        zero."""
        t = m.shape.element_type
        if not NEVER_DENORMAL or not fpenv.flushing() or t not in _TINY or not flushes_result(m) and m.opcode != "tanh":
            return None
        if not all(o.shape.is_array and o.shape.element_type == t for o in m.operands):
            return None
        if m.opcode == "tanh" and t in ("f32", "bf16"):
            return "tanh" if 0 in flushed else None
        if len(m.operands) != 2:
            return None
        consts = [_scalar_constant(o) for o in m.operands]
        if m.opcode in ("add", "subtract"):
            big = 2.0 ** -900 if t == "f64" else 2.0 ** -100
            for c in consts:
                if c is not None and not abs(c) < big:   # (NaN: not below)
                    half_ulp = float(np.spacing(np.float64(abs(c)) if t == "f64" else np.float32(abs(c)))) / 2
                    self._least[m] = half_ulp if math.isfinite(c) else math.inf
                    return "sum"
        if m.opcode == "multiply":
            la, lb = self._least_of(m.operands[0], 0, flushed), self._least_of(m.operands[1], 1, flushed)
            if math.inf in (la, lb) and 0.0 not in (la, lb):   # (0, inf, NaN times anything: no finite nonzero)
                self._least[m] = math.inf
                return "product"
            if math.isfinite(la) and math.isfinite(lb) and Fraction(la) * Fraction(lb) >= Fraction(_TINY[t]):   # (exact)
                bound = la * lb
                # (rounding down loses less than the format's relative spacing)
                self._least[m] = bound * (1 - {"bf16": 2.0 ** -6, "f32": 2.0 ** -20}.get(t, 2.0 ** -40))
                return "product"
        return None

    @property
    def result(self):
        return self._names[self.group.root]

    def arguments(self):
        return ["n", "out", *[f"in{k}" for k in range(len(self.inputs))], "odims", *self.params]

    def body_lines(self):
        return self.body + [f"out[i] = {self.result}"]

    def describe(self):
        return f"# fused: {self.group.signature()}"


def _scalar_constant(inst):
    """The value (a Python float) of a real scalar constant, or of a broadcast of one; None
    for anything else."""
    while inst.opcode == "broadcast" and inst.operands[0].shape.is_array:
        inst = inst.operands[0]
    if inst.opcode != "constant" or not inst.shape.is_array or inst.shape.rank != 0:
        return None
    if inst.shape.element_type not in ("f32", "bf16", "f64") or "literal" not in inst.attrs:
        return None
    return float(np.asarray(inst.attrs["literal"]).astype(np.float64)[()])


def input_dtype(inst):
    return carrier_dtype(inst.shape.element_type)


def broadcast_strides(reader, dims):
    """The operand strides (in elements) of a broadcast ``reader`` along each of the result
    dimensions ``dims``: 0 where the operand is broadcast or has size 1."""
    operand_dims = reader.operands[0].shape.dims
    strides = [0] * len(dims)
    stride = 1
    mapping = reader.attrs["broadcast_dimensions"]
    for d in range(len(operand_dims) - 1, -1, -1):
        strides[mapping[d]] = stride if operand_dims[d] != 1 else 0
        stride *= operand_dims[d]
    return strides


def iota_strides(inst):
    """An iota as the broadcast of 0, 1, 2, ... along its dimension: its strides."""
    strides = [0] * inst.shape.rank
    strides[inst.attrs["iota_dimension"]] = 1
    return strides
