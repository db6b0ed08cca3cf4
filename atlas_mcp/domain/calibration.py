"""Calibrated relevance: how likely it is that a recalled memory bears on the query, in [0, 1].

The rank score (``domain.scoring``) is relative: the best candidate of any pool scores about
1.0, so it cannot say "nothing here is about that". Relevance is absolute. It is a logistic
model over signals that mean the same thing in every pool:

- ``cosine``: the dense similarity of query and memory (MiniLM: unrelated text sits near 0.1);
- ``coverage``: the share of the query's content words the memory contains, each weighted by
  its rarity among the candidates (so "my" or "birthday" shared by many memories counts less
  than "locker");
- ``context``: for an event, the best of ``cosine + coverage`` among the events next to it in
  its episode (a question matches one turn, the answer sits in the next).

    relevance = sigmoid(bias + w_cos·cosine + w_cov·coverage + w_ctx·context)

The weights were fitted by logistic regression on (question, candidate) pairs labelled by
whether the candidate is one of the question's answers (``atlas-mcp eval calibrate``: the
LoCoMo development split and the mixed suite; docs/recall.md tells how and shows the
reliability table). Two rules sit on top, because the fitting data has too few such queries
to learn them:

- a query with no content words and no period ("hi", "thanks!") asks for nothing: its
  relevance is the model's with coverage and context at zero, times ``small_talk_factor``;
- a query that names a period ("last weekend") counts the period as evidence: a memory from
  that period gets ``1 − (1 − r)(1 − time_evidence)`` (either reason suffices), one from
  outside it ``r × window fit``.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from .model import Memory
from .query import FUNCTION_WORDS, lexical_query
from .relevance import episodes
from .scoring import RelevanceModel
from .when import TimeIntent, window_fit

_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)


@dataclass(frozen=True, slots=True)
class Features:
    """What relevance is computed from, kept so recall can explain it and calibration can refit."""

    cosine: float
    coverage: float
    context: float
    match: float  # the rank stage's score relative to the pool's best (1.0)
    topicless: bool


def tokens(text: str) -> list[str]:
    """Lower-case word forms with a plural ``s`` dropped: "birthdays" matches "birthday"."""
    out = []
    for word in _TOKEN.findall(text.lower()):
        if len(word) < 2:
            continue
        if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        out.append(word)
    return out


def topic_words(query: str, intent: TimeIntent) -> list[str]:
    """The query's content words, without its time phrases: what a memory must be about."""
    content = lexical_query(intent.without_phrases(query))
    return list(dict.fromkeys(w for w in tokens(content) if w not in FUNCTION_WORDS))


def coverages(words: list[str], memories: Sequence[Memory]) -> list[float]:
    """Rarity-weighted share of ``words`` each memory contains; rarity is counted in the pool."""
    if not words or not memories:
        return [0.0] * len(memories)
    bags = [set(tokens(m.search_text())) for m in memories]
    counts = Counter(w for bag in bags for w in words if w in bag)
    weight = {w: math.log(1 + len(bags) / (1 + counts[w])) for w in words}
    total = sum(weight.values())
    return [sum(weight[w] for w in words if w in bag) / total for bag in bags]


def features(
    query: str,
    memories: Sequence[Memory],
    cosines: Sequence[float | None],
    match: Sequence[float],
    intent: TimeIntent,
    episode_gap: timedelta,
) -> list[Features]:
    words = topic_words(query, intent)
    cover = coverages(words, memories)
    cos = [0.0 if c is None else max(c, 0.0) for c in cosines]
    own = [c + v for c, v in zip(cos, cover, strict=True)]
    context = [0.0] * len(memories)
    for group in episodes(memories, episode_gap):
        for position, i in enumerate(group):
            near = [own[group[p]] for p in (position - 1, position + 1) if 0 <= p < len(group)]
            context[i] = max(near, default=0.0)
    return [Features(cos[i], cover[i], context[i], match[i], not words) for i in range(len(memories))]


def relevance(f: Features, model: RelevanceModel) -> float:
    if f.topicless:
        return model.small_talk_factor * _sigmoid(model.bias + model.cosine * f.cosine)
    return _sigmoid(
        model.bias + model.cosine * f.cosine + model.coverage * f.coverage + model.context * f.context
        + model.match * f.match
    )


def calibrated(
    memories: Sequence[Memory], found: Sequence[Features], intent: TimeIntent, model: RelevanceModel
) -> list[float]:
    """One absolute relevance in [0, 1] per memory, the period the query names included."""
    out = []
    for memory, f in zip(memories, found, strict=True):
        r = relevance(f, model)
        if intent.window is not None:
            when = memory.occurred_at or memory.created_at
            fit = window_fit(when, intent.window, model.time_window_floor)
            if fit == 1.0:
                evidence = model.time_evidence_topicless if f.topicless else model.time_evidence
                r = 1 - (1 - (_sigmoid(model.bias + model.cosine * f.cosine) if f.topicless else r)) * (1 - evidence)
            else:
                r *= fit
        out.append(r)
    return out


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x > -500 else 0.0

