"""The audit trail: who wrote, superseded, forgot or imported which memory, when, and how. Pure.

An entry names the memory by id only, never its text, so a forgotten memory leaves no trace of
what it said; and the credential by name or fingerprint, never the secret. Entries are kept
per owner (``user_id`` None: the shared catalog) and travel with an export.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..errors import InvalidInput
from .model import Memory, iso

FORMAT = "atlas-mcp.audit/1"  # an export line holding one entry
ACTIONS = ("write", "supersede", "forget", "import", "update")


@dataclass(frozen=True, slots=True)
class Actor:
    """Who acts: the surface (a tool or a command) and the credential behind it."""

    via: str  # "write_memory", "atlas-mcp import", "consolidation" ...
    credential: str  # "stdio", "reporting (3fa2b1c0d4e5)", "cli" — never a token


OPERATOR = Actor("atlas-mcp", "cli")  # a service call without a named actor: local administration


@dataclass(frozen=True, slots=True)
class AuditEntry:
    at: datetime
    user_id: str | None
    action: str  # one of ACTIONS
    memory_id: str
    via: str
    credential: str
    detail: str = ""  # the memory's type, or "by <id>" for a supersession; never text

    def to_record(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "at": iso(self.at),
            "user_id": self.user_id,
            "action": self.action,
            "memory_id": self.memory_id,
            "via": self.via,
            "credential": self.credential,
            "detail": self.detail,
        }


def from_record(record: Mapping[str, Any]) -> AuditEntry:
    """An entry from an export line (untrusted: every field checked)."""
    try:
        at = datetime.fromisoformat(str(record["at"]))
        action, memory_id = str(record["action"]), str(record["memory_id"])
        user_id = record.get("user_id")
    except (KeyError, ValueError) as exc:
        raise InvalidInput(f"audit entry: {exc}") from exc
    if action not in ACTIONS or at.tzinfo is None or (user_id is not None and not isinstance(user_id, str)):
        raise InvalidInput("audit entry: unknown action, naive time or a malformed owner")
    return AuditEntry(
        at, user_id, action, memory_id, str(record.get("via", "")), str(record.get("credential", "")),
        str(record.get("detail", "")),
    )  # fmt: skip


def written(memory: Memory, supersedes: Iterable[str], actor: Actor, at: datetime) -> list[AuditEntry]:
    """A write and the supersessions it made."""
    entries = [_entry(at, memory.user_id, "write", memory.id, actor, memory.memory_type.value)]
    entries += [_entry(at, memory.user_id, "supersede", old, actor, f"by {memory.id}") for old in supersedes]
    return entries


def changed(
    action: str, user_id: str | None, memory_id: str, actor: Actor, at: datetime, detail: str = ""
) -> AuditEntry:
    return _entry(at, user_id, action, memory_id, actor, detail)


def _entry(
    at: datetime, user_id: str | None, action: str, memory_id: str, actor: Actor, detail: str
) -> AuditEntry:
    return AuditEntry(at, user_id, action, memory_id, actor.via, actor.credential, detail)
