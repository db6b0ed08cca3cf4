"""The leak sweep: every stored memory of every tenant, asked for as every other tenant.

Each memory's own text (verbatim) and a paraphrase of it are sent to ``recall_memory`` through
a real MCP session of each *other* user, with ``k`` at its maximum and superseded memories
included, so nothing an engine might hold back hides a leak. Any returned id that belongs to
another user is a leak; shared catalog entries are the only rows every user may see.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import anyio
from mcp import Client

from ..mcp.server import build_server
from ..service import MemoryService
from .scenario_suite import StoredMemory


@dataclass(frozen=True, slots=True)
class Leak:
    asked_as: str
    query: str
    owner: str
    memory_id: str


@dataclass(frozen=True, slots=True)
class LeakReport:
    tenants: int
    memories: int
    queries: int
    leaks: tuple[Leak, ...]


def sweep(
    service: MemoryService, stored: Sequence[StoredMemory], progress: Callable[[int], None] = lambda _: None
) -> LeakReport:
    return anyio.run(_sweep, service, list(stored), progress)


async def _sweep(
    service: MemoryService, stored: list[StoredMemory], progress: Callable[[int], None]
) -> LeakReport:
    owners = {m.id: m.user_id for m in stored if m.user_id is not None}
    tenants = sorted({m.user_id for m in stored if m.user_id is not None})
    leaks: list[Leak] = []
    queries = 0
    for caller in tenants:
        async with Client(build_server(service, caller)) as session:
            for memory in stored:
                if memory.user_id in (None, caller):
                    continue
                for query in (memory.text, memory.paraphrase):
                    returned = await _recall_ids(session, query, service.limits.max_k)
                    queries += 1
                    leaks += [
                        Leak(caller, query, owners[i], i) for i in returned if owners.get(i, caller) != caller
                    ]
                progress(1)
    return LeakReport(len(tenants), len(owners), queries, tuple(leaks))


async def _recall_ids(session: Client, query: str, k: int) -> list[str]:
    result = await session.call_tool("recall_memory", {"query": query, "k": k, "include_superseded": True})
    if result.is_error:
        raise RuntimeError(f"recall_memory failed during the leak sweep: {result.content}")
    return [m["id"] for m in result.structured_content["memories"]]
