"""Index-map animations: an op's operands, indices and result as grids of cells, one frame
per step of its index map.

The pieces, from data to pixels:

- ``OpContext``: one op instance with values: its operands, bound attributes, result and
  ``IndexMap`` (from ``xe.animate(comp, "gather.1", *args)`` or ``xe.animate("gather", ...)``).
- ``Animator`` (one per opcode, in ``animate/<family>.py``): names the grids, says in which
  order the steps go, which cells each step highlights (``mark``) and how the spec's
  formula reads with the step's values (``explain``).
- ``Animation``: the grids and the ``frames`` (per step: the highlighted cells of each
  grid with their role, and the explanation).  This is plain data, what the tests check;
  matplotlib is imported only when something is drawn (``frame(k)``, ``save``, HTML).
- ``_Drawing``: one matplotlib figure, one image per grid; a frame is shown by writing
  the cells' colours into the images and setting texts, never by rebuilding the figure.

Cells are addressed by their *position* in the grid's lattice.  For most grids that is
the element index; ReduceWindow and SelectAndScatter draw the operand padded and
base-dilated, where elements sit at ``padding_low + index * base_dilation`` and the other
cells are padding or holes (``Grid.index_of`` / ``Grid.position`` convert).
"""
import os
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from .. import progress
from ..ops import registry

#: dynamic roles, lowest priority first: (colour, legend text).  A cell with two roles
#: shows the later one.
ROLES = {
    "done": ("#fdebd7", "earlier steps"),
    "window": ("#9ecae1", "slice / window"),
    "clamped": ("#fcae91", "window at its clamped start"),
    "index": ("#a1d99b", "indices used"),
    "init": ("#ffe680", "init value"),
    "padding": ("#ffd92f", "padding"),
    "hole": ("#f1a6cb", "dilation hole"),
    "skipped": ("#969696", "skipped (out of bounds)"),
    "read": ("#4292c6", "read"),
    "selected": ("#e6550d", "selected"),
    "write": ("#fd8d3c", "written"),
    "collision": ("#9e6bc6", "combined again (collision)"),
    "current": ("#fd8d3c", "this step"),
}
#: static roles (the same in every frame), drawn pale under the dynamic ones
STATIC = {
    "padding": ("#fff4c2", "padding (static)"),
    "hole": ("#fbe0ee", "dilation hole (static)"),
    "cropped": ("#c8b89e", "cropped (negative padding)"),
    "window": ("#deebf7", "slice"),
}
#: the lines between cells
GRIDLINE = "#d4d4d4"
_STATIC_CODES = {name: i + 1 for i, name in enumerate(STATIC)}
_PRIORITY = {name: i for i, name in enumerate(ROLES)}

#: a grid shows its values as text when it has at most this many drawn cells
TEXT_CELLS = 150
#: ... and at most this many along either axis of its image
TEXT_SIDE = 24


# -- values and formatting ---------------------------------------------------------------------

def fmt_index(index):
    return "[" + ", ".join(str(int(i)) for i in index) + "]"


def fmt_list(values):
    return "[" + ", ".join(_num(v) for v in values) + "]"


def _num(v):
    if isinstance(v, Fraction):
        return str(v.numerator) if v.denominator == 1 else f"{v.numerator}/{v.denominator}"
    return str(int(v)) if isinstance(v, (int, np.integer)) else str(v)


def fmt_value(v):
    """A value as a short string: ints as ints, floats with 4 significant digits."""
    a = np.asarray(v)
    if a.ndim:
        return "(" + ", ".join(fmt_value(x) for x in a.reshape(-1)[:4]) + (", ...)" if a.size > 4 else ")")
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
    return f"{x:.4g}"


def _cell_text(v):
    s = fmt_value(v)
    return s if len(s) <= 6 else f"{float(np.asarray(v).astype(np.float64)):.2g}"


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
    arrays).  ``static``: an int8 array over the lattice of static role codes.  ``view``:
    the dimensions drawn (1 to 3; three are drawn as a row of 2-D slices along the first)
    and the fixed position of every other dimension.
    """

    def __init__(self, name, value, *, title=None, lattice=None, static=None):
        self.name = name
        self.value = np.asarray(value)
        self.title = title or name
        if lattice is None:
            lattice = [(0, 1, int(n)) for n in self.value.shape]
        self.lattice = tuple((int(o), int(s), int(n)) for o, s, n in lattice)
        self.shape = tuple(n for _, _, n in self.lattice)
        self.static = np.zeros(self.shape, np.int8) if static is None else static
        self.dims = tuple(range(len(self.shape)))
        self.fixed = {}

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

    def set_static(self, role, positions):
        code = _STATIC_CODES[role]
        for p in positions:
            self.static[tuple(p)] = code

    def static_roles(self):
        """{role: number of cells} of the static roles present."""
        codes, counts = np.unique(self.static, return_counts=True)
        names = {v: k for k, v in _STATIC_CODES.items()}
        return {names[int(c)]: int(n) for c, n in zip(codes, counts) if c}

    # the view ------------------------------------------------------------------------------

    def set_view(self, dims=None, fixed=None):
        rank = self.rank
        if dims is None:
            dims = tuple(range(rank)) if rank <= 3 else (rank - 2, rank - 1)
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

    def drawn(self, position):
        return all(position[d] == i for d, i in self.fixed.items())

    @property
    def image_shape(self):
        s = [self.shape[d] for d in self.dims]
        if 0 in s:
            return (1, 1)
        if len(s) == 0:
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

    def drawn_positions(self):
        """All drawn lattice positions as an int array [n, rank], and their rows and columns."""
        sizes = [self.shape[d] for d in self.dims]
        if 0 in sizes:
            return np.zeros((0, self.rank), np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
        grid = np.indices(sizes).reshape(len(sizes), -1) if sizes else np.zeros((0, 1), np.int64)
        n = grid.shape[1]
        pos = np.zeros((n, self.rank), np.int64)
        for k, d in enumerate(self.dims):
            pos[:, d] = grid[k]
        for d, i in self.fixed.items():
            pos[:, d] = i
        if len(sizes) == 0:
            rows = cols = np.zeros(n, np.int64)
        elif len(sizes) == 1:
            rows, cols = np.zeros(n, np.int64), grid[0]
        elif len(sizes) == 2:
            rows, cols = grid[0], grid[1]
        else:
            rows, cols = grid[1], grid[0] * (sizes[2] + 1) + grid[2]
        return pos, rows, cols

    def elements_at(self, pos):
        """For positions [n, rank]: a mask of those that are elements, and their indices."""
        if self.rank == 0:
            return np.ones(len(pos), bool), np.zeros((len(pos), 0), np.int64)
        off = np.array([o for o, _, _ in self.lattice])
        step = np.array([s for _, s, _ in self.lattice])
        q, r = np.divmod(pos - off, step)
        ok = (r == 0).all(axis=1) & (q >= 0).all(axis=1) & (q < np.array(self.value.shape)).all(axis=1)
        return ok, q

    def axis_labels(self, d):
        """Tick labels along lattice dimension ``d``: the element index, blank between."""
        o, s, n = self.lattice[d]
        labels = []
        for p in range(self.shape[d]):
            q, r = divmod(p - o, s)
            labels.append(str(q) if not r and 0 <= q < self.value.shape[d] else "")
        return labels

    def view_label(self):
        if not self.fixed:
            return ""
        parts = [":" if d in self.dims else str(self.fixed[d]) for d in range(self.rank)]
        return f"[{', '.join(parts)}]"


# -- frames ------------------------------------------------------------------------------------

@dataclass
class Frame:
    """One step: ``cells[grid][position] = role`` (see ``ROLES``) and the explanation."""
    number: int          # this frame's number in the animation (0-based)
    step: int            # the step's position among all steps of the op (0-based)
    index: tuple         # the domain element (result, updates or source index)
    cells: dict          # {grid name: {lattice position: role}}
    text: str
    access: object = field(default=None, repr=False)
    #: {grid name: array}: running values after this step (Scatter's result), when tracked
    values: dict = field(default_factory=dict, repr=False)
    _grids: dict = field(default=None, repr=False, compare=False)

    def positions(self, grid, *roles):
        """Lattice positions of ``grid`` highlighted in this frame (with one of ``roles``)."""
        return {p for p, r in self.cells.get(grid, {}).items() if not roles or r in roles}

    def indices(self, grid, *roles):
        """Element indices of ``grid`` highlighted in this frame (with one of ``roles``)."""
        g = self._grids[grid]
        return {i for i in (g.index_of(p) for p in self.positions(grid, *roles)) if i is not None}

    def roles(self, grid):
        return set(self.cells.get(grid, {}).values())


class Marks:
    """Collects one frame's highlighted cells; a cell keeps its highest-priority role."""

    def __init__(self, grids):
        self.grids = grids
        self.cells = {}

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
        for w in np.ndindex(*sizes):
            index = tuple(s + i for s, i in zip(start, w))
            if all(0 <= i < n for i, n in zip(index, shape)):
                self.elem(grid, index, role)


# -- the op instance ---------------------------------------------------------------------------

@dataclass
class OpContext:
    opcode: str
    op: object                # the OpDef
    operands: list            # NumPy values
    attrs: dict               # attributes, computations bound as callables
    shape: object             # the result Shape
    result: object            # the result value (array or tuple of arrays)
    index_map: object         # the IndexMap
    label: str = ""           # "gather.1" or "Gather"
    known: bool = True        # False: shapes only, the map depends on values that are not known

    @property
    def results(self):
        return list(self.result) if isinstance(self.result, tuple) else [self.result]


class Animator:
    """How one op is animated.  Family modules subclass it; ``opcodes`` are registered
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
        "write" ("collision" when an earlier step wrote them)."""
        for k, index in access.reads:
            name, to_grid = self.operand_grid(ctx, k)
            if name is not None:
                marks.elem(name, to_grid(index) if to_grid else index, "read")
        results = self.result_names(ctx)
        for j, index in writes(access):
            earlier = state["written"].get((j, index))
            marks.elem(results[j], index, "collision" if earlier is not None else "write")
        marks.elem(self.domain(ctx), access.index, "skipped" if access.skipped else "current", force=True)

    def advance(self, ctx, access, state, step):
        """Update the state after a step (records the cells written)."""
        for j, index in writes(access):
            state["written"].setdefault((j, index), (step, access.index))

    def explain(self, ctx, access, state):
        return f"{ctx.op.name} {fmt_index(access.index)}"

    def values(self, ctx, state):
        """Running values to show after this step: {grid name: array} (none by default)."""
        return {}

    # the driver ------------------------------------------------------------------------------

    def __call__(self, ctx, *, dims=None, fixed=None, max_steps=200, sample=False):
        grids = self.make_grids(ctx)
        by_name = {g.name: g for g in grids}
        _apply_views(self, ctx, grids, dims, fixed)
        domain_grid = by_name[self.domain(ctx)]
        order = _Order(ctx.index_map.domain_shape, self.step_dims(ctx),
                       {d: i for d, i in domain_grid.fixed.items()} if domain_grid.fixed else {})
        total = order.count
        if max_steps is None or total <= max_steps:
            shown = order.positions()
            summary = f"{total} steps" if total != 1 else "1 step"
        elif sample:
            every = order.positions()
            shown = [every[int(round(i))] for i in np.linspace(0, len(every) - 1, max_steps)]
            summary = f"{max_steps} of {total} steps, evenly spaced"
        else:
            shown = order.positions()[:max_steps]
            summary = f"steps 1-{max_steps} of {total}"
        if domain_grid.fixed:
            summary += f" in {domain_grid.name}{domain_grid.view_label()}"
        frames = []
        state = self.start(ctx)
        sequential = ctx.index_map.kind == "scatter"  # later steps depend on earlier ones
        wanted = set(shown)
        todo = range(shown[-1] + 1 if shown else 0) if sequential else shown
        for step in todo:
            index = order.index(step)
            access = ctx.index_map[index]
            if step in wanted:
                marks = Marks(by_name)
                self.mark(ctx, marks, access, state)
                text = self.explain(ctx, access, state)
                self.advance(ctx, access, state, step)
                frames.append(Frame(len(frames), step, tuple(access.index), marks.cells, text, access,
                                    self.values(ctx, state), by_name))
            else:
                self.advance(ctx, access, state, step)
        title = f"{ctx.op.name}" + (f" {ctx.label}" if ctx.label and ctx.label != ctx.op.name else "")
        return Animation(ctx, grids, frames, title=title, summary=summary, total_steps=order.full_count,
                         domain=domain_grid.name)


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
    a = np.asarray(value)
    from ..shapes import Shape
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


class _Order:
    """The steps: the domain's elements with dimensions ``dims`` varying slowest first
    (row-major when ``dims`` is 0, 1, ...); ``fixed`` restricts the shown steps."""

    def __init__(self, shape, dims, fixed):
        self.shape, self.dims, self.fixed = tuple(shape), tuple(dims), dict(fixed)
        self.full_count = int(np.prod(self.shape, dtype=np.int64))
        free = [d for d in self.dims if d not in self.fixed]
        self.count = int(np.prod([self.shape[d] for d in free], dtype=np.int64))

    def index(self, step):
        sizes = [self.shape[d] for d in self.dims]
        coords = np.unravel_index(step, sizes) if sizes else ()
        index = [0] * len(self.shape)
        for d, c in zip(self.dims, coords):
            index[d] = int(c)
        return tuple(index)

    def positions(self):
        """The full-order positions of the shown steps, in order."""
        if not self.fixed:
            return range(self.full_count)
        free = [d for d in self.dims if d not in self.fixed]
        grid = np.indices([self.shape[d] for d in free]).reshape(len(free), -1) if free else np.zeros((0, 1), int)
        coords = []
        for d in self.dims:
            coords.append(np.full(grid.shape[1], self.fixed[d]) if d in self.fixed else grid[free.index(d)])
        pos = np.ravel_multi_index(coords, [self.shape[d] for d in self.dims]) if self.dims else np.zeros(1, int)
        return sorted(int(p) for p in pos)


# -- the animation -----------------------------------------------------------------------------

class Animation:
    """What ``xe.animate`` returns.  Displays itself in Jupyter (an HTML animation that plays
    without any extension); ``frames`` is the data (per step: the highlighted cells and the
    explanation); ``frame(k)`` a matplotlib Figure of step k; ``save("x.gif")``;
    ``stepper()`` a slider (ipywidgets)."""

    def __init__(self, ctx, grids, frames, *, title, summary, total_steps, domain):
        self.context = ctx
        self.opcode = ctx.opcode
        self.grids = grids
        self.frames = frames
        self.title = title
        self.summary = summary
        self.total_steps = total_steps
        self.domain = domain
        self.fps = 2
        self._drawing = None

    def grid(self, name):
        for g in self.grids:
            if g.name == name:
                return g
        raise KeyError(f"no grid {name!r}; the grids are {[g.name for g in self.grids]}")

    @property
    def index_map(self):
        return self.context.index_map

    def __len__(self):
        return len(self.frames)

    def __repr__(self):
        return (f"<Animation {self.title}: {self.summary}; grids "
                f"{', '.join(g.name + _shape_str(g.shape) for g in self.grids)}>")

    def counter(self, frame):
        """``step 5 of 30: result[1, 2]`` (with the frame number when steps are left out)."""
        where = f"{self.domain}{fmt_index(frame.index)}"
        if frame.number == frame.step:  # every step so far shown
            return f"step {frame.step + 1} of {self.total_steps}: {where}"
        return f"frame {frame.number + 1} of {len(self.frames)}: step {frame.step + 1} of {self.total_steps}, {where}"

    def roles_used(self):
        used = set()
        for f in self.frames:
            for cells in f.cells.values():
                used.update(cells.values())
        if len(self.frames) > 1:
            used.add("done")
        return [r for r in ROLES if r in used]

    # drawing -------------------------------------------------------------------------------

    def drawing(self, dpi=80):
        """The figure with its artists (``.update(k)`` shows frame k; ``.fig``)."""
        return _Drawing(self, dpi=dpi)

    def frame(self, k=0, dpi=80):
        """Frame ``k`` as a matplotlib Figure (a new figure, not registered with pyplot)."""
        if not self.frames:
            raise IndexError(f"{self.title}: the animation has no frames")
        d = _Drawing(self, dpi=dpi)
        d.update(k)
        return d.fig

    def animation(self, dpi=80, interval=None, fast=False):
        """A matplotlib ``FuncAnimation`` over the frames (its figure draws each frame by
        updating the grids' images and the texts)."""
        from matplotlib.animation import FuncAnimation
        d = _Drawing(self, dpi=dpi, fast=fast)
        anim = FuncAnimation(d.fig, d.update, frames=len(self.frames), interval=interval or 1000 / self.fps,
                             blit=False, repeat=True, cache_frame_data=False)
        anim.drawing = d
        return anim

    def _write(self, path, writer_class, dpi, **kw):
        anim = self.animation(dpi=dpi, fast=True)
        writer = writer_class(anim.drawing, **kw)
        canvas = anim.drawing.fig.canvas
        canvas.skip_idle = True  # the writer renders each frame itself (see _Drawing.render)
        n = len(self.frames)
        # a notebook's progress bar (announced for many frames: seconds of rendering)
        with progress.task(f"rendering {self.title}", total=n, announce=n > 60) as t:
            try:
                anim.save(str(path), writer=writer, dpi=dpi,
                          progress_callback=lambda i, total: t.advance(detail=f"frame {i + 1} of {total}"))
            finally:
                canvas.skip_idle = False
        return writer

    def to_jshtml(self, dpi=60, fps=None):
        """An HTML/JavaScript player with every frame embedded (matplotlib's HTML writer,
        as ``FuncAnimation.to_jshtml``); plays in Jupyter and in any browser."""
        if not self.frames:
            return f"<p>{self.title}: no steps</p>"
        import tempfile
        from pathlib import Path
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp, "animation.html")
            self._write(path, _html_writer(), dpi, fps=fps or self.fps, embed_frames=True, default_mode="loop",
                        embed_limit=1000)
            return path.read_text()

    def _repr_html_(self):
        return self.to_jshtml()

    def save(self, path, fps=None, dpi=80, frame=None):
        """``.gif`` (Pillow), ``.html`` (the player), or one frame as ``.png`` / ``.svg`` /
        ``.pdf`` (``frame=k``, default 0)."""
        path = str(path)
        ext = path.rsplit(".", 1)[-1].lower()
        if ext in ("png", "svg", "pdf", "jpg", "jpeg"):
            self.frame(frame or 0, dpi=dpi).savefig(path, dpi=dpi)
        elif ext in ("html", "htm"):
            with open(path, "w") as f:
                f.write(self.to_jshtml(dpi=dpi, fps=fps))
        elif ext == "gif":
            if not self.frames:
                raise ValueError(f"{self.title}: no steps to save")
            self._write(path, _gif_writer(), dpi, fps=fps or self.fps)
        else:
            raise ValueError(f"save: unknown file type .{ext}; use .gif, .html, .png, .svg or .pdf")
        return path

    def stepper(self, dpi=80):
        """A slider (and play button) over the frames: an ipywidgets widget.  Moving the
        slider updates the figure's artists and shows the figure again."""
        try:
            import ipywidgets as widgets
        except ImportError:
            raise ImportError("Animation.stepper() needs ipywidgets: pip install 'xla_explorer[widgets]' "
                              "(or pip install ipywidgets)") from None
        from IPython.display import display
        d = _Drawing(self, dpi=dpi)
        n = max(len(self.frames) - 1, 0)
        slider = widgets.IntSlider(value=0, min=0, max=n, description="step", continuous_update=True)
        play = widgets.Play(value=0, min=0, max=n, interval=int(1000 / self.fps))
        widgets.jslink((play, "value"), (slider, "value"))
        out = widgets.Output()

        def show(change=None):
            d.update(slider.value)
            with out:
                out.clear_output(wait=True)
                display(d.fig)

        slider.observe(show, names="value")
        show()
        box = widgets.VBox([widgets.HBox([play, slider]), out])
        box.drawing, box.slider = d, slider  # for tests and callers that drive it
        return box


def _shape_str(shape):
    return "[" + ",".join(str(s) for s in shape) + "]"


def _rgb(hex_colour):
    h = hex_colour.lstrip("#")
    return np.array([int(h[i:i + 2], 16) / 255 for i in (0, 2, 4)] + [1.0])


# -- drawing -----------------------------------------------------------------------------------

def _canvas_class():
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    class Canvas(FigureCanvasAgg):
        """Agg, except that ``draw_idle`` does nothing while a writer renders the frames
        itself (FuncAnimation asks for a full redraw after every frame)."""
        skip_idle = False

        def draw_idle(self, *args, **kwargs):
            if not self.skip_idle:
                super().draw_idle(*args, **kwargs)

    return Canvas


class _FastFrames:
    """Writer mixin: a frame is the background (drawn once) plus the changing artists,
    instead of a full ``savefig`` per frame."""

    def __init__(self, drawing, **kw):
        self.drawing = drawing
        super().__init__(**kw)

    def _image(self):
        from PIL import Image
        return Image.fromarray(np.ascontiguousarray(self.drawing.render()[..., :3]), "RGB")


def _html_writer():
    from matplotlib.animation import HTMLWriter

    class Writer(_FastFrames, HTMLWriter):
        """Frames encoded to PNG in worker threads (Pillow's encoder releases the GIL)."""

        def setup(self, *args, **kwargs):
            from concurrent.futures import ThreadPoolExecutor
            super().setup(*args, **kwargs)
            self._pool = ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1))

        def grab_frame(self, **savefig_kwargs):
            self._saved_frames.append(self._pool.submit(_png_base64, self._image()))

        def finish(self):
            try:
                frames = [f.result() for f in self._saved_frames]
            finally:
                self._pool.shutdown()
            total = sum(len(f) for f in frames)
            if total >= self._bytes_limit:
                raise RuntimeError(f"the animation is {total >> 20} MB, more than {self._bytes_limit >> 20} MB; "
                                   "use max_steps= (fewer frames) or a smaller dpi=")
            self._saved_frames = frames
            super().finish()

    return Writer


def _png_base64(image):
    import base64
    from io import BytesIO
    f = BytesIO()
    image.save(f, format="png", compress_level=1)
    return base64.encodebytes(f.getvalue()).decode("ascii")


def _gif_writer():
    from matplotlib.animation import PillowWriter

    class Writer(_FastFrames, PillowWriter):
        def grab_frame(self, **savefig_kwargs):
            self._frames.append(self._image())

    return Writer


class _Drawing:
    """One figure: an image per grid, cell texts for small grids, the explanation beside.
    ``update(k)`` shows frame k by rewriting image data and texts.

    With ``fast=True`` (the GIF and HTML writers) ``render()`` gives a frame's pixels
    without asking matplotlib to draw it: the static parts (titles, legend, ticks) are
    drawn once as a background; the grids' cells are painted into it with NumPy and the
    texts come from Pillow, line bitmaps cached.  Grids that show values as text (small
    ones) are drawn by matplotlib over the background (only their artists)."""

    def __init__(self, anim, dpi=80, fast=False):
        from matplotlib.figure import Figure
        from matplotlib.patches import Patch

        self.anim = anim
        self.fast = fast
        grids = anim.grids
        shapes = [g.image_shape for g in grids]
        total_w = sum(w for _, w in shapes)
        max_h = max(h for h, _ in shapes)
        cell = min(0.34, max(0.05, 9.0 / max(total_w, 1)), max(0.05, 4.5 / max(max_h, 1)))
        texts = [f.text for f in anim.frames] or [""]
        line_chars = min(max(len(line) for t in texts for line in t.split("\n")), 100)
        text_lines = max(t.count("\n") + 1 for t in texts)
        char_w = max(0.072, _TextImage.advance_px(8, dpi) / dpi) if fast else 0.072
        text_w = 0.25 + char_w * max(line_chars, 30)
        text_h = 0.16 * text_lines
        titles = [_panel_title(g) for g in grids]
        title_lines = max(t.count("\n") + 1 for t in titles)
        gap, left, top, bottom = 0.3, 0.35, 0.82 + 0.14 * title_lines, 0.55
        # each panel in a slot wide enough for its title
        slots = [max(w * cell, 0.065 * max(len(line) for line in t.split("\n")) + 0.1)
                 for (_, w), t in zip(shapes, titles)]
        panels_w = sum(slots) + gap * (len(shapes) - 1)
        body_h = max(max_h * cell + 0.25, text_h, 0.6)
        fig_w = left + panels_w + 0.5 + text_w
        fig_h = top + body_h + bottom
        self.fig = fig = Figure(figsize=(fig_w, fig_h), dpi=dpi)
        _canvas_class()(fig)
        fig.patch.set_facecolor("white")
        fig.text(left / fig_w, 1 - 0.12 / fig_h, f"{anim.title}  ({anim.summary})", fontsize=11, weight="bold",
                 va="top")
        x = left
        self.panels = []
        gridlines = cell * dpi >= 8  # cell borders only where cells are big enough to need them
        for g, (h, w), slot, title in zip(grids, shapes, slots, titles):
            pw, ph = w * cell, h * cell
            y = bottom + (body_h - ph)  # panels aligned at the top
            ax = fig.add_axes([(x + (slot - pw) / 2) / fig_w, y / fig_h, pw / fig_w, ph / fig_h])
            self.panels.append(_Panel(ax, g, cell, anim, g.name == anim.domain, gridlines, title))
            x += slot + gap
        tx = left + panels_w + 0.5
        if fast:
            self.counter = _TextImage(fig, left, fig_h - 0.40, panels_w + 0.3 + text_w, 0.2, 9)
            self.explanation = _TextImage(fig, tx, bottom + body_h, text_w, body_h, 8)
        else:
            self.counter = fig.text(left / fig_w, 1 - 0.40 / fig_h, "", fontsize=9, va="top")
            self.explanation = fig.text(tx / fig_w, (bottom + body_h) / fig_h, "", fontsize=8, family="monospace",
                                        va="top")
        roles = anim.roles_used()
        statics = sorted({r for g in grids for r in g.static_roles()})
        handles = [Patch(facecolor=ROLES[r][0], edgecolor="#888888", label=ROLES[r][1]) for r in roles]
        handles += [Patch(facecolor=STATIC[r][0], edgecolor="#888888", label=STATIC[r][1]) for r in statics]
        if handles:
            fig.legend(handles=handles, loc="lower left", ncol=min(len(handles), 6), fontsize=7, frameon=False,
                       bbox_to_anchor=(left / fig_w, 0.02), handlelength=1.2, columnspacing=1.0)
        self._background = None
        self.shown = None

    def update(self, k):
        frame = self.anim.frames[k]
        for p in self.panels:
            p.show(frame, self.fast)
        self.counter.set_text(self.anim.counter(frame))
        self.explanation.set_text(frame.text)
        self.shown = k
        return []

    def render(self):
        """The current frame's pixels, an RGBA uint8 array (``fast`` drawings only)."""
        canvas = self.fig.canvas
        slow = [p for p in self.panels if not p.painted]
        if self._background is None:
            dynamic = [a for p in self.panels for a in p.dynamic]
            for a in dynamic:
                a.set_visible(False)
            canvas.draw()
            self._region = canvas.copy_from_bbox(self.fig.bbox)
            self._background = np.array(canvas.buffer_rgba())
            renderer = canvas.get_renderer()
            for p in self.panels:
                p.locate(renderer, self._background.shape[0])
            for a in dynamic:
                a.set_visible(True)
        if slow:
            canvas.restore_region(self._region)
            for p in slow:
                for a in p.dynamic:
                    self.fig.draw_artist(a)
            rgba = np.array(canvas.buffer_rgba())
        else:
            rgba = self._background.copy()
        for p in self.panels:
            if p.painted:
                p.paint(rgba)
        self.counter.paint(rgba)
        self.explanation.paint(rgba)
        return rgba


class _TextImage:
    """A block of monospace text painted into a frame's pixels at ``x, top`` (inches),
    within ``width`` x ``height``.  Each character's bitmap is rendered once by Pillow and
    lines are put together from them (a line with other characters is rendered whole)."""

    def __init__(self, fig, x, top, width, height, fontsize, font="DejaVuSansMono.ttf"):
        import matplotlib
        from PIL import ImageFont
        dpi = fig.dpi
        fh = fig.get_size_inches()[1]
        self.x, self.y = int(round(x * dpi)), int(round((fh - top) * dpi))
        self.size = (max(1, int(round(width * dpi))), max(1, int(round(height * dpi))))
        self.font = ImageFont.truetype(os.path.join(matplotlib.get_data_path(), "fonts", "ttf", font),
                                       size=max(6, int(round(fontsize * dpi / 72))))
        ascent, descent = self.font.getmetrics()
        self.line_height = ascent + descent + 1
        self.advance = self.advance_px(fontsize, dpi, font)
        self.glyphs = {}
        self.lines = {}
        self.text = ""

    @staticmethod
    def advance_px(fontsize, dpi, font="DejaVuSansMono.ttf"):
        """The width of a character cell, in whole pixels."""
        import math

        import matplotlib
        from PIL import ImageFont
        f = ImageFont.truetype(os.path.join(matplotlib.get_data_path(), "fonts", "ttf", font),
                               size=max(6, int(round(fontsize * dpi / 72))))
        return max(1, int(math.ceil(f.getlength("M") - 0.25)))

    def set_text(self, text):
        self.text = text

    def _render(self, text, width):
        from PIL import Image, ImageDraw
        img = Image.new("L", (width, self.line_height), 255)
        ImageDraw.Draw(img).text((0, 0), text, font=self.font, fill=0)
        return np.asarray(img)

    def _line(self, line):
        if all(32 <= ord(ch) < 127 for ch in line):
            for ch in line:
                if ch not in self.glyphs:
                    self.glyphs[ch] = self._render(ch, self.advance)
            return np.concatenate([self.glyphs[ch] for ch in line], axis=1)
        bitmap = self.lines.get(line)
        if bitmap is None:
            if len(self.lines) > 2000:
                self.lines.clear()
            bitmap = self.lines[line] = self._render(line, self.size[0])
        return bitmap

    def paint(self, rgba):
        H, W = rgba.shape[:2]
        for i, line in enumerate(self.text.split("\n")):
            y = self.y + i * self.line_height
            if y + self.line_height > min(H, self.y + self.size[1]) or not line:
                continue
            bitmap = self._line(line)
            x0 = self.x + 1
            w = min(bitmap.shape[1], W - x0, self.size[0])
            if w > 0:
                view = rgba[y:y + self.line_height, x0:x0 + w, :3]
                np.minimum(view, bitmap[:, :w, None], out=view)


def _panel_title(grid):
    return grid.title + (f"\n{grid.name}{grid.view_label()}" if grid.fixed else "")


class _Panel:
    def __init__(self, ax, grid, cell, anim, is_domain, gridlines, title):
        self.grid, self.ax = grid, ax
        h, w = grid.image_shape
        pos, rows, cols = grid.drawn_positions()
        base = np.zeros((h, w, 4))
        ok, index = grid.elements_at(pos)
        value = grid.value
        # values as text in small grids (on white), as shades of grey otherwise
        show_text = bool(ok.sum()) and len(pos) <= TEXT_CELLS and max(h, w) <= TEXT_SIDE
        if len(pos):
            base[rows, cols] = _rgb("#f4f4f4")  # lattice cells that are no element and have no static role
            base[rows[ok], cols[ok]] = [1, 1, 1, 1]
            if ok.any() and value.size and not show_text:
                base[rows[ok], cols[ok]] = _value_colours(value[tuple(index[ok].T)] if value.ndim else
                                                          np.repeat(value.reshape(1), int(ok.sum())))
            codes = grid.static[tuple(pos.T)] if grid.rank else np.repeat(grid.static.reshape(1), len(pos))
            names = {v: k for k, v in _STATIC_CODES.items()}
            for code in np.unique(codes):
                if code:
                    m = codes == code
                    base[rows[m], cols[m]] = _rgb(STATIC[names[int(code)]][0])
        self.base = base
        self.rgba = base
        self.image = ax.imshow(base, interpolation="nearest", aspect="auto", extent=(-0.5, w - 0.5, h - 0.5, -0.5))
        self.dynamic = [self.image]
        ax.set_xlim(-0.5, w - 0.5)
        ax.set_ylim(h - 0.5, -0.5)
        ax.set_xticks([])
        ax.set_yticks([])
        for s in ax.spines.values():
            s.set_visible(False)
        ax.set_title(title, fontsize=8)
        self.gridlines = bool(gridlines and len(pos))
        if self.gridlines:
            from matplotlib.collections import LineCollection
            segs = [[(c - 0.5, r - 0.5), (c + 0.5, r - 0.5)] for r, c in zip(rows, cols)]
            segs += [[(c - 0.5, r + 0.5), (c + 0.5, r + 0.5)] for r, c in zip(rows, cols)]
            segs += [[(c - 0.5, r - 0.5), (c - 0.5, r + 0.5)] for r, c in zip(rows, cols)]
            segs += [[(c + 0.5, r - 0.5), (c + 0.5, r + 0.5)] for r, c in zip(rows, cols)]
            lines = ax.add_collection(LineCollection(segs, colors=GRIDLINE, linewidths=min(1.0, cell * 4),
                                                     clip_on=False))
            self.dynamic.append(lines)  # drawn over the image
        # axis numbers for small plain grids: rows and columns of the drawn dimensions
        if len(pos) and len(grid.dims) in (1, 2) and w <= 24 and h <= 24:
            fs = max(4, min(7, cell * 72 * 0.4))
            ax.set_xticks(range(w))
            ax.set_xticklabels(grid.axis_labels(grid.dims[-1]), fontsize=fs)
            if len(grid.dims) == 2:
                ax.set_yticks(range(h))
                ax.set_yticklabels(grid.axis_labels(grid.dims[0]), fontsize=fs)
            ax.tick_params(length=0, pad=1)
        if not len(pos):
            ax.text(0, 0, "empty", ha="center", va="center", fontsize=6, color="#888888")
        elif len(grid.dims) == 3:  # one label per slice
            n0, n2 = grid.shape[grid.dims[0]], grid.shape[grid.dims[2]]
            if n0 <= 16:
                for s in range(n0):
                    parts = [str(s) if d == grid.dims[0] else ":" if d in grid.dims else str(grid.fixed[d])
                             for d in range(grid.rank)]
                    ax.text(s * (n2 + 1) + (n2 - 1) / 2, h - 0.5 + 0.15, f"[{','.join(parts)}]", ha="center",
                            va="top", fontsize=6, color="#555555")
        self.texts = {}
        if show_text:
            fs = max(4, min(8, cell * 72 * 0.38))
            for p, r, c, good, i in zip(pos, rows, cols, ok, index):
                if good:
                    v = value[tuple(i)] if value.ndim else value
                    self.texts[tuple(int(x) for x in p)] = ax.text(c, r, _cell_text(v), ha="center", va="center",
                                                                   fontsize=fs)
        self.dynamic += list(self.texts.values())
        #: painted with NumPy by fast drawings (no texts over the cells to keep on top)
        self.painted = not self.texts
        self.visit = None
        if is_domain and len(anim.frames) > 1:
            visit = np.full((h, w), np.iinfo(np.int64).max, np.int64)
            for f in anim.frames:
                rc = grid.rc(grid.position(f.index))
                if rc is not None:
                    visit[rc] = min(visit[rc], f.number)
            self.visit = visit
        self.done = _rgb(ROLES["done"][0])
        self.colours = {r: _rgb(c) for r, (c, _) in ROLES.items()}

    def show(self, frame, fast=False):
        rgba = self.base.copy()
        if self.visit is not None:
            rgba[self.visit < frame.number] = self.done
        for position, role in frame.cells.get(self.grid.name, {}).items():
            rc = self.grid.rc(position)
            if rc is not None:
                rgba[rc] = self.colours[role]
        self.rgba = rgba
        if not (fast and self.painted):
            self.image.set_data(rgba)
        values = frame.values.get(self.grid.name)
        if values is not None and self.texts:
            for p, t in self.texts.items():
                t.set_text(_cell_text(values[self.grid.index_of(p)]))

    def locate(self, renderer, height):
        """Where the panel's cells are in the frame's pixels (after the background is drawn)."""
        box = self.ax.get_window_extent(renderer)
        self.r0, r1 = int(round(height - box.y1)), int(round(height - box.y0))
        self.c0, c1 = int(round(box.x0)), int(round(box.x1))
        h, w = self.base.shape[:2]
        self.rowmap = np.minimum(((np.arange(r1 - self.r0) + 0.5) * h / max(r1 - self.r0, 1)).astype(int), h - 1)
        self.colmap = np.minimum(((np.arange(c1 - self.c0) + 0.5) * w / max(c1 - self.c0, 1)).astype(int), w - 1)
        self.row_lines = np.r_[False, self.rowmap[1:] != self.rowmap[:-1]] if self.gridlines else None
        self.col_lines = np.r_[False, self.colmap[1:] != self.colmap[:-1]] if self.gridlines else None

    def paint(self, rgba):
        cells = self.rgba
        rgb = np.where(cells[..., 3:] > 0, cells[..., :3], 1.0)
        rgb = (rgb * 255 + 0.5).astype(np.uint8)
        block = rgb[self.rowmap][:, self.colmap]
        if self.gridlines:
            line = (_rgb(GRIDLINE)[:3] * 255).astype(np.uint8)
            block[self.row_lines] = line
            block[:, self.col_lines] = line
        H, W = rgba.shape[:2]
        r1, c1 = min(self.r0 + block.shape[0], H), min(self.c0 + block.shape[1], W)
        rgba[self.r0:r1, self.c0:c1, :3] = block[:r1 - self.r0, :c1 - self.c0]


def _value_colours(values):
    """Light greys for values (darker = larger); NaN pink."""
    v = np.asarray(values)
    if v.dtype.kind == "c":
        v = np.abs(v)
    v = v.astype(np.float64)
    finite = np.isfinite(v)
    out = np.ones(v.shape + (4,))
    if finite.any():
        lo, hi = v[finite].min(), v[finite].max()
        t = np.zeros_like(v) if hi == lo else (np.where(finite, v, lo) - lo) / (hi - lo)
        g = 0.97 - 0.22 * t
        out[..., 0] = out[..., 1] = out[..., 2] = g
    out[np.isnan(v)] = [1.0, 0.8, 0.9, 1.0]
    out[np.isposinf(v)] = [0.7, 0.7, 0.7, 1.0]
    out[np.isneginf(v)] = [0.7, 0.7, 0.7, 1.0]
    return out


# -- from a target to a context ----------------------------------------------------------------

OPTIONS = ("dims", "fixed", "max_steps", "sample")


def context(target, instruction=None, *args, invocation=0, trace=None, **attrs):
    """The OpContext of ``(comp, "gather.1", *module_args)`` or ``("gather", *values, **attrs)``."""
    from ..computation import XlaComputation
    from ..executors.reference import ExecutionContext, bind_attrs
    from ..inspect import _plain, instruction_operands, map_of
    if isinstance(target, XlaComputation):
        if not isinstance(instruction, str):
            raise TypeError("animate(comp, 'gather.1', *args): name the instruction")
        iv = instruction_operands(target, instruction, *args, invocation=invocation, trace=trace)
        _check(iv.op)
        bound = bind_attrs(_plain(iv.instruction.attrs), ExecutionContext())
        imap = map_of(iv)
        return OpContext(iv.instruction.opcode, iv.op, iv.operands, bound, iv.instruction.shape, iv.result, imap,
                         iv.label, known=iv.known or not any(a.unknown for a in _first_accesses(imap)))
    if not isinstance(target, str):
        raise TypeError(f"animate: expected an XlaComputation or an opcode / op name, got {type(target).__name__}")
    from ..inspect import eager_operands, op_by_name
    try:
        op = op_by_name(target)
    except NotImplementedError:
        raise NotImplementedError(f"animate: unknown op {target!r}; animated ops: {', '.join(animated())}") from None
    _check(op)
    values = ((instruction,) if instruction is not None else ()) + args
    iv = eager_operands(op, values, attrs)
    return OpContext(op.opcode, op, iv.operands, iv.attrs, iv.shape, iv.result, map_of(iv), op.name)


def _first_accesses(imap, n=8):
    out = []
    for a in imap:
        out.append(a)
        if len(out) >= n:
            break
    return out


def _reference(op, operands, shape, bound, ectx):
    from ..executors.reference import check_reference_size
    from ..shapes import check_size
    check_size(shape, f"animate {op.name}")
    check_reference_size(op, f"animate {op.name}", operands, shape)
    kwargs = dict(bound)
    if op.needs_context:
        kwargs["ctx"] = ectx
    return op.reference(*operands, shape=shape, **kwargs)


def _check(op):
    if op.opcode not in registry.LAYERS.get("animation", {}):
        raise NotImplementedError(f"{op.name} ({op.opcode}) has no animator; animated ops: {', '.join(animated())}")


def animated():
    return sorted(registry.LAYERS.get("animation", {}))


def animate(target, instruction=None, *args, dims=None, fixed=None, max_steps=200, sample=False, **attrs):
    ctx = context(target, instruction, *args, **attrs)
    animator = registry.LAYERS["animation"][ctx.opcode]
    return animator(ctx, dims=dims, fixed=fixed, max_steps=max_steps, sample=sample)
