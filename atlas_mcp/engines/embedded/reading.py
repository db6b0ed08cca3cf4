"""A recall's snapshot begun by its first read, and the owners' stamps reused while the file is
unchanged.

A recall's snapshot ran three statements: ``BEGIN``, the owners' stamps (``versions.stamps``)
and ``COMMIT``, ~100 us of a one-chat 1k recall's CPU through stdio (the recall's first SQL,
with SQLite's code and pages out of the CPU's caches), while most recalls read nothing more:
the owners' indexes and memories are cached at those stamps. Nothing was committed to the file
since the stamps were last read when no other connection committed (SQLite's
``PRAGMA data_version`` is the same) and this connection changed no row (``total_changes`` is
the same; its own writes hold ``Store.lock``, as a recall's reading does): the stamps are then
the same, and are reused. The read transaction begins at the first statement that needs it, as
a deferred ``BEGIN`` begins SQLite's at its first read; if something was committed between the
reused stamps and that statement, ``Moved`` is raised before anything is read, and the recall
reads again from the start (``EmbeddedEngine.candidates``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .versions import Stamp

KEPT_OWNER_SETS = 256  # owner sets (a user and the catalog) whose stamps are kept
Mark = tuple[int, int]  # (data_version, total_changes): the file as this connection last saw it


class Moved(Exception):
    """The file changed between the stamps a recall reused and its first read."""


class Reading:
    """The connection of one ``Store.reading`` block: ``execute`` (and anything else asked of
    it) begins the read transaction first."""

    __slots__ = ("_begun", "_conn", "_expect", "_kept")

    def __init__(
        self, conn: sqlite3.Connection, kept: dict[tuple[str, ...], tuple[Mark, list[Stamp]]]
    ) -> None:
        self._conn = conn
        self._kept = kept  # the store's: owners -> the mark their stamps were read at, and them
        self._begun = False
        self._expect: Mark | None = None  # set when stamps were reused: the mark reads must see

    @property
    def conn(self) -> sqlite3.Connection:
        """The connection, its read transaction begun (``Moved`` if the file changed since the
        stamps this block reused)."""
        if not self._begun:
            self._conn.execute("BEGIN")
            self._begun = True
            if self._expect is not None and _mark(self._conn) != self._expect:
                raise Moved
        return self._conn

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        return self.conn.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.conn, name)

    def stamps(
        self, owners: Sequence[str], read: Callable[[sqlite3.Connection, Sequence[str]], list[Stamp]]
    ) -> list[Stamp]:
        """``read``'s stamps of ``owners``, reused from the last read if the file is unchanged."""
        key = tuple(owners)
        kept = self._kept.get(key)
        if (
            kept is not None
            and not self._begun
            and kept[0][1] == self._conn.total_changes  # this connection's own changes: no SQL
            and kept[0] == _mark(self._conn)
        ):
            self._expect = kept[0]
            return kept[1]
        found = read(self.conn, owners)
        if len(self._kept) >= KEPT_OWNER_SETS:
            self._kept.clear()
        self._kept[key] = (_mark(self._conn), found)  # in the transaction: the stamps' own mark
        return found

    def end(self) -> None:
        if self._begun:
            self._begun = False
            self._conn.execute("COMMIT")  # a read transaction: nothing to keep or undo


def _mark(conn: sqlite3.Connection) -> Mark:
    ((version,),) = conn.execute("PRAGMA data_version").fetchall()
    return version, conn.total_changes
