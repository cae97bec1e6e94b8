"""evaluate_progress: distance to the goal, tool masking, caps (seed §6.1, DESIGN §5.3)."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.runtime import Runtime

from graph import resources
from graph.builder import route_model_output
from graph.context import Context
from graph.state import State
from nodes.evaluate_progress import MAX_STALLED_ROUNDS, evaluate_progress
from tests.conftest import FakeToolbox, flagship_specs

GOAL = "Write last month's sales report, post it to the project group and remind me every month."


@pytest.fixture
def runtime(tmp_path):
    box = FakeToolbox()
    wanted = ("generate_report", "post_message", "schedule_reminder", "query_database")
    for spec in flagship_specs():
        if spec.name in wanted:
            box.add_spec(spec, lambda **kw: {"ok": True})
    context = Context(model="unused", data_dir=str(tmp_path))
    resources.set_toolbox(context, box)
    return Runtime(context=context)


def call(name: str, cid: str, args: dict | None = None) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args or {}, "id": cid}])


def result(name: str, cid: str, ok: bool = True) -> ToolMessage:
    body = {"status": "ok" if ok else "error", "summary": f"{name}: done", "data": {"path": "/r.md"} if ok else None}
    return ToolMessage(json.dumps(body), tool_call_id=cid, name=name, status="success" if ok else "error")


async def test_a_done_side_effect_tool_is_not_offered_again_and_progress_is_counted(runtime):
    state = State(
        messages=[HumanMessage(GOAL), call("generate_report", "c1"), result("generate_report", "c1")],
        goal=GOAL,
        goal_distance=3,
    )
    update = await evaluate_progress(state, runtime)
    assert update["goal_distance"] == 2 and update["stalled_rounds"] == 0
    assert "generate_report" in update["blocked_tools"]
    assert not {"post_message", "schedule_reminder"} & set(update["blocked_tools"])
    assert update["artifacts"] == ["/r.md"] and "stop_reason" not in update


async def test_a_round_without_progress_narrows_the_offer_to_the_missing_steps(runtime):
    state = State(
        messages=[HumanMessage(GOAL), call("generate_report", "c1"), result("generate_report", "c1", ok=False)],
        goal=GOAL,
        goal_distance=3,
    )
    update = await evaluate_progress(state, runtime)
    assert update["stalled_rounds"] == 1 and update["must_call_tool"] is True
    assert set(update["blocked_tools"]) == {"query_database"}
    assert "Change approach" in update["progress_note"]


async def test_a_new_failed_read_is_exploration_but_the_same_one_again_is_a_stall(runtime):
    """A failed query's error names the tables and columns (measured: the 1.5B model's next
    report was closer each time); a repeat of it brings nothing new."""
    read = [
        HumanMessage(GOAL),
        call("query_database", "c1", {"sql": "SELECT x"}),
        result("query_database", "c1", ok=False),
    ]
    update = await evaluate_progress(State(messages=read, goal=GOAL, goal_distance=3, stalled_rounds=1), runtime)
    assert update["stalled_rounds"] == 1 and "query_database" not in update["blocked_tools"]
    again = [*read, call("query_database", "c2", {"sql": "SELECT x"}), result("query_database", "c2", ok=False)]
    update = await evaluate_progress(State(messages=again, goal=GOAL, goal_distance=3, stalled_rounds=1), runtime)
    assert update["stalled_rounds"] == 2


async def test_a_new_successful_read_is_neither_a_stall_nor_narrows_the_offer(runtime):
    """Reading the user's schema or data is how the steps get done on a database never seen."""
    read = [HumanMessage(GOAL), call("query_database", "c1", {"sql": "SELECT 1"}), result("query_database", "c1")]
    update = await evaluate_progress(State(messages=read, goal=GOAL, goal_distance=3, stalled_rounds=1), runtime)
    assert update["stalled_rounds"] == 1 and "query_database" not in update["blocked_tools"]
    assert update["must_call_tool"] is True and "steps still to do" in update["progress_note"]
    # the same read again is a stall
    again = [*read, call("query_database", "c2", {"sql": "SELECT 1"}), result("query_database", "c2")]
    update = await evaluate_progress(State(messages=again, goal=GOAL, goal_distance=3, stalled_rounds=1), runtime)
    assert update["stalled_rounds"] == 2


async def test_every_step_done_blocks_all_tools_and_summarises(runtime):
    msgs = [HumanMessage(GOAL)]
    for i, name in enumerate(("generate_report", "post_message", "schedule_reminder")):
        msgs += [call(name, f"c{i}"), result(name, f"c{i}")]
    update = await evaluate_progress(State(messages=msgs, goal=GOAL, goal_distance=1), runtime)
    assert update["goal_distance"] == 0
    assert set(update["blocked_tools"]) == {"generate_report", "post_message", "schedule_reminder", "query_database"}
    assert "post_message: done" in update["progress_note"]


async def test_an_answer_with_steps_missing_goes_back_to_work_then_stops(runtime):
    state = State(messages=[HumanMessage(GOAL), AIMessage("Done!")], goal=GOAL, goal_distance=3)
    assert route_model_output(state) == "evaluate_progress"
    update = await evaluate_progress(state, runtime)
    assert update["must_call_tool"] and "not done yet" in update["progress_note"]
    assert update["tool_rounds"] == 0  # an answer is not a tool round
    again = State(messages=[*state.messages, AIMessage("Really, done!")], goal=GOAL, goal_distance=3, stalled_rounds=1)
    final = await evaluate_progress(again, runtime)
    assert final["stop_reason"].startswith("the model answered without doing")


async def test_a_narrating_answer_after_each_done_step_is_told_once_per_step(runtime):
    """Measured (Qwen2.5-Coder-1.5B): "I will now proceed with posting the report" after the
    report, then the post, then "I will now proceed with scheduling the reminder" — the second
    narration came after progress, so it is told again, not stopped."""
    msgs = [
        HumanMessage(GOAL),
        call("generate_report", "c1"),
        result("generate_report", "c1"),
        AIMessage("I will now proceed with posting the report."),
        call("post_message", "c2"),
        result("post_message", "c2"),
        AIMessage("I will now proceed with scheduling the reminder."),
    ]
    update = await evaluate_progress(State(messages=msgs, goal=GOAL, goal_distance=1), runtime)
    assert "stop_reason" not in update and update["must_call_tool"] is True
    assert "schedule_reminder" in update["progress_note"]
    msgs.append(AIMessage("Done."))  # twice in a row without doing the step: stop
    update = await evaluate_progress(State(messages=msgs, goal=GOAL, goal_distance=1), runtime)
    assert update["stop_reason"].startswith("the model answered without doing these steps: schedule_reminder")


async def test_an_insisting_answer_is_kept_in_the_stop_notice(scripted):
    from langgraph.checkpoint.memory import InMemorySaver

    from graph.builder import make_graph

    box = FakeToolbox()
    box.add_spec(next(s for s in flagship_specs() if s.name == "generate_report"), lambda **kw: {"path": "/r.md"})
    ctx = scripted([AIMessage("Revenue was 123."), AIMessage("Revenue was 123, really.")], box)
    out = await make_graph(InMemorySaver()).ainvoke(
        {"messages": [HumanMessage("Write the sales report for last month.")]},
        {"configurable": {"thread_id": "t"}},
        context=ctx,
    )
    notice = out["messages"][-1].content
    assert notice.startswith("Stopped before finishing: the model answered without doing these steps: generate_report")
    assert "Revenue was 123, really." in notice


async def test_an_answer_to_a_goal_without_known_steps_just_finishes(runtime):
    from graph.builder import route_progress

    state = State(messages=[HumanMessage("hi"), AIMessage("hello")], goal="hi", goal_distance=0)
    assert route_model_output(state) == "evaluate_progress"  # every answer is judged (DESIGN §5.5)
    update = await evaluate_progress(state, runtime)
    assert "stop_reason" not in update and update["progress_note"] == ""
    assert route_progress(State(messages=state.messages, goal="hi", progress_note="")) == "write_memory"


async def test_failing_rounds_of_a_goal_without_known_steps_stop(runtime):
    msgs = [HumanMessage("look something up")]
    update: dict = {}
    stalled = 0
    for i in range(MAX_STALLED_ROUNDS):
        msgs += [call("query_database", f"e{i}", {"sql": f"bad {i}"}), result("query_database", f"e{i}", ok=False)]
        update = await evaluate_progress(
            State(messages=msgs, goal="look something up", goal_distance=0, stalled_rounds=stalled, tool_rounds=i),
            runtime,
        )
        stalled = update["stalled_rounds"]
    assert update["stop_reason"].startswith("no progress")


def test_small_models_are_offered_only_relevant_tools(runtime):
    from nodes.call_model import offered_tools

    registry = resources._toolboxes[resources._key(runtime.context)].registry
    assert offered_tools(registry, "hello there", set(), max_tools=2) == []
    names = [t["function"]["name"] for t in offered_tools(registry, "post it to the group", set(), max_tools=2)]
    assert names and names[0] == "post_message"
    assert len(offered_tools(registry, "hello there", set(), max_tools=0)) == 4  # no cap: all tools
    assert len(offered_tools(registry, "hello there", set(), max_tools=2, must_call=True)) == 2


async def test_a_required_call_is_offered_only_the_missing_steps(runtime):
    from graph.model import register_model
    from nodes.call_model import call_model
    from tests.conftest import ScriptedChat

    offered: list[list[str]] = []

    class Recorder(ScriptedChat):
        def bind_tools(self, tools, **kwargs):
            offered.append([t["function"]["name"] for t in tools])
            return self

    register_model("recorder", lambda _c: Recorder(messages=iter([AIMessage("x")])))
    runtime = Runtime(context=runtime.context.model_copy(update={"model": "recorder"}))
    goal = "Write last month's sales report."
    state = State(
        messages=[HumanMessage(goal, id="h")],
        goal=goal,
        goal_distance=1,
        must_call_tool=True,
        progress_note="Steps of this task: generate_report.",
        window=[["h", 0]],
    )
    update = await call_model(state, runtime)
    # the missing step and the reads that help do it; no side effect the goal does not ask for
    assert offered == [["generate_report", "query_database"]]
    assert update["offered_tools"] == ["generate_report", "query_database"]
