"""Scoring policy: every recall constant, and the one formula for a memory's final score.

Both engines fetch candidates differently, but the final order is always decided here:

    score = match × decay × use_boost × catalog_prior × track_record × time_fit

``match`` comes from the rerank stage (a fused retrieval score relative to the best candidate
by default, or a cross-encoder). The multipliers are applied *after* reranking on purpose: in
the design this project grew from, they only shaped candidate selection and the reranker then
overwrote them, so recency and use never decided the final order. Every multiplier is bounded
(see each field), so no prior can carry a memory that does not match past one that does by
more than a known margin of fused score (``relevance_temperature`` × ln of the ratio).

The score only orders. Whether a memory bears on the query at all is ``domain.relevance``'s
calibrated ``relevance``, a separate, absolute estimate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .model import Memory, MemoryType
from .when import Order, TimeIntent, window_fit

SECONDS_PER_DAY = 86_400.0


class RelevanceModel(BaseModel):
    """The fitted weights of calibrated relevance (``atlas-mcp eval calibrate`` prints new ones)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    bias: float = -7.42
    cosine: float = 7.21
    coverage: float = 3.64
    context: float = Field(
        0.85, ge=0, le=1, description="share of a neighbouring turn's relevance an event inherits"
    )
    small_talk_factor: float = Field(0.1, ge=0, le=1)
    unknown_cosine: float = Field(0.45, ge=0, le=1, description="assumed when the engine measured no cosine")
    time_evidence: float = Field(
        0.8, ge=0, le=1, description="relevance a named period lends the one memory that falls in it"
    )
    time_window_floor: float = Field(0.1, gt=0, le=1)


class ScoringPolicy(BaseModel):
    """All tunable recall constants. Overridable through the ``[scoring]`` settings table."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rrf_rank_constant: int = Field(30, ge=1)
    rrf_window: int = Field(300, ge=1, description="candidates per branch and fused pool size")
    lexical_content_words: bool = Field(
        True, description="BM25 matches the query's content words only (domain.query)"
    )
    decay_offset_days: float = Field(180.0, ge=0)
    decay_scale_days: float = Field(1825.0, gt=0)
    decay_value: float = Field(0.5, gt=0, lt=1, description="multiplier at offset + scale")
    # Use boost: 1 + w·(1 − exp(−uses / saturation)), at most 1 + w however often a memory is
    # used. Only recalls that plausibly used a memory count (see ``use_*`` below).
    use_count_weight: float = Field(0.1, ge=0, description="the most a use history can add")
    use_saturation: float = Field(5.0, gt=0, description="uses at which ~63% of the boost is earned")
    use_top: int = Field(3, ge=0, description="only the first this many results can earn a use")
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
    perspective_weight: float = Field(
        1.0,
        ge=0,
        description="weight of the query reworded from the memory's side (domain.perspective) in its cosine",
    )
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
        4.0, gt=0, description="match = exp((s - s_best) / T): how far multipliers can reorder"
    )
    # Bounds on the pool-relative priors, in standard deviations: a 2 kB note among one-line
    # facts is +5 z in log words; uncapped, that alone won queries it did not match.
    length_z_cap: float = Field(2.0, ge=0, description="most a long memory gains, in z of log words")
    length_z_floor: float = Field(2.0, ge=0, description="most a short memory loses, in z of log words")
    episode_z_cap: float = Field(4.0, ge=0, description="bound on z(best score in the episode)")
    standalone_context: bool = Field(
        True, description="facts, playbooks and catalog entries are their own context (events borrow theirs)"
    )
    # Time in the query (``domain.when``).
    time_window_floor: float = Field(
        0.1, gt=0, le=1, description="the fit of a memory far outside the period a query names"
    )
    time_order_floor: float = Field(
        0.25, gt=0, le=1, description="'most recent' / 'first time': the fit of the opposite end"
    )
    time_order_days: float = Field(
        45.0, gt=0, description="'most recent': a match this much older than the newest fits ~0.68"
    )
    time_order_pool: int = Field(10, ge=1, description="'most recent' compares the best this many matches")
    time_expressions: bool = Field(
        True, description="read 'last weekend', 'most recent' as time (domain.when)"
    )
    time_zone: str = Field(
        "UTC", description="the zone calendar words ('yesterday', 'last week') are read in"
    )
    # Calibrated relevance (``domain.calibration``), the line below which a memory probably does
    # not bear on the query, and what recall drops by default.
    relevance: RelevanceModel = Field(default_factory=RelevanceModel)
    relevance_floor: float = Field(
        0.05,
        ge=0,
        le=1,
        description="below it a memory probably does not bear on the query: recall drops it, and it earns no use",
    )
    min_relevance: float | None = Field(
        None,
        ge=0,
        le=1,
        description="recall drops memories below this relevance unless asked otherwise; unset: the relevance floor",
    )

    @property
    def default_min_relevance(self) -> float:
        """What a recall drops below when the caller does not say: the floor, unless configured."""
        return self.relevance_floor if self.min_relevance is None else self.min_relevance

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


@dataclass(frozen=True, slots=True)
class Multipliers:
    """Each factor of the final score, kept apart so recall can explain itself."""

    decay: float = 1.0
    decay_reference: datetime | None = None
    use_boost: float = 1.0
    catalog_prior: float = 1.0
    track_record: float = 1.0
    time_fit: float = 1.0  # the period or order the query names (``domain.when``)

    @property
    def product(self) -> float:
        return self.decay * self.use_boost * self.catalog_prior * self.track_record * self.time_fit


def gaussian_decay(age_days: float, policy: ScoringPolicy) -> float:
    """Elasticsearch-style ``gauss`` decay: 1.0 until ``offset``, ``decay_value`` at offset+scale."""
    effective = age_days - policy.decay_offset_days
    if effective <= 0:
        return 1.0
    sigma_sq = policy.decay_scale_days**2 / (2.0 * math.log(1.0 / policy.decay_value))
    return math.exp(-(effective**2) / (2.0 * sigma_sq))


def use_boost(use_count: int, policy: ScoringPolicy) -> float:
    """Saturating: the first uses say a memory matters, the hundredth says nothing more."""
    return 1.0 + policy.use_count_weight * (1.0 - math.exp(-max(use_count, 0) / policy.use_saturation))


def track_record(successes: int, failures: int, policy: ScoringPolicy) -> float:
    """Smoothed success rate, so one lucky run is not a proof: 0 runs → 1.0."""
    a = policy.track_record_prior
    rate = (successes + a / 2) / (successes + failures + a)
    return 1.0 + policy.track_record_weight * (2 * rate - 1)


def outcome_changes(playbook: Memory, success: bool, at: datetime) -> dict[str, object]:
    """The fields one reported run changes on a playbook (an agent's report or consolidation's)."""
    if success:
        last = max(filter(None, (playbook.last_success_at, at)))
        return {"success_count": playbook.success_count + 1, "last_success_at": last}
    return {"failure_count": playbook.failure_count + 1}


def decay_reference(memory: Memory) -> datetime | None:
    """Which date ages a memory: when an event happened, when a fact was last used."""
    if memory.memory_type is MemoryType.EPISODIC:
        return memory.occurred_at or memory.created_at
    if memory.memory_type is MemoryType.SEMANTIC:
        return memory.last_used_at or memory.created_at
    return None  # playbooks age by track record, catalog entries do not age


def time_reference(memory: Memory) -> datetime | None:
    """The date a question's period or order is about: when an event happened, else when written.

    Catalog entries have none: when an admin loaded them says nothing about the user's past.
    """
    if memory.is_catalog:
        return None
    return memory.occurred_at or memory.created_at


def order_fits(
    memories: list[Memory], match: list[float], order: Order, policy: ScoringPolicy
) -> list[float]:
    """'Most recent X' / 'first X': the newest (oldest) of the best matches fits 1.0, the others less.

    Only the ``time_order_pool`` best-matching memories set the anchor, so "my most recent trip
    to the dentist" prefers the newest dentist visit, not the newest memory of any kind. When
    events are among those matches, the question is about something that happened: a fact's
    date only says when it was learnt, so facts then fit as the opposite end does.
    """
    if not memories:
        return []
    best = sorted(range(len(memories)), key=lambda i: -match[i])[: policy.time_order_pool]
    dates = [time_reference(m) for m in memories]
    events = [m.memory_type is MemoryType.EPISODIC for m in memories]
    about_events = any(events[i] and dates[i] is not None for i in best)
    dated = [dates[i] for i in best if dates[i] is not None and (events[i] or not about_events)]
    if not dated:
        return [1.0] * len(memories)
    anchor = max(dated) if order is Order.NEWEST else min(dated)
    fits = []
    for when, event in zip(dates, events, strict=True):
        if when is None:
            fits.append(1.0)
            continue
        if about_events and not event:
            fits.append(policy.time_order_floor)
            continue
        days = abs((anchor - when).total_seconds()) / SECONDS_PER_DAY
        fits.append(
            policy.time_order_floor + (1 - policy.time_order_floor) * math.exp(-days / policy.time_order_days)
        )
    return fits


def time_fits(
    memories: list[Memory], match: list[float], intent: TimeIntent, policy: ScoringPolicy
) -> list[float]:
    """The period and order a query names, as one bounded multiplier per memory (1.0: none named).

    A period only reorders when some candidate falls inside it: when none does (nothing was
    stored then, or the words meant something else) the ranking is left as the text decided.
    """
    fits = [1.0] * len(memories)
    if intent.window is not None:
        window = [window_fit(time_reference(m), intent.window, policy.time_window_floor) for m in memories]
        if any(f == 1.0 for f in window):
            fits = window
    if intent.order is not None:
        fits = [a * b for a, b in zip(fits, order_fits(memories, match, intent.order, policy), strict=True)]
    return fits


def multipliers(memory: Memory, now: datetime, policy: ScoringPolicy, time_fit: float = 1.0) -> Multipliers:
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
    return Multipliers(decay, reference, boost, prior, record, time_fit)


def final_score(relevance: float, factors: Multipliers) -> float:
    return relevance * factors.product
