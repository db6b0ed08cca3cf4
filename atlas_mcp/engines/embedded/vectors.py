"""One owner's vectors, a row per memory, as float16 in memory.

Exact cosine over one owner's vectors is one pass over its matrix, so no approximate index is
needed at agent-memory scale. The vectors are kept as float16 (SQLite keeps float32): half the
memory (77 MB instead of 154 MB at 100k memories) and half the bytes a scan reads, which
SimSIMD's f16 dot-product kernels turn into ~1.5 ms per 100k vectors on 2 cores where numpy's
float32 product took ~9 ms; cosines move by < 3e-4.

A store may hold vectors of two models (``inference.embedder.ModelChoice``): each row keeps
the code of its vector space (``index.IndexCache.spaces``), and a query is compared with each
row in that row's own space only, so two spaces are never compared with each other.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from .passages import from_blob

HEADROOM_ROWS = 1_024  # appends before the arrays must grow
CACHED_DTYPE = np.float16
PRINT_FLOATS = 4  # the leading float32s of a stored embedding that fingerprint it


def grown_capacity(size: int) -> int:
    # Grow by an eighth (not double): at 100k vectors the matrix is 77 MB of the RSS budget.
    return size + max(HEADROOM_ROWS, size // 8)


class RowVectors:
    """Row ``i`` holds the first passage's vector of the owner's ``i``-th memory; the later
    passages of long memories live in a second, smaller matrix (``extra``) that names its row.
    A row with zero passages is pending: it has no vector yet, so only the lexical branch sees
    it. Spare rows make appends rarely copy."""

    def __init__(self, dimensions: int, capacity: int = 0) -> None:
        self.size = 0
        self._matrix = np.zeros((capacity, dimensions), dtype=CACHED_DTYPE)
        self._prints = np.zeros((capacity, PRINT_FLOATS), dtype=np.float32)
        self._passages = np.zeros(capacity, dtype=np.uint16)
        self._spaces = np.zeros(capacity, dtype=np.uint8)  # per row: its vector's space code
        self._extra = np.zeros((0, dimensions), dtype=CACHED_DTYPE)
        self._extra_rows = np.zeros(0, dtype=np.int64)  # -1: a dropped passage
        self.extra_size = 0
        self._extras_of: dict[int, list[int]] = {}  # row -> its positions in ``_extra``
        # ``spaces_present`` as of (changes, size): recall asks it 2-3 times per owner, a pass
        # over every row each time (~25 us at 12k rows); a change bumps the count after it is made
        self._changes = 0
        self._present: tuple[int, int, list[int], bool, np.ndarray] = (-1, -1, [], True, np.zeros(0, bool))
        self._searchable: tuple[int, int, frozenset[int], np.ndarray, np.ndarray] = (
            -1,
            -1,
            frozenset(),
            np.zeros(0, bool),
            np.zeros(0, np.uint8),
        )

    @property
    def dimensions(self) -> int:
        return self._matrix.shape[1]

    @property
    def capacity(self) -> int:
        return len(self._matrix)

    @property
    def matrix(self) -> np.ndarray:
        return self._matrix[: self.size]

    @property
    def spaces(self) -> np.ndarray:
        return self._spaces[: self.size]

    @property
    def ready(self) -> np.ndarray:
        """Per row: are its vectors there (False while its embedding is pending)? (read-only,
        kept like ``spaces_present``: each recall's view of the rows holds it)"""
        return self._kept_present()[4]

    def ready_at(self, rows: np.ndarray) -> np.ndarray:
        """``ready`` of ``rows`` alone (rows below ``size``), without a pass over every row."""
        ready: np.ndarray = self._passages[rows] > 0
        return ready

    def has_vectors(self, row: int) -> bool:
        return bool(self._passages[row])

    def spaces_present(self) -> list[int]:
        """The space codes of the rows that have vectors (one for a single-language owner)."""
        return list(self._kept_present()[2])

    def all_ready(self) -> bool:
        """Has every row its vectors (none pending)? Kept like ``spaces_present``."""
        return self._kept_present()[3]

    def _kept_present(self) -> tuple[int, int, list[int], bool, np.ndarray]:
        changes, size = self._changes, self.size  # read first: a change made meanwhile misses
        if self._present[:2] == (changes, size):
            return self._present
        ready = self._passages[:size] > 0
        ready.setflags(write=False)
        found = [int(code) for code in np.flatnonzero(np.bincount(self._spaces[:size][ready]))]
        self._present = (changes, size, found, bool(ready.all()), ready)
        return self._present

    def searchable(self, codes: frozenset[int]) -> np.ndarray:
        """Per row: has it a vector in one of the spaces ``codes``? (read-only; kept as of
        (changes, size, codes) like ``spaces_present``: each recall asks it, ~0.1 ms at 12k)"""
        return self._kept_searchable(codes)[3]

    def searched_spaces(self, codes: frozenset[int]) -> np.ndarray:
        """Per row, its space's code where ``searchable``, else -1 as the spaces' dtype holds it
        (read-only, kept alike)."""
        return self._kept_searchable(codes)[4]

    def _kept_searchable(
        self, codes: frozenset[int]
    ) -> tuple[int, int, frozenset[int], np.ndarray, np.ndarray]:
        changes, size = self._changes, self.size  # read first: a change made meanwhile misses
        kept = self._searchable
        if kept[:3] == (changes, size, codes):
            return kept
        spaces = self._spaces[:size]
        of_codes = spaces == next(iter(codes)) if len(codes) == 1 else np.isin(spaces, list(codes))
        found = (self._passages[:size] > 0) & of_codes
        searched_spaces = np.where(found, spaces, -1)
        found.setflags(write=False)
        searched_spaces.setflags(write=False)
        self._searchable = (changes, size, codes, found, searched_spaces)
        return self._searchable

    @property
    def extra(self) -> np.ndarray:
        return self._extra[: self.extra_size]

    @property
    def extra_rows(self) -> np.ndarray:
        return self._extra_rows[: self.extra_size]

    def append_pending(self) -> None:
        """A new last row whose vectors are still to come (``put_passages`` fills them in)."""
        if self.size == self.capacity:
            self._grow()
        row = self.size
        self._matrix[row] = 0
        self._prints[row] = 0
        self._passages[row] = 0
        self._spaces[row] = 0
        self.size += 1
        self._changes += 1

    def put(self, rows: Sequence[int] | range, vectors: np.ndarray, spaces: np.ndarray | int) -> None:
        """Store single-passage float32 ``vectors`` (as read from SQLite) at ``rows``."""
        index = slice(rows.start, rows.stop) if isinstance(rows, range) else rows
        self._matrix[index] = vectors
        self._prints[index] = vectors[:, :PRINT_FLOATS]
        self._passages[index] = 1
        self._spaces[index] = spaces
        self._changes += 1

    def put_passages(self, row: int, vectors: np.ndarray, space: int) -> None:
        """Store one memory's (passages, dimensions) float32 vectors at ``row``."""
        self._drop_extras(row)
        self._matrix[row] = vectors[0]
        self._prints[row] = vectors[0, :PRINT_FLOATS]
        self._passages[row] = len(vectors)
        self._spaces[row] = space
        if len(vectors) > 1:
            self._add_extras(row, vectors[1:])
        self._changes += 1

    def place(self, blobs: list[tuple[int, bytes, str]], space_code: Callable[[str], int]) -> None:
        """Copy stored embeddings (row, blob, model id) into their rows: single-passage ones
        in one block, long memories passage by passage; pending (empty) ones stay without."""
        single = 4 * self.dimensions
        plain = [(row, blob, model) for row, blob, model in blobs if len(blob) == single]
        if plain:
            block = np.frombuffer(b"".join(blob for _, blob, _ in plain), dtype=np.float32)
            listed = [row for row, _, _ in plain]
            run = range(listed[0], listed[0] + len(listed))
            rows: Sequence[int] = run if listed == list(run) else listed  # a run is one slice
            spaces = np.array([space_code(model) for _, _, model in plain], dtype=np.uint8)
            self.put(rows, block.reshape(len(plain), self.dimensions), spaces)
        for row, blob, model in blobs:
            if len(blob) > single:
                self.put_passages(row, from_blob(blob, self.dimensions), space_code(model))

    def still_stored(self, kept: np.ndarray, prints: bytes, blob_sizes: np.ndarray) -> np.ndarray:
        """Per row of ``kept`` (rows of this matrix): does the stored embedding still have the
        fingerprint it had when it was placed here (``prints``: the leading ``PRINT_FLOATS``
        float32s of each, ``blob_sizes``: their lengths in bytes)?"""
        found = np.frombuffer(prints, dtype=np.float32).reshape(-1, PRINT_FLOATS)
        passages = blob_sizes // (4 * self.dimensions)
        held: np.ndarray = (self._prints[kept] == found).all(axis=1) & (self._passages[kept] == passages)
        return held

    def _add_extras(self, row: int, vectors: np.ndarray) -> None:
        needed = self.extra_size + len(vectors)
        if needed > len(self._extra):
            capacity = max(needed, 2 * len(self._extra), 64)
            grown = np.zeros((capacity, self._extra.shape[1]), dtype=CACHED_DTYPE)
            grown[: self.extra_size] = self._extra[: self.extra_size]
            rows = np.full(capacity, -1, dtype=np.int64)
            rows[: self.extra_size] = self._extra_rows[: self.extra_size]
            self._extra, self._extra_rows = grown, rows
        positions = list(range(self.extra_size, needed))
        self._extra[self.extra_size : needed] = vectors
        self._extra_rows[self.extra_size : needed] = row
        self._extras_of[row] = positions
        self.extra_size = needed

    def _drop_extras(self, row: int) -> None:
        for position in self._extras_of.pop(row, ()):
            self._extra_rows[position] = -1

    def _grow(self) -> None:
        capacity = grown_capacity(self.size)
        for name in ("_matrix", "_prints", "_passages", "_spaces"):
            old = getattr(self, name)
            new = np.zeros((capacity, *old.shape[1:]), dtype=old.dtype)
            new[: self.size] = old[: self.size]
            setattr(self, name, new)

    def adopt(self, old: RowVectors, kept: np.ndarray, reuse: np.ndarray, in_place: bool) -> None:
        """Take over ``old``'s vectors for the rows in ``reuse`` (``kept[i]``: row ``i``'s old row)."""
        renewed = np.flatnonzero(~reuse)
        if in_place:  # same rows, same places: take the buffers instead of copying them
            self._matrix, self._prints, self._passages = old._matrix, old._prints, old._passages
            self._spaces = old._spaces
            self._extra, self._extra_rows, self.extra_size = old._extra, old._extra_rows, old.extra_size
            self._extras_of = old._extras_of
            self._passages[renewed] = 0
            for row in renewed:
                self._drop_extras(int(row))
            self._changes += 1
            return
        taken = np.flatnonzero(reuse)
        self._matrix[taken] = old._matrix[kept[reuse]]
        self._prints[taken] = old._prints[kept[reuse]]
        self._passages[taken] = old._passages[kept[reuse]]
        self._spaces[taken] = old._spaces[kept[reuse]]
        self._changes += 1
        if old._extras_of:
            moved = np.full(old.size, -1, dtype=np.int64)
            moved[kept[reuse]] = taken
            for old_row, positions in old._extras_of.items():
                if old_row < old.size and moved[old_row] >= 0:
                    self._add_extras(int(moved[old_row]), old._extra[positions])
