"""Helpers shared by the reliability tests: scale knob, store snapshots, seeding."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable
from pathlib import Path

from atlas_mcp.engines.embedded.engine import EmbeddedEngine
from atlas_mcp.inference.embedder import default_embedder
from atlas_mcp.service import MemoryService

SCALE_ENV = "RELIABILITY_SCALE"  # not ATLAS_*: the suite clears those per test
# Columns recall may change (usage statistics); everything else is fixed once written.
TOUCH_COLUMNS = frozenset({"last_used_at", "use_count"})


def scaled(base: int) -> int:
    """``base`` iterations in CI; ``RELIABILITY_SCALE=10`` runs ten times as many."""
    return max(1, round(base * float(os.environ.get(SCALE_ENV, "1"))))


def database(data_dir: Path) -> Path:
    return data_dir / "atlas.db"


def snapshot(db: Path) -> dict[str, dict]:
    """Every stored memory (all columns but the embedding) by id, read straight from SQLite."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    conn.row_factory = sqlite3.Row
    try:
        columns = [r[1] for r in conn.execute("PRAGMA table_info(memories)") if r[1] != "embedding"]
        rows = conn.execute(f"SELECT {', '.join(columns)} FROM memories").fetchall()
    finally:
        conn.close()
    return {r["id"]: dict(r) for r in rows}


def scalar(db: Path, sql: str):
    """The one value ``sql`` selects, read over a connection of its own."""
    conn = sqlite3.connect(db, timeout=30)
    try:
        return conn.execute(sql).fetchone()[0]
    finally:
        conn.close()


def integrity(db: Path) -> str:
    return scalar(db, "PRAGMA integrity_check")


def seed(
    data_dir: Path, memories: dict[str, Iterable[str]], catalog: Iterable[dict] = ()
) -> dict[str, list[str]]:
    """Write semantic facts per user (and catalog entries) through the service; ids per user."""
    service = MemoryService(EmbeddedEngine(database(data_dir), default_embedder()))
    try:
        ids = {user: [service.write(user, text).id for text in texts] for user, texts in memories.items()}
        if catalog:
            service.load_catalog(list(catalog))
    finally:
        service.close()
    return ids
