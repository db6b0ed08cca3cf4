"""``atlas-mcp rekey``: encrypt a plain store, change its key, or decrypt it, all in one pass.

SQLCipher's ``sqlcipher_export`` copies every table (the FTS shadow tables, the audit trail and
the migrations included) into a new file under the new key, which then replaces the old one by
rename: a crash leaves the old store whole. The store must be closed everywhere: leaving WAL
mode needs the only connection, so an open server is detected, not raced. The saved postings
are deleted (they are rebuilt, sealed with the new key, on the next start).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from ...errors import ConfigurationError
from .cipher import PLAIN_HEADER, StoreKey, driver, header, unlock

REKEY_SUFFIX = ".rekey"


def rekey(path: Path, old: StoreKey | None, new: StoreKey | None) -> int:
    """Re-encrypt the store at ``path`` from ``old`` to ``new`` (None: plain); its memory count."""
    if not path.is_file():
        raise ConfigurationError(f"no memory store at {path}")
    if old is None and header(path) != PLAIN_HEADER:
        raise ConfigurationError(f"the memory store {path} is encrypted: set its current key to rekey it")
    db = driver(old or new or StoreKey("plain"))  # SQLCipher's driver, which also opens plain files
    conn = db.connect(str(path), isolation_level=None, timeout=1.0)
    target = path.with_name(path.name + REKEY_SUFFIX)
    try:
        if old is not None:
            unlock(conn, old, path)
        _alone(conn, path)
        with contextlib.suppress(FileNotFoundError):
            target.unlink()
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        conn.execute("ATTACH DATABASE ? AS target KEY ?", (str(target), _attach_key(new)))
        conn.execute("SELECT sqlcipher_export('target')")
        conn.execute(f"PRAGMA target.user_version = {int(version)}")
        conn.execute("DETACH DATABASE target")
        count = conn.execute("SELECT count(*) FROM memories").fetchone()[0]
    except BaseException:
        conn.close()
        with contextlib.suppress(FileNotFoundError):
            target.unlink()
        raise
    conn.close()
    _back_to_wal(db, target, new)
    os.replace(target, path)
    _drop_saved_files(path)
    return int(count)


def _alone(conn: object, path: Path) -> None:
    """Leave WAL mode (checkpointing it): SQLite allows that only to the one open connection."""
    try:
        mode = conn.execute("PRAGMA journal_mode = DELETE").fetchone()[0]  # type: ignore[attr-defined]
    except Exception as exc:  # noqa: BLE001 - the driver's OperationalError ("database is locked")
        mode = str(exc)
    if str(mode).lower() != "delete":
        raise ConfigurationError(
            f"another process has the memory store {path} open: stop every atlas-mcp server "
            "using it, then run rekey again"
        )


def _attach_key(key: StoreKey | None) -> str:
    if key is None:
        return ""  # an empty key: the copy is a plain SQLite file
    return f"x'{key.secret.lower()}'" if key.is_raw else key.secret


def _back_to_wal(db, target: Path, key: StoreKey | None) -> None:
    conn = db.connect(str(target), isolation_level=None)
    try:
        if key is not None:
            unlock(conn, key, target)
        conn.execute("PRAGMA journal_mode = WAL")
    finally:
        conn.close()


def _drop_saved_files(path: Path) -> None:
    """Files beside the store sealed (or not) under the old key: the WAL and shared memory of
    the old file, and the saved postings, which are rebuilt."""
    for suffix in ("-wal", "-shm", "-journal"):
        with contextlib.suppress(FileNotFoundError):
            path.with_name(path.name + suffix).unlink()
    postings = path.with_name(path.name + "-postings")
    for saved in postings.glob("*.npz") if postings.is_dir() else ():
        with contextlib.suppress(FileNotFoundError):
            saved.unlink()
