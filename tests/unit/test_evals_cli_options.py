"""``python -m evals`` / ``hermes eval``: an option a suite does not use is refused with a line
naming it and what the suite takes (never silently ignored), as are combinations that would
ignore one; an unknown case is refused before any report directory is made; a model endpoint
that cannot be used is reported at once (exit 2) naming the endpoint and what to do. Each
suite's declared ``OPTIONS`` are the ``cfg.<field>`` it really reads."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import re

import httpx
import pytest
from typer.testing import CliRunner

from evals import cli as evals_cli
from evals.harness import OPTION_FLAGS, SUITES, endpoint_problem, option_problems, suite_options
from graph.cli import app

runner = CliRunner()

#: flag + value for each EvalConfig field the CLI sets
FLAG_ARGS = {
    "model": ["--model", "gpt-x"],
    "base_url": ["--base-url", "http://endpoint.test/v1"],
    "api_key_env": ["--api-key-env", "MY_KEY"],
    "limit": ["--limit", "2"],
    "k": ["--k", "3"],
    "seed": ["--seed", "5"],
    "sample": ["--sample"],
    "cases": ["--case", "sales-flagship"],
    "database": ["--database", "shop.db"],
    "questions": ["--questions", "questions.json"],
}


def fields_read(suite: str) -> set[str]:
    source = inspect.getsource(importlib.import_module(SUITES[suite]))
    used = set(re.findall(r"\bcfg\.([a-z_]+)\b", source)) & set(OPTION_FLAGS)
    if "cfg.context_overrides()" in source:
        used |= {"model", "base_url", "api_key_env"}
    return used


@pytest.mark.parametrize("suite", sorted(SUITES))
def test_each_suite_declares_the_options_it_reads(suite):
    assert suite_options(suite) == fields_read(suite)


@pytest.mark.parametrize(
    ("suite", "field"), [(s, f) for s in sorted(SUITES) for f in OPTION_FLAGS if f not in fields_read(s)]
)
def test_an_option_a_suite_does_not_read_is_refused_and_nothing_is_written(tmp_path, monkeypatch, suite, field):
    monkeypatch.delenv("HERMES_BASE_URL", raising=False)
    out = tmp_path / "report"
    result = runner.invoke(app, ["eval", suite, *FLAG_ARGS[field], "--out", str(out)])
    assert result.exit_code == 1, result.output
    line = [x for x in result.output.splitlines() if x.startswith("error:")]
    assert len(line) == 1 and f"the {suite} suite does not use {OPTION_FLAGS[field]}" in line[0], result.output
    assert "would be ignored" in line[0] and "Traceback" not in result.output
    assert not out.exists()


def test_several_ignored_options_are_named_together():
    [problem] = option_problems("mcp", {"model", "k", "cases"})
    assert "does not use --model, --k, --case: they would be ignored" in problem
    assert "takes --limit, --sample" in problem
    assert option_problems("tasks", {"model", "base_url", "k", "cases"}) == []


@pytest.mark.parametrize(
    ("suite", "args", "phrase"),
    [
        ("tasks", ["--case", "sales-flagship", "--limit", "1"], "--case picks the tasks itself: drop --limit"),
        ("tasks", ["--case", "sales-flagship", "--sample"], "drop --sample"),
        ("memory", ["--model", "gpt-x"], "--model needs --base-url"),
        ("memory", ["--api-key-env", "MY_KEY"], "--api-key-env needs --base-url"),
    ],
)
def test_combinations_that_would_ignore_an_option_are_refused(tmp_path, monkeypatch, suite, args, phrase):
    monkeypatch.delenv("HERMES_BASE_URL", raising=False)
    result = runner.invoke(app, ["eval", suite, *args, "--out", str(tmp_path / "r")])
    assert result.exit_code == 1 and phrase in result.output, result.output
    assert not (tmp_path / "r").exists()


def test_an_unknown_case_is_refused_before_a_report_is_made(tmp_path, monkeypatch):
    monkeypatch.delenv("HERMES_BASE_URL", raising=False)
    result = runner.invoke(app, ["eval", "tasks", "--case", "no-such-task", "--out", str(tmp_path / "r")])
    assert result.exit_code == 1 and "unknown task(s) no-such-task; tasks: sales-orders-count" in result.output
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("where", ["flag", "env"])
@pytest.mark.parametrize("suite", ["tools", "tasks", "memory"])
def test_an_endpoint_that_cannot_be_used_exits_2_before_anything_runs(tmp_path, monkeypatch, suite, where):
    asked: list[str] = []

    async def dead(base_url, api_key_env="OPENAI_API_KEY", **_kw):
        asked.append(base_url)
        return f"nothing answers at the model endpoint {base_url} (ConnectError: refused): start that server"

    monkeypatch.setattr(evals_cli, "endpoint_problem", dead)
    url = "http://127.0.0.1:9/v1"
    args = ["eval", suite, "--model", "gpt-x", "--out", str(tmp_path / "r")]
    if where == "flag":
        monkeypatch.delenv("HERMES_BASE_URL", raising=False)
        args += ["--base-url", url]
    else:
        monkeypatch.setenv("HERMES_BASE_URL", url)
    if suite == "tasks":
        args += ["--case", "sales-flagship"]
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert asked == [url] and f"nothing answers at the model endpoint {url}" in result.output
    assert not (tmp_path / "r").exists()


def test_the_model_setting_is_the_default_of_model(tmp_path, monkeypatch):
    seen = {}

    async def fake_run_suite(cfg):
        seen["cfg"] = cfg
        raise ValueError("stop here")

    async def alive(*_a, **_k):
        return ""

    monkeypatch.setattr(evals_cli, "run_suite", fake_run_suite)
    monkeypatch.setattr(evals_cli, "endpoint_problem", alive)
    monkeypatch.setenv("HERMES_MODEL", "gpt-x")
    monkeypatch.setenv("HERMES_BASE_URL", "http://endpoint.test/v1")
    result = runner.invoke(app, ["eval", "tools", "--out", str(tmp_path / "r")])
    assert result.exit_code == 1 and "stop here" in result.output
    assert seen["cfg"].model == "gpt-x" and seen["cfg"].base_url == "http://endpoint.test/v1"


# -- endpoint_problem over httpx.MockTransport (no socket) ---------------------------------------


def problem_for(handler, key_env: str = "EVAL_TEST_KEY") -> str:
    return asyncio.run(endpoint_problem("http://endpoint.test/v1", key_env, transport=httpx.MockTransport(handler)))


def test_an_endpoint_that_answers_is_fine_whatever_its_models_route_says():
    assert problem_for(lambda r: httpx.Response(200, json={"data": [{"id": "m"}]})) == ""
    assert problem_for(lambda r: httpx.Response(404, text="no such route")) == ""
    assert problem_for(lambda r: httpx.Response(500, text="oops")) == ""


def test_a_dead_endpoint_and_a_refused_key_are_named(monkeypatch):
    def refuse(request):
        raise httpx.ConnectError("All connection attempts failed", request=request)

    dead = problem_for(refuse)
    assert "nothing answers at the model endpoint http://endpoint.test/v1 (ConnectError" in dead
    assert "--base-url / HERMES_BASE_URL" in dead
    monkeypatch.delenv("EVAL_TEST_KEY", raising=False)
    unset = problem_for(lambda r: httpx.Response(401, json={"error": "bad key"}))
    assert "refused the key (HTTP 401)" in unset and "$EVAL_TEST_KEY (it is not set)" in unset
    monkeypatch.setenv("EVAL_TEST_KEY", "sk-wrong")
    sent = []
    wrong = problem_for(lambda r: sent.append(r.headers.get("authorization")) or httpx.Response(403))
    assert "HTTP 403" in wrong and "not set" not in wrong and sent == ["Bearer sk-wrong"]
