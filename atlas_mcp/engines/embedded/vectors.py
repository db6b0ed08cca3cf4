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
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence

import numpy as np
import simsimd

from ...domain.model import MemoryType
from ...inference.embedder import Embedder
from ...inference.runtime import release_free_heap
from . import slots
from .pending import PendingWrite

CATALOG_OWNER = ""
TYPE_CODES: dict[str, int] = {t.value: code for code, t in enumerate(MemoryType)}
HEADROOM_ROWS = 1_024  # appends before the matrix must grow
FETCH_CHUNK = 1_000
CACHED_DTYPE = np.float16
PRINT_FLOATS = 4  # the leading float32s of a stored embedding that fingerprint it


class OwnerVectors:
    """One owner's vectors in rowid order, with spare rows so appends rarely copy."""

    def __init__(self, dimensions: int, version: int = -1, capacity: int = 0) -> None:
        self.version = version
        self.size = 0
        self.last_rowid = 0
        self.ids: list[str] = []
        self.rowids: dict[int, int] = {}  # rowid -> row of matrix
        self.index: dict[str, int] = {}  # memory id -> row of matrix
        self._matrix = np.zeros((capacity, dimensions), dtype=CACHED_DTYPE)
        self._prints = np.zeros((capacity, PRINT_FLOATS), dtype=np.float32)
        self._codes = np.zeros(capacity, dtype=np.uint8)
        self._superseded = np.zeros(capacity, dtype=bool)

    @property
    def matrix(self) -> np.ndarray:
        return self._matrix[: self.size]

    @property
    def codes(self) -> np.ndarray:
        return self._codes[: self.size]

    @property
    def superseded(self) -> np.ndarray:
        return self._superseded[: self.size]

    def fill(self, rows: Sequence[tuple[int, str, str, int]]) -> None:
        """Set the cheap columns (rowid, id, type, superseded) of an empty cache, in rowid order."""
        count = len(rows)
        self.ids = [r[1] for r in rows]
        self.rowids = {r[0]: i for i, r in enumerate(rows)}
        self.index = {memory_id: i for i, memory_id in enumerate(self.ids)}
        self._codes[:count] = [TYPE_CODES[r[2]] for r in rows]
        self._superseded[:count] = [bool(r[3]) for r in rows]
        self.size = count
        self.last_rowid = rows[-1][0] if rows else 0

    def append(self, rowid: int, memory_id: str, memory_type: str, vector: np.ndarray) -> None:
        if self.size == len(self._matrix):
            self._grow()
        row = self.size
        self._matrix[row] = vector
        self._prints[row] = vector[:PRINT_FLOATS]
        self._codes[row] = TYPE_CODES[memory_type]
        self._superseded[row] = False
        self.ids.append(memory_id)
        self.rowids[rowid] = row
        self.index[memory_id] = row
        self.size += 1
        self.last_rowid = rowid

    def put(self, rows: Sequence[int] | range, vectors: np.ndarray) -> None:
        """Store float32 ``vectors`` (as read from SQLite) at ``rows``."""
        index = slice(rows.start, rows.stop) if isinstance(rows, range) else rows
        self._matrix[index] = vectors
        self._prints[index] = vectors[:, :PRINT_FLOATS]

    def mark_superseded(self, memory_ids: Iterable[str]) -> None:
        for memory_id in memory_ids:
            self._superseded[self.index[memory_id]] = True

    def _grow(self) -> None:
        # Grow by an eighth (not double): at 100k vectors the matrix is 77 MB of the RSS budget.
        capacity = self.size + max(HEADROOM_ROWS, self.size // 8)
        for name in ("_matrix", "_prints", "_codes", "_superseded"):
            old = getattr(self, name)
            new = np.zeros((capacity, *old.shape[1:]), dtype=old.dtype)
            new[: self.size] = old[: self.size]
            setattr(self, name, new)


def owner_key(user_id: str | None) -> str:
    return CATALOG_OWNER if user_id is None else user_id


def owner_version(conn: sqlite3.Connection, owner: str) -> int:
    row = conn.execute("SELECT version FROM owner_versions WHERE owner = ?", (owner,)).fetchone()
    return row[0] if row else 0


def bump_version(conn: sqlite3.Connection, owner: str) -> None:
    conn.execute(
        "INSERT INTO owner_versions(owner, version) VALUES (?, 1) "
        "ON CONFLICT(owner) DO UPDATE SET version = version + 1",
        (owner,),
    )


def _owner_rows(conn: sqlite3.Connection, owner: str) -> tuple[str, tuple] | None:
    """WHERE clause and parameters for the owner's rows, read in rowid order from its block."""
    block = slots.owner_range(conn, owner)
    if block is None:
        return None
    # The unary + keeps SQLite on the rowid range (already sorted) rather than the owner index.
    return "rowid BETWEEN ? AND ? AND +user_id IS ?", (*block, owner or None)


class VectorCache:
    def __init__(self, embedder: Embedder) -> None:
        self._embedder = embedder  # for rows whose embedding is still pending elsewhere
        self._dimensions = embedder.dimensions
        self._owners: dict[str, OwnerVectors] = {}

    def get(self, conn: sqlite3.Connection, owner: str) -> OwnerVectors:
        version = owner_version(conn, owner)
        cached = self._owners.get(owner)
        if cached is None or cached.version != version:
            cached = self._reload(conn, owner, version, cached)
            self._owners[owner] = cached
            release_free_heap()
        return cached

    def apply_insert(self, write: PendingWrite, vector: np.ndarray) -> None:
        """Apply this process's own committed insert, if the cache was current just before it.

        ``write.version_before`` was read inside the writing transaction, so equality proves no
        other writer touched this owner in between; otherwise the next ``get`` reloads as usual.
        A rowid below the cached ones (SQLite reuses the top rowid after a delete) would break
        rowid order, so that case reloads too.
        """
        cached = self._owners.get(write.owner)
        if cached is None or cached.version != write.version_before or write.rowid <= cached.last_rowid:
            return
        if any(target not in cached.index for target in write.superseded):
            del self._owners[write.owner]  # cannot happen if the cache was current; reload to be safe
            return
        cached.append(write.rowid, write.memory_id, write.memory_type, vector)
        cached.mark_superseded(write.superseded)
        cached.version = write.version_before + 1

    def _reload(
        self, conn: sqlite3.Connection, owner: str, version: int, old: OwnerVectors | None
    ) -> OwnerVectors:
        """Re-read the cheap columns; fetch embeddings only for rows this process lacks or that changed."""
        where = _owner_rows(conn, owner)
        if where is None:
            return OwnerVectors(self._dimensions, version)
        if old is None or old.size == 0:
            return self._load_all(conn, where, version)
        # The first 16 bytes of each embedding are its fingerprint: update() re-embeds a row in
        # place (same rowid), and a cached vector may be reused only if it is still the stored one.
        rows = conn.execute(
            "SELECT rowid, id, memory_type, superseded_by IS NOT NULL, "
            f"substr(embedding, 1, {4 * PRINT_FLOATS}) FROM memories WHERE {where[0]} ORDER BY rowid",
            where[1],
        ).fetchall()
        # A pending row (empty embedding) is never reused: it is fetched, i.e. embedded, anew.
        kept = np.array([old.rowids.get(r[0], -1) if r[4] else -1 for r in rows], dtype=np.int64)
        # Same rows in the same places (a supersession, a change made elsewhere): the new cache
        # takes the old buffers over instead of copying 77 MB at 100k memories.
        in_place = len(rows) <= len(old._matrix) and np.array_equal(kept, np.arange(len(rows)))
        capacity = len(old._matrix) if in_place else len(rows) + HEADROOM_ROWS
        fresh = OwnerVectors(self._dimensions, version, capacity=capacity)
        fresh.fill(rows)
        reuse = kept >= 0
        if reuse.any():
            prints = np.frombuffer(b"".join(rows[i][4] for i in np.flatnonzero(reuse)), dtype=np.float32)
            reuse[reuse] = (old._prints[kept[reuse]] == prints.reshape(-1, PRINT_FLOATS)).all(axis=1)
        if in_place:
            fresh._matrix, fresh._prints = old._matrix, old._prints
        else:
            fresh._matrix[np.flatnonzero(reuse)] = old._matrix[kept[reuse]]
            fresh._prints[np.flatnonzero(reuse)] = old._prints[kept[reuse]]
        missing = [rows[i][0] for i in np.flatnonzero(~reuse)]
        self._fetch_embeddings(conn, missing, fresh)
        return fresh

    def _load_all(self, conn: sqlite3.Connection, where: tuple[str, tuple], version: int) -> OwnerVectors:
        """Cold load: one pass over the owner's block, already in rowid order."""
        count = conn.execute(f"SELECT count(*) FROM memories WHERE {where[0]}", where[1]).fetchone()[0]
        fresh = OwnerVectors(self._dimensions, version, capacity=count + HEADROOM_ROWS)
        cursor = conn.execute(
            f"SELECT rowid, id, memory_type, superseded_by IS NOT NULL, embedding FROM memories "
            f"WHERE {where[0]} ORDER BY rowid",
            where[1],
        )
        cheap: list[tuple] = []
        pending: list[int] = []
        while len(cheap) < count and (chunk := cursor.fetchmany(FETCH_CHUNK)):
            chunk = chunk[: count - len(cheap)]  # rows a concurrent writer added wait for the next version
            start = len(cheap)
            cheap.extend(r[:4] for r in chunk)
            if all(r[4] for r in chunk):
                block = np.frombuffer(b"".join(r[4] for r in chunk), dtype=np.float32)
                fresh.put(range(start, start + len(chunk)), block.reshape(len(chunk), self._dimensions))
            else:
                positions = {r[0]: start + i for i, r in enumerate(chunk)}
                pending.extend(r[0] for r in chunk if not r[4])
                self._place([(r[0], r[4]) for r in chunk if r[4]], fresh, positions)
        fresh.fill(cheap)
        self._embed_pending(conn, pending, fresh)
        return fresh

    def _fetch_embeddings(self, conn: sqlite3.Connection, rowids: list[int], into: OwnerVectors) -> None:
        pending: list[int] = []
        for start in range(0, len(rowids), FETCH_CHUNK):
            chunk = rowids[start : start + FETCH_CHUNK]
            marks = ",".join("?" * len(chunk))
            found = conn.execute(
                f"SELECT rowid, embedding FROM memories WHERE rowid IN ({marks})", chunk
            ).fetchall()
            pending.extend(rowid for rowid, blob in found if not blob)
            self._place([(rowid, blob) for rowid, blob in found if blob], into, into.rowids)
        self._embed_pending(conn, pending, into)

    def _place(self, chunk: list[tuple[int, bytes]], into: OwnerVectors, rowids: dict[int, int]) -> None:
        """Copy a batch of stored embeddings into their rows (rows a concurrent insert added are skipped)."""
        known = [(rowids[rowid], blob) for rowid, blob in chunk if rowid in rowids]
        if not known:
            return
        positions = [p for p, _ in known]
        block = np.frombuffer(b"".join(blob for _, blob in known), dtype=np.float32)
        into.put(positions, block.reshape(len(known), self._dimensions))

    def _embed_pending(self, conn: sqlite3.Connection, rowids: list[int], into: OwnerVectors) -> None:
        """Embed rows whose writer has not stored their vector yet (it will store the same one)."""
        if not rowids:
            return
        marks = ",".join("?" * len(rowids))
        texts = conn.execute(
            f"SELECT rowid, search_text FROM memories WHERE rowid IN ({marks})", rowids
        ).fetchall()
        vectors = self._embedder.embed_batch([text for _, text in texts])
        into.put([into.rowids[rowid] for rowid, _ in texts], np.asarray(vectors, dtype=np.float32))


def allowed_rows(vectors: OwnerVectors, allowed_types: set[str], include_superseded: bool) -> np.ndarray:
    """Per row: may a recall return it? (an allowed type and, unless asked, not superseded)."""
    by_code = np.zeros(len(TYPE_CODES), dtype=bool)
    by_code[[TYPE_CODES[t] for t in allowed_types if t in TYPE_CODES]] = True
    mask = by_code[vectors.codes]
    if not include_superseded:
        mask &= ~vectors.superseded
    return mask


def similarities(vectors: OwnerVectors, query: np.ndarray, threads: int) -> np.ndarray:
    """Cosine of the (unit) query with every cached row, as float32."""
    if not vectors.size:
        return np.zeros(0, dtype=np.float32)
    query16 = np.asarray(query, dtype=CACHED_DTYPE)[None, :]
    scores = simsimd.cdist(query16, vectors.matrix, metric="dot", out_dtype="float32", threads=threads)
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
