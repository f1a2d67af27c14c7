"""``comp.diff(*args)``: an executor against real XLA (through JAX), instruction by instruction.

The executor under test (``backend``, the NumPy reference) runs the module once, traced
(``comp.trace``), keeping every entry instruction's value.  Then each entry instruction is evaluated *again* by
``against`` (``"jax"``: its ``jax.lax`` lowering, eagerly, on XLA) on the **same operand
values** the reference gave it, so a difference shows up at the instruction that makes
it and does not spread to the instructions after it.  Per instruction the report has the
largest absolute and relative difference and the indices of the elements that differ
beyond the tolerance of the result's type:

* integers and ``pred``: exact;
* floats: ``|got - want| <= atol + rtol * |want|`` with ``rtol`` from the type (f64 1e-12,
  f32 1e-5, f16 / bf16 / fp8 two of their epsilons) and ``atol = rtol * max|want|``
  (cancellation in sums is relative to the size of the values, not of the result); NaN
  must meet NaN and infinities must be equal; complex: real and imaginary parts apart.

``rtol=`` / ``atol=`` override the type's values.  In a partitioned module every
device's values are compared: a per-device value (inside ``shard_map``) is compared as
the stack of the devices' values, so its indices start with the device.
"""
from dataclasses import dataclass, field
from html import escape

import numpy as np

from . import dtypes

#: relative tolerance per element type (floats); integers and pred are exact
RTOL = {"f64": 1e-12, "f32": 1e-5, "c128": 1e-12, "c64": 1e-5}


def tolerance(element_type):
    """(rtol, atol_scale) of a type: 0 for exact types; ``atol = atol_scale * max|want|``."""
    if element_type in RTOL:
        r = RTOL[element_type]
        return r, r
    if element_type in dtypes.FLOATING:
        import ml_dtypes
        eps = float(ml_dtypes.finfo(dtypes.to_numpy(element_type)).eps)
        return 2 * eps, 2 * eps
    return 0.0, 0.0


@dataclass
class DiffRow:
    """One entry instruction: the backend's value (``got``) against ``against``'s (``want``)."""
    name: str
    opcode: str
    shape: object
    status: str                      # "ok", "mismatch", "error" (one side failed), "skipped"
    max_abs: float = 0.0
    max_rel: float = 0.0
    count: int = 0                   # elements beyond the tolerance
    size: int = 0                    # elements compared
    indices: list = field(default_factory=list)  # the first of them (tuple results: element number first)
    note: str = ""
    rtol: float = 0.0
    atol: float = 0.0
    got: object = None
    want: object = None

    @property
    def ok(self):
        return self.status == "ok"

    def __repr__(self):
        tail = f", first at {list(self.indices[0])}" if self.indices else ""
        return (f"<DiffRow {self.name} {self.opcode} {self.status}: max abs {self.max_abs:.3g}, "
                f"max rel {self.max_rel:.3g}, {self.count}/{self.size} beyond tolerance{tail}>")


class DiffReport:
    """The rows of ``comp.diff``, in program order; ``report["multiply.3"]`` finds one."""

    def __init__(self, module, rows, backend, against, error=None):
        self.module, self.rows = module, list(rows)
        self.backend, self.against, self.error = backend, against, error

    def __iter__(self):
        return iter(self.rows)

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, name):
        for r in self.rows:
            if r.name == name:
                return r
        raise KeyError(f"no instruction {name!r} in the report (instructions: "
                       f"{', '.join(r.name for r in self.rows)})")

    def mismatches(self):
        """The rows whose values differ beyond the tolerance, in program order."""
        return [r for r in self.rows if r.status == "mismatch"]

    def errors(self):
        return [r for r in self.rows if r.status == "error"]

    @property
    def first_mismatch(self):
        found = self.mismatches()
        return found[0] if found else None

    @property
    def ok(self):
        return not self.mismatches() and not self.errors() and self.error is None

    def by_instruction(self):
        """{instruction name: row}, for value overlays (graphs, the stepper)."""
        return {r.name: r for r in self.rows}

    # -- display ------------------------------------------------------------------------
    _COLUMNS = ("instruction", "opcode", "shape", "status", "max abs", "max rel", "beyond tol", "first indices")

    def _cells(self, r):
        idx = ", ".join(str(list(i)) for i in r.indices[:3]) + (" ..." if len(r.indices) > 3 else "")
        return (r.name, r.opcode, str(r.shape), r.status,
                f"{r.max_abs:.3g}" if r.size else "", f"{r.max_rel:.3g}" if r.size else "",
                f"{r.count}/{r.size}" if r.size else "", idx or r.note[:60])

    def summary(self):
        bad, err = len(self.mismatches()), len(self.errors())
        head = (f"{self.module.name}: {self.backend} vs {self.against}, {len(self.rows)} instructions, "
                f"{bad} mismatch{'es' if bad != 1 else ''}, {err} error{'s' if err != 1 else ''}")
        if self.first_mismatch is not None:
            head += f"; first mismatch at {self.first_mismatch.name}"
        if self.error:
            head += f"; {self.error}"
        return head

    def __str__(self):
        rows = [self._COLUMNS] + [self._cells(r) for r in self.rows]
        widths = [max(len(str(row[i])) for row in rows) for i in range(len(self._COLUMNS))]
        lines = [self.summary()]
        for k, row in enumerate(rows):
            lines.append("  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip())
            if k == 0:
                lines.append("  ".join("-" * w for w in widths))
        return "\n".join(lines)

    def __repr__(self):
        return f"<DiffReport {self.summary()}>"

    def _repr_html_(self):
        colour = {"mismatch": "#fdd", "error": "#fed", "skipped": "#eee"}
        head = "".join(f"<th>{escape(c)}</th>" for c in self._COLUMNS)
        body = []
        for r in self.rows:
            style = f' style="background:{colour[r.status]}"' if r.status in colour else ""
            title = f' title="{escape(r.note)}"' if r.note else ""
            body.append(f"<tr{style}{title}>" + "".join(f"<td>{escape(str(c))}</td>" for c in self._cells(r))
                        + "</tr>")
        return (f"<div><p>{escape(self.summary())}</p><table><thead><tr>{head}</tr></thead>"
                f"<tbody>{''.join(body)}</tbody></table></div>")


# ---------------------------------------------------------------------------------------
# Comparing values

def _leaves(value, shape, path=()):
    """(path, array, Shape) for every array leaf of a (tuple-shaped) value."""
    if shape.is_tuple:
        for i, (v, s) in enumerate(zip(value, shape.tuple_shapes)):
            yield from _leaves(v, s, path + (i,))
    elif not shape.is_token:
        yield path, value, shape


def compare_arrays(got, want, element_type, rtol=None, atol=None):
    """(max_abs, max_rel, bad mask, rtol, atol) of ``got`` against ``want``."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        raise ValueError(f"shapes differ: {list(got.shape)} vs {list(want.shape)}")
    r, scale = tolerance(element_type)
    if rtol is not None:
        r = float(rtol)
    exact = element_type not in dtypes.FLOATING and element_type not in dtypes.COMPLEX
    if exact and rtol is None and atol is None:
        bad = got != want
        diff = np.abs(got.astype(np.float64) - want.astype(np.float64)) if got.size else np.zeros(0)
        rel = diff / np.maximum(np.abs(want.astype(np.float64)), 1)
        return (float(diff.max()) if diff.size else 0.0, float(rel.max()) if rel.size else 0.0, bad, 0.0, 0.0)
    if element_type in dtypes.COMPLEX:
        magnitude = np.abs(want.astype(np.complex128))
        parts = [(got.real.astype(np.float64), want.real.astype(np.float64)),
                 (got.imag.astype(np.float64), want.imag.astype(np.float64))]
    else:
        magnitude = np.abs(want.astype(np.float64))
        parts = [(got.astype(np.float64), want.astype(np.float64))]
    finite = magnitude[np.isfinite(magnitude)]
    a = float(atol) if atol is not None else scale * (float(finite.max()) if finite.size else 0.0)
    bad = np.zeros(got.shape, bool)
    max_abs = max_rel = 0.0
    with np.errstate(invalid="ignore", over="ignore"):
        for g, w in parts:
            gn, wn = np.isnan(g), np.isnan(w)
            both = ~gn & ~wn
            inf = both & (np.isinf(g) | np.isinf(w))
            fin = both & ~inf
            err = np.where(fin, np.abs(g - w), 0.0)
            bad |= (gn != wn) | (inf & (g != w)) | (fin & (err > a + r * np.where(np.isfinite(magnitude), magnitude, 0)))
            if fin.any():
                max_abs = max(max_abs, float(err[fin].max()))
                rel = err[fin] / np.maximum(magnitude[fin], np.finfo(np.float64).tiny)
                max_rel = max(max_rel, float(rel.max()))
            if (gn != wn).any() or (inf & (g != w)).any():
                max_abs = max_rel = float("inf")
    return max_abs, max_rel, bad, r, a


def _compare(inst, got, want, rtol, atol, max_indices, stacked):
    """A DiffRow for one instruction's values (got: the backend's, want: against's)."""
    row = DiffRow(inst.name, inst.opcode, inst.shape, "ok", got=got, want=want)
    leaves_got = list(_leaves(got, inst.shape))
    leaves_want = list(_leaves(want, inst.shape))
    tuple_result = inst.shape.is_tuple
    for (path, g, s), (_, w, _) in zip(leaves_got, leaves_want):
        g, w = np.asarray(g), np.asarray(w)
        if g.shape != w.shape:
            row.status, row.note = "mismatch", f"shapes differ at {list(path)}: {list(g.shape)} vs {list(w.shape)}"
            continue
        max_abs, max_rel, bad, r, a = compare_arrays(g, w, s.element_type, rtol, atol)
        row.max_abs, row.max_rel = max(row.max_abs, max_abs), max(row.max_rel, max_rel)
        row.rtol, row.atol = max(row.rtol, r), max(row.atol, a)
        row.size += int(g.size)
        n = int(np.count_nonzero(bad))
        if n:
            row.status = "mismatch"
            row.count += n
            room = max_indices - len(row.indices)
            if room > 0:
                found = [tuple(int(i) for i in ix) for ix in np.argwhere(bad)[:room]]
                row.indices += [path + ix for ix in found] if tuple_result else found
    if stacked:
        row.note = (row.note + "; " if row.note else "") + "per-device values: indices start with the device"
    return row


# ---------------------------------------------------------------------------------------
# Running both sides

def _reference_values(module, args, channels=None):
    """Per device, {instruction: value} for the entry's instructions: the reference's run
    trace, keeping the entry's values only (what runs inside called computations is
    compared through the instruction that calls it)."""
    from .trace import trace
    error = None
    try:
        t = trace(module, *args, keep=_entry_only, max_bytes=float("inf"), channels=channels)
    except Exception as e:  # noqa: BLE001 - what ran is still compared
        t = getattr(e, "trace", None)
        error = f"the reference failed: {type(e).__name__}: {e}"
        if t is None:
            return [{}], error
    return [t.for_device(d).entry_values() for d in range(t.num_devices)], error


def _entry_only(record):
    return record.parent is None


def _operand_value(template, per_device, inst, positions):
    """The reference's value of ``inst`` shaped as the jax side holds it: a per-device
    (Manual) leaf of the template becomes the stack of every device's values."""
    from .executors.jax_lowering import Manual

    def build(t, values):
        if isinstance(t, Manual):
            return Manual(np.stack([np.asarray(v) for v in values]))
        if isinstance(t, tuple):
            return tuple(build(ti, [v[i] for v in values]) for i, ti in enumerate(t))
        return values[0]
    return build(template, [per_device[p][inst] for p in positions])


def diff(module, *args, against="jax", backend="numpy", rtol=None, atol=None, max_indices=20, channels=None):
    """Compare ``backend`` (the NumPy reference) with ``against`` (``"jax"``: XLA) on every
    instruction of the entry computation; see the module docstring.  ``rtol`` / ``atol``
    replace the tolerances of the types, ``max_indices`` caps the indices kept per row,
    ``channels`` are the reference's host channels.  Returns a DiffReport."""
    if against != "jax":
        raise ValueError(f"diff: against={against!r}; the oracle is 'jax' (real XLA through JAX)")
    if backend != "numpy":
        raise ValueError(f"diff: backend={backend!r}; instruction values come from the 'numpy' reference")
    from .executors import jax_lowering as jl
    from .executors import spmd
    from .executors.reference import as_argument
    jl.load()
    entry = module.entry
    args = [as_argument(a, p.shape, f"argument {i} ({p.name})") for i, (a, p) in enumerate(zip(args, entry.parameters))]
    per_device, error = _reference_values(module, args, channels)
    ctx = jl.LoweringContext(module, jl.SpmdLowering(module) if spmd.is_partitioned(module) else None)
    positions = [int(d) for d in ctx.spmd.ids] if ctx.spmd is not None else [0]
    templates = {}
    rows = []
    for inst in entry.instructions:
        if inst.opcode == "parameter":
            templates[inst] = _plain_template(per_device[0].get(inst))
            continue
        if any(inst not in values for values in per_device[:1]):
            rows.append(DiffRow(inst.name, inst.opcode, inst.shape, "skipped", note="the reference did not reach it"))
            continue
        try:
            operands = [_operand_value(templates.get(o, _plain_template(per_device[0][o])), per_device, o, positions)
                        for o in inst.operands]
            value = jl.eval_instruction(inst, operands, ctx)
        except Exception as e:  # noqa: BLE001 - reported in the row
            rows.append(DiffRow(inst.name, inst.opcode, inst.shape, "error", got=per_device[0][inst],
                                note=f"{against}: {type(e).__name__}: {e}"))
            continue
        templates[inst] = value
        stacked = _has_manual(value)
        got = _operand_value(value, per_device, inst, positions)
        rows.append(_compare(inst, _unwrap(got), _unwrap(value), rtol, atol, max_indices, stacked))
    return DiffReport(module, rows, backend, against, error)


def diff_instruction(inst, operand_values, value, against="jax", module=None, rtol=None, atol=None,
                     max_indices=20):
    """One instruction, anywhere in a module (a loop body, a branch, a fusion): ``against``
    (``"jax"``: XLA) evaluates ``inst`` on ``operand_values`` (what the reference gave it,
    from a trace record) and its value is compared with the reference's ``value``, as
    ``diff`` compares the entry's instructions.  A ``DiffRow`` (status "error" when XLA
    could not evaluate it); single-device modules only."""
    if against != "jax":
        raise ValueError(f"diff_instruction: against={against!r}; the oracle is 'jax' (real XLA through JAX)")
    from .executors import jax_lowering as jl
    try:
        want = jl.eval_instruction(inst, list(operand_values), jl.LoweringContext(module))
    except Exception as e:  # noqa: BLE001 - reported in the row
        return DiffRow(inst.name, inst.opcode, inst.shape, "error", got=value, note=f"{against}: {type(e).__name__}: {e}")
    return _compare(inst, value, _unwrap(want), rtol, atol, max_indices, False)


def _plain_template(value):
    if isinstance(value, (tuple, list)):
        return tuple(_plain_template(v) for v in value)
    return None


def _has_manual(value):
    from .executors.jax_lowering import Manual
    if isinstance(value, Manual):
        return True
    return isinstance(value, tuple) and any(_has_manual(v) for v in value)


def _unwrap(value):
    from .executors.jax_lowering import Manual
    if isinstance(value, Manual):
        return value.data
    if isinstance(value, tuple):
        return tuple(_unwrap(v) for v in value)
    return value


__all__ = ["diff", "diff_instruction", "DiffReport", "DiffRow", "compare_arrays", "tolerance"]
