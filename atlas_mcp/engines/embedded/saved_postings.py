"""Large owners' BM25 postings, saved beside the database so a start need not rebuild them.

Building an owner's postings costs ~1.5 s per 100k memories on the first recall's path. An
owner of ``SAVED_MIN_ROWS`` or more has them saved (one ``.npz`` per owner, named by a hash
of the owner, in ``atlas.db-postings/``, mode 0600) when a start had to build or update them.
Saved postings are only ever a head start: ``OwnerPostings.restored`` checks every saved row
against the row's rowid and words now and adds the rows written since; a damaged or foreign
file is rebuilt from the rows. A forget deletes its owner's file. In an encrypted store each
file is sealed (``cipher.FileSealer``); one the key does not open is foreign.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import time
import zipfile
from pathlib import Path
from typing import Protocol

import numpy as np

from ...files import replaced
from ...log import get_logger

log = get_logger(__name__)

SAVED_MIN_ROWS = 20_000  # below this, building postings costs < 0.3 s: nothing is saved
STALE_SECONDS = 3600  # a temporary file this old was left by a process killed while writing


class Sealer(Protocol):
    def seal(self, plain: bytes) -> bytes: ...

    def open(self, sealed: bytes) -> bytes | None: ...


class SavedPostings:
    """The saved postings in one folder (sealed when ``sealer`` is given)."""

    def __init__(self, folder: Path, sealer: Sealer | None = None) -> None:
        self.folder = folder
        self.sealer = sealer

    def path(self, owner: str) -> Path:
        name = hashlib.sha256(owner.encode("utf-8", "surrogatepass")).hexdigest()[:32]
        return self.folder / f"{name}.npz"

    def read(self, owner: str) -> dict[str, np.ndarray] | None:
        try:
            source: Path | io.BytesIO = self.path(owner)
            if self.sealer is not None:
                if (data := self.sealer.open(self.path(owner).read_bytes())) is None:
                    return None  # not sealed with this key: built from the rows instead
                source = io.BytesIO(data)
            with np.load(source, allow_pickle=False) as found:
                return {name: found[name] for name in found.files}
        except (OSError, ValueError, EOFError, zipfile.BadZipFile):
            return None  # none yet, or cut short: built from the rows instead

    def write(self, owner: str, arrays: dict[str, np.ndarray] | None) -> None:
        if arrays is None:
            return
        try:
            self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            self._sweep()
            with replaced(self.path(owner)) as out:
                if self.sealer is None:
                    np.savez(out, allow_pickle=False, **arrays)
                else:
                    buffer = io.BytesIO()
                    np.savez(buffer, allow_pickle=False, **arrays)
                    out.write(self.sealer.seal(buffer.getvalue()))
        except OSError as error:  # a read-only or full disk costs the next start its head start
            log.warning("postings not saved", folder=str(self.folder), error=str(error))

    def _sweep(self) -> None:
        for left in self.folder.glob(".*.tmp"):
            with contextlib.suppress(OSError):
                if time.time() - left.stat().st_mtime > STALE_SECONDS:
                    left.unlink()

    def drop(self, owner: str) -> None:
        try:
            self.path(owner).unlink(missing_ok=True)
        except OSError as error:  # the forget itself has committed: say so, never undo it
            log.warning("saved postings not deleted", path=str(self.path(owner)), error=str(error))
