"""Streamable HTTP: the MCP endpoint behind bearer tokens, plus a health check.

Routes:
    /mcp                         identity = the user whose token was presented
    /api/atlas/mcp/{user_id}     the path's user must be the token's user, else 403
    /healthz                     200, no auth
    /inspect/...                 the web inspector (when given the service): same tokens, as a
                                 header or through its sign-in form's cookie

Tokens are compared as sha256 digests with ``hmac.compare_digest`` against every configured
user, so neither the token nor the timing reveals which user almost matched. With ``[oauth]``,
JWT access tokens from the configured issuer are accepted too (``oauth.py``) and the RFC 9728
metadata is served at ``/.well-known/oauth-protected-resource...``. Every authenticated user
has a request budget (``ratelimit.py``), and each MCP session is bound to the user who opened
it, so a leaked session id is useless with another credential.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.mcpserver import MCPServer
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from ..caller import SCOPE_GRANT_KEY, SCOPE_USER_KEY
from ..config import LOOPBACK_HOSTS, Settings
from ..inspector import mount_inspector
from ..log import get_logger
from ..scopes import Grant
from ..service import MemoryService
from .oauth import WELL_KNOWN, JwtVerifier, Rejection, metadata, metadata_path, metadata_url
from .ratelimit import RateLimiter

MCP_PATH = "/mcp"
USER_PATH_PREFIX = "/api/atlas/mcp/"
PUBLIC_PATHS = frozenset({"/healthz"})
log = get_logger(__name__)


class TokenTable:
    def __init__(self, grants: Mapping[str, Grant]) -> None:
        self._grants = dict(grants)  # sha256 hex -> who the token names and what it may do

    def grant_for(self, token: str) -> Grant | None:
        presented = hashlib.sha256(token.encode()).hexdigest()
        found = None
        for digest, grant in self._grants.items():  # no early exit: constant work per request
            if hmac.compare_digest(presented, digest):
                found = grant
        return found

    def user_for(self, token: str) -> str | None:
        grant = self.grant_for(token)
        return grant.user if grant is not None else None


class BearerAuth:
    """ASGI middleware: verify the bearer token, stamp the user on the scope, check path users."""

    def __init__(
        self,
        app: ASGIApp,
        tokens: TokenTable | None,
        anonymous: Grant,
        verifier: JwtVerifier | None = None,
        limiter: RateLimiter | None = None,
        challenge: str = 'Bearer realm="atlas-mcp"',
    ) -> None:
        self.app = app
        self.tokens = tokens  # None = --insecure-no-auth (loopback only)
        self.anonymous = anonymous  # who a request is under --insecure-no-auth
        self.verifier = verifier  # JWTs from the [oauth] issuer, checked after static tokens
        self.limiter = limiter
        self.challenge = challenge

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in PUBLIC_PATHS or scope["path"].startswith(WELL_KNOWN):
            return await self.app(scope, receive, send)
        grant = await self._authenticate(scope)
        if isinstance(grant, Rejection):
            challenge = f'{self.challenge}, error="{grant.error}", error_description="{grant.description}"'
            return await _deny(scope, receive, send, grant.status, grant.description, challenge)
        if grant is None:
            return await _deny(scope, receive, send, 401, "missing or invalid bearer token", self.challenge)
        user = grant.user
        path_user = _path_user(scope["path"])
        if path_user is not None and path_user != user:
            return await _deny(scope, receive, send, 403, "this token does not belong to that user")
        if self.limiter is not None and (wait := self.limiter.retry_after(user)) is not None:
            return await _throttle(scope, receive, send, wait)
        scope[SCOPE_USER_KEY] = user
        scope[SCOPE_GRANT_KEY] = grant
        # The SDK binds each MCP session to the user who opened it (404 for anyone else). What a
        # request may do is its own credential's grant, checked on every request (``access.py``).
        scope["user"] = AuthenticatedUser(AccessToken(token="", client_id=user, scopes=[], subject=user))
        await self.app(scope, receive, send)

    async def _authenticate(self, scope: Scope) -> Grant | Rejection | None:
        if self.tokens is None:
            path_user = _path_user(scope["path"])
            return replace(self.anonymous, user=path_user) if path_user else self.anonymous
        header = dict(scope["headers"]).get(b"authorization", b"").decode("latin-1")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        grant = self.tokens.grant_for(token.strip())
        if grant is None and self.verifier is not None:
            return await self.verifier.verify(token.strip())
        return grant


def _path_user(path: str) -> str | None:
    if not path.startswith(USER_PATH_PREFIX):
        return None
    return path[len(USER_PATH_PREFIX) :].strip("/") or None


async def _deny(
    scope: Scope, receive: Receive, send: Send, status: int, message: str, challenge: str | None = None
) -> None:
    log.info("http_denied", status=status, path=scope["path"])
    headers = {"WWW-Authenticate": challenge} if challenge else None
    await JSONResponse({"error": message}, status_code=status, headers=headers)(scope, receive, send)


async def _throttle(scope: Scope, receive: Receive, send: Send, retry_after: int) -> None:
    log.warning("http_rate_limited", path=scope["path"], retry_after=retry_after)
    body = {"error": f"too many requests for this user; retry in {retry_after} s"}
    headers = {"Retry-After": str(retry_after)}
    await JSONResponse(body, status_code=429, headers=headers)(scope, receive, send)


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


def build_http_app(server: MCPServer, settings: Settings, service: MemoryService | None = None) -> Starlette:
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
    tokens = None if settings.insecure_no_auth else TokenTable(settings.token_grants())
    app.add_middleware(
        BearerAuth, tokens=tokens, anonymous=settings.stdio_grant(), **_auth_options(app, settings)
    )
    if service is not None:  # after BearerAuth: the inspector's gate must run before it
        mount_inspector(app, service, tokens.user_for if tokens else None)
    return app


def _auth_options(app: Starlette, settings: Settings) -> dict[str, Any]:
    """Rate limit and, with ``[oauth]``, the JWT verifier, its metadata route and 401 challenge."""
    options: dict[str, Any] = {}
    if settings.rate_limit_per_minute:
        options["limiter"] = RateLimiter(settings.rate_limit_per_minute, settings.rate_limit_burst)
    oauth = settings.oauth
    if oauth.enabled and not settings.insecure_no_auth:
        document = metadata(oauth)

        async def protected_resource(_request: Request) -> JSONResponse:
            return JSONResponse(document)

        for path in {WELL_KNOWN, metadata_path(oauth)}:
            app.add_route(path, protected_resource, methods=["GET"])
        options["verifier"] = JwtVerifier(oauth)
        options["challenge"] = f'Bearer realm="atlas-mcp", resource_metadata="{metadata_url(oauth)}"'
    return options


def describe(settings: Settings) -> dict[str, Any]:
    """What the server prints at start-up (never the tokens themselves)."""
    return {
        "url": f"http://{settings.host}:{settings.port}{MCP_PATH}",
        "users": sorted(settings.users),
        "auth": "none (loopback only)" if settings.insecure_no_auth else "bearer",
        "oauth_issuer": settings.oauth.issuer,
    }
