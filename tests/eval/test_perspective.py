"""Reading the query from the memory's side (``domain.perspective``), on hand-made memories and
through the real service, engine and MiniLM."""

from __future__ import annotations

import re
import threading
from dataclasses import replace
from datetime import UTC, datetime

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from atlas_mcp.domain import hearing, perspective, ranking
from atlas_mcp.domain.fusion import Candidate
from atlas_mcp.domain.model import Memory, MemoryType
from atlas_mcp.domain.openings import inner_names, written_inside
from atlas_mcp.domain.pool import CATALOG, Pool
from atlas_mcp.domain.scoring import ScoringPolicy
from atlas_mcp.engines.embedded.engine import EmbeddedEngine
from atlas_mcp.inference.embedder import OnnxMiniLM, default_embedder
from atlas_mcp.service import MemoryService

T0 = datetime(2026, 3, 1, 18, 0, tzinfo=UTC)
NORA = [
    "Nora has moved out of Glasgow: she and Priya now rent a flat in Leith, Edinburgh.",
    "Nora's brother Callum lives in Aberdeen and works offshore.",
    "Nora is allergic to penicillin.",
    "Nora cycles to most client meetings on a green Brompton.",
    "Priya, Nora's partner, is a junior doctor.",
    "Went to the bank to update the address on my account.",
]


def memory(i: int, text: str, kind: MemoryType = MemoryType.SEMANTIC) -> Memory:
    return Memory(id=f"m{i}", memory_type=kind, user_id="nora", text=text, created_at=T0, occurred_at=T0)


def test_the_user_is_the_name_most_memories_start_with_as_their_subject():
    assert perspective.user_name(NORA) == "Nora"
    # A capitalised verb starting many memories is not a name; nor is a name seen only once.
    assert perspective.user_name(["Went to the bank.", "Went home.", "Went out.", "Nora ran."]) is None
    # Transcript turns belong to their speakers, not to the user.
    assert (
        perspective.user_name(["Caroline: I ran.", "Caroline: I swam.", "Caroline: me too, Caroline!"])
        is None
    )
    # Two people written about equally: neither is taken for the user.
    both = [
        "Nora ran.",
        "Nora swam.",
        "Nora sang.",
        "Tom ran.",
        "Tom swam.",
        "Tom sang with Nora.",
        "Nora met Tom.",
    ]
    assert perspective.user_name(both) is None


def test_a_name_that_starts_a_memory_as_an_owner_is_a_name():
    """An agent that writes every fact as "Sam ..." never writes the name mid-sentence; "Sam's
    phone ..." shows it is one all the same (no verb takes a possessive)."""
    facts = ["Sam drives a Kia Niro.", "Sam works at a bakery.", "Sam lives in Leeds."]
    assert perspective.user_name(facts) is None
    assert perspective.user_name([*facts, "Sam's dentist is Dr Okafor."]) == "Sam"


def test_first_person_words_become_the_name_in_several_languages():
    assert perspective.as_user("Which city do I live in?", "Nora") == "Which city do Nora live in?"
    assert perspective.as_user("When is my birthday?", "Nora") == "When is Nora's birthday?"
    assert perspective.as_user("In welcher Stadt wohne ich?", "Nora") == "In welcher Stadt wohne Nora?"
    assert perspective.as_user("Comment s'appelle mon chat ?", "Nora") == "Comment s'appelle Nora chat ?"
    assert perspective.as_user("How tall is Ben Nevis?", "Nora") is None


def test_a_memory_naming_the_user_as_someone_s_relative_is_about_that_someone():
    memories = [
        memory(0, "Nora's brother Callum lives in Aberdeen."),
        memory(1, "Nora's allergic to penicillin."),  # "Nora's" as "Nora is": about her
        memory(2, "Nora's dog Rex and Nora's cat Mochi."),
        memory(3, "Nora's mum Fiona visited; Nora cooked."),  # named as the subject too
        memory(4, "Nora ran."),
        memory(5, "Nora swam."),
        memory(6, "Nora sang."),
    ]
    (view,) = perspective.views("Am I allergic to anything?", memories)
    assert view.members == (1, 3, 4, 5, 6)
    (mine,) = perspective.views("¿Qué hace mi hermano?", memories)
    assert mine.members == (0, 1, 2, 3, 4, 5, 6)


def test_a_named_speaker_becomes_first_person():
    assert perspective.as_speaker("What is Caroline's identity?", "Caroline") == "What is my identity?"
    assert perspective.as_speaker("When did Caroline swim?", "Caroline") == "When did I swim?"


def test_views_apply_to_the_memories_they_are_about():
    memories = [memory(i, t) for i, t in enumerate(NORA)]
    (view,) = perspective.views("Which city do I live in?", memories)
    assert view.text == "Which city do Nora live in?"
    # The memories about her: not her brother's home nor her partner's job, nor the bank visit.
    assert view.members == (0, 2, 3)
    (mine,) = perspective.views("What does my partner do?", memories)
    assert mine.members == (0, 1, 2, 3, 4)  # "my partner" may be "Nora's partner"
    assert perspective.views("How tall is Ben Nevis?", memories) == []
    turns = [
        memory(1, "Caroline: I went to the support group.", MemoryType.EPISODIC),
        memory(2, "Melanie: I painted a lake.", MemoryType.EPISODIC),
    ]
    (spoken,) = perspective.views("When did Caroline go to the support group?", turns)
    assert (spoken.text, spoken.members) == ("When did I go to the support group?", (0,))
    assert perspective.views("When did Caroline and Melanie meet?", turns) == []  # whose view?


def test_a_first_person_question_finds_the_fact_that_names_the_user(engine):
    service = MemoryService(engine)
    for text in NORA:
        service.write("nora", text)
    written = service.write("nora", "The home Wi-Fi network is called Attic-5G.")
    asked = "What pet do I have?"
    service.write("nora", "Nora has a grey cat called Mochi who hides from the vacuum cleaner.")
    plain = MemoryService(engine, ScoringPolicy(perspective_weight=0))
    cat = "Nora has a grey cat called Mochi who hides from the vacuum cleaner."
    seen = service.recall("nora", asked, 3, min_relevance=0, touch=False)
    unseen = plain.recall("nora", asked, 3, min_relevance=0, touch=False)
    cosine = {h.memory.text: h.explanation.dense_similarity for h in seen}
    before = {h.memory.text: h.explanation.dense_similarity for h in unseen}
    assert seen[0].memory.text == cat
    assert cosine[cat] > before[cat]  # heard as "What pet does Nora have?" too
    assert written.id not in {h.memory.id for h in seen[:1]}


@given(
    st.lists(
        st.tuples(
            st.sampled_from(list(MemoryType)),
            st.text(alphabet=st.sampled_from(list("AnaBo: ’'s-")), max_size=12),
        ),
        max_size=8,
    ),
    st.text(alphabet=st.sampled_from(list("AnaBo ’'s-?")), max_size=12),
)
def test_a_speaker_is_found_in_one_pass_as_turn_by_turn(memories, query):
    """``views`` finds the speakers a query names from each turn's head: the same names, and
    the same turns, as asking each memory whether the name speaks it (``_speaks``)."""
    pool = [
        Memory(
            id=f"m{i}",
            memory_type=kind,
            user_id="u",
            text=text or "x",
            created_at=datetime(2026, 1, 1, tzinfo=UTC),
        )
        for i, (kind, text) in enumerate(memories)
    ]
    heads = perspective._turn_heads(pool)
    for name in perspective._CAPITALISED.findall(query):
        name = perspective.POSSESSIVE.sub("", name)
        assert (name in set(heads)) == any(perspective._speaks(m, name) for m in pool)
        assert [h == name for h in heads] == [perspective._speaks(m, name) for m in pool]


def _written_inside(name: str, texts: list[str]) -> bool:
    """The definition ``openings.written_inside`` answers in one search: ``name`` somewhere
    in the texts joined one per line, not at the start of the whole or after a line break,
    with no letter or digit either side."""
    joined = "\n".join(texts)
    at = joined.find(name, 1)
    while at != -1:
        before, after = joined[at - 1], joined[at + len(name) : at + len(name) + 1]
        if before != "\n" and not before.isalnum() and not after.isalnum():
            return True
        at = joined.find(name, at + 1)
    return False


@given(st.lists(st.text(alphabet=st.sampled_from(list("NoraÖéßa_ 1\n’'s:-.")), max_size=16), max_size=6))
def test_a_name_written_inside_is_found_by_one_search(texts):
    """``written_inside`` (one regular expression) says what a scan of every occurrence says."""
    joined = "\n".join(texts)
    for name in ("Nora", "Noraé", "Oéa", "Ora", "Noß", "a"):
        assert written_inside(name, joined) == _written_inside(name, texts)


@given(st.lists(st.text(alphabet=st.sampled_from(list("NoraAnéßÖŁX_ 1\n’'s:-.")), max_size=16), max_size=6))
def test_the_names_kept_per_text_are_the_names_written_inside(texts):
    """A name-shaped word is ``written_inside`` the texts joined exactly when one text's
    ``inner_names`` (kept per memory, so a recall searches no text) holds it."""
    joined = "\n".join(texts)
    kept = frozenset().union(*map(inner_names, texts))
    for name in ("Nora", "Noraé", "Ora", "No", "Noß", "Anna", "Ann", "Xa", "Öra"):
        assert written_inside(name, joined) == (name in kept), name


# ``inner_names``' pattern as it was written first, the look-behind opening it (kept to hold
# the faster form, which opens with the capital, to the same matches).
_INNER_NAME_FIRST = re.compile(r"(?:(?<=[^\w\n])|(?<=_))([A-Z][a-z\u00df-\u00ff]+)(?![^\W_])")


_PIECES = [
    "Nora",
    "Anné",
    "Öra",
    "Łx",
    "X",
    "Zÿ",
    "a",
    "9",
    "_",
    " ",
    "\n",
    "\t",
    "’s",
    "'",
    ":",
    "-",
    ".",
    "ß",
]


@given(st.lists(st.sampled_from(_PIECES), max_size=12).map("".join))
@example("\nNora, then Nora")
@example("_Nora x\tAnné a9Nora")
def test_the_names_inside_a_text_are_those_the_first_pattern_found(text):
    assert inner_names(text) == frozenset(_INNER_NAME_FIRST.findall(text))


def test_a_pools_columns_find_the_user_as_its_texts_do():
    memories = [
        memory(i, text)
        for i, text in enumerate(
            [
                "Nora lives in Leeds.",
                "Nora works as a nurse.",
                "Nora likes tea.",
                "Met Nora's sister.",
                "Is allergic to cats.",
                "Is vegetarian.",
                "Is tired.",
            ]
        )
    ]
    memories += [
        memory(10 + i, text, MemoryType.EPISODIC)
        for i, text in enumerate(["Caroline: I went to the group.", "Nora: hi", "Caroline: and you?"])
    ]
    pool = Pool.of([Candidate(m, None) for m in memories])
    columns = (pool.heads, pool.openings, pool.kind == CATALOG, pool.inner, pool.head_codes)
    for query in (
        "Where do I live?",
        "What is my job?",
        "When did Caroline go?",
        "Did Nora or Caroline?",
        "Bob?",
    ):
        assert perspective.views(query, memories, *columns) == perspective.views(query, memories), query
    assert perspective.views("Where do I live?", memories)[0].name == "Nora"
    assert perspective.views("When did Caroline go?", memories, *columns)[0].members == (7, 9)


def test_the_name_discount_keeps_the_members_shared_pull_and_takes_off_the_rest():
    """Each member loses only how much nearer the bare name it is than the members' median:
    what every memory naming the user shares stays (it sets them above the rest)."""
    assert perspective.name_discounts([0.2, 0.5, 0.3]) == pytest.approx([-0.1, 0.2, 0.0])
    assert perspective.name_discounts([0.4]) == [0.0]
    assert perspective.name_discounts([]) == []


TURNS = [
    memory(1, "Caroline: I went to the LGBTQ support group yesterday.", MemoryType.EPISODIC),
    memory(2, "Melanie: I painted a lake at sunrise last week.", MemoryType.EPISODIC),
    memory(3, "Caroline: I am researching adoption agencies.", MemoryType.EPISODIC),
]


@pytest.mark.parametrize(
    "query",
    [
        "When did Caroline go to the support group?",
        "What did Caroline's friends paint?",
        "When did Caroline and Melanie meet?",  # two speakers: no view, nothing foreseen
        "What did Jon paint?",  # not a speaker of the pool
        "Which city do I live in?",
        "What does my partner do?",
        "How tall is Ben Nevis?",
    ],
)
def test_what_is_foreseen_is_what_the_views_embed(query):
    """Before the pool is known, ``foreseen`` names the texts the views of a pool holding those
    speakers' turns and naming that user embed: each view's rewording, and the bare name the
    first-person view's discount reads."""
    pool = TURNS + [memory(10 + i, t) for i, t in enumerate(NORA)]
    views = perspective.views(query, pool)
    expected = [t for v in views for t in ((v.text, v.name) if v.name else (v.text,))]
    speakers = {v.speaker for v in views if v.speaker} or {"Caroline", "Melanie"}
    user = perspective.user_name(m.text for m in pool)
    assert perspective.foreseen(query, speakers, user) == expected


def test_acquaintances_learn_whom_the_views_were_about():
    known = perspective.Acquaintances(users=2, speakers=2)
    assert known.foreseen("u", "When did Caroline swim?") == []
    known.learn("u", perspective.views("When did Caroline go to the support group?", TURNS))
    assert known.foreseen("u", "When did Caroline swim?") == ["When did I swim?"]
    assert known.foreseen("someone else", "When did Caroline swim?") == []
    known.learn(
        "u", [perspective.View("x", (0,), speaker="Melanie"), perspective.View("y", (0,), speaker="Jon")]
    )
    assert known.foreseen("u", "When did Caroline swim?") == []  # the oldest speaker made room
    known.learn("u", [perspective.View("Which city do Nora live in?", (0,), name="Nora")])
    assert known.foreseen("u", "Where do I work?") == ["Where do Nora work?", "Nora"]


def test_a_foreseen_rewording_runs_the_model_once_beside_the_recall_and_ranks_the_same(engine, monkeypatch):
    """The second recall naming a speaker embeds its rewording on the query pool while the
    candidates are fetched; the perspective step then reuses that vector, and every hit,
    score and relevance is what a service that foresees nothing returns."""
    from atlas_mcp.engines.embedded import query_vectors

    service = MemoryService(engine, clock=lambda: T0)
    for m in TURNS:
        service.write("u", m.text, memory_type="episodic")
    service.write("u", "Caroline: I moved to a new flat near the park.", memory_type="episodic")
    threads: dict[str, list[str]] = {}
    real = query_vectors.embed_query

    def counting(embedder, text):
        threads.setdefault(text, []).append(threading.current_thread().name)
        return real(embedder, text)

    def pairing(embedder, first, second):  # the query and its rewording in one run
        for text in (first, second):
            threads.setdefault(text, []).append(threading.current_thread().name)
        return real_pair(embedder, first, second)

    real_pair = OnnxMiniLM.embed_pair
    monkeypatch.setattr(query_vectors, "embed_query", counting)
    monkeypatch.setattr(OnnxMiniLM, "embed_pair", pairing)
    service.recall("u", "When did Caroline go to the support group?", touch=False)
    assert "When did I go to the support group?" in threads  # a view was heard: Caroline is known
    asked = "What is Caroline researching?"
    hits = service.recall("u", asked, min_relevance=0, touch=False)
    (ran_on,) = threads["What is I researching?"]  # once, and not after the pool (this thread)
    assert ran_on.startswith("atlas-query")
    fresh = MemoryService(EmbeddedEngine(engine.path, default_embedder()), clock=lambda: T0)
    try:
        again = fresh.recall("u", asked, min_relevance=0, touch=False)
    finally:
        fresh.close()
    assert [(h.memory.id, h.score, h.relevance) for h in hits] == [
        (h.memory.id, h.score, h.relevance) for h in again
    ]


def test_a_query_sent_with_its_newline_foresees_the_rewording_its_view_asks_for(engine, monkeypatch):
    """The rewording is foreseen from the query as the views read it (cleaned): a message sent
    verbatim, newline and all, runs the model once for the query and once for the rewording,
    not a third time for a padded rewording no view asks for."""
    from atlas_mcp.engines.embedded import query_vectors

    service = MemoryService(engine, clock=lambda: T0)
    for m in TURNS:
        service.write("u", m.text, memory_type="episodic")
    service.recall("u", "When did Caroline go to the support group?", touch=False)  # Caroline heard
    texts: list[str] = []
    real, real_pair = query_vectors.embed_query, OnnxMiniLM.embed_pair
    monkeypatch.setattr(query_vectors, "embed_query", lambda e, t: texts.append(t) or real(e, t))
    monkeypatch.setattr(OnnxMiniLM, "embed_pair", lambda e, a, b: texts.extend([a, b]) or real_pair(e, a, b))
    hits = service.recall("u", "  What is Caroline researching?\n", min_relevance=0, touch=False)
    assert sorted(texts) == ["What is Caroline researching?", "What is I researching?"]
    assert hits[0].memory.text == "Caroline: I am researching adoption agencies."


def test_a_foreseen_text_still_queued_is_embedded_by_the_recall_that_needs_it():
    """A rewording queued behind other recalls' texts is taken off the queue and embedded by
    the recall asking for it, and is not left behind as a stale entry."""
    from concurrent.futures import ThreadPoolExecutor

    from atlas_mcp.engines.embedded.query_vectors import QueryVectors
    from atlas_mcp.inference.embedder import SingleModel

    embedder = default_embedder()
    vectors = QueryVectors(SingleModel(embedder), lambda code: embedder.model_id)
    gate = threading.Event()
    vectors._pool.shutdown()
    vectors._pool = ThreadPoolExecutor(1)
    vectors._pool.submit(gate.wait)  # the only worker is busy: what is foreseen stays queued
    try:
        vectors.foresee(["When did I swim?"], [0])
        (queued,) = vectors._coming.values()
        asking = ThreadPoolExecutor(1)
        got = asking.submit(vectors.get, "When did I swim?", 0).result(timeout=30)  # not the queue's turn
        asking.shutdown()
        assert queued.cancelled() and not vectors._coming
        assert (got.vector == embedder.embed_queries(["When did I swim?"])[0]).all()
        assert vectors.recent(embedder.model_id, "When did I swim?") is got
    finally:
        gate.set()
        vectors.close()


_COSINE = st.one_of(st.floats(-1, 1), st.just(float("nan")), st.just(0.0), st.just(-0.0))


@given(
    st.lists(st.tuples(_COSINE, _COSINE, st.booleans(), st.one_of(st.none(), _COSINE), st.floats(-0.5, 0.5)),
             min_size=1, max_size=12),
    st.floats(0.05, 2.0),
)  # fmt: skip
def test_a_view_is_heard_over_the_columns_as_member_by_member(rows, weight):
    """``hear`` gives each member what the member-by-member rule gives: skipped without a
    cosine or a view cosine, the better reading for relevance the first time, ``blended``."""
    cosine = np.array([r[0] for r in rows])
    heard = np.array([r[1] for r in rows])
    own = np.array([r[2] for r in rows])
    members = list(range(len(rows)))[::-1]  # any order of distinct members
    seen = [rows[i][3] for i in members]
    discounts = [rows[i][4] for i in members]
    expect_cosine, expect_heard, expect_own = cosine.tolist(), heard.tolist(), own.tolist()
    for i, other, discount in zip(members, seen, discounts, strict=True):
        if np.isnan(expect_cosine[i]) or other is None:
            continue
        if expect_own[i]:
            expect_heard[i], expect_own[i] = max(expect_cosine[i], other), False
        expect_cosine[i] = perspective.blended(expect_cosine[i], other - discount, weight)
    view = np.array([np.nan if s is None else s for s in seen])
    has = np.array([s is not None for s in seen], dtype=bool)
    perspective.hear(cosine, heard, own, members, view, has, np.asarray(discounts), weight)
    assert [repr(x) for x in cosine.tolist()] == [repr(x) for x in expect_cosine]
    assert [repr(x) for x in heard.tolist()] == [repr(x) for x in expect_heard]
    assert own.tolist() == expect_own


def test_the_pools_own_measure_hears_what_the_engines_cosines_by_id_hear(engine):
    """A pool of the embedded engine measures a view's rewording by its rows' handles, in the
    snapshot it was read from (``Pool.measure``): every cosine and relevance cosine heard, name
    discounts included, is what the engine's ``cosines`` by memory id gives, bit for bit, in a
    pool that holds catalog entries too and after ``admitted`` took a subset of it."""
    service = MemoryService(engine, clock=lambda: T0)
    service.load_catalog(
        [{"id": "cat-pet", "title": "Pet care", "text": "A grey cat needs a vet check yearly"}]
    )
    for text in [*NORA, "Nora has a grey cat called Mochi who hides from the vacuum cleaner."]:
        service.write("nora", text)
    for m in TURNS:
        service.write("nora", m.text, memory_type="episodic")
    by_id = engine.cosines
    heard_views = 0
    for asked in ("What pet do I have?", "When did Caroline go to the support group?", "Where do I live?"):
        plan = ranking.plan(service.policy, service.limits, ranking.RecallQuery("nora", asked), T0)
        pool = ranking.pool_of(engine.candidates(plan))
        assert pool.measure is not None and "cat-pet" in [m.id for m in pool.memories]
        for kept in (pool, pool.subset(np.arange(len(pool))[::-1][1:])):
            views = perspective.views(asked, kept.memories)
            heard_views += len(views)

            def unused(*_: object) -> dict[str, float]:
                raise AssertionError("the pool's own measure is read, not the engine's by id")

            by_rows = hearing.from_their_side(service.policy, plan, kept, unused)
            by_ids = hearing.from_their_side(service.policy, plan, replace(kept, measure=None), by_id)
            for column in ("cosine", "relevance_cosine"):
                got, expected = getattr(by_rows, column).tolist(), getattr(by_ids, column).tolist()
                assert [repr(x) for x in got] == [repr(x) for x in expected]
            if views:
                assert by_rows.cosine.tolist() != kept.cosine.tolist()  # something was heard
    assert heard_views >= 3
