"""Engine behaviour against the fake cluster: isolation by DLS key, supersession without
half-applied state, usage statistics under contention, catalog, state and stats."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from mcp import Client

from atlas_mcp.domain.model import MemoryType
from atlas_mcp.engines.base import ListQuery
from atlas_mcp.errors import BackendUnavailable, Conflict, NotFound
from atlas_mcp.mcp.server import build_server
from atlas_mcp.service import MemoryService


@pytest.fixture
def service(es_engine) -> MemoryService:
    return MemoryService(es_engine)


def test_the_cluster_hides_other_users_even_without_the_code_filter(service, es_engine, fake_es):
    """DLS is the isolation boundary: search with u2's key and *no* owner filter at all."""
    secret = service.write("u1", "u1's locker code is 4417")
    u2 = es_engine.cluster.as_user(es_engine.keys.key_for("u2"))
    found = u2.search(index=es_engine.layout.aliases(tuple(MemoryType)), body={"query": {"match_all": {}}})
    assert secret.id not in [h["_id"] for h in found["hits"]["hits"]]
    u1 = es_engine.cluster.as_user(es_engine.keys.key_for("u1"))
    found = u1.search(index=es_engine.layout.aliases(tuple(MemoryType)), body={"query": {"match_all": {}}})
    assert secret.id in [h["_id"] for h in found["hits"]["hits"]]


def test_a_user_key_cannot_write(es_engine):
    from elasticsearch import AuthorizationException

    u1 = es_engine.cluster.as_user(es_engine.keys.key_for("u1"))
    alias = es_engine.layout.alias(MemoryType.SEMANTIC)
    result = u1.bulk(
        operations=[{"index": {"_index": alias, "_id": "y"}}, {"memory_type": "semantic", "text": "x"}]
    )
    with pytest.raises(AuthorizationException):
        u1.indices.create(index="anything")
    (item,) = result["items"]
    assert item["index"]["status"] == 403 and es_engine.get("u1", ["y"]) == []


def test_another_users_id_is_not_found_for_every_operation(service, es_engine):
    theirs = service.write("u1", "u1 fact")
    with pytest.raises(NotFound):
        service.write("u2", "u2 fact", supersedes_id=theirs.id)
    assert es_engine.forget("u2", theirs.id) is False
    with pytest.raises(Conflict):
        es_engine.update("u2", es_engine.get("u1", [theirs.id])[0].evolve(confidence=0.1))
    es_engine.touch("u2", [theirs.id], datetime(2026, 1, 1, tzinfo=UTC))
    assert es_engine.get("u1", [theirs.id])[0].use_count == 0


def test_a_failed_supersession_item_leaves_nothing_behind(service, es_engine, fake_es):
    first = service.write("u1", "The user lives in Lyon")
    second = service.write("u1", "The user works in Geneva")
    # the second target's update fails server-side (a shard rejection): one item of three
    real = fake_es._bulk_item

    def reject_second(who, op, meta, body):
        from .fake_es import EsError

        if op == "update" and meta["_id"] == second.id and "superseded_by" in body.get("doc", {}):
            raise EsError(429, "es_rejected_execution_exception", "rejected execution of bulk shard request")
        return real(who, op, meta, body)

    fake_es._bulk_item = reject_second
    with pytest.raises(BackendUnavailable, match="nothing was changed"):
        service.write("u1", "The user lives and works in Zurich", supersedes_id=[first.id, second.id])
    fake_es._bulk_item = real
    stored = es_engine.list(ListQuery("u1"))
    assert sorted(m.id for m in stored) == sorted([first.id, second.id])
    assert all(m.superseded_by is None for m in stored)


def test_a_failed_rollback_is_reported_with_the_ids_to_check(service, es_engine, fake_es):
    first = service.write("u1", "The user likes tea")
    real = fake_es._bulk_item
    calls = {"n": 0}

    def fail_everything_after_create(who, op, meta, body):
        from .fake_es import EsError

        calls["n"] += 1
        if calls["n"] == 1:
            return real(who, op, meta, body)
        raise EsError(503, "unavailable_shards_exception", "primary shard is not active")

    fake_es._bulk_item = fail_everything_after_create
    with pytest.raises(BackendUnavailable, match=f"could not be rolled back.*{first.id}"):
        service.write("u1", "The user likes coffee", supersedes_id=first.id)


def test_usage_statistics_survive_a_lost_race(service, es_engine, fake_es):
    fact = service.write("u1", "The user drinks oat milk")
    real = fake_es._bulk_item
    state = {"raced": False}

    def race_once(who, op, meta, body):
        if op == "update" and not state["raced"]:
            state["raced"] = True
            (index,) = [i for i in fake_es.indices.values() if fact.id in i.docs]
            index.docs[fact.id]["seq_no"] += 1000  # someone else's recall landed first
        return real(who, op, meta, body)

    fake_es._bulk_item = race_once
    es_engine.touch("u1", [fact.id], datetime(2026, 3, 1, tzinfo=UTC))
    assert state["raced"] and es_engine.get("u1", [fact.id])[0].use_count == 1


def test_update_changes_the_searchable_text_and_counts(service, es_engine):
    playbook = service.write("u1", "When the router drops", "procedural", steps=["Unplug it"], name="Router")
    current = es_engine.get("u1", [playbook.id])[0]
    es_engine.update("u1", current.evolve(name="Modem reset", success_count=3))
    updated = es_engine.get("u1", [playbook.id])[0]
    assert (updated.name, updated.success_count, updated.steps) == ("Modem reset", 3, current.steps)
    assert playbook.id in [h.memory.id for h in service.recall("u1", "modem reset")]


def test_catalog_is_shared_and_cannot_take_a_user_id(service, es_engine):
    mine = service.write("u1", "u1 fact")
    service.load_catalog([{"id": "cat-1", "title": "Zigbee", "text": "Use channel 25"}])
    assert [m.id for m in es_engine.list(ListQuery(None))] == ["cat-1"]
    assert es_engine.get("u2", ["cat-1"], include_catalog=True)[0].user_id is None
    assert es_engine.get("u2", ["cat-1"]) == []
    with pytest.raises(Conflict, match="taken by a user memory"):
        service.load_catalog([{"id": mine.id, "title": "t", "text": "x"}])


def test_state_is_per_user_and_deletable(es_engine):
    es_engine.set_state("u1", "consolidated_until", "2026-01-01T00:00:00+00:00")
    assert es_engine.get_state("u1", "consolidated_until") == "2026-01-01T00:00:00+00:00"
    assert es_engine.get_state("u2", "consolidated_until") is None
    es_engine.set_state("u1", "consolidated_until", None)
    es_engine.set_state("u1", "consolidated_until", None)  # deleting twice is fine
    assert es_engine.get_state("u1", "consolidated_until") is None


def test_list_since_and_oldest_first_see_microseconds(service, es_engine):
    stamps = [datetime(2026, 1, 1, 0, 0, 0, us, tzinfo=UTC) for us in (1, 2, 3)]
    ids = []
    for n, at in enumerate(stamps):
        svc = MemoryService(es_engine, clock=lambda at=at: at)
        ids.append(svc.write("u1", f"event {n}", "episodic").id)
    assert [m.id for m in es_engine.list(ListQuery("u1", oldest_first=True))] == ids
    assert [m.id for m in es_engine.list(ListQuery("u1", since=stamps[0], oldest_first=True))] == ids[1:]


def test_stats_count_per_owner_and_type(service, es_engine, fake_es):
    fake_es.writer.index["*"].add("monitor")  # index stats need it; without, the size is unknown
    old = service.write("u1", "fact one")
    service.write("u1", "fact two", supersedes_id=old.id)
    service.write("u2", "an event", "episodic")
    service.load_catalog([{"id": "c1", "title": "t", "text": "x"}])
    stats = es_engine.stats()
    counts = {(c.user_id, c.memory_type): (c.count, c.superseded) for c in stats.counts}
    assert counts == {
        (None, MemoryType.CATALOG): (1, 0),
        ("u1", MemoryType.SEMANTIC): (2, 1),
        ("u2", MemoryType.EPISODIC): (1, 0),
    }
    assert "127.0.0.1" in stats.location and "secret" not in stats.location and stats.size_bytes > 0


def test_recall_explains_that_the_engine_reranked(service):
    service.write("u1", "The hub runs firmware 2.1")
    (hit,) = service.recall("u1", "hub firmware")
    assert hit.explanation.reranker == "engine" and 0.0 <= hit.explanation.match <= 1.0
    assert hit.score == pytest.approx(hit.explanation.match * hit.explanation.multipliers.product)


async def test_a_cluster_failure_is_a_tool_error_not_a_crash(service, fake_es):
    fake_es.licence = "basic"
    async with Client(build_server(service, "u1")) as client:
        result = await client.call_tool("recall_memory", {"query": "anything"})
        assert result.is_error and "licence" in result.content[0].text
        written = await client.call_tool("write_memory", {"text": "still writable"})
        assert not written.is_error
