"""Calibrated relevance: how likely it is that a recalled memory bears on the query, in [0, 1].

The rank score (``domain.scoring``) is relative: the best candidate of any pool scores about
1.0, so it cannot say "nothing here is about that". Relevance is absolute. It is a logistic
model over signals that mean the same thing in every pool:

- ``cosine``: the dense similarity of query and memory (MiniLM: unrelated text sits near 0.1);
- ``coverage``: the share of the query's content words the memory contains, each weighted by
  its rarity among the candidates (so "my" or "birthday" shared by many memories counts less
  than "locker"); a word counts as contained in another form with the same Snowball stem
  ("camped" in "went camping": ``pool.coverage_stems``, worked out once per memory);
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
  asked about), a candidate from outside it ``r × window fit ^ period_miss_power`` (0.5: the
  rank multiplier puts the period's memories first, but a turn dated outside it often tells of
  it, "last month", "4 years ago", so whether it bears on the question at all is less sure);
- a fact that sets the attribute the query asks about, for the same person (``domain.asked``:
  "What's my husband called?" and "My husband is Daniel"), counts that as evidence the same
  way: ``1 − (1 − r)(1 − attribute_evidence / n)`` for each of the ``n`` such facts.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from . import vocabulary
from .context_rerank import episodes
from .lexical import cjk_words, detect_language, has_cjk, stem
from .pool import Pool
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

    bias: float = Field(-7.53, description="log-odds of a memory with cosine 0 and no query word")
    cosine: float = Field(7.03, description="log-odds per unit of the query's cosine with the memory")
    coverage: float = Field(3.73, description="log-odds of holding every (rarity-weighted) query word")
    context: float = Field(
        0.85, ge=0, le=1, description="share of a neighbouring turn's relevance an event inherits"
    )
    small_talk_factor: float = Field(0.1, ge=0, le=1, description="what a query asking for nothing keeps")
    unknown_cosine: float = Field(0.45, ge=0, le=1, description="assumed when the engine measured no cosine")
    time_evidence: float = Field(
        0.8, ge=0, le=1, description="relevance a named period lends the one memory that falls in it"
    )
    period_miss_power: float = Field(
        0.5,
        ge=0,
        le=1,
        description="a memory outside the period a query names keeps relevance × window fit to this power",
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


def coverages(words: list[str], pool: Pool, language: str = "en") -> np.ndarray:
    """Rarity-weighted share of ``words`` each candidate contains, as the word or by its stem in
    the query's ``language`` ("camped" in "went camping"); rarity is counted in the pool."""
    if not words or not len(pool):
        return np.zeros(len(pool))
    # Every query word is one run of letters or a CJK word (``tokens``), so each memory's
    # ``coverage_words`` answer whether it holds it, its ``coverage_stems`` whether it holds a
    # word with the same stem.
    held = _held(words, [stem(w, language) for w in words], pool.word_codes, len(pool))
    size = len(pool)
    # the counts as Python ints (iterating the array makes a numpy scalar of each)
    weight = [math.log(1 + size / (1 + c)) for c in np.add.reduce(held, axis=0, dtype=np.int64).tolist()]
    total = sum(weight)
    # word by word, so each sum adds in the query's order: a running sum along the words
    # (``np.add.accumulate``, what ``np.cumsum`` runs, adds in order, where a sum may pair them),
    # its last column the total; three array operations instead of three per word
    covered: np.ndarray = np.add.accumulate(np.where(held, np.array(weight), 0.0), axis=1)[:, -1]
    return covered / total


def _held(words: list[str], stems: list[str], flat: np.ndarray, rows: int) -> np.ndarray:
    """Per memory and query word: do the memory's words hold the word or its stem? ``flat``:
    the ``rows`` memories' codes joined in order (``Pool.word_codes``), each looked up in a
    table of the query's forms: one gather over every candidate's words, in C, where a set
    intersection per candidate costs ~0.5 us each."""
    forms = list(dict.fromkeys([*words, *stems]))
    column = {form: at for at, form in enumerate(forms)}
    present = np.zeros((rows, len(forms)), dtype=bool)  # memory → the query's forms it holds
    known = [(code, at) for at, form in enumerate(forms) if (code := vocabulary.WORDS.code(form))]  # not END
    if known:  # a form no memory holds is held by none of these
        known.sort()
        codes = np.array([code for code, _ in known])
        wanted = np.zeros(vocabulary.WORDS.size(), dtype=bool)  # every code in the pool is below the size
        wanted[codes] = True
        hits = wanted.take(flat).nonzero()[0]  # where in ``flat`` a query form is
        which = codes.searchsorted(flat[hits])  # the array's method: ``np.searchsorted``'s layer is Python
        ends = (flat == vocabulary.END).nonzero()[0]  # where each memory's codes end, in order
        present[ends.searchsorted(hits, side="right"), np.array([at for _, at in known])[which]] = True
    # a word is held where its own form or its stem is (a word and its stem may be one form)
    held: np.ndarray = present[:, [column[w] for w in words]] | present[:, [column[s] for s in stems]]
    return held


@dataclass(frozen=True, slots=True)
class PoolFeatures:
    """``Features`` of every candidate, as columns."""

    cosine: np.ndarray
    coverage: np.ndarray
    context: np.ndarray
    topicless: bool
    # sigmoid(bias + w_cos·cosine + w_cov·coverage), which ``calibrated`` reads too
    own: np.ndarray | None = None

    def row(self, i: int) -> Features:
        return Features(
            float(self.cosine[i]), float(self.coverage[i]), float(self.context[i]), self.topicless
        )


def features(
    query: str, pool: Pool, intent: TimeIntent, episode_gap: timedelta, model: CalibrationPolicy
) -> PoolFeatures:
    words = topic_words(query, intent)
    cover = coverages(words, pool, detect_language(query))
    cos = np.where(
        np.isnan(pool.relevance_cosine), model.unknown_cosine, np.maximum(pool.relevance_cosine, 0.0)
    )
    own = _sigmoids(model.bias + model.cosine * cos + model.coverage * cover)
    found = episodes(pool, episode_gap)
    best, has = found.neighbour_best(own)
    neighbour = np.zeros(len(pool))
    neighbour[found.order] = np.where(has, best, 0.0)
    return PoolFeatures(cos, cover, neighbour, not words, own)


def _own(cosine: float, coverage: float, model: CalibrationPolicy) -> float:
    return _sigmoid(model.bias + model.cosine * cosine + model.coverage * coverage)


def relevance(f: Features, model: CalibrationPolicy) -> float:
    if f.topicless:
        return model.small_talk_factor * _sigmoid(model.bias + model.cosine * f.cosine)
    return max(_own(f.cosine, f.coverage, model), model.context * f.context)


def calibrated(found: PoolFeatures, window: np.ndarray | None, model: CalibrationPolicy) -> np.ndarray:
    """One absolute relevance in [0, 1] per candidate, the period the query names included:
    ``window`` is each candidate's fit to that period (``multipliers.window_fits``), None if none."""
    if found.topicless:
        plain = _sigmoids(model.bias + model.cosine * found.cosine)
        base = model.small_talk_factor * plain
    else:
        own = found.own
        if own is None:
            own = _sigmoids(model.bias + model.cosine * found.cosine + model.coverage * found.coverage)
        base = np.maximum(own, model.context * found.context)
    if window is None:
        return base
    inside = int((window == 1.0).sum())
    evidence = model.time_evidence / max(inside, 1)  # one of n memories from that period
    own = plain if found.topicless else base
    return np.where(window < 1.0, base * window**model.period_miss_power, 1 - (1 - own) * (1 - evidence))


def _sigmoids(x: np.ndarray) -> np.ndarray:
    # exp(-x) is only kept where x > -500: elsewhere it is taken at -500, so nothing overflows
    # (the same values as without the bound, without the cost of an errstate around it); when
    # every x is above it (nearly always; NaN is not) the bound and the where() keep every value
    if np.minimum.reduce(x, initial=np.inf) > -500:
        plain: np.ndarray = 1.0 / (1.0 + np.exp(-x))
        return plain
    return np.where(x > -500, 1.0 / (1.0 + np.exp(-np.maximum(x, -500.0))), 0.0)


def with_attribute(relevance: np.ndarray, setting: Sequence[int], model: CalibrationPolicy) -> np.ndarray:
    """``relevance`` with the facts that set the attribute the question asks about (indices
    ``setting``, ``domain.asked``) counting that as evidence, as a named period counts: each of
    the ``n`` such facts gets ``1 − (1 − r)(1 − attribute_evidence / n)``."""
    out = np.array(relevance, dtype=np.float64)
    evidence = model.attribute_evidence / max(len(setting), 1)
    for i in setting:
        out[i] = 1 - (1 - out[i]) * (1 - evidence)
    return out


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x > -500 else 0.0
