"""export → import is lossless: every field, supersession link and provenance survives, in a
fresh store whose vectors come from its own model (vector spaces are never mixed)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from atlas_mcp.cli import cli
from atlas_mcp.domain.audit import FORMAT as AUDIT_FORMAT
from atlas_mcp.engines.embedded.engine import EmbeddedEngine
from atlas_mcp.inference.embedder import PER_LANGUAGE_ID, default_embedder
from atlas_mcp.portability import FORMAT, iter_memories, owners
from atlas_mcp.service import MemoryService

from .conftest import database


def _open(data_dir: Path) -> MemoryService:
    return MemoryService(EmbeddedEngine(database(data_dir), default_embedder()))


def everything(data_dir: Path) -> dict[str, object]:
    engine = EmbeddedEngine(database(data_dir), default_embedder())
    try:
        return {m.id: m for owner in owners(engine.stats()) for m in iter_memories(engine, owner)}
    finally:
        engine.close()


def _run(monkeypatch: pytest.MonkeyPatch, data_dir: Path, *args: str):
    monkeypatch.setenv("ATLAS_DATA_DIR", str(data_dir))
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result


def build_rich_store(data_dir: Path) -> Path:
    """Every kind of memory and every field a memory can carry, for two users and the catalog."""
    service = _open(data_dir)
    try:
        episode = service.write(
            "sarah", "Sarah flew to Lisbon", "episodic", occurred_at="2025-03-01T09:30:00Z"
        )
        old = service.write("sarah", "Sarah lives in Leeds", fact_type="identity", confidence=0.9)
        older = service.write("sarah", "Sarah rents a flat", metadata={"source": "chat", "ünï": ["ç", 1]})
        service.write(
            "sarah",
            "Sarah lives in Lisbon",
            supersedes_id=[old.id, older.id],
            contradiction="harsh",
            source_episodes=[episode.id],
        )
        playbook = service.write(
            "sarah",
            "Reset the hub",
            "procedural",
            name="hub reset",
            steps=["unplug it", {"instruction": "hold reset 10 s", "tool": "timer"}],
        )
        stored = service.get("sarah", playbook.id)
        service.update("sarah", stored.evolve(success_count=3, failure_count=1))
        service.write(  # what a fact is about, since when it is true, when it expires
            "omar",
            "Omar prefers tea to coffee",
            about="Hot drink",
            valid_from="2024-05-01T00:00:00Z",
            expires_at="2099-01-01T00:00:00Z",
        )
        service.load_catalog([{"id": "hub-x1", "title": "Hub X1", "text": "Firmware 2.1", "tags": ["hub"]}])
        service.recall("sarah", "where does Sarah live")  # usage counts move
    finally:
        service.close()
    return data_dir


@pytest.fixture
def rich_store(tmp_path: Path) -> Path:
    return build_rich_store(tmp_path / "source")


def test_round_trip_is_lossless(rich_store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exported = tmp_path / "all.jsonl"
    result = _run(monkeypatch, rich_store, "export", str(exported))
    assert result.exit_code == 0, result.output
    assert "exporting" in result.stderr and result.stdout == ""
    records = [json.loads(line) for line in exported.read_text(encoding="utf-8").splitlines()]
    lines = [line for line in records if line["format"] == FORMAT]
    trail = [line for line in records if line["format"] == AUDIT_FORMAT]
    assert (
        len(lines) == 7
        and len(trail) == len(records) - 7
        and {"write", "supersede"} <= {t["action"] for t in trail}
    )
    # The exporting CLI runs the default settings: the records name that configuration.
    assert {line["embedding_model"] for line in lines} == {PER_LANGUAGE_ID}

    target = tmp_path / "target"
    result = _run(monkeypatch, target, "import", str(exported))
    assert result.exit_code == 0, result.output
    assert "imported 7 memories" in result.stderr

    source, copied = everything(rich_store), everything(target)
    assert copied == source  # every field of every memory, dataclass equality
    (tea,) = [m for m in copied.values() if m.about]
    assert (tea.about, tea.valid_from.year, tea.expires_at.year) == ("hot drink", 2024, 2099)
    assert all(copied[m.superseded_by].valid_from == m.valid_to for m in copied.values() if m.superseded_by)
    superseded = [m for m in copied.values() if m.superseded_by]
    assert len(superseded) == 2 and all(copied[m.superseded_by].supersedes for m in superseded)

    again = tmp_path / "again.jsonl"
    assert _run(monkeypatch, target, "export", str(again)).exit_code == 0
    memories_again = [line for line in again.read_text().splitlines() if AUDIT_FORMAT not in line]
    assert sorted(memories_again) == sorted(json.dumps(line, ensure_ascii=False) for line in lines)
    carried = [json.loads(line) for line in again.read_text().splitlines() if AUDIT_FORMAT in line]
    assert all(entry in carried for entry in trail)  # the source's trail, then the import's entries
    assert [e["action"] for e in carried if e not in trail] == ["import"] * 7


def test_recall_after_import_matches_the_source(rich_store: Path, tmp_path: Path, monkeypatch) -> None:
    exported, target = tmp_path / "all.jsonl", tmp_path / "target"
    _run(monkeypatch, rich_store, "export", str(exported))
    _run(monkeypatch, target, "import", str(exported))
    ranked = []
    for data_dir in (rich_store, target):
        service = _open(data_dir)
        try:
            hits = service.recall("sarah", "how do I reset the hub", touch=False)
            ranked.append([h.memory.id for h in hits])
        finally:
            service.close()
    assert ranked[0] == ranked[1] and ranked[0]


def test_import_twice_skips_what_is_there(rich_store: Path, tmp_path: Path, monkeypatch) -> None:
    exported, target = tmp_path / "all.jsonl", tmp_path / "target"
    _run(monkeypatch, rich_store, "export", str(exported))
    _run(monkeypatch, target, "import", str(exported))
    result = _run(monkeypatch, target, "import", str(exported))
    assert result.exit_code == 0 and "imported 1 memories" in result.stderr  # the catalog upsert
    assert "6 already present" in result.stderr
    assert len(everything(target)) == 7


def test_export_one_user(rich_store: Path, tmp_path: Path, monkeypatch) -> None:
    exported = tmp_path / "omar.jsonl"
    assert _run(monkeypatch, rich_store, "export", "--user", "omar", str(exported)).exit_code == 0
    lines = [json.loads(line) for line in exported.read_text().splitlines()]
    assert [line["user_id"] for line in lines if line["format"] == FORMAT] == ["omar"]
    assert {line["user_id"] for line in lines} == {"omar"}  # and omar's audit trail only


def test_a_bad_line_imports_nothing(rich_store: Path, tmp_path: Path, monkeypatch) -> None:
    exported, target = tmp_path / "all.jsonl", tmp_path / "target"
    _run(monkeypatch, rich_store, "export", str(exported))
    lines = exported.read_text().splitlines()
    broken = json.loads(lines[3]) | {"user_id": None}  # a user memory without an owner
    exported.write_text("\n".join([*lines[:3], json.dumps(broken), *lines[4:]]) + "\n")
    result = _run(monkeypatch, target, "import", str(exported))
    assert result.exit_code != 0 and ":4: user_id" in result.output and "nothing imported" in result.output
    assert not database(target).exists() or everything(target) == {}


def test_another_model_is_re_embedded_never_mixed(rich_store: Path, tmp_path: Path, monkeypatch) -> None:
    exported, target = tmp_path / "all.jsonl", tmp_path / "target"
    _run(monkeypatch, rich_store, "export", str(exported))
    lines = [
        json.loads(line) | {"embedding_model": "jina-v5-1024"} for line in exported.read_text().splitlines()
    ]
    exported.write_text("".join(json.dumps(line) + "\n" for line in lines))
    result = _run(monkeypatch, target, "import", str(exported))
    assert result.exit_code == 0 and "re-embedded with" in result.stderr
    conn = sqlite3.connect(database(target))
    try:
        models = {r[0] for r in conn.execute("SELECT DISTINCT embedding_model FROM memories")}
    finally:
        conn.close()
    assert models == {default_embedder().model_id}


def test_an_id_taken_by_another_user_is_a_conflict(rich_store: Path, tmp_path: Path, monkeypatch) -> None:
    exported = tmp_path / "all.jsonl"
    _run(monkeypatch, rich_store, "export", "--user", "omar", str(exported))
    line = json.loads(exported.read_text().splitlines()[0]) | {"user_id": "sarah"}
    exported.write_text(json.dumps(line) + "\n")
    result = _run(monkeypatch, rich_store, "import", str(exported))
    assert result.exit_code != 0 and "already taken" in result.output


@pytest.mark.parametrize(
    ("command", "line", "said"),
    [
        (("import",), "[1, 2]", ":2: each line must be a JSON object; nothing imported"),
        (("import",), "{oops", ":2: not valid JSON (Expecting property name"),
        (("catalog", "load"), '"just text"', ":2: each line must be a JSON object"),
        (("catalog", "load"), "{oops", ":2: not valid JSON (Expecting property name"),
    ],
)
def test_every_jsonl_reader_names_the_bad_line(tmp_path: Path, monkeypatch, command, line, said) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text("\n" + line + "\n")  # a blank line is skipped, and still counted
    result = _run(monkeypatch, tmp_path / "data", *command, str(source))
    assert result.exit_code != 0 and f"{source}{said}" in result.output, result.output
