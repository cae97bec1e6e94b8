#!/usr/bin/env bash
# Sets up .venv (scripts/setup.sh), checks lint, types and the import rules of docs/DESIGN.md §7
# on graph/ nodes/ tools/ memory/ base/ and `langgraph validate` on langgraph.json (ruff check and format also on evals/ and tests/;
# mypy: strict on graph/ nodes/ tools/ memory/ base/, evals/ and tests/ checked, not strict; mypy, lint-imports: configured in pyproject.toml;
# each stops the run on a finding), then runs the whole test suite, slow tests included (real
# embedded model, real MCP stdio servers, real `langgraph dev`) in one pytest process. Arguments
# go to pytest. (`pytest tests/unit -n 2` runs the unit tier on two pytest-xdist workers; measured
# slower than one process on this shared 2-core machine — 52.7 vs 42.2 s at load 2-3 — so the
# script does not use it.)
set -euo pipefail
cd "$(dirname "$0")/.."
# every bundled model: the default one's flagship test, the smallest for the pipeline tests
# (tests/integration/conftest.py), each model's serving test
export HERMES_EMBEDDED_MODELS="${HERMES_EMBEDDED_MODELS:-all}"
bash scripts/setup.sh
echo "hermes: ruff check, ruff format --check"
.venv/bin/ruff check graph nodes tools memory base evals tests
.venv/bin/ruff format --check graph nodes tools memory base evals tests
echo "hermes: mypy"
.venv/bin/mypy
echo "hermes: lint-imports"
.venv/bin/lint-imports --no-cache --no-logo
echo "hermes: langgraph validate"
.venv/bin/langgraph validate -c langgraph.json
exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
