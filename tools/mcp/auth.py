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
             "grant": "authorization_code" | "client_credentials" | "enterprise",
             "privateKeyPem": "...", "signingAlgorithm": "ES256",  client_credentials with private_key_jwt
             "idpTokenEndpoint": "https://idp/token",          enterprise (SEP-990): the IdP's token
             "idpClientId": "...", "idpClientSecret": "...",   endpoint and Hermes's client there;
             "idToken": "..." | "idTokenFile": "/path",        the user's OpenID ID token (the file is
                                                               read at each exchange, so SSO tooling
                                                               can keep it fresh)
             "redirectUri": "http://127.0.0.1:33418/callback",  loopback redirect (authorization code)
             "clientMetadataUrl": "https://.../client.json",   client-ID metadata document (optional)
             "mode": "browser" | "headless"}

``mode`` "browser" (default): the authorization URL is logged and the loopback redirect is
received by a one-shot HTTP listener on ``redirectUri``'s host and port (127.0.0.1 only);
"headless": the client fetches the authorization URL itself and reads the code from the
redirect (authorization servers that approve without a user, e.g. the conformance suite's).

``grant`` "enterprise" is SEP-990 enterprise-managed authorization (the conformance suite's
"cross-app access"), which mcp 1.x does not ship: :class:`EnterpriseAuthProvider` exchanges the ID
token at the IdP for an ID-JAG (RFC 8693 token exchange), then presents it to the MCP server's
authorization server as a JWT bearer grant (RFC 7523) with Hermes's client credentials there.

Servers on the 2025-03-26 spec (no protected-resource metadata) publish authorization-server
metadata at their origin; the SDK requires its ``issuer`` to be that origin (RFC 8414 §3.3), which
the 2025-03-26 spec does not ask of them. :class:`LegacyDiscoveryProvider` (the base of every
provider here) accepts there an issuer on the MCP server's own origin with a path (e.g.
``http://host/oauth``); an issuer on another origin is still refused.

Tokens and client registrations are stored per server in ``<data_dir>/mcp_auth/<server>.json``
(file mode 0600, folder 0700; ``tools.mcp.token_storage``); with no data dir they stay in memory.
The two redirect modes are ``tools.mcp.oauth_redirect``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
from mcp.client.auth import OAuthClientProvider, OAuthFlowError, OAuthTokenError
from mcp.client.auth.extensions.client_credentials import (
    ClientCredentialsOAuthProvider,
    PrivateKeyJWTOAuthProvider,
    SignedJWTParameters,
)
from mcp.client.auth.utils import (
    create_oauth_metadata_request,
    handle_auth_metadata_response,
    handle_protected_resource_response,
)
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata
from pydantic import AnyUrl

from tools.mcp.oauth_redirect import HeadlessRedirect, LoopbackRedirect
from tools.mcp.token_storage import FileTokenStorage

log = logging.getLogger(__name__)

DEFAULT_REDIRECT = "http://127.0.0.1:33418/callback"
AUTH_DIR = "mcp_auth"
#: Seconds an IdP token exchange may take.
IDP_TIMEOUT_S = 30.0
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:id_token"
ID_JAG_TYPE = "urn:ietf:params:oauth:token-type:id-jag"


def _origin(url: str | httpx.URL) -> tuple[str, str, int]:
    """``(scheme, host, port)`` of a URL, the port defaulted (80 / 443)."""
    u = httpx.URL(str(url))
    return u.scheme, u.host, u.port or (443 if u.scheme == "https" else 80)


class LegacyDiscoveryProvider(OAuthClientProvider):
    """The SDK's OAuth provider, plus the 2025-03-26 discovery of servers without
    protected-resource metadata: authorization-server metadata fetched from the MCP server's
    origin (``/.well-known/oauth-authorization-server``) may name an issuer on that same origin
    with a path (``http://host/oauth``).

    The SDK checks that metadata's ``issuer`` against the origin before it has seen it (RFC 8414
    §3.3 in the metadata-first flow; the 2025-03-26 spec has no issuer to compare with). When the
    root protected-resource metadata request finds nothing (the legacy path), this class fetches
    the origin's metadata once itself and, if its issuer is on the MCP server's origin, makes that
    issuer the expected one; the SDK's own request for the same URL is answered with that response
    (no second fetch). An issuer on any other origin is left to the SDK's check, which refuses it.
    """

    _legacy_issuer: str | None = None
    _legacy_metadata: tuple[httpx.URL, httpx.Response] | None = None

    def _expected_issuer(self) -> str:
        if self.context.auth_server_url is None and self._legacy_issuer:
            return self._legacy_issuer
        return super()._expected_issuer()

    async def _legacy_probe_issuer(self, response: httpx.Response) -> str | None:
        """The issuer of the origin's metadata ``response`` if it is on the MCP server's origin."""
        ok, metadata = await handle_auth_metadata_response(response)
        if not ok or metadata is None:
            return None
        issuer = str(metadata.issuer)
        if _origin(issuer) != _origin(self.context.server_url):
            return None
        if httpx.URL(issuer).path not in ("", "/"):
            log.info("MCP server %s (2025-03-26 discovery): issuer %s accepted", self.context.server_url, issuer)
        return issuer

    async def _auth_flow(self, request: httpx.Request) -> AsyncGenerator[httpx.Request, httpx.Response]:
        base = httpx.URL(self.context.server_url).copy_with(path="/", query=None, fragment=None)
        root_prm = base.join("/.well-known/oauth-protected-resource")
        legacy_asm = base.join("/.well-known/oauth-authorization-server")
        flow = super()._auth_flow(request)
        try:
            outgoing = await flow.__anext__()
            while True:
                held = self._legacy_metadata
                if held is not None and outgoing.method == "GET" and outgoing.url == held[0]:
                    self._legacy_metadata = None
                    response = held[1]
                else:
                    response = yield outgoing
                if outgoing is not request and outgoing.method == "GET" and outgoing.url == root_prm:
                    self._legacy_issuer = self._legacy_metadata = None
                    legacy = response.status_code < 500 and response.status_code != 429
                    if legacy and await handle_protected_resource_response(response) is None:
                        probe = yield create_oauth_metadata_request(str(legacy_asm))
                        self._legacy_metadata = (legacy_asm, probe)
                        self._legacy_issuer = await self._legacy_probe_issuer(probe)
                outgoing = await flow.asend(response)
        except StopAsyncIteration:
            return
        finally:
            self._legacy_metadata = None  # a held response never outlives its flow
            await flow.aclose()


class HermesOAuthProvider(LegacyDiscoveryProvider):
    """Authorization code + PKCE (the SDK's flow) with :class:`LegacyDiscoveryProvider`."""


class HermesClientCredentials(LegacyDiscoveryProvider, ClientCredentialsOAuthProvider):
    """client_credentials with a client secret, with :class:`LegacyDiscoveryProvider`."""


class HermesPrivateKeyJWT(LegacyDiscoveryProvider, PrivateKeyJWTOAuthProvider):
    """client_credentials with private_key_jwt, with :class:`LegacyDiscoveryProvider`."""


class EnterpriseAuthProvider(LegacyDiscoveryProvider):
    """SEP-990 enterprise-managed authorization, an MCP authorization extension (mcp 1.x has no
    client for it; the conformance suite's ``auth/cross-app-access-complete-flow``).

    After the SDK's discovery (protected-resource and authorization-server metadata), instead of
    an authorization request:

    1. RFC 8693 token exchange at the enterprise IdP (``idp_token_endpoint``): the user's OpenID
       ID token (``subject_token_type`` ``...:id_token``) for an Identity Assertion JWT
       Authorization Grant (``requested_token_type`` ``...:id-jag``), ``audience`` the
       authorization server's issuer, ``resource`` the MCP server (RFC 8707), ``scope`` when
       chosen; Hermes authenticates there as ``idp_client_id`` (HTTP Basic with
       ``idp_client_secret``, else ``client_id`` in the form).
    2. RFC 7523 JWT bearer grant at the authorization server's token endpoint: ``assertion`` the
       ID-JAG, client authentication ``client_id`` / ``client_secret`` (``client_secret_basic``
       unless ``token_endpoint_auth_method`` says otherwise).

    The access token is stored like any other (:class:`FileTokenStorage`); when it expires the
    next 401 runs both steps again (an ID-JAG is short-lived and not kept).

    Errors: :class:`OAuthTokenError` when the IdP refuses the exchange or answers something other
    than an ID-JAG; :class:`OAuthFlowError` without authorization-server metadata (the ID-JAG's
    audience is its issuer).
    """

    def __init__(
        self,
        server_url: str,
        storage: FileTokenStorage,
        *,
        client_id: str,
        client_secret: str | None,
        idp_token_endpoint: str,
        id_token: Callable[[], Awaitable[str]],
        idp_client_id: str | None = None,
        idp_client_secret: str | None = None,
        scopes: str | None = None,
        token_endpoint_auth_method: Any = None,
        idp_transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        method: Any = token_endpoint_auth_method or ("client_secret_basic" if client_secret else "none")
        metadata = OAuthClientMetadata(
            redirect_uris=None, grant_types=[JWT_BEARER], token_endpoint_auth_method=method, scope=scopes
        )
        super().__init__(server_url, metadata, storage, None, None, 300.0)
        storage.preset = OAuthClientInformationFull(
            redirect_uris=None,
            client_id=client_id,
            client_secret=client_secret,
            grant_types=[JWT_BEARER],
            token_endpoint_auth_method=method,
            scope=scopes,
        )
        self.idp_token_endpoint = idp_token_endpoint
        self.idp_client_id, self.idp_client_secret = idp_client_id, idp_client_secret
        self._id_token = id_token
        self._idp_transport = idp_transport  # tests: an httpx.MockTransport for the IdP

    async def request_id_jag(self, audience: str, resource: str) -> str:
        """Step 1: the ID-JAG for ``audience`` (issuer URL) and ``resource`` (MCP server URL)."""
        data = {
            "grant_type": TOKEN_EXCHANGE,
            "requested_token_type": ID_JAG_TYPE,
            "audience": audience,
            "resource": resource,
            "subject_token": await self._id_token(),
            "subject_token_type": ID_TOKEN_TYPE,
        }
        scope = self.context.client_metadata.scope
        if scope:
            data["scope"] = scope
        auth: httpx.BasicAuth | None = None
        if self.idp_client_id and self.idp_client_secret:
            auth = httpx.BasicAuth(self.idp_client_id, self.idp_client_secret)
        elif self.idp_client_id:
            data["client_id"] = self.idp_client_id
        async with httpx.AsyncClient(timeout=IDP_TIMEOUT_S, auth=auth, transport=self._idp_transport) as client:
            response = await client.post(self.idp_token_endpoint, data=data)
        if response.status_code != 200:
            raise OAuthTokenError(f"IdP token exchange failed ({response.status_code}): {response.text[:300]}")
        try:
            body = response.json()
        except ValueError as exc:
            raise OAuthTokenError(f"IdP token exchange answered no JSON: {response.text[:300]}") from exc
        token = body.get("access_token") if isinstance(body, dict) else None
        if not isinstance(token, str) or not token or body.get("issued_token_type") != ID_JAG_TYPE:
            raise OAuthTokenError(
                f"IdP token exchange answered no ID-JAG (issued_token_type {body.get('issued_token_type')!r})"
                if isinstance(body, dict)
                else "IdP token exchange answered no JSON object"
            )
        return token

    async def _perform_authorization(self) -> httpx.Request:
        """Step 2 (after step 1): the JWT bearer grant request for the SDK to send."""
        metadata = self.context.oauth_metadata
        if metadata is None:
            raise OAuthFlowError("no authorization server metadata: the ID-JAG's audience is its issuer")
        assertion = await self.request_id_jag(str(metadata.issuer), self.context.get_resource_url())
        data: dict[str, str] = {"grant_type": JWT_BEARER, "assertion": assertion}
        scope, info = self.context.client_metadata.scope, self.context.client_info
        if scope:
            data["scope"] = scope
        if info is not None and info.client_id and info.token_endpoint_auth_method == "none":
            data["client_id"] = info.client_id  # a public client names itself in the form
        data, headers = self.context.prepare_token_auth(data, {"Content-Type": "application/x-www-form-urlencoded"})
        return httpx.Request("POST", self._get_token_endpoint(), data=data, headers=headers)


def id_token_source(server: str, cfg: dict[str, Any]) -> Callable[[], Awaitable[str]]:
    """``idToken`` as given, or ``idTokenFile`` read (stripped) at each call."""
    literal, file = cfg.get("idToken"), cfg.get("idTokenFile")

    def read_file() -> str:
        return Path(str(file)).expanduser().read_text(encoding="utf-8").strip()

    async def read() -> str:
        if literal:
            return str(literal)
        try:
            text = await asyncio.to_thread(read_file)
        except OSError as exc:
            raise OAuthFlowError(f"MCP server '{server}': auth.idTokenFile {file}: {exc}") from exc
        if not text:
            raise OAuthFlowError(f"MCP server '{server}': auth.idTokenFile {file} is empty")
        return text

    return read


def token_path(data_dir: Path | None, server: str) -> Path | None:
    return None if data_dir is None else Path(data_dir) / AUTH_DIR / f"{server}.json"


def oauth_provider(server: str, url: str, cfg: dict[str, Any], data_dir: Path | None) -> httpx.Auth:
    """The ``httpx.Auth`` of one server's ``auth`` config (module docstring)."""
    storage = FileTokenStorage(token_path(data_dir, server))
    scopes = " ".join(cfg.get("scopes") or []) or None
    client_id, secret = cfg.get("clientId"), cfg.get("clientSecret")
    if cfg.get("grant") == "enterprise":
        missing = [k for k in ("clientId", "idpTokenEndpoint") if not cfg.get(k)]
        if not (cfg.get("idToken") or cfg.get("idTokenFile")):
            missing.append("idToken or idTokenFile")
        if missing:
            raise ValueError(f"MCP server '{server}': auth.grant enterprise needs {', '.join(missing)}")
        return EnterpriseAuthProvider(
            url,
            storage,
            client_id=str(client_id),
            client_secret=secret,
            idp_token_endpoint=cfg["idpTokenEndpoint"],
            id_token=id_token_source(server, cfg),
            idp_client_id=cfg.get("idpClientId"),
            idp_client_secret=cfg.get("idpClientSecret"),
            scopes=scopes,
            token_endpoint_auth_method=cfg.get("tokenEndpointAuthMethod"),
        )
    if cfg.get("grant") == "client_credentials":
        if client_id and cfg.get("privateKeyPem"):  # private_key_jwt client authentication
            jwt = SignedJWTParameters(
                issuer=client_id,
                subject=client_id,
                signing_key=cfg["privateKeyPem"],
                signing_algorithm=cfg.get("signingAlgorithm", "ES256"),
            )
            return HermesPrivateKeyJWT(
                server_url=url,
                storage=storage,
                client_id=client_id,
                assertion_provider=jwt.create_assertion_provider(),
                scopes=scopes,
            )
        if not (client_id and secret):
            raise ValueError(f"MCP server '{server}': auth.grant client_credentials needs clientId and clientSecret")
        return HermesClientCredentials(
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
    provider = HermesOAuthProvider(
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
