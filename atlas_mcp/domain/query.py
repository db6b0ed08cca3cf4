"""Query analysis: what of a recall query each retrieval branch should see.

The dense branch reads the whole question. The BM25 branch gets its content words: function
words ("what", "did", "the"; "qué", "la"; "der", "ist") match nearly every memory, so in an
OR-query they only add noise to the ranking (+0.01-0.02 R@10 and +0.02 multi-hop R@10 on
LoCoMo when dropped). Which words are function words depends on the query's language
(``domain.lexical``); words written in capitals ("IT") are kept.
"""

from __future__ import annotations

from .lexical import content_words


def lexical_query(query: str) -> str:
    """The query's content words, in order, for the BM25 branch; the query itself if none are."""
    words = content_words(query)
    return " ".join(words) if words else query
