"""The hierarchy a big module's graph collapses by: groups of instructions, nested.

Real programs have thousands of instructions, and Graphviz lays out a few hundred
nodes at most in reasonable time (its crossing minimisation grows much faster than the
graph).  So a graph shows *groups*, each drawn as one node until it is opened:

- **called computations** (fusions, while bodies and conditions, branches, ``call``
  targets, non-trivial reduce bodies): a closed one is a line on its caller's node
  ("▸ calls fused_computation.3 · 12 instructions"); opened, a cluster as before;
- **scopes** from the ``op_name`` JAX records in each instruction's metadata
  (``jit(f)/transpose(jvp(layer3))/dot_general``: the scopes ``jit(f)``,
  ``transpose(jvp(layer3))``; the last part is the primitive);
- **parts**: a group with more than ``MAX_CHILDREN`` children (a module without metadata,
  a huge flat scope) gathers its parameters into one part, then its runs of loose
  instructions, then cuts what is left into consecutive parts in program order, so every
  group opens onto a picture of a dozen or so nodes.

Constants and what is computed from constants alone (``broadcast(constant(0))``) are
literals more than data flow: they do not count towards a group's children, and a
picture draws one only beside a user it draws (see ``render.view``).

The scopes that every instruction of a computation shares (``jit(f)``) are left out.
Instructions without a scope of their own (constants, the broadcasts of constants,
parameters) go where all their users are: into the deepest scope the users share.  A
scope with one child is merged into it.  Trivial computations (the ``add`` of a sum) are
no groups: the caller's node names them, as in the full picture.

``Hierarchy(module)`` builds the tree in one pass over the instructions; ``group(key)``,
``find(query)``, ``enclosing(name)`` and ``default_open(max_nodes)`` answer the
questions the graph and the widget ask.  Source locations (``file:line``) come from the
metadata's ``source_file``/``source_line`` or its ``stack_frame_id`` (with the module's
``StackFrames`` sections).
"""
import collections
import difflib
import functools
import itertools
import re
from dataclasses import dataclass, field

from ..ops import registry
from .model import called, shape_text, trivial_summary

#: most children a group shows when opened; more are cut into parts
MAX_CHILDREN = 16
#: more parameters than this side by side in one group are gathered into a "parameters"
#: part: a gradient's weights sit in one rank, and six of them (a 6-layer MLP) made the
#: first picture ~700 pt wide before anything else was drawn
MAX_PARAMETERS = 4


@dataclass(eq=False)
class Item:
    """One instruction in the hierarchy."""
    index: int                   # position in ``Hierarchy.items`` (program order, callees after callers)
    inst: object
    computation: object
    group: "Group" = None        # the innermost group holding it
    callees: list = field(default_factory=list)   # (attribute, Group) of the computations it opens
    calls: list = field(default_factory=list)     # (attribute, computation) it calls, trivial ones too
    users: list = field(default_factory=list)     # the Items using its value
    meta: dict = field(default_factory=dict)      # its metadata (op_name, source_file, stack_frame_id...)
    constant: bool = False       # a function of literals only (constant, iota, broadcasts of them)
    operand_items: list = field(default_factory=list)  # the Items of its operands (this call site's copy)
    home: "Group" = None         # the group of the computation (this call site's copy) holding it

    @property
    def name(self):
        return self.inst.name

    def __repr__(self):
        where = self.group.key if self.group is not None else "?"
        return f"<Item {self.inst.name} ({self.inst.opcode}) in {where!r}>"


@dataclass(eq=False)
class Group:
    """A group of instructions: a called computation, a JAX scope, or a part of a long one."""
    key: str                     # unique in the module: "comp" | "comp:scope/path" | "<parent key>#3"
    kind: str                    # "module" | "computation" | "scope" | "part"
    label: str                   # what the node's title says
    computation: object
    parent: "Group" = None       # for a called computation: its first caller's group
    children: list = field(default_factory=list)  # Items and Groups (not called computations)
    caller: Item = None          # called computations: the (first) caller
    size: int = 0                # instructions inside, called computations included
    index: int = 0               # position in ``Hierarchy.groups``
    scope: str = ""              # scope groups: the op_name prefix
    home: "Group" = None         # the computation group (this call site's copy) it is part of
    root_item: Item = None       # computation groups: the Item of the computation's root
    shared: int = 1              # computation groups: how many call sites draw this computation

    def ancestors(self):
        """The groups around this one, innermost first (a computation's: its caller's)."""
        out, g = [], self.parent
        while g is not None:
            out.append(g)
            g = g.parent
        return out

    def items(self):
        """Every instruction inside, called computations included, in order."""
        for child in self.children:
            if isinstance(child, Group):
                yield from child.items()
            else:
                yield child
                for _, callee in child.callees:
                    yield from callee.items()

    def __repr__(self):
        return f"<Group {self.key!r} {self.kind}: {self.size} instructions>"


# -- metadata -------------------------------------------------------------------------------
_META = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|[^\s}]+)')


def metadata_of(inst):
    """An instruction's ``metadata={...}`` as a dict of strings (empty when it has none)."""
    raw = inst.extra.get("metadata")
    if not isinstance(raw, str):
        return {}
    return {k: (v[1:-1] if v.startswith('"') else v) for k, v in _META.findall(raw)}


@functools.lru_cache(maxsize=65536)
def scope_of_op_name(op_name):
    """The scopes of an ``op_name``: ``"jit(f)/transpose(jvp(g))/mul"`` -> ``("jit(f)",
    "transpose(jvp(g))")`` (the last part, the primitive, is no scope).  XLA joins the
    names of merged ops with ``;``: the first one counts."""
    if not op_name:
        return ()
    first = _split_depth0(op_name, ";")[0]
    parts = [p for p in _split_depth0(first, "/") if p]
    return tuple(parts[:-1])


_BRACKETS = re.compile(r"[()\[\]{}/;]")


def _split_depth0(text, sep):
    """``text`` split at each ``sep`` outside brackets."""
    if "(" not in text and "[" not in text and "{" not in text:
        return text.split(sep)
    out, depth, start = [], 0, 0
    for m in _BRACKETS.finditer(text):
        c = m.group()
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == sep and depth == 0:
            out.append(text[start:m.start()])
            start = m.end()
    out.append(text[start:])
    return out


class SourceLocations:
    """``file:line`` of instructions, from metadata and the module's StackFrames sections."""

    def __init__(self, debug_sections=None):
        sections = debug_sections or {}
        self.files = self._table(sections.get("FileNames", ()))
        self.functions = self._table(sections.get("FunctionNames", ()))
        self.locations = {k: dict(_META.findall(v)) for k, v in self._table(sections.get("FileLocations", ())).items()}
        self.frames = {k: dict(_META.findall(v)) for k, v in self._table(sections.get("StackFrames", ())).items()}

    @staticmethod
    def _table(lines):
        out = {}
        for line in lines:
            number, _, rest = line.partition(" ")
            rest = rest.strip()
            out[number] = rest[1:-1] if rest.startswith('"') and rest.endswith('"') else rest
        return out

    def frame(self, frame_id):
        """(file, line, function) of one stack frame, or None."""
        frame = self.frames.get(str(frame_id))
        if frame is None:
            return None
        loc = self.locations.get(frame.get("file_location_id", ""), {})
        file = self.files.get(loc.get("file_name_id", ""), "?")
        function = self.functions.get(loc.get("function_name_id", ""), "")
        return file, int(loc.get("line", 0) or 0), function

    def stack(self, inst, depth=8, meta=None):
        """The call stack of an instruction, innermost first: [(file, line, function)]."""
        meta = metadata_of(inst) if meta is None else meta
        if "source_file" in meta:
            return [(meta["source_file"], int(meta.get("source_line", 0) or 0), "")]
        out, frame_id, seen = [], meta.get("stack_frame_id"), set()
        while frame_id and frame_id not in seen and len(out) < depth:
            seen.add(frame_id)
            located = self.frame(frame_id)
            if located is None:
                break
            out.append(located)
            parent = self.frames.get(frame_id, {}).get("parent_frame_id")
            frame_id = parent if parent and parent != "0" else None
        return out

    def where(self, inst, meta=None):
        """``"model.py:12"`` (file base name and line) or ``""``."""
        stack = self.stack(inst, depth=1, meta=meta)
        if not stack:
            return ""
        file, line, _ = stack[0]
        return f"{file.rsplit('/', 1)[-1]}:{line}" if line else file.rsplit("/", 1)[-1]


#: JAX's transformations as they wrap a scope's name in op_name, and what a label says of them
_TRANSFORMS = {"jvp": "", "transpose": "backward", "vmap": "vmap", "pjit": "", "jit": "", "remat": "remat",
               "checkpoint": "remat", "custom_jvp_call": "", "custom_vjp_call": "", "named_call": "",
               "shard_map": "", "pmap": "", "xmap": ""}
_WRAPPED = re.compile(r"([A-Za-z_][\w]*)\((.*)\)")
#: scope components a label keeps (the innermost ones); the full path is on hover
LABEL_PARTS = 2


def short_scope(part):
    """A scope component as a label: JAX's transformations peeled off the name they wrap,
    the backward pass said once: ``transpose(jvp(layer3))`` -> ``layer3 · backward``,
    ``jvp(mlp)`` -> ``mlp``, ``jit(f)`` -> ``f``, ``transpose(jvp())`` -> ``backward``,
    ``jvp()`` -> ``forward``;
    anything else (``while``, ``cond[...]``) as it is."""
    notes, inner, seen = [], part, set()
    while True:
        m = _WRAPPED.fullmatch(inner)
        if m is None or m.group(1) not in _TRANSFORMS:
            break
        seen.add(m.group(1))
        note = _TRANSFORMS[m.group(1)]
        if note and note not in notes:
            notes.append(note)
        inner = m.group(2)
    if inner == part:
        return part
    if not inner and not notes and "jvp" in seen:  # jvp() of an unnamed function: its forward pass
        return "forward"
    if not inner or not re.fullmatch(r"[\w.\-]+", inner):  # jvp(), or a wrapped expression
        return " · ".join(notes) if notes and not inner else part
    return " · ".join([inner] + notes)


def _join_labels(outer, inner):
    """The label of a scope merged into its only child: the innermost ``LABEL_PARTS``
    components (``…/`` when some are left out)."""
    parts = [p for p in (outer.split("/") + inner.split("/")) if p and p != "…"]
    if len(parts) <= LABEL_PARTS:
        return "/".join(parts)
    return "…/" + "/".join(parts[-LABEL_PARTS:])


# -- the tree ---------------------------------------------------------------------------------
class Hierarchy:
    """The groups of a module (see the module docstring).

    ``items``: every instruction of the entry and of the non-trivial computations it
    calls (each once); ``groups``: key -> Group; ``root``: the entry's group.
    """

    def __init__(self, entry, computations=(), *, debug_sections=None, expand_trivial=False,
                 subcomputations=True, max_children=MAX_CHILDREN, scopes=True):
        self.entry = entry
        self.module_computations = {c.name: c for c in (list(computations) or [entry])}
        self.expand_trivial, self.subcomputations = expand_trivial, subcomputations
        self.max_children, self.use_scopes = max(2, max_children), scopes
        self.sources = SourceLocations(debug_sections)
        self.items, self.groups = [], {}
        self._summaries, self._shape_texts = {}, {}
        self.item_of = {}            # id(instruction) -> Item (its first call site's, when shared)
        self.computation_group = {}  # id(computation) -> Group (its first call site's)
        self.sites = collections.defaultdict(list)  # id(computation) -> its Groups, one per call site
        # a computation called from several places is drawn at each (its own copy of the
        # groups, opened and closed apart); copies stop when they would more than double the
        # module (a body called a thousand times): later callers then name the first one
        self._copy_budget = sum(len(c.instructions) for c in self.module_computations.values())
        self._numbers = itertools.count()
        self.root = self._computation(entry, None, None)
        self._sizes(self.root)

    # -- building ---------------------------------------------------------------------------
    def _new_group(self, key, kind, label, comp, parent, **kw):
        # a counter, not len(groups): merged scopes leave the dict, their numbers stay taken
        g = Group(key, kind, label, comp, parent, index=next(self._numbers), **kw)
        g.home = parent.home if parent is not None else None  # a computation's group: itself (set after)
        self.groups[key] = g
        return g

    def _computation(self, comp, caller, parent):
        kind = "module" if caller is None else "computation"
        key = comp.name
        if self.sites[id(comp)]:  # another call site: its own copy, keyed by its caller
            key = f"{comp.name}@{caller.inst.name}"
            while key in self.groups:
                key += "'"
        group = self._new_group(key, kind, comp.name, comp, parent, caller=caller)
        group.home = group
        self.computation_group.setdefault(id(comp), group)
        self.sites[id(comp)].append(group)
        for site in self.sites[id(comp)]:
            site.shared = len(self.sites[id(comp)])
        local = {}  # id(instruction) -> Item of this copy
        metas = {id(i): metadata_of(i) for i in comp.instructions}
        scopes = self._scopes(comp, metas) if self.use_scopes else {}
        tops = {}  # scope tuple -> Group (the trie of this computation's scopes)
        for inst in comp.instructions:
            target = self._scope_group(group, scopes.get(id(inst), ()), tops)
            item = Item(len(self.items), inst, comp, target, meta=metas[id(inst)], home=group)
            self.items.append(item)
            self.item_of.setdefault(id(inst), item)
            local[id(inst)] = item
            target.children.append(item)
            operands = [local.get(id(o)) for o in inst.operands]
            item.operand_items = operands
            for o in operands:
                if o is not None:
                    o.users.append(item)
            item.constant = _is_constant(inst, operands)
            item.calls = called(inst, self.module_computations)
            for key, callee in item.calls:
                if not self.subcomputations or any(g.caller is item for g in self.sites[id(callee)]):
                    continue
                if not self.expand_trivial and trivial_summary(callee) is not None:
                    continue
                if self.sites[id(callee)]:
                    size = _closure_size(callee, self.module_computations)
                    if size > self._copy_budget:
                        continue
                    self._copy_budget -= size
                item.callees.append((key, self._computation(callee, item, target)))
        group.root_item = local.get(id(comp.root))
        self._simplify(group)
        self._cut(group)
        self._set_parents(group)
        return group

    def _scope_group(self, group, scope, tops):
        if not scope:
            return group
        found = tops.get(scope)
        if found is not None:
            return found
        parent = self._scope_group(group, scope[:-1], tops)
        path = "/".join(scope)
        g = self._new_group(f"{group.key}:{path}", "scope", short_scope(scope[-1]), group.computation,
                            parent, scope=path)
        parent.children.append(g)
        tops[scope] = g
        return g

    def _scopes(self, comp, metas):
        """id(instruction) -> scope tuple; an instruction without one takes the deepest
        scope all its users share (constants, parameters, broadcasts of constants)."""
        own = {id(i): scope_of_op_name(metas[id(i)].get("op_name", "")) for i in comp.instructions}
        # the scopes every instruction shares (``jit(f)``; a fusion's whole layer) group nothing
        shared = None
        for scope in own.values():
            if scope:
                shared = scope if shared is None else _common_prefix(shared, scope)
        if shared:
            own = {k: v[len(shared):] if v else v for k, v in own.items()}
        users = collections.defaultdict(list)
        for inst in comp.instructions:
            for o in inst.operands:
                users[id(o)].append(inst)
        out = {}
        for inst in reversed(comp.instructions):  # users come after their operands
            scope = own[id(inst)]
            if not scope and inst is not comp.root and users.get(id(inst)):
                shared = None
                for u in users[id(inst)]:
                    s = out[id(u)]
                    shared = s if shared is None else _common_prefix(shared, s)
                    if not shared:
                        break
                scope = shared or ()
            out[id(inst)] = scope
        return out

    def _simplify(self, group):
        """Merge every scope that has a single child into that child."""
        new = []
        for child in group.children:
            if isinstance(child, Group):
                self._simplify(child)
                while isinstance(child, Group) and child.kind == "scope" and len(child.children) == 1:
                    only = child.children[0]
                    del self.groups[child.key]
                    if isinstance(only, Group) and only.kind == "scope":  # keep the outer scope's words
                        only.label = _join_labels(child.label, only.label)
                    child = only
            new.append(child)
        group.children = new

    def _cut(self, group):
        """Cut groups with more than ``max_children`` children (constants not counted):
        parameters into one part, runs of loose instructions into parts, then the rest
        into consecutive parts."""
        for child in group.children:
            if isinstance(child, Group):
                self._cut(child)
        k = self.max_children
        params = [c for c in group.children if isinstance(c, Item) and c.inst.opcode == "parameter"]
        if _weight(group.children) <= k and len(params) <= MAX_PARAMETERS:
            return
        if 1 < len(params) < len(group.children):
            part = self._new_group(f"{group.key}#parameters", "part", "parameters", group.computation, group)
            part.children = params
            self._cut(part)
            first = group.children.index(params[0])
            rest = [c for c in group.children if not (isinstance(c, Item) and c.inst.opcode == "parameter")]
            group.children = rest[:first] + [part] + rest[first:]
        if _weight(group.children) > k and any(isinstance(c, Group) for c in group.children):
            # runs of loose instructions between the groups
            new, run, number = [], [], 0

            def flush():
                nonlocal number
                if _weight(run) > 1:
                    number += 1
                    part = self._new_group(f"{group.key}#{number}", "part", "part", group.computation, group)
                    part.children = list(run)
                    self._cut(part)
                    new.append(part)
                else:
                    new.extend(run)
                run.clear()
            for child in group.children:
                if isinstance(child, Group):
                    flush()
                    new.append(child)
                else:
                    run.append(child)
            flush()
            group.children = new
        level = 0
        while _weight(group.children) > k:  # still too many: consecutive parts
            level += 1
            n = len(group.children)
            count = -(-n // k)  # as few parts as hold at most k children each, balanced
            per = -(-n // count)
            chunks = [group.children[i:i + per] for i in range(0, n, per)]
            parts = []
            for j, chunk in enumerate(chunks, 1):
                if len(chunk) == 1:
                    parts.append(chunk[0])
                    continue
                key = f"{group.key}#{'.' * level}{j}"
                part = self._new_group(key, "part", "part", group.computation, group)
                part.children = chunk
                parts.append(part)
            group.children = parts
        parts = [c for c in group.children if isinstance(c, Group) and c.kind == "part" and c.label != "parameters"]
        for j, part in enumerate(parts, 1):  # "part 2/3": where it is; what it holds is on its node
            part.label = f"part {j}/{len(parts)}" if len(parts) > 1 else "operations"

    def _set_parents(self, group):
        for child in group.children:
            if isinstance(child, Group):
                child.parent = group
                self._set_parents(child)
            else:
                child.group = group
                for _, callee in child.callees:
                    callee.parent = group

    def _sizes(self, group):
        total = 0
        for child in group.children:
            if isinstance(child, Group):
                total += self._sizes(child)
            else:
                total += 1
                for _, callee in child.callees:
                    total += self._sizes(callee)
        group.size = total
        return total

    # -- questions -----------------------------------------------------------------------------
    def __len__(self):
        return len(self.items)

    def item(self, name, computation=None):
        """The Item of instruction ``name`` (in ``computation``, when names repeat)."""
        found = [it for it in self.items if it.inst.name == name and
                 (computation is None or it.computation.name == getattr(computation, "name", computation))]
        if not found:
            names = [it.inst.name for it in self.items]
            close = difflib.get_close_matches(name, names, n=5)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise KeyError(f"no instruction named {name!r} in the graph{hint}")
        return found[0]

    def groups_named(self, key):
        """The groups a name means: a group's key or a computation's name (one group); else
        the scopes whose path ends with ``key``, part by part, each part the same or
        wrapping the same word: ``"layer3"`` names ``jvp(layer3)`` and
        ``transpose(jvp(layer3))`` (not ``layer30``), ``"layer3/mlp"`` their ``mlp``."""
        if isinstance(key, Group):
            return [key]
        if key in self.groups:
            return [self.groups[key]]
        wanted = [p for p in _split_depth0(key, "/") if p]
        words = [re.compile(r"(?<![\w.])" + re.escape(p) + r"(?![\w.])") for p in wanted]
        found = []
        for g in self.groups.values():
            if g.kind != "scope" or not wanted:
                continue
            parts = _split_depth0(g.scope, "/")
            if len(parts) >= len(wanted) and all(
                    part == w or word.search(part) for part, w, word in zip(parts[-len(wanted):], wanted, words)):
                found.append(g)
        return found

    def group(self, key):
        """The one group ``key`` names (see ``groups_named``); KeyError if none or several."""
        matches = self.groups_named(key)
        if len(matches) == 1:
            return matches[0]
        if matches:
            raise KeyError(f"{key!r} names {len(matches)} groups: " + ", ".join(g.key for g in matches[:8]) +
                           (" …" if len(matches) > 8 else "") + "; give one of these keys")
        close = difflib.get_close_matches(key, list(self.groups), n=5)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise KeyError(f"no group {key!r} in the graph{hint}")

    def enclosing(self, name, computation=None):
        """The groups around instruction ``name``, innermost first (called computations'
        groups and their callers' groups included)."""
        item = name if isinstance(name, Item) else self.item(name, computation)
        out, g = [], item.group
        while g is not None:
            out.append(g)
            g = g.parent
        return out

    def resolve(self, target):
        """(groups, Item or None) for a name given to expand=, collapse=, highlight=: the
        groups it names (each followed by its ancestors), or for an instruction (a name or
        a ``(computation, name[, invocation])`` frame) the groups around it, innermost first."""
        computation = None
        if isinstance(target, (tuple, list)):
            computation, target = target[0], target[1]
        elif isinstance(target, Group) or target in self.groups or not self._named(target):
            groups = self.groups_named(target)
            if not groups:
                self.group(target)  # raises, with close names
            out = []
            for g in groups:
                out += [g, *g.ancestors()]
            return out, None
        item = self.item(target, computation)
        return self.enclosing(item), item

    def shape_text(self, inst):
        """``shape_text(inst.shape)``, worked out once per instruction."""
        text = self._shape_texts.get(id(inst))
        if text is None:
            text = self._shape_texts[id(inst)] = shape_text(inst.shape)
        return text

    def near(self, item, radius):
        """Indices of the items at most ``radius`` edges from ``item`` (operands, users, and
        a caller and the root of a computation it opens, as the graph draws them)."""
        seen, frontier = {item.index}, [item]
        for _ in range(radius):
            nxt = []
            for it in frontier:
                others = list(it.operand_items) + it.users
                others += [g.root_item for _, g in it.callees]
                group = it.home
                if group is not None and group.caller is not None and it.inst is it.computation.root:
                    others.append(group.caller)
                for o in others:
                    if o is not None and o.index not in seen:
                        seen.add(o.index)
                        nxt.append(o)
            frontier = nxt
        return seen

    def summary(self, group):
        """(Counter of opcodes, {file: [count, first line, last line]}) of the instructions
        in ``group``, called computations included; worked out once per group."""
        cached = self._summaries.get(group.key)
        if cached is not None:
            return cached
        ops, files = collections.Counter(), {}

        def add_files(other):
            for file, (k, lo, hi) in other.items():
                mine = files.setdefault(file, [0, lo, hi])
                mine[0] += k
                mine[1], mine[2] = min(mine[1], lo), max(mine[2], hi)

        def add_item(it):
            ops[it.inst.opcode] += 1
            stack = self.sources.stack(it.inst, depth=1, meta=it.meta)
            if stack and stack[0][1]:
                file = stack[0][0].rsplit("/", 1)[-1]
                add_files({file: [1, stack[0][1], stack[0][1]]})
            for _, callee in it.callees:
                sub_ops, sub_files = self.summary(callee)
                ops.update(sub_ops)
                add_files(sub_files)
        for child in group.children:
            if isinstance(child, Group):
                sub_ops, sub_files = self.summary(child)
                ops.update(sub_ops)
                add_files(sub_files)
            else:
                add_item(child)
        self._summaries[group.key] = ops, files
        return ops, files

    def _named(self, name):
        if not hasattr(self, "_by_name"):
            self._by_name = collections.defaultdict(list)
            for it in self.items:
                self._by_name[it.inst.name].append(it)
        return self._by_name.get(name, [])

    def find(self, query, limit=None):
        """Instructions matching ``query``, in order: a name (or part of one), an opcode,
        a shape (``f32[64,64]``, or part: ``[64,``), or a scope word from the metadata;
        ``op:dot``, ``name:mul``, ``shape:f32[`` and ``scope:layer3`` match one field only.
        Instructions inside closed groups are found too."""
        query = query.strip()
        if not query:
            return []
        field_, _, text = query.partition(":")
        if field_ not in ("op", "name", "shape", "scope") or not text:
            field_, text = None, query
        text = text.lower()
        out = []
        for it in self.items:
            inst = it.inst
            hit = False
            if field_ in (None, "name") and text in inst.name.lower():
                hit = True
            elif field_ in (None, "op") and (inst.opcode == text if field_ else inst.opcode.lower() == text):
                hit = True
            elif field_ in (None, "shape") and text in self.shape_text(inst).lower():
                hit = True
            elif field_ in (None, "scope") and text in it.meta.get("op_name", "").lower():
                hit = True
            if hit:
                out.append(it)
                if limit is not None and len(out) >= limit:
                    break
        return out

    # -- views -------------------------------------------------------------------------------
    def default_open(self, max_nodes):
        """The groups the first picture opens: level by level from the module's, a whole
        level at a time (scopes and parts before called computations) while the picture
        stays within ``max_nodes`` nodes (constants not counted); of the first level that
        does not fit, while the picture is less than half full, the groups that still do,
        in program order."""
        opened = {self.root.key}
        visible = _weight(self.root.children)
        frontier = [self.root]
        while frontier:
            scopes, computations = [], []
            for g in frontier:
                for child in g.children:
                    if isinstance(child, Group):
                        if not child.key.endswith("#parameters"):  # a list of parameters says little
                            scopes.append(child)
                    else:
                        computations.extend(callee for _, callee in child.callees)
            frontier, partial = [], False
            for level in (scopes, computations):
                grow = sum(_weight(g.children) - (g.kind != "computation") for g in level)
                if visible + grow <= max_nodes:
                    opened |= {g.key for g in level}
                    visible += grow
                    frontier += level
                    continue
                if visible * 2 > max_nodes:
                    continue  # half the picture is there: opening some groups of this level unbalances it
                for g in level:  # the level does not fit: its first groups that do, and stop
                    grow = _weight(g.children) - (g.kind != "computation")
                    if visible + grow <= max_nodes:
                        opened.add(g.key)
                        visible += grow
                        partial = True
            if partial:
                break
        return opened


def _child_name(child):
    return child.label if isinstance(child, Group) else child.inst.name


def _weight(children):
    """How many nodes a group's children make when it opens (constants not counted)."""
    return sum(1 for c in children if isinstance(c, Group) or not c.constant)


def _is_constant(inst, operands):
    """Whether an instruction computes from literals alone: a constant or iota, or an
    element-wise or data-movement op (registry categories) of such instructions only."""
    cats = registry.CATEGORIES
    if inst.opcode in cats.get("constant", ()) and inst.opcode != "parameter":
        return True
    if not operands or inst.called_computations():
        return False
    if inst.opcode not in cats.get("elementwise", ()) and inst.opcode not in cats.get("data_movement", ()):
        return False
    return all(o is not None and o.constant for o in operands)


def _closure_size(comp, computations, seen=None):
    """Instructions in ``comp`` and everything it calls (each computation once)."""
    seen = set() if seen is None else seen
    if id(comp) in seen:
        return 0
    seen.add(id(comp))
    total = len(comp.instructions)
    for inst in comp.instructions:
        for _, callee in called(inst, computations):
            total += _closure_size(callee, computations, seen)
    return total


def _common_prefix(a, b):
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return a[:n]


__all__ = ["Hierarchy", "Group", "Item", "SourceLocations", "metadata_of", "scope_of_op_name", "short_scope",
           "MAX_CHILDREN"]
