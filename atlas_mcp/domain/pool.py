"""A recall's candidate pool as columns: the engine's evidence and each memory's facts.

Ranking reads the same few numbers of every candidate: its branch ranks and scores, and
facts of the memory that no query changes (its type, dates, length in words, speaker, the
words coverage looks for). Kept as arrays, the whole pool is ranked by vector operations; a
Python object per candidate is made only for the few that are returned.

The facts of a memory (``RowFacts``) are computed once per memory: an engine keeps them next
to its rows (the embedded engine's index), so a recall only gathers them. ``Pool.of`` builds
a pool from ``Candidate`` objects (the Elasticsearch engine's, tests'), computing the facts.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from operator import attrgetter, itemgetter
from typing import Any, NamedTuple, overload

import numpy as np

from .fact_columns import (
    FactColumn,
    microseconds,
    number_columns,
    packed,
    use_columns,
    use_record,
)
from .fusion import Candidate
from .lexical import CJK_CHARACTERS, has_cjk, stemmed_forms, word_count
from .model import USAGE_TYPES, Memory, MemoryType
from .openings import Opening, inner_names, opening, speaker, turn_head
from .vocabulary import encoded, joined, speaker_code

KIND_CODES: dict[MemoryType, int] = {t: code for code, t in enumerate(MemoryType)}
EPISODIC, SEMANTIC, PROCEDURAL, CATALOG = (
    KIND_CODES[t]
    for t in (MemoryType.EPISODIC, MemoryType.SEMANTIC, MemoryType.PROCEDURAL, MemoryType.CATALOG)
)
USAGE_CODES = [KIND_CODES[t] for t in USAGE_TYPES]
_TRACKS_USAGE = np.isin(np.arange(len(KIND_CODES)), USAGE_CODES)  # per kind code: ``tracks_usage``
_CJK_CHAR = re.compile(rf"[{CJK_CHARACTERS}]")


class RowFacts(NamedTuple):
    """What ranking reads of one memory that no query and no use changes; its numbers also
    as one packed record (``numbers``), which a pool reads as arrays (``Pool.from_columns``)."""

    # What a recall reads of every candidate's facts come first: a tuple's first items share
    # the cache line of its header, which taking the tuple in hand has touched already.
    numbers: bytes  # the number facts below as one record (``fact_columns``): what a pool reads
    codes: bytes  # ``words`` as ``vocabulary`` codes (packed int32), in the set's order
    kind: int  # ``KIND_CODES``
    occurred: int  # microseconds, or NO_TIME
    created: int
    log_words: float  # log(1 + words): the length prior
    speaker: str | None  # "Name" of a transcript-style event ("Name: what they said")
    # what a query word, or its stem, must be to count as covered (``coverage_words``,
    # ``coverage_stems``)
    words: frozenset[str]
    head: str | None  # an event's text before its first ": " (``openings.turn_head``)
    opening: Opening  # how the text opens: a turn, or a name as subject or owner
    asks: bool  # the text asks something (a "?"): the next turn may answer it
    speaker_code: int  # ``speaker`` as a ``vocabulary.SPEAKERS`` code, ``NO_SPEAKER`` for None
    inner: frozenset[str]  # the name-shaped words written inside the text (``openings.inner_names``)
    expires: int  # ``expires_at`` in microseconds, or NO_TIME
    head_code: int  # ``head`` as a ``vocabulary.SPEAKERS`` code, ``NO_SPEAKER`` for None


def row_facts(memory: Memory, words: frozenset[str] | None = None) -> RowFacts:
    """``memory``'s facts; ``words``: its ``coverage`` if already known (an engine that
    stored it with the row), else worked out here (most of the cost: the language vote and
    the stems)."""
    text = memory.text
    event = memory.memory_type is MemoryType.EPISODIC
    words = coverage(memory.search_text()) if words is None else words
    said_by = speaker(text) if event else None
    head = turn_head(memory)
    kind, occurred, created = (
        KIND_CODES[memory.memory_type],
        microseconds(memory.occurred_at),
        microseconds(memory.created_at),
    )
    log_words = math.log1p(word_count(text))  # CJK-fair
    asks, expires = "?" in text or "？" in text, microseconds(memory.expires_at)
    said_code, head_code = speaker_code(said_by), speaker_code(head)
    return RowFacts(
        kind=kind,
        occurred=occurred,
        created=created,
        log_words=log_words,
        speaker=said_by,
        words=words,
        head=head,
        opening=opening(text),
        asks=asks,
        codes=encoded(words),
        speaker_code=said_code,
        inner=inner_names(text),
        expires=expires,
        head_code=head_code,
        numbers=packed(kind, occurred, created, log_words, said_code, expires, head_code, asks),
    )


def coverage(search_text: str) -> frozenset[str]:
    """``RowFacts.words`` of a memory whose ``search_text()`` is ``search_text``: what a query
    word, or its stem, must be to count as covered. ``COVERAGE_RULES`` names these rules."""
    return coverage_words(search_text) | coverage_stems(search_text)


# The version of the rules ``coverage`` follows. An engine that stores each row's coverage
# keeps this name with it and reads back only values made under the same rules: a change to
# ``coverage_words`` or ``lexical.stemmed_forms`` that changes any row's words must change it.
COVERAGE_RULES = "c1"


def coverage_words(text: str) -> frozenset[str]:
    """The words coverage finds in ``text``: each run of letters and digits of the lower-cased
    text (Chinese and Japanese characters end a run), with a plural ``s`` dropped as a query's
    words are (``calibration.tokens``), and every Chinese or Japanese character and pair of
    adjacent ones, since a query's CJK words (one or two characters) count wherever they occur."""
    lowered = text.lower()
    cjk = has_cjk(lowered)
    # Without Chinese or Japanese characters a run is any run of letters and digits, which a
    # plain character class finds ~3x faster than WORD_RUN's look-ahead per character; each
    # distinct run is normalised once (``_normal``, inlined: this is most of a memory's facts).
    runs = WORD_RUN.findall(lowered) if cjk else _PLAIN_RUN.findall(lowered)
    words = {
        run[:-1] if len(run) > 3 and run[-1] == "s" and run[-2] != "s" else run
        for run in set(runs)
        if len(run) >= 2
    }
    if cjk:
        for at, character in enumerate(lowered):
            if _CJK_CHAR.match(character):
                words.add(character)
                if at + 1 < len(lowered) and _CJK_CHAR.match(lowered[at + 1]):
                    words.add(lowered[at : at + 2])
    return frozenset(words)


def coverage_stems(text: str) -> frozenset[str]:
    """The stems of ``text``'s words that stemming changes (``lexical.stemmed_forms``): a query
    word whose stem is among them is covered too ("camped" by "camping", "research" by
    "Researching")."""
    return stemmed_forms(text)


# A run of characters that continue a word: letters and digits, but not Chinese or Japanese
# ones (each of those starts its own word).
WORD_RUN = re.compile(rf"(?:(?![{CJK_CHARACTERS}])[^\W_])+")
_PLAIN_RUN = re.compile(r"[^\W_]{2,}")  # WORD_RUN's runs of two or more, in text without CJK


def _normal(word: str) -> str:
    """A plural ``s`` dropped, as ``calibration.tokens`` reads a word."""
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


# An engine's cosine of a text (``plan.query`` reworded) with the rows of ``handles``, on the
# scale of the pool's cosines: per handle, the cosine (NaN: none) and whether there is one.
Measure = Callable[[str, np.ndarray], tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True, slots=True)
class Pool(Sequence[Candidate]):
    """A recall's candidates, best fused first, one entry per column each.

    Evidence columns hold NaN (scores) or 0 (ranks) where a branch did not find a memory.
    ``memories`` are the engine's (cached) objects; ranking reads only what changes with use
    from them (last use, use count, track record), and only of the memories that have it.
    """

    memories: Sequence[Memory]
    owners: list[str]  # user_id, "" for the catalog: events of one owner form episodes
    rrf: np.ndarray
    bm25_rank: np.ndarray
    dense_rank: np.ndarray
    bm25: np.ndarray
    cosine: np.ndarray
    relevance_cosine: np.ndarray  # the cosine calibration reads (``Candidate.relevance_cosine``)
    rerank: np.ndarray  # an engine reranker's match
    pending: np.ndarray  # no vector yet: only its words could find it
    asks: np.ndarray  # ``RowFacts.asks``
    kind: np.ndarray
    occurred: np.ndarray
    created: np.ndarray
    log_words: np.ndarray
    speaker_codes: np.ndarray  # ``RowFacts.speaker_code``
    expires: np.ndarray  # ``RowFacts.expires``
    head_codes: np.ndarray  # ``RowFacts.head_code``
    word_codes: np.ndarray  # every candidate's ``RowFacts.codes`` joined, in order (int32)
    # each candidate's facts, whose other fields are read as lists where asked (``speakers``...)
    facts: Sequence[RowFacts]
    meaning: str | None = None  # the attribute the query's meaning asks about (``domain.asked``)
    # The engine's handle of each candidate's row and its measure of another wording against
    # the rows of some handles, in the snapshot the pool was read from (``domain.hearing``).
    handles: np.ndarray | None = None
    measure: Measure | None = field(default=None, compare=False, repr=False)
    uses: Sequence[bytes] | None = None  # each memory's ``fact_columns.use_record``, if kept with it
    # What ranking derives from these columns and reads twice (the episodes: the context rerank
    # and calibration), kept for this pool only; ``replace`` starts a new pool without it.
    derived: dict[Hashable, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.memories)

    @overload
    def __getitem__(self, i: int) -> Candidate: ...
    @overload
    def __getitem__(self, i: slice) -> list[Candidate]: ...
    def __getitem__(self, i: int | slice) -> Candidate | list[Candidate]:
        """The pool read as the engine's candidate list (one object per item asked for)."""
        if isinstance(i, slice):
            return [self.candidate(j) for j in range(len(self))[i]]
        return self.candidate(range(len(self))[i])

    def __iter__(self) -> Iterator[Candidate]:
        return (self.candidate(i) for i in range(len(self)))

    @classmethod
    def of(cls, candidates: Sequence[Candidate], facts: Sequence[RowFacts] | None = None) -> Pool:
        """A pool of ``candidates`` (their memories' facts computed unless given)."""
        memories = [c.memory for c in candidates]
        facts = [row_facts(m) for m in memories] if facts is None else facts
        evidence = np.array(
            [
                (
                    _nan(c.rrf_score),
                    c.bm25_rank or 0,
                    c.dense_rank or 0,
                    _nan(c.bm25_score),
                    _nan(c.dense_similarity),
                    _nan(c.relevance_cosine),
                    _nan(c.rerank_score),
                    c.embedding_pending,
                )
                for c in candidates
            ],
            dtype=np.float64,
        ).reshape(len(candidates), 8)
        return cls.from_columns(
            memories,
            [m.user_id or "" for m in memories],
            rrf=evidence[:, 0],
            bm25_rank=evidence[:, 1].astype(np.int64),
            dense_rank=evidence[:, 2].astype(np.int64),
            bm25=evidence[:, 3],
            cosine=evidence[:, 4],
            relevance_cosine=evidence[:, 5],
            rerank=evidence[:, 6],
            pending=evidence[:, 7].astype(bool),
            facts=facts,
        )

    @classmethod
    def from_columns(
        cls,
        memories: Sequence[Memory],
        owners: list[str],
        *,
        facts: Sequence[RowFacts],
        measure: Measure | None = None,
        uses: Sequence[bytes] | None = None,
        **evidence: np.ndarray,
    ) -> Pool:
        """A pool of evidence columns and one ``RowFacts`` per candidate."""
        numbers = number_columns(list(map(_NUMBERS, facts)))  # one array read of every record
        # the codes joined now, while the facts are at hand (calibration reads every one)
        word_codes = joined(list(map(_CODES, facts)))
        return cls(
            memories=memories,
            owners=owners,
            kind=numbers["kind"],
            occurred=numbers["occurred"],
            created=numbers["created"],
            log_words=numbers["log_words"],
            asks=numbers["asks"],
            speaker_codes=numbers["speaker_code"],
            expires=numbers["expires"],
            head_codes=numbers["head_code"],
            word_codes=word_codes,
            facts=facts,
            meaning=None,
            measure=measure,
            uses=uses,
            **evidence,
        )

    # the ids and the other facts, each read as a list when first asked (``fact_columns``): a
    # recall reads most of them for a few candidates, if at all
    ids = FactColumn[str]("id", of_memory=True)
    speakers = FactColumn[str | None]("speaker")
    words = FactColumn[frozenset[str]]("words")
    heads = FactColumn[str | None]("head")
    openings = FactColumn[Opening]("opening")
    codes = FactColumn[bytes]("codes")
    inner = FactColumn[frozenset[str]]("inner")

    def subset(self, rows: np.ndarray) -> Pool:
        """The candidates at ``rows`` (indices, in the order given), every column alike."""
        picked = rows.tolist()
        changes: dict[str, Any] = {
            name: value[rows]
            for name in self.__dataclass_fields__
            if isinstance(value := getattr(self, name), np.ndarray) and name != "word_codes"
        }
        for name in ("memories", "owners", "facts", "uses"):
            if (column := getattr(self, name)) is not None:
                changes[name] = [column[i] for i in picked]
        changes["word_codes"] = joined([facts.codes for facts in changes["facts"]])
        return replace(self, **changes)

    def candidate(self, i: int) -> Candidate:
        """The ``i``-th candidate as one object (for what a recall returns)."""
        cosine, heard = float(self.cosine[i]), float(self.relevance_cosine[i])
        stretched = not (cosine == heard or (math.isnan(cosine) and math.isnan(heard)))  # ``stretched``
        return Candidate(
            memory=self.memories[i],
            rrf_score=_none(self.rrf[i]),
            bm25_rank=int(self.bm25_rank[i]) or None,
            dense_rank=int(self.dense_rank[i]) or None,
            bm25_score=_none(self.bm25[i]),
            dense_similarity=_none(self.cosine[i]),
            relevance_similarity=_none(heard) if stretched else None,
            rerank_score=_none(self.rerank[i]),
            embedding_pending=bool(self.pending[i]),
        )

    @property
    def tracks_usage(self) -> np.ndarray:
        """Per candidate: does recall count its uses (``Memory.tracks_usage``)?"""
        usage: np.ndarray = _TRACKS_USAGE[self.kind]  # a gather: ``np.isin`` costs ~15 us a call
        return usage

    @property
    def stretched(self) -> np.ndarray:
        """Per candidate: does calibration read another cosine than its own?"""
        return ~self.unstretched

    @property
    def unstretched(self) -> np.ndarray:
        """Per candidate: does calibration read its own cosine (``stretched``'s complement)?"""
        same: np.ndarray = (self.cosine == self.relevance_cosine) | (
            np.isnan(self.cosine) & np.isnan(self.relevance_cosine)
        )
        return same

    def used(self) -> tuple[np.ndarray, np.ndarray]:
        """Per candidate, its use count and last use (microseconds, NO_TIME), of the memories
        that track use: what changes on every recall is never cached with the facts."""
        rows = self.tracks_usage.nonzero()[0]
        if not len(rows):
            return use_columns([], rows, len(self))
        if self.uses is not None:  # the engine's records, gathered in C
            picked = itemgetter(*rows.tolist())(self.uses)
            return use_columns([picked] if len(rows) == 1 else picked, rows, len(self))
        tracked = [self.memories[i] for i in rows.tolist()]
        return use_columns([use_record(m.use_count, m.last_used_at) for m in tracked], rows, len(self))

    def track_records(self) -> tuple[np.ndarray, np.ndarray]:
        """Per candidate, its playbook successes and failures (0 for other memories)."""
        wins = np.zeros(len(self), dtype=np.int64)
        losses = np.zeros(len(self), dtype=np.int64)
        for i in (self.kind == PROCEDURAL).nonzero()[0].tolist():  # a few a recall
            memory = self.memories[i]
            wins[i], losses[i] = memory.success_count, memory.failure_count
        return wins, losses


_NUMBERS = attrgetter("numbers")
_CODES = attrgetter("codes")


def _nan(value: float | None) -> float:
    return math.nan if value is None else value


def _none(value: float) -> float | None:
    return None if math.isnan(value) else float(value)


def facts_of(memories: Iterable[Memory]) -> list[RowFacts]:
    return [row_facts(m) for m in memories]
