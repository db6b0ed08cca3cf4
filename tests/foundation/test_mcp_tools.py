"""The tool contract, driven through a real in-process MCP client session."""

from __future__ import annotations

import pytest
from mcp import Client

from atlas_mcp.domain.scoring import ScoringPolicy
from atlas_mcp.mcp.server import INSTRUCTIONS, build_server

from .mcp_helpers import call, call_error


@pytest.fixture
def session(service):
    """A fresh in-process client session; opened inside each test so its task owns the scope."""
    return lambda: Client(build_server(service, "sarah"))


async def test_instructions_carry_the_memory_rules(session):
    async with session() as client:
        floor = ScoringPolicy().calibration.relevance_floor
        assert (
            client.instructions == INSTRUCTIONS.format(floor=floor)
            and f"relevance {floor} and up" in client.instructions
            and "score only orders them" in client.instructions
        )
        for rule in ("verbatim", "supersedes_id", "harsh", "forget_memory only when"):
            assert rule in client.instructions


async def test_write_recall_supersede_forget_roundtrip(session):
    async with session() as client:
        old = await call(client, "write_memory", text="Sarah's hub runs firmware 2.4.1", fact_type="world")
        assert old["memory_type"] == "semantic" and old["superseded"] == []
        new = await call(
            client,
            "write_memory",
            text="Sarah's hub runs firmware 2.5.0",
            supersedes_id=old["id"],
            contradiction="harsh",
        )
        assert new["superseded"] == [old["id"]]
        recalled = (await call(client, "recall_memory", query="hub firmware 2.5.0"))["memories"]
        top = recalled[0]
        assert top["id"] == new["id"] and top["confidence"] == pytest.approx(0.9)
        assert top["supersedes"] == [old["id"]] and top["use_count"] == 1
        assert {"score", "created_at", "last_used_at", "fact_type"} <= set(top)
        assert old["id"] not in [m["id"] for m in recalled]
        history = (await call(client, "recall_memory", query="hub firmware", include_superseded=True))[
            "memories"
        ]
        old_view = next(m for m in history if m["id"] == old["id"])
        assert old_view["superseded_by"] == new["id"] and "superseded_at" in old_view
        assert await call(client, "forget_memory", memory_id=new["id"]) == {"deleted": True, "id": new["id"]}
        assert "not found" in await call_error(client, "forget_memory", memory_id=new["id"])


async def test_result_shapes_per_type(session):
    async with session() as client:
        event = await call(
            client,
            "write_memory",
            text="Hub rebooted at night",
            memory_type="episodic",
            occurred_at="2026-01-02T03:04:05Z",
        )
        await call(
            client,
            "write_memory",
            text="Reboot the hub",
            memory_type="procedural",
            steps=["Unplug it", {"instruction": "Wait 30 s", "tool": "ask_user"}],
        )
        memories = (await call(client, "recall_memory", query="hub reboot"))["memories"]
        by_type = {m["memory_type"]: m for m in memories}
        assert by_type["episodic"]["occurred_at"] == "2026-01-02T03:04:05+00:00"
        assert by_type["episodic"]["id"] == event["id"] and "confidence" not in by_type["episodic"]
        playbook = by_type["procedural"]
        assert playbook["steps"] == [
            {"order": 1, "instruction": "Unplug it"},
            {"order": 2, "instruction": "Wait 30 s", "tool": "ask_user"},
        ]
        assert (playbook["success_count"], playbook["failure_count"]) == (0, 0)


@pytest.mark.parametrize(
    ("tool", "arguments", "fragment"),
    [
        ("recall_memory", {"query": "x", "k": 0}, "greater than or equal to 1"),
        ("recall_memory", {"query": "x", "k": 10_000}, "less than or equal to 100"),
        ("recall_memory", {"query": "   "}, "must not be empty"),
        ("recall_memory", {"query": "x", "memory_types": ["dreams"]}, "memory_types"),
        ("write_memory", {"text": "x", "memory_type": "catalog"}, "memory_type"),
        ("write_memory", {"text": ""}, "must not be empty"),
        ("write_memory", {"text": "x", "supersedes_id": "nope"}, "not found"),
        ("write_memory", {"text": "x", "occurred_at": "soon", "memory_type": "episodic"}, "ISO-8601"),
        ("forget_memory", {"memory_id": "../etc/passwd"}, "memory ids are"),
        ("forget_memory", {}, "memory_id"),
    ],
)
async def test_bad_input_is_a_clear_tool_error(session, tool, arguments, fragment):
    async with session() as client:
        assert fragment in await call_error(client, tool, **arguments)
        assert (await call(client, "recall_memory", query="anything"))["memories"] == []
