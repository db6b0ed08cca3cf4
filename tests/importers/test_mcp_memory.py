"""The official MCP memory server's file: imported from what the server itself wrote, idempotent,
with provenance; exported back into a file the server reads (checked with the server)."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import anyio
import pytest

from .helpers import FIXTURES, copy_fixture, run, stored
from .peers import OFFICIAL_SESSION, official_read_graph, official_server, write_official

REAL_FILE = "mcp-memory/memory.jsonl"
needs_server = pytest.mark.skipif(
    official_server() is None,
    reason="the official server is not installed: bash scripts/install_peers.sh (scripts/test.sh does it)",
)


def _texts(data_dir: Path, user: str = "sarah") -> dict[str, object]:
    return {m.text: m for m in stored(data_dir).values() if m.user_id == user}


def test_the_servers_file_becomes_facts_about_entities_and_between_them(tmp_path, monkeypatch):
    path = copy_fixture(REAL_FILE, tmp_path)
    written = datetime.fromtimestamp(os.path.getmtime(path), UTC)
    result = run(
        monkeypatch, tmp_path / "data", "import", "--format", "mcp-memory", "--user", "sarah", str(path)
    )
    assert result.exit_code == 0, result.output
    assert "imported 14 memories for user 'sarah'" in result.stderr
    memories = _texts(tmp_path / "data")
    assert set(memories) == {
        "User: Name is Sarah Okafor",
        "User: Lives in Lisbon",
        "User: Is allergic to peanuts",
        "User: Drinks oat-milk flat whites",
        "User: Café Lüx is her favourite",
        "User: Prefers meetings after 2 pm",  # the observation it replaced was deleted at the source
        "Acme Robotics: Builds warehouse robots",
        "Acme Robotics: Headquartered in Porto",
        "Lisbon is a city",  # an entity with no observations keeps its type
        "Kenji: Sarah's manager",
        "Kenji: Speaks Japanese",
        "User works at Acme Robotics",
        "User lives in Lisbon",
        "Kenji manages User",
    }
    kinds = {text: m.fact_type for text, m in memories.items()}
    assert kinds["User: Name is Sarah Okafor"] == "identity"
    assert kinds["User: Is allergic to peanuts"] == "constraint"
    assert kinds["User: Drinks oat-milk flat whites"] == "preference"
    assert kinds["Kenji: Speaks Japanese"] == "world"  # about someone else, not the user's profile
    assert all(m.created_at == written for m in memories.values())  # the file's only date
    origin = memories["User: Is allergic to peanuts"].metadata["imported"]
    assert origin == {
        "format": "mcp-memory",
        "file": "memory.jsonl",
        "entity": "default_user",
        "entity_type": "person",
        "index": 2,
    }
    relation = memories["Kenji manages User"].metadata["imported"]["relation"]
    assert relation == {"from": "Kenji", "relationType": "manages", "to": "default_user"}
    assert all(m.id.startswith("mcpm-") for m in memories.values())


def test_a_second_import_adds_nothing_and_another_user_gets_their_own(tmp_path, monkeypatch):
    path, data = copy_fixture(REAL_FILE, tmp_path), tmp_path / "data"
    run(monkeypatch, data, "import", "--format", "mcp-memory", "--user", "sarah", str(path))
    before = stored(data)
    again = run(monkeypatch, data, "import", "--format", "mcp-memory", "--user", "sarah", str(path))
    assert (
        again.exit_code == 0
        and "imported 0 memories" in again.stderr
        and "14 already present" in again.stderr
    )
    assert stored(data) == before
    run(monkeypatch, data, "import", "--format", "mcp-memory", "--user", "omar", str(path))
    after = stored(data)
    assert len(after) == 28 and not set(_texts(data, "omar")) - set(_texts(data, "sarah"))
    assert {m.id for m in after.values() if m.user_id == "omar"}.isdisjoint(before)


def test_dry_run_prints_every_memory_and_writes_nothing(tmp_path, monkeypatch):
    path = copy_fixture(REAL_FILE, tmp_path)
    result = run(monkeypatch, tmp_path / "data", "import", "--format", "mcp-memory", "--dry-run", str(path))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) == 14 and all(line.startswith("new") for line in lines)
    assert "semantic/constraint" in next(line for line in lines if "peanuts" in line)
    assert "[memory.jsonl:1]" in lines[0]
    assert "would import 14 memories for user 'default'" in result.stderr
    assert stored(tmp_path / "data") == {}


@pytest.mark.parametrize(
    ("line", "why"),
    [
        (
            '{"type":"entity","name":"X","entityType":"t","observations":"not a list"}',
            "'observations' must be a list",
        ),
        ('{"type":"relation","from":"a","to":"b"}', "'relationType' must be a non-empty string"),
        ('{"type":"node","name":"X"}', "'type' must be 'entity' or 'relation'"),
        ('{"type":"entity","name":"X",', "not valid JSON"),
    ],
)
def test_a_malformed_line_is_named_and_nothing_is_imported(tmp_path, monkeypatch, line, why):
    lines = (FIXTURES / REAL_FILE).read_text(encoding="utf-8").splitlines()
    lines.insert(3, line)
    path = tmp_path / "memory.jsonl"
    path.write_text("\n".join(lines), encoding="utf-8")
    result = run(monkeypatch, tmp_path / "data", "import", "--format", "mcp-memory", str(path))
    assert result.exit_code != 0
    assert "memory.jsonl:4:" in result.output and why in result.output and "nothing imported" in result.output
    assert "Traceback" not in result.output
    assert stored(tmp_path / "data") == {}


def test_read_graph_output_reads_like_the_file(tmp_path, monkeypatch):
    graph = {"entities": [], "relations": []}
    for line in (FIXTURES / REAL_FILE).read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        kind = record.pop("type")
        graph["entities" if kind == "entity" else "relations"].append(record)
    path = tmp_path / "graph.json"
    path.write_text(json.dumps(graph, indent=2), encoding="utf-8")
    result = run(
        monkeypatch, tmp_path / "data", "import", "--format", "mcp-memory", "--user", "sarah", str(path)
    )
    assert result.exit_code == 0 and "imported 14 memories" in result.stderr


def test_export_restores_the_servers_own_file(tmp_path, monkeypatch):
    """Imported records go back to their entity, observation and relation, in their order."""
    path, data = copy_fixture(REAL_FILE, tmp_path), tmp_path / "data"
    run(monkeypatch, data, "import", "--format", "mcp-memory", "--user", "sarah", str(path))
    out = tmp_path / "out.jsonl"
    result = run(monkeypatch, data, "export", "--format", "mcp-memory", "--user", "sarah", str(out))
    assert result.exit_code == 0, result.output
    assert out.read_bytes() == (FIXTURES / REAL_FILE).read_bytes()


def _own_memories(data: Path, monkeypatch) -> None:
    from atlas_mcp.engines.embedded.engine import EmbeddedEngine
    from atlas_mcp.inference.embedder import default_embedder
    from atlas_mcp.service import MemoryService

    service = MemoryService(EmbeddedEngine(data / "atlas.db", default_embedder()))
    try:
        old = service.write("sarah", "Sarah lives in Leeds", fact_type="identity")
        service.write("sarah", "Sarah lives in Lisbon", fact_type="identity", supersedes_id=old.id)
        service.write("sarah", "Sarah flew to Porto", "episodic", occurred_at="2026-03-01T09:00:00Z")
        service.write(
            "sarah", "Reset the hub", "procedural", name="hub reset", steps=["unplug it", "wait 10 s"]
        )
        service.write("omar", "Omar prefers tea")
    finally:
        service.close()


@needs_server
async def test_the_official_server_reads_our_export(tmp_path, monkeypatch):
    data, out = tmp_path / "data", tmp_path / "memory.jsonl"
    _own_memories(data, monkeypatch)
    await anyio.to_thread.run_sync(
        lambda: run(monkeypatch, data, "import", "--format", "mcp-memory", "--user", "sarah",
                    str(copy_fixture(REAL_FILE, tmp_path)))
    )  # fmt: skip
    result = run(monkeypatch, data, "export", "--format", "mcp-memory", "--user", "sarah", str(out))
    assert result.exit_code == 0, result.output
    graph = await official_read_graph(out, official_server())
    entities = {e["name"]: e for e in graph["entities"]}
    assert entities["sarah"]["entityType"] == "person"
    assert entities["sarah"]["observations"] == [
        "Sarah lives in Lisbon",
        "On 2026-03-01: Sarah flew to Porto",
    ]
    assert entities["hub reset"]["observations"] == [
        "Use when: Reset the hub",
        "Step 1: unplug it",
        "Step 2: wait 10 s",
    ]
    assert entities["default_user"]["observations"][0] == "Name is Sarah Okafor"
    assert {"from": "Kenji", "to": "default_user", "relationType": "manages"} in graph["relations"]
    assert not any("Omar" in json.dumps(e) for e in graph["entities"])  # another user's memories stay home
    assert not any("Leeds" in json.dumps(e) for e in graph["entities"])  # a past state has no place in it


@needs_server
async def test_live_the_server_writes_a_file_we_import(tmp_path, monkeypatch):
    """The same session as the committed fixture, written again by the installed server."""
    path = tmp_path / "memory.jsonl"
    graph = await write_official(path, official_server())
    assert len(graph["entities"]) == 4 and len(graph["relations"]) == 3
    assert path.read_text(encoding="utf-8") == (FIXTURES / REAL_FILE).read_text(encoding="utf-8")
    result = run(
        monkeypatch, tmp_path / "data", "import", "--format", "mcp-memory", "--user", "sarah", str(path)
    )
    assert result.exit_code == 0 and "imported 14 memories" in result.stderr
    assert OFFICIAL_SESSION  # the recipe the fixture was made with


def test_exporting_a_user_with_nothing_says_so_and_writes_nothing(tmp_path, monkeypatch):
    data, out = tmp_path / "data", tmp_path / "out.jsonl"
    run(
        monkeypatch,
        data,
        "import",
        "--format",
        "mcp-memory",
        "--user",
        "sarah",
        str(copy_fixture(REAL_FILE, tmp_path)),
    )
    result = run(monkeypatch, data, "export", "--format", "mcp-memory", "--user", "sarha", str(out))
    assert (
        result.exit_code == 1
        and "unknown user 'sarha'" in result.output
        and "did you mean 'sarah'" in result.output
    )
    assert not out.exists()
