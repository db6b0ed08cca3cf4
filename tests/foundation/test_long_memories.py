"""Long memories are embedded passage by passage: a detail at the end of a 2 kB note is
as findable by meaning as one in its first line (the model reads only 256 tokens at a time)."""

from __future__ import annotations

import itertools
import sqlite3
import time
from pathlib import Path

import numpy as np

from atlas_mcp.engines.embedded.engine import EmbeddedEngine
from atlas_mcp.engines.embedded.passages import embed_memories, from_blob
from atlas_mcp.inference.embedder import default_embedder
from atlas_mcp.service import MemoryService

USER = "sam"
FILLER = (
    "We spent most of the weekend on the kitchen renovation. The old cabinets came off the "
    "wall more easily than expected, although the tiles behind them were cracked and had to "
    "be chipped away one by one. My brother brought his tools and we argued for an hour about "
    "whether to move the sink under the window. In the end we left it where it was, because "
    "the plumbing would have cost more than the new countertop. "
)
DETAIL = "The wifi password for the lake cabin is written on the lighthouse fridge magnet."
QUERY = "how do I get on the internet at the lake house?"
DISTRACTORS = (
    "Booked the dentist for Tuesday at nine.",
    "Prefers oat milk in coffee.",
    "The car insurance renews in March.",
    "Lent the ladder to the neighbour across the street.",
    "Team offsite is in Lisbon this year.",
)


def _long_note() -> str:
    note = FILLER * 4 + DETAIL + " " + FILLER
    assert 1_800 <= len(note) <= 2_600
    return note


def _stored(path: Path, memory_id: str) -> tuple[str, np.ndarray]:
    """The row's search text and its stored passage vectors."""
    conn = sqlite3.connect(path)
    try:
        text, blob = conn.execute(
            "SELECT search_text, embedding FROM memories WHERE id = ?", (memory_id,)
        ).fetchone()
    finally:
        conn.close()
    return text, from_blob(blob, default_embedder().dimensions)


def _stored_passages(path: Path, memory_id: str) -> np.ndarray:
    return _stored(path, memory_id)[1]


def test_a_detail_deep_inside_a_long_note_is_found_by_the_dense_branch(tmp_path: Path):
    embedder = default_embedder()
    path = tmp_path / "atlas.db"
    service = MemoryService(EmbeddedEngine(path, embedder))
    try:
        for text in DISTRACTORS:
            service.write(USER, text)
        note = service.write(USER, _long_note(), "episodic")
        hits = service.recall(USER, QUERY, min_relevance=0.0, touch=False)
        best_dense = min(
            (h for h in hits if h.explanation.dense_rank is not None), key=lambda h: h.explanation.dense_rank
        )
        assert best_dense.memory.id == note.id
        passages = _stored_passages(path, note.id)
        assert len(passages) >= 2
        query = embedder.embed_batch([QUERY])[0]
        first_window_only = float(passages[0] @ query)
        assert best_dense.explanation.dense_similarity > first_window_only + 0.1
    finally:
        service.close()


def test_passages_overlap_and_cover_the_whole_text():
    embedder = default_embedder()
    note = _long_note()
    pieces = embedder.passages(note)
    assert len(pieces) >= 2
    assert pieces[0].startswith(note[:40]) and note.rstrip().endswith(pieces[-1][-40:])
    for before, after in itertools.pairwise(pieces):
        assert after[:30] in before, "consecutive passages share their boundary text"
    assert embedder.passages("short text") == ["short text"]


def test_an_older_store_is_migrated_to_passages_in_the_background(tmp_path: Path):
    embedder = default_embedder()
    path = tmp_path / "atlas.db"
    engine = EmbeddedEngine(path, embedder)
    note = MemoryService(engine).write(USER, _long_note(), "episodic")
    engine.close()
    conn = sqlite3.connect(path)  # make it what a store before passages held: one vector
    first_window = embedder.embed_batch([_stored(path, note.id)[0]])[0]
    conn.execute("UPDATE memories SET embedding = ? WHERE id = ?", (first_window.tobytes(), note.id))
    conn.execute("DELETE FROM migrations WHERE name = 'passages-for-long-texts'")
    conn.commit()
    conn.close()
    service = MemoryService(EmbeddedEngine(path, embedder))
    try:
        deadline = time.monotonic() + 60
        while len(_stored_passages(path, note.id)) == 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        text, passages = _stored(path, note.id)
        assert np.allclose(passages, embed_memories(embedder, [text])[0], atol=1e-5)
        hits = service.recall(USER, QUERY, min_relevance=0.0, touch=False)
        assert hits[0].memory.id == note.id and hits[0].explanation.dense_rank is not None
    finally:
        service.close()
