"""Reciprocal rank fusion as a pure function over ranked id lists, and the candidates it yields.

The embedded engine fuses its BM25 and dense branches with this; the Elasticsearch engine
asks the cluster's ``rrf`` retriever for the same arithmetic with the same constants.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .model import Memory


@dataclass(frozen=True, slots=True)
class Fused:
    id: str
    score: float
    ranks: tuple[int | None, ...]  # 1-based rank in each input list, None if absent


@dataclass(frozen=True, slots=True)
class Candidate:
    """A fused retrieval candidate, with the signals that put it there."""

    memory: Memory
    rrf_score: float | None  # None when the engine reranked and reports no fusion score
    bm25_rank: int | None = None
    dense_rank: int | None = None
    bm25_score: float | None = None
    dense_similarity: float | None = None
    # The cosine as relevance calibration reads it (``similarity.for_relevance``);
    # None: ``dense_similarity`` as it is.
    relevance_similarity: float | None = None
    rerank_score: float | None = None
    engine_score: float | None = None  # the engine's own score for it (a reranker's raw score)
    # No vector yet (its embedding is still pending): only the lexical branch could find it.
    embedding_pending: bool = False

    @property
    def relevance_cosine(self) -> float | None:
        """The cosine relevance calibration reads."""
        return self.dense_similarity if self.relevance_similarity is None else self.relevance_similarity


def reciprocal_rank_fusion(rankings: Sequence[Sequence[str]], rank_constant: int, window: int) -> list[Fused]:
    """Fuse ranked lists: score(d) = Σ 1 / (rank_constant + rank_i(d)) over lists holding d.

    Only the first ``window`` entries of each list take part, and the fused list is cut to
    ``window``. Ties break by best single rank, then by id, so results are deterministic.
    """
    lists = len(rankings)
    ranks: dict[str, list[int | None]] = {}
    for position, ranking in enumerate(rankings):
        for rank, doc_id in enumerate(ranking[:window], start=1):
            slot = ranks.get(doc_id)
            if slot is None:
                ranks[doc_id] = slot = [None] * lists
                slot[position] = rank
            elif slot[position] is None:
                slot[position] = rank
    # Plain tuples sort several times faster than Fused objects under a key function, and
    # only the ``window`` kept become Fused (recall fuses two lists of 300 on every call);
    # one loop per document instead of two comprehensions took 0.68 -> 0.48 ms a recall.
    order = []
    for doc_id, rs in ranks.items():
        score, best = 0.0, window + 1
        for r in rs:
            if r is not None:
                score -= 1.0 / (rank_constant + r)
                best = min(best, r)
        order.append((score, best, doc_id, rs))
    order.sort()
    return [Fused(doc_id, -score, tuple(rs)) for score, _, doc_id, rs in order[:window]]


@dataclass(frozen=True, slots=True)
class FusedColumns:
    """``reciprocal_rank_fusion``'s result as columns: the ids, best first, their scores and
    their 1-based rank in each input list (0: absent), one row per id."""

    ids: list[str]
    score: np.ndarray  # float64
    ranks: np.ndarray  # (ids, lists) int64


def fused_columns(rankings: Sequence[Sequence[str]], rank_constant: int, window: int) -> FusedColumns:
    """``reciprocal_rank_fusion`` over arrays: the same scores (the same float operations, in
    the same order) and the same order, with no object per document (a recall fuses two lists
    of 300 on every call)."""
    columns = [np.array(list(ranking[:window]), dtype=str) for ranking in rankings]
    every = np.concatenate(columns) if columns else np.array([], dtype=str)
    ids, inverse = np.unique(every, return_inverse=True)  # sorted: the ids' order is the last tie-break
    ranks = np.zeros((len(ids), len(columns)), dtype=np.int64)
    score = np.zeros(len(ids), dtype=np.float64)
    start = 0
    for position, column in enumerate(columns):
        # an id's first occurrence in a list is its rank there
        slots, first = np.unique(inverse[start : start + len(column)], return_index=True)
        start += len(column)
        ranks[slots, position] = first + 1
        present = ranks[:, position] > 0
        score[present] -= 1.0 / (rank_constant + ranks[present, position])
    best = np.where(ranks > 0, ranks, window + 1).min(axis=1, initial=window + 1)
    order = np.lexsort((np.arange(len(ids)), best, score))[:window]
    return FusedColumns(ids[order].tolist(), -score[order], ranks[order])


@dataclass(frozen=True, slots=True)
class FusedKeys:
    """``fused_keys``' result: the keys, best first, their scores and their 1-based rank in
    each input list (0: absent), one row per key."""

    keys: np.ndarray  # int64
    score: np.ndarray  # float64
    ranks: np.ndarray  # (keys, lists) int64


def fused_keys(
    rankings: Sequence[np.ndarray],
    rank_constant: int,
    window: int,
    id_order: Callable[[np.ndarray], np.ndarray],
) -> FusedKeys:
    """``fused_columns`` over integer keys that stand for ids (each list's keys distinct),
    ``id_order`` giving for distinct keys numbers in the order of their ids: the same order,
    scores (the same float operations) and ranks as fusing the ids, without turning ids into
    arrays of strings and sorting them on every recall (0.3 ms of a recall at 12k memories,
    most of it string comparisons). Each list after the first is matched against the keys
    so far by one sort and one binary search."""
    columns = [np.asarray(ranking[:window], dtype=np.int64) for ranking in rankings]
    total = sum(len(column) for column in columns)
    keys = np.empty(total, dtype=np.int64)
    ranks = np.zeros((total, len(columns)), dtype=np.int64)
    size = 0
    for position, column in enumerate(columns):
        new = np.arange(len(column))
        if size:  # the keys already there get their rank here, the others come after them
            sorter = keys[:size].argsort()
            ordered = keys[:size][sorter]
            at = np.minimum(ordered.searchsorted(column), size - 1)
            held = ordered[at] == column
            ranks[sorter[at[held]], position] = held.nonzero()[0] + 1
            new = (~held).nonzero()[0]
        keys[size : size + len(new)] = column[new]
        ranks[size : size + len(new), position] = new + 1
        size += len(new)
    keys, ranks = keys[:size], ranks[:size]
    # each list's terms over the whole table at once, subtracted list by list (the same float
    # operations as a pass per list), the best rank the least of the present ones
    present = ranks > 0
    terms = 1.0 / (rank_constant + ranks)
    score = np.zeros(size, dtype=np.float64)
    for position in range(len(columns)):
        np.subtract(score, terms[:, position], out=score, where=present[:, position])
    best = np.minimum.reduce(np.where(present, ranks, window + 1), axis=1, initial=window + 1)
    # (score, best, id) by two sorts: (best, id) first, as one number per key (an id's place is
    # below 2**32, as a row is: ``keys.ROW_BITS``), all distinct, so any sort gives one order
    # (~2x faster than a stable sort by two keys); then score, stably
    by_best = ((best << 32) | id_order(keys)).argsort()
    order = by_best[score[by_best].argsort(kind="stable")][:window]
    return FusedKeys(keys[order], -score[order], ranks[order])


def candidates_from_fused(
    fused: Sequence[Fused],
    memories: Mapping[str, Memory],
    bm25_scores: Mapping[str, float],
    dense_similarities: Mapping[str, float],
    relevance_similarities: Mapping[str, float] | None = None,
    pending: Collection[str] = (),
) -> list[Candidate]:
    """The fused lists' ids as candidates, in fused order, each with its branches' evidence
    (the BM25 branch first, the dense branch second); an id without a memory (forgotten
    between the search and the load) is left out."""
    relevance = relevance_similarities or {}
    return [
        Candidate(
            memory=memories[f.id],
            rrf_score=f.score,
            bm25_rank=f.ranks[0],
            dense_rank=f.ranks[1],
            bm25_score=bm25_scores.get(f.id),
            dense_similarity=dense_similarities.get(f.id),
            relevance_similarity=relevance.get(f.id),
            embedding_pending=f.id in pending,
        )
        for f in fused
        if f.id in memories
    ]


def max_rrf_score(branches: int, rank_constant: int) -> float:
    """The score of a document ranked first in every branch: normalises RRF to (0, 1]."""
    return branches / (rank_constant + 1)
