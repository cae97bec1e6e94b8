"""A failed PostgreSQL connection is one line naming HERMES_POSTGRES_URL, never the password.

Breaker finding: ``PostgresSchedule('postgresql://u:s3cret@[::1/db')`` raised psycopg's
multi-line ``ProgrammingError … in URI: "postgresql://u:s3cret@[::1/db"`` — the password in
the message, the setting unnamed.
"""

from __future__ import annotations

import pytest

from base.postgres_urls import SETTING, connection_error, redacted


@pytest.mark.parametrize(
    "url, shown",
    [
        ("postgresql://u:s3cret@host/db", "postgresql://u:***@host/db"),
        ("postgresql://u:s3cret@[::1/db", "postgresql://u:***@[::1/db"),
        ("postgres://host/db", "postgres://host/db"),
        ("host=h password=s3cret dbname=d", "host=h password=*** dbname=d"),
    ],
)
def test_the_password_is_never_shown(url, shown):
    assert redacted(url) == shown


def test_a_connection_error_is_one_line_naming_the_setting_without_the_password():
    url = "postgresql://u:s3cret@[::1/db"
    exc = ValueError(f'missing "]" in URI: "{url}"\nDETAIL: more lines\nHINT: and more')
    message = connection_error(exc, url, "the reminder schedule")
    assert "\n" not in message and "s3cret" not in message
    assert message.startswith("the reminder schedule cannot use PostgreSQL at postgresql://u:***@")
    assert SETTING in message and "unset" in message


def test_the_schedule_and_the_answer_marks_report_a_malformed_url_so():
    pytest.importorskip("psycopg")
    from graph.deliveries import _connect
    from tools.builtin.reminder_store import PostgresSchedule

    url = "postgresql://u:s3cret@[::1/db"  # psycopg refuses it while parsing: no socket opened
    for open_it in (lambda: PostgresSchedule(url), lambda: _connect(url)):
        with pytest.raises(ConnectionError) as err:
            open_it()
        assert "s3cret" not in str(err.value) and SETTING in str(err.value) and "\n" not in str(err.value)
