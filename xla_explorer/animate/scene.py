"""One frame of a picture laid out in pixels: rectangles and texts, nothing else.

``layout(anim, frame, ...)`` turns the model (grids, the frame's marked cells, the
formula) into a ``Scene``; the drawers only place its primitives: ``draw.figure``
(matplotlib), ``draw.raster`` (Pillow, GIF and HTML frames) and ``view.svg`` (the
interactive view).  Sizes are in pixels and every text is at least ``MIN_PX`` high, so a
picture is legible at the size it first appears, whichever drawer draws it.

Big arrays are drawn through a window (at most ``max_rows`` x ``max_cols`` cells of a
grid's image) placed around the cells the frame marks, with the element indices along
its edges; values are formatted to fit their cells.
"""
from dataclasses import dataclass, field

import numpy as np

from .model import DARK, ROLES, STATIC, _STATIC_NAMES, _PRIORITY, fmt_cell, fmt_index

#: the smallest text drawn, in pixels
MIN_PX = 10
TITLE_PX, HEAD_PX, CELL_PX, LABEL_PX, TEXT_PX, LEGEND_PX = 16, 13, 12, 11, 13, 12
#: approximate advance of a character, in ems (DejaVu Sans Mono; DejaVu Sans on average)
MONO_EM, SANS_EM = 0.602, 0.56
CELL_H = 24
GRIDLINE, EMPTY, TEXT, MUTED, WARN = "#c8c8c8", "#f2f2f2", "#1a1a1a", "#666666", "#a02020"


@dataclass
class Rect:
    x: float
    y: float
    w: float
    h: float
    fill: str
    stroke: str = None
    meta: dict = None          # the cell's grid and element index (the view's hover targets)


@dataclass
class Text:
    x: float
    y: float
    text: str
    px: float
    fill: str = TEXT
    anchor: str = "start"      # start | middle | end
    baseline: str = "middle"   # middle | top
    mono: bool = False
    bold: bool = False
    #: what the interactive view rewrites: "counter" (the selection line), "formula", or a
    #: cell's value ({"grid", "k"} in ``meta``)
    kind: str = ""
    meta: dict = None


@dataclass
class Panel:
    """Where one grid went: its window into the grid's image and its place."""
    grid: str
    x: float
    y: float
    width: float
    height: float
    window: tuple               # (row0, col0, rows, cols) of the grid's image
    image: tuple                # (rows, columns) of the whole image
    cell: tuple                 # (cell width, cell height)
    cells_x: float = 0          # where the cells start
    cells_y: float = 0


@dataclass
class Scene:
    width: float
    height: float
    rects: list = field(default_factory=list)
    texts: list = field(default_factory=list)
    panels: list = field(default_factory=list)
    legend: list = field(default_factory=list)   # (colour, label) per entry
    #: where the formula's lines go: (x, y, line height, px) -- the view redraws them on hover
    formula_at: tuple = None

    def fonts(self):
        """Every text size used, in pixels."""
        return sorted({t.px for t in self.texts})

    def fills(self):
        return {r.fill for r in self.rects}


def text_width(text, px, mono=False):
    return len(text) * px * (MONO_EM if mono else SANS_EM)


# -- windows -----------------------------------------------------------------------------------

def focus_cells(grid, frame):
    """Image (row, column) cells of ``grid`` that ``frame`` marks, the most important first."""
    ranked = []
    for position, role in frame.cells.get(grid.name, {}).items():
        rc = grid.rc(position)
        if rc is not None:
            ranked.append((-_PRIORITY[role], rc))
    for ranges, role in frame.regions.get(grid.name, ()):
        middle = tuple((a + b - 1) // 2 for a, b in ranges)
        position = grid.position(middle)
        lo, hi = grid.position([a for a, _ in ranges]), grid.position([b - 1 for _, b in ranges])
        fixed_ok = all(lo[d] <= i <= hi[d] for d, i in grid.fixed.items())
        if fixed_ok:
            rc = grid.rc(tuple(i if d not in grid.fixed else grid.fixed[d] for d, i in enumerate(position)))
            if rc is not None:
                ranked.append((-_PRIORITY[role] + 0.5, rc))
    ranked.sort()
    return [rc for _, rc in ranked]


def follow_fixed(grid, frame):
    """``grid.fixed`` moved to the slice of the frame's most important mark of the grid
    (unchanged when the frame marks nothing there, or marks something in the slice)."""
    if not grid.fixed:
        return dict(grid.fixed)
    marks = sorted(frame.cells.get(grid.name, {}).items(), key=lambda pr: -_PRIORITY[pr[1]])
    if marks:
        if any(grid.drawn(p) for p, role in marks if role == marks[0][1]):
            return dict(grid.fixed)
        target = marks[0][0]
    elif frame.regions.get(grid.name):
        target = grid.position([a for a, _ in frame.regions[grid.name][0][0]])
    else:
        return dict(grid.fixed)
    return {d: (i if d in grid.pinned else int(target[d])) for d, i in grid.fixed.items()}


def window_for(grid, frame, max_rows, max_cols, origin=None):
    """(row0, col0, rows, cols): the part of ``grid``'s image drawn, around the frame's
    most important marks unless ``origin`` (row0, col0) is given."""
    H, W = grid.image_shape
    # a row of 2-D slices is drawn whole while it has few slices (the default views keep
    # three dimensions only then)
    rows, cols = min(H, max_rows), min(W, max(max_cols, 40) if len(grid.dims) == 3 else max_cols)
    if origin is not None:
        r0, c0 = origin
    elif rows == H and cols == W:
        r0 = c0 = 0
    else:
        focus = focus_cells(grid, frame) if frame is not None else []
        if not focus:
            r0 = c0 = 0
        else:
            top = [rc for rc in focus if rc == focus[0]] or focus[:1]
            # the bounding box of the most important cells, then as many others as fit
            rs, cs = [r for r, _ in focus], [c for _, c in focus]
            r_lo, r_hi, c_lo, c_hi = min(rs), max(rs), min(cs), max(cs)
            if r_hi - r_lo >= rows or c_hi - c_lo >= cols:
                (r_lo, c_lo), (r_hi, c_hi) = top[0], top[0]
            r0 = (r_lo + r_hi) // 2 - rows // 2
            c0 = (c_lo + c_hi) // 2 - cols // 2
    r0 = int(min(max(r0, 0), H - rows))
    c0 = int(min(max(c0, 0), W - cols))
    return r0, c0, rows, cols


# -- the layout --------------------------------------------------------------------------------

def layout(anim, frame, *, max_rows=10, max_cols=12, max_width=1600, windows=None, counter=None, visited=None,
           title=None, interactive=False, follow=True, reserve=None, roles=()):
    """The Scene of ``frame`` of ``anim``.  ``windows``: {grid: (row0, col0)} to place a
    grid's window (the view's panning); ``visited``: domain positions drawn as "done";
    ``counter``: the line under the title; ``follow``: a grid with fixed dimensions
    shows the slice holding the frame's most important mark; ``reserve``: (characters,
    lines) the formula's place must hold (the view shows other elements' formulas there);
    ``roles``: roles the legend lists besides the frame's (what the view's hovers show).

    The formula goes at the top right, beside the first rows of grids, when the first grid
    and the formula fit in ``max_width`` (the rows beside it flow in the width it leaves,
    a grid too wide for that goes under it); else under the grids."""
    windows = windows or {}
    scene = Scene(0, 0)
    pad = 14
    y = pad
    scene.texts.append(Text(pad, y, title or f"{anim.title}", TITLE_PX, bold=True, baseline="top"))
    y += TITLE_PX + 8
    if counter:
        scene.texts.append(Text(pad, y, counter, HEAD_PX, fill=MUTED, baseline="top", kind="counter"))
        y += HEAD_PX + 6
    if not anim.known:
        scene.texts.append(Text(pad, y, "Index values unknown (shapes only): the cells that may be read or written "
                                "are shaded; pass the module's arguments to see the real ones.", HEAD_PX, fill=WARN,
                                baseline="top", bold=True))
        y += HEAD_PX + 6
    y += 6
    used_roles, used_static = set(roles), set()
    built = []
    for g in anim.grids:
        saved = dict(g.fixed)
        if follow and frame is not None:
            g.fixed = follow_fixed(g, frame)
        try:
            built.append(_panel(anim, g, frame, max_rows, max_cols, windows.get(g.name),
                                visited if g.name == anim.domain else None, interactive))
        finally:
            g.fixed = saved
    # the formula: at the top right, beside the rows of panels it leaves room for (the rows
    # below it take the whole width), when the first panel and the formula fit side by side;
    # else under the panels
    lines = (frame.text if frame is not None else "").split("\n")
    chars, n_lines = reserve or (0, 0)
    text_w = max([text_width(line, TEXT_PX, mono=True) for line in lines] + [text_width("0" * chars, TEXT_PX, True)])
    n_lines = max(len(lines), n_lines)
    line_h = TEXT_PX + 5
    beside = bool(built) and pad + built[0][0].width + 36 + text_w <= max_width
    narrow = max_width - 36 - text_w            # the width of the rows beside the formula
    text_bottom_at = y + n_lines * line_h + 12  # rows starting lower take the whole width
    # panels, flowing left to right
    x, row_top, row_height = pad, y, 0
    placed, beside_right = [], pad
    for panel, rects, texts, panel_roles, statics in built:
        used_roles |= panel_roles
        used_static |= statics
        limit = narrow if beside and row_top < text_bottom_at else max_width
        if x > pad and x + panel.width > limit:
            x, row_top = pad, row_top + row_height + 18
            row_height = 0
            if beside and row_top < text_bottom_at and pad + panel.width > narrow:
                row_top = max(row_top, text_bottom_at)   # too wide to sit beside it: under it
        _shift(panel, rects, texts, x, row_top)
        placed.append(panel)
        scene.rects += rects
        scene.texts += texts
        if row_top < text_bottom_at:
            beside_right = max(beside_right, x + panel.width)
        x += panel.width + 28
        row_height = max(row_height, panel.height)
    scene.panels = placed
    panels_right = max([p.x + p.width for p in placed] + [pad])
    bottom = row_top + row_height + 16
    tx, ty = (beside_right + 36, y) if beside else (pad, bottom)
    for k, line in enumerate(lines):
        scene.texts.append(Text(tx, ty + k * line_h, line, TEXT_PX, mono=True, baseline="top", kind="formula"))
    scene.formula_at = (tx, ty, line_h, TEXT_PX)
    text_bottom = ty + n_lines * line_h
    y = max(bottom, text_bottom + 12)
    # the legend: one entry per meaning
    entries = [(ROLES[r][0], ROLES[r][1]) for r in ROLES if r in used_roles]
    entries += [(STATIC[s][0], STATIC[s][1]) for s in STATIC if s in used_static]
    scene.legend = entries
    lx = pad
    width = max(panels_right, tx + text_w) + pad
    for colour, label in entries:
        w = 18 + 6 + text_width(label, LEGEND_PX) + 18
        if lx > pad and lx + w > max(width, max_width):
            lx, y = pad, y + LEGEND_PX + 12
        scene.rects.append(Rect(lx, y, 18, 14, colour, stroke="#888888"))
        scene.texts.append(Text(lx + 24, y + 7, label, LEGEND_PX))
        lx += w
    y += LEGEND_PX + 12 + pad
    scene.width = int(np.ceil(max(width, lx + pad)))
    scene.height = int(np.ceil(y))
    return scene


def _shift(panel, rects, texts, dx, dy):
    panel.x += dx
    panel.y += dy
    panel.cells_x += dx
    panel.cells_y += dy
    for r in rects:
        r.x += dx
        r.y += dy
    for t in texts:
        t.x += dx
        t.y += dy


def _panel(anim, g, frame, max_rows, max_cols, origin, visited, interactive):
    """One grid's panel at (0, 0): (Panel, rects, texts, roles used, static roles used)."""
    r0, c0, rows, cols = window_for(g, frame, max_rows, max_cols, origin)
    H, W = g.image_shape
    # what each window cell shows
    positions, cells = [], []
    for r in range(rows):
        for c in range(cols):
            p = g.position_at(r0 + r, c0 + c)
            if p is None:  # a gap between 3-D slices, or an empty array
                cells.append(None)
                continue
            positions.append(p)
            cells.append(p)
    statics = g.static_codes(np.array(positions, np.int64).reshape(len(positions), g.rank)) if positions else []
    static_of = {p: int(s) for p, s in zip(positions, statics)}
    running = frame.values.get(g.name) if frame is not None else None
    texts_in = []
    info = []
    for p in cells:
        if p is None:
            info.append(None)
            continue
        index = g.index_of(p)
        role = frame.role_at(g.name, p) if frame is not None else None
        if role is None and visited is not None and p in visited:
            role = "done"
        text = ""
        if index is not None:
            v = running[index] if running is not None else g.value_at(index)
            text = fmt_cell(v)
        info.append((p, index, role, static_of.get(p, 0), text))
        texts_in.append(text)
    longest = max([len(t) for t in texts_in] + [1])
    label_chars = max(len(str(max(g.shape[d] for d in g.dims) - 1)) if g.dims else 1, 1)
    cw = int(max(30, text_width("0" * max(longest, label_chars), CELL_PX, mono=True) + 12))
    ch = CELL_H
    rects, texts = [], []
    roles, static_used = set(), set()
    # titles
    title_lines = g.title.split("\n")
    if g.fixed:
        title_lines.append(f"{g.name}{g.view_label()}")
    windowed = rows < H or cols < W
    if windowed:
        title_lines.append(_window_note(g, r0, c0, rows, cols, H, W))
    y = 0
    for k, line in enumerate(title_lines):
        texts.append(Text(0, y, line, HEAD_PX if k == 0 else LABEL_PX, bold=k == 0, baseline="top",
                          fill=TEXT if k == 0 else MUTED))
        y += (HEAD_PX if k == 0 else LABEL_PX) + 5
    y += 4
    # column labels (the last drawn dimension's index), row labels (the first's)
    row_labels = len(g.dims) >= 2
    left = int(text_width("0" * label_chars, LABEL_PX, mono=True) + 10) if row_labels else 0
    top = y + (LABEL_PX + 6 if g.dims else 0)
    if g.dims:
        for c in range(cols):
            p = g.position_at(r0, c0 + c)
            if p is None:
                continue
            d = g.dims[-1]
            texts.append(Text(left + c * cw + cw / 2, y + LABEL_PX / 2, g.axis_label(d, p[d]), LABEL_PX,
                              fill=MUTED, anchor="middle", mono=True))
    if row_labels:
        for r in range(rows):
            p = g.position_at(r0 + r, c0)
            if p is None:
                p = g.position_at(r0 + r, c0 + (cols - 1))
            if p is None:
                continue
            d = g.dims[-2]
            texts.append(Text(left - 6, top + r * ch + ch / 2, g.axis_label(d, p[d]), LABEL_PX, fill=MUTED,
                              anchor="end", mono=True))
    # cells
    number = 0   # the cell's number in this panel (the view addresses cells by it)
    for k, item in enumerate(info):
        if item is None:
            continue
        r, c = divmod(k, cols)
        p, index, role, static, text = item
        if static:
            base = STATIC[_STATIC_NAMES[static]][0]
            static_used.add(_STATIC_NAMES[static])
        else:
            base = EMPTY if index is None else "#ffffff"
        fill = base
        if role is not None:
            fill = ROLES[role][0]
            roles.add(role)
        meta = {"grid": g.name, "index": list(index) if index is not None else None, "position": list(p),
                "k": number, "base": base} if interactive else None
        x0, y0 = left + c * cw, top + r * ch
        rects.append(Rect(x0, y0, cw, ch, fill, stroke=GRIDLINE, meta=meta))
        if text:
            colour = "#ffffff" if role in DARK else (MUTED if text == "?" else TEXT)
            texts.append(Text(x0 + cw / 2, y0 + ch / 2, text, CELL_PX, fill=colour, anchor="middle", mono=True,
                              kind="value" if interactive else "", meta={"grid": g.name, "k": number}))
        number += 1
    # 3-D views: one label per slice
    if len(g.dims) == 3:
        n2 = g.shape[g.dims[2]]
        for c in range(cols):
            p = g.position_at(r0, c0 + c)
            if p is not None and (c0 + c) % (n2 + 1) == 0:
                parts = [str(p[d]) if d == g.dims[0] else ":" if d in g.dims else str(g.fixed[d])
                         for d in range(g.rank)]
                texts.append(Text(left + c * cw, top + rows * ch + 4, f"[{','.join(parts)}]", LABEL_PX,
                                  fill=MUTED, baseline="top", mono=True))
    height = top + rows * ch + (LABEL_PX + 8 if len(g.dims) == 3 else 0)
    width = max(left + cols * cw, max(text_width(t, HEAD_PX if i == 0 else LABEL_PX, mono=False)
                                      for i, t in enumerate(title_lines)))
    panel = Panel(g.name, 0, 0, width, height, (r0, c0, rows, cols), (H, W), (cw, ch), left, top)
    return panel, rects, texts, roles, static_used


def _window_note(g, r0, c0, rows, cols, H, W):
    parts = []
    if rows < H:
        parts.append(f"rows {r0}-{r0 + rows - 1} of {H}")
    if cols < W:
        parts.append(f"columns {c0}-{c0 + cols - 1} of {W}")
    return "window: " + ", ".join(parts)


def frame_counter(anim, frame):
    return anim.counter(frame)


def selection_line(anim, frame):
    return f"{anim.domain}{fmt_index(frame.index)}"
