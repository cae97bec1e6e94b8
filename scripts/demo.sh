#!/usr/bin/env bash
# Sets up .venv (scripts/setup.sh) and runs the flagship task of seed §5.1 on the embedded
# local model: summarise last month's sales into a report, post it to the team chat (an MCP
# server), schedule a monthly reminder. Extra arguments go to `hermes run`.
#
# The data: the database named by HERMES_DATABASE when you set it; otherwise a generated demo
# sales database, .hermes/demo/sales.db (created here when missing, never by Hermes itself).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [ -z "${HERMES_DATABASE:-}" ]; then
    demo_db=".hermes/demo/sales.db"
    .venv/bin/python -m tools.builtin.demo_db "$demo_db"
    export HERMES_DATABASE="$PWD/$demo_db"
fi
echo "database: $HERMES_DATABASE"
exec .venv/bin/hermes run "Summarise last month's sales into an analysis report, post it to the project group, and remind me every month." "$@"
