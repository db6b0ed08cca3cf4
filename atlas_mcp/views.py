"""How a memory looks outside the process: the JSON shape tools, CLI and export share.

Only the fields that apply to a memory's type are emitted, so a model reading a recall
result is not handed a wall of nulls.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .domain.model import Memory, MemoryType, iso

if TYPE_CHECKING:
    from .service import Explanation

SCORE_DIGITS = 6  # the precision every score is shown with


def memory_view(memory: Memory, score: float | None = None) -> dict[str, Any]:
    view: dict[str, Any] = {"id": memory.id, "memory_type": memory.memory_type.value, "text": memory.text}
    if score is not None:
        view["score"] = round(score, SCORE_DIGITS)
    view |= _type_fields(memory)
    if memory.metadata:
        view["metadata"] = memory.metadata
    return view


def _type_fields(memory: Memory) -> dict[str, Any]:
    kind = memory.memory_type
    if kind is MemoryType.EPISODIC:
        return {"occurred_at": iso(memory.occurred_at), "created_at": iso(memory.created_at)}
    out: dict[str, Any] = {"created_at": iso(memory.created_at)}
    if kind is MemoryType.CATALOG:
        return out | _present(title=memory.title, category=memory.category, tags=list(memory.tags))
    out |= {"use_count": memory.use_count, "last_used_at": iso(memory.last_used_at)}
    out |= _present(
        confidence=memory.confidence,
        supersedes=list(memory.supersedes),
        superseded_by=memory.superseded_by,
        superseded_at=iso(memory.superseded_at),
        source_episodes=list(memory.source_episodes),
    )
    if kind is MemoryType.SEMANTIC:
        return out | _present(fact_type=memory.fact_type)
    return out | {
        "name": memory.name,
        "trigger_text": memory.trigger_text,
        "steps": [s.to_dict() for s in memory.steps],
        "success_count": memory.success_count,
        "failure_count": memory.failure_count,
    } | _present(last_success_at=iso(memory.last_success_at))


def _present(**fields: Any) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v not in (None, [], ())}


def recalled_view(memory: Memory, score: float, why: Explanation | None = None) -> dict[str, Any]:
    """A recall result: the memory, its score and, when asked for, why it scored that."""
    view = memory_view(memory, score)
    return view | {"explain": explanation_view(why)} if why is not None else view


def explanation_view(why: Explanation) -> dict[str, Any]:
    """The breakdown of one recall score: final = relevance × decay × use × prior × track."""
    factors = why.factors
    return {
        "bm25_rank": why.bm25_rank,
        "dense_rank": why.dense_rank,
        "rrf_score": _rounded(why.rrf_score),
        "dense_similarity": _rounded(why.dense_similarity),
        "relevance": _rounded(why.relevance),
        "reranker": why.reranker,
        "multipliers": {
            "decay": _rounded(factors.decay),
            "decay_reference": iso(factors.decay_reference),
            "use_boost": _rounded(factors.use_boost),
            "catalog_prior": _rounded(factors.catalog_prior),
            "track_record": _rounded(factors.track_record),
        },
        "score": _rounded(why.score),
    } | ({"embedding_pending": True} if why.embedding_pending else {})


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, SCORE_DIGITS)
