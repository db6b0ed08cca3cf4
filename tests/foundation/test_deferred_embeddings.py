"""Writes commit first and embed right after, under a bounded backlog: no recall may ever miss
a written memory, and nobody waits long for embeddings that are not theirs.

"Dense-only" queries below share no word with the memory, so only its vector can find it:
if a recall ran before the vector existed, the memory would be missing. A ``GatedEmbedder``
holds the model until a test opens the gate, standing in for a slow or busy machine.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from atlas_mcp.engines.embedded import pending
from atlas_mcp.engines.embedded.engine import EmbeddedEngine
from atlas_mcp.engines.embedded.passages import embed_memories, from_blob
from atlas_mcp.inference.embedder import MINILM_MODEL_ID, Embedder, default_embedder
from atlas_mcp.service import MemoryService

USER = "sarah"
MEMORY = "Her dog is called Biscuit."
DENSE_ONLY = "What is the name of the puppy?"
GATE_TIMEOUT_S = 60.0


class GatedEmbedder(Embedder):
    """The real model behind a gate: ``embed_batch`` waits until the gate opens (or fails)."""

    def __init__(self, fail: bool = False) -> None:
        self._inner = default_embedder()
        self.model_id, self.dimensions = self._inner.model_id, self._inner.dimensions
        self.gate = threading.Event()
        self.fail = fail

    def passages(self, text: str) -> list[str]:
        return self._inner.passages(text)

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        if threading.current_thread().name == "atlas-embed":  # queries are embedded at once
            assert self.gate.wait(GATE_TIMEOUT_S), "the test never opened the gate"
            if self.fail:
                raise OSError("model file vanished")
        return self._inner.embed_batch(texts)


def _pending(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT count(*) FROM pending_embeddings").fetchone()[0]
    finally:
        conn.close()


def _stored_vectors(path: Path, memory_id: str) -> np.ndarray:
    conn = sqlite3.connect(path)
    try:
        blob = conn.execute("SELECT embedding FROM memories WHERE id = ?", (memory_id,)).fetchone()[0]
    finally:
        conn.close()
    return from_blob(blob, default_embedder().dimensions)


def _expected(text: str) -> np.ndarray:
    return embed_memories(default_embedder(), [text])[0]


def _wait_until_repaired(path: Path, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while _pending(path) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _pending(path) == 0


def _hit(service: MemoryService, query: str, memory_id: str):
    return {h.memory.id: h for h in service.recall(USER, query, min_relevance=0.0, touch=False)}.get(
        memory_id
    )


def _found_by_vector(service: MemoryService, memory_id: str) -> bool:
    hit = _hit(service, DENSE_ONLY, memory_id)
    return hit is not None and hit.explanation.bm25_rank is None and hit.explanation.dense_rank is not None


def _write_and_drop(path: Path, texts: list[str]) -> list[str]:
    """Write as a process killed after its commits would: rows committed, never embedded."""
    engine = EmbeddedEngine(path, default_embedder())
    engine._deferred.submit = lambda row: None  # the worker never hears of them
    try:
        return [MemoryService(engine).write(USER, text).id for text in texts]
    finally:
        engine.close()


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "atlas.db"


@pytest.fixture
def gated() -> Iterator[GatedEmbedder]:
    embedder = GatedEmbedder()
    yield embedder
    embedder.gate.set()  # never leave a worker blocked behind a failed test


def test_the_very_next_recall_finds_a_write_by_its_vector(path: Path):
    service = MemoryService(EmbeddedEngine(path, default_embedder()))
    try:
        for number in range(5):
            written = service.write(USER, f"{MEMORY} (note {number})")
            assert _found_by_vector(service, written.id)
        assert _pending(path) == 0
    finally:
        service.close()


def test_the_stored_vector_is_the_texts_embedding(path: Path):
    service = MemoryService(EmbeddedEngine(path, default_embedder()))
    written = service.write(USER, MEMORY)
    service.close()  # close drains the backlog (well within its grace period)
    assert np.allclose(_stored_vectors(path, written.id), _expected(MEMORY), atol=1e-5)


def test_vectors_commit_without_waiting_for_the_disk_and_writes_still_do(path: Path, monkeypatch):
    """The vectors' commit skips the fsync (``synchronous=NORMAL``: a power loss that takes it
    leaves its rows marked, so they are embedded again); a write's own commit waits for it."""
    modes: list[int] = []
    real = pending.store_vectors

    def storing(conn: sqlite3.Connection, *args: object) -> bool:
        modes.append(conn.execute("PRAGMA synchronous").fetchone()[0])
        return real(conn, *args)

    monkeypatch.setattr(pending, "store_vectors", storing)
    service = MemoryService(EmbeddedEngine(path, default_embedder()))
    try:
        written = service.write(USER, MEMORY)
        assert _found_by_vector(service, written.id)
        assert modes == [1]  # NORMAL
        with service._engine.store.transaction() as tx:  # the next write's commit: FULL
            assert tx.conn.execute("PRAGMA synchronous").fetchone()[0] == 2
    finally:
        service.close()
    assert _pending(path) == 0


def test_a_full_backlog_makes_the_next_write_wait_for_room(path: Path, gated: GatedEmbedder):
    engine = EmbeddedEngine(path, gated)
    engine._deferred.backlog_limit = 4
    service = MemoryService(engine)
    try:
        for number in range(4):
            service.write(USER, f"note {number}")
        fifth = threading.Thread(target=service.write, args=(USER, "note 4"))
        fifth.start()
        fifth.join(0.5)
        assert fifth.is_alive(), "a write beyond the backlog limit must wait"
        assert engine._deferred.backlog == 4
        gated.gate.set()
        fifth.join(GATE_TIMEOUT_S)
        assert not fifth.is_alive()
        assert len(service.recall(USER, "note", k=10, min_relevance=0.0, touch=False)) == 5
    finally:
        service.close()


def test_opening_never_waits_for_left_over_rows_and_repairs_them_in_the_background(
    path: Path, gated: GatedEmbedder
):
    texts = [MEMORY, *(f"Meeting note {n} about the quarterly budget." for n in range(39))]
    ids = _write_and_drop(path, texts)
    assert _pending(path) == 40
    started = time.monotonic()
    service = MemoryService(EmbeddedEngine(path, gated))  # the model is blocked: open must not care
    try:
        assert time.monotonic() - started < 5.0
        assert _pending(path) == 40
        gated.gate.set()
        _wait_until_repaired(path)
        for memory_id, text in zip(ids, texts, strict=True):
            assert np.allclose(_stored_vectors(path, memory_id), _expected(text), atol=1e-5)
        assert _found_by_vector(service, ids[0])
    finally:
        service.close()


def test_a_recall_gives_its_owners_left_over_rows_priority(path: Path, monkeypatch):
    monkeypatch.setattr(pending, "RECALL_WAIT_S", GATE_TIMEOUT_S)  # a loaded CI machine is slow
    others = [f"Unrelated note number {n} about spreadsheets." for n in range(200)]
    engine = EmbeddedEngine(path, default_embedder())
    engine._deferred.submit = lambda row: None
    try:
        for text in others:
            MemoryService(engine).write("someone-else", text)
        mine = MemoryService(engine).write(USER, MEMORY).id
    finally:
        engine.close()
    service = MemoryService(EmbeddedEngine(path, default_embedder()))
    try:
        assert _found_by_vector(service, mine)  # jumped the 200 rows of the other owner
        assert _pending(path) > 0, "the other owner's rows are still being repaired"
    finally:
        service.close()


def test_a_recall_never_waits_long_and_says_which_memories_only_words_could_find(
    path: Path, gated: GatedEmbedder
):
    (left,) = _write_and_drop(path, ["The spare key is under the blue flowerpot."])
    service = MemoryService(EmbeddedEngine(path, gated))
    try:
        started = time.monotonic()
        hit = _hit(service, "where is the spare key", left)
        assert time.monotonic() - started < pending.RECALL_WAIT_S + 10.0  # not the gate's 60 s
        assert hit is not None and hit.explanation.bm25_rank is not None
        assert hit.explanation.dense_rank is None and hit.explanation.embedding_pending
        gated.gate.set()
        _wait_until_repaired(path)
        hit = _hit(service, "where is the spare key", left)
        assert hit.explanation.dense_rank is not None and not hit.explanation.embedding_pending
    finally:
        service.close()


def test_a_recall_does_not_wait_for_more_left_over_rows_than_its_wait_could_embed(
    path: Path, gated: GatedEmbedder, monkeypatch
):
    monkeypatch.setattr(pending, "RECALL_WAIT_S", GATE_TIMEOUT_S)  # a wait would be obvious
    texts = ["The spare key is under the blue flowerpot."]
    texts += [f"Chore note {n}: coil the garden hose." for n in range(pending.URGENT_WAIT_ROWS)]
    left = _write_and_drop(path, texts)
    service = MemoryService(EmbeddedEngine(path, gated))
    try:
        started = time.monotonic()
        hit = _hit(service, "where is the spare key", left[0])
        assert time.monotonic() - started < 10.0  # did not wait for rows it could not embed
        assert hit is not None and hit.explanation.embedding_pending  # found by its words, and says so
        gated.gate.set()
        _wait_until_repaired(path)
        assert not _hit(service, "where is the spare key", left[0]).explanation.embedding_pending
    finally:
        service.close()


def test_a_recall_claims_a_pending_row_its_current_cache_holds(path: Path, monkeypatch):
    """A recall skips the pending-row check only when this process's cache is current and
    holds no pending row. Here the cache is current (this process wrote the row) but the
    row's vectors are not coming from its backlog: the recall must still claim it."""
    monkeypatch.setattr(pending, "RECALL_WAIT_S", GATE_TIMEOUT_S)
    engine = EmbeddedEngine(path, default_embedder())
    service = MemoryService(engine)
    settles = []
    settle = engine._deferred.settle
    monkeypatch.setattr(engine._deferred, "settle", lambda owner: settles.append(owner) or settle(owner))
    try:
        service.write(USER, "Sarah drives a blue hatchback.")
        service.recall(USER, "car", touch=False)  # the cache is loaded and current
        settles.clear()
        service.recall(USER, "car", touch=False)
        assert settles == []  # nothing pending: no check
        engine._deferred.submit = lambda row: None  # the next write's vectors never come
        written = service.write(USER, MEMORY).id
        assert _pending(path) == 1
        assert _found_by_vector(service, written)  # the recall claimed it
        assert USER in settles and _pending(path) == 0
    finally:
        service.close()


def test_another_process_sees_a_row_whose_vector_is_still_pending(path: Path, monkeypatch):
    monkeypatch.setattr(pending, "RECALL_WAIT_S", GATE_TIMEOUT_S)
    reader = MemoryService(EmbeddedEngine(path, default_embedder()))
    try:
        reader.write(USER, "Sarah drives a blue hatchback.")
        reader.recall(USER, "car", touch=False)  # the reader's cache is loaded: the write makes it reload
        (written,) = _write_and_drop(path, [MEMORY])
        assert _pending(path) == 1
        assert _found_by_vector(reader, written)  # the reader's recall embedded it first
        assert _pending(path) == 0
    finally:
        reader.close()


def test_close_drains_within_its_grace_period_and_leaves_the_rest_for_the_next_open(
    path: Path, gated: GatedEmbedder
):
    engine = EmbeddedEngine(path, gated)
    service = MemoryService(engine)
    ids = [service.write(USER, f"{MEMORY} (take {n})").id for n in range(10)]
    started = time.monotonic()
    engine._deferred.close(grace_s=0.2)  # the model never answers in time
    assert time.monotonic() - started < 6.0  # the grace period plus the allowance for a running batch
    gated.gate.set()
    engine.close()
    assert _pending(path) == 10  # nothing lost: still marked, not dropped
    reopened = MemoryService(EmbeddedEngine(path, default_embedder()))
    try:
        _wait_until_repaired(path)
        assert all(_found_by_vector(reopened, i) for i in ids[:1])
        assert np.allclose(_stored_vectors(path, ids[-1]), _expected(f"{MEMORY} (take 9)"), atol=1e-5)
    finally:
        reopened.close()


def test_a_failed_embedding_leaves_the_row_pending_and_found_by_its_words(path: Path):
    broken = GatedEmbedder(fail=True)
    broken.gate.set()
    service = MemoryService(EmbeddedEngine(path, broken))
    written = service.write(USER, "The spare key is under the blue flowerpot.")
    try:
        hit = _hit(service, "spare key", written.id)
        assert hit is not None and hit.explanation.embedding_pending
        assert _pending(path) == 1
    finally:
        service.close()
    reopened = MemoryService(EmbeddedEngine(path, default_embedder()))
    try:
        _wait_until_repaired(path)
        assert _hit(reopened, "spare key", written.id).explanation.dense_rank is not None
    finally:
        reopened.close()


def test_a_late_embedding_never_lands_on_a_forgotten_or_rewritten_row(path: Path):
    engine = EmbeddedEngine(path, default_embedder())
    late: list[pending.PendingRow] = []
    engine._deferred.submit = late.append
    service = MemoryService(engine)
    try:
        forgotten = service.write(USER, "Parks at level 3.")
        service.forget(USER, forgotten.id)
        rewritten = service.write(USER, "Reset the router", "procedural", steps=["Unplug it"])
        memory = engine.get(USER, [rewritten.id])[0]
        engine.update(USER, memory.evolve(text="Bake sourdough bread", name="Bake sourdough bread", steps=()))
        assert _pending(path) == 0
        fresh = _stored_vectors(path, rewritten.id).copy()
        with engine.store.transaction() as tx:  # the stalled worker wakes up after all
            for row in late:
                assert not pending.store_vectors(tx.conn, row.rowid, _expected(row.text), MINILM_MODEL_ID)
        assert np.array_equal(_stored_vectors(path, rewritten.id), fresh)
        assert engine.get(USER, [forgotten.id]) == []
        assert service.recall(USER, "sourdough", min_relevance=0.0, touch=False)[0].memory.id == rewritten.id
    finally:
        service.close()
