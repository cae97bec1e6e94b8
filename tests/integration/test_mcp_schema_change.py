"""A real MCP server restarted with a tool's field renamed or retyped (issue 26, "a tool's schema
changes between turns"): the toolbox of the next process knows the earlier shape from the data
directory's schema store, a call in that shape is refused before it reaches the server with an
error naming the field and the new shape, and the call in the new shape runs.

Every test stops what it starts and checks with psutil that no process is left."""

from __future__ import annotations

import json
import sys
import textwrap
import uuid
from pathlib import Path

import psutil
import pytest

from tools.toolbox import Toolbox

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

# argv: effects file, version ("v1" | "renamed" | "retyped"), marker (ignored)
SERVER = textwrap.dedent('''
    import sys
    from mcp.server.fastmcp import FastMCP
    from mcp.types import ToolAnnotations

    effects, version = sys.argv[1], sys.argv[2]
    mcp = FastMCP("notes", log_level="WARNING")
    SIDE = ToolAnnotations(readOnlyHint=False, idempotentHint=False)

    def record(line: str) -> str:
        with open(effects, "a") as f:
            f.write(line + "\\n")
        return "posted"

    if version == "v1":
        @mcp.tool(annotations=SIDE)
        def post_note(chan: str, copies: str = "1") -> str:
            """Posts a note to a channel (version 1)."""
            return record(f"v1 {chan} {copies}")
    elif version == "renamed":
        @mcp.tool(annotations=SIDE)
        def post_note(channel: str, copies: str = "1") -> str:
            """Posts a note to a channel (chan renamed to channel)."""
            return record(f"renamed {channel} {copies}")
    else:
        @mcp.tool(annotations=SIDE)
        def post_note(chan: str, copies: int = 1) -> str:
            """Posts a note to a channel (copies is now an integer)."""
            return record(f"retyped {chan} {copies}")

    mcp.run("stdio")
''')


def _procs_with(marker: str) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if any(marker in part for part in (p.info["cmdline"] or [])) and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p)
        except psutil.Error:
            continue
    return found


async def _open(tmp_path: Path, version: str, marker: str) -> Toolbox:
    script = tmp_path / "notes_server.py"
    script.write_text(SERVER)
    cfg = tmp_path / f"mcp-{version}.json"
    server = {"command": sys.executable, "args": [str(script), str(tmp_path / "effects"), version, marker]}
    cfg.write_text(json.dumps({"mcpServers": {"team_chat": {"enabled": False}, "notes": server}}))
    return await Toolbox.open(tmp_path / "data", cfg, timeout_s=10.0)


#: the new version → (a call in the old shape, what the error names, the call in the new shape, the effect)
CASES = {
    "renamed": (
        {"chan": "ops"},
        ("'chan' was renamed to 'channel'", "channel (string, required)"),
        {"channel": "ops"},
        "renamed ops 1",
    ),
    "retyped": (
        {"chan": "ops", "copies": "two"},
        ("'copies' is now integer (was string", "copies (integer)"),
        {"chan": "ops", "copies": 2},
        "retyped ops 2",
    ),
}


@pytest.mark.parametrize("version", sorted(CASES))
async def test_a_restarted_server_with_a_changed_field_refuses_the_old_shape_naming_it(tmp_path, version):
    old_call, named, new_call, effect = CASES[version]
    marker = f"hermes-schema-{uuid.uuid4().hex}"
    try:
        first = await _open(tmp_path, "v1", marker)
        try:
            assert (await first.registry.call("post_note", {"chan": "ops"}, "r1")).status == "ok"
        finally:
            await first.aclose()

        # the server is restarted in its new version; a new process opens the same data directory
        later = await _open(tmp_path, version, marker)
        try:
            assert any(n.startswith("Tool 'post_note' changed") for n in later.registry.migration_notes)
            refused = await later.registry.call("post_note", old_call, "r2")
            assert refused.status == "error" and refused.error_kind == "invalid_arguments"
            assert all(n in (refused.error or "") for n in named), refused.error
            done = await later.registry.call("post_note", new_call, "r3")
            assert done.status == "ok", done.error
        finally:
            await later.aclose()
        # the old shape never reached the server; the new one ran once
        assert (tmp_path / "effects").read_text().splitlines() == ["v1 ops 1", effect]
    finally:
        left = _procs_with(marker)
        for p in left:
            p.kill()
        assert not left, f"test left processes behind: {[p.pid for p in left]}"
