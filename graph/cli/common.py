"""The ``hermes`` Typer application and what its commands share: settings from options, the
exit-code mapping of failures, opening the checkpointed agent graph."""

from __future__ import annotations

import json
import logging
import sqlite3
import sys
import time
import traceback
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape
from typer.core import TyperCommand, TyperGroup

from graph.cli.render import err_console, stop_live

if TYPE_CHECKING:
    # Only type names here. Every module of the runtime (the graph, the model client, the
    # checkpointer, LanceDB, the embedder) is imported inside the command that uses it, so
    # `hermes --help` and the read-only commands start in a fraction of a second
    # (tests/unit/test_cli_startup.py checks what `import graph.cli` loads).
    from langgraph.graph.state import CompiledStateGraph

    from graph.branches import Branches
    from graph.context import Context


def debug() -> bool:
    """``HERMES_DEBUG`` set: tracebacks instead of one-line errors (a switch of the command, not
    a setting of the graph). Every command reports its failures through :func:`report_error`."""
    from graph.context import MachineSettings

    return bool(MachineSettings().debug)


def raised(exc: BaseException, *kinds: str) -> bool:
    """True when ``exc`` is an instance of one of ``kinds`` (``"module:Class"``). Nothing is
    imported: a class whose module was never loaded cannot have been raised (so classifying a
    failure does not load the graph)."""
    for kind in kinds:
        module, _, name = kind.partition(":")
        cls = getattr(sys.modules.get(module), name, None)
        if isinstance(cls, type) and isinstance(exc, cls):
            return True
    return False


DEBUG_HINT = "rerun with HERMES_DEBUG=1 for a traceback"


def report_error(exc: BaseException | None, message: str, code: int = 1, json_out: bool = False, **fields: Any) -> int:
    """Say why a command failed and return its exit ``code``: ``message`` on one line on stderr
    (as ``{"error", "exit_code", **fields}`` JSON on stdout with ``json_out``), preceded by the
    traceback of ``exc`` when ``HERMES_DEBUG`` is set — the same for every command, whichever
    failure it was (expected or not)."""
    if exc is not None and debug():
        sys.stderr.write("".join(traceback.format_exception(exc)))
        sys.stderr.flush()
    if json_out:
        print(json.dumps({"error": message, "exit_code": code, **fields}, ensure_ascii=False))
    else:
        err_console.print(f"[red]error:[/red] {escape(message)}", highlight=False, soft_wrap=True)
    return code


def unexpected_message(exc: BaseException, thread_id: str = "") -> str:
    """The one line for a failure no command expected: its type and text, what was kept, and
    how to see the traceback."""
    kept = f" The thread's checkpoints are kept (--thread {thread_id})." if thread_id else ""
    text = " ".join(str(exc).split()).rstrip(".") or "(no message)"
    hint = "" if debug() else f" {DEBUG_HINT[0].upper()}{DEBUG_HINT[1:]}."
    return f"{type(exc).__name__}: {text}.{kept}{hint}"


class LazyCommand(TyperCommand):
    """A command defined elsewhere, loaded (with everything its module imports) when it is run
    or its own ``--help`` is asked for; the group's ``--help`` shows ``help`` without loading it.
    ``load`` returns the real command (``typer.main.get_command`` of a one-command Typer)."""

    def __init__(self, name: str, load: Callable[[], Any], help: str) -> None:  # noqa: A002 - click's keyword
        super().__init__(name, help=help)
        self._load = load
        self._real: Any = None

    def real(self) -> Any:
        if self._real is None:
            self._real = self._load()
        return self._real

    def make_context(self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any) -> Any:
        return self.real().make_context(info_name, args, parent=parent, **extra)

    def invoke(self, ctx: Any) -> Any:
        return self.real().invoke(ctx)


#: Commands added to the top-level group as :class:`LazyCommand` (``hermes eval``).
LAZY_COMMANDS: dict[str, LazyCommand] = {}


class HermesGroup(TyperGroup):
    """The top-level command group: an exception that no command turned into a message (a
    bug, or a failure outside ``guarded``) ends as one line and exit 1 — with its traceback
    when ``HERMES_DEBUG`` is set — never as a bare traceback. Holds :data:`LAZY_COMMANDS` too."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name, command in LAZY_COMMANDS.items():
            self.add_command(command, name)

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        ctx.meta["hermes_args"] = list(args)  # for the data directory of a damaged-file message
        return super().parse_args(ctx, args)

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, typer.TyperException):  # exit codes, Ctrl-C, usage errors
            raise
        except sqlite3.DatabaseError as exc:
            raise typer.Exit(report_error(exc, damaged_database_message(_data_dir_of(ctx), exc))) from None
        except Exception as exc:  # noqa: BLE001 - the last resort: any error is one message and an exit code
            if raised(
                exc, "graph.context:SettingsError"
            ):  # a bad HERMES_* value: its message says which and how to fix it
                raise typer.Exit(report_error(exc, str(exc))) from None
            raise typer.Exit(report_error(exc, unexpected_message(exc))) from None


def _data_dir_of(ctx: Any) -> Path | None:
    """The data directory the command line names (``--data-dir DIR`` or ``--data-dir=DIR``), else
    the settings' (``HERMES_DATA_DIR``, ``.hermes``); None when the settings cannot be read."""
    args = [str(a) for a in ctx.meta.get("hermes_args") or []]
    for i, arg in enumerate(args):
        if arg == "--data-dir" and i + 1 < len(args):
            return Path(args[i + 1])
        if arg.startswith("--data-dir="):
            return Path(arg.split("=", 1)[1])
    try:
        return resolve_data_dir(None)
    except ValueError:
        return None


app = typer.Typer(help="Hermes Agent: a LangGraph agent runtime.", no_args_is_help=True, cls=HermesGroup)
branch_app = typer.Typer(
    help="Branches of a thread: its checkpoints as a tree (rollback, fork, switch).", no_args_is_help=True
)
session_app = typer.Typer(help="Sessions (threads) and their workbench state.", no_args_is_help=True)
tools_app = typer.Typer(help="The tool registry: definitions and their lint.", no_args_is_help=True)
reminders_app = typer.Typer(
    help="Reminders: list them, see what is due, fire what is due (once per period; `hermes serve` keeps checking).",
    no_args_is_help=True,
)
app.add_typer(branch_app, name="branch")
app.add_typer(session_app, name="session")
app.add_typer(tools_app, name="tools")
app.add_typer(reminders_app, name="reminders")

EXIT_ASKED = 3

DATA_DIR_OPT = typer.Option(None, help="Data directory.")
MCP_OPT = typer.Option(None, help="mcpServers JSON (default: HERMES_MCP_CONFIG or the bundled team chat).")
NOW_OPT = typer.Option(
    None, "--now", help="The clock, ISO-8601 (e.g. 2026-12-01T09:30; naive = local time). Default: now."
)


class _Concise(logging.Formatter):
    """One line per warning; tracebacks only with HERMES_DEBUG=1."""

    def format(self, record: logging.LogRecord) -> str:
        message = f"{record.levelname.lower()}: {record.getMessage()}"
        if record.exc_info and debug():
            message += "\n" + self.formatException(record.exc_info)
        elif record.exc_info and record.exc_info[1] is not None:
            message += f" ({type(record.exc_info[1]).__name__}: {record.exc_info[1]})"
        return message


@app.callback()
def _setup_logging() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Concise())
    logging.basicConfig(level=logging.WARNING, handlers=[handler], force=True)


def make_context(model: str | None, base_url: str | None, data_dir: str | None, max_tool_rounds: int | None) -> Context:
    """The settings of a command: its options over ``HERMES_*`` (``graph.context.Context``)."""
    from graph.context import Context

    overrides: dict[str, Any] = {}
    if model:
        overrides["model"] = model
    if base_url:
        overrides["base_url"] = base_url
    if data_dir:
        overrides["data_dir"] = data_dir
    if max_tool_rounds:
        overrides["max_tool_rounds"] = max_tool_rounds
    return Context(**overrides)


def context_or_exit(
    model: str | None, base_url: str | None, data_dir: str | None, max_tool_rounds: int | None
) -> Context:
    """:func:`make_context`, or exit 1 with the settings error (a bad ``HERMES_*`` value)."""
    try:
        return make_context(model, base_url, data_dir, max_tool_rounds)
    except ValueError as exc:
        raise typer.Exit(report_error(exc, str(exc))) from None


def resolve_data_dir(data_dir: str | None) -> Path:
    """The data directory of ``--data-dir`` or the settings."""
    return Path(make_context(None, None, data_dir, None).data_dir)


def damaged_files(data_dir: Path) -> list[Path]:
    """The SQLite files of ``data_dir`` (checkpoints, ledger, reminders, chat, memory) that
    cannot be read: a wrong header or a failed ``PRAGMA quick_check`` (opened read-only)."""
    from base.sqlite_files import open_sqlite  # lazy: only a failed command looks for damage

    found: list[Path] = []
    for path in sorted([*data_dir.glob("*.db"), *data_dir.glob("*.sqlite"), *data_dir.glob("*/*.db")]):
        try:
            with path.open("rb") as f:
                if f.read(16) != b"SQLite format 3\x00":
                    found.append(path)
                    continue
            con = open_sqlite(path, read_only=True)
            try:
                if con.execute("PRAGMA quick_check").fetchone()[0] != "ok":
                    found.append(path)
            finally:
                con.close()
        except (OSError, sqlite3.Error):
            found.append(path)
    return found


def damaged_database_message(data_dir: Path | None, exc: BaseException) -> str:
    """What to say when an SQLite file could not be used: which file, and what moving it aside
    costs (the checkpoints are rebuilt from the mirror; the ledger forgets which requests ran)."""
    bad = damaged_files(data_dir) if data_dir is not None and data_dir.is_dir() else []
    if not bad:
        return (
            f"a database file could not be used ({exc}); no damaged file was found in "
            f"{data_dir or 'the data dir'}" + ("." if debug() else f": {DEBUG_HINT}.")
        )
    stamp = time.strftime("%Y%m%d-%H%M%S")
    advice = []
    for path in bad:
        aside = f"{path}.broken-{stamp}"
        if path.name == "checkpoints.sqlite":
            advice.append(
                f"the checkpoint database {path} is damaged: move it aside (mv {path} {aside}) and "
                "rerun with the same --thread; the session is rebuilt from its plain-text mirror"
            )
        elif path.name == "idempotency.db":
            advice.append(
                f"the idempotency ledger {path} is damaged: side-effect tools are refused until it is "
                f"moved aside (mv {path} {aside}); moving it forgets which requests already ran"
            )
        else:
            advice.append(f"{path} is damaged: move it aside (mv {path} {aside}); what it held is lost")
    return f"cannot use a data file ({exc}): " + "; ".join(advice) + "."


async def guarded(
    coro_factory: Callable[[], Awaitable[Any]],
    context: Context | None = None,
    thread_id: str = "",
    json_out: bool = False,
) -> int:
    """Run ``coro_factory()``; map failures to an exit code and a one-line message that says what
    to do (as JSON on stdout with ``--json``; with ``HERMES_DEBUG`` the traceback first, see
    :func:`report_error`). Always closes MCP sessions and the embedded server. Codes: 2 model
    unavailable, 1 anything else."""
    import asyncio  # (running: already loaded) asyncio loads with the first command that runs

    code, message = 0, ""
    failure: BaseException | None = None
    interrupted = False
    try:
        await coro_factory()
    except asyncio.CancelledError:
        interrupted = True  # Ctrl-C (asyncio.run cancels the main task): close quickly
        raise
    except (typer.Exit, typer.Abort):
        raise
    except Exception as exc:  # noqa: BLE001 - the last resort: any error is one message and an exit code
        code, failure = 1, exc
        if raised(exc, "graph.embedded.errors:ModelUnavailableError"):
            code, message = 2, f"model unavailable: {exc}"
        elif raised(
            exc,
            "graph.runner:ThreadBusyError",
            "graph.runner:NothingToResumeError",
            "graph.branches:BranchError",
            "memory.migrations:MemoryStoreError",  # its message names the file and what to do
        ):
            message = str(exc)
        elif raised(exc, "tools.mcp.config:MCPConfigError"):
            message = f"{exc} (the MCP config named by --mcp-config or HERMES_MCP_CONFIG)"
        elif isinstance(exc, sqlite3.DatabaseError):
            message = damaged_database_message(Path(context.data_dir) if context else None, exc)
        else:  # a clear message instead of a traceback; details with HERMES_DEBUG=1
            message = unexpected_message(exc, thread_id)
    finally:
        stop_live()  # a node that failed leaves no live line behind
        await aclose_opened(interrupted=interrupted)
    if code:
        report_error(failure, message, code, json_out, thread_id=thread_id or None)
    return code


#: Seconds an interrupted command waits for its background writes (30 otherwise). A memory
#: write is held durably before its slow part (``memory.held_writes``): what is cut off here is
#: replayed by the next process, so Ctrl-C need not wait for a passage embedding under load
#: (measured: ``hermes serve`` not gone 30 s after Ctrl-C on a loaded machine).
INTERRUPTED_DRAIN_S = 3.0


async def aclose_opened(*, interrupted: bool = False) -> None:
    """Close what a command opened: background memory writes (up to 30 s, or
    :data:`INTERRUPTED_DRAIN_S` when ``interrupted``), toolboxes (MCP sessions), memory services
    (``graph.resources.aclose_resources``) and the embedded llama.cpp server. A module that was
    never imported opened nothing, so nothing is imported here either."""
    resources = sys.modules.get("graph.resources")
    if resources is not None:
        await resources.aclose_resources(drain_timeout_s=INTERRUPTED_DRAIN_S if interrupted else 30.0)
    server = sys.modules.get("graph.embedded.server")
    if server is not None:
        await server.astop_embedded_server()


def run_sync(main: Coroutine[Any, Any, int], thread_id: str = "") -> int:
    """``asyncio.run(main)``; Ctrl-C ends with exit 130 and says how to continue."""
    import asyncio  # not at the top: `hermes --help` runs nothing

    try:
        return asyncio.run(main)
    except KeyboardInterrupt:
        stop_live()  # the live progress line, and the cursor it hid
        err_console.print(
            "[yellow]interrupted; the last checkpoint is kept[/yellow]"
            + (f" — continue with --thread {thread_id}" if thread_id else "")
        )
        return 130


def require_db(data_dir: Path) -> str:
    """Where the checkpoints are, for messages: the checkpoint file of ``data_dir``, or exit 1
    when there is none or it cannot be read as one (damaged, not SQLite, a directory, no
    ``checkpoints`` table) — checked read-only first, so the read-only commands neither fail
    with a traceback nor write to a damaged file. With ``HERMES_POSTGRES_URL`` the checkpoints
    are in that database ("the PostgreSQL database <URL without its password>"): nothing to
    check here (a new database gets its tables when the saver opens it)."""
    from base.postgres_urls import redacted
    from graph.checkpoint_reader import checkpoints_file, postgres_url  # not graph.checkpoints: no graph

    path = checkpoints_file(data_dir)
    url = postgres_url()
    if url:
        return f"the PostgreSQL database {redacted(url)} (HERMES_POSTGRES_URL)"
    if not path.exists():
        raise typer.Exit(report_error(None, f"no checkpoints at {path} (wrong --data-dir, or no run yet)"))
    problem = checkpoint_file_problem(path)
    if problem:
        aside = f"{path}.broken-{time.strftime('%Y%m%d-%H%M%S')}"
        raise typer.Exit(
            report_error(
                None,
                f"the checkpoint file cannot be read ({problem}); nothing was changed. Move it aside "
                f"(mv {path} {aside}) and rerun `hermes run --thread THREAD ...`: each thread is rebuilt "
                f"from its plain-text mirror in {data_dir / 'mirror'}.",
            )
        )
    return str(path)


def checkpoint_file_problem(path: Path) -> str:
    """Why ``path`` is not a readable checkpoint file ("" when it is), opened read-only."""
    from base.sqlite_files import open_sqlite  # lazy: not every command reads the checkpoints

    if path.is_dir():
        return f"{path} is a directory"
    try:
        con = open_sqlite(path, read_only=True)
        try:
            if con.execute("PRAGMA quick_check").fetchone()[0] != "ok":
                return f"{path} fails its integrity check"
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            columns = {r[1] for r in con.execute("PRAGMA table_info(checkpoints)")}
        finally:
            con.close()
    except sqlite3.Error as exc:
        return f"{path}: {exc}"
    if not {"checkpoints", "writes"} <= tables or not {"thread_id", "checkpoint_id", "checkpoint"} <= columns:
        return f"{path} has no checkpoint tables (missing: {', '.join(sorted({'checkpoints', 'writes'} - tables)) or 'columns'})"
    return ""


def run_command(coro_factory: Callable[[], Awaitable[Any]], data_dir: Path | None = None) -> None:
    """Run a branch/session command: a one-line message and exit 1 for every failure — the
    expected ones (:class:`BranchError`, an unknown thread or checkpoint), a damaged data file in
    ``data_dir``, and anything else (with ``HERMES_DEBUG``, the traceback too)."""

    async def go() -> int:
        import asyncio

        try:
            await coro_factory()
            return 0
        except LookupError as exc:
            return report_error(exc, str(exc).strip("'\""))
        except sqlite3.DatabaseError as exc:
            return report_error(exc, damaged_database_message(data_dir, exc))
        except asyncio.CancelledError:
            raise
        except (typer.Exit, typer.Abort):
            raise
        except Exception as exc:  # noqa: BLE001 - the last resort: any error is one message and an exit code
            if raised(exc, "graph.branches:BranchError"):
                return report_error(exc, str(exc).strip("'\""))
            return report_error(exc, unexpected_message(exc))

    code = run_sync(go())
    if code:
        raise typer.Exit(code)


def read_checkpoints(data_dir: Path) -> Any:
    """``async with read_checkpoints(data_dir) as reader:`` the read-only
    ``graph.checkpoint_reader.CheckpointReader`` of the data directory's checkpoints (the
    SQLite file, or the ``HERMES_POSTGRES_URL`` database): no agent graph is built."""
    from graph.checkpoint_reader import checkpoints_file, open_reader, postgres_url

    return open_reader(checkpoints_file(data_dir), postgres_url())


class OpenAgent:
    """``async with OpenAgent(data_dir) as (agent, branches):`` the SQLite-checkpointed agent graph."""

    def __init__(self, data_dir: Path) -> None:
        from graph.checkpoints import checkpoints_file, open_checkpointer

        self.data_dir = data_dir
        self._cm = open_checkpointer(checkpoints_file(data_dir))

    async def __aenter__(self) -> tuple[CompiledStateGraph[Any, Any, Any, Any], Branches]:
        from graph.branches import Branches
        from graph.builder import make_graph
        from graph.mirror import ThreadMirror

        saver = await self._cm.__aenter__()
        agent = make_graph(checkpointer=saver)
        return agent, Branches(agent, mirror=ThreadMirror(self.data_dir))

    async def __aexit__(self, *exc: Any) -> None:
        await self._cm.__aexit__(*exc)
