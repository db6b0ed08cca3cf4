"""The pool ranked as arrays orders every pool as the per-candidate arithmetic does
(``ranking_reference``): the same order, and match, score and relevance equal within float
rounding (numpy's exp and pow may differ from the C library's in the last bit)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from atlas_mcp.domain import ranking
from atlas_mcp.domain.fusion import Candidate
from atlas_mcp.domain.limits import Limits
from atlas_mcp.domain.model import Memory, MemoryType, Step
from atlas_mcp.domain.scoring import ScoringPolicy
from atlas_mcp.inference.reranker import ContextReranker

from . import ranking_reference as reference

NOW = datetime(2026, 6, 1, 12, tzinfo=UTC)
WORDS = [
    "hub",
    "firmware",
    "Lisbon",
    "dentist",
    "birthday",
    "birthdays",
    "code",
    "swap",
    "paint",
    "会议",
    "猫",
    "code?",  # a turn that asks: the next speaker's reply inherits from it
    "my sister lives in Lisbon",
    "swap？",
]
SPEAKERS = ["Sarah: ", "Tom: ", "Melanie: ", ""]
QUERIES = [
    "what is the hub firmware code",
    "what did Tom paint last week",
    "my most recent dentist visit",
    "the first birthday in Lisbon",
    "what happened yesterday",
    "会议 猫",
    "hi",
    "what did Sarah swap 3 days ago",
    "¿Dónde vive mi hermana?",  # read by its words alone, surely: the lift
]


@st.composite
def memories(draw, position: int) -> Memory:
    kind = draw(st.sampled_from(list(MemoryType)))
    text = draw(st.sampled_from(SPEAKERS)) + " ".join(
        draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=8))
    )
    created = NOW - timedelta(minutes=draw(st.integers(0, 60 * 24 * 900)))
    memory = Memory(
        id=f"m{draw(st.integers(0, 10**6))}-{position}",
        memory_type=kind,
        user_id=None if kind is MemoryType.CATALOG else "sarah",
        text=text,
        created_at=created,
    )
    if kind is MemoryType.EPISODIC:
        # events close together form episodes: most within minutes of one of a few anchors
        anchor = draw(st.sampled_from([0, 40, 60 * 24 * 3, 60 * 24 * 400]))
        when = NOW - timedelta(minutes=anchor + draw(st.integers(0, 45)), seconds=draw(st.integers(0, 59)))
        return memory.evolve(occurred_at=draw(st.sampled_from([when, None])) or None)
    if kind is MemoryType.SEMANTIC:
        used = draw(st.sampled_from([None, NOW - timedelta(days=draw(st.integers(0, 3000)))]))
        return memory.evolve(use_count=draw(st.integers(0, 40)), last_used_at=used)
    if kind is MemoryType.PROCEDURAL:
        return memory.evolve(
            name="a playbook",
            steps=(Step(1, "do it"),),
            use_count=draw(st.integers(0, 9)),
            success_count=draw(st.integers(0, 6)),
            failure_count=draw(st.integers(0, 6)),
        )
    return memory.evolve(title="an entry")


@st.composite
def pools(draw) -> list[Candidate]:
    size = draw(st.integers(0, 40))
    out = []
    for position in range(size):
        memory = draw(memories(position))
        cosine = draw(st.one_of(st.none(), st.floats(-0.2, 0.95)))
        out.append(
            Candidate(
                memory,
                rrf_score=draw(st.floats(0.001, 0.06)),
                dense_similarity=cosine,
                bm25_score=draw(st.one_of(st.none(), st.floats(0.0, 12.0))),
                relevance_similarity=draw(st.sampled_from([None, 0.3])) if cosine is not None else None,
            )
        )
    return out


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pools(), st.sampled_from(QUERIES), st.booleans())
def test_the_array_ranking_is_the_per_candidate_ranking(candidates, query, standalone):
    policy = ScoringPolicy(standalone_context=standalone)
    plan = ranking.plan(policy, Limits(), ranking.RecallQuery("sarah", query, 100, min_relevance=0.0), NOW)
    hits = ranking.rank(policy, ContextReranker(policy), plan, candidates, NOW)
    expected = reference.rank(plan.query, candidates, plan.intent, NOW, policy, plan.k)
    assert [h.memory.id for h in hits] == [e[0] for e in expected[: len(hits)]]
    assert len(hits) == min(len(expected), 100)  # restated facts are shown once
    for hit, (_, match, score, relevance) in zip(hits, expected, strict=False):
        assert hit.explanation.match == pytest.approx(match, rel=1e-12, abs=1e-15)
        assert hit.score == pytest.approx(score, rel=1e-12, abs=1e-15)
        assert hit.relevance == pytest.approx(relevance, rel=1e-9, abs=1e-12)


@given(
    st.lists(
        st.tuples(st.sampled_from([0.5, 0.25, -0.0, 0.0, 1.0, float("nan")]), st.sampled_from("abcdef")),
        max_size=12,
    )
)
def test_best_first_orders_by_score_then_id(rows):
    """Equal scores (0.0 and -0.0 among them) and NaN go by id, as one sort by (score, id)
    orders them; without ties the ids are not read and the order is the same."""
    scores = np.array([s for s, _ in rows], dtype=np.float64)
    ids = [f"{name}{at}" for at, (_, name) in enumerate(rows)]
    expected = np.lexsort((np.argsort(np.argsort(np.array(ids, dtype=str), kind="stable")), -scores))
    assert ranking.best_first(scores, ids).tolist() == expected.tolist()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pools(), st.sampled_from(QUERIES), st.sampled_from([0.0, 0.2, 0.45, 0.7]), st.sampled_from([1, 3, 100])
)
def test_what_clears_the_floor_is_the_first_k_of_the_whole_order_that_do(candidates, query, floor, k):
    """The hits of a recall with a floor and ``k`` are, in order, the first ``k`` of the whole
    resolved order whose relevance reaches the floor."""
    policy = ScoringPolicy()

    def hits(k: int, floor: float) -> list[ranking.Hit]:
        plan = ranking.plan(
            policy, Limits(), ranking.RecallQuery("sarah", query, k, min_relevance=floor), NOW
        )
        return ranking.rank(policy, ContextReranker(policy), plan, candidates, NOW)

    whole = hits(100, 0.0)
    expected = [(h.memory.id, h.relevance) for h in whole if h.relevance >= floor][:k]
    assert [(h.memory.id, h.relevance) for h in hits(k, floor)] == expected


def test_each_hit_carries_what_resolution_marked_it_with():
    """A recall shows a fact's newer value first, marks the older as outdated by it and folds
    the newer one's restatement into it: each hit's ``outdated_by`` and ``copies`` are what
    ``resolve`` says of its candidate, and the folded copy is not shown."""
    texts = [
        "Lena lives in Leeds",
        "Lena moved to Glasgow",
        "Lena now lives in Glasgow",
        "Lena drinks green tea",
    ]
    memories = [
        Memory(
            id=f"m{i}",
            memory_type=MemoryType.SEMANTIC,
            user_id="sarah",
            text=text,
            created_at=NOW - timedelta(days=40 - i),
        )
        for i, text in enumerate(texts)
    ]
    candidates = [
        Candidate(m, rrf_score=0.05 - i / 100, dense_similarity=0.6 - i / 20) for i, m in enumerate(memories)
    ]
    policy = ScoringPolicy()
    plan = ranking.plan(
        policy, Limits(), ranking.RecallQuery("sarah", "where does Lena live", 10, min_relevance=0.0), NOW
    )
    hits = {h.memory.id: h for h in ranking.rank(policy, ContextReranker(policy), plan, candidates, NOW)}
    assert set(hits) == {"m0", "m1", "m3"}  # m2 restates m1: folded into it
    assert (hits["m0"].outdated_by, hits["m0"].explanation.copies) == ("m1", ())
    assert (hits["m1"].outdated_by, hits["m1"].explanation.copies) == (None, ("m2",))
    assert (hits["m3"].outdated_by, hits["m3"].explanation.copies) == (None, ())


def test_a_fact_under_a_candidate_below_the_floor_is_still_resolved():
    """The best-scored candidate (a turn the question's words are not in) falls under the floor;
    the old value of Lena's home is then the first hit of a recall of one. It is still shown
    after its replacement, as a recall of every candidate shows it, not alone and unmarked."""
    rows = [
        ("m0", MemoryType.EPISODIC, "Tom: the hub needs a firmware update", 0.06, 0.75, 3),
        ("m1", MemoryType.SEMANTIC, "Lena lives in Leeds", 0.05, 0.6, 40),
        ("m2", MemoryType.SEMANTIC, "Lena moved to Glasgow", 0.04, 0.55, 10),
    ]
    candidates = []
    for memory_id, kind, text, rrf, cosine, days in rows:
        at = NOW - timedelta(days=days)
        episodic = kind is MemoryType.EPISODIC
        memory = Memory(
            id=memory_id,
            memory_type=kind,
            user_id="sarah",
            text=text,
            created_at=at,
            occurred_at=at if episodic else None,
        )
        candidates.append(Candidate(memory, rrf_score=rrf, dense_similarity=cosine))
    policy = ScoringPolicy()

    def hits(k: int, floor: float) -> list[ranking.Hit]:
        query = ranking.RecallQuery("sarah", "where does Lena live", k, min_relevance=floor)
        plan = ranking.plan(policy, Limits(), query, NOW)
        return ranking.rank(policy, ContextReranker(policy), plan, candidates, NOW)

    whole = hits(100, 0.0)
    assert [h.memory.id for h in whole] == ["m0", "m2", "m1"]
    assert whole[0].relevance < 0.2 <= min(h.relevance for h in whole[1:])
    (only,) = hits(1, 0.2)
    assert (only.memory.id, only.outdated_by) == ("m2", None)
    assert [(h.memory.id, h.outdated_by) for h in hits(2, 0.2)] == [("m2", None), ("m1", "m2")]
