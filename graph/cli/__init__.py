"""``hermes`` command line: run the agent graph with the SQLite checkpointer.

    hermes run "<task>" [--thread ID] [--model NAME --base-url URL] [--data-dir DIR]
    hermes chat [--thread ID]
    hermes resume --thread ID "<answer>"       (answer a question the agent asked: interrupt)
    hermes tools list [--json] | lint
    hermes session list [--json] | show THREAD [--last N] [--json]
    hermes branch list THREAD [--json] | show THREAD [CHECKPOINT] [--compact]
    hermes branch rollback THREAD CHECKPOINT | switch THREAD HEAD | fork THREAD CHECKPOINT "<task>"
    hermes reminders list | due | run [--now ISO8601]      hermes serve [--interval 60]
    hermes eval tools|memory|tasks|mcp|sessions [--model M --base-url URL] [--limit N] [--k K]
    hermes dev [--port 2024] [langgraph dev options]   (a taken port is an error, never a move)
    hermes migrate --to postgres [--data-dir D] [--postgres-url URL]   (graph.migration)

Progress is printed node by node while the graph runs (LangGraph ``stream_mode="updates"``),
then the answer and a summary: thread id, checkpoint id, tools called, tokens in/out, memory
writes, stop reason. Exit codes: 0 the run finished (answered, or stopped with a stated reason),
1 an error (message says what to do), 2 the model endpoint could not be reached or started,
3 the agent asked a question (missing data, LangGraph ``interrupt``) and no terminal was there
to answer it — answer with ``hermes resume``, 130 interrupted by Ctrl-C (checkpoints kept).
One thread runs in one process at a time (a lock file under ``<data_dir>/locks``).

Every turn is mirrored to ``<data_dir>/mirror/<thread>.jsonl`` (``graph.mirror``); a thread whose
checkpoint cannot be read is rebuilt from that mirror before the turn, with a notice saying what
was lost (``graph.recovery``). Branch commands: ``graph.branches``. CHECKPOINT arguments accept
any unique part of a checkpoint id (the 8-character short ids shown by ``branch show``).

Modules: ``common`` (the Typer app, settings from options, exit codes), ``turns`` (run, resume,
chat), ``sessions`` (session, branch), ``registry`` (tools), ``reminders`` (reminders, serve),
``render`` (everything printed), ``stdin`` (reading the terminal), ``migrate`` (a data
directory into PostgreSQL: ``graph.migration``). ``session list|show`` and
``branch list|show`` read the checkpoint saver alone (``graph.checkpoint_reader``) and build no
graph. Turns run through ``graph.runner``.

Start-up: these modules import only typer, rich and the standard library at the top; the graph,
the runner, the model client, the checkpointer, the toolbox, the memory service (LanceDB, the
embedder) and ``evals`` are imported inside the commands that use them, so ``hermes --help`` and
the listings do not pay for them (``tests/unit/test_cli_startup.py``). Tables go through
``render.print_table``: nothing is cut to "…" at 80 columns (one block per row when a table does
not fit); every list command takes ``--json``.
"""

# Each module registers its commands on ``app``; the import order is the order of ``--help``.
from graph.cli import turns  # noqa: F401  (run, resume, chat)
from graph.cli.common import app

# isort: split
from graph.cli import sessions  # noqa: F401  (session, branch)

# isort: split
from graph.cli import registry  # noqa: F401  (tools)

# isort: split
from graph.cli import reminders  # noqa: F401  (reminders, serve)

# isort: split
from graph.cli import memory  # noqa: F401  (memory list|search|show|forget|consolidate)

# isort: split
from graph.cli import mcp  # noqa: F401  (mcp list|tools|call|test)

# isort: split
from graph.cli import evals  # noqa: F401  (eval SUITE)

# isort: split
from graph.cli import dev  # noqa: F401  (dev: langgraph dev on exactly its port)

# isort: split
from graph.cli import migrate  # noqa: F401  (migrate --to postgres)

__all__ = ["app"]
