"""``atlas-mcp consolidate`` as a real subprocess: --dry-run, --record, and a deterministic --replay."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from atlas_mcp.engines.embedded.engine import EmbeddedEngine
from atlas_mcp.inference.embedder import default_embedder
from atlas_mcp.service import MemoryService

pytestmark = pytest.mark.slow


def consolidate(config, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATLAS_")}
    return subprocess.run(
        [sys.executable, "-m", "atlas_mcp", "consolidate", "--config", str(config), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )


def facts_of(db, user="sarah") -> list[tuple[str, tuple[str, ...], str | None]]:
    service = MemoryService(EmbeddedEngine(db, default_embedder()))
    try:
        facts = service.list(user, memory_types=["semantic"])
        return sorted((m.text, m.source_episodes, m.superseded_by and "superseded") for m in facts)
    finally:
        service.close()


def test_dry_run_then_record_then_replay_on_a_copy(persona, fake_llm, tmp_path):
    e = persona.episodes
    body = {
        "new_facts": [
            {
                "text": "Sarah lives in Berlin.",
                "fact_type": "identity",
                "confidence": 0.95,
                "supporting_episode_ids": [e[0]],
                "supersedes_id": persona.munich,
                "contradiction": "natural",
            },
            {
                "text": "Sarah takes a pottery class on Thursday evenings.",
                "confidence": 0.9,
                "supporting_episode_ids": [e[4]],
            },
            {"text": "Sarah owns a boat.", "confidence": 0.9, "supporting_episode_ids": []},
        ],
        "procedural_updates": [
            {"id": persona.hue_playbook, "outcome": "success", "supporting_episode_ids": [e[2]]}
        ],
    }
    persona.service.close()
    data = tmp_path / "data"
    config = tmp_path / "atlas.toml"
    config.write_text(
        f'data_dir = "{data}"\n[consolidation]\nprovider = "openai"\nbase_url = "{fake_llm.url}"\nmodel = "m"\n'
    )
    pristine = tmp_path / "pristine"
    shutil.copytree(data, pristine)

    fake_llm.script(body)
    dry = consolidate(config, "--user", "sarah", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert (
        "dry run, nothing written" in dry.stdout and 'would new fact "Sarah lives in Berlin."' in dry.stdout
    )
    assert 'kept out new_facts "Sarah owns a boat."' in dry.stdout
    assert facts_of(data / "atlas.db") == facts_of(pristine / "atlas.db")

    fake_llm.script(body)
    recording = tmp_path / "run.jsonl"
    real = consolidate(config, "--user", "sarah", "--record", str(recording))
    assert real.returncode == 0, real.stderr
    assert "watermark ->" in real.stdout
    written = facts_of(data / "atlas.db")
    assert ("Sarah lives in Munich.", (), "superseded") in written
    assert ("Sarah takes a pottery class on Thursday evenings.", (e[4],), None) in written
    assert [json.loads(line)["user_id"] for line in recording.read_text().splitlines()] == ["sarah"]

    # The same run again, without any LLM, on a copy of the store as it was before.
    offline = tmp_path / "offline.toml"
    offline.write_text(f'data_dir = "{pristine}"\n')
    replay = consolidate(offline, "--user", "sarah", "--replay", str(recording))
    assert replay.returncode == 0, replay.stderr
    assert facts_of(pristine / "atlas.db") == written
    assert len(fake_llm.requests) == 2

    again = consolidate(offline, "--user", "sarah", "--replay", str(recording))
    assert again.returncode == 0 and "no new episodes" in again.stdout


def test_without_a_provider_the_command_says_consolidation_is_off(tmp_path):
    config = tmp_path / "atlas.toml"
    config.write_text(f'data_dir = "{tmp_path / "data"}"\n')
    result = consolidate(config)
    assert result.returncode == 1 and "consolidation is off" in result.stderr


def test_an_unreachable_llm_fails_the_user_and_says_why(persona, tmp_path):
    persona.service.close()
    config = tmp_path / "atlas.toml"
    config.write_text(
        f'data_dir = "{tmp_path / "data"}"\n[consolidation]\nprovider = "openai"\n'
        'base_url = "http://127.0.0.1:9"\nmodel = "m"\ntimeout_s = 5\n'
    )
    result = consolidate(config, "--user", "sarah")
    assert result.returncode == 1 and "user sarah: not consolidated: openai:" in result.stderr
