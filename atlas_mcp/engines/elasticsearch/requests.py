"""Request bodies, as plain data: recall, reads by id, listings, bulk operations.

Recall is one search over the selected aliases::

    text_similarity_reranker            (rerank endpoint over ``content``)
      └─ rrf  rank_constant 30, window 80
           ├─ standard: function_score(multi_match BM25)  × priors
           └─ standard: function_score(semantic)          × priors

Each branch carries the owner filter (the caller's ``user_id``, or no ``user_id`` for the
catalog) and, unless asked, the live filter (no ``superseded_by``): the DLS key enforces
isolation, this filter is defence in depth. The priors are one Painless script whose
constants come from ``ScoringPolicy``; they choose which candidates survive RRF. The final
order is decided after the reranker by ``domain.scoring`` (the service re-blends), so the
same multipliers decide both engines' final order.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ...config import ElasticsearchSettings
from ...domain.model import MemoryType, iso
from ...domain.scoring import SECONDS_PER_DAY, ScoringPolicy
from ..base import RecallPlan
from .layout import ALL_TYPES, IndexLayout
from .mappings import CONTENT, CONTENT_FIELDS, SEMANTIC

MS_PER_DAY = SECONDS_PER_DAY * 1000.0
BM25_FIELDS = (*CONTENT_FIELDS, "title^2", "name^2")
USER_TYPES = tuple(k for k in ALL_TYPES if k is not MemoryType.CATALOG)

# Mirrors ``domain.scoring.multipliers``: decay (events on occurred_at, facts on last_used_at
# else created_at), use boost (facts, playbooks), track record (playbooks), catalog prior.
# Every doc[...] is guarded: a multi-index search sees fields unmapped in some indices.
PRIORS_SCRIPT = """
String index = doc['_index'].value;
boolean episodic = index.startsWith(params.episodic);
boolean semantic = index.startsWith(params.semantic);
boolean procedural = index.startsWith(params.procedural);
long ref = -1L;
if (episodic && doc.containsKey('occurred_at') && doc['occurred_at'].size() > 0) {
  ref = doc['occurred_at'].value.toInstant().toEpochMilli();
} else if (semantic && doc.containsKey('last_used_at') && doc['last_used_at'].size() > 0) {
  ref = doc['last_used_at'].value.toInstant().toEpochMilli();
} else if ((episodic || semantic) && doc.containsKey('created_at') && doc['created_at'].size() > 0) {
  ref = doc['created_at'].value.toInstant().toEpochMilli();
}
double factor = 1.0;
if (ref >= 0L) {
  double effective = (double) (params.now_ms - ref) - params.decay_offset_ms;
  if (effective > 0.0) {
    double sigmaSq = params.decay_scale_ms * params.decay_scale_ms / (2.0 * Math.log(1.0 / params.decay_value));
    factor *= Math.exp(-(effective * effective) / (2.0 * sigmaSq));
  }
}
if (semantic || procedural) {
  long uses = 0L;
  if (doc.containsKey('use_count') && doc['use_count'].size() > 0) { uses = doc['use_count'].value; }
  factor *= 1.0 + params.use_count_weight * Math.log10(1.0 + Math.max(uses, 0L));
}
if (procedural) {
  long wins = 0L;
  long losses = 0L;
  if (doc.containsKey('success_count') && doc['success_count'].size() > 0) { wins = doc['success_count'].value; }
  if (doc.containsKey('failure_count') && doc['failure_count'].size() > 0) { losses = doc['failure_count'].value; }
  double rate = (wins + params.track_record_prior / 2.0) / (wins + losses + params.track_record_prior);
  factor *= 1.0 + params.track_record_weight * (2.0 * rate - 1.0);
}
if (index.startsWith(params.catalog)) { factor *= params.catalog_prior; }
return factor;
""".strip()


@dataclass(frozen=True, slots=True)
class SearchRequest:
    """``POST /<indices>/_search`` with ``body``: what ``es-query`` prints."""

    indices: tuple[str, ...]
    body: dict[str, Any]

    @property
    def path(self) -> str:
        return f"/{','.join(self.indices)}/_search"


@dataclass(frozen=True, slots=True)
class Inference:
    """The inference endpoints recall names; ``rerank_id`` None = RRF order, reranked locally."""

    embedding_id: str
    rerank_id: str | None

    @classmethod
    def from_config(cls, config: ElasticsearchSettings) -> Inference:
        return cls(config.embedding_inference_id, config.rerank_inference_id or None)


# -- filters ---------------------------------------------------------------------------


def term(field: str, value: Any) -> dict[str, Any]:
    return {"term": {field: {"value": value}}}


def missing(field: str) -> dict[str, Any]:
    return {"bool": {"must_not": [{"exists": {"field": field}}]}}


def owner_filter(user_id: str | None, include_catalog: bool) -> dict[str, Any]:
    """The caller's documents (and shared ones, which have no ``user_id``); ``None``: shared only."""
    if user_id is None:
        return missing("user_id")
    if not include_catalog:
        return term("user_id", user_id)
    return {"bool": {"should": [term("user_id", user_id), missing("user_id")], "minimum_should_match": 1}}


def visibility_filter(user_id: str | None, include_catalog: bool, include_superseded: bool) -> dict[str, Any]:
    clauses: dict[str, Any] = {"filter": [owner_filter(user_id, include_catalog)]}
    if not include_superseded:
        clauses["must_not"] = [{"exists": {"field": "superseded_by"}}]
    return {"bool": clauses}


# -- recall ----------------------------------------------------------------------------


def priors_params(layout: IndexLayout, policy: ScoringPolicy, now: datetime) -> dict[str, Any]:
    """The script's inputs: every constant from the one ``ScoringPolicy``."""
    return {
        "now_ms": int(now.timestamp() * 1000),
        "decay_offset_ms": policy.decay_offset_days * MS_PER_DAY,
        "decay_scale_ms": policy.decay_scale_days * MS_PER_DAY,
        "decay_value": policy.decay_value,
        "use_count_weight": policy.use_count_weight,
        "catalog_prior": policy.catalog_prior,
        "track_record_prior": policy.track_record_prior,
        "track_record_weight": policy.track_record_weight,
        **{kind.value: layout.stem(kind) for kind in ALL_TYPES},
    }


def _branch(name: str, query: dict[str, Any], visible: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    scored = {
        "function_score": {
            "query": query,
            "functions": [{"script_score": {"script": {"lang": "painless", "source": PRIORS_SCRIPT, "params": params}}}],
            "score_mode": "multiply",
            "boost_mode": "multiply",
        }
    }
    return {"standard": {"query": scored, "filter": visible, "_name": name}}


def recall_request(
    plan: RecallPlan, layout: IndexLayout, policy: ScoringPolicy, inference: Inference, now: datetime
) -> SearchRequest:
    include_catalog = MemoryType.CATALOG in plan.memory_types
    visible = visibility_filter(plan.user_id, include_catalog, plan.include_superseded)
    params = priors_params(layout, policy, now)
    lexical = {"multi_match": {"query": plan.query, "fields": list(BM25_FIELDS), "type": "best_fields"}}
    dense = {"semantic": {"field": SEMANTIC, "query": plan.query}}
    retriever: dict[str, Any] = {
        "rrf": {
            "retrievers": [_branch("bm25", lexical, visible, params), _branch("dense", dense, visible, params)],
            "rank_constant": plan.rank_constant,
            "rank_window_size": plan.window,
        }
    }
    if inference.rerank_id:
        retriever = {
            "text_similarity_reranker": {
                "retriever": retriever,
                "field": CONTENT,
                "inference_id": inference.rerank_id,
                "inference_text": plan.query,
                "rank_window_size": plan.window,
            }
        }
    body = {"size": plan.window, "_source": {"excludes": [SEMANTIC]}, "retriever": retriever}
    return SearchRequest(tuple(layout.aliases(plan.memory_types)), body)


# -- reads -----------------------------------------------------------------------------


def by_ids_request(
    layout: IndexLayout, user_id: str | None, ids: Sequence[str], kinds: Sequence[MemoryType], *, versions: bool = False
) -> SearchRequest:
    """Documents among ``ids`` visible to ``user_id`` (``versions``: with seq_no for CAS updates)."""
    include_catalog = MemoryType.CATALOG in kinds
    query = {"bool": {"filter": [{"ids": {"values": list(ids)}}, owner_filter(user_id, include_catalog)]}}
    body: dict[str, Any] = {"size": len(ids), "query": query, "_source": {"excludes": [SEMANTIC]}}
    if versions:
        body["seq_no_primary_term"] = True
    return SearchRequest(tuple(layout.aliases(tuple(kinds))), body)


def list_request(
    layout: IndexLayout,
    user_id: str | None,
    kinds: Sequence[MemoryType],
    include_superseded: bool,
    limit: int,
    offset: int,
    since: datetime | None = None,
    oldest_first: bool = False,
) -> SearchRequest:
    """Newest first by when it happened; ``oldest_first``: by creation, for consolidation."""
    query = visibility_filter(user_id, user_id is None, include_superseded)
    if since is not None:
        query["bool"]["filter"].append({"range": {"created_at": {"gt": iso(since)}}})
    if oldest_first:
        sort = [{"created_at": {"order": "asc"}}]
    else:
        sort = [{"timeline_at": {"order": "desc"}}, {"created_at": {"order": "desc"}}]
    body = {"from": offset, "size": limit, "query": query, "sort": sort, "_source": {"excludes": [SEMANTIC]}}
    return SearchRequest(tuple(layout.aliases(tuple(kinds))), body)


STATS_MAX_USERS = 10_000


def stats_request(layout: IndexLayout) -> SearchRequest:
    """Counts per memory type and owner (and how many are superseded), in one aggregation."""
    superseded = {"superseded": {"filter": {"exists": {"field": "superseded_by"}}}}
    body = {
        "size": 0,
        "track_total_hits": True,
        "aggregations": {
            "types": {
                "terms": {"field": "memory_type", "size": len(ALL_TYPES)},
                "aggregations": {"users": {"terms": {"field": "user_id", "size": STATS_MAX_USERS}, "aggregations": superseded}},
            }
        },
    }
    return SearchRequest(tuple(layout.aliases(ALL_TYPES)), body)


# -- bulk ------------------------------------------------------------------------------


def bulk_create(index: str, doc_id: str, source: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"create": {"_index": index, "_id": doc_id}}, source]


def bulk_index(index: str, doc_id: str, source: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"index": {"_index": index, "_id": doc_id}}, source]


def bulk_update(index: str, doc_id: str, doc: dict[str, Any], version: tuple[int, int] | None) -> list[dict[str, Any]]:
    """A partial-document update (never a script: scripted bulk updates fail on semantic_text
    indices), conditional on ``version`` = (seq_no, primary_term) when given."""
    action: dict[str, Any] = {"_index": index, "_id": doc_id}
    if version is not None:
        action |= {"if_seq_no": version[0], "if_primary_term": version[1]}
    return [{"update": action}, {"doc": doc}]


def bulk_delete(index: str, doc_id: str) -> list[dict[str, Any]]:
    return [{"delete": {"_index": index, "_id": doc_id}}]


def rerank_relevance(score: float, scale: str) -> float:
    """Undo the reranker's ``max(s, 0) + min(exp(s), 1)`` shift and land in [0, 1].

    ``probability`` endpoints return s in [0, 1] (so the shifted score is 1 + s);
    ``logit`` endpoints return raw logits, squashed by a sigmoid like the local cross-encoder.
    """
    raw = score - 1.0 if score >= 1.0 else math.log(max(score, 1e-300))
    if scale == "logit":
        return 1.0 / (1.0 + math.exp(-raw))
    return min(max(raw, 0.0), 1.0)
