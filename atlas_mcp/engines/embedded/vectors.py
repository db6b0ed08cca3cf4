"""Per-owner vector matrices, cached in memory and refreshed when another write lands.

Exact cosine over one owner's vectors is one pass over its matrix, so no approximate index is
needed at agent-memory scale. The cache holds the vectors as float16 (SQLite keeps float32):
half the memory (77 MB instead of 154 MB at 100k memories) and half the bytes a scan reads,
which SimSIMD's f16 dot-product kernels turn into ~1.5 ms per 100k vectors on 2 cores where
numpy's float32 product took ~9 ms; cosines move by < 3e-4. The
cache is keyed by ``owner_versions``: any process that changes an owner's vectors or
supersession state bumps that owner's version, and every process reloads only what changed
on its next recall. A process's *own* inserts are applied in place instead (``apply_insert``):
at 100k memories a reload costs ~0.5 s of CPU, and an agent writes between most recalls.

Rows are kept in rowid order whichever way they arrived, so a cache grown by appends holds
exactly what a fresh load would, and recall does not depend on the cache's history.

A store may hold vectors of two models (``inference.embedder.ModelChoice``): each row keeps
the code of its vector space (``VectorCache.spaces``), and a query is compared with each row
in that row's own space only, so two spaces are never compared with each other.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import simsimd

from ...domain.model import MemoryType
from ...inference.embedder import REFERENCE_BACKGROUND, on_reference_scale
from ...inference.runtime import release_free_heap
from . import slots, versions
from . import snapshots as saved_postings
from .passages import from_blob
from .postings import OwnerPostings
from .versions import Change

CATALOG_OWNER = ""
TYPE_CODES: dict[str, int] = {t.value: code for code, t in enumerate(MemoryType)}
HEADROOM_ROWS = 1_024  # appends before the matrix must grow
FETCH_CHUNK = 1_000
CACHED_DTYPE = np.float16
PARALLEL_SCAN_ROWS = 50_000
PRINT_FLOATS = 4  # the leading float32s of a stored embedding that fingerprint it


class OwnerVectors:
    """One owner's vectors in rowid order, with spare rows so appends rarely copy.

    Row ``i`` holds the first passage's vector of the ``i``-th memory; the later passages of
    long memories live in a second, smaller matrix (``extra``) that names its row. A row
    with zero passages is pending: it has no vector yet, so only the lexical branch sees it.
    """

    def __init__(self, dimensions: int, version: int = -1, capacity: int = 0) -> None:
        self.version = version
        self.size = 0
        self.last_rowid = 0
        self.ids: list[str] = []
        self.rowids: dict[int, int] = {}  # rowid -> row of matrix
        self.index: dict[str, int] = {}  # memory id -> row of matrix
        self._matrix = np.zeros((capacity, dimensions), dtype=CACHED_DTYPE)
        self._prints = np.zeros((capacity, PRINT_FLOATS), dtype=np.float32)
        self._passages = np.zeros(capacity, dtype=np.uint16)
        self._codes = np.zeros(capacity, dtype=np.uint8)
        self._spaces = np.zeros(capacity, dtype=np.uint8)  # per row: its vector's space code
        self._superseded = np.zeros(capacity, dtype=bool)
        self._extra = np.zeros((0, dimensions), dtype=CACHED_DTYPE)
        self._extra_rows = np.zeros(0, dtype=np.int64)  # -1: a dropped passage
        self.extra_size = 0
        self._extras_of: dict[int, list[int]] = {}  # row -> its positions in ``_extra``
        self.postings = OwnerPostings()  # the same rows' words, for BM25

    @property
    def matrix(self) -> np.ndarray:
        return self._matrix[: self.size]

    @property
    def codes(self) -> np.ndarray:
        return self._codes[: self.size]

    @property
    def superseded(self) -> np.ndarray:
        return self._superseded[: self.size]

    @property
    def spaces(self) -> np.ndarray:
        return self._spaces[: self.size]

    def spaces_present(self) -> list[int]:
        """The space codes of the rows that have vectors (one for a single-language owner)."""
        ready = self.ready
        if not ready.any():
            return []
        return [int(code) for code in np.flatnonzero(np.bincount(self.spaces[ready]))]

    @property
    def ready(self) -> np.ndarray:
        """Per row: are its vectors there (False while its embedding is pending)?"""
        return self._passages[: self.size] > 0

    def has_vectors(self, row: int) -> bool:
        return bool(self._passages[row])

    @property
    def extra(self) -> np.ndarray:
        return self._extra[: self.extra_size]

    @property
    def extra_rows(self) -> np.ndarray:
        return self._extra_rows[: self.extra_size]

    def fill(self, rows: Sequence[tuple]) -> None:
        """Set the cheap columns (rowid, id, type, superseded) of an empty cache, in rowid order."""
        count = len(rows)
        self.ids = [r[1] for r in rows]
        self.rowids = {r[0]: i for i, r in enumerate(rows)}
        self.index = {memory_id: i for i, memory_id in enumerate(self.ids)}
        self._codes[:count] = [TYPE_CODES[r[2]] for r in rows]
        self._superseded[:count] = [bool(r[3]) for r in rows]
        self.size = count
        self.last_rowid = rows[-1][0] if rows else 0

    def append_pending(self, rowid: int, memory_id: str, memory_type: str) -> None:
        """A new row whose vectors are still to come (``put_passages`` fills them in)."""
        if self.size == len(self._matrix):
            self._grow()
        row = self.size
        self._matrix[row] = 0
        self._prints[row] = 0
        self._passages[row] = 0
        self._spaces[row] = 0
        self._codes[row] = TYPE_CODES[memory_type]
        self._superseded[row] = False
        self.ids.append(memory_id)
        self.rowids[rowid] = row
        self.index[memory_id] = row
        self.size += 1
        self.last_rowid = rowid

    def put(self, rows: Sequence[int] | range, vectors: np.ndarray, spaces: np.ndarray | int) -> None:
        """Store single-passage float32 ``vectors`` (as read from SQLite) at ``rows``."""
        index = slice(rows.start, rows.stop) if isinstance(rows, range) else rows
        self._matrix[index] = vectors
        self._prints[index] = vectors[:, :PRINT_FLOATS]
        self._passages[index] = 1
        self._spaces[index] = spaces

    def put_passages(self, row: int, vectors: np.ndarray, space: int) -> None:
        """Store one memory's (passages, dimensions) float32 vectors at ``row``."""
        self._drop_extras(row)
        self._matrix[row] = vectors[0]
        self._prints[row] = vectors[0, :PRINT_FLOATS]
        self._passages[row] = len(vectors)
        self._spaces[row] = space
        if len(vectors) > 1:
            self._add_extras(row, vectors[1:])

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

    def mark_superseded(self, memory_ids: Iterable[str]) -> None:
        for memory_id in memory_ids:
            self._superseded[self.index[memory_id]] = True

    def _grow(self) -> None:
        # Grow by an eighth (not double): at 100k vectors the matrix is 77 MB of the RSS budget.
        capacity = self.size + max(HEADROOM_ROWS, self.size // 8)
        for name in ("_matrix", "_prints", "_passages", "_spaces", "_codes", "_superseded"):
            old = getattr(self, name)
            new = np.zeros((capacity, *old.shape[1:]), dtype=old.dtype)
            new[: self.size] = old[: self.size]
            setattr(self, name, new)

    def adopt(self, old: OwnerVectors, kept: np.ndarray, reuse: np.ndarray, in_place: bool) -> None:
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
            return
        taken = np.flatnonzero(reuse)
        self._matrix[taken] = old._matrix[kept[reuse]]
        self._prints[taken] = old._prints[kept[reuse]]
        self._passages[taken] = old._passages[kept[reuse]]
        self._spaces[taken] = old._spaces[kept[reuse]]
        if old._extras_of:
            moved = np.full(old.size, -1, dtype=np.int64)
            moved[kept[reuse]] = taken
            for old_row, positions in old._extras_of.items():
                if old_row < old.size and moved[old_row] >= 0:
                    self._add_extras(int(moved[old_row]), old._extra[positions])


def owner_key(user_id: str | None) -> str:
    return CATALOG_OWNER if user_id is None else user_id


def _owner_rows(conn: sqlite3.Connection, owner: str) -> tuple[str, tuple] | None:
    """WHERE clause and parameters for the owner's rows, read in rowid order from its block."""
    block = slots.owner_range(conn, owner)
    if block is None:
        return None
    # The unary + keeps SQLite on the rowid range (already sorted) rather than the owner index.
    return "rowid BETWEEN ? AND ? AND +user_id IS ?", (*block, owner or None)


class VectorCache:
    def __init__(self, dimensions: int, snapshots: Path | None = None) -> None:
        self._dimensions = dimensions
        self._snapshots = saved_postings.PostingsSnapshots(snapshots) if snapshots is not None else None
        self._owners: dict[str, OwnerVectors] = {}
        self.spaces: list[str] = []  # space code -> the model id whose vectors it holds

    def space_code(self, model_id: str) -> int:
        if model_id not in self.spaces:
            self.spaces.append(model_id)
        return self.spaces.index(model_id)

    def peek(self, owner: str) -> OwnerVectors | None:
        """The owner's cached vectors as they are, maybe stale (no I/O): for guesses only."""
        return self._owners.get(owner)

    def get(self, conn: sqlite3.Connection, owner: str) -> OwnerVectors:
        version = versions.stamp(conn, owner).version
        cached = self._owners.get(owner)
        if cached is None or cached.version != version:
            cached = self._reload(conn, owner, version, cached)
            self._owners[owner] = cached
            release_free_heap()
        return cached

    def _following(self, change: Change) -> OwnerVectors | None:
        """The owner's cache if it was current just before ``change``; otherwise the next
        ``get`` reloads it."""
        cached = self._owners.get(change.owner)
        return cached if cached is not None and change.follows(cached.version) else None

    def apply_insert(
        self,
        change: Change,
        rowid: int,
        memory_id: str,
        memory_type: str,
        superseded: Sequence[str],
        words: tuple[str, str],
        *,
        arrived_superseded: bool = False,
    ) -> None:
        """Apply this process's own committed insert (its vectors still pending; ``words``:
        its ``lexical_terms`` and ``lexical_stems``; ``arrived_superseded``: the memory was
        written already superseded, as ``import`` restores a store's history).

        A rowid below the cached ones (SQLite reuses the top rowid after a delete) would break
        rowid order, so that case reloads instead."""
        cached = self._following(change)
        if cached is None or rowid <= cached.last_rowid:
            return
        if any(target not in cached.index for target in superseded):
            del self._owners[change.owner]  # cannot happen if the cache was current; reload to be safe
            return
        cached.append_pending(rowid, memory_id, memory_type)
        cached.postings.put(cached.rowids[rowid], *words)
        cached.mark_superseded([*superseded, memory_id] if arrived_superseded else superseded)
        cached.version = change.after.version

    def apply_vectors(self, change: Change, stored: Sequence[tuple[int, np.ndarray, str]]) -> None:
        """Apply vectors this process has just stored for rows of the change's owner."""
        cached = self._following(change)
        if cached is None:
            return
        for rowid, vectors, model_id in stored:
            row = cached.rowids.get(rowid)
            if row is None:  # not in this cache: reload rather than guess
                del self._owners[change.owner]
                return
            cached.put_passages(row, vectors, self.space_code(model_id))
        cached.version = change.after.version

    def _reload(
        self, conn: sqlite3.Connection, owner: str, version: int, old: OwnerVectors | None
    ) -> OwnerVectors:
        """Re-read the cheap columns; fetch embeddings only for rows this process lacks or that changed."""
        where = _owner_rows(conn, owner)
        if where is None:
            return OwnerVectors(self._dimensions, version)
        if old is None or old.size == 0:
            return self._load_all(conn, owner, where, version)
        # An embedding's first 16 bytes and its length are its fingerprint: update() and the
        # repair re-embed a row in place (same rowid), and a cached vector may be reused only
        # if it is still the stored one.
        rows = conn.execute(
            "SELECT rowid, id, memory_type, superseded_by IS NOT NULL, "
            f"substr(embedding, 1, {4 * PRINT_FLOATS}), length(embedding) FROM memories "
            f"WHERE {where[0]} ORDER BY rowid",
            where[1],
        ).fetchall()
        # A pending row (empty embedding) is never reused: it is fetched again.
        kept = np.array([old.rowids.get(r[0], -1) if r[4] else -1 for r in rows], dtype=np.int64)
        # Same rows in the same places (a supersession, a change made elsewhere): the new cache
        # takes the old buffers over instead of copying 77 MB at 100k memories.
        in_place = len(rows) <= len(old._matrix) and np.array_equal(kept, np.arange(len(rows)))
        capacity = len(old._matrix) if in_place else len(rows) + HEADROOM_ROWS
        fresh = OwnerVectors(self._dimensions, version, capacity=capacity)
        fresh.fill(rows)
        reuse = kept >= 0
        if reuse.any():
            at = np.flatnonzero(reuse)
            prints = np.frombuffer(b"".join(rows[i][4] for i in at), dtype=np.float32)
            passages = np.array([rows[i][5] for i in at], dtype=np.int64) // (4 * self._dimensions)
            reuse[at] = (old._prints[kept[at]] == prints.reshape(-1, PRINT_FLOATS)).all(axis=1) & (
                old._passages[kept[at]] == passages
            )
        fresh.adopt(old, kept, reuse, in_place)
        fresh.postings = _moved_postings(old, [r[0] for r in rows])
        # A row's words are re-read where its vector is (its text changed, or only its vector:
        # ``put`` compares digests); a reused vector proves the text unchanged.
        self._fetch_embeddings(conn, [rows[i][0] for i in np.flatnonzero(~reuse)], fresh)
        return fresh

    def _load_all(
        self, conn: sqlite3.Connection, owner: str, where: tuple[str, tuple], version: int
    ) -> OwnerVectors:
        """Cold load: one pass over the owner's block, already in rowid order."""
        count = conn.execute(f"SELECT count(*) FROM memories WHERE {where[0]}", where[1]).fetchone()[0]
        fresh = OwnerVectors(self._dimensions, version, capacity=count + HEADROOM_ROWS)
        cursor = conn.execute(
            f"SELECT rowid, id, memory_type, superseded_by IS NOT NULL, embedding, embedding_model, "
            f"lexical_terms, lexical_stems FROM memories WHERE {where[0]} ORDER BY rowid",
            where[1],
        )
        cheap: list[tuple] = []
        words: list[tuple[str, str]] = []
        while len(cheap) < count and (chunk := cursor.fetchmany(FETCH_CHUNK)):
            chunk = chunk[: count - len(cheap)]  # rows a concurrent writer added wait for the next version
            start = len(cheap)
            cheap.extend(r[:4] for r in chunk)
            words.extend(r[6:8] for r in chunk)
            self._place([(start + i, r[4], r[5]) for i, r in enumerate(chunk)], fresh)
        fresh.fill(cheap)
        self._fill_postings(fresh, owner, words)
        return fresh

    def _fill_postings(self, into: OwnerVectors, owner: str, words: list[tuple[str, str]]) -> None:
        """An owner's postings from its saved snapshot where one still mostly holds, else from
        its words; a large owner's are saved again when they changed (``snapshots.py``)."""
        snapshots = self._snapshots if len(words) >= saved_postings.SNAPSHOT_MIN_ROWS else None
        if snapshots is None:
            into.postings.fill(words)
            return
        rowids = np.fromiter(into.rowids, dtype=np.int64, count=len(into.rowids))
        saved = snapshots.read(owner)
        restored = OwnerPostings.restored(saved, rowids, words) if saved is not None else None
        if restored is not None and not restored.pending_rows():
            into.postings = restored
            return
        if restored is None:
            into.postings.fill(words)
        else:
            restored.rebuild()
            into.postings = restored
        snapshots.write(owner, into.postings.snapshot(rowids))

    def forgot(self, owner: str) -> None:
        """A memory of ``owner``'s was deleted: its words leave the disk with it (the saved
        postings are dropped, and written again at the next start)."""
        if self._snapshots is not None:
            self._snapshots.drop(owner)

    def _fetch_embeddings(self, conn: sqlite3.Connection, rowids: list[int], into: OwnerVectors) -> None:
        for start in range(0, len(rowids), FETCH_CHUNK):
            chunk = rowids[start : start + FETCH_CHUNK]
            marks = ",".join("?" * len(chunk))
            found = conn.execute(
                "SELECT rowid, embedding, embedding_model, lexical_terms, lexical_stems FROM memories "
                f"WHERE rowid IN ({marks})",
                chunk,
            ).fetchall()
            found = [r for r in found if r[0] in into.rowids]  # a concurrent insert's: next version
            self._place([(into.rowids[r[0]], r[1], r[2]) for r in found], into)
            for rowid, _, _, terms, stems in found:
                into.postings.put(into.rowids[rowid], terms, stems)

    def _place(self, blobs: list[tuple[int, bytes, str]], into: OwnerVectors) -> None:
        """Copy stored embeddings into their rows: single-passage ones in one block, long
        memories passage by passage; pending (empty) ones stay without vectors."""
        single = 4 * self._dimensions
        plain = [(row, blob, model) for row, blob, model in blobs if len(blob) == single]
        if plain:
            block = np.frombuffer(b"".join(blob for _, blob, _ in plain), dtype=np.float32)
            rows = [row for row, _, _ in plain]
            if rows == list(range(rows[0], rows[0] + len(rows))):
                rows = range(rows[0], rows[0] + len(rows))
            spaces = np.array([self.space_code(model) for _, _, model in plain], dtype=np.uint8)
            into.put(rows, block.reshape(len(plain), self._dimensions), spaces)
        for row, blob, model in blobs:
            if len(blob) > single:
                into.put_passages(row, from_blob(blob, self._dimensions), self.space_code(model))


def _moved_postings(old: OwnerVectors, rowids: list[int]) -> OwnerPostings:
    """``old``'s postings for the owner's rows now (``rowids``, in order), renumbered."""
    moved = np.full(old.size, -1, dtype=np.int64)
    for row, rowid in enumerate(rowids):
        before = old.rowids.get(rowid)
        if before is not None:
            moved[before] = row
    if len(rowids) == old.postings.size and np.array_equal(moved, np.arange(old.size)):
        return old.postings
    return old.postings.renumber(moved, len(rowids))


def allowed_rows(vectors: OwnerVectors, allowed_types: set[str], include_superseded: bool) -> np.ndarray:
    """Per row: may a recall return it? (an allowed type and, unless asked, not superseded)."""
    by_code = np.zeros(len(TYPE_CODES), dtype=bool)
    by_code[[TYPE_CODES[t] for t in allowed_types if t in TYPE_CODES]] = True
    mask = by_code[vectors.codes]
    if not include_superseded:
        mask &= ~vectors.superseded
    return mask


@dataclass(frozen=True, slots=True)
class SpaceQuery:
    """A query embedded in one vector space, and where that space's cosines of unrelated
    pairs sit (``inference.embedder.cosine_background``)."""

    vector: np.ndarray
    background: tuple[float, float]


def searchable(vectors: OwnerVectors, queries: Mapping[int, SpaceQuery]) -> np.ndarray:
    """Per row: has it a vector in a space the query was embedded in?"""
    return vectors.ready & np.isin(vectors.spaces, list(queries))


def similarities(vectors: OwnerVectors, queries: Mapping[int, SpaceQuery], threads: int) -> np.ndarray:
    """Per cached row, the cosine of the (unit) query with its best passage, the query being
    embedded in the row's own space, as float32 (0 for a row that ``searchable`` rules out:
    pending, or of a space the query was not embedded in). ``on_one_scale`` then makes the
    cosines of different spaces comparable."""
    out = np.zeros(vectors.size, dtype=np.float32)
    if not vectors.size:
        return out
    spaces = vectors.spaces
    single_space = len(queries) == 1
    for code, query in queries.items():
        mine = None if single_space else spaces == code
        query16 = np.asarray(query.vector, dtype=CACHED_DTYPE)[None, :]
        scores = _dot(query16, vectors.matrix, threads)
        if vectors.extra_size:
            rows, extra = vectors.extra_rows, _dot(query16, vectors.extra, threads)
            live = rows >= 0
            np.maximum.at(scores, rows[live], extra[live])
        if mine is None:
            out = scores
        else:
            out[mine] = scores[mine]
    return out


# How many rows the measured background of a model counts for against the rows of one recall
# when that recall spans two spaces: a space holding few of the rows leans on the measurement.
# On a bilingual MADial store (each user's memories half English, half Chinese; R@10 of the
# English / Chinese questions): fixed mapping 0.574 / 0.303, 20 rows 0.571 / 0.323, 10 rows
# 0.573 / 0.339, 5 rows 0.575 / 0.354, 2 rows 0.565 / 0.359 (e5 alone 0.534 / 0.319).
BACKGROUND_PRIOR_ROWS = 5


def on_one_scale(
    cosines: Sequence[np.ndarray],
    owners: Sequence[tuple[OwnerVectors, np.ndarray]],
    queries: Mapping[int, SpaceQuery],
) -> list[np.ndarray]:
    """Every row's cosine on MiniLM's scale (``REFERENCE_BACKGROUND``), per owner.

    A recall in one space maps it by the model's measured background (MiniLM: unchanged, so
    English-only recall is exactly what it was). A recall spanning two spaces standardises
    each against this query's own cosines over that space's rows (``owners``: each owner's
    vectors and its searched rows), shrunk towards the measured background: e5's unrelated
    pairs sit near 0.75 for English but 0.85 for Chinese, so one fixed mapping would rank
    every Chinese memory above every English one for a Chinese question.
    """
    if len(queries) == 1:
        ((code, query),) = queries.items()
        if query.background == REFERENCE_BACKGROUND:
            return list(cosines)
        return [on_reference_scale(c, query.background) for c in cosines]
    out = [c.copy() for c in cosines]
    for code, query in queries.items():
        rows = [(vectors.spaces == code) & searched for vectors, searched in owners]
        pooled = np.concatenate([c[mine] for c, mine in zip(cosines, rows, strict=True)]).astype(np.float64)
        prior_mean, prior_spread = query.background
        weight = len(pooled) + BACKGROUND_PRIOR_ROWS
        mean = (pooled.sum() + BACKGROUND_PRIOR_ROWS * prior_mean) / weight
        spread = np.sqrt((((pooled - mean) ** 2).sum() + BACKGROUND_PRIOR_ROWS * prior_spread**2) / weight)
        for target, c, mine in zip(out, cosines, rows, strict=True):
            target[mine] = on_reference_scale(c[mine], (mean, float(spread)))
    return out


def query_backgrounds(
    scores: Sequence[np.ndarray], owners: Sequence[tuple[OwnerVectors, np.ndarray]], codes: Iterable[int]
) -> dict[int, float]:
    """Per vector space, the mean on-scale cosine of this query with the rows searched in it,
    shrunk towards the reference background (a few rows say little): where its unrelated
    pairs sit for this query."""
    out = {}
    for code in codes:
        pooled = np.concatenate(
            [
                s[(vectors.spaces == code) & searched]
                for s, (vectors, searched) in zip(scores, owners, strict=True)
            ]
        ).astype(np.float64)
        prior = REFERENCE_BACKGROUND[0] * BACKGROUND_PRIOR_ROWS
        out[code] = float((pooled.sum() + prior) / (len(pooled) + BACKGROUND_PRIOR_ROWS))
    return out


def _dot(query16: np.ndarray, matrix: np.ndarray, threads: int) -> np.ndarray:
    # Threads pay off only on big matrices: on a busy 2-core machine a 2-thread scan of 10k
    # rows took 38 ms against 2.9 ms on one thread (their start-up waits for a free core).
    threads = threads if len(matrix) >= PARALLEL_SCAN_ROWS else 1
    scores = simsimd.cdist(query16, matrix, metric="dot", out_dtype="float32", threads=threads)
    return np.asarray(scores).reshape(-1)


def top_rows(scores: np.ndarray, allowed: np.ndarray, window: int) -> np.ndarray:
    """Indices of the ``window`` best-scoring allowed rows, best first; ties go to the lower row
    (the older memory), also at the cut-off, so the result never depends on the sort's luck."""
    candidates = np.flatnonzero(allowed)  # ascending rows
    negated = -scores[candidates]
    if candidates.size > window:
        cutoff = np.partition(negated, window - 1)[window - 1]
        better = negated < cutoff
        tied = np.flatnonzero(negated == cutoff)[: window - int(better.sum())]
        keep = np.concatenate([np.flatnonzero(better), tied])
        candidates, negated = candidates[keep], negated[keep]
    return candidates[np.lexsort((candidates, negated))]
