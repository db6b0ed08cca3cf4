"""Move a store to the configured embedding models at once (``atlas-mcp reindex``); between
the built-in choices a store also moves in the background (``migrations.adopt_choice``).

The engine refuses to open a store whose vectors come from a model the configuration does
not use, because mixing vector spaces silently ruins recall. ``reindex`` re-embeds every row
in batches, each with the model its language calls for, and records the configuration in
the same transaction, so a crash leaves the store entirely as it was or entirely moved.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

from ...inference.base import Embedder
from ...inference.embedder import BATCH_SIZE, ModelChoice, as_choice
from .cipher import StoreKey
from .migrations import record_choice
from .passages import embed_by_model, to_blob
from .store import Store
from .versions import bump

_ADOPT_CHUNK = 1_000


def reindex(
    path: Path,
    embedder: Embedder | ModelChoice,
    progress: Callable[[int, int], None] | None = None,
    key: StoreKey | None = None,
) -> int:
    """Re-embed every memory in ``path`` with ``embedder``; returns how many rows changed."""
    models = as_choice(embedder)
    store = Store(path, key)
    try:
        with store.transaction() as tx:
            count = _reembed(tx.conn, models, progress)
            tx.conn.execute("DELETE FROM pending_embeddings")  # every row has its vector now
            record_choice(tx.conn, models.choice_id)
            for (owner,) in tx.conn.execute("SELECT DISTINCT COALESCE(user_id, '') FROM memories").fetchall():
                bump(tx.conn, owner)
        return count
    finally:
        store.close()


def _reembed(
    conn: sqlite3.Connection, models: ModelChoice, progress: Callable[[int, int], None] | None
) -> int:
    rows = conn.execute("SELECT rowid, search_text FROM memories ORDER BY rowid").fetchall()
    for start in range(0, len(rows), BATCH_SIZE):
        batch = rows[start : start + BATCH_SIZE]
        embedded = embed_by_model(models, [text for _, text in batch])
        conn.executemany(
            "UPDATE memories SET embedding = ?, embedding_model = ? WHERE rowid = ?",
            [(to_blob(v), model, rowid) for (rowid, _), (model, v) in zip(batch, embedded, strict=True)],
        )
        if progress:
            progress(min(start + BATCH_SIZE, len(rows)), len(rows))
    return len(rows)
