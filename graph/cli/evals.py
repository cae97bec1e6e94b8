"""``hermes eval SUITE``: the evaluation suites of ``evals/`` (same command as ``python -m evals``)."""

from __future__ import annotations

from graph.cli.common import app


def _register() -> None:
    # evals sits above the runtime (it drives graph/, nodes/, tools/): imported here, where the
    # command line registers it, and nowhere in the runtime.
    from evals.cli import eval_command

    app.command("eval")(eval_command)


_register()
