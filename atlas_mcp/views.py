"""How a memory looks outside the process: the JSON shape tools, CLI and export share.

Only the fields that apply to a memory's type are emitted, so a model reading a recall
result is not handed a wall of nulls.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .domain import codec
from .domain.guard import flags
from .domain.model import Memory, iso

if TYPE_CHECKING:
    from .service import Explanation

SCORE_DIGITS = 6  # the precision every score is shown with
RELEVANCE_DIGITS = 3  # a calibrated probability: more digits would claim precision it lacks


def memory_view(memory: Memory, score: float | None = None) -> dict[str, Any]:
    """The fields that apply to the memory's type, and ``flags`` when its content addresses the
    reading model (computed from the text on every read, so no stored memory escapes it)."""
    view = codec.view(memory)
    if found := flags(memory):
        view["flags"] = list(found)
    if score is None:
        return view
    head = {name: view.pop(name) for name in ("id", "memory_type", "text")}
    return head | {"score": round(score, SCORE_DIGITS)} | view


def recalled_view(
    memory: Memory, score: float, why: Explanation | None = None, relevance: float | None = None
) -> dict[str, Any]:
    """A recall result: the memory, its score and relevance and, when asked for, why."""
    view = memory_view(memory, score)
    if relevance is not None:
        view["relevance"] = round(relevance, RELEVANCE_DIGITS)
    return view | {"explain": explanation_view(why)} if why is not None else view


def explanation_view(why: Explanation) -> dict[str, Any]:
    """The breakdown of one recall score: score = match × decay × use × prior × track × time."""
    applied = why.multipliers
    return {
        "bm25_rank": why.bm25_rank,
        "dense_rank": why.dense_rank,
        "rrf_score": _rounded(why.rrf_score),
        "dense_similarity": _rounded(why.dense_similarity),
        "relevance": _rounded(why.relevance),
        "reranker": why.reranker,
        "multipliers": {
            "decay": _rounded(applied.decay),
            "decay_reference": iso(applied.decay_reference),
            "use_boost": _rounded(applied.use_boost),
            "catalog_prior": _rounded(applied.catalog_prior),
            "track_record": _rounded(applied.track_record),
            "time_fit": _rounded(applied.time_fit),
        },
        "score": _rounded(why.score),
    } | ({"embedding_pending": True} if why.embedding_pending else {})


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, SCORE_DIGITS)
