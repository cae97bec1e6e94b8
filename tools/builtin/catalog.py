"""The builtin tools of the flagship task (seed §5.1) as :class:`~tools.spec.ToolSpec` s, and
their registration through an :class:`~tools.executors.base.Executor` (never in-process).

The data tools (describe_database, query_database, generate_report) read the user's database
(``HERMES_DATABASE`` / ``Context.database``), which the executor passes to them as the injected
argument ``database`` (:mod:`tools.builtin.database`).

``BUILTIN_TOOLS``: list of ``(ToolSpec, entrypoint)``; ``register_builtin_tools(registry,
executor)`` registers them all.
"""

from __future__ import annotations

from typing import Any

from tools.executors.base import Executor
from tools.registry import Runner, ToolRegistry
from tools.spec import HEAVY_TIMEOUT_S, ORDINARY_TIMEOUT_S, ToolSpec

DESCRIBE_DATABASE = ToolSpec(
    name="describe_database",
    description=(
        "Describe the user's database (the SQLite file set by HERMES_DATABASE): every table and "
        "view with its columns and declared types, primary and foreign keys, row counts, and for "
        "date columns the first and last date and the latest full calendar month with data. "
        "Read-only; takes no arguments; at most 40 tables and 40 columns per table (notes say "
        "what was left out). Typical use: call it first, before writing SQL for query_database or "
        "generate_report, to learn the table and column names and which period has data (e.g. "
        "what 'last month' can mean); call it again when a query names an unknown table or "
        "column. It returns no row data itself. With no database configured, or a path that is "
        "missing, a directory or not SQLite, it returns an error saying how to set one."
    ),
    parameters={"type": "object", "properties": {}, "required": [], "additionalProperties": False},
    timeout_s=ORDINARY_TIMEOUT_S,
    side_effect=False,
    reads="schema",  # table names, columns, row counts: never the answer to a question about data
    result_schema={
        "type": "object",
        "properties": {
            "database": {"type": "string"},
            "table_count": {"type": "integer"},
            "tables": {"type": "array", "items": {"type": "object"}},
            "notes": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["database", "tables"],
    },
)

QUERY_DATABASE = ToolSpec(
    name="query_database",
    description=(
        "Run ONE read-only SQL SELECT (SQLite dialect; WITH ... SELECT allowed) on the user's "
        "database and get {columns, rows, row_count, truncated}: at most 500 rows are returned "
        "(row_count is the true total) and a query is stopped after 5 s. Typical use: ad-hoc "
        "questions about the user's data and checking figures; learn the tables, columns and the "
        "dates with data from describe_database first. It cannot write: INSERT/UPDATE/DELETE/DROP, "
        "ATTACH, PRAGMA and several statements are refused with an error, and an unknown table or "
        "column is an error telling you to call describe_database. A query that finds no data "
        "returns a note with the dates present and the latest full month with data: query that "
        "period or tell the user, never invent figures. For a saved report file use "
        "generate_report; without a configured database it returns an error saying how to set one."
    ),
    parameters={
        "type": "object",
        "properties": {
            "sql": {
                "type": "string",
                "minLength": 1,
                "maxLength": 4000,
                "description": "A single SQLite SELECT (or WITH ... SELECT) statement.",
            }
        },
        "required": ["sql"],
        "additionalProperties": False,
    },
    timeout_s=ORDINARY_TIMEOUT_S,
    side_effect=False,
    reads="data",
    result_schema={
        "type": "object",
        "properties": {
            "columns": {"type": "array", "items": {"type": "string"}},
            "rows": {"type": "array", "items": {"type": "array"}},
            "row_count": {"type": "integer"},
            "truncated": {"type": "boolean"},
            "row_count_exact": {"type": "boolean"},
            "note": {"type": "string"},
            "data_range": {"type": "array", "items": {"type": "object"}},
        },
        "required": ["columns", "rows", "row_count"],
    },
)

GENERATE_REPORT = ToolSpec(
    name="generate_report",
    description=(
        "Write an analysis report as a Markdown file, reports/<title-slug>.md, whose figures all "
        "come from 1-8 read-only SELECT queries you give as {label, sql}; each runs on the user's "
        "database exactly like query_database (at most 50 rows shown per query). The report holds "
        "the title, the period, for each query its label, result table and SQL, and a closing "
        "list of the queries its figures rest on. Returns {path, version, title, period, queries: "
        "[{label, sql, columns, rows, row_count}]}. Typical use: 'summarise last month's sales "
        "into a report': find the tables and the latest month with data with describe_database, "
        "then pass queries filtered to that month (totals, breakdowns, top items). An existing "
        "report is never overwritten: the next one is <slug>-v2.md, -v3... A refused or failing "
        "query (writes, unknown table or column) fails the whole report, and so does a stated period "
        "with a query that filters on no date column (its figures would cover every date); if every query finds no "
        "data it is an error naming the latest period with data; in both cases nothing is "
        "written."
        # The refusal of a period without data carries its resolution (the latest month, period
        # 'latest', the WHERE to add; tools/builtin/database/periods.py). Not described here: a
        # second 'last month' in this text made the 1.5B model send period='last month'
        # (observed 2026-12-03 in bash scripts/demo.sh; the earlier wording was the measured one).
        " It does not send the report anywhere: post it with a chat tool (e.g. "
        "post_message). For a quick figure without a file use query_database."
    ),
    parameters={
        "type": "object",
        "properties": {
            "title": {
                "type": "string",
                "minLength": 1,
                "maxLength": 200,
                "description": "Report title naming the subject and period, e.g. 'Sales report <YYYY-MM>'; also names the file.",
            },
            "queries": {
                "type": "array",
                "minItems": 1,
                "maxItems": 8,
                "description": "The report's figures: one read-only SELECT per item.",
                "items": {
                    "type": "object",
                    "properties": {
                        "label": {
                            "type": "string",
                            "minLength": 1,
                            "maxLength": 120,
                            "description": "Section heading, e.g. 'Revenue by region'.",
                        },
                        "sql": {
                            "type": "string",
                            "minLength": 1,
                            "maxLength": 4000,
                            "description": "A single SQLite SELECT statement.",
                        },
                    },
                    "required": ["label", "sql"],
                    "additionalProperties": False,
                },
            },
            "period": {
                "type": "string",
                "maxLength": 100,
                "default": "",
                # check_period accepts more forms (YYYY, day, month ranges, fixed phrases), but
                # this wording is what the embedded model follows: listing every form, it copied
                # the user's "last month" into the period (measured, Qwen2.5-Coder-1.5B, 2026-12-02)
                "description": "The period the report covers, as YYYY-MM or YYYY-MM-DD..YYYY-MM-DD.",
            },
            "notes": {
                "type": "string",
                "maxLength": 2000,
                "default": "",
                "description": "Text placed under the title (context, caveats).",
            },
        },
        "required": ["title", "queries"],
        "additionalProperties": False,
    },
    timeout_s=HEAVY_TIMEOUT_S,
    side_effect=True,
    reads="data",  # its result carries each query's rows
    requested_by=(
        r"\b(write|generate|create|make|produce|prepare|draft|summari[sz]e|compile)\b.{0,80}\breports?\b",
        r"\breport\b.{0,30}\b(for|on|about)\b.{0,20}\b(last|this|previous)\b",
        r"(写|生成|做|总结).{0,20}报告",
    ),
    artifact_field="path",
    # a ready message (title, period, headline figures, path): what a later post must carry
    share_field="share",
    # the file goes to <data_dir>/reports/, named from the title: no argument chooses where
    destination_args=(),
    result_schema={
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "share": {"type": "object"},
            "version": {"type": "integer"},
            "title": {"type": "string"},
            "period": {"type": "string"},
            "queries": {"type": "array", "items": {"type": "object"}},
        },
        "required": ["path", "version", "queries"],
    },
)

SCHEDULE_REMINDER = ToolSpec(
    name="schedule_reminder",
    description=(
        "Create a recurring reminder for the user, stored persistently; a scheduler fires it "
        "every month on day_of_month (1-31) at time (HH:MM, 24 h, local time). A day a month "
        "lacks (31 in a 30-day month, 30 in February) runs on that month's last day and the "
        "result says so in 'adjustment'. Firing delivers the text to the user as a reminder "
        "(the text is never run as a request). Optional 'action', only when the user asked for "
        "something to be done each month: {kind: 'task', task: '<request for the agent>'} or "
        "{kind: 'tool', tool: '<tool name>', args: {...}} (the tool is called once per month; "
        "its destination must be one the user named). "
        "Returns the reminder with its id, next_run and action; asking again for the same "
        "reminder returns the existing one (already_existed). Typical use: 'remind me every "
        "month to send the sales report'. Only monthly recurrence is supported; a day outside "
        "1-31 or a bad time is an error. It does not itself send messages or generate reports; "
        "use list_reminders to see existing reminders."
    ),
    parameters={
        "type": "object",
        "properties": {
            "text": {
                "type": "string",
                "minLength": 1,
                "maxLength": 500,
                "description": "What the user is to do when it fires, as an instruction "
                "(e.g. 'Send the monthly sales report to the project group'), not what was done.",
            },
            "day_of_month": {"type": "integer", "minimum": 1, "maximum": 31, "default": 1},
            "time": {"type": "string", "pattern": r"^([01]\d|2[0-3]):[0-5]\d$", "default": "09:00"},
            "recurrence": {"type": "string", "enum": ["monthly"], "default": "monthly"},
            "action": {
                "type": "object",
                "description": "What firing does besides reminding. Omit it for a plain reminder.",
                "properties": {
                    "kind": {"type": "string", "enum": ["notify", "task", "tool"]},
                    "task": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": 2000,
                        "description": "kind=task: the request the agent runs when it fires.",
                    },
                    "thread_id": {
                        "type": "string",
                        "pattern": r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$",
                        "description": "kind=task: the session to run it in (default reminder-<id>).",
                    },
                    "tool": {
                        "type": "string",
                        "pattern": r"^[a-z][a-z0-9_]{2,63}$",
                        "description": "kind=tool: the tool to call.",
                    },
                    "args": {"type": "object", "description": "kind=tool: the tool's arguments."},
                },
                "required": ["kind"],
                "additionalProperties": False,
            },
        },
        "required": ["text"],
        "additionalProperties": False,
    },
    timeout_s=ORDINARY_TIMEOUT_S,
    side_effect=True,
    # asking twice returns the existing reminder (schedule_reminder dedupes): safe to retry
    idempotent=True,
    requested_by=(r"\bremind me\b", r"\b(set|schedule|create|add)\b.{0,30}\breminders?\b", r"提醒我"),
    destination_args=(),
    # its effect is scheduling; its action runs later, checked against this request then too
    schedules=True,
    deferred_call_arg="action",
    # the text reaches the user when it fires: an instruction, never a narration of this call
    content_arg="text",
)

LIST_REMINDERS = ToolSpec(
    name="list_reminders",
    description=(
        "List every reminder created with schedule_reminder: {reminders: [{id, text, day_of_month, "
        "time, recurrence, action, created_at, next_run, last_fired_period, last_fired_at}], "
        "count}. Read-only; takes no arguments. Use it to check whether a reminder already exists "
        "before scheduling another, or when it last fired."
    ),
    parameters={"type": "object", "properties": {}, "required": [], "additionalProperties": False},
    timeout_s=ORDINARY_TIMEOUT_S,
    reads="data",
    reads_schedule=True,  # its sandbox shows the reminder store
)

READ_RESULT = ToolSpec(
    name="read_result",
    description=(
        "Page through a tool result that was too large for the conversation: pass the 'handle' "
        "from that result's envelope (e.g. payloads/<thread>/<file>.json). Returns items "
        "offset..offset+limit of its largest list (rows, items) with the true total, or page "
        "'offset' of a long text. Read-only. Use it when a result says truncated and you need "
        "rows that were not shown; it cannot read other files."
    ),
    parameters={
        "type": "object",
        "properties": {
            "handle": {
                "type": "string",
                "pattern": "^payloads/",
                "maxLength": 300,
                "description": "The handle from a truncated result.",
            },
            "offset": {"type": "integer", "minimum": 0, "default": 0},
            "limit": {"type": "integer", "minimum": 1, "maximum": 50, "default": 20},
        },
        "required": ["handle"],
        "additionalProperties": False,
    },
    timeout_s=ORDINARY_TIMEOUT_S,
    reads="data",
)

BUILTIN_TOOLS: list[tuple[ToolSpec, str]] = [
    (DESCRIBE_DATABASE, "tools.builtin.database:describe_database"),
    (QUERY_DATABASE, "tools.builtin.database:query_database"),
    (GENERATE_REPORT, "tools.builtin.report:generate_report"),
    (SCHEDULE_REMINDER, "tools.builtin.reminders:schedule_reminder"),
    (LIST_REMINDERS, "tools.builtin.reminders:list_reminders"),
    (READ_RESULT, "tools.builtin.payloads:read_result"),
]


def executor_runner(
    executor: Executor,
    entrypoint: str,
    timeout_s: float,
    network: bool = False,
    schedule: bool = False,
    postgres_url: str = "",
) -> Runner:
    """A registry runner that sends the call to ``executor`` (out of process); ``network``: the
    tool's ``ToolSpec.network`` (without it the run has no network); ``schedule``: its
    ``ToolSpec.schedules`` or ``reads_schedule`` (without it the run cannot reach the schedule
    and writes only its thread's workspace). ``postgres_url``: a schedule tool's schedule is in
    that PostgreSQL database (``tools.builtin.reminder_store``): the call gets it as its
    ``postgres_url`` argument (after the model's arguments were validated, so never the
    model's) and the network to reach it."""
    flags = {k: True for k, v in (("network", network or bool(postgres_url)), ("schedule", schedule)) if v}
    added = {"postgres_url": postgres_url} if postgres_url else {}

    async def run(args: dict[str, Any], request_id: str) -> Any:
        return await executor.run(entrypoint, {**args, **added}, timeout_s=timeout_s, request_id=request_id, **flags)

    return run


#: Tools that write SQL against the configured database: their descriptions carry its schema.
SQL_TOOLS = ("query_database", "generate_report")


def register_builtin_tools(
    registry: ToolRegistry,
    executor: Executor,
    *,
    ordinary_s: float = ORDINARY_TIMEOUT_S,
    heavy_s: float = HEAVY_TIMEOUT_S,
    overrides: dict[str, float] | None = None,
    database_schema: str = "",
    postgres_url: str = "",
) -> list[str]:
    """Register every builtin tool; return their names. Raises DuplicateToolError on clash.

    Timeouts (seconds, seed §2.2): a tool declared heavy (``HEAVY_TIMEOUT_S``) gets ``heavy_s``,
    every other one ``ordinary_s``; ``overrides`` ``{tool name: seconds}`` wins over both.
    ``database_schema``: ``table(col, ...)`` text of the user's database
    (:func:`tools.builtin.database.schema.schema_summary`), appended to the SQL tools' descriptions.
    ``postgres_url`` (``HERMES_POSTGRES_URL``): the schedule tools' reminders are in that database."""
    overrides = overrides or {}
    for spec, entrypoint in BUILTIN_TOOLS:
        timeout = overrides.get(spec.name) or (heavy_s if spec.timeout_s >= HEAVY_TIMEOUT_S else ordinary_s)
        update: dict[str, Any] = {"timeout_s": timeout}
        if database_schema and spec.name in SQL_TOOLS:
            update["description"] = f"{spec.description} Tables of the configured database: {database_schema}."
        tuned = spec.model_copy(update=update)
        schedule = tuned.schedules or tuned.reads_schedule
        url = postgres_url if schedule else ""
        registry.register(tuned, executor_runner(executor, entrypoint, timeout, tuned.network, schedule, url))
    return [spec.name for spec, _ in BUILTIN_TOOLS]
