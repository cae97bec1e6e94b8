"""``python -m graph.cli``: the ``hermes`` command."""

from graph.cli import app

app()
