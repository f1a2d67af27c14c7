"""What a graph node shows of a value after a run: statistics, and a small heatmap.

``summarize(value)`` gives the few lines a node's label carries (min / max / mean,
NaN and Inf counts when there are any), the longer text of its tooltip, and a PNG
heatmap of the array: the array as a grid of coloured cells (arrays of rank > 2 are
shown with their leading dimensions stacked as rows).  The colours come from
matplotlib's viridis when matplotlib is installed and from a built-in ramp otherwise;
the PNG is written here with ``zlib``, so no imaging library is needed.
"""
import struct
import zlib
from dataclasses import dataclass, field

import numpy as np

#: most cells a heatmap shows along each axis (bigger arrays are sampled)
MAX_CELLS = (32, 64)  # rows, columns
#: largest heatmap in pixels (rows, columns); one pixel is one point in the graph
MAX_PIXELS = (40, 96)
NAN_RGB, POSINF_RGB, NEGINF_RGB = (255, 0, 255), (255, 255, 255), (0, 0, 0)


@dataclass
class ValueSummary:
    lines: list = field(default_factory=list)    # for the node's label
    tooltip: list = field(default_factory=list)  # for hovering
    alert: bool = False                          # NaN or Inf among the values
    image: bytes = None                          # PNG heatmap, or None


def _num(x):
    return f"{x:.4g}"


def _stats(arr):
    """Label lines, tooltip lines and the alert flag for one array."""
    arr = np.asarray(arr)
    if arr.size == 0:
        return ["empty"], ["empty array"], False
    kind = arr.dtype.kind
    if arr.ndim == 0:
        if kind in "biu":
            return [f"= {arr.item()}"], [f"value = {arr.item()!r}"], False
        scalar = complex(arr) if kind == "c" else float(arr.astype(np.float64))
        return [f"= {scalar:.4g}"], [f"value = {scalar!r}"], not np.isfinite(scalar)
    if kind == "b":
        text = f"true {int(np.count_nonzero(arr))} / {arr.size}"
        return [text], [text], False
    if kind in "iu":
        lo, hi, mean = int(arr.min()), int(arr.max()), float(arr.mean(dtype=np.float64))
        return ([f"min {lo}  max {hi}  mean {_num(mean)}"],
                [f"min = {lo}", f"max = {hi}", f"mean = {_num(mean)}"], False)
    # floating (bf16 / f8 from ml_dtypes included) or complex: NaN and Inf counted,
    # min / max / mean over the finite values (of the magnitude, for complex)
    nan = int(np.count_nonzero(np.isnan(arr)))
    if kind == "c":
        posinf, neginf, prefix = int(np.count_nonzero(np.isinf(arr))), 0, "|x| "
        x = np.abs(arr).astype(np.float64)
    else:
        x, prefix = arr.astype(np.float64), ""
        posinf, neginf = int(np.count_nonzero(x == np.inf)), int(np.count_nonzero(x == -np.inf))
    finite = x[np.isfinite(x)]
    if finite.size:
        lo, hi, mean = float(finite.min()), float(finite.max()), float(finite.mean())
        lines = [f"{prefix}min {_num(lo)}  max {_num(hi)}  mean {_num(mean)}"]
        tip = [f"{prefix}min = {lo!r}", f"{prefix}max = {hi!r}", f"{prefix}mean = {mean!r} (of the finite values)"]
    else:
        lines, tip = ["no finite values"], ["no finite values"]
    inf = posinf + neginf
    tip += [f"NaN = {nan}", f"Inf = {inf}" if kind == "c" else f"+Inf = {posinf}, -Inf = {neginf}"]
    if nan or inf:
        lines.append(f"NaN {nan}  Inf {inf}")
    return lines, tip, bool(nan or inf)


def summarize(value, heatmap=True, max_leaves=4):
    """The ``ValueSummary`` of one instruction's value (an array, or a tuple of them)."""
    if isinstance(value, (tuple, list)):
        out = ValueSummary()
        for i, leaf in enumerate(value):
            sub = summarize(leaf, heatmap=False)
            if i < max_leaves:
                out.lines += [f"[{i}] {line}" for line in sub.lines[:1]]
            out.tooltip += [f"[{i}] {line}" for line in sub.tooltip]
            out.alert = out.alert or sub.alert
        if len(value) > max_leaves:
            out.lines.append(f"+{len(value) - max_leaves} more")
        return out
    if not isinstance(value, (np.ndarray, np.generic, int, float, complex, bool)):
        return ValueSummary(lines=[], tooltip=[type(value).__name__])  # a token
    arr = np.asarray(value)
    lines, tip, alert = _stats(arr)
    if arr.ndim and arr.size:
        with np.printoptions(threshold=24, edgeitems=3, precision=4):
            tip.append("values: " + " ".join(np.array2string(arr, separator=", ").split()))
    return ValueSummary(lines, tip, alert, heatmap_png(arr) if heatmap else None)


# -- heatmaps ------------------------------------------------------------------------------
def _as_grid(arr):
    """A 2-D float view of an array: rank 1 is one row, rank > 2 stacks leading dims."""
    arr = np.asarray(arr)
    if arr.dtype.kind == "c":
        arr = np.abs(arr)
    grid = arr.astype(np.float64)
    if grid.ndim == 1:
        grid = grid[None, :]
    elif grid.ndim > 2:
        grid = grid.reshape(-1, grid.shape[-1])
    rows = np.linspace(0, grid.shape[0] - 1, min(grid.shape[0], MAX_CELLS[0])).round().astype(int)
    cols = np.linspace(0, grid.shape[1] - 1, min(grid.shape[1], MAX_CELLS[1])).round().astype(int)
    return grid[np.ix_(rows, cols)]


def _colormap(t):
    """RGB uint8 colours for values ``t`` in [0, 1]."""
    try:
        import matplotlib
        rgba = matplotlib.colormaps["viridis"](t)
        return (rgba[..., :3] * 255).round().astype(np.uint8)
    except Exception:  # no matplotlib: a dark-blue -> teal -> yellow ramp
        stops = np.array([[48, 18, 96], [33, 145, 140], [253, 231, 37]], dtype=np.float64)
        pos = t * (len(stops) - 1)
        k = np.clip(pos.astype(int), 0, len(stops) - 2)
        frac = (pos - k)[..., None]
        return (stops[k] * (1 - frac) + stops[k + 1] * frac).round().astype(np.uint8)


def heatmap_rgb(arr):
    """The heatmap as an (rows, cols, 3) uint8 image, before scaling; None for scalars."""
    arr = np.asarray(arr)
    if arr.ndim == 0 or arr.size == 0:
        return None
    grid = _as_grid(arr)
    finite = np.isfinite(grid)
    t = np.zeros_like(grid)
    if finite.any():
        lo, hi = grid[finite].min(), grid[finite].max()
        t[finite] = (grid[finite] - lo) / (hi - lo) if hi > lo else 0.5
    rgb = _colormap(t)
    rgb[np.isnan(grid)] = NAN_RGB
    rgb[grid == np.inf] = POSINF_RGB
    rgb[grid == -np.inf] = NEGINF_RGB
    return rgb


def heatmap_png(arr):
    """A small PNG of the array (each cell a few pixels wide), or None for scalars."""
    rgb = heatmap_rgb(arr)
    if rgb is None:
        return None
    rows, cols = rgb.shape[:2]
    # cells as large as fit (at most 12 pixels), not necessarily square; a single row
    # is drawn as a strip at least 8 pixels high
    cell_h = max(1, min(MAX_PIXELS[0] // rows, 12), 8 if rows == 1 else 1)
    cell_w = max(1, min(MAX_PIXELS[1] // cols, 12))
    big = np.repeat(np.repeat(rgb, cell_h, axis=0), cell_w, axis=1)
    return encode_png(big)


def encode_png(rgb):
    """PNG bytes of an (h, w, 3) uint8 image (no filtering, no metadata)."""
    rgb = np.ascontiguousarray(rgb, dtype=np.uint8)
    h, w = rgb.shape[:2]

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    raw = b"".join(b"\x00" + rgb[y].tobytes() for y in range(h))  # filter type 0 per scanline
    header = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)  # 8-bit RGB
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")
