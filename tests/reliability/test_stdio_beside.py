"""A recall the stdio reader answers beside the SDK's dispatcher (``atlas_mcp.mcp.beside``) gets
the bytes the dispatcher would write, in both protocol eras: results, the tool's errors, a
crash, the SDK's refusals, cancellation in flight, duplicate ids and the end of input; and the
dispatcher never sees it (the recalls of ``-m atlas_mcp`` are counted where it dispatches)."""

from __future__ import annotations

import json
import re
import selectors
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from mcp_types.version import LATEST_HANDSHAKE_VERSION, LATEST_MODERN_VERSION

from atlas_mcp.mcp import beside

from .wire import StdioWire

USER = "sarah"
# Recalls that misbehave on cue, the same in every server under test: by the query.
CUES = (
    "import time, pydantic, atlas_mcp.service as v, atlas_mcp.mcp.lane as l\n"
    "from mcp.shared.exceptions import MCPError\n"
    "recall, run = v.MemoryService.recall, l._RecallLane.run\n"
    "def cued(self, user, query, *a, **k):\n"
    "    if query == 'crash': raise RuntimeError('boom')\n"
    "    if query == 'protocol': raise MCPError(-32603, 'protocol trouble')\n"
    "    if query.startswith('slow'): time.sleep(1.0)\n"
    "    return recall(self, user, query, *a, **k)\n"
    "async def lane_run(self, prepared, **options):\n"
    "    if prepared.arguments['query'] == 'bug': raise ValueError('a bug in the lane')\n"
    "    if prepared.arguments['query'] == 'invalid': pydantic.TypeAdapter(int).validate_python('x')\n"
    "    return await run(self, prepared, **options)\n"
    "v.MemoryService.recall, l._RecallLane.run = cued, lane_run\n"
    # Each request the SDK's dispatcher is handed, named on stderr.
    "import sys, mcp.shared.jsonrpc_dispatcher as d\n"
    "dispatch = d.JSONRPCDispatcher._dispatch_request\n"
    "async def seen(self, req, *a):\n"
    "    print('DISPATCHED', req.method, (req.params or {}).get('name'), file=sys.stderr, flush=True)\n"
    "    return await dispatch(self, req, *a)\n"
    "d.JSONRPCDispatcher._dispatch_request = seen\n"
)
OURS = ("-c", CUES + "from atlas_mcp.cli import main; main()")
# Every request through the SDK's dispatcher: no era chosen beside it, so no recall taken there.
SDKS = ("-c", CUES + "import atlas_mcp.mcp.stdio as s; s.era_serving = lambda: None\n"
        "from atlas_mcp.cli import main; main()")  # fmt: skip
# Our reader and era choice, but every recall through the dispatcher.
OFF = ("-c", CUES + "import atlas_mcp.mcp.beside as b; b.available = False\n"
       "from atlas_mcp.cli import main; main()")  # fmt: skip
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": LATEST_MODERN_VERSION,
    "io.modelcontextprotocol/clientInfo": {"name": "beside-test", "version": "0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
INITIALIZE = {
    "protocolVersion": LATEST_HANDSHAKE_VERSION,
    "capabilities": {},
    "clientInfo": {"name": "beside-test", "version": "0"},
}
USED_AT = rb'(\\?"(?:last_used_at|decay_reference)\\?": ?\\?")[^"\\]+'


def _frame(request_id: Any, method: str, params: dict[str, Any], meta: dict[str, Any] | None) -> bytes:
    params = params | ({"_meta": meta} if meta is not None else {})
    message = {"jsonrpc": "2.0", "method": method, "params": params}
    return json.dumps(message | ({} if request_id is None else {"id": request_id})).encode() + b"\n"


def _recall(
    request_id: Any, meta: dict[str, Any] | None, query: str = "where do I live?", **extra: Any
) -> bytes:
    arguments = {"query": query} | extra
    return _frame(request_id, "tools/call", {"name": "recall_memory", "arguments": arguments}, meta)


def _cancel(request_id: Any) -> bytes:
    return _frame(None, "notifications/cancelled", {"requestId": request_id}, None)


def _recalls(meta: dict[str, Any] | None) -> list[bytes]:
    """Recalls of every outcome: answered, refused by the tool, crashed, failed in each way the
    dispatcher words, declined by the lane's checks, with odd ids and protocol ``_meta``."""
    return [
        _recall(10, meta),
        _recall(11, meta, as_of="not a date"),
        _recall(12, meta, "crash"),
        _recall(13, meta, "protocol"),
        _recall(14, meta, "bug"),
        _recall(15, meta, "invalid"),
        _recall(16, meta, colour="blue"),  # an argument it does not take
        _recall(17, meta, k=0),
        _recall("18", meta),
        _recall("eighteen", meta),
        _recall(19, (meta or {}) | {"progressToken": 7}),
        _recall(21, meta, min_relevance=0, explain=True),  # every memory, with its score's parts
        _recall(
            20, (meta or {}) | {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
        ),
    ]


HANDSHAKE = [
    _recall(1, None),  # before the handshake: refused
    _frame(2, "initialize", INITIALIZE, None),
    _frame(None, "notifications/initialized", {}, None),
    *_recalls(None),
    _recall(30, ENVELOPE),  # an envelope on a handshake connection: refused
]
ENVELOPED = [
    _frame(1, "tools/list", {}, ENVELOPE),
    *_recalls(ENVELOPE),
    _recall(30, None),  # no envelope: refused
    _recall(31, ENVELOPE | {"io.modelcontextprotocol/protocolVersion": "1999-01-01"}),
    _recall(32, {k: v for k, v in ENVELOPE.items() if "clientCapabilities" not in k}),
]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("beside") / "data"
    with StdioWire(root, USER) as wire:
        assert "result" in wire.call_tool("write_memory", {"text": "I live in Lyon.", "about": "home city"})
        note = {"text": 'Zoé\'s café in Zürich \u2014 \u6771\u4eac \U0001f600, "quoted" \\ / tab\there.'}
        assert "result" in wire.call_tool("write_memory", note)
    return root


def _session(
    data: Path, launcher: tuple[str, ...], steps: list[bytes | float | int], log: Path, answers: int | None
) -> list[bytes]:
    """Every line the server writes while ``steps`` are sent (a float: seconds to wait, an int:
    wait for that many lines), and once ``answers`` lines came (None: at once) the input ends,
    until it leaves on its own; sorted, the time a recall was made masked."""
    with StdioWire(data, USER, launcher=launcher, handshake=False, stderr_path=log) as wire:
        out = bytearray()
        selector = selectors.DefaultSelector()
        selector.register(wire.process.stdout, selectors.EVENT_READ)

        def read_until(lines: int | None) -> None:
            deadline = time.monotonic() + 30
            while (lines is None or out.count(b"\n") < lines) and time.monotonic() < deadline:
                selector.select(1)
                chunk = wire.process.stdout.read(1 << 20)
                if chunk == b"":
                    return
                out.extend(chunk or b"")

        for step in steps:
            if isinstance(step, float):
                time.sleep(step)
            elif isinstance(step, int):
                read_until(step)
            else:
                wire.send_raw(step)
                time.sleep(0.01)  # one frame at a time, as a client writes them
        if answers is not None:
            read_until(answers)
        wire.process.stdin.close()
        read_until(None)
        selector.close()
        assert wire.process.wait(timeout=30) is not None  # it left on its own
    return sorted(re.sub(USED_AT, rb"\1T", line) for line in bytes(out).splitlines())


def _both(
    store: Path,
    tmp_path: Path,
    steps: list[bytes | float | int],
    answers: int | None,
    base: tuple[str, ...] = SDKS,
    control: bool = True,
) -> tuple[list[bytes], list[bytes], str]:
    """The lines ``-m atlas_mcp`` and ``base`` write for ``steps``, and the former's stderr."""
    shutil.copytree(store, tmp_path / "a")
    shutil.copytree(store, tmp_path / "b")
    ours = _session(tmp_path / "a", OURS, steps, tmp_path / "a.log", answers)
    based = _session(tmp_path / "b", base, steps, tmp_path / "b.log", answers)
    if control:
        assert "DISPATCHED tools/call recall_memory" in (tmp_path / "b.log").read_text()
    return ours, based, (tmp_path / "a.log").read_text()


@pytest.mark.parametrize("frames", [HANDSHAKE, ENVELOPED], ids=["handshake", "envelope"])
def test_recalls_answered_beside_the_dispatcher_get_its_bytes(
    store: Path, tmp_path: Path, frames: list[bytes]
) -> None:
    assert beside.available  # else both servers answer through the dispatcher: nothing proven
    answers = sum(b'"id"' in f for f in frames)
    ours, sdks, log = _both(store, tmp_path, list(frames), answers)
    assert ours == sdks
    assert len(ours) == answers
    assert "Zürich \u2014 \u6771\u4eac".encode() in b"".join(ours)  # non-ASCII as written, unescaped
    # Beside it: 10-15, 18, 19 and 21 (answered, or failing in the tool or the lane); the rest
    # (refused, declined by the lane's checks, traced) reached the dispatcher.
    dispatched = log.count("DISPATCHED tools/call recall_memory")
    assert dispatched == (5 if frames is HANDSHAKE else 6)


SLOW = "slow: where do I live?"
RACED = rb'(\\?"(?:use_count|score|relevance)\\?": ?)[0-9.]+'


def _opening(meta: dict[str, Any] | None) -> list[bytes | float | int]:
    """The session opened, and one recall answered (the first waits for the server's warm-up)."""
    if meta is None:
        first = [
            _frame(1, "initialize", INITIALIZE, None),
            _frame(None, "notifications/initialized", {}, None),
        ]
    else:
        first = [_frame(1, "tools/list", {}, ENVELOPE)]
    return [*first, _recall(2, meta), 2]


@pytest.mark.parametrize("meta", [None, ENVELOPE], ids=["handshake", "envelope"])
def test_cancelled_and_duplicated_recalls_end_as_the_dispatchers_do(
    store: Path, tmp_path: Path, meta: dict[str, Any] | None
) -> None:
    steps = [
        *_opening(meta),
        _recall(40, meta, SLOW),  # cancelled in its thread: never answered
        _recall(41, meta, SLOW),  # answered next to it
        0.3,
        _cancel(40),
        _recall(42, meta, SLOW),  # one id twice: a cancel reaches the newest
        _recall(42, meta, SLOW),
        0.3,
        _cancel("42"),
        _recall(44, meta, SLOW),  # its id then taken by another request
        _frame(44, "tools/list", {}, meta),
        4,  # the list answered (and 41)
        _cancel(44),  # its id is no longer in flight: cancels neither
    ]
    ours, sdks, log = _both(store, tmp_path, steps, answers=6)
    # Recalls that run at once mark what they return as used in either order: the counts and
    # what they feed (score, relevance) are masked here, not in the identity test above.
    assert [re.sub(RACED, rb"\1N", line) for line in ours] == [re.sub(RACED, rb"\1N", line) for line in sdks]
    ids = [json.loads(line).get("id") for line in ours]
    assert sorted(ids) == [1, 2, 41, 42, 44, 44]
    assert "DISPATCHED tools/call" not in log


@pytest.mark.parametrize("meta", [None, ENVELOPE], ids=["handshake", "envelope"])
def test_recalls_in_flight_when_the_input_ends_end_as_the_dispatchers_do(
    store: Path, tmp_path: Path, meta: dict[str, Any] | None
) -> None:
    """A recall in its thread when the input ends is answered, as the dispatcher answers it.
    Recalls read with the end of input race it, beside the dispatcher as in it: each gets one
    line, its result or the dispatcher's "Connection closed", never two, and the server leaves."""
    steps = [*_opening(meta), _recall(50, meta, SLOW), 0.3]
    ours, sdks, log = _both(store, tmp_path, steps, answers=None)
    assert ours == sdks and '"id":50,"result"' in str(ours)
    steps = [*_opening(meta), _recall(51, meta, SLOW) + _recall(52, meta)]
    ours, based, log = _both(store, tmp_path / "cut", steps, answers=None, base=OFF)
    for lines in (ours, based):
        ends = {message["id"]: message for message in map(json.loads, lines) if message["id"] in (51, 52)}
        assert len(lines) == 4 and sorted(ends) == [51, 52]
        assert all("result" in m or m["error"]["message"] == "Connection closed" for m in ends.values())
    assert "DISPATCHED tools/call" not in log
    # A client whose only frame is a recall, its input ended at once (before the era is chosen
    # the recall may already be read with the end): one line for it, and the server leaves.
    steps = [_recall(53, meta)]
    ours, based, _log = _both(store, tmp_path / "only", steps, answers=None, base=OFF, control=False)
    for lines in (ours, based):
        (only,) = map(json.loads, lines)
        assert only["id"] == 53 and ("result" in only or "error" in only)


class _Failing:
    """A lane whose check fails unexpectedly."""

    def prepare(self, ctx: Any) -> Any:
        raise RuntimeError("a check that breaks")

    async def run(self, prepared: Any) -> dict[str, Any]:
        raise AssertionError("never run")


def _beside_of(lane: _Failing) -> tuple[beside.Beside, list[Any], Any]:
    """A 2026-era ``Beside`` over a chain of the outermost middleware and ``lane``, the chain,
    and a recall request for it."""
    from mcp_types import JSONRPCRequest

    from atlas_mcp.mcp.ahead import Ahead

    chain: list[Any] = []
    chain += [Ahead(lane, chain, "recall_memory"), lane]
    taking = beside.Beside.for_chain(chain, write=None)  # type: ignore[arg-type]
    assert taking is not None
    taking.era = beside.MODERN
    params = {"name": "recall_memory", "arguments": {"query": "where do I live?"}, "_meta": ENVELOPE}
    return taking, chain, JSONRPCRequest(jsonrpc="2.0", id=7, method="tools/call", params=params)


def test_a_check_that_breaks_leaves_the_recall_to_the_dispatcher() -> None:
    taking, _, request = _beside_of(_Failing())
    assert taking.took(request) is False  # the reader reads on; the dispatcher answers it


class _Taking(_Failing):
    def prepare(self, ctx: Any) -> Any:
        return "prepared"


def test_a_layer_added_before_the_outermost_one_gets_the_recall() -> None:
    taking, chain, request = _beside_of(_Taking())
    assert taking._prepared(request) == "prepared"
    chain.insert(0, object())  # added while serving: it must see every call
    assert taking._prepared(request) is None
