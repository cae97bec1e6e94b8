"""The scripted session of the ``sessions`` suite (``evals.suites.sessions``): ten planted facts,
then mixed work (sales queries with 40-row tool results, team-chat posts, reminders, small talk),
a question about one planted fact every :data:`QUESTION_EVERY` turns (literal and paraphrased
alternately) and ``query_database``'s schema change halfway. Deterministic for a seed.
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

#: (what, value, paraphrased question). The paraphrase shares no content word with "the <what>
#: is <value>" (checked by :func:`shared_words`; the CI sample test asserts it).
FACTS: list[tuple[str, str, str]] = [
    ("warehouse code for Lyon", "LY-4471", "Which depot identifier did I give you for that French city on the Rhône?"),
    ("budget owner for marketing", "Ines Moreau", "Who holds the purse strings of our advertising department?"),
    (
        "VPN gateway for the Osaka office",
        "vpn-osk-02",
        "Through which tunnel endpoint do staff in our Japanese branch connect?",
    ),
    (
        "account number of the supplier Fabrikam",
        "FB-90317",
        "What billing reference did I give you for our parts vendor?",
    ),
    (
        "preferred report format of the CFO",
        "one-page PDF",
        "How does our chief financial officer like documents delivered?",
    ),
    ("SLA for priority-1 tickets", "4 hours", "How fast must we respond to the most urgent support cases?"),
    ("project code name for the mobile app", "Bluefin", "What nickname did we give the smartphone application effort?"),
    ("discount agreed with Contoso", "12 percent", "What price reduction did we settle on with that client?"),
    (
        "backup window for the sales database",
        "02:00-03:00 UTC",
        "When do the nightly copies of our revenue data store run?",
    ),
    ("team channel for incidents", "ops-911", "Where should outage alerts be posted?"),
]
REGIONS = ["north", "south", "east", "west", "central"]
QUESTION_EVERY = 5
STOP = set(
    """a an the is are was were be been of for to in on at by with from that this these those
what which who whom how when where why did do does i you we our us me my your it its give gave
given tell told must should through like most""".split()
)


def content_words(text: str) -> set[str]:
    """Lower-cased words of ``text`` minus stop words, each cut to its first 5 letters (so
    "warehouse"/"warehouses" count as shared)."""
    return {w[:5] for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOP}


def shared_words(fact: int) -> set[str]:
    """Content words the paraphrased question of ``FACTS[fact]`` shares with the fact."""
    what, value, para = FACTS[fact]
    return content_words(f"the {what} is {value}") & content_words(para)


def _tool_specs(sql_arg: str) -> list[Any]:
    from tools.spec import ToolSpec

    return [
        ToolSpec(
            name="query_database",
            description="Run a read-only SQL query on the sales database.",
            parameters={
                "type": "object",
                "properties": {sql_arg: {"type": "string", "description": "SQL"}},
                "required": [sql_arg],
            },
        ),
        ToolSpec(
            name="post_message",
            side_effect=True,
            description="Post a message to a team-chat channel.",
            parameters={
                "type": "object",
                "properties": {"channel": {"type": "string"}, "text": {"type": "string"}},
                "required": ["channel", "text"],
            },
        ),
    ]


class ScriptedToolbox:
    """The registry assemble_context reads (specs, schema changes, migration notes); no runner runs."""

    def __init__(self) -> None:
        from tools.registry import ToolRegistry

        self.registry = ToolRegistry()
        for spec in _tool_specs("sql"):
            self.registry.register(spec, self._never)

    @staticmethod
    async def _never(args: dict, request_id: str) -> Any:  # pragma: no cover - scripted session
        raise RuntimeError("the sessions suite replays scripted tool results")

    def change_schema(self) -> None:
        """``query_database``'s argument renamed ``sql`` → ``query`` (a breaking change, seed §6.3)."""
        self.registry.unregister("query_database")
        self.registry.register(_tool_specs("query")[0], self._never)

    async def aclose(self) -> None:
        pass


@dataclasses.dataclass
class Turn:
    messages: list[BaseMessage]
    fact: int | None = None  # index into FACTS when this turn asks about a planted fact
    paraphrased: bool = False
    schema_change: bool = False


def build_session(turns: int, seed: int = 7) -> list[Turn]:
    """The scripted session: 10 planting turns, then work with a question every ``QUESTION_EVERY``
    turns (literal and paraphrased alternately) and ``query_database``'s schema change halfway."""
    rng = random.Random(seed)
    session: list[Turn] = []
    for i, (what, value, _) in enumerate(FACTS):
        session.append(
            Turn(
                [
                    HumanMessage(f"Please remember: the {what} is {value}.", id=f"fact{i}"),
                    AIMessage("Noted, I will keep that in mind.", id=f"fact{i}-ack"),
                ]
            )
        )
    arg = "sql"
    questions = 0
    t = len(session)
    while t < turns:
        t += 1
        if t == max(len(FACTS) + 1, turns // 2):
            arg = "query"
            session[-1].schema_change = True
        if t % QUESTION_EVERY == 0:
            k = rng.randrange(len(FACTS))
            paraphrased = questions % 2 == 1
            questions += 1
            what, _, para = FACTS[k]
            text = para if paraphrased else f"What was the {what} I told you?"
            session.append(
                Turn(
                    [
                        HumanMessage(text, id=f"q{t}"),
                        AIMessage("Answered from what you told me earlier.", id=f"q{t}-a"),
                    ],
                    k,
                    paraphrased,
                )
            )
            continue
        kind = rng.choice(["query", "query", "post", "remind", "chat"])
        if kind == "query":
            region = rng.choice(REGIONS)
            revenue = [rng.randint(100, 9999) for _ in range(40)]
            rows = [[f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}", region, r] for r in revenue]
            call = {
                "name": "query_database",
                "id": f"c{t}",
                "args": {arg: f"SELECT day, region, revenue FROM sales WHERE region = '{region}'"},
            }
            body = {
                "status": "ok",
                "summary": "query_database: 40 rows",
                "data": {"columns": ["day", "region", "revenue"], "rows": rows},
            }
            session.append(
                Turn(
                    [
                        HumanMessage(f"Show daily revenue for the {region} region.", id=f"h{t}"),
                        AIMessage("", tool_calls=[call], id=f"a{t}"),
                        ToolMessage(json.dumps(body), tool_call_id=f"c{t}", name="query_database", id=f"r{t}"),
                        AIMessage(f"The {region} region had {sum(revenue)} in revenue over 40 days.", id=f"f{t}"),
                    ]
                )
            )
        elif kind == "post":
            call = {
                "name": "post_message",
                "args": {"channel": "project", "text": f"Update {t}: numbers are in."},
                "id": f"c{t}",
            }
            body = {"status": "ok", "summary": f"post_message: id={t}", "data": {"id": t, "channel": "project"}}
            session.append(
                Turn(
                    [
                        HumanMessage(f"Post update {t} to the project channel.", id=f"h{t}"),
                        AIMessage("", tool_calls=[call], id=f"a{t}"),
                        ToolMessage(json.dumps(body), tool_call_id=f"c{t}", name="post_message", id=f"r{t}"),
                        AIMessage("Posted.", id=f"f{t}"),
                    ]
                )
            )
        elif kind == "remind":
            session.append(
                Turn(
                    [
                        HumanMessage(f"Remind me monthly about item {t}.", id=f"h{t}"),
                        AIMessage(f"Reminder {t} set for the 1st of every month.", id=f"f{t}"),
                    ]
                )
            )
        else:
            session.append(
                Turn(
                    [
                        HumanMessage(rng.choice(["thanks!", "how are you today?", "nice, carry on", "ok"]), id=f"h{t}"),
                        AIMessage("Happy to help.", id=f"f{t}"),
                    ]
                )
            )
    return session
