"""The engine additions consolidation needs: per-user state and list(since=, oldest_first=)."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta

from atlas_mcp.domain.model import MemoryType
from atlas_mcp.engines.base import ListQuery
from atlas_mcp.engines.embedded import migrations
from atlas_mcp.engines.embedded.engine import EmbeddedEngine
from atlas_mcp.inference.embedder import default_embedder
from atlas_mcp.service import MemoryService


def test_state_is_per_user_durable_and_deletable(tmp_path):
    path = tmp_path / "a.db"
    engine = EmbeddedEngine(path, default_embedder())
    engine.set_state("sarah", "k", "1")
    engine.set_state("sarah", "k", "2")
    engine.set_state("james", "k", "x")
    engine.close()
    engine = EmbeddedEngine(path, default_embedder())
    assert (
        engine.get_state("sarah", "k"),
        engine.get_state("james", "k"),
        engine.get_state("nobody", "k"),
    ) == (
        "2",
        "x",
        None,
    )
    engine.set_state("sarah", "k", None)
    assert engine.get_state("sarah", "k") is None and engine.get_state("james", "k") == "x"
    engine.close()


def test_a_store_from_before_the_state_table_is_migrated(tmp_path, legacy_store):
    path = tmp_path / "old.db"
    legacy_store(path, 1).close()
    engine = EmbeddedEngine(path, default_embedder())
    engine.set_state("sarah", "k", "v")
    assert engine.get_state("sarah", "k") == "v"
    engine.close()
    conn = sqlite3.connect(path)
    assert {r[0] for r in conn.execute("SELECT name FROM migrations")} == {
        m.name for m in migrations.MIGRATIONS
    }
    conn.close()


def test_list_since_reads_by_creation_oldest_first(engine):
    start = datetime(2026, 1, 1, tzinfo=UTC)
    ticks = iter(start + timedelta(seconds=i) for i in range(100))
    service = MemoryService(engine, clock=lambda: next(ticks))
    # occurred_at runs backwards: creation order, not event time, is what "since" follows
    ids = [
        service.write("sarah", f"event {i}", "episodic", occurred_at=f"2020-01-0{9 - i}T00:00:00Z").id
        for i in range(5)
    ]
    service.write("james", "another user's event", "episodic")
    found = engine.list(
        ListQuery(
            "sarah",
            memory_types=frozenset({MemoryType.EPISODIC}),
            since=start + timedelta(seconds=1),
            oldest_first=True,
        )
    )
    assert [m.id for m in found] == ids[2:]
    newest_first = engine.list(ListQuery("sarah", memory_types=frozenset({MemoryType.EPISODIC})))
    assert [m.id for m in newest_first] == ids  # by occurred_at, as before
