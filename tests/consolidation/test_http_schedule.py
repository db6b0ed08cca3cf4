"""The long-running HTTP server consolidates in the background after enough new episodes."""

from __future__ import annotations

import time

import anyio
import pytest

from tests.foundation.mcp_helpers import call, http_client, http_server

pytestmark = pytest.mark.slow


async def test_the_http_server_consolidates_after_m_new_episodes(fake_llm, tmp_path):
    config = tmp_path / "atlas.toml"
    config.write_text(
        '[users.sarah]\ntoken = "sarah-token-4e1f0b"\n'
        f'[consolidation]\nprovider = "openai"\nbase_url = "{fake_llm.url}"\nmodel = "m"\n'
        "after_episodes = 2\npoll_seconds = 0.5\n"
    )
    with http_server(tmp_path / "data", config) as base:
        async with http_client(base + "/mcp", "sarah-token-4e1f0b") as client:
            first = await call(
                client, "write_memory", text="I switched my phone plan to Fonic.", memory_type="episodic"
            )
            fake_llm.script(
                {
                    "new_facts": [
                        {
                            "text": "Sarah's phone plan is with Fonic.",
                            "fact_type": "world",
                            "confidence": 0.9,
                            "supporting_episode_ids": [first["id"]],
                        }
                    ]
                }
            )
            assert fake_llm.requests == []  # one episode is below after_episodes
            await call(
                client, "write_memory", text="The Fonic plan costs 9.99 a month.", memory_type="episodic"
            )
            deadline = time.monotonic() + 60  # a bound, not a timing assertion
            facts: list = []
            while not facts and time.monotonic() < deadline:
                await anyio.sleep(0.3)
                found = await call(client, "recall_memory", query="phone plan", memory_types=["semantic"])
                facts = found["memories"]
    assert [f["text"] for f in facts] == ["Sarah's phone plan is with Fonic."]
    assert facts[0]["source_episodes"] == [first["id"]]
    assert len(fake_llm.requests) == 1
