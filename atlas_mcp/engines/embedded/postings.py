"""BM25 from per-owner postings kept in memory next to the owner's vectors.

SQLite FTS5's ``bm25()`` costs ~2 µs per matched row, and a question's common words match
thousands of rows (an event's text starts with its date: "2023" is in half of them), so at
100k memories it would be half of every recall. Here each owner's analysed columns
(``lexical_terms``, ``lexical_stems``, written by ``domain.lexical``) are kept as postings,
one sorted list of (row, count) per word, and a question costs one numpy pass per word.

The score is FTS5's ``bm25()`` formula (k1 1.2, b 0.75, IDF floored at 1e-6, a
stem counting ``words.STEM_WEIGHT``, a surface word ``TERM_WEIGHT``, a row as long as its terms
and stems), with one change: the statistics (row count, rows per word, mean length) are
those of the rows the caller can see — their own rows and the catalog when asked — not the
whole file's, so other tenants' memories never move a user's scores, and at least
``MIN_COUNTED_ROWS`` rows are counted, so a word in one of a new user's three memories is
not scored as if it were in half of the index.

Postings are built once per process (like the vector cache) and kept current: a row added or
changed since goes to ``recent`` (a dict), a changed row's built entries are masked as
outdated, and the lists are rebuilt, one linear merge, once ``recent`` grows past an
eighth of them. A row's ``(terms, stems)`` digest tells whether a re-read changed it.

Building a large owner's postings costs ~1.5 s per 100k memories, so they are also saved
beside the database (``saved_postings.py``) and a later start restores them:
``restored`` keeps each saved row whose rowid and digest still match and adds the rest.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import numpy as np

from .words import STEM_MARK, QueryWord, digest, folded, row_words

K1 = 1.2
B = 0.75
IDF_FLOOR = 1e-6  # FTS5's: a word in half the rows or more scores almost nothing
# Counting at least this many rows keeps IDF informative in small stores (tuned on the
# household scenarios in five languages and the mixed suite; see docs/recall.md).
MIN_COUNTED_ROWS = 100
RECENT_ROWS_MIN = 512  # rows added or changed before the lists are rebuilt, at the least
_ROW_BITS = 32
SAVED_FORMAT = 1  # what ``OwnerPostings.to_saved`` writes; another number is not read
_ROW_BREAK = " \x02 "  # between rows when columns are split a block at a time (never in analysed text)
_FILL_BLOCK = 4096  # rows split at once by ``fill``


class _Vocabulary(dict[str, int]):
    def __missing__(self, word: str) -> int:
        code = self[word] = len(self)
        return code


class OwnerPostings:
    """One owner's words, by row of its ``index.OwnerIndex`` (row ``i`` is the ``i``-th memory)."""

    def __init__(self) -> None:
        self.vocabulary = _Vocabulary()
        self.size = 0
        self.total_length = 0.0
        self.lengths = np.zeros(0, dtype=np.float64)
        self._digests: list[int | None] = []
        # Built lists: word w's entries are _rows/_counts[_starts[w]:_starts[w + 1]].
        self._starts = np.zeros(1, dtype=np.int64)
        self._rows = np.zeros(0, dtype=np.int32)
        self._counts = np.zeros(0, dtype=np.uint32)
        self._current = np.zeros(0, dtype=bool)  # per row: its built entries still hold
        self._built_rows = 0
        self._outdated = 0
        self._recent: dict[int, dict[int, int]] = {}  # word -> {row: count}, since the build
        self._recent_rows: dict[int, list[int]] = {}  # row -> its words in ``_recent``

    def fill(self, columns: Sequence[tuple[str, str]]) -> None:
        """Build an empty owner's lists from its rows' ``(lexical_terms, lexical_stems)``.

        Columns are joined, split and looked up a block of rows at a time, a separator word
        between rows: row by row in Python this took 2.2 s at 100k memories, on the first
        recall's path, and splitting everything at once held ~250 MB of words."""
        self._grow(len(columns))
        self._digests[: len(columns)] = [digest(terms, stems) for terms, stems in columns]
        keys = []
        for start in range(0, len(columns), _FILL_BLOCK):
            block_keys, lengths = self._block_keys(columns, start)
            keys.append(block_keys)
            self.lengths[start : start + len(lengths)] = lengths
        self.size = len(columns)
        self.total_length = float(self.lengths[: self.size].sum())
        self._set_built(*self._counted(keys))

    def _counted(self, parts: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """``np.unique`` of the keys in ``parts`` (emptied: the one copy left is the sorted
        one) with counts, sorting by word only: rows already come in order within each word,
        and a stable sort of words under 2**16 is a radix sort (0.14 s instead of 0.31 at 100k
        memories)."""
        keys = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
        parts.clear()
        codes = keys >> _ROW_BITS
        if len(self.vocabulary) <= 1 << 16:
            codes = codes.astype(np.uint16)
        keys = keys[np.argsort(codes, kind="stable")]
        del codes
        if len(keys) and not np.all(keys[1:] >= keys[:-1]):  # a word in both columns of a block
            keys, counts = np.unique(keys, return_counts=True)
            return keys, counts.astype(np.uint32)
        starts_run = np.empty(len(keys), dtype=bool)
        starts_run[:1] = True
        np.not_equal(keys[1:], keys[:-1], out=starts_run[1:])
        first = np.flatnonzero(starts_run)
        del starts_run
        counts = np.diff(first, append=len(keys)).astype(np.uint32)
        return keys[first], counts

    def _block_keys(self, columns: Sequence[tuple[str, str]], start: int) -> tuple[np.ndarray, np.ndarray]:
        """Rows ``start``.. of one block: a (word, row) key per word, and each row's length."""
        block = columns[start : start + _FILL_BLOCK]
        surface = _ROW_BREAK.join(folded(terms) for terms, _ in block)
        stemmed = (STEM_MARK + _ROW_BREAK.join(folded(stems) for _, stems in block)).replace(
            " ", " " + STEM_MARK
        )
        lone_mark = self.vocabulary[STEM_MARK]  # an empty stems column leaves one
        code_parts: list[np.ndarray] = []
        row_parts: list[np.ndarray] = []
        for text, row_break in ((surface, _ROW_BREAK.strip()), (stemmed, STEM_MARK + _ROW_BREAK.strip())):
            words = text.split()
            found = np.fromiter(map(self.vocabulary.__getitem__, words), dtype=np.int64, count=len(words))
            breaks = found == self.vocabulary[row_break]
            kept = ~breaks & (found != lone_mark)
            code_parts.append(found[kept])
            row_parts.append(np.cumsum(breaks)[kept] + start)
        codes, rows = np.concatenate(code_parts), np.concatenate(row_parts)
        return (codes << _ROW_BITS) | rows, np.bincount(rows - start, minlength=len(block))

    def put(self, row: int, terms: str, stems: str) -> None:
        """Row ``row`` now holds this text (a new row, or a re-read one that may have changed)."""
        fingerprint = digest(terms, stems)
        if row < self.size and self._digests[row] == fingerprint:
            return
        if row >= self.size:
            self._grow(row + 1)
            self.size = row + 1
        self._drop(row)
        words, length = row_words(terms, stems)
        counted = Counter(map(self.vocabulary.__getitem__, words))
        for code, count in counted.items():
            self._recent.setdefault(code, {})[row] = count
        self._recent_rows[row] = list(counted)
        self.lengths[row] = length
        self.total_length += length
        self._digests[row] = fingerprint
        if len(self._recent_rows) + self._outdated > max(RECENT_ROWS_MIN, self._built_rows // 8):
            self.rebuild()

    def _drop(self, row: int) -> None:
        if row < len(self._current) and self._current[row]:
            self._current[row] = False
            self._outdated += 1
        for code in self._recent_rows.pop(row, ()):
            del self._recent[code][row]
        self.total_length -= self.lengths[row]
        self.lengths[row] = 0

    def _grow(self, size: int) -> None:
        if size > len(self.lengths):
            capacity = max(size, len(self.lengths) + len(self.lengths) // 8 + 64)
            self.lengths = np.concatenate([self.lengths, np.zeros(capacity - len(self.lengths))])
        self._digests.extend([None] * (size - len(self._digests)))

    def entries(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        """The rows holding ``key`` and how often each does."""
        code = self.vocabulary.get(key)
        if code is None:
            return _NO_ENTRIES
        rows, counts = _NO_ENTRIES
        if code + 1 < len(self._starts):
            start, stop = self._starts[code], self._starts[code + 1]
            rows, counts = self._rows[start:stop], self._counts[start:stop]
            if self._outdated:
                current = self._current[rows]
                rows, counts = rows[current], counts[current]
        recent = self._recent.get(code)
        if recent:
            rows = np.concatenate([rows, np.fromiter(recent.keys(), np.int32, len(recent))])
            counts = np.concatenate([counts, np.fromiter(recent.values(), np.uint32, len(recent))])
        return rows, counts

    def rebuild(self) -> None:
        """Fold ``recent`` into the built lists, dropping outdated entries (one linear merge)."""
        keys, counts = self._built_keys(keep=self._current[self._rows])
        recent = [
            (code << _ROW_BITS | row, n) for code, rows in self._recent.items() for row, n in rows.items()
        ]
        if recent:
            recent.sort()
            new_keys = np.array([k for k, _ in recent], dtype=np.int64)
            at = np.searchsorted(keys, new_keys)
            keys = np.insert(keys, at, new_keys)
            counts = np.insert(counts, at, np.array([n for _, n in recent], dtype=np.uint32))
        self._set_built(keys, counts)

    def renumber(self, moved: np.ndarray, size: int) -> OwnerPostings:
        """These postings for a reloaded owner: old row ``i`` is now row ``moved[i]`` (-1: gone),
        ``size`` rows in all; rows that are new here are added by ``put``. ``moved`` keeps
        the rows' order (both are rowid order), so every list stays sorted."""
        fresh = OwnerPostings()
        fresh.vocabulary = self.vocabulary
        fresh._grow(size)
        fresh.size = size
        old = np.flatnonzero(moved[: self.size] >= 0)
        fresh.lengths[moved[old]] = self.lengths[old]
        for i in old:
            fresh._digests[moved[i]] = self._digests[i]
        fresh.total_length = float(fresh.lengths[:size].sum())
        keep = self._current[self._rows] & (moved[self._rows] >= 0)
        keys, counts = self._built_keys(keep)
        keys = (keys >> _ROW_BITS << _ROW_BITS) | moved[keys & ((1 << _ROW_BITS) - 1)]
        fresh._set_built(keys, counts)
        for row, codes in self._recent_rows.items():
            if row < len(moved) and moved[row] >= 0:
                fresh._recent_rows[int(moved[row])] = codes
                for code in codes:
                    fresh._recent.setdefault(code, {})[int(moved[row])] = self._recent[code][row]
        fresh._current[list(fresh._recent_rows)] = False
        return fresh

    def pending_rows(self) -> int:
        """Rows added or changed since the lists were last built."""
        return len(self._recent_rows) + self._outdated

    def to_saved(self, rowids: np.ndarray) -> dict[str, np.ndarray] | None:
        """What ``restored`` needs to skip ``fill`` next time, row ``i`` being ``rowids[i]``;
        None while changes wait in ``recent`` (only built lists are saved)."""
        if self._recent or self._outdated or len(rowids) != self.size:
            return None
        return {
            "format": np.array([SAVED_FORMAT]),
            "vocabulary": np.frombuffer("\n".join(self.vocabulary).encode(), dtype=np.uint8),
            "starts": self._starts,
            "rows": self._rows,
            "counts": self._counts,
            "lengths": self.lengths[: self.size].copy(),
            "rowids": np.asarray(rowids, dtype=np.int64),
            "digests": np.array(self._digests[: self.size], dtype=np.uint64),
        }

    @classmethod
    def restored(
        cls, saved: dict[str, np.ndarray], rowids: np.ndarray, columns: Sequence[tuple[str, str]]
    ) -> OwnerPostings | None:
        """Postings for rows ``rowids`` holding ``columns``, from those saved of an earlier state:
        a saved row is kept where its rowid and digest still match, every other row is added
        from its columns. None if what was saved is unreadable or holds under half the rows."""
        old = _from_saved(saved)
        if old is None:
            return None
        saved_rowids, saved_digests = saved["rowids"], saved["digests"]
        at = np.minimum(np.searchsorted(rowids, saved_rowids), max(len(rowids) - 1, 0))
        digests = np.array([digest(terms, stems) for terms, stems in columns], dtype=np.uint64)
        held = (rowids[at] == saved_rowids) & (digests[at] == saved_digests) if len(rowids) else at < 0
        if 2 * int(held.sum()) < len(rowids):
            return None
        if held.all() and len(rowids) == old.size:
            return old  # nothing changed since it was saved
        fresh = old.renumber(np.where(held, at, -1), len(rowids))
        covered = np.zeros(len(rowids), dtype=bool)
        covered[at[held]] = True
        for row in np.flatnonzero(~covered):
            fresh.put(int(row), *columns[int(row)])
        return fresh

    def _built_keys(self, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        codes = np.repeat(np.arange(len(self._starts) - 1, dtype=np.int64), np.diff(self._starts))
        keys = (codes[keep] << _ROW_BITS) | self._rows[keep].astype(np.int64)
        return keys, self._counts[keep]

    def _set_built(self, keys: np.ndarray, counts: np.ndarray) -> None:
        self._rows = (keys & ((1 << _ROW_BITS) - 1)).astype(np.int32)
        self._counts = counts
        self._starts = np.searchsorted(keys >> _ROW_BITS, np.arange(len(self.vocabulary) + 1)).astype(
            np.int64
        )
        self._current = np.ones(max(self.size, 1), dtype=bool)
        self._built_rows = self.size
        self._outdated = 0
        self._recent.clear()
        self._recent_rows.clear()


_NO_ENTRIES = (np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.uint32))


def _from_saved(saved: dict[str, np.ndarray]) -> OwnerPostings | None:
    """The saved postings as they were, or None if any part is missing or inconsistent."""
    try:
        if saved["format"].tolist() != [SAVED_FORMAT]:
            return None
        text = saved["vocabulary"].tobytes().decode()
        starts, rows, counts = saved["starts"], saved["rows"], saved["counts"]
        lengths, rowids, digests = saved["lengths"], saved["rowids"], saved["digests"]
    except (KeyError, AttributeError, UnicodeDecodeError):
        return None
    words = text.split("\n") if text else []
    size = len(rowids)
    consistent = (
        starts.dtype == np.int64 and rows.dtype == np.int32 and counts.dtype == np.uint32
        and rowids.dtype == np.int64 and digests.dtype == np.uint64 and lengths.dtype == np.float64
        and len(starts) == len(words) + 1 and starts[0] == 0 and starts[-1] == len(rows) == len(counts)
        and bool(np.all(np.diff(starts) >= 0)) and len(lengths) == len(digests) == size
        and len(set(words)) == len(words) and bool(np.all(np.diff(rowids) > 0))
        and (not len(rows) or (int(rows.min()) >= 0 and int(rows.max()) < size))
    )  # fmt: skip
    if not consistent:
        return None
    postings = OwnerPostings()
    postings.vocabulary.update((word, code) for code, word in enumerate(words))
    postings._grow(size)
    postings.size = size
    postings.lengths[:size] = lengths
    postings.total_length = float(lengths.sum())
    postings._digests[:size] = digests.tolist()
    postings._starts, postings._rows, postings._counts = starts, rows, counts
    postings._current = np.ones(max(size, 1), dtype=bool)
    postings._built_rows = size
    return postings


def bm25(owners: Sequence[OwnerPostings], words: Sequence[QueryWord]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per owner, the rows some word matched (ascending) and their scores, the statistics
    counted over all of ``owners``' rows (see the module docstring).

    Each owner's entries of every word are scored in one pass and summed per row by one
    ``bincount``, which adds a row's words in the question's order, as a pass per word did
    (the same float operations: ~2x less CPU than a pass per word at 12k memories)."""
    parts: list[list[tuple[np.ndarray, np.ndarray, float, float]]] = [[] for _ in owners]
    rows = sum(p.size for p in owners)
    mean_length = sum(p.total_length for p in owners) / rows if rows else 0.0
    if rows and words:
        counted = max(rows, MIN_COUNTED_ROWS)
        for word in words:
            found = [p.entries(word.key) for p in owners]
            hits = sum(len(r) for r, _ in found)
            if not hits:
                continue
            idf = math.log((counted - hits + 0.5) / (hits + 0.5))
            idf = idf if idf > 0 else IDF_FLOOR
            for mine, (matched_rows, counts) in zip(parts, found, strict=True):
                if len(matched_rows):
                    mine.append((matched_rows, counts, word.weight, idf))
    return [
        _scored(p, mine, mean_length) if mine else _NO_SCORES for p, mine in zip(owners, parts, strict=True)
    ]


_NO_SCORES = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64))


def _scored(
    p: OwnerPostings, parts: list[tuple[np.ndarray, np.ndarray, float, float]], mean_length: float
) -> tuple[np.ndarray, np.ndarray]:
    """One owner's matched rows and scores from each word's (rows, counts, weight, idf)."""
    sizes = [len(r) for r, _, _, _ in parts]
    matched_rows = np.concatenate([r for r, _, _, _ in parts])
    # the arrays' own repeat (np.repeat's Python layer costs more than the repeat here)
    frequency = np.array([w for _, _, w, _ in parts]).repeat(sizes) * np.concatenate(
        [c for _, c, _, _ in parts]
    )
    idf = np.array([i for _, _, _, i in parts]).repeat(sizes)
    norm = K1 * (1 - B + B * p.lengths[matched_rows] / mean_length)
    scores = np.bincount(
        matched_rows, weights=idf * frequency * (K1 + 1) / (frequency + norm), minlength=p.size
    )
    # A matched row's every word adds more than 0 (idf, weight, count > 0); nonzero over a bool
    # mask is ~4x faster than over the floats (8 vs 32 us at 12k rows).
    hit = (scores > 0).nonzero()[0]
    return hit, scores[hit]
