"""Owner rowid ranges: each owner's memories occupy one contiguous block of rowids.

Loading an owner's vectors and postings, and finding its unembedded rows, then read one
rowid range (``rowid BETWEEN``) instead of filtering the whole table, so that cost follows the
caller's corpus, not the whole store; rowid order within an owner is insertion order, which
is also the order of ties in recall.
"""

from __future__ import annotations

import sqlite3

from ...errors import Conflict
from .schema import SLOT_BITS

SLOT_SIZE = 1 << SLOT_BITS


def bounds(slot: int) -> tuple[int, int]:
    low = slot << SLOT_BITS
    return low, low + SLOT_SIZE - 1


def owner_range(conn: sqlite3.Connection, owner: str) -> tuple[int, int] | None:
    """The owner's rowid block, or None if the owner has never stored anything."""
    row = conn.execute("SELECT slot FROM owner_slots WHERE owner = ?", (owner,)).fetchone()
    return None if row is None else bounds(row[0])


def next_rowid(conn: sqlite3.Connection, owner: str) -> int:
    """The rowid for the owner's next row; call inside the write transaction."""
    found = owner_range(conn, owner)
    if found is None:
        slot = conn.execute(
            "INSERT INTO owner_slots(owner, slot) SELECT ?, COALESCE(MAX(slot), 0) + 1 FROM owner_slots "
            "RETURNING slot",
            (owner,),
        ).fetchone()[0]
        found = bounds(slot)
    low, high = found
    last = conn.execute(
        "SELECT MAX(rowid) FROM memories WHERE rowid BETWEEN ? AND ?", (low, high)
    ).fetchone()[0]
    rowid = (last or low) + 1
    if rowid > high:  # 4 billion memories for one owner
        raise Conflict("this owner's rowid block is full")
    return rowid


def row_count(conn: sqlite3.Connection, owner: str) -> int:
    """How many rows the owner has (a range count on the rowid: ~1 ms at 10k)."""
    found = owner_range(conn, owner)
    if found is None:
        return 0
    counted: int = conn.execute(
        "SELECT count(*) FROM memories WHERE rowid BETWEEN ? AND ?", found
    ).fetchone()[0]
    return counted


CATALOG_OWNER = ""  # the owner of the shared catalog's rows (``user_id IS NULL``)


def owner_key(user_id: str | None) -> str:
    return CATALOG_OWNER if user_id is None else user_id
