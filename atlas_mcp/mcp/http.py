"""Streamable HTTP: the MCP endpoint behind bearer tokens, plus a health check.

Routes:
    /mcp                         identity = the user whose token was presented
    /api/atlas/mcp/{user_id}     the path's user must be the token's user, else 403
    /healthz                     200, no auth
    /inspect/...                 the web inspector (when given the service): same tokens, as a
                                 header or through its sign-in form's cookie

Tokens are compared as sha256 digests with ``hmac.compare_digest`` against every configured
user, so neither the token nor the timing reveals which user almost matched.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from ..config import LOOPBACK_HOSTS, Settings
from ..inspector import mount_inspector
from ..log import get_logger
from ..service import MemoryService
from .identity import SCOPE_USER_KEY

MCP_PATH = "/mcp"
USER_PATH_PREFIX = "/api/atlas/mcp/"
PUBLIC_PATHS = frozenset({"/healthz"})
log = get_logger(__name__)


class TokenTable:
    def __init__(self, digests: Mapping[str, str]) -> None:
        self._digests = dict(digests)  # sha256 hex -> user id

    def user_for(self, token: str) -> str | None:
        presented = hashlib.sha256(token.encode()).hexdigest()
        found = None
        for digest, user in self._digests.items():  # no early exit: constant work per request
            if hmac.compare_digest(presented, digest):
                found = user
        return found


class BearerAuth:
    """ASGI middleware: verify the bearer token, stamp the user on the scope, check path users."""

    def __init__(self, app: ASGIApp, tokens: TokenTable | None, anonymous_user: str) -> None:
        self.app = app
        self.tokens = tokens  # None = --insecure-no-auth (loopback only)
        self.anonymous_user = anonymous_user

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in PUBLIC_PATHS:
            return await self.app(scope, receive, send)
        user = self._authenticate(scope)
        if user is None:
            return await _deny(scope, receive, send, 401, "missing or invalid bearer token")
        path_user = _path_user(scope["path"])
        if path_user is not None and path_user != user:
            return await _deny(scope, receive, send, 403, "this token does not belong to that user")
        scope[SCOPE_USER_KEY] = user
        await self.app(scope, receive, send)

    def _authenticate(self, scope: Scope) -> str | None:
        if self.tokens is None:
            return _path_user(scope["path"]) or self.anonymous_user
        header = dict(scope["headers"]).get(b"authorization", b"").decode("latin-1")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        return self.tokens.user_for(token.strip())


def _path_user(path: str) -> str | None:
    if not path.startswith(USER_PATH_PREFIX):
        return None
    return path[len(USER_PATH_PREFIX) :].strip("/") or None


async def _deny(scope: Scope, receive: Receive, send: Send, status: int, message: str) -> None:
    log.info("http_denied", status=status, path=scope["path"])
    headers = {"WWW-Authenticate": 'Bearer realm="atlas-mcp"'} if status == 401 else None
    await JSONResponse({"error": message}, status_code=status, headers=headers)(scope, receive, send)


def transport_security(settings: Settings) -> TransportSecuritySettings:
    """Host/Origin checks against DNS rebinding (required by the MCP transport spec)."""
    hosts = list(settings.allowed_hosts)
    origins = list(settings.allowed_origins)
    if not hosts and settings.host in LOOPBACK_HOSTS:
        hosts = ["127.0.0.1:*", "localhost:*", "[::1]:*"]
        origins = origins or ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]
    if not hosts:
        log.warning("dns_rebinding_protection_off", reason="no allowed_hosts for a non-loopback bind")
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    return TransportSecuritySettings(allowed_hosts=hosts, allowed_origins=origins)


async def healthz(_request: Request) -> JSONResponse:
    return JSONResponse({"status": "ok"})


def build_http_app(
    server: MCPServer, settings: Settings, service: MemoryService | None = None
) -> Starlette:
    server.streamable_http_app(  # builds the session manager we mount below
        streamable_http_path=MCP_PATH,
        transport_security=transport_security(settings),
        host=settings.host,
        max_request_body_size=settings.max_request_bytes,
    )
    manager = server.session_manager
    endpoint = StreamableHTTPASGIApp(manager)
    app = Starlette(
        routes=[
            Route("/healthz", healthz, methods=["GET"]),
            Route(MCP_PATH, endpoint=endpoint),
            Route(USER_PATH_PREFIX + "{user_id}", endpoint=endpoint),
        ],
        lifespan=lambda _app: manager.run(),
    )
    tokens = None if settings.insecure_no_auth else TokenTable(settings.token_digests())
    app.add_middleware(BearerAuth, tokens=tokens, anonymous_user=settings.user)
    if service is not None:  # after BearerAuth: the inspector's gate must run before it
        mount_inspector(app, service, tokens.user_for if tokens else None)
    return app


def describe(settings: Settings) -> dict[str, Any]:
    """What the server prints at start-up (never the tokens themselves)."""
    return {
        "url": f"http://{settings.host}:{settings.port}{MCP_PATH}",
        "users": sorted(settings.users),
        "auth": "none (loopback only)" if settings.insecure_no_auth else "bearer",
    }

