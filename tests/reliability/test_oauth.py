"""OAuth 2.1 resource-server mode: JWT access tokens from a configured issuer, checked against
its JWKS (a loopback server here, with a key generated for the test), mapped to memory users,
with RFC 9728 metadata and the MCP spec's WWW-Authenticate challenge."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx2
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from .http_server import free_port, http_server, mcp_session
from .test_http_security import INITIALIZE, MCP_HEADERS

ISSUER = "https://idp.example.test"
SCOPE = "memory"


def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def signing_key() -> rsa.RSAPrivateKey:
    return _key()


@pytest.fixture(scope="module")
def jwks_url(signing_key):
    public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(signing_key.public_key()))
    body = json.dumps({"keys": [public | {"kid": "k1", "use": "sig", "alg": "RS256"}]}).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200 if self.path == "/jwks.json" else 404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/jwks.json"
    server.shutdown()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, jwks_url: str):
    port = free_port()
    resource = f"http://127.0.0.1:{port}/mcp"
    config = {
        "oauth": {
            "issuer": ISSUER,
            "jwks_url": jwks_url,
            "resource_url": resource,
            "required_scopes": [SCOPE],
        }
    }
    with http_server(tmp_path_factory.mktemp("oauth"), config, log_level="DEBUG", port=port) as (base, log):
        yield base, resource, log


def _token(key, resource: str, kid: str = "k1", algorithm: str = "RS256", **claims) -> str:
    now = int(time.time())
    payload = {"iss": ISSUER, "aud": resource, "sub": "carol", "iat": now, "exp": now + 300, "scope": SCOPE}
    payload = {k: v for k, v in (payload | claims).items() if v is not None}
    return jwt.encode(payload, key, algorithm=algorithm, headers={"kid": kid})


def _post(base: str, path: str, token: str | None) -> httpx2.Response:
    headers = MCP_HEADERS | ({"Authorization": f"Bearer {token}"} if token else {})
    return httpx2.post(base + path, json=INITIALIZE, headers=headers, timeout=30)


@pytest.mark.slow
def test_protected_resource_metadata_and_challenge(server) -> None:
    base, resource, _ = server
    for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"):
        document = httpx2.get(base + path, timeout=10).json()
        assert document["resource"] == resource and document["authorization_servers"] == [ISSUER]
        assert document["scopes_supported"] == [SCOPE, "atlas:recall", "atlas:write", "atlas:forget"]
    challenge = _post(base, "/mcp", None).headers["WWW-Authenticate"]
    assert f'resource_metadata="{base}/.well-known/oauth-protected-resource/mcp"' in challenge


@pytest.mark.slow
async def test_a_valid_token_is_its_subject(server, signing_key) -> None:
    base, resource, log_path = server
    carol, dave = _token(signing_key, resource), _token(signing_key, resource, sub="dave")
    async with mcp_session(base + "/mcp", carol) as session:
        written = await session.call_tool("write_memory", {"text": "Carol keeps bees"})
        assert not written.is_error
        recalled = await session.call_tool("recall_memory", {"query": "bees"})
        assert [m["id"] for m in recalled.structured_content["memories"]] == [
            written.structured_content["id"]
        ]
    async with mcp_session(base + "/api/atlas/mcp/dave", dave) as session:
        recalled = await session.call_tool("recall_memory", {"query": "bees"})
        assert recalled.structured_content["memories"] == []
    assert _post(base, "/api/atlas/mcp/carol", dave).status_code == 403
    log = log_path.read_text()
    assert carol not in log and dave not in log and carol.split(".")[2] not in log


@pytest.mark.slow
@pytest.mark.parametrize(
    "case",
    [
        "expired",
        "wrong audience",
        "wrong issuer",
        "forged signature",
        "unknown key",
        "no subject",
        "alg none",
    ],
)
def test_bad_tokens_are_401(server, signing_key, case: str) -> None:
    base, resource, _ = server
    token = {
        "expired": lambda: _token(signing_key, resource, exp=int(time.time()) - 3600),
        "wrong audience": lambda: _token(signing_key, resource, aud="https://other.example/mcp"),
        "wrong issuer": lambda: _token(signing_key, resource, iss="https://evil.example"),
        "forged signature": lambda: _token(_key(), resource),
        "unknown key": lambda: _token(_key(), resource, kid="k2"),
        "no subject": lambda: _token(signing_key, resource, sub=None),
        "alg none": lambda: _token(None, resource, algorithm="none"),
    }[case]()
    response = _post(base, "/mcp", token)
    assert response.status_code == 401
    assert 'error="invalid_token"' in response.headers["WWW-Authenticate"]


@pytest.mark.slow
def test_missing_scope_is_403_insufficient_scope(server, signing_key) -> None:
    base, resource, _ = server
    response = _post(base, "/mcp", _token(signing_key, resource, scope="profile"))
    assert response.status_code == 403
    assert 'error="insufficient_scope"' in response.headers["WWW-Authenticate"]


@pytest.mark.slow
async def test_oauth_tool_scopes_limit_a_token_like_a_scoped_bearer_token(server, signing_key) -> None:
    """atlas:recall / atlas:write / atlas:forget in a JWT's scope limit it to those tools; a
    token with none of them (issued before tool scopes existed) may use every tool."""
    base, resource, log_path = server
    everything = _token(signing_key, resource, sub="erin")
    reader = _token(signing_key, resource, sub="erin", scope=f"{SCOPE} atlas:recall", azp="reports-app")
    async with mcp_session(base + "/mcp", everything) as session:
        tools = {t.name for t in (await session.list_tools()).tools}
        assert tools == {"recall_memory", "write_memory", "forget_memory"}
        written = await session.call_tool("write_memory", {"text": "Erin plays the cello"})
        assert not written.is_error
    async with mcp_session(base + "/mcp", reader) as session:
        assert [t.name for t in (await session.list_tools()).tools] == ["recall_memory"]
        refused = await session.call_tool("forget_memory", {"memory_id": written.structured_content["id"]})
        assert refused.is_error and "'forget'" in refused.content[0].text
        refused = await session.call_tool("write_memory", {"text": "Erin gave up the cello"})
        assert refused.is_error and "'write'" in refused.content[0].text
        found = await session.call_tool("recall_memory", {"query": "cello"})
        assert [m["text"] for m in found.structured_content["memories"]] == ["Erin plays the cello"]
    assert "oauth reports-app" in log_path.read_text() and reader not in log_path.read_text()


def test_a_token_without_tool_scopes_can_be_refused(tmp_path: Path) -> None:
    from atlas_mcp.config_tables import OAuthSettings
    from atlas_mcp.mcp.oauth import tool_scopes

    settings = OAuthSettings(
        issuer=ISSUER, jwks_url="http://x/jwks", resource_url="http://x/mcp", default_tool_scopes=[]
    )
    assert tool_scopes({"memory"}, settings) == frozenset()
    assert tool_scopes({"memory", "atlas:write", "atlas:fly"}, settings) == {"write"}


def test_oauth_settings_refuse_symmetric_algorithms(tmp_path: Path) -> None:
    from atlas_mcp.config_tables import OAuthSettings

    with pytest.raises(ValueError, match="asymmetric"):
        OAuthSettings(
            issuer=ISSUER, jwks_url="http://x/jwks", resource_url="http://x/mcp", algorithms=["HS256"]
        )
    with pytest.raises(ValueError, match="jwks_url"):
        OAuthSettings(issuer=ISSUER)
