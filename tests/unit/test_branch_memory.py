"""A rollback rolls memory back (issue 27, point 3; DESIGN §1.5): the memories written by turns
that are no longer on a thread's active branch are hidden from recall in every thread and from
``hermes memory list`` (shown with ``--all`` as "inactive branch"), and come back when that
branch is active again. Scripted fake models; the real memory store of the test's data dir;
the CLI path on the real SQLite checkpointer."""

from __future__ import annotations

import json
import re
import sqlite3

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from typer.testing import CliRunner

from graph import resources
from graph.branches import Branches
from graph.builder import make_graph
from graph.checkpoint_tree import short_id
from graph.cli import app
from graph.mirror import ThreadMirror
from memory.branch_origins import BranchOrigins
from tests.conftest import FakeToolbox, tool_call

PREFERENCE = "from now on I prefer PDF reports"
#: the graph tests run whole turns (0.7-5 s each, measured): the quick tier skips them
turns = pytest.mark.slow


@pytest.fixture(autouse=True)
def _hash_embeddings(monkeypatch):
    """The keyword-hash embedder: what is hidden does not depend on the model; it loads in no time."""
    monkeypatch.setenv("HERMES_EMBEDDINGS", "hash")


TASK = "count the rows with plan b"


def box() -> FakeToolbox:
    toolbox = FakeToolbox()
    toolbox.add("plan_b", lambda: {"ok": True, "rows": 3}, reads="data")
    return toolbox


async def turn(agent, ctx, text: str, thread: str = "t"):
    return await agent.ainvoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": thread}}, context=ctx)


def turn_end(tree, last_text: str) -> str:
    hits = [n.checkpoint_id for n in tree.nodes.values() if not n.next and last_text in n.preview]
    assert len(hits) == 1, [(n.short_id, n.preview, n.next) for n in tree.nodes.values()]
    return hits[0]


async def recalled(ctx, query: str, thread: str) -> str:
    """What a turn of another thread would recall for ``query`` (its memory block)."""
    mem = resources.get_memory(ctx)
    return "\n".join(await mem.recall(ctx.user_id, query, k=5, thread_id=thread, visible_origins=set()))


@turns
async def test_rollback_hides_the_rolled_back_turns_memories_everywhere_and_switch_restores_them(scripted):
    ctx = scripted(
        [
            AIMessage("Hello, ready."),
            AIMessage("Noted: PDF from now on."),
            tool_call("plan_b", {}, "cb"),
            AIMessage("Plan b counted 3 rows."),
        ],
        box(),
    )
    agent = make_graph(checkpointer=InMemorySaver())
    branches = Branches(agent, mirror=ThreadMirror(ctx.data_dir))
    await turn(agent, ctx, "hello there")
    await turn(agent, ctx, PREFERENCE)
    await turn(agent, ctx, TASK)
    await resources.drain_background()
    tree = await branches.branch_tree("t")
    before = tree.active
    mem = resources.get_memory(ctx)
    assert "pdf" in (await recalled(ctx, "which format for reports", "other")).casefold()
    assert "plan b" in await recalled(ctx, TASK, "other")

    await branches.rollback("t", short_id(turn_end(tree, "Hello, ready.")))

    # not recalled from another thread (episodic preference and task, the semantic fact) ...
    assert "pdf" not in (await recalled(ctx, "which format for reports", "other")).casefold()
    assert "plan b" not in await recalled(ctx, TASK, "other")
    # ... and known as on an inactive branch (what `hermes memory list` reads)
    inactive = await mem.inactive_origins()
    assert inactive and all(thread == "t" for thread, _ in inactive)

    # the other branch active again: everything is back
    await branches.switch("t", short_id(before))
    assert "pdf" in (await recalled(ctx, "which format for reports", "other")).casefold()
    assert "plan b" in await recalled(ctx, TASK, "other")
    assert not await mem.inactive_origins()


@turns
async def test_a_forks_memories_stay_on_the_fork_and_the_originals_come_back_with_it(scripted):
    ctx = scripted(
        [
            AIMessage("Hello, ready."),
            AIMessage("Noted: PDF from now on."),
            AIMessage("Noted: CSV from now on."),
        ],
        box(),
    )
    agent = make_graph(checkpointer=InMemorySaver())
    branches = Branches(agent, mirror=ThreadMirror(ctx.data_dir))
    await turn(agent, ctx, "hello there")
    await turn(agent, ctx, PREFERENCE)
    await resources.drain_background()
    tree = await branches.branch_tree("t")
    original = tree.active
    await branches.fork("t", short_id(turn_end(tree, "Hello, ready.")), "from now on I prefer CSV reports", context=ctx)
    await resources.drain_background()

    on_fork = (await recalled(ctx, "which format for reports", "other")).casefold()
    assert "csv" in on_fork and "pdf" not in on_fork
    # the fork's fact stands on its own: a preference of an inactive branch contests nothing
    assert "[semantic · fact" in on_fork and "user prefers format: csv" in on_fork, on_fork
    assert "conflict" not in on_fork

    await branches.switch("t", short_id(original))
    on_original = (await recalled(ctx, "which format for reports", "other")).casefold()
    assert "pdf" in on_original and "csv" not in on_original


@turns
async def test_an_edit_made_outside_hermes_is_caught_by_the_next_turn(scripted):
    """Studio forks through the server (no Hermes branch operation): the next turn on the
    thread records which memories left the active branch before it recalls."""
    ctx = scripted(
        [AIMessage("Hello, ready."), AIMessage("Noted: PDF from now on."), AIMessage("Sure.")],
        box(),
    )
    agent = make_graph(checkpointer=InMemorySaver())
    branches = Branches(agent)  # the graph's API alone: what a server-side fork does
    await turn(agent, ctx, "hello there")
    await turn(agent, ctx, PREFERENCE)
    await resources.drain_background()
    base = turn_end(await branches.branch_tree("t"), "Hello, ready.")
    await agent.ainvoke(
        {"messages": [HumanMessage("what can you do")]},
        {"configurable": {"thread_id": "t", "checkpoint_id": base}},
        context=ctx,
    )
    assert "pdf" not in (await recalled(ctx, "which format for reports", "other")).casefold()


@turns
def test_cli_rollback_switch_and_fork_on_the_sqlite_checkpointer_and_memory_list(scripted, data_dir):
    toolbox = box()
    ctx = scripted(
        [
            AIMessage("Hello, ready."),
            AIMessage("Noted: PDF from now on."),
            AIMessage("Noted: CSV from now on."),
        ],
        toolbox,
    )
    runner = CliRunner()
    dd = ["--data-dir", str(data_dir)]

    def hermes(*args: str) -> str:
        resources.set_toolbox(ctx, toolbox)  # each CLI run closes the toolbox at exit
        result = runner.invoke(app, list(args), env={"COLUMNS": "200"})
        assert result.exit_code == 0, result.output
        return result.output

    def listing(*flags: str) -> dict:
        return json.loads(hermes("memory", "list", "--user", ctx.user_id, *dd, "--json", *flags))

    def about_pdf(rows: list[dict]) -> list[dict]:
        return [r for r in rows if "pdf" in json.dumps(r).casefold()]

    run = ["--thread", "S", "--model", ctx.model, *dd]
    hermes("run", "hello there", *run)
    hermes("run", PREFERENCE, *run)
    turn_ends = re.findall(r"([0-9a-f]{8}) step +\d+ write_memory", hermes("branch", "show", "S", *dd, "--compact"))
    assert len(turn_ends) == 2
    shown = listing()
    assert about_pdf(shown["episodic"]) and about_pdf(shown["semantic"])

    hermes("branch", "rollback", "S", turn_ends[0], *dd)
    shown = listing()
    assert not about_pdf(shown["episodic"]) and not about_pdf(shown["semantic"])
    table = hermes("memory", "list", "--user", ctx.user_id, *dd)
    assert "pdf" not in table.casefold() and "on an inactive branch (not recalled): --all lists them" in table
    every = listing("--all")
    hidden = about_pdf(every["episodic"]) + about_pdf(every["semantic"])
    assert len(hidden) >= 2 and all(r["branch"] == "inactive" for r in hidden)
    assert all(r["branch"] == "active" for r in every["episodic"] if r not in hidden)
    table = hermes("memory", "list", "--all", "--user", ctx.user_id, *dd)
    assert "inactive branch" in table and "pdf" in table.casefold()
    found = json.loads(hermes("memory", "search", "PDF reports", "--user", ctx.user_id, *dd, "--json"))
    assert about_pdf(found["episodic"]) and all(r["branch"] == "inactive" for r in about_pdf(found["episodic"]))
    assert "[inactive branch]" in hermes("memory", "search", "PDF reports", "--user", ctx.user_id, *dd)

    heads = json.loads(hermes("branch", "list", "S", *dd, "--json"))["heads"]
    other = next(h for h in heads if not h["active"])
    hermes("branch", "switch", "S", other["head"][-8:], *dd)
    shown = listing()
    assert about_pdf(shown["episodic"]) and about_pdf(shown["semantic"])
    assert "inactive branch" not in hermes("memory", "list", "--all", "--user", ctx.user_id, *dd)

    # a fork from before the preference: the fork's memory is listed, the original's is not
    hermes("branch", "fork", "S", turn_ends[0], "from now on I prefer CSV reports", "--model", ctx.model, *dd)
    shown = listing()
    assert not about_pdf(shown["semantic"]) and any(f["object"] == "csv" for f in shown["semantic"])


@turns
async def test_a_memory_restated_on_the_new_branch_is_recalled_though_its_first_branch_is_inactive(scripted):
    """The episodic store keeps one record per text (K11): the same preference said again after
    a rollback returns the first record, written on the abandoned branch. It was said on the
    active branch too, so it is recalled — in this session and in every other."""
    ctx = scripted(
        [AIMessage("Hello, ready."), AIMessage("Noted: PDF from now on."), AIMessage("Noted again.")],
        box(),
    )
    agent = make_graph(checkpointer=InMemorySaver())
    branches = Branches(agent, mirror=ThreadMirror(ctx.data_dir))
    mem = resources.get_memory(ctx)

    async def preferences(thread: str, visible: set[str] | None) -> str:
        return "\n".join(
            await mem.recall_episodic(
                ctx.user_id, "PDF reports", kinds=["preference"], thread_id=thread, visible_origins=visible
            )
        )

    await turn(agent, ctx, "hello there")
    await turn(agent, ctx, PREFERENCE)
    await resources.drain_background()
    assert "PDF" in await preferences("other", set())
    await branches.rollback("t", short_id(turn_end(await branches.branch_tree("t"), "Hello, ready.")))
    assert "PDF" not in await preferences("other", set())
    await turn(agent, ctx, PREFERENCE)
    await resources.drain_background()
    state = await agent.aget_state({"configurable": {"thread_id": "t"}})
    assert "PDF" in await preferences("other", set())
    assert "PDF" in await preferences("t", {m.id for m in state.values["messages"]})
    assert "pdf" in (await recalled(ctx, "which format for reports", "other")).casefold()


async def test_a_turn_that_extends_the_branch_writes_nothing(tmp_path):
    """The sync runs on every turn: it writes only when a recorded origin changes side."""
    origins = BranchOrigins.in_dir(tmp_path)
    await origins.record("t", "m1")
    await origins.record("t", "m2")
    await origins.record("u", "m9")
    watcher = sqlite3.connect(tmp_path / "memory.db")  # data_version moves on another connection's commit

    def version() -> int:
        return watcher.execute("PRAGMA data_version").fetchone()[0]

    try:
        before = version()
        inactive = await origins.sync("t", {"h0", "m1", "h1", "m2", "h2"})  # the linear case
        assert not inactive and version() == before
        inactive = await origins.sync("t", {"h0", "m1", "h3"})  # rolled back before m2
        assert set(inactive) == {("t", "m2")} and version() != before
        assert inactive.visible(("u", "m9")) and inactive.visible(("t", None)) and not inactive.visible(("t", "m2"))
        settled = version()
        assert set(await origins.sync("t", {"h0", "m1", "h3", "h4"})) == {("t", "m2")} and version() == settled
        assert not await origins.sync("t", {"h0", "m1", "h1", "m2", "h2", "h5"})  # switched back
    finally:
        watcher.close()
