"""``hermes memory list|search|show|forget|consolidate``: see, search and remove what Hermes
remembers of a user (episodic events and semantic facts), and run the ``consolidate`` graph
from the CLI (once, or ``--every 30m``: the CLI's schedule; the server uses its cron).

References: ``episodic:<id>`` or ``semantic:<id>`` (as ``list`` and ``search`` print them); a
bare id is looked up in both. ``--user`` defaults to ``HERMES_USER_ID`` (``default``).
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any, Literal, cast

import typer
from rich.markup import escape
from rich.table import Table

from graph.cli.common import DATA_DIR_OPT, app, guarded, report_error, run_sync
from graph.cli.render import console, err_console, print_table

if TYPE_CHECKING:  # the memory service (LanceDB, the embedder) loads inside the commands that use it
    from collections.abc import Awaitable, Callable

    from graph.context import Context
    from memory.branch_origins import Inactive
    from memory.episodic.base import EpisodicEvent
    from memory.semantic_model import Fact
    from memory.service import MemoryService

memory_app = typer.Typer(
    help="Memory: list, search, show and forget what Hermes remembers; run consolidation.", no_args_is_help=True
)
app.add_typer(memory_app, name="memory")

USER_OPT = typer.Option(None, "--user", help="Whose memory (default: HERMES_USER_ID, 'default').")
JSON_OPT = typer.Option(False, "--json", help="Print JSON.")


def memory_context(data_dir: str | None, user: str | None, **extra: Any) -> Context:
    """Settings of a memory command (options over ``HERMES_*``), or exit 1 on a bad setting."""
    from graph.context import Context

    overrides: dict[str, Any] = {k: v for k, v in {"data_dir": data_dir, "user_id": user, **extra}.items() if v}
    try:
        return Context(**overrides)
    except ValueError as exc:
        raise typer.Exit(report_error(exc, str(exc))) from None


async def opened_memory(context: Context) -> MemoryService:
    """The memory service, its store checked and an earlier release's migrated
    (``MemoryService.ready``: a damaged or newer ``memory.db`` is one error line)."""
    from graph.resources import get_memory

    mem = get_memory(context)
    await mem.ready()
    return mem


def _event_json(event: EpisodicEvent) -> dict[str, Any]:
    from memory.provenance import source_of

    # where its words came from: only "user" is the user's own (memory.provenance)
    return {
        "ref": f"episodic:{event.id}",
        **event.model_dump(mode="json"),
        "source": source_of(event.kind, event.metadata),
    }


def _fact_json(fact: Fact) -> dict[str, Any]:
    from memory.provenance import fact_source

    return {"ref": f"semantic:{fact.id}", **fact.as_dict(), "source": fact_source(fact.evidence)}


#: What ``list`` says of a memory written by a turn no longer on its session's active branch.
INACTIVE_BRANCH = "inactive branch"


def _event_branch(event: EpisodicEvent, inactive: Inactive) -> str:
    """``"inactive"`` for an event written only on branches of its session that are not
    active (a rollback, a switch, a fork left them), else ``"active"``."""
    meta = event.metadata or {}
    shown = inactive.visible((meta.get("thread_id"), meta.get("origin_message_id")), event.id)
    return "active" if shown else "inactive"


def _fact_branch(fact: Fact, inactive: Inactive) -> str:
    thread, _, message = (fact.origin or "").partition("\x00")
    return "active" if inactive.visible((thread, message)) else "inactive"


def _why_trusted(event: EpisodicEvent) -> str:
    """For a task memory: the evidence it was written on (the checks it passed, the tool results
    it rests on: ``tool#call id``, request id, payload handle) and what it superseded, as rich
    markup lines (DESIGN §4.4, §5.5); "" for other kinds."""
    meta = event.metadata or {}
    if event.kind != "task":
        return ""
    lines = [f"why: {'; '.join(str(w) for w in meta.get('evidence') or []) or 'no evidence recorded'}"]
    lines += [f"supersedes {s.get('ref', '?')}" for s in meta.get("supersedes") or [] if isinstance(s, dict)]
    return "".join(f"\n[dim]{escape(line[:600])}[/dim]" for line in lines)


def _run(coro_factory: Callable[[], Awaitable[Any]], context: Context, json_out: bool = False) -> None:
    code = run_sync(guarded(coro_factory, context, json_out=json_out))
    if code:
        raise typer.Exit(code)


@memory_app.command("list")
def memory_list(
    user: str = USER_OPT,
    kind: list[str] = typer.Option(None, "--kind", help="Episodic kinds only (task, preference, ...); repeatable."),
    layer: str = typer.Option("all", "--layer", help="episodic | semantic | all"),
    limit: int = typer.Option(50, min=1, max=10_000, help="At most this many of each layer."),
    include_old: bool = typer.Option(
        False,
        "--all",
        help="Also expired / superseded / archived records, and those written on an inactive branch (marked).",
    ),
    data_dir: str = DATA_DIR_OPT,
    json_out: bool = JSON_OPT,
) -> None:
    """What Hermes remembers of the user, newest first: episodic events and semantic facts
    with their type, date, confidence, evidence and status. Memories written by turns that are
    no longer on their session's active branch (a rollback, a switch, a fork) are not recalled
    and not listed; ``--all`` lists them marked "inactive branch" (JSON: ``"branch": "inactive"``)."""
    if layer not in ("episodic", "semantic", "all"):
        raise typer.Exit(report_error(None, f"--layer must be episodic, semantic or all, got {layer!r}"))
    context = memory_context(data_dir, user)

    async def go() -> None:
        mem = await opened_memory(context)
        inactive = await mem.inactive_origins()
        # the hidden ones are dropped after the read: read that many more (one turn: a few records)
        extra = 0 if include_old else 10 * len(inactive)
        events = (
            []
            if layer == "semantic"
            else await mem.episodic.list(
                context.user_id, kinds=kind or None, limit=limit + extra, include_expired=include_old
            )
        )
        statuses = ("confirmed", "pending", "superseded", "archived") if include_old else ("confirmed", "pending")
        facts = (
            []
            if layer == "episodic"
            else await mem.semantic.facts(context.user_id, statuses=statuses, limit=limit + extra)
        )
        event_branch = {e.id: _event_branch(e, inactive) for e in events}
        fact_branch = {f.id: _fact_branch(f, inactive) for f in facts}
        if not include_old:
            events = [e for e in events if event_branch[e.id] == "active"][:limit]
            facts = [f for f in facts if fact_branch[f.id] == "active"][:limit]
        if json_out:
            print(
                json.dumps(
                    {
                        "user_id": context.user_id,
                        "episodic": [{**_event_json(e), "branch": event_branch[e.id]} for e in events],
                        "semantic": [{**_fact_json(f), "branch": fact_branch[f.id]} for f in facts],
                    },
                    ensure_ascii=False,
                )
            )
            return
        hidden = sum(b == "inactive" for b in [*event_branch.values(), *fact_branch.values()])
        note = f"{hidden} more written on an inactive branch (not recalled): --all lists them"
        if not events and not facts:
            console.print(f"nothing remembered for user {context.user_id!r} in {context.data_dir}")
            if hidden and not include_old:
                console.print(note, highlight=False, markup=False)
            return
        from memory.provenance import SOURCE_LABELS, fact_source, source_of

        table = Table("ref", "kind / status", "source", "date", "conf.", "memory")
        table.columns[0].no_wrap = True
        for f in facts:
            table.add_row(
                f"semantic:{f.id[:8]}",
                f.status + (f" · {INACTIVE_BRANCH}" if fact_branch[f.id] == "inactive" else ""),
                SOURCE_LABELS[fact_source(f.evidence)],
                f.valid_from.date().isoformat(),
                f"{f.confidence:.2f}",
                escape(f.statement),
            )
        for e in events:
            table.add_row(
                f"episodic:{e.id[:8]}",
                e.kind + (f" · {INACTIVE_BRANCH}" if event_branch[e.id] == "inactive" else ""),
                SOURCE_LABELS[source_of(e.kind, e.metadata)],
                e.created_at.date().isoformat(),
                f"{e.confidence:.2f}",
                escape(e.text[:200]) + _why_trusted(e),
            )
        print_table(table)
        if hidden and not include_old:
            console.print(note, highlight=False, markup=False)

    _run(go, context, json_out)


@memory_app.command("search")
def memory_search(
    query: str = typer.Argument(..., help="What to look for (words, CJK text, emoji)."),
    user: str = USER_OPT,
    k: int = typer.Option(10, min=1, max=200, help="Hits at most."),
    kind: list[str] = typer.Option(None, "--kind", help="Episodic kinds only; repeatable."),
    mode: str = typer.Option("hybrid", help="hybrid | keyword | vector"),
    data_dir: str = DATA_DIR_OPT,
    json_out: bool = JSON_OPT,
) -> None:
    """Search the user's memories the way recall does (hybrid × time decay) plus matching
    facts. A query with nothing searchable (only punctuation) finds nothing. A memory written
    on an inactive branch (not recalled) is marked "inactive branch" (JSON: ``"branch"``)."""
    if mode not in ("hybrid", "keyword", "vector"):
        err_console.print("[red]error:[/red] --mode must be hybrid, keyword or vector")
        raise typer.Exit(1)
    search_mode = cast(Literal["hybrid", "keyword", "vector"], mode)  # checked above
    context = memory_context(data_dir, user)

    async def go() -> None:
        mem = await opened_memory(context)
        hits = await mem.episodic.search(context.user_id, query, k, kinds=kind or None, mode=search_mode)
        facts = await mem.semantic.search(context.user_id, query, k)
        inactive = await mem.inactive_origins()
        branch = {h.event.id: _event_branch(h.event, inactive) for h in hits}
        branch.update({f.id: _fact_branch(f, inactive) for f in facts})
        mark = {i: f"  [{INACTIVE_BRANCH}]" if b == "inactive" else "" for i, b in branch.items()}
        if json_out:
            print(
                json.dumps(
                    {
                        "episodic": [
                            {
                                **_event_json(h.event),
                                "score": h.score,
                                "relevance": h.relevance,
                                "decay": h.decay,
                                "branch": branch[h.event.id],
                            }
                            for h in hits
                        ],
                        "semantic": [{**_fact_json(f), "branch": branch[f.id]} for f in facts],
                    },
                    ensure_ascii=False,
                )
            )
            return
        from memory.retrieval import format_episode, format_fact
        from memory.text import has_searchable

        if not hits and not facts:
            console.print("no memory matches" + ("" if has_searchable(query) else " (nothing searchable in the query)"))
            return
        for f in facts:
            console.print(f"semantic:{f.id[:8]}  {format_fact(f)}{mark[f.id]}", highlight=False, markup=False)
        for h in hits:
            console.print(
                f"episodic:{h.event.id[:8]}  score {h.score:.3f}  {format_episode(h)}{mark[h.event.id]}",
                highlight=False,
                markup=False,
            )

    _run(go, context, json_out)


async def _resolve(mem: MemoryService, user_id: str, ref: str) -> tuple[str, Any]:
    """``ref`` (full id, or a unique prefix as printed) → ("episodic" | "semantic", record)."""
    layer, _, ident = ref.partition(":") if ":" in ref else ("", "", ref)
    found: list[tuple[str, Any]] = []
    if layer in ("", "episodic"):
        event = await mem.episodic.get(user_id, ident)
        if event is not None:
            return "episodic", event
        found += [
            ("episodic", e)
            for e in await mem.episodic.list(user_id, limit=100_000, include_expired=True)
            if e.id.startswith(ident)
        ]
    if layer in ("", "semantic"):
        fact = await mem.semantic.get(user_id, ident)
        if fact is not None:
            return "semantic", fact
        found += [
            ("semantic", f)
            for f in await mem.semantic.facts(
                user_id, statuses=("confirmed", "pending", "superseded", "archived"), limit=100_000
            )
            if f.id.startswith(ident)
        ]
    if len(found) == 1:
        return found[0]
    raise LookupError(
        f"no memory {ref!r} of user {user_id!r}"
        if not found
        else f"{ref!r} is ambiguous ({len(found)} memories): give more of the id"
    )


@memory_app.command("show")
def memory_show(
    ref: str = typer.Argument(..., help="episodic:<id> or semantic:<id> (a unique prefix is enough)."),
    user: str = USER_OPT,
    data_dir: str = DATA_DIR_OPT,
    json_out: bool = JSON_OPT,
) -> None:
    """One memory in full: every field, and for a fact its evidence episodes and conflict."""
    context = memory_context(data_dir, user)

    async def go() -> None:
        mem = await opened_memory(context)
        try:
            layer, record = await _resolve(mem, context.user_id, ref)
        except LookupError as exc:
            raise typer.Exit(report_error(exc, str(exc))) from None
        data = _event_json(record) if layer == "episodic" else _fact_json(record)
        if layer == "semantic":
            data["evidence_episodes"] = [
                _event_json(e) for i in record.sources if (e := await mem.episodic.get(context.user_id, i)) is not None
            ]
        if json_out:
            print(json.dumps(data, ensure_ascii=False))
            return
        from memory.retrieval import format_episode, format_fact

        console.print(
            format_episode(record) if layer == "episodic" else format_fact(record), highlight=False, markup=False
        )
        for key, value in data.items():
            if key != "evidence_episodes":
                console.print(f"  {key}: {value}", highlight=False, markup=False)
        for e in data.get("evidence_episodes", []):
            console.print(f"  evidence {e['ref']}: {e['text']}", highlight=False, markup=False)

    _run(go, context, json_out)


@memory_app.command("forget")
def memory_forget(
    ref: str = typer.Argument(..., help="episodic:<id> or semantic:<id> (a unique prefix is enough)."),
    user: str = USER_OPT,
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    data_dir: str = DATA_DIR_OPT,
) -> None:
    """Delete one memory for good (it is never recalled again)."""
    context = memory_context(data_dir, user)

    async def go() -> None:
        mem = await opened_memory(context)
        try:
            layer, record = await _resolve(mem, context.user_id, ref)
        except LookupError as exc:
            raise typer.Exit(report_error(exc, str(exc))) from None
        text = record.text if layer == "episodic" else record.statement
        if not yes and not typer.confirm(f"forget {layer}:{record.id}: {text[:120]!r}?", default=False):
            console.print("kept")
            return
        await mem.forget(context.user_id, f"{layer}:{record.id}")
        console.print(f"forgot {layer}:{record.id}", highlight=False, markup=False)

    _run(go, context)


def parse_every(value: str) -> float:
    """``"30m"`` / ``"90s"`` / ``"1h"`` → seconds (> 0)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", value or "")
    if not m or float(m.group(1)) <= 0:
        raise typer.BadParameter("give a duration like 30m, 90s or 1h")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]


@memory_app.command("consolidate")
def memory_consolidate(
    now: str = typer.Option("", "--now", help="ISO-8601 clock of the run (default: now)."),
    lookback_minutes: int = typer.Option(60, min=1, help="Scan episodes created this long before now."),
    every: str = typer.Option("", "--every", help="Keep running, e.g. 30m (the CLI's schedule; Ctrl-C stops)."),
    times: int = typer.Option(0, min=0, help="With --every: stop after this many runs (0 = until Ctrl-C)."),
    data_dir: str = DATA_DIR_OPT,
    json_out: bool = JSON_OPT,
) -> None:
    """Run the consolidate graph: extract facts from recent episodes, resolve duplicates and
    conflicts, expire (30/180 days), drain the retry queue, prune ledger and payloads. Prints
    the run's counts."""
    from graph.consolidate_graph import graph as consolidate

    context = memory_context(data_dir, None)
    interval = parse_every(every) if every else 0.0

    async def go() -> None:
        done = 0
        while True:
            run_input: Any = {"now": now, "lookback_minutes": lookback_minutes}
            out = await consolidate.ainvoke(run_input, context=context)
            done += 1
            if json_out:
                print(json.dumps({"now": out["now"], "extractor": out["extractor"], "counts": out["counts"]}))
            else:
                counts = ", ".join(f"{k} {v}" for k, v in sorted(out["counts"].items()))
                console.print(
                    f"consolidated at {out['now']} ({out['extractor']}): {counts}", highlight=False, markup=False
                )
            if not interval or (times and done >= times):
                return
            import asyncio

            await asyncio.sleep(interval)

    _run(go, context, json_out)
