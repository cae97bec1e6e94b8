"""Tool definitions and lint (DESIGN §2 "tool definition"); the schema normalisation that makes a
tool's parameters acceptable to every provider (DESIGN §3, K6) is ``tools.schema_normalization``.

A :class:`ToolSpec` is the one tool schema of the agent: builtin tools and MCP tools are both
translated into it. Units: ``timeout_s`` in seconds.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any, Literal

import jsonschema
from pydantic import BaseModel, ConfigDict, Field

#: Seed §2.2: ordinary tools 10 s, heavy tasks 30 s, overridable per tool at registration.
ORDINARY_TIMEOUT_S: float = 10.0
HEAVY_TIMEOUT_S: float = 30.0

#: snake_case, 3–64 chars. MCP tools may be namespaced ``server__tool`` (double underscore).
NAME_RE = re.compile(r"^[a-z][a-z0-9_]{2,63}$")
#: Below this many characters a description cannot state scope, typical use and boundary.
MIN_DESCRIPTION_CHARS = 20
#: Parameter names that decide where a side effect goes when a tool does not declare
#: ``destination_args`` (compared case-insensitively, with an optional ``_id``/``_ids``/``s``).
DESTINATION_NAMES = (
    "channel",
    "room",
    "chat",
    "recipient",
    "to",
    "cc",
    "bcc",
    "email",
    "address",
    "phone",
    "url",
    "uri",
    "endpoint",
    "webhook",
    "path",
    "file",
    "filename",
    "filepath",
    "destination",
    "target",
)
_DESTINATION_NAME_RE = re.compile(rf"(?i)({'|'.join(DESTINATION_NAMES)})(_?ids?|s)?")
#: A last name part saying the argument is content or a property, not a place
#: (``email_body``, ``file_content``, ``url_title``).
_PROPERTY_PARTS = frozenset(
    "body content contents text message subject title data format type size mode encoding length count".split()
)
_NAME_PART_RE = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")


def is_destination_name(name: str) -> bool:
    """Whether a parameter called ``name`` decides where a side effect goes: the whole name is
    one of :data:`DESTINATION_NAMES` (``channel``, ``room_id``, ``targets``), or one of its parts
    (``_``, ``-`` and camelCase split) is — ``slack_channel``, ``recipientEmail``,
    ``target_url``, ``channel_name`` — unless the last part says content or a property
    (``email_body``, ``file_content``). ``to``/``cc``/``bcc`` count only first or last
    (``to_email``, ``send_to``; not ``time_to_live``)."""
    if _DESTINATION_NAME_RE.fullmatch(name):
        return True
    parts = [p.casefold() for p in _NAME_PART_RE.findall(name)]
    parts = [p for p in parts if p not in ("id", "ids")]
    if len(parts) < 2 or parts[-1] in _PROPERTY_PARTS:
        return False
    for i, part in enumerate(parts):
        word = part if part in DESTINATION_NAMES else part.removesuffix("s")
        if word in ("to", "cc", "bcc") and 0 < i < len(parts) - 1:
            continue
        if word in DESTINATION_NAMES:
            return True
    return False


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
        destination_args arguments that decide where the effect goes (a channel, recipient,
                      path, URL): before a side-effect call runs, each value must come from the
                      user's request or configuration (:mod:`tools.destinations`). None: derived
                      from the parameter names (:meth:`destination_params`); ``()``: none.
        sensitive_results every successful result of this tool is sensitive data (MCP
                      ``_meta["hermes/sensitive"]``): content taken from it goes only to a
                      destination the request names.
        schedules     the tool's effect is to schedule future work (a reminder): a run that a
                      firing started never runs it, so a fired reminder cannot schedule again.
                      Its sandbox shows the schedule (the reminder store, shared by every thread
                      of the data directory); no other tool's does (DESIGN §2.2).
        reads_schedule the tool reads the schedule without scheduling (lists reminders): its
                      sandbox shows the schedule too; a firing's run may call it.
        deferred_call_arg argument holding a call kept to run later, ``{"kind": "tool", "tool",
                      "args"}`` or ``{"kind": "task", "task"}``: its destinations are checked
                      against the request that creates it, which is recorded with it
                      (:func:`tools.deferred_calls.record_binding`) for the check when it runs.
        network       the tool needs the network (an HTTP API, a remote database). False: the
                      executor runs it with none — no socket reaches another host or this one
                      (DESIGN §2.2). MCP tools run in their own server process: not applied.
        reads         what a successful result holds: ``"data"`` (rows, records, values: it can
                      ground an answer about the user's data), ``"schema"`` (structure only:
                      tables, columns, counts of objects — never grounds an answer), None (not
                      declared: neither). MCP: ``_meta["hermes/reads"]``, else ``"data"`` for a
                      read-only tool (``readOnlyHint``). See DESIGN §5.5.
        content_arg   argument holding the content the side effect delivers to people (a
                      message's text, a reminder's text): it must carry the substance, not
                      narrate the act (:mod:`tools.content_checks`). MCP:
                      ``_meta["hermes/content_arg"]``.
        share_field   field of a successful result holding what to share about what the call
                      produced: ``{"text": ready message, "must_include": [str], "figures":
                      [number]}``; a later side effect that sends content elsewhere must carry it
                      (:mod:`tools.content_checks`). MCP: ``_meta["hermes/share_field"]``.
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
    destination_args: tuple[str, ...] | None = None
    sensitive_results: bool = False
    schedules: bool = False
    reads_schedule: bool = False
    deferred_call_arg: str | None = None
    network: bool = False
    reads: Literal["data", "schema"] | None = None
    content_arg: str | None = None
    share_field: str | None = None

    def destination_params(self) -> tuple[str, ...]:
        """Arguments that decide where this tool's effect goes: :attr:`destination_args` when
        declared; otherwise, for a side-effect tool, every parameter whose name says so
        (:func:`is_destination_name`: channel, recipient, to, email, url, path ..., alone or
        as a part, ``slack_channel`` — the safe rule for an MCP tool whose server says
        nothing); a read-only tool has none."""
        if self.destination_args is not None:
            return self.destination_args
        if not self.side_effect:
            return ()
        props = self.parameters.get("properties") if isinstance(self.parameters, dict) else None
        return tuple(p for p in props or {} if is_destination_name(p))

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
    return re.compile(pattern, re.IGNORECASE | re.DOTALL)


@functools.lru_cache(maxsize=4096)
def _schema_error(canonical: str) -> str | None:
    """The meta-schema error of a JSON Schema given as canonical JSON text (None: valid).
    Cached: every toolbox start and every registration checks the same few schemas again."""
    schema = json.loads(canonical)
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        return exc.message
    return None


def schema_error(schema: Any) -> str | None:
    """``schema``'s error against its JSON Schema meta-schema (draft from ``$schema``, default
    the newest), or None when it is a valid JSON Schema. Raises TypeError for a value that is
    not JSON-serialisable."""
    return _schema_error(json.dumps(schema, sort_keys=True))


def lint(spec: ToolSpec) -> list[str]:
    """Problems of a definition, as human-readable strings; empty list = clean.

    Checks (DESIGN §2): name convention, description length (>= 20 chars), parameters is a
    valid JSON Schema of ``type: object`` with a ``properties`` map and an explicit
    ``required`` list, every required name declared in ``properties``, positive timeout,
    valid ``result_schema``, ``source`` is ``builtin`` or ``mcp:<server>``.
    """
    problems: list[str] = []
    if not NAME_RE.fullmatch(spec.name or ""):
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
        if (error := schema_error(params)) is not None:
            problems.append(f"parameters is not a valid JSON Schema: {error}")
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
    if spec.result_schema is not None and (error := schema_error(spec.result_schema)) is not None:
        problems.append(f"result_schema is not a valid JSON Schema: {error}")
    for pattern in spec.requested_by:
        try:
            re.compile(pattern)
        except re.error as exc:
            problems.append(f"requested_by pattern {pattern!r} is not a regular expression: {exc}")
    declared = (params.get("properties") if isinstance(params, dict) else None) or {}
    named = (*(spec.destination_args or ()), *(a for a in (spec.deferred_call_arg, spec.content_arg) if a))
    problems.extend(
        f"metadata names argument {arg!r}, which parameters do not declare" for arg in named if arg not in declared
    )
    if spec.source != "builtin" and not re.match(r"^mcp:.+", spec.source or ""):
        problems.append(f"source {spec.source!r} must be 'builtin' or 'mcp:<server>'")
    return problems
