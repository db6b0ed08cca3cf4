"""Doctor's checks of the indices: each exists, and its mapping is the one this version writes."""

from __future__ import annotations

from typing import Any

from ....errors import AtlasError
from ..layout import ALL_TYPES, IndexLayout
from ..mappings import mapping, state_mapping
from ..transport import Cluster
from .report import FAIL, OK, WARN, Check, Grants


def indices(cluster: Cluster, layout: IndexLayout, inference_id: str, grants: Grants) -> list[Check]:
    if not grants.view_metadata:
        return [*(_exists(cluster, layout.alias(k)) for k in ALL_TYPES), _exists(cluster, layout.state_alias)]
    out = []
    for kind in ALL_TYPES:
        alias = layout.alias(kind)
        try:
            found = cluster.call(
                f"read mapping of {alias}", lambda es, a=alias: es.indices.get_mapping(index=a)
            )
        except AtlasError as exc:
            out.append(Check(f"index {alias}", FAIL, str(exc), "run `atlas-mcp bootstrap`"))
            continue
        out.append(_mapping_check(alias, found, mapping(kind, inference_id)))
    alias = layout.state_alias
    try:
        found = cluster.call(f"read mapping of {alias}", lambda es: es.indices.get_mapping(index=alias))
    except AtlasError as exc:
        return [*out, Check(f"index {alias}", FAIL, str(exc), "run `atlas-mcp bootstrap`")]
    return [*out, _mapping_check(alias, found, state_mapping())]


def _exists(cluster: Cluster, alias: str) -> Check:
    """Without ``view_index_metadata``: the index answers a count (``read``), the mapping is unchecked."""
    try:
        cluster.call(f"count {alias}", lambda es: es.count(index=alias))
    except AtlasError as exc:
        return Check(f"index {alias}", FAIL, str(exc), "run `atlas-mcp bootstrap`")
    return Check(
        f"index {alias}",
        WARN,
        "exists; mapping not checked without `view_index_metadata`",
        "grant `view_index_metadata` to check the mapping",
    )


def _mapping_check(alias: str, found: dict[str, Any], expected: dict[str, Any]) -> Check:
    (concrete, body), *_ = found.items()
    problems = mapping_problems(expected, body["mappings"])
    return Check(
        f"index {alias}",
        FAIL if problems else OK,
        "; ".join(problems) if problems else f"{concrete}, mapping as expected",
        "run `atlas-mcp bootstrap --migrate` (see docs/elasticsearch.md)" if problems else "",
    )


def mapping_problems(expected: dict[str, Any], actual: dict[str, Any]) -> list[str]:
    """Fields that are missing or typed differently (extra settings the server adds are ignored)."""
    have = actual.get("properties", {})
    problems = []
    for field, spec in expected["properties"].items():
        got = have.get(field)
        if got is None:
            problems.append(f"{field} missing")
        elif any(got.get(k) != v for k, v in spec.items() if k in ("type", "inference_id", "value")):
            problems.append(
                f"{field} is {got.get('type')} ({got.get('inference_id', '')}), expected {spec['type']}"
            )
    return problems
