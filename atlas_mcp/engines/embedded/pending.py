"""Embeddings computed after a write is acknowledged.

A write is durable once its row, its FTS entry and a ``pending_embeddings`` mark commit
(~2 ms with the fsync). Embedding its text costs 3-25 ms more (MiniLM on 2 cores, by
length), so one worker thread does that right after, stores the vector and clears the mark.
No recall can miss it: this process's recalls first wait for the owner's pending
embeddings, another process embeds a still-pending row itself when it loads the owner's
vectors, and rows a crash left pending are embedded when the store is next opened.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from ...inference.embedder import Embedder, embed_one
from ...log import get_logger

log = get_logger(__name__)


@dataclass(frozen=True, slots=True)
class PendingWrite:
    """A committed memory whose embedding is still to come."""

    owner: str
    version_before: int  # the owner's version just before the write committed
    rowid: int
    memory_id: str
    memory_type: str
    text: str
    superseded: tuple[str, ...]


class EmbeddingQueue:
    """One worker embedding this process's writes in commit order.

    One worker, first in first out: once an owner's latest write is stored, so are all of its
    earlier ones, so only the latest is remembered per owner (memory stays flat however many
    writes a user makes without recalling).
    """

    def __init__(self, embedder: Embedder, store: Callable[[PendingWrite, np.ndarray], None]) -> None:
        self._embedder = embedder
        self._store = store
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="atlas-embed")
        self._lock = threading.Lock()
        self._latest: dict[str, Future[None]] = {}

    def submit(self, write: PendingWrite) -> None:
        with self._lock:
            self._latest[write.owner] = self._executor.submit(self._embed, write)

    def _embed(self, write: PendingWrite) -> None:
        try:
            self._store(write, embed_one(self._embedder, write.text))
        except Exception as exc:  # noqa: BLE001 - the row stays pending, which is safe
            # The next load of the owner's vectors embeds a pending row itself, so a recall
            # still finds this memory; the next open of the store stores its vector.
            log.warning("deferred embedding failed; it will be redone on load", error=str(exc))

    def wait(self, owner: str) -> None:
        """Block until every write of ``owner`` submitted so far has its embedding stored."""
        with self._lock:
            latest = self._latest.get(owner)
        if latest is not None:
            latest.result()

    def close(self) -> None:
        """Finish (and store) every queued embedding."""
        self._executor.shutdown(wait=True)
