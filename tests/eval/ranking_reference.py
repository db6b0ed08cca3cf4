"""The ranking arithmetic one candidate at a time, in plain Python: the specification
``test_ranking_arrays`` holds the array version to (same order, scores within float rounding).
A test oracle only: every line here reads as the arithmetic's definition, not as fast code."""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np

from atlas_mcp.domain.asked import asked, setting, setting_what_is_asked
from atlas_mcp.domain.calibration import CalibrationPolicy, Features, tokens, topic_words, with_attribute
from atlas_mcp.domain.context_rerank import ContextRerankPolicy, zscores
from atlas_mcp.domain.gist import gist
from atlas_mcp.domain.lexical import detect_language, has_cjk, stem, word_count
from atlas_mcp.domain.model import Memory, MemoryType
from atlas_mcp.domain.multipliers import (
    SECONDS_PER_DAY,
    MultiplierPolicy,
    Multipliers,
    decay_reference,
    time_reference,
)
from atlas_mcp.domain.openings import speaker
from atlas_mcp.domain.resolution import resolve
from atlas_mcp.domain.when import DAY, Order, TimeIntent


@dataclass(frozen=True, slots=True)
class Signals:
    memory: Memory
    dense: float | None
    bm25: float | None


def window_fit(when: datetime | None, window: tuple[datetime, datetime], floor: float) -> float:
    if when is None:
        return floor
    start, end = window
    if start <= when < end:
        return 1.0
    distance = (start - when) if when < start else (when - end)
    width = max(end - start, DAY)
    return max(floor, 0.5 ** (1 + distance / width))


def _bags(texts: Sequence[str], words: Sequence[str], query: str = "") -> list[set[str]]:
    """A word as one of a text's ``tokens``, or by its stem in the query's language as the stem
    of one of the text's words in the text's; a Chinese or Japanese word anywhere in it."""
    out = []
    asked = {w: stem(w, detect_language(query)) for w in words}
    for text in texts:
        lowered, found = text.lower(), set(tokens(text))
        language = detect_language(text)
        found |= {stem(run, language) for run in re.findall(r"[^\W_]+", lowered)}
        out.append({w for w in words if (w in lowered if has_cjk(w) else w in found or asked[w] in found)})
    return out


def named_in(name: str, query: str) -> bool:
    return re.search(rf"\b{re.escape(name)}\b", query, re.IGNORECASE) is not None


def episodes(memories: Sequence[Memory], gap: timedelta) -> list[list[int]]:
    """Indices of the events among ``memories``, grouped into episodes, each in time order."""
    events = [i for i, m in enumerate(memories) if m.memory_type is MemoryType.EPISODIC and m.occurred_at]
    events.sort(key=lambda i: (memories[i].user_id or "", memories[i].occurred_at, memories[i].created_at))
    groups: list[list[int]] = []
    for i in events:
        last = groups[-1][-1] if groups else None
        if (
            last is None
            or memories[last].user_id != memories[i].user_id
            or memories[i].occurred_at - memories[last].occurred_at > gap
        ):
            groups.append([i])
        else:
            groups[-1].append(i)
    return groups


def fused_scores(pool: Sequence[Signals], policy: ContextRerankPolicy) -> np.ndarray:
    """The fused score of every candidate (higher is better), before context."""
    present = [s.dense for s in pool if s.dense is not None]
    floor = min(present) if present else 0.0
    dense = np.array([floor if s.dense is None else s.dense for s in pool], dtype=np.float64)
    bm25 = np.array([s.bm25 or 0.0 for s in pool], dtype=np.float64)
    score = policy.dense_weight * zscores(dense, policy.dense_min_spread)
    score += policy.bm25_weight * zscores(bm25, policy.bm25_min_spread)
    events = np.array([s.memory.memory_type is MemoryType.EPISODIC for s in pool])
    if events.sum() >= policy.length_min_events and policy.length_weight:
        # Events only, among events: a chat turn of one word ("ok!") rarely answers, while a
        # fact or playbook was written to be short and complete (on facts, the prior put "Lena
        # prefers green tea to coffee" above "Lena is allergic to hazelnuts" for "which foods
        # should Lena avoid?"). Capped, so a long note gains at most length_weight × cap.
        words = np.array(
            [math.log1p(word_count(s.memory.text)) for s, e in zip(pool, events) if e]
        )  # CJK-fair
        z = np.clip(zscores(words, policy.length_min_spread), -policy.length_z_floor, policy.length_z_cap)
        score[events] += policy.length_weight * z
    return score


def with_context(
    score: np.ndarray,
    groups: list[list[int]],
    policy: ContextRerankPolicy,
    standalone: Sequence[int] = (),
    memories: Sequence[Memory] = (),
) -> np.ndarray:
    """Neighbour smoothing within each episode, then the episode's own strength.

    ``standalone`` memories (facts, playbooks, catalog entries) answer on their own: they are
    their own neighbour and their own episode, so the context bonus events earn from a good
    conversation is not a bonus facts can never have.
    """
    out = score.copy()
    for group in groups:
        for position, i in enumerate(group):
            neighbours = [score[group[p]] for p in (position - 1, position + 1) if 0 <= p < len(group)]
            if neighbours:
                out[i] += policy.context_weight * max(neighbours)
    for i in standalone:
        out[i] += policy.context_weight * score[i]
    if policy.reply_weight and memories:
        # A reply inherits from the other speaker's question right before it.
        for group in groups:
            for asker, reply in itertools.pairwise(group):
                text = memories[asker].text
                if "?" not in text and "？" not in text:
                    continue
                said_by = speaker(memories[reply].text)
                if said_by is not None and said_by == speaker(text):
                    continue
                out[reply] += policy.reply_weight * max(score[asker], 0.0)
    units = [*groups, *([i] for i in standalone)]
    if units and policy.episode_weight:
        members = [i for unit in units for i in unit]
        best = np.array([max(out[j] for j in unit) for unit in units for _ in unit])
        z = np.clip(zscores(best, policy.fused_min_spread), -policy.episode_z_cap, policy.episode_z_cap)
        out[members] += policy.episode_weight * z
    return out


def context_match(query: str, pool: Sequence[Signals], policy: ContextRerankPolicy) -> list[float]:
    """One match in (0, 1] per candidate, in the pool's order; the best scores 1.0."""
    if not pool:
        return []
    memories = [s.memory for s in pool]
    score = fused_scores(pool, policy)
    groups = episodes(memories, policy.episode_gap)
    standalone: list[int] = []
    if policy.standalone_context:
        # A lone event (no other turn of its episode in the pool) answers on its own, like a fact.
        standalone = [i for i, m in enumerate(memories) if m.memory_type is not MemoryType.EPISODIC]
        standalone += [group[0] for group in groups if len(group) == 1]
        groups = [group for group in groups if len(group) > 1]
    score = with_context(score, groups, policy, standalone, memories)
    if policy.speaker_weight:
        for i, memory in enumerate(memories):
            name = speaker(memory.text) if memory.memory_type is MemoryType.EPISODIC else None
            if name and named_in(name, query):
                score[i] += policy.speaker_weight
    if policy.attribute_weight:
        # The facts that set what the query asks about; a sure reading (a question in another
        # language, here: no meaning is read) lifts the best of them above the best candidate.
        question = asked(query)
        found = [] if question is None else setting(question, memories, np.argsort(-score, kind="stable"))
        sure = [i for i in found if question is not None and question.across(gist(memories[i].text))]
        best = float(score.max())
        lift = policy.attribute_weight
        if sure:
            lift = max(lift, best - max(float(score[i]) for i in sure) + policy.attribute_lead)
        for i in found:
            score[i] += lift if i in sure else policy.attribute_weight
    return [float(x) for x in np.exp((score - score.max()) / policy.relevance_temperature)]


def gaussian_decay(age_days: float, policy: MultiplierPolicy) -> float:
    """Elasticsearch-style ``gauss`` decay: 1.0 until ``offset``, ``decay_value`` at offset+scale."""
    effective = age_days - policy.decay_offset_days
    if effective <= 0:
        return 1.0
    sigma_sq = policy.decay_scale_days**2 / (2.0 * math.log(1.0 / policy.decay_value))
    return math.exp(-(effective**2) / (2.0 * sigma_sq))


def use_boost(use_count: int, policy: MultiplierPolicy) -> float:
    """Saturating: the first uses say a memory matters, the hundredth says nothing more."""
    return 1.0 + policy.use_count_weight * (1.0 - math.exp(-max(use_count, 0) / policy.use_saturation))


def track_record(successes: int, failures: int, policy: MultiplierPolicy) -> float:
    """Smoothed success rate, so one lucky run is not a proof: 0 runs → 1.0."""
    a = policy.track_record_prior
    rate = (successes + a / 2) / (successes + failures + a)
    return 1.0 + policy.track_record_weight * (2 * rate - 1)


def order_fits(
    memories: list[Memory], match: list[float], order: Order, policy: MultiplierPolicy
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


def window_fits(memories: list[Memory], intent: TimeIntent, policy: MultiplierPolicy) -> list[float] | None:
    """How well each memory's date fits the period the query names; None when it names none."""
    if intent.window is None:
        return None
    return [window_fit(time_reference(m), intent.window, policy.time_window_floor) for m in memories]


def time_fits(
    memories: list[Memory],
    match: list[float],
    intent: TimeIntent,
    policy: MultiplierPolicy,
    window: list[float] | None = None,
) -> list[float]:
    """The period and order a query names, as one bounded multiplier per memory (1.0: none named).

    A period only reorders when some candidate falls inside it: when none does (nothing was
    stored then, or the words meant something else) the ranking is left as the text decided.
    ``window`` is ``window_fits``' answer when the caller already has it.
    """
    fits = [1.0] * len(memories)
    window = window if window is not None else window_fits(memories, intent, policy)
    if window is not None and any(f == 1.0 for f in window):
        fits = window
    if intent.order is not None:
        fits = [a * b for a, b in zip(fits, order_fits(memories, match, intent.order, policy), strict=True)]
    return fits


def multipliers(
    memory: Memory, now: datetime, policy: MultiplierPolicy, time_fit: float = 1.0
) -> Multipliers:
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
    return Multipliers(
        decay=decay,
        decay_reference=reference,
        use_boost=boost,
        catalog_prior=prior,
        track_record=record,
        time_fit=time_fit,
    )


def coverages(words: list[str], memories: Sequence[Memory], query: str = "") -> list[float]:
    """Rarity-weighted share of ``words`` each memory contains; rarity is counted in the pool."""
    if not words or not memories:
        return [0.0] * len(memories)
    bags = _bags([m.search_text() for m in memories], words, query)
    counts = Counter(w for bag in bags for w in words if w in bag)
    weight = {w: math.log(1 + len(bags) / (1 + counts[w])) for w in words}
    total = sum(weight.values())
    return [sum(weight[w] for w in words if w in bag) / total for bag in bags]


def features(
    query: str,
    memories: Sequence[Memory],
    cosines: Sequence[float | None],
    intent: TimeIntent,
    episode_gap: timedelta,
    model: CalibrationPolicy,
) -> list[Features]:
    words = topic_words(query, intent)
    cover = coverages(words, memories, query)
    cos = [model.unknown_cosine if c is None else max(c, 0.0) for c in cosines]
    own = [_own(c, v, model) for c, v in zip(cos, cover, strict=True)]
    neighbour = [0.0] * len(memories)
    for group in episodes(memories, episode_gap):
        for position, i in enumerate(group):
            near = [own[group[p]] for p in (position - 1, position + 1) if 0 <= p < len(group)]
            neighbour[i] = max(near, default=0.0)
    return [Features(cos[i], cover[i], neighbour[i], not words) for i in range(len(memories))]


def _own(cosine: float, coverage: float, model: CalibrationPolicy) -> float:
    return _sigmoid(model.bias + model.cosine * cosine + model.coverage * coverage)


def relevance(f: Features, model: CalibrationPolicy) -> float:
    if f.topicless:
        return model.small_talk_factor * _sigmoid(model.bias + model.cosine * f.cosine)
    return max(_own(f.cosine, f.coverage, model), model.context * f.context)


def calibrated(
    found: Sequence[Features], window: Sequence[float] | None, model: CalibrationPolicy
) -> list[float]:
    """One absolute relevance in [0, 1] per memory, the period the query names included:
    ``window`` is each memory's fit to that period (``multipliers.window_fits``), None if none."""
    base = [relevance(f, model) for f in found]
    if window is None:
        return base
    fits = window
    inside = sum(1 for fit in fits if fit == 1.0)
    evidence = model.time_evidence / max(inside, 1)  # one of n memories from that period
    out = []
    for f, r, fit in zip(found, base, fits, strict=True):
        if fit < 1.0:
            out.append(r * fit**model.period_miss_power)
            continue
        own = _sigmoid(model.bias + model.cosine * f.cosine) if f.topicless else r
        out.append(1 - (1 - own) * (1 - evidence))
    return out


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x > -500 else 0.0


def rank(query, candidates, intent, now, policy, shown) -> list[tuple[str, float, float, float]]:
    """(id, match, score, relevance) of every candidate, best first, ties by id, then facts about
    the same thing resolved as recall resolves them (``domain.resolution``, for ``shown``)."""
    memories = [c.memory for c in candidates]
    pool = [Signals(c.memory, c.dense_similarity, c.bm25_score) for c in candidates]
    match = context_match(query, pool, policy.context_rerank)
    window = window_fits(memories, intent, policy.multipliers)
    fits = time_fits(memories, match, intent, policy.multipliers, window)
    factors = [multipliers(m, now, policy.multipliers, t) for m, t in zip(memories, fits, strict=True)]
    scores = [x * f.product for x, f in zip(match, factors, strict=True)]
    found = features(
        query,
        memories,
        [c.relevance_cosine for c in candidates],
        intent,
        policy.context_rerank.episode_gap,
        policy.calibration,
    )
    relevant = calibrated(found, window, policy.calibration)
    order = sorted(range(len(memories)), key=lambda i: (-scores[i], memories[i].id))
    if policy.calibration.attribute_evidence:
        setting = setting_what_is_asked(query, memories, order)
        relevant = [float(r) for r in with_attribute(np.array(relevant), setting, policy.calibration)]
    resolved = resolve(memories, order, shown)
    for current, older in resolved.lifted.items():
        relevant[current] = max(relevant[current], relevant[older])
    return [(memories[i].id, match[i], scores[i], relevant[i]) for i in resolved.order]
