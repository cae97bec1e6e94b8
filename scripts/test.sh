#!/usr/bin/env bash
# Sets up .venv (scripts/setup.sh) and runs the whole test suite, slow tests included
# (real embedded model, real MCP stdio servers, real `langgraph dev`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
