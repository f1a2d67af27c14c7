"""The interactive index-map view: hover or click a result element, the operand elements
it reads light up (and the index values that chose them, clamped or skipped), with the
spec's formula filled in for that element beside it.

    v = xe.index_map_view(comp, "gather.1", *module_args)    # any instruction, any invocation
    v = xe.index_map_view("gather", operand, indices, offset_dims=[1], ...)
    v.select((2, 0)); v.highlighted["operand"]     # {element index: role}
    v.formula                                       # the formula of the selection

The picture is the animation's model (``model.Animation.frame_at``) laid out by
``scene.layout`` and drawn here as SVG: crisp at any zoom, text at least 10 px.  Arrays
of rank above 2 show two dimensions (chosen per grid) with sliders for the others; big
arrays show a window around the selection, with arrows to move it.

Hovering needs no kernel: with the picture, Python ships (``hover_data``) what every
element of the domain's drawn window lights up -- each drawn cell's role, one character
a cell, patterns shared between elements -- and its formula, so the browser redraws a
hover at once, with a busy kernel, a dead one, or none (a saved HTML page).  The data is
bounded by the window (at most ``max_rows x max_cols`` elements), not the array.  A hover
is sent to Python afterwards, quietly (``selected``, ``highlighted`` and ``formula``
follow it); a click pins the element and is sent too: Python then centres the windows on
what the element reads and redraws, as for the arrows, the sliders and the dimension
pickers.  In Jupyter (JupyterLab, Notebook 7, VS Code) the view is an anywidget; without
anywidget (or saved as HTML) it is a static picture whose hover works the same
(``html()`` carries the data and the script).
"""
import html as _html
import json

from .model import ROLES, fmt_cell
from .scene import DARK, GRIDLINE, MONO_EM, MUTED, TEXT, layout  # noqa: F401  (MONO_EM: text widths match)

SANS = "DejaVu Sans, Verdana, Helvetica, Arial, sans-serif"
MONO = "DejaVu Sans Mono, Menlo, Consolas, monospace"


def svg(scene, domain=None):
    """The scene as an SVG string; cells carry ``data-grid``, ``data-index``, ``data-role``,
    ``data-k`` (the cell's number in its grid) and ``data-base`` (its fill without a role,
    when not white); ``data-domain="1"`` marks the domain grid's cells (the hover
    targets); the selection line is ``text.xe-counter``, the formula's lines are in
    ``g.xe-formula``, a cell's value is ``text.xe-v``.  Shared attributes are CSS classes
    (the window's cells are most of the page)."""
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{scene.width}" height="{scene.height}" '
           f'viewBox="0 0 {scene.width} {scene.height}" style="background:#fff" font-family="{SANS}">'
           f'<style>.xe-g{{stroke:{GRIDLINE}}} rect[data-domain]{{cursor:pointer}} text{{pointer-events:none}} '
           f'.xe-m{{font-family:{MONO};white-space:pre}} .xe-c{{dominant-baseline:central}} '
           f'.xe-h{{dominant-baseline:hanging}} .xe-mid{{text-anchor:middle}} .xe-end{{text-anchor:end}}</style>']
    colours = {v[0]: k for k, v in ROLES.items()}
    for r in scene.rects:
        attrs = ""
        if r.meta is not None:
            index = r.meta["index"]
            attrs = f' data-grid="{_html.escape(r.meta["grid"])}"'
            if index is not None:
                attrs += f' data-index="{json.dumps(index)}"'
            if "k" in r.meta:
                attrs += f' data-k="{r.meta["k"]}"' + (f' data-base="{r.meta["base"]}"'
                                                       if r.meta["base"] != "#ffffff" else "")
            role = colours.get(r.fill)
            if role and r.fill != r.meta.get("base"):
                attrs += f' data-role="{role}"'
            if r.meta["grid"] == domain and index is not None:
                attrs += ' data-domain="1"'
        stroke = ' class="xe-g"' if r.stroke == GRIDLINE else (f' stroke="{r.stroke}"' if r.stroke else "")
        out.append(f'<rect x="{_n(r.x)}" y="{_n(r.y)}" width="{_n(r.w)}" height="{_n(r.h)}" fill="{r.fill}"'
                   f'{stroke}{attrs}/>')
    formula = [t for t in scene.texts if t.kind == "formula"]
    for t in scene.texts:
        if t.kind != "formula":
            out.append(_text(t))
    out.append('<g class="xe-formula">' + "".join(_text(t) for t in formula) + "</g>")
    out.append("</svg>")
    return "".join(out)


def _n(x):
    return f"{x:.1f}".rstrip("0").rstrip(".")


def _text(t):
    classes = ["xe-h" if t.baseline == "top" else "xe-c"]
    if t.anchor != "start":
        classes.append("xe-mid" if t.anchor == "middle" else "xe-end")
    if t.mono:
        classes.append("xe-m")
    extra = ""
    if t.kind == "counter":
        classes.append("xe-counter")
    elif t.kind == "value" and t.meta is not None:
        classes.append("xe-v")
        extra = f' data-grid="{_html.escape(t.meta["grid"])}" data-k="{t.meta["k"]}"'
    weight = ' font-weight="bold"' if t.bold else ""
    # xml:space keeps a formula's aligning spaces where CSS white-space is not read
    space = ' xml:space="preserve"' if t.kind == "formula" else ""
    return (f'<text x="{_n(t.x)}" y="{_n(t.y)}" font-size="{t.px}" fill="{t.fill}" class="{" ".join(classes)}"'
            f'{weight}{space}{extra}>{_html.escape(t.text)}</text>')


def _runs(lit, code):
    """{cell number: role} as runs of one role: ``"3a7-12c"`` (cells 3, then 7 to 12)."""
    out, items = [], sorted(lit.items())
    i = 0
    while i < len(items):
        j = i
        while j + 1 < len(items) and items[j + 1][0] == items[j][0] + 1 and items[j + 1][1] == items[i][1]:
            j += 1
        a, b = items[i][0], items[j][0]
        out.append(f"{a}{'-' + str(b) if b > a else ''}{code[items[i][1]]}")
        i = j + 1
    return "".join(out)


class _Table:
    """Strings stored once, referred to by number (patterns many elements share)."""

    def __init__(self):
        self.items, self._number = [], {}

    def add(self, text):
        k = self._number.get(text)
        if k is None:
            k = self._number[text] = len(self.items)
            self.items.append(text)
        return k


def _drawn(scene):
    """{grid: ({lattice position: cell number}, [element index or None per cell number])}."""
    out = {}
    for r in scene.rects:
        if r.meta is None or "k" not in r.meta:
            continue
        where, indices = out.setdefault(r.meta["grid"], ({}, []))
        where[tuple(r.meta["position"])] = r.meta["k"]
        indices.append(tuple(r.meta["index"]) if r.meta["index"] is not None else None)
    return out


class IndexMapView:
    """The state of the view (selection, per-grid dimensions, sliders, windows) and its
    drawing; no widget library needed (the widget wraps one)."""

    def __init__(self, anim, *, max_rows=16, max_cols=20, max_width=900, select=None):
        self.animation = anim
        #: the picture's layout width: a notebook's output area is about 900 px wide
        self.max_rows, self.max_cols, self.max_width = max_rows, max_cols, max_width
        self.pinned = False
        self._windows = {}
        shape = anim.index_map.domain_shape
        first = select if select is not None else (anim.frames[0].index if anim.frames else (0,) * len(shape))
        self.frame = None
        if len(anim.index_map):
            self.select(first, pin=select is not None)

    @classmethod
    def of_animation(cls, anim, **kw):
        return cls(anim, **kw)

    # -- what tests and callers read ---------------------------------------------------------
    @property
    def selected(self):
        return self.frame.index if self.frame is not None else None

    @property
    def formula(self):
        return self.frame.text if self.frame is not None else ""

    @property
    def highlighted(self):
        """{grid name: {element index: role}} of the current selection (regions of
        candidates are in ``regions``)."""
        out = {}
        if self.frame is None:
            return out
        for g in self.animation.grids:
            cells = {}
            for position, role in self.frame.cells.get(g.name, {}).items():
                index = g.index_of(position)
                if index is not None:
                    cells[index] = role
            out[g.name] = cells
        return out

    @property
    def regions(self):
        return dict(self.frame.regions) if self.frame is not None else {}

    # -- interaction ------------------------------------------------------------------------
    def _element(self, index, what):
        index = tuple(int(i) for i in (index if isinstance(index, (tuple, list)) else (index,)))
        shape = self.animation.index_map.domain_shape
        if len(index) != len(shape) or any(not 0 <= i < n for i, n in zip(index, shape)):
            raise IndexError(f"{what}({list(index)}): outside the {self.animation.domain} shape {list(shape)}")
        return index

    def select(self, index, pin=True):
        """Select domain element ``index`` (the result's, or the updates' for Scatter)."""
        self.frame = self.animation.frame_at(self._element(index, "select"))
        self.pinned = pin
        self._follow()
        return self

    def hover(self, index):
        """What the browser reports after drawing a hover itself: the selection moves to
        ``index`` (unpinned) without moving windows or sliders (the picture the browser
        shows stays valid); ignored while an element is pinned."""
        if not self.pinned:
            self.frame = self.animation.frame_at(self._element(index, "hover"))
        return self

    def _follow(self):
        """Show the selection: the domain grid's sliders go to the selected element, every
        other grid's to its most important marked cell; windows recentre."""
        self._windows = {}
        for g in self.animation.grids:
            self._follow_grid(g)

    def _follow_grid(self, g):
        anim, frame = self.animation, self.frame
        if g.fixed and frame is not None:
            target = None
            if g.name == anim.domain:
                target = g.position(frame.index)
            else:
                best = sorted(frame.cells.get(g.name, {}).items(), key=lambda pr: -list(ROLES).index(pr[1]))
                if best:
                    target = best[0][0]
                elif frame.regions.get(g.name):
                    ranges = frame.regions[g.name][0][0]
                    target = g.position([a for a, _ in ranges])
            if target is not None:
                g.fixed = {d: int(target[d]) for d in g.fixed}

    def set_dims(self, grid, dims):
        """Draw dimensions ``dims`` (one or two) of ``grid``; the others get sliders."""
        g = self.animation.grid(grid)
        dims = tuple(int(d) for d in dims)
        keep = {d: i for d, i in g.fixed.items() if d not in dims}
        for d in range(g.rank):
            if d not in dims and d not in keep:
                keep[d] = 0
        g.set_view(dims, keep)
        self._follow_grid(g)   # the newly fixed dimensions at the selection's mark
        self._windows.pop(grid, None)
        return self

    def set_fixed(self, grid, dim, value):
        g = self.animation.grid(grid)
        if dim not in g.fixed:
            raise ValueError(f"{grid}: dimension {dim} is drawn, not fixed (fixed: {sorted(g.fixed)})")
        g.fixed[int(dim)] = int(min(max(int(value), 0), g.shape[int(dim)] - 1))
        self._windows.pop(grid, None)
        return self

    def pan(self, grid, drow=0, dcol=0):
        """Move ``grid``'s window by half a window per step."""
        panel = next(p for p in self._scene().panels if p.grid == grid)
        r0, c0, rows, cols = panel.window
        self._windows[grid] = (r0 + int(drow) * max(rows // 2, 1), c0 + int(dcol) * max(cols // 2, 1))
        return self

    # -- drawing ----------------------------------------------------------------------------
    def _counter(self, pinned):
        anim = self.animation
        return "  (pinned: click it again to unpin)" if pinned else f"  (hover the {anim.domain} to explore, click to pin)"

    def _scene(self, reserve=None, roles=()):
        anim = self.animation
        counter = (f"{anim.domain}{list(self.frame.index)}" + self._counter(self.pinned)) \
            if self.frame is not None else "empty"
        return layout(anim, self.frame, max_rows=self.max_rows, max_cols=self.max_cols, max_width=self.max_width,
                      windows=self._windows, counter=counter, interactive=True, follow=False, reserve=reserve,
                      roles=roles)

    def _frames_drawn(self, scene):
        """{cell number: Frame} of the domain's drawn cells (what a hover may show)."""
        where, indices = _drawn(scene).get(self.animation.domain, ({}, []))
        out = {}
        for k, index in enumerate(indices):
            if index is not None:
                out[k] = self.frame if self.frame is not None and self.frame.index == index \
                    else self.animation.frame_at(index)
        return out

    def picture(self):
        """(scene, hover data): the picture laid out with room for the formula of every
        element a hover may show, and what each of them lights up (``hover_data``)."""
        scene = self._scene()
        frames = self._frames_drawn(scene)
        texts = {k: self._hover_text(f, scene) for k, f in frames.items()}
        lines = [line for t in texts.values() for line in t.split("\n")]
        reserve = (max([len(line) for line in lines] + [0]), max([t.count("\n") + 1 for t in texts.values()] + [0]))
        roles = {r for f in frames.values() for g in self.animation.grids for r in f.roles(g.name)}
        # the same windows (the selection's), room for every formula, a legend for every hover
        scene = self._scene(reserve, roles)
        return scene, self.hover_data(scene, frames, texts)

    def _hover_text(self, frame, scene):
        """The formula, with a note when the element lights cells the windows do not show."""
        drawn = _drawn(scene)
        hidden = []
        for g in self.animation.grids:
            where = drawn.get(g.name, ({}, []))[0]
            n = sum(1 for p in frame.cells.get(g.name, {}) if tuple(p) not in where)
            if n:
                hidden.append(f"{n} in {g.name}")
        text = frame.text
        if hidden:
            text += "\n(marked cells outside the drawn windows: " + ", ".join(hidden) + "; click to show them)"
        return text

    def hover_data(self, scene, frames=None, texts=None):
        """What the browser needs to draw a hover over any drawn element of the domain,
        without Python: per element, one pattern per grid (the roles of the drawn cells it
        lights, as runs ``start[-end]letter`` of cell numbers, ``a`` the first role of
        ``ROLES``), its formula's lines, and the running values shown in the grids
        (Scatter's result).  Patterns, lines and values are stored once and numbered: the
        size follows the window (at most ``max_rows x max_cols`` elements), not the array."""
        anim = self.animation
        frames = frames if frames is not None else self._frames_drawn(scene)
        texts = texts if texts is not None else {k: self._hover_text(f, scene) for k, f in frames.items()}
        drawn = _drawn(scene)
        roles = list(ROLES)
        code = {role: chr(97 + i) for i, role in enumerate(roles)}
        patterns, lines, values = _Table(), _Table(), _Table()
        names = [g.name for g in anim.grids]
        cells, indices = {}, {}
        for k, frame in frames.items():
            per_grid, shown = [], []
            for g in anim.grids:
                where, idx = drawn.get(g.name, ({}, []))
                lit = {}
                for p, role in frame.cells.get(g.name, {}).items():
                    j = where.get(tuple(p))
                    if j is not None:
                        lit[j] = role
                for ranges, role in frame.regions.get(g.name, ()):
                    for j, ix in enumerate(idx):
                        if j not in lit and ix is not None and all(a <= i < b for (a, b), i in zip(ranges, ix)):
                            lit[j] = role
                per_grid.append(patterns.add(_runs(lit, code)))
                running = frame.values.get(g.name)
                shown.append(-1 if running is None else values.add(
                    "\x1f".join(fmt_cell(running[ix]) if ix is not None else "" for ix in idx)))
            cells[k] = [per_grid, [lines.add(line) for line in texts[k].split("\n")], shown]
            indices[k] = list(frame.index)
        selected = next((k for k, f in frames.items() if self.frame is not None and f.index == self.frame.index),
                        None)
        return {"domain": anim.domain, "grids": names,
                "roles": [[r, ROLES[r][0], r in DARK] for r in roles],
                "patterns": patterns.items, "lines": lines.items, "values": values.items,
                "cells": cells, "indices": indices, "selected": selected, "pinned": bool(self.pinned),
                "formula_at": list(scene.formula_at or (0, 0, 18, 13)),
                "counter": [self._counter(False), self._counter(True)], "mono": MONO, "text": TEXT, "muted": MUTED}

    def svg(self):
        return svg(self._scene(), self.animation.domain)

    def controls_html(self, scene=None):
        """Per grid: which dimensions are drawn, sliders for the others, window arrows."""
        scene = scene or self._scene()
        rows = []
        for g, panel in zip(self.animation.grids, scene.panels):
            parts = []
            if g.rank > 2:
                for which, d_now in (("row", g.dims[-2] if len(g.dims) >= 2 else None), ("col", g.dims[-1])):
                    opts = "".join(f'<option value="{d}"{" selected" if d == d_now else ""}>{d}</option>'
                                   for d in range(g.rank))
                    parts.append(f'{"rows" if which == "row" else "columns"}: dimension '
                                 f'<select data-control="dims" data-grid="{_html.escape(g.name)}" '
                                 f'data-which="{which}">{opts}</select>')
            for d, i in sorted(g.fixed.items()):
                parts.append(f'dim {d} <input type="range" min="0" max="{g.shape[d] - 1}" value="{i}" '
                             f'data-control="fixed" data-grid="{_html.escape(g.name)}" data-dim="{d}" '
                             f'style="width:120px;vertical-align:middle"> {i}')
            r0, c0, nr, nc = panel.window
            H, W = panel.image
            if nr < H or nc < W:
                for label, dr, dc in (("&#9650;", -1, 0), ("&#9660;", 1, 0), ("&#9664;", 0, -1), ("&#9654;", 0, 1)):
                    parts.append(f'<button data-control="pan" data-grid="{_html.escape(g.name)}" data-dr="{dr}" '
                                 f'data-dc="{dc}" style="padding:0 6px">{label}</button>')
            if parts:
                rows.append(f'<div style="margin:3px 0"><b>{_html.escape(g.name)}</b>: ' + " &nbsp; ".join(parts)
                            + "</div>")
        return ('<div class="xe-controls" style="font:13px sans-serif;margin:4px 14px">' + "".join(rows) + "</div>") \
            if rows else ""

    def html(self, script=True):
        """The view as HTML: the SVG, the controls and the hover data; ``script``: with the
        script that draws hovers (a static page; the widget's own code does it in Jupyter)."""
        scene, data = self.picture()
        payload = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
        out = (f'<div class="xe-index-map-view" style="overflow-x:auto">{svg(scene, self.animation.domain)}'
               f'{self.controls_html(scene)}<script type="application/json" class="xe-data">{payload}</script>'
               f'</div>')
        if script:
            out += f"<script>{WIRE}\nxeWire(document.currentScript.previousElementSibling, null);</script>"
        return out

    def _repr_html_(self):
        return self.html()

    def handle(self, msg):
        """Apply a message from the browser side: hover / click / dims / fixed / pan.
        Returns True when the picture must be drawn again, "quiet" for a hover (the browser
        drew it), False for a message it does not know."""
        event = msg.get("event")
        domain = self.animation.domain
        if event == "hover":   # drawn by the browser already: only the selection follows
            if msg.get("grid") == domain and msg.get("index") is not None:
                self.hover(msg["index"])
            return "quiet"
        if event == "click" and msg.get("grid") == domain and msg.get("index") is not None:
            index = tuple(msg["index"])
            if self.pinned and self.selected == index:
                self.pinned = False
            else:
                self.select(index, pin=True)
        elif event == "dims":
            g = self.animation.grid(msg["grid"])
            d = int(msg["value"])
            row = g.dims[-2] if len(g.dims) >= 2 else None
            col = g.dims[-1]
            if msg.get("which") == "row":
                row = d if d != col else row
            else:
                col = d if d != row else col
            self.set_dims(g.name, [x for x in (row, col) if x is not None])
        elif event == "fixed":
            self.set_fixed(msg["grid"], int(msg["dim"]), int(msg["value"]))
        elif event == "pan":
            self.pan(msg["grid"], int(msg.get("dr", 0)), int(msg.get("dc", 0)))
        else:
            return False
        return True


#: the browser side, shared by the widget and the static HTML: ``xeWire(root, send)`` draws
#: hovers from the data in ``root`` (no kernel needed) and reports them with ``send`` (null:
#: nothing to report to); it returns a handle whose ``show(k)`` draws element ``k``
WIRE = r"""
function xeWire(root, send) {
  const dataEl = root && root.querySelector("script.xe-data");
  const svg = root && root.querySelector("svg");
  if (!dataEl || !svg) return null;
  const D = JSON.parse(dataEl.textContent);
  const NS = "http://www.w3.org/2000/svg";
  const rects = {}, vals = {};
  svg.querySelectorAll("rect[data-k]").forEach((r) => {
    (rects[r.dataset.grid] = rects[r.dataset.grid] || [])[+r.dataset.k] = r;
  });
  svg.querySelectorAll("text.xe-v").forEach((t) => {
    (vals[t.dataset.grid] = vals[t.dataset.grid] || [])[+t.dataset.k] = t;
  });
  const box = svg.querySelector("g.xe-formula"), counter = svg.querySelector("text.xe-counter");
  const state = { pinned: D.pinned, shown: D.selected };
  const [fx, fy, lineH, px] = D.formula_at;
  const decoded = {};
  function runs(text) {    // "3a7-12c": cell 3 has role a, cells 7 to 12 role c
    if (decoded[text]) return decoded[text];
    const lit = new Map();
    for (const m of text.matchAll(/(\d+)(?:-(\d+))?([a-z])/g)) {
      const a = +m[1], b = m[2] === undefined ? a : +m[2], role = m[3].charCodeAt(0) - 97;
      for (let j = a; j <= b; j++) lit.set(j, role);
    }
    return (decoded[text] = lit);
  }
  function show(k) {
    const c = D.cells[k];
    if (!c) return;
    D.grids.forEach((g, gi) => {
      const lit = runs(D.patterns[c[0][gi]]), rs = rects[g] || [], vs = vals[g] || [];
      const texts = c[2][gi] >= 0 ? D.values[c[2][gi]].split("\u001f") : null;
      for (let j = 0; j < rs.length; j++) {
        const r = rs[j];
        if (!r) continue;
        const role = lit.has(j) ? D.roles[lit.get(j)] : null;
        r.setAttribute("fill", role ? role[1] : (r.dataset.base || "#ffffff"));
        if (role) r.setAttribute("data-role", role[0]); else r.removeAttribute("data-role");
        const t = vs[j];
        if (t) {
          if (texts) t.textContent = texts[j];
          t.setAttribute("fill", role && role[2] ? "#ffffff" : (t.textContent === "?" ? D.muted : D.text));
        }
      }
    });
    if (box) {
      while (box.firstChild) box.removeChild(box.firstChild);
      c[1].map((n) => D.lines[n]).forEach((line, i) => {
        const t = document.createElementNS(NS, "text");
        for (const [a, v] of [["x", fx], ["y", fy + i * lineH], ["font-size", px], ["fill", D.text],
                              ["class", "xe-h xe-m"]]) {
          t.setAttribute(a, v);
        }
        t.setAttributeNS("http://www.w3.org/XML/1998/namespace", "xml:space", "preserve");
        t.textContent = line;
        box.appendChild(t);
      });
    }
    if (counter) {
      counter.textContent = D.domain + "[" + D.indices[k].join(", ") + "]" + D.counter[state.pinned ? 1 : 0];
    }
    state.shown = k;
  }
  const target = (e) => (e.target && e.target.closest) ? e.target.closest('rect[data-domain="1"]') : null;
  svg.addEventListener("mouseover", (e) => {
    const r = target(e);
    if (!r || state.pinned) return;
    const k = +r.dataset.k;
    if (k === state.shown) return;
    show(k);
    if (send) send({ event: "hover", grid: r.dataset.grid, index: D.indices[k] });
  });
  svg.addEventListener("click", (e) => {
    const r = target(e);
    if (!r) return;
    const k = +r.dataset.k;
    state.pinned = !(state.pinned && state.shown === k);
    show(k);
    if (send) send({ event: "click", grid: r.dataset.grid, index: D.indices[k] });
  });
  return { show, state, data: D };
}
"""

ESM = WIRE + r"""
export default {
  render({ model, el }) {
    const root = document.createElement("div");
    root.className = "xe-index-map-view-root";
    el.appendChild(root);
    // hovers are drawn here at once; Python hears of them afterwards, the last of a burst only
    let timer = null;
    const send = (msg) => {
      clearTimeout(timer);
      if (msg.event === "hover") timer = setTimeout(() => model.send(msg), 150);
      else model.send(msg);
    };
    const draw = () => {
      root.innerHTML = model.get("html");
      const view = root.querySelector(".xe-index-map-view");
      root.xe = xeWire(view, send);
    };
    model.on("change:html", draw);
    draw();
    // the room the notebook gives: the layout puts the formula beside the grids when it fits
    const report = () => {
      const w = Math.round(el.getBoundingClientRect().width);
      if (w > 0 && Math.abs(w - model.get("available_width")) > 24) {
        model.set("available_width", w);
        model.save_changes();
      }
    };
    report();
    const observer = typeof ResizeObserver !== "undefined" ? new ResizeObserver(report) : null;
    if (observer) observer.observe(el);
    root.addEventListener("click", (e) => {
      const b = e.target.closest ? e.target.closest("button[data-control]") : null;
      if (b) {
        model.send({ event: b.dataset.control, grid: b.dataset.grid, dr: +(b.dataset.dr || 0),
                     dc: +(b.dataset.dc || 0) });
      }
    });
    root.addEventListener("change", (e) => {
      const t = e.target;
      if (!t.dataset || !t.dataset.control) return;
      model.send({ event: t.dataset.control, grid: t.dataset.grid, dim: +(t.dataset.dim || 0),
                   which: t.dataset.which || "", value: t.value });
    });
    return () => { if (observer) observer.disconnect(); clearTimeout(timer); };
  }
};
"""

_WIDGET = None


def _widget_class():
    """The anywidget class, made on first use (importing the view needs no widget library)."""
    global _WIDGET
    if _WIDGET is None:
        import anywidget
        import traitlets

        class IndexMapWidget(anywidget.AnyWidget):
            """The view in Jupyter: ``html`` (the picture, its controls and its hover data)
            is made by Python; the browser draws hovers itself and sends clicks, arrows,
            sliders and dimension pickers back.  ``select``, ``highlighted``, ``formula``,
            ``selected`` as on ``IndexMapView``."""
            _esm = ESM
            html = traitlets.Unicode("").tag(sync=True)
            #: the width the notebook gives the view, in pixels (reported by the browser)
            available_width = traitlets.Int(0).tag(sync=True)

            def __init__(self, view, **kw):
                super().__init__(**kw)
                self.view = view
                self.html = view.html(script=False)
                self.on_msg(self._on_msg)

            def _redraw(self):
                self.html = self.view.html(script=False)

            @traitlets.observe("available_width")
            def _width_changed(self, change):
                width = max(int(change["new"]) - 24, 480)
                if change["new"] > 0 and abs(width - self.view.max_width) > 24:
                    self.view.max_width = width
                    self._redraw()

            def _on_msg(self, widget, content, buffers):
                try:
                    done = self.view.handle(content)
                    if done and done != "quiet":
                        self._redraw()
                except Exception as e:  # noqa: BLE001 - shown beside the picture, the kernel lives on
                    self.html = self.view.html(script=False) + (
                        f'<pre style="color:#a02020">{_html.escape(type(e).__name__)}: {_html.escape(str(e))}</pre>')

            def _repr_mimebundle_(self, **kwargs):
                # a front end without the widget manager (a static page, nbconvert) shows the
                # picture with its own hover script instead of the widget's text
                bundle = super()._repr_mimebundle_(**kwargs)
                data = bundle[0] if isinstance(bundle, tuple) else bundle
                if isinstance(data, dict):
                    data.setdefault("text/html", self.view.html())
                return bundle

            def select(self, index):
                self.view.select(index)
                self._redraw()
                return self

            def set_dims(self, grid, dims):
                self.view.set_dims(grid, dims)
                self._redraw()
                return self

            def set_fixed(self, grid, dim, value):
                self.view.set_fixed(grid, dim, value)
                self._redraw()
                return self

            def pan(self, grid, drow=0, dcol=0):
                self.view.pan(grid, drow, dcol)
                self._redraw()
                return self

            @property
            def highlighted(self):
                return self.view.highlighted

            @property
            def regions(self):
                return self.view.regions

            @property
            def formula(self):
                return self.view.formula

            @property
            def selected(self):
                return self.view.selected

            @property
            def animation(self):
                return self.view.animation

            def svg(self):
                return self.view.svg()

        _WIDGET = IndexMapWidget
    return _WIDGET


def index_map_view(target, instruction=None, *args, widget=None, max_rows=16, max_cols=20, selected=None,
                   dims=None, fixed=None, **attrs):
    """``index_map_view(comp, "gather.1", *module_args, invocation=0)`` or
    ``index_map_view("gather", operand, indices, **attrs)``: the interactive view.

    Returns an anywidget (``widget=None``: when anywidget is installed) or the plain
    ``IndexMapView``; both have ``select(index)``, ``highlighted``, ``formula``."""
    from . import animate
    anim = animate(target, instruction, *args, dims=dims, fixed=fixed, max_steps=1, **attrs)
    view = IndexMapView(anim, max_rows=max_rows, max_cols=max_cols, select=selected)
    if widget is False:
        return view
    try:
        cls = _widget_class()
    except ImportError:
        if widget:
            raise ImportError("index_map_view needs anywidget for the interactive view: "
                              "pip install 'xla_explorer[widgets]' (or pip install anywidget)") from None
        return view
    return cls(view)
