"""HTTP hardening, against a real ``atlas-mcp serve --transport http`` subprocess: bearer auth on
both routes, Host/Origin checks (DNS rebinding), body-size limit, sessions bound to their user,
per-user rate limit, and no secret in the logs."""

from __future__ import annotations

import hashlib
from pathlib import Path

import httpx2
import pytest
from mcp_types.version import LATEST_HANDSHAKE_VERSION

from atlas_mcp.config import Settings

from .http_server import http_server, mcp_session

TOKENS = {"alice": "alice-token-5f2c9a", "bob": "bob-token-81d0e7"}
ES_KEY = "es-api-key-c0ffee42"
MAX_BODY = 64 * 1024
ROUTES = ("/mcp", "/api/atlas/mcp/alice")
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": LATEST_HANDSHAKE_VERSION,
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _config(**extra) -> dict:
    users = {
        "alice": {"token": TOKENS["alice"]},
        "bob": {"token_sha256": hashlib.sha256(TOKENS["bob"].encode()).hexdigest()},
    }
    config = {"users": users, "max_request_bytes": MAX_BODY} | extra  # bob's token is stored hashed
    if "elasticsearch" in Settings.model_fields:  # a configured ES key must never reach the log either
        config["elasticsearch"] = {"api_key": ES_KEY}
    return config


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    with http_server(tmp_path_factory.mktemp("http"), _config(), log_level="DEBUG") as running:
        yield running


def _post(base: str, path: str, token: str | None = "alice", body=None, **headers: str) -> httpx2.Response:
    if token is not None:
        headers["Authorization"] = f"Bearer {TOKENS.get(token, token)}"
    return httpx2.post(
        base + path, json=INITIALIZE if body is None else body, headers=MCP_HEADERS | headers, timeout=30
    )


@pytest.mark.slow
@pytest.mark.parametrize("route", ROUTES)
def test_no_or_wrong_token_is_401_with_a_challenge(server, route: str) -> None:
    base, _ = server
    for token in (None, "not-a-token", TOKENS["alice"] + "x"):
        response = _post(base, route, token)
        assert response.status_code == 401
        assert response.headers["WWW-Authenticate"].startswith("Bearer")
    assert _post(base, "/api/atlas/mcp/bob", "alice").status_code == 403
    assert _post(base, route, "alice").status_code == 200


@pytest.mark.slow
@pytest.mark.parametrize("route", ROUTES)
def test_host_and_origin_are_checked_on_every_route(server, route: str) -> None:
    base, _ = server
    assert _post(base, route, Host="evil.example:80").status_code == 421
    assert _post(base, route, Origin="http://evil.example").status_code == 403
    assert _post(base, route, Origin="http://localhost:3000").status_code == 200


@pytest.mark.slow
@pytest.mark.parametrize("route", ROUTES)
def test_oversized_bodies_are_413(server, route: str) -> None:
    base, _ = server
    padded = INITIALIZE | {"params": INITIALIZE["params"] | {"padding": "x" * MAX_BODY}}
    assert _post(base, route, body=padded).status_code == 413
    # An honest Content-Length is not needed: a chunked body is counted as it streams in.
    chunks = (b"x" * 8192 for _ in range(MAX_BODY // 8192 + 2))
    response = httpx2.post(
        base + route, content=chunks, timeout=30,
        headers=MCP_HEADERS | {"Authorization": f"Bearer {TOKENS['alice']}"},
    )  # fmt: skip
    assert response.status_code == 413


@pytest.mark.slow
def test_a_session_only_answers_the_user_who_opened_it(server) -> None:
    base, _ = server
    opened = _post(base, "/mcp", "alice")
    session = opened.headers["mcp-session-id"]
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    headers = {"mcp-session-id": session, "mcp-protocol-version": LATEST_HANDSHAKE_VERSION}
    assert _post(base, "/mcp", "bob", body=listing, **headers).status_code == 404
    assert _post(base, "/mcp", "alice", body=listing, **headers).status_code == 200


@pytest.mark.slow
async def test_users_are_isolated_and_secrets_never_logged(server) -> None:
    base, log_path = server
    async with mcp_session(base + "/mcp", TOKENS["alice"]) as alice:
        written = await alice.call_tool("write_memory", {"text": "Alice's safe code is 1234"})
        assert not written.is_error
    async with mcp_session(base + "/api/atlas/mcp/bob", TOKENS["bob"]) as bob:
        recalled = await bob.call_tool("recall_memory", {"query": "Alice's safe code"})
        assert not recalled.is_error and recalled.structured_content["memories"] == []
        forgot = await bob.call_tool("forget_memory", {"memory_id": written.structured_content["id"]})
        assert forgot.is_error and "not found" in forgot.content[0].text
    log = log_path.read_text()
    assert "http_denied" in log  # the earlier 401s were logged, at DEBUG level everything is on
    for secret in (*TOKENS.values(), ES_KEY, "Bearer alice", "not-a-token"):
        assert secret not in log, f"{secret!r} leaked into the server log"


@pytest.mark.slow
def test_rate_limit_is_per_user(tmp_path: Path) -> None:
    with http_server(tmp_path, _config(rate_limit_per_minute=60, rate_limit_burst=5)) as (base, _):
        statuses = [_post(base, "/mcp", "alice").status_code for _ in range(8)]
        assert statuses[:5] == [200] * 5
        limited = _post(base, "/mcp", "alice")
        assert limited.status_code == 429 and int(limited.headers["Retry-After"]) >= 1
        assert _post(base, "/mcp", "bob").status_code == 200  # another user's budget is untouched
        assert httpx2.get(base + "/healthz").status_code == 200
