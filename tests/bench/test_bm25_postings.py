"""BM25 from in-memory postings ranks as FTS5's ``bm25()`` over the rows the caller can see.

The oracle indexes only the visible owners' rows (all of them: other types and superseded
ones count in the statistics, as in the postings) in a fresh FTS5 table, asks the OR-query of
quoted surface words and stems that recall used to send, and filters afterwards. Long-lived
caches, kept current through writes, updates, forgets and supersessions made by this process
and by another one, must rank exactly as a cache loaded from scratch; so must postings a start
reads from saved postings and brings up to date, and damaged saved postings are never trusted.
"""

from __future__ import annotations

import math
import os
import sqlite3
import time
from dataclasses import replace

import numpy as np
import pytest

from atlas_mcp.bench import corpus
from atlas_mcp.domain.lexical import analyse, detect_language
from atlas_mcp.domain.model import Memory, MemoryType
from atlas_mcp.engines.base import ListQuery, RecallPlan
from atlas_mcp.engines.embedded import postings, rows, saved_postings, schema
from atlas_mcp.engines.embedded.engine import EmbeddedEngine
from atlas_mcp.engines.embedded.maintenance import lexical, write_many
from atlas_mcp.engines.embedded.words import (
    STEM_MARK,
    STEM_WEIGHT,
    TERM_WEIGHT,
    QueryWord,
    query_words,
    tokens,
)
from atlas_mcp.inference.embedder import default_embedder

ORACLE_INDEX = """
CREATE VIRTUAL TABLE fts USING fts5(terms, stems, tokenize='unicode61 remove_diacritics 2');
CREATE TABLE seen(rowid INTEGER PRIMARY KEY, id TEXT, owner TEXT, memory_type TEXT, superseded INTEGER);
"""
ORACLE_QUERY = (
    f"SELECT seen.id, bm25(fts, {TERM_WEIGHT}, {STEM_WEIGHT}) AS score FROM fts "
    "JOIN seen ON seen.rowid = fts.rowid WHERE fts MATCH ? AND seen.memory_type IN ({types}) "
    "AND (? OR NOT seen.superseded) ORDER BY score, seen.owner = '', seen.rowid LIMIT ?"
)


def _fts_query(text: str) -> str | None:
    """The query recall sent FTS5 before postings: quoted surface words and stems per column."""
    analysis = analyse(text, detect_language(text))
    groups = []
    for column, words in (("terms", analysis.terms), ("stems", analysis.stems)):
        quoted = ['"' + w + '"' for w in list(dict.fromkeys(w.lower() for w in words))[:64]]
        if quoted:
            groups.append(f"{column}: ({' OR '.join(quoted)})")
    return f"({' OR '.join(groups)})" if groups else None


def _oracle(engine: EmbeddedEngine, plan: RecallPlan) -> list[tuple[str, float]]:
    visible = engine.store.conn.execute(
        "SELECT rowid, id, COALESCE(user_id, ''), memory_type, superseded_by IS NOT NULL, lexical_terms, "
        "lexical_stems FROM memories WHERE user_id = ? OR (user_id IS NULL AND ?)",
        (plan.user_id, MemoryType.CATALOG in plan.memory_types),
    ).fetchall()
    oracle = sqlite3.connect(":memory:")
    oracle.executescript(ORACLE_INDEX)
    oracle.executemany("INSERT INTO seen VALUES (?, ?, ?, ?, ?)", [tuple(r[:5]) for r in visible])
    oracle.executemany(
        "INSERT INTO fts(rowid, terms, stems) VALUES (?, ?, ?)", [(r[0], r[5], r[6]) for r in visible]
    )
    match = _fts_query(plan.lexical_text)
    if match is None:
        return []
    types = sorted(t.value for t in plan.memory_types)
    sql = ORACLE_QUERY.format(types=",".join("?" * len(types)))
    found = oracle.execute(sql, (match, *types, plan.include_superseded, plan.window)).fetchall()
    return [(memory_id, -score) for memory_id, score in found]


def _same_ranking(got: list[tuple[str, float]], expected: list[tuple[str, float]]) -> None:
    """Same scores at every rank (to rounding) and the same ids wherever scores are not tied."""
    assert len(got) == len(expected)
    assert [s for _, s in got] == pytest.approx([s for _, s in expected], rel=1e-9, abs=1e-12)
    for rank, ((got_id, score), (expected_id, _)) in enumerate(zip(got, expected, strict=True)):
        tied = [i for i, s in expected if abs(s - score) <= 1e-9 * max(1.0, abs(score))]
        assert got_id == expected_id or (got_id in tied and len(tied) > 1), rank


def _load(engine: EmbeddedEngine, memories: list[Memory]) -> None:
    vectors = np.random.default_rng(len(memories)).standard_normal((len(memories), 384)).astype(np.float32)
    write_many(engine, memories, vectors / np.linalg.norm(vectors, axis=1, keepdims=True))


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    engine = EmbeddedEngine(tmp_path_factory.mktemp("postings") / "atlas.db", default_embedder())
    items = corpus.specs(11, 300)
    # Interleave tenants' writes, as a shared server would see them.
    for start in range(0, 300, 50):
        for tenant in range(3):
            _load(engine, corpus.tenant_memories(tenant, items)[start : start + 50])
    created = corpus.tenant_memories(0, items[:1])[0].created_at
    _load(engine, [
        Memory(id=f"cat{i}", memory_type=MemoryType.CATALOG, user_id=None, text=text, created_at=created,
               title=f"Guide {i}")
        for i, text in enumerate(["How to restart the router", "Firmware update guide for the café camera",
                                  "Lunch spots: ramen and tacos", "How to restart the router"])
    ])  # fmt: skip
    yield engine
    engine.close()


QUERIES = ["restart the router", "the", "Lisbon", "ramen tacos lunch", "cafe camera", "", "重置 router"]
KINDS = [
    frozenset(MemoryType),
    frozenset({MemoryType.SEMANTIC}),
    frozenset(MemoryType) - {MemoryType.CATALOG},
]


def test_postings_rank_as_fts5_over_the_visible_rows(store):
    checked = 0
    for query in corpus.queries(11, 40) + QUERIES:
        for user in (corpus.tenant_id(0), corpus.tenant_id(2)):
            for memory_types in KINDS:
                for superseded in (False, True):
                    for window in (5, 80):
                        plan = RecallPlan(user, query, memory_types, superseded, window, 30)
                        _same_ranking(lexical(store, plan), _oracle(store, plan))
                        checked += 1
    assert checked > 500


def test_other_tenants_do_not_move_a_users_scores(tmp_path):
    items = corpus.specs(13, 120)
    alone = EmbeddedEngine(tmp_path / "alone.db", default_embedder())
    shared = EmbeddedEngine(tmp_path / "shared.db", default_embedder())
    try:
        _load(alone, corpus.tenant_memories(0, items))
        _load(shared, corpus.tenant_memories(1, corpus.specs(14, 400)) + corpus.tenant_memories(0, items))
        for query in corpus.queries(13, 20):
            plan = RecallPlan(corpus.tenant_id(0), query, frozenset(MemoryType), False, 40, 30)
            assert lexical(shared, plan) == lexical(alone, plan)
            assert any(lexical(shared, plan) for query in corpus.queries(13, 20))
    finally:
        alone.close()
        shared.close()


def test_small_stores_count_at_least_min_counted_rows(tmp_path):
    """Three memories: a word in one of them keeps its weight (with FTS5's row count of 3,
    its IDF would be log(2.5 / 1.5), and a word in two of them would score nothing)."""
    engine = EmbeddedEngine(tmp_path / "small.db", default_embedder())
    try:
        created = corpus.tenant_memories(0, corpus.specs(1, 1))[0].created_at
        texts = ["plumber fixed the sink", "plumber visit booked", "sink is white"]
        _load(engine, [Memory(id=f"m{i}", memory_type=MemoryType.SEMANTIC, user_id="u", text=t,
                              created_at=created) for i, t in enumerate(texts)])  # fmt: skip
        found = dict(lexical(engine, RecallPlan("u", "plumber", frozenset(MemoryType), False, 10, 30)))
        stop_words = {"the", "is"}  # kept among the surface words, never stemmed
        lengths = {
            f"m{i}": 2 * len(t.split()) - len(stop_words & set(t.split())) for i, t in enumerate(texts)
        }
        mean = sum(lengths.values()) / 3
        idf = np.log((postings.MIN_COUNTED_ROWS - 2 + 0.5) / (2 + 0.5))

        def expected(memory_id: str) -> float:
            norm = postings.K1 * (1 - postings.B + postings.B * lengths[memory_id] / mean)
            return sum(idf * w * (postings.K1 + 1) / (w + norm) for w in (TERM_WEIGHT, STEM_WEIGHT))

        assert set(found) == {"m0", "m1"}
        assert found["m0"] == pytest.approx(expected("m0")) and found["m1"] == pytest.approx(expected("m1"))
        assert found["m1"] > found["m0"]  # the shorter row
    finally:
        engine.close()


def test_each_owner_lives_in_its_own_rowid_block(store):
    rows = store.store.conn.execute(
        "SELECT COALESCE(user_id, ''), MIN(rowid) >> ?, MAX(rowid) >> ? FROM memories GROUP BY 1",
        (schema.SLOT_BITS, schema.SLOT_BITS),
    ).fetchall()
    assert len(rows) == 4 and all(low == high for _, low, high in rows)
    assert len({low for _, low, _ in rows}) == 4


def _interleaved(seed: int, count: int, tenants: int, step: int) -> list[Memory]:
    items = corpus.specs(seed, count)
    per_tenant = [corpus.tenant_memories(t, items) for t in range(tenants)]
    return [
        m
        for start in range(0, count, step)
        for memories in per_tenant
        for m in memories[start : start + step]
    ]


def _store_at_version_2(path, memories: list[Memory], legacy_store) -> None:
    """A store as written before owner blocks and indexed filters: auto rowids, owners interleaved."""
    conn = legacy_store(path, 2)
    vectors = np.random.default_rng(len(memories)).standard_normal((len(memories), 384)).astype(np.float32)
    present = {r[1] for r in conn.execute("PRAGMA table_info(memories)")}
    old_columns = [c for c in rows.COLUMNS if c in present]  # later migrations add the others
    columns = (*old_columns, "embedding", "embedding_model")
    sql = f"INSERT INTO memories ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
    model = default_embedder().model_id
    conn.execute("BEGIN")
    for memory, vector in zip(
        memories, vectors / np.linalg.norm(vectors, axis=1, keepdims=True), strict=True
    ):
        row = rows.to_row(memory)
        conn.execute(sql, (*(row[c] for c in old_columns), vector.tobytes(), model))
    conn.execute("COMMIT")
    conn.close()


def test_migrated_store_ranks_exactly_like_one_built_today(tmp_path, legacy_store):
    """Migrations 3 (owner blocks), 4 (filters in the index) and 7 (analysed text) turn an old store into exactly
    the store the current code writes: same blocks, same order, same BM25 scores."""
    memories = _interleaved(12, 60, 2, 20)
    _store_at_version_2(tmp_path / "old.db", memories, legacy_store)
    migrated = EmbeddedEngine(tmp_path / "old.db", default_embedder())
    fresh = EmbeddedEngine(tmp_path / "new.db", default_embedder())
    try:
        _load(fresh, memories)
        plans = [RecallPlan(corpus.tenant_id(t), q, kinds, superseded, 80, 30)
                 for t in range(2) for q in corpus.queries(12, 10)
                 for kinds in (frozenset(MemoryType), frozenset({MemoryType.SEMANTIC}))
                 for superseded in (False, True)]  # fmt: skip
        assert [lexical(migrated, p) for p in plans] == [lexical(fresh, p) for p in plans]
        assert any(lexical(migrated, p) for p in plans)
        _load(migrated, corpus.tenant_memories(5, corpus.specs(12, 3)))
        assert migrated.list(ListQuery(corpus.tenant_id(5), limit=10))
    finally:
        migrated.close()
        fresh.close()


def _plans(user: str, seed: int) -> list[RecallPlan]:
    return [RecallPlan(user, q, kinds, superseded, 60, 30)
            for q in corpus.queries(seed, 12) + ["restart the router"]
            for kinds in (frozenset(MemoryType), frozenset({MemoryType.SEMANTIC}))
            for superseded in (False, True)]  # fmt: skip


def test_long_lived_postings_rank_as_a_fresh_load(tmp_path, monkeypatch):
    """One engine keeps its postings through its own writes and another process's (another
    engine on the same file); after each change it must rank exactly as a fresh engine."""
    monkeypatch.setattr(postings, "RECENT_ROWS_MIN", 7)  # rebuild often, mid-sequence too
    path = tmp_path / "shared.db"
    mine, other = EmbeddedEngine(path, default_embedder()), EmbeddedEngine(path, default_embedder())
    user = corpus.tenant_id(0)
    # Live memories only: ``write`` takes new memories, not ones already superseded.
    memories = [m for m in corpus.tenant_memories(0, corpus.specs(21, 200)) if m.superseded_by is None][:160]
    plans = _plans(user, 21)

    def check() -> None:
        fresh = EmbeddedEngine(path, default_embedder())
        try:
            for plan in plans:
                assert lexical(mine, plan) == lexical(fresh, plan), plan.query
        finally:
            fresh.close()

    try:
        _load(mine, memories[:100])
        check()
        for memory in memories[100:130]:  # this process's own writes, applied in place
            mine.write(memory)
        check()
        for memory in memories[130:160]:  # another process's
            other.write(memory)
        check()
        facts = [m for m in memories[:100] if m.memory_type is MemoryType.SEMANTIC]
        for target in facts[:3]:  # supersessions, both ways
            newer = Memory(id=f"new-{target.id}", memory_type=MemoryType.SEMANTIC, user_id=user,
                           text=f"{target.text} (corrected)", created_at=target.created_at)  # fmt: skip
            (mine if target is facts[0] else other).write(newer, supersede=[target.id])
        check()
        for engine, memory in ((mine, memories[3]), (other, memories[4]), (mine, memories[120])):
            assert engine.forget(user, memory.id)
        check()
        for engine, memory in ((mine, memories[5]), (other, memories[6]), (mine, memories[140])):
            engine.update(user, replace(memory, text="router firmware restart lisbon ramen"))
        check()
        # Past the rebuild threshold after the changes above:
        for memory in corpus.tenant_memories(0, corpus.specs(22, 40)):
            if memory.superseded_by is None:
                mine.write(replace(memory, id=f"late-{memory.id}"))
        check()
    finally:
        mine.close()
        other.close()


def test_query_words_quote_every_surface_word_and_stem():
    def keys(text: str) -> list[tuple[str, float]]:
        return [(w.key, w.weight) for w in query_words(text, None)]

    assert keys('hub "E42" NEAR(x') == [(w, TERM_WEIGHT) for w in ("hub", "e42", "near", "x")] + [
        (STEM_MARK + w, STEM_WEIGHT) for w in ("hub", "e42", "near", "x")
    ]
    assert keys("*** ::: ;;;") == []
    assert keys("Café naïve") == [("cafe", TERM_WEIGHT), ("naive", TERM_WEIGHT),
                                  (STEM_MARK + "cafe", STEM_WEIGHT), (STEM_MARK + "naiv", STEM_WEIGHT)]  # fmt: skip
    assert keys("重置 Hub") == [("重置", TERM_WEIGHT), ("hub", TERM_WEIGHT)] + [
        (STEM_MARK + w, STEM_WEIGHT) for w in ("重置", "重", "置", "hub")
    ]
    assert all(isinstance(w, QueryWord) for w in query_words("hub", None))


def test_tokens_fold_diacritics_as_fts5_unicode61_does():
    """Every Latin letter our folding table could touch, indexed by FTS5 itself."""
    letters = [chr(c) for r in (range(0xC0, 0x250), range(0x1E00, 0x1F00)) for c in r if chr(c).isalpha()]
    oracle = sqlite3.connect(":memory:")
    oracle.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize='unicode61 remove_diacritics 2')")
    oracle.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
    oracle.executemany("INSERT INTO t(rowid, x) VALUES (?, ?)", [(ord(c), f"q{c.lower()}q") for c in letters])
    indexed = dict(oracle.execute("SELECT doc, term FROM v"))
    assert {ord(c): tokens(f"q{c.lower()}q")[0] for c in letters} == indexed


def test_fill_builds_the_lists_put_builds_row_by_row(monkeypatch):
    """``fill`` splits whole blocks of columns at once; every word's list and every row's
    length must be what adding the rows one at a time gives, across block edges, for empty
    columns, stray spaces, folded diacritics and CJK bigrams."""
    monkeypatch.setattr(postings, "_FILL_BLOCK", 3)
    texts = [
        "The plumber Marek fixed the boiler",
        "Wer hat den Heizkessel repariert? Café crème",
        "Atlas 帮我重置了 Halo Hub",
        "",
        "!!!",
        "Señor Núñez called about the ölfilter",
        "calls calling called",
    ]
    columns = [tuple(schema.lexical_columns(t).values()) for t in texts]
    columns += [("  spaced  out ", " space "), ("only terms", ""), ("", "only stem")]
    # A surface word posing as an earlier row's stem, in one block: sorted the slow way.
    columns += [("", "odd"), (STEM_MARK + "odd", "")]
    assert (len(columns) - 2) // 3 == (len(columns) - 1) // 3
    filled = postings.OwnerPostings()
    filled.fill(columns)
    added = postings.OwnerPostings()
    for row, (terms, stems) in enumerate(columns):
        added.put(row, terms, stems)
    added.rebuild()
    assert filled.size == added.size == len(columns)
    assert filled.lengths[: filled.size].tolist() == added.lengths[: added.size].tolist()
    assert filled.total_length == added.total_length
    words = [w for w in added.vocabulary if STEM_MARK + "\x02" != w != "\x02"]
    assert len(words) > 30
    for word in words:
        got, want = filled.entries(word), added.entries(word)
        assert got[0].tolist() == want[0].tolist() and got[1].tolist() == want[1].tolist(), word


@pytest.mark.parametrize("texts", [[], [""], ["", "!! ... ?"]])
def test_fill_of_an_owner_with_no_words(texts):
    """An owner whose last memory was forgotten, or whose memories hold no words."""
    columns = [tuple(schema.lexical_columns(t).values()) for t in texts]
    filled = postings.OwnerPostings()
    filled.fill(columns)
    assert filled.size == len(columns) and filled.total_length == 0
    assert [len(a) for a in filled.entries("x")] == [0, 0]
    matched, scores = postings.bm25([filled], [QueryWord("x", 1.0)])[0]
    assert matched.tolist() == [] and scores.tolist() == []


def _ranking_without_saved_postings(path, plans) -> list[list[tuple[str, float]]]:
    engine = EmbeddedEngine(path, default_embedder())
    engine._index._saved = None  # built from the rows, nothing read or written
    try:
        return [lexical(engine, plan) for plan in plans]
    finally:
        engine.close()


def _fresh_ranking(path, plans, monkeypatch, *, filled: bool) -> list[list[tuple[str, float]]]:
    """A new engine's ranking; ``filled``: whether it must build the postings from the rows."""
    calls = []
    real_fill = postings.OwnerPostings.fill
    monkeypatch.setattr(
        postings.OwnerPostings, "fill", lambda self, cols: calls.append(1) or real_fill(self, cols)
    )
    engine = EmbeddedEngine(path, default_embedder())
    try:
        ranked = [lexical(engine, plan) for plan in plans]
    finally:
        engine.close()
        monkeypatch.setattr(postings.OwnerPostings, "fill", real_fill)
    assert bool(calls) == filled
    return ranked


def test_a_start_reads_saved_postings_and_catches_up_with_changes(tmp_path, monkeypatch):
    """Saved postings are a head start only: after another process's writes, updates and
    supersessions the restored ones rank exactly as postings built from the rows."""
    monkeypatch.setattr(saved_postings, "SAVED_MIN_ROWS", 50)
    path = tmp_path / "atlas.db"
    user = corpus.tenant_id(0)
    memories = [m for m in corpus.tenant_memories(0, corpus.specs(31, 200)) if m.superseded_by is None][:150]
    plans = _plans(user, 31)
    writer = EmbeddedEngine(path, default_embedder())
    try:
        _load(writer, memories[:120])
        saved = writer._index._saved.path(user)
        assert not saved.exists()
        expected = _ranking_without_saved_postings(path, plans)
        assert _fresh_ranking(path, plans, monkeypatch, filled=True) == expected  # builds, saves
        assert saved.exists() and saved.stat().st_mode & 0o077 == 0
        assert _fresh_ranking(path, plans, monkeypatch, filled=False) == expected  # reads
        for memory in memories[120:150]:
            writer.write(memory)
        writer.update(user, replace(memories[7], text="router firmware restart lisbon ramen"))
        fact = next(m for m in memories[:120] if m.memory_type is MemoryType.SEMANTIC)
        newer = Memory(id="newer", memory_type=MemoryType.SEMANTIC, user_id=user,
                       text=f"{fact.text} (corrected)", created_at=fact.created_at)  # fmt: skip
        writer.write(newer, supersede=[fact.id])
        before = saved.stat().st_mtime_ns
        expected = _ranking_without_saved_postings(path, plans)
        assert _fresh_ranking(path, plans, monkeypatch, filled=False) == expected  # read + caught up
        assert saved.stat().st_mtime_ns != before  # and saved again, current
        assert _fresh_ranking(path, plans, monkeypatch, filled=False) == expected
        assert writer.forget(user, memories[3].id)
        assert not saved.exists()  # a forgotten memory's words leave the disk
        assert _fresh_ranking(path, plans, monkeypatch, filled=True) == _ranking_without_saved_postings(
            path, plans
        )
    finally:
        writer.close()


@pytest.mark.parametrize(
    "damage",
    [
        lambda path, arrays: path.write_bytes(path.read_bytes()[:-200]),
        lambda path, arrays: path.write_bytes(b"not a snapshot"),
        lambda path, arrays: np.savez(path, **(arrays | {"format": np.array([99])})),
        lambda path, arrays: np.savez(path, **(arrays | {"rows": arrays["rows"] + 10**6})),
        lambda path, arrays: np.savez(path, **{k: v for k, v in arrays.items() if k != "digests"}),
        lambda path, arrays: np.savez(
            path, **(arrays | {"vocabulary": np.array([0xFF, 0xFE], dtype=np.uint8)})
        ),
    ],
    ids=["truncated", "garbage", "other-format", "rows-out-of-range", "missing-part", "bad-vocabulary"],
)
def test_damaged_saved_postings_are_built_again(tmp_path, monkeypatch, damage):
    monkeypatch.setattr(saved_postings, "SAVED_MIN_ROWS", 50)
    path = tmp_path / "atlas.db"
    user = corpus.tenant_id(0)
    writer = EmbeddedEngine(path, default_embedder())
    try:
        _load(writer, corpus.tenant_memories(0, corpus.specs(32, 80)))
    finally:
        writer.close()
    plans = _plans(user, 32)
    expected = _ranking_without_saved_postings(path, plans)
    assert _fresh_ranking(path, plans, monkeypatch, filled=True) == expected
    saved = saved_postings.SavedPostings(path.with_name(path.name + "-postings")).path(user)
    with np.load(saved) as found:
        arrays = {name: found[name] for name in found.files}
    damage(saved, arrays)
    assert _fresh_ranking(path, plans, monkeypatch, filled=True) == expected
    assert _fresh_ranking(path, plans, monkeypatch, filled=False) == expected  # saved anew


def test_saving_sweeps_what_a_killed_writer_left(tmp_path):
    saved = saved_postings.SavedPostings(tmp_path / "atlas.db-postings")
    saved.folder.mkdir()
    stale, recent = saved.folder / ".a.npz.x.tmp", saved.folder / ".b.npz.y.tmp"
    for left in (stale, recent):
        left.write_bytes(b"half a snapshot")
    os.utime(stale, (time.time() - 7200, time.time() - 7200))
    filled = postings.OwnerPostings()
    filled.fill([("plumber fixed boiler", "plumber fix boiler")])
    saved.write("someone", filled.to_saved(np.array([5])))
    assert not stale.exists() and recent.exists()  # another process may be writing that one
    assert saved.read("someone") is not None and saved.read("someone else") is None


def test_a_disk_that_refuses_saved_postings_costs_only_the_head_start(tmp_path, monkeypatch):
    """Saving fails (the folder's name is taken by a file), deleting fails (the saved file's
    name is taken by a folder): recall and forget work as without saved postings."""
    blocked = saved_postings.SavedPostings(tmp_path / "taken")
    blocked.folder.write_bytes(b"a file, not a folder")
    filled = postings.OwnerPostings()
    filled.fill([("plumber fixed boiler", "plumber fix boiler")])
    blocked.write("someone", filled.to_saved(np.array([1])))
    assert blocked.read("someone") is None and list(tmp_path.iterdir()) == [blocked.folder]
    full = saved_postings.SavedPostings(tmp_path / "full")

    def no_space(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(saved_postings.np, "savez", no_space)
    full.write("someone", filled.to_saved(np.array([1])))
    assert list(full.folder.iterdir()) == []  # the half-written file is gone too
    monkeypatch.undo()
    path = tmp_path / "atlas.db"
    engine = EmbeddedEngine(path, default_embedder())
    try:
        user = corpus.tenant_id(0)
        memories = corpus.tenant_memories(0, corpus.specs(33, 5))
        _load(engine, memories)
        engine._index._saved.path(user).mkdir(parents=True)
        assert engine.forget(user, memories[0].id)
        assert engine.get(user, [memories[0].id]) == []
    finally:
        engine.close()


def test_one_pass_over_all_words_scores_as_a_pass_per_word():
    """``bm25`` sums each row's words in one ``bincount``; its scores must be, to the last
    bit, what adding the words one pass at a time gives (the question's order, repeated and
    unknown words, two owners sharing the statistics, rows still in ``recent``)."""
    rng = np.random.default_rng(7)
    vocabulary = [f"w{i}" for i in range(40)]

    def owner(rows: int) -> postings.OwnerPostings:
        made = postings.OwnerPostings()
        made.fill(
            [(" ".join(rng.choice(vocabulary, 12)), " ".join(rng.choice(vocabulary, 5))) for _ in range(rows)]
        )
        for row in range(0, rows, 7):  # changed since the build: their entries come from ``recent``
            made.put(row, " ".join(rng.choice(vocabulary, 9)), "w1 w2")
        return made

    owners = [owner(300), owner(40)]
    words = [QueryWord(w, weight) for w, weight in [("w1", 0.2), (STEM_MARK + "w1", 1.0), ("w3", 0.2),
                                                    ("nope", 1.0), ("w1", 0.2), (STEM_MARK + "w39", 1.0)]]  # fmt: skip
    rows = sum(p.size for p in owners)
    mean_length = sum(p.total_length for p in owners) / rows
    want = [np.zeros(p.size) for p in owners]
    for word in words:
        found = [p.entries(word.key) for p in owners]
        hits = sum(len(r) for r, _ in found)
        if hits:
            idf = math.log((max(rows, postings.MIN_COUNTED_ROWS) - hits + 0.5) / (hits + 0.5))
            idf = idf if idf > 0 else postings.IDF_FLOOR
            for p, (matched, counts), scores in zip(owners, found, want, strict=True):
                frequency = word.weight * counts
                norm = postings.K1 * (1 - postings.B + postings.B * p.lengths[matched] / mean_length)
                scores[matched] += idf * frequency * (postings.K1 + 1) / (frequency + norm)
    for (matched, scores), expected in zip(postings.bm25(owners, words), want, strict=True):
        assert matched.tolist() == np.flatnonzero(expected).tolist()
        assert scores.tolist() == expected[matched].tolist()
