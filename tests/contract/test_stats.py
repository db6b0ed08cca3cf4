"""``Engine.stats()``: what `atlas-mcp stats` shows, the same on every engine."""

from __future__ import annotations


def test_stats_count_each_owner_and_type_with_superseded_ones(contract_service):
    svc = contract_service
    old = svc.write("u1", "The user's car is blue")
    svc.write("u1", "The user's car is red", supersedes_id=old.id)
    svc.write("u1", "The user washed the car", "episodic")
    svc.write("u2", "u2 likes tea")
    svc.load_catalog([{"id": "car-manual", "title": "Car manual", "text": "Check the tyres monthly"}])
    found = svc.stats()
    counts = {(c.user_id, c.memory_type.value): (c.count, c.superseded) for c in found.counts}
    assert counts == {
        ("u1", "semantic"): (2, 1),
        ("u1", "episodic"): (1, 0),
        ("u2", "semantic"): (1, 0),
        (None, "catalog"): (1, 0),
    }
    assert found.size_bytes is None or found.size_bytes > 0
    assert found.location
