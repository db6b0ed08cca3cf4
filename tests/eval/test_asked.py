"""A fact that sets what the question asks about (``domain.asked``), on hand-made memories and
through the real service, engine and MiniLM."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from atlas_mcp.domain import asked, calibration, gist
from atlas_mcp.domain.model import Memory, MemoryType
from atlas_mcp.domain.ranking import RecallQuery
from atlas_mcp.domain.scoring import ScoringPolicy
from atlas_mcp.eval import mixed_suite
from atlas_mcp.service import MemoryService

T0 = datetime(2026, 3, 1, 18, 0, tzinfo=UTC)


def memory(i: int, text: str, kind: MemoryType = MemoryType.SEMANTIC) -> Memory:
    return Memory(id=f"m{i}", memory_type=kind, user_id="u", text=text, created_at=T0, occurred_at=T0)


def test_the_facts_setting_the_asked_attribute_of_the_same_person():
    memories = [
        memory(0, "Prefers to be called by first name at work."),
        memory(1, "My husband is Daniel; he teaches chemistry at a lycée."),
        memory(2, "My sister's husband is Marc."),  # her sister's, not hers
        memory(3, "Met my husband Daniel at a concert.", MemoryType.EPISODIC),  # an event sets nothing
        memory(4, "I live in Leeds, in a terraced house."),
    ]
    everyone = range(len(memories))
    assert asked.setting_what_is_asked("What's my husband called?", memories, everyone) == [1]
    assert asked.setting_what_is_asked("Which city do I live in these days?", memories, everyone) == [4]
    assert asked.setting_what_is_asked("How tall is Ben Nevis?", memories, everyone) == []
    # Only the best DEPTH candidates are read.
    assert asked.setting_what_is_asked("Which city do I live in?", memories, [0] * asked.DEPTH + [4]) == []


def test_a_question_names_the_attribute_without_its_value():
    assert gist.asked_concept("Where do I work?") == "job"
    assert gist.asked_concept("¿Dónde vivo?") == "residence"
    assert gist.asked_concept("Who is my manager?") == "manager"  # no one named after it
    assert gist.asked_concept("Which city do I live in these days?") == "residence"
    # Only function words may be missing after a cue's first word: "current" alone is not
    # "current account".
    assert gist.asked_concept("What's my current role?") != "bank"
    # A cue's first word alone is a weak reading, and a clear meaning overrides it.
    assert gist.asked_cue("What do I do for a living?") == ("residence", False)
    assert gist.asked_cue("Where does my sister live?") == ("residence", False)
    living = asked.asked("What do I do for a living?", "job")
    assert living is not None and living.concept == "job" and living.sure
    assert gist.asked_concept("How tall is Ben Nevis?") is None


def test_the_fact_that_sets_what_is_asked_outranks_a_word_it_lacks(engine):
    """Among the mixed suite's background crowd, as there: "called" is a word the answer lacks."""
    service = MemoryService(engine)
    plain = MemoryService(engine, ScoringPolicy(attribute_weight=0))
    husband = "My husband is Daniel; he teaches chemistry at a lycée."
    for entry in mixed_suite.load()["background"]:
        if entry["type"] != "procedural":
            service.write("maya", entry["text"], entry["type"])
    service.write("maya", husband)
    question = "What's my husband called?"
    assert plain.recall("maya", question, 3, min_relevance=0, touch=False)[0].memory.text != husband
    assert service.recall("maya", question, 3, min_relevance=0, touch=False)[0].memory.text == husband
    # Setting what is asked is evidence for relevance too: the answer clears the default floor.
    unaided = MemoryService(engine, ScoringPolicy(attribute_evidence=0))
    assert husband not in {h.memory.text for h in unaided.recall("maya", question, 3, touch=False)}
    assert husband in {h.memory.text for h in service.recall("maya", question, 3, touch=False)}


def test_the_evidence_is_shared_by_the_facts_that_set_the_attribute():
    policy = ScoringPolicy().calibration
    one = calibration.with_attribute([0.02, 0.02], [0], policy)
    two = calibration.with_attribute([0.02, 0.02], [0, 1], policy)
    assert one[1] == 0.02 and one[0] == pytest.approx(1 - 0.98 * (1 - policy.attribute_evidence))
    assert two[0] == two[1] == pytest.approx(1 - 0.98 * (1 - policy.attribute_evidence / 2))


def likeness_of(
    nearest: str, cosine: float, runner_up: str | None = None, second: float = 0.0
) -> list[float]:
    """A query's cosines with every prototype: ``cosine`` for ``nearest``'s, ``second`` for
    ``runner_up``'s, 0.1 for the rest."""
    return [
        cosine if concept == nearest else second if concept == runner_up else 0.1
        for concept, texts in asked.PROTOTYPES.items()
        for _ in texts
    ]


def test_the_meaning_counts_when_near_enough_and_clear_of_the_next():
    assert asked.meaning_of(likeness_of("job", 0.65), 0.6, 0.1) == "job"
    assert asked.meaning_of(likeness_of("job", 0.55), 0.6, 0.1) is None  # not near enough
    assert asked.meaning_of(likeness_of("job", 0.65, "residence", 0.6), 0.6, 0.1) is None  # not clear
    assert asked.meaning_of(None, 0.6, 0.1) is None  # the engine had no vector
    assert asked.meaning_of([0.9], 0.6, 0.1) is None  # not one cosine per prototype


def test_a_reading_is_sure_when_the_meaning_agrees_or_names_what_the_words_do_not():
    both = asked.asked("Where do I work?", "job")
    assert both is not None and both.concept == "job" and both.sure and both.by_words
    words = asked.asked("Where do I work?", None)
    assert words is not None and not words.sure
    meaning = asked.asked("What do I do for a living?", "job")
    assert meaning is not None and meaning.concept == "job" and meaning.sure and not meaning.by_words
    # The words win a disagreement, unsure.
    disagree = asked.asked("Which city do I live in these days?", "job")
    assert disagree is not None and disagree.concept == "residence" and not disagree.sure
    # An identifier is asked for by name: "my passport number" is not read as a phone number.
    assert asked.asked("What's my passport number?", "phone number") is None


def test_a_sure_reading_asks_the_fact_to_name_whom_the_question_names():
    memories = [memory(0, "I work as a product designer at Fernhill."), memory(1, "Rohan works as a nurse.")]
    rohan = asked.asked("What is Rohan's job?", "job")
    assert rohan is not None and rohan.names == {"rohan"}
    assert asked.setting(rohan, memories, range(2)) == [1]


def test_the_meaning_lifts_the_fact_a_question_in_other_words_asks_for(engine):
    """Among the mixed suite's background crowd: "for a living" names no attribute, and its
    words find a kitchen note's "living room"; its meaning is a question about work."""
    service = MemoryService(engine)
    words_only = MemoryService(engine, ScoringPolicy(read_meaning=False))
    job = "I work as a product designer at Fernhill, mostly on the mobile app."
    for entry in mixed_suite.load()["background"]:
        if entry["type"] != "procedural":
            service.write("maya", entry["text"], entry["type"])
    service.write("maya", job)
    question = "What do I do for a living?"
    assert words_only.recall("maya", question, 3, min_relevance=0, touch=False)[0].memory.text != job
    assert service.recall("maya", question, 3, min_relevance=0, touch=False)[0].memory.text == job
    # and the reading is evidence: the answer clears the default floor
    assert job in {h.memory.text for h in service.recall("maya", question, 3, touch=False)}


def test_likeness_reuses_the_query_vector_and_runs_no_model_for_it(engine):
    service = MemoryService(engine)
    service.write("u", "I live in Leeds.")
    plan = service.recall_plan(RecallQuery("u", "Where am I living these days?"))
    assert engine.likeness(plan, asked.PROTOTYPE_TEXTS) is None  # the query was never embedded
    engine.candidates(plan)
    cosines = engine.likeness(plan, asked.PROTOTYPE_TEXTS)
    assert cosines is not None and len(cosines) == len(asked.PROTOTYPE_TEXTS)
    assert asked.meaning_of(cosines, 0.6, 0.1) == "residence"


def test_a_question_in_another_language_is_read_by_its_words_and_surely():
    assert gist.asked_concept("Wo wohne ich?") == "residence"  # read as English, glue of every language
    assert gist.asked_concept("Où est-ce que je travaille ?") == "job"
    spanish = asked.asked("¿Dónde vivo ahora?")
    assert spanish is not None and spanish.concept == "residence" and spanish.language == "es"
    assert spanish.across(gist.gist("I live in Leeds.")) and not spanish.across(gist.gist("Vivo en Sevilla."))
    # German capitalises nouns: "Schule" is not someone the fact must name.
    german = asked.asked("In welche Schule geht meine Tochter?")
    assert german is not None and german.relations == {"daughter"} and not german.names


def test_a_question_in_another_language_finds_the_english_fact(engine):
    """Neither MiniLM nor BM25 relates "¿Dónde vivo ahora?" to an English fact; its words name
    the attribute, and the fact that sets it comes first from anywhere in the pool."""
    service = MemoryService(engine)
    home = "We moved to Lyon in June; we rent a flat in the Croix-Rousse."
    for entry in mixed_suite.load()["background"]:
        if entry["type"] != "procedural":
            service.write("maya", entry["text"], entry["type"])
    service.write("maya", home)
    assert (
        service.recall("maya", "¿Dónde vivo ahora?", 3, min_relevance=0, touch=False)[0].memory.text == home
    )
    assert home in {h.memory.text for h in service.recall("maya", "¿Dónde vivo ahora?", 3, touch=False)}


@settings(max_examples=300)
@given(st.lists(st.floats(-1, 1), min_size=len(asked.PROTOTYPE_TEXTS), max_size=len(asked.PROTOTYPE_TEXTS)))
def test_the_meaning_is_the_attribute_of_the_best_prototypes(cosines):
    """Each attribute counts by its best prototype: the nearest attribute, if it reaches the
    threshold and leads the next by the margin (per attribute, the maximum over its texts)."""
    attributes = [a for a, texts in asked.PROTOTYPES.items() for _ in texts]
    best = {a: max(c for c, b in zip(cosines, attributes, strict=True) if b == a) for a in asked.PROTOTYPES}
    ranked = sorted(best, key=lambda a: -best[a])  # stable: a tie goes to the earlier attribute
    first, second = ranked[0], ranked[1]
    clear = best[first] >= 0.6 and best[first] - best[second] >= 0.1
    assert asked.meaning_of(cosines, 0.6, 0.1) == (first if clear else None)


def test_the_concept_a_text_names_is_its_gists_without_the_rest_of_it():
    """``gist.concept_of`` (what every query is asked first) and ``gist.question_subject``
    read what the whole gist reads,
    on every question and memory of the mixed suite."""
    suite = mixed_suite.load()
    texts = [entry["text"] for entry in suite["background"]]
    for tenant in suite["tenants"].values():
        texts += [m["text"] for m in tenant["memories"]] + [q["query"] for q in tenant["questions"]]
    assert any(gist.gist(t).concept for t in texts) and any(not gist.gist(t).concept for t in texts)
    for text in texts:
        assert gist.concept_of(text) == gist.gist(text).concept, text
        read = gist.gist(text)
        assert gist.question_subject(text) == (read.relations, read.names), text
