"""Eight server processes on one data directory, as eight desktop clients would start them:
writing and recalling at once, with no 'database is locked', no lost write, and each process
seeing the others' writes on its next recall."""

from __future__ import annotations

import sys
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from .conftest import database, integrity, scaled, snapshot
from .wire import server_env

PROCESSES = 8
USERS = ("ana", "ben", "cai", "dee")  # two processes per user: siblings must see each other


@dataclass
class Ledger:
    acked: dict[str, tuple[str, str]] = field(default_factory=dict)  # id -> (user, codeword)
    latest: dict[int, tuple[str, str]] = field(default_factory=dict)  # process -> (id, codeword)
    recalled: list[tuple[str, str]] = field(default_factory=list)  # (caller, id) of every recall hit
    recalls: int = 0
    cross_process_checks: int = 0


def _user(process: int) -> str:
    return USERS[process % len(USERS)]


def _sibling(process: int) -> int:
    return (process + len(USERS)) % PROCESSES


async def _worker(process: int, client: Client, ledger: Ledger, deadline: float) -> None:
    n = 0
    while time.monotonic() < deadline:
        n += 1
        codeword = f"zq{process}x{n}k"
        result = await client.call_tool("write_memory", {"text": f"process {process} noted {codeword}"})
        assert not result.is_error, result.content
        ledger.acked[result.structured_content["id"]] = (_user(process), codeword)
        ledger.latest[process] = (result.structured_content["id"], codeword)

        seen = ledger.latest.get(_sibling(process))  # acknowledged before this recall is sent
        query = seen[1] if seen else codeword
        result = await client.call_tool("recall_memory", {"query": query, "k": 5})
        assert not result.is_error, result.content  # a 'database is locked' would surface here
        ids = [m["id"] for m in result.structured_content["memories"]]
        ledger.recalls += 1
        if seen:
            assert seen[0] in ids, f"process {process} did not see its sibling's write {seen}"
            ledger.cross_process_checks += 1
        ledger.recalled.extend((_user(process), memory_id) for memory_id in ids)


@pytest.mark.slow
async def test_eight_processes_share_one_data_dir(tmp_path: Path) -> None:
    ledger = Ledger()
    async with AsyncExitStack() as stack:
        clients = []
        for process in range(PROCESSES):
            params = StdioServerParameters(
                command=sys.executable,
                args=["-m", "atlas_mcp", "serve"],
                env=server_env(tmp_path, _user(process)),
            )
            clients.append(await stack.enter_async_context(Client(params)))
        deadline = time.monotonic() + scaled(8)
        with anyio.fail_after(300):
            async with anyio.create_task_group() as group:
                for process, client in enumerate(clients):
                    group.start_soon(_worker, process, client, ledger, deadline)

    rows = snapshot(database(tmp_path))
    lost = [i for i in ledger.acked if i not in rows]
    assert not lost, f"lost writes: {lost}"
    assert len(rows) == len(ledger.acked)
    assert all(rows[i]["user_id"] == user for i, (user, _) in ledger.acked.items())
    leaked = [(caller, i) for caller, i in ledger.recalled if rows[i]["user_id"] != caller]
    assert not leaked, f"recall returned other users' memories: {leaked[:5]}"
    assert integrity(database(tmp_path)) == "ok"
    print(
        f"concurrency: {PROCESSES} processes, writes checked={len(ledger.acked)}, recalls={ledger.recalls}, "
        f"cross-process visibility checks={ledger.cross_process_checks}, lost=0, leaked=0"
    )
