"""Client-side cost of the Elasticsearch engine: building a recall request and parsing its hits.

Measured without a cluster: everything atlas-mcp itself does per recall (request body, JSON
encoding, JSON decoding of an 80-hit response, hits back to ``Memory`` objects). On a real
cluster the request's own time (two retrievers, RRF, inference for the query embedding and
the optional reranker) dominates; this shows how little the client adds on top.
"""

from __future__ import annotations

import json
import time
from typing import Any

from ..domain.model import MemoryType
from ..domain.scoring import ScoringPolicy
from ..engines.base import RecallPlan
from . import corpus
from .measure import Latency

HITS = 80


def es_client_overhead(seed: int, samples: int = 200) -> dict[str, Any] | None:
    """Latency of build and parse in ms, or None when the Elasticsearch engine is not installed."""
    try:
        from ..engines.elasticsearch import documents, requests
        from ..engines.elasticsearch.layout import IndexLayout
    except ImportError:
        return None
    policy, layout = ScoringPolicy(), IndexLayout()
    inference = requests.Inference("atlas-embedding", "atlas-rerank")  # the one-search recall
    memories = corpus.tenant_memories(0, corpus.specs(seed, HITS))
    hits = [
        {
            "_index": layout.concrete(m.memory_type),
            "_id": m.id,
            "_score": 1.0 / (rank + 30),
            "_source": documents.to_source(m),
        }
        for rank, m in enumerate(memories)
    ]
    response = json.dumps({"hits": {"total": {"value": HITS}, "hits": hits}}).encode()
    build_s, parse_s = [], []
    for query in corpus.queries(seed, samples):
        plan = RecallPlan(corpus.tenant_id(0), query, frozenset(MemoryType), False, HITS, 30)
        started = time.perf_counter()
        request = requests.recall_request(plan, layout, policy, inference, memories[0].created_at)
        json.dumps(request.body).encode()
        build_s.append(time.perf_counter() - started)
        started = time.perf_counter()
        decoded = json.loads(response)
        [documents.from_source(h["_id"], h["_source"]) for h in decoded["hits"]["hits"]]
        parse_s.append(time.perf_counter() - started)
    return {
        "build_request_ms": Latency.of(build_s).as_dict(),
        "parse_80_hits_ms": Latency.of(parse_s).as_dict(),
        "response_bytes": len(response),
    }
