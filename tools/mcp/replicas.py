"""Replicas of a logical MCP tool (several servers serving the same tool): the order they are
tried in (:func:`ranked`: serving servers first, then by score) and the call that fails over to
the next one only when that is safe (:func:`call_replicas`: the request never ran there, or the
tool is ``retry_safe``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from tools.errors import ToolTimeout, ToolTransportError
from tools.mcp.client import MCPServer

log = logging.getLogger(__name__)


@dataclass
class Replica:
    """One server's copy of a logical tool: the server, the tool's name there, its timeouts."""

    server: MCPServer
    tool: str
    timeout_s: float
    max_timeout_s: float


def ranked(replicas: list[Replica]) -> list[Replica]:
    """Best first: serving servers before failed ones before parked ones, then by score."""
    order = {"ready": 0, "new": 1, "failed": 2, "parked": 3, "closed": 4}
    return sorted(replicas, key=lambda r: (order.get(r.server.state, 2), -r.server.score.value))


async def call_replicas(replicas: list[Replica], args: dict[str, Any], *, request_id: str, retry_safe: bool) -> Any:
    """Call a logical tool: the best-scored healthy replica first; a crash or a timeout moves on
    to the next one — only when that is safe: the request never ran there (``sent=False``), or
    the tool is ``retry_safe``. A side-effect call that may have run is never sent elsewhere
    (its error is raised as is: the registry reports the outcome as unknown). A tool error
    (``isError``) is an answer and is raised, not failed over."""
    order = ranked(replicas)
    errors: list[tuple[str, Exception]] = []
    for i, rep in enumerate(order):
        last = i == len(order) - 1
        try:
            return await rep.server.call_tool(
                rep.tool,
                args,
                timeout_s=rep.timeout_s,
                max_timeout_s=rep.max_timeout_s,
                request_id=request_id,
                retry_safe=retry_safe,
                local_retry=last,
            )
        except ToolTransportError as exc:
            if exc.sent and not retry_safe:
                raise
            errors.append((rep.server.name, exc))
        except ToolTimeout as exc:
            if not retry_safe or last:
                if not errors:
                    raise
                errors.append((rep.server.name, exc))
                break
            errors.append((rep.server.name, exc))
        if not last:
            log.info(
                "MCP tool %s: %s failed (%s); failing over to %s",
                rep.tool,
                rep.server.name,
                errors[-1][1],
                order[i + 1].server.name,
            )
    if len(errors) == 1:
        raise errors[0][1]
    names = "+".join(r.server.name for r in order)
    text = "; ".join(f"{n}: {e}" for n, e in errors)
    if all(isinstance(e, ToolTimeout) for _, e in errors):
        raise ToolTimeout(f"every replica timed out ({text})")
    sent = any(getattr(e, "sent", True) for _, e in errors)
    raise ToolTransportError(names, f"all {len(order)} replicas failed: {text}", sent=sent)
