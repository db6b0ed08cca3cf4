"""``atlas-mcp rekey``: encrypt a plain store, change its key, or decrypt it, all in one pass.

SQLCipher's ``sqlcipher_export`` copies every table (the audit trail and the migrations
included) into a new file under the new key; the copy is checked (every page read back under
the new key, the memories counted), synced, and renamed over the old file. A crash at any
point leaves the old store whole, or the new one complete: never neither. A copy a crash left
behind is deleted by the next rekey or the next process to open the store.

Nothing else may have the store open: every atlas-mcp process holds it (``holders.py``) and
rekey takes it exclusively for the whole pass, so a server that starts meanwhile waits, then
opens the new file. Another program's connection (the sqlite3 shell) is refused too: leaving
WAL mode needs the only connection. The saved postings are deleted before the
rename (they are rebuilt, sealed with the new key, by the next start), so none sealed with the
old key, or left plain, outlives it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...errors import ConfigurationError
from . import holders
from .cipher import PLAIN_HEADER, StoreKey, driver, header, refusal, unlock

COPY_SUFFIX = ".rekey"
_SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")
BUSY = (
    "another process has the memory store {path} open: stop every atlas-mcp server (and command) "
    "using it, then run rekey again"
)


def rekey(
    path: Path, old: StoreKey | None, new: StoreKey | None, save_key: Callable[[], None] | None = None
) -> int:
    """Re-encrypt the store at ``path`` from ``old`` to ``new`` (None: plain); its memory count.
    ``save_key`` runs once the new copy checks out, before the rename: the new key is kept
    before the store depends on it, and never for a store left as it was."""
    if not path.is_file():
        raise ConfigurationError(f"no memory store at {path}")
    encrypted = header(path) != PLAIN_HEADER
    if old is None and encrypted:
        raise ConfigurationError(refusal(path, None))
    if new is None and not encrypted:
        raise ConfigurationError(f"the memory store {path} is not encrypted: there is nothing to decrypt")
    hold = holders.exclusive(path)
    if hold is None:
        raise ConfigurationError(BUSY.format(path=path))
    try:
        return _rekey_held(path, old, new, save_key)
    finally:
        hold.release()


def _rekey_held(
    path: Path, old: StoreKey | None, new: StoreKey | None, save_key: Callable[[], None] | None
) -> int:
    db = driver(old or new)  # SQLCipher's driver, which opens plain files too
    copy = path.with_name(path.name + COPY_SUFFIX)
    remove_leftovers(path)
    conn = db.connect(str(path), isolation_level=None, timeout=1.0)
    try:
        if old is not None:
            unlock(conn, old, path)
        _leave_wal(conn, path)
        count = int(conn.execute("SELECT count(*) FROM memories").fetchone()[0])
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        conn.execute("ATTACH DATABASE ? AS copy KEY ?", (str(copy), new.sqlcipher_key() if new else ""))
        conn.execute("SELECT sqlcipher_export('copy')")
        conn.execute(f"PRAGMA copy.user_version = {version}")
        conn.execute("DETACH DATABASE copy")
    except BaseException:
        conn.close()
        remove_leftovers(path)
        raise
    conn.close()
    try:
        _check_copy(db, copy, new, count)
        _sync(copy)
        if save_key is not None:
            save_key()
    except BaseException:
        remove_leftovers(path)
        raise
    _drop_saved_postings(path)
    for suffix in _SQLITE_SIDE_FILES:  # the old file's: none holds a page after leaving WAL mode
        with contextlib.suppress(FileNotFoundError):
            path.with_name(path.name + suffix).unlink()
    os.replace(copy, path)
    _sync(path.parent)
    return count


def _leave_wal(conn: Any, path: Path) -> None:
    """Fold the WAL into the file and leave WAL mode, so the old file holds every page and no
    WAL of it can be mistaken for the new file's. SQLite allows this only to the one connection
    a file has (in WAL mode every open connection holds a shared lock on the file): another
    program's connection, even idle, is refused here."""
    try:
        mode = conn.execute("PRAGMA journal_mode = DELETE").fetchone()[0]
    except Exception as exc:  # noqa: BLE001 - the driver's OperationalError ("database is locked")
        mode = str(exc)
    if str(mode).lower() != "delete" or path.with_name(path.name + "-wal").exists():
        raise ConfigurationError(BUSY.format(path=path))


def _check_copy(db: Any, copy: Path, key: StoreKey | None, count: int) -> None:
    """Read every page of the copy back under its key and count its memories; then put it in
    WAL mode, the store's own."""
    conn = db.connect(str(copy), isolation_level=None)
    try:
        if key is not None:
            unlock(conn, key, copy)
        checked = conn.execute("PRAGMA integrity_check").fetchone()[0]
        copied = conn.execute("SELECT count(*) FROM memories").fetchone()[0]
        if checked != "ok" or copied != count:
            raise ConfigurationError(
                f"the re-encrypted copy of {copy.name} did not check out ({checked}; {copied} of "
                f"{count} memories): the store is unchanged"
            )
        conn.execute("PRAGMA journal_mode = WAL")
    finally:
        conn.close()


def _sync(path: Path) -> None:
    """The file's (or folder's) contents on the disk, so a rename never outruns them."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _drop_saved_postings(path: Path) -> None:
    postings = path.with_name(path.name + "-postings")
    for saved in postings.glob("*.npz") if postings.is_dir() else ():
        with contextlib.suppress(FileNotFoundError):
            saved.unlink()


def remove_leftovers(path: Path) -> None:
    """Delete the copy (and its journal) a rekey killed before its rename left beside ``path``;
    only ever called while no rekey can be running."""
    copy = path.with_name(path.name + COPY_SUFFIX)
    for leftover in (copy, *(copy.with_name(copy.name + s) for s in _SQLITE_SIDE_FILES)):
        with contextlib.suppress(FileNotFoundError):
            leftover.unlink()
