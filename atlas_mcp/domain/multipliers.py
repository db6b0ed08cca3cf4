"""The multipliers: what a memory's final score adds to its match, and their constants.

    score = match × decay × use_boost × catalog_prior × track_record × time_fit

``match`` comes from the rerank stage (``domain.context_rerank`` by default, or a
cross-encoder). The multipliers are applied *after* reranking on purpose: a reranker that
overwrites them would let recency and use never decide the final order. Every multiplier is
bounded (see each field), so no prior can carry a memory that does not match past one that
does by more than a known margin of fused score (``relevance_temperature`` × ln of the ratio).

One multiplier is one ``MultiplierPolicy`` knob (or a few), one labelled ``Multipliers`` field
and its line in ``multipliers()``: every surface that shows the breakdown reads the labels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
from numpy.typing import ArrayLike
from pydantic import BaseModel, ConfigDict, Field

from .explain import factor_names, shown
from .fact_columns import NO_TIME, microseconds
from .fusion import Candidate
from .model import Memory, MemoryType
from .pool import CATALOG, EPISODIC, PROCEDURAL, SEMANTIC, Pool
from .when import Order, TimeIntent, window_fit

SECONDS_PER_DAY = 86_400.0


class MultiplierPolicy(BaseModel):
    """``[scoring.multipliers]``: the constants of every multiplier (and of earning a use)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    decay_offset_days: float = Field(180.0, ge=0, description="age before decay starts")
    decay_scale_days: float = Field(1825.0, gt=0, description="days after the offset to reach decay_value")
    decay_value: float = Field(0.5, gt=0, lt=1, description="multiplier at offset + scale")
    # Use boost: 1 + w·(1 − exp(−uses / saturation)), at most 1 + w however often a memory is
    # used. Only recalls that plausibly used a memory count (``use_top``, ``ranking.earned_uses``).
    use_count_weight: float = Field(0.1, ge=0, description="the most a use history can add")
    use_saturation: float = Field(5.0, gt=0, description="uses at which ~63% of the boost is earned")
    use_top: int = Field(3, ge=0, description="only the first this many results can earn a use")
    catalog_prior: float = Field(0.85, gt=0, description="multiplier of shared catalog entries")
    # Playbook track record: a Beta(prior, prior)-smoothed success rate mapped to
    # [1 - track_record_weight, 1 + track_record_weight]; an untried playbook scores 1.0.
    track_record_prior: float = Field(2.0, gt=0, description="pseudo-runs, half won, before the first run")
    track_record_weight: float = Field(
        0.25, ge=0, lt=1, description="the most a track record moves a playbook"
    )
    # Time in the query (``domain.when``); the window floor also bounds calibrated relevance.
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


@dataclass(frozen=True, slots=True)
class Multipliers:
    """Each factor of the final score, kept apart so recall can explain itself."""

    decay: float = field(default=1.0, metadata=shown("decay", factor=True))
    decay_reference: datetime | None = field(
        default=None, metadata=shown("aged from", "the date decay aged this memory from")
    )
    use_boost: float = field(default=1.0, metadata=shown("use", factor=True))
    catalog_prior: float = field(default=1.0, metadata=shown("prior", factor=True))
    track_record: float = field(default=1.0, metadata=shown("track", factor=True))
    time_fit: float = field(
        default=1.0,
        metadata=shown(
            "time",
            "how well the memory's date fits the period or order the query names",
            factor=True,
        ),
    )

    @property
    def product(self) -> float:
        return float(math.prod(getattr(self, name) for name in FACTORS))


FACTORS = factor_names(Multipliers)


def gaussian_decay(age_days: ArrayLike, policy: MultiplierPolicy) -> np.ndarray:
    """Elasticsearch-style ``gauss`` decay: 1.0 until ``offset``, ``decay_value`` at offset+scale."""
    effective = np.asarray(age_days, dtype=np.float64) - policy.decay_offset_days
    sigma_sq = policy.decay_scale_days**2 / (2.0 * math.log(1.0 / policy.decay_value))
    aged = effective > 0
    return np.where(aged, np.exp(-(np.where(aged, effective, 0.0) ** 2) / (2.0 * sigma_sq)), 1.0)


def use_boost(use_count: ArrayLike, policy: MultiplierPolicy) -> np.ndarray:
    """Saturating: the first uses say a memory matters, the hundredth says nothing more."""
    uses = np.maximum(np.asarray(use_count), 0)
    boost: np.ndarray = 1.0 + policy.use_count_weight * (1.0 - np.exp(-uses / policy.use_saturation))
    return boost


def track_record(successes: ArrayLike, failures: ArrayLike, policy: MultiplierPolicy) -> np.ndarray:
    """Smoothed success rate, so one lucky run is not a proof: 0 runs → 1.0."""
    a = policy.track_record_prior
    rate = (np.asarray(successes) + a / 2) / (np.asarray(successes) + np.asarray(failures) + a)
    record: np.ndarray = 1.0 + policy.track_record_weight * (2 * rate - 1)
    return record


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


def _time_references(pool: Pool) -> np.ndarray:
    """``time_reference`` of every candidate (microseconds, NO_TIME)."""
    dated = np.where(pool.occurred != NO_TIME, pool.occurred, pool.created)
    return np.where(pool.kind == CATALOG, NO_TIME, dated)


def _days_between(later: np.ndarray | int, earlier: np.ndarray) -> np.ndarray:
    """(later − earlier) in days, as ``timedelta.total_seconds() / SECONDS_PER_DAY`` reads it."""
    return ((later - earlier) / 1e6) / SECONDS_PER_DAY


def order_fits(pool: Pool, match: np.ndarray, order: Order, policy: MultiplierPolicy) -> np.ndarray:
    """'Most recent X' / 'first X': the newest (oldest) of the best matches fits 1.0, the others less.

    Only the ``time_order_pool`` best-matching memories set the anchor, so "my most recent trip
    to the dentist" prefers the newest dentist visit, not the newest memory of any kind. When
    events are among those matches, the question is about something that happened: a fact's
    date only says when it was learnt, so facts then fit as the opposite end does.
    """
    fits = np.ones(len(pool))
    if not len(pool):
        return fits
    best = (-match).argsort(kind="stable")[: policy.time_order_pool]
    dates = _time_references(pool)
    dated = dates != NO_TIME
    events = pool.kind == EPISODIC
    about_events = bool((events[best] & dated[best]).any())
    anchors = best[dated[best] & (events[best] | (not about_events))]
    if not len(anchors):
        return fits
    anchor = dates[anchors].max() if order is Order.NEWEST else dates[anchors].min()
    floor = policy.time_order_floor
    days = np.abs(_days_between(anchor, np.where(dated, dates, anchor)))
    fits = np.where(dated, floor + (1 - floor) * np.exp(-days / policy.time_order_days), 1.0)
    if about_events:
        fits = np.where(dated & ~events, floor, fits)
    return fits


def window_fits(pool: Pool, intent: TimeIntent, policy: MultiplierPolicy) -> np.ndarray | None:
    """How well each candidate's date fits the period the query names; None when it names none."""
    if intent.window is None:
        return None
    return window_fit(_time_references(pool), intent.window, policy.time_window_floor)


def time_fits(
    pool: Pool,
    match: np.ndarray,
    intent: TimeIntent,
    policy: MultiplierPolicy,
    window: np.ndarray | None = None,
) -> np.ndarray:
    """The period and order a query names, as one bounded multiplier per candidate (1.0: none named).

    A period only reorders when some candidate falls inside it: when none does (nothing was
    stored then, or the words meant something else) the ranking is left as the text decided.
    ``window`` is ``window_fits``' answer when the caller already has it.
    """
    fits = np.ones(len(pool))
    window = window if window is not None else window_fits(pool, intent, policy)
    if window is not None and (window == 1.0).any():
        fits = window
    if intent.order is not None:
        fits = fits * order_fits(pool, match, intent.order, policy)
    return fits


def factors(
    pool: Pool, now: datetime, policy: MultiplierPolicy, time_fit: np.ndarray
) -> dict[str, np.ndarray]:
    """Every factor of ``Multipliers`` for every candidate, by name."""
    kind = pool.kind
    # A pool of events (a chat) has no memory that tracks use or is a playbook: those factors
    # are all 1.0 then, and the uses, track records and dates they read are not gathered.
    tracking, playbooks = pool.tracks_usage, kind == PROCEDURAL
    tracked, played = bool(tracking.any()), bool(playbooks.any())
    uses, last_used = pool.used() if tracked else (None, None)
    events = kind == EPISODIC
    happened = np.where(pool.occurred != NO_TIME, pool.occurred, pool.created)
    if events.all():  # every reference is when the event happened
        references = happened
    else:
        learnt = (
            pool.created if last_used is None else np.where(last_used != NO_TIME, last_used, pool.created)
        )
        references = np.where(events, happened, np.where(kind == SEMANTIC, learnt, NO_TIME))
    now_us = microseconds(now)
    dated = references != NO_TIME
    if dated.all():  # the where()s below would keep every value
        decay = gaussian_decay(_days_between(now_us, references), policy)
    else:
        ages = _days_between(now_us, np.where(dated, references, now_us))
        decay = np.where(dated, gaussian_decay(ages, policy), 1.0)
    return {
        "decay": decay,
        "use_boost": np.ones(len(kind)) if uses is None else np.where(tracking, use_boost(uses, policy), 1.0),
        "catalog_prior": np.where(kind == CATALOG, policy.catalog_prior, 1.0),
        "track_record": np.where(playbooks, track_record(*pool.track_records(), policy), 1.0)
        if played
        else np.ones(len(kind)),
        "time_fit": time_fit,
    }


def product(found: dict[str, np.ndarray]) -> np.ndarray:
    """The factors multiplied, in their declared order (as ``Multipliers.product``): the first
    times the next and so on (1.0 times the first is the first, to the bit)."""
    first, *rest = FACTORS
    out = found[first]
    for name in rest:
        out = out * found[name]
    return out if rest else out.copy()


def explained(found: dict[str, np.ndarray], i: int, memory: Memory) -> Multipliers:
    """The ``i``-th candidate's factors as one ``Multipliers`` (for what a recall returns)."""
    return Multipliers(
        decay_reference=decay_reference(memory), **{name: float(found[name][i]) for name in FACTORS}
    )


def multipliers(
    memory: Memory, now: datetime, policy: MultiplierPolicy, time_fit: float = 1.0
) -> Multipliers:
    """One memory's factors (the same arithmetic as a recall's, on a pool of one)."""
    found = factors(Pool.of([Candidate(memory, None)]), now, policy, np.array([time_fit]))
    return explained(found, 0, memory)


def final_score(match: float, factors: Multipliers) -> float:
    return match * factors.product
