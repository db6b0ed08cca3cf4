"""Encryption at rest for the embedded store: the database through SQLCipher, the files beside it
with AES-256-GCM, both from one secret (``ATLAS_ENCRYPTION_KEY`` or ``encryption_key_file``).

- A key of 64 hex digits is a raw 256-bit key: SQLCipher uses it as it is (no key derivation, so
  opening costs nothing extra). Any other text of 8 characters or more is a passphrase,
  stretched by SQLCipher's own PBKDF2 (SHA-512, 256,000 rounds: about 0.2-0.5 s per open).
  Text that looks like a raw key written another way (``x'…'``, ``0x…``, 32 or 63 hex digits)
  is refused with what a raw key looks like, so a mistyped key never silently becomes a
  passphrase.
- SQLCipher encrypts every page, in the database file, its WAL and its rollback journal; the
  shared-memory index holds no content, and temporary tables stay in memory
  (``temp_store = MEMORY``).
- The saved postings (``atlas.db-postings/``) are sealed with AES-256-GCM under a key derived
  from the same secret (HKDF for a raw key; scrypt, salted with the database's own salt, for a
  passphrase); a file the key does not open reads as absent, and is rebuilt from the rows.
- Without a key nothing changes: the standard library's ``sqlite3`` opens plain stores.

No message here ever holds the key: they name where it came from, and its length at most.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import re
import sqlite3
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ...errors import ConfigurationError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    from ...config import Settings

PLAIN_HEADER = b"SQLite format 3\x00"
SEALED_MAGIC = b"ATLAS-AESGCM-1\x00\x00"  # 16 bytes, then a 12-byte nonce, then ciphertext + tag
NONCE_BYTES = 12
RAW_KEY_DIGITS = 64
MIN_PASSPHRASE = 8
INSTALL = "pip install 'atlas-memory-mcp[encryption]'"
MAKE_A_KEY = "`openssl rand -hex 32` makes a raw key"
_HEX = re.compile(r"[0-9a-fA-F]+")
_WRAPPED_HEX = re.compile(r"""["']?(?:x'[0-9a-fA-F]*'|0x[0-9a-fA-F]+)["']?""")


@dataclass(frozen=True, slots=True, repr=False)
class StoreKey:
    """The secret a store is encrypted with (never shown: no repr, no str)."""

    secret: str

    def __repr__(self) -> str:
        return "StoreKey(<hidden>)"

    __str__ = __repr__

    @property
    def is_raw(self) -> bool:
        return len(self.secret) == RAW_KEY_DIGITS and bool(_HEX.fullmatch(self.secret))

    def sqlcipher_key(self) -> str:
        """The key as SQLCipher's ``PRAGMA key`` and ``ATTACH … KEY`` take it."""
        return f"x'{self.secret.lower()}'" if self.is_raw else self.secret

    def pragma(self) -> str:
        """The ``PRAGMA key`` statement (pragmas take no bound parameters: quoted here)."""
        return "PRAGMA key = '" + self.sqlcipher_key().replace("'", "''") + "'"

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


def format_problem(secret: str) -> str | None:
    """What is wrong with ``secret`` as a key, without repeating it; None if it is a key."""
    if secret != secret.strip():
        return "starts or ends with a space or line break"
    if any(ord(c) < 32 or ord(c) == 127 for c in secret):
        return "holds a control character (a line break or tab?)"
    if _WRAPPED_HEX.fullmatch(secret):
        return f"is written as x'…' or 0x…: give a raw key as its {RAW_KEY_DIGITS} hex digits alone"
    if _HEX.fullmatch(secret) and len(secret) >= 32 and len(secret) != RAW_KEY_DIGITS:
        return (
            f"looks like a raw key in hex but has {len(secret)} digits: a raw key is exactly "
            f"{RAW_KEY_DIGITS} (256 bits); a passphrase needs a character other than 0-9 and a-f"
        )
    if len(secret) < MIN_PASSPHRASE:
        return f"is {len(secret)} characters long: a passphrase needs {MIN_PASSPHRASE} or more"
    return None


def store_key(secret: str | None, source: str) -> StoreKey | None:
    """The key ``secret`` (from ``source``, e.g. ``ATLAS_ENCRYPTION_KEY``) names; None: no key."""
    if secret is None:
        return None
    if problem := format_problem(secret):
        raise ConfigurationError(
            f"the encryption key in {source} {problem} "
            f"({MAKE_A_KEY}; any other text of {MIN_PASSPHRASE}+ characters is a passphrase)"
        )
    return StoreKey(secret)


def configured_key(settings: Settings) -> StoreKey | None:
    """The key the settings give the embedded store, checked; None: the store is plain."""
    return store_key(settings.encryption_secret(), settings.encryption_key_source())


def driver(key: StoreKey | None) -> ModuleType:
    """The DB-API module that opens the store: SQLCipher's with a key, else the standard one."""
    if key is None:
        return sqlite3
    try:
        import cryptography  # noqa: F401 - seals the saved postings: missing, say so now, not later

        dbapi2 = importlib.import_module("sqlcipher3.dbapi2")
    except ImportError as exc:
        raise ConfigurationError(
            f"an encryption key is set, but {(exc.name or 'sqlcipher3').split('.')[0]} is not installed: {INSTALL}"
        ) from exc
    module: ModuleType = dbapi2
    return module


def unlock(conn: Any, key: StoreKey, path: Path) -> None:
    """Give SQLCipher the key and prove it opens the file; a wrong key or a plain store is one
    clear line, never a traceback (SQLCipher's own log stays silent)."""
    conn.execute("PRAGMA cipher_log_level = NONE")
    conn.execute(key.pragma())
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except errors("DatabaseError") as exc:
        if "not a database" not in str(exc):  # locked, unreadable: the store's own message
            raise
        raise ConfigurationError(refusal(path, key)) from None
    conn.execute("PRAGMA temp_store = MEMORY")


def connect(path: Path, key: StoreKey | None, **options: Any) -> Any:
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
    if key is not None and header(path) == PLAIN_HEADER:
        return (
            f"the memory store {path} is not encrypted, but an encryption key is set: encrypt it "
            "with `atlas-mcp rekey --new-key-file FILE` (servers stopped), or unset the key"
        )
    if key is None:
        return (
            f"the memory store {path} is encrypted: set ATLAS_ENCRYPTION_KEY or encryption_key_file "
            "to the key it was encrypted with"
        )
    return f"the encryption key does not open the memory store {path} (wrong key, or not a memory store)"


def is_encrypted(path: Path) -> bool:
    first = header(path)
    return bool(first) and first != PLAIN_HEADER


class FileSealer:
    """AES-256-GCM for whole files beside the database; the key is derived on first use."""

    def __init__(self, key: StoreKey, database: Path) -> None:
        self._key, self._database, self._derived = key, database, b""

    def _aead(self) -> AESGCM:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        if not self._derived:
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
            return bytes(self._aead().decrypt(nonce, sealed[len(SEALED_MAGIC) + NONCE_BYTES :], SEALED_MAGIC))
        except InvalidTag:
            return None
