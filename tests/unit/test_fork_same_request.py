"""A fork that sends the forked-from turn's text again is the same request (issue 23, DESIGN §2.4).

The kind: on ``langgraph dev`` / Studio a fork reaches the graph as NEW input — Studio's "edit
message and rerun" from a checkpoint, ``runs.create(thread, checkpoint_id=<earlier>,
input={"messages": [...]})`` — so a new message id, and, before the rule, a new goal id: a model
that called the side-effecting tool again ran the effect a second time. The rule
(``graph.request_identity``): a fork whose new message has the same text (whitespace and case
aside) as the message of the turn it forked from on the other branch carries that turn's goal id,
so the idempotency ledger replays the effect (marked ``replayed``) instead of running it. A fork
with an edited text is a new request (the effect runs: the user's edit).

Siblings: a whitespace/case variant, a fork of a fork, a fork from inside the turn (before the
dispatch) with the turn's own text, an edit that kept the message id, a rollback then the same
text at the new head (a run whose base has another branch) — and, not a fork, the same text again
at the head after the answer: a deliberate repeat, run again.

Real parts: the SQLite checkpointer the CLI and the server use (``graph.checkpoints``) and the
SQLite ledger file; forks through the compiled graph with the checkpointer's config (a
``checkpoint_id``), as the server runs them. The model is a scripted fake that can only call the
tools bound to it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from graph.branches import Branches
from graph.builder import make_graph
from graph.checkpoints import checkpoints_file, open_checkpointer
from graph.request_identity import SAME_REQUEST_AS
from nodes.assemble_context import DISPATCHED_DONE
from tests.conftest import FakeToolbox, flagship_specs, tool_call
from tools.idempotency import IdempotencyLedger

pytestmark = pytest.mark.slow  # whole graph runs on SQLite files

GOAL = "Post the report reports/sales-2025-06.md to the project group."
POST_ARGS = {"channel": "project group", "text": "Report: reports/sales-2025-06.md"}


def post(call_id: str) -> AIMessage:
    return tool_call("post_message", POST_ARGS, call_id)


def posting(call_id: str) -> list[AIMessage]:
    """One turn of a model that posts (under a call id of its own), then answers."""
    return [post(call_id), AIMessage("Posted to the project group.")]


def toolbox(data_dir: Path, ran: list[str]) -> FakeToolbox:
    """The flagship's tools (real metadata), each run recorded in ``ran``, on the ledger file."""
    box = FakeToolbox()

    def recorded(name: str) -> Callable[..., dict[str, bool]]:
        def run(**kw: Any) -> dict[str, bool]:
            ran.append(name)
            return {"ok": True}

        return run

    for spec in flagship_specs():
        box.add_spec(spec, recorded(spec.name))
    box.registry.ledger = IdempotencyLedger(data_dir / "idempotency.db")
    return box


class Thread:
    """One thread of the agent graph on the data dir's checkpoint file, run like the server does."""

    def __init__(self, agent: Any, thread_id: str, context: Any) -> None:
        self.agent, self.thread_id, self.context = agent, thread_id, context

    def config(self, checkpoint_id: str | None = None) -> dict[str, Any]:
        conf: dict[str, Any] = {"thread_id": self.thread_id}
        if checkpoint_id:
            conf["checkpoint_id"] = checkpoint_id
        return {"configurable": conf}

    async def send(self, message: HumanMessage | str, checkpoint_id: str | None = None) -> dict[str, Any]:
        """A run with a new human message (at ``checkpoint_id``: a fork, Studio/SDK style)."""
        message = HumanMessage(message) if isinstance(message, str) else message
        return await self.agent.ainvoke({"messages": [message]}, self.config(checkpoint_id), context=self.context)

    async def history(self) -> list[Any]:
        return [s async for s in self.agent.aget_state_history(self.config())]

    async def before_turn(self) -> str:
        """The checkpoint a Studio edit of the posting turn's message forks from: where the turn
        before it ("hi") finished (its last checkpoint, nothing left to run)."""
        for s in await self.history():
            said = [m.content for m in s.values.get("messages", []) if isinstance(m, HumanMessage)]
            if said == ["hi"] and s.next == ():
                return s.config["configurable"]["checkpoint_id"]
        raise AssertionError("no end of the first turn")

    async def before_dispatch(self, goal_message_id: str | None = None) -> str:
        """The newest checkpoint about to dispatch a post (of the turn of ``goal_message_id``)."""
        for s in await self.history():
            msgs = s.values.get("messages", [])
            humans = [m for m in msgs if isinstance(m, HumanMessage)]
            if s.next == ("dispatch_tools",) and (goal_message_id is None or humans[-1].id == goal_message_id):
                return s.config["configurable"]["checkpoint_id"]
        raise AssertionError("no checkpoint before a dispatch")


def humans(values: dict[str, Any]) -> list[HumanMessage]:
    return [m for m in values["messages"] if isinstance(m, HumanMessage)]


def replayed(values: dict[str, Any]) -> list[bool]:
    """For each post result of the latest turn: was it replayed by the ledger?"""
    start = max(i for i, m in enumerate(values["messages"]) if isinstance(m, HumanMessage))
    return [
        bool(m.additional_kwargs.get("replayed"))
        for m in values["messages"][start:]
        if isinstance(m, ToolMessage) and m.name == "post_message" and m.status == "success"
    ]


@pytest.fixture
async def world(scripted, data_dir):
    """``world(replies)`` → (Thread on a new thread with a first turn "hi" and a posting turn
    GOAL done, effects list). The fork's replies follow the first two turns'."""
    opened: list[Any] = []

    async def make(fork_replies: list[AIMessage]) -> tuple[Thread, list[str]]:
        ran: list[str] = []
        box = toolbox(data_dir, ran)
        ctx = scripted([AIMessage("Hello."), *posting("p1"), *fork_replies], box, embeddings="hash")
        cm = open_checkpointer(checkpoints_file(data_dir))
        saver = await cm.__aenter__()
        opened.append((cm, box))
        thread = Thread(make_graph(checkpointer=saver), "t", ctx)
        await thread.send("hi")
        out = await thread.send(GOAL)
        assert out["stop_reason"] is None and ran == ["post_message"]
        return thread, ran

    yield make
    for cm, box in opened:
        await box.registry.ledger.aclose()
        await cm.__aexit__(None, None, None)


@pytest.mark.parametrize(
    "text",
    [
        GOAL,  # Studio's "edit and rerun" with the text unchanged, the SDK's runs.create(checkpoint_id=...)
        "  post the REPORT reports/sales-2025-06.md\nto the project   group. ",  # spacing and case aside
    ],
)
async def test_a_fork_with_the_same_text_replays_the_effect(world, text):
    thread, ran = await world(posting("p2"))
    original = humans((await thread.agent.aget_state(thread.config())).values)[-1]
    base = await thread.before_turn()
    out = await thread.send(text, checkpoint_id=base)
    assert ran == ["post_message"]  # ran once over both branches
    assert out["stop_reason"] is None and replayed(out) == [True]
    fork_message = humans(out)[-1]
    assert fork_message.id != original.id  # a new message (Studio, the SDK) ...
    assert fork_message.additional_kwargs[SAME_REQUEST_AS] == original.id  # ... the same request
    assert out["goal_id"] == original.id


async def test_an_edited_text_is_a_new_request_the_same_text_is_not(world):
    """The same text replays; the user's edit runs the effect (its own request), once."""
    edited = "Post the report reports/sales-2025-06.md to the project group, and say it is final."
    thread, ran = await world([*posting("p2"), *posting("p3"), *posting("p4")])
    base = await thread.before_turn()
    await thread.send(GOAL, checkpoint_id=base)
    assert ran == ["post_message"]
    out = await thread.send(edited, checkpoint_id=base)
    assert ran == ["post_message", "post_message"] and replayed(out) == [False]
    assert SAME_REQUEST_AS not in humans(out)[-1].additional_kwargs
    # and the edit, forked again with its own text, is that edit's request: not run a third time
    out = await thread.send(edited, checkpoint_id=base)
    assert ran == ["post_message", "post_message"] and replayed(out) == [True]


async def test_a_fork_of_a_fork_replays(world):
    """A fork (same text), then a fork inside that fork's turn (before its dispatch) with the
    same text again, then one more from the first base: the effect ran once."""
    thread, ran = await world([*posting("p2"), *posting("p3"), *posting("p4")])
    original = humans((await thread.agent.aget_state(thread.config())).values)[-1]
    base = await thread.before_turn()
    first = await thread.send(GOAL, checkpoint_id=base)
    inside_first = await thread.before_dispatch(humans(first)[-1].id)
    second = await thread.send(GOAL.upper(), checkpoint_id=inside_first)
    third = await thread.send(GOAL, checkpoint_id=base)
    assert ran == ["post_message"]
    for out in (first, second, third):
        assert out["goal_id"] == original.id and replayed(out) == [True]
    # the post the second fork left pending on its branch is closed as done (the first fork's
    # request, by its goal id), not as "not run"
    closed = [m for m in second["messages"] if isinstance(m, ToolMessage) and m.id.startswith("closed-")]
    assert [m.content for m in closed] == [DISPATCHED_DONE]


async def test_a_fork_inside_the_turn_with_its_own_text_as_new_input_replays(world):
    """The server's fork from the checkpoint before the post's dispatch, with the turn's own text
    as a new message (not the CLI's continue-the-turn): the pending post is closed as done on the
    other branch, and a model that posts again gets the ledger's result, not a second post."""
    thread, ran = await world(posting("p2"))
    original = humans((await thread.agent.aget_state(thread.config())).values)[-1]
    at_dispatch = await thread.before_dispatch(original.id)
    out = await thread.send(GOAL, checkpoint_id=at_dispatch)
    assert ran == ["post_message"] and replayed(out) == [True]
    assert out["goal_id"] == original.id and out["stop_reason"] is None


async def test_an_edit_that_keeps_the_message_id_is_a_new_request(world):
    """A client that edits a message but keeps its id: the edit is not the original request."""
    thread, ran = await world(posting("p2"))
    original = humans((await thread.agent.aget_state(thread.config())).values)[-1]
    base = await thread.before_turn()
    edited = HumanMessage("Post the report reports/sales-2025-06.md to the project group again.", id=original.id)
    out = await thread.send(edited, checkpoint_id=base)
    assert ran == ["post_message", "post_message"] and replayed(out) == [False]
    assert out["goal_id"] != original.id


async def test_after_a_rollback_the_same_text_replays_then_a_repeat_at_the_head_runs(world, data_dir):
    """``hermes branch rollback`` (a copy of the checkpoint before the turn, now the head) and
    the same text sent at the head: a run whose base has another branch → the same request.
    Sent once more at the head after that answer: a deliberate repeat, a new request."""
    thread, ran = await world([*posting("p2"), *posting("p3")])
    base = await thread.before_turn()
    await Branches(thread.agent).rollback(thread.thread_id, base)
    out = await thread.send(GOAL)
    assert ran == ["post_message"] and replayed(out) == [True]
    out = await thread.send(GOAL)
    assert ran == ["post_message", "post_message"] and replayed(out) == [False]


class Cancelled(BaseException):
    """Stands for the run ending mid-turn (cancelled, interrupted by a newer run, server lost)."""


async def test_a_run_stopped_mid_turn_then_the_same_text_sent_again_replays(scripted, data_dir, monkeypatch):
    """Not a fork: the run ended after the post ran (and the ledger recorded it) but before the
    round was checkpointed; a client sends the same text again at the head (the server has no
    runner to continue the turn): the same request — the post is not run again. A question
    answered or another text would be a new request; so is the same text once a turn finished
    (the deliberate repeat of the rollback test above)."""
    import nodes.dispatch_tools as dispatch

    ran: list[str] = []
    box = toolbox(data_dir, ran)
    real_write = dispatch._write_payload
    cancelled: list[bool] = []

    def write_then_stop(path, payload):
        if Path(path).name.startswith("p1-") and not cancelled:  # the post's payload (call id p1)
            cancelled.append(True)
            raise Cancelled
        real_write(path, payload)

    monkeypatch.setattr(dispatch, "_write_payload", write_then_stop)
    ctx = scripted([AIMessage("Hello."), *posting("p1"), *posting("p2")], box, embeddings="hash")
    async with open_checkpointer(checkpoints_file(data_dir)) as saver:
        thread = Thread(make_graph(checkpointer=saver), "t", ctx)
        await thread.send("hi")
        with pytest.raises(Cancelled):
            await thread.send(GOAL)
        assert ran == ["post_message"]
        stopped = await thread.agent.aget_state(thread.config())
        assert stopped.next == ("dispatch_tools",)
        out = await thread.send(" ".join(GOAL.split()).lower())
        assert ran == ["post_message"] and replayed(out) == [True]
        assert out["goal_id"] == humans(stopped.values)[-1].id
    await box.registry.ledger.aclose()
