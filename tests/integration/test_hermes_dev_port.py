"""``hermes dev`` serves on exactly the port it was given (issue 27): ``langgraph dev`` moves to
a random port when its port is taken (one log warning), while the README's SDK example and
Studio keep using 2024. A taken port is an error naming its holder and the option to use."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.integration.conftest import ROOT, free_port, langgraph_dev

pytestmark = pytest.mark.slow


def test_a_taken_port_is_an_error_naming_its_holder(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [str(Path(sys.executable).parent / "hermes"), "dev", "--port", str(port), "--no-reload"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert result.returncode == 2, result.stderr
    line = " ".join(result.stderr.split())
    assert f"port {port} on 127.0.0.1 is taken by pid" in line
    assert f"hermes dev --port {port + 1}" in line
    assert "Traceback" not in result.stderr


def test_hermes_dev_serves_on_the_port_it_was_given(tmp_path):
    with langgraph_dev(tmp_path, {"HERMES_DATA_DIR": str(tmp_path / "data")}, via_hermes=True) as (url, _log):
        graphs = httpx.post(f"{url}/assistants/search", json={"limit": 10}, timeout=30).json()
        assert {a["graph_id"] for a in graphs} >= {"agent"}
    assert free_port() > 0
