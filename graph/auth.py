"""Who is calling the LangGraph server, and whose memories they reach (DESIGN §4.9; seed §4).

``langgraph.json`` ``"auth": {"path": "./graph/auth.py:auth"}`` makes ``langgraph dev`` (and
any LangGraph server) run :data:`auth` on every request (``langgraph_sdk.Auth``).

Two modes, chosen by one setting:

* **local** (``HERMES_AUTH_TOKENS`` unset, the default): no header is needed and nothing
  changes from a server without auth: a run's ``context.user_id`` names the memory owner
  (``"default"`` when not given), as with the CLI. A trusted single-user setup.
* **tokens** (``HERMES_AUTH_TOKENS`` set): every request needs ``Authorization: Bearer
  <token>`` (or ``x-api-key: <token>``); the token maps to a user id. ``HERMES_AUTH_TOKENS`` is
  either a JSON object ``{"<token>": "<user id>", ...}`` or the path of a file holding one.
  A request without a known token gets 401. Then, for that caller:

  - every run they start has ``context.user_id`` set to their user id, whatever they pass,
    so recall and writes use their memory namespace only;
  - threads they create are tagged ``metadata.owner = <user id>`` and every thread read,
    search, update, delete and run is filtered on it (another user's thread is "not found");
  - crons they create run as them (``context.user_id`` forced the same way);
  - the store API (``/store/items``, ``/store/namespaces``; Hermes's memories are served
    there by ``graph/memory_store.py`` under ``("memories", <user id>, "episodic" |
    "semantic")``) is confined to their own ``("memories", <user id>)`` namespace: the user
    segment of any namespace they send is replaced by theirs, so a cross-user read returns
    their own (or no) items, never another user's.

Tokens are compared in constant time (``hmac.compare_digest``). Errors: a malformed
``HERMES_AUTH_TOKENS`` raises ``ValueError`` naming the setting at the first request.
"""

from __future__ import annotations

import hmac
import json
from pathlib import Path
from typing import Any

from langgraph_sdk import Auth

from graph.context import MachineSettings

#: The memory owner of a run that names none (the CLI's and ``Context.user_id``'s default).
ANONYMOUS_USER = "default"
#: First segment of the store namespaces that hold Hermes's memories (``graph/memory_store.py``).
MEMORY_NAMESPACE = "memories"


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


def _header(headers: dict, name: str) -> str:
    value = headers.get(name.encode()) or headers.get(name) or b""
    return value.decode("latin-1") if isinstance(value, bytes) else str(value)


auth = Auth()


@auth.authenticate
async def authenticate(headers: dict) -> Auth.types.MinimalUserDict:
    """The caller's user id (see the module docstring). Local mode: an anonymous caller."""
    tokens = load_tokens(MachineSettings().auth_tokens)
    if not tokens:
        return {"identity": ANONYMOUS_USER, "is_authenticated": False}
    authorization = _header(headers, "authorization")
    scheme, _, credential = authorization.partition(" ")
    token = credential.strip() if scheme.lower() == "bearer" else _header(headers, "x-api-key").strip()
    user = user_for_token(token, tokens) if token else None
    if user is None:
        raise Auth.exceptions.HTTPException(
            status_code=401, detail="a valid bearer token is required (HERMES_AUTH_TOKENS)"
        )
    return {"identity": user, "is_authenticated": True}


def _authenticated(ctx: Auth.types.AuthContext) -> bool:
    return bool(getattr(ctx.user, "is_authenticated", False))


def _force_user(container: Any, user: str) -> None:
    """Set ``container["context"]["user_id"]`` (a run's or a cron's payload) to ``user``."""
    if isinstance(container, dict):
        context = container.get("context")
        if not isinstance(context, dict):
            context = {}
            container["context"] = context
        context["user_id"] = user


@auth.on.threads
async def own_threads(ctx: Auth.types.AuthContext, value: Any) -> Auth.types.FilterType | None:
    """Threads belong to who created them; runs run as the caller (tokens mode only)."""
    if not _authenticated(ctx):
        return None
    user = ctx.user.identity
    if isinstance(value, dict):
        # in place: the server keeps using the dict it passed in
        if isinstance(value.get("metadata"), dict) and ctx.action in ("create", "create_run", "update"):
            value["metadata"]["owner"] = user
        if ctx.action == "create_run":
            _force_user(value.get("kwargs"), user)
    return {"owner": user}


@auth.on.crons
async def crons_run_as_caller(ctx: Auth.types.AuthContext, value: Any) -> None:
    """A cron runs as who created it (tokens mode only): its payload's ``context.user_id``."""
    if _authenticated(ctx) and ctx.action == "create" and isinstance(value, dict):
        _force_user(value.get("payload"), ctx.user.identity)


@auth.on.store()
async def own_memories(ctx: Auth.types.AuthContext, value: dict) -> None:
    """Confine the store API to the caller's ``("memories", <user id>, ...)`` namespace."""
    if not _authenticated(ctx):
        return
    user = ctx.user.identity
    namespace = tuple(value.get("namespace") or ())
    rest = namespace[2:] if len(namespace) >= 2 and namespace[0] == MEMORY_NAMESPACE else ()
    value["namespace"] = (MEMORY_NAMESPACE, user, *rest)
