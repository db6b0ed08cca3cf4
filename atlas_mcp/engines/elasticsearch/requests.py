"""Request bodies, as plain data: recall, reads by id, listings, bulk operations.

With a rerank endpoint, recall is one search over the selected aliases::

    text_similarity_reranker            (rerank endpoint over ``content``, window 80)
      └─ rrf  rank_constant 30, window 300
           ├─ standard: function_score(multi_match BM25 on the content words)  × priors
           └─ standard: function_score(semantic)                               × priors

Without one, the two branches go out unscored by priors in one ``_msearch`` and are fused in
Python exactly as the embedded engine fuses its own (``domain.fusion``), so the service's
context rerank sees the same BM25 scores, cosines and ranks from either engine.

Each branch carries the owner filter (the caller's ``user_id``, or no ``user_id`` for the
catalog) and, unless asked, the live filter (no ``superseded_by``): the DLS key enforces
isolation, this filter is defence in depth. The priors are one Painless script whose
constants come from ``ScoringPolicy``; they choose which candidates reach the reranker. The
final order is decided after the reranker by ``domain.scoring`` (the service re-blends), so
the same multipliers decide both engines' final order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ...config_tables import ElasticsearchSettings
from ...domain.model import MemoryType, iso
from ...domain.scoring import ScoringPolicy
from ...domain.validity import ANY_TIME, TimeFilter
from ..base import RecallPlan
from .documents import micros
from .layout import ALL_TYPES, IndexLayout
from .mappings import CONTENT, CONTENT_FIELDS, SEMANTIC
from .priors import PRIORS_SCRIPT, priors_params

BM25_FIELDS = (*CONTENT_FIELDS, "title^2", "name^2")


@dataclass(frozen=True, slots=True)
class SearchRequest:
    """``POST /<indices>/_search`` with ``body``: what ``es-query`` prints."""

    indices: tuple[str, ...]
    body: dict[str, Any]

    @property
    def path(self) -> str:
        return f"/{','.join(self.indices)}/_search" if self.indices else "/_search"


@dataclass(frozen=True, slots=True)
class Inference:
    """The inference endpoints recall names; ``rerank_id`` None = atlas ranks the candidates."""

    embedding_id: str
    rerank_id: str | None
    rerank_window: int = 80

    @classmethod
    def from_config(cls, config: ElasticsearchSettings) -> Inference:
        return cls(config.embedding_inference_id, config.rerank_inference_id or None, config.rerank_window)


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


def visibility_filter(
    user_id: str | None, include_catalog: bool, include_superseded: bool, window: TimeFilter = ANY_TIME
) -> dict[str, Any]:
    clauses: dict[str, Any] = {"filter": [owner_filter(user_id, include_catalog)]}
    if not include_superseded:
        clauses["must_not"] = [{"exists": {"field": "superseded_by"}}]
    if window.active:
        clauses["filter"].append(time_filter(window))
    return {"bool": clauses}


def _range(field: str, **bounds: datetime) -> dict[str, Any]:
    return {"range": {field: {op: iso(at) for op, at in bounds.items()}}}


def _all(*clauses: dict[str, Any]) -> dict[str, Any]:
    return {"bool": {"filter": list(clauses)}}


def _any(*clauses: dict[str, Any]) -> dict[str, Any]:
    return {"bool": {"should": list(clauses), "minimum_should_match": 1}}


def _starts(**bounds: datetime) -> dict[str, Any]:
    """A non-event's span starts (``valid_from``, else its writing) within ``bounds``."""
    return _any(_range("valid_from", **bounds), _all(missing("valid_from"), _range("created_at", **bounds)))


def _ends_after(at: datetime) -> dict[str, Any]:
    """A non-event's span is still open at ``at`` (``valid_to``, else when it was superseded)."""
    return _any(
        _range("valid_to", gt=at),
        _all(missing("valid_to"), _any(missing("superseded_at"), _range("superseded_at", gt=at))),
    )


def time_filter(window: TimeFilter) -> dict[str, Any]:
    """``domain.validity``'s spans as a filter (the embedded engine's ``timing.py`` in SQL):
    an event is its instant, a fact its validity, a playbook its life until replaced; catalog
    entries (no owner) have no history and always pass."""
    event = {"exists": {"field": "occurred_at"}}
    clauses = []
    if window.as_of is not None:
        at = window.as_of
        clauses.append(
            _any(
                _all(event, _range("occurred_at", lte=at)),
                _all(missing("occurred_at"), _starts(lte=at), _ends_after(at)),
            )
        )
    if window.since is not None or window.until is not None:
        event_in = {k: v for k, v in (("gte", window.since), ("lte", window.until)) if v is not None}
        fact_in = [missing("occurred_at")]
        if window.until is not None:
            fact_in.append(_starts(lte=window.until))
        if window.since is not None:
            fact_in.append(_ends_after(window.since))
        clauses.append(_any(_all(event, _range("occurred_at", **event_in)), _all(*fact_in)))
    return _any(missing("user_id"), _all(*clauses))


# -- recall ----------------------------------------------------------------------------


def _branch(
    name: str, query: dict[str, Any], visible: dict[str, Any], params: dict[str, Any]
) -> dict[str, Any]:
    scored = {
        "function_score": {
            "query": query,
            "functions": [
                {"script_score": {"script": {"lang": "painless", "source": PRIORS_SCRIPT, "params": params}}}
            ],
            "score_mode": "multiply",
            "boost_mode": "multiply",
        }
    }
    return {"standard": {"query": scored, "filter": visible, "_name": name}}


def recall_request(
    plan: RecallPlan, layout: IndexLayout, policy: ScoringPolicy, inference: Inference, now: datetime
) -> SearchRequest:
    """The one search of a server-side reranked recall (``inference.rerank_id`` must be set)."""
    if not inference.rerank_id:
        raise ValueError("recall without a rerank endpoint is branch_requests()")
    include_catalog = MemoryType.CATALOG in plan.memory_types
    visible = visibility_filter(plan.user_id, include_catalog, plan.include_superseded, plan.time)
    params = priors_params(layout, policy, now)
    fused = {
        "rrf": {
            "retrievers": [
                _branch("bm25", lexical_query(plan), visible, params),
                _branch("dense", dense_query(plan), visible, params),
            ],
            "rank_constant": plan.rank_constant,
            "rank_window_size": plan.window,
        }
    }
    window = rerank_window(plan, inference)
    retriever = {
        "text_similarity_reranker": {
            "retriever": fused,
            "field": CONTENT,
            "inference_id": inference.rerank_id,
            "inference_text": plan.query,
            "rank_window_size": window,
        }
    }
    body = {"size": window, "_source": {"excludes": [SEMANTIC]}, "retriever": retriever}
    return SearchRequest(tuple(layout.aliases(plan.memory_types)), body)


def rerank_window(plan: RecallPlan, inference: Inference) -> int:
    """How many fused candidates the reranker scores: its own setting, never fewer than ``k``
    and never more than the fused pool (the cluster refuses a parent window above its child's)."""
    return min(plan.window, max(inference.rerank_window, plan.k))


def lexical_query(plan: RecallPlan) -> dict[str, Any]:
    """BM25 over the query's content words, as the embedded engine's BM25 branch matches them."""
    return {"multi_match": {"query": plan.lexical_text, "fields": list(BM25_FIELDS), "type": "best_fields"}}


def dense_query(plan: RecallPlan) -> dict[str, Any]:
    return {"semantic": {"field": SEMANTIC, "query": plan.query}}


def branch_requests(plan: RecallPlan, layout: IndexLayout) -> list[SearchRequest]:
    """The BM25 and dense branches of a recall without server-side rerank, raw scores kept (no
    priors: the service applies the multipliers after ranking, as for the embedded engine)."""
    include_catalog = MemoryType.CATALOG in plan.memory_types
    visible = visibility_filter(plan.user_id, include_catalog, plan.include_superseded, plan.time)
    indices = tuple(layout.aliases(plan.memory_types))
    branches = (lexical_query(plan), dense_query(plan)) if plan.dense else (lexical_query(plan),)
    return [
        SearchRequest(
            indices,
            {
                "size": plan.window,
                "query": {"bool": {"must": [query], "filter": [visible]}},
                "_source": {"excludes": [SEMANTIC]},
                "track_total_hits": False,
            },
        )
        for query in branches
    ]


# -- reads -----------------------------------------------------------------------------


def mget_body(layout: IndexLayout, ids: Sequence[str], kinds: Sequence[MemoryType]) -> dict[str, Any]:
    """``POST /_mget``: each id in each type's alias. Real-time (no refresh needed), so a
    version read here is the current one; DLS hides what the caller may not see."""
    docs = [
        {"_index": layout.alias(kind), "_id": doc_id, "_source": {"excludes": [SEMANTIC]}}
        for kind in ALL_TYPES
        if kind in kinds
        for doc_id in dict.fromkeys(ids)
    ]
    return {"docs": docs}


LIST_PAGE = 1000  # hits per page of a listing (far below index.max_result_window)
PIT_KEEP_ALIVE = "1m"  # between two pages of one listing


def list_page_request(
    pit_id: str,
    user_id: str | None,
    include_superseded: bool,
    size: int,
    since: datetime | None = None,
    oldest_first: bool = False,
    after: Sequence[Any] | None = None,
    about: str | None = None,
    expired_by: datetime | None = None,
) -> SearchRequest:
    """One page of a listing over a point in time, newest first by when it happened
    (``oldest_first``: by creation, for consolidation). ``_shard_doc`` makes the order total,
    so ``search_after`` never skips or repeats a memory, at any depth."""
    query = visibility_filter(user_id, user_id is None, include_superseded)
    if since is not None:
        query["bool"]["filter"].append({"range": {"created_us": {"gt": micros(since)}}})
    if about is not None:
        query["bool"]["filter"].append(term("about", about))
    if expired_by is not None:
        query["bool"]["filter"].append(_range("expires_at", lte=expired_by))
    if oldest_first:
        sort = [{"created_us": {"order": "asc"}}, {"_shard_doc": {"order": "asc"}}]
    else:
        sort = [
            {"timeline_us": {"order": "desc"}},
            {"created_us": {"order": "desc"}},
            {"_shard_doc": {"order": "desc"}},
        ]
    body: dict[str, Any] = {
        "size": size,
        "query": query,
        "sort": sort,
        "_source": {"excludes": [SEMANTIC]},
        "pit": {"id": pit_id, "keep_alive": PIT_KEEP_ALIVE},
        "track_total_hits": False,
    }
    if after is not None:
        body["search_after"] = list(after)
    return SearchRequest((), body)


STATS_MAX_USERS = 10_000


def stats_request(layout: IndexLayout) -> SearchRequest:
    """Counts per memory type and owner (and how many are superseded), in one aggregation."""
    superseded = {
        "superseded": {"filter": {"exists": {"field": "superseded_by"}}},
        "expiring": {"filter": {"exists": {"field": "expires_at"}}},
    }
    body = {
        "size": 0,
        "track_total_hits": True,
        "aggregations": {
            "types": {
                "terms": {"field": "memory_type", "size": len(ALL_TYPES)},
                "aggregations": {
                    "users": {
                        "terms": {"field": "user_id", "size": STATS_MAX_USERS},
                        "aggregations": superseded,
                    }
                },
            }
        },
    }
    return SearchRequest(tuple(layout.aliases(ALL_TYPES)), body)


# -- bulk ------------------------------------------------------------------------------


# Every write names an alias and says so: without ``require_alias`` a write before ``bootstrap``
# would auto-create a concrete index with a dynamic mapping (no semantic_text, not strict),
# and bootstrap could then no longer create the alias of that name.


def bulk_create(index: str, doc_id: str, source: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"create": {"_index": index, "_id": doc_id, "require_alias": True}}, source]


def bulk_index(
    index: str, doc_id: str, source: dict[str, Any], version: tuple[int, int] | None = None
) -> list[dict[str, Any]]:
    """A whole-document write (``version``: only if the document is still at that version)."""
    action: dict[str, Any] = {"_index": index, "_id": doc_id, "require_alias": True}
    if version is not None:
        action |= {"if_seq_no": version[0], "if_primary_term": version[1]}
    return [{"index": action}, source]


def bulk_update(
    index: str, doc_id: str, doc: dict[str, Any], version: tuple[int, int] | None
) -> list[dict[str, Any]]:
    """A partial-document update (never a script: scripted bulk updates fail on semantic_text
    indices), conditional on ``version`` = (seq_no, primary_term) when given."""
    action: dict[str, Any] = {"_index": index, "_id": doc_id, "require_alias": True}
    if version is not None:
        action |= {"if_seq_no": version[0], "if_primary_term": version[1]}
    return [{"update": action}, {"doc": doc}]


def as_merged(source: dict[str, Any], doc: dict[str, Any]) -> dict[str, Any]:
    """``source`` after a partial update with ``doc``, as the cluster applies it: objects merge
    key by key (a key ``doc`` leaves out stays), other values replace, null removes."""
    out = dict(source)
    for key, value in doc.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = as_merged(out[key], value)
        elif value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def bulk_delete(index: str, doc_id: str) -> list[dict[str, Any]]:
    return [{"delete": {"_index": index, "_id": doc_id}}]
