"""Seed a benchmark store through the embedded engine's bulk path, not through MCP.

Loading 100,000 memories one tool call at a time would take longer than the benchmark itself
(each write embeds one text). Seeding embeds the distinct texts once, in length-sorted batches,
keeps those vectors in a cache file (so a rerun costs only the SQLite inserts), and loads each
tenant with ``maintenance.write_many``. The measurements then go through a real MCP client.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..engines.embedded.maintenance import EmbeddedEngine, StoreKey, write_many
from ..inference.base import Embedder
from ..inference.embedder import ModelChoice, default_models
from ..log import get_logger
from . import corpus
from .corpus import MemorySpec

log = get_logger(__name__)
LOAD_BATCH = 5_000  # memories per bulk transaction


@dataclass(frozen=True, slots=True)
class SeedResult:
    path: Path
    memories: int  # across all tenants
    embed_seconds: float  # 0 when every vector came from the cache
    load_seconds: float


def seed_store(
    path: Path,
    embedder: Embedder,
    items: list[MemorySpec],
    tenants: int,
    cache_dir: Path | None,
    vector_items: list[MemorySpec] | None = None,
    key: StoreKey | None = None,
) -> SeedResult:
    """A store where each of ``tenants`` tenants holds ``items`` as its memories.

    Tenant 0 is the measured one. The others hold the same texts under their own ids: the
    worst case for per-owner filtering, since every query word has ``tenants`` times the
    postings, and their vectors cost nothing extra to compute. ``vector_items[i]``, when
    given, is the item whose vectors memory ``i`` borrows (the real-text corpus's replicas).
    """
    started = time.perf_counter()
    sources = corpus.tenant_memories(0, vector_items if vector_items is not None else items)
    vectors, embedded = memory_vectors(embedder, [m.search_text() for m in sources], cache_dir)
    embed_seconds = time.perf_counter() - started if embedded else 0.0
    started = time.perf_counter()
    engine = EmbeddedEngine(path, store_models(embedder), key=key)
    try:
        for tenant in range(tenants):
            memories = corpus.tenant_memories(tenant, items)
            for start in range(0, len(memories), LOAD_BATCH):
                end = start + LOAD_BATCH
                write_many(engine, memories[start:end], vectors[start:end])
    finally:
        engine.close()
    load_seconds = time.perf_counter() - started
    count = len(items) * tenants
    log.info("seeded", memories=count, embed_s=round(embed_seconds, 1), load_s=round(load_seconds, 1))
    return SeedResult(path, count, embed_seconds, load_seconds)


def store_models(embedder: Embedder) -> Embedder | ModelChoice:
    """What the bench's stores are opened with: the served process opens them with the default
    (per-language) choice, whose first model is MiniLM, so a store seeded under that choice with
    MiniLM's vectors opens as it is (another model, as in some tests, stays on its own)."""
    models = default_models()
    return models if embedder.model_id == models.members[0] else embedder


def memory_vectors(
    embedder: Embedder, texts: list[str], cache_dir: Path | None
) -> tuple[list[np.ndarray], bool]:
    """Per text, its passages' vectors (``Embedder.passages``); the cache is keyed by passage text."""
    distinct = list(dict.fromkeys(texts))
    pieces = {text: embedder.passages(text) for text in distinct}
    flat = [p for text in distinct for p in pieces[text]]
    pooled, embedded = _pool_vectors(embedder, flat, cache_dir)
    by_text, start = {}, 0
    for text in distinct:
        by_text[text] = pooled[start : start + len(pieces[text])]
        start += len(pieces[text])
    return [by_text[t] for t in texts], embedded


def _pool_vectors(embedder: Embedder, texts: list[str], cache_dir: Path | None) -> tuple[np.ndarray, bool]:
    """Vectors for ``texts``; with a cache, only texts it has not seen are embedded."""
    if cache_dir is None:
        return embed_distinct(embedder, texts), True
    cache = EmbeddingCache(cache_dir, embedder.model_id)
    missing = [t for t in dict.fromkeys(texts) if t not in cache]
    if missing:
        cache.add(missing, embed_distinct(embedder, missing))
    return cache.lookup(texts), bool(missing)


def embed_distinct(embedder: Embedder, texts: list[str]) -> np.ndarray:
    """Embed each distinct text once, shortest first, so batches carry little padding."""
    distinct = sorted(set(texts), key=len)
    log.info("embedding", texts=len(distinct))
    vectors = embedder.embed_batch(distinct)
    row = {text: i for i, text in enumerate(distinct)}
    return vectors[[row[t] for t in texts]]


class EmbeddingCache:
    """Vectors by sha256 of their text, per model: any change to how a memory's search text
    is built re-embeds exactly the texts it changed, and nothing else."""

    def __init__(self, cache_dir: Path, model_id: str) -> None:
        stem = f"embeddings-{hashlib.sha256(model_id.encode()).hexdigest()[:12]}"
        self._matrix_file, self._keys_file = cache_dir / f"{stem}.npy", cache_dir / f"{stem}.keys"
        try:
            keys = self._keys_file.read_text().split()
            self._matrix = np.load(self._matrix_file)
        except (OSError, ValueError):
            keys, self._matrix = [], np.zeros((0, 0), dtype=np.float32)
        if len(keys) != len(self._matrix):  # a torn write: start over rather than mis-assign
            keys, self._matrix = [], np.zeros((0, 0), dtype=np.float32)
        self._rows = {key: row for row, key in enumerate(keys)}

    @staticmethod
    def key(text: str) -> str:
        return hashlib.sha256(text.encode()).hexdigest()

    def __contains__(self, text: str) -> bool:
        return self.key(text) in self._rows

    def lookup(self, texts: list[str]) -> np.ndarray:
        rows: np.ndarray = self._matrix[[self._rows[self.key(t)] for t in texts]]
        return rows

    def add(self, texts: list[str], vectors: np.ndarray) -> None:
        start = len(self._rows)
        self._matrix = vectors.astype(np.float32) if start == 0 else np.vstack([self._matrix, vectors])
        for offset, text in enumerate(texts):
            self._rows[self.key(text)] = start + offset
        self._matrix_file.parent.mkdir(parents=True, exist_ok=True)
        np.save(self._matrix_file, self._matrix)
        self._keys_file.write_text("\n".join(sorted(self._rows, key=self._rows.__getitem__)) + "\n")
