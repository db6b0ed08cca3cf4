"""The stdio server chooses the protocol era as the SDK's ``Server.run`` does (``atlas_mcp.mcp.eras``),
without its relay task: the same frames, sent to a server serving through ``eras`` and to one the
SDK serves, get the same response lines, whatever comes before, with or after the first request."""

from __future__ import annotations

import json
import re
import shutil
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from mcp_types.version import LATEST_HANDSHAKE_VERSION, LATEST_MODERN_VERSION

from atlas_mcp.mcp import eras

from .wire import StdioWire

USER = "sarah"
# `atlas-mcp serve` as the SDK serves it: Server.run chooses the era and relays every frame.
SDK_SERVES = (
    "-c",
    "import atlas_mcp.mcp.stdio as s; s.era_serving = lambda: None; "  # noqa: ISC004
    "from atlas_mcp.cli import main; main()",
)
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": LATEST_MODERN_VERSION,
    "io.modelcontextprotocol/clientInfo": {"name": "era-test", "version": "0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
INITIALIZE = {
    "protocolVersion": LATEST_HANDSHAKE_VERSION,
    "capabilities": {},
    "clientInfo": {"name": "era-test", "version": "0"},
}
NOTE = b'{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}\n'
JUNK = b"this is not JSON\n"
# A recall marks what it returns as used, at the time of the call: the only bytes that differ.
USED_AT = re.compile(rb'(\\?"(?:last_used_at|decay_reference)\\?": ?\\?")[^"\\]+')


def _request(request_id: int, method: str, params: dict[str, Any]) -> bytes:
    return (
        json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}).encode() + b"\n"
    )


def _recall(request_id: int, meta: dict[str, Any] | None) -> bytes:
    params: dict[str, Any] = {"name": "recall_memory", "arguments": {"query": "where do I live?"}}
    return _request(request_id, "tools/call", params | ({"_meta": meta} if meta else {}))


HANDSHAKE = [
    JUNK,
    NOTE,
    _request(1, "initialize", INITIALIZE),
    b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n',
    _request(2, "tools/list", {}),
    _recall(3, None),
    _recall(4, ENVELOPE),  # an enveloped request on a handshake connection: refused
    _request(5, "ping", {}),
]
ENVELOPED = [
    JUNK,
    *[NOTE] * 10,  # more frames before the first request than either keeps
    _request(1, "tools/list", {"_meta": ENVELOPE}),
    _recall(2, ENVELOPE),
    _request(3, "initialize", INITIALIZE),  # a handshake on an enveloped connection: refused
    _recall(4, None),  # no envelope on an enveloped connection: refused
    _request(5, "ping", {"_meta": ENVELOPE}),
]
HALF_ENVELOPE = [
    _request(1, "tools/list", {"_meta": {"io.modelcontextprotocol/protocolVersion": "1999-01-01"}})
]
ENVELOPED_INITIALIZE = [
    _request(1, "initialize", INITIALIZE | {"_meta": ENVELOPE}),
    _recall(2, ENVELOPE),
    _recall(3, None),
]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("eras") / "data"
    with StdioWire(root, USER) as wire:
        assert "result" in wire.call_tool("write_memory", {"text": "I live in Lyon.", "about": "home city"})
    return root


def _answers(data: Path, launcher: tuple[str, ...], frames: list[bytes]) -> tuple[list[bytes], int | None]:
    """The response lines to ``frames``, in id order, and how the server exited on end of input."""
    with StdioWire(data, USER, launcher=launcher, handshake=False) as wire:
        for frame in frames:
            wire.send_raw(frame)
            time.sleep(0.01)  # one frame at a time, as a client writes them
        for request_id in sorted(
            {json.loads(f)["id"] for f in frames if f.startswith(b"{") and b'"id"' in f}
        ):
            wire.response(request_id, timeout=60)
        wire.close()
        return [wire.lines[key] for key in sorted(wire.lines)], wire.process.returncode


@pytest.mark.parametrize(
    "frames",
    [HANDSHAKE, ENVELOPED, HALF_ENVELOPE, ENVELOPED_INITIALIZE],
    ids=["handshake", "enveloped", "half-envelope", "enveloped-initialize"],
)
def test_the_era_is_chosen_as_the_sdk_chooses_it(store: Path, tmp_path: Path, frames: list[bytes]) -> None:
    assert eras.era_serving() is not None  # else both servers are the SDK's and this proves nothing
    shutil.copytree(store, tmp_path / "a")
    shutil.copytree(store, tmp_path / "b")
    (ours, exit_code), (sdks, _) = (
        _answers(tmp_path / "a", ("-m", "atlas_mcp"), frames),
        _answers(tmp_path / "b", SDK_SERVES, frames),
    )
    assert [USED_AT.sub(rb"\1T", line) for line in ours] == [USED_AT.sub(rb"\1T", line) for line in sdks]
    assert len(ours) == sum(b'"id"' in f for f in frames)
    # It left on its own when the input ended (``close`` kills a server still there after 20 s).
    # Not necessarily with 0: a process whose input ends while the model still loads may abort
    # at exit ("terminate called without an active exception"), seen with the SDK serving.
    assert exit_code != -signal.SIGKILL


def test_a_client_that_sends_no_request_is_served_until_it_leaves(store: Path, tmp_path: Path) -> None:
    shutil.copytree(store, tmp_path / "a")
    with StdioWire(tmp_path / "a", USER, handshake=False) as wire:
        wire.send_raw(JUNK + NOTE * 12)
        wire.close()
        assert wire.process.returncode != -signal.SIGKILL  # it left on its own
