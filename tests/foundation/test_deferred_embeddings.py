"""Writes commit first and embed right after: no recall may ever miss a written memory.

"Dense-only" queries below share no word with the memory, so only its vector can find it:
if a recall ran before the vector existed, the memory would be missing.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from atlas_mcp.engines.embedded.engine import EmbeddedEngine
from atlas_mcp.engines.embedded.pending import EmbeddingQueue
from atlas_mcp.inference.embedder import default_embedder, embed_one
from atlas_mcp.service import MemoryService

USER = "sarah"
MEMORY = "Her dog is called Biscuit."
DENSE_ONLY = "What is the name of the puppy?"


class DeadWorker:
    """Stands in for a writer process killed after its commit, before its embedding."""

    def submit(self, write) -> None:
        self.submitted = write

    def wait(self, owner: str) -> None:
        pass

    def close(self) -> None:
        pass


def _pending(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT count(*) FROM pending_embeddings").fetchone()[0]
    finally:
        conn.close()


def _stored_vector(path: Path, memory_id: str) -> np.ndarray:
    conn = sqlite3.connect(path)
    try:
        blob = conn.execute("SELECT embedding FROM memories WHERE id = ?", (memory_id,)).fetchone()[0]
    finally:
        conn.close()
    return np.frombuffer(blob, dtype=np.float32)


def _found_by_vector(service: MemoryService, memory_id: str) -> bool:
    hits = {h.memory.id: h for h in service.recall(USER, DENSE_ONLY, min_relevance=0.0, touch=False)}
    hit = hits.get(memory_id)
    return hit is not None and hit.explanation.bm25_rank is None and hit.explanation.dense_rank is not None


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "atlas.db"


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
    service.close()  # close waits for the worker
    expected = embed_one(default_embedder(), MEMORY)
    assert np.allclose(_stored_vector(path, written.id), expected, atol=1e-5)


def test_another_process_sees_a_row_whose_vector_is_still_pending(path: Path):
    writer = EmbeddedEngine(path, default_embedder())
    writer._embeddings = DeadWorker()
    reader = MemoryService(EmbeddedEngine(path, default_embedder()))
    try:
        reader.write(USER, "Sarah drives a blue hatchback.")
        reader.recall(USER, "car", touch=False)  # the reader's cache is loaded: the write makes it reload
        written = MemoryService(writer).write(USER, MEMORY)
        assert _pending(path) == 1
        assert _found_by_vector(reader, written.id)
    finally:
        reader.close()
        writer.close()


def test_a_crash_before_the_embedding_is_repaired_on_open(path: Path):
    writer = EmbeddedEngine(path, default_embedder())
    writer._embeddings = DeadWorker()
    written = MemoryService(writer).write(USER, MEMORY)
    writer.close()
    assert _pending(path) == 1 and _stored_vector(path, written.id).size == 0
    reopened = MemoryService(EmbeddedEngine(path, default_embedder()))
    try:
        assert _pending(path) == 0
        assert np.allclose(_stored_vector(path, written.id), embed_one(default_embedder(), MEMORY), atol=1e-5)
        assert _found_by_vector(reopened, written.id)
    finally:
        reopened.close()


def test_a_failed_embedding_leaves_the_row_pending_and_still_found(path: Path):
    def broken_store(write, vector):
        raise OSError("disk full")

    engine = EmbeddedEngine(path, default_embedder())
    engine._embeddings = EmbeddingQueue(default_embedder(), broken_store)
    service = MemoryService(engine)
    written = service.write(USER, MEMORY)
    try:
        assert _found_by_vector(service, written.id)  # the loader embeds the pending row itself
        assert _pending(path) == 1
    finally:
        service.close()
    reopened = MemoryService(EmbeddedEngine(path, default_embedder()))
    try:
        assert _pending(path) == 0 and _found_by_vector(reopened, written.id)
    finally:
        reopened.close()


def test_a_late_embedding_never_lands_on_a_forgotten_or_rewritten_row(path: Path):
    engine = EmbeddedEngine(path, default_embedder())
    worker = DeadWorker()
    engine._embeddings = worker
    service = MemoryService(engine)
    try:
        forgotten = service.write(USER, "Parks at level 3.")
        late_forgotten = worker.submitted
        service.forget(USER, forgotten.id)
        rewritten = service.write(USER, "Reset the router", "procedural", steps=["Unplug it"])
        late_rewritten = worker.submitted
        memory = engine.get(USER, [rewritten.id])[0]
        engine.update(USER, memory.evolve(text="Bake sourdough bread", name="Bake sourdough bread", steps=()))
        assert _pending(path) == 0
        fresh = _stored_vector(path, rewritten.id).copy()
        for late in (late_forgotten, late_rewritten):  # the dead worker wakes up after all
            engine._store_embedding(late, embed_one(default_embedder(), late.text))
        assert np.array_equal(_stored_vector(path, rewritten.id), fresh)
        assert engine.get(USER, [forgotten.id]) == []
        assert service.recall(USER, "sourdough", min_relevance=0.0, touch=False)[0].memory.id == rewritten.id
    finally:
        service.close()
