"""Writes at any rate: bursts through one MCP session, the recall right after, and a kill mid-burst.

A client that fires writes without awaiting each one (``IN_FLIGHT`` calls open at a time on
one stdio session, as an importing agent does) meets the engine's bounded backlog: writes are
acknowledged as fast as their rows commit until the backlog is full, then at the pace the
embedding worker frees room. So the rate of a long burst is the honest sustained rate with
embeddings included, and the recall right after any burst waits for at most one backlog.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from ..engines.embedded.maintenance import StoreKey, connect_file
from ..log import get_logger
from . import corpus, measure

log = get_logger(__name__)

IN_FLIGHT = 8
KILL_BURST = 5_000
REPAIR_TIMEOUT_S = 600.0


async def burst(client: Client, writes: list[dict[str, Any]], in_flight: int = IN_FLIGHT) -> list[float]:
    """Send ``writes`` with ``in_flight`` calls open at a time; the latency of each, in order of sending."""
    latencies = [0.0] * len(writes)
    limiter = anyio.CapacityLimiter(in_flight)

    async def one(index: int) -> None:
        async with limiter:
            latencies[index] = (await measure.call(client, "write_memory", writes[index]))[0]

    async with anyio.create_task_group() as group:
        for index in range(len(writes)):
            await limiter.acquire()  # do not queue thousands of tasks at once
            limiter.release()
            group.start_soon(one, index)
    return latencies


async def bursts_then_recall(
    server: measure.ServerRun, sizes: tuple[int, ...], seed: int
) -> list[dict[str, Any]]:
    """Per burst size: the burst's pace and the latency of the recall that follows it at once."""
    out = []
    query = corpus.queries(seed + 3, 1)[0]
    async with measure.stdio_session(server) as client:
        await measure.call(client, "recall_memory", {"query": query})  # warm
        for number, size in enumerate(sizes):
            writes = corpus.new_writes(seed + 10 + number, size)
            cpu_before = measure.server_cpu()
            started = time.perf_counter()
            latencies = await burst(client, writes)
            acknowledged = time.perf_counter()
            recall_s, _ = await measure.call(client, "recall_memory", {"query": query})
            finished = time.perf_counter()
            cpu_after = measure.server_cpu()
            result = {
                "writes": size,
                "acknowledged_per_s": round(size / (acknowledged - started), 1),
                "writes_per_s_with_embeddings": round(size / (finished - started), 1),
                "recall_right_after_ms": round(recall_s * 1000, 1),
                "write_ms": measure.Latency.of(latencies).as_dict(),
            }
            if cpu_before is not None and cpu_after is not None:
                result["server_cpu_ms_per_write"] = round((cpu_after - cpu_before) * 1000 / size, 2)
            out.append(result)
    return out


async def kill_during_burst(server: measure.ServerRun, seed: int, size: int = KILL_BURST) -> dict[str, Any]:
    """SIGKILL the server halfway through a burst; then time the next start's ``initialize``,
    its first recall, and how long the background repair takes to embed what was left."""
    database = server.data_dir / "atlas.db"
    writes = corpus.new_writes(seed + 20, size)
    query = corpus.queries(seed + 4, 1)[0]
    halfway = memory_rows(database, server.encryption_key) + size // 2
    with anyio.move_on_after(REPAIR_TIMEOUT_S):
        try:
            async with measure.stdio_session(server) as client, anyio.create_task_group() as group:
                group.start_soon(burst, client, writes)
                while memory_rows(database, server.encryption_key) < halfway:
                    await anyio.sleep(0.05)
                (pid,) = measure.server_pids()
                os.kill(pid, signal.SIGKILL)
                group.cancel_scope.cancel()
        except Exception as exc:  # noqa: BLE001 - the session dies with its server: that is the point
            log.info("killed the server mid-burst", error=type(exc).__name__)
    left = pending_rows(database, server.encryption_key)
    started = time.perf_counter()
    async with measure.stdio_session(server) as client:
        initialize_s = time.perf_counter() - started
        await measure.call(client, "recall_memory", {"query": query})
        first_recall_s = time.perf_counter() - started
        while (
            pending_rows(database, server.encryption_key) and time.perf_counter() - started < REPAIR_TIMEOUT_S
        ):
            await anyio.sleep(0.1)
        repaired_s = time.perf_counter() - started
    return {
        "burst": size,
        "pending_at_kill": left,
        "initialize_s": round(initialize_s, 3),
        "start_and_first_recall_s": round(first_recall_s, 3),
        "repair_done_s": round(repaired_s, 3),
    }


def _count(database: Path, sql: str, key: str | None) -> int:
    conn = connect_file(database, StoreKey(key) if key else None, timeout=30)
    try:
        counted: int = conn.execute(sql).fetchone()[0]
        return counted
    finally:
        conn.close()


def pending_rows(database: Path, key: str | None = None) -> int:
    return _count(database, "SELECT count(*) FROM pending_embeddings", key)


def memory_rows(database: Path, key: str | None = None) -> int:
    return _count(database, "SELECT count(*) FROM memories", key)
