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
from collections import defaultdict
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
    """One worker embedding this process's writes in commit order."""

    def __init__(self, embedder: Embedder, store: Callable[[PendingWrite, np.ndarray], None]) -> None:
        self._embedder = embedder
        self._store = store
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="atlas-embed")
        self._lock = threading.Lock()
        self._by_owner: dict[str, list[Future[None]]] = defaultdict(list)

    def submit(self, write: PendingWrite) -> None:
        with self._lock:
            self._by_owner[write.owner].append(self._executor.submit(self._embed, write))

    def _embed(self, write: PendingWrite) -> None:
        self._store(write, embed_one(self._embedder, write.text))

    def wait(self, owner: str) -> None:
        """Block until every write of ``owner`` submitted so far has its embedding stored.

        A failure is logged, not raised: the row stays marked pending, and the next load of
        the owner's vectors embeds it, so the recall waiting here still sees it.
        """
        with self._lock:
            futures = self._by_owner.pop(owner, [])
        for future in futures:
            try:
                future.result()
            except Exception as exc:  # noqa: BLE001 - any failure leaves the row pending, which is safe
                log.warning("deferred embedding failed; it will be redone on load", error=str(exc))

    def close(self) -> None:
        """Finish (and store) every queued embedding."""
        self._executor.shutdown(wait=True)
