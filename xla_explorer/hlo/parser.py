"""Parse HLO text as XLA prints it and as JAX emits it.

Handles the module header and its attributes, computations (``ENTRY``, signatures as in
optimized dumps), instructions with layouts, ``ROOT``, ``%`` sigils, operands written
with or without their shapes, ``/*index=N*/`` comments, constants, nested computations
referenced by name in any order, and every attribute (those no op schema claims are kept
verbatim).  Errors give the line and column and say what was expected.

Robust to any text: every failure is an ``HloParseError`` with a line and a column; the
time is linear in the text's size (no rescanning of joined lines); nothing recurses on
the text's nesting (computations are made as empty shells first and filled in place, so
a chain of calls of any length needs no recursion; tuple shapes and literals nest at most
``MAX_NESTING`` deep); operands may come in any order but a cycle is refused.

Instruction names are unique across the module, as XLA makes them when it parses: a name
that a computation earlier in the text used already gets a ``.N`` suffix (``lhs.1``).
"""
import re

from ..errors import HloParseError, ShapeError, quote
from ..ops import registry
from ..shapes import _ShapeText
from .attrs import parse_attribute_list, split_top
from .ir import HloComputation, Instruction
from .literal import parse_literal
from .names import rename_repeats

_COMMENT = re.compile(r"/\*.*?\*/")
_NAME = r"%?([A-Za-z_][\w.\-]*)"
_INST = re.compile(r"\s*(ROOT\s+)?" + _NAME + r"\s*=\s*")
_OPCODE = re.compile(r"\s*([a-z][a-z0-9\-]*)\s*\(")
_COMP = re.compile(r"\s*(ENTRY\s+)?" + _NAME + r"\s*(\(.*\)\s*->\s*.*?)?\s*\{\s*$")
#: how a line that starts a new statement looks (an instruction ``x = f32[...`` / ``x = (``,
#: a computation header, a closing brace): an open bracket cannot continue across it
_STATEMENT = re.compile(r"\s*(?:(?:ROOT\s+)?%?[A-Za-z_][\w.\-]*\s*=\s*(?:\(|[a-z][a-z0-9]*\[)|}|ENTRY\b|HloModule\b)")
_CLOSE = {")": "(", "]": "[", "}": "{"}
_SPECIAL = re.compile(r'[()\[\]{}"\\]')


_DEBUG_SECTIONS = {"FileNames", "FunctionNames", "FileLocations", "StackFrames"}


class _Line:
    def __init__(self, number, text):
        self.number, self.text = number, text

    def error(self, message, column=1):
        return HloParseError(message, self.number, column, self.text)


def _scan(line, number, state):
    """Update the bracket ``state`` with one line (quoted text skipped): the open brackets
    are a stack of (char, line, column, text)."""
    stack = state
    quote, escaped = False, -1
    for m in _SPECIAL.finditer(line):   # only the characters that matter: linear and quick
        i, c = m.start(), m.group()
        if quote:
            if i == escaped:
                continue
            if c == "\\":
                escaped = i + 1
            elif c == '"':
                quote = False
        elif c == '"':
            quote = True
        elif c in "([{":
            stack.append((c, number, i + 1, line))
        elif c in ")]}":
            if stack and stack[-1][0] == _CLOSE[c]:
                stack.pop()
            elif c == "}" and not stack:
                stack.append(("}", number, i + 1, line))  # a computation's closing brace
            # any other stray closing bracket is left to the instruction parser, which says
            # what it expected there
    return quote


def _logical_lines(text):
    """Lines with comments removed, joining lines whose brackets are still open (one
    pass over the text: linear time).  An open bracket that reaches the next statement or
    the end of the text is an error at the bracket."""
    out, pending, start, stack = [], [], 0, []

    def unclosed(entry):
        ch, ln, col, txt = entry
        return HloParseError(f"'{ch}' is never closed", ln, col, txt)

    for number, raw in enumerate(text.splitlines(), 1):
        line = _COMMENT.sub("", raw) if "/*" in raw else raw
        if "//" in line and '"' not in line:
            line = line[:line.index("//")]
        if not line.strip() and not pending:
            continue
        if pending and stack and _STATEMENT.match(line) and \
                not (line.lstrip().startswith("}") and stack[-1][0] == "{"):
            raise unclosed(stack[0])
        if not pending:
            start, stack = number, []
        if _scan(line, number, stack):
            raise HloParseError("a quoted string is not closed on its line", number, len(line), line)
        pending.append(line.strip() if len(pending) else line)
        # a computation header ends with one open '{' (at the end); a lone '}' closes one
        if stack and stack[-1][0] == "}":
            stack.clear()
        if len(stack) == 1 and stack[0][0] == "{" and line.rstrip().endswith("{") and \
                stack[0][1] == number and stack[0][2] == len(line.rstrip()):
            stack.pop()
        if stack:
            continue
        joined = " ".join(pending)
        if joined.strip():
            out.append(_Line(start, joined))
        pending = []
    if stack:
        raise unclosed(stack[0])
    if pending and " ".join(pending).strip():
        out.append(_Line(start, " ".join(pending)))
    return out


def parse_hlo(text):
    """Parse HLO text into an XlaComputation (the module's ENTRY computation and callees)."""
    from ..computation import XlaComputation
    if not isinstance(text, str):
        raise HloParseError(f"parse_hlo expects HLO text (str), got {type(text).__name__}", 1, 1)
    registry.all_ops()  # every family registered before attributes are looked up
    lines = _logical_lines(text)
    if not lines:
        raise HloParseError("empty HLO text: expected 'HloModule name' or a computation", 1, 1)
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
            if entry_name is not None:
                raise line.error(f"a second ENTRY computation ({name!r}; {entry_name!r} is the first): a module "
                                 f"has one")
            entry_name = name
    if not order:
        raise lines[0].error("the module has no computations")
    if entry_name is None:
        entry_name = order[-1]  # XLA's rule: without ENTRY, the last computation is the entry
    # every computation is an empty shell first: an attribute naming one gets the shell,
    # filled below in place, so calls in any order and of any depth need no recursion
    shells = {name: HloComputation(name, [], None) for name in order}

    def resolve(name):
        name = name.strip().lstrip("%")
        if name not in shells:
            shown = ", ".join(order[:10]) + (f", ... ({len(order)} in all)" if len(order) > 10 else "")
            raise HloParseError(f"unknown computation {name!r} (defined: {shown})")
        return shells[name]

    for name in order:
        header, body = blocks[name]
        _computation(shells[name], header, body, resolve)
    _check_no_recursion(shells, blocks, order)
    rename_repeats([shells[n] for n in order])
    entry = shells[entry_name]
    module = XlaComputation(entry, name=module_name, module_attrs=module_attrs,
                            computations=[shells[n] for n in order if n != entry_name] + [entry])
    module.debug_sections = debug_sections
    return module


def _check_no_recursion(shells, blocks, order):
    """A computation that calls itself, directly or through others, is refused (without
    recursing: an explicit stack of (computation, its callees still to visit))."""
    state = {}  # name -> 1 while on the path, 2 when done
    for start in order:
        if state.get(start):
            continue
        path = [(start, iter(_callees(shells[start])))]
        state[start] = 1
        while path:
            name, callees = path[-1]
            callee = next(callees, None)
            if callee is None:
                state[name] = 2
                path.pop()
                continue
            c = callee.name
            if state.get(c) == 1:
                cycle = [n for n, _ in path][[n for n, _ in path].index(c):] + [c]
                header = blocks[c][0]
                raise header.error(f"computation {c!r} calls itself ({' -> '.join(cycle)}); HLO has no recursion")
            if not state.get(c):
                state[c] = 1
                path.append((c, iter(_callees(callee))))


def _callees(comp):
    return [c for inst in comp.instructions for c in inst.called_computations()]


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


def _computation(comp, header, body, resolve):
    """Fill the shell ``comp`` with the instructions of ``body``, in an order where operands
    come first (text order where it already is)."""
    name = comp.name
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
        inst.line = line.number
        by_name[iname] = inst
        insts.append(inst)
        if is_root:
            if root is not None:
                raise line.error(f"computation {name!r} has two ROOT instructions ({root.name} and {iname})")
            root = inst
    for line, inst, (is_root, iname, shape, opcode, operand_text, attr_text) in zip(body, insts, parsed):
        col = line.text.find(opcode + "(") + 1
        try:
            _fill(inst, operand_text, attr_text, by_name, resolve)
        except HloParseError as e:
            if e.line is not None:
                raise
            raise line.error(f"{iname} ({opcode}): {e}", col) from None
        except ShapeError as e:
            raise line.error(f"{iname} ({opcode}): {e}", col) from None
        except (ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError,
                ZeroDivisionError, RecursionError) as e:
            raise line.error(f"{iname} ({opcode}): {type(e).__name__}: {e}", col) from None
    if not insts:
        raise header.error(f"computation {name!r} has no instructions")
    if root is None:
        root = insts[-1]
    insts = _operands_first(insts, name)
    comp.instructions = insts
    comp.root = root
    params = [i for i in insts if i.opcode == "parameter"]
    params.sort(key=lambda i: i.attrs["parameter_number"])
    for a, b in zip(params, params[1:]):
        if a.attrs["parameter_number"] == b.attrs["parameter_number"]:
            raise HloParseError(f"parameter number {b.attrs['parameter_number']} is used twice in computation "
                                f"{name!r} ({a.name} and {b.name})", b.line, 1)
    if params and params[-1].attrs["parameter_number"] != len(params) - 1:
        raise HloParseError(f"computation {name!r} has {len(params)} parameters, numbered "
                            f"{[p.attrs['parameter_number'] for p in params][:10]}; they must be 0..{len(params) - 1}",
                            params[-1].line, 1)
    comp.parameters = params
    return comp


def _operands_first(insts, comp_name):
    """The instructions in an order where every operand comes before its users (stable:
    text order where the text already has it); a cycle is an error at one of its lines."""
    position = {inst: k for k, inst in enumerate(insts)}
    if all(position[o] < k for k, inst in enumerate(insts) for o in inst.operands):
        return insts
    import heapq
    waiting = {inst: len(set(inst.operands)) for inst in insts}
    users = {inst: [] for inst in insts}
    for inst in insts:
        for o in set(inst.operands):
            users[o].append(inst)
    ready = [position[i] for i in insts if waiting[i] == 0]
    heapq.heapify(ready)
    out = []
    while ready:
        inst = insts[heapq.heappop(ready)]
        out.append(inst)
        for u in users[inst]:
            waiting[u] -= 1
            if waiting[u] == 0:
                heapq.heappush(ready, position[u])
    if len(out) < len(insts):
        # walk from a stuck instruction through stuck operands until one repeats: the cycle
        inst, path, seen = next(i for i in insts if waiting[i] > 0), [], {}
        while inst not in seen:
            seen[inst] = len(path)
            path.append(inst)
            inst = next(o for o in inst.operands if waiting[o] > 0)
        cycle = path[seen[inst]:]
        names = " -> ".join(i.name for i in cycle[:8]) + (" -> ..." if len(cycle) > 8 else "") + f" -> {inst.name}"
        raise HloParseError(f"instructions of computation {comp_name!r} form a cycle ({names}): an operand "
                            f"must be computed before its user", min(i.line for i in cycle), 1)
    return out


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
        text = operand_text.strip()
        if not text.isdigit():
            raise HloParseError(f"parameter({text}): the parameter number must be an integer >= 0")
        inst.attrs["parameter_number"] = int(text)
    elif opcode == "constant":
        inst.attrs["literal"] = parse_literal(operand_text, inst.shape)
    else:
        for part in split_top(operand_text):
            name = part.split()[-1].lstrip("%") if part.split() else ""
            if name not in by_name:
                raise HloParseError(f"operand {quote(part)} is not an instruction of this computation")
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
