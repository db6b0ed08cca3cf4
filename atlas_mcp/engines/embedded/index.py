"""Each owner's index in memory: what recall reads of its rows, refreshed when another write lands.

An owner's index (``OwnerIndex``) holds its rows in rowid order: their ids, types and
supersession, and beside them their vectors (``vectors.py``) and their words for BM25
(``postings.py``). The cache (``IndexCache``) is keyed by the owner's version
(``versions.py``): any process that changes an owner's rows bumps it, and every process
reloads only what changed on its next recall. A process's *own* changes are applied in place
instead (``apply_insert``, ``apply_vectors``): at 100k memories a reload costs ~0.5 s of CPU,
and an agent writes between most recalls.

Rows are kept in rowid order whichever way they arrived, so an index grown by appends holds
exactly what a fresh load would, and recall does not depend on the cache's history.
"""

from __future__ import annotations

import sqlite3
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ...domain.model import MemoryType
from ...inference.runtime import release_free_heap
from . import saved_postings, slots, versions
from .postings import OwnerPostings
from .saved_postings import Sealer
from .vectors import HEADROOM_ROWS, PRINT_FLOATS, RowVectors, grown_capacity
from .versions import Change

TYPE_CODES: dict[str, int] = {t.value: code for code, t in enumerate(MemoryType)}
FETCH_CHUNK = 1_000
# Rows another process added that a reload puts into the kept id order one by one (~40 us
# each at 12k rows); past these, working it out again is cheaper.
KEPT_ORDER_APPENDS = 64


class OwnerIndex:
    """One owner's rows in rowid order, with spare rows so appends rarely copy."""

    def __init__(self, dimensions: int, version: int = -1, capacity: int = 0) -> None:
        self.version = version
        self.size = 0
        self.last_rowid = 0
        self.ids: list[str] = []
        self.rowids: dict[int, int] = {}  # rowid -> row
        self.index: dict[str, int] = {}  # memory id -> row
        self._codes = np.zeros(capacity, dtype=np.uint8)
        self._superseded = np.zeros(capacity, dtype=bool)
        self.vectors = RowVectors(dimensions, capacity)
        self.postings = OwnerPostings()  # the same rows' words, for BM25
        # ``id_order`` once asked, with the ids in that order (kept through appends)
        self._id_order: tuple[np.ndarray, list[str]] | None = None
        self._marks = 0  # supersessions marked in place (what ``allowed`` was kept for)
        self._allowed: tuple[tuple[frozenset[str], bool, int, int], np.ndarray] | None = None

    @property
    def codes(self) -> np.ndarray:
        return self._codes[: self.size]

    @property
    def superseded(self) -> np.ndarray:
        return self._superseded[: self.size]

    def fill(self, rows: Sequence[tuple[Any, ...]]) -> None:
        """Set the cheap columns (rowid, id, type, superseded) of an empty index, in rowid order."""
        count = len(rows)
        self.ids = [r[1] for r in rows]
        self.rowids = {r[0]: i for i, r in enumerate(rows)}
        self.index = {memory_id: i for i, memory_id in enumerate(self.ids)}
        self._codes[:count] = [TYPE_CODES[r[2]] for r in rows]
        self._superseded[:count] = [bool(r[3]) for r in rows]
        self.size = self.vectors.size = count
        self.last_rowid = rows[-1][0] if rows else 0
        self._id_order = None
        self._allowed = None

    def append_pending(self, rowid: int, memory_id: str, memory_type: str, words: tuple[str, str]) -> None:
        """A new row whose vectors are still to come (``vectors.put_passages`` fills them in)."""
        if self.size == len(self._codes):
            self._grow()
        row = self.size
        self.vectors.append_pending()
        self._codes[row] = TYPE_CODES[memory_type]
        self._superseded[row] = False
        self.ids.append(memory_id)
        self.rowids[rowid] = row
        self.index[memory_id] = row
        self.size += 1
        self.last_rowid = rowid
        self.postings.put(row, *words)
        self._id_order = _with_ids(self._id_order, row, [memory_id])

    def id_order(self) -> np.ndarray:
        """Per row, its id's place among the owner's ids in string order (read-only): what
        breaks a fusion tie between rows (``fusion.fused_keys``) without comparing ids on
        every recall. Worked out when first asked (~2.5 ms at 12k rows, ~0.1 s at 100k),
        then kept through appends and reloads that only add rows (``keep_id_order``)."""
        kept = self._id_order
        if kept is not None and len(kept[0]) == self.size:
            return kept[0]
        ids = self.ids[: self.size]
        by_id = sorted(range(len(ids)), key=ids.__getitem__)
        order = np.empty(len(ids), dtype=np.int32)  # half the bytes an append moves
        order[by_id] = np.arange(len(ids))
        order.setflags(write=False)
        self._id_order = (order, [ids[i] for i in by_id])
        return order

    def keep_id_order(self, old: OwnerIndex) -> None:
        """Take ``old``'s ``id_order`` if it was worked out and this index holds its ids, in the
        same rows, and at most ``KEPT_ORDER_APPENDS`` more after them (another process's writes)."""
        n = old.size
        if old._id_order is None or not 0 <= self.size - n <= KEPT_ORDER_APPENDS or self.ids[:n] != old.ids:
            return
        order, by_id = old._id_order
        self._id_order = _with_ids((order, list(by_id)), n, self.ids[n:])

    def mark_superseded(self, memory_ids: Iterable[str]) -> None:
        for memory_id in memory_ids:
            self._superseded[self.index[memory_id]] = True
        self._marks += 1

    def allowed(self, allowed_types: set[str], include_superseded: bool) -> np.ndarray:
        """Per row: may a recall return it? (an allowed type and, unless asked, not superseded;
        read-only, kept until a row is added or superseded: recalls ask the same each time)."""
        key = (frozenset(allowed_types), include_superseded, self.size, self._marks)
        kept = self._allowed
        if kept is not None and kept[0] == key:
            return kept[1]
        by_code = np.zeros(len(TYPE_CODES), dtype=bool)
        by_code[[TYPE_CODES[t] for t in allowed_types if t in TYPE_CODES]] = True
        mask: np.ndarray = by_code[self.codes]
        if not include_superseded:
            mask &= ~self.superseded
        mask.setflags(write=False)
        self._allowed = (key, mask)
        return mask

    def _grow(self) -> None:
        capacity = grown_capacity(self.size)
        for name in ("_codes", "_superseded"):
            old = getattr(self, name)
            new = np.zeros(capacity, dtype=old.dtype)
            new[: self.size] = old[: self.size]
            setattr(self, name, new)


def _with_ids(
    kept: tuple[np.ndarray, list[str]] | None, size: int, new_ids: list[str]
) -> tuple[np.ndarray, list[str]] | None:
    """``kept`` (the id order of ``size`` rows, with the ids sorted) with ``new_ids`` as the
    next rows, each one place more from its id's on (O(rows) each); None if nothing is kept."""
    if kept is None or len(kept[0]) != size:
        return None
    order, by_id = kept
    for memory_id in new_ids:
        at = bisect_left(by_id, memory_id)
        by_id.insert(at, memory_id)
        grown = np.empty(len(order) + 1, dtype=order.dtype)  # one pass (np.append made three)
        np.add(order, order >= at, out=grown[:-1], casting="unsafe")
        grown[-1] = at
        order = grown
    order.setflags(write=False)
    return order, by_id


def _owner_rows(conn: sqlite3.Connection, owner: str) -> tuple[str, tuple[Any, ...]] | None:
    """WHERE clause and parameters for the owner's rows, read in rowid order from its block."""
    block = slots.owner_range(conn, owner)
    if block is None:
        return None
    # The unary + keeps SQLite on the rowid range (already sorted) rather than the owner index.
    return "rowid BETWEEN ? AND ? AND +user_id IS ?", (*block, owner or None)


class IndexCache:
    def __init__(
        self, dimensions: int, postings_folder: Path | None = None, sealer: Sealer | None = None
    ) -> None:
        self._dimensions = dimensions
        self._saved = (
            saved_postings.SavedPostings(postings_folder, sealer) if postings_folder is not None else None
        )
        self._owners: dict[str, OwnerIndex] = {}
        self.spaces: list[str] = []  # space code -> the model id whose vectors it holds

    def space_code(self, model_id: str) -> int:
        if model_id not in self.spaces:
            self.spaces.append(model_id)
        return self.spaces.index(model_id)

    def peek(self, owner: str) -> OwnerIndex | None:
        """The owner's index as it is, maybe stale (no I/O): for guesses only."""
        return self._owners.get(owner)

    def get(self, conn: sqlite3.Connection, owner: str, version: int | None = None) -> OwnerIndex:
        """The owner's index as of ``conn``'s snapshot (``version``: the owner's there, if read)."""
        version = versions.stamp(conn, owner).version if version is None else version
        cached = self._owners.get(owner)
        if cached is None or cached.version != version:
            cached = self._reload(conn, owner, version, cached)
            self._owners[owner] = cached
            release_free_heap()
        return cached

    def _following(self, change: Change) -> OwnerIndex | None:
        """The owner's index if it was current just before ``change``; otherwise the next
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
            del self._owners[change.owner]  # cannot happen if the index was current; reload to be safe
            return
        cached.append_pending(rowid, memory_id, memory_type, words)
        cached.mark_superseded([*superseded, memory_id] if arrived_superseded else superseded)
        cached.version = change.after.version

    def apply_vectors(self, change: Change, stored: Sequence[tuple[int, np.ndarray, str]]) -> None:
        """Apply vectors this process has just stored for rows of the change's owner."""
        cached = self._following(change)
        if cached is None:
            return
        for rowid, vectors, model_id in stored:
            row = cached.rowids.get(rowid)
            if row is None:  # not in this index: reload rather than guess
                del self._owners[change.owner]
                return
            cached.vectors.put_passages(row, vectors, self.space_code(model_id))
        cached.version = change.after.version

    def forgot(self, owner: str) -> None:
        """A memory of ``owner``'s was deleted: its words leave the disk with it (the saved
        postings are dropped, and written again at the next start)."""
        if self._saved is not None:
            self._saved.drop(owner)

    def _reload(
        self, conn: sqlite3.Connection, owner: str, version: int, old: OwnerIndex | None
    ) -> OwnerIndex:
        """Re-read the cheap columns; fetch embeddings only for rows this process lacks or that changed."""
        where = _owner_rows(conn, owner)
        if where is None:
            return OwnerIndex(self._dimensions, version)
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
        # Same rows in the same places (a supersession, a change made elsewhere): the new index
        # takes the old buffers over instead of copying 77 MB at 100k memories.
        in_place = len(rows) <= old.vectors.capacity and np.array_equal(kept, np.arange(len(rows)))
        capacity = old.vectors.capacity if in_place else len(rows) + HEADROOM_ROWS
        fresh = OwnerIndex(self._dimensions, version, capacity=capacity)
        fresh.fill(rows)
        fresh.keep_id_order(old)
        reuse = kept >= 0
        if reuse.any():
            at = np.flatnonzero(reuse)
            prints = b"".join(rows[i][4] for i in at)
            sizes = np.array([rows[i][5] for i in at], dtype=np.int64)
            reuse[at] = old.vectors.still_stored(kept[at], prints, sizes)
        fresh.vectors.adopt(old.vectors, kept, reuse, in_place)
        fresh.postings = _moved_postings(old, [r[0] for r in rows])
        # A row's words are re-read where its vector is (its text changed, or only its vector:
        # ``put`` compares digests); a reused vector proves the text unchanged.
        self._fetch_embeddings(conn, [rows[i][0] for i in np.flatnonzero(~reuse)], fresh)
        return fresh

    def _load_all(
        self, conn: sqlite3.Connection, owner: str, where: tuple[str, tuple[Any, ...]], version: int
    ) -> OwnerIndex:
        """Cold load: one pass over the owner's block, already in rowid order."""
        count = conn.execute(f"SELECT count(*) FROM memories WHERE {where[0]}", where[1]).fetchone()[0]
        fresh = OwnerIndex(self._dimensions, version, capacity=count + HEADROOM_ROWS)
        cursor = conn.execute(
            f"SELECT rowid, id, memory_type, superseded_by IS NOT NULL, embedding, embedding_model, "
            f"lexical_terms, lexical_stems FROM memories WHERE {where[0]} ORDER BY rowid",
            where[1],
        )
        cheap: list[tuple[Any, ...]] = []
        words: list[tuple[str, str]] = []
        while len(cheap) < count and (chunk := cursor.fetchmany(FETCH_CHUNK)):
            chunk = chunk[: count - len(cheap)]  # rows a concurrent writer added wait for the next version
            start = len(cheap)
            cheap.extend(r[:4] for r in chunk)
            words.extend(r[6:8] for r in chunk)
            fresh.vectors.place([(start + i, r[4], r[5]) for i, r in enumerate(chunk)], self.space_code)
        fresh.fill(cheap)
        self._fill_postings(fresh, owner, words)
        return fresh

    def _fill_postings(self, into: OwnerIndex, owner: str, words: list[tuple[str, str]]) -> None:
        """An owner's postings from those saved where they still mostly hold, else from its
        words; a large owner's are saved again when they changed (``saved_postings.py``)."""
        saved_here = self._saved if len(words) >= saved_postings.SAVED_MIN_ROWS else None
        if saved_here is None:
            into.postings.fill(words)
            return
        rowids = np.fromiter(into.rowids, dtype=np.int64, count=len(into.rowids))
        saved = saved_here.read(owner)
        restored = OwnerPostings.restored(saved, rowids, words) if saved is not None else None
        if restored is not None and not restored.pending_rows():
            into.postings = restored
            return
        if restored is None:
            into.postings.fill(words)
        else:
            restored.rebuild()
            into.postings = restored
        saved_here.write(owner, into.postings.to_saved(rowids))

    def _fetch_embeddings(self, conn: sqlite3.Connection, rowids: list[int], into: OwnerIndex) -> None:
        for start in range(0, len(rowids), FETCH_CHUNK):
            chunk = rowids[start : start + FETCH_CHUNK]
            marks = ",".join("?" * len(chunk))
            found = conn.execute(
                "SELECT rowid, embedding, embedding_model, lexical_terms, lexical_stems FROM memories "
                f"WHERE rowid IN ({marks})",
                chunk,
            ).fetchall()
            found = [r for r in found if r[0] in into.rowids]  # a concurrent insert's: next version
            into.vectors.place([(into.rowids[r[0]], r[1], r[2]) for r in found], self.space_code)
            for rowid, _, _, terms, stems in found:
                into.postings.put(into.rowids[rowid], terms, stems)


def _moved_postings(old: OwnerIndex, rowids: list[int]) -> OwnerPostings:
    """``old``'s postings for the owner's rows now (``rowids``, in order), renumbered."""
    moved = np.full(old.size, -1, dtype=np.int64)
    for row, rowid in enumerate(rowids):
        before = old.rowids.get(rowid)
        if before is not None:
            moved[before] = row
    if len(rowids) == old.postings.size and np.array_equal(moved, np.arange(old.size)):
        return old.postings
    return old.postings.renumber(moved, len(rowids))
