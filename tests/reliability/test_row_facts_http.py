"""An HTTP server, which warms up no user, still keeps the coverage of an upgraded store's rows
once it has answered a recall (``Engine.keep_row_facts``), through a real server process."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import anyio
import pytest
from foundation.mcp_helpers import call

from atlas_mcp.engines.embedded.engine import EmbeddedEngine
from atlas_mcp.inference.embedder import default_embedder
from atlas_mcp.service import MemoryService

from .http_server import http_server, mcp_session

pytestmark = pytest.mark.slow

TOKEN = "row-facts-token-2c9e41d7"
FACTS = [
    "Sarah's boat is called Marlin",
    "Sarah moors the boat at pier 7",
    "Sarah's sister Ana lives in Porto",
    "Sarah prefers sailing in the morning",
]


def _kept(database: Path) -> int:
    with sqlite3.connect(database) as conn:
        count: int = conn.execute("SELECT count(*) FROM row_coverage").fetchone()[0]
    return count


async def test_an_http_server_fills_an_upgraded_stores_rows_after_its_first_recall(tmp_path: Path) -> None:
    data = tmp_path / "data"
    database = data / "atlas.db"
    service = MemoryService(EmbeddedEngine(database, default_embedder()))
    for text in FACTS:
        service.write("sarah", text)
    service.close()
    with sqlite3.connect(database) as conn:  # as rows written before the table was
        conn.execute("DELETE FROM row_coverage")
    with http_server(data, {"users": {"sarah": {"token": TOKEN}}}) as (base, _log):
        async with mcp_session(base + "/mcp", TOKEN) as client:
            await anyio.sleep(1.0)
            assert _kept(database) == 0  # nothing before the first recall
            found = await call(client, "recall_memory", query="what is my boat called")
            assert found["memories"]
            deadline = time.monotonic() + 60
            while _kept(database) < len(FACTS) and time.monotonic() < deadline:
                await anyio.sleep(0.2)
    assert _kept(database) == len(FACTS)
