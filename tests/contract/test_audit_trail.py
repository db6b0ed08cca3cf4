"""The audit trail on every engine: each write, supersession, forget, update and import is an
entry with its time, surface and credential; a forget keeps the id and never the text; the
trail is per owner and can be read from a point in time."""

from __future__ import annotations

import io
import json
from datetime import timedelta

from atlas_mcp import portability
from atlas_mcp.domain.audit import Actor
from atlas_mcp.service import MemoryService

NOTES = Actor("write_memory", "notes (3fa2b1c0d4e5)")


def test_every_change_is_an_entry_and_a_forget_keeps_no_text(contract_service: MemoryService) -> None:
    service = contract_service
    leeds = service.write("sarah", "Sarah lives in Leeds", actor=NOTES)
    york = service.write("sarah", "Sarah lives in York", supersedes_id=leeds.id, actor=NOTES)
    service.write("james", "James lives in Bath", actor=NOTES)
    service.forget("sarah", leeds.id, Actor("forget_memory", "stdio"))
    trail = service.audit("sarah")
    assert [(e.action, e.memory_id, e.detail) for e in trail] == [
        ("write", leeds.id, "semantic"),
        ("write", york.id, "semantic"),
        ("supersede", leeds.id, f"by {york.id}"),
        ("forget", leeds.id, ""),
    ]
    assert {e.credential for e in trail[:3]} == {"notes (3fa2b1c0d4e5)"} and trail[3].via == "forget_memory"
    assert "Leeds" not in json.dumps([e.to_record() for e in trail])
    assert [e.memory_id for e in service.audit("james")] != [] and service.audit("nobody") == []
    later = service.audit("sarah", since=trail[1].at - timedelta(microseconds=1))
    assert [e.action for e in later] == ["write", "supersede", "forget"]


def test_the_trail_travels_with_an_export(contract_service: MemoryService, engine) -> None:
    """Export from the engine under contract, import into a fresh embedded store: the source's
    trail arrives, followed by one import entry per memory."""
    written = contract_service.write("sarah", "Sarah plays the oboe", actor=NOTES)
    out = io.StringIO()
    contract_service.export_memories(out, ["sarah"])
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [line["format"] for line in lines] == [portability.FORMAT, "atlas-mcp.audit/1"]
    path = engine.path.parent / "backup.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(out.getvalue(), encoding="utf-8")
    target = MemoryService(engine)
    target.import_memories(
        portability.read_records(path),
        trail=portability.read_trail(path),
        actor=Actor("atlas-mcp import", "cli"),
    )
    trail = target.audit("sarah")
    assert [(e.action, e.memory_id, e.credential) for e in trail] == [
        ("write", written.id, "notes (3fa2b1c0d4e5)"),
        ("import", written.id, "cli"),
    ]


def test_a_write_and_its_entry_commit_together(service: MemoryService, monkeypatch) -> None:
    """The embedded engine appends a write's entries in the write's own transaction: one wait
    for the disk, and never a memory without its entry (an append that fails stores neither)."""
    import sqlite3

    import pytest

    from atlas_mcp.engines.embedded import audit_log

    writes: list[str] = []  # write transactions (a read's snapshot is a plain BEGIN)
    conn = service._engine.store.conn
    conn.set_trace_callback(
        lambda sql: writes.append(sql) if sql.strip().upper() == "BEGIN IMMEDIATE" else None
    )
    service._engine._deferred.submit = lambda row: None  # its vector's commit is not this write's
    written = service.write("sarah", "Sarah lives in Leeds", actor=NOTES)
    conn.set_trace_callback(None)
    assert len(writes) == 1 and [e.memory_id for e in service.audit("sarah")] == [written.id]

    def failing(conn: sqlite3.Connection, entries: object) -> None:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(audit_log, "append", failing)
    with pytest.raises(sqlite3.OperationalError):
        service.write("sarah", "Sarah cycles to work", actor=NOTES)
    assert [m.text for m in service.list("sarah")] == ["Sarah lives in Leeds"]
