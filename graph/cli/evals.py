"""``hermes eval SUITE``: the evaluation suites of ``evals/`` (same command as ``python -m evals``)."""

from __future__ import annotations

from typing import Any

import typer

from graph.cli.common import LAZY_COMMANDS, LazyCommand


def _eval_command() -> Any:
    # evals sits above the runtime (it drives graph/, nodes/, tools/): imported here, when the
    # command runs or shows its own help, and nowhere in the runtime (nor at `hermes --help`)
    from evals.cli import eval_command

    single = typer.Typer()
    single.command("eval")(eval_command)
    return typer.main.get_command(single)


LAZY_COMMANDS["eval"] = LazyCommand(
    "eval", _eval_command, "Run an evaluation suite against the embedded model or any OpenAI-compatible endpoint."
)
