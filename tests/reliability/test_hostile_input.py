"""Hostile input through real MCP sessions: every case ends in a result or a clear tool error,
the server stays up, and nothing but the caller's own data changes (and only as asked)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import anyio
import pytest
from anyio.from_thread import start_blocking_portal
from hypothesis import HealthCheck, given, settings
from mcp import Client

from atlas_mcp.engines.embedded.engine import EmbeddedEngine
from atlas_mcp.inference.embedder import default_embedder
from atlas_mcp.mcp.server import build_server
from atlas_mcp.service import MemoryService

from .conftest import database, integrity, scaled, seed, snapshot
from .hostile import arguments, check_call
from .wire import StdioWire, tool_payload

ATTACKER, VICTIM = "mallory", "bob"
CATALOG = [{"id": "cat-router", "title": "Router X1", "text": "The X1 router resets with a pin."}]
HOSTILE_SETTINGS = {
    "deadline": None,
    "suppress_health_check": [
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
    ],
}
CASES_TRIED: dict[str, int] = {}  # printed, so a run at scale reports how much it tried


def _count(transport: str, is_error: bool) -> None:
    key = f"{transport} {'refused' if is_error else 'ok'}"
    CASES_TRIED[key] = CASES_TRIED.get(key, 0) + 1


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, list[str]]]:
    data_dir = tmp_path_factory.mktemp("hostile")
    ids = seed(
        data_dir,
        {
            VICTIM: [
                "Bob's bank branch is Leeds Central",
                "Bob lives in Leeds",
                "Bob is allergic to penicillin",
            ],
            ATTACKER: ["Mallory likes chess", "Mallory drives a van", "Mallory works nights"],
        },
        CATALOG,
    )
    return data_dir, ids


@pytest.fixture(scope="module")
def stdio_server(store):
    data_dir, _ = store
    with StdioWire(data_dir, ATTACKER, data_dir / "server.log") as wire:
        yield wire


@pytest.mark.slow
def test_hostile_arguments_over_stdio(store, stdio_server: StdioWire) -> None:
    data_dir, ids = store
    db = database(data_dir)
    victim_before = {i: r for i, r in snapshot(db).items() if r["user_id"] != ATTACKER}

    @settings(max_examples=scaled(80), **HOSTILE_SETTINGS)
    @given(arguments(ids[ATTACKER], ids[VICTIM], ["cat-router"]))
    def one_call(call) -> None:
        tool, args = call
        before = snapshot(db)
        is_error, payload = tool_payload(stdio_server.call_tool(tool, args))
        check_call(tool, is_error, payload, before, snapshot(db), ATTACKER)
        assert stdio_server.alive
        if tool == "recall_memory" and not is_error:
            uses_recorded(db, payload, before)
        _count("stdio", is_error)

    one_call()
    after = snapshot(db)
    assert {i: r for i, r in after.items() if r["user_id"] != ATTACKER} == victim_before
    assert stdio_server.alive and integrity(db) == "ok"
    print(f"hostile stdio cases: {CASES_TRIED}")


def uses_recorded(db: Path, payload: dict, before: dict[str, dict]) -> None:
    """Over stdio a recall records its use just after its reply (``atlas_mcp/uses.py``): wait
    until the store holds the use counts the reply showed, so the next call's "before" is the
    store as this call left it (and a use that is never recorded fails here)."""
    replied = {
        m["id"]: m["use_count"]
        for m in payload["memories"]
        if m["id"] in before and "use_count" in m and m["use_count"] != before[m["id"]]["use_count"]
    }
    deadline = time.monotonic() + 10
    while any(snapshot(db)[i]["use_count"] != n for i, n in replied.items()):
        assert time.monotonic() < deadline, "a recall's use was never recorded"
        time.sleep(0.005)


@pytest.mark.slow
def test_bytes_no_client_would_send(store, stdio_server: StdioWire) -> None:
    """Invalid UTF-8, lone-surrogate escapes, broken JSON and junk lines: the server stays up."""
    data_dir, _ = store
    db = database(data_dir)
    before = snapshot(db)
    junk = [
        b"{not json\n",
        b"\xff\xfe\x00garbage\n",
        (
            b'{"jsonrpc": "2.0", "id": "x", "method": "tools/call", "params": {"name": "write_memory", '
            b'"arguments": {"text": "lone \\ud800 surrogate"}}}\n'
        ),
        b'{"jsonrpc": "2.0", "id": "y", "method": "tools/call", "params": null}\n',
        b'{"jsonrpc": "2.0", "id": "z", "method": "no/such/method", "params": {}}\n',
        b"[]\n",
        b"\n",
        b'{"jsonrpc": "2.0", "id": {"nested": 1}, "method": "tools/call"}\n',
    ]
    for line in junk:
        stdio_server.send_raw(line)
    assert snapshot(db) == before, "junk lines wrote something"
    # Invalid UTF-8 inside a valid request is decoded with U+FFFD and stored cleanly.
    stdio_server.send_raw(
        b'{"jsonrpc": "2.0", "id": 424242, "method": "tools/call", "params": {"name": "write_memory", '
        b'"arguments": {"text": "invalid \xff\xfe bytes in a fact"}}}\n'
    )
    is_error, payload = tool_payload(stdio_server.response(424242, timeout=60))
    assert not is_error, payload
    assert snapshot(db)[payload["id"]]["text"] == "invalid \ufffd\ufffd bytes in a fact"
    # Ask for what was just written (the hostile-arguments test may have forgotten the rest, and
    # recall returns nothing for a query nothing stored matches).
    is_error, payload = tool_payload(stdio_server.call_tool("recall_memory", {"query": "bytes in a fact"}))
    assert not is_error and payload["memories"], "the server stopped answering after junk input"
    assert stdio_server.alive


@pytest.fixture(scope="module")
def in_process(tmp_path_factory: pytest.TempPathFactory):
    """An in-memory MCP session: the one transport that hands lone surrogates to the tools as-is."""
    data_dir = tmp_path_factory.mktemp("hostile-inproc")
    ids = seed(data_dir, {VICTIM: ["Bob's locker code is 88"], ATTACKER: ["Mallory owns a cat"]})
    service = MemoryService(EmbeddedEngine(database(data_dir), default_embedder()))
    with start_blocking_portal() as portal:
        client = portal.wrap_async_context_manager(Client(build_server(service, ATTACKER)))
        with client as session:
            yield portal, session, data_dir, ids
    service.close()


@pytest.mark.slow
def test_hostile_arguments_with_surrogates_in_process(in_process) -> None:
    portal, session, data_dir, ids = in_process
    db = database(data_dir)

    @settings(max_examples=scaled(60), **HOSTILE_SETTINGS)
    @given(arguments(ids[ATTACKER], ids[VICTIM], [], allow_surrogates=True))
    def one_call(call) -> None:
        tool, args = call
        before = snapshot(db)
        result = portal.call(_call_within, session, tool, args)
        text = " ".join(getattr(c, "text", "") for c in result.content)
        payload = text if result.is_error else result.structured_content
        check_call(tool, result.is_error, payload, before, snapshot(db), ATTACKER)
        if not result.is_error:
            json.dumps(payload).encode("utf-8")  # every result can go out over a JSON transport
        _count("in_process", result.is_error)

    one_call()
    assert integrity(db) == "ok"
    print(f"hostile in-process cases: {CASES_TRIED}")


async def _call_within(session: Client, tool: str, args):
    with anyio.fail_after(60):  # a hung call fails the test instead of hanging it
        return await session.call_tool(tool, args)


def test_surrogates_in_metadata_and_step_tools_are_replaced(service: MemoryService) -> None:
    """Regression: a lone surrogate in metadata crashed the write with an unexpected error, and one
    in a step's tool name was stored and later broke every JSON response that carried it."""
    fact = service.write("alice", "likes tea", metadata={"note": "v\ud800"})
    playbook = service.write(
        "alice", "reset router", "procedural", steps=[{"instruction": "hold pin", "tool": "t\udfff"}]
    )
    stored = service.get("alice", fact.id)
    assert stored.metadata == {"note": "v?"}
    assert service.get("alice", playbook.id).steps[0].tool == "t?"
