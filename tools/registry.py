"""The tool registry: one place that knows every tool, validates calls and never raises for
tool problems (DESIGN §2; failure kinds K3, K4, K5, K7, K8).

Shapes:
    runner       async callable ``(args: dict, request_id: str) -> Any`` (JSON-able result)
    ToolOutcome  status "ok" | "error", content, error, error_kind, latency_s, tool, request_id
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import sqlite3
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Literal

import jsonschema
from pydantic import BaseModel

from tools.errors import (
    ConfigurationError,
    DuplicateToolError,
    InvalidValueError,
    ToolDefinitionError,
    ToolFailed,
    ToolTimeout,
    ToolTransportError,
)
from tools.idempotency import IdempotencyLedger, LedgerBusy, LedgerUnavailable
from tools.results import cut_text
from tools.schema_versions import SchemaChange, SchemaStore, classify, schema_hash, stale_arguments
from tools.spec import NAME_RE, ToolSpec, lint

if TYPE_CHECKING:  # bm25s stays out of processes that only run tools
    from tools.selection import HealthOf, ToolHealth

log = logging.getLogger(__name__)

Runner = Callable[[dict[str, Any], str], Awaitable[Any]]
ErrorKind = Literal[
    "invalid_arguments",
    "invalid_value",
    "unknown_tool",
    "not_offered",
    "tool_error",
    "timeout",
    "transport",
    "outcome_unknown",
    "configuration",
]

#: Seconds the registry waits beyond ``spec.timeout_s`` so that a runner enforcing the limit
#: itself (the subprocess executor: SIGTERM, 1 s grace, SIGKILL) reports first.
TIMEOUT_SLACK_S = 3.0


class ToolOutcome(BaseModel):
    """Result of one :meth:`ToolRegistry.call`.

    status      "ok" or "error"
    content     JSON-able result (dict / list / str); None on error
    error       human-readable error for the model (None when ok)
    error_kind  "invalid_arguments" | "invalid_value" (the tool refused a value, saying what to
                send) | "unknown_tool" | "not_offered" | "tool_error" | "timeout" | "configuration"
                | "transport" | "outcome_unknown" (a side-effect call that timed out or lost its
                transport after the request was sent: it may or may not have run; it is never
                re-run automatically)
    latency_s   wall-clock seconds spent in the call (validation included)
    tool        the tool name as called
    request_id  the caller's id of the request; repeated ids of side-effect tools replay
    replayed    True when the outcome was returned from the idempotency record
    suggestion  an "invalid_value" refusal's structured fields, ``{"args", "reason", "question",
                "allowed_by"}`` (:meth:`tools.errors.InvalidValueError.details`); None otherwise
    """

    status: Literal["ok", "error"]
    content: Any = None
    error: str | None = None
    error_kind: ErrorKind | None = None
    latency_s: float = 0.0
    tool: str
    request_id: str
    replayed: bool = False
    suggestion: dict[str, Any] | None = None


class ToolRegistry:
    """Registered tools by name. Duplicates are refused (K5); lint failures are refused.

    ``register(spec, runner, strict=True)``: lint problems raise :class:`ToolDefinitionError`.
    With ``strict=False`` (used for third-party MCP tools) only the hard problems (name,
    schema validity, missing properties, timeout, source) raise; soft ones (short description,
    no ``required`` list) are kept in :attr:`warnings`.

    ``ledger``: the :class:`~tools.idempotency.IdempotencyLedger` of side-effect calls (default:
    in memory; the Toolbox uses ``data_dir/idempotency.db``). ``schema_store``: a loaded
    :class:`~tools.schema_versions.SchemaStore`; registering a tool whose parameters differ from
    the stored (or earlier registered) version classifies the change, expires the tool's
    ledger entries when the rule says so, and appends the migration note to
    :attr:`migration_notes` (changes in :attr:`schema_changes`).

    ``health_source``: ``tool name -> ToolHealth | None`` (the Toolbox sets it to its MCP
    servers' scores and circuit breakers); :meth:`health` asks it, for ranking the offer.
    """

    _SOFT_MARKERS = ("description of", 'lacks an explicit "required"')

    def __init__(self, ledger: IdempotencyLedger | None = None, schema_store: SchemaStore | None = None) -> None:
        self._specs: dict[str, ToolSpec] = {}
        self._runners: dict[str, Runner] = {}
        self.warnings: dict[str, list[str]] = {}
        self.ledger = ledger if ledger is not None else IdempotencyLedger(None)
        self.schema_store = schema_store
        self._schemas: dict[str, dict[str, Any]] = dict(schema_store.known) if schema_store else {}
        self.migration_notes: list[str] = []
        self.schema_changes: list[SchemaChange] = []
        self.health_source: HealthOf | None = None

    # -- registration -------------------------------------------------------------------
    def register(self, spec: ToolSpec, runner: Runner, *, strict: bool = True) -> None:
        """Add a tool. Raises DuplicateToolError (naming both sources) or ToolDefinitionError."""
        if spec.name in self._specs:
            other = self._specs[spec.name]
            raise DuplicateToolError(
                f"tool {spec.name!r} from {spec.source!r} duplicates the one from {other.source!r}; "
                "refused (rename it or namespace it as 'server__tool')"
            )
        problems = lint(spec)
        soft = [p for p in problems if any(m in p for m in self._SOFT_MARKERS)]
        hard = problems if strict else [p for p in problems if p not in soft]
        if hard:
            raise ToolDefinitionError(f"tool {spec.name!r} from {spec.source!r}: " + "; ".join(hard))
        if soft and not strict:
            self.warnings[spec.name] = soft
            log.warning("tool %s (%s): %s", spec.name, spec.source, "; ".join(soft))
        self._specs[spec.name] = spec
        self._runners[spec.name] = runner
        self._check_schema_version(spec)

    def _check_schema_version(self, spec: ToolSpec) -> None:
        """Schema change rules (seed §6.3); no blocking I/O (the store writes on its thread)."""
        previous = self._schemas.get(spec.name)
        self._schemas[spec.name] = spec.parameters
        if previous is not None and schema_hash(previous) == schema_hash(spec.parameters):
            return
        change = classify(previous, spec.parameters, tool=spec.name) if previous is not None else None
        if self.schema_store is not None:
            self.schema_store.record_nowait(spec.name, spec.parameters, change)
        if change is None:
            return
        self.schema_changes.append(change)
        if change.expire_cache:
            self.ledger.expire_nowait(spec.name)
        note = change.migration_note
        if note:
            self.migration_notes.append(note)
        log.info("tool %s: schema change %s (%s)", spec.name, change.kind, ", ".join(change.kinds) or "docs only")

    def stale_call(self, name: str, args: Any) -> str | None:
        """Why ``args`` are a call of tool ``name`` in the shape it had before its last recorded
        schema change (a renamed or removed field, a value of a field's old type:
        ``tools.schema_versions.stale_arguments``), or None. Such a call is an
        ``invalid_arguments`` error naming the fields and the current shape — never a question
        to the user — so the model retries in the new shape."""
        change = next((c for c in reversed(self.schema_changes) if c.tool == name), None)
        spec = self._specs.get(name)
        if change is None or spec is None or schema_hash(change.new) != schema_hash(spec.parameters):
            return None
        return stale_arguments(change, args)

    def unregister(self, name: str) -> None:
        """Remove a tool (e.g. its MCP server went away). Unknown names are ignored."""
        self._specs.pop(name, None)
        self._runners.pop(name, None)

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def get(self, name: str) -> ToolSpec | None:
        """The spec registered under ``name``, or None."""
        return self._specs.get(name)

    def specs(self) -> list[ToolSpec]:
        """All specs, sorted by name."""
        return [self._specs[n] for n in self.names()]

    def names(self) -> list[str]:
        """All tool names, sorted."""
        return sorted(self._specs)

    def health(self, name: str) -> ToolHealth | None:
        """The health of the server(s) behind a registered tool (:class:`tools.selection.ToolHealth`:
        seed score, available = not every server parked), or None (a builtin tool, an unknown
        name, no :attr:`health_source`). Pass as ``rank_tools(..., health=registry.health)``."""
        if self.health_source is None or name not in self._specs:
            return None
        return self.health_source(name)

    def openai_tools(self) -> list[dict[str, Any]]:
        """``[{"type": "function", "function": {"name", "description", "parameters"}}]`` for
        ``ChatModel.bind_tools``, sorted by name."""
        return [s.openai_tool() for s in self.specs()]

    # -- calls --------------------------------------------------------------------------
    async def call(self, name: str, args: dict[str, Any] | str | None, request_id: str) -> ToolOutcome:
        """Run one tool call; never raises for tool problems (K3, K4, K7, K8).

        ``args`` may be a dict or a JSON string (as some models emit). Error kinds:
        unknown name → "unknown_tool" (lists valid names); unparseable / schema-invalid
        arguments → "invalid_arguments" (the parse or validation message); the tool raised or
        reported an error → "tool_error"; over ``timeout_s`` → "timeout"; the MCP channel
        failed → "transport" (names the server). A repeated ``request_id`` for a side-effect
        tool returns the recorded outcome without running it again (seed §2.2).

        Exactly-once for side effects (``spec.side_effect``): the ledger claims the request
        before it runs. A timeout, or a transport failure after the request was sent, of a tool
        that is not ``spec.idempotent`` becomes "outcome_unknown": recorded, replayed to every
        duplicate, never retried. Transport failures known to have happened before sending
        (``ToolTransportError.sent`` false) stay "transport" and may be retried.
        """
        start = time.perf_counter()

        def fail(kind: ErrorKind, message: str) -> ToolOutcome:
            return ToolOutcome(
                status="error",
                error=message,
                error_kind=kind,
                tool=name,
                request_id=request_id,
                latency_s=time.perf_counter() - start,
            )

        spec = self._specs.get(name)
        if spec is None:
            return fail("unknown_tool", f"unknown tool {name!r}; valid tools are: {', '.join(self.names())}")
        parsed, problem = _parse_args(args)
        if problem is not None:
            return fail("invalid_arguments", f"arguments for {name!r} {problem}")
        stale = self.stale_call(name, parsed)
        if stale is not None:  # the tool changed under the conversation: the fix is the new shape
            return fail("invalid_arguments", stale)
        problem = _validate(spec.parameters, parsed)
        if problem is not None:
            return fail("invalid_arguments", f"arguments for {name!r} do not match its schema: {problem}")

        if not spec.side_effect:
            return await self._run(spec, parsed, request_id, start)

        async def run_recorded() -> dict[str, Any]:
            return (await self._run(spec, parsed, request_id, start)).model_dump()

        def lost(reason: str) -> dict[str, Any]:
            return ToolOutcome(
                status="error",
                error_kind="outcome_unknown",
                tool=name,
                request_id=request_id,
                error=_unknown_message(spec, reason),
            ).model_dump()

        try:
            record, replayed = await self.ledger.run_once(
                name,
                request_id,
                run_recorded,
                keep=lambda r: r.get("status") == "ok",
                uncertain=lambda r: r.get("error_kind") == "outcome_unknown",
                lost=lost,
                retry_safe=spec.retry_safe,
                fingerprint=_fingerprint(parsed),
            )
        except (LedgerBusy, LedgerUnavailable) as exc:  # busy elsewhere, or no ledger: not run
            return fail("tool_error", str(exc))
        except sqlite3.DatabaseError as exc:  # fail closed: without the ledger no side effect runs
            where = self.ledger.path or "the in-memory ledger"
            return fail(
                "tool_error",
                f"{name} was not run: the idempotency ledger {where} cannot be used ({exc}), "
                "so exactly-once cannot be guaranteed. Move the file aside to continue (it forgets "
                "which requests already ran).",
            )
        outcome = ToolOutcome.model_validate(record)
        if replayed:
            outcome = outcome.model_copy(update={"replayed": True, "latency_s": time.perf_counter() - start})
        return outcome

    async def _run(self, spec: ToolSpec, args: dict[str, Any], request_id: str, start: float) -> ToolOutcome:
        def out(**kw: Any) -> ToolOutcome:
            return ToolOutcome(tool=spec.name, request_id=request_id, latency_s=time.perf_counter() - start, **kw)

        runner = self._runners[spec.name]
        try:
            async with asyncio.timeout(spec.timeout_s + TIMEOUT_SLACK_S):
                result = await runner(args, request_id)
        except (ToolTimeout, TimeoutError) as exc:
            what = f"timed out: {exc}" if str(exc) else f"timed out after {spec.timeout_s:g} s and was interrupted"
            if not spec.retry_safe:
                return out(status="error", error_kind="outcome_unknown", error=_unknown_message(spec, what))
            return out(status="error", error_kind="timeout", error=f"{spec.name} {what}")
        except ToolTransportError as exc:
            if getattr(exc, "sent", True) and not spec.retry_safe:
                return out(
                    status="error",
                    error_kind="outcome_unknown",
                    error=_unknown_message(spec, f"lost its connection ({exc})"),
                )
            return out(status="error", error_kind="transport", error=str(exc))
        except ToolFailed as exc:
            kind: ErrorKind = (
                "configuration"
                if exc.kind == "configuration"
                else "invalid_value"
                if exc.kind == "invalid_value"
                else "tool_error"
            )
            suggestion = exc.suggestion if kind == "invalid_value" else None
            return out(status="error", error_kind=kind, error=str(exc), suggestion=suggestion)
        except ConfigurationError as exc:  # an in-process runner
            return out(status="error", error_kind="configuration", error=f"{type(exc).__name__}: {exc}")
        except InvalidValueError as exc:  # an in-process runner
            return out(
                status="error",
                error_kind="invalid_value",
                error=f"{type(exc).__name__}: {exc}",
                suggestion=exc.details(),
            )
        except Exception as exc:  # noqa: BLE001 - K4: the tool raised; an error result, never a crash
            return out(status="error", error_kind="tool_error", error=f"{type(exc).__name__}: {exc}")
        return out(status="ok", content=_jsonable(result))


def _unknown_message(spec: ToolSpec, what: str) -> str:
    return (
        f"outcome unknown: {spec.name} {what}. It may or may not have taken effect, so it will not "
        f"be run again automatically (that could repeat a side effect). Tell the user the outcome is "
        f"unknown and let them check ({spec.source}) before asking for it again."
    )


def _fingerprint(args: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(args, sort_keys=True, default=str).encode()).hexdigest()[:32]


def _parse_args(args: dict[str, Any] | str | None) -> tuple[dict[str, Any], str | None]:
    if args is None:
        return {}, None
    if isinstance(args, str):
        if not args.strip():
            return {}, None
        try:
            args = json.loads(args)
        except json.JSONDecodeError as exc:
            return {}, f"are not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
    if not isinstance(args, dict):
        return {}, f"must be a JSON object, got {type(args).__name__}"
    return args, None


def _validate(schema: dict[str, Any], args: dict[str, Any]) -> str | None:
    cls = jsonschema.validators.validator_for(schema)
    error = jsonschema.exceptions.best_match(cls(schema).iter_errors(args))
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path)
    message = error.message if len(error.message) <= 300 else cut_text(error.message, 300)  # no 4 KB echo
    return message + (f" (at '{where}')" if where else "")


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return json.loads(json.dumps(value, default=str))


__all__ = ["NAME_RE", "DuplicateToolError", "Runner", "ToolDefinitionError", "ToolOutcome", "ToolRegistry"]
