"""mcp-memory-service: its database and its JSON export, both written by the program itself
(driven through its MCP tools, exported with its own exporter: see peers.py)."""

from __future__ import annotations

import gzip
import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from atlas_mcp.domain.model import MemoryType

from .helpers import FIXTURES, copy_fixture, run, stored
from .peers import MMS_SESSION, export_mms, mcp_memory_service, write_mms

needs_program = pytest.mark.skipif(
    mcp_memory_service() is None,
    reason="mcp-memory-service is not installed (it needs PyTorch): bash scripts/install_peers.sh --python",
)


def unpacked_database(into: Path) -> Path:
    target = into / "sqlite_vec.db"
    with (
        gzip.open(FIXTURES / "mcp-memory-service/sqlite_vec.db.gz", "rb") as packed,
        target.open("wb") as out,
    ):
        shutil.copyfileobj(packed, out)
    return target


def _source_rows(db: Path) -> dict[str, dict]:
    import sqlite3

    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        return {r["content"]: dict(r) for r in conn.execute("SELECT * FROM memories")}
    finally:
        conn.close()


def test_the_database_keeps_dates_history_tags_and_leaves_deleted_rows_out(tmp_path, monkeypatch):
    db = unpacked_database(tmp_path)
    result = run(
        monkeypatch, tmp_path / "data", "import", "--format", "mcp-memory-service", "--user", "sarah", str(db)
    )
    assert result.exit_code == 0, result.output
    assert "imported 6 memories" in result.stderr and "left out: 1 deleted there" in result.stderr
    memories = {m.text: m for m in stored(tmp_path / "data").values()}
    rows = _source_rows(db)
    assert "Temporary wifi password for the demo is hunter2" not in memories  # deleted in the program
    for text, memory in memories.items():
        assert memory.created_at == datetime.fromtimestamp(rows[text]["created_at"], UTC)
        assert memory.metadata["imported"]["content_hash"] == rows[text]["content_hash"]
    moved, old = memories["Sarah moved to Porto in May"], memories["Sarah's home city is Lisbon"]
    assert old.superseded_by == moved.id and moved.supersedes == (old.id,)  # its versioned update
    assert old.superseded_at == moved.created_at
    assert old.metadata["tags"] == ["personal", "location"]
    retro = memories["Team retro on 3 March: the robots' charging schedule caused the delays"]
    assert retro.memory_type is MemoryType.EPISODIC and retro.occurred_at == retro.created_at
    assert memories["Sarah is allergic to peanuts"].fact_type == "constraint"
    decision = memories["Decided to deploy the warehouse fleet with firmware 2.4.1"]
    assert decision.metadata["imported"]["memory_type"] == "decision" and decision.fact_type == "world"
    again = run(
        monkeypatch, tmp_path / "data", "import", "--format", "mcp-memory-service", "--user", "sarah", str(db)
    )
    assert "imported 0 memories" in again.stderr and "6 already present" in again.stderr


def test_its_json_export_reads_the_same_and_is_the_same_records(tmp_path, monkeypatch):
    data = tmp_path / "data"
    export = copy_fixture("mcp-memory-service/export.json", tmp_path)
    result = run(
        monkeypatch, data, "import", "--format", "mcp-memory-service", "--user", "sarah", str(export)
    )
    assert result.exit_code == 0 and "imported 6 memories" in result.stderr, result.output
    from_export = stored(data)
    old = next(m for m in from_export.values() if m.text == "Sarah's home city is Lisbon")
    assert old.superseded_by is not None  # the export carries the link in the metadata
    # The database describes the same records: importing it as well adds nothing.
    again = run(
        monkeypatch,
        data,
        "import",
        "--format",
        "mcp-memory-service",
        "--user",
        "sarah",
        str(unpacked_database(tmp_path)),
    )
    assert "imported 0 memories" in again.stderr, again.output
    assert json.loads(export.read_text())["export_metadata"]["exporter_version"]


def test_something_else_named_like_its_database_says_so(tmp_path, monkeypatch):
    import sqlite3

    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE notes (body TEXT)").connection.commit()
    result = run(monkeypatch, tmp_path / "data", "import", "--format", "mcp-memory-service", str(other))
    assert result.exit_code == 1 and "not an mcp-memory-service database" in result.output


@needs_program
@pytest.mark.slow
async def test_live_the_program_writes_a_database_and_an_export_we_import(tmp_path, monkeypatch):
    venv = mcp_memory_service()
    db = tmp_path / "sqlite_vec.db"
    await write_mms(db, venv)
    export_mms(db, tmp_path / "export.json", venv)
    for path in (db, tmp_path / "export.json"):
        result = run(
            monkeypatch,
            tmp_path / "data",
            "import",
            "--format",
            "mcp-memory-service",
            "--user",
            "sarah",
            str(path),
        )
        assert result.exit_code == 0, result.output
    texts = {m.text for m in stored(tmp_path / "data").values()}
    assert texts == {a["content"] for _tool, a in MMS_SESSION if "hunter2" not in a["content"]} | {
        "Sarah moved to Porto in May"
    }
