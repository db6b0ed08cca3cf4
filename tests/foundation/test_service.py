"""MemoryService on a real SQLite file and the real MiniLM embedder."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from atlas_mcp.errors import Conflict, InvalidInput, NotFound
from atlas_mcp.service import MemoryService


def ids(hits):
    return [h.memory.id for h in hits]


def texts(hits):
    return [h.memory.text for h in hits]


def test_write_then_recall_in_the_next_call(service: MemoryService):
    written = service.write("sarah", "Sarah's hub runs firmware 2.4.1")
    hits = service.recall("sarah", "which firmware is on my hub?")
    assert hits[0].memory.id == written.id


def test_each_type_keeps_its_own_fields(service: MemoryService):
    event = service.write(
        "sarah", "Hub went offline after the storm", "episodic", occurred_at="2026-03-01T08:00:00Z"
    )
    fact = service.write("sarah", "Sarah prefers email over phone", fact_type="preference", confidence=0.8)
    playbook = service.write(
        "sarah",
        "Hub offline after power cut",
        "procedural",
        steps=["Unplug the hub for 30 s", {"instruction": "Re-pair the sensors", "tool": "ask_user"}],
    )
    event_m, fact_m, play_m = (service.get("sarah", r.id) for r in (event, fact, playbook))
    assert event_m.occurred_at == datetime(2026, 3, 1, 8, tzinfo=UTC)
    assert (fact_m.confidence, fact_m.fact_type, fact_m.use_count) == (0.8, "preference", 0)
    assert [s.instruction for s in play_m.steps] == ["Unplug the hub for 30 s", "Re-pair the sensors"]
    assert play_m.steps[1].tool == "ask_user"
    assert (play_m.success_count, play_m.failure_count, play_m.name) == (0, 0, "Hub offline after power cut")


def test_recall_refreshes_usage_of_facts_and_playbooks_only(service: MemoryService):
    fact = service.write("sarah", "Sarah's router is a FritzBox 7590")
    event = service.write("sarah", "Sarah rebooted the FritzBox router", "episodic")
    service.recall("sarah", "FritzBox router")
    hits = service.recall("sarah", "FritzBox router")
    by_id = {h.memory.id: h.memory for h in hits}
    assert by_id[fact.id].use_count == 2
    assert service.get("sarah", fact.id).use_count == 2
    assert service.get("sarah", event.id).use_count == 0


def test_supersession_hides_old_fact_unless_asked(service: MemoryService):
    old = service.write("sarah", "Sarah lives in Berlin")
    new = service.write("sarah", "Sarah moved to Munich", supersedes_id=old.id)
    assert new.superseded == (old.id,)
    assert old.id not in ids(service.recall("sarah", "where does Sarah live?"))
    history = {
        h.memory.id: h.memory
        for h in service.recall("sarah", "where does Sarah live?", include_superseded=True)
    }
    assert history[old.id].superseded_by == new.id
    assert history[old.id].superseded_at is not None
    assert history[new.id].supersedes == (old.id,)


def test_one_write_supersedes_several_and_chains_work(service: MemoryService):
    a = service.write("sarah", "Sarah has one cat")
    b = service.write("sarah", "Sarah's cat is called Tom")
    c = service.write("sarah", "Sarah now has two cats, Tom and Jerry", supersedes_id=[a.id, b.id])
    d = service.write("sarah", "Sarah has three cats", supersedes_id=c.id)
    stored = {m.id: m for m in service.list("sarah")}
    assert stored[a.id].superseded_by == c.id and stored[b.id].superseded_by == c.id
    assert stored[c.id].superseded_by == d.id and stored[d.id].superseded_by is None
    assert ids(service.recall("sarah", "how many cats does Sarah have")) == [d.id]


def test_harsh_contradiction_costs_confidence_clamped(service: MemoryService):
    a = service.write("sarah", "Sarah is allergic to nuts", confidence=0.95)
    b = service.write("sarah", "Sarah is not allergic to nuts", supersedes_id=a.id, contradiction="harsh")
    assert service.get("sarah", b.id).confidence == pytest.approx(0.9)
    c = service.write(
        "sarah",
        "Sarah is allergic to peanuts only",
        supersedes_id=b.id,
        contradiction="harsh",
        confidence=0.05,
    )
    assert service.get("sarah", c.id).confidence == 0.0
    d = service.write("sarah", "Sarah's allergy was resolved", supersedes_id=c.id, contradiction="natural")
    assert service.get("sarah", d.id).confidence == 1.0


def test_cannot_supersede_twice_or_across_types(service: MemoryService):
    a = service.write("sarah", "Sarah drinks tea")
    service.write("sarah", "Sarah drinks coffee", supersedes_id=a.id)
    with pytest.raises(Conflict, match="already superseded"):
        service.write("sarah", "Sarah drinks water", supersedes_id=a.id)
    event = service.write("sarah", "Sarah drank juice", "episodic")
    with pytest.raises(InvalidInput):
        service.write("sarah", "Sarah drinks juice", supersedes_id=event.id)


def test_failed_supersession_writes_nothing(service: MemoryService):
    a = service.write("sarah", "Sarah drives a Golf")
    before = len(service.list("sarah"))
    with pytest.raises(NotFound):
        service.write("sarah", "Sarah drives a Tesla", supersedes_id=[a.id, "does-not-exist"])
    assert len(service.list("sarah")) == before
    assert service.get("sarah", a.id).superseded_by is None


def test_users_never_see_each_other(service: MemoryService):
    secret = service.write("sarah", "Sarah's door code is 4711")
    assert secret.id not in ids(service.recall("james", "Sarah's door code is 4711", k=100))
    assert secret.id not in ids(service.recall("james", "door code", include_superseded=True, k=100))
    with pytest.raises(NotFound):
        service.get("james", secret.id)
    with pytest.raises(NotFound):
        service.forget("james", secret.id)
    with pytest.raises(NotFound):
        service.write("james", "James' code is 1234", supersedes_id=secret.id)
    assert service.get("sarah", secret.id).superseded_by is None
    assert service.list("james") == []


def test_catalog_is_shared_but_not_writable_by_users(service: MemoryService):
    service.load_catalog(
        [{"id": "cat-hub", "title": "Hub X firmware 2.5", "text": "Fixes error E42 on Hub X"}]
    )
    for user in ("sarah", "james"):
        assert "cat-hub" in ids(service.recall(user, "error E42"))
    assert "cat-hub" not in ids(service.recall("sarah", "error E42", include_catalog=False))
    with pytest.raises(NotFound):
        service.forget("sarah", "cat-hub")
    with pytest.raises(NotFound):
        service.write("sarah", "E42 is fixed", supersedes_id="cat-hub")
    with pytest.raises(InvalidInput):
        service.write("sarah", "new catalog entry", "catalog")


def test_catalog_reload_replaces_by_id_and_bad_line_loads_nothing(service: MemoryService):
    service.load_catalog([{"id": "c1", "title": "Old", "text": "old text"}])
    service.load_catalog([{"id": "c1", "title": "New", "text": "new text"}])
    assert [m.title for m in service.list(None)] == ["New"]
    with pytest.raises(InvalidInput, match="entry 2"):
        service.load_catalog([{"id": "c2", "title": "ok", "text": "fine"}, {"title": "no text"}])
    assert [m.id for m in service.list(None)] == ["c1"]


def test_user_memory_wins_near_tie_with_catalog(service: MemoryService):
    service.load_catalog(
        [{"id": "cat-1", "title": "Thermostat", "text": "The thermostat schedule is set in the app"}]
    )
    # The same words as the catalog entry, whose title is part of its indexed text: a tie
    # in both branches, which the catalog prior must break towards the user's own memory.
    own = service.write("sarah", "Thermostat: the thermostat schedule is set in the app")
    hits = service.recall("sarah", "thermostat schedule")
    assert ids(hits)[:2] == [own.id, "cat-1"]


def test_newer_of_two_competing_events_wins(service: MemoryService):
    now = datetime.now(UTC)
    old = service.write(
        # Eleven years back (decay ~0.07): at 1500 days (0.70) the dates in the two texts, which
        # both branches see, moved the cosine by up to 0.03 and decided the order either way.
        "sarah",
        "Sarah's hub showed error E42",
        "episodic",
        occurred_at=now - timedelta(days=4000),
    )
    new = service.write(
        "sarah", "Sarah's hub showed error E42", "episodic", occurred_at=now - timedelta(days=2)
    )
    assert ids(service.recall("sarah", "hub error E42"))[:2] == [new.id, old.id]


def test_successful_playbook_outranks_failing_twin(service: MemoryService):
    good = service.write("sarah", "Reset the hub: hold the button", "procedural", steps=["hold the button"])
    bad = service.write("sarah", "Reset the hub: hold the button", "procedural", steps=["hold the button"])
    service.update("sarah", service.get("sarah", good.id).evolve(success_count=5))
    service.update("sarah", service.get("sarah", bad.id).evolve(failure_count=5))
    assert ids(service.recall("sarah", "how do I reset the hub"))[:2] == [good.id, bad.id]


def test_forget_is_a_hard_delete(service: MemoryService):
    a = service.write("sarah", "Sarah's gym locker is number 0451")
    service.forget("sarah", a.id)
    with pytest.raises(NotFound):
        service.get("sarah", a.id)
    assert a.id not in ids(service.recall("sarah", "locker 0451", include_superseded=True))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"text": "   "}, "must not be empty"),
        ({"text": "x" * 40_000}, "limit is 32000"),
        ({"text": "ok", "memory_type": "dream"}, "unknown memory_type"),
        ({"text": "ok", "confidence": 1.5}, "between 0 and 1"),
        ({"text": "ok", "fact_type": "rumour"}, "unknown fact_type"),
        ({"text": "ok", "occurred_at": "yesterday", "memory_type": "episodic"}, "ISO-8601"),
        ({"text": "ok", "contradiction": "violent"}, "natural"),
        ({"text": "ok", "supersedes_id": "../../etc"}, "memory ids are"),
        ({"text": "ok", "metadata": {"x": "y" * 20_000}}, "metadata"),
    ],
)
def test_bad_writes_are_refused_clearly_and_write_nothing(service: MemoryService, kwargs, message):
    text = kwargs.pop("text")
    with pytest.raises(InvalidInput, match=message):
        service.write("sarah", text, **kwargs)
    assert service.list("sarah") == []


@pytest.mark.parametrize(
    ("query", "kwargs", "message"),
    [
        ("", {}, "must not be empty"),
        ("ok", {"k": 0}, "k must be"),
        ("ok", {"k": 101}, "k must be"),
        ("ok", {"memory_types": ["dream"]}, "unknown memory_type"),
        ("ok", {"memory_types": []}, "at least one"),
    ],
)
def test_bad_recalls_are_refused_clearly(service: MemoryService, query, kwargs, message):
    with pytest.raises(InvalidInput, match=message):
        service.recall("sarah", query, **kwargs)


def test_query_syntax_is_just_text(service: MemoryService):
    a = service.write("sarah", 'Sarah said "NEAR(hub" AND error* : OR; DROP TABLE memories')
    for query in ['"', "*", "NEAR(", "AND", "hub:error", "'; DROP TABLE memories; --", "OR OR OR"]:
        service.recall("sarah", query)
    assert a.id in ids(service.recall("sarah", 'NEAR(hub" AND error*'))


def test_memory_type_filter(service: MemoryService):
    fact = service.write("sarah", "Sarah likes jazz")
    event = service.write("sarah", "Sarah went to a jazz concert", "episodic")
    assert ids(service.recall("sarah", "jazz", memory_types=["episodic"])) == [event.id]
    assert ids(service.recall("sarah", "jazz", memory_types=["semantic"], include_catalog=False)) == [fact.id]


def test_update_changes_only_mutable_fields_of_the_callers_memory(service: MemoryService):
    fact = service.write("sarah", "Sarah drinks tea", confidence=0.7)
    stored = service.get("sarah", fact.id)
    updated = service.update("sarah", stored.evolve(confidence=0.9, use_count=3))
    assert service.get("sarah", fact.id) == updated and (updated.confidence, updated.use_count) == (0.9, 3)
    with pytest.raises(InvalidInput, match="supersedes"):
        service.update("sarah", stored.evolve(supersedes=("x",)))
    with pytest.raises(InvalidInput, match="confidence"):
        service.update("sarah", stored.evolve(confidence=1.5))
    with pytest.raises(NotFound):
        service.update("james", stored)
