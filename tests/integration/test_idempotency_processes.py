"""Idempotency ledger (seed §2.2) across processes: concurrent duplicates through the real
subprocess executor, a restart or a replayed branch, a reopened toolbox, a dead owner's claim
taken over, duplicates in two processes. The in-process cases: tests/unit/test_idempotency.py."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.integration.test_executors_subprocess import write_helpers
from tools.executors import make_executor
from tools.idempotency import LEDGER_FILE, IdempotencyLedger
from tools.registry import ToolRegistry
from tools.spec import ToolSpec

pytestmark = pytest.mark.slow  # real worker processes

ROOT = Path(__file__).resolve().parents[2]

APPEND = ToolSpec(
    name="append_line",
    description="Appends one line to a file in the data directory (a side effect, for the tests).",
    parameters={
        "type": "object",
        "properties": {"path": {"type": "string"}, "line": {"type": "string"}},
        "required": ["path", "line"],
        "additionalProperties": False,
    },
    side_effect=True,
)


def registry_with_append(ledger: IdempotencyLedger, executor) -> ToolRegistry:
    reg = ToolRegistry(ledger=ledger)

    async def runner(args, request_id):
        return await executor.run("exec_helpers:append_line", args, timeout_s=10, request_id=request_id)

    reg.register(APPEND, runner)
    return reg


@pytest.fixture
def setup(tmp_path: Path):
    helpers = write_helpers(tmp_path)
    data = tmp_path / "data"
    data.mkdir()
    # the helper tool appends to a file in the data directory: these tests are about the ledger,
    # so the executor lets it write there (the workspace rule: tests/integration/test_sandbox_defaults.py)
    return data, make_executor("subprocess", data, extra_paths=(str(helpers),), workspace_only=False)


async def test_1000_concurrent_duplicates_write_one_line(setup):
    data, executor = setup
    ledger = IdempotencyLedger.in_data_dir(data)
    reg = registry_with_append(ledger, executor)
    try:
        outcomes = await asyncio.gather(
            *(reg.call("append_line", {"path": "out.txt", "line": "paid"}, "req-42") for _ in range(1000))
        )
    finally:
        await ledger.aclose()
    assert (data / "out.txt").read_text() == "paid\n"
    assert all(o.status == "ok" and o.content == {"appended": "paid"} for o in outcomes)
    assert sum(not o.replayed for o in outcomes) == 1


async def test_a_restart_or_replayed_branch_gets_the_recorded_result(setup):
    data, executor = setup
    first_ledger = IdempotencyLedger.in_data_dir(data)
    reg = registry_with_append(first_ledger, executor)
    first = await reg.call("append_line", {"path": "out.txt", "line": "one"}, "call_abc")
    await first_ledger.aclose()

    second_ledger = IdempotencyLedger.in_data_dir(data)  # a new process / a forked branch
    reg2 = registry_with_append(second_ledger, executor)
    try:
        replays = await asyncio.gather(
            *(reg2.call("append_line", {"path": "out.txt", "line": "one"}, "call_abc") for _ in range(50))
        )
        other = await reg2.call("append_line", {"path": "out.txt", "line": "two"}, "call_def")
    finally:
        await second_ledger.aclose()
    assert all(r.replayed and r.content == first.content for r in replays)
    assert other.status == "ok" and not other.replayed
    assert (data / "out.txt").read_text() == "one\ntwo\n"


async def test_toolbox_reopened_on_the_same_data_dir_replays(setup, tmp_path):
    """Two Toolboxes on one data_dir (a restart): 1,000 duplicates, then more in the second."""
    from tools.builtin.catalog import executor_runner
    from tools.toolbox import Toolbox

    data, executor = setup
    cfg = tmp_path / "mcp.json"
    cfg.write_text('{"mcpServers": {}}')
    results = []
    for _ in range(2):
        tb = await Toolbox.open(data, cfg, executor=executor)
        try:
            tb.registry.register(APPEND, executor_runner(tb.executor, "exec_helpers:append_line", 10))
            outs = await asyncio.gather(
                *(tb.registry.call("append_line", {"path": "toolbox.txt", "line": "x"}, "rid-1") for _ in range(1000))
            )
            assert {o.status for o in outs} == {"ok"}
            results.append(outs[0].content)
        finally:
            await tb.aclose()
    assert results[0] == results[1] == {"appended": "x"}
    assert (data / "toolbox.txt").read_text() == "x\n"
    assert (data / LEDGER_FILE).exists()


async def test_dead_owner_claim_is_taken_over(tmp_path):
    path = tmp_path / "l.db"
    ledger = IdempotencyLedger(path)
    await ledger.count()  # creates the table
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=False
    )
    con = sqlite3.connect(path)
    con.execute(
        "INSERT INTO tool_requests (tool, request_id, state, owner, created) VALUES ('t', 'r', 'running', ?, 0)",
        (f"{socket.gethostname()}:{int(dead.stdout)}:x",),
    )
    con.commit()
    con.close()

    async def run():
        return {"v": "after crash"}

    try:
        assert await ledger.run_once("t", "r", run) == ({"v": "after crash"}, False)
    finally:
        await ledger.aclose()


CROSS_PROCESS = textwrap.dedent("""
    import asyncio, json, sys, time
    from pathlib import Path
    from tools.idempotency import IdempotencyLedger

    async def main(db, out, who):
        ledger = IdempotencyLedger(Path(db))
        async def side_effect():
            with open(out, "a") as f:
                f.write(who + "\\n")
            await asyncio.sleep(0.5)
            return {"by": who}
        record, replayed = await ledger.run_once("append", "same-id", side_effect)
        await ledger.aclose()
        print(json.dumps({"record": record, "replayed": replayed}))

    asyncio.run(main(*sys.argv[1:]))
""")


def test_concurrent_duplicates_in_two_processes_run_once(tmp_path):
    script = tmp_path / "dup.py"
    script.write_text(CROSS_PROCESS)
    db, out = tmp_path / "ledger.db", tmp_path / "out.txt"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(db), str(out), f"p{i}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for i in range(4)
    ]
    outputs = [p.communicate(timeout=60) for p in procs]
    for p, (stdout, stderr) in zip(procs, outputs):
        assert p.returncode == 0 and stdout.strip(), stderr
    replies = [json.loads(stdout.strip().splitlines()[-1]) for stdout, _ in outputs]
    assert len(out.read_text().splitlines()) == 1
    assert len({json.dumps(r["record"]) for r in replies}) == 1
    assert sum(not r["replayed"] for r in replies) == 1
