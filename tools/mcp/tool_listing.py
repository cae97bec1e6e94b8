"""One tool of an MCP server as Hermes keeps it: :class:`MCPTool` (name, description, input schema
normalised once — K6 —, annotations, ``_meta``, output schema) and :func:`tools_from_listing`
(``tools/list`` → tools kept and tools skipped with the reason: a schema that cannot be used
skips only that tool).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any

from langchain_core.tools import BaseTool
from mcp import types

from tools.mcp.results import Validator, output_validator
from tools.schema_normalization import SchemaNormalizationError, normalize_schema

log = logging.getLogger(__name__)

#: ``_meta`` key of a tool: "data" or "schema", what its results hold (``ToolSpec.reads``).
META_READS = "hermes/reads"


@dataclass
class MCPTool:
    """One tool of a server as listed by ``tools/list``: original ``name``, description,
    normalised ``input_schema`` (K6), ``annotations`` (``readOnlyHint``, ``idempotentHint``,
    ``destructiveHint``, ``openWorldHint``, ``title``; only those the server set), ``meta``
    (the tool's ``_meta``, e.g. ``"hermes/requested_by"``), ``output_schema`` (validates
    ``structuredContent``). ``lc_tool`` is kept for callers that want a LangChain tool (None here:
    calls go through :meth:`MCPServer.call_tool`)."""

    name: str
    description: str
    input_schema: dict[str, Any]
    lc_tool: BaseTool | None = field(default=None, repr=False)
    annotations: dict[str, Any] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    output_schema: dict[str, Any] | None = None
    _validator: Validator | None = field(default=None, init=False, repr=False, compare=False)
    _checked: bool = field(default=False, init=False, repr=False, compare=False)

    @property
    def output_validator(self) -> Validator | None:
        """The compiled validator of :attr:`output_schema` (built once; None when there is no
        schema, or it is not a valid JSON Schema and so is ignored — a warning)."""
        if not self._checked:
            self._validator = output_validator(self.output_schema, f"MCP tool '{self.name}'")
            self._checked = True
        return self._validator

    @property
    def read_only(self) -> bool:
        """The server's ``readOnlyHint`` (MCP default: False)."""
        return self.annotations.get("readOnlyHint") is True

    @property
    def reads(self) -> str | None:
        """What a result holds (``ToolSpec.reads``): the tool's ``_meta["hermes/reads"]``
        ("data" | "schema"); else "data" for a read-only tool — its result may ground an answer
        about data — and None for a tool with side effects."""
        declared = self.meta.get(META_READS)
        if declared in ("data", "schema"):
            return str(declared)
        return "data" if self.read_only else None

    @property
    def idempotent_hint(self) -> bool | None:
        """The server's ``idempotentHint``; None when it did not say."""
        value = self.annotations.get("idempotentHint")
        return value if isinstance(value, bool) else None

    def signature(self) -> str:
        """What makes two servers' tools the same capability: name, description, schema and
        behaviour hints (replicas of one server list identical tools)."""
        hints = {k: self.annotations.get(k) for k in ("readOnlyHint", "idempotentHint", "destructiveHint")}
        return json.dumps([self.name, self.description, self.input_schema, hints], sort_keys=True, default=str)


def tools_from_listing(server: str, listed: list[types.Tool]) -> tuple[dict[str, MCPTool], dict[str, str]]:
    """``tools/list`` → ``({name: MCPTool}, {name: why it was skipped})``. A tool whose schema
    cannot be normalised or is not a valid JSON Schema is skipped with a warning naming the
    server and the tool; the others are kept."""
    tools: dict[str, MCPTool] = {}
    skipped: dict[str, str] = {}
    for t in listed:
        try:
            schema = normalize_schema(t.inputSchema)
        except SchemaNormalizationError as exc:
            skipped[t.name] = f"MCP server '{server}', tool '{t.name}': skipped, unusable input schema: {exc}"
            log.warning("%s", skipped[t.name])
            continue
        annotations = t.annotations.model_dump(exclude_none=True) if t.annotations is not None else {}
        output = t.outputSchema if isinstance(t.outputSchema, dict) else None
        tools[t.name] = MCPTool(
            name=t.name,
            description=" ".join((t.description or "").split()),
            input_schema=schema,
            annotations=annotations,
            meta=dict(t.meta or {}),
            output_schema=output,
        )
    return tools, skipped
