"""Benchmark: the layered context window over a scripted 200-turn session (seed §1.2, DESIGN §1.2).

The session plants facts early ("the warehouse code for Lyon is LY-4471"), then runs 190 turns
of mixed work — sales queries with tool calls and large tool results, team-chat posts,
reminders, small talk — and every 10th turn asks about one planted fact. Per turn it measures
the prompt tokens (approximate count, same counter everywhere) of:

* **hermes** — ``graph.window.select_window`` + the system turn, at the budget;
* **naive** — every message appended;
* **trim_last** — LangChain ``trim_messages(strategy="last")`` at the same budget;

and, on question turns, **needle recall**: is the planted message in the window.

    python -m evals.bench_context_window [--turns 200] [--budget 3000]

Targets: at turn 200, hermes ≤ 10% of naive tokens with ≥ 95% needle recall. Writes
``evals/out/context_window.json``, ``evals/out/context_window.png`` and prints a table.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage, trim_messages
from langchain_core.messages.utils import count_tokens_approximately

from graph.intent import tag_intent
from graph.window import select_window
from nodes.assemble_context import SYSTEM_PROMPT

FACTS = [
    ("warehouse code for Lyon", "LY-4471"), ("budget owner for marketing", "Ines Moreau"),
    ("VPN gateway for the Osaka office", "vpn-osk-02"), ("account number of the supplier Fabrikam", "FB-90317"),
    ("preferred report format of the CFO", "one-page PDF"), ("SLA for priority-1 tickets", "4 hours"),
    ("project code name for the mobile app", "Bluefin"), ("discount agreed with Contoso", "12 percent"),
    ("backup window for the sales database", "02:00-03:00 UTC"), ("team channel for incidents", "ops-911"),
]
REGIONS = ["north", "south", "east", "west", "central"]


def build_session(turns: int, seed: int = 7) -> list[tuple[list, str | None]]:
    """``[(messages of the turn, needle message id asked about or None)]``."""
    rng = random.Random(seed)
    session: list[tuple[list, str | None]] = []
    for i, (what, value) in enumerate(FACTS):
        session.append(([HumanMessage(f"Please remember: the {what} is {value}.", id=f"fact{i}"),
                         AIMessage(f"Noted, the {what} is {value}.", id=f"fact{i}-ack")], None))
    t = len(session)
    while t < turns:
        t += 1
        if t % 10 == 0:
            k = rng.randrange(len(FACTS))
            what, _ = FACTS[k]
            session.append(([HumanMessage(f"What was the {what} I told you?", id=f"q{t}"),
                             AIMessage(f"It is {FACTS[k][1]}.", id=f"q{t}-a")], f"fact{k}"))
            continue
        kind = rng.choice(["query", "query", "post", "remind", "chat"])
        if kind == "query":
            region = rng.choice(REGIONS)
            rows = [[f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}", region, rng.randint(100, 9999)] for _ in range(40)]
            call = {"name": "query_database", "args": {"sql": f"SELECT day, region, revenue FROM sales WHERE region = '{region}'"}, "id": f"c{t}"}
            session.append(([HumanMessage(f"Show daily revenue for the {region} region.", id=f"h{t}"),
                             AIMessage("", tool_calls=[call], id=f"a{t}"),
                             ToolMessage(json.dumps({"status": "ok", "summary": "query_database: 40 rows", "data": {"columns": ["day", "region", "revenue"], "rows": rows}}), tool_call_id=f"c{t}", name="query_database", id=f"r{t}"),
                             AIMessage(f"The {region} region had {sum(r[2] for r in rows)} in revenue over 40 days.", id=f"f{t}")], None))
        elif kind == "post":
            call = {"name": "post_message", "args": {"channel": "project", "text": f"Update {t}: numbers are in."}, "id": f"c{t}"}
            session.append(([HumanMessage(f"Post update {t} to the project channel.", id=f"h{t}"),
                             AIMessage("", tool_calls=[call], id=f"a{t}"),
                             ToolMessage(json.dumps({"status": "ok", "summary": "post_message: id=%d" % t, "data": {"id": t, "channel": "project"}}), tool_call_id=f"c{t}", name="post_message", id=f"r{t}"),
                             AIMessage("Posted.", id=f"f{t}")], None))
        elif kind == "remind":
            session.append(([HumanMessage(f"Remind me monthly about item {t}.", id=f"h{t}"),
                             AIMessage(f"Reminder {t} set for the 1st of every month.", id=f"f{t}")], None))
        else:
            session.append(([HumanMessage(rng.choice(["thanks!", "how are you today?", "nice, carry on", "ok"]), id=f"h{t}"),
                             AIMessage("Happy to help.", id=f"f{t}")], None))
    return session


def run(turns: int, budget: int) -> dict:
    session = build_session(turns)
    system = SystemMessage(SYSTEM_PROMPT)
    sys_tokens = count_tokens_approximately([system])
    history: list = []
    rows = []
    hits = {"hermes": 0, "trim_last": 0}
    questions = 0
    for index, (messages, needle) in enumerate(session, start=1):
        question = messages[0]
        history.append(question)
        query = question.content
        window = select_window(history, budget, sys_tokens, query=query, intent=tag_intent(query))
        trimmed = trim_messages(history, strategy="last", max_tokens=budget - sys_tokens,
                                token_counter=count_tokens_approximately, start_on="human", allow_partial=False)
        row = {
            "turn": index,
            "hermes": sys_tokens + count_tokens_approximately(window),
            "naive": sys_tokens + count_tokens_approximately(history),
            "trim_last": sys_tokens + count_tokens_approximately(trimmed),
        }
        if needle:
            questions += 1
            row["needle_hermes"] = needle in {m.id for m in window}
            row["needle_trim_last"] = needle in {m.id for m in trimmed}
            hits["hermes"] += row["needle_hermes"]
            hits["trim_last"] += row["needle_trim_last"]
        rows.append(row)
        history.extend(messages[1:])
    last = rows[-1]
    return {
        "turns": turns,
        "budget_tokens": budget,
        "at_last_turn": {k: last[k] for k in ("hermes", "naive", "trim_last")},
        "hermes_vs_naive": round(last["hermes"] / last["naive"], 4),
        "needle_questions": questions,
        "needle_recall": {k: round(v / questions, 3) for k, v in hits.items()},
        "targets": {"hermes_vs_naive": "<= 0.10", "needle_recall_hermes": ">= 0.95"},
        "rows": rows,
    }


def plot(report: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = report["rows"]
    turns = [r["turn"] for r in rows]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for key, style in (("naive", "-"), ("trim_last", "--"), ("hermes", "-")):
        ax.plot(turns, [r[key] for r in rows], style, label=key)
    ax.set_yscale("log")
    ax.set_xlabel("turn")
    ax.set_ylabel("prompt tokens (approx.)")
    recall = report["needle_recall"]
    ax.set_title(f"Context window over {report['turns']} turns, budget {report['budget_tokens']} — "
                 f"needle recall hermes {recall['hermes']:.0%}, trim_last {recall['trim_last']:.0%}", fontsize=9)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--budget", type=int, default=3000)
    args = parser.parse_args()
    report = run(args.turns, args.budget)
    out = Path(__file__).parent / "out"
    out.mkdir(exist_ok=True)
    (out / "context_window.json").write_text(json.dumps(report, indent=2))
    plot(report, out / "context_window.png")
    print(f"{'turn':>6} {'hermes':>8} {'naive':>8} {'trim_last':>10}")
    for row in report["rows"]:
        if row["turn"] in (1, 10, 25, 50, 100, 150, 200) or row["turn"] == report["turns"]:
            print(f"{row['turn']:>6} {row['hermes']:>8} {row['naive']:>8} {row['trim_last']:>10}")
    print(f"hermes / naive at turn {report['turns']}: {report['hermes_vs_naive']:.1%} (target ≤ 10%)")
    print(f"needle recall over {report['needle_questions']} questions: {report['needle_recall']} (target hermes ≥ 95%)")


if __name__ == "__main__":
    main()
