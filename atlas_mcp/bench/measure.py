"""Measurements through a real MCP client talking to a real ``atlas-mcp serve`` process.

Everything a user would feel is timed from the client side: the JSON-RPC framing, the tool
argument validation, the service and the engine. Resident memory is read from the server
process itself (``/proc``, so Linux only; elsewhere it is reported as missing).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import anyio

# The SDK client imports jsonschema on its first structured tool result (~0.13 s on the
# 2-core reference machine): a once-per-client-process cost of the measuring side, which an
# agent's long-lived client has paid long before it starts a server. Paid here, at import,
# it stays out of every "spawn → first recall" number, which measure the server.
import jsonschema.validators  # noqa: F401
import numpy as np
from mcp import Client
from mcp.client.stdio import StdioServerParameters, get_default_environment

SERVER_MODULE = "atlas_mcp"
SETTLE_WINDOW_S = 0.3  # a server that used at most one clock tick of CPU in this long is idle
SETTLE_LIMIT_S = 20.0  # how long the bench waits for a server's start-up work at most


@dataclass(frozen=True, slots=True)
class Latency:
    """Milliseconds over ``count`` calls."""

    count: int
    mean: float
    p50: float
    p95: float
    p99: float
    max: float

    @classmethod
    def of(cls, seconds: list[float]) -> Latency:
        ms = np.asarray(seconds, dtype=np.float64) * 1000.0
        p50, p95, p99 = np.percentile(ms, [50, 95, 99])
        return cls(len(ms), float(ms.mean()), float(p50), float(p95), float(p99), float(ms.max()))

    def as_dict(self) -> dict[str, float]:
        return {k: round(v, 3) if isinstance(v, float) else v for k, v in asdict(self).items()}


@dataclass(frozen=True, slots=True)
class ServerRun:
    """How one server process is started: transport, data directory, identity."""

    data_dir: Path
    user: str
    transport: str = "stdio"
    encryption_key: str | None = None  # the store is encrypted at rest with this key

    def env(self) -> dict[str, str]:
        """The MCP SDK's minimal environment (HOME, PATH, ...) plus this run's settings only:
        none of the caller's ``ATLAS_*`` settings or config file leak into the run."""
        key = {"ATLAS_ENCRYPTION_KEY": self.encryption_key} if self.encryption_key else {}
        return (
            get_default_environment()
            | key
            | {
                "ATLAS_DATA_DIR": str(self.data_dir),
                "ATLAS_USER": self.user,
                "ATLAS_LOG_LEVEL": "WARNING",
            }
        )


class ToolFailed(RuntimeError):
    pass


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    """One timed tool call; a tool error fails the benchmark rather than skewing it."""
    started = time.perf_counter()
    result = await client.call_tool(tool, arguments)
    elapsed = time.perf_counter() - started
    if result.is_error:
        raise ToolFailed(f"{tool} failed: {result.content}")
    return elapsed, result.structured_content or {}


@asynccontextmanager
async def stdio_session(run: ServerRun) -> AsyncIterator[Client]:
    params = StdioServerParameters(command=sys.executable, args=["-m", SERVER_MODULE, "serve"], env=run.env())
    async with Client(params) as client:
        yield client


async def cold_start(run: ServerRun, query: str) -> float:
    """Seconds from spawning the server to the first answered ``recall_memory``."""
    started = time.perf_counter()
    async with stdio_session(run) as client:
        await call(client, "recall_memory", {"query": query})
        return time.perf_counter() - started


async def timed_calls(client: Client, tool: str, argument_list: list[dict[str, Any]]) -> list[float]:
    return [(await call(client, tool, arguments))[0] for arguments in argument_list]


async def throughput(
    open_client: Callable[[], Any], queries: list[str], clients: int, warmup: list[str]
) -> float:
    """Recalls per second with ``clients`` concurrent callers, each on its own MCP session.

    Each session is warmed up first, so the number is steady-state serving, not start-up.
    """
    per_client = [queries[i::clients] for i in range(clients)]
    async with AsyncExitStack() as stack:
        sessions = [await stack.enter_async_context(open_client()) for _ in range(clients)]
        for session in sessions:
            await timed_calls(session, "recall_memory", [{"query": q} for q in warmup])
        started = time.perf_counter()
        async with anyio.create_task_group() as group:
            for session, mine in zip(sessions, per_client, strict=True):
                group.start_soon(timed_calls, session, "recall_memory", [{"query": q} for q in mine])
        return len(queries) / (time.perf_counter() - started)


async def writes_then_recalls(
    client: Client, writes: list[dict[str, Any]], queries: list[str]
) -> tuple[list[float], list[float]]:
    """Write latency, and the latency of the recall right after each write.

    Every write changes the owner's vectors, so the recall after it pays for whatever cache
    refresh the engine does: the price of same-turn visibility. A semantic write now and then
    supersedes the previous bench fact, as an agent correcting a fact would.
    """
    write_s, recall_s = [], []
    last_fact: str | None = None
    for number, (arguments, query) in enumerate(zip(writes, queries, strict=False)):
        arguments = dict(arguments)
        if arguments["memory_type"] == "semantic" and last_fact and number % 5 == 0:
            arguments["supersedes_id"] = last_fact
        elapsed, result = await call(client, "write_memory", arguments)
        write_s.append(elapsed)
        if arguments["memory_type"] == "semantic":
            last_fact = result["id"]
        recall_s.append((await call(client, "recall_memory", {"query": query}))[0])
    return write_s, recall_s


# -- the server process --------------------------------------------------------------------


def server_pids(parent: int | None = None) -> list[int]:
    """Child processes of ``parent`` (default: us) that run the atlas-mcp server."""
    parent = os.getpid() if parent is None else parent
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\x00", b" ")
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == parent and SERVER_MODULE.encode() in cmdline:
            found.append(int(entry.name))
    return found


def rss_mb(pid: int) -> tuple[float, float] | None:
    """(current, peak) resident memory of ``pid`` in MB, from ``/proc/<pid>/status``."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    kb = {k: int(fields[k].split()[0]) for k in ("VmRSS", "VmHWM") if k in fields}
    if len(kb) < 2:
        return None
    return kb["VmRSS"] / 1024.0, kb["VmHWM"] / 1024.0


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time ``pid`` has used: unlike wall time, it barely moves when other
    processes compete for the cores, so it shows the server's own cost on a busy machine."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def runqueue_seconds(pid: int) -> float | None:
    """How long the threads of ``pid`` have waited, runnable, for a core (``schedstat``): on a
    busy machine the part of a recall's latency that is neither its CPU nor its own waits."""
    total = 0
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            total += int((task / "schedstat").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return None
    return total / 1e9


def server_runqueue() -> float | None:
    pids = server_pids()
    return runqueue_seconds(pids[0]) if len(pids) == 1 else None


def server_cpu() -> float | None:
    pids = server_pids()
    return cpu_seconds(pids[0]) if len(pids) == 1 else None


async def settled() -> float | None:
    """Wait until the server is idle (at most one clock tick of CPU in ``SETTLE_WINDOW_S``,
    for at most ``SETTLE_LIMIT_S``), so its start-up work in the background (the model, the
    vectors, the memories' ranking facts) is not charged to the recalls timed next; the CPU
    seconds the server has used by then (None where /proc cannot say)."""
    tick = 1.0 / os.sysconf("SC_CLK_TCK")
    deadline = time.monotonic() + SETTLE_LIMIT_S
    last = server_cpu()
    while last is not None and time.monotonic() < deadline:
        await anyio.sleep(SETTLE_WINDOW_S)
        now = server_cpu()
        if now is None or now - last <= tick + 1e-9:
            return now
        last = now
    return last


def server_rss() -> tuple[float, float] | None:
    pids = server_pids()
    return rss_mb(pids[0]) if len(pids) == 1 else None


# -- HTTP ------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def http_server(run: ServerRun) -> Iterator[str]:
    """A streamable-HTTP server on a free loopback port (no tokens: loopback only).

    Its per-user rate limit is off: the throughput phase is one user at full speed, which is
    exactly what the limiter exists to refuse."""
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            SERVER_MODULE,
            "serve",
            "--transport",
            "http",
            "--port",
            str(port),
            "--insecure-no-auth",
        ],
        env=run.env() | {"ATLAS_RATE_LIMIT_PER_MINUTE": "0"},
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(base, process)
        yield f"{base}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=30)


def wait_healthy(
    base: str, process: subprocess.Popen[bytes], timeout_s: float = 60.0, log: Path | None = None
) -> None:
    """Block until the server at ``base`` answers ``/healthz``; fail saying why if it exits first."""
    import httpx2

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = log.read_text()[-2000:] if log is not None else ""
            raise RuntimeError(f"HTTP server exited with {process.returncode}: {tail}")
        try:
            if httpx2.get(f"{base}/healthz", timeout=2).status_code == 200:
                return
        except httpx2.TransportError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"HTTP server did not become healthy within {timeout_s:.0f} s")


def http_session_factory(url: str) -> Callable[[], Any]:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    @asynccontextmanager
    async def open_client() -> AsyncIterator[Client]:
        async with (
            httpx2.AsyncClient(timeout=60) as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):
            yield client

    return open_client
