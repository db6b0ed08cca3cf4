"""Recall's reads: BM25 and cosine over each visible owner's index, fused, from one snapshot.

Recall runs two branches over the caller's rows (plus the catalog when asked): BM25 over the
owners' postings (``postings.py``, the query analysed like the text by ``domain.lexical``),
and exact cosine over their cached float16 vectors. Each row's vector comes from the model
its language calls for (``inference.embedder.ModelChoice``); the query is embedded once per
vector space the owners' rows use, each row is compared in its own space, and the cosines,
put on one scale, form one dense list. ``domain.fusion`` fuses the two.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence
from functools import partial
from typing import cast

import numpy as np

from ...domain.asked import PROTOTYPE_TEXTS
from ...domain.fusion import FusedKeys, fused_keys
from ...domain.lexical import detect_language
from ...domain.model import MemoryType
from ...domain.pool import Pool
from ...inference.embedder import ModelChoice, embed_query, query_model
from ..base import RecallPlan
from . import coverage, slots, store, timing, versions
from .dense import (
    DenseScan,
    OwnerRows,
    SpaceQuery,
    measured,
    member_cosines,
    relevance_cosines,
    scan,
    top_rows,
)
from .fixed_texts import MINILM_MODELS, FixedTexts
from .handoff import Task
from .index import IndexCache, OwnerIndex
from .keys import ROW_BITS, ROW_MASK, id_order, ids_of, row_keys
from .memory_cache import Entry, MemoryCache
from .pending import DeferredEmbeddings
from .postings import bm25
from .preload import FirstReads, RecallClock, first_recall_answered, preload
from .query_vectors import QueryVectors, Ready
from .saved_postings import SAVED_MIN_ROWS
from .slots import CATALOG_OWNER, owner_key
from .store import Store
from .versions import Stamp
from .words import query_words

# Owners up to the size whose postings are not worth saving load their caches in well under
# 0.3 s (~0.05 s at 8k rows on the reference machine), so a start may load them before
# answering anything (``warm_rows``).
QUICK_LOAD_ROWS = SAVED_MIN_ROWS


class Search:
    """The read side of one engine: its store, caches and models, and the query-embedding pool."""

    def __init__(
        self,
        store: Store,
        index: IndexCache,
        memories: MemoryCache,
        models: ModelChoice,
        deferred: DeferredEmbeddings,
        threads: int,
    ) -> None:
        self._store = store
        self._index = index
        self._memories = memories
        self.models = models
        self._deferred = deferred
        self.threads = threads  # for the cosine scan
        self.query_vectors = QueryVectors(models, lambda code: query_model(self._index.spaces[code]))
        self.recalls = RecallClock()  # when recalls start and whether one was answered (``preload``)
        self._fixed = FixedTexts(models)
        self._filling = threading.Lock()  # one fill of the rows' coverage at a time (``preload``)
        self._filled = False

    def candidates(self, plan: RecallPlan) -> Pool:
        """BM25 and cosine over each visible owner's rows, fused; all reads from one snapshot (one
        read transaction), so the owners' indexes and the rows loaded at the end agree even while
        other processes write."""
        self.recalls.started()  # the preload's first reads step aside (``preload.py``)
        if not plan.dense:
            return self._lexical_candidates(plan)
        # The model runs beside the pending-row check and BM25 (both release the GIL): on
        # 2 cores that hides most of the query embedding, the largest single stage. It embeds
        # the query in each space this process last saw the owners' rows use (no I/O); a space
        # that turns out to be new (the user's first Chinese memory) is embedded in the snapshot.
        owners = self._owners(plan)
        spaces = self._cached_spaces(owners)
        guessed = self.query_vectors.start(plan.query, plan.foreseen, spaces)
        settled = False  # the owners' pending rows are waited for first, unless there are none
        while True:
            with self._store.reading() as conn:
                stamps = versions.stamps(conn, owners)
                found = (
                    self._search(conn, plan, stamps, guessed)
                    if settled or self._all_embedded(owners, stamps)
                    else None
                )
            if found is not None:
                break
            for owner in owners:  # same-turn visibility: the owner's pending rows first
                self._deferred.settle(owner)
            settled = True
        pool = self._candidates(*found)
        if not self.recalls.answered.is_set():  # once: a set takes the event's lock each time
            self.recalls.answered.set()
        return pool

    def _all_embedded(self, owners: list[str], stamps: list[Stamp]) -> bool:
        """Has every row of ``owners`` its vectors at ``stamps``? This process's index says so
        without a read when it is current and holds no pending row (its own writes are rows
        there from their commit on): most recalls, which then skip ``settle``'s ~0.1 ms."""
        for owner, stamp in zip(owners, stamps, strict=True):
            cached = self._index.peek(owner)
            if cached is None or cached.version != stamp.version or not cached.vectors.all_ready():
                return False
        return True

    def _search(
        self,
        conn: sqlite3.Connection,
        plan: RecallPlan,
        stamps: list[Stamp],
        guessed: dict[int, Task[SpaceQuery] | Ready],
    ) -> tuple[FusedKeys, list[Entry | None], np.ndarray, DenseScan, list[str]]:
        """``candidates``' reads in its snapshot, the owners' rows settled: what ``_candidates``
        makes the pool of."""
        visible = self._visible(conn, plan, stamps)
        lexical = self._bm25(plan, visible)
        queries = {code: future.result() for code, future in guessed.items()}
        indexes = [v.index for v in visible]
        queries = self._space_queries(plan.query, self._spaces_of(indexes), queries)
        dense = scan(visible, queries, self.threads)
        rankings = [lexical[0], dense.best(plan.window)]
        fused = fused_keys(rankings, plan.rank_constant, plan.window, id_order(indexes))
        owners = [v.owner for v in visible]
        return fused, self._load(conn, visible, fused.keys), lexical[1], dense, owners

    def cosines(self, plan: RecallPlan, text: str, ids: Sequence[str]) -> dict[str, float]:
        """The cosine of ``text`` (another wording of ``plan.query``) with each of ``ids`` that
        has a vector, on the scale ``candidates`` reports: what the dense branch would have said
        had the user asked that. One query embedding per vector space; in one space only the
        rows of ``ids`` are read, across spaces one scan (each space's scale is this query's)."""
        with self._store.snapshot() as conn:
            owners = self._owners(plan)
            stamps = versions.stamps(conn, owners)  # one read for the user and the catalog
            indexes = [self._index.get(conn, o, s.version) for o, s in zip(owners, stamps, strict=True)]
            spaces = self._spaces_of(indexes)
            # one space: each cosine is mapped alone, so only ``ids`` are read, and which rows
            # the recall may return is not needed
            visible = None if len(spaces) == 1 else self._visible(conn, plan, stamps)
        queries = self._space_queries(text, spaces, {})
        if visible is None:
            return member_cosines(indexes, queries, ids)
        dense = scan(visible, queries, self.threads)
        found = {memory_id: dense.of(memory_id)[0] for memory_id in ids}
        return {memory_id: cosine for memory_id, cosine in found.items() if cosine is not None}

    def likeness(self, plan: RecallPlan, texts: Sequence[str]) -> list[float] | None:
        """``plan.query``'s cosine with each of ``texts`` as MiniLM reads them, if ``candidates``
        embedded the query with MiniLM (its vector is reused, no model runs for the query)."""
        for model in MINILM_MODELS:
            found = self.query_vectors.recent(model, plan.query)
            if found is not None:
                cosines: list[float] = (self._fixed.vectors(model, texts) @ found.vector).tolist()
                return cosines
        return None

    def _candidates(
        self,
        fused: FusedKeys,
        entries: list[Entry | None],
        lexical_scores: np.ndarray,
        dense: DenseScan | None,
        owners: list[str],
    ) -> Pool:
        """The fused candidates as the pool's columns, with their dense evidence: each cosine
        on one scale, the cosine relevance reads where a model's differs
        (``domain.similarity.for_relevance``), and which rows are still without vectors; an
        id without a memory (forgotten between the search and the load) is left out."""
        keys, ranks, rrf = fused.keys, fused.ranks, fused.score
        if None in entries:  # a memory not loaded: left out
            kept = [at for at, entry in enumerate(entries) if entry is not None]
            keys, ranks, rrf = keys[kept], ranks[kept], rrf[kept]
            entries = [entries[at] for at in kept]
        # a rank's score; rank 0's index, -1, reads the NaN after them
        bm25_scores = np.concatenate((lexical_scores, [np.nan]))[ranks[:, 0] - 1]
        if dense is None:
            cosine, spaces, pending = (
                np.full(len(keys), np.nan),
                np.full(len(keys), -1),
                np.zeros(len(keys), bool),
            )
        else:
            cosine, spaces, pending = dense.columns(keys)
        relevance = cosine.copy() if dense is None else self._relevance_cosines(dense, cosine, spaces)
        chosen, facts, uses = self._memories.memories_and_facts(cast("list[Entry]", entries))  # no None left
        places = keys >> ROW_BITS  # a memory's user_id is its owner's ("" for the catalog's None)
        return Pool.from_columns(
            chosen,
            [owners[0]] * len(keys) if not places.any() else [owners[place] for place in places.tolist()],
            facts=facts,
            uses=uses,
            measure=None if dense is None else partial(self._measured, dense),
            handles=keys,
            rrf=rrf,
            bm25_rank=ranks[:, 0],
            dense_rank=ranks[:, 1] if ranks.shape[1] > 1 else np.zeros(len(keys), dtype=np.int64),
            bm25=bm25_scores,
            cosine=cosine,
            relevance_cosine=relevance,
            rerank=np.full(len(keys), np.nan),
            pending=pending,
        )

    def _measured(self, dense: DenseScan, text: str, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``cosines`` of the pool's rows at ``keys`` in the snapshot it was read from."""
        queries = self._space_queries(text, self._spaces_of([v.index for v in dense.owners]), {})
        return measured(dense, queries, self.threads, keys)

    def _relevance_cosines(self, dense: DenseScan, cosine: np.ndarray, spaces: np.ndarray) -> np.ndarray:
        """Per candidate, the cosine relevance reads (``dense.relevance_cosines``)."""
        stretch = {
            code: self.models.embedder(self._index.spaces[code]).relatedness_stretch for code in dense.queries
        }
        return relevance_cosines(dense, cosine, spaces, stretch)

    def _spaces_of(self, owners: list[OwnerIndex]) -> set[int]:
        """The vector spaces (codes) of the owners' rows this process can embed a query in."""
        found = {code for index in owners for code in index.vectors.spaces_present()}
        return {code for code in found if self.models.knows(self._index.spaces[code])}

    def _cached_spaces(self, owners: list[str]) -> set[int]:
        """The spaces this process's caches last held for ``owners``; MiniLM's for an owner it
        has not cached yet (most first memories are English, and a wrong guess costs ~2 ms)."""
        cached = [self._index.peek(owner) for owner in owners]
        spaces = self._spaces_of([c for c in cached if c is not None])
        if any(c is None for c in cached):
            spaces.add(self._index.space_code(self.models.members[0]))
        return spaces

    def _space_queries(
        self, query: str, spaces: set[int], done: dict[int, SpaceQuery]
    ) -> dict[int, SpaceQuery]:
        """``query`` embedded in each of ``spaces`` (reusing ``done``; spaces not needed are
        dropped). An English-only owner has one space: its recall runs MiniLM alone."""
        out = {code: done[code] for code in spaces if code in done}
        for code in sorted(spaces - set(done)):
            out[code] = self.query_vectors.get(query, code)
        return out

    def _lexical_candidates(self, plan: RecallPlan) -> Pool:
        """The BM25 branch alone, with no query embedding (a write looking for what it repeats)."""
        with self._store.snapshot() as conn:
            visible = self._visible(conn, plan)
            lexical, indexes = self._bm25(plan, visible), [v.index for v in visible]
            rankings = [lexical[0], np.zeros(0, dtype=np.int64)]  # no dense branch
            fused = fused_keys(rankings, plan.rank_constant, plan.window, id_order(indexes))
            memories = self._load(conn, visible, fused.keys)
        return self._candidates(fused, memories, lexical[1], None, [v.owner for v in visible])

    def lexical(self, plan: RecallPlan) -> list[tuple[str, float]]:
        """The BM25 branch alone, best first, as (id, score)."""
        with self._store.snapshot() as conn:
            visible = self._visible(conn, plan)
            keys, scores = self._bm25(plan, visible)
            return list(zip(ids_of([v.index for v in visible], keys), scores.tolist(), strict=True))

    def _visible(
        self, conn: sqlite3.Connection, plan: RecallPlan, stamps: list[Stamp] | None = None
    ) -> list[OwnerRows]:
        """The owners' rows in ``conn``'s snapshot (``stamps``: theirs), but empty ones after the first."""
        types = {t.value for t in plan.memory_types}
        out = []
        for at, owner in enumerate(self._owners(plan)):
            stamp = versions.stamp(conn, owner) if stamps is None else stamps[at]
            index = self._index.get(conn, owner, stamp.version)
            if at and not index.size:
                continue
            allowed = index.allowed(types, plan.include_superseded)
            if plan.time.active and owner != CATALOG_OWNER:  # the catalog has no history
                allowed = allowed & timing.rows_in_time(conn, owner, index.rowids, index.size, plan.time)
            out.append(OwnerRows(owner, index, allowed, index.vectors.ready, stamp))
        return out

    def warm(self, user_id: str) -> None:
        """Pay the first recall's start-up costs now: the vector caches, the first run of each
        model the user's recalls will need (MiniLM always: the user's first memory is likely
        English), and the plain questions an English query's meaning is read by (~80 ms once)."""
        with self._store.snapshot() as conn:
            owners = [self._index.get(conn, owner) for owner in (owner_key(user_id), CATALOG_OWNER)]
        self._space_queries("warm up", self._spaces_of(owners), {})
        embed_query(self.models.embedder(self.models.members[0]), "warm up")
        if self.models.members[0] in MINILM_MODELS:  # what domain.asked reads a query's meaning by
            self._fixed.vectors(self.models.members[0], PROTOTYPE_TEXTS)

    def preload(
        self,
        user_id: str,
        after_first_recall: bool = False,
        first_reads: FirstReads | None = None,
        fact_reads: FirstReads | None = None,
    ) -> int:
        """The user's memories decoded into the memory cache with their ranking facts and
        ``first_reads``, if all fit (``preload.py``); how many were read from the store. The
        first call also keeps the coverage of the store's rows that have none (``coverage.py``),
        so the preload and recalls read it."""
        if not self.keep_row_facts(after_first_recall):
            return 0
        return preload(
            self._store, self._index, self._memories, self.recalls, user_id, False, first_reads, fact_reads
        )

    def keep_row_facts(self, after_first_recall: bool = True) -> bool:
        """Keep the coverage of the store's rows that have none (``coverage.py``), once per
        process, after its first recall; False if the engine closed first."""
        if not first_recall_answered(self.recalls, after_first_recall):
            return False
        with self._filling:
            if not self._filled:
                coverage.fill(self._store, self.recalls)
                self._filled = not self.recalls.closing.is_set()
        return not self.recalls.closing.is_set()

    def warm_rows(self, user_id: str) -> bool:
        """Load the user's and the catalog's vector caches now if that is quick (at most
        ``QUICK_LOAD_ROWS`` rows between them); whether it did. Larger owners load in ``warm``."""
        owners = (owner_key(user_id), CATALOG_OWNER)
        with self._store.snapshot() as conn:
            if sum(slots.row_count(conn, owner) for owner in owners) > QUICK_LOAD_ROWS:
                return False
            for owner in owners:
                self._index.get(conn, owner)
        return True

    def _owners(self, plan: RecallPlan) -> list[str]:
        owners = [plan.user_id]
        if MemoryType.CATALOG in plan.memory_types:
            owners.append(CATALOG_OWNER)
        return owners

    def _bm25(self, plan: RecallPlan, visible: list[OwnerRows]) -> tuple[np.ndarray, np.ndarray]:
        """BM25 over the visible owners' postings (``postings.py``): the best rows' keys
        (``dense.row_keys``) and scores, best first; ties go to the earlier owner (the user
        before the catalog), then the older row."""
        words = query_words(plan.lexical_text, detect_language(plan.query))
        scored = bm25([owner.index.postings for owner in visible], words)
        # the best allowed rows among those matched (ascending: ties still go to the lower row)
        tops = [
            top_rows(scores, owner.allowed[matched], plan.window)
            for owner, (matched, scores) in zip(visible, scored, strict=True)
        ]
        if not tops:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
        if len(tops) == 1:  # one owner (most recalls): ``top_rows``' order is already this one
            return row_keys(0, scored[0][0][tops[0]]), scored[0][1][tops[0]]
        score = np.concatenate(
            [scores[at] for (_, scores), at in zip(scored, tops, strict=True)], dtype=np.float64
        )
        place = np.concatenate([np.full(len(rows), at) for at, rows in enumerate(tops)])
        row = np.concatenate([matched[at] for (matched, _), at in zip(scored, tops, strict=True)])
        best = np.lexsort((row, place, -score))[: plan.window]  # best score, then owner, then row
        return (place[best] << ROW_BITS) | row[best], score[best]

    def _load(
        self, conn: sqlite3.Connection, visible: list[OwnerRows], keys: np.ndarray
    ) -> list[Entry | None]:
        """The memory cache's entries of the memories of ``keys``, each memory decoded once per
        change, with its ranking facts; None for one forgotten since the search."""
        out: list[Entry | None] = [None] * len(keys)
        places, rows = keys >> ROW_BITS, (keys & ROW_MASK).tolist()
        for place, owner in enumerate(visible):
            mine = places == place
            at = range(len(keys)) if mine.all() else mine.nonzero()[0].tolist()
            theirs = rows if len(at) == len(keys) else [rows[n] for n in at]
            found = self._memories.found_rows(owner.owner, owner.stamp, owner.index, theirs)
            if None in found:  # the ids of the rows not in the cache, read from the store
                ids = owner.index.ids
                missing = [ids[row] for row, entry in zip(theirs, found, strict=True) if entry is None]
                read, words = store.unzipped(store.read_memories(conn, owner.owner, missing))
                made = {e[1].id: e for e in self._memories.put(owner.owner, owner.stamp, read, words)}
                found = [made.get(ids[r]) if e is None else e for r, e in zip(theirs, found, strict=True)]
            if len(at) == len(keys):
                return found
            for n, entry in zip(at, found, strict=True):
                out[n] = entry
        return out

    def close(self) -> None:
        self.recalls.closing.set()
        self.query_vectors.close()
