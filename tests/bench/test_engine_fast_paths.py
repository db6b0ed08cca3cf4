"""The embedded engine's fast paths return exactly what the straightforward paths return.

The vector cache applies this process's own writes in place instead of reloading; these tests
pin that a cache grown that way is identical to a fresh load, and that recall over it ranks
exactly as a fresh engine on the same file does.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from atlas_mcp.bench import corpus
from atlas_mcp.domain.model import Memory, MemoryType
from atlas_mcp.domain.ranking import RecallPlan
from atlas_mcp.domain.similarity import REFERENCE_BACKGROUND
from atlas_mcp.engines.embedded import dense, store, versions
from atlas_mcp.engines.embedded.dense import SpaceQuery, row_similarities, similarities, top_rows
from atlas_mcp.engines.embedded.engine import EmbeddedEngine
from atlas_mcp.engines.embedded.index import KEPT_ORDER_APPENDS, TYPE_CODES, IndexCache, OwnerIndex
from atlas_mcp.engines.embedded.keys import id_order, ids_of, row_keys
from atlas_mcp.engines.embedded.maintenance import synchronous, write_many
from atlas_mcp.engines.embedded.vectors import RowVectors
from atlas_mcp.inference.embedder import default_embedder
from atlas_mcp.service import MemoryService

USER = corpus.tenant_id(0)


def _fresh_cache(engine: EmbeddedEngine, owner: str):
    return IndexCache(engine.embedder.dimensions).get(engine.store.conn, owner)


def _assert_same(cached, fresh) -> None:
    assert cached.version == fresh.version
    assert cached.ids == fresh.ids
    assert cached.rowids == fresh.rowids
    assert np.array_equal(cached.codes, fresh.codes)
    assert np.array_equal(cached.superseded, fresh.superseded)
    assert np.array_equal(cached.vectors.matrix, fresh.vectors.matrix)
    assert np.array_equal(cached.vectors.ready, fresh.vectors.ready)
    assert np.array_equal(cached.vectors.spaces, fresh.vectors.spaces)
    vector = default_embedder().embed_batch(["a long meeting about the roadmap"])[0]
    query = {0: SpaceQuery(vector, REFERENCE_BACKGROUND)}  # one model: space 0
    assert np.array_equal(similarities(cached.vectors, query, 1), similarities(fresh.vectors, query, 1))


@contextmanager
def two_connections(
    tmp_path: Path,
) -> Iterator[tuple[EmbeddedEngine, MemoryService, MemoryService]]:
    """Two engines on one store, each with its own connection (as two processes have): the
    first, and both services. Both engines are closed at the end."""
    embedder = default_embedder()
    path = tmp_path / "atlas.db"
    first, second = EmbeddedEngine(path, embedder), EmbeddedEngine(path, embedder)
    try:
        yield first, MemoryService(first), MemoryService(second)
    finally:
        first.close()
        second.close()


def test_own_writes_update_the_cache_in_place_exactly(tmp_path):
    embedder = default_embedder()
    engine = EmbeddedEngine(tmp_path / "atlas.db", embedder)
    service = MemoryService(engine)
    try:
        write_many(engine, corpus.tenant_memories(0, corpus.specs(5, 40)))
        service.recall(USER, "warm the cache", touch=False)
        warm = engine._index._owners[USER]
        fact = service.write(USER, "Prefers window seats on long flights.")
        service.write(USER, "Prefers aisle seats now.", supersedes_id=fact.id)
        service.write(USER, "Flew to Osaka with Aiko.", "episodic")
        service.write(USER, "Reset the router", "procedural", steps=["Unplug it", "Wait ten seconds"])
        service.recall(USER, "seats", touch=False)
        cached = engine._index._owners[USER]
        assert cached is warm, "own writes must not force a reload"
        _assert_same(cached, _fresh_cache(engine, USER))
    finally:
        engine.close()


def test_recall_after_writes_ranks_like_a_fresh_engine(tmp_path):
    embedder = default_embedder()
    path = tmp_path / "atlas.db"
    engine = EmbeddedEngine(path, embedder)
    service = MemoryService(engine)
    try:
        write_many(engine, corpus.tenant_memories(0, corpus.specs(6, 120)))
        service.recall(USER, "warm", touch=False)
        previous = None
        for number, arguments in enumerate(corpus.new_writes(6, 12)):
            supersedes = previous if arguments["memory_type"] == "semantic" and number % 3 == 0 else None
            result = service.write(USER, **arguments, supersedes_id=supersedes)
            if arguments["memory_type"] == "semantic":
                previous = result.id
        reopened = MemoryService(EmbeddedEngine(path, embedder))
        try:
            for query in corpus.queries(6, 10):
                for superseded in (False, True):
                    mine = service.recall(USER, query, k=20, include_superseded=superseded, touch=False)
                    theirs = reopened.recall(USER, query, k=20, include_superseded=superseded, touch=False)
                    assert [h.memory.id for h in mine] == [h.memory.id for h in theirs]
                    # Same cosines and ranks; scores differ only by the decay clock between calls.
                    assert [h.explanation.dense_similarity for h in mine] == [
                        h.explanation.dense_similarity for h in theirs
                    ]
                    assert [h.score for h in mine] == pytest.approx([h.score for h in theirs], rel=1e-6)
        finally:
            reopened.close()
    finally:
        engine.close()


def test_another_process_write_still_reloads(tmp_path):
    with two_connections(tmp_path) as (first, one, two):
        one.write(USER, "Owns a green kayak.")
        one.recall(USER, "kayak", touch=False)
        written = two.write(USER, "Owns a red canoe.")
        one.write(USER, "Owns a blue paddle.")  # the cache is stale: this must not patch it
        hits = one.recall(USER, "red canoe", touch=False)
        assert written.id in [h.memory.id for h in hits]
        _assert_same(first._index._owners[USER], _fresh_cache(first, USER))


def test_lookup_by_many_ids_stays_scoped_to_the_caller(tmp_path):
    engine = EmbeddedEngine(tmp_path / "atlas.db", default_embedder())
    try:
        items = corpus.specs(8, 100)
        mine, theirs = corpus.tenant_memories(0, items), corpus.tenant_memories(1, items)
        write_many(engine, mine)
        write_many(engine, theirs)
        ids = [m.id for m in mine[:50]] + [m.id for m in theirs[:50]]
        found = engine.get(USER, ids, include_catalog=True)
        assert [m.id for m in found] == [m.id for m in mine[:50]]
        engine.touch(USER, ids, mine[0].created_at)
        counts = {m.id: m.use_count for m in engine.get(corpus.tenant_id(1), [m.id for m in theirs[:50]])}
        assert set(counts.values()) == {0}
    finally:
        engine.close()


def test_warm_loads_the_callers_and_the_catalogs_vectors(tmp_path):
    engine = EmbeddedEngine(tmp_path / "atlas.db", default_embedder())
    try:
        write_many(engine, corpus.tenant_memories(0, corpus.specs(9, 20)))
        write_many(engine, corpus.tenant_memories(1, corpus.specs(9, 20)))
        engine.warm(USER)
        assert set(engine._index._owners) == {USER, ""}
        _assert_same(engine._index._owners[USER], _fresh_cache(engine, USER))
    finally:
        engine.close()


def test_warm_rows_loads_a_small_store_at_once_and_leaves_a_large_one_to_warm(tmp_path, monkeypatch):
    """``serve`` loads a small store's caches before the MCP imports (``warm_rows``); a store
    over the bound is left to the background warm-up, so `initialize` never waits on it."""
    engine = EmbeddedEngine(tmp_path / "atlas.db", default_embedder())
    try:
        write_many(engine, corpus.tenant_memories(0, corpus.specs(9, 20)))
        write_many(engine, corpus.tenant_memories(1, corpus.specs(9, 20)))
        monkeypatch.setattr("atlas_mcp.engines.embedded.search.QUICK_LOAD_ROWS", 19)
        assert engine.warm_rows(USER) is False and engine._index._owners == {}
        monkeypatch.setattr("atlas_mcp.engines.embedded.search.QUICK_LOAD_ROWS", 20)
        assert engine.warm_rows(USER) is True
        assert set(engine._index._owners) == {USER, ""}  # the caller and the catalog, no one else
        _assert_same(engine._index._owners[USER], _fresh_cache(engine, USER))
        assert engine.warm_rows("nobody") is True  # an unknown user costs nothing and loads nothing
    finally:
        engine.close()


def test_a_changed_text_refreshes_its_cached_vector(tmp_path):
    """update() re-embeds in place (same rowid): the cache must not keep the old vector."""
    engine = EmbeddedEngine(tmp_path / "atlas.db", default_embedder())
    service = MemoryService(engine)
    try:
        written = service.write(USER, "Reset the router", "procedural", steps=["Unplug it"])
        service.recall(USER, "router", touch=False)
        memory = engine.get(USER, [written.id])[0]
        engine.update(USER, memory.evolve(text="Bake sourdough bread", name="Bake sourdough bread", steps=()))
        service.recall(USER, "bread", touch=False)
        _assert_same(engine._index._owners[USER], _fresh_cache(engine, USER))
    finally:
        engine.close()


def test_usage_statistics_skip_the_fsync_and_leave_the_store_durable(tmp_path, monkeypatch):
    """A use update commits under NORMAL; every write transaction after it, or outside any
    ``synchronous`` block, commits under FULL (the mode is set when a write begins, and only
    when it changes: two recalls' use updates in a row set it once)."""
    engine = EmbeddedEngine(tmp_path / "atlas.db", default_embedder())
    modes: list[int] = []
    count_uses = store.count_uses

    def counting(conn, *args):
        modes.append(conn.execute("PRAGMA synchronous").fetchone()[0])
        return count_uses(conn, *args)

    def mode_of_a_write() -> int:
        with engine.store.transaction() as tx:
            mode: int = tx.conn.execute("PRAGMA synchronous").fetchone()[0]
            return mode

    try:
        memories = corpus.tenant_memories(0, corpus.specs(10, 5))
        write_many(engine, memories)
        with synchronous(engine, "NORMAL"):
            assert mode_of_a_write() == 1
            with synchronous(engine, "FULL"):  # an inner block asks for its own commits only
                assert mode_of_a_write() == 2
            assert mode_of_a_write() == 1
        assert mode_of_a_write() == 2
        monkeypatch.setattr(store, "count_uses", counting)
        for _ in range(2):
            engine.touch(USER, [m.id for m in memories], memories[0].created_at)
        assert modes == [1, 1]  # NORMAL
        assert {m.use_count for m in engine.get(USER, [m.id for m in memories])} == {2}
        assert mode_of_a_write() == 2  # FULL again
        engine.touch(USER, [memories[0].id], memories[0].created_at)
        with engine.store.snapshot() as conn:  # a read commits nothing: the mode is left as it is
            assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1
        assert mode_of_a_write() == 2
        with pytest.raises(ValueError):
            synchronous(engine, "OFF").__enter__()
    finally:
        engine.close()


def test_the_rows_of_a_few_memories_read_as_the_whole_scan_reads_them():
    """The perspective step's cosines of a few memories (``row_similarities``) are the values
    the whole scan gives those rows, long memories' best passage included."""
    rng = np.random.default_rng(3)
    vectors = RowVectors(8)

    def unit(n: int) -> np.ndarray:
        v = rng.normal(size=(n, 8)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    for row in range(12):
        vectors.append_pending()
        if row != 4:  # row 4 is pending
            vectors.put_passages(row, unit(1 + row % 3), 0)
    vectors.put_passages(7, unit(1), 0)  # a long memory edited short: its extras dropped
    query = {0: SpaceQuery(unit(1)[0], REFERENCE_BACKGROUND)}
    whole = similarities(vectors, query, 1)
    for rows in ([1, 2, 5], [11, 0, 8, 7], [3], []):
        picked = np.array(rows, dtype=np.int64)
        assert row_similarities(vectors, picked, query[0]).tolist() == whole[picked].tolist()


def test_the_spaces_present_follow_every_change_to_the_rows():
    """``ready``, ``spaces_present``, ``all_ready`` and ``searchable`` are kept between changes; each change (a pending
    row, vectors put, a reload taking over rows in place or by copy) gives what a pass over
    the rows says."""
    rng = np.random.default_rng(3)

    def vectors(n: int) -> np.ndarray:
        return rng.standard_normal((n, 8)).astype(np.float32)

    def check(v: RowVectors) -> None:
        ready = np.array([v.has_vectors(row) for row in range(v.size)], dtype=bool)  # row by row
        assert v.ready.tolist() == ready.tolist() and not v.ready.flags.writeable
        assert v.spaces_present() == sorted(set(v.spaces[ready].tolist()))
        v.spaces_present().append(99)  # the caller's copy
        assert v.spaces_present() == sorted(set(v.spaces[ready].tolist()))
        assert v.all_ready() == bool(ready.all())
        for codes in ({2}, {2, 5}, {7}, {5, 7, 9}):
            for _ in range(2):  # the pass, then the kept answer
                searched = v.searchable(frozenset(codes))
                assert searched.tolist() == (ready & np.isin(v.spaces, list(codes))).tolist()
                assert not searched.flags.writeable
                spaces = v.searched_spaces(frozenset(codes))
                assert spaces.tolist() == np.where(searched, v.spaces, -1).tolist()

    v = RowVectors(8)
    check(v)
    for _ in range(3):
        v.append_pending()
        check(v)
    v.put_passages(0, vectors(1), 2)
    check(v)
    v.put_passages(1, vectors(3), 5)
    check(v)
    v.put([2], vectors(1), 7)
    check(v)
    v.put_passages(1, vectors(1), 2)
    check(v)
    moved = RowVectors(8, capacity=8)
    moved.size = 3
    moved.adopt(v, np.array([2, 0, 1]), np.array([True, True, False]), in_place=False)
    check(moved)
    kept = RowVectors(8, capacity=v.capacity)
    kept.size = 3
    kept.adopt(v, np.arange(3), np.array([True, False, True]), in_place=True)
    check(kept)


def test_the_ids_order_follows_appends_and_mixes_owners():
    """``OwnerIndex.id_order`` (what breaks fusion ties) is the ids' string order after each
    append, as worked out again from scratch; a reload holding the same ids keeps it, one
    holding others does not, one holding a few more after them extends it; keys of two owners
    are ordered by their ids compared."""
    rng = np.random.default_rng(5)

    def made(ids: list[str]) -> OwnerIndex:
        index = OwnerIndex(8, capacity=len(ids))
        index.fill([(n + 1, memory_id, "semantic", False) for n, memory_id in enumerate(ids)])
        return index

    def order_of(ids: list[str]) -> list[int]:
        return [sorted(ids).index(memory_id) for memory_id in ids]

    index = made([f"{x:04x}" for x in rng.permutation(500)[:40]])
    assert index.id_order().tolist() == order_of(index.ids)
    for n in range(30):  # new ids land anywhere in the order
        memory_id = f"{rng.integers(0, 1 << 16):04x}x"
        index.append_pending(100 + n, memory_id, "episodic", ("", ""))
        assert index.id_order().tolist() == order_of(index.ids)
        assert not index.id_order().flags.writeable
    again = made(list(index.ids))
    again.keep_id_order(index)
    assert again.id_order() is index.id_order()
    other = made([*index.ids[:-1], "zzz"])
    other.keep_id_order(index)
    assert other._id_order is None and other.id_order().tolist() == order_of(other.ids)
    longer = made([*index.ids, "0000a", "zzz", "8000"])  # another process's writes: kept, extended
    longer.keep_id_order(index)
    assert longer._id_order is not None and longer.id_order().tolist() == order_of(longer.ids)
    assert index.id_order().tolist() == order_of(index.ids)  # the old index's own order untouched
    many = made([*index.ids, *(f"n{n:03d}" for n in range(KEPT_ORDER_APPENDS + 1))])
    many.keep_id_order(index)
    assert many._id_order is None and many.id_order().tolist() == order_of(many.ids)

    catalog = made(["0catalog", "m", "zcat"])
    owners = [index, catalog]
    keys = np.concatenate([row_keys(0, np.array([3, 0, 17])), row_keys(1, np.array([2, 0, 1]))])
    ids = [index.ids[3], index.ids[0], index.ids[17], "zcat", "0catalog", "m"]
    assert ids_of(owners, keys) == ids
    assert id_order(owners)(keys).tolist() == order_of(ids)
    assert id_order(owners)(keys[:3]).argsort().tolist() == np.argsort(order_of(ids[:3])).tolist()


def test_a_candidate_whose_memory_cannot_be_read_is_left_out(tmp_path, monkeypatch):
    """The search finds rows; the load reads their memories. One that the load does not find
    (forgotten in between) leaves the pool, and every column stays with its own memory."""
    engine = EmbeddedEngine(tmp_path / "atlas.db", default_embedder())
    try:
        write_many(engine, corpus.tenant_memories(0, corpus.specs(5, 40)))
        created = corpus.tenant_memories(0, corpus.specs(5, 1))[0].created_at
        guides = [f"Roadmap meeting guide {n}: agenda, notes, owners" for n in range(3)]
        write_many(engine, [
            Memory(id=f"cat{n}", memory_type=MemoryType.CATALOG, user_id=None, text=text, created_at=created)
            for n, text in enumerate(guides)
        ])  # fmt: skip
        plan = RecallPlan(USER, "a long meeting about the roadmap", frozenset(MemoryType), False, 50, 60)
        whole = engine.candidates(plan)
        read = store.read_memories
        lost = whole.ids[1]
        monkeypatch.setattr(
            store,
            "read_memories",
            lambda conn, owner, ids: [r for r in read(conn, owner, ids) if r[0].id != lost],
        )
        reopened = EmbeddedEngine(tmp_path / "atlas.db", default_embedder())  # nothing cached
        try:
            pool = reopened.candidates(plan)
        finally:
            reopened.close()
        kept = [at for at, memory_id in enumerate(whole.ids) if memory_id != lost]
        assert pool.ids == [whole.ids[at] for at in kept]
        assert [m.id for m in pool.memories] == pool.ids
        assert (
            pool.owners == [m.user_id or "" for m in pool.memories] and "" in pool.owners
        )  # the catalog's too
        for column in ("rrf", "bm25_rank", "dense_rank", "bm25", "cosine", "pending"):
            np.testing.assert_array_equal(getattr(pool, column), getattr(whole, column)[kept])
    finally:
        engine.close()


def test_the_rows_a_recall_may_return_follow_supersessions_and_appends():
    """``OwnerIndex.allowed`` is kept between recalls; a row added or superseded in place
    changes it, as worked out again from the rows."""
    index = OwnerIndex(8, capacity=4)
    index.fill([(1, "a", "semantic", False), (2, "b", "episodic", False), (3, "c", "semantic", True)])

    def check() -> None:
        for types in ({"semantic"}, {"semantic", "episodic"}, {"catalog"}):
            for superseded in (False, True):
                want = np.isin(index.codes, [TYPE_CODES[t] for t in types]) & (superseded | ~index.superseded)
                for _ in range(2):  # worked out, then kept
                    assert index.allowed(types, superseded).tolist() == want.tolist()
                    assert not index.allowed(types, superseded).flags.writeable

    check()
    index.mark_superseded(["a"])
    check()
    index.append_pending(9, "d", "semantic", ("", ""))
    check()


@pytest.mark.parametrize("n", [1_000, 20_000])  # a cut-off without a guess, then with one
@pytest.mark.parametrize("kind", ["normal", "coarse", "ascending", "descending", "flat", "strided"])
def test_the_best_rows_are_the_sorted_rows_also_past_the_guessed_cut_off(kind, n):
    """``top_rows`` guesses its cut-off on a sample of a large owner's rows; whatever the
    scores, it returns the window a full sort by (score, row) gives: ties at the cut-off go
    to the lower rows, also when the guess falls short."""
    rng = np.random.default_rng(11)
    scores = {
        "normal": rng.standard_normal(n),
        "coarse": np.round(rng.standard_normal(n), 1),  # thousands of ties
        "ascending": np.sort(rng.standard_normal(n)),
        "descending": -np.sort(rng.standard_normal(n)),
        "flat": np.zeros(n),
        "strided": np.zeros(n),
    }[kind].astype(np.float32)
    allowed = rng.random(n) < 0.9
    if kind == "strided":  # the sampled rows are the best: the guess keeps too few, the whole selection runs
        allowed[:] = True
        step = max(n // dense.GUESS_SAMPLE, 1)
        scores[::step] = 1 + rng.random(len(scores[::step]))
    for window in (1, 50, 300, 2_000):
        rows = np.flatnonzero(allowed)
        want = rows[np.lexsort((rows, -scores[rows]))][:window]
        assert top_rows(scores, allowed, window).tolist() == want.tolist()


def test_the_stamps_of_several_owners_are_each_owners_stamp(tmp_path):
    """``versions.stamps`` reads a recall's owners in one query: each is ``stamp`` of its owner,
    also for an owner that has never been written (0, 0), in the order asked."""
    engine = EmbeddedEngine(tmp_path / "atlas.db", default_embedder())
    service = MemoryService(engine)
    try:
        service.write(USER, "Prefers window seats on long flights.")
        service.write("someone-else", "Likes tea.")
        service.recall(USER, "seats")  # a recorded use moves the stamp's uses
        conn = engine.store.conn
        for owners in ([USER, ""], ["", USER], [USER], ["nobody", USER, "someone-else"]):
            assert versions.stamps(conn, owners) == [versions.stamp(conn, owner) for owner in owners]
        assert versions.stamps(conn, ["nobody"]) == [versions.Stamp(0, 0)]
    finally:
        engine.close()


@pytest.mark.parametrize("seed", range(6))
def test_a_pools_cosines_by_row_keys_are_its_cosines_by_id(seed):
    """``keyed_cosines`` (a pool's own measure: members by row key) gives each member the
    cosine ``member_cosines`` gives it by id, and marks which have one: members of the first
    owner alone (a key is its row) or of both owners, rows pending or of another space, long
    memories' extra passages included."""
    rng = np.random.default_rng(seed)

    def unit(n: int) -> np.ndarray:
        v = rng.normal(size=(n, 8)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    owners = []
    for place in range(2):
        index = OwnerIndex(8, capacity=16)
        index.fill([(r + 1, f"o{place}-{r}", "episodic", 0) for r in range(12)])
        for row in range(12):
            if row % 5 != 4:  # rows 4 and 9 pending
                index.vectors.put_passages(row, unit(1 + row % 3), 1 if row == 7 else 0)
        owners.append(
            dense.OwnerRows(f"o{place}", index, np.ones(12, bool), np.ones(12, bool), versions.Stamp(1, 0))
        )
    query = {0: SpaceQuery(unit(1)[0], REFERENCE_BACKGROUND)}
    for places in ((0,), (0, 1)):
        picked = [(p, int(r)) for p in places for r in rng.permutation(12)[: rng.integers(1, 13)]]
        order = rng.permutation(len(picked))
        keys = np.array([(picked[i][0] << 32) | picked[i][1] for i in order], dtype=np.int64)
        ids = [f"o{picked[i][0]}-{picked[i][1]}" for i in order]
        by_id = dense.member_cosines([o.index for o in owners], query, ids)
        cosine, found = dense.keyed_cosines(owners, query, keys)
        assert found.tolist() == [i in by_id for i in ids]
        assert cosine[found].tolist() == [by_id[i] for i in ids if i in by_id]
        assert np.isnan(cosine[~found]).all()


@pytest.mark.parametrize("seed", range(4))
def test_one_owners_best_rows_are_the_merged_orders(seed):
    """``DenseScan.best`` over one owner returns ``top_rows``' order as it is; it is the order
    the owners' merge gives (here beside an owner without rows), ties by row included."""
    rng = np.random.default_rng(seed)
    n = 300
    index = OwnerIndex(8, capacity=n)
    index.fill([(r + 1, f"m-{r}", "episodic", 0) for r in range(n)])
    empty = OwnerIndex(8, capacity=1)
    scores = np.round(rng.standard_normal(n), 1).astype(np.float32)  # many ties
    allowed = rng.random(n) < 0.8
    mine = dense.OwnerRows("u", index, allowed, np.ones(n, bool), versions.Stamp(1, 0))
    none = dense.OwnerRows("", empty, np.zeros(0, bool), np.zeros(0, bool), versions.Stamp(0, 0))
    query = {0: SpaceQuery(np.ones(8, np.float32), REFERENCE_BACKGROUND)}
    for window in (1, 40, 250, 400):
        alone = dense.DenseScan([mine], [scores], [np.zeros(n, np.int64)], query).best(window)
        merged = dense.DenseScan(
            [mine, none],
            [scores, np.zeros(0, np.float32)],
            [np.zeros(n, np.int64), np.zeros(0, np.int64)],
            query,
        ).best(window)
        assert alone.dtype == merged.dtype and alone.tolist() == merged.tolist()


def test_a_catalog_searched_once_it_has_a_row(tmp_path):
    """An owner without rows is left out of a recall's search (the catalog, in most stores):
    the catalog's first entry, loaded after recalls that found it empty, is recalled at once."""
    engine = EmbeddedEngine(tmp_path / "atlas.db", default_embedder())
    service = MemoryService(engine)
    try:
        service.write(USER, "The user keeps the spare key under the blue flowerpot.")
        assert [h.memory.id for h in service.recall(USER, "zigbee channel", min_relevance=0.0)] != ["cat-1"]
        service.load_catalog(
            [{"id": "cat-1", "title": "Zigbee", "text": "Use Zigbee channel 25 to avoid wifi"}]
        )
        hits = service.recall(USER, "zigbee channel", min_relevance=0.0)
        assert hits[0].memory.id == "cat-1" and hits[0].memory.memory_type is MemoryType.CATALOG
        assert "cat-1" not in [h.memory.id for h in service.recall(USER, "zigbee", include_catalog=False)]
    finally:
        engine.close()


def test_a_recall_reuses_its_owners_stamps_until_the_file_changes(tmp_path):
    """A recall reads its owners' stamps in a transaction only when something was committed
    since the last read (this connection's writes, or another's): otherwise it runs SQLite's
    ``data_version`` alone, and what another connection writes is recalled at once."""
    with two_connections(tmp_path) as (first, one, two):
        one.write(USER, "Owns a green kayak.")
        statements: list[str] = []
        first.store.conn.set_trace_callback(statements.append)
        one.recall(USER, "kayak", touch=False)  # the write changed the file: stamps read
        assert "BEGIN" in statements and any("FROM owner_versions" in s for s in statements)
        statements.clear()
        one.recall(USER, "kayak", touch=False)  # nothing changed: the stamps of the last read
        assert statements == ["PRAGMA data_version"]
        written = two.write(USER, "Owns a red canoe.")  # another connection
        statements.clear()
        hits = one.recall(USER, "red canoe", touch=False)
        assert written.id in [h.memory.id for h in hits]
        assert any("FROM owner_versions" in s for s in statements)
        mine = one.write(USER, "Owns a blue paddle.")  # this connection: no data_version change
        assert mine.id in [h.memory.id for h in one.recall(USER, "blue paddle", touch=False)]


def test_a_write_between_reused_stamps_and_the_first_read_makes_the_recall_read_again(tmp_path):
    """If another connection commits after a recall reused its stamps and before its first read
    (here: a memory not in the cache), the recall starts again on a new snapshot instead of
    reading rows newer than its indexes: it finds what was written meanwhile."""
    with two_connections(tmp_path) as (first, one, two):
        one.write(USER, "Owns a green kayak.")
        one.recall(USER, "kayak", touch=False)
        one.recall(USER, "kayak", touch=False)  # the stamps are kept now
        search = first.search
        search._memories = type(search._memories)()  # every memory is read from the store
        bm25, written = search._bm25, []

        def bm25_then_another_write(*args):
            if not written:
                written.append(two.write(USER, "Owns a red kayak paddle."))
            return bm25(*args)

        search._bm25 = bm25_then_another_write
        hits = one.recall(USER, "red kayak paddle", touch=False)
        assert written[0].id in [h.memory.id for h in hits]
