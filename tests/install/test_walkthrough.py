"""A newcomer's first run, on a machine that has nothing of ours: build the wheel, start it
exactly as claude_desktop_config.example.json says (uvx --offline), and use it through an MCP
client.

Clean means: a fresh uv cache, a fresh HOME (so the default data directory is new), and, for
the offline start, every proxy variable pointing at a closed port, so any attempt to reach the
package index fails the test instead of passing quietly. Building and the first `uvx` call are
allowed the network (the package index), as for any first install. Timings go to stderr; they
are measured on a shared machine, so read them as rough.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
from foundation.mcp_helpers import call, call_error
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from atlas_mcp import __version__

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "claude_desktop_config.example.json"
CHECKOUT_PLACEHOLDER = "/absolute/path/to/atlas-mcp"
NO_NETWORK = "http://127.0.0.1:9"  # the discard port: nothing listens, every connection is refused
# How this machine reaches the package index (CA bundle, proxies, mirrors): kept, since a
# newcomer's machine has its own; nothing else of the test environment is passed on.
NETWORK_VARS = (
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "UV_INDEX_URL",
    "UV_DEFAULT_INDEX",
    "UV_EXTRA_INDEX_URL",
    "UV_NATIVE_TLS",
    "UV_SYSTEM_CERTS",
)


def _uv_tool(name: str) -> str:
    found = Path(sys.executable).with_name(name)
    path = str(found) if found.exists() else shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed (scripts/test.sh installs uv from the package index)")
    return path


def _clean_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    network = {k: v for k in NETWORK_VARS for name in (k, k.lower()) if (v := os.environ.get(name))}
    return network | {
        "PATH": "/usr/local/bin:/usr/bin:/bin",  # no venv of ours: uvx must bring everything
        "HOME": str(home),
        "UV_CACHE_DIR": str(tmp_path / "uv-cache"),
        "UV_NO_CONFIG": "1",  # no uv.toml of this machine's user
        **extra,
    }


def _run(cmd: list[str], env: dict[str, str], timeout: float = 600) -> tuple[str, float]:
    started = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    assert done.returncode == 0, f"{' '.join(cmd)} failed:\n{done.stderr[-3000:]}"
    return done.stdout, time.perf_counter() - started


def _report(timings: dict[str, float]) -> None:
    shown = ", ".join(f"{step} {seconds:.1f} s" for step, seconds in timings.items())
    print(f"\nwalk-through timings (shared machine, rough): {shown}", file=sys.__stderr__)


async def test_a_built_wheel_runs_the_claude_desktop_way_offline(tmp_path: Path):
    uv, uvx = _uv_tool("uv"), _uv_tool("uvx")
    online = _clean_env(tmp_path)
    timings: dict[str, float] = {}

    dist = tmp_path / "dist"
    _, timings["build sdist+wheel"] = _run([uv, "build", "--out-dir", str(dist), str(REPO)], online)
    (wheel,) = dist.glob("atlas_memory_mcp-*-py3-none-any.whl")
    assert [p.name for p in dist.glob("*.tar.gz")] == [f"atlas_memory_mcp-{__version__}.tar.gz"]
    with zipfile.ZipFile(wheel) as archive:
        scripts = next(n for n in archive.namelist() if n.endswith("entry_points.txt"))
        entry_points = archive.read(scripts).decode()
    assert "atlas-mcp = atlas_mcp.cli:main" in entry_points
    assert "atlas-memory-mcp = atlas_mcp.cli:main" in entry_points

    # The README's "once, online" step fills the cache; every later start is offline.
    version, timings["first uvx (downloads)"] = _run(
        [uvx, "--from", str(wheel), "atlas-mcp", "--version"], online
    )
    assert version.strip() == f"atlas-mcp, version {__version__}"

    server = json.loads(EXAMPLE.read_text())["mcpServers"]["memory"]
    assert server["command"] == "uvx" and "--offline" in server["args"]
    args = [str(wheel) if a == CHECKOUT_PLACEHOLDER else a for a in server["args"]]
    assert str(wheel) in args, f"the example no longer has {CHECKOUT_PLACEHOLDER} to point at the install"
    offline = _clean_env(tmp_path, HTTP_PROXY=NO_NETWORK, HTTPS_PROXY=NO_NETWORK, ALL_PROXY=NO_NETWORK)
    named_like_the_distribution, _ = _run(
        [uvx, "--offline", "--from", str(wheel), "atlas-memory-mcp", "--version"], offline
    )
    assert __version__ in named_like_the_distribution

    started = time.perf_counter()
    params = StdioServerParameters(command=uvx, args=args, env=offline | server.get("env", {}))
    async with Client(params) as client:
        found = await call(client, "recall_memory", query="what firmware is my hub on?")
        timings["offline start to first recall"] = time.perf_counter() - started
        assert found["memories"] == []
        tools = await client.list_tools()
        assert sorted(t.name for t in tools.tools) == ["forget_memory", "recall_memory", "write_memory"]

        written = await call(client, "write_memory", text="Sarah's smart hub runs firmware 3.0")
        found = await call(client, "recall_memory", query="what firmware is my hub on?")
        assert [m["id"] for m in found["memories"]] == [written["id"]]
        refused = await call_error(client, "write_memory", text="x", memorytype="episodic")
        assert "did you mean 'memory_type'?" in refused
        assert (await call(client, "forget_memory", memory_id=written["id"]))["deleted"] is True

    store = Path(offline["HOME"]) / ".local" / "share" / "atlas-mcp" / "atlas.db"
    assert store.exists(), "the server did not use the user data directory by default"
    _report(timings)


def test_a_checkout_runs_offline_and_a_change_to_it_is_picked_up(tmp_path: Path):
    """The README's `uvx --from <checkout>`: after the first online run, later starts are offline,
    and an edited checkout is rebuilt (uv's default would keep running the first build)."""
    uvx = _uv_tool("uvx")
    checkout = tmp_path / "atlas-mcp"
    checkout.mkdir()
    shutil.copy(REPO / "pyproject.toml", checkout)
    shutil.copy(REPO / "README.md", checkout)
    shutil.copytree(REPO / "atlas_mcp", checkout / "atlas_mcp", ignore=shutil.ignore_patterns("__pycache__"))
    online = _clean_env(tmp_path)
    offline = _clean_env(tmp_path, HTTP_PROXY=NO_NETWORK, HTTPS_PROXY=NO_NETWORK, ALL_PROXY=NO_NETWORK)
    version = [uvx, "--offline", "--from", str(checkout), "atlas-mcp", "--version"]

    first, _ = _run(version[:1] + version[2:], online)
    assert first.strip() == f"atlas-mcp, version {__version__}"
    init = checkout / "atlas_mcp" / "__init__.py"
    init.write_text(init.read_text().replace(f'"{__version__}"', '"99.0.0"'))
    edited, _ = _run(version, offline)
    assert edited.strip() == "atlas-mcp, version 99.0.0"
