"""The stdio transport read and written on the event loop (``atlas_mcp.mcp.stdio``): the same
lines as the SDK's text wrapper, replies larger than a pipe holds, and no worker thread per
read or write."""

from __future__ import annotations

import asyncio
import io
import itertools
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from atlas_mcp.mcp.stdio import QUEUED_LINES, Lines

from .wire import StdioWire, tool_payload

# Bytes a client may send: JSON-ish text, newlines of every kind, multi-byte and invalid UTF-8.
PIECES = st.sampled_from([b"\n", b"\r", b"\r\n", b"{", b'"a"', b"\xc3\xa9", b"\xe2\x82", b"\xff", b" ", b"x"])
WIRE = st.lists(PIECES, max_size=40).map(b"".join)


def _read(chunks: list[bytes]) -> list[str]:
    async def read() -> list[str]:
        lines = Lines()
        for chunk in chunks:
            lines.data_received(chunk)
        lines.eof_received()
        return [line async for line in lines]

    return asyncio.run(read())


@settings(max_examples=300, deadline=None)
@given(WIRE, st.lists(st.integers(min_value=0, max_value=200), max_size=6))
def test_lines_are_the_sdk_text_wrappers_lines(data: bytes, cuts: list[int]) -> None:
    """Whatever the chunks the pipe delivers, the lines are those the SDK's text wrapper reads
    (universal newlines, invalid UTF-8 as U+FFFD, a last line without its newline)."""
    bounds = sorted({min(c, len(data)) for c in cuts} | {0, len(data)})
    chunks = [data[a:b] for a, b in itertools.pairwise(bounds) if b > a]
    expected = list(io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="replace"))
    assert _read(chunks) == expected


@pytest.fixture
def wire(tmp_path: Path):
    with StdioWire(tmp_path / "data", "sarah", tmp_path / "server.log") as served:
        yield served


# ``atlas-mcp serve`` as ``python -m atlas_mcp`` runs it, each thread it starts named on stderr
# as it starts (observed only: the thread starts as before).
OBSERVED = (
    "-c",
    (
        "import runpy, sys, threading\n"
        "start = threading.Thread.start\n"
        "def observed(thread):\n"
        "    print('thread started:', type(thread).__name__, file=sys.stderr, flush=True)\n"
        "    start(thread)\n"
        "threading.Thread.start = observed\n"
        "runpy.run_module('atlas_mcp', run_name='__main__')"
    ),
)


@pytest.mark.slow
def test_calls_one_after_another_use_one_worker_thread(tmp_path: Path) -> None:
    """Only the service call leaves the event loop: the SDK's wrapper kept a worker thread
    blocked reading stdin and took others to write and flush each reply (2-3 in all)."""
    log = tmp_path / "server.log"
    with StdioWire(tmp_path / "data", "sarah", log, launcher=OBSERVED) as wire:
        for n in range(3):
            assert not tool_payload(wire.call_tool("write_memory", {"text": f"Sarah's locker {n} is blue"}))[
                0
            ]
        for _ in range(5):
            assert not tool_payload(wire.call_tool("recall_memory", {"query": "which locker is blue"}))[0]
        wire.process.stdin.close()  # the client goes away: the server ends, cleanly
        assert wire.process.wait(timeout=20) == 0
    started = [
        line.split()[-1] for line in log.read_text().splitlines() if line.startswith("thread started:")
    ]
    assert started.count("WorkerThread") == 1, started


@pytest.mark.slow
def test_lines_and_replies_larger_than_a_pipe(wire: StdioWire) -> None:
    """A request line longer than one read and replies longer than the pipe's buffer arrive
    whole, and the server answers the next call."""
    too_long = "a" * 100_000
    is_error, payload = tool_payload(wire.call_tool("write_memory", {"text": too_long}))
    assert is_error and "32000" in json.dumps(payload)
    texts = [
        f"Sarah's notebook {n} says: " + " ".join(f"word{n}x{i}" for i in range(2_500)) for n in range(4)
    ]
    for text in texts:
        assert not tool_payload(wire.call_tool("write_memory", {"text": text, "memory_type": "episodic"}))[0]
    is_error, payload = tool_payload(
        wire.call_tool("recall_memory", {"query": "Sarah's notebook", "k": 10, "min_relevance": 0})
    )
    assert not is_error
    assert sorted(m["text"] for m in payload["memories"]) == sorted(texts)
    assert len(json.dumps(payload)) > 65_536  # the reply carries it twice (text and structured)
    assert not tool_payload(wire.call_tool("recall_memory", {"query": "notebook 2"}))[0]


@pytest.mark.slow
@pytest.mark.parametrize("pairs", [2, 1], ids=["a socket pair per stream", "one socket both ways"])
def test_sockets_as_stdin_and_stdout(tmp_path: Path, pairs: int) -> None:
    """libuv (Node clients) hands a child a socket pair per stream: served on the loop like
    pipes. One socket for both streams keeps the SDK's wrapper; both answer every call."""
    into, out = socket.socketpair(), (socket.socketpair() if pairs == 2 else None)
    child_in, child_out = into[1], (out[1] if out else into[1])
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATLAS_")}
    env |= {"ATLAS_DATA_DIR": str(tmp_path / "data"), "ATLAS_USER": "sarah"}
    server = subprocess.Popen(
        [sys.executable, "-m", "atlas_mcp", "serve"], stdin=child_in, stdout=child_out, env=env
    )
    for end in {child_in, child_out}:
        end.close()
    replies = (out[0] if out else into[0]).makefile("rb")

    def ask(message_id: int, method: str, params: dict[str, object]) -> dict[str, object]:
        into[0].sendall(
            json.dumps({"jsonrpc": "2.0", "id": message_id, "method": method, "params": params}).encode()
            + b"\n"
        )
        return json.loads(replies.readline())

    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
    assert "result" in ask(1, "initialize", hello)
    into[0].sendall(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
    for n in range(3):
        reply = ask(
            2 + n, "tools/call", {"name": "write_memory", "arguments": {"text": f"Sarah's bike {n} is red"}}
        )
        assert not tool_payload(reply)[0]
    reply = ask(
        9,
        "tools/call",
        {"name": "recall_memory", "arguments": {"query": "Sarah's red bike", "min_relevance": 0}},
    )
    assert len(tool_payload(reply)[1]["memories"]) == 3
    into[0].shutdown(socket.SHUT_WR)
    assert server.wait(timeout=20) == 0
    replies.close()
    for end in {into[0], (out or into)[0]}:
        end.close()


class _ServerWithoutLowLevel:
    """An SDK server as a later 2.x might shape it: no ``_lowlevel_server`` to hand our ends."""

    def __init__(self) -> None:
        self.served_by_sdk = False

    async def run_stdio_async(self) -> None:
        self.served_by_sdk = True


def test_a_server_without_the_low_level_server_is_served_by_the_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    from atlas_mcp.mcp import stdio

    monkeypatch.setattr(stdio, "_separate_pipes", lambda read, write: True)  # as under a client
    server = _ServerWithoutLowLevel()
    asyncio.run(stdio.run_stdio(server))  # type: ignore[arg-type]
    assert server.served_by_sdk


@pytest.mark.slow
def test_a_flood_of_requests_is_read_with_backpressure(wire: StdioWire) -> None:
    """More lines than are read ahead (reading pauses, then resumes) and more reply bytes than
    the pipe holds while the client is not reading: every request is answered once."""
    ids = [wire.new_id() for _ in range(4 * QUEUED_LINES)]
    for n, request_id in enumerate(ids):
        method = "tools/list" if n % 2 else "ping"
        wire.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": {}})
    answered = [wire.response(request_id, timeout=60) for request_id in ids]
    assert all("result" in reply for reply in answered)
    assert sum(len(json.dumps(reply)) for reply in answered) > 4 * 65_536
