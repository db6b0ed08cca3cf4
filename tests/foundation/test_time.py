"""Memory that stays true without a careful agent, and time as a filter (issue 28).

Real SQLite file, real MiniLM, the real MCP tools in-process; the service's clock is set by
hand so that weeks pass between writes.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from atlas_mcp.errors import InvalidInput
from atlas_mcp.eval.harness import ManualClock
from atlas_mcp.service import MemoryService

START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def timed(engine, clock) -> MemoryService:
    return MemoryService(engine, clock=clock)


def later(clock: ManualClock, days: float) -> datetime:
    clock.set(clock() + timedelta(days=days))
    return clock()


def test_a_fact_written_again_is_refreshed_not_copied(timed: MemoryService, clock):
    first = timed.write("nora", "Nora is allergic to penicillin.")
    later(clock, 30)
    again = timed.write("nora", "Nora has a penicillin allergy.")
    assert (again.id, again.duplicate) == (first.id, True)
    assert len(timed.list("nora")) == 1
    stored = timed.get("nora", first.id)
    assert stored.last_used_at > START + timedelta(days=29)  # its decay starts again
    more = timed.write("nora", "Nora is allergic to penicillin; it gives her hives.")
    assert not more.duplicate  # it says more: kept, and the shorter one is named as related
    assert [r.memory.id for r in more.related] == [first.id]


def test_look_alikes_that_are_both_true_are_never_merged(timed: MemoryService, clock):
    leo = timed.write("nora", "Nora's son Leo plays the cello.")
    later(clock, 60)
    ava = timed.write("nora", "Nora's daughter Ava plays the piano.")
    assert not ava.duplicate and ava.related == ()
    claire = timed.write("nora", "Nora's sister Claire lives in Dublin.")
    fiona = timed.write("nora", "Nora's sister Fiona lives in Dublin too.")
    assert not fiona.duplicate and claire.id not in [r.memory.id for r in fiona.related]
    hits = timed.recall("nora", "What instrument does Leo play?", min_relevance=0.0)
    assert hits[0].memory.id == leo.id and hits[0].outdated_by is None
    assert all(
        h.outdated_by is None for h in timed.recall("nora", "What do my kids play?", min_relevance=0.0)
    )


def test_an_update_names_the_earlier_value_and_recall_resolves_it(timed: MemoryService, clock):
    old = timed.write("nora", "Nora lives in Leeds, near Hyde Park.")
    later(clock, 200)
    new = timed.write("nora", "Nora moved to Glasgow in September.")
    assert [(r.memory.id, "residence" in r.why) for r in new.related] == [(old.id, True)]
    hits = timed.recall("nora", "Where do I live now?", min_relevance=0.0)
    order = [h.memory.id for h in hits]
    assert order.index(new.id) < order.index(old.id)
    by_id = {h.memory.id: h for h in hits}
    assert by_id[old.id].outdated_by == new.id and by_id[new.id].outdated_by is None
    # "Do I still live in Leeds?" names the old value: the new one still comes first.
    assert timed.recall("nora", "Do I still live in Leeds?", min_relevance=0.0)[0].memory.id == new.id


def test_the_same_about_key_supersedes_by_itself(timed: MemoryService, clock):
    first = timed.write("sam", "Sam's manager is Priyanka.", about="Manager")
    later(clock, 90)
    second = timed.write("sam", "Sam reports to Gareth now.", about="manager ")
    assert second.superseded == (first.id,)
    old = timed.get("sam", first.id)
    assert old.superseded_by == second.id and old.about == "manager"
    assert old.valid_to == timed.get("sam", second.id).valid_from  # validity closed where the new starts
    other = timed.write("sam", "Sam's mentor is Priyanka.", about="mentor")
    assert other.superseded == ()


def test_valid_time_and_as_of(timed: MemoryService, clock):
    leeds = timed.write("nora", "Nora lives in Leeds.", about="home city")
    moved_on = later(clock, 100)
    glasgow = timed.write("nora", "Nora lives in Glasgow.", about="home city")
    assert timed.get("nora", leeds.id).valid_to == timed.get("nora", glasgow.id).valid_from
    later(clock, 30)
    then = [
        h.memory.id
        for h in timed.recall("nora", "where do I live", min_relevance=0.0, as_of=START + timedelta(days=50))
    ]
    now = [
        h.memory.id
        for h in timed.recall(
            "nora", "where do I live", min_relevance=0.0, as_of=moved_on + timedelta(days=1)
        )
    ]
    assert leeds.id in then and glasgow.id not in then
    assert glasgow.id in now and leeds.id not in now
    past = timed.write(
        "nora",
        "Nora lived in York as a student.",
        valid_from="2015-09-01T00:00:00Z",
        valid_to="2018-07-01T00:00:00Z",
    )
    assert [
        h.memory.id
        for h in timed.recall("nora", "where did I live", min_relevance=0.0, as_of="2016-01-01T00:00:00Z")
    ] == [past.id]


def test_since_and_until_keep_events_and_facts_of_the_window(timed: MemoryService, clock):
    march = timed.write("nora", "Hiked up Ben Nevis.", "episodic", occurred_at="2026-03-14T10:00:00Z")
    timed.write("nora", "Went to a pottery class.", "episodic", occurred_at="2026-05-02T10:00:00Z")
    fact = timed.write("nora", "Nora trains for a marathon.", valid_from="2026-02-01T00:00:00Z")
    found = timed.recall(
        "nora", "what did I do", min_relevance=0.0, since="2026-03-01T00:00:00Z", until="2026-03-31T23:59:59Z"
    )
    assert {h.memory.id for h in found} == {march.id, fact.id}
    # Explicit bounds win over the words of the question.
    found = timed.recall(
        "nora",
        "what did I do in May?",
        min_relevance=0.0,
        since="2026-03-01T00:00:00Z",
        until="2026-03-31T00:00:00Z",
    )
    assert march.id in {h.memory.id for h in found}


def test_an_expired_memory_is_never_returned(timed: MemoryService, clock):
    code = timed.write("nora", "The gate code this week is 4471.", expires_at=START + timedelta(days=7))
    assert [h.memory.id for h in timed.recall("nora", "gate code", min_relevance=0.0)] == [code.id]
    later(clock, 8)
    assert timed.recall("nora", "gate code", min_relevance=0.0) == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"valid_from": "last tuesday"}, "valid_from must be ISO-8601"),
        (
            {"valid_from": "2026-02-01T00:00:00Z", "valid_to": "2026-01-01T00:00:00Z"},
            "valid_to .* is before valid_from",
        ),
        ({"expires_at": "2020-01-01T00:00:00Z"}, "expires_at .* is not in the future"),
        ({"valid_to": "2020-01-01T00:00:00Z"}, "Pass valid_from"),
        ({"memory_type": "episodic", "valid_from": "2026-01-01T00:00:00Z"}, "valid_from is for semantic"),
        ({"about": "   "}, "about must not be empty"),
    ],
)
def test_bad_time_input_is_refused_and_writes_nothing(timed: MemoryService, kwargs, message):
    with pytest.raises(InvalidInput, match=message):
        timed.write("nora", "Nora likes tea.", **kwargs)
    assert timed.list("nora") == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"since": "2026-03-01T00:00:00Z", "until": "2026-02-01T00:00:00Z"}, "since .* is after until"),
        ({"as_of": "yesterday"}, "as_of must be ISO-8601"),
        ({"until": "31/12/2025"}, "until must be ISO-8601"),
    ],
)
def test_bad_recall_bounds_are_refused(timed: MemoryService, kwargs, message):
    with pytest.raises(InvalidInput, match=message):
        timed.recall("nora", "anything", **kwargs)
