"""Strict tool inputs: a misspelt or inapplicable argument is an error that says what was meant,
and no error carries the validator's noise. Nothing is written by a refused call."""

from __future__ import annotations

import pytest
from mcp import Client

from atlas_mcp.mcp.server import build_server
from atlas_mcp.service import MemoryService

from .mcp_helpers import call, call_error

NOISE = ("validation error", "pydantic", "type=", "input_value", "Arguments", "For further information")


@pytest.fixture
def session(service: MemoryService):
    return lambda: Client(build_server(service, "sarah"))


def assert_clean(message: str) -> str:
    assert not [n for n in NOISE if n in message], message
    assert "\n" not in message, message
    return message


async def stored(client: Client) -> list:
    found = await call(client, "recall_memory", query="hub firmware event", include_superseded=True)
    return found["memories"]


@pytest.mark.parametrize(
    "tool, arguments, expected",
    [
        (
            "write_memory",
            {"text": "x", "memorytype": "episodic"},
            "unknown argument 'memorytype' (did you mean 'memory_type'?)",
        ),
        (
            "write_memory",
            {"text": "x", "occuredAt": "2026-01-01"},
            "unknown argument 'occuredAt' (did you mean 'occurred_at'?)",
        ),
        ("write_memory", {"txt": "x"}, "unknown argument 'txt' (did you mean 'text'?)"),
        ("recall_memory", {"query": "x", "top_k": 3}, "unknown argument 'top_k'"),
        ("recall_memory", {"query": "x", "memory_type": ["semantic"]}, "(did you mean 'memory_types'?)"),
        ("forget_memory", {"id": "abc"}, "unknown argument 'id'"),
        ("write_memory", {"text": "x", "user_id": "bob"}, "unknown argument 'user_id'"),
    ],
)
async def test_unknown_arguments_are_named_with_the_one_meant(session, tool, arguments, expected):
    async with session() as client:
        message = assert_clean(await call_error(client, tool, **arguments))
        assert expected in message and f"{tool} takes:" in message
        assert await stored(client) == []


@pytest.mark.parametrize(
    "tool, arguments, expected",
    [
        ("recall_memory", {"query": "x", "k": 500}, "k must be less than or equal to 100"),
        ("recall_memory", {}, "query is required"),
        ("recall_memory", {"query": "x", "memory_types": ["facts"]}, "memory_types[0] must be 'episodic'"),
        (
            "write_memory",
            {"text": "x", "memory_type": "fact"},
            "memory_type must be 'episodic', 'semantic' or 'procedural'",
        ),
        (
            "write_memory",
            {"text": "x", "supersedes_id": 5},
            "supersedes_id must be a valid string or a valid list",
        ),
        (
            "write_memory",
            {"text": "x", "memory_type": "procedural", "steps": [{"instr": "a"}]},
            "steps[0].instruction is required",
        ),
        (
            "write_memory",
            {"text": "x", "contradiction": "soft"},
            "contradiction must be 'natural' or 'harsh'",
        ),
        (
            "write_memory",
            {"text": "x", "memory_type": "procedural", "steps": [{"instruction": "a", "tol": "b"}]},
            "steps[0].tol is not a field it takes",
        ),
    ],
)
async def test_bad_values_read_like_the_projects_own_messages(session, tool, arguments, expected):
    async with session() as client:
        message = assert_clean(await call_error(client, tool, **arguments))
        assert message.startswith(f"invalid arguments for {tool}: ") and expected in message
        assert await stored(client) == []


@pytest.mark.parametrize(
    "arguments, expected",
    [
        (
            {"steps": ["unplug it"]},
            "steps does not apply to semantic memories (steps is for procedural memories)",
        ),
        ({"occurred_at": "2026-11-30T10:00:00Z"}, "occurred_at does not apply to semantic memories"),
        ({"memory_type": "episodic", "confidence": 0.4}, "confidence does not apply to episodic memories"),
        (
            {"memory_type": "episodic", "fact_type": "identity", "steps": ["x"]},
            "fact_type, steps do not apply",
        ),
        (
            {"memory_type": "procedural", "occurred_at": "2026-11-30T10:00:00Z", "steps": ["x"]},
            "occurred_at does not",
        ),
        ({"memory_type": "procedural"}, "a playbook needs its steps"),
        ({"memory_type": "procedural", "steps": []}, "a playbook needs its steps"),
    ],
)
async def test_arguments_that_do_not_apply_to_the_type_are_refused(session, arguments, expected):
    async with session() as client:
        message = assert_clean(
            await call_error(client, "write_memory", text="Sarah's hub firmware event", **arguments)
        )
        assert expected in message
        assert await stored(client) == []


async def test_every_argument_in_its_place_is_kept(session):
    async with session() as client:
        event = await call(
            client,
            "write_memory",
            text="Hub firmware event: update to 3.0",
            memory_type="episodic",
            occurred_at="2026-11-30T10:00:00Z",
        )
        fact = await call(
            client, "write_memory", text="Sarah's hub firmware is 3.0", confidence=0.9, fact_type="world"
        )
        playbook = await call(
            client,
            "write_memory",
            text="Hub firmware update",
            memory_type="procedural",
            steps=["open the app", "press update"],
            confidence=0.8,
        )
        by_id = {m["id"]: m for m in await stored(client)}
        assert by_id[event["id"]]["occurred_at"].startswith("2026-11-30T10:00:00")
        assert (by_id[fact["id"]]["confidence"], by_id[fact["id"]]["fact_type"]) == (0.9, "world")
        assert [s["instruction"] for s in by_id[playbook["id"]]["steps"]] == ["open the app", "press update"]
