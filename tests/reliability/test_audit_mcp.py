"""The audit trail through real clients: writes and forgets over HTTP with two tokens of one
user and over stdio, read back with ``atlas-mcp audit`` as a subprocess. Each entry names the
tool and the credential (name and fingerprint, never the token) and a forget keeps no text."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from foundation.mcp_helpers import call, server_env, stdio_client

from atlas_mcp.scopes import token_fingerprint

from .http_server import http_server, mcp_session

pytestmark = pytest.mark.slow

FULL, NOTES = "alice-audit-full-token-61c2", "alice-audit-notes-token-0b9e"


def _audit(data_dir: Path, *args: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "atlas_mcp", "audit", *args, "--json"],
        env=server_env(data_dir), capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    return json.loads(done.stdout)


async def test_http_and_stdio_changes_are_audited_with_their_credential(tmp_path: Path) -> None:
    data = tmp_path / "data"
    config = {
        "users": {
            "alice": {
                "token_sha256": hashlib.sha256(FULL.encode()).hexdigest(),
                "tokens": {
                    "notes": {
                        "sha256": hashlib.sha256(NOTES.encode()).hexdigest(),
                        "scopes": ["recall", "write"],
                    }
                },
            }
        }
    }
    with http_server(data, config) as (base, _log):
        async with mcp_session(base + "/mcp", NOTES) as notes:
            old = await call(notes, "write_memory", text="Alice's office is on floor 3")
            new = await call(
                notes, "write_memory", text="Alice's office moved to floor 5", supersedes_id=old["id"]
            )
        async with mcp_session(base + "/mcp", FULL) as full:
            await call(full, "forget_memory", memory_id=old["id"])
        trail = _audit(data, "--user", "alice")["entries"]
    async with stdio_client(data, "alice") as desktop:
        last = await call(desktop, "write_memory", text="Alice drinks oat milk")
    assert [(e["action"], e["memory_id"], e["via"]) for e in trail] == [
        ("write", old["id"], "write_memory"),
        ("write", new["id"], "write_memory"),
        ("supersede", old["id"], "write_memory"),
        ("forget", old["id"], "forget_memory"),
    ]
    assert [e["credential"] for e in trail] == [f"notes ({token_fingerprint(NOTES)})"] * 3 + [
        f"token ({token_fingerprint(FULL)})"
    ]
    printed = json.dumps(trail)
    assert FULL not in printed and NOTES not in printed and "floor 3" not in printed
    (entry,) = _audit(data, "--user", "alice", "--since", trail[-1]["at"])["entries"]
    assert (entry["memory_id"], entry["credential"]) == (last["id"], "stdio")
