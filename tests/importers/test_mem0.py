"""mem0: the get_all() answer mem0 itself produced (peers.py: mem0ai with infer=False, a local
embedding model, its own qdrant store; no LLM is reachable here, so mem0 stored the given text
rather than facts an LLM extracted: the shape of the file is the same either way)."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from .helpers import FIXTURES, copy_fixture, run, stored
from .peers import mem0, write_mem0

needs_program = pytest.mark.skipif(
    mem0() is None, reason="mem0 is not installed (it needs PyTorch): bash scripts/install_peers.sh --python"
)


def test_its_memories_keep_their_ids_dates_and_scopes_but_belong_to_the_user_named(tmp_path, monkeypatch):
    path = copy_fixture("mem0/get_all.json", tmp_path)
    source = {r["memory"]: r for r in json.loads(path.read_text(encoding="utf-8"))["results"]}
    result = run(monkeypatch, tmp_path / "data", "import", "--format", "mem0", "--user", "sarah-k", str(path))
    assert result.exit_code == 0 and f"imported {len(source)} memories" in result.stderr, result.output
    memories = {m.text: m for m in stored(tmp_path / "data").values()}
    assert set(memories) == set(source)
    assert {m.user_id for m in memories.values()} == {"sarah-k"}  # never the id inside the file
    for text, memory in memories.items():
        record = source[text]
        assert memory.created_at == datetime.fromisoformat(record["created_at"])
        assert memory.last_used_at == datetime.fromisoformat(
            record["updated_at"]
        )  # ages from its last change
        origin = memory.metadata["imported"]
        assert (
            origin["id"] == record["id"]
            and origin["user_id"] == "sarah"
            and origin["revision"] == record["hash"]
        )
    assert memories["Sarah is allergic to peanuts"].metadata["category"] == "health"
    assert memories["Sarah is allergic to peanuts"].fact_type == "constraint"
    assert (
        memories["Prefers oat-milk flat whites from Café Lüx"].metadata["imported"]["agent_id"]
        == "barista-bot"
    )
    assert "hunter2" not in json.dumps([m.text for m in memories.values()])  # deleted in mem0
    updated = memories["Sarah works at Acme Robotics as head of robotics"]  # its text after update()
    assert updated.last_used_at > updated.created_at


def test_a_bare_list_reads_like_results(tmp_path, monkeypatch):
    items = json.loads((FIXTURES / "mem0/get_all.json").read_text(encoding="utf-8"))["results"]
    path = tmp_path / "list.json"
    path.write_text(json.dumps(items), encoding="utf-8")
    result = run(monkeypatch, tmp_path / "data", "import", "--format", "mem0", str(path))
    assert result.exit_code == 0 and f"imported {len(items)} memories" in result.stderr


def test_graph_relations_become_facts(tmp_path, monkeypatch):
    document = json.loads((FIXTURES / "mem0/get_all.json").read_text(encoding="utf-8"))
    document["relations"] = [
        {"source": "sarah", "relationship": "works_at", "target": "acme_robotics"},
        {"source": "sarah", "relationship": "lives_in", "destination": "lisbon"},
    ]
    path = tmp_path / "graph.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    assert run(monkeypatch, tmp_path / "data", "import", "--format", "mem0", str(path)).exit_code == 0
    texts = {m.text for m in stored(tmp_path / "data").values()}
    assert {"sarah works at acme robotics", "sarah lives in lisbon"} <= texts


@needs_program
@pytest.mark.slow
def test_live_mem0_writes_a_file_we_import(tmp_path, monkeypatch):
    path = tmp_path / "get_all.json"
    write_mem0(path, mem0(), tmp_path / "store")
    fresh = {r["memory"] for r in json.loads(path.read_text(encoding="utf-8"))["results"]}
    committed = {r["memory"] for r in json.loads((FIXTURES / "mem0/get_all.json").read_text())["results"]}
    assert fresh == committed
    result = run(monkeypatch, tmp_path / "data", "import", "--format", "mem0", "--user", "sarah", str(path))
    assert result.exit_code == 0 and f"imported {len(fresh)} memories" in result.stderr
