"""The context rerank: how the default rerank turns retrieval signals into one match per candidate.

Pure functions over a recall's candidate pool (no I/O). Each candidate brings a dense cosine
and a BM25 score; they are put on one scale as z-scores over the pool and summed with weights
(score fusion beat rank fusion by ~0.03 R@5 on LoCoMo). Events then borrow from their context,
because a conversation answers across turns: a question matches one turn and the answer sits
in the next, or several turns of one exchange each carry part of it.

- *standalone*: a fact, playbook or catalog entry answers on its own, and so does an event
  with no other turn of its episode in the pool: it is its own neighbour and its own episode
  (``standalone_context``);
- *episodes*: events of one user whose ``occurred_at`` lie within ``episode_gap_minutes`` of
  the previous one, in time order (then write order) — one sitting, one conversation;
- *context*: an event gains ``context_weight`` × the best score of its neighbours in the pool
  that sit next to it in its episode;
- *reply*: an event right after another speaker's turn that asks something gains
  ``reply_weight`` × that turn's score when it is above the mean ("Anything you're excited for
  in the adoption?" matches the query; the answer is the next turn, which shares few words);
- *episode*: an event gains ``episode_weight`` × z(best score in its episode);
- *length*: ``length_weight`` × z(log words) of events among events (at least
  ``length_min_events`` of them), capped, so short chit-chat turns rank lower but a long note
  cannot win on length;
- *speaker*: ``speaker_weight`` when the query names the event's speaker ("Sarah: …");
- *attribute*: ``attribute_weight`` when a fact sets what the query asks about, for the same
  person (``domain.asked``: "what's my husband called?" and "My husband is Daniel"); when the
  query's meaning reads the same attribute (or reads one its words did not name), the best such
  fact is lifted ``attribute_lead`` above the best candidate, the others by as much.

The result is ``exp((s − s_best) / relevance_temperature)``: 1.0 for the best candidate and a
gap of ``T·ln(1/m)`` in fused score for a multiplier ``m`` (decay, catalog prior) to overturn.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass
from datetime import timedelta
from operator import itemgetter

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from .asked import asked, setting
from .fact_columns import MICROSECOND, NO_TIME
from .gist import gist
from .pool import EPISODIC, SEMANTIC, Pool
from .vocabulary import NO_SPEAKER, SPEAKERS


class ContextRerankPolicy(BaseModel):
    """``[scoring.context_rerank]``: weighted z-scores over the candidate pool, tuned on the
    LoCoMo development split (docs/quality.md measures each one's share)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

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
    attribute_weight: float = Field(
        1.0,
        ge=0,
        description="bonus when a fact sets the attribute the query asks about, for the same person (domain.asked)",
    )
    attribute_lead: float = Field(
        0.5,
        ge=0,
        description="when the query's meaning reads the attribute too, its best fact ends this far above the best candidate",
    )
    read_meaning: bool = Field(
        True,
        description="read the attribute an English query asks about from its embedding too (domain.asked)",
    )
    meaning_threshold: float = Field(
        0.6,
        ge=0,
        le=1,
        description="least cosine with an attribute's plain questions for its meaning to count",
    )
    meaning_margin: float = Field(
        0.1, ge=0, le=1, description="lead the nearest attribute needs over the next, in cosine"
    )
    reply_weight: float = Field(
        0.15, ge=0, description="share of a matching question turn's score the next speaker's reply inherits"
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
    length_min_events: int = Field(
        10, ge=1, description="fewer events in the pool: no length prior (z of a handful of lengths is noise)"
    )
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

    @property
    def episode_gap(self) -> timedelta:
        return timedelta(minutes=self.episode_gap_minutes)


def zscores(values: np.ndarray, min_spread: float) -> np.ndarray:
    """Standard scores, dividing by at least ``min_spread`` (tiny pools are not stretched).

    The mean and standard deviation are numpy's ``mean`` and ``std`` written as the reductions
    those run (the same sums in the same order, so the same floats) without their Python
    layers, and the deviations from the mean are taken once: ~3x faster on a pool of 300."""
    count = len(values)
    centred = values - np.add.reduce(values) / count
    spread = float(np.sqrt(np.add.reduce(centred * centred) / count))
    scores: np.ndarray = centred / max(spread, min_spread)
    return scores


def named_in(name: str, query: str) -> bool:
    if name.isascii() and query.isascii() and name.lower() not in query.lower():
        return False  # all ASCII: a case-blind match is a case-blind substring (most speakers)
    return re.search(rf"\b{re.escape(name)}\b", query, re.IGNORECASE) is not None


@dataclass(frozen=True, slots=True)
class Episodes:
    """The pool's events grouped into episodes: events of one owner whose ``occurred_at`` lie
    within the gap of the previous one, in time order (then write order)."""

    order: np.ndarray  # the events' pool indices, episode by episode, each in time order
    starts: np.ndarray  # per entry of ``order``: does a new episode start there?
    # per entry of ``order``: is the entry before (after) it in its episode? Either: ``near``.
    # Both the rerank and calibration read a neighbour's value, so these are worked out once.
    before: np.ndarray
    after: np.ndarray
    near: np.ndarray

    @classmethod
    def of(cls, order: np.ndarray, starts: np.ndarray) -> Episodes:
        count = len(order)
        before = np.zeros(count, dtype=bool)
        before[1:] = ~starts[1:]
        after = np.zeros(count, dtype=bool)
        after[:-1] = ~starts[1:]
        return cls(order, starts, before, after, before | after)

    @property
    def sizes(self) -> np.ndarray:
        """Per entry of ``order``, how many events its episode holds."""
        group = np.cumsum(self.starts) - 1
        return np.bincount(group)[group] if len(group) else group

    def neighbour_best(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per entry of ``order``: the best of ``values`` of the events next to it in its
        episode, and whether it has such a neighbour (``near``: not to be written to)."""
        ordered = values[self.order]
        count = len(ordered)
        previous = np.empty(count)  # ``np.full``'s Python layer costs more than its two steps
        previous[:1] = -np.inf
        previous[1:] = np.where(self.before[1:], ordered[:-1], -np.inf)
        following = np.empty(count)
        following[-1:] = -np.inf
        following[:-1] = np.where(self.after[:-1], ordered[1:], -np.inf)
        return np.maximum(previous, following), self.near

    def groups(self) -> list[list[int]]:
        """The episodes as lists of pool indices."""
        bounds = [*self.starts.nonzero()[0], len(self.order)]
        return [[int(i) for i in self.order[a:b]] for a, b in itertools.pairwise(bounds)]


def episodes(pool: Pool, gap: timedelta) -> Episodes:
    """``_episodes``, worked out once per pool (both the rerank and calibration read them)."""
    key = ("episodes", gap)
    found: Episodes | None = pool.derived.get(key)
    if found is None:
        found = pool.derived[key] = _episodes(pool, gap)
    return found


def _episodes(pool: Pool, gap: timedelta) -> Episodes:
    events = ((pool.kind == EPISODIC) & (pool.occurred != NO_TIME)).nonzero()[0]
    # nearly every pool is one owner's (a list of one name: counted in C): the owner neither
    # orders nor splits, and a pool of dated events (a chat) is sorted without a gather
    same = not pool.owners or pool.owners.count(pool.owners[0]) == len(pool.owners)
    owners = np.zeros(0, dtype=np.int64) if same else _owner_codes(pool.owners, events)
    one_owner = same or not owners.any()
    if one_owner and len(events) == len(pool):
        order = np.lexsort((pool.created, pool.occurred))
    else:
        keys = (pool.created[events], pool.occurred[events])
        order = events[np.lexsort(keys if one_owner else (*keys, owners))]
    starts = np.ones(len(order), dtype=bool)
    if len(order) > 1:
        dates = pool.occurred[order]  # differences by slices: np.diff's Python layer costs ~5-25 us a call
        starts[1:] = (dates[1:] - dates[:-1]) > gap // MICROSECOND
        if not one_owner:
            owner_of = np.empty(len(pool), dtype=np.int64)
            owner_of[events] = owners
            owned = owner_of[order]
            starts[1:] |= owned[1:] != owned[:-1]
    return Episodes.of(order, starts)


def _owner_codes(owners: list[str], rows: np.ndarray) -> np.ndarray:
    """Per row, its owner's place among the rows' owners sorted (what ``np.unique`` numbers
    them by); the events of a pool are nearly always one user's, so that case is one set."""
    if len(rows) < 2 or len(set(owners)) == 1:  # the usual case: one owner's pool
        return np.zeros(len(rows), dtype=np.int64)
    mine = list(itemgetter(*rows.tolist())(owners))
    distinct = sorted(set(mine))
    if len(distinct) <= 1:
        return np.zeros(len(mine), dtype=np.int64)
    code = {owner: at for at, owner in enumerate(distinct)}
    return np.array([code[owner] for owner in mine], dtype=np.int64)


def fused_scores(pool: Pool, policy: ContextRerankPolicy) -> np.ndarray:
    """The fused score of every candidate (higher is better), before context."""
    dense = pool.cosine
    missing = np.isnan(dense)
    if missing.any():  # the least cosine there is (``fmin`` passes over NaN; all NaN: 0)
        floor = float(np.fmin.reduce(dense))
        dense = np.where(missing, 0.0 if math.isnan(floor) else floor, dense)
    bm25 = np.where(np.isnan(pool.bm25), 0.0, pool.bm25)  # np.nan_to_num's result, ~15x cheaper
    if np.isinf(bm25).any():  # ... for finite scores; nan_to_num also caps infinities
        bm25 = np.nan_to_num(pool.bm25, nan=0.0)
    score = zscores(dense, policy.dense_min_spread)
    if policy.dense_weight != 1.0:  # a product by 1.0 is the same floats
        score *= policy.dense_weight
    score += policy.bm25_weight * zscores(bm25, policy.bm25_min_spread)
    events = pool.kind == EPISODIC
    count = np.count_nonzero(events)
    if count >= policy.length_min_events and policy.length_weight:
        # Events only, among events: a chat turn of one word ("ok!") rarely answers, while a
        # fact or playbook was written to be short and complete (on facts, the prior put "Lena
        # prefers green tea to coffee" above "Lena is allergic to hazelnuts" for "which foods
        # should Lena avoid?"). Capped, so a long note gains at most length_weight × cap. Only
        # among enough events to have a typical length: among three full sentences the spread
        # floor made 22 words against 16 worth half a standard deviation of cosine.
        every = count == len(events)  # a chat's pool: no gather, no scatter
        words = pool.log_words if every else pool.log_words[events]
        z = _clipped(zscores(words, policy.length_min_spread), -policy.length_z_floor, policy.length_z_cap)
        if every:
            score += policy.length_weight * z
        else:
            score[events] += policy.length_weight * z
    return score


def _clipped(values: np.ndarray, low: float, high: float) -> np.ndarray:
    """``np.clip`` as its two ufuncs (its Python layer is ~5 us a call): the same values; with a
    cap of 0 a zero may keep another sign, which adding it to a score does not show."""
    clipped: np.ndarray = np.minimum(np.maximum(values, low), high)
    return clipped


def with_context(score: np.ndarray, pool: Pool, policy: ContextRerankPolicy) -> np.ndarray:
    """Neighbour smoothing within each episode, then the episode's own strength.

    With ``standalone_context``, facts, playbooks and catalog entries, and events with no other
    turn of their episode in the pool, answer on their own: they are their own neighbour and
    their own episode, so the context bonus events earn from a good conversation is not a
    bonus they can never have.
    """
    found = episodes(pool, policy.episode_gap)
    if policy.standalone_context:
        grouped = found.near  # in an episode of two or more: next to another of its events
        others = (pool.kind != EPISODIC).nonzero()[0]
        standalone = np.concatenate([others, found.order[~grouped]])
    else:
        grouped, standalone = np.ones(len(found.order), dtype=bool), np.zeros(0, dtype=np.int64)
    members = found.order[grouped]
    out = score.copy()
    best, has = found.neighbour_best(score)
    near = grouped & has
    out[found.order[near]] += policy.context_weight * best[near]
    out[standalone] += policy.context_weight * score[standalone]
    if policy.reply_weight and len(found.order) > 1:
        out += replies(score, pool, found, policy.reply_weight)
    if (len(members) or len(standalone)) and policy.episode_weight:
        starts = found.starts[grouped]
        unit_best = (  # each member its episode's best, by the episode's number among them
            np.maximum.reduceat(out[members], starts.nonzero()[0])[starts.cumsum() - 1]
            if len(members)
            else members
        )
        strength = np.concatenate([unit_best, out[standalone]])
        z = _clipped(zscores(strength, policy.fused_min_spread), -policy.episode_z_cap, policy.episode_z_cap)
        out[np.concatenate([members, standalone])] += policy.episode_weight * z
    return out


def replies(score: np.ndarray, pool: Pool, found: Episodes, weight: float) -> np.ndarray:
    """What each reply gains from the question it answers: an event right after another
    speaker's turn that asks something ("Anything you're excited for in the adoption?") gains
    ``weight`` × that turn's score, when it is above the pool's mean (a question that matches
    the query is answered in the next turn)."""
    order = found.order
    turn, previous = order[1:], order[:-1]  # each event after the first, and the one before it
    speakers = pool.speaker_codes  # the same speaker: the same code (``vocabulary.SPEAKERS``)
    same = (speakers[turn] == speakers[previous]) & (speakers[turn] != NO_SPEAKER)
    replying = ~found.starts[1:] & pool.asks[previous] & ~same
    gain = np.zeros(len(score))
    gain[turn[replying]] = weight * np.maximum(score[previous[replying]], 0.0)
    return gain


def with_attribute(score: np.ndarray, query: str, pool: Pool, policy: ContextRerankPolicy) -> np.ndarray:
    """The facts that set what ``query`` asks about gain ``attribute_weight``; on a sure reading
    (``domain.asked``), enough for the best of them to lead the pool by ``attribute_lead``."""
    question = asked(query, pool.meaning)
    # only a fact sets an attribute: a pool without one (a chat's) reads no memory for it
    if question is None or not (pool.kind == SEMANTIC).any():
        return score
    found = setting(question, pool.memories, (-score).argsort(kind="stable"))
    if not found:
        return score
    out = score.copy()
    out[found] += policy.attribute_weight
    sure = found if question.sure else [i for i in found if question.across(gist(pool.memories[i].text))]
    if sure:
        out[sure] = score[sure] + max(
            policy.attribute_weight, float(score.max() - score[sure].max()) + policy.attribute_lead
        )
    return out


def context_match(query: str, pool: Pool, policy: ContextRerankPolicy) -> np.ndarray:
    """One match in (0, 1] per candidate, in the pool's order; the best scores 1.0 (the
    attribute's meaning, if the engine read it, is ``pool.meaning``)."""
    if not len(pool):
        return np.zeros(0)
    score = with_context(fused_scores(pool, policy), pool, policy)
    if policy.speaker_weight:
        # the distinct speakers read from their codes: a list of ~300 names costs a pass over
        # the candidates' facts, most of them cache misses in a recall (~70 us)
        # (a set of the codes as Python ints: ``np.unique``'s Python layer and sort cost ~3x that)
        speakers = [
            SPEAKERS.name(code) for code in sorted(set(pool.speaker_codes.tolist())) if code != NO_SPEAKER
        ]
        named = [name for name in speakers if name and named_in(name, query)]
        if named:
            lifted = np.zeros(len(pool), dtype=bool)
            for name in named:
                lifted |= pool.speaker_codes == SPEAKERS.code(name)
            score[lifted] += policy.speaker_weight
    if policy.attribute_weight:
        score = with_attribute(score, query, pool, policy)
    matches: np.ndarray = np.exp((score - np.maximum.reduce(score)) / policy.relevance_temperature)
    return matches
