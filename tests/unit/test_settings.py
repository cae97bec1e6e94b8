"""graph/context.py: one pydantic-settings model behind ``Context`` (env fallback, bounds,
Studio-visible descriptions) and resource caches keyed on every setting they use."""

from __future__ import annotations

import pytest

from graph import resources
from graph.context import Context, SettingsError


def test_every_field_falls_back_to_its_environment_variable(monkeypatch):
    monkeypatch.setenv("HERMES_TOKEN_BUDGET", "4096")
    monkeypatch.setenv("HERMES_TOOL_TIMEOUTS", '{"generate_report": 60}')
    monkeypatch.setenv("HERMES_ASK_USER_FOR_MISSING", "no")
    ctx = Context()
    assert ctx.token_budget == 4096 and ctx.tool_timeouts == {"generate_report": 60.0}
    assert ctx.ask_user_for_missing is False
    assert Context(token_budget=1000).token_budget == 1000  # an explicit value wins


@pytest.mark.parametrize(
    ("env", "value", "says"),
    [
        ("HERMES_MAX_TOOL_ROUNDS", "0", "greater than or equal to 1"),
        ("HERMES_TOOL_TIMEOUT_S", "-3", "greater than 0"),
        ("HERMES_TOOL_EXECUTOR", "docker-ish", "'subprocess', 'container' or 'remote'"),
        ("HERMES_TOOL_TIMEOUTS", "not json", "HERMES_TOOL_TIMEOUTS"),
    ],
)
def test_out_of_bounds_values_are_refused_with_the_variable_and_the_rule(monkeypatch, env, value, says):
    monkeypatch.setenv(env, value)
    with pytest.raises(SettingsError) as info:
        Context()
    assert env in str(info.value) or env.removeprefix("HERMES_").lower() in str(info.value)
    assert says in str(info.value)


def test_every_field_has_a_description_for_studio():
    schema = Context.model_json_schema()["properties"]
    assert all(prop.get("description") for prop in schema.values()), [
        k for k, p in schema.items() if not p.get("description")
    ]


def test_the_toolbox_cache_is_keyed_on_every_setting_it_uses(tmp_path):
    base = Context(data_dir=str(tmp_path))
    keys = {resources._key(base)}
    for change in (
        {"tool_timeout_s": 3.0},
        {"database": "/x.db"},
        {"tool_timeouts": {"a": 1.0}},
        {"mcp_config": "/m.json"},
        {"tool_executor": "container"},
        {"heavy_tool_timeout_s": 99.0},
    ):
        keys.add(resources._key(base.model_copy(update=change)))
    assert len(keys) == 7
    # a setting the toolbox does not use shares it
    assert resources._key(base.model_copy(update={"temperature": 0.5})) == resources._key(base)


async def test_tool_timeouts_come_from_the_settings(tmp_path):
    """``tool_timeout_s`` is the timeout of every ordinary tool; heavy builtin tools get
    ``heavy_tool_timeout_s``; ``tool_timeouts`` overrides per tool."""
    from tools.builtin.catalog import BUILTIN_TOOLS, register_builtin_tools
    from tools.executors.base import Executor
    from tools.registry import ToolRegistry
    from tools.spec import HEAVY_TIMEOUT_S

    registry = ToolRegistry()
    register_builtin_tools(
        registry, Executor.__new__(Executor), ordinary_s=4.0, heavy_s=40.0, overrides={"query_database": 7.5}
    )
    for spec, _ in BUILTIN_TOOLS:
        got = registry.get(spec.name).timeout_s
        if spec.name == "query_database":
            assert got == 7.5
        else:
            assert got == (40.0 if spec.timeout_s >= HEAVY_TIMEOUT_S else 4.0), spec.name
