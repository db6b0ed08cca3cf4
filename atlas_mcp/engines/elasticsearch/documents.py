"""Mapping between ``Memory`` objects and Elasticsearch ``_source`` documents.

Only the fields a type's index maps are emitted (the mappings are strict), and ``None`` is
left out so a document never claims a field it does not have: ``exists`` filters (catalog =
no ``user_id``, live = no ``superseded_by``) depend on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from ...domain.model import Memory, MemoryType, Step, iso
from .mappings import CONTENT

# Fields ``Engine.update`` may change; identity, type, ownership and supersession links are fixed.
MUTABLE = (
    "text", "occurred_at", "fact_type", "confidence", "source_episodes", "last_used_at",
    "use_count", "name", "steps", "success_count", "failure_count", "last_success_at",
    "title", "category", "tags", "metadata",
)  # fmt: skip


def to_source(memory: Memory) -> dict[str, Any]:
    source: dict[str, Any] = {
        "memory_type": memory.memory_type.value,
        "user_id": memory.user_id,
        "text": memory.text,
        CONTENT: memory.search_text(),
        "created_at": iso(memory.created_at),
        "timeline_at": iso(memory.occurred_at or memory.created_at),
        "metadata": memory.metadata,
    }
    source |= _catalog_fields(memory) if memory.is_catalog else _owned_fields(memory)
    return {k: v for k, v in source.items() if v is not None}


def _owned_fields(memory: Memory) -> dict[str, Any]:
    return {
        "occurred_at": iso(memory.occurred_at),
        "fact_type": memory.fact_type,
        "confidence": memory.confidence,
        "source_episodes": list(memory.source_episodes),
        "supersedes": list(memory.supersedes),
        "superseded_by": memory.superseded_by,
        "superseded_at": iso(memory.superseded_at),
        "last_used_at": iso(memory.last_used_at),
        "use_count": memory.use_count,
        "name": memory.name,
        "steps": [s.to_dict() for s in memory.steps],
        "success_count": memory.success_count,
        "failure_count": memory.failure_count,
        "last_success_at": iso(memory.last_success_at),
    }


def _catalog_fields(memory: Memory) -> dict[str, Any]:
    return {"title": memory.title, "category": memory.category, "tags": list(memory.tags)}


def from_source(memory_id: str, source: Mapping[str, Any]) -> Memory:
    get = source.get
    return Memory(
        id=memory_id,
        memory_type=MemoryType(source["memory_type"]),
        user_id=get("user_id"),
        text=source["text"],
        created_at=_when(source["created_at"]),
        occurred_at=_when(get("occurred_at")),
        fact_type=get("fact_type"),
        confidence=get("confidence"),
        source_episodes=tuple(get("source_episodes") or ()),
        supersedes=tuple(get("supersedes") or ()),
        superseded_by=get("superseded_by"),
        superseded_at=_when(get("superseded_at")),
        last_used_at=_when(get("last_used_at")),
        use_count=get("use_count") or 0,
        name=get("name"),
        steps=tuple(Step(**s) for s in get("steps") or ()),
        success_count=get("success_count") or 0,
        failure_count=get("failure_count") or 0,
        last_success_at=_when(get("last_success_at")),
        title=get("title"),
        category=get("category"),
        tags=tuple(get("tags") or ()),
        metadata=dict(get("metadata") or {}),
    )


def _when(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def superseded_doc(by: str, at: datetime) -> dict[str, Any]:
    return {"superseded_by": by, "superseded_at": iso(at)}


def unsuperseded_doc() -> dict[str, Any]:
    """Undo ``superseded_doc`` (explicit nulls remove the fields, so ``exists`` is false again)."""
    return {"superseded_by": None, "superseded_at": None}


def used_doc(memory: Memory, at: datetime) -> dict[str, Any]:
    return {"use_count": memory.use_count + 1, "last_used_at": iso(at)}


def changed_doc(stored: Memory, wanted: Memory) -> dict[str, Any]:
    """A partial document with the mutable fields that differ.

    ``content`` is included only when the searchable text changed: a partial update that
    leaves the ``copy_to`` source alone keeps the stored embeddings instead of re-running
    inference.
    """
    old, new = to_source(stored), to_source(wanted)
    doc = {f: new.get(f) for f in MUTABLE if f in old or f in new if old.get(f) != new.get(f)}
    if old[CONTENT] != new[CONTENT]:
        doc[CONTENT] = new[CONTENT]
    if "occurred_at" in doc or "created_at" in doc:
        doc["timeline_at"] = new["timeline_at"]
    return doc
