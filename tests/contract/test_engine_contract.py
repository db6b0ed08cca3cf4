"""Behaviour every engine must show, driven through MemoryService (so policy is shared)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from atlas_mcp.domain.model import MemoryType
from atlas_mcp.engines.base import Engine, ListQuery
from atlas_mcp.errors import Conflict, NotFound


def ids(hits):
    return [h.memory.id for h in hits]


def test_engine_satisfies_protocol(contract_engine):
    assert isinstance(contract_engine, Engine)


def test_same_turn_visibility_and_ranking(contract_service):
    svc = contract_service
    target = svc.write("u1", "The garage door opener uses a Chamberlain MyQ hub")
    svc.write("u1", "The user enjoys hiking in the Alps")
    assert ids(svc.recall("u1", "garage door opener", min_relevance=0.0))[0] == target.id


def test_get_is_owner_scoped(contract_service, contract_engine):
    svc, engine = contract_service, contract_engine
    mine = svc.write("u1", "u1 fact")
    assert [m.id for m in engine.get("u1", [mine.id, "unknown"])] == [mine.id]
    assert engine.get("u2", [mine.id]) == []


def test_supersession_is_atomic_and_visible(contract_service, contract_engine):
    svc, engine = contract_service, contract_engine
    a = svc.write("u1", "The user's car is blue")
    b = svc.write("u1", "The user's car is red", supersedes_id=a.id)
    stored = {m.id: m for m in engine.get("u1", [a.id, b.id])}
    assert stored[a.id].superseded_by == b.id and stored[b.id].supersedes == (a.id,)
    assert a.id not in ids(svc.recall("u1", "car colour", min_relevance=0.0))
    assert a.id in ids(svc.recall("u1", "car colour", min_relevance=0.0, include_superseded=True))


def test_touch_increments_usage(contract_service, contract_engine):
    svc, engine = contract_service, contract_engine
    a = svc.write("u1", "The user likes oat milk")
    at = datetime(2026, 1, 1, tzinfo=UTC)
    engine.touch("u1", [a.id], at)
    engine.touch("u2", [a.id], at)  # another user's touch must not land
    stored = engine.get("u1", [a.id])[0]
    assert (stored.use_count, stored.last_used_at) == (1, at)


def test_update_changes_counts_and_steps(contract_service, contract_engine):
    svc, engine = contract_service, contract_engine
    p = svc.write("u1", "Reset the router", "procedural", steps=["Unplug"])
    current = engine.get("u1", [p.id])[0]
    engine.update("u1", current.evolve(success_count=2, failure_count=1))
    updated = engine.get("u1", [p.id])[0]
    assert (updated.success_count, updated.failure_count) == (2, 1)


def test_forget_and_list(contract_service, contract_engine):
    svc, engine = contract_service, contract_engine
    a = svc.write("u1", "first", "episodic", occurred_at="2026-01-01T00:00:00Z")
    b = svc.write("u1", "second", "episodic", occurred_at="2026-02-01T00:00:00Z")
    assert [m.id for m in svc.list("u1", memory_types=["episodic"])] == [b.id, a.id]
    assert engine.forget("u2", a.id) is False
    assert engine.forget("u1", a.id) is True
    with pytest.raises(NotFound):
        svc.get("u1", a.id)


def test_catalog_visible_to_all_owned_by_none(contract_service, contract_engine):
    svc, engine = contract_service, contract_engine
    svc.load_catalog(
        [{"id": "cat-1", "title": "Zigbee channels", "text": "Use Zigbee channel 25 to avoid wifi"}]
    )
    for user in ("u1", "u2"):
        hits = svc.recall(user, "zigbee channel", min_relevance=0.0)
        assert ids(hits)[0] == "cat-1" and hits[0].memory.memory_type is MemoryType.CATALOG
    assert engine.forget("u1", "cat-1") is False


def test_a_supersession_that_lost_a_race_is_one_conflict_and_writes_nothing(
    contract_service, contract_engine
):
    svc, engine = contract_service, contract_engine
    old = svc.write("u1", "The user's car is blue")
    svc.write("u1", "The user's car is green", supersedes_id=old.id)  # another writer got there first
    late = svc.get("u1", old.id).evolve(
        id="late-1", superseded_by=None, superseded_at=None, supersedes=(old.id,)
    )
    with pytest.raises(Conflict, match="changed at the same time; nothing was written"):
        engine.write(late, supersede=[old.id])  # the service checked before the other write landed
    assert engine.get("u1", ["late-1"]) == []


def test_a_memory_written_already_superseded_stays_hidden(contract_service, contract_engine):
    """``import`` writes a store's history as it was: a superseded fact arrives superseded and
    must be hidden from the very next recall in the process that wrote it, as after a restart."""
    svc, engine = contract_service, contract_engine
    current = svc.write("u1", "The user's bike is a grey Brompton")
    assert ids(svc.recall("u1", "Brompton bike", min_relevance=0.0)) == [current.id]  # caches loaded
    then = datetime(2026, 1, 1, tzinfo=UTC)
    old = svc.get("u1", current.id).evolve(
        id="old-bike", text="The user's bike is a red Brompton", superseded_by=current.id, superseded_at=then
    )
    engine.write(old)
    assert engine.get("u1", [old.id])[0].superseded_at == then
    assert old.id not in ids(svc.recall("u1", "Brompton bike", min_relevance=0.0))
    assert old.id in ids(svc.recall("u1", "Brompton bike", min_relevance=0.0, include_superseded=True))


def test_warming_up_changes_nothing_a_recall_returns(contract_service, contract_engine):
    svc, engine = contract_service, contract_engine
    written = svc.write("u1", "The user's bike is a grey Brompton")
    before = ids(svc.recall("u1", "Brompton bike", min_relevance=0.0, touch=False))
    engine.warm("u1")
    assert engine.warm_rows("u1") is True  # a small store: nothing left for the background
    engine.warm("nobody")
    assert ids(svc.recall("u1", "Brompton bike", min_relevance=0.0, touch=False)) == before == [written.id]


def test_scan_reads_what_list_pages_from_one_view(contract_service, contract_engine):
    """What an export reads: every memory ``list`` would page through, each once, and a forget
    while the scan runs drops nothing the scan began with."""
    written = [contract_service.write("sarah", f"scan fact {n}").id for n in range(7)]
    listed = [m.id for m in contract_engine.list(ListQuery("sarah", limit=100))]
    scanned = contract_engine.scan(ListQuery("sarah", limit=2, offset=5))  # limit/offset aside
    first = next(scanned).id
    contract_engine.forget("sarah", listed[-1])
    assert [first, *(m.id for m in scanned)] == listed and sorted(listed) == sorted(written)
