"""``python -m evals`` against a model endpoint where nothing listens (a real closed port on
127.0.0.1): exit 2 within seconds with one line naming the endpoint and what to do — no
traceback, no report directory — whether the endpoint comes from ``--base-url`` or from
``HERMES_MODEL``/``HERMES_BASE_URL``, and for the memory suite before its long ingest."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from tests.integration.conftest import ROOT

pytestmark = pytest.mark.slow


def closed_port() -> int:
    with socket.socket() as sock:  # bound then closed: nothing listens there afterwards
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize(
    ("args", "env"),
    [
        (["tasks", "--case", "sales-flagship"], "settings"),
        (["tools", "--limit", "1"], "settings"),
        (["tasks", "--case", "sales-flagship", "--model", "gpt-x"], "flags"),
        (["memory", "--sample", "--model", "gpt-x"], "flags"),
    ],
)
def test_a_dead_endpoint_is_named_and_nothing_runs(tmp_path, args, env):
    url = f"http://127.0.0.1:{closed_port()}/v1"
    environ = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_")} | {"OPENAI_API_KEY": "x"}
    if env == "settings":
        environ |= {"HERMES_MODEL": "openai:gpt-x", "HERMES_BASE_URL": url}
    else:
        args = [*args, "--base-url", url]
    out = tmp_path / "report"
    done = subprocess.run(
        [sys.executable, "-m", "evals", *args, "--out", str(out)],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    [line] = [x for x in done.stderr.splitlines() if x.startswith("error:")]
    assert f"nothing answers at the model endpoint {url}" in line and "--base-url / HERMES_BASE_URL" in line
    assert not out.exists()
