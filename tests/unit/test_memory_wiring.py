"""Memory wired into the agent graph: what reaches the model's prompt (scripted model, in process).

* a one-off instruction ("short answers this time") is in this session's prompts, on later
  turns of the same session too, not in another session's, and gone after session end;
* a stated preference is a semantic fact in the next session's prompt, labelled;
* two contradicting preferences reach the prompt as one undecided conflict, never as two facts;
* a cross-session reference ("like last time") brings back the earlier task.
"""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from graph import resources
from graph.builder import make_graph
from graph.state import InputState


async def turn(ctx, text: str, thread: str, saver=None):
    agent = make_graph(checkpointer=saver or InMemorySaver())
    out = await agent.ainvoke(
        InputState(messages=[HumanMessage(text)]), {"configurable": {"thread_id": thread}}, context=ctx
    )
    await resources.drain_background()
    return out


def system_prompt(scripted, ctx) -> str:
    return scripted.models[ctx.model].seen[-1][0].content


async def test_one_off_instruction_reaches_this_sessions_prompts_and_ends_with_it(scripted):
    ctx = scripted([AIMessage("ok")] * 4, embeddings="hash")
    saver = InMemorySaver()
    await turn(ctx, "Give me short answers this time. What can you do?", "s1", saver)
    assert "[working · this session] Give me short answers this time." in system_prompt(scripted, ctx)
    await turn(ctx, "And what else?", "s1", saver)
    assert "[working · this session] Give me short answers this time." in system_prompt(scripted, ctx)
    await turn(ctx, "And what else?", "s2")
    assert "[working" not in system_prompt(scripted, ctx)  # another session
    await resources.aclose_resources()  # session end (the CLI does this when it exits)
    resources.set_toolbox(ctx, __import__("tests.conftest", fromlist=["FakeToolbox"]).FakeToolbox())
    await turn(ctx, "And what else?", "s1", saver)
    assert "[working" not in system_prompt(scripted, ctx)
    # never written to long-term memory
    facts = await resources.get_memory(ctx).semantic.facts(ctx.user_id)
    assert facts == []


async def test_a_stated_preference_is_a_labelled_fact_in_the_next_session(scripted):
    ctx = scripted([AIMessage("Noted."), AIMessage("ok")], embeddings="hash")
    await turn(ctx, "I prefer PDF reports.", "a")
    await turn(ctx, "Write the monthly sales report", "b")
    prompt = system_prompt(scripted, ctx)
    assert "[semantic · fact · since " in prompt and "user prefers format: pdf" in prompt
    assert "evidence: 1 episode" in prompt


async def test_contradicting_preferences_reach_the_prompt_as_one_pending_conflict(scripted):
    ctx = scripted([AIMessage("Noted."), AIMessage("Noted."), AIMessage("ok")], embeddings="hash")
    await turn(ctx, "I prefer PDF reports.", "a")
    await turn(ctx, "I prefer markdown reports.", "b")
    await turn(ctx, "Write the monthly sales report", "c")
    prompt = system_prompt(scripted, ctx)
    assert prompt.count("CONFLICT, undecided") == 1 and "pdf" in prompt and "markdown" in prompt
    assert "[semantic · fact" not in prompt  # neither value as a plain fact
    assert "user preference: I prefer" not in prompt  # nor the two statements as two episodes


def report_box():
    from tests.conftest import FakeToolbox

    box = FakeToolbox()
    box.add(
        "make_report",
        lambda title="r": {"path": f"out/{title}.md"},
        {"type": "object", "properties": {"title": {"type": "string"}}, "required": []},
        side_effect=True,
        requested_by=(r"\breport\b",),
        artifact_field="path",
    )
    return box


async def test_like_last_time_brings_back_the_earlier_task(scripted):
    from tests.conftest import tool_call

    ctx = scripted(
        [tool_call("make_report", {"title": "march"}), AIMessage("Saved out/march.md."), AIMessage("ok")],
        report_box(),
        embeddings="hash",
    )
    await turn(ctx, "Summarise the March sales figures into a report", "a")
    await turn(ctx, "Do it like last time", "b")
    prompt = system_prompt(scripted, ctx)
    assert "[episodic · task" in prompt and "March sales figures" in prompt and "out/march.md" in prompt
