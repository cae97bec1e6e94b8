"""The idempotency ledger's contract on both stores: the data directory's SQLite file and
PostgreSQL (``HERMES_POSTGRES_URL``, a real server started by the ``postgres_server`` fixture).
Each test runs once per store; "another ledger" is another owner (another process or machine)
on the same store. Then what only PostgreSQL gives: two OS processes with *different* data
directories on one database run a request once (the real team-chat server counts the posts),
and a claimer killed mid-call (kill -9) has its claim handled as on SQLite, on both stores.
The in-process SQLite cases: tests/unit/test_idempotency.py; SQLite across processes:
tests/integration/test_idempotency_processes.py."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tools.errors import ToolTimeout
from tools.idempotency import IdempotencyLedger, LedgerBusy
from tools.ledgers import open_ledger
from tools.registry import ToolRegistry
from tools.spec import ToolSpec

pytestmark = pytest.mark.slow  # a real PostgreSQL; OS processes

ROOT = Path(__file__).resolve().parents[2]
POST = ToolSpec(
    name="post_note",
    description="Post a note (test side effect).",
    parameters={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    side_effect=True,
)


@pytest.fixture(params=["sqlite", "postgres"])
def store(request) -> str:
    """The ledger's store as ``open_ledger`` takes it: "" (the data directory's SQLite file)
    or the URL of a new database on the session's PostgreSQL."""
    return request.getfixturevalue("postgres_url") if request.param == "postgres" else ""


def ledger(store: str, tmp_path: Path, **kw) -> IdempotencyLedger:
    """A new ledger (a new owner) on the test's store; SQLite: the one data directory."""
    return open_ledger(tmp_path / "data", store, **kw)


def counting_registry(led: IdempotencyLedger, effects: list, fail: BaseException | None = None) -> ToolRegistry:
    registry = ToolRegistry(ledger=led)

    async def runner(args, rid):
        effects.append(args["text"])
        await asyncio.sleep(0.05)  # long enough for the other ledger's duplicates to arrive
        if fail is not None:
            raise fail
        return {"posted": args["text"]}

    registry.register(POST, runner)
    return registry


# -- the contract, on both stores --------------------------------------------------------------


async def test_concurrent_duplicates_on_two_ledgers_run_once(store, tmp_path):
    effects: list = []
    a, b = ledger(store, tmp_path), ledger(store, tmp_path)
    ra, rb = counting_registry(a, effects), counting_registry(b, effects)
    try:
        outs = await asyncio.gather(
            *(reg.call("post_note", {"text": "paid"}, "req-1") for _ in range(100) for reg in (ra, rb))
        )
    finally:
        await a.aclose()
        await b.aclose()
    assert effects == ["paid"]
    assert all(o.status == "ok" and o.content == {"posted": "paid"} for o in outs)
    assert sum(not o.replayed for o in outs) == 1


async def test_a_restarted_owner_replays_the_recorded_result(store, tmp_path):
    effects: list = []
    first = ledger(store, tmp_path)
    one = await counting_registry(first, effects).call("post_note", {"text": "x"}, "req-1")
    await first.aclose()
    second = ledger(store, tmp_path)
    try:
        again = await counting_registry(second, effects).call("post_note", {"text": "x"}, "req-1")
        assert await second.state("post_note", "req-1") == "done"
        assert await second.get("post_note", "req-1") == one.model_dump()
    finally:
        await second.aclose()
    assert effects == ["x"] and again.replayed and again.content == one.content


async def test_an_outcome_unknown_is_replayed_to_another_owner_and_never_run_again(store, tmp_path):
    effects: list = []
    first = ledger(store, tmp_path)
    timed_out = await counting_registry(first, effects, fail=ToolTimeout("no answer within 10 s")).call(
        "post_note", {"text": "hi"}, "req-1"
    )
    await first.aclose()
    second = ledger(store, tmp_path)
    try:
        again = await counting_registry(second, effects).call("post_note", {"text": "hi"}, "req-1")
        assert await second.state("post_note", "req-1") == "unknown"
    finally:
        await second.aclose()
    assert timed_out.error_kind == "outcome_unknown" and not timed_out.replayed
    assert again.error_kind == "outcome_unknown" and again.replayed and again.error == timed_out.error
    assert effects == ["hi"]


async def test_a_failed_call_releases_its_claim_for_another_owner(store, tmp_path):
    a, b = ledger(store, tmp_path), ledger(store, tmp_path)

    async def failing():
        return {"status": "error"}

    async def working():
        return {"status": "ok"}

    try:
        first, _ = await a.run_once("t", "r", failing, keep=lambda r: r["status"] == "ok")
        assert await b.state("t", "r") is None
        second, replayed = await b.run_once("t", "r", working, keep=lambda r: r["status"] == "ok")
    finally:
        await a.aclose()
        await b.aclose()
    assert first == {"status": "error"} and second == {"status": "ok"} and not replayed


async def test_a_live_owner_elsewhere_is_waited_for_then_busy_then_replayed(store, tmp_path):
    holder, waiter = ledger(store, tmp_path), ledger(store, tmp_path, wait_s=0.3)
    started, finish = asyncio.Event(), asyncio.Event()

    async def slow():
        started.set()
        await finish.wait()
        return {"v": "first"}

    async def must_not_run():
        raise AssertionError("ran while another owner held the claim")

    try:
        held = asyncio.create_task(holder.run_once("t", "r", slow))
        await started.wait()
        assert await waiter.state("t", "r") == "running"
        with pytest.raises(LedgerBusy, match="still running"):
            await waiter.run_once("t", "r", must_not_run)
        finish.set()
        assert await held == ({"v": "first"}, False)
        assert await waiter.run_once("t", "r", must_not_run) == ({"v": "first"}, True)
    finally:
        await holder.aclose()
        await waiter.aclose()


async def test_expire_count_and_prune(store, tmp_path):
    led = ledger(store, tmp_path)

    async def run():
        return {"n": 1}

    try:
        for tool, rid in (("a", "1"), ("a", "2"), ("b", "1")):
            await led.run_once(tool, rid, run)
        assert (await led.count(), await led.count("a")) == (3, 2)
        assert await led.expire("a") == 2
        assert await led.get("a", "1") is None and await led.get("b", "1") == {"n": 1}
        assert await led.prune(3600) == 0  # finished just now
        assert await led.prune(0) == 1 and await led.count() == 0
        assert (await led.run_once("a", "1", run))[1] is False  # forgotten: runs again
    finally:
        await led.aclose()


# -- across OS processes ------------------------------------------------------------------------

TWO_MACHINES = textwrap.dedent("""
    import asyncio, json, sys
    from pathlib import Path
    from tools.toolbox import Toolbox

    async def main(data_dir, url, ready, go, n):
        tb = await Toolbox.open(Path(data_dir), None, postgres_url=url)
        try:
            Path(ready).write_text("ready")
            while not Path(go).exists():
                await asyncio.sleep(0.01)
            outs = []
            for i in range(int(n)):
                out = await tb.registry.call(
                    "post_message", {"channel": "ops", "text": f"deploy {i} done"}, f"req-{i}"
                )
                outs.append({"status": out.status, "replayed": out.replayed, "content": out.content,
                             "error": out.error})
            print(json.dumps(outs))
        finally:
            await tb.aclose()

    asyncio.run(main(*sys.argv[1:]))
""")


def _posts(data_dir: Path) -> list[str]:
    db = data_dir / "team_chat.db"
    if not db.exists():
        return []
    con = sqlite3.connect(db)
    try:
        return [row[0] for row in con.execute("SELECT text FROM messages ORDER BY id")]
    finally:
        con.close()


def _wait_for(path: Path, procs: list[subprocess.Popen], limit_s: float = 120.0) -> None:
    deadline = time.monotonic() + limit_s
    while not path.exists():
        for p in procs:
            if p.poll() is not None:
                raise AssertionError(f"child exited early: {p.communicate()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{path.name} did not appear")
        time.sleep(0.05)


def test_two_machines_with_their_own_data_dirs_post_each_request_once(tmp_path, postgres_url):
    """Two processes, each with its own data directory (its own team-chat server and database),
    one PostgreSQL: the same five requests sent by both at once are posted five times in all."""
    script = tmp_path / "machine.py"
    script.write_text(TWO_MACHINES)
    go = tmp_path / "go"
    dirs = [tmp_path / f"machine{i}" for i in range(2)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(d), postgres_url, str(tmp_path / f"ready{i}"), str(go), "5"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for i, d in enumerate(dirs)
    ]
    try:
        for i in range(2):
            _wait_for(tmp_path / f"ready{i}", procs)
        go.write_text("go")
        outputs = [p.communicate(timeout=120) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for p, (stdout, stderr) in zip(procs, outputs):
        assert p.returncode == 0 and stdout.strip(), stderr[-3000:]
    replies = [json.loads(stdout.strip().splitlines()[-1]) for stdout, _ in outputs]
    posts = _posts(dirs[0]) + _posts(dirs[1])
    assert sorted(posts) == [f"deploy {i} done" for i in range(5)], posts
    for i in range(5):
        pair = [replies[0][i], replies[1][i]]
        assert all(r["status"] == "ok" for r in pair), pair
        assert pair[0]["content"] == pair[1]["content"]  # the one post's id and time, twice
        assert sorted(r["replayed"] for r in pair) == [False, True]


SLOW_EFFECT = textwrap.dedent("""
    import asyncio, json, sys
    from pathlib import Path
    from tools.ledgers import open_ledger

    async def main(data_dir, url, out, who):
        ledger = open_ledger(Path(data_dir), url)
        async def side_effect():
            with open(out, "a") as f:
                f.write(who + "\\n")
            await asyncio.sleep(0.5)  # the other process arrives while this one is in flight
            return {"by": who}
        try:
            record, replayed = await ledger.run_once("append", "same-id", side_effect)
        finally:
            await ledger.aclose()
        print(json.dumps({"record": record, "replayed": replayed}))

    asyncio.run(main(*sys.argv[1:]))
""")


def test_processes_arriving_while_a_call_is_in_flight_wait_for_its_record(store, tmp_path):
    """Four processes (PostgreSQL: each with its own data directory) run one slow request at
    once: one line is appended, all four return its record."""
    script = tmp_path / "dup.py"
    script.write_text(SLOW_EFFECT)
    out = tmp_path / "out.txt"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    data = [tmp_path / ("data" if not store else f"data{i}") for i in range(4)]
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(data[i]), store, str(out), f"p{i}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for i in range(4)
    ]
    outputs = [p.communicate(timeout=120) for p in procs]
    for p, (stdout, stderr) in zip(procs, outputs):
        assert p.returncode == 0 and stdout.strip(), stderr[-3000:]
    replies = [json.loads(stdout.strip().splitlines()[-1]) for stdout, _ in outputs]
    assert len(out.read_text().splitlines()) == 1
    assert len({json.dumps(r["record"]) for r in replies}) == 1
    assert sum(not r["replayed"] for r in replies) == 1


CRASHING = textwrap.dedent("""
    import asyncio, socket, sys
    from pathlib import Path
    from tools.ledgers import open_ledger

    async def main(data_dir, url, out, host):
        if host:  # another machine: its pid means nothing here
            socket.gethostname = lambda: host
        ledger = open_ledger(Path(data_dir), url)
        async def side_effect():
            with open(out, "a") as f:
                f.write("ran\\n")
            await asyncio.sleep(600)  # killed here, mid-call
            return {"v": "never"}
        await ledger.run_once("post", "req-crash", side_effect)

    asyncio.run(main(*sys.argv[1:]))
""")


@pytest.mark.parametrize("retry_safe", [False, True], ids=["side_effect", "retry_safe"])
async def test_a_claimer_killed_mid_call(store, tmp_path, retry_safe):
    """While the claimer runs: another owner gets LedgerBusy. After kill -9: a side effect's
    claim is stated unknown (replayed, not run again); a retry-safe call's is taken over and
    runs once more. On PostgreSQL the claimer names another host, as a second machine would:
    its death is known from its session, not from a pid."""
    script = tmp_path / "crash.py"
    script.write_text(CRASHING)
    out = tmp_path / "effects.txt"
    claimer_dir = tmp_path / ("data" if not store else "claimer")
    proc = subprocess.Popen(
        [sys.executable, str(script), str(claimer_dir), store, str(out), "machine-b" if store else ""],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    ran_again: list[int] = []

    async def effect():
        ran_again.append(1)
        return {"v": "second"}

    def lost(reason: str):
        return {"error_kind": "outcome_unknown", "reason": reason}

    try:
        await asyncio.to_thread(_wait_for, out, [proc])
        busy = ledger(store, tmp_path, wait_s=0.3)
        try:
            with pytest.raises(LedgerBusy):
                await busy.run_once("post", "req-crash", effect, lost=lost, retry_safe=retry_safe)
        finally:
            await busy.aclose()
    finally:
        proc.send_signal(signal.SIGKILL)
        await asyncio.to_thread(proc.communicate)
    after = ledger(store, tmp_path, wait_s=60)
    try:
        record, replayed = await after.run_once("post", "req-crash", effect, lost=lost, retry_safe=retry_safe)
        state = await after.state("post", "req-crash")
        again = await after.run_once("post", "req-crash", effect, lost=lost, retry_safe=retry_safe)
    finally:
        await after.aclose()
    assert out.read_text() == "ran\n"  # the killed call's effect, once
    if retry_safe:
        assert (record, replayed, state, ran_again) == ({"v": "second"}, False, "done", [1])
    else:
        assert replayed and record["error_kind"] == "outcome_unknown" and "stopped mid-call" in record["reason"]
        assert state == "unknown" and ran_again == []
    assert again == (record, True)


# -- PostgreSQL only ----------------------------------------------------------------------------


async def test_an_unreachable_server_runs_nothing_and_says_where(tmp_path):
    from tools.ledger_postgres import PostgresLedger

    effects: list = []
    url = f"postgresql://hermes:s3cret@/hermes?host={tmp_path / 'no-server'}"
    led = PostgresLedger(url)
    try:
        out = await counting_registry(led, effects).call("post_note", {"text": "x"}, "req-1")
    finally:
        await led.aclose()
    assert effects == [] and out.status == "error" and out.error_kind == "tool_error"
    assert "HERMES_POSTGRES_URL" in out.error and "no side effect runs" in out.error
    assert "s3cret" not in out.error and "hermes:***@" in out.error


async def test_a_connection_dropped_mid_call_still_records_the_outcome(postgres_url):
    """The server ends the ledger's session while its call runs (as a restart does): the
    finish reconnects and stores the record, and another owner replays it."""
    import psycopg

    from tools.ledger_postgres import PostgresLedger

    holder, other = PostgresLedger(postgres_url), PostgresLedger(postgres_url, wait_s=30)
    runs: list[int] = []

    async def effect():
        runs.append(1)
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            ended = admin.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchone()
        assert ended and ended[0] >= 1  # the holder's session (and the other's, if open)
        return {"v": 1}

    try:
        assert await holder.run_once("t", "r", effect) == ({"v": 1}, False)
        assert await other.run_once("t", "r", effect) == ({"v": 1}, True)
        assert await other.state("t", "r") == "done"
    finally:
        await holder.aclose()
        await other.aclose()
    assert runs == [1]


async def test_the_toolbox_and_open_ledger_follow_the_setting(tmp_path, postgres_url):
    from tools.ledger_postgres import PostgresLedger
    from tools.toolbox import Toolbox

    cfg = tmp_path / "mcp.json"
    cfg.write_text('{"mcpServers": {"team_chat": {"enabled": false}}}')
    tb = await Toolbox.open(tmp_path / "data", cfg, postgres_url=postgres_url)
    try:
        assert isinstance(tb.ledger, PostgresLedger) and tb.ledger.path is None
    finally:
        await tb.aclose()
    assert not (tmp_path / "data" / "idempotency.db").exists()
    plain = open_ledger(tmp_path / "data", "")
    assert type(plain) is IdempotencyLedger and plain.path == tmp_path / "data" / "idempotency.db"
    plain.close()


# -- the whole agent: `hermes run` on two machines ---------------------------------------------

# A side effect that happens, then never answers the first time (the first machine is killed
# while it waits); later calls answer at once, so a repeat would show as a second line.
HANGING_ONCE = textwrap.dedent("""
    import os, sys, time
    from mcp.server.fastmcp import FastMCP
    from mcp.types import ToolAnnotations

    effects, posted = sys.argv[1], sys.argv[2]
    mcp = FastMCP("hanging-chat", log_level="WARNING")

    @mcp.tool(annotations=ToolAnnotations(readOnlyHint=False, idempotentHint=False, destructiveHint=False),
              meta={"hermes/requested_by": [r"\\bpost\\b.{0,80}\\bchannel\\b"]})
    def announce(channel: str, text: str) -> dict:
        \"\"\"Posts text to a channel of the team chat (a side effect), then answers.\"\"\"
        first = not os.path.exists(posted)
        with open(effects, "a") as f:
            f.write(channel + " " + text + "\\n")
        open(posted, "w").close()
        if first:
            time.sleep(600)  # the first machine is killed before this answers
        return {"posted": text}

    mcp.run("stdio")
""")


def test_hermes_killed_mid_side_effect_on_one_machine_is_not_repeated_by_another(tmp_path, postgres_url):
    """``hermes run`` on machine A (its own data directory) is killed with SIGKILL after its
    side effect ran, before anything recorded the result; the same command on machine B (another
    data directory, the same PostgreSQL: checkpoints and ledger) continues the thread, does not
    post again and states the outcome as unknown."""
    from tests.integration.test_repeat_after_crash import POST, hermes_env, kill_started_from, run, run_and_kill, script
    from tests.support.scripted_openai import ScriptedOpenAI

    effects, posted = tmp_path / "effects.txt", tmp_path / "posted"
    server = tmp_path / "hanging_chat.py"
    server.write_text(HANGING_ONCE)
    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "chat": {"command": sys.executable, "args": [str(server), str(effects), str(posted)]},
                    "team_chat": {"enabled": False},
                }
            }
        )
    )
    with ScriptedOpenAI(script("announce", POST, "order count")) as stub:
        env = hermes_env(
            stub,
            HERMES_MCP_CONFIG=str(config),
            HERMES_TOOL_TIMEOUTS=json.dumps({"announce": 300}),
            HERMES_POSTGRES_URL=postgres_url,
        )
        try:
            run_and_kill(tmp_path / "machine-a", "t1", env, posted)
        finally:
            kill_started_from(server)
        assert effects.read_text().splitlines() == ["sales-team Order count: 42"]
        try:
            again = run(tmp_path / "machine-b", "t1", env, "--json")
        finally:
            kill_started_from(server)
    assert again.stdout.strip(), again.stderr[-2000:]
    summary = json.loads(again.stdout.strip().splitlines()[-1])
    assert effects.read_text().splitlines() == ["sales-team Order count: 42"]  # not posted again
    assert "announce" in (summary["stop_reason"] or "") and "unknown" in summary["stop_reason"]
    assert not (tmp_path / "machine-a" / "idempotency.db").exists()
    assert not (tmp_path / "machine-b" / "idempotency.db").exists()
    import psycopg

    with psycopg.connect(postgres_url) as con:
        states = con.execute("SELECT state FROM hermes_tool_requests WHERE tool = 'announce'").fetchall()
    assert states == [("unknown",)]


async def test_consolidation_prunes_the_ledger_in_use(store, tmp_path):
    """The consolidate graph prunes done records past their retention in the store the setting
    names (PostgreSQL: the shared table; no ledger file appears in the data directory)."""
    from graph import resources
    from graph.consolidate_graph import graph as consolidate
    from graph.context import Context

    led = ledger(store, tmp_path)

    async def effect():
        return {"status": "ok"}

    await led.run_once("post_message", "r1", effect)
    await led.aclose()
    context = Context(data_dir=str(tmp_path / "data"), embeddings="hash", postgres_url=store)
    try:
        kept = await consolidate.ainvoke({}, context=context)
        pruned = await consolidate.ainvoke({"ledger_retention_days": 0}, context=context)
    finally:
        await resources.aclose_resources()
    assert (kept["counts"]["ledger_pruned"], pruned["counts"]["ledger_pruned"]) == (0, 1)
    assert (tmp_path / "data" / "idempotency.db").exists() == (not store)


def test_already_done_lists_what_the_postgres_ledger_recorded(tmp_path, postgres_url):
    """``hermes run`` killed after its turn finished, before the answer was printed; the same
    command again says the request is already done and lists the call the ledger (on
    PostgreSQL) recorded; one post."""
    from tests.integration.test_repeat_after_crash import POST, hermes_env, one_line, posts, run, run_and_kill, script
    from tests.support.scripted_openai import ScriptedOpenAI

    data, hold = tmp_path / "data", tmp_path / "turn-finished"
    with ScriptedOpenAI(script("post_message", POST, "order count")) as stub:
        env = hermes_env(stub, HERMES_POSTGRES_URL=postgres_url)
        run_and_kill(data, "t1", {**env, "HERMES_TEST_HOLD_ANSWER": str(hold)}, hold)
        again = run(data, "t1", env)
    assert again.returncode == 0, again.stderr[-2000:]
    out = one_line(again.stdout)
    assert "already done" in out and "post_message (done)" in out, out
    assert posts(data) == [("sales-team", POST["text"])]
    assert not (data / "idempotency.db").exists()
