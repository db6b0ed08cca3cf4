"""Query analysis: what of a recall query each retrieval branch should see.

The dense branch reads the whole question. The BM25 branch gets its content words: English
function words ("what", "did", "the") match nearly every memory, so in an OR-query they only
add noise to the ranking (+0.01-0.02 R@10 and +0.02 multi-hop R@10 on LoCoMo when dropped).
Words written in capitals ("IT") are kept, and month-like or name-like words ("May", "Will",
"US") are not in the list: they carry meaning.
"""

from __future__ import annotations

import re

_WORD = re.compile(r"\w+", re.UNICODE)

FUNCTION_WORDS = frozenset(
    """
    a an the and or but if of to in on at by for with from about as into over after before up
    down out off again once than then so not no nor is are was were be been being am do does did
    done have has had having what which who whom whose when where why how that this these those
    it its i you he she we they me him her them my your his our their mine yours hers ours
    theirs myself yourself there here can could would should shall might must just
    also any some all each every very too more most other such own same
    """.split()
)


def lexical_query(query: str) -> str:
    """The query's content words, in order, for the BM25 branch; the query itself if none are."""
    words = [w for w in _WORD.findall(query) if not _is_function_word(w)]
    return " ".join(words) if words else query


def _is_function_word(word: str) -> bool:
    shouted = len(word) > 1 and word.isupper()
    return not shouted and word.lower() in FUNCTION_WORDS
