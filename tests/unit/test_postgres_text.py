"""Strings the memory stores on PostgreSQL come back as they were (``memory.postgres_db``):
PostgreSQL text cannot hold NUL, and a fact's origin is "thread NUL message"."""

from __future__ import annotations

import pytest

from memory.postgres_db import from_text, to_text


@pytest.mark.parametrize(
    "value",
    ["t1\x00msg-2", "plain", "C:\\reports\\0 final", "\\0", "\\\\\x00\\", "", "ends\\", 7, 0.5, None],
)
def test_every_value_round_trips_and_no_nul_is_stored(value):
    stored = to_text(value)
    assert from_text(stored) == value
    assert not (isinstance(stored, str) and "\x00" in stored)


def test_a_string_without_nul_or_backslash_is_stored_as_is():
    assert to_text("user prefers_format pdf") == "user prefers_format pdf"
