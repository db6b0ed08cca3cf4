"""First run over HTTP: no token that anybody could guess is served, and making a good one is one command."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

from atlas_mcp.config import load_settings
from atlas_mcp.errors import ConfigurationError

REPO = Path(__file__).resolve().parents[2]


def _http(tmp_path: Path, users: str, **flags):
    config = tmp_path / "atlas.toml"
    config.write_text(users)
    return load_settings(config, transport="http", **flags)


@pytest.mark.parametrize(
    "users, why",
    [
        ('[users.sarah]\ntoken = "change-me-sarah"\n', "shorter than 16"),
        ('[users.sarah]\ntoken = "tiny"\n', "shorter than 16"),
        (
            f'[users.james]\ntoken_sha256 = "{hashlib.sha256(b"password").hexdigest()}"\n',
            "well-known example",
        ),
        (
            f'[users.james]\ntoken_sha256 = "{hashlib.sha256(b"pick-another").hexdigest().upper()}"\n',
            "example",
        ),
    ],
)
def test_serve_refuses_short_and_example_tokens(tmp_path: Path, users: str, why: str):
    with pytest.raises(ConfigurationError, match=why) as refused:
        _http(tmp_path, users).check_serving()
    assert "atlas-mcp users token" in str(refused.value)


def test_the_example_config_ships_no_token_that_works():
    settings = load_settings(REPO / "config" / "atlas.example.toml", transport="http")
    with pytest.raises(ConfigurationError, match="atlas-mcp users token"):
        settings.check_serving()


def test_binding_beyond_loopback_says_tls_belongs_in_front(tmp_path: Path):
    token = '[users.sarah]\ntoken = "a-long-enough-random-token"\n'
    assert _http(tmp_path, token).check_serving() == []
    (warning,) = _http(tmp_path, token, host="0.0.0.0").check_serving()
    assert "0.0.0.0" in warning and "TLS" in warning


def _users_token(*args: str) -> tuple[str, str]:
    """(token, config lines) as `atlas-mcp users token ...` prints them."""
    printed = subprocess.run(
        [sys.executable, "-m", "atlas_mcp", "users", "token", *args],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    token = re.search(r"^  (\S+)$", printed, re.MULTILINE).group(1)
    return token, printed[printed.index("[users.") :]


def test_users_token_prints_a_token_serve_accepts(tmp_path: Path):
    token, lines = _users_token("sarah")
    assert len(token) >= 32 and hashlib.sha256(token.encode()).hexdigest() in lines
    settings = _http(tmp_path, lines)
    assert settings.check_serving() == [] and settings.token_digests() == {
        hashlib.sha256(token.encode()).hexdigest(): "sarah"
    }
    (grant,) = settings.token_grants().values()
    assert grant.scopes == {"recall", "write", "forget"} and token not in grant.credential


def test_several_scoped_tokens_append_to_one_config(tmp_path: Path):
    """Each printed block is its own table, so they append after an existing [users.sarah]."""
    full = f'[users.sarah]\ntoken_sha256 = "{hashlib.sha256(b"an-old-config-token-1").hexdigest()}"\n'
    reader, reader_lines = _users_token("sarah", "--scopes", "recall", "--name", "reporting")
    writer, writer_lines = _users_token("sarah", "--scopes", "write, recall")
    assert "[users.sarah.tokens.reporting]" in reader_lines
    settings = _http(tmp_path, f"{full}\n{reader_lines}\n{writer_lines}")
    assert settings.check_serving() == []
    grants = settings.token_grants()
    assert grants[hashlib.sha256(b"an-old-config-token-1").hexdigest()].scopes == {
        "recall",
        "write",
        "forget",
    }
    assert grants[hashlib.sha256(reader.encode()).hexdigest()].scopes == {"recall"}
    assert grants[hashlib.sha256(reader.encode()).hexdigest()].credential.startswith("reporting (")
    assert grants[hashlib.sha256(writer.encode()).hexdigest()].scopes == {"recall", "write"}


def test_users_token_refuses_an_unknown_scope_in_one_line():
    done = subprocess.run(
        [sys.executable, "-m", "atlas_mcp", "users", "token", "sarah", "--scopes", "recall,delete"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "unknown scope 'delete'" in done.stderr and "recall, write, forget" in done.stderr


def test_one_token_configured_twice_or_a_weak_named_token_is_refused(tmp_path: Path):
    digest = hashlib.sha256(b"a-token-for-two-people").hexdigest()
    twice = f'[users.sarah.tokens.a]\nsha256 = "{digest}"\n[users.james.tokens.b]\nsha256 = "{digest}"\n'
    with pytest.raises(ConfigurationError, match="same token"):
        _http(tmp_path, twice).check_serving()
    weak = f'[users.sarah.tokens.a]\nsha256 = "{hashlib.sha256(b"changeme").hexdigest()}"\n'
    with pytest.raises(ConfigurationError, match="users.sarah.tokens.a: its token is a well-known"):
        _http(tmp_path, weak).check_serving()
    unknown = f'[users.sarah.tokens.a]\nsha256 = "{digest}"\nscopes = ["read"]\n'
    with pytest.raises(ConfigurationError, match="must be 'recall', 'write' or 'forget'"):
        _http(tmp_path, unknown)
