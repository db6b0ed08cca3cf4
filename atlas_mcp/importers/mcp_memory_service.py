"""mcp-memory-service: its SQLite database (``sqlite_vec.db``) or its JSON export.

The database's ``memories`` table holds one row a memory: ``content``, ``content_hash`` (its
identity), comma-separated ``tags``, a ``memory_type`` from its ontology, JSON ``metadata``,
Unix ``created_at``/``updated_at``, and, in recent versions, ``deleted_at`` (soft delete),
``superseded_by`` (the hash of the version that replaced it) and ``confidence``. The export
(``sync/exporter.py``) is ``{"export_metadata": ..., "memories": [...]}`` with the same fields.
Only the ``memories`` table is read: the vectors are its model's, and we embed with ours.

Events (meetings, sessions, errors, commands ...) become episodic memories dated when they
were stored; everything else is a semantic fact. A deleted row is left out; a replaced one
arrives superseded by its replacement, so its history stays as it was.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from . import fact_types
from .drafts import Draft, Source, fail, json_object, provenance, text_field, timestamp

FORMAT = "mcp-memory-service"
SQLITE_HEADER = b"SQLite format 3\0"
# Base types and subtypes of its ontology that record something that happened.
EVENT_TYPES = frozenset(
    {
        "session", "conversation", "conversation_turn", "command", "code_edit", "file_access",
        "search", "tool_outcome", "error", "bug", "failure", "exception", "timeout", "mistake",
        "ceremony", "sprint_review", "sprint_planning", "daily_standup", "retrospective",
        "standup_note", "demo_feedback", "meeting", "minutes", "attendee_note",
        "communication", "email_summary", "chat_summary", "announcement", "milestone_reached",
    }
)  # fmt: skip
KIND_OF_TYPE = {"constraint": "constraint", "deadline": "constraint", "requirement": "constraint"} | {
    "preference": "preference",
    "preference_signal": "preference",
}


def read(path: Path, format_name: str = FORMAT) -> Source:
    with path.open("rb") as fh:
        is_database = fh.read(len(SQLITE_HEADER)) == SQLITE_HEADER
    rows = list(_database_rows(path) if is_database else _export_rows(path))
    live = [(r, where) for r, where in rows if not r.get("deleted_at")]
    hashes = {r["content_hash"] for r, _where in live}
    drafts = [_draft(r, where, path, hashes) for r, where in live]
    deleted = len(rows) - len(live)
    return Source(FORMAT, path, tuple(drafts), (f"{deleted} deleted there",) if deleted else ())


def _database_rows(path: Path) -> Iterator[tuple[dict[str, Any], str]]:
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise fail(path.name, f"cannot open the database ({exc})") from exc
    try:
        conn.row_factory = sqlite3.Row
        columns = {row[1] for row in conn.execute("PRAGMA table_info(memories)")}
        if not {"content", "content_hash"} <= columns:
            raise fail(path.name, "not an mcp-memory-service database (no memories table with content)")
        order = "id" if "id" in columns else "rowid"
        for row in conn.execute(f"SELECT * FROM memories ORDER BY {order}"):
            record = dict(row)
            where = f"{path.name}: memory {record.get('id', '?')} ({str(record.get('content_hash'))[:12]})"
            yield _normalised(record, where), where
    except sqlite3.DatabaseError as exc:
        raise fail(path.name, f"cannot read the database ({exc})") from exc
    finally:
        conn.close()


def _export_rows(path: Path) -> Iterator[tuple[dict[str, Any], str]]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise fail(f"{path.name}:{exc.lineno}", f"not valid JSON ({exc.msg})") from exc
    memories = document.get("memories") if isinstance(document, dict) else None
    if not isinstance(memories, list):
        raise fail(path.name, "not an mcp-memory-service export (no 'memories' list)")
    for index, record in enumerate(memories):
        where = f"{path.name}: memories[{index}]"
        if not isinstance(record, dict):
            raise fail(where, "must be a JSON object")
        yield _normalised(record, where), where


def _normalised(record: dict[str, Any], where: str) -> dict[str, Any]:
    """The database row and the export item in one shape, checked."""
    text_field(record, "content", where)
    text_field(record, "content_hash", where)
    tags = record.get("tags") or []
    if isinstance(tags, str):
        tags = [t.strip() for t in tags.split(",") if t.strip()]
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise fail(where, "'tags' must be a list of strings or a comma-separated string")
    created = timestamp(record.get("created_at"), where, "created_at") or timestamp(
        record.get("created_at_iso"), where, "created_at_iso"
    )
    if created is None:
        raise fail(where, "has no created_at")
    confidence = record.get("confidence")
    if confidence is not None and (not isinstance(confidence, int | float) or not 0 <= confidence <= 1):
        raise fail(where, f"confidence {confidence!r} is not between 0 and 1")
    return record | {
        "tags": tags,
        "metadata": json_object(record.get("metadata"), where, "metadata"),
        "created_at": created,
        "updated_at": timestamp(record.get("updated_at"), where, "updated_at"),
        "confidence": confidence,
    }


def _draft(record: dict[str, Any], where: str, path: Path, hashes: set[str]) -> Draft:
    kind = str(record.get("memory_type") or "").strip().lower()
    text = record["content"]
    episodic = kind in EVENT_TYPES
    # The table has a column for it; its export carries the same link in the metadata.
    newer = record.get("superseded_by") or record["metadata"].get("superseded_by") or None
    origin = provenance(
        FORMAT, path, content_hash=record["content_hash"], memory_type=kind or None, store=record.get("store")
    )
    return Draft(
        text=text,
        where=where,
        key=record["content_hash"],
        created_at=record["created_at"],
        memory_type="episodic" if episodic else "semantic",
        fact_type=None if episodic else KIND_OF_TYPE.get(kind) or fact_types.from_text(text, "world"),
        updated_at=record["updated_at"],
        occurred_at=record["created_at"] if episodic else None,
        confidence=None if episodic else record["confidence"],
        metadata=record["metadata"] | ({"tags": record["tags"]} if record["tags"] else {}) | origin,
        superseded_by=newer if newer in hashes else None,
    )
