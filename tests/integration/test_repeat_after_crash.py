"""Exactly-once across a repeated command (DESIGN §2.4, "the same request"), with real
processes: ``hermes run`` against a scripted OpenAI-compatible model, the bundled team-chat MCP
server, SQLite checkpoints and the idempotency ledger, killed with SIGKILL.

* killed after the turn finished but before the answer was printed
  (``HERMES_TEST_HOLD_ANSWER``), the same command again posts nothing: it says the request is
  already done, shows the stored answer and what the ledger recorded; one post in the chat;
* after that answer was shown, the same command again is a new request (a second post, said so);
  ``--again`` runs it anew even when the answer was never shown;
* the same text on another thread is another request (it posts);
* killed just after the side effect ran but before anything recorded it (a tool that posts, then
  hangs): the same command continues the turn; the post is not repeated and its outcome is stated
  as unknown.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.support.scripted_openai import ScriptedOpenAI

pytestmark = pytest.mark.slow  # hermes processes, an MCP server, SIGKILL

ROOT = Path(__file__).resolve().parents[2]
TASK = "Post the order count to the sales-team channel"
POST = {"channel": "sales-team", "text": "Order count: 42"}
ANSWER = "Posted the order count to #sales-team."
#: seconds a hermes process may take (imports, MCP start-up, a loaded 2-core machine)
PROCESS_S = 240


def script(tool: str, args: dict[str, Any], marker: str):
    """The model: the tool call for the latest request that mentions ``marker``, then the answer
    once that request has a tool result."""

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        messages = body["messages"]
        start = max(
            (i for i, m in enumerate(messages) if m["role"] == "user" and marker in str(m.get("content"))), default=0
        )
        if any(m["role"] == "tool" for m in messages[start:]):
            return {"content": ANSWER}
        return {"tool_calls": [{"name": tool, "arguments": args}]}

    return reply


def hermes_env(stub: ScriptedOpenAI, **extra: str) -> dict[str, str]:
    env = {**os.environ, **stub.env(), "HERMES_EMBEDDINGS": "hash", **extra}
    for name in ("HERMES_MCP_CONFIG", "HERMES_TEST_HOLD_ANSWER", "HERMES_DEBUG"):
        if name not in extra:
            env.pop(name, None)
    return env


def run(data: Path, thread: str, env: dict[str, str], *more: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "graph.cli", "run", TASK, "--thread", thread, "--data-dir", str(data), *more],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=PROCESS_S,
        check=False,
    )


def run_and_kill(data: Path, thread: str, env: dict[str, str], signal_file: Path) -> None:
    """Start ``hermes run``; once ``signal_file`` exists, SIGKILL its whole process group."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "graph.cli", "run", TASK, "--thread", thread, "--data-dir", str(data)],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + PROCESS_S
        while not signal_file.exists():
            if proc.poll() is not None:
                assert proc.stderr is not None  # piped
                raise AssertionError(f"hermes exited before the kill point: {proc.stderr.read().decode()[-2000:]}")
            assert time.monotonic() < deadline, "the kill point was never reached"
            time.sleep(0.1)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        if proc.stderr is not None:
            proc.stderr.close()


def kill_started_from(folder: Path) -> None:
    """SIGKILL every process whose command line names ``folder`` (an MCP server of a killed
    hermes lives in its own session: the group kill does not reach it)."""
    for proc in psutil.process_iter(["cmdline"]):
        if any(str(folder) in part for part in proc.info["cmdline"] or ()):
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()


def posts(data: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(data / "team_chat.db") as con:
        return con.execute("SELECT channel, text FROM messages ORDER BY id").fetchall()


def ledger(data: Path, tool: str) -> list[str]:
    with sqlite3.connect(data / "idempotency.db") as con:
        return [r[0] for r in con.execute("SELECT state FROM tool_requests WHERE tool = ?", (tool,))]


def one_line(text: str) -> str:
    return " ".join(text.split())


def test_killed_before_the_answer_was_printed_the_same_command_posts_once(tmp_path):
    data = tmp_path / "data"
    hold = tmp_path / "turn-finished"
    with ScriptedOpenAI(script("post_message", POST, "order count")) as stub:
        run_and_kill(data, "t1", hermes_env(stub, HERMES_TEST_HOLD_ANSWER=str(hold)), hold)
        assert posts(data) == [("sales-team", POST["text"])]  # the turn had finished: posted once
        assert ledger(data, "post_message") == ["done"]
        calls_before = len(stub.requests)

        again = run(data, "t1", hermes_env(stub))
        assert again.returncode == 0, again.stderr[-2000:]
        out = one_line(again.stdout)
        assert "already done" in out and "nothing ran again" in out, out
        assert "post_message (done)" in out  # what the ledger recorded for this request
        assert ANSWER in out  # the answer the user never saw
        assert posts(data) == [("sales-team", POST["text"])]  # no second post
        assert len(stub.requests) == calls_before  # not even a model call
        assert ledger(data, "post_message") == ["done"]

        # that answer has now been shown: the same text again is a new request, and says so
        deliberate = run(data, "t1", hermes_env(stub))
        assert deliberate.returncode == 0, deliberate.stderr[-2000:]
        assert "runs again as a new request" in one_line(deliberate.stdout)
        assert "already done" not in one_line(deliberate.stdout)
        assert len(posts(data)) == 2


def test_again_runs_an_undelivered_request_anew(tmp_path):
    data = tmp_path / "data"
    hold = tmp_path / "turn-finished"
    with ScriptedOpenAI(script("post_message", POST, "order count")) as stub:
        run_and_kill(data, "t1", hermes_env(stub, HERMES_TEST_HOLD_ANSWER=str(hold)), hold)
        forced = run(data, "t1", hermes_env(stub), "--again", "--json")
        assert forced.returncode == 0, forced.stderr[-2000:]
        summary = json.loads(forced.stdout.strip().splitlines()[-1])
        assert summary["already_done"] is None and summary["tools_called"] == {"post_message": 1}
        assert len(posts(data)) == 2


def test_the_same_text_on_another_thread_is_another_request(tmp_path):
    data = tmp_path / "data"
    hold = tmp_path / "turn-finished"
    with ScriptedOpenAI(script("post_message", POST, "order count")) as stub:
        run_and_kill(data, "t1", hermes_env(stub, HERMES_TEST_HOLD_ANSWER=str(hold)), hold)
        other = run(data, "t2", hermes_env(stub), "--json")
        assert other.returncode == 0, other.stderr[-2000:]
        summary = json.loads(other.stdout.strip().splitlines()[-1])
        assert summary["already_done"] is None and summary["tools_called"] == {"post_message": 1}
        assert len(posts(data)) == 2
        assert ledger(data, "post_message") == ["done", "done"]


# A side effect that happens, then never answers: the kill lands after the effect and before
# the ledger or a checkpoint recorded anything about it.
HANGING_SERVER = textwrap.dedent("""
    import sys, time
    from mcp.server.fastmcp import FastMCP
    from mcp.types import ToolAnnotations

    effects, posted = sys.argv[1], sys.argv[2]
    mcp = FastMCP("hanging-chat", log_level="WARNING")

    @mcp.tool(annotations=ToolAnnotations(readOnlyHint=False, idempotentHint=False, destructiveHint=False),
              meta={"hermes/requested_by": [r"\\bpost\\b.{0,80}\\bchannel\\b"]})
    def announce(channel: str, text: str) -> dict:
        \"\"\"Posts text to a channel of the team chat (a side effect), then answers.\"\"\"
        with open(effects, "a") as f:
            f.write(channel + " " + text + "\\n")
        open(posted, "w").close()
        time.sleep(600)  # the agent is killed before this answers
        return {"posted": text}

    mcp.run("stdio")
""")


def test_killed_after_the_effect_before_it_was_recorded_the_same_command_does_not_repeat_it(tmp_path):
    data = tmp_path / "data"
    effects, posted = tmp_path / "effects.txt", tmp_path / "posted"
    server = tmp_path / "hanging_chat.py"
    server.write_text(HANGING_SERVER)
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
        env = hermes_env(stub, HERMES_MCP_CONFIG=str(config), HERMES_TOOL_TIMEOUTS=json.dumps({"announce": 300}))
        try:
            run_and_kill(data, "t1", env, posted)
        finally:
            kill_started_from(server)  # the server still sleeping in the call
        assert effects.read_text().splitlines() == ["sales-team Order count: 42"]
        assert ledger(data, "announce") == ["running"]  # claimed by a process that is gone

        try:
            again = run(data, "t1", env, "--json")
        finally:
            kill_started_from(server)
        assert again.stdout.strip(), again.stderr[-2000:]
        summary = json.loads(again.stdout.strip().splitlines()[-1])
        assert effects.read_text().splitlines() == ["sales-team Order count: 42"]  # not posted again
        assert "announce" in (summary["stop_reason"] or "") and "unknown" in summary["stop_reason"]
        assert summary["already_done"] is None
        assert ledger(data, "announce") == ["unknown"]
