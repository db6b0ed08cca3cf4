"""Issue 12's recall rules, each on its own: time in the query, bounded priors, earned use,
calibrated relevance with its floor, playbook outcomes from the agent, the type filter."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from atlas_mcp.domain.calibration import coverages, tokens, topic_words
from atlas_mcp.domain.fusion import Candidate
from atlas_mcp.domain.lexical import detect_language, has_cjk, stem, word_count
from atlas_mcp.domain.model import Memory, MemoryType
from atlas_mcp.domain.multipliers import use_boost
from atlas_mcp.domain.pool import WORD_RUN, Pool, microseconds
from atlas_mcp.domain.scoring import ScoringPolicy
from atlas_mcp.domain.when import Order, time_intent, window_fit
from atlas_mcp.errors import InvalidInput, NotFound
from atlas_mcp.eval import mixed_suite
from atlas_mcp.eval.harness import scratch_service
from atlas_mcp.eval.scenario_suite import write

NOW = datetime(2026, 11, 18, 15, 0, tzinfo=UTC)  # a Wednesday


def _day(value: datetime) -> str:
    return value.date().isoformat()


@pytest.mark.parametrize(
    ("query", "start", "end"),
    [
        ("what did I do today?", "2026-11-18", "2026-11-19"),
        ("what did I do yesterday?", "2026-11-17", "2026-11-18"),
        ("what did I do last weekend?", "2026-11-14", "2026-11-16"),
        ("what did I work on last week?", "2026-11-09", "2026-11-16"),
        ("who came over this month?", "2026-11-01", "2026-12-01"),
        ("where was I in March?", "2026-03-01", "2026-04-01"),
        ("where was I in December?", "2025-12-01", "2026-01-01"),
        ("what happened in May 2023?", "2023-05-01", "2023-06-01"),
        ("what did I do last Monday?", "2026-11-16", "2026-11-17"),
    ],
)
def test_calendar_words_resolve_against_the_clock(query, start, end):
    intent = time_intent(query, NOW)
    assert intent.window is not None
    assert (_day(intent.window[0]), _day(intent.window[1])) == (start, end)


def test_last_weekend_on_a_sunday_is_the_weekend_before():
    sunday = datetime(2026, 11, 22, 12, tzinfo=UTC)
    window = time_intent("what did I do last weekend?", sunday).window
    assert window is not None and _day(window[0]) == "2026-11-14"


@pytest.mark.parametrize(
    ("query", "order"),
    [
        ("my most recent trip to the dentist", Order.NEWEST),
        ("what was my latest marathon time?", Order.NEWEST),
        ("who did I climb with the last time?", Order.NEWEST),
        ("when did I last see Julia?", Order.NEWEST),
        ("where did I go climbing for the first time?", Order.OLDEST),
        ("my first ever on-call shift", Order.OLDEST),
        ("first aid for burns", None),
        ("what is my first name?", None),
        ("what did I do last week?", None),
    ],
)
def test_order_words(query, order):
    assert time_intent(query, NOW).order == order


def test_time_phrases_leave_the_topic():
    intent = time_intent("What did the garage do to the car last week?", NOW)
    assert (
        intent.without_phrases("What did the garage do to the car last week?")
        == "What did the garage do to the car ?"
    )
    assert topic_words("What did I do last weekend?", time_intent("What did I do last weekend?", NOW)) == []
    assert topic_words("ok thanks!", time_intent("ok thanks!", NOW)) == []
    assert topic_words("What's my gym locker code?", time_intent("x", NOW)) == ["gym", "locker", "code"]


def test_a_window_fit_is_bounded_and_falls_with_distance():
    window = (NOW - timedelta(days=2), NOW)
    inside, near, far = window_fit(
        np.array([microseconds(NOW - timedelta(days=d)) for d in (1, 3, 60)]), window, 0.25
    )
    assert inside == 1.0
    assert 0.25 < near <= 0.5 and far == 0.25


def test_the_use_boost_saturates():
    policy = ScoringPolicy().multipliers
    assert use_boost(0, policy) == 1.0
    assert use_boost(5, policy) < use_boost(50, policy) <= 1 + policy.use_count_weight
    assert use_boost(10_000, policy) == pytest.approx(1 + policy.use_count_weight)


_PIECES = st.sampled_from(
    [
        "bus",
        "buses",
        "class",
        "Classes",
        "birthday",
        "Birthdays",
        "s",
        "ss",
        "mañana",
        "x_y",
        "3",
        "猫",
        "会议",
        "レナ",
        "Hubを",
        "再起動",
    ]
)
_SEPARATORS = st.sampled_from([" ", "-", "", ". ", "\n"])


def _held(text: str, words: list[str]) -> set[str]:
    """What a text holds, by definition: a word among its tokens, or the stem of one of its
    words in its language; a Chinese or Japanese word (a bigram or
    a character: nothing marks where such words end) anywhere in it."""
    language = detect_language(text)
    found = set(tokens(text)) | {stem(r, language) for r in WORD_RUN.findall(text.lower())}
    return {w for w in words if (w in text.lower() if has_cjk(w) else w in found)}


def _scanned(texts: list[str], words: list[str]) -> list[set[str]]:
    """What coverage finds of ``words`` in each text: the words kept beside each row."""
    return [{w for w in words if w in bag} for bag in _pool(texts).words]


def _pool(texts: list[str]) -> Pool:
    return Pool.of(
        [Candidate(Memory(str(i), MemoryType.SEMANTIC, "u", t, NOW), None) for i, t in enumerate(texts)]
    )


@given(st.lists(_PIECES, max_size=12), st.lists(_PIECES, min_size=1, max_size=4), _SEPARATORS)
def test_the_words_kept_per_memory_are_what_tokenising_finds(pieces, asked, separator):
    text = separator.join(pieces)
    words = [w for piece in asked for w in tokens(piece)]
    assert _scanned([text], words)[0] == _held(text, words)


@given(
    st.lists(st.lists(_PIECES, max_size=6), max_size=5),
    st.lists(_PIECES, min_size=1, max_size=4),
    _SEPARATORS,
)
def test_a_pool_finds_what_tokenising_each_text_finds(texts, asked, separator):
    joined = [separator.join(pieces) for pieces in texts]
    words = [w for piece in asked for w in tokens(piece)]
    assert _scanned(joined, words) == [_held(t, words) for t in joined]


_LETTERS = st.text(alphabet="abSsİß猫会议レナの_- \n3", max_size=30)


@given(st.lists(_LETTERS, max_size=5), st.lists(_LETTERS, min_size=1, max_size=3))
def test_the_kept_words_agree_with_tokenising_on_any_text(texts, asked):
    words = [w for piece in asked for w in tokens(piece)]
    assert _scanned(texts, words) == [_held(t, words) for t in texts]


@given(st.lists(_PIECES, max_size=12), _SEPARATORS)
def test_word_count_counts_cjk_characters_as_two_thirds_of_a_word(pieces, separator):
    text = separator.join(pieces)
    expected = 0.0
    for chunk in text.split():
        cjk = len(re.findall(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff]", chunk))
        expected += cjk * 2 / 3 + (1.0 if len(chunk) > cjk else 0.0)
    assert word_count(text) == pytest.approx(expected)


def test_coverage_weights_rare_words_above_common_ones():
    memories = [
        Memory(str(i), MemoryType.SEMANTIC, "u", text, NOW)
        for i, text in enumerate(
            ["my gym locker code is 4471", "my bike lock code is 4417", "code review at 10"]
        )
    ]
    locker, bike, review = coverages(
        ["gym", "locker", "code"], Pool.of([Candidate(m, None) for m in memories])
    )
    assert locker == pytest.approx(1.0)
    assert bike == review < 0.3


def test_a_word_is_covered_by_another_form_of_it():
    """ "camped" is covered by "camping", "research" by "Researching", in the language of each
    text (German "wohnen" by "wohne"); a word with another stem is not."""
    texts = ["We went camping by the lake", "Researching adoption agencies", "Ich wohne in Köln", "A lamp"]
    asked = {"camped": 0, "research": 1, "wohnen": 2}
    pool = _pool(texts)
    for word, holder in asked.items():
        covered = coverages([word], pool, "de" if word == "wohnen" else "en")
        assert covered.tolist() == [float(i == holder) for i in range(len(texts))], word
    lamp = coverages(["lamps", "camera"], pool)
    assert lamp[:3].tolist() == [0.0, 0.0, 0.0] and 0.0 < lamp[3] < 1.0


@pytest.mark.parametrize(
    ("query", "words"),
    [
        ("レナの車は何？", ["レナ", "車"]),  # particles (の, は) and the question word (何) ask for nothing
        ("谁修好了锅炉？", ["修好", "锅炉"]),  # no bigram across 了 or the question word 谁
        ("Atlas 帮我重置了 Halo Hub", ["atla", "重置", "halo", "hub"]),
        ("Hubを再起動した", ["hub", "再起", "起動"]),
    ],
)
def test_chinese_and_japanese_questions_ask_for_their_bigrams(query, words):
    assert topic_words(query, time_intent(query, NOW)) == words


def test_a_japanese_question_covers_the_memory_that_names_its_subject():
    """No spaces mark Japanese words: the whole question was one token no memory held, so
    every Japanese answer had coverage 0 and relevance rested on the cosine alone."""
    memories = [
        Memory(str(i), MemoryType.SEMANTIC, "u", text, NOW)
        for i, text in enumerate(
            ["レナは青い車に乗っている。", "食洗機が夜中にうるさい。", "レナはお茶が好き。"]
        )
    ]
    words = topic_words("レナの車は何？", time_intent("x", NOW))
    car, dishwasher, tea = coverages(words, Pool.of([Candidate(m, None) for m in memories]))
    assert car == pytest.approx(1.0)
    assert dishwasher == 0.0
    assert 0.0 < tea < car


@pytest.fixture
def service():
    """A user with a crowd of everyday memories (the mixed suite's background), as in real use."""
    with scratch_service() as (service, clock):
        for position, entry in enumerate(mixed_suite.load()["background"][:80]):
            clock.set(NOW - timedelta(days=mixed_suite.background_days_ago(position)))
            write(service, "u", entry, {})
        clock.set(NOW)
        yield service, clock


def test_a_question_about_nothing_stored_has_nothing_above_the_floor(service):
    service, _ = service
    service.write("u", "My husband is Daniel; he teaches chemistry.", fact_type="identity")
    service.write("u", "How to boil an egg.", "procedural", name="Boil an egg", steps=["Boil six minutes"])
    floor = service.policy.calibration.relevance_floor
    for query in ("What is the capital of Peru?", "hi"):
        assert service.recall("u", query) == []  # by default recall leaves out what falls below
        everything = service.recall("u", query, min_relevance=0)  # each labelled with its relevance
        assert len(everything) == 10 and all(0.0 <= h.relevance < floor for h in everything)
    hits = service.recall("u", "Who is my husband?")
    assert "Daniel" in hits[0].memory.text and hits[0].relevance >= floor


def test_small_talk_earns_no_use_and_answers_earn_a_bounded_one(service):
    service, _ = service
    written = service.write("u", "My gym locker code is 4471.")
    for _ in range(50):
        service.recall("u", "ok thanks!")
    assert service.get("u", written.id).use_count == 0
    service.recall("u", "what's my gym locker code?")
    assert service.get("u", written.id).use_count == 1


def test_most_recent_prefers_the_newest_matching_event(service):
    service, clock = service
    for days, text in (
        (190, "Went to the dentist for a scale and polish."),
        (21, "Dentist appointment: a crown."),
    ):
        clock.set(NOW - timedelta(days=days))
        service.write("u", text, "episodic")
    clock.set(NOW)
    hits = service.recall("u", "When was my most recent trip to the dentist?", min_relevance=0.0)
    assert hits[0].memory.text == "Dentist appointment: a crown."
    first = service.recall("u", "When did I go to the dentist for the first time?", min_relevance=0.0)
    assert first[0].memory.text.startswith("Went to the dentist")


def test_an_agent_reports_playbook_outcomes_and_the_track_record_moves_ranking(service):
    service, _ = service
    trigger = "When a deploy breaks production and must be rolled back."
    helm = service.write("u", trigger, "procedural", name="Roll back with helm", steps=["helm rollback"]).id
    revert = service.write("u", trigger, "procedural", name="Roll back by reverting", steps=["git revert"]).id
    for playbook, outcome in ((helm, "failure"), (helm, "failure"), (revert, "success")):
        service.write("u", f"Rollback {outcome}.", "episodic", playbook_id=playbook, outcome=outcome)
    assert (service.get("u", helm).failure_count, service.get("u", revert).success_count) == (2, 1)
    ranked = [
        h.memory.id
        for h in service.recall("u", "how do I roll back a bad deploy?", memory_types=["procedural"])
    ]
    assert ranked[:2] == [revert, helm]


def test_an_outcome_needs_an_event_and_a_playbook_of_the_caller(service):
    service, _ = service
    playbook = service.write("u", "When the sink is blocked.", "procedural", steps=["plunge"]).id
    fact = service.write("u", "I like tea.").id
    with pytest.raises(InvalidInput):
        service.write("u", "It worked.", "semantic", playbook_id=playbook, outcome="success")
    with pytest.raises(InvalidInput):
        service.write("u", "It worked.", "episodic", playbook_id=playbook, outcome="maybe")
    with pytest.raises(NotFound):
        service.write("u", "It worked.", "episodic", playbook_id=fact, outcome="success")
    with pytest.raises(NotFound):
        service.write("other", "It worked.", "episodic", playbook_id=playbook, outcome="success")
    assert service.get("u", playbook).success_count == 0


def test_explicit_memory_types_are_the_whole_filter(service):
    service, _ = service
    service.load_catalog(
        [{"id": "cat-sink", "title": "Unblocking a sink", "text": "Use a plunger on a blocked sink."}]
    )
    service.write("u", "When the kitchen sink is blocked.", "procedural", steps=["plunge", "clean the trap"])
    types = {
        h.memory.memory_type
        for h in service.recall("u", "blocked sink", memory_types=["procedural"], min_relevance=0)
    }
    assert types == {MemoryType.PROCEDURAL}
    both = service.recall("u", "blocked sink", memory_types=["procedural", "catalog"], min_relevance=0)
    assert {h.memory.memory_type for h in both} == {MemoryType.PROCEDURAL, MemoryType.CATALOG}


def test_a_long_note_does_not_win_a_query_it_does_not_match(service):
    service, _ = service
    note = " ".join(
        f"Item {i}: the team discussed the budget, the roadmap and the hiring plan." for i in range(30)
    )
    long_note = service.write("u", note, "episodic").id
    husband = service.write("u", "My husband is Daniel; he teaches chemistry.", fact_type="identity").id
    hits = [h.memory.id for h in service.recall("u", "What's my husband called?", min_relevance=0.0)]
    assert hits[0] == husband and long_note not in hits[:5]


def test_a_memory_outside_the_named_period_keeps_the_root_of_its_window_fit():
    """A turn dated outside the period a question names often tells of it ("last month",
    "4 years ago"): the ranking puts the period's memories first (the window fit multiplies
    the score), while relevance keeps ``r × fit ** period_miss_power`` (0.5 by default)."""
    from atlas_mcp.domain.calibration import CalibrationPolicy, PoolFeatures, calibrated

    found = PoolFeatures(np.array([0.5, 0.5]), np.array([0.5, 0.5]), np.zeros(2), topicless=False)
    model = CalibrationPolicy()
    inside, outside = calibrated(found, np.array([1.0, 0.25]), model)
    plain = calibrated(found, None, model)[1]
    assert outside == pytest.approx(plain * 0.5)  # sqrt(0.25)
    assert inside > plain  # the one memory of the period gains the period's evidence
    strict = CalibrationPolicy(period_miss_power=1.0)
    assert calibrated(found, np.array([1.0, 0.25]), strict)[1] == pytest.approx(plain * 0.25)
