"""Elasticsearch faults seen through a real MCP session (loopback fake cluster): each one is a
clear tool error or a safe retry, never a silent partial write, and the session keeps serving.
The engine-level fault handling itself is tested in tests/elasticsearch_engine/test_transport.py."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("elasticsearch", reason="the elasticsearch extra is not installed")

from elasticsearch_engine.fake_es import SILENT_S, FakeElasticsearch
from elasticsearch_engine.harness import bootstrapped_engine
from mcp import Client

from atlas_mcp.engines.base import ListQuery
from atlas_mcp.mcp.server import build_server
from atlas_mcp.service import MemoryService

UNAVAILABLE = {"error": {"type": "unavailable_shards_exception", "reason": "no master"}}
QUEUE_FULL = {"error": {"type": "es_rejected_execution_exception", "reason": "queue full"}}


@pytest.fixture
def es(tmp_path: Path):
    fake = FakeElasticsearch().start()
    engine = bootstrapped_engine(
        fake, tmp_path / "keys.json", users=("u1",), request_timeout=0.3, max_retries=2
    )
    yield fake, engine
    engine.close()
    fake.stop()


def _text(result) -> str:
    return " ".join(getattr(c, "text", "") for c in result.content)


async def test_faults_are_tool_errors_or_safe_retries(es) -> None:
    fake, engine = es
    async with Client(build_server(MemoryService(engine), "u1")) as session:
        kept = await session.call_tool("write_memory", {"text": "The user's boat is called Wren"})
        assert not kept.is_error
        before = [m.id for m in engine.list(ListQuery("u1"))]

        fake.fail("PUT", r"^/_bulk$", 503, UNAVAILABLE, times=99)
        result = await session.call_tool(
            "write_memory", {"text": "The user sold the boat", "supersedes_id": kept.structured_content["id"]}
        )
        assert result.is_error and "overloaded" in _text(result)
        fake.faults.clear()
        assert [m.id for m in engine.list(ListQuery("u1"))] == before, "a failed write left something behind"
        assert engine.list(ListQuery("u1"))[0].superseded_by is None, "half a supersession was applied"

        fake.fail("POST", r"/_search$", delay=SILENT_S, times=3)
        result = await session.call_tool("recall_memory", {"query": "boat"})
        assert result.is_error and "did not answer" in _text(result)

        fake.fail("POST", r"/_search$", 429, QUEUE_FULL, headers={"Retry-After": "0"})
        result = await session.call_tool("recall_memory", {"query": "boat"})
        assert not result.is_error  # retried once, as Retry-After allows

        for key in fake.keys.values():
            key.invalidated = key.metadata.get("user_id") == "u1" or key.invalidated
        result = await session.call_tool("recall_memory", {"query": "boat"})
        assert result.is_error and "credential" in _text(result)
        for key in fake.keys.values():
            key.invalidated = False

        result = await session.call_tool("recall_memory", {"query": "what is my boat called"})
        assert not result.is_error and result.structured_content["memories"][0]["text"].endswith("Wren")
