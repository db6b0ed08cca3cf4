"""Seed a benchmark store through the embedded engine's bulk path, not through MCP.

Loading 100,000 memories one tool call at a time would take longer than the benchmark itself
(each write embeds one text). Seeding embeds the distinct texts once, in length-sorted batches,
keeps those vectors in a cache file (so a rerun costs only the SQLite inserts), and loads each
tenant with ``EmbeddedEngine.write_many``. The measurements then go through a real MCP client.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..engines.embedded.engine import EmbeddedEngine
from ..inference.embedder import Embedder
from ..log import get_logger
from . import corpus

log = get_logger(__name__)
LOAD_BATCH = 5_000  # memories per bulk transaction


@dataclass(frozen=True, slots=True)
class SeedResult:
    path: Path
    memories: int  # across all tenants
    embed_seconds: float  # 0 when every vector came from the cache
    load_seconds: float


def seed_store(
    path: Path, embedder: Embedder, per_tenant: int, tenants: int, seed: int, cache_dir: Path | None
) -> SeedResult:
    """A store where each of ``tenants`` tenants holds ``per_tenant`` memories.

    Tenant 0 is the measured one. The others hold the same texts under their own ids: the
    worst case for per-owner filtering, since every query word has ``tenants`` times the
    postings, and their vectors cost nothing extra to compute.
    """
    items = corpus.specs(seed, per_tenant)
    started = time.perf_counter()
    texts = [m.search_text() for m in corpus.tenant_memories(0, items)]
    vectors, embedded = _pool_vectors(embedder, texts, seed, cache_dir)
    embed_seconds = time.perf_counter() - started if embedded else 0.0
    started = time.perf_counter()
    engine = EmbeddedEngine(path, embedder)
    try:
        for tenant in range(tenants):
            memories = corpus.tenant_memories(tenant, items)
            for start in range(0, len(memories), LOAD_BATCH):
                end = start + LOAD_BATCH
                engine.write_many(memories[start:end], vectors[start:end])
    finally:
        engine.close()
    load_seconds = time.perf_counter() - started
    log.info("seeded", memories=per_tenant * tenants, embed_s=round(embed_seconds, 1), load_s=round(load_seconds, 1))
    return SeedResult(path, per_tenant * tenants, embed_seconds, load_seconds)


def _pool_vectors(
    embedder: Embedder, texts: list[str], seed: int, cache_dir: Path | None
) -> tuple[np.ndarray, bool]:
    """Vectors for ``texts`` (a prefix of the seeded stream), from the cache when it covers them."""
    cached = _read_cache(cache_dir, embedder.model_id, seed, texts) if cache_dir else None
    if cached is not None:
        return cached, False
    vectors = embed_distinct(embedder, texts)
    if cache_dir:
        _write_cache(cache_dir, embedder.model_id, seed, texts, vectors)
    return vectors, True


def embed_distinct(embedder: Embedder, texts: list[str]) -> np.ndarray:
    """Embed each distinct text once, shortest first, so batches carry little padding."""
    distinct = sorted(set(texts), key=len)
    log.info("embedding", texts=len(distinct))
    vectors = embedder.embed_batch(distinct)
    row = {text: i for i, text in enumerate(distinct)}
    return vectors[[row[t] for t in texts]]


def _cache_files(cache_dir: Path, model_id: str, seed: int, count: int) -> tuple[Path, Path]:
    stem = f"vectors-{hashlib.sha256(model_id.encode()).hexdigest()[:12]}-seed{seed}-n{count}"
    return cache_dir / f"{stem}.npy", cache_dir / f"{stem}.json"


def _digest(texts: list[str]) -> str:
    return hashlib.sha256("\x00".join(texts).encode()).hexdigest()


def _read_cache(cache_dir: Path, model_id: str, seed: int, texts: list[str]) -> np.ndarray | None:
    """The cached vectors, if they were computed by this model for exactly these texts."""
    matrix_file, meta_file = _cache_files(cache_dir, model_id, seed, len(texts))
    try:
        meta = json.loads(meta_file.read_text())
        if meta != {"model_id": model_id, "digest": _digest(texts)}:
            return None
        matrix = np.load(matrix_file)
    except (OSError, ValueError):
        return None
    return matrix if matrix.shape[0] == len(texts) else None


def _write_cache(cache_dir: Path, model_id: str, seed: int, texts: list[str], vectors: np.ndarray) -> None:
    matrix_file, meta_file = _cache_files(cache_dir, model_id, seed, len(texts))
    cache_dir.mkdir(parents=True, exist_ok=True)
    np.save(matrix_file, vectors.astype(np.float32))
    meta_file.write_text(json.dumps({"model_id": model_id, "digest": _digest(texts)}))
