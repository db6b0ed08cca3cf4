"""32 concurrent HTTP sessions of 8 users against one server: every session sees its user's
writes and only its user's memories, under load."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from .conftest import database, scaled, snapshot
from .http_server import http_server, mcp_session

USERS = [f"user{n}" for n in range(8)]
SESSIONS = 32


def _token(user: str) -> str:
    return f"{user}-secret-token"


@pytest.mark.slow
async def test_32_sessions_of_mixed_users_stay_isolated(tmp_path: Path) -> None:
    rounds = scaled(4)
    config = {"users": {u: {"token": _token(u)} for u in USERS}, "rate_limit_per_minute": 0}
    written: dict[str, str] = {}  # id -> user
    recalled: list[tuple[str, str]] = []  # (caller, id)

    async def session(number: int) -> None:
        user = USERS[number % len(USERS)]
        route = "/mcp" if number % 2 else f"/api/atlas/mcp/{user}"
        async with mcp_session(base + route, _token(user)) as client:
            for n in range(rounds):
                codeword = f"qk{number}v{n}z"
                result = await client.call_tool("write_memory", {"text": f"{user} noted {codeword}"})
                assert not result.is_error, result.content
                new_id = result.structured_content["id"]
                written[new_id] = user
                result = await client.call_tool("recall_memory", {"query": codeword, "k": 10})
                assert not result.is_error, result.content
                ids = [m["id"] for m in result.structured_content["memories"]]
                assert new_id in ids, "a session did not see its own write"
                recalled.extend((user, i) for i in ids)

    with http_server(tmp_path, config) as (base, _):
        with anyio.fail_after(300):
            async with anyio.create_task_group() as group:
                for number in range(SESSIONS):
                    group.start_soon(session, number)

    rows = snapshot(database(tmp_path))
    assert all(rows[i]["user_id"] == user for i, user in written.items()), "a write landed on another user"
    leaked = [(caller, i) for caller, i in recalled if rows[i]["user_id"] != caller]
    assert not leaked, f"recall crossed users: {leaked[:5]}"
    assert len(written) == SESSIONS * rounds == len(rows)
    print(
        f"http load: {SESSIONS} sessions, {len(USERS)} users, writes={len(written)}, "
        f"recall hits checked={len(recalled)}, lost=0, leaked=0"
    )
