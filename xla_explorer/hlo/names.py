"""Names unique across a module, as XLA requires, fixed in memory when a module is made.

XLA's verifier refuses a module where two instructions share a name, and a run's trace
(``comp.trace``) keys its records by instruction name: a while loop's condition and body
whose parameters are both called ``p0`` would share invocation counts.  Builders may
reuse names, though: every traced callable names its parameters ``p0, p1, ...``, two
builders may both call a parameter ``x``, an ``XlaComputation`` built elsewhere may be
reused as a sub-computation, a display name may be any text.  So ``unique_names(entry)``
runs when an ``XlaComputation`` is made from a builder's computation: every instruction
name becomes an HLO identifier, unique across the module (computation names likewise,
in their own namespace, as in XLA); the printed text then shows the names the module and
its trace use.

What was made part of a module once (*published*: a built or parsed module's computations
and instructions) is never renamed in place -- another module, and the user's handles,
see it.  When a published name clashes, the later computation is copied under new names
for this module (as XLA copies a computation into the module that calls it).  What was
not published yet (the builder's new instructions, freshly traced bodies) is renamed in
place: a repeated name gets XLA's ``name.N`` suffix.  Published names claim first, so
reusing a module never changes it.
"""
import re
import weakref

from .ir import HloComputation, Instruction, computation_closure

_PUBLISHED_INSTRUCTIONS = weakref.WeakSet()
_PUBLISHED_COMPUTATIONS = weakref.WeakSet()
_SUFFIX = re.compile(r"^(.*)\.(\d+)$")


def identifier(name):
    """``name`` as an HLO identifier (``[A-Za-z_][A-Za-z0-9_.-]*``): a builder may use any
    text as a display name, the module's names must still parse."""
    text = re.sub(r"[^A-Za-z0-9_.\-]", "_", str(name))
    if not text or not (text[0].isalpha() or text[0] == "_"):
        text = "_" + text
    return text


class Uniquer:
    """Hands out names not in ``avoid`` nor handed out before: ``x``, then ``x.1``, ``x.2``
    (``add.5`` taken: ``add.6``), XLA's way."""

    def __init__(self, avoid=()):
        self.avoid = set(avoid)
        self.taken = set()
        self._next = {}

    def claim(self, name):
        """Take ``name`` as it is; False if it is taken already."""
        if name in self.taken:
            return False
        self.taken.add(name)
        return True

    def fresh(self, name):
        name = identifier(name)
        if name not in self.taken and name not in self.avoid:
            self.taken.add(name)
            return name
        m = _SUFFIX.match(name)
        root, k = (m.group(1), int(m.group(2)) + 1) if m else (name, 1)
        k = max(k, self._next.get(root, 1))
        while f"{root}.{k}" in self.taken or f"{root}.{k}" in self.avoid:
            k += 1
        self._next[root] = k + 1
        self.taken.add(f"{root}.{k}")
        return f"{root}.{k}"


def is_published(obj):
    return obj in (_PUBLISHED_COMPUTATIONS if isinstance(obj, HloComputation) else _PUBLISHED_INSTRUCTIONS)


def publish(computations):
    """Mark ``computations`` and their instructions as part of a module: never renamed in place."""
    for comp in computations:
        _PUBLISHED_COMPUTATIONS.add(comp)
        for inst in comp.instructions:
            _PUBLISHED_INSTRUCTIONS.add(inst)


def unique_names(entry):
    """Make every name of the module rooted at ``entry`` unique (see the module docstring);
    returns the entry (a copy when a published part of it had to change) and publishes
    the module."""
    comps = computation_closure(entry)          # callees first, the entry last
    callers_first = _preorder(entry)            # the entry, then callees as first called
    everything = {i.name for c in comps for i in c.instructions}
    names = Uniquer(avoid=everything | {identifier(n) for n in everything})
    comp_names = Uniquer(avoid={c.name for c in comps} | {identifier(c.name) for c in comps})
    copies = {}          # (computation id, instruction) -> its name in this module's copy
    comp_renamed = {}    # published computation -> its name in this module's copy
    seen = set()         # instructions named already (one object in two computations: copied)
    # published names claim first (callers before callees): they cannot change in place
    comp_names.claim(entry.name)
    for c in callers_first:
        if c is not entry and is_published(c) and not comp_names.claim(c.name):
            comp_renamed[c] = comp_names.fresh(c.name)
        for inst in c.instructions:
            if is_published(inst):
                if inst in seen or not names.claim(inst.name):
                    copies[(id(c), inst)] = names.fresh(inst.name)
                seen.add(inst)
    # then the rest, renamed in place when taken (or when not an identifier)
    for c in callers_first:
        if not is_published(c) and (c is not entry or identifier(c.name) != c.name):
            want = identifier(c.name)
            if c is entry:
                comp_names.taken.discard(entry.name)
            if not comp_names.claim(want):
                want = comp_names.fresh(want)
            c.name = want
        for inst in c.instructions:
            if is_published(inst):
                continue
            if inst in seen:
                copies[(id(c), inst)] = names.fresh(inst.name)
                continue
            want = identifier(inst.name)
            if not names.claim(want):
                want = names.fresh(want)
            seen.add(inst)
            inst.name = want
    if copies or comp_renamed:
        entry = _copy_changed(comps, entry, copies, comp_renamed)
    publish(computation_closure(entry))
    return entry


def _copy_changed(comps, entry, copies, comp_renamed):
    """Copies of the published instructions and computations that must change (renamed, or
    using a copy), callees first; what was not published is updated in place."""
    new_comp = {}
    for c in comps:                                  # callees first
        changed, new_inst = c in comp_renamed, {}
        for inst in c.instructions:
            key = (id(c), inst)
            must = key in copies or any(o in new_inst for o in inst.operands) or \
                any(cc in new_comp for cc in inst.called_computations())
            if not must:
                continue
            changed = True
            operands = [new_inst.get(o, o) for o in inst.operands]
            attrs = {k: _swap(v, new_comp) for k, v in inst.attrs.items()}
            if key in copies or is_published(inst):
                copy = Instruction(copies.get(key, inst.name), inst.opcode, inst.shape, operands, attrs, inst.extra)
                copy.line, copy.error = inst.line, inst.error
                new_inst[inst] = copy
            else:
                inst.operands, inst.attrs = operands, attrs
        if not changed:
            continue
        instructions = [new_inst.get(i, i) for i in c.instructions]
        root = new_inst.get(c.root, c.root)
        parameters = [new_inst.get(p, p) for p in c.parameters]
        if is_published(c):
            new_comp[c] = HloComputation(comp_renamed.get(c, c.name), instructions, root, parameters)
        else:
            c.instructions, c.root, c.parameters = instructions, root, parameters
    return new_comp.get(entry, entry)


def _preorder(entry):
    """The module's computations, each before the computations it calls, in the order they
    are first called (a while's condition before its body): who keeps a repeated name."""
    order, seen = [], {id(entry)}
    stack = [entry]
    while stack:
        comp = stack.pop()
        order.append(comp)
        callees = [c for inst in comp.instructions for c in inst.called_computations()]
        for c in reversed(callees):
            if id(c) not in seen:
                seen.add(id(c))
                stack.append(c)
    return order


def _swap(value, new_comp):
    if isinstance(value, HloComputation):
        return new_comp.get(value, value)
    if isinstance(value, (list, tuple)) and value and all(isinstance(c, HloComputation) for c in value):
        return type(value)(new_comp.get(c, c) for c in value)
    return value


def rename_repeats(computations):
    """Parsed text: an instruction name repeated in a later computation gets XLA's ``.N``
    suffix there (XLA's parser adds each computation to the module uniquifying its names,
    in text order), so the module, its trace and its printed text agree."""
    everything = {i.name for c in computations for i in c.instructions}
    names = Uniquer(avoid=everything)
    for c in computations:
        for inst in c.instructions:
            if not names.claim(inst.name):
                inst.name = names.fresh(inst.name)


def duplicate_names(computations):
    """[(name, first instruction, its computation, second, its computation)] of the
    instruction names used twice across ``computations``."""
    where, out = {}, []
    for c in computations:
        for inst in c.instructions:
            first = where.get(inst.name)
            if first is None:
                where[inst.name] = (inst, c)
            elif first[0] is not inst:
                out.append((inst.name, first[0], first[1], inst, c))
    return out


__all__ = ["identifier", "unique_names", "rename_repeats", "publish", "is_published", "duplicate_names", "Uniquer"]
