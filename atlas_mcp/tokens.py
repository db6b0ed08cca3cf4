"""HTTP bearer tokens: making a good one, and refusing the ones anybody could guess."""

from __future__ import annotations

import hashlib
import secrets

from .scopes import fingerprint

MIN_TOKEN_CHARS = 16
# Tokens printed in this project's docs, examples and older example configs, plus the few
# everybody tries first: a server that accepts one of these is open to anyone who read them.
EXAMPLE_TOKENS = (
    "password", "secret", "s3cret", "token", "changeme", "change-me", "change-me-sarah",
    "change-me-james", "pick-another", "pick-one", "test", "admin",
)  # fmt: skip
EXAMPLE_DIGESTS = frozenset(hashlib.sha256(t.encode()).hexdigest() for t in EXAMPLE_TOKENS)

HOW_TO_MAKE_ONE = "make one with `atlas-mcp users token {user}` and add the lines it prints to the config"


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> tuple[str, str]:
    """A fresh random token (256 bits, URL-safe) and its sha256, for ``token_sha256``."""
    token = secrets.token_urlsafe(32)
    return token, digest(token)


def weakness(token: str | None, token_sha256: str | None) -> str | None:
    """Why a configured credential must not be served, or None when it may be."""
    if token is not None and len(token) < MIN_TOKEN_CHARS:
        return f"its token is shorter than {MIN_TOKEN_CHARS} characters"
    stored = (token_sha256 or "").strip().lower() or (digest(token) if token else "")
    if stored in EXAMPLE_DIGESTS:
        return "its token is a well-known example"
    return None


def credential_name(name: str, token_digest: str) -> str:
    """How logs and the audit name a configured token: its name and fingerprint, never the token."""
    return f"{name} ({fingerprint(token_digest)})"
