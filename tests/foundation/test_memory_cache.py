"""Recall reuses the memories it decoded, and never shows one as it was before a change.

Two services on one SQLite file stand for two server processes on one data directory: each
has its own connection and its own caches, as separate processes do.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from atlas_mcp.domain.model import Memory, MemoryType
from atlas_mcp.engines.embedded import preload as preload_module
from atlas_mcp.engines.embedded import query_vectors
from atlas_mcp.engines.embedded import store as store_module
from atlas_mcp.engines.embedded.engine import EmbeddedEngine
from atlas_mcp.engines.embedded.memory_cache import MemoryCache
from atlas_mcp.engines.embedded.versions import Change, Stamp
from atlas_mcp.inference.embedder import default_embedder
from atlas_mcp.service import MemoryService

USER = "ines"


@pytest.fixture
def pair(tmp_path: Path):
    path = tmp_path / "atlas.db"
    first = MemoryService(EmbeddedEngine(path, default_embedder()))
    second = MemoryService(EmbeddedEngine(path, default_embedder()))
    yield first, second
    first.close()
    second.close()


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many rows recall read from SQLite, per call of the row reader."""
    counted: list[int] = []
    read = store_module.read_memories

    def counting(conn, owner, ids):
        counted.append(len(ids))
        return read(conn, owner, ids)

    monkeypatch.setattr(store_module, "read_memories", counting)
    return counted


def _hit(service: MemoryService, query: str, memory_id: str, **options) -> Memory:
    found = {h.memory.id: h.memory for h in service.recall(USER, query, **options)}
    assert memory_id in found, f"{memory_id} not recalled for {query!r}"
    return found[memory_id]


def test_a_second_recall_reads_no_rows_and_sees_its_own_use_updates(pair, reads):
    service, _ = pair
    fact = service.write(USER, "Ines's dentist is Dr. Moreau on Rue Oberkampf")
    service.write(USER, "Ines prefers window seats on trains")
    first = _hit(service, "who is my dentist", fact.id)
    assert reads and sum(reads) >= 2
    reads.clear()
    second = _hit(service, "who is my dentist", fact.id)
    assert reads == []  # every candidate came from the cache
    assert second.use_count == first.use_count + 1  # the first recall's use, applied in place
    assert second == service.get(USER, fact.id)  # the cache holds what the row holds


def test_another_process_touching_a_memory_is_seen(pair):
    mine, other = pair
    fact = mine.write(USER, "Ines's bike is a green Brompton")
    before = _hit(mine, "what colour is my Brompton bike", fact.id, touch=False)
    for _ in range(3):
        _hit(other, "what colour is my Brompton bike", fact.id)
    after = _hit(mine, "what colour is my Brompton bike", fact.id, touch=False)
    assert after == other.get(USER, fact.id)
    assert after.use_count == before.use_count + 3
    assert after.last_used_at is not None


def test_another_process_superseding_a_fact_is_seen(pair):
    mine, other = pair
    old = mine.write(USER, "Ines lives in Lyon")
    _hit(mine, "where do I live", old.id)
    new = other.write(USER, "Ines lives in Nantes now", supersedes_id=old.id)
    ids = [h.memory.id for h in mine.recall(USER, "where do I live")]
    assert new.id in ids and old.id not in ids
    audited = _hit(mine, "where do I live", old.id, include_superseded=True)
    assert audited.superseded_by == new.id


def _updated_then_forgotten_is_seen(reader: MemoryService, changer: MemoryService) -> None:
    playbook = reader.write(
        USER, "Reset the Halo Hub when it drops off Wi-Fi", "procedural", steps=["Hold the button for 10 s"]
    )
    _hit(reader, "reset the hub", playbook.id)  # now cached by the reader
    changer.record_outcome(USER, changer.get(USER, playbook.id), True, datetime.now(UTC))
    assert _hit(reader, "reset the hub", playbook.id).success_count == 1
    changer.forget(USER, playbook.id)
    assert playbook.id not in [h.memory.id for h in reader.recall(USER, "reset the hub")]


def test_another_process_updating_or_forgetting_a_memory_is_seen(pair):
    mine, other = pair
    _updated_then_forgotten_is_seen(mine, other)


def test_use_updates_apply_only_to_the_stamp_they_were_read_at():
    cache = MemoryCache(capacity=10)
    memory = Memory(
        id="m1", memory_type=MemoryType.SEMANTIC, user_id=USER, text="x", created_at=datetime.now(UTC)
    )
    cache.put(USER, Stamp(3, 7), [memory])
    late = Change(USER, Stamp(3, 6), Stamp(3, 7))  # something else happened since: ignored
    cache.record_use(late, ["m1"], datetime.now(UTC))
    assert cache.get(USER, Stamp(3, 8), ["m1"]) == {}  # and a newer stamp drops the entry
    cache.put(USER, Stamp(3, 8), [memory])
    at = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
    cache.record_use(
        Change(USER, Stamp(3, 8), Stamp(3, 9)), ["m1", "m1"], at
    )  # an id twice is one use, as in SQL
    assert cache.get(USER, Stamp(3, 9), ["m1"])["m1"].use_count == 1
    assert cache.get(USER, Stamp(3, 9), ["m1"])["m1"].last_used_at == at


def test_the_cache_keeps_at_most_its_capacity():
    cache = MemoryCache(capacity=3)
    now = datetime.now(UTC)
    memories = [
        Memory(id=f"m{i}", memory_type=MemoryType.EPISODIC, user_id=USER, text="x", created_at=now)
        for i in range(5)
    ]
    cache.put(USER, (1, 0), memories)
    assert len(cache) == 3
    assert set(cache.get(USER, (1, 0), [m.id for m in memories])) == {"m2", "m3", "m4"}


def test_the_order_of_use_is_kept_once_the_cache_is_nearly_full():
    """What goes first when the cache is full is the least recently used, counted from 90% full
    on: below that nothing goes soon, and a recall does not reorder its ~300 entries."""
    cache = MemoryCache(capacity=10)
    now = datetime.now(UTC)
    memories = [
        Memory(id=f"m{i}", memory_type=MemoryType.EPISODIC, user_id=USER, text="x", created_at=now)
        for i in range(11)
    ]
    cache.put(USER, (1, 0), memories[:3])
    assert set(cache.get(USER, (1, 0), ["m0"])) == {"m0"}  # 3 of 10: no reordering
    cache.put(USER, (1, 0), memories[3:10])
    assert set(cache.get(USER, (1, 0), ["m1"])) == {"m1"}  # full: m1 is now the most recent
    cache.put(USER, (1, 0), memories[10:])
    kept = set(cache.get(USER, (1, 0), [m.id for m in memories]))
    assert kept == {m.id for m in memories} - {"m0"}  # m0 went first, m1 stayed


def test_an_agent_writing_between_recalls_keeps_the_cache(pair, reads):
    service, _ = pair
    for n in range(20):
        service.write(USER, f"Ines noted chore number {n}: water the ferns on the balcony")
    service.recall(USER, "what chores are there", k=25)
    reads.clear()
    new = service.write(USER, "Ines noted one more chore: descale the kettle")
    hits = service.recall(USER, "what chores are there", k=25)  # waits for the new row's vector
    assert sum(reads) == 1  # only the new memory was read; the other 20 stayed decoded
    assert new.id in {h.memory.id for h in hits}


def test_own_supersede_update_and_forget_are_seen_through_the_cache(pair):
    service, _ = pair
    old = service.write(USER, "Ines works at the bakery on Rue Oberkampf")
    _hit(service, "where do I work", old.id)
    new = service.write(USER, "Ines works at the library now", supersedes_id=old.id)
    assert old.id not in [h.memory.id for h in service.recall(USER, "where do I work")]
    assert _hit(service, "where do I work", old.id, include_superseded=True).superseded_by == new.id
    _updated_then_forgotten_is_seen(service, service)


def test_ranking_facts_are_worked_out_once_per_memory_and_follow_its_text(monkeypatch):
    from atlas_mcp.engines.embedded import memory_cache

    worked: list[str] = []
    real = memory_cache.row_facts

    def counting(memory: Memory):
        worked.append(memory.id)
        return real(memory)

    monkeypatch.setattr(memory_cache, "row_facts", counting)
    cache = MemoryCache(capacity=10)
    now = datetime.now(UTC)
    memory = Memory(
        id="m1", memory_type=MemoryType.EPISODIC, user_id=USER, text="Tom: the dentist is on Friday",
        created_at=now, occurred_at=now,
    )  # fmt: skip
    cache.put(USER, Stamp(1, 0), [memory])
    first = cache.facts([memory])[0]
    assert first == real(memory) and first.speaker == "Tom"
    used = memory.evolve(use_count=3, last_used_at=now)  # a use changes no ranking fact
    assert cache.facts([used]) == [first] and worked == ["m1"]
    edited = memory.evolve(text="Anna: the dentist moved to Monday")
    assert cache.facts([edited])[0].speaker == "Anna" and worked == ["m1", "m1"]
    cache.advance(Change(USER, Stamp(1, 0), Stamp(2, 0)), dropped=["m1"])
    stranger = Memory(id="m2", memory_type=MemoryType.SEMANTIC, user_id=USER, text="x", created_at=now)
    cache.facts([stranger])  # not cached: worked out, not kept
    cache.facts([stranger])
    assert worked.count("m2") == 2


def test_a_recall_of_the_same_words_reuses_the_query_vector(pair, monkeypatch):
    service, _ = pair
    service.write(USER, "Ines's dentist is Dr. Moreau on Rue Oberkampf")
    embedded: list[str] = []
    real = query_vectors.embed_query

    def counting(embedder, text):
        embedded.append(text)
        return real(embedder, text)

    monkeypatch.setattr(query_vectors, "embed_query", counting)
    first = [h.memory.id for h in service.recall(USER, "who is my dentist", touch=False)]
    asked = len(embedded)
    again = [h.memory.id for h in service.recall(USER, "who is my dentist", touch=False)]
    assert again == first and asked >= 1 and len(embedded) == asked
    service.recall(USER, "where is the dentist", touch=False)
    assert embedded.count("where is the dentist") == 1


def test_a_start_decodes_the_memories_and_their_facts_once_so_recall_works_out_none(pair, reads, monkeypatch):
    """``preload`` (what ``serve`` runs after its warm-up) decodes the user's memories into the cache with
    their ranking facts when all fit: a recall then reads no row and works out no facts, and
    ranks exactly as a process that did not preload; a store too big for the cache is left
    to recall."""
    from atlas_mcp.engines.embedded import memory_cache

    service, other = pair
    written = [
        service.write(USER, f"Ines went to the {place} on a Sunday") for place in ("zoo", "lake", "market")
    ]
    cold = [
        (h.memory.id, h.score, h.relevance)
        for h in other.recall(USER, "where did I go on Sunday", touch=False)
    ]
    fresh = MemoryService(EmbeddedEngine(service._engine.path, default_embedder()))
    try:
        fresh.warm(USER)
        fresh.preload(USER, after_first_recall=False)
        assert sum(reads) >= len(written)
        reads.clear()
        worked: list[str] = []
        real = memory_cache.row_facts
        monkeypatch.setattr(memory_cache, "row_facts", lambda m: worked.append(m.id) or real(m))
        warm = [
            (h.memory.id, h.score, h.relevance)
            for h in fresh.recall(USER, "where did I go on Sunday", touch=False)
        ]
        assert warm == cold and reads == [] and worked == []
    finally:
        fresh.close()
    small = MemoryService(EmbeddedEngine(service._engine.path, default_embedder()))
    try:
        small._engine._memories = small._engine.search._memories = MemoryCache(capacity=2)
        assert small._engine.search.preload(USER) == 0
    finally:
        small.close()


def test_a_server_stopping_while_it_preloads_stops_the_preload_quietly(tmp_path, monkeypatch):
    """``preload`` runs in serve's warm-up thread: a server that stops meanwhile (its store
    closed between two chunks) ends it without an error."""
    writer = MemoryService(EmbeddedEngine(tmp_path / "atlas.db", default_embedder()))
    for place in ("zoo", "lake", "market"):
        writer.write(USER, f"Ines went to the {place} on a Sunday")
    writer.close()
    service = MemoryService(EmbeddedEngine(tmp_path / "atlas.db", default_embedder()))
    search = service._engine.search
    monkeypatch.setattr(preload_module, "PRELOAD_CHUNK", 1)
    real_facts = search._memories.facts
    closed: list[bool] = []

    def facts_then_close(memories):
        if not closed:
            closed.append(True)
            service.close()  # the server stops after the first chunk
        return real_facts(memories)

    monkeypatch.setattr(search._memories, "facts", facts_then_close)
    assert search.preload(USER) == 1
    assert search.preload(USER) == 0


def test_serve_preloads_only_once_a_first_recall_is_answered(tmp_path, reads):
    """A start is not slowed: the preload serve's warm-up thread asks for waits until the
    process has answered a recall, then reads the memories; a server stopping meanwhile ends
    the wait."""
    import threading

    writer = MemoryService(EmbeddedEngine(tmp_path / "atlas.db", default_embedder()))
    writer.write(USER, "Ines went to the zoo on a Sunday")
    writer.close()
    service = MemoryService(EmbeddedEngine(tmp_path / "atlas.db", default_embedder()))
    read: list[int] = []
    waiting = threading.Thread(target=lambda: read.append(service._engine.search.preload(USER, True)))
    waiting.start()
    waiting.join(0.3)
    assert waiting.is_alive() and reads == []  # still waiting: nothing read
    service.recall(USER, "where did I go", touch=False)
    waiting.join(5)
    assert not waiting.is_alive() and read == [0]  # the recall had read the only memory
    stopped = threading.Thread(target=lambda: read.append(service._engine.search.preload(USER, True)))
    service._engine.search.recalls.answered.clear()
    stopped.start()
    service.close()
    stopped.join(5)
    assert not stopped.is_alive() and read == [0, 0]


def test_a_use_keeps_a_memorys_facts_with_the_memory_it_made(pair, monkeypatch):
    """A recall's use evolves the cached memory (its use count) and its kept ranking facts move
    to the new memory with it: the next recall finds them by identity, comparing nothing and
    working out nothing."""
    from atlas_mcp.engines.embedded import memory_cache

    service, _ = pair
    fact = service.write(USER, "Ines's dentist is Dr. Moreau on Rue Oberkampf")
    before = _hit(service, "who is my dentist", fact.id, touch=False)  # its facts worked out
    _hit(service, "who is my dentist", fact.id)  # and its use recorded: a new cached memory
    used = _hit(service, "who is my dentist", fact.id, touch=False)
    assert used.use_count == before.use_count + 1

    def fail(*_):
        raise AssertionError("facts compared or worked out again")

    monkeypatch.setattr(memory_cache, "_same_text_and_dates", fail)
    monkeypatch.setattr(memory_cache, "row_facts", fail)
    assert _hit(service, "who is my dentist", fact.id, touch=False).use_count == used.use_count


def test_entries_found_by_row_follow_every_change_to_them():
    """``found_rows`` reads a row's entry by position where it found it before: a use, a
    rewrite, a drop, facts made later, an eviction, another index or rows added must each be
    seen, as ``found`` by id sees them."""
    from atlas_mcp.engines.embedded.index import OwnerIndex

    now = datetime.now(UTC)
    memories = [
        Memory(id=f"m{i}", memory_type=MemoryType.SEMANTIC, user_id=USER, text=f"fact {i}", created_at=now)
        for i in range(4)
    ]
    index = OwnerIndex(4, capacity=8)
    index.fill([(i + 1, m.id, "semantic", 0) for i, m in enumerate(memories[:3])])
    cache = MemoryCache(capacity=100)
    stamp = Stamp(1, 0)
    cache.put(USER, stamp, memories[:3])

    def rows(at: Stamp, of: OwnerIndex = index, wanted: tuple[int, ...] = (2, 0, 1)) -> list[Memory | None]:
        found = cache.found_rows(USER, at, of, list(wanted))
        assert found == cache.found(USER, at, [of.ids[r] for r in wanted])  # the same entries as by id
        return [None if e is None else e[1] for e in found]

    assert rows(stamp) == [memories[2], memories[0], memories[1]]
    cache.record_use(Change(USER, stamp, Stamp(1, 1)), ["m0"], now)
    stamp = Stamp(1, 1)
    assert rows(stamp)[1].use_count == 1  # the use is seen, not the row's entry of before
    rewritten = memories[2].evolve(text="fact 2, rewritten")
    cache.put(USER, stamp, [rewritten])
    assert rows(stamp)[0] is rewritten
    cache.advance(Change(USER, stamp, Stamp(2, 1)), dropped=["m1"])
    stamp = Stamp(2, 1)
    assert rows(stamp)[2] is None
    index.append_pending(4, "m3", "semantic", ("", ""))  # this process wrote a row
    cache.put(USER, stamp, [memories[3]])
    assert rows(stamp, wanted=(3, 0)) == [memories[3], rows(stamp)[1]]
    moved = OwnerIndex(4, capacity=8)  # a reload: other rows in other places
    moved.fill([(4, "m3", "semantic", 0), (1, "m0", "semantic", 0)])
    assert [m.id for m in rows(stamp, moved, (0, 1)) if m] == ["m3", "m0"]
    assert rows(Stamp(3, 1), moved, (0, 1)) == [None, None]  # another process's change


def test_entries_found_by_row_see_an_eviction_and_facts_made_later():
    from atlas_mcp.engines.embedded.index import OwnerIndex

    now = datetime.now(UTC)
    memories = [
        Memory(
            id=f"m{i}", memory_type=MemoryType.EPISODIC, user_id=USER, text=f"Ana: turn {i}", created_at=now
        )
        for i in range(12)
    ]
    index = OwnerIndex(4, capacity=16)
    index.fill([(i + 1, m.id, "episodic", 0) for i, m in enumerate(memories)])
    cache = MemoryCache(capacity=40)  # below 90% full: rows are read by position
    cache.put(USER, (1, 0), memories[:2])
    first = cache.found_rows(USER, (1, 0), index, [0, 1])
    assert first[0] is not None and first[0][2] is None  # no facts made yet
    cache.facts([memories[0]])
    again = cache.found_rows(USER, (1, 0), index, [0, 1])
    assert again[0] is not None and again[0][2] is not None  # the facts made since
    small = MemoryCache(capacity=100)
    small.put(USER, (1, 0), memories[:1])
    assert small.found_rows(USER, (1, 0), index, [0])[0] is not None
    small._capacity = 2  # shrunk so the next put pushes m0 out
    small.put(USER, (1, 0), memories[1:3])
    small._capacity = 100  # and back: far from full, rows are read by position again
    assert small.found_rows(USER, (1, 0), index, [0]) == [None]
