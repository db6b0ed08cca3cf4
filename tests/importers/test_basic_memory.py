"""basic-memory: a folder of the notes its MCP server wrote (write_note, edit_note: peers.py)."""

from __future__ import annotations

import os
from datetime import UTC, datetime

import pytest

from .helpers import FIXTURES, copy_fixture, run, stored
from .peers import BASIC_MEMORY_NOTES, basic_memory, write_basic_memory

needs_program = pytest.mark.skipif(
    basic_memory() is None,
    reason="basic-memory is not installed (it needs Python >= 3.12.1): bash scripts/install_peers.sh --python",
)


def test_observations_relations_and_prose_become_facts_dated_by_their_note(tmp_path, monkeypatch):
    folder = copy_fixture("basic-memory", tmp_path)
    result = run(
        monkeypatch, tmp_path / "data", "import", "--format", "basic-memory", "--user", "sarah", str(folder)
    )
    assert result.exit_code == 0 and "imported 16 memories" in result.stderr, result.output
    memories = {m.text: m for m in stored(tmp_path / "data").values()}
    allergy = memories["Sarah Okafor: Allergic to peanuts (carries an epipen)"]
    assert allergy.fact_type == "constraint"  # its category said so
    assert allergy.metadata["imported"] == {
        "format": "basic-memory",
        "file": "Sarah Okafor.md",
        "note": "people/Sarah Okafor.md",
        "permalink": "main/people/sarah-okafor",
        "title": "Sarah Okafor",
        "note_type": "person",
        "category": "constraint",
    }
    home = memories["Sarah Okafor: Lives in Lisbon since 2024"]
    assert home.fact_type == "identity" and home.metadata["tags"] == ["home"]  # "#home" left the text
    assert memories["Acme Robotics: Headquartered in Porto"].fact_type == "world"  # [fact]
    assert "Sarah Okafor works at Acme Robotics" in memories
    assert "Team retro 2026-03-03 attended by Kenji Watanabe" in memories
    assert "Sarah Okafor: Robotics engineer; the notes' owner." in memories  # the prose
    assert "Sarah Okafor: Switched to decaf after 4 pm" in memories  # appended by edit_note
    note = folder / "people" / "Sarah Okafor.md"
    assert allergy.created_at == datetime.fromtimestamp(os.path.getmtime(note), UTC)
    again = run(
        monkeypatch, tmp_path / "data", "import", "--format", "basic-memory", "--user", "sarah", str(folder)
    )
    assert "imported 0 memories" in again.stderr and "16 already present" in again.stderr


def test_one_note_imports_alone_and_a_broken_one_names_itself(tmp_path, monkeypatch):
    note = FIXTURES / "basic-memory" / "orgs" / "Acme Robotics.md"
    result = run(monkeypatch, tmp_path / "data", "import", "--format", "basic-memory", str(note))
    assert result.exit_code == 0 and "imported 4 memories" in result.stderr
    folder = copy_fixture(
        "basic-memory", tmp_path / "copy" if (tmp_path / "copy").mkdir() is None else tmp_path
    )
    (folder / "orgs" / "Broken.md").write_text("---\ntitle: Broken\n# never closed\n", encoding="utf-8")
    result = run(monkeypatch, tmp_path / "data2", "import", "--format", "basic-memory", str(folder))
    assert (
        result.exit_code == 1
        and "orgs/Broken.md:1: front matter opened with --- is never closed" in result.output
    )
    assert stored(tmp_path / "data2") == {}


@needs_program
@pytest.mark.slow
async def test_live_basic_memory_writes_notes_we_import(tmp_path, monkeypatch):
    folder = await write_basic_memory(tmp_path / "home", basic_memory())
    for relative in ("people/Sarah Okafor.md", "orgs/Acme Robotics.md", "meetings/Team retro 2026-03-03.md"):
        assert (folder / relative).read_text(encoding="utf-8") == (
            FIXTURES / "basic-memory" / relative
        ).read_text(encoding="utf-8")
    result = run(
        monkeypatch, tmp_path / "data", "import", "--format", "basic-memory", "--user", "sarah", str(folder)
    )
    assert result.exit_code == 0 and "imported 16 memories" in result.stderr, result.output
    assert len(BASIC_MEMORY_NOTES) == 3
