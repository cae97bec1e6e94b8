"""Who is calling the LangGraph server, and what they may reach (DESIGN §4.9; THREAT_MODEL.md).

``langgraph.json`` ``"auth": {"path": "./graph/auth.py:auth", "disable_studio_auth": true}`` makes
``langgraph dev`` (and any LangGraph server) run :data:`auth` on every request
(``langgraph_sdk.Auth``). ``disable_studio_auth`` matters: without it ``langgraph dev`` lets any
request carrying ``x-auth-scheme: langsmith`` in as a Studio user, no token asked.

Two modes, chosen by one setting:

* **local** (``HERMES_AUTH_TOKENS`` unset, the default): no header is needed and nothing
  changes from a server without auth: a run's ``context.user_id`` names the memory owner
  (``"default"`` when not given), as with the CLI. A trusted single-user setup.
* **tokens** (``HERMES_AUTH_TOKENS`` set): every request needs ``Authorization: Bearer
  <token>`` (or ``x-api-key: <token>``); the token maps to a user id. ``HERMES_AUTH_TOKENS`` is
  either a JSON object ``{"<token>": "<user id>", ...}`` or the path of a file holding one.
  A request without a known token gets 401. ``HERMES_AUTH_ADMINS`` (comma-separated or a JSON
  list of user ids of that table) names the **admins**. Then, for a caller:

  - **threads** they create are tagged ``metadata.owner = <user id>``; every thread read,
    search, update, delete, copy and run is filtered on it (another user's thread is "not
    found"). Runs live in threads, so the same holds for runs.
  - **runs** run as the caller: ``context.user_id`` is set to their id (spellings such as
    ``USER_ID`` are removed: the settings loader matches field names case-insensitively);
  - **run settings**: a run's ``context`` (and ``config.configurable``, which the server turns
    into the context when no context is given), a cron's payload and an assistant's
    ``context``/``config.configurable`` may set only :data:`USER_SETTINGS` (sampling, budgets,
    loop caps, timeouts, summaries). Every other :class:`~graph.context.Context` field is
    server-controlled — paths (``database``, ``data_dir``, ``mcp_config``), URLs
    (``base_url``, ``remote_url``, ``weaviate_url``, ...), the names of secret variables
    (``*_env``), the model, backends, the side-effect policy, the scheduler's fields — and a
    request that sets one to a value other than the server's own is refused with 403 naming the
    field (refused, not dropped: a run silently using other settings than asked is worse). Keys
    starting with one ``_`` are refused too (the settings loader reads them as options, e.g.
    ``_env_prefix`` would make the run ignore the server's settings). Admins may set any field.
  - **assistants**: the system assistants (one per graph of ``langgraph.json``, created by the
    server with ``metadata.created_by = "system"``) are readable by everyone and changeable by
    admins only (update or delete by a user: 403 saying so). An assistant a user creates is
    theirs (``metadata.owner``); other users get "not found". The maintenance graphs
    (:data:`SERVER_GRAPHS`: they work on every user's data) may be run, scheduled or wrapped
    in an assistant by admins only.
  - **crons** are tagged and filtered by owner like threads and run as their creator;
  - the **store API** (``/store/items``, ``/store/namespaces``; Hermes's memories are served
    there by ``graph/memory_store.py`` under ``("memories", <user id>, "episodic" |
    "semantic")``) is confined to their own ``("memories", <user id>)`` namespace: the user
    segment of any namespace they send is replaced by theirs, so a cross-user read returns
    their own (or no) items, never another user's.

  Admins are users too: their own threads, crons and memories are theirs; they do not read
  other users' threads or memories through the API.

Tokens are compared in constant time (``hmac.compare_digest``). Errors: a malformed
``HERMES_AUTH_TOKENS`` or ``HERMES_AUTH_ADMINS`` raises ``ValueError`` naming the setting at the
first request.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, cast
from uuid import UUID, uuid5

from langgraph_sdk import Auth

from graph.context import Context, MachineSettings, SettingsError

#: The memory owner of a run that names none (the CLI's and ``Context.user_id``'s default).
ANONYMOUS_USER = "default"
#: First segment of the store namespaces that hold Hermes's memories (``graph/memory_store.py``).
MEMORY_NAMESPACE = "memories"
#: The permission :func:`authenticate` gives the users of ``HERMES_AUTH_ADMINS``.
ADMIN = "admin"
#: The metadata key of an assistant, thread or cron that names its owner.
OWNER = "owner"
#: ``metadata.created_by`` of the assistants the server creates from ``langgraph.json``'s graphs.
SYSTEM = "system"

#: Run settings (:class:`~graph.context.Context` fields) a user may set on their runs, crons and
#: assistants: each changes only how the caller's own run samples, budgets, loops, waits or
#: summarises, within the bounds ``Context`` checks. Everything else is server-controlled
#: (:func:`server_setting_reason`); a new ``Context`` field is server-controlled until listed here.
USER_SETTINGS = frozenset(
    {
        "temperature",
        "max_output_tokens",
        "token_budget",
        "max_tool_rounds",
        "max_repeated_calls",
        "max_tools",
        "tool_timeout_s",
        "heavy_tool_timeout_s",
        "tool_timeouts",
        "summarise_unstructured",
        "summary_timeout_s",
        "summary_max_tokens",
        "ask_user_for_missing",
    }
)
#: Run settings the server sets to the caller's identity, whatever the request says.
FORCED_SETTINGS = frozenset({"user_id"})
#: Graphs of ``langgraph.json`` that work on every user's data (fire everyone's due reminders,
#: consolidate everyone's memories): run, scheduled or wrapped in an assistant by admins only.
SERVER_GRAPHS = frozenset({"reminders", "consolidate"})

#: Why a server-controlled field is one, for fields no name rule of :func:`server_setting_reason`
#: covers (the model and backends, the operator's policy, the scheduler's own fields).
_SERVER_REASONS = {
    "model": "chooses the server's model",
    "tool_executor": "chooses where the server runs tools",
    "container_image": "chooses the image the server runs tools in",
    "model_accepts_images": "describes the server's model",
    "episodic": "chooses the server's memory backend",
    "embeddings": "chooses the server's embeddings model",
    "embeddings_dim": "describes the server's embeddings model",
    "weaviate_grpc_port": "where the server connects",
    "allowed_destinations": "the operator's side-effect policy",
    "destination_aliases": "the operator's side-effect policy",
    "sensitive_data": "the operator's side-effect policy",
    "fired_reminder": "set by the reminder scheduler only",
    "on_behalf_of": "set by the reminder scheduler only",
    "working_ttl_s": "the server's memory retention (applies to every user)",
    "episodic_ttl_days": "the server's memory retention (applies to every user)",
    "semantic_ttl_days": "the server's memory retention (applies to every user)",
    "memory_min_confidence": "the server's memory policy",
    "memory_tokens": "the server's memory policy",
}


def load_tokens(setting: str) -> dict[str, str]:
    """``HERMES_AUTH_TOKENS`` → ``{token: user_id}`` (inline JSON or a file path). ``{}`` when
    unset (local mode). Raises ``ValueError`` naming the setting when it is neither, when it is
    set but holds no token (an emptied table must not open the server), or when a token is not
    printable ASCII (an HTTP header cannot carry it, so that user could never log in)."""
    text = (setting or "").strip()
    if not (setting or ""):
        return {}
    if not text:
        raise ValueError("HERMES_AUTH_TOKENS is set but blank: give {token: user id} or unset it for local mode")
    if not text.startswith(("{", "[")):
        try:
            text = Path(text).expanduser().read_text(encoding="utf-8")
        except OSError as exc:
            raise ValueError(f"HERMES_AUTH_TOKENS: cannot read token file {setting!r}: {exc}") from exc
    try:
        table = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"HERMES_AUTH_TOKENS: not a JSON object of token -> user id: {exc}") from exc
    if not isinstance(table, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and k and v for k, v in table.items()
    ):
        raise ValueError('HERMES_AUTH_TOKENS: expected a JSON object {"<token>": "<user id>", ...}')
    if not table:
        raise ValueError("HERMES_AUTH_TOKENS holds no token: add {token: user id} entries, or unset it for local mode")
    bad = [k for k in table if not (k.isascii() and k.isprintable() and " " not in k)]
    if bad:
        raise ValueError(
            f"HERMES_AUTH_TOKENS: {len(bad)} token(s) are not printable ASCII without spaces; "
            "HTTP Authorization headers cannot carry them"
        )
    return table


def user_for_token(token: str, tokens: dict[str, str]) -> str | None:
    """The user id of ``token`` (constant-time comparison over every entry), or ``None``."""
    found = None
    for known, user in tokens.items():
        if hmac.compare_digest(known.encode(), token.encode()):
            found = user
    return found


def load_admins(setting: str, tokens: Mapping[str, str]) -> frozenset[str]:
    """``HERMES_AUTH_ADMINS`` → the admins' user ids (comma-separated or a JSON list). Raises
    ``ValueError`` naming the setting when it is malformed or names a user no token maps to
    (a typo must not leave the operator believing someone is an admin)."""
    text = (setting or "").strip()
    if not text:
        return frozenset()
    if text.startswith("["):
        try:
            names = json.loads(text)
        except ValueError as exc:
            raise ValueError(f"HERMES_AUTH_ADMINS: not a JSON list of user ids: {exc}") from exc
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise ValueError('HERMES_AUTH_ADMINS: expected a JSON list ["<user id>", ...] or "alice,bob"')
    else:
        names = text.split(",")
    admins = frozenset(n.strip() for n in names if n.strip())
    unknown = sorted(admins - set(tokens.values()))
    if unknown:
        raise ValueError(
            f"HERMES_AUTH_ADMINS names {unknown}, who have no token in HERMES_AUTH_TOKENS: fix the name or add a token"
        )
    return admins


def server_setting_reason(name: str) -> str | None:
    """Why the run setting ``name`` (a :class:`~graph.context.Context` field) is
    server-controlled, or ``None`` when a user may set it (:data:`USER_SETTINGS`,
    :data:`FORCED_SETTINGS`). Name rules first (``*_env``: a secret's variable; ``*_url``: a
    URL; ``data_dir``, ``mcp_config``, ``database``: a path), then :data:`_SERVER_REASONS`; a
    field neither covers is server-controlled as "not a user setting" (default deny)."""
    if name in USER_SETTINGS or name in FORCED_SETTINGS:
        return None
    if name.endswith("_env"):
        return "names an environment variable of the server (a secret)"
    if name.endswith("_url"):
        return "a URL the server connects to"
    if name.endswith(("_dir", "_config")) or name == "database":
        return "a path on the server"
    return _SERVER_REASONS.get(name, "not a setting users may change")


def refused_settings(values: Any, server: Mapping[str, Any]) -> list[str]:
    """The keys of ``values`` (a run's context or ``config.configurable``, a cron payload's, an
    assistant's) a user may not send, each as ``"<key> (<reason>)"``; ``[]`` when all may be.

    A key is matched to a ``Context`` field case-insensitively (as the settings loader does).
    Refused: a server-controlled field whose value differs from the server's own (``server``:
    the server's settings, field → value; sending the value in force changes nothing, so a
    client that echoes every field, like Studio's form, still works), and any key starting with
    exactly one ``_`` (the loader's options: ``_env_prefix``, ``_env_file``, ``_secrets_dir``
    ...). Other keys are not ``Context`` fields and are ignored by it."""
    if not isinstance(values, Mapping):
        return []
    refused = []
    for raw_key, value in values.items():
        key = str(raw_key)
        if key.startswith("_") and not key.startswith("__"):
            refused.append(f"{key} (an option of the settings loader)")
            continue
        name = key.lower()
        if name not in Context.model_fields:
            continue
        reason = server_setting_reason(name)
        if reason and not (name in server and server[name] == value):
            refused.append(f"{key} ({reason})")
    return refused


def force_user(values: Any, user: str, *, add: bool = True) -> None:
    """Make ``values`` (a context or ``configurable`` dict, in place) name ``user`` as its
    ``user_id``: every spelling of the key is removed first (the loader matches any case, and
    which of two spellings wins is not defined); ``add=False`` sets it only if one was there."""
    if not isinstance(values, dict):
        return
    spellings = [k for k in values if isinstance(k, str) and k.lower() in FORCED_SETTINGS]
    for key in spellings:
        del values[key]
    if add or spellings:
        values["user_id"] = user


def is_system_assistant(assistant_id: Any, system_ids: Iterable[str]) -> bool:
    """Whether ``assistant_id`` (a UUID or its text) is one of the server's system assistants."""
    return str(assistant_id) in {str(s) for s in system_ids}


def graph_assistant_id(graph_id: str, namespace: UUID) -> str:
    """The id the server gives the system assistant of ``graph_id`` (``uuid5(namespace, graph_id)``,
    ``namespace`` = ``langgraph_api.graph.NAMESPACE_GRAPH``)."""
    return str(uuid5(namespace, graph_id))


def refusal(detail: str) -> Auth.exceptions.HTTPException:
    """A 403 with ``detail`` (the server sends it as the response's ``detail``)."""
    return Auth.exceptions.HTTPException(status_code=403, detail=detail)


def _header(headers: Mapping[bytes | str, bytes | str], name: str) -> str:
    value = headers.get(name.encode()) or headers.get(name) or b""
    return value.decode("latin-1") if isinstance(value, bytes) else str(value)


def _tokens() -> dict[str, str]:
    return load_tokens(MachineSettings().auth_tokens)


auth = Auth()


@auth.authenticate
async def authenticate(headers: Mapping[bytes | str, bytes | str]) -> Auth.types.MinimalUserDict:
    """The caller's user id (see the module docstring). Local mode: an anonymous caller."""
    tokens = _tokens()
    if not tokens:
        return {"identity": ANONYMOUS_USER, "is_authenticated": False}
    admins = load_admins(MachineSettings().auth_admins, tokens)
    authorization = _header(headers, "authorization")
    scheme, _, credential = authorization.partition(" ")
    token = credential.strip() if scheme.lower() == "bearer" else _header(headers, "x-api-key").strip()
    user = user_for_token(token, tokens) if token else None
    if user is None:
        raise Auth.exceptions.HTTPException(
            status_code=401, detail="a valid bearer token is required (HERMES_AUTH_TOKENS)"
        )
    return {"identity": user, "is_authenticated": True, "permissions": [ADMIN] if user in admins else []}


class Caller:
    """The authenticated caller of a request in tokens mode: ``user`` id and ``admin``."""

    def __init__(self, user: str, admin: bool) -> None:
        self.user, self.admin = user, admin


def caller_of(user: Any, tokens: Mapping[str, str], admins: frozenset[str]) -> Caller | None:
    """The :class:`Caller` that ``user`` (the request's ``ctx.user``) is, ``None`` in local mode
    (``tokens`` empty: nothing is checked). In tokens mode, a user not authenticated by a token
    (e.g. a Studio user let in by the server's own Studio auth: defence in depth behind
    ``disable_studio_auth``) or whose id no longer has a token (a cron of a removed user firing)
    is refused with 403. Admin-ness comes from ``admins`` by user id, not from the request's
    permissions, so a cron an admin created fires with the admin's rights."""
    if not tokens:
        return None
    identity = getattr(user, "identity", None)
    if (
        not getattr(user, "is_authenticated", False)
        or isinstance(user, Auth.types.StudioUser)
        or identity not in set(tokens.values())
    ):
        raise refusal("tokens mode (HERMES_AUTH_TOKENS): this request carries no valid bearer token")
    return Caller(str(identity), identity in admins)


def _caller(ctx: Auth.types.AuthContext) -> Caller | None:
    tokens = _tokens()
    return caller_of(ctx.user, tokens, load_admins(MachineSettings().auth_admins, tokens) if tokens else frozenset())


def _server_settings() -> dict[str, Any]:
    try:
        return Context().model_dump()
    except SettingsError:  # a broken server setting: nothing matches, every field is refused
        return {}


def _check_settings(caller: Caller, where: str, *containers: Any) -> None:
    """Refuse (403) the server-controlled settings in ``containers`` unless ``caller`` is an admin."""
    if caller.admin:
        return
    server = _server_settings()
    refused = [r for c in containers for r in refused_settings(c, server)]
    if refused:
        raise refusal(
            f"{where}: these run settings are server-controlled and cannot be set by a user: "
            + "; ".join(refused)
            + f". Users may set: {', '.join(sorted(USER_SETTINGS))} (user_id is always yours). "
            "An admin (HERMES_AUTH_ADMINS) can change the others."
        )


def _context_and_configurable(container: Any) -> tuple[Any, Any]:
    """``(container["context"], container["config"]["configurable"])`` of a run's kwargs, a cron's
    payload or an assistant (each ``None`` when absent)."""
    if not isinstance(container, dict):
        return None, None
    config = container.get("config")
    return container.get("context"), config.get("configurable") if isinstance(config, dict) else None


def _run_as(container: Any, user: str) -> None:
    """A run's kwargs or a cron's payload runs as ``user`` (``context.user_id``; see :func:`force_user`)."""
    if not isinstance(container, dict):
        return
    if not isinstance(container.get("context"), dict):
        container["context"] = {}
    force_user(container["context"], user)
    force_user(_context_and_configurable(container)[1], user, add=False)


def _server_graph_ids() -> dict[str, str]:
    """System assistant id → graph id, for :data:`SERVER_GRAPHS`."""
    from langgraph_api.graph import NAMESPACE_GRAPH  # type: ignore[import-untyped]  # server process only

    return {graph_assistant_id(g, NAMESPACE_GRAPH): g for g in SERVER_GRAPHS}


def _system_ids() -> set[str]:
    from langgraph_api.graph import SYSTEM_ASSISTANT_IDS  # server process only

    return set(SYSTEM_ASSISTANT_IDS)


def _refuse_server_graph(caller: Caller, assistant: Any) -> None:
    """403 when a non-admin targets a maintenance graph (by graph id or its system assistant)."""
    if caller.admin or assistant is None:
        return
    graph = str(assistant) if str(assistant) in SERVER_GRAPHS else _server_graph_ids().get(str(assistant))
    if graph:
        raise refusal(
            f"the {graph!r} graph works on every user's data: only an admin (HERMES_AUTH_ADMINS) may run, "
            "schedule or wrap it in an assistant"
        )


def _own_metadata(metadata: Any, user: str) -> None:
    """Tag ``metadata`` (in place) with its owner; a user may not claim ``created_by``."""
    if not isinstance(metadata, dict):
        return
    if "created_by" in metadata:
        raise refusal("metadata.created_by is set by the server: leave it out")
    metadata[OWNER] = user


def _owned(user: str) -> Auth.types.FilterType:
    return {OWNER: user}


def _owned_or_system(user: str) -> Auth.types.FilterType:
    # "$or" is understood by the server's filter (langgraph_runtime) but not in the SDK's type
    return cast(Auth.types.FilterType, {"$or": [{OWNER: user}, {"created_by": SYSTEM}]})


@auth.on.threads
async def own_threads(ctx: Auth.types.AuthContext, value: Any) -> Auth.types.FilterType | None:
    """Threads belong to who created them (tokens mode only)."""
    caller = _caller(ctx)
    if caller is None:
        return None
    # in place: the server keeps using the dict it passed in
    if isinstance(value, dict) and isinstance(value.get("metadata"), dict) and ctx.action in ("create", "update"):
        value["metadata"][OWNER] = caller.user
    return _owned(caller.user)


@auth.on.threads.create_run
async def runs_as_caller(ctx: Auth.types.AuthContext, value: Any) -> Auth.types.FilterType | None:
    """A run: on the caller's own thread (a new one is theirs), of an assistant they may run,
    with only user settings, as the caller (tokens mode only)."""
    caller = _caller(ctx)
    if caller is None:
        return None
    if isinstance(value, dict):
        _refuse_server_graph(caller, value.get("assistant_id"))
        if isinstance(value.get("metadata"), dict):
            value["metadata"][OWNER] = caller.user  # a new thread takes the run's metadata
        kwargs = value.get("kwargs")
        _check_settings(caller, "run", *_context_and_configurable(kwargs))
        _run_as(kwargs, caller.user)
    return _owned(caller.user)


@auth.on.assistants
async def own_assistants(ctx: Auth.types.AuthContext, value: Any) -> Auth.types.FilterType | None:
    """System assistants: read by all, changed by admins; others: their creator's (tokens mode only)."""
    caller = _caller(ctx)
    if caller is None:
        return None
    value = value if isinstance(value, dict) else {}
    if ctx.action in ("read", "search"):
        return _owned_or_system(caller.user)
    system = ctx.action != "create" and is_system_assistant(value.get("assistant_id"), _system_ids())
    if system and not caller.admin:
        raise refusal(
            f"assistant {value.get('assistant_id')} is a system assistant (one per graph of langgraph.json): "
            f"users may read and run it, not {ctx.action} it. Create your own assistant instead "
            "(client.assistants.create), or ask an admin (HERMES_AUTH_ADMINS)"
        )
    if ctx.action in ("create", "update"):  # an update may move an assistant to another graph
        _refuse_server_graph(caller, value.get("graph_id"))
    if ctx.action in ("create", "update"):
        if not system:
            _own_metadata(value.get("metadata"), caller.user)
        _check_settings(caller, f"assistant {ctx.action}", *_context_and_configurable(value))
        for settings in _context_and_configurable(value):
            force_user(settings, caller.user, add=False)
    return _owned_or_system(caller.user) if caller.admin else _owned(caller.user)


@auth.on.crons
async def own_crons(ctx: Auth.types.AuthContext, value: Any) -> Auth.types.FilterType | None:
    """Crons belong to who created them and run as them, with only user settings (tokens mode only)."""
    caller = _caller(ctx)
    if caller is None:
        return None
    if isinstance(value, dict) and ctx.action in ("create", "update"):
        payload = value.get("payload")
        if ctx.action == "create" and isinstance(payload, dict):
            _refuse_server_graph(caller, payload.get("assistant_id"))
        if isinstance(value.get("metadata"), dict):
            value["metadata"][OWNER] = caller.user
        _check_settings(caller, f"cron {ctx.action}", *_context_and_configurable(payload))
        if isinstance(payload, dict):
            _run_as(payload, caller.user)
    return _owned(caller.user)


@auth.on.store()
async def own_memories(ctx: Auth.types.AuthContext, value: dict[str, Any]) -> None:
    """Confine the store API to the caller's ``("memories", <user id>, ...)`` namespace."""
    caller = _caller(ctx)
    if caller is None:
        return
    namespace = tuple(value.get("namespace") or ())
    rest = namespace[2:] if len(namespace) >= 2 and namespace[0] == MEMORY_NAMESPACE else ()
    value["namespace"] = (MEMORY_NAMESPACE, caller.user, *rest)
