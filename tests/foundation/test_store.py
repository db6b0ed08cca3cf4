"""The store's transaction: what a change registers for after its commit runs only then, once,
under the store's lock; a change that rolls back leaves this process's caches as they were."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from atlas_mcp.engines.embedded.engine import EmbeddedEngine
from atlas_mcp.engines.embedded.index import IndexCache
from atlas_mcp.engines.embedded.store import Store
from atlas_mcp.errors import Conflict
from atlas_mcp.inference.embedder import default_embedder
from atlas_mcp.service import MemoryService


def test_hooks_run_once_after_commit_under_the_lock(tmp_path: Path):
    store = Store(tmp_path / "atlas.db")
    ran: list[tuple[str, bool]] = []
    try:
        with store.transaction() as tx:
            tx.conn.execute("INSERT INTO meta(key, value) VALUES ('k', 'v')")
            tx.after_commit(lambda: ran.append(("committed", store.lock._is_owned())))
            assert ran == []
        assert ran == [("committed", True)]
        with pytest.raises(RuntimeError), store.transaction() as tx:
            tx.conn.execute("INSERT INTO meta(key, value) VALUES ('k2', 'v')")
            tx.after_commit(lambda: ran.append(("rolled back", True)))
            raise RuntimeError("the change fails")
        assert ran == [("committed", True)]
        assert [r[0] for r in store.conn.execute("SELECT key FROM meta WHERE key LIKE 'k%'")] == ["k"]
        with store.transaction():
            pass
        assert ran == [("committed", True)]  # a hook runs once, with its own transaction
    finally:
        store.close()


def test_a_write_that_lost_a_race_leaves_the_caches_as_a_fresh_load(tmp_path: Path):
    engine = EmbeddedEngine(tmp_path / "atlas.db", default_embedder())
    service = MemoryService(engine)
    try:
        old = service.write("u1", "The user's car is blue")
        service.write("u1", "The user's car is green", supersedes_id=old.id)
        service.recall("u1", "car colour", touch=False)  # the caches hold the owner now
        held = engine._index.peek("u1")
        late = service.get("u1", old.id).evolve(id="late-1", supersedes=(old.id,))
        with pytest.raises(Conflict):
            engine.write(late, supersede=[old.id])
        assert engine._index.peek("u1") is held and "late-1" not in held.index
        with engine.store.snapshot() as conn:
            fresh = IndexCache(engine.embedder.dimensions).get(conn, "u1")
        assert held.version == fresh.version and held.ids == fresh.ids
        assert np.array_equal(held.superseded, fresh.superseded)
    finally:
        service.close()


def test_a_recall_waits_for_a_change_and_its_cache_updates(tmp_path: Path):
    """A recall's snapshot takes the store's lock: it sees a write and its cache update whole."""
    store = Store(tmp_path / "atlas.db")
    inside, release = threading.Event(), threading.Event()
    seen: list[str | None] = []

    def change() -> None:
        with store.transaction() as tx:
            tx.conn.execute("INSERT INTO meta(key, value) VALUES ('k', 'v')")
            tx.after_commit(lambda: (inside.set(), release.wait(5)))

    def read() -> None:
        with store.snapshot() as conn:
            row = conn.execute("SELECT value FROM meta WHERE key = 'k'").fetchone()
            seen.append(row[0] if row else None)

    writer = threading.Thread(target=change)
    writer.start()
    assert inside.wait(5)  # committed, its hook still running
    reader = threading.Thread(target=read)
    reader.start()
    reader.join(0.2)
    assert seen == []  # the reader waits for the hook, not only for the commit
    release.set()
    writer.join(5)
    reader.join(5)
    assert seen == ["v"]
    store.close()
