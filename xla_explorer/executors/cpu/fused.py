"""Fused element-wise loops on the CPU: generated, compiled once per structure, cached.

The loop runs over *rows*: the group's dimensions are merged wherever every broadcast
(and iota) of the group reads them contiguously (``shape.merge_dims``), and the last
merged dimension is the row.  Per row, each broadcast operand's start is computed once
(``bcast_row``: none for a 2-D loop, one per middle dimension); inside the row a broadcast is either constant (a
softmax's row maximum) or contiguous (a bias along the features), which the generated
code knows, so the inner loop is plain loads and stores that LLVM vectorises.  (Nothing
else occurs: broadcast dimensions are increasing, so the result's last dimension of
size > 1 reads the operand's last dimension of size > 1, or none.)
(The flat loop this replaces computed every broadcast index with a division per
dimension per element: 20 ns an element on a softmax, 25x the loop's own work.)

Work is cut into blocks of rows (or of one long row), run in parallel with ``prange``
from ``PARALLEL_THRESHOLD`` elements on when the loop calls a transcendental function or
computes complex numbers, from ``MOVE_PARALLEL_THRESHOLD`` on otherwise (a few cycles an
element: a thread launch pays only on longer loops).

A loop converting f16 (reading f16 operands or storing an f16 result, on their bits) runs
each ``F16_BLOCK`` elements of a row by a fast pass first: the bare F16C conversions,
which equal the exact ones (``cpu.half``) but for NaNs, and a test whether any value
converted was a NaN; a block where one was is computed again by the exact body.  Every
other value goes through the very instructions of the exact conversions (vcvtph2ps /
vcvtps2ph: the same rounding, the same denormals in whatever mode the processor is;
``fpenv``'s flushes are the body's own code, the same in both passes), so the bits are
the exact loop's.  f16 multiply, 64K elements in cache: 11.8 -> 4.6 us (f32: 4.4).
(bf16 has none: its widening is a shift, and the NaN select of its rounding costs about
what the NaN test would: 5.7 -> 4.9 us per 64K in cache, within the noise at 4M.)

On x86, in ``"flush"`` mode, a loop whose every member computes the same values with the
processor's denormals-are-zero bit set (``loopgen.daz_safe``) and that leaves a flush out
in it runs in that mode (``_source``): the bit set in the calling thread around the serial
loop, and at the start of each of at most ``DAZ_CHUNKS`` chunks of work items of the
``prange`` loop (the mode is a thread's), the old MXCSR put back after.  Values computed
per element that only DAZ-reading code reads are not flushed (``loopgen``'s lazy values):
the tanh GELU of 4M, 6.16 -> 4.10 ms.
"""
import re

import numpy as np

from ... import fpenv
from ..jit_cache import load_source
from ..loopgen import LoopSource, broadcast_strides, daz_safe, iota_strides
from ..numba_setup import MOVE_PARALLEL_THRESHOLD, numba
from .linalg import _DAZ, _X86
from .shape import merge_dims, threads

#: from this many elements on a loop calling a transcendental function (or computing complex
#: numbers) runs its ``prange`` version.  Not numba_setup's 1 << 15: a vectorised f32 exp
#: costs about 0.4-0.7 ns an element, so a 64K-element loop (a 256 KiB softmax) does
#: 25-45 us of work, less than two threads save after their launch and the next (serial)
#: step's reads of what the other core wrote.  Whole f32 softmax, numba/JAX interleaved in
#: one process, load 3-4, 2 threads, median of 300 (prange / serial exp loop): 256x256
#: rows 250 / 184 us, columns 277 / 193; 512x256 rows 365 / 274; 1024x256 rows 814 / 608;
#: 512x512 columns 653 / 501 (JAX 220-730).  (Element-wise loops: the same bits either way.)
PARALLEL_THRESHOLD = 1 << 18

_HEADER = """import math
import cmath
import numpy as np
from numba import njit, prange
from xla_explorer.executors.scalar_lib import *
from xla_explorer.executors.cpu.bits import shift_left, shift_right_logical, shift_right_arithmetic
from xla_explorer.executors.cpu.half import f16_bits_to_f32, f32_to_f16_bits
"""
#: what a loop with a fast pass (``RowLoopSource.fast_pass``) adds to ``_HEADER``
_FAST_HEADER = """from xla_explorer.executors.cpu.half import f16_bits_to_f32_hw, f32_to_f16_bits_hw, f16_nan
F16_BLOCK = {block}
"""


def _indexed_members(group):
    """(member, strides over the group's dimensions) of every broadcast read through its
    index map (all but those of a scalar, read as ``in[0]``: ``LoopSource._input_expr``)
    and every iota of the group, in member order (the order of their parameters)."""
    dims = group.root.shape.dims
    out = []
    for m in group.members:
        if m.opcode == "broadcast" and not (m.operands[0].shape.rank == 0 and m.shape.rank != 0):
            out.append((m, broadcast_strides(m, dims)))
        elif m.opcode == "iota":
            out.append((m, iota_strides(m)))
    return out


class RowLoopSource(LoopSource):
    """The loop body of ``LoopSource`` with element ``j`` of a row: inputs of the group's
    dimensions and contiguous broadcasts are slices of the row, constant broadcasts one
    value per row (set up in ``prelude``)."""

    _ELEMENT = re.compile(r"\bj\b")

    def __init__(self, group, clean=(), narrow=False, daz=False):
        #: ``narrow``: bf16 inputs arrive as their bits (uint16 arrays) and a bf16 result is
        #: stored as bits, converted in the loop (``BF16_BITS``), not by passes around it
        self.narrow = narrow
        dims = group.root.shape.dims
        indexed = _indexed_members(group)
        self.mdims, merged = merge_dims(dims, *[s for _, s in indexed]) if indexed else (merge_dims(dims)[0], [])
        # the step along the row of each broadcast / iota (0: constant in the row)
        self._steps = [st[-1] for st in merged]
        self._merged = merged
        self.prelude = []
        self._sliced = {}
        self._k = 0
        #: the f16 bits the loop reads (expressions): what its fast pass checks for NaNs
        self._f16_reads = []
        super().__init__(group, clean, daz)

    def _input_expr(self, operand, reader):
        expr = super()._input_expr(operand, reader)
        if self.narrow and operand.shape.element_type == "f16" and expr not in self._f16_reads:
            self._f16_reads.append(expr)
        if self.narrow and operand.shape.element_type in NARROW_BITS:
            expr = f"{NARROW_BITS[operand.shape.element_type][0]}({expr})"
        if operand.shape.rank == 0 and reader.shape.rank != 0:
            # a scalar (a constant of the erf or tanh polynomials): read once per row, not
            # per element (LLVM does not hoist it: the stores to ``out`` might alias it)
            name = f"v_in{self.inputs.index(operand)}"
            if not any(line.startswith(f"{name} = ") for line in self.prelude):
                self.prelude.append(f"{name} = {expr}")
            return name
        return expr

    @property
    def fast_pass(self):
        """Whether the loop has a fast pass (``F16_BLOCK``): it converts f16 (reads f16
        bits or stores an f16 result) and the exact conversions are F16C's."""
        from . import half
        stores = self.narrow and self.group.root.shape.element_type == "f16"
        return bool(self._f16_reads or stores) and half.f16_bits_to_f32 is half.f16_bits_to_f32_f16c

    @property
    def stored(self):
        """The expression stored into ``out``: the result, as bf16 bits where narrow."""
        if self.narrow and self.group.root.shape.element_type in NARROW_BITS:
            return f"{NARROW_BITS[self.group.root.shape.element_type][1]}({self.result})"
        return self.result

    def _body(self):
        """The loop body; in a narrow loop storing f16 bits, the result's own rounding to f16
        (``emit.finish``'s ``round_f16``) left out: the store rounds the same way
        (``f32_to_f16_bits(round_f16(x))`` equals ``f32_to_f16_bits(x)`` for every one of the
        2^32 f32, checked offline; a NaN is x itself either way), so rounding twice is
        work for nothing (about a fifth of an f16 multiply's loop)."""
        body = self.body
        if self.narrow and self.group.root.shape.element_type == "f16" and body:
            head = f"{self.result} = np.float32(round_f16(np.float32("
            if body[-1].startswith(head) and body[-1].endswith(")))"):
                body = body[:-1] + [f"{self.result} = np.float32({body[-1][len(head):-3]})"]
        return body

    def _step(self):
        step = self._steps[self._k]
        self._k += 1
        return step

    def indexed_expr(self, array, p):
        step = self._step()
        self.prelude.append(f"b_{p} = bcast_row(row, odims, {p})")
        if step == 0:
            self.prelude.append(f"v_{p} = {array}[b_{p}]")
            return f"v_{p}"
        assert step == 1, "a broadcast is constant or contiguous along the row"
        self.prelude.append(f"v_{p} = {array}[b_{p} + j0:b_{p} + j1]")
        return f"v_{p}[j]"

    def same_expr(self, array):
        if array not in self._sliced:
            self._sliced[array] = f"s_{array}"
            self.prelude.append(f"s_{array} = {array}[i0 + j0:i0 + j1]")
        return f"{self._sliced[array]}[j]"

    def iota_expr(self, p):
        step = self._step()
        self.prelude.append(f"b_{p} = bcast_row(row, odims, {p})")
        if step == 0:
            return f"b_{p}"
        assert step == 1, "an iota is constant or contiguous along the row"
        return f"(b_{p} + j0 + j)"

    def arguments(self):
        fast = ["fast"] if self.fast_pass else []
        return ["n", "out", *[f"in{k}" for k in range(len(self.inputs))], "odims", "inner", "blk", *self.params,
                *fast]

    def _fast_lines(self):
        """The fast pass's body over element j, storing into ``o_[j]``: ``_body`` with the bare
        F16C conversions (``half.f16_bits_to_f32_hw`` / ``f32_to_f16_bits_hw``), and ``bad``
        set where a value converted (an f16 read, the f16 stored) is a NaN: only there do
        they differ from the exact ones (a NaN's payload), so a block without one has the
        exact pass's bits; one with one is computed again by it."""
        read = re.compile(r"\bf16_bits_to_f32\(")
        lines = [read.sub("f16_bits_to_f32_hw(", line) for line in self._body()]
        checks = [f"f16_nan({e})" for e in self._f16_reads]
        if self.group.root.shape.element_type == "f16":
            checks.append(f"({self.result} != {self.result})")
            lines.append(f"o_[j] = f32_to_f16_bits_hw({self.result})")
        else:
            lines.append(f"o_[j] = {self.stored}")
        return lines + [f"bad |= {' | '.join(checks)}"]

    def _row_lines(self):
        """The loop over the elements of a row's block [j0, j1) (``o_`` and the prelude's
        slices start at j0): the body; with a fast pass, sub-blocks of ``F16_BLOCK`` elements
        (their own ``o_`` and slices: indices from 0, the loops vectorise), each by the fast
        pass first (``fast``: on, the switch ``BARE_F16``) and again by the exact body if
        that saw a NaN.  (The output never overlaps an input, a fresh buffer: a sub-block
        computed twice reads the same inputs.)"""
        exact = self._body() + [f"o_[j] = {self.stored}"]
        head = ["o_ = out[i0 + j0:i0 + j1]"] + self.prelude
        if not self.fast_pass:
            return head + ["for j in range(j1 - j0):"] + ["    " + line for line in exact]
        return (["jb0, jb1 = j0, j1",
                 "for j0 in range(jb0, jb1, F16_BLOCK):",
                 "    j1 = min(jb1, j0 + F16_BLOCK)"] + ["    " + line for line in head] +
                ["    bad = not fast",
                 "    if fast:",
                 "        for j in range(j1 - j0):"] + ["            " + line for line in self._fast_lines()] +
                ["    if bad:",
                 "        for j in range(j1 - j0):"] + ["            " + line for line in exact])

    def loop_text(self, name, parallel):
        rng = "prange" if parallel else "range"
        work = ["row, j0, j1 = w, 0, inner",   # whole rows: no division per row
                "if nblk > 1:",
                "    row = w // nblk",
                "    j0 = (w - row * nblk) * blk",
                "    j1 = min(inner, j0 + blk)",
                "i0 = row * inner"] + self._row_lines()
        lines = [f"@njit(cache=True, nogil=True, parallel={parallel}, error_model='numpy')",
                 f"def {name}({', '.join(self.arguments())}):",
                 "    nblk = (inner + blk - 1) // blk"]
        if not self.daz:
            lines += [f"    for w in {rng}((n // inner) * nblk):"] + ["        " + line for line in work]
        elif parallel:
            # (the mode is a thread's: set in each chunk of work items, at most DAZ_CHUNKS of them, so
            # that rows of a few elements do not pay for it each)
            lines += ["    nw_ = (n // inner) * nblk",
                      f"    nch_ = min(nw_, {DAZ_CHUNKS})",
                      "    for ch_ in prange(nch_):",
                      f"        mx_ = _mxcsr_or({_DAZ})",
                      "        for w in range(ch_ * nw_ // nch_, (ch_ + 1) * nw_ // nch_):"]
            lines += ["            " + line for line in work] + ["        _mxcsr_load(mx_)"]
        else:
            lines += [f"    mx_ = _mxcsr_or({_DAZ})",
                      "    for w in range((n // inner) * nblk):"] + ["        " + line for line in work]
            lines += ["    _mxcsr_load(mx_)"]
        return "\n".join(lines) + "\n"


_compiled = {}

#: (a switch for A/B measurements and the tests) the fast pass of loops converting f16
#: (``RowLoopSource._row_lines``): read when a loop is compiled for a computation
BARE_F16 = True
#: the elements of a row a fast pass converts before its NaN test (a block with a NaN is
#: computed again: one NaN costs at most this many elements twice)
F16_BLOCK = 1024
#: rows shorter than this have their fast pass off (the run-time ``fast``): there a row's
#: own steps cost more than its conversions (f16 [16384, 5] * a broadcast row, load 8:
#: 670 us with it, 590 without; [8192, 16] 303 / 316; [64, 1024] 27 / 36)
F16_FAST_ROW = 64

#: the dtype a ``narrow`` loop (``compile_loop``) takes a bf16 input in, and stores a bf16
#: result in: its bits.  A bf16 add of 4M elements converted each operand to f32 and the
#: result back in passes around the loop (five passes over memory more than XLA's one)
BF16_BITS = np.dtype(np.uint16)
#: the types a ``narrow`` loop reads and stores as their bits (uint16): the functions
#: widening the bits to the f32 carrier and rounding the carrier to the bits (f16's in
#: ``cpu.half``: NumPy's astype around an f16 loop took 10-15 ns an element a pass)
NARROW_BITS = {"bf16": ("bf16_bits_to_f32", "f32_to_bf16_bits"), "f16": ("f16_bits_to_f32", "f32_to_f16_bits")}


#: a DAZ loop's ``prange`` runs at most this many chunks of work items, each setting the mode
DAZ_CHUNKS = 256
#: what a DAZ loop adds to ``_HEADER``
_DAZ_HEADER = "from xla_explorer.executors.cpu.linalg import _mxcsr_or, _mxcsr_load\n"


def _source(group, clean, narrow):
    """The RowLoopSource of a group: in DAZ mode (``loopgen``) where the machine has it
    (x86), every member computes the same values in it, and it leaves a flush out."""
    plain = RowLoopSource(group, clean, narrow)
    if not (_X86 and fpenv.flushing() and daz_safe(group)):
        return plain
    src = RowLoopSource(group, clean, narrow, daz=True)
    if not src.daz or src.daz_broken or _flushes(src) >= _flushes(plain):
        return plain
    return src


def _flushes(src):
    return sum(len(_FLUSH_CALL.findall(line)) for line in src.body)


_FLUSH_CALL = re.compile(r"\bc?ftz(?:_pos)?(?:32|64)\(")


def _kernels(prefix, text, name):
    """(``{name}_par``, ``{name}_ser``) of the generated module ``text``, loaded once."""
    compiled = _compiled.get(text)
    if compiled is None:
        module = load_source(prefix, text)
        compiled = _compiled[text] = (getattr(module, f"{name}_par"), getattr(module, f"{name}_ser"))
    return compiled


def compile_loop(group, clean=(), narrow=False):
    """(RowLoopSource, (parallel kernel, serial kernel), run-time parameters) of a group;
    ``clean``: its inputs known to hold no denormal (not flushed again); ``narrow``: bf16
    inputs and result as their bits (``BF16_BITS``), converted in the loop."""
    numba()
    src = _source(group, clean, narrow)
    fast = _FAST_HEADER.format(block=F16_BLOCK) if src.fast_pass else ""
    daz = _DAZ_HEADER if src.daz else ""
    text = _HEADER + fast + daz + f"\n{src.describe()}\n\n" + src.loop_text("loop_par", True) + "\n\n" + \
        src.loop_text("loop_ser", False)
    return src, _kernels("fused", text, "loop"), _params(src)


def _params(src):
    """The loop's run-time arguments that do not depend on values: merged dimensions, the
    row length, broadcast strides (merged), constants."""
    from ..emit import carrier_dtype
    odims = np.array(src.mdims, np.int64)
    merged = iter(src._merged)
    params = []
    for kind, inst, _ in src.param_values:
        if kind == "constant":
            params.append(carrier_dtype(inst.shape.element_type).type(np.asarray(inst.attrs["literal"])[()]))
        else:  # "bcast" or "iota": strides over the merged dimensions
            params.append(np.array(next(merged), np.int64))
    if src.fast_pass:   # the last argument (``RowLoopSource.arguments``)
        params.append(bool(BARE_F16) and int(src.mdims[-1]) >= F16_FAST_ROW)
    costly = any(m.opcode in _COSTLY or m.shape.element_type in ("c64", "c128") for m in src.group.members)
    return odims, int(src.mdims[-1]), params, PARALLEL_THRESHOLD if costly else MOVE_PARALLEL_THRESHOLD


#: element-wise ops that take tens of cycles an element (library calls, polynomials)
_COSTLY = {"exponential", "exponential-minus-one", "log", "log-plus-one", "tanh", "logistic", "sine", "cosine",
           "tan", "atan2", "power", "erf", "cbrt", "remainder"}


def run_loop(compiled, n, out, inputs, static):
    if n == 0:
        return
    odims, inner, params, threshold = static
    par, ser = compiled
    if n >= threshold:
        # about 4 blocks per thread of at least 4096 elements; whole rows when there are
        # enough of them
        rows = n // inner
        want = 4 * threads()
        blk = inner if rows >= want else max(4096, -(-inner * rows // want))
        blk = min(inner, -(-blk // 16) * 16)
        par(n, out, *inputs, odims, inner, blk, *params)
    else:
        ser(n, out, *inputs, odims, inner, inner, *params)


# -- a fused loop with the row reduction that reads it ----------------------------------------
#
# XLA fuses an element-wise producer with the reduction reading it (a softmax's exp and its
# row sum: a multi-output fusion).  Here: a loop group whose value a Reduce with a standard
# combiner folds along its trailing dimensions (x as [A, R], every row a task of
# ``reduction._arb_chunk``) computes each row of R and folds it at once, while it is in
# the cache, with the very call ``_arb_chunk`` makes on it (``_fold``, whose float sum is
# ``_sum_range``): the same bits, one pass less over the value.  The value is written where
# other ops read it; where the Reduce is its only reader (log-softmax's exp, a norm's
# squares) each row is computed into a scratch row instead, and nothing else is written.
# The executor's run plan makes the two steps one (``numba_executor``).

#: a generated loop's own names (``LoopSource``, ``RowLoopSource``): an epilogue's are renamed
_LOCAL = re.compile(r"\b(in\d+|bs\d+|c\d+|io\d+|t\d+|f\d+|b_\w+|v_\w+|s_\w+|odims|o_)\b")


def _epilogue_arguments(epi):
    return ["eout", "e_odims", *["e_" + p for p in epi.params], "sfl", "flush_s", "tiny"]


def _epilogue_lines(epi, e_in, s_in):
    """The epilogue loop's row t (whole rows of R), its names prefixed ``e_``: its input
    ``e_in`` is the row just computed (in ``out``, or ``buf``), ``s_in`` the folds (``sfl``);
    it has no other input (``i0`` addresses the row only)."""
    ren = lambda line: _LOCAL.sub(lambda m: "e_" + m.group(1), line)  # noqa: E731
    # (the row is out's row t, or buf, where the value is not kept: i0 addresses only it)
    lines = [f"e_in{e_in} = out if keep else buf", f"e_in{s_in} = sfl",
             "sv = red[t]",
             "if flush_s and abs(sv) < tiny:",
             "    sv = sv * 0",
             "sfl[t] = sv",
             "row = t", "i0 = t * R if keep else 0", "j0 = 0", "j1 = R", "e_o_ = eout[t * R:(t + 1) * R]"]
    lines += [ren(line) for line in epi.prelude]
    lines.append("for j in range(R):")
    lines += ["    " + ren(line) for line in epi.body]
    lines.append(f"    e_o_[j] = {ren(epi.result)}")
    return lines


def _segment_lines(src, ind):
    """The loop's elements [lo, hi) (flat; across its rows of ``inner``) computed into ``out``
    at their place, or into ``buf`` from 0 (``keep`` off), at indentation ``ind``."""
    lines = ["i = lo",
             "while i < hi:",
             "    row = i // inner",
             "    j0 = i - row * inner",
             "    j1 = min(inner, j0 + (hi - i))",
             "    i0 = row * inner",
             "    o_ = out[i0 + j0:i0 + j1] if keep else buf[i - lo:i - lo + (j1 - j0)]"]
    lines += ["    " + line for line in src.prelude]
    lines.append("    for j in range(j1 - j0):")
    lines += ["        " + line for line in src.body]
    lines += [f"        o_[j] = {src.result}", "    i += j1 - j0"]
    return [ind + line for line in lines]


#: the reduce loop's arguments after the row loop's (``run_reduce_loop`` passes them)
_REDUCE_ARGUMENTS = ["A", "R", "red", "init", "code", "keep", "nchunk", "P", "chunk"]


def _reduce_loop_text(src, name, parallel, epilogue=None):
    # rows [c * per, (c + 1) * per) a task; keep: the loop's value written to ``out``, else each
    # row computed into ``buf`` (the Reduce is its only reader: nothing written but the folds)
    rng = "prange" if parallel else "range"
    extra = _epilogue_arguments(epilogue[0]) if epilogue else []
    # P > 1 (no epilogue): task t is part t % P of row t // P, elements [r0, r1) of it
    # (chunk long, the last shorter), folded from its first element without init, as
    # ``reduction._arb_task`` folds it: red[t] is that part's fold (the caller joins them)
    lines = [f"@njit(cache=True, nogil=True, parallel={parallel}, error_model='numpy')",
             f"def {name}({', '.join(src.arguments() + _REDUCE_ARGUMENTS + extra)}):",
             "    per = (A * P + nchunk - 1) // nchunk",
             f"    for c in {rng}(nchunk):",
             "        buf = np.empty(0 if keep else chunk, out.dtype)",
             "        lanes = np.empty(16 if code == ADD_CODE and P == 1 else max(16, chunk // 2 + 1), out.dtype)",
             "        for t in range(c * per, min(A * P, (c + 1) * per)):",
             "            a = t // P",
             "            p = t - a * P",
             "            lo = a * R + p * chunk",
             "            hi = a * R + min(R, (p + 1) * chunk)",
             ] + _segment_lines(src, "            ")
    # _arb_chunk's whole-row case: out[t] = _sum_range(x[t * R:(t + 1) * R], init) for a sum,
    # else _fold(code, x, t * R, (t + 1) * R, init, lanes): the same calls on arrays of the
    # same types (1-D contiguous), so the same compiled folds
    lines += ["            if P > 1:",
              "                if keep:",
              "                    red[t] = _fold(code, out, lo + 1, hi, out[lo], lanes)",
              "                else:",
              "                    red[t] = _fold(code, buf, 1, hi - lo, buf[0], lanes)",
              "            elif code == ADD_CODE:",
              "                if keep:",
              "                    red[t] = _sum_range(out[lo:hi], init)",
              "                else:",
              "                    red[t] = _sum_range(buf[0:R], init)",
              "            elif keep:",
              "                red[t] = _fold(code, out, lo, hi, init, lanes)",
              "            else:",
              "                red[t] = _fold(code, buf, 0, R, init, lanes)"]
    if epilogue:   # the loop reading this row and its fold, run on the row while it is in cache
        lines += ["            " + line for line in _epilogue_lines(*epilogue)]
    return "\n".join(lines) + "\n"


def compile_reduce_loop(group, clean=(), epilogue=None):
    """(RowLoopSource, (parallel kernel, serial kernel), run-time parameters) of ``group``'s
    loop folding each row of its value (see above); ``clean`` as for ``compile_loop``.
    ``epilogue``: (RowLoopSource of a loop over the same rows of R, which of its inputs is
    this loop's value, which the folds broadcast along the rows): run on each row after
    its fold (a softmax's division), into ``eout`` (``run_reduce_loop``'s ``extra``)."""
    from . import reduction
    numba()
    src = RowLoopSource(group, clean)
    head = (_HEADER + "from xla_explorer.executors.cpu.reduction import _sum_range, _fold\n"
            f"# reduction.py {reduction._SELF_HASH}\nADD_CODE = {reduction.ADD}\n")
    desc = src.describe() + (f"\n# then: {epilogue[0].describe()}" if epilogue else "")
    text = head + f"\n{desc}\n\n" + _reduce_loop_text(src, "red_par", True, epilogue) + "\n\n" + \
        _reduce_loop_text(src, "red_ser", False, epilogue)
    return src, _kernels("fusedred", text, "red"), _params(src)


def run_reduce_loop(compiled, n, out, inputs, static, A, R, red, init, code, keep=True, extra=(), P=1):
    """The loop of ``compiled`` (``compile_reduce_loop``) over n = A * R elements, row t's fold
    into red[t]; ``keep=False``: ``out`` is not written (it may be empty).  ``extra``: the
    epilogue's arguments (eout, its odims, its parameters, sfl[A], flush_s, tiny).  ``P`` > 1
    (no epilogue): each row folded in P parts of ceil(R / P) (``reduction._arb_pass``'s cut),
    part p of row a into red[a * P + p], from its first element, without init."""
    odims, inner, params, threshold = static
    par, ser = compiled
    chunk = -(-R // P) if P > 1 else R
    tasks = A * P
    if n >= threshold and tasks > 1:
        par(n, out, *inputs, odims, inner, inner, *params, A, R, red, init, code, keep, min(tasks, 4 * threads()),
            P, chunk, *extra)
    else:
        ser(n, out, *inputs, odims, inner, inner, *params, A, R, red, init, code, keep, 1, P, chunk, *extra)


# -- a fused loop with the column reduction that reads it -------------------------------------
#
# The same for a Reduce over one block of dimensions followed by kept ones (x as [A, R, B],
# B > 1: a softmax along axis 0, a mean over the batch): ``reduction._arb_pass`` folds
# such columns row after row (``_cols_fold``: from init, or in P parts of ceil(R / P) rows
# each from its first row, ``row_parts``' cut, joined by a second fold), and so does this
# loop, a block of columns at a time: each row of the block is computed (into ``out``, or a
# scratch row where the Reduce is the value's only reader) and combined at once into the
# block's folds by ``_rows`` (maximum / minimum: ``_rows_plain``, NumPy's bits, which
# ``_cols_fold`` gives too), the element-wise order of ``_cols_fold``'s.  The blocks of
# columns change nothing of the bits: they only share the work among the threads.

#: the column-fold loop's arguments after the loop's (``run_reduce_cols_loop`` passes them)
_COLS_ARGUMENTS = ["A", "R", "B", "red", "init", "code", "keep", "P", "chunk", "per"]


def _reduce_cols_text(src, name, parallel):
    rng = "prange" if parallel else "range"
    lines = [f"@njit(cache=True, nogil=True, parallel={parallel}, error_model='numpy')",
             f"def {name}({', '.join(src.arguments() + _COLS_ARGUMENTS)}):",
             "    nblk = (B + per - 1) // per",
             f"    for task in {rng}(A * P * nblk):",
             "        ap = task // nblk",
             "        col0 = (task - ap * nblk) * per",
             "        ncol = min(B, col0 + per) - col0",
             "        a = ap // P",
             "        p = ap - a * P",
             "        r0 = p * chunk",
             "        r1 = min(R, r0 + chunk)",
             "        buf = np.empty(0 if keep else ncol, out.dtype)",
             "        acc = red[ap * B + col0:ap * B + col0 + ncol]",
             "        for r in range(r0, r1):",
             "            lo = (a * R + r) * B + col0",
             "            hi = lo + ncol",
             ] + _segment_lines(src, "            ")
    lines += ["            seg = out[lo:hi] if keep else buf",
              "            if r == r0:",
              "                for q in range(ncol):",
              "                    acc[q] = seg[q] if P > 1 else init",
              "                if P > 1:",
              "                    continue",
              "            if code == MAX_CODE or code == MIN_CODE:",
              "                _rows_plain(code, seg, 0, acc, 0, ncol)",
              "            else:",
              "                _rows(code, seg, 0, acc, 0, ncol)"]
    return "\n".join(lines) + "\n"


def compile_reduce_cols_loop(group, clean=()):
    """(RowLoopSource, (parallel kernel, serial kernel), run-time parameters) of ``group``'s
    loop folding the columns of its value viewed as [A, R, B] (see above); ``clean`` as for
    ``compile_loop``."""
    from . import reduction
    numba()
    src = RowLoopSource(group, clean)
    head = (_HEADER + "from xla_explorer.executors.cpu.reduction import _rows, _rows_plain\n"
            f"# reduction.py {reduction._SELF_HASH}\nMAX_CODE = {reduction.MAX}\nMIN_CODE = {reduction.MIN}\n")
    text = head + f"\n{src.describe()}\n# its columns folded\n\n" + _reduce_cols_text(src, "cols_par", True) + \
        "\n\n" + _reduce_cols_text(src, "cols_ser", False)
    return src, _kernels("fusedcols", text, "cols"), _params(src)


#: a column-fold loop with fewer parts than threads cuts its columns in blocks of at least
#: this many for them
COLS_BLOCK = 512


def run_reduce_cols_loop(compiled, n, out, inputs, static, A, R, B, red, init, code, keep=True, P=1):
    """The loop of ``compiled`` (``compile_reduce_cols_loop``) over n = A * R * B elements,
    the columns of x[a] folded into red[a * P * B:][:P * B] (P parts of ceil(R / P) rows,
    part p's folds at red[(a * P + p) * B:], each from its first row, without init; P = 1:
    from init).  ``keep=False``: ``out`` is not written (it may be empty)."""
    odims, inner, params, threshold = static
    par, ser = compiled
    chunk = -(-R // P)
    if n >= threshold:
        # whole rows of B a task when the parts are enough for the threads (a task then
        # streams through memory: blocks of a row at the row's stride cost twice as much,
        # 256 of 2048 columns at a time), else the columns cut in blocks for the threads
        want = -(-threads() // (A * P))
        per = min(B, max(COLS_BLOCK, -(-B // want)))
        per = min(B, -(-per // 16) * 16)
        if A * P * (-(-B // per)) > 1:
            par(n, out, *inputs, odims, inner, inner, *params, A, R, B, red, init, code, keep, P, chunk, per)
            return
    ser(n, out, *inputs, odims, inner, inner, *params, A, R, B, red, init, code, keep, P, chunk, B)
