"""Every request body the engine and the admin commands build, from fixed inputs.

Shared by the golden-file tests, the structural invariants and the specification oracle,
so all three look at exactly the same bodies.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from atlas_mcp.domain.model import MemoryType
from atlas_mcp.domain.scoring import ScoringPolicy
from atlas_mcp.engines.base import RecallPlan
from atlas_mcp.engines.elasticsearch import keys, mappings
from atlas_mcp.engines.elasticsearch import requests as rq
from atlas_mcp.engines.elasticsearch.layout import IndexLayout

NOW = datetime(2026, 6, 1, tzinfo=UTC)
LAYOUT = IndexLayout()
INFERENCE = rq.Inference(".jina-embeddings-v5-text-small", ".jina-reranker-v2-base-multilingual")
QUERY = "what firmware is my hub on?"


def plan(types=tuple(MemoryType), include_superseded: bool = False, window: int = 80) -> RecallPlan:
    return RecallPlan("sarah", QUERY, frozenset(types), include_superseded, window, 30)


def recall(inference: rq.Inference = INFERENCE, policy: ScoringPolicy | None = None, **kwargs: Any) -> rq.SearchRequest:
    return rq.recall_request(plan(**kwargs), LAYOUT, policy or ScoringPolicy(), inference, NOW)


RECALL_VARIANTS: dict[str, rq.SearchRequest] = {
    "default": recall(),
    "no-rerank": recall(rq.Inference(INFERENCE.embedding_id, None)),
    "own-only": recall(types=(MemoryType.SEMANTIC,)),
    "with-superseded": recall(include_superseded=True),
    "k-100": recall(window=100),
}

SEARCH_BODIES: dict[str, dict[str, Any]] = {
    **{f"recall/{name}": r.body for name, r in RECALL_VARIANTS.items()},
    "by-ids": rq.by_ids_request(LAYOUT, "sarah", ["m1", "m2"], list(MemoryType), versions=True).body,
    "list": rq.list_request(LAYOUT, "sarah", list(rq.USER_TYPES), False, 20, 40).body,
    "list-since": rq.list_request(LAYOUT, "sarah", [MemoryType.EPISODIC], True, 50, 0, NOW, True).body,
    "list-catalog": rq.list_request(LAYOUT, None, [MemoryType.CATALOG], True, 100, 0).body,
    "stats": rq.stats_request(LAYOUT).body,
}

INDEX_BODIES: dict[str, dict[str, Any]] = mappings.all_index_bodies(LAYOUT, INFERENCE.embedding_id)

BULK_LINES: list[dict[str, Any]] = [
    *rq.bulk_create("atlas-semantic", "m9", {"memory_type": "semantic", "text": "x"}),
    *rq.bulk_update("atlas-semantic-v1", "m1", {"superseded_by": "m9", "superseded_at": NOW.isoformat()}, (42, 1)),
    *rq.bulk_update("atlas-semantic-v1", "m2", {"use_count": 3}, None),
    *rq.bulk_index("atlas-catalog", "c1", {"memory_type": "catalog", "text": "y"}),
    *rq.bulk_delete("atlas-episodic-v1", "m3"),
]

KEY_BODY = keys.create_key_body(LAYOUT, "sarah", "90d")
INVALIDATE_BODY = keys.invalidate_body(["key-1", "key-2"])
LIVE_KEYS_BODY = keys.live_keys_body(LAYOUT, "sarah")
