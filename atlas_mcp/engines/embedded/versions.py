"""Each owner's stamp in ``owner_versions``, and how this process's caches follow its own changes.

An owner's stamp is (version, uses). Every change to the owner's rows bumps ``version``: a
write, a supersession, an update, a forget, stored vectors. Every use update bumps ``uses``
instead, which leaves the version, and so every process's index of the owner (vectors and
postings, ``index.py``), alone. A cache read under one stamp is current while the stamp read
in a later snapshot is the same; whoever changed it, any process.

This process applies its own changes to its caches in place instead of reloading them: the
change reads the stamp inside its write transaction (``record_change``, ``record_use``) and,
once it has committed, hands each cache the stamps before and after (a ``Change``). The
transaction held the write lock, so an entry held at exactly the stamp before was current just
before the change, and applying the change keeps it current; any other entry is left for its
next read to reload (``Change.follows``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from .reading import Reading


class Stamp(NamedTuple):
    version: int  # bumped by every change to the owner's rows
    uses: int  # bumped by every use update of the owner's rows


@dataclass(frozen=True, slots=True)
class Change:
    """One committed change of this process to ``owner``'s rows, and the stamps around it."""

    owner: str
    before: Stamp  # read inside the changing transaction
    after: Stamp

    def follows(self, held: Stamp | int) -> bool:
        """Was a cache entry held at ``held`` current just before this change (so applying the
        change keeps it current)? An owner's index holds the version alone: use updates leave
        vectors and postings as they are."""
        return held == (self.before.version if isinstance(held, int) else self.before)


def stamp(conn: sqlite3.Connection, owner: str) -> Stamp:
    row = conn.execute("SELECT version, uses FROM owner_versions WHERE owner = ?", (owner,)).fetchone()
    return Stamp(row[0], row[1]) if row else Stamp(0, 0)


def stamps(conn: sqlite3.Connection, owners: Sequence[str]) -> list[Stamp]:
    """``stamp`` of each of ``owners`` (a user and the catalog, in a recall), in one read; in a
    ``Store.reading`` block, those of the last read while the file is unchanged."""
    if isinstance(conn, Reading):
        return conn.stamps(owners, _read)
    return _read(conn, owners)


def _read(conn: sqlite3.Connection, owners: Sequence[str]) -> list[Stamp]:
    if len(owners) == 1:
        return [stamp(conn, owners[0])]
    marks = ",".join("?" * len(owners))
    found = conn.execute(f"SELECT owner, version, uses FROM owner_versions WHERE owner IN ({marks})", owners)
    kept = {owner: Stamp(version, uses) for owner, version, uses in found}
    return [kept.get(owner, Stamp(0, 0)) for owner in owners]


def bump(conn: sqlite3.Connection, owner: str) -> None:
    """Record, in the transaction that changed the owner's rows, that it did."""
    conn.execute(
        "INSERT INTO owner_versions(owner, version) VALUES (?, 1) "
        "ON CONFLICT(owner) DO UPDATE SET version = version + 1",
        (owner,),
    )


def record_change(conn: sqlite3.Connection, owner: str) -> Change:
    """``bump``, and the change for this process's caches to apply once it has committed."""
    before = stamp(conn, owner)
    bump(conn, owner)
    return Change(owner, before, Stamp(before.version + 1, before.uses))


def record_use(conn: sqlite3.Connection, owner: str) -> Change:
    """Record, in the transaction that updated the owner's use statistics, that it did (one
    statement: the stamp after, whose uses are one more than before's)."""
    ((version, uses),) = conn.execute(
        "INSERT INTO owner_versions(owner, version, uses) VALUES (?, 0, 1) "
        "ON CONFLICT(owner) DO UPDATE SET uses = uses + 1 RETURNING version, uses",
        (owner,),
    ).fetchall()
    return Change(owner, Stamp(version, uses - 1), Stamp(version, uses))
