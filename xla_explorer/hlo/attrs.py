"""HLO attribute codecs: the text after ``key=`` <-> the ops' Python keyword values.

Each op declares a schema, a list of ``Attr`` objects.  An ``Attr`` owns one HLO
attribute (``window=``, ``slice=``, ``dimensions=``) and the Python keywords it stands
for (``window_dimensions``, ``window_strides``, ... for ``window=``).  The parser hands
it the raw text; the printer asks it for the text back.  Attributes no schema claims
stay raw in ``Instruction.extra``.
"""
import re

from .. import coerce as _c
from ..errors import HloParseError

REQUIRED = object()
#: the most devices an iota list of replica groups may name (``[2,2]<=[4]``)
MAX_DEVICES = 1 << 16


def split_top(text, sep=","):
    """Split at ``sep`` outside brackets and quotes."""
    parts, depth, cur, quote, i = [], 0, [], False, 0
    while i < len(text):
        c = text[i]
        if quote:
            cur.append(c)
            if c == "\\" and i + 1 < len(text):
                cur.append(text[i + 1])
                i += 1
            elif c == '"':
                quote = False
        elif c == '"':
            quote = True
            cur.append(c)
        elif c in "{([":
            depth += 1
            cur.append(c)
        elif c in "})]":
            depth -= 1
            cur.append(c)
        elif c == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
        i += 1
    if "".join(cur).strip() or parts:
        parts.append("".join(cur))
    return [p.strip() for p in parts]


def _strip_braces(raw, what):
    raw = raw.strip()
    if not (raw.startswith("{") and raw.endswith("}")):
        raise HloParseError(f"expected {what} in braces {{...}}, got {raw!r}")
    return raw[1:-1].strip()


def parse_ints(raw):
    body = _strip_braces(raw, "a list of integers")
    return tuple(int(x) for x in body.split(",")) if body else ()


def format_ints(v):
    return "{" + ",".join(str(int(x)) for x in v) + "}"


def iota_error(dims, reshape, perm=None):
    """Why XLA's iota list ``[dims]<=[reshape]T(perm)`` is malformed, or None: the ids
    0..n-1 (n the product of ``reshape``), transposed by ``perm``, fill ``dims``."""
    def show(v):
        return ",".join(str(x) for x in v)
    places = count = 1
    for x in dims:
        places *= x
    for x in reshape:
        count *= x
    if count != places:
        return (f"[{show(dims)}]<=[{show(reshape)}] makes {count:,} ids for the {places:,} places of "
                f"[{show(dims)}]")
    if perm is not None and sorted(perm) != list(range(len(reshape))):
        return f"T({show(perm)}) is not a permutation of the {len(reshape)} dimensions of [{show(reshape)}]"
    return None


_DEVICES = re.compile(r"devices=\[([\d,\s]+)\]\s*(?:<=\[([\d,\s]+)\](?:T\(([\d,\s]+)\))?|([\d,\s]+))")


def sharding_error(text):
    """Why a ``sharding=`` value's tile assignment cannot be filled by its device list, or
    None: every ``devices=[dims]`` in it (tuple shardings have several) lists exactly one
    device per tile, each once (``<=[n]``: XLA's iota, ``iota_error``).  Forms it does not
    know are not its business (the SPMD simulator says which it reads)."""
    for m in _DEVICES.finditer(text):
        dims = [int(x) for x in m.group(1).split(",") if x.strip()]
        tiles = 1
        for x in dims:
            tiles *= x
        if m.group(2):
            why = iota_error(dims, [int(x) for x in m.group(2).split(",") if x.strip()],
                             [int(x) for x in m.group(3).split(",") if x.strip()] if m.group(3) else None)
            if why:
                return why
            continue
        ids = [int(x) for x in m.group(4).replace(" ", "").split(",") if x]
        if len(ids) != tiles:
            return f"devices=[{m.group(1)}] has {tiles:,} tiles but lists {len(ids):,} devices"
        seen = set()
        for d in ids:
            if d in seen:
                return f"devices=[{m.group(1)}] lists device {d} twice"
            seen.add(d)
    return None


def parse_int_lists(raw):
    """``{{0,1},{2,3}}`` -> ((0, 1), (2, 3)); also XLA's iota form ``[2,2]<=[4]``."""
    raw = raw.strip()
    m = re.fullmatch(r"\[([\d,\s]+)\]<=\[([\d,\s]+)\](?:T\(([\d,\s]+)\))?", raw)
    if m:
        import numpy as np
        shape = [int(x) for x in m.group(1).split(",")]
        reshape = [int(x) for x in m.group(2).split(",")]
        count = 1
        for x in reshape:
            count *= x
        if count > MAX_DEVICES:
            raise HloParseError(f"{raw}: {count:,} device ids; at most {MAX_DEVICES:,} are supported")
        why = iota_error(shape, reshape, [int(x) for x in m.group(3).split(",")] if m.group(3) else None)
        if why:
            raise HloParseError(f"{raw}: {why}")
        ids = np.arange(count).reshape(reshape)
        if m.group(3):
            ids = ids.transpose([int(x) for x in m.group(3).split(",")])
        return tuple(tuple(int(x) for x in row) for row in ids.reshape(shape))
    body = _strip_braces(raw, "a list of lists")
    return tuple(parse_ints(p) for p in split_top(body)) if body else ()


def format_int_lists(v):
    return "{" + ",".join(format_ints(g) for g in v) + "}"


def unquote(raw):
    raw = raw.strip()
    if len(raw) >= 2 and raw[0] == raw[-1] == '"':
        return bytes(raw[1:-1], "utf-8").decode("unicode_escape")
    return raw


def quote(s):
    return '"' + str(s).replace("\\", "\\\\").replace('"', '\\"') + '"'


_SIMPLE = {
    "int": (lambda raw, r: int(raw), lambda v, n: str(int(v))),
    "float": (lambda raw, r: float(raw), lambda v, n: repr(float(v))),
    "ints": (lambda raw, r: parse_ints(raw), lambda v, n: format_ints(v)),
    "int_lists": (lambda raw, r: parse_int_lists(raw), lambda v, n: format_int_lists(v)),
    "bool": (lambda raw, r: raw.strip() == "true", lambda v, n: "true" if v else "false"),
    "str": (lambda raw, r: raw.strip(), lambda v, n: str(v)),
    "qstr": (lambda raw, r: unquote(raw), lambda v, n: quote(v)),
    "raw": (lambda raw, r: raw, lambda v, n: v),
    "computation": (lambda raw, r: r(raw.strip()), lambda v, n: n(v)),
    "computations": (lambda raw, r: [r(x) for x in split_top(_strip_braces(raw, "computation names"))],
                     lambda v, n: "{" + ", ".join(n(c) for c in v) + "}"),
}


#: kind -> how a value given in Python is checked (``coerce``): one rule per kind for every op
_COERCE = {
    "int": _c.as_int,
    "float": _c.as_float,
    "ints": _c.as_int_list,
    "int_lists": _c.as_int_lists,
    "bool": _c.as_bool,
    "str": _c.as_str,
    "qstr": _c.as_str,
    "computation": _c.as_computation,
    "computations": _c.as_computations,
}


#: Attr kind -> the kind of argument (``ops.arguments.KINDS``) a playground control shows
_ARG_KINDS = {"int": "int", "float": "float", "ints": "dims", "int_lists": "groups", "bool": "bool", "str": "str",
              "qstr": "str", "raw": "str", "computation": "computation", "computations": "computations"}


class Attr:
    """One HLO attribute for one Python keyword, of a simple kind (see ``_SIMPLE``).

    ``default`` is used when the attribute is absent from HLO text (``REQUIRED``: it must
    be there); a value equal to the default is not printed unless ``always_print``.
    ``choices``: the values an enum attribute may take (``direction=``), refused otherwise
    by the parser and the builder alike; ``minimum``: the least value of an int attribute.
    """

    def __init__(self, kw, kind, hlo=None, default=REQUIRED, always_print=False, choices=None, minimum=None):
        if kind not in _SIMPLE:
            raise ValueError(f"unknown attribute kind {kind!r}")
        self.kw, self.kind, self.hlo = kw, kind, hlo or kw
        self.default, self.always_print = default, always_print
        self.choices = tuple(choices) if choices is not None else None
        self.minimum = minimum
        self.kws = (kw,)

    @property
    def arg_kinds(self):
        """{keyword: the kind of argument it is} (see ``ops.arguments``): what a control needs."""
        return {self.kw: "enum" if self.choices is not None else _ARG_KINDS[self.kind]}

    def parse(self, raw, resolve):
        try:
            value = _SIMPLE[self.kind][0](raw, resolve)
        except HloParseError:
            raise
        except (ValueError, KeyError, TypeError) as e:
            raise HloParseError(f"attribute {self.hlo}={raw}: expected {self.kind} ({e})") from None
        if self.kind == "bool" and raw.strip() not in ("true", "false"):
            raise HloParseError(f"attribute {self.hlo}={raw}: expected true or false")
        if self.choices is not None and value not in self.choices:
            raise HloParseError(f"attribute {self.hlo}={raw}: expected one of {', '.join(self.choices)}")
        if self.minimum is not None and value < self.minimum:
            raise HloParseError(f"attribute {self.hlo}={raw}: must be >= {self.minimum}")
        return {self.kw: value}

    def coerce(self, attrs, op):
        """Check (and normalise) the Python value given for this attribute, in place."""
        if self.kw not in attrs:
            return
        v = attrs[self.kw]
        if self.kind == "raw":   # HLO text kept as it is (backend_config=, sharding=, ...)
            if v is not None and not isinstance(v, str):
                raise _c.ShapeError(f"{op}: {self.kw} must be HLO text (a string), got {_c.short(v)}")
            return
        if v is None and self.default is not REQUIRED and self.default is None:
            return  # an optional attribute left out
        if self.kind == "str" and self.choices is not None:
            attrs[self.kw] = _c.as_str(op, self.kw, v, self.choices)
        elif self.kind == "int":
            attrs[self.kw] = _c.as_int(op, self.kw, v, minimum=self.minimum)
        else:
            attrs[self.kw] = _COERCE[self.kind](op, self.kw, v)

    def missing(self):
        if self.default is REQUIRED:
            return None
        return {self.kw: self.default}

    def format(self, attrs, inst, name_of):
        if self.kw not in attrs:
            return None
        v = attrs[self.kw]
        if v is None or (not self.always_print and self.default is not REQUIRED and _same(v, self.default)):
            return None
        return _SIMPLE[self.kind][1](v, name_of)


def _same(a, b):
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


class PaddingConfig:
    """``padding=0_0_0x1_2_1`` <-> ``padding_config=[(0, 0, 0), (1, 2, 1)]`` (low, high, interior)."""

    def __init__(self, kw="padding_config", hlo="padding"):
        self.kw, self.hlo, self.kws = kw, hlo, (kw,)
        self.arg_kinds = {kw: "padding_config"}

    def parse(self, raw, resolve):
        triples = []
        for part in raw.strip().split("x"):
            nums = [int(x) for x in part.split("_")]
            if len(nums) == 2:
                nums.append(0)
            if len(nums) != 3:
                raise HloParseError(f"padding={raw}: each dimension is low_high or low_high_interior")
            triples.append(tuple(nums))
        return {self.kw: tuple(triples)}

    def missing(self):
        return {self.kw: ()}  # a rank-0 pad prints no padding at all

    def coerce(self, attrs, op):
        if self.kw in attrs:
            attrs[self.kw] = int_tuples(op, self.kw, attrs[self.kw], (2, 3), "(low, high, interior)")

    def format(self, attrs, inst, name_of):
        cfg = attrs.get(self.kw)
        if cfg is None:
            return None
        if len(cfg) == 0:
            return None
        # XLA prints the interior part for every dimension as soon as one has it
        with_interior = any(int(t[2]) for t in cfg)
        return "x".join("_".join(str(int(v)) for v in (t if with_interior else t[:2])) for t in cfg)


class SliceAttr:
    """``slice={[0:4:2], [1:3]}`` <-> ``start_indices``, ``limit_indices``, ``strides``."""

    kws = ("start_indices", "limit_indices", "strides")
    hlo = "slice"
    arg_kinds = dict.fromkeys(kws, "sizes")  # one integer per operand dimension

    def parse(self, raw, resolve):
        starts, limits, strides = [], [], []
        for part in split_top(_strip_braces(raw, "slice ranges")):
            part = part.strip()
            if not (part.startswith("[") and part.endswith("]")):
                raise HloParseError(f"slice={raw}: each range is [start:limit] or [start:limit:stride]")
            nums = [int(x) for x in part[1:-1].split(":")]
            starts.append(nums[0])
            limits.append(nums[1])
            strides.append(nums[2] if len(nums) > 2 else 1)
        return {"start_indices": tuple(starts), "limit_indices": tuple(limits), "strides": tuple(strides)}

    def missing(self):
        return None

    def coerce(self, attrs, op):
        for kw in self.kws:
            if attrs.get(kw) is not None:
                attrs[kw] = _c.as_int_list(op, kw, attrs[kw])

    def format(self, attrs, inst, name_of):
        strides = attrs.get("strides") or [1] * len(attrs["start_indices"])
        # XLA prints every stride as soon as one is not 1: slice={[0:9:2], [3:4:1]}
        omit_strides = all(int(st) == 1 for st in strides)
        parts = []
        for s, l, st in zip(attrs["start_indices"], attrs["limit_indices"], strides):
            parts.append(f"[{s}:{l}]" if omit_strides else f"[{s}:{l}:{st}]")
        return "{" + ", ".join(parts) + "}"


class Window:
    """``window={size=3x3 stride=2x2 pad=1_1x0_0 lhs_dilate=.. rhs_dilate=..}``.

    ``fields`` maps the window's field names to Python keywords, e.g. for ReduceWindow
    ``{"size": "window_dimensions", "stride": "window_strides", "pad": "padding",
    "lhs_dilate": "base_dilations", "rhs_dilate": "window_dilations"}``.  Absent fields
    default to 1 (0 for pad); ``size_from`` gives the sizes when they are not a keyword
    (convolution: the kernel's spatial sizes), as ``size_from(inst) -> list``.
    """

    hlo = "window"

    def __init__(self, fields, size_from=None):
        self.fields = dict(fields)
        self.kws = tuple(self.fields.values())
        self.size_from = size_from
        # per dimension of the window: a size each, a (low, high) pair, a reversal flag
        self.arg_kinds = {kw: {"pad": "padding", "rhs_reversal": "flags"}.get(f, "sizes") for f, kw in self.fields.items()}

    def parse(self, raw, resolve):
        body = _strip_braces(raw, "window fields")
        got = {}
        for item in body.split():
            key, _, val = item.partition("=")
            if key == "pad":
                got[key] = tuple(tuple(int(x) for x in p.split("_")) for p in val.split("x"))
            elif key == "rhs_reversal":
                got[key] = tuple(bool(int(x)) for x in val.split("x"))
            else:
                got[key] = tuple(int(x) for x in val.split("x"))
        rank = len(got.get("size", ()))
        out = {}
        for field, kw in self.fields.items():
            if field in got:
                out[kw] = got[field]
            elif field == "pad":
                out[kw] = tuple((0, 0) for _ in range(rank))
            elif field == "rhs_reversal":
                out[kw] = tuple(False for _ in range(rank))
            else:
                out[kw] = tuple(1 for _ in range(rank))
        return out

    def missing(self):
        return {kw: () for kw in self.kws}

    def coerce(self, attrs, op):
        for field, kw in self.fields.items():
            v = attrs.get(kw)
            if v is None:
                continue
            if field == "pad":
                attrs[kw] = int_tuples(op, kw, v, (2,), "(low, high)")
            elif field == "rhs_reversal":
                if not isinstance(v, (list, tuple)):
                    raise _c.ShapeError(f"{op}: {kw} must be a list of bools, got {_c.short(v)}")
                attrs[kw] = tuple(_c.as_bool(op, f"{kw}[{i}]", x) for i, x in enumerate(v))
            else:
                attrs[kw] = _c.as_int_list(op, kw, v)

    def format(self, attrs, inst, name_of):
        if "size" in self.fields:
            size = attrs[self.fields["size"]]
        else:
            size = self.size_from(inst)
        if len(size) == 0:
            return None
        parts = ["size=" + "x".join(map(str, size))]
        for field in ("stride", "pad", "lhs_dilate", "rhs_dilate", "rhs_reversal"):
            kw = self.fields.get(field)
            if kw is None or attrs.get(kw) is None:
                continue
            v = attrs[kw]
            if field == "pad":
                if any(tuple(p) != (0, 0) for p in v):
                    parts.append("pad=" + "x".join(f"{int(a)}_{int(b)}" for a, b in v))
            elif field == "rhs_reversal":
                if any(v):
                    parts.append("rhs_reversal=" + "x".join(str(int(bool(x))) for x in v))
            elif any(int(x) != 1 for x in v):
                parts.append(f"{field}=" + "x".join(map(str, v)))
        return "{" + " ".join(parts) + "}"


def int_tuples(op, kw, v, lengths, what):
    """A list of integer tuples of one of ``lengths`` (padding pairs and triples)."""
    import numpy as np
    if isinstance(v, np.ndarray) and v.ndim == 2 and v.dtype.kind in "iu":
        v = v.tolist()
    if not isinstance(v, (list, tuple)):
        raise _c.ShapeError(f"{op}: {kw} must be a list of {what} tuples of integers, got {_c.short(v)}")
    out = []
    for i, t in enumerate(v):
        t = _c.as_int_list(op, f"{kw}[{i}]", t)
        if len(t) not in lengths:
            raise _c.ShapeError(f"{op}: {kw}[{i}]={list(t)} must be {what}")
        out.append(t)
    return tuple(out)


def coerce_attrs(op, attrs):
    """The attributes given to ``op`` (an OpDef) checked against its schema: dimension lists
    of integers, flags of bools, enums among their choices, computations callable.  Raises a
    ShapeError naming the op and the attribute; keywords no schema entry claims are kept."""
    out = dict(attrs)
    for a in op.attrs:
        fn = getattr(a, "coerce", None)
        if fn is not None:
            fn(out, op.name)
    return out


def parse_attribute_list(text):
    """``a=1, b={x}, c="s"`` -> [(key, raw), ...] (keys in order)."""
    out = []
    for part in split_top(text):
        if not part:
            continue
        key, eq, raw = part.partition("=")
        if not eq:
            raise HloParseError(f"expected key=value, got {part!r}")
        out.append((key.strip(), raw.strip()))
    return out
