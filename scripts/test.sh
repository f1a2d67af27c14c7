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
# versions: constraints.txt, the one place they are pinned (binder/ installs through it too)
.venv/bin/python -m pip install -q -c constraints.txt -e ".[test]"
# Graphviz's dot draws the graphs (tests/test_graph.py): installed here when we can
if ! command -v dot >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing Graphviz (apt-get install graphviz) for the graph tests ..."
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq graphviz; } >/dev/null 2>&1 \
      || echo "note: could not install Graphviz; tests that draw graphs will be skipped"
  else
    echo "note: Graphviz's dot is not installed; tests that draw graphs will be skipped." \
         "Install it: apt-get install graphviz | brew install graphviz | conda install -c conda-forge graphviz"
  fi
fi
# Debian's Chromium is the browser of the real-browser tests (tests/e2e/, driven by
# Playwright; never a browser download): installed here when we can, else those tests skip
if [ ! -x /usr/bin/chromium ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing Chromium (apt-get install chromium) for the browser tests ..."
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } >/dev/null 2>&1 \
      || echo "note: could not install Chromium; the browser tests (tests/e2e) will be skipped"
  else
    echo "note: /usr/bin/chromium is not installed; the browser tests (tests/e2e) will be skipped." \
         "Install it: apt-get install chromium"
  fi
fi
# one pytest worker per core (pytest-xdist; at most 4: each may hold a few GB of compiled
# kernels), a test function's cases on one worker (tests/conftest.py); XLA_EXPLORER_TEST_WORKERS=0 runs in-process
workers=${XLA_EXPLORER_TEST_WORKERS:-$(.venv/bin/python -c "import os; print(min(4, len(os.sched_getaffinity(0))))")}
exec .venv/bin/python -m pytest -q -p no:cacheprovider -n "$workers" --dist loadgroup "$@"
