"""Work out at load what recall reads of each memory, instead of at its first recall.

Once ``serve`` has answered its first recall, its warm-up thread decodes the user's memories
into the memory cache with their ranking facts (``domain.pool.RowFacts``), when all of them
fit there, and hands each chunk to the caller's first reads (the service's: what a recall
works out the first time it shows a memory, ``domain.first_reads``). Chunk by chunk, each in
its own snapshot, so recalls and writes interleave; the first reads, pure Python that holds
the interpreter, step aside while recalls come in, so a recall is slowed by one short step
at most, not by the whole pass.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Sequence

import numpy as np

from ...domain.model import Memory, MemoryType
from ...domain.resolution import KEPT_FACTS
from . import store, versions
from .index import TYPE_CODES, IndexCache
from .memory_cache import MemoryCache
from .slots import owner_key
from .store import Store

PRELOAD_CHUNK = 500  # memories decoded per snapshot (each a short hold of the store)
PRELOAD_POLL_S = 0.5  # how often a preload waiting for the first recall checks for a stop
READ_STEP = 32  # memories whose first reads run between two looks for recalls (~5 ms)
QUIET_S = 0.05  # first reads wait until no recall has started for this long

FirstReads = Callable[[Sequence[Memory]], object]


class RecallClock:
    """When this process last started a recall, and whether it has answered one."""

    def __init__(self) -> None:
        self.answered = threading.Event()  # a recall has been answered (a preload may start)
        self.closing = threading.Event()  # the engine is closing: a preload stops at its next step
        self.last_started = float("-inf")

    def started(self) -> None:
        self.last_started = time.monotonic()

    def wait_quiet(self) -> bool:
        """Wait until no recall has started for ``QUIET_S``; False if the engine is closing."""
        while not self.closing.is_set():
            idle = time.monotonic() - self.last_started
            if idle >= QUIET_S:
                return True
            self.closing.wait(QUIET_S - idle)
        return False


def first_recall_answered(clock: RecallClock, wait: bool) -> bool:
    """With ``wait``, wait until this process has answered a recall; False if it is closing."""
    while wait and not clock.answered.wait(PRELOAD_POLL_S):
        if clock.closing.is_set():
            return False
    return not clock.closing.is_set()


def preload(
    rows: Store,
    index: IndexCache,
    memories: MemoryCache,
    clock: RecallClock,
    user_id: str,
    after_first_recall: bool,
    first_reads: FirstReads | None,
    fact_reads: FirstReads | None = None,
) -> int:
    """Decode ``user_id``'s memories into ``memories`` with their ranking facts and
    ``first_reads``, if all of them fit there; how many memories were read from the store.
    If they do not, hand the user's live facts to ``fact_reads`` instead, if there are at most
    ``KEPT_FACTS``. ``after_first_recall``: once this process has answered a recall (a start's
    imports, ``initialize`` and the first recall are not slowed)."""
    owner = owner_key(user_id)
    if not first_recall_answered(clock, after_first_recall):
        return 0
    with rows.snapshot() as conn:
        cached = index.get(conn, owner)
        ids = list(cached.ids)
        live_facts = (cached.codes == TYPE_CODES[MemoryType.SEMANTIC.value]) & ~cached.superseded
        facts = [ids[row] for row in np.flatnonzero(live_facts).tolist()]
    if not memories.fits(len(ids)):
        if fact_reads is None or len(facts) > KEPT_FACTS:
            return 0
        return _facts_ahead(rows, clock, owner, facts, fact_reads)
    read = 0
    for start in range(0, len(ids), PRELOAD_CHUNK):
        if clock.closing.is_set():  # the server is stopping: what is kept is kept
            break
        chunk = ids[start : start + PRELOAD_CHUNK]
        try:
            with rows.snapshot() as conn:
                stamp = versions.stamp(conn, owner)
                known = memories.get(owner, stamp, chunk)
                missing = [memory_id for memory_id in chunk if memory_id not in known]
                found, words = store.unzipped(store.read_memories(conn, owner, missing) if missing else [])
                memories.put(owner, stamp, found, words)
        except sqlite3.ProgrammingError:  # the store closed between the check and the read
            if clock.closing.is_set():
                break
            raise
        loaded = [*known.values(), *found]
        memories.facts(loaded)
        read += len(found)
        if first_reads is not None:
            for step in range(0, len(loaded), READ_STEP):
                if not clock.wait_quiet():
                    return read
                first_reads(loaded[step : step + READ_STEP])
    return read


def _facts_ahead(rows: Store, clock: RecallClock, owner: str, ids: list[str], fact_reads: FirstReads) -> int:
    """Read the facts of ``ids`` chunk by chunk (each in its own snapshot, not kept: the memory
    cache is full) and hand them to ``fact_reads`` between recalls; how many were read."""
    read = 0
    for start in range(0, len(ids), PRELOAD_CHUNK):
        if clock.closing.is_set():
            break
        try:
            with rows.snapshot() as conn:
                found, _ = store.unzipped(
                    store.read_memories(conn, owner, ids[start : start + PRELOAD_CHUNK])
                )
        except sqlite3.ProgrammingError:  # the store closed between the check and the read
            if clock.closing.is_set():
                break
            raise
        read += len(found)
        for step in range(0, len(found), READ_STEP):
            if not clock.wait_quiet():
                return read
            fact_reads(found[step : step + READ_STEP])
    return read
