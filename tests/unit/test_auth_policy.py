"""The pure parts of the server's authorisation (``graph/auth.py``): which run settings a user may
set, how each server-controlled field is classified, forcing the run's user, admins and system
assistants. The same rules through the real server: tests/integration/test_security_dev.py."""

from __future__ import annotations

import typing
from uuid import UUID

import pytest
from langgraph_sdk import Auth

from graph.auth import (
    FORCED_SETTINGS,
    USER_SETTINGS,
    caller_of,
    force_user,
    graph_assistant_id,
    is_system_assistant,
    load_admins,
    refused_settings,
    server_setting_reason,
)
from graph.context import Context

SERVER = Context(data_dir=".hermes", database="/srv/sales.db").model_dump()
PATH_OR_URL = ("database", "data_dir", "mcp_config", "base_url", "remote_url", "weaviate_url", "embeddings_base_url")


def test_every_context_field_is_either_a_user_setting_or_server_controlled_with_a_reason():
    for name in Context.model_fields:
        reason = server_setting_reason(name)
        assert (reason is None) == (name in USER_SETTINGS | FORCED_SETTINGS), name
    assert set(Context.model_fields) >= USER_SETTINGS and set(Context.model_fields) >= FORCED_SETTINGS


def test_no_user_setting_holds_text():
    """A path, URL, model or secret name is text: no field whose values are text may be on the
    allow-list (a dict's keys, e.g. tool names of ``tool_timeouts``, are not values)."""
    for name in USER_SETTINGS:
        annotation = Context.model_fields[name].annotation
        values = typing.get_args(annotation)[1:] if typing.get_origin(annotation) is dict else (annotation,)
        for value in values:
            inner = typing.get_args(value)[:1] if typing.get_origin(value) is typing.Annotated else (value,)
            assert str not in (*inner, *typing.get_args(inner[0])), name


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("database", "path"),
        ("data_dir", "path"),
        ("mcp_config", "path"),
        ("base_url", "URL"),
        ("remote_url", "URL"),
        ("weaviate_url", "URL"),
        ("embeddings_base_url", "URL"),
        ("api_key_env", "secret"),
        ("remote_token_env", "secret"),
        ("weaviate_api_key_env", "secret"),
        ("model", "model"),
        ("container_image", "image"),
        ("tool_executor", "tools"),
        ("allowed_destinations", "policy"),
        ("sensitive_data", "policy"),
        ("fired_reminder", "scheduler"),
        ("episodic_ttl_days", "every user"),
    ],
)
def test_server_controlled_fields_say_why(name, words):
    assert words in (server_setting_reason(name) or "")


def test_a_new_field_is_server_controlled_until_allowed():
    assert server_setting_reason("some_future_field") == "not a setting users may change"


@pytest.mark.parametrize("name", PATH_OR_URL)
def test_a_path_or_url_differing_from_the_servers_is_refused_naming_the_field(name):
    refused = refused_settings({name: "/var/lib/hermes/checkpoints.sqlite"}, SERVER)
    assert len(refused) == 1 and refused[0].startswith(name + " (")


def test_user_settings_and_unknown_keys_pass():
    values = {"temperature": 0.7, "max_tool_rounds": 3, "tool_timeouts": {"x": 5}, "user_id": "x", "not_a_field": 1}
    assert refused_settings(values, SERVER) == []


def test_the_servers_own_value_of_a_server_field_passes():
    """Studio's form echoes every field; sending the value in force changes nothing."""
    assert refused_settings({"data_dir": ".hermes", "database": "/srv/sales.db"}, SERVER) == []
    assert refused_settings({"database": "/srv/other.db"}, SERVER) == ["database (a path on the server)"]


@pytest.mark.parametrize("key", ["DATABASE", "Database", "Base_Url", "MCP_CONFIG"])
def test_field_names_match_in_any_case_as_the_loader_does(key):
    assert Context(**{key: "x"}).model_dump()[key.lower()] == "x"  # the loader really reads it
    assert refused_settings({key: "x"}, SERVER)[0].startswith(key)


@pytest.mark.parametrize("key", ["_env_prefix", "_env_file", "_secrets_dir", "_case_sensitive", "_cli_parse_args"])
def test_loader_options_are_refused(key):
    assert refused_settings({key: "x"}, SERVER) == [f"{key} (an option of the settings loader)"]


def test_server_internals_of_configurable_pass():
    configurable = {"__after_seconds__": 0, "langgraph_request_id": "r", "x-request-id": "1", "cron_id": "c"}
    assert refused_settings(configurable, SERVER) == []


def test_non_mappings_refuse_nothing():
    assert refused_settings(None, SERVER) == [] and refused_settings(["database"], SERVER) == []


def test_force_user_removes_every_spelling():
    context = {"USER_ID": "alice", "User_Id": "alice", "temperature": 0.2}
    force_user(context, "bob")
    assert context == {"temperature": 0.2, "user_id": "bob"}
    assert Context(**context).user_id == "bob"


def test_force_user_without_add_only_replaces():
    empty: dict = {}
    force_user(empty, "bob", add=False)
    assert empty == {}
    named = {"user_id": "alice"}
    force_user(named, "bob", add=False)
    assert named == {"user_id": "bob"}


def test_admins_are_users_with_tokens():
    tokens = {"t1": "alice", "t2": "carol"}
    assert load_admins("", tokens) == frozenset()
    assert load_admins("carol", tokens) == {"carol"}
    assert load_admins(" carol , alice ", tokens) == {"alice", "carol"}
    assert load_admins('["carol"]', tokens) == {"carol"}
    with pytest.raises(ValueError, match="HERMES_AUTH_ADMINS names \\['dave'\\]"):
        load_admins("dave", tokens)
    with pytest.raises(ValueError, match="HERMES_AUTH_ADMINS"):
        load_admins("[carol", tokens)
    with pytest.raises(ValueError, match="HERMES_AUTH_ADMINS"):
        load_admins("[1]", tokens)


def test_system_assistants_are_known_by_id():
    namespace = UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8")
    agent = graph_assistant_id("agent", namespace)
    assert agent == "fe096781-5601-53d2-b2f6-0d3403f7e9ca"  # what langgraph dev gave the agent graph
    assert is_system_assistant(UUID(agent), {agent}) and not is_system_assistant("other", {agent})


class _User:
    def __init__(self, identity: str, authenticated: bool = True) -> None:
        self.identity, self.is_authenticated = identity, authenticated


TOKENS = {"t1": "alice", "t2": "carol"}


def test_local_mode_has_no_caller():
    assert caller_of(_User("default", False), {}, frozenset()) is None


def test_admins_are_known_by_user_id_not_by_request_permissions():
    """A cron the admin created fires as a bare user object (no permissions): still the admin."""
    carol = caller_of(_User("carol"), TOKENS, frozenset({"carol"}))
    alice = caller_of(_User("alice"), TOKENS, frozenset({"carol"}))
    assert carol is not None and carol.admin and carol.user == "carol"
    assert alice is not None and not alice.admin


@pytest.mark.parametrize(
    "user",
    [
        _User("alice", authenticated=False),
        _User("mallory"),  # no token (any more): e.g. a cron of a removed user
        Auth.types.StudioUser("langgraph-studio-user", is_authenticated=True),
    ],
)
def test_in_tokens_mode_a_user_without_a_token_is_refused(user):
    with pytest.raises(Auth.exceptions.HTTPException) as info:
        caller_of(user, TOKENS, frozenset())
    assert info.value.status_code == 403 and "bearer token" in str(info.value.detail)
