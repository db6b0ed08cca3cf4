"""Helpers to drive atlas-mcp through real MCP client sessions (stdio and HTTP subprocesses)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client


def server_env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATLAS_")}
    return env | {"ATLAS_DATA_DIR": str(data_dir)} | extra


def stdio_client(data_dir: Path, user: str = "default", *args: str, **env: str) -> Client:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "atlas_mcp", "serve", "--user", user, *args],
        env=server_env(data_dir, **env),
    )
    return Client(params)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def http_server(data_dir: Path, config: Path | None, *args: str, port: int | None = None) -> Iterator[str]:
    """Start `atlas-mcp serve --transport http` and yield its base URL once /healthz answers."""
    port = port or free_port()
    cmd = [sys.executable, "-m", "atlas_mcp", "serve", "--transport", "http", "--port", str(port), *args]
    if config is not None:
        cmd += ["--config", str(config)]
    proc = subprocess.Popen(cmd, env=server_env(data_dir), stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(proc, base)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _wait_healthy(proc: subprocess.Popen, base: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited {proc.returncode}: {proc.stderr.read()}")
        with contextlib.suppress(httpx2.HTTPError):
            if httpx2.get(f"{base}/healthz", timeout=1).status_code == 200:
                return
        time.sleep(0.1)
    raise TimeoutError("server did not become healthy")


@contextlib.asynccontextmanager
async def http_client(url: str, token: str | None) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        yield client


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    """Call a tool and return its structured result; fail loudly on a tool error."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content[0].text
    return result.structured_content


async def call_error(client: Client, tool: str, **arguments: Any) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error, result.structured_content
    return result.content[0].text
