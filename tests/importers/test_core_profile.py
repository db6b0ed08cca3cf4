"""The core profile: the user's key current facts, within a budget, in each session's instructions
and the atlas://profile resource, for the caller only (stdio and HTTP, real client sessions)."""

from __future__ import annotations

import contextlib
import hashlib
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx2
import pytest
from foundation.mcp_helpers import http_server, stdio_client
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from atlas_mcp.domain.model import Memory, MemoryType
from atlas_mcp.domain.profile import PREAMBLE, ProfilePolicy, estimate_tokens, render, select
from atlas_mcp.engines.embedded.engine import EmbeddedEngine
from atlas_mcp.inference.embedder import default_embedder
from atlas_mcp.mcp.profile import PROFILE_URI
from atlas_mcp.mcp.server import INSTRUCTIONS, build_server
from atlas_mcp.service import MemoryService

NOW = datetime(2026, 6, 1, tzinfo=UTC)
TOKENS = {"alice": "alice-profile-token-5f2c9a1b", "bob": "bob-profile-token-81d0e7c3"}


def fact(text: str, kind: str = "preference", user: str = "alice", **fields) -> Memory:
    fields.setdefault("created_at", NOW)
    return Memory(
        id=f"m{abs(hash((text, user))) % 10**12}",
        memory_type=fields.pop("memory_type", MemoryType.SEMANTIC),
        user_id=user,
        text=text,
        fact_type=kind,
        **fields,
    )


# -- what is chosen ------------------------------------------------------------------------


def test_identity_and_constraints_first_then_the_most_used_preferences():
    facts = [
        fact("Likes jazz", use_count=0, created_at=NOW),
        fact("Prefers aisle seats", use_count=7),
        fact("Is allergic to peanuts", "constraint", created_at=NOW - timedelta(days=400)),
        fact("Name is Alice Moreau", "identity", created_at=NOW - timedelta(days=900)),
        fact("Drinks oat-milk flat whites", use_count=2),
    ]
    chosen = [f.text for f in select(facts, ProfilePolicy(), "alice")]
    assert chosen[:2] == ["Is allergic to peanuts", "Name is Alice Moreau"]
    assert chosen[2:] == ["Prefers aisle seats", "Drinks oat-milk flat whites", "Likes jazz"]


def test_only_current_facts_of_this_user_never_the_catalog_events_or_world_facts():
    facts = [
        fact("Lives in Leeds", "identity", superseded_by="newer", superseded_at=NOW),
        fact("Lives in Lisbon", "identity"),
        fact("Bob lives in Oslo", "identity", user="bob"),
        fact("Flew to Porto", memory_type=MemoryType.EPISODIC, occurred_at=NOW),
        fact("Hub X1 runs firmware 2.1", "world"),
        Memory(
            id="cat-1", memory_type=MemoryType.CATALOG, user_id=None, text="Prefers the X1", created_at=NOW
        ),
    ]
    assert [f.text for f in select(facts, ProfilePolicy(), "alice")] == ["Lives in Lisbon"]


def test_near_copies_count_once():
    facts = [
        fact("Alice is allergic to peanuts", "constraint", use_count=3),
        fact("alice is allergic to peanuts!", "constraint"),
        fact("Alice is allergic to shellfish", "constraint"),
    ]
    chosen = [f.text for f in select(facts, ProfilePolicy(), "alice")]
    assert chosen == ["Alice is allergic to peanuts", "Alice is allergic to shellfish"]


@pytest.mark.parametrize("budget", [100, 200, 350])
def test_the_rendered_profile_stays_within_its_token_budget(budget):
    facts = [
        fact(f"Preference number {i}: likes the colour {i} on {i}-day mornings", use_count=i)
        for i in range(200)
    ]
    facts += [fact("Has an extremely long identity memory " + "word " * 300, "identity")]
    policy = ProfilePolicy(max_tokens=budget)
    chosen = select(facts, policy, "alice")
    assert chosen, "a budget this size holds at least one short fact"
    assert estimate_tokens(render(chosen)) <= budget
    assert all("extremely long" not in f.text for f in chosen)  # one memory must not eat it all
    assert len(select(facts, ProfilePolicy(max_tokens=8000, max_facts=5), "alice")) == 5


def test_render_groups_by_kind_and_says_what_it_is():
    text = render([fact("Is vegan", "constraint"), fact("Name is Alice", "identity")])
    assert text.splitlines() == [PREAMBLE, "Identity:", "- Name is Alice", "Constraints:", "- Is vegan"]


# -- in MCP sessions ------------------------------------------------------------------------


def _seed(data_dir: Path, facts: dict[str, list[tuple[str, str]]]) -> None:
    service = MemoryService(EmbeddedEngine(data_dir / "atlas.db", default_embedder()))
    try:
        for user, rows in facts.items():
            for text, kind in rows:
                service.write(user, text, fact_type=kind)
        service.load_catalog([{"id": "hub-x1", "title": "Hub X1", "text": "Prefers nothing; firmware 2.1"}])
    finally:
        service.close()


ALICE = [
    ("Name is Alice Moreau", "identity"),
    ("Is allergic to peanuts", "constraint"),
    ("Prefers aisle seats", "preference"),
]
BOB = [
    ("Name is Bob Lindqvist", "identity"),
    ("Must not eat gluten", "constraint"),
    ("Prefers window seats", "preference"),
]


async def test_in_process_session_lists_and_reads_the_profile(service):
    async with Client(build_server(service, "alice")) as client:
        assert (
            client.instructions.rstrip()
            == INSTRUCTIONS.format(floor=service.policy.calibration.relevance_floor).rstrip()
        )
        listed = (await client.list_resources()).resources
        assert [str(r.uri) for r in listed] == [PROFILE_URI]
        empty = (await client.read_resource(PROFILE_URI)).contents[0].text
        assert "No key facts" in empty
    service.write("alice", "Name is Alice Moreau", fact_type="identity")
    async with Client(build_server(service, "alice")) as client:
        assert client.instructions.endswith("Identity:\n- Name is Alice Moreau")
        assert (await client.read_resource(PROFILE_URI)).contents[0].text.endswith("- Name is Alice Moreau")


async def test_off_means_no_resource_and_the_plain_rules(service):
    service.write("alice", "Name is Alice Moreau", fact_type="identity")
    async with Client(build_server(service, "alice", ProfilePolicy(enabled=False))) as client:
        assert "Alice" not in client.instructions
        assert (await client.list_resources()).resources == []


async def test_stdio_session_gets_its_own_users_profile(tmp_path: Path):
    data = tmp_path / "data"
    _seed(data, {"alice": ALICE, "bob": BOB})
    for user, mine, theirs in (("alice", ALICE, BOB), ("bob", BOB, ALICE)):
        async with stdio_client(data, user) as client:
            resource = (await client.read_resource(PROFILE_URI)).contents[0].text
            for text in (client.instructions, resource):
                assert all(t in text for t, _ in mine)
                assert not any(t in text for t, _ in theirs)
                assert "Hub X1" not in text and "firmware" not in text  # the catalog is not profile


async def test_stdio_profile_can_be_turned_off_by_setting(tmp_path: Path):
    data = tmp_path / "data"
    _seed(data, {"alice": ALICE})
    async with stdio_client(data, "alice", ATLAS_PROFILE__ENABLED="false") as client:
        assert "Alice" not in client.instructions
        assert (await client.list_resources()).resources == []


@contextlib.asynccontextmanager
async def http_client(url: str, token: str, mode: str):
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as client,
    ):
        yield client


@pytest.mark.slow
async def test_http_sessions_each_get_the_token_owners_profile(tmp_path: Path):
    """Both protocol eras: the handshake (initialize, one session) and 2026-07-28's
    stateless requests (server/discover)."""
    data = tmp_path / "data"
    _seed(data, {"alice": ALICE, "bob": BOB})
    config = tmp_path / "atlas.toml"
    config.write_text(
        f'user = "alice"\n[users.alice]\ntoken = "{TOKENS["alice"]}"\n'
        f'[users.bob]\ntoken_sha256 = "{hashlib.sha256(TOKENS["bob"].encode()).hexdigest()}"\n'
    )
    with http_server(data, config) as base:
        for user, mine, theirs in (("bob", BOB, ALICE), ("alice", ALICE, BOB)):
            for url, mode in ((f"{base}/mcp", "legacy"), (f"{base}/api/atlas/mcp/{user}", "auto")):
                async with http_client(url, TOKENS[user], mode) as client:
                    assert (client.protocol_version >= "2026") == (mode == "auto")
                    resource = (await client.read_resource(PROFILE_URI)).contents[0].text
                    for text in (client.instructions, resource):
                        assert all(t in text for t, _ in mine), (user, text)
                        assert not any(t in text for t, _ in theirs), (user, text)
