"""Each row's coverage (the words recall ranks it by) is kept beside it: written with the row,
read with it instead of worked out, filled in the background for rows written before, never
out of date, and never readable in an encrypted store's files."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from atlas_mcp.domain import pool
from atlas_mcp.domain.model import MemoryType
from atlas_mcp.engines.embedded import coverage as coverage_module
from atlas_mcp.engines.embedded.cipher import StoreKey
from atlas_mcp.engines.embedded.engine import EmbeddedEngine
from atlas_mcp.engines.embedded.preload import RecallClock
from atlas_mcp.engines.embedded.rows import read_coverage, stored_coverage
from atlas_mcp.inference.embedder import default_embedder
from atlas_mcp.service import MemoryService

USER = "ines"
TEXTS = [
    ("semantic", "Ines's dentist is Dr. Moreau on Rue Oberkampf"),
    ("episodic", "Ines: we went camping near the lakes and researched the trails"),
    ("episodic", "Marco: I'm researching cameras for the trip, any tips?"),
    ("semantic", "Ines prefers window seats on trains"),
    ("semantic", "Ines wohnt seit März in der Schönhauser Allee"),
    ("semantic", "Ines 上周在东京买了一台相机"),
    ("procedural", "Reset the Halo Hub when it drops off Wi-Fi"),
]
QUERIES = ["who is my dentist", "camping trip", "research", "where does Ines live", "相机", "reset the hub"]
AT = datetime(2026, 12, 5, 12, tzinfo=UTC)


def _service(path: Path, key: StoreKey | None = None) -> MemoryService:
    service = MemoryService(EmbeddedEngine(path, default_embedder(), key=key))
    service.clock = lambda: AT
    return service


def _write_all(service: MemoryService) -> None:
    for kind, text in TEXTS:
        options = {"steps": ["Hold the button for 10 s"]} if kind == "procedural" else {}
        service.write(USER, text, kind, **options)


def _recalls(service: MemoryService) -> list[list[tuple[str, float, float]]]:
    return [
        [(h.memory.id, h.score, h.relevance) for h in service.recall(USER, q, min_relevance=0.0, touch=False)]
        for q in QUERIES
    ]


def _recalls_reopened(path: Path) -> list[list[tuple[str, float, float]]]:
    """``_recalls`` of a service opened on ``path`` for them alone."""
    service = _service(path)
    try:
        return _recalls(service)
    finally:
        service.close()


def _entries(path: Path) -> dict[str, str]:
    with sqlite3.connect(path) as conn:
        found = conn.execute(
            "SELECT m.search_text, c.words FROM row_coverage c JOIN memories m ON m.rowid = c.rowid"
        ).fetchall()
    return dict(found)


def _sql(path: Path, statement: str, *args: object) -> None:
    with sqlite3.connect(path) as conn:  # as an older atlas-mcp, or the sqlite3 shell, would
        conn.execute(statement, args)


@pytest.fixture
def worked_out(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The texts whose coverage ranking worked out (instead of reading it)."""
    texts: list[str] = []
    original = pool.coverage

    def counting(search_text: str) -> frozenset[str]:
        texts.append(search_text)
        return original(search_text)

    monkeypatch.setattr(pool, "coverage", counting)
    return texts


@pytest.fixture
def written(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "atlas.db"
    service = _service(path)
    _write_all(service)
    service.close()
    yield path


def test_a_write_keeps_its_rows_coverage(written: Path):
    entries = _entries(written)
    with sqlite3.connect(written) as conn:
        texts = [t for (t,) in conn.execute("SELECT search_text FROM memories")]
    assert sorted(entries) == sorted(texts)
    for text, words in entries.items():
        assert read_coverage(words) == pool.coverage(text)
    (camping,) = [words for text, words in entries.items() if text.endswith(TEXTS[1][1])]
    assert {"camp", "research", "lake"} <= read_coverage(camping)  # stems, plurals


def test_recall_reads_the_kept_words_instead_of_working_them_out(written: Path, worked_out: list[str]):
    service = _service(written)  # a new process: nothing cached
    try:
        found = _recalls(service)
    finally:
        service.close()
    assert any(found)
    assert worked_out == []


def test_rows_written_before_rank_the_same_and_are_filled(written: Path, worked_out: list[str]):
    before = _recalls_reopened(written)
    _sql(written, "DELETE FROM row_coverage")  # as a store written before the table was
    worked_out.clear()
    service = _service(written)
    try:
        assert _recalls(service) == before  # worked out at the read, as before
        assert worked_out
        assert service._engine.search.preload(USER) >= 0
    finally:
        service.close()
    assert len(_entries(written)) == len(TEXTS)
    worked_out.clear()
    assert _recalls_reopened(written) == before
    assert worked_out == []


def test_an_older_version_changing_a_row_drops_its_entry(written: Path):
    dentist, seats = TEXTS[0][1], TEXTS[3][1]
    _sql(written, "UPDATE memories SET use_count = use_count + 1, search_text = search_text")
    assert len(_entries(written)) == len(TEXTS)  # the same text: the entry holds
    _sql(
        written, "UPDATE memories SET search_text = 'Ines sees Dr. Petit now' WHERE search_text = ?", dentist
    )
    _sql(written, "DELETE FROM memories WHERE search_text = ?", seats)
    entries = _entries(written)
    assert len(entries) == len(TEXTS) - 2 and dentist not in entries and seats not in entries
    with sqlite3.connect(written) as conn:
        assert conn.execute("SELECT count(*) FROM row_coverage").fetchone()[0] == len(TEXTS) - 2


def test_this_version_rewriting_a_text_keeps_the_new_words(written: Path):
    service = _service(written)
    try:
        (playbook,) = [m for m in service.list(USER) if m.memory_type is MemoryType.PROCEDURAL]
        rewritten = playbook.evolve(text="Reboot the Halo Hub when its light blinks red")
        service._engine.update(USER, rewritten)
        service.load_catalog([{"id": "hub-faq", "title": "Halo Hub", "text": "Blinking lights explained"}])
        service.load_catalog(
            [{"id": "hub-faq", "title": "Halo Hub", "text": "Blinking red lights explained"}]
        )
    finally:
        service.close()
    entries = _entries(written)
    assert playbook.search_text() not in entries
    assert read_coverage(entries[rewritten.search_text()]) == pool.coverage(rewritten.search_text())
    assert "reboot" in read_coverage(entries[rewritten.search_text()])
    catalog = [t for t in entries if "Blinking" in t]
    assert catalog == ["Halo Hub\nBlinking red lights explained"]
    assert read_coverage(entries[catalog[0]]) == pool.coverage(catalog[0])


def test_words_kept_under_other_rules_are_worked_out_again(written: Path, worked_out: list[str]):
    before = _recalls_reopened(written)
    _sql(written, "UPDATE row_coverage SET words = 'c0 zzz'")
    worked_out.clear()
    assert _recalls_reopened(written) == before
    assert worked_out
    # The fill replaces them with this version's, so the next start works nothing out.
    engine = EmbeddedEngine(written, default_embedder())
    try:
        assert coverage_module.fill(engine.store, RecallClock()) == len(TEXTS)
    finally:
        engine.close()
    entries = _entries(written)
    assert all(read_coverage(words) == pool.coverage(text) for text, words in entries.items())
    worked_out.clear()
    assert _recalls_reopened(written) == before
    assert worked_out == []


def test_a_fill_stopped_half_way_keeps_whole_chunks_and_the_next_one_finishes(
    written: Path, monkeypatch: pytest.MonkeyPatch
):
    _sql(written, "DELETE FROM row_coverage")
    engine = EmbeddedEngine(written, default_embedder())
    clock = RecallClock()
    calls: list[str] = []

    def stopping_after_five(search_text: str) -> str | None:
        calls.append(search_text)
        if len(calls) == 5:
            clock.closing.set()  # the server stops while the third chunk is worked out
        return stored_coverage(search_text)

    try:
        monkeypatch.setattr(coverage_module, "stored_coverage", stopping_after_five)
        assert coverage_module.fill(engine.store, clock, chunk=2) == 6  # three whole chunks
        assert len(_entries(written)) == 6
        assert coverage_module.fill(engine.store, RecallClock(), chunk=2) == 1
        assert coverage_module.fill(engine.store, RecallClock(), chunk=2) == 0
    finally:
        engine.close()
    entries = _entries(written)
    assert len(entries) == len(TEXTS)
    assert all(read_coverage(words) == pool.coverage(text) for text, words in entries.items())


def test_an_encrypted_store_keeps_the_words_unreadable(tmp_path: Path):
    pytest.importorskip("sqlcipher3")
    path, word = tmp_path / "atlas.db", "zanzibarquux"
    service = _service(path, StoreKey("5e" * 32))
    try:
        service.write(USER, f"Ines moored the {word.capitalize()} at berth 4")
        assert service.recall(USER, f"where is the {word}", touch=False)
    finally:
        service.close()
    for file in tmp_path.rglob("*"):
        if file.is_file():
            assert word.encode() not in file.read_bytes().lower(), file


# What ``coverage`` gives today. Stores keep these words; a change to the rules that changes
# any of them must also change ``pool.COVERAGE_RULES``, or stores keep words recall no longer
# makes (then update this table too).
PINNED = {
    "Ines: we went camping near the lakes and researched the trails": "and camp camping ine lake near "
    "research researched the trail we went",
    "Ines wohnt seit März in der Schönhauser Allee": "alle allee der in ine marz märz schonhaus "
    "schönhauser seit wohnt",
    "María vive en Sevilla y trabaja en la universidad": "en la mar maría sevill sevilla trabaj trabaja "
    "univers universidad viv vive",
    "Ines est allée à Lyon pour les vacances": "allé allée est ine le les lyon pour vacanc vacance",
    "Ines 上周在东京买了一台相机": "ine 一 一台 上 上周 东 东京 买 买了 了 了一 京 京买 台 台相 周 周在 在 在东 机 相 相机",
    "김치를 좋아해요": "김치를 좋아해요",
}


@pytest.mark.parametrize("text", sorted(PINNED))
def test_the_rules_stores_keep_are_the_rules_recall_uses(text: str):
    assert sorted(pool.coverage(text)) == PINNED[text].split(), "changed coverage: bump COVERAGE_RULES"
    assert read_coverage(stored_coverage(text)) == pool.coverage(text)


def test_the_fill_finds_the_rows_without_an_entry_in_an_index_not_by_reading_every_row(written: Path):
    with sqlite3.connect(written) as conn:
        plan = " ".join(row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + coverage_module._MISSING))
        (rowid,) = conn.execute("SELECT rowid FROM memories ORDER BY rowid DESC LIMIT 1").fetchone()
        conn.execute("DELETE FROM row_coverage WHERE rowid = ?", (rowid,))
    assert "COVERING INDEX" in plan  # the rows' small index, not the rows (~4 KB each)
    engine = EmbeddedEngine(written, default_embedder())
    try:
        assert coverage_module.fill(engine.store, RecallClock()) == 1
    finally:
        engine.close()
    assert len(_entries(written)) == len(TEXTS)
