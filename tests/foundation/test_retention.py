"""Expiry and retention: what leaves the store, when, and what never does (real SQLite file,
the real ``atlas-mcp prune`` and ``stats`` commands)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from click.testing import CliRunner

from atlas_mcp.app import open_service
from atlas_mcp.cli import cli
from atlas_mcp.config import load_settings
from atlas_mcp.eval.harness import ManualClock

WRITTEN = datetime(2025, 1, 10, 9, tzinfo=UTC)  # long before the real clock of the commands


def _history(tmp_path) -> dict[str, str]:
    settings = load_settings(data_dir=tmp_path / "data")
    service = open_service(settings, clock=ManualClock(WRITTEN))
    try:
        ids = {
            "code": service.write("nora", "The gate code is 4471.", expires_at="2025-02-01T00:00:00Z").id,
            "cited": service.write("nora", "Told Atlas I am allergic to penicillin.", "episodic").id,
            "old": service.write("nora", "Watched a film about octopuses.", "episodic").id,
            "fact": service.write("nora", "Nora drives a Kia Niro.").id,
            "sam": service.write(
                "sam", "Sam's parking permit is P-221.", expires_at="2025-06-01T00:00:00Z"
            ).id,
        }
        ids["allergy"] = service.write(
            "nora", "Nora is allergic to penicillin.", source_episodes=[ids["cited"]]
        ).id
    finally:
        service.close()
    return ids


def _run(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def _left(tmp_path) -> set[str]:
    service = open_service(load_settings(data_dir=tmp_path / "data"))
    try:
        return {m.id for user in ("nora", "sam") for m in service.list(user)}
    finally:
        service.close()


def test_expired_memories_are_counted_then_removed_by_prune(tmp_path):
    ids = _history(tmp_path)
    stats = json.loads(_run("stats", "--json"))
    assert (stats["expiring"], stats["expired"]) == (2, 2)
    dry = json.loads(_run("prune", "--dry-run", "--json"))
    assert {m["id"] for m in dry["removed"]} == {ids["code"], ids["sam"]}
    assert _left(tmp_path) == set(ids.values())  # a dry run removes nothing
    assert "removed 2 memories" in _run("prune")
    assert _left(tmp_path) == set(ids.values()) - {ids["code"], ids["sam"]}
    assert json.loads(_run("stats", "--json"))["expired"] == 0


def test_retention_removes_old_events_but_never_one_a_fact_cites(tmp_path):
    ids = _history(tmp_path)
    config = tmp_path / "atlas.toml"
    config.write_text(f'data_dir = "{tmp_path / "data"}"\n[retention]\nepisodic_days = 180\n')
    output = _run("prune", "--dry-run", "--config", str(config))
    assert "would remove 3 memories" in output and ids["old"] in output and ids["cited"] not in output
    _run("prune", "--config", str(config))
    assert _left(tmp_path) == {ids["cited"], ids["fact"], ids["allergy"]}
    config.write_text(
        f'data_dir = "{tmp_path / "data"}"\n[retention]\nepisodic_days = 180\nkeep_cited_episodes = false\n'
    )
    _run("prune", "--config", str(config))
    assert _left(tmp_path) == {ids["fact"], ids["allergy"]}
