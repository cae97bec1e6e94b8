"""The authorization-code redirect of an HTTP MCP server's OAuth flow (``mode`` in the server's
``auth`` config, ``tools.mcp.auth``): :class:`LoopbackRedirect` (browser: log the authorization
URL, receive the redirect on a one-shot 127.0.0.1 listener) and :class:`HeadlessRedirect` (fetch
the URL and read the code from the redirect, for servers that approve without a user).
"""

from __future__ import annotations

import asyncio
import logging
from urllib.parse import parse_qs, urlparse

import httpx

log = logging.getLogger(__name__)

#: Seconds the browser flow waits for the loopback redirect.
CALLBACK_TIMEOUT_S = 300.0


class HeadlessRedirect:
    """Redirect + callback handlers that fetch the authorization URL and take the code from the
    redirect's ``Location`` (no user agent)."""

    def __init__(self) -> None:
        self._result: tuple[str, str | None] | None = None

    async def redirect(self, authorization_url: str) -> None:
        async with httpx.AsyncClient() as client:
            response = await client.get(authorization_url, follow_redirects=False, timeout=30.0)
        location = response.headers.get("location")
        if response.status_code not in (301, 302, 303, 307, 308) or not location:
            raise RuntimeError(f"authorization endpoint answered {response.status_code} without a redirect")
        query = parse_qs(urlparse(location).query)
        if "code" not in query:
            raise RuntimeError(f"authorization redirect carries no code: {query.get('error', ['?'])[0]}")
        self._result = (query["code"][0], (query.get("state") or [None])[0])

    async def callback(self) -> tuple[str, str | None]:
        if self._result is None:
            raise RuntimeError("no authorization code (the redirect was not followed)")
        result, self._result = self._result, None
        return result


class LoopbackRedirect:
    """Browser flow: log the authorization URL, receive the redirect on a one-shot loopback
    HTTP listener (``redirect_uri``'s host must be 127.0.0.1 / localhost)."""

    def __init__(self, server: str, redirect_uri: str) -> None:
        self.server, self.redirect_uri = server, redirect_uri
        self._future: asyncio.Future[tuple[str, str | None]] | None = None
        self._listener: asyncio.AbstractServer | None = None

    async def redirect(self, authorization_url: str) -> None:
        url = urlparse(self.redirect_uri)
        if url.hostname not in ("127.0.0.1", "localhost", "::1"):
            raise RuntimeError(f"redirectUri {self.redirect_uri} must be a loopback address")
        loop = asyncio.get_running_loop()
        self._future = loop.create_future()

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                line = (await reader.readline()).decode("latin-1")
                target = line.split(" ")[1] if " " in line else "/"
                query = parse_qs(urlparse(target).query)
                ok = "code" in query
                body = (
                    "Hermes: authorised, you can close this tab."
                    if ok
                    else f"Hermes: authorisation failed ({query.get('error', ['?'])[0]})."
                )
                writer.write(
                    f"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\n"
                    f"Connection: close\r\n\r\n{body}".encode()
                )
                await writer.drain()
                if self._future is not None and not self._future.done():
                    if ok:
                        states = query.get("state")
                        self._future.set_result((query["code"][0], states[0] if states else None))
                    else:
                        self._future.set_exception(RuntimeError(body))
            finally:
                writer.close()

        self._listener = await asyncio.start_server(handle, url.hostname, url.port or 80)
        log.warning(
            "MCP server %s needs authorisation: open %s in a browser (waiting on %s)",
            self.server,
            authorization_url,
            self.redirect_uri,
        )

    async def callback(self) -> tuple[str, str | None]:
        assert self._future is not None
        try:
            return await asyncio.wait_for(self._future, CALLBACK_TIMEOUT_S)
        finally:
            if self._listener is not None:
                self._listener.close()
                self._listener = None
