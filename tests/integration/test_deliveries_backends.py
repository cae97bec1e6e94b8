"""Delivery marks on PostgreSQL (issue 22; DESIGN §2.4 "the same request across processes"):
with ``HERMES_POSTGRES_URL`` set the record of answers shown (``graph.deliveries``) is in the
database beside the thread, so ``hermes run`` killed on machine A after its turn finished but
before the answer was printed, repeated on machine B (its own data directory), is the same
request there: nothing runs again, one post. The marks' rule (pending never overwrites
delivered) holds on both stores."""

from __future__ import annotations

import pytest

from graph.delivery_marks import answer_delivered, delivery_state, set_delivery

pytestmark = pytest.mark.slow  # a real PostgreSQL, hermes processes


@pytest.fixture(params=["sqlite", "postgres"])
def url(request) -> str:
    return request.getfixturevalue("postgres_url") if request.param == "postgres" else ""


def test_pending_never_overwrites_delivered(tmp_path, url):
    assert delivery_state(tmp_path, "t1", "g1", url) is None
    set_delivery(tmp_path, "t1", "g1", "pending", url)
    assert delivery_state(tmp_path, "t1", "g1", url) == "pending"
    answer_delivered(tmp_path, "t1", "g1", url)
    set_delivery(tmp_path, "t1", "g1", "pending", url)  # a late writer on another machine
    assert delivery_state(tmp_path, "t1", "g1", url) == "delivered"
    assert delivery_state(tmp_path, "t2", "g1", url) is None
    assert (tmp_path / "deliveries.db").exists() == (not url)


def test_killed_before_the_answer_was_printed_on_one_machine_the_same_command_on_another_does_not_post(
    tmp_path, postgres_url
):
    from tests.integration.test_repeat_after_crash import POST, hermes_env, one_line, posts, run, run_and_kill, script
    from tests.support.scripted_openai import ScriptedOpenAI

    machine_a, machine_b, hold = tmp_path / "machine-a", tmp_path / "machine-b", tmp_path / "turn-finished"
    with ScriptedOpenAI(script("post_message", POST, "order count")) as stub:
        env = hermes_env(stub, HERMES_POSTGRES_URL=postgres_url)
        run_and_kill(machine_a, "t1", {**env, "HERMES_TEST_HOLD_ANSWER": str(hold)}, hold)
        assert posts(machine_a) == [("sales-team", POST["text"])]
        calls_before = len(stub.requests)
        again = run(machine_b, "t1", env)
    assert again.returncode == 0, again.stderr[-2000:]
    out = one_line(again.stdout)
    assert "already done" in out and "nothing ran again" in out, out
    assert len(stub.requests) == calls_before  # not even a model call
    assert not (machine_b / "team_chat.db").exists() or posts(machine_b) == []
    assert not (machine_a / "deliveries.db").exists() and not (machine_b / "deliveries.db").exists()
