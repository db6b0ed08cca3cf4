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
    assert (
        settings.scoring.retrieval.rrf_rank_constant == 30
        and settings.scoring.multipliers.catalog_prior == 0.85
    )


def test_precedence_flag_over_env_over_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    config = tmp_path / "atlas.toml"
    config.write_text('user = "from-file"\nport = 9000\n[scoring]\ncatalog_prior = 0.7\n')
    assert load_settings(config).user == "from-file"
    monkeypatch.setenv("ATLAS_USER", "from-env")
    monkeypatch.setenv("ATLAS_SCORING__CATALOG_PRIOR", "0.9")
    settings = load_settings(config)
    assert (settings.user, settings.port, settings.scoring.multipliers.catalog_prior) == (
        "from-env",
        9000,
        0.9,
    )
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


def test_scoring_knobs_keep_their_flat_names_in_the_file_and_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """``[scoring]`` is split into sections; every knob still works under its old flat name,
    ``[scoring.relevance]`` still names the calibration table, and a section's own table wins."""
    config = tmp_path / "atlas.toml"
    config.write_text(
        "[scoring]\nrrf_window = 200\nbm25_weight = 0.5\nharsh_confidence_penalty = 0.2\n"
        "relevance_floor = 0.1\ntime_window_floor = 0.2\n"
        "[scoring.relevance]\nbias = -6.0\n"
        "[scoring.multipliers]\ndecay_value = 0.4\n"
    )
    monkeypatch.setenv("ATLAS_SCORING__CATALOG_PRIOR", "0.9")
    monkeypatch.setenv("ATLAS_SCORING__CONTEXT_RERANK__SPEAKER_WEIGHT", "0.5")
    monkeypatch.setenv("ATLAS_SCORING__RELEVANCE__COVERAGE", "3.0")
    scoring = load_settings(config).scoring
    assert (scoring.retrieval.rrf_window, scoring.context_rerank.bm25_weight) == (200, 0.5)
    assert scoring.supersession.harsh_confidence_penalty == 0.2
    assert (scoring.calibration.relevance_floor, scoring.calibration.bias) == (0.1, -6.0)
    assert scoring.calibration.coverage == 3.0
    assert (scoring.multipliers.time_window_floor, scoring.multipliers.decay_value) == (0.2, 0.4)
    assert (scoring.multipliers.catalog_prior, scoring.context_rerank.speaker_weight) == (0.9, 0.5)
    assert scoring.replaced(catalog_prior=0.5).multipliers == scoring.multipliers.model_copy(
        update={"catalog_prior": 0.5}
    )


def test_every_scoring_knob_is_accepted_by_its_flat_name():
    from atlas_mcp.config import ignored_environment
    from atlas_mcp.domain.scoring import SECTIONS, ScoringPolicy

    for section, model in SECTIONS.items():
        for name, field in model.model_fields.items():
            value = _another_value(field.default)
            flat, nested = ScoringPolicy(**{name: value}), ScoringPolicy(**{section: {name: value}})
            assert flat == nested != ScoringPolicy(), name
            for env in (
                f"ATLAS_SCORING__{name.upper()}",
                f"ATLAS_SCORING__{section.upper()}__{name.upper()}",
            ):
                assert ignored_environment({env: str(value)}) == [], env
    assert ignored_environment({"ATLAS_SCORING__RRF_WINDO": "1"}) == [
        "ATLAS_SCORING__RRF_WINDO is not an atlas-mcp setting and is ignored (did you mean 'ATLAS_SCORING__RRF_WINDOW'?)"
    ]
    with pytest.raises(ValueError, match="rrf_windo"):
        ScoringPolicy(rrf_windo=1)


def _another_value(default):
    """A valid value other than ``default``."""
    if default is None:  # an unset bound (min_relevance)
        return 0.5
    if isinstance(default, bool):
        return not default
    if isinstance(default, int):
        return default + 1
    if isinstance(default, float):
        return default / 2 if default else 0.5
    return "Europe/Paris"  # the one text knob: a time zone
