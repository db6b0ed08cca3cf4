"""What engines hand the ranking: fused candidates with their branches' evidence, and cosines
of any model on MiniLM's scale."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from atlas_mcp.domain.fusion import candidates_from_fused, reciprocal_rank_fusion
from atlas_mcp.domain.model import Memory, MemoryType
from atlas_mcp.domain.similarity import (
    BACKGROUND_PRIOR_ROWS,
    REFERENCE_BACKGROUND,
    for_relevance,
    on_reference_scale,
    query_backgrounds,
    relevance_cosine,
)

NOW = datetime(2026, 6, 1, tzinfo=UTC)


def _memory(memory_id: str) -> Memory:
    return Memory(id=memory_id, memory_type=MemoryType.SEMANTIC, user_id="u", text=memory_id, created_at=NOW)


def test_candidates_keep_the_fused_order_and_each_branchs_evidence():
    fused = reciprocal_rank_fusion([["a", "b", "gone"], ["c", "a"]], rank_constant=30, window=10)
    memories = {i: _memory(i) for i in "abc"}
    found = candidates_from_fused(
        fused, memories, {"a": 2.0, "b": 1.0}, {"c": 0.5, "a": 0.4}, {"c": 0.3}, pending={"b"}
    )
    assert [c.memory.id for c in found] == [f.id for f in fused if f.id != "gone"]
    a, b, c = (next(x for x in found if x.memory.id == i) for i in "abc")
    assert (a.bm25_rank, a.dense_rank, a.bm25_score, a.dense_similarity) == (1, 2, 2.0, 0.4)
    assert (b.dense_rank, b.dense_similarity, b.embedding_pending) == (None, None, True)
    assert (c.bm25_rank, c.bm25_score, c.relevance_similarity, c.relevance_cosine) == (None, None, 0.3, 0.3)
    assert a.relevance_cosine == 0.4 and not a.embedding_pending
    assert all(x.rrf_score == next(f.score for f in fused if f.id == x.memory.id) for x in found)


def test_a_models_background_lands_on_minilms():
    e5 = (0.754, 0.027)
    assert on_reference_scale(0.754, e5) == pytest.approx(REFERENCE_BACKGROUND[0])
    assert on_reference_scale(0.754 + 0.027, e5) == pytest.approx(sum(REFERENCE_BACKGROUND))
    assert on_reference_scale(np.float32(0.3), REFERENCE_BACKGROUND) == pytest.approx(0.3)


def test_relevance_reads_a_crowded_models_cosine_stretched_from_the_querys_background():
    assert relevance_cosine(0.3, 1.0, 0.1) is None  # MiniLM: as it is
    assert relevance_cosine(None, 2.5, 0.1) is None and relevance_cosine(0.3, 2.5, None) is None
    assert relevance_cosine(0.3, 2.5, 0.2) == for_relevance(0.3, 2.5, 0.2)
    assert for_relevance(0.2, 2.5, 0.2) == pytest.approx(REFERENCE_BACKGROUND[0])
    assert for_relevance(0.3, 2.5, 0.2) == pytest.approx(REFERENCE_BACKGROUND[0] + 0.25)


def test_a_querys_background_in_a_space_is_its_rows_mean_shrunk_to_the_reference():
    scores = [np.array([0.5, 0.3, 0.9], dtype=np.float32), np.array([0.1], dtype=np.float32)]
    spaces = [np.array([1, 1, 0]), np.array([1])]  # owner 0: two rows in space 1; owner 1: one
    found = query_backgrounds(scores, spaces, [1])
    expected = (0.5 + 0.3 + 0.1 + BACKGROUND_PRIOR_ROWS * REFERENCE_BACKGROUND[0]) / (
        3 + BACKGROUND_PRIOR_ROWS
    )
    assert found == {1: pytest.approx(expected)}
    assert query_backgrounds(scores, [np.array([-1, -1, 0]), np.array([-1])], [1]) == {
        1: pytest.approx(REFERENCE_BACKGROUND[0])  # no row measured in it: the reference
    }
