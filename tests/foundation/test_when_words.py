"""``time_intent`` skips its searches for a query holding none of the words every rule needs."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from atlas_mcp.domain import when
from atlas_mcp.eval import mixed_suite

NOW = datetime(2026, 3, 11, 15, 30, tzinfo=UTC)
RULES = [pattern for pattern, _ in when._WINDOW_RULES] + [when._NEWEST, when._OLDEST]
PIECES = st.sampled_from(
    [
        "last", "LAST", "lAst", "week", "WEEKEND", "weeK", "nıght", "nİght", "NIGHT", "ago", "3",
        "three", "days", "7", "March", "MAY", "may", "Sunday", "SUNDAY", "yesterday", "Yeſterday",
        "today", "tonight", "morning", "first", "FİRST", "earliest", "latest", "most recent",
        "my", "the", "did I", "time", "ever", "in", "on", "this", "past", "of", "2024", "trip",
        "dentist", "wek", "firts", "lst", "ﬁrst", "Kelvin", "\u212aelvin", "month", "year", "I",
    ]
)  # fmt: skip


@given(st.lists(PIECES, max_size=8), st.sampled_from([" ", "-", ", ", "", "?"]))
def test_a_query_without_the_needed_words_matches_no_rule(pieces, separator):
    query = separator.join(pieces)
    if not when._may_name_time(query):
        assert not any(rule.search(query) for rule in RULES), query


def test_the_suites_questions_read_the_same_time():
    suite = mixed_suite.load()
    queries = [q["query"] for tenant in suite["tenants"].values() for q in tenant["questions"]]
    queries += ["What did I do last weekend?", "my most recent dentist trip", "hi", "Wo wohne ich?"]
    assert any(when._may_name_time(q) for q in queries) and any(not when._may_name_time(q) for q in queries)
    for query in queries:
        if not when._may_name_time(query):
            assert not any(rule.search(query) for rule in RULES), query
            assert when.time_intent(query, NOW) == when.TimeIntent()
