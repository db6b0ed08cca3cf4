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
        ("write_memory", {"text": "x", "memorytype": "episodic"}, "unknown argument 'memorytype' (did you mean 'memory_type'?)"),
        ("write_memory", {"text": "x", "occuredAt": "2026-01-01"}, "unknown argument 'occuredAt' (did you mean 'occurred_at'?)"),
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
        ("write_memory", {"text": "x", "memory_type": "fact"}, "memory_type must be 'episodic', 'semantic' or 'procedural'"),
        ("write_memory", {"text": "x", "supersedes_id": 5}, "supersedes_id must be a valid string or a valid list"),
        ("write_memory", {"text": "x", "memory_type": "procedural", "steps": [{"instr": "a"}]}, "steps[0].instruction is required"),
        ("write_memory", {"text": "x", "contradiction": "soft"}, "contradiction must be 'natural' or 'harsh'"),
    ],
)
async def test_bad_values_read_like_the_projects_own_messages(session, tool, arguments, expected):
    async with session() as client:
        message = assert_clean(await call_error(client, tool, **arguments))
        assert message.startswith(f"invalid arguments for {tool}: ") and expected in message
        assert await stored(client) == []
