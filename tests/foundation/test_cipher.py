"""The key's format rules, that a key is never shown, and the store holds ``rekey`` relies on."""

from __future__ import annotations

from pathlib import Path

import pytest

from atlas_mcp.engines.embedded import holders
from atlas_mcp.engines.embedded.cipher import StoreKey, format_problem, store_key
from atlas_mcp.errors import BackendUnavailable, ConfigurationError

RAW = "0123456789abcdef" * 4


@pytest.mark.parametrize(
    "secret",
    [RAW, RAW.upper(), "correct horse battery staple", "pässwörter-über-alles", "12345678", "deadbeef" * 3],
)
def test_keys_that_are_keys(secret: str) -> None:
    assert format_problem(secret) is None
    assert store_key(secret, "test") == StoreKey(secret)


def test_a_raw_key_is_64_hex_digits_given_as_a_blob_literal() -> None:
    assert StoreKey(RAW).is_raw and StoreKey(RAW.upper()).is_raw
    assert StoreKey(RAW).pragma() == "PRAGMA key = 'x''" + RAW + "'''"  # the blob-literal form
    assert "x'" in StoreKey(RAW).sqlcipher_key() and not StoreKey("a passphrase").is_raw
    assert StoreKey("it's mine").pragma() == "PRAGMA key = 'it''s mine'"  # quoted, not injected


@pytest.mark.parametrize(
    ("secret", "says"),
    [
        (f"x'{RAW}'", "x'…' or 0x…"),
        (f"\"x'{RAW}'\"", "x'…' or 0x…"),
        (f"0x{RAW}", "x'…' or 0x…"),
        (RAW[:63], "has 63 digits"),
        (RAW + "ab", "has 66 digits"),
        (RAW[:32], "has 32 digits"),
        ("short", "is 5 characters long"),
        ("", "is 0 characters long"),
        (f" {RAW}", "starts or ends with a space"),
        (f"{RAW}\n", "starts or ends with a space or line break"),
        ("two\nlines here", "control character"),
    ],
)
def test_malformed_keys_are_explained_without_being_repeated(secret: str, says: str) -> None:
    with pytest.raises(ConfigurationError) as refused:
        store_key(secret, "ATLAS_ENCRYPTION_KEY")
    message = str(refused.value)
    assert says in message and "openssl rand -hex 32" in message
    assert secret.strip() == "" or secret.strip() not in message


def test_a_key_is_never_shown() -> None:
    key = StoreKey("correct horse battery staple")
    assert "horse" not in repr(key) and "horse" not in str(key) and "horse" not in f"{key}"


def test_rekey_waits_for_no_holder_and_holders_wait_for_rekey(tmp_path: Path) -> None:
    database = tmp_path / "atlas.db"
    server, command = holders.shared(database, 1.0), holders.shared(database, 1.0)
    assert server.held and command.held  # processes share the store
    assert holders.exclusive(database) is None
    server.release()
    assert holders.exclusive(database) is None  # the command still has it
    command.release()
    rekey = holders.exclusive(database)
    assert rekey is not None and rekey.held
    with pytest.raises(BackendUnavailable, match="is being re-encrypted"):
        holders.shared(database, 0.2)
    rekey.release()
    holders.shared(database, 0.2).release()
