"""Named migrations: each applied once, recorded by name; a store that counted its migrations
in ``PRAGMA user_version`` is bridged, and every store ends with the same schema."""

from __future__ import annotations

import shutil
import sqlite3
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from atlas_mcp.domain.audit import AuditEntry
from atlas_mcp.engines.base import AuditQuery
from atlas_mcp.engines.embedded import migrations
from atlas_mcp.engines.embedded.engine import EmbeddedEngine
from atlas_mcp.engines.embedded.store import Store
from atlas_mcp.errors import ConfigurationError
from atlas_mcp.inference.embedder import MINILM_PREVIOUS_ID, open_models
from atlas_mcp.service import MemoryService

WRITTEN_BEFORE = Path(__file__).parent / "data" / "store_before_named_migrations.db"
NAMES = [m.name for m in migrations.MIGRATIONS]


def _read(path: Path, sql: str) -> list[tuple]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def _schema(path: Path) -> set[tuple]:
    return set(_read(path, "SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'"))


def _applied(path: Path) -> dict[str, str]:
    return dict(_read(path, "SELECT name, applied_at FROM migrations ORDER BY rowid"))


def test_a_store_written_before_named_migrations_is_bridged_and_serves(tmp_path: Path):
    """The file was written by atlas-mcp itself at 110f652 (``data/write_store_before_named_migrations.py``)."""
    path = tmp_path / "atlas.db"
    shutil.copyfile(WRITTEN_BEFORE, path)
    assert _read(path, "PRAGMA user_version") == [(8,)]
    assert ("table", "memories_fts") in {(t, n) for t, n, _ in _schema(path)}
    service = MemoryService(EmbeddedEngine(path, open_models("per-language", 2)))
    try:
        assert list(_applied(path)) == NAMES  # the eight counted, the routing from meta, the FTS drop run
        names = {n for _, n, _ in _schema(path)}
        assert not {n for n in names if n.startswith("memories_fts")} and "memories_ai" not in names
        assert "recall_filter" not in {c[1] for c in _read(path, "PRAGMA table_info(memories)")}
        assert _read(path, "SELECT key FROM meta") == [("embedding_model",)]
        # Routed already: only the rows of MiniLM's first integer recipe are queued, to move to
        # this one (one statement, so a row the repair finishes meanwhile is in neither).
        assert _read(
            path,
            "SELECT count(*) FROM pending_embeddings WHERE rowid NOT IN "
            f"(SELECT rowid FROM memories WHERE embedding_model = '{MINILM_PREVIOUS_ID}')",
        ) == [(0,)]
        assert _read(path, "PRAGMA integrity_check") == [("ok",)]
        hits = service.recall("ana", "where does Ana live now", min_relevance=0.0, touch=False)
        assert hits[0].memory.text == "Ana moved to Nantes in October."
        assert "Ana lives in Lyon." not in [h.memory.text for h in hits]
        assert "Ana's locker code is 4312." not in [m.text for m in service.list("ana", limit=50)]
        assert service.recall("wang", "冰箱", min_relevance=0.0)[0].memory.text == "王伟不喜欢冰箱的嗡嗡声。"
        assert service.get_state("ana", "consolidated_until") == "2026-11-02T09:00:00+00:00"
        written = service.write("ana", "Ana adopted a cat named Miso.")
        assert service.recall("ana", "what is the cat called", min_relevance=0.0)[0].memory.id == written.id
    finally:
        service.close()
    assert _read(path, "PRAGMA user_version") == [(8,)]  # an older atlas-mcp finds nothing to redo


def test_every_numbered_version_reaches_the_schema_of_a_new_store(tmp_path: Path, legacy_store):
    fresh = tmp_path / "fresh.db"
    Store(fresh).close()
    for version in range(migrations.LEGACY_STEPS + 1):
        path = tmp_path / f"v{version}.db"
        legacy_store(path, version).close()
        Store(path).close()
        assert _schema(path) == _schema(fresh), f"from user_version {version}"
        assert list(_applied(path)) == NAMES


def test_each_migration_runs_once(tmp_path: Path):
    path = tmp_path / "atlas.db"
    Store(path).close()
    first = _applied(path)
    Store(path).close()
    assert _applied(path) == first and list(first) == NAMES


def test_processes_opening_a_new_store_at_once_apply_each_migration_once(tmp_path: Path):
    path = tmp_path / "atlas.db"
    errors: list[BaseException] = []

    def open_and_close() -> None:
        try:
            Store(path).close()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=open_and_close) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert list(_applied(path)) == NAMES


def test_many_processes_opening_new_stores_at_once_all_open_them(tmp_path: Path):
    """SQLite can refuse ``journal_mode=WAL`` on a file another connection is turning to WAL,
    at once and past the busy timeout: each open must wait it out (an MCP client starting a few
    servers on a fresh install). 4 openers on each of 150 new stores; ~2% of them failed."""
    errors: list[BaseException] = []

    def open_and_close(path: Path) -> None:
        try:
            Store(path).close()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    for n in range(150):
        path = tmp_path / f"{n}" / "atlas.db"
        threads = [threading.Thread(target=open_and_close, args=(path,)) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert errors == []


def test_a_store_numbered_past_what_this_version_knows_is_refused(tmp_path: Path):
    path = tmp_path / "atlas.db"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version={migrations.LEGACY_STEPS + 1}")
    conn.close()
    with pytest.raises(ConfigurationError, match="newer than this atlas-mcp"):
        Store(path)


def test_an_audit_table_made_before_its_migration_is_kept(tmp_path: Path):
    """Stores recorded their first audit entry by making the table then; the migration that
    makes it for every store leaves such a table and its entries as they are."""
    path = tmp_path / "atlas.db"
    engine = EmbeddedEngine(path, open_models("per-language", 2))
    entry = AuditEntry(datetime(2026, 12, 5, tzinfo=UTC), "ana", "write", "m1", "tool", "stdio")
    engine.record([entry])
    engine.close()
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("DELETE FROM migrations WHERE name = 'audit-trail'")
    conn.close()
    engine = EmbeddedEngine(path, open_models("per-language", 2))
    try:
        assert engine.audit(AuditQuery("ana")) == [entry]
        assert engine.audit(AuditQuery("nobody")) == []
    finally:
        engine.close()
    assert "audit-trail" in _applied(path)
