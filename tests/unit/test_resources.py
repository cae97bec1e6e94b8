"""graph/resources.py: the one way nodes get their live resources (docs/DESIGN.md §10
"Resources"): ``runtime.context`` → ``get_toolbox`` / ``get_memory`` / ``get_model``, each cached
under every setting it is built from; and no environment read outside the settings module."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from typing_extensions import TypedDict

from graph import model as model_module
from graph import resources
from graph.context import Context

ROOT = Path(__file__).resolve().parents[2]

_seen: set[str] = set()


class Recording(Context):
    """A Context that records which settings are read."""

    def __getattribute__(self, name: str) -> Any:
        if name in type(self).model_fields:
            _seen.add(name)
        return super().__getattribute__(name)


class _FakeToolbox:
    problems: dict[str, str] = {}  # noqa: RUF012

    def __init__(self, **kw: Any) -> None:
        self.opened_with = kw

    async def aclose(self) -> None:
        pass


@pytest.fixture
def fake_open(monkeypatch):
    """``Toolbox.open`` replaced by a recorder (no MCP server, no worker process)."""
    from tools.toolbox import Toolbox

    opened: list[_FakeToolbox] = []

    async def open_(data_dir: Path, mcp_config: Path | None = None, timeout_s: float = 10.0, **kw: Any):
        box = _FakeToolbox(data_dir=data_dir, mcp_config=mcp_config, timeout_s=timeout_s, **kw)
        opened.append(box)
        return box

    monkeypatch.setattr(Toolbox, "open", staticmethod(open_))
    yield opened
    resources._toolboxes.clear()


class _State(TypedDict, total=False):
    seen: list[int]


def _graph():
    """A one-node graph whose node gets its toolbox and model the documented way."""

    async def node(state: _State, runtime: Runtime[Context]) -> dict[str, Any]:
        toolbox = await resources.get_toolbox(runtime.context)
        model = await resources.get_model(runtime.context)
        return {"seen": [id(toolbox), id(model)]}

    builder = StateGraph(_State, context_schema=Context)
    builder.add_node("node", node)
    builder.add_edge(START, "node")
    builder.add_edge("node", END)
    return builder.compile()


async def test_a_run_whose_context_changes_a_setting_gets_its_own_resources(fake_open, tmp_path):
    graph = _graph()
    base = Context(data_dir=str(tmp_path), model="gpt-x", base_url="http://127.0.0.1:9/v1")
    first = (await graph.ainvoke({}, context=base))["seen"]
    again = (await graph.ainvoke({}, context=base.model_copy()))["seen"]
    assert again == first, "the same settings share the toolbox and the model"
    tighter = (await graph.ainvoke({}, context=base.model_copy(update={"tool_timeout_s": 2.0})))["seen"]
    assert tighter[0] != first[0] and tighter[1] == first[1], "a toolbox setting: a toolbox of its own only"
    hotter = (await graph.ainvoke({}, context=base.model_copy(update={"temperature": 0.7})))["seen"]
    assert hotter[0] == first[0] and hotter[1] != first[1], "a model setting: a model of its own only"
    assert [box.opened_with["timeout_s"] for box in fake_open] == [base.tool_timeout_s, 2.0]
    model = await resources.get_model(base.model_copy(update={"temperature": 0.7}))
    assert model.temperature == 0.7  # type: ignore[attr-defined]
    await resources.aclose_resources()


async def test_every_setting_a_resource_reads_is_in_its_key(fake_open, tmp_path, monkeypatch):
    class _Server:
        async def start(self, entry: Any) -> str:
            return "http://127.0.0.1:1/v1"

    monkeypatch.setattr(resources, "embedded_server", lambda _d=".hermes": _Server())
    monkeypatch.setattr(model_module, "embedded_server", lambda _d=".hermes": _Server())
    for context, build, key in [
        (
            Recording(data_dir=str(tmp_path), tool_executor="remote", remote_url="http://x"),
            resources.get_toolbox,
            resources.TOOLBOX_SETTINGS,
        ),
        (
            Recording(data_dir=str(tmp_path), model="gpt-x", base_url="http://127.0.0.1:9/v1"),
            resources.get_model,
            resources.MODEL_SETTINGS,
        ),
        (Recording(data_dir=str(tmp_path)), resources.get_model, resources.MODEL_SETTINGS),  # embedded
        (Recording(data_dir=str(tmp_path), embeddings="hash"), resources.get_memory, resources.MEMORY_SETTINGS),
    ]:
        _seen.clear()
        result = build(context)
        if hasattr(result, "__await__"):
            await result
        assert _seen, build
        assert _seen <= set(key), f"{build.__name__} reads {sorted(_seen - set(key))}, which its key lacks"
    await resources.aclose_resources()


async def test_the_toolbox_gets_the_secret_by_the_name_the_context_gives(fake_open, tmp_path, monkeypatch):
    monkeypatch.setenv("MY_REMOTE_TOKEN", "s3cret")
    await resources.get_toolbox(
        Context(data_dir=str(tmp_path), remote_token_env="MY_REMOTE_TOKEN", container_image="img:1")
    )
    assert fake_open[-1].opened_with["remote_token"] == "s3cret"
    assert fake_open[-1].opened_with["container_image"] == "img:1"
    assert "s3cret" not in repr(resources._toolboxes.keys()), "a secret is never part of a key"


async def test_a_registered_model_is_built_by_its_factory_each_time(tmp_path):
    built: list[GenericFakeChatModel] = []

    def factory(_context: Context) -> GenericFakeChatModel:
        built.append(GenericFakeChatModel(messages=iter([AIMessage("hi")])))
        return built[-1]

    model_module.register_model("resources-fake", factory)
    context = Context(model="resources-fake", data_dir=str(tmp_path))
    assert await resources.get_model(context) is built[0]
    assert await resources.get_model(context) is built[1]  # the factory decides about sharing


async def test_an_embedded_server_restart_gives_a_new_model(tmp_path, monkeypatch):
    urls = iter(["http://127.0.0.1:1/v1", "http://127.0.0.1:1/v1", "http://127.0.0.1:2/v1"])

    class _Server:
        async def start(self, entry: Any) -> str:
            return next(urls)

    server = _Server()
    monkeypatch.setattr(resources, "embedded_server", lambda _d=".hermes": server)
    monkeypatch.setattr(model_module, "embedded_server", lambda _d=".hermes": server)
    context = Context(data_dir=str(tmp_path))
    first = await resources.get_model(context)  # start → port 1 (and load_chat_model's start)
    urls = iter(["http://127.0.0.1:1/v1"])
    assert await resources.get_model(context) is first  # still running on port 1
    urls = iter(["http://127.0.0.1:2/v1", "http://127.0.0.1:2/v1"])
    second = await resources.get_model(context)  # died and restarted on port 2
    assert second is not first and second.openai_api_base == "http://127.0.0.1:2/v1"  # type: ignore[attr-defined]
    await resources.aclose_resources()


# -- no environment read outside the settings module ---------------------------------------------

#: Where ``os.environ`` may appear, and why. Everything else takes settings from graph/context.py
#: and the environment itself (a named secret, propagation to a child, OMP_WAIT_POLICY for a
#: native library) through base/environment.py.
ALLOWED = {
    "base/environment.py": "the process environment: the one module that touches os.environ",
}


def _environment_reads(path: Path) -> list[int]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names = ("environ", "environb", "getenv", "getenvb", "putenv", "unsetenv")
    return [
        node.lineno
        for node in ast.walk(tree)
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "os"
            and node.attr in names
        )
        or (isinstance(node, ast.ImportFrom) and node.module == "os" and any(a.name in names for a in node.names))
    ]


def test_no_environment_read_outside_the_settings_module():
    found = {}
    for package in ("graph", "nodes", "tools", "memory", "base"):
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel not in ALLOWED and (lines := _environment_reads(path)):
                found[rel] = lines
    assert not found, (
        "os.environ outside base/environment.py (take a setting from Context or MachineSettings, "
        f"the environment itself from base.environment): {found}"
    )
