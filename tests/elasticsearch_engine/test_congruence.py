"""One ranking for both engines: the same corpus and queries through the embedded engine and the
Elasticsearch engine (on the fake cluster, with the same MiniLM embedder behind its
``semantic_text`` endpoint), through the same ``MemoryService``.

Where the configuration is the same, the order is the same:

- *rerank off* (``rerank_inference_id = ""``): the ES engine fetches both branches and fuses them
  as the embedded engine does; the service's context rerank then sees the same cosines, ranks,
  lengths and episodes, and the same multipliers decide. With ``bm25_weight = 0`` nothing else
  enters, and the order and relevance agree.
- *a deterministic stand-in reranker*: the embedded engine's service uses a local reranker that
  scores (1 + cosine) / 2 of the query and the memory's searchable text; the fake's rerank
  endpoint returns the same probability. Relevance and order agree.

Where it is not, the difference is the documented one (docs/elasticsearch.md, "One ranking"):
BM25 is computed by two analyzers (the embedded engine's postings over `domain.lexical` vs the
cluster's analyzers), so the BM25
scores differ while the targeted memory still ranks first.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from atlas_mcp.domain.pool import Pool
from atlas_mcp.domain.scoring import ScoringPolicy
from atlas_mcp.engines.embedded.engine import EmbeddedEngine
from atlas_mcp.inference.embedder import default_embedder
from atlas_mcp.service import Hit, MemoryService, RecallQuery

from .fake_es import FakeElasticsearch, rerank_model_score
from .harness import bootstrapped_engine

NOW = datetime(2026, 6, 1, 12, tzinfo=UTC)
FACTS = [
    "The user's garage door opener is a Chamberlain MyQ",
    "The user's sister Ana lives in Porto and teaches chemistry",
    "The living room hub runs firmware 2.1 since March",
    "The user only drinks oat milk in coffee",
    "The user's road bike has a broken rear derailleur",
    "The user is allergic to penicillin",
]
EVENTS = [  # one conversation (an episode), then a separate one two weeks later
    (timedelta(days=-20, minutes=0), "Sarah: we should repaint the kitchen before the party"),
    (timedelta(days=-20, minutes=3), "Tom: the kitchen paint should be a warm white"),
    (timedelta(days=-20, minutes=5), "Sarah: ok, I will buy two buckets on Saturday"),
    (timedelta(days=-6), "Sarah: the plumber fixed the leaking bathroom tap"),
]
PLAYBOOK = (
    "When the router drops the connection",
    ["Unplug the router", "Wait thirty seconds", "Plug it back in"],
)
CATALOG = {"id": "cat-zigbee", "title": "Zigbee channels", "text": "Zigbee networks work best on channel 25"}
QUERIES = {
    "what opens the garage door": FACTS[0],
    "where does my sister live": FACTS[1],
    "which firmware does the hub run": FACTS[2],
    "what milk do I take in coffee": FACTS[3],
    "what is wrong with the bike": FACTS[4],
    "which medicine must I avoid": FACTS[5],
    "what colour will the kitchen be painted": EVENTS[1][1],
    "who fixed the tap": EVENTS[3][1],
    "the router keeps dropping": PLAYBOOK[0],
    "which zigbee channel": CATALOG["text"],
}
NO_BM25 = ScoringPolicy(bm25_weight=0.0)


class StandInReranker:
    """A deterministic cross-encoder stand-in: the score the fake's rerank endpoint returns."""

    name = "stand-in"

    def __init__(self, embed) -> None:
        self._embed = embed

    def match(self, query: str, pool: Pool) -> np.ndarray:
        vectors = np.asarray(
            self._embed([query, *(m.search_text() for m in pool.memories)]), dtype=np.float64
        )
        return np.array([rerank_model_score("probability", vectors[0], v) for v in vectors[1:]])


@pytest.fixture(scope="module")
def embedder():
    return default_embedder()


@pytest.fixture
def cluster(embedder) -> Iterator[FakeElasticsearch]:
    fake = FakeElasticsearch(embed=embedder.embed_batch).start()
    yield fake
    fake.stop()


def populate(service: MemoryService) -> None:
    for fact in FACTS:
        service.write("u1", fact)
    for offset, text in EVENTS:
        service.write("u1", text, "episodic", occurred_at=NOW + offset)
    service.write("u1", PLAYBOOK[0], "procedural", steps=PLAYBOOK[1], name="Router reset")
    service.load_catalog([CATALOG])


def embedded(tmp_path: Path, embedder, policy: ScoringPolicy, reranker=None) -> MemoryService:
    service = MemoryService(
        EmbeddedEngine(tmp_path / "atlas.db", embedder), policy, reranker=reranker, clock=lambda: NOW
    )
    populate(service)
    return service


def elasticsearch(
    cluster: FakeElasticsearch, tmp_path: Path, policy: ScoringPolicy, **config
) -> MemoryService:
    engine = bootstrapped_engine(cluster, tmp_path / "es-keys.json", users=("u1",), policy=policy, **config)
    service = MemoryService(engine, policy, clock=lambda: NOW)
    populate(service)
    return service


def ranked(service: MemoryService, query: str) -> list[Hit]:
    return service.recall("u1", query, k=len(FACTS) + len(EVENTS) + 2, min_relevance=0.0, touch=False)


def texts(hits: list[Hit]) -> list[str]:
    return [h.memory.text for h in hits]


def test_rerank_off_gives_the_same_order_and_relevance(cluster, tmp_path, embedder):
    local = embedded(tmp_path / "embedded", embedder, NO_BM25)
    remote = elasticsearch(cluster, tmp_path / "es", NO_BM25, rerank_inference_id="")
    try:
        for query, target in QUERIES.items():
            ours, theirs = ranked(local, query), ranked(remote, query)
            assert texts(ours) == texts(theirs), query
            assert texts(ours)[0] == target, query
            assert [h.explanation.match for h in theirs] == pytest.approx(
                [h.explanation.match for h in ours], abs=2e-3
            ), query
            assert {h.explanation.reranker for h in ours + theirs} == {"context"}
    finally:
        local.close()
        remote.close()


def test_a_stand_in_reranker_gives_the_same_order_and_relevance(cluster, tmp_path, embedder):
    """The embedded engine reranks locally, the cluster server-side; both with the same scorer."""
    policy = ScoringPolicy()
    local = embedded(tmp_path / "embedded", embedder, policy, StandInReranker(embedder.embed_batch))
    remote = elasticsearch(cluster, tmp_path / "es", policy)  # the fake's probability reranker
    try:
        for query in QUERIES:
            ours, theirs = ranked(local, query), ranked(remote, query)
            assert texts(ours) == texts(theirs), query
            assert [h.score for h in theirs] == pytest.approx([h.score for h in ours], abs=1e-4), query
            assert {h.explanation.reranker for h in theirs} == {"engine"}
    finally:
        local.close()
        remote.close()


def test_bm25_analysis_is_the_documented_difference(cluster, tmp_path, embedder):
    """Same weights, but the embedded postings and the cluster's analyzer score BM25 differently: the scores
    differ, the targeted memory still comes first on both engines."""
    policy = ScoringPolicy()
    local = embedded(tmp_path / "embedded", embedder, policy)
    remote = elasticsearch(cluster, tmp_path / "es", policy, rerank_inference_id="")
    try:
        differs = False
        for query, target in QUERIES.items():
            ours, theirs = ranked(local, query), ranked(remote, query)
            assert texts(ours)[0] == texts(theirs)[0] == target, query
            bm25 = {
                c.memory.text: c.bm25_score
                for c in local._engine.candidates(local.recall_plan(RecallQuery("u1", query)))
            }
            remote_bm25 = {
                c.memory.text: c.bm25_score
                for c in remote._engine.candidates(remote.recall_plan(RecallQuery("u1", query)))
            }
            differs |= any(abs((bm25.get(t) or 0) - (remote_bm25.get(t) or 0)) > 1e-3 for t in bm25)
        assert differs, "if the analyzers ever agree, the documented difference is gone: update the docs"
    finally:
        local.close()
        remote.close()
