"""provider = "sampling": the connected client's model, asked by the scheduler, never in a tool call.

A real ``mcp.Client`` with a scripted ``sampling_callback`` talks to the real server in-process.
"""

from __future__ import annotations

import json
from datetime import timedelta

import mcp_types as types
import pytest
from mcp import Client

from atlas_mcp.config import load_settings
from atlas_mcp.consolidation import server_scheduler
from atlas_mcp.consolidation.consolidator import WATERMARK_KEY
from atlas_mcp.consolidation.prompt import SYSTEM_PROMPT
from atlas_mcp.domain.model import utcnow
from atlas_mcp.mcp.server import build_server
from atlas_mcp.service import MemoryService


class Clock:
    def __init__(self) -> None:
        self.offset = timedelta()

    def __call__(self):
        return utcnow() + self.offset


class ScriptedSampler:
    """The client side: answers sampling/createMessage with the next scripted text."""

    def __init__(self) -> None:
        self.answers: list[str] = []
        self.requests: list[types.CreateMessageRequestParams] = []

    async def __call__(self, context, params: types.CreateMessageRequestParams):
        self.requests.append(params)
        text = self.answers.pop(0)
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text=text), model="scripted"
        )


@pytest.fixture
def serving(engine, tmp_path):
    clock = Clock()
    service = MemoryService(engine, clock=clock)
    settings = load_settings(
        data_dir=tmp_path / "data", user="sarah", consolidation={"provider": "sampling", "after_episodes": 2}
    )
    server = build_server(service, settings.user)
    scheduler = server_scheduler(server, service, settings)
    return server, scheduler, service, clock


async def write_episodes(client: Client, *texts: str) -> list[str]:
    ids = []
    for text in texts:
        result = await client.call_tool("write_memory", {"text": text, "memory_type": "episodic"})
        ids.append(result.structured_content["id"])
    return ids


async def test_the_scheduler_asks_the_connected_client_after_the_tool_calls(serving):
    server, scheduler, service, clock = serving
    sampler = ScriptedSampler()
    async with Client(server, mode="legacy", sampling_callback=sampler) as client:
        ids = await write_episodes(
            client, "I just adopted a greyhound called Pixel.", "Pixel only eats grain-free food."
        )
        assert sampler.requests == []  # writing never waits for an LLM
        sampler.answers += [
            "Sure! Here is what I found: {not json",
            json.dumps(
                {
                    "new_facts": [
                        {
                            "text": "Sarah has a greyhound called Pixel.",
                            "fact_type": "identity",
                            "confidence": 0.95,
                            "supporting_episode_ids": [ids[0]],
                        },
                        {
                            "text": "Sarah's greyhound Pixel eats only grain-free food.",
                            "fact_type": "constraint",
                            "confidence": 0.9,
                            "supporting_episode_ids": [ids[1]],
                        },
                        {"text": "Sarah loves all dogs.", "confidence": 0.9, "supporting_episode_ids": []},
                    ]
                }
            ),
        ]
        assert await scheduler.tick() == []  # malformed: logged, nothing written, watermark kept
        assert service.get_state("sarah", WATERMARK_KEY) is None
        assert await scheduler.tick() == []  # paused after the failure
        clock.offset += timedelta(minutes=20)
        assert await scheduler.tick() == ["sarah"]

        recalled = await client.call_tool(
            "recall_memory", {"query": "what does my dog eat?", "memory_types": ["semantic"]}
        )
    top = recalled.structured_content["memories"][0]
    assert top["text"] == "Sarah's greyhound Pixel eats only grain-free food."
    assert top["source_episodes"] == [ids[1]]
    facts = {m.text for m in service.list("sarah", memory_types=["semantic"])}
    assert "Sarah loves all dogs." not in facts and len(facts) == 2

    asked = sampler.requests[-1]
    assert asked.system_prompt == SYSTEM_PROMPT and asked.temperature == 0
    payload = json.loads(asked.messages[0].content.text)
    assert [e["id"] for e in payload["new_episodes"]] == ids


async def test_below_the_episode_threshold_nothing_is_due(serving):
    server, scheduler, _service, clock = serving
    sampler = ScriptedSampler()
    async with Client(server, mode="legacy", sampling_callback=sampler) as client:
        await write_episodes(client, "One lonely event.")
        assert await scheduler.tick() == []
        clock.offset += timedelta(hours=25)  # but an episode that waited every_hours is due
        sampler.answers.append('{"new_facts": []}')
        assert await scheduler.tick() == ["sarah"]
    assert len(sampler.requests) == 1


async def test_a_client_without_a_back_channel_is_not_asked(serving):
    """2026-07-28 connections forbid server-initiated requests outside a request: wait, write nothing."""
    server, scheduler, service, _clock = serving
    sampler = ScriptedSampler()
    async with Client(server, sampling_callback=sampler) as client:  # negotiates the modern protocol
        await write_episodes(client, "Event one.", "Event two.")
        assert await scheduler.tick() == []
    assert sampler.requests == []
    assert service.get_state("sarah", WATERMARK_KEY) is None


async def test_a_client_that_cannot_sample_is_not_asked(serving):
    server, scheduler, service, _clock = serving
    async with Client(server, mode="legacy") as client:
        await write_episodes(client, "Event one.", "Event two.")
        assert await scheduler.tick() == []
    assert service.get_state("sarah", WATERMARK_KEY) is None


def test_without_a_provider_the_server_runs_without_a_scheduler(service, tmp_path):
    settings = load_settings(data_dir=tmp_path / "data")
    assert server_scheduler(build_server(service, "sarah"), service, settings) is None
