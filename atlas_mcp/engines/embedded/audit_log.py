"""The audit trail in SQLite: one append-only table beside the memories (never the text)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime

from ...domain.audit import AuditEntry
from ...domain.model import iso
from ..base import AuditQuery

TABLE = (
    "CREATE TABLE IF NOT EXISTS audit (seq INTEGER PRIMARY KEY, owner TEXT, at TEXT NOT NULL, "
    "action TEXT NOT NULL, memory_id TEXT NOT NULL, via TEXT NOT NULL, credential TEXT NOT NULL, "
    "detail TEXT NOT NULL)"
)
INDEX = "CREATE INDEX IF NOT EXISTS audit_by_owner ON audit (owner, at, seq)"
_COLUMNS = "at, owner, action, memory_id, via, credential, detail"


def create(conn: sqlite3.Connection) -> None:
    """The table, made by the migration ``audit-trail`` (``IF NOT EXISTS``: a store may hold the
    table already, made on its first entry before the migration existed)."""
    conn.execute(TABLE)
    conn.execute(INDEX)


def append(conn: sqlite3.Connection, entries: Sequence[AuditEntry]) -> None:
    conn.executemany(
        f"INSERT INTO audit ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
        [(iso(e.at), e.user_id, e.action, e.memory_id, e.via, e.credential, e.detail) for e in entries],
    )


def read(conn: sqlite3.Connection, query: AuditQuery) -> list[AuditEntry]:
    since = iso(query.since) if query.since is not None else ""
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM audit WHERE owner IS ? AND at > ? ORDER BY at, seq LIMIT ?",
        (query.user_id, since, query.limit),
    ).fetchall()
    return [AuditEntry(datetime.fromisoformat(r[0]), *r[1:]) for r in rows]
