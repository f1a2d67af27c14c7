#!/usr/bin/env bash
# The launch command: makes .venv if needed, installs the package with its notebook
# extras, and opens JupyterLab on the tour notebook.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q -e ".[notebook]"
exec .venv/bin/jupyter lab notebooks/tour.ipynb "$@"
