"""Settings precedence: flags > ATLAS_* env > TOML file > defaults."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from atlas_mcp.config import load_settings
from atlas_mcp.errors import ConfigurationError
from atlas_mcp.inference.names import EMBEDDING_MODELS


def test_defaults(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("ATLAS_DATA_DIR")
    settings = load_settings()
    assert (settings.backend, settings.user, settings.transport) == ("embedded", "default", "stdio")
    assert settings.data_dir.name == "atlas-mcp"
    assert settings.scoring.rrf_rank_constant == 30 and settings.scoring.catalog_prior == 0.85


def test_precedence_flag_over_env_over_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    config = tmp_path / "atlas.toml"
    config.write_text('user = "from-file"\nport = 9000\n[scoring]\ncatalog_prior = 0.7\n')
    assert load_settings(config).user == "from-file"
    monkeypatch.setenv("ATLAS_USER", "from-env")
    monkeypatch.setenv("ATLAS_SCORING__CATALOG_PRIOR", "0.9")
    settings = load_settings(config)
    assert (settings.user, settings.port, settings.scoring.catalog_prior) == ("from-env", 9000, 0.9)
    assert load_settings(config, user="from-flag", port=None).user == "from-flag"


def test_atlas_config_env_names_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    config = tmp_path / "c.toml"
    config.write_text('[users.sarah]\ntoken = "t"\n')
    monkeypatch.setenv("ATLAS_CONFIG", str(config))
    assert load_settings().token_digests() == {
        "e3b98a4da31a127d4bde6e43033f66ba274cab0eb7eb1c70ec41402bf6273dd8": "sarah"
    }


def test_a_config_file_is_read_for_that_load_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The file given to one load neither leaks into the process environment nor into the next
    load, and it wins over the file ATLAS_CONFIG names."""
    named, given = tmp_path / "named.toml", tmp_path / "given.toml"
    named.write_text('user = "named"\n')
    given.write_text('user = "given"\n')
    assert load_settings(given).user == "given"
    assert "ATLAS_CONFIG" not in os.environ and load_settings().user == "default"
    monkeypatch.setenv("ATLAS_CONFIG", str(named))
    assert (load_settings(given).user, load_settings().user) == ("given", "named")


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ("backend = 'mongo'", "backend"),
        ("[scoring]\nrrf_window = 0", "rrf_window"),
        ("nonsense = 1", "nonsense"),
    ],
)
def test_invalid_settings_are_clear_errors(tmp_path: Path, body: str, fragment: str):
    config = tmp_path / "bad.toml"
    config.write_text(body)
    with pytest.raises(ConfigurationError, match=fragment):
        load_settings(config)


def test_missing_and_malformed_files(tmp_path: Path):
    with pytest.raises(ConfigurationError, match="not found"):
        load_settings(tmp_path / "missing.toml")
    broken = tmp_path / "broken.toml"
    broken.write_text("user = ")
    with pytest.raises(ConfigurationError, match="not valid TOML"):
        load_settings(broken)


def test_serving_http_needs_a_token_unless_insecure_on_loopback():
    with pytest.raises(ConfigurationError, match="atlas-mcp users token"):
        load_settings(transport="http").check_serving()
    assert load_settings(transport="http", insecure_no_auth=True).check_serving() == []
    with pytest.raises(ConfigurationError, match="loopback"):
        load_settings(transport="http", insecure_no_auth=True, host="0.0.0.0").check_serving()


def test_the_embedding_models_a_setting_accepts_are_the_ones_the_models_module_names():
    for model in EMBEDDING_MODELS:
        assert load_settings(embedding={"model": model}).embedding.model == model
    with pytest.raises(ConfigurationError) as raised:
        load_settings(embedding={"model": "minilm"})
    listed = ", ".join(repr(m) for m in EMBEDDING_MODELS[:-1]) + f" or {EMBEDDING_MODELS[-1]!r}"
    assert f"embedding.model must be {listed}" in str(raised.value)
