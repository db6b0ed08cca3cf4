"""Cut the compact subset of the Elasticsearch OpenAPI specification the spec tests need.

    python tests/elasticsearch_engine/spec/vendor.py ../shared/es-spec

reads the full documents (elastic/elasticsearch-specification, Apache-2.0) and writes, next to
this file, only the request bodies of ``PATHS`` and the component schemas they (and
``SCHEMAS``) reach, without their prose. Validation against the subset is the same as against
the whole document. Add a path or schema here and re-run when a test validates a new request.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
FILES = (
    "elasticsearch-serverless-openapi.9.0-a12f710.json",
    "elasticsearch-serverless-openapi.main-9d9b9a5.json",
)
PATHS = {
    "/{index}/_search": ("post",),
    "/{index}": ("put",),
    "/_security/api_key": ("post", "delete"),
    "/_security/_query/api_key": ("post",),
    "/_mget": ("post",),
    "/_pit": ("delete",),
}
SCHEMAS = (
    "_global.bulk.OperationContainer",
    "_global.bulk.UpdateAction",
    "_global.msearch.MultisearchHeader",
)
PROSE = {"description", "externalDocs", "examples", "example", "x-state", "summary"}


def _strip(node: Any, in_properties: bool = False) -> Any:
    """The node without prose; a ``properties`` map keeps every key (they are field names)."""
    if isinstance(node, list):
        return [_strip(n) for n in node]
    if not isinstance(node, dict):
        return node
    return {k: _strip(v, k == "properties") for k, v in node.items() if in_properties or k not in PROSE}


def _refs(node: Any) -> list[tuple[str, str]]:
    if isinstance(node, list):
        return [r for n in node for r in _refs(n)]
    if not isinstance(node, dict):
        return []
    found = [tuple(node["$ref"].split("/")[2:4])] if isinstance(node.get("$ref"), str) else []
    return found + [r for v in node.values() for r in _refs(v)]


def subset(spec: dict[str, Any]) -> dict[str, Any]:
    paths = {
        p: {m: {"requestBody": spec["paths"][p][m]["requestBody"]} for m in methods}
        for p, methods in PATHS.items()
    }
    components: dict[str, dict[str, Any]] = {"schemas": {}, "requestBodies": {}}
    todo = [("schemas", name) for name in SCHEMAS] + _refs(paths)
    while todo:
        kind, name = todo.pop()
        if name not in components[kind]:
            components[kind][name] = spec["components"][kind][name]
            todo += _refs(components[kind][name])
    return _strip(
        {"openapi": spec["openapi"], "info": spec["info"], "paths": paths, "components": components}
    )


def main(source: Path) -> None:
    for name in FILES:
        cut = subset(json.loads((source / name).read_text()))
        target = HERE / f"{name}.gz"
        target.write_bytes(
            gzip.compress(json.dumps(cut, sort_keys=True, separators=(",", ":")).encode(), mtime=0)
        )
        print(f"{target.name}: {len(cut['components']['schemas'])} schemas, {target.stat().st_size:,} bytes")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
