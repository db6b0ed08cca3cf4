"""Drafts: what a reader found in another program's file, before the service checks it.

A draft names the record it came from (``where``, for errors) and what identifies that record
at its source (``key``). The memory's id is derived from the user, the format and that key,
so importing the same file twice finds the same ids and adds nothing, while two users
importing one file never share an id.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..errors import InvalidInput

ID_HEX_CHARS = 32  # 128 bits of sha256: collisions are not a practical concern


@dataclass(frozen=True, slots=True)
class Draft:
    """One memory read from a source file."""

    text: str
    where: str  # "memory.jsonl:12", "notes/Coffee.md": named in every error about it
    key: str  # identifies the record at its source, stable across exports of the same data
    created_at: datetime
    memory_type: str = "semantic"
    fact_type: str | None = None  # semantic only; None: the write default
    updated_at: datetime | None = None  # the source's last change (ages a fact from there)
    occurred_at: datetime | None = None  # episodic only
    confidence: float | None = None
    metadata: dict[str, Any] = field(default_factory=dict)  # the source's own, and provenance
    superseded_by: str | None = None  # the key of the draft that replaced this one at the source
    # What the record looked like (a content hash): a record edited in place at its source comes
    # back with another revision, and its new value supersedes the one imported before.
    revision: str | None = None


@dataclass(frozen=True, slots=True)
class Source:
    """Everything one file holds, read and shape-checked, nothing written yet."""

    format: str
    path: Path
    drafts: tuple[Draft, ...]
    skipped: tuple[str, ...] = ()  # records deliberately left out, each with why ("3 deleted")


def memory_id(prefix: str, user_id: str, format_name: str, key: str) -> str:
    """The id an imported record gets: the same for the same user, format and record."""
    digest = hashlib.sha256(f"{user_id}\x00{format_name}\x00{key}".encode()).hexdigest()
    return f"{prefix}-{digest[:ID_HEX_CHARS]}"


def provenance(format_name: str, path: Path, **record: Any) -> dict[str, Any]:
    """The ``metadata.imported`` entry: which program's file, and which record in it."""
    found = {k: v for k, v in record.items() if v is not None and v != ""}
    return {"imported": {"format": format_name, "file": path.name, **found}}


def file_time(path: Path) -> datetime:
    """When the file was last written: the latest any of its undated records can be from."""
    return datetime.fromtimestamp(path.stat().st_mtime, UTC)


def timestamp(value: Any, where: str, what: str) -> datetime | None:
    """An ISO-8601 string or Unix seconds as an aware UTC datetime (None for null/absent)."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise fail(where, f"{what} must be a date, got {value!r}")
    if isinstance(value, int | float):
        try:
            return datetime.fromtimestamp(float(value), UTC)
        except (OverflowError, OSError, ValueError) as exc:
            raise fail(where, f"{what} {value!r} is not a valid Unix time") from exc
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.strip())
        except ValueError as exc:
            raise fail(where, f"{what} {value[:40]!r} is not an ISO-8601 date") from exc
        return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).astimezone(UTC)
    raise fail(where, f"{what} must be a date, got {type(value).__name__}")


def text_field(record: Mapping[str, Any], name: str, where: str) -> str:
    value = record.get(name)
    if not isinstance(value, str) or not value.strip():
        raise fail(where, f"{name!r} must be a non-empty string")
    return value


def json_object(raw: Any, where: str, what: str) -> dict[str, Any]:
    """A JSON object stored as text (or already decoded); null and "" read as {}."""
    if raw is None or raw == "":
        return {}
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise fail(where, f"{what} is not valid JSON ({exc.msg})") from exc
    if not isinstance(raw, dict):
        raise fail(where, f"{what} must be a JSON object")
    return raw


def fail(where: str, problem: str) -> InvalidInput:
    return InvalidInput(f"{where}: {problem}; nothing imported")
