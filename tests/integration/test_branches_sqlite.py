"""Branches and resumption on a real SQLite checkpoint file: case K10 (resuming with the head's
explicit checkpoint id behaves exactly like resuming by thread id), the agent graph resumed by
explicit head id, and the ``hermes branch``/``hermes session`` commands end to end.

The tests that take ``checkpoint_backend`` run twice: on the data directory's SQLite file and
on a real PostgreSQL (``HERMES_POSTGRES_URL``, tests/integration/conftest.py), through
``graph.checkpoints.open_checkpointer`` as the product opens it."""

from __future__ import annotations

import json
import operator
import re
from typing import Annotated

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt
from typer.testing import CliRunner
from typing_extensions import TypedDict

from graph import resources
from graph.branches import Branches
from graph.builder import builder
from graph.checkpoints import checkpoints_file, open_checkpointer
from graph.cli import app
from graph.mirror import ThreadMirror
from tests.conftest import FakeToolbox, tool_call

# --- K10 on a small graph: agent → approval interrupt() → tool → agent --------------------


class K10State(TypedDict):
    log: Annotated[list[str], operator.add]
    agent_runs: int


def k10_graph(checkpointer, tool_runs: list[str], asked: list[str]):
    def agent(state: K10State) -> dict:
        return {"log": ["agent"], "agent_runs": state.get("agent_runs", 0) + 1}

    def approval(state: K10State) -> dict:
        asked.append("asked")
        answer = interrupt({"question": "run the tool?"})
        return {"log": [f"approved={answer}"]}

    def tool(state: K10State) -> dict:
        tool_runs.append("ran")
        return {"log": ["tool"]}

    def route(state: K10State) -> str:
        return "approval" if state["agent_runs"] < 2 else END

    g = StateGraph(K10State)
    g.add_node(agent)
    g.add_node(approval)
    g.add_node(tool)
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", route, ["approval", END])
    g.add_edge("approval", "tool")
    g.add_edge("tool", "agent")
    return g.compile(checkpointer=checkpointer)


EXPECTED_LOG = ["start", "agent", "approved=True", "tool", "agent"]


def test_k10_sync_resume_with_explicit_head_checkpoint_id(tmp_path):
    with SqliteSaver.from_conn_string(str(tmp_path / "k10.sqlite")) as saver:
        outcomes = {}
        for how in ("explicit_checkpoint_id", "thread_id_only"):
            tool_runs, asked = [], []
            graph = k10_graph(saver, tool_runs, asked)
            cfg = {"configurable": {"thread_id": how}}
            first = graph.invoke({"log": ["start"], "agent_runs": 0}, cfg)
            assert "__interrupt__" in first and graph.get_state(cfg).next == ("approval",)
            if how == "explicit_checkpoint_id":
                cfg = graph.get_state(cfg).config  # the K10 step: the head with its checkpoint_id
                assert cfg["configurable"]["checkpoint_id"]
            out = graph.invoke(Command(resume=True), cfg)
            history = list(graph.get_state_history({"configurable": {"thread_id": how}}))
            outcomes[how] = (
                out["log"],
                len(tool_runs),
                len(asked),
                len(history),
                [h.metadata["step"] for h in history],
            )
            assert out["log"] == EXPECTED_LOG  # continued at the interrupt, not from the start
            assert tool_runs == ["ran"]  # the tool ran exactly once
            assert asked == ["asked", "asked"]  # the interrupted node re-ran once, on resume
            assert graph.get_state({"configurable": {"thread_id": how}}).next == ()
        assert outcomes["explicit_checkpoint_id"] == outcomes["thread_id_only"]


async def test_k10_async_resume_with_explicit_head_checkpoint_id(tmp_path):
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "k10.sqlite")) as saver:
        shapes = {}
        for how in ("explicit", "thread"):
            tool_runs, asked = [], []
            graph = k10_graph(saver, tool_runs, asked)
            cfg = {"configurable": {"thread_id": how}}
            await graph.ainvoke({"log": ["start"], "agent_runs": 0}, cfg)
            head = (await graph.aget_state(cfg)).config
            out = await graph.ainvoke(Command(resume=True), head if how == "explicit" else cfg)
            assert out["log"] == EXPECTED_LOG and tool_runs == ["ran"]
            history = [h async for h in graph.aget_state_history(cfg)]
            # the resumed steps descend from the interrupted head, in one line (no replay branch)
            parents = {
                h.config["configurable"]["checkpoint_id"]: (h.parent_config or {})
                .get("configurable", {})
                .get("checkpoint_id")
                for h in history
            }
            assert len(set(parents.values()) - {None}) == len(history) - 1
            assert head["configurable"]["checkpoint_id"] in parents.values()
            shapes[how] = [(h.metadata["source"], h.metadata["step"], h.next) for h in history]
        assert shapes["explicit"] == shapes["thread"]


# --- the agent graph resumed by explicit head checkpoint id ---------------------------------


async def run_to_breakpoint_and_resume(agent, scripted, thread: str, resume_with) -> dict:
    """Our agent graph stopped before dispatch_tools (a static breakpoint), resumed with the
    config ``resume_with(head_config, thread_config)`` returns, then one more turn the same way."""
    runs: list[int] = []
    box = FakeToolbox()

    def count_rows() -> dict[str, int]:
        runs.append(1)
        return {"rows": 7}

    box.add("count_rows", count_rows)
    ctx = scripted(
        [tool_call("count_rows", {}, "k1"), AIMessage("7 rows."), AIMessage("Still 7.")], box, user_id=thread
    )  # memory namespaces apart: the prompts must be comparable
    cfg = {"configurable": {"thread_id": thread}}
    await agent.ainvoke({"messages": [HumanMessage("count the rows")]}, cfg, context=ctx)
    head = await agent.aget_state(cfg)
    assert head.next == ("dispatch_tools",) and runs == []
    out = await agent.ainvoke(None, await resume_with(head.config, cfg), context=ctx)
    assert runs == [1] and out["messages"][-1].content == "7 rows."
    head = await agent.aget_state(cfg)
    out = await agent.ainvoke(
        {"messages": [HumanMessage("and now?")]}, await resume_with(head.config, cfg), context=ctx
    )
    assert runs == [1] and out["messages"][-1].content == "Still 7."
    assert sum(isinstance(m, ToolMessage) for m in out["messages"]) == 1
    history = [h async for h in agent.aget_state_history(cfg)]

    def same(content):  # a tool's payload is filed under its thread: payloads/<thread>/...
        return content.replace(f"payloads/{thread}/", "payloads/<thread>/") if isinstance(content, str) else content

    prompts = [[(type(m).__name__, same(m.content)) for m in p] for p in scripted.models[ctx.model].seen]
    return {
        "messages": [(type(m).__name__, same(m.content)) for m in out["messages"]],
        "metrics": {k: out["metrics"][k] for k in ("turns", "model_calls", "tool_calls")},
        "prompts": prompts,
        "structure": [(h.metadata["source"], h.next) for h in reversed(history)],
    }


async def test_agent_graph_resumes_by_explicit_head_id_like_by_thread_id(scripted, tmp_path, checkpoint_backend):
    async def by_thread(head_cfg, thread_cfg):
        return thread_cfg

    async def by_head_id(head_cfg, thread_cfg):
        return head_cfg

    async with open_checkpointer(tmp_path / "agent.sqlite") as saver:
        agent = builder.compile(checkpointer=saver, interrupt_before=["dispatch_tools"])
        thread = await run_to_breakpoint_and_resume(agent, scripted, "thread", by_thread)
        explicit = await run_to_breakpoint_and_resume(agent, scripted, "explicit", by_head_id)
        branches = Branches(agent)

        async def hermes(head_cfg, thread_cfg):
            return await branches.resume_config("hermes", head_cfg["configurable"]["checkpoint_id"])

        via_hermes = await run_to_breakpoint_and_resume(agent, scripted, "hermes", hermes)

    # behaviour: identical — same messages, same prompts, the tool ran once, nothing replayed
    for key in ("messages", "metrics", "prompts"):
        assert explicit[key] == thread[key], key
    # structure (measured, langgraph 1.2.24): invoke(None, head_config) is time travel, so
    # LangGraph first writes a "fork" copy of the head; the rest is the same chain
    extra = [i for i, (src, _) in enumerate(explicit["structure"]) if src == "fork"]
    assert len(extra) == 1
    i = extra[0]
    assert explicit["structure"][i][1] == ("dispatch_tools",) == explicit["structure"][i - 1][1]
    assert explicit["structure"][:i] + explicit["structure"][i + 1 :] == thread["structure"]
    # Branches.resume_config drops an id naming the active head: identical structure too
    assert via_hermes == thread


# --- the CLI end to end on a real SQLite file ----------------------------------------------


def short_ids(output: str, pattern: str) -> list[str]:
    return re.findall(r"([0-9a-f]{8}) step +\d+ " + pattern, output)


def test_cli_branch_commands_try_a_rollback_try_b_switch_fork(scripted, data_dir, checkpoint_backend, request):
    def plan_a():
        raise RuntimeError("approach A exploded")

    box = FakeToolbox()
    box.add("plan_a", plan_a)
    box.add("plan_b", lambda: {"ok": True})
    ctx = scripted(
        [
            AIMessage("Hello, ready."),
            tool_call("plan_a", {}, "ca"),
            AIMessage("Approach A failed."),
            tool_call("plan_b", {}, "cb"),
            AIMessage("Approach B worked."),
            AIMessage("Forked reply."),
        ],
        box,
    )
    model = scripted.models[ctx.model]
    runner = CliRunner()
    dd = ["--data-dir", str(data_dir)]

    def hermes(*args: str, code: int = 0):
        resources.set_toolbox(ctx, box)  # each CLI run closes the toolbox at exit
        result = runner.invoke(app, list(args), env={"COLUMNS": "200"})
        assert result.exit_code == code, result.output
        assert "Traceback" not in result.output
        return result.output

    run = ["--thread", "S", "--model", ctx.model, *dd]
    hermes("run", "hello there", *run)
    hermes("run", "solve it with approach A", *run)
    tree = hermes("branch", "show", "S", *dd, "--compact")
    turn_ends = short_ids(tree, "write_memory")
    assert len(turn_ends) == 2 and "Approach A failed." in tree

    out = hermes("branch", "rollback", "S", turn_ends[0], *dd)
    assert "rollback: active head is now" in out and f"hermes branch switch S {turn_ends[1]}" in out
    seen = len(model.seen)
    hermes("run", "solve it with approach B", *run)
    for prompt in model.seen[seen:]:  # the history part; memory recall: see test_branches.py xfail
        text = " ".join(str(m.content) for m in prompt if not isinstance(m, SystemMessage))
        assert "approach A" not in text and "exploded" not in text and "hello there" in text

    listing = json.loads(hermes("branch", "list", "S", *dd, "--json"))
    assert len(listing["heads"]) == 2
    active, other = listing["heads"]
    assert active["active"] and "Approach B worked." in active["last_message"]
    assert other["last_message"].endswith("Approach A failed.") and other["fork_point"].endswith(turn_ends[0])
    table = hermes("branch", "list", "S", *dd)
    assert "●" in table and turn_ends[0] in table

    session = hermes("session", "show", "S", *dd)
    assert "solve it with approach B" in session and "tool_calls.plan_b" in session
    assert "2 branch(es)" in session and "Approach B worked." in session
    data = json.loads(hermes("session", "show", "S", *dd, "--json"))
    assert data["goal"] == "solve it with approach B" and data["stop_reason"] is None
    assert data["metrics"]["turns"] == 2 and data["branches"] == 2

    out = hermes("branch", "switch", "S", other["head"][-8:], *dd)
    assert "switch: active head is now" in out
    data = json.loads(hermes("session", "show", "S", *dd, "--json"))
    assert data["last_messages"][-1]["content"] == "Approach A failed."
    hermes("branch", "switch", "S", turn_ends[0], *dd, code=1)  # not a head: clear error

    out = hermes("branch", "fork", "S", turn_ends[0], "something else entirely", "--model", ctx.model, *dd, "--json")
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["answer"] == "Forked reply." and summary["forked_from"].endswith(turn_ends[0])
    assert "approach" not in " ".join(str(m.content) for m in model.seen[-1] if not isinstance(m, SystemMessage))
    listing = json.loads(hermes("branch", "list", "S", *dd, "--json"))
    assert len(listing["heads"]) == 3 and listing["heads"][0]["active"]

    tree = hermes("branch", "show", "S", *dd)
    assert tree.count("○ head") == 2 and tree.count("● ACTIVE") == 1 and "rollback" in tree and "switch" in tree
    detail = hermes("branch", "show", "S", turn_ends[0], *dd)
    assert "on active branch" in detail and "Hello, ready." in detail
    hermes("branch", "show", "S", "nope-not-an-id", *dd, code=1)
    hermes("branch", "list", "missing-thread", *dd, code=1)
    if checkpoint_backend == "sqlite":  # the thread is in this data directory's file
        hermes("session", "show", "S", "--data-dir", str(data_dir / "elsewhere"), code=1)
        return
    # on PostgreSQL the thread is in the database, which every data directory (machine) shares,
    # and no SQLite checkpoint file was written
    assert "Forked reply." in hermes("session", "show", "S", "--data-dir", str(data_dir / "elsewhere"))
    assert not checkpoints_file(data_dir).exists()
    import psycopg

    with psycopg.connect(request.getfixturevalue("postgres_url")) as conn:
        rows = conn.execute("SELECT count(*) FROM checkpoints WHERE thread_id = 'S'").fetchone()
    assert rows is not None and rows[0] > 10


async def test_the_mirror_follows_rollbacks_and_forks(scripted, data_dir, checkpoint_backend):
    from graph.branches import Branches
    from graph.runner import run_turn

    ctx = scripted([AIMessage("r1"), AIMessage("r2"), AIMessage("r3")])
    await run_turn("m1", ctx, "M", quiet=True)
    await run_turn("m2", ctx, "M", quiet=True)
    async with open_checkpointer(checkpoints_file(data_dir)) as saver:
        from graph.builder import make_graph

        agent = make_graph(checkpointer=saver)
        branches = Branches(agent, mirror=ThreadMirror(data_dir))
        tree = await branches.branch_tree("M")
        first_end = next(n.checkpoint_id for n in tree.nodes.values() if not n.next and n.preview == "ai: r1")
        op = await branches.rollback("M", first_end)
        mirrored = await ThreadMirror(data_dir).read("M")
        assert [m.content for m in mirrored.messages] == ["m1", "r1"] and mirrored.last_checkpoint_id == op.head
        await branches.fork("M", first_end, "m2-bis", context=ctx)
    mirrored = await ThreadMirror(data_dir).read("M")
    assert [m.content for m in mirrored.messages] == ["m1", "r1", "m2-bis", "r3"]
