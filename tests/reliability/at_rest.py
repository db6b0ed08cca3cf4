"""Helpers for the encryption-at-rest tests: a word only the memories hold, a scan of every file
for it (in the encodings and containers a file could hold it in), the CLI as a subprocess, and
a large store seeded fast (random vectors: these tests look at files, not at ranking)."""

from __future__ import annotations

import io
import subprocess
import sys
import zipfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from atlas_mcp.domain.model import Memory, MemoryType
from atlas_mcp.engines.embedded.maintenance import EmbeddedEngine, StoreKey, write_many
from atlas_mcp.inference.embedder import default_embedder

from .wire import server_env

SECRET_WORD = "Zanzibarquux"  # appears in the memories and nowhere else
RAW_KEY = "5e" * 32
OTHER_RAW_KEY = "a7" * 32
PASSPHRASE = "correct horse battery staple"
ENCODINGS = ("utf-8", "utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be")


def _contents(data: bytes) -> list[bytes]:
    """The file's bytes, and each member's if it is a zip archive (``.npz``), inflated."""
    found = [data]
    if data[:4] == b"PK\x03\x04":
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                found += [archive.read(name) for name in archive.namelist()]
        except (zipfile.BadZipFile, OSError):
            pass
    return found


def holds_word(data: bytes, word: str = SECRET_WORD) -> bool:
    """Does ``data`` hold ``word`` in any case and common encoding (the keyword index lower-cases
    it; numpy saves strings as UTF-32)?"""
    needles = [w.encode(e) for w in {word, word.lower(), word.upper()} for e in ENCODINGS]
    return any(n in content for content in _contents(data) for n in needles)


def readable(*folders: Path) -> list[str]:
    """The files under ``folders`` that hold the secret word in the clear."""
    out = []
    for folder in folders:
        for path in sorted(folder.rglob("*")):
            try:
                data = path.read_bytes() if path.is_file() else b""
            except FileNotFoundError:  # a WAL or temporary file gone between listing and reading
                continue
            if holds_word(data):
                out.append(str(path.relative_to(folder)))
    return out


def cli(data_dir: Path, *args: str, timeout: float = 300, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "atlas_mcp", *args], env=server_env(data_dir, "sarah", **env),
        capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip


def one_line_error(done: subprocess.CompletedProcess, says: str) -> None:
    """A failed command: non-zero exit, one line on stderr saying ``says``, no traceback."""
    lines = done.stderr.strip().splitlines()
    assert done.returncode != 0, done.stdout
    assert "Traceback" not in done.stderr and len(lines) == 1, done.stderr
    assert says in lines[0], lines[0]


def seed_large(database: Path, count: int, key: StoreKey | None = None, user: str = "sarah") -> None:
    """``count`` memories of ``user``, each holding the secret word, in one transaction."""
    engine = EmbeddedEngine(database, default_embedder(), key=key)
    try:
        now = datetime.now(UTC)
        memories = [
            Memory(id=f"m{i:06d}", memory_type=MemoryType.SEMANTIC, user_id=user,
                   text=f"{SECRET_WORD} log {i}: harbour {i % 97}, sails {i % 13}, crew {i % 7}",
                   created_at=now - timedelta(minutes=i))
            for i in range(count)
        ]  # fmt: skip
        vectors = np.random.default_rng(7).standard_normal((count, engine.models.dimensions))
        vectors = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)
        write_many(engine, memories, vectors)
    finally:
        engine.close()
