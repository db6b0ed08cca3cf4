"""Calibrated relevance: how likely it is that a recalled memory bears on the query, in [0, 1].

The rank score (``domain.scoring``) is relative: the best candidate of any pool scores about
1.0, so it cannot say "nothing here is about that". Relevance is absolute. It is a logistic
model over signals that mean the same thing in every pool:

- ``cosine``: the dense similarity of query and memory (MiniLM: unrelated text sits near 0.1);
- ``coverage``: the share of the query's content words the memory contains, each weighted by
  its rarity among the candidates (so "my" or "birthday" shared by many memories counts less
  than "locker");
- ``context``: for an event, the own relevance of the events next to it in its episode (a
  question matches one turn, the answer often sits in the next).

    own       = sigmoid(bias + w_cos·cosine + w_cov·coverage)
    relevance = max(own, w_ctx · best neighbour's own)

``bias``, ``w_cos`` and ``w_cov`` are fitted by logistic regression on (question, candidate)
pairs labelled by whether the candidate is one of the question's answers (``atlas-mcp eval
calibrate``: the LoCoMo development split and the mixed suite, weighted equally);
``w_ctx`` and the default floor are read off the floor sweep the same command prints
(docs/quality.md has both tables). Two rules sit on top, because the fitting data has too few
such queries to learn them:

- a candidate the engine measured no cosine for (Elasticsearch returns fused ranks only) is
  given ``unknown_cosine``, a typical answer's, so its relevance rests on its word coverage;
- a query with no content words and no period ("hi", "thanks!") asks for nothing: its
  relevance is the model's with coverage and context at zero, times ``small_talk_factor``;
- a query that names a period ("last weekend") counts the period as evidence: each of the
  ``n`` candidates from that period gets ``1 − (1 − r)(1 − time_evidence / n)`` (either
  reason suffices; the more memories share the period, the less each is likely the one
  asked about), a candidate from outside it ``r × window fit``;
- a fact that sets the attribute the query asks about, for the same person (``domain.asked``:
  "What's my husband called?" and "My husband is Daniel"), counts that as evidence the same
  way: ``1 − (1 − r)(1 − attribute_evidence / n)`` for each of the ``n`` such facts.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from itertools import accumulate

from pydantic import BaseModel, ConfigDict, Field

from .context_rerank import episodes
from .lexical import cjk_words, detect_language, has_cjk
from .model import Memory
from .query import lexical_query
from .stopwords import CJK_QUESTION_CHARACTERS, CJK_STOP_CHARACTERS, CJK_STOP_WORDS, STOP_WORDS
from .when import TimeIntent

_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)
_CJK_GRAMMAR = CJK_STOP_CHARACTERS | CJK_QUESTION_CHARACTERS
# Words that make a turn of small talk, not a question: a query made only of these and function
# words ("hi", "ok thanks!", "good morning") asks memory for nothing.
SMALL_TALK = frozenset(
    (
        "hi",
        "hello",
        "hey",
        "hiya",
        "yo",
        "thanks",
        "thank",
        "thx",
        "ok",
        "okay",
        "lol",
        "haha",
        "hah",
        "yes",
        "yeah",
        "yep",
        "no",
        "nope",
        "please",
        "cool",
        "nice",
        "great",
        "bye",
        "goodbye",
        "good",
        "morning",
        "evening",
        "night",
        "afternoon",
        "sure",
        "hmm",
        "hm",
        "mhm",
        "sounds",
        "fine",
        "alright",
        "right",
        "wow",
        "oh",
        "ah",
        "cheers",
        "welcome",
        "awesome",
    )
)


class CalibrationPolicy(BaseModel):
    """``[scoring.calibration]``: the fitted weights (``atlas-mcp eval calibrate`` prints new
    ones), the rules on top of them, and the floor recall reads them against."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    bias: float = Field(-7.42, description="log-odds of a memory with cosine 0 and no query word")
    cosine: float = Field(7.21, description="log-odds per unit of the query's cosine with the memory")
    coverage: float = Field(3.64, description="log-odds of holding every (rarity-weighted) query word")
    context: float = Field(
        0.85, ge=0, le=1, description="share of a neighbouring turn's relevance an event inherits"
    )
    small_talk_factor: float = Field(0.1, ge=0, le=1, description="what a query asking for nothing keeps")
    unknown_cosine: float = Field(0.45, ge=0, le=1, description="assumed when the engine measured no cosine")
    time_evidence: float = Field(
        0.8, ge=0, le=1, description="relevance a named period lends the one memory that falls in it"
    )
    attribute_evidence: float = Field(
        0.3,
        ge=0,
        le=1,
        description="relevance that setting the attribute a question asks about lends the one fact that sets it (domain.asked)",
    )
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


FITTED = ("bias", "cosine", "coverage")  # what ``atlas-mcp eval calibrate`` refits


@dataclass(frozen=True, slots=True)
class Features:
    """What relevance is computed from, kept so recall can explain it and calibration can refit."""

    cosine: float
    coverage: float
    context: float  # the best own relevance among the event's neighbours in its episode
    topicless: bool


def tokens(text: str) -> list[str]:
    """Lower-case word forms with a plural ``s`` dropped: "birthdays" matches "birthday".

    Chinese and Japanese mark no word ends: a token holding them gives the bigrams of its Han
    and katakana runs (``lexical.cjk_words``), so "レナの車は何" asks for "レナ" and "車", not
    for the whole phrase, which no memory holds."""
    out: list[str] = []
    for token in _TOKEN.findall(text.lower()):
        for word in cjk_words(token) if has_cjk(token) else (token,):
            if has_cjk(word):
                out.append(word)
            elif len(word) >= 2:
                out.append(_normal(word))
    return out


def _normal(word: str) -> str:
    """A lower-case token as ``tokens`` keeps it: a plural ``s`` dropped."""
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def _bags(texts: Sequence[str], words: Sequence[str]) -> list[set[str]]:
    """Per text, the ``words`` it holds (``_words_in``), without tokenising the texts: each
    word is looked for with ``str.find`` in all the texts joined and lower-cased (C speed,
    where a regex scan cost ~3 ms a recall), and each place it occurs is kept if the whole
    token there is the word or its plural, as ``tokens`` reads it; a Chinese or Japanese word
    counts wherever it occurs. A newline between texts keeps each text's word boundaries."""
    bags: list[set[str]] = [set() for _ in texts]
    if not words or not texts:
        return bags
    joined = "\n".join(texts)
    lowered = joined.lower()
    if len(lowered) != len(joined):  # a letter whose lower case is longer ("İ"): offsets move
        return [_words_in(text, words) for text in texts]
    starts = list(accumulate((len(t) + 1 for t in texts[:-1]), initial=0))
    for word in set(words):
        anywhere = has_cjk(word)
        at = lowered.find(word)
        while at != -1:
            if anywhere or _is_token(lowered, at, word):
                bags[bisect_right(starts, at) - 1].add(word)
            at = lowered.find(word, at + 1)
    return bags


def _words_in(text: str, words: Iterable[str]) -> set[str]:
    """The ``words`` ``text`` holds: a word as one of its ``tokens``, a Chinese or Japanese
    word (a bigram or a character) anywhere in it."""
    lowered = text.lower()
    found = set(tokens(text))
    return {w for w in words if (w in lowered if has_cjk(w) else w in found)}


def _is_token(text: str, at: int, word: str) -> bool:
    """Is the token that starts at ``at`` (if one does) ``word`` once ``tokens`` has read it?"""
    if at > 0 and _continues(text[at - 1]):
        return False
    end = at + len(word)
    if end < len(text) and _continues(text[end]):  # the plural, or a longer word
        end += 1
        if end < len(text) and _continues(text[end]):
            return False
    return end - at >= 2 and _normal(text[at:end]) == word  # text[at:end] is one lower-case token


def _continues(character: str) -> bool:
    """Does ``character`` continue a word? (Chinese and Japanese ones start their own.)"""
    # Every Chinese or Japanese character sits at U+3040 or above: most need no regex.
    return character.isalnum() and (character < "\u3040" or not has_cjk(character))


def topic_words(query: str, intent: TimeIntent) -> list[str]:
    """The query's content words, without its time phrases: what a memory must be about."""
    content = lexical_query(intent.without_phrases(query))
    function_words = STOP_WORDS["en"] | STOP_WORDS.get(detect_language(query), frozenset())
    words = [w for w in tokens(content) if w not in function_words and not _cjk_grammar(w)]
    return [] if all(w in SMALL_TALK for w in words) else list(dict.fromkeys(words))


def _cjk_grammar(word: str) -> bool:
    """A Chinese or Japanese function word (``CJK_STOP_WORDS``), or a word holding a grammar or
    question character (了, 是, 何, 谁): a bigram across a particle ("好了", "我上") is rarely a
    word, and one that is names no topic."""
    return has_cjk(word) and (word in CJK_STOP_WORDS or any(c in _CJK_GRAMMAR for c in word))


def coverages(words: list[str], memories: Sequence[Memory]) -> list[float]:
    """Rarity-weighted share of ``words`` each memory contains; rarity is counted in the pool."""
    if not words or not memories:
        return [0.0] * len(memories)
    bags = _bags([m.search_text() for m in memories], words)
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
    cover = coverages(words, memories)
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
            out.append(r * fit)
            continue
        own = _sigmoid(model.bias + model.cosine * f.cosine) if f.topicless else r
        out.append(1 - (1 - own) * (1 - evidence))
    return out


def with_attribute(relevance: list[float], setting: Sequence[int], model: CalibrationPolicy) -> list[float]:
    """``relevance`` with the facts that set the attribute the question asks about (indices
    ``setting``, ``domain.asked``) counting that as evidence, as a named period counts: each of
    the ``n`` such facts gets ``1 − (1 − r)(1 − attribute_evidence / n)``."""
    out = list(relevance)
    evidence = model.attribute_evidence / max(len(setting), 1)
    for i in setting:
        out[i] = 1 - (1 - out[i]) * (1 - evidence)
    return out


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x > -500 else 0.0
