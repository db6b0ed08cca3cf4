"""Scopes: parsing, and a scoped in-process MCP session (the subprocess tests are in
tests/reliability/test_scoped_tokens.py)."""

from __future__ import annotations

import pytest
from mcp import Client

from atlas_mcp import scopes
from atlas_mcp.errors import InvalidInput
from atlas_mcp.mcp.server import build_server

from .mcp_helpers import call, call_error


def test_scopes_parse_with_a_clear_error() -> None:
    assert scopes.parse(" write, recall ") == {"recall", "write"}
    assert scopes.ordered({"forget", "recall"}) == ["recall", "forget"]
    with pytest.raises(InvalidInput, match=r"unknown scope 'recal' \(did you mean 'recall'\?\)"):
        scopes.parse("recal")
    with pytest.raises(InvalidInput, match="at least one scope"):
        scopes.parse(" , ")


async def test_a_read_only_session_lists_and_runs_recall_only(service) -> None:
    kept = service.write("sarah", "Sarah's bike lock code is kept in her wallet")
    async with Client(build_server(service, "sarah", user_scopes={"recall"})) as client:
        assert [t.name for t in (await client.list_tools()).tools] == ["recall_memory"]
        found = await call(client, "recall_memory", query="bike lock")
        assert found["memories"][0]["id"] == kept.id
        refused = await call_error(client, "forget_memory", memory_id=kept.id)
        assert refused.startswith("forget_memory is not allowed") and "scopes: recall" in refused
    assert service.get("sarah", kept.id).id == kept.id
