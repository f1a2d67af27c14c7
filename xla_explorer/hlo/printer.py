"""Print a module in XLA's HLO text syntax (the form JAX's ``as_text(dialect="hlo")`` gives)."""
from ..ops import registry
from .ir import HloComputation, computation_closure
from .literal import format_literal
from .names import identifier


class _Names:
    """Module-wide unique names, computations and instructions each in their own namespace
    (as in XLA).  A module made by ``XlaComputation`` has unique names already
    (``hlo.names``), so they print as they are; this only guards modules edited since."""

    def __init__(self):
        self.taken, self.of = {True: set(), False: set()}, {}

    def name(self, obj, wanted):
        if id(obj) in self.of:
            return self.of[id(obj)]
        taken = self.taken[isinstance(obj, HloComputation)]
        wanted = identifier(wanted)
        name, k = wanted, 1
        while name in taken:
            k += 1
            name = f"{wanted}_{k}"
        taken.add(name)
        self.of[id(obj)] = name
        return name


def print_module(module):
    names = _Names()
    comps = computation_closure(module.entry)
    for comp in comps:
        names.name(comp, comp.name)
    for comp in comps:
        for inst in comp.instructions:
            names.name(inst, inst.name)
    entry = module.entry
    layout = "{(" + ", ".join(p.shape.to_string(layout=True) for p in entry.parameters) + ")->" + \
        entry.root.shape.to_string(layout=True) + "}"
    header = f"HloModule {identifier(module.name)}, entry_computation_layout={layout}"
    for k, v in module.module_attrs.items():
        if k != "entry_computation_layout":
            header += f", {k}={v}"
    blocks = [header, ""]
    for section, numbered in (getattr(module, "debug_sections", None) or {}).items():
        blocks += [section, *numbered, ""]  # what metadata's stack_frame_id refers to
    for comp in comps:
        blocks.append(print_computation(comp, names, entry=comp is entry))
        blocks.append("")
    return "\n".join(blocks)


def print_computation(comp, names=None, entry=False):
    names = names or _Names()
    title = ("ENTRY " if entry else "") + names.name(comp, comp.name)
    lines = [title + " {"]
    for inst in comp.instructions:
        prefix = "ROOT " if inst is comp.root else ""
        lines.append("  " + prefix + print_instruction(inst, names))
    lines.append("}")
    return "\n".join(lines)


def print_instruction(inst, names=None):
    names = names or _Names()
    name_of = lambda obj: names.name(obj, obj.name)  # noqa: E731
    shape = inst.shape.to_string(layout=True)
    if inst.opcode == "parameter":
        args = str(inst.attrs["parameter_number"])
    elif inst.opcode == "constant":
        lit = inst.attrs.get("literal")
        args = "{...}" if lit is None else format_literal(lit, inst.shape.element_type)
    else:
        args = ", ".join(name_of(o) for o in inst.operands)
    text = f"{name_of(inst)} = {shape} {inst.opcode}({args})"
    for key, value in instruction_attributes(inst, name_of):
        text += f", {key}={value}"
    return text


def instruction_attributes(inst, name_of=lambda c: c.name):
    """(hlo key, text) pairs of an instruction, schema attributes first, then the raw ones."""
    out = []
    op = registry.OPS.get(inst.opcode)
    if op is not None and inst.opcode not in ("parameter", "constant"):
        for attr in op.attrs:
            text = attr.format(inst.attrs, inst, name_of)
            if text is not None:
                out.append((attr.hlo, text))
    out.extend(inst.extra.items())
    return out
