"""Removing what should go: expired memories, and those past their type's retention.

The rules are ``domain.validity``'s (``expired``, ``due``); this reads each user's memories
through the engine and forgets what is due. ``atlas-mcp prune`` and ``serve``'s sweep call it
through the service.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from .domain.model import Memory, MemoryType
from .domain.validity import Retention, cited_episodes, due
from .engines.base import Engine, ListQuery, StoreStats

PAGE = 1_000  # memories read per listing page


def prune(engine: Engine, retention: Retention, now: datetime, *, dry_run: bool = False) -> list[Memory]:
    """Forget every user's memories that are due now; what went (or would go)."""
    gone = []
    for user in sorted({c.user_id for c in engine.stats().counts if c.user_id is not None}):
        if retention.active:
            mine = every(engine, user)
            facts = [m for m in mine if m.memory_type is MemoryType.SEMANTIC]
            due_now = due(mine, retention, now, cited_episodes(facts))
        else:  # expiry alone: only the memories with an expiry need reading
            due_now = every(engine, user, expired_by=now)
        for memory in due_now:
            if not dry_run:
                engine.forget(user, memory.id)
            gone.append(memory)
    return gone


def count_expired(engine: Engine, stats: StoreStats, now: datetime) -> int:
    """How many memories have expired and wait for the next sweep (only users with expiries)."""
    owners = {c.user_id for c in stats.counts if c.user_id is not None and c.expiring}
    return sum(len(every(engine, user, expired_by=now)) for user in owners)


def every(engine: Engine, user_id: str, **filters: Any) -> list[Memory]:
    """All of a user's memories (superseded ones too) that ``filters`` (``ListQuery``) keep."""
    out: list[Memory] = []
    while True:
        page = engine.list(ListQuery(user_id, None, True, PAGE, len(out), **filters))
        out += page
        if len(page) < PAGE:
            return out
