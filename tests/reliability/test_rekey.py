"""``atlas-mcp rekey`` as a person runs it: encrypt, change the key, decrypt; refused while a
server (stdio or HTTP), a command or another program has the store open; a server started
during a rekey waits and opens the new store; and killed at any point of its pass it leaves
the old store or the new one, whole, never neither."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from foundation.mcp_helpers import call, stdio_client

from atlas_mcp.engines.embedded.cipher import is_encrypted
from atlas_mcp.engines.embedded.maintenance import StoreKey, connect_file

from .at_rest import OTHER_RAW_KEY, RAW_KEY, SECRET_WORD, cli, one_line_error, readable, seed_large
from .http_server import http_server, mcp_session
from .wire import server_env

pytestmark = pytest.mark.slow

LARGE = 12_000  # a pass of a few seconds: long enough to kill it anywhere
TOKEN = "rekey-test-token-3c9e51aa"
BUSY = "another process has the memory store"


def _key_env(key_file: Path | None) -> dict[str, str]:
    return {"ATLAS_ENCRYPTION_KEY_FILE": str(key_file)} if key_file else {}


async def test_rekey_changes_and_removes_the_key_and_waits_for_every_holder(tmp_path: Path) -> None:
    data, first_key, second_key = tmp_path / "data", tmp_path / "one.key", tmp_path / "two.key"
    async with stdio_client(data, "sarah") as client:
        await call(client, "write_memory", text=f"Sarah's cat is {SECRET_WORD}")
    assert cli(data, "rekey", "--new-key-file", str(first_key)).returncode == 0
    rekey_again = ["rekey", "--new-key-file", str(second_key)]
    async with stdio_client(data, "sarah", **_key_env(first_key)):
        one_line_error(cli(data, *rekey_again, **_key_env(first_key)), BUSY)
    config = {"users": {"sarah": {"token": TOKEN}}, "encryption_key_file": str(first_key)}
    with http_server(data, config) as (base, _log):
        async with mcp_session(base + "/mcp", TOKEN) as session:
            await call(session, "write_memory", text=f"{SECRET_WORD} sleeps on the boat")
            one_line_error(cli(data, *rekey_again, **_key_env(first_key)), BUSY)
    _refused_while_another_program_has_it(data, rekey_again, first_key)
    assert not second_key.exists()  # no key was written for a rekey that did not happen

    moved = cli(data, *rekey_again, **_key_env(first_key))
    assert moved.returncode == 0, moved.stderr
    assert "2 memories" in moved.stdout and second_key.stat().st_mode & 0o777 == 0o600
    one_line_error(cli(data, "stats", **_key_env(first_key)), "does not open the memory store")
    decrypted = cli(data, "rekey", "--decrypt", **_key_env(second_key))
    assert decrypted.returncode == 0, decrypted.stderr
    assert not is_encrypted(data / "atlas.db") and readable(data)
    listed = cli(data, "memories", "list", "--user", "sarah")
    assert listed.returncode == 0 and listed.stdout.count(SECRET_WORD) == 2
    one_line_error(cli(data, "rekey", "--decrypt"), "is not encrypted: there is nothing to decrypt")


@pytest.fixture(scope="module")
def large_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A plain store of ``LARGE`` memories, each holding the secret word; copied per test."""
    folder = tmp_path_factory.mktemp("large") / "data"
    seed_large(folder / "atlas.db", LARGE)
    return folder


def _copy_store(source: Path, to: Path) -> Path:
    shutil.copytree(source, to)
    return to


OTHER_PROGRAM = r"""
import sys
from sqlcipher3 import dbapi2  # the sqlcipher shell, say: a connection with the key, idle
conn = dbapi2.connect(sys.argv[1])
if len(sys.argv) > 2:
    raw = open(sys.argv[2]).read().strip()
    conn.execute("PRAGMA key = \"x'" + raw + "'\"")
conn.execute("PRAGMA user_version").fetchone()
print("open", flush=True)
sys.stdin.readline()
"""


def _refused_while_another_program_has_it(data: Path, args: list[str], key_file: Path) -> None:
    other = subprocess.Popen(
        [sys.executable, "-c", OTHER_PROGRAM, str(data / "atlas.db"), str(key_file)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert other.stdout.readline().strip() == "open"
        one_line_error(cli(data, *args, **_key_env(key_file)), BUSY)
    finally:
        other.communicate("\n", timeout=30)


def test_a_command_started_during_a_rekey_opens_the_new_store(tmp_path: Path, large_store: Path) -> None:
    """Started once the copy is being made, a command finds the store held by rekey, waits, and
    opens the new file with the new key (had it opened the old one, the key would not fit)."""
    data, key_file = _copy_store(large_store, tmp_path / "data"), tmp_path / "store.key"
    key_file.write_text(RAW_KEY + "\n")
    key_file.chmod(0o600)
    rekey = subprocess.Popen(
        [sys.executable, "-m", "atlas_mcp", "rekey", "--new-key-file", str(key_file)],
        env=server_env(data, "sarah"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert _wait_for((data / "atlas.db.rekey").exists, rekey)
    started = cli(data, "stats", **_key_env(key_file))
    assert rekey.wait(timeout=300) == 0, rekey.stderr.read()
    assert started.returncode == 0, started.stderr
    assert str(LARGE) in started.stdout


def _wait_for(condition: Callable[[], bool], process: subprocess.Popen, timeout: float = 300) -> bool:
    """Poll ``condition`` every millisecond or so while ``process`` runs; did it hold?"""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        if process.poll() is not None:
            return False
        time.sleep(0.001)
    raise TimeoutError("rekey did not get there")


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _kill_points(data: Path) -> dict[str, Callable[[], bool]]:
    database, copy = data / "atlas.db", data / "atlas.db.rekey"
    size, inode = database.stat().st_size, database.stat().st_ino
    return {
        "copy-begun": copy.exists,
        "copy-half-written": lambda: _size(copy) >= size // 2,
        "copy-written": lambda: _size(copy) >= size * 9 // 10,
        "renamed": lambda: database.stat().st_ino != inode,
    }


def _opens(database: Path, key: str | None) -> int | None:
    """The memories the store holds, read under ``key`` (None: plain), or None if it does not open."""
    try:
        conn = connect_file(database, StoreKey(key) if key else None)
    except Exception:  # noqa: BLE001 - a key that does not open it: one line, checked elsewhere
        return None
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        return conn.execute("SELECT count(*) FROM memories").fetchone()[0]
    finally:
        conn.close()


DIRECTIONS = {  # (key before, key after, the rekey arguments)
    "encrypt": (None, RAW_KEY, "new"),
    "change": (RAW_KEY, OTHER_RAW_KEY, "new"),
    "decrypt": (RAW_KEY, None, "decrypt"),
}


@pytest.mark.parametrize(
    ("direction", "point"),
    [
        ("encrypt", "copy-begun"),
        ("encrypt", "copy-half-written"),
        ("encrypt", "copy-written"),
        ("encrypt", "renamed"),
        ("change", "copy-half-written"),
        ("change", "renamed"),
        ("decrypt", "copy-half-written"),
        ("decrypt", "renamed"),
        ("encrypt", "random"),
        ("change", "random"),
    ],
)
def test_a_killed_rekey_leaves_the_old_store_or_the_new(
    tmp_path: Path, large_store: Path, direction: str, point: str
) -> None:
    data = _copy_store(large_store, tmp_path / "data")
    before, after, how = DIRECTIONS[direction]
    old_file, new_file = tmp_path / "old.key", tmp_path / "new.key"
    for path, key in ((old_file, before), (new_file, after)):
        if key:
            path.write_text(key + "\n")
            path.chmod(0o600)
    if before:
        assert cli(data, "rekey", "--new-key-file", str(old_file)).returncode == 0
    args = ["--new-key-file", str(new_file)] if how == "new" else ["--decrypt"]
    points = _kill_points(data)
    rekey = subprocess.Popen(
        [sys.executable, "-m", "atlas_mcp", "rekey", *args],
        env=server_env(data, "sarah", **_key_env(old_file if before else None)),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    if point == "random":
        time.sleep(random.Random(f"{direction}{point}").uniform(1.0, 6.0))
        reached = rekey.poll() is None
    else:
        reached = _wait_for(points[point], rekey)
    if rekey.poll() is None:
        os.kill(rekey.pid, signal.SIGKILL)
    rekey.wait(timeout=60)
    assert reached or point == "random", f"rekey ended before {point}: {rekey.stderr.read()}"

    database = data / "atlas.db"
    as_old, as_new = _opens(database, before), _opens(database, after)
    assert (as_old, as_new).count(LARGE) == 1, (as_old, as_new)  # exactly one of them, whole
    if point == "renamed":
        assert as_new == LARGE
    if as_old == LARGE:
        key_now = old_file if before else None
    else:
        key_now = new_file if after else None
    done = cli(data, "stats", **_key_env(key_now))
    assert done.returncode == 0 and str(LARGE) in done.stdout, done.stderr
    assert not list(data.glob("atlas.db.rekey*"))  # the next process to open it cleared the copy
    if as_old == LARGE:  # not done: rekey again, as the person would, and it completes
        again = cli(data, "rekey", *args, **_key_env(old_file if before else None))
        assert again.returncode == 0, again.stderr
        assert _opens(database, after) == LARGE
