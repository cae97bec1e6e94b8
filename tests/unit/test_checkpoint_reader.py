"""``graph.checkpoint_reader``: its names agree with the graph's, and the thread listing has one
code path. That what it reads equals what the compiled graph says, checkpoint by checkpoint, on
both checkpoint stores: tests/integration/test_checkpoint_reader_backends.py."""

from __future__ import annotations

from pathlib import Path

from graph import checkpoint_reader
from graph.checkpoints import CHECKPOINTS_FILE


def test_the_reader_names_the_graphs_checkpoint_file():
    assert checkpoint_reader.CHECKPOINTS_FILE == CHECKPOINTS_FILE


def test_one_thread_listing_for_the_commands_and_the_branches():
    """Review finding D3: ``session list`` (the reader) and ``Branches.threads`` list threads
    with one code path, so the two cannot drift apart."""
    from graph import branches

    assert branches.ThreadSummary is checkpoint_reader.ThreadSummary
    assert "SELECT thread_id, COUNT(*)" not in Path(branches.__file__).read_text()
