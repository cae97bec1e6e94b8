"""``query_database`` and ``generate_report`` (seed §5.1). These functions run inside the
worker process of the subprocess executor (cwd = data_dir), never in the agent process.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

from tools.builtin.sales_db import MONTH_RE, month_add

#: Rows returned by query_database at most; ``row_count`` still gives the full count.
MAX_ROWS = 500
_LEADING_COMMENTS = re.compile(r"^\s*(?:(?:--[^\n]*\n)|(?:/\*.*?\*/)|\s)*", re.DOTALL)

_ALLOWED_ACTIONS = {
    sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION,
    getattr(sqlite3, "SQLITE_RECURSIVE", 33),
}


def _authorizer(action: int, *_: Any) -> int:
    return sqlite3.SQLITE_OK if action in _ALLOWED_ACTIONS else sqlite3.SQLITE_DENY


def connect_readonly(db_path: Path) -> sqlite3.Connection:
    """Open ``db_path`` read-only: ``mode=ro`` URI, ``PRAGMA query_only=ON`` and an authorizer
    that denies everything except reading (no writes, ATTACH, PRAGMA)."""
    if not db_path.exists():
        raise FileNotFoundError(f"sales database not found at {db_path}")
    con = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    con.execute("PRAGMA query_only=ON")
    con.set_authorizer(_authorizer)
    return con


def check_select(sql: str) -> str:
    """Return the statement without a trailing ``;`` if it is a single SELECT/WITH statement;
    raise ValueError with the reason otherwise."""
    if not isinstance(sql, str) or not sql.strip():
        raise ValueError("sql is empty; send one SELECT statement")
    body = sql.strip().rstrip(";").strip()
    head = _LEADING_COMMENTS.sub("", body)
    first = (re.match(r"[A-Za-z]+", head) or [""])[0].upper()
    if first not in ("SELECT", "WITH"):
        raise ValueError(f"only a single read-only SELECT (or WITH ... SELECT) statement is allowed, got {first or head[:20]!r}")
    if not sqlite3.complete_statement(body + ";") or _has_second_statement(body):
        raise ValueError("only one statement is allowed (remove the extra ';')")
    return body


def _has_second_statement(body: str) -> bool:
    in_str: str | None = None
    for ch in body:
        if in_str:
            if ch == in_str:
                in_str = None
        elif ch in ("'", '"'):
            in_str = ch
        elif ch == ";":
            return True
    return False


def query_database(sql: str, *, data_dir: Path) -> dict[str, Any]:
    """Run one read-only SELECT on ``data_dir/sales.db``.

    Returns ``{"columns": [str], "rows": [[...]], "row_count": n, "truncated": bool}``; at most
    MAX_ROWS rows are returned, ``row_count`` is the full count. Raises ValueError for anything
    but a single SELECT/WITH statement, sqlite3 errors for bad SQL (message names the problem).
    """
    body = check_select(sql)
    con = connect_readonly(Path(data_dir) / "sales.db")
    try:
        try:
            cur = con.execute(body)
        except sqlite3.DatabaseError as exc:
            if "not authorized" in str(exc):
                raise ValueError(f"statement refused: read-only access ({exc})") from None
            raise
        columns = [d[0] for d in cur.description or []]
        rows = [list(r) for r in cur.fetchmany(MAX_ROWS)]
        extra = sum(1 for _ in cur)
    finally:
        con.close()
    return {"columns": columns, "rows": rows, "row_count": len(rows) + extra, "truncated": extra > 0}


REVENUE_SQL = """
SELECT ROUND(COALESCE(SUM(oi.quantity * oi.unit_price), 0), 2), COUNT(DISTINCT o.order_id)
FROM orders o JOIN order_items oi ON oi.order_id = o.order_id
WHERE substr(o.order_date, 1, 7) = ?
"""
BY_REGION_SQL = """
SELECT r.name, ROUND(SUM(oi.quantity * oi.unit_price), 2) AS revenue, COUNT(DISTINCT o.order_id)
FROM orders o JOIN order_items oi ON oi.order_id = o.order_id
JOIN customers c ON c.customer_id = o.customer_id JOIN regions r ON r.region_id = c.region_id
WHERE substr(o.order_date, 1, 7) = ? GROUP BY r.name ORDER BY revenue DESC, r.name
"""
TOP_PRODUCTS_SQL = """
SELECT p.name, SUM(oi.quantity) AS units, ROUND(SUM(oi.quantity * oi.unit_price), 2) AS revenue
FROM orders o JOIN order_items oi ON oi.order_id = o.order_id
JOIN products p ON p.product_id = oi.product_id
WHERE substr(o.order_date, 1, 7) = ? GROUP BY p.name ORDER BY revenue DESC, p.name LIMIT 5
"""


def _month_totals(con: sqlite3.Connection, month: str) -> tuple[float, int]:
    revenue, orders = con.execute(REVENUE_SQL, (month,)).fetchone()
    return float(revenue or 0.0), int(orders or 0)


def generate_report(month: str = "", title: str = "", *, data_dir: Path) -> dict[str, Any]:
    """Summarise one month of sales into ``data_dir/reports/sales-<YYYY-MM>.md``.

    ``month``: ``YYYY-MM``; empty = the last full calendar month present in the data.
    Returns ``{"path", "month", "title", "total_revenue", "orders", "average_order_value",
    "revenue_by_region": [{"region", "revenue", "orders"}], "top_products": [{"product",
    "units", "revenue"}], "previous_month", "previous_revenue", "change_pct"}`` (money in
    currency units, 2 decimals; change_pct None when there is no previous month data).
    Raises ValueError for a malformed month or one with no orders (lists the months present).
    """
    data_dir = Path(data_dir)
    con = connect_readonly(data_dir / "sales.db")
    try:
        present = [r[0] for r in con.execute(
            "SELECT DISTINCT substr(order_date, 1, 7) FROM orders ORDER BY 1")]
        if not present:
            raise ValueError("the sales database has no orders")
        if not month:
            # Last *full* month: the newest month unless it is the (incomplete) current one.
            import datetime as dt
            current = dt.date.today().strftime("%Y-%m")
            full = [m for m in present if m < current]
            month = (full or present)[-1]
        if not MONTH_RE.match(month):
            raise ValueError(f"month must be YYYY-MM, got {month!r}")
        if month not in present:
            raise ValueError(f"no orders in {month}; months with data: {present[0]} .. {present[-1]}")
        revenue, orders = _month_totals(con, month)
        prev = month_add(month, -1)
        prev_revenue, prev_orders = _month_totals(con, prev)
        regions = [{"region": n, "revenue": float(r), "orders": int(c)}
                   for n, r, c in con.execute(BY_REGION_SQL, (month,))]
        top = [{"product": n, "units": int(u), "revenue": float(r)}
               for n, u, r in con.execute(TOP_PRODUCTS_SQL, (month,))]
    finally:
        con.close()
    aov = round(revenue / orders, 2) if orders else 0.0
    change = round((revenue - prev_revenue) / prev_revenue * 100, 1) if prev_orders and prev_revenue else None
    title = title.strip() or f"Sales report {month}"
    lines = [
        f"# {title}", "",
        f"Month: **{month}**", "",
        "## Summary", "",
        f"- Total revenue: {revenue:,.2f}",
        f"- Orders: {orders}",
        f"- Average order value: {aov:,.2f}",
        (f"- Change vs {prev}: {change:+.1f}% (previous revenue {prev_revenue:,.2f})"
         if change is not None else f"- Change vs {prev}: n/a (no data for {prev})"),
        "", "## Revenue by region", "", "| Region | Revenue | Orders |", "|---|---:|---:|",
        *[f"| {r['region']} | {r['revenue']:,.2f} | {r['orders']} |" for r in regions],
        "", "## Top 5 products", "", "| Product | Units | Revenue |", "|---|---:|---:|",
        *[f"| {p['product']} | {p['units']} | {p['revenue']:,.2f} |" for p in top],
        "",
    ]
    out_dir = data_dir / "reports"
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"sales-{month}.md"
    path.write_text("\n".join(lines), encoding="utf-8")
    return {
        "path": str(path), "month": month, "title": title,
        "total_revenue": revenue, "orders": orders, "average_order_value": aov,
        "revenue_by_region": regions, "top_products": top,
        "previous_month": prev, "previous_revenue": prev_revenue, "change_pct": change,
    }
