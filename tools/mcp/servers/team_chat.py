"""Bundled team-chat MCP server (seed §5.1 "post it to the project group"), stdio transport.

Run: ``python -m tools.mcp.servers.team_chat``. Messages persist in SQLite at
:attr:`TeamChatSettings.db` — this process's own setting, env ``HERMES_TEAM_CHAT_DB`` (default
``./team_chat.db``; the client sets it, :func:`tools.mcp.config.team_chat_entry`); table ``messages(id, channel, text,
created_at ISO-8601 UTC)``. Tools: ``post_message(channel, text)``, ``list_messages(channel,
limit=20)``. Bad input (empty channel/text, limit outside 1-200) → an MCP ``isError`` result.

Metadata for clients: ``post_message`` is annotated as a side effect that is not idempotent
(``readOnlyHint=False, idempotentHint=False, destructiveHint=False``) and its ``_meta`` says
which request clauses ask for it (``"hermes/requested_by"``: regular expressions, English and
Chinese) and which argument decides where the post goes (``"hermes/destination_args"``:
``channel``, checked against the user's request by the client, DESIGN §2.8); ``list_messages``
is read-only. Posting the same text twice in one request is
prevented by the client's idempotency ledger, not here: this server posts what it is sent.
"""

from __future__ import annotations

import datetime as dt
import re
import sqlite3
from functools import cache
from typing import Annotated, Any

from mcp.server.fastmcp import FastMCP
from mcp.types import ToolAnnotations
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from base.sqlite_files import open_sqlite

CHANNEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.#-]{0,63}$")
MAX_TEXT = 20_000

mcp = FastMCP("team-chat", log_level="WARNING")


class TeamChatSettings(BaseSettings):
    """Settings of this server process, from its environment (prefix ``HERMES_TEAM_CHAT_``)."""

    model_config = SettingsConfigDict(env_prefix="HERMES_TEAM_CHAT_", extra="ignore", frozen=True)

    db: str = Field(default="team_chat.db", description="HERMES_TEAM_CHAT_DB: the SQLite file of the messages.")


@cache
def settings() -> TeamChatSettings:
    """This process's settings (read once)."""
    return TeamChatSettings()


#: The messages table (module docstring).
SCHEMA = """CREATE TABLE IF NOT EXISTS messages (id INTEGER PRIMARY KEY AUTOINCREMENT,
    channel TEXT NOT NULL, text TEXT NOT NULL, created_at TEXT NOT NULL);"""


def _db(path: str | None = None) -> sqlite3.Connection:
    """Open the messages database at ``path`` (default :attr:`TeamChatSettings.db`), creating its
    table — through the shared opener (WAL, busy timeout): every Hermes process on a data
    directory starts its own server on the same file. Implicit transactions (``with con:``
    commits). Raises ``sqlite3.Error`` when the file cannot be opened."""
    return open_sqlite(path or settings().db, schema=SCHEMA, autocommit=False)


# The schema says what the checks below enforce, so clients (and grammar-constrained models)
# can get the arguments right before calling.
Channel = Annotated[
    str,
    Field(pattern=r"^#?[A-Za-z0-9][A-Za-z0-9_.#-]{0,63}$", description="Channel name, e.g. 'project' or 'sales-team'."),
]


def _check_channel(channel: str) -> str:
    channel = (channel or "").strip().lstrip("#")
    if not CHANNEL_RE.fullmatch(channel):
        raise ValueError(f"invalid channel {channel!r}: use letters, digits, '-', '_' or '.' (max 64)")
    return channel


#: Request clauses that ask for a post (``_meta["hermes/requested_by"]`` of post_message).
POST_REQUESTED_BY = [
    r"\b(post|send|share|announce)\b.{0,80}\b(group|channel|team|chat)\b",
    r"(发到|发送到|发给).{0,20}(群|频道)",
]


@mcp.tool(
    annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=False, openWorldHint=False),
    meta={
        "hermes/requested_by": POST_REQUESTED_BY,
        "hermes/destination_args": ["channel"],
        # the text is what the team reads: it must carry the substance (tools/content_checks.py)
        "hermes/content_arg": "text",
    },
)
def post_message(
    channel: Channel,
    text: Annotated[str, Field(min_length=1, max_length=MAX_TEXT, description="The message (Markdown).")],
) -> dict[str, Any]:
    """Post a message to a team chat channel (the one the user names, e.g. 'project' or
    'sales-team'), visible to everyone in it. Use it to share a finished report or an announcement; Markdown is kept as
    is. Returns {id, channel, text, created_at}. Empty text or an invalid channel name is an
    error. It does not read messages: use list_messages for that."""
    channel = _check_channel(channel)
    if not (text or "").strip():
        raise ValueError("text is empty")
    if len(text) > MAX_TEXT:
        raise ValueError(f"text is {len(text)} chars; the limit is {MAX_TEXT}")
    now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    con = _db()
    try:
        with con:
            mid = con.execute(
                "INSERT INTO messages (channel, text, created_at) VALUES (?, ?, ?)", (channel, text, now)
            ).lastrowid
    finally:
        con.close()
    return {"id": mid, "channel": channel, "text": text, "created_at": now}


@mcp.tool(
    annotations=ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False)
)
def list_messages(
    channel: Channel, limit: Annotated[int, Field(ge=1, le=200, description="How many recent messages, 1-200.")] = 20
) -> dict[str, Any]:
    """List the most recent messages of a team chat channel, newest last:
    {channel, messages: [{id, text, created_at}], count}. limit is 1-200 (default 20).
    Read-only; use post_message to send."""
    channel = _check_channel(channel)
    if not 1 <= int(limit) <= 200:
        raise ValueError(f"limit must be 1-200, got {limit}")
    con = _db()
    try:
        rows = con.execute(
            "SELECT id, text, created_at FROM messages WHERE channel = ? ORDER BY id DESC LIMIT ?",
            (channel, int(limit)),
        ).fetchall()
    finally:
        con.close()
    msgs = [{"id": i, "text": t, "created_at": c} for i, t, c in reversed(rows)]
    return {"channel": channel, "messages": msgs, "count": len(msgs)}


def main() -> None:
    """Serve over stdio until stdin closes."""
    mcp.run("stdio")


if __name__ == "__main__":
    main()
