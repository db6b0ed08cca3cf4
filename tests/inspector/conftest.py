"""A real `atlas-mcp serve --transport http` over a seeded store, shared by the inspector tests."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta

import pytest
from foundation.mcp_helpers import http_server

from atlas_mcp.app import open_service
from atlas_mcp.config import load_settings
from atlas_mcp.domain.model import utcnow

TOKENS = {"sarah": "sarah-inspector-token", "bob": "bob-inspector-token"}
XSS_TEXT = (
    "Sarah's note <script>document.title='pwned'</script>"
    '<img src=x onerror="document.title=\'pwned\'"> & "quotes"'
)
BOB_TEXT = "Bob's bank PIN hint is the cat's birthday"


@dataclass(frozen=True)
class Inspected:
    url: str
    firmware: tuple[str, str, str]  # oldest → newest fact in one supersession chain
    episode: str
    playbook: str
    xss: str
    bobs: str


@pytest.fixture(scope="module")
def inspected(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Inspected]:
    root = tmp_path_factory.mktemp("inspector")
    config = root / "atlas.toml"
    config.write_text("".join(f'[users.{user}]\ntoken = "{token}"\n' for user, token in TOKENS.items()))
    seeded = _seed(root / "data")
    with http_server(root / "data", config) as url:
        yield Inspected(url, **seeded)


def _seed(data_dir) -> dict:
    service = open_service(load_settings(data_dir=data_dir))
    now = utcnow()
    try:
        write = service.write
        old = write("sarah", "Sarah's smart hub runs firmware 2.1").id
        mid = write("sarah", "Sarah's smart hub runs firmware 2.5", supersedes_id=old).id
        episode = write(
            "sarah", "Sarah updated the hub to firmware 3.0 after the Zigbee dropouts", "episodic",
            occurred_at=now - timedelta(days=3),
        ).id  # fmt: skip
        new = write(
            "sarah", "Sarah's smart hub runs firmware 3.0", supersedes_id=mid, source_episodes=[episode]
        ).id
        service.update("sarah", service.get("sarah", new).evolve(use_count=6))  # recalled before
        long_ago = now - timedelta(days=365)  # always in the calendar year before now's
        write("sarah", "Sarah first set up the hub in her flat in Porto", "episodic", occurred_at=long_ago)
        write("sarah", "Sarah prefers short answers with the exact commands", fact_type="preference")
        playbook = write(
            "sarah", "When the hub firmware update stalls", "procedural", name="Unstick a firmware update",
            steps=["Unplug the hub for ten seconds", "Hold reset while plugging it in", "Retry the update"],
        ).id  # fmt: skip
        stored = service.get("sarah", playbook)
        service.update("sarah", stored.evolve(success_count=4, failure_count=1, last_success_at=now))
        xss = write("sarah", XSS_TEXT, "episodic").id
        bobs = write("bob", BOB_TEXT).id
        service.load_catalog(
            [{"id": "hub-firmware-notes", "title": "Hub firmware 3.0 release notes",
              "text": "Firmware 3.0 fixes Zigbee dropouts and adds Matter support", "category": "firmware"}]
        )  # fmt: skip
    finally:
        service.close()
    return {"firmware": (old, mid, new), "episode": episode, "playbook": playbook, "xss": xss, "bobs": bobs}
