"""Reference remote-function server for :class:`tools.executors.remote.RemoteExecutor`.

Runs each posted call through the subprocess backend (confined worker, limits, timeout kill) and
records results in its own idempotency ledger, so a retried ``request_id`` is replayed, never
re-run. Starlette app served by uvicorn (both already in the environment via the dev server).

    python -m tools.remote_server --data-dir DIR [--host 127.0.0.1] [--port 0]
           [--allow tools.builtin.] [--extra-path P] [--backend subprocess|container]

Prints ``HERMES_REMOTE_READY http://HOST:PORT`` on stdout once it listens (``--port 0`` picks a
free port). Endpoints: ``GET /health``; ``POST /v1/run`` with ``{request_id, tool, entrypoint,
arguments, timeout_s}`` → ``{"ok": true, "result", "replayed"}`` or ``{"ok": false,
"error_type", "error"}``; 400 malformed body, 401 bad token (when ``HERMES_REMOTE_TOKEN`` is
set), 403 entrypoint not allowed (only ``--allow`` prefixes run: default ``tools.builtin.``).
Test-only fault injection: ``--fault-503 N`` answers 503 to the first N run requests without
running them; ``--fault-after-run N`` runs the first N requests, then answers 500 (a lost
answer: the client retries and must get the recorded result).

A process of its own, so it has its own settings (:class:`ServerSettings`, environment
``HERMES_REMOTE_TOKEN``, ``HERMES_DATABASE``, ``HERMES_CONTAINER_IMAGE``): the database its
data tools read is the one named on this machine.
"""

from __future__ import annotations

import argparse
import asyncio
import hmac
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic_settings import BaseSettings, SettingsConfigDict

from tools.errors import ToolFailed, ToolTimeout
from tools.executors.subprocess import SubprocessExecutor
from tools.idempotency import IdempotencyLedger, LedgerBusy

if TYPE_CHECKING:
    from starlette.applications import Starlette

#: The server's ledger file inside its data dir (separate from an agent's own ledger).
SERVER_LEDGER_FILE = "remote_idempotency.db"
READY_PREFIX = "HERMES_REMOTE_READY"
MAX_TIMEOUT_S = 300.0


class ServerSettings(BaseSettings):
    """The function server's settings, from its environment (prefix ``HERMES_``)."""

    model_config = SettingsConfigDict(env_prefix="HERMES_", extra="ignore", frozen=True)

    remote_token: str = ""  #: bearer token clients must send ("" = none required)
    database: str = ""  #: the user's database on this machine (SQLite path or sqlite:/// URL)
    container_image: str = "python:3.11-slim"  #: image of the container backend's docker/podman


def build_app(
    executor: Any,
    ledger: IdempotencyLedger,
    *,
    allow: tuple[str, ...],
    token: str | None = None,
    fault_503: int = 0,
    fault_after_run: int = 0,
) -> Starlette:
    """The Starlette app (importable for in-process use)."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    faults = {"503": fault_503, "after": fault_after_run}

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"ok": True, "backend": getattr(executor, "kind", "?")})

    async def run(request: Request) -> JSONResponse:
        if token and not hmac.compare_digest(request.headers.get("authorization", ""), f"Bearer {token}"):
            return JSONResponse({"error": "missing or wrong bearer token"}, status_code=401)
        try:
            body = await request.json()
            request_id = str(body["request_id"])
            entrypoint = str(body["entrypoint"])
            tool = str(body.get("tool") or entrypoint.rpartition(":")[2])
            arguments = body.get("arguments") or {}
            timeout_s = min(float(body.get("timeout_s") or 10.0), MAX_TIMEOUT_S)
            if not isinstance(arguments, dict) or ":" not in entrypoint or not request_id:
                raise ValueError("arguments must be an object, entrypoint 'module:function', request_id non-empty")
        except (ValueError, KeyError, TypeError) as exc:
            return JSONResponse({"error": f"malformed request: {exc}"}, status_code=400)
        if not any(entrypoint.startswith(prefix) for prefix in allow):
            return JSONResponse({"error": f"entrypoint {entrypoint!r} is not allowed on this server"}, status_code=403)
        if faults["503"] > 0:
            faults["503"] -= 1
            return JSONResponse({"error": "injected fault: unavailable"}, status_code=503)

        async def call() -> dict[str, Any]:
            try:
                # the authenticated client says whether the call's tool reaches the schedule
                schedule = body.get("schedule") is True
                result = await executor.run(
                    entrypoint, arguments, timeout_s=timeout_s, request_id=request_id, schedule=schedule
                )
                return {"ok": True, "result": result}
            except ToolTimeout as exc:
                return {"ok": False, "error_type": "ToolTimeout", "error": str(exc)}
            except ToolFailed as exc:
                text = str(exc)
                kind, sep, rest = text.partition(": ")
                if sep and kind.isidentifier():
                    return {"ok": False, "error_type": kind, "error": rest}
                return {"ok": False, "error_type": "ToolFailed", "error": text}

        try:
            record, replayed = await ledger.run_once(tool, request_id, call, keep=lambda r: bool(r.get("ok")))
        except LedgerBusy as exc:
            return JSONResponse({"error": str(exc)}, status_code=503)
        if faults["after"] > 0 and not replayed:
            faults["after"] -= 1
            return JSONResponse({"error": "injected fault: answer lost after the run"}, status_code=500)
        return JSONResponse({**record, "replayed": replayed})

    return Starlette(routes=[Route("/health", health), Route("/v1/run", run, methods=["POST"])])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.remote_server", description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", required=True, type=Path)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--allow", action="append", default=None, help="allowed entrypoint prefix (repeatable)")
    parser.add_argument("--extra-path", action="append", default=[], help="added to the workers' PYTHONPATH")
    parser.add_argument("--backend", choices=("subprocess", "container"), default="subprocess")
    parser.add_argument("--fault-503", type=int, default=0)
    parser.add_argument("--fault-after-run", type=int, default=0)
    opts = parser.parse_args(argv)

    import uvicorn

    settings = ServerSettings()
    data_dir = opts.data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    if opts.backend == "container":
        from tools.executors.container import ContainerExecutor

        executor: Any = ContainerExecutor(
            data_dir, extra_paths=tuple(opts.extra_path), database=settings.database, image=settings.container_image
        )
    else:
        executor = SubprocessExecutor(
            data_dir, extra_paths=tuple(opts.extra_path), confine=True, database=settings.database
        )
    ledger = IdempotencyLedger(data_dir / SERVER_LEDGER_FILE)
    app = build_app(
        executor,
        ledger,
        allow=tuple(opts.allow or ["tools.builtin."]),
        token=settings.remote_token or None,
        fault_503=opts.fault_503,
        fault_after_run=opts.fault_after_run,
    )
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((opts.host, opts.port))
    host, port = sock.getsockname()[:2]
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    server = uvicorn.Server(config)

    async def serve() -> None:
        task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started and not task.done():  # noqa: ASYNC110 - uvicorn has no "started" event
            await asyncio.sleep(0.01)
        if server.started:
            print(f"{READY_PREFIX} http://{host}:{port}", flush=True)
        await task
        ledger.close()

    asyncio.run(serve())
    return 0


if __name__ == "__main__":
    sys.exit(main())
