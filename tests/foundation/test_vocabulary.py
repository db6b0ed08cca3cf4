"""Coverage read through word codes (``domain.vocabulary``) finds what the words' sets hold."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from atlas_mcp.domain import calibration, vocabulary

_WORDS = st.text(alphabet="abcdé猫", min_size=1, max_size=3)


def _by_sets(words: list[str], stems: list[str], bags: list[frozenset[str]]) -> list[list[bool]]:
    return [[word in bag or stemmed in bag for word, stemmed in zip(words, stems)] for bag in bags]


@given(
    st.lists(st.frozensets(_WORDS, max_size=8), max_size=12),
    st.lists(st.tuples(_WORDS, _WORDS), min_size=1, max_size=5, unique_by=lambda pair: pair[0]),
)
def test_a_pool_of_codes_holds_the_words_its_sets_hold(bags, asked):
    words, stems = [w for w, _ in asked], [s for _, s in asked]
    held = calibration._held(
        words, stems, vocabulary.joined([vocabulary.encoded(bag) for bag in bags]), len(bags)
    )
    assert held.shape == (len(bags), len(words))
    assert held.tolist() == _by_sets(words, stems, bags)


def test_a_word_keeps_its_code_and_a_query_adds_none():
    first = vocabulary.encoded(frozenset({"lantern", "harbour"}))
    assert vocabulary.encoded(frozenset({"lantern", "harbour"})) == first
    size = vocabulary.WORDS.size()
    assert vocabulary.WORDS.code("never-stored-word-xyz") is None
    assert vocabulary.WORDS.size() == size
    held = calibration._held(
        ["never-stored-word-xyz"], ["never-stored-word-xyz"], vocabulary.joined([first]), 1
    )
    assert held.tolist() == [[False]]


def test_a_code_gives_back_its_name():
    from atlas_mcp.domain.vocabulary import Codes

    table = Codes()
    codes = table.add(["Caroline", "Melanie", "Caroline"])
    assert codes == [0, 1, 0] and [table.name(c) for c in codes] == ["Caroline", "Melanie", "Caroline"]
    assert table.add(["Ana"]) == [2] and table.name(2) == "Ana" and table.size() == 3


# more distinct words than numpy adds one by one before it pairs the sums (8)
_STORED = ["tea", "lantern", "harbour", "camping", "ferns", "dentist", "violin", "garden", "bakery", "tram"]
_STORED += ["museum", "glacier", "pottery", "sailing", "orchard", "chess"]


@given(
    st.lists(
        st.lists(st.sampled_from(_STORED), max_size=12),
        min_size=1,
        max_size=60,
    ),
    st.lists(
        st.sampled_from([*_STORED, "camped", "zebra", "kites"]),
        min_size=9,
        max_size=20,
        unique=True,
    ),
)
def test_coverage_adds_each_words_weight_in_the_querys_order(texts, words):
    """``coverages`` sums the words' weights in the query's order, as one addition per word
    would (float addition is not associative: another order may differ in the last bit)."""
    from datetime import UTC, datetime

    import numpy as np

    from atlas_mcp.domain.fusion import Candidate
    from atlas_mcp.domain.lexical import stem
    from atlas_mcp.domain.model import Memory, MemoryType
    from atlas_mcp.domain.pool import Pool

    now = datetime.now(UTC)
    memories = [
        Memory(
            id=f"m{i}", memory_type=MemoryType.SEMANTIC, user_id="u", text=" ".join(t) or "x", created_at=now
        )
        for i, t in enumerate(texts)
    ]
    pool = Pool.of([Candidate(memory=m, rrf_score=None) for m in memories])
    held = calibration._held(words, [stem(w, "en") for w in words], pool.word_codes, len(pool))
    weight = [math.log(1 + len(pool) / (1 + int(c))) for c in held.sum(axis=0)]
    expected = np.zeros(len(pool))
    for j, w in enumerate(weight):
        expected += np.where(held[:, j], w, 0.0)
    assert calibration.coverages(words, pool).tobytes() == (expected / sum(weight)).tobytes()


@given(st.lists(st.frozensets(_WORDS, max_size=8), max_size=6))
def test_a_memorys_codes_are_its_words_codes_packed_as_int32(bags):
    """``encoded`` (codes looked up in one pass, packed by ``array``) gives the bytes numpy's
    int32 packing of ``Codes.add`` gives, for words new to the process and known ones alike."""
    for bag in bags:
        got = vocabulary.encoded(bag)  # may add codes
        want = np.array(vocabulary.WORDS.add(bag) + [vocabulary.END], dtype=np.int32).tobytes()
        assert got == want
        assert vocabulary.joined([got]).tolist() == [*vocabulary.WORDS.add(bag), vocabulary.END]
