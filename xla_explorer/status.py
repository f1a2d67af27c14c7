"""The op x layer status table, generated from the registries (never written by hand)."""
import sys
from importlib import import_module

from .ops import registry

LAYERS = ("shape rule", "reference", "index map", "cpu", "cuda", "jax", "graph", "animation", "widget",
          "exercise")

#: the modules whose import registers each layer's table (optional dependencies: numba,
#: numba-cuda, ipywidgets; a layer whose module cannot be imported shows as "-")
_LAYER_MODULES = (".render", ".animate", ".executors.jax_lowering", ".widgets", ".exercises")


class StatusTable:
    def __init__(self, rows):
        #: [(opcode, api name, family, {layer: "yes" | "-" | note})]
        self.rows = rows

    def cell(self, opcode, layer):
        for op, _, _, cells in self.rows:
            if op == opcode:
                return cells[layer]
        raise KeyError(opcode)

    def __str__(self):
        head = ["opcode", "API", "family", *LAYERS]
        body = [[op, name, fam, *[cells[layer] for layer in LAYERS]] for op, name, fam, cells in self.rows]
        widths = [max(len(str(r[i])) for r in [head] + body) for i in range(len(head))]
        fmt = lambda r: "  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
        lines = [fmt(head), fmt(["-" * w for w in widths])] + [fmt(r) for r in body]
        done = {layer: sum(1 for *_, c in self.rows if c[layer] != "-") for layer in LAYERS}
        lines.append("")
        lines.append(f"{len(self.rows)} ops; " + ", ".join(f"{layer}: {n}" for layer, n in done.items()))
        return "\n".join(lines)

    def _repr_html_(self):
        head = "".join(f"<th>{h}</th>" for h in ("opcode", "API", "family", *LAYERS))
        rows = []
        for op, name, fam, cells in self.rows:
            tds = "".join(f"<td style='text-align:center'>{'✓' if cells[layer] == 'yes' else cells[layer]}</td>"
                          for layer in LAYERS)
            rows.append(f"<tr><td><code>{op}</code></td><td>{name}</td><td>{fam}</td>{tds}</tr>")
        return f"<table><tr>{head}</tr>{''.join(rows)}</table>"


def _layer_cell(layer, opcode):
    impl = registry.LAYERS.get(layer, {}).get(opcode)
    if impl is None and layer in ("cpu", "cuda") and registry.LAYERS.get(layer):
        from .executors.numba_executor import handled_without_kernel
        return handled_without_kernel(opcode) or "-"
    if impl is None:
        return "-"
    note = getattr(impl, "status_note", None)
    return note or "yes"


def _load_layers():
    # by module name: the package attribute `animate` is the function until the subpackage is imported
    for name in _LAYER_MODULES:
        try:
            import_module(__package__ + name)
        except ImportError:
            pass
    try:
        from .executors import cpu
        cpu.load()
        from .executors import cuda
        cuda._load()
    except ImportError:  # numba not installed: the cpu and cuda columns stay empty
        pass


def build_table():
    _load_layers()
    rows = []
    for opcode, op in sorted(registry.all_ops().items(), key=lambda kv: (kv[1].family, kv[0])):
        cells = {
            "shape rule": "yes",
            "reference": "yes" if op.reference is not None or opcode == "parameter" else "-",
            "index map": "yes" if op.index_map is not None else "-",
        }
        for layer in LAYERS[3:]:
            cells[layer] = _layer_cell(layer, opcode)
        rows.append((opcode, op.name, op.family, cells))
    return StatusTable(rows)


def status_table(file=None):
    table = build_table()
    print(table, file=file or sys.stdout)
    return table
