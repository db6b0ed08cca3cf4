"""Scoped tokens through real MCP client sessions: over HTTP against a real ``serve --transport
http`` subprocess (an old config's token next to scoped ones of the same user), and over stdio
with ``--scopes`` / ``ATLAS_USER_SCOPES``. A token sees only the tools it may use and is refused,
with nothing done, when it calls another."""

from __future__ import annotations

import hashlib
from pathlib import Path

import httpx2
import pytest
from foundation.mcp_helpers import call, call_error, stdio_client

from .http_server import http_server, mcp_session

pytestmark = pytest.mark.slow

TOKENS = {
    "full": "alice-full-token-5f2c9a01",  # as configs were written before scopes: [users.alice] token
    "reporting": "alice-reporting-token-8e1d",
    "notes": "alice-notes-token-2b7c44",
    "inbox": "alice-inbox-token-9a0f3e",
}
ALL_TOOLS = {"recall_memory", "write_memory", "forget_memory"}


def _sha(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _config() -> dict:
    tokens = {
        "reporting": {"sha256": _sha(TOKENS["reporting"]), "scopes": ["recall"]},
        "notes": {"sha256": _sha(TOKENS["notes"]), "scopes": ["recall", "write"]},
        "inbox": {"sha256": _sha(TOKENS["inbox"]), "scopes": ["write"]},
    }
    return {"users": {"alice": {"token_sha256": _sha(TOKENS["full"]), "tokens": tokens}}}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    with http_server(tmp_path_factory.mktemp("scoped"), _config(), log_level="DEBUG") as running:
        yield running


async def _tools(session) -> set[str]:
    return {t.name for t in (await session.list_tools()).tools}


async def test_a_token_from_an_old_config_keeps_every_tool(server) -> None:
    base, _ = server
    async with mcp_session(base + "/mcp", TOKENS["full"]) as session:
        assert await _tools(session) == ALL_TOOLS
        written = await call(session, "write_memory", text="Alice's bike is a red Brompton")
        await call(session, "forget_memory", memory_id=written["id"])


async def test_scoped_tokens_see_and_use_only_their_tools(server) -> None:
    base, log_path = server
    async with mcp_session(base + "/mcp", TOKENS["full"]) as full:
        kept = await call(full, "write_memory", text="Alice's flat is on the fourth floor")
    async with mcp_session(base + "/api/atlas/mcp/alice", TOKENS["reporting"]) as reporting:
        assert await _tools(reporting) == {"recall_memory"}
        found = await call(reporting, "recall_memory", query="which floor is Alice's flat on")
        assert found["memories"][0]["id"] == kept["id"]
        refused = await call_error(reporting, "write_memory", text="Alice moved to the ground floor")
        assert "write_memory is not allowed" in refused and "'write'" in refused and "recall" in refused
        refused = await call_error(reporting, "forget_memory", memory_id=kept["id"])
        assert "'forget'" in refused and "Nothing was done" in refused
    async with mcp_session(base + "/mcp", TOKENS["notes"]) as notes:
        assert await _tools(notes) == {"recall_memory", "write_memory"}
        await call(notes, "write_memory", text="Alice waters the plants on Sundays")
        assert "'forget'" in await call_error(notes, "forget_memory", memory_id=kept["id"])
    async with mcp_session(base + "/mcp", TOKENS["inbox"]) as inbox:
        assert await _tools(inbox) == {"write_memory"}
        assert "'recall'" in await call_error(inbox, "recall_memory", query="flat")
    async with mcp_session(base + "/mcp", TOKENS["full"]) as full:
        texts = [
            m["text"]
            for m in (await call(full, "recall_memory", query="Alice", k=20, min_relevance=0))["memories"]
        ]
        assert "Alice's flat is on the fourth floor" in texts  # the refused forget did nothing
        assert "Alice waters the plants on Sundays" in texts
        assert not any("ground floor" in t for t in texts)  # the refused write did nothing
    log = log_path.read_text()
    assert "tool_refused_by_scope" in log and "reporting (" in log
    assert not any(token in log for token in TOKENS.values())


def test_the_inspector_needs_the_recall_scope(server) -> None:
    base, _ = server
    for token, status in ((TOKENS["inbox"], 403), (TOKENS["reporting"], 200)):
        response = httpx2.get(base + "/inspect/", headers={"Authorization": f"Bearer {token}"}, timeout=30)
        assert response.status_code == status, response.text


async def test_stdio_scopes_come_from_the_flag_or_the_setting(tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with stdio_client(data, "sarah") as full:
        kept = await call(full, "write_memory", text="Sarah's locker is number 12")
    async with stdio_client(data, "sarah", "--scopes", "recall") as reader:
        assert await _tools(reader) == {"recall_memory"}
        assert (await call(reader, "recall_memory", query="locker"))["memories"][0]["id"] == kept["id"]
        assert "'write'" in await call_error(reader, "write_memory", text="Sarah's locker is 14")
    async with stdio_client(data, "sarah", ATLAS_USER_SCOPES="recall,write") as writer:
        assert await _tools(writer) == {"recall_memory", "write_memory"}
        assert "'forget'" in await call_error(writer, "forget_memory", memory_id=kept["id"])
    async with stdio_client(data, "sarah") as full:
        found = await call(full, "recall_memory", query="locker number")
        assert [m["text"] for m in found["memories"]] == ["Sarah's locker is number 12"]
