"""graph.history.without_failed_arguments: what an embedded model's prompt shows of a call that
failed in the tool (its arguments become {}; the error result stays), and that the stored
history is never changed."""

from __future__ import annotations

import json

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from graph.history import without_failed_arguments

BAD_SQL = {"title": "Sales", "queries": [{"label": "Revenue", "sql": "SELECT DATE_SUB(CURDATE(), INTERVAL 1 MONTH)"}]}


def result(cid: str, status: str = "success", kind: str | None = None) -> ToolMessage:
    extra = {"error_kind": kind} if kind else {}
    body = {"status": "error", "error": 'SQL error: near "1"'} if status == "error" else {"status": "ok"}
    return ToolMessage(
        json.dumps(body), tool_call_id=cid, name="generate_report", status=status, additional_kwargs=extra
    )


def test_a_call_that_failed_in_the_tool_loses_its_arguments_only_in_the_copy():
    history = [
        HumanMessage("report"),
        AIMessage("", tool_calls=[{"name": "generate_report", "args": BAD_SQL, "id": "c1"}]),
        result("c1", "error", "tool_error"),
        AIMessage("", tool_calls=[{"name": "describe_database", "args": {"verbose": True}, "id": "c2"}]),
        result("c2"),
    ]
    prompt = without_failed_arguments(history)
    assert prompt[1].tool_calls[0]["args"] == {} and prompt[1].tool_calls[0]["id"] == "c1"
    assert "SQL error" in prompt[2].content  # the error the retry is written from stays
    assert prompt[3].tool_calls[0]["args"] == {"verbose": True}  # successful calls keep theirs
    assert history[1].tool_calls[0]["args"] == BAD_SQL  # the stored history is untouched


def test_malformed_argument_errors_keep_their_arguments_in_view():
    history = [
        AIMessage("", tool_calls=[{"name": "generate_report", "args": {"title": 3}, "id": "c1"}]),
        result("c1", "error", "invalid_arguments"),
    ]
    assert without_failed_arguments(history)[0].tool_calls[0]["args"] == {"title": 3}


def test_only_one_of_two_calls_in_a_message_failed():
    history = [
        AIMessage(
            "", tool_calls=[{"name": "a", "args": {"x": 1}, "id": "c1"}, {"name": "b", "args": {"y": 2}, "id": "c2"}]
        ),
        result("c1", "error", "tool_error"),
        result("c2"),
    ]
    calls = without_failed_arguments(history)[0].tool_calls
    assert calls[0]["args"] == {} and calls[1]["args"] == {"y": 2}


def test_answers_sent_back_in_this_goal_are_left_out_of_the_prompt_only():
    from graph.history import without_sent_back_answers

    earlier = [HumanMessage("revenue in 2011?", id="h0"), AIMessage("It was 1,000.", id="a0")]
    goal = [
        HumanMessage("What was our total revenue in December 2011?", id="h1"),
        AIMessage("The total revenue in December 2011 is $5,678.", id="a1"),  # no read: sent back
        AIMessage("", tool_calls=[{"name": "query_database", "args": {"sql": "SELECT 1"}, "id": "c1"}], id="a2"),
        ToolMessage('{"status": "ok", "summary": "one row: SUM(Total) = 38.62"}', tool_call_id="c1", id="t1"),
        AIMessage("Corrected: nothing was posted.", name="hermes", id="a3"),  # Hermes's own notice
    ]
    history = [*earlier, *goal]
    prompt = without_sent_back_answers(history, goal)
    assert [m.id for m in prompt] == ["h0", "a0", "h1", "a2", "t1", "a3"]  # earlier goals' answers stay
    assert [m.id for m in history] == ["h0", "a0", "h1", "a1", "a2", "t1", "a3"]  # stored history untouched
