"""Tool definitions, lint and schema normalisation (DESIGN §2 "tool definition", §3 "schema
differences between SDKs are normalised here"; failure kind K6).

A :class:`ToolSpec` is the one tool schema of the agent: builtin tools and MCP tools are both
translated into it. Units: ``timeout_s`` in seconds.
"""

from __future__ import annotations

import copy
import functools
import re
from typing import Any

import jsonschema
from pydantic import BaseModel, ConfigDict, Field

#: Seed §2.2: ordinary tools 10 s, heavy tasks 30 s, overridable per tool at registration.
ORDINARY_TIMEOUT_S: float = 10.0
HEAVY_TIMEOUT_S: float = 30.0

#: snake_case, 3–64 chars. MCP tools may be namespaced ``server__tool`` (double underscore).
NAME_RE = re.compile(r"^[a-z][a-z0-9_]{2,63}$")
#: Below this many characters a description cannot state scope, typical use and boundary.
MIN_DESCRIPTION_CHARS = 20


class ToolSpec(BaseModel):
    """One tool definition, as shown to the model and enforced by the registry.

    Fields:
        name          snake_case ``^[a-z][a-z0-9_]{2,63}$``; MCP tools may be ``server__tool``.
        description   scope, typical use, boundary with other tools, what bad input gets.
        parameters    JSON Schema of the arguments, ``{"type": "object", "properties": ...,
                      "required": [...]}``.
        timeout_s     seconds before the run is interrupted (10 ordinary, 30 heavy).
        side_effect   True when the tool writes something (file, DB, message); such calls run
                      at most once per ``request_id`` (the registry's idempotency ledger).
        idempotent    True when repeating the call with the same arguments has no further effect
                      (MCP ``idempotentHint``). Decides retries: a side-effect call that timed
                      out or lost its transport is retried only when this is True (or the
                      request is known never to have reached the tool); otherwise its outcome
                      is reported as unknown. Read-only tools are always safe to retry.
        requested_by  regular expressions (case-insensitive) of a request clause that asks for
                      this tool ("post ... to the group"). A goal with such a clause makes the
                      tool a *required step* (step tracking, masking, stop rules in the graph).
                      Empty: derived from the name (:meth:`request_patterns`).
        artifact_field field of a successful result that names what the call produced (a file
                      path, a URL, an id); the graph lists these as the goal's artifacts.
        result_schema optional JSON Schema of a successful result (for the result pipeline).
        source        ``"builtin"`` or ``"mcp:<server>"`` (named in duplicate errors, K5).
    """

    model_config = ConfigDict(frozen=True)

    name: str
    description: str
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}, "required": []})
    timeout_s: float = ORDINARY_TIMEOUT_S
    side_effect: bool = False
    idempotent: bool = False
    requested_by: tuple[str, ...] = ()
    artifact_field: str | None = None
    result_schema: dict[str, Any] | None = None
    source: str = "builtin"

    @property
    def retry_safe(self) -> bool:
        """True when running the call again cannot repeat an effect (read-only or idempotent)."""
        return not self.side_effect or self.idempotent

    def request_patterns(self) -> list[re.Pattern[str]]:
        """Compiled :attr:`requested_by`. When empty: for a side-effect tool, one pattern derived
        from the name — every word of the name (``write_file`` → ``write``, ``file``) appears in
        the clause as the start of a word — so a side-effect tool whose metadata says nothing
        is offered only to requests that name it; a read-only tool without patterns is never a
        required step (reads stay free: the model may call them as often as it needs). Declare
        ``requested_by`` for natural phrasings."""
        if self.requested_by:
            return [_compile_request(p) for p in self.requested_by]
        if not self.side_effect:
            return []
        words = [w for w in re.split(r"_+", self.name.split("__")[-1]) if len(w) >= 3]
        if not words:
            return []
        return [_compile_request("".join(f"(?=.*\\b{re.escape(w)})" for w in words))]

    def openai_tool(self) -> dict[str, Any]:
        """The OpenAI function-tool dict ``{"type": "function", "function": {...}}`` for bind_tools."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


@functools.lru_cache(maxsize=1024)
def _compile_request(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.I | re.S)


def lint(spec: ToolSpec) -> list[str]:
    """Problems of a definition, as human-readable strings; empty list = clean.

    Checks (DESIGN §2): name convention, description length (>= 20 chars), parameters is a
    valid JSON Schema of ``type: object`` with a ``properties`` map and an explicit
    ``required`` list, every required name declared in ``properties``, positive timeout,
    valid ``result_schema``, ``source`` is ``builtin`` or ``mcp:<server>``.
    """
    problems: list[str] = []
    if not NAME_RE.match(spec.name or ""):
        problems.append(f"name {spec.name!r} must match {NAME_RE.pattern} (snake_case, 3-64 chars)")
    desc = (spec.description or "").strip()
    if len(desc) < MIN_DESCRIPTION_CHARS:
        problems.append(
            f"description of {spec.name!r} is {len(desc)} chars; give scope, typical use and "
            f"boundary with other tools (>= {MIN_DESCRIPTION_CHARS} chars)"
        )
    params = spec.parameters
    if not isinstance(params, dict):
        problems.append("parameters must be a JSON Schema object")
    else:
        try:
            jsonschema.validators.validator_for(params).check_schema(params)
        except jsonschema.SchemaError as exc:
            problems.append(f"parameters is not a valid JSON Schema: {exc.message}")
        if params.get("type") != "object":
            problems.append('parameters must have "type": "object"')
        props = params.get("properties")
        if not isinstance(props, dict):
            problems.append('object schema without "properties" (OpenAI rejects it, K6)')
            props = {}
        required = params.get("required")
        if not isinstance(required, list):
            problems.append('parameters lacks an explicit "required" list (use [] when nothing is required)')
        else:
            missing = [r for r in required if r not in props]
            if missing:
                problems.append(f"required names not declared in properties: {missing}")
    if spec.timeout_s <= 0:
        problems.append(f"timeout_s must be > 0, got {spec.timeout_s}")
    if spec.result_schema is not None:
        try:
            jsonschema.validators.validator_for(spec.result_schema).check_schema(spec.result_schema)
        except jsonschema.SchemaError as exc:
            problems.append(f"result_schema is not a valid JSON Schema: {exc.message}")
    for pattern in spec.requested_by:
        try:
            re.compile(pattern)
        except re.error as exc:
            problems.append(f"requested_by pattern {pattern!r} is not a regular expression: {exc}")
    if spec.source != "builtin" and not re.match(r"^mcp:.+", spec.source or ""):
        problems.append(f"source {spec.source!r} must be 'builtin' or 'mcp:<server>'")
    return problems


_SUBSCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SUBSCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_SUBSCHEMA_SINGLE = ("items", "additionalProperties", "not", "if", "then", "else", "contains",
                     "propertyNames", "unevaluatedProperties", "unevaluatedItems", "additionalItems")


def normalize_schema(schema: dict[str, Any] | None) -> dict[str, Any]:
    """Return a copy of ``schema`` that every OpenAI-compatible endpoint accepts (K6).

    Recursively: drops ``$schema``; gives every object schema (``"type": "object"``, or a
    list of types containing ``"object"``) a ``properties`` map (``{}`` when absent).
    At the top level, ``None``/``{}`` become ``{"type": "object", "properties": {}}``.
    Example (K6): ``{"$schema": "...draft-07...", "type": "object"}`` →
    ``{"type": "object", "properties": {}}``. The input is not modified.
    """
    out = _normalize(copy.deepcopy(schema) if schema else {})
    if "type" not in out:
        out["type"] = "object"
        out.setdefault("properties", {})
    return out


def _is_object(schema: dict[str, Any]) -> bool:
    t = schema.get("type")
    return t == "object" or (isinstance(t, list) and "object" in t)


def _normalize(schema: Any) -> Any:
    if not isinstance(schema, dict):
        return schema
    schema.pop("$schema", None)
    if _is_object(schema) and not isinstance(schema.get("properties"), dict):
        schema["properties"] = {}
    for key in _SUBSCHEMA_MAPS:
        sub = schema.get(key)
        if isinstance(sub, dict):
            schema[key] = {k: _normalize(v) for k, v in sub.items()}
    for key in _SUBSCHEMA_LISTS:
        sub = schema.get(key)
        if isinstance(sub, list):
            schema[key] = [_normalize(v) for v in sub]
    for key in _SUBSCHEMA_SINGLE:
        if isinstance(schema.get(key), dict):
            schema[key] = _normalize(schema[key])
        elif key == "items" and isinstance(schema.get(key), list):
            schema[key] = [_normalize(v) for v in schema[key]]
    return schema
