"""OAuth 2.1 for HTTP MCP servers, through the ``mcp`` SDK's auth support (``httpx.Auth``
providers: protected-resource and authorization-server metadata discovery, dynamic client
registration, client-ID metadata documents, PKCE, scopes from ``WWW-Authenticate`` /
``scopes_supported``, step-up, token refresh).

Config (the ``auth`` key of an ``mcpServers`` entry with a ``url``)::

    "auth": {"type": "oauth",
             "scopes": ["read", "write"],                      optional
             "clientId": "...", "clientSecret": "...",         pre-registration (optional;
                                                               otherwise dynamic registration)
             "tokenEndpointAuthMethod": "client_secret_basic", with a clientSecret (or _post / none)
             "grant": "authorization_code" | "client_credentials",
             "privateKeyPem": "...", "signingAlgorithm": "ES256",  client_credentials with private_key_jwt
             "redirectUri": "http://127.0.0.1:33418/callback",  loopback redirect (authorization code)
             "clientMetadataUrl": "https://.../client.json",   client-ID metadata document (optional)
             "mode": "browser" | "headless"}

``mode`` "browser" (default): the authorization URL is logged and the loopback redirect is
received by a one-shot HTTP listener on ``redirectUri``'s host and port (127.0.0.1 only);
"headless": the client fetches the authorization URL itself and reads the code from the
redirect (authorization servers that approve without a user, e.g. the conformance suite's).

Tokens and client registrations are stored per server in ``<data_dir>/mcp_auth/<server>.json``
(file mode 0600, folder 0700); with no data dir they stay in memory.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import httpx
from mcp.client.auth import OAuthClientProvider, TokenStorage
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from pydantic import AnyUrl

log = logging.getLogger(__name__)

DEFAULT_REDIRECT = "http://127.0.0.1:33418/callback"
AUTH_DIR = "mcp_auth"
#: Seconds the browser flow waits for the loopback redirect.
CALLBACK_TIMEOUT_S = 300.0


class FileTokenStorage(TokenStorage):
    """Tokens and client information of one server in a JSON file (mode 0600); ``path=None``:
    in memory. File access runs in a thread (no blocking I/O on the event loop)."""

    def __init__(self, path: Path | None, client_info: OAuthClientInformationFull | None = None) -> None:
        self.path = path
        self._data: dict[str, Any] | None = None if path is not None else {}
        #: a pre-registered client (config): used instead of a stored registration
        self.preset = client_info

    def _read(self) -> dict[str, Any]:
        if self._data is None:
            try:
                self._data = json.loads(self.path.read_text(encoding="utf-8"))  # type: ignore[union-attr]
            except (OSError, json.JSONDecodeError):
                self._data = {}
        return self._data

    def _write(self) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.path.parent, 0o700)
        tmp = self.path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(self._data, f)
        os.chmod(tmp, 0o600)
        os.replace(tmp, self.path)

    async def _get(self, key: str) -> Any:
        data = await asyncio.to_thread(self._read)
        return data.get(key)

    async def _set(self, key: str, value: Any) -> None:
        data = await asyncio.to_thread(self._read)
        data[key] = value
        await asyncio.to_thread(self._write)

    async def get_tokens(self) -> OAuthToken | None:
        raw = await self._get("tokens")
        return OAuthToken.model_validate(raw) if raw else None

    async def set_tokens(self, tokens: OAuthToken) -> None:
        await self._set("tokens", tokens.model_dump(mode="json", exclude_none=True))

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        if self.preset is not None:
            return self.preset
        raw = await self._get("client_info")
        return OAuthClientInformationFull.model_validate(raw) if raw else None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        if self.preset is not None and client_info.client_id == self.preset.client_id:
            self.preset = client_info
            return
        await self._set("client_info", client_info.model_dump(mode="json", exclude_none=True))


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


def token_path(data_dir: Path | None, server: str) -> Path | None:
    return None if data_dir is None else Path(data_dir) / AUTH_DIR / f"{server}.json"


def oauth_provider(server: str, url: str, cfg: dict[str, Any], data_dir: Path | None) -> httpx.Auth:
    """The ``httpx.Auth`` of one server's ``auth`` config (module docstring)."""
    storage = FileTokenStorage(token_path(data_dir, server))
    scopes = " ".join(cfg.get("scopes") or []) or None
    client_id, secret = cfg.get("clientId"), cfg.get("clientSecret")
    if cfg.get("grant") == "client_credentials":
        from mcp.client.auth.extensions.client_credentials import (
            ClientCredentialsOAuthProvider,
            PrivateKeyJWTOAuthProvider,
            SignedJWTParameters,
        )

        if client_id and cfg.get("privateKeyPem"):  # private_key_jwt client authentication
            jwt = SignedJWTParameters(
                issuer=client_id,
                subject=client_id,
                signing_key=cfg["privateKeyPem"],
                signing_algorithm=cfg.get("signingAlgorithm", "ES256"),
            )
            return PrivateKeyJWTOAuthProvider(
                server_url=url,
                storage=storage,
                client_id=client_id,
                assertion_provider=jwt.create_assertion_provider(),
                scopes=scopes,
            )
        if not (client_id and secret):
            raise ValueError(f"MCP server '{server}': auth.grant client_credentials needs clientId and clientSecret")
        return ClientCredentialsOAuthProvider(
            server_url=url,
            storage=storage,
            client_id=client_id,
            client_secret=secret,
            scopes=scopes,
            token_endpoint_auth_method=cfg.get("tokenEndpointAuthMethod", "client_secret_basic"),
        )
    redirect_uri = cfg.get("redirectUri") or DEFAULT_REDIRECT
    flow = HeadlessRedirect() if cfg.get("mode") == "headless" else LoopbackRedirect(server, redirect_uri)
    # the SDK's pydantic models check the name against the methods they accept
    method: Any = cfg.get("tokenEndpointAuthMethod") or ("client_secret_basic" if secret else "none")
    metadata = OAuthClientMetadata(
        client_name="Hermes Agent",
        redirect_uris=[AnyUrl(redirect_uri)],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        scope=scopes,
        token_endpoint_auth_method=method if not client_id else None,
    )
    provider = OAuthClientProvider(
        server_url=url,
        client_metadata=metadata,
        storage=storage,
        redirect_handler=flow.redirect,
        callback_handler=flow.callback,
        client_metadata_url=cfg.get("clientMetadataUrl"),
    )
    if client_id:  # pre-registered: no dynamic registration
        storage.preset = OAuthClientInformationFull(
            client_id=client_id,
            client_secret=secret,
            redirect_uris=[AnyUrl(redirect_uri)],
            token_endpoint_auth_method=method,
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            scope=scopes,
        )
    return provider
