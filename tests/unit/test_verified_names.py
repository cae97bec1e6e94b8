"""Names an answer states rest on this goal's results (DESIGN §5.5, issue 18 "verified answers").

Measured (Qwen2.5-Coder-1.5B on Chinook): "The top 5 countries … are: USA, Canada, Germany,
France, and Italy." after a read whose rows held Brazil and the Czech Republic, not Germany or
Italy — presented as final. Pure rules of ``graph.answer_names`` in several languages and list
shapes, then the graph: such an answer goes back to the model once with the names, and if it
is still unsupported the user gets the honest answer and no task memory is written.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from graph import resources
from graph.answer_names import missing_names, stated_names
from graph.builder import make_graph
from graph.goal_results import Result
from graph.state import InputState
from graph.verification import UNVERIFIED_ANSWER, check_answer
from tests.conftest import FakeToolbox, tool_call
from tools.builtin.catalog import QUERY_DATABASE
from tools.builtin.database import query_database
from tools.spec import ToolSpec

COUNTRIES = {
    "columns": ["BillingCountry", "revenue"],
    "rows": [["USA", 523.06], ["Canada", 303.96], ["France", 195.1], ["Brazil", 190.1], ["Czech Republic", 90.24]],
    "row_count": 5,
}
QUESTION = "Which 5 countries brought in the most invoice revenue in 2011? Answer only, do not post anything."


def result(data: Any, reads: str | None = "data") -> Result:
    return Result("query_database", "q1", reads, False, data, "query_database: ok", None, "")


async def ask(ctx, text: str) -> dict[str, Any]:
    """One turn of ``text`` through the real graph (in-memory checkpoints); the background
    memory writes drained."""
    out = await make_graph(InMemorySaver()).ainvoke(
        InputState(messages=[HumanMessage(text)]), {"configurable": {"thread_id": "t"}}, context=ctx
    )
    await resources.drain_background()
    return out


@pytest.mark.parametrize(
    "answer, names",
    [
        ("The top 5 are: USA, Canada, Germany, France, and Italy.", ["USA", "Canada", "Germany", "France", "Italy"]),
        ("The artist with the most tracks is 'Queen'.", ["Queen"]),
        ("The artist with the most tracks is Iron Maiden.", ["Iron Maiden"]),
        ("The top artist is Iron Maiden (213 tracks).", ["Iron Maiden"]),
        ("The customer who spent the most is Helena Holý, with $49.62.", ["Helena Holý"]),
        ("1. **USA** - $523.06\n2. Canada: $303.96\n- Brazil (190.10)", ["USA", "Canada", "Brazil"]),
        ("Die besten Länder sind USA, Kanada und Frankreich.", ["USA", "Kanada", "Frankreich"]),
        ("Les meilleurs pays sont les USA, le Canada et la France.", ["USA", "Canada", "France"]),
        ("收入最高的国家是 USA、Canada 和 France。", ["USA", "Canada", "France"]),
        ("Los mejores son «Queen» y «U2».", ["Queen", "U2"]),
    ],
)
def test_the_names_an_answer_states_are_found(answer, names):
    assert stated_names(answer) == names


@pytest.mark.parametrize(
    "answer",
    [
        "There are 8 customers in Canada.",
        "There are currently 18 open tickets.",
        "The total revenue in December 2011 is $5,678.",
        "The best month was November 2026 with 1,234 orders.",
        "Sales were best in March.",
        "No data for November 2026; the latest month with data is December 2011.",
        "The average rating is 4.2 out of 5.",
        "The total is 38.62 USD.",
    ],
)
def test_figures_periods_and_prose_are_no_names(answer):
    assert stated_names(answer) == []


def test_a_name_no_result_holds_is_unsupported_and_the_others_pass():
    answer = "The top 5 are: USA, Canada, Germany, France, and Italy."
    check = check_answer(answer, QUESTION, [result(COUNTRIES)], needs_data=True)
    assert check.names == ["Germany", "Italy"] and not check.ok
    assert "“Germany”, “Italy”" in "; ".join(check.problems())
    right = "The top 5 are: USA, Canada, France, Brazil and the Czech Republic."
    assert check_answer(right, QUESTION, [result(COUNTRIES)], needs_data=True).ok


def test_names_are_compared_blind_to_case_accents_and_split_fields():
    person = {"columns": ["FirstName", "LastName", "total"], "rows": [["Helena", "Holy", 49.62]], "row_count": 1}
    assert check_answer(
        "The top customer is HELENA HOLÝ, with $49.62.", "Top customer?", [result(person)], needs_data=True
    ).ok
    # a name the user wrote, or a table the schema read listed, is known too
    assert missing_names(["Iron Maiden"], "How many tracks does Iron Maiden have?") == []
    assert missing_names(["InvoiceLine"], '{"tables": [{"name": "InvoiceLine"}]}') == []


def test_names_are_checked_only_against_data_reads_of_this_goal():
    # with no data read the grounding rule decides (a schema alone is no data read)
    schema = Result("describe_database", "d1", "schema", False, {"tables": [{"name": "Invoice"}]}, "", None, "")
    check = check_answer("The top country is Germany.", QUESTION, [schema], needs_data=True)
    assert not check.grounded and check.names == []


# --- the graph ------------------------------------------------------------------------------------


async def test_a_list_naming_what_no_read_returned_goes_back_once_then_ends_honest(scripted, db):
    sql = "SELECT name FROM products ORDER BY name LIMIT 3"
    top = [row[0] for row in query_database(sql, database=str(db))["rows"]]
    box = FakeToolbox()
    box.add_spec(QUERY_DATABASE, lambda sql: query_database(sql, database=str(db)))
    ctx = scripted(
        [
            tool_call("query_database", {"sql": sql}, "q1"),
            AIMessage(f"The 3 products are: {top[0]}, Quantum Toaster and Hyper Blender."),
            AIMessage(f"The 3 products are: {top[0]}, Quantum Toaster and Hyper Blender."),  # again
        ],
        box,
        embeddings="hash",
    )
    out = await ask(ctx, "Which 3 products come first by name? Answer only.")
    note = scripted.models[ctx.model].seen[2][-1].content
    assert "Quantum Toaster" in note and "Hyper Blender" in note  # told which names are unsupported
    assert out["stop_reason"].startswith(UNVERIFIED_ANSWER)
    final = out["messages"][-1].content
    # honest: what could not be established and why, then what the data shows
    assert final.startswith("I could not establish") and "in no tool result" in final and top[1] in final
    assert await resources.get_memory(ctx).episodic.list(ctx.user_id, kinds=["task"]) == []


async def test_a_list_of_names_the_read_returned_is_final(scripted, db):
    sql = "SELECT name FROM products ORDER BY name LIMIT 3"
    top = [row[0] for row in query_database(sql, database=str(db))["rows"]]
    box = FakeToolbox()
    box.add_spec(QUERY_DATABASE, lambda sql: query_database(sql, database=str(db)))
    answer = f"The 3 products are: {top[0]}, {top[1]} and {top[2]}."
    ctx = scripted([tool_call("query_database", {"sql": sql}, "q1"), AIMessage(answer)], box, embeddings="hash")
    out = await ask(ctx, "Which 3 products come first by name? Answer only.")
    assert out["stop_reason"] is None and out["messages"][-1].content == answer
    assert len(await resources.get_memory(ctx).episodic.list(ctx.user_id, kinds=["task"])) == 1


# --- grounding offers the data tools the goal already tried -----------------------------------------

LIST_MESSAGES = ToolSpec(
    name="list_messages",
    description="List the latest messages of a team chat channel (read-only).",
    parameters={"type": "object", "properties": {"channel": {"type": "string"}}, "required": []},
    side_effect=False,
    reads="data",
    source="mcp:team_chat",
)


async def test_sent_to_read_the_model_is_offered_the_data_tool_it_already_tried(scripted, db):
    """Measured (Chinook): a failed query, then an answer from nowhere; with every data tool
    offered the model listed an empty chat channel and answered "No messages found …"."""
    box = FakeToolbox()
    box.add_spec(QUERY_DATABASE, lambda sql: query_database(sql, database=str(db)))
    box.add_spec(LIST_MESSAGES, lambda channel="": {"channel": channel, "messages": [], "count": 0})
    sql = "SELECT COUNT(*) FROM customers"
    ctx = scripted(
        [
            tool_call("query_database", {"sql": "SELECT CountryName FROM customers"}, "q1"),  # fails
            AIMessage("The top countries are: USA, Canada and Italy."),  # no data read
            tool_call("query_database", {"sql": sql}, "q2"),
            AIMessage(f"There are {query_database(sql, database=str(db))['rows'][0][0]} customers."),
        ],
        box,
        embeddings="hash",
    )
    out = await ask(ctx, "How many customers are there per country?")
    offers = scripted.models[ctx.model].offers
    assert set(offers[0]) >= {"query_database", "list_messages"}  # at first, both
    assert offers[2] == ["query_database"]  # sent to read: the one it chose for this question
    assert out["stop_reason"] is None


def test_with_no_data_tool_tried_every_one_is_offered_the_most_relevant_first():
    from graph.verification import grounding_readers

    specs = [LIST_MESSAGES, QUERY_DATABASE]
    ranked = grounding_readers("Which countries brought in the most invoice revenue in the database?", [], specs)
    assert ranked == ["query_database", "list_messages"]
    assert grounding_readers("What are the latest messages in the team chat channel?", [], specs)[0] == "list_messages"


# --- what was asked for named only by its key -------------------------------------------------------

AGENTS = {"columns": ["agent_id", "COUNT(*)"], "rows": [[3, 46], [5, 41]], "row_count": 2}


@pytest.mark.parametrize(
    "goal, answer",
    [
        ("Which agent has solved or closed the most tickets?", "The agent with the most is agent ID 3."),
        ("Who solved the most tickets?", "Agent 3 solved 46 tickets."),
        ("Quel agent a résolu le plus de tickets ?", "C'est l'agent 3."),
        ("Welcher Agent hat die meisten Tickets gelöst?", "Agent 3 mit 46 Tickets."),
        ("哪个客服解决的工单最多？", "是3号客服，共46个。"),
    ],
)
def test_an_answer_naming_what_was_asked_only_by_its_key_goes_back(goal, answer):
    check = check_answer(answer, goal, [result(AGENTS)], needs_data=True)
    assert check.keys == ["agent_id 3"] and not check.ok
    assert "only by its key (agent_id 3)" in "; ".join(check.problems())


@pytest.mark.parametrize(
    "goal, answer, data",
    [
        # the read holds the name and the answer gives it
        (
            "Which agent solved the most tickets?",
            "Maria Lopez (agent 3) solved 46.",
            {"columns": ["agent_id", "name", "n"], "rows": [[3, "Maria Lopez", 46]], "row_count": 1},
        ),
        ("Which agent id solved the most tickets?", "Agent 3.", AGENTS),  # the key was asked for
        ("How many tickets did the busiest agent solve?", "46 tickets.", AGENTS),  # not a which-question
        ("Which agent solved the most tickets?", "The busiest agent solved 46 tickets.", AGENTS),  # no key said
    ],
)
def test_a_name_the_key_itself_asked_for_or_no_key_stated_passes(goal, answer, data):
    assert check_answer(answer, goal, [result(data)], needs_data=True).keys == []


# --- a query handed to the user is no answer --------------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        "To find out, you can use the following SQL query:\n```sql\nSELECT COUNT(*) FROM customers\n```",
        "Run SELECT name FROM artists ORDER BY tracks DESC LIMIT 1 to see it.",
        "Vous pouvez utiliser cette requête : select count(*) from clients;",
    ],
)
def test_a_query_handed_to_the_user_instead_of_an_answer_must_be_read(answer):
    from graph.verification import verify

    check = verify(answer, "How many customers do we have?", "question", [], [QUERY_DATABASE])
    assert not check.grounded


@pytest.mark.parametrize(
    "goal", ["Write me an SQL query that counts customers.", "Give me the code to count customers.", "写一个查询语句"]
)
def test_a_query_asked_for_is_an_answer(goal):
    from graph.verification import verify

    answer = "```sql\nSELECT COUNT(*) FROM customers\n```"
    assert verify(answer, goal, "question", [], [QUERY_DATABASE]).ok


# --- an announced next step is a narration, not a second answer -------------------------------------


async def test_an_announced_next_step_after_a_send_back_is_sent_to_read_again(scripted, db):
    """Measured (Chinook): sent to read, the model repeated its failing query, then answered "I
    will now adjust my approach by querying the 'Country' table directly." — and the run stopped
    as unanswered. An announcement is no answer: the model reads again and answers."""
    box = FakeToolbox()
    box.add_spec(QUERY_DATABASE, lambda sql: query_database(sql, database=str(db)))
    good = "SELECT COUNT(*) FROM customers"
    count = query_database(good, database=str(db))["rows"][0][0]
    ctx = scripted(
        [
            tool_call("query_database", {"sql": "SELECT CountryName FROM customers"}, "q1"),  # fails
            AIMessage("The top countries are: USA, Canada and Italy."),  # no data read: sent to read
            tool_call("query_database", {"sql": "SELECT CountryName FROM customers"}, "q2"),  # fails again
            AIMessage("I will now adjust my approach by querying the customers table directly."),
            tool_call("query_database", {"sql": good}, "q3"),
            AIMessage(f"There are {count} customers."),
        ],
        box,
        embeddings="hash",
    )
    out = await ask(ctx, "How many customers are there?")
    assert scripted.models[ctx.model].offers[4] == ["query_database"]  # after the announcement: read
    assert out["stop_reason"] is None and out["messages"][-1].content == f"There are {count} customers."


@pytest.mark.parametrize(
    "text, announces",
    [
        ("I will now adjust my approach by querying the Country table directly.", True),
        ("Let me check the Invoice table.", True),
        ("I'll run the query now.", True),
        ("Je vais interroger la table des factures.", True),
        ("Ich werde die Tabelle abfragen.", True),
        ("让我查询一下。", True),
        ("There are 8 customers. Let me know if you need more.", False),
        ("I will not guess.", False),
        ("There are 8 customers in Canada.", False),
    ],
)
def test_what_announces_a_next_step(text, announces):
    from graph.claimed_effects import announces_action

    assert announces_action(text) is announces


async def test_an_answer_repeating_the_tools_note_is_sent_to_act_on_it(scripted, db):
    """Measured (the sales database): a join of an id to a name found nothing; the tool's note
    said so and asked for another query, and the model answered with the note itself, twice."""
    from tests.conftest import DEMO_END_MONTH

    box = FakeToolbox()
    box.add_spec(QUERY_DATABASE, lambda sql: query_database(sql, database=str(db)))
    # (the measured join now runs mended, tools/builtin/database/repairs.py: a misspelt value
    # leaves the same kind of note)
    bad = f"SELECT SUM(revenue) FROM sales_lines WHERE category = 'Softwear' AND order_date LIKE '{DEMO_END_MONTH}-%'"
    good = f"SELECT ROUND(SUM(revenue), 2) FROM sales_lines WHERE order_date LIKE '{DEMO_END_MONTH}-%'"
    note = query_database(bad, database=str(db))["note"]
    total = query_database(good, database=str(db))["rows"][0][0]
    ctx = scripted(
        [
            tool_call("query_database", {"sql": bad}, "q1"),
            AIMessage(note),  # the tool's note as the answer
            tool_call("query_database", {"sql": good}, "q2"),
            AIMessage(f"Revenue in {DEMO_END_MONTH} was {total:,.2f}."),
        ],
        box,
        embeddings="hash",
    )
    out = await ask(ctx, f"What was our revenue in {DEMO_END_MONTH}?")
    model = scripted.models[ctx.model]
    assert model.offers[2] == ["query_database"] and "no answer" in model.seen[2][-1].content
    assert out["stop_reason"] is None and out["messages"][-1].content.startswith(f"Revenue in {DEMO_END_MONTH}")


def test_the_key_rule_reads_the_users_words_not_the_tools_descriptions():
    """Measured: through ``verify`` the request was joined with the tools' descriptions, whose
    "id" and "number" made every question look like one asking for a key."""
    from graph.verification import verify
    from tests.conftest import flagship_specs

    answer = "The agent with the highest number of solved or closed tickets is agent ID 3."
    goal = "Which agent has solved or closed the most tickets?"
    check = verify(answer, goal, "question", [result(AGENTS)], flagship_specs())
    assert check.keys == ["agent_id 3"] and not check.ok


async def test_a_total_computed_by_hand_over_several_rows_requires_the_tool_to_compute_it(scripted, db):
    """Measured (Chinook): seven invoice totals read, then "$13,868" and "$5,678" — summed by
    hand, twice, and the run ended unanswered. The model is made to call the tool again."""
    box = FakeToolbox()
    box.add_spec(QUERY_DATABASE, lambda sql: query_database(sql, database=str(db)))
    rows_sql = "SELECT unit_price FROM products ORDER BY product_id LIMIT 7"
    sum_sql = "SELECT ROUND(SUM(unit_price), 2) FROM (SELECT unit_price FROM products ORDER BY product_id LIMIT 7)"
    total = query_database(sum_sql, database=str(db))["rows"][0][0]
    ctx = scripted(
        [
            tool_call("query_database", {"sql": rows_sql}, "q1"),
            AIMessage("The total is 13,868."),  # summed by hand
            tool_call("query_database", {"sql": sum_sql}, "q2"),
            AIMessage(f"The total is {total:,.2f}."),
        ],
        box,
        embeddings="hash",
    )
    out = await ask(ctx, "What is the total unit price of the first 7 products?")
    model = scripted.models[ctx.model]
    note = model.seen[2][-1].content
    assert model.offers[2] == ["query_database"] and "never by hand: call query_database now" in note
    assert out["stop_reason"] is None and out["messages"][-1].content == f"The total is {total:,.2f}."


def test_a_label_the_tools_own_words_give_is_no_unsupported_name():
    """A label line ("- Query: …") names a word of the tools' descriptions: after a data read
    those descriptions support no figure, but their words stay known to the name check."""
    from graph.verification import verify
    from tests.conftest import flagship_specs

    answer = "- Query: revenue by country\n- Result: USA, Canada and France"
    assert verify(answer, QUESTION, "question", [result(COUNTRIES)], flagship_specs()).names == []


async def test_a_key_for_a_name_requires_a_new_read_before_the_next_answer(scripted, db):
    """Measured (tickets database): sent back for "agent_id 3" with no call required, the model
    repeated the same answer word for word and the run ended unanswered. A key for a name, like
    a figure over every date or an unfounded "none", is mended only by a read: a call is required."""
    box = FakeToolbox()
    box.add_spec(QUERY_DATABASE, lambda sql: query_database(sql, database=str(db)))
    by_key = "SELECT customer_id, COUNT(*) AS n FROM orders GROUP BY customer_id ORDER BY n DESC LIMIT 1"
    top_id, count = query_database(by_key, database=str(db))["rows"][0]
    by_name = f"SELECT name FROM customers WHERE customer_id = {top_id}"
    name = query_database(by_name, database=str(db))["rows"][0][0]
    ctx = scripted(
        [
            tool_call("query_database", {"sql": by_key}, "q1"),
            AIMessage(f"The customer with the most orders is customer_id {top_id}, with {count} orders."),
            tool_call("query_database", {"sql": by_name}, "q2"),
            AIMessage(f"{name} placed the most orders ({count})."),
        ],
        box,
        embeddings="hash",
    )
    out = await ask(ctx, "Which customer placed the most orders?")
    model = scripted.models[ctx.model]
    note = model.seen[2][-1].content
    assert model.offers[2] == ["query_database"] and "Only a new read can answer it: call query_database now" in note
    assert out["stop_reason"] is None and out["messages"][-1].content.startswith(name)


@pytest.mark.parametrize(
    "answer, missing",
    [
        ("The top countries are: United States (USA), Canada and France.", []),
        ("The top countries are: USA (United States), Canada and France.", []),
        ("1. United States (USA) - $523.06\n2. Canada - $303.96", []),
        ("Die besten Länder sind Vereinigte Staaten (USA) und Kanada.", ["Kanada"]),
        ("The top countries are: United States (America), Canada and France.", ["United States (America)"]),
        ("- Germany (DE): 12\n- Canada: 303.96", ["Germany (DE)"]),  # a joiner-like alias holds nothing
    ],
)
def test_a_name_with_another_name_for_it_in_brackets_is_held_when_either_is(answer, missing):
    assert missing_names(stated_names(answer), "USA 523.06 Canada 303.96 France 195.1") == missing
