"""The embedded engine: one SQLite file (WAL) + local ONNX embeddings, zero set-up.

Recall runs two branches over the caller's rows (plus the catalog when asked) — BM25 over
in-memory postings of the analysed text (``postings.py``, the query analysed like the text by
``domain.lexical``), and exact cosine over cached float16 vectors — from one read snapshot, and
fuses them with ``domain.fusion``. Each row's vector comes from the model its language calls for
(``inference.embedder.ModelChoice``); the query is embedded once per vector space the caller's
rows use, each row is compared in its own space, and the cosines, put on one scale, form one
dense list. A write commits its row and is embedded right after, by a bounded background worker
(``pending.py``). Several processes may share one data directory: SQLite serialises writers,
``busy_timeout`` absorbs contention, and ``owner_versions`` keeps caches fresh.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from datetime import datetime
from functools import partial
from pathlib import Path

import numpy as np

from ...domain.fusion import reciprocal_rank_fusion
from ...domain.lexical import detect_language
from ...domain.model import Memory, MemoryType
from ...errors import Conflict
from ...inference.embedder import (
    Embedder,
    ModelChoice,
    as_choice,
    cosine_background,
    embed_query,
    for_relevance,
    relatedness_stretch,
)
from ...log import get_logger
from ..base import Candidate, EngineInfo, ListQuery, RecallPlan, StoreStats
from . import migrations, pending, rows, schema, slots, store, versions
from .index import IndexCache, OwnerIndex
from .memory_cache import MemoryCache
from .passages import as_passage_vectors, embed_by_model, to_blob
from .pending import DeferredEmbeddings, Embedded, PendingRow
from .postings import bm25, query_words
from .slots import CATALOG_OWNER, owner_key
from .snapshots import SNAPSHOT_MIN_ROWS
from .stats import store_stats
from .store import Store, Transaction
from .vectors import (
    SpaceQuery,
    on_one_scale,
    query_backgrounds,
    searchable,
    similarities,
    top_rows,
)
from .versions import Change, Stamp

log = get_logger(__name__)

QUERY_THREADS = 2  # recalls embedding their queries at once (HTTP sessions)
# Owners up to the size whose postings are not worth saving load their caches in well under
# 0.3 s (~0.05 s at 8k rows on the reference machine), so a start may load them before
# answering anything (``warm_rows``).
QUICK_LOAD_ROWS = SNAPSHOT_MIN_ROWS


class EmbeddedEngine:
    def __init__(self, path: Path, embedder: Embedder | ModelChoice, threads: int = 2) -> None:
        self.path = Path(path)
        self.threads = threads  # for the cosine scan
        self.models = as_choice(embedder)
        self.info = EngineInfo(name="embedded", embedding_model=self.models.choice_id)
        self._store = Store(self.path)
        self._lock = self._store.lock
        self._index = IndexCache(
            self.models.dimensions, snapshots=self.path.with_name(self.path.name + "-postings")
        )
        self._memories = MemoryCache()
        self._adopt_models()
        # Never embeds anything here: rows a crash left pending are repaired in the background.
        self._deferred = DeferredEmbeddings(self.models, self._store, self._on_stored)
        self._query_vectors = ThreadPoolExecutor(QUERY_THREADS, thread_name_prefix="atlas-query")

    @property
    def embedder(self) -> Embedder:
        """The model English text is embedded with (the only one, unless ``per-language``)."""
        return self.models.embedder(self.models.members[0])

    def _adopt_models(self) -> None:
        with self._store.transaction() as tx:
            migrations.adopt_configured_models(tx, self.models, str(self.path))

    def _changed(self, tx: Transaction, owner: str, dropped: Sequence[str] = ()) -> Change:
        """Record in this transaction that the owner's rows changed (its version), and keep this
        process's decoded memories of it once the change commits, all but ``dropped``."""
        change = versions.record_change(tx.conn, owner)
        tx.after_commit(partial(self._memories.advance, change, tuple(dropped)))
        return change

    def synchronous(self, mode: str) -> AbstractContextManager[None]:
        return self._store.synchronous(mode)

    # -- writes ------------------------------------------------------------------------

    def write(self, memory: Memory, *, supersede: Sequence[str] = ()) -> None:
        """Commit the memory now and embed it right after (``pending.py``); this waits only
        while the process's backlog of unembedded writes is full. Catalog entries, loaded by
        an admin, are embedded before they commit."""
        if memory.is_catalog:
            self._write_catalog(memory)
            return
        owner = owner_key(memory.user_id)
        row = rows.to_row(memory)
        row |= {
            "embedding": schema.PENDING_EMBEDDING,
            "embedding_model": self.models.model_for(row["search_text"]),
        }
        with self._store.transaction() as tx:
            row = {"rowid": slots.next_rowid(tx.conn, owner)} | row
            rowid = store.insert(tx.conn, row)
            store.mark_superseded(tx.conn, memory, supersede)
            pending.mark(tx.conn, rowid)
            change = self._changed(tx, owner, dropped=supersede)
            tx.after_commit(
                partial(
                    self._index.apply_insert,
                    change,
                    rowid,
                    memory.id,
                    memory.memory_type.value,
                    supersede,
                    (row["lexical_terms"], row["lexical_stems"]),
                    arrived_superseded=memory.is_superseded,
                )
            )
        self._deferred.submit(PendingRow(owner, rowid, row["search_text"]))

    def _on_stored(self, tx: Transaction, stored: list[Embedded]) -> None:
        """In the worker's storing transaction: new vectors change what the owners' caches
        hold, so bump their versions (other processes reload) and update ours once it commits."""
        for owner in sorted({e.owner for e in stored}):
            change = self._changed(tx, owner)  # vectors only: no memory changed
            mine = [(e.rowid, e.vectors, e.model_id) for e in stored if e.owner == owner]
            tx.after_commit(partial(self._index.apply_vectors, change, mine))

    def _write_catalog(self, memory: Memory) -> None:
        ((model_id, vectors),) = embed_by_model(self.models, [memory.search_text()])
        row = rows.to_row(memory) | {"embedding": to_blob(vectors), "embedding_model": model_id}
        with self._store.transaction() as tx:
            row = {"rowid": slots.next_rowid(tx.conn, CATALOG_OWNER)} | row
            store.upsert_catalog(tx.conn, row)
            versions.bump(tx.conn, CATALOG_OWNER)

    def write_many(
        self, memories: Sequence[Memory], vectors: np.ndarray | Sequence[np.ndarray] | None = None
    ) -> None:
        """Bulk-load finished memories as they are, supersession fields included (import, bench).

        Embedded-only, not part of the Engine protocol: it embeds in batches (one ONNX call per
        32 passages instead of one per memory), or takes ``vectors`` the caller already computed
        with this engine's model (one per memory, or per memory its passages' vectors, see
        ``passages.py``), and commits everything in one transaction. No supersession
        rules run here: the service has already applied them to what is being loaded.
        Given ``vectors`` must come from the engine's first model (MiniLM under per-language)
        and are recorded as that model's.
        """
        if vectors is None:
            per_memory = embed_by_model(self.models, [m.search_text() for m in memories])
        else:
            per_memory = [(self.models.members[0], v) for v in as_passage_vectors(vectors)]
        if len(per_memory) != len(memories):
            raise ValueError(f"{len(memories)} memories but {len(per_memory)} vectors")
        stored = [
            rows.to_row(m) | {"embedding": to_blob(v), "embedding_model": model}
            for m, (model, v) in zip(memories, per_memory, strict=True)
        ]
        with self._store.transaction() as tx:
            following: dict[str, int] = {}
            for row in stored:
                owner = owner_key(row["user_id"])
                row["rowid"] = following[owner] = following.get(owner) or slots.next_rowid(tx.conn, owner)
                following[owner] += 1
            store.insert_many(tx.conn, stored)
            for owner in sorted({owner_key(m.user_id) for m in memories}):
                versions.bump(tx.conn, owner)

    def touch(self, user_id: str, ids: Sequence[str], at: datetime) -> None:
        if not ids:
            return
        # Every recall touches: its fsync cost 1-4 ms a recall, for statistics that may lag a
        # power loss (a process crash loses nothing).
        with self._store.synchronous("NORMAL"), self._store.transaction() as tx:
            store.count_uses(tx.conn, user_id, ids, at)
            change = versions.record_use(tx.conn, user_id)
            tx.after_commit(partial(self._memories.record_use, change, ids, at))

    def update(self, user_id: str, memory: Memory) -> None:
        row = rows.to_row(memory)
        sets = {k: row[k] for k in rows.MUTABLE}
        with self._lock:
            stored = store.stored_search_text(self._store.conn, user_id, memory.id)
        if stored is None:
            raise Conflict(f"memory {memory.id!r} not found for this user")
        if stored != row["search_text"]:
            ((model_id, vectors),) = embed_by_model(self.models, [row["search_text"]])
            sets |= {"embedding": to_blob(vectors), "embedding_model": model_id}
        with self._store.transaction() as tx:
            rowid = store.update(tx.conn, user_id, memory.id, sets)
            if "embedding" in sets and rowid is not None:  # a write's deferred vector would now be stale
                tx.conn.execute("DELETE FROM pending_embeddings WHERE rowid = ?", (rowid,))
            self._changed(tx, owner_key(user_id), dropped=[memory.id])

    def forget(self, user_id: str, memory_id: str) -> bool:
        with self._store.transaction() as tx:
            forgotten = store.delete(tx.conn, user_id, memory_id)
            if forgotten:
                self._changed(tx, owner_key(user_id), dropped=[memory_id])
                tx.after_commit(partial(self._index.forgot, owner_key(user_id)))
            return forgotten

    # -- reads -------------------------------------------------------------------------

    def get(self, user_id: str, ids: Sequence[str], *, include_catalog: bool = False) -> list[Memory]:
        if not ids:
            return []
        with self._lock:
            return store.by_ids(self._store.conn, user_id, ids, include_catalog)

    def list(self, query: ListQuery) -> list[Memory]:
        with self._lock:
            return store.page(self._store.conn, query)

    def get_state(self, user_id: str, key: str) -> str | None:
        with self._lock:
            return store.get_state(self._store.conn, user_id, key)

    def set_state(self, user_id: str, key: str, value: str | None) -> None:
        with self._store.transaction() as tx:
            store.set_state(tx.conn, user_id, key, value)

    def candidates(self, plan: RecallPlan) -> list[Candidate]:
        """BM25 and cosine over each visible owner's rows, fused; all reads from one snapshot.

        The snapshot (one read transaction) means the FTS index, the vector cache and the rows
        loaded at the end agree even while other processes write.
        """
        # The model runs beside the pending-row check and BM25 (both release the GIL): on
        # 2 cores that hides most of the query embedding, the largest single stage. It embeds
        # the query in each space this process last saw the owners' rows use (no I/O); a space
        # that turns out to be new (the user's first Chinese memory) is embedded in the snapshot.
        owners = self._owners(plan)
        guessed = {
            code: self._query_vectors.submit(self._space_query, plan.query, code)
            for code in self._cached_spaces(owners)
        }
        for owner in owners:  # same-turn visibility: the owner's pending rows first
            self._deferred.settle(owner)
        with self._store.snapshot() as conn:
            visible = self._visible(conn, plan)
            lexical = self._bm25(plan, visible)
            queries = {code: future.result() for code, future in guessed.items()}
            queries = self._space_queries(plan.query, self._spaces_of([v.index for v in visible]), queries)
            visible = [replace(v, searched=searchable(v.index.vectors, queries)) for v in visible]
            cosines = [similarities(v.index.vectors, queries, self.threads) for v in visible]
            scores = on_one_scale(cosines, [(v.index.vectors, v.searched) for v in visible], queries)
            dense = _merge_dense(visible, scores, plan.window)
            fused = reciprocal_rank_fusion(
                [[i for i, _ in lexical], [i for i, _ in dense]], plan.rank_constant, plan.window
            )
            memories = self._load(conn, visible, [f.id for f in fused])
        bm25_scores = dict(lexical)
        stretch = {
            code: relatedness_stretch(self.models.embedder(self._index.spaces[code])) for code in queries
        }
        stretched = [code for code, factor in stretch.items() if factor != 1.0]
        background = query_backgrounds(scores, [(v.index.vectors, v.searched) for v in visible], stretched)
        out = []
        for f in fused:
            if f.id not in memories:
                continue
            cosine, code, pending_vector = _dense_of(visible, scores, f.id)
            out.append(
                Candidate(
                    memory=memories[f.id],
                    rrf_score=f.score,
                    bm25_rank=f.ranks[0],
                    dense_rank=f.ranks[1],
                    bm25_score=bm25_scores.get(f.id),
                    dense_similarity=cosine,
                    relevance_similarity=_for_relevance(cosine, stretch.get(code, 1.0), background.get(code)),
                    embedding_pending=pending_vector,
                )
            )
        return out

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
            out[code] = self._space_query(query, code)
        return out

    def _space_query(self, query: str, code: int) -> SpaceQuery:
        embedder = self.models.embedder(self._index.spaces[code])
        return SpaceQuery(embed_query(embedder, query), cosine_background(embedder))

    def lexical(self, plan: RecallPlan) -> list[tuple[str, float]]:
        """The BM25 branch alone, best first, as (id, score)."""
        with self._store.snapshot() as conn:
            return self._bm25(plan, self._visible(conn, plan))

    def _visible(self, conn: sqlite3.Connection, plan: RecallPlan) -> list[OwnerRows]:
        types = {t.value for t in plan.memory_types}
        out = []
        for owner in self._owners(plan):
            index = self._index.get(conn, owner)
            allowed = index.allowed(types, plan.include_superseded)
            out.append(OwnerRows(owner, index, allowed, index.vectors.ready, versions.stamp(conn, owner)))
        return out

    def warm(self, user_id: str) -> None:
        """Pay the first recall's start-up costs now: the vector caches, the first run of each
        model the user's recalls will need (MiniLM always: the user's first memory is likely English)."""
        with self._store.snapshot() as conn:
            owners = [self._index.get(conn, owner) for owner in (owner_key(user_id), CATALOG_OWNER)]
        self._space_queries("warm up", self._spaces_of(owners), {})
        embed_query(self.embedder, "warm up")

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

    def _bm25(self, plan: RecallPlan, visible: list[OwnerRows]) -> list[tuple[str, float]]:
        """BM25 over the visible owners' postings (``postings.py``), best first; ties go to
        the earlier owner (the user before the catalog), then the older row."""
        words = query_words(plan.lexical_text, detect_language(plan.query))
        scored = bm25([owner.index.postings for owner in visible], words)
        found: list[tuple[float, int, int, str]] = []
        for place, (owner, (scores, matched)) in enumerate(zip(visible, scored, strict=True)):
            for row in top_rows(scores, owner.allowed & matched, plan.window):
                found.append((-float(scores[row]), place, int(row), owner.index.ids[row]))
        found.sort()
        return [(memory_id, -score) for score, _, _, memory_id in found[: plan.window]]

    def _load(self, conn: sqlite3.Connection, visible: list[OwnerRows], ids: list[str]) -> dict[str, Memory]:
        """The memories of ``ids`` (each a row of one of ``visible``), decoded once per change."""
        out: dict[str, Memory] = {}
        for owner in visible:
            mine = [i for i in ids if i in owner.index.index]
            out |= self._memories.get(owner.owner, owner.stamp, mine)
            missing = [i for i in mine if i not in out]
            if missing:
                found = store.read_memories(conn, owner.owner, missing)
                self._memories.put(owner.owner, owner.stamp, found)
                out |= {m.id: m for m in found}
        return out

    def stats(self) -> StoreStats:
        with self._lock:
            return store_stats(self._store.conn, self.path)

    def close(self) -> None:
        self._deferred.close()  # drains briefly; what is left stays pending for the next open
        self._query_vectors.shutdown()
        self._store.close()


@dataclass(frozen=True, slots=True)
class OwnerRows:
    """One owner's rows as a recall sees them: its cached vectors, and which rows may return."""

    owner: str
    index: OwnerIndex
    allowed: np.ndarray
    searched: np.ndarray  # per row: has it a vector in a space the query was embedded in?
    stamp: Stamp  # what the owner's rows were when the snapshot began (``memory_cache.py``)


def _merge_dense(visible: list[OwnerRows], scores: list[np.ndarray], window: int) -> list[tuple[str, float]]:
    hits = [
        (owner.index.ids[row], float(cosines[row]))
        for owner, cosines in zip(visible, scores, strict=True)
        for row in top_rows(cosines, owner.allowed & owner.searched, window)
    ]
    hits.sort(key=lambda h: -h[1])
    return hits[:window]


def _for_relevance(cosine: float | None, stretch: float, background: float | None) -> float | None:
    """None where relevance reads the cosine as it is (MiniLM's rows: exactly as before)."""
    if cosine is None or stretch == 1.0 or background is None:
        return None
    return for_relevance(cosine, stretch, background)


def _dense_of(
    visible: list[OwnerRows], scores: list[np.ndarray], memory_id: str
) -> tuple[float | None, int | None, bool]:
    """The memory's cosine on one scale (None if the query was not embedded in its space), the
    space it came from, and whether it is still without vectors (only its words could find it)."""
    for owner, cosines in zip(visible, scores, strict=True):
        row = owner.index.index.get(memory_id)
        if row is not None:
            pending_vector = not owner.index.vectors.has_vectors(row)
            if not owner.searched[row]:
                return None, None, pending_vector
            return float(cosines[row]), int(owner.index.vectors.spaces[row]), pending_vector
    return None, None, False
