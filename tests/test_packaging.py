"""The core imports nothing heavy; the status table is generated from the registries."""
import subprocess
import sys

import xla_explorer as xe
from xla_explorer.ops import registry


def test_core_import_pulls_in_no_optional_dependency():
    code = ("import sys, xla_explorer as xe, numpy as np; xe.parse_hlo('ENTRY e {\\n p = f32[2] parameter(0)\\n}'); "
            "xe.Pad(np.ones((2, 2), np.float32), np.float32(0), padding_config=[(1, 1, 1), (0, 0, 0)]); "
            "heavy = [m for m in ('numba', 'matplotlib', 'graphviz', 'ipywidgets', 'jax', 'scipy') if m in sys.modules]; "
            "print(heavy); sys.exit(1 if heavy else 0)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_status_table_is_generated_from_the_registries(capsys):
    table = xe.status_table()
    printed = capsys.readouterr().out
    opcodes = set(registry.all_ops())
    assert {row[0] for row in table.rows} == opcodes
    for opcode in ("gather", "scatter", "pad", "reduce-window", "while", "add"):
        assert opcode in printed
        assert table.cell(opcode, "shape rule") == "yes"
        assert table.cell(opcode, "reference") == "yes"
    for opcode in ("gather", "scatter", "pad", "reduce-window", "slice", "transpose"):
        assert table.cell(opcode, "index map") == "yes"
    assert "<table>" in table._repr_html_()


def test_every_registered_op_has_a_public_function():
    for opcode, op in registry.all_ops().items():
        if opcode in ("parameter", "constant", "fusion"):
            continue
        assert hasattr(xe, op.name), f"{opcode}: no xla_explorer.{op.name}"


def test_every_subpackage_is_listed_in_pyproject():
    """pyproject lists packages explicitly (widgets/ maps to xla_explorer.widgets): none forgotten."""
    import pathlib
    import tomllib
    root = pathlib.Path(__file__).resolve().parents[1]
    listed = set(tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(root).parts) for p in (root / "xla_explorer").rglob("__init__.py")}
    found.add("xla_explorer.widgets")
    assert found <= listed, f"not in pyproject.toml's packages: {sorted(found - listed)}"
