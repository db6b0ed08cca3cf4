"""Hypothesis strategies for hostile tool arguments, and the invariant every call must keep."""

from __future__ import annotations

import re
from typing import Any

from hypothesis import strategies as st

ONE_MB_TEXT = "memory " * (1_000_000 // 7)
FTS5_SYNTAX = [
    '"',
    "*",
    "NEAR(",
    "NEAR(a b, 2)",
    "AND",
    "OR",
    "NOT",
    ":",
    "text:x",
    "^a",
    "{a b}",
    "a*",
    '"a" "',
]
LUCENE_SYNTAX = [
    "title:x~2",
    "a AND b",
    "+x -y",
    '"unterminated',
    "x^10",
    "[a TO z]",
    "/re.*/",
    "\\",
    "*:*",
    "?",
]
SQL_FRAGMENTS = [
    "'; DROP TABLE memories; --",
    "1 OR 1=1",
    '" OR ""="',
    "') UNION SELECT * FROM memories --",
    "%",
    "_",
    "user_id IS NULL",
]
MALFORMED_IDS = ["", " ", "../etc/passwd", "a" * 300, "id with space", "ïd", "-leading", "x;y", "*", "null"]
CONTROL = "".join(chr(c) for c in (*range(32), 127)) + "\u200b\u202e\ufeff"


def json_values(allow_surrogates: bool = False) -> st.SearchStrategy[Any]:
    """Any JSON value: the 'wrong JSON type' for every argument."""
    text = (
        st.text(max_size=20)
        if allow_surrogates
        else st.text(st.characters(exclude_categories=["Cs"]), max_size=20)
    )
    scalars = (
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | text
    )
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
        max_leaves=6,
    )


def hostile_text(allow_surrogates: bool = False) -> st.SearchStrategy[str]:
    chars = st.characters() if allow_surrogates else st.characters(exclude_categories=["Cs"])
    return st.one_of(
        st.just(""),
        st.text(st.sampled_from(" \t\r\n\u00a0\u2003"), min_size=1, max_size=20),
        st.just(ONE_MB_TEXT),
        st.text(st.sampled_from(CONTROL), min_size=1, max_size=20),
        st.text(st.sampled_from(CONTROL) | chars, min_size=1, max_size=40),
        st.sampled_from(FTS5_SYNTAX + LUCENE_SYNTAX + SQL_FRAGMENTS),
        st.lists(st.sampled_from(FTS5_SYNTAX + LUCENE_SYNTAX + SQL_FRAGMENTS), min_size=2, max_size=6).map(
            " ".join
        ),
        st.text(chars, max_size=200),
    )


def arguments(
    own_ids: list[str], foreign_ids: list[str], catalog_ids: list[str], allow_surrogates: bool = False
) -> st.SearchStrategy[tuple[str, Any]]:
    """(tool name, arguments) with every argument omitted, valid, hostile or of the wrong type.

    With ``allow_surrogates`` (in-process sessions) arguments stay objects: the SDK client itself
    refuses to send anything else, so only the raw stdio wire can try that.
    """
    wrong = json_values(allow_surrogates)
    text = hostile_text(allow_surrogates) | wrong
    ids = st.sampled_from(own_ids + foreign_ids + catalog_ids + MALFORMED_IDS + SQL_FRAGMENTS) | wrong
    k = st.integers(-(10**20), 10**20) | st.integers(-2, 120) | wrong
    types = (
        st.lists(st.sampled_from(["episodic", "semantic", "procedural", "catalog", "Semantic", "x"])) | wrong
    )
    kind = st.sampled_from(["episodic", "semantic", "procedural", "catalog", "", "SEMANTIC", "fact"]) | wrong
    impersonation = {"user_id": st.sampled_from(["bob", "default", ""]), "user": st.just("bob")}
    recall = st.fixed_dictionaries(
        {"query": text},
        optional={
            "k": k,
            "memory_types": types,
            "include_catalog": st.booleans() | wrong,
            "include_superseded": st.booleans() | wrong,
            **impersonation,
        },
    )
    write = st.fixed_dictionaries(
        {"text": text},
        optional={
            "memory_type": kind,
            "supersedes_id": ids | st.lists(ids, max_size=60),
            "contradiction": st.sampled_from(["natural", "harsh", "HARSH", ""]) | wrong,
            "occurred_at": st.sampled_from(["2026-01-01T00:00:00Z", "yesterday", "9999-99-99", ""]) | wrong,
            "confidence": st.floats(-1e9, 1e9, allow_nan=False) | wrong,
            "fact_type": st.sampled_from(["preference", "identity", "world", "opinion"]) | wrong,
            "steps": st.lists(
                text | st.fixed_dictionaries({"instruction": text}, optional={"tool": text}), max_size=4
            )
            | wrong,
            "metadata": st.dictionaries(st.text(max_size=8), wrong, max_size=4) | wrong,
            **impersonation,
        },
    )
    forget = st.fixed_dictionaries({"memory_id": ids}, optional=impersonation)
    missing_or_not_an_object = st.just({}) if allow_surrogates else st.one_of(st.just({}), wrong)
    return st.one_of(
        st.tuples(st.just("recall_memory"), recall | missing_or_not_an_object),
        st.tuples(st.just("write_memory"), write | missing_or_not_an_object),
        st.tuples(st.just("forget_memory"), forget | missing_or_not_an_object),
    )


def check_call(
    tool: str, is_error: bool, payload: Any, before: dict[str, dict], after: dict[str, dict], attacker: str
) -> None:
    """A result or a clear tool error; only the caller's own data may change, and only as asked."""
    if is_error:
        assert isinstance(payload, str) and payload.strip(), "an error must say what went wrong"
        # The SDK's bare "Error executing tool X" means an unexpected exception escaped a tool.
        assert not re.fullmatch(r"Error executing tool \w+", payload.strip()), "unexpected exception"
        assert "Traceback" not in payload
        assert after == before, "a refused call changed stored data"
        return
    added, removed = after.keys() - before.keys(), before.keys() - after.keys()
    changed = {i for i in before.keys() & after.keys() if before[i] != after[i]}
    for memory_id in added | removed | changed:
        row = after.get(memory_id) or before[memory_id]
        assert row["user_id"] == attacker, f"{tool} touched a memory of {row['user_id']!r}"
    if tool == "recall_memory":
        assert not added and not removed
        for memory_id in changed:
            diff = {k for k in after[memory_id] if after[memory_id][k] != before[memory_id][k]}
            assert diff <= {"last_used_at", "use_count"}, f"recall changed {diff}"
        for memory in payload["memories"]:
            owner = after[memory["id"]]["user_id"]
            assert owner in (attacker, None), f"recall leaked a memory of {owner!r}"
    elif tool == "write_memory" and payload.get("duplicate"):
        # A fact the caller already has is refreshed (its use recorded), never copied.
        assert not added and not removed and changed <= {payload["id"]}
        assert before[payload["id"]]["user_id"] == attacker, "a duplicate of another user's memory"
        for memory_id in changed:
            diff = {k for k in after[memory_id] if after[memory_id][k] != before[memory_id][k]}
            assert diff <= {"last_used_at", "use_count"}, f"a refresh changed {diff}"
    elif tool == "write_memory":
        assert added == {payload["id"]} and not removed
        assert changed == set(payload["superseded"])
        assert all(after[i]["superseded_by"] == payload["id"] for i in changed)
    else:
        assert removed == {payload["id"]} and not added and not changed
