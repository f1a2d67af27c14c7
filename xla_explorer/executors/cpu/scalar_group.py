"""Fused groups of integer and pred *scalars* evaluated in Python, without a Numba loop.

A dynamic-slice or dynamic-update-slice from JAX clamps each start index before the op:
``select(k < 0, k + n, k)`` and the like, on ``s32[]`` values -- a fused loop of one
element.  A Numba call of such a loop costs more than its work (argument checks of the
output and inputs: about 3 us a run, for three integer ops), so a group whose members are
all rank-0 integer or pred values of the ops below is generated as a small Python
function of its input values instead, with the loop's exact semantics: integers wrap to
their type (two's complement) after every op, as the loop's carrier casts do; compare
ignores ``compare_type`` for integers, as the loop's emitter does; no floats (their
rounding and the denormal environment stay the loop's).  Sub-byte integer types are
left to the loop.
"""
import numpy as np

from ... import dtypes

#: integer types evaluated here: (bits, signed)
_INTS = {"s8": (8, True), "s16": (16, True), "s32": (32, True), "s64": (64, True),
         "u8": (8, False), "u16": (16, False), "u32": (32, False), "u64": (64, False)}
_TYPES = set(_INTS) | {"pred"}
_CMP = {"EQ": "==", "NE": "!=", "GE": ">=", "GT": ">", "LE": "<=", "LT": "<"}
_OPS = {"add", "subtract", "multiply", "negate", "abs", "maximum", "minimum", "and", "or", "xor", "not",
        "compare", "select", "clamp", "convert", "broadcast", "constant", "copy"}


def _wrap(t, expr):
    """``expr`` (a Python int expression) wrapped to integer type ``t``."""
    bits, signed = _INTS[t]
    mask = (1 << bits) - 1
    if signed:
        half = 1 << (bits - 1)
        return f"((({expr}) + {half}) & {mask}) - {half}"
    return f"(({expr}) & {mask})"


def supported(group):
    """Whether ``group`` is a group of integer / pred scalars this module evaluates."""
    if getattr(group, "kind", "loop") != "loop":
        return False
    for m in group.members:
        s = m.shape
        if not s.is_array or s.rank != 0 or s.element_type not in _TYPES or m.opcode not in _OPS:
            return False
        for o in m.operands:
            if not o.shape.is_array or o.shape.rank != 0 or o.shape.element_type not in _TYPES:
                return False
    return all(i.shape.is_array and i.shape.rank == 0 and i.shape.element_type in _TYPES for i in group.inputs)


def _expr(m, a):
    """The Python expression of member ``m`` on its operands' expressions ``a``."""
    t = m.shape.element_type
    op = m.opcode
    pred = t == "pred"
    if op in ("broadcast", "copy"):
        return a[0]
    if op == "convert":
        src = m.operands[0].shape.element_type
        if src == t:
            return a[0]
        if t == "pred":
            return f"({a[0]} != 0)"
        if src == "pred":
            return f"(1 if {a[0]} else 0)"
        return _wrap(t, a[0])
    if op == "compare":
        return f"({a[0]} {_CMP[m.attrs['comparison_direction']]} {a[1]})"
    if op == "select":
        return f"({a[1]} if {a[0]} else {a[2]})"
    if op == "clamp":
        return f"(({a[0]} or {a[1]}) and {a[2]})" if pred else f"min(max({a[0]}, {a[1]}), {a[2]})"
    if op == "maximum":
        return f"({a[0]} or {a[1]})" if pred else f"max({a[0]}, {a[1]})"
    if op == "minimum":
        return f"({a[0]} and {a[1]})" if pred else f"min({a[0]}, {a[1]})"
    if op == "and":
        return f"({a[0]} and {a[1]})" if pred else f"({a[0]} & {a[1]})"
    if op == "or":
        return f"({a[0]} or {a[1]})" if pred else f"({a[0]} | {a[1]})"
    if op == "xor":
        return f"({a[0]} != {a[1]})" if pred else f"({a[0]} ^ {a[1]})"
    if op == "not":
        return f"(not {a[0]})" if pred else _wrap(t, f"~{a[0]}")
    if pred:   # arithmetic on pred: not fused by the loop either (no emitter accepts it)
        raise NotImplementedError(op)
    if op == "add":
        return _wrap(t, f"{a[0]} + {a[1]}")
    if op == "subtract":
        return _wrap(t, f"{a[0]} - {a[1]}")
    if op == "multiply":
        return _wrap(t, f"{a[0]} * {a[1]}")
    if op == "negate":
        return _wrap(t, f"-{a[0]}")
    if op == "abs":
        return _wrap(t, f"abs({a[0]})")
    raise NotImplementedError(op)


def _literal(inst):
    v = np.asarray(inst.attrs["literal"]).reshape(())[()]
    return bool(v) if inst.shape.element_type == "pred" else int(v)


def scalar_runner(group):
    """A function of the group's input values (0-d arrays or NumPy scalars) returning the
    root's value as a 0-d array of its dtype, or None when the group is not one of
    integer / pred scalars of the supported ops."""
    if not supported(group):
        return None
    lines, names, env = [], {}, {"np": np}
    for k, x in enumerate(group.inputs):
        cast = "bool" if x.shape.element_type == "pred" else "int"
        names[x] = f"a{k}"
        lines.append(f"    a{k} = {cast}(values[{k}])")
    try:
        for n, m in enumerate(group.members):
            if m.opcode == "constant":
                expr = repr(_literal(m))
            else:
                expr = _expr(m, [names[o] for o in m.operands])
            names[m] = f"t{n}"
            lines.append(f"    t{n} = {expr}")
    except NotImplementedError:
        return None
    env["DTYPE"] = np.dtype(group.root.shape.dtype)
    src = "def run(values):\n" + "\n".join(lines) + f"\n    return np.array({names[group.root]}, DTYPE)\n"
    exec(compile(src, f"<scalar group {group.root.name}>", "exec"), env)   # noqa: S102 - our own source
    run = env["run"]
    run.source = src
    return run


assert set(_INTS) <= dtypes.INTEGRAL
