"""The leak sweep on the Elasticsearch engine: every read under the caller's own DLS-scoped key.

The cluster is the project's fake (``tests/elasticsearch_engine/fake_es.py``), which enforces
each minted key's document-level-security query, so the sweep tests the DLS path, not an
application-side filter. Against a live cluster the same sweep runs with
``atlas-mcp eval leaks --config`` pointing at it.
"""

from __future__ import annotations

import pytest

pytest.importorskip("elasticsearch", reason="the elasticsearch extra is not installed")

from elasticsearch_engine.fake_es import FakeElasticsearch
from elasticsearch_engine.harness import bootstrapped_engine

from atlas_mcp.eval import leaks, scenario_suite
from atlas_mcp.eval.harness import ManualClock
from atlas_mcp.inference.embedder import default_embedder
from atlas_mcp.service import MemoryService


def test_no_memory_leaks_between_users_with_per_user_dls_keys(tmp_path):
    suite = scenario_suite.load()
    fake = FakeElasticsearch(embed=default_embedder().embed_batch).start()
    engine = bootstrapped_engine(fake, tmp_path / "es-keys.json", users=tuple(suite["tenants"]))
    try:
        clock = ManualClock()
        service = MemoryService(engine, clock=clock)
        stored = scenario_suite.populate(service, clock, suite, clock())
        report = leaks.sweep(service, stored)
        # The same queries do reach the memories as their owners: the zero is not an empty index.
        found = [m for m in stored if m.user_id and m.id in _recalled(service, m.user_id, m.text)]
    finally:
        engine.close()
        fake.stop()
    assert report.tenants == 3
    assert report.queries == 2 * report.memories * 2
    assert report.leaks == ()
    assert len(found) == report.memories


def _recalled(service: MemoryService, user: str, query: str) -> set[str]:
    # Likely matches only: the fake's reranker scores every candidate alike (sigmoid 0.68-0.73),
    # so by score alone a five-year-old superseded fact (decay 0.5) sits below the top 10.
    floor = service.policy.calibration.relevance_floor
    return {
        h.memory.id
        for h in service.recall(user, query, include_superseded=True, touch=False, min_relevance=floor)
    }
