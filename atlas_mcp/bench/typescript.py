"""Recalls through the official TypeScript MCP client (``bench --ts-client``).

The Python SDK's client spends ~1.3-1.8 ms of its own CPU per recall on this machine (parsing
the reply into models, then validating the structured result against the tool's output schema
with ``jsonschema``); a Node host's client (``@modelcontextprotocol/sdk``, what
``scripts/install_peers.sh`` installs) does the same work in compiled validators. Timing the
same recalls through it says what a Node host sees. Needs ``node`` and the SDK package; without
them the bench says why and goes on without these numbers.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from . import measure

SCRIPT = Path(__file__).with_name("ts_recalls.mjs")
SDK_PACKAGE = Path("node/node_modules/@modelcontextprotocol/sdk")  # under the peers directory
TIMEOUT_S = 900.0


def default_sdk() -> Path:
    """Where ``scripts/install_peers.sh`` puts the SDK when run from this checkout: ``./.peers``
    (an install elsewhere is named with ``--ts-sdk``)."""
    return Path(".peers") / SDK_PACKAGE


def missing(sdk: Path) -> str | None:
    """Why the TypeScript client cannot run, or None when it can."""
    if shutil.which("node") is None:
        return "node is not on PATH"
    if not (sdk / "dist/esm/client/stdio.js").is_file():
        return f"no @modelcontextprotocol/sdk at {sdk} (bash scripts/install_peers.sh, or --ts-sdk)"
    return None


def recalls(run: measure.ServerRun, sdk: Path, queries: list[str], warmup: list[str]) -> dict[str, Any]:
    """``queries`` recalled one after another through the TypeScript client, after ``warmup``
    and once the server is idle (as the Python client's recalls): latency, the server's CPU
    per recall (Linux) and the client's own CPU per recall."""
    with tempfile.TemporaryDirectory(prefix="atlas-bench-ts-") as tmp:
        asked = Path(tmp) / "queries.json"
        asked.write_text(json.dumps({"warmup": warmup, "queries": queries}))
        env = run.env() | {"MCP_TS_SDK": str(sdk.resolve())}
        done = subprocess.run(
            ["node", str(SCRIPT), str(asked), sys.executable, "-m", measure.SERVER_MODULE, "serve"],
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            check=False,
        )
    if done.returncode != 0:
        raise RuntimeError(f"the TypeScript client failed ({done.returncode}): {done.stderr[-2000:]}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    result: dict[str, Any] = {
        "recall_ms": measure.Latency.of([ms / 1000.0 for ms in out["ms"]]).as_dict(),
        "client_cpu_ms": round(out["client_cpu_ms"] / len(out["ms"]), 2),
    }
    before, after = out["server_cpu_s"]
    if before is not None and after is not None:
        result["recall_server_cpu_ms"] = round((after - before) * 1000 / len(out["ms"]), 2)
    return result
