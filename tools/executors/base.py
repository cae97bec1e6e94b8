"""The one executor interface (DESIGN §2: local subprocess / container / remote function).

Model-supplied arguments never run in the agent's own process: an executor runs the python
function named by ``entrypoint`` (``"package.module:function"``) somewhere else and returns its
JSON result.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from tools.errors import ToolFailed, ToolTimeout

__all__ = ["Executor", "ToolFailed", "ToolTimeout"]


@runtime_checkable
class Executor(Protocol):
    """Runs ``entrypoint(**args)`` out of process.

    ``run`` returns the function's JSON-decoded result. Raises :class:`ToolTimeout` when the run
    exceeded ``timeout_s`` seconds (the run is interrupted, whole process group), and
    :class:`ToolFailed` when the function raised (message ``"<ExcType>: <text>"``) or the
    process died without a result. ``network``: the call may use the network (the tool's
    ``ToolSpec.network``); without it the local backends run it with none. ``schedule``: the call
    may reach the schedule (the reminder store; the tool's ``ToolSpec.schedules`` or
    ``reads_schedule``); without it the local backends hide it and let the call write only its
    thread's workspace.
    """

    async def run(
        self,
        entrypoint: str,
        args: dict[str, Any],
        *,
        timeout_s: float,
        request_id: str,
        network: bool = False,
        schedule: bool = False,
    ) -> Any: ...

    async def aclose(self) -> None: ...
