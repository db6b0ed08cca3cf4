"""Operator commands (recall, memories list/show, stats) through click's runner on a real store."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from atlas_mcp.app import open_service
from atlas_mcp.cli import cli
from atlas_mcp.config import load_settings
from atlas_mcp.inference.embedder import PER_LANGUAGE_ID

FACTORS = ("decay", "use_boost", "catalog_prior", "track_record")


@dataclass
class Seeded:
    oldest: str
    middle: str
    newest: str
    episode: str
    playbook: str
    bobs: str


@pytest.fixture
def seeded() -> Seeded:
    service = open_service(load_settings())
    try:
        oldest = service.write("sarah", "Sarah's hub runs firmware 2.1").id
        middle = service.write("sarah", "Sarah's hub runs firmware 2.5", supersedes_id=oldest).id
        episode = service.write("sarah", "Sarah flashed firmware 3.0 onto the hub", "episodic").id
        newest = service.write(
            "sarah", "Sarah's hub runs firmware 3.0", supersedes_id=middle, source_episodes=[episode]
        ).id
        playbook = service.write(
            "sarah", "When the hub drops off wifi", "procedural", steps=["unplug it", "plug it back in"]
        ).id
        bobs = service.write("bob", "Bob's hub runs firmware 1.0").id
        service.load_catalog([{"id": "hub-manual", "title": "Hub manual", "text": "Updating hub firmware"}])
    finally:
        service.close()
    return Seeded(oldest, middle, newest, episode, playbook, bobs)


def run(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


def run_json(*args: str):
    return json.loads(run(*args, "--json"))


def test_recall_explain_json_adds_up_and_leaves_use_counts_alone(seeded: Seeded):
    memories = run_json("recall", "--user", "sarah", "hub firmware", "--explain", "--k", "5")["memories"]
    ids = {m["id"] for m in memories}
    assert seeded.newest in ids and not ids & {seeded.oldest, seeded.middle, seeded.bobs}
    for memory in memories:
        explain = memory["explain"]
        product = math.prod(explain["multipliers"][name] for name in FACTORS)
        assert explain["score"] == pytest.approx(explain["relevance"] * product, abs=1e-5)
        assert explain["score"] == memory["score"]
    catalog = next(m for m in memories if m["id"] == "hub-manual")
    assert catalog["explain"]["multipliers"]["catalog_prior"] == 0.85
    again = run_json("memories", "show", seeded.newest, "--user", "sarah")["memory"]
    assert again["use_count"] == 0, "inspecting must not count as a use"


def test_recall_prints_a_table_and_the_breakdown_when_asked(seeded: Seeded):
    plain = run("recall", "--user", "sarah", "hub firmware")
    assert seeded.newest in plain and "why:" not in plain
    explained = run("recall", "--user", "sarah", "hub firmware", "--explain")
    assert "why: score = match × decay × use × prior × track × time" in explained
    top = run_json("recall", "--user", "sarah", "hub firmware", "--explain")["memories"][0]
    assert (
        " match " in explained
        and " reranker " in explained
        and f"  {top['explain']['reranker']}  " in explained
    )
    nothing = run("recall", "--user", "bob", "hub firmware", "--type", "procedural")
    assert "no memories matched" in nothing
    unknown = CliRunner().invoke(cli, ["recall", "--user", "nobody", "hub firmware", "--type", "semantic"])
    assert unknown.exit_code == 1 and "unknown user 'nobody'" in unknown.output


def test_memories_list_filters_by_type_and_hides_superseded_by_default(seeded: Seeded):
    live = run_json("memories", "list", "--user", "sarah", "--type", "semantic")["memories"]
    assert [m["id"] for m in live] == [seeded.newest]
    every = run_json("memories", "list", "--user", "sarah", "--type", "semantic", "--include-superseded")
    assert {m["id"] for m in every["memories"]} == {seeded.oldest, seeded.middle, seeded.newest}
    table = run("memories", "list", "--user", "sarah", "--include-superseded")
    assert "superseded" in table and seeded.playbook in table and seeded.bobs not in table
    assert "hub-manual" in run("memories", "list", "--type", "catalog")


def test_memories_show_follows_the_chain_both_ways_and_the_source_episodes(seeded: Seeded):
    middle = run_json("memories", "show", seeded.middle, "--user", "sarah")
    assert middle["memory"]["superseded_by"] == seeded.newest
    assert [m["id"] for m in middle["newer"]] == [seeded.newest]
    assert [(o["depth"], o["memory"]["id"]) for o in middle["older"]] == [(1, seeded.oldest)]
    oldest = run_json("memories", "show", seeded.oldest, "--user", "sarah")
    assert [m["id"] for m in oldest["newer"]] == [seeded.middle, seeded.newest]
    newest = run_json("memories", "show", seeded.newest, "--user", "sarah")
    older = [(o["depth"], o["memory"]["id"]) for o in newest["older"]]
    assert older == [(1, seeded.middle), (2, seeded.oldest)]
    assert [e["id"] for e in newest["source_episodes"]] == [seeded.episode]
    text = run("memories", "show", seeded.newest, "--user", "sarah")
    assert "Replaces (depth 1 = directly)" in text and "Source episodes" in text and seeded.episode in text


def test_memories_show_lists_steps_and_reports_forgotten_links(seeded: Seeded):
    text = run("memories", "show", seeded.playbook, "--user", "sarah")
    assert "1. unplug it" in text and "2. plug it back in" in text and "success_count" in text
    service = open_service(load_settings())
    try:
        service.forget("sarah", seeded.newest)
    finally:
        service.close()
    middle = run_json("memories", "show", seeded.middle, "--user", "sarah")
    assert middle["newer"] == [] and middle["missing"] == [seeded.newest]


def test_memories_show_treats_another_users_memory_as_not_found(seeded: Seeded):
    result = CliRunner().invoke(cli, ["memories", "show", seeded.bobs, "--user", "sarah"])
    assert result.exit_code != 0 and "not found" in result.output
    assert "Bob" not in result.output


def test_stats_counts_per_user_and_type_and_measures_the_store(seeded: Seeded, tmp_path: Path):
    found = run_json("stats")
    assert found["users"]["sarah"] == {
        "counts": {"episodic": 1, "semantic": 3, "procedural": 1},
        "superseded": 2,
    }
    assert found["users"]["bob"] == {"counts": {"semantic": 1}, "superseded": 0}
    assert found["catalog"] == 1
    database = tmp_path / "data" / "atlas.db"
    assert found["location"] == str(database) and found["size_bytes"] >= database.stat().st_size > 0
    assert found["embedding_model"] == PER_LANGUAGE_ID  # the operator sees the vector spaces
    assert found["awaiting_embedding"] == 0
    table = run("stats")
    assert "sarah" in table and "(catalog)" in table and "MiB" in table
