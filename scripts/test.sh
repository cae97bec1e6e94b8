#!/usr/bin/env bash
# Sets up .venv (scripts/setup.sh), checks lint, types and the import rules of docs/DESIGN.md §7
# on graph/ nodes/ tools/ memory/ (ruff check and format, mypy, lint-imports: configured in pyproject.toml;
# each stops the run on a finding), then runs the whole test suite, slow tests included (real
# embedded model, real MCP stdio servers, real `langgraph dev`). Arguments go to pytest.
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
exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
