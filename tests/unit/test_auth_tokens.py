"""HERMES_AUTH_TOKENS: unset is local mode; anything set must be a usable token table — an
emptied table or file, a blank value, a JSON array or a token no HTTP header can carry is a
clear error naming the setting, never a silently open server."""

from __future__ import annotations

import pytest

from graph.auth import load_tokens


def test_unset_is_local_mode_and_a_table_is_read_inline_or_from_a_file(tmp_path):
    assert load_tokens("") == {}
    assert load_tokens('{"t-alice": "alice"}') == {"t-alice": "alice"}
    path = tmp_path / "tokens.json"
    path.write_text('{"t-bob": "bob"}')
    assert load_tokens(str(path)) == {"t-bob": "bob"}


@pytest.mark.parametrize(
    "value", ["   ", "{}", '[["t", "alice"]]', '{"tök€n": "alice"}', '{"two words": "x"}', '{"t": ""}', "{not json"]
)
def test_a_set_but_unusable_table_is_refused_with_the_setting_named(value):
    with pytest.raises(ValueError, match="HERMES_AUTH_TOKENS"):
        load_tokens(value)


def test_an_emptied_token_file_is_refused(tmp_path):
    path = tmp_path / "tokens.json"
    path.write_text("{}\n")
    with pytest.raises(ValueError, match="holds no token"):
        load_tokens(str(path))
