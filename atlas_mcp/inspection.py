"""Read-only views of one user's memory for operators: the CLI and the web inspector share them.

Inspecting never changes what it inspects: recall here leaves ``use_count`` and
``last_used_at`` alone, so looking at why a fact ranks does not make it rank higher.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from .domain.model import USER_MEMORY_TYPES, Memory, MemoryType
from .service import Hit, MemoryService

MAX_CHAIN = 100  # bound on how many links a supersession history walk follows


def when(value: datetime | None) -> str:
    """A timestamp as operators read it (UTC, to the minute)."""
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M") if value else "-"


@dataclass(frozen=True, slots=True)
class Predecessor:
    """A memory an inspected one replaced; ``depth`` 1 = replaced directly, 2 = two steps back."""

    memory: Memory
    depth: int


@dataclass(frozen=True, slots=True)
class MemoryDetail:
    memory: Memory
    newer: tuple[Memory, ...]  # what replaced it, the direct successor first
    older: tuple[Predecessor, ...]  # what it replaced, nearest first (one fact may replace several)
    sources: tuple[Memory, ...]  # the episodes a consolidated fact was distilled from
    missing: tuple[str, ...]  # ids it links to that are no longer stored (forgotten)


def explain_recall(
    service: MemoryService,
    user_id: str,
    query: str,
    k: int = 10,
    *,
    memory_types: Sequence[str] = (),
    include_superseded: bool = False,
    min_relevance: float | None = None,
    as_of: datetime | str | None = None,
    since: datetime | str | None = None,
    until: datetime | str | None = None,
) -> list[Hit]:
    """A recall as the agent would see it, with every hit's explanation, touching nothing.

    Naming types restricts the search to exactly those: the catalog joins only when named.
    """
    return service.recall(
        user_id, query, k,
        memory_types=memory_types or None,
        include_superseded=include_superseded,
        min_relevance=min_relevance,
        touch=False,
        as_of=as_of, since=since, until=until,
    )  # fmt: skip


def memory_detail(service: MemoryService, user_id: str, memory_id: str) -> MemoryDetail:
    """One of the caller's memories (or a catalog entry) with its history both ways."""
    memory = service.get(user_id, memory_id)
    missing: list[str] = []
    newer = _successors(service, user_id, memory, missing)
    older = _predecessors(service, user_id, memory, missing)
    sources = _fetch(service, user_id, memory.source_episodes, missing)
    return MemoryDetail(memory, tuple(newer), tuple(older), tuple(sources), tuple(missing))


def _successors(service: MemoryService, user_id: str, memory: Memory, missing: list[str]) -> list[Memory]:
    chain: list[Memory] = []
    seen = {memory.id}
    current = memory
    while current.superseded_by and current.superseded_by not in seen and len(chain) < MAX_CHAIN:
        found = _fetch(service, user_id, [current.superseded_by], missing)
        if not found:
            break
        current = found[0]
        seen.add(current.id)
        chain.append(current)
    return chain


def _predecessors(
    service: MemoryService, user_id: str, memory: Memory, missing: list[str]
) -> list[Predecessor]:
    found: list[Predecessor] = []
    seen = {memory.id}
    frontier = deque([(memory, 0)])
    while frontier and len(found) < MAX_CHAIN:
        current, depth = frontier.popleft()
        wanted = [i for i in current.supersedes if i not in seen]
        seen.update(wanted)
        for older in _fetch(service, user_id, wanted, missing):
            found.append(Predecessor(older, depth + 1))
            frontier.append((older, depth + 1))
    return found[:MAX_CHAIN]


def _fetch(service: MemoryService, user_id: str, ids: Iterable[str], missing: list[str]) -> list[Memory]:
    wanted = list(ids)
    found = service.get_many(user_id, wanted)
    present = {m.id for m in found}
    missing.extend(i for i in wanted if i not in present)
    return found


def type_counts(service: MemoryService, user_id: str) -> dict[MemoryType, int]:
    """How many memories of each type one user holds (superseded ones included)."""
    counts = dict.fromkeys(USER_MEMORY_TYPES, 0)
    for row in service.stats().counts:
        if row.user_id == user_id:
            counts[row.memory_type] = row.count
    return counts
