"""The text the widgets show, with no widget library: values, index-map steps, attributes.

Everything here is presentation.  What an op means comes from the library: op functions
and their signatures from ``xla_explorer`` (found through the registry), shapes from the
shape rules, values from the reference executor, reads and writes from the index maps.
"""
import ast
import html
import importlib
import inspect
import re
import types

import numpy as np
from xla_explorer.errors import quote
from xla_explorer.ops import registry

#: arrays with at most this many elements are printed in full; bigger ones are summarised
SMALL = 64


# -- values ----------------------------------------------------------------------------------

def type_text(value):
    """``f32[3,4]`` for an array (the library's own shape text), the class name otherwise."""
    from xla_explorer.shapes import Shape
    try:
        return str(Shape.of(np.asarray(value)))
    except Exception:  # a Token, or a dtype XLA has no name for
        return type(value).__name__


def summary(arr):
    """min / max / mean (and NaN / Inf counts) of an array, one line."""
    arr = np.asarray(arr)
    if arr.size == 0:
        return "empty"
    if arr.dtype.kind == "b":
        return f"true {int(np.count_nonzero(arr))} of {arr.size}"
    if arr.dtype.kind in "iu":
        return f"min {arr.min()}  max {arr.max()}  mean {arr.mean(dtype=np.float64):.4g}"
    x = np.abs(arr) if arr.dtype.kind == "c" else arr
    x = x.astype(np.float64)
    nan, inf = int(np.count_nonzero(np.isnan(x))), int(np.count_nonzero(np.isinf(x)))
    finite = x[np.isfinite(x)]
    text = "|x| " if arr.dtype.kind == "c" else ""
    if finite.size:
        text += f"min {finite.min():.4g}  max {finite.max():.4g}  mean {finite.mean():.4g}"
    else:
        text += "no finite values"
    if nan or inf:
        text += f"  NaN {nan}  Inf {inf}"
    return text


def format_value(value, name="value", small=SMALL):
    """``name: f32[2,2]`` and the values (a small array), or a one-line summary (a big one)."""
    if isinstance(value, tuple):
        lines = [f"{name}: tuple of {len(value)}"]
        for k, v in enumerate(value):
            lines.extend("  " + line for line in format_value(v, f"{name}[{k}]", small).splitlines())
        return "\n".join(lines)
    if not isinstance(value, (np.ndarray, np.generic, int, float, bool, complex)):
        return f"{name}: {value!r}"
    arr = np.asarray(value)
    head = f"{name}: {type_text(arr)}"
    if arr.size <= small:
        body = np.array2string(arr, max_line_width=96, threshold=small + 1, separator=" ")
        return head + (f" = {body}" if arr.ndim == 0 else "\n" + _indent(body))
    return f"{head} ({arr.size} elements)  {summary(arr)}"


def format_diff(reference, other, what="other"):
    """How ``other`` differs from the reference value (tuples element by element)."""
    if isinstance(reference, tuple):
        if not isinstance(other, (tuple, list)) or len(other) != len(reference):
            return f"{what}: not a tuple of {len(reference)} like the reference"
        return "\n".join(format_diff(r, o, f"{what}[{k}]") for k, (r, o) in enumerate(zip(reference, other)))
    ref, got = np.asarray(reference), np.asarray(other)
    if ref.shape != got.shape:
        return f"{what}: shape {got.shape} but the reference has {ref.shape}"
    if ref.size == 0:
        return f"{what}: empty, as the reference"
    if ref.dtype.kind in "biu" and got.dtype.kind in "biu":
        bad = int(np.count_nonzero(ref != got))
        return f"{what}: {'equal to' if not bad else f'{bad} of {ref.size} elements differ from'} the reference"
    r, g = ref.astype(np.complex128 if ref.dtype.kind == "c" else np.float64), \
        got.astype(np.complex128 if got.dtype.kind == "c" else np.float64)
    both_nan = np.isnan(r) & np.isnan(g)
    err = np.where(both_nan, 0.0, np.abs(r - g))
    err = np.where(np.isnan(err), np.inf, err)
    close = np.isclose(r, g, rtol=1e-5, atol=1e-6, equal_nan=True)
    return (f"{what}: max |difference| {float(err.max()):.3g}; "
            f"{int(np.count_nonzero(~close))} of {ref.size} elements outside rtol 1e-5")


def _indent(text, by="  "):
    return "\n".join(by + line for line in text.splitlines())


# -- index-map steps -------------------------------------------------------------------------

def _idx(index):
    return "[" + ", ".join(str(int(i)) for i in index) + "]"


def format_access(access, operand_names=(), result_name="result", domain_name=None, detail=True):
    """One ``Access`` of an IndexMap as text: reads, writes, clamped / skipped, and (with
    ``detail``) the spec's intermediate indices."""
    domain_name = domain_name or result_name
    def operand(k):
        return operand_names[k] if k < len(operand_names) else f"operands[{k}]"
    lines = [f"{domain_name}{_idx(access.index)}"]
    if access.reads:
        reads = ", ".join(f"{operand(k)}{_idx(i)}" for k, i in access.reads)
        lines.append(f"  reads   {reads}")
    elif not access.writes:
        lines.append(f"  reads   nothing ({access.source})")
    if access.source != "operand" and access.reads:
        lines.append(f"  source  {access.source}")
    if access.writes:
        lines.append("  writes  " + ", ".join(f"{result_name if j == 0 else f'{result_name}[{j}]'}{_idx(i)}"
                                            for j, i in access.writes))
    if access.clamped:
        lines.append("  clamped: the start index was moved so that the whole slice stays in bounds")
    if access.skipped:
        lines.append("  skipped: out of bounds, this element changes nothing")
    for key, value in (access.detail or {}).items() if detail else ():
        lines.append(f"  {key} = {value}")
    return "\n".join(lines)


# -- op functions, attributes ------------------------------------------------------------------

def op_function(opdef):
    """The public function of an op (``xla_explorer.Gather``), found by its registry name."""
    for module in ("xla_explorer.ops", "xla_explorer"):
        fn = getattr(importlib.import_module(module), opdef.name, None)
        if callable(fn):
            return fn
    return None


def takes_builder(fn):
    params = list(inspect.signature(fn).parameters)
    return bool(params) and params[0] == "builder"


def attribute_params(fn, n_operands):
    """The parameters of ``fn`` left after ``n_operands`` positional operands (and the
    builder, for ops that take one): the attribute fields a builder UI shows."""
    params = list(inspect.signature(fn).parameters.values())
    if params and params[0].name == "builder":
        params = params[1:]
    out, left = [], n_operands
    for p in params:
        if p.kind is p.VAR_POSITIONAL:
            left = 0  # every remaining operand goes here
        elif p.kind is p.VAR_KEYWORD:
            continue
        elif p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and left > 0:
            left -= 1
        elif p.kind is not p.POSITIONAL_ONLY:
            out.append(p)
    return out


def signature_text(fn):
    sig = inspect.signature(fn)
    doc = (inspect.getdoc(fn) or "").strip().splitlines()
    return f"{fn.__name__}{sig}" + (f" — {doc[0]}" if doc else "")


#: dotted names ("gather.1", "get-tuple-element.3", as XLA names instructions) are not Python:
#: swapped before parsing
_DOTTED = re.compile(r"(?<![\w.\"'-])([A-Za-z_]\w*(?:-[A-Za-z_]\w*)*(?:\.\w+)+)")


def _protect(text):
    """Swap dotted names for placeholder identifiers; returns (text, {placeholder: name})."""
    found = {}

    def swap(m):
        key = f"__name_{len(found)}__"
        found[key] = m.group(1)
        return key
    return _DOTTED.sub(swap, text), found


def _restore(text, found):
    for key, name in found.items():
        text = text.replace(key, name)
    return text


def split_attrs(text):
    """``"a=[1, 2], b=3"`` -> ``{"a": "[1, 2]", "b": "3"}`` (the source text of each value)."""
    text = (text or "").strip().rstrip(",")
    if not text:
        return {}
    src, found = _protect(f"f({text})")
    try:
        call = ast.parse(src, mode="eval").body
    except SyntaxError as e:
        raise ValueError(f"attributes: cannot read {quote(text)} as keyword=value pairs ({e.msg})") from None
    if not isinstance(call, ast.Call) or call.args or any(k.arg is None for k in call.keywords):
        raise ValueError(f"attributes: expected keyword=value pairs, got {quote(text)}")
    return {k.arg: _restore(ast.get_source_segment(src, k.value), found) for k in call.keywords}


def parse_value(text, names=None):
    """A Python literal (ints, lists, tuples, strings, ...), where names (op functions such as
    ``Add``, values of the builder such as ``gather.1``) stand for those objects."""
    names = dict(names or {})
    src, found = _protect(text.strip())
    names.update({key: names[name] for key, name in found.items() if name in names})
    try:
        node = ast.parse(src, mode="eval").body
    except SyntaxError as e:
        raise ValueError(f"cannot read {quote(text)} ({e.msg})") from None
    return _value(node, names, text, found)


def _value(node, names, text, found):
    if isinstance(node, ast.Name):
        if node.id in names:
            return names[node.id]
        raise ValueError(f"unknown name {quote(found.get(node.id, node.id))} in {quote(text)} (use a literal, an op "
                         "function such as Add, or the name of a value)")
    if isinstance(node, (ast.List, ast.Tuple)):
        items = [_value(e, names, text, found) for e in node.elts]
        return items if isinstance(node, ast.List) else tuple(items)
    try:
        value = ast.literal_eval(node)
    except ValueError:
        raise ValueError(f"cannot read {quote(text)}: expected a Python literal") from None
    return _restore(value, found) if isinstance(value, str) else value


def join_attrs(texts):
    """``{"a": "[1, 2]"}`` -> ``"a=[1, 2]"`` (empty fields left out)."""
    return ", ".join(f"{k}={v.strip()}" for k, v in texts.items() if v and v.strip())


# -- graphs ----------------------------------------------------------------------------------

def svg_of(graph):
    """SVG text of whatever the renderer returned (a graphviz object or a wrapper)."""
    if graph is None:
        return None
    if hasattr(graph, "_repr_mimebundle_"):
        bundle = graph._repr_mimebundle_()
        if isinstance(bundle, tuple):
            bundle = bundle[0]
        if bundle and bundle.get("image/svg+xml"):
            return bundle["image/svg+xml"]
    for method in ("_repr_svg_", "_repr_html_"):
        if hasattr(graph, method):
            out = getattr(graph, method)()
            if out:
                return out
    if hasattr(graph, "pipe"):
        return graph.pipe(format="svg").decode()
    return None


def highlight_svg(svg, node_id, colour="#e6550d"):
    """The SVG with node ``node_id`` (its DOT id) glowing; unchanged if it is not there."""
    pattern = re.compile(r'(<g id="[^"]*" class="node")(>\s*<title>' + re.escape(html.escape(node_id)) + "</title>)")
    return pattern.sub(lambda m: f'{m.group(1)} style="filter: drop-shadow(0 0 4px {colour}) '
                       f'drop-shadow(0 0 4px {colour})"{m.group(2)}', svg, count=1)


def inline_svg(svg):
    """SVG for an HTML widget: what comes before ``<svg`` (XML header, DOCTYPE) dropped."""
    at = svg.find("<svg")
    return svg[at:] if at >= 0 else svg


def scrolled_svg(svg):
    """``inline_svg`` in a box that scrolls when the picture is wider than the notebook: a
    big graph is neither cut at the edge nor shrunk below a legible size."""
    return f"<div class='xe-scroll' style='overflow:auto; max-width:100%'>{inline_svg(svg)}</div>"


def call_with_accepted(fn, *args, **kwargs):
    """Call ``fn`` with the keywords its signature accepts (renderers' options differ)."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return fn(*args, **kwargs)
    if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        kwargs = {k: v for k, v in kwargs.items() if k in params}
    return fn(*args, **kwargs)


def animate_function():
    """``xe.animate`` when the animate package is there, else None."""
    import xla_explorer as xe
    fn = getattr(xe, "animate", None)
    if callable(fn) and not isinstance(fn, types.ModuleType):
        return fn
    try:
        mod = importlib.import_module("xla_explorer.animate")
    except ImportError:
        return None
    fn = getattr(mod, "animate", None)
    return fn if callable(fn) else None


def pre(text, colour=None):
    # lines break between words (JupyterLab's CSS would break "Transpose" into "Tr" and "anspose")
    style = ("margin:0; white-space:pre-wrap; word-break:normal; overflow-wrap:break-word; "
             "font-family:monospace; font-size:12px")
    if colour:
        style += f"; color:{colour}"
    return f"<pre style='{style}'>{html.escape(text)}</pre>"


def buildable_ops():
    """{opcode: (OpDef, function)} for every registered op with a public function."""
    out = {}
    for opcode, opdef in registry.all_ops().items():
        fn = op_function(opdef)
        if fn is not None:
            out[opcode] = (opdef, fn)
    return out


# -- the builder's extras: doc lines, errors beside their control, inputs, generated code ------

def doc_html(fn):
    """The signature (monospace) and the docstring's first paragraph, ``code`` spans as <code>."""
    sig = html.escape(f"{fn.__name__}{inspect.signature(fn)}")
    doc = (inspect.getdoc(fn) or "").strip().split("\n\n")[0]  # the first paragraph
    first = html.escape(" ".join(doc.split()))
    first = re.sub(r"``(.+?)``", r"<code>\1</code>", first)
    return (f"<div style='font-size:12px'><code>{sig}</code>"
            + (f"<br><span>{first}</span>" if first else "") + "</div>")


def fault_of(message, names):
    """Which of ``names`` (argument names) an error message is about: the one it mentions
    first (``slice_sizes[1]=5 ...`` -> ``slice_sizes``), or None.  ``parameter_number`` also
    matches "parameter number"."""
    body = message.split(":", 1)[1] if ":" in message[:40] else message  # skip "Gather: "
    best = None
    for name in names:
        for form in {name, name.replace("_", " ")}:
            m = re.search(r"(?<![\w.])" + re.escape(form) + r"s?(?![\w])", body)
            if m and (best is None or m.start() < best[0]):
                best = (m.start(), name)
    return best[1] if best else None


def make_input(text, shape, seed=0):
    """A value of ``shape`` from an input box: ``iota``, ``zeros``, ``ones``, ``random``
    (``random(seed)``) or a Python literal (a number, nested lists; a tuple for a tuple shape)."""
    from xla_explorer import dtypes
    text = (text or "").strip() or "iota"
    if shape.is_token:
        from xla_explorer.executors.reference import Token
        return Token()
    if shape.is_tuple:
        if text in ("iota", "zeros", "ones") or text.startswith("random"):
            return tuple(make_input(text, s, seed + k) for k, s in enumerate(shape.tuple_shapes))
        value = parse_value(text)
        if not isinstance(value, tuple) or len(value) != len(shape.tuple_shapes):
            raise ValueError(f"expected a tuple of {len(shape.tuple_shapes)} values for {shape}, got {quote(text)}")
        return tuple(make_input(repr(v), s) for v, s in zip(value, shape.tuple_shapes))
    dtype = dtypes.to_numpy(shape.element_type)
    dims = tuple(shape.dims)
    if None in dims:
        raise ValueError(f"{shape} has a dynamic dimension: type the values as a list")
    size = int(np.prod(dims, dtype=np.int64))
    if text == "iota":
        if np.dtype(dtype).kind == "b":
            return (np.arange(size) % 2 == 1).reshape(dims)
        return np.arange(size).astype(dtype).reshape(dims)
    if text in ("zeros", "ones"):
        return (np.zeros if text == "zeros" else np.ones)(dims, dtype)
    m = re.fullmatch(r"random(?:\((\d*)\))?", text)
    if m:
        rng = np.random.default_rng(int(m.group(1)) if m.group(1) else seed)
        kind = np.dtype(dtype).kind
        if kind == "b":
            return rng.random(dims) < 0.5
        if kind in "iu":
            return rng.integers(0, 10, dims).astype(dtype)
        if kind == "c":
            return (rng.uniform(-1, 1, dims) + 1j * rng.uniform(-1, 1, dims)).astype(dtype)
        return rng.uniform(-1, 1, dims).astype(dtype)
    value = parse_value(text)
    arr = np.asarray(value)
    if arr.dtype == object:
        raise ValueError(f"cannot make an array of {quote(text)}")
    if arr.shape != dims:
        raise ValueError(f"{quote(text)} has shape {list(arr.shape)}, the parameter is {shape}")
    out = arr.astype(dtype)
    if np.dtype(dtype).kind in "iub" and arr.dtype.kind == "f" and not np.array_equal(out, arr):
        raise ValueError(f"{quote(text)} has fractions; the parameter is {shape}")
    return out


_KEYWORDS = set(__import__("keyword").kwlist) | {"np", "xe", "comp", "names"}


def identifier(name, taken):
    """A Python name for ``name`` (``gather.1`` -> ``gather_1``), not in ``taken``; added to it."""
    base = re.sub(r"\W", "_", str(name)) or "v"
    if base[0].isdigit():
        base = "v_" + base
    if base in _KEYWORDS:
        base += "_"
    out, k = base, 1
    while out in taken:
        k += 1
        out = f"{base}_{k}"
    taken.add(out)
    return out


def expression_code(text, names):
    """The Python source of an input expression (a literal with names), each name replaced
    by ``names[name]`` (a variable, ``xe.Add``); raises ValueError for an unknown name."""
    src, found = _protect(text.strip())
    try:
        tree = ast.parse(src, mode="eval")
    except SyntaxError as e:
        raise ValueError(f"cannot read {quote(text)} ({e.msg})") from None

    class Swap(ast.NodeTransformer):
        def visit_Name(self, node):
            name = found.get(node.id, node.id)
            if name not in names:
                raise ValueError(f"unknown name {quote(name)} in {quote(text)}")
            return ast.copy_location(ast.parse(names[name], mode="eval").body, node)

        def visit_Constant(self, node):
            if isinstance(node.value, str):
                node.value = _restore(node.value, found)
            return node
    return ast.unparse(Swap().visit(tree).body)


def literal_code(value):
    """Python source for an attribute or constant value: numbers, strings, lists, tuples,
    NumPy arrays and scalars (``np.array([...], dtype=np.float32)``), Shapes."""
    from xla_explorer.shapes import Shape
    if isinstance(value, Shape):
        return f"xe.Shape.parse({str(value)!r})"
    if isinstance(value, (list, tuple)):
        items = [literal_code(v) for v in value]
        if isinstance(value, tuple):
            return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
        return "[" + ", ".join(items) + "]"
    if isinstance(value, (np.ndarray, np.generic)):
        arr = np.asarray(value)
        data = literal_code(_plain_list(arr))
        if getattr(np, arr.dtype.name, None) is arr.dtype.type:  # np.float32(2.0), np.array([...], np.int32)
            kind = f"np.{arr.dtype.name}"
            return f"{kind}({data})" if arr.ndim == 0 else f"np.array({data}, {kind})"
        from xla_explorer import dtypes  # bf16, f8...: the library's own name for the type
        return f"np.asarray({data}, dtype=xe.dtypes.to_numpy({dtypes.from_numpy(arr.dtype)!r}))"
    if isinstance(value, float):
        if np.isnan(value) or np.isinf(value):
            return f"float({repr(value)!r})"
        return repr(value)
    if isinstance(value, complex):
        return f"complex({literal_code(value.real)}, {literal_code(value.imag)})"
    if value is None or isinstance(value, (bool, int, str)):
        return repr(value)
    raise ValueError(f"no Python literal for {type(value).__name__} {value!r}")


def _plain_list(arr):
    if arr.ndim == 0:
        v = arr.item()
        return v if isinstance(v, (bool, int, float, complex)) else float(v)
    return [_plain_list(a) for a in arr]


# -- values as tables, differing elements marked ------------------------------------------------

#: rows and columns of a value table (bigger values show this corner and a summary)
TABLE_ROWS, TABLE_COLUMNS = 12, 16


def _cell(x):
    if isinstance(x, (bool, np.bool_)):
        return "T" if x else "F"
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    if isinstance(x, (complex, np.complexfloating)):
        return f"{complex(x).real:.3g}{complex(x).imag:+.3g}j"
    return f"{float(x):.4g}"


def value_html(value, name="value", want=None, shape=None):
    """A value as a table of its elements (a big one: its top-left corner and a summary);
    with ``want`` (XLA's value of the same instruction) the elements that differ beyond
    the type's tolerance (``xla_explorer.diff``) are red, XLA's value on hover."""
    from xla_explorer import dtypes
    from xla_explorer.diff import compare_arrays
    if isinstance(value, tuple):
        shapes = shape.tuple_shapes if shape is not None and shape.is_tuple else [None] * len(value)
        wants = want if isinstance(want, tuple) and len(want) == len(value) else [None] * len(value)
        return ("<div style='display:flex; flex-wrap:wrap; column-gap:16px'>"  # a tuple's elements side by side
                + "".join(value_html(v, f"{name}[{k}]", wv, s) for k, (v, wv, s) in enumerate(zip(value, wants, shapes)))
                + "</div>")
    if not isinstance(value, (np.ndarray, np.generic, int, float, bool, complex)):
        return pre(f"{name}: {value!r}")
    arr = np.asarray(value)
    head = f"{name}: {type_text(arr)}"
    bad = wanted = None
    if want is not None:
        wanted = np.asarray(want)
        try:
            etype = shape.element_type if shape is not None and not shape.is_tuple else dtypes.from_numpy(arr.dtype)
            bad = compare_arrays(arr, wanted, etype)[2]
        except Exception as e:  # shapes differ: said, no marks
            head += f"  (XLA's value differs in shape: {e})"
            bad = wanted = None
    note = ""
    if bad is not None:
        n = int(np.count_nonzero(bad))
        note = (f"<span style='color:{'#b00020' if n else '#1a7f37'}'>"
                f"{f'{n} of {arr.size} elements differ from XLA (red; hover for its value)' if n else 'equal to XLA'}"
                "</span>")
    if arr.size > TABLE_ROWS * TABLE_COLUMNS or arr.ndim > 2:
        head += f"  ({arr.size} elements)  {summary(arr)}"
    grid = arr.reshape(1, 1) if arr.ndim == 0 else arr.reshape(1, -1) if arr.ndim == 1 else \
        arr.reshape(-1, arr.shape[-1])
    bgrid = None if bad is None else np.asarray(bad).reshape(grid.shape)
    wgrid = None if wanted is None else wanted.reshape(grid.shape)
    lead = arr.shape[:-1] if arr.ndim > 1 else ()
    rows = []
    for i in range(min(grid.shape[0], TABLE_ROWS)):
        label = ""
        if arr.ndim > 1:
            label = "[" + ",".join(str(int(j)) for j in np.unravel_index(i, lead)) + "]"
        cells = [f"<td style='color:#888; padding:0 4px'>{label}</td>"] if arr.ndim > 1 else []
        for j in range(min(grid.shape[1], TABLE_COLUMNS)):
            style = "border:1px solid #ddd; padding:1px 4px; text-align:right"
            title = ""
            if bgrid is not None and bgrid[i, j]:
                style += "; background:#fdd; border-color:#b00020; color:#b00020; font-weight:bold"
                title = f" title='XLA: {_cell(wgrid[i, j])}'"
            cells.append(f"<td style='{style}'{title}>{_cell(grid[i, j])}</td>")
        if grid.shape[1] > TABLE_COLUMNS:
            cells.append("<td>…</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    if grid.shape[0] > TABLE_ROWS:
        rows.append("<tr><td>⋮</td></tr>")
    table = ("<table style='border-collapse:collapse; font-family:monospace; font-size:12px; margin:2px 0'>"
             + "".join(rows) + "</table>") if arr.size else ""
    return (f"<div class='xe-value'><code style='font-size:12px'>{html.escape(head)}</code>"
            + (f"<br><small>{note}</small>" if note else "") + table + "</div>")
