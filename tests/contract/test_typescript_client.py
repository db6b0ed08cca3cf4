"""The server under the official TypeScript MCP client (the SDK Node hosts embed), over stdio.

The client comes with the official memory server that ``scripts/install_peers.sh`` installs
from npm (``scripts/test.sh`` runs it); without Node or that package the test skips.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.importers.peers import peers_dir

CLIENT = Path(__file__).with_name("ts_client.mjs")


def _sdk() -> Path:
    sdk = peers_dir() / "node/node_modules/@modelcontextprotocol/sdk"
    if shutil.which("node") is None or not (sdk / "dist/esm/client/stdio.js").exists():
        pytest.skip("needs Node and @modelcontextprotocol/sdk (bash scripts/install_peers.sh)")
    return sdk


def _run_client(tmp_path: Path) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATLAS_")}
    env |= {"MCP_TS_SDK": str(_sdk()), "ATLAS_DATA_DIR": str(tmp_path), "ATLAS_USER": "nora"}
    env["ATLAS_LOG_LEVEL"] = "WARNING"
    done = subprocess.run(
        ["node", str(CLIENT), sys.executable, "-m", "atlas_mcp", "serve"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(json.loads(done.stdout))


def _structured(result: dict[str, Any]) -> dict[str, Any]:
    assert not result.get("isError"), result
    return dict(result["structuredContent"])


def test_the_typescript_client_writes_recalls_and_is_told_what_it_misspelled(tmp_path: Path) -> None:
    out = _run_client(tmp_path)
    assert out["tools"] == ["forget_memory", "recall_memory", "write_memory"]
    fact_id = _structured(out["fact"])["id"]
    note_id = _structured(out["note"])["id"]
    assert _structured(out["bike"])["memories"][0]["id"] == fact_id
    # The ~90 KB note comes back whole through the pipe, multi-byte characters intact.
    notes = [m for m in _structured(out["all"])["memories"] if m["id"] == note_id]
    assert len(notes) == 1 and len(notes[0]["text"]) == out["long_chars"]
    assert "自転車" in notes[0]["text"] and "vélo" in notes[0]["text"]
    typo = out["typo"]
    assert typo["isError"] and "did you mean 'query'?" in typo["content"][0]["text"]
