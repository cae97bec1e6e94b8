"""A tool whose schema changes between turns of a thread (an MCP server restarted with a field
renamed, removed or retyped): a call in the old shape is not run, not asked of the user and not
hidden — the model sees an error naming the field and the new shape, and retries once in it
(issue 26, "a tool's schema changes between turns"; DESIGN §2.6).

The graph runs with a scripted model and an in-process registry (what is under test is the
graph's handling of the registry's schema change, not a transport); the persisted schema store
covers the change seen by a new process.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from graph.builder import make_graph
from tests.conftest import FakeToolbox, tool_call
from tools.registry import ToolRegistry
from tools.schema_versions import SchemaStore
from tools.spec import ToolSpec

STR = {"type": "string"}

#: change → (old parameters, new parameters, a call in the old shape, the same in the new shape, what the error names)
CHANGES: dict[str, tuple[dict, dict, dict, dict, tuple[str, ...]]] = {
    "renamed": (
        {"type": "object", "properties": {"chan": STR, "text": STR}, "required": ["chan"]},
        {"type": "object", "properties": {"channel": STR, "text": STR}, "required": ["channel"]},
        {"chan": "ops", "text": "hi"},
        {"channel": "ops", "text": "hi"},
        ("'chan' was renamed to 'channel'", "channel (string, required)"),
    ),
    "removed": (
        {"type": "object", "properties": {"channel": STR, "text": STR, "urgent": {"type": "boolean"}}, "required": []},
        {"type": "object", "properties": {"channel": STR, "text": STR}, "required": []},
        {"channel": "ops", "text": "hi", "urgent": True},
        {"channel": "ops", "text": "hi"},
        ("'urgent' was removed", "channel (string)"),
    ),
    "retyped": (
        {"type": "object", "properties": {"channel": STR, "copies": STR}, "required": ["channel"]},
        {"type": "object", "properties": {"channel": STR, "copies": {"type": "integer"}}, "required": ["channel"]},
        {"channel": "ops", "copies": "two"},
        {"channel": "ops", "copies": 2},
        ("'copies' is now integer (was string", "copies (integer)"),
    ),
    "renamed and retyped": (
        {"type": "object", "properties": {"chan": STR, "when": STR}, "required": ["chan"]},
        {"type": "object", "properties": {"channel": STR, "when": {"type": "integer"}}, "required": ["channel"]},
        {"chan": "ops", "when": "soon"},
        {"channel": "ops", "when": 5},
        ("'chan' was renamed to 'channel'", "'when' is now integer"),
    ),
}


def _spec(params: dict) -> ToolSpec:
    return ToolSpec(
        name="post_note",
        description="Post a note to a channel (test tool whose parameters change between turns).",
        parameters=params,
        side_effect=True,
        requested_by=(r"\bnote\b",),
    )


@pytest.mark.parametrize("ask_user", [True, False], ids=["asking on", "asking off"])
@pytest.mark.parametrize("change", sorted(CHANGES))
async def test_a_call_in_the_old_shape_gets_an_error_naming_the_field_and_the_retry_runs(scripted, change, ask_user):
    old, new, old_call, new_call, named = CHANGES[change]
    ran: list[dict[str, Any]] = []

    async def runner(args: dict[str, Any], request_id: str) -> dict[str, Any]:
        ran.append(args)
        return {"ok": True}

    box = FakeToolbox()
    box.registry.register(_spec(old), runner)
    ctx = scripted(
        [
            tool_call("post_note", old_call, "first"),
            AIMessage("Posted the note."),
            tool_call("post_note", old_call, "stale"),  # the model copies its earlier call
            tool_call("post_note", new_call, "retry"),
            AIMessage("Posted the note to ops."),
        ],
        box,
        ask_user_for_missing=ask_user,
    )
    agent = make_graph(InMemorySaver())
    config = {"configurable": {"thread_id": f"schema-{change}"}}
    await agent.ainvoke({"messages": [HumanMessage("post a note to ops")]}, config, context=ctx)
    assert ran == [old_call]

    # the server restarts with the new schema (tools/list_changed re-registers the tool)
    box.registry.unregister("post_note")
    box.registry.register(_spec(new), runner)
    out = await agent.ainvoke({"messages": [HumanMessage("post another note to ops")]}, config, context=ctx)

    assert "__interrupt__" not in out  # nothing asked of the user: the fix is the model's
    assert out.get("stop_reason") is None and out["messages"][-1].content == "Posted the note to ops."
    assert ran == [old_call, new_call]  # the old shape never ran; the retry did, once
    error = next(m for m in out["messages"] if isinstance(m, ToolMessage) and m.tool_call_id == "stale")
    assert error.status == "error" and error.additional_kwargs.get("error_kind") == "invalid_arguments"
    assert all(n in str(error.content) for n in named), error.content
    # the model's retry was made seeing its failed call and that error (not hidden as stale history)
    retry_prompt = scripted.models[ctx.model].seen[3]
    assert any(isinstance(m, ToolMessage) and m.tool_call_id == "stale" for m in retry_prompt)
    assert any(isinstance(m, AIMessage) and any(c["id"] == "stale" for c in m.tool_calls) for m in retry_prompt)
    assert "changed its parameters" in retry_prompt[0].content  # the migration note too
    # the earlier turn's old-shape call is still left out (it would teach the old shape)
    assert not any(isinstance(m, AIMessage) and any(c["id"] == "first" for c in m.tool_calls) for m in retry_prompt)


def test_a_call_missing_only_a_new_required_field_is_still_asked_of_the_user():
    registry = ToolRegistry()
    old = {"type": "object", "properties": {"channel": STR}, "required": ["channel"]}
    new = {"type": "object", "properties": {"channel": STR, "team": STR}, "required": ["channel", "team"]}

    async def runner(args, request_id):
        return {}

    registry.register(_spec(old), runner)
    registry.unregister("post_note")
    registry.register(_spec(new), runner)
    assert registry.stale_call("post_note", {"channel": "ops"}) is None  # a value the user may have to give
    assert registry.stale_call("post_note", {"channel": "ops", "team": "a"}) is None


def test_a_change_recorded_by_an_earlier_process_is_known_to_the_next(tmp_path):
    old, new, old_call, new_call, named = CHANGES["renamed"]

    async def runner(args, request_id):
        return {}

    first = SchemaStore(tmp_path / "tool_schemas.db")
    first.load()
    ToolRegistry(schema_store=first).register(_spec(old), runner)
    first.close()

    later = SchemaStore(tmp_path / "tool_schemas.db")
    later.load()
    registry = ToolRegistry(schema_store=later)
    registry.register(_spec(new), runner)  # the server came back with the field renamed
    try:
        message = registry.stale_call("post_note", old_call)
        assert message is not None and all(n in message for n in named), message
        assert registry.stale_call("post_note", new_call) is None
    finally:
        later.close()


# --- memories of a tool that changed since ---------------------------------------------------------


def test_a_task_memory_records_the_shape_of_the_tools_it_used():
    from memory import task_outcome
    from memory.turn_events import build_turn_events

    evidence = task_outcome.TurnEvidence(
        required_steps=("post_note",),
        steps_done=("post_note",),
        tools_succeeded=("post_note",),
        side_effects_done=("post_note",),
        verified=True,
        tool_versions=(("post_note", "v1"),),
    )
    events = build_turn_events("u", "t", "post a note to ops", "Posted the note to ops.", [], None, [], evidence)
    assert [e.metadata.get("tool_versions") for e in events if e.kind == "task"] == [{"post_note": "v1"}]


@pytest.mark.parametrize(
    "now, stale",
    [
        ({"post_note": "v1", "other": "x"}, False),  # unchanged
        ({"post_note": "v2"}, True),  # its parameters changed
        ({"other": "x"}, True),  # no longer offered
    ],
    ids=["unchanged", "changed", "gone"],
)
def test_a_recalled_memory_of_a_changed_tool_is_marked_stale(now, stale):
    from memory.episodic.base import EpisodicEvent
    from memory.retrieval import build_block

    event = EpisodicEvent(
        user_id="u",
        kind="task",
        text="completed task: post a note to ops; tools: post_note",
        confidence=0.9,
        metadata={"tool_versions": {"post_note": "v1"}},
    )
    from memory.episodic.base import ScoredEvent

    block = build_block(episodes=[ScoredEvent(event=event, relevance=1, decay=1, score=1)], tool_versions=now)
    assert len(block.lines) == 1
    assert ("stale: post_note changed since" in block.lines[0]) is stale, block.lines
    # a memory written before versions were recorded, or a caller that knows none: unmarked
    assert "stale" not in build_block(episodes=[ScoredEvent(event=event, relevance=1, decay=1, score=1)]).lines[0]


async def test_a_new_session_recalls_the_memory_of_a_changed_tool_marked_stale(scripted):
    from graph import resources

    old, new, old_call, _, _ = CHANGES["renamed"]

    async def runner(args: dict[str, Any], request_id: str) -> dict[str, Any]:
        return {"ok": True, "posted_to": args.get("chan") or args.get("channel")}

    box = FakeToolbox()
    box.registry.register(_spec(old), runner)
    ctx = scripted(
        [tool_call("post_note", old_call), AIMessage("Posted the note to ops."), AIMessage("ok"), AIMessage("ok")],
        box,
        embeddings="hash",
    )
    agent = make_graph(InMemorySaver())
    await agent.ainvoke(
        {"messages": [HumanMessage("post a note to ops")]}, {"configurable": {"thread_id": "a"}}, context=ctx
    )
    await resources.drain_background()
    recall = "Do you remember the note to ops from last time?"
    await agent.ainvoke({"messages": [HumanMessage(recall)]}, {"configurable": {"thread_id": "b"}}, context=ctx)
    before = scripted.models[ctx.model].seen[-1][0].content
    assert "[episodic · task" in before and "stale" not in before  # same tool, same shape

    box.registry.unregister("post_note")
    box.registry.register(_spec(new), runner)  # the server came back with 'chan' renamed
    await agent.ainvoke({"messages": [HumanMessage(recall)]}, {"configurable": {"thread_id": "c"}}, context=ctx)
    after = scripted.models[ctx.model].seen[-1][0].content
    assert "stale: post_note changed since" in after, after
