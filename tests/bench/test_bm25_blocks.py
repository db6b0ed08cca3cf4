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
from atlas_mcp.domain.lexical import detect_language
from atlas_mcp.domain.model import Memory, MemoryType
from atlas_mcp.engines.base import ListQuery, RecallPlan
from atlas_mcp.engines.embedded import rows, schema
from atlas_mcp.engines.embedded.engine import STEM_WEIGHT, TERM_WEIGHT, EmbeddedEngine, fts_query
from atlas_mcp.inference.embedder import default_embedder

WHOLE_INDEX = (
    f"SELECT m.id, bm25(memories_fts, {TERM_WEIGHT}, {STEM_WEIGHT}, 0.0) AS score FROM memories_fts "
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
    params = (
        fts_query(plan.query, detect_language(plan.query)),
        plan.user_id,
        catalog,
        *types,
        plan.include_superseded,
        plan.window,
    )
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
    kinds = [
        frozenset(MemoryType),
        frozenset({MemoryType.SEMANTIC}),
        frozenset(MemoryType) - {MemoryType.CATALOG},
    ]
    checked = 0
    for query in queries:
        for user in (corpus.tenant_id(0), corpus.tenant_id(2)):
            for memory_types in kinds:
                for superseded in (False, True):
                    for window in (5, 80):
                        plan = RecallPlan(user, query, memory_types, superseded, window, 30)
                        assert store.lexical(plan) == _oracle(store._conn, plan), (query, user, window)
                        checked += 1
    assert checked > 500


def test_each_owner_lives_in_its_own_rowid_block(store):
    rows = store._conn.execute(
        "SELECT COALESCE(user_id, ''), MIN(rowid) >> ?, MAX(rowid) >> ? FROM memories GROUP BY 1",
        (schema.SLOT_BITS, schema.SLOT_BITS),
    ).fetchall()
    assert len(rows) == 4 and all(low == high for _, low, high in rows)
    assert len({low for _, low, _ in rows}) == 4


def _interleaved(seed: int, count: int, tenants: int, step: int) -> list[Memory]:
    items = corpus.specs(seed, count)
    per_tenant = [corpus.tenant_memories(t, items) for t in range(tenants)]
    return [
        m
        for start in range(0, count, step)
        for memories in per_tenant
        for m in memories[start : start + step]
    ]


def _store_at_version_2(path, memories: list[Memory]) -> None:
    """A store as written before owner blocks and indexed filters: auto rowids, owners interleaved."""
    conn = sqlite3.connect(path, isolation_level=None)
    schema.migrate(conn, upto=2)
    vectors = np.random.default_rng(len(memories)).standard_normal((len(memories), 384)).astype(np.float32)
    old_columns = [c for c in rows.COLUMNS if not c.startswith("lexical_")]  # added by migration 7
    columns = (*old_columns, "embedding", "embedding_model")
    sql = f"INSERT INTO memories ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
    model = default_embedder().model_id
    conn.execute("BEGIN")
    for memory, vector in zip(
        memories, vectors / np.linalg.norm(vectors, axis=1, keepdims=True), strict=True
    ):
        row = rows.to_row(memory)
        conn.execute(sql, (*(row[c] for c in old_columns), vector.tobytes(), model))
    conn.execute("COMMIT")
    conn.close()


def test_migrated_store_ranks_exactly_like_one_built_today(tmp_path):
    """Migrations 3 (owner blocks), 4 (filters in the index) and 7 (analysed text) turn an old store into exactly
    the store the current code writes: same blocks, same order, same BM25 scores."""
    memories = _interleaved(12, 60, 2, 20)
    _store_at_version_2(tmp_path / "old.db", memories)
    migrated = EmbeddedEngine(tmp_path / "old.db", default_embedder())
    fresh = EmbeddedEngine(tmp_path / "new.db", default_embedder())
    try:
        _load(fresh, memories)
        plans = [RecallPlan(corpus.tenant_id(t), q, kinds, superseded, 80, 30)
                 for t in range(2) for q in corpus.queries(12, 10)
                 for kinds in (frozenset(MemoryType), frozenset({MemoryType.SEMANTIC}))
                 for superseded in (False, True)]  # fmt: skip
        assert [migrated.lexical(p) for p in plans] == [fresh.lexical(p) for p in plans]
        assert any(migrated.lexical(p) for p in plans)
        _load(migrated, corpus.tenant_memories(5, corpus.specs(12, 3)))
        assert migrated.list(ListQuery(corpus.tenant_id(5), limit=10))
    finally:
        migrated.close()
        fresh.close()
