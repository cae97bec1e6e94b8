"""Tool schema normalisation (DESIGN §3 "schema differences between SDKs are normalised here";
failure kind K6): :func:`normalize_schema` makes a tool's JSON Schema acceptable to every
provider — OpenAI (strict too), Gemini-style endpoints and the embedded model's grammar —
inlining ``$ref``, rewriting type unions and dropping metadata; :class:`SchemaNormalizationError`
for a schema that cannot be made usable.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from tools.spec import schema_error

_SUBSCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SUBSCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_SUBSCHEMA_SINGLE = (
    "items",
    "additionalProperties",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedProperties",
    "unevaluatedItems",
    "additionalItems",
)
#: Keywords dropped everywhere: metadata some providers reject and nothing here needs.
_DROPPED = ("$schema", "$id", "$comment", "$anchor", "$dynamicAnchor")
#: Bound on ``$ref`` expansion (a schema that keeps growing is refused, not expanded forever).
MAX_SCHEMA_NODES = 20_000
#: Levels a recursive ``$ref`` (a tree, a linked list, a JSON value type) is inlined before it
#: is cut to its bare type (issue 23 kind 5: such tools were skipped, now they are offered).
RECURSION_DEPTH = 3


class SchemaNormalizationError(ValueError):
    """A tool schema that cannot be made usable: a ``$ref`` that points outside the document or
    nowhere, a schema that is not valid JSON Schema, or one that grows past MAX_SCHEMA_NODES
    when its references are inlined. The tool is skipped, not the request. (A ``$ref`` cycle is
    not an error: it is cut at :data:`RECURSION_DEPTH` levels.)"""


def normalize_schema(schema: dict[str, Any] | None) -> dict[str, Any]:
    """Return a copy of ``schema`` that every provider accepts: OpenAI (strict too), Gemini-style
    endpoints and the embedded model's JSON-Schema grammar (K6). The input is not modified.

    * drops ``$schema`` / ``$id`` / ``$comment`` / anchors (everywhere);
    * inlines local ``$ref`` (``#/$defs/X``, ``#/definitions/X``, any ``#/...`` JSON pointer,
      ``#`` itself) and then drops ``$defs`` / ``definitions`` (kept, normalised, in a schema
      that has no ``$ref`` at all); a recursive reference is inlined :data:`RECURSION_DEPTH`
      levels deep and then cut to its bare type (the JSON-Schema grammar of the embedded model
      and strict providers cannot express recursion once inlined); a reference outside the
      document raises :class:`SchemaNormalizationError`;
    * rewrites type unions: ``{"type": ["string", "null"]}`` → ``{"anyOf": [{"type": "string"},
      {"type": "null"}]}`` (the keywords of each type go with it), ``"nullable": true`` (OpenAPI)
      → the same ``anyOf`` with ``null``; ``oneOf`` → ``anyOf`` (strict OpenAI rejects
      ``oneOf``; for argument validation of tool calls the two differ only when branches
      overlap); a one-branch ``anyOf``/``allOf`` is unwrapped;
    * gives every object schema a ``properties`` map (``{}`` when absent), so
      ``{"$schema": "...draft-07...", "type": "object"}`` → ``{"type": "object", "properties": {}}``;
    * at the top level, ``None``/``{}`` become ``{"type": "object", "properties": {}}``;
    * the result must be a valid JSON Schema, else :class:`SchemaNormalizationError`.
    """
    root = copy.deepcopy(schema) if schema else {}
    if not isinstance(root, dict):
        raise SchemaNormalizationError(f"input schema must be an object, got {type(root).__name__}")
    counter = [0]
    has_refs = '"$ref"' in json.dumps(root, default=str)
    out: dict[str, Any] = _normalize(_inline(root, root, (), counter))  # a dict in, a dict out
    if has_refs:  # every reference is inlined now: the definitions are not needed
        out.pop("$defs", None)
        out.pop("definitions", None)
    if "type" not in out and not any(k in out for k in ("anyOf", "allOf", "oneOf", "$ref")):
        out["type"] = "object"
        out.setdefault("properties", {})
    if (error := schema_error(out)) is not None:
        raise SchemaNormalizationError(f"not a valid JSON Schema: {error}")
    return out


def _pointer(root: dict[str, Any], ref: str) -> Any:
    if ref == "#":
        return root
    if not ref.startswith("#/"):
        raise SchemaNormalizationError(f"$ref {ref!r} is not a local reference (#/...)")
    node: Any = root
    for escaped in ref[2:].split("/"):
        part = escaped.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise SchemaNormalizationError(f"$ref {ref!r} points nowhere")
    return node


def _inline(node: Any, root: dict[str, Any], stack: tuple[str, ...], counter: list[int]) -> Any:
    counter[0] += 1
    if counter[0] > MAX_SCHEMA_NODES:
        raise SchemaNormalizationError(f"schema grows past {MAX_SCHEMA_NODES} nodes when its $refs are inlined")
    if isinstance(node, list):
        return [_inline(v, root, stack, counter) for v in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str):
        if stack.count(ref) >= RECURSION_DEPTH:
            return _recursion_leaf(_pointer(root, ref), ref)
        target = _inline(copy.deepcopy(_pointer(root, ref)), root, (*stack, ref), counter)
        siblings = {
            k: _inline(v, root, stack, counter) for k, v in node.items() if k not in ("$ref", "$defs", "definitions")
        }
        if not isinstance(target, dict):
            raise SchemaNormalizationError(f"$ref {ref!r} does not point to a schema")
        target = {k: v for k, v in target.items() if k not in ("$defs", "definitions")}
        if not siblings:
            return target
        if all(k in ("description", "title", "default", "examples") for k in siblings):
            return {**target, **siblings}
        return {"allOf": [target, siblings]}
    return {
        k: (
            v
            if k in ("$defs", "definitions", "enum", "const", "default", "examples")
            else _inline(v, root, stack, counter)
        )
        for k, v in node.items()
    }


def _recursion_leaf(target: Any, ref: str) -> dict[str, Any]:
    """What a recursive ``$ref`` becomes below :data:`RECURSION_DEPTH` levels: the target's
    type only (an object: any properties), with a description saying so. Every provider and the
    embedded model's grammar accept it; the arguments deeper down are checked by the server."""
    name = "root" if ref == "#" else ref.rsplit("/", 1)[-1]
    leaf: dict[str, Any] = {"description": f"nested {name} (deeper levels: any value of this type)"}
    kind = target.get("type") if isinstance(target, dict) else None
    if isinstance(kind, str):
        leaf["type"] = kind
        if kind == "object":
            leaf["properties"] = {}
    return leaf


def _is_object(schema: dict[str, Any]) -> bool:
    t = schema.get("type")
    return t == "object" or (isinstance(t, list) and "object" in t)


#: Keywords that apply to one JSON type (moved into that type's branch when a union is split).
_TYPE_KEYWORDS = {
    "object": (
        "properties",
        "required",
        "additionalProperties",
        "patternProperties",
        "propertyNames",
        "minProperties",
        "maxProperties",
        "dependentRequired",
        "dependentSchemas",
        "unevaluatedProperties",
    ),
    "array": (
        "items",
        "prefixItems",
        "minItems",
        "maxItems",
        "uniqueItems",
        "contains",
        "minContains",
        "maxContains",
        "unevaluatedItems",
        "additionalItems",
    ),
    "string": ("minLength", "maxLength", "pattern", "format", "contentEncoding", "contentMediaType"),
    "number": ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"),
}
_TYPE_KEYWORDS["integer"] = _TYPE_KEYWORDS["number"]


def _split_union(schema: dict[str, Any], types: list[str]) -> dict[str, Any]:
    """``{"type": [A, B], ...}`` → ``{"anyOf": [{"type": A, ...A's keywords}, {"type": B, ...}], ...}``."""
    moved = {k for t in types for k in _TYPE_KEYWORDS.get(t, ())}
    common = {k: v for k, v in schema.items() if k != "type" and k not in moved}
    branches = []
    for t in types:
        branch: dict[str, Any] = {"type": t}
        for k in _TYPE_KEYWORDS.get(t, ()):
            if k in schema:
                branch[k] = copy.deepcopy(schema[k])
        branches.append(branch)
    return {**common, "anyOf": branches}


def _light(schema: Any) -> Any:
    """Normalisation of unreferenced definitions (kept only when a schema has no ``$ref``):
    keywords dropped and ``properties`` added, nothing rewritten (nothing validates with them)."""
    if isinstance(schema, list):
        return [_light(v) for v in schema]
    if not isinstance(schema, dict):
        return schema
    for key in _DROPPED:
        schema.pop(key, None)
    if _is_object(schema) and not isinstance(schema.get("properties"), dict):
        schema["properties"] = {}
    return {
        k: (_light(v) if isinstance(v, (dict, list)) and k not in ("enum", "const", "default", "examples") else v)
        for k, v in schema.items()
    }


def _normalize(schema: Any) -> Any:
    if not isinstance(schema, dict):
        return schema
    for key in _DROPPED:
        schema.pop(key, None)
    t = schema.get("type")
    if isinstance(t, list):
        uniq = list(dict.fromkeys(t))
        if len(uniq) == 1:
            schema["type"] = uniq[0]
        elif uniq:
            schema = _split_union(schema, uniq)
    if schema.get("nullable") is True:
        schema.pop("nullable")
        if "type" in schema or "anyOf" not in schema:
            base = {k: v for k, v in schema.items() if k not in ("description", "title", "default")}
            keep = {k: v for k, v in schema.items() if k in ("description", "title", "default")}
            schema = {**keep, "anyOf": [base, {"type": "null"}]}
        else:
            schema["anyOf"] = [*schema["anyOf"], {"type": "null"}]
    elif "nullable" in schema:
        schema.pop("nullable")
    if "oneOf" in schema and "anyOf" not in schema:
        schema["anyOf"] = schema.pop("oneOf")
    if _is_object(schema) and not isinstance(schema.get("properties"), dict):
        schema["properties"] = {}
    for key in _SUBSCHEMA_MAPS:
        sub = schema.get(key)
        if isinstance(sub, dict):
            schema[key] = {k: (_light(v) if key in ("$defs", "definitions") else _normalize(v)) for k, v in sub.items()}
    for key in _SUBSCHEMA_LISTS:
        sub = schema.get(key)
        if isinstance(sub, list):
            schema[key] = [_normalize(v) for v in sub]
    for key in _SUBSCHEMA_SINGLE:
        if isinstance(schema.get(key), dict):
            schema[key] = _normalize(schema[key])
        elif key == "items" and isinstance(schema.get(key), list):
            schema[key] = [_normalize(v) for v in schema[key]]
    for key in ("anyOf", "allOf"):
        sub = schema.get(key)
        if isinstance(sub, list) and len(sub) == 1 and isinstance(sub[0], dict):
            only = schema.pop(key)[0]
            clash = set(only) & set(schema)
            if clash - {"description", "title"}:
                schema[key] = [only]
            else:
                schema = {**only, **schema}
    return schema
