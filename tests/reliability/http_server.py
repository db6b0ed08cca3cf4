"""Run ``atlas-mcp serve --transport http`` as a real subprocess on a free loopback port."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from atlas_mcp.bench.measure import wait_healthy

from .wire import server_env

STARTUP_TIMEOUT_S = 60.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def toml(config: dict[str, Any], prefix: str = "") -> str:
    """Just enough TOML for test configs: scalars, lists and nested tables."""
    lines = [f"{k} = {json.dumps(v)}" for k, v in config.items() if not isinstance(v, dict)]
    for key, value in config.items():
        if isinstance(value, dict):
            name = f"{prefix}{json.dumps(key) if not key.isidentifier() else key}"
            lines += ["", f"[{name}]", toml(value, name + ".")]
    return "\n".join(lines)


@contextmanager
def http_server(
    data_dir: Path,
    config: dict[str, Any],
    log_level: str = "INFO",
    port: int | None = None,
    env: dict[str, str] | None = None,
) -> Iterator[tuple[str, Path]]:
    """(base URL, path of the server's stderr log) for the lifetime of the block; ``env``: more
    environment for the server."""
    port = port or free_port()
    config_file = data_dir / "atlas.toml"
    data_dir.mkdir(parents=True, exist_ok=True)
    config_file.write_text(toml(config))
    log_path = data_dir / "server.log"
    environment = server_env(data_dir, "default", ATLAS_LOG_LEVEL=log_level) | (env or {})
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "atlas_mcp", "serve", "--transport", "http", "--port", str(port),
             "--config", str(config_file)],
            stdout=log, stderr=log, env=environment,
        )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(base, process, STARTUP_TIMEOUT_S, log_path)
        yield base, log_path
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=20)


@asynccontextmanager
async def mcp_session(url: str, token: str | None, **headers: str):
    if token is not None:
        headers = {"Authorization": f"Bearer {token}", **headers}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        yield client
