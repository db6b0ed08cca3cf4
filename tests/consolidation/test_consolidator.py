"""Consolidation end to end: real SQLite + embedder + service, a scripted OpenAI-compatible LLM."""

from __future__ import annotations

import json

import pytest

from atlas_mcp.config_tables import ConsolidationSettings
from atlas_mcp.consolidation import Consolidator, ProviderUnavailable, open_provider
from atlas_mcp.consolidation.answer import MalformedAnswer
from atlas_mcp.consolidation.consolidator import PENDING_KEY, WATERMARK_KEY

from .conftest import Persona


def answer(facts=(), procedures=(), updates=()) -> dict:
    return {"new_facts": list(facts), "new_procedures": list(procedures), "procedural_updates": list(updates)}


def fact(text, episodes, **extra) -> dict:
    return {
        "text": text,
        "fact_type": "preference",
        "confidence": 0.9,
        "supporting_episode_ids": episodes,
    } | extra


def consolidator(persona: Persona, settings: ConsolidationSettings) -> Consolidator:
    return Consolidator(persona.service, settings, open_provider(settings))


def live_facts(persona: Persona) -> dict[str, object]:
    return {
        m.text: m for m in persona.service.list("sarah", memory_types=["semantic"], include_superseded=False)
    }


async def test_writes_grounded_facts_with_provenance_and_advances_the_watermark(
    persona, fake_llm, openai_settings
):
    e = persona.episodes
    fake_llm.script(
        answer(
            facts=[
                fact("Sarah prefers short answers without bullet points.", [e[3]]),
                fact("Sarah takes a pottery class on Thursday evenings.", [e[4]], fact_type="world"),
            ]
        )
    )
    [report] = await consolidator(persona, openai_settings).run("sarah")

    facts = live_facts(persona)
    pottery = facts["Sarah takes a pottery class on Thursday evenings."]
    assert pottery.source_episodes == (e[4],) and pottery.fact_type == "world" and pottery.confidence == 0.9
    assert pottery.metadata == {"source": "consolidation"}
    assert len(report.applied) == 2 and report.rejected == []
    newest = persona.service.get("sarah", e[-1])
    assert persona.service.get_state("sarah", WATERMARK_KEY) == newest.created_at.isoformat()
    assert persona.service.get_state("sarah", PENDING_KEY) is None
    # auditable: the fact leads back to the episode the user actually said it in
    assert persona.service.get("sarah", pottery.source_episodes[0]).text.startswith(
        "Sarah started a pottery class"
    )
    hits = persona.service.recall("sarah", "when is Sarah's pottery class?", 3, memory_types=["semantic"])
    assert hits[0].memory.id == pottery.id


async def test_the_prompt_carries_new_episodes_related_facts_and_playbooks(
    persona, fake_llm, openai_settings
):
    fake_llm.script(answer())
    await consolidator(persona, openai_settings).run("sarah")

    [request] = fake_llm.requests
    assert request["path"] == "/chat/completions"
    assert request["body"]["model"] == "fake-model"
    assert request["body"]["response_format"] == {"type": "json_object"}
    payload = json.loads(request["body"]["messages"][1]["content"])
    assert [x["id"] for x in payload["new_episodes"]] == persona.episodes
    assert {persona.munich, persona.vegetarian} <= {f["id"] for f in payload["existing_facts"]}
    [playbook] = payload["playbooks"]
    assert playbook["id"] == persona.hue_playbook and playbook["success_count"] == 0
    assert persona.james_episode not in request["body"]["messages"][1]["content"]


async def test_items_without_provenance_or_with_foreign_or_unknown_ids_are_kept_out(
    persona, fake_llm, openai_settings
):
    e = persona.episodes
    fake_llm.script(
        answer(
            facts=[
                fact("Sarah loves jazz.", []),  # no provenance: invented
                fact("Sarah drives a blue Tesla.", [persona.james_episode]),  # another user's episode
                fact("Sarah likes hiking.", [e[0], "0123456789abcdef0123456789abcdef"]),  # one unknown id
                fact("Sarah lives near the router.", [persona.munich]),  # a fact id is not an episode
                {"text": "no ids field at all", "confidence": 0.9},
            ]
        )
    )
    [report] = await consolidator(persona, openai_settings).run("sarah")

    assert report.applied == []
    reasons = [r.reason for r in report.rejected]
    assert len(reasons) == 5
    assert sum("no supporting episode ids" in r for r in reasons) == 2
    assert sum("not this user's episodes" in r for r in reasons) == 3
    assert set(live_facts(persona)) == {"Sarah lives in Munich.", "Sarah is vegetarian."}
    assert persona.service.list("james", memory_types=["semantic"]) == []


async def test_confidence_floor_drops_weak_facts_and_playbooks(persona, fake_llm, openai_settings):
    e = persona.episodes
    fake_llm.script(
        answer(
            facts=[fact("Sarah might like ceramics.", [e[4]], confidence=0.4)],
            procedures=[
                {
                    "name": "Pottery prep",
                    "trigger_text": "before pottery",
                    "steps": ["pack apron", "go"],
                    "supporting_episode_ids": [e[4]],
                    "confidence": 0.7,
                }
            ],
        )
    )
    [report] = await consolidator(persona, openai_settings).run("sarah")
    assert report.applied == [] and all("below the floor" in r.reason for r in report.rejected)
    assert len(report.rejected) == 2


async def test_a_restated_fact_reinforces_the_existing_one_instead_of_duplicating(
    persona, fake_llm, openai_settings
):
    e = persona.episodes
    fake_llm.script(
        answer(facts=[fact("Sarah is vegetarian.", [e[1]], fact_type="constraint", confidence=0.7)])
    )
    [report] = await consolidator(persona, openai_settings).run("sarah")

    [applied] = report.applied
    assert applied.memory_id == persona.vegetarian
    stored = persona.service.get("sarah", persona.vegetarian)
    assert stored.source_episodes == (e[1],)
    assert stored.confidence == pytest.approx(0.85)  # 0.8 + one reinforcement step
    assert [t for t in live_facts(persona) if "vegetarian" in t] == ["Sarah is vegetarian."]


async def test_a_contradiction_supersedes_through_the_write_memory_path(persona, fake_llm, openai_settings):
    e = persona.episodes
    fake_llm.script(
        answer(
            facts=[
                fact(
                    "Sarah lives in Berlin, in Kreuzberg.",
                    [e[0]],
                    fact_type="identity",
                    confidence=1.0,
                    supersedes_id=persona.munich,
                    contradiction="harsh",
                ),
            ]
        )
    )
    [report] = await consolidator(persona, openai_settings).run("sarah")

    [applied] = report.applied
    old = persona.service.get("sarah", persona.munich)
    new = persona.service.get("sarah", applied.memory_id)
    assert old.superseded_by == new.id and new.supersedes == (persona.munich,)
    assert new.confidence == pytest.approx(0.9)  # harsh: the same penalty write_memory applies
    assert "Sarah lives in Munich." not in live_facts(persona)
    past = persona.service.recall("sarah", "where did Sarah live before?", 5, include_superseded=True)
    assert persona.munich in [h.memory.id for h in past]


async def test_superseding_a_foreign_or_unknown_fact_is_rejected(persona, fake_llm, openai_settings, service):
    james_fact = service.write("james", "James lives in Leeds.").id
    e = persona.episodes
    fake_llm.script(
        answer(
            facts=[
                fact("Sarah lives in Berlin.", [e[0]], supersedes_id=james_fact),
            ]
        )
    )
    [report] = await consolidator(persona, openai_settings).run("sarah")
    assert report.applied == [] and "not found" in report.rejected[0].reason
    assert service.get("james", james_fact).superseded_by is None


async def test_malformed_json_writes_nothing_and_keeps_the_watermark(persona, fake_llm, openai_settings):
    fake_llm.script('{"new_facts": [{"text": "Sarah likes', "I could not find anything.")
    subject = consolidator(persona, openai_settings)
    for _ in range(2):
        with pytest.raises(MalformedAnswer):
            await subject.run("sarah")
    assert persona.service.get_state("sarah", WATERMARK_KEY) is None
    assert persona.service.get_state("sarah", PENDING_KEY) is None
    assert set(live_facts(persona)) == {"Sarah lives in Munich.", "Sarah is vegetarian."}

    fake_llm.script(
        "```json\n"
        + json.dumps(answer(facts=[fact("Sarah skips bullet points.", [persona.episodes[3]])]))
        + "\n```"
    )
    [report] = await subject.run("sarah")
    assert len(report.applied) == 1


async def test_an_invalid_item_is_dropped_and_the_valid_ones_kept(persona, fake_llm, openai_settings):
    e = persona.episodes
    fake_llm.script(
        answer(
            facts=[
                fact("Sarah does pottery.", [e[4]], fact_type="hobby"),  # not a fact_type
                fact("Sarah does pottery on Thursdays.", [e[4]], confidence=3),  # out of range
                fact("Sarah takes a pottery class.", [e[4]]),
            ]
        )
    )
    [report] = await consolidator(persona, openai_settings).run("sarah")
    assert [a.action.text for a in report.applied] == ["Sarah takes a pottery class."]
    assert [r.reason.split(":")[0] for r in report.rejected] == ["invalid", "invalid"]


async def test_playbook_outcomes_move_the_track_record_once(persona, fake_llm, openai_settings):
    e = persona.episodes
    update = {"id": persona.hue_playbook, "outcome": "success", "supporting_episode_ids": [e[2]]}
    fake_llm.script(answer(updates=[update]))
    await consolidator(persona, openai_settings).run("sarah")

    playbook = persona.service.get("sarah", persona.hue_playbook)
    assert (playbook.success_count, playbook.failure_count) == (1, 0)
    assert playbook.last_success_at == persona.service.get("sarah", e[2]).occurred_at
    assert playbook.source_episodes == (e[2],)

    # The same outcome cited again (say, by a later batch) is not counted twice.
    new = persona.service.write("sarah", "Sarah said the Hue fix still holds.", "episodic").id
    fake_llm.script(
        answer(
            updates=[
                update | {"supporting_episode_ids": [e[2]]},
                {
                    "id": persona.hue_playbook,
                    "outcome": "failure",
                    "supporting_episode_ids": [new],
                    "refined_steps": ["Update the bridge firmware"],
                },
            ]
        )
    )
    [report] = await consolidator(persona, openai_settings).run("sarah")
    playbook = persona.service.get("sarah", persona.hue_playbook)
    assert (playbook.success_count, playbook.failure_count) == (1, 1)
    assert [s.instruction for s in playbook.steps] == ["Update the bridge firmware"]
    assert "already counted" in report.rejected[0].reason


async def test_recall_ranks_playbooks_by_their_track_record(service, fake_llm, openai_settings):
    steps = ["Restart the router", "Re-pair the bulbs"]
    good = service.write(
        "sarah", "When smart lights go offline", "procedural", name="Lights offline A", steps=steps
    ).id
    bad = service.write(
        "sarah", "When smart lights go offline", "procedural", name="Lights offline B", steps=steps
    ).id
    outcomes = [service.write("sarah", f"Run {i} of the lights fix", "episodic").id for i in range(4)]
    fake_llm.script(
        answer(
            updates=[
                {"id": good, "outcome": "success", "supporting_episode_ids": [outcomes[0]]},
                {"id": good, "outcome": "success", "supporting_episode_ids": [outcomes[1]]},
                {"id": bad, "outcome": "failure", "supporting_episode_ids": [outcomes[2]]},
                {"id": bad, "outcome": "failure", "supporting_episode_ids": [outcomes[3]]},
            ]
        )
    )
    await Consolidator(service, openai_settings, open_provider(openai_settings)).run("sarah")
    hits = service.recall("sarah", "my smart lights went offline", 2, memory_types=["procedural"])
    assert [h.memory.id for h in hits] == [good, bad]
    assert hits[0].explanation.multipliers.track_record > 1.0 > hits[1].explanation.multipliers.track_record


async def test_a_new_playbook_is_written_once(persona, fake_llm, openai_settings):
    e = persona.episodes
    procedure = {
        "name": "Prepare for pottery class",
        "trigger_text": "Before Sarah's Thursday pottery class",
        "steps": ["Pack the apron", {"instruction": "Leave at 18:30", "tool": "calendar"}],
        "supporting_episode_ids": [e[4]],
        "confidence": 0.9,
    }
    fake_llm.script(answer(procedures=[procedure]), answer(procedures=[procedure]))
    await consolidator(persona, openai_settings).run("sarah")
    persona.service.write("sarah", "Sarah went to pottery again.", "episodic")
    [report] = await consolidator(persona, openai_settings).run("sarah")

    playbooks = persona.service.list("sarah", memory_types=["procedural"])
    [written] = [p for p in playbooks if p.name == "Prepare for pottery class"]
    assert written.steps[1].tool == "calendar" and written.source_episodes == (e[4],)
    assert "already recorded" in report.rejected[0].reason


async def test_rerunning_a_crashed_batch_writes_nothing_twice_and_asks_no_llm(
    persona, fake_llm, openai_settings
):
    e = persona.episodes
    fake_llm.script(
        answer(
            facts=[
                fact("Sarah takes a pottery class on Thursdays.", [e[4]]),
                fact("Sarah lives in Berlin.", [e[0]], supersedes_id=persona.munich),
            ],
            updates=[{"id": persona.hue_playbook, "outcome": "success", "supporting_episode_ids": [e[2]]}],
        )
    )
    subject = consolidator(persona, openai_settings)
    service = persona.service
    journal = None

    # Crash after every write but before the watermark moved: put back the journal and the mark.
    original_set_state = service.set_state

    def remember_journal(user, key, value):
        nonlocal journal
        if key == PENDING_KEY and value is not None:
            journal = value
        original_set_state(user, key, value)

    service.set_state = remember_journal
    await subject.run("sarah")
    service.set_state = original_set_state
    before = {m.id: m for m in persona.service.list("sarah")}
    service.set_state("sarah", WATERMARK_KEY, None)
    service.set_state("sarah", PENDING_KEY, journal)

    [report] = await subject.run("sarah")  # the journalled answer: no second LLM request
    assert len(fake_llm.requests) == 1
    assert report.applied == [] and len(report.rejected) == 3
    after = {m.id: m for m in persona.service.list("sarah")}
    assert after.keys() == before.keys()
    assert after[persona.hue_playbook].success_count == 1
    assert service.get_state("sarah", WATERMARK_KEY) is not None


async def test_a_rerun_with_nothing_new_asks_nothing(persona, fake_llm, openai_settings):
    fake_llm.script(answer())
    subject = consolidator(persona, openai_settings)
    await subject.run("sarah")
    [report] = await subject.run("sarah")
    assert report.episodes == 0 and len(fake_llm.requests) == 1


async def test_dry_run_shows_the_plan_and_writes_nothing(persona, fake_llm, openai_settings):
    e = persona.episodes
    fake_llm.script(
        answer(
            facts=[
                fact("Sarah lives in Berlin.", [e[0]], supersedes_id=persona.munich),
                fact("Sarah is vegetarian.", [e[1]]),
            ]
        )
    )
    before = persona.service.list("sarah")
    [report] = await consolidator(persona, openai_settings).run("sarah", dry_run=True)

    text = "\n".join(report.lines())
    assert "dry run, nothing written" in text
    assert (
        f'would new fact "Sarah lives in Berlin." (preference, 0.90) from [{e[0]}] superseding [{persona.munich}]'
        in text
    )
    assert f"would reinforce fact {persona.vegetarian}" in text
    assert persona.service.list("sarah") == before
    assert persona.service.get_state("sarah", WATERMARK_KEY) is None
    assert persona.service.get_state("sarah", PENDING_KEY) is None


async def test_batches_follow_the_watermark_oldest_first(persona, fake_llm, openai_settings):
    settings = openai_settings.model_copy(update={"batch_episodes": 2})
    fake_llm.script(answer(), answer(), answer())
    reports = await consolidator(persona, settings).run("sarah")

    assert [r.episodes for r in reports] == [2, 2, 1]
    seen = [
        [x["id"] for x in json.loads(r["body"]["messages"][1]["content"])["new_episodes"]]
        for r in fake_llm.requests
    ]
    assert seen == [persona.episodes[0:2], persona.episodes[2:4], persona.episodes[4:5]]


async def test_the_key_is_sent_from_the_named_variable(persona, fake_llm, openai_settings, monkeypatch):
    monkeypatch.setenv("FAKE_LLM_KEY", "sk-test-123")
    settings = openai_settings.model_copy(update={"api_key_env": "FAKE_LLM_KEY", "json_mode": False})
    fake_llm.script(answer())
    await consolidator(persona, settings).run("sarah")
    [request] = fake_llm.requests
    assert request["headers"]["Authorization"] == "Bearer sk-test-123"
    assert "response_format" not in request["body"]


async def test_an_llm_error_leaves_everything_as_it_was(persona, fake_llm, openai_settings):
    fake_llm.script((503, '{"error": "overloaded"}'))
    with pytest.raises(ProviderUnavailable, match="HTTP 503"):
        await consolidator(persona, openai_settings).run("sarah")
    assert persona.service.get_state("sarah", WATERMARK_KEY) is None


async def test_consolidation_is_per_user(persona, fake_llm, openai_settings):
    fake_llm.script(answer(facts=[fact("James drives a blue Tesla.", [persona.james_episode])]))
    [report] = await consolidator(persona, openai_settings).run("james")
    [applied] = report.applied
    assert persona.service.get("james", applied.memory_id).source_episodes == (persona.james_episode,)
    assert persona.service.get_state("sarah", WATERMARK_KEY) is None
    payload = json.loads(fake_llm.requests[0]["body"]["messages"][1]["content"])
    assert [x["id"] for x in payload["new_episodes"]] == [persona.james_episode]
    assert payload["existing_facts"] == [] and payload["playbooks"] == []


def test_unconfigured_consolidation_says_it_is_off():
    from atlas_mcp.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="consolidation is off"):
        open_provider(ConsolidationSettings())
