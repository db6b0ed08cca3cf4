"""The Elasticsearch OpenAPI specification as a request-body oracle (es-api.md B.1.4).

Stock validation is both too strict (user-defined values typed ``object``, duplicate
``oneOf`` branches) and too lax (no schema forbids unknown keys, so typos pass). Two passes
fix that: *loosen* (``oneOf`` → ``anyOf``, a bare ``{"type": "object"}`` → any value) and
*strict keys* (``allOf`` object parts merged into one schema with ``additionalProperties:
false``, and the same for every plain object schema with ``properties``). Decay functions
stay open: their body is keyed by a field name the spec cannot express.
"""

from __future__ import annotations

import gzip
import json
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft4Validator

# The compact subset the tests need, vendored so they run in a fresh clone (spec/vendor.py cuts
# it from ../shared/es-spec; Apache-2.0, see spec/NOTICE).
SPEC_DIR = Path(__file__).resolve().parent / "spec"
FLOOR = "elasticsearch-serverless-openapi.9.0-a12f710.json"  # the oldest server we support
MAIN = "elasticsearch-serverless-openapi.main-9d9b9a5.json"
_OPEN = ("DecayFunction", "SortOptions")  # field-keyed bodies the spec cannot express
_DOC_KEYS = {
    "description",
    "externalDocs",
    "x-state",
    "deprecated",
    "default",
    "examples",
    "example",
    "title",
}


def spec_path(name: str) -> Path:
    return SPEC_DIR / f"{name}.gz"


def _loosen(node: Any) -> Any:
    if isinstance(node, list):
        return [_loosen(n) for n in node]
    if not isinstance(node, dict):
        return node
    if node.get("type") == "object" and not (set(node) - _DOC_KEYS - {"type"}):
        return {}
    out = {("anyOf" if k == "oneOf" else k): _loosen(v) for k, v in node.items() if k not in _DOC_KEYS}
    return out


class Oracle:
    def __init__(self, path: Path) -> None:
        spec = json.loads(gzip.decompress(path.read_bytes()))
        self._spec = spec
        self._raw = {k: _loosen(v) for k, v in spec["components"]["schemas"].items()}
        self._schemas = {name: self._strict(schema, name) for name, schema in self._raw.items()}

    # -- strict keys --------------------------------------------------------------------

    def _resolve(self, node: dict[str, Any], seen: list[str]) -> dict[str, Any] | None:
        while "$ref" in node:
            name = node["$ref"].rsplit("/", 1)[1]
            if name in seen:  # a cycle through allOf: leave it unmerged
                return None
            seen.append(name)
            node = self._raw[name]
        return node

    def _object_parts(self, node: dict[str, Any], seen: list[str]) -> list[dict[str, Any]] | None:
        """The object schemas an ``allOf`` is made of, flattened; None if one is not an object."""
        parts = []
        for ref in node["allOf"]:
            part = self._resolve(ref, seen)
            if part is None:
                return None
            if "allOf" in part:
                nested = self._object_parts(part, seen)
                if nested is None:
                    return None
                parts += nested
            elif "additionalProperties" in part:  # a map (user-defined keys): keep it open
                return None
            elif "properties" in part or part.get("type") == "object":
                parts.append(part)
            else:
                return None
        return parts

    def _strict(self, node: Any, name: str = "", stack: tuple[str, ...] = ()) -> Any:
        if isinstance(node, list):
            return [self._strict(n, stack=stack) for n in node]
        if not isinstance(node, dict):
            return node
        if any(marker in name for marker in _OPEN):
            return node
        seen = list(stack)
        if "allOf" in node and (parts := self._object_parts(node, seen)) is not None:
            # min/maxProperties of a part ("exactly one function") cannot survive the merge
            merged: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}
            required: list[str] = []
            for part in parts:
                merged["properties"].update(part.get("properties", {}))
                required += part.get("required", [])
            if required:
                merged["required"] = sorted(set(required))
            if len(parts) == 1:  # allOf as a wrapper (to attach a description): keep its counts
                merged |= {k: parts[0][k] for k in ("minProperties", "maxProperties") if k in parts[0]}
            node = merged
        inner = tuple(seen)
        out = {
            k: (
                {p: self._strict(s, stack=inner) for p, s in v.items()}
                if k == "properties"
                else self._strict(v, stack=inner)
            )
            for k, v in node.items()
        }
        if "properties" in out and "additionalProperties" not in out:
            out["additionalProperties"] = False
        return out

    # -- validation ---------------------------------------------------------------------

    def request_schema(self, method: str, path: str) -> dict[str, Any]:
        body = self._spec["paths"][path][method.lower()]["requestBody"]
        if "$ref" in body:
            body = self._spec["components"]["requestBodies"][body["$ref"].rsplit("/", 1)[1]]
        return body["content"]["application/json"]["schema"]

    def errors(self, schema: dict[str, Any], instance: Any) -> list[str]:
        root = {**self._strict(_loosen(schema)), "components": {"schemas": self._schemas}}
        validator = Draft4Validator(root)
        return sorted(
            f"{'/'.join(map(str, e.absolute_path))}: {e.message[:200]}"
            for e in validator.iter_errors(instance)
        )

    def body_errors(self, method: str, path: str, body: Any) -> list[str]:
        return self.errors(self.request_schema(method, path), body)

    def schema_errors(self, name: str, instance: Any) -> list[str]:
        return self.errors({"$ref": f"#/components/schemas/{name}"}, instance)


@cache
def oracle(name: str) -> Oracle:
    return Oracle(spec_path(name))
