"""Mapping between ``Memory`` objects and Elasticsearch ``_source`` documents.

Only the fields a type's index maps are emitted (the mappings are strict), and ``None`` is
left out so a document never claims a field it does not have: ``exists`` filters (catalog =
no ``user_id``, live = no ``superseded_by``) depend on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from ...domain import codec
from ...domain.model import Memory, MemoryType, iso
from .mappings import CONTENT

_STORED = {t: codec.stored_names(t) for t in MemoryType}
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def to_source(memory: Memory) -> dict[str, Any]:
    source = codec.encode(memory, _STORED[memory.memory_type]) | {
        CONTENT: memory.search_text(),
        "created_us": micros(memory.created_at),
        "timeline_us": micros(memory.timeline_at),
    }
    return {k: v for k, v in source.items() if v is not None}


def micros(at: datetime) -> int:
    """Whole microseconds since the epoch (negative before 1970): an exact sort and range key."""
    return (at - EPOCH) // timedelta(microseconds=1)


def from_source(memory_id: str, source: Mapping[str, Any]) -> Memory:
    return codec.decode({**source, "id": memory_id})


def superseded_doc(new: Memory, old: Memory) -> dict[str, Any]:
    """Mark ``old`` replaced by ``new``; a fact's validity closes where the new one's starts."""
    doc: dict[str, Any] = {"superseded_by": new.id, "superseded_at": iso(new.created_at)}
    if new.valid_from is not None and (old.valid_to is None or old.valid_to > new.valid_from):
        doc["valid_to"] = iso(new.valid_from)
    return doc


def unsuperseded_doc(old: Memory) -> dict[str, Any]:
    """Undo ``superseded_doc`` (explicit nulls remove the fields, so ``exists`` is false again)."""
    return {"superseded_by": None, "superseded_at": None, "valid_to": iso(old.valid_to)}


def used_doc(memory: Memory, at: datetime) -> dict[str, Any]:
    return {"use_count": memory.use_count + 1, "last_used_at": iso(at)}


def changed_doc(stored: Memory, wanted: Memory) -> dict[str, Any]:
    """A partial document with the mutable fields that differ.

    ``content`` is included only when the searchable text changed: a partial update that
    leaves the ``copy_to`` source alone keeps the stored embeddings instead of re-running
    inference.
    """
    old, new = to_source(stored), to_source(wanted)
    doc = {f: new.get(f) for f in codec.MUTABLE if f in old or f in new if old.get(f) != new.get(f)}
    if old[CONTENT] != new[CONTENT]:
        doc[CONTENT] = new[CONTENT]
    if "occurred_at" in doc or "created_at" in doc:
        doc["timeline_us"] = new["timeline_us"]
    return doc
