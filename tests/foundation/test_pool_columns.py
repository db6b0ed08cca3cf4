"""``Pool.from_columns`` turns each candidate's ``RowFacts`` into the pool's columns."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np

from atlas_mcp.domain.fact_columns import NO_TIME
from atlas_mcp.domain.model import Memory, MemoryType
from atlas_mcp.domain.pool import Pool, microseconds, row_facts
from atlas_mcp.domain.vocabulary import joined


def _pool(memories: list[Memory]) -> Pool:
    n = len(memories)
    facts = [row_facts(m) for m in memories]
    return Pool.from_columns(
        memories,
        [m.user_id or "" for m in memories],
        facts=facts,
        rrf=np.zeros(n),
        bm25_rank=np.zeros(n, dtype=np.int64),
        dense_rank=np.zeros(n, dtype=np.int64),
        bm25=np.full(n, np.nan),
        cosine=np.full(n, np.nan),
        relevance_cosine=np.full(n, np.nan),
        rerank=np.full(n, np.nan),
        pending=np.zeros(n, dtype=bool),
    )


def test_each_column_holds_each_candidates_fact_in_order():
    start = datetime(2024, 5, 1, 12, tzinfo=UTC)
    texts = [
        (MemoryType.EPISODIC, "Caroline: I went to the LGBTQ support group yesterday. Have you been?"),
        (MemoryType.SEMANTIC, "The user's sister lives in Lisbon"),
        (MemoryType.PROCEDURAL, "Always answer in French"),
        (MemoryType.EPISODIC, "Melanie: That sounds lovely!"),
    ]
    memories = [
        Memory(
            id=f"m{i}",
            memory_type=kind,
            user_id="u",
            text=text,
            created_at=start + timedelta(hours=i),
            occurred_at=start - timedelta(days=i) if i % 2 else None,
        )
        for i, (kind, text) in enumerate(texts)
    ]
    pool = _pool(memories)
    facts = [row_facts(m) for m in memories]
    assert pool.kind.dtype == np.uint8 and pool.kind.tolist() == [f.kind for f in facts]
    assert pool.occurred.dtype == np.int64 and pool.occurred.tolist() == [f.occurred for f in facts]
    assert pool.created.dtype == np.int64 and pool.created.tolist() == [f.created for f in facts]
    assert pool.log_words.dtype == np.float64 and pool.log_words.tolist() == [f.log_words for f in facts]
    assert pool.asks.dtype == bool and pool.asks.tolist() == [f.asks for f in facts] == [
        True,
        False,
        False,
        False,
    ]
    assert pool.speakers == [f.speaker for f in facts] and pool.speakers[0] == "Caroline"
    assert pool.words == [f.words for f in facts]
    assert pool.heads == [f.head for f in facts]
    assert pool.openings == [f.opening for f in facts]
    assert isinstance(pool.speakers, list) and isinstance(pool.words, list)
    for column, field in (
        (pool.speaker_codes, "speaker_code"),
        (pool.expires, "expires"),
        (pool.head_codes, "head_code"),
    ):
        assert column.dtype == np.int64 and column.tolist() == [getattr(f, field) for f in facts]
    for column in (pool.kind, pool.occurred, pool.log_words, pool.asks, pool.expires):
        assert column.flags.c_contiguous and column.flags.writeable  # copies, not views of the records
    assert pool.codes == [f.codes for f in facts] and pool.inner == [f.inner for f in facts]
    assert pool.word_codes.dtype == np.int32
    assert pool.word_codes.tolist() == joined([f.codes for f in facts]).tolist()
    # a subset's lists are of its own candidates, also when the whole pool's were read first
    picked = pool.subset(np.array([3, 0]))
    assert picked.speakers == ["Melanie", "Caroline"] and picked.openings == [
        facts[3].opening,
        facts[0].opening,
    ]
    assert picked.log_words.tolist() == [facts[3].log_words, facts[0].log_words]
    assert picked.word_codes.tolist() == joined([facts[3].codes, facts[0].codes]).tolist()


def test_an_empty_pool_has_empty_columns_of_the_same_types():
    pool = _pool([])
    for column, dtype in ((pool.kind, np.uint8), (pool.occurred, np.int64), (pool.log_words, np.float64)):
        assert column.shape == (0,) and column.dtype == dtype
    assert pool.asks.dtype == bool and pool.speakers == [] and pool.openings == []
    assert pool.word_codes.shape == (0,) and pool.word_codes.dtype == np.int32


def test_uses_are_read_from_the_memories_that_track_them_as_they_are_now():
    start = datetime(2024, 5, 1, 12, tzinfo=UTC)
    kinds = [MemoryType.EPISODIC, MemoryType.SEMANTIC, MemoryType.PROCEDURAL, MemoryType.SEMANTIC]
    memories = [
        Memory(
            id=f"m{i}",
            memory_type=kind,
            user_id="u",
            text=f"memory {i}",
            created_at=start,
            use_count=3 * i,
            last_used_at=start + timedelta(seconds=i) if i != 3 else None,
        )
        for i, kind in enumerate(kinds)
    ]
    for _ in range(2):  # the second time, the last uses' microseconds are the kept ones
        uses, last = _pool(memories).used()
        tracked = [m.tracks_usage for m in memories]
        assert uses.tolist() == [m.use_count if t else 0 for m, t in zip(memories, tracked, strict=True)]
        assert last.tolist() == [
            microseconds(m.last_used_at) if t else NO_TIME for m, t in zip(memories, tracked, strict=True)
        ]
    used_again = [
        m.evolve(use_count=m.use_count + 1, last_used_at=start + timedelta(days=1)) for m in memories
    ]
    assert _pool(used_again).used()[1].tolist()[1] == microseconds(start + timedelta(days=1))


def test_a_recall_drops_what_expired_by_its_instant_from_the_expiry_column():
    from atlas_mcp.domain.ranking import RecallPlan, admitted

    now = datetime(2024, 5, 1, 12, tzinfo=UTC)
    expiries = [None, now, now + timedelta(microseconds=1), now - timedelta(days=1)]
    memories = [
        Memory(
            id=f"m{i}", memory_type=MemoryType.SEMANTIC, user_id="u", text="x", created_at=now, expires_at=at
        )
        for i, at in enumerate(expiries)
    ]
    pool = _pool(memories)
    assert pool.expires.tolist() == [NO_TIME, *(microseconds(at) for at in expiries[1:])]
    plan = RecallPlan("u", "x", frozenset({MemoryType.SEMANTIC}), False, 10, 30)
    assert admitted(plan, pool, now).ids == ["m0", "m2"]  # expired at the instant itself
    assert admitted(plan, pool, now - timedelta(days=2)) is pool


def test_the_engines_use_records_follow_every_use_as_the_memories_do(tmp_path, monkeypatch):
    """The embedded engine's pool reads its candidates' uses from the records its cache keeps
    beside them (``Pool.uses``): after this process's uses, another process's and a subset,
    they must say what the memories say (use count and last use, to the microsecond)."""
    from dataclasses import replace

    from atlas_mcp import service as service_module
    from atlas_mcp.engines.embedded.engine import EmbeddedEngine
    from atlas_mcp.inference.embedder import default_embedder
    from atlas_mcp.service import MemoryService

    path = tmp_path / "atlas.db"
    mine = MemoryService(EmbeddedEngine(path, default_embedder()))
    other = MemoryService(EmbeddedEngine(path, default_embedder()))
    pools: list[Pool] = []
    rank = service_module.ranking.rank

    def kept(policy, reranker, plan, pool, now):
        pools.append(pool)
        return rank(policy, reranker, plan, pool, now)

    try:
        for text in (
            "Ines's dentist is Dr. Moreau",
            "Ines's dentist moved to Rue Oberkampf",
            "Ines drinks tea",
        ):
            mine.write("ines", text)
        mine.write("ines", "Ines went to the dentist on Monday", "episodic")
        monkeypatch.setattr(service_module.ranking, "rank", kept)
        for service in (mine, mine, other, mine, mine):  # own uses, then another process's
            service.recall("ines", "who is my dentist")
        mine.recall("ines", "who is my dentist", touch=False)
    finally:
        mine.close()
        other.close()
    pool = pools[-1]
    assert pool.uses is not None and int(pool.tracks_usage.sum()) == 3
    counts, last = pool.used()
    assert counts.max() >= 4  # the uses were counted
    for i, memory in enumerate(pool.memories):
        tracked = memory.memory_type is MemoryType.SEMANTIC
        assert counts[i] == (memory.use_count if tracked else 0)
        assert last[i] == (microseconds(memory.last_used_at) if tracked else NO_TIME)
    for made in (replace(pool, uses=None), pool.subset(np.arange(len(pool))[::-1])):
        again = replace(made, uses=None)
        assert all(np.array_equal(a, b) for a, b in zip(made.used(), again.used(), strict=True))
