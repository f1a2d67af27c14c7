"""DOT text for a ``GraphModel``, and Graphviz's ``dot`` to turn it into SVG, PNG or PDF.

Nodes are HTML-like labels (a small table: opcode in bold, name, shape, attributes,
value statistics, heatmap), coloured by op category; called computations are
``subgraph cluster_*`` blocks; a call is a dashed edge between the caller and the
callee's root.  The text is written here; the ``graphviz`` Python package (when
installed) only runs ``dot``.
"""
import os
import re
import shutil
import subprocess

from .model import CATEGORY_STYLE

FONT = "Helvetica"
ERROR_RED, ALERT_RED, MUTED = "#c62828", "#d32f2f", "#546e7a"
#: "where am I" (a stepper's or an index map's instruction) and links that open a group
HIGHLIGHT, LINK = "#ff6d00", "#1565c0"

INSTALL_HELP = """Graphviz's `dot` program was not found on PATH; drawing a graph needs it
(the DOT text, `graph.source`, does not). Install Graphviz with:
  Debian/Ubuntu:  sudo apt-get install graphviz
  macOS:          brew install graphviz
  conda:          conda install -c conda-forge graphviz
  Binder:         list `graphviz` in binder/apt.txt (this repository's binder/apt.txt does)
and the Python package with: pip install graphviz"""


class GraphvizNotFoundError(RuntimeError):
    """Graphviz's ``dot`` is not installed; the message says how to install it."""

    def __init__(self, message=INSTALL_HELP):
        super().__init__(message)


# -- text -------------------------------------------------------------------------------------
def html(text):
    """Escape text for an HTML-like label."""
    return (str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;"))


def quoted(text):
    """A DOT double-quoted string; newlines become graphviz's ``\\n``."""
    return '"' + str(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def image_name(node):
    return f"xe_heat_{node.id}.png"


def _row(text, size=None, color=None, bold=False):
    inner = html(text)
    if bold:
        inner = f"<B>{inner}</B>"
    if size or color:
        attrs = (f' POINT-SIZE="{size}"' if size else "") + (f' COLOR="{color}"' if color else "")
        inner = f"<FONT{attrs}>{inner}</FONT>"
    return f"<TR><TD>{inner}</TD></TR>"


def node_label(node, images):
    """The HTML-like label of a node (``images``: draw heatmaps as <IMG>)."""
    from .model import wrap
    if node.kind == "more":
        return "<" + html(node.title) + ">"
    rows = [_row(node.title, bold=True, color=ERROR_RED if node.error else (LINK if node.kind == "group" else None))]
    if node.name:
        rows.append(_row(node.name, size=9 if node.kind == "group" else 8, color=MUTED))
    for line in wrap(node.shape):
        rows.append(_row(line))
    if node.constant:
        for line in wrap(node.constant, max_lines=2):
            rows.append(_row(line, size=9))
    for attr in node.attributes:
        for line in wrap(attr):
            rows.append(_row(line, size=8))
    for line in node.stats:
        alert = node.alert and ("NaN" in line or "Inf" in line or "no finite" in line)
        rows.append(_row(line, size=8, color=ALERT_RED if alert else "#1a237e", bold=alert))
    for line in node.calls:
        rows.append(_row(line, size=9, color=LINK))
    if images and node.image is not None:
        rows.append(f'<TR><TD><IMG SRC="{image_name(node)}"/></TD></TR>')
    if node.error:
        for line in wrap(node.error, width=48, max_lines=8):
            rows.append(_row(line, size=8, color=ERROR_RED))
    border = 2 if (node.is_root or node.error or node.kind in ("failed", "group")) else 1
    color = ERROR_RED if node.error else ("#37474f" if node.is_root else ("#607d8b" if node.kind == "group" else "#90a4ae"))
    if node.highlight:
        border, color = 3, HIGHLIGHT
    style = ' STYLE="ROUNDED"' if node.kind != "failed" else ""
    return (f'<<TABLE BORDER="{border}" CELLBORDER="0" CELLSPACING="0" CELLPADDING="1"{style} '
            f'BGCOLOR="{node.color}" COLOR="{color}">' + "".join(rows) + "</TABLE>>")


def _node_statement(node, images, indent):
    attrs = [f"label={node_label(node, images)}", f"id={quoted(node.id)}"]
    if node.kind == "more":
        attrs += ["shape=box", 'style="rounded,dashed"', "fontsize=9", f'color="{MUTED}"', f'fontcolor="{MUTED}"']
    if node.tooltip:
        attrs.append(f"tooltip={quoted(node.tooltip)}")
    return f"{indent}{node.id} [{', '.join(attrs)}];"


#: legend entries per row of the title's legend
LEGEND_COLUMNS = 4


def _title_label(model, legend):
    """The graph's label: its title, and under it the colour legend in rows of
    ``LEGEND_COLUMNS`` entries.  In the title, not a node: a legend node sat in the first
    rank beside the parameters and made every picture ~150 pt wider (the first picture of a
    6-layer MLP's gradient: 1,010 -> 780 pt)."""
    title = f"<B>{html(model.title)}</B>" if model.title else ""
    if not (legend and model.legend):
        return f"<{title}>" if title else quoted("")
    cells = [f'<TD BGCOLOR="{CATEGORY_STYLE[c][0]}" WIDTH="12" HEIGHT="10" BORDER="1"> </TD>'
             f'<TD ALIGN="LEFT"><FONT POINT-SIZE="8">{html(CATEGORY_STYLE[c][1])}</FONT></TD>' for c in model.legend]
    rows = ["".join(cells[i:i + LEGEND_COLUMNS]) for i in range(0, len(cells), LEGEND_COLUMNS)]
    span = 2 * min(LEGEND_COLUMNS, len(cells))
    head = f'<TR><TD COLSPAN="{span}">{title}</TD></TR>' if title else ""
    return (f'<<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="2" CELLPADDING="0" ID="legend" '
            f'TOOLTIP="colours by op category">{head}'
            + "".join(f"<TR>{r}</TR>" for r in rows) + "</TABLE>>")


def to_dot(model, *, legend=True, rankdir="TB", images=None, dpi=None):
    """DOT text of ``model``.  ``images``: the folder holding the heatmap PNGs (None: no
    heatmaps, the text stands alone); ``dpi``: for PNG output."""
    out = [f"digraph {quoted(model.title or 'hlo')} {{"]
    # newrank: ranks nodes across clusters at once (without it, dot fails with "trouble in
    # init_rank" on some graphs of closed groups, and is no faster)
    graph_attrs = [f"rankdir={rankdir}", "compound=true", "newrank=true", f'fontname="{FONT}"', "fontsize=11",
                   "nodesep=0.25", "ranksep=0.3", "labelloc=t", f"label={_title_label(model, legend)}"]
    if model.quick_layout:
        # measured on the graphs of closed groups (long edges between layers, hundreds of
        # ranks): an edge label is a node of the layout, and the x-coordinates' network
        # simplex runs to convergence over every virtual node of every long edge; labels
        # placed after the layout and nslimit=1 make a 58-node picture 25x faster (0.3 s)
        graph_attrs.append("nslimit=1")
        # the width of a gradient's picture is mostly long edges (forward values kept for
        # the backward pass), each a column of virtual nodes nodesep apart: 0.12 in instead
        # of 0.25 made the first pictures of a 6-layer MLP's and a transformer block's
        # gradients 28-32% narrower (measured; boxes keep a 9-pt gap)
        graph_attrs[graph_attrs.index("nodesep=0.25")] = "nodesep=0.12"
    if images:
        graph_attrs.append(f"imagepath={quoted(images)}")
    if dpi:
        graph_attrs.append(f"dpi={int(dpi)}")
    out.append(f"  graph [{', '.join(graph_attrs)}];")
    out.append(f'  node [shape=plaintext, fontname="{FONT}", fontsize=10, margin=0];')
    out.append(f'  edge [fontname="{FONT}", fontsize=8, fontcolor="{MUTED}", color="#78909c", arrowsize=0.6];')
    children = {}
    for c in model.clusters:
        children.setdefault(c.parent, []).append(c)
    members = {}
    for n in model.nodes:
        members.setdefault(n.cluster, []).append(n)

    def emit(cluster_id, indent):
        for n in members.get(cluster_id, []):
            out.append(_node_statement(n, images, indent))
        for c in children.get(cluster_id, []):
            out.append(f"{indent}subgraph {c.id} {{")
            title = c.label if c.kind in ("computation", "module") else f"▾ {c.label}"
            label = f"<<B>{html(title)}</B><BR/><FONT POINT-SIZE=\"8\">{html(c.signature)}</FONT>>"
            fill, color = ("#fafafa", "#90a4ae") if c.kind in ("computation", "module") else ("#f7f9fb", "#b0bec5")
            if c.highlight:
                color = HIGHLIGHT
            tip = f", tooltip={quoted(c.tooltip)}" if c.tooltip else ""
            out.append(f'{indent}  graph [id={quoted(c.id)}, label={label}{tip}, style="rounded,filled", fillcolor="{fill}", '
                       f'color="{color}", fontsize=10{", penwidth=3" if c.highlight else ""}];')
            emit(c.id, indent + "  ")
            out.append(f"{indent}}}")

    emit(None, "  ")
    for e in model.edges:
        attrs = []
        if e.label:
            attrs.append(f"{'xlabel' if model.quick_layout else 'label'}={quoted(e.label)}")
        if e.kind == "call":
            # drawn from the root to the caller (so the callee sits above its caller) with
            # the arrow reversed: it reads "caller calls the computation"
            attrs += ["style=dashed", "dir=back", f"ltail={e.cluster}", 'color="#546e7a"', "fontcolor=\"#37474f\""]
            out.append(f"  {e.dst} -> {e.src} [{', '.join(attrs)}];")
            continue
        if e.kind == "more":
            attrs += ["style=dotted"]
        out.append(f"  {e.src} -> {e.dst}" + (f" [{', '.join(attrs)}];" if attrs else ";"))
    out.append("}")
    return "\n".join(out) + "\n"


# -- running dot ------------------------------------------------------------------------------
def dot_available():
    return shutil.which("dot") is not None


def run_dot(source, fmt):
    """Bytes of ``source`` drawn in format ``fmt`` (svg, png, pdf) by Graphviz's ``dot``."""
    if not dot_available():
        raise GraphvizNotFoundError()
    try:
        import graphviz
    except ImportError:
        graphviz = None
    if graphviz is not None:
        try:
            return graphviz.Source(source).pipe(format=fmt, quiet=True)
        except graphviz.ExecutableNotFound:
            raise GraphvizNotFoundError() from None
        except graphviz.CalledProcessError as e:
            raise RuntimeError(f"dot failed: {e.stderr.decode(errors='replace') if e.stderr else e}") from None
    proc = subprocess.run(["dot", f"-T{fmt}"], input=source.encode(), capture_output=True)
    if proc.returncode:
        raise RuntimeError(f"dot failed: {proc.stderr.decode(errors='replace')}")
    return proc.stdout


_CACHE = {}
#: drawings kept (an expand and collapse back draws from here)
CACHE_SIZE = 64


def run_dot_cached(source, fmt):
    """``run_dot``, remembering the last ``CACHE_SIZE`` drawings by their DOT text."""
    key = (source, fmt)
    if key in _CACHE:
        _CACHE[key] = _CACHE.pop(key)  # most recently used last
        return _CACHE[key]
    out = run_dot(source, fmt)
    _CACHE[key] = out
    while len(_CACHE) > CACHE_SIZE:
        _CACHE.pop(next(iter(_CACHE)))
    return out


_HREF = re.compile(r'xlink:href="([^"]*?(xe_heat_[A-Za-z0-9_]+\.png))"')


def inline_images(svg, images):
    """Replace the heatmap file references of an SVG by data: URIs ({file name: png bytes})."""
    import base64

    def sub(m):
        data = images.get(os.path.basename(m.group(2)))
        if data is None:
            return m.group(0)
        return 'xlink:href="data:image/png;base64,' + base64.b64encode(data).decode() + '"'
    return _HREF.sub(sub, svg)
