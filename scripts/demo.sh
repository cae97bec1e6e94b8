#!/usr/bin/env bash
# Sets up .venv (scripts/setup.sh) and runs the flagship task of seed §5.1 on the embedded
# local model: query last month's sales, write a report, post it to the team chat (an MCP
# server), schedule a monthly reminder. Extra arguments go to `hermes run`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/hermes run "Summarise last month's sales into an analysis report, post it to the project group, and remind me every month." "$@"
