"""Encryption at rest, through real programs: a plain store encrypted by ``atlas-mcp rekey``, then
served over stdio and HTTP with the key; no memory's words are readable in any file of the data
folder or of the server's temporary folder, while servers write (the WAL mid-write) and after
they stop; a large owner's saved postings are sealed; the same scans find the words of a plain
store, so they can fail."""

from __future__ import annotations

from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import numpy as np
import pytest
from foundation.mcp_helpers import call, stdio_client

from atlas_mcp.engines.embedded.cipher import FileSealer, StoreKey, is_encrypted
from atlas_mcp.engines.embedded.saved_postings import SAVED_MIN_ROWS, SavedPostings

from .at_rest import RAW_KEY, SECRET_WORD, cli, holds_word, readable, seed_large
from .http_server import http_server, mcp_session

pytestmark = pytest.mark.slow

TOKEN = "enc-test-token-5b1d77aa"


@asynccontextmanager
async def _session(transport: str, data: Path, tmp: Path, key: str | None):
    """A real client session with a server over ``transport``; its temporary files in ``tmp``."""
    tmp.mkdir(parents=True, exist_ok=True)
    if transport == "stdio":
        env = {"TMPDIR": str(tmp)} | ({"ATLAS_ENCRYPTION_KEY": key} if key else {})
        async with stdio_client(data, "sarah", **env) as client:
            yield client
        return
    config = {"users": {"sarah": {"token": TOKEN}}} | ({"encryption_key": key} if key else {})
    with http_server(data, config, env={"TMPDIR": str(tmp)}) as (base, _log):
        async with mcp_session(base + "/mcp", TOKEN) as client:
            yield client


async def _write_while_scanning(client, folders: tuple[Path, ...], writes: int = 12) -> list[tuple]:
    """Write ``writes`` memories while scanning ``folders`` every 50 ms: (WAL size, readable
    files) per scan, the last taken after the writes, the server still running."""
    wal = folders[0] / "atlas.db-wal"
    scans: list[tuple] = []

    async def scan() -> None:
        size = wal.stat().st_size if wal.exists() else 0
        scans.append((size, await anyio.to_thread.run_sync(readable, *folders)))

    async def keep_scanning(done: anyio.Event) -> None:
        while not done.is_set():
            await scan()
            await anyio.sleep(0.05)

    done = anyio.Event()
    async with anyio.create_task_group() as group:
        group.start_soon(keep_scanning, done)
        for i in range(writes):
            await call(client, "write_memory", text=f"{SECRET_WORD} moored at berth {i} of pier {i * 7}")
        await anyio.sleep(1.0)  # the deferred embeddings land in the WAL too
        done.set()
    await scan()
    return scans


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_the_wal_holds_no_words_mid_write(tmp_path: Path, transport: str) -> None:
    """The same writes through a running server: a plain store's WAL holds the words (the scan
    can fail), an encrypted one's holds none, in any scan during the writes or after."""
    plain, tmp_plain = tmp_path / "plain", tmp_path / "tmp-plain"
    async with _session(transport, plain, tmp_plain, None) as client:
        scans = await _write_while_scanning(client, (plain, tmp_plain))
    assert any("atlas.db-wal" in found for _, found in scans), scans

    data, tmp = tmp_path / "data", tmp_path / "tmp"
    async with _session(transport, data, tmp, RAW_KEY) as client:
        scans = await _write_while_scanning(client, (data, tmp))
        assert is_encrypted(data / "atlas.db")
    assert [found for _, found in scans if found] == []
    assert max(size for size, _ in scans) > 0  # the WAL held the writes while they were scanned
    assert readable(data, tmp) == []


async def test_rekey_then_serve_over_stdio_and_http(tmp_path: Path) -> None:
    data, tmp, key_file = tmp_path / "data", tmp_path / "tmp", tmp_path / "store.key"
    async with _session("stdio", data, tmp, None) as plain:
        first = await call(plain, "write_memory", text=f"Sarah's boat is called {SECRET_WORD}")
    assert "atlas.db" in readable(data)  # the plain store holds the text as written
    done = cli(data, "rekey", "--new-key-file", str(key_file))
    assert done.returncode == 0, done.stderr
    assert "encrypted" in done.stdout and "1 memories" in done.stdout
    assert is_encrypted(data / "atlas.db") and len(key_file.read_text().strip()) == 64
    assert key_file.stat().st_mode & 0o777 == 0o600
    assert readable(data) == []

    async with stdio_client(
        data, "sarah", ATLAS_ENCRYPTION_KEY_FILE=str(key_file), TMPDIR=str(tmp)
    ) as client:
        found = await call(client, "recall_memory", query="what is Sarah's boat called", min_relevance=0)
        assert found["memories"][0]["id"] == first["id"]
        await call(
            client, "write_memory", text=f"Sarah moors {SECRET_WORD} in Falmouth", memory_type="episodic"
        )
        assert readable(data, tmp) == []
    config = {"users": {"sarah": {"token": TOKEN}}, "encryption_key_file": str(key_file)}
    with http_server(data, config, env={"TMPDIR": str(tmp)}) as (base, _log):
        async with mcp_session(base + "/mcp", TOKEN) as session:
            found = await call(
                session, "recall_memory", query="where does Sarah moor her boat", min_relevance=0
            )
            assert any("Falmouth" in m["text"] for m in found["memories"])
            await call(session, "write_memory", text=f"{SECRET_WORD} needs new sails")
            assert readable(data, tmp) == []  # the WAL too, while the server runs
    assert readable(data, tmp) == []


async def test_a_large_owners_saved_postings_are_sealed(tmp_path: Path) -> None:
    """An owner large enough to have postings saved beside the store: a real server builds and
    saves them sealed (the words are in them, under the key), the next start reads them back
    rather than rebuilding, and no file holds a word in the clear."""
    data, tmp = tmp_path / "data", tmp_path / "tmp"
    seed_large(data / "atlas.db", SAVED_MIN_ROWS + 200, key=StoreKey(RAW_KEY))
    async with _session("stdio", data, tmp, RAW_KEY) as client:
        await call(client, "recall_memory", query=f"{SECRET_WORD} harbour 5 sails 3", min_relevance=0)
        (saved,) = (data / "atlas.db-postings").glob("*.npz")
        assert readable(data, tmp) == []
    opened = FileSealer(StoreKey(RAW_KEY), data / "atlas.db").open(saved.read_bytes())
    assert opened is not None and holds_word(opened)  # sealed, not empty: the words are inside
    made = saved.stat().st_mtime_ns
    async with _session("stdio", data, tmp, RAW_KEY) as client:
        await call(client, "recall_memory", query=f"{SECRET_WORD} crew 4", min_relevance=0)
    assert saved.stat().st_mtime_ns == made  # read back under the key, not rebuilt
    assert readable(data, tmp) == []


def test_saved_postings_are_sealed(tmp_path: Path) -> None:
    """The postings file: sealed under the store's key, unreadable (so rebuilt) under another
    key or none, never holding the words in the clear."""
    database = tmp_path / "atlas.db"
    database.write_bytes(b"\x01" * 64)  # stands for an encrypted file's salt
    arrays = {"words": np.array([SECRET_WORD, "falmouth"]), "rowids": np.arange(2)}
    sealed = SavedPostings(tmp_path / "postings", FileSealer(StoreKey("ab" * 32), database))
    sealed.write("sarah", arrays)
    (saved,) = (tmp_path / "postings").glob("*.npz")
    assert not holds_word(saved.read_bytes()) and not holds_word(saved.read_bytes(), "falmouth")
    assert sorted(sealed.read("sarah")["words"]) == sorted(arrays["words"])
    other_key = SavedPostings(tmp_path / "postings", FileSealer(StoreKey("cd" * 32), database))
    assert other_key.read("sarah") is None
    assert SavedPostings(tmp_path / "postings").read("sarah") is None
    SavedPostings(tmp_path / "postings").write("sarah", arrays)  # a plain file, as before encryption
    assert holds_word(saved.read_bytes())  # the scan sees a plain file's words
    assert sealed.read("sarah") is None  # is foreign to the sealed store: rebuilt, then sealed
