#!/usr/bin/env bash
# The test command: makes .venv if needed, installs the package with its test extras,
# then runs the whole test suite (unit tests, HLO corpus, notebooks).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
.venv/bin/python -m pip install -q -e ".[test]"
exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
