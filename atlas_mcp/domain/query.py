"""Query analysis: what of a recall query each retrieval branch should see.

The dense branch reads the whole question. The BM25 branch gets its content words: function
words ("what", "did", "the"; "qué", "la"; "der", "ist") match nearly every memory, so in an
OR-query they only add noise to the ranking (+0.01-0.02 R@10 and +0.02 multi-hop R@10 on
LoCoMo when dropped). Which words are function words depends on the query's language
(``domain.lexical``); words written in capitals ("IT") are kept.
"""

from __future__ import annotations

from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .lexical import content_words


@lru_cache(maxsize=1 << 10)  # a recall reads it twice: its plan, and calibration's topic words
def lexical_query(query: str) -> str:
    """The query's content words, in order, for the BM25 branch; the query itself if none are."""
    words = content_words(query)
    return " ".join(words) if words else query


class RetrievalPolicy(BaseModel):
    """``[scoring.retrieval]``: how a query is read and its candidate pool fetched."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rrf_rank_constant: int = Field(30, ge=1, description="k of reciprocal rank fusion: 1 / (k + rank)")
    rrf_window: int = Field(300, ge=1, description="candidates per branch and fused pool size")
    lexical_content_words: bool = Field(
        True, description="BM25 matches the query's content words only (domain.query)"
    )
    # The plain fused rerank (a cross-encoder's tail, the 'rerank' ablation) weighs cosine
    # against the fused rank with it.
    fused_dense_weight: float = Field(
        0.5, ge=0, le=1, description="weight of dense cosine vs. fused rank in the fused-score rerank"
    )
    perspective_weight: float = Field(
        1.0,
        ge=0,
        description="weight of the query reworded from the memory's side (domain.perspective) in its cosine",
    )
    time_expressions: bool = Field(
        True, description="read 'last weekend', 'most recent' as time (domain.when)"
    )
    time_zone: str = Field(
        "UTC", description="the zone calendar words ('yesterday', 'last week') are read in"
    )

    @field_validator("time_zone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {value!r}; use an IANA name such as Europe/Paris") from None
        return value

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.time_zone)
