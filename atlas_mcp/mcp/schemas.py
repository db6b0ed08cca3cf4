"""The tools' output schemas as published: pydantic's, rewritten to say the same thing in the
form a client's JSON-schema check walks fastest.

Every MCP client may check each tool result against the tool's output schema; the official
Python SDK does it with ``jsonschema`` after every call, on the wall time a recall's caller
waits for. That check costs by the subschemas it enters: one per property present, one per
branch of an ``anyOf`` it tries, and a lookup for every ``$ref``. pydantic writes every
optional field as ``anyOf: [{type: T}, {type: null}]`` and every nested model as a ``$ref``
into ``$defs``; here the first becomes ``type: [T, "null"]`` and the second the definition
itself, where that is the same set of valid instances (``tests/foundation/test_published_schemas.py``
checks the verdicts on real and mutated results). Descriptions and titles stay: agents read them.
"""

from __future__ import annotations

from typing import Any

Schema = dict[str, Any]

# Keywords that only annotate: they never change which instances are valid.
_ANNOTATIONS = frozenset(
    {"title", "description", "default", "examples", "deprecated", "readOnly", "writeOnly", "$comment"}
)
# Keywords that constrain only instances of one JSON type and pass every other value, so
# moving them beside ``type: [T, "null"]`` lets a null through exactly as the anyOf did.
_NUMBER = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"})
_ONLY_FOR_TYPE: dict[str, frozenset[str]] = {
    "object": frozenset(
        {
            "properties",
            "required",
            "additionalProperties",
            "patternProperties",
            "propertyNames",
            "minProperties",
            "maxProperties",
            "dependentRequired",
            "dependentSchemas",
        }
    ),
    "array": frozenset(
        {
            "items",
            "prefixItems",
            "contains",
            "minContains",
            "maxContains",
            "minItems",
            "maxItems",
            "uniqueItems",
        }
    ),
    "string": frozenset({"minLength", "maxLength", "pattern", "format"}),
    "number": _NUMBER,
    "integer": _NUMBER,
    "boolean": frozenset(),
}
# Where subschemas sit (draft 2020-12): one schema, a list of them, or a map of names to them.
_ONE = frozenset(
    {"items", "additionalProperties", "not", "contains", "propertyNames", "if", "then", "else"}
    | {"unevaluatedItems", "unevaluatedProperties", "contentSchema"}
)
_MANY = frozenset({"anyOf", "allOf", "oneOf", "prefixItems"})
_MAP = frozenset({"properties", "patternProperties", "dependentSchemas", "$defs"})
_NULL: Schema = {"type": "null"}
_LOCAL = "#/$defs/"


def published(schema: Schema) -> Schema:
    """``schema`` (a root with local ``$defs``) with non-recursive ``$ref``s inlined and
    ``anyOf: [S, {type: null}]`` written as S with ``type: [T, "null"]`` where S's other
    keywords apply to type T alone; the definitions still referenced (recursive ones, or
    one whose ``$ref`` could not be merged with its siblings) stay."""
    defs: dict[str, Schema] = schema.get("$defs", {})
    recursive = {name for name in defs if name in _reachable(defs, name)}
    rewritten: Schema = _rewrite(schema, defs, recursive)
    rewritten.pop("$defs", None)
    kept: dict[str, Schema] = {}
    todo = _refs(rewritten)
    while todo:
        name = todo.pop()
        if name in defs and name not in kept:
            kept[name] = _rewrite(defs[name], defs, recursive)
            todo |= _refs(kept[name])
    if kept:
        rewritten["$defs"] = {name: kept[name] for name in defs if name in kept}
    return rewritten


def _local(node: Any) -> str | None:
    """The definition a ``$ref`` names, when it is one of the root's own ``$defs``."""
    ref = node.get("$ref") if isinstance(node, dict) else None
    if isinstance(ref, str) and ref.startswith(_LOCAL) and "/" not in ref[len(_LOCAL) :]:
        return ref[len(_LOCAL) :]
    return None


def _refs(node: Any) -> set[str]:
    """The local definitions a schema refers to directly (not through other definitions)."""
    if not isinstance(node, dict):
        return set()
    found = {name} if (name := _local(node)) is not None else set()
    for key, value in node.items():
        if key in _ONE:
            found |= _refs(value)
        elif key in _MANY and isinstance(value, list):
            for each in value:
                found |= _refs(each)
        elif key in _MAP and key != "$defs" and isinstance(value, dict):
            for each in value.values():
                found |= _refs(each)
    return found


def _reachable(defs: dict[str, Schema], start: str) -> set[str]:
    """Every definition ``start``'s own schema leads to, through any number of ``$ref``s."""
    seen: set[str] = set()
    todo = list(_refs(defs.get(start)))
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(_refs(defs.get(name)))
    return seen


def _rewrite(node: Any, defs: dict[str, Schema], recursive: set[str]) -> Any:
    if not isinstance(node, dict):
        return node  # a boolean schema
    name = _local(node)
    if name is not None and name in defs and name not in recursive:
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        inlined = _merged(siblings, _rewrite(defs[name], defs, recursive))
        if inlined is not None:
            return inlined
    out: Schema = {}
    for key, value in node.items():
        if key in _ONE:
            out[key] = _rewrite(value, defs, recursive)
        elif key in _MANY and isinstance(value, list):
            out[key] = [_rewrite(each, defs, recursive) for each in value]
        elif key in _MAP and key != "$defs" and isinstance(value, dict):
            out[key] = {k: _rewrite(v, defs, recursive) for k, v in value.items()}
        else:
            out[key] = value  # keywords whose values are data (enum, const, default, ...)
    return _nullable(out)


def _merged(outer: Schema, inner: Schema) -> Schema | None:
    """``outer`` and ``inner`` as one schema (both apply), or None when a keyword is in both
    with different values (two constraints, or two descriptions: neither may be lost)."""
    if any(outer[key] != inner[key] for key in outer.keys() & inner.keys()):
        return None
    return {**inner, **outer}


def _nullable(node: Schema) -> Schema:
    """``anyOf: [S, {type: null}]`` (either order) as S with ``type: [T, "null"]``, when S's
    other keywords constrain only values of type T; any other node as it is."""
    branches = node.get("anyOf")
    if not isinstance(branches, list) or len(branches) != 2 or _NULL not in branches:
        return node
    other = branches[1] if branches[0] == _NULL else branches[0]
    if not isinstance(other, dict):
        return node
    kind = other.get("type")
    allowed = _ONLY_FOR_TYPE.get(kind) if isinstance(kind, str) else None
    if allowed is None or not set(other) - {"type"} <= allowed | _ANNOTATIONS:
        return node
    rest = {k: v for k, v in node.items() if k != "anyOf"}
    if "type" in rest or _merged(rest, other) is None:  # a type beside the anyOf refuses null
        return node
    out: Schema = {}
    for key, value in node.items():
        if key != "anyOf":
            out[key] = value
            continue
        for inner_key, inner_value in other.items():
            if inner_key == "type":
                out["type"] = [kind, "null"]
            elif inner_key not in rest:
                out[inner_key] = inner_value
    return out
