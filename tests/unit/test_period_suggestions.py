"""The structured refusal of a period without data (issue 18 point 4, DESIGN §5.6):
``generate_report`` refuses it with ``InvalidValueError`` fields the graph keys on — the value to
send (``period="latest"``), the reason, the question for the user, the request words that
already accept it — and the registry carries them to the result (``ToolOutcome.suggestion``,
the envelope's ``suggestion``). Also when no period is stated and the queries' own date
conditions find nothing; never for a refusal whose resolution is not the latest month."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest

from tools.builtin.database.periods import month_before
from tools.builtin.demo_db import generate_sales_db
from tools.builtin.report import LATEST_REQUESTED, generate_report
from tools.database_setting import DatabaseError
from tools.errors import InvalidValueError
from tools.registry import ToolRegistry
from tools.results import compress
from tools.spec import ToolSpec

END = "2011-12"
LAST = month_before(dt.date.today())
COUNT = "SELECT COUNT(*) AS orders FROM orders"


@pytest.fixture(scope="module")
def old_sales(tmp_path_factory) -> str:
    return str(generate_sales_db(tmp_path_factory.mktemp("old") / "sales.db", months=6, end_month=END))


def refusal(db: str, tmp_path: Path, period: str, sql: str = COUNT) -> InvalidValueError:
    with pytest.raises(InvalidValueError) as err:
        generate_report("Sales", [{"label": "Orders", "sql": sql}], period=period, database=db, data_dir=tmp_path)
    return err.value


@pytest.mark.parametrize("period", ["last month", LAST, "上个月"])
def test_a_period_without_data_is_refused_with_the_latest_month_as_a_structured_suggestion(old_sales, tmp_path, period):
    details = refusal(old_sales, tmp_path, period).details()
    assert details is not None
    assert details["args"] == {"period": "latest"}
    assert details["reason"] == f"Your data ends in {END}; there is none for {LAST}."
    assert details["question"].startswith(f"Your data ends in {END}; there is none for {LAST}. Shall I report {END}")
    assert details["allowed_by"] == list(LATEST_REQUESTED)


def test_queries_that_find_nothing_without_a_stated_period_get_the_same_suggestion(old_sales, tmp_path):
    sql = f"{COUNT} WHERE strftime('%Y-%m', order_date) = '{LAST}'"
    details = refusal(old_sales, tmp_path, "", sql).details()
    assert details is not None and details["args"] == {"period": "latest"}
    assert details["reason"] == f"Your data ends in {END}; the report's queries found no data."


def test_no_suggestion_where_the_latest_month_is_no_answer(old_sales, tmp_path):
    # a filter that matches nothing, on no date: not a period question
    with pytest.raises(DatabaseError) as err:
        generate_report(
            "Sales", [{"label": "n", "sql": f"{COUNT} WHERE order_id < 0"}], database=old_sales, data_dir=tmp_path
        )
    assert not isinstance(err.value, InvalidValueError)
    # a stated period with data whose query lacks a date condition (and cannot be given one
    # plainly: the table only inside a subquery): refused without a suggestion
    no_condition = refusal(old_sales, tmp_path, END, f"SELECT * FROM ({COUNT})")
    assert no_condition.details() is None


def test_the_latest_month_stated_as_a_month_is_titled_as_the_latest_month_with_data(old_sales, tmp_path):
    """A model that picks the latest month itself ("last month's sales" → 2011-12) gets no
    untitled substitute: the report says it is the latest month with data, last month has none."""
    sql = f"{COUNT} WHERE strftime('%Y-%m', order_date) = '{END}'"
    out = generate_report(
        "Sales report", [{"label": "Orders", "sql": sql}], period=END, database=old_sales, data_dir=tmp_path
    )
    assert out["title"] == f"Sales report — {END} (latest month with data; last month, {LAST}, has none)"
    assert out["share"]["text"].startswith(out["title"])
    # an earlier month with data is titled as asked
    sql = f"{COUNT} WHERE strftime('%Y-%m', order_date) = '2011-11'"
    out = generate_report(
        "Sales report", [{"label": "Orders", "sql": sql}], period="2011-11", database=old_sales, data_dir=tmp_path
    )
    assert out["title"] == "Sales report"


@pytest.mark.parametrize(
    ("request_text", "allowed"),
    [
        ("Summarise the latest month's sales into a report", True),
        ("Report on the most recent data and post it", True),
        ("生成最新的销售报告", True),
        ("Summarise last month's sales into a report", False),
        ("Report November's sales", False),
    ],
)
def test_the_request_words_that_accept_the_latest_month(request_text, allowed):
    assert any(re.search(p, request_text, re.IGNORECASE) for p in LATEST_REQUESTED) is allowed


async def test_the_registry_carries_the_fields_to_the_outcome_and_the_envelope():
    def refuse(period: str) -> dict:
        raise InvalidValueError("no data", suggestion={"period": END}, reason="r", question="q?", allowed_by=("x",))

    registry = ToolRegistry()
    spec = ToolSpec(
        name="monthly_total",
        description="Total of one month of the data (test tool, never in the product).",
        parameters={"type": "object", "properties": {"period": {"type": "string"}}, "required": ["period"]},
    )

    async def runner(args, request_id):
        return refuse(**args)

    registry.register(spec, runner)
    outcome = await registry.call("monthly_total", {"period": LAST}, "r1")
    assert outcome.error_kind == "invalid_value"
    assert outcome.suggestion == {"args": {"period": END}, "reason": "r", "question": "q?", "allowed_by": ["x"]}
    envelope = compress(
        "monthly_total", None, status="error", error=outcome.error, suggestion=outcome.suggestion["args"]
    )
    assert envelope["suggestion"] == {"period": END} and envelope["error"].endswith("no data")
