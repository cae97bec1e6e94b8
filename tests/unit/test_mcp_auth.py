"""OAuth of MCP servers: token storage per server under the data dir (file mode 0600), the
2025-03-26 discovery's same-origin issuer, SEP-990 enterprise-managed authorization (ID-JAG token
exchange + JWT bearer grant), over ``httpx.MockTransport`` (no socket)."""

from __future__ import annotations

import base64
import stat
from urllib.parse import parse_qs, urlparse

import httpx
import pytest
from mcp.client.auth import OAuthFlowError, OAuthTokenError
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from pydantic import AnyUrl

from tools.mcp.auth import (
    ID_JAG_TYPE,
    ID_TOKEN_TYPE,
    JWT_BEARER,
    TOKEN_EXCHANGE,
    EnterpriseAuthProvider,
    HermesOAuthProvider,
    id_token_source,
    oauth_provider,
    token_path,
)
from tools.mcp.config import MCPConfigError, server_settings
from tools.mcp.token_storage import FileTokenStorage


async def test_tokens_stored_0600_and_reloaded(tmp_path):
    path = token_path(tmp_path, "srv")
    storage = FileTokenStorage(path)
    assert await storage.get_tokens() is None
    await storage.set_tokens(OAuthToken(access_token="a", token_type="Bearer", refresh_token="r", expires_in=60))
    await storage.set_client_info(
        OAuthClientInformationFull(client_id="c", redirect_uris=[AnyUrl("http://127.0.0.1:1/cb")])
    )
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    again = FileTokenStorage(path)
    assert (await again.get_tokens()).refresh_token == "r" and (await again.get_client_info()).client_id == "c"


def test_auth_config_validated_and_provider_built(tmp_path):
    with pytest.raises(MCPConfigError, match="HTTP servers"):
        server_settings("s", {"command": "x", "auth": {"type": "oauth"}})
    with pytest.raises(MCPConfigError, match="scopes"):
        server_settings("s", {"url": "http://h/mcp", "auth": {"scopes": "read"}})
    with pytest.raises(MCPConfigError, match=r"auth\.grant"):
        server_settings("s", {"url": "http://h/mcp", "auth": {"grant": "password"}})
    cfg = server_settings("s", {"url": "http://h/mcp", "auth": {"scopes": ["read"], "clientId": "pre"}}).auth
    provider = oauth_provider("s", "http://h/mcp", cfg, tmp_path)
    assert provider.context.storage.preset.client_id == "pre"


# --- 2025-03-26 discovery (no protected-resource metadata) and SEP-990, over httpx.MockTransport ---


def _legacy_server(issuer: str, seen: list[tuple[str, str]]):
    """An MCP server on http://h with no PRM; its authorization server's metadata at the origin
    names ``issuer`` and endpoints under /oauth (the conformance suite's legacy scenario)."""

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append((request.method, request.url.path))
        path = request.url.path
        if path == "/mcp":
            ok = request.headers.get("authorization") == "Bearer tok"
            return httpx.Response(200, json={"ok": True}) if ok else httpx.Response(401)
        if path == "/.well-known/oauth-authorization-server":
            return httpx.Response(
                200,
                json={
                    "issuer": issuer,
                    "authorization_endpoint": "http://h/oauth/authorize",
                    "token_endpoint": "http://h/oauth/token",
                    "registration_endpoint": "http://h/oauth/register",
                    "response_types_supported": ["code"],
                    "code_challenge_methods_supported": ["S256"],
                },
            )
        if path == "/oauth/register":
            return httpx.Response(201, json={"client_id": "cid", "redirect_uris": ["http://127.0.0.1:1/cb"]})
        if path == "/oauth/token":
            return httpx.Response(200, json={"access_token": "tok", "token_type": "Bearer", "expires_in": 3600})
        return httpx.Response(404)

    return handler


def _code_flow_provider() -> HermesOAuthProvider:
    state: dict[str, str] = {}

    async def redirect(url: str) -> None:
        state["state"] = parse_qs(urlparse(url).query)["state"][0]

    async def callback() -> tuple[str, str | None]:
        return "code", state["state"]

    metadata = OAuthClientMetadata(redirect_uris=[AnyUrl("http://127.0.0.1:1/cb")])
    return HermesOAuthProvider(
        server_url="http://h/mcp",
        client_metadata=metadata,
        storage=FileTokenStorage(None),
        redirect_handler=redirect,
        callback_handler=callback,
    )


async def test_legacy_metadata_with_a_same_origin_issuer_path_is_used():
    seen: list[tuple[str, str]] = []
    provider = _code_flow_provider()
    async with httpx.AsyncClient(
        transport=httpx.MockTransport(_legacy_server("http://h/oauth", seen)), auth=provider
    ) as client:
        response = await client.post("http://h/mcp", json={})
    assert response.status_code == 200
    assert str(provider.context.oauth_metadata.issuer) == "http://h/oauth"
    assert ("POST", "/oauth/register") in seen and ("POST", "/oauth/token") in seen
    assert seen.count(("GET", "/.well-known/oauth-authorization-server")) == 1  # fetched once, not twice


async def test_legacy_metadata_naming_another_origin_is_refused():
    seen: list[tuple[str, str]] = []
    async with httpx.AsyncClient(
        transport=httpx.MockTransport(_legacy_server("http://other/oauth", seen)), auth=_code_flow_provider()
    ) as client:
        with pytest.raises(OAuthFlowError, match="issuer mismatch"):
            await client.post("http://h/mcp", json={})
    assert ("POST", "/oauth/register") not in seen


def _enterprise_world(exchanges: list[dict], grants: list[tuple[dict, str]], issued_type: str = ID_JAG_TYPE):
    """MCP server http://h/mcp (PRM → authorization server http://as, jwt-bearer only) and an IdP."""

    def server(request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if request.url.host == "h" and path == "/mcp":
            ok = request.headers.get("authorization") == "Bearer at"
            return httpx.Response(200, json={"ok": True}) if ok else httpx.Response(401)
        if path == "/.well-known/oauth-protected-resource/mcp":
            return httpx.Response(200, json={"resource": "http://h/mcp", "authorization_servers": ["http://as/"]})
        if request.url.host == "as" and path == "/.well-known/oauth-authorization-server":
            return httpx.Response(
                200,
                json={
                    "issuer": "http://as/",
                    "authorization_endpoint": "http://as/authorize",
                    "token_endpoint": "http://as/token",
                    "response_types_supported": ["code"],
                    "grant_types_supported": [JWT_BEARER],
                },
            )
        if request.url.host == "as" and path == "/token":
            grants.append(
                (
                    {k: v[0] for k, v in parse_qs(request.content.decode()).items()},
                    request.headers.get("authorization", ""),
                )
            )
            return httpx.Response(200, json={"access_token": "at", "token_type": "Bearer", "expires_in": 3600})
        return httpx.Response(404)

    def idp(request: httpx.Request) -> httpx.Response:
        exchanges.append({k: v[0] for k, v in parse_qs(request.content.decode()).items()})
        return httpx.Response(
            200, json={"access_token": "the-jag", "issued_token_type": issued_type, "token_type": "N_A"}
        )

    return httpx.MockTransport(server), httpx.MockTransport(idp)


async def test_enterprise_exchanges_the_id_token_then_presents_the_id_jag(tmp_path):
    id_file = tmp_path / "id_token"
    id_file.write_text("the-id-token\n")
    exchanges: list[dict] = []
    grants: list[tuple[dict, str]] = []
    server, idp = _enterprise_world(exchanges, grants)
    provider = EnterpriseAuthProvider(
        "http://h/mcp",
        FileTokenStorage(token_path(tmp_path, "ent")),
        client_id="xaa",
        client_secret="s:c",
        idp_token_endpoint="http://idp/token",
        id_token=id_token_source("ent", {"idTokenFile": str(id_file)}),
        idp_client_id="idp-client",
        idp_transport=idp,
    )
    async with httpx.AsyncClient(transport=server, auth=provider) as client:
        assert (await client.post("http://h/mcp", json={})).status_code == 200
    assert exchanges == [
        {
            "grant_type": TOKEN_EXCHANGE,
            "requested_token_type": ID_JAG_TYPE,
            "audience": "http://as/",
            "resource": "http://h/mcp",
            "subject_token": "the-id-token",
            "subject_token_type": ID_TOKEN_TYPE,
            "client_id": "idp-client",
        }
    ]
    ((form, authorization),) = grants
    assert form["grant_type"] == JWT_BEARER and form["assertion"] == "the-jag" and "client_secret" not in form
    assert authorization == "Basic " + base64.b64encode(b"xaa:s%3Ac").decode()  # RFC 6749 §2.3.1 encoding
    path = token_path(tmp_path, "ent")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert (await FileTokenStorage(path).get_tokens()).access_token == "at"


async def test_enterprise_refuses_an_exchange_that_is_not_an_id_jag(tmp_path):
    exchanges: list[dict] = []
    grants: list[tuple[dict, str]] = []
    server, idp = _enterprise_world(exchanges, grants, issued_type="urn:ietf:params:oauth:token-type:access_token")

    async def token() -> str:
        return "t"

    provider = EnterpriseAuthProvider(
        "http://h/mcp",
        FileTokenStorage(None),
        client_id="xaa",
        client_secret="s",
        idp_token_endpoint="http://idp/token",
        id_token=token,
        idp_transport=idp,
    )
    async with httpx.AsyncClient(transport=server, auth=provider) as client:
        with pytest.raises(OAuthTokenError, match="no ID-JAG"):
            await client.post("http://h/mcp", json={})
    assert len(exchanges) == 1 and grants == []


def test_enterprise_config_needs_its_keys(tmp_path):
    with pytest.raises(ValueError, match="clientId, idpTokenEndpoint, idToken or idTokenFile"):
        oauth_provider("s", "http://h/mcp", {"grant": "enterprise"}, tmp_path)
    cfg = {
        "grant": "enterprise",
        "clientId": "c",
        "clientSecret": "x",
        "idpTokenEndpoint": "http://idp/token",
        "idToken": "t",
    }
    assert isinstance(oauth_provider("s", "http://h/mcp", cfg, tmp_path), EnterpriseAuthProvider)
