"""The query pool (``engines/embedded/query_vectors.py``): what ``submit`` hands back at once,
and a query run with its foreseen rewording (real MiniLM runs)."""

from __future__ import annotations

import threading
import time

import pytest

from atlas_mcp.engines.embedded.query_vectors import QueryVectors
from atlas_mcp.inference.embedder import OnnxMiniLM, SingleModel, default_embedder


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


def test_a_query_and_its_foreseen_rewording_are_embedded_in_one_run(
    monkeypatch: pytest.MonkeyPatch, paired_minilm: OnnxMiniLM
) -> None:
    embedder = paired_minilm
    pairs: list[tuple[str, str]] = []
    run_pair = embedder.embed_pair
    monkeypatch.setattr(embedder, "embed_pair", lambda a, b: pairs.append((a, b)) or run_pair(a, b))
    vectors = QueryVectors(SingleModel(embedder), lambda code: embedder.model_id)
    try:
        views = ["Where does Caroline live?", "What is Caroline's job?"]
        query = vectors.start("Where do I live?", views, [0])[0].result(timeout=30)
        view, other = vectors.get(views[0], 0), vectors.get(views[1], 0)  # waited for, not run again
        assert pairs == [("Where do I live?", views[0])]  # the second rewording ran alone
        for text, got in zip(["Where do I live?", *views], [query, view, other], strict=True):
            assert got.vector.tobytes() == embedder.embed_queries([text])[0].tobytes()
        assert vectors.start("Where do I live?", views, [0])[0].done()  # all three are recent now
    finally:
        vectors.close()


def test_a_rewording_taken_off_the_queue_leaves_the_query_to_run_alone(
    monkeypatch: pytest.MonkeyPatch, paired_minilm: OnnxMiniLM
) -> None:
    """``get`` cancels a foreseen run still queued and embeds the text itself: the pair task then
    finds its second text taken and embeds the query alone."""
    embedder = paired_minilm
    pairs: list[tuple[str, str]] = []
    run_pair = embedder.embed_pair
    monkeypatch.setattr(embedder, "embed_pair", lambda a, b: pairs.append((a, b)) or run_pair(a, b))
    vectors = QueryVectors(SingleModel(embedder), lambda code: embedder.model_id)
    gate = threading.Event()
    try:
        for _ in range(2):
            vectors._pool.submit(gate.wait)  # both workers busy from here
        coming = vectors.start("What did I cook?", ["What did Melanie cook?"], [0])[0]
        view = vectors.get("What did Melanie cook?", 0)  # taken off the queue and embedded here
        gate.set()
        query = coming.result(timeout=30)
        assert pairs == []
        assert query.vector.tobytes() == embedder.embed_queries(["What did I cook?"])[0].tobytes()
        assert view.vector.tobytes() == embedder.embed_queries(["What did Melanie cook?"])[0].tobytes()
        assert not vectors._coming
    finally:
        gate.set()
        vectors.close()


def test_a_pair_task_left_to_run_as_the_pool_shuts_down_still_settles_both_texts() -> None:
    """Before the pair session is ready the task runs the query and hands the rewording to the
    pool; a pool already shutting down takes no new task, so the rewording is embedded in place."""
    embedder = default_embedder()
    vectors = QueryVectors(SingleModel(embedder), lambda code: embedder.model_id)
    gate = threading.Event()
    vectors._pool.submit(gate.wait)
    vectors._pool.submit(gate.wait)  # the pair task queues behind these
    query = vectors.start("Where did I go?", ["Where did Jon go?"], [0])[0]
    view = vectors._coming[(embedder.model_id, "Where did Jon go?")]
    real = embedder.pairs_ready
    embedder.pairs_ready = lambda: False  # type: ignore[method-assign]
    try:
        closing = threading.Thread(target=vectors.close)
        closing.start()  # shutdown(wait=True): no new tasks from here on
        time.sleep(0.2)
        gate.set()
        closing.join(timeout=60)
        assert (
            query.result(timeout=30).vector.tobytes()
            == embedder.embed_queries(["Where did I go?"])[0].tobytes()
        )
        assert (
            view.result(timeout=30).vector.tobytes()
            == embedder.embed_queries(["Where did Jon go?"])[0].tobytes()
        )
    finally:
        embedder.pairs_ready = real  # type: ignore[method-assign]
        gate.set()
