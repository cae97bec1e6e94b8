"""The distribution's name is our own (issue 24) and its commands resolve.

``hermes-agent`` on PyPI is NousResearch's agent, another project: publishing under it is
impossible and ``pip install hermes-agent`` installs that project. These tests read
``pyproject.toml``, the installed distribution's metadata and the console-script files of the
environment that runs them (the venv ``scripts/setup.sh`` built), so a rename that was not
reinstalled fails here too.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
#: NousResearch's distribution on PyPI (0.19.0 in Dec 2026), with its own ``hermes`` command.
TAKEN = "hermes-agent"


def normalized(name: str) -> str:
    """PEP 503 normalisation: ``Hermes_Agent`` and ``hermes.agent`` are ``hermes-agent`` to pip."""
    return re.sub(r"[-_.]+", "-", name).lower()


def test_the_distribution_is_not_named_like_nousresearchs_agent():
    assert normalized(PROJECT["name"]) != TAKEN
    assert not normalized(PROJECT["name"]).startswith(TAKEN + "-")  # nor like one of its plugins


def test_the_installed_distribution_is_this_checkout_under_its_new_name():
    dist = importlib.metadata.distribution(PROJECT["name"])
    assert normalized(dist.metadata["Name"]) == normalized(PROJECT["name"])
    installed = {ep.name: ep.value for ep in dist.entry_points if ep.group == "console_scripts"}
    assert installed == PROJECT["scripts"]
    # no stale install of the old name still claims the `hermes` script of this checkout
    owners = [
        d.metadata["Name"]
        for d in importlib.metadata.distributions()
        for ep in d.entry_points
        if ep.group == "console_scripts" and ep.name == "hermes"
    ]
    assert [normalized(n) for n in owners] == [normalized(PROJECT["name"])]


def test_the_hermes_command_is_kept_and_one_is_named_after_the_distribution():
    assert PROJECT["scripts"]["hermes"] == "graph.cli:app"
    assert PROJECT["scripts"][PROJECT["name"]] == "graph.cli:app"


@pytest.mark.parametrize("script", sorted(PROJECT["scripts"]))
def test_each_console_script_resolves_and_answers_help(script: str):
    module, _, attr = PROJECT["scripts"][script].partition(":")
    app = getattr(importlib.import_module(module), attr)
    result = CliRunner().invoke(app, ["--help"], prog_name=script)
    assert result.exit_code == 0, result.output
    assert f"Usage: {script} " in result.output
    # the venv's launcher for it exists and runs that same object
    launcher = Path(sys.executable).parent / script
    assert launcher.is_file(), f"{launcher} missing: reinstall with `bash scripts/setup.sh`"
    assert f"from {module} import {attr}" in launcher.read_text()


def test_the_readme_names_the_distribution_and_says_how_it_differs():
    readme = (ROOT / "README.md").read_text()
    assert f"`{PROJECT['name']}`" in readme
    assert "NousResearch" in readme
    assert f"pip install {TAKEN}` installs that" in readme.replace("\n", " ")
