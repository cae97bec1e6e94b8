"""Seed scoring formulas, the circuit breaker and replica failover (no processes).

Failover follows exactly-once: a call moves to the next replica only when it never ran
(``sent=False``) or the tool is retry-safe; a side-effect call that may have run is never sent
elsewhere; a tool error is an answer, not a failure."""

from __future__ import annotations

import pytest

from tools.errors import ToolFailed, ToolTimeout, ToolTransportError
from tools.mcp.replicas import Replica, call_replicas, ranked
from tools.mcp.scoring import Breaker, Score, score_of


def test_seed_formulas_after_every_call():
    s = Score()
    assert s.value == pytest.approx(0.4 / 0.1 + 0.6)  # never called: latency 0, success 1
    s.update(0.2, True)
    assert s.latency_ema == pytest.approx(0.2) and s.success == pytest.approx(1.0)
    s.update(1.0, False)
    assert s.latency_ema == pytest.approx(0.7 * 0.2 + 0.3 * 1.0)
    assert s.success == pytest.approx(0.8 * 1.0 + 0.2 * 0)
    assert s.value == pytest.approx(0.4 / (0.44 + 0.1) + 0.6 * 0.8)
    assert score_of(0.44, 0.8) == pytest.approx(s.value)
    assert s.as_dict()["calls"] == 2 and s.as_dict()["failures"] == 1


def test_healthy_fast_server_outscores_slow_and_flaky():
    healthy, slow, flaky = Score(), Score(), Score()
    for i in range(20):
        healthy.update(0.02, True)
        slow.update(2.0, True)
        flaky.update(0.02, i % 3 != 0)
    assert healthy.value > flaky.value > slow.value


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_breaker_parks_after_failures_in_a_row_and_backs_off():
    clock = Clock()
    b = Breaker(failures=3, cooldown_s=5, max_cooldown_s=12, clock=clock)
    assert not b.failure("x") and not b.failure("x")
    b.success()  # a success resets the run
    assert not b.failure("x") and not b.failure("x")
    assert b.failure("boom") and b.state == "open" and b.parked
    assert b.probe_due_in() == pytest.approx(5)
    clock.t += 5
    assert b.probe_due_in() == 0
    b.state = "half_open"  # the probe runs
    assert b.failure("still down") and b.current_cooldown_s == 10  # doubled
    b.state = "half_open"
    b.failure("still down")
    assert b.current_cooldown_s == 12  # capped
    b.success()
    assert (b.state, b.consecutive, b.parked) == ("closed", 0, False)
    assert b.as_dict()["trips"] == 3


class FakeServer:
    def __init__(self, name: str, outcome, score: float = 1.0, state: str = "ready") -> None:
        self.name, self.outcome, self.state = name, outcome, state
        self.score = Score(latency_ema=0.4 / (score - 0.6) - 0.1 if score > 0.6 else 10.0)
        self.calls: list[dict] = []

    async def call_tool(self, tool, args, **kw):
        self.calls.append({"tool": tool, **kw})
        if isinstance(self.outcome, Exception):
            raise self.outcome
        return self.outcome


def reps(*servers: FakeServer) -> list[Replica]:
    return [Replica(s, "t", 1.0, 30.0) for s in servers]  # type: ignore[arg-type]


def test_ranked_best_healthy_first():
    a, b, c = FakeServer("a", 1, score=2.0), FakeServer("b", 1, score=4.0), FakeServer("c", 1, score=9, state="parked")
    assert [r.server.name for r in ranked(reps(a, b, c))] == ["b", "a", "c"]


async def test_failover_when_not_sent_even_for_side_effects():
    down = FakeServer("down", ToolTransportError("down", "refused", sent=False), score=5)
    up = FakeServer("up", {"ok": 1}, score=2)
    assert await call_replicas(reps(down, up), {}, request_id="r", retry_safe=False) == {"ok": 1}
    assert len(down.calls) == 1 and len(up.calls) == 1
    assert down.calls[0]["local_retry"] is False and up.calls[0]["local_retry"] is True


async def test_no_failover_for_a_side_effect_that_may_have_run():
    crashed = FakeServer("crashed", ToolTransportError("crashed", "died mid-call", sent=True), score=5)
    other = FakeServer("other", {"ok": 1}, score=2)
    with pytest.raises(ToolTransportError) as err:
        await call_replicas(reps(crashed, other), {}, request_id="r", retry_safe=False)
    assert err.value.sent is True and other.calls == []
    timeout = FakeServer("slow", ToolTimeout("no answer"), score=5)
    with pytest.raises(ToolTimeout):
        await call_replicas(reps(timeout, other), {}, request_id="r", retry_safe=False)
    assert other.calls == []


async def test_failover_on_crash_or_timeout_for_retry_safe_tools():
    crashed = FakeServer("crashed", ToolTransportError("crashed", "died mid-call", sent=True), score=9)
    slow = FakeServer("slow", ToolTimeout("no answer"), score=5)
    up = FakeServer("up", "fine", score=1)
    assert await call_replicas(reps(crashed, slow, up), {}, request_id="r", retry_safe=True) == "fine"
    assert [len(s.calls) for s in (crashed, slow, up)] == [1, 1, 1]


async def test_tool_errors_are_answers_and_all_down_is_one_error():
    err = FakeServer("a", ToolFailed("file not found"), score=5)
    other = FakeServer("b", "x", score=1)
    with pytest.raises(ToolFailed, match="file not found"):
        await call_replicas(reps(err, other), {}, request_id="r", retry_safe=True)
    assert other.calls == []
    a = FakeServer("a", ToolTransportError("a", "refused", sent=False))
    b = FakeServer("b", ToolTransportError("b", "parked", sent=False))
    with pytest.raises(ToolTransportError) as all_down:
        await call_replicas(reps(a, b), {}, request_id="r", retry_safe=False)
    assert all_down.value.sent is False and "a: " in str(all_down.value) and "b: " in str(all_down.value)
