"""``hermes dev``: ``langgraph dev`` on the port you asked for, or a clear failure.

``langgraph dev`` (langgraph-api 0.16) moves to a random free port when its port is taken and
says so in one log warning: the SDK example, Studio and every client configured for
``http://127.0.0.1:2024`` then talk to whatever holds 2024 (an older server of another
project, a stale run) — issue 27. ``hermes dev`` checks the port first; when it is taken it
exits 2 naming the process that holds it and the ``--port`` to use instead, and starts
nothing. Otherwise it runs ``langgraph dev --host HOST --port PORT --no-browser`` plus any
further options (``--no-reload``, ``--tunnel`` …), in the foreground, with the exit code of
the server. The race between the check and the server's own bind is left to ``langgraph dev``.
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import typer

from graph.cli.common import app, report_error

#: ``langgraph dev``'s default port (the URL of the README's SDK example and of Studio).
DEFAULT_PORT = 2024


def port_holder(host: str, port: int) -> str | None:
    """``None`` when ``host:port`` can be bound; else who holds it: ``"pid 123 (python …
    langgraph dev)"`` when the listening process can be seen (psutil), ``"another process"``
    when it cannot (another user's process, no permission)."""
    import psutil

    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, port))
            return None
        except OSError:
            pass
    try:
        for conn in psutil.net_connections(kind="inet"):
            if conn.laddr and conn.laddr.port == port and conn.status == psutil.CONN_LISTEN and conn.pid:
                try:
                    command = " ".join(" ".join(psutil.Process(conn.pid).cmdline()).split())[:120]
                except psutil.Error:
                    command = ""
                return f"pid {conn.pid}" + (f" ({command})" if command else "")
    except psutil.Error:
        pass
    return "another process"


def langgraph_command() -> list[str]:
    """The ``langgraph`` CLI of this environment (beside the interpreter), else ``python -m
    langgraph_cli``."""
    script = Path(sys.executable).parent / "langgraph"
    return [str(script)] if script.exists() else [sys.executable, "-m", "langgraph_cli"]


@app.command(
    "dev",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
)
def dev(
    ctx: typer.Context,
    port: int = typer.Option(DEFAULT_PORT, "--port", min=1, max=65535, help="Port to serve on (never another)."),
    host: str = typer.Option("127.0.0.1", "--host", help="Interface to bind."),
) -> None:
    """Serve the graphs of langgraph.json with `langgraph dev` on exactly --port (default 2024):
    a taken port is an error naming its holder, never a silent move to another port. Further
    options go to `langgraph dev` (e.g. --no-reload)."""
    holder = port_holder(host, port)
    if holder is not None:
        raise typer.Exit(
            report_error(
                None,
                f"port {port} on {host} is taken by {holder}; `langgraph dev` would move to a random port and "
                f"clients of http://{host}:{port} would miss it. Stop that process, or serve elsewhere: "
                f"hermes dev --port {port + 1} (and use http://{host}:{port + 1} in the SDK and Studio)",
                code=2,
            )
        )
    command = [*langgraph_command(), "dev", "--host", host, "--port", str(port), "--no-browser", *ctx.args]
    sys.stdout.flush()
    os.execv(command[0], command)  # the server in the foreground: its signals and exit code are the user's
