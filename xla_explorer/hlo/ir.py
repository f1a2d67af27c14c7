"""The in-memory HLO: a module of computations of instructions.

An ``Instruction`` holds its opcode, result ``Shape``, operand instructions and its
attributes as Python values keyed by the spec's argument names (``offset_dims``,
``slice_sizes``, ...); called computations are attributes too (``computation``,
``body``, ``branch_computations``).  Attributes that no op schema claims (``metadata``,
``sharding``, ``frontend_attributes``, ...) are kept verbatim in ``extra`` so that
printing gives them back.
"""
from ..shapes import Shape


class Instruction:
    __slots__ = ("name", "opcode", "shape", "operands", "attrs", "extra", "error", "line", "__weakref__")

    def __init__(self, name, opcode, shape, operands=(), attrs=None, extra=None):
        self.name = name
        self.opcode = opcode
        self.shape = shape
        self.operands = list(operands)
        self.attrs = dict(attrs or {})
        self.extra = dict(extra or {})
        self.error = None  # a ShapeError recorded for display (graphs of broken builds)
        self.line = None   # the line of HLO text it was parsed from (named in errors)

    def called_computations(self):
        """The computations this instruction calls, in attribute order."""
        out = []
        for v in self.attrs.values():
            if isinstance(v, HloComputation):
                out.append(v)
            elif isinstance(v, (list, tuple)) and v and all(isinstance(c, HloComputation) for c in v):
                out.extend(v)
        return out

    def __repr__(self):
        ops = ", ".join(o.name for o in self.operands)
        return f"<{self.name} = {self.shape} {self.opcode}({ops})>"


class HloComputation:
    """A named list of instructions in a valid order, with parameters and a root."""

    def __init__(self, name, instructions, root, parameters=None):
        self.name = name
        self.instructions = list(instructions)
        self.root = root
        if parameters is None:
            params = [i for i in self.instructions if i.opcode == "parameter"]
            params.sort(key=lambda i: i.attrs["parameter_number"])
            parameters = params
        self.parameters = list(parameters)

    @property
    def parameter_shapes(self):
        return [p.shape for p in self.parameters]

    @property
    def result_shape(self):
        return self.root.shape

    def instruction(self, name):
        for inst in self.instructions:
            if inst.name == name:
                return inst
        raise KeyError(f"no instruction named {name!r} in computation {self.name!r}")

    def signature(self):
        params = ", ".join(f"{p.name}: {p.shape}" for p in self.parameters)
        return f"({params}) -> {self.result_shape}"

    def __repr__(self):
        return f"<HloComputation {self.name} {self.signature()}>"


def computation_closure(entry):
    """Every computation reachable from ``entry``, callees before callers (as HLO text orders them)."""
    order, seen = [], {id(entry)}
    # depth first with an explicit stack (no recursion, whatever the depth of calls)
    stack = [(entry, iter([c for inst in entry.instructions for c in inst.called_computations()]))]
    while stack:
        comp, callees = stack[-1]
        callee = next(callees, None)
        if callee is None:
            order.append(comp)
            stack.pop()
        elif id(callee) not in seen:
            seen.add(id(callee))
            stack.append((callee, iter([c for inst in callee.instructions for c in inst.called_computations()])))
    return order


__all__ = ["Instruction", "HloComputation", "computation_closure", "Shape"]
