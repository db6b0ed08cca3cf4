"""Mapping between ``Memory`` objects and ``memories`` rows."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ...domain.model import Memory, MemoryType, Step, iso
from .schema import lexical_columns

# Columns a Memory round-trips through (everything but rowid and the embedding).
COLUMNS = (
    "id", "user_id", "memory_type", "text", "search_text", "created_at", "occurred_at",
    "fact_type", "confidence", "source_episodes", "supersedes", "superseded_by",
    "superseded_at", "last_used_at", "use_count", "name", "steps", "success_count",
    "failure_count", "last_success_at", "title", "category", "tags", "metadata",
    "lexical_terms", "lexical_stems",
)  # fmt: skip
# Derived from the others, so written but never read back.
_DERIVED = ("search_text", "lexical_terms", "lexical_stems")
# Columns read back into a Memory, in the order ``from_row`` unpacks them.
READ_COLUMNS = tuple(c for c in COLUMNS if c not in _DERIVED)
SELECT_COLUMNS = ", ".join(READ_COLUMNS)
_TYPES = {t.value: t for t in MemoryType}
# Fields update() may change; identity, type, ownership and supersession links are fixed.
MUTABLE = (
    "text", "search_text", "occurred_at", "fact_type", "confidence", "source_episodes",
    "last_used_at", "use_count", "name", "steps", "success_count", "failure_count",
    "last_success_at", "title", "category", "tags", "metadata", "lexical_terms", "lexical_stems",
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
    } | lexical_columns(memory.search_text())


def _when(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def _strings(value: str) -> tuple[str, ...]:
    return () if value == "[]" else tuple(json.loads(value))


def from_row(row: Sequence[Any]) -> Memory:
    """A row of ``SELECT_COLUMNS`` as a Memory.

    Recall maps ~200 rows per call, so this unpacks by position and skips ``json.loads``
    for the empty lists and objects most rows hold (14 -> 3.5 us a row).
    """
    (
        memory_id, user_id, memory_type, text, created_at, occurred_at, fact_type, confidence,
        source_episodes, supersedes, superseded_by, superseded_at, last_used_at, use_count,
        name, steps, success_count, failure_count, last_success_at, title, category, tags,
        metadata,
    ) = row  # fmt: skip
    return Memory(
        id=memory_id,
        memory_type=_TYPES[memory_type],
        user_id=user_id,
        text=text,
        created_at=datetime.fromisoformat(created_at),
        occurred_at=_when(occurred_at),
        fact_type=fact_type,
        confidence=confidence,
        source_episodes=_strings(source_episodes),
        supersedes=_strings(supersedes),
        superseded_by=superseded_by,
        superseded_at=_when(superseded_at),
        last_used_at=_when(last_used_at),
        use_count=use_count,
        name=name,
        steps=() if steps == "[]" else tuple(Step(**s) for s in json.loads(steps)),
        success_count=success_count,
        failure_count=failure_count,
        last_success_at=_when(last_success_at),
        title=title,
        category=category,
        tags=_strings(tags),
        metadata={} if metadata == "{}" else json.loads(metadata),
    )
