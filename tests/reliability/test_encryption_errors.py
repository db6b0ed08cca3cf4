"""What a person sees when the key is missing, wrong, malformed, or the driver is absent: one
line on stderr and a non-zero exit from every command that opens the store, never a traceback,
and never the key itself, not even in a server's debug log."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from foundation.mcp_helpers import call, free_port

from atlas_mcp.engines.embedded.cipher import is_encrypted

from .at_rest import OTHER_RAW_KEY, PASSPHRASE, RAW_KEY, SECRET_WORD, cli, one_line_error
from .http_server import http_server, mcp_session, toml
from .wire import server_env

pytestmark = pytest.mark.slow

TOKEN = "enc-errors-token-81f0c2d4"


def _commands(data: Path) -> dict[str, list[str]]:
    """Every command that opens the store, as a person would run it."""
    config = data.parent / "http.toml"
    config.write_text(toml({"users": {"sarah": {"token": TOKEN}}}))
    return {
        "serve": ["serve", "--user", "sarah"],
        "serve http": ["serve", "--transport", "http", "--port", str(free_port()), "--config", str(config)],
        "recall": ["recall", "--user", "sarah", "boat"],
        "stats": ["stats"],
        "export": ["export", str(data.parent / "out.jsonl")],
        "rekey": ["rekey", "--new-key-file", str(data.parent / "next.key")],
    }


def _no_key_shown(done: subprocess.CompletedProcess, *keys: str) -> None:
    for key in keys:
        assert key not in done.stderr and key not in done.stdout


def test_a_missing_or_wrong_key_is_one_line_from_every_command(tmp_path: Path) -> None:
    data = tmp_path / "data"
    made = cli(data, "stats", ATLAS_ENCRYPTION_KEY=PASSPHRASE)  # a new store, encrypted from the start
    assert made.returncode == 0, made.stderr
    assert is_encrypted(data / "atlas.db")
    cases = (
        ({}, "is encrypted: set ATLAS_ENCRYPTION_KEY or encryption_key_file"),
        ({"ATLAS_ENCRYPTION_KEY": "not the passphrase"}, "the encryption key does not open the memory store"),
        ({"ATLAS_ENCRYPTION_KEY": OTHER_RAW_KEY}, "the encryption key does not open the memory store"),
    )
    for env, says in cases:
        for name, command in _commands(data).items():
            done = cli(data, *command, timeout=120, **env)
            one_line_error(done, says)
            _no_key_shown(done, PASSPHRASE, OTHER_RAW_KEY, "not the passphrase")
            assert not (data.parent / "next.key").exists(), name  # rekey wrote no key for nothing
    assert cli(data, "stats", ATLAS_ENCRYPTION_KEY=PASSPHRASE).returncode == 0  # nothing was changed


def test_a_key_on_a_plain_store_is_one_line(tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert cli(data, "stats").returncode == 0  # a plain store
    for command in (["stats"], ["serve", "--user", "sarah"], ["export", str(tmp_path / "out.jsonl")]):
        done = cli(data, *command, ATLAS_ENCRYPTION_KEY=RAW_KEY)
        one_line_error(
            done, "is not encrypted, but an encryption key is set: encrypt it with `atlas-mcp rekey"
        )
        _no_key_shown(done, RAW_KEY)
    assert not is_encrypted(data / "atlas.db")
    assert cli(data, "stats").returncode == 0  # and it keeps working without the key


@pytest.mark.parametrize(
    ("key", "says"),
    [
        (f"x'{RAW_KEY}'", "is written as x'…' or 0x…: give a raw key as its 64 hex digits alone"),
        (f"0x{RAW_KEY}", "is written as x'…' or 0x…"),
        (RAW_KEY[:63], "looks like a raw key in hex but has 63 digits: a raw key is exactly 64"),
        (RAW_KEY[:32], "looks like a raw key in hex but has 32 digits"),
        (RAW_KEY + "0", "looks like a raw key in hex but has 65 digits"),
        ("hunter2", "is 7 characters long: a passphrase needs 8 or more"),
        (f"{PASSPHRASE} ", "starts or ends with a space or line break"),
        ("pass\tphrase words", "holds a control character"),
    ],
    ids=["x-quoted", "0x", "63-hex", "32-hex", "65-hex", "short", "trailing-space", "tab"],
)
def test_a_malformed_key_is_explained(tmp_path: Path, key: str, says: str) -> None:
    done = cli(tmp_path / "data", "stats", ATLAS_ENCRYPTION_KEY=key)
    one_line_error(done, f"the encryption key in ATLAS_ENCRYPTION_KEY (encryption_key) {says}")
    assert "openssl rand -hex 32" in done.stderr
    _no_key_shown(done, key.strip())
    assert not (tmp_path / "data" / "atlas.db").exists()  # refused before anything was made


def test_key_file_problems_are_explained(tmp_path: Path) -> None:
    data, key_file = tmp_path / "data", tmp_path / "store.key"
    key_file.write_text(RAW_KEY[:40] + "\n")
    done = cli(data, "stats", ATLAS_ENCRYPTION_KEY_FILE=str(key_file))
    one_line_error(done, f"the encryption key in encryption_key_file {key_file} looks like a raw key")
    _no_key_shown(done, RAW_KEY[:40])
    key_file.write_text("\n\n")
    one_line_error(cli(data, "stats", ATLAS_ENCRYPTION_KEY_FILE=str(key_file)), "is empty")
    missing = tmp_path / "nowhere.key"
    one_line_error(
        cli(data, "stats", ATLAS_ENCRYPTION_KEY_FILE=str(missing)),
        f"cannot read encryption_key_file {missing}",
    )
    key_file.write_text(RAW_KEY + "\n")
    both = cli(data, "stats", ATLAS_ENCRYPTION_KEY_FILE=str(key_file), ATLAS_ENCRYPTION_KEY=PASSPHRASE)
    one_line_error(both, "set encryption_key or encryption_key_file, not both")
    new_key = tmp_path / "new.key"
    new_key.write_text("0x" + RAW_KEY)
    assert cli(data, "stats").returncode == 0
    refused = cli(data, "rekey", "--new-key-file", str(new_key))
    one_line_error(refused, f"the encryption key in --new-key-file {new_key} is written as x'…' or 0x…")
    assert not is_encrypted(data / "atlas.db")


def test_without_the_driver_a_key_is_one_line(tmp_path: Path) -> None:
    """An install without the [encryption] extra: the command says what to install."""
    data = tmp_path / "data"
    blocked = (
        "import sys; sys.modules['sqlcipher3'] = None; sys.argv = ['atlas-mcp', 'stats'];"
        "from atlas_mcp.cli import main; main()"
    )
    done = subprocess.run(
        [sys.executable, "-c", blocked], env=server_env(data, "sarah", ATLAS_ENCRYPTION_KEY=RAW_KEY),
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    one_line_error(done, "sqlcipher3 is not installed: pip install 'atlas-memory-mcp[encryption]'")
    assert not (data / "atlas.db").exists()


async def test_the_key_never_reaches_a_log(tmp_path: Path) -> None:
    """A passphrase-encrypted store served over HTTP with debug logging, written and recalled,
    then the CLI at debug level: the key is in no log line, and neither is the raw key."""
    data = tmp_path / "data"
    config = {"users": {"sarah": {"token": TOKEN}}, "encryption_key": PASSPHRASE}
    with http_server(data, config, log_level="DEBUG") as (base, log):
        async with mcp_session(base + "/mcp", TOKEN) as session:
            await call(session, "write_memory", text=f"{SECRET_WORD} is berthed at pier 4")
            await call(session, "recall_memory", query="where is it berthed", min_relevance=0)
    logged = log.read_text()
    assert "Using selector" in logged  # asyncio's debug line: the log did run at debug level
    assert PASSPHRASE not in logged
    for command in (["recall", "--user", "sarah", "pier"], ["stats"], ["export", str(tmp_path / "o.jsonl")]):
        done = cli(data, *command, ATLAS_LOG_LEVEL="DEBUG", ATLAS_ENCRYPTION_KEY=PASSPHRASE)
        assert done.returncode == 0, done.stderr
        assert PASSPHRASE not in done.stderr
