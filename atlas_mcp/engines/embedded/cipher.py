"""Encryption at rest for the embedded store: the database through SQLCipher, the files beside it
with AES-256-GCM, both from one secret (``ATLAS_ENCRYPTION_KEY`` or ``encryption_key_file``).

- A key of 64 hex digits is a raw 256-bit key: SQLCipher uses it as it is (no key derivation, so
  opening costs nothing extra). Any other text is a passphrase, stretched by SQLCipher's own
  PBKDF2 (SHA-512, 256,000 rounds: about 0.2-0.5 s per open, once per process).
- SQLCipher encrypts every page, in the database file and in its WAL; the shared-memory index
  holds no content, and temporary tables stay in memory (``temp_store = MEMORY``).
- The saved postings (``atlas.db-postings/``) are sealed with AES-256-GCM under a key derived
  from the same secret (HKDF for a raw key; scrypt, salted with the database's own salt, for a
  passphrase); a file the key does not open reads as absent, and is rebuilt from the rows.
- Without a key nothing changes: the standard library's ``sqlite3`` opens plain stores.
"""

from __future__ import annotations

import hashlib
import os
import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from ...errors import ConfigurationError

PLAIN_HEADER = b"SQLite format 3\x00"
SEALED_MAGIC = b"ATLAS-AESGCM-1\x00\x00"  # 16 bytes, then a 12-byte nonce, then ciphertext + tag
NONCE_BYTES = 12
_RAW_KEY = re.compile(r"^[0-9a-fA-F]{64}$")
INSTALL = "pip install 'atlas-memory-mcp[encryption]'"


@dataclass(frozen=True, slots=True, repr=False)
class StoreKey:
    """The secret a store is encrypted with (never logged: no repr)."""

    secret: str

    def __repr__(self) -> str:
        return "StoreKey(<hidden>)"

    @property
    def is_raw(self) -> bool:
        return bool(_RAW_KEY.match(self.secret))

    def pragma(self) -> str:
        """The ``PRAGMA key`` statement for SQLCipher."""
        if self.is_raw:
            return f"PRAGMA key = \"x'{self.secret.lower()}'\""
        return "PRAGMA key = '" + self.secret.replace("'", "''") + "'"

    def file_key(self, salt: bytes) -> bytes:
        """The 256-bit key sealing files beside the database (``salt``: the database's own)."""
        if self.is_raw:
            from cryptography.hazmat.primitives import hashes
            from cryptography.hazmat.primitives.kdf.hkdf import HKDF

            return HKDF(hashes.SHA256(), 32, salt, b"atlas-mcp saved files").derive(
                bytes.fromhex(self.secret)
            )
        return hashlib.scrypt(
            self.secret.encode(), salt=salt + b"atlas-mcp saved files", n=2**14, r=8, p=1, dklen=32
        )


def driver(key: StoreKey | None) -> ModuleType:
    """The DB-API module that opens the store: SQLCipher's with a key, else the standard one."""
    if key is None:
        return sqlite3
    try:
        from sqlcipher3 import dbapi2
    except ImportError as exc:
        raise ConfigurationError(
            f"an encryption key is set, but the SQLCipher driver is not installed: {INSTALL}"
        ) from exc
    return dbapi2


def unlock(conn: object, key: StoreKey, path: Path) -> None:
    """Give SQLCipher the key and prove it opens the file; a wrong key or a plain store is one
    clear line, never a traceback (SQLCipher's own log stays silent)."""
    conn.execute("PRAGMA cipher_log_level = NONE")  # type: ignore[attr-defined]
    conn.execute(key.pragma())  # type: ignore[attr-defined]
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # type: ignore[attr-defined]
    except Exception as exc:
        raise ConfigurationError(refusal(path, key)) from exc
    conn.execute("PRAGMA temp_store = MEMORY")  # type: ignore[attr-defined]


def connect(path: Path, key: StoreKey | None, **options: object):
    """A DB-API connection to the store at ``path``: SQLCipher's, unlocked, with a key; the
    standard library's without, refusing an encrypted file in one line."""
    if key is None and is_encrypted(path):
        raise ConfigurationError(refusal(path, None))
    db = driver(key)
    conn = db.connect(path, **options)
    conn.row_factory = db.Row
    if key is not None:
        try:
            unlock(conn, key, path)
        except BaseException:
            conn.close()
            raise
    return conn


def errors(name: str) -> tuple[type[Exception], ...]:
    """``sqlite3.<name>`` and, once SQLCipher's driver is loaded, its twin (a separate class)."""
    import sys

    loaded = sys.modules.get("sqlcipher3.dbapi2")
    return (getattr(sqlite3, name),) + ((getattr(loaded, name),) if loaded is not None else ())


def header(path: Path) -> bytes:
    try:
        with path.open("rb") as fh:
            return fh.read(16)
    except FileNotFoundError:
        return b""


def refusal(path: Path, key: StoreKey | None) -> str:
    """Why the configured key (or its absence) does not open the store at ``path``."""
    first = header(path)
    if key is not None and first == PLAIN_HEADER:
        return (
            f"the memory store {path} is not encrypted, but an encryption key is set: encrypt it "
            "with `atlas-mcp rekey --new-key-file FILE` (server stopped), or unset the key"
        )
    if key is None:
        return (
            f"the memory store {path} is encrypted: set ATLAS_ENCRYPTION_KEY or encryption_key_file "
            "to the key it was encrypted with"
        )
    return f"the encryption key does not open the memory store {path} (wrong key?)"


def is_encrypted(path: Path) -> bool:
    first = header(path)
    return bool(first) and first != PLAIN_HEADER


class FileSealer:
    """AES-256-GCM for whole files beside the database; the key is derived on first use."""

    def __init__(self, key: StoreKey, database: Path) -> None:
        self._key, self._database, self._derived = key, database, None

    def _aead(self):
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        if self._derived is None:
            self._derived = self._key.file_key(header(self._database) or b"\x00" * 16)
        return AESGCM(self._derived)

    def seal(self, plain: bytes) -> bytes:
        nonce = os.urandom(NONCE_BYTES)
        return SEALED_MAGIC + nonce + self._aead().encrypt(nonce, plain, SEALED_MAGIC)

    def open(self, sealed: bytes) -> bytes | None:
        """The plaintext, or None when the file is not sealed, or not with this key."""
        from cryptography.exceptions import InvalidTag

        if not sealed.startswith(SEALED_MAGIC):
            return None
        nonce = sealed[len(SEALED_MAGIC) : len(SEALED_MAGIC) + NONCE_BYTES]
        try:
            return self._aead().decrypt(nonce, sealed[len(SEALED_MAGIC) + NONCE_BYTES :], SEALED_MAGIC)
        except InvalidTag:
            return None
