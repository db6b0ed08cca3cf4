"""``domain.alignment.opcodes`` aligns two word lists exactly as difflib's SequenceMatcher does
(no junk, no autojunk), which ``domain.sameness`` relied on before it had its own."""

from __future__ import annotations

from difflib import SequenceMatcher

from hypothesis import given, settings
from hypothesis import strategies as st

from atlas_mcp.domain.alignment import opcodes

# few distinct words: many repeats, so many equally long shared runs whose tie-break matters
_WORDS = st.lists(st.sampled_from(["a", "b", "c", "d", "<liking>", "lisbon"]), max_size=14)


@settings(max_examples=600)
@given(_WORDS, _WORDS)
def test_the_opcodes_are_difflibs(a, b):
    assert opcodes(a, b) == SequenceMatcher(None, a, b, autojunk=False).get_opcodes()


def test_the_longest_shared_run_first_then_each_side():
    # "in" is shared too, but on the other side of "glasgow" in each: the runs found first
    # (earliest in the first list) leave it to a replaced region.
    a = "nora moved to glasgow in may".split()
    b = "nora lives in glasgow since may".split()
    assert opcodes(a, b) == [
        ("equal", 0, 1, 0, 1),
        ("replace", 1, 3, 1, 3),
        ("equal", 3, 4, 3, 4),
        ("replace", 4, 5, 4, 5),
        ("equal", 5, 6, 5, 6),
    ]
    assert opcodes([], []) == [] and opcodes(["x"], ["x"]) == [("equal", 0, 1, 0, 1)]
    assert opcodes(["x"], []) == [("delete", 0, 1, 0, 0)] and opcodes([], ["y"]) == [("insert", 0, 0, 0, 1)]
