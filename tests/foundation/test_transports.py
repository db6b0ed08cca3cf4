"""Real subprocesses: the stdio server as a desktop client starts it, and the HTTP server."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx2
import pytest

from .mcp_helpers import call, call_error, http_client, http_server, server_env, stdio_client

pytestmark = pytest.mark.slow


async def test_stdio_session_end_to_end(tmp_path: Path):
    async with stdio_client(tmp_path / "data", "sarah") as client:
        written = await call(client, "write_memory", text="Sarah's thermostat is a Nest")
        recalled = await call(client, "recall_memory", query="which thermostat does Sarah have")
        assert recalled["memories"][0]["id"] == written["id"]


async def test_two_processes_share_one_data_dir(tmp_path: Path):
    data = tmp_path / "data"
    async with stdio_client(data, "sarah") as desktop, stdio_client(data, "sarah") as cursor:
        await call(desktop, "recall_memory", query="warm up the vector cache")
        await call(cursor, "recall_memory", query="warm up the vector cache")
        first = await call(desktop, "write_memory", text="Sarah uses a Hue bridge v2")
        seen = await call(cursor, "recall_memory", query="Hue bridge")
        assert [m["id"] for m in seen["memories"]] == [first["id"]]
        second = await call(
            cursor, "write_memory", text="Sarah's Hue bridge moved to the attic", supersedes_id=first["id"]
        )
        seen = await call(desktop, "recall_memory", query="Hue bridge")
        assert [m["id"] for m in seen["memories"]] == [second["id"]]


async def test_stdio_users_are_isolated_in_one_data_dir(tmp_path: Path):
    data = tmp_path / "data"
    async with stdio_client(data, "sarah") as sarah, stdio_client(data, "james") as james:
        secret = await call(sarah, "write_memory", text="Sarah's alarm code is 1234")
        found = await call(
            james, "recall_memory", query="Sarah's alarm code is 1234", include_superseded=True
        )
        assert found["memories"] == []
        assert "not found" in await call_error(james, "forget_memory", memory_id=secret["id"])
        assert "not found" in await call_error(james, "write_memory", text="x", supersedes_id=secret["id"])


def write_config(path: Path) -> Path:
    path.write_text(
        '[users.sarah]\ntoken = "sarah-token-4e1f0b"\n'
        '[users.james]\ntoken_sha256 = "'
        + __import__("hashlib").sha256(b"james-token-7c2d95").hexdigest()
        + '"\n'
    )
    return path


async def test_http_identity_comes_from_the_token(tmp_path: Path):
    config = write_config(tmp_path / "atlas.toml")
    with http_server(tmp_path / "data", config) as base:
        assert httpx2.get(f"{base}/healthz").json() == {"status": "ok"}
        assert httpx2.post(f"{base}/mcp", json={}).status_code == 401
        bad = httpx2.post(f"{base}/mcp", json={}, headers={"Authorization": "Bearer wrong"})
        assert bad.status_code == 401 and "Bearer" in bad.headers["www-authenticate"]
        other = httpx2.post(
            f"{base}/api/atlas/mcp/james", json={}, headers={"Authorization": "Bearer sarah-token-4e1f0b"}
        )
        assert other.status_code == 403
        async with http_client(f"{base}/mcp", "sarah-token-4e1f0b") as sarah:
            secret = await call(sarah, "write_memory", text="Sarah's wifi network is called Hunter2")
        async with http_client(f"{base}/api/atlas/mcp/sarah", "sarah-token-4e1f0b") as sarah_path:
            found = await call(sarah_path, "recall_memory", query="wifi network")
            assert [m["id"] for m in found["memories"]] == [secret["id"]]
        async with http_client(f"{base}/mcp", "james-token-7c2d95") as james:
            found = await call(james, "recall_memory", query="Sarah's wifi network is called Hunter2")
            assert found["memories"] == []


def test_http_refuses_to_start_without_tokens(tmp_path: Path):
    cmd = [sys.executable, "-m", "atlas_mcp", "serve", "--transport", "http", "--port", "0"]
    result = subprocess.run(
        cmd, env=server_env(tmp_path), capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode != 0 and "token" in result.stderr
    public = subprocess.run(
        [*cmd, "--insecure-no-auth", "--host", "0.0.0.0"],
        env=server_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert public.returncode != 0 and "loopback" in public.stderr


async def test_insecure_no_auth_serves_on_loopback(tmp_path: Path):
    with http_server(tmp_path / "data", None, "--insecure-no-auth", "--user", "solo") as base:
        async with http_client(f"{base}/mcp", None) as client:
            written = await call(client, "write_memory", text="Solo likes green tea")
            found = await call(client, "recall_memory", query="green tea")
            assert found["memories"][0]["id"] == written["id"]
