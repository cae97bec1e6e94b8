"""The builtin tools of the flagship task (seed §5.1) as :class:`~tools.spec.ToolSpec` s, and
their registration through an :class:`~tools.executors.base.Executor` (never in-process).

``BUILTIN_TOOLS``: list of ``(ToolSpec, entrypoint)``; ``register_builtin_tools(registry,
executor)`` registers them all.
"""

from __future__ import annotations

from typing import Any

from tools.executors.base import Executor
from tools.registry import ToolRegistry
from tools.spec import HEAVY_TIMEOUT_S, ORDINARY_TIMEOUT_S, ToolSpec

SALES_SCHEMA_TEXT = (
    "regions(region_id INTEGER PK, name TEXT); "
    "customers(customer_id INTEGER PK, name TEXT, region_id INTEGER -> regions, segment TEXT "
    "'enterprise'|'smb'|'consumer'); "
    "products(product_id INTEGER PK, name TEXT, category TEXT, unit_price REAL); "
    "orders(order_id INTEGER PK, customer_id INTEGER -> customers, order_date TEXT 'YYYY-MM-DD'); "
    "order_items(order_item_id INTEGER PK, order_id INTEGER -> orders, product_id INTEGER -> products, "
    "quantity INTEGER, unit_price REAL)"
)

QUERY_DATABASE = ToolSpec(
    name="query_database",
    description=(
        "Run ONE read-only SQL SELECT (SQLite dialect; WITH ... SELECT allowed) on the sales "
        "database and get {columns, rows, row_count, truncated}; at most 500 rows are returned. "
        f"Tables: {SALES_SCHEMA_TEXT}. Revenue = SUM(order_items.quantity * order_items.unit_price); "
        "filter a month with substr(orders.order_date, 1, 7) = 'YYYY-MM'. "
        "Use it for ad-hoc questions about sales data. It cannot write: INSERT/UPDATE/DELETE/DROP/"
        "ATTACH/PRAGMA or several statements are refused with an error. For a complete monthly "
        "report file use generate_report instead."
    ),
    parameters={
        "type": "object",
        "properties": {"sql": {"type": "string", "minLength": 1,
                               "description": "A single SQLite SELECT statement."}},
        "required": ["sql"],
        "additionalProperties": False,
    },
    timeout_s=ORDINARY_TIMEOUT_S,
    side_effect=False,
    result_schema={
        "type": "object",
        "properties": {"columns": {"type": "array", "items": {"type": "string"}},
                       "rows": {"type": "array", "items": {"type": "array"}},
                       "row_count": {"type": "integer"}, "truncated": {"type": "boolean"}},
        "required": ["columns", "rows", "row_count"],
    },
)

GENERATE_REPORT = ToolSpec(
    name="generate_report",
    description=(
        "Write the monthly sales analysis report (Markdown) for one month, computed from the sales "
        "database: total revenue, order count, average order value, revenue by region, top 5 "
        "products and change vs the previous month. Saves reports/sales-YYYY-MM.md and returns "
        "{path, month, total_revenue, orders, average_order_value, revenue_by_region, top_products, "
        "previous_month, change_pct}. Typical use: 'summarise last month's sales into a report'. "
        "month is YYYY-MM; leave it empty for the last full month in the data; a month without "
        "orders is an error listing the months available. It does not send the report anywhere: "
        "post the result with a chat tool (e.g. post_message). For ad-hoc numbers use query_database."
    ),
    parameters={
        "type": "object",
        "properties": {
            "month": {"type": "string", "pattern": r"^(\d{4}-(0[1-9]|1[0-2]))?$", "default": "",
                      "description": "YYYY-MM; empty = last full month present in the data."},
            "title": {"type": "string", "default": "", "maxLength": 200,
                      "description": "Report title; empty = 'Sales report YYYY-MM'."},
        },
        "required": [],
        "additionalProperties": False,
    },
    timeout_s=HEAVY_TIMEOUT_S,
    side_effect=True,
    requested_by=(
        r"\b(write|generate|create|make|produce|prepare|draft|summari[sz]e|compile)\b.{0,80}\breports?\b",
        r"\breport\b.{0,30}\b(for|on|about)\b.{0,20}\b(last|this|previous)\b",
        r"(写|生成|做|总结).{0,20}报告",
    ),
    artifact_field="path",
    result_schema={
        "type": "object",
        "properties": {"path": {"type": "string"}, "month": {"type": "string"},
                       "total_revenue": {"type": "number"}, "orders": {"type": "integer"}},
        "required": ["path", "month", "total_revenue", "orders"],
    },
)

SCHEDULE_REMINDER = ToolSpec(
    name="schedule_reminder",
    description=(
        "Create a recurring reminder for the user, stored persistently; a scheduler fires it "
        "every month on day_of_month (1-31) at time (HH:MM, 24 h, local time). A day a month "
        "lacks (31 in a 30-day month, 30 in February) runs on that month's last day and the "
        "result says so in 'adjustment'. Optional 'action' says what firing does: "
        "{kind: 'task', task: '<request for the agent>'} (default: the text as the task) or "
        "{kind: 'tool', tool: '<tool name>', args: {...}} (the tool is called once per month). "
        "Returns the reminder with its id, next_run and action; asking again for the same "
        "reminder returns the existing one (already_existed). Typical use: 'remind me every "
        "month to send the sales report'. Only monthly recurrence is supported; a day outside "
        "1-31 or a bad time is an error. It does not itself send messages or generate reports; "
        "use list_reminders to see existing reminders."
    ),
    parameters={
        "type": "object",
        "properties": {
            "text": {"type": "string", "minLength": 1, "maxLength": 500,
                     "description": "What to remind the user about."},
            "day_of_month": {"type": "integer", "minimum": 1, "maximum": 31, "default": 1},
            "time": {"type": "string", "pattern": r"^([01]\d|2[0-3]):[0-5]\d$", "default": "09:00"},
            "recurrence": {"type": "string", "enum": ["monthly"], "default": "monthly"},
            "action": {
                "type": "object",
                "description": "What firing does. Omit it to run the text as a task for the agent.",
                "properties": {
                    "kind": {"type": "string", "enum": ["task", "tool"]},
                    "task": {"type": "string", "minLength": 1, "maxLength": 2000,
                             "description": "kind=task: the request the agent runs when it fires."},
                    "thread_id": {"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$",
                                  "description": "kind=task: the session to run it in (default reminder-<id>)."},
                    "tool": {"type": "string", "pattern": r"^[a-z][a-z0-9_]{2,63}$",
                             "description": "kind=tool: the tool to call."},
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
            "handle": {"type": "string", "pattern": "^payloads/", "maxLength": 300,
                       "description": "The handle from a truncated result."},
            "offset": {"type": "integer", "minimum": 0, "default": 0},
            "limit": {"type": "integer", "minimum": 1, "maximum": 50, "default": 20},
        },
        "required": ["handle"],
        "additionalProperties": False,
    },
    timeout_s=ORDINARY_TIMEOUT_S,
)

BUILTIN_TOOLS: list[tuple[ToolSpec, str]] = [
    (QUERY_DATABASE, "tools.builtin.sales:query_database"),
    (GENERATE_REPORT, "tools.builtin.sales:generate_report"),
    (SCHEDULE_REMINDER, "tools.builtin.reminders:schedule_reminder"),
    (LIST_REMINDERS, "tools.builtin.reminders:list_reminders"),
    (READ_RESULT, "tools.builtin.payloads:read_result"),
]


def executor_runner(executor: Executor, entrypoint: str, timeout_s: float):
    """A registry runner that sends the call to ``executor`` (out of process)."""

    async def run(args: dict[str, Any], request_id: str) -> Any:
        return await executor.run(entrypoint, args, timeout_s=timeout_s, request_id=request_id)

    return run


def register_builtin_tools(registry: ToolRegistry, executor: Executor) -> list[str]:
    """Register every builtin tool; return their names. Raises DuplicateToolError on clash."""
    for spec, entrypoint in BUILTIN_TOOLS:
        registry.register(spec, executor_runner(executor, entrypoint, spec.timeout_s))
    return [spec.name for spec, _ in BUILTIN_TOOLS]
