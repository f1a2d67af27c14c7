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
arrays show a window around the selection, with arrows to move it.  In Jupyter
(JupyterLab, Notebook 7, VS Code) it is an anywidget; the Python side draws, the
browser side only forwards hovers, clicks and control changes.  Without anywidget the
view is a static picture of the current selection (``_repr_html_``).
"""
import html as _html
import json

import numpy as np

from .model import ROLES
from .scene import MONO_EM, layout  # noqa: F401  (MONO_EM: the browser's text widths match the layout's)

SANS = "DejaVu Sans, Verdana, Helvetica, Arial, sans-serif"
MONO = "DejaVu Sans Mono, Menlo, Consolas, monospace"


def svg(scene, domain=None):
    """The scene as an SVG string; cells carry ``data-grid``, ``data-index``, ``data-role``
    (and ``data-domain="1"`` for the domain grid: the hover targets)."""
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{scene.width}" height="{scene.height}" '
           f'viewBox="0 0 {scene.width} {scene.height}" style="background:#fff" font-family="{SANS}">']
    colours = {v[0]: k for k, v in ROLES.items()}
    for r in scene.rects:
        attrs = ""
        if r.meta is not None:
            index = r.meta["index"]
            attrs = f' data-grid="{_html.escape(r.meta["grid"])}"'
            if index is not None:
                attrs += f' data-index="{json.dumps(index)}"'
            role = colours.get(r.fill)
            if role:
                attrs += f' data-role="{role}"'
            if r.meta["grid"] == domain and index is not None:
                attrs += ' data-domain="1" style="cursor:pointer"'
        stroke = f' stroke="{r.stroke}"' if r.stroke else ""
        out.append(f'<rect x="{r.x:.1f}" y="{r.y:.1f}" width="{r.w:.1f}" height="{r.h:.1f}" fill="{r.fill}"'
                   f'{stroke}{attrs}/>')
    for t in scene.texts:
        anchor = {"start": "start", "middle": "middle", "end": "end"}[t.anchor]
        base = "hanging" if t.baseline == "top" else "central"
        fam = f' font-family="{MONO}"' if t.mono else ""
        weight = ' font-weight="bold"' if t.bold else ""
        space = ' xml:space="preserve"' if t.mono else ""
        out.append(f'<text x="{t.x:.1f}" y="{t.y:.1f}" font-size="{t.px}" fill="{t.fill}" text-anchor="{anchor}" '
                   f'dominant-baseline="{base}"{fam}{weight}{space} pointer-events="none">'
                   f'{_html.escape(t.text)}</text>')
    out.append("</svg>")
    return "".join(out)


class IndexMapView:
    """The state of the view (selection, per-grid dimensions, sliders, windows) and its
    drawing; no widget library needed (the widget wraps one)."""

    def __init__(self, anim, *, max_rows=14, max_cols=20, max_width=900, select=None):
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
    def select(self, index, pin=True):
        """Select domain element ``index`` (the result's, or the updates' for Scatter)."""
        anim = self.animation
        index = tuple(int(i) for i in (index if isinstance(index, (tuple, list)) else (index,)))
        shape = anim.index_map.domain_shape
        if len(index) != len(shape) or any(not 0 <= i < n for i, n in zip(index, shape)):
            raise IndexError(f"select({list(index)}): outside the {anim.domain} shape {list(shape)}")
        self.frame = anim.frame_at(index)
        self.pinned = pin
        self._follow()
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
    def _scene(self):
        anim = self.animation
        counter = (f"{anim.domain}{list(self.frame.index)}" + ("  (pinned: click it again to unpin)"
                                                               if self.pinned else "  (hover the "
                                                               f"{anim.domain} to explore, click to pin)")) \
            if self.frame is not None else "empty"
        return layout(anim, self.frame, max_rows=self.max_rows, max_cols=self.max_cols, max_width=self.max_width,
                      windows=self._windows, counter=counter, interactive=True, follow=False)

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

    def html(self):
        scene = self._scene()
        return (f'<div class="xe-index-map-view" style="overflow-x:auto">{svg(scene, self.animation.domain)}'
                f'{self.controls_html(scene)}</div>')

    def _repr_html_(self):
        return self.html()

    def handle(self, msg):
        """Apply a message from the browser side: hover / click / dims / fixed / pan."""
        event = msg.get("event")
        domain = self.animation.domain
        if event == "hover" and msg.get("grid") == domain and msg.get("index") is not None and not self.pinned:
            self.select(msg["index"], pin=False)
        elif event == "click" and msg.get("grid") == domain and msg.get("index") is not None:
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


ESM = """
export default {
  render({ model, el }) {
    const root = document.createElement("div");
    root.className = "xe-index-map-view-root";
    el.appendChild(root);
    const draw = () => { root.innerHTML = model.get("html"); };
    model.on("change:html", draw);
    draw();
    let last = null;
    const cell = (e) => (e.target && e.target.closest) ? e.target.closest("rect[data-grid]") : null;
    root.addEventListener("mouseover", (e) => {
      const c = cell(e);
      if (!c || c.dataset.domain !== "1" || c.dataset.index === last) return;
      last = c.dataset.index;
      model.send({ event: "hover", grid: c.dataset.grid, index: JSON.parse(c.dataset.index) });
    });
    root.addEventListener("click", (e) => {
      const b = e.target.closest ? e.target.closest("button[data-control]") : null;
      if (b) {
        model.send({ event: b.dataset.control, grid: b.dataset.grid, dr: +(b.dataset.dr || 0),
                     dc: +(b.dataset.dc || 0) });
        return;
      }
      const c = cell(e);
      if (c && c.dataset.index) model.send({ event: "click", grid: c.dataset.grid, index: JSON.parse(c.dataset.index) });
    });
    root.addEventListener("change", (e) => {
      const t = e.target;
      if (!t.dataset || !t.dataset.control) return;
      model.send({ event: t.dataset.control, grid: t.dataset.grid, dim: +(t.dataset.dim || 0),
                   which: t.dataset.which || "", value: t.value });
    });
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
            """The view in Jupyter: ``html`` is drawn by Python, the browser forwards events.
            ``select``, ``highlighted``, ``formula``, ``selected`` as on ``IndexMapView``."""
            _esm = ESM
            html = traitlets.Unicode("").tag(sync=True)

            def __init__(self, view, **kw):
                super().__init__(**kw)
                self.view = view
                self.html = view.html()
                self.on_msg(self._on_msg)

            def _on_msg(self, widget, content, buffers):
                try:
                    if self.view.handle(content):
                        self.html = self.view.html()
                except Exception as e:  # noqa: BLE001 - shown beside the picture, the kernel lives on
                    self.html = self.view.html() + (f'<pre style="color:#a02020">{_html.escape(type(e).__name__)}: '
                                                    f'{_html.escape(str(e))}</pre>')

            def select(self, index):
                self.view.select(index)
                self.html = self.view.html()
                return self

            def set_dims(self, grid, dims):
                self.view.set_dims(grid, dims)
                self.html = self.view.html()
                return self

            def set_fixed(self, grid, dim, value):
                self.view.set_fixed(grid, dim, value)
                self.html = self.view.html()
                return self

            def pan(self, grid, drow=0, dcol=0):
                self.view.pan(grid, drow, dcol)
                self.html = self.view.html()
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


def index_map_view(target, instruction=None, *args, widget=None, max_rows=14, max_cols=20, select=None,
                   dims=None, fixed=None, **attrs):
    """``index_map_view(comp, "gather.1", *module_args, invocation=0)`` or
    ``index_map_view("gather", operand, indices, **attrs)``: the interactive view.

    Returns an anywidget (``widget=None``: when anywidget is installed) or the plain
    ``IndexMapView``; both have ``select(index)``, ``highlighted``, ``formula``."""
    from . import animate
    anim = animate(target, instruction, *args, dims=dims, fixed=fixed, max_steps=1, **attrs)
    view = IndexMapView(anim, max_rows=max_rows, max_cols=max_cols, select=select)
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
