"""Shared fixtures: scripted LangChain fake chat models and in-process tool registries for
deterministic tests of graph logic (never used by the product)."""

from __future__ import annotations

import itertools
import shutil
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Self, cast

import pytest
import typer.main
import typer.testing
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from pydantic import Field

import tools.toolbox  # noqa: F401  (the MCP stdio client binds sys.stderr at import: import it

#                       before typer's CliRunner swaps in a stderr without a file descriptor)
from graph import resources
from graph.context import Context
from graph.model import register_model
from tools.registry import ToolRegistry
from tools.spec import ToolSpec
from tools.toolbox import Toolbox

_click_trees: dict[int, tuple[typer.Typer, Any]] = {}


def _click_tree(app: typer.Typer) -> Any:
    """``typer.main.get_command(app)``, built once per app object for the session.

    typer's ``CliRunner.invoke`` rebuilds the click command tree of the app on every call:
    ~26 ms for ``hermes``' ~30 commands (measured at load 5), paid ~190 times by tests/unit. The
    tree is read-only once built — parsing makes a new click context per call and the commands
    call the functions the app registered at import, which no test replaces on the app — so one
    tree serves every call. A test that imports ``graph.cli`` afresh gets a new app, so a new
    tree (the app is kept with it, so its ``id`` is not reused)."""
    built = _click_trees.get(id(app))
    if built is None or built[0] is not app:
        built = _click_trees[id(app)] = (app, typer.main.get_command(app))
    return built[1]


typer.testing._get_command = _click_tree  # type: ignore[attr-defined,assignment]  # what CliRunner.invoke calls


class OfferViolation(AssertionError):
    """A scripted reply called a tool the graph did not bind to that model call."""


class ScriptedChat(GenericFakeChatModel):
    """GenericFakeChatModel that respects ``bind_tools`` and records every prompt it was sent.

    Like a real model, it can only call what was offered: a scripted reply naming a tool that
    was not bound to that call raises :class:`OfferViolation`, so a test cannot pass by calling
    tools the graph would never offer. ``ignore_offer=True`` plays a model that calls unoffered
    tools anyway (hosted models can), for tests of the dispatch-time refusal. ``offers`` records
    the tool names bound to each call (``None`` = no tools bound)."""

    seen: list[list[BaseMessage]] = Field(default_factory=list)
    offers: list[list[str] | None] = Field(default_factory=list)
    bound: list[str] | None = None
    ignore_offer: bool = False
    # its offer check lives in _agenerate: a streamed call (the CLI's "messages" stream) must
    # go through it too, so it never streams
    disable_streaming: bool = True

    def bind_tools(self, tools: Any, **kwargs: Any) -> Self:
        names = [
            t["function"]["name"] if isinstance(t, dict) and "function" in t else getattr(t, "name", str(t))
            for t in tools
        ]
        return self.model_copy(update={"bound": names})

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
        self.seen.append(list(messages))
        self.offers.append(self.bound)
        result = await super()._agenerate(messages, stop=stop, run_manager=run_manager, **kwargs)
        reply = result.generations[0].message
        offered = set(self.bound or [])
        wrong = [c["name"] for c in getattr(reply, "tool_calls", []) if c["name"] not in offered]
        if wrong and not self.ignore_offer:
            raise OfferViolation(f"scripted reply calls {wrong} but this model call was offered {sorted(offered)}")
        return result


def use_toolbox(context: Context, box: FakeToolbox) -> None:
    """``resources.set_toolbox`` with a stand-in: it has what the graph reads of a Toolbox
    (``registry``, ``aclose``)."""
    resources.set_toolbox(context, cast(Toolbox, box))


def recording_post(posts: list[tuple[str, str]]) -> Callable[..., dict[str, int]]:
    """An in-process ``post_message(channel, text)``: appends ``(channel, text)`` to ``posts``
    and returns ``{"id": <how many posts so far>}``."""

    def post_message(channel: str = "project", text: str = "") -> dict[str, int]:
        posts.append((channel, text))
        return {"id": len(posts)}

    return post_message


def tool_call(name: str, args: dict[str, Any] | None = None, call_id: str | None = None) -> AIMessage:
    """An AI message asking for one tool call."""
    return AIMessage(
        content="",
        tool_calls=[
            {"type": "tool_call", "name": name, "args": args or {}, "id": call_id or f"call_{uuid.uuid4().hex[:8]}"}
        ],
    )


class FakeToolbox:
    """Toolbox stand-in for graph-logic tests: a real ToolRegistry with in-process runners."""

    def __init__(self) -> None:
        self.registry = ToolRegistry()
        self.closed = False

    def add(
        self,
        name: str,
        fn: Callable[..., Any],
        params: dict[str, Any] | None = None,
        side_effect: bool = False,
        **meta: Any,
    ) -> None:
        """Register ``fn`` as tool ``name``; ``meta``: other ToolSpec fields (``requested_by``,
        ``idempotent``, ``artifact_field``, ``timeout_s``)."""

        async def runner(args: dict[str, Any], request_id: str) -> Any:
            return fn(**args)

        spec = ToolSpec(
            name=name,
            description=f"Test tool {name}: used by the graph-logic tests only, never by the product.",
            parameters=params or {"type": "object", "properties": {}, "required": []},
            side_effect=side_effect,
            **meta,
        )
        self.registry.register(spec, runner)

    def add_spec(self, spec: ToolSpec, fn: Callable[..., Any]) -> None:
        """Register a copy of a real tool's ``spec`` (its metadata included) with ``fn`` run
        in process."""

        async def runner(args: dict[str, Any], request_id: str) -> Any:
            return fn(**args)

        self.registry.register(spec, runner)

    async def aclose(self) -> None:
        self.closed = True


#: The request patterns the bundled team-chat server declares for ``post_message``
#: (``_meta["hermes/requested_by"]``), for unit tests that use a copy of it in process.
POST_MESSAGE = ToolSpec(
    name="post_message",
    description=(
        "Post a message to a team chat channel (e.g. the project group 'sales-team'), visible to "
        "everyone in it. Use it to share a finished report or an announcement. (In-process copy "
        "of the bundled server's tool, for unit tests.)"
    ),
    parameters={
        "type": "object",
        "properties": {"channel": {"type": "string"}, "text": {"type": "string"}},
        "required": [],
    },
    side_effect=True,
    requested_by=(
        r"\b(post|send|share|announce)\b.{0,80}\b(group|channel|team|chat)\b",
        r"(发到|发送到|发给).{0,20}(群|频道)",
    ),
    source="mcp:team_chat",
)


def flagship_specs() -> list[ToolSpec]:
    """The flagship task's tool definitions with their real metadata (builtin catalog + the
    team-chat ``post_message``), for tests that run the graph with in-process stand-ins."""
    from tools.builtin.catalog import BUILTIN_TOOLS

    return [spec for spec, _ in BUILTIN_TOOLS] + [POST_MESSAGE]


@pytest.fixture(scope="session")
def generated_db(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    """``generated_db(generate, dest, **kwargs)`` → ``dest``: a fresh copy of the database
    ``generate(path, **kwargs)`` builds (``tools.builtin.demo_db``'s generators are
    deterministic), built once per session — a generation takes ~0.2 s, a copy ~1 ms. The
    copy is the test's own to change."""
    built: dict[tuple[Any, ...], Path] = {}

    def make(generate: Callable[..., Path], dest: Path | str, **kwargs: Any) -> Path:
        key = (generate.__module__, generate.__qualname__, tuple(sorted(kwargs.items())))
        if key not in built:
            built[key] = generate(tmp_path_factory.mktemp("generated") / "generated.db", **kwargs)
        dest = Path(dest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built[key], dest)
        return dest

    return make


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "hermes"


@pytest.fixture
def scripted(data_dir: Path):
    """``scripted(replies, toolbox)`` → a Context whose model replays ``replies`` in order."""
    counter = itertools.count()

    def make(replies: Iterable[AIMessage | str], toolbox: FakeToolbox | None = None, **ctx: Any) -> Context:
        name = f"scripted-{next(counter)}-{uuid.uuid4().hex[:6]}"
        ignore = ctx.pop("ignore_offer", False)
        model = ScriptedChat(messages=iter(list(replies)), ignore_offer=ignore)
        model.seen = []
        model.offers = []
        register_model(name, lambda _ctx: model)
        context = Context(model=name, data_dir=str(data_dir), **ctx)
        use_toolbox(context, toolbox or FakeToolbox())
        make.models[name] = model  # type: ignore[attr-defined]
        return context

    make.models = {}  # type: ignore[attr-defined]
    yield make


@pytest.fixture(autouse=True)
async def _finish_background_writes():
    """Let memory writes started off the hot path finish inside the test's own event loop."""
    yield
    await resources.drain_background()


# -- the builtin tools' demo databases -------------------------------------------------------------
# shared by tests/unit/test_tools_builtin.py and test_database_tools.py and their worker-process
# counterparts in tests/integration (one definition)

#: The last month of the demo databases these fixtures generate (``end_month``).
DEMO_END_MONTH = "2025-06"


@pytest.fixture
def db(tmp_path: Path, generated_db) -> Path:
    """The user's database: a generated demo DB outside the data dir."""
    from tools.builtin.demo_db import generate_sales_db

    return generated_db(generate_sales_db, tmp_path / "user" / "sales.db", months=6, end_month=DEMO_END_MONTH)


@pytest.fixture
def data(tmp_path: Path) -> Path:
    d = tmp_path / "data"
    d.mkdir()
    return d


@pytest.fixture
def reg(data: Path, db: Path) -> ToolRegistry:
    from tools.builtin.catalog import register_builtin_tools
    from tools.executors.subprocess import SubprocessExecutor

    r = ToolRegistry()
    register_builtin_tools(r, SubprocessExecutor(data, database=str(db)))
    return r


@pytest.fixture(scope="module")
def dbs(tmp_path_factory) -> dict[str, Path]:
    from tools.builtin.demo_db import generate_invoices_db, generate_sales_db

    d = tmp_path_factory.mktemp("user_dbs")
    return {
        "sales": generate_sales_db(d / "sales.db", months=6, end_month=DEMO_END_MONTH),
        "invoices": generate_invoices_db(d / "books" / "ledger.sqlite", years=3, end_month=DEMO_END_MONTH),
    }


@pytest.fixture
def sales(dbs) -> str:
    return str(dbs["sales"])


@pytest.fixture
def invoices(dbs) -> str:
    return str(dbs["invoices"])
