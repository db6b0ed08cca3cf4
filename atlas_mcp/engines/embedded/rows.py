"""Mapping between ``Memory`` objects and ``memories`` rows."""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime
from typing import Any

from ...domain.model import Memory, MemoryType, Step, iso

# Columns a Memory round-trips through (everything but rowid and the embedding).
COLUMNS = (
    "id", "user_id", "memory_type", "text", "search_text", "created_at", "occurred_at",
    "fact_type", "confidence", "source_episodes", "supersedes", "superseded_by",
    "superseded_at", "last_used_at", "use_count", "name", "steps", "success_count",
    "failure_count", "last_success_at", "title", "category", "tags", "metadata",
)  # fmt: skip
SELECT_COLUMNS = ", ".join(COLUMNS)
# Fields update() may change; identity, type, ownership and supersession links are fixed.
MUTABLE = (
    "text", "search_text", "occurred_at", "fact_type", "confidence", "source_episodes",
    "last_used_at", "use_count", "name", "steps", "success_count", "failure_count",
    "last_success_at", "title", "category", "tags", "metadata",
)  # fmt: skip


def to_row(memory: Memory) -> dict[str, Any]:
    return {
        "id": memory.id,
        "user_id": memory.user_id,
        "memory_type": memory.memory_type.value,
        "text": memory.text,
        "search_text": memory.search_text(),
        "created_at": iso(memory.created_at),
        "occurred_at": iso(memory.occurred_at),
        "fact_type": memory.fact_type,
        "confidence": memory.confidence,
        "source_episodes": json.dumps(list(memory.source_episodes)),
        "supersedes": json.dumps(list(memory.supersedes)),
        "superseded_by": memory.superseded_by,
        "superseded_at": iso(memory.superseded_at),
        "last_used_at": iso(memory.last_used_at),
        "use_count": memory.use_count,
        "name": memory.name,
        "steps": json.dumps([s.to_dict() for s in memory.steps]),
        "success_count": memory.success_count,
        "failure_count": memory.failure_count,
        "last_success_at": iso(memory.last_success_at),
        "title": memory.title,
        "category": memory.category,
        "tags": json.dumps(list(memory.tags)),
        "metadata": json.dumps(memory.metadata, ensure_ascii=False),
    }


def _when(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def from_row(row: sqlite3.Row) -> Memory:
    return Memory(
        id=row["id"],
        memory_type=MemoryType(row["memory_type"]),
        user_id=row["user_id"],
        text=row["text"],
        created_at=datetime.fromisoformat(row["created_at"]),
        occurred_at=_when(row["occurred_at"]),
        fact_type=row["fact_type"],
        confidence=row["confidence"],
        source_episodes=tuple(json.loads(row["source_episodes"])),
        supersedes=tuple(json.loads(row["supersedes"])),
        superseded_by=row["superseded_by"],
        superseded_at=_when(row["superseded_at"]),
        last_used_at=_when(row["last_used_at"]),
        use_count=row["use_count"],
        name=row["name"],
        steps=tuple(Step(**s) for s in json.loads(row["steps"])),
        success_count=row["success_count"],
        failure_count=row["failure_count"],
        last_success_at=_when(row["last_success_at"]),
        title=row["title"],
        category=row["category"],
        tags=tuple(json.loads(row["tags"])),
        metadata=json.loads(row["metadata"]),
    )
