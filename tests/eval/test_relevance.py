"""The context rerank (``domain.context_rerank``) on small hand-made pools."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from atlas_mcp.domain.context_rerank import (
    ContextRerankPolicy,
    context_match,
    episodes,
    fused_scores,
    named_in,
)
from atlas_mcp.domain.fusion import Candidate
from atlas_mcp.domain.limits import Limits
from atlas_mcp.domain.model import Memory, MemoryType
from atlas_mcp.domain.openings import speaker
from atlas_mcp.domain.pool import Pool
from atlas_mcp.domain.query import lexical_query
from atlas_mcp.domain.ranking import RecallQuery, plan
from atlas_mcp.domain.scoring import ScoringPolicy

T0 = datetime(2026, 3, 1, 18, 0, tzinfo=UTC)


def event(i: int, text: str, at: datetime, user: str = "sarah") -> Memory:
    return Memory(
        id=f"e{i}",
        memory_type=MemoryType.EPISODIC,
        user_id=user,
        text=text,
        created_at=at + timedelta(seconds=i),
        occurred_at=at,
    )


def pool(*signals: tuple[Memory, float | None, float | None]) -> Pool:
    """A pool of memories with their cosine and BM25 score (None: that branch missed it)."""
    return Pool.of([Candidate(m, None, dense_similarity=d, bm25_score=b) for m, d, b in signals])


def test_events_group_into_episodes_by_time_gap_and_owner():
    later = T0 + timedelta(hours=5)
    memories = [
        event(3, "c", later),
        event(1, "a", T0),
        event(2, "b", T0 + timedelta(minutes=10)),
        event(4, "d", T0, user="james"),
    ]
    groups = episodes(pool(*((m, None, None) for m in memories)), timedelta(minutes=30)).groups()
    assert sorted(groups) == sorted([[1, 2], [0], [3]])


def test_a_turn_next_to_a_strong_match_outranks_an_equal_stranger():
    # e1 matches the query strongly; e2 (its answer) and e9 (another day) score the same alone.
    found = pool(
        (event(1, "Sarah: what was the code on the hub?", T0), 0.9, 8.0),
        (event(2, "Tom: it said E-214 after the swap", T0), 0.3, 0.0),
        (event(9, "Tom: it said nothing after the dinner", T0 + timedelta(days=9)), 0.3, 0.0),
        (event(7, "Sarah: the weather is nice", T0 + timedelta(days=20)), 0.1, 0.0),
    )
    relevance = context_match("code on the hub", found, ContextRerankPolicy())
    assert relevance[0] == 1.0
    assert relevance[1] > relevance[2]
    alone = ContextRerankPolicy(context_weight=0, episode_weight=0, reply_weight=0)
    flat = context_match("code on the hub", found, alone)
    assert flat[1] == pytest.approx(flat[2])


def test_a_reply_inherits_from_the_question_it_answers():
    # The same match twice: in one conversation Melanie asks what the query asks and Caroline
    # answers; in the other Melanie says it and Caroline chats on. Only the answer gains.
    later = T0 + timedelta(days=9)
    found = pool(
        (event(1, "Melanie: Anything you're excited about in the adoption?", T0), 0.6, 4.0),
        (event(2, "Caroline: Making a family for kids who need one.", T0), 0.2, 0.0),
        (event(3, "Melanie: I'm excited about the adoption.", later), 0.6, 4.0),
        (event(4, "Caroline: Making pottery with the kids.", later), 0.2, 0.0),
        (event(5, "Caroline: Lovely weather?", T0 + timedelta(days=20)), 0.1, 0.0),
        (event(6, "Caroline: Yes, lovely.", T0 + timedelta(days=20)), 0.1, 0.0),
    )
    question = "What is Caroline excited about in the adoption process?"
    relevance = context_match(question, found, ContextRerankPolicy())
    plain = context_match(question, found, ContextRerankPolicy(reply_weight=0))
    assert relevance[1] / relevance[3] > 1.05 * plain[1] / plain[3]
    # A question that matches less than the pool's mean lends nothing.
    assert relevance[5] / relevance[4] == pytest.approx(plain[5] / plain[4])


def test_naming_the_speaker_lifts_their_turns():
    found = pool(
        (event(1, "Caroline: I painted a lake.", T0), 0.5, 1.0),
        (event(2, "Melanie: I painted a lake.", T0 + timedelta(days=3)), 0.5, 1.0),
    )
    relevance = context_match("What did melanie paint?", found, ContextRerankPolicy())
    assert relevance[1] == 1.0 > relevance[0]
    assert speaker("Melanie: hi") == "Melanie"
    assert speaker("note: buy milk") is None


def test_relevance_is_one_for_the_best_and_never_above():
    found = pool(*((event(i, f"Sarah: turn {i} " + "word " * i, T0), 0.1 * i, float(i)) for i in range(1, 6)))
    relevance = context_match("turn", found, ContextRerankPolicy())
    assert max(relevance) == 1.0
    assert all(0.0 < r <= 1.0 for r in relevance)
    assert len(context_match("turn", pool(), ContextRerankPolicy())) == 0


def test_the_lexical_query_keeps_content_words_names_and_months():
    assert lexical_query("What did Caroline do in May 2023?") == "Caroline May 2023"
    assert lexical_query("Is my IT hub showing E-214?") == "IT hub showing E 214"
    assert lexical_query("who am I") == "who am I"  # nothing but function words: keep them all


def test_the_recall_plan_carries_the_lexical_query_unless_switched_off():
    planned = plan(ScoringPolicy(), Limits(), RecallQuery("sarah", "What is error E-214?"), T0)
    assert (planned.query, planned.lexical_text) == ("What is error E-214?", "error E 214")
    plain = plan(
        ScoringPolicy(lexical_content_words=False), Limits(), RecallQuery("sarah", "What is it?"), T0
    )
    assert plain.lexical_text == "What is it?"


def test_the_length_prior_needs_enough_events_to_know_a_typical_length():
    """Among a handful of events the spread floor alone sets the z-scores, so 22 words against
    16 was worth half a standard deviation of cosine ("Where did I travel recently?" ranked a
    router fault above the holiday): below ``length_min_events`` the prior stays out; with
    enough events a one-word turn still ranks below a full one."""
    policy = ContextRerankPolicy()
    days = [T0 - timedelta(days=d) for d in (12, 45, 90)]
    few = pool(
        (
            event(
                1, "Sarah reported error E-214 on her hub after her broadband router was replaced.", days[0]
            ),
            0.30,
            None,
        ),
        (event(2, "Sarah was on holiday in Lisbon.", days[1]), 0.32, None),
        (event(3, "Sarah re-paired the back door sensor.", days[2]), 0.10, None),
    )
    fault, holiday, _ = fused_scores(few, policy)
    assert holiday > fault  # the better cosine wins; their lengths say nothing here
    filler = [
        (event(10 + i, f"Sarah noted item {i} of the weekly house check.", T0 - timedelta(days=i)), 0.1, None)
        for i in range(10)
    ]
    many = pool(
        (event(1, "ok!", days[0]), 0.31, None),
        (event(2, "Sarah was on holiday in Lisbon with her partner Tom.", days[1]), 0.30, None),
        *filler,
    )
    ok, trip, *_ = fused_scores(many, policy)
    assert trip > ok


_LETTERS = st.sampled_from(list("AaKkSsIi ſİK'é-"))


@settings(max_examples=400)
@given(st.text(_LETTERS, min_size=1, max_size=5), st.text(_LETTERS, max_size=12))
def test_a_speaker_is_named_in_a_query_as_the_expression_says(name, query):
    """The ASCII shortcut (no case-blind substring, no match) answers as the expression does,
    also for the letters a case-blind expression matches across scripts (ſ, İ, the Kelvin sign)."""
    expected = re.search(rf"\b{re.escape(name)}\b", query, re.IGNORECASE) is not None
    assert named_in(name, query) == expected


_COSINES = st.sampled_from([None, 0.1, 0.2, 0.0, -0.0, float("nan")])


@given(st.lists(st.tuples(_COSINES, _COSINES), min_size=1, max_size=6))
def test_a_returned_candidate_keeps_the_stretched_cosine_the_pool_columns_say(cosines):
    """``Pool.candidate`` tells one candidate's relevance cosine apart from its own cosine as
    the whole pool's ``stretched`` column does (NaN, -0.0 and a missing cosine included)."""
    candidates = [
        Candidate(
            Memory(id=f"m{i}", memory_type=MemoryType.SEMANTIC, user_id="u", text="x", created_at=T0),
            None,
            dense_similarity=cosine,
            relevance_similarity=heard,
        )
        for i, (cosine, heard) in enumerate(cosines)
    ]
    pool = Pool.of(candidates)
    for i in range(len(pool)):
        heard = float(pool.relevance_cosine[i])
        expected = heard if pool.stretched[i] and not math.isnan(heard) else None
        assert pool.candidate(i).relevance_similarity == expected
