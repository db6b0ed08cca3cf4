"""A fact that sets what the question asks about (``domain.asked``), on hand-made memories and
through the real service, engine and MiniLM."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from atlas_mcp.domain import asked, calibration, gist
from atlas_mcp.domain.model import Memory, MemoryType
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
    # "current account", and "a living" is not where anyone lives.
    assert gist.asked_concept("What's my current role?") != "bank"
    assert gist.asked_concept("What do I do for a living?") is None
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
