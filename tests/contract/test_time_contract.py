"""Time and sameness on every engine: the same histories, the same answers.

``domain.validity.kept`` is the one definition of what a time filter keeps; each engine must
return exactly that (the embedded engine filters in SQL, Elasticsearch in its query).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from mcp import Client

from atlas_mcp.domain.audit import Actor
from atlas_mcp.domain.model import MemoryType
from atlas_mcp.domain.validity import Retention, TimeFilter, kept
from atlas_mcp.eval.harness import ManualClock
from atlas_mcp.mcp.server import build_server
from atlas_mcp.service import MemoryService

START = datetime(2026, 1, 1, 9, tzinfo=UTC)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def timed(contract_engine, clock):
    service = MemoryService(contract_engine, clock=clock)
    yield service
    service.close()


def at(days: float) -> datetime:
    return START + timedelta(days=days)


def history(service: MemoryService, clock: ManualClock) -> None:
    """Facts replaced by key, by supersedes_id and not at all; events; a backdated fact; a playbook."""
    clock.set(at(0))
    service.write("u1", "The user lives in Leeds.", about="home city")
    service.write("u1", "Hiked Ben Nevis with Sam.", "episodic", occurred_at=at(10))
    service.write("u1", "When the boiler shows F28, reset it.", "procedural", steps=["Press reset"])
    clock.set(at(40))
    old_car = service.write("u1", "The user drives a Ford Fiesta.")
    clock.set(at(60))
    service.write("u1", "The user lives in Glasgow.", about="home city")
    service.write("u1", "Went to a pottery class.", "episodic", occurred_at=at(62))
    clock.set(at(90))
    service.write("u1", "The user drives a Toyota Yaris.", supersedes_id=old_car.id)
    service.write("u1", "The user studied in York.", valid_from=at(-900), valid_to=at(-100))
    clock.set(at(120))


WINDOWS = [
    TimeFilter(as_of=at(5)),
    TimeFilter(as_of=at(50)),
    TimeFilter(as_of=at(100)),
    TimeFilter(as_of=at(-500)),
    TimeFilter(since=at(5), until=at(30)),
    TimeFilter(since=at(55)),
    TimeFilter(until=at(20)),
    TimeFilter(since=at(-200), until=at(-150)),
]


@pytest.mark.parametrize("window", WINDOWS, ids=str)
def test_a_time_filter_keeps_exactly_what_validity_says(timed, clock, window):
    history(timed, clock)
    everything = timed.list("u1")
    expected = {m.id for m in everything if kept(m, window, clock())}
    found = timed.recall(
        "u1",
        "the user",
        k=50,
        min_relevance=0.0,
        touch=False,
        as_of=window.as_of,
        since=window.since,
        until=window.until,
    )
    assert {h.memory.id for h in found} == expected


def test_a_key_supersedes_closes_validity_and_a_repeat_is_refreshed(timed, clock):
    history(timed, clock)
    stored = {m.text: m for m in timed.list("u1")}
    leeds, glasgow = stored["The user lives in Leeds."], stored["The user lives in Glasgow."]
    assert leeds.superseded_by == glasgow.id and leeds.valid_to == glasgow.valid_from
    fiesta, yaris = stored["The user drives a Ford Fiesta."], stored["The user drives a Toyota Yaris."]
    assert fiesta.valid_to == yaris.valid_from
    again = timed.write("u1", "The user lives in Glasgow.")
    assert (again.id, again.duplicate) == (glasgow.id, True)
    assert timed.get("u1", glasgow.id).last_used_at > glasgow.last_used_at  # refreshed
    assert len(timed.list("u1")) == len(stored)


def test_an_unresolved_update_is_resolved_at_recall(timed, clock):
    clock.set(at(0))
    old = timed.write("u1", "The user's dentist is Dr. Okafor.")
    clock.set(at(200))
    new = timed.write("u1", "The user switched to a new dentist, Dr. Lindqvist.")
    assert [r.memory.id for r in new.related] == [old.id]
    hits = timed.recall("u1", "who is my dentist?", min_relevance=0.0, touch=False)
    order = [h.memory.id for h in hits]
    assert order.index(new.id) < order.index(old.id)
    assert {h.memory.id: h.outdated_by for h in hits}[old.id] == new.id


def test_an_expired_memory_is_not_returned(timed, clock):
    clock.set(at(0))
    code = timed.write("u1", "The gate code is 4471.", expires_at=at(7))
    assert code.id in {h.memory.id for h in timed.recall("u1", "gate code", min_relevance=0.0)}
    clock.set(at(8))
    assert code.id not in {h.memory.id for h in timed.recall("u1", "gate code", min_relevance=0.0)}


def test_expired_memories_are_counted_then_removed_and_audited(timed, clock):
    """Expiry on every engine: counted in stats, removed from the store by prune (a dry run
    removes nothing), each removal a forget in the audit trail that says why."""
    clock.set(at(0))
    code = timed.write("u1", "The gate code is 4471.", expires_at=at(7))
    kept_fact = timed.write("u1", "The user drives a Kia Niro.")
    clock.set(at(8))
    stats = timed.stats()
    assert (sum(c.expiring for c in stats.counts), stats.expired) == (1, 1)
    nothing = Retention({kind: None for kind in MemoryType})
    assert [m.id for m in timed.prune(nothing, dry_run=True)] == [code.id]
    assert {m.id for m in timed.list("u1")} == {code.id, kept_fact.id}
    assert [m.id for m in timed.prune(nothing, actor=Actor("atlas-mcp prune", "cli"))] == [code.id]
    assert {m.id for m in timed.list("u1")} == {kept_fact.id}
    assert timed.stats().expired == 0
    forgot = [e for e in timed.audit("u1") if e.action == "forget"]
    assert [(e.memory_id, e.detail, e.via) for e in forgot] == [(code.id, "expired", "atlas-mcp prune")]


async def test_the_time_fields_work_through_the_mcp_tools(timed: MemoryService, clock: ManualClock) -> None:
    """The arguments and results of issue 28 through a real MCP client session, on every engine."""
    async with Client(build_server(timed, "u1")) as client:

        async def call(tool: str, **arguments):
            result = await client.call_tool(tool, arguments)
            return result

        first = (
            await call("write_memory", text="Nora drives a Ford Fiesta.", about="car")
        ).structured_content
        clock.set(clock() + timedelta(days=40))
        second = (
            await call("write_memory", text="Nora drives a Toyota Yaris.", about="car")
        ).structured_content
        assert second["superseded"] == [first["id"]] and second["related"] == []
        again = (await call("write_memory", text="Nora drives a Toyota Yaris.")).structured_content
        assert (again["id"], again["duplicate"]) == (second["id"], True)
        clock.set(clock() + timedelta(days=1))
        as_of = (START + timedelta(days=10)).isoformat()
        recalled = (
            await call("recall_memory", query="what car do I drive", as_of=as_of, min_relevance=0)
        ).structured_content
        (view,) = recalled["memories"]
        assert view["id"] == first["id"] and view["valid_to"] and view["about"] == "car"
        expiring = await call(
            "write_memory",
            text="Parking permit P-221 is valid this month.",
            expires_at=(clock() + timedelta(days=20)).isoformat(),
        )
        assert not expiring.is_error
        refused = await call(
            "recall_memory", query="car", since="2026-05-01T00:00:00Z", until="2026-04-01T00:00:00Z"
        )
        assert refused.is_error and "since" in refused.content[0].text
        bad = await call(
            "write_memory", text="x", valid_from="2026-02-01T00:00:00Z", valid_to="2026-01-01T00:00:00Z"
        )
        assert bad.is_error and "Nothing was written" in bad.content[0].text
        tools = {t.name: t for t in (await client.list_tools()).tools}
        for name in ("as_of", "since", "until"):
            assert name in tools["recall_memory"].input_schema["properties"]
        for name in ("about", "valid_from", "valid_to", "expires_at"):
            assert name in tools["write_memory"].input_schema["properties"]
        assert "related" in tools["write_memory"].description
