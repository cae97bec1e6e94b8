"""Hermes's MCP client as the test subject of the official conformance suite
(npm ``@modelcontextprotocol/conformance``, client scenarios).

Run: ``python -m tools.mcp.conformance_client URL`` — the suite starts it with its test
server's URL as the last argument, the scenario in ``MCP_CONFORMANCE_SCENARIO`` and, for some
auth scenarios, credentials in ``MCP_CONFORMANCE_CONTEXT`` (JSON: ``client_id``, ``client_secret``,
``private_key_pem``; for SEP-990 cross-app access ``idp_id_token``, ``idp_token_endpoint``,
``idp_client_id``). Everything goes through the
same code Hermes uses for its servers: :class:`tools.mcp.client.MCPServer` (pool, handshake,
``tools/list``, ``tools/call``), the ``elicitation: "defaults"`` answer and the OAuth config of
:mod:`tools.mcp.auth` (headless redirect: the suite's authorization server approves without a
user). Exit code 0 when the scenario's calls succeeded, 1 otherwise; logs go to stderr.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from typing import Any

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from tools.mcp.client import MCPServer

log = logging.getLogger("hermes.conformance")

#: Scenario → (tool, arguments) the client calls after the handshake.
CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "tools_call": ("add_numbers", {"a": 5, "b": 3}),
    "sse-retry": ("test_reconnection", {}),
    "elicitation-sep1034-client-defaults": ("test_client_elicitation_defaults", {}),
}


class ConformanceSettings(BaseSettings):
    """What the conformance runner tells this process, from its environment (prefix
    ``MCP_CONFORMANCE_``: the suite's names, not Hermes's)."""

    model_config = SettingsConfigDict(env_prefix="MCP_CONFORMANCE_", extra="ignore", frozen=True)

    scenario: str = Field(default="initialize", description="MCP_CONFORMANCE_SCENARIO: the scenario's name.")
    context: str = Field(default="", description="MCP_CONFORMANCE_CONTEXT: JSON credentials of auth scenarios.")

    def context_json(self) -> dict[str, Any]:
        """:attr:`context` parsed; ``{}`` when empty, not JSON or not an object."""
        try:
            value = json.loads(self.context or "{}")
        except json.JSONDecodeError:
            return {}
        return value if isinstance(value, dict) else {}


def entry_for(url: str, scenario: str, context: dict[str, Any]) -> dict[str, Any]:
    """The ``mcpServers`` entry Hermes would use for this scenario's server."""
    entry: dict[str, Any] = {
        "url": url,
        "transport": "streamable_http",
        "pool": {"min": 1, "max": 1},
        "timeoutSeconds": 20,
        "elicitation": "defaults",
    }
    if scenario.startswith("auth/"):
        auth: dict[str, Any] = {
            "type": "oauth",
            "mode": "headless",
            "redirectUri": "http://localhost:3000/callback",
            "clientMetadataUrl": "https://conformance-test.local/client-metadata.json",
        }
        if context.get("client_id"):
            auth["clientId"] = context["client_id"]
        if context.get("client_secret"):
            auth["clientSecret"] = context["client_secret"]
        if context.get("idp_id_token"):  # SEP-990 (cross-app access): the IdP's ID token and client
            auth["grant"] = "enterprise"
            auth["idToken"] = context["idp_id_token"]
            auth["idpTokenEndpoint"] = context.get("idp_token_endpoint", "")
            if context.get("idp_client_id"):
                auth["idpClientId"] = context["idp_client_id"]
        elif scenario.startswith("auth/client-credentials"):
            auth["grant"] = "client_credentials"
            if context.get("private_key_pem"):
                auth["privateKeyPem"] = context["private_key_pem"]
                auth["signingAlgorithm"] = context.get("signing_algorithm", "ES256")
        entry["auth"] = auth
    return entry


async def run(url: str, scenario: str, context: dict[str, Any]) -> int:
    server = MCPServer("conformance", entry_for(url, scenario, context), startup_timeout_s=25.0)
    try:
        await server.start()
        log.info(
            "initialized: protocol %s, capabilities %s, %d tools",
            server.protocol_version,
            sorted(server.capabilities),
            len(server.tools),
        )
        call = CALLS.get(scenario)
        if call is None and scenario.startswith("auth/") and server.tools:
            call = (next(iter(server.tools)), {})
        if call is not None:
            try:
                result = await server.call_tool(call[0], call[1], timeout_s=20.0, retry_safe=False)
                log.info("%s → %s", call[0], json.dumps(result, default=str)[:500])
            except Exception as exc:
                if not scenario.startswith("auth/"):  # an auth scenario's tool may answer an error
                    raise
                log.info("%s → error %s", call[0], exc)
        return 0
    except Exception as exc:  # noqa: BLE001 - reported, exit code 1
        log.error("scenario %s failed: %s", scenario, exc)
        return 1
    finally:
        await server.aclose()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        print(
            "usage: python -m tools.mcp.conformance_client URL (scenario in MCP_CONFORMANCE_SCENARIO)", file=sys.stderr
        )
        return 2
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    settings = ConformanceSettings()
    return asyncio.run(run(argv[-1], settings.scenario, settings.context_json()))


if __name__ == "__main__":
    sys.exit(main())
