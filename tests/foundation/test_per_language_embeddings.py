"""The default embedding choice: MiniLM for English memories, multilingual-e5-small for the rest.

These check the ranking (``min_relevance=0.0``): a cross-language match has no word in common
with its question and a modest cosine, so calibrated relevance keeps it under the default floor.

Real SQLite and both real models: a store holds two vector spaces, each row is compared with
the query in its own space only, and English-only owners never pay for the second model.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import numpy as np
import pytest

from atlas_mcp.domain.asked import PROTOTYPE_TEXTS
from atlas_mcp.domain.similarity import REFERENCE_BACKGROUND, on_one_scale
from atlas_mcp.engines.embedded.engine import EmbeddedEngine
from atlas_mcp.engines.embedded.reindex import reindex
from atlas_mcp.errors import ConfigurationError
from atlas_mcp.inference.embedder import (
    E5_MODEL_ID,
    MINILM_MODEL_ID,
    PER_LANGUAGE_ID,
    Embedder,
    PerLanguage,
    default_embedder,
    default_models,
    open_models,
)
from atlas_mcp.service import MemoryService, RecallQuery

HOUSEHOLD = {
    "fridge": "王伟不喜欢冰箱的嗡嗡声。",
    "move": "我们上个月搬到了杭州。",
    "boiler": "Sarah's boiler is a Vaillant ecoTEC.",
    "garage": "The garage door code changes on the first of every month.",
    "nuts": "Lena verträgt keine Haselnüsse.",
}


def _models(path: Path) -> dict[str, str]:
    with sqlite3.connect(path) as conn:
        return dict(conn.execute("SELECT text, embedding_model FROM memories").fetchall())


def _wait_until_embedded(path: Path, deadline_s: float = 30.0) -> None:
    stop = time.monotonic() + deadline_s
    while time.monotonic() < stop:
        with sqlite3.connect(path) as conn:
            if not conn.execute("SELECT COUNT(*) FROM pending_embeddings").fetchone()[0]:
                return
        time.sleep(0.05)
    raise AssertionError("the background repair did not finish")


@pytest.fixture
def household(tmp_path: Path):
    path = tmp_path / "atlas.db"
    service = MemoryService(EmbeddedEngine(path, open_models("per-language", 2)))
    ids = {key: service.write("wang", text).id for key, text in HOUSEHOLD.items()}
    yield service, ids, path
    service.close()


def test_each_memory_is_embedded_by_the_model_of_its_language(household):
    service, _, path = household
    service.recall("wang", "anything")  # waits for the deferred embeddings
    models = _models(path)
    assert models[HOUSEHOLD["boiler"]] == models[HOUSEHOLD["garage"]] == MINILM_MODEL_ID
    assert (
        models[HOUSEHOLD["fridge"]] == models[HOUSEHOLD["move"]] == models[HOUSEHOLD["nuts"]] == E5_MODEL_ID
    )
    assert service.info.embedding_model == PER_LANGUAGE_ID


@pytest.mark.parametrize(
    ("query", "key"),
    [
        ("What noise bothers Wang Wei?", "fridge"),  # no shared word: only e5 can match it
        ("Which city did we move to?", "move"),
        ("Which nuts must Lena avoid?", "nuts"),
        ("what brand is the boiler", "boiler"),  # English against English: MiniLM
    ],
)
def test_an_english_question_finds_a_memory_in_any_language(household, query, key):
    service, ids, _ = household
    top = service.recall("wang", query, min_relevance=0.0)[0]
    assert top.memory.id == ids[key]


@pytest.mark.parametrize(
    ("query", "key"),
    [
        ("冰箱太吵了吗？", "fridge"),
        ("我们住在哪个城市？", "move"),
        ("Sarah的锅炉是什么牌子？", "boiler"),  # to an English memory: the name in the question
    ],
)
def test_a_chinese_question_finds_chinese_and_english_memories(household, query, key):
    service, ids, _ = household
    assert service.recall("wang", query, min_relevance=0.0)[0].memory.id == ids[key]


class CountingQueries(Embedder):
    """Counts the queries one real model embeds (it still embeds them)."""

    def __init__(self, embedder: Embedder) -> None:
        self.model_id, self.dimensions = embedder.model_id, embedder.dimensions
        self.cosine_background, self.relatedness_stretch = (
            embedder.cosine_background,
            embedder.relatedness_stretch,
        )
        self._embedder = embedder
        self.queries = 0

    def passages(self, text):
        return self._embedder.passages(text)

    def embed_batch(self, texts):
        return self._embedder.embed_batch(texts)

    def embed_queries(self, texts):
        self.queries += len(texts)
        return self._embedder.embed_queries(texts)


class CountedPerLanguage(PerLanguage):
    def __init__(self) -> None:
        super().__init__(2)
        self.counted: dict[str, CountingQueries] = {}

    def embedder(self, model_id: str) -> Embedder:
        if model_id not in self.counted:
            self.counted[model_id] = CountingQueries(super().embedder(model_id))
        return self.counted[model_id]

    def queries(self, model_id: str) -> int:
        return self.counted[model_id].queries if model_id in self.counted else 0


def test_an_english_only_owner_never_embeds_a_query_with_e5(tmp_path: Path):
    models = CountedPerLanguage()
    service = MemoryService(EmbeddedEngine(tmp_path / "atlas.db", models))
    try:
        service.write("sarah", "Sarah's boiler is a Vaillant ecoTEC.")
        service.write("wang", "王伟不喜欢冰箱的嗡嗡声。")  # another owner in the same store
        service.recall("sarah", "what brand is the boiler")
        service.recall("sarah", "冰箱太吵了吗？")  # the question's language does not matter
        # two recalls, and the plain questions domain.asked reads a query's meaning by (once)
        assert models.queries(MINILM_MODEL_ID) == 2 + len(PROTOTYPE_TEXTS)
        assert models.queries(E5_MODEL_ID) == 0
        service.recall("wang", "What noise bothers Wang Wei?")
        assert models.queries(E5_MODEL_ID) == 1
        # A first recall guesses MiniLM beside the lexical branch; once this process has seen
        # wang's rows (no English memory), only e5 runs.
        minilm = models.queries(MINILM_MODEL_ID)
        service.recall("wang", "Which city do we live in?")
        assert (models.queries(E5_MODEL_ID), models.queries(MINILM_MODEL_ID)) == (2, minilm)
    finally:
        service.close()


def test_warming_up_embeds_the_plain_questions_a_querys_meaning_is_read_by(tmp_path: Path):
    models = CountedPerLanguage()
    engine = EmbeddedEngine(tmp_path / "atlas.db", models)
    service = MemoryService(engine)
    try:
        service.write("sarah", "Sarah lives in Leeds.")
        engine.warm("sarah")
        warmed = models.queries(MINILM_MODEL_ID)
        assert warmed >= len(PROTOTYPE_TEXTS)
        service.recall("sarah", "Where am I living these days?")
        assert models.queries(MINILM_MODEL_ID) == warmed + 1  # the query alone
    finally:
        service.close()


def test_relevance_reads_e5_cosines_stretched_and_minilm_cosines_as_they_are(tmp_path: Path):
    engine = EmbeddedEngine(tmp_path / "atlas.db", default_models())
    service = MemoryService(engine)
    try:
        service.write("sarah", "Sarah's boiler is a Vaillant ecoTEC.")
        service.write("sarah", "Sarah drinks green tea in the morning.")
        service.write("lena", "Lena ist allergisch gegen Haselnüsse.")
        service.write("lena", "Lena fährt einen blauen Skoda Octavia.")
        english = engine.candidates(service.recall_plan(RecallQuery("sarah", "what brand is the boiler", 5)))
        assert english and all(c.relevance_similarity is None for c in english)  # MiniLM: unchanged
        german = engine.candidates(
            service.recall_plan(RecallQuery("lena", "Wogegen ist Lena allergisch?", 5))
        )
        best = max(german, key=lambda c: c.dense_similarity)
        assert "Haselnüsse" in best.memory.text
        assert best.relevance_similarity > best.dense_similarity  # pulled away from the background
        hit = next(
            h for h in service.recall("lena", "Wogegen ist Lena allergisch?") if h.memory.id == best.memory.id
        )
        assert hit.relevance >= service.policy.calibration.relevance_floor
    finally:
        service.close()


def test_a_minilm_only_store_moves_to_per_language_in_the_background(tmp_path: Path):
    path = tmp_path / "atlas.db"
    old = MemoryService(EmbeddedEngine(path, default_embedder()))
    english = old.write("wang", HOUSEHOLD["boiler"]).id
    chinese = old.write("wang", HOUSEHOLD["fridge"]).id
    old.close()
    with sqlite3.connect(path) as conn:
        english_vector = conn.execute("SELECT embedding FROM memories WHERE id = ?", (english,)).fetchone()[0]
    assert set(_models(path).values()) == {MINILM_MODEL_ID}

    service = MemoryService(EmbeddedEngine(path, open_models("per-language", 2)))
    try:
        # Until its turn, the Chinese row keeps its MiniLM vector, compared in MiniLM's space.
        assert service.recall("wang", "boiler brand", min_relevance=0.0)[0].memory.id == english
        _wait_until_embedded(path)
        assert _models(path) == {HOUSEHOLD["boiler"]: MINILM_MODEL_ID, HOUSEHOLD["fridge"]: E5_MODEL_ID}
        with sqlite3.connect(path) as conn:
            kept = conn.execute("SELECT embedding FROM memories WHERE id = ?", (english,)).fetchone()[0]
            recorded = conn.execute("SELECT value FROM meta WHERE key = 'embedding_model'").fetchone()[0]
        assert kept == english_vector  # English rows are not re-embedded
        assert recorded == PER_LANGUAGE_ID
        assert (
            service.recall("wang", "What noise bothers Wang Wei?", min_relevance=0.0)[0].memory.id == chinese
        )
        assert service.stats().awaiting_embedding == 0
    finally:
        service.close()
    back = EmbeddedEngine(path, default_embedder())  # and back to MiniLM alone, the same way
    try:
        _wait_until_embedded(path)
        assert set(_models(path).values()) == {MINILM_MODEL_ID}
    finally:
        back.close()


def test_an_event_is_embedded_by_the_model_of_its_own_text_not_of_its_date(tmp_path: Path):
    # Its search text starts "[3:07 pm on 14 September, 2023] ": the English month once
    # outweighed a short Chinese sentence, and MiniLM (English only) embedded it.
    path = tmp_path / "atlas.db"
    service = MemoryService(EmbeddedEngine(path, open_models("per-language", 2)))
    when = "2023-09-14T15:07:00+00:00"
    try:
        chinese = service.write("wang", "Bart在海边放风筝，感到非常开心。", "episodic", occurred_at=when).id
        english = service.write("wang", "Bart flew a kite at the beach.", "episodic", occurred_at=when).id
        service.recall("wang", "anything")  # waits for the deferred embeddings
    finally:
        service.close()
    with sqlite3.connect(path) as conn:
        models = dict(conn.execute("SELECT id, embedding_model FROM memories"))
    assert models == {chinese: E5_MODEL_ID, english: MINILM_MODEL_ID}


def test_a_store_that_routed_by_the_old_rule_is_re_embedded_once_in_the_background(tmp_path: Path):
    path = tmp_path / "atlas.db"
    service = MemoryService(EmbeddedEngine(path, open_models("per-language", 2)))
    chinese = service.write(
        "wang", "Bart在海边放风筝，感到非常开心。", "episodic", occurred_at="2023-09-14T15:07:00+00:00"
    ).id
    service.close()
    minilm = default_embedder().embed_batch(["stand-in for the old MiniLM vector"])[0]
    with sqlite3.connect(path) as conn:  # as the old rule stored it
        conn.execute(
            "UPDATE memories SET embedding = ?, embedding_model = ? WHERE id = ?",
            (minilm.astype(np.float32).tobytes(), MINILM_MODEL_ID, chinese),
        )
        conn.execute("DELETE FROM migrations WHERE name = 'language-from-undated-text'")
    reopened = MemoryService(EmbeddedEngine(path, open_models("per-language", 2)))
    try:
        _wait_until_embedded(path)
        assert _models(path) == {"Bart在海边放风筝，感到非常开心。": E5_MODEL_ID}
    finally:
        reopened.close()
    again = EmbeddedEngine(path, open_models("per-language", 2))  # once: nothing more to do
    try:
        with sqlite3.connect(path) as conn:
            assert conn.execute("SELECT count(*) FROM pending_embeddings").fetchone()[0] == 0
    finally:
        again.close()


def test_a_store_of_a_model_that_does_not_ship_is_refused(tmp_path: Path):
    path = tmp_path / "atlas.db"
    EmbeddedEngine(path, open_models("per-language", 2)).close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value = 'some-other-model' WHERE key = 'embedding_model'")
    with pytest.raises(ConfigurationError, match="reindex"):
        EmbeddedEngine(path, open_models("per-language", 2))


def test_reindex_moves_a_store_to_per_language_at_once(tmp_path: Path):
    path = tmp_path / "atlas.db"
    old = MemoryService(EmbeddedEngine(path, default_embedder()))
    for text in HOUSEHOLD.values():
        old.write("wang", text)
    old.close()
    assert reindex(path, open_models("per-language", 2)) == len(HOUSEHOLD)
    assert sorted(_models(path).values()) == sorted([MINILM_MODEL_ID] * 2 + [E5_MODEL_ID] * 3)
    engine = EmbeddedEngine(path, open_models("per-language", 2))
    try:
        assert engine.stats().awaiting_embedding == 0
    finally:
        engine.close()


def test_one_space_keeps_minilm_cosines_and_two_spaces_meet_on_its_scale():
    minilm, e5 = 0, 1
    spaces = [np.array([minilm, minilm, e5, e5])]
    cosines = [np.array([0.5, 0.1, 0.88, 0.85], dtype=np.float32)]
    one = {minilm: REFERENCE_BACKGROUND}
    assert on_one_scale(cosines, spaces, one)[0] is cosines[0]  # English-only recall: unchanged
    both = one | {e5: (0.754, 0.027)}
    scaled = on_one_scale(cosines, spaces, both)[0]
    # Each space keeps its order, and e5's narrow high band no longer outranks MiniLM wholesale.
    assert scaled[0] > scaled[1] and scaled[2] > scaled[3]
    assert scaled[2] < 1.0 and scaled[0] > scaled[3]


def test_a_pools_own_measure_across_two_spaces_is_the_engines_cosines_by_id(household):
    """``Pool.measure`` in a recall spanning MiniLM's and e5's spaces (one scan, each space
    on this wording's scale) gives each candidate the cosine ``cosines`` by id gives it."""
    from atlas_mcp.domain import ranking

    service, _, _ = household
    engine = service._engine
    plan = ranking.plan(
        service.policy, service.limits, RecallQuery("wang", "王伟不喜欢什么？"), service.clock()
    )
    pool = ranking.pool_of(engine.candidates(plan))
    assert pool.measure is not None and pool.handles is not None and len(pool) == len(HOUSEHOLD)
    for text in ("What does Wang dislike?", "我们搬到了哪里？"):
        cosine, has = pool.measure(text, pool.handles)
        by_id = engine.cosines(plan, text, [m.id for m in pool.memories])
        assert has.all() and len(by_id) == len(pool)
        assert cosine.tolist() == [by_id[m.id] for m in pool.memories]
