"""Node ``evaluate_progress``: after each tool round — or an answer given while the goal's
steps are still missing — measure distance to the goal and decide whether the loop goes on
(seed §5.2, §6.1; DESIGN §5). Distance and required steps: ``graph.progress``.

Rules, in order (each is a cap, so no retry path is unbounded):

0. **Outcome unknown or a setting missing**: a side-effect call of this round timed out or lost its transport after
   it was sent (``error_kind`` "outcome_unknown"); it is never re-run, so the loop stops and
   the user is told to check it — retrying or working around it could repeat the effect. A
   tool that cannot run because of a setting (error kind "configuration": no database, say)
   stops the loop with its message, which names the setting.
1. **Repeated identical call**: the same tool with the same arguments made more than
   ``context.max_repeated_calls`` times for this goal → stop.
1b. **A refusal that suggests another value** (every call of the round failed, one refusal
   carries a suggestion: a period without data and the latest period with data;
   ``graph.suggestions``, DESIGN §5.6): a question is answered with the refusal's reason; a
   side-effect task asks the user (``interrupt()``) unless the request already accepts the
   suggestion — yes (or accepted) → that tool again, with the suggestion; no → stop.
2. **Distance to goal**: if it did not shrink this round (or the model answered with steps
   missing), the model is told to change approach; after ``MAX_STALLED_ROUNDS`` such rounds
   in a row that taught nothing new → stop (no progress). New reads and a call failing in the
   tool with an error not seen before in the goal are not stalls (rule 3 bounds them); a
   repeated read, the same error again or an early answer are. At distance 0 the model is
   told to answer.
3. **Round cap**: ``context.max_tool_rounds`` rounds for one goal → stop.

Changing strategy is enforced, not only advised (tool masking through ``blocked_tools``): the
side-effect tools that already succeeded for this goal (no second post or reminder), the
side-effect tools no clause of the goal asks for, and tools whose identical call reached the
repeat limit are not offered again; a round of new reads (read-only tools: a schema, a query
the steps need, also one that failed: its error names tables and columns) is neither a stall
nor a reason to narrow the offer; after any other round that did not shrink the distance (or
an early answer), only the tools of the missing
steps are offered and one of them must be called (``must_call_tool``) — except after a step
failed in the tool itself (error kind "tool_error": bad SQL, an unknown column): then only the
read-only tools most relevant to the error (at most ``LOOK_FIRST_TOOLS``, ranked against the
error text) are offered for one round, and the note quotes the error, so the retry is written
with the schema or data (or a tested query) in view; once every step is done, none are
offered, so the model answers.

Update: ``tool_rounds``, ``goal_distance``, ``stalled_rounds``, ``blocked_tools``,
``must_call_tool``, ``progress_note`` (advice placed last in the next prompt), ``artifacts`` (what the goal's
successful calls produced, by each tool's ``artifact_field``), and ``stop_reason`` — set only when the loop must end;
``write_memory`` then tells the user, never as a normal-looking answer.
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
from langgraph.runtime import Runtime
from langgraph.types import interrupt

from graph.claimed_effects import (
    announces_action,
    correct_claims,
    echoed_note,
    none_found_answer,
    repeats_result,
    unbacked_claims,
)
from graph.context import Context
from graph.goal_results import error_text, goal_results, result_summaries, with_assumptions
from graph.progress import (
    artifacts,
    call_signature,
    current_goal_messages,
    missing_steps,
    required_steps,
    succeeded_tools,
    unrequested_side_effects,
)
from graph.resources import get_toolbox
from graph.state import State
from graph.suggestions import (
    Suggestion,
    allowed,
    declined_reason,
    earlier_answer,
    is_yes,
    question_payload,
    retry_note,
    round_suggestions,
    with_answer,
)
from graph.verification import (
    UNVERIFIED_ANSWER,
    Check,
    earlier_answers,
    grounding_readers,
    verify,
)
from tools.selection import rank_tools
from tools.spec import ToolSpec

MAX_STALLED_ROUNDS = 3
# read-only tools offered after a step failed in the tool (look first): the small bundled
# models choose well among two (evals/README.md, embedded models)
LOOK_FIRST_TOOLS = 2
# failures whose error text, when new in the goal, teaches the model the next fix (not a stall)
TEACHING_FAILURES = frozenset({"tool_error", "invalid_value"})


def failure_helpers(reads: list[ToolSpec], failure: str, limit: int = LOOK_FIRST_TOOLS) -> list[str]:
    """The read-only tools most relevant to a failed call's error text (``tools.selection``'s
    ranking; all of ``reads`` when none shares a term with it), at most ``limit``, best first:
    an SQL error ranks the schema and query tools, not whatever the goal's words match."""
    ranked = rank_tools(reads, failure)
    relevant = [spec.name for score, spec in ranked if score > 0][:limit]
    return relevant or [spec.name for spec in reads][:limit]


async def evaluate_progress(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    """Graph node: see the module docstring for the update it returns."""
    context = runtime.context or Context()
    registry = (await get_toolbox(context)).registry
    work = current_goal_messages(state.messages)
    last_ai = next((m for m in reversed(work) if isinstance(m, AIMessage)), None)
    round_calls = [*last_ai.tool_calls, *last_ai.invalid_tool_calls] if last_ai else []
    answered_early = last_ai is not None and not round_calls
    rounds = state.tool_rounds + (0 if answered_early else 1)
    update: dict[str, Any] = {"tool_rounds": rounds}
    specs = registry.specs()
    if produced := artifacts(work, specs):
        update["artifacts"] = produced

    # 0. a side effect whose outcome is unknown: stop, never guess
    round_ids = {c["id"] for c in round_calls}
    unknown = sorted(
        {
            m.name or "?"
            for m in work
            if isinstance(m, ToolMessage)
            and m.tool_call_id in round_ids
            and m.additional_kwargs.get("error_kind") == "outcome_unknown"
        }
    )
    if unknown:
        update["stop_reason"] = (
            f"the outcome of {', '.join(unknown)} is unknown (it timed out or lost its connection after the "
            "request was sent, so it was not run again); check it before asking for it again"
        )
        return update
    # a setting keeps a tool from running (no database, say): no call can fix it, so stop and say it
    for m in work:
        if (
            isinstance(m, ToolMessage)
            and m.tool_call_id in round_ids
            and m.additional_kwargs.get("error_kind") == "configuration"
        ):
            try:
                error = str(json.loads(str(m.content)).get("error") or "")
            except (TypeError, ValueError, AttributeError):
                error = str(m.content)
            update["stop_reason"] = f"{m.name} cannot run: {error[:600]}"
            return update

    # 1. repeated identical calls
    seen: dict[str, int] = {}
    for call in (c for m in work if isinstance(m, AIMessage) for c in m.tool_calls):
        sig = call_signature(call)
        seen[sig] = seen.get(sig, 0) + 1
    for call in last_ai.tool_calls if last_ai else []:
        sig = call_signature(call)
        if seen[sig] > context.max_repeated_calls:
            update["stop_reason"] = (
                f"repeated identical call: {sig[:200]} was made {seen[sig]} times for this goal "
                f"(limit {context.max_repeated_calls}); stopped instead of looping"
            )
            return update

    # 2. distance to goal
    done = succeeded_tools(work)
    required = required_steps(state.goal, specs)
    missing = missing_steps(state.goal, state.messages, specs)
    round_results = [m for m in work if isinstance(m, ToolMessage) and m.tool_call_id in round_ids]
    offers = round_suggestions(work, round_ids)
    if offers and all(m.status == "error" for m in round_results):
        # a refusal naming the value to send instead (a period without data): ask, or go on
        # with it, or answer with its reason — never rounds of retries (DESIGN §5.6)
        side_effect_task = any(s.side_effect for s in specs if s.name in required)
        return {**update, **on_suggestion(state, context, registry.names(), offers[0], side_effect_task, missing)}
    if answered_early and not missing and last_ai is not None:
        # a final answer: grounded, verified, claiming only effects done (DESIGN §5.5)
        return {**update, **judge_answer(state, context, specs, work, last_ai)}
    distance = len(missing)
    all_failed = bool(round_results) and all(m.status == "error" for m in round_results)
    previous = state.goal_distance if state.goal_distance is not None else len(required)
    # a round makes progress when it shrinks the distance; for goals without known steps,
    # when at least one result succeeded
    progressed = (distance < previous) if required else not all_failed
    # a round of new reads (a schema, a query) gathers what the steps need: it neither counts
    # as a stall nor narrows the offer — a failed query too, whose error names the tables and
    # columns (the round cap still bounds them); a repeated read does (rule 1's counts)
    earlier_errors = {
        error_text(m)
        for m in work
        if isinstance(m, ToolMessage) and m.status == "error" and m.tool_call_id not in round_ids
    }
    reading = (
        last_ai is not None
        and bool(required)
        and not progressed
        and bool(round_results)
        and not answered_early
        and bool(last_ai.tool_calls)
        and not last_ai.invalid_tool_calls  # malformed calls read nothing
        and all(
            (s := registry.get(c["name"])) is not None and not s.side_effect and seen.get(call_signature(c), 0) == 1
            for c in last_ai.tool_calls
        )
        # a failed read teaches something only with an error not seen before in the goal
        and all(m.status != "error" or error_text(m) not in earlier_errors for m in round_results)
    )
    # a call that failed in the tool with an error not seen before in this goal taught the
    # model something (the next missing join, say: measured, the 1.5B model fixed one error
    # per attempt), as did a value the tool refused saying what to send; the same error again
    # did not. A stall is a round that taught nothing new; the round cap bounds the rounds that
    # keep teaching something.
    new_failure = (
        all_failed
        and not answered_early
        and all(m.additional_kwargs.get("error_kind") in TEACHING_FAILURES for m in round_results)
        and all(error_text(m) not in earlier_errors for m in round_results)
        and all(seen.get(call_signature(c), 0) == 1 for c in (last_ai.tool_calls if last_ai else []))
    )
    if progressed and not answered_early:
        stalled = 0
    else:
        stalled = state.stalled_rounds if (reading or new_failure) else state.stalled_rounds + 1
    blocked = {n for n in done if (spec := registry.get(n)) is not None and spec.side_effect}
    blocked |= unrequested_side_effects(state.goal, specs)  # never offered for this goal
    blocked |= {sig.split("(", 1)[0] for sig, n in seen.items() if n >= context.max_repeated_calls}
    update.update(goal_distance=distance, stalled_rounds=stalled)
    # a call failed in the tool itself (its data, not its argument shape): the next round must
    # read first. Offered the failed step again, a model at temperature 0 repeats the same call
    # word for word (measured on the embedded models); the read puts what the fix needs (a
    # schema, the data, a test of the query) into the history. Every such failure, not only
    # the first: the step's failures are stalls, so rule 2 still bounds the cycle.
    reads = {s.name for s in specs if not s.side_effect} - blocked
    look_first = (
        all_failed
        and not progressed
        and bool(missing)
        and bool(reads)
        and not answered_early
        and any(m.additional_kwargs.get("error_kind") == "tool_error" for m in round_results)
    )
    refused = all_failed and all(m.additional_kwargs.get("error_kind") == "invalid_value" for m in round_results)

    # answers since the last step done: a model that narrates ("I will now post the report")
    # between steps is told once per step, not once per goal (measured: Qwen2.5-Coder-1.5B)
    last_done = max(
        (i for i, m in enumerate(work) if isinstance(m, ToolMessage) and m.status != "error" and m.name in required),
        default=0,
    )
    answers = [m for m in work[last_done:] if isinstance(m, AIMessage) and not (m.tool_calls or m.invalid_tool_calls)]
    if answered_early and len(answers) >= 2:
        # told once that steps were missing and answered again: keep its answer, say what is missing
        update["stop_reason"] = f"the model answered without doing these steps: {', '.join(missing)}"
        return update
    if stalled >= MAX_STALLED_ROUNDS:
        update["stop_reason"] = f"no progress: {stalled} rounds in a row did not bring the goal closer" + (
            f" (still missing: {', '.join(missing)})" if missing else ""
        )
        return update
    if required and distance == 0:
        blocked |= set(registry.names())
        note = (
            "Every step of the task is done: "
            + "; ".join(result_summaries(work, required))
            + ". Now tell the user in one or two sentences what was done."
        )
    elif answered_early:
        blocked |= set(registry.names()) - set(missing)
        note = (
            f"You answered, but these steps of the task are not done yet: {', '.join(missing)}. Call {missing[0]} now."
        )
    elif reading:
        note = f"Progress: steps still to do: {', '.join(missing)}."
    elif look_first:
        failure = "; ".join(f"{m.name}: {error_text(m)}" for m in round_results)
        helpers = failure_helpers([s for s in specs if s.name in reads], failure)
        blocked |= set(registry.names()) - set(helpers)
        note = (
            f"Progress check: the last call failed ({failure[:400]}). Before trying it again, look up "
            f"what it needs: call {' or '.join(helpers)} now (read-only); then do the missing steps: "
            f"{', '.join(missing)}."
        )
    elif refused and missing:
        # the refusal says what to send: repeat it last in the prompt, next to the retry
        # (measured: with a look-up in between, Qwen2.5-Coder-1.5B sent the refused value again)
        failure = "; ".join(f"{m.name}: {error_text(m)}" for m in round_results)
        blocked |= set(registry.names()) - set(missing)
        note = (
            f"Progress check: the tool refused a value ({failure[:500]}). Call it again now with what the "
            f"error says to send; then do the missing steps: {', '.join(missing)}."
        )
    elif not progressed:
        if missing:
            blocked |= set(registry.names()) - set(missing)
        note = (
            "Progress check: the last round did not bring the goal closer"
            + (" (the tool returned an error; fix the arguments)" if all_failed else "")
            + ". Change approach"
            + (f": do the missing steps: {', '.join(missing)}" if missing else "")
            + "."
        )
    else:
        note = f"Progress: steps still to do: {', '.join(missing)}." if missing else ""
    if not look_first:
        blocked -= set(missing)
    # after a step is done, call_model forces the next call itself while a step is missing
    must_call = bool(missing) and (answered_early or not progressed)  # reading: still act next
    update.update(blocked_tools=sorted(blocked), progress_note=note, must_call_tool=must_call)

    # 3. round cap
    if rounds >= context.max_tool_rounds:
        update["stop_reason"] = (
            f"tool-round cap reached: {rounds} rounds for this goal (limit {context.max_tool_rounds})"
        )
    return update


def on_suggestion(
    state: State, context: Context, names: list[str], offer: Suggestion, side_effect_task: bool, missing: list[str]
) -> dict[str, Any]:
    """The update after a round whose refusals carry a suggestion (``graph.suggestions``):

    * a question (no side-effect step): the answer is the refusal's reason — no data for the
      period asked, and the latest period with data — and the turn ends (no model call);
    * a side-effect task whose request accepts the suggestion, or whose user said yes to it
      earlier in this goal: the model must call the tool again with it (only that tool offered);
    * otherwise the user is asked (``interrupt()``; a run a reminder started has nobody to ask
      and stops): yes → as above, the answer recorded on the refused result; no → stop, saying so.

    Each call again is bounded as before: the repeat limit (rule 1) and the round cap."""
    if not side_effect_task:
        reply = offer.reason or offer.error[:600]
        return {
            "messages": [AIMessage(reply, name="hermes", id=f"suggested-{offer.message.id or offer.tool}")],
            "progress_note": "",
            "must_call_tool": False,
            "blocked_tools": sorted(names),
        }
    update: dict[str, Any] = {"goal_distance": len(missing), "stalled_rounds": state.stalled_rounds}
    answer = earlier_answer(current_goal_messages(state.messages), offer)
    if answer is None and allowed(context.on_behalf_of if context.fired_reminder else state.goal, offer):
        why = "The request asks for this (its words accept the suggested value)"
    elif answer is None and context.fired_reminder:
        return {**update, "stop_reason": declined_reason(offer, None)}
    elif answer is None:
        answer = interrupt(question_payload(offer))
        update["messages"] = [with_answer(offer, answer)]
        if not is_yes(answer):
            return {**update, "stop_reason": declined_reason(offer, answer)}
        why = "The user agreed"
    elif is_yes(answer):
        why = "The user agreed earlier"
    else:
        return {**update, "stop_reason": declined_reason(offer, answer)}
    update.update(
        blocked_tools=sorted(set(names) - {offer.tool}),
        must_call_tool=True,
        progress_note=retry_note(offer, why, missing),
    )
    if state.tool_rounds + 1 >= context.max_tool_rounds:
        update["stop_reason"] = (
            f"tool-round cap reached: {state.tool_rounds + 1} rounds for this goal (limit {context.max_tool_rounds})"
        )
    return update


def judge_answer(
    state: State, context: Context, specs: list[ToolSpec], work: list[AnyMessage], answer: AIMessage
) -> dict[str, Any]:
    """The verdict on a final answer (no step missing), as a state update (DESIGN §5.5):

    * not grounded (a question about data answered without a data read): back to the model once
      with only the read-only data tools offered and a call required; a second time, stop;
    * a figure or a "none" its results do not support: back to the model once with what is
      unsupported; a second time, stop with :data:`UNVERIFIED_ANSWER` (``write_memory`` then
      gives the honest "could not establish" answer);
    * accepted: ``progress_note`` "" (the route to ``write_memory``); an answer claiming an effect
      that no successful call shows is replaced by a corrected one (a Hermes message) saying
      what was and was not done.

    Each send-back is an early answer for the stall count, and none goes past the round cap."""
    said = answer.content if isinstance(answer.content, str) else ""
    results = goal_results(work, specs)
    blocked = set(state.blocked_tools) | unrequested_side_effects(state.goal, specs)
    # the read-only data tools, whatever the last round blocked (all tools once the steps are
    # done): the repeat limit (rule 1) still bounds each call
    readers = grounding_readers(state.goal, work, specs)

    def verdict(text: str, upto: int) -> Check:
        return verify(text, state.goal, state.intent, goal_results(work[:upto], specs), specs, work[:upto])

    # a question whose answer repeats the note of a read that found nothing: that is the answer
    # ("there is none"), told in the user's terms (not the note's advice), if it passes the checks
    empty = [r.note for r in results if r.is_data_read and r.empty and not r.unexpected_empty and r.note]
    required = required_steps(state.goal, specs)
    if not required and (note := echoed_note(said, empty)) and verdict(told := none_found_answer(note), len(work)).ok:
        found = AIMessage(told, name="hermes", id=f"none-found-{answer.id or len(work)}")
        return {"progress_note": "", "must_call_tool": False, "stalled_rounds": 0, "messages": [found]}
    check = verdict(said, len(work))
    if check.ok:
        update: dict[str, Any] = {"progress_note": "", "must_call_tool": False, "stalled_rounds": 0}
        unbacked = unbacked_claims(said, specs, sorted({r.name for r in results}))
        effects = list(dict.fromkeys(r.name for r in results if r.side_effect))
        told = with_assumptions(correct_claims(said, unbacked, effects) if unbacked else said, results)
        if told != said:
            update["messages"] = [AIMessage(told, name="hermes", id=f"corrected-{answer.id or len(work)}")]
        return update
    if required and check.grounded:
        # every step of the task is done and only the closing sentence states what no result
        # shows ("at 9 AM" for 21:00, say): the steps' own summaries say what was done —
        # grounded by construction, at no model call (measured: sent back, the 1.5B model
        # answered "I could not establish the figure 9" after all three steps had succeeded)
        summary = "Done: " + "; ".join(result_summaries(work, set(required))) + "."
        return {
            "progress_note": "",
            "must_call_tool": False,
            "stalled_rounds": 0,
            "messages": [AIMessage(summary, name="hermes", id=f"summarised-{answer.id or len(work)}")],
        }
    # the same kind of problem in an earlier answer of this goal: it was sent back once already
    before = [verdict(str(work[i].content), i) for i in earlier_answers(work)[:-1]]
    # announcing the next step ("I will now query …") or repeating a tool's note is a narration:
    # sent to read again, a call required, no stall of its own (the round and repeat caps bound it)
    narration = announces_action(said) or repeats_result(said, [r.note for r in results])
    again = not narration and (
        (not check.grounded and any(not b.grounded for b in before))
        or (check.grounded and any(b.grounded and not b.ok for b in before))
    )
    stalled = state.stalled_rounds + (0 if narration else 1)
    problems = "; ".join(check.problems())
    if (
        again
        or stalled >= MAX_STALLED_ROUNDS
        or state.tool_rounds >= context.max_tool_rounds
        or ((not check.grounded or narration) and not readers)
    ):
        return {
            "stop_reason": f"{UNVERIFIED_ANSWER}: {'; '.join(check.problems(quote=False))}",
            "stalled_rounds": stalled,
        }
    if narration or not check.grounded:
        why = (
            f"Your reply is no answer (it describes a step or repeats a tool's note): {problems}. Do what the "
            "results say now: call"
            if narration
            else f"Your answer is not grounded: {problems}. Read the data the answer needs first: call"
        )
        return {
            "stalled_rounds": stalled,
            "blocked_tools": sorted({s.name for s in specs} - set(readers)),
            "must_call_tool": True,
            "progress_note": f"{why} {' or '.join(readers[:3])} now, then answer from its rows only.",
        }
    # a figure no result states, over a read of several rows: computed by hand (measured: seven
    # invoice totals summed to 13,868 and to 5,678) — the tool computes it, so a call is required
    by_hand = bool(check.figures) and any(
        r.is_data_read and isinstance(r.data, dict) and len(r.data.get("rows") or []) > 1 for r in results
    )
    # a key for a name, a figure over every date, a "none" no empty read found, a value the
    # request names that no read restricted to: only a new read
    # can mend these, so a call is required (measured: sent back without one, the model repeated
    # "agent_id 3" word for word)
    if (by_hand or check.needs_read) and readers:
        how = (
            "A total, average or count over several rows is computed by the tool, never by hand"
            if by_hand
            else "Only a new read can answer it"
        )
        return {
            "stalled_rounds": stalled,
            "blocked_tools": sorted({s.name for s in specs} - set(readers)),
            "must_call_tool": True,
            "progress_note": (
                f"Your answer is not supported by the tool results of this request: {problems}. {how}: call "
                f"{' or '.join(readers[:3])} now so that its result states what the answer needs, then answer with it."
            ),
        }
    return {
        "stalled_rounds": stalled,
        "blocked_tools": sorted(blocked | {s.name for s in specs if s.side_effect}),
        "must_call_tool": False,
        "progress_note": (
            f"Your answer is not supported by the tool results of this request: {problems}. Answer again "
            "stating only figures and names that are in the results (or read what is missing); a total, "
            "average or count that no result states is computed by the tool (ask for it in the call), "
            "never by hand; if the data does not tell, say you could not establish it."
        ),
    }
