"""OAuth 2.1 resource-server mode: accept JWT access tokens from the operator's identity provider.

Follows the MCP authorization spec: the server publishes RFC 9728 protected-resource metadata
naming its authorization server, answers ``401`` with ``WWW-Authenticate: Bearer
resource_metadata=...`` so clients can discover where to get a token, and accepts only tokens
whose issuer, audience (this resource), signature (the issuer's JWKS), expiry and scopes check
out. The configured claim (``sub`` by default) becomes the memory user. Tokens are never logged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import anyio.to_thread
import jwt

from ..config_tables import OAuthSettings
from ..errors import ConfigurationError
from ..log import get_logger
from ..scopes import ALL, SCOPES, Grant
from ..tokens import credential_name, digest

WELL_KNOWN = "/.well-known/oauth-protected-resource"
_USER = re.compile(r"^[^\x00-\x1f\x7f]{1,256}$")
log = get_logger(__name__)


def metadata_path(settings: OAuthSettings) -> str:
    """RFC 9728 §3.1: the well-known prefix inserted before the resource's path."""
    return WELL_KNOWN + urlsplit(settings.resource_url or "").path.rstrip("/")


def metadata_url(settings: OAuthSettings) -> str:
    parts = urlsplit(settings.resource_url or "")
    return f"{parts.scheme}://{parts.netloc}{metadata_path(settings)}"


def metadata(settings: OAuthSettings) -> dict[str, Any]:
    """The protected-resource metadata document clients discover the issuer from."""
    document: dict[str, Any] = {
        "resource": settings.resource_url,
        "authorization_servers": [settings.issuer],
        "bearer_methods_supported": ["header"],
        "resource_name": "atlas-mcp long-term memory",
    }
    tool_scopes = [settings.tool_scope_prefix + s for s in SCOPES]
    document["scopes_supported"] = [*settings.required_scopes, *tool_scopes]
    return document


@dataclass(frozen=True, slots=True)
class Rejection:
    status: int  # 401 invalid_token, 403 insufficient_scope
    error: str
    description: str


class JwtVerifier:
    def __init__(self, settings: OAuthSettings) -> None:
        if not settings.jwks_url:  # OAuthSettings refuses an enabled issuer without one
            raise ConfigurationError("[oauth] issuer needs jwks_url")
        self.settings = settings
        self._keys = jwt.PyJWKClient(
            settings.jwks_url, cache_keys=True, lifespan=settings.jwks_cache_s, timeout=10
        )

    async def verify(self, token: str) -> Grant | Rejection:
        """The user a valid access token names and the tools it may use, or why it is refused."""
        try:
            claims = await anyio.to_thread.run_sync(self._decode, token)
        except jwt.PyJWKClientError as exc:
            log.warning("oauth_jwks_unavailable", reason=type(exc).__name__)
            return Rejection(401, "invalid_token", "the token's signing key could not be found")
        except jwt.InvalidTokenError as exc:
            log.info("oauth_token_rejected", reason=type(exc).__name__)
            return Rejection(401, "invalid_token", "the access token is invalid or expired")
        held = _scopes(claims)
        missing = [s for s in self.settings.required_scopes if s not in held]
        if missing:
            return Rejection(403, "insufficient_scope", f"the token lacks scope {' '.join(missing)}")
        tools = tool_scopes(held, self.settings)
        if not tools:
            wanted = " or ".join(self.settings.tool_scope_prefix + s for s in SCOPES)
            return Rejection(403, "insufficient_scope", f"the token carries none of the scopes {wanted}")
        user = claims.get(self.settings.user_claim)
        if not isinstance(user, str) or not _USER.match(user):
            return Rejection(
                401, "invalid_token", f"the token has no usable {self.settings.user_claim!r} claim"
            )
        client = claims.get("azp") or claims.get("client_id")
        name = f"oauth {client}" if isinstance(client, str) and _USER.match(client) else "oauth"
        return Grant(user, tools, credential_name(name, digest(token)))

    def _decode(self, token: str) -> dict[str, Any]:
        s = self.settings
        key = self._keys.get_signing_key_from_jwt(token)
        return jwt.decode(
            token,
            key.key,
            algorithms=s.algorithms,
            audience=s.audience or s.resource_url,
            issuer=s.issuer,
            leeway=s.leeway_s,
            options={"require": ["exp", "iss", "aud"]},
        )


def tool_scopes(held: set[str], settings: OAuthSettings) -> frozenset[str]:
    """The tools a token may use: its prefixed tool scopes (``atlas:recall``...), or, when it
    carries none, the configured default (all, so tokens issued before scopes keep working)."""
    prefix = settings.tool_scope_prefix
    named = {s[len(prefix) :] for s in held if s.startswith(prefix)} & ALL
    return frozenset(named) if named else frozenset(settings.default_tool_scopes)


def _scopes(claims: dict[str, Any]) -> set[str]:
    scope = claims.get("scope", claims.get("scp", ""))
    return set(scope.split()) if isinstance(scope, str) else {s for s in scope if isinstance(s, str)}
