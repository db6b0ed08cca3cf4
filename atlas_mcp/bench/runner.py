"""One benchmark run: for each corpus size, seed a fresh store, then measure it over MCP."""

from __future__ import annotations

import os
import platform
import sqlite3
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import numpy as np

from .. import __version__
from ..engines.embedded.maintenance import EmbeddedEngine, StoreKey, connect_file, synchronous, write_many
from ..inference.base import Embedder
from ..log import get_logger
from . import bursts, corpus, measure, realtext, stages, typescript
from .bursts import KILL_BURST
from .corpus import MemorySpec
from .es_overhead import es_client_overhead
from .seed import seed_store, store_models

log = get_logger(__name__)
WARMUP_RECALLS = 5
COMMIT_SAMPLES = 50
COLD_STARTS = 3


@dataclass(frozen=True)
class BenchConfig:
    sizes: tuple[int, ...] = (1_000, 10_000)
    tenants: int = 3
    queries: int = 200
    writes: int = 100
    clients: int = 4
    seed: int = 7
    http: bool = False
    cache_dir: Path | None = None
    work_dir: Path | None = None
    real_text: Path | None = None  # the LoCoMo dev split; None: template corpus only
    bursts: tuple[int, ...] = (100, 1_000, 5_000)
    kill_burst: int = KILL_BURST  # 0: no kill scenario
    encryption_key: str | None = None  # every store encrypted at rest with it (SQLCipher + sealed files)
    ts_sdk: Path | None = None  # @modelcontextprotocol/sdk: the recalls also through the TypeScript client


@dataclass(frozen=True)
class CorpusRun:
    """What one size of one corpus seeds and asks."""

    name: str
    items: list[MemorySpec]
    vector_items: list[MemorySpec] | None  # whose vectors each item borrows (None: its own)
    queries: list[str]
    warmup: list[str]


def template_corpus(config: BenchConfig, size: int) -> CorpusRun:
    return CorpusRun(
        "template", corpus.specs(config.seed, size), None,
        corpus.queries(config.seed, config.queries), corpus.queries(config.seed + 100, WARMUP_RECALLS),
    )  # fmt: skip


def real_text_corpus(config: BenchConfig, text: realtext.RealText, size: int) -> CorpusRun:
    items, origin = realtext.specs(text, size)
    return CorpusRun(
        "locomo", items, [text.base[i] for i in origin],
        realtext.queries(text, config.queries, config.seed), realtext.queries(text, WARMUP_RECALLS, config.seed + 100),
    )  # fmt: skip


def one_chat_corpus(config: BenchConfig, text: realtext.RealText, size: int) -> CorpusRun:
    """LoCoMo's turns as an agent logs one long chat (episodic, dated as written), asked
    LoCoMo's questions: the whole pool is one conversation, the context rerank's worst case."""
    items, origin = realtext.one_chat(text, size)
    return CorpusRun(
        "one-chat", items, [text.base[i] for i in origin],
        realtext.queries(text, config.queries, config.seed), realtext.queries(text, WARMUP_RECALLS, config.seed + 100),
    )  # fmt: skip


def run(config: BenchConfig, embedder: Embedder) -> dict[str, Any]:
    report: dict[str, Any] = {
        "conditions": conditions(),
        "config": {
            "sizes": list(config.sizes),
            "tenants": config.tenants,
            "queries": config.queries,
            "writes": config.writes,
            "clients": config.clients,
            "seed": config.seed,
            "http": config.http,
            "engine": "embedded",
            "embedding_model": embedder.model_id,
            "real_text": str(config.real_text) if config.real_text else None,
            "bursts": list(config.bursts),
            "kill_burst": config.kill_burst,
            "encrypted": config.encryption_key is not None,
            "typescript_client": config.ts_sdk is not None,
        },
        "sizes": [],
    }
    text = realtext.read(config.real_text) if config.real_text else None
    for size in config.sizes:
        log.info("bench size", memories_per_tenant=size, tenants=config.tenants)
        report["sizes"].append(run_size(config, embedder, template_corpus(config, size)))
        if text is not None:
            report["sizes"].append(run_size(config, embedder, real_text_corpus(config, text, size)))
            report["sizes"].append(run_size(config, embedder, one_chat_corpus(config, text, size)))
    if config.bursts or config.kill_burst:
        report["bursts"] = run_bursts(config, embedder)
    report["elasticsearch_client"] = es_client_overhead(config.seed)
    report["conditions"]["load_average_after"] = _load_average()
    return report


def run_size(config: BenchConfig, embedder: Embedder, run: CorpusRun) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="atlas-bench-", dir=config.work_dir) as tmp:
        data_dir = Path(tmp) / "data"
        key = StoreKey(config.encryption_key) if config.encryption_key else None
        seeded = seed_store(
            data_dir / "atlas.db",
            embedder,
            run.items,
            config.tenants,
            config.cache_dir,
            run.vector_items,
            key,
        )
        disk = store_bytes(data_dir, key)
        server = measure.ServerRun(data_dir, corpus.tenant_id(0), encryption_key=config.encryption_key)
        result = anyio.run(_over_mcp, server, config, run)
        result["profile"] = stages.profile(
            data_dir, corpus.tenant_id(0), run.queries, run.warmup, config.encryption_key
        )
        result |= {
            "corpus": run.name,
            "memories_per_tenant": len(run.items),
            "tenants": config.tenants,
            "total_memories": seeded.memories,
            "seed_embed_s": round(seeded.embed_seconds, 2),
            "seed_load_s": round(seeded.load_seconds, 2),
            "disk_bytes_per_memory": round(disk / seeded.memories, 1),
            "commit_ms": commit_cost(data_dir / "atlas.db", embedder, key),
        }
        return result


def run_bursts(config: BenchConfig, embedder: Embedder) -> dict[str, Any]:
    """Bursts and a kill mid-burst, on a store seeded with the smallest template size."""
    with tempfile.TemporaryDirectory(prefix="atlas-bench-", dir=config.work_dir) as tmp:
        data_dir = Path(tmp) / "data"
        items = corpus.specs(config.seed, min(config.sizes))
        key = StoreKey(config.encryption_key) if config.encryption_key else None
        seed_store(data_dir / "atlas.db", embedder, items, config.tenants, config.cache_dir, None, key)
        server = measure.ServerRun(data_dir, corpus.tenant_id(0), encryption_key=config.encryption_key)
        out: dict[str, Any] = {"store_memories_per_tenant": len(items)}
        if config.bursts:
            out["bursts"] = anyio.run(bursts.bursts_then_recall, server, config.bursts, config.seed)
        if config.kill_burst:
            out["kill"] = anyio.run(bursts.kill_during_burst, server, config.seed, config.kill_burst)
        return out


async def _over_mcp(server: measure.ServerRun, config: BenchConfig, run: CorpusRun) -> dict[str, Any]:
    queries, warmup = run.queries, run.warmup
    writes = corpus.new_writes(config.seed, config.writes)
    # The median of a few spawns: the first one after seeding also competes with the kernel
    # writing the new store back to disk.
    starts = [round(await measure.cold_start(server, queries[0]), 3) for _ in range(COLD_STARTS)]
    out: dict[str, Any] = {"cold_start_s": float(np.median(starts)), "cold_start_samples_s": starts}
    if config.ts_sdk is not None:  # the same recalls, on a server of its own, before the store changes
        out["typescript"] = await anyio.to_thread.run_sync(
            typescript.recalls, server, config.ts_sdk, queries, warmup
        )
    async with measure.stdio_session(server) as client:
        await measure.timed_calls(client, "recall_memory", [{"query": q} for q in warmup])
        # Recalls are timed once the server's background start-up work is done (cold start is
        # measured above): its CPU then is reported apart, not spread over the recalls.
        out["start_cpu_s"] = await measure.settled()
        cpu_before, own_before = measure.server_cpu(), time.process_time()
        queued_before = measure.server_runqueue()
        recalls = await measure.timed_calls(client, "recall_memory", [{"query": q} for q in queries])
        cpu_after, own_after = measure.server_cpu(), time.process_time()
        queued_after = measure.server_runqueue()
        if queued_before is not None and queued_after is not None:  # Linux with schedstats
            out["recall_server_runqueue_ms"] = round((queued_after - queued_before) * 1000 / len(queries), 2)
        # the Python SDK client's own work per recall (parse, model and output-schema validation)
        out["recall_client_cpu_ms"] = round((own_after - own_before) * 1000 / len(queries), 2)
        after_recalls = measure.server_rss()
        write_s, recall_after_write_s = await measure.writes_then_recalls(client, writes, queries)
        after_writes = measure.server_rss()
    if cpu_before is not None and cpu_after is not None:
        out["recall_server_cpu_ms"] = round((cpu_after - cpu_before) * 1000 / len(queries), 2)
    out |= {
        "recall_ms": measure.Latency.of(recalls).as_dict(),
        "write_ms": measure.Latency.of(write_s).as_dict(),
        "recall_after_write_ms": measure.Latency.of(recall_after_write_s).as_dict(),
        "rss_mb": round(after_recalls[0], 1) if after_recalls else None,
        "peak_rss_mb": round(after_writes[1], 1) if after_writes else None,
    }
    out["stdio_recalls_per_s"] = round(
        await measure.throughput(lambda: measure.stdio_session(server), queries, config.clients, warmup), 1
    )
    if config.http:
        with measure.http_server(server) as url:
            factory = measure.http_session_factory(url)
            out["http_recalls_per_s"] = round(
                await measure.throughput(factory, queries, config.clients, warmup), 1
            )
            async with factory() as client:
                await measure.timed_calls(client, "recall_memory", [{"query": q} for q in warmup])
                recalls = await measure.timed_calls(client, "recall_memory", [{"query": q} for q in queries])
            out["http_recall_ms"] = measure.Latency.of(recalls).as_dict()
    return out


def commit_cost(path: Path, embedder: Embedder, key: StoreKey | None = None) -> dict[str, dict[str, float]]:
    """What ``synchronous=FULL`` costs: one single-memory commit under FULL vs NORMAL.

    The vector is precomputed so only SQLite is timed (insert, FTS index, WAL append, fsync).
    """
    items = corpus.specs(1, 2 * COMMIT_SAMPLES)
    memories = corpus.tenant_memories(9_999, items)
    vectors = embedder.embed_batch([m.search_text() for m in memories])
    engine = EmbeddedEngine(path, store_models(embedder), key=key)
    out = {}
    try:
        for mode, chunk in (("FULL", slice(0, COMMIT_SAMPLES)), ("NORMAL", slice(COMMIT_SAMPLES, None))):
            seconds = []
            with synchronous(engine, mode):
                for memory, vector in zip(memories[chunk], vectors[chunk], strict=True):
                    started = time.perf_counter()
                    write_many(engine, [memory], vector[None, :])
                    seconds.append(time.perf_counter() - started)
            out[f"synchronous_{mode.lower()}"] = measure.Latency.of(seconds).as_dict()
    finally:
        engine.close()
    return out


def store_bytes(data_dir: Path, key: StoreKey | None = None) -> int:
    """The store's size on disk after a checkpoint (database + WAL)."""
    conn = connect_file(data_dir / "atlas.db", key)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    return sum(p.stat().st_size for p in data_dir.glob("atlas.db*"))


def _load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def conditions() -> dict[str, Any]:
    import onnxruntime

    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "atlas_mcp": __version__,
        "cpus": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "load_average_before": _load_average(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "sqlite": sqlite3.sqlite_version,
        "numpy": np.__version__,
        "onnxruntime": onnxruntime.__version__,
    }


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None
