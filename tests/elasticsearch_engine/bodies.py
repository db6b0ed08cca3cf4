"""Every request body the engine and the admin commands build, from fixed inputs.

Shared by the golden-file tests, the structural invariants and the specification oracle,
so all three look at exactly the same bodies.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from atlas_mcp.domain.model import MemoryType
from atlas_mcp.domain.query import lexical_query
from atlas_mcp.domain.scoring import ScoringPolicy
from atlas_mcp.engines.base import RecallPlan
from atlas_mcp.engines.elasticsearch import keys, mappings
from atlas_mcp.engines.elasticsearch import requests as rq
from atlas_mcp.engines.elasticsearch.layout import IndexLayout

NOW = datetime(2026, 6, 1, tzinfo=UTC)
LAYOUT = IndexLayout()
INFERENCE = rq.Inference(".jina-embeddings-v5-text-small", ".jina-reranker-v2-base-multilingual")
QUERY = "what firmware is my hub on?"


def plan(
    types=tuple(MemoryType), include_superseded: bool = False, window: int = 200, k: int = 10
) -> RecallPlan:
    return RecallPlan(
        "sarah", QUERY, frozenset(types), include_superseded, window, 30, lexical_query(QUERY), k
    )


def recall(
    inference: rq.Inference = INFERENCE, policy: ScoringPolicy | None = None, **kwargs: Any
) -> rq.SearchRequest:
    return rq.recall_request(plan(**kwargs), LAYOUT, policy or ScoringPolicy(), inference, NOW)


RECALL_VARIANTS: dict[str, rq.SearchRequest] = {
    "default": recall(),
    "own-only": recall(types=(MemoryType.SEMANTIC,)),
    "with-superseded": recall(include_superseded=True),
    "k-100": recall(window=200, k=100),
}
BRANCHES = dict(zip(("bm25", "dense"), rq.branch_requests(plan(), LAYOUT), strict=True))
PIT = "46ToAwMDaWR5BXV1aWQy"

SEARCH_BODIES: dict[str, dict[str, Any]] = {
    **{f"recall/{name}": r.body for name, r in RECALL_VARIANTS.items()},
    **{f"branch/{name}": r.body for name, r in BRANCHES.items()},
    "list": rq.list_page_request(PIT, "sarah", False, 20).body,
    "list-next": rq.list_page_request(
        PIT, "sarah", False, 20, after=[1767225600000000000, 1767225600000000000, 41]
    ).body,
    "list-since": rq.list_page_request(PIT, "sarah", True, 50, NOW, True).body,
    "list-catalog": rq.list_page_request(PIT, None, True, 100).body,
    "stats": rq.stats_request(LAYOUT).body,
}
MGET_BODY = rq.mget_body(LAYOUT, ["m1", "m2"], list(MemoryType))

INDEX_BODIES: dict[str, dict[str, Any]] = mappings.all_index_bodies(LAYOUT, INFERENCE.embedding_id)

BULK_LINES: list[dict[str, Any]] = [
    *rq.bulk_create("atlas-semantic", "m9", {"memory_type": "semantic", "text": "x"}),
    *rq.bulk_update(
        "atlas-semantic-v1", "m1", {"superseded_by": "m9", "superseded_at": NOW.isoformat()}, (42, 1)
    ),
    *rq.bulk_update("atlas-semantic-v1", "m2", {"use_count": 3}, None),
    *rq.bulk_index("atlas-catalog", "c1", {"memory_type": "catalog", "text": "y"}),
    *rq.bulk_index("atlas-semantic", "m1", {"memory_type": "semantic", "text": "z"}, (43, 3)),
    *rq.bulk_delete("atlas-episodic-v1", "m3"),
]

KEY_BODY = keys.create_key_body(LAYOUT, "sarah", "90d")
INVALIDATE_BODY = keys.invalidate_body(["key-1", "key-2"])
LIVE_KEYS_BODY = keys.live_keys_body(LAYOUT, "sarah")
