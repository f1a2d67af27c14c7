#!/usr/bin/env bash
# The launch command: makes .venv if needed, installs the package with its notebook
# extras (and Graphviz's dot when it can), runs the tour once headless so every kernel
# it uses is compiled into the on-disk cache, then opens JupyterLab on the tour.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
# versions: constraints.txt, the one place they are pinned (binder/ installs through it too)
.venv/bin/python -m pip install -q -c constraints.txt -e ".[notebook]"
if ! command -v dot >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && apt-get install -y -qq graphviz) >/dev/null 2>&1 || true
  else
    echo "note: Graphviz's dot is missing, so graphs will not draw: apt-get install graphviz / brew install graphviz"
  fi
fi
echo "warming the kernel cache (runs the tour once, headless)..."
.venv/bin/jupyter nbconvert --to notebook --execute notebooks/tour.ipynb --output-dir "$(mktemp -d)" \
  >/dev/null 2>&1 || echo "note: the warm-up run of the tour failed; JupyterLab starts anyway"
extra=()
[ "$(id -u)" = 0 ] && extra+=(--allow-root)  # Jupyter refuses root unless told
exec .venv/bin/jupyter lab notebooks/tour.ipynb "${extra[@]}" "$@"
