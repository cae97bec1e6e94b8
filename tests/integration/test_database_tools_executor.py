"""The plumbing that brings the user's database to the worker process (DESIGN §0): Context →
toolbox → executor → injected ``database`` argument + read access, the `hermes demo-db`
command in a child process, a runaway query under a tight tool timeout. Direct calls of the
data tools: tests/unit/test_database_tools.py."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import DEMO_END_MONTH as END
from tests.unit.test_database_tools import digest
from tools.builtin.demo_db import generate_sales_db
from tools.errors import ToolFailed
from tools.executors import make_executor

pytestmark = pytest.mark.slow  # real worker processes

ROOT = Path(__file__).resolve().parents[2]


# -- describe_database --------------------------------------------------------------------------


# -- query_database: read-only, bounded ---------------------------------------------------------


# -- generate_report -------------------------------------------------------------------------------


# -- bad settings: clear errors, nothing created -----------------------------------------------------


# -- the second schema spans several years ------------------------------------------------------------


def test_demo_db_command_creates_the_file_only_when_missing(tmp_path):
    target = tmp_path / "demo" / "sales.db"
    cmd = [sys.executable, "-m", "tools.builtin.demo_db", str(target)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    first = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=60, check=False)
    assert first.returncode == 0 and "generated" in first.stdout and target.exists()
    before = digest(target)
    again = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=60, check=False)
    assert again.returncode == 0 and "kept existing" in again.stdout and digest(target) == before


# -- plumbing: Context → toolbox → executor → worker ----------------------------------------------

HELPER = textwrap.dedent("""
    from pathlib import Path

    def seen(database, data_dir):
        return {"database": database, "data_dir": str(data_dir)}

    def read_file(path):
        return Path(path).read_text()
""")


@pytest.fixture
def helpers(tmp_path: Path) -> Path:
    d = tmp_path / "helpers"
    d.mkdir()
    (d / "db_helpers.py").write_text(HELPER)
    return d


async def test_the_worker_gets_the_configured_database_never_the_models(dbs, tmp_path, helpers):
    data = tmp_path / "data"
    data.mkdir()
    ex = make_executor("subprocess", data, extra_paths=(str(helpers),), database=str(dbs["sales"]))
    out = await ex.run("db_helpers:seen", {"database": "/etc/passwd", "data_dir": "/"}, timeout_s=10, request_id="r")
    assert out == {"database": str(dbs["sales"]), "data_dir": str(data)}
    res = await ex.run(
        "tools.builtin.database:query_database",
        {"sql": "SELECT COUNT(*) FROM regions", "database": str(dbs["invoices"])},
        timeout_s=10,
        request_id="q",
    )
    assert res["rows"] == [[5]]  # the configured sales DB, not the model's choice


async def test_the_worker_reads_the_database_file_but_not_its_neighbours(tmp_path, helpers):
    user = tmp_path / "user"
    db = generate_sales_db(user / "shop.db", months=1, end_month=END)
    (user / "private.txt").write_text("do not read")
    data = tmp_path / "data"
    data.mkdir()
    ex = make_executor("subprocess", data, extra_paths=(str(helpers),), database=str(db))
    assert (await ex.run("tools.builtin.database:describe_database", {}, timeout_s=10, request_id="d"))[
        "table_count"
    ] == 6  # 5 tables + the sales_lines view
    with pytest.raises(ToolFailed, match="PermissionError"):
        await ex.run("db_helpers:read_file", {"path": str(user / "private.txt")}, timeout_s=10, request_id="p")
    with pytest.raises(ToolFailed, match="PermissionError"):
        await ex.run("db_helpers:read_file", {"path": str(db.parent / "shop.db-journal")}, timeout_s=10, request_id="j")


async def test_a_wal_database_with_pending_commits_is_read_in_full(tmp_path):
    db = generate_sales_db(tmp_path / "user" / "wal.db", months=1, end_month=END)
    writer = sqlite3.connect(db)
    try:
        writer.execute("PRAGMA journal_mode=WAL")
        writer.execute("PRAGMA wal_autocheckpoint=0")
        writer.execute("INSERT INTO regions VALUES (6, 'Moon')")
        writer.commit()
        assert Path(str(db) + "-wal").stat().st_size > 0
        data = tmp_path / "data"
        data.mkdir()
        ex = make_executor("subprocess", data, database=str(db))
        out = await ex.run(
            "tools.builtin.database:query_database",
            {"sql": "SELECT COUNT(*) FROM regions"},
            timeout_s=10,
            request_id="w",
        )
        assert out["rows"] == [[6]]
    finally:
        writer.close()
    # after the last writer closed (no -wal/-shm left) it still opens read-only
    assert not Path(str(db) + "-shm").exists()
    out = await ex.run(
        "tools.builtin.database:query_database", {"sql": "SELECT COUNT(*) FROM regions"}, timeout_s=10, request_id="w2"
    )
    assert out["rows"] == [[6]]


async def test_toolbox_resolves_the_setting_and_never_generates_a_database(dbs, tmp_path, monkeypatch):
    from tools.toolbox import Toolbox

    monkeypatch.delenv("HERMES_DATABASE", raising=False)
    monkeypatch.chdir(dbs["invoices"].parent.parent)
    cfg = tmp_path / "mcp.json"
    cfg.write_text('{"mcpServers": {}}')
    data = tmp_path / "data"
    tb = await Toolbox.open(data, cfg, database="books/ledger.sqlite")
    try:
        assert tb.database == str(dbs["invoices"])
        out = await tb.registry.call("describe_database", {}, "d")
        assert out.status == "ok" and {t["name"] for t in out.content["tables"]} >= {"invoices", "clients"}
    finally:
        await tb.aclose()
    tb = await Toolbox.open(data, cfg)  # nothing configured: the tools stay and say how to set one
    try:
        assert tb.database == "" and {"describe_database", "query_database", "generate_report"} <= set(
            tb.registry.names()
        )
        out = await tb.registry.call("query_database", {"sql": "SELECT 1"}, "n")
        assert (
            out.status == "error"
            and out.error_kind == "configuration"
            and "no database configured" in out.error
            and "HERMES_DATABASE" in out.error
        )
    finally:
        await tb.aclose()
    assert not list(data.rglob("*sales*")) and not list(data.rglob("*.md"))


async def test_under_a_tight_tool_timeout_a_runaway_query_still_ends_with_a_clear_error(dbs, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    ex = make_executor("subprocess", data, database=str(dbs["sales"]))
    with pytest.raises(ToolFailed, match=r"DatabaseError: query stopped after 2\.4 s"):
        await ex.run(
            "tools.builtin.database:query_database",
            {"sql": "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT MAX(i) FROM n"},
            timeout_s=4,
            request_id="t",
        )


@pytest.mark.parametrize(
    "period",
    ["last month", "le mois dernier", "上个月", "2026-13", "11/2026"],
)
async def test_a_refused_period_reaches_the_graph_as_a_refused_value_not_a_data_failure(dbs, tmp_path, period):
    """Through the real worker: a period the report refuses (relative, malformed) is error kind
    "invalid_value" (its message says what to send), not "tool_error" (which makes the graph
    look the schema up before the retry: measured, the 1.5B model then sent 'last month' again)."""
    from tools.toolbox import Toolbox

    cfg = tmp_path / "mcp.json"
    cfg.write_text('{"mcpServers": {}}')
    tb = await Toolbox.open(tmp_path / "data", cfg, database=str(dbs["sales"]))
    try:
        queries = [{"label": "Orders", "sql": "SELECT COUNT(*) FROM orders"}]
        out = await tb.registry.call("generate_report", {"title": "Sales", "queries": queries, "period": period}, "p")
        assert out.status == "error" and out.error_kind == "invalid_value", out
        assert "period" in out.error
        # an SQL error stays a failure in the tool (the schema helps there)
        bad = [{"label": "Orders", "sql": "SELECT nope FROM orders"}]
        out = await tb.registry.call("generate_report", {"title": "Sales", "queries": bad}, "q")
        assert out.status == "error" and out.error_kind == "tool_error", out
    finally:
        await tb.aclose()
    assert not list((tmp_path / "data").rglob("*.md"))
