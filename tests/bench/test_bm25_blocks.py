"""Per-owner rowid blocks: BM25 over the caller's block ranks exactly as the whole-index query.

The oracle below is the query recall used before blocks existed (one FTS5 query over every
tenant's postings, filtered by owner afterwards). It must return the same ids in the same
order, with the same scores, for users, the catalog, superseded rows and duplicate texts.
"""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from atlas_mcp.bench import corpus
from atlas_mcp.domain.model import Memory, MemoryType
from atlas_mcp.engines.base import RecallPlan
from atlas_mcp.engines.embedded import schema
from atlas_mcp.engines.embedded.engine import EmbeddedEngine, fts_query
from atlas_mcp.inference.embedder import default_embedder

WHOLE_INDEX = (
    "SELECT m.id, bm25(memories_fts) AS score FROM memories_fts "
    "JOIN memories m ON m.rowid = memories_fts.rowid "
    "WHERE memories_fts MATCH ? AND (m.user_id = ? OR (? AND m.user_id IS NULL)) "
    "AND m.memory_type IN ({types}) AND (? OR m.superseded_by IS NULL) ORDER BY score LIMIT ?"
)


def _load(engine: EmbeddedEngine, memories: list[Memory]) -> None:
    vectors = np.random.default_rng(len(memories)).standard_normal((len(memories), 384)).astype(np.float32)
    engine.write_many(memories, vectors / np.linalg.norm(vectors, axis=1, keepdims=True))


def _oracle(conn: sqlite3.Connection, plan: RecallPlan) -> list[tuple[str, float]]:
    types = sorted(t.value for t in plan.memory_types)
    sql = WHOLE_INDEX.format(types=",".join("?" * len(types)))
    catalog = MemoryType.CATALOG in plan.memory_types
    params = (fts_query(plan.query), plan.user_id, catalog, *types, plan.include_superseded, plan.window)
    return [(r[0], -r[1]) for r in conn.execute(sql, params)]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    engine = EmbeddedEngine(tmp_path_factory.mktemp("blocks") / "atlas.db", default_embedder())
    items = corpus.specs(11, 300)
    # Interleave tenants' writes, as a shared server would see them.
    for start in range(0, 300, 50):
        for tenant in range(3):
            _load(engine, corpus.tenant_memories(tenant, items)[start : start + 50])
    created = corpus.tenant_memories(0, items[:1])[0].created_at
    _load(engine, [
        Memory(id=f"cat{i}", memory_type=MemoryType.CATALOG, user_id=None, text=text, created_at=created,
               title=f"Guide {i}")
        for i, text in enumerate(["How to restart the router", "Firmware update guide for the camera",
                                  "Lunch spots: ramen and tacos", "How to restart the router"])
    ])  # fmt: skip
    yield engine
    engine.close()


def test_blocks_rank_exactly_like_the_whole_index(store):
    queries = corpus.queries(11, 40) + ["restart the router", "the", "Lisbon", "ramen tacos lunch"]
    kinds = [frozenset(MemoryType), frozenset({MemoryType.SEMANTIC}), frozenset(MemoryType) - {MemoryType.CATALOG}]
    checked = 0
    for query in queries:
        for user in (corpus.tenant_id(0), corpus.tenant_id(2)):
            for memory_types in kinds:
                for superseded in (False, True):
                    for window in (5, 80):
                        plan = RecallPlan(user, query, memory_types, superseded, window, 30)
                        assert store._bm25(plan) == _oracle(store._conn, plan), (query, user, window)
                        checked += 1
    assert checked > 500


def test_each_owner_lives_in_its_own_rowid_block(store):
    rows = store._conn.execute(
        "SELECT COALESCE(user_id, ''), MIN(rowid) >> ?, MAX(rowid) >> ? FROM memories GROUP BY 1",
        (schema.SLOT_BITS, schema.SLOT_BITS),
    ).fetchall()
    assert len(rows) == 4 and all(low == high for _, low, high in rows)
    assert len({low for _, low, _ in rows}) == 4


def test_migration_moves_an_old_store_into_blocks_and_keeps_its_order(tmp_path):
    """A store written before blocks (auto rowids, interleaved owners) is renumbered on open."""
    path = tmp_path / "atlas.db"
    engine = EmbeddedEngine(path, default_embedder())
    items = corpus.specs(12, 60)
    for start in range(0, 60, 20):
        for tenant in range(2):
            _load(engine, corpus.tenant_memories(tenant, items)[start : start + 20])
    plans = [RecallPlan(corpus.tenant_id(t), q, frozenset(MemoryType), False, 80, 30)
             for t in range(2) for q in corpus.queries(12, 10)]  # fmt: skip
    engine.close()
    conn = sqlite3.connect(path, isolation_level=None)  # rewind to the pre-block layout
    conn.execute("BEGIN")
    conn.execute("CREATE TEMP TABLE o AS SELECT rowid AS old, ROW_NUMBER() OVER (ORDER BY id) AS new FROM memories")
    conn.execute("UPDATE memories SET rowid = (SELECT new FROM o WHERE old = memories.rowid)")
    conn.execute("INSERT INTO memories_fts(memories_fts) VALUES ('rebuild')")
    conn.execute("DROP TABLE owner_slots")
    conn.execute("PRAGMA user_version = 2")
    conn.execute("COMMIT")
    old_layout = [_oracle(conn, p) for p in plans]
    conn.close()
    reopened = EmbeddedEngine(path, default_embedder())
    try:
        assert [reopened._bm25(p) for p in plans] == old_layout
        _load(reopened, corpus.tenant_memories(5, items[:3]))
        assert reopened.list(corpus.tenant_id(5), limit=10)
    finally:
        reopened.close()
