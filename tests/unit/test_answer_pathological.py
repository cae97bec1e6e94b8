"""Answer verification (DESIGN §5.5) on hostile or careless input: it returns, never raises.

Found by breaking it (helper-24): a run of a few thousand blanks made the name patterns
quadratic (8,000 blanks: 9 s; 16,000: a minute), and so did a run of line breaks for the
list-marker patterns; a figure was compared with every number of every result, and the
undated check re-read every result for every figure (a 20 KB answer over 500 rows: 20 s);
a run of 400 digits raised ``OverflowError``, one of 5,000 ``ValueError`` (int digits limit).
Each test below hangs for minutes or raises with its fix reverted; the timeout only bounds a
hang, no test measures speed.
"""

from __future__ import annotations

import json
import random

import pytest

from graph.answer_figures import Known, figures, names_period, supported
from graph.answer_names import stated_names
from graph.goal_results import Result
from graph.verification import check_answer

ROWS = {"columns": ["name", "n"], "rows": [[f"Name{i}", i] for i in range(500)], "row_count": 500}


def read(data: object, undated: bool = False) -> Result:
    if undated and isinstance(data, dict):
        data = {**data, "undated": True}
    envelope = {"summary": "query_database: ok", "data": data}
    return Result("query_database", "q1", "data", False, data, "ok", None, json.dumps(envelope, default=str))


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "answer",
    [
        "- a" + " " * 60_000 + "b",
        "The top artist is Iron Maiden" + " " * 60_000 + ".",
        "The answer is: A" + "\t" * 60_000 + ", B",
        "x" + "\n" * 60_000 + "y",
        "x" + "\n \n" * 20_000 + "1. Name1",
    ],
    ids=["item-blanks", "final-name-blanks", "enumeration-tabs", "newlines", "blank-lines"],
)
def test_long_runs_of_blanks_return(answer: str) -> None:
    check = check_answer(answer, "Which names?", [read(ROWS)], needs_data=True)
    assert check.grounded


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_a_long_answer_over_a_large_result_returns() -> None:
    answer = "\n".join(f"{i}. Name{i} - {i * 3}" for i in range(10_000))
    check = check_answer(answer, "Top names in 2011?", [read(ROWS, undated=True)], needs_data=True, period_asked=True)
    # 3·i is in the rows only for i < 167: the rest are unsupported, each once
    assert "1,500" not in check.figures and "1500" in check.figures and len(check.figures) == len(set(check.figures))
    assert "498" in check.undated  # 3·166, held only by the read over every date


@pytest.mark.timeout(60)
def test_a_request_of_digits_is_checked_for_a_period() -> None:
    assert not names_period("1" * 200_000)
    assert names_period("1" * 200_000 + " 11月")


@pytest.mark.parametrize("digits", ["1" * 400, "1" + "0" * 400, "1" * 5_000, "0." + "1" * 5_000, "9" * 5_000 + ".5"])
def test_a_huge_number_is_no_figure_and_raises_nothing(digits: str) -> None:
    answer = f"The serial is {digits}; the total is 12."
    assert [f.text for f in figures(answer)][-1] == "12"
    data = {"columns": ["serial", "total"], "rows": [[digits, 12]], "row_count": 1}
    assert check_answer(answer, "What is the total?", [read(data)], needs_data=True).ok


def test_known_agrees_with_the_plain_comparison() -> None:
    """``Known`` (sorted once, bisection) accepts exactly what the comparison with every number
    accepts: roundings, cuts, percentages of ratios, thousands, huge and tiny values."""
    rng = random.Random(24)
    values = [
        rng.choice([0.0, 1.0, 12.0, 0.125, 1234.56, 1e15, 523.06, 1e-7]) * rng.choice([1, -1, 10, 0.01])
        for _ in range(40)
    ]
    values += [rng.uniform(-1e6, 1e6) for _ in range(200)]
    known = Known(values)
    texts = [
        "0",
        "1",
        "12",
        "12.5%",
        "13%",
        "1,235",
        "1,234.5",
        "1234.6",
        "523",
        "523.1",
        "0.13",
        "1e15",
        "1 million",
        "1,000,000,000,000,000",
        "5.23",
        "52.3",
        "0.0000001",
    ]
    texts += [f"{v:.{rng.randint(0, 3)}f}" for v in rng.sample(values, 60)]
    for text in texts:
        for fig in figures(text):
            plain = any(
                abs(abs(k) - t) <= u / 2 + 1e-9 * max(1.0, abs(k)) or t <= abs(k) < t + u
                for value, unit in fig.readings
                for t, u in ([(value, unit), (value / 100, unit / 100)] if fig.percent else [(value, unit)])
                for k in values
            )
            assert supported(fig, known) == plain == supported(fig, values), text


@pytest.mark.parametrize(
    "answer",
    [
        "The top is \u200bUSA\u200b.",
        "The top is \u202bUSA\u202c 🇺🇸.",
        "الإجابة هي USA.",
        '"' * 5_000,
        "'" * 5_000 + "USA",
        "«" * 3_000 + "»",
        "(" * 10_000 + "USA",
        "| Country | Revenue |\n|---|---|\n" + "| USA | 523.06 |\n" * 3_000,
        "```\n" + "SELECT 1 FROM t\n" * 3_000 + "```",
        "",
    ],
)
def test_odd_answers_raise_nothing(answer: str) -> None:
    stated_names(answer)
    data = {"columns": ["country", "revenue"], "rows": [["USA", 523.06], [None, float("nan")]], "row_count": 2}
    check_answer(answer, "Top country?", [read(data)], needs_data=True)


@pytest.mark.parametrize(
    "data",
    [
        None,
        "",
        b"USA".decode(),
        {"rows": None},
        {"columns": ["a"], "rows": [None, 1, "x", {"a": None}]},
        {"columns": None, "rows": [[float("inf"), "NaN", "inf", "1e309", 10**400]]},
        {"columns": ["json"], "rows": [['{"nested": {"USA": [1, 2, {"deep": "1,234"}]}}']]},
        [[[[[[[[[[[[[[[[["USA"]]]]]]]]]]]]]]]]],
        {"a": {"b": {"c": {"d": {"e": {"f": {"g": {"h": {"i": {"j": {"k": {"l": {"m": {"n": 523}}}}}}}}}}}}}},
    ],
)
def test_odd_results_raise_nothing(data: object) -> None:
    check_answer("The top is USA with 523.06 (1,234).", "Top country?", [read(data)], needs_data=True)


COUNTRIES = {
    "columns": ["BillingCountry", "revenue"],
    "rows": [["USA", 523.06], ["Canada", 303.96], ["France", 195.1]],
    "row_count": 3,
}


@pytest.mark.parametrize(
    "answer, fabricated",
    [
        ("Key points:\n- USA is first\n- Canada is second", "Key points:\n- USA is first\n- Italy is second"),
        ("Summary: The USA is first; Canada is second.", "Summary: The USA is first; Italy is second."),
        ("The top countries are USA and Canada.", "The top countries are USA and Italy."),
        ("- Result: USA\n- Runner-up: Canada", "- Result: USA\n- Runner-up: Italy"),
        ("Hello Ada! The top 3 are: USA, Canada and France.", "Hello Ada! The top 3 are: USA, Italy and France."),
    ],
)
def test_a_plain_correct_answer_states_no_unsupported_name(answer: str, fabricated: str) -> None:
    """Clause items ("USA is first"), joining words ("USA and Canada") and "Label: value" lines
    are no names of their own (each flagged the right answer: helper-24); a name the rows do not
    hold in the same shape still is."""
    question = "Hi, I'm Ada. Which 3 countries brought in the most revenue?"
    assert check_answer(answer, question, [read(COUNTRIES)], needs_data=True).names == []
    flagged = check_answer(fabricated, question, [read(COUNTRIES)], needs_data=True).names
    assert "Italy" in flagged and all("Italy" in name for name in flagged)


@pytest.mark.parametrize(
    "answer",
    [
        "Step 1: I queried the invoices. Step 2: the top is USA.",
        "Étape 1 : la requête. Étape 2 : USA.",
        "Option 3) USA",
    ],
)
def test_the_label_of_a_step_is_no_figure(answer: str) -> None:
    """ "Step 1:" numbers the answer's own steps (it flagged the right answer: helper-24); a
    figure stated in the step is still checked."""
    question = "Which country brought in the most revenue?"
    assert check_answer(answer, question, [read(COUNTRIES)], needs_data=True).figures == []
    assert check_answer(answer + " It had 999 invoices.", question, [read(COUNTRIES)], needs_data=True).figures == [
        "999"
    ]


def test_a_result_of_deeply_nested_json_raises_nothing() -> None:
    """A tool result 5,000 arrays deep (a hostile MCP server) made ``json.loads`` raise
    RecursionError out of goal_results (helper-24); it is read as text now."""
    from langchain_core.messages import AIMessage, AnyMessage, ToolMessage

    from graph.goal_results import goal_results
    from graph.verification import verify
    from tools.spec import ToolSpec

    specs = [ToolSpec(name="q", description="Reads rows.", reads="data")]
    text = '{"summary": "ok", "data": ' + "[" * 5_000 + "]" * 5_000 + "}"
    work: list[AnyMessage] = [
        AIMessage("", tool_calls=[{"name": "q", "args": {}, "id": "c1"}]),
        ToolMessage(content=text, tool_call_id="c1", name="q"),
    ]
    results = goal_results(work, specs)
    assert [r.name for r in results] == ["q"]
    verify("The top is USA with 523.", "Which country?", "question", results, specs, work)
