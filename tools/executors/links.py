"""Links a tool leaves behind (DESIGN §2.2): the sandbox hides the agent's state from the tool,
but the agent itself — outside the sandbox — later reads what the tool wrote (reports, its
payloads). A symbolic link the tool planted there to a hidden file (the checkpoints, the
ledger, another thread's payload) or out of the data directory would make the agent read it
for the tool. :func:`remove_escaping_links` removes such links when the run ends. Hard links
need no check: the hidden files are mounted over, so a link to them fails (EXDEV)."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from pathlib import Path

log = logging.getLogger(__name__)

#: Bound on the entries looked at after one run (a tool that made millions of files).
MAX_ENTRIES = 200_000


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def remove_escaping_links(data_dir: Path | str, hidden: Iterable[str]) -> list[str]:
    """Remove every symbolic link in ``data_dir`` (outside the ``hidden`` entries, absolute
    paths: what the tool could not see) that resolves into a hidden entry or out of
    ``data_dir``; returns the removed links (relative to ``data_dir``). A link within the
    visible area stays. Blocking (walks the directory)."""
    root = os.path.realpath(data_dir)
    hidden_real = [os.path.realpath(h) for h in hidden]
    hidden_abs = [os.path.abspath(h) for h in hidden]
    removed: list[str] = []
    seen = 0
    for folder, dirs, names in os.walk(root, followlinks=False):
        dirs[:] = [d for d in dirs if not any(_inside(os.path.join(folder, d), h) for h in hidden_abs)]
        for name in [*names, *dirs]:
            seen += 1
            if seen > MAX_ENTRIES:
                log.warning("tool sandbox: more than %d entries in %s; links past them not checked", MAX_ENTRIES, root)
                return removed
            path = os.path.join(folder, name)
            if not os.path.islink(path):
                continue
            target = os.path.realpath(path)
            if _inside(target, root) and not any(_inside(target, h) for h in hidden_real):
                continue
            try:
                os.unlink(path)
            except OSError as exc:
                log.warning("tool sandbox: could not remove the link %s -> %s: %s", path, target, exc)
                continue
            removed.append(os.path.relpath(path, root))
            log.warning("tool sandbox: removed the link %s a tool left (it led to %s, out of its reach)", path, target)
    return removed
