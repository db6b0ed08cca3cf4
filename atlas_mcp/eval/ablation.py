"""Ablations: the same service with one technique switched off, to measure what it adds.

Each is a change of policy (or of the rerank stage) on a service over the *same* store, so
one ingestion serves every variant. The candidate pool still comes from both branches: an
ablated signal stops scoring, it does not stop fetching.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..inference.reranker import FusedScoreReranker
from ..service import MemoryService

ABLATIONS: dict[str, str] = {
    "bm25": "no BM25 score in the fusion (bm25_weight 0)",
    "dense": "no cosine in the fusion (dense_weight 0)",
    "rerank": "relevance = the engine's reciprocal rank fusion alone (no score fusion, no context)",
    "decay": "no time decay",
    "context": "no neighbour or episode context (context_weight and episode_weight 0)",
    "length": "no length prior (length_weight 0)",
    "speaker": "no speaker bonus (speaker_weight 0)",
    "attribute": "no bonus for a fact setting the attribute asked about (attribute_weight 0, domain.asked)",
    "meaning": "the attribute asked about read from the query's words only, not its embedding (read_meaning off)",
    "reply": "a reply gains nothing from the question turn before it (reply_weight 0)",
    "content-words": "BM25 matches every query word, function words too (lexical_content_words off)",
    "pool": "80 candidates per branch (the foundation's window) instead of 300",
    "caps": "no bounds on the length and episode priors (as before issue 12)",
    "standalone": "facts, playbooks and catalog entries get no context bonus (events only, as before)",
    "time": "no time expressions: 'last weekend', 'most recent' are plain words",
    "track-record": "playbooks' success/failure counts do not move ranking",
    "use": "no use boost",
    "perspective": "the query is read only as asked, never reworded from a memory's side (domain.perspective)",
}
_POLICY: dict[str, dict[str, object]] = {
    "bm25": {"bm25_weight": 0.0},
    "dense": {"dense_weight": 0.0},
    "decay": {"decay_offset_days": 1e9},
    "context": {"context_weight": 0.0, "episode_weight": 0.0},
    "length": {"length_weight": 0.0},
    "speaker": {"speaker_weight": 0.0},
    "attribute": {"attribute_weight": 0.0},
    "meaning": {"read_meaning": False},
    "reply": {"reply_weight": 0.0},
    "content-words": {"lexical_content_words": False},
    "pool": {"rrf_window": 80},
    "caps": {"length_z_cap": 1e9, "length_z_floor": 1e9, "episode_z_cap": 1e9},
    "standalone": {"standalone_context": False},
    "time": {"time_expressions": False},
    "track-record": {"track_record_weight": 0.0},
    "use": {"use_count_weight": 0.0},
    "perspective": {"perspective_weight": 0.0},
}


def ablated(service: MemoryService, names: Iterable[str]) -> MemoryService:
    """A service on the same engine and clock with every technique in ``names`` switched off."""
    names = list(names)
    unknown = [n for n in names if n not in ABLATIONS]
    if unknown:
        raise ValueError(f"unknown ablation {unknown[0]!r}; known: {', '.join(ABLATIONS)}")
    changes: dict[str, object] = {}
    for name in names:
        changes |= _POLICY.get(name, {})
    policy = service.policy.replaced(**changes)
    reranker = None
    if "rerank" in names:
        reranker = FusedScoreReranker(policy.replaced(fused_dense_weight=0.0))
    return service.with_policy(policy, reranker)
