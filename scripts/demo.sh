#!/usr/bin/env bash
# Sets up .venv (scripts/setup.sh) and runs the flagship task of seed §5.1 on the embedded
# local model: summarise last month's sales into a report, post it to the team chat (an MCP
# server), schedule a monthly reminder. Extra arguments go to `hermes run`.
#
# The data: the database named by HERMES_DATABASE when you set it; otherwise a generated demo
# sales database, .hermes/demo/sales.db (created here when missing, never by Hermes itself).
#
# Exit codes: those of `hermes run` (0 finished, 1 error, 2 model endpoint unreachable, 3 the
# agent asked a question, 130 Ctrl-C), except that a run which stopped before finishing the task
# (a stop reason: round cap, no progress, a setting no call can fix, ...) exits 4 here, not 0:
# the demo did not do what it was asked. The stop reason is read from the thread's workbench
# (`hermes session show THREAD --json`) and printed.
set -euo pipefail
cd "$(dirname "$0")/.."
EXIT_STOPPED=4
bash scripts/setup.sh
if [ -z "${HERMES_DATABASE:-}" ]; then
    demo_db=".hermes/demo/sales.db"
    .venv/bin/python -m tools.builtin.demo_db "$demo_db"
    export HERMES_DATABASE="$PWD/$demo_db"
fi
echo "database: $HERMES_DATABASE"

# The thread and data directory the run uses: the caller's --thread / --data-dir when given
# (either form, --opt VALUE or --opt=VALUE), else a new thread here, so its stop reason can be read.
args=("$@")
thread=""
data_dir=()
for ((i = 0; i < ${#args[@]}; i++)); do
    case "${args[i]}" in
        --thread) thread="${args[i + 1]:-}" ;;
        --thread=*) thread="${args[i]#--thread=}" ;;
        --data-dir) data_dir=(--data-dir "${args[i + 1]:-}") ;;
        --data-dir=*) data_dir=(--data-dir "${args[i]#--data-dir=}") ;;
    esac
done
new_thread=()
if [ -z "$thread" ]; then
    thread="demo-$(date +%Y%m%d-%H%M%S)-$$"
    new_thread=(--thread "$thread")
fi

rc=0
.venv/bin/hermes run "Summarise last month's sales into an analysis report, post it to the project group, and remind me every month." \
    ${new_thread[@]+"${new_thread[@]}"} "$@" || rc=$?
if [ "$rc" -ne 0 ]; then
    exit "$rc"
fi

if ! workbench=$(.venv/bin/hermes session show "$thread" ${data_dir[@]+"${data_dir[@]}"} --last 1 --json); then
    echo "demo: the run exited 0 but its thread $thread could not be read back to check that it finished" >&2
    exit 1
fi
stop=$(printf '%s' "$workbench" | .venv/bin/python -c 'import json, sys; print(json.load(sys.stdin).get("stop_reason") or "")') || {
    echo "demo: could not read the stop reason of thread $thread" >&2
    exit 1
}
if [ -n "$stop" ]; then
    echo "demo: the run stopped before finishing the task: $stop" >&2
    echo "demo: exit $EXIT_STOPPED; see \`.venv/bin/hermes session show $thread\`, or continue with --thread $thread" >&2
    exit "$EXIT_STOPPED"
fi
