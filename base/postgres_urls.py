"""PostgreSQL URLs in messages: never the password, always the setting's name, one line.

Every module that connects to ``HERMES_POSTGRES_URL`` (checkpoints, the ledger, the schedule,
delivery marks, memory) reports a failed connection through :func:`connection_error`, so the
user reads which part could not connect, to which server, and what to do — and a malformed
URL, which psycopg quotes whole in its error, never prints its password.
"""

from __future__ import annotations

import re

SETTING = "HERMES_POSTGRES_URL"
_PASSWORD = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*://[^:@/\s]*):[^@\s]*@")


def redacted(url: str) -> str:
    """``postgresql://user:secret@host/db`` → ``postgresql://user:***@host/db`` (for messages;
    a ``password=`` keyword of a conninfo string too). Never raises."""
    url = _PASSWORD.sub(r"\1:***@", url or "")
    return re.sub(r"(password\s*=\s*)(?:'[^']*'|\S+)", r"\1***", url, flags=re.IGNORECASE)


def connection_error(exc: BaseException, url: str, what: str) -> str:
    """One line: ``what`` (e.g. "the reminder schedule") cannot use PostgreSQL at the redacted
    ``url`` (:data:`SETTING`), the cause's first line with the URL and password taken out, and
    what to do."""
    cause = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if url:
        cause = cause.replace(url, redacted(url))
    cause = redacted(cause) if "://" in cause or "password" in cause.lower() else cause
    return (
        f"{what} cannot use PostgreSQL at {redacted(url)} ({SETTING}): {cause}. Check that the server runs "
        f"and the URL is right, or unset {SETTING} to keep everything in the data directory."
    )
