"""Grounded, verified answers (DESIGN §5.5). Pure functions; no I/O.

Nothing here knows a tool by name: what a result holds comes from each tool's
``ToolSpec.reads`` ("data" | "schema") and what a call changed from ``side_effect``. (Claimed
effects are checked by :mod:`graph.claimed_effects`.)

* **Grounded**: an answer to a question about data rests on a *data read* of this goal — a
  successful call of a tool whose results hold data (``reads == "data"``). A schema
  description is not one, nor is a recalled memory. :func:`about_data` says when a goal is a
  question about data.
* **Verified** (:func:`check_answer`): every figure the answer states appears in a result of
  this goal (or in the arguments of the call that returned it: what was read), or is a
  rounding of one, or is a count of a result's listed items, or was in the request (parsing:
  :mod:`graph.answer_figures`). A claim that something does not exist (none, zero, "there are
  no …", 没有, aucun, keine …) rests on a data read that returned zero rows or a count of 0 —
  not one the tool marks ``unexpected_empty`` (nothing found although the period it names has
  data: a wrong join). Names the answer states are held by the results
  (:mod:`graph.answer_names`), what a which/who question asks for is not named only by its
  key, and a figure asked for a period does not come only from a read over every date.

Shapes: a :class:`Result` per successful tool result of the goal (:func:`goal_results`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from langchain_core.messages import AIMessage, AnyMessage

from graph.answer_figures import Known, figures, in_english, names_period, supported
from graph.answer_filters import extra_date_conditions, invented_figures, invented_filters, read_for, unfiltered_values
from graph.answer_grain import coarse_grain, one_of_many, reapplied_figures, single_row_ranking
from graph.answer_names import key_only, missing_names, stated_names
from graph.goal_results import Result, known_values, seen, strings_of, table_of
from graph.progress import required_steps
from memory.policy import split_sentences
from tools.selection import rank_tools
from tools.spec import ToolSpec

#: Prefix of the stop reason of an answer that could not be verified (DESIGN §5.5).
UNVERIFIED_ANSWER = "unverified answer"
#: Characters of the results quoted in an honest "could not establish" answer.
QUOTE_CHARS = 700


_ABSENCE = re.compile(
    r"\bthere\s+(?:are|were|is|was)\s+no\b|\bno\s+(?:data|records?|rows?|results?|entries|matches|matching|such)\b"
    r"|\b(?:none|nothing|nobody|zero)\b|\bnot\s+(?:a\s+single|any)\b|\b(?:could|can)\s*(?:n't|not)\s+find\b"
    r"|\b(?:does|do|did)\s*(?:n[’']t|\s+not)\s+(?:exist\b|(?:\w+\s+)?any\b)|\bno\s+\w+(?:\s+\w+)?\s+(?:was|were|are|is)\s+found\b"
    r"|\bno\s+\w+(?:\s+\w+)?\s+(?:in|for|during|at)\s+(?:the|this|that|your|\d{4})\b"
    # "No urgent tickets were opened …", "No revenue was brought in …" (measured: both false, both
    # passed as answers): a sentence opening with "No <noun>", or "no <noun> was/were <done>"
    r"|^\W*(?-i:No)\s+(?!doubt\b|problem\b|worries\b)[^\W\d]"
    r"|(?<!\bwith\s)\bno\s+(?:\w+\s+){1,3}?(?:was|were|has\s+been|have\s+been)\s+(?:\w+ed|\w+en|made|brought|sold|sent"
    r"|paid|found|placed|opened|closed|written|given|issued|recorded|shipped|received|spent|earned)\b"
    r"|没有|不存在|无(?:数据|记录|结果)|为零|为0"
    r"|ありません|存在しません|ゼロ|\baucun(?:e)?\b|\bil\s+n'y\s+a\s+(?:pas|aucun)|\bn'existe\s+pas\b"
    r"|\bno\s+hay\b|\bning[uú]n(?:a)?\b|\bno\s+existe\b|\bkeine?n?\b|\bgibt\s+es\s+nicht\b|\bnicht\s+vorhanden\b",
    re.IGNORECASE,
)


def absence_claims(answer: str) -> list[str]:
    """Sentences of ``answer`` that say something does not exist or is zero."""
    return [
        sentence
        for sentence in split_sentences(answer or "")
        if _ABSENCE.search(sentence)
        or any(any(v == 0 for v, _ in f.readings) and not (f.percent or f.part) for f in figures(sentence))
    ]


def unsupported_figures(answer: str, goal: str, results: Sequence[Result]) -> list[str]:
    """Figures of ``answer`` that are in no result of ``results`` (nor a rounding or a count
    of one) and not in ``goal`` (the request), as written, in order, without repeats. Once a
    data read exists, a schema read's numbers (row counts) support no figure: the answer is
    about the data (measured: "The average order value … is $5.00" on a table's row count)."""
    # the day or month of a date ("2026-11-01") supports only a date, never "1 invoice"
    parts: list[float] = []
    if any(r.is_data_read for r in results):
        results = [r for r in results if r.reads != "schema"]
    known = [v for r in results for v in known_values(r, parts)]
    known += [v for f in figures(goal) for v, _ in f.readings]
    # what a successful call asked for is what it read ("no sales in 2026-11" after a query
    # for 2026-11 that found none; "more than 1,000" after a query with that threshold)
    asked = [f for r in results for s in strings_of(r.args) for f in figures(s)]
    # ... but a small number in it ("interval 1 month", "LIMIT 5") is no count the read returned
    # (measured: "We issued 1 invoice last month" after COUNT(*) = 0 of "… - interval 1 month")
    plain = [v for f in asked if not f.part for v, _ in f.readings if abs(v) > 31]
    parts += [v for f in asked if f.part for v, _ in f.readings]
    # built once (sorted): a long answer against a large result stays fast
    for_part = Known([*known, *plain, *parts])
    for_plain = Known([*known, *plain, *(p for p in parts if p >= 1000)])
    out: list[str] = []
    seen: set[tuple[str, bool]] = set()
    for fig in in_english(figures(answer), answer):
        if all(v == 0 for v, _ in fig.readings) and not fig.part:
            continue  # a zero is an absence claim: judged by the reads that returned nothing
        if (fig.text, fig.part) in seen:
            continue
        seen.add((fig.text, fig.part))
        if not supported(fig, for_part if fig.part else for_plain):
            out.append(fig.text)
    return list(dict.fromkeys(out))  # a text read both as a date's part and as a figure: once


def undated_figures(answer: str, goal: str, results: Sequence[Result]) -> list[str]:
    """Figures of ``answer`` (not in ``goal``, not dates, not zero) that only reads over every
    date support (:attr:`Result.undated`): a total of all time stated for the period asked.
    Measured (Qwen2.5-Coder-1.5B): "Customers sent 187 replies in October 2026." (111)."""
    asked = Known(v for f in figures(goal) for v, _ in f.readings)
    known = [(r, Known(known_values(r, []))) for r in results]  # once per result, not per figure
    out: list[str] = []
    seen: set[str] = set()
    for fig in figures(answer):
        if fig.part or all(v == 0 for v, _ in fig.readings) or fig.text in seen or supported(fig, asked):
            continue
        seen.add(fig.text)
        backing = [r for r, values in known if supported(fig, values)]
        if backing and all(r.is_data_read and r.undated for r in backing):
            out.append(fig.text)
    return out


def undated_names(answer: str, goal: str, results: Sequence[Result]) -> list[str]:
    """Names ``answer`` states (not in ``goal``) that only reads over every date hold
    (:attr:`Result.undated`): a ranking of all time given for the period asked. Measured
    (Qwen2.5-Coder-1.5B, Chinook, "Which 5 countries brought in the most invoice revenue in
    2011?"): ``… GROUP BY Country ORDER BY SUM(Total) DESC LIMIT 5`` with no date condition, and
    the all-time five answered "in 2011" (one of them not in 2011's five)."""
    held = [(r, "\n".join(strings_of(seen(r), keys=True))) for r in results]
    out: list[str] = []
    for name in missing_names(stated_names(answer), goal):
        backing = [r for r, known in held if not missing_names([name], known)]
        if backing and all(r.is_data_read and r.undated for r in backing):
            out.append(name)
    return out


def unsupported_names(answer: str, goal: str, results: Sequence[Result]) -> list[str]:
    """Names ``answer`` states as its answer (:func:`graph.answer_names.stated_names`) that no
    result of ``results`` holds (its strings and field names: a schema read holds the tables'
    names) and ``goal`` (the request, the tools' descriptions) does not either."""
    known = "\n".join([goal, *(s for r in results for s in strings_of(seen(r), keys=True))])
    return missing_names(stated_names(answer), known)


@dataclass
class Check:
    """:func:`check_answer`'s verdict: ``grounded`` (a data read exists or none is needed),
    ``figures`` (unsupported ones, as written), ``names`` (names the answer states that no
    result holds, :mod:`graph.answer_names`), ``absences`` (claims of none with no empty read
    behind them), ``keys`` (a key given for a name), ``undated`` (figures or names over every date
    for a period), ``unfiltered`` (values the request names that no read restricted to,
    :mod:`graph.answer_filters`). ``ok`` when nothing is wrong."""

    grounded: bool = True
    figures: list[str] = field(default_factory=list)
    absences: list[str] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)
    undated: list[str] = field(default_factory=list)
    unfiltered: list[str] = field(default_factory=list)
    grain: list[str] = field(default_factory=list)
    conditions: list[str] = field(default_factory=list)
    reapplied: list[str] = field(default_factory=list)
    misread: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return (
            self.grounded
            and not self.figures
            and not self.absences
            and not self.names
            and not self.keys
            and not self.undated
            and not self.unfiltered
            and not self.grain
            and not self.conditions
            and not self.reapplied
        )

    @property
    def needs_read(self) -> bool:
        """Only a new read can mend it: a key for a name, a figure over every date, a "none" no
        empty read found, a value asked for that no read restricted to, rows of the wrong grain,
        a date condition not asked for, a column applied twice."""
        return bool(
            self.keys
            or self.undated
            or self.absences
            or self.unfiltered
            or self.grain
            or self.conditions
            or self.reapplied
        )

    def problems(self, quote: bool = True) -> list[str]:
        """What is unsupported, in words: for the model (``quote``: the claims of none quoted)
        and for the stop reason and the user (not quoted: a false "none" is never repeated)."""
        out = []
        if not self.grounded:
            out.append("it rests on no data read in this request (a schema or a memory is not data)")
        if self.figures:
            out.append(
                f"the figure{'s' if len(self.figures) > 1 else ''} {', '.join(self.figures[:6])} "
                f"{'are' if len(self.figures) > 1 else 'is'} in no tool result of this request"
            )
        for written, value in list(self.misread.items())[:3] if quote else []:
            out.append(f"{written} has the digits of {value}, which a result states: write {value} as it is")
        if self.names:
            listed = ", ".join(f"“{n[:60]}”" for n in self.names[:6])
            out.append(
                f"{'the names' if len(self.names) > 1 else 'the name'} {listed} {'are' if len(self.names) > 1 else 'is'} in no tool result of this request"
            )
        if self.undated:
            out.append(
                f"{', '.join(self.undated[:6])} {'come' if len(self.undated) > 1 else 'comes'} from a read with no "
                "condition on a date (over every date, or of tables that hold none), not the period asked: read "
                "again restricted to that period"
            )
        out.extend(self.grain[:2])
        out.extend(self.conditions[:2])
        out.extend(self.reapplied[:2])
        if self.unfiltered:
            out.append(
                f"the request names {', '.join(self.unfiltered)}, but no read of this request restricted to "
                f"{'them' if len(self.unfiltered) > 1 else 'it'} (or grouped by {'them' if len(self.unfiltered) > 1 else 'it'}): "
                "read again with that condition"
            )
        if self.keys:
            out.append(
                f"it names what was asked for only by its key ({', '.join(self.keys)}): the user asked which "
                "one — read its name (the row the key refers to) and answer with it"
            )
        if self.absences and not quote:
            out.append("its claim that there are none rests on no read that found nothing")
        out.extend(
            f'"{claim[:160]}" rests on no read that found nothing' for claim in (self.absences[:2] if quote else [])
        )
        return out


def about_data(
    answer: str,
    goal: str,
    results: Sequence[Result],
    can_read_data: bool,
    intent: str = "",
    tried: Iterable[ToolSpec] = (),
) -> bool:
    """Whether the goal is a question about data that must rest on a data read: a tool that
    reads data can be offered for it (``can_read_data``), it is not a stated preference, and
    either the model already read for it (a data or schema read: it went to the data for the
    answer; a call that failed counts, ``tried``) or the answer states what only data can tell
    (a figure not in the request, a claim that something does not exist). (:func:`verify` also
    counts an answer that hands the user a query to run, :func:`hands_over`.)"""
    if not can_read_data or intent == "preference":
        return False
    if any(r.reads in ("data", "schema") for r in results) or any(s.reads in ("data", "schema") for s in tried):
        return True
    return bool(unsupported_figures(answer, goal, []) or absence_claims(answer))


# a query or code for the user to run: SQL, a fenced block
_CODE = re.compile(r"```|\bSELECT\b[\s\S]{1,2000}?\bFROM\b|\b(?:MATCH|FIND)\s*\(|\bdb\.\w+\.find\(", re.IGNORECASE)
# ... which is the answer when the user asked for one
_ASKS_CODE = re.compile(
    r"\b(?:sql|query|queries|code|script|command|snippet|statement)\b|查询语句|语句|代码|脚本|クエリ|コード"
    r"|\brequête\b|\bAbfrage\b|\bconsulta\b",
    re.IGNORECASE,
)


def hands_over(answer: str, goal: str) -> bool:
    """True when ``answer`` gives the user a query or code to run (SQL, a fenced block) and
    ``goal`` did not ask for one: the work was handed back instead of done. Measured
    (Qwen2.5-Coder-1.5B, 4 of 44 data questions): "To find out …, you can use the following
    SQL query: …", ended as answered."""
    return bool(_CODE.search(answer or "")) and not _ASKS_CODE.search(goal or "")


def check_answer(
    answer: str,
    goal: str,
    results: Sequence[Result],
    *,
    needs_data: bool,
    period_asked: bool = False,
    request: str = "",
    described: str = "",
) -> Check:
    """Check ``answer`` against the goal's ``results`` (module docstring). ``needs_data``: the
    goal is a question about data (:func:`about_data`), so the answer must rest on a data read;
    ``period_asked``: the request names a period, so a figure only a read over every date
    supports (:attr:`Result.undated`) is not one for it; ``request``: the user's words alone
    (``goal`` may hold the tools' descriptions too), for what the question asks; ``described``:
    the tools' descriptions, whose words a name may use ("Query: …")."""
    reads = [r for r in results if r.is_data_read]
    check = Check(grounded=not needs_data or bool(reads))
    if not results and not needs_data:
        return check
    check.figures = unsupported_figures(answer, goal, results)
    check.misread = misread_figures(check.figures, reads)
    if reads:
        check.names = unsupported_names(answer, f"{goal}\n{described}", results)
        check.keys = key_only(answer, request or goal, table_of(reads[-1].data))
        if period_asked:
            check.undated = undated_figures(answer, goal, results) + undated_names(answer, goal, results)
        check.unfiltered = unfiltered_values(request or goal, [r for r in reads if not r.empty])
        check.conditions = extra_date_conditions(answer, request or goal, reads) + invented_figures(
            answer, request or goal, reads
        )
        check.reapplied = reapplied_figures(answer, reads)
        asked = request or goal
        check.grain = (
            coarse_grain(answer, asked, reads)
            + single_row_ranking(answer, asked, reads)
            + one_of_many(answer, asked, reads)
        )
    claims = absence_claims(answer)
    known = "\n".join([request or goal, *(t for r in reads if not r.empty for t in strings_of(seen(r), keys=True))])
    empty = [r for r in reads if r.empty and not r.unexpected_empty and not invented_filters(r, known)]
    check.absences = [c for c in claims if not any(read_for(r, f"{c}\n{request or goal}") for r in empty)]
    return check


def _digits(text: str) -> str:
    return re.sub(r"\D", "", text).strip("0")


def misread_figures(written: Sequence[str], reads: Sequence[Result]) -> dict[str, str]:
    """``{figure as written: the result value with the same digits}`` for unsupported figures
    that misplace a result's decimal point or separators ("38,620" after ``SUM(Total) = 38.62``:
    measured, written three times over by the 1.5B model). Told which value it misread, the
    model can write it as it is."""
    by_digits: dict[str, str] = {}  # built once: a long answer over a large result stays linear
    for value in (str(v) for r in reads for v in known_values(r, []) if isinstance(v, (int, float))):
        by_digits.setdefault(_digits(value), value)  # the first value with those digits wins
    out: dict[str, str] = {}
    for text in written:
        key = _digits(text)
        if len(key) >= 2 and (same := by_digits.get(key)):
            out[text] = same
    return out


def grounding_readers(goal: str, work: Sequence[AnyMessage], specs: Sequence[ToolSpec]) -> list[str]:
    """The read-only data tools to offer when an answer must be grounded, best first: those the
    model already called in this goal (``work``), even when the call failed — it chose them for
    this question — else every one, ranked by relevance to ``goal`` (``tools.selection``).

    Measured (Qwen2.5-Coder-1.5B, Chinook): a revenue question's query failed on a column
    name; sent to read with every data tool offered, the model listed an empty chat channel
    and answered "No messages found in the sales-team channel." — a true "none" about the
    wrong thing, presented as final."""
    readers = [s for s in specs if s.reads == "data" and not s.side_effect]
    tried = {c["name"] for m in work if isinstance(m, AIMessage) for c in m.tool_calls}
    chosen = [s.name for s in readers if s.name in tried]
    return chosen or [s.name for _, s in rank_tools(readers, goal)]


def can_read_data(specs: Iterable[ToolSpec]) -> bool:
    """True when a read-only tool whose results hold data is registered."""
    return any(s.reads == "data" and not s.side_effect for s in specs)


def verify(
    answer: str,
    goal: str,
    intent: str,
    results: Sequence[Result],
    specs: Sequence[ToolSpec],
    work: Sequence[AnyMessage] = (),
) -> Check:
    """:func:`check_answer` of ``answer`` with the goal's grounding need decided here: a
    question about data (:func:`about_data`; ``work``, the goal's messages up to the answer,
    tells which tools the model tried) with no side-effect step requested (a task's steps are
    its evidence) must rest on a data read. Figures of the request and of the tools' own
    descriptions are known (what the model was told), besides the results."""
    # what the model was told about its tools ("1-8 queries", "at most 500 rows") is no claim
    # about the user's data: figures from the tools' own descriptions count as known — until
    # data was read, when a figure must come from the data (measured: "There are currently 1
    # customer in Japan" after COUNT(*) = 0 passed on the "1" of "1-8 queries")
    reads_data = any(r.is_data_read for r in results)
    told = goal if reads_data else "\n".join([goal, *(s.description for s in specs)])
    called = {c["name"] for m in work if isinstance(m, AIMessage) for c in m.tool_calls}
    tried = [s for s in specs if s.name in called and not s.side_effect]  # a read, even failed
    readable = can_read_data(specs)
    handed = readable and intent != "preference" and hands_over(answer, goal)
    needs = (about_data(answer, told, results, readable, intent, tried) or handed) and not any(
        s.side_effect for s in specs if s.name in required_steps(goal, specs)
    )
    described = "\n".join(s.description for s in specs)  # names the tools use are no claim either
    return check_answer(
        answer, told, results, needs_data=needs, period_asked=names_period(goal), request=goal, described=described
    )


def what_the_data_shows(results: Sequence[Result], limit: int = QUOTE_CHARS) -> str:
    """A short quote of the goal's data reads (each summary and the start of its data), or
    what was read instead when no data was."""
    reads = [r for r in results if r.is_data_read] or list(results)
    if not reads:
        return "nothing was read in this request"
    parts = []
    for r in reads[-3:]:
        rows = r.data.get("rows") if isinstance(r.data, dict) else None
        if isinstance(rows, list) and len(rows) <= 1:  # the summary states that row's values already
            parts.append(r.summary + (f" ({r.note[:160]})" if r.note else ""))
            continue
        data = json.dumps(r.data, ensure_ascii=False, default=str)
        parts.append(f"{r.summary} {data[:240]}" + ("…" if len(data) > 240 else ""))
    text = " | ".join(parts)
    return text[:limit] + ("…" if len(text) > limit else "")


def honest_answer(goal: str, reason: str, results: Sequence[Result]) -> str:
    """The answer the user gets when the model's could not be verified: what could not be
    established, why, and what the data read in this request shows (quoted briefly)."""
    what = " ".join(goal.split())[:200]
    shows = what_the_data_shows(results)
    lead = "No data was read" if not any(r.is_data_read for r in results) else "Here is what the data shows"
    return (
        f"I could not establish an answer to “{what}”: {reason}. {lead}: {shows}. "
        "Ask again (perhaps more precisely), or point Hermes at a stronger model (HERMES_BASE_URL / --base-url)."
    )


def earlier_answers(work: Sequence[AnyMessage]) -> list[int]:
    """Indexes in ``work`` of the model's answers (AI messages without tool calls, not Hermes's
    own notices), oldest first."""
    return [
        i
        for i, m in enumerate(work)
        if isinstance(m, AIMessage) and not (m.tool_calls or m.invalid_tool_calls) and m.name != "hermes"
    ]
