"""Executors: one interface (:class:`~tools.executors.base.Executor`), three backends.

    subprocess  SubprocessExecutor   local confined worker process (dev; the default)
    container   ContainerExecutor    the same worker inside bubblewrap / docker / podman
    remote      RemoteExecutor       POST to a function endpoint (tools.remote_server)

:func:`make_executor` builds one by name. Blocking work (sandbox detection, path resolution)
happens in :func:`make_executor`: call it from a thread in async code.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # the worker process imports this package: keep its start-up lean
    from pathlib import Path
    from typing import Any

    from tools.executors.base import Executor


def __getattr__(name: str) -> Any:
    if name == "Executor":
        from tools.executors.base import Executor

        return Executor
    raise AttributeError(name)


#: Backend names accepted by :func:`make_executor` (and ``Toolbox.open(executor=...)``).
BACKENDS = ("subprocess", "container", "remote")


def make_executor(
    kind: str, data_dir: Path, *, remote_url: str | None = None, database: str | None = None, **kw: Any
) -> Executor:
    """A new executor of backend ``kind`` working in ``data_dir``. ``remote`` needs
    ``remote_url``. ``container`` raises
    :class:`~tools.executors.container.SandboxUnavailable` when no sandbox works. ``database``:
    the user's database setting the data tools read (None or "" = none); the
    local backends give their worker read access to it and pass it as the tools' ``database``
    argument; for ``remote`` the function server's own ``HERMES_DATABASE`` applies (the path
    is one on that machine). Extra keyword arguments go to the backend's constructor (e.g.
    ``image`` for container, ``token`` for remote; the local backends get ``workspace_only=True``
    unless told otherwise). Settings arrive as arguments: this package
    reads no environment variable (the caller owns the settings, ``graph.context``). Blocking."""
    if kind in ("subprocess", "container"):
        # a call writes only its thread's workspace (DESIGN §2.2)
        kw.setdefault("workspace_only", True)
    if kind == "subprocess":
        from tools.executors.subprocess import SubprocessExecutor

        kw.setdefault("confine", True)
        return SubprocessExecutor(data_dir, database=database, **kw)
    if kind == "container":
        from tools.executors.container import ContainerExecutor

        return ContainerExecutor(data_dir, database=database, **kw)
    if kind == "remote":
        from tools.executors.remote import RemoteExecutor

        if not remote_url:
            raise ValueError(
                "the remote executor needs remote_url (HERMES_REMOTE_URL or the run context's `remote_url` field)"
            )
        return RemoteExecutor(remote_url, **kw)
    raise ValueError(f"executor must be one of {BACKENDS}, got {kind!r}")


__all__ = ["BACKENDS", "Executor", "make_executor"]
