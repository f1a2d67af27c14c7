"""The picture of an index map, as data: grids, marks, steps, the formula filled in.

One model, drawn two ways (``scene.py`` lays a picture out in pixels; ``draw.py`` draws
it as matplotlib figures and GIF / HTML frames, ``view.py`` as the interactive SVG view),
so the pictures cannot disagree.

- ``OpContext``: one op instance with values: its operands, bound attributes, result and
  ``IndexMap`` (from ``xe.animate(comp, "gather.1", *args)`` or ``xe.animate("gather", ...)``).
  Values may be ``Unknown`` (shapes only): the picture then says so instead of drawing zeros.
- ``Animator`` (one per opcode, in ``animate/<family>.py``): names the grids, says in which
  order the steps go, which cells each step highlights (``mark``) and how the spec's
  formula reads with the step's values (``explain``).
- ``Frame``: one step's highlighted cells of each grid with their role, and the formula.
- ``Animation``: the grids and the sampled ``frames``; ``frame_at(index)`` makes the frame
  of any domain element (the interactive view's selection).

Cells are addressed by their *position* in the grid's lattice.  For most grids that is
the element index; ReduceWindow and SelectAndScatter draw the operand padded and
base-dilated, where elements sit at ``padding_low + index * base_dilation`` and the other
cells are padding or holes (``Grid.index_of`` / ``Grid.position`` convert).
"""
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from ..ops import registry
from ..ops.index_map import UNKNOWN, Candidates, Unknown, is_unknown

#: dynamic roles, lowest priority first: (colour, legend text).  A cell with two roles
#: shows the later one.  One colour per meaning, the same in every picture of the tool.
ROLES = {
    "done": ("#d8d0e6", "earlier steps"),
    "candidate": ("#9fe0d0", "may be read or written (index unknown)"),
    "window": ("#bcd7ee", "slice / window"),
    "clamped": ("#f7b8a8", "window at its clamped start"),
    "index": ("#a6dba0", "indices used"),
    "init": ("#e6df8a", "init value"),
    "padding": ("#ffd84d", "padding"),
    "hole": ("#f0a0c8", "dilation hole"),
    "skipped": ("#a8a8a8", "skipped (out of bounds)"),
    "read": ("#5b9bd5", "read"),
    "selected": ("#e8524a", "selected"),
    "write": ("#b18adb", "written"),
    "collision": ("#8c6d46", "combined again (collision)"),
    "current": ("#ff9f1c", "this element"),
}
#: static roles (the same in every frame), drawn pale under the dynamic ones
STATIC = {
    "padding": ("#fff5cc", "padding cell"),
    "hole": ("#fbe3ef", "dilation hole cell"),
    "cropped": ("#d9ccb8", "cropped (negative padding)"),
    "window": ("#dbe9f7", "sliced part"),
}
#: roles whose colour is dark enough for white text
DARK = {"read", "selected", "collision", "skipped"}
_STATIC_CODES = {name: i + 1 for i, name in enumerate(STATIC)}
_STATIC_NAMES = {v: k for k, v in _STATIC_CODES.items()}
_PRIORITY = {name: i for i, name in enumerate(ROLES)}

#: grids whose values may be copied as running values (Scatter's result) are this small
TEXT_CELLS = 150


# -- values and formatting ---------------------------------------------------------------------

def val(x):
    """An operand or result as an array (an ``Unknown`` stays as it is)."""
    if isinstance(x, Unknown) or isinstance(x, tuple):
        return x
    return np.asarray(x)


def fmt_index(index):
    return "[" + ", ".join(str(int(i)) for i in index) + "]"


def fmt_list(values):
    return "[" + ", ".join(_num(v) for v in values) + "]"


def _num(v):
    if v is UNKNOWN:
        return "?"
    if isinstance(v, Fraction):
        return str(v.numerator) if v.denominator == 1 else f"{v.numerator}/{v.denominator}"
    return str(int(v)) if isinstance(v, (int, np.integer)) else str(v)


def fmt_value(v, digits=6):
    """A value as a short string: ints as ints, floats with ``digits`` significant digits
    (a whole float as an int: ``1716``, not ``1.716e+03``; six digits so that a formula's
    ``1715.5 + 0.5 = 1716`` does not read ``1716 + 0.5 = 1716``); ``?`` for an unknown
    value (shapes only)."""
    if is_unknown(v):
        return "?"
    a = np.asarray(v)
    if a.ndim:
        return "(" + ", ".join(fmt_value(x, digits) for x in a.reshape(-1)[:4]) + (", ...)" if a.size > 4 else ")")
    kind = a.dtype.kind
    if kind == "b":
        return "true" if bool(a) else "false"
    if kind in "iu":
        return str(int(a))
    if kind == "c":
        c = complex(a)
        return f"{c.real:.3g}{c.imag:+.3g}j"
    x = float(a.astype(np.float64))
    if np.isnan(x):
        return "nan"
    if np.isinf(x):
        return "inf" if x > 0 else "-inf"
    if x == int(x) and abs(x) < 1e15:
        return str(int(x)) if x or not np.signbit(x) else "-0"
    return f"{x:.{digits}g}"


def fmt_cell(v, width=5):
    """A value formatted to fit a cell of ``width`` characters."""
    s = fmt_value(v, 4)
    if len(s) <= width:
        return s
    a = np.asarray(v)
    if a.dtype.kind in "iu":
        x = float(int(a))
    elif a.dtype.kind == "f":
        x = float(a)
    else:
        return s[:width - 1] + "…"
    for digits in (3, 2, 1, 0):
        # the shorter of the two notations at this precision: -0.00588 fits as -6e-3, not -0.0…
        for t in (f"{x:.{digits}g}", f"{x:.{digits}e}"):
            t = t.replace("e+0", "e").replace("e-0", "e-").replace("e+", "e")
            if len(t) <= width:
                return t
    return s[:width - 1] + "…"


def element(grid_name, index):
    """``operand[2, 0]`` (``padding_value`` for a rank-0 grid)."""
    return grid_name if not len(index) else f"{grid_name}[{', '.join(str(int(i)) for i in index)}]"


def combiner_name(fn, default):
    """A short name for a reduction or scatter computation: ``+``, ``max``, ... when its
    root is one binary op of its two parameters, ``"replace"`` when it returns the update."""
    comp = getattr(fn, "computation", None)
    root = getattr(comp, "root", None)
    params = getattr(comp, "parameters", None)
    if root is None or not params:
        return getattr(fn, "__name__", None) if callable(fn) and getattr(fn, "__name__", "<lambda>") != "<lambda>" \
            else default
    symbols = {"add": "+", "multiply": "*", "maximum": "max", "minimum": "min", "and": "and", "or": "or",
               "subtract": "-", "xor": "xor"}
    if len(params) == 2 and root is params[1]:
        return "replace"
    if root.opcode in symbols and len(params) == 2 and set(root.operands) == set(params):
        return symbols[root.opcode]
    return comp.name


# -- grids -------------------------------------------------------------------------------------

class Grid:
    """One array drawn as cells.

    ``lattice``: per dimension ``(offset, step, size)``: element ``i`` sits at position
    ``offset + i * step`` of a lattice ``size`` cells long (the identity for plain
    arrays).  Static roles (padding, holes, the sliced part) are layers of per-dimension
    masks (``add_static``), so a grid of any size costs memory per dimension, not per
    cell.  ``view``: the dimensions drawn (1 to 3; three are drawn as a row of 2-D slices
    along the first) and the fixed position of every other dimension.  ``value`` may be
    ``Unknown`` (shapes only).
    """

    def __init__(self, name, value, *, title=None, lattice=None, static=None):
        self.name = name
        self.value = val(value)
        self.known = not isinstance(self.value, Unknown)
        self.title = title or name
        if lattice is None:
            lattice = [(0, 1, int(n)) for n in self.value.shape]
        self.lattice = tuple((int(o), int(s), int(n)) for o, s, n in lattice)
        self.shape = tuple(n for _, _, n in self.lattice)
        self.layers = []   # (code, [mask per dimension], "all" | "any")
        self._dense = None
        if static is not None:
            self._dense = np.asarray(static, np.int8)
        self.dims = tuple(range(len(self.shape)))
        self.fixed = {}
        self.pinned = set()
        self.origin = (0,) * len(self.shape)

    @property
    def rank(self):
        return len(self.shape)

    def position(self, index):
        """The lattice position of element ``index``."""
        return tuple(o + int(i) * s for (o, s, _), i in zip(self.lattice, index))

    def index_of(self, position):
        """The element at lattice ``position``, or None (padding, a hole)."""
        index = []
        for (o, s, _), n, p in zip(self.lattice, self.value.shape, position):
            q, r = divmod(int(p) - o, s)
            if r or not 0 <= q < n:
                return None
            index.append(q)
        return tuple(index)

    def value_at(self, index):
        return self.value[tuple(index)] if self.value.ndim else (UNKNOWN if not self.known else self.value[()])

    # static roles ----------------------------------------------------------------------------

    def add_static(self, role, masks, combine):
        """Cells get static ``role`` where ``combine`` ("all" / "any") of the per-dimension
        boolean ``masks`` holds; later layers win."""
        self.layers.append((_STATIC_CODES[role], [np.asarray(m, bool) for m in masks], combine))

    def static_codes(self, positions):
        """Static role codes (0: none) of lattice ``positions`` ([n, rank] ints)."""
        positions = np.asarray(positions, np.int64)
        positions = positions.reshape(len(positions) if positions.ndim else 1, self.rank)
        if self._dense is not None:
            return self._dense[tuple(positions.T)] if self.rank else np.repeat(self._dense.reshape(1), len(positions))
        codes = np.zeros(len(positions), np.int8)
        for code, masks, combine in self.layers:
            if not masks:
                continue
            hits = [m[positions[:, d]] for d, m in enumerate(masks)]
            hit = np.logical_and.reduce(hits) if combine == "all" else np.logical_or.reduce(hits)
            codes[hit] = code
        return codes

    @property
    def static(self):
        """The static codes as a dense array over the lattice (small grids: tests, exports)."""
        if self._dense is not None:
            return self._dense
        if int(np.prod(self.shape, dtype=np.int64)) > 1 << 22:
            raise ValueError(f"{self.name}: {list(self.shape)} is too big for a dense static array")
        pos = np.indices(self.shape).reshape(self.rank, -1).T if self.rank else np.zeros((1, 0), np.int64)
        return self.static_codes(pos).reshape(self.shape)

    def static_roles(self):
        """{role: number of cells} of the static roles present."""
        codes, counts = np.unique(self.static, return_counts=True)
        return {_STATIC_NAMES[int(c)]: int(n) for c, n in zip(codes, counts) if c}

    # the view ------------------------------------------------------------------------------

    def set_view(self, dims=None, fixed=None):
        rank = self.rank
        if dims is None:
            # three dimensions as a row of 2-D slices while there are few slices; else the
            # last two, the others fixed (the pictures follow the marks, the view has sliders)
            few = rank == 3 and self.shape[0] <= 6 and self.shape[0] * (self.shape[2] + 1) <= 40
            dims = tuple(range(rank)) if rank <= 2 or few else (rank - 2, rank - 1)
        dims = tuple(int(d) for d in dims)
        if not 0 < len(dims) <= 3 and rank:
            raise ValueError(f"{self.name}: dims={list(dims)}: draw 1 to 3 dimensions")
        if len(set(dims)) != len(dims) or any(not 0 <= d < rank for d in dims):
            raise ValueError(f"{self.name}: dims={list(dims)} must be distinct dimensions of a rank-{rank} array")
        fixed = {int(d): int(i) for d, i in (fixed or {}).items()}
        for d, i in fixed.items():
            if d in dims or not 0 <= d < rank:
                raise ValueError(f"{self.name}: fixed={{{d}: {i}}}: dimension {d} is drawn or out of range "
                                 f"(rank {rank}, dims={list(dims)})")
            if not 0 <= i < self.shape[d]:
                raise ValueError(f"{self.name}: fixed={{{d}: {i}}} is outside dimension {d} of size {self.shape[d]}")
        self.dims = dims
        self.fixed = {d: fixed.get(d, 0) for d in range(rank) if d not in dims}
        #: fixed dimensions the caller chose (``fixed=``); the others follow the marks
        self.pinned = set(fixed)

    def drawn(self, position):
        return all(position[d] == i for d, i in self.fixed.items())

    @property
    def image_shape(self):
        """(rows, columns) of the grid's image: 2-D as it is, 1-D as a row, 3-D as a row of
        2-D slices along the first drawn dimension (one blank column between)."""
        s = [self.shape[d] for d in self.dims]
        if 0 in s or len(s) == 0:
            return (1, 1)
        if len(s) == 1:
            return (1, s[0])
        if len(s) == 2:
            return (s[0], s[1])
        return (s[1], s[0] * (s[2] + 1) - 1)

    def rc(self, position):
        """Row and column of a lattice position in the grid's image (None: not drawn)."""
        if not self.drawn(position):
            return None
        p = [position[d] for d in self.dims]
        if len(p) == 0:
            return (0, 0)
        if len(p) == 1:
            return (0, p[0])
        if len(p) == 2:
            return (p[0], p[1])
        return (p[1], p[0] * (self.shape[self.dims[2]] + 1) + p[2])

    def position_at(self, r, c):
        """The lattice position drawn at image row ``r``, column ``c`` (None: a gap)."""
        pos = [0] * self.rank
        for d, i in self.fixed.items():
            pos[d] = i
        sizes = [self.shape[d] for d in self.dims]
        if 0 in sizes:
            return None
        if len(self.dims) == 1:
            pos[self.dims[0]] = c
        elif len(self.dims) == 2:
            pos[self.dims[0]], pos[self.dims[1]] = r, c
        elif len(self.dims) == 3:
            s, k = divmod(c, sizes[2] + 1)
            if k == sizes[2]:
                return None
            pos[self.dims[0]], pos[self.dims[1]], pos[self.dims[2]] = s, r, k
        return tuple(pos)

    def axis_label(self, d, p):
        """The element index at lattice position ``p`` of dimension ``d`` ('' between elements)."""
        o, s, n = self.lattice[d]
        q, r = divmod(p - o, s)
        return str(q) if not r and 0 <= q < self.value.shape[d] else ""

    def view_label(self):
        if not self.fixed:
            return ""
        parts = [":" if d in self.dims else str(self.fixed[d]) for d in range(self.rank)]
        return f"[{', '.join(parts)}]"


# -- frames ------------------------------------------------------------------------------------

@dataclass
class Frame:
    """One step: ``cells[grid][position] = role`` (see ``ROLES``), ``regions[grid]`` boxes
    of elements with one role (``(ranges, role)``: an unknown index's candidates), and the
    formula."""
    number: int          # this frame's number in the animation (0-based)
    step: int            # the step's position among all steps of the op (0-based)
    index: tuple         # the domain element (result, updates or source index)
    cells: dict          # {grid name: {lattice position: role}}
    text: str
    access: object = field(default=None, repr=False)
    #: {grid name: array}: running values after this step (Scatter's result), when tracked
    values: dict = field(default_factory=dict, repr=False)
    _grids: dict = field(default=None, repr=False, compare=False)
    regions: dict = field(default_factory=dict, repr=False)

    def positions(self, grid, *roles):
        """Lattice positions of ``grid`` highlighted in this frame (with one of ``roles``)."""
        return {p for p, r in self.cells.get(grid, {}).items() if not roles or r in roles}

    def indices(self, grid, *roles):
        """Element indices of ``grid`` highlighted in this frame (with one of ``roles``)."""
        g = self._grids[grid]
        return {i for i in (g.index_of(p) for p in self.positions(grid, *roles)) if i is not None}

    def roles(self, grid):
        return set(self.cells.get(grid, {}).values()) | {r for _, r in self.regions.get(grid, ())}

    def role_at(self, grid, position):
        """The role of the cell at ``position`` of ``grid`` in this frame (None: none)."""
        role = self.cells.get(grid, {}).get(tuple(position))
        if role is None and self.regions.get(grid):
            index = self._grids[grid].index_of(position)
            if index is not None:
                for ranges, r in self.regions[grid]:
                    if all(a <= i < b for (a, b), i in zip(ranges, index)):
                        return r
        return role


class Marks:
    """Collects one frame's highlighted cells; a cell keeps its highest-priority role."""

    def __init__(self, grids):
        self.grids = grids
        self.cells = {}
        self.regions = {}

    def pos(self, grid, position, role, force=False):
        if grid not in self.grids:
            return
        cells = self.cells.setdefault(grid, {})
        position = tuple(int(p) for p in position)
        old = cells.get(position)
        if force or old is None or _PRIORITY[role] >= _PRIORITY[old]:
            cells[position] = role

    def elem(self, grid, index, role, force=False):
        if grid in self.grids:
            self.pos(grid, self.grids[grid].position(index), role, force)

    def box(self, grid, start, sizes, role):
        """Every element of ``grid`` in the box ``start + [0, sizes)`` that is inside the array."""
        if grid not in self.grids:
            return
        shape = self.grids[grid].value.shape
        ranges = [(max(s, 0), min(s + n, m)) for s, n, m in zip(start, sizes, shape)]
        if int(np.prod([max(b - a, 0) for a, b in ranges], dtype=np.int64)) > 4096:
            self.region(grid, ranges, role)
            return
        for index in np.ndindex(*[max(b - a, 0) for a, b in ranges]):
            self.elem(grid, tuple(a + i for (a, _), i in zip(ranges, index)), role)

    def region(self, grid, ranges, role):
        """A box of elements (``(start, stop)`` per dimension) with ``role``, kept as a box."""
        if grid in self.grids:
            self.regions.setdefault(grid, []).append((tuple(ranges), role))


# -- the op instance ---------------------------------------------------------------------------

@dataclass
class OpContext:
    opcode: str
    op: object                # the OpDef
    operands: list            # NumPy values (or Unknown: shapes only)
    attrs: dict               # attributes, computations bound as callables
    shape: object             # the result Shape
    result: object            # the result value (array or tuple of arrays, or Unknown)
    index_map: object         # the IndexMap
    label: str = ""           # "gather.1 in _take.3" or "Gather"
    known: bool = True        # False: shapes only, values that decide the map are unknown

    @property
    def results(self):
        return list(self.result) if isinstance(self.result, tuple) else [self.result]


class Animator:
    """How one op is pictured.  Family modules subclass it; ``opcodes`` are registered
    into the registry's ``"animation"`` layer."""

    opcodes = ()
    #: operand grid names, in operand order (a tuple of names, or a function of the context)
    operand_names = ("operand",)
    status_note = None

    # the grids -------------------------------------------------------------------------------

    def names(self, ctx):
        names = self.operand_names(ctx) if callable(self.operand_names) else list(self.operand_names)
        n = len(ctx.operands)
        if len(names) < n:
            names = list(names) + [f"operands[{k}]" for k in range(len(names), n)]
        return list(names[:n])

    def result_names(self, ctx):
        n = len(ctx.results)
        return ["result"] if n == 1 else [f"result[{j}]" for j in range(n)]

    def operand_grid(self, ctx, k):
        """(grid name, index -> element index of that grid) for operand ``k``."""
        return self.names(ctx)[k], None

    def make_grids(self, ctx):
        grids = [Grid(name, value, title=f"{name} {_type(value)}")
                 for name, value in zip(self.names(ctx), ctx.operands) if name is not None]
        grids += [Grid(name, value, title=f"{name} {_type(value)}")
                  for name, value in zip(self.result_names(ctx), ctx.results)]
        return grids

    def domain(self, ctx):
        """The grid stepped through: the result, unless the map is over another domain."""
        return self.result_names(ctx)[0]

    def default_view(self, ctx, grid):
        return None, None

    # the steps -------------------------------------------------------------------------------

    def step_dims(self, ctx):
        """The domain's dimensions, slowest first, in the order the steps go."""
        return tuple(range(len(ctx.index_map.domain_shape)))

    def start(self, ctx):
        """The state carried from step to step (written cells, running values)."""
        return {"written": {}}

    def mark(self, ctx, marks, access, state):
        """The cells this step highlights; the generic rules: the domain element is
        "current" ("skipped" when skipped), elements read are "read", elements written are
        "write" ("collision" when an earlier step wrote them); when the values deciding the
        access are unknown, the elements it may read or write are "candidate"."""
        self.mark_reads(ctx, marks, access)
        results = self.result_names(ctx)
        if isinstance(access.writes, Candidates):
            for k in access.writes.numbers:
                marks.region(results[k], access.writes.ranges, "candidate")
        else:
            for j, index in writes(access):
                earlier = state["written"].get((j, index))
                marks.elem(results[j], index, "collision" if earlier is not None else "write")
        marks.elem(self.domain(ctx), access.index, "skipped" if access.skipped else "current", force=True)

    def mark_reads(self, ctx, marks, access):
        reads = access.reads
        if isinstance(reads, Candidates):
            for k, index in reads.extra:
                name, to_grid = self.operand_grid(ctx, k)
                if name is not None:
                    marks.elem(name, to_grid(index) if to_grid else index, "candidate")
            for k in reads.numbers:
                name, to_grid = self.operand_grid(ctx, k)
                if name is not None and to_grid is None:
                    marks.region(name, reads.ranges, "candidate")
            return
        role = "candidate" if access.unknown else "read"
        for k, index in reads:
            name, to_grid = self.operand_grid(ctx, k)
            if name is not None:
                marks.elem(name, to_grid(index) if to_grid else index, role)

    def advance(self, ctx, access, state, step):
        """Update the state after a step (records the cells written)."""
        if isinstance(access.writes, Candidates):
            return
        for j, index in writes(access):
            state["written"].setdefault((j, index), (step, access.index))

    def explain(self, ctx, access, state):
        return f"{ctx.op.name} {fmt_index(access.index)}"

    def explain_unknown(self, ctx, access, state):
        """The formula of an access whose deciding values are unknown (shapes only)."""
        lines = [f"{self.domain(ctx)}_index = {fmt_index(access.index)}",
                 "the index values are unknown (shapes only): pass the module's",
                 "arguments to see which elements are read" + (" or written" if access.writes else "")]
        for label, items in (("reads", access.reads), ("writes", access.writes)):
            if isinstance(items, Candidates):
                names = self.result_names(ctx) if label == "writes" else self.names(ctx)
                box = ", ".join(f"{a}" if b == a + 1 else f"{a}:{b}" for a, b in items.ranges)
                # single elements first (DynamicUpdateSlice's operand element), then the boxes
                where = " or ".join([element(names[k], index) for k, index in items.extra if k < len(names)]
                                    + [f"{names[k]}[{box}]" for k in items.numbers if k < len(names)])
                lines.append(f"it {label} one of {len(items)} elements: {where}" if len(items) > 1 else
                             f"it {label} {where} (whatever the index values)")
        return "\n".join(lines)

    def values(self, ctx, state):
        """Running values to show after this step: {grid name: array} (none by default)."""
        return {}

    def sequential(self, ctx):
        """True when a step's picture depends on the steps before it (Scatter)."""
        return ctx.index_map.kind == "scatter"

    def schedule(self, ctx):
        """A sequential map's ``RunningWrites`` (every step's target and value), so that the
        state before any step is found without replaying the steps before it; None: the
        values are not known (shapes only), the state is the start state."""
        return None

    def state_at(self, ctx, order, step):
        """The state as steps ``0 .. step - 1`` leave it (``order``: the animation's
        ``_Order``).  A sequential map reads it off its ``schedule`` (computed once per
        picture, vectorised), whatever the step: no replay."""
        rw = running_writes(self, ctx) if self.sequential(ctx) else None
        if rw is None:
            return self.start(ctx)
        return {"written": EarlierWrites(rw, step, order.index), "running": None, "step": None, "rw": rw, "at": step}

    # the driver ------------------------------------------------------------------------------

    def __call__(self, ctx, *, dims=None, fixed=None, max_steps=60, sample=True):
        grids = self.make_grids(ctx)
        _apply_views(self, ctx, grids, dims, fixed)
        return Animation(self, ctx, grids, max_steps=max_steps, sample=sample)

    def frame(self, ctx, grids, access, state, number, step):
        """The Frame of one step (``state`` as the steps before left it; on return, as
        this step leaves it: the frame's running values are those after the step)."""
        marks = Marks(grids)
        self.mark(ctx, marks, access, state)
        text = self.explain_unknown(ctx, access, state) if access.unknown else self.explain(ctx, access, state)
        self.advance(ctx, access, state, step)
        return Frame(number, step, tuple(access.index), marks.cells, text, access, self.values(ctx, state), grids,
                     marks.regions)


def writes(access):
    """An Access's writes as (result number, index) pairs (Scatter gives pairs,
    SelectAndScatter plain result indices)."""
    out = []
    for w in access.writes:
        if len(w) == 2 and isinstance(w[0], (int, np.integer)) and isinstance(w[1], tuple):
            out.append((int(w[0]), tuple(int(i) for i in w[1])))
        else:
            out.append((0, tuple(int(i) for i in w)))
    return out


def _type(value):
    from ..shapes import Shape
    if isinstance(value, Unknown):
        return str(value.xla_shape)
    a = np.asarray(value)
    try:
        return str(Shape.of(a))
    except Exception:
        return f"{a.dtype}{list(a.shape)}"


def _apply_views(animator, ctx, grids, dims, fixed):
    """``dims``/``fixed`` given as a tuple / {dim: index} apply to every grid of rank > 3;
    given as {grid name: ...} they apply to the grids named."""
    names = {g.name for g in grids}
    for key, arg in (("dims", dims), ("fixed", fixed)):
        if isinstance(arg, dict) and arg and all(isinstance(k, str) for k in arg):
            unknown = set(arg) - names
            if unknown:
                raise ValueError(f"{key}: no grid named {sorted(unknown)}; the grids are {sorted(names)}")
    for g in grids:
        d_default, f_default = animator.default_view(ctx, g)
        d = _for_grid(dims, g)
        f = _for_grid(fixed, g)
        if d is None and f is None:
            d, f = d_default, f_default
            if d is not None and f is None:  # the animator's chosen view holds its other dimensions
                f = {x: 0 for x in range(g.rank) if x not in d}
        elif d is None:  # the dimensions not fixed (the last two when more than three are left)
            d = [x for x in range(g.rank) if x not in f]
            d = tuple(d if len(d) <= 3 else d[-2:])
        g.set_view(d, f)


def _for_grid(arg, grid):
    if arg is None:
        return None
    if isinstance(arg, dict) and arg and all(isinstance(k, str) for k in arg):
        return arg.get(grid.name)
    return arg if grid.rank > 3 else None


def running_writes(animator, ctx):
    """``animator.schedule(ctx)``, made once per op instance (kept on the context)."""
    cache = ctx.__dict__.setdefault("_running_writes", {})
    if "rw" not in cache:
        cache["rw"] = animator.schedule(ctx)
    return cache["rw"]


class RunningWrites:
    """A scatter-like map's writes, every step at once: ``targets[s]`` is the flat result
    element step ``s`` combines into (-1: none, a skipped window), ``values[j][s]`` the
    value it combines into result ``j`` (starting from ``inits[j]``) with ``combine(*old,
    *new) -> new value(s)``.

    The running values are found without replaying: ``after[j][s]``, the element's value
    right after step ``s``, is computed for every step in rounds (round ``r`` applies
    every element's ``r``-th write, as the reference does, so an element-wise ``combine``
    runs on whole arrays and gives exactly the reference's values; any other runs one
    step at a time, as far as asked, with progress).  The value of an element before
    step ``s`` is then the ``after`` of its last write before ``s``: a look-up."""

    def __init__(self, shape, targets, values=None, inits=None, combine=None, elementwise=False, label="scatter"):
        self.shape = tuple(shape)
        self.targets = np.asarray(targets, np.int64).reshape(-1)
        self.count = len(self.targets)
        self.label = label
        valid = np.flatnonzero(self.targets >= 0)
        # the writes grouped by element, in step order within each element
        self.by_element = valid[np.argsort(self.targets[valid], kind="stable")]
        t = self.targets[self.by_element]
        first = np.ones(len(t), bool)
        first[1:] = t[1:] != t[:-1]
        self.group_start = np.flatnonzero(first)
        self.group_target = t[first]
        position = np.arange(len(t))
        rank = position - np.maximum.accumulate(np.where(first, position, 0))
        self.prev = np.full(self.count, -1, np.int64)
        self.prev[self.by_element[~first]] = self.by_element[np.flatnonzero(~first) - 1]
        self.rank = np.zeros(self.count, np.int64)
        self.rank[self.by_element] = rank
        self.values = None if values is None else [np.asarray(v).reshape(-1) for v in values]
        self.inits = None if inits is None else [np.asarray(x).reshape(-1) for x in inits]
        self.combine, self.elementwise = combine, elementwise
        self.after = None if self.values is None else [np.empty(self.count, x.dtype) for x in self.inits]
        self.ready = 0         # after[...][s] is known for s < ready (one-at-a-time combine)
        self.failed = None     # why the running values are not known (combine raised)

    @property
    def known(self):
        return self.after is not None and self.failed is None

    def first_write(self, flat):
        """The first step writing flat element ``flat`` (None: none)."""
        g = np.searchsorted(self.group_target, flat)
        if g < len(self.group_target) and self.group_target[g] == flat:
            return int(self.by_element[self.group_start[g]])
        return None

    def _ensure(self, upto):
        """``after`` for every step below ``upto``."""
        if not self.known or self.ready >= upto:
            return
        try:
            if self.elementwise:
                self._rounds()
            else:
                self._one_by_one(upto)
        except Exception as e:  # noqa: BLE001 - a combine that fails here: no running values
            self.failed = f"{type(e).__name__}: {e}"

    def _apply(self, steps):
        old = []
        for init, after in zip(self.inits, self.after):
            p = self.prev[steps]
            old.append(np.where(p >= 0, after[np.maximum(p, 0)], init[np.maximum(self.targets[steps], 0)]))
        new = self.combine(*old, *[v[steps] for v in self.values])
        new = list(new) if isinstance(new, (tuple, list)) else [new]
        for after, v in zip(self.after, new):
            after[steps] = np.asarray(v).astype(after.dtype, copy=False)

    def _rounds(self):
        valid = self.targets >= 0
        for r in range(int(self.rank[valid].max()) + 1 if valid.any() else 0):
            self._apply(np.flatnonzero(valid & (self.rank == r)))
        self.ready = self.count

    def _one_by_one(self, upto):
        from .. import progress
        steps = [s for s in range(self.ready, upto) if self.targets[s] >= 0]
        with progress.task(f"{self.label}: running values up to step {upto}", total=len(steps)) as task:
            for s in steps:
                self._apply(np.array([s]))
                task.advance()
        self.ready = upto

    def step(self, s):
        """(old values, update values, new values) of step ``s`` (lists, one per result), or None."""
        if self.targets[s] < 0:
            return None
        self._ensure(s + 1)
        if not self.known:
            return None
        p, t = self.prev[s], self.targets[s]
        old = [after[p] if p >= 0 else init[t] for init, after in zip(self.inits, self.after)]
        return old, [v[s] for v in self.values], [after[s] for after in self.after]

    def values_after(self, s):
        """Every result's values once steps ``0 .. s`` are applied (None: not known)."""
        self._ensure(s + 1)
        if not self.known:
            return None
        out = [init.copy() for init in self.inits]
        for g, t in enumerate(self.group_target):
            lo = self.group_start[g]
            hi = self.group_start[g + 1] if g + 1 < len(self.group_start) else len(self.by_element)
            k = lo + int(np.searchsorted(self.by_element[lo:hi], s, side="right")) - 1
            if k >= lo:
                for o, after in zip(out, self.after):
                    o[t] = after[self.by_element[k]]
        return [o.reshape(self.shape) for o in out]


class EarlierWrites(dict):
    """``state["written"]`` before step ``at``: ``get((j, index))`` is ``(step, domain index)``
    of the first earlier step that wrote ``index`` (what the collision marks need), found
    in a ``RunningWrites``; entries set later (``setdefault``) are kept as in a dict."""

    def __init__(self, rw, at, index_of):
        super().__init__()
        self.rw, self.at, self.index_of = rw, at, index_of

    def get(self, key, default=None):
        if key in self:
            return self[key]
        j, index = key
        shape = self.rw.shape
        flat = int(np.ravel_multi_index(tuple(int(i) for i in index), shape)) if len(shape) else 0
        s = self.rw.first_write(flat)
        return (s, tuple(self.index_of(s))) if s is not None and s < self.at else default


class _Order:
    """The steps: the domain's elements with dimensions ``dims`` varying slowest first
    (row-major when ``dims`` is 0, 1, ...); ``fixed`` restricts the shown steps."""

    def __init__(self, shape, dims, fixed):
        self.shape, self.dims, self.fixed = tuple(shape), tuple(dims), dict(fixed)
        self.full_count = int(np.prod(self.shape, dtype=np.int64))
        free = [d for d in self.dims if d not in self.fixed]
        self.count = int(np.prod([self.shape[d] for d in free], dtype=np.int64))
        self.free = free

    def index(self, step):
        sizes = [self.shape[d] for d in self.dims]
        coords = np.unravel_index(step, sizes) if sizes else ()
        index = [0] * len(self.shape)
        for d, c in zip(self.dims, coords):
            index[d] = int(c)
        return tuple(index)

    def step_of(self, index):
        sizes = [self.shape[d] for d in self.dims]
        return int(np.ravel_multi_index([index[d] for d in self.dims], sizes)) if sizes else 0

    def shown(self, k):
        """The full-order position of the k-th shown step (``fixed`` dimensions held)."""
        sizes = [self.shape[d] for d in self.free]
        coords = np.unravel_index(k, sizes) if sizes else ()
        index = [0] * len(self.shape)
        for d, i in self.fixed.items():
            index[d] = i
        for d, c in zip(self.free, coords):
            index[d] = int(c)
        return self.step_of(index)

    def row_length(self):
        """The steps of one run of the fastest free dimension (one row of windows)."""
        return self.shape[self.free[-1]] if self.free else 1


def sample_steps(order, max_steps, how):
    """(shown step numbers in order, a summary) of at most ``max_steps`` steps.

    ``how``: True / ``"structure"`` (the default): the first row of the domain whole,
    then the rest in even strides, so a big op's pattern shows instead of its first
    corner; ``"even"``: evenly spaced; ``"first"`` / False: the first ``max_steps``."""
    total = order.count
    if max_steps is None or total <= max_steps:
        return [order.shown(k) for k in range(total)], (f"{total} steps" if total != 1 else "1 step")
    how = "structure" if how is True else ("first" if how is False or how is None else how)
    if how == "first":
        return [order.shown(k) for k in range(max_steps)], f"steps 1-{max_steps} of {total}"
    if how == "even":
        ks = [int(round(i)) for i in np.linspace(0, total - 1, max_steps)]
        return [order.shown(k) for k in ks], f"{max_steps} of {total} steps, evenly spaced"
    if how != "structure":
        raise ValueError(f"sample={how!r}: use True (structure), 'even' or 'first'")
    row = min(order.row_length(), max_steps // 2)
    rest = max_steps - row
    tail = np.linspace(row, total - 1, rest) if rest > 0 else []
    ks = sorted(set(range(row)) | {int(round(i)) for i in tail})
    stride = (total - row) / max(rest, 1)
    return [order.shown(k) for k in ks], (f"{len(ks)} of {total} steps: the first {row}, then one in "
                                          f"~{stride:.0f}")


# -- the animation -----------------------------------------------------------------------------

class Animation:
    """What ``xe.animate`` returns: the picture's model.  Displays itself in Jupyter (an
    HTML player whose first frame shows without any script); ``frames`` is the data (per
    step: the highlighted cells and the formula); ``frame(k)`` a matplotlib Figure of step
    k; ``save("x.gif")``; ``stepper()`` a slider (ipywidgets); ``view()`` the interactive
    view (hover a result element)."""

    def __init__(self, animator, ctx, grids, *, max_steps=60, sample=True):
        self.animator, self.context = animator, ctx
        self.opcode = ctx.opcode
        self.grids = grids
        self._by_name = {g.name: g for g in grids}
        self.domain = animator.domain(ctx)
        domain_grid = self._by_name[self.domain]
        self.order = _Order(ctx.index_map.domain_shape, animator.step_dims(ctx),
                            {d: i for d, i in domain_grid.fixed.items() if d in domain_grid.pinned})
        shown, summary = sample_steps(self.order, max_steps, sample)
        if domain_grid.pinned:
            summary += f" in {domain_grid.name}{domain_grid.view_label()}"
        self.summary = summary
        self.total_steps = self.order.full_count
        self.title = f"{ctx.op.name}" + (f" {ctx.label}" if ctx.label and ctx.label != ctx.op.name else "")
        self.frames = self._frames(shown)
        self.fps = 2
        #: the drawn frames' layout width in pixels (None: 1600); set it before drawing
        self.width = None

    def _frames(self, shown):
        ctx, animator = self.context, self.animator
        frames = []
        state = animator.start(ctx)
        for step in shown:
            if animator.sequential(ctx):   # the state the steps before leave (no replay: state_at)
                state = animator.state_at(ctx, self.order, step)
            access = ctx.index_map[self.order.index(step)]
            frames.append(animator.frame(ctx, self._by_name, access, state, len(frames), step))
        return frames

    def frame_at(self, index):
        """The Frame of domain element ``index`` (any element, not only the sampled ones):
        what the interactive view shows for its selection.  A sequential map (Scatter)
        shows the running values the steps before it leave, however many (``state_at``)."""
        ctx, animator = self.context, self.animator
        index = tuple(int(i) for i in index)
        step = self.order.step_of(index)
        state = animator.state_at(ctx, self.order, step)
        return animator.frame(ctx, self._by_name, ctx.index_map[index], state, 0, step)

    @property
    def known(self):
        return self.context.known

    def grid(self, name):
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"no grid {name!r}; the grids are {[g.name for g in self.grids]}") from None

    @property
    def index_map(self):
        return self.context.index_map

    def __len__(self):
        return len(self.frames)

    def __repr__(self):
        return (f"<Animation {self.title}: {self.summary}; grids "
                f"{', '.join(g.name + '[' + ','.join(str(s) for s in g.shape) + ']' for g in self.grids)}>")

    def counter(self, frame):
        """``step 5 of 30: result[1, 2]`` (with the frame number when steps are left out)."""
        where = f"{self.domain}{fmt_index(frame.index)}"
        if frame.number == frame.step and len(self.frames) == self.order.count:  # every step shown
            return f"step {frame.step + 1} of {self.total_steps}: {where}"
        return f"frame {frame.number + 1} of {len(self.frames)}: step {frame.step + 1} of {self.total_steps}, {where}"

    def roles_used(self):
        used = set()
        for f in self.frames:
            for name in self._by_name:
                used |= f.roles(name)
        if len(self.frames) > 1:
            used.add("done")
        return [r for r in ROLES if r in used]

    # drawing (draw.py: matplotlib and Pillow; view.py: the interactive view) ---------------

    def frame(self, k=0, dpi=100):
        """Frame ``k`` as a matplotlib Figure (vector text and cells; ``savefig`` to SVG or
        PDF for slides)."""
        from .draw import figure
        return figure(self, k, dpi=dpi)

    def image(self, k=0):
        """Frame ``k`` as an RGB uint8 array (what GIF and HTML exports hold)."""
        from .draw import raster
        return raster(self, k)

    def to_jshtml(self, fps=None, **_):
        """An HTML player with every frame embedded as a PNG; the first frame shows as a
        plain image (no script needed), the buttons and slider step through the others."""
        from .draw import html_player
        return html_player(self, fps=fps or self.fps)

    def _repr_html_(self):
        return self.to_jshtml()

    def save(self, path, fps=None, dpi=100, frame=None):
        """``.gif`` (Pillow), ``.html`` (the player), or one frame as ``.png`` (raster) /
        ``.svg`` / ``.pdf`` (matplotlib, ``frame=k``, default 0)."""
        from .draw import save
        return save(self, path, fps=fps or self.fps, dpi=dpi, frame=frame)

    def stepper(self):
        """A slider (and play button) over the frames: an ipywidgets widget showing each
        frame as a PNG image (displays the same in every Jupyter front end)."""
        from .draw import stepper
        return stepper(self)

    def view(self, **kw):
        """The interactive view of this picture (``xe.index_map_view``)."""
        from .view import IndexMapView
        return IndexMapView.of_animation(self, **kw)


# -- from a target to a context ----------------------------------------------------------------

def context(target, instruction=None, *args, invocation=0, trace=None, **attrs):
    """The OpContext of ``(comp, "gather.1", *module_args)`` or ``("gather", *values, **attrs)``."""
    from ..computation import XlaComputation
    from ..executors.reference import ExecutionContext, bind_attrs
    from ..inspect import _plain, eager_operands, instruction_operands, map_of, op_by_name
    if isinstance(target, XlaComputation):
        if not isinstance(instruction, str):
            raise TypeError("animate(comp, 'gather.1', *args): name the instruction")
        iv = instruction_operands(target, instruction, *args, invocation=invocation, trace=trace)
        _check(iv.op)
        bound = bind_attrs(_plain(iv.instruction.attrs), ExecutionContext())
        imap = map_of(iv)
        return OpContext(iv.instruction.opcode, iv.op, iv.operands, bound, iv.instruction.shape, iv.result, imap,
                         iv.label, known=iv.known or not _any_unknown(imap))
    if not isinstance(target, str):
        raise TypeError(f"animate: expected an XlaComputation or an opcode / op name, got {type(target).__name__}")
    try:
        op = op_by_name(target)
    except NotImplementedError:
        raise NotImplementedError(f"animate: unknown op {target!r}; animated ops: {', '.join(animated())}") from None
    _check(op)
    values = ((instruction,) if instruction is not None else ()) + args
    iv = eager_operands(op, values, attrs)
    imap = map_of(iv)
    return OpContext(op.opcode, op, iv.operands, iv.attrs, iv.shape, iv.result, imap, op.name,
                     known=iv.known or not _any_unknown(imap))


def _any_unknown(imap, n=4):
    for k, a in enumerate(imap):
        if a.unknown:
            return True
        if k + 1 >= n:
            break
    return False


def _check(op):
    if op.opcode not in registry.LAYERS.get("animation", {}):
        raise NotImplementedError(f"{op.name} ({op.opcode}) has no animator; animated ops: {', '.join(animated())}")


def animated():
    return sorted(registry.LAYERS.get("animation", {}))


OPTIONS = ("dims", "fixed", "max_steps", "sample")


def animate(target, instruction=None, *args, dims=None, fixed=None, max_steps=60, sample=True, **attrs):
    ctx = context(target, instruction, *args, **attrs)
    animator = registry.LAYERS["animation"][ctx.opcode]
    return animator(ctx, dims=dims, fixed=fixed, max_steps=max_steps, sample=sample)
