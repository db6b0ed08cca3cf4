"""The dense branch's arithmetic: each visible row's cosine with the query, the best rows.

A query is embedded once per vector space (``SpaceQuery``); ``similarities`` takes each cached
row's cosine in its own space, ``DenseScan`` holds them on one scale per visible owner and
reads them back by row or by id; ``top_rows`` picks the best rows deterministically.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np
import simsimd

from ...domain.similarity import REFERENCE_BACKGROUND, on_one_scale, query_backgrounds
from .keys import ROW_BITS, ROW_MASK, row_keys
from .vectors import CACHED_DTYPE, RowVectors

if TYPE_CHECKING:
    from .index import OwnerIndex
    from .versions import Stamp

PARALLEL_SCAN_ROWS = 50_000
SCAN_CHUNK_ROWS = 25_000  # rows a scan thread takes at a time (~1.2 ms at 384 dimensions)
GUESS_SAMPLE = 2048  # rows ``top_rows`` guesses its cut-off on, past four times as many

# SimSIMD's float16 dot products for AVX512-FP16 (Intel Sapphire Rapids and later) and for SVE
# sum in float16: a cosine keeps three digits (0.79825 reads 0.79785), so near ties would rank
# by the CPU a server runs on. Its other kernels widen to float32 before they multiply.
HALF_SUMMING_KERNELS = ("sapphire", "sve_f16")


def _float32_sums() -> None:
    """Turn off the kernels that sum in float16, for the whole process (SimSIMD dispatches by
    these process-wide capabilities)."""
    capabilities = simsimd.get_capabilities()
    for kernel in HALF_SUMMING_KERNELS:
        if capabilities.get(kernel):
            simsimd.disable_capability(kernel)


_float32_sums()


@dataclass(frozen=True, slots=True)
class OwnerRows:
    """One owner's rows as a recall sees them: its cached vectors, and which rows may return."""

    owner: str
    index: OwnerIndex
    allowed: np.ndarray
    searched: np.ndarray  # per row: has it a vector in a space the query was embedded in?
    stamp: Stamp  # what the owner's rows were when the snapshot began (``memory_cache.py``)


@dataclass(frozen=True, slots=True)
class DenseScan:
    """The dense branch over the visible owners: per owner, each row's cosine on one scale and
    the code of the space it was measured in (-1: none, the row is pending or of a space the
    query was not embedded in)."""

    owners: list[OwnerRows]  # with ``searched`` set
    scores: list[np.ndarray]
    spaces: list[np.ndarray]
    queries: Mapping[int, SpaceQuery]

    def best(self, window: int) -> np.ndarray:
        """The keys (``row_keys``) of the ``window`` best rows that may return, best first;
        ties in the order of the owners, then of ``top_rows``."""
        tops = [
            top_rows(cosines, owner.allowed & owner.searched, window)
            for owner, cosines in zip(self.owners, self.scores, strict=True)
        ]
        if not tops:
            return np.zeros(0, dtype=np.int64)
        if len(tops) == 1:  # one owner (most recalls): ``top_rows``' order is already this one
            return row_keys(0, tops[0])
        cosine = np.concatenate(
            [c[rows] for c, rows in zip(self.scores, tops, strict=True)], dtype=np.float64
        )
        order = (-cosine).argsort(kind="stable")[:window]
        return np.concatenate([row_keys(at, rows) for at, rows in enumerate(tops)])[order]

    def columns(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``of`` for each row of ``keys`` (``row_keys``), as columns: the cosine on one scale
        (NaN: none), the space it came from (-1: none) and whether the row is still without
        vectors."""
        if len(self.owners) == 1:  # most recalls: every key is a row of the one owner (place 0)
            owner, vectors = self.owners[0], self.owners[0].index.vectors
            searched = owner.searched[keys]
            if searched.all():  # each a gather, not a scatter into NaN and -1 columns
                found = self.scores[0][keys].astype(np.float64), vectors.spaces[keys].astype(np.int64)
                return *found, ~vectors.ready_at(keys)
        cosine = np.full(len(keys), np.nan, dtype=np.float64)
        spaces = np.full(len(keys), -1, dtype=np.int64)
        pending = np.zeros(len(keys), dtype=bool)
        places, all_rows = keys >> ROW_BITS, keys & ROW_MASK
        for place, (owner, scores) in enumerate(zip(self.owners, self.scores, strict=True)):
            at = (places == place).nonzero()[0]
            if not len(at):  # most recalls: no candidate of the catalog's
                continue
            rows = all_rows[at]
            pending[at] = ~owner.index.vectors.ready_at(rows)
            searched = owner.searched[rows]
            cosine[at[searched]] = scores[rows[searched]]
            spaces[at[searched]] = owner.index.vectors.spaces[rows[searched]]
        return cosine, spaces, pending

    def of(self, memory_id: str) -> tuple[float | None, int | None, bool]:
        """The memory's cosine on one scale (None if the query was not embedded in its space),
        the space it came from, and whether it is still without vectors (only its words could
        find it)."""
        for owner, cosines in zip(self.owners, self.scores, strict=True):
            row = owner.index.index.get(memory_id)
            if row is not None:
                pending_vector = not owner.index.vectors.has_vectors(row)
                if not owner.searched[row]:
                    return None, None, pending_vector
                return float(cosines[row]), int(owner.index.vectors.spaces[row]), pending_vector
        return None, None, False


def scan(visible: list[OwnerRows], queries: Mapping[int, SpaceQuery], threads: int) -> DenseScan:
    """Every visible row's cosine with the query embedded in the row's space, on one scale."""
    visible = [replace(v, searched=searchable(v.index.vectors, queries)) for v in visible]
    cosines = [similarities(v.index.vectors, queries, threads) for v in visible]
    spaces = [v.index.vectors.searched_spaces(frozenset(queries)) for v in visible]
    scores = on_one_scale(cosines, spaces, {code: q.background for code, q in queries.items()})
    return DenseScan(visible, scores, spaces, queries)


@dataclass(frozen=True, slots=True)
class SpaceQuery:
    """A query embedded in one vector space, and where that space's cosines of unrelated
    pairs sit (``Embedder.cosine_background``)."""

    vector: np.ndarray
    background: tuple[float, float]


def searchable(vectors: RowVectors, queries: Mapping[int, SpaceQuery]) -> np.ndarray:
    """Per row: has it a vector in a space the query was embedded in? (read-only)"""
    return vectors.searchable(frozenset(queries))


def similarities(vectors: RowVectors, queries: Mapping[int, SpaceQuery], threads: int) -> np.ndarray:
    """Per cached row, the cosine of the (unit) query with its best passage, the query being
    embedded in the row's own space, as float32 (0 for a row that ``searchable`` rules out:
    pending, or of a space the query was not embedded in). ``on_one_scale`` then makes the
    cosines of different spaces comparable."""
    out = np.zeros(vectors.size, dtype=np.float32)
    if not vectors.size:
        return out
    spaces = vectors.spaces
    single_space = len(queries) == 1
    for code, query in queries.items():
        mine = None if single_space else spaces == code
        query16 = np.asarray(query.vector, dtype=CACHED_DTYPE)[None, :]
        scores = _dot(query16, vectors.matrix, threads)
        if vectors.extra_size:
            rows, extra = vectors.extra_rows, _dot(query16, vectors.extra, threads)
            live = rows >= 0
            np.maximum.at(scores, rows[live], extra[live])
        if mine is None:
            out = scores
        else:
            out[mine] = scores[mine]
    return out


def row_similarities(vectors: RowVectors, rows: np.ndarray, query: SpaceQuery) -> np.ndarray:
    """``similarities`` of a query in one space for ``rows`` alone (distinct rows with vectors
    in that space): the same float32 values, each row's best passage, without the scan of
    every row."""
    if not len(rows):
        return np.zeros(0, dtype=np.float32)
    query16 = np.asarray(query.vector, dtype=CACHED_DTYPE)[None, :]
    scores = _dot(query16, vectors.matrix[rows], 1)
    if vectors.extra_size:
        place = np.full(vectors.size, -1, dtype=np.int64)
        place[rows] = np.arange(len(rows))
        extra_rows = vectors.extra_rows
        mine = np.flatnonzero(extra_rows >= 0)
        mine = mine[place[extra_rows[mine]] >= 0]
        if len(mine):
            np.maximum.at(scores, place[extra_rows[mine]], _dot(query16, vectors.extra[mine], 1))
    return scores


def _dot(query16: np.ndarray, matrix: np.ndarray, threads: int) -> np.ndarray:
    # Threads pay off only on big matrices: on a busy 2-core machine a 2-thread scan of 10k
    # rows took 38 ms against 2.9 ms on one thread (their start-up waits for a free core).
    if threads < 2 or len(matrix) < PARALLEL_SCAN_ROWS:
        return _cdist(query16, matrix)
    # SimSIMD's own threads (OpenMP) busy-wait after every scan: ~8 ms of a core per recall
    # at 100k rows, which the rest of the recall and the client needed. Here the rows are cut
    # into chunks that the caller and idle helper threads (which sleep, not spin) take in turn,
    # each row's product computed alone as before, so the scores are the same values.
    out = np.empty(len(matrix), dtype=np.float32)
    starts = range(0, len(matrix), SCAN_CHUNK_ROWS)
    turn = itertools.count()  # next() is atomic: each chunk is taken once

    def take() -> None:
        while (at := next(turn)) < len(starts):
            start = starts[at]
            out[start : start + SCAN_CHUNK_ROWS] = _cdist(query16, matrix[start : start + SCAN_CHUNK_ROWS])

    helpers = [_helpers(threads - 1).submit(take) for _ in range(threads - 1)]
    take()
    for helper in helpers:
        # one that has not started finds nothing left to take: it is not waited for
        if not helper.cancel():
            helper.result()
    return out


def _cdist(query16: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    scores = simsimd.cdist(query16, matrix, metric="dot", out_dtype="float32", threads=1)
    return np.asarray(scores).reshape(-1)


_pools: dict[int, ThreadPoolExecutor] = {}
_pools_lock = threading.Lock()


def _helpers(count: int) -> ThreadPoolExecutor:
    """The process's ``count`` scan helper threads, started on first use."""
    with _pools_lock:
        pool = _pools.get(count)
        if pool is None:
            pool = _pools[count] = ThreadPoolExecutor(count, thread_name_prefix="atlas-scan")
        return pool


def top_rows(scores: np.ndarray, allowed: np.ndarray, window: int) -> np.ndarray:
    """Indices of the ``window`` best-scoring allowed rows, best first; ties go to the lower row
    (the older memory), also at the cut-off, so the result never depends on the sort's luck."""
    candidates = allowed.nonzero()[0]  # ascending rows
    negated = -(scores if len(candidates) == len(scores) else scores[candidates])  # all: no gather
    if candidates.size > 4 * GUESS_SAMPLE and window:
        # A cut-off guessed on a strided sample keeps ~1.5x the window (every row at least as
        # good as the true cut-off, ties included, in row order), so the exact selection below
        # partitions ~500 rows instead of all (at 12k rows 123 -> 55 us, at 100k 932 -> 214).
        step = candidates.size // GUESS_SAMPLE
        sample = negated[::step]
        k = min(len(sample) - 1, -(-window // step) * 3 // 2 + 8)
        near = (negated <= np.partition(sample, k)[k]).nonzero()[0]
        if near.size >= window:  # else the guess fell short: the whole selection
            candidates, negated = candidates[near], negated[near]
    if candidates.size > window:
        cutoff = np.partition(negated, window - 1)[window - 1]
        better = negated < cutoff
        tied = (negated == cutoff).nonzero()[0][: window - np.count_nonzero(better)]
        keep = np.concatenate([better.nonzero()[0], tied])
        candidates, negated = candidates[keep], negated[keep]
    # Rows of one score are in ascending order here (those better than the cut-off and those at
    # it each kept in row order), so a stable sort by score alone breaks ties by row, as a sort
    # by (score, row) does, in one pass instead of two.
    return candidates[negated.argsort(kind="stable")]


def member_cosines(
    owners: list[OwnerIndex], queries: Mapping[int, SpaceQuery], ids: Sequence[str]
) -> dict[str, float]:
    """``Search.cosines`` in a recall of one vector space: the rows of ``ids`` alone (each the
    first visible owner's that holds it), the values a whole scan gives them."""
    ((code, query),) = queries.items()
    out: dict[str, float] = {}
    remaining = list(ids)
    for owner in owners:
        index, vectors = owner.index, owner.vectors
        mine = [(memory_id, index[memory_id]) for memory_id in remaining if memory_id in index]
        remaining = [memory_id for memory_id in remaining if memory_id not in index]
        rows = np.array([row for _, row in mine], dtype=np.int64)
        searched = vectors.ready_at(rows) & (vectors.spaces[rows] == code) if len(rows) else rows > 0
        found = row_similarities(vectors, rows[searched], query)
        (scaled,) = on_one_scale([found], [np.full(len(found), code)], {code: query.background})
        chosen = [memory_id for (memory_id, _), kept in zip(mine, searched.tolist(), strict=True) if kept]
        out |= {memory_id: float(value) for memory_id, value in zip(chosen, scaled.tolist(), strict=True)}
    return out


def keyed_cosines(
    owners: Sequence[OwnerRows], queries: Mapping[int, SpaceQuery], keys: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``member_cosines`` of the rows of ``keys`` (``row_keys`` of ``owners``) as columns: per
    key, the cosine (NaN: none) and whether the row has one; the same values, read by row."""
    ((code, query),) = queries.items()
    if len(owners) == 1:  # most recalls: every key is a row of the one owner
        vectors = owners[0].index.vectors
        if (vectors.ready_at(keys) & (vectors.spaces[keys] == code)).all():  # no scatter into NaN columns
            values = row_similarities(vectors, keys, query)
            (scaled,) = on_one_scale([values], [np.full(len(values), code)], {code: query.background})
            return scaled.astype(np.float64), np.ones(len(keys), dtype=bool)
    cosine = np.full(len(keys), np.nan, dtype=np.float64)
    found = np.zeros(len(keys), dtype=bool)
    places, all_rows = keys >> ROW_BITS, keys & ROW_MASK
    for place, owner in enumerate(owners):
        at = (places == place).nonzero()[0]
        if not len(at):  # most views: no member of the catalog's
            continue
        vectors, rows = owner.index.vectors, all_rows[at]
        searched = vectors.ready_at(rows) & (vectors.spaces[rows] == code)
        values = row_similarities(vectors, rows[searched], query)
        (scaled,) = on_one_scale([values], [np.full(len(values), code)], {code: query.background})
        cosine[at[searched]], found[at[searched]] = scaled, True
    return cosine, found


def measured(
    dense: DenseScan, queries: Mapping[int, SpaceQuery], threads: int, keys: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``Search.cosines`` of the rows of ``keys`` in the owners ``dense`` scanned, a text
    embedded as ``queries``: per key, the cosine (NaN: none) and whether there is one."""
    if len(queries) == 1:
        return keyed_cosines(dense.owners, queries, keys)
    cosine, spaces, _ = scan(dense.owners, queries, threads).columns(keys)
    return cosine, spaces >= 0


def relevance_cosines(
    dense: DenseScan, cosine: np.ndarray, spaces: np.ndarray, stretch: Mapping[int, float]
) -> np.ndarray:
    """Per candidate, the cosine relevance reads: the one on one scale, or, in a space whose
    model crowds related pairs (a ``relatedness_stretch`` other than 1, per space in
    ``stretch``), that cosine stretched away from this query's background there
    (``similarity.for_relevance``)."""
    stretched = [code for code, factor in stretch.items() if factor != 1.0]
    out = cosine.copy()
    if not stretched:
        return out
    background = query_backgrounds(dense.scores, dense.spaces, stretched)
    for code in stretched:
        mine = spaces == code
        out[mine] = REFERENCE_BACKGROUND[0] + stretch[code] * (cosine[mine] - background[code])
    return out
