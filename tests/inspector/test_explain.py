"""Explainable recall: the breakdown a recall reports is the arithmetic of ``domain.scoring``.

Every expected number below is worked out by hand from the documented defaults
(rank constant 30, decay 1.0 up to 180 days and 0.5 at 180 + 1825 days, use boost
1 + 0.2·log10(1 + n), catalog prior 0.85, track record 1 + 0.25·(2·rate − 1) with
rate = (s + 1)/(s + f + 2), fused relevance 0.5·RRF/(2/31) + 0.5·cosine).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest
from mcp import Client

from atlas_mcp.domain.scoring import ScoringPolicy
from atlas_mcp.inference.reranker import FusedScoreReranker
from atlas_mcp.mcp.server import build_server
from atlas_mcp.service import MemoryService

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def fixed_service(engine) -> MemoryService:
    return MemoryService(engine, clock=lambda: NOW)


def _only_hit(service: MemoryService, query: str, memory_id: str):
    hits = service.recall("sarah", query, k=20, min_relevance=0.0, touch=False)
    return next(h for h in hits if h.memory.id == memory_id)


def test_an_event_exactly_offset_plus_scale_old_decays_to_one_half(fixed_service):
    when = NOW - timedelta(days=180 + 1825)
    old = fixed_service.write("sarah", "Sarah flashed the hub firmware to 2.1", "episodic", occurred_at=when)
    why = _only_hit(fixed_service, "hub firmware", old.id).explanation
    assert why.multipliers.decay == pytest.approx(0.5)
    assert why.multipliers.decay_reference == when
    assert (why.multipliers.use_boost, why.multipliers.catalog_prior, why.multipliers.track_record) == (
        1.0,
        1.0,
        1.0,
    )
    assert why.score == pytest.approx(why.match * 0.5)


def test_an_event_inside_the_offset_does_not_decay(fixed_service):
    recent = fixed_service.write(
        "sarah", "Sarah flashed the hub firmware to 3.0", "episodic", occurred_at=NOW - timedelta(days=90)
    )
    assert _only_hit(fixed_service, "hub firmware", recent.id).explanation.multipliers.decay == 1.0


def test_a_fact_used_five_times_earns_most_of_a_bounded_use_boost(fixed_service, engine):
    fact = fixed_service.write("sarah", "Sarah's hub runs firmware 3.0")
    last_used = NOW - timedelta(days=10)
    stored = fixed_service.get("sarah", fact.id)
    engine.update("sarah", stored.evolve(use_count=5, last_used_at=last_used))
    why = _only_hit(fixed_service, "hub firmware", fact.id).explanation
    boost = 1 + 0.1 * (1 - math.exp(-1))  # 1 + w·(1 − e^(−uses / 5))
    assert why.multipliers.use_boost == pytest.approx(boost)
    assert why.multipliers.decay_reference == last_used  # facts age from their last use
    assert why.multipliers.decay == 1.0
    assert why.score == pytest.approx(why.match * boost)


def test_a_playbook_with_three_wins_and_one_loss_scores_its_smoothed_rate(fixed_service, engine):
    playbook = fixed_service.write(
        "sarah", "When the hub drops off wifi", "procedural",
        steps=["unplug the hub", "wait ten seconds", "plug it back in"],
    )  # fmt: skip
    engine.update("sarah", fixed_service.get("sarah", playbook.id).evolve(success_count=3, failure_count=1))
    why = _only_hit(fixed_service, "hub wifi", playbook.id).explanation
    # rate = (3 + 1) / (3 + 1 + 2) = 2/3 → 1 + 0.25·(4/3 − 1) = 1 + 1/12
    assert why.multipliers.track_record == pytest.approx(1 + 1 / 12)
    assert why.multipliers.decay == 1.0 and why.multipliers.decay_reference is None  # playbooks do not age
    assert why.score == pytest.approx(why.match * (1 + 1 / 12))


def test_a_catalog_entry_carries_the_catalog_prior(fixed_service):
    entry = {"id": "hub-manual", "title": "Hub manual", "text": "Resetting the hub firmware"}
    fixed_service.load_catalog([entry])
    why = _only_hit(fixed_service, "hub firmware", "hub-manual").explanation
    assert why.multipliers.catalog_prior == pytest.approx(0.85)
    assert why.score == pytest.approx(why.match * 0.85)


def test_rrf_and_fused_relevance_follow_the_ranks_and_cosine_reported(engine):
    fused = MemoryService(engine, clock=lambda: NOW, reranker=FusedScoreReranker(ScoringPolicy()))
    fused.write("sarah", "Sarah's dog is called Biscuit")
    fused.write("sarah", "Sarah drinks oat milk in her coffee")
    fused.write("sarah", "Sarah's dog Biscuit hates the vacuum cleaner")
    hits = fused.recall("sarah", "dog", k=10, min_relevance=0.0, touch=False)
    assert hits, "the query matches stored memories"
    for hit in hits:
        why = hit.explanation
        ranks = [r for r in (why.bm25_rank, why.dense_rank) if r is not None]
        assert why.rrf_score == pytest.approx(sum(1 / (30 + r) for r in ranks))
        expected_match = 0.5 * min(why.rrf_score / (2 / 31), 1.0) + 0.5 * max(why.dense_similarity, 0.0)
        assert why.match == pytest.approx(expected_match)
        assert why.reranker == "fused"
        assert why.score == pytest.approx(hit.score)
    first = hits[0].explanation
    if first.bm25_rank == 1 and first.dense_rank == 1:  # top of both branches: RRF at its maximum
        assert first.rrf_score == pytest.approx(2 / 31)


def test_a_memory_only_the_dense_branch_finds_has_no_bm25_rank(fixed_service):
    pet = fixed_service.write("sarah", "Sarah's dog is called Biscuit")
    why = _only_hit(fixed_service, "puppy", pet.id).explanation  # no shared word: dense only
    assert why.bm25_rank is None and why.dense_rank is not None
    assert why.rrf_score == pytest.approx(1 / (30 + why.dense_rank))


async def test_the_recall_tool_adds_the_breakdown_only_when_asked(fixed_service):
    event = fixed_service.write(
        "sarah", "Sarah moved to Lisbon", "episodic", occurred_at=NOW - timedelta(days=180 + 1825)
    )
    async with Client(build_server(fixed_service, "sarah")) as client:
        plain = await client.call_tool("recall_memory", {"query": "moved to Lisbon"})
        explained = await client.call_tool("recall_memory", {"query": "moved to Lisbon", "explain": True})
    assert "explain" not in plain.structured_content["memories"][0]
    memory = explained.structured_content["memories"][0]
    assert memory["id"] == event.id
    explain = memory["explain"]
    assert explain["multipliers"]["decay"] == pytest.approx(0.5)
    assert explain["multipliers"]["decay_reference"] == (NOW - timedelta(days=2005)).isoformat()
    assert explain["score"] == memory["score"]
    factors = ("decay", "use_boost", "catalog_prior", "track_record", "time_fit")
    product = math.prod(explain["multipliers"][name] for name in factors)
    assert explain["score"] == pytest.approx(explain["match"] * product, abs=1e-6)
    assert explain["relevance"] == explain["match"]  # the match's earlier name, still emitted
    assert explain["rrf_score"] == pytest.approx(
        sum(1 / (30 + r) for r in (explain["bm25_rank"], explain["dense_rank"]) if r is not None), abs=1e-6
    )
