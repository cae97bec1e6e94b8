"""The reminder suite on both schedule stores (issue 22; DESIGN §5.4): the tests of
``tests/unit/test_reminders.py`` and ``test_reminders_remind.py`` that go through the store —
scheduling and its duplicate check, once per period, catch-up once, 16 threads racing for one
period, a tool action run 1000 times for a period, retries, the CLI's ``reminders run`` and
``serve``, the flagship's reminder fired three times — collected here again, each run once with
``HERMES_POSTGRES_URL`` unset (``reminders.db``) and once set to a new database on the real
PostgreSQL the tests start (``tools.builtin.reminder_store``). Imported, not copied: a change to
one of them is tested on both stores. The SQLite-only ones (an old ``reminders.db`` migrated, a
row damaged through ``sqlite3``) stay in the unit modules."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.unit.test_reminders import (  # noqa: F401 - collected here with the backend fixture
    configured_channels,
    test_a_failing_action_is_retried_then_given_up_for_the_period,
    test_a_period_that_passed_before_the_reminder_existed_does_not_fire,
    test_a_reminder_fires_once_per_period_and_not_before_its_time,
    test_a_reminder_never_fired_catches_up_from_its_first_period,
    test_a_tool_action_has_one_effect_when_run_1000_times_for_a_period,
    test_actions_default_to_a_notice_and_duplicates_are_reused,
    test_cli_reminders_run_prints_fired_and_caught_up_periods,
    test_cli_run_exits_1_when_a_firing_failed_and_says_it_retries,
    test_missed_periods_are_caught_up_once_not_n_times,
    test_serve_checks_every_interval_and_fires_once,
    test_threads_racing_for_one_period_fire_once,
)
from tests.unit.test_reminders_remind import (  # noqa: F401
    test_a_task_action_runs_for_the_creating_request_and_never_schedules_again,
    test_the_flagships_reminder_fired_3_times_delivers_3_notices_and_creates_no_reminder,
    test_the_reminder_action_attack_is_refused_at_creation_and_at_firing,
)

pytestmark = pytest.mark.slow  # a real PostgreSQL


@pytest.fixture(autouse=True)
def schedule_backend(checkpoint_backend: str, tmp_path) -> Iterator[str]:
    """Each test once per store; on PostgreSQL nothing may reach ``reminders.db``."""
    yield checkpoint_backend
    if checkpoint_backend == "postgres":
        assert not list(tmp_path.rglob("reminders.db")), "the schedule went to SQLite with HERMES_POSTGRES_URL set"
