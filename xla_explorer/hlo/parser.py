"""Parse HLO text as XLA prints it and as JAX emits it.

Handles the module header and its attributes, computations (``ENTRY``, signatures as in
optimized dumps), instructions with layouts, ``ROOT``, ``%`` sigils, operands written
with or without their shapes, ``/*index=N*/`` comments, constants, nested computations
referenced by name in any order, and every attribute (those no op schema claims are kept
verbatim).  Errors give the line and column and say what was expected.
"""
import re

from ..errors import HloParseError, ShapeError
from ..ops import registry
from ..shapes import _ShapeText
from .attrs import parse_attribute_list, split_top
from .ir import HloComputation, Instruction
from .literal import parse_literal

_COMMENT = re.compile(r"/\*.*?\*/")
_NAME = r"%?([A-Za-z_][\w.\-]*)"
_INST = re.compile(r"\s*(ROOT\s+)?" + _NAME + r"\s*=\s*")
_OPCODE = re.compile(r"\s*([a-z][a-z0-9\-]*)\s*\(")
_COMP = re.compile(r"\s*(ENTRY\s+)?" + _NAME + r"\s*(\(.*\)\s*->\s*.*?)?\s*\{\s*$")


_DEBUG_SECTIONS = {"FileNames", "FunctionNames", "FileLocations", "StackFrames"}


class _Line:
    def __init__(self, number, text):
        self.number, self.text = number, text

    def error(self, message, column=1):
        return HloParseError(message, self.number, column, self.text)


def _logical_lines(text):
    """Lines with comments removed, joining lines whose brackets are still open."""
    out, pending, start = [], "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = _COMMENT.sub("", raw)
        if "//" in line and '"' not in line:
            line = line[:line.index("//")]
        if not pending:
            start = number
        pending = (pending + " " + line.strip()) if pending else line
        depth = sum(pending.count(c) for c in "([") - sum(pending.count(c) for c in ")]")
        braces = pending.count("{") - pending.count("}")
        # a computation header ends with one open '{'; anything else must balance
        if depth > 0 or (braces > 1) or (braces == 1 and not pending.rstrip().endswith("{")):
            continue
        if pending.strip():
            out.append(_Line(start, pending))
        pending = ""
    if pending.strip():
        out.append(_Line(start, pending))
    return out


def parse_hlo(text):
    """Parse HLO text into an XlaComputation (the module's ENTRY computation and callees)."""
    from ..computation import XlaComputation
    if not isinstance(text, str):
        raise TypeError(f"parse_hlo expects HLO text (str), got {type(text).__name__}")
    registry.all_ops()  # every family registered before attributes are looked up
    lines = _logical_lines(text)
    if not lines:
        raise HloParseError("empty HLO text: expected 'HloModule name' or a computation")
    module_name, module_attrs = "module", {}
    i = 0
    if lines[0].text.lstrip().startswith("HloModule"):
        module_name, module_attrs = _module_header(lines[0])
        i = 1
    blocks, entry_name = {}, None
    order = []
    debug_sections = {}
    while i < len(lines):
        line = lines[i]
        if line.text.strip() in _DEBUG_SECTIONS:
            # source locations (what metadata's stack_frame_id points at), in sections of
            # numbered lines: not HLO; kept as text for the graph's source locations
            section = debug_sections.setdefault(line.text.strip(), [])
            i += 1
            while i < len(lines) and lines[i].text.strip()[:1].isdigit():
                section.append(lines[i].text.strip())
                i += 1
            continue
        m = _COMP.match(line.text)
        if not m:
            raise line.error("expected a computation header 'name {' or 'ENTRY name {'",
                             len(line.text) - len(line.text.lstrip()) + 1)
        name = m.group(2)
        if name in blocks:
            raise line.error(f"computation {name!r} is defined twice")
        body = []
        i += 1
        while i < len(lines) and lines[i].text.strip() != "}":
            body.append(lines[i])
            i += 1
        if i >= len(lines):
            raise line.error(f"computation {name!r} has no closing '}}'")
        i += 1
        blocks[name] = (line, body)
        order.append(name)
        if m.group(1):
            entry_name = name
    if not order:
        raise lines[0].error("the module has no computations")
    if entry_name is None:
        entry_name = order[-1]  # XLA's rule: without ENTRY, the last computation is the entry
    built = {}
    building = set()

    def resolve(name):
        name = name.strip().lstrip("%")
        if name in built:
            return built[name]
        if name not in blocks:
            raise HloParseError(f"unknown computation {name!r} (defined: {', '.join(order)})")
        if name in building:
            raise HloParseError(f"computation {name!r} calls itself")
        building.add(name)
        header, body = blocks[name]
        built[name] = _computation(name, header, body, resolve)
        building.discard(name)
        return built[name]

    entry = resolve(entry_name)
    computations = [resolve(n) for n in order]
    module = XlaComputation(entry, name=module_name, module_attrs=module_attrs,
                            computations=[c for c in computations if c is not entry] + [entry])
    module.debug_sections = debug_sections
    return module


def _module_header(line):
    rest = line.text.strip()[len("HloModule"):].strip()
    parts = split_top(rest)
    if not parts or not parts[0]:
        raise line.error("expected a module name after 'HloModule'", len("HloModule") + 2)
    name = parts[0].lstrip("%")
    attrs = {}
    for part in parts[1:]:
        key, eq, value = part.partition("=")
        if not eq:
            raise line.error(f"expected key=value in the module header, got {part!r}")
        attrs[key.strip()] = value.strip()
    return name, attrs


def _computation(name, header, body, resolve):
    parsed = []
    for line in body:
        parsed.append(_instruction_text(line))
    by_name = {}
    insts = []
    root = None
    for line, (is_root, iname, shape, opcode, operand_text, attr_text) in zip(body, parsed):
        if iname in by_name:
            raise line.error(f"instruction {iname!r} is defined twice in computation {name!r}")
        inst = Instruction(iname, opcode, shape)
        by_name[iname] = inst
        insts.append(inst)
        if is_root:
            root = inst
    for line, inst, (is_root, iname, shape, opcode, operand_text, attr_text) in zip(body, insts, parsed):
        try:
            _fill(inst, operand_text, attr_text, by_name, resolve)
        except HloParseError as e:
            if e.line is not None:
                raise
            col = line.text.find(opcode + "(") + 1
            raise line.error(f"{iname} ({opcode}): {e}", col) from None
        except ShapeError as e:
            raise line.error(f"{iname} ({opcode}): {e}") from None
    if not insts:
        raise header.error(f"computation {name!r} has no instructions")
    if root is None:
        root = insts[-1]
    return HloComputation(name, insts, root)


def _instruction_text(line):
    text = line.text
    m = _INST.match(text)
    if not m:
        raise line.error("expected an instruction 'name = shape opcode(operands), attributes'",
                         len(text) - len(text.lstrip()) + 1)
    pos = m.end()
    st = _ShapeText(text, pos)
    try:
        shape = st.shape()
    except ShapeError as e:
        raise line.error(f"expected the result shape: {e}", st.pos + 1) from None
    pos = st.pos
    mo = _OPCODE.match(text, pos)
    if not mo:
        raise line.error("expected an opcode followed by '(' (e.g. 'add(')", pos + 2)
    opcode = mo.group(1)
    start = mo.end()
    depth, j, quote = 1, start, False
    while j < len(text) and depth:
        c = text[j]
        if quote:
            quote = c != '"'
        elif c == '"':
            quote = True
        elif c in "({[":
            depth += 1
        elif c in ")}]":
            depth -= 1
        j += 1
    if depth:
        raise line.error(f"the operand list of {opcode} has no closing ')'", start)
    operand_text = text[start:j - 1]
    rest = text[j:].strip()
    if rest and not rest.startswith(","):
        raise line.error(f"expected ',' and attributes after the operands of {opcode}, got {rest[:20]!r}", j + 1)
    return bool(m.group(1)), m.group(2), shape, opcode, operand_text, rest[1:]


def _fill(inst, operand_text, attr_text, by_name, resolve):
    opcode = inst.opcode
    if opcode == "parameter":
        inst.attrs["parameter_number"] = int(operand_text.strip())
    elif opcode == "constant":
        inst.attrs["literal"] = parse_literal(operand_text, inst.shape)
    else:
        for part in split_top(operand_text):
            name = part.split()[-1].lstrip("%") if part.split() else ""
            if name not in by_name:
                raise HloParseError(f"operand {part!r} is not an instruction of this computation")
            inst.operands.append(by_name[name])
    raw = parse_attribute_list(attr_text) if attr_text.strip() else []
    op = registry.OPS.get(opcode)
    if op is None:  # unknown opcodes parse (the graph shows them); running them says so
        inst.extra.update(raw)
        return
    schema = {a.hlo: a for a in op.attrs} if opcode not in ("parameter", "constant") else {}
    seen = set()
    for key, value in raw:
        attr = schema.get(key)
        if attr is None:
            inst.extra[key] = value
            continue
        inst.attrs.update(attr.parse(value, resolve))
        seen.add(key)
    for key, attr in schema.items():
        if key in seen:
            continue
        default = attr.missing()
        if default is None:
            raise HloParseError(f"missing attribute {key}=")
        inst.attrs.update(default)
    if op.attrs_from_shape is not None:
        for k, v in op.attrs_from_shape(inst.shape).items():
            inst.attrs.setdefault(k, v)
