"""Who has the store open: every process that opens it holds ``atlas.db-lock`` (an empty file
beside it) shared for as long as it does; ``rekey``, which replaces the store by rename, holds
it exclusively.

SQLite's own locks cover transactions, not a connection's lifetime, so they cannot tell
``rekey`` that a server with no transaction in flight still has the old file open (its writes
would go to a file that no longer has a name). These are ``flock`` locks on a file of their
own: closing it never touches the ``fcntl`` locks SQLite holds on the database (closing any
descriptor of a file drops those). Where ``flock`` does not exist (Windows) nothing is held and
``rekey`` relies on SQLite refusing to leave WAL mode while another connection is open.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

from ...errors import BackendUnavailable

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

LOCK_SUFFIX = "-lock"
POLL_S = 0.05


class Hold:
    """A lock on the store, released by ``release`` (or when the process ends)."""

    def __init__(self, fd: int | None) -> None:
        self._fd = fd

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)  # closing the descriptor releases its flock
            self._fd = None


def lock_file(database: Path) -> Path:
    return database.with_name(database.name + LOCK_SUFFIX)


def shared(database: Path, timeout_s: float) -> Hold:
    """Hold the store shared, waiting up to ``timeout_s`` while ``rekey`` holds it. A folder
    we may not write leaves nothing held: SQLite then says what is wrong."""
    fd = _open(database)
    if fd is None:
        return Hold(None)
    if not _lock(fd, fcntl.LOCK_SH, time.monotonic() + timeout_s):
        os.close(fd)
        raise BackendUnavailable(
            f"the memory store {database} is being re-encrypted (atlas-mcp rekey); try again when it is done"
        )
    return Hold(fd)


def exclusive(database: Path) -> Hold | None:
    """Hold the store exclusively, or None while any other process (or connection) has it."""
    fd = _open(database)
    if fd is None:
        return Hold(None)
    if _lock(fd, fcntl.LOCK_EX, time.monotonic()):
        return Hold(fd)
    os.close(fd)
    return None


def _open(database: Path) -> int | None:
    if fcntl is None:
        return None
    try:
        return os.open(lock_file(database), os.O_RDONLY | os.O_CREAT, 0o644)  # SQLite's mode for new files
    except OSError:
        return None


def _lock(fd: int, kind: int, deadline: float) -> bool:
    while True:
        try:
            fcntl.flock(fd, kind | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(POLL_S)
