"""Over the context budget, tool results are cut, never dropped (issue 23 kind 4).

Reported: ten parallel tool results of ~1.5 KB each at the default budget (3,000 tokens) —
the next prompt held the request and *none* of the results, and the model re-ran the calls
(14 re-runs for 7 calls). Siblings: one huge result, two rounds that together overflow, a
result that is not an envelope. Each result in the window keeps at least its envelope head:
status, summary and the handle of the full payload (``tools.results.essential_chars``)."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from graph.state import State
from graph.window import kept_chars, select_window
from tools.results import compress

BUDGET = 3000  # Context.token_budget's default


def rows(n: int, width: int = 60) -> dict:
    return {"columns": ["id", "note"], "rows": [[i, f"row {i} " + "x" * width] for i in range(n)], "row_count": n}


def round_of(calls: int, payload, *, prefix: str = "c") -> list:
    ids = [f"{prefix}{i}" for i in range(calls)]
    ai = AIMessage(
        "", tool_calls=[{"name": "lookup", "args": {"n": i}, "id": c} for i, c in enumerate(ids)], id=f"ai-{prefix}"
    )
    results = [
        ToolMessage(
            json.dumps(compress("lookup", payload, handle=f"payloads/t/{c}.json"), ensure_ascii=False),
            tool_call_id=c,
            name="lookup",
            id=f"tm-{c}",
        )
        for c in ids
    ]
    return [ai, *results]


def tool_messages(window) -> list[ToolMessage]:
    return [m for m in window if isinstance(m, ToolMessage)]


def assert_every_result_kept_with_its_head(window, expected_ids: set[str]) -> None:
    kept = tool_messages(window)
    assert {m.tool_call_id for m in kept} == expected_ids, "a tool result was dropped"
    for m in kept:
        assert isinstance(m.content, str) and m.content.startswith('{"status": "ok", "summary": "lookup: ')
        assert f'"handle": "payloads/t/{m.tool_call_id}.json"' in m.content, m.content[:300]


def test_ten_parallel_results_over_the_budget_are_all_kept_cut():
    history = [HumanMessage("look up the ten accounts", id="h1"), *round_of(10, rows(18))]
    sizes = [len(m.content) for m in tool_messages(history)]
    assert min(sizes) > 1400  # ~1.5 KB each, as reported: together over the budget
    window = select_window(history, BUDGET)
    assert_every_result_kept_with_its_head(window, {f"c{i}" for i in range(10)})
    assert any(len(m.content) < 1400 for m in tool_messages(window))  # cut, not whole


def test_one_huge_result_is_cut_to_the_budget_not_dropped():
    history = [HumanMessage("read the big table", id="h1"), *round_of(1, rows(5000, 200), prefix="big")]
    window = select_window(history, 600)
    assert_every_result_kept_with_its_head(window, {"big0"})


def test_two_rounds_over_the_budget_both_stay_the_newest_first():
    history = [
        HumanMessage("compare the two lists", id="h1"),
        *round_of(4, rows(18), prefix="old"),
        *round_of(4, rows(18), prefix="new"),
    ]
    window = select_window(history, BUDGET)
    ids = {m.tool_call_id for m in tool_messages(window)}
    assert {f"new{i}" for i in range(4)} <= ids  # the newest round is never lost
    assert ids == {f"old{i}" for i in range(4)} | {f"new{i}" for i in range(4)}


def test_the_cut_window_is_what_the_prompt_sends():
    """The state stores ``[id, char limit]``; the prompt rebuilt from it cuts the same way."""
    history = [HumanMessage("look up the ten accounts", id="h1"), *round_of(10, rows(18))]
    window = select_window(history, BUDGET)
    originals = {m.id: m for m in history}
    stored = [[m.id, 0 if m is originals[m.id] else kept_chars(m)] for m in window]
    prompt = State(messages=history, window=stored).prompt_messages()
    assert [m.content for m in prompt] == [m.content for m in window]


@pytest.mark.parametrize("budget", [200, 800, 1500, 3000])
def test_a_result_that_is_not_an_envelope_keeps_a_floor(budget):
    ai = AIMessage("", tool_calls=[{"name": "raw", "args": {}, "id": f"r{i}"} for i in range(6)], id="ai")
    results = [ToolMessage("plain text " * 300, tool_call_id=f"r{i}", name="raw", id=f"t{i}") for i in range(6)]
    window = select_window([HumanMessage("go", id="h"), ai, *results], budget)
    kept = tool_messages(window)
    assert len(kept) == 6 and all(len(m.content) >= 160 for m in kept)
