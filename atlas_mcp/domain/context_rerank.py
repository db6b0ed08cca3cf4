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
- *episode*: an event gains ``episode_weight`` × z(best score in its episode);
- *length*: ``length_weight`` × z(log words) of events among events, capped, so short chit-chat
  turns rank lower but a long note cannot win on length;
- *speaker*: ``speaker_weight`` when the query names the event's speaker ("Sarah: …");
- *attribute*: ``attribute_weight`` when a fact sets what the query asks about, for the same
  person (``domain.asked``: "what's my husband called?" and "My husband is Daniel").

The result is ``exp((s − s_best) / relevance_temperature)``: 1.0 for the best candidate and a
gap of ``T·ln(1/m)`` in fused score for a multiplier ``m`` (decay, catalog prior) to overturn.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from .asked import setting_what_is_asked
from .lexical import word_count
from .model import Memory, MemoryType


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

    @property
    def episode_gap(self) -> timedelta:
        return timedelta(minutes=self.episode_gap_minutes)


_SPEAKER = re.compile(r"^([A-Z][\w'.-]*(?: [A-Z][\w'.-]*){0,2}):\s")


@dataclass(frozen=True, slots=True)
class Signals:
    """What retrieval knows about one candidate; ``None`` = not in that branch's window."""

    memory: Memory
    dense: float | None
    bm25: float | None


def zscores(values: np.ndarray, min_spread: float) -> np.ndarray:
    """Standard scores, dividing by at least ``min_spread`` (tiny pools are not stretched)."""
    scores: np.ndarray = (values - values.mean()) / max(float(values.std()), min_spread)
    return scores


def speaker(text: str) -> str | None:
    """The speaker of a transcript-style memory ("Name: what they said"), if it has one."""
    match = _SPEAKER.match(text)
    return match.group(1) if match else None


def named_in(name: str, query: str) -> bool:
    return re.search(rf"\b{re.escape(name)}\b", query, re.IGNORECASE) is not None


def episodes(memories: Sequence[Memory], gap: timedelta) -> list[list[int]]:
    """Indices of the events among ``memories``, grouped into episodes, each in time order."""
    when = {
        i: m.occurred_at
        for i, m in enumerate(memories)
        if m.memory_type is MemoryType.EPISODIC and m.occurred_at
    }
    events = sorted(when, key=lambda i: (memories[i].user_id or "", when[i], memories[i].created_at))
    groups: list[list[int]] = []
    for i in events:
        last = groups[-1][-1] if groups else None
        if last is None or memories[last].user_id != memories[i].user_id or when[i] - when[last] > gap:
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
    if events.any() and policy.length_weight:
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
    score: np.ndarray, groups: list[list[int]], policy: ContextRerankPolicy, standalone: Sequence[int] = ()
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
    score = with_context(score, groups, policy, standalone)
    if policy.speaker_weight:
        for i, memory in enumerate(memories):
            name = speaker(memory.text) if memory.memory_type is MemoryType.EPISODIC else None
            if name and named_in(name, query):
                score[i] += policy.speaker_weight
    if policy.attribute_weight:
        for i in setting_what_is_asked(query, memories, np.argsort(-score, kind="stable")):
            score[i] += policy.attribute_weight
    return [float(x) for x in np.exp((score - score.max()) / policy.relevance_temperature)]
