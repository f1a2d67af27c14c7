"""Generate the source of a fused loop from a FusionGroup (shared by the CPU and CUDA code).

The loop body computes one result element ``i``: inputs are read at ``i`` (same shape),
at ``0`` (scalars) or through a broadcast's index map; every member is one statement
``t<k> = carrier(expression)``.  The source depends on the group's structure and types
only, never on sizes or constant values (those are run-time arguments), so one compiled
loop serves every size.
"""
from .emit import (carrier_dtype, denormal_blind, emit, finish, flush_functions, flushes_result, squares_it,
                   sum_before_blind)


class LoopSource:
    def __init__(self, group, clean=()):
        """``clean``: inputs known to hold no denormal (the executor's tracking, ``"flush"``
        mode): not flushed again where the loop reads them."""
        self.group = group
        self._clean = set(clean)
        self.inputs = list(group.inputs)          # runtime arrays, in argument order
        self.params = []                          # names of extra runtime arguments
        self.param_values = []                    # how to compute them: ("bcast", input k, member) / ("iota", member)
        self.body = []
        self._names = {}
        self._flushed = set()   # members whose value is already flushed to zero (fpenv)
        self._flushed_values = {}   # (flush function, expression) -> its flushed temporary
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

    def _build(self):
        readers = {}   # member -> the members reading it
        for m in self.group.members:
            for o in m.operands:
                readers.setdefault(o, []).append(m)
        for n, m in enumerate(self.group.members):
            t = m.shape.element_type
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
            elif m.opcode == "iota":
                p = f"io{len(self.params)}"
                self.params.append(p)
                self.param_values.append(("iota", m, None))
                expr = self.iota_expr(p)
            else:
                args = [self._names[o] if o in self._names else self._input_expr(o, m) for o in m.operands]
                flushed = [k for k, o in enumerate(m.operands) if o in self._flushed or o in self._clean]
                # a value only denormal-blind ops read (exp(x - max)) is left unflushed
                blind = (m is not self.group.root and bool(readers.get(m))
                         and all(denormal_blind(u) for u in readers[m]))
                # a value only squares read ((x - mean)^2): its flush, and an add's operands'
                # flushes, change no square (``squares_it``)
                squared = (m is not self.group.root and bool(readers.get(m))
                           and all(squares_it(u, m) for u in readers[m]))
                if (blind or squared) and sum_before_blind(m):
                    flushed = list(range(len(m.operands)))   # (its operands' flushes change no exp)
                # a value read or made outside the flushing ops is flushed once, then reused
                for k, fn in enumerate(flush_functions(m)):
                    if fn and k not in flushed:
                        key = (fn, args[k])
                        if key not in self._flushed_values:
                            self._flushed_values[key] = f"f{len(self._flushed_values)}"
                            self.body.append(f"{self._flushed_values[key]} = {fn}({args[k]})")
                        args[k] = self._flushed_values[key]
                        flushed.append(k)
                expr = emit(m, *args, flushed=flushed, flush_result=not (blind or squared))
                if flushes_result(m) and not blind or squared:
                    self._flushed.add(m)   # (squared: as good as flushed for its readers)
            name = f"t{n}"
            self._names[m] = name
            self.body.append(f"{name} = {finish(expr, t)}")

    @property
    def result(self):
        return self._names[self.group.root]

    def arguments(self):
        return ["n", "out", *[f"in{k}" for k in range(len(self.inputs))], "odims", *self.params]

    def body_lines(self):
        return self.body + [f"out[i] = {self.result}"]

    def describe(self):
        return f"# fused: {self.group.signature()}"


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
