"""Ordinary mistakes at the command line: one line that says what is wrong, a non-zero exit, no traceback.

Each case runs the real entry point (`python -m atlas_mcp`, what the `atlas-mcp` script calls).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from atlas_mcp.service import MemoryService


def atlas(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "atlas_mcp", *args], env=os.environ | env,
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def one_line_error(result: subprocess.CompletedProcess[str], code: int = 1) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == code, result.stderr
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    return lines[0]


@pytest.fixture
def sarah(service: MemoryService) -> MemoryService:
    """A store (the tests' ATLAS_DATA_DIR) where only Sarah has memories."""
    service.write("sarah", "Sarah's smart hub runs firmware 3.0")
    return service


@pytest.mark.parametrize(
    "args, named",
    [
        (["export", "{missing}/backup.jsonl"], "folder"),
        (["bench", "--work-dir", "{missing}"], "'--work-dir'"),
        (["bench", "--json", "{missing}/report.json"], "'--json'"),  # refused before an hour of work
        (["eval", "scenarios", "--json", "{missing}/scenarios.json"], "'--json'"),
        (["recall"], "Missing argument 'QUERY'"),
        (["expor", "backup.jsonl"], "did you mean 'export'?"),
    ],
)
def test_usage_mistakes_are_one_line(tmp_path: Path, args: list[str], named: str):
    missing = tmp_path / "no-such-folder"
    line = one_line_error(atlas(*(a.format(missing=missing) for a in args)), code=2)
    assert named in line and "--help" in line
    assert not missing.exists()


@pytest.mark.parametrize(
    "args",
    [
        ["recall", "--user", "sarha", "hub firmware"],
        ["memories", "list", "--user", "sarha"],
        ["memories", "show", "0123456789abcdef0123456789abcdef", "--user", "sarha"],
        ["export", "{tmp}/sarha.jsonl", "--user", "sarha"],
    ],
)
def test_an_unknown_user_is_named_as_such(sarah, tmp_path: Path, args: list[str]):
    line = one_line_error(atlas(*(a.format(tmp=tmp_path) for a in args)))
    assert "unknown user 'sarha'" in line and "did you mean 'sarah'?" in line
    assert not (tmp_path / "sarha.jsonl").exists()


def test_a_known_user_with_nothing_matching_is_not_an_error(sarah):
    listed = atlas("memories", "list", "--user", "sarah", "--type", "procedural")
    assert listed.returncode == 0 and "no memories" in listed.stdout


def test_a_taken_http_port_is_one_line():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        line = one_line_error(atlas("serve", "--transport", "http", "--port", port, "--insecure-no-auth"))
    assert f"127.0.0.1:{port}" in line and "Address already in use" in line and "--port" in line


def test_admin_commands_need_no_token_when_the_transport_is_http(sarah):
    """The container sets ATLAS_TRANSPORT=http for every command; only `serve` checks tokens."""
    stats = atlas("stats", ATLAS_TRANSPORT="http", ATLAS_HOST="0.0.0.0")
    assert stats.returncode == 0 and "sarah" in stats.stdout, stats.stderr
    refused = atlas("serve", ATLAS_TRANSPORT="http", ATLAS_PORT="0")
    assert "atlas-mcp users token" in one_line_error(refused)


def test_a_misspelt_setting_is_named_with_the_one_meant(tmp_path: Path):
    config = tmp_path / "atlas.toml"
    config.write_text('[scoring]\nrrf_windo = 80\ncatalog_prior = "high"\n')
    line = one_line_error(atlas("stats", "--config", str(config), ATLAS_PORT="eighty"))
    assert "unknown setting 'scoring.rrf_windo' (did you mean 'rrf_window'?)" in line
    assert (
        "scoring.multipliers.catalog_prior must be a valid number" in line
        and "port must be a valid integer" in line
    )
    assert not [noise for noise in ("validation error", "type=", "pydantic.dev") if noise in line]


def test_an_input_file_that_is_not_json_is_one_line(tmp_path: Path):
    garbage = tmp_path / "locomo.json"
    garbage.write_text("not json")
    assert "not valid JSON" in one_line_error(atlas("eval", "locomo", str(garbage)))


def test_a_misspelt_environment_variable_is_named_with_the_one_meant(sarah):
    """The environment is read leniently (it holds other programs' variables), so an ATLAS_*
    name that sets nothing is a warning on stderr, and the command still runs."""
    result = atlas("stats", ATLAS_DATADIR="/elsewhere", ATLAS_EMBEDING__MODEL="x")
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if line.startswith("Warning: ")]
    assert warnings == [
        "Warning: ATLAS_DATADIR is not an atlas-mcp setting and is ignored (did you mean 'ATLAS_DATA_DIR'?)",
        (
            "Warning: ATLAS_EMBEDING__MODEL is not an atlas-mcp setting and is ignored "
            "(did you mean 'ATLAS_EMBEDDING__MODEL'?)"
        ),
    ]
    assert "sarah" in result.stdout  # the store the real ATLAS_DATA_DIR names


def test_environment_variables_that_set_something_pass_silently():
    from atlas_mcp.config import NOT_SETTINGS_ENV, ignored_environment

    meaningful = {
        "ATLAS_DATA_DIR": "/d",
        "atlas_user": "lower case sets it too",
        "ATLAS_SCORING__RRF_WINDOW": "80",
        "ATLAS_USERS__SARAH__TOKEN_SHA256": "ab",
        "ATLAS_ELASTICSEARCH__URL": "http://es:9200",
        "HOME": "/root",
    } | dict.fromkeys(NOT_SETTINGS_ENV, "used elsewhere")
    assert ignored_environment(meaningful) == []
    assert ignored_environment({"ATLAS_PORT__X": "1", "ATLAS_USERS__SARAH__TOKN": "ab"}) == [
        "ATLAS_PORT__X is not an atlas-mcp setting and is ignored (did you mean 'ATLAS_PORT'?)",
        "ATLAS_USERS__SARAH__TOKN is not an atlas-mcp setting and is ignored",
    ]


def test_a_data_folder_that_is_a_file_is_one_line(tmp_path: Path):
    taken = tmp_path / "atlas-data"
    taken.write_text("not a folder")
    line = one_line_error(atlas("stats", ATLAS_DATA_DIR=str(taken)))
    assert line == f"Error: the data folder {taken} is a file, not a folder"
    assert taken.read_text() == "not a folder"


def test_a_store_whose_caches_fail_to_load_at_start_still_serves(monkeypatch):
    """Loading a small store's caches before the MCP imports only makes the first recall
    faster: if it fails, `serve` warns and carries on (the first recall reports the problem)."""
    from atlas_mcp.cli import serve

    class Unreadable:
        def warm_rows(self, user: str) -> None:
            raise OSError("disk I/O error")

    warned = []
    monkeypatch.setattr(serve.log, "warning", lambda event, **fields: warned.append((event, fields)))
    serve._load_small_store(Unreadable(), "sarah")
    assert warned == [("could not load the store's caches at start", {"error": "disk I/O error"})]
