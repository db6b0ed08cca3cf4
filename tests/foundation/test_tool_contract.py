"""The whole MCP contract, pinned: every tool's name, title, description, annotations, input and
output schema, the server's instructions, prompts and resources, as a real client lists them.

A change here is a change every connected agent sees, so it must be deliberate. When it is,
regenerate the snapshot (as the Elasticsearch golden files are) and review the diff:

    UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/foundation/test_tool_contract.py
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from atlas_mcp.domain.model import Contradiction, FactType, MemoryType, Outcome
from atlas_mcp.mcp.server import build_server
from atlas_mcp.service import WRITABLE_TYPES

SNAPSHOT = Path(__file__).with_name("tool_contract.json")
REGENERATE = "UPDATE_GOLDEN=1 pytest tests/foundation/test_tool_contract.py"


def _dump(items: list[Any]) -> list[dict[str, Any]]:
    return [item.model_dump(mode="json", by_alias=True, exclude_none=True) for item in items]


async def _contract(service) -> dict[str, Any]:
    """What a client learns about the server before calling anything (the version is left out:
    it changes with every release, not with the contract)."""
    async with Client(build_server(service, "sarah")) as client:
        return {
            "server": {"name": client.server_info.name, "title": client.server_info.title},
            "instructions": client.instructions,
            "tools": _dump((await client.list_tools()).tools),
            "prompts": _dump((await client.list_prompts()).prompts),
            "resources": _dump((await client.list_resources()).resources),
            "resource_templates": _dump((await client.list_resource_templates()).resource_templates),
        }


def _text(contract: dict[str, Any]) -> str:
    # Key order is kept (not sorted): the order of a tool's parameters is part of what clients show.
    return json.dumps(contract, indent=2, ensure_ascii=False) + "\n"


async def test_the_mcp_contract_matches_its_snapshot(service):
    current = await _contract(service)
    if os.environ.get("UPDATE_GOLDEN") == "1":
        SNAPSHOT.write_text(_text(current), encoding="utf-8")
        pytest.skip(f"wrote {SNAPSHOT.name}: review its diff before committing")
    assert SNAPSHOT.exists(), f"no snapshot yet: run {REGENERATE}"
    pinned = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    assert current == pinned, f"the MCP contract changed; if that is intended, run {REGENERATE}"
    assert _text(current) == SNAPSHOT.read_text(encoding="utf-8"), (
        f"the order of keys or parameters changed; if that is intended, run {REGENERATE}"
    )


async def test_the_snapshot_names_every_tool_parameter_and_its_description():
    """The snapshot is only worth its diff if it holds the parts an agent reads."""
    pinned = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    tools = {tool["name"]: tool for tool in pinned["tools"]}
    assert set(tools) == {"recall_memory", "write_memory", "forget_memory"}
    for tool in tools.values():
        assert tool["description"] and tool["annotations"] and tool["outputSchema"]
        for name, schema in tool["inputSchema"]["properties"].items():
            assert schema.get("description"), f"{tool['name']}.{name} has no description"
    assert tools["recall_memory"]["inputSchema"]["required"] == ["query"]
    assert list(tools["forget_memory"]["inputSchema"]["properties"]) == ["memory_id"]
    assert tools["recall_memory"]["annotations"]["readOnlyHint"] is True
    assert tools["write_memory"]["annotations"]["destructiveHint"] is False
    assert tools["forget_memory"]["annotations"]["destructiveHint"] is True
    assert "verbatim" in pinned["instructions"]


def _choices(schema: dict[str, Any]) -> list[str]:
    """The values a parameter's schema allows (through ``anyOf`` with null and array items)."""
    for branch in schema.get("anyOf", [schema]):
        if "enum" in branch:
            return branch["enum"]
        if "items" in branch:
            return _choices(branch["items"])
    raise AssertionError(f"no enum in {schema}")


def test_closed_parameter_sets_are_the_domain_enums():
    pinned = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    params = {t["name"]: t["inputSchema"]["properties"] for t in pinned["tools"]}
    assert _choices(params["recall_memory"]["memory_types"]) == [t.value for t in MemoryType]
    assert _choices(params["write_memory"]["memory_type"]) == [t.value for t in WRITABLE_TYPES]
    assert _choices(params["write_memory"]["contradiction"]) == [c.value for c in Contradiction]
    assert _choices(params["write_memory"]["fact_type"]) == [f.value for f in FactType]
    assert _choices(params["write_memory"]["outcome"]) == [o.value for o in Outcome]
