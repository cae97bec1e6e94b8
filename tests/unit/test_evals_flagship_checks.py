"""The flagship suite's post check (``evals.flagship_checks``, issue 18): a post about a report
carries the report's period, at least two of its figures and its path; a post that narrates
the act, or leaves any of the three out, is caught."""

from __future__ import annotations

from pathlib import Path

import pytest

from evals.flagship_checks import post_problems, report_figures, report_period, text_figures

REPORT = """# Sales report — 2011-12 (latest month with data; last month, 2026-11, has none)

Period: **2011-12**

Source: `chinook.db` (read-only), generated 2026-12-03 17:00 UTC

## Revenue and invoices

| revenue | invoices |
|---:|---:|
| 38.62 | 7 |

## Revenue by country

| country | revenue |
|---|---:|
| USA | 1,234.50 |
| Canada | NULL |
"""


@pytest.fixture
def report(tmp_path: Path) -> Path:
    path = tmp_path / "threads" / "t" / "reports" / "sales-report-2011-12.md"
    path.parent.mkdir(parents=True)
    path.write_text(REPORT)
    return path


def test_the_report_facts_are_read_from_the_file():
    assert report_period(REPORT) == "2011-12"
    assert report_figures(REPORT) == [38.62, 7.0, 1234.5]
    # a date, a path and a file name hold no figures; separators and decimals are read
    assert text_figures("On 2011-12-22 at 10:30, see reports/sales-2011-12.md: 1,234.50 and 7.") == [
        (1234.5, 2),
        (7.0, 0),
    ]


@pytest.mark.parametrize(
    "post",
    [
        # the report's own ready message (tools/builtin/report_share.py)
        "Sales report — 2011-12\n- revenue: 38.62\n- invoices: 7\nFull report: {path}",
        # another wording: the month spelt out, a rounding, the file name only
        "December 2011 sales: revenue 38.6 over 7 invoices; USA 1,235. See sales-report-2011-12.md",
    ],
)
def test_a_post_carrying_the_period_figures_and_path_passes(report, post):
    assert post_problems(post.format(path=report), report) == []


def test_the_reported_narration_fails_on_every_count(report):
    problems = post_problems("I have posted the analysis report to the project group and scheduled it.", report)
    assert len(problems) == 3
    assert "period '2011-12'" in problems[0] and "0 of the report's figures" in problems[1] and "path" in problems[2]


@pytest.mark.parametrize(
    ("post", "missing"),
    [
        ("Sales report 2011-12: revenue 38.62. Full report: {path}", "1 of the report's figures"),
        ("Sales report: revenue 38.62, 7 invoices. Full report: {path}", "period"),
        ("Sales report 2011-12: revenue 38.62, 7 invoices.", "path"),
        # a figure that is not the report's is not one of its figures
        ("Sales report 2011-12: revenue 40.00, 9 invoices. Full report: {path}", "0 of the report's figures"),
        # the last month, which has no data, is not the report's period
        ("Sales report 2026-11: revenue 38.62, 7 invoices. Full report: {path}", "period"),
    ],
)
def test_a_post_missing_one_part_fails(report, post, missing):
    problems = post_problems(post.format(path=report), report)
    assert len(problems) == 1 and missing in problems[0], problems
