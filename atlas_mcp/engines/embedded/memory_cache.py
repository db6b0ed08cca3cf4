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
gathers them, it does not recompute them. Both live in one entry per id (``Entry``), so a
recall's ~300 candidates are found with their facts by one look-up each (``entries``).

A recall knows its candidates as rows of the owner's index, so each generation also keeps the
entries it found by row of that index (``found_rows``): the next recall reads them by position,
not by a look-up of each id (~300 a recall, each mostly cache misses: the id, the dict's slot,
the entry). Every change to an entry names its id to its generation, whose row is then read by
id again.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import repeat
from operator import itemgetter
from typing import TYPE_CHECKING, cast

from ...domain.fact_columns import use_record
from ...domain.model import Memory
from ...domain.pool import RowFacts, row_facts
from .versions import Change, Stamp

if TYPE_CHECKING:
    from .index import OwnerIndex

CAPACITY = 20_000  # decoded memories kept (~1 KB each with LoCoMo-sized texts)
# Changed ids a generation notes for its rows before it drops them instead (a writer that
# does not recall would otherwise note every id it writes).
CHANGED_KEPT = 1_024


@dataclass(slots=True)
class _Generation:
    """One owner's entries under one stamp; entries of an older generation are dead."""

    stamp: Stamp
    # ``found_rows``' entries by row of one owner index (weakly: an old index is not kept)
    rows: tuple[weakref.ref[OwnerIndex], list[Entry | None]] | None = None
    changed: set[str] = field(default_factory=set)  # ids whose entry changed since, if rows

    def change(self, memory_id: str) -> None:
        """``memory_id``'s entry changed (or left): its row is read by id again."""
        if self.rows is not None:
            self.changed.add(memory_id)
            if len(self.changed) > CHANGED_KEPT:
                self.rows = None
                self.changed.clear()


# One cached memory: the generation it was read in, the memory, its ranking facts once made
# (None until then) and its uses as a record (``fact_columns.use_record``: a use makes a new
# entry). A plain tuple: a recall reads ~300 of them, by index.
Entry = tuple[_Generation, Memory, RowFacts | None, bytes]


class MemoryCache:
    def __init__(self, capacity: int = CAPACITY) -> None:
        self._capacity = capacity
        self._lock = threading.Lock()
        self._generations: dict[str, _Generation] = {}
        # by id; an entry's facts are always those of its own memory (its text and dates)
        self._entries: OrderedDict[str, Entry] = OrderedDict()

    def get(self, owner: str, stamp: Stamp, ids: Iterable[str]) -> dict[str, Memory]:
        """The cached memories among ``ids``, if the owner's rows are as they were at ``stamp``."""
        return {memory_id: entry[1] for memory_id, entry in self.entries(owner, stamp, ids).items()}

    def entries(self, owner: str, stamp: Stamp, ids: Iterable[str]) -> dict[str, Entry]:
        """``get``'s entries, each with its memory's facts if made (``memories_and_facts``)."""
        wanted = list(ids)
        found = self.found(owner, stamp, wanted)
        return {memory_id: entry for memory_id, entry in zip(wanted, found, strict=True) if entry is not None}

    def found(self, owner: str, stamp: Stamp, ids: Sequence[str]) -> list[Entry | None]:
        """Per id of ``ids``, its entry if the owner's rows are as they were at ``stamp``, else
        None: a recall's ~300 candidates in their order, without a dict built on the way."""
        with self._lock:
            return self._found(owner, stamp, ids)

    def _found(self, owner: str, stamp: Stamp, ids: Sequence[str]) -> list[Entry | None]:
        """``found`` under the lock."""
        generation = self._generation(owner, stamp)
        entries = self._entries
        get = entries.get
        if len(entries) * 10 < self._capacity * 9:
            # Far from full, nothing is pushed out soon: the order of use, which only says
            # what goes first, is not kept (each move touches the entry's neighbours too,
            # ~300 of them a recall); from 90% full on it is, before anything goes.
            return [e if (e := get(i)) is not None and e[0] is generation else None for i in ids]
        used = entries.move_to_end
        out: list[Entry | None] = []
        for memory_id in ids:
            entry = get(memory_id)
            if entry is not None and entry[0] is generation:
                used(memory_id)
                out.append(entry)
            else:
                out.append(None)
        return out

    def found_rows(
        self, owner: str, stamp: Stamp, index: OwnerIndex, rows: Sequence[int]
    ) -> list[Entry | None]:
        """``found`` of the memories of ``rows`` of ``index`` (the owner's, as the recall's
        snapshot sees it): each row's entry read by position where this generation found it
        before for the same index, else by its id."""
        ids = index.ids
        with self._lock:
            if len(self._entries) * 10 >= self._capacity * 9:
                return self._found(owner, stamp, [ids[row] for row in rows])  # the order of use is kept
            generation = self._generation(owner, stamp)
            kept = generation.rows
            if kept is None or kept[0]() is not index:
                by_row: list[Entry | None] = [None] * index.size
                generation.rows, generation.changed = (weakref.ref(index), by_row), set()
            else:
                by_row = kept[1]
                if len(by_row) < index.size:  # this process's writes added rows
                    by_row.extend([None] * (index.size - len(by_row)))
                if generation.changed:
                    where = index.index
                    for memory_id in generation.changed:
                        if (row := where.get(memory_id)) is not None:
                            by_row[row] = None
                    generation.changed.clear()
            # gathered in C (~300 a recall)
            found = list(itemgetter(*rows)(by_row)) if len(rows) > 1 else [by_row[row] for row in rows]
            if None in found:  # read by id, and kept by row for the next recall
                get = self._entries.get
                for at, entry in enumerate(found):
                    if entry is None and (entry := get(ids[rows[at]])) is not None and entry[0] is generation:
                        found[at] = by_row[rows[at]] = entry
            return found

    def memories_and_facts(
        self, entries: Sequence[Entry]
    ) -> tuple[list[Memory], list[RowFacts], list[bytes]]:
        """The memories of ``entries``, their ranking facts (the missing ones made now:
        ``facts``) and their use records."""
        if not entries:
            return [], [], []
        _, kept_memories, kept_facts, uses = zip(*entries, strict=True)  # one pass in C over ~300
        memories, facts = list(kept_memories), list(kept_facts)
        if None in facts:
            missing = [at for at, kept in enumerate(facts) if kept is None]
            for at, made in zip(missing, self.facts([memories[at] for at in missing]), strict=True):
                facts[at] = made
        return memories, cast("list[RowFacts]", facts), list(uses)  # no None is left

    def put(
        self,
        owner: str,
        stamp: Stamp,
        memories: Sequence[Memory],
        words: Sequence[frozenset[str] | None] = (),
    ) -> list[Entry]:
        """Keep memories read at ``stamp`` (from the same snapshot as the stamp); ``words``,
        per memory, its coverage as the store holds it (None: not stored), which makes its
        ranking facts without working the words out (``domain.pool.row_facts``). Their entries,
        as ``entries`` gives them (also those a small cache could not keep)."""
        given = [
            None if known is None else row_facts(memory, known)
            for memory, known in (zip(memories, words, strict=True) if words else zip(memories, repeat(None)))
        ]
        out: list[Entry] = []
        with self._lock:
            generation = self._generation(owner, stamp)
            for memory, facts in zip(memories, given, strict=True):
                if facts is None:  # the facts made for the memory it replaces, if they still hold
                    facts = self._facts_of(memory)
                uses = use_record(memory.use_count, memory.last_used_at)
                entry = self._entries[memory.id] = (generation, memory, facts, uses)
                self._entries.move_to_end(memory.id)
                generation.change(memory.id)
                out.append(entry)
            while len(self._entries) > self._capacity:
                gone, left = self._entries.popitem(last=False)
                left[0].change(gone)
        return out

    def facts(self, memories: Sequence[Memory]) -> list[RowFacts]:
        """Each memory's ranking facts: kept ones where they were read from the same memory
        (or one that differs only by its uses), else worked out now and kept with it."""
        out = []
        with self._lock:
            for memory in memories:
                facts = self._facts_of(memory)
                if facts is None:
                    facts = row_facts(memory)
                    entry = self._entries.get(memory.id)
                    if entry is not None and _same_text_and_dates(entry[1], memory):
                        self._entries[memory.id] = (entry[0], entry[1], facts, entry[3])  # keeps its place
                        entry[0].change(memory.id)
                out.append(facts)
        return out

    def _facts_of(self, memory: Memory) -> RowFacts | None:
        """The kept facts of ``memory``'s id, if they are ``memory``'s (under the lock)."""
        entry = self._entries.get(memory.id)
        if entry is None or entry[2] is None or not _same_text_and_dates(entry[1], memory):
            return None
        return entry[2]

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
                generation.change(memory_id)

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
                    uses = use_record(changed.use_count, used_at)
                    self._entries[memory_id] = (generation, changed, entry[2], uses)  # a use changes no fact
                    generation.change(memory_id)

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
