"""Where an HTTP MCP server's OAuth tokens and client registration are kept: one JSON file per
server, ``<data_dir>/mcp_auth/<server>.json`` (file mode 0600, folder 0700; the path is
``tools.mcp.auth.token_path``), or memory when there is no data dir. The ``mcp`` SDK's
``TokenStorage`` interface.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

from mcp.client.auth import TokenStorage
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken


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
