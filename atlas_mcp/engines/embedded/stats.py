"""``stats()`` for the embedded engine: counts straight from the owner index, size from disk."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ...domain.model import MemoryType
from ..base import StoreStats, TypeCount

# SQLite keeps recent writes in the WAL until a checkpoint: the store is all three files.
_STORE_SUFFIXES = ("", "-wal", "-shm")


def store_stats(conn: sqlite3.Connection, path: Path) -> StoreStats:
    found = conn.execute(
        "SELECT user_id, memory_type, COUNT(*), COUNT(superseded_by), COUNT(expires_at) FROM memories "
        "GROUP BY user_id, memory_type ORDER BY user_id IS NOT NULL, user_id, memory_type"
    ).fetchall()
    counts = tuple(TypeCount(r[0], MemoryType(r[1]), r[2], r[3], r[4]) for r in found)
    pending = conn.execute("SELECT COUNT(*) FROM pending_embeddings").fetchone()[0]
    return StoreStats(
        counts=counts, size_bytes=_size_on_disk(path), location=str(path), awaiting_embedding=pending
    )


def _size_on_disk(path: Path) -> int:
    files = (path.with_name(path.name + suffix) for suffix in _STORE_SUFFIXES)
    return sum(f.stat().st_size for f in files if f.exists())
