"""MCP ``CallToolResult`` → the JSON value a tool result is (DESIGN §3; failure kind K7).

* text blocks: the text (one block that parses as JSON → that value);
* images and audio: never inlined as base64. The payload is written under ``media_dir`` (named by
  its SHA-256) and the model gets a placeholder ``{"type": "image", "mime_type", "bytes",
  "handle", "description"}`` — a model that cannot see images reads what it is and where it is;
  a caller that feeds images to a vision model reads the file at ``handle``
  (:func:`model_content`: LangChain standard image blocks for a model that accepts images, the
  text alone — placeholders describe the images — for one that does not);
* embedded resources: text resources as ``{"type": "resource", "uri", "mime_type", "text"}``,
  binary ones saved like images (``handle``);
* resource links: ``{"type": "resource_link", "uri", "name", "mime_type", "description"}``;
* ``structuredContent``: returned as the value when the content is empty or only repeats it
  (FastMCP sends both); otherwise ``{"content": ..., "structured": ...}``;
* ``isError`` results raise :class:`ToolFailed` whose message carries the text *and* the
  structured error payload (``code``, ``retry_after``, ...), so the model sees both (K7).

A tool's ``outputSchema`` is checked once (:func:`output_validator`) and the compiled validator
reused for every result: ``jsonschema.validate`` re-checks the schema against its metaschema on
each call, which cost ~1 ms CPU per call — most of the pool's overhead over a raw session (P1).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import logging
import mimetypes
import re
from pathlib import Path
from typing import Any, Protocol

import jsonschema
from mcp import types

from tools.errors import ToolFailed

log = logging.getLogger(__name__)


class Validator(Protocol):
    """What :func:`output_validator` returns (a ``jsonschema`` validator instance)."""

    def iter_errors(self, instance: Any) -> Any: ...


def output_validator(schema: dict[str, Any] | None, where: str = "an MCP tool") -> Validator | None:
    """A compiled validator for a tool's ``outputSchema`` (its metaschema checked once here);
    None when there is no schema or it is not a valid JSON Schema (a warning naming ``where``:
    such a schema is ignored, never every result rejected)."""
    if schema is None:
        return None
    try:
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
        return cls(schema)
    except (jsonschema.SchemaError, jsonschema.exceptions.RefResolutionError) as exc:
        log.warning("ignoring the invalid output schema of %s: %s", where, getattr(exc, "message", exc))
        return None


def result_to_json(
    result: types.CallToolResult, output_schema: dict[str, Any] | Validator | None = None, media_dir: Path | None = None
) -> Any:
    """A ``CallToolResult`` → JSON-able value (module docstring). Raises ToolFailed for an
    ``isError`` result or structured content that breaks the tool's ``output_schema`` (a schema
    dict, compiled on each call, or a validator from :func:`output_validator`, compiled once).
    Blocking only when a binary payload is saved (small writes)."""
    blocks = [block_to_json(b, media_dir) for b in result.content or []]
    structured = result.structuredContent
    if result.isError:
        text = "\n".join(b for b in blocks if isinstance(b, str)) or "MCP tool reported an error"
        if structured is not None:
            text += "\nstructured error: " + json.dumps(structured, ensure_ascii=False, default=str)[:2000]
        raise ToolFailed(text)
    if output_schema is not None:
        if structured is None:
            raise ToolFailed("the tool has an output schema but returned no structured content")
        validator = output_validator(output_schema) if isinstance(output_schema, dict) else output_schema
        try:
            error = jsonschema.exceptions.best_match(validator.iter_errors(structured)) if validator else None
        except jsonschema.exceptions.RefResolutionError:  # a $ref it cannot resolve: schema unusable
            log.warning("ignoring an MCP tool's output schema with an unresolvable $ref")
            error = None
        if error is not None:
            raise ToolFailed(f"structured content does not match the tool's output schema: {error.message}")
    value = [_maybe_json(b) if isinstance(b, str) else b for b in blocks]
    if structured is not None:
        if not value:
            return structured
        v = value[0] if len(value) == 1 else value
        if _same(v, structured):
            return v
        return {"content": v, "structured": structured}
    if not value:
        return ""
    return value[0] if len(value) == 1 else value


def _same(a: Any, b: Any) -> bool:
    if a == b:
        return True
    # FastMCP wraps a scalar return value as {"result": value}
    return isinstance(b, dict) and set(b) == {"result"} and b["result"] == a


def block_to_json(b: Any, media_dir: Path | None = None) -> Any:
    """One MCP content block → a string (text) or a dict without inline binary payloads."""
    kind = getattr(b, "type", None)
    if kind == "text":
        return b.text
    if kind in ("image", "audio"):
        return _media(kind, b.data, b.mimeType, media_dir)
    if kind == "resource_link":
        out = {
            "type": "resource_link",
            "uri": str(b.uri),
            "name": b.name,
            "mime_type": b.mimeType,
            "description": b.description,
        }
        return {k: v for k, v in out.items() if v is not None}
    if kind == "resource":
        res = b.resource
        if isinstance(res, types.TextResourceContents):
            return {"type": "resource", "uri": str(res.uri), "mime_type": res.mimeType, "text": res.text}
        placeholder = _media("resource", getattr(res, "blob", ""), getattr(res, "mimeType", None), media_dir)
        placeholder["uri"] = str(res.uri)
        return placeholder
    return b.model_dump(mode="json", exclude_none=True) if hasattr(b, "model_dump") else str(b)


def _media(kind: str, data: str, mime: str | None, media_dir: Path | None) -> dict[str, Any]:
    try:
        raw = base64.b64decode(data or "", validate=False)
    except (binascii.Error, ValueError):
        raw = b""
    mime = mime or "application/octet-stream"
    out: dict[str, Any] = {"type": kind, "mime_type": mime, "bytes": len(raw)}
    handle = None
    if media_dir is not None and raw:
        ext = mimetypes.guess_extension(mime) or ".bin"
        path = Path(media_dir) / f"{hashlib.sha256(raw).hexdigest()[:32]}{ext}"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            if not path.exists():
                path.write_bytes(raw)
            handle = str(path)
        except OSError as exc:
            log.warning("could not save an MCP %s payload: %s", kind, exc)
    if handle:
        out["handle"] = handle
    what = {"image": "an image", "audio": "an audio clip"}.get(kind, "a binary resource")
    out["description"] = (
        f"{what} ({mime}, {len(raw)} bytes)"
        + (f", saved at {handle}" if handle else ", not saved")
        + "; its content is not shown to a model that cannot read it"
    )
    return out


#: Largest image (bytes) :func:`image_blocks` inlines for a vision model; larger ones stay placeholders.
MAX_IMAGE_BYTES = 5_000_000


def _placeholders(value: Any) -> list[dict[str, Any]]:
    """Image placeholders (``{"type": "image", "handle", "mime_type", ...}``) anywhere in ``value``."""
    if isinstance(value, dict):
        if value.get("type") == "image" and isinstance(value.get("handle"), str):
            return [value]
        return [p for v in value.values() for p in _placeholders(v)]
    if isinstance(value, list):
        return [p for v in value for p in _placeholders(v)]
    return []


def image_blocks(value: Any, *, max_bytes: int = MAX_IMAGE_BYTES) -> list[dict[str, Any]]:
    """LangChain standard image content blocks (``{"type": "image", "base64", "mime_type"}``,
    :func:`langchain_core.messages.content.create_image_block`) for every saved image placeholder
    in a tool result ``value``, read from its ``handle``, in order, each image once. Images over
    ``max_bytes`` or whose file cannot be read are left out (their placeholder still describes
    them). Blocking (reads files)."""
    from langchain_core.messages.content import create_image_block

    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for p in _placeholders(value):
        handle = p["handle"]
        if handle in seen:
            continue
        seen.add(handle)
        try:
            path = Path(handle)
            if path.stat().st_size > max_bytes:
                continue
            data = path.read_bytes()
        except OSError as exc:
            log.info("MCP image %s not passed to the model: %s", handle, exc)
            continue
        block = create_image_block(
            base64=base64.b64encode(data).decode("ascii"), mime_type=str(p.get("mime_type") or "image/png")
        )
        out.append(dict(block))
    return out


def model_content(
    text: str, value: Any, *, accepts_images: bool, max_bytes: int = MAX_IMAGE_BYTES
) -> str | list[str | dict[str, Any]]:
    """What a tool message carries for a model: ``text`` (the result's bounded envelope) alone
    when the model does not accept images or the result has none — the placeholders in it say
    what each image is and where (``handle``); otherwise ``[{"type": "text", "text": text},
    image blocks...]`` (:func:`image_blocks`). Blocking (reads files)."""
    blocks = image_blocks(value, max_bytes=max_bytes) if accepts_images else []
    if not blocks:
        return text
    return [{"type": "text", "text": text}, *blocks]


def content_to_json(content: Any, artifact: Any = None) -> Any:
    """Content blocks already converted to dicts/strings → JSON-able value (one text block that
    parses as JSON → that value; one block → it; several → a list; base64 payloads replaced by
    their size). Falls back to ``artifact["structured_content"]``."""
    if isinstance(content, str):
        return _maybe_json(content)
    blocks = content if isinstance(content, list) else [content]
    out: list[Any] = []
    for b in blocks:
        if isinstance(b, dict) and b.get("type") == "text":
            out.append(_maybe_json(b.get("text", "")))
        elif isinstance(b, str):
            out.append(_maybe_json(b))
        elif isinstance(b, dict):
            out.append(
                {
                    k: (f"<{len(v)} base64 chars>" if k in ("base64", "data", "blob") else v)
                    for k, v in b.items()
                    if k != "id"
                }
            )
        else:
            out.append(str(b))
    if not out and isinstance(artifact, dict) and artifact.get("structured_content") is not None:
        return artifact["structured_content"]
    return out[0] if len(out) == 1 else out


_JSON_SCALAR = re.compile(r"^(-?\d+(\.\d+)?([eE][+-]?\d+)?|true|false|null)$")


def _maybe_json(text: str) -> Any:
    s = text.strip()
    if s[:1] in ("{", "[") or _JSON_SCALAR.match(s):
        try:
            return json.loads(s)
        except json.JSONDecodeError:
            pass
    return text
