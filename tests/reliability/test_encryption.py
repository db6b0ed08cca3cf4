"""Encryption at rest, through real programs: a plain store encrypted by ``atlas-mcp rekey``, then
served over stdio and HTTP with the key; no memory's text is left readable in any file beside
it; a missing or wrong key is one line, never a traceback; rekey changes and removes the key and
refuses while a server has the store open; the saved postings are sealed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from foundation.mcp_helpers import call, server_env, stdio_client

from atlas_mcp.engines.embedded.cipher import FileSealer, StoreKey, is_encrypted
from atlas_mcp.engines.embedded.saved_postings import SavedPostings

from .http_server import http_server, mcp_session

pytestmark = pytest.mark.slow

SECRET_WORD = "Zanzibarquux"  # a word that appears only in the memories


def _cli(data_dir: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "atlas_mcp", *args],
        env=server_env(data_dir, **env), capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip


def _readable_anywhere(data_dir: Path) -> list[str]:
    return [p.name for p in data_dir.rglob("*") if p.is_file() and SECRET_WORD.encode() in p.read_bytes()]


async def test_rekey_then_serve_over_stdio_and_http(tmp_path: Path) -> None:
    data, key_file = tmp_path / "data", tmp_path / "store.key"
    async with stdio_client(data, "sarah") as plain:
        first = await call(plain, "write_memory", text=f"Sarah's boat is called {SECRET_WORD}")
    assert _readable_anywhere(data)  # the plain store holds the text as written
    done = _cli(data, "rekey", "--new-key-file", str(key_file))
    assert done.returncode == 0, done.stderr
    assert is_encrypted(data / "atlas.db") and len(key_file.read_text().strip()) == 64
    assert _readable_anywhere(data) == []

    async with stdio_client(data, "sarah", ATLAS_ENCRYPTION_KEY_FILE=str(key_file)) as client:
        found = await call(client, "recall_memory", query="what is Sarah's boat called")
        assert found["memories"][0]["id"] == first["id"]
        await call(
            client, "write_memory", text=f"Sarah moors {SECRET_WORD} in Falmouth", memory_type="episodic"
        )
    token = "enc-test-token-5b1d77aa"
    config = {"users": {"sarah": {"token": token}}, "encryption_key_file": str(key_file)}
    with http_server(data, config) as (base, _log):
        async with mcp_session(base + "/mcp", token) as session:
            found = await call(session, "recall_memory", query="where does Sarah moor her boat")
            assert any("Falmouth" in m["text"] for m in found["memories"])
            await call(session, "write_memory", text=f"{SECRET_WORD} needs new sails")
            assert _readable_anywhere(data) == []  # the WAL too, while the server runs
    assert _readable_anywhere(data) == []


def test_a_missing_or_wrong_key_is_one_line(tmp_path: Path) -> None:
    data, key_file = tmp_path / "data", tmp_path / "store.key"
    nothing = _cli(data, "rekey", "--new-key-file", str(key_file))
    assert nothing.returncode != 0 and "no memory store" in nothing.stderr and not key_file.exists()
    made = _cli(data, "stats", ATLAS_ENCRYPTION_KEY="a passphrase of mine")  # a new store, encrypted
    assert made.returncode == 0, made.stderr and is_encrypted(data / "atlas.db")
    for env, says in (
        ({}, "is encrypted: set ATLAS_ENCRYPTION_KEY"),
        ({"ATLAS_ENCRYPTION_KEY": "not the passphrase"}, "does not open the memory store"),
    ):
        for command in (["stats"], ["serve", "--user", "sarah"]):
            done = _cli(data, *command, **env)
            assert done.returncode != 0 and says in done.stderr, done.stderr
            assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert _cli(data, "stats", ATLAS_ENCRYPTION_KEY="a passphrase of mine").returncode == 0


async def test_rekey_changes_and_removes_the_key_and_waits_for_servers(tmp_path: Path) -> None:
    data, first_key, second_key = tmp_path / "data", tmp_path / "one.key", tmp_path / "two.key"
    async with stdio_client(data, "sarah") as client:
        await call(client, "write_memory", text=f"Sarah's cat is {SECRET_WORD}")
    assert _cli(data, "rekey", "--new-key-file", str(first_key)).returncode == 0
    async with stdio_client(data, "sarah", ATLAS_ENCRYPTION_KEY_FILE=str(first_key)):
        busy = _cli(
            data, "rekey", "--new-key-file", str(second_key), ATLAS_ENCRYPTION_KEY_FILE=str(first_key)
        )
        assert busy.returncode != 0 and "another process has the memory store" in busy.stderr
    moved = _cli(data, "rekey", "--new-key-file", str(second_key), ATLAS_ENCRYPTION_KEY_FILE=str(first_key))
    assert moved.returncode == 0, moved.stderr
    assert "does not open" in _cli(data, "stats", ATLAS_ENCRYPTION_KEY_FILE=str(first_key)).stderr
    assert _cli(data, "rekey", "--decrypt", ATLAS_ENCRYPTION_KEY_FILE=str(second_key)).returncode == 0
    assert not is_encrypted(data / "atlas.db") and _readable_anywhere(data)
    listed = _cli(data, "memories", "list", "--user", "sarah")
    assert listed.returncode == 0 and SECRET_WORD in listed.stdout


def test_saved_postings_are_sealed(tmp_path: Path) -> None:
    """The postings file a large owner's start saves: sealed under the store's key, unreadable
    (so rebuilt) under another key or none, never holding the words in the clear."""
    database = tmp_path / "atlas.db"
    database.write_bytes(b"\x01" * 64)  # stands for an encrypted file's salt
    arrays = {"words": np.array([SECRET_WORD, "falmouth"]), "rowids": np.arange(2)}
    sealed = SavedPostings(tmp_path / "postings", FileSealer(StoreKey("ab" * 32), database))
    sealed.write("sarah", arrays)
    (saved,) = (tmp_path / "postings").glob("*.npz")
    assert SECRET_WORD.encode() not in saved.read_bytes() and b"falmouth" not in saved.read_bytes()
    assert sorted(sealed.read("sarah")["words"]) == sorted(arrays["words"])
    assert (
        SavedPostings(tmp_path / "postings", FileSealer(StoreKey("cd" * 32), database)).read("sarah")
        is None
    )
    assert SavedPostings(tmp_path / "postings").read("sarah") is None
    SavedPostings(tmp_path / "postings").write("sarah", arrays)  # a plain file, as before encryption
    assert sealed.read("sarah") is None  # is foreign to the sealed store: rebuilt, then sealed
