"""The embedded engine: one SQLite file (WAL) + local ONNX embeddings, zero set-up.

A facade over its parts: the file (``store.py``: transactions and row SQL; ``migrations.py``),
each owner's index in memory (``index.py``: vectors and postings, kept current through
``versions.py``), decoded memories (``memory_cache.py``), recall's reads (``search.py``), and
the deferred embedding of writes (``pending.py``): a write commits its row and is embedded
right after, by a bounded background worker. Several processes may share one data directory.

Every change reads the owner's stamp inside its write transaction and updates this process's
caches only once that has committed (``Transaction.after_commit``), under the store's lock,
which a recall's snapshot holds too: a cache never shows a change that rolled back, and a
recall never sees one half-applied.
"""

from __future__ import annotations

import builtins  # EmbeddedEngine.list shadows the type in the annotations after it
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from datetime import datetime
from functools import partial
from pathlib import Path

from ...domain.audit import AuditEntry
from ...domain.model import Memory
from ...domain.pool import Pool
from ...errors import Conflict
from ...inference.base import Embedder
from ...inference.embedder import ModelChoice, as_choice
from ..base import AuditQuery, Engine, EngineInfo, ListQuery, RecallPlan, StoreStats
from . import audit_log, migrations, pending, rows, schema, slots, store, versions
from .cipher import FileSealer, StoreKey
from .index import IndexCache
from .memory_cache import MemoryCache
from .passages import embed_by_model, to_blob
from .pending import DeferredEmbeddings, Embedded, PendingRow
from .reading import Moved
from .search import Search
from .slots import CATALOG_OWNER, owner_key
from .stats import store_stats
from .store import Store, Transaction
from .versions import Change


class EmbeddedEngine(Engine):
    def __init__(
        self, path: Path, embedder: Embedder | ModelChoice, threads: int = 2, key: StoreKey | None = None
    ) -> None:
        self.path = Path(path)
        self.models = as_choice(embedder)
        self.info = EngineInfo(name="embedded", embedding_model=self.models.choice_id)
        self.store = Store(self.path, key)  # ``store`` and ``search`` are public for maintenance.py
        self._lock = self.store.lock
        self._index = IndexCache(
            self.models.dimensions,
            postings_folder=self.path.with_name(self.path.name + "-postings"),
            sealer=FileSealer(key, self.path) if key is not None else None,
        )
        self._memories = MemoryCache()
        self._adopt_models()
        # Never embeds anything here: rows a crash left pending are repaired in the background.
        self._deferred = DeferredEmbeddings(self.models, self.store, self._on_stored)
        self.search = Search(self.store, self._index, self._memories, self.models, self._deferred, threads)

    @property
    def embedder(self) -> Embedder:
        """The model English text is embedded with (the only one, unless ``per-language``)."""
        return self.models.embedder(self.models.members[0])

    def _adopt_models(self) -> None:
        with self.store.transaction() as tx:
            migrations.adopt_configured_models(tx, self.models, str(self.path))

    def _changed(self, tx: Transaction, owner: str, dropped: Sequence[str] = ()) -> Change:
        """Record in this transaction that the owner's rows changed (its version), and keep this
        process's decoded memories of it once the change commits, all but ``dropped``."""
        change = versions.record_change(tx.conn, owner)
        tx.after_commit(partial(self._memories.advance, change, tuple(dropped)))
        return change

    # -- writes ------------------------------------------------------------------------

    def write(
        self, memory: Memory, *, supersede: Sequence[str] = (), trail: Sequence[AuditEntry] = ()
    ) -> None:
        """Commit the memory and its audit ``trail`` now (one commit: a write waited for the
        disk twice, 1-5 ms each) and embed it right after (``pending.py``); this waits only
        while the process's backlog of unembedded writes is full. Catalog entries, loaded by
        an admin, are embedded before they commit."""
        if memory.is_catalog:
            self._write_catalog(memory)
            self.record(trail)
            return
        owner = owner_key(memory.user_id)
        row = rows.to_row(memory)
        row |= {
            "embedding": schema.PENDING_EMBEDDING,
            "embedding_model": self.models.model_for(row["search_text"]),
        }
        with self.store.transaction() as tx:
            row = {"rowid": slots.next_rowid(tx.conn, owner)} | row
            rowid = store.insert(tx.conn, row)
            store.mark_superseded(tx.conn, memory, supersede)
            pending.mark(tx.conn, rowid)
            if trail:
                audit_log.append(tx.conn, trail)
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
        with self.store.transaction() as tx:
            row = {"rowid": slots.next_rowid(tx.conn, CATALOG_OWNER)} | row
            store.upsert_catalog(tx.conn, row)
            versions.bump(tx.conn, CATALOG_OWNER)

    def touch(self, user_id: str, ids: Sequence[str], at: datetime) -> None:
        if not ids:
            return
        # Every recall touches: its fsync cost 1-4 ms a recall, for statistics that may lag a
        # power loss (a process crash loses nothing).
        with self.store.synchronous("NORMAL"), self.store.transaction() as tx:
            store.count_uses(tx.conn, user_id, ids, at)
            change = versions.record_use(tx.conn, user_id)
            tx.after_commit(partial(self._memories.record_use, change, ids, at))

    def update(self, user_id: str, memory: Memory) -> None:
        row = rows.to_row(memory)
        sets = {k: row[k] for k in rows.MUTABLE}
        with self._lock:
            stored = store.stored_search_text(self.store.conn, user_id, memory.id)
        if stored is None:
            raise Conflict(f"memory {memory.id!r} not found for this user")
        if stored != row["search_text"]:
            ((model_id, vectors),) = embed_by_model(self.models, [row["search_text"]])
            sets |= {"embedding": to_blob(vectors), "embedding_model": model_id}
        with self.store.transaction() as tx:
            rowid = store.update(tx.conn, user_id, memory.id, sets)
            if "embedding" in sets and rowid is not None:  # a write's deferred vector would now be stale
                tx.conn.execute("DELETE FROM pending_embeddings WHERE rowid = ?", (rowid,))
            self._changed(tx, owner_key(user_id), dropped=[memory.id])

    def forget(self, user_id: str, memory_id: str) -> bool:
        with self.store.transaction() as tx:
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
            return store.by_ids(self.store.conn, user_id, ids, include_catalog)

    def list(self, query: ListQuery) -> list[Memory]:
        with self._lock:
            return store.page(self.store.conn, query)

    def scan(self, query: ListQuery) -> Iterator[Memory]:
        """One SELECT without a limit: SQLite answers it from one snapshot."""
        return iter(self.list(replace(query, limit=-1, offset=0)))

    def get_state(self, user_id: str, key: str) -> str | None:
        with self._lock:
            return store.get_state(self.store.conn, user_id, key)

    def set_state(self, user_id: str, key: str, value: str | None) -> None:
        with self.store.transaction() as tx:
            store.set_state(tx.conn, user_id, key, value)

    def record(self, entries: Sequence[AuditEntry]) -> None:
        if entries:
            with self.store.transaction() as tx:
                audit_log.append(tx.conn, entries)

    def audit(self, query: AuditQuery) -> builtins.list[AuditEntry]:
        with self._lock:
            return audit_log.read(self.store.conn, query)

    def candidates(self, plan: RecallPlan) -> Pool:
        try:
            return self.search.candidates(plan)
        except Moved:  # committed to between the stamps it reused and its first read: read again
            return self.search.candidates(plan)

    def cosines(self, plan: RecallPlan, text: str, ids: Sequence[str]) -> dict[str, float]:
        return self.search.cosines(plan, text, ids)

    def likeness(self, plan: RecallPlan, texts: Sequence[str]) -> builtins.list[float] | None:
        return self.search.likeness(plan, texts)

    def warm(self, user_id: str) -> None:
        self.search.warm(user_id)

    def warm_rows(self, user_id: str) -> bool:
        return self.search.warm_rows(user_id)

    def preload(
        self,
        user_id: str,
        after_first_recall: bool = True,
        first_reads: Callable[[Sequence[Memory]], object] | None = None,
        fact_reads: Callable[[Sequence[Memory]], object] | None = None,
    ) -> None:
        self.search.preload(user_id, after_first_recall, first_reads, fact_reads)

    def keep_row_facts(self, after_first_recall: bool = True) -> None:
        self.search.keep_row_facts(after_first_recall)

    def stats(self) -> StoreStats:
        with self._lock:
            return store_stats(self.store.conn, self.path)

    def close(self) -> None:
        self._deferred.close()  # drains briefly; what is left stays pending for the next open
        self.search.close()
        self.store.close()
