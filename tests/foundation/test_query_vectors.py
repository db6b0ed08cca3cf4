"""The query pool (``engines/embedded/query_vectors.py``): what ``submit`` hands back at once."""

from __future__ import annotations

import threading

from atlas_mcp.engines.embedded.query_vectors import QueryVectors
from atlas_mcp.inference.embedder import SingleModel, default_embedder


def test_a_recent_vector_is_not_queued_behind_other_runs() -> None:
    """``submit`` hands back a recent text's vector, and the run already started for a text
    (``foresee``), without a trip through the query pool: here both of its threads are busy
    with other recalls' texts, which a recent query used to wait for (~7 ms on 2 cores)."""
    embedder = default_embedder()
    vectors = QueryVectors(SingleModel(embedder), lambda code: embedder.model_id)
    gate = threading.Event()
    try:
        recent = vectors.get("Where do I live?", 0)
        for _ in range(2):
            vectors._pool.submit(gate.wait)  # both workers busy from here
        vectors.foresee(["What is my job?"], [0])  # queued behind them
        coming = vectors._coming[(embedder.model_id, "What is my job?")]
        got = vectors.submit("Where do I live?", 0)
        assert got.done() and got.result() is recent
        assert vectors.submit("What is my job?", 0) is coming
        gate.set()
        other = vectors.submit("Which city is that in?", 0).result(timeout=30)  # a new text: the pool
        assert (other.vector == embedder.embed_queries(["Which city is that in?"])[0]).all()
    finally:
        gate.set()
        vectors.close()
