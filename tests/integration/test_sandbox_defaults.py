"""Sandbox defaults of the local executors (DESIGN §2.2), with real worker processes: a builtin-
style tool — registered the way the builtin catalog registers them, so its ``ToolSpec.network``
and ``schedules`` decide — has no network unless its definition asks for it, and never sees the
agent's own state in the data directory (checkpoints, idempotency ledger, memory, mirror, other
threads' payloads), nor another thread's workspace (``threads/<thread>/``: its reports), nor the
flat ``reports/`` of before, nor the schedule (``reminders.db``) unless it schedules — neither
through Python nor through a native program it starts; its own area (its thread's workspace and
payloads) stays usable, and it writes nowhere else. Both the default subprocess backend and the
bubblewrap backend."""

from __future__ import annotations

import socket
import sqlite3
import textwrap
from pathlib import Path

import pytest

from tools.builtin.catalog import executor_runner
from tools.executors import make_executor
from tools.idempotency import IdempotencyLedger
from tools.registry import ToolRegistry
from tools.spec import ToolSpec

pytestmark = pytest.mark.slow  # real worker processes

SECRET = "alice: my card number is 4111"

PROBES = textwrap.dedent("""
    import socket, subprocess

    def tcp(port: int) -> dict:
        s = socket.socket()
        s.settimeout(5)
        try:
            s.connect(("127.0.0.1", port))
            s.sendall(b"from the tool")
            return {"connected": True}
        except OSError as exc:
            return {"connected": False, "error": type(exc).__name__ + ": " + str(exc)}
        finally:
            s.close()

    def udp(port: int) -> dict:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            s.sendto(b"from the tool", ("127.0.0.1", port))
            return {"sent": True}
        except OSError as exc:
            return {"sent": False, "error": type(exc).__name__ + ": " + str(exc)}
        finally:
            s.close()

    def read(path: str) -> dict:
        out = {}
        try:
            with open(path, "rb") as f:
                out["python"] = f.read().decode("latin-1")
        except OSError as exc:
            out["python_error"] = type(exc).__name__ + ": " + str(exc)
        # a native program is not bound by Python's audit hook
        done = subprocess.run(["/bin/cat", path], capture_output=True)
        out["native"] = done.stdout.decode("latin-1")
        return out

    def link(path: str) -> dict:
        # path = "<link>=><target>": a symbolic link left for the agent to follow
        where, target = path.split("=>")
        try:
            import os
            os.symlink(target, where)
            return {"linked": True}
        except OSError as exc:
            return {"linked": False, "error": type(exc).__name__ + ": " + str(exc)}

    def hardlink(path: str) -> dict:
        # path = "<link>=><target>": a second name for a hidden file, in the tool's own area
        import os
        where, target = path.split("=>")
        try:
            os.link(target, where)
        except OSError as exc:
            return {"linked": False, "error": type(exc).__name__ + ": " + str(exc)}
        return {"linked": True, **read(where)}

    def child_tcp(port: int) -> dict:
        # a child process the tool starts, not bound by anything set up in Python
        import sys
        code = f"import socket; socket.create_connection(('127.0.0.1', {port}), 5); print('connected')"
        done = subprocess.run([sys.executable, "-c", code], capture_output=True)
        return {"connected": b"connected" in done.stdout}

    def listdir(path: str) -> dict:
        out = {}
        try:
            import os
            out["python"] = sorted(os.listdir(path))
        except OSError as exc:
            out["python_error"] = type(exc).__name__ + ": " + str(exc)
        done = subprocess.run(["/bin/ls", "-a", path], capture_output=True)
        out["native"] = sorted(done.stdout.decode("latin-1").split())
        return out

    def write(path: str) -> dict:
        try:
            with open(path, "wb") as f:
                f.write(b"overwritten by a tool")
            return {"written": True}
        except OSError as exc:
            return {"written": False, "error": type(exc).__name__ + ": " + str(exc)}
""")


def spec(name: str, arg: str, network: bool = False, schedules: bool = False) -> ToolSpec:
    kind = {"port": "integer", "path": "string"}[arg]
    return ToolSpec(
        name=name,
        description=f"Test probe {name}: reaches for something outside its area (sandbox tests only).",
        parameters={"type": "object", "properties": {arg: {"type": kind}}, "required": [arg]},
        network=network,
        schedules=schedules,
    )


@pytest.fixture(params=["subprocess", "container"])
def setup(request, tmp_path: Path):
    helpers = tmp_path / "helpers"
    helpers.mkdir()
    (helpers / "sandbox_probes.py").write_text(PROBES)
    data = tmp_path / "data"
    data.mkdir()
    if request.param == "container":
        from tools.executors.container import SandboxUnavailable

        try:
            executor = make_executor("container", data, extra_paths=(str(helpers),), engine="bwrap")
        except SandboxUnavailable as exc:
            pytest.skip(f"no bubblewrap here: {exc}")
    else:
        executor = make_executor("subprocess", data, extra_paths=(str(helpers),))
    registry = ToolRegistry(ledger=IdempotencyLedger(None))
    for name, entry, arg, network, schedules in [
        ("tcp_probe", "tcp", "port", False, False),
        ("udp_probe", "udp", "port", False, False),
        ("tcp_online", "tcp", "port", True, False),  # a tool whose definition asks for the network
        ("read_probe", "read", "path", False, False),
        ("write_probe", "write", "path", False, False),
        ("list_probe", "listdir", "path", False, False),
        ("link_probe", "link", "path", False, False),
        ("hardlink_probe", "hardlink", "path", False, False),
        ("child_tcp_probe", "child_tcp", "port", False, False),
        ("scheduling_read_probe", "read", "path", False, True),  # a tool that schedules
        ("scheduling_write_probe", "write", "path", False, True),
    ]:
        tool = spec(name, arg, network, schedules)
        runner = executor_runner(executor, f"sandbox_probes:{entry}", 20, tool.network, tool.schedules)
        registry.register(tool, runner)
    return data, registry


async def agent_state(data: Path) -> dict[str, Path]:
    """The agent's files as the runtime writes them, each holding SECRET."""
    checkpoints = data / "checkpoints.sqlite"
    with sqlite3.connect(checkpoints) as con:
        con.execute("CREATE TABLE checkpoints (thread_id TEXT, checkpoint BLOB)")
        con.execute("INSERT INTO checkpoints VALUES ('alice', ?)", (SECRET.encode(),))

    ledger = IdempotencyLedger.in_data_dir(data)

    async def effect():
        return {"posted": SECRET}

    await ledger.run_once("post_message", "alice:g:1", effect)
    await ledger.aclose()
    (data / "mirror").mkdir()
    (data / "mirror" / "alice.jsonl").write_text(SECRET)
    (data / "memory.db").write_text(SECRET)
    (data / "payloads" / "alice").mkdir(parents=True)
    (data / "payloads" / "alice" / "r.json").write_text(SECRET)
    (data / "payloads" / "bob").mkdir(parents=True)
    (data / "payloads" / "bob" / "r.json").write_text("bob's own result")
    return {
        "checkpoints": checkpoints,
        "ledger": data / "idempotency.db",
        "mirror": data / "mirror" / "alice.jsonl",
        "memory": data / "memory.db",
        "another thread's payload": data / "payloads" / "alice" / "r.json",
    }


async def call(registry: ToolRegistry, name: str, args: dict, thread: str = "bob") -> dict:
    outcome = await registry.call(name, args, request_id=f"{thread}:goal-1:abc123")
    assert outcome.status == "ok", outcome
    return outcome.content


async def test_no_network_unless_the_tool_asks_for_it(setup):
    _data, registry = setup
    with socket.socket() as listener, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        listener.bind(("127.0.0.1", 0))
        listener.listen(5)
        listener.settimeout(0.5)
        udp.bind(("127.0.0.1", 0))
        udp.settimeout(0.5)

        tcp = await call(registry, "tcp_probe", {"port": listener.getsockname()[1]})
        assert tcp["connected"] is False, tcp
        # not only TCP: no network at all (bubblewrap's namespace has a loopback of its own, so
        # the datagram may leave the tool, but it never reaches this host's listener)
        await call(registry, "udp_probe", {"port": udp.getsockname()[1]})
        with pytest.raises(TimeoutError):
            listener.accept()
        with pytest.raises(TimeoutError):
            udp.recvfrom(100)

        online = await call(registry, "tcp_online", {"port": listener.getsockname()[1]})
        assert online["connected"] is True, online
        listener.settimeout(10)
        conn, _ = listener.accept()
        with conn:
            assert conn.recv(100) == b"from the tool"


async def test_the_agent_state_is_out_of_reach(setup):
    data, registry = setup
    files = await agent_state(data)
    for what, path in files.items():
        for form in (str(path), str(path.relative_to(data))):
            seen = await call(registry, "read_probe", {"path": form})
            assert SECRET not in str(seen), (what, form, seen)
        wrote = await call(registry, "write_probe", {"path": str(path)})
        assert wrote["written"] is False, (what, wrote)
        assert SECRET.encode() in path.read_bytes() or what == "ledger", what
    with sqlite3.connect(files["ledger"]) as con:  # the ledger is intact
        assert con.execute("SELECT count(*) FROM tool_requests").fetchone() == (1,)
    with sqlite3.connect(files["checkpoints"]) as con:
        assert con.execute("SELECT thread_id FROM checkpoints").fetchall() == [("alice",)]


async def test_the_tool_keeps_its_own_area(setup):
    data, registry = setup
    await agent_state(data)
    own = await call(registry, "read_probe", {"path": "payloads/bob/r.json"})
    assert own["python"] == own["native"] == "bob's own result"
    (data / "threads" / "bob" / "reports").mkdir(parents=True)
    wrote = await call(registry, "write_probe", {"path": "threads/bob/reports/summary.md"})
    assert wrote["written"] is True
    assert (data / "threads" / "bob" / "reports" / "summary.md").read_bytes() == b"overwritten by a tool"
    # the only folder of threads/ the run sees is its own
    listed = await call(registry, "list_probe", {"path": str(data / "threads")})
    assert listed.get("python", ["bob"]) == ["bob"] and set(listed["native"]) <= {".", "..", "bob"}, listed


async def test_the_tool_writes_only_its_own_workspace(setup):
    """The data directory's top level is shared by every thread: a tool that does not schedule
    cannot plant or change a file there (a note another thread's tool would read, a
    ``reminders.db-wal`` the scheduler would replay), only in its thread's workspace."""
    data, registry = setup
    (data / "notes.txt").write_text("shared note")
    for path in ("notes.txt", str(data / "planted.txt"), "reminders.db-wal", "threads/planted.md"):
        wrote = await call(registry, "write_probe", {"path": path})
        assert wrote["written"] is False, (path, wrote)
    assert (data / "notes.txt").read_text() == "shared note"
    assert not (data / "planted.txt").exists() and not (data / "reminders.db-wal").exists()
    assert not (data / "threads" / "planted.md").exists()


async def test_a_run_for_one_thread_cannot_reach_another_threads_folder(setup):
    """alice's reports (her thread's workspace) and the flat ``reports/`` of before: a run for
    bob's thread cannot list, read or write them — not by absolute or relative path, not by
    ``../`` out of its own workspace, not with a native program; alice's files stay as they were.
    A run for alice's thread still reads her own report."""
    data, registry = setup
    alice = data / "threads" / "alice" / "reports"
    alice.mkdir(parents=True)
    (alice / "q3.md").write_text(SECRET)
    (data / "reports").mkdir()
    (data / "reports" / "old.md").write_text(SECRET)  # written before reports were per thread
    (data / "threads" / "bob").mkdir()
    for folder in (alice, data / "threads" / "alice", data / "reports"):
        for form in (str(folder), str(folder.relative_to(data)), f"threads/bob/../../{folder.relative_to(data)}"):
            listed = await call(registry, "list_probe", {"path": form})
            assert "q3.md" not in str(listed) and "old.md" not in str(listed), (form, listed)
    for path in (alice / "q3.md", data / "reports" / "old.md"):
        for form in (str(path), str(path.relative_to(data)), f"threads/bob/../../{path.relative_to(data)}"):
            seen = await call(registry, "read_probe", {"path": form})
            assert SECRET not in str(seen), (form, seen)
        wrote = await call(registry, "write_probe", {"path": str(path)})
        assert wrote["written"] is False, (path, wrote)
        assert path.read_text() == SECRET
    wrote = await call(registry, "write_probe", {"path": str(alice / "planted.md")})
    assert wrote["written"] is False and not (alice / "planted.md").exists(), wrote
    mine = await call(registry, "read_probe", {"path": "threads/alice/reports/q3.md"}, thread="alice")
    assert mine["python"] == mine["native"] == SECRET


async def test_the_schedule_is_only_for_tools_that_schedule(setup):
    """``reminders.db`` holds every user's reminders: a tool that does not schedule can neither
    read nor change it (nor its journal); a tool whose definition says ``schedules`` can."""
    data, registry = setup
    store = data / "reminders.db"
    with sqlite3.connect(store) as con:
        con.execute("CREATE TABLE reminders (id INTEGER PRIMARY KEY, text TEXT)")
        con.execute("INSERT INTO reminders (text) VALUES (?)", (SECRET,))
    con.close()
    for form in (str(store), "reminders.db"):
        seen = await call(registry, "read_probe", {"path": form})
        assert SECRET not in str(seen), (form, seen)
    wrote = await call(registry, "write_probe", {"path": str(store)})
    assert wrote["written"] is False, wrote
    assert SECRET.encode() in store.read_bytes()
    seen = await call(registry, "scheduling_read_probe", {"path": "reminders.db"})
    assert SECRET in seen["python"] and SECRET in seen["native"]
    wrote = await call(registry, "scheduling_write_probe", {"path": "reminders.db-journal"})
    assert wrote["written"] is True and (data / "reminders.db-journal").exists()


async def test_a_link_a_tool_leaves_to_the_agent_state_is_gone_after_the_run(setup):
    """The tool cannot read the checkpoints, but the agent (outside the sandbox) later reads what
    the tool wrote (reports): a symbolic link the tool left there to a hidden file, another
    thread's payload or a file outside the data directory is removed when the run ends; a link
    within the tool's own area stays."""
    data, registry = setup
    files = await agent_state(data)
    (data / "threads" / "bob" / "reports").mkdir(parents=True)
    (data / "threads" / "bob" / "reports" / "summary.md").write_text("bob's summary")
    (data / "threads" / "alice").mkdir()
    (data / "threads" / "alice" / "q3.md").write_text(SECRET)
    own = "threads/bob/reports"
    planted = {
        f"{own}/q3.md": str(files["checkpoints"]),
        f"{own}/ledger.md": "../../../idempotency.db",
        f"{own}/alice.md": str(data / "threads" / "alice" / "q3.md"),
        f"{own}/mirror": str(data / "mirror"),
        f"{own}/hostname.md": "/etc/hostname",
    }
    for where, target in planted.items():
        made = await call(registry, "link_probe", {"path": f"{where}=>{target}"})
        assert made["linked"] is True, made
        assert not (data / where).is_symlink() and not (data / where).exists(), where
    assert (await call(registry, "link_probe", {"path": f"{own}/latest.md=>summary.md"}))["linked"] is True
    assert (data / own / "latest.md").read_text() == "bob's summary"


async def test_the_agent_state_is_out_of_reach_by_other_paths(setup):
    """Other ways to the same files: through ``/proc/<pid>/root``, ``../`` out of the tool's own
    payload folder, a hard link made in its own area; and the network through a child process."""
    data, registry = setup
    files = await agent_state(data)
    for what, path in files.items():
        forms = [f"/proc/1/root{path}", f"/proc/self/root{path}", f"/proc/self/cwd/{path.relative_to(data)}"]
        forms.append(f"payloads/bob/../../{path.relative_to(data)}")
        for form in forms:
            seen = await call(registry, "read_probe", {"path": form})
            assert SECRET not in str(seen), (what, form, seen)
        (data / "threads" / "bob").mkdir(parents=True, exist_ok=True)
        linked = await call(registry, "hardlink_probe", {"path": f"threads/bob/{path.name}.copy=>{path}"})
        assert SECRET not in str(linked), (what, linked)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(5)
        listener.settimeout(0.5)
        child = await call(registry, "child_tcp_probe", {"port": listener.getsockname()[1]})
        assert child["connected"] is False, child
        with pytest.raises(TimeoutError):
            listener.accept()
