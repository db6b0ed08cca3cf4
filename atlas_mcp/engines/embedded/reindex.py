"""Re-embed a whole store with another embedding model (``atlas-mcp reindex``).

The engine refuses to open a store whose vectors come from a different model, because mixing
vector spaces silently ruins recall. This is the way forward: every row is re-embedded in
batches and the model id is switched in the same transaction, so a crash leaves the store
entirely on the old model or entirely on the new one.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

from ...inference.embedder import BATCH_SIZE, Embedder
from . import schema
from .passages import embed_memories, to_blob
from .vectors import bump_version

BUSY_TIMEOUT_S = 30.0


def reindex(path: Path, embedder: Embedder, progress: Callable[[int, int], None] | None = None) -> int:
    """Re-embed every memory in ``path`` with ``embedder``; returns how many rows changed."""
    conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    try:
        for pragma in schema.PRAGMAS:
            conn.execute(pragma)
        schema.migrate(conn)
        conn.execute("BEGIN IMMEDIATE")
        try:
            count = _reembed(conn, embedder, progress)
            conn.execute("DELETE FROM pending_embeddings")  # every row has its vector now
            conn.execute(
                "INSERT INTO meta(key, value) VALUES ('embedding_model', ?) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (embedder.model_id,),
            )
            for (owner,) in conn.execute("SELECT DISTINCT COALESCE(user_id, '') FROM memories").fetchall():
                bump_version(conn, owner)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return count
    finally:
        conn.close()


def _reembed(
    conn: sqlite3.Connection, embedder: Embedder, progress: Callable[[int, int], None] | None
) -> int:
    rows = conn.execute("SELECT rowid, search_text FROM memories ORDER BY rowid").fetchall()
    for start in range(0, len(rows), BATCH_SIZE):
        batch = rows[start : start + BATCH_SIZE]
        vectors = embed_memories(embedder, [text for _, text in batch])
        conn.executemany(
            "UPDATE memories SET embedding = ?, embedding_model = ? WHERE rowid = ?",
            [(to_blob(v), embedder.model_id, rowid) for (rowid, _), v in zip(batch, vectors, strict=True)],
        )
        if progress:
            progress(min(start + BATCH_SIZE, len(rows)), len(rows))
    return len(rows)
