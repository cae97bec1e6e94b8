"""OAuth token storage of MCP servers: per server under the data dir, file mode 0600."""

from __future__ import annotations

import stat

from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from pydantic import AnyUrl

from tools.mcp.auth import FileTokenStorage, oauth_provider, token_path
from tools.mcp.config import MCPConfigError, server_settings

import pytest


async def test_tokens_stored_0600_and_reloaded(tmp_path):
    path = token_path(tmp_path, "srv")
    storage = FileTokenStorage(path)
    assert await storage.get_tokens() is None
    await storage.set_tokens(OAuthToken(access_token="a", token_type="Bearer", refresh_token="r", expires_in=60))
    await storage.set_client_info(OAuthClientInformationFull(client_id="c", redirect_uris=[AnyUrl("http://127.0.0.1:1/cb")]))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    again = FileTokenStorage(path)
    assert (await again.get_tokens()).refresh_token == "r" and (await again.get_client_info()).client_id == "c"


def test_auth_config_validated_and_provider_built(tmp_path):
    with pytest.raises(MCPConfigError, match="HTTP servers"):
        server_settings("s", {"command": "x", "auth": {"type": "oauth"}})
    with pytest.raises(MCPConfigError, match="scopes"):
        server_settings("s", {"url": "http://h/mcp", "auth": {"scopes": "read"}})
    cfg = server_settings("s", {"url": "http://h/mcp", "auth": {"scopes": ["read"], "clientId": "pre"}}).auth
    provider = oauth_provider("s", "http://h/mcp", cfg, tmp_path)
    assert provider.context.storage.preset.client_id == "pre"
