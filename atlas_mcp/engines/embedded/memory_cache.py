"""Decoded memories this process has recalled, reused while their owner's rows are unchanged.

Every recall loads its ~300 candidates; reading and decoding them from SQLite was ~15% of a
recall at 10k memories, and an agent's recalls keep meeting the same memories. An owner's
entries hold for one stamp (``versions.py``: its version and its use count). A stamp read in a
recall's snapshot that differs from the one the entries were stored under drops them all,
whoever made the change. This process's own changes advance the stamp in place (it knows
exactly what changed): a recall's touch, a write (its superseded targets dropped), an update
or a forget (that memory dropped), stored vectors (no memory changes). So an agent that writes
between recalls keeps the cache, and only another process's change empties it.

Beside each memory the cache keeps its ranking facts (``domain.pool.RowFacts``: dates, length,
speaker, the words coverage matches), made when the memory is read from the store's row (whose
``coverage`` column holds the words, the costly part) or else worked out the first time a
recall ranks it, and kept as long as the memory is: they do not change with a use, so a recall
gathers them, it does not recompute them.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from ...domain.model import Memory
from ...domain.pool import RowFacts, row_facts
from .versions import Change, Stamp

CAPACITY = 20_000  # decoded memories kept (~1 KB each with LoCoMo-sized texts)


@dataclass(slots=True)
class _Generation:
    """One owner's entries under one stamp; entries of an older generation are dead."""

    stamp: Stamp


class MemoryCache:
    def __init__(self, capacity: int = CAPACITY) -> None:
        self._capacity = capacity
        self._lock = threading.Lock()
        self._generations: dict[str, _Generation] = {}
        self._entries: OrderedDict[str, tuple[_Generation, Memory]] = OrderedDict()
        self._facts: dict[str, tuple[Memory, RowFacts]] = {}  # by id, for the memory it was read from

    def get(self, owner: str, stamp: Stamp, ids: Iterable[str]) -> dict[str, Memory]:
        """The cached memories among ``ids``, if the owner's rows are as they were at ``stamp``."""
        with self._lock:
            generation = self._generation(owner, stamp)
            found = {}
            for memory_id in ids:
                entry = self._entries.get(memory_id)
                if entry is not None and entry[0] is generation:
                    self._entries.move_to_end(memory_id)
                    found[memory_id] = entry[1]
            return found

    def put(
        self,
        owner: str,
        stamp: Stamp,
        memories: Sequence[Memory],
        words: Sequence[frozenset[str] | None] = (),
    ) -> None:
        """Keep memories read at ``stamp`` (from the same snapshot as the stamp); ``words``,
        per memory, its coverage as the store holds it (None: not stored), which makes its
        ranking facts without working the words out (``domain.pool.row_facts``)."""
        pairs = zip(memories, words, strict=True) if words else ()
        given = [(memory, row_facts(memory, known)) for memory, known in pairs if known is not None]
        with self._lock:
            generation = self._generation(owner, stamp)
            for memory in memories:
                self._entries[memory.id] = (generation, memory)
                self._entries.move_to_end(memory.id)
            for kept in given:
                self._facts[kept[0].id] = kept
            while len(self._entries) > self._capacity:
                gone, _ = self._entries.popitem(last=False)
                self._facts.pop(gone, None)

    def facts(self, memories: Sequence[Memory]) -> list[RowFacts]:
        """Each memory's ranking facts: kept ones where they were read from the same memory
        (or one that differs only by its uses), else worked out now and kept with it."""
        out = []
        with self._lock:
            for memory in memories:
                kept = self._facts.get(memory.id)
                if kept is None or (kept[0] is not memory and not _same_text_and_dates(kept[0], memory)):
                    kept = (memory, row_facts(memory))
                    if memory.id in self._entries:
                        self._facts[memory.id] = kept
                out.append(kept[1])
        return out

    def fits(self, more: int) -> bool:
        """Would ``more`` memories fit beside the ones kept, without pushing any out?"""
        with self._lock:
            return len(self._entries) + more <= self._capacity

    def advance(self, change: Change, dropped: Sequence[str] = ()) -> None:
        """Apply this process's committed change, which changed no cached memory but ``dropped``."""
        with self._lock:
            generation = self._following(change)
            if generation is None:
                return
            generation.stamp = change.after
            for memory_id in dropped:
                self._entries.pop(memory_id, None)
                self._facts.pop(memory_id, None)

    def record_use(self, change: Change, ids: Sequence[str], at: datetime) -> None:
        """Apply this process's committed use update to the cached memories, as the UPDATE did
        to the rows; any other change in between leaves the entries to be dropped by the next
        ``get``."""
        with self._lock:
            generation = self._following(change)
            if generation is None:
                return
            generation.stamp = change.after
            used_at = datetime.fromisoformat(at.astimezone(UTC).isoformat())  # as stored, then read
            for memory_id in set(ids):  # as the UPDATE's IN list: each row once
                entry = self._entries.get(memory_id)
                if entry is not None and entry[0] is generation:
                    memory = entry[1]
                    changed = memory.evolve(use_count=memory.use_count + 1, last_used_at=used_at)
                    self._entries[memory_id] = (generation, changed)
                    kept = self._facts.get(memory_id)
                    if kept is not None and kept[0] is memory:  # a use changes no ranking fact
                        self._facts[memory_id] = (changed, kept[1])

    def _following(self, change: Change) -> _Generation | None:
        """The owner's generation if it was current just before ``change``."""
        generation = self._generations.get(change.owner)
        return generation if generation is not None and change.follows(generation.stamp) else None

    def _generation(self, owner: str, stamp: Stamp) -> _Generation:
        generation = self._generations.get(owner)
        if generation is None or generation.stamp != stamp:
            generation = self._generations[owner] = _Generation(stamp)
        return generation

    def __len__(self) -> int:
        return len(self._entries)


def _same_text_and_dates(kept: Memory, memory: Memory) -> bool:
    """Whether ``memory`` has the facts worked out for ``kept``: the very object, or one that
    a use evolved (ranking facts read no use)."""
    return kept is memory or (
        kept.memory_type is memory.memory_type
        and kept.text == memory.text
        and kept.occurred_at == memory.occurred_at
        and kept.created_at == memory.created_at
        and kept.search_text() == memory.search_text()
    )
