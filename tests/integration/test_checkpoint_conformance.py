"""LangGraph's official checkpointer conformance suite (PyPI ``langgraph-checkpoint-conformance``
0.0.2; issue 24) against every saver Hermes configures, each opened the way the product opens it:

* ``sqlite-cli``: ``open_checkpointer(<data_dir>/checkpoints.sqlite)`` — the CLI and the runner
  (``HermesSqliteSaver`` without recovery inside the saver);
* ``sqlite-server``: ``server_checkpointer()`` — the ``langgraph.json`` checkpointer of
  ``langgraph dev`` (``HermesSqliteSaver`` with the data directory's mirror: recovery on);
* ``postgres-cli`` / ``postgres-server``: the same two entry points with ``HERMES_POSTGRES_URL``
  on a real PostgreSQL (``HermesPostgresSaver``).

Each must pass every base capability (put, put_writes, get_tuple, list, delete_thread) and every
extended capability it implements; ``delete_for_runs`` and ``prune`` must be implemented (the
LangGraph server calls them for ``multitask_strategy="rollback"`` and for thread TTL / history
pruning). ``copy_thread`` is not implemented by Hermes's savers: the server copies a thread
through its generic ``aput``/``aput_writes`` fallback.
"""

from __future__ import annotations

import itertools

import pytest
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.report import ProgressCallbacks

from graph.checkpoints import checkpoints_file, open_checkpointer, server_checkpointer

pytestmark = pytest.mark.slow  # the postgres cases start PostgreSQL; ~150 checks per saver

SAVERS = ["sqlite-cli", "sqlite-server", "postgres-cli", "postgres-server"]


@pytest.mark.parametrize("which", SAVERS)
async def test_every_configured_saver_passes_the_conformance_suite(which, tmp_path, monkeypatch, request, capsys):
    backend, entry = which.split("-")
    if backend == "postgres":
        monkeypatch.setenv("HERMES_POSTGRES_URL", request.getfixturevalue("postgres_url"))
    else:
        monkeypatch.delenv("HERMES_POSTGRES_URL", raising=False)
    counter = itertools.count()

    @checkpointer_test(name=which)
    async def saver():
        # a fresh data directory per capability suite, as the suite asks (the database is shared:
        # the suite's thread ids are new uuids)
        data_dir = tmp_path / f"data-{next(counter)}"
        monkeypatch.setenv("HERMES_DATA_DIR", str(data_dir))
        opened = server_checkpointer() if entry == "server" else open_checkpointer(checkpoints_file(data_dir))
        async with opened as s:
            yield s

    report = await validate(saver, progress=ProgressCallbacks.verbose())
    report.print_report()
    printed = capsys.readouterr().out
    failures = {cap: r.failures for cap, r in report.results.items() if r.detected and r.passed is not True}
    assert report.passed_all_base() and not failures, printed
    assert report.results["delete_for_runs"].detected and report.results["prune"].detected, printed
