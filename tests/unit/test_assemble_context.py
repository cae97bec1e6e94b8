"""assemble_context: window invariants (case K1 and its kind), intent tags, prompt order."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately

from graph.history import message_groups
from graph.state import State
from graph.window import select_window
from nodes.assemble_context import build_system_prompt


def assert_no_orphans(window) -> None:
    """Every tool message follows its calling AI message; every AI tool call is answered."""
    open_calls: set[str | None] = set()
    for message in window:
        if isinstance(message, AIMessage) and message.tool_calls:
            assert not open_calls, "AI tool calls left unanswered before the next message"
            open_calls = {c["id"] for c in message.tool_calls}
        elif isinstance(message, ToolMessage):
            assert message.tool_call_id in open_calls, f"orphan tool result {message.tool_call_id}"
            open_calls.discard(message.tool_call_id)
        else:
            assert not open_calls, "AI tool calls left unanswered"
    assert not open_calls


def k1_history():
    return [
        HumanMessage("weather in Florida?", id="h1"),
        AIMessage("", tool_calls=[{"name": "get_weather", "args": {"state": "FL"}, "id": "abc123"}], id="a1"),
        ToolMessage("sunny, 30C", tool_call_id="abc123", id="t1"),
        HumanMessage("thanks", id="h2"),
        AIMessage("you're welcome", id="a2"),
        HumanMessage("and tomorrow?", id="h3"),
        AIMessage("probably sunny", id="a3"),
    ]


def test_k1_trimming_never_keeps_a_tool_result_without_its_call():
    history = k1_history()
    full = count_tokens_approximately(history)
    for budget in range(5, full + 20, 3):
        window = select_window(history, budget)
        assert_no_orphans(window)
        assert window[-1].id == "a3" or window[0].id == "h3"


def test_orphans_already_in_history_are_left_out():
    history = [ToolMessage("stray", tool_call_id="zzz", id="t0"), *k1_history()]
    history.append(AIMessage("", tool_calls=[{"name": "x", "args": {}, "id": "unanswered"}], id="a9"))
    window = select_window(history, 10_000)
    assert "t0" not in {m.id for m in window}
    assert "a9" not in {m.id for m in window}
    assert_no_orphans(window)


@st.composite
def histories(draw):
    messages = []
    for n in range(1, draw(st.integers(1, 25)) + 1):
        kind = draw(st.sampled_from(["human", "answer", "calls", "orphan", "unanswered"]))
        text = draw(st.text(min_size=0, max_size=300))
        if kind == "human":
            messages.append(HumanMessage(text, id=f"h{n}"))
        elif kind == "answer":
            messages.append(AIMessage(text, id=f"a{n}"))
        elif kind == "orphan":
            messages.append(ToolMessage(text, tool_call_id=f"gone{n}", id=f"o{n}"))
        else:
            k = draw(st.integers(1, 3))  # parallel-call groups
            ids = [f"c{n}_{i}" for i in range(k)]
            messages.append(AIMessage("", tool_calls=[{"name": "t", "args": {}, "id": i} for i in ids], id=f"a{n}"))
            answered = ids if kind == "calls" else ids[: draw(st.integers(0, k - 1))]
            messages.extend(ToolMessage(text, tool_call_id=i, id=f"r{i}") for i in answered)
    return messages


@pytest.mark.slow  # 300 generated histories
@settings(max_examples=300, deadline=None)
@given(histories(), st.integers(1, 3000))
def test_window_invariants_hold_for_any_history(history, budget):
    window = select_window(history, budget)
    assert_no_orphans(window)
    # within budget, unless the current goal's human message alone exceeds it
    groups = message_groups(window)
    if len(groups) > 1:
        assert count_tokens_approximately(window) <= budget
    # chronological order preserved
    order = {m.id: i for i, m in enumerate(history)}
    positions = [order[m.id] for m in window]
    assert positions == sorted(positions)


def test_current_goal_is_kept_before_older_history():
    history = [
        HumanMessage("old " * 400, id="old"),
        AIMessage("old answer " * 200, id="olda"),
        HumanMessage("new question", id="new"),
    ]
    window = select_window(history, 60)
    assert [m.id for m in window][-1] == "new"
    assert "old" not in {m.id for m in window}


def test_prompt_order():
    system = build_system_prompt(["[episodic · 2026-11-01 · confidence 0.90 · direct] ran a report"])
    assert system.index("Hermes") < system.index("What you remember")
    # recalled figures are context, not data: the model is told to read data with a tool
    assert "not current data" in system and system.index("not current data") < system.index("ran a report")
    state = State(
        messages=[
            HumanMessage("goal", id="h"),
            AIMessage("", tool_calls=[{"name": "t", "args": {}, "id": "c"}], id="a"),
            ToolMessage("result", tool_call_id="c", id="r"),
        ],
        system_prompt=system,
        window=[["h", 0], ["a", 0], ["r", 0]],
        progress_note="Change approach.",
    )
    prompt = state.prompt_messages()
    assert isinstance(prompt[0], SystemMessage) and "What you remember" in prompt[0].content
    assert [m.id for m in prompt[1:4]] == ["h", "a", "r"]
    assert isinstance(prompt[-1], SystemMessage) and prompt[-1].content == "Change approach."


def _turn(i: int, text: str, answer: str) -> list:
    return [HumanMessage(text, id=f"h{i}"), AIMessage(answer, id=f"a{i}")]


def test_relevant_old_turns_beat_recent_chatter():
    history = _turn(0, "The warehouse code for Lyon is LY-4471, remember it.", "Noted: LY-4471.")
    for i in range(1, 40):
        history += _turn(
            i, f"Let's set up my account, step {i}: choose a display name", f"Done with step {i}. " + "ok " * 40
        )
    history.append(HumanMessage("Which warehouse code did I give you for Lyon?", id="q"))
    window = select_window(history, 400, query="Which warehouse code did I give you for Lyon?", intent="chat")
    ids = [m.id for m in window]
    assert "h0" in ids and ids[-1] == "q"
    assert "h38" in ids  # core: the turn before the current goal, verbatim
    assert count_tokens_approximately(window) <= 400


def test_intent_match_selects_task_history_over_account_chat():
    history = _turn(0, "Query the sales database for October revenue", "Revenue was 12,345.")
    for i in range(1, 4):
        history += _turn(i, f"account setup {i}: change my avatar", "done")
    history += _turn(4, "unrelated small talk", "sure")
    history.append(HumanMessage("Now query orders by region", id="q"))
    window = select_window(history, 60, query="Now query orders by region", intent="data_query")
    ids = [m.id for m in window]
    assert "h0" in ids and "h1" not in ids


def test_archive_summarises_turns_beyond_the_horizon():
    from graph.window import ARCHIVE_AFTER_TURNS, archive_lines

    history = []
    for i in range(ARCHIVE_AFTER_TURNS + 5):
        history += _turn(i, f"request number {i} about sales", f"answer {i}")
    lines, boundary = archive_lines(history, 0)
    assert boundary == 5 and len(lines) == 5
    assert lines[0].startswith("[chat] request number 0") and "answer 0" in lines[0]
    more, again = archive_lines(history, boundary)
    assert more == [] and again == boundary


def test_a_request_larger_than_the_budget_is_cut_to_fit():
    history = [HumanMessage("please read: " + "lorem ipsum dolor " * 3000, id="big")]
    window = select_window(history, 1000)
    assert [m.id for m in window] == ["big"]
    assert window[0].content.endswith("…[truncated]")
    assert count_tokens_approximately(window) <= 1000


def test_a_bad_environment_value_names_the_variable(monkeypatch):
    import pytest

    from graph.context import Context

    monkeypatch.setenv("HERMES_MAX_TOOL_ROUNDS", "abc")
    with pytest.raises(ValueError, match="HERMES_MAX_TOOL_ROUNDS='abc': Input should be a valid integer"):
        Context()


async def test_a_tool_schema_change_adds_a_note_and_hides_calls_it_invalidates(scripted):
    from langgraph.checkpoint.memory import InMemorySaver

    from graph.builder import make_graph
    from tests.conftest import FakeToolbox, tool_call
    from tools.spec import ToolSpec

    box = FakeToolbox()
    old = {"type": "object", "properties": {"chan": {"type": "string"}}, "required": ["chan"]}
    box.add("post_note", lambda **kw: {"ok": True}, old)
    ctx = scripted([tool_call("post_note", {"chan": "x"}, "old1"), AIMessage("posted"), AIMessage("ok")], box)
    agent = make_graph(InMemorySaver())
    config = {"configurable": {"thread_id": "schema"}}
    await agent.ainvoke({"messages": [HumanMessage("post a note")]}, config, context=ctx)
    # the tool is re-registered with a renamed field (a new server version, say)
    new = {"type": "object", "properties": {"channel": {"type": "string"}}, "required": ["channel"]}
    box.registry.unregister("post_note")
    box.registry.register(
        ToolSpec(name="post_note", description="Post a note to a channel (test tool, v2 schema).", parameters=new),
        lambda args, rid: {"ok": True},
    )
    await agent.ainvoke({"messages": [HumanMessage("post another note")]}, config, context=ctx)
    prompt = scripted.models[ctx.model].seen[-1]
    assert "post_note" in prompt[0].content and "Tool changes" in prompt[0].content
    assert not any(isinstance(m, AIMessage) and m.tool_calls and m.tool_calls[0]["id"] == "old1" for m in prompt)
    assert not any(getattr(m, "tool_call_id", None) == "old1" for m in prompt)  # no orphan (K1)
