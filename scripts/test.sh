#!/usr/bin/env bash
# Sets up .venv (scripts/setup.sh), checks lint, types and the import rules of docs/DESIGN.md §7
# on graph/ nodes/ tools/ memory/ (ruff check and format, mypy, lint-imports: configured in pyproject.toml;
# each stops the run on a finding), then runs the whole test suite, slow tests included (real
# embedded model, real MCP stdio servers, real `langgraph dev`), in two pytest runs: tests/unit on
# 2 pytest-xdist workers (in-process tests: no socket, no process, no shared path), then the rest
# (tests/integration: servers and ports) in one process. Arguments go to pytest: options (-k, -x,
# -v, ...) to both runs; if any argument names a path (a file or folder that exists, or
# path::test), exactly what was asked runs, in one process, as `pytest "$@"`. The exit status is
# non-zero if either run fails; a run that selects no test (pytest's 5) counts as a failure only
# if the other selects none either.
set -euo pipefail
cd "$(dirname "$0")/.."
# every bundled model: the default one's flagship test, the smallest for the pipeline tests
# (tests/integration/conftest.py), each model's serving test
export HERMES_EMBEDDED_MODELS="${HERMES_EMBEDDED_MODELS:-all}"
bash scripts/setup.sh
echo "hermes: ruff check, ruff format --check"
.venv/bin/ruff check graph nodes tools memory
.venv/bin/ruff format --check graph nodes tools memory
echo "hermes: mypy"
.venv/bin/mypy
echo "hermes: lint-imports"
.venv/bin/lint-imports --no-cache --no-logo
PYTEST=(.venv/bin/python -m pytest -q -p no:cacheprovider)
for arg in "$@"; do
  if [[ $arg != -* && -e ${arg%%::*} ]]; then
    exec "${PYTEST[@]}" "$@"
  fi
done
echo "hermes: pytest tests/unit (2 workers)"
unit=0
"${PYTEST[@]}" -n 2 "$@" tests/unit || unit=$?
echo "hermes: pytest, all but tests/unit (one process)"
rest=0
"${PYTEST[@]}" --ignore=tests/unit "$@" || rest=$?
if [ "$unit" = 5 ] && [ "$rest" = 5 ]; then exit 5; fi
[ "$unit" = 5 ] && unit=0
[ "$rest" = 5 ] && rest=0
if [ "$unit" != 0 ]; then exit "$unit"; fi
exit "$rest"
