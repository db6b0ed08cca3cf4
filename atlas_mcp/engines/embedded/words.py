"""An owner's words as BM25 keys: analysed columns and questions split, folded and weighted
the way SQLite's ``unicode61 remove_diacritics 2`` tokenizer folds words, over two columns
(surface words and stems).

The words come analysed by ``domain.lexical`` (surface words, CJK bigrams, stems in the text's
language); here they become the keys of ``postings.py``: diacritics folded as FTS5 folded them
(the table is read from SQLite's own tokenizer, so the two never disagree), and a stem marked
so that it shares the vocabulary with surface words without meeting them.
"""

from __future__ import annotations

import sqlite3
import zlib
from typing import NamedTuple

from ...domain.lexical import analyse

# Matching is on stems (and CJK bigrams); the surface word adds a fifth on top, so "called"
# ranks "is called Marek" above "call the plumber" (docs/performance.md, "Constants measured").
TERM_WEIGHT = 0.2
STEM_WEIGHT = 1.0
MAX_QUERY_WORDS = 64  # per column: words of a longer question beyond these are not matched
STEM_MARK = "\x01"  # stems share the vocabulary with surface words, told apart by this prefix


def _latin_folding() -> dict[int, str]:
    """Latin letters with diacritics → their base letter, and combining marks → nothing, as
    FTS5's ``unicode61 remove_diacritics 2`` indexed them (é → e, ő → o; ß, ø and ł kept).
    Read from SQLite's own tokenizer, once, so the two never disagree."""
    candidates = [chr(c) for r in ((0xC0, 0x250), (0x300, 0x370), (0x1E00, 0x1F00)) for c in range(*r)]
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize='unicode61 remove_diacritics 2')")
        conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
        conn.executemany("INSERT INTO t(rowid, x) VALUES (?, ?)", [(ord(c), f"q{c}q") for c in candidates])
        # A separator (×, ÷) splits its row in two tokens: only one-token rows fold.
        indexed = dict(conn.execute("SELECT doc, min(term) FROM v GROUP BY doc HAVING count(*) = 1"))
    finally:
        conn.close()
    return {code: term[1:-1] for code, term in indexed.items() if term[1:-1] != chr(code)}


_FOLDING = _latin_folding()


def folded(column: str) -> str:
    return column if column.isascii() else column.translate(_FOLDING)


def tokens(column: str) -> list[str]:
    """The words of an analysed column as the index keeps them (diacritics folded)."""
    return folded(column).split()


def digest(terms: str, stems: str) -> int:
    """A row's words, fingerprinted the same way in every process (``hash`` is salted per
    process), so a saved snapshot can tell which of its rows still hold."""
    return zlib.crc32(terms.encode()) << 32 | zlib.crc32(stems.encode())


def row_words(terms: str, stems: str) -> tuple[list[str], int]:
    surface, stemmed = tokens(terms), tokens(stems)
    return surface + [STEM_MARK + w for w in stemmed], len(surface) + len(stemmed)


class QueryWord(NamedTuple):  # a tuple: a question makes ~40 (a frozen dataclass took ~1 us each)
    key: str  # as in the vocabulary (a stem carries ``STEM_MARK``)
    weight: float


def query_words(text: str, language: str | None) -> list[QueryWord]:
    """The question's distinct surface words and stems, analysed as the rows were. A word
    that folds onto another counts twice: the question asked for both spellings."""
    analysis = analyse(text, language)
    out: list[QueryWord] = []
    for words, mark, weight in ((analysis.terms, "", TERM_WEIGHT), (analysis.stems, STEM_MARK, STEM_WEIGHT)):
        for word in list(dict.fromkeys([w.lower() for w in words]))[:MAX_QUERY_WORDS]:
            for one in folded(word).split():  # ``tokens``
                out.append(QueryWord(mark + one, weight))
    return out
