"""``hermes memory list|search|show|forget|consolidate`` (Typer's runner, in process)."""

from __future__ import annotations

import asyncio
import json

import pytest
from typer.testing import CliRunner

from graph import resources
from graph.cli import app
from graph.context import Context

runner = CliRunner()


@pytest.fixture
def data(tmp_path, monkeypatch):
    monkeypatch.setenv("HERMES_EMBEDDINGS", "hash")
    d = str(tmp_path / "data")

    async def seed() -> None:
        for user, goal in (("alice", "I prefer PDF reports. I report to Carol."), ("bob", "我喜欢喝茶 🎉 from now on")):
            mem = resources.get_memory(Context(data_dir=d, user_id=user))
            await mem.write_plan(mem.plan_turn(user, "t1", goal, "ok", [], None, []))
        await resources.aclose_resources()

    asyncio.run(seed())
    return d


def call(*args: str):
    return runner.invoke(app, ["memory", *args])


def test_list_shows_both_layers_of_one_user_only(data):
    out = call("list", "--user", "alice", "--data-dir", data, "--json")
    assert out.exit_code == 0, out.output
    listed = json.loads(out.output)
    assert {f["predicate"] for f in listed["semantic"]} == {"prefers_format", "reports_to"}
    assert listed["episodic"] and all(e["user_id"] == "alice" for e in listed["episodic"])
    text = call("list", "--user", "alice", "--data-dir", data).output
    assert "prefers" in text and "pdf" in text and "preference" in text
    assert "nothing remembered" in call("list", "--user", "nobody", "--data-dir", data).output


def test_search_is_per_user_labelled_and_never_everything(data):
    out = call("search", "喝茶", "--user", "bob", "--data-dir", data)
    assert out.exit_code == 0 and "[episodic · preference" in out.output and "喝茶" in out.output
    assert "喝茶" not in call("search", "喝茶", "--user", "alice", "--data-dir", data).output  # bob's only
    nothing = call("search", "!!!", "--user", "bob", "--data-dir", data)
    assert "nothing searchable" in nothing.output
    hits = json.loads(call("search", "🎉", "--user", "bob", "--data-dir", data, "--json").output)
    assert len(hits["episodic"]) >= 1 and all("🎉" in h["text"] for h in hits["episodic"])


def test_show_and_forget_by_printed_prefix(data):
    listed = json.loads(call("list", "--user", "alice", "--data-dir", data, "--json").output)
    fact = next(f for f in listed["semantic"] if f["predicate"] == "prefers_format")
    short = fact["ref"][: len("semantic:") + 8]
    shown = json.loads(call("show", short, "--user", "alice", "--data-dir", data, "--json").output)
    assert shown["object"] == "pdf" and shown["evidence_episodes"][0]["kind"] == "preference"
    assert call("show", short, "--user", "bob", "--data-dir", data).exit_code == 1  # not bob's
    assert call("forget", short, "--user", "alice", "--data-dir", data, "--yes").exit_code == 0
    after = json.loads(call("list", "--user", "alice", "--data-dir", data, "--json").output)
    assert {f["predicate"] for f in after["semantic"]} == {"reports_to"}
    assert call("forget", "episodic:nope", "--user", "alice", "--data-dir", data, "--yes").exit_code == 1


def test_consolidate_prints_the_runs_counts(data):
    out = call("consolidate", "--data-dir", data, "--json")
    assert out.exit_code == 0, out.output
    run = json.loads(out.output.strip().splitlines()[-1])
    # two preference episodes ("ok" with no tool result is no task memory)
    assert run["extractor"] == "rule-based" and run["counts"]["scanned"] >= 2
    assert run["counts"]["duplicates"] >= 1  # the write path already stored alice's preference
    twice = call("consolidate", "--data-dir", data, "--json", "--every", "0.1s", "--times", "2")
    assert twice.exit_code == 0 and len(twice.output.strip().splitlines()) == 2
    assert call("consolidate", "--data-dir", data, "--every", "soon").exit_code != 0


@pytest.mark.parametrize("layer", ["facts", "Episodic", ""])
def test_an_unknown_layer_is_refused_not_listed_as_all(data, layer):
    out = call("list", "--user", "alice", "--data-dir", data, "--layer", layer)
    assert out.exit_code == 1
    assert "--layer must be episodic, semantic or all" in out.stderr
