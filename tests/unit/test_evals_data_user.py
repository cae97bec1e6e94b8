"""The ``data`` suite on a user's own database (``python -m evals data --database PATH
--questions FILE``): the questions file's loading, its placeholders filled from that database,
the truths computed on it, the errors that name the file, the question and the placeholder,
and the suite's wiring (options, question choice, truths handed to each run, the report).
A small SQLite file built in each test; the runs replaced by a scripted one: no model, no process."""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from evals.data_questions import Question, Truth, score
from evals.data_user import QuestionsError, load_questions, placeholders, truths
from evals.harness import EvalConfig, Report, option_problems, run_suite

TODAY = dt.date(2026, 12, 7)
QUESTIONS: list[dict[str, Any]] = [
    {"id": "shops-berlin", "category": "count", "prompt": "How many shops in Berlin?",
     "sql": "SELECT COUNT(*) FROM shops WHERE city = 'Berlin'"},
    {"id": "top-shop", "category": "ranking", "expect": "names", "top": 1,
     "prompt": "Which shop sold the most in {latest_month}?",
     "sql": "SELECT s.name, SUM(amount) FROM sales x JOIN shops s ON s.id = x.shop_id "
            "WHERE substr(sold_on, 1, 7) = '{latest_ym}' GROUP BY s.id ORDER BY 2 DESC"},
    {"id": "sales-prev-month", "category": "period-sum", "decimals": 2,
     "prompt": "Total sales in {prev_month}?",
     "sql": "SELECT SUM(amount) FROM sales WHERE substr(sold_on, 1, 7) = '{prev_ym}'"},
    {"id": "shops-paris", "category": "absence", "expect": "none", "prompt": "How many shops in Paris?",
     "sql": "SELECT COUNT(*) FROM shops WHERE city = 'Paris'"},
    {"id": "sales-last-month", "category": "no-data", "expect": "none", "prompt": "Sales last month?",
     "sql": "SELECT COUNT(*) FROM sales WHERE sold_on >= '{last_month_start}' AND sold_on < '{this_month_start}'"},
]  # fmt: skip


@pytest.fixture
def shop_db(tmp_path: Path) -> Path:
    """shops (3, two in Berlin) and sales of 2018-04 and 2018-05 (one date column: ``sold_on``)."""
    path = tmp_path / "shop.db"
    with sqlite3.connect(path) as con:
        con.executescript(
            "CREATE TABLE shops (id INTEGER PRIMARY KEY, name TEXT, city TEXT);"
            "CREATE TABLE sales (id INTEGER PRIMARY KEY, shop_id INTEGER, sold_on DATE, amount REAL);"
            "INSERT INTO shops VALUES (1, 'Mitte', 'Berlin'), (2, 'Pankow', 'Berlin'), (3, 'Altona', 'Hamburg');"
            "INSERT INTO sales (shop_id, sold_on, amount) VALUES (1, '2018-04-02', 10.5), (2, '2018-04-20', 4.25),"
            " (1, '2018-05-01', 3), (3, '2018-05-03', 7);"
        )
    con.close()
    return path


def write(tmp_path: Path, content: Any, name: str = "questions.json") -> Path:
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
    return path


def load_truths(questions_file: Path, db: Path) -> dict[str, Truth]:
    user = load_questions(questions_file, db)
    values, note = placeholders(user, db, today=TODAY)
    return truths(user, db, values, note)


# -- a file that works -------------------------------------------------------------------------------


def test_questions_are_read_and_their_truths_computed_on_the_users_database(tmp_path: Path, shop_db: Path):
    user = load_questions(write(tmp_path, QUESTIONS), shop_db)
    assert user.db == "shop" and [q.id for q in user.questions] == [q["id"] for q in QUESTIONS]
    assert user.questions[1] == Question("top-shop", "shop", "ranking", QUESTIONS[1]["prompt"], QUESTIONS[1]["sql"],
                                         expect="names", top=1)  # fmt: skip
    values, note = placeholders(user, shop_db, today=TODAY)
    # the one date column found by its declared type; today's periods from today
    assert note == "dated by sales.sold_on, data up to May 2018"
    assert values["latest_ym"] == "2018-05" and values["prev_month"] == "April 2018"
    assert values["last_month_start"] == "2026-11-01" and values["this_month_start"] == "2026-12-01"
    found = truths(user, shop_db, values, note)
    assert found["shops-berlin"].value == 2
    assert found["top-shop"].required == () and found["top-shop"].tied == ("Altona",)
    assert found["top-shop"].prompt == "Which shop sold the most in May 2018?"
    assert found["sales-prev-month"].value == pytest.approx(14.75) and found["sales-prev-month"].decimals == 2
    assert found["shops-paris"].expect == found["sales-last-month"].expect == "none"
    assert score(found["sales-prev-month"], "We sold 14.75 in April.")[0] == "correct"


def test_a_mapping_with_date_column_and_yaml_are_read(tmp_path: Path, shop_db: Path):
    with sqlite3.connect(shop_db) as con:  # a second date column: the file must say which
        con.execute("CREATE TABLE shops_opened (shop_id INTEGER, opened_on DATE)")
        con.execute("INSERT INTO shops_opened VALUES (1, '2024-01-09')")
    con.close()
    as_yaml = "date_column: sales.sold_on\nabout: a test shop\nquestions:\n" + "".join(
        f"  - {json.dumps(q)}\n" for q in QUESTIONS
    )
    found = load_truths(write(tmp_path, as_yaml, "q.yaml"), shop_db)
    assert found["top-shop"].prompt.endswith("in May 2018?")
    mapping = {
        "date_column": "shops_opened.opened_on",
        "questions": [QUESTIONS[0] | {"prompt": "Shops, {latest_month}?"}],
    }
    assert load_truths(write(tmp_path, mapping), shop_db)["shops-berlin"].prompt == "Shops, January 2024?"


# -- errors that say what is wrong and where ---------------------------------------------------------


def test_a_missing_or_malformed_file_is_said_so(tmp_path: Path, shop_db: Path):
    with pytest.raises(QuestionsError, match=r"questions file .*nope\.json not found"):
        load_questions(tmp_path / "nope.json", shop_db)
    with pytest.raises(QuestionsError, match="not valid JSON"):
        load_questions(write(tmp_path, "[{"), shop_db)
    with pytest.raises(QuestionsError, match="not valid YAML"):
        load_questions(write(tmp_path, "questions: [\n", "q.yml"), shop_db)
    with pytest.raises(QuestionsError, match="no questions"):
        load_questions(write(tmp_path, {"questions": []}), shop_db)
    with pytest.raises(QuestionsError, match=r"unknown key.*question "):
        load_questions(write(tmp_path, {"question ": QUESTIONS}), shop_db)


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"expect": "count"}, r"question 2 \('top-shop'\): expect: must be number, names or none"),
        ({"category": "trend"}, r"'top-shop'\): category: must be one of count, ranking"),
        ({"top": 0}, r"'top-shop'\): top: Input should be greater than or equal to 1"),
        ({"decimals": "2"}, r"'top-shop'\): decimals: Input should be a valid integer"),
        ({"sql": ""}, r"'top-shop'\): sql: String should have at least 1 character"),
        ({"db": "other"}, r"'top-shop'\): db: Extra inputs are not permitted"),
        ({"id": "top shop"}, r"question 2 \('top shop'\): id: String should match pattern"),
        ({"id": "shops-berlin"}, r"question 2 \('shops-berlin'\): id 'shops-berlin' is used twice"),
    ],
)
def test_a_bad_field_names_the_question_and_the_field(tmp_path: Path, shop_db: Path, change: dict, said: str):
    bad = [QUESTIONS[0], QUESTIONS[1] | change]
    with pytest.raises(QuestionsError, match=said):
        load_questions(write(tmp_path, bad), shop_db)


def test_a_missing_field_is_named(tmp_path: Path, shop_db: Path):
    item = {k: v for k, v in QUESTIONS[0].items() if k != "prompt"}
    with pytest.raises(QuestionsError, match=r"'shops-berlin'\): prompt: Field required"):
        load_questions(write(tmp_path, [item]), shop_db)


def test_sql_that_fails_or_does_not_fit_names_the_question(tmp_path: Path, shop_db: Path):
    failing = QUESTIONS[0] | {"sql": "SELECT COUNT(*) FROM shop WHERE city = 'Berlin'"}
    with pytest.raises(QuestionsError, match=r"question shops-berlin: its SQL failed on shop\.db: no such table: shop"):
        load_truths(write(tmp_path, [failing]), shop_db)
    has_rows = QUESTIONS[3] | {"sql": "SELECT COUNT(*) FROM shops WHERE city = 'Berlin'"}
    with pytest.raises(QuestionsError, match=r"question shops-paris: expected no rows on shop\.db, found 2"):
        load_truths(write(tmp_path, [has_rows]), shop_db)
    one_column = QUESTIONS[1] | {"sql": "SELECT name FROM shops"}
    with pytest.raises(QuestionsError, match=r"question top-shop: a names question's SQL returns \(name, value\) rows"):
        load_truths(write(tmp_path, [one_column]), shop_db)


def test_a_placeholder_that_cannot_be_filled_is_named(tmp_path: Path, shop_db: Path):
    with pytest.raises(QuestionsError, match=r"question shops-berlin: unknown placeholder \{city\}"):
        load_truths(write(tmp_path, [QUESTIONS[0] | {"prompt": "How many shops in {city}?"}]), shop_db)
    with pytest.raises(QuestionsError, match=r"question shops-berlin: Single '\}'"):
        load_truths(write(tmp_path, [QUESTIONS[0] | {"prompt": "How many shops }?"}]), shop_db)
    with sqlite3.connect(shop_db) as con:  # two date columns and no date_column: the data ones cannot be filled
        con.execute("ALTER TABLE shops ADD COLUMN opened_at TEXT")
    con.close()
    with pytest.raises(
        QuestionsError,
        match=r"question top-shop: placeholder \{latest_month\} cannot be filled: no date column "
        r"\(several: shops\.opened_at, sales\.sold_on; set date_column\)",
    ):
        load_truths(write(tmp_path, QUESTIONS), shop_db)
    # today's placeholders need no date column
    assert load_truths(write(tmp_path, [QUESTIONS[4]]), shop_db)["sales-last-month"].expect == "none"
    with pytest.raises(QuestionsError, match=r"date_column shops\.founded: no such column: founded"):
        load_truths(write(tmp_path, {"date_column": "shops.founded", "questions": QUESTIONS}), shop_db)


def test_a_missing_or_foreign_database_is_said_so(tmp_path: Path):
    questions = write(tmp_path, QUESTIONS)
    with pytest.raises(QuestionsError, match=r"database .*absent\.db not found"):
        load_truths(questions, tmp_path / "absent.db")
    text = tmp_path / "notes.db"
    text.write_text("not a database " * 100)
    with pytest.raises(QuestionsError, match=r"notes\.db is not an SQLite database"):
        load_truths(questions, text)


# -- the suite wiring ---------------------------------------------------------------------------------


def test_database_and_questions_are_options_of_the_data_suite_only_and_go_together():
    assert option_problems("data", {"database", "questions", "cases", "k"}) == []
    assert option_problems("data", {"database"}) == [
        "--database and --questions go together: your questions about your database"
    ]
    assert option_problems("tasks", {"database", "questions"}), "the tasks suite would ignore them"


async def test_the_suite_runs_the_users_questions_on_the_users_database(tmp_path: Path, shop_db: Path, monkeypatch):
    """Every question of the file is run once on the given file with its truth, scored and
    reported under the database's name; nothing of the suite's own databases is built."""
    import evals.suites.data as suite

    monkeypatch.setattr(Report, "header", lambda self: "# header")  # the machine line runs `uname`
    monkeypatch.setattr(suite, "make_database", lambda *a: pytest.fail("the suite's databases are not built"))
    answers = {"shops-berlin": "There are 2 shops in Berlin.", "top-shop": "Pankow sold the most.",
               "sales-prev-month": "I could not establish it.", "shops-paris": "None.", "sales-last-month": "None."}  # fmt: skip
    seen: list[tuple[str, Path, str]] = []

    async def scripted(q: Question, t: Truth, attempt: int, cfg: EvalConfig, db: Path, root: Path, model: str):
        seen.append((q.id, db, t.prompt))
        verdict, why = score(t, answers[q.id])
        return {"id": f"{q.id}#{attempt}", "question": q.id, "db": q.db, "category": q.category, "model": model,
                "prompt": t.prompt, "truth": t.describe(), "verdict": verdict, "why": why, "answer": answers[q.id],
                "stop_reason": "answered", "tool_calls": 1, "latency_s": 1.0}  # fmt: skip

    monkeypatch.setattr(suite, "run_once", scripted)
    questions = write(tmp_path, QUESTIONS)
    cfg = EvalConfig(suite="data", database=shop_db, questions=questions, out=tmp_path / "out")
    report = await run_suite(cfg)
    assert [s[0] for s in seen] == [q["id"] for q in QUESTIONS] and {s[1] for s in seen} == {shop_db}
    assert seen[1][2] == "Which shop sold the most in May 2018?"
    text = (report.out / "report.md").read_text()
    assert "`shop` (`" in text and "dated by sales.sold_on, data up to May 2018" in text
    assert "| embedded | shop | 5 | 3 | 1 | 1 | 0 | 60% |" in text
    assert "> Pankow sold the most." in text, "the wrong answer quoted"
    assert report.summary["shop_correct"] == 3 and report.summary["wrong_as_final"] == 1
    config = json.loads((report.out / "summary.json").read_text())["config"]
    assert config["database"] == str(shop_db) and config["questions"] == str(questions)
    # --case picks among the file's questions; SQL that fails stops the suite before anything is written
    assert [q.id for q in suite.choose(cfg.__class__(suite="data", database=shop_db, questions=questions,
                                                      cases=("shops-paris",)))] == ["shops-paris"]  # fmt: skip
    broken = write(tmp_path, [QUESTIONS[0] | {"sql": "SELECT nope FROM shops"}], "broken.json")
    with pytest.raises(QuestionsError, match="question shops-berlin: its SQL failed"):
        await run_suite(EvalConfig(suite="data", database=shop_db, questions=broken, out=tmp_path / "never"))
    assert not (tmp_path / "never").exists()


def test_rescore_reads_the_users_files_again(tmp_path: Path, shop_db: Path, monkeypatch):
    from evals.suites.data import rescore

    monkeypatch.setattr(Report, "header", lambda self: "# Hermes eval: data\n\n- run: earlier")
    questions = write(tmp_path, QUESTIONS)
    out = tmp_path / "run"
    report = Report(EvalConfig(suite="data", database=shop_db, questions=questions, out=out))
    row = {"model": "embedded", "tool_calls": 1, "latency_s": 9.0, "category": "count", "db": "shop", "prompt": "?",
           "stop_reason": "answered", "verdict": "correct", "why": "", "truth": "?"}  # fmt: skip
    report.add(row | {"id": "shops-berlin#1", "question": "shops-berlin", "answer": "There are 3 shops in Berlin."})
    report.close()
    rescore(out)
    rescored = json.loads((out / "results.jsonl").read_text())
    assert (rescored["verdict"], rescored["truth"]) == ("wrong", "2")


def test_the_command_line_says_what_is_wrong_in_one_line(tmp_path: Path, shop_db: Path):
    from typer.testing import CliRunner

    from graph.cli import app

    broken = write(tmp_path, [QUESTIONS[0] | {"expect": "count"}])
    for args, said in (
        (["--database", str(shop_db), "--questions", str(tmp_path / "absent.json")], "absent.json not found"),
        (["--database", str(shop_db), "--questions", str(broken)], "question 1 ('shops-berlin'): expect: must be"),
        (["--questions", str(broken)], "--database and --questions go together"),
    ):
        result = CliRunner().invoke(app, ["eval", "data", *args, "--out", str(tmp_path / "out")])
        lines = [x for x in result.output.splitlines() if x.startswith("error:")]
        assert result.exit_code == 1 and len(lines) == 1 and said in lines[0], result.output
    assert not (tmp_path / "out").exists()
