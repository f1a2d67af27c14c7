"""Loop fusion, as XLA does it: chains of element-wise ops run as one loop.

``fusion_plan(computation)`` groups instructions: an element-wise instruction joins the
group of its users when all its users are in that one group and it has the group's
dimensions; a ``broadcast`` joins as an index transformation (its operand is read
through the broadcast's map instead of being materialised); scalar constants and
``iota`` are computed in the loop (a broadcast or iota read by several loops in each of
them, and a cheap element-wise op too where its copies read no more than its array would
be written and read: ``_duplicate``).  Everything else is a step of its own.  The plan is a
pure description (no Numba): the CPU and CUDA backends generate code from it, the graph
renderer can draw its groups.

Compile time stays bounded: Numba's compile time grows with a loop's body, so a group
holds at most ``MAX_FUSED`` instructions that do work (``loop_cost``: scalar constants, their
broadcasts and converts that make no code are free; a longer chain is cut into several
loops) and ``MAX_MEMBERS`` of any kind, and one module -- all its computations together
(``plan_module``) -- compiles at most ``MAX_FUSED_LOOPS`` distinct fused loops (groups of
the same structure share one) doing at most ``MAX_FUSED_WORK`` work together; the
instructions of the groups beyond run op by op, each through its layer's kernel (the
element-wise ones: the reference's vectorised NumPy code; nothing to compile), a
broadcast or iota as a loop of its own (one per kind, shared).  A 10,000-op element-wise
chain, or 1,000 computations of 10 ops each, then compile a bounded amount of code
instead of one loop of 10,000 statements or 1,000 loops.

A gather whose start indices are computed element-wise and put together by a
concatenate along the index vector dimension (``x[i, j]`` in JAX: each index wrapped,
``select(i < 0, i + n, i)``, reshaped to ``[N, 1]``, concatenated to ``[N, 2]``) becomes a
``GatherFusion``: one loop that computes each position's index components and gathers,
as XLA fuses it, instead of loops, a concatenate and the gather, each a pass over the
indices.  A backend without a kernel for it runs its original steps (``substeps``).

A dot whose value only a transpose reads becomes a ``DotTranspose``: one step whose dot
writes the transposed layout (XLA folds the transpose into the dot's output the same way);
the CUDA backend runs its two ``substeps``.

A ``call`` of a small computation with no effects (``inlinable``) is planned inlined, as
XLA's call inliner does it before fusion: the plan is made on an ``InlinedComputation``,
the caller's instructions with the callee's in place of each such call (copies, their
operands the call's operands; a call inside one inlined too), so that element-wise work
fuses across the call (``x % 7`` is a call of JAX's ``remainder``: its loop and its
caller's become one).  The user's computations are not changed: the copies exist in the
plan only (``plan.computation``), and ``plan.reported`` names each step's instruction as
the original computation has it (the call for its callee's root; the callee's other
instructions none, as a call's inside was not watched before).
"""
from ..hlo.ir import HloComputation, Instruction
from ..ops import registry

#: opcodes that can be part of a fused loop besides the element-wise ones
_INDEX_OPS = {"broadcast", "iota"}
#: the most instructions that do work (``loop_cost``) in one fused loop: an erf GELU's 67
#: in one (Numba's compile time of a loop grows about linearly with its work, measured
#: 1.6 s for 32 of a random chain's ops, 3.3 s for 64, 6.9 s for 128, cold, load 3)
MAX_FUSED = 96
#: the most instructions of any kind in one fused loop (free ones too: each is a statement,
#: a scalar input an argument, that Numba compiles)
MAX_MEMBERS = 3 * MAX_FUSED
#: the most distinct fused loops one module compiles, all its computations together
#: (measured: ~0.7-1 s of Numba compile time each for a short one)
MAX_FUSED_LOOPS = 16
#: the most work (``loop_cost``) of the distinct fused loops of one module together: what
#: 16 loops of 32 instructions, the budget before work was counted, could hold
MAX_FUSED_WORK = 16 * 32
_NOT_FUSED = {"parameter", "tuple", "get-tuple-element", "rng", "after-all"}
#: (a switch for A/B measurements) calls of small computations planned inlined
INLINE_CALLS = True
#: (a switch for A/B measurements) cheap element-wise ops read by several fused loops
#: recomputed in each (``_duplicate``)
DUPLICATE_CHEAP = True
#: the most instructions a called computation may bring into its caller to be inlined
#: (its parameters not counted; its own inlined calls counted as what they bring)
MAX_INLINED = 256
#: how deep calls inside inlined calls are inlined
_MAX_INLINE_DEPTH = 16
#: ops whose effects (devices, hosts, random state, ordering) belong to their call: a
#: computation reaching one (through any computation it calls) is not inlined
_EFFECTS = ({"custom-call", "infeed", "outfeed", "send", "recv", "send-done", "recv-done", "after-all"}
            | set(registry.CATEGORIES["rng"]) | set(registry.CATEGORIES["collective"]))


#: (an A/B switch) a bitcast-convert between types of one width carried as bits is a loop's
#: member (``emit``'s view of the scalar), not a step of its own between two loops
BITCASTS = True


def fusible(inst):
    if inst.opcode in _NOT_FUSED or not inst.shape.is_array:
        return False
    if not inst.shape.is_static or not all(o.shape.is_static for o in inst.operands):
        return False   # sizes known at run time only: op by op (``verify.run_shape`` checks them)
    from .emit import can_emit, supported_type  # an element-wise op is fused when a loop can compute it
    if not supported_type(inst.shape.element_type):   # no carrier type (f4e2m1fn, ...)
        return False
    if inst.opcode == "constant":
        return inst.shape.rank == 0
    if inst.opcode in _INDEX_OPS:
        return True
    if inst.opcode == "bitcast-convert":   # (one width, types carried as bits: a view)
        return BITCASTS and can_emit(inst)
    if inst.opcode not in registry.CATEGORIES["elementwise"]:
        return False
    return all(o.shape.is_array for o in inst.operands) and can_emit(inst)


def loop_cost(inst):
    """What ``inst`` adds to its fused loop's work (``MAX_FUSED`` bounds the sum): 0 for a
    scalar constant (a run-time argument), a broadcast of a scalar (read once per row,
    ``cpu.fused.RowLoopSource``) and a convert its carrier makes no code of (same type,
    bf16 / f16 to f32); 1 for the rest."""
    if inst.opcode == "constant":
        return 0
    if inst.opcode == "broadcast":
        return 0 if inst.operands[0].shape.rank == 0 else 1
    if inst.opcode == "convert":
        from .emit import carrier, finish, EMITTERS
        src, dst = inst.operands[0].shape.element_type, inst.shape.element_type
        free = carrier(src) == carrier(dst) and finish(EMITTERS["convert"](inst, "a"), dst) == f"{carrier(dst)}(a)"
        return 0 if free else 1
    return 1


class FusionGroup:
    """Instructions computed in one loop over ``root``'s elements."""

    kind = "loop"

    def __init__(self, root):
        self.root = root
        self.members = [root]   # topological order once finalised
        self.inputs = []        # instructions outside the group that members read
        self.cost = loop_cost(root)   # the members' ``loop_cost``s summed

    @property
    def dims(self):
        return self.root.shape.dims

    def __contains__(self, inst):
        return inst in self._set

    def finalise(self, order):
        self._set = set(self.members)
        self.members.sort(key=order.__getitem__)
        seen = set()
        for m in self.members:
            for o in m.operands:
                if o not in self._set and o not in seen:
                    seen.add(o)
                    self.inputs.append(o)
        return self

    def signature(self):
        """A text naming the group's structure (opcodes, types, attributes), not its values."""
        return ";".join(f"{m.opcode}:{m.shape.element_type}" for m in self.members)

    def __repr__(self):
        ops = ", ".join(m.name for m in self.members)
        return f"<FusionGroup {self.root.name}: [{ops}] inputs [{', '.join(i.name for i in self.inputs)}]>"


class GatherFusion(FusionGroup):
    """A gather computed in one loop with its start indices: for each position (in the
    order of the start indices without the index vector dimension), component ``k`` of
    the index vector is ``components[k] = (instruction, m, c)``: component ``c`` of the
    ``m`` that ``instruction`` (an input, or a member of ``elementwise``) holds along the
    index vector dimension; m = 1: its value at the position (its flat order is the
    positions').  ``elementwise``: the element-wise members as a FusionGroup (None when
    there are none), computed at each position.  ``substeps``: the steps it replaces."""

    kind = "gather"

    def __init__(self, gather, components, elementwise, glue, substeps):
        super().__init__(gather)
        self.components = components
        self.elementwise = elementwise
        self.substeps = substeps
        self.members = (list(elementwise.members) if elementwise is not None else []) + list(glue) + [gather]

    def signature(self):
        inner = self.elementwise.signature() if self.elementwise is not None else ""
        return f"gather({inner})"


class DotTranspose(FusionGroup):
    """A dot whose only reader is a transpose (the ``x.T`` after a product that JAX's
    gradients leave in lowered HLO): one step, the dot writing its result in the
    transpose's layout (``C^T = B^T A^T``: BLAS with its operands swapped, or a strided
    output), as XLA folds the transpose into the dot.  ``members``: [dot, transpose];
    ``inputs``: the dot's operands; ``substeps``: the two steps it replaces (a backend
    without the fold runs them)."""

    kind = "dot"

    def __init__(self, dot, transpose, substeps):
        super().__init__(transpose)
        self.members = [dot, transpose]
        self.substeps = substeps

    @property
    def dot(self):
        return self.members[0]

    @property
    def permutation(self):
        return tuple(int(d) for d in self.root.attrs["permutation"])

    def signature(self):
        return "dot-transpose"


class Step:
    __slots__ = ("inst", "group")

    def __init__(self, inst, group=None):
        self.inst, self.group = inst, group


class FusionPlan:
    def __init__(self, computation, steps, last_use):
        #: the computation planned: the one given, or an ``InlinedComputation`` of it
        self.computation = computation
        self.steps = steps
        #: instruction -> index of the last step that reads it (buffers are freed after it)
        self.last_use = last_use
        self._origin = getattr(computation, "origin", None)
        self._merged = getattr(computation, "merged", None) or {}

    def reported(self, inst):
        """The instruction of the original computation whose value ``inst``'s (a step's) is,
        or None where that is no instruction of it (an inlined call's inside)."""
        origin = self._origin
        return inst if origin is None else origin.get(inst, inst)

    def merged(self, inst):
        """The original computation's instructions whose values are ``inst``'s (a step's)
        besides ``reported(inst)``: those ``merge_duplicates`` read as it."""
        return self._merged.get(inst, ())

    @property
    def groups(self):
        return [s.group for s in self.steps if s.group is not None]

    def __str__(self):
        lines = [f"fusion plan of {self.computation.name}:"]
        for s in self.steps:
            if s.group is not None and s.group.kind == "dot":
                lines.append(f"  dot        -> {s.group.root.name} {s.group.root.shape}: dot written transposed")
            elif s.group is not None and s.group.kind == "gather":
                lines.append(f"  fused gather -> {s.group.root.name} {s.group.root.shape}: "
                             + " -> ".join(m.opcode for m in s.group.members))
            elif s.group is not None and len(s.group.members) > 1:
                lines.append(f"  fused loop -> {s.group.root.name} {s.group.root.shape}: "
                             + " -> ".join(m.opcode for m in s.group.members))
            elif s.group is not None:
                lines.append(f"  loop       -> {s.inst.name} {s.inst.shape}: {s.inst.opcode}")
            else:
                lines.append(f"  op         -> {s.inst.name} {s.inst.shape}: {s.inst.opcode}")
        return "\n".join(lines)


def _user_groups(users, group_of, copies):
    """The fused loops that compute ``users`` (a duplicated user: each loop holding a copy;
    None for a user in none), each once."""
    out, seen = [], set()
    for u in users:
        for g in copies.get(u) or (group_of.get(u),):
            if id(g) not in seen:
                seen.add(id(g))
                out.append(g)
    return out


#: cheap element-wise ops (no transcendental, no division: XLA's ``IsExpensive`` spares the
#: same) recomputed in each fused loop that reads them instead of materialised by a loop of
#: their own (``_duplicate``)
_CHEAP = {"add", "subtract", "multiply", "negate", "abs", "maximum", "minimum", "convert", "compare", "select",
          "and", "or", "not", "xor", "clamp", "copy", "sign", "shift-left", "shift-right-logical",
          "shift-right-arithmetic"}


def _array_reads(inst):
    """How many arrays a loop holding ``inst`` reads for it from memory: its operands less
    scalar constants and broadcasts and iotas (index maps; a broadcast of a smaller array
    is read once per row or cached)."""
    return sum(1 for o in inst.operands if o.opcode not in _INDEX_OPS and o.opcode != "constant")


def _duplicate(inst, users, group_of, computation, copies):
    """Put an instruction read by several fused loops into each of them (XLA duplicates them
    too): a broadcast or iota (recomputing it costs an index computation, materialising it
    a whole array written and read back), or a cheap element-wise op (``_CHEAP``) whose
    copies read no more than materialising it would have written and read: at most one
    array read (the x - max of a softmax, read by the exp-sum and by the output), or two
    for two loops.  Each loop's budget (``MAX_FUSED``) must hold the copy.  ``copies``
    (instruction -> the loops holding it) notes it: its own operands then fuse into all of
    them or none.  True when done."""
    if inst is computation.root or not users or any(u.opcode == "broadcast" for u in users):
        return False
    groups = _user_groups(users, group_of, copies)
    if len(users) < 2 and len(groups) < 2 or any(g is None or g.dims != inst.shape.dims for g in groups):
        return False
    if inst.opcode not in _INDEX_OPS:
        reads = _array_reads(inst)
        if len(groups) < 2 or reads > (2 if len(groups) == 2 else 1) \
                or any(g.cost + loop_cost(inst) > MAX_FUSED or len(g.members) >= MAX_MEMBERS for g in groups):
            return False
    for g in groups:
        g.members.append(inst)
        g.cost += loop_cost(inst)
    group_of[inst] = groups[0]
    if len(groups) > 1:
        copies[inst] = groups
    return True


def _loop_kind(g):
    """What a group's generated loop depends on (its structure, types, attribute values, which
    inputs are scalars, the rank): groups of one kind share a compiled loop.  Finer than the
    source text where in doubt, so the budget never under-counts."""
    members = set(g.members)
    return (len(g.dims),) + tuple(
        (m.opcode, m.shape.element_type, m.shape.rank,
         tuple(sorted((k, repr(v)) for k, v in m.attrs.items() if k != "literal")),
         tuple(g.members.index(o) if o in members else ("in", o.shape.element_type, o.shape.rank)
               for o in m.operands))
        for m in g.members)


def _fits(kinds, key, cost):
    """Whether a fused loop of kind ``key`` and work ``cost`` stays within the module's
    budget, ``kinds`` (kind -> work) holding the loops planned so far; noted there if so."""
    if key not in kinds:
        if len(kinds) >= MAX_FUSED_LOOPS or sum(kinds.values()) + cost > MAX_FUSED_WORK:
            return False
        kinds[key] = cost
    return True


def _within_budget(groups, group_of, kinds):
    """Keep fused loops (in program order) while there are at most MAX_FUSED_LOOPS distinct
    ones in ``kinds`` (the module's, shared by its computations) doing at most MAX_FUSED_WORK
    work together; the instructions of the
    groups beyond leave the plan's loops (they run op by op), except broadcasts and iotas,
    which have no other kernel (a loop of their own, one however many loops held it)."""
    out, singles = [], {}
    for g in reversed(groups):   # groups were made from the root backwards
        if len(g.members) > 1:
            if not _fits(kinds, _loop_kind(g), g.cost):
                for m in g.members:
                    # (a copy ``_duplicate`` made: the ops that now run one by one read its
                    # value, so it is computed on its own too, whatever loops hold a copy)
                    if m.opcode in _INDEX_OPS:
                        if m not in singles:
                            singles[m] = group_of[m] = FusionGroup(m)
                            out.append(singles[m])
                    else:
                        group_of.pop(m, None)
                continue
        out.append(g)
    out.reverse()
    return out


class InlinedComputation(HloComputation):
    """``original`` with its inlinable calls replaced by their callees' instructions (see the
    module's doc): what the executors plan and run.  ``origin``: each copy made here -> the
    original's instruction whose value it computes (a caller's instruction copied because an
    operand changed; a call, for its callee's root), or None (the rest of a callee)."""

    def __init__(self, original, instructions, root, origin):
        super().__init__(original.name, instructions, root, original.parameters)
        self.original = original
        self.origin = origin


def inlinable(inst, memo=None):
    """Whether call ``inst`` is inlined into its caller's plan: its computation reaches no
    op with effects (``_EFFECTS``), calls itself nowhere, and brings at most MAX_INLINED
    instructions.  ``memo``: computation -> its size when inlined, or None (reused)."""
    if inst.opcode != "call":
        return False
    size = _inline_size(inst.attrs["computation"], {} if memo is None else memo, ())
    return size is not None and size <= MAX_INLINED


def _inline_size(comp, memo, stack):
    """The instructions ``comp`` brings into a caller when inlined (its inlinable calls as
    what they bring), or None when it cannot be (effects, recursion, too deep)."""
    if comp in memo:
        return memo[comp]
    if comp in stack or len(stack) >= _MAX_INLINE_DEPTH:
        return None
    n = 0
    for inst in comp.instructions:
        if inst.opcode in _EFFECTS:
            memo[comp] = None
            return None
        if inst.opcode == "parameter":
            continue
        called = inst.called_computations()
        sizes = [_inline_size(c, memo, stack + (comp,)) for c in called]
        if any(m is None for m in sizes):   # (an effect or a recursion inside: not inlined)
            memo[comp] = None
            return None
        n += sizes[0] if inst.opcode == "call" and sizes[0] <= MAX_INLINED else 1
    memo[comp] = n
    return n


def inline_calls(computation):
    """``computation`` as an ``InlinedComputation`` (its inlinable calls replaced), or
    ``computation`` itself when it has none."""
    memo = {}
    if not any(inlinable(i, memo) for i in computation.instructions):
        return computation
    remap, out, origin = {}, [], {}
    _inline_into(computation.instructions, remap, out, origin, True, memo)
    return InlinedComputation(computation, out, remap.get(computation.root, computation.root), origin)


def _inline_into(insts, remap, out, origin, top, memo):
    """Append ``insts`` to ``out``, their operands through ``remap`` (original -> its
    replacement), each inlinable call as its callee's instructions (copies); ``top``: the
    caller's own, kept as they are where no operand changed."""
    for inst in insts:
        if inst.opcode == "parameter" and not top:
            continue   # (a callee's parameter: the call's operand, in ``remap``)
        if inlinable(inst, memo):
            callee = inst.attrs["computation"]
            inner = {p: remap.get(o, o) for p, o in zip(callee.parameters, inst.operands)}
            _inline_into(callee.instructions, inner, out, origin, False, memo)
            value = remap[inst] = inner.get(callee.root, callee.root)
            if top and value in origin and origin[value] is None:
                origin[value] = inst   # the callee's root: the call's value
            continue
        operands = [remap.get(o, o) for o in inst.operands]
        if top and all(a is b for a, b in zip(operands, inst.operands)):
            out.append(inst)
            continue
        copy = Instruction(inst.name, inst.opcode, inst.shape, operands, inst.attrs, inst.extra)
        copy.line = inst.line
        remap[inst] = copy
        origin[copy] = inst if top else None
        out.append(copy)


def _planning_order(module, fuse):
    """The computations of ``module`` in the order ``plan_module`` plans them: those that
    run as computations of their own, callees first and the entry last; then those that
    only inlinable calls call (their work is planned inside their callers: what budget is
    left goes to them)."""
    comps = list(module.computations)
    if not (fuse and INLINE_CALLS):
        return comps[::-1]
    memo, used = {}, {id(module.entry)}
    for comp in comps:
        for inst in comp.instructions:
            if not inlinable(inst, memo):
                used.update(id(c) for c in inst.called_computations())
    return [c for c in reversed(comps) if id(c) in used] + [c for c in comps if id(c) not in used]


def plan_module(module, fuse=True):
    """Plan every computation of ``module`` (an XlaComputation) with one budget of
    MAX_FUSED_LOOPS distinct fused loops for them all (in ``_planning_order``: callees
    first, the entry last, then the computations only inlined calls call) so that the
    module's compile time is bounded, however many computations it has.  Remembered on
    the module until its entry changes."""
    key = (module.entry, len(module.entry.instructions), fuse, MAX_FUSED_LOOPS, INLINE_CALLS, MAX_INLINED,
           FOLD_RESHAPES, DUPLICATE_CHEAP, MERGE_DUPLICATES, BITCASTS, UNIT_REDUCES)
    if module.__dict__.get("_fusion_planned") == key:
        return
    kinds = {}
    for comp in _planning_order(module, fuse):
        fusion_plan(comp, fuse, kinds=kinds)
    module.__dict__["_fusion_planned"] = key


def fusion_plan(computation, fuse=True, kinds=None):
    """Group ``computation``'s instructions into fused loops and single steps (cached).
    ``kinds``: the distinct fused loops planned so far in its module (``plan_module``; the
    computation's own loops are added); without it the computation has a budget of its own
    and a plan made before is reused."""
    cached = getattr(computation, "_fusion_plan", None)
    if kinds is None and cached is not None and cached[0] == fuse:
        return cached[1]
    kinds = {} if kinds is None else kinds
    original = computation
    if fuse and INLINE_CALLS:   # (planned, not changed: the plan's computation has the copies)
        computation = inline_calls(computation)
    if fuse and FOLD_RESHAPES:
        computation = fold_reshapes(computation)
    if fuse and UNIT_REDUCES:
        computation = unit_reduces(computation)
    if fuse and MERGE_DUPLICATES:
        computation = merge_duplicates(computation)
    insts = computation.instructions
    order = {inst: k for k, inst in enumerate(insts)}
    users = {inst: [] for inst in insts}
    for inst in insts:
        for o in inst.operands:
            if inst not in users[o]:
                users[o].append(inst)
    group_of = {}
    copies = {}   # an instruction in several loops -> those loops (``_duplicate``)
    groups = []
    for inst in reversed(insts):
        if not fusible(inst):
            continue
        target = None
        us = users[inst]
        if fuse and (inst.opcode in _INDEX_OPS or inst.opcode in _CHEAP and DUPLICATE_CHEAP) \
                and _duplicate(inst, us, group_of, computation, copies):
            continue
        if fuse and us and inst is not computation.root:
            ug = _user_groups(us, group_of, copies)
            g = ug[0]
            if (g is not None and len(ug) == 1
                    and not any(u.opcode == "broadcast" for u in us)  # a broadcast's operand is read, not fused
                    and (inst.shape.dims == g.dims or (inst.opcode == "constant"))
                    and g.cost + loop_cost(inst) <= MAX_FUSED   # a long chain is cut into several loops
                    and len(g.members) < MAX_MEMBERS):
                target = g
        if target is None:
            target = FusionGroup(inst)
            groups.append(target)
        else:
            target.members.append(inst)
            target.cost += loop_cost(inst)
        group_of[inst] = target
    groups = _within_budget(groups, group_of, kinds)
    for g in list(groups):
        if len(g.members) == 1 and g.root.opcode == "constant":
            # a lone scalar constant is a value, not a loop
            groups.remove(g)
            del group_of[g.root]
            continue
        g.finalise(order)
    steps = []
    emitted = set()
    for inst in insts:
        g = group_of.get(inst)
        if g is None:
            steps.append(Step(inst))
        elif inst is g.root and id(g) not in emitted:
            emitted.add(id(g))
            steps.append(Step(inst, g))
    if fuse:
        steps = _fuse_gathers(steps, users, order, computation, kinds)
        steps = _fold_transposes(steps, users, order, computation)
    last_use = {}
    for k, s in enumerate(steps):
        reads = s.group.inputs if s.group is not None else s.inst.operands
        for o in reads:
            last_use[o] = k
    plan = FusionPlan(computation, steps, last_use)
    original._fusion_plan = (fuse, plan)
    return plan


def _fuse_gathers(steps, users, order, computation, kinds):
    """The plan's steps with each gather whose start indices can be computed in its loop
    made a ``GatherFusion`` (in place of the gather's step; the steps it absorbs removed)."""
    step_of = {s.inst: s for s in steps}
    replaced, dropped = {}, set()
    for s in steps:
        if s.group is None and s.inst.opcode == "gather":
            fused = _gather_fusion(s.inst, step_of, users, order, computation)
            if fused is None:
                continue
            key = ("gather", fused.root.operands[0].shape.element_type, fused.root.shape.rank,
                   tuple((c[0].opcode, c[0].shape.element_type, c[1], c[2]) for c in fused.components),
                   tuple(sorted(fused.root.attrs.items())),
                   _loop_kind(fused.elementwise) if fused.elementwise is not None else None)
            if not _fits(kinds, key, fused.elementwise.cost if fused.elementwise is not None else 0):
                continue
            replaced[s.inst] = Step(s.inst, fused)
            dropped.update(id(x) for x in fused.substeps if x is not s)
    if not replaced:
        return steps
    return [replaced.get(s.inst, s) for s in steps if id(s) not in dropped]


def _fold_transposes(steps, users, order, computation):
    """The plan's steps with each dot whose value only a transpose reads (the dot not the
    root) made a ``DotTranspose`` step in place of the transpose's (the dot's removed)."""
    step_of = {s.inst: s for s in steps}
    folded, dropped = {}, set()
    for s in steps:
        t = s.inst
        if s.group is not None or t.opcode != "transpose" or not t.shape.is_array or not t.shape.is_static:
            continue
        d = t.operands[0]
        ds = step_of.get(d)
        if (d.opcode != "dot" or ds is None or ds.group is not None or d is computation.root
                or users[d] != [t] or not d.shape.is_static
                or not all(o.shape.is_array and o.shape.is_static for o in d.operands)):
            continue
        folded[t] = Step(t, DotTranspose(d, t, [ds, s]).finalise(order))
        dropped.add(id(ds))
    if not folded:
        return steps
    return [folded.get(s.inst, s) for s in steps if id(s) not in dropped]


def _unit_glue(piece, ivd, step_of):
    """The operand of ``piece`` when ``piece`` only adds the index vector dimension (size
    1) to it -- a reshape, or a broadcast keeping the other dimensions in order -- so its
    elements are the operand's in the same order; else None."""
    dims = piece.shape.dims
    if ivd >= len(dims) or dims[ivd] != 1 or piece not in step_of:
        return None
    x = piece.operands[0] if piece.operands else None
    if x is None or not x.shape.is_array:
        return None
    if piece.opcode == "reshape" and step_of[piece].group is None:
        return x
    if (piece.opcode == "broadcast" and step_of[piece].group is not None
            and step_of[piece].group.members == [piece]
            and tuple(piece.attrs["broadcast_dimensions"]) == tuple(d for d in range(len(dims)) if d != ivd)):
        return x
    return None


def _gather_fusion(gather, step_of, users, order, computation):
    """A GatherFusion of ``gather`` with the instructions that compute its start indices
    (element-wise loops of the positions' dimensions, the reshapes that add the index
    vector dimension, the concatenate along it), or None when none can be absorbed."""
    operand, indices = gather.operands
    ivd = gather.attrs["index_vector_dim"]
    idims = indices.shape.dims
    if (not operand.shape.is_static or operand.shape.rank == 0 or not all(operand.shape.dims)
            or not all(gather.attrs["slice_sizes"]) or not gather.shape.is_static or not gather.shape.numel
            or not indices.shape.is_static or not gather.attrs["start_index_map"]):
        return None

    def exclusive(x, reader):   # x's value is needed by ``reader`` only: it need not be made
        return x is not computation.root and users[x] == [reader] and x in step_of

    absorbed, glue, components = [], [], []
    group_dims = None   # the element-wise members, all of one shape: one loop over the positions
    ew_groups = []
    if ivd == len(idims):
        pieces = [(indices, gather)]
    elif indices.opcode == "concatenate" and indices.attrs["dimension"] == ivd and exclusive(indices, gather):
        absorbed.append(step_of[indices])
        glue.append(indices)
        pieces = [(p, indices) for p in indices.operands]
    else:
        pieces = [(indices, gather)]
    for piece, reader in pieces:
        m = piece.shape.dims[ivd] if ivd < len(idims) else 1
        x = _unit_glue(piece, ivd, step_of) if exclusive(piece, reader) else None
        if x is not None:
            absorbed.append(step_of[piece])
            glue.append(piece)
            piece, reader = x, piece
        step = step_of.get(piece)
        if (m == 1 and step is not None and step.group is not None and step.group.kind == "loop"
                and step.group.root is piece and exclusive(piece, reader)
                and (group_dims is None or piece.shape.dims == group_dims)):
            group_dims = piece.shape.dims
            absorbed.append(step)
            ew_groups.append(step.group)
        components += [(piece, m, c) for c in range(m)]
    absorbed, glue, ew_groups = (list({id(x): x for x in lst}.values()) for lst in (absorbed, glue, ew_groups))
    if not ew_groups and not (glue and glue[0] is indices and indices.opcode == "concatenate"):
        return None   # nothing computed or assembled on the way: the gather's own kernel
    elementwise = None
    if ew_groups:
        members = []
        seen = set()
        for g in ew_groups:
            for mem in g.members:   # broadcasts / iotas may sit in several groups: once
                if mem not in seen:
                    seen.add(mem)
                    members.append(mem)
        members.sort(key=order.__getitem__)
        elementwise = FusionGroup(members[-1])
        elementwise.members = members
        elementwise.cost = sum(loop_cost(m) for m in members)
        elementwise.finalise(order)
    substeps = sorted(absorbed + [step_of[gather]], key=lambda st: order[st.inst])
    fused = GatherFusion(gather, components, elementwise, sorted(glue, key=order.__getitem__), substeps)
    return fused.finalise(order)


# -- reshapes of broadcasts and iotas, planned as broadcasts and iotas -------------------------

#: (a switch for A/B measurements) reshapes of expanding broadcasts and integer iotas planned
#: as the broadcast / iota they are, so that their loop fuses them (``fold_reshapes``)
FOLD_RESHAPES = True
#: ops that compute nothing but their value: dropped from the plan when a fold leaves them unread
_PURE_INDEX = {"broadcast", "reshape", "iota", "bitcast"}


def _suffix(dims, k):
    """The number of elements after index k of dimension ``k`` (row-major)."""
    from ..shapes import prod
    return prod(dims[k + 1:])


def _through(v, memo):
    """(x, pairs): ``v``'s value is ``x`` broadcast, ``pairs`` (x's dimension, v's dimension)
    for each dimension of x of size above 1 (x's other dimensions are 1), seen through
    broadcasts and reshapes that keep those dimensions whole (a dimension of size n with
    the same number of elements after it on both sides of a reshape is the same index)."""
    got = memo.get(v)
    if got is not None:
        return got
    dims = tuple(int(d) for d in v.shape.dims) if v.shape.is_array and v.shape.is_static else None
    got = (v, [(d, d) for d, n in enumerate(dims) if n > 1]) if dims is not None else (v, None)
    if dims is not None and v.opcode in ("broadcast", "reshape") and len(v.operands) == 1:
        u = v.operands[0]
        if u.shape.is_array and u.shape.is_static and u.shape.element_type == v.shape.element_type:
            x, pairs = _through(u, memo)
            if pairs is not None:
                udims = tuple(int(d) for d in u.shape.dims)
                if v.opcode == "broadcast":
                    bd = tuple(v.attrs.get("broadcast_dimensions", ()))
                    if len(bd) == len(udims):
                        got = (x, [(xd, bd[ud]) for xd, ud in pairs])
                else:
                    out = []
                    for xd, ud in pairs:
                        n, s = udims[ud], _suffix(udims, ud)
                        r = next((r for r in range(len(dims)) if dims[r] == n and _suffix(dims, r) == s), None)
                        if r is None:
                            break
                        out.append((xd, r))
                    else:
                        got = (x, out)
    memo[v] = got
    return got


def _iota_terms(r):
    """For ``r`` a reshape of an integer iota: [(dimension of r, weight)] with the iota's
    value sum(index_k * weight_k), or None.  The iota's dimension must be split whole
    into consecutive dimensions of r (``arange(n).reshape(a, b)``: a*b = n)."""
    u = r.operands[0]
    t = u.shape.element_type
    if u.opcode != "iota" or t[0] not in "su" or t == "pred" or not u.shape.is_static:
        return None
    sdims = tuple(int(d) for d in u.shape.dims)
    rdims = tuple(int(d) for d in r.shape.dims)
    d = u.attrs.get("iota_dimension", 0)
    n, s = sdims[d], _suffix(sdims, d)
    for b in range(len(rdims) - 1, -1, -1):
        if _suffix(rdims, b) != s:
            continue
        p = 1
        for a in range(b, -1, -1):
            p *= rdims[a]
            if p == n:
                terms = [(k, _suffix(rdims[:b + 1], k)) for k in range(a, b + 1) if rdims[k] > 1]
                # (one term: the reshape only adds or drops dimensions of size 1, a view of
                # the iota; a gather's index glue expects it as it is)
                return terms if len(terms) > 1 else None
            if p > n:
                break
    return None


def _replaced(insts, new, origin):
    """(instructions, remap): ``insts`` with each instruction of ``new`` replaced by its new
    instructions (its value the last one's), the readers of a replaced value copied onto
    the replacement; ``origin`` records what each new instruction and copy computes (a
    replacement the original's value, its helpers None)."""
    remap, out = {}, []
    for inst in insts:
        if inst in new:
            made = new[inst]
            out += made
            remap[inst] = made[-1]
            origin[made[-1]] = origin.get(inst, inst)
            for m in made[:-1]:
                origin[m] = None
            continue
        operands = [remap.get(o, o) for o in inst.operands]
        if all(a is b for a, b in zip(operands, inst.operands)):
            out.append(inst)
            continue
        copy = Instruction(inst.name, inst.opcode, inst.shape, operands, inst.attrs, inst.extra)
        copy.line = inst.line
        remap[inst] = copy
        origin[copy] = origin.get(inst, inst)
        out.append(copy)
    return out, remap


def fold_reshapes(computation):
    """``computation`` (or the ``InlinedComputation`` inline_calls made of it) with each
    reshape of an expanding broadcast chain planned as one broadcast of the chain's source
    (``jnp.tile``'s reshape(broadcast(reshape(b))), read by the loop as a broadcast instead
    of materialised), and each reshape of an integer iota that splits the iota's dimension
    as iotas of the reshape's dimensions, weighted and summed (``arange(n).reshape(a, b)``:
    a * iota0 + iota1, computed in the loop); the chain's instructions nothing else reads
    left out.  Planned, not changed: the copies exist in the plan only, as inlined calls'
    do (``origin``: the new instruction computes the reshape's value)."""
    from ..shapes import Shape, prod
    import numpy as np
    if isinstance(computation, InlinedComputation):
        base, origin = computation.original, dict(computation.origin)
    else:
        base, origin = computation, {}
    insts = computation.instructions
    memo, new = {}, {}   # new: reshape -> the instructions computing it, its value last
    for r in insts:
        if r.opcode != "reshape" or not r.shape.is_array or not r.shape.is_static or len(r.operands) != 1:
            continue
        t, rdims = r.shape.element_type, tuple(int(d) for d in r.shape.dims)
        terms = _iota_terms(r)
        if terms is not None:
            made = []
            value = None
            for k, w in terms:
                rs = Shape(t, rdims)
                term = Instruction(f"{r.name}.iota{k}", "iota", rs, [], {"iota_dimension": k, "shape": rs})
                made.append(term)
                if w != 1:
                    c = Instruction(f"{r.name}.w{k}", "constant", Shape(t, ()), [],
                                    {"literal": np.array(w, dtype=Shape(t, ()).dtype), "shape": Shape(t, ())})
                    cb = Instruction(f"{r.name}.w{k}.b", "broadcast", rs, [c],
                                     {"broadcast_dimensions": (), "out_dim_size": rdims})
                    term = Instruction(f"{r.name}.t{k}", "multiply", rs, [term, cb])
                    made += [c, cb, term]
                if value is not None:
                    term = Instruction(f"{r.name}.s{k}", "add", rs, [value, term])
                    made.append(term)
                value = term
            new[r] = made
            continue
        x, pairs = _through(r, memo)
        if x is r or pairs is None or not x.shape.is_array:
            continue
        xdims = tuple(int(d) for d in x.shape.dims)
        vds = [vd for _, vd in sorted(pairs)]
        if prod(rdims) <= prod(xdims) or vds != sorted(vds) or len(set(vds)) != len(vds):
            continue   # (nothing expanded: a reshape of a reshape is a view already)
        made = []
        src = x
        kept = tuple(n for n in xdims if n > 1)
        if kept != xdims:   # x's dimensions of size 1 reshaped away (a view)
            src = Instruction(f"{r.name}.src", "reshape", Shape(t, kept), [x], {"new_sizes": kept})
            made.append(src)
        made.append(Instruction(f"{r.name}.bcast", "broadcast", r.shape, [src],
                                {"broadcast_dimensions": tuple(vds), "out_dim_size": rdims}))
        new[r] = made
    if not new:
        return computation
    # the instructions, each folded reshape as its new ones, readers of it copied
    out, remap = _replaced(insts, new, origin)
    root = remap.get(computation.root, computation.root)
    # what the folds left unread (the chains' broadcasts and reshapes, the iota) is not run
    read = {id(root)}
    for inst in out:
        for o in inst.operands:
            read.add(id(o))
    while True:
        dead = [i for i in out if id(i) not in read and i.opcode in _PURE_INDEX]
        if not dead:
            break
        gone = {id(i) for i in dead}
        out = [i for i in out if id(i) not in gone]
        read = {id(root)} | {id(o) for i in out for o in i.operands}
    return InlinedComputation(base, out, root, origin)


#: (a switch for A/B measurements) a reduce over dimensions of size 1 only planned as the
#: element-wise op it is (``unit_reduces``)
UNIT_REDUCES = True
#: the combiners ``unit_reduces`` plans as their op: commutative, so f(init, x) whichever
#: parameter the region names first
_UNIT_COMBINERS = {"add", "multiply", "and", "or", "xor", "maximum", "minimum"}


def _unit_combiner(reduce):
    """The opcode of ``reduce``'s region when it is one commutative op of its two parameters
    on pred or integers (whose op is exact: no rounding, no denormal rule), else None."""
    comp = reduce.attrs.get("computation")
    if comp is None or len(comp.parameters) != 2:
        return None
    root = comp.root
    if root.opcode not in _UNIT_COMBINERS or len(root.operands) != 2 or set(root.operands) != set(comp.parameters):
        return None
    t = reduce.shape.element_type if reduce.shape.is_array else None
    if t is None or not (t == "pred" or t[0] in "su" and t[1:].isdigit()):
        return None
    if any(p.shape.element_type != t or p.shape.rank for p in comp.parameters) or root.shape.element_type != t:
        return None
    return root.opcode


def unit_reduces(computation):
    """``computation`` (or the ``InlinedComputation`` the passes before made of it) with each
    reduce whose reduced dimensions all have size 1 planned as what it computes, f(init, x)
    element by element: a reshape of x dropping those dimensions (its elements keep their
    row-major order), a broadcast of init and the region's op (pred and integer types, one
    commutative op: ``_unit_combiner``), which a fused loop then computes with its readers.
    JAX's ``take_along_axis`` checks its indices' bounds so (``reduce_and`` over the index
    vector's dimension of size 1: a step of its own, and a pass over the positions, before).
    Planned, not changed, as ``fold_reshapes``' copies are (``origin``: the op computes the
    reduce's value)."""
    from ..shapes import Shape
    if isinstance(computation, InlinedComputation):
        base, origin = computation.original, dict(computation.origin)
    else:
        base, origin = computation, {}
    new = {}
    for r in computation.instructions:
        if r.opcode != "reduce" or len(r.operands) != 2 or not r.shape.is_array or not r.shape.is_static:
            continue
        x, init = r.operands
        if not x.shape.is_array or not x.shape.is_static or init.shape.rank != 0 or r.shape.rank == 0:
            continue
        dims = sorted(int(d) for d in r.attrs.get("dimensions", ()))
        if not dims or any(x.shape.dims[d] != 1 for d in dims):
            continue
        op = _unit_combiner(r)
        if op is None or x.shape.element_type != r.shape.element_type:
            continue
        odims = tuple(int(d) for d in r.shape.dims)
        if tuple(int(n) for k, n in enumerate(x.shape.dims) if k not in dims) != odims:
            continue
        t = r.shape.element_type
        flat = Instruction(f"{r.name}.x", "reshape", Shape(t, odims), [x], {"new_sizes": odims})
        start = Instruction(f"{r.name}.init", "broadcast", Shape(t, odims), [init],
                            {"broadcast_dimensions": (), "out_dim_size": odims})
        value = Instruction(f"{r.name}.op", op, r.shape, [start, flat])
        new[r] = [flat, start, value]
    if not new:
        return computation
    out, remap = _replaced(computation.instructions, new, origin)
    return InlinedComputation(base, out, remap.get(computation.root, computation.root), origin)


#: (a switch for A/B measurements) instructions that compute the same value as an earlier
#: one planned as that one (``merge_duplicates``)
MERGE_DUPLICATES = True
#: ops never merged: their value is not a function of their operands and attributes alone
#: (effects, random state), or they run computations of their own (control flow), or their
#: buffer is updated in place (a while body's dynamic-update-slice, a copy of a carried value)
_NOT_MERGED = (_EFFECTS | {"parameter", "while", "conditional", "call", "fusion", "tuple", "get-tuple-element",
                           "copy", "copy-start", "copy-done", "dynamic-update-slice", "rng-get-and-update-state",
                           "rng-bit-generator", "domain", "optimization-barrier", "add-dependency"})
#: ops whose computations are not compared (each caller runs its own)
_STATEFUL = _EFFECTS | {"rng-get-and-update-state", "rng-bit-generator"}
#: the largest constant compared by value (larger ones are never merged)
_MERGED_CONSTANT_BYTES = 1 << 12


class _Unmergeable(Exception):
    pass


def _value_key(v, memo):
    """A hashable key of attribute value ``v`` equal for equal values (a called computation
    by its structure, an array by its bytes); ``_Unmergeable`` for what has none."""
    import numpy as np
    from ..shapes import Shape
    if v is None or isinstance(v, (bool, int, str)):
        return (type(v).__name__, v)
    if isinstance(v, float):
        return ("float", repr(v))   # (nan equal to nan, -0.0 apart from 0.0)
    if isinstance(v, Shape):
        return ("shape", _shape_key(v))
    if isinstance(v, (np.ndarray, np.generic)):
        a = np.asarray(v)
        if a.nbytes > _MERGED_CONSTANT_BYTES or a.dtype.hasobject:
            raise _Unmergeable
        return ("array", a.dtype.str, a.shape, a.tobytes())
    if isinstance(v, HloComputation):
        return ("computation", _computation_key(v, memo))
    if isinstance(v, (list, tuple)):
        return (type(v).__name__,) + tuple(_value_key(x, memo) for x in v)
    if isinstance(v, dict):
        return ("dict",) + tuple(sorted((str(k), _value_key(x, memo)) for k, x in v.items()))
    raise _Unmergeable


def _shape_key(s):
    if s.is_tuple:
        return ("tuple",) + tuple(_shape_key(t) for t in s.tuple_shapes)
    layout = s.layout
    return (s.element_type, tuple(s.dims), None if s.bounds is None else tuple(s.bounds),
            None if layout is None else repr(layout))


def _computation_key(comp, memo):
    """``comp``'s structure: each instruction's opcode, shape, operands (by position) and
    attributes, its parameters' numbers and its root (names do not count)."""
    key = memo.get(id(comp))
    if key is None:
        if any(inst.opcode in _STATEFUL for inst in comp.instructions):
            raise _Unmergeable   # (effects or state inside: each caller its own)
        memo[id(comp)] = ("recursive", id(comp))   # (a computation calling itself: only itself)
        pos = {inst: k for k, inst in enumerate(comp.instructions)}
        key = (tuple((inst.opcode, _shape_key(inst.shape), tuple(pos.get(o, -1) for o in inst.operands),
                      _attrs_key(inst, memo)) for inst in comp.instructions),
               tuple(pos.get(p, -1) for p in comp.parameters), pos.get(comp.root, -1))
        memo[id(comp)] = key
    return key


def _attrs_key(inst, memo):
    return (tuple(sorted((k, _value_key(v, memo)) for k, v in inst.attrs.items())),
            tuple(sorted((k, repr(v)) for k, v in inst.extra.items() if k != "metadata")))


def merge_duplicates(computation):
    """``computation`` (or the ``InlinedComputation`` the passes before made of it) with
    each instruction that computes what an earlier one does (the same opcode, operands,
    shape, layout and attributes; called computations compared by structure) read as that
    earlier one, as XLA's common-subexpression elimination does: JAX's lowering computes
    ``x.sum`` again inside ``jnp.var`` after ``jnp.mean`` did, and once inlined the two are
    one pass over ``x``.  Never the root, nor ops in ``_NOT_MERGED``, nor two values the
    computation returns.  Planned, not changed:
    ``merged`` names, for each kept instruction, the original instructions whose values are
    its value (reported with it)."""
    insts = computation.instructions
    if isinstance(computation, InlinedComputation):
        base, origin = computation.original, dict(computation.origin)
        merged = {k: list(v) for k, v in getattr(computation, "merged", {}).items()}
    else:
        base, origin, merged = computation, {}, {}
    seen, remap, memo, out = {}, {}, {}, []
    root = computation.root
    # the values the computation returns (the root, the tuples' elements under it): two of
    # them are never made one array (a caller may write one; a loop updates one in place)
    outputs, stack = set(), [root]
    while stack:
        v = stack.pop()
        if v not in outputs:
            outputs.add(v)
            if v.opcode == "tuple":
                stack.extend(v.operands)
    returned = set()   # the kept instructions whose value is returned
    n = 0
    for inst in insts:
        operands = [remap.get(o, o) for o in inst.operands]
        key = None
        if inst.opcode not in _NOT_MERGED and inst is not root:   # (parameters are in _NOT_MERGED)
            try:
                key = (inst.opcode, _shape_key(inst.shape), tuple(id(o) for o in operands), _attrs_key(inst, memo))
            except _Unmergeable:
                key = None
        first = None if key is None else seen.get(key)
        if first is not None and inst in outputs:
            if first in returned:
                first = None   # (both returned: two arrays)
            else:
                returned.add(first)
        if first is not None:   # the same value as ``first``'s: read as it
            n += 1
            remap[inst] = first
            was = origin.get(inst, inst)
            same = ([] if was is None else [was]) + merged.pop(inst, [])
            if same:   # (the originals whose value this is; none for an inlined call's inside)
                merged.setdefault(first, []).extend(same)
            continue
        kept = inst
        if any(a is not b for a, b in zip(operands, inst.operands)):
            kept = Instruction(inst.name, inst.opcode, inst.shape, operands, inst.attrs, inst.extra)
            kept.line = inst.line
            remap[inst] = kept
            origin[kept] = origin.get(inst, inst)
            if inst in merged:
                merged[kept] = merged.pop(inst)
        if key is not None:
            seen.setdefault(key, kept)
        if inst in outputs:
            returned.add(kept)
        out.append(kept)
    if not n:
        return computation
    result = InlinedComputation(base, out, remap.get(root, root), origin)
    result.merged = merged
    return result
