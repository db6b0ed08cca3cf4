"""Deferred embedding: a write is acknowledged once its row commits; its vectors come after.

This module owns the whole life of a row whose vectors are not stored yet:

* the ``pending_embeddings`` mark, set in the write's own transaction (``mark``), and cleared
  in the transaction that stores the vectors (``store_vectors``), so "pending" is always the truth;
* this process's **backlog** of such rows, bounded (``BACKLOG_LIMIT``): a write that would
  exceed it waits for room, so whoever comes next (a recall, a close) waits a bounded time
  however fast the writes come;
* one worker thread that embeds in batches of ``BATCH_SIZE`` (the ONNX model is ~2x cheaper
  per text in a batch than alone) and stores each batch in one transaction (one fsync);
* the **repair** of rows left pending by a process that died (or by another process still
  running): listed when the store opens, embedded in the background in small committed
  batches once start-up is over (``REPAIR_DELAY_S``), so opening never waits, the start's
  imports and first recall keep both cores, and a kill loses no finished batch;
* a recall's **claim** (``settle``): the owner's rows in this process's backlog are waited
  for (bounded by the backlog), its other pending rows jump the queue and are waited for up
  to ``RECALL_WAIT_S``; rows still pending after that are matched by their words only, and
  the recall says so (``embedding_pending`` in ``explain``), never a silent miss;
* **close**: the backlog drains for at most ``CLOSE_GRACE_S``; what is left stays marked and
  is repaired by the next open. Nothing is ever lost: the row itself is committed first.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ...inference.embedder import BATCH_SIZE, ModelChoice
from ...log import get_logger
from . import slots
from .passages import embed_by_model, to_blob
from .schema import SLOT_BITS

if TYPE_CHECKING:
    from .store import Store, Transaction

log = get_logger(__name__)

# Each sized by measurement: docs/performance.md, "Writes at any rate".
# One batch: a recall after any burst waits for at most these. Since a write waits for the disk
# once, acknowledgements outrun the model and every burst ends with the backlog full; 64 (two
# batches) doubled the recall right after a burst and bought no writes per second.
BACKLOG_LIMIT = 32
# A recall waits this long for its owner's rows nobody else is embedding: one batch, and still
# inside the start budget for the first recall after a crash.
RECALL_WAIT_S = 0.25
# ...and only for as many rows as that wait can embed; more (a crash's leftovers) are matched
# by their words at once, said so in ``explain``, and embedded first in the background.
URGENT_WAIT_ROWS = 16
CLOSE_GRACE_S = 1.5  # the TypeScript SDK sends SIGTERM 2 s after closing stdin
# The repair waits this long after the store opens: a server's imports and first recall take
# ~1 s of CPU, and a repair batch started beside them (two model threads on 2 cores) added
# ~0.5 s to the `initialize` answer. A recall's own rows never wait for it (``settle``).
REPAIR_DELAY_S = 2.0
OWN_WAIT_MAX_S = 30.0  # a safety net only: the backlog bound keeps real waits far below


def mark(conn: sqlite3.Connection, rowid: int) -> None:
    """Call in the transaction that inserts the row (with an empty embedding)."""
    conn.execute("INSERT INTO pending_embeddings(rowid) VALUES (?)", (rowid,))


def store_vectors(conn: sqlite3.Connection, rowid: int, vectors: np.ndarray, model_id: str) -> bool:
    """Store the vectors of a row still marked pending, with the model they come from; False
    if it no longer is (forgotten, re-embedded by ``update``, or stored meanwhile elsewhere)."""
    if not conn.execute("DELETE FROM pending_embeddings WHERE rowid = ?", (rowid,)).rowcount:
        return False
    conn.execute(
        "UPDATE memories SET embedding = ?, embedding_model = ? WHERE rowid = ?",
        (to_blob(vectors), model_id, rowid),
    )
    return True


def left_over(conn: sqlite3.Connection) -> list[PendingRow]:
    """Every row marked pending, with its owner (text read when its batch comes)."""
    found = conn.execute(
        f"SELECT p.rowid, s.owner FROM pending_embeddings p "
        f"JOIN owner_slots s ON s.slot = (p.rowid >> {SLOT_BITS}) ORDER BY p.rowid"
    ).fetchall()
    return [PendingRow(owner, rowid) for rowid, owner in found]


def unembedded(conn: sqlite3.Connection, owner: str) -> list[int]:
    """The owner's rows that have no vector at all yet (not those only being re-embedded)."""
    block = slots.owner_range(conn, owner)
    if block is None:
        return []
    return [
        r[0]
        for r in conn.execute(
            # CROSS JOIN keeps the (usually empty) pending table as the outer loop: SQLite
            # otherwise may walk the owner's memories and read every embedding (30 ms at 10k).
            "SELECT p.rowid FROM pending_embeddings p CROSS JOIN memories m ON m.rowid = p.rowid "
            "WHERE p.rowid BETWEEN ? AND ? AND length(m.embedding) = 0",
            block,
        )
    ]


def _texts(conn: sqlite3.Connection, rowids: list[int]) -> dict[int, str]:
    """Texts of the rows among ``rowids`` still marked pending."""
    marks = ",".join("?" * len(rowids))
    found = conn.execute(
        f"SELECT m.rowid, m.search_text FROM memories m JOIN pending_embeddings p ON p.rowid = m.rowid "
        f"WHERE m.rowid IN ({marks})",
        rowids,
    )
    return dict(found.fetchall())


@dataclass(frozen=True, slots=True)
class PendingRow:
    """A committed row whose vectors are still to come."""

    owner: str
    rowid: int
    text: str | None = None  # None: read from the store when its batch comes


@dataclass(frozen=True, slots=True)
class Embedded:
    owner: str
    rowid: int
    vectors: np.ndarray  # (passages, dimensions) float32
    model_id: str  # whose vector space they are in


# Called inside the storing transaction with the rows actually stored (the engine bumps the
# owners' versions and updates its vector cache there).
OnStored = Callable[["Transaction", list[Embedded]], None]


class DeferredEmbeddings:
    """This process's bounded backlog, its worker, and the background repair."""

    def __init__(
        self,
        models: ModelChoice,
        store: Store,
        on_stored: OnStored,
        backlog_limit: int = BACKLOG_LIMIT,
        repair_delay_s: float = REPAIR_DELAY_S,
    ) -> None:
        self._models = models
        self._store = store
        self._store_lock = store.lock  # a store never runs after the connection closed
        self._on_stored = on_stored
        self.backlog_limit = backlog_limit
        self._cond = threading.Condition()
        self._own: deque[PendingRow] = deque()
        self._own_unstored: Counter[str] = Counter()  # per owner: queued or in the current batch
        self._own_total = 0
        self._own_ids: set[int] = set()
        self._urgent: deque[PendingRow] = deque()
        self._urgent_ids: set[int] = set()
        with store.snapshot() as conn:
            self._repair: deque[PendingRow] = deque(left_over(conn))
        self._repair_after = time.monotonic() + repair_delay_s
        self._closing = False
        self._close_deadline = float("inf")
        self._abandoned = False
        if self._repair:
            log.info("repairing rows left without vectors, in the background", rows=len(self._repair))
        self._worker = threading.Thread(target=self._run, name="atlas-embed", daemon=True)
        self._worker.start()

    # -- the writer's side ---------------------------------------------------------------

    def submit(self, row: PendingRow) -> None:
        """Queue a committed row; blocks while the backlog is full (backpressure)."""
        with self._cond:
            while self._own_total >= self.backlog_limit and not self._closing:
                self._cond.wait()
            self._own.append(row)
            self._own_unstored[row.owner] += 1
            self._own_total += 1
            self._own_ids.add(row.rowid)
            self._cond.notify_all()

    @property
    def backlog(self) -> int:
        with self._cond:
            return self._own_total

    # -- the reader's side ---------------------------------------------------------------

    def settle(self, owner: str) -> None:
        """Before a recall of ``owner``: wait for its rows in this process's backlog, then give
        its other pending rows priority and wait for them up to ``RECALL_WAIT_S``."""
        with self._cond:
            self._cond.wait_for(lambda: not self._own_unstored[owner] or self._abandoned, OWN_WAIT_MAX_S)
        with self._store.snapshot() as conn:
            missing = unembedded(conn, owner)
        if not missing:
            return
        with self._cond:
            # Rows this process wrote meanwhile are embedded by the backlog anyway.
            wanted = set(missing) - self._own_ids
            fresh = wanted - self._urgent_ids
            self._urgent.extend(PendingRow(owner, rowid) for rowid in sorted(fresh))
            self._urgent_ids.update(fresh)
            self._cond.notify_all()
            if len(wanted) <= URGENT_WAIT_ROWS:
                self._cond.wait_for(lambda: not (wanted & self._urgent_ids) or self._abandoned, RECALL_WAIT_S)

    # -- the worker ----------------------------------------------------------------------

    def _run(self) -> None:
        while (batch := self._take()) is not None:
            try:
                self._embed_and_store(batch)
            except Exception as exc:  # noqa: BLE001 - the rows stay marked, which is safe
                # A recall still finds them by their words; the next open (or a recall's
                # claim) embeds them again.
                log.warning(
                    "deferred embedding failed; the rows stay pending", rows=len(batch), error=str(exc)
                )
            finally:
                self._finish(batch)

    def _take(self) -> list[PendingRow] | None:
        with self._cond:
            while True:
                if self._closing:
                    if not self._own or time.monotonic() >= self._close_deadline:
                        return None
                    return self._pop(self._own)
                for source in (self._urgent, self._own):
                    if source:
                        return self._pop(source)
                if not self._repair:
                    self._cond.wait()
                elif (delay := self._repair_after - time.monotonic()) > 0:
                    self._cond.wait(delay)
                else:
                    return self._pop(self._repair)

    @staticmethod
    def _pop(source: deque[PendingRow]) -> list[PendingRow]:
        return [source.popleft() for _ in range(min(BATCH_SIZE, len(source)))]

    def _finish(self, batch: Iterable[PendingRow]) -> None:
        with self._cond:
            for row in batch:
                if row.text is not None:  # one of this process's writes
                    self._own_unstored[row.owner] -= 1
                    if not self._own_unstored[row.owner]:
                        del self._own_unstored[row.owner]  # flat memory however many users write
                    self._own_total -= 1
                    self._own_ids.discard(row.rowid)
                self._urgent_ids.discard(row.rowid)
            self._cond.notify_all()

    def _embed_and_store(self, batch: list[PendingRow]) -> None:
        texts = {row.rowid: row.text for row in batch if row.text is not None}
        unknown = [row.rowid for row in batch if row.text is None]
        if unknown:
            with self._store.snapshot() as conn:
                texts |= _texts(conn, unknown)  # only rows still pending: nothing embedded twice
        todo = [row for row in batch if row.rowid in texts]
        if not todo:
            return
        # Each text by the model its language calls for; a row re-embedded for another model
        # (after a switch to per-language) changes space in the same UPDATE as its vector.
        embedded = embed_by_model(self._models, [texts[row.rowid] for row in todo])
        with self._store_lock:
            if self._abandoned:
                return
            # Without an fsync: the vectors and the cleared marks commit together, so a power
            # loss that takes this commit leaves the rows marked, and the next open embeds them
            # again; the next write's commit syncs it anyway. Its fsync held the store (and the
            # write or recall waiting for it) 1-5 ms after every write.
            with self._store.synchronous("NORMAL"), self._store.transaction() as tx:
                stored = [
                    Embedded(row.owner, row.rowid, v, model_id)
                    for row, (model_id, v) in zip(todo, embedded, strict=True)
                    if store_vectors(tx.conn, row.rowid, v, model_id)
                ]
                if stored:
                    self._on_stored(tx, stored)

    # -- closing -------------------------------------------------------------------------

    def close(self, grace_s: float = CLOSE_GRACE_S) -> None:
        """Drain this process's backlog for at most ``grace_s``; leave the rest marked."""
        with self._cond:
            self._closing = True
            self._close_deadline = time.monotonic() + grace_s
            self._cond.notify_all()
        # One batch may already be running when the deadline passes: allow for it.
        self._worker.join(grace_s + 2.0)
        with self._store_lock:  # no store may start after this: the connection is about to close
            self._abandoned = True
        with self._cond:
            left = self._own_total
            self._cond.notify_all()
        if left:
            log.info("closing with rows still pending; the next open embeds them", rows=left)
