"""The offer follows server health where the model chooses (seed §5.3): among distinct MCP tools
whose relevance is a near-tie, the better-scored server's tool comes first; a tool whose
servers are all parked by their circuit breaker comes last, with a note; a clear relevance lead
and builtin tools' places are kept. No processes: fake servers with the real Score and Breaker."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest

from nodes.call_model import offered_tools
from tools.mcp.client import MCPServer
from tools.mcp.replicas import Replica
from tools.mcp.scoring import Breaker, Score
from tools.registry import ToolRegistry
from tools.selection import NEAR_TIE, rank_tools
from tools.spec import ToolSpec
from tools.toolbox import Toolbox

P = {"type": "object", "properties": {"q": {"type": "string", "description": "what to look for"}}, "required": ["q"]}
QUERY = "search the web for langgraph"
SPECS = {
    "web_search": ("Search the web for a query and return titles and links.", "alpha"),
    "search_web": ("Search the web for a query and return links with short snippets of text.", "beta"),
    "find_pages": ("Find pages that match words.", "gamma"),
    "query_database": ("Run a read-only SQL query on the user's database and return rows.", "builtin"),
    "send_reminder": ("Schedule a reminder message at a given time.", "builtin"),
}


class FakeServer:
    """What ranking reads of an MCPServer: name, state, score, breaker."""

    def __init__(self, name: str, latency_s: float | None = None, ok: bool = True) -> None:
        self.name, self.state = name, "ready"
        self.score = Score()
        self.breaker = Breaker(failures=3, cooldown_s=30.0, clock=lambda: 0.0)
        for _ in range(5 if latency_s is not None else 0):
            self.score.update(latency_s or 0.0, ok)

    def park(self) -> FakeServer:
        for _ in range(3):
            self.breaker.failure("connection refused")
        self.state = "parked"
        return self


async def _run(args: dict[str, Any], request_id: str) -> Any:
    return {}


def toolbox(tmp_path: Path, servers: dict[str, list[FakeServer]]) -> Toolbox:
    registry = ToolRegistry()
    for name, (description, source) in SPECS.items():
        where = "builtin" if source == "builtin" else f"mcp:{source}"
        registry.register(ToolSpec(name=name, description=description, parameters=P, source=where), _run, strict=False)
    tb = Toolbox(tmp_path, registry, executor=None, mcp=None)  # type: ignore[arg-type]
    # a stand-in server: it has what ranking reads (name, score, breaker)
    tb.mcp_replicas = {
        tool: [Replica(cast(MCPServer, s), tool, 10.0, 30.0) for s in srvs] for tool, srvs in servers.items()
    }
    return tb


def names(tools: list[dict[str, Any]]) -> list[str]:
    return [t["function"]["name"] for t in tools]


def test_fixture_is_a_near_tie_with_a_clear_lead_over_the_rest():
    scores = {
        spec.name: score
        for score, spec in rank_tools(
            [ToolSpec(name=n, description=d, parameters=P, source="builtin") for n, (d, _) in SPECS.items()], QUERY
        )
    }
    assert scores["web_search"] > scores["search_web"] >= scores["web_search"] * (1 - NEAR_TIE)
    assert scores["query_database"] < scores["search_web"] * (1 - NEAR_TIE)
    assert [n for n in SPECS if scores[n] == 0] == ["find_pages", "send_reminder"]


def test_near_tie_goes_to_the_better_scored_server(tmp_path):
    slow_flaky, fast = FakeServer("alpha", latency_s=2.0, ok=False), FakeServer("beta", latency_s=0.05)
    tb = toolbox(tmp_path, {"web_search": [slow_flaky], "search_web": [fast], "find_pages": [FakeServer("gamma")]})
    offer = offered_tools(tb.registry, QUERY, set(), 0)
    assert names(offer)[:2] == ["search_web", "web_search"]  # relevance alone puts web_search first
    # the lead over query_database is clear: the never-called gamma (best score) stays below
    # it, and builtin tools keep their places
    assert names(offer)[2:] == ["query_database", "find_pages", "send_reminder"]
    assert names(offered_tools(tb.registry, QUERY, set(), 1)) == ["search_web"]  # the small-model cap


def test_equal_health_keeps_the_relevance_order(tmp_path):
    tb = toolbox(tmp_path, {"web_search": [FakeServer("alpha", 0.1)], "search_web": [FakeServer("beta", 0.1)]})
    assert names(offered_tools(tb.registry, QUERY, set(), 0))[:2] == ["web_search", "search_web"]


def test_a_parked_server_s_tool_comes_last_with_a_note(tmp_path):
    down = FakeServer("alpha", latency_s=0.01).park()  # fastest, but its breaker is open
    tb = toolbox(tmp_path, {"web_search": [down], "search_web": [FakeServer("beta", latency_s=1.0)]})
    offer = offered_tools(tb.registry, QUERY, set(), 0)
    assert names(offer)[:2] == ["search_web", "web_search"]
    note = offer[1]["function"]["description"]
    assert note.startswith(SPECS["web_search"][0]) and "unavailable now: MCP server alpha" in note
    assert "connection refused" in note and "30 s" in note
    assert "unavailable" not in offer[0]["function"]["description"]
    assert names(offered_tools(tb.registry, QUERY, set(), 1)) == ["search_web"]


def test_a_parked_tool_with_no_alternative_stays_offered(tmp_path):
    tb = toolbox(tmp_path, {"web_search": [FakeServer("alpha").park()]})
    offer = offered_tools(tb.registry, QUERY, {"search_web"}, 2)
    assert names(offer) == ["web_search", "query_database"]
    assert "unavailable now" in offer[0]["function"]["description"]


def test_tool_health_of_replicas(tmp_path):
    up, down = FakeServer("b", latency_s=0.2), FakeServer("a", latency_s=0.01).park()
    tb = toolbox(tmp_path, {"web_search": [down, up], "search_web": [FakeServer("c").park(), FakeServer("d").park()]})
    one_up = tb.tool_health("web_search")
    assert one_up is not None and one_up.available and one_up.score == pytest.approx(up.score.value)
    all_down = tb.tool_health("search_web")
    assert all_down is not None and not all_down.available and "MCP server c, d" in all_down.note
    assert tb.tool_health("query_database") is None and tb.registry.health("query_database") is None
    assert tb.registry.health("nope") is None
