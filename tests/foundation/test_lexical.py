"""Lexical analysis in every language (domain.lexical) and the FTS index built from it."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from atlas_mcp.domain.lexical import CJK_CHARACTERS, analyse, content_words, detect_language, word_count
from atlas_mcp.domain.model import MemoryType
from atlas_mcp.domain.pool import WORD_RUN, _normal, coverage_words
from atlas_mcp.domain.query import lexical_query
from atlas_mcp.engines.base import RecallPlan
from atlas_mcp.engines.embedded import schema
from atlas_mcp.engines.embedded.engine import EmbeddedEngine
from atlas_mcp.engines.embedded.maintenance import lexical
from atlas_mcp.inference.embedder import default_embedder
from atlas_mcp.service import MemoryService, RecallQuery


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("Where did I park the car?", "en"),
        ("Welche Lebensmittel mag ich nicht?", "de"),
        ("¿Qué dispositivo está en la versión 2.4?", "es"),
        ("Où est-ce que j'ai garé la voiture ?", "fr"),
        ("我的冰箱为什么一直响？", "zh"),
        ("冷蔵庫の音がうるさいです", "ja"),
        ("Atlas 帮我重置了 Halo Hub", "en"),  # mostly Latin letters: its words are English
        ("I want to die laughing", "en"),  # one German-looking word does not make it German
    ],
)
def test_language_is_detected_from_the_text(text, language):
    assert detect_language(text) == language


def test_contractions_leave_no_stray_letters():
    assert lexical_query("What's the plumber called?") == "plumber called"
    assert "s" not in analyse("What's Sarah's boiler?").terms
    assert analyse("Je n'aime pas l'hiver", "fr").stems == ("aim", "hiv")


def test_stop_words_are_those_of_the_query_language():
    assert lexical_query("Qué dispositivo está en la versión 2.4") == "dispositivo versión 2 4"
    assert lexical_query("Welche Lebensmittel mag ich nicht?") == "Lebensmittel mag"
    assert lexical_query("Is my IT hub showing E-214?") == "IT hub showing E 214"  # shouted: kept
    assert lexical_query("who am I") == "who am I"  # nothing but stop words: keep them all


def test_stems_use_the_texts_own_language():
    assert analyse("Ich esse gern Haselnüsse").stems[-1] == analyse("eine Haselnuss", "de").stems[-1]
    assert analyse("called").terms == ("called",) and analyse("called").stems == ("call",)


def test_cjk_runs_become_bigrams_and_han_characters():
    analysis = analyse("王伟讨厌冰箱的嗡嗡声")
    assert "冰箱" in analysis.terms and "王伟" in analysis.terms
    assert "的" not in analysis.stems and "冰" in analysis.stems
    assert analyse("猫").terms == ("猫",)
    japanese = analyse("冷蔵庫がうるさい")
    assert "冷蔵" in japanese.terms and "うる" in japanese.terms
    assert "う" not in japanese.stems  # kana are endings and particles, not content alone


def test_word_count_is_fair_to_scripts_without_spaces():
    english = word_count("The fridge hum bothers Wang Wei a lot")
    chinese = word_count("冰箱的嗡嗡声让王伟很烦")
    assert english == 8
    assert 6 <= chinese <= 9  # 11 characters ≈ 7 words, not 1
    assert content_words("Atlas 帮我重置了 Halo Hub") == ["Atlas", "帮我重置了", "Halo", "Hub"]


def _lexical_ids(engine: EmbeddedEngine, service: MemoryService, user: str, query: str) -> list[str]:
    plan = service.recall_plan(RecallQuery(user, query, 10, include_catalog=False))
    return [memory_id for memory_id, _ in lexical(engine, plan)]


@pytest.fixture
def store(tmp_path: Path):
    engine = EmbeddedEngine(tmp_path / "atlas.db", default_embedder())
    yield engine, MemoryService(engine)
    engine.close()


def test_chinese_and_mixed_memories_match_from_either_side(store):
    engine, service = store
    fridge = service.write("wang", "王伟不喜欢冰箱的嗡嗡声").id
    hub = service.write("wang", "Atlas 帮我重置了 Halo Hub").id
    service.write("wang", "王伟现在住在上海")
    assert _lexical_ids(engine, service, "wang", "冰箱太吵了")[0] == fridge
    assert _lexical_ids(engine, service, "wang", "Halo Hub")[0] == hub
    assert _lexical_ids(engine, service, "wang", "谁重置了网关？")[0] == hub


def test_a_stem_match_ranks_below_the_word_itself(store):
    engine, service = store
    plumber = service.write("sam", "Remember to call the plumber on Monday").id
    named = service.write("sam", "The new plumber is called Marek").id
    assert _lexical_ids(engine, service, "sam", "What's the plumber called?")[:2] == [named, plumber]
    assert _lexical_ids(engine, service, "sam", "What's the name?") == []  # no stray "s" matches


def test_european_memories_match_inflected_questions(store):
    engine, service = store
    nuts = service.write("lena", "Lena verträgt keine Haselnüsse").id
    service.write("lena", "Lena wohnt seit März in Leipzig")
    version = service.write("lucia", "El termostato del salón está en la versión 2.4").id
    service.write("lucia", "La versión de la app es nueva")
    assert _lexical_ids(engine, service, "lena", "Welche Haselnuss verträgt sie nicht?")[0] == nuts
    assert _lexical_ids(engine, service, "lucia", "¿Qué termostatos tengo?")[0] == version


def test_a_store_from_before_migration_7_is_analysed_on_open(tmp_path: Path, legacy_store):
    path = tmp_path / "atlas.db"
    conn = legacy_store(path, 6)
    conn.execute(
        "INSERT INTO memories (rowid, id, user_id, memory_type, text, search_text, created_at, "
        "embedding, embedding_model) VALUES (?, 'm1', 'wang', 'semantic', ?, ?, ?, ?, ?)",
        ((1 << schema.SLOT_BITS) + 1, "王伟不喜欢冰箱的嗡嗡声", "王伟不喜欢冰箱的嗡嗡声",
         "2026-01-01T00:00:00+00:00", b"\0" * 4 * 384, default_embedder().model_id),
    )  # fmt: skip
    conn.execute("INSERT INTO owner_slots(owner, slot) VALUES ('wang', 1)")
    conn.close()
    engine = EmbeddedEngine(path, default_embedder())
    try:
        plan = RecallPlan("wang", "冰箱", frozenset(MemoryType), False, 10, 30)
        assert [i for i, _ in lexical(engine, plan)] == ["m1"]
    finally:
        engine.close()


@given(st.text(alphabet=st.sampled_from(list("abcSsé ,.'_-9东京の学Ä\t")), max_size=40))
def test_coverage_words_are_their_definition(text):
    """``coverage_words``' fast path (text without CJK) finds exactly the words of its
    definition: each run of letters and digits (CJK characters end a run) of two or more,
    plural ``s`` dropped, and every CJK character and pair of adjacent ones."""
    lowered = text.lower()
    expected = {_normal(run) for run in WORD_RUN.findall(lowered) if len(run) >= 2}
    for at, character in enumerate(lowered):
        if re.match(rf"[{CJK_CHARACTERS}]", character):
            expected.add(character)
            if at + 1 < len(lowered) and re.match(rf"[{CJK_CHARACTERS}]", lowered[at + 1]):
                expected.add(lowered[at : at + 2])
    assert coverage_words(text) == expected


def test_threads_stemming_at_once_get_the_stems_one_thread_gets():
    """A snowball stemmer keeps the word it works on: recall threads and the preload reading
    facts ahead stem at once, so each thread has its own (a shared one garbled stems or
    raised IndexError mid-word)."""
    import threading

    from atlas_mcp.domain import lexical

    words = [
        f"{stem}{ending}"
        for stem in ("connect", "nation", "generous", "hope", "run", "relat")
        for ending in ("ing", "ional", "ization", "fulness", "ively", "ed", "s", "ations", "iveness")
    ] * 40
    expected = [lexical._stemmer("en").stemWord(w) for w in words]
    results: list[list[str]] = []
    failures: list[BaseException] = []

    def stem_all() -> None:
        try:
            results.append([lexical._stemmer("en").stemWord(w) for w in words])
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    _run_at_once([threading.Thread(target=stem_all) for _ in range(4)])
    assert not failures and results == [expected] * 4


@given(st.text(alphabet="abcdeinoprstu ßäöüñ¿¡çœèêëîûùãõìòder la il est und das", max_size=60))
def test_a_telltale_letter_votes_for_its_language_wherever_it_stands(text):
    """The telltale vote found with one scan gives what a search per letter gives."""
    from collections import Counter

    from atlas_mcp.domain import lexical

    lowered = text.lower()
    tokens = lexical._LETTER_RUN.findall(lowered)
    votes = dict.fromkeys(lexical.LATIN_LANGUAGES, 0.0)
    counted = Counter(tokens)
    for word in counted.keys() & lexical._STOP_WORD_VOTES.keys():
        for language in lexical._STOP_WORD_VOTES[word]:
            votes[language] += counted[word]
    for language, letters in lexical._TELLTALES.items():
        if any(letter in lowered for letter in letters):
            votes[language] += 1.5
    best = max(votes, key=lambda lang: (votes[lang], lang == lexical.DEFAULT_LANGUAGE))
    expected = best if votes[best] > votes[lexical.DEFAULT_LANGUAGE] else lexical.DEFAULT_LANGUAGE
    assert lexical._voted(tokens, lowered) == expected


def test_stems_stay_right_while_threads_overflow_the_kept_stems(monkeypatch):
    """A recall and the preload stem at once; when the kept stems overflow, one thread starting
    afresh must not pull the words another has just stemmed from under it (a KeyError)."""
    import random
    import threading

    from atlas_mcp.domain import lexical

    words = (
        "camping researching running walked houses talking painted singing dancing moved jumps played".split()
    )
    stems = {w: lexical.stem(w, "en") for w in words}
    monkeypatch.setattr(lexical, "_STEMS", {})
    monkeypatch.setattr(lexical, "_STEMS_KEPT", 8)
    failures: list[str] = []

    def stem_texts(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(5000):
            chosen = rng.sample(words, 6)
            try:
                found = lexical.stemmed_forms(" ".join(chosen))
            except KeyError as exc:
                failures.append(repr(exc))
                return
            if found != frozenset(stems[w] for w in chosen) - set(chosen):
                failures.append(f"{chosen}: {sorted(found)}")
                return

    _run_at_once([threading.Thread(target=stem_texts, args=(seed,)) for seed in range(4)])
    assert failures == []


def _run_at_once(threads: list[threading.Thread]) -> None:
    """Start ``threads`` and wait for them, switching between them as often as the interpreter
    can (as a busy server's threads take turns)."""
    import sys

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(switch)


def test_the_c_stemmers_give_snowballs_own_stems():
    """PyStemmer is a core dependency for speed alone: where it is installed, the stemmers in use
    are its C ones, and they must stem every word as snowballstemmer's own Python does, or a
    store written on one machine would miss its words on another."""
    stemmer_module = pytest.importorskip("Stemmer", reason="PyStemmer has no wheel on this platform")
    import importlib
    import random

    from atlas_mcp.domain.lexical import SNOWBALL, _stemmer

    rng = random.Random(29)
    letters = "abcdefghijklmnopqrstuvwxyzàâäçéèêëîïôöùûüÿñßœæãõìòá"
    words = [
        "".join(rng.choice(letters) for _ in range(rng.randint(1, 14))) for _ in range(3000)
    ] + "running generously nationalization Häuser Mädchen corazones habitaciones nationaux".split()
    for language, algorithm in SNOWBALL.items():
        in_use = _stemmer(language)
        assert isinstance(in_use, stemmer_module.Stemmer)
        module = importlib.import_module(f"snowballstemmer.{algorithm}_stemmer")
        python_stemmer = getattr(module, f"{algorithm.capitalize()}Stemmer")()
        for word in words:
            word = word.lower()
            assert in_use.stemWord(word) == python_stemmer.stemWord(word), (language, word)
