"""The picture drawn as frames: a matplotlib Figure (vector, for slides and SVG / PDF),
raster frames (Pillow: GIF, the HTML player, the stepper), from the same ``Scene``.

``figure`` places the scene's rectangles and texts as matplotlib artists; ``raster``
paints them with Pillow (what GIF and HTML exports hold, fast enough for a hundred
frames).  The frames of one animation share one size and one width per grid's cells, so
a GIF does not jump from frame to frame.
"""
import base64
import html as _html
import io
import os
import uuid

import numpy as np

from .. import progress
from .scene import layout


# -- scenes of an animation ----------------------------------------------------------------------

def scenes(anim, *, max_rows=10, max_cols=12, width=None):
    """The Scene of every frame of ``anim``, one size for all of them (cached).  ``width``:
    the layout's width in pixels (default 1600; the formula goes under the grids when it
    does not fit beside them)."""
    width = width or getattr(anim, "width", None) or 1600
    key = (max_rows, max_cols, width)
    cache = getattr(anim, "_scenes", None)
    if cache is not None and cache[0] == key:
        return cache[1]
    visited = set()
    domain = anim.grid(anim.domain)
    out = []
    # every frame's formula in one place (beside the grids or under them): the frames do not jump
    lines = [line for f in anim.frames for line in f.text.split("\n")]
    reserve = (max([len(line) for line in lines] + [0]), max([len(f.text.split("\n")) for f in anim.frames] + [0]))
    for f in anim.frames:
        out.append(layout(anim, f, max_rows=max_rows, max_cols=max_cols, max_width=width,
                          counter=f"{anim.counter(f)}   "
                          f"({anim.summary})", visited=set(visited), reserve=reserve))
        visited.add(domain.position(f.index))
    if out:
        w, h = max(s.width for s in out), max(s.height for s in out)
        for s in out:
            s.width, s.height = w, h
    anim._scenes = (key, out)
    return out


def scene_of(anim, k):
    frames = scenes(anim)
    if not frames:
        raise IndexError(f"{anim.title}: the animation has no frames")
    return frames[k]


# -- matplotlib ---------------------------------------------------------------------------------

def figure(anim, k=0, dpi=100):
    """Frame ``k`` as a matplotlib Figure (not registered with pyplot): one pixel of the
    scene is one pixel at ``dpi``, so a 12 px text is 12 px on screen at that dpi."""
    return scene_figure(scene_of(anim, k), dpi=dpi)


def scene_figure(scene, dpi=100):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.collections import PatchCollection
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    fig = Figure(figsize=(scene.width / dpi, scene.height / dpi), dpi=dpi)
    FigureCanvasAgg(fig)
    fig.patch.set_facecolor("white")
    ax = fig.add_axes([0, 0, 1, 1])
    ax.set_xlim(0, scene.width)
    ax.set_ylim(scene.height, 0)
    ax.axis("off")
    pt = 72.0 / dpi
    if scene.rects:
        patches = [Rectangle((r.x, r.y), r.w, r.h) for r in scene.rects]
        ax.add_collection(PatchCollection(patches, facecolors=[r.fill for r in scene.rects],
                                          edgecolors=[r.stroke or r.fill for r in scene.rects], linewidths=pt))
    for t in scene.texts:
        ax.text(t.x, t.y, t.text, fontsize=t.px * pt, color=t.fill, ha={"start": "left", "middle": "center",
                                                                         "end": "right"}[t.anchor],
                va="top" if t.baseline == "top" else "center", weight="bold" if t.bold else "normal",
                family="DejaVu Sans Mono" if t.mono else "DejaVu Sans")
    fig.scene = scene
    return fig


# -- Pillow -------------------------------------------------------------------------------------

_FONTS = {}


def _font(px, mono, bold):
    key = (int(round(px)), mono, bold)
    if key not in _FONTS:
        import matplotlib
        from PIL import ImageFont
        name = "DejaVuSans" + ("Mono" if mono else "") + ("-Bold" if bold else "") + ".ttf"
        _FONTS[key] = ImageFont.truetype(os.path.join(matplotlib.get_data_path(), "fonts", "ttf", name),
                                         size=key[0])
    return _FONTS[key]


def raster(anim, k=0):
    """Frame ``k`` as an RGB uint8 array."""
    return np.asarray(scene_image(scene_of(anim, k)))


_MASKS = {}


def _mask(text, px, mono, bold):
    """A text's coverage mask and its offset from the anchor point (left, middle), made
    once per string: a frame's cells repeat the same few values."""
    key = (text, int(round(px)), mono, bold)
    found = _MASKS.get(key)
    if found is None:
        from PIL import Image, ImageDraw
        font = _font(px, mono, bold)
        left, top, right, bottom = font.getbbox(text, anchor="lm")
        mask = Image.new("L", (max(right - left, 1), max(bottom - top, 1)), 0)
        ImageDraw.Draw(mask).text((-left, -top), text, fill=255, font=font, anchor="lm")
        if len(_MASKS) > 20000:
            _MASKS.clear()
        found = _MASKS[key] = (mask, left, top, font.getlength(text))
    return found


def scene_image(scene):
    """The scene painted by Pillow (a PIL Image, RGB)."""
    from PIL import Image, ImageDraw
    img = Image.new("RGB", (int(scene.width), int(scene.height)), "white")
    draw = ImageDraw.Draw(img)
    for r in scene.rects:
        x0, y0 = int(round(r.x)), int(round(r.y))
        x1, y1 = int(round(r.x + r.w)), int(round(r.y + r.h))
        draw.rectangle([x0, y0, x1, y1], fill=r.fill, outline=r.stroke)
    for t in scene.texts:
        if not t.text:
            continue
        mask, left, top, width = _mask(t.text, t.px, t.mono, t.bold)
        x = t.x - {"start": 0, "middle": width / 2, "end": width}[t.anchor]
        y = t.y + (t.px * 0.6 if t.baseline == "top" else 0)  # "top": the text's middle sits ~0.6 em lower
        img.paste(t.fill, (int(round(x + left)), int(round(y + top))), mask)
    return img


_PALETTE = None


def _palette():
    """A fixed palette holding every colour a scene uses exactly (the roles, the static
    roles, the texts) and their blends with the text colours (anti-aliased text)."""
    global _PALETTE
    if _PALETTE is None:
        from PIL import Image
        from .model import ROLES, STATIC
        from . import scene as sc

        def rgb(h):
            return np.array([int(h[i:i + 2], 16) for i in (1, 3, 5)], float)
        flats = [rgb(c) for c, _ in ROLES.values()] + [rgb(c) for c, _ in STATIC.values()]
        flats += [rgb(c) for c in ("#ffffff", sc.EMPTY, sc.GRIDLINE, "#888888")]
        inks = [rgb(c) for c in (sc.TEXT, sc.MUTED, sc.WARN, "#ffffff")]
        colours = flats + inks
        for f in flats:  # cell texts: dark or white ink on any fill
            for ink in (inks[0], inks[3]):
                colours += [f + (ink - f) * t for t in (0.25, 0.5, 0.75)]
        for ink in inks[1:3]:  # labels and warnings on white
            colours += [flats[len(ROLES) + len(STATIC)] + (ink - flats[len(ROLES) + len(STATIC)]) * t
                        for t in (0.25, 0.5, 0.75)]
        colours = np.unique(np.rint(np.array(colours)).astype(np.uint8), axis=0)
        assert len(colours) <= 256
        pal = Image.new("P", (1, 1))
        pal.putpalette(colours.reshape(-1).tolist() + [0] * (768 - 3 * len(colours)))
        _PALETTE = pal
    return _PALETTE


def _indexed(img):
    """The frame as a palette image: flat colours stay exact, a third of the RGB size."""
    from PIL import Image
    return img.quantize(palette=_palette(), dither=Image.Dither.NONE)


def _png(img):
    f = io.BytesIO()
    _indexed(img).save(f, format="png", compress_level=6)
    return f.getvalue()


# -- exports ------------------------------------------------------------------------------------

def save(anim, path, fps=2, dpi=100, frame=None):
    path = str(path)
    ext = path.rsplit(".", 1)[-1].lower()
    if ext in ("svg", "pdf", "eps"):
        figure(anim, frame or 0, dpi=dpi).savefig(path, dpi=dpi)
    elif ext in ("png", "jpg", "jpeg"):
        scene_image(scene_of(anim, frame or 0)).save(path)
    elif ext in ("html", "htm"):
        with open(path, "w") as f:
            f.write(html_player(anim, fps=fps))
    elif ext == "gif":
        if not anim.frames:
            raise ValueError(f"{anim.title}: no steps to save")
        images = [_indexed(img) for img in frame_images(anim)]
        images[0].save(path, save_all=True, append_images=images[1:], duration=int(1000 / fps), loop=0,
                       optimize=False)
    else:
        raise ValueError(f"save: unknown file type .{ext}; use .gif, .html, .png, .svg or .pdf")
    return path


def frame_images(anim):
    """Every frame painted (Pillow images), reported as a task: a notebook shows a progress
    bar for a big animation (announced from 60 frames on)."""
    frames = scenes(anim)
    images = []
    with progress.task(f"rendering {anim.title}", total=len(frames), announce=len(frames) > 60) as t:
        for k, s in enumerate(frames):
            images.append(scene_image(s))
            t.advance(detail=f"frame {k + 1} of {len(frames)}")
    return images


def frame_pngs(anim):
    """Every frame as PNG bytes (encoded in threads: Pillow's encoder releases the GIL)."""
    from concurrent.futures import ThreadPoolExecutor
    images = frame_images(anim)
    with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as pool:
        return list(pool.map(_png, images))


def html_player(anim, fps=2):
    """A self-contained player: the first frame is a plain ``<img>`` (it shows before and
    without any script: after Run All, in a fresh kernel, on GitHub); a small script adds
    play / step / slider, looked up by this player's own id."""
    if not anim.frames:
        return f"<p>{_html.escape(anim.title)}: no steps</p>"
    pngs = frame_pngs(anim)
    uris = ["data:image/png;base64," + base64.b64encode(p).decode("ascii") for p in pngs]
    pid = "xeanim" + uuid.uuid4().hex[:10]
    w, h = scenes(anim)[0].width, scenes(anim)[0].height
    n = len(uris)
    frames_js = "[" + ",".join(f'"{u}"' for u in uris) + "]"
    return f"""<div id="{pid}" class="xe-animation" style="font-family: sans-serif; font-size: 13px">
<img src="{uris[0]}" width="{w}" height="{h}" style="max-width: 100%; height: auto; image-rendering: auto"
 alt="{_html.escape(anim.title)}, frame 1 of {n}">
<div style="margin-top: 4px">
<button data-act="first" title="first frame">|&#9664;</button> <button data-act="prev" title="previous frame">&#9664;</button>
<button data-act="play" title="play / pause" style="min-width: 4em">play</button>
<button data-act="next" title="next frame">&#9654;</button> <button data-act="last" title="last frame">&#9654;|</button>
<input type="range" min="0" max="{n - 1}" value="0" style="width: 240px; vertical-align: middle">
<span class="xe-count">1 / {n}</span>
</div>
<script>
(function() {{
  var root = document.getElementById("{pid}");
  if (!root || root.dataset.ready) return;
  root.dataset.ready = "1";
  var frames = {frames_js};
  var img = root.querySelector("img"), slider = root.querySelector("input"),
      count = root.querySelector(".xe-count"), k = 0, timer = null;
  function show(i) {{
    k = (i + frames.length) % frames.length; img.src = frames[k]; slider.value = k;
    count.textContent = (k + 1) + " / " + frames.length;
  }}
  var play = root.querySelector("button[data-act=play]");
  function stop() {{ if (timer) {{ clearInterval(timer); timer = null; }} play.textContent = "play"; }}
  root.querySelectorAll("button").forEach(function(b) {{
    b.addEventListener("click", function() {{
      var a = b.dataset.act;
      if (a === "play") {{
        if (timer) stop();
        else {{ timer = setInterval(function() {{ show(k + 1); }}, {int(1000 / fps)}); b.textContent = "pause"; }}
        return;
      }}
      stop();
      if (a === "first") show(0); else if (a === "last") show(frames.length - 1);
      else if (a === "prev") show(k - 1); else show(k + 1);
    }});
  }});
  slider.addEventListener("input", function() {{ stop(); show(parseInt(slider.value)); }});
}})();
</script>
</div>"""


def stepper(anim):
    """A slider and play button over the frames (ipywidgets): each frame a PNG in an
    ``ipywidgets.Image``, which every front end draws (no matplotlib display hook)."""
    try:
        import ipywidgets as widgets
    except ImportError:
        raise ImportError("Animation.stepper() needs ipywidgets: pip install 'xla_explorer[widgets]' "
                          "(or pip install ipywidgets)") from None
    frames = scenes(anim)
    n = max(len(frames) - 1, 0)
    slider = widgets.IntSlider(value=0, min=0, max=n, description="step", continuous_update=True)
    play = widgets.Play(value=0, min=0, max=n, interval=int(1000 / anim.fps))
    widgets.jslink((play, "value"), (slider, "value"))
    image = widgets.Image(format="png", layout=widgets.Layout(max_width="100%"))
    cache = {}

    def show(change=None):
        k = slider.value
        if k not in cache:
            cache[k] = _png(scene_image(frames[k]))
        image.value = cache[k]
        box.shown = k

    box = widgets.VBox([widgets.HBox([play, slider]), image])
    box.slider, box.image, box.animation, box.shown = slider, image, anim, None
    slider.observe(show, names="value")
    if frames:
        show()
    return box
