"""Move a store to the configured embedding models: at once (``atlas-mcp reindex``), or in
the background when a store switches to ``per-language`` (``adopt_choice``).

The engine refuses to open a store whose vectors come from a model the configuration does
not use, because mixing vector spaces silently ruins recall. ``reindex`` re-embeds every row
in batches, each with the model its language calls for, and records the configuration in
the same transaction, so a crash leaves the store entirely as it was or entirely moved.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

from ...inference.embedder import BATCH_SIZE, Embedder, ModelChoice, as_choice
from .passages import embed_by_model, to_blob
from .store import Store
from .vectors import bump_version

_ADOPT_CHUNK = 1_000


def reindex(
    path: Path, embedder: Embedder | ModelChoice, progress: Callable[[int, int], None] | None = None
) -> int:
    """Re-embed every memory in ``path`` with ``embedder``; returns how many rows changed."""
    models = as_choice(embedder)
    store = Store(path)
    try:
        with store.transaction() as tx:
            count = _reembed(tx.conn, models, progress)
            tx.conn.execute("DELETE FROM pending_embeddings")  # every row has its vector now
            tx.conn.execute(
                "INSERT INTO meta(key, value) VALUES ('embedding_model', ?) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (models.choice_id,),
            )
            for (owner,) in tx.conn.execute("SELECT DISTINCT COALESCE(user_id, '') FROM memories").fetchall():
                bump_version(tx.conn, owner)
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


def adopt_choice(conn: sqlite3.Connection, models: ModelChoice) -> int:
    """In the caller's write transaction: record ``models`` as the store's configuration and
    mark every row whose vector comes from another model than its language now calls for
    (a Chinese memory embedded by MiniLM) for re-embedding; returns how many.

    The marked rows keep their vectors, compared in their own space, until the background
    repair (``pending.py``) replaces vector and model in one UPDATE. Deciding costs one
    language detection (~20 µs) per row of a model the choice still writes, once.
    """
    due = mark_misrouted(conn, models)
    conn.execute("UPDATE meta SET value = ? WHERE key = 'embedding_model'", (models.choice_id,))
    return due


def mark_misrouted(conn: sqlite3.Connection, models: ModelChoice) -> int:
    """Mark for re-embedding every row whose vector comes from another model than its
    language calls for; returns how many.

    A row from a model the choice no longer writes (MiniLM's float run) is due whatever its
    language, so only rows of the choice's own models are read and their language detected
    (a store of 30k rows moving off the float run answered `initialize` at 1.3 s, against
    2.3 s when every row was read)."""
    members = ", ".join("?" * len(models.members))
    stale = conn.execute(
        "INSERT OR IGNORE INTO pending_embeddings(rowid) SELECT rowid FROM memories "
        f"WHERE length(embedding) > 0 AND embedding_model NOT IN ({members})",
        models.members,
    ).rowcount
    due = []
    cursor = conn.execute(
        "SELECT rowid, search_text, embedding_model FROM memories "
        f"WHERE length(embedding) > 0 AND embedding_model IN ({members})",
        models.members,
    )
    while chunk := cursor.fetchmany(_ADOPT_CHUNK):
        due.extend((rowid,) for rowid, text, model in chunk if models.model_for(text) != model)
    conn.executemany("INSERT OR IGNORE INTO pending_embeddings(rowid) VALUES (?)", due)
    return stale + len(due)
