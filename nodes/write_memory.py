"""Node ``write_memory``: close the turn — tell the user about an early stop, write memory.

* An empty answer gets a ``stop_reason`` here ("the model gave no answer"): the user is told,
  and such a turn is never remembered as a completed task.
* If ``stop_reason`` is set, an AI message states it plainly (what stopped the loop, what was
  done, what to do next), so a stopped run never looks like a normal answer (DESIGN §5). An
  answer that could not be verified (``graph.verification.UNVERIFIED_ANSWER``) gets the honest
  answer instead: what could not be established, and what the data read shows (DESIGN §5.5).
* Only a verified answer is a task memory: the evidence carries the check of the answer against
  the goal's results (``TurnEvidence.verified``, the effects it claims that no call shows, the
  ``tool#call id`` / request id / payload handle refs it rests on), and a new verified answer to
  the same request supersedes the earlier task memories of it (DESIGN §4.4).
* The turn is appended to the thread's plain-text mirror (``graph.mirror``, seed §5.3 dual
  write), from which a session whose checkpoint cannot be read is rebuilt.
* Memory write triggers (seed §4.2) are decided here by ``MemoryService.plan_turn`` (pure:
  task completed — judged on the evidence this node reads from the state
  (``memory.task_outcome.TurnEvidence``: the goal's required steps and which succeeded, derived from
  the tools' own metadata by ``graph.progress``; side effects done; artifacts; the successful
  results), never on the model's word alone (DESIGN §4.4) —, explicit preference, tool failed then succeeded on retry, cross-session
  reference; semantic facts stated by the user; values that decide a pending conflict) and
  written in the background (``graph.resources.run_in_background``): the answer never waits
  for, and never fails because of, a memory write (DESIGN §4); the service queues failed
  writes and replays the queue.

Update: ``messages`` (the stop notice, if any) and ``metrics`` (``turns``; ``memory_writes`` =
records submitted for writing: episodic events + semantic facts).
"""

from __future__ import annotations

import logging
import re
import uuid
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, ToolMessage
from langgraph.runtime import Runtime

from graph.claimed_effects import unbacked_claims
from graph.context import NO_THREAD, Context, run_thread_id
from graph.failures import Recovery, recovery_for
from graph.goal_results import Result, goal_results
from graph.history import previous_turn_closures
from graph.mirror import append_turn
from graph.progress import artifacts, current_goal_messages, request_id, required_steps
from graph.resources import get_memory, get_toolbox, run_in_background
from graph.state import State
from graph.tracing import background_span
from graph.verification import UNVERIFIED_ANSWER, honest_answer, verify
from memory.task_outcome import TurnEvidence
from tools.schema_versions import schema_hash

log = logging.getLogger(__name__)

#: How a stop notice quotes the model's own last answer (:func:`stop_notice`): reported, not claimed.
MODEL_ANSWER = "The model's answer was: "
#: How a stop notice starts the list of steps done (:func:`stop_notice`).
DONE_SO_FAR = "Done so far: "

#: Error kinds of calls that never reached the tool: no "failed, then succeeded on retry".
NEVER_RAN = frozenset({"not_offered", "unknown_tool", "invalid_arguments", "invalid_value"})


async def _mirror(data_dir: str, thread_id: str, messages: list[BaseMessage]) -> None:
    try:
        await append_turn(data_dir, thread_id, messages)
    except OSError:  # the checkpoint is the primary record; a missing mirror only weakens recovery
        log.warning("plain-text mirror not written for thread %r", thread_id, exc_info=True)


def _question_of(text: str) -> str:
    """The request part of a task memory's text (``completed task: <goal>; tools: …``)."""
    return " ".join(re.split(r"; (?:tools|produced|answer): ", text, maxsplit=1)[0].split()).casefold()


async def _write_superseding(memory: Any, plan: Any, user_id: str) -> None:
    """Write ``plan``; a verified (completed) task memory in it supersedes the earlier
    completed-task memories of the same request: they are no longer recalled (forgotten) and
    the new one keeps what they said under ``metadata["supersedes"]`` (DESIGN §4.4)."""
    task = next((e for e in plan.events if e.kind == "task" and e.metadata.get("outcome") == "completed"), None)
    old: list[Any] = []
    if task is not None:
        try:
            earlier = await memory.episodic.list(user_id, kinds=["task"], limit=500)
            old = [
                e
                for e in earlier
                if e.id != task.id
                and e.text != task.text
                and (e.metadata or {}).get("outcome") == "completed"
                and _question_of(e.text) == _question_of(task.text)
            ]
        except Exception:  # superseding never blocks the write
            log.warning("earlier task memories unreadable; nothing superseded", exc_info=True)
        if old:
            task.metadata = {
                **task.metadata,
                "supersedes": [{"ref": f"episodic:{e.id}", "text": e.text[:300]} for e in old],
            }
    await memory.write_plan(plan)
    for e in old:
        await memory.forget(user_id, f"episodic:{e.id}")


def stop_notice(
    reason: str,
    done: list[str],
    artifacts: list[str],
    answer: str = "",
    model_can_fix: bool = True,
    earlier: list[str] | None = None,
) -> str:
    """The user-facing text of an early stop; ``done`` the steps done (:func:`done_steps`);
    ``answer`` is the model's own last answer, kept;
    ``artifacts`` are what the goal's calls produced (paths, URLs, ids). ``model_can_fix``
    False (a missing setting, an effect whose outcome is unknown: ``graph.failures``
    TELL_USER kinds) — the reason says what to do, and no rephrasing or stronger model helps.
    ``earlier``: side effects already done before this request (:func:`done_before`), stated
    after the steps done, so a step the ledger holds is never reported as not done."""
    lines = [f"Stopped before finishing: {reason}."]
    if answer:
        lines.append(f"{MODEL_ANSWER}{answer.strip()[:800]}")
    nothing = "nothing new in this request" if earlier else "no tool step succeeded"
    lines.append(DONE_SO_FAR + (", ".join(done) if done else nothing) + ".")
    if earlier:
        lines.append(
            "Already done before this request, on the branch it was forked from (the idempotency ledger "
            f"holds the result; not run again here): {', '.join(earlier)}."
        )
    if artifacts:
        lines.append(f"Produced: {', '.join(artifacts)}.")
    if model_can_fix:
        lines.append(
            "Next: rephrase the task or give the missing detail, or point Hermes at a stronger "
            "model (HERMES_BASE_URL / --base-url)."
        )
    else:
        lines.append("Next: do what the reason above says, then ask again; another model or wording cannot fix it.")
    return " ".join(lines)


def done_steps(results: list[ToolMessage]) -> list[str]:
    """What a stop notice lists as done: the name of each tool with a successful result among
    ``results``, sorted; a tool whose every success the idempotency ledger replayed
    (``additional_kwargs["replayed"]``: the request already ran — before a fork, a restart, a
    retry or under another call id — and was not run again) is marked so. A replay is the
    effect done once, never "no tool step succeeded" and never a second run."""
    ok = [m for m in results if m.status != "error" and m.name]
    fresh = {m.name for m in ok if not m.additional_kwargs.get("replayed")}
    return [
        name if name in fresh else f"{name} (already done for this request earlier; not run again)"
        for name in sorted({str(m.name) for m in ok})
    ]


async def done_before(messages: list[AnyMessage], context: Context, thread_id: str) -> list[str]:
    """Side-effect tools of the turn before this one whose calls a fork or rollback left
    pending (``graph.history.previous_turn_closures``: closed as not run on this branch) and
    whose request the idempotency ledger holds as done — the effect exists from the branch the
    fork left. Sorted; ``[]`` when the ledger cannot be read (the notice is then only less
    complete)."""
    closed = previous_turn_closures(messages)
    if not closed:
        return []
    try:
        registry = (await get_toolbox(context)).registry
        found = set()
        for name, args, goal_id in closed:
            spec = registry.get(name)
            if (
                spec is not None
                and spec.side_effect
                and await registry.ledger.state(name, request_id(thread_id, goal_id, name, args)) == "done"
            ):
                found.add(name)
        return sorted(found)
    except Exception:  # a notice without it, never a failed turn
        log.warning("ledger unreadable; the stop notice omits earlier effects", exc_info=True)
        return []


def evidence_refs(work: list[AnyMessage], thread_id: str, goal_id: str, results: list[Result]) -> tuple[str, ...]:
    """``tool#call id (request <id>, <handle>)`` of each successful result of the goal: what a
    task memory rests on (``hermes memory list`` shows them)."""
    calls = {c["id"]: c for m in work if isinstance(m, AIMessage) for c in m.tool_calls if c.get("id")}
    refs = []
    for r in results:
        call = calls.get(r.call_id)
        extra = [f"request {request_id(thread_id, goal_id, r.name, call.get('args', {}))}"] if call else []
        if r.handle:
            extra.append(r.handle)
        refs.append(f"{r.name}#{r.call_id}" + (f" ({', '.join(extra)})" if extra else ""))
    return tuple(refs)


async def turn_evidence(
    state: State, context: Context, results: list[ToolMessage], answer: str = "", thread_id: str = NO_THREAD
) -> TurnEvidence:
    """What the state shows of the goal's outcome (``memory.task_outcome.TurnEvidence``): required
    steps and side-effect flags come from the registered tools' metadata; ``verified`` is the
    check of ``answer`` against the goal's results (``graph.verification``, DESIGN §5.5) —
    False for an answer that stopped unverified —, ``unbacked_claims`` the effects it claims that
    no successful call shows, ``refs`` the results it rests on. A toolbox that cannot be opened
    leaves the steps unknown and the answer unverified (the evidence is then weaker, never
    stronger)."""
    ok = [m for m in results if m.status != "error" and m.name]
    succeeded = tuple(dict.fromkeys(m.name for m in ok if m.name))
    required: set[str] = set()
    side_effects: set[str] = set()
    produced: list[str] = []
    verified: bool | None = False
    rests_on_data = False
    problems: tuple[str, ...] = ()
    unbacked: tuple[str, ...] = ()
    refs: tuple[str, ...] = ()
    versions: tuple[tuple[str, str], ...] = ()
    try:
        specs = (await get_toolbox(context)).registry.specs()
        required = required_steps(state.goal, specs)
        side_effects = {s.name for s in specs if s.side_effect}
        produced = artifacts([*results], specs)  # this goal's only (State.artifacts may be older)
        work = current_goal_messages(state.messages)
        found = goal_results(work, specs)
        check = verify(answer, state.goal, state.intent, found, specs)
        unverified_stop = (state.stop_reason or "").startswith(UNVERIFIED_ANSWER)
        # a stop other than an unverified answer presents no answer as final: nothing to verify
        verified = False if unverified_stop else (None if state.stop_reason else check.ok)
        problems = tuple(check.problems(quote=False)) or ((state.stop_reason or "",) if unverified_stop else ())
        rests_on_data = any(r.is_data_read for r in found)
        # the model's own last answer: a claim Hermes corrected still makes the answer no evidence
        own = next(
            (
                str(m.content)
                for m in reversed(work)
                if isinstance(m, AIMessage) and not m.tool_calls and m.name != "hermes"
            ),
            answer,
        )
        unbacked = tuple(sentence for sentence, _ in unbacked_claims(own, specs, succeeded))
        refs = evidence_refs(work, thread_id, state.goal_id, found)
        # the shape of each tool used: recalled after it changed, the memory is marked stale
        versions = tuple((sp.name, schema_hash(sp.parameters)) for sp in specs if sp.name in succeeded)
    except Exception:  # memory never breaks the turn
        log.warning("toolbox unavailable; task evidence without required steps", exc_info=True)
    return TurnEvidence(
        required_steps=tuple(sorted(required)),
        steps_done=tuple(sorted(required & set(succeeded))),
        tools_succeeded=succeeded,
        side_effects_done=tuple(n for n in succeeded if n in side_effects),
        artifacts=tuple(produced),
        result_texts=tuple(str(m.content)[:4000] for m in ok),
        verified=verified,
        rests_on_data=rests_on_data,
        unverified=problems,
        unbacked_claims=unbacked,
        refs=refs,
        tool_versions=versions,
    )


async def write_memory(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    """Graph node: see the module docstring for the update it returns."""
    context = runtime.context or Context()
    work = current_goal_messages(state.messages)
    results = [m for m in work if isinstance(m, ToolMessage)]
    done = sorted({m.name for m in results if m.status != "error" and m.name})
    # failed in the tool itself (not a refused, unknown or malformed call that never ran)
    failed = {
        m.name
        for m in results
        if m.status == "error" and m.name and m.additional_kwargs.get("error_kind") not in NEVER_RAN
    }
    messages: list[AIMessage] = []
    answer = ""
    last = state.messages[-1] if state.messages else None
    said = last.content if isinstance(last, AIMessage) and not last.tool_calls and isinstance(last.content, str) else ""
    stop_reason = state.stop_reason
    if not stop_reason and not said.strip():
        stop_reason = "the model gave no answer"
    if stop_reason and stop_reason.startswith(UNVERIFIED_ANSWER):
        # never the unsupported answer: what could not be established, and what the data shows
        try:
            specs = (await get_toolbox(context)).registry.specs()
        except Exception:  # noqa: BLE001 - the honest answer without the tools' metadata
            specs = []
        reason = stop_reason[len(UNVERIFIED_ANSWER) :].lstrip(": ")
        answer = honest_answer(state.goal, reason, goal_results(work, specs))
        messages.append(AIMessage(content=answer, name="hermes", id=f"stop-{uuid.uuid4().hex[:12]}"))
    elif stop_reason:
        tell_user = any(recovery_for(m.additional_kwargs.get("error_kind")) is Recovery.TELL_USER for m in results)
        steps = done_steps(results)
        earlier = await done_before(state.messages, context, run_thread_id() or NO_THREAD)
        answer = stop_notice(
            stop_reason,
            steps,
            state.artifacts,
            said,
            model_can_fix=not tell_user,
            earlier=[n for n in earlier if n not in done],
        )
        # an id: the mirror chains messages by id
        messages.append(AIMessage(content=answer, name="hermes", id=f"stop-{uuid.uuid4().hex[:12]}"))
    else:
        answer = said
    thread_id = run_thread_id() or NO_THREAD
    written = 0
    try:
        memory = get_memory(context)
        evidence = await turn_evidence(state, context, results, answer, thread_id)
        plan = memory.plan_turn(
            user_id=context.user_id,
            thread_id=thread_id,
            goal=state.goal,
            answer=answer,
            tools_used=done,
            stop_reason=stop_reason,
            failed_then_succeeded=sorted(failed & set(done)),
            # the turn's last message: on another branch of the same turn it is absent, so a
            # memory of this attempt is not recalled there (rollback inside a turn included)
            origin_message_id=(messages[-1].id if messages else (state.messages[-1].id if state.messages else None)),
            evidence=evidence,
            # a fired reminder's request is its stored action, not the user's words (issue 26)
            goal_from_user=not context.fired_reminder,
        )
        if len(plan):
            write = await background_span(
                "memory_write", _write_superseding(memory, plan, context.user_id), {"records": len(plan)}
            )
            run_in_background(write, name=f"memory-write:{thread_id}")
        written = len(plan)
    except Exception:  # memory must never block the answer
        log.exception("memory write failed; the answer is unaffected")
    # the mirror is for recovery, not for this answer: written off the hot path (the mirror
    # serialises appends per thread; resources.drain_background waits for it at exit)
    run_in_background(_mirror(context.data_dir, thread_id, [*state.messages, *messages]), name=f"mirror:{thread_id}")
    # the turn is over: per-turn steering state is cleared (Studio shows a clean workbench)
    update: dict[str, Any] = {
        "metrics": {"turns": 1, "memory_writes": written},
        "blocked_tools": [],
        "must_call_tool": False,
        "progress_note": "",
    }
    if messages:  # an empty write would still re-serialise the whole message channel
        update["messages"] = messages
    if stop_reason != state.stop_reason:
        update["stop_reason"] = stop_reason
    return update
