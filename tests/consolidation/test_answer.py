"""The strict JSON answer: forgiving envelope, strict items, one bad item never costs the batch."""

from __future__ import annotations

import json

import pytest

from atlas_mcp.consolidation.answer import DEFAULT_FACT_CONFIDENCE, MalformedAnswer, parse_answer


def test_a_fenced_object_with_prose_around_it_parses():
    body = {"new_facts": [{"text": "Sarah likes tea.", "supporting_episode_ids": "e1"}]}
    answer = parse_answer("Here you go:\n```json\n" + json.dumps(body) + "\n```")
    [fact] = answer.new_facts
    assert fact.supporting_episode_ids == ["e1"] and fact.confidence == DEFAULT_FACT_CONFIDENCE
    assert fact.supersedes_id == [] and fact.contradiction == "natural"


@pytest.mark.parametrize(
    "raw", ["", "no json here", '{"new_facts": [', "[1, 2]", '{"new_facts": {"text": "x"}}']
)
def test_anything_but_one_object_of_lists_is_malformed(raw):
    with pytest.raises(MalformedAnswer):
        parse_answer(raw)


def test_invalid_items_are_reported_with_their_reason():
    raw = json.dumps(
        {
            "new_facts": [
                {"text": "", "supporting_episode_ids": ["e1"]},
                {"text": "ok", "supporting_episode_ids": ["e1"]},
            ],
            "new_procedures": [
                {"name": "p", "trigger_text": "t", "steps": [], "supporting_episode_ids": ["e1"]}
            ],
            "procedural_updates": [{"id": "p1", "outcome": "maybe", "supporting_episode_ids": ["e1"]}],
        }
    )
    answer = parse_answer(raw)
    assert [f.text for f in answer.new_facts] == ["ok"]
    assert [r.section for r in answer.invalid] == ["new_facts", "new_procedures", "procedural_updates"]
    assert "outcome" in answer.invalid[2].reason and answer.invalid[1].summary == "p"


def test_null_optionals_mean_their_defaults():
    raw = json.dumps(
        {
            "new_facts": [
                {
                    "text": "x",
                    "supporting_episode_ids": ["e"],
                    "supersedes_id": None,
                    "contradiction": None,
                    "fact_type": None,
                }
            ]
        }
    )
    [fact] = parse_answer(raw).new_facts
    assert fact.supersedes_id == [] and fact.contradiction == "natural" and fact.fact_type == "preference"
