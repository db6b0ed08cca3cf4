"""A small persona (sarah) with episodes, older facts and a playbook; a neighbour (james)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from atlas_mcp.config_tables import ConsolidationSettings
from atlas_mcp.service import MemoryService

from .fake_llm import FakeLLM

SARAH_EPISODES = (
    (
        "2026-11-02T09:00:00Z",
        "Sarah said she moved from Munich to Berlin last month and loves her flat in Kreuzberg.",
    ),
    (
        "2026-11-03T19:30:00Z",
        "Sarah mentioned again that she is vegetarian and asked for dinner ideas without meat.",
    ),
    (
        "2026-11-05T08:10:00Z",
        (
            "Sarah's Hue lights dropped off again; she power-cycled the bridge, re-paired the "
            "bulbs in the app and moved the bridge away from the router. The lights stayed connected."
        ),
    ),
    ("2026-11-06T21:00:00Z", "Sarah asked me to keep answers short and to skip bullet points."),
    ("2026-11-07T12:00:00Z", "Sarah started a pottery class on Thursday evenings at the community centre."),
)


@dataclass
class Persona:
    service: MemoryService
    episodes: list[str]  # sarah's episode ids, oldest first
    munich: str  # fact: lives in Munich (contradicted by episode 0)
    vegetarian: str  # fact: vegetarian (restated by episode 1)
    hue_playbook: str
    james_episode: str  # another user's episode


@pytest.fixture
def persona(service: MemoryService) -> Persona:
    munich = service.write("sarah", "Sarah lives in Munich.", fact_type="identity").id
    vegetarian = service.write("sarah", "Sarah is vegetarian.", fact_type="constraint", confidence=0.8).id
    playbook = service.write(
        "sarah",
        "When the Hue lights keep dropping off the network",
        "procedural",
        name="Fix Hue lights dropping off",
        steps=[
            "Power-cycle the Hue bridge",
            "Re-pair the bulbs in the Hue app",
            "Move the bridge away from the router",
        ],
    ).id
    episodes = [service.write("sarah", text, "episodic", occurred_at=at).id for at, text in SARAH_EPISODES]
    james = service.write("james", "James said his car is a blue Tesla.", "episodic").id
    return Persona(service, episodes, munich, vegetarian, playbook, james)


@pytest.fixture
def fake_llm():
    with FakeLLM() as fake:
        yield fake


@pytest.fixture
def openai_settings(fake_llm: FakeLLM) -> ConsolidationSettings:
    return ConsolidationSettings(provider="openai", base_url=fake_llm.url, model="fake-model")
