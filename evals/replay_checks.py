"""Replay a data-suite report through the answer checks of this tree, without a model:
``python -m evals.replay_checks evals/reports/data/<run> [...]``.

For each run of the report that ended with an answer (stop reason ``answered``), the goal's
tool calls are rebuilt from its transcript: every ``query_database`` call runs again, with the
database tools of this tree, on the same database (the report's ``--database`` file, or the
suite's database of that name built again — the generated ones are dated from today, so replay
them the day they ran), and every other tool's result is taken as the transcript recorded it.
Then :func:`graph.verification.verify` checks the run's final answer as ``evaluate_progress``
would. Prints, per verdict the run had (correct, wrong), how many answers the checks accept
and which they send back, with the reasons.

What it measures: whether a check added after a run would have sent its answers back — a check
that rejects a correct answer costs that question (the model is asked again, then the run stops
honest-unsure); one that rejects a wrong answer turns it into another try or an honest stop.
What it does not: what the model would have answered when sent back (only a run with the model
tells that). Exit 1 when a report cannot be read.
"""

from __future__ import annotations

import collections
import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage

from evals.suites.data import make_database
from graph.goal_results import goal_results
from graph.verification import verify
from tools.builtin.catalog import BUILTIN_TOOLS
from tools.builtin.database import query_database
from tools.database_setting import DatabaseError


@dataclass
class Replayed:
    """One run replayed: its id, the verdict it had, and what the checks of this tree say of
    its final answer ([] when they accept it)."""

    id: str
    verdict: str
    answer: str
    problems: list[str] = field(default_factory=list)


def _messages(prompt: str, transcript: Path, database: Path) -> list[AnyMessage]:
    """The goal's messages: the request, each tool call and its result (``query_database``
    run again on ``database``; any other result as recorded)."""
    recorded: dict[str, ToolMessage] = {}
    calls: list[dict[str, Any]] = []
    for line in transcript.read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        if event.get("kind") != "message":
            continue
        if event.get("role") == "ai":
            calls += [c for c in event.get("tool_calls") or [] if isinstance(c, dict) and c.get("id")]
        elif event.get("role") == "tool" and event.get("tool_call_id"):
            recorded[event["tool_call_id"]] = ToolMessage(
                str(event.get("content", "")),
                tool_call_id=event["tool_call_id"],
                name=event.get("name"),
                status="error" if event.get("status") == "error" else "success",
            )
    out: list[AnyMessage] = [HumanMessage(prompt)]
    for call in calls:
        out.append(AIMessage("", tool_calls=[{"id": call["id"], "name": call["name"], "args": call.get("args") or {}}]))
        if call["name"] == "query_database":
            try:
                data = query_database(str((call.get("args") or {}).get("sql", "")), database=str(database))
                content = json.dumps({"status": "ok", "summary": "query_database", "data": data}, default=str)
                out.append(ToolMessage(content, tool_call_id=call["id"], name=call["name"]))
            except DatabaseError as exc:
                content = json.dumps({"status": "error", "error": str(exc)})
                out.append(ToolMessage(content, tool_call_id=call["id"], name=call["name"], status="error"))
        elif call["id"] in recorded:
            out.append(recorded[call["id"]])
    return out


def replay(report: Path, databases: dict[str, Path], root: Path) -> list[Replayed]:
    """Every answered, scored run of ``report`` replayed (module docstring). ``databases``:
    ``{name: file}`` given or built so far (filled in, built under ``root``). Raises OSError or
    ValueError for an unreadable report."""
    # a run cut short has no summary: its databases are then the suite's own
    summary_file = report / "summary.json"
    summary = json.loads(summary_file.read_text(encoding="utf-8")) if summary_file.exists() else {}
    user_db = (summary.get("config") or {}).get("database") or ""
    specs = [spec for spec, _ in BUILTIN_TOOLS]  # the post_message of a flagship run is a builtin too
    out: list[Replayed] = []
    for line in (report / "results.jsonl").read_text(encoding="utf-8").splitlines():
        run = json.loads(line)
        if run.get("stop_reason") != "answered" or run.get("verdict") not in ("correct", "wrong"):
            continue
        name = str(run["db"])
        if name not in databases:
            databases[name] = Path(user_db) if user_db else make_database(name, root)
        work = _messages(str(run["prompt"]), report / str(run["transcript"]), databases[name])
        check = verify(str(run["answer"]), str(run["prompt"]), "question", goal_results(work, specs), specs, work)
        out.append(
            Replayed(str(run["id"]), str(run["verdict"]), str(run["answer"]), [] if check.ok else check.problems())
        )
    return out


def main(
    reports: Annotated[list[Path], typer.Argument(help="Report folders of `python -m evals data`.")],
    database: Annotated[
        list[str], typer.Option(help="NAME=PATH: the database a report's runs named NAME read (repeatable).")
    ] = [],  # noqa: B006 - typer reads the default
) -> None:
    """Replay data-suite reports through this tree's answer checks (no model)."""
    given = {n: Path(p) for n, _, p in (d.partition("=") for d in database)}
    tally: collections.Counter[tuple[str, str]] = collections.Counter()
    with tempfile.TemporaryDirectory(prefix="hermes-replay-") as tmp:
        for report in reports:
            try:
                runs = replay(report, dict(given), Path(tmp))
            except (OSError, ValueError, KeyError) as exc:
                typer.echo(f"error: cannot replay {report}: {exc}", err=True)
                raise typer.Exit(1) from exc
            for r in runs:
                tally[(r.verdict, "sent back" if r.problems else "accepted")] += 1
                if r.problems:
                    typer.echo(f"{r.verdict:8} {r.id}: {r.answer[:80]!r}\n         -> {'; '.join(r.problems)[:400]}")
    for verdict in ("correct", "wrong"):
        typer.echo(
            f"{verdict}: {tally[(verdict, 'accepted')]} accepted, {tally[(verdict, 'sent back')]} sent back by the checks"
        )


if __name__ == "__main__":
    typer.run(main)
