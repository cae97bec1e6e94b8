"""The episodic store's own errors (``memory.episodic.lance``): a LanceDB folder that cannot be
read or written (:class:`EpisodicStoreDamaged`: one line naming the folder and the way back),
whether an exception came from inside LanceDB / Arrow (:func:`from_lance`), and a table written
with another embedder (:class:`EmbedderMismatch`).
"""

from __future__ import annotations

import re
import time
from pathlib import Path

#: Where an exception raised inside LanceDB comes from (its frames' files, its type's module).
_LANCE_PARTS = ("/lancedb/", "/lance/", "/pyarrow/")
_LANCE_MODULES = ("lancedb", "lance", "pyarrow", "pyo3_async_runtimes")
_RUST_SOURCE = re.compile(r",? /\S+\.rs:\d+:\d+")


class EpisodicStoreDamaged(RuntimeError):
    """The LanceDB folder cannot be read or written (a damaged or foreign folder: LanceDB's own
    errors, e.g. ``RustPanic: rust future panicked``). The message is one line naming the
    folder and the way back: move it aside and a new, empty episodic memory starts there."""

    def __init__(self, path: Path, exc: BaseException) -> None:
        self.path = path
        text = _RUST_SOURCE.sub("", " ".join(str(exc).split()))  # the Rust file:line is noise here
        detail = f"{type(exc).__name__}: {text[:200]}{'…' if len(text) > 200 else ''}"
        aside = f"{path}.damaged-{time.strftime('%Y%m%d-%H%M%S')}"
        super().__init__(
            f"the episodic memory folder {path} cannot be read ({detail}). If it is damaged, move it "
            f"aside (mv {path} {aside}): Hermes then starts a new, empty episodic memory there; the "
            f"knowledge graph and the threads are not in that folder and are kept"
        )


def from_lance(exc: BaseException) -> bool:
    """Whether ``exc`` was raised inside LanceDB / Arrow (not by the embedder or our own checks)."""
    if type(exc).__module__.split(".")[0] in _LANCE_MODULES:
        return True
    tb = exc.__traceback__
    while tb is not None:
        if any(part in tb.tb_frame.f_code.co_filename for part in _LANCE_PARTS):
            return True
        tb = tb.tb_next
    return False


class EmbedderMismatch(RuntimeError):
    """The table was written with another embedder (dimension differs)."""
