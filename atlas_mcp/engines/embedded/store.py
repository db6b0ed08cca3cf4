"""The SQLite file: how it is opened, one transaction with after-commit hooks, and the row SQL.

Several processes may share one file (WAL): SQLite serialises writers, ``BUSY_TIMEOUT_S``
absorbs contention, and ``owner_versions`` (``versions.py``) tells each process's caches what
another changed. Within a process one connection serves every thread under one lock; a
transaction holds that lock from ``BEGIN`` to ``COMMIT`` and then runs what it registered
with ``after_commit``, still under the lock, so a cache never shows a change that rolled back
and no recall sees a change half-applied to a cache. The lock is always taken before SQLite's
(``BEGIN``), never while holding it: a thread waiting for another process's write holds up
this process's other threads, but no two threads can wait for each other.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, cast

from ...domain.model import Memory, iso
from ...domain.supersession import changed_meanwhile
from ...errors import BackendUnavailable, ConfigurationError, Conflict
from ..base import ListQuery
from . import cipher, holders, migrations, rekey, rows, schema
from .cipher import StoreKey
from .reading import Mark, Reading

BUSY_TIMEOUT_S = 30.0
# Lookups by id check the owner as a filter, never through memories_by_owner: with a few
# dozen ids SQLite otherwise walks every one of the owner's rows (O(corpus) per recall).
# The unary + keeps the predicate and only disables that index for it.
_BY_ID_FOR_OWNER = "+user_id"
STORED_COLUMNS = ("rowid", *rows.COLUMNS, "embedding", "embedding_model")
_INSERT = (
    f"INSERT INTO memories ({', '.join(STORED_COLUMNS)}) "
    f"VALUES ({', '.join(':' + c for c in STORED_COLUMNS)})"
)


class Transaction:
    """One open transaction: its connection, and what is to run once it has committed."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self._hooks: list[Callable[[], None]] = []

    def after_commit(self, hook: Callable[[], None]) -> None:
        self._hooks.append(hook)

    def _committed(self) -> None:
        hooks, self._hooks = self._hooks, []
        for hook in hooks:
            hook()


class Store:
    """One connection to the file, shared by this process's threads under ``lock``; the file is
    held (``holders.py``) from open to close, so ``rekey`` never replaces it under us."""

    def __init__(self, path: Path, key: StoreKey | None = None) -> None:
        """Open the store at ``path`` (its folder made if missing) and apply its migrations;
        with ``key``, through SQLCipher (``cipher.py``)."""
        self.path = Path(path)
        self.lock = threading.RLock()
        _make_folder(self.path.parent)
        self._hold = holders.shared(self.path, BUSY_TIMEOUT_S)
        try:
            if self._hold.held:
                rekey.remove_leftovers(self.path)  # no rekey runs while we hold the file
            self.conn = connect(self.path, key)
            # The connection's ``synchronous`` mode, and what the innermost ``synchronous`` block
            # asks of the commits inside it (None: the store's setting).
            self._mode: str = schema.SYNCHRONOUS
            self._asked: str | None = None
            self._stamps_kept: dict[tuple[str, ...], tuple[Mark, list[Any]]] = {}  # ``reading``'s
        except BaseException as exc:
            self._hold.release()
            if isinstance(exc, cipher.errors("DatabaseError")):
                raise BackendUnavailable(f"cannot open memory store {self.path}: {exc}") from exc
            raise
        try:
            with self.transaction() as tx:
                migrations.migrate(tx)
        except BaseException as exc:
            self.close()
            if isinstance(exc, cipher.errors("DatabaseError")):
                raise BackendUnavailable(f"cannot open memory store {self.path}: {exc}") from exc
            raise

    @contextmanager
    def transaction(self, begin: str = "BEGIN IMMEDIATE") -> Iterator[Transaction]:
        """One transaction; what it registered with ``after_commit`` runs once it has committed."""
        with self.lock:
            if begin != "BEGIN":  # a write: its commit waits for the disk as asked
                self._set_mode(self._asked or schema.SYNCHRONOUS)
            self.conn.execute(begin)
            tx = Transaction(self.conn)
            try:
                yield tx
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
            self.conn.execute("COMMIT")
            tx._committed()

    @contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection]:
        """A read transaction: every read inside it sees the same committed state."""
        with self.transaction("BEGIN") as tx:
            yield tx.conn

    @contextmanager
    def reading(self) -> Iterator[sqlite3.Connection]:
        """``snapshot`` for a recall, begun by its first read, whose ``versions.stamps`` are
        reused while the file is unchanged (``reading.py``)."""
        with self.lock:
            reads = Reading(self.conn, self._stamps_kept)
            try:
                yield cast(sqlite3.Connection, reads)
            finally:
                reads.end()

    @contextmanager
    def synchronous(self, mode: str) -> Iterator[None]:
        """Commits made inside wait for the disk as SQLite's ``synchronous=mode`` says
        (``FULL``: an fsync per commit, the store's setting; ``NORMAL``: none, in WAL mode a
        commit then survives a process crash but not a power loss until the next FULL commit
        syncs the log). For bookkeeping that may lag a power loss, and for measuring the cost.

        The mode is set by the write transactions themselves (``transaction``), and only when
        it changes: a recall's use update after a recall's leaves the connection as it is
        (two PRAGMAs were ~45 us of each recall that records a use, with cold caches), and the
        next write sets the store's mode again before it begins."""
        if mode not in schema.SYNCHRONOUS_MODES:
            raise ValueError(f"synchronous mode must be one of {schema.SYNCHRONOUS_MODES}")
        with self.lock:
            outer, self._asked = self._asked, mode
            try:
                yield
            finally:
                self._asked = outer

    def _set_mode(self, mode: str) -> None:
        if mode != self._mode:
            self.conn.execute(f"PRAGMA synchronous={mode}")
            self._mode = mode

    def close(self) -> None:
        with self.lock:
            self.conn.close()
            self._hold.release()


def connect(path: Path, key: StoreKey | None = None) -> sqlite3.Connection:
    """A connection with the store's pragmas and busy timeout, for any thread (``Store.lock``
    serialises them); the standard library's, or SQLCipher's with a key."""
    conn: sqlite3.Connection = cipher.connect(
        path, key, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
    )
    try:
        for pragma in schema.PRAGMAS:
            _pragma(conn, pragma)
    except BaseException:
        conn.close()
        raise
    return conn


def _pragma(conn: sqlite3.Connection, pragma: str) -> None:
    """``pragma``, waiting out "database is locked" as the busy timeout would: while another
    process turns a new file to WAL, SQLite can answer ``journal_mode=WAL`` with SQLITE_BUSY at
    once, without its busy handler (4 threads opening one new store: ~2% of tries)."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            conn.execute(pragma)
            return
        except cipher.errors("OperationalError") as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
        time.sleep(0.002)


def _make_folder(folder: Path) -> None:
    """The store's folder, made if missing. A file in its place gets its own message: mkdir's
    "File exists" reads as if the folder were there and fine."""
    if folder.exists() and not folder.is_dir():
        raise ConfigurationError(f"the data folder {folder} is a file, not a folder")
    folder.mkdir(parents=True, exist_ok=True)


# -- writes --------------------------------------------------------------------------------


def insert(conn: sqlite3.Connection, row: dict[str, Any]) -> int:
    try:
        rowid = conn.execute(_INSERT, row).lastrowid
    except cipher.errors("IntegrityError") as exc:  # an imported id another memory already holds
        raise Conflict(f"memory id {row['id']!r} is already taken; nothing was written") from exc
    assert rowid is not None  # an INSERT always sets it; the DB-API types it Optional
    cover(conn, [(rowid, row["search_text"])])
    return rowid


def insert_many(conn: sqlite3.Connection, stored: Sequence[dict[str, Any]]) -> None:
    conn.executemany(_INSERT, stored)
    cover(conn, [(row["rowid"], row["search_text"]) for row in stored])


def cover(conn: sqlite3.Connection, texts: Sequence[tuple[int, str]]) -> None:
    """Keep the coverage of each (rowid, search_text) row (``schema.stored_coverage``)."""
    worked = [(rowid, rows.stored_coverage(text)) for rowid, text in texts]
    conn.executemany(
        "INSERT OR REPLACE INTO row_coverage(rowid, words) VALUES (?, ?)",
        [(rowid, words) for rowid, words in worked if words is not None],
    )


def upsert_catalog(conn: sqlite3.Connection, row: dict[str, Any]) -> None:
    names, marks = ", ".join(row), ", ".join(f":{k}" for k in row)
    updates = ", ".join(f"{k} = excluded.{k}" for k in row if k not in ("id", "rowid"))
    changed = conn.execute(
        f"INSERT INTO memories ({names}) VALUES ({marks}) "
        f"ON CONFLICT(id) DO UPDATE SET {updates} WHERE memories.user_id IS NULL RETURNING rowid",
        row,
    ).fetchall()
    if len(changed) != 1:
        raise Conflict(f"id {row['id']!r} is taken by a user memory; give the catalog entry another id")
    cover(conn, [(changed[0][0], row["search_text"])])


def mark_superseded(conn: sqlite3.Connection, memory: Memory, ids: Sequence[str]) -> None:
    """Each target replaced by ``memory``; a fact's validity closes where the new one's starts."""
    start = iso(memory.valid_from)
    for target in ids:
        cursor = conn.execute(
            "UPDATE memories SET superseded_by = ?, superseded_at = ?, valid_to = CASE "
            "WHEN ? IS NOT NULL AND (valid_to IS NULL OR valid_to > ?) THEN ? ELSE valid_to END "
            "WHERE id = ? AND user_id = ? AND memory_type = ? AND superseded_by IS NULL",
            (memory.id, iso(memory.created_at), start, start, start, target, memory.user_id,
             memory.memory_type.value),
        )  # fmt: skip
        if cursor.rowcount != 1:  # raced with another writer: roll the whole write back
            raise changed_meanwhile([target])


def count_uses(conn: sqlite3.Connection, user_id: str, ids: Sequence[str], at: datetime) -> None:
    marks = ",".join("?" * len(ids))
    conn.execute(
        f"UPDATE memories SET last_used_at = ?, use_count = use_count + 1 "
        f"WHERE {_BY_ID_FOR_OWNER} = ? AND id IN ({marks})",
        (iso(at), user_id, *ids),
    )


def stored_search_text(conn: sqlite3.Connection, user_id: str, memory_id: str) -> str | None:
    row = conn.execute(
        "SELECT search_text FROM memories WHERE id = ? AND user_id = ?", (memory_id, user_id)
    ).fetchone()
    return None if row is None else row[0]


def update(conn: sqlite3.Connection, user_id: str, memory_id: str, sets: dict[str, Any]) -> int | None:
    """Set ``sets`` on one of the user's rows; its rowid, or None if the user has no such row."""
    assignments = ", ".join(f"{k} = :{k}" for k in sets)
    changed = conn.execute(
        f"UPDATE memories SET {assignments} WHERE id = :id AND user_id = :user_id RETURNING rowid",
        sets | {"id": memory_id, "user_id": user_id},
    ).fetchall()
    if changed and "search_text" in sets:
        cover(conn, [(changed[0][0], sets["search_text"])])
    return changed[0][0] if changed else None


def delete(conn: sqlite3.Connection, user_id: str, memory_id: str) -> bool:
    cursor = conn.execute("DELETE FROM memories WHERE id = ? AND user_id = ?", (memory_id, user_id))
    return cursor.rowcount == 1


def set_state(conn: sqlite3.Connection, user_id: str, key: str, value: str | None) -> None:
    if value is None:
        conn.execute("DELETE FROM user_state WHERE user_id = ? AND key = ?", (user_id, key))
    else:
        conn.execute(
            "INSERT INTO user_state(user_id, key, value) VALUES (?, ?, ?) "
            "ON CONFLICT(user_id, key) DO UPDATE SET value = excluded.value",
            (user_id, key, value),
        )


# -- reads ---------------------------------------------------------------------------------


def by_ids(conn: sqlite3.Connection, user_id: str, ids: Sequence[str], include_catalog: bool) -> list[Memory]:
    """The user's memories among ``ids`` (catalog entries too if asked), in the order of ``ids``."""
    marks = ",".join("?" * len(ids))
    column = _BY_ID_FOR_OWNER
    owner = f"({column} = ? OR {column} IS NULL)" if include_catalog else f"{column} = ?"
    found = conn.execute(
        f"SELECT {rows.SELECT_COLUMNS} FROM memories WHERE {owner} AND id IN ({marks})",
        (user_id, *ids),
    ).fetchall()
    by_id = {r[0]: rows.from_row(r) for r in found}
    return [by_id[i] for i in ids if i in by_id]


def read_memories(
    conn: sqlite3.Connection, owner: str, ids: list[str]
) -> list[tuple[Memory, frozenset[str] | None]]:
    """The owner's (``''``: the catalog's) memories among ``ids``, in no particular order, each
    with its stored coverage (``rows.read_coverage``: None where it is to be worked out)."""
    marks = ",".join("?" * len(ids))
    found = conn.execute(
        f"SELECT {rows.SELECT_COLUMNS}, c.words FROM memories m LEFT JOIN row_coverage c ON c.rowid = m.rowid "
        f"WHERE {_BY_ID_FOR_OWNER} IS ? AND id IN ({marks})",
        (owner or None, *ids),
    )
    return [(rows.from_row(r[:-1]), rows.read_coverage(r[-1])) for r in found]


def unzipped(
    read: list[tuple[Memory, frozenset[str] | None]],
) -> tuple[list[Memory], list[frozenset[str] | None]]:
    """``read_memories``' pairs as the memories and, beside them, their stored coverage."""
    return [memory for memory, _ in read], [words for _, words in read]


def page(conn: sqlite3.Connection, query: ListQuery) -> list[Memory]:
    clauses, params = ["user_id IS ?"], [query.user_id]
    if query.since is not None:
        clauses.append("created_at > ?")  # same ISO-8601 UTC form rows.to_row writes
        params.append(iso(query.since))
    if query.memory_types:
        clauses.append(f"memory_type IN ({','.join('?' * len(query.memory_types))})")
        params.extend(sorted(t.value for t in query.memory_types))
    if not query.include_superseded:
        clauses.append("superseded_by IS NULL")
    if query.about is not None:
        clauses.append("about = ?")
        params.append(query.about)
    if query.expired_by is not None:
        clauses.append("expires_at IS NOT NULL AND expires_at <= ?")
        params.append(iso(query.expired_by))
    order = (
        "created_at ASC, rowid ASC"
        if query.oldest_first
        else "COALESCE(occurred_at, created_at) DESC, rowid DESC"
    )
    sql = (
        f"SELECT {rows.SELECT_COLUMNS} FROM memories WHERE {' AND '.join(clauses)} "
        f"ORDER BY {order} LIMIT ? OFFSET ?"
    )
    return [rows.from_row(r) for r in conn.execute(sql, (*params, query.limit, query.offset)).fetchall()]


def get_state(conn: sqlite3.Connection, user_id: str, key: str) -> str | None:
    row = conn.execute(
        "SELECT value FROM user_state WHERE user_id = ? AND key = ?", (user_id, key)
    ).fetchone()
    return row[0] if row else None
