"""Give every row its kept coverage, in the background, for stores written before it was kept.

A row written since ``schema.stored_coverage`` has its coverage (``domain.pool.coverage``, the
words recall ranks it by) in ``row_coverage``; a row written before, or by an older atlas-mcp,
has none, and recall works its words out whenever it reads the row. ``fill`` works them out
once, in chunks: each chunk is read in one snapshot, worked out with no lock held, stepping
aside while recalls come in (``preload.RecallClock``), and kept in one short transaction, only
for rows whose text is still the one worked from. A process stopped half-way has kept whole
chunks, the rest is filled by the next start; two processes filling at once keep one entry a
row. The entries change no memory, so no cache of any process is out of date.
"""

from __future__ import annotations

import sqlite3

from ...domain.pool import COVERAGE_RULES
from .preload import READ_STEP, RecallClock
from .rows import stored_coverage
from .store import Store

FILL_CHUNK = 256  # rows worked out per snapshot and kept per transaction (~20 ms of work)
# The rows without an entry, found in a covering index of the rows (~35 ms at 100k, whatever
# their number), not by reading the rows themselves.
_MISSING = (
    "SELECT m.rowid FROM memories m WHERE NOT EXISTS (SELECT 1 FROM row_coverage c WHERE c.rowid = m.rowid)"
)
_KEEP = (
    "INSERT OR IGNORE INTO row_coverage(rowid, words) SELECT ?, ? "
    "WHERE EXISTS (SELECT 1 FROM memories WHERE rowid = ? AND search_text = ?)"
)


# Entries kept under other rules (an earlier or later atlas-mcp's): recall ignores them, so
# they are dropped for the fill to keep this version's (one pass over the entries per start).
_OTHER_RULES = "FROM row_coverage WHERE words != ? AND substr(words, 1, ?) != ?"


def missing(conn: sqlite3.Connection) -> int:
    """How many rows have no kept coverage (two counts over small b-trees, ~15 ms at 100k)."""
    found = conn.execute("SELECT (SELECT count(*) FROM memories) - (SELECT count(*) FROM row_coverage)")
    count: int = found.fetchone()[0]
    return count


def fill(rows: Store, clock: RecallClock, chunk: int = FILL_CHUNK) -> int:
    """Keep the coverage of every row that has none; how many entries this call kept. Stops
    early, keeping what it has, when the engine closes."""
    rules = (COVERAGE_RULES, len(COVERAGE_RULES) + 1, COVERAGE_RULES + " ")
    with rows.snapshot() as conn:  # looked for without the write lock (~20 ms at 100k)
        other_rules = conn.execute(f"SELECT 1 {_OTHER_RULES} LIMIT 1", rules).fetchone() is not None
    if other_rules:
        with rows.synchronous("NORMAL"), rows.transaction() as tx:
            tx.conn.execute(f"DELETE {_OTHER_RULES}", rules)
    with rows.snapshot() as conn:
        if missing(conn) <= 0:
            return 0
        todo = sorted(rowid for (rowid,) in conn.execute(_MISSING))
    kept = 0
    try:
        for start in range(0, len(todo), chunk):
            if clock.closing.is_set():
                break
            wanted = todo[start : start + chunk]
            with rows.snapshot() as conn:
                texts: list[tuple[int, str]] = conn.execute(
                    f"SELECT rowid, search_text FROM memories WHERE rowid IN ({','.join('?' * len(wanted))})",
                    wanted,
                ).fetchall()
            worked: list[tuple[int, str, int, str]] = []
            for step in range(0, len(texts), READ_STEP):
                if not clock.wait_quiet():
                    return kept
                for rowid, text in texts[step : step + READ_STEP]:
                    words = stored_coverage(text)
                    if words is not None:
                        worked.append((rowid, words, rowid, text))
            # The entries can be worked out again from the rows: a power loss may take the
            # last chunks (a crash of the process cannot), so they do not wait for the disk.
            with rows.synchronous("NORMAL"), rows.transaction() as tx:
                before = tx.conn.total_changes
                tx.conn.executemany(_KEEP, worked)
                kept += tx.conn.total_changes - before
    except sqlite3.ProgrammingError:  # the store closed under us: what is kept is kept
        if not clock.closing.is_set():
            raise
    return kept
