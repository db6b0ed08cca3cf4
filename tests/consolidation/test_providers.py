"""The Elasticsearch chat_completion provider against a scripted loopback endpoint."""

from __future__ import annotations

import json

import httpx2
import pytest

from atlas_mcp.config_tables import ConsolidationSettings
from atlas_mcp.consolidation import Consolidator, ProviderUnavailable, open_provider
from atlas_mcp.consolidation.prompt import Prompt
from atlas_mcp.consolidation.providers import stream_deltas

from .fake_llm import es_stream


@pytest.fixture
def es_settings(fake_llm) -> ConsolidationSettings:
    return ConsolidationSettings(
        provider="elasticsearch", base_url=fake_llm.url + "/", inference_id="chat-fast"
    )


async def test_elasticsearch_provider_joins_the_streamed_deltas(persona, fake_llm, es_settings, monkeypatch):
    monkeypatch.setenv("ES_KEY", "es-key-1")
    settings = es_settings.model_copy(update={"api_key_env": "ES_KEY"})
    body = {
        "new_facts": [
            {
                "text": "Sarah takes a pottery class on Thursdays.",
                "confidence": 0.9,
                "supporting_episode_ids": [persona.episodes[4]],
            }
        ]
    }
    fake_llm.script(body)
    [report] = await Consolidator(persona.service, settings, open_provider(settings)).run("sarah")

    [request] = fake_llm.requests
    assert request["path"] == "/_inference/chat_completion/chat-fast/_stream"
    assert request["headers"]["Authorization"] == "ApiKey es-key-1"
    assert [m["role"] for m in request["body"]["messages"]] == ["system", "user"]
    assert [a.action.text for a in report.applied] == ["Sarah takes a pottery class on Thursdays."]


async def test_an_injected_client_is_used(fake_llm, es_settings):
    fake_llm.script('{"new_facts": []}')
    async with httpx2.AsyncClient(headers={"X-Opaque-Id": "atlas-consolidation"}) as client:
        provider = open_provider(es_settings, http_client=client)
        assert await provider.complete("sarah", Prompt("s", "u")) == '{"new_facts": []}'
    assert fake_llm.requests[0]["headers"]["X-Opaque-Id"] == "atlas-consolidation"


async def test_an_elasticsearch_error_is_provider_unavailable(fake_llm, es_settings):
    fake_llm.script((404, json.dumps({"error": {"type": "resource_not_found_exception"}})))
    with pytest.raises(ProviderUnavailable, match="HTTP 404"):
        await open_provider(es_settings).complete("sarah", Prompt("s", "u"))


def test_stream_parsing_follows_the_documented_shape():
    assert "".join(stream_deltas(es_stream('{"a": "Elastic is"}', pieces=4))) == '{"a": "Elastic is"}'
    unwrapped = 'data: {"choices":[{"delta":{"content":"hi"}}]}\n\ndata: [DONE]\n'
    assert stream_deltas(unwrapped) == ["hi"]
    with pytest.raises(ProviderUnavailable, match="overloaded"):
        stream_deltas('event: error\ndata: {"error": {"reason": "overloaded"}}\n')
