"""An import happens whole or not at all: a bad record anywhere writes nothing, and a failure
while writing (injected mid-way) takes back what the run had written, superseded values
included; the write rules of the tools apply to every record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from atlas_mcp.engines.embedded.engine import EmbeddedEngine
from atlas_mcp.errors import InvalidInput
from atlas_mcp.importers import apply, read_source
from atlas_mcp.inference.embedder import default_embedder
from atlas_mcp.service import MemoryService

from .helpers import FIXTURES, copy_fixture, run, stored


class DiskFull(OSError):
    pass


def _service(data: Path) -> MemoryService:
    return MemoryService(EmbeddedEngine(data / "atlas.db", default_embedder()))


def _mem0_file(tmp_path: Path, items: list[dict]) -> Path:
    path = tmp_path / "get_all.json"
    path.write_text(json.dumps({"results": items}), encoding="utf-8")
    return path


def _item(number: int, text: str, digest: str | None = None) -> dict:
    return {
        "id": f"id-{number}",
        "memory": text,
        "hash": digest or f"h{number}",
        "created_at": f"2026-01-0{number % 9 + 1}T10:00:00+00:00",
        "user_id": "someone-else",
    }


def test_a_failure_mid_way_leaves_the_store_as_it_was(tmp_path, monkeypatch):
    data = tmp_path / "data"
    service = _service(data)
    try:
        service.write("sarah", "Sarah already knows this", fact_type="identity")
        before = {m.id: m for m in service.list("sarah")}
        source = read_source("mcp-memory", copy_fixture("mcp-memory/memory.jsonl", tmp_path))
        planned = apply.plan(service, "sarah", source, "mcpm")
        real_store, calls = service.store, []

        def failing_store(prepared, **options):
            calls.append(prepared.memory.id)
            if len(calls) == 6:
                raise DiskFull("no space left on device")
            return real_store(prepared, **options)

        monkeypatch.setattr(service, "store", failing_store)
        with pytest.raises(DiskFull):
            apply.write(service, "sarah", planned)
        assert len(calls) == 6  # five were written before it failed
        monkeypatch.undo()
        assert {m.id: m for m in service.list("sarah")} == before
        outcome = apply.write(service, "sarah", apply.plan(service, "sarah", source, "mcpm"))
        assert outcome.added == 14 and outcome.present == 0  # and a rerun then imports it all
    finally:
        service.close()


def test_an_update_undone_puts_the_old_value_back(tmp_path, monkeypatch):
    """A record changed at the source supersedes what the last import wrote; if the run fails
    after that, the old value is current again, exactly as it was."""
    data = tmp_path / "data"
    first = _mem0_file(tmp_path, [_item(1, "Works at Acme"), _item(2, "Likes jazz")])
    assert run(monkeypatch, data, "import", "--format", "mem0", "--user", "sarah", str(first)).exit_code == 0
    before = stored(data)
    service = _service(data)
    try:
        changed = _mem0_file(
            tmp_path, [_item(1, "Works at Initech", "h1b"), _item(2, "Likes jazz"), _item(3, "Lives in Oslo")]
        )
        planned = apply.plan(service, "sarah", read_source("mem0", changed), "mem0")
        assert [p.present for p in planned] == [False, True, False]
        real_store = service.store

        def fail_after_the_update(prepared, **options):
            result = real_store(prepared, **options)
            if prepared.supersedes:
                raise DiskFull("no space left on device")
            return result

        monkeypatch.setattr(service, "store", fail_after_the_update)
        with pytest.raises(DiskFull):
            apply.write(service, "sarah", planned)
    finally:
        service.close()
    after = stored(data)
    assert set(after) == set(before)
    old = next(m for m in after.values() if m.text == "Works at Acme")
    assert old.superseded_by is None and old == before[old.id].evolve(use_count=old.use_count)


def test_an_update_at_the_source_supersedes_the_imported_value(tmp_path, monkeypatch):
    data = tmp_path / "data"
    first = _mem0_file(tmp_path, [_item(1, "Works at Acme")])
    run(monkeypatch, data, "import", "--format", "mem0", "--user", "sarah", str(first))
    changed = _mem0_file(tmp_path, [_item(1, "Works at Initech", "h1b")])
    result = run(monkeypatch, data, "import", "--format", "mem0", "--user", "sarah", str(changed))
    assert result.exit_code == 0 and "imported 1 memories" in result.stderr
    memories = {m.text: m for m in stored(data).values()}
    assert memories["Works at Acme"].superseded_by == memories["Works at Initech"].id
    assert memories["Works at Initech"].supersedes == (memories["Works at Acme"].id,)
    again = run(monkeypatch, data, "import", "--format", "mem0", "--user", "sarah", str(changed))
    assert "imported 0 memories" in again.stderr and "1 already present" in again.stderr


@pytest.mark.parametrize(
    ("fmt", "make", "named"),
    [
        (
            "mem0",
            lambda tmp: _mem0_file(tmp, [_item(1, "fine"), {"id": "x", "memory": ""}, _item(3, "fine too")]),
            "get_all.json: results[1]: has no memory text",
        ),
        (
            "mem0",
            lambda tmp: _mem0_file(tmp, [_item(1, "fine"), _item(2, "x") | {"created_at": "last tuesday"}]),
            "results[1]: created_at 'last tuesday' is not an ISO-8601 date",
        ),
        (
            "mcp-memory-service",
            lambda tmp: _mms_export(tmp, {"content": "broken", "content_hash": "abc", "created_at": None}),
            "export.json: memories[6]: has no created_at",
        ),
        (
            "markdown",
            lambda tmp: _write(tmp, "CLAUDE.md", "# Me\n- fine\n\n```\nnever closed\n"),
            "CLAUDE.md:4: a code block is opened here and never closed",
        ),
        (
            "text",
            lambda tmp: _write(tmp, "memories.txt", "fine\n" + "x" * 32_001 + "\nfine too\n"),
            "memories.txt:2: text is 32001 characters; the limit is 32000",
        ),
        (
            "mem0",
            lambda tmp: _mem0_file(
                tmp, [_item(1, "fine"), _item(2, "x") | {"metadata": {"blob": "y" * 20_000}}]
            ),
            "results[1]: metadata is larger than 16384 bytes",
        ),
    ],
)
def test_a_bad_record_anywhere_names_itself_and_writes_nothing(tmp_path, monkeypatch, fmt, make, named):
    path = make(tmp_path)
    result = run(monkeypatch, tmp_path / "data", "import", "--format", fmt, str(path))
    assert result.exit_code == 1, result.output
    assert named in result.output and "nothing imported" in result.output
    assert "Traceback" not in result.output
    assert stored(tmp_path / "data") == {}


def _write(tmp: Path, name: str, text: str) -> Path:
    path = tmp / name
    path.write_text(text, encoding="utf-8")
    return path


def _mms_export(tmp: Path, extra: dict) -> Path:
    document = json.loads((FIXTURES / "mcp-memory-service/export.json").read_text(encoding="utf-8"))
    document["memories"].append(extra)
    return _write(tmp, "export.json", json.dumps(document))


def test_the_write_rules_of_the_tools_apply(tmp_path):
    """Limits come from the service's settings, as for a tool's write."""
    from atlas_mcp.domain.limits import Limits

    service = MemoryService(
        EmbeddedEngine(tmp_path / "atlas.db", default_embedder()), limits=Limits(max_text_chars=20)
    )
    try:
        source = read_source("text", _write(tmp_path, "m.txt", "short\nthis line is longer than twenty\n"))
        with pytest.raises(InvalidInput, match=r"m.txt:2: text is 31 characters; the limit is 20"):
            apply.plan(service, "sarah", source, "txt")
    finally:
        service.close()


def test_files_of_the_wrong_kind_say_so(tmp_path, monkeypatch):
    cases = {
        "mem0": ('{"entities": []}', "not a mem0 get_all() result"),
        "mcp-memory-service": ('{"results": []}', "not an mcp-memory-service export"),
        "text": (b"\x89PNG\r\n\x1a\n\x00\x00", "is not UTF-8 text"),
    }
    for fmt, (content, why) in cases.items():
        path = tmp_path / f"wrong-{fmt}"
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
        result = run(monkeypatch, tmp_path / "data", "import", "--format", fmt, str(path))
        assert result.exit_code == 1 and why in result.output, (fmt, result.output)
    empty = _write(tmp_path, "empty.md", "# nothing here\n")
    result = run(monkeypatch, tmp_path / "data", "import", "--format", "markdown", str(empty))
    assert result.exit_code == 1 and "found no memories in" in result.output
    own = run(monkeypatch, tmp_path / "data", "import", "--user", "x", str(empty))
    assert own.exit_code == 2 and "--user is for other programs' files" in own.output


def test_the_users_own_correction_outranks_a_later_change_at_the_source(tmp_path, monkeypatch):
    data = tmp_path / "data"
    run(
        monkeypatch,
        data,
        "import",
        "--format",
        "mem0",
        "--user",
        "sarah",
        str(_mem0_file(tmp_path, [_item(1, "Works at Acme")])),
    )
    service = _service(data)
    try:
        imported = service.list("sarah")[0]
        service.write("sarah", "Works at Globex now", supersedes_id=imported.id)  # through the tool's path
    finally:
        service.close()
    changed = _mem0_file(tmp_path, [_item(1, "Works at Initech", "h1b")])
    result = run(monkeypatch, data, "import", "--format", "mem0", "--user", "sarah", str(changed))
    assert "imported 0 memories" in result.stderr and "1 already present" in result.stderr
    live = [m.text for m in stored(data).values() if not m.superseded_by]
    assert live == ["Works at Globex now"]


def test_a_record_twice_in_one_file_is_one_memory(tmp_path, monkeypatch):
    note = _write(
        tmp_path, "Sarah.md", "---\ntitle: Sarah\n---\n- [fact] Likes jazz\n\n- [fact] Likes jazz\n"
    )
    result = run(monkeypatch, tmp_path / "data", "import", "--format", "basic-memory", str(note))
    assert result.exit_code == 0 and "imported 1 memories" in result.stderr, result.output
