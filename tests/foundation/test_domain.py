"""Pure domain rules, checked against hand-computed numbers."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from atlas_mcp.domain.fusion import fused_columns, fused_keys, max_rrf_score, reciprocal_rank_fusion
from atlas_mcp.domain.model import Contradiction, Memory, MemoryType
from atlas_mcp.domain.multipliers import (
    MultiplierPolicy,
    final_score,
    gaussian_decay,
    multipliers,
    track_record,
    use_boost,
)
from atlas_mcp.domain.supersession import check_targets, penalised_confidence
from atlas_mcp.errors import Conflict, InvalidInput, NotFound

POLICY = MultiplierPolicy()
NOW = datetime(2026, 6, 1, tzinfo=UTC)


def fact(id_: str = "f1", user: str = "sarah", **kw) -> Memory:
    return Memory(id=id_, memory_type=MemoryType.SEMANTIC, user_id=user, text="t", created_at=NOW, **kw)


def test_rrf_sums_reciprocal_ranks_with_rank_constant():
    fused = reciprocal_rank_fusion([["a", "b", "c"], ["b", "d"]], rank_constant=30, window=80)
    scores = {f.id: f.score for f in fused}
    assert scores["b"] == pytest.approx(1 / 32 + 1 / 31)
    assert scores["a"] == pytest.approx(1 / 31)
    assert [f.id for f in fused] == ["b", "a", "d", "c"]
    assert fused[0].ranks == (2, 1)


def test_rrf_window_cuts_inputs_and_output():
    fused = reciprocal_rank_fusion([["a", "b", "c"], ["c", "d", "e"]], rank_constant=30, window=2)
    assert {f.id for f in fused} <= {"a", "b", "c", "d"}
    assert len(fused) == 2


@given(
    st.lists(st.lists(st.sampled_from("abcdefghij"), max_size=10), min_size=1, max_size=3),
    st.integers(1, 60),
    st.integers(1, 12),
)
def test_rrf_is_its_definition(rankings, rank_constant, window):
    """Score = sum of 1/(k + rank) over the lists' first ``window`` entries (first occurrence);
    best score first, then best single rank, then id; cut to ``window``."""
    expected = {}
    for ranking in rankings:
        firsts = {}
        for rank, doc in enumerate(ranking[:window], start=1):
            firsts.setdefault(doc, rank)
        for doc, rank in firsts.items():
            score, best = expected.get(doc, (0.0, rank))
            expected[doc] = (score + 1.0 / (rank_constant + rank), min(best, rank))
    order = sorted(expected, key=lambda d: (-expected[d][0], expected[d][1], d))[:window]
    fused = reciprocal_rank_fusion(rankings, rank_constant, window)
    assert [f.id for f in fused] == order
    assert all(math.isclose(f.score, expected[f.id][0]) for f in fused)


@given(
    st.lists(st.lists(st.sampled_from("abcdefghij"), max_size=10), min_size=1, max_size=3),
    st.integers(1, 60),
    st.integers(1, 12),
)
def test_rrf_columns_are_the_fusion_exactly(rankings, rank_constant, window):
    """The engine's array fusion gives ``reciprocal_rank_fusion``'s ids, order, ranks and
    scores to the last bit (the same float operations in the same order)."""
    fused = reciprocal_rank_fusion(rankings, rank_constant, window)
    columns = fused_columns(rankings, rank_constant, window)
    assert columns.ids == [f.id for f in fused]
    assert columns.score.tolist() == [f.score for f in fused]
    assert columns.ranks.tolist() == [[r or 0 for r in f.ranks] for f in fused]


@given(
    st.lists(st.lists(st.sampled_from("abcdefghij"), max_size=10, unique=True), min_size=1, max_size=3),
    st.integers(1, 60),
    st.integers(1, 12),
    st.permutations(range(10)),
)
def test_fusion_over_keys_is_the_fusion_of_their_ids(rankings, rank_constant, window, keys):
    """Keys standing for ids (in any order of their own), ties broken by the ids' order:
    the ids' fusion, its order, ranks and scores to the last bit."""
    key_of = {doc: keys[at] for at, doc in enumerate("abcdefghij")}
    doc_of = {key: doc for doc, key in key_of.items()}
    columns = fused_columns(rankings, rank_constant, window)
    fused = fused_keys(
        [np.array([key_of[d] for d in r], dtype=np.int64) for r in rankings],
        rank_constant,
        window,
        lambda found: np.array(["abcdefghij".index(doc_of[k]) for k in found.tolist()], dtype=np.int64),
    )
    assert [doc_of[k] for k in fused.keys.tolist()] == columns.ids
    assert fused.score.tolist() == columns.score.tolist()
    assert fused.ranks.tolist() == columns.ranks.tolist()


def test_max_rrf_is_first_in_every_branch():
    assert max_rrf_score(2, 30) == pytest.approx(2 / 31)


@pytest.mark.parametrize(
    ("age_days", "expected"),
    [(0, 1.0), (180, 1.0), (180 + 1825, 0.5), (720, math.exp(-(540**2) / (2 * 1825**2 / (2 * math.log(2)))))],
)
def test_gaussian_decay_matches_elasticsearch_gauss(age_days, expected):
    assert gaussian_decay(age_days, POLICY) == pytest.approx(expected)


def test_720_day_old_memory_keeps_about_094():
    assert gaussian_decay(720, POLICY) == pytest.approx(0.9406, abs=1e-3)


def test_use_boost_saturates():
    assert use_boost(0, POLICY) == 1.0
    assert use_boost(5, POLICY) == pytest.approx(1 + 0.1 * (1 - math.exp(-1)))
    assert use_boost(500, POLICY) == pytest.approx(1.1)


def test_track_record_is_smoothed_around_one():
    assert track_record(0, 0, POLICY) == 1.0
    assert track_record(1, 0, POLICY) == pytest.approx(1 + 0.25 * (2 * (2 / 3) - 1))
    assert track_record(10, 0, POLICY) > track_record(1, 0, POLICY) > track_record(0, 1, POLICY)
    assert 0.75 <= track_record(0, 1000, POLICY) < track_record(0, 1, POLICY)


def test_multipliers_per_type():
    old_event = Memory(
        id="e",
        memory_type=MemoryType.EPISODIC,
        user_id="u",
        text="t",
        created_at=NOW,
        occurred_at=NOW - timedelta(days=2005),
    )
    assert multipliers(old_event, NOW, POLICY).decay == pytest.approx(0.5)
    used_fact = fact(use_count=500, last_used_at=NOW)
    m = multipliers(used_fact, NOW, POLICY)
    assert (m.decay, m.use_boost, m.catalog_prior) == (1.0, pytest.approx(1.1), 1.0)
    entry = Memory(id="c", memory_type=MemoryType.CATALOG, user_id=None, text="t", created_at=NOW)
    assert multipliers(entry, NOW, POLICY).catalog_prior == 0.85
    playbook = Memory(
        id="p",
        memory_type=MemoryType.PROCEDURAL,
        user_id="u",
        text="t",
        created_at=NOW,
        success_count=3,
        failure_count=1,
    )
    factors = multipliers(playbook, NOW, POLICY)
    assert factors.track_record == pytest.approx(track_record(3, 1, POLICY))
    assert final_score(0.5, factors) == pytest.approx(0.5 * factors.product)


def test_harsh_contradiction_costs_point_one_clamped_at_zero():
    assert penalised_confidence(0.9, Contradiction.HARSH, 0.1) == pytest.approx(0.8)
    assert penalised_confidence(None, Contradiction.HARSH, 0.1) == pytest.approx(0.9)
    assert penalised_confidence(0.05, Contradiction.HARSH, 0.1) == 0.0
    assert penalised_confidence(0.9, Contradiction.NATURAL, 0.1) == 0.9


def test_supersession_targets_must_be_live_own_same_type():
    check_targets(MemoryType.SEMANTIC, ["f1"], [fact()], "sarah")
    with pytest.raises(NotFound):
        check_targets(MemoryType.SEMANTIC, ["f1"], [fact(user="james")], "sarah")
    with pytest.raises(NotFound):
        check_targets(MemoryType.SEMANTIC, ["missing"], [], "sarah")
    with pytest.raises(Conflict):
        check_targets(MemoryType.SEMANTIC, ["f1"], [fact(superseded_by="f2")], "sarah")
    with pytest.raises(InvalidInput):
        check_targets(MemoryType.EPISODIC, ["f1"], [fact()], "sarah")
    playbook = Memory(id="p", memory_type=MemoryType.PROCEDURAL, user_id="sarah", text="t", created_at=NOW)
    with pytest.raises(InvalidInput):
        check_targets(MemoryType.SEMANTIC, ["p"], [playbook], "sarah")


def test_evolve_is_dataclasses_replace():
    """``Memory.evolve`` builds the copy itself (a recall evolves each memory whose use it
    records): it must stay exactly ``dataclasses.replace``, which it can only while Memory has
    no ``__post_init__`` and no field outside ``__init__``."""
    import dataclasses
    from datetime import UTC, datetime, timedelta

    import pytest

    from atlas_mcp.domain.model import Memory, MemoryType

    assert not hasattr(Memory, "__post_init__")
    assert all(f.init for f in dataclasses.fields(Memory))
    now = datetime(2026, 12, 5, 12, tzinfo=UTC)
    memory = Memory(
        id="m1", memory_type=MemoryType.SEMANTIC, user_id="u", text="Ines lives in Leeds", created_at=now
    )
    for changes in (
        {},
        {"use_count": 3, "last_used_at": now + timedelta(hours=1)},
        {"text": "Ines lives in Glasgow", "supersedes": ("m0",), "confidence": 0.5},
        {"superseded_by": "m2", "superseded_at": now, "metadata": {"k": [1]}},
    ):
        evolved, replaced = memory.evolve(**changes), dataclasses.replace(memory, **changes)
        assert evolved == replaced and type(evolved) is Memory
        assert all(getattr(evolved, f.name) is getattr(replaced, f.name) for f in dataclasses.fields(Memory))
    with pytest.raises(TypeError):
        memory.evolve(no_such_field=1)
