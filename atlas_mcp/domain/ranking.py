"""The recall pipeline, as pure functions: plan, rank, and which results earn a use.

    plan(policy, limits, query, now)                  what to fetch, and how to read it
    engine.candidates(plan)                           evidence: ranks, BM25 scores, cosines
    admitted(plan, candidates, now)                   what the plan's time bounds and expiry keep
    hearing.from_their_side(policy, plan, pool, ...)  the cosines heard from the members' side
    rank(policy, reranker, plan, candidates, now)     match × multipliers; calibrated relevance;
                                                      facts about the same thing resolved
    earned_uses(policy, hits, user_id)                what the caller plausibly used

The engine only fetches; every decision about order and relevance is made here, the same
for every engine, and ``atlas-mcp es-query`` prints the plan recall itself uses.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import datetime
from operator import attrgetter
from typing import Protocol, runtime_checkable

import numpy as np

from ..errors import InvalidInput
from . import calibration, explain, inputs
from .asked import setting_what_is_asked
from .calibration import Features
from .explain import shown
from .fact_columns import NO_TIME, microseconds
from .fusion import Candidate
from .limits import Limits
from .model import USER_MEMORY_TYPES, Memory, MemoryType
from .multipliers import FACTORS, Multipliers, decay_reference, factors, product, time_fits, window_fits
from .pool import SEMANTIC, Pool
from .query import lexical_query
from .resolution import Resolution, resolve
from .scoring import ScoringPolicy
from .validity import ANY_TIME, TimeFilter, kept
from .when import TimeIntent, time_intent


@dataclass(frozen=True, slots=True)
class RecallQuery:
    """One recall as a caller asks for it (checked by ``plan``)."""

    user_id: str
    text: str
    k: int = 10
    memory_types: Iterable[str] | None = None  # None: every user type
    include_catalog: bool = True
    include_superseded: bool = False
    min_relevance: float | None = None  # None: the policy's
    time: TimeFilter = ANY_TIME  # as_of / since / until, checked (``inputs.time_filter``)


@dataclass(frozen=True, slots=True)
class RecallPlan:
    """One validated recall: what the engine fetches, and what ranking reads it with."""

    user_id: str
    query: str
    memory_types: frozenset[MemoryType]  # may include CATALOG
    include_superseded: bool
    window: int  # candidates per branch, and the fused pool size
    rank_constant: int
    # What the BM25 branch should match (``domain.query``: function and time words dropped); "" = query.
    lexical_query: str = ""
    k: int = 0  # how many memories the recall returns (0: unknown); a reranker window is never smaller
    intent: TimeIntent = field(default_factory=TimeIntent)  # the period or order the query names
    min_relevance: float = 0.0  # results below this calibrated relevance are dropped
    dense: bool = True  # False: the BM25 branch alone (a write looking for the facts it repeats)
    # as_of / since / until (``domain.validity``): only memories true then, replaced ones included
    time: TimeFilter = ANY_TIME
    # Texts ranking is expected to ask ``cosines`` about (``perspective.foreseen``): an engine
    # may embed them beside its first stages; they change no result.
    foreseen: tuple[str, ...] = ()

    @property
    def lexical_text(self) -> str:
        return self.lexical_query or self.query


@dataclass(frozen=True, slots=True)
class Explanation:
    """Why a memory scored what it did (the arithmetic of ``domain.multipliers``)."""

    bm25_rank: int | None = field(metadata=shown("bm25"))
    dense_rank: int | None = field(metadata=shown("dense"))
    rrf_score: float | None = field(
        metadata=shown("rrf", "the fused rank score; null when the engine reranked")
    )  # None when the engine reranked and reports no fusion score
    dense_similarity: float | None = field(metadata=shown(None))
    match: float = field(
        metadata=shown(
            "match", "the rerank stage's match, relative to this recall's best (1.0)", also_as="relevance"
        )
    )
    reranker: str = field(metadata=shown("reranker"))
    multipliers: Multipliers = field(metadata=shown(None))
    score: float = field(metadata=shown("score"))
    features: Features | None = field(default=None, metadata=shown(None, on_wire=False))
    embedding_pending: bool = field(
        default=False,
        metadata=shown(
            None, "true: its vector is still being computed, so only its words matched", only_when_set=True
        ),
    )  # matched by its words only: its vector is still to come
    copies: tuple[str, ...] = field(
        default=(),
        metadata=shown(
            None, "other facts saying the same thing, not repeated in these results", only_when_set=True
        ),
    )  # restatements of this fact that ``domain.resolution`` folded into it


FORMULA = explain.formula(Multipliers)
COLUMNS = explain.columns(Explanation, {"multipliers": Multipliers})


@dataclass(frozen=True, slots=True)
class Hit:
    memory: Memory
    score: float  # orders results; comparable only within one recall
    explanation: Explanation
    relevance: float = 0.0  # calibrated: how likely the memory bears on the query, in [0, 1]
    outdated_by: str | None = None  # a newer fact about the same thing probably replaced this one


@runtime_checkable
class Reranker(Protocol):
    """The rerank stage: one match in [0, 1] per candidate, in the pool's order."""

    name: str

    def match(self, query: str, pool: Pool) -> np.ndarray: ...


class EngineReranked:
    """The match an engine's own reranker (Elasticsearch's) already put on each candidate."""

    name = "engine"

    def match(self, query: str, pool: Pool) -> np.ndarray:
        matches: np.ndarray = np.nan_to_num(pool.rerank, nan=0.0)
        return matches


def plan(policy: ScoringPolicy, limits: Limits, query: RecallQuery, now: datetime) -> RecallPlan:
    """A validated recall plan; needs no engine (``atlas-mcp es-query`` prints it as a request).

    The time phrases of the query ("last weekend") are kept out of the BM25 query: the period
    shapes ranking (``multipliers.time_fits``), the words should not match text. Explicit
    bounds (``query.time``) win over the period the words name.
    """
    retrieval = policy.retrieval
    text = inputs.clean_text(query.text, "query", limits.max_query_chars)
    intent = time_intent(text, now, retrieval.zone) if retrieval.time_expressions else TimeIntent()
    if query.time.since is not None or query.time.until is not None:
        intent = replace(intent, window=None)
    lexical = intent.without_phrases(text) if intent.phrases else text
    top_k = inputs.top_k(query.k, limits)
    kinds = _recall_types(query.memory_types, query.include_catalog)
    floor = query.min_relevance
    return RecallPlan(
        user_id=query.user_id,
        query=text,
        memory_types=kinds,
        # what was true then may have been replaced since
        include_superseded=bool(query.include_superseded) or query.time.historical,
        window=max(retrieval.rrf_window, top_k),
        rank_constant=retrieval.rrf_rank_constant,
        lexical_query=(lexical_query(lexical) if retrieval.lexical_content_words else lexical) or text,
        k=top_k,
        intent=intent,
        min_relevance=policy.calibration.default_min_relevance
        if floor is None
        else inputs.relevance_floor(floor),
        time=query.time,
    )


def _recall_types(memory_types: Iterable[str] | None, include_catalog: bool) -> frozenset[MemoryType]:
    """An explicit ``memory_types`` is the whole filter (catalog only if listed); without it,
    every user type, plus the catalog when ``include_catalog``."""
    if memory_types is None:
        return frozenset({*USER_MEMORY_TYPES, *([MemoryType.CATALOG] if include_catalog else [])})
    if isinstance(memory_types, str):
        memory_types = [memory_types]
    kinds = {inputs.memory_type(t, MemoryType) for t in memory_types}
    if not kinds:
        raise InvalidInput("memory_types must name at least one type, or be omitted for all")
    return frozenset(kinds)


def admitted(plan: RecallPlan, pool: Pool, now: datetime) -> Pool:
    """The candidates the plan's time bounds keep and that have not expired by ``now`` (the
    engines filter the same way; this is the one definition, exact to the instant)."""
    if not plan.time.active:  # ``kept`` reads only the expiry: the pool's column of it
        live = (pool.expires == NO_TIME) | (pool.expires > microseconds(now))
        return pool if live.all() else pool.subset(np.flatnonzero(live))
    keep = [kept(memory, plan.time, now) for memory in pool.memories]
    return pool if all(keep) else pool.subset(np.flatnonzero(keep))


def pool_of(candidates: Pool | Sequence[Candidate]) -> Pool:
    """``candidates`` as a pool (an engine that keeps its rows' facts returns one already)."""
    return candidates if isinstance(candidates, Pool) else Pool.of(candidates)


def rank(
    policy: ScoringPolicy,
    reranker: Reranker,
    plan: RecallPlan,
    candidates: Pool | Sequence[Candidate],
    now: datetime,
) -> list[Hit]:
    """The best ``plan.k`` candidates whose relevance reaches ``plan.min_relevance``, best first.

    Facts about the same thing resolve to the newest (``domain.resolution``): an older value
    never ranks above its replacement and is marked ``outdated_by`` it, and restatements of
    one fact are shown once (``copies``). The newest value answers what the older one matched,
    so its relevance is at least the older one's.

    The whole pool is ranked as arrays; a Hit, with its explanation, is made only for what is
    returned.
    """
    pool = pool_of(candidates)
    match = np.asarray(reranker.match(plan.query, pool), dtype=np.float64)
    window = window_fits(pool, plan.intent, policy.multipliers)
    fits = time_fits(pool, match, plan.intent, policy.multipliers, window)
    found = factors(pool, now, policy.multipliers, fits)
    scores = match * product(found)
    order = best_first(scores, lambda: pool.ids)
    features = calibration.features(
        plan.query, pool, plan.intent, policy.context_rerank.episode_gap, policy.calibration
    )
    relevance = calibration.calibrated(features, window, policy.calibration)
    ranked = order.tolist()
    facts = pool.kind == SEMANTIC
    if policy.calibration.attribute_evidence and facts.any():  # only a fact sets what is asked
        setting = setting_what_is_asked(plan.query, pool.memories, ranked, pool.meaning)
        relevance = calibration.with_attribute(relevance, setting, policy.calibration)
    resolved = resolve(pool.memories, ranked, _reach(relevance[order], plan), facts)
    for current, older in resolved.lifted.items():
        relevance[current] = max(relevance[current], relevance[older])
    # the resolved order's candidates that clear the floor, the first k: as arrays, not a pass
    # over every candidate below the floor
    # resolution keeps the order as it is for most pools (a chat's has no facts): no list read back
    shown = order if resolved.order == ranked else np.asarray(resolved.order, dtype=np.intp)
    shown = shown[relevance[shown] >= plan.min_relevance]
    returned: list[int] = (shown[: plan.k] if plan.k else shown).tolist()
    return _hits(pool, returned, match, reranker.name, found, scores, features, relevance, resolved)


def _reach(relevance: np.ndarray, plan: RecallPlan) -> int:
    """How many of the order resolution starts its groups from: through the ``k``-th that clears
    the floor (``relevance`` in the order's order), or the last that does if fewer do. A recall's
    hits are then the first ``k`` of what a recall of every candidate shows above the floor,
    whatever its ``k``; counting the first ``k`` candidates instead left a fact shown without its
    group when a candidate above it falls under the floor."""
    clearing = (relevance >= plan.min_relevance).nonzero()[0]  # np.flatnonzero's layer is Python
    if plan.k and len(clearing) >= plan.k:
        return int(clearing[plan.k - 1]) + 1
    return int(clearing[-1]) + 1 if len(clearing) else 0


def best_first(scores: np.ndarray, ids: Sequence[str] | Callable[[], Sequence[str]]) -> np.ndarray:
    """Indices by ``scores``, best first, equal scores by id. Ties are rare, so the ids (a
    sort of ~300 strings; ``ids`` may be a function that makes them) are only read when two
    scores are equal or one is NaN."""
    order = (-scores).argsort(kind="stable")
    ranked = scores[order]
    if np.isnan(ranked).any() or (ranked[1:] == ranked[:-1]).any():
        tied: np.ndarray = np.lexsort((_id_ranks(ids() if callable(ids) else ids), -scores))
        return tied
    return order


def _id_ranks(ids: Sequence[str]) -> np.ndarray:
    ranks = np.empty(len(ids), dtype=np.int64)
    ranks[np.argsort(np.array(ids, dtype=str), kind="stable")] = np.arange(len(ids))
    return ranks


def _hits(
    pool: Pool,
    returned: list[int],
    match: np.ndarray,
    reranker: str,
    found: dict[str, np.ndarray],
    scores: np.ndarray,
    features: calibration.PoolFeatures,
    relevance: np.ndarray,
    resolved: Resolution,
) -> list[Hit]:
    """A Hit, with its explanation, for each of ``returned``: what each reads of the pool's
    columns is gathered for all of them at once (``Pool.candidate``'s values, without a
    Candidate per hit), with the newer fact that probably replaced it and the restatements
    ``resolved`` folded into it (made once, not copied with them)."""
    at = np.array(returned, dtype=np.intp)
    rows = zip(
        returned,
        pool.bm25_rank[at].tolist(),
        pool.dense_rank[at].tolist(),
        pool.rrf[at].tolist(),
        pool.cosine[at].tolist(),
        match[at].tolist(),
        scores[at].tolist(),
        pool.pending[at].tolist(),
        features.cosine[at].tolist(),
        features.coverage[at].tolist(),
        features.context[at].tolist(),
        relevance[at].tolist(),
        zip(*(np.asarray(found[name], dtype=np.float64)[at].tolist() for name in FACTORS)),
        strict=True,
    )
    hits = []
    memories, outdated_by, copied = pool.memories, resolved.outdated_by, resolved.copies
    for i, bm25, dense, rrf, cosine, matched, score, pending, cos, cover, context, relevant, factor in rows:
        memory = memories[i]
        newer = outdated_by.get(i)
        why = Explanation(
            bm25_rank=bm25 or None,
            dense_rank=dense or None,
            rrf_score=None if math.isnan(rrf) else rrf,
            dense_similarity=None if math.isnan(cosine) else cosine,
            match=matched,
            reranker=reranker,
            multipliers=Multipliers(
                decay_reference=decay_reference(memory), **dict(zip(FACTORS, factor, strict=True))
            ),
            score=score,
            features=Features(cos, cover, context, features.topicless),
            embedding_pending=pending,
            copies=tuple(memories[c].id for c in copied.get(i, ())),
        )
        hits.append(Hit(memory, score, why, relevant, None if newer is None else memories[newer].id))
    return hits


def likely(policy: ScoringPolicy, hits: Iterable[Hit]) -> list[Hit]:
    """The hits that clear the relevance floor: those that probably bear on the query."""
    return [h for h in hits if h.relevance >= policy.calibration.relevance_floor]


def earned_uses(policy: ScoringPolicy, hits: Sequence[Hit], user_id: str) -> list[str]:
    """The ids a recall counts as used: the caller's own memories that track use, among the
    first ``use_top`` results, that cleared the relevance floor (small talk earns nothing)."""
    top = likely(policy, hits[: policy.multipliers.use_top])
    return [h.memory.id for h in top if h.memory.tracks_usage and h.memory.user_id == user_id]


def after_use(hits: Sequence[Hit], used: Iterable[str], at: datetime) -> list[Hit]:
    """The hits as the caller sees them once ``used`` was recorded at ``at``."""
    touched = set(used)
    return [  # a Hit made as ``replace`` makes it (it has no ``__post_init__``), at a third of its cost
        Hit(h.memory.evolve(use_count=h.memory.use_count + 1, last_used_at=at), *_AFTER_MEMORY(h))
        if h.memory.id in touched
        else h
        for h in hits
    ]


_AFTER_MEMORY = attrgetter(*(f.name for f in fields(Hit)[1:]))  # a Hit's fields after its memory
