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


def test_users_token_prints_a_token_serve_accepts(tmp_path: Path):
    printed = subprocess.run(
        [sys.executable, "-m", "atlas_mcp", "users", "token", "sarah"],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    token = re.search(r"^  (\S+)$", printed, re.MULTILINE).group(1)
    lines = printed[printed.index("[users.sarah]") :]
    assert len(token) >= 32 and hashlib.sha256(token.encode()).hexdigest() in lines
    settings = _http(tmp_path, lines)
    assert settings.check_serving() == [] and settings.token_digests() == {
        hashlib.sha256(token.encode()).hexdigest(): "sarah"
    }
