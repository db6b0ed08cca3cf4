"""About the same thing? Pairs of facts an agent writes, and what ``domain.sameness`` says."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from atlas_mcp.domain import resolution, sameness
from atlas_mcp.domain.gist import gist, normal_key
from atlas_mcp.domain.model import Memory, MemoryType
from atlas_mcp.domain.resolution import resolve
from atlas_mcp.domain.sameness import Kind, related
from atlas_mcp.domain.settling import settle

UPDATES = [
    ("I live in Porto.", "I moved to Lisbon last spring."),
    ("User is based in Denver.", "The user relocated to Austin."),
    ("Works as a nurse at St Mary's hospital.", "Started a new job as a paramedic at the ambulance service."),
    ("My car is a Honda Civic.", "I now drive a Mazda 3."),
    ("My dentist is Dr. Ahmed.", "I switched to a new dentist, Dr. Novak."),
    ("My boss is Karen Lee.", "I report to Tom Becker since the reorg."),
    ("Ben's girlfriend is called Mia.", "Ben is dating Chloe now."),
    ("The thermostat runs firmware 1.2.0.", "Thermostat firmware is 1.4.2 after the update."),
    ("Gym sessions are on Tuesdays.", "My gym sessions moved to Fridays."),
    ("Her phone number is 0612 345 678.", "Her new phone number is 0687 654 321."),
    ("Sie wohnt in Bremen.", "Sie ist nach Dresden gezogen."),
    ("Anna geht montags joggen.", "Anna geht jetzt freitags joggen."),  # the first reads as English alone
    ("Mi médico de cabecera es la Dra. Ruiz.", "Mi nuevo médico de cabecera es el Dr. Pons."),
    ("Il est végétarien.", "Il est devenu végan."),
    ("The team standup is at 9:30.", "The team standup is at 10:00 now."),
    # said without "lives in" or "works as": a house move, a rented flat, freelance work
    ("I live in Glasgow.", "Has moved house: home is now a terrace in Leith, Edinburgh."),
    ("Lives in Leeds.", "We rent a flat in the Northern Quarter of Manchester now."),
    ("Works as an accountant at Baird & Co.", "Now works freelance as a consultant."),
    ("Mein Mann heißt Jonas.", "Ich bin jetzt mit Lukas verheiratet."),  # "mein Mann": her husband
]
SAME = [
    ("Ana is allergic to shellfish.", "Ana has a shellfish allergy."),
    ("User's blood type is A positive.", "The user has A positive blood."),
    ("Marta takes her coffee black.", "Marta takes her coffee black."),
    ("Tom supports Everton.", "Tom is an Everton supporter."),
    ("Lukas spielt Tennis im TC Blau-Weiß.", "Lukas ist im Tennisclub TC Blau-Weiß."),
]
DISTINCT = [
    ("My son Ali plays the violin.", "My daughter Sara plays the flute."),
    ("My sister Jo lives in Leeds.", "My sister Kate lives in York."),
    ("My sister Jo lives in Leeds.", "I live in York."),
    ("I speak Portuguese.", "I speak some Japanese."),
    ("I am allergic to cats.", "I am allergic to pollen."),
    ("My work email is a@corp.io.", "My personal email is a@mail.com."),
    ("Prefers aisle seats on flights.", "Likes window seats on trains."),
    ("My favourite band is Blur.", "My favourite film is Heat."),
    ("The home router is a FritzBox.", "The home printer is an HP LaserJet."),
    ("Dad drives a Volvo.", "Mum drives a Fiat."),
    ("I play chess on Mondays.", "I play squash on Thursdays."),
    ("Jo's dog is called Rex.", "Jo's cat is called Tom."),
    ("Der Termin beim Zahnarzt ist am 3. Mai.", "Meine Zahnärztin ist Dr. Vogel."),
    ("Does not like horror films.", "Her favourite film is Amélie."),
    ("The spare key is with the neighbour at number 12.", "Takes the number 38 bus to work."),
    ("I moved to Lisbon last spring.", "I work as a translator."),
]


@pytest.mark.parametrize(("older", "newer"), UPDATES)
def test_a_new_value_of_the_same_thing_is_an_update(older, newer):
    found = related(older, newer)
    assert found.kind is Kind.UPDATE, found


@pytest.mark.parametrize(("older", "newer"), SAME)
def test_a_restatement_is_the_same_fact(older, newer):
    assert related(older, newer).kind is Kind.SAME


@pytest.mark.parametrize(("older", "newer"), DISTINCT)
def test_look_alikes_about_different_things_stay_distinct(older, newer):
    assert related(older, newer).kind is Kind.DISTINCT
    assert related(newer, older).kind is Kind.DISTINCT


def test_about_keys_decide_when_both_facts_have_one():
    assert related("I drive a Golf.", "My bike is a Brompton.", "car", "Car").kind is Kind.UPDATE
    assert related("I live in Porto.", "I live in Lisbon.", "home city", "office city").kind is Kind.DISTINCT
    assert normal_key("  Home   City! ") == "home city"


def test_a_denied_old_value_is_not_part_of_the_new_one():
    assert "12" not in gist("Correction: her birthday is on 21 March, not 12 March.").distinctive
    assert (
        related("Her birthday is on 12 March.", "Correction: her birthday is 21 March, not 12 March.").kind
        is Kind.UPDATE
    )


def _fact(text: str, days: int, about: str | None = None) -> Memory:
    at = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(days=days)
    return Memory(
        f"m{days}-{abs(hash(text))}", MemoryType.SEMANTIC, "u", text, at, about=about, valid_from=at
    )


def test_resolution_puts_the_newest_value_first_and_marks_the_older():
    old, noise, new = _fact("I live in Porto.", 1), _fact("I like jazz.", 2), _fact("I moved to Lisbon.", 3)
    resolved = resolve([old, noise, new], [0, 1, 2], shown=2)
    assert resolved.order == [2, 0, 1] and resolved.outdated_by == {0: 2} and resolved.lifted == {2: 0}


def test_resolution_pairs_facts_whose_language_is_read_apart():
    """ "Anna geht montags joggen." alone reads as English, its replacement as German: stemmed
    apart they share no word, yet they are found and read as one pair."""
    old, new = _fact("Anna geht montags joggen.", 1), _fact("Anna geht jetzt freitags joggen.", 9)
    assert resolve([old, new], [0, 1], shown=2).outdated_by == {0: 1}


def test_resolution_shows_one_copy_of_a_repeated_fact():
    copies = [_fact("Ana is allergic to shellfish.", d) for d in (1, 2, 3)] + [_fact("Ana likes opera.", 4)]
    resolved = resolve(copies, [2, 0, 3, 1], shown=3)
    assert resolved.order == [2, 3] and set(resolved.copies[2]) == {0, 1} and resolved.outdated_by == {}


def test_settling_refreshes_a_copy_supersedes_a_key_and_names_earlier_values():
    stored = _fact("Ana is allergic to shellfish.", 1)
    assert settle(_fact("Ana has a shellfish allergy.", 9), [stored]).duplicate_of == stored
    keyed = _fact("I drive a Golf.", 1, about="car")
    assert settle(_fact("I drive a Tesla.", 9, about="car"), [keyed]).supersede == (keyed.id,)
    home = _fact("I live in Porto.", 1)
    found = settle(_fact("I moved to Lisbon.", 9), [home, keyed])
    assert [r.memory.id for r in found.related] == [home.id] and found.duplicate_of is None
    # With targets of its own, a repeated fact replaces its copy instead of refreshing it.
    assert settle(_fact("Ana has a shellfish allergy.", 9), [stored], explicit=["x"]).supersede == (
        stored.id,
    )


_VOCABULARY = "allerg allergi allergie handball handballverein hand <diet> <diet:vegan> <dieta> 東京 東京駅 a東京駅 レナ schwimm schwimmen abcde abcdef abcd"
_WORDS = st.one_of(
    st.sampled_from(_VOCABULARY.split()),
    st.text(alphabet=st.sampled_from(list("abcdeé<>:東京レナ")), max_size=8),
)


@settings(max_examples=400)
@given(st.lists(_WORDS, max_size=8), st.lists(_WORDS, max_size=8))
def test_words_are_matched_by_prefix_as_by_the_word_by_word_rule(words, known):
    """``_matched`` looks a word up among the known words sharing its first letters; it gives
    what asking ``_match`` of every word that is neither known nor short gives."""
    _matched_word_by_word(words, known)


def _matched_word_by_word(words: list[str], known: list[str]) -> None:
    cjk = any(sameness._cjk(k) for k in known)
    expected = [
        w
        if w in known or (not cjk and len(w) < sameness.PREFIX_CHARS and not sameness._cjk(w))
        else sameness._match(w, known)
        for w in words
    ]
    assert sameness._matched(words, known) == expected


# words that share their first letters with several others, and CJK words found inside a word
# that does not open with one: what the prefix buckets and the CJK side of ``_matched`` decide
_CLOSE_WORDS = st.sampled_from(
    "allerg allergi allergie allergic handball handballverein handb schwimm schwimmen "
    "a東京 東京 東京タワ x東京 <diet> <diet:vegan>".split()
)


@settings(max_examples=300)
@given(st.lists(_CLOSE_WORDS, max_size=8), st.lists(_CLOSE_WORDS, max_size=8))
def test_words_sharing_a_prefix_are_each_matched_as_by_the_word_by_word_rule(words, known):
    _matched_word_by_word(words, known)


@settings(max_examples=200)
@given(
    st.lists(
        st.sampled_from(["Nora lives in Leeds", "Nora moved to Glasgow", "Tom likes tea", "Tea in Leeds"]),
        max_size=15,
    )
)
def test_partners_are_the_facts_sharing_a_key_best_ranked_first(texts):
    memories = [
        Memory(
            id=f"m{i}",
            memory_type=MemoryType.SEMANTIC,
            user_id="u",
            text=t,
            created_at=datetime(2026, 1, 1, tzinfo=UTC),
        )
        for i, t in enumerate(texts)
    ]
    index = resolution._Index(memories, list(range(len(memories))))
    for i in range(len(memories)):
        sharing = [j for j in range(len(memories)) if j != i and index.keys[i] & index.keys[j]]
        assert index.partners(i) == sharing[: resolution.MAX_PARTNERS]


@settings(max_examples=300)
@given(
    st.permutations(range(16)),
    st.dictionaries(st.integers(0, 15), st.sampled_from([-9.0, -3.0, -2.5, 0.5, -0.25, 1.0, -5.75])),
    st.sets(st.integers(0, 15)),
)
def test_the_resolved_order_is_by_placement_then_position(ranked, placement, hidden):
    """Only the moved candidates have a placement; the rest keep -position; ties by position.
    The whole order is the reference: ``_by_placement`` sorts a prefix only."""
    position = {i: p for p, i in enumerate(ranked)}
    expected = sorted(
        (i for i in ranked if i not in hidden),
        key=lambda i: (-placement.get(i, float(-position[i])), position[i]),
    )
    assert resolution._by_placement(ranked, position, placement, hidden) == expected


@given(
    st.lists(
        st.tuples(
            st.sampled_from([MemoryType.SEMANTIC, MemoryType.EPISODIC, MemoryType.PROCEDURAL]),
            st.sampled_from(
                ["I live in Porto.", "I moved to Lisbon.", "Ana is allergic to shellfish.", "jazz"]
            ),
            st.booleans(),
        ),
        max_size=12,
    ),
    st.randoms(use_true_random=False),
    st.integers(1, 4),
)
def test_resolution_told_which_candidates_are_facts_resolves_as_it_reads_them(rows, rng, shown):
    """``resolve`` given the pool's column of which candidates are facts (it then reads only
    the facts' memories) gives what it gives reading every memory's type."""
    at = datetime(2026, 1, 1, tzinfo=UTC)
    memories = [
        Memory(f"m{i}", kind, "u", text, at + timedelta(days=i), superseded_by="x" if gone else None)
        for i, (kind, text, gone) in enumerate(rows)
    ]
    ranked = list(range(len(memories)))
    rng.shuffle(ranked)
    semantic = np.array([m.memory_type is MemoryType.SEMANTIC for m in memories], dtype=bool)
    assert resolve(memories, ranked, shown, semantic) == resolve(memories, ranked, shown)
