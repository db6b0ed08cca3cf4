"""Scoring policy: every recall constant, and the one formula for a memory's final score.

Both engines fetch candidates differently, but the final order is always decided here:

    final = relevance × decay × use_boost × catalog_prior × track_record

``relevance`` comes from the rerank stage (a fused retrieval score by default, or a
cross-encoder). The multipliers are applied *after* reranking on purpose: in the design this
project grew from, they only shaped candidate selection and the reranker then overwrote them,
so recency and use never decided the final order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from .model import Memory, MemoryType

SECONDS_PER_DAY = 86_400.0


class ScoringPolicy(BaseModel):
    """All tunable recall constants. Overridable through the ``[scoring]`` settings table."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rrf_rank_constant: int = Field(30, ge=1)
    rrf_window: int = Field(200, ge=1, description="candidates per branch and fused pool size")
    lexical_content_words: bool = Field(
        True, description="BM25 matches the query's content words only (domain.query)"
    )
    decay_offset_days: float = Field(180.0, ge=0)
    decay_scale_days: float = Field(1825.0, gt=0)
    decay_value: float = Field(0.5, gt=0, lt=1, description="multiplier at offset + scale")
    use_count_weight: float = Field(0.2, ge=0)
    catalog_prior: float = Field(0.85, gt=0)
    harsh_confidence_penalty: float = Field(0.1, ge=0, le=1)
    # Playbook track record: a Beta(prior, prior)-smoothed success rate mapped to
    # [1 - track_record_weight, 1 + track_record_weight]; an untried playbook scores 1.0.
    track_record_prior: float = Field(2.0, gt=0)
    track_record_weight: float = Field(0.25, ge=0, lt=1)
    # Weight of dense cosine vs. fused rank in the plain fused rerank (the cross-encoder's tail).
    fused_dense_weight: float = Field(0.5, ge=0, le=1)
    # The default rerank, ``domain.relevance``: weighted z-scores over the candidate pool,
    # tuned on the LoCoMo development split (docs/quality.md measures each one's share).
    dense_weight: float = Field(1.0, ge=0, description="z(cosine)")
    bm25_weight: float = Field(0.75, ge=0, description="z(BM25); 0 leaves lexical matching out")
    length_weight: float = Field(
        0.5, ge=0, description="z(log words) of events: a one-word 'ok!' rarely answers a question"
    )
    context_weight: float = Field(
        0.25, ge=0, description="share of the best neighbouring event's score an event inherits"
    )
    episode_weight: float = Field(
        0.4, ge=0, description="z(best score in the event's episode): answers cluster in a conversation"
    )
    speaker_weight: float = Field(1.0, ge=0, description="bonus when the query names an event's speaker")
    episode_gap_minutes: float = Field(
        30.0, ge=0, description="events this close in occurred_at belong to one episode"
    )
    # z-scores divide by at least these spreads, so a pool of two near-identical memories does
    # not turn a 0.001 cosine gap into two standard deviations (all sit below LoCoMo's 1st
    # percentile of pool spreads, so they only act on small, flat pools).
    dense_min_spread: float = Field(0.05, gt=0, description="in cosine")
    bm25_min_spread: float = Field(1.0, gt=0, description="in BM25 score")
    length_min_spread: float = Field(0.3, gt=0, description="in log words")
    fused_min_spread: float = Field(0.5, gt=0, description="in fused score, for episode strength")
    relevance_temperature: float = Field(
        4.0, gt=0, description="relevance = exp((s - s_best) / T): how far multipliers can reorder"
    )


@dataclass(frozen=True, slots=True)
class Multipliers:
    """Each factor of the final score, kept apart so recall can explain itself."""

    decay: float = 1.0
    decay_reference: datetime | None = None
    use_boost: float = 1.0
    catalog_prior: float = 1.0
    track_record: float = 1.0

    @property
    def product(self) -> float:
        return self.decay * self.use_boost * self.catalog_prior * self.track_record


def gaussian_decay(age_days: float, policy: ScoringPolicy) -> float:
    """Elasticsearch-style ``gauss`` decay: 1.0 until ``offset``, ``decay_value`` at offset+scale."""
    effective = age_days - policy.decay_offset_days
    if effective <= 0:
        return 1.0
    sigma_sq = policy.decay_scale_days**2 / (2.0 * math.log(1.0 / policy.decay_value))
    return math.exp(-(effective**2) / (2.0 * sigma_sq))


def use_boost(use_count: int, policy: ScoringPolicy) -> float:
    return 1.0 + policy.use_count_weight * math.log10(1 + max(use_count, 0))


def track_record(successes: int, failures: int, policy: ScoringPolicy) -> float:
    """Smoothed success rate, so one lucky run is not a proof: 0 runs → 1.0."""
    a = policy.track_record_prior
    rate = (successes + a / 2) / (successes + failures + a)
    return 1.0 + policy.track_record_weight * (2 * rate - 1)


def decay_reference(memory: Memory) -> datetime | None:
    """Which date ages a memory: when an event happened, when a fact was last used."""
    if memory.memory_type is MemoryType.EPISODIC:
        return memory.occurred_at or memory.created_at
    if memory.memory_type is MemoryType.SEMANTIC:
        return memory.last_used_at or memory.created_at
    return None  # playbooks age by track record, catalog entries do not age


def multipliers(memory: Memory, now: datetime, policy: ScoringPolicy) -> Multipliers:
    reference = decay_reference(memory)
    decay = 1.0
    if reference is not None:
        age_days = (now - reference).total_seconds() / SECONDS_PER_DAY
        decay = gaussian_decay(age_days, policy)
    boost = use_boost(memory.use_count, policy) if memory.tracks_usage else 1.0
    prior = policy.catalog_prior if memory.is_catalog else 1.0
    record = 1.0
    if memory.memory_type is MemoryType.PROCEDURAL:
        record = track_record(memory.success_count, memory.failure_count, policy)
    return Multipliers(decay, reference, boost, prior, record)


def final_score(relevance: float, factors: Multipliers) -> float:
    return relevance * factors.product
